//! A shard: every switch port one runtime worker owns, of whichever switches. It reads its
//! ports in batches and runs ingress on what arrived in arrival-time order, queues frames for
//! its own ports at once and hands frames for other workers' ports over in batches, releases
//! due frames through egress, and delivers frames on in-process links itself when both ends are
//! its own. It is a runtime [`Task`]: input, its next release, and other shards' hand-offs wake
//! it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError, Weak};

use crossbeam_channel::Receiver;
use int_format::pfc::PfcFrame;
use intlab_runtime::clock::Clock;
use intlab_runtime::sys::mmsg::{BATCH, RecvMeta};
use intlab_runtime::{Context, Task};

use crate::capture::PortCapture;
use crate::counters::{DropReason, PortCounters, PortSnapshot};
use crate::egress::{self, EgressPort};
use crate::fabric_state::{FabricShared, GlobalPort, Handoff};
use crate::frame::{FrameBuf, FrameStack};
use crate::pipeline::{P4Egress, P4Scratch, P4Verdict, Verdict};
use crate::port::Port;
use crate::port::tunnel::Unsealed;
use crate::port_engine::{EgressDecision, PortView, Started, is_mac_control, pause_port, pfc_frame};
use crate::tm::{Dequeued, EgressQueue, PRIORITIES, PfcSignal, Until};
use intlab_p4::exec::{Carry, Session};

/// Counters are published this often (lab clock, ns).
const PUBLISH_EVERY_NS: u64 = 1_000_000_000;
/// A worker asleep this long with nothing to run (lab ns) has its shard run by a worker that
/// hands it frames: well above the gaps within a flow, so that a flow between two workers keeps
/// both (at 100 us, TCP through a 2-port switch on 2 workers lost 15 % of its throughput), and
/// well below the gaps of light traffic (ping's 10 ms or more).
const BORROW_AFTER_IDLE_NS: u64 = 1_000_000;
/// Batches read from one port per run: a port that never runs dry must not starve the
/// releases (and the other ports) of its worker.
const RX_BATCHES_PER_RUN: usize = 4;
/// Rounds of taking back what borrowed shards answered, per run.
const BORROWED_ANSWER_ROUNDS: usize = 4;
/// Passes in a row a frame may make through a port with no interface (PSA's
/// `PSA_PORT_RECIRCULATE`, fabric-tna's recirculation port 510) before it is dropped (as the
/// in-memory switch bounds recirculation).
const MAX_PORTLESS_RECIRCULATIONS: u32 = 64;

/// How far from the lab clock a tunnel frame's time may be, beyond its link's delay, before it
/// is dropped (lab ns): far more than any machines' network takes, far less than an hour.
const TUNNEL_WINDOW_NS: u64 = 1_000_000_000;

/// Tunnel frames a worker holds until their arrival at most: a bandwidth-delay product of
/// 100 MB of 1500-byte frames. Beyond it, a peer sends faster than its link carries.
const MAX_TUNNEL_HELD: usize = 65_536;

/// Everything a shard keeps for one of its ports.
#[derive(Debug)]
pub struct PortSlot {
    /// The port's number in the fabric.
    pub global: GlobalPort,
    /// Its switch (index in the fabric).
    pub switch: usize,
    /// Its index in its switch.
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
    /// What a host's link delivers to it (frames from another switch come at their release).
    pub inbound: crate::port::InboundLink,
    /// Its link is up (see [`crate::LinkChange::up`]).
    pub link_up: bool,
}

/// A frame on a host's impaired link, not arrived yet.
#[derive(Debug)]
struct Held {
    arrival_ns: u64,
    seq: u64,
    slot: usize,
    frame: FrameBuf,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.arrival_ns, self.seq) == (other.arrival_ns, other.seq)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.arrival_ns, self.seq).cmp(&(other.arrival_ns, other.seq))
    }
}

impl PortSlot {
    /// The port as the port engine works on it; `capture_drops`: drops go into its capture.
    fn view(&mut self, capture_drops: bool) -> PortView<'_> {
        PortView {
            index: self.index,
            queue: &mut self.queue,
            egress: &self.egress,
            counters: &mut self.counters,
            capture: self.capture.as_mut(),
            link_up: self.link_up,
            capture_drops,
        }
    }
}

