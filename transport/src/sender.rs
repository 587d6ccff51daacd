//! The sending side of a reliable-connection QP: segmentation into MTU packets with PSNs,
//! pacing on an exact virtual schedule, a window, go-back-N on NAK, retransmission timeout with
//! backoff, and the congestion controller's feedback.

use int_format::int::{HopRecord, source};
use int_format::roce::{BthRepr, Opcode, RethRepr};
use intlab_runtime::Hiccup;

use crate::cc::{Ack, Controller};
use crate::content;
use crate::flow::{FlowRecord, FlowSpec, MessageKind, Sample};
use crate::packet::{self, Addressing, Extension};

const PSN_MASK: u32 = 0x00ff_ffff;
/// Ethernet + IPv4 + UDP bytes the kernel adds to every datagram.
pub const WIRE_OVERHEAD: u64 = 14 + 20 + 8;

/// Timers of a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderTiming {
    /// Initial retransmission timeout (ns).
    pub rto_ns: u64,
    /// Largest timeout after backoff (ns).
    pub rto_max_ns: u64,
    /// How far behind schedule pacing may catch up in one burst (ns): a late wake-up sends what
    /// was due, but an idle sender does not bank credit.
    pub burst_credit_ns: u64,
    /// Time-series spacing (ns); 0 records nothing.
    pub sample_every_ns: u64,
    /// An endpoint wake-up this late (ns) is a stall.
    pub stall_ns: u64,
}

/// A sending QP.
#[derive(Debug)]
pub struct SendQp {
    spec: FlowSpec,
    cc: Box<dyn Controller>,
    int: Option<source::SourceConfig>,
    mtu: u64,
    packets: u64,
    una: u64,
    nxt: u64,
    high: u64,
    next_send_ns: u64,
    send_time: Vec<u64>,
    sent_count: Vec<u8>,
    /// Per packet: the first sent after the host stalled (see [`Ack::after_stall`]).
    after_stall: Vec<bool>,
    stall_pending: bool,
    /// The lab's latest hiccup: a packet in flight then gives no RTT sample.
    hiccup: Option<Hiccup>,
    timing: SenderTiming,
    rto_ns: u64,
    rto_deadline: Option<u64>,
    record: FlowRecord,
    series: Vec<Sample>,
    last_sample_ns: Option<u64>,
    /// One packet's payload, filled before each send.
    scratch: Vec<u8>,
    rtt_sum: u128,
    rtt_count: u64,
    /// The latest RTT sample (ns).
    last_rtt_ns: Option<u64>,
    /// Retransmission timeouts since a new byte was last acknowledged.
    timeouts_in_a_row: u32,
}

/// A packet index from its 24-bit PSN, near `base` (PSN of `base` = base & mask).
fn unwrap_psn(psn: u32, base: u64) -> i64 {
    let diff = (psn.wrapping_sub(base as u32) & PSN_MASK) as i64;
    let signed = if diff >= 1 << 23 { diff - (1 << 24) } else { diff };
    base as i64 + signed
}

impl SendQp {
    /// A QP that will send `spec`'s message in packets of `mtu` payload bytes.
    pub fn new(
        spec: FlowSpec,
        cc: Box<dyn Controller>,
        int: Option<source::SourceConfig>,
        mtu: u64,
        timing: SenderTiming,
    ) -> SendQp {
        let packets = spec.size.div_ceil(mtu).max(1);
        SendQp {
            record: FlowRecord {
                id: spec.id,
                src: spec.src,
                dst: spec.dst,
                size: spec.size,
                start_ns: spec.start_ns,
                end_ns: None,
                packets_sent: 0,
                retransmissions: 0,
                timeouts: 0,
                naks: 0,
                cnps: 0,
                wire_bytes: 0,
                rtt_min_ns: None,
                rtt_mean_ns: None,
            },
            spec,
            cc,
            int,
            mtu,
            packets,
            una: 0,
            nxt: 0,
            high: 0,
            next_send_ns: spec.start_ns,
            send_time: vec![0; packets as usize],
            sent_count: vec![0; packets as usize],
            after_stall: vec![false; packets as usize],
            stall_pending: false,
            hiccup: None,
            rto_ns: timing.rto_ns,
            timing,
            rto_deadline: None,
            series: Vec::new(),
            last_sample_ns: None,
            scratch: vec![0; mtu as usize],
            rtt_sum: 0,
            rtt_count: 0,
            last_rtt_ns: None,
            timeouts_in_a_row: 0,
        }
    }

    /// The flow.
    pub fn spec(&self) -> &FlowSpec {
        &self.spec
    }

    /// True once every byte is acknowledged.
    pub fn is_done(&self) -> bool {
        self.record.end_ns.is_some()
    }

