//! Batched socket I/O: recvmmsg and sendmmsg, one system call for up to [`BATCH`] datagrams or
//! frames, for every socket the lab reads or writes (the switch's AF_PACKET ports, the hosts'
//! UDP and raw sockets). What arrives comes with what the kernel said of it: the sender's
//! address, the IPv4 TOS byte (ECN), the receive time.

use std::io;
use std::mem::{MaybeUninit, size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;

/// Datagrams or frames per system call at most.
pub const BATCH: usize = 64;

/// Control-message space per message: a timestamp (a timespec), a TOS byte and an AF_PACKET
/// socket's auxiliary data, with headers.
const CONTROL: usize = 128;

/// What the kernel said of one received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// Its length (the bytes written into the buffer, at most its size).
    pub len: usize,
    /// It was longer than the buffer and was cut short.
    pub truncated: bool,
    /// The sender (AF_INET sockets).
    pub from: SocketAddrV4,
    /// The IPv4 TOS byte, when the socket asks for it (IP_RECVTOS).
    pub tos: Option<u8>,
    /// The kernel's receive time, CLOCK_REALTIME ns, when the socket asks for it
    /// (SO_TIMESTAMPNS).
    pub realtime_ns: Option<u128>,
    /// The VLAN tag (TPID, TCI) the kernel took off an AF_PACKET frame, when the socket asks
    /// for it (PACKET_AUXDATA): the bytes received no longer hold it.
    pub vlan: Option<(u16, u16)>,
}

impl Default for RecvMeta {
    fn default() -> Self {
        RecvMeta {
            len: 0,
            truncated: false,
            from: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            tos: None,
            realtime_ns: None,
            vlan: None,
        }
    }
}

/// "Would block" is zero messages, not an error.
fn count(r: libc::c_int) -> io::Result<usize> {
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

/// Receives up to `bufs.len()` (at most [`BATCH`]) waiting messages into `bufs` without
/// blocking; `meta[i]` describes `bufs[i]`. Returns how many arrived.
pub fn recv_batch<B: AsMut<[u8]>>(fd: RawFd, bufs: &mut [B], meta: &mut [RecvMeta]) -> io::Result<usize> {
    let n = bufs.len().min(meta.len()).min(BATCH);
    if n == 0 {
        return Ok(0);
    }
    // Only the first `n` entries are set and handed to the kernel: zeroing whole batches of
    // headers on every call (about 10 KB) showed in profiles when most calls carry one frame.
    let mut iov = [MaybeUninit::<libc::iovec>::uninit(); BATCH];
    let mut msgs = [MaybeUninit::<libc::mmsghdr>::uninit(); BATCH];
    let mut names = [MaybeUninit::<libc::sockaddr_in>::uninit(); BATCH];
    let mut control = [MaybeUninit::<[u64; CONTROL / 8]>::uninit(); BATCH];
    for i in 0..n {
        let b = bufs[i].as_mut();
        iov[i].write(libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        });
        // SAFETY: an all-zero mmsghdr is a valid value; its pointers are set below to entries
        // that outlive the call (the kernel writes the name and control data into them).
        let mut m: libc::mmsghdr = unsafe { zeroed() };
        let h = &mut m.msg_hdr;
        h.msg_iov = iov[i].as_mut_ptr();
        h.msg_iovlen = 1;
        h.msg_name = names[i].as_mut_ptr().cast();
        h.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
        h.msg_control = control[i].as_mut_ptr().cast();
        h.msg_controllen = CONTROL;
        msgs[i].write(m);
    }
    // SAFETY: msgs[..n] point at valid iovecs over buffers held mutably, and at arrays above.
    let r = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr().cast(),
            n as u32,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    let r = count(r)?;
    for i in 0..r {
        // SAFETY: entries below `n` (and `r <= n`) were written above; the kernel filled in
        // the lengths of the first `r`.
        let m = unsafe { msgs[i].assume_init_ref() };
        let h = &m.msg_hdr;
        // SAFETY: a name length of a whole sockaddr_in or more means the kernel wrote the whole
        // buffer (it truncates a longer one, such as an AF_PACKET sockaddr_ll).
        let name = (h.msg_namelen as usize >= size_of::<libc::sockaddr_in>())
            .then(|| unsafe { names[i].assume_init_read() })
            .filter(|name| name.sin_family == libc::AF_INET as libc::sa_family_t);
        let from = match name {
            Some(name) => SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(name.sin_addr.s_addr)),
                u16::from_be(name.sin_port),
            ),
            None => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        };
        let (tos, realtime_ns, vlan) = control_of(h);
        meta[i] = RecvMeta {
            len: (m.msg_len as usize).min(bufs[i].as_mut().len()),
            truncated: h.msg_flags & libc::MSG_TRUNC != 0,
            from,
            tos,
            realtime_ns,
            vlan,
        };
    }
    Ok(r)
}

