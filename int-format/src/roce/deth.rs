//! The Datagram Extended Transport Header (8 bytes) of an Unreliable Datagram packet: the
//! queue key the receiving QP checks and the QP the datagram came from.

use crate::error::{Layer, Result, need};
use crate::field::{set_u24, set_u32, u24_at, u32_at};

/// Byte ranges of the DETH's fields.
mod field {
    use crate::field::Field;

    pub(super) const Q_KEY: Field = 0..4;
    pub(super) const RESERVED: usize = 4;
    pub(super) const SRC_QP: Field = 5..8;
}

/// A read/write view of a DETH.
#[derive(Debug, Clone)]
pub struct Deth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Deth<T> {
    /// Length of the DETH.
    pub const LEN: usize = 8;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Deth { buffer }
    }

    /// Wraps a buffer after checking it holds a DETH.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let d = Self::new_unchecked(buffer);
        d.check_len()?;
        Ok(d)
    }

    /// Checks the buffer holds a whole DETH.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Deth, Self::LEN, self.buffer.as_ref().len())
    }

    /// Queue key.
    pub fn qkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::Q_KEY.start)
    }

    /// Source QP number (24 bits).
    pub fn src_qp(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::SRC_QP.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Deth<T> {
    /// Sets the queue key.
    pub fn set_qkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::Q_KEY.start, v);
    }

    /// Sets the source QP number (low 24 bits) and clears the reserved byte.
    pub fn set_src_qp(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        b[field::RESERVED] = 0;
        set_u24(b, field::SRC_QP.start, v);
    }
}

/// The values of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Reads the DETH values.
    pub fn parse<T: AsRef<[u8]>>(d: &Deth<T>) -> Result<Self> {
        d.check_len()?;
        Ok(DethRepr {
            qkey: d.qkey(),
            src_qp: d.src_qp(),
        })
    }

    /// Writes the DETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, d: &mut Deth<T>) {
        d.set_qkey(self.qkey);
        d.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deth_round_trips() {
        let r = DethRepr {
            qkey: 0x1111_1111,
            src_qp: 0x00ab_cdef,
        };
        let mut b = [0xffu8; 8];
        r.emit(&mut Deth::new_unchecked(&mut b[..]));
        assert_eq!(b, [0x11, 0x11, 0x11, 0x11, 0, 0xab, 0xcd, 0xef]);
        assert_eq!(DethRepr::parse(&Deth::new_checked(&b[..]).unwrap()).unwrap(), r);
        assert!(Deth::new_checked(&b[..7]).is_err());
    }
}
