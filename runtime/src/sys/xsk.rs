//! An AF_XDP socket on one interface, in copy mode (veth has no zero-copy), with the XDP program
//! that feeds it. The program runs in the sender's own transmit path (the veth's NAPI poll),
//! stamps each frame with the monotonic clock, and redirects every frame to the socket, which
//! the kernel copies into memory the process shares with it (the UMEM): the worker reads
//! frames from a ring without a system call, and the frame never reaches the switch
//! namespace's IP stack or any other socket. Frames to send are copied into UMEM frames, put on
//! the transmit ring and handed over with one system call per batch.
//!
//! On the reference machine, under iperf3 between two namespaces, this carried more than
//! recvmmsg/sendmmsg on the same veths, through a forwarder with no logic and through the switch
//! on one worker (docs/performance.md).

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::bpf::{self, Insn, XskMap, helper};

/// Bytes the kernel leaves before each received frame in a UMEM frame (XDP_PACKET_HEADROOM):
/// the 8-byte receive time the program writes sits at its end.
const XDP_HEADROOM: usize = 256;
/// Bytes of metadata the program puts before each frame: the receive time.
const META: usize = 8;
/// Binds tried, 2 ms apart, while the queue is still held by a socket closed just before.
const BIND_ATTEMPTS: u32 = 250;
/// The XDP verdict for a frame whose queue has no socket (during set-up): the kernel's stack.
const XDP_PASS: i32 = 2;

/// The program: stamp the monotonic time into the frame's metadata, redirect it to the socket
/// of its receive queue (the kernel's stack if there is none).
fn stamp_and_redirect(map: &XskMap) -> Vec<Insn> {
    use bpf::{add_imm, call, exit, jump_gt, jump_ne_imm, load_map, load_u32, mov, mov_imm, store_u64};
    // struct xdp_md: data at 0, data_end at 4, data_meta at 8, rx_queue_index at 16.
    let mut p = vec![
        mov(6, 1),
        call(helper::KTIME_GET_NS),
        mov(7, 0),
        mov(1, 6),
        mov_imm(2, -(META as i32)),
        call(helper::XDP_ADJUST_META),
        // No room for metadata: redirect unstamped (the reader then takes its own time).
        jump_ne_imm(0, 0, 6),
        load_u32(2, 6, 8),
        load_u32(3, 6, 0),
        mov(4, 2),
        add_imm(4, META as i32),
        jump_gt(4, 3, 1),
        store_u64(2, 0, 7),
        load_u32(2, 6, 16),
    ];
    p.extend(load_map(1, map));
    p.extend([mov_imm(3, XDP_PASS), call(helper::REDIRECT_MAP), exit()]);
    p
}

/// One of the four rings shared with the kernel: a power-of-two array of entries with a
/// producer and a consumer index, each written by one side only.
struct Ring<T> {
    map: NonNull<u8>,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    entries: *mut T,
    mask: u32,
}

impl<T: Copy> Ring<T> {
    /// Maps ring `offsets` of `size` entries at page offset `pgoff` of socket `fd`.
    fn map(fd: RawFd, offsets: &libc::xdp_ring_offset, size: u32, pgoff: u64) -> io::Result<Ring<T>> {
        let map_len = offsets.desc as usize + size as usize * size_of::<T>();
        // SAFETY: a fresh shared mapping of one of the socket's rings, of the length the kernel
        // said it takes; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave a null mapping"))?;
        let at = |off: u64| {
            // SAFETY: the kernel's offsets lie inside the mapping.
            unsafe { map.as_ptr().add(off as usize) }
        };
        Ok(Ring {
            map,
            map_len,
            producer: at(offsets.producer).cast(),
            consumer: at(offsets.consumer).cast(),
            entries: at(offsets.desc).cast(),
            mask: size - 1,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: an aligned u32 in the live mapping, shared with the kernel.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    fn read(&self, index: u32) -> T {
        // SAFETY: the index is masked into the array, which lies in the live mapping.
        unsafe { self.entries.add((index & self.mask) as usize).read_volatile() }
    }

    fn write(&self, index: u32, v: T) {
        // SAFETY: as in `read`.
        unsafe { self.entries.add((index & self.mask) as usize).write_volatile(v) }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `map` with this length and is not used after.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// Sizes of an [`XskPort`]'s rings and frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskSizes {
    /// Frames the kernel may hold received for the worker (a power of two).
    pub rx: u32,
    /// Frames that may wait to be sent (a power of two).
    pub tx: u32,
    /// The largest frame, in bytes.
    pub max_frame: usize,
}

/// What the kernel counted on an [`XskPort`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames dropped on arrival because the worker had not read the earlier ones (the receive
    /// ring or the free frames ran out).
    pub rx_dropped: u64,
}

/// One received frame, as [`XskPort::recv`] hands it over.
#[derive(Debug, Clone, Copy)]
pub struct XskFrame<'a> {
    /// Its bytes.
    pub data: &'a [u8],
    /// When the program saw it (CLOCK_MONOTONIC ns), if it could stamp it.
    pub monotonic_ns: Option<u64>,
}

/// An AF_XDP socket bound to queue 0 of one interface, with its program attached.
pub struct XskPort {
    // Field order is drop order: the program is detached before the socket closes, and the
    // rings and UMEM are unmapped after it.
    _link: OwnedFd,
    _program: OwnedFd,
    _map: XskMap,
    fd: OwnedFd,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    completion: Ring<u64>,
    umem: Umem,
    frame_size: usize,
    /// UMEM frames free for sending (addresses).
    free_tx: Vec<u64>,
    /// UMEM frames for sending in all: those not in `free_tx` are with the kernel.
    tx_frames: usize,
    /// Receive drops already reported by [`XskPort::take_rx_dropped`].
    rx_dropped_seen: u64,
}

impl std::fmt::Debug for XskPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "XskPort(fd {})", self.fd.as_raw_fd())
    }
}

