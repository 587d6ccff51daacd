//! What a received datagram asks of its host: data for a receiving QP, an ACK or NAK for a
//! sending one, a CNP; and the hop records an ACK echoes back.

use int_format::int::{HopRecord, IntHeaders};
use int_format::roce::{NakCode, Opcode, Syndrome};

use crate::packet::Received;

/// Hops a received echo may carry at most (more are ignored).
pub const MAX_HOPS: usize = 16;

/// What a datagram that passed the ICRC check asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Data packet `psn` for receiving QP `qp`.
    Data {
        /// Destination QP.
        qp: u32,
        /// Its PSN.
        psn: u32,
    },
    /// ACK (or NAK, a PSN sequence error) of `psn` for sending QP `qp`.
    Ack {
        /// Destination QP.
        qp: u32,
        /// The PSN acknowledged (for a NAK: the one expected).
        psn: u32,
        /// A NAK.
        nak: bool,
    },
    /// Congestion notification for sending QP `qp`.
    Cnp {
        /// Destination QP.
        qp: u32,
    },
    /// An opcode or syndrome this transport does not implement.
    Unsupported,
}

/// What `r` asks for.
pub fn classify(r: &Received<'_>) -> Action {
    let qp = r.bth.dest_qp;
    match r.bth.opcode {
        // Data without immediate (the *_IMM opcodes are not implemented: unsupported).
        Opcode::WriteFirst
        | Opcode::WriteMiddle
        | Opcode::WriteLast
        | Opcode::WriteOnly
        | Opcode::SendFirst
        | Opcode::SendMiddle
        | Opcode::SendLast
        | Opcode::SendOnly => Action::Data { qp, psn: r.bth.psn },
        Opcode::Acknowledge => match r.aeth.map(|a| a.syndrome) {
            Some(Syndrome::Ack { .. }) => Action::Ack {
                qp,
                psn: r.bth.psn,
                nak: false,
            },
            Some(Syndrome::Nak(NakCode::PsnSequenceError)) => Action::Ack {
                qp,
                psn: r.bth.psn,
                nak: true,
            },
            _ => Action::Unsupported,
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
