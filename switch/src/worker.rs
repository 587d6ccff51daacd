//! A worker thread: owns some ports (their receive side, egress queue, counters and capture),
//! runs ingress on what they receive, hands frames for other workers' ports over a channel, and
//! releases due frames in batches at each wakeup.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};

use crate::capture::PortCapture;
use crate::clock::Clock;
use crate::counters::{DropReason, PortCounters, PortSnapshot};
use crate::egress::{self, EgressPort, Fate};
use crate::frame::{FrameBuf, FramePool};
use crate::pipeline::{Pipeline, Verdict};
use crate::port::{BATCH, Port};
use crate::tm::{EgressQueue, Rejected};

/// Counters are published this often (switch clock, ns).
const PUBLISH_EVERY_NS: u64 = 1_000_000_000;
/// Batches read from one port per loop turn: a port that never runs dry must not starve the
/// releases (and the other ports) of its worker.
const RX_BATCHES_PER_TURN: usize = 4;

/// An eventfd that wakes a worker from its poll.
#[derive(Debug, Clone)]
pub struct Doorbell(Arc<OwnedFd>);

impl Doorbell {
    /// A new doorbell.
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: plain eventfd(2); the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Doorbell(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// Wakes the worker.
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A frame going to a port owned by another worker.
#[derive(Debug)]
pub struct Handoff {
    /// The frame.
    pub frame: FrameBuf,
    /// Egress port index.
    pub egress: usize,
}

/// Everything a worker keeps for one of its ports.
#[derive(Debug)]
pub struct PortSlot {
    /// Port index in the switch.
    pub index: usize,
    /// Port name.
    pub name: String,
    /// The open port.
    pub port: Port,
    /// Its egress queue.
    pub queue: EgressQueue,
    /// Its egress settings.
    pub egress: EgressPort,
    /// Its counters.
    pub counters: PortCounters,
    /// Its capture, if on.
    pub capture: Option<PortCapture>,
    /// The link's rate, which also bounds how fast frames can arrive on it.
    pub link_rate: crate::units::Rate,
    /// When the previous received frame finished arriving (ps): the next cannot finish sooner
    /// than one serialization time later.
    pub ingress_free_ps: u64,
    /// The link's propagation delay (ns).
    pub link_delay_ns: u64,
}

/// What all workers of a switch share.
#[derive(Debug, Clone)]
pub struct Shared {
    /// Parser and tables.
    pub pipeline: Arc<Pipeline>,
    /// Frame buffers.
    pub pool: FramePool,
    /// Port index → owning worker.
    pub owner: Arc<Vec<usize>>,
    /// Per worker: its hand-off channel and doorbell.
    pub inboxes: Arc<Vec<(Sender<Handoff>, Doorbell)>>,
    /// Set to stop.
    pub stop: Arc<AtomicBool>,
    /// Published counters, by port index.
    pub published: Arc<Mutex<Vec<PortSnapshot>>>,
    /// Raised by whoever wants counters now rather than at the next regular publication.
    pub publish_request: Arc<AtomicU64>,
    /// Publications made on request, summed over workers.
    pub publish_acks: Arc<AtomicU64>,
    /// Capture dropped frames too.
    pub capture_drops: bool,
    /// Longest sleep (ns): the worker wakes on its own timer at least this often, since a wake-up
    /// sent from another CPU when a frame arrives can take milliseconds on a virtual machine.
    pub idle_poll_ns: u64,
}

/// One worker thread's state.
pub struct Worker {
    id: usize,
    slots: Vec<PortSlot>,
    /// Port index → slot index, for ports this worker owns.
    local: Vec<Option<usize>>,
    inbox: Receiver<Handoff>,
    bell: Doorbell,
    shared: Shared,
    clock: &'static Clock,
    rng: fastrand::Rng,
    rx: Vec<FrameBuf>,
    tx: Vec<FrameBuf>,
    ring_worker: Vec<bool>,
    /// The doorbell, then every port descriptor: what `wait` polls.
    pollfds: Vec<libc::pollfd>,
    /// The last publication request answered.
    publish_seen: u64,
}

impl Worker {
    /// A worker owning `slots`.
    pub fn new(
        id: usize,
        slots: Vec<PortSlot>,
        inbox: Receiver<Handoff>,
        bell: Doorbell,
        shared: Shared,
        seed: u64,
    ) -> Worker {
        let mut local = vec![None; shared.owner.len()];
        for (i, s) in slots.iter().enumerate() {
            local[s.index] = Some(i);
            if let Port::Link(end) = &s.port {
                end.attach(bell.clone());
            }
        }
        let rx = (0..BATCH).map(|_| shared.pool.get()).collect();
        let workers = shared.inboxes.len();
        let pollfds = std::iter::once(bell.fd())
            .chain(slots.iter().filter_map(|s| s.port.poll_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        Worker {
            id,
            slots,
            local,
            inbox,
            bell,
            shared,
            clock: Clock::get(),
            rng: fastrand::Rng::with_seed(seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            rx,
            tx: Vec::with_capacity(BATCH * 4),
            ring_worker: vec![false; workers],
            pollfds,
            publish_seen: 0,
        }
    }

    /// Runs until the stop flag is set, then publishes final counters and flushes captures.
    pub fn run(mut self) {
        if let Err(e) = intlab_runtime::sys::thread::precise_timers() {
            tracing::warn!(
                worker = self.id,
                "timer slack stays at the default, wake-ups will be later: {e}"
            );
        }
        let mut next_publish = self.clock.now_ns() + PUBLISH_EVERY_NS;
        while !self.shared.stop.load(Ordering::Relaxed) {
            for s in 0..self.slots.len() {
                self.receive(s);
            }
            while let Ok(h) = self.inbox.try_recv() {
                self.enqueue(h.egress, h.frame);
            }
            self.ring_peers();
            let now = self.clock.now_ns();
            for s in 0..self.slots.len() {
                self.release(s, now);
            }
            let requested = self.shared.publish_request.load(Ordering::Acquire);
            if now >= next_publish || requested != self.publish_seen {
                self.publish(false);
                // A run killed later still leaves captures readable up to here.
                for c in self.slots.iter_mut().filter_map(|s| s.capture.as_mut()) {
                    c.flush();
                }
                next_publish = now + PUBLISH_EVERY_NS;
                if requested != self.publish_seen {
                    self.publish_seen = requested;
                    self.shared.publish_acks.fetch_add(1, Ordering::AcqRel);
                }
            }
            self.wait();
        }
        self.shutdown();
    }

    fn receive(&mut self, s: usize) {
        for _ in 0..RX_BATCHES_PER_TURN {
            let n = match self.slots[s].port.recv_batch(&mut self.rx, &self.shared.pool) {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(port = %self.slots[s].name, "receive failed: {e}");
                    0
                }
            };
            if n == 0 {
                return;
            }
            let now = self.clock.now_ns();
            for i in 0..n {
                let fresh = self.shared.pool.get();
                let frame = std::mem::replace(&mut self.rx[i], fresh);
                self.ingress(s, frame, now);
            }
            if n < BATCH {
                return;
            }
        }
    }

    fn ingress(&mut self, s: usize, mut frame: FrameBuf, now: u64) {
        let slot = &mut self.slots[s];
        if !frame.arrival_known {
            frame.arrival_ns = now;
        }
        if !matches!(slot.port, Port::Link(_)) {
            // A host's link delivers at most its line rate: a burst the host's stack sent at once
            // arrives spread out, as through a real NIC (store-and-forward: last bit in).
            // The host emulates nothing, so the link's delay towards the switch is applied
            // here: the frame counts as arriving that much later (the egress schedule holds it).
            let ser = slot.link_rate.serialization_ns(frame.len as u64) * 1000;
            let done = (frame.arrival_ns * 1000).max(slot.ingress_free_ps) + ser;
            slot.ingress_free_ps = done;
            frame.arrival_ns = done / 1000 + slot.link_delay_ns;
        }
        frame.ingress = slot.index as u16;
        slot.counters.rx_frames += 1;
        slot.counters.rx_bytes += frame.len as u64;
        if let Some(c) = &mut slot.capture {
            c.inbound(frame.arrival_ns, frame.bytes());
        }
        if frame.truncated {
            return self.drop_at(s, frame, DropReason::Oversize, false);
        }
        let (verdict, notes) = self.shared.pipeline.ingress(&mut frame);
        if notes.malformed_int {
            self.slots[s].counters.int_malformed += 1;
        }
        match verdict {
            Verdict::Forward(p) => self.route(s, p, frame),
            Verdict::Reply => {
                let p = self.slots[s].index;
                self.route(s, p, frame);
            }
            Verdict::Flood => {
                let from = self.slots[s].index;
                for p in 0..self.local.len() {
                    if p != from {
                        let mut copy = self.shared.pool.get();
                        copy.copy_from(&frame);
                        self.route(s, p, copy);
                    }
                }
                self.shared.pool.put(frame);
            }
            Verdict::Drop(why) => self.drop_at(s, frame, why, false),
        }
    }

    /// Sends `frame` towards egress port `p`: queued here, or handed to its worker.
    fn route(&mut self, from_slot: usize, p: usize, frame: FrameBuf) {
        if self.local[p].is_some() {
            return self.enqueue(p, frame);
        }
        let w = self.shared.owner[p];
        match self.shared.inboxes[w].0.try_send(Handoff { frame, egress: p }) {
            Ok(()) => self.ring_worker[w] = true,
            Err(e) => {
                let frame = e.into_inner().frame;
                self.drop_at(from_slot, frame, DropReason::HandoffFull, false);
            }
        }
    }

    fn ring_peers(&mut self) {
        for w in 0..self.ring_worker.len() {
            if std::mem::take(&mut self.ring_worker[w]) && w != self.id {
                self.shared.inboxes[w].1.ring();
            }
        }
    }

    fn enqueue(&mut self, p: usize, mut frame: FrameBuf) {
        let Some(s) = self.local[p] else {
            return self.shared.pool.put(frame);
        };
        let slot = &mut self.slots[s];
        frame.int_growth = slot.egress.int_growth(&frame);
        let wire_len = (frame.len + usize::from(frame.int_growth)) as u64;
        if let Err(Rejected::BufferFull(frame)) = slot.queue.enqueue(frame, wire_len) {
            self.drop_at(s, frame, DropReason::BufferFull, true);
        }
    }

    fn release(&mut self, s: usize, now: u64) {
        let slot = &mut self.slots[s];
        while let Some(mut d) = slot.queue.dequeue_due(now) {
            slot.counters.record_lateness(now.saturating_sub(d.release_ns));
            match egress::process(&mut d, &slot.egress, &mut slot.counters, &mut self.rng) {
                Fate::Lost => {
                    slot.counters.drop(DropReason::InjectedLoss);
                    if let Some(c) = slot.capture.as_mut().filter(|_| self.shared.capture_drops) {
                        c.dropped(d.start_ns, d.frame.bytes(), DropReason::InjectedLoss, true);
                    }
                    self.shared.pool.put(d.frame);
                }
                Fate::Send => {
                    slot.counters.tx_frames += 1;
                    slot.counters.tx_bytes += d.frame.len as u64;
                    if let Some(c) = &mut slot.capture {
                        c.outbound(d.start_ns, d.frame.bytes());
                    }
                    // On an in-process link the frame arrives at the far end exactly now.
                    d.frame.arrival_ns = d.release_ns;
                    self.tx.push(d.frame);
                }
            }
        }
        if self.tx.is_empty() {
            return;
        }
        if let Err(e) = slot.port.send_batch(&mut self.tx, &self.shared.pool) {
            tracing::warn!(port = %slot.name, "send failed: {e}");
        }
        for f in self.tx.drain(..) {
            slot.counters.tx_frames -= 1;
            slot.counters.tx_bytes -= f.len as u64;
            slot.counters.drop(DropReason::TxError);
            self.shared.pool.put(f);
        }
    }

    fn drop_at(&mut self, s: usize, frame: FrameBuf, why: DropReason, outbound: bool) {
        let slot = &mut self.slots[s];
        slot.counters.drop(why);
        if let Some(c) = slot.capture.as_mut().filter(|_| self.shared.capture_drops) {
            c.dropped(frame.arrival_ns, frame.bytes(), why, outbound);
        }
        self.shared.pool.put(frame);
    }

    /// Sleeps until a port is readable, the doorbell rings, or the next frame is due.
    fn wait(&mut self) {
        let now = self.clock.now_ns();
        let next = self.slots.iter().filter_map(|s| s.queue.next_release_ns()).min();
        let cap = self.shared.idle_poll_ns;
        let sleep = next.map_or(cap, |t| t.saturating_sub(now)).min(cap);
        if sleep == 0 {
            return;
        }
        let fds = &mut self.pollfds;
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: fds is a live array of pollfd of the length passed; ts is a valid timespec.
        unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
        if fds[0].revents != 0 {
            self.bell.drain();
        }
    }

    fn publish(&self, with_trace: bool) {
        if let Ok(mut p) = self.shared.published.lock() {
            for s in &self.slots {
                p[s.index] = s.counters.snapshot(&s.name, with_trace);
            }
        }
    }

    fn shutdown(mut self) {
        for s in &mut self.slots {
            for f in s.queue.drain() {
                self.shared.pool.put(f);
            }
            if let Some(c) = &mut s.capture {
                c.flush();
            }
        }
        self.publish(true);
    }
}