/// The TOS byte, the receive time and the stripped VLAN tag a message's control data carries.
fn control_of(h: &libc::msghdr) -> (Option<u8>, Option<u128>, Option<(u16, u16)>) {
    let (mut tos, mut time, mut vlan) = (None, None, None);
    // SAFETY: the kernel filled msg_control/msg_controllen; the CMSG_* walk stays inside them,
    // and the payloads are read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    time = Some(ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128);
                }
                (libc::IPPROTO_IP, libc::IP_TOS) => tos = Some(*libc::CMSG_DATA(c)),
                (libc::SOL_PACKET, libc::PACKET_AUXDATA) => {
                    let aux: libc::tpacket_auxdata = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    vlan = super::socket::stripped_vlan(aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    (tos, time, vlan)
}

/// Sends `msgs` (at most [`BATCH`] per system call, in chunks), the i-th to `to[i]` when `to` is
/// not empty (unconnected AF_INET sockets) or where the socket sends (AF_PACKET sockets bound to
/// an interface). Returns how many went, from the front: the kernel took those, the rest it
/// would not take now.
pub fn send_batch<B: AsRef<[u8]>>(fd: RawFd, msgs: &[B], to: &[SocketAddrV4]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < msgs.len() {
        let chunk = &msgs[sent..(sent + BATCH).min(msgs.len())];
        let mut iov = [MaybeUninit::<libc::iovec>::uninit(); BATCH];
        let mut hdrs = [MaybeUninit::<libc::mmsghdr>::uninit(); BATCH];
        let mut names = [MaybeUninit::<libc::sockaddr_in>::uninit(); BATCH];
        for (i, m) in chunk.iter().enumerate() {
            let b = m.as_ref();
            iov[i].write(libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            });
            // SAFETY: an all-zero mmsghdr is valid; the kernel only reads what it points at.
            let mut hdr: libc::mmsghdr = unsafe { zeroed() };
            let h = &mut hdr.msg_hdr;
            h.msg_iov = iov[i].as_mut_ptr();
            h.msg_iovlen = 1;
            if let Some(a) = to.get(sent + i) {
                let name = names[i].write(libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*a.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                });
                h.msg_name = (name as *mut libc::sockaddr_in).cast();
                h.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
            }
            hdrs[i].write(hdr);
        }
        // SAFETY: hdrs[..chunk.len()] point at valid iovecs over live buffers and at names.
        let r = count(unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr().cast(), chunk.len() as u32, libc::MSG_DONTWAIT) })?;
        sent += r;
        if r < chunk.len() {
            break;
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_batch_goes_out_and_comes_back_with_its_sender_and_tos() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let on: libc::c_int = 1;
        // SAFETY: a live c_int of the size passed.
        let r = unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_RECVTOS,
                (&on as *const libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(r, 0);
        let to = match rx.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let msgs: Vec<Vec<u8>> = (0..5u8).map(|k| vec![k; 10 + usize::from(k)]).collect();
        assert_eq!(send_batch(tx.as_raw_fd(), &msgs, &[to; 5]).unwrap(), 5);
        let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; 12]).collect();
        let mut meta = [RecvMeta::default(); 8];
        let mut got = 0;
        for _ in 0..100 {
            got += recv_batch(rx.as_raw_fd(), &mut bufs[got..], &mut meta[got..]).unwrap();
            if got == 5 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, 5);
        assert_eq!(meta[0].len, 10);
        assert!(!meta[1].truncated && meta[3].truncated, "13 bytes into 12");
        assert_eq!(
            meta[0].from,
            match tx.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                _ => unreachable!(),
            }
        );
        assert_eq!(meta[2].tos, Some(0));
        assert_eq!(&bufs[4][..12], &[4u8; 12][..]);
        // Nothing more waits: zero, not an error.
        assert_eq!(recv_batch(rx.as_raw_fd(), &mut bufs, &mut meta).unwrap(), 0);
    }
}
