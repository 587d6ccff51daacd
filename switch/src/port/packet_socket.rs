//! An AF_PACKET socket bound to one interface, read and written in batches.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use intlab_runtime::clock::RealtimeMap;
use intlab_runtime::sys::mmsg::{self, RecvMeta};
use intlab_runtime::sys::socket;

use crate::frame::FrameBuf;

/// A raw socket on one interface. Received frames carry the kernel's receive time, so a worker
/// that reads late still sees when each frame really arrived.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens a non-blocking raw socket on `device` (in the calling thread's namespace).
    pub fn open(device: &str) -> io::Result<PacketSocket> {
        Ok(PacketSocket {
            fd: socket::packet(device)?,
        })
    }

    /// The socket's descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives waiting frames into `bufs` with one recvmmsg; each gets its arrival time on the
    /// lab clock from the kernel's receive time.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf], meta: &mut [RecvMeta], map: &RealtimeMap) -> io::Result<usize> {
        let n = mmsg::recv_batch(self.fd(), bufs, meta)?;
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

    /// Sends the frames with sendmmsg; returns how many went out, from the front.
    pub fn send_batch(&mut self, frames: &[FrameBuf]) -> io::Result<usize> {
        mmsg::send_batch(self.fd(), frames, &[])
    }
}
