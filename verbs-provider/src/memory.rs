//! Memory the program shares with its NIC: a memfd, mapped here; the NIC maps the same memfd
//! (it takes the descriptor from the program while the command that names it runs).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A shared mapping and the memfd behind it.
pub(crate) struct Shared {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

// The mapping is plain memory; who may write what is the queue protocol's business.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// `len` zero bytes in a new memfd named `name`, mapped read-write and shared.
    pub(crate) fn new(name: &std::ffi::CStr, len: usize) -> Result<Shared, i32> {
        // memfd_create copies the name; the descriptor is ours.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(crate::errno());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(crate::errno());
        }
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
            return Err(crate::errno());
        }
        Ok(Shared {
            fd,
            base: base as *mut u8,
            len,
        })
    }

    /// The memfd, for the command that hands it to the NIC.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsRef<[std::sync::atomic::AtomicU64]> for Shared {
    fn as_ref(&self) -> &[std::sync::atomic::AtomicU64] {
        // The mapping is page-aligned and `len` bytes long for as long as `self` lives; words
        // are reached only atomically (the peer writes them concurrently).
        unsafe { std::slice::from_raw_parts(self.base as *const std::sync::atomic::AtomicU64, self.len / 8) }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Mapped by `new`; nothing refers into it once its owner drops it.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
