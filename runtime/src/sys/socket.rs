//! The sockets the lab opens, set up once: AF_PACKET on a switch's interface, raw IPv4 for a
//! host's data (the transport writes IPv4 and UDP itself, as a RoCE NIC does, so one socket
//! sends every queue pair's packets, each with its own UDP source port), UDP for what hosts
//! receive. Each is opened in the calling thread's network namespace and stays there.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Linux's PACKET_IGNORE_OUTGOING socket option (4.20+): do not see our own transmissions.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// Socket buffers asked for: bursts wait there while a worker is busy.
const BUFFER_BYTES: libc::c_int = 8 << 20;

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

/// Sets an integer socket option.
pub fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
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

/// Large send and receive buffers (FORCE works as root, else up to the system's limit).
fn large_buffers(fd: RawFd) -> io::Result<()> {
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if set_int(fd, libc::SOL_SOCKET, force, BUFFER_BYTES).is_err() {
            set_int(fd, libc::SOL_SOCKET, plain, BUFFER_BYTES)?;
        }
    }
    Ok(())
}

fn socket(domain: libc::c_int, kind: libc::c_int, protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before use.
    let raw = check(unsafe { libc::socket(domain, kind | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: `raw` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// A non-blocking AF_PACKET socket bound to interface `device`: every frame it receives carries
/// the kernel's receive time; its own transmissions are not received.
pub fn packet(device: &str) -> io::Result<OwnedFd> {
    let fd = packet_unbound()?;
    bind_packet(fd.as_raw_fd(), device)?;
    set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    // The kernel takes a frame's VLAN tag off into metadata (veth offloads it): the auxiliary
    // data gives it back, so that a P4 program sees the frame as it was sent.
    set_int(fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_AUXDATA, 1)?;
    large_buffers(fd.as_raw_fd())?;
    Ok(fd)
}

/// The VLAN tag (TPID, TCI) an AF_PACKET frame's status, TCI and TPID say the kernel took off
/// it, if any (a TPID the kernel did not give is 802.1Q's).
pub fn stripped_vlan(status: u32, tci: u16, tpid: u16) -> Option<(u16, u16)> {
    (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
        let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
            tpid
        } else {
            0x8100
        };
        (tpid, tci)
    })
}

/// Puts the VLAN tag `vlan` (TPID, TCI) the kernel took off a received frame of `len` bytes in
/// `buf` back after its MAC addresses, as it was on the wire: the frame's new length, and
/// whether its end was cut for want of room in `buf`.
pub fn restore_vlan(buf: &mut [u8], len: usize, vlan: Option<(u16, u16)>) -> (usize, bool) {
    let Some((tpid, tci)) = vlan else { return (len, false) };
    if len < 12 || buf.len() < 16 {
        return (len, false);
    }
    let kept = len.min(buf.len() - 4);
    buf.copy_within(12..kept, 16);
    buf[12..14].copy_from_slice(&tpid.to_be_bytes());
    buf[14..16].copy_from_slice(&tci.to_be_bytes());
    (kept + 4, kept < len)
}

/// A non-blocking AF_PACKET socket bound to no interface yet, which will not receive its own
/// transmissions. Protocol 0 receives nothing until bound, so no frame of another interface
/// slips in while it is being set up.
pub fn packet_unbound() -> io::Result<OwnedFd> {
    let fd = socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
    set_int(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    Ok(fd)
}

/// The index of interface `device` in the calling thread's namespace.
pub fn ifindex(device: &str) -> io::Result<u32> {
    let name = CString::new(device).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in device name"))?;
    // SAFETY: if_nametoindex reads a valid C string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface `{device}`"),
        ));
    }
    Ok(ifindex)
}

/// Binds AF_PACKET socket `fd` to interface `device`, every protocol.
pub fn bind_packet(fd: RawFd, device: &str) -> io::Result<()> {
    let ifindex = ifindex(device)?;
    // SAFETY: an all-zero sockaddr_ll is valid; the fields needed are set below.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the size passed.
    check(unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as u32,
        )
    })
    .map(|_| ())
}

/// Frames AF_PACKET socket `fd` dropped because its receive buffer (or ring) was full since the
/// last call (the kernel resets its count on every read).
pub fn packet_drops(fd: RawFd) -> io::Result<u64> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: st is a live tpacket_stats of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(st.tp_drops))
}

/// A non-blocking AF_PACKET socket that receives the frames of EtherType `ethertype` arriving
/// on any interface of the calling thread's namespace, each with the kernel's receive time.
pub fn packet_ethertype(ethertype: u16) -> io::Result<OwnedFd> {
    let fd = socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(ethertype.to_be()))?;
    set_int(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    Ok(fd)
}

