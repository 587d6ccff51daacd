//! The requester: a QP's send side. It takes the send requests posted to it in order, gives
//! each its PSNs, and turns them into packets (SEND and WRITE segmented into packets of the
//! path MTU, a READ or an atomic as one request), paced on an exact virtual schedule at the
//! rate its congestion controller gives and within the controller's window; it goes back on a
//! NAK or a timeout. What comes back for them (ACKs, NAKs, READ responses, atomic answers) is
//! the completer's (`completer.rs`).
//!
//! Packets are numbered by an index that never wraps (`una`, `nxt`, `high`); the PSN on the wire
//! is the index plus the QP's first PSN, on 24 bits.

use std::collections::VecDeque;

use int_format::roce::{AtomicEthRepr, BthRepr, DethRepr, ImmDt, Opcode, RethRepr};
use intlab_runtime::Hiccup;

use super::{PSN_MASK, Qp, QpState, QpType, RetryPolicy, ack_timeout_ns};
use crate::flow::Sample;
use crate::packet::{self, Extensions, IPV4_UDP_HEADERS, WIRE_OVERHEAD};
use crate::verbs::Verbs;
use crate::verbs::error::VerbsError;
use crate::verbs::wr::{SendOpcode, SendWr, WcStatus, WorkCompletion};

/// Timers of a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderTiming {
    /// Initial retransmission timeout (ns) of the lab's own flows.
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

/// A send request the QP has taken, with the PSNs it was given once started.
#[derive(Debug, Clone)]
pub(crate) struct SendWqe {
    pub(crate) wr: SendWr,
    /// Bytes it moves.
    pub(crate) len: u64,
    /// Its first packet index (once started).
    pub(crate) first: u64,
    /// Its last packet index (once started): for a READ, that of its last response.
    pub(crate) last: u64,
    /// READ responses or the atomic answer received (READ and atomics are complete only then).
    pub(crate) answered: u64,
    /// How it ended, once it has (kept until the completions before it are out).
    pub(crate) status: Option<WcStatus>,
}

/// What the requester knows of one packet index in flight.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct InFlight {
    /// When it was last sent (ns).
    pub(crate) sent_at: u64,
    /// Times it was sent.
    pub(crate) count: u8,
    /// The first packet sent after the host stalled (see `cc::Ack::after_stall`).
    pub(crate) after_stall: bool,
    /// Payload bytes (0 for READ responses' indices and atomics).
    pub(crate) bytes: u32,
}

/// What a QP's sender has counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SenderStats {
    /// Data packets sent, retransmissions included.
    pub packets_sent: u64,
    /// Packets sent again.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// NAKs received (PSN sequence errors).
    pub naks: u64,
    /// RNR NAKs received.
    pub rnr_naks: u64,
    /// CNPs received.
    pub cnps: u64,
    /// Bytes put on the wire for data packets (Ethernet frames, INT included).
    pub wire_bytes: u64,
    /// Messages completed successfully.
    pub messages: u64,
    /// Bytes of the messages completed successfully (a READ's bytes read, an atomic's 8).
    pub message_bytes: u64,
    /// When the first data packet went out (ns).
    pub first_sent_ns: Option<u64>,
    /// When the far end last acknowledged progress (ns).
    pub last_progress_ns: Option<u64>,
    /// Smallest RTT sample (ns).
    pub rtt_min_ns: Option<u64>,
    /// Mean RTT sample (ns).
    pub rtt_mean_ns: Option<u64>,
    /// The latest RTT sample (ns).
    pub rtt_last_ns: Option<u64>,
    pub(crate) rtt_sum: u128,
    pub(crate) rtt_count: u64,
}

