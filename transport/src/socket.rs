//! Kernel UDP sockets read and written in batches: recvmmsg with the received TOS byte (ECN),
//! sendmmsg with a destination per datagram. Sent datagrams carry ECT(0) and DF; DF on an
//! unconnected socket makes Linux write IP ID 0, which the ICRC covers (see `packet`).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

/// Datagrams per system call at most.
pub const BATCH: usize = 64;
/// Largest datagram handled.
pub const MAX_DATAGRAM: usize = 9216;

/// ECN codepoint ECT(0) in the TOS byte.
const ECT0: u8 = 0b10;

fn setopt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the value is a live c_int of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as u32,
        )
    };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// A non-blocking UDP socket of the transport.
#[derive(Debug)]
pub struct Socket {
    sock: UdpSocket,
}

/// Where a received datagram came from and how it was marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// Its length.
    pub len: usize,
    /// Sender address and port.
    pub from: SocketAddrV4,
    /// The IPv4 TOS byte (DSCP and ECN).
    pub tos: u8,
}

/// Buffers for one received batch, allocated once.
#[derive(Debug)]
pub struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    meta: Vec<RecvMeta>,
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            bufs: (0..BATCH).map(|_| vec![0u8; MAX_DATAGRAM].into_boxed_slice()).collect(),
            meta: vec![
                RecvMeta {
                    len: 0,
                    from: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
                    tos: 0
                };
                BATCH
            ],
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

/// Datagrams waiting to be sent from one socket, in buffers allocated once.
#[derive(Debug)]
pub struct SendBatch {
    bufs: Vec<Box<[u8]>>,
    lens: Vec<usize>,
    dsts: Vec<SocketAddrV4>,
    n: usize,
}

impl Default for SendBatch {
    fn default() -> Self {
        SendBatch {
            bufs: (0..BATCH).map(|_| vec![0u8; MAX_DATAGRAM].into_boxed_slice()).collect(),
            lens: vec![0; BATCH],
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
        &mut self.bufs[self.n]
    }

    /// Queues the datagram written into [`SendBatch::slot`].
    pub fn commit(&mut self, len: usize, dst: SocketAddrV4) {
        self.lens[self.n] = len;
        self.dsts[self.n] = dst;
        self.n += 1;
    }
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

impl Socket {
    /// Binds `addr` (in the calling thread's namespace), with DSCP `dscp` and ECT(0) on sent
    /// datagrams, DF, the received TOS reported, and large buffers.
    pub fn bind(addr: SocketAddrV4, dscp: u8) -> io::Result<Socket> {
        let sock = UdpSocket::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
        sock.set_nonblocking(true)?;
        let fd = sock.as_raw_fd();
        setopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_TOS,
            libc::c_int::from((dscp << 2) | ECT0),
        )?;
        setopt(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO)?;
        setopt(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            if setopt(fd, libc::SOL_SOCKET, force, 8 << 20).is_err() {
                setopt(fd, libc::SOL_SOCKET, plain, 8 << 20)?;
            }
        }
        Ok(Socket { sock })
    }

    /// The address it is bound to (its port, when bound to port 0).
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.sock.local_addr()
    }

    /// The descriptor, for polling.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
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

    /// Receives up to [`BATCH`] waiting datagrams; returns how many.
    pub fn recv_batch(&self, b: &mut RecvBatch) -> io::Result<usize> {
        // SAFETY: zeroed iovec/mmsghdr/sockaddr arrays are valid; every pointer set below points
        // into `b` or these arrays, which outlive the call.
        let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
        let mut names: [libc::sockaddr_in; BATCH] = unsafe { zeroed() };
        let mut control = [[0u64; 8]; BATCH];
        for i in 0..BATCH {
            iov[i] = libc::iovec {
                iov_base: b.bufs[i].as_mut_ptr().cast(),
                iov_len: MAX_DATAGRAM,
            };
            let h = &mut msgs[i].msg_hdr;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut names[i] as *mut libc::sockaddr_in).cast();
            h.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
            h.msg_control = control[i].as_mut_ptr().cast();
            h.msg_controllen = 64;
        }
        // SAFETY: see above.
        let r = unsafe {
            libc::recvmmsg(
                self.fd(),
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let r = batch_count(r)?;
        for i in 0..r {
            let n = &names[i];
            b.meta[i] = RecvMeta {
                len: msgs[i].msg_len as usize,
                from: SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(n.sin_addr.s_addr)),
                    u16::from_be(n.sin_port),
                ),
                tos: received_tos(&msgs[i].msg_hdr),
            };
        }
        Ok(r)
    }

    /// Sends what `b` holds (as much as the socket takes) and empties it; returns how many went.
    pub fn send_batch(&self, b: &mut SendBatch) -> io::Result<usize> {
        let n = b.n;
        b.n = 0;
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: as in recv_batch; the kernel only reads these buffers.
        let mut iov: [libc::iovec; BATCH] = unsafe { zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { zeroed() };
        let mut names: [libc::sockaddr_in; BATCH] = unsafe { zeroed() };
        for i in 0..n {
            names[i] = sockaddr(b.dsts[i]);
            iov[i] = libc::iovec {
                iov_base: b.bufs[i].as_mut_ptr().cast(),
                iov_len: b.lens[i],
            };
            let h = &mut msgs[i].msg_hdr;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut names[i] as *mut libc::sockaddr_in).cast();
            h.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
        }
        // SAFETY: see above.
        let r = unsafe { libc::sendmmsg(self.fd(), msgs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT) };
        batch_count(r)
    }
}

/// The IP_TOS control message of a received datagram (0 when absent).
fn received_tos(h: &libc::msghdr) -> u8 {
    // SAFETY: the kernel filled msg_control/msg_controllen; the walk stays inside them.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                return *libc::CMSG_DATA(c);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
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
