//! Per-thread settings.

use std::io;

/// Sets the calling thread's timer slack to 1 ns, so its sleeps end as precisely as the kernel
/// allows (the default slack is 50 us).
pub fn precise_timers() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