/// One worker's ports.
pub struct Shard {
    worker: usize,
    fabric: Arc<FabricShared>,
    /// The other workers' shards, to run one whose worker sleeps.
    directory: Arc<ShardDirectory>,
    slots: Vec<PortSlot>,
    /// Global port → slot, for the ports this shard owns.
    local: Vec<Option<usize>>,
    inbox: Receiver<Handoff>,
    /// (next release, slot): a queue head's release time, earliest first; an entry whose time
    /// is no longer its queue's head is stale.
    releases: BinaryHeap<Reverse<(u64, usize)>>,
    clock: &'static Clock,
    rng: fastrand::Rng,
    /// Free buffers, the last freed first.
    frames: FrameStack,
    rx: Vec<FrameBuf>,
    meta: Vec<RecvMeta>,
    /// Frames received in this run, in the order to run ingress on them: (arrival, slot, frame).
    arrivals: Vec<(u64, usize, FrameBuf)>,
    /// The arrivals being run through ingress (which may add more to `arrivals`).
    ingressing: Vec<(u64, usize, FrameBuf)>,
    tx: Vec<FrameBuf>,
    /// Per worker: frames for it with the slot they came through, sent at the end of the run.
    outbox: Vec<Vec<(usize, Handoff)>>,
    /// The (port, replication id) copies of the multicast frame in hand.
    replicas: Vec<(usize, u16)>,
    /// PFC frames to send: (switch, what, when in ns, the slot whose queue asked).
    pfc_due: Vec<(usize, PfcSignal, u64, usize)>,
    /// (switch, one of its slots here) for each switch with PFC this shard has ports of: it
    /// refreshes their pauses.
    pfc_switches: Vec<(usize, usize)>,
    /// Per switch of the fabric that runs a P4 program: the packet states this worker runs it on.
    p4_scratch: Vec<Option<P4Scratch>>,
    /// Per switch: the control-plane edits of its P4 program whose queue settings this shard
    /// has applied (`u64::MAX`: none yet).
    p4_edits_seen: Vec<u64>,
    /// The fabric's count of link changes posted when this shard last took its own.
    link_changes_seen: u64,
    /// Link changes taken and not yet due: (lab time, slot, change), earliest first.
    link_changes: Vec<(u64, usize, crate::LinkChange)>,
    /// Frames from hosts' impaired links that have not arrived yet, earliest first.
    held: BinaryHeap<Reverse<Held>>,
    /// Frames held so far, to keep equal arrival times in the order they were sent.
    held_seq: u64,
    /// Of the held frames, those from tunnels (at most [`MAX_TUNNEL_HELD`]).
    tunnel_held: usize,
    /// What P4 egress made while a port's due frames started: clones for their sessions,
    /// recirculated frames for their switch's ingress.
    spawned: Vec<Spawned>,
    /// What the port engine left after a port's frames were queued or started (kept for its
    /// buffers).
    started: Started,
    /// Passes in a row the frame in hand has made through a port with no interface.
    portless_passes: u32,
    /// A reused list for refreshed pauses.
    refreshed: Vec<PfcSignal>,
    next_publish: u64,
    publish_seen: u64,
    /// Running on another worker's thread ([`SharedShard::run_here`]).
    borrowed: bool,
    /// The workers whose shards this run borrowed (kept to reuse its allocation).
    borrowed_from: Vec<usize>,
    /// Its worker has stopped it: no other worker runs it any more.
    stopped: bool,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shard(worker {}, {} ports)", self.worker, self.slots.len())
    }
}

impl Shard {
    pub(crate) fn new(
        worker: usize,
        fabric: Arc<FabricShared>,
        directory: Arc<ShardDirectory>,
        slots: Vec<PortSlot>,
        inbox: Receiver<Handoff>,
        seed: u64,
    ) -> Shard {
        let mut local = vec![None; fabric.ports()];
        for (i, s) in slots.iter().enumerate() {
            local[s.global] = Some(i);
        }
        let rx = (0..BATCH).map(|_| fabric.pool.get()).collect();
        let workers = fabric.workers();
        let mut pfc_switches: Vec<(usize, usize)> = Vec::new();
        for (i, s) in slots.iter().enumerate() {
            if fabric.switches[s.switch].pfc && !pfc_switches.iter().any(|&(sw, _)| sw == s.switch) {
                pfc_switches.push((s.switch, i));
            }
        }
        Shard {
            worker,
            directory,
            slots,
            local,
            inbox,
            releases: BinaryHeap::new(),
            clock: Clock::get(),
            rng: fastrand::Rng::with_seed(seed ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            frames: FrameStack::new(fabric.pool.clone()),
            rx,
            meta: vec![RecvMeta::default(); BATCH],
            arrivals: Vec::with_capacity(BATCH * 4),
            ingressing: Vec::with_capacity(BATCH * 4),
            tx: Vec::with_capacity(BATCH * 4),
            outbox: (0..workers).map(|_| Vec::with_capacity(BATCH)).collect(),
            replicas: Vec::new(),
            spawned: Vec::new(),
            started: Started::default(),
            portless_passes: 0,
            pfc_due: Vec::new(),
            pfc_switches,
            refreshed: Vec::new(),
            p4_scratch: fabric
                .switches
                .iter()
                .map(|s| s.p4.as_ref().map(|p| p.scratch()))
                .collect(),
            p4_edits_seen: vec![u64::MAX; fabric.switches.len()],
            link_changes_seen: 0,
            link_changes: Vec::new(),
            held: BinaryHeap::new(),
            held_seq: 0,
            tunnel_held: 0,
            next_publish: 0,
            publish_seen: 0,
            borrowed: false,
            borrowed_from: Vec::with_capacity(workers),
            stopped: false,
            fabric,
        }
    }

    /// Reads port `s` (up to a few batches) into `arrivals`.
    fn receive(&mut self, s: usize) {
        for _ in 0..RX_BATCHES_PER_RUN {
            let map = self.clock.realtime_map();
            let n = match self.slots[s].port.recv_batch(&mut self.rx, &mut self.meta, &map) {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(port = %self.slots[s].name, "receive failed: {e}");
                    0
                }
            };
            let now = self.clock.now_ns();
            for i in 0..n {
                let fresh = self.frames.get();
                let mut frame = std::mem::replace(&mut self.rx[i], fresh);
                if matches!(self.slots[s].port, Port::Tunnel(..)) {
                    self.arrive_from_tunnel(s, frame, now);
                    continue;
                }
                if !frame.arrival_known {
                    frame.arrival_ns = now;
                }
                // The host emulates nothing: its link's rate and delay towards the switch are
                // applied here (the egress schedule holds the frame until it has arrived).
                if self.slots[s].inbound.is_impaired() {
                    self.carry_impaired(s, frame);
                    continue;
                }
                frame.arrival_ns = self.slots[s].inbound.arrival_ns(frame.arrival_ns, frame.len as u64);
                self.arrivals.push((frame.arrival_ns, s, frame));
            }
            if n < BATCH {
                return;
            }
        }
    }

