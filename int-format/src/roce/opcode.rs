//! BTH opcodes of the Reliable Connection and Unreliable Datagram services, plus CNP.

/// A BTH opcode. RC and UD opcodes and CNP are named; anything else is kept as `Other`.
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
    /// RC RDMA READ RESPONSE FIRST (0x0D), carries AETH.
    ReadResponseFirst,
    /// RC RDMA READ RESPONSE MIDDLE (0x0E).
    ReadResponseMiddle,
    /// RC RDMA READ RESPONSE LAST (0x0F), carries AETH.
    ReadResponseLast,
    /// RC RDMA READ RESPONSE ONLY (0x10), carries AETH.
    ReadResponseOnly,
    /// RC ACKNOWLEDGE (0x11), carries AETH.
    Acknowledge,
    /// RC ATOMIC ACKNOWLEDGE (0x12), carries AETH and AtomicAckETH.
    AtomicAcknowledge,
    /// RC COMPARE SWAP (0x13), carries AtomicETH.
    CompareSwap,
    /// RC FETCH ADD (0x14), carries AtomicETH.
    FetchAdd,
    /// UD SEND ONLY (0x64), carries DETH.
    UdSendOnly,
    /// UD SEND ONLY with immediate (0x65), carries DETH and ImmDt.
    UdSendOnlyImm,
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
            0x0d => Opcode::ReadResponseFirst,
            0x0e => Opcode::ReadResponseMiddle,
            0x0f => Opcode::ReadResponseLast,
            0x10 => Opcode::ReadResponseOnly,
            0x11 => Opcode::Acknowledge,
            0x12 => Opcode::AtomicAcknowledge,
            0x13 => Opcode::CompareSwap,
            0x14 => Opcode::FetchAdd,
            0x64 => Opcode::UdSendOnly,
            0x65 => Opcode::UdSendOnlyImm,
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
            Opcode::ReadResponseFirst => 0x0d,
            Opcode::ReadResponseMiddle => 0x0e,
            Opcode::ReadResponseLast => 0x0f,
            Opcode::ReadResponseOnly => 0x10,
            Opcode::Acknowledge => 0x11,
            Opcode::AtomicAcknowledge => 0x12,
            Opcode::CompareSwap => 0x13,
            Opcode::FetchAdd => 0x14,
            Opcode::UdSendOnly => 0x64,
            Opcode::UdSendOnlyImm => 0x65,
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
        matches!(
            self,
            Opcode::Acknowledge
                | Opcode::AtomicAcknowledge
                | Opcode::ReadResponseFirst
                | Opcode::ReadResponseLast
                | Opcode::ReadResponseOnly
        )
    }

    /// True when an AtomicETH follows the BTH.
    pub fn has_atomic_eth(self) -> bool {
        matches!(self, Opcode::CompareSwap | Opcode::FetchAdd)
    }

    /// True when an AtomicAckETH follows the AETH.
    pub fn has_atomic_ack_eth(self) -> bool {
        self == Opcode::AtomicAcknowledge
    }

    /// True when a DETH follows the BTH (the Unreliable Datagram opcodes).
    pub fn has_deth(self) -> bool {
        matches!(self, Opcode::UdSendOnly | Opcode::UdSendOnlyImm)
    }

    /// True when immediate data follows the other extension headers.
    pub fn has_immdt(self) -> bool {
        matches!(
            self,
            Opcode::SendLastImm
                | Opcode::SendOnlyImm
                | Opcode::WriteLastImm
                | Opcode::WriteOnlyImm
                | Opcode::UdSendOnlyImm
        )
    }

    /// True for packets that carry message payload (SEND, WRITE, READ RESPONSE, UD SEND).
    pub fn carries_payload(self) -> bool {
        self.to_u8() <= 0x0b || self.is_read_response() || self.has_deth()
    }

    /// True for the four RDMA READ RESPONSE opcodes.
    pub fn is_read_response(self) -> bool {
        matches!(
            self,
            Opcode::ReadResponseFirst
                | Opcode::ReadResponseMiddle
                | Opcode::ReadResponseLast
                | Opcode::ReadResponseOnly
        )
    }

    /// Bytes of extension headers between BTH and payload.
    pub fn extension_len(self) -> usize {
        if self == Opcode::Cnp {
            return super::CNP_BODY_LEN;
        }
        let mut n = 0;
        if self.has_deth() {
            n += super::Deth::<&[u8]>::LEN;
        }
        if self.has_reth() {
            n += super::Reth::<&[u8]>::LEN;
        }
        if self.has_atomic_eth() {
            n += super::AtomicEth::<&[u8]>::LEN;
        }
        if self.has_aeth() {
            n += super::Aeth::<&[u8]>::LEN;
        }
        if self.has_atomic_ack_eth() {
            n += super::ATOMIC_ACK_ETH_LEN;
        }
        if self.has_immdt() {
            n += super::IMMDT_LEN;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_opcode_round_trips_and_sizes_its_headers() {
        for v in 0..=255u8 {
            assert_eq!(Opcode::from_u8(v).to_u8(), v);
        }
        assert_eq!(Opcode::from_u8(0x0d), Opcode::ReadResponseFirst);
        assert_eq!(Opcode::ReadResponseMiddle.extension_len(), 0);
        assert_eq!(Opcode::ReadResponseOnly.extension_len(), 4);
        assert_eq!(Opcode::CompareSwap.extension_len(), 28);
        assert_eq!(Opcode::AtomicAcknowledge.extension_len(), 12);
        assert_eq!(Opcode::UdSendOnly.extension_len(), 8);
        assert_eq!(Opcode::UdSendOnlyImm.extension_len(), 12);
        assert!(Opcode::ReadResponseLast.carries_payload() && !Opcode::ReadRequest.carries_payload());
        assert!(Opcode::UdSendOnly.carries_payload() && !Opcode::Acknowledge.carries_payload());
    }
}
