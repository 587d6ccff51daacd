//! A host's sockets, read and written in batches (`intlab_runtime::sys::mmsg`): UDP sockets on
//! the RoCE and INT ports for what arrives and for ACKs, CNPs and NAKs, and one raw IPv4 socket
//! that sends every queue pair's data with the IPv4 and UDP headers the transport wrote, each
//! queue pair with its own UDP source port (ECMP entropy) without a socket per queue pair.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use intlab_runtime::sys::{mmsg, socket};

pub use intlab_runtime::sys::mmsg::{BATCH, RecvMeta};

/// Largest datagram handled.
pub const MAX_DATAGRAM: usize = 6144;

/// ECN codepoint ECT(0) in the TOS byte.
pub const ECT0: u8 = 0b10;

/// A non-blocking UDP socket of the transport.
#[derive(Debug)]
pub struct Socket {
    sock: UdpSocket,
}

/// A received batch's buffers, allocated once.
#[derive(Debug)]
pub struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    meta: Vec<RecvMeta>,
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            bufs: (0..BATCH).map(|_| vec![0u8; MAX_DATAGRAM].into_boxed_slice()).collect(),
            meta: vec![RecvMeta::default(); BATCH],
        }
    }
}

impl RecvBatch {
    /// Datagram `i` of the last batch.
    pub fn get(&self, i: usize) -> (&[u8], RecvMeta) {
        let m = self.meta[i];
        (&self.bufs[i][..m.len], m)
    }
}

/// One datagram waiting to be sent.
#[derive(Debug)]
struct Datagram {
    buf: Box<[u8]>,
    len: usize,
}

impl AsRef<[u8]> for Datagram {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Datagrams waiting to be sent from one socket, in buffers allocated once.
#[derive(Debug)]
pub struct SendBatch {
    msgs: Vec<Datagram>,
    dsts: Vec<SocketAddrV4>,
    n: usize,
}

impl Default for SendBatch {
    fn default() -> Self {
        SendBatch {
            msgs: (0..BATCH)
                .map(|_| Datagram {
                    buf: vec![0u8; MAX_DATAGRAM].into_boxed_slice(),
                    len: 0,
                })
                .collect(),
            dsts: vec![SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0); BATCH],
            n: 0,
        }
    }
}

impl SendBatch {
    /// True when no more datagram fits before a flush.
    pub fn is_full(&self) -> bool {
        self.n == BATCH
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Datagrams waiting.
    pub fn len(&self) -> usize {
        self.n
    }

    /// The next free buffer (call [`SendBatch::commit`] after filling it).
    pub fn slot(&mut self) -> &mut [u8] {
        &mut self.msgs[self.n].buf
    }

    /// Queues the datagram written into [`SendBatch::slot`], for `dst`.
    pub fn commit(&mut self, len: usize, dst: SocketAddrV4) {
        self.msgs[self.n].len = len;
        self.dsts[self.n] = dst;
        self.n += 1;
    }

    /// Empties the batch, handing each datagram and its address to `f` in order (a wire that
    /// is not a socket); returns how many there were.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8], SocketAddrV4)) -> usize {
        let n = std::mem::take(&mut self.n);
        for (m, dst) in self.msgs[..n].iter().zip(&self.dsts[..n]) {
            f(m.as_ref(), *dst);
        }
        n
    }

    /// Sends what waits on `fd` (as much as it takes) and empties the batch; returns how many
    /// went.
    pub fn send(&mut self, fd: RawFd) -> io::Result<usize> {
        let n = std::mem::take(&mut self.n);
        mmsg::send_batch(fd, &self.msgs[..n], &self.dsts[..n])
    }
}

impl Socket {
    /// Binds `addr` (in the calling thread's namespace): TOS `dscp` with ECT(0) on what it
    /// sends, DF, each datagram's TOS and receive time reported, large buffers.
    pub fn bind(addr: SocketAddrV4, dscp: u8) -> io::Result<Socket> {
        Ok(Socket {
            sock: socket::udp(addr, (dscp << 2) | ECT0)?,
        })
    }

    /// The address it is bound to (its port, when bound to port 0).
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.sock.local_addr()
    }

    /// The descriptor, for polling.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Receives up to [`BATCH`] waiting datagrams; returns how many.
    pub fn recv_batch(&self, b: &mut RecvBatch) -> io::Result<usize> {
        mmsg::recv_batch(self.fd(), &mut b.bufs, &mut b.meta)
    }

    /// Sends what `b` holds (as much as the socket takes) and empties it; returns how many went.
    pub fn send_batch(&self, b: &mut SendBatch) -> io::Result<usize> {
        b.send(self.fd())
    }

    /// Sends one datagram now (for the rare packet outside the batched data path).
    pub fn send_one(&self, datagram: &[u8], dst: SocketAddrV4) -> io::Result<()> {
        let n = self.sock.send_to(datagram, dst)?;
        if n != datagram.len() {
            return Err(io::Error::other(format!(
                "sent {n} of {} bytes to {dst}",
                datagram.len()
            )));
        }
        Ok(())
    }
}

/// The raw socket a host sends its data on: whole IPv4 packets (see
/// [`crate::packet::write_ipv4`]).
#[derive(Debug)]
pub struct RawSender {
    fd: OwnedFd,
}

impl RawSender {
    /// Opens it (in the calling thread's namespace).
    pub fn open() -> io::Result<RawSender> {
        Ok(RawSender {
            fd: socket::raw_ipv4_sender()?,
        })
    }

    /// Sends what `b` holds; returns how many went.
    pub fn send_batch(&self, b: &mut SendBatch) -> io::Result<usize> {
        b.send(self.fd.as_raw_fd())
    }
}