    /// Carries `frame`, which the host of slot `s` sent, over its impaired link: lost,
    /// corrupted, duplicated, delayed as the link judges. Frames whose delays may reorder them
    /// wait in `held` until they arrive, so that they reach ingress in arrival order.
    fn carry_impaired(&mut self, s: usize, mut frame: FrameBuf) {
        let slot = &mut self.slots[s];
        let c = slot.inbound.carry(frame.arrival_ns, frame.len);
        let v = c.verdict;
        if v.lost {
            frame.arrival_ns = c.sent_ns + slot.inbound.delay_ns();
            slot.counters.totals.rx_link_lost += 1;
            return self.drop_at(s, frame, DropReason::InjectedLoss, false);
        }
        v.corrupt_frame(frame.bytes_mut());
        let t = &mut slot.counters.totals;
        t.rx_link_duplicated += u64::from(v.duplicate);
        t.rx_link_corrupted += u64::from(v.corrupt.is_some());
        t.rx_link_reordered += u64::from(v.reordered);
        frame.arrival_ns = c.sent_ns + v.delay_ns;
        let copy = v
            .duplicate
            .then(|| slot.inbound.carry_copy(frame.len))
            .filter(|cv| !cv.lost)
            .map(|cv| {
                let mut copy = frame.duplicate();
                cv.corrupt_frame(copy.bytes_mut());
                copy.arrival_ns = c.sent_ns + cv.delay_ns;
                copy
            });
        for f in std::iter::once(frame).chain(copy) {
            if self.slots[s].inbound.reorders() {
                self.hold(s, f);
            } else {
                self.arrivals.push((f.arrival_ns, s, f));
            }
        }
    }

    /// Keeps `frame`, arriving on slot `s` at its `arrival_ns`, until then: frames held reach
    /// ingress in arrival order, those of equal times in the order held.
    fn hold(&mut self, s: usize, frame: FrameBuf) {
        self.held_seq += 1;
        self.held.push(Reverse(Held {
            arrival_ns: frame.arrival_ns,
            seq: self.held_seq,
            slot: s,
            frame,
        }));
    }

    /// Takes `frame` from the tunnel of slot `s` at lab time `now`: it arrives at the time its
    /// stamp says, as over an in-process link, and waits in `held` until then. One that came
    /// after it is counted late and arrives when it came (a link whose far end is on another
    /// machine cannot deliver before the machines' network does, and its INT says so). One
    /// whose tag does not check (not from the peer), whose time is outside the window around
    /// the lab clock, or that would hold more than [`MAX_TUNNEL_HELD`] frames is dropped and
    /// counted.
    fn arrive_from_tunnel(&mut self, s: usize, mut frame: FrameBuf, now: u64) {
        // Late is against when the kernel received it, not when this worker read it: the
        // worker's own lateness is counted as it releases frames.
        let received = if frame.arrival_known {
            frame.arrival_ns.min(now)
        } else {
            now
        };
        let slot = &mut self.slots[s];
        let Port::Tunnel(_, seal) = &slot.port else {
            return;
        };
        let at = match seal.unstamp(&mut frame) {
            Ok(at) => at,
            Err(why) => {
                let t = &mut slot.counters.totals;
                match why {
                    Unsealed::Unstamped => t.tunnel_unstamped += 1,
                    Unsealed::Forged => t.tunnel_forged += 1,
                }
                frame.arrival_ns = now;
                return self.drop_at(s, frame, DropReason::Malformed, false);
            }
        };
        // A genuine frame arrives at most its link's delay after now (twice, for a link whose
        // delay was just lowered) and is never as late as the window; anything else is a copy
        // sent again or a clock gone wrong.
        let window = TUNNEL_WINDOW_NS + 2 * slot.inbound.delay_ns();
        if at > now.saturating_add(window) || at.saturating_add(TUNNEL_WINDOW_NS) < received {
            slot.counters.totals.tunnel_out_of_window += 1;
            frame.arrival_ns = now;
            return self.drop_at(s, frame, DropReason::Malformed, false);
        }
        frame.arrival_known = true;
        if at < received {
            let t = &mut slot.counters.totals;
            t.tunnel_late += 1;
            t.tunnel_late_max_ns = t.tunnel_late_max_ns.max(received - at);
            frame.arrival_ns = received;
            self.arrivals.push((received, s, frame));
            return;
        }
        frame.arrival_ns = at;
        if at <= now {
            self.arrivals.push((at, s, frame));
        } else if self.tunnel_held >= MAX_TUNNEL_HELD {
            slot.counters.totals.tunnel_held_full += 1;
            frame.arrival_ns = now;
            self.drop_at(s, frame, DropReason::BufferFull, false);
        } else {
            self.tunnel_held += 1;
            self.hold(s, frame);
        }
    }

    /// Moves the held frames that have arrived by `now` to ingress.
    fn release_held(&mut self, now: u64) {
        while self.held.peek().is_some_and(|Reverse(h)| h.arrival_ns <= now) {
            if let Some(Reverse(h)) = self.held.pop() {
                if matches!(self.slots[h.slot].port, Port::Tunnel(..)) {
                    self.tunnel_held -= 1;
                }
                self.arrivals.push((h.arrival_ns, h.slot, h.frame));
            }
        }
    }

    /// Runs ingress on frame `frame` arriving at slot `s`.
    fn ingress(&mut self, s: usize, mut frame: FrameBuf) {
        if !self.slots[s].link_up {
            return self.drop_at(s, frame, DropReason::LinkDown, false);
        }
        let slot = &mut self.slots[s];
        frame.ingress = slot.index as u16;
        slot.counters.totals.rx_frames += 1;
        slot.counters.totals.rx_bytes += frame.len as u64;
        if let Some(c) = &mut slot.capture {
            c.inbound(frame.arrival_ns, frame.bytes());
        }
        if frame.truncated {
            return self.drop_at(s, frame, DropReason::Oversize, false);
        }
        if is_mac_control(&frame) {
            return self.mac_control(s, frame);
        }
        let switch = &self.fabric.switches[slot.switch];
        if switch.p4.is_some() {
            self.ingress_p4(s, frame, None);
            // A PSA frame sent to the recirculation port comes back at once.
            return self.run_spawned();
        }
        let (verdict, notes) = switch.pipeline.ingress(&mut frame);
        let base = self.fabric.base[self.slots[s].switch];
        if notes.malformed_int {
            self.slots[s].counters.totals.int_malformed += 1;
        }
        match verdict {
            Verdict::Forward(p) => self.route(s, base + p, frame),
            Verdict::Reply => {
                let g = self.slots[s].global;
                self.route(s, g, frame);
            }
            Verdict::Flood => {
                let from = self.slots[s].index;
                let ports = self.fabric.switch_ports(self.slots[s].switch);
                for p in (0..ports).filter(|&p| p != from) {
                    let mut copy = self.frames.get();
                    copy.copy_from(&frame);
                    self.route(s, base + p, copy);
                }
                self.frames.put(frame);
            }
            Verdict::Drop(why) => self.drop_at(s, frame, why, false),
        }
    }