/// The send side of a QP.
#[derive(Debug)]
pub(crate) struct Requester {
    /// Posted and not yet completed, in order.
    pub(crate) wqes: VecDeque<SendWqe>,
    /// `wqes[..started]` have their packet indices.
    pub(crate) started: usize,
    /// The oldest packet not acknowledged.
    pub(crate) una: u64,
    /// The next packet to send.
    pub(crate) nxt: u64,
    /// One past the highest packet index given out.
    pub(crate) high: u64,
    /// One past the highest packet index sent (for a READ request, its last response's):
    /// answers beyond it are out of window, and with nothing in flight no timer runs.
    pub(crate) sent_high: u64,
    /// The PSN of index 0.
    pub(crate) psn_base: u32,
    /// Packets `una..high`.
    pub(crate) flight: VecDeque<InFlight>,
    /// The last packet acknowledged (index `una - 1`), for a duplicate ACK of it.
    pub(crate) last_acked: InFlight,
    /// Payload bytes of the packets before `una`, and before `nxt`.
    pub(crate) acked_bytes: u64,
    pub(crate) sent_bytes: u64,
    /// When the next packet may go by pacing (ns).
    pub(crate) next_send_ns: u64,
    /// Nothing is sent before this (a flow's start).
    pub(crate) not_before_ns: u64,
    pub(crate) timing: SenderTiming,
    pub(crate) rto_ns: u64,
    pub(crate) rto_deadline: Option<u64>,
    /// Timeout retries left (counted policy).
    pub(crate) retries_left: u8,
    /// RNR retries left (counted policy; 7 means forever).
    pub(crate) rnr_retries_left: u8,
    /// Sending waits for an RNR NAK's timer until then (ns).
    pub(crate) rnr_until: Option<u64>,
    /// READs and atomics started and not answered.
    pub(crate) rd_atomic_outstanding: u32,
    /// A gap in READ responses was answered by going back (once per gap).
    pub(crate) read_gap_handled: bool,
    pub(crate) stall_pending: bool,
    pub(crate) hiccup: Option<Hiccup>,
    pub(crate) timeouts_in_a_row: u32,
    pub(crate) stats: SenderStats,
    pub(crate) series: Vec<Sample>,
    pub(crate) last_sample_ns: Option<u64>,
    /// One packet's payload, filled before each send.
    pub(crate) scratch: Vec<u8>,
}

impl Requester {
    /// A send side with nothing posted, packets of up to `mtu` bytes.
    pub(crate) fn new(timing: SenderTiming, mtu: u32) -> Requester {
        Requester {
            wqes: VecDeque::new(),
            started: 0,
            una: 0,
            nxt: 0,
            high: 0,
            sent_high: 0,
            psn_base: 0,
            flight: VecDeque::new(),
            last_acked: InFlight::default(),
            acked_bytes: 0,
            sent_bytes: 0,
            next_send_ns: 0,
            not_before_ns: 0,
            rto_ns: timing.rto_ns,
            timing,
            rto_deadline: None,
            retries_left: 7,
            rnr_retries_left: 7,
            rnr_until: None,
            rd_atomic_outstanding: 0,
            read_gap_handled: false,
            stall_pending: false,
            hiccup: None,
            timeouts_in_a_row: 0,
            stats: SenderStats::default(),
            series: Vec::new(),
            last_sample_ns: None,
            scratch: vec![0; mtu as usize],
        }
    }

    /// The PSN of packet index `idx`.
    pub(crate) fn psn(&self, idx: u64) -> u32 {
        (self.psn_base.wrapping_add(idx as u32)) & PSN_MASK
    }

    /// The packet index of `psn`, taken near index `near`.
    pub(crate) fn index_of(&self, psn: u32, near: u64) -> i64 {
        let diff = (psn.wrapping_sub(self.psn(near)) & PSN_MASK) as i64;
        let signed = if diff >= 1 << 23 { diff - (1 << 24) } else { diff };
        near as i64 + signed
    }

    /// Nothing is posted or in flight.
    pub fn is_idle(&self) -> bool {
        self.wqes.is_empty() && self.una >= self.high
    }
}

/// Packets a message of `len` bytes takes at `mtu` (at least one).
pub(crate) fn packets_of(len: u64, mtu: u32) -> u64 {
    len.div_ceil(u64::from(mtu)).max(1)
}