/// A non-blocking send-only raw IPv4 socket: what is sent on it carries its own IPv4 header
/// (IPPROTO_RAW; the kernel fills in the header checksum only, and receives nothing on it).
pub fn raw_ipv4_sender() -> io::Result<OwnedFd> {
    let fd = socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW)?;
    large_buffers(fd.as_raw_fd())?;
    Ok(fd)
}

/// A non-blocking UDP socket bound to `addr` that reports each datagram's TOS byte (ECN) and
/// receive time, sends with `tos` and DF (so Linux writes IP ID 0, which RoCE's ICRC covers),
/// with large buffers.
pub fn udp(addr: SocketAddrV4, tos: u8) -> io::Result<UdpSocket> {
    let sock = UdpSocket::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
    sock.set_nonblocking(true)?;
    let fd = sock.as_raw_fd();
    set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, libc::c_int::from(tos))?;
    set_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DO)?;
    set_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    large_buffers(fd)?;
    Ok(sock)
}

/// Sends `record` on the sequenced-packet or datagram socket `fd` without waiting and without
/// a SIGPIPE: an error when it could not go now (the peer closed, or does not read).
pub fn send_record(fd: RawFd, record: &[u8]) -> io::Result<()> {
    // SAFETY: send(2) of a live buffer of its length; the result is checked.
    let n = unsafe {
        libc::send(
            fd,
            record.as_ptr().cast(),
            record.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != record.len() {
        return Err(io::Error::other(format!("sent {n} of {} bytes", record.len())));
    }
    Ok(())
}

/// Reads what `fd` (non-blocking) has now into `buf`; "would block" is an error like any.
pub fn read_now(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: read(2) into a live buffer of its length; the result is checked.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::mmsg;

    #[test]
    fn a_packet_socket_counts_what_its_full_buffer_dropped_once() {
        crate::sys::netns::in_fresh_namespace(|| {
            let rx = packet("lo").expect("packet socket on lo");
            // A small buffer: most of a burst finds it full.
            set_int(rx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 4096).expect("rcvbuf");
            let tx = packet("lo").expect("second packet socket on lo");
            let mut f = vec![0xffu8; 12];
            f.extend_from_slice(&[0x88, 0xb5]);
            f.resize(200, 7);
            let sent = mmsg::send_batch(tx.as_raw_fd(), &vec![f; 50], &[]).expect("send");
            assert_eq!(sent, 50);
            let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 2048]).collect();
            let mut meta = [mmsg::RecvMeta::default(); 64];
            let got = mmsg::recv_batch(rx.as_raw_fd(), &mut bufs, &mut meta).expect("recv");
            let dropped = packet_drops(rx.as_raw_fd()).expect("stats");
            assert!(got < 50 && dropped > 0, "got {got}, dropped {dropped}");
            assert_eq!(got as u64 + dropped, 50, "every frame read or counted");
            assert_eq!(packet_drops(rx.as_raw_fd()).expect("stats"), 0, "counted once");
        });
    }

    #[test]
    fn a_stripped_vlan_tag_goes_back_after_the_mac_addresses() {
        let untagged: Vec<u8> = (0u8..20).collect();
        let mut buf = untagged.clone();
        buf.resize(64, 0);
        let vlan = stripped_vlan(libc::TP_STATUS_VLAN_VALID, 0xa00a, 0);
        assert_eq!(vlan, Some((0x8100, 0xa00a)), "802.1Q when the kernel gives no TPID");
        assert_eq!(restore_vlan(&mut buf, 20, vlan), (24, false));
        assert_eq!(&buf[..12], &untagged[..12]);
        assert_eq!(&buf[12..16], &[0x81, 0x00, 0xa0, 0x0a]);
        assert_eq!(&buf[16..24], &untagged[12..20]);
        // A frame that fills its buffer loses its last 4 bytes to the tag, and says so.
        let qinq = stripped_vlan(libc::TP_STATUS_VLAN_VALID | libc::TP_STATUS_VLAN_TPID_VALID, 5, 0x88a8);
        assert_eq!(qinq, Some((0x88a8, 5)), "the TPID the kernel gives");
        let mut full = untagged.clone();
        assert_eq!(restore_vlan(&mut full, 20, qinq), (20, true));
        assert_eq!(&full[12..16], &[0x88, 0xa8, 0x00, 0x05]);
        assert_eq!(&full[16..20], &untagged[12..16]);
        // No tag taken off: nothing moves.
        assert_eq!(stripped_vlan(0, 7, 0x8100), None);
        let mut same = untagged.clone();
        assert_eq!(restore_vlan(&mut same, 20, None), (20, false));
        assert_eq!(same, untagged);
    }
}
