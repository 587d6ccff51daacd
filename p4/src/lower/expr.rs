//! Expressions: paths to slots, typed scalar values, places to write and headers to act on.

use crate::ast::{self, ExprKind};
use crate::error::Result;
use crate::ir::{self, Binary, Expr, HeaderRef, Place, StackRef, Unary};

use super::{Binding, Lowerer, Ty, mask};

/// Where a path leads.
#[derive(Debug, Clone)]
pub(super) enum Loc {
    /// A fixed slot (a scalar, or the base of an aggregate).
    Slot(ir::Slot, Ty),
    /// A stack element chosen at run time.
    Element(StackRef, Expr),
    /// A field of a stack element chosen at run time: element, index, field offset, type.
    ElementField(StackRef, Expr, u32, Ty),
    /// A stack's `next` element.
    Next(StackRef),
}

impl Loc {
    pub(super) fn ty(&self) -> Ty {
        match self {
            Loc::Slot(_, t) | Loc::ElementField(_, _, _, t) => t.clone(),
            Loc::Element(s, _) | Loc::Next(s) => Ty::Header(s.header),
        }
    }
}

impl Lowerer<'_> {
    fn stack_ref(&self, base: ir::Slot, header: usize, size: u32) -> StackRef {
        StackRef {
            base,
            stride: self.out.headers[header].stride(),
            size,
            header,
        }
    }

    /// The location a path names.
    pub(super) fn loc(&self, e: &ast::Expr) -> Result<Loc> {
        match &e.kind {
            ExprKind::Name(n) => match self.lookup(n) {
                Some(Binding::Var(s, t)) => Ok(Loc::Slot(*s, t.clone())),
                Some(_) => self.err(e.pos, format!("`{n}` is not a variable")),
                None => self.err(e.pos, format!("`{n}` is not declared")),
            },
            ExprKind::Member(b, f) => {
                let base = self.loc(b)?;
                match base {
                    Loc::Slot(s, Ty::Struct(name)) => match self.field_offset(&name, f) {
                        Some((off, t)) => Ok(Loc::Slot(s + off, t)),
                        None => self.err(e.pos, format!("struct `{name}` has no field `{f}`")),
                    },
                    Loc::Slot(s, Ty::Header(h)) => {
                        let (i, w) = self.header_field(h, f, e.pos)?;
                        Ok(Loc::Slot(s + 1 + i, w))
                    }
                    Loc::Slot(s, Ty::Stack(h, n)) => {
                        let stack = self.stack_ref(s, h, n);
                        match f.as_str() {
                            "next" => Ok(Loc::Next(stack)),
                            "last" => Ok(Loc::Element(
                                stack,
                                fold(Expr::Binary(
                                    Binary::Sub,
                                    Box::new(Expr::Slot(s)),
                                    Box::new(Expr::Const(1)),
                                    32,
                                    false,
                                )),
                            )),
                            _ => self.err(e.pos, format!("a header stack has no `{f}` here")),
                        }
                    }
                    Loc::Element(stack, index) => {
                        let (i, w) = self.header_field(stack.header, f, e.pos)?;
                        Ok(Loc::ElementField(stack, index, 1 + i, w))
                    }
                    Loc::Next(stack) => {
                        let (i, w) = self.header_field(stack.header, f, e.pos)?;
                        Ok(Loc::ElementField(stack, Expr::Slot(stack.base), 1 + i, w))
                    }
                    _ => self.err(e.pos, format!("`{}` has no fields", crate::info::text(b))),
                }
            }
            ExprKind::Index(b, i) => {
                let Loc::Slot(s, Ty::Stack(h, n)) = self.loc(b)? else {
                    return self.err(e.pos, format!("`{}` is not a header stack", crate::info::text(b)));
                };
                let stack = self.stack_ref(s, h, n);
                let (index, _) = self.scalar(i)?;
                match index {
                    Expr::Const(c) if c < u128::from(n) => Ok(Loc::Slot(stack.element(c as u32), Ty::Header(h))),
                    Expr::Const(c) => self.err(i.pos, format!("index {c} is outside the stack of {n}")),
                    index => Ok(Loc::Element(stack, index)),
                }
            }
            _ => self.err(e.pos, "a variable, field or header expected"),
        }
    }

    fn header_field(&self, h: usize, f: &str, pos: crate::source::Pos) -> Result<(u32, Ty)> {
        let ht = &self.out.headers[h];
        match ht.fields.iter().position(|x| x.0 == f) {
            Some(i) => Ok((i as u32, Ty::Bits(ht.fields[i].1, false))),
            None => self.err(pos, format!("header `{}` has no field `{f}`", ht.name)),
        }
    }

    /// The header a path names (for validity, extract, emit, copies).
    pub(super) fn header_ref(&self, e: &ast::Expr) -> Result<(HeaderRef, usize)> {
        match self.loc(e)? {
            Loc::Slot(s, Ty::Header(h)) => Ok((HeaderRef::Fixed(s), h)),
            Loc::Element(stack, i) => Ok((HeaderRef::Element(stack, Box::new(i)), stack.header)),
            Loc::Next(stack) => Ok((HeaderRef::Next(stack), stack.header)),
            _ => self.err(e.pos, format!("`{}` is not a header", crate::info::text(e))),
        }
    }

    /// Where a value can be written.
    pub(super) fn place(&self, e: &ast::Expr) -> Result<(Place, Ty)> {
        if let ExprKind::Slice(b, hi, lo) = &e.kind {
            let (inner, t) = self.place(b)?;
            let (hi, lo) = (self.constant(hi)?.0 as u16, self.constant(lo)?.0 as u16);
            if hi < lo || t.width().is_none_or(|w| hi >= w) {
                return self.err(e.pos, format!("slice [{hi}:{lo}] outside the value's width"));
            }
            let w = hi - lo + 1;
            return Ok((Place::Slice(Box::new(inner), lo, w), Ty::Bits(w, false)));
        }
        match self.loc(e)? {
            Loc::Slot(s, t) => match t.width() {
                Some(w) => Ok((Place::Slot(s, w), t)),
                None => self.err(e.pos, "a scalar place expected"),
            },
            Loc::ElementField(stack, i, off, t) => {
                let w = t.width().unwrap_or(1);
                Ok((Place::Element(stack, Box::new(i), off, w), t))
            }
            _ => self.err(e.pos, "a scalar place expected"),
        }
    }

    /// A scalar value with its type.
    pub(super) fn scalar(&self, e: &ast::Expr) -> Result<(Expr, Ty)> {
        match &e.kind {
            ExprKind::Int(i) => Ok(match i.width {
                Some((w, signed)) => (Expr::Const(i.value & mask(w)), Ty::Bits(w, signed)),
                None => (Expr::Const(i.value), Ty::Int),
            }),
            ExprKind::Bool(b) => Ok((Expr::Const(u128::from(*b)), Ty::Bool)),
            ExprKind::Str(_) => Ok((Expr::Const(0), Ty::Str)),
            ExprKind::Name(n) => match self.lookup(n) {
                Some(Binding::Const(v, t)) => Ok((Expr::Const(*v), t.clone())),
                Some(Binding::Var(..)) => self.loc_value(e),
                _ => self.err(e.pos, format!("`{n}` is not a value")),
            },
            ExprKind::Member(b, f) => self.member(e, b, f),
            ExprKind::Index(..) => self.loc_value(e),
            ExprKind::Slice(b, hi, lo) => {
                let (v, t) = self.scalar(b)?;
                let (hi, lo) = (self.constant(hi)?.0 as u16, self.constant(lo)?.0 as u16);
                if hi < lo || t.width().is_some_and(|w| hi >= w) {
                    return self.err(e.pos, format!("slice [{hi}:{lo}] outside the value's width"));
                }
                let w = hi - lo + 1;
                Ok((fold(Expr::Slice(Box::new(v), lo, w)), Ty::Bits(w, false)))
            }
            ExprKind::Call(f, targs, args) => self.call_value(e, f, targs, args),
            ExprKind::Unary(op, a) => {
                let (v, t) = self.scalar(a)?;
                let w = t.width().unwrap_or(128);
                let op = match *op {
                    "!" => Unary::Not,
                    "~" => Unary::Complement,
                    "-" => Unary::Negate,
                    _ => return Ok((v, t)),
                };
                Ok((fold(Expr::Unary(op, Box::new(v), w)), t))
            }
            ExprKind::Binary(op, a, b) => self.binary(e, op, a, b),
            ExprKind::Cond(c, a, b) => {
                let (c, _) = self.scalar(c)?;
                let (a, ta) = self.scalar(a)?;
                let (b, tb) = self.scalar(b)?;
                let t = if ta == Ty::Int { tb } else { ta };
                let m = t.width().map_or(u128::MAX, mask);
                Ok((
                    Expr::Cond(Box::new(c), Box::new(masked(a, m)), Box::new(masked(b, m))),
                    t,
                ))
            }
            ExprKind::Cast(ty, a) => {
                let to = self.ty(ty, e.pos)?;
                let (v, from) = self.scalar(a)?;
                let Some(tw) = to.width() else {
                    return self.err(e.pos, "a cast to a bit, int or bool type expected");
                };
                Ok(match from.width() {
                    Some(fw) => (fold(Expr::Cast(Box::new(v), fw, tw, from.signed())), to),
                    None => (masked(v, mask(tw)), to),
                })
            }
            ExprKind::Type(_) | ExprKind::List(_) | ExprKind::Mask(..) | ExprKind::Range(..) => {
                self.err(e.pos, "a value expected")
            }
            ExprKind::Default | ExprKind::DontCare => self.err(e.pos, "a value expected"),
        }
    }

    fn loc_value(&self, e: &ast::Expr) -> Result<(Expr, Ty)> {
        match self.loc(e)? {
            Loc::Slot(s, t) if t.width().is_some() => Ok((Expr::Slot(s), t)),
            Loc::ElementField(stack, i, off, t) => Ok((Expr::Element(stack, Box::new(i), off), t)),
            _ => self.err(e.pos, format!("`{}` is not a scalar value", crate::info::text(e))),
        }
    }

    fn member(&self, e: &ast::Expr, b: &ast::Expr, f: &str) -> Result<(Expr, Ty)> {
        if let ExprKind::Name(n) = &b.kind {
            if n == "error" && self.lookup(n).is_none() {
                return match self.out.errors.iter().position(|x| x == f) {
                    Some(i) => Ok((Expr::Const(i as u128), Ty::Error)),
                    None => self.err(e.pos, format!("error `{f}` is not declared")),
                };
            }
            if let Some((members, underlying)) = self.enums.get(n)
                && self.lookup(n).is_none()
            {
                return match members.get(f) {
                    Some(v) => Ok((Expr::Const(*v), underlying.clone().unwrap_or(Ty::Enum(n.clone())))),
                    None => self.err(e.pos, format!("enum `{n}` has no member `{f}`")),
                };
            }
        }
        if let ExprKind::Call(inner, _, _) = &b.kind
            && let ExprKind::Member(t, m) = &inner.kind
            && m == "apply"
            && (f == "hit" || f == "miss")
        {
            let ExprKind::Name(tn) = &t.kind else {
                return self.err(b.pos, "a table expected");
            };
            let Some(Binding::Table(id)) = self.lookup(tn) else {
                return self.err(b.pos, format!("`{tn}` is not a table"));
            };
            return Ok((Expr::Apply(*id, f == "hit"), Ty::Bool));
        }
        if let Some(v) = self.lookahead_field(b, f, e.pos)? {
            return Ok(v);
        }
        if let Ok(Loc::Slot(s, Ty::Stack(_, n))) = self.loc(b) {
            match f {
                "size" => return Ok((Expr::Const(u128::from(n)), Ty::Bits(32, false))),
                "lastIndex" => {
                    let v = fold(Expr::Binary(
                        Binary::Sub,
                        Box::new(Expr::Slot(s)),
                        Box::new(Expr::Const(1)),
                        32,
                        false,
                    ));
                    return Ok((v, Ty::Bits(32, false)));
                }
                _ => {}
            }
        }
        self.loc_value(e)
    }

    /// `packet.lookahead<H>().f`: field `f` of the header type `H` that starts at the parser's
    /// cursor (the tutorials' calc.p4 checks its protocol's first bytes this way). None when
    /// `b` is not a lookahead of a header.
    fn lookahead_field(&self, b: &ast::Expr, f: &str, pos: crate::source::Pos) -> Result<Option<(Expr, Ty)>> {
        let ExprKind::Call(call, targs, args) = &b.kind else {
            return Ok(None);
        };
        let ExprKind::Member(obj, method) = &call.kind else {
            return Ok(None);
        };
        let ExprKind::Name(n) = &obj.kind else {
            return Ok(None);
        };
        if method != "lookahead" || !args.is_empty() || !matches!(self.lookup(n), Some(Binding::Packet)) {
            return Ok(None);
        }
        let Some(t) = targs.first() else {
            return self.err(b.pos, "lookahead needs its type: lookahead<H>()");
        };
        let Ty::Header(h) = self.ty(t, b.pos)? else {
            return self.err(pos, format!("`.{f}` of a lookahead needs a header type"));
        };
        let ht = &self.out.headers[h];
        let need: u32 = ht.fields.iter().map(|(_, w)| u32::from(*w)).sum();
        let mut skip = 0u32;
        for (name, w) in &ht.fields {
            if name == f {
                return Ok(Some((
                    Expr::Lookahead {
                        skip: skip as u16,
                        width: *w,
                        need,
                    },
                    Ty::Bits(*w, false),
                )));
            }
            skip += u32::from(*w);
        }
        self.err(pos, format!("header `{}` has no field `{f}`", ht.name))
    }

    fn call_value(&self, e: &ast::Expr, f: &ast::Expr, targs: &[ast::Type], args: &[ast::Expr]) -> Result<(Expr, Ty)> {
        let ExprKind::Member(obj, method) = &f.kind else {
            return self.err(e.pos, format!("`{}` does not give a value here", crate::info::text(f)));
        };
        if method == "isValid" && args.is_empty() {
            let (h, _) = self.header_ref(obj)?;
            return Ok((Expr::IsValid(h), Ty::Bool));
        }
        if let ExprKind::Name(n) = &obj.kind {
            match self.lookup(n) {
                Some(Binding::Packet) if method == "lookahead" => {
                    let t = match targs.first() {
                        Some(t) => self.ty(t, e.pos)?,
                        None => return self.err(e.pos, "lookahead needs its type: lookahead<bit<W>>()"),
                    };
                    let Some(w) = t.width() else {
                        return self.err(e.pos, "lookahead of a header is not supported; use lookahead<bit<W>>()");
                    };
                    return Ok((
                        Expr::Lookahead {
                            skip: 0,
                            width: w,
                            need: u32::from(w),
                        },
                        t,
                    ));
                }
                Some(Binding::Intlab) => {
                    use ir::IntlabValue as V;
                    let (v, w) = match method.as_str() {
                        "queue_bytes" => (V::QueueBytes, 32),
                        "tx_bytes" => (V::TxBytes, 64),
                        "departure_ns" => (V::DepartureNs, 64),
                        "arrival_ns" => (V::ArrivalNs, 64),
                        "line_rate_kbps" => (V::LineRateKbps, 32),
                        "node_id" => (V::NodeId, 32),
                        "mtu" => (V::Mtu, 32),
                        other => return self.err(f.pos, format!("intlab_metadata has no `{other}`")),
                    };
                    return Ok((Expr::Intlab(v), Ty::Bits(w, false)));
                }
                _ => {}
            }
        }
        self.err(
            e.pos,
            format!("`{}(...)` does not give a value here", crate::info::text(f)),
        )
    }

    fn binary(&self, e: &ast::Expr, op: &str, a: &ast::Expr, b: &ast::Expr) -> Result<(Expr, Ty)> {
        let (va, ta) = self.scalar(a)?;
        let (vb, tb) = self.scalar(b)?;
        if op == "++" {
            let (Some(wa), Some(wb)) = (ta.width(), tb.width()) else {
                return self.err(e.pos, "`++` needs operands of known width");
            };
            return Ok((
                fold(Expr::Concat(Box::new(va), Box::new(vb), wb)),
                Ty::Bits(wa + wb, ta.signed()),
            ));
        }
        let shift = op == "<<" || op == ">>";
        // The operands' type: a literal takes the other side's (a shift takes the left's).
        let t = if shift || tb == Ty::Int {
            ta.clone()
        } else if ta == Ty::Int {
            tb.clone()
        } else {
            ta.clone()
        };
        if !shift && ta != Ty::Int && tb != Ty::Int && ta.width() != tb.width() {
            return self.err(
                e.pos,
                format!(
                    "`{op}` on values of different widths ({} and {} bits): cast one",
                    ta.width().unwrap_or(0),
                    tb.width().unwrap_or(0)
                ),
            );
        }
        let w = t.width().unwrap_or(128);
        let m = mask(w);
        let (va, vb) = if shift {
            (va, vb)
        } else {
            (masked(va, m), masked(vb, m))
        };
        let (bop, result) = match op {
            "+" => (Binary::Add, t.clone()),
            "-" => (Binary::Sub, t.clone()),
            "*" => (Binary::Mul, t.clone()),
            "/" => (Binary::Div, t.clone()),
            "%" => (Binary::Rem, t.clone()),
            "|+|" => (Binary::AddSat, t.clone()),
            "|-|" => (Binary::SubSat, t.clone()),
            "&" => (Binary::And, t.clone()),
            "|" => (Binary::Or, t.clone()),
            "^" => (Binary::Xor, t.clone()),
            "<<" => (Binary::Shl, t.clone()),
            ">>" => (Binary::Shr, t.clone()),
            "==" => (Binary::Eq, Ty::Bool),
            "!=" => (Binary::Ne, Ty::Bool),
            "<" => (Binary::Lt, Ty::Bool),
            "<=" => (Binary::Le, Ty::Bool),
            ">" => (Binary::Gt, Ty::Bool),
            ">=" => (Binary::Ge, Ty::Bool),
            "&&" => (Binary::LogicalAnd, Ty::Bool),
            "||" => (Binary::LogicalOr, Ty::Bool),
            other => return self.err(e.pos, format!("operator `{other}` is not supported")),
        };
        Ok((
            fold(Expr::Binary(bop, Box::new(va), Box::new(vb), w, t.signed())),
            result,
        ))
    }
}

