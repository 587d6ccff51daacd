//! One packet's run through a part of the pipeline: statements, expressions, the parser, the
//! deparser and the externs.

use std::sync::atomic::Ordering;

use super::hash::{self, push_bits, read_bits};
use super::table::TableState;
use super::{ControlPlane, Datapath, Departure, PacketState};
use crate::ir::{Expr, Extern, HeaderRef, IntlabValue, ListItem, Next, Op, Place, Slot, StackRef, Target};
use crate::lower::mask;

/// Parser states a packet may pass through before the parser gives up (`ParserTimeout`).
const MAX_PARSER_STEPS: usize = 1000;

/// How a statement ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Next,
    Return,
    Exit,
    /// The parser rejects (with the error already recorded).
    Reject,
}

/// A packet running through the program.
pub(super) struct Run<'a> {
    dp: &'a Datapath,
    /// The tables as they were when the packet entered this part of the pipeline.
    control: &'a ControlPlane,
    pub(super) st: &'a mut PacketState,
    packet: &'a [u8],
    env: Departure,
}

impl<'a> Run<'a> {
    pub(super) fn new(
        dp: &'a Datapath,
        control: &'a ControlPlane,
        st: &'a mut PacketState,
        packet: &'a [u8],
        env: Departure,
    ) -> Run<'a> {
        Run {
            dp,
            control,
            st,
            packet,
            env,
        }
    }

    fn slot(&self, s: Slot) -> u128 {
        self.st.slots[s as usize]
    }

    fn error_code(&self, name: &str) -> u128 {
        self.dp.program.errors.iter().position(|e| e == name).unwrap_or(0) as u128
    }

    fn fail(&mut self, name: &str) -> Flow {
        let code = self.error_code(name);
        self.st.slots[self.dp.program.std.parser_error as usize] = code;
        Flow::Reject
    }

    /// The parser: from `start` to accept or reject. On reject the packet goes on to ingress
    /// with `parser_error` set, as v1model on BMv2 does.
    pub(super) fn parse(&mut self) {
        let program = &self.dp.program;
        let mut state = 0;
        for _ in 0..MAX_PARSER_STEPS {
            let s = &program.states[state];
            if self.dp.trace {
                tracing::debug!(target: "p4", switch = %self.dp.name, "parser state {}", s.name);
            }
            if self.ops(&s.ops) == Flow::Reject {
                return self.finish_parse("reject");
            }
            let target = match &s.next {
                Next::To(t) => *t,
                Next::Select { keys, cases } => {
                    let mut values = std::mem::take(&mut self.st.key);
                    values.clear();
                    for k in keys {
                        let v = self.eval(k);
                        values.push(v);
                    }
                    let found = cases
                        .iter()
                        .find(|(sets, _)| sets.iter().zip(&values).all(|(set, v)| set.contains(*v)))
                        .map(|c| c.1);
                    self.st.key = values;
                    match found {
                        Some(t) => t,
                        None => {
                            self.fail("NoMatch");
                            Target::Reject
                        }
                    }
                }
            };
            match target {
                Target::Accept => return self.finish_parse("accept"),
                Target::Reject => return self.finish_parse("reject"),
                Target::State(i) => state = i,
            }
        }
        self.fail("ParserTimeout");
        self.finish_parse("reject (too many states)");
    }

    fn finish_parse(&mut self, how: &str) {
        self.st.header_bytes = self.st.cursor.div_ceil(8);
        if self.dp.trace {
            tracing::debug!(target: "p4", switch = %self.dp.name, "parser: {how} after {} header bytes", self.st.header_bytes);
        }
    }

    /// Egress starts where ingress's deparser left the headers.
    pub(super) fn cursor_to_headers(&mut self) {
        self.st.cursor = self.st.header_bytes * 8;
    }

    /// Runs a control's statements (`exit` ends the control).
    pub(super) fn control(&mut self, ops: &[Op]) {
        self.ops(ops);
    }

    fn ops(&mut self, ops: &[Op]) -> Flow {
        for op in ops {
            let f = self.op(op);
            if f != Flow::Next {
                return f;
            }
        }
        Flow::Next
    }

    fn op(&mut self, op: &Op) -> Flow {
        match op {
            // The commonest statement, without `set`'s walk over the kinds of place.
            Op::Set(Place::Slot(s, w), e) => {
                let v = self.eval(e);
                self.st.slots[*s as usize] = v & mask(*w);
            }
            Op::Set(p, e) => {
                let v = self.eval(e);
                self.set(p, v);
            }
            Op::Copy(d, s, n) => {
                let (d, s, n) = (*d as usize, *s as usize, *n as usize);
                self.st.slots.copy_within(s..s + n, d);
            }
            Op::CopyHeader(d, s, n) => {
                if let (Some(d), Some(s)) = (self.header_base(d), self.header_base(s)) {
                    let (d, s, n) = (d as usize, s as usize, *n as usize);
                    self.st.slots.copy_within(s..s + n, d);
                }
            }
            Op::SetValid(h, v) => {
                if let Some(b) = self.header_base(h) {
                    self.st.slots[b as usize] = u128::from(*v);
                }
            }
            Op::If(c, t, f) => {
                return if self.eval(c) != 0 { self.ops(t) } else { self.ops(f) };
            }
            Op::Switch(on, cases, default) => {
                let v = self.eval(on);
                let body = cases.iter().find(|c| c.0.contains(&v)).map_or(default, |c| &c.1);
                return self.ops(body);
            }
            Op::Apply(t, cases) => {
                let (_, action) = self.apply(*t);
                if let Some(cases) = cases {
                    let (cases, default) = &**cases;
                    let body = cases.iter().find(|c| c.0.contains(&action)).map_or(default, |c| &c.1);
                    return self.ops(body);
                }
            }
            Op::Call(a, args, back) => {
                let action = &self.dp.program.actions[*a];
                for (p, e) in action.params.iter().zip(args) {
                    let v = self.eval(e) & mask(p.width);
                    self.st.slots[p.slot as usize] = v;
                }
                if self.ops(&action.body) == Flow::Exit {
                    return Flow::Exit;
                }
                for (place, slot) in back {
                    let v = self.slot(*slot);
                    self.set(place, v);
                }
            }
            Op::Extern(x) => self.external(x),
            Op::Exit => return Flow::Exit,
            Op::Return => return Flow::Return,
            Op::Extract(h, t) => return self.extract(h, *t),
            Op::Advance(n) => {
                let n = self.eval(n) as usize;
                if self.st.cursor + n > self.packet.len() * 8 {
                    return self.fail("PacketTooShort");
                }
                self.st.cursor += n;
            }
            Op::Verify(c, err) => {
                if self.eval(c) == 0 {
                    self.st.slots[self.dp.program.std.parser_error as usize] = *err;
                    return Flow::Reject;
                }
            }
            // Most headers a deparser names are fixed ones, and most of those are invalid.
            Op::Emit(HeaderRef::Fixed(b), t) => {
                if self.slot(*b) != 0 {
                    self.emit(*b, *t);
                }
            }
            Op::Emit(h, t) => {
                if let Some(b) = self.header_base(h)
                    && self.slot(b) != 0
                {
                    self.emit(b, *t);
                }
            }
            Op::PushFront(s, n) => self.push_front(s, *n),
            Op::PopFront(s, n) => self.pop_front(s, *n),
        }
        Flow::Next
    }

    /// Appends the valid header at `b`, of type `t`, to the deparser's output.
    fn emit(&mut self, b: Slot, t: usize) {
        let header = &self.dp.program.headers[t];
        let first = b as usize + 1;
        let values = &self.st.slots[first..first + header.fields.len()];
        let widths = header.fields.iter().map(|f| f.1);
        hash::push_header(&mut self.st.out, values, widths, header.bits() as usize / 8);
    }

    fn extract(&mut self, h: &HeaderRef, t: usize) -> Flow {
        let header = &self.dp.program.headers[t];
        let bits = header.bits() as usize;
        let base = match h {
            HeaderRef::Next(s) => {
                let i = self.slot(s.base);
                if i >= u128::from(s.size) {
                    return self.fail("StackOutOfBounds");
                }
                self.st.slots[s.base as usize] = i + 1;
                s.element(i as u32)
            }
            h => match self.header_base(h) {
                Some(b) => b,
                None => return self.fail("StackOutOfBounds"),
            },
        };
        if self.st.cursor + bits > self.packet.len() * 8 {
            return self.fail("PacketTooShort");
        }
        let at = self.st.cursor;
        self.st.slots[base as usize] = 1;
        let first = base as usize + 1;
        let values = &mut self.st.slots[first..first + header.fields.len()];
        let widths = header.fields.iter().map(|f| f.1);
        if at.is_multiple_of(8) {
            hash::read_header(&self.packet[at / 8..(at + bits) / 8], values, widths);
        } else {
            // After an `advance` by bits that are not whole bytes.
            let mut bit = at;
            for (v, w) in values.iter_mut().zip(widths) {
                *v = read_bits(self.packet, bit, w);
                bit += usize::from(w);
            }
        }
        self.st.cursor = at + bits;
        Flow::Next
    }

    /// Applies table `t`: returns whether it hit and the action it ran.
    fn apply(&mut self, t: usize) -> (bool, usize) {
        let table = &self.dp.program.tables[t];
        let state = &self.control.tables[t];
        let mut key = std::mem::take(&mut self.st.key);
        key.clear();
        for k in &table.keys {
            let v = self.eval(&k.expr);
            key.push(v);
        }
        let mut scratch = std::mem::take(&mut self.st.scratch);
        let hit = state.lookup(&key, &mut scratch);
        self.st.scratch = scratch;
        let (action, args, is_hit) = match hit {
            Some(e) => {
                if table.direct_counter {
                    TableState::count(e, self.slot(self.dp.program.std.packet_length) as u64);
                }
                (e.entry.action, e.entry.args.as_slice(), true)
            }
            None => (state.default.0, state.default.1.as_slice(), false),
        };
        if self.dp.trace {
            tracing::debug!(
                target: "p4", switch = %self.dp.name,
                "table {}: {} key {:x?} -> {}{:x?}",
                table.name, if is_hit { "hit" } else { "miss" }, key,
                self.dp.program.actions[action].name, args
            );
        }
        self.st.key = key;
        let a = &self.dp.program.actions[action];
        for (p, v) in a.params.iter().filter(|p| p.control_plane).zip(args) {
            self.st.slots[p.slot as usize] = *v;
        }
        self.ops(&a.body);
        (is_hit, action)
    }

    fn header_base(&mut self, h: &HeaderRef) -> Option<Slot> {
        match h {
            HeaderRef::Fixed(s) => Some(*s),
            HeaderRef::Element(s, i) => {
                let i = self.eval(i);
                (i < u128::from(s.size)).then(|| s.element(i as u32))
            }
            HeaderRef::Next(s) => {
                let i = self.slot(s.base);
                (i < u128::from(s.size)).then(|| s.element(i as u32))
            }
        }
    }

    fn move_element(&mut self, s: &StackRef, from: u32, to: u32) {
        let (f, t, n) = (s.element(from) as usize, s.element(to) as usize, s.stride as usize);
        self.st.slots.copy_within(f..f + n, t);
    }

    fn push_front(&mut self, s: &StackRef, n: u32) {
        for i in (n..s.size).rev() {
            self.move_element(s, i - n, i);
        }
        for i in 0..n.min(s.size) {
            self.st.slots[s.element(i) as usize] = 0;
        }
        let next = self.slot(s.base) + u128::from(n);
        self.st.slots[s.base as usize] = next.min(u128::from(s.size));
    }

    fn pop_front(&mut self, s: &StackRef, n: u32) {
        for i in 0..s.size.saturating_sub(n) {
            self.move_element(s, i + n, i);
        }
        for i in s.size.saturating_sub(n)..s.size {
            self.st.slots[s.element(i) as usize] = 0;
        }
        let next = self.slot(s.base).saturating_sub(u128::from(n));
        self.st.slots[s.base as usize] = next;
    }

    fn set(&mut self, p: &Place, v: u128) {
        match p {
            Place::Slot(s, w) => self.st.slots[*s as usize] = v & mask(*w),
            Place::Element(s, i, off, w) => {
                let i = self.eval(i);
                if i < u128::from(s.size) {
                    self.st.slots[(s.element(i as u32) + off) as usize] = v & mask(*w);
                }
            }
            Place::Slice(inner, lo, w) => {
                let old = self.get(inner);
                let m = mask(*w) << lo;
                self.set(inner, (old & !m) | ((v << lo) & m));
            }
        }
    }

    fn get(&mut self, p: &Place) -> u128 {
        match p {
            Place::Slot(s, _) => self.slot(*s),
            Place::Element(s, i, off, _) => {
                let i = self.eval(i);
                if i < u128::from(s.size) {
                    self.slot(s.element(i as u32) + off)
                } else {
                    0
                }
            }
            Place::Slice(inner, lo, w) => (self.get(inner) >> lo) & mask(*w),
        }
    }

    /// The value of `e`. Leaves (most nodes a packet meets) are read here, inlined where the
    /// value is needed, without a call and a jump through `eval_node`'s table.
    #[inline(always)]
    fn eval(&mut self, e: &Expr) -> u128 {
        match e {
            Expr::Slot(s) => self.slot(*s),
            Expr::SlotBits(s, lo, w) => (self.slot(*s) >> lo) & mask(*w),
            Expr::Const(c) => *c,
            Expr::IsValid(HeaderRef::Fixed(b)) => u128::from(self.slot(*b) != 0),
            _ => self.eval_node(e),
        }
    }

    fn eval_node(&mut self, e: &Expr) -> u128 {
        use super::eval as ops;
        match e {
            // The leaves `eval` reads inline.
            Expr::Const(_) | Expr::Slot(_) | Expr::SlotBits(..) => self.eval(e),
            Expr::Element(s, i, off) => {
                let i = self.eval(i);
                if i < u128::from(s.size) {
                    self.slot(s.element(i as u32) + off)
                } else {
                    0
                }
            }
            Expr::Unary(op, a, w) => {
                let a = self.eval(a);
                ops::unary(*op, a, *w)
            }
            Expr::Binary(crate::ir::Binary::LogicalAnd, a, b, _, _) => {
                u128::from(self.eval(a) != 0 && self.eval(b) != 0)
            }
            Expr::Binary(crate::ir::Binary::LogicalOr, a, b, _, _) => {
                u128::from(self.eval(a) != 0 || self.eval(b) != 0)
            }
            Expr::Binary(op, a, b, w, s) => {
                let a = self.eval(a);
                let b = self.eval(b);
                ops::binary(*op, a, b, *w, *s)
            }
            Expr::Cond(c, a, b) => {
                if self.eval(c) != 0 {
                    self.eval(a)
                } else {
                    self.eval(b)
                }
            }
            Expr::Slice(a, lo, w) => (self.eval(a) >> lo) & mask(*w),
            Expr::BinaryConst(op, a, c, w, s) => {
                let a = self.eval(a);
                ops::binary(*op, a, *c, *w, *s)
            }
            Expr::Concat(a, b, wb) => {
                let a = self.eval(a);
                (a << wb) | self.eval(b)
            }
            Expr::Cast(a, from, to, s) => {
                let a = self.eval(a);
                ops::cast(a, *from, *to, *s)
            }
            Expr::IsValid(h) => match self.header_base(h) {
                Some(b) => u128::from(self.slot(b) != 0),
                None => 0,
            },
            Expr::Apply(t, hit) => u128::from(self.apply(*t).0 == *hit),
            Expr::Lookahead { skip, width } => self.lookahead(*skip, *width),
            Expr::Intlab(v) => self.intlab(*v),
        }
    }

    // Rare values out of `eval`'s body, so that its frame (set up at every node) stays small.
    #[inline(never)]
    fn lookahead(&self, skip: u16, w: u16) -> u128 {
        let at = self.st.cursor + usize::from(skip);
        if at + usize::from(w) > self.packet.len() * 8 {
            0
        } else {
            read_bits(self.packet, at, w)
        }
    }

    #[inline(never)]
    fn intlab(&self, v: IntlabValue) -> u128 {
        u128::from(match v {
            IntlabValue::QueueBytes => self.env.queue_bytes.min(u64::from(u32::MAX)),
            IntlabValue::TxBytes => self.env.tx_bytes,
            IntlabValue::DepartureNs => self.env.departure_ns,
            IntlabValue::ArrivalNs => self.env.arrival_ns,
            IntlabValue::LineRateKbps => u64::from(self.env.rate_kbps),
            IntlabValue::NodeId => u64::from(self.env.node_id),
            IntlabValue::Mtu => u64::from(self.env.mtu),
        })
    }

    /// Packs a field list into `st.list` (BMv2's layout) and returns it.
    fn pack(&mut self, items: &[ListItem]) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.st.list);
        buf.clear();
        let mut bits = 0;
        for it in items {
            if it.valid.is_some_and(|v| self.slot(v) == 0) {
                continue;
            }
            let v = self.eval(&it.value);
            push_bits(&mut buf, &mut bits, v, it.width);
        }
        buf
    }

    fn external(&mut self, x: &Extern) {
        let std = self.dp.program.std;
        match x {
            Extern::MarkToDrop => {
                self.st.slots[std.egress_spec as usize] = u128::from(super::DROP_PORT);
                self.st.slots[std.mcast_grp as usize] = 0;
                if self.dp.trace {
                    tracing::debug!(target: "p4", switch = %self.dp.name, "mark_to_drop");
                }
            }
            Extern::Hash {
                out,
                algo,
                base,
                data,
                max,
            } => {
                let buf = self.pack(data);
                let h = u128::from(hash::hash(*algo, &buf));
                self.st.list = buf;
                let (base, max) = (self.eval(base), self.eval(max));
                let v = base.wrapping_add(if max > 0 { h % max } else { h });
                self.set(out, v);
            }
            Extern::Checksum {
                verify,
                condition,
                data,
                field,
                current,
                payload,
                ..
            } => {
                if self.eval(condition) == 0 {
                    return;
                }
                let mut buf = self.pack(data);
                if *payload {
                    buf.extend_from_slice(self.packet.get(self.st.header_bytes..).unwrap_or(&[]));
                }
                let sum = u128::from(hash::csum16(&buf));
                self.st.list = buf;
                if *verify {
                    if self.eval(current) != sum {
                        self.st.slots[std.checksum_error as usize] = 1;
                    }
                } else {
                    self.set(field, sum);
                }
            }
            Extern::RegisterRead(r, out, i) => {
                let i = self.eval(i) as usize;
                let v = self.dp.register_read(*r, i).unwrap_or(0);
                self.set(out, u128::from(v));
            }
            Extern::RegisterWrite(r, i, v) => {
                let (i, v) = (self.eval(i) as usize, self.eval(v));
                self.dp.register_write(*r, i, v as u64);
            }
            Extern::Count(c, i) => {
                let i = self.eval(i) as usize;
                let bytes = self.slot(std.packet_length) as u64;
                if let Some(cell) = self.dp.counters.get(*c).and_then(|x| x.get(i)) {
                    cell[0].fetch_add(1, Ordering::Relaxed);
                    cell[1].fetch_add(bytes, Ordering::Relaxed);
                }
            }
            Extern::Clone { session, field_list } => {
                self.st.clone_session = Some(self.eval(session) as u32);
                self.st.clone_field_list = *field_list;
            }
            Extern::Truncate(n) => self.st.truncate = Some(self.eval(n) as usize),
            Extern::Log(fmt, values) => {
                let mut text = String::with_capacity(fmt.len());
                let mut parts = fmt.split("{}");
                text.push_str(parts.next().unwrap_or(""));
                for (i, part) in parts.enumerate() {
                    match values.get(i) {
                        Some(v) => {
                            let v = self.eval(v);
                            text.push_str(&v.to_string());
                        }
                        None => text.push_str("{}"),
                    }
                    text.push_str(part);
                }
                tracing::info!(target: "p4", switch = %self.dp.name, "log_msg: {text}");
            }
            Extern::Random(out, lo, hi) => {
                let (lo, hi) = (self.eval(lo), self.eval(hi));
                self.st.random = self.st.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.st.random;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                let span = hi.saturating_sub(lo).saturating_add(1);
                self.set(out, lo + u128::from(z) % span);
            }
            Extern::Assert(c) => {
                if self.eval(c) == 0 {
                    tracing::warn!(target: "p4", switch = %self.dp.name, "assert failed: the frame is dropped");
                    self.st.slots[std.egress_spec as usize] = u128::from(super::DROP_PORT);
                    self.st.slots[std.mcast_grp as usize] = 0;
                }
            }
        }
    }

    /// Runs the deparser: the headers to write go to `st.out`.
    pub(super) fn deparse(&mut self) {
        self.st.out.clear();
        self.ops(&self.dp.program.deparser);
    }
}

impl PacketState {
    /// Writes the deparsed headers in front of the payload (moving it if the headers' length
    /// changed) and applies a truncation; `None` if the frame no longer fits `buf`.
    pub(super) fn write_headers(&mut self, buf: &mut [u8], len: &mut usize) -> Option<()> {
        let (old, new) = (self.header_bytes.min(*len), self.out.len());
        let mut total = new + (*len - old);
        if total > buf.len() {
            return None;
        }
        if old != new {
            buf.copy_within(old..*len, new);
        }
        buf[..new].copy_from_slice(&self.out);
        if let Some(t) = self.truncate {
            total = total.min(t);
        }
        *len = total;
        self.header_bytes = new;
        Some(())
    }
}
