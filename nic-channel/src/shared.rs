//! The memory both ends of the channel map: a memfd one side made, mapped read-write by each,
//! of a length checked against the file's, unmapped when dropped.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A shared mapping of a whole memfd.
#[derive(Debug)]
pub struct SharedMapping {
    base: *mut u8,
    len: usize,
    _fd: OwnedFd,
}

// A mapping is plain memory, reached only as atomic words (`as_ref`); the protocols over it say
// who writes what.
unsafe impl Send for SharedMapping {}
unsafe impl Sync for SharedMapping {}

impl SharedMapping {
    /// Maps the first `len` bytes of `fd`, which must be at least that long (a shorter file
    /// would fault on access, so it is refused).
    pub fn map(fd: OwnedFd, len: usize) -> io::Result<SharedMapping> {
        // SAFETY: fstat into a zeroed stat; the result is checked.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || (st.st_size as u64) < len as u64 || len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a shared queue of {len} bytes in a file of {} bytes", st.st_size),
            ));
        }
        // SAFETY: a fresh mapping of a checked length; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMapping {
            base: base as *mut u8,
            len,
            _fd: fd,
        })
    }

    /// Its start (page-aligned).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it is empty (never: an empty mapping is refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl AsRef<[std::sync::atomic::AtomicU64]> for SharedMapping {
    /// The mapping as 64-bit words, the only way it is reached: the other process writes it
    /// concurrently, so every access is atomic.
    fn as_ref(&self) -> &[std::sync::atomic::AtomicU64] {
        // SAFETY: page-aligned, `len` bytes mapped for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.base as *const std::sync::atomic::AtomicU64, self.len / 8) }
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `map` with this length; nothing refers into it once dropped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
