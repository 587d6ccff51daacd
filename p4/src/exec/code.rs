//! The lowered program compiled to closures, once, when a datapath is made: every statement
//! and expression becomes a closure that does its work and calls its parts' closures directly.
//! A packet's pass then never matches on what kind of node comes next; that dispatch, one
//! mispredicted jump per node through a shared table, took half of a tree-walking
//! interpreter's time. The shapes packets meet most (a slot, a bit of a slot, an operator with
//! a constant, an `if` on one bit) get closures of their own.

use super::layout::HeaderLayout;
use super::run::{Flow, Run};
use crate::ir::ops;
use crate::ir::{
    Binary, BlockBody, BlockKind, CaseMatch, Expr, Extern, HeaderRef, ListItem, Next, Op, Place, Program, Slot,
    StackRef, Target, mask,
};

/// A compiled expression.
pub(super) type Value = Box<dyn Fn(&mut Run<'_>) -> u128 + Send + Sync>;

/// A compiled statement.
type Stmt = Box<dyn Fn(&mut Run<'_>) -> Flow + Send + Sync>;

/// Most passes of one loop in one packet's run: a P4 loop ends, but a program's bug must not
/// hold a worker for ever.
const MAX_LOOP_PASSES: u32 = 1 << 20;

/// Statements run in order until one ends the block.
pub(super) struct Block(Box<[Stmt]>);

impl Block {
    /// Runs the statements; the first that does not continue ends the block, and so does a
    /// lookahead past the frame's end (the parser state then rejects; nothing after it runs).
    #[inline]
    pub(super) fn run(&self, r: &mut Run<'_>) -> Flow {
        for s in self.0.iter() {
            let f = s(r);
            if f != Flow::Next {
                return f;
            }
            if r.ran_short() {
                return Flow::Reject;
            }
        }
        Flow::Next
    }
}

/// A place to write, its run-time parts compiled.
pub(super) enum CPlace {
    /// A slot and the mask of its width.
    Slot(Slot, u128),
    /// A slot `offset` into an element of a stack chosen at run time: the index, the offset,
    /// the mask.
    Element(StackRef, Value, u32, u128),
    /// Bits from `lo` of a place: the place, `lo`, the mask of the slice's width.
    Slice(Box<CPlace>, u16, u128),
}

/// A header a statement acts on, its run-time parts compiled.
pub(super) enum CHeader {
    /// At a fixed base slot.
    Fixed(Slot),
    /// `offset` slots into a stack element chosen at run time.
    Element(StackRef, Value, u32),
    /// A header `offset` into the stack's `next` element.
    Next(StackRef, u32),
}

/// Where a field list item's value comes from.
pub(super) enum ItemSource {
    /// A slot, read directly (a header's field: nearly every item of a checksum's list).
    Slot(Slot),
    /// Any other expression.
    Value(Value),
}

/// One item of a field list.
pub(super) struct CItem {
    pub(super) source: ItemSource,
    pub(super) width: u16,
    /// Skipped when this validity slot is 0.
    pub(super) valid: Option<Slot>,
    /// A varbit: `source` is its length slot, its bits follow.
    pub(super) varbit: bool,
}

/// An extern call, its arguments compiled.
pub(super) type CExtern = Extern<Value, CPlace, CItem>;

/// A parser state.
pub(super) struct CState {
    pub(super) name: String,
    pub(super) ops: Block,
    pub(super) next: CNext,
}

/// Where a parser state goes.
pub(super) enum CNext {
    To(Target),
    Select {
        keys: Box<[Value]>,
        cases: Box<[(CaseMatch, Target)]>,
    },
}

/// A block of the pipeline, compiled.
pub(super) enum CBlock {
    Parser(Box<[CState]>),
    Control(Block),
}

/// A whole program, compiled.
pub(super) struct Code {
    /// The blocks, in the program's order.
    blocks: Box<[(BlockKind, CBlock)]>,
    /// Action bodies, by action index.
    pub(super) actions: Box<[Block]>,
    /// Each table's key computation and key expressions, by table index.
    pub(super) keys: Box<[(Block, Box<[Value]>)]>,
    /// Each table's selector keys, by table index.
    pub(super) selector_keys: Box<[Box<[CItem]>]>,
    /// Each header type's layout, by header type index.
    pub(super) layouts: Box<[HeaderLayout]>,
    /// An empty block, for the controls a program lacks.
    empty: Block,
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Code({} blocks, {} actions, {} tables)",
            self.blocks.len(),
            self.actions.len(),
            self.keys.len()
        )
    }
}

