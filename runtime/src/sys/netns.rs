//! Entering a network namespace. setns(2) moves only the calling thread; sockets and devices it
//! creates stay in that namespace for their whole life, whichever thread later uses them.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Moves the calling thread into the network namespace at `path` (such as
/// /var/run/netns/NAME).
pub fn enter(path: &Path) -> io::Result<()> {
    let ns = File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // SAFETY: setns only changes this thread's namespace; the fd is valid for the call.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("entering {}: {e}", path.display())));
    }
    Ok(())
}

/// Runs `f` on a fresh thread that has entered the network namespace at `path` and returns its
/// result.
pub fn run_in<T, F>(path: &Path, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let path = path.to_owned();
    std::thread::Builder::new()
        .name("netns".into())
        .spawn(move || {
            enter(&path)?;
            f()
        })?
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
}
