//! The completer: what a QP's send side does with what comes back for its requests. An ACK
//! acknowledges every packet up to its PSN (a READ or an atomic only by its own answer: an ACK
//! past one whose answer never came means the answer was lost, and the requester goes back);
//! a NAK goes back to the PSN it names, an RNR NAK waits for its timer first; a NAK that
//! refuses the request fails it and the QP. READ responses land in the request's local
//! memory in order, an atomic's answer likewise. Requests complete in the order posted.
//! Timeouts are here too: go back, back off (the lab's flows) or count a retry (programs).

use int_format::int::HopRecord;
use int_format::roce::{AethRepr, NakCode, Opcode};

use super::Verbs;
use super::qp::requester::InFlight;
use super::qp::{Qp, QpState, RetryPolicy, rnr_timer_ns};
use super::wr::{SendOpcode, WcStatus};
use crate::cc::Ack;

impl Qp {
    /// The first packet index at or after `upto` that an ACK must not pass: the first one not
    /// yet answered of a READ or atomic started before `upto`.
    fn ack_limit(&self, upto: u64) -> u64 {
        let r = &self.req;
        for w in r.wqes.range(..r.started) {
            if w.first >= upto {
                break;
            }
            if w.wr.opcode.is_read_or_atomic() && w.status.is_none() {
                return upto.min(w.first + w.answered);
            }
        }
        upto
    }

    /// Acknowledges the packets before index `upto` (at most `high`): their flight entries go,
    /// their bytes count as acknowledged, and the SEND and WRITE requests they finish complete.
    fn advance_una(&mut self, upto: u64, verbs: &mut Verbs) {
        let r = &mut self.req;
        let upto = upto.min(r.high);
        while r.una < upto {
            let f = r.flight.pop_front().unwrap_or_default();
            r.acked_bytes += u64::from(f.bytes);
            r.last_acked = f;
            r.una += 1;
        }
        if r.nxt < r.una {
            r.nxt = r.una;
            r.sent_bytes = r.acked_bytes;
        }
        let una = r.una;
        for w in r.wqes.range_mut(..r.started) {
            if w.last >= una {
                break;
            }
            if w.status.is_none() && !w.wr.opcode.is_read_or_atomic() {
                w.status = Some(WcStatus::Success);
            }
        }
        self.retire_completed(verbs);
    }

    /// Goes back to packet `una`: the packets from there are sent again.
    fn go_back(&mut self) {
        let r = &mut self.req;
        r.nxt = r.una;
        r.sent_bytes = r.acked_bytes;
    }

    /// The far end made progress: the retry counts and the timeout start again.
    fn progressed(&mut self, now: u64) {
        let r = &mut self.req;
        if self.retry == RetryPolicy::Backoff {
            r.rto_ns = r.timing.rto_ns;
        } else {
            r.retries_left = self.attr.retry_cnt;
            r.rnr_retries_left = self.attr.rnr_retry;
        }
        r.rto_deadline = (r.una < r.sent_high).then_some(now + r.rto_ns);
        r.timeouts_in_a_row = 0;
        r.stats.last_progress_ns = Some(now);
    }

    /// An ACK of `psn` (cumulative) with the receiver's echo of the INT hops (path order).
    /// Returns false when the PSN is outside what was sent.
    pub fn on_ack(&mut self, psn: u32, now: u64, hops: &[HopRecord], verbs: &mut Verbs) -> bool {
        let una = self.req.una;
        let idx = self.req.index_of(psn, una);
        if idx < una as i64 - 1 || idx >= self.req.sent_high as i64 {
            return false;
        }
        let newly = if idx >= una as i64 {
            let upto = idx as u64 + 1;
            let limit = self.ack_limit(upto);
            let before = self.req.acked_bytes;
            self.advance_una(limit, verbs);
            self.progressed(now);
            if limit < upto {
                // The answer of a READ or atomic before this PSN was lost: ask again.
                self.go_back();
            }
            self.req.acked_bytes - before
        } else {
            0
        };
        let acked: InFlight = self.req.last_acked;
        // A flight during which the lab froze for a noticeable part of it measured the machine,
        // not the network (a real network does not freeze): a delay-based controller would
        // answer a 25 us hiccup on an 11 us RTT with a cut to its minimum rate. A hiccup of a
        // hundredth of the flight or less leaves the sample standing: dropping those too left
        // TIMELY without a sample for a whole run at dilation 400 (its rate stuck near the line
        // rate, the buffer full), where every queued flight of 300 us spans a 0.6 us hiccup.
        let rtt = (newly > 0 && acked.count == 1)
            .then(|| now.saturating_sub(acked.sent_at))
            .filter(|_| !self.req.hiccup.is_some_and(|h| h.distorts(acked.sent_at, now)));
        if let Some(r) = rtt {
            let s = &mut self.req.stats;
            s.rtt_sum += u128::from(r);
            s.rtt_count += 1;
            s.rtt_last_ns = Some(r);
            s.rtt_min_ns = Some(s.rtt_min_ns.map_or(r, |m| m.min(r)));
            s.rtt_mean_ns = Some((s.rtt_sum / u128::from(s.rtt_count)) as u64);
        }
        self.cc.on_ack(&Ack {
            now_ns: now,
            acked_bytes: self.req.acked_bytes,
            sent_bytes: self.req.sent_bytes,
            newly_acked: newly,
            rtt_ns: rtt,
            hops,
            after_stall: acked.after_stall,
        });
        let qlen = hops.iter().filter_map(|h| h.queue_occupancy).max().map(u64::from);
        self.sample(now, qlen, rtt);
        true
    }