impl Code {
    /// Compiles `p`.
    pub(super) fn of(p: &Program) -> Code {
        let c = Compiler { p };
        Code {
            blocks: p
                .blocks
                .iter()
                .map(|b| {
                    let body = match &b.body {
                        BlockBody::Parser(states) => CBlock::Parser(states.iter().map(|s| c.state(s)).collect()),
                        BlockBody::Control(ops) => CBlock::Control(c.block(ops)),
                    };
                    (b.kind, body)
                })
                .collect(),
            actions: p.actions.iter().map(|a| c.block(&a.body)).collect(),
            keys: p
                .tables
                .iter()
                .map(|t| (c.block(&t.prep), t.keys.iter().map(|k| c.value(&k.expr)).collect()))
                .collect(),
            selector_keys: p
                .tables
                .iter()
                .map(|t| {
                    let items: Vec<ListItem> = t
                        .selector_keys
                        .iter()
                        .map(|(e, w)| ListItem {
                            value: e.clone(),
                            width: *w,
                            valid: None,
                            varbit: false,
                        })
                        .collect();
                    c.items(&items)
                })
                .collect(),
            layouts: p.headers.iter().map(HeaderLayout::new).collect(),
            empty: Block(Box::new([])),
        }
    }

    /// The code of control `kind` (empty when the program has none).
    pub(super) fn control(&self, kind: BlockKind) -> &Block {
        self.blocks
            .iter()
            .find_map(|(k, b)| match b {
                CBlock::Control(b) if *k == kind => Some(b),
                _ => None,
            })
            .unwrap_or(&self.empty)
    }

    /// The states of parser `kind` (none when the program has none).
    pub(super) fn parser(&self, kind: BlockKind) -> &[CState] {
        self.blocks
            .iter()
            .find_map(|(k, b)| match b {
                CBlock::Parser(s) if *k == kind => Some(&s[..]),
                _ => None,
            })
            .unwrap_or(&[])
    }
}

struct Compiler<'p> {
    p: &'p Program,
}

