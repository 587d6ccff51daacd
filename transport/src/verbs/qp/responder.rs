//! The responder: a QP's receive side. It takes the requests that arrive in PSN order: SEND
//! lands in the next receive request, WRITE where its RETH says once the remote key allows it,
//! a READ is answered with READ responses (sent on the QP's own schedule, by the requester's
//! pacing), an atomic with its old value. It acknowledges (every `ack_every` packets and at each
//! message's end), NAKs the first packet after a gap once, answers a SEND it has no receive
//! request for with an RNR NAK, and answers duplicates as the InfiniBand specification says
//! (C9-105 and on): SEND and WRITE again acknowledged, READ and atomics replayed from what it
//! kept. Errors follow SoftRoCE's classes: a request it must refuse is NAKed (invalid request,
//! remote access error, remote operational error) and the QP goes to the error state.
//!
//! The lab's own flows are lenient: a packet whose content or length is wrong is counted and
//! dropped (their sender's go-back-N sends it again), as the lab always did.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use int_format::roce::{AethRepr, BthRepr, NakCode, Opcode, Syndrome};

use super::requester::packets_of;
use super::{PSN_MASK, Qp, QpState, QpType, RetryPolicy};
use crate::packet::{self, Extensions, Received};
use crate::verbs::Verbs;
use crate::verbs::memory::Backing;
use crate::verbs::mr::{Access, KeyFault};
use crate::verbs::wr::{RecvWr, WcOpcode, WcStatus, WorkCompletion};

/// How a receiver acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverPolicy {
    /// ACK every this many in-order packets (1 = every packet); a message's last packet is
    /// always acknowledged.
    pub ack_every: u32,
    /// Shortest time between two CNPs of one QP (ns).
    pub cnp_interval_ns: u64,
}

/// What the receiver answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Acknowledge everything up to and including `psn`.
    Ack {
        /// Last PSN received in order.
        psn: u32,
        /// Message sequence number.
        msn: u32,
    },
    /// A NAK: a PSN sequence error (the receiver expects `psn`) or a refusal of `psn`.
    Nak {
        /// Why.
        code: NakCode,
        /// The PSN it is about.
        psn: u32,
        /// Message sequence number.
        msn: u32,
    },
    /// No receive request for `psn`: try again after the timer.
    RnrNak {
        /// The 5-bit timer code.
        timer: u8,
        /// The PSN refused.
        psn: u32,
        /// Message sequence number.
        msn: u32,
    },
    /// An atomic of `psn` was carried out on `orig`.
    AtomicAck {
        /// The atomic's PSN.
        psn: u32,
        /// Message sequence number.
        msn: u32,
        /// The value before.
        orig: u64,
    },
    /// Congestion notification to the sender's QP.
    Cnp,
}

/// What one arriving packet produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Replies {
    /// ACK, NAK or atomic answer, if any.
    pub ack: Option<Reply>,
    /// CNP, if any.
    pub cnp: Option<Reply>,
    /// The PSN was outside any window the sender could be in.
    pub out_of_window: bool,
}

/// How a packet reached the host (what a UD receive's GRH and a CNP are made of).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// When (ns).
    pub now: u64,
    /// It carried ECN's CE mark.
    pub ce: bool,
    /// The sending host.
    pub src: Ipv4Addr,
    /// This host.
    pub dst: Ipv4Addr,
    /// Its TOS byte.
    pub tos: u8,
    /// Bytes of RoCE (BTH to ICRC) it carried.
    pub roce_len: usize,
}

/// What a QP's receive side counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Payload bytes accepted in order.
    pub bytes_ok: u64,
    /// Packets whose content (the lab's flows) or length was wrong: counted, never accepted.
    pub content_errors: u64,
    /// Packets received again.
    pub duplicates: u64,
    /// Packets that arrived after a gap.
    pub out_of_order: u64,
    /// Messages received whole (SEND, WRITE), or READs and atomics carried out.
    pub messages: u64,
    /// When the latest message was received whole (ns).
    pub last_message_ns: Option<u64>,
    /// When the first packet was accepted (ns).
    pub first_packet_ns: Option<u64>,
    /// Packets dropped: the QP was not receiving, a UD queue key did not match, or a UD
    /// datagram found no receive request.
    pub dropped: u64,
    /// RNR NAKs sent.
    pub rnr_naks: u64,
    /// READ responses sent.
    pub read_responses: u64,
}

