//! The process's limit on open descriptors: a lab of thousands of queue pairs and hundreds of
//! ports holds more than the usual soft limit of 1024.

use std::io;

/// Raises the soft limit on open descriptors to the hard limit; returns the new soft limit.
pub fn raise_open_files() -> io::Result<u64> {
    // SAFETY: an all-zero rlimit is valid; getrlimit fills it.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a live rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        // SAFETY: a live rlimit no higher than the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(r.rlim_cur)
}