impl Qp {
    /// Takes a send request (checked against the QP's type, state and capacities).
    pub fn post_send(&mut self, verbs: &mut Verbs, wr: SendWr) -> Result<(), VerbsError> {
        let caps = self.caps;
        if self.req.wqes.len() >= caps.max_send_wr as usize {
            return Err(VerbsError::Full(format!("send queue of {} requests", caps.max_send_wr)));
        }
        if wr.sges.as_slice().len() > caps.max_send_sge as usize {
            return Err(VerbsError::invalid(format!(
                "{} entries, the QP takes {}",
                wr.sges.as_slice().len(),
                caps.max_send_sge
            )));
        }
        if let Some(d) = &wr.inline {
            if d.len() > caps.max_inline_data as usize {
                return Err(VerbsError::invalid(format!(
                    "{} inline bytes, the QP takes {}",
                    d.len(),
                    caps.max_inline_data
                )));
            }
            if !matches!(
                wr.opcode,
                SendOpcode::Send | SendOpcode::SendImm | SendOpcode::Write | SendOpcode::WriteImm
            ) {
                return Err(VerbsError::invalid("inline data on a READ or an atomic"));
            }
        }
        match self.kind {
            QpType::Ud => {
                if !matches!(wr.opcode, SendOpcode::Send | SendOpcode::SendImm) {
                    return Err(VerbsError::invalid(format!("{:?} on a UD QP", wr.opcode)));
                }
                if wr.ud.is_none() {
                    return Err(VerbsError::invalid("a UD send without an address handle"));
                }
            }
            QpType::Rc => {
                if wr.opcode.is_atomic() && wr.length() != 8 && wr.inline.is_none() {
                    return Err(VerbsError::invalid("an atomic needs one 8-byte local buffer"));
                }
            }
        }
        let len = wr.length();
        if len > u64::from(u32::MAX) && self.retry == RetryPolicy::Counted {
            return Err(VerbsError::invalid("a message of more than 4 GiB"));
        }
        let state = self.attr.state;
        if matches!(state, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(VerbsError::invalid(format!("posting a send to a QP in {state:?}")));
        }
        self.req.wqes.push_back(SendWqe {
            wr,
            len,
            first: 0,
            last: 0,
            answered: 0,
            status: None,
        });
        // A QP in error completes what it is given at once, flushed.
        if matches!(state, QpState::Err | QpState::Sqe) {
            self.flush_send_queue(verbs);
        }
        Ok(())
    }

    /// True when the send side has a packet it could send now if pacing allowed (a packet to
    /// resend, or a request it may start).
    fn has_packet(&self) -> bool {
        if self.req.nxt < self.req.high {
            return true;
        }
        self.can_start()
    }

    /// True when the next posted request may start: the QP sends, its READ and atomic budget
    /// allows, and a fence has nothing to wait for.
    fn can_start(&self) -> bool {
        if self.attr.state != QpState::Rts {
            return false;
        }
        let Some(w) = self.req.wqes.get(self.req.started) else {
            return false;
        };
        if w.wr.opcode.is_read_or_atomic()
            && self.req.rd_atomic_outstanding >= u32::from(self.attr.max_rd_atomic.max(1))
        {
            return false;
        }
        !(w.wr.fence && self.req.rd_atomic_outstanding > 0)
    }

    /// Payload bytes of the packet `nxt` would send.
    fn next_packet_bytes(&self) -> u64 {
        let r = &self.req;
        if r.nxt < r.high {
            return u64::from(r.flight[(r.nxt - r.una) as usize].bytes);
        }
        match r.wqes.get(r.started) {
            Some(w)
                if matches!(
                    w.wr.opcode,
                    SendOpcode::Write | SendOpcode::WriteImm | SendOpcode::Send | SendOpcode::SendImm
                ) =>
            {
                w.len.min(u64::from(self.attr.path_mtu))
            }
            _ => 0,
        }
    }

    fn window_allows(&self) -> bool {
        let in_flight = self.req.sent_bytes - self.req.acked_bytes;
        in_flight == 0
            || self
                .cc
                .window_bytes()
                .is_none_or(|w| in_flight + self.next_packet_bytes() <= w)
    }

    /// True when the QP may send a packet now (a READ response of its responder, or a request).
    pub fn ready(&self, now: u64) -> bool {
        if now < self.req.next_send_ns {
            return false;
        }
        if self.resp.has_read_response() {
            return true;
        }
        self.requester_ready(now)
    }

    fn requester_ready(&self, now: u64) -> bool {
        now >= self.req.not_before_ns
            && self.req.rnr_until.is_none()
            && matches!(self.attr.state, QpState::Rts | QpState::Sqd)
            && self.has_packet()
            && self.window_allows()
    }