/// A message whose first packet came and whose last has not.
#[derive(Debug, Clone, Copy)]
enum Incoming {
    /// A WRITE: where the next byte lands, bytes still to come, and the whole length.
    Write {
        backing: Backing,
        addr: u64,
        resid: u64,
        total: u64,
    },
    /// A SEND: the receive request it fills, and bytes written so far.
    Send { wqe: RecvWr, offset: u64 },
}

/// READ responses to send.
#[derive(Debug, Clone, Copy)]
struct ReadJob {
    /// Packet index of the READ's first response.
    first: u64,
    /// Packet index of the next response to send.
    next: u64,
    /// This run started at `next` (a replay may start in the middle).
    started_at: u64,
    backing: Backing,
    addr: u64,
    resid: u64,
}

/// A READ or atomic carried out, kept to answer its duplicates.
#[derive(Debug, Clone, Copy)]
enum Done {
    Read {
        first: u64,
        last: u64,
        rkey: u32,
        va: u64,
        len: u64,
        backing: Backing,
        backing_va: u64,
    },
    Atomic {
        idx: u64,
        orig: u64,
    },
}

/// READs and atomics kept for duplicates at most.
const DONE_KEPT: usize = 16;

/// The receive side of a QP.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// The PSN of index 0 (`rq_psn`).
    pub(crate) psn_base: u32,
    /// The next packet index expected.
    pub(crate) expected: u64,
    /// Messages completed, as the AETH counts them.
    msn: u32,
    nak_sent: bool,
    since_ack: u32,
    last_cnp_ns: Option<u64>,
    current: Option<Incoming>,
    reads: VecDeque<ReadJob>,
    done: VecDeque<Done>,
    /// The lab's flows: packet indices from this one on are out of window (their message
    /// ends before).
    pub(crate) limit: Option<u64>,
    /// The lab's flows: a wrong packet is counted and dropped, never an error of the QP.
    pub(crate) lenient: bool,
    pub(crate) stats: ReceiverStats,
    /// Replies made outside a packet's arrival (a READ that could not be read), for the host
    /// to send.
    pub(crate) pending: Vec<Reply>,
}

/// What a request packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Send { first: bool, last: bool, imm: bool },
    Write { first: bool, last: bool, imm: bool },
    Read,
    Atomic { swap: bool },
}

fn request_of(op: Opcode) -> Option<Request> {
    use Opcode::*;
    Some(match op {
        SendFirst => Request::Send {
            first: true,
            last: false,
            imm: false,
        },
        SendMiddle => Request::Send {
            first: false,
            last: false,
            imm: false,
        },
        SendLast => Request::Send {
            first: false,
            last: true,
            imm: false,
        },
        SendLastImm => Request::Send {
            first: false,
            last: true,
            imm: true,
        },
        SendOnly => Request::Send {
            first: true,
            last: true,
            imm: false,
        },
        SendOnlyImm => Request::Send {
            first: true,
            last: true,
            imm: true,
        },
        WriteFirst => Request::Write {
            first: true,
            last: false,
            imm: false,
        },
        WriteMiddle => Request::Write {
            first: false,
            last: false,
            imm: false,
        },
        WriteLast => Request::Write {
            first: false,
            last: true,
            imm: false,
        },
        WriteLastImm => Request::Write {
            first: false,
            last: true,
            imm: true,
        },
        WriteOnly => Request::Write {
            first: true,
            last: true,
            imm: false,
        },
        WriteOnlyImm => Request::Write {
            first: true,
            last: true,
            imm: true,
        },
        ReadRequest => Request::Read,
        CompareSwap => Request::Atomic { swap: true },
        FetchAdd => Request::Atomic { swap: false },
        _ => return None,
    })
}

impl Responder {
    /// True when READ responses wait to be sent.
    pub(crate) fn has_read_response(&self) -> bool {
        !self.reads.is_empty()
    }

    /// Forgets the READ responses not yet sent (the QP is in error).
    pub(crate) fn drop_reads(&mut self) {
        self.reads.clear();
    }

    fn psn(&self, idx: u64) -> u32 {
        self.psn_base.wrapping_add(idx as u32) & PSN_MASK
    }

    fn index_of(&self, psn: u32) -> i64 {
        let diff = (psn.wrapping_sub(self.psn(self.expected)) & PSN_MASK) as i64;
        let signed = if diff >= 1 << 23 { diff - (1 << 24) } else { diff };
        self.expected as i64 + signed
    }

