//! An AF_PACKET socket whose receive and transmit rings are mapped into the process
//! (PACKET_MMAP, TPACKET_V2): the kernel writes each frame it receives into the next slot of
//! the receive ring, where the worker reads it without a system call; frames to send are
//! written into slots of the transmit ring and one `send` hands them all to the kernel.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::socket;

/// Where a frame's bytes start in a transmit slot: after the slot's header, aligned
/// (TPACKET_ALIGN of `tpacket2_hdr`; the kernel's default without PACKET_TX_HAS_OFF).
const TX_DATA: usize = (size_of::<libc::tpacket2_hdr>() + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1);

/// Slots per ring block (a block is `frames_per_block` slots, a whole number of pages).
const FRAMES_PER_BLOCK: usize = 16;

/// One received frame, as [`PacketRing::recv`] hands it over.
#[derive(Debug, Clone, Copy)]
pub struct RingFrame<'a> {
    /// Its bytes (at most the slot's room: see `truncated`).
    pub data: &'a [u8],
    /// Its length on the wire was more than `data` holds.
    pub truncated: bool,
    /// The kernel's receive time (CLOCK_REALTIME, ns).
    pub realtime_ns: u128,
    /// The VLAN tag (TPID, TCI) the kernel took off it: `data` no longer holds it.
    pub vlan: Option<(u16, u16)>,
}

/// An AF_PACKET socket on one interface with mapped receive and transmit rings.
#[derive(Debug)]
pub struct PacketRing {
    fd: OwnedFd,
    map: NonNull<u8>,
    map_len: usize,
    slot: usize,
    slots: usize,
    /// Next receive slot to look at.
    rx_next: usize,
    /// Next transmit slot to fill.
    tx_next: usize,
}

// SAFETY: the mapping belongs to this value alone (the kernel is the only other party, through
// the slots' status words); moving it to another thread moves that ownership.
unsafe impl Send for PacketRing {}