    /// A MAC control frame that arrived at slot `s`: a PFC frame pauses (or resumes) the
    /// priorities it names on this port's transmitter from its arrival; others (802.3x PAUSE)
    /// are counted and dropped. Neither is forwarded: they belong to the link.
    fn mac_control(&mut self, s: usize, frame: FrameBuf) {
        match PfcFrame::new_checked(frame.bytes()) {
            Ok(pfc) => {
                let at_ps = frame.arrival_ns * 1000;
                let before = self.slots[s].queue.next_event_ns();
                // Transmissions due before the pause arrived have started.
                self.start_due(s, Until::before_ps(at_ps));
                let slot = &mut self.slots[s];
                pause_port(&mut slot.queue, &mut slot.counters, &pfc, at_ps);
                self.rearm(s, before);
            }
            Err(_) => self.slots[s].counters.totals.mac_control_ignored += 1,
        }
        self.frames.put(frame);
    }

    /// Runs a switch's P4 program on frame `frame` arriving at slot `s` (a recirculated frame
    /// with what it kept, `carry`).
    fn ingress_p4(&mut self, s: usize, mut frame: FrameBuf, carry: Option<&Carry>) {
        let (sw, index) = (self.slots[s].switch, self.slots[s].index);
        let p4 = self.fabric.switches[sw].p4.as_ref().expect("a P4 switch");
        let work = self.p4_scratch[sw].as_mut().expect("a P4 switch's scratch");
        let r = p4.ingress(&mut frame, index, work, carry);
        // An ingress clone is queued before the original, as simple_switch queues it.
        if let Some(session) = r.clone {
            let mut copy = self.frames.get();
            if p4.clone_of(&frame, &mut copy, work) {
                copy.p4_priority = Some(r.priority);
                self.send_to_session(s, sw, session, copy);
            } else {
                self.drop_at(s, copy, DropReason::P4Drop, false);
            }
        }
        match r.verdict {
            P4Verdict::Forward(p) => {
                let base = self.fabric.base[sw];
                self.route(s, base + p, frame)
            }
            P4Verdict::Multicast(g) => self.multicast(s, sw, g, frame, intlab_p4::INSTANCE_REPLICATION),
            P4Verdict::Drop => self.drop_at(s, frame, DropReason::P4Drop, false),
            P4Verdict::NoPort(p) => self.portless(s, sw, p, frame, carry.is_some()),
        }
    }

    /// Applies to this shard's queues the packet rates and depths that a P4 switch's control
    /// plane set (simple_switch's `set_queue_rate` and `set_queue_depth`), when it has changed.
    fn apply_queue_settings(&mut self) {
        for sw in 0..self.p4_edits_seen.len() {
            let Some(p4) = self.fabric.switches[sw].p4.as_ref() else {
                continue;
            };
            let edits = p4.datapath().edits();
            if self.p4_edits_seen[sw] == edits {
                continue;
            }
            self.p4_edits_seen[sw] = edits;
            let control = p4.datapath().control();
            for slot in self.slots.iter_mut().filter(|s| s.switch == sw) {
                let port = p4.p4_port(slot.index);
                for prio in 0..8 {
                    slot.queue.set_priority_rate(prio, control.queues.rate(port, prio));
                    slot.queue.set_priority_depth(prio, control.queues.depth(port, prio));
                }
            }
        }
    }