    /// The message sequence number (24 bits).
    pub(crate) fn msn(&self) -> u32 {
        self.msn & PSN_MASK
    }

    /// Messages completed (the lab's flows: 1 once their message arrived whole).
    pub(crate) fn messages(&self) -> u64 {
        self.stats.messages
    }
}

/// A refusal: the NAK it gets and the status of a receive request it holds.
#[derive(Debug, Clone, Copy)]
struct Refusal {
    code: NakCode,
    status: WcStatus,
}

const INVALID: Refusal = Refusal {
    code: NakCode::InvalidRequest,
    status: WcStatus::RemInvReqErr,
};
const ACCESS: Refusal = Refusal {
    code: NakCode::RemoteAccessError,
    status: WcStatus::RemAccessErr,
};
const OPERATION: Refusal = Refusal {
    code: NakCode::RemoteOperationalError,
    status: WcStatus::LocQpOpErr,
};

impl Qp {
    /// A packet `r` for this QP arrived as `arrival` says; returns what to answer.
    pub fn receive(
        &mut self,
        r: &Received<'_>,
        arrival: &Arrival,
        policy: &ReceiverPolicy,
        verbs: &mut Verbs,
    ) -> Replies {
        let mut out = Replies::default();
        let now = arrival.now;
        if arrival.ce
            && self.kind == QpType::Rc
            && self.resp.last_cnp_ns.is_none_or(|t| now >= t + policy.cnp_interval_ns)
        {
            self.resp.last_cnp_ns = Some(now);
            out.cnp = Some(Reply::Cnp);
        }
        if !matches!(
            self.attr.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            self.resp.stats.dropped += 1;
            return out;
        }
        match self.kind {
            QpType::Rc => self.receive_rc(r, now, policy, verbs, &mut out),
            QpType::Ud => self.receive_ud(r, arrival, verbs),
        }
        out
    }

    fn receive_rc(
        &mut self,
        r: &Received<'_>,
        now: u64,
        policy: &ReceiverPolicy,
        verbs: &mut Verbs,
        out: &mut Replies,
    ) {
        let psn = r.bth.psn;
        let idx = self.resp.index_of(psn);
        let expected = self.resp.expected as i64;
        let diff = idx - expected;
        if diff > 0 {
            if self.resp.limit.is_some_and(|l| idx >= l as i64) {
                out.out_of_window = true;
                return;
            }
            self.resp.stats.out_of_order += 1;
            if !self.resp.nak_sent {
                self.resp.nak_sent = true;
                out.ack = Some(Reply::Nak {
                    code: NakCode::PsnSequenceError,
                    psn: self.resp.psn(self.resp.expected),
                    msn: self.resp.msn(),
                });
            }
            return;
        }
        if diff < 0 {
            if idx < 0 {
                out.out_of_window = true;
                return;
            }
            self.resp.stats.duplicates += 1;
            self.duplicate(r, idx as u64, out);
            return;
        }
        if self.resp.limit.is_some_and(|l| self.resp.expected >= l) {
            out.out_of_window = true;
            return;
        }
        let Some(req) = request_of(r.bth.opcode) else {
            return self.refuse(INVALID, psn, None, verbs, out);
        };
        // The opcode must continue the message in progress, or start one.
        let continues = matches!(
            (req, self.resp.current),
            (Request::Send { first: false, .. }, Some(Incoming::Send { .. }))
                | (Request::Write { first: false, .. }, Some(Incoming::Write { .. }))
                | (
                    Request::Send { first: true, .. } | Request::Write { first: true, .. },
                    None
                )
                | (Request::Read | Request::Atomic { .. }, None)
        );
        if !continues {
            return self.refuse(INVALID, psn, None, verbs, out);
        }
        let needed = match req {
            Request::Write { .. } => Access::REMOTE_WRITE,
            Request::Read => Access::REMOTE_READ,
            Request::Atomic { .. } => Access::REMOTE_ATOMIC,
            Request::Send { .. } => 0,
        };
        if !self.attr.access.allows(needed) {
            return self.refuse(INVALID, psn, None, verbs, out);
        }
        match req {
            Request::Send { first, last, imm } => self.receive_send(r, first, last, imm, now, policy, verbs, out),
            Request::Write { first, last, imm } => self.receive_write(r, first, last, imm, now, policy, verbs, out),
            Request::Read => self.receive_read(r, verbs, out),
            Request::Atomic { swap } => self.receive_atomic(r, swap, now, verbs, out),
        }
    }

