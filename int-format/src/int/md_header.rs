//! The 12-byte INT-MD metadata header (INT v2.1 section 5.8).

use crate::error::{Error, Layer, Result, need};
use crate::field::{set_u16, u16_at};

use super::Instructions;

/// Byte offsets and ranges of the INT-MD metadata header's fields.
mod field {
    use crate::field::Field;

    pub(super) const VER_FLAGS: usize = 0;
    pub(super) const HOP_ML: usize = 2;
    pub(super) const REMAINING: usize = 3;
    pub(super) const INSTRUCTIONS: Field = 4..6;
    pub(super) const DS_INSTRUCTIONS: Field = 6..8;
    pub(super) const DS_ID: Field = 8..10;
    pub(super) const DS_FLAGS: Field = 10..12;
}

/// A read/write view of an INT-MD header.
#[derive(Debug, Clone)]
pub struct IntMdHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IntMdHeader<T> {
    /// Length of the MD header.
    pub const LEN: usize = 12;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        IntMdHeader { buffer }
    }

    /// Wraps a buffer after checking it holds an MD header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks the buffer holds a whole MD header.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::IntMd, Self::LEN, self.buffer.as_ref().len())
    }

    /// Version (2).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_FLAGS] >> 4
    }

    /// D: the sink discards the packet after taking the metadata.
    pub fn discard(&self) -> bool {
        self.buffer.as_ref()[field::VER_FLAGS] & 0x08 != 0
    }

    /// E: a node could not add metadata because the remaining hop count was zero.
    pub fn hop_limit_exceeded(&self) -> bool {
        self.buffer.as_ref()[field::VER_FLAGS] & 0x04 != 0
    }

    /// M: a node could not add metadata because the MTU would have been exceeded.
    pub fn mtu_exceeded(&self) -> bool {
        self.buffer.as_ref()[field::VER_FLAGS] & 0x02 != 0
    }

    /// The 12 reserved bits (bits 24:13).
    pub fn reserved(&self) -> u16 {
        let b = self.buffer.as_ref();
        (u16::from(b[0] & 1) << 11) | (u16::from(b[1]) << 3) | u16::from(b[2] >> 5)
    }

    /// Hop ML: per-hop metadata length in words.
    pub fn hop_ml(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_ML] & 0x1f
    }

    /// Remaining hop count.
    pub fn remaining_hops(&self) -> u8 {
        self.buffer.as_ref()[field::REMAINING]
    }

    /// Instruction bitmap.
    pub fn instruction_bitmap(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::INSTRUCTIONS.start)
    }

    /// Domain-specific ID.
    pub fn domain_id(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::DS_INSTRUCTIONS.start)
    }

    /// Domain-specific instructions.
    pub fn ds_instructions(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::DS_ID.start)
    }

    /// Domain-specific flags.
    pub fn ds_flags(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::DS_FLAGS.start)
    }

    /// Bitmap, domain ID and DS instructions together.
    pub fn instructions(&self) -> Instructions {
        Instructions {
            bitmap: self.instruction_bitmap(),
            domain_id: self.domain_id(),
            ds_instructions: self.ds_instructions(),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IntMdHeader<T> {
    /// Sets version and the D, E, M flags, clearing the reserved bits.
    pub fn set_version_flags(&mut self, version: u8, d: bool, e: bool, m: bool) {
        let b = self.buffer.as_mut();
        b[0] = (version << 4) | (u8::from(d) << 3) | (u8::from(e) << 2) | (u8::from(m) << 1);
        b[1] = 0;
        b[2] &= 0x1f;
    }

    /// Sets the E flag.
    pub fn set_hop_limit_exceeded(&mut self) {
        self.buffer.as_mut()[field::VER_FLAGS] |= 0x04;
    }

    /// Sets the M flag.
    pub fn set_mtu_exceeded(&mut self) {
        self.buffer.as_mut()[field::VER_FLAGS] |= 0x02;
    }

    /// Sets Hop ML (five bits).
    pub fn set_hop_ml(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::HOP_ML];
        *b = (*b & 0xe0) | (v & 0x1f);
    }

    /// Sets the remaining hop count.
    pub fn set_remaining_hops(&mut self, v: u8) {
        self.buffer.as_mut()[field::REMAINING] = v;
    }

    /// Sets the instruction bitmap.
    pub fn set_instruction_bitmap(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::INSTRUCTIONS.start, v);
    }

    /// Sets the domain-specific ID.
    pub fn set_domain_id(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DS_INSTRUCTIONS.start, v);
    }

    /// Sets the DS instructions.
    pub fn set_ds_instructions(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DS_ID.start, v);
    }

    /// Sets the DS flags.
    pub fn set_ds_flags(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DS_FLAGS.start, v);
    }
}

/// The values of an INT-MD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntMdRepr {
    /// D flag.
    pub discard: bool,
    /// E flag.
    pub hop_limit_exceeded: bool,
    /// M flag.
    pub mtu_exceeded: bool,
    /// Hop ML in words.
    pub hop_ml: u8,
    /// Remaining hop count.
    pub remaining_hops: u8,
    /// Which fields each hop carries.
    pub instructions: Instructions,
    /// DS flags.
    pub ds_flags: u16,
}

impl IntMdRepr {
    /// The version this crate reads and writes.
    pub const VERSION: u8 = 2;

    /// Reads the header values; the version must be 2.
    pub fn parse<T: AsRef<[u8]>>(h: &IntMdHeader<T>) -> Result<Self> {
        h.check_len()?;
        if h.version() != Self::VERSION {
            return Err(Error::Malformed {
                layer: Layer::IntMd,
                what: "version is not 2",
            });
        }
        Ok(IntMdRepr {
            discard: h.discard(),
            hop_limit_exceeded: h.hop_limit_exceeded(),
            mtu_exceeded: h.mtu_exceeded(),
            hop_ml: h.hop_ml(),
            remaining_hops: h.remaining_hops(),
            instructions: h.instructions(),
            ds_flags: h.ds_flags(),
        })
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut IntMdHeader<T>) {
        h.set_version_flags(Self::VERSION, self.discard, self.hop_limit_exceeded, self.mtu_exceeded);
        h.set_hop_ml(self.hop_ml);
        h.set_remaining_hops(self.remaining_hops);
        h.set_instruction_bitmap(self.instructions.bitmap);
        h.set_domain_id(self.instructions.domain_id);
        h.set_ds_instructions(self.instructions.ds_instructions);
        h.set_ds_flags(self.ds_flags);
    }
}
