//! BTH opcodes of the Reliable Connection service, plus CNP.

/// A BTH opcode. RC opcodes and CNP are named; anything else is kept as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// RC SEND FIRST (0x00).
    SendFirst,
    /// RC SEND MIDDLE (0x01).
    SendMiddle,
    /// RC SEND LAST (0x02).
    SendLast,
    /// RC SEND LAST with immediate (0x03).
    SendLastImm,
    /// RC SEND ONLY (0x04).
    SendOnly,
    /// RC SEND ONLY with immediate (0x05).
    SendOnlyImm,
    /// RC RDMA WRITE FIRST (0x06), carries RETH.
    WriteFirst,
    /// RC RDMA WRITE MIDDLE (0x07).
    WriteMiddle,
    /// RC RDMA WRITE LAST (0x08).
    WriteLast,
    /// RC RDMA WRITE LAST with immediate (0x09).
    WriteLastImm,
    /// RC RDMA WRITE ONLY (0x0A), carries RETH.
    WriteOnly,
    /// RC RDMA WRITE ONLY with immediate (0x0B), carries RETH and ImmDt.
    WriteOnlyImm,
    /// RC RDMA READ REQUEST (0x0C), carries RETH.
    ReadRequest,
    /// RC ACKNOWLEDGE (0x11), carries AETH.
    Acknowledge,
    /// Congestion Notification Packet (0x81), 16 reserved bytes.
    Cnp,
    /// Any other opcode, kept as on the wire.
    Other(u8),
}

impl Opcode {
    /// Decodes an opcode byte.
    pub fn from_u8(v: u8) -> Opcode {
        match v {
            0x00 => Opcode::SendFirst,
            0x01 => Opcode::SendMiddle,
            0x02 => Opcode::SendLast,
            0x03 => Opcode::SendLastImm,
            0x04 => Opcode::SendOnly,
            0x05 => Opcode::SendOnlyImm,
            0x06 => Opcode::WriteFirst,
            0x07 => Opcode::WriteMiddle,
            0x08 => Opcode::WriteLast,
            0x09 => Opcode::WriteLastImm,
            0x0a => Opcode::WriteOnly,
            0x0b => Opcode::WriteOnlyImm,
            0x0c => Opcode::ReadRequest,
            0x11 => Opcode::Acknowledge,
            0x81 => Opcode::Cnp,
            other => Opcode::Other(other),
        }
    }

    /// The opcode byte.
    pub fn to_u8(self) -> u8 {
        match self {
            Opcode::SendFirst => 0x00,
            Opcode::SendMiddle => 0x01,
            Opcode::SendLast => 0x02,
            Opcode::SendLastImm => 0x03,
            Opcode::SendOnly => 0x04,
            Opcode::SendOnlyImm => 0x05,
            Opcode::WriteFirst => 0x06,
            Opcode::WriteMiddle => 0x07,
            Opcode::WriteLast => 0x08,
            Opcode::WriteLastImm => 0x09,
            Opcode::WriteOnly => 0x0a,
            Opcode::WriteOnlyImm => 0x0b,
            Opcode::ReadRequest => 0x0c,
            Opcode::Acknowledge => 0x11,
            Opcode::Cnp => 0x81,
            Opcode::Other(v) => v,
        }
    }

    /// True when a RETH follows the BTH.
    pub fn has_reth(self) -> bool {
        matches!(
            self,
            Opcode::WriteFirst | Opcode::WriteOnly | Opcode::WriteOnlyImm | Opcode::ReadRequest
        )
    }

    /// True when an AETH follows the BTH (and RETH, if any).
    pub fn has_aeth(self) -> bool {
        matches!(self, Opcode::Acknowledge)
    }

    /// True when immediate data follows the other extension headers.
    pub fn has_immdt(self) -> bool {
        matches!(
            self,
            Opcode::SendLastImm | Opcode::SendOnlyImm | Opcode::WriteLastImm | Opcode::WriteOnlyImm
        )
    }

    /// True for packets that carry message payload (SEND and WRITE).
    pub fn carries_payload(self) -> bool {
        self.to_u8() <= 0x0b
    }

    /// Bytes of extension headers between BTH and payload.
    pub fn extension_len(self) -> usize {
        if self == Opcode::Cnp {
            return super::CNP_BODY_LEN;
        }
        let mut n = 0;
        if self.has_reth() {
            n += super::Reth::<&[u8]>::LEN;
        }
        if self.has_aeth() {
            n += super::Aeth::<&[u8]>::LEN;
        }
        if self.has_immdt() {
            n += super::IMMDT_LEN;
        }
        n
    }
}