    /// Checks a SEND or WRITE packet's payload length against the path MTU.
    fn length_ok(&self, first: bool, last: bool, len: usize) -> bool {
        let mtu = self.attr.path_mtu as usize;
        match (first, last) {
            (true, true) => len <= mtu,
            (_, false) => len == mtu,
            (false, true) => len > 0 && len <= mtu,
        }
    }

    /// Takes the next receive request (its SRQ's, or its own); None when there is none.
    fn take_recv(&mut self, verbs: &mut Verbs) -> Option<RecvWr> {
        match self.srq {
            Some(srq) => verbs.take_srq(srq),
            None => self.rq.pop_front(),
        }
    }

    /// Answers a request it cannot take for want of a receive request: an RNR NAK, no state
    /// change.
    fn receiver_not_ready(&mut self, psn: u32, out: &mut Replies) {
        self.resp.stats.rnr_naks += 1;
        out.ack = Some(Reply::RnrNak {
            timer: self.attr.min_rnr_timer,
            psn,
            msn: self.resp.msn(),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn receive_send(
        &mut self,
        r: &Received<'_>,
        first: bool,
        last: bool,
        imm: bool,
        now: u64,
        policy: &ReceiverPolicy,
        verbs: &mut Verbs,
        out: &mut Replies,
    ) {
        let psn = r.bth.psn;
        if !self.length_ok(first, last, r.payload.len()) {
            let held = self.held_recv();
            return self.refuse(INVALID, psn, held, verbs, out);
        }
        let (wqe, offset) = match self.resp.current {
            Some(Incoming::Send { wqe, offset }) => (wqe, offset),
            _ => match self.take_recv(verbs) {
                Some(w) => (w, 0),
                None => return self.receiver_not_ready(psn, out),
            },
        };
        if let Err(status) = verbs.scatter(self.pd, &wqe.sges, offset, r.payload) {
            if self.resp.lenient {
                self.resp.stats.content_errors += 1;
                if self.resp.current.is_none() {
                    // Not taken after all: it stays first in line.
                    self.return_recv(wqe);
                }
                return;
            }
            let refusal = if status == WcStatus::LocLenErr {
                Refusal {
                    code: NakCode::InvalidRequest,
                    status: WcStatus::LocLenErr,
                }
            } else {
                Refusal { status, ..OPERATION }
            };
            return self.refuse(refusal, psn, Some(wqe), verbs, out);
        }
        let offset = offset + r.payload.len() as u64;
        self.resp.stats.bytes_ok += r.payload.len() as u64;
        if last {
            self.resp.current = None;
            let mut wc = WorkCompletion::new(wqe.wr_id, WcStatus::Success, WcOpcode::Recv, self.qpn);
            wc.byte_len = offset.min(u64::from(u32::MAX)) as u32;
            wc.imm = if imm { r.ext.immdt.map(|i| i.0) } else { None };
            verbs.complete(self.recv_cq, wc, r.bth.solicited);
        } else {
            self.resp.current = Some(Incoming::Send { wqe, offset });
        }
        self.accepted(psn, last, now, policy, out);
    }

    /// Puts back a receive request taken for a packet that was then dropped.
    fn return_recv(&mut self, wqe: RecvWr) {
        if self.srq.is_none() {
            self.rq.push_front(wqe);
        }
    }

    /// The receive request a SEND in progress holds.
    fn held_recv(&self) -> Option<RecvWr> {
        match self.resp.current {
            Some(Incoming::Send { wqe, .. }) => Some(wqe),
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn receive_write(
        &mut self,
        r: &Received<'_>,
        first: bool,
        last: bool,
        imm: bool,
        now: u64,
        policy: &ReceiverPolicy,
        verbs: &mut Verbs,
        out: &mut Replies,
    ) {
        let psn = r.bth.psn;
        let len = r.payload.len() as u64;
        let (backing, addr, resid, total) = match self.resp.current {
            Some(Incoming::Write {
                backing,
                addr,
                resid,
                total,
            }) => (backing, addr, resid, total),
            _ => {
                let Some(reth) = r.ext.reth else {
                    return self.refuse(INVALID, psn, None, verbs, out);
                };
                let total = u64::from(reth.dma_len);
                if total == 0 {
                    (Backing::Pattern { flow: 0 }, 0, 0, 0)
                } else {
                    match verbs
                        .mrs
                        .remote(reth.rkey, self.pd, reth.virtual_addr, total, Access::REMOTE_WRITE)
                    {
                        Ok((mr, at)) => (mr.backing, at, total, total),
                        Err(_) if self.resp.lenient => {
                            self.resp.stats.content_errors += 1;
                            return;
                        }
                        Err(_) => return self.refuse(ACCESS, psn, None, verbs, out),
                    }
                }
            }
        };
        // Every packet but the last is a full MTU, and the last carries exactly what remains.
        let mtu = u64::from(self.attr.path_mtu);
        let right_length = if resid > mtu {
            len == mtu && !last
        } else {
            len == resid && last
        };
        if !self.length_ok(first, last, r.payload.len()) || !right_length {
            if self.resp.lenient {
                self.resp.stats.content_errors += 1;
                return;
            }
            return self.refuse(INVALID, psn, None, verbs, out);
        }
        // WRITE with immediate consumes a receive request at its last packet.
        let wqe = if imm && last {
            match self.take_recv(verbs) {
                Some(w) => Some(w),
                None => return self.receiver_not_ready(psn, out),
            }
        } else {
            None
        };
        if len > 0
            && let Err(e) = verbs.write_backing(backing, addr, r.payload)
        {
            if let Some(w) = wqe {
                self.return_recv(w);
            }
            if self.resp.lenient {
                self.resp.stats.content_errors += 1;
                return;
            }
            tracing::debug!(qp = self.qpn, "a WRITE could not land: {e}");
            return self.refuse(ACCESS, psn, wqe, verbs, out);
        }
        self.resp.stats.bytes_ok += len;
        if last {
            self.resp.current = None;
            if let Some(w) = wqe {
                let mut wc = WorkCompletion::new(w.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, self.qpn);
                wc.byte_len = total.min(u64::from(u32::MAX)) as u32;
                wc.imm = r.ext.immdt.map(|i| i.0);
                verbs.complete(self.recv_cq, wc, r.bth.solicited);
            }
        } else {
            self.resp.current = Some(Incoming::Write {
                backing,
                addr: addr + len,
                resid: resid - len,
                total,
            });
        }
        self.accepted(psn, last, now, policy, out);
    }

    /// A SEND or WRITE packet `psn` was taken (the end of its message when `last`): the next
    /// one is expected, and it is acknowledged as the policy says.
    fn accepted(&mut self, psn: u32, last: bool, now: u64, policy: &ReceiverPolicy, out: &mut Replies) {
        let resp = &mut self.resp;
        resp.expected += 1;
        resp.nak_sent = false;
        resp.since_ack += 1;
        resp.stats.first_packet_ns.get_or_insert(now);
        if last {
            resp.msn = resp.msn.wrapping_add(1);
            resp.stats.messages += 1;
            resp.stats.last_message_ns = Some(now);
        }
        if last || resp.since_ack >= policy.ack_every {
            resp.since_ack = 0;
            out.ack = Some(Reply::Ack { psn, msn: resp.msn() });
        }
    }

    fn receive_read(&mut self, r: &Received<'_>, verbs: &mut Verbs, out: &mut Replies) {
        let psn = r.bth.psn;
        let Some(reth) = r.ext.reth else {
            return self.refuse(INVALID, psn, None, verbs, out);
        };
        let room = usize::from(self.attr.max_dest_rd_atomic.max(1));
        if self.resp.reads.len() >= room {
            return self.refuse(INVALID, psn, None, verbs, out);
        }
        let len = u64::from(reth.dma_len);
        if len > 1 << 31 {
            return self.refuse(INVALID, psn, None, verbs, out);
        }
        let (backing, at) = if len == 0 {
            (Backing::Pattern { flow: 0 }, 0)
        } else {
            match verbs
                .mrs
                .remote(reth.rkey, self.pd, reth.virtual_addr, len, Access::REMOTE_READ)
            {
                Ok((mr, at)) => (mr.backing, at),
                Err(_) => return self.refuse(ACCESS, psn, None, verbs, out),
            }
        };
        let first = self.resp.expected;
        let count = packets_of(len, self.attr.path_mtu);
        self.resp.reads.push_back(ReadJob {
            first,
            next: first,
            started_at: first,
            backing,
            addr: at,
            resid: len,
        });
        self.keep_done(Done::Read {
            first,
            last: first + count - 1,
            rkey: reth.rkey,
            va: reth.virtual_addr,
            len,
            backing,
            backing_va: at,
        });
        let resp = &mut self.resp;
        // A READ counts as a message when it is taken (C9-148).
        resp.msn = resp.msn.wrapping_add(1);
        resp.stats.messages += 1;
        resp.expected += count;
        resp.nak_sent = false;
        resp.since_ack = 0;
    }

    fn receive_atomic(&mut self, r: &Received<'_>, swap: bool, now: u64, verbs: &mut Verbs, out: &mut Replies) {
        let psn = r.bth.psn;
        let Some(a) = r.ext.atomic else {
            return self.refuse(INVALID, psn, None, verbs, out);
        };
        if self.attr.max_dest_rd_atomic == 0 {
            return self.refuse(INVALID, psn, None, verbs, out);
        }
        if a.virtual_addr % 8 != 0 {
            return self.refuse(INVALID, psn, None, verbs, out);
        }
        let (mr, at) = match verbs
            .mrs
            .remote(a.rkey, self.pd, a.virtual_addr, 8, Access::REMOTE_ATOMIC)
        {
            Ok(x) => x,
            Err(KeyFault::NoRegion | KeyFault::Rights | KeyFault::Range) => {
                return self.refuse(ACCESS, psn, None, verbs, out);
            }
        };
        // One NIC's atomics are one worker's: nothing else of this NIC runs meanwhile, which is
        // the atomicity a NIC gives (IBV_ATOMIC_HCA).
        let mut word = [0u8; 8];
        if verbs.read_backing(mr.backing, at, &mut word).is_err() {
            return self.refuse(ACCESS, psn, None, verbs, out);
        }
        let orig = u64::from_ne_bytes(word);
        let new = if swap {
            if orig == a.compare { a.swap_add } else { orig }
        } else {
            orig.wrapping_add(a.swap_add)
        };
        if new != orig && verbs.write_backing(mr.backing, at, &new.to_ne_bytes()).is_err() {
            return self.refuse(ACCESS, psn, None, verbs, out);
        }
        let idx = self.resp.expected;
        self.keep_done(Done::Atomic { idx, orig });
        let resp = &mut self.resp;
        resp.msn = resp.msn.wrapping_add(1);
        resp.stats.messages += 1;
        resp.stats.last_message_ns = Some(now);
        resp.expected += 1;
        resp.nak_sent = false;
        resp.since_ack = 0;
        out.ack = Some(Reply::AtomicAck {
            psn,
            msn: resp.msn(),
            orig,
        });
    }

    fn keep_done(&mut self, d: Done) {
        if self.resp.done.len() >= DONE_KEPT {
            self.resp.done.pop_front();
        }
        self.resp.done.push_back(d);
    }

    /// A duplicate of packet `idx`: a SEND or WRITE is acknowledged again (C9-105), a READ is
    /// answered again from what the request asks (within what was read), an atomic with the
    /// value it found then; anything not kept is dropped.
    fn duplicate(&mut self, r: &Received<'_>, idx: u64, out: &mut Replies) {
        match r.bth.opcode {
            Opcode::ReadRequest => {
                let Some(reth) = r.ext.reth else { return };
                let found = self.resp.done.iter().find_map(|d| match *d {
                    Done::Read {
                        first,
                        last,
                        rkey,
                        va,
                        len,
                        backing,
                        backing_va,
                    } if first <= idx && idx <= last => Some((first, rkey, va, len, backing, backing_va)),
                    _ => None,
                });
                let Some((first, rkey, va, len, backing, backing_va)) = found else {
                    return;
                };
                let (rva, rlen) = (reth.virtual_addr, u64::from(reth.dma_len));
                if rkey != reth.rkey || rva < va || rva.saturating_add(rlen) > va.saturating_add(len) {
                    return;
                }
                // One answer per READ at a time: a replay replaces what was still to go.
                self.resp.reads.retain(|j| j.first != first);
                self.resp.reads.push_back(ReadJob {
                    first,
                    next: idx,
                    started_at: idx,
                    backing,
                    addr: backing_va + (rva - va),
                    resid: rlen,
                });
            }
            Opcode::CompareSwap | Opcode::FetchAdd => {
                let orig = self.resp.done.iter().find_map(|d| match *d {
                    Done::Atomic { idx: i, orig } if i == idx => Some(orig),
                    _ => None,
                });
                if let Some(orig) = orig {
                    out.ack = Some(Reply::AtomicAck {
                        psn: r.bth.psn,
                        msn: self.resp.msn(),
                        orig,
                    });
                }
            }
            _ => {
                if self.resp.expected > 0 {
                    out.ack = Some(Reply::Ack {
                        psn: self.resp.psn(self.resp.expected - 1),
                        msn: self.resp.msn(),
                    });
                }
            }
        }
    }

    /// Refuses packet `psn`: the lab's flows count it and drop it; a program's QP NAKs it,
    /// completes the receive request it held (`held`) with the refusal's status, and goes to
    /// the error state (SoftRoCE's classes A and C).
    fn refuse(&mut self, refusal: Refusal, psn: u32, held: Option<RecvWr>, verbs: &mut Verbs, out: &mut Replies) {
        if self.resp.lenient {
            self.resp.stats.content_errors += 1;
            return;
        }
        out.ack = Some(Reply::Nak {
            code: refusal.code,
            psn,
            msn: self.resp.msn(),
        });
        if let Some(w) = held {
            let wc = WorkCompletion::new(w.wr_id, refusal.status, WcOpcode::Recv, self.qpn);
            verbs.complete(self.recv_cq, wc, false);
            self.resp.current = None;
        }
        if self.retry == RetryPolicy::Counted {
            let event = if refusal.code == NakCode::RemoteAccessError {
                crate::verbs::AsyncEvent::QpAccessError(self.qpn)
            } else {
                crate::verbs::AsyncEvent::QpRequestError(self.qpn)
            };
            verbs.raise(self.context, event);
        }
        self.enter_error(verbs);
    }

    fn receive_ud(&mut self, r: &Received<'_>, arrival: &Arrival, verbs: &mut Verbs) {
        let resp = &mut self.resp;
        let Some(deth) = r.ext.deth else {
            resp.stats.dropped += 1;
            return;
        };
        if deth.qkey != self.attr.qkey || !r.bth.opcode.has_deth() {
            resp.stats.dropped += 1;
            return;
        }
        let Some(wqe) = self.take_recv(verbs) else {
            self.resp.stats.dropped += 1;
            return;
        };
        // The 40 bytes of GRH a UD receive starts with: for RoCEv2 over IPv4, 20 zero bytes
        // and the IPv4 header the datagram came in.
        let mut grh = [0u8; 40];
        let a = packet::Addressing {
            src: arrival.src,
            dst: arrival.dst,
            src_port: 0,
        };
        let headers = packet::ipv4_udp_headers(&a, int_format::roce::ROCEV2_PORT, arrival.tos, arrival.roce_len);
        grh[20..].copy_from_slice(&headers[..20]);
        let status = if wqe.sges.total() < 40 + r.payload.len() as u64 {
            WcStatus::LocLenErr
        } else {
            match verbs
                .scatter(self.pd, &wqe.sges, 0, &grh)
                .and_then(|()| verbs.scatter(self.pd, &wqe.sges, 40, r.payload))
            {
                Ok(()) => WcStatus::Success,
                Err(s) => s,
            }
        };
        let mut wc = WorkCompletion::new(wqe.wr_id, status, WcOpcode::Recv, self.qpn);
        if status == WcStatus::Success {
            wc.byte_len = 40 + r.payload.len() as u32;
            wc.src_qp = deth.src_qp;
            wc.grh = true;
            wc.imm = r.ext.immdt.map(|i| i.0);
            self.resp.stats.bytes_ok += r.payload.len() as u64;
            self.resp.stats.messages += 1;
            self.resp.stats.last_message_ns = Some(arrival.now);
        }
        verbs.complete(self.recv_cq, wc, r.bth.solicited);
    }

    /// Builds the next READ response into `buf` (the caller paces and sends it); None when the
    /// memory could not be read (the QP is then in error and a NAK is pending).
    pub(crate) fn build_read_response(
        &mut self,
        now: u64,
        buf: &mut [u8],
        tos: u8,
        verbs: &mut Verbs,
    ) -> int_format::Result<Option<usize>> {
        let _ = now;
        let Some(job) = self.resp.reads.front().copied() else {
            return Ok(None);
        };
        let mtu = u64::from(self.attr.path_mtu);
        let len = job.resid.min(mtu) as usize;
        let whole_from_start = job.started_at == job.first;
        let opcode = match (job.next == job.started_at, job.resid <= mtu) {
            (true, true) if whole_from_start => Opcode::ReadResponseOnly,
            (true, false) if whole_from_start => Opcode::ReadResponseFirst,
            (_, true) => Opcode::ReadResponseLast,
            (_, false) => Opcode::ReadResponseMiddle,
        };
        let mut payload = std::mem::take(&mut self.req.scratch);
        if payload.len() < len {
            payload.resize(len, 0);
        }
        if len > 0
            && let Err(e) = verbs.read_backing(job.backing, job.addr, &mut payload[..len])
        {
            self.req.scratch = payload;
            tracing::debug!(qp = self.qpn, "a READ could not be read: {e}");
            self.resp.pending.push(Reply::Nak {
                code: NakCode::RemoteAccessError,
                psn: self.resp.psn(job.next),
                msn: self.resp.msn(),
            });
            self.enter_error(verbs);
            return Ok(None);
        }
        let mut ext = Extensions::NONE;
        if opcode.has_aeth() {
            ext.aeth = Some(AethRepr {
                syndrome: Syndrome::Ack {
                    credits: Syndrome::UNLIMITED_CREDITS,
                },
                msn: self.resp.msn(),
            });
        }
        let bth = BthRepr::new(opcode, self.attr.dest_qpn, self.resp.psn(job.next));
        let n = self.write_packet(buf, tos, &bth, ext, payload, len)?;
        self.resp.stats.read_responses += 1;
        if let Some(j) = self.resp.reads.front_mut() {
            j.next += 1;
            j.addr += len as u64;
            j.resid -= len as u64;
            if j.resid == 0 {
                self.resp.reads.pop_front();
            }
        }
        Ok(Some(n))
    }

    /// Completes every receive request of its own queue flushed (and the one a SEND in
    /// progress holds); a QP on an SRQ says its last request was taken.
    pub(crate) fn flush_receive_queue(&mut self, verbs: &mut Verbs) {
        if let Some(w) = self.held_recv() {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
            verbs.complete(self.recv_cq, wc, false);
        }
        self.resp.current = None;
        while let Some(w) = self.rq.pop_front() {
            let wc = WorkCompletion::new(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
            verbs.complete(self.recv_cq, wc, false);
        }
        if self.srq.is_some() && self.retry == RetryPolicy::Counted {
            verbs.raise(self.context, crate::verbs::AsyncEvent::QpLastWqe(self.qpn));
        }
    }

    /// Takes a receive request (for a QP without an SRQ).
    pub fn post_recv(&mut self, verbs: &mut Verbs, wr: RecvWr) -> Result<(), crate::verbs::error::VerbsError> {
        use crate::verbs::error::VerbsError;
        if self.srq.is_some() {
            return Err(VerbsError::invalid("the QP takes its receive requests from an SRQ"));
        }
        if self.attr.state == QpState::Reset {
            return Err(VerbsError::invalid("posting a receive to a QP in RESET"));
        }
        if self.rq.len() >= self.caps.max_recv_wr as usize {
            return Err(VerbsError::Full(format!(
                "receive queue of {} requests",
                self.caps.max_recv_wr
            )));
        }
        if wr.sges.as_slice().len() > self.caps.max_recv_sge as usize {
            return Err(VerbsError::invalid(format!(
                "{} entries, the QP takes {}",
                wr.sges.as_slice().len(),
                self.caps.max_recv_sge
            )));
        }
        self.rq.push_back(wr);
        if self.attr.state == QpState::Err {
            self.flush_receive_queue(verbs);
        }
        Ok(())
    }

    /// What its receive side counted.
    pub fn receiver_stats(&self) -> &ReceiverStats {
        &self.resp.stats
    }

    /// Replies made outside a packet's arrival, taken.
    pub fn take_pending_replies(&mut self) -> Vec<Reply> {
        std::mem::take(&mut self.resp.pending)
    }

    /// Arms the receive side from the attributes of a move to RTR: its first expected PSN.
    pub(crate) fn arm_responder(&mut self) {
        self.resp.psn_base = self.attr.rq_psn & PSN_MASK;
        self.resp.expected = 0;
    }
}