// SAFETY: the mappings belong to this value alone (the kernel is the only other party, through
// the rings' indices); moving it to another thread moves that ownership.
unsafe impl Send for XskPort {}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: v is a live value of the size passed.
    let r = unsafe { libc::setsockopt(fd, libc::SOL_XDP, name, (v as *const T).cast(), size_of::<T>() as u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads a socket option of plain-data type `T` (all-zero bytes are a valid `T`).
fn getsockopt<T>(fd: RawFd, name: libc::c_int) -> io::Result<T> {
    // SAFETY: only the plain C structs of if_xdp.h are read this way, for which all-zero
    // bytes are valid.
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: v is a live value of the size passed; the kernel writes at most that much.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (&mut v as *mut T).cast(), &mut len) };
    if r == 0 { Ok(v) } else { Err(io::Error::last_os_error()) }
}

impl XskPort {
    /// Opens an AF_XDP socket on `device` (in the calling thread's namespace) with the program
    /// attached to the device. Fails where the kernel or the device cannot (no AF_XDP, an MTU
    /// too large for XDP on veth, a program already attached).
    pub fn open(device: &str, sizes: XskSizes) -> io::Result<XskPort> {
        let what = |e: io::Error, step: &str| io::Error::new(e.kind(), format!("AF_XDP on `{device}`: {step}: {e}"));
        let ifindex = super::socket::ifindex(device)?;
        if !sizes.rx.is_power_of_two() || !sizes.tx.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring sizes must be powers of two",
            ));
        }
        let frame_size = (sizes.max_frame + XDP_HEADROOM).next_power_of_two().max(2048);
        // SAFETY: plain socket(2); checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_XDP,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(what(io::Error::last_os_error(), "socket"));
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frames = (sizes.rx + sizes.tx) as usize;
        let umem_len = frames * frame_size;
        // SAFETY: a fresh private anonymous mapping; checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(what(io::Error::last_os_error(), "UMEM"));
        }
        let umem = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave a null mapping"))?;
        // Unmapped when dropped: on a failure below, or after the socket closes.
        let umem = Umem { p: umem, len: umem_len };
        let reg = libc::xdp_umem_reg {
            addr: umem.p.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: frame_size as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, libc::XDP_UMEM_REG, &reg).map_err(|e| what(e, "registering the UMEM"))?;
        for (opt, n) in [
            (libc::XDP_UMEM_FILL_RING, sizes.rx),
            (libc::XDP_UMEM_COMPLETION_RING, sizes.tx),
            (libc::XDP_RX_RING, sizes.rx),
            (libc::XDP_TX_RING, sizes.tx),
        ] {
            setsockopt(raw, opt, &n).map_err(|e| what(e, "sizing a ring"))?;
        }
        let off: libc::xdp_mmap_offsets =
            getsockopt(raw, libc::XDP_MMAP_OFFSETS).map_err(|e| what(e, "ring offsets"))?;
        let rx = Ring::map(raw, &off.rx, sizes.rx, libc::XDP_PGOFF_RX_RING as u64).map_err(|e| what(e, "rx ring"))?;
        let tx = Ring::map(raw, &off.tx, sizes.tx, libc::XDP_PGOFF_TX_RING as u64).map_err(|e| what(e, "tx ring"))?;
        let fill =
            Ring::map(raw, &off.fr, sizes.rx, libc::XDP_UMEM_PGOFF_FILL_RING).map_err(|e| what(e, "fill ring"))?;
        let completion = Ring::map(raw, &off.cr, sizes.tx, libc::XDP_UMEM_PGOFF_COMPLETION_RING)
            .map_err(|e| what(e, "completion ring"))?;
        // The first `rx` frames wait in the fill ring for the kernel; the rest are for sending.
        for i in 0..sizes.rx {
            fill.write(i, u64::from(i) * frame_size as u64);
        }
        fill.producer().store(sizes.rx, Ordering::Release);
        let free_tx = (sizes.rx..sizes.rx + sizes.tx)
            .map(|i| u64::from(i) * frame_size as u64)
            .collect();
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_COPY,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: 0,
        };
        // A socket closed on this queue a moment ago is released by the kernel in the
        // background, and the queue is busy until then: try again for a while.
        for attempt in 0.. {
            // SAFETY: sxdp is a live sockaddr_xdp of the size passed.
            let r = unsafe {
                libc::bind(
                    raw,
                    (&sxdp as *const libc::sockaddr_xdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as u32,
                )
            };
            if r == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) || attempt == BIND_ATTEMPTS {
                return Err(what(e, "bind"));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let map = XskMap::new(1)?;
        map.insert(0, raw)?;
        let program = bpf::load_xdp("intlab_xsk", &stamp_and_redirect(&map))?;
        let link = bpf::attach_xdp(&program, ifindex).map_err(|e| what(e, "attaching the XDP program"))?;
        Ok(XskPort {
            _link: link,
            _program: program,
            _map: map,
            fd,
            rx,
            tx,
            fill,
            completion,
            umem,
            frame_size,
            free_tx,
            tx_frames: sizes.tx as usize,
            rx_dropped_seen: 0,
        })
    }

    /// The socket's descriptor: readable while received frames wait.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The largest frame it carries.
    pub fn max_frame(&self) -> usize {
        self.frame_size - XDP_HEADROOM
    }

    /// Where `len` bytes at UMEM address `addr` start, with room for the metadata before them.
    fn umem_at(&self, addr: u64, len: usize) -> io::Result<*mut u8> {
        let addr = addr as usize;
        if addr < META || addr.saturating_add(len) > self.umem.len {
            return Err(io::Error::other(format!(
                "UMEM address {addr} (+{len} bytes) is outside the UMEM or its first {META} bytes"
            )));
        }
        // SAFETY: checked against the UMEM's length just above.
        Ok(unsafe { self.umem.p.as_ptr().add(addr) })
    }

    /// Hands up to `max` received frames to `f`, oldest first, and gives their UMEM frames back
    /// to the kernel; returns how many.
    pub fn recv(&mut self, max: usize, mut f: impl FnMut(XskFrame<'_>)) -> io::Result<usize> {
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let prod = self.rx.producer().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons).min(max as u32);
        let fill_at = self.fill.producer().load(Ordering::Relaxed);
        let mut filled = 0u32;
        let mut bad = None;
        for k in 0..n {
            let d = self.rx.read(cons.wrapping_add(k));
            let data = match self.umem_at(d.addr, d.len as usize) {
                Ok(p) => p,
                Err(e) => {
                    // Never a frame of ours: passed over, not given back, and said.
                    bad = Some(e);
                    continue;
                }
            };
            // SAFETY: the kernel wrote the frame and its metadata there and handed the frame
            // to us; it writes there again only after the frame goes back on the fill ring.
            let (frame, stamp) = unsafe {
                let meta = data.sub(META);
                let stamp = meta.cast::<u64>().read_unaligned();
                // Cleared, so that a frame the program could not stamp reads as unstamped.
                meta.cast::<u64>().write_unaligned(0);
                (std::slice::from_raw_parts(data, d.len as usize), stamp)
            };
            f(XskFrame {
                data: frame,
                monotonic_ns: (stamp != 0).then_some(stamp),
            });
            let base = d.addr - d.addr % self.frame_size as u64;
            self.fill.write(fill_at.wrapping_add(filled), base);
            filled += 1;
        }
        if n > 0 {
            self.rx.consumer().store(cons.wrapping_add(n), Ordering::Release);
            self.fill
                .producer()
                .store(fill_at.wrapping_add(filled), Ordering::Release);
        }
        match bad {
            Some(e) => Err(e),
            None => Ok(filled as usize),
        }
    }

    /// Takes back the frames the kernel has sent.
    fn reclaim(&mut self) {
        let cons = self.completion.consumer().load(Ordering::Relaxed);
        let prod = self.completion.producer().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons);
        for k in 0..n {
            let addr = self.completion.read(cons.wrapping_add(k));
            self.free_tx.push(addr - addr % self.frame_size as u64);
        }
        if n > 0 {
            self.completion
                .consumer()
                .store(cons.wrapping_add(n), Ordering::Release);
        }
    }

    /// Sends `frames`: copied into free UMEM frames, put on the transmit ring and handed to the
    /// kernel, which sends them within the call. Returns how many it took, from the front (the
    /// rest are too long, or found no frame free even after the kernel sent what it had).
    pub fn send<B: AsRef<[u8]>>(&mut self, frames: &[B]) -> io::Result<usize> {
        let mut taken = 0;
        while taken < frames.len() {
            let n = self.queue(&frames[taken..])?;
            self.kick()?;
            if n == 0 {
                break;
            }
            taken += n;
        }
        Ok(taken)
    }

    /// Puts what fits of `frames` on the transmit ring; returns how many, from the front.
    fn queue<B: AsRef<[u8]>>(&mut self, frames: &[B]) -> io::Result<usize> {
        self.reclaim();
        let prod = self.tx.producer().load(Ordering::Relaxed);
        let mut n = 0u32;
        for f in frames {
            let bytes = f.as_ref();
            if bytes.len() > self.frame_size - XDP_HEADROOM {
                break;
            }
            let Some(addr) = self.free_tx.pop() else { break };
            let dst = self.umem_at(addr, bytes.len())?;
            // SAFETY: a free UMEM frame (the kernel gave it back, or never had it), inside the
            // UMEM (checked), as long as the frame.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
            self.tx.write(
                prod.wrapping_add(n),
                libc::xdp_desc {
                    addr,
                    len: bytes.len() as u32,
                    options: 0,
                },
            );
            n += 1;
        }
        if n > 0 {
            self.tx.producer().store(prod.wrapping_add(n), Ordering::Release);
        }
        Ok(n as usize)
    }

    /// Has the kernel send what is on the transmit ring (copy mode sends inside this call, a
    /// bounded batch per call).
    fn kick(&mut self) -> io::Result<()> {
        for _ in 0..64 {
            if self.free_tx.len() == self.tx_frames {
                return Ok(());
            }
            // SAFETY: sendto with no data on our socket: the kernel reads the transmit ring.
            let r = unsafe { libc::sendto(self.fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
            let e = (r < 0).then(io::Error::last_os_error);
            self.reclaim();
            match e.and_then(|e| e.raw_os_error()) {
                None => {}
                // More than one call's batch waits, the device queue is busy, or the
                // completion ring is full (reclaimed above): go on.
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS) => {}
                // The interface went down: what waits stays on the ring.
                Some(libc::ENETDOWN | libc::ENXIO) => return Ok(()),
                Some(code) => return Err(io::Error::from_raw_os_error(code)),
            }
        }
        Ok(())
    }

    /// What the kernel counted on the socket since it opened.
    pub fn stats(&self) -> io::Result<XskStats> {
        let s: libc::xdp_statistics = getsockopt(self.fd(), libc::XDP_STATISTICS)?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped + s.rx_ring_full + s.rx_fill_ring_empty_descs,
        })
    }

    /// Frames dropped on arrival since the last call.
    pub fn take_rx_dropped(&mut self) -> io::Result<u64> {
        let total = self.stats()?.rx_dropped;
        let new = total.saturating_sub(self.rx_dropped_seen);
        self.rx_dropped_seen = total;
        Ok(new)
    }
}

