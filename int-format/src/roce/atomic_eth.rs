//! The Atomic Extended Transport Header (28 bytes) of a compare-and-swap or fetch-and-add
//! request, and the Atomic ACK Extended Transport Header (8 bytes) of its answer.

use crate::error::{Layer, Result, need};
use crate::field::{set_u32, set_u64, u32_at, u64_at};

/// Byte ranges of the AtomicETH's fields.
mod field {
    use crate::field::Field;

    pub(super) const VIRTUAL_ADDRESS: Field = 0..8;
    pub(super) const R_KEY: Field = 8..12;
    pub(super) const SWAP_ADD: Field = 12..20;
    pub(super) const COMPARE: Field = 20..28;
}

/// A read/write view of an AtomicETH.
#[derive(Debug, Clone)]
pub struct AtomicEth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AtomicEth<T> {
    /// Length of the AtomicETH.
    pub const LEN: usize = 28;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        AtomicEth { buffer }
    }

    /// Wraps a buffer after checking it holds an AtomicETH.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let a = Self::new_unchecked(buffer);
        a.check_len()?;
        Ok(a)
    }

    /// Checks the buffer holds a whole AtomicETH.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::AtomicEth, Self::LEN, self.buffer.as_ref().len())
    }

    /// Remote virtual address of the 8-byte word.
    pub fn virtual_addr(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::VIRTUAL_ADDRESS.start)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::R_KEY.start)
    }

    /// The value swapped in (compare-and-swap) or added (fetch-and-add).
    pub fn swap_add(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SWAP_ADD.start)
    }

    /// The value compared with (compare-and-swap only).
    pub fn compare(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::COMPARE.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEth<T> {
    /// Sets the remote virtual address.
    pub fn set_virtual_addr(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::VIRTUAL_ADDRESS.start, v);
    }

    /// Sets the remote key.
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::R_KEY.start, v);
    }

    /// Sets the swap or add value.
    pub fn set_swap_add(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SWAP_ADD.start, v);
    }

    /// Sets the compare value.
    pub fn set_compare(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::COMPARE.start, v);
    }
}

/// The values of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicEthRepr {
    /// Remote virtual address (8-byte aligned).
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (compare-and-swap) or add (fetch-and-add) value.
    pub swap_add: u64,
    /// Compare value (compare-and-swap; 0 otherwise).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Reads the AtomicETH values.
    pub fn parse<T: AsRef<[u8]>>(a: &AtomicEth<T>) -> Result<Self> {
        a.check_len()?;
        Ok(AtomicEthRepr {
            virtual_addr: a.virtual_addr(),
            rkey: a.rkey(),
            swap_add: a.swap_add(),
            compare: a.compare(),
        })
    }

    /// Writes the AtomicETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, a: &mut AtomicEth<T>) {
        a.set_virtual_addr(self.virtual_addr);
        a.set_rkey(self.rkey);
        a.set_swap_add(self.swap_add);
        a.set_compare(self.compare);
    }
}

/// Length of the AtomicAckETH.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;

/// The AtomicAckETH: the value the 8-byte word held before the atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicAckEth(pub u64);

impl AtomicAckEth {
    /// Reads the original value from the front of `b`.
    pub fn parse(b: &[u8]) -> Result<AtomicAckEth> {
        need(Layer::AtomicAckEth, ATOMIC_ACK_ETH_LEN, b.len())?;
        Ok(AtomicAckEth(u64_at(b, 0)))
    }

    /// Writes the original value into the front of `b` (at least 8 bytes).
    pub fn emit(&self, b: &mut [u8]) {
        set_u64(b, 0, self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_eth_round_trips_in_network_order() {
        let r = AtomicEthRepr {
            virtual_addr: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            swap_add: 0xaabb_ccdd_eeff_0011,
            compare: 7,
        };
        let mut b = [0u8; 28];
        r.emit(&mut AtomicEth::new_unchecked(&mut b[..]));
        assert_eq!(&b[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[8..12], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(
            AtomicEthRepr::parse(&AtomicEth::new_checked(&b[..]).unwrap()).unwrap(),
            r
        );
        assert!(AtomicEth::new_checked(&b[..27]).is_err());
        let mut a = [0u8; 8];
        AtomicAckEth(0xdead_beef_0000_0001).emit(&mut a);
        assert_eq!(AtomicAckEth::parse(&a).unwrap().0, 0xdead_beef_0000_0001);
        assert!(AtomicAckEth::parse(&a[..7]).is_err());
    }
}