impl PacketRing {
    /// Opens a non-blocking AF_PACKET socket on `device` (in the calling thread's namespace)
    /// with receive and transmit rings of `slots` slots each, every slot room for a frame of
    /// `max_frame` bytes. Its own transmissions are not received; the transmit path skips the
    /// interface's queueing discipline.
    pub fn open(device: &str, slots: usize, max_frame: usize) -> io::Result<PacketRing> {
        let fd = socket::packet_unbound()?;
        let raw = fd.as_raw_fd();
        socket::set_int(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        )?;
        // Room for the slot header, the kernel's alignment of the frame and the frame.
        // A power of two of at least 256 bytes: a block of FRAMES_PER_BLOCK slots is then a whole
        // number of pages, as the kernel asks.
        let slot = (max_frame + 2 * TX_DATA + 64)
            .next_power_of_two()
            .max(page_size() / FRAMES_PER_BLOCK);
        let slots = slots.div_ceil(FRAMES_PER_BLOCK).max(1) * FRAMES_PER_BLOCK;
        let req = libc::tpacket_req {
            tp_block_size: (slot * FRAMES_PER_BLOCK) as u32,
            tp_block_nr: (slots / FRAMES_PER_BLOCK) as u32,
            tp_frame_size: slot as u32,
            tp_frame_nr: slots as u32,
        };
        for ring in [libc::PACKET_RX_RING, libc::PACKET_TX_RING] {
            // SAFETY: req is a live tpacket_req of the size passed.
            let r = unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_PACKET,
                    ring,
                    (&req as *const libc::tpacket_req).cast(),
                    size_of::<libc::tpacket_req>() as u32,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        socket::set_int(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)?;
        let map_len = 2 * slot * slots;
        // SAFETY: a fresh shared mapping of the socket's rings, of the length they take; the
        // result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave a null mapping"))?;
        let ring = PacketRing {
            fd,
            map,
            map_len,
            slot,
            slots,
            rx_next: 0,
            tx_next: 0,
        };
        // Bound last, so nothing arrives before the rings are there.
        socket::bind_packet(raw, device)?;
        Ok(ring)
    }

    /// The socket's descriptor (readable when a received frame waits in the ring).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The header of slot `i` of the receive ring (`tx`: of the transmit ring).
    fn header(&self, tx: bool, i: usize) -> *mut libc::tpacket2_hdr {
        let at = (usize::from(tx) * self.slots + i) * self.slot;
        // SAFETY: `at` is the start of a slot inside the mapping (i < slots).
        unsafe { self.map.as_ptr().add(at).cast() }
    }

    /// The status word of a slot, shared with the kernel.
    fn status(&self, tx: bool, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first field of a slot header inside the live mapping,
        // aligned to 4; the kernel and this process exchange the slot through it.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*self.header(tx, i)).tp_status)) }
    }

    /// Hands each waiting received frame to `take`, at most `max`, and gives the slots back to
    /// the kernel; returns how many.
    pub fn recv(&mut self, max: usize, mut take: impl FnMut(RingFrame<'_>)) -> usize {
        let mut n = 0;
        while n < max {
            let i = self.rx_next;
            // Acquire: the frame's bytes are visible once its status says it is ours.
            if self.status(false, i).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                break;
            }
            let h = self.header(false, i);
            // SAFETY: the slot is ours until we hand it back; its header and the frame the
            // kernel wrote at tp_mac (tp_snaplen bytes) lie inside the slot.
            let frame = unsafe {
                let hdr = &*h;
                let data =
                    std::slice::from_raw_parts(h.cast::<u8>().add(usize::from(hdr.tp_mac)), hdr.tp_snaplen as usize);
                RingFrame {
                    data,
                    truncated: hdr.tp_len > hdr.tp_snaplen,
                    realtime_ns: u128::from(hdr.tp_sec) * 1_000_000_000 + u128::from(hdr.tp_nsec),
                    vlan: super::socket::stripped_vlan(hdr.tp_status, hdr.tp_vlan_tci, hdr.tp_vlan_tpid),
                }
            };
            take(frame);
            // Release: our reads of the slot are done before the kernel may write it again.
            self.status(false, i).store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.rx_next = (i + 1) % self.slots;
            n += 1;
        }
        n
    }

    /// Writes `frames` into free transmit slots and hands them to the kernel with one `send`;
    /// returns how many it took, from the front (a slot the kernel still sends from ends the
    /// batch).
    pub fn send<B: AsRef<[u8]>>(&mut self, frames: &[B]) -> io::Result<usize> {
        let room = self.slot - TX_DATA;
        let mut queued = 0;
        for f in frames {
            let f = f.as_ref();
            let i = self.tx_next;
            let status = self.status(true, i).load(Ordering::Acquire);
            if status & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
                break;
            }
            if f.len() > room {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a frame of {} bytes does not fit a ring slot of {room}", f.len()),
                ));
            }
            let h = self.header(true, i);
            // SAFETY: the slot is free (status available or wrong format); its data area after
            // the header holds `room` bytes inside the mapping.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), h.cast::<u8>().add(TX_DATA), f.len());
                (*h).tp_len = f.len() as u32;
            }
            self.status(true, i)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_next = (i + 1) % self.slots;
            queued += 1;
        }
        if queued > 0 {
            // SAFETY: send(2) with no buffer: the kernel sends what the ring's slots hold.
            let r = unsafe { libc::send(self.fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            if r < 0 {
                let e = io::Error::last_os_error();
                // Slots the kernel could not take now stay queued; it sends them at the next call.
                if e.kind() != io::ErrorKind::WouldBlock {
                    return Err(e);
                }
            }
        }
        Ok(queued)
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, of its length, unmapped once.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_sent_through_the_ring_come_back_through_the_ring_whole_and_timed() {
        let got = crate::sys::netns::in_fresh_namespace(|| {
            let mut ring = PacketRing::open("lo", 32, 2048).expect("ring on lo");
            // 40 frames through 32 slots: the ring wraps on both sides.
            let mut seen: Vec<(Vec<u8>, u128, bool)> = Vec::new();
            let before = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos();
            for k in 0..40u8 {
                let mut f = vec![0xff; 12];
                f.extend_from_slice(&[0x88, 0xb5, k]);
                f.resize(60 + usize::from(k) * 20, k);
                assert_eq!(ring.send(&[f]).expect("send"), 1, "frame {k} queued");
                for _ in 0..1000 {
                    if ring.recv(8, |r| seen.push((r.data.to_vec(), r.realtime_ns, r.truncated))) > 0 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
            (seen, before)
        });
        let (seen, before) = got;
        assert_eq!(seen.len(), 40, "every frame once (our own transmissions are not seen)");
        for (k, (data, at, truncated)) in seen.iter().enumerate() {
            assert_eq!(data.len(), 60 + k * 20, "frame {k} whole");
            assert_eq!(&data[12..15], &[0x88, 0xb5, k as u8]);
            assert!(data[15..].iter().all(|&b| b == k as u8));
            assert!(!truncated);
            assert!(*at >= before, "receive time from the kernel's realtime clock");
        }
    }

    #[test]
    fn a_frame_larger_than_a_slot_is_refused_not_cut() {
        crate::sys::netns::in_fresh_namespace(|| {
            let mut ring = PacketRing::open("lo", 16, 256).expect("ring on lo");
            let room = ring.slot - TX_DATA;
            let e = ring.send(&[vec![0u8; room + 1]]).expect_err("too big");
            assert!(e.to_string().contains("does not fit"), "{e}");
        });
    }
}
