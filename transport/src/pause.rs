//! PFC as a host's NIC honours it: the pause frames (802.1Qbb) the switch sends to the host
//! arrive on its interface, where an AF_PACKET socket on their EtherType reads them, and the
//! NIC stops its queue pairs of a paused priority for the time the frame asks.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use int_format::ethernet::ethertype;
use int_format::pfc::{PfcFrame, pause_ps};
use intlab_runtime::clock::Clock;
use intlab_runtime::sys::mmsg::{self, RecvMeta};
use intlab_runtime::sys::socket;

/// Frames read per call: pauses come one per XOFF, XON or refresh.
const BATCH: usize = 8;
/// A PFC frame without its FCS.
const FRAME: usize = 60;

/// A pause the NIC must honour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// When the frame arrived (lab clock, ns).
    pub at_ns: u64,
    /// Until when the priority is paused (ns; `at_ns` for an XON).
    pub until_ns: u64,
}

impl Pause {
    /// The pause a frame of `quanta` (512 bit times each at `rate_bps`) that arrived at
    /// `at_ns` asks for; 0 quanta (XON) ends a pause at once.
    pub fn of(at_ns: u64, quanta: u16, rate_bps: u64) -> Pause {
        Pause {
            at_ns,
            until_ns: at_ns + pause_ps(quanta, rate_bps) / 1000,
        }
    }
}

/// The host's reader of PFC frames.
#[derive(Debug)]
pub struct PauseListener {
    fd: OwnedFd,
    bufs: [[u8; FRAME]; BATCH],
    meta: [RecvMeta; BATCH],
}

impl PauseListener {
    /// Opens it in the calling thread's namespace.
    pub fn open() -> io::Result<PauseListener> {
        Ok(PauseListener {
            fd: socket::packet_ethertype(ethertype::MAC_CONTROL)?,
            bufs: [[0; FRAME]; BATCH],
            meta: [RecvMeta::default(); BATCH],
        })
    }

    /// Its descriptor.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads what has arrived and returns the last word for `priority` on a link of
    /// `rate_bps`, if any frame spoke of it (a later frame replaces an earlier one). Frames
    /// that are not PFC are skipped.
    pub fn read(&mut self, priority: usize, rate_bps: u64, clock: &Clock) -> io::Result<(usize, Option<Pause>)> {
        let (mut frames, mut last) = (0, None);
        loop {
            let n = mmsg::recv_batch(self.fd.as_raw_fd(), &mut self.bufs, &mut self.meta)?;
            let map = clock.realtime_map();
            for (buf, meta) in self.bufs.iter().zip(&self.meta).take(n) {
                let Ok(pfc) = PfcFrame::new_checked(&buf[..meta.len.min(FRAME)]) else {
                    continue;
                };
                frames += 1;
                let Some(quanta) = pfc.quanta(priority) else {
                    continue;
                };
                let at_ns = meta.realtime_ns.map_or_else(|| clock.now_ns(), |t| map.lab_ns(t));
                last = Some(Pause::of(at_ns, quanta, rate_bps));
            }
            if n < BATCH {
                return Ok((frames, last));
            }
        }
    }
}