/// The frames shared with the kernel; unmapped when dropped (the kernel keeps its own hold on the
/// pages until the socket is closed).
struct Umem {
    p: NonNull<u8>,
    len: usize,
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the mapping was made with this length and nothing uses it after.
        unsafe { libc::munmap(self.p.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::monotonic_ns;
    use crate::sys::{mmsg, netns, socket};
    use std::time::Duration;

    /// Runs `f` on a thread in a network namespace of its own holding veth pair `xa`-`xb`, both
    /// up.
    fn with_veth<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        netns::in_fresh_namespace(|| {
            netns::ip_for_test(&["link", "add", "xa", "type", "veth", "peer", "name", "xb"]);
            netns::ip_for_test(&["link", "set", "xa", "up"]);
            netns::ip_for_test(&["link", "set", "xb", "up"]);
            f()
        })
    }

    fn frame(k: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x88, 0xb5];
        f.extend_from_slice(&k.to_be_bytes());
        f.resize(len, k as u8);
        f
    }

    /// An AF_XDP port on xb with rings of `rx` and `tx` frames, and a packet socket on its peer.
    fn port_and_peer(rx: u32, tx: u32) -> (XskPort, OwnedFd, XskSizes) {
        let sizes = XskSizes {
            rx,
            tx,
            max_frame: 1514,
        };
        let port = XskPort::open("xb", sizes).expect("AF_XDP on a veth");
        (port, socket::packet("xa").expect("packet socket on xa"), sizes)
    }

