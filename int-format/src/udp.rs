//! UDP datagrams.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Error, Layer, Result, need};
use crate::field::{set_u16, u16_at};

/// Byte ranges of the UDP header's fields.
mod field {
    use crate::field::Field;

    pub(super) const SRC_PORT: Field = 0..2;
    pub(super) const DST_PORT: Field = 2..4;
    pub(super) const LENGTH: Field = 4..6;
    pub(super) const CHECKSUM: Field = 6..8;
}

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Length of the UDP header.
    pub const HEADER_LEN: usize = 8;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer after checking the header and the length field.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the header fits and the length field lies between 8 and the buffer length.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        need(Layer::Udp, Self::HEADER_LEN, have)?;
        let len = usize::from(self.len());
        if len < Self::HEADER_LEN {
            return Err(Error::Malformed {
                layer: Layer::Udp,
                what: "length field below 8",
            });
        }
        need(Layer::Udp, len, have)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::DST_PORT.start)
    }

    /// Length field: header and payload in bytes.
    pub fn len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// True when the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 8
    }

    /// Checksum as on the wire; zero means none was computed.
    pub fn checksum(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// True when the checksum is zero (none) or right for these addresses.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let b = &self.buffer.as_ref()[..usize::from(self.len())];
        let mut acc = checksum::sum_words(&src.octets(), 0);
        acc = checksum::sum_words(&dst.octets(), acc);
        acc += 17 + b.len() as u64;
        acc = checksum::sum_words(b, acc);
        checksum::fold(acc) == 0xffff
    }

    /// The payload, as long as the length field says.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT.start, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT.start, v);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH.start, v);
    }

    /// Sets the checksum field as is.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Computes and writes the checksum over the pseudo-header and datagram.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let len = usize::from(self.len());
        let c = checksum::udp_ipv4(src, dst, &self.buffer.as_ref()[..len]);
        self.set_checksum(c);
    }

    /// Recomputes the checksum only when one is present: a zero checksum stays zero.
    pub fn refresh_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        if self.checksum() != 0 {
            self.fill_checksum(src, dst);
        }
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[Self::HEADER_LEN..len]
    }
}

/// The values of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl UdpRepr {
    /// Reads the header values, verifying a present checksum against the addresses.
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>, src: Ipv4Addr, dst: Ipv4Addr) -> Result<Self> {
        p.check_len()?;
        if !p.verify_checksum(src, dst) {
            return Err(Error::Malformed {
                layer: Layer::Udp,
                what: "bad checksum",
            });
        }
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: usize::from(p.len()) - UdpPacket::<&[u8]>::HEADER_LEN,
        })
    }

    /// Bytes the header takes.
    pub const fn header_len(&self) -> usize {
        8
    }

    /// Writes the header with a zero checksum (none), as RoCEv2 senders do.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut UdpPacket<T>) -> Result<()> {
        let len = u16::try_from(self.header_len() + self.payload_len).map_err(|_| Error::Malformed {
            layer: Layer::Udp,
            what: "length over 65535",
        })?;
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len);
        p.set_checksum(0);
        Ok(())
    }
}