    fn bytes_before(&self, idx: u64) -> u64 {
        (idx * self.mtu).min(self.spec.size)
    }

    fn payload_len(&self, idx: u64) -> u64 {
        self.bytes_before(idx + 1) - self.bytes_before(idx)
    }

    fn window_allows(&self) -> bool {
        let in_flight = self.bytes_before(self.nxt) - self.bytes_before(self.una);
        in_flight == 0
            || self
                .cc
                .window_bytes()
                .is_none_or(|w| in_flight + self.payload_len(self.nxt) <= w)
    }

    /// True when the next packet may go now.
    pub fn ready(&self, now: u64) -> bool {
        !self.is_done()
            && now >= self.spec.start_ns
            && self.nxt < self.packets
            && now >= self.next_send_ns
            && self.window_allows()
    }

    /// Builds the next packet into `buf` as a whole IPv4 packet (to UDP port `dst_port`, TOS
    /// `tos`) and returns its length (the caller sends it now).
    pub fn build_next(
        &mut self,
        now: u64,
        buf: &mut [u8],
        a: &Addressing,
        dst_port: u16,
        tos: u8,
    ) -> int_format::Result<usize> {
        let idx = self.nxt;
        let first = idx == 0;
        let last = idx + 1 == self.packets;
        let opcode = match (self.spec.kind, first, last) {
            (MessageKind::Write, true, true) => Opcode::WriteOnly,
            (MessageKind::Write, true, false) => Opcode::WriteFirst,
            (MessageKind::Write, false, false) => Opcode::WriteMiddle,
            (MessageKind::Write, false, true) => Opcode::WriteLast,
            (MessageKind::Send, true, true) => Opcode::SendOnly,
            (MessageKind::Send, true, false) => Opcode::SendFirst,
            (MessageKind::Send, false, false) => Opcode::SendMiddle,
            (MessageKind::Send, false, true) => Opcode::SendLast,
        };
        let mut bth = BthRepr::new(opcode, self.spec.id, (idx as u32) & PSN_MASK);
        bth.ack_req = true;
        let ext = if opcode.has_reth() {
            Extension::Reth(RethRepr {
                virtual_addr: 0,
                rkey: self.spec.id,
                dma_len: self.spec.size.min(u64::from(u32::MAX)) as u32,
            })
        } else {
            Extension::None
        };
        let len = self.payload_len(idx) as usize;
        let offset = self.bytes_before(idx);
        let payload = &mut self.scratch[..len];
        content::fill(self.spec.id, offset, payload);
        let n = packet::write_ipv4(buf, a, dst_port, tos, self.int.as_ref(), &bth, ext, payload)?;

        let wire = (n - packet::IPV4_UDP_HEADERS) as u64 + WIRE_OVERHEAD;
        let rate = self.cc.rate_bps().max(1);
        let base = self.next_send_ns.max(now.saturating_sub(self.timing.burst_credit_ns));
        self.next_send_ns = base + wire * 8_000_000_000 / rate;
        let i = idx as usize;
        self.send_time[i] = now;
        self.sent_count[i] = self.sent_count[i].saturating_add(1);
        self.after_stall[i] = std::mem::take(&mut self.stall_pending);
        if idx < self.high {
            self.record.retransmissions += 1;
        }
        self.record.packets_sent += 1;
        self.record.wire_bytes += wire;
        self.nxt += 1;
        self.high = self.high.max(self.nxt);
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto_ns);
        }
        Ok(n)
    }

    /// An ACK for `psn` (cumulative) with the receiver's echo of the INT hops (path order).
    /// Returns false when the PSN is outside what was sent.
    pub fn on_ack(&mut self, psn: u32, now: u64, hops: &[HopRecord]) -> bool {
        let idx = unwrap_psn(psn, self.una);
        if idx < self.una as i64 - 1 || idx >= self.high as i64 {
            return false;
        }
        let newly = if idx >= self.una as i64 {
            let acked = idx as u64;
            let before = self.bytes_before(self.una);
            self.una = acked + 1;
            self.nxt = self.nxt.max(self.una);
            self.rto_ns = self.timing.rto_ns;
            self.rto_deadline = (self.una < self.high).then_some(now + self.rto_ns);
            self.timeouts_in_a_row = 0;
            self.bytes_before(self.una) - before
        } else {
            0
        };
        let acked_idx = (idx.max(0) as u64).min(self.packets - 1) as usize;
        let sent_at = self.send_time[acked_idx];
        // A flight during which the lab froze measured the machine, not the network (a real
        // network does not freeze): a delay-based controller would answer a 25 us hiccup on
        // an 11 us RTT with a cut to its minimum rate.
        let rtt = (newly > 0 && self.sent_count[acked_idx] == 1)
            .then(|| now.saturating_sub(sent_at))
            .filter(|_| !self.hiccup.is_some_and(|h| h.overlaps(sent_at, now)));
        if let Some(r) = rtt {
            self.rtt_sum += u128::from(r);
            self.rtt_count += 1;
            self.last_rtt_ns = Some(r);
            self.record.rtt_min_ns = Some(self.record.rtt_min_ns.map_or(r, |m| m.min(r)));
            self.record.rtt_mean_ns = Some((self.rtt_sum / u128::from(self.rtt_count)) as u64);
        }
        self.cc.on_ack(&Ack {
            now_ns: now,
            acked_bytes: self.bytes_before(self.una),
            sent_bytes: self.bytes_before(self.nxt),
            newly_acked: newly,
            rtt_ns: rtt,
            hops,
            after_stall: self.after_stall[acked_idx],
        });
        let qlen = hops.iter().filter_map(|h| h.queue_occupancy).max().map(u64::from);
        self.sample(now, qlen, rtt);
        if self.una >= self.packets && self.record.end_ns.is_none() {
            self.record.end_ns = Some(now);
            self.rto_deadline = None;
        }
        true
    }

    /// The lab's latest hiccup is `h` (see [`Hiccup`]): an ACK of a packet in flight during it
    /// gives no RTT sample.
    pub fn note_hiccup(&mut self, h: Hiccup) {
        self.hiccup = Some(h);
    }

    /// The host's thread stalled: the next packet's INT change spans the stall.
    pub fn note_stall(&mut self) {
        self.stall_pending = true;
    }

    /// A NAK (PSN sequence error): the receiver expects `psn`; go back to it.
    pub fn on_nak(&mut self, psn: u32, now: u64) -> bool {
        let idx = unwrap_psn(psn, self.una);
        if idx < self.una as i64 || idx > self.high as i64 {
            return false;
        }
        self.una = idx as u64;
        self.nxt = self.una;
        self.record.naks += 1;
        self.cc.on_loss(now);
        self.rto_deadline = Some(now + self.rto_ns);
        true
    }

    /// A CNP for this QP.
    pub fn on_cnp(&mut self, now: u64) {
        self.record.cnps += 1;
        self.cc.on_cnp(now);
        self.sample(now, None, None);
    }

    /// Fires the retransmission timer and the controller's timer when due.
    pub fn on_timers(&mut self, now: u64) {
        if self.rto_deadline.is_some_and(|d| now >= d) && !self.is_done() {
            self.record.timeouts += 1;
            self.timeouts_in_a_row += 1;
            self.nxt = self.una;
            self.rto_ns = (self.rto_ns * 2).min(self.timing.rto_max_ns);
            self.rto_deadline = Some(now + self.rto_ns);
            self.cc.on_timeout(now);
        }
        if self.cc.next_timer_ns().is_some_and(|t| now >= t) {
            self.cc.on_timer(now);
            self.sample(now, None, None);
        }
    }

    /// When something next needs doing (ns): a packet to pace out, a timer.
    pub fn next_event_ns(&self) -> Option<u64> {
        if self.is_done() {
            return None;
        }
        let send =
            (self.nxt < self.packets && self.window_allows()).then_some(self.next_send_ns.max(self.spec.start_ns));
        [send, self.next_timer_ns()].into_iter().flatten().min()
    }

    /// Its next timer (retransmission, controller), leaving out when it may next send: for a
    /// queue pair already waiting for the NIC, which wakes the host itself when it frees.
    pub fn next_timer_ns(&self) -> Option<u64> {
        if self.is_done() {
            return None;
        }
        [self.rto_deadline, self.cc.next_timer_ns()].into_iter().flatten().min()
    }

    fn sample(&mut self, now: u64, qlen_bytes: Option<u64>, rtt_ns: Option<u64>) {
        let every = self.timing.sample_every_ns;
        if every == 0 || self.last_sample_ns.is_some_and(|t| now < t + every) {
            return;
        }
        self.last_sample_ns = Some(now);
        self.series.push(Sample {
            t_ns: now,
            acked_bytes: self.bytes_before(self.una),
            rate_bps: self.cc.rate_bps(),
            window_bytes: self.cc.window_bytes(),
            utilization: self.cc.utilization(),
            qlen_bytes,
            rtt_ns,
            target_delay_ns: self.cc.target_delay_ns(),
        });
    }

    /// The record and time series, at the end.
    pub fn finish(self) -> (FlowRecord, Vec<Sample>) {
        (self.record, self.series)
    }

    /// The record so far.
    pub fn record(&self) -> &FlowRecord {
        &self.record
    }

    /// The flow as it stands now.
    pub fn now(&self) -> crate::flow::FlowNow {
        let done = self.is_done();
        crate::flow::FlowNow {
            id: self.spec.id,
            src: self.spec.src,
            dst: self.spec.dst,
            size: self.spec.size,
            acked_bytes: self.bytes_before(self.una),
            wire_bytes: self.record.wire_bytes,
            retransmissions: self.record.retransmissions,
            rate_bps: if done { 0 } else { self.cc.rate_bps() },
            window_bytes: self.cc.window_bytes(),
            rtt_ns: self.last_rtt_ns,
            done,
        }
    }

    /// Retransmission timeouts since a new byte was last acknowledged.
    pub fn timeouts_in_a_row(&self) -> u32 {
        self.timeouts_in_a_row
    }

    /// Its congestion controller.
    pub fn controller(&self) -> &dyn Controller {
        &*self.cc
    }

    /// Packets of the message acknowledged so far, and in all.
    pub fn packets_acked(&self) -> (u64, u64) {
        (self.una, self.packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::Ipv4Addr;

    use crate::cc::LineRate;
    use crate::packet::{self, Addressing};

    fn sender(kind: MessageKind, size: u64) -> SendQp {
        let spec = FlowSpec {
            id: 1,
            src: Ipv4Addr::LOCALHOST,
            dst: Ipv4Addr::LOCALHOST,
            size,
            start_ns: 0,
            kind,
            src_port: crate::flow::source_port(0),
        };
        let timing = SenderTiming {
            rto_ns: 1 << 40,
            rto_max_ns: 1 << 41,
            burst_credit_ns: 1 << 40,
            sample_every_ns: 0,
            stall_ns: 1 << 40,
        };
        SendQp::new(spec, Box::new(LineRate(1_000_000_000_000)), None, 1000, timing)
    }

    const ADDRESSING: Addressing = Addressing {
        src: Ipv4Addr::LOCALHOST,
        dst: Ipv4Addr::LOCALHOST,
        src_port: 49153,
    };

    fn opcodes(kind: MessageKind, size: u64) -> Vec<Opcode> {
        let mut qp = sender(kind, size);
        let a = ADDRESSING;
        let mut buf = [0u8; 2048];
        let mut ops = Vec::new();
        let mut now = 0;
        while !qp.is_done() && qp.nxt < qp.packets {
            now += 1_000_000;
            assert!(qp.ready(now), "paced sender is ready a millisecond later");
            let n = qp.build_next(now, &mut buf, &a, 4791, 0x02).unwrap();
            let ip = int_format::ipv4::Ipv4Packet::new_checked(&buf[..n]).unwrap();
            assert!(ip.verify_checksum() && ip.dont_frag() && ip.ident() == 0);
            assert_eq!(usize::from(ip.total_len()), n);
            let r = packet::parse(&buf[packet::IPV4_UDP_HEADERS..n], false, &a).unwrap();
            assert_eq!(r.reth.is_some(), r.bth.opcode.has_reth());
            ops.push(r.bth.opcode);
        }
        ops
    }

    #[test]
    fn messages_are_segmented_into_the_right_opcodes() {
        use Opcode::*;
        assert_eq!(
            opcodes(MessageKind::Write, 2500),
            vec![WriteFirst, WriteMiddle, WriteLast]
        );
        assert_eq!(opcodes(MessageKind::Write, 1000), vec![WriteOnly]);
        assert_eq!(opcodes(MessageKind::Send, 2001), vec![SendFirst, SendMiddle, SendLast]);
        assert_eq!(opcodes(MessageKind::Send, 10), vec![SendOnly]);
    }

    #[test]
    fn a_packet_in_flight_while_the_lab_froze_gives_no_rtt_sample() {
        let mut qp = sender(MessageKind::Write, 3000);
        let mut buf = [0u8; 2048];
        for at in [1_000_000, 2_000_000, 3_000_000] {
            qp.build_next(at, &mut buf, &ADDRESSING, 4791, 0x02).unwrap();
        }
        qp.note_hiccup(Hiccup {
            start_ns: 2_500_000,
            end_ns: 2_900_000,
        });
        // Sent before the hiccup and acknowledged before it; across it; after it.
        assert!(qp.on_ack(0, 1_010_000, &[]));
        assert!(qp.on_ack(1, 3_500_000, &[]));
        assert!(qp.on_ack(2, 3_010_000, &[]));
        assert_eq!(qp.record().rtt_min_ns, Some(10_000));
        assert_eq!(qp.record().rtt_mean_ns, Some(10_000));
    }

    #[test]
    fn psn_unwrapping_around_the_24_bit_edge() {
        assert_eq!(unwrap_psn(5, 3), 5);
        assert_eq!(unwrap_psn(1, 3), 1);
        assert_eq!(unwrap_psn(2, (1 << 24) - 2), (1 << 24) + 2);
        assert_eq!(unwrap_psn(PSN_MASK, 1 << 24), (1 << 24) - 1);
    }
}
