//! A process held by a pidfd: a reference that cannot come to name another process, readable
//! once the process has exited, and through which the lab takes copies of its descriptors
//! (pidfd_getfd: the NIC takes the doorbell and the shared queues a program made).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A process.
#[derive(Debug)]
pub struct PidFd {
    fd: OwnedFd,
    pid: u32,
}

impl PidFd {
    /// The process whose thread `tid` is (a thread id, as FUSE reports who called; its
    /// process is what a pidfd names). The thread must be alive (it is, while it waits in a
    /// call the lab is answering).
    pub fn of_thread(tid: u32) -> io::Result<PidFd> {
        let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
        let tgid = status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse::<u32>().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("/proc/{tid}/status has no Tgid")))?;
        PidFd::open(tgid)
    }

    /// Process `pid`.
    pub fn open(pid: u32) -> io::Result<PidFd> {
        // SAFETY: pidfd_open(2) with no flags; the result is checked.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(PidFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            pid,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A copy of the process's descriptor `target`, ours to keep (close-on-exec).
    pub fn take_fd(&self, target: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: pidfd_getfd(2); the result is checked.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.fd.as_raw_fd(), target, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }

    /// True while the process has not exited.
    pub fn is_alive(&self) -> bool {
        // SAFETY: pidfd_send_signal with signal 0 only checks.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                0,
                std::ptr::null::<u8>(),
                0,
            ) == 0
        }
    }

    /// Its descriptor: readable once the process has exited.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_gives_a_copy_of_its_descriptor() {
        let me = PidFd::of_thread(std::process::id()).expect("pidfd of this process");
        assert!(me.is_alive());
        let (r, w) = std::io::pipe().expect("pipe");
        let copy = me.take_fd(w.as_raw_fd()).expect("pidfd_getfd");
        drop(w);
        let mut f = std::fs::File::from(copy);
        std::io::Write::write_all(&mut f, b"x").expect("the copy writes the same pipe");
        let mut buf = [0u8; 1];
        std::io::Read::read_exact(&mut &r, &mut buf).expect("read");
        assert_eq!(&buf, b"x");
        assert!(me.take_fd(9999).is_err(), "no such descriptor");
    }
}
