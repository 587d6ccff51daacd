//! What a run does at each compiled part of the program: the parser's states and their
//! transitions, control blocks, headers extracted, places read and written, lists packed and
//! externs called. The parts are [`super::code`]'s; the run they act on is [`super::run`]'s.

use std::sync::atomic::Ordering;

use super::DigestMessage;
use super::code::{Block, CExtern, CHeader, CItem, CNext, CPlace, ItemSource};
use super::hash::{self, BitPacker, read_bits};
use super::run::{Flow, MAX_PARSER_STEPS, Run, fold16, push_varbit, read_varbit};
use crate::ir::{Algorithm, BlockKind, ChecksumOp, CounterKind, Slot, Target, mask};

impl Run<'_> {
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

    /// Runs a control's statements (`exit` ends the control).
    pub(super) fn control(&mut self, block: &Block) {
        block.run(self);
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

    pub(super) fn get(&mut self, p: &CPlace) -> u128 {
        match p {
            CPlace::Slot(s, _) => self.slot(*s),
            CPlace::Element(s, i, off, _) => {
                let i = i(self);
                s.element_in(i).map_or(0, |e| self.slot(e + off))
            }
            CPlace::Slice(inner, lo, m) => (self.get(inner) >> lo) & m,
        }
    }

    /// Packs a field list into `st.list` (BMv2's layout) and returns it.
    pub(super) fn pack(&mut self, items: &[CItem]) -> Vec<u8> {
        self.pack_aligned(items, false)
    }

    /// [`Run::pack`], the padding in front when `right_aligned` (PSA's `Hash`).
    pub(super) fn pack_aligned(&mut self, items: &[CItem], right_aligned: bool) -> Vec<u8> {
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
    pub(super) fn values(&mut self, items: &[CItem]) -> Vec<u128> {
        items
            .iter()
            .map(|it| match &it.source {
                ItemSource::Slot(s) => self.st.slots[*s as usize],
                ItemSource::Value(value) => value(self),
            })
            .collect()
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
            CExtern::Hash { .. }
            | CExtern::Checksum { .. }
            | CExtern::HashValue { .. }
            | CExtern::ChecksumState { .. } => self.hash_extern(x),
            CExtern::RegisterRead(..) | CExtern::RegisterWrite(..) | CExtern::Count(..) | CExtern::Meter { .. } => {
                self.stateful_extern(x)
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

    /// A hash or checksum: computed into a field, verified, or an incremental checksum's method.
    fn hash_extern(&mut self, x: &CExtern) {
        let std = self.dp.program.std;
        match x {
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
            _ => unreachable!("external passes only hashes and checksums"),
        }
    }

    /// An extern with state across packets: a register's read or write, a counter, a meter.
    fn stateful_extern(&mut self, x: &CExtern) {
        let std = self.dp.program.std;
        match x {
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
                        self.dp.meter_cell(*meter, i).map(|c| c.execute(now, units))
                    }
                    None => self.hit_meter.as_ref().map(|s| s.meter.execute(now, units)),
                };
                let color = color.unwrap_or(super::meter::GREEN);
                let color = if *psa_colors {
                    super::meter::psa_color(color)
                } else {
                    color
                };
                self.set(out, color);
            }
            _ => unreachable!("external passes only registers, counters and meters"),
        }
    }

    /// An incremental Internet checksum object's method (PSA's `InternetChecksum`).
    pub(super) fn checksum_state(
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
}
