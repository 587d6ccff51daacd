//! Where the bytes of a memory region live, and how the NIC reaches them: a program's own
//! memory (read and written in place, as a NIC's DMA does, by whoever hosts the engine), or the
//! content pattern of the lab's own flows, which is computed where it is read and checked where
//! it is written.

use crate::content;

/// What went wrong reaching memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryFault {
    /// The owner has no memory there (it unmapped it, or it is gone).
    #[error("{len} bytes at {addr:#x} are not the program's")]
    Unmapped {
        /// Address.
        addr: u64,
        /// Bytes.
        len: usize,
    },
    /// Bytes written to a lab flow's memory are not the flow's content.
    #[error("the bytes at offset {addr} are not the flow's content")]
    ContentMismatch {
        /// Offset in the flow's message.
        addr: u64,
    },
}

/// A program's memory as the NIC reaches it.
pub trait Memory: Send {
    /// Reads `buf.len()` bytes at `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault>;

    /// Writes `data` at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault>;
}

/// What a memory region's addresses refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// The memory of the program that owns context `0`.
    Context(usize),
    /// Lab flow `flow`'s message: address `a` is byte `a` of its content pattern.
    Pattern {
        /// The flow (its content is a function of its id).
        flow: u32,
    },
}

/// Reads a lab flow's content at `addr` (a multiple of 4).
pub(crate) fn pattern_read(flow: u32, addr: u64, buf: &mut [u8]) {
    content::fill(flow, addr, buf);
}

/// Checks that `data` is lab flow `flow`'s content at `addr` (a multiple of 4).
pub(crate) fn pattern_write(flow: u32, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
    if content::matches(flow, addr, data) {
        Ok(())
    } else {
        Err(MemoryFault::ContentMismatch { addr })
    }
}

/// Memory held in a vector, starting at a base address: a program's memory in tests and in
/// the simulator.
#[derive(Debug, Clone)]
pub struct VecMemory {
    base: u64,
    bytes: Vec<u8>,
}

impl VecMemory {
    /// `len` zero bytes at `base`.
    pub fn new(base: u64, len: usize) -> VecMemory {
        VecMemory {
            base,
            bytes: vec![0; len],
        }
    }

    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, MemoryFault> {
        let fault = MemoryFault::Unmapped { addr, len };
        let start = addr.checked_sub(self.base).ok_or(fault.clone())?;
        let start = usize::try_from(start).map_err(|_| fault.clone())?;
        let end = start.checked_add(len).ok_or(fault.clone())?;
        if end > self.bytes.len() {
            return Err(fault);
        }
        Ok(start..end)
    }

    /// The bytes at `addr`.
    pub fn get(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.range(addr, len).ok().map(|r| &self.bytes[r])
    }

    /// Sets the bytes at `addr`; false when they are outside.
    pub fn set(&mut self, addr: u64, data: &[u8]) -> bool {
        match self.range(addr, data.len()) {
            Ok(r) => {
                self.bytes[r].copy_from_slice(data);
                true
            }
            Err(_) => false,
        }
    }
}

impl Memory for VecMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_memory_refuses_what_is_outside() {
        let mut m = VecMemory::new(0x1000, 16);
        m.write(0x1004, &[1, 2, 3]).unwrap();
        let mut b = [0u8; 4];
        m.read(0x1003, &mut b).unwrap();
        assert_eq!(b, [0, 1, 2, 3]);
        assert!(m.read(0x0fff, &mut b).is_err());
        assert!(m.write(0x100e, &[0; 3]).is_err());
        assert!(m.read(u64::MAX, &mut b).is_err());
    }

    #[test]
    fn a_pattern_reads_its_content_and_refuses_other_bytes() {
        let mut b = vec![0u8; 100];
        pattern_read(3, 400, &mut b);
        assert!(pattern_write(3, 400, &b).is_ok());
        b[7] ^= 1;
        assert_eq!(
            pattern_write(3, 400, &b),
            Err(MemoryFault::ContentMismatch { addr: 400 })
        );
    }
}
