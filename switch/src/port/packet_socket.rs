//! An AF_PACKET socket bound to one interface, read and written in batches: with recvmmsg and
//! sendmmsg, or through receive and transmit rings mapped into the process.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use intlab_runtime::clock::RealtimeMap;
use intlab_runtime::sys::mmsg::{self, RecvMeta};
use intlab_runtime::sys::packet_ring::PacketRing;
use intlab_runtime::sys::socket;

use crate::config::PacketIo;
use crate::frame::FrameBuf;

/// Slots of each ring of a port in [`PacketIo::Ring`] mode: a burst of this many frames waits
/// in the kernel while the worker is busy (as a socket's buffer holds it in the other mode).
const RING_SLOTS: usize = 512;

/// A raw socket on one interface. Received frames carry the kernel's receive time, so a worker
/// that reads late still sees when each frame really arrived.
#[derive(Debug)]
pub enum PacketSocket {
    /// Read and written with recvmmsg and sendmmsg.
    Syscalls(OwnedFd),
    /// Read and written through mapped rings.
    Ring(PacketRing),
}

impl PacketSocket {
    /// Opens a non-blocking raw socket on `device` (in the calling thread's namespace), for
    /// frames of up to `max_frame` bytes.
    pub fn open(device: &str, io: PacketIo, max_frame: usize) -> io::Result<PacketSocket> {
        Ok(match io {
            PacketIo::Syscalls => PacketSocket::Syscalls(socket::packet(device)?),
            PacketIo::Ring => PacketSocket::Ring(PacketRing::open(device, RING_SLOTS, max_frame)?),
        })
    }

    /// The socket's descriptor.
    pub fn fd(&self) -> RawFd {
        match self {
            PacketSocket::Syscalls(fd) => fd.as_raw_fd(),
            PacketSocket::Ring(r) => r.fd(),
        }
    }

    /// Receives waiting frames into `bufs` (one recvmmsg, or what the ring holds); each gets its
    /// arrival time on the lab clock from the kernel's receive time.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf], meta: &mut [RecvMeta], map: &RealtimeMap) -> io::Result<usize> {
        match self {
            PacketSocket::Syscalls(fd) => {
                let n = mmsg::recv_batch(fd.as_raw_fd(), bufs, meta)?;
                for (b, m) in bufs.iter_mut().zip(meta.iter()).take(n) {
                    b.len = m.len;
                    b.truncated = m.truncated;
                    if let Some(t) = m.realtime_ns {
                        b.arrival_ns = map.lab_ns(t);
                        b.arrival_known = true;
                    }
                }
                Ok(n)
            }
            PacketSocket::Ring(r) => {
                let mut n = 0;
                r.recv(bufs.len(), |f| {
                    let b = &mut bufs[n];
                    let room = b.buffer_mut();
                    let len = f.data.len().min(room.len());
                    room[..len].copy_from_slice(&f.data[..len]);
                    b.len = len;
                    b.truncated = f.truncated || len < f.data.len();
                    b.arrival_ns = map.lab_ns(f.realtime_ns);
                    b.arrival_known = true;
                    n += 1;
                });
                Ok(n)
            }
        }
    }

    /// Sends the frames; returns how many went out, from the front.
    pub fn send_batch(&mut self, frames: &[FrameBuf]) -> io::Result<usize> {
        match self {
            PacketSocket::Syscalls(fd) => mmsg::send_batch(fd.as_raw_fd(), frames, &[]),
            PacketSocket::Ring(r) => r.send(frames),
        }
    }
}
