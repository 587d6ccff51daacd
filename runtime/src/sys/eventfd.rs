//! An eventfd that wakes a worker from its wait.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// A doorbell: ringing it makes its descriptor readable until drained.
#[derive(Debug, Clone)]
pub struct Doorbell(Arc<OwnedFd>);

impl Doorbell {
    /// A new doorbell.
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: plain eventfd(2); the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Doorbell(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// Rings it. Only a counter overflow (2^64 - 1 rings unanswered) can make the write fail,
    /// and then it is readable anyway, which is all a ring is for.
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd.
        let _readable_anyway = unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Clears it.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd; "would block" means
        // it was clear already.
        let _clear_already = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    /// Its descriptor, to wait on.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
