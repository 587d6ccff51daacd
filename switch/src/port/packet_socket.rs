//! An AF_PACKET socket bound to one interface, read and written in batches with
//! recvmmsg/sendmmsg.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::BATCH;
use crate::clock::Clock;
use crate::frame::FrameBuf;

/// Linux's PACKET_IGNORE_OUTGOING socket option (4.20+): do not see our own transmissions.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// Control-message space per received frame: one SCM_TIMESTAMPNS (a timespec) with headers.
const CMSG_SPACE: usize = 64;

/// A raw socket on one interface. Received frames carry the kernel's receive time, so a worker
/// that wakes late still sees when each frame really arrived.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    clock: &'static Clock,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn set_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the option value is a live c_int of the size passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as u32,
        )
    })
    .map(|_| ())
}

impl PacketSocket {
    /// Opens a non-blocking raw socket on `device` (in the calling thread's namespace).
    pub fn open(device: &str) -> io::Result<PacketSocket> {
        let name =
            CString::new(device).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in device name"))?;
        // SAFETY: if_nametoindex reads a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface `{device}`"),
            ));
        }
        // Protocol 0 receives nothing until bind, so no frame of another interface slips in.
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_ll is valid; the fields we need are set below.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll is a valid sockaddr_ll of the size passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        })?;
        set_int_opt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        set_int_opt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        // Large socket buffers absorb bursts while the worker sleeps (FORCE works as root).
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            if set_int_opt(fd.as_raw_fd(), libc::SOL_SOCKET, force, 8 << 20).is_err() {
                set_int_opt(fd.as_raw_fd(), libc::SOL_SOCKET, plain, 8 << 20)?;
            }
        }
        Ok(PacketSocket {
            fd,
            clock: Clock::get(),
        })
    }

    /// The socket's descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives up to `bufs.len()` (at most [`BATCH`]) frames with one recvmmsg.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf]) -> io::Result<usize> {
        let n = bufs.len().min(BATCH);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: all-zero iovec/mmsghdr arrays are valid; each entry is pointed at a live
        // buffer below and only used during the call.
        let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
        let mut control = [[0u64; CMSG_SPACE / 8]; BATCH];
        for i in 0..n {
            let b = bufs[i].buffer_mut();
            iov[i] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = control[i].as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = CMSG_SPACE;
        }
        // SAFETY: msgs[..n] point at n valid iovecs over buffers we hold mutably.
        let r = unsafe {
            libc::recvmmsg(
                self.fd(),
                msgs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let r = batch_count(r)?;
        for i in 0..r {
            bufs[i].len = msgs[i].msg_len as usize;
            bufs[i].truncated = msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            if let Some(t) = receive_time(&msgs[i].msg_hdr) {
                bufs[i].arrival_ns = self.clock.from_epoch_ns(t);
                bufs[i].arrival_known = true;
            }
        }
        Ok(r)
    }

    /// Sends the frames with sendmmsg (in chunks of [`BATCH`]); returns how many went out, from
    /// the front.
    pub fn send_batch(&mut self, frames: &[FrameBuf]) -> io::Result<usize> {
        let mut sent = 0;
        for chunk in frames.chunks(BATCH) {
            // SAFETY: as in recv_batch; the buffers are only read by the kernel.
            let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
            let mut msgs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
            for (i, f) in chunk.iter().enumerate() {
                let b = f.bytes();
                iov[i] = libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                };
                msgs[i].msg_hdr.msg_iov = &mut iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: msgs[..len] point at valid iovecs over live buffers.
            let r = batch_count(unsafe {
                libc::sendmmsg(self.fd(), msgs.as_mut_ptr(), chunk.len() as u32, libc::MSG_DONTWAIT)
            })?;
            sent += r;
            if r < chunk.len() {
                break;
            }
        }
        Ok(sent)
    }
}

/// The SCM_TIMESTAMPNS of a received message, in ns since the epoch.
fn receive_time(hdr: &libc::msghdr) -> Option<u128> {
    // SAFETY: the kernel filled msg_control/msg_controllen; the CMSG_* walk stays inside them,
    // and the timestamp is read unaligned from the cmsg data.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Some(ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128);
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    None
}

/// The count a recvmmsg/sendmmsg call returned: "would block" is zero datagrams, not an error.
fn batch_count(r: libc::c_int) -> io::Result<usize> {
    if r >= 0 {
        return Ok(r as usize);
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        Ok(0)
    } else {
        Err(e)
    }
}