    /// Takes the link changes posted for this shard's ports since its last run, and makes
    /// those due by now, each as of its time; returns when the next is due.
    fn apply_link_changes(&mut self) -> Option<u64> {
        let posted = self.fabric.link_changes_posted.load(Ordering::Acquire);
        if posted != self.link_changes_seen {
            self.link_changes_seen = posted;
            let mine = std::mem::take(
                &mut *self.fabric.link_changes[self.worker]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            for (global, at, change) in mine {
                if let Some(s) = self.local.get(global).copied().flatten() {
                    let k = self.link_changes.partition_point(|(t, _, _)| *t <= at);
                    self.link_changes.insert(k, (at, s, change));
                }
            }
        }
        let now = self.clock.now_ns();
        let due = self.link_changes.partition_point(|(t, _, _)| *t <= now);
        for (at, s, change) in self.link_changes.drain(..due).collect::<Vec<_>>() {
            self.change_link(s, change, at);
        }
        self.link_changes.first().map(|(t, _, _)| *t)
    }

    /// Changes slot `s`'s link as of lab time `at`: frames due to start before then start as
    /// it was; a link that goes down loses the frames on it.
    fn change_link(&mut self, s: usize, c: crate::LinkChange, at: u64) {
        let before = self.slots[s].queue.next_event_ns();
        self.start_due(s, Until::now(at));
        let slot = &mut self.slots[s];
        if let Some(rate) = c.rate {
            slot.queue.set_rate(rate);
            slot.inbound.set_rate(rate);
            slot.egress.rate_kbps = u32::try_from(rate.bps() / 1000).unwrap_or(u32::MAX);
        }
        if let Some(delay) = c.delay {
            slot.queue.set_delay(delay);
            slot.inbound.set_delay(delay);
        }
        if let Some(buffer) = c.buffer {
            slot.queue.set_buffer(buffer.0);
        }
        if let Some(ecn) = c.ecn {
            slot.egress.red = ecn.map(crate::tm::Red::new);
        }
        if let Some(spec) = c.impair {
            slot.queue.change_impairment(spec);
        }
        if let Some(spec) = c.impair_inbound {
            slot.inbound.change_impairment(spec);
        }
        match c.up {
            Some(false) if slot.link_up => {
                slot.link_up = false;
                let cut: Vec<FrameBuf> = slot.queue.cut(at).collect();
                for frame in cut {
                    self.drop_at(s, frame, DropReason::LinkDown, true);
                }
            }
            Some(up) => self.slots[s].link_up = up,
            None => {}
        }
        self.rearm(s, before);
    }

    /// A frame sent to P4 port `port`, which no interface has: as simple_switch, egress runs on
    /// it (at once: no queue, no wire), and it is lost unless egress recirculates it (PSA's
    /// `PSA_PORT_RECIRCULATE`, or a v1model program's recirculation port); a frame that keeps
    /// coming back is dropped after [`MAX_PORTLESS_RECIRCULATIONS`] passes in a row (`again`:
    /// this pass came from one).
    fn portless(&mut self, s: usize, sw: usize, port: u16, mut frame: FrameBuf, again: bool) {
        self.portless_passes = if again { self.portless_passes + 1 } else { 1 };
        if self.portless_passes > MAX_PORTLESS_RECIRCULATIONS {
            return self.drop_at(s, frame, DropReason::P4Drop, false);
        }
        let p4 = self.fabric.switches[sw].p4.as_ref().expect("a P4 switch");
        let work = self.p4_scratch[sw].as_mut().expect("a P4 switch's scratch");
        let mut clone = None;
        let frames = &mut self.frames;
        let egress = p4.portless_pass(&mut frame, port, work, &mut || frames.get(), &mut clone);
        if let Some((session, copy)) = clone {
            self.spawned.push(Spawned::Clone(sw, session, copy));
        }
        match egress {
            P4Egress::Recirculate(carry) => {
                self.slots[s].counters.totals.p4_recirculated += 1;
                self.spawned.push(Spawned::Recirculate(s, carry, frame));
            }
            P4Egress::Drop => self.drop_at(s, frame, DropReason::P4Drop, false),
            // PSA_PORT_RECIRCULATE is where egress sends a frame to recirculate: none other.
            P4Egress::Send if port == intlab_p4::PSA_RECIRCULATE_PORT => {
                self.drop_at(s, frame, DropReason::P4Drop, false)
            }
            P4Egress::Send => self.drop_at(s, frame, DropReason::P4NoPort, false),
        }
    }

    /// Sends a clone to its session's port and multicast group.
    fn send_to_session(&mut self, s: usize, sw: usize, session: Session, frame: FrameBuf) {
        let p4 = self.fabric.switches[sw].p4.as_ref().expect("a P4 switch");
        let port = session.port.and_then(|p| p4.port_index(p));
        match (session.group, port) {
            (Some(g), Some(p)) => {
                let mut copy = self.frames.get();
                copy.copy_from(&frame);
                copy.p4 = frame.p4.clone();
                self.multicast(s, sw, g, copy, 0);
                let base = self.fabric.base[sw];
                self.route(s, base + p, frame);
            }
            (Some(g), None) => self.multicast(s, sw, g, frame, 0),
            (None, Some(p)) => {
                let base = self.fabric.base[sw];
                self.route(s, base + p, frame);
            }
            (None, None) => self.drop_at(s, frame, DropReason::P4NoPort, false),
        }
    }

    /// A copy of `frame` for each port of multicast group `g` of switch `sw`; as replicas
    /// (`instance_type`, when not 0) or keeping what they are (a clone's copies).
    fn multicast(&mut self, s: usize, sw: usize, g: u16, frame: FrameBuf, instance_type: u32) {
        let p4 = self.fabric.switches[sw].p4.as_ref().expect("a P4 switch");
        p4.group(g, &mut self.replicas);
        let base = self.fabric.base[sw];
        let replicas = std::mem::take(&mut self.replicas);
        for &(p, rid) in &replicas {
            let copy = self.replica_of(&frame, rid, instance_type);
            self.route(s, base + p, copy);
        }
        self.replicas = replicas;
        self.frames.put(frame);
    }

    /// A copy of `frame` and its P4 state, as multicast replica `rid` (of `instance_type`, or
    /// of the frame's own when 0).
    fn replica_of(&mut self, frame: &FrameBuf, rid: u16, instance_type: u32) -> FrameBuf {
        let mut copy = self.frames.get();
        copy.copy_from(frame);
        crate::pipeline::replica_state(frame, &mut copy, rid, instance_type);
        copy
    }

    /// Sends `frame` towards egress port `g`: queued here, or handed to its worker.
    fn route(&mut self, from_slot: usize, g: GlobalPort, frame: FrameBuf) {
        if let Some(s) = self.local[g] {
            return self.enqueue(s, frame);
        }
        self.outbox[self.fabric.owner[g]].push((from_slot, Handoff::Egress { port: g, frame }));
    }

    fn enqueue(&mut self, s: usize, frame: FrameBuf) {
        let before = self.slots[s].queue.next_event_ns();
        let until = self.slots[s].queue.before_arrival_of(&frame);
        self.start_due(s, until);
        let sw = self.slots[s].switch;
        let mmu = self.fabric.switches[sw].mmu();
        let mut out = std::mem::take(&mut self.started);
        let refused = self.slots[s]
            .view(self.fabric.capture_drops)
            .enqueue(frame, mmu, &mut out.pfc);
        for (sig, at) in out.pfc.drain(..) {
            self.pfc_due.push((sw, sig, at, s));
        }
        self.started = out;
        if let Some(frame) = refused {
            self.frames.put(frame);
        }
        self.rearm(s, before);
    }

    /// Sends the PFC frames the shared buffers asked for, each on the port whose upstream it
    /// pauses or resumes (ahead of that port's queues).
    fn send_pfc(&mut self) {
        while let Some((sw, sig, at_ns, from)) = self.pfc_due.pop() {
            let mut frame = self.frames.get();
            match pfc_frame(self.fabric.switches[sw].node_id, &sig).emit(frame.buffer_mut()) {
                Ok(len) => frame.len = len,
                Err(e) => {
                    tracing::warn!("building a PFC frame: {e}");
                    self.frames.put(frame);
                    continue;
                }
            }
            frame.arrival_ns = at_ns;
            frame.arrival_known = true;
            frame.ingress = sig.port as u16;
            frame.layout = None;
            let g = self.fabric.base[sw] + sig.port;
            self.route(from, g, frame);
        }
    }

    /// Sends again the XOFFs of this shard's PFC switches that would otherwise run out while
    /// their ingress is still over its threshold; returns when the next is due.
    fn refresh_pauses(&mut self, now: u64) -> Option<u64> {
        let mut next = None;
        for i in 0..self.pfc_switches.len() {
            let (sw, slot) = self.pfc_switches[i];
            let Some(mmu) = self.fabric.switches[sw].mmu() else {
                continue;
            };
            let due = mmu.refresh(now, &mut self.refreshed);
            next = [next, due].into_iter().flatten().min();
            for sig in self.refreshed.drain(..) {
                self.pfc_due.push((sw, sig, now, slot));
            }
        }
        self.send_pfc();
        next
    }

    /// Puts slot `s`'s next event on the timer if it changed from `before`.
    fn rearm(&mut self, s: usize, before: Option<u64>) {
        let next = self.slots[s].queue.next_event_ns();
        if let Some(t) = next.filter(|_| next != before) {
            self.releases.push(Reverse((t, s)));
        }
    }

    /// Starts the transmission of every frame of slot `s` due before `until`: egress runs on
    /// each (ECN, INT, or the P4 program) and decides its length on the wire.
    fn start_due(&mut self, s: usize, until: Until) {
        let sw = self.slots[s].switch;
        let switch = &self.fabric.switches[sw];
        let mmu = switch.mmu();
        let mut out = std::mem::take(&mut self.started);
        // What P4 egress made, in order: clones, and recirculations (whose frames the engine
        // hands back in `out.diverted`, in the same order).
        let mut made: Vec<Result<(Session, FrameBuf), Carry>> = Vec::new();
        {
            let frames = &mut self.frames;
            let rng = &mut self.rng;
            let mut work = self.p4_scratch[sw].as_mut();
            let mut stage = |d: &mut Dequeued, egress: &EgressPort, counters: &mut PortCounters| {
                let Some((p4, work)) = switch.p4.as_ref().zip(work.as_deref_mut()) else {
                    egress::process(d, egress, counters, rng);
                    return EgressDecision::Send;
                };
                let mut clone = None;
                let e = p4.egress(d, egress, work, &mut || frames.get(), &mut clone);
                made.extend(clone.map(Ok));
                match e {
                    P4Egress::Send => {
                        egress::p4_sent(d, counters);
                        EgressDecision::Send
                    }
                    P4Egress::Drop => EgressDecision::Drop(DropReason::P4Drop),
                    P4Egress::Recirculate(carry) => {
                        counters.totals.p4_recirculated += 1;
                        made.push(Err(carry));
                        EgressDecision::Divert
                    }
                }
            };
            self.slots[s]
                .view(self.fabric.capture_drops)
                .start_due(until, mmu, &mut stage, &mut out);
        }
        let mut diverted = out.diverted.drain(..);
        for m in made {
            match m {
                Ok((session, copy)) => self.spawned.push(Spawned::Clone(sw, session, copy)),
                Err(carry) => {
                    let frame = diverted.next().expect("a frame for each recirculation");
                    self.spawned.push(Spawned::Recirculate(s, carry, frame));
                }
            }
        }
        drop(diverted);
        for (sig, at) in out.pfc.drain(..) {
            self.pfc_due.push((sw, sig, at, s));
        }
        for frame in out.freed.drain(..) {
            self.frames.put(frame);
        }
        self.started = out;
        self.run_spawned();
    }

    /// Sends on what P4 egress made: clones to their sessions, recirculated frames back into
    /// their switch's ingress.
    fn run_spawned(&mut self) {
        while let Some(sp) = self.spawned.pop() {
            match sp {
                Spawned::Clone(sw, session, frame) => {
                    let s = self.any_slot_of(sw);
                    self.send_to_session(s, sw, session, frame);
                }
                Spawned::Recirculate(s, carry, frame) => self.ingress_p4(s, frame, Some(&carry)),
            }
        }
    }

    /// A slot of switch `sw` this worker owns (the first), to send a switch's own frames from.
    fn any_slot_of(&self, sw: usize) -> usize {
        self.slots.iter().position(|sl| sl.switch == sw).unwrap_or(0)
    }

    /// Starts what is due on slot `s` and releases the frames that have crossed its link; they
    /// go to the far end.
    fn release(&mut self, s: usize) {
        let now = self.clock.now_ns();
        self.start_due(s, Until::now(now));
        let peer = self.fabric.peer[self.slots[s].global];
        let measure_from = self.fabric.measure_from.load(Ordering::Relaxed);
        let slot = &mut self.slots[s];
        let seal = match &slot.port {
            Port::Tunnel(_, seal) => Some(seal),
            _ => None,
        };
        while let Some(r) = slot.queue.release_due(now) {
            if r.release_ns >= measure_from {
                slot.counters.record_lateness(now.saturating_sub(r.due_ns));
            }
            let mut frame = r.frame;
            if is_mac_control(&frame) {
                // A switch's own PFC frame carries the time its buffer asked for it.
                slot.counters
                    .released_mac_control(frame.bytes(), frame.arrival_ns, r.release_ns);
            }
            // On an in-process link the frame arrives at the far end exactly now; over a
            // tunnel, at the time it carries.
            frame.arrival_ns = r.release_ns;
            frame.arrival_known = true;
            if seal.is_some_and(|seal| !seal.stamp(&mut frame, r.release_ns)) {
                slot.counters.drop(DropReason::Oversize);
                self.frames.put(frame);
                continue;
            }
            self.tx.push(frame);
        }
        self.rearm(s, None);
        if self.tx.is_empty() {
            return;
        }
        if let Some(far) = peer {
            for frame in self.tx.drain(..) {
                match self.local[far] {
                    Some(f) => self.arrivals.push((frame.arrival_ns, f, frame)),
                    None => self.outbox[self.fabric.owner[far]].push((s, Handoff::Arrive { port: far, frame })),
                }
            }
            return;
        }
        let slot = &mut self.slots[s];
        let sent = match slot.port.send_batch(&self.tx) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(port = %slot.name, "send failed: {e}");
                0
            }
        };
        for (k, f) in self.tx.drain(..).enumerate() {
            if k >= sent {
                slot.counters.totals.tx_frames -= 1;
                slot.counters.totals.tx_bytes -= f.len as u64;
                slot.counters.drop(DropReason::TxError);
            }
            self.frames.put(f);
        }
        if self.borrowed {
            // The kernel delivered those frames before send returned, and whatever it answers
            // at once (a ping's reply, a TCP ACK) is on the port already: read here, it goes on
            // without waking this shard's own worker.
            self.receive(s);
        }
    }

    fn drop_at(&mut self, s: usize, frame: FrameBuf, why: DropReason, outbound: bool) {
        let frame = self.slots[s]
            .view(self.fabric.capture_drops)
            .dropped(frame, why, outbound);
        self.frames.put(frame);
    }

    /// Runs ingress on what arrived, earliest first, until nothing is left (a frame released
    /// onto a local link arrives in the same run).
    fn ingress_arrivals(&mut self) {
        while !self.arrivals.is_empty() {
            std::mem::swap(&mut self.arrivals, &mut self.ingressing);
            self.ingressing.sort_unstable_by_key(|a| (a.0, a.1));
            let mut batch = std::mem::take(&mut self.ingressing);
            for (_, s, frame) in batch.drain(..) {
                self.ingress(s, frame);
            }
            self.ingressing = batch;
        }
        self.send_pfc();
    }

    /// Hands every frame for other workers over and wakes each of them once; the shard of a
    /// worker long asleep takes them on this thread first ([`SharedShard::run_here`]), and that
    /// worker goes on `borrowed`, to be woken once this run is done.
    fn flush_outbox(&mut self, borrowed: &mut Vec<usize>) {
        for w in 0..self.outbox.len() {
            if self.outbox[w].is_empty() {
                continue;
            }
            let (tx, waker) = &self.fabric.inboxes[w];
            for (from, h) in self.outbox[w].drain(..) {
                if let Err(e) = tx.try_send(h) {
                    // The other worker is too far behind: the frame is lost where it came in.
                    self.slots[from].counters.drop(DropReason::HandoffFull);
                    self.frames.put(e.into_inner().into_frame());
                }
            }
            // A worker asleep for a while has its ports run here, at once. It is woken all the
            // same: for a flow that goes on it takes its share again (it is then busy, and no
            // longer borrowed), and a worker that polls or ran a moment ago keeps its work.
            let idle = waker.worker_idle_ns(self.clock.now_ns());
            if idle.is_some_and(|t| t >= BORROW_AFTER_IDLE_NS)
                && let Some(other) = self.directory.get(w)
            {
                other.run_here();
                if !borrowed.contains(&w) {
                    borrowed.push(w);
                }
            } else {
                waker.wake();
            }
        }
    }

    /// Takes what other shards handed over: frames to queue, frames arriving on links.
    fn take_inbox(&mut self) {
        while let Ok(h) = self.inbox.try_recv() {
            match h {
                Handoff::Egress { port, frame } => match self.local[port] {
                    Some(s) => self.enqueue(s, frame),
                    None => self.frames.put(frame),
                },
                Handoff::Arrive { port, frame } => match self.local[port] {
                    Some(s) => self.arrivals.push((frame.arrival_ns, s, frame)),
                    None => self.frames.put(frame),
                },
            }
        }
    }

    /// Releases every frame due now, running ingress on what that delivers here.
    fn release_due(&mut self) {
        loop {
            let now = self.clock.now_ns();
            match self.next_release() {
                Some(t) if t <= now => {
                    let Some(Reverse((_, s))) = self.releases.pop() else {
                        break;
                    };
                    self.release(s);
                    self.ingress_arrivals();
                }
                _ => break,
            }
        }
    }

    fn publish(&mut self, with_trace: bool) {
        let now = self.clock.now_ns();
        for s in &mut self.slots {
            match s.port.take_rx_dropped() {
                Ok(n) => s.counters.drop_many(DropReason::RxOverflow, n),
                Err(e) => tracing::warn!(port = %s.name, "reading the kernel's drop count: {e}"),
            }
            for p in 0..PRIORITIES {
                s.counters.totals.pfc_paused_ns[p] = s.queue.paused_ns(p as u8, now);
            }
            s.counters.totals.pfc_watchdog_trips = s.queue.watchdog_trips();
            let switch = &self.fabric.switches[s.switch];
            // Poisoned only by another worker's panic, which the counters report; go on publishing.
            let mut p = switch
                .published
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            p[s.index] = PortSnapshot {
                queue_now: s.queue.occupancy(),
                ..s.counters.snapshot(&s.name, s.port.io_name(), with_trace, now)
            };
        }
    }

    fn next_release(&mut self) -> Option<u64> {
        while let Some(&Reverse((t, s))) = self.releases.peek() {
            if self.slots[s].queue.next_event_ns() == Some(t) {
                return Some(t);
            }
            self.releases.pop();
        }
        None
    }
}

