//! Signals to other processes (a standing lab's, a child the lab started).

use std::io;

/// Sends `sig` to process `pid`; a process already gone is no error.
pub fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other(format!("pid {pid} out of range")))?;
    // SAFETY: kill(2) has no memory effects.
    if unsafe { libc::kill(pid, sig) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e);
        }
    }
    Ok(())
}

/// Sends `sig` to every process of the group `leader` leads (a program started in a group of
/// its own, and what it started); a group already gone is no error.
pub fn signal_group(leader: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(leader).map_err(|_| io::Error::other(format!("pid {leader} out of range")))?;
    // SAFETY: kill(2) with a negative pid signals the group; it has no memory effects.
    if unsafe { libc::kill(-pid, sig) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e);
        }
    }
    Ok(())
}
