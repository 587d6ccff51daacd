//! One packet's run through a part of the pipeline: its state and the primitives the compiled
//! program calls on (slots, table lookups, lookahead, emitting and writing headers). What a run
//! does at each compiled part (parser states, blocks, externs) is the `step` module's.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::hash::{self, BitPacker, read_bits};
use super::table::{EntryState, TableState, Via};
use super::{ControlPlane, Datapath, Departure, PacketState};
use crate::ir::{Algorithm, BlockKind, CaseMatch, IntlabValue, Slot, StackRef, mask};

/// Parser states a packet may pass through before the parser gives up (`ParserTimeout`).
pub(super) const MAX_PARSER_STEPS: usize = 1000;

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
    pub(super) control: &'a ControlPlane,
    pub(super) st: &'a mut PacketState,
    pub(super) packet: &'a [u8],
    pub(super) env: Departure,
    /// A lookahead ran past the end of the frame.
    pub(super) short: bool,
    /// The direct meter cell of the entry the last table hit, for `direct_meter.read`.
    pub(super) hit_meter: Option<Arc<EntryState>>,
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

    pub(super) fn slot(&self, s: Slot) -> u128 {
        self.st.slots[s as usize]
    }

    pub(super) fn error_code(&self, name: &str) -> u128 {
        // The core library's errors come first in every program, in its order.
        self.dp.program.errors.iter().position(|e| e == name).unwrap_or(0) as u128
    }

    pub(super) fn fail(&mut self, name: &str) -> Flow {
        let code = self.error_code(name);
        self.st.slots[self.dp.program.std.parser_error as usize] = code;
        Flow::Reject
    }

    /// The time of this pass for meters: the arrival in ingress, the departure in egress.
    pub(super) fn now_micros(&self) -> u64 {
        self.env.departure_ns.max(self.env.arrival_ns) / 1000
    }

    pub(super) fn case_matches(&self, m: &CaseMatch, values: &[u128]) -> bool {
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
    pub(super) fn lookahead_failed(&mut self) -> bool {
        if !std::mem::take(&mut self.short) {
            return false;
        }
        self.fail("PacketTooShort");
        true
    }

    pub(super) fn finish_parse(&mut self, how: &str) {
        self.st.header_bytes = self.st.cursor.div_ceil(8);
        if self.dp.trace {
            tracing::debug!(target: "p4", switch = %self.dp.name, "parser: {how} after {} header bytes", self.st.header_bytes);
        }
    }

    /// Egress starts where ingress's deparser left the headers.
    pub(super) fn cursor_to_headers(&mut self) {
        self.st.cursor = self.st.header_bytes * 8;
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
    pub(super) fn emit_varbit(&mut self, b: Slot, t: usize) {
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
                    self.hit_meter = Some(e.state.clone());
                }
                if table.idle_timeout {
                    e.state.last_hit.store(self.now_micros() * 1000, Ordering::Relaxed);
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
    pub(super) fn select_member(&mut self, t: usize, p: usize, g: u32) -> Option<u32> {
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

    pub(super) fn move_element(&mut self, s: &StackRef, from: u32, to: u32) {
        let (f, t, n) = (s.element(from) as usize, s.element(to) as usize, s.stride as usize);
        self.st.slots.copy_within(f..f + n, t);
    }

    /// Makes every header of the stack element at `base` invalid (a header, or a union's).
    pub(super) fn invalidate_element(&mut self, s: &StackRef, i: u32) {
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

    /// A random value.
    pub(super) fn random(&mut self) -> u64 {
        // splitmix64: cheap, and uniform enough for what P4 programs draw.
        self.st.random = self.st.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.st.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The hash of a packed field list by `algo`.
    pub(super) fn hash_of(&mut self, algo: Algorithm, buf: &[u8]) -> u128 {
        match algo {
            Algorithm::Random => u128::from(self.random()),
            a => u128::from(hash::hash(a, buf)),
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
pub(super) fn fold16(mut sum: u64) -> u16 {
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
pub(super) fn push_varbit(p: &mut BitPacker<'_>, slots: &[u128], max: u16) {
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
pub(super) fn read_varbit(packet: &[u8], at: usize, len: usize, chunks: &mut [u128]) {
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
