//! Where frames enter and leave the switch: TAP devices, AF_PACKET sockets on veth ends,
//! in-process links between switches (which the worker delivers itself, see [`link`]), tunnels
//! to a switch on another machine ([`tunnel`]), and a P4 switch's CPU port to its P4Runtime
//! server ([`controller`]).

mod controller;
mod inbound;
mod io_spec;
mod link;
mod packet_socket;
mod tap;
pub mod tunnel;

use std::io;
use std::os::fd::RawFd;

pub use controller::{ControllerSocket, CpuPortEnd};
pub use inbound::InboundLink;
pub use intlab_runtime::sys::mmsg::BATCH;
pub use io_spec::{PacketIo, PortIo};
pub use link::{LinkEnd, link_pair};
pub use packet_socket::PacketSocket;
pub use tap::TapDevice;

use intlab_runtime::clock::RealtimeMap;
use intlab_runtime::sys::mmsg::RecvMeta;

use crate::frame::FrameBuf;

/// An open port.
#[derive(Debug)]
pub enum Port {
    /// A TAP device.
    Tap(TapDevice),
    /// An AF_PACKET socket.
    Packet(PacketSocket),
    /// An in-process link (the worker moves its frames).
    Link(LinkEnd),
    /// A tunnel device to a switch on another machine: frames go stamped with the lab time
    /// they arrive at ([`tunnel`]).
    Tunnel(PacketSocket, tunnel::TunnelSeal),
    /// A P4 switch's CPU port.
    Controller(ControllerSocket),
}

impl Port {
    /// Opens the port `io` describes; a veth port is read and written as `packet_io` says, for
    /// frames of up to `max_frame` bytes.
    pub fn open(io: &PortIo, packet_io: PacketIo, max_frame: usize) -> io::Result<Port> {
        match io {
            PortIo::Tap { device } => TapDevice::create(device).map(Port::Tap),
            PortIo::Veth { device, netns } => {
                let device = device.clone();
                let open = move || PacketSocket::open(&device, packet_io, max_frame);
                match netns {
                    Some(ns) => intlab_runtime::sys::netns::run_in(ns, open).map(Port::Packet),
                    None => open().map(Port::Packet),
                }
            }
            PortIo::Link(end) => Ok(Port::Link(end.clone())),
            // Each frame is stamped and unstamped on its way: read and written with system
            // calls (the stamp needs the frame in the switch's own buffer).
            PortIo::Tunnel { device, netns, seal } => {
                let device = device.clone();
                let open = move || PacketSocket::open(&device, PacketIo::Syscalls, max_frame);
                intlab_runtime::sys::netns::run_in(netns, open).map(|p| Port::Tunnel(p, seal.clone()))
            }
            PortIo::Controller => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a CPU port is opened with its controller's end (ControllerSocket::pair)",
            )),
        }
    }

    /// Receives waiting frames into `bufs` without blocking; returns how many. Links receive
    /// nothing here.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf], meta: &mut [RecvMeta], map: &RealtimeMap) -> io::Result<usize> {
        match self {
            Port::Tap(t) => t.recv_batch(bufs),
            Port::Packet(p) | Port::Tunnel(p, _) => p.recv_batch(bufs, meta, map),
            Port::Controller(c) => c.recv_batch(bufs),
            Port::Link(_) => Ok(0),
        }
    }

    /// Sends `frames` (not for links); returns how many went, from the front.
    pub fn send_batch(&mut self, frames: &[FrameBuf]) -> io::Result<usize> {
        match self {
            Port::Tap(t) => t.send_batch(frames),
            Port::Packet(p) | Port::Tunnel(p, _) => p.send_batch(frames),
            Port::Controller(c) => c.send_batch(frames),
            Port::Link(_) => Ok(0),
        }
    }

    /// Frames the kernel dropped on arrival since the last call, because the worker had not read
    /// the ones before (a TAP device's drops show in its interface statistics instead).
    pub fn take_rx_dropped(&mut self) -> io::Result<u64> {
        match self {
            Port::Packet(p) | Port::Tunnel(p, _) => p.take_rx_dropped(),
            Port::Tap(_) | Port::Link(_) | Port::Controller(_) => Ok(0),
        }
    }

    /// How it moves frames, as counters name it.
    pub fn io_name(&self) -> &'static str {
        match self {
            Port::Tap(_) => "tap",
            Port::Packet(p) => p.io_name(),
            Port::Link(_) => "link",
            Port::Tunnel(..) => "tunnel",
            Port::Controller(_) => "cpu",
        }
    }

    /// The descriptor to wait on for received frames; links wake their worker directly.
    pub fn poll_fd(&self) -> Option<RawFd> {
        match self {
            Port::Tap(t) => Some(t.fd()),
            Port::Packet(p) | Port::Tunnel(p, _) => Some(p.fd()),
            Port::Controller(c) => Some(c.fd()),
            Port::Link(_) => None,
        }
    }
}
