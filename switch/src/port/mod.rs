//! Where frames enter and leave the switch: TAP devices, AF_PACKET sockets on veth ends, and
//! in-process links between switches.

mod link;
mod packet_socket;
mod tap;

use std::io;
use std::os::fd::RawFd;

pub use link::{LinkEnd, link_pair};
pub use packet_socket::PacketSocket;
pub use tap::TapDevice;

use crate::config::PortIo;
use crate::frame::{FrameBuf, FramePool};

/// Frames read or written per system call at most.
pub const BATCH: usize = 64;

/// An open port.
#[derive(Debug)]
pub enum Port {
    /// A TAP device.
    Tap(TapDevice),
    /// An AF_PACKET socket.
    Packet(PacketSocket),
    /// An in-process link.
    Link(LinkEnd),
}

impl Port {
    /// Opens the port `io` describes.
    pub fn open(io: &PortIo) -> io::Result<Port> {
        match io {
            PortIo::Tap { device } => TapDevice::create(device).map(Port::Tap),
            PortIo::Veth { device, netns } => {
                let device = device.clone();
                match netns {
                    Some(ns) => {
                        intlab_runtime::sys::netns::run_in(ns, move || PacketSocket::open(&device)).map(Port::Packet)
                    }
                    None => PacketSocket::open(&device).map(Port::Packet),
                }
            }
            PortIo::Link(end) => Ok(Port::Link(end.clone())),
        }
    }

    /// Receives up to `bufs.len()` waiting frames into `bufs[..n]` without blocking; returns
    /// `n`. Buffers a link hands over replace those in `bufs`, which go back to `pool`.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf], pool: &FramePool) -> io::Result<usize> {
        match self {
            Port::Tap(t) => t.recv_batch(bufs),
            Port::Packet(p) => p.recv_batch(bufs),
            Port::Link(l) => Ok(l.recv_batch(bufs, pool)),
        }
    }

    /// Sends `frames`. Afterwards `frames` holds exactly the frames that could not be sent; the
    /// buffers of those sent went back to `pool` (or, on a link, to the other end).
    pub fn send_batch(&mut self, frames: &mut Vec<FrameBuf>, pool: &FramePool) -> io::Result<()> {
        let sent = match self {
            Port::Tap(t) => t.send_batch(frames)?,
            Port::Packet(p) => p.send_batch(frames)?,
            Port::Link(l) => {
                l.send_batch(frames);
                return Ok(());
            }
        };
        for f in frames.drain(..sent) {
            pool.put(f);
        }
        Ok(())
    }

    /// The descriptor to wait on for received frames; links wake their worker directly.
    pub fn poll_fd(&self) -> Option<RawFd> {
        match self {
            Port::Tap(t) => Some(t.fd()),
            Port::Packet(p) => Some(p.fd()),
            Port::Link(_) => None,
        }
    }
}
