//! A veth port's socket, read and written in batches: an AF_PACKET socket with recvmmsg and
//! sendmmsg or with receive and transmit rings mapped into the process, or an AF_XDP socket.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use intlab_runtime::clock::{Clock, RealtimeMap};
use intlab_runtime::sys::mmsg::{self, RecvMeta};
use intlab_runtime::sys::packet_ring::PacketRing;
use intlab_runtime::sys::socket;
use intlab_runtime::sys::xsk::{XskPort, XskSizes};

use super::PacketIo;
use crate::frame::{FrameBuf, INT_TAILROOM};

/// Slots of each ring of a port in [`PacketIo::Ring`] mode: a burst of this many frames waits
/// in the kernel while the worker is busy (as a socket's buffer holds it in the other mode).
const RING_SLOTS: usize = 512;
/// Frames an AF_XDP port's kernel side may hold received while the worker is busy (as an
/// AF_PACKET socket's 8 MB buffer holds thousands), and frames that may wait to be sent: 5 MB
/// of memory per port with 2 KB frames.
const XSK_SIZES: (u32, u32) = (2048, 512);

/// A raw socket on one interface. Received frames carry the kernel's receive time, so a worker
/// that reads late still sees when each frame really arrived.
#[derive(Debug)]
pub enum PacketSocket {
    /// Read and written with recvmmsg and sendmmsg.
    Syscalls(OwnedFd),
    /// Read and written through mapped rings.
    Ring(PacketRing),
    /// An AF_XDP socket (boxed: its rings and frame lists make it ten times the others' size).
    Xdp(Box<XskPort>),
}

/// An AF_XDP port on `device` for frames of up to `max_frame` bytes in the switch's buffers.
fn open_xsk(device: &str, max_frame: usize) -> io::Result<XskPort> {
    XskPort::open(
        device,
        XskSizes {
            rx: XSK_SIZES.0,
            tx: XSK_SIZES.1,
            // What crosses the veth: the buffers' room for INT hops is not needed there (a
            // frame longer than the link's MTU is dropped by the veth either way).
            max_frame: max_frame.saturating_sub(INT_TAILROOM),
        },
    )
}

/// Copies frame `data`, read from a ring the kernel shares, into buffer `b`: cut short if it
/// does not fit (or if the kernel already cut it), with its arrival time on the lab clock when
/// known.
fn store(b: &mut FrameBuf, data: &[u8], cut: bool, arrival_ns: Option<u64>) {
    let room = b.buffer_mut();
    let len = data.len().min(room.len());
    room[..len].copy_from_slice(&data[..len]);
    b.len = len;
    b.truncated = cut || len < data.len();
    if let Some(t) = arrival_ns {
        b.arrival_ns = t;
        b.arrival_known = true;
    }
}

/// Puts the VLAN tag the kernel took off frame `b` back (see [`socket::restore_vlan`]).
fn restore_vlan(b: &mut FrameBuf, vlan: Option<(u16, u16)>) {
    let len = b.len;
    let (len, cut) = socket::restore_vlan(b.buffer_mut(), len, vlan);
    b.len = len;
    b.truncated |= cut;
}

impl PacketSocket {
    /// Opens a non-blocking raw socket on `device` (in the calling thread's namespace), for
    /// frames of up to `max_frame` bytes.
    pub fn open(device: &str, io: PacketIo, max_frame: usize) -> io::Result<PacketSocket> {
        Ok(match io {
            PacketIo::Syscalls => PacketSocket::Syscalls(socket::packet(device)?),
            PacketIo::Ring => PacketSocket::Ring(PacketRing::open(device, RING_SLOTS, max_frame)?),
            PacketIo::Xdp => PacketSocket::Xdp(Box::new(open_xsk(device, max_frame)?)),
            PacketIo::Auto => match open_xsk(device, max_frame) {
                Ok(x) => PacketSocket::Xdp(Box::new(x)),
                Err(e) => {
                    tracing::warn!("{e}; port on `{device}` uses an AF_PACKET socket instead");
                    PacketSocket::Syscalls(socket::packet(device)?)
                }
            },
        })
    }

    /// The socket's descriptor.
    pub fn fd(&self) -> RawFd {
        match self {
            PacketSocket::Syscalls(fd) => fd.as_raw_fd(),
            PacketSocket::Ring(r) => r.fd(),
            PacketSocket::Xdp(x) => x.fd(),
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
                    restore_vlan(b, m.vlan);
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
                    store(&mut bufs[n], f.data, f.truncated, Some(map.lab_ns(f.realtime_ns)));
                    restore_vlan(&mut bufs[n], f.vlan);
                    n += 1;
                });
                Ok(n)
            }
            PacketSocket::Xdp(x) => {
                let clock = Clock::get();
                let mut n = 0;
                let got = x.recv(bufs.len(), |f| {
                    let arrival = f.monotonic_ns.map(|t| clock.lab_ns_of_monotonic(t));
                    store(&mut bufs[n], f.data, false, arrival);
                    n += 1;
                });
                match got {
                    // The frames before a bad descriptor are in `bufs` and out of the ring.
                    Err(e) if n > 0 => {
                        tracing::warn!("AF_XDP receive: {e}");
                        Ok(n)
                    }
                    other => other,
                }
            }
        }
    }

    /// How it moves frames, as counters name it.
    pub fn io_name(&self) -> &'static str {
        match self {
            PacketSocket::Syscalls(_) => "af_packet",
            PacketSocket::Ring(_) => "af_packet_ring",
            PacketSocket::Xdp(_) => "af_xdp",
        }
    }

    /// Frames the kernel dropped on arrival, its queue for the socket full, since the last call.
    pub fn take_rx_dropped(&mut self) -> io::Result<u64> {
        match self {
            PacketSocket::Syscalls(fd) => socket::packet_drops(fd.as_raw_fd()),
            PacketSocket::Ring(r) => socket::packet_drops(r.fd()),
            PacketSocket::Xdp(x) => x.take_rx_dropped(),
        }
    }

    /// Sends the frames; returns how many went out, from the front.
    pub fn send_batch(&mut self, frames: &[FrameBuf]) -> io::Result<usize> {
        match self {
            PacketSocket::Syscalls(fd) => mmsg::send_batch(fd.as_raw_fd(), frames, &[]),
            PacketSocket::Ring(r) => r.send(frames),
            PacketSocket::Xdp(x) => x.send(frames),
        }
    }
}
