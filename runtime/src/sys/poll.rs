//! Waiting for any of a few descriptors to become readable, for loops too small for epoll.

use std::io;
use std::os::fd::RawFd;

/// Waits up to `timeout_ms` for one of `fds` (at most 8) to be readable; returns how many are.
pub fn readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<usize> {
    let mut polled = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 8];
    if fds.len() > polled.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "more than 8 descriptors"));
    }
    for (p, &fd) in polled.iter_mut().zip(fds) {
        p.fd = fd;
        p.events = libc::POLLIN;
    }
    // SAFETY: a live array of `fds.len()` pollfds, written by the kernel only within it.
    let n = unsafe { libc::poll(polled.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    match n {
        n if n >= 0 => Ok(n as usize),
        _ => {
            let e = io::Error::last_os_error();
            // A signal is no failure: the caller looks again.
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            }
        }
    }
}
