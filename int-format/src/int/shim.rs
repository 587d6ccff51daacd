//! The 4-byte INT shim for TCP/UDP (INT v2.1 section 5.7.2).

use crate::error::{Error, Layer, Result, need};
use crate::field::{set_u16, u16_at};

/// The INT type in the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    /// 1: INT-MD (hop-by-hop metadata in the packet).
    Md,
    /// 2: INT-Destination.
    Destination,
    /// 3: INT-MX.
    Mx,
    /// Any other value.
    Other(u8),
}

impl IntType {
    /// Decodes the four-bit type.
    pub fn from_bits(v: u8) -> IntType {
        match v & 0x0f {
            1 => IntType::Md,
            2 => IntType::Destination,
            3 => IntType::Mx,
            v => IntType::Other(v),
        }
    }

    /// The four-bit type.
    pub fn bits(self) -> u8 {
        match self {
            IntType::Md => 1,
            IntType::Destination => 2,
            IntType::Mx => 3,
            IntType::Other(v) => v & 0x0f,
        }
    }
}

/// Byte offsets and ranges of the INT shim header's fields.
mod field {
    use crate::field::Field;

    pub(super) const TYPE_NPT: usize = 0;
    pub(super) const LENGTH: usize = 1;
    pub(super) const NEXT: Field = 2..4;
}

/// A read/write view of an INT shim.
#[derive(Debug, Clone)]
pub struct IntShim<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IntShim<T> {
    /// Length of the shim.
    pub const LEN: usize = 4;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        IntShim { buffer }
    }

    /// Wraps a buffer after checking it holds a shim.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let s = Self::new_unchecked(buffer);
        s.check_len()?;
        Ok(s)
    }

    /// Checks the buffer holds a whole shim.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::IntShim, Self::LEN, self.buffer.as_ref().len())
    }

    /// INT type.
    pub fn int_type(&self) -> IntType {
        IntType::from_bits(self.buffer.as_ref()[field::TYPE_NPT] >> 4)
    }

    /// Next protocol type: 0, 1 (original UDP port kept) or 2.
    pub fn npt(&self) -> u8 {
        (self.buffer.as_ref()[field::TYPE_NPT] >> 2) & 3
    }

    /// The two reserved bits of byte 0.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE_NPT] & 3
    }

    /// Length of the MD header and hop stack in 4-byte words (the shim is not counted).
    pub fn length_words(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    /// Bytes 2-3: with NPT=1, the original UDP destination port.
    pub fn next_field(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::NEXT.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IntShim<T> {
    /// Sets type and NPT (reserved bits cleared).
    pub fn set_type_npt(&mut self, t: IntType, npt: u8) {
        self.buffer.as_mut()[field::TYPE_NPT] = (t.bits() << 4) | ((npt & 3) << 2);
    }

    /// Sets the length in words.
    pub fn set_length_words(&mut self, v: u8) {
        self.buffer.as_mut()[field::LENGTH] = v;
    }

    /// Sets bytes 2-3.
    pub fn set_next_field(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::NEXT.start, v);
    }
}

/// The values of an INT shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntShimRepr {
    /// INT type.
    pub int_type: IntType,
    /// Next protocol type.
    pub npt: u8,
    /// MD header plus stack, in words.
    pub length_words: u8,
    /// Bytes 2-3 (original UDP destination port with NPT=1).
    pub next_field: u16,
}

impl IntShimRepr {
    /// Reads the shim values; the type must be INT-MD and the length must cover an MD header.
    pub fn parse<T: AsRef<[u8]>>(s: &IntShim<T>) -> Result<Self> {
        s.check_len()?;
        let r = IntShimRepr {
            int_type: s.int_type(),
            npt: s.npt(),
            length_words: s.length_words(),
            next_field: s.next_field(),
        };
        if r.int_type != IntType::Md {
            return Err(Error::Malformed {
                layer: Layer::IntShim,
                what: "type is not INT-MD",
            });
        }
        if r.npt == 3 {
            return Err(Error::Malformed {
                layer: Layer::IntShim,
                what: "NPT 3 is reserved",
            });
        }
        if r.length_words < 3 {
            return Err(Error::Malformed {
                layer: Layer::IntShim,
                what: "length shorter than the MD header",
            });
        }
        Ok(r)
    }

    /// Writes the shim.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, s: &mut IntShim<T>) {
        s.set_type_npt(self.int_type, self.npt);
        s.set_length_words(self.length_words);
        s.set_next_field(self.next_field);
    }
}
