//! The receiving side of a reliable-connection QP: in-order acceptance by PSN, content check,
//! ACKs (per packet or coalesced), one NAK per gap, and CNPs for CE-marked arrivals, rate-limited.

use crate::content;
use crate::flow::{FlowSpec, ReceiveRecord};

const PSN_MASK: u32 = 0x00ff_ffff;

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
    /// PSN sequence error: the receiver expects `psn`.
    Nak {
        /// Expected PSN.
        psn: u32,
        /// Message sequence number.
        msn: u32,
    },
    /// Congestion notification to the sender's QP.
    Cnp,
}

/// How a receiver acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverPolicy {
    /// ACK every this many in-order packets (1 = every packet); the last packet is always ACKed.
    pub ack_every: u32,
    /// Shortest time between two CNPs of one QP (ns).
    pub cnp_interval_ns: u64,
}

/// What one arriving data packet produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Replies {
    /// ACK or NAK, if any.
    pub ack: Option<Reply>,
    /// CNP, if any.
    pub cnp: Option<Reply>,
    /// The PSN was outside any window the sender could be in.
    pub out_of_window: bool,
}

/// A receiving QP.
#[derive(Debug)]
pub struct RecvQp {
    spec: FlowSpec,
    mtu: u64,
    packets: u64,
    expected: u64,
    nak_sent: bool,
    since_ack: u32,
    last_cnp_ns: Option<u64>,
    record: ReceiveRecord,
}

impl RecvQp {
    /// A QP expecting `spec`'s message in packets of `mtu` payload bytes.
    pub fn new(spec: FlowSpec, mtu: u64) -> RecvQp {
        RecvQp {
            record: ReceiveRecord {
                id: spec.id,
                size: spec.size,
                bytes_ok: 0,
                content_errors: 0,
                duplicates: 0,
                out_of_order: 0,
                done_ns: None,
            },
            packets: spec.size.div_ceil(mtu).max(1),
            spec,
            mtu,
            expected: 0,
            nak_sent: false,
            since_ack: 0,
            last_cnp_ns: None,
        }
    }

    /// A data packet with `psn` and `payload` arrived at `now`, CE-marked or not.
    pub fn on_data(&mut self, psn: u32, payload: &[u8], ce: bool, now: u64, policy: &ReceiverPolicy) -> Replies {
        let mut out = Replies::default();
        if ce && self.last_cnp_ns.is_none_or(|t| now >= t + policy.cnp_interval_ns) {
            self.last_cnp_ns = Some(now);
            out.cnp = Some(Reply::Cnp);
        }
        let diff = (psn.wrapping_sub(self.expected as u32) & PSN_MASK) as i64;
        let diff = if diff >= 1 << 23 { diff - (1 << 24) } else { diff };
        if diff == 0 && self.expected < self.packets {
            let offset = self.expected * self.mtu;
            let want = (self.spec.size - offset).min(self.mtu) as usize;
            if payload.len() != want || !content::matches(self.spec.id, offset, payload) {
                // Never accepted: the sender's go-back-N will send it again.
                self.record.content_errors += 1;
                return out;
            }
            self.record.bytes_ok += want as u64;
            self.expected += 1;
            self.nak_sent = false;
            self.since_ack += 1;
            let done = self.expected == self.packets;
            if done {
                self.record.done_ns = Some(now);
            }
            if done || self.since_ack >= policy.ack_every {
                self.since_ack = 0;
                out.ack = Some(Reply::Ack { psn, msn: self.msn() });
            }
        } else if diff > 0 && self.expected + (diff as u64) < self.packets {
            self.record.out_of_order += 1;
            if !self.nak_sent {
                self.nak_sent = true;
                out.ack = Some(Reply::Nak {
                    psn: (self.expected as u32) & PSN_MASK,
                    msn: self.msn(),
                });
            }
        } else if diff < 0 && self.expected as i64 + diff >= 0 {
            // Already have it: the sender missed an ACK; tell it where we are.
            self.record.duplicates += 1;
            if self.expected > 0 {
                out.ack = Some(Reply::Ack {
                    psn: ((self.expected - 1) as u32) & PSN_MASK,
                    msn: self.msn(),
                });
            }
        } else {
            out.out_of_window = true;
        }
        out
    }

    /// The message sequence number an ACK carries: messages completed on this QP, as RoCE
    /// counts them (a QP here carries one message, so 0 until its last packet arrives, then 1).
    fn msn(&self) -> u32 {
        u32::from(self.is_done())
    }