    /// A NAK for `psn` (`aeth`'s syndrome): a PSN sequence error goes back to it, a refusal
    /// fails the request it names. Returns false when the PSN is outside what was sent.
    pub fn on_nak(&mut self, psn: u32, code: NakCode, now: u64, verbs: &mut Verbs) -> bool {
        let una = self.req.una;
        let idx = self.req.index_of(psn, una);
        if idx < una as i64 || idx > self.req.sent_high as i64 {
            return false;
        }
        let idx = idx as u64;
        if code == NakCode::PsnSequenceError {
            // It acknowledges what came before.
            let limit = self.ack_limit(idx);
            self.advance_una(limit, verbs);
            self.go_back();
            self.req.stats.naks += 1;
            self.cc.on_loss(now);
            self.req.rto_deadline = Some(now + self.req.rto_ns);
            return true;
        }
        let status = match code {
            NakCode::InvalidRequest => WcStatus::RemInvReqErr,
            NakCode::RemoteAccessError => WcStatus::RemAccessErr,
            _ => WcStatus::RemOpErr,
        };
        let limit = self.ack_limit(idx);
        self.advance_una(limit, verbs);
        let wi = self.wqe_at(idx.min(self.req.high.saturating_sub(1))).unwrap_or(0);
        if let Some(w) = self.req.wqes.get_mut(wi) {
            w.status = Some(status);
        }
        let event = match code {
            NakCode::RemoteAccessError => super::AsyncEvent::QpAccessError(self.qpn),
            _ => super::AsyncEvent::QpRequestError(self.qpn),
        };
        if self.retry == RetryPolicy::Counted {
            verbs.raise(self.context, event);
        }
        self.enter_error(verbs);
        true
    }

    /// An RNR NAK for `psn` with timer code `timer`: the far end had no receive request; wait
    /// and try again from there, as many times as `rnr_retry` allows.
    pub fn on_rnr_nak(&mut self, psn: u32, timer: u8, now: u64, verbs: &mut Verbs) -> bool {
        let una = self.req.una;
        let idx = self.req.index_of(psn, una);
        if idx < una as i64 || idx >= self.req.sent_high as i64 {
            return false;
        }
        let limit = self.ack_limit(idx as u64);
        self.advance_una(limit, verbs);
        self.req.stats.rnr_naks += 1;
        if self.retry == RetryPolicy::Counted && self.attr.rnr_retry != 7 {
            if self.req.rnr_retries_left == 0 {
                let head = self.wqe_at(self.req.una).unwrap_or(0);
                self.fail_request(head, WcStatus::RnrRetryExcErr, verbs);
                return true;
            }
            self.req.rnr_retries_left -= 1;
        }
        self.go_back();
        self.req.rnr_until = Some(now + rnr_timer_ns(timer));
        self.req.rto_deadline = None;
        true
    }

