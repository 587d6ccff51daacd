//! Another process's memory, read and written in place: what a NIC's DMA does to a program's
//! registered memory. The file is `/proc/PID/mem` opened once, when the program attached: it
//! stays bound to that process's memory (a later process with the same id cannot be reached
//! through it), and once the process is gone every access fails.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// A process's memory.
#[derive(Debug)]
pub struct ProcessMemory {
    file: File,
}

impl ProcessMemory {
    /// The memory of process `pid` (which must be alive: the caller holds a pidfd of it and
    /// checks it is still alive after this returns, so the file is that process's).
    pub fn open(pid: u32) -> io::Result<ProcessMemory> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))?;
        Ok(ProcessMemory { file })
    }

    /// Reads `buf.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, addr)
    }

    /// Writes `data` at `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_and_writes_itself_through_the_file() {
        let m = ProcessMemory::open(std::process::id()).expect("open");
        let mut target = Box::new([0u8; 16]);
        let addr = target.as_ptr() as u64;
        m.write(addr + 4, b"abcd").expect("write");
        let seen = std::hint::black_box(&mut target);
        assert_eq!(&seen[4..8], b"abcd");
        let mut back = [0u8; 4];
        m.read(addr + 4, &mut back).expect("read");
        assert_eq!(&back, b"abcd");
        assert!(m.read(8, &mut back).is_err(), "nothing is mapped at 8");
    }
}