    /// The record so far.
    pub fn record(&self) -> &ReceiveRecord {
        &self.record
    }

    /// True once the whole message arrived.
    pub fn is_done(&self) -> bool {
        self.record.done_ns.is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn qp() -> RecvQp {
        let spec = FlowSpec {
            id: 3,
            src: Ipv4Addr::LOCALHOST,
            dst: Ipv4Addr::LOCALHOST,
            size: 2500,
            start_ns: 0,
            kind: Default::default(),
            src_port: crate::flow::source_port(0),
        };
        RecvQp::new(spec, 1000)
    }

    fn payload(idx: u64) -> Vec<u8> {
        let len = (2500 - idx * 1000).min(1000) as usize;
        let mut p = vec![0; len];
        content::fill(3, idx * 1000, &mut p);
        p
    }

    const POLICY: ReceiverPolicy = ReceiverPolicy {
        ack_every: 1,
        cnp_interval_ns: 50_000,
    };

    #[test]
    fn in_order_gap_duplicate_and_completion() {
        let mut q = qp();
        assert_eq!(
            q.on_data(0, &payload(0), false, 0, &POLICY).ack,
            Some(Reply::Ack { psn: 0, msn: 0 })
        );
        // PSN 2 before 1: one NAK asking for 1, then silence for the same gap.
        assert_eq!(
            q.on_data(2, &payload(2), false, 1, &POLICY).ack,
            Some(Reply::Nak { psn: 1, msn: 0 })
        );
        assert_eq!(q.on_data(2, &payload(2), false, 2, &POLICY).ack, None);
        assert_eq!(
            q.on_data(1, &payload(1), false, 3, &POLICY).ack,
            Some(Reply::Ack { psn: 1, msn: 0 })
        );
        // A duplicate of 0 re-acknowledges 1.
        assert_eq!(
            q.on_data(0, &payload(0), false, 4, &POLICY).ack,
            Some(Reply::Ack { psn: 1, msn: 0 })
        );
        assert_eq!(
            q.on_data(2, &payload(2), false, 5, &POLICY).ack,
            Some(Reply::Ack { psn: 2, msn: 1 }),
            "the message is complete: MSN 1"
        );
        assert!(q.is_done());
        assert_eq!(
            q.on_data(1, &payload(1), false, 6, &POLICY).ack,
            Some(Reply::Ack { psn: 2, msn: 1 }),
            "a late duplicate is answered with the completed count"
        );
        let r = q.record();
        assert_eq!(
            (r.bytes_ok, r.out_of_order, r.duplicates, r.done_ns),
            (2500, 2, 2, Some(5))
        );
    }

    #[test]
    fn wrong_content_is_counted_and_not_accepted() {
        let mut q = qp();
        let mut p = payload(0);
        p[100] ^= 1;
        assert_eq!(q.on_data(0, &p, false, 0, &POLICY).ack, None);
        assert_eq!(q.record().content_errors, 1);
        assert_eq!(q.record().bytes_ok, 0);
        assert_eq!(
            q.on_data(0, &payload(0)[..999], false, 0, &POLICY).ack,
            None,
            "short payload"
        );
    }

    #[test]
    fn cnps_are_rate_limited_and_far_psns_are_out_of_window() {
        let mut q = qp();
        assert_eq!(q.on_data(0, &payload(0), true, 0, &POLICY).cnp, Some(Reply::Cnp));
        assert_eq!(q.on_data(1, &payload(1), true, 10_000, &POLICY).cnp, None);
        assert_eq!(q.on_data(2, &payload(2), true, 60_000, &POLICY).cnp, Some(Reply::Cnp));
        assert!(qp().on_data(4_000_000, &[], false, 0, &POLICY).out_of_window);
        assert!(
            qp().on_data(7, &[], false, 0, &POLICY).out_of_window,
            "beyond the message"
        );
    }

    #[test]
    fn coalesced_acks_still_ack_the_last_packet() {
        let mut q = qp();
        let policy = ReceiverPolicy { ack_every: 4, ..POLICY };
        assert_eq!(q.on_data(0, &payload(0), false, 0, &policy).ack, None);
        assert_eq!(q.on_data(1, &payload(1), false, 0, &policy).ack, None);
        assert_eq!(
            q.on_data(2, &payload(2), false, 0, &policy).ack,
            Some(Reply::Ack { psn: 2, msn: 1 })
        );
    }
}
