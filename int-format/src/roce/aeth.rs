//! The ACK Extended Transport Header (4 bytes): ACKs and NAKs.

use crate::error::{Error, Layer, Result, need};
use crate::field::{set_u24, u24_at};

/// NAK codes (syndrome 0b011x_xxxx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error (the receiver saw a gap).
    PsnSequenceError,
    /// 1: invalid request.
    InvalidRequest,
    /// 2: remote access error.
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
}

/// The meaning of the syndrome byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a credit count (0x1F = unlimited).
    Ack {
        /// Five-bit credit count.
        credits: u8,
    },
    /// Receiver not ready, with a five-bit timer code.
    RnrNak {
        /// Five-bit timer code.
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
}

impl Syndrome {
    /// Credit count that means "unlimited".
    pub const UNLIMITED_CREDITS: u8 = 0x1f;

    /// Decodes a syndrome byte.
    pub fn from_u8(v: u8) -> Result<Syndrome> {
        let bad = Err(Error::Malformed {
            layer: Layer::Aeth,
            what: "reserved syndrome",
        });
        if v & 0x80 != 0 {
            return bad;
        }
        match (v >> 5) & 3 {
            0 => Ok(Syndrome::Ack { credits: v & 0x1f }),
            1 => Ok(Syndrome::RnrNak { timer: v & 0x1f }),
            3 => Ok(Syndrome::Nak(match v & 0x1f {
                0 => NakCode::PsnSequenceError,
                1 => NakCode::InvalidRequest,
                2 => NakCode::RemoteAccessError,
                3 => NakCode::RemoteOperationalError,
                4 => NakCode::InvalidRdRequest,
                _ => return bad,
            })),
            _ => bad,
        }
    }

    /// The syndrome byte.
    pub fn to_u8(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => credits & 0x1f,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1f),
            Syndrome::Nak(code) => {
                0x60 | match code {
                    NakCode::PsnSequenceError => 0,
                    NakCode::InvalidRequest => 1,
                    NakCode::RemoteAccessError => 2,
                    NakCode::RemoteOperationalError => 3,
                    NakCode::InvalidRdRequest => 4,
                }
            }
        }
    }
}

/// Byte offsets and ranges of the AETH's fields.
mod field {
    use crate::field::Field;

    pub(super) const SYNDROME: usize = 0;
    pub(super) const MSN: Field = 1..4;
}

/// A read/write view of an AETH.
#[derive(Debug, Clone)]
pub struct Aeth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Aeth<T> {
    /// Length of the AETH.
    pub const LEN: usize = 4;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Aeth { buffer }
    }

    /// Wraps a buffer after checking it holds an AETH.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let a = Self::new_unchecked(buffer);
        a.check_len()?;
        Ok(a)
    }

    /// Checks the buffer holds a whole AETH.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Aeth, Self::LEN, self.buffer.as_ref().len())
    }

    /// The raw syndrome byte.
    pub fn syndrome_byte(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// The decoded syndrome.
    pub fn syndrome(&self) -> Result<Syndrome> {
        Syndrome::from_u8(self.syndrome_byte())
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::MSN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Aeth<T> {
    /// Sets the syndrome.
    pub fn set_syndrome(&mut self, s: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = s.to_u8();
    }

    /// Sets the MSN (low 24 bits).
    pub fn set_msn(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::MSN.start, v);
    }
}

/// The values of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AethRepr {
    /// ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// Reads the AETH values.
    pub fn parse<T: AsRef<[u8]>>(a: &Aeth<T>) -> Result<Self> {
        a.check_len()?;
        Ok(AethRepr {
            syndrome: a.syndrome()?,
            msn: a.msn(),
        })
    }

    /// Writes the AETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, a: &mut Aeth<T>) {
        a.set_syndrome(self.syndrome);
        a.set_msn(self.msn);
    }
}
