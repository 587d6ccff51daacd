//! The Base Transport Header (12 bytes).

use crate::error::{Error, Layer, Result, need};
use crate::field::{set_u16, set_u24, u16_at, u24_at};

use super::Opcode;

/// Byte offsets and ranges of the BTH's fields.
mod field {
    use crate::field::Field;

    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const PKEY: Field = 2..4;
    pub(super) const FECN_BECN: usize = 4;
    pub(super) const DEST_QP: Field = 5..8;
    pub(super) const ACK_REQ: usize = 8;
    pub(super) const PSN: Field = 9..12;
}

/// A read/write view of a BTH at the front of a buffer.
#[derive(Debug, Clone)]
pub struct Bth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Bth<T> {
    /// Length of the BTH.
    pub const LEN: usize = 12;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Bth { buffer }
    }

    /// Wraps a buffer after checking it holds a BTH.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = Self::new_unchecked(buffer);
        b.check_len()?;
        Ok(b)
    }

    /// Checks the buffer holds a whole BTH.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Bth, Self::LEN, self.buffer.as_ref().len())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Opcode.
    pub fn opcode(&self) -> Opcode {
        Opcode::from_u8(self.buffer.as_ref()[field::OPCODE])
    }

    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }

    /// Migration request (M).
    pub fn migreq(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }

    /// Pad count: bytes of padding before the ICRC (0 to 3).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 3
    }

    /// Transport header version (0).
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0f
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::PKEY.start)
    }

    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x80 != 0
    }

    /// Backward explicit congestion notification (set in CNPs).
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & 0x40 != 0
    }

    /// Destination queue pair number (24 bits).
    pub fn dest_qp(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::DEST_QP.start)
    }

    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::PSN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    /// Sets the opcode.
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.to_u8();
    }

    /// Sets SE, M, PadCnt and TVer together (byte 1).
    pub fn set_flags(&mut self, solicited: bool, migreq: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] =
            (u8::from(solicited) << 7) | (u8::from(migreq) << 6) | ((pad_count & 3) << 4) | (tver & 0x0f);
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PKEY.start, v);
    }

    /// Sets FECN and BECN (the reserved bits of byte 4 are cleared).
    pub fn set_ecn_bits(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::FECN_BECN] = (u8::from(fecn) << 7) | (u8::from(becn) << 6);
    }

    /// Sets the destination QP (low 24 bits of `v`).
    pub fn set_dest_qp(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::DEST_QP.start, v);
    }

    /// Sets AckReq (the seven reserved bits are cleared).
    pub fn set_ack_req(&mut self, v: bool) {
        self.buffer.as_mut()[field::ACK_REQ] = u8::from(v) << 7;
    }

    /// Sets the PSN (low 24 bits of `v`).
    pub fn set_psn(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::PSN.start, v);
    }
}

/// The values of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BthRepr {
    /// Opcode.
    #[cfg_attr(feature = "serde", serde(serialize_with = "opcode_byte"))]
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub migreq: bool,
    /// Pad count (0 to 3).
    pub pad_count: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// PSN (24 bits).
    pub psn: u32,
}

/// The opcode as its byte, as captures show it.
#[cfg(feature = "serde")]
fn opcode_byte<S: serde::Serializer>(op: &Opcode, s: S) -> core::result::Result<S::Ok, S::Error> {
    s.serialize_u8(op.to_u8())
}

impl BthRepr {
    /// A BTH with the usual values: default partition key, no flags, AckReq off, BECN set only
    /// for a CNP.
    pub fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: super::DEFAULT_PKEY,
            fecn: false,
            becn: opcode == Opcode::Cnp,
            dest_qp,
            ack_req: false,
            psn,
        }
    }

    /// Reads the BTH values.
    pub fn parse<T: AsRef<[u8]>>(b: &Bth<T>) -> Result<Self> {
        b.check_len()?;
        if b.tver() != 0 {
            return Err(Error::Malformed {
                layer: Layer::Bth,
                what: "transport version is not 0",
            });
        }
        Ok(BthRepr {
            opcode: b.opcode(),
            solicited: b.solicited(),
            migreq: b.migreq(),
            pad_count: b.pad_count(),
            tver: b.tver(),
            pkey: b.pkey(),
            fecn: b.fecn(),
            becn: b.becn(),
            dest_qp: b.dest_qp(),
            ack_req: b.ack_req(),
            psn: b.psn(),
        })
    }

    /// Bytes the header takes.
    pub const fn header_len(&self) -> usize {
        12
    }

    /// Writes the BTH into the front of the view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, b: &mut Bth<T>) {
        b.set_opcode(self.opcode);
        b.set_flags(self.solicited, self.migreq, self.pad_count, self.tver);
        b.set_pkey(self.pkey);
        b.set_ecn_bits(self.fecn, self.becn);
        b.set_dest_qp(self.dest_qp);
        b.set_ack_req(self.ack_req);
        b.set_psn(self.psn);
    }
}
