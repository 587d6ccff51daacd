//! What a received datagram asks of its host: a request for a QP's responder, an answer
//! (ACK, NAK, RNR NAK, READ response, atomic answer) for a QP's completer, a CNP; and the hop
//! records an ACK echoes back.

use int_format::int::{HopRecord, IntHeaders};
use int_format::roce::{NakCode, Opcode, Syndrome};

use crate::packet::Received;

/// Hops a received echo may carry at most (more are ignored).
pub const MAX_HOPS: usize = 16;

/// What a datagram that passed the ICRC check asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A request (SEND, WRITE, READ, atomic, UD SEND) of `psn` for QP `qp`'s responder.
    Request {
        /// Destination QP.
        qp: u32,
        /// Its PSN.
        psn: u32,
    },
    /// An ACK of `psn` (cumulative) for QP `qp`'s completer.
    Ack {
        /// Destination QP.
        qp: u32,
        /// The PSN acknowledged.
        psn: u32,
    },
    /// A NAK of `psn`: a PSN sequence error (the PSN expected) or a refusal.
    Nak {
        /// Destination QP.
        qp: u32,
        /// The PSN it is about.
        psn: u32,
        /// Why.
        code: NakCode,
    },
    /// An RNR NAK of `psn`: retry after the timer.
    RnrNak {
        /// Destination QP.
        qp: u32,
        /// The PSN refused.
        psn: u32,
        /// Five-bit timer code.
        timer: u8,
    },
    /// A READ response of `psn`.
    ReadResponse {
        /// Destination QP.
        qp: u32,
        /// Its PSN.
        psn: u32,
    },
    /// An atomic's answer for `psn`.
    AtomicAck {
        /// Destination QP.
        qp: u32,
        /// The atomic's PSN.
        psn: u32,
        /// The value before.
        orig: u64,
    },
    /// Congestion notification for QP `qp`.
    Cnp {
        /// Destination QP.
        qp: u32,
    },
    /// An opcode or syndrome this transport does not implement.
    Unsupported,
}

impl Action {
    /// The QP it is for, if any.
    pub fn qp(&self) -> Option<u32> {
        match *self {
            Action::Request { qp, .. }
            | Action::Ack { qp, .. }
            | Action::Nak { qp, .. }
            | Action::RnrNak { qp, .. }
            | Action::ReadResponse { qp, .. }
            | Action::AtomicAck { qp, .. }
            | Action::Cnp { qp } => Some(qp),
            Action::Unsupported => None,
        }
    }
}

/// What `r` asks for.
pub fn classify(r: &Received<'_>) -> Action {
    let qp = r.bth.dest_qp;
    let psn = r.bth.psn;
    match r.bth.opcode {
        Opcode::WriteFirst
        | Opcode::WriteMiddle
        | Opcode::WriteLast
        | Opcode::WriteLastImm
        | Opcode::WriteOnly
        | Opcode::WriteOnlyImm
        | Opcode::SendFirst
        | Opcode::SendMiddle
        | Opcode::SendLast
        | Opcode::SendLastImm
        | Opcode::SendOnly
        | Opcode::SendOnlyImm
        | Opcode::ReadRequest
        | Opcode::CompareSwap
        | Opcode::FetchAdd
        | Opcode::UdSendOnly
        | Opcode::UdSendOnlyImm => Action::Request { qp, psn },
        Opcode::ReadResponseFirst
        | Opcode::ReadResponseMiddle
        | Opcode::ReadResponseLast
        | Opcode::ReadResponseOnly => Action::ReadResponse { qp, psn },
        Opcode::AtomicAcknowledge => match (r.ext.aeth.map(|a| a.syndrome), r.ext.atomic_ack) {
            (Some(Syndrome::Ack { .. }), Some(orig)) => Action::AtomicAck { qp, psn, orig: orig.0 },
            _ => Action::Unsupported,
        },
        Opcode::Acknowledge => match r.ext.aeth.map(|a| a.syndrome) {
            Some(Syndrome::Ack { .. }) => Action::Ack { qp, psn },
            Some(Syndrome::Nak(code)) => Action::Nak { qp, psn, code },
            Some(Syndrome::RnrNak { timer }) => Action::RnrNak { qp, psn, timer },
            None => Action::Unsupported,
        },
        Opcode::Cnp => Action::Cnp { qp },
        _ => Action::Unsupported,
    }
}

/// The hop records an ACK echoes, in path order (the INT stack is newest first).
#[derive(Debug, Clone, Copy)]
pub struct EchoedHops {
    hops: [HopRecord; MAX_HOPS],
    len: usize,
}

impl EchoedHops {
    /// Reads the echoed INT of an ACK's payload; an empty payload carries no hops.
    pub fn parse(payload: &[u8]) -> int_format::Result<EchoedHops> {
        let mut out = EchoedHops {
            hops: [HopRecord::default(); MAX_HOPS],
            len: 0,
        };
        if payload.is_empty() {
            return Ok(out);
        }
        let int = IntHeaders::parse(payload)?;
        let n = int.hop_count().min(MAX_HOPS);
        for (i, hop) in int.hops().take(n).enumerate() {
            out.hops[n - 1 - i] = hop?;
        }
        out.len = n;
        Ok(out)
    }

    /// The hops, first hop first.
    pub fn as_slice(&self) -> &[HopRecord] {
        &self.hops[..self.len]
    }
}
