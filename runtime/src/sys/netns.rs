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

/// Runs `f` on a thread in a network namespace of its own, loopback up and IPv6 off (so the
/// kernel sends nothing of its own), and returns its result: for tests, as root (elsewhere the
/// test says so and fails).
#[cfg(test)]
pub(crate) fn in_fresh_namespace<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare affects only this thread's namespaces (and its children's).
        assert_eq!(
            unsafe { libc::unshare(libc::CLONE_NEWNET) },
            0,
            "unshare (run as root): {}",
            io::Error::last_os_error()
        );
        for key in ["net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"] {
            super::sysctl::write(key, "1").expect("sysctl");
        }
        ip_for_test(&["link", "set", "lo", "up"]);
        f()
    })
    .join()
    .expect("the namespace thread")
}

/// Runs `ip ARGS` (iproute2) in the calling thread's namespace, for tests.
#[cfg(test)]
pub(crate) fn ip_for_test(args: &[&str]) {
    let st = std::process::Command::new("ip")
        .args(args)
        .status()
        .expect("ip (iproute2)");
    assert!(st.success(), "ip {args:?}");
}
