//! The RDMA Extended Transport Header (16 bytes): where a WRITE or READ lands.

use crate::error::{Layer, Result, need};
use crate::field::{set_u32, set_u64, u32_at, u64_at};

/// Byte ranges of the RETH's fields.
mod field {
    use crate::field::Field;

    pub(super) const VIRTUAL_ADDRESS: Field = 0..8;
    pub(super) const R_KEY: Field = 8..12;
    pub(super) const DMA_LENGTH: Field = 12..16;
}

/// A read/write view of a RETH.
#[derive(Debug, Clone)]
pub struct Reth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Reth<T> {
    /// Length of the RETH.
    pub const LEN: usize = 16;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        Reth { buffer }
    }

    /// Wraps a buffer after checking it holds a RETH.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let r = Self::new_unchecked(buffer);
        r.check_len()?;
        Ok(r)
    }

    /// Checks the buffer holds a whole RETH.
    pub fn check_len(&self) -> Result<()> {
        need(Layer::Reth, Self::LEN, self.buffer.as_ref().len())
    }

    /// Remote virtual address.
    pub fn virtual_addr(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::VIRTUAL_ADDRESS.start)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::R_KEY.start)
    }

    /// Length of the whole RDMA operation in bytes.
    pub fn dma_len(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::DMA_LENGTH.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Reth<T> {
    /// Sets the remote virtual address.
    pub fn set_virtual_addr(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::VIRTUAL_ADDRESS.start, v);
    }

    /// Sets the remote key.
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::R_KEY.start, v);
    }

    /// Sets the DMA length.
    pub fn set_dma_len(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::DMA_LENGTH.start, v);
    }
}

/// The values of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RethRepr {
    /// Remote virtual address.
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length in bytes.
    pub dma_len: u32,
}

impl RethRepr {
    /// Reads the RETH values.
    pub fn parse<T: AsRef<[u8]>>(r: &Reth<T>) -> Result<Self> {
        r.check_len()?;
        Ok(RethRepr {
            virtual_addr: r.virtual_addr(),
            rkey: r.rkey(),
            dma_len: r.dma_len(),
        })
    }

    /// Writes the RETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, r: &mut Reth<T>) {
        r.set_virtual_addr(self.virtual_addr);
        r.set_rkey(self.rkey);
        r.set_dma_len(self.dma_len);
    }
}