    /// When something next needs doing (ns): a packet to pace out, a timer.
    pub fn next_event_ns(&self) -> Option<u64> {
        let sends = self.resp.has_read_response()
            || (self.req.rnr_until.is_none()
                && matches!(self.attr.state, QpState::Rts | QpState::Sqd)
                && self.has_packet()
                && self.window_allows());
        let send = sends.then_some(self.req.next_send_ns.max(self.req.not_before_ns));
        [send, self.next_timer_ns()].into_iter().flatten().min()
    }

    /// Its next timer (retransmission, RNR wait, controller), leaving out when it may next send.
    pub fn next_timer_ns(&self) -> Option<u64> {
        if self.req.is_idle() && !self.resp.has_read_response() {
            return None;
        }
        [self.req.rto_deadline, self.req.rnr_until, self.cc.next_timer_ns()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Builds the next packet into `buf` as a whole IPv4 packet with TOS `tos` (the caller
    /// sends it now); returns its length, or None when it has nothing to send after all (a
    /// request that failed locally completes with its error instead).
    pub fn build_next(
        &mut self,
        now: u64,
        buf: &mut [u8],
        tos: u8,
        verbs: &mut Verbs,
    ) -> int_format::Result<Option<usize>> {
        if self.resp.has_read_response() {
            return match self.build_read_response(now, buf, tos, verbs)? {
                Some(n) => {
                    self.paced(now, n);
                    Ok(Some(n))
                }
                None => Ok(None),
            };
        }
        if !self.requester_ready(now) {
            return Ok(None);
        }
        if self.req.nxt == self.req.high && !self.start_next(verbs) {
            return Ok(None);
        }
        let idx = self.req.nxt;
        let Some(w) = self.wqe_at(idx) else {
            return Ok(None);
        };
        let n = match self.kind {
            QpType::Ud => self.build_ud(w, buf, tos, verbs)?,
            QpType::Rc => self.build_rc(now, w, idx, buf, tos, verbs)?,
        };
        if let Some(n) = n {
            self.paced(now, n);
        }
        Ok(n)
    }

    /// The pacing and counting after sending a packet of `n` bytes (IPv4 and up).
    fn paced(&mut self, now: u64, n: usize) {
        let wire = (n - IPV4_UDP_HEADERS) as u64 + WIRE_OVERHEAD;
        let rate = self.cc.rate_bps().max(1);
        let r = &mut self.req;
        let base = r.next_send_ns.max(now.saturating_sub(r.timing.burst_credit_ns));
        r.next_send_ns = base + wire * 8_000_000_000 / rate;
        r.stats.packets_sent += 1;
        r.stats.wire_bytes += wire;
        r.stats.first_sent_ns.get_or_insert(now);
    }

    /// Writes an IPv4 packet of this QP (its addressing, port and INT) carrying
    /// `payload[..len]` into `buf`, and keeps `payload` as the scratch buffer for the next.
    pub(crate) fn write_packet(
        &mut self,
        buf: &mut [u8],
        tos: u8,
        bth: &BthRepr,
        ext: Extensions,
        payload: Vec<u8>,
        len: usize,
    ) -> int_format::Result<usize> {
        let built = packet::write_ipv4(
            buf,
            &self.addressing,
            self.dst_port,
            tos,
            self.int.as_ref(),
            bth,
            ext,
            &payload[..len],
        );
        self.req.scratch = payload;
        built
    }

    /// Gives the next posted request its packet indices; false when none may start.
    fn start_next(&mut self, verbs: &mut Verbs) -> bool {
        if !self.can_start() {
            return false;
        }
        let mtu = self.attr.path_mtu;
        let r = &mut self.req;
        let w = &mut r.wqes[r.started];
        let count = match (self.kind, w.wr.opcode) {
            (QpType::Ud, _) => 1,
            (_, SendOpcode::CompareSwap | SendOpcode::FetchAdd) => 1,
            _ => packets_of(w.len, mtu),
        };
        if self.kind == QpType::Ud && w.len > u64::from(mtu) {
            w.status = Some(WcStatus::LocLenErr);
            r.started += 1;
            self.retire_completed(verbs);
            return false;
        }
        w.first = r.high;
        w.last = r.high + count - 1;
        if w.wr.opcode.is_read_or_atomic() {
            r.rd_atomic_outstanding += 1;
        }
        r.started += 1;
        r.high += count;
        let bytes_each = |i: u64| -> u32 {
            match w.wr.opcode {
                SendOpcode::Read | SendOpcode::CompareSwap | SendOpcode::FetchAdd => 0,
                _ => (w.len - (i * u64::from(mtu)).min(w.len)).min(u64::from(mtu)) as u32,
            }
        };
        for i in 0..count {
            r.flight.push_back(InFlight {
                bytes: bytes_each(i),
                ..InFlight::default()
            });
        }
        true
    }

    /// The position in `wqes` of the started request whose packets include `idx`.
    pub(crate) fn wqe_at(&self, idx: u64) -> Option<usize> {
        let r = &self.req;
        // Started requests hold consecutive index ranges in order.
        let (mut lo, mut hi) = (0, r.started);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if r.wqes[mid].last < idx {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let i = lo;
        (i < r.started && r.wqes[i].first <= idx).then_some(i)
    }

    /// Marks packet `idx` sent at `now` (after building it); a READ request covers its
    /// responses up to `covers`.
    fn sent(&mut self, idx: u64, covers: u64, now: u64) {
        let r = &mut self.req;
        r.sent_high = r.sent_high.max(covers + 1);
        let at = (idx - r.una) as usize;
        let f = &mut r.flight[at];
        f.sent_at = now;
        f.count = f.count.saturating_add(1);
        f.after_stall = std::mem::take(&mut r.stall_pending);
        if f.count > 1 {
            r.stats.retransmissions += 1;
        }
        r.sent_bytes += u64::from(f.bytes);
        if r.rto_deadline.is_none() {
            r.rto_deadline = Some(now + r.rto_ns);
        }
    }

    fn build_rc(
        &mut self,
        now: u64,
        wi: usize,
        idx: u64,
        buf: &mut [u8],
        tos: u8,
        verbs: &mut Verbs,
    ) -> int_format::Result<Option<usize>> {
        let mtu = u64::from(self.attr.path_mtu);
        let w = self.req.wqes[wi].clone();
        let k = idx - w.first;
        let single = w.first == w.last;
        let (first, last) = (idx == w.first, idx == w.last);
        let mut ext = Extensions::NONE;
        let mut len = 0usize;
        let mut offset = 0u64;
        let opcode = match w.wr.opcode {
            SendOpcode::Write | SendOpcode::WriteImm | SendOpcode::Send | SendOpcode::SendImm => {
                let imm = matches!(w.wr.opcode, SendOpcode::WriteImm | SendOpcode::SendImm);
                let write = matches!(w.wr.opcode, SendOpcode::Write | SendOpcode::WriteImm);
                offset = k * mtu;
                len = (w.len - offset.min(w.len)).min(mtu) as usize;
                if write && first {
                    ext.reth = Some(RethRepr {
                        virtual_addr: w.wr.remote_addr,
                        rkey: w.wr.rkey,
                        dma_len: w.len.min(u64::from(u32::MAX)) as u32,
                    });
                }
                if imm && last {
                    ext.immdt = Some(ImmDt(w.wr.imm));
                }
                match (write, imm, single, first, last) {
                    (true, false, true, _, _) => Opcode::WriteOnly,
                    (true, true, true, _, _) => Opcode::WriteOnlyImm,
                    (true, _, false, true, _) => Opcode::WriteFirst,
                    (true, false, false, false, true) => Opcode::WriteLast,
                    (true, true, false, false, true) => Opcode::WriteLastImm,
                    (true, _, false, false, false) => Opcode::WriteMiddle,
                    (false, false, true, _, _) => Opcode::SendOnly,
                    (false, true, true, _, _) => Opcode::SendOnlyImm,
                    (false, _, false, true, _) => Opcode::SendFirst,
                    (false, false, false, false, true) => Opcode::SendLast,
                    (false, true, false, false, true) => Opcode::SendLastImm,
                    (false, _, false, false, false) => Opcode::SendMiddle,
                }
            }
            SendOpcode::Read => {
                // A READ (or, going back, the rest of one) asks for everything from `idx` on.
                let done = (k * mtu).min(w.len);
                ext.reth = Some(RethRepr {
                    virtual_addr: w.wr.remote_addr.wrapping_add(done),
                    rkey: w.wr.rkey,
                    dma_len: (w.len - done).min(u64::from(u32::MAX)) as u32,
                });
                Opcode::ReadRequest
            }
            SendOpcode::CompareSwap | SendOpcode::FetchAdd => {
                let (swap_add, compare) = match w.wr.opcode {
                    SendOpcode::CompareSwap => (w.wr.swap, w.wr.compare_add),
                    _ => (w.wr.compare_add, 0),
                };
                ext.atomic = Some(AtomicEthRepr {
                    virtual_addr: w.wr.remote_addr,
                    rkey: w.wr.rkey,
                    swap_add,
                    compare,
                });
                if w.wr.opcode == SendOpcode::CompareSwap {
                    Opcode::CompareSwap
                } else {
                    Opcode::FetchAdd
                }
            }
        };
        // The payload: inline data, or gathered from the program's memory (or the flow's
        // content) through the request's local keys.
        let mut payload = std::mem::take(&mut self.req.scratch);
        if payload.len() < len {
            payload.resize(len, 0);
        }
        let gathered = match &w.wr.inline {
            Some(d) => {
                let start = (offset as usize).min(d.len());
                let end = (start + len).min(d.len());
                payload[..end - start].copy_from_slice(&d.as_slice()[start..end]);
                Ok(())
            }
            None if len > 0 => verbs.gather(self.pd, &w.wr.sges, offset, &mut payload[..len]),
            None => Ok(()),
        };
        if let Err(status) = gathered {
            self.req.scratch = payload;
            self.fail_request(wi, status, verbs);
            return Ok(None);
        }
        let mut bth = BthRepr::new(opcode, self.attr.dest_qpn, self.req.psn(idx));
        bth.ack_req = true;
        bth.solicited = w.wr.solicited && last;
        let n = self.write_packet(buf, tos, &bth, ext, payload, len)?;
        let covers = if opcode == Opcode::ReadRequest { w.last } else { idx };
        self.sent(idx, covers, now);
        self.req.nxt = covers + 1;
        Ok(Some(n))
    }

    fn build_ud(&mut self, wi: usize, buf: &mut [u8], tos: u8, verbs: &mut Verbs) -> int_format::Result<Option<usize>> {
        let w = self.req.wqes[wi].clone();
        let Some(dest) = w.wr.ud else {
            self.fail_request(wi, WcStatus::LocQpOpErr, verbs);
            return Ok(None);
        };
        let len = w.len as usize;
        let mut payload = std::mem::take(&mut self.req.scratch);
        if payload.len() < len {
            payload.resize(len, 0);
        }
        let gathered = match &w.wr.inline {
            Some(d) => {
                payload[..len].copy_from_slice(d.as_slice());
                Ok(())
            }
            None if len > 0 => verbs.gather(self.pd, &w.wr.sges, 0, &mut payload[..len]),
            None => Ok(()),
        };
        if let Err(status) = gathered {
            self.req.scratch = payload;
            self.fail_request(wi, status, verbs);
            return Ok(None);
        }
        let imm = w.wr.opcode == SendOpcode::SendImm;
        let opcode = if imm { Opcode::UdSendOnlyImm } else { Opcode::UdSendOnly };
        // A queue key with its high bit set means the QP's own (the verbs' rule).
        let qkey = if dest.qkey & 0x8000_0000 != 0 {
            self.attr.qkey
        } else {
            dest.qkey
        };
        let ext = Extensions {
            deth: Some(DethRepr { qkey, src_qp: self.qpn }),
            immdt: imm.then_some(ImmDt(w.wr.imm)),
            ..Extensions::NONE
        };
        let idx = self.req.nxt;
        let mut bth = BthRepr::new(opcode, dest.qpn, self.req.psn(idx));
        bth.solicited = w.wr.solicited;
        let mut a = self.addressing;
        a.dst = dest.addr;
        let built = packet::write_ipv4(
            buf,
            &a,
            self.dst_port,
            tos,
            self.int.as_ref(),
            &bth,
            ext,
            &payload[..len],
        );
        self.req.scratch = payload;
        let n = built?;
        // A datagram is done once it is on the wire: nothing comes back for it.
        let r = &mut self.req;
        r.nxt = idx + 1;
        r.una = r.nxt;
        r.sent_high = r.nxt;
        r.flight.pop_front();
        r.wqes[wi].status = Some(WcStatus::Success);
        self.retire_completed(verbs);
        Ok(Some(n))
    }

    /// Takes a send request that cannot be carried out (malformed, or against the QP's
    /// capacities): it completes with `status` after whatever was posted before it, and the QP
    /// goes to the error state, as a NIC does with a bad work request.
    pub fn refuse_send(&mut self, verbs: &mut Verbs, wr: SendWr, status: WcStatus) {
        let len = wr.length();
        self.req.wqes.push_back(SendWqe {
            wr,
            len,
            first: 0,
            last: 0,
            answered: 0,
            status: Some(status),
        });
        self.enter_error(verbs);
    }

    /// The request at `wqes[wi]` failed locally with `status`: the QP goes to the error state.
    pub(crate) fn fail_request(&mut self, wi: usize, status: WcStatus, verbs: &mut Verbs) {
        if let Some(w) = self.req.wqes.get_mut(wi) {
            w.status = Some(status);
        }
        self.enter_error(verbs);
    }

    /// Completes, in order, the requests at the front that have ended (a success only once
    /// every earlier one has).
    pub(crate) fn retire_completed(&mut self, verbs: &mut Verbs) {
        while let Some(w) = self.req.wqes.front() {
            let Some(status) = w.status else {
                break;
            };
            let w = match self.req.wqes.pop_front() {
                Some(w) => w,
                None => break,
            };
            self.req.started = self.req.started.saturating_sub(1);
            if status == WcStatus::Success {
                self.req.stats.messages += 1;
                self.req.stats.message_bytes += w.len;
            }
            if self.sig_all || w.wr.signaled || status != WcStatus::Success {
                let mut wc = WorkCompletion::new(w.wr.wr_id, status, w.wr.opcode.completion(), self.qpn);
                wc.byte_len = w.len.min(u64::from(u32::MAX)) as u32;
                verbs.complete(self.send_cq, wc, false);
            }
        }
    }

    /// Goes to the error state on its own (a fault of the transfer): see
    /// [`Self::error_state`]; the program hears of it as IBV_EVENT_QP_FATAL.
    pub fn enter_error(&mut self, verbs: &mut Verbs) {
        self.error_state(verbs, true);
    }

    /// Goes to the error state because the program asked (ibv_modify_qp to ERR, as UCX and
    /// MPI do to flush a QP before they destroy it): no asynchronous event, as on a NIC.
    pub fn enter_error_as_asked(&mut self, verbs: &mut Verbs) {
        self.error_state(verbs, false);
    }

    /// Every request not completed completes flushed (the one that failed with its own
    /// status), every receive request too, and the far end hears nothing more; `fatal` raises
    /// IBV_EVENT_QP_FATAL.
    fn error_state(&mut self, verbs: &mut Verbs, fatal: bool) {
        let was = self.attr.state;
        self.attr.state = QpState::Err;
        self.flush_send_queue(verbs);
        self.flush_receive_queue(verbs);
        self.resp.drop_reads();
        if fatal && was != QpState::Err && self.retry == RetryPolicy::Counted {
            verbs.raise(self.context, crate::verbs::AsyncEvent::QpFatal(self.qpn));
        }
    }

    /// Completes every send request, flushed unless it has its own status.
    pub(crate) fn flush_send_queue(&mut self, verbs: &mut Verbs) {
        for w in self.req.wqes.iter_mut() {
            w.status.get_or_insert(WcStatus::WrFlushErr);
        }
        self.req.started = self.req.wqes.len();
        self.retire_completed(verbs);
        let r = &mut self.req;
        r.started = 0;
        r.una = r.high;
        r.nxt = r.high;
        r.sent_high = r.high;
        r.flight.clear();
        r.acked_bytes = r.sent_bytes;
        r.rto_deadline = None;
        r.rnr_until = None;
        r.rd_atomic_outstanding = 0;
    }

    /// Sets the timers and counters a move to RTS gives the send side: its first PSN, and the
    /// retry counts and timeout of its attributes (counted policy).
    pub(crate) fn arm_requester(&mut self) {
        let r = &mut self.req;
        r.psn_base = self.attr.sq_psn & PSN_MASK;
        if self.retry == RetryPolicy::Counted {
            r.retries_left = self.attr.retry_cnt;
            r.rnr_retries_left = self.attr.rnr_retry;
            // 0 means no timeout: a week stands for never.
            r.rto_ns = ack_timeout_ns(self.attr.timeout).unwrap_or(7 * 24 * 3_600_000_000_000);
        }
    }

    /// The lab's latest hiccup is `h`: an ACK of a packet in flight during it gives no RTT
    /// sample.
    pub fn note_hiccup(&mut self, h: Hiccup) {
        self.req.hiccup = Some(h);
    }

    /// The host's thread stalled: the next packet's INT change spans the stall.
    pub fn note_stall(&mut self) {
        self.req.stall_pending = true;
    }

    /// Records a time-series point at `now` (at most one per sampling interval).
    pub(crate) fn sample(&mut self, now: u64, qlen_bytes: Option<u64>, rtt_ns: Option<u64>) {
        let every = self.req.timing.sample_every_ns;
        if every == 0 || self.req.last_sample_ns.is_some_and(|t| now < t + every) {
            return;
        }
        self.req.last_sample_ns = Some(now);
        let point = Sample {
            t_ns: now,
            acked_bytes: self.req.acked_bytes,
            rate_bps: self.cc.rate_bps(),
            window_bytes: self.cc.window_bytes(),
            utilization: self.cc.utilization(),
            qlen_bytes,
            rtt_ns,
            target_delay_ns: self.cc.target_delay_ns(),
        };
        self.req.series.push(point);
    }

    /// What its sender counted.
    pub fn sender_stats(&self) -> &SenderStats {
        &self.req.stats
    }

    /// Its time series, taken.
    pub fn take_series(&mut self) -> Vec<Sample> {
        std::mem::take(&mut self.req.series)
    }

    /// Bytes of its messages acknowledged so far.
    pub fn acked_bytes(&self) -> u64 {
        self.req.acked_bytes
    }

    /// Retransmission timeouts since a new byte was last acknowledged.
    pub fn timeouts_in_a_row(&self) -> u32 {
        self.req.timeouts_in_a_row
    }

    /// Packets acknowledged so far, and given out.
    pub fn packets_acked(&self) -> (u64, u64) {
        (self.req.una, self.req.high)
    }

    /// Send requests not yet completed.
    pub fn sends_outstanding(&self) -> usize {
        self.req.wqes.len()
    }

    /// Nothing posted is outstanding on the send side.
    pub fn send_idle(&self) -> bool {
        self.req.is_idle()
    }

    /// Holds the send side until `t` (ns): nothing is sent before (a flow's start time).
    pub fn not_before(&mut self, t: u64) {
        self.req.not_before_ns = t;
        self.req.next_send_ns = self.req.next_send_ns.max(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psns_unwrap_around_the_24_bit_edge() {
        let mut r = Requester::new(
            SenderTiming {
                rto_ns: 1,
                rto_max_ns: 1,
                burst_credit_ns: 0,
                sample_every_ns: 0,
                stall_ns: 1,
            },
            1024,
        );
        assert_eq!(r.index_of(5, 3), 5);
        assert_eq!(r.index_of(1, 3), 1);
        assert_eq!(r.index_of(2, (1 << 24) - 2), (1 << 24) + 2);
        assert_eq!(r.index_of(PSN_MASK, 1 << 24), (1 << 24) - 1);
        r.psn_base = PSN_MASK - 1;
        assert_eq!(r.psn(0), PSN_MASK - 1);
        assert_eq!(r.psn(3), 1);
        assert_eq!(r.index_of(1, 0), 3);
        assert_eq!(packets_of(0, 1024), 1);
        assert_eq!(packets_of(1025, 1024), 2);
    }
}