    /// A READ response of `psn` (`opcode`, its AETH if any) carrying `payload`: in order, it
    /// lands in the READ's local memory and acknowledges everything before it.
    pub fn on_read_response(
        &mut self,
        psn: u32,
        opcode: Opcode,
        aeth: Option<AethRepr>,
        payload: &[u8],
        now: u64,
        verbs: &mut Verbs,
    ) -> bool {
        let una = self.req.una;
        let idx = self.req.index_of(psn, una);
        if idx < una as i64 || idx >= self.req.sent_high as i64 {
            return false;
        }
        let idx = idx as u64;
        let Some(wi) = self.wqe_at(idx) else {
            return false;
        };
        let w = &self.req.wqes[wi];
        if w.wr.opcode != SendOpcode::Read || w.status.is_some() {
            return false;
        }
        let expected = w.first + w.answered;
        // Every READ or atomic before this one must have its answer first.
        if self.ack_limit(idx) < expected.min(idx) {
            return false;
        }
        if idx != expected {
            if idx > expected && !self.req.read_gap_handled {
                // A response was lost: ask again for the rest, once per gap.
                self.req.read_gap_handled = true;
                self.advance_una(expected, verbs);
                self.go_back();
            }
            return true;
        }
        if aeth.is_some_and(|a| !matches!(a.syndrome, int_format::roce::Syndrome::Ack { .. })) {
            self.fail_request(wi, WcStatus::BadRespErr, verbs);
            return true;
        }
        let (first, len, sges) = (w.first, w.len, w.wr.sges);
        let mtu = u64::from(self.attr.path_mtu);
        let offset = (idx - first) * mtu;
        let fits = offset + payload.len() as u64 <= len
            && (matches!(opcode, Opcode::ReadResponseLast | Opcode::ReadResponseOnly) || payload.len() as u64 == mtu);
        if !fits {
            self.fail_request(wi, WcStatus::BadRespErr, verbs);
            return true;
        }
        if let Err(status) = verbs.scatter(self.pd, &sges, offset, payload) {
            self.fail_request(wi, status, verbs);
            return true;
        }
        self.req.read_gap_handled = false;
        self.advance_una(idx + 1, verbs);
        let Some(wi) = self.wqe_at(idx) else {
            return true;
        };
        let w = &mut self.req.wqes[wi];
        w.answered += 1;
        if idx == w.last {
            w.status = Some(WcStatus::Success);
            self.req.rd_atomic_outstanding = self.req.rd_atomic_outstanding.saturating_sub(1);
            self.retire_completed(verbs);
        }
        self.progressed(now);
        true
    }

    /// An atomic's answer for `psn`: the old value lands in its local buffer (host order, as
    /// SoftRoCE writes it) and it completes.
    pub fn on_atomic_ack(&mut self, psn: u32, orig: u64, now: u64, verbs: &mut Verbs) -> bool {
        let una = self.req.una;
        let idx = self.req.index_of(psn, una);
        if idx < una as i64 || idx >= self.req.sent_high as i64 {
            return false;
        }
        let idx = idx as u64;
        let Some(wi) = self.wqe_at(idx) else {
            return false;
        };
        let w = &self.req.wqes[wi];
        if !w.wr.opcode.is_atomic() || w.status.is_some() || self.ack_limit(idx) < idx {
            return false;
        }
        let sges = w.wr.sges;
        self.advance_una(idx, verbs);
        if let Err(status) = verbs.scatter(self.pd, &sges, 0, &orig.to_ne_bytes()) {
            let head = self.wqe_at(idx).unwrap_or(0);
            self.fail_request(head, status, verbs);
            return true;
        }
        self.advance_una(idx + 1, verbs);
        if let Some(w) = self.wqe_at(idx).and_then(|wi| self.req.wqes.get_mut(wi)) {
            w.answered = 1;
            w.status = Some(WcStatus::Success);
        }
        self.req.rd_atomic_outstanding = self.req.rd_atomic_outstanding.saturating_sub(1);
        self.retire_completed(verbs);
        self.progressed(now);
        true
    }

    /// A CNP for this QP.
    pub fn on_cnp(&mut self, now: u64) {
        self.req.stats.cnps += 1;
        self.cc.on_cnp(now);
        self.sample(now, None, None);
    }

    /// Fires the retransmission timer, the RNR wait and the controller's timer when due.
    pub fn on_timers(&mut self, now: u64, verbs: &mut Verbs) {
        if self.req.rnr_until.is_some_and(|t| now >= t) {
            self.req.rnr_until = None;
            self.req.rto_deadline = Some(now + self.req.rto_ns);
        }
        if self.req.rto_deadline.is_some_and(|d| now >= d) && !self.req.is_idle() && self.attr.state != QpState::Err {
            let r = &mut self.req;
            r.stats.timeouts += 1;
            r.timeouts_in_a_row += 1;
            match self.retry {
                RetryPolicy::Backoff => {
                    r.rto_ns = (r.rto_ns * 2).min(r.timing.rto_max_ns);
                }
                RetryPolicy::Counted => {
                    if r.retries_left == 0 {
                        let head = self.wqe_at(self.req.una).unwrap_or(0);
                        self.fail_request(head, WcStatus::RetryExcErr, verbs);
                        return;
                    }
                    r.retries_left -= 1;
                }
            }
            self.req.read_gap_handled = false;
            self.go_back();
            self.req.rto_deadline = Some(now + self.req.rto_ns);
            self.cc.on_timeout(now);
        }
        if self.cc.next_timer_ns().is_some_and(|t| now >= t) {
            self.cc.on_timer(now);
            self.sample(now, None, None);
        }
    }
}
