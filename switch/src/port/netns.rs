//! Running a piece of set-up inside another network namespace.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Runs `f` on a fresh thread that has entered the network namespace at `path` (such as
/// /var/run/netns/NAME) and returns its result. Sockets and devices `f` creates stay in that
/// namespace for their whole life, whichever thread later uses them.
pub fn run_in_netns<T, F>(path: &Path, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let ns = File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    std::thread::spawn(move || {
        // SAFETY: setns only changes this thread's namespace; the fd is valid for the call.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        f()
    })
    .join()
    .map_err(|_| io::Error::other("namespace thread panicked"))?
}