/// Builds a [`Value`] that applies `f` to `e`'s value, reading `e` inline when it is a slot or
/// bits of one (each use of this is a closure type of its own, so its branches stay predictable).
fn with_leaf<F>(c: &Compiler<'_>, e: &Expr, f: F) -> Value
where
    F: Fn(u128) -> u128 + Send + Sync + 'static,
{
    match *e {
        Expr::Slot(s) => {
            let s = s as usize;
            Box::new(move |r| f(r.st.slots[s]))
        }
        Expr::SlotBits(s, lo, w) => {
            let (s, m) = (s as usize, mask(w));
            Box::new(move |r| f((r.st.slots[s] >> lo) & m))
        }
        _ => {
            let a = c.value(e);
            Box::new(move |r| {
                let v = a(r);
                f(v)
            })
        }
    }
}

/// Builds a [`Value`] that applies `f` to two values, the left one first.
fn with_two<F>(c: &Compiler<'_>, a: &Expr, b: &Expr, f: F) -> Value
where
    F: Fn(u128, u128) -> u128 + Send + Sync + 'static,
{
    match (a, b) {
        (&Expr::Slot(x), &Expr::Slot(y)) => {
            let (x, y) = (x as usize, y as usize);
            Box::new(move |r| f(r.st.slots[x], r.st.slots[y]))
        }
        (&Expr::Slot(x), _) => {
            let (x, b) = (x as usize, c.value(b));
            Box::new(move |r| {
                let v = r.st.slots[x];
                f(v, b(r))
            })
        }
        // A sum of bits of a slot (`w + (bit<8>) ins[3:3] + ...`): the right one read inline.
        (_, &Expr::SlotBits(y, lo, w)) => {
            let (a, y, m) = (c.value(a), y as usize, mask(w));
            Box::new(move |r| {
                let v = a(r);
                f(v, (r.st.slots[y] >> lo) & m)
            })
        }
        (_, &Expr::Slot(y)) => {
            let (a, y) = (c.value(a), y as usize);
            Box::new(move |r| {
                let v = a(r);
                f(v, r.st.slots[y])
            })
        }
        _ => {
            let (a, b) = (c.value(a), c.value(b));
            Box::new(move |r| {
                let v = a(r);
                f(v, b(r))
            })
        }
    }
}

/// Builds a statement that runs `then` when `test` holds, else `otherwise`.
fn if_stmt<T>(test: T, then: Block, otherwise: Block) -> Stmt
where
    T: Fn(&mut Run<'_>) -> bool + Send + Sync + 'static,
{
    Box::new(move |r| if test(r) { then.run(r) } else { otherwise.run(r) })
}

impl Compiler<'_> {
    fn block(&self, ops: &[Op]) -> Block {
        Block(ops.iter().map(|op| self.stmt(op)).collect())
    }

    fn state(&self, s: &crate::ir::State) -> CState {
        CState {
            name: s.name.clone(),
            ops: self.block(&s.ops),
            next: match &s.next {
                Next::To(t) => CNext::To(*t),
                Next::Select { keys, cases } => CNext::Select {
                    keys: keys.iter().map(|k| self.value(k)).collect(),
                    cases: cases.iter().cloned().collect(),
                },
            },
        }
    }

    fn stmt(&self, op: &Op) -> Stmt {
        match op {
            Op::Set(..) | Op::Copy(..) | Op::CopyHeader(..) | Op::SetValid(..) => self.assignment(op),
            Op::Extract(..)
            | Op::ExtractVar(..)
            | Op::Advance(_)
            | Op::Verify(..)
            | Op::Reject(_)
            | Op::Emit(..)
            | Op::PushFront(..)
            | Op::PopFront(..) => self.packet_stmt(op),
            Op::If(c, t, f) => self.if_of(c, self.block(t), self.block(f)),
            Op::Switch(on, cases, default) => {
                let on = self.value(on);
                let cases: Box<[(Box<[u128]>, Block)]> =
                    cases.iter().map(|(v, b)| (v.clone().into(), self.block(b))).collect();
                let default = self.block(default);
                Box::new(move |r| {
                    let v = on(r);
                    cases
                        .iter()
                        .find(|c| c.0.contains(&v))
                        .map_or(&default, |c| &c.1)
                        .run(r)
                })
            }
            Op::Apply { table, hit, action_run } => {
                let (t, hit, run) = (*table, hit.map(|s| s as usize), action_run.map(|s| s as usize));
                Box::new(move |r| {
                    let (h, action, flow) = r.apply(t);
                    if let Some(s) = hit {
                        r.st.slots[s] = u128::from(h);
                    }
                    if let Some(s) = run {
                        r.st.slots[s] = action as u128;
                    }
                    flow
                })
            }
            Op::Scope { body, copy_out } => {
                let (body, copy_out) = (self.block(body), self.block(copy_out));
                Box::new(move |r| {
                    let f = body.run(r);
                    copy_out.run(r);
                    match f {
                        Flow::Exit | Flow::Reject => f,
                        _ => Flow::Next,
                    }
                })
            }
            Op::Loop {
                prep,
                cond,
                body,
                update,
            } => {
                let (prep, cond, body, update) =
                    (self.block(prep), self.value(cond), self.block(body), self.block(update));
                Box::new(move |r| {
                    for _ in 0..MAX_LOOP_PASSES {
                        match prep.run(r) {
                            Flow::Next => {}
                            f => return f,
                        }
                        if cond(r) == 0 {
                            return Flow::Next;
                        }
                        match body.run(r) {
                            Flow::Next | Flow::Continue => {}
                            Flow::Break => return Flow::Next,
                            f => return f,
                        }
                        match update.run(r) {
                            Flow::Next | Flow::Continue => {}
                            Flow::Break => return Flow::Next,
                            f => return f,
                        }
                    }
                    tracing::warn!(target: "p4", switch = %r.dp.name, "a loop ran {MAX_LOOP_PASSES} times: stopped");
                    Flow::Next
                })
            }
            Op::Break => Box::new(|_| Flow::Break),
            Op::Continue => Box::new(|_| Flow::Continue),
            Op::Extern(x) => {
                let x = self.external(x);
                Box::new(move |r| {
                    r.external(&x);
                    Flow::Next
                })
            }
            Op::Exit => Box::new(|_| Flow::Exit),
            Op::Return => Box::new(|_| Flow::Return),
        }
    }

    /// An assignment: to a slot, a place, a header's validity, or slots copied whole.
    fn assignment(&self, op: &Op) -> Stmt {
        match op {
            Op::Set(Place::Slot(s, w), Expr::Const(v)) => {
                let (s, v) = (*s as usize, *v & mask(*w));
                Box::new(move |r| {
                    r.st.slots[s] = v;
                    Flow::Next
                })
            }
            Op::Set(Place::Slot(s, w), e) => {
                let (s, m, v) = (*s as usize, mask(*w), self.value(e));
                Box::new(move |r| {
                    let x = v(r);
                    r.st.slots[s] = x & m;
                    Flow::Next
                })
            }
            Op::Set(p, e) => {
                let (p, v) = (self.place(p), self.value(e));
                Box::new(move |r| {
                    let x = v(r);
                    r.set(&p, x);
                    Flow::Next
                })
            }
            Op::Copy(d, s, n) => {
                let (d, s, n) = (*d as usize, *s as usize, *n as usize);
                Box::new(move |r| {
                    r.st.slots.copy_within(s..s + n, d);
                    Flow::Next
                })
            }
            Op::CopyHeader(d, s, n) => {
                let (d, s, n) = (self.header(d), self.header(s), *n as usize);
                Box::new(move |r| {
                    if let (Some(d), Some(s)) = (r.header_base(&d), r.header_base(&s)) {
                        let (d, s) = (d as usize, s as usize);
                        r.st.slots.copy_within(s..s + n, d);
                    }
                    Flow::Next
                })
            }
            Op::SetValid(HeaderRef::Fixed(b), v) => {
                let (b, v) = (*b as usize, u128::from(*v));
                Box::new(move |r| {
                    r.st.slots[b] = v;
                    Flow::Next
                })
            }
            Op::SetValid(h, v) => {
                let (h, v) = (self.header(h), u128::from(*v));
                Box::new(move |r| {
                    if let Some(b) = r.header_base(&h) {
                        r.st.slots[b as usize] = v;
                    }
                    Flow::Next
                })
            }
            _ => unreachable!("stmt passes only assignments"),
        }
    }

    /// A parser's or deparser's statement: extract, advance, verify, reject, emit, and a
    /// header stack's push and pop.
    fn packet_stmt(&self, op: &Op) -> Stmt {
        match op {
            Op::Extract(h, t) => {
                let (h, t) = (self.header(h), *t);
                Box::new(move |r| r.extract(&h, t, None))
            }
            Op::ExtractVar(h, t, bits) => {
                let (h, t, bits) = (self.header(h), *t, self.value(bits));
                Box::new(move |r| {
                    let n = bits(r);
                    r.extract(&h, t, Some(n))
                })
            }
            Op::Advance(n) => {
                let n = self.value(n);
                Box::new(move |r| {
                    let n = n(r) as usize;
                    if r.st.cursor + n > r.packet.len() * 8 {
                        return r.fail("PacketTooShort");
                    }
                    r.st.cursor += n;
                    Flow::Next
                })
            }
            Op::Verify(c, err) => {
                let (c, err) = (self.value(c), self.value(err));
                let slot = self.p.std.parser_error as usize;
                Box::new(move |r| {
                    if c(r) == 0 {
                        let e = err(r);
                        r.st.slots[slot] = e;
                        return Flow::Reject;
                    }
                    Flow::Next
                })
            }
            Op::Reject(err) => {
                let (err, slot) = (*err, self.p.std.parser_error as usize);
                Box::new(move |r| {
                    r.st.slots[slot] = err;
                    Flow::Reject
                })
            }
            // Most headers a deparser names are fixed ones, and most of those are invalid.
            Op::Emit(HeaderRef::Fixed(b), t) => {
                let (b, t) = (*b, *t);
                Box::new(move |r| {
                    if r.st.slots[b as usize] != 0 {
                        r.emit(b, t);
                    }
                    Flow::Next
                })
            }
            Op::Emit(h, t) => {
                let (h, t) = (self.header(h), *t);
                Box::new(move |r| {
                    if let Some(b) = r.header_base(&h)
                        && r.st.slots[b as usize] != 0
                    {
                        r.emit(b, t);
                    }
                    Flow::Next
                })
            }
            Op::PushFront(s, n) => {
                let (s, n) = (*s, *n);
                Box::new(move |r| {
                    r.push_front(&s, n);
                    Flow::Next
                })
            }
            Op::PopFront(s, n) => {
                let (s, n) = (*s, *n);
                Box::new(move |r| {
                    r.pop_front(&s, n);
                    Flow::Next
                })
            }
            _ => unreachable!("stmt passes only the parser's and deparser's statements"),
        }
    }

    /// An `if`: a test of one bit of a slot (the commonest condition, `if (f[3:3] == 1)`) reads
    /// it inline.
    fn if_of(&self, c: &Expr, then: Block, otherwise: Block) -> Stmt {
        match *c {
            Expr::BinaryConst(Binary::Eq, ref a, v, _, _) if matches!(**a, Expr::SlotBits(_, _, 1)) => {
                let Expr::SlotBits(s, lo, _) = **a else {
                    unreachable!("matched above")
                };
                let (s, want) = (s as usize, v);
                if_stmt(move |r| (r.st.slots[s] >> lo) & 1 == want, then, otherwise)
            }
            Expr::IsValid(HeaderRef::Fixed(b)) => {
                let b = b as usize;
                if_stmt(move |r| r.st.slots[b] != 0, then, otherwise)
            }
            _ => {
                let c = self.value(c);
                if_stmt(move |r| c(r) != 0, then, otherwise)
            }
        }
    }

    fn value(&self, e: &Expr) -> Value {
        match e {
            &Expr::Const(c) => Box::new(move |_| c),
            &Expr::Slot(s) => {
                let s = s as usize;
                Box::new(move |r| r.st.slots[s])
            }
            &Expr::SlotBits(s, lo, w) => {
                let (s, m) = (s as usize, mask(w));
                Box::new(move |r| (r.st.slots[s] >> lo) & m)
            }
            Expr::Element(stack, i, off) => {
                let (stack, off, i) = (*stack, *off, self.value(i));
                Box::new(move |r| {
                    let i = i(r);
                    stack.element_in(i).map_or(0, |e| r.st.slots[(e + off) as usize])
                })
            }
            Expr::Unary(op, a, w) => {
                let (op, w) = (*op, *w);
                with_leaf(self, a, move |v| ops::unary(op, v, w))
            }
            Expr::Binary(Binary::LogicalAnd, a, b, _, _) => {
                let (a, b) = (self.value(a), self.value(b));
                Box::new(move |r| u128::from(a(r) != 0 && b(r) != 0))
            }
            Expr::Binary(Binary::LogicalOr, a, b, _, _) => {
                let (a, b) = (self.value(a), self.value(b));
                Box::new(move |r| u128::from(a(r) != 0 || b(r) != 0))
            }
            Expr::Binary(op, a, b, w, s) => self.binary(*op, a, b, *w, *s),
            Expr::BinaryConst(op, a, c, w, s) => self.binary_const(*op, a, *c, *w, *s),
            Expr::Cond(c, a, b) => {
                let (c, a, b) = (self.value(c), self.value(a), self.value(b));
                Box::new(move |r| if c(r) != 0 { a(r) } else { b(r) })
            }
            Expr::Slice(a, lo, w) => {
                let (lo, m) = (*lo, mask(*w));
                with_leaf(self, a, move |v| (v >> lo) & m)
            }
            Expr::Concat(a, b, wb) => {
                let wb = *wb;
                with_two(self, a, b, move |x, y| x.checked_shl(u32::from(wb)).unwrap_or(0) | y)
            }
            Expr::Cast(a, from, to, s) => {
                let (from, to, s) = (*from, *to, *s);
                if s && to > from {
                    with_leaf(self, a, move |v| ops::cast(v, from, to, true))
                } else {
                    let m = mask(to);
                    with_leaf(self, a, move |v| v & m)
                }
            }
            Expr::IsValid(HeaderRef::Fixed(b)) => {
                let b = *b as usize;
                Box::new(move |r| u128::from(r.st.slots[b] != 0))
            }
            Expr::IsValid(h) => {
                let h = self.header(h);
                Box::new(move |r| match r.header_base(&h) {
                    Some(b) => u128::from(r.st.slots[b as usize] != 0),
                    None => 0,
                })
            }
            &Expr::Lookahead { skip, width, need } => Box::new(move |r| r.lookahead(skip, width, need)),
            Expr::PacketLength => Box::new(|r| r.packet.len() as u128),
            &Expr::Intlab(v) => Box::new(move |r| r.intlab(v)),
        }
    }

    /// A binary operator (not `&&`, `||`), the common ones as closures of their own.
    fn binary(&self, op: Binary, a: &Expr, b: &Expr, w: u16, signed: bool) -> Value {
        let m = mask(w);
        match (op, signed) {
            (Binary::Add, _) => with_two(self, a, b, move |x, y| x.wrapping_add(y) & m),
            (Binary::Sub, _) => with_two(self, a, b, move |x, y| x.wrapping_sub(y) & m),
            (Binary::And, _) => with_two(self, a, b, |x, y| x & y),
            (Binary::Or, _) => with_two(self, a, b, |x, y| x | y),
            (Binary::Xor, _) => with_two(self, a, b, |x, y| x ^ y),
            (Binary::Eq, _) => with_two(self, a, b, |x, y| u128::from(x == y)),
            (Binary::Ne, _) => with_two(self, a, b, |x, y| u128::from(x != y)),
            (Binary::Lt, false) => with_two(self, a, b, |x, y| u128::from(x < y)),
            (Binary::Le, false) => with_two(self, a, b, |x, y| u128::from(x <= y)),
            (Binary::Gt, false) => with_two(self, a, b, |x, y| u128::from(x > y)),
            (Binary::Ge, false) => with_two(self, a, b, |x, y| u128::from(x >= y)),
            _ => with_two(self, a, b, move |x, y| ops::binary(op, x, y, w, signed)),
        }
    }

    /// A binary operator with a constant right operand.
    fn binary_const(&self, op: Binary, a: &Expr, c: u128, w: u16, signed: bool) -> Value {
        let m = mask(w);
        match (op, signed) {
            (Binary::Add, _) => with_leaf(self, a, move |x| x.wrapping_add(c) & m),
            (Binary::Sub, _) => with_leaf(self, a, move |x| x.wrapping_sub(c) & m),
            (Binary::And, _) => with_leaf(self, a, move |x| x & c),
            (Binary::Or, _) => with_leaf(self, a, move |x| x | c),
            (Binary::Eq, _) => with_leaf(self, a, move |x| u128::from(x == c)),
            (Binary::Ne, _) => with_leaf(self, a, move |x| u128::from(x != c)),
            (Binary::Lt, false) => with_leaf(self, a, move |x| u128::from(x < c)),
            (Binary::Le, false) => with_leaf(self, a, move |x| u128::from(x <= c)),
            (Binary::Gt, false) => with_leaf(self, a, move |x| u128::from(x > c)),
            (Binary::Ge, false) => with_leaf(self, a, move |x| u128::from(x >= c)),
            (Binary::Shl, _) if c < u128::from(w) => with_leaf(self, a, move |x| (x << c) & m),
            (Binary::Shr, false) => with_leaf(self, a, move |x| x.checked_shr(c.min(128) as u32).unwrap_or(0)),
            _ => with_leaf(self, a, move |x| ops::binary(op, x, c, w, signed)),
        }
    }

    fn place(&self, p: &Place) -> CPlace {
        match p {
            Place::Slot(s, w) => CPlace::Slot(*s, mask(*w)),
            Place::Element(stack, i, off, w) => CPlace::Element(*stack, self.value(i), *off, mask(*w)),
            Place::Slice(inner, lo, w) => CPlace::Slice(Box::new(self.place(inner)), *lo, mask(*w)),
        }
    }

    fn header(&self, h: &HeaderRef) -> CHeader {
        match h {
            HeaderRef::Fixed(s) => CHeader::Fixed(*s),
            HeaderRef::Element(stack, i, off) => CHeader::Element(*stack, self.value(i), *off),
            HeaderRef::Next(stack, off) => CHeader::Next(*stack, *off),
        }
    }

    fn items(&self, items: &[ListItem]) -> Box<[CItem]> {
        items.iter().map(|it| self.item(it)).collect()
    }

    fn item(&self, it: &ListItem) -> CItem {
        CItem {
            source: match it.value {
                Expr::Slot(s) => ItemSource::Slot(s),
                ref e => ItemSource::Value(self.value(e)),
            },
            width: it.width,
            valid: it.valid,
            varbit: it.varbit,
        }
    }

    fn external(&self, x: &Extern) -> CExtern {
        x.map(&|e| self.value(e), &|p| self.place(p), &|i| self.item(i))
    }
}