    #[test]
    fn frames_cross_the_socket_both_ways_whole_stamped_and_the_program_goes_with_it() {
        with_veth(|| {
            let (mut port, peer, sizes) = port_and_peer(16, 8);
            // 50 frames through a 16-frame ring: it wraps, every frame is stamped.
            let mut seen: Vec<(Vec<u8>, Option<u64>)> = Vec::new();
            for k in 0..50u16 {
                let before = monotonic_ns();
                let f = frame(k, 60 + usize::from(k) * 29);
                assert_eq!(mmsg::send_batch(peer.as_raw_fd(), &[&f], &[]).expect("send on xa"), 1);
                let mut got = 0;
                // The kernel's own IPv6 neighbour discovery on xa comes through too: kept out.
                let ours = |d: &[u8]| d.get(12..14) == Some(&[0x88, 0xb5][..]);
                for _ in 0..2000 {
                    port.recv(4, |x| {
                        if ours(x.data) {
                            seen.push((x.data.to_vec(), x.monotonic_ns));
                            got += 1;
                        }
                    })
                    .expect("recv");
                    if got > 0 {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
                assert_eq!(got, 1, "frame {k} arrived once");
                let (data, at) = seen.last().expect("a frame");
                assert_eq!(data, &f, "frame {k} whole");
                let at = at.expect("stamped by the program");
                assert!(at >= before && at <= monotonic_ns(), "frame {k} stamped when sent");
            }
            // And back: sent through the socket, received on the peer's packet socket.
            let out: Vec<Vec<u8>> = (0..20u16).map(|k| frame(1000 + k, 1514 - usize::from(k))).collect();
            let mut sent = 0;
            for chunk in out.chunks(5) {
                sent += port.send(chunk).expect("send through the socket");
            }
            assert_eq!(
                sent, 20,
                "8 transmit frames are enough: each is back before the next batch"
            );
            let mut bufs: Vec<Vec<u8>> = (0..32).map(|_| vec![0u8; 2048]).collect();
            let mut meta = [mmsg::RecvMeta::default(); 32];
            let mut back: Vec<Vec<u8>> = Vec::new();
            for _ in 0..200 {
                let n = mmsg::recv_batch(peer.as_raw_fd(), &mut bufs, &mut meta).expect("recv on xa");
                back.extend(
                    (0..n)
                        .map(|i| bufs[i][..meta[i].len].to_vec())
                        .filter(|d| d[12..14] == [0x88, 0xb5]),
                );
                if back.len() == out.len() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(back, out, "every frame once, whole, in order");
            assert_eq!(port.stats().expect("stats"), XskStats::default());
            drop(port);
            // Its program left with it: the device takes a new one.
            XskPort::open("xb", sizes).expect("open again after the first closed");
        });
    }

    #[test]
    fn frames_that_find_the_ring_full_are_counted_once() {
        with_veth(|| {
            let (mut port, peer, _) = port_and_peer(4, 4);
            let frames: Vec<Vec<u8>> = (0..20u16).map(|k| frame(k, 100)).collect();
            assert_eq!(mmsg::send_batch(peer.as_raw_fd(), &frames, &[]).expect("send"), 20);
            let mut got = 0;
            let ours = |d: &[u8]| d.get(12..14) == Some(&[0x88, 0xb5][..]);
            port.recv(64, |x| got += usize::from(ours(x.data))).expect("recv");
            let dropped = port.take_rx_dropped().expect("stats");
            assert_eq!(got, 4, "the ring holds four");
            assert!(dropped >= 16, "the rest dropped and counted: {dropped}");
            assert_eq!(port.take_rx_dropped().expect("stats"), 0, "counted once");
        });
    }

    #[test]
    fn a_frame_too_long_for_its_umem_frame_is_not_taken() {
        with_veth(|| {
            let (mut port, _peer, _) = port_and_peer(4, 4);
            let big = vec![0u8; port.max_frame() + XDP_HEADROOM + 1];
            assert_eq!(port.send(&[big]).expect("send"), 0);
        });
    }
}