impl Shard {
    /// Its ports' descriptors, each with its slot as the token.
    fn sources(&self) -> Vec<(RawFd, u32)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.port.poll_fd().map(|fd| (fd, i as u32)))
            .collect()
    }

    /// Does what is due: hand-offs, input on the ports `ready` names, releases, publication;
    /// returns when it next needs running.
    fn run(&mut self, ready: &[u32]) -> Option<u64> {
        self.apply_queue_settings();
        let link_change = self.apply_link_changes();
        self.take_inbox();
        for &token in ready {
            self.receive(token as usize);
        }
        self.release_held(self.clock.now_ns());
        self.ingress_arrivals();
        self.release_due();
        let refresh = if self.pfc_switches.is_empty() {
            None
        } else {
            self.refresh_pauses(self.clock.now_ns())
        };
        let mut borrowed = std::mem::take(&mut self.borrowed_from);
        self.flush_outbox(&mut borrowed);
        // What a borrowed shard answered at once (a ping's reply, a TCP ACK) came back here:
        // it goes on now, before the borrowed worker is woken (a wake-up of its vCPU would
        // otherwise come first).
        for _ in 0..BORROWED_ANSWER_ROUNDS {
            if borrowed.is_empty() || self.inbox.is_empty() {
                break;
            }
            self.take_inbox();
            self.ingress_arrivals();
            self.release_due();
            self.flush_outbox(&mut borrowed);
        }
        for &w in &borrowed {
            self.fabric.inboxes[w].1.wake();
        }
        borrowed.clear();
        self.borrowed_from = borrowed;
        let now = self.clock.now_ns();
        let requested = self.fabric.publish_request.load(Ordering::Acquire);
        if now >= self.next_publish || requested != self.publish_seen {
            self.publish(false);
            // A run killed later still leaves captures readable up to here.
            for c in self.slots.iter_mut().filter_map(|s| s.capture.as_mut()) {
                c.flush();
            }
            self.next_publish = now + PUBLISH_EVERY_NS;
            if requested != self.publish_seen {
                self.publish_seen = requested;
                self.fabric.publish_acks.fetch_add(1, Ordering::AcqRel);
            }
        }
        let next = self
            .next_release()
            .map_or(self.next_publish, |t| t.min(self.next_publish));
        let next = link_change.map_or(next, |t| t.min(next));
        let next = self.held.peek().map_or(next, |Reverse(h)| h.arrival_ns.min(next));
        Some(refresh.map_or(next, |r| r.min(next)))
    }

    /// The runtime stops: frames still queued are freed, captures flushed, counters published.
    fn stop(&mut self) {
        self.stopped = true;
        for s in &mut self.slots {
            for f in s.queue.drain() {
                self.frames.put(f);
            }
            if let Some(c) = &mut s.capture {
                c.flush();
            }
        }
        self.publish(true);
    }
}

