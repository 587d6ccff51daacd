//! One packet's run through a part of the pipeline: what the compiled program
//! ([`super::code`]) calls on, the parser's and the deparser's loops, tables and the externs.

use std::sync::atomic::Ordering;

use super::code::{Block, CExtern, CHeader, CItem, CNext, CPlace, ItemSource};
use super::hash::{self, BitPacker, read_bits};
use super::table::TableState;
use super::{ControlPlane, Datapath, Departure, PacketState};
use crate::ir::{IntlabValue, Slot, StackRef, Target};

/// Parser states a packet may pass through before the parser gives up (`ParserTimeout`).
const MAX_PARSER_STEPS: usize = 1000;

/// How a statement ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flow {
    Next,
    Return,
    Exit,
    /// The parser rejects (with the error already recorded).
    Reject,
}

/// A packet running through the program.
pub(super) struct Run<'a> {
    pub(super) dp: &'a Datapath,
    /// The tables as they were when the packet entered this part of the pipeline.
    control: &'a ControlPlane,
    pub(super) st: &'a mut PacketState,
    pub(super) packet: &'a [u8],
    env: Departure,
    /// A lookahead ran past the end of the frame.
    short: bool,
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
            short: false,
        }
    }

    fn slot(&self, s: Slot) -> u128 {
        self.st.slots[s as usize]
    }

    fn error_code(&self, name: &str) -> u128 {
        self.dp.program.errors.iter().position(|e| e == name).unwrap_or(0) as u128
    }

    pub(super) fn fail(&mut self, name: &str) -> Flow {
        let code = self.error_code(name);
        self.st.slots[self.dp.program.std.parser_error as usize] = code;
        Flow::Reject
    }

    /// The parser: from `start` to accept or reject. On reject the packet goes on to ingress
    /// with `parser_error` set, as v1model on BMv2 does.
    pub(super) fn parse(&mut self) {
        let code = &self.dp.code;
        let mut state = 0;
        for _ in 0..MAX_PARSER_STEPS {
            let s = &code.states[state];
            if self.dp.trace {
                tracing::debug!(target: "p4", switch = %self.dp.name, "parser state {}", s.name);
            }
            // A lookahead past the frame fails the state at once (its block stops there).
            let flow = s.ops.run(self);
            if self.lookahead_failed() || flow == Flow::Reject {
                return self.finish_parse("reject");
            }
            let target = match &s.next {
                CNext::To(t) => *t,
                CNext::Select { keys, cases } => {
                    let mut values = std::mem::take(&mut self.st.key);
                    values.clear();
                    for k in keys.iter() {
                        let v = k(self);
                        values.push(v);
                    }
                    let found = cases
                        .iter()
                        .find(|(sets, _)| sets.iter().zip(&values).all(|(set, v)| set.contains(*v)))
                        .map(|c| c.1);
                    self.st.key = values;
                    if self.lookahead_failed() {
                        return self.finish_parse("reject");
                    }
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

    /// Whether a lookahead ran past the frame and the parser has not yet failed for it.
    pub(super) fn ran_short(&self) -> bool {
        self.short
    }

    /// Whether a lookahead since the last call ran past the frame (then PacketTooShort is
    /// recorded).
    fn lookahead_failed(&mut self) -> bool {
        if !std::mem::take(&mut self.short) {
            return false;
        }
        self.fail("PacketTooShort");
        true
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
    pub(super) fn control(&mut self, block: &Block) {
        block.run(self);
    }

    /// Appends the valid header at `b`, of type `t`, to the deparser's output.
    pub(super) fn emit(&mut self, b: Slot, t: usize) {
        let header = &self.dp.program.headers[t];
        let first = b as usize + 1;
        let values = &self.st.slots[first..first + header.fields.len()];
        self.dp.code.layouts[t].write(&mut self.st.out, values);
    }

    pub(super) fn extract(&mut self, h: &CHeader, t: usize) -> Flow {
        let header = &self.dp.program.headers[t];
        let bits = header.bits() as usize;
        let base = match h {
            CHeader::Next(s) => {
                let i = self.slot(s.base);
                let Some(e) = s.element_in(i) else {
                    return self.fail("StackOutOfBounds");
                };
                self.st.slots[s.base as usize] = i + 1;
                e
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
        if at.is_multiple_of(8) {
            self.dp.code.layouts[t].read(&self.packet[at / 8..], values);
        } else {
            // After an `advance` by bits that are not whole bytes.
            let mut bit = at;
            for (v, w) in values.iter_mut().zip(header.fields.iter().map(|f| f.1)) {
                *v = read_bits(self.packet, bit, w);
                bit += usize::from(w);
            }
        }
        self.st.cursor = at + bits;
        Flow::Next
    }

    /// Applies table `t`: returns whether it hit and the action it ran.
    pub(super) fn apply(&mut self, t: usize) -> (bool, usize) {
        let dp = self.dp;
        let table = &dp.program.tables[t];
        let state = &self.control.tables[t];
        let mut key = std::mem::take(&mut self.st.key);
        key.clear();
        for k in dp.code.keys[t].iter() {
            let v = k(self);
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
        let a = &dp.program.actions[action];
        for (p, v) in a.params.iter().filter(|p| p.control_plane).zip(args) {
            self.st.slots[p.slot as usize] = *v;
        }
        dp.code.actions[action].run(self);
        (is_hit, action)
    }

    pub(super) fn header_base(&mut self, h: &CHeader) -> Option<Slot> {
        match h {
            CHeader::Fixed(s) => Some(*s),
            CHeader::Element(s, i) => {
                let i = i(self);
                s.element_in(i)
            }
            CHeader::Next(s) => s.element_in(self.slot(s.base)),
        }
    }

    fn move_element(&mut self, s: &StackRef, from: u32, to: u32) {
        let (f, t, n) = (s.element(from) as usize, s.element(to) as usize, s.stride as usize);
        self.st.slots.copy_within(f..f + n, t);
    }

    pub(super) fn push_front(&mut self, s: &StackRef, n: u32) {
        for i in (n..s.size).rev() {
            self.move_element(s, i - n, i);
        }
        for i in 0..n.min(s.size) {
            self.st.slots[s.element(i) as usize] = 0;
        }
        let next = self.slot(s.base) + u128::from(n);
        self.st.slots[s.base as usize] = next.min(u128::from(s.size));
    }

    pub(super) fn pop_front(&mut self, s: &StackRef, n: u32) {
        for i in 0..s.size.saturating_sub(n) {
            self.move_element(s, i + n, i);
        }
        for i in s.size.saturating_sub(n)..s.size {
            self.st.slots[s.element(i) as usize] = 0;
        }
        let next = self.slot(s.base).saturating_sub(u128::from(n));
        self.st.slots[s.base as usize] = next;
    }

    pub(super) fn set(&mut self, p: &CPlace, v: u128) {
        match p {
            CPlace::Slot(s, m) => self.st.slots[*s as usize] = v & m,
            CPlace::Element(s, i, off, m) => {
                let i = i(self);
                if let Some(e) = s.element_in(i) {
                    self.st.slots[(e + off) as usize] = v & m;
                }
            }
            CPlace::Slice(inner, lo, m) => {
                let old = self.get(inner);
                let m = m << lo;
                self.set(inner, (old & !m) | ((v << lo) & m));
            }
        }
    }

    fn get(&mut self, p: &CPlace) -> u128 {
        match p {
            CPlace::Slot(s, _) => self.slot(*s),
            CPlace::Element(s, i, off, _) => {
                let i = i(self);
                s.element_in(i).map_or(0, |e| self.slot(e + off))
            }
            CPlace::Slice(inner, lo, m) => (self.get(inner) >> lo) & m,
        }
    }

    /// The `w` bits `skip` bits past the cursor, of a lookahead at a type `need` bits long; 0, and
    /// the parser fails with PacketTooShort after the expression, when the frame is shorter.
    pub(super) fn lookahead(&mut self, skip: u16, w: u16, need: u32) -> u128 {
        if self.st.cursor + need as usize > self.packet.len() * 8 {
            self.short = true;
            return 0;
        }
        read_bits(self.packet, self.st.cursor + usize::from(skip), w)
    }

    /// One of intlab's exact values of this frame's departure.
    pub(super) fn intlab(&self, v: IntlabValue) -> u128 {
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
    fn pack(&mut self, items: &[CItem]) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.st.list);
        buf.clear();
        let mut packer = BitPacker::new(&mut buf);
        // A header's fields come one after another with one validity slot: looked up once.
        let mut valid: Option<(Slot, bool)> = None;
        for it in items {
            if let Some(v) = it.valid {
                let is = match valid {
                    Some((slot, is)) if slot == v => is,
                    _ => self.slot(v) != 0,
                };
                valid = Some((v, is));
                if !is {
                    continue;
                }
            }
            let v = match &it.source {
                ItemSource::Slot(s) => self.st.slots[*s as usize],
                ItemSource::Value(value) => value(self),
            };
            packer.push(v, it.width);
        }
        packer.finish();
        buf
    }

    pub(super) fn external(&mut self, x: &CExtern) {
        let std = self.dp.program.std;
        match x {
            CExtern::MarkToDrop => {
                self.st.slots[std.egress_spec as usize] = u128::from(super::DROP_PORT);
                self.st.slots[std.mcast_grp as usize] = 0;
                if self.dp.trace {
                    tracing::debug!(target: "p4", switch = %self.dp.name, "mark_to_drop");
                }
            }
            CExtern::Hash {
                out,
                algo,
                base,
                data,
                max,
            } => {
                let buf = self.pack(data);
                let h = u128::from(hash::hash(*algo, &buf));
                self.st.list = buf;
                let (base, max) = (base(self), max(self));
                let v = base.wrapping_add(if max > 0 { h % max } else { h });
                self.set(out, v);
            }
            CExtern::Checksum {
                verify,
                condition,
                data,
                field,
                current,
                payload,
            } => {
                if condition(self) == 0 {
                    return;
                }
                let buf = self.pack(data);
                let after = match payload {
                    true => self.packet.get(self.st.header_bytes..).unwrap_or(&[]),
                    false => &[],
                };
                let sum = u128::from(hash::csum16_of(&buf, after));
                self.st.list = buf;
                if *verify {
                    if current(self) != sum {
                        self.st.slots[std.checksum_error as usize] = 1;
                    }
                } else {
                    self.set(field, sum);
                }
            }
            CExtern::RegisterRead(r, out, i) => {
                let i = i(self) as usize;
                let v = self.dp.register_read(*r, i).unwrap_or(0);
                self.set(out, u128::from(v));
            }
            CExtern::RegisterWrite(r, i, v) => {
                let (i, v) = (i(self) as usize, v(self));
                self.dp.register_write(*r, i, v as u64);
            }
            CExtern::Count(c, i) => {
                let i = i(self) as usize;
                let bytes = self.slot(std.packet_length) as u64;
                if let Some(cell) = self.dp.counters.get(*c).and_then(|x| x.get(i)) {
                    cell[0].fetch_add(1, Ordering::Relaxed);
                    cell[1].fetch_add(bytes, Ordering::Relaxed);
                }
            }
            CExtern::Clone { session, field_list } => {
                self.st.clone_session = Some(session(self) as u32);
                self.st.clone_field_list = *field_list;
            }
            CExtern::Truncate(n) => self.st.truncate = Some(n(self) as usize),
            CExtern::Log(fmt, values) => {
                let mut text = String::with_capacity(fmt.len());
                let mut parts = fmt.split("{}");
                text.push_str(parts.next().unwrap_or(""));
                for (i, part) in parts.enumerate() {
                    match values.get(i) {
                        Some(v) => {
                            let v = v(self);
                            text.push_str(&v.to_string());
                        }
                        None => text.push_str("{}"),
                    }
                    text.push_str(part);
                }
                tracing::info!(target: "p4", switch = %self.dp.name, "log_msg: {text}");
            }
            CExtern::Random(out, lo, hi) => {
                let (lo, hi) = (lo(self), hi(self));
                self.st.random = self.st.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.st.random;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                let span = hi.saturating_sub(lo).saturating_add(1);
                self.set(out, lo + u128::from(z) % span);
            }
            CExtern::Assert(c) => {
                if c(self) == 0 {
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
        let dp = self.dp;
        dp.code.deparser.run(self);
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
