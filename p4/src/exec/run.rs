//! One packet's run through a part of the pipeline: what the compiled program
//! ([`super::code`]) calls on, the parser's and the deparser's loops, tables and the externs.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use super::code::{Block, CExtern, CHeader, CItem, CNext, CPlace, ItemSource};
use super::hash::{self, BitPacker, read_bits};
use super::meter::MeterCell;
use super::table::{TableState, Via};
use super::{ControlPlane, Datapath, Departure, DigestMessage, PacketState};
use crate::ir::{Algorithm, BlockKind, CaseMatch, ChecksumOp, CounterKind, IntlabValue, Slot, StackRef, Target, mask};

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
    Break,
    Continue,
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
    /// The direct meter cell of the entry the last table hit, for `direct_meter.read`.
    hit_meter: Option<Arc<Mutex<MeterCell>>>,
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
            hit_meter: None,
        }
    }

    fn slot(&self, s: Slot) -> u128 {
        self.st.slots[s as usize]
    }

    fn error_code(&self, name: &str) -> u128 {
        // The core library's errors come first in every program, in its order.
        self.dp.program.errors.iter().position(|e| e == name).unwrap_or(0) as u128
    }

    pub(super) fn fail(&mut self, name: &str) -> Flow {
        let code = self.error_code(name);
        self.st.slots[self.dp.program.std.parser_error as usize] = code;
        Flow::Reject
    }

    /// The time of this pass for meters: the arrival in ingress, the departure in egress.
    fn now_micros(&self) -> u64 {
        self.env.departure_ns.max(self.env.arrival_ns) / 1000
    }

    /// A parser: from `start` to accept or reject. On reject the packet goes on to ingress
    /// with `parser_error` set, as v1model on BMv2 does.
    pub(super) fn parse(&mut self, kind: BlockKind) {
        let dp = self.dp;
        let states = dp.code.parser(kind);
        if states.is_empty() {
            return;
        }
        let mut state = 0;
        for _ in 0..MAX_PARSER_STEPS {
            let s = &states[state];
            if dp.trace {
                tracing::debug!(target: "p4", switch = %dp.name, "parser state {}", s.name);
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
                    let found = cases.iter().find(|(m, _)| self.case_matches(m, &values)).map(|c| c.1);
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

    fn case_matches(&self, m: &CaseMatch, values: &[u128]) -> bool {
        match m {
            CaseMatch::Keys(sets) => sets.iter().zip(values).all(|(set, v)| set.contains(*v)),
            CaseMatch::ValueSet(id) => self.control.value_sets[*id]
                .iter()
                .any(|member| member.iter().zip(values).all(|(set, v)| set.contains(*v))),
        }
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
    #[inline]
    pub(super) fn emit(&mut self, b: Slot, t: usize) {
        let header = &self.dp.program.headers[t];
        let first = b as usize + 1;
        if header.varbit.is_some() {
            return self.emit_varbit(b, t);
        }
        let values = &self.st.slots[first..first + header.fields.len()];
        self.dp.code.layouts[t].write(&mut self.st.out, values);
    }

    /// [`Run::emit`] of a header with a varbit: its fields packed one by one, the varbit at its
    /// length.
    #[cold]
    #[inline(never)]
    fn emit_varbit(&mut self, b: Slot, t: usize) {
        let header = &self.dp.program.headers[t];
        let mut bytes = std::mem::take(&mut self.st.list);
        bytes.clear();
        let mut p = BitPacker::new(&mut bytes);
        for (i, (_, w)) in header.fields.iter().enumerate() {
            let at = b as usize + header.field_slot(i) as usize;
            let v = self.st.slots[at];
            if Some(i) == header.varbit {
                push_varbit(&mut p, &self.st.slots[at..], *w);
            } else {
                p.push(v, *w);
            }
        }
        p.finish();
        self.st.out.extend_from_slice(&bytes);
        self.st.list = bytes;
    }

    /// `extract(h)`, or `extract(h, bits)` of a header with a varbit.
    pub(super) fn extract(&mut self, h: &CHeader, t: usize, varbit_bits: Option<u128>) -> Flow {
        let header = &self.dp.program.headers[t];
        let var = varbit_bits.unwrap_or(0);
        if header.varbit.is_some() && !var.is_multiple_of(8) {
            return self.fail("ParserInvalidArgument");
        }
        let bits = header.bits() as usize + var as usize;
        let base = match h {
            CHeader::Next(s, off) => {
                let i = self.slot(s.base);
                let Some(e) = s.element_in(i) else {
                    return self.fail("StackOutOfBounds");
                };
                e + off
            }
            h => match self.header_base(h) {
                Some(b) => b,
                None => return self.fail("StackOutOfBounds"),
            },
        };
        if self.st.cursor + bits > self.packet.len() * 8 {
            return self.fail("PacketTooShort");
        }
        if let Some(vi) = header.varbit
            && var > u128::from(header.fields[vi].1)
        {
            return self.fail("HeaderTooShort");
        }
        if let CHeader::Next(s, _) = h {
            self.st.slots[s.base as usize] = self.slot(s.base) + 1;
        }
        let at = self.st.cursor;
        self.st.slots[base as usize] = 1;
        let first = base as usize + 1;
        if header.varbit.is_none() && at.is_multiple_of(8) {
            let values = &mut self.st.slots[first..first + header.fields.len()];
            self.dp.code.layouts[t].read(&self.packet[at / 8..], values);
        } else {
            // After an `advance` by bits that are not whole bytes, or around a varbit.
            let mut bit = at;
            let chunks = header.varbit_chunks() as usize;
            for (i, (_, w)) in header.fields.iter().enumerate() {
                let slot = base as usize + header.field_slot(i) as usize;
                if Some(i) == header.varbit {
                    self.st.slots[slot] = var;
                    read_varbit(
                        self.packet,
                        bit,
                        var as usize,
                        &mut self.st.slots[slot + 1..slot + 1 + chunks],
                    );
                    bit += var as usize;
                } else {
                    self.st.slots[slot] = read_bits(self.packet, bit, *w);
                    bit += usize::from(*w);
                }
            }
        }
        self.st.cursor = at + bits;
        Flow::Next
    }

    /// Applies table `t`: returns whether it hit, the action it ran, and how that action ended.
    pub(super) fn apply(&mut self, t: usize) -> (bool, usize, Flow) {
        let dp = self.dp;
        let table = &dp.program.tables[t];
        let state = &self.control.tables[t];
        let (prep, keys) = &dp.code.keys[t];
        let f = prep.run(self);
        if f != Flow::Next {
            return (false, state.default.0, f);
        }
        let mut key = std::mem::take(&mut self.st.key);
        key.clear();
        for k in keys.iter() {
            let v = k(self);
            key.push(v);
        }
        let mut scratch = std::mem::take(&mut self.st.scratch);
        let hit = state.lookup(&key, &mut scratch);
        self.st.scratch = scratch;
        self.hit_meter = None;
        let (mut action, mut args, is_hit) = match hit {
            Some(e) => {
                if table.direct_counter.is_some() {
                    TableState::count(e, self.slot(self.dp.program.std.packet_length) as u64);
                }
                if table.direct_meter.is_some() {
                    self.hit_meter = Some(e.meter.clone());
                }
                if table.idle_timeout {
                    e.last_hit.store(self.now_micros() * 1000, Ordering::Relaxed);
                }
                (e.entry.action, e.entry.args.as_slice(), true)
            }
            None => (state.default.0, state.default.1.as_slice(), false),
        };
        // A table with an action profile runs its member's action.
        if let Some(p) = table.profile {
            let via = hit.map_or(Via::Action, |e| e.via);
            let member = match via {
                Via::Member(m) => Some(m),
                Via::Group(g) => self.select_member(t, p, g),
                Via::Action => None,
            };
            match member.and_then(|m| self.control.profiles[p].members.get(&m)) {
                Some((a, margs)) => {
                    action = *a;
                    args = margs.as_slice();
                }
                // A member gone, or a group with none, runs the default action.
                None if via != Via::Action => {
                    action = state.default.0;
                    args = state.default.1.as_slice();
                }
                None => {}
            }
        }
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
        for (p, v) in a.params.iter().zip(args) {
            self.st.slots[p.slot as usize] = *v & mask(p.width);
        }
        let flow = dp.code.actions[action].run(self);
        let flow = match flow {
            Flow::Exit | Flow::Reject => flow,
            _ => Flow::Next,
        };
        (is_hit, action, flow)
    }

    /// The member of group `g` of selector `p` that table `t`'s selector keys choose: their
    /// hash, modulo the group's size, as BMv2 chooses.
    fn select_member(&mut self, t: usize, p: usize, g: u32) -> Option<u32> {
        let members = self.control.profiles[p].groups.get(&g)?;
        if members.is_empty() {
            return None;
        }
        let (algo, _width) = self.dp.program.profiles[p].selector?;
        let items = &self.dp.code.selector_keys[t];
        let buf = self.pack(items);
        let h = hash::hash(algo, &buf);
        self.st.list = buf;
        Some(members[(h % members.len() as u64) as usize])
    }

    pub(super) fn header_base(&mut self, h: &CHeader) -> Option<Slot> {
        match h {
            CHeader::Fixed(s) => Some(*s),
            CHeader::Element(s, i, off) => {
                let i = i(self);
                s.element_in(i).map(|e| e + off)
            }
            CHeader::Next(s, off) => s.element_in(self.slot(s.base)).map(|e| e + off),
        }
    }

    fn move_element(&mut self, s: &StackRef, from: u32, to: u32) {
        let (f, t, n) = (s.element(from) as usize, s.element(to) as usize, s.stride as usize);
        self.st.slots.copy_within(f..f + n, t);
    }

    /// Makes every header of the stack element at `base` invalid (a header, or a union's).
    fn invalidate_element(&mut self, s: &StackRef, i: u32) {
        let base = s.element(i) as usize;
        if s.header != usize::MAX {
            self.st.slots[base] = 0;
        } else {
            // A union: its members' validity slots are where its headers start.
            for k in 0..s.stride as usize {
                self.st.slots[base + k] = 0;
            }
        }
    }

    pub(super) fn push_front(&mut self, s: &StackRef, n: u32) {
        for i in (n..s.size).rev() {
            self.move_element(s, i - n, i);
        }
        for i in 0..n.min(s.size) {
            self.invalidate_element(s, i);
        }
        let next = self.slot(s.base) + u128::from(n);
        self.st.slots[s.base as usize] = next.min(u128::from(s.size));
    }

    pub(super) fn pop_front(&mut self, s: &StackRef, n: u32) {
        for i in 0..s.size.saturating_sub(n) {
            self.move_element(s, i + n, i);
        }
        for i in s.size.saturating_sub(n)..s.size {
            self.invalidate_element(s, i);
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
        self.pack_aligned(items, false)
    }

    /// [`Run::pack`], the padding in front when `right_aligned` (PSA's `Hash`).
    fn pack_aligned(&mut self, items: &[CItem], right_aligned: bool) -> Vec<u8> {
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
                ItemSource::Slot(s) if it.varbit => {
                    push_varbit(&mut packer, &self.st.slots[*s as usize..], it.width);
                    continue;
                }
                ItemSource::Slot(s) => self.st.slots[*s as usize],
                ItemSource::Value(value) => value(self),
            };
            packer.push(v, it.width);
        }
        if right_aligned {
            packer.finish_right_aligned();
        } else {
            packer.finish();
        }
        buf
    }

    /// The values of a field list, each at its width.
    fn values(&mut self, items: &[CItem]) -> Vec<u128> {
        items
            .iter()
            .map(|it| match &it.source {
                ItemSource::Slot(s) => self.st.slots[*s as usize],
                ItemSource::Value(value) => value(self),
            })
            .collect()
    }

    /// A random value.
    fn random(&mut self) -> u64 {
        // splitmix64: cheap, and uniform enough for what P4 programs draw.
        self.st.random = self.st.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.st.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The hash of a packed field list by `algo`.
    fn hash_of(&mut self, algo: Algorithm, buf: &[u8]) -> u128 {
        match algo {
            Algorithm::Random => u128::from(self.random()),
            a => u128::from(hash::hash(a, buf)),
        }
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
                ..
            } => {
                let buf = self.pack(data);
                let h = self.hash_of(*algo, &buf);
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
                width,
                algo,
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
                let sum = match algo {
                    Algorithm::Csum16 => u128::from(hash::csum16_of(&buf, after)),
                    a => {
                        let mut all = buf.clone();
                        all.extend_from_slice(after);
                        self.hash_of(*a, &all)
                    }
                } & mask(*width);
                self.st.list = buf;
                if *verify {
                    if current(self) != sum {
                        self.st.slots[std.checksum_error as usize] = 1;
                    }
                } else {
                    self.set(field, sum);
                }
            }
            CExtern::HashValue {
                out,
                algo,
                data,
                base,
                max,
                right_aligned,
                ..
            } => {
                let buf = self.pack_aligned(data, *right_aligned);
                let h = self.hash_of(*algo, &buf);
                self.st.list = buf;
                let (base, max) = (base(self), max(self));
                let v = base.wrapping_add(if max > 0 { h % max } else { h });
                self.set(out, v);
            }
            CExtern::ChecksumState {
                state,
                op,
                data,
                value,
                input,
                ..
            } => self.checksum_state(*state, *op, data, value.as_ref(), input.as_ref()),
            CExtern::RegisterRead(r, out, i) => {
                let i = i(self) as usize;
                // Out of range, BMv2 logs an error and leaves the result as it was.
                match self.dp.register_read(*r, i) {
                    Some(v) => self.set(out, v),
                    None => {
                        tracing::debug!(target: "p4", switch = %self.dp.name, "register {} read at {i}, outside it: result unchanged", self.dp.program.registers[*r].name)
                    }
                }
            }
            CExtern::RegisterWrite(r, i, v) => {
                let (i, v) = (i(self) as usize, v(self));
                if !self.dp.register_write(*r, i, v) {
                    tracing::debug!(target: "p4", switch = %self.dp.name, "register {} written at {i}, outside it: ignored", self.dp.program.registers[*r].name);
                }
            }
            CExtern::Count(c, i) => {
                let i = i(self) as usize;
                if let Some(cell) = self.dp.counters.get(*c).and_then(|cs| cs.get(i)) {
                    let kind = self.dp.program.counters[*c].kind;
                    if kind != CounterKind::Bytes {
                        cell[0].fetch_add(1, Ordering::Relaxed);
                    }
                    if kind != CounterKind::Packets {
                        let len = self.slot(std.packet_length) as u64;
                        cell[1].fetch_add(len, Ordering::Relaxed);
                    }
                }
            }
            CExtern::Meter {
                meter,
                index,
                out,
                psa_colors,
            } => {
                let bytes = self.dp.program.meters[*meter].bytes;
                let units = if bytes { self.packet.len() as u64 } else { 1 };
                let now = self.now_micros();
                let color = match index {
                    Some(i) => {
                        let i = i(self) as usize;
                        self.dp
                            .meter_cell(*meter, i)
                            .map(|c| c.lock().unwrap_or_else(PoisonError::into_inner).execute(now, units))
                    }
                    None => self
                        .hit_meter
                        .as_ref()
                        .map(|c| c.lock().unwrap_or_else(PoisonError::into_inner).execute(now, units)),
                };
                let color = color.unwrap_or(super::meter::GREEN);
                let color = if *psa_colors {
                    super::meter::psa_color(color)
                } else {
                    color
                };
                self.set(out, color);
            }
            CExtern::Clone {
                session, field_list, ..
            } => {
                self.st.clone_session = Some(session(self) as u32);
                self.st.clone_field_list = *field_list;
            }
            CExtern::Resubmit(list) => self.st.resubmit = Some(*list),
            CExtern::Recirculate(list) => self.st.recirculate = Some(*list),
            CExtern::Digest { digest, data } => {
                let values = self.values(data);
                self.dp.push_digest(DigestMessage {
                    digest: *digest,
                    values,
                });
            }
            CExtern::Truncate(n) => self.st.truncate = Some(n(self) as usize),
            CExtern::Log(fmt, values) => {
                let mut line = String::new();
                let mut vals = values.iter();
                let mut rest = fmt.as_str();
                while let Some(i) = rest.find("{}") {
                    line.push_str(&rest[..i]);
                    match vals.next() {
                        Some(v) => line.push_str(&v(self).to_string()),
                        None => line.push_str("{}"),
                    }
                    rest = &rest[i + 2..];
                }
                line.push_str(rest);
                tracing::info!(target: "p4", switch = %self.dp.name, "{line}");
            }
            CExtern::Random(out, lo, hi) => {
                let (lo, hi) = (lo(self), hi(self));
                let z = u128::from(self.random());
                let span = hi.saturating_sub(lo).saturating_add(1);
                self.set(out, lo + z % span.max(1));
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

    /// An incremental Internet checksum object's method (PSA's `InternetChecksum`).
    fn checksum_state(
        &mut self,
        state: Slot,
        op: ChecksumOp,
        data: &[CItem],
        value: Option<&CPlace>,
        input: Option<&super::code::Value>,
    ) {
        let sum = self.slot(state) as u64;
        match op {
            ChecksumOp::Clear => self.st.slots[state as usize] = 0,
            ChecksumOp::Add | ChecksumOp::Subtract => {
                let buf = self.pack(data);
                let part = u64::from(!hash::csum16(&buf));
                self.st.list = buf;
                let folded = fold16(if op == ChecksumOp::Add {
                    sum + part
                } else {
                    sum + u64::from(!(part as u16))
                });
                self.st.slots[state as usize] = u128::from(folded);
            }
            ChecksumOp::Get => {
                if let Some(v) = value {
                    self.set(v, u128::from(!(sum as u16)));
                }
            }
            ChecksumOp::GetState => {
                if let Some(v) = value {
                    self.set(v, u128::from(sum as u16));
                }
            }
            ChecksumOp::SetState => {
                if let Some(i) = input {
                    let v = i(self) & 0xffff;
                    self.st.slots[state as usize] = v;
                }
            }
        }
    }

    /// Runs the deparser: the headers to write go to `st.out`.
    pub(super) fn deparse(&mut self) {
        self.deparse_with(BlockKind::Deparser);
    }

    /// Runs deparser `kind` (PSA's ingress deparser, or the deparser) into `st.out`.
    pub(super) fn deparse_with(&mut self, kind: BlockKind) {
        self.st.out.clear();
        let dp = self.dp;
        dp.code.control(kind).run(self);
    }
}

/// A ones' complement sum folded to 16 bits.
fn fold16(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Packs a varbit stored from `slots[0]` (its length in bits, at most `max`) followed by its
/// data in 128-bit chunks, the first bits in the first chunk's top. Out of line: rare, and
/// inlined it would keep the common fixed-width path from being inlined.
#[cold]
#[inline(never)]
fn push_varbit(p: &mut BitPacker<'_>, slots: &[u128], max: u16) {
    let mut left = (slots[0] as usize).min(usize::from(max));
    for c in &slots[1..] {
        if left == 0 {
            break;
        }
        let take = left.min(128);
        p.push(c >> (128 - take), take as u16);
        left -= take;
    }
}

/// Reads `len` bits at bit `at` of `packet` into varbit chunks (the rest zeroed).
fn read_varbit(packet: &[u8], at: usize, len: usize, chunks: &mut [u128]) {
    let mut bit = at;
    let mut left = len;
    for c in chunks.iter_mut() {
        let take = left.min(128);
        *c = if take == 0 {
            0
        } else {
            read_bits(packet, bit, take as u16) << (128 - take)
        };
        bit += take;
        left -= take;
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