/// Every worker's shard, for an idle worker's to be run by another (weak: each worker's task
/// owns its shard, and with it the ports' sockets).
pub(crate) struct ShardDirectory(Vec<OnceLock<Weak<SharedShard>>>);

impl ShardDirectory {
    /// A directory of `workers` workers, none of whose shards runs yet.
    pub(crate) fn new(workers: usize) -> ShardDirectory {
        ShardDirectory((0..workers).map(|_| OnceLock::new()).collect())
    }

    /// Worker `w` runs `shard`.
    pub(crate) fn register(&self, w: usize, shard: &Arc<SharedShard>) {
        self.0[w].get_or_init(|| Arc::downgrade(shard));
    }

    /// Worker `w`'s shard, while its worker runs.
    pub(crate) fn get(&self, w: usize) -> Option<Arc<SharedShard>> {
        self.0.get(w)?.get()?.upgrade()
    }
}

/// A shard as its worker runs it and as other workers may borrow it: a worker that hands
/// frames to a shard whose own worker is asleep runs the shard itself, so a frame crosses from
/// one worker's port to another's without waiting for that worker to wake (on a virtual
/// machine, tens of microseconds for a halted vCPU).
pub(crate) struct SharedShard(Mutex<Shard>);

impl SharedShard {
    pub(crate) fn new(shard: Shard) -> Arc<SharedShard> {
        Arc::new(SharedShard(Mutex::new(shard)))
    }

