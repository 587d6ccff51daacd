//! IPv4 headers, with the ECN codepoint the switch marks.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Error, Layer, Result, need};
use crate::field::{set_u16, u16_at};

/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// The ECN codepoint (RFC 3168), the low two bits of the TOS byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// 00: not ECN-capable.
    NotEct,
    /// 01: ECN-capable, ECT(1).
    Ect1,
    /// 10: ECN-capable, ECT(0).
    Ect0,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// Decodes the two low bits of `bits`.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit codepoint.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }

    /// True for ECT(0), ECT(1) and CE: frames a switch may mark.
    pub fn is_ect(self) -> bool {
        self != Ecn::NotEct
    }
}

/// Byte offsets and ranges of the IPv4 header's fields.
mod field {
    use crate::field::Field;

    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const LENGTH: Field = 2..4;
    pub(super) const IDENT: Field = 4..6;
    pub(super) const FLG_OFF: Field = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Field = 10..12;
    pub(super) const SRC_ADDR: Field = 12..16;
    pub(super) const DST_ADDR: Field = 16..20;
}

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Length of a header without options.
    pub const MIN_HEADER_LEN: usize = 20;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after checking version, header length and total length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks version 4, a header of at least 20 bytes, and a total length that fits the buffer.
    ///
    /// The buffer may be longer than the total length (Ethernet pads short frames).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need(Layer::Ipv4, Self::MIN_HEADER_LEN, len)?;
        if self.version() != 4 {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "version is not 4",
            });
        }
        let hl = self.header_len();
        if hl < Self::MIN_HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "IHL below 5",
            });
        }
        need(Layer::Ipv4, hl, len)?;
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "total length below header length",
            });
        }
        need(Layer::Ipv4, total, len)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version field (4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP, the high six bits of TOS.
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// ECN codepoint.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.buffer.as_ref()[field::DSCP_ECN])
    }

    /// Total length (header and payload) in bytes.
    pub fn total_len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::IDENT.start)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.buffer.as_ref()[field::FLG_OFF.start] & 0x40 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[field::FLG_OFF.start] & 0x20 != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::FLG_OFF.start) & 0x1fff
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum as on the wire.
    pub fn checksum(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// True when the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::ones_complement_sum(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }

    /// The header, options included.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The payload: from the end of the header to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version 4 and the header length in bytes (a multiple of 4).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }

    /// Sets DSCP, keeping ECN.
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (dscp << 2) | (*b & 3);
    }

    /// Sets the ECN codepoint, keeping DSCP. The header checksum is not updated.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & !3) | ecn.bits();
    }

    /// Sets the total length. The header checksum is not updated.
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH.start, v);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT.start, v);
    }

    /// Sets flags (DF, MF) and a zero fragment offset.
    pub fn set_flags(&mut self, dont_frag: bool, more_frags: bool) {
        let v = (u16::from(dont_frag) << 14) | (u16::from(more_frags) << 13);
        set_u16(self.buffer.as_mut(), field::FLG_OFF.start, v);
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the payload protocol.
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, 0);
        let c = checksum::checksum(&self.buffer.as_ref()[..hl]);
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, c);
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, total) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[hl..total]
    }
}

/// The values of an IPv4 header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Payload protocol.
    pub protocol: u8,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (six bits).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Reads a header; fails on a bad checksum, fragments or options.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "bad header checksum",
            });
        }
        if p.more_frags() || p.frag_offset() != 0 {
            return Err(Error::Malformed {
                layer: Layer::Ipv4,
                what: "fragments are not supported",
            });
        }
        Ok(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: usize::from(p.total_len()) - p.header_len(),
            ttl: p.ttl(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        })
    }

    /// Bytes the header takes.
    pub const fn header_len(&self) -> usize {
        20
    }

    /// Writes the header (with its checksum) into the front of the view.
    ///
    /// Fails when header and payload would not fit a 16-bit total length.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4Packet<T>) -> Result<()> {
        let total = u16::try_from(self.header_len() + self.payload_len).map_err(|_| Error::Malformed {
            layer: Layer::Ipv4,
            what: "total length over 65535",
        })?;
        p.set_version_and_header_len(20);
        p.buffer.as_mut()[field::DSCP_ECN] = (self.dscp << 2) | self.ecn.bits();
        p.set_total_len(total);
        p.set_ident(self.ident);
        p.set_flags(self.dont_frag, false);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
        Ok(())
    }
}
