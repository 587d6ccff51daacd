//! epoll with nanosecond timeouts (epoll_pwait2): a worker waits for its descriptors or its next
//! deadline, whichever comes first.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An epoll instance, level-triggered.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

/// One readiness report: the token given at [`Epoll::add`].
pub type Event = libc::epoll_event;

impl Epoll {
    /// A new instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain epoll_create1; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `fd` for input, reported with `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: a valid epoll fd and a live event.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = empty_event();
        // SAFETY: a valid epoll fd; the event is ignored for a delete but must be non-null.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Its own descriptor: readable while any descriptor it watches is (an epoll can be
    /// watched by another).
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Waits at most `timeout_ns` (None: until something is ready) and fills `events`; returns
    /// how many. An interrupted wait is a wait that saw nothing.
    pub fn wait(&self, events: &mut [Event], timeout_ns: Option<u64>) -> io::Result<usize> {
        let ts = timeout_ns.map(|t| libc::timespec {
            tv_sec: (t / 1_000_000_000) as libc::time_t,
            tv_nsec: (t % 1_000_000_000) as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: events is a live array of the length passed; tsp is null or a live timespec.
        let n = unsafe {
            libc::epoll_pwait2(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                tsp,
                std::ptr::null(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
        Ok(n as usize)
    }
}

/// An empty event array entry.
pub fn empty_event() -> Event {
    libc::epoll_event { events: 0, u64: 0 }
}