    fn lock(&self) -> MutexGuard<'_, Shard> {
        // A run that panicked left frames and counts, not broken invariants, behind.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shard, unless another thread is running it.
    fn try_lock(&self) -> Option<MutexGuard<'_, Shard>> {
        match self.0.try_lock() {
            Ok(s) => Some(s),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Runs the shard on the calling thread unless another thread is running it: what was
    /// handed to it, what is due, and what its ports answer at once to what it sends. The
    /// caller then wakes the shard's worker, which sets its own next deadline.
    pub(crate) fn run_here(&self) {
        let Some(mut shard) = self.try_lock().filter(|s| !s.stopped) else {
            return;
        };
        shard.borrowed = true;
        let _next_is_for_its_worker = shard.run(&[]);
        shard.borrowed = false;
        shard.fabric.borrowed_runs.fetch_add(1, Ordering::Relaxed);
    }
}

/// The runtime's task for a shard on its own worker.
pub(crate) struct ShardTask(pub(crate) Arc<SharedShard>);

impl Task for ShardTask {
    fn name(&self) -> &str {
        "switch shard"
    }

    fn sources(&self) -> Vec<(RawFd, u32)> {
        self.0.lock().sources()
    }

    fn run(&mut self, cx: &mut Context<'_>) -> Option<u64> {
        // Borrowed by another worker, which wakes this one when done: nothing to wait for
        // until then.
        self.0.try_lock()?.run(cx.ready)
    }

    fn stop(&mut self) {
        self.0.lock().stop();
    }
}

/// A frame P4 egress made.
#[derive(Debug)]
enum Spawned {
    /// An egress-to-egress clone of switch `.0`, for session `.1`.
    Clone(usize, Session, FrameBuf),
    /// A frame recirculated from slot `.0`'s egress, with what it keeps.
    Recirculate(usize, Carry, FrameBuf),
}