/// `v` masked to `m` (constants at once).
fn masked(v: Expr, m: u128) -> Expr {
    match v {
        Expr::Const(c) => Expr::Const(c & m),
        v => v,
    }
}

/// Folds an expression whose operands are constants, and gives the shapes packets evaluate
/// most a node of their own: each node costs a dispatch per packet, so the fewer the faster.
pub(super) fn fold(e: Expr) -> Expr {
    match constant_folded(e) {
        // Values are kept masked to their width, so widening an unsigned one changes nothing.
        Expr::Cast(a, from, to, signed) if to >= from && (!signed || to == from) => *a,
        Expr::Slice(a, lo, w) => match *a {
            Expr::Slot(s) => Expr::SlotBits(s, lo, w),
            a => Expr::Slice(Box::new(a), lo, w),
        },
        Expr::Binary(op, a, b, w, s) if !matches!(op, Binary::LogicalAnd | Binary::LogicalOr) => match (*a, *b) {
            (a, Expr::Const(c)) => Expr::BinaryConst(op, Box::new(a), c, w, s),
            (Expr::Const(c), b) if commutes(op) => Expr::BinaryConst(op, Box::new(b), c, w, s),
            (a, b) => Expr::Binary(op, Box::new(a), Box::new(b), w, s),
        },
        e => e,
    }
}

/// `a op b == b op a` at any width and signedness.
fn commutes(op: Binary) -> bool {
    matches!(
        op,
        Binary::Add | Binary::Mul | Binary::AddSat | Binary::And | Binary::Or | Binary::Xor | Binary::Eq | Binary::Ne
    )
}

fn constant_folded(e: Expr) -> Expr {
    let all_const = match &e {
        Expr::Unary(_, a, _) | Expr::Slice(a, _, _) | Expr::Cast(a, _, _, _) => matches!(**a, Expr::Const(_)),
        Expr::Binary(_, a, b, _, _) | Expr::Concat(a, b, _) => {
            matches!(**a, Expr::Const(_)) && matches!(**b, Expr::Const(_))
        }
        _ => false,
    };
    if all_const {
        Expr::Const(crate::exec::eval::constant(&e))
    } else {
        e
    }
}
