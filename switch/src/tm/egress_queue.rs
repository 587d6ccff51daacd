//! One egress port's queues on an exact virtual line-rate schedule.
//!
//! A frame that arrives at `a` starts transmission at `s = max(a, end of the previous frame)`.
//! Egress (ECN, INT, a P4 program's egress control) runs on it at `s`, as on a switch whose
//! egress pipeline follows the traffic manager; only then is its length on the wire known, so
//! its transmission ends at `s + bits/B` of the frame egress made, and it reaches the far end
//! of the link `delay` later, which is when the worker releases it. The buffer holds frames as
//! they arrived (an INT hop added at egress takes wire time, not buffer space, as in an ASIC).
//! The schedule is kept in picoseconds so that rounding never adds up. Occupancy, the INT queue
//! length and txBytes all come from this schedule, never from when a thread happened to wake.
//!
//! A port has one FIFO per priority (802.1p, 0 to 7), served in strict priority, highest
//! first, or by deficit weighted round robin ([`EgressQueue::schedule`]), between frames (a
//! frame in transmission is never cut). A priority paused by PFC
//! ([`EgressQueue::pause`]) starts nothing until its pause ends; the others go on. MAC control
//! frames the switch sends (its PFC pauses) have a lane of their own ahead of every priority:
//! they take the transmitter at the next frame boundary, are never paused and take no buffer.
//! With a PFC watchdog, a priority held by a pause storm is let go and its frames dropped
//! ([`Dequeued::stormed`]) until the storm has passed.

use std::collections::VecDeque;

use int_format::pfc::PauseState;

use super::pfc_watchdog::{PfcWatchdog, StormEvent, StormState};
use super::scheduler::{Dwrr, Scheduler};
use crate::frame::FrameBuf;
use crate::impair::{ImpairmentSpec, LinkImpairment, Verdict};
use crate::units::{Nanos, Rate};

const PS_PER_NS: u64 = 1000;

/// Priorities of a port (802.1p): those a PFC frame addresses.
pub use int_format::pfc::PRIORITIES;
/// The lane of MAC control frames, after the priorities' FIFOs.
const CONTROL: usize = PRIORITIES;

/// A frame in the buffer, not yet started.
#[derive(Debug)]
struct Waiting {
    frame: FrameBuf,
    arrival_ps: u64,
    /// Bytes enqueued in its priority's FIFO up to and including this frame.
    cum_bytes: u64,
    /// Frames waiting (all priorities) when it arrived.
    enq_packets: u32,
}

/// The FIFO of one priority.
#[derive(Debug, Default)]
struct PriorityFifo {
    waiting: VecDeque<Waiting>,
    /// Bytes ever enqueued here.
    enqueued_bytes: u64,
    /// `cum_bytes` of the last frame started from here.
    started_cum_bytes: u64,
    /// PFC: nothing starts before its end (ps), unless the watchdog let the priority go.
    pause: PauseState,
    /// The PFC watchdog's view of it.
    storm: StormState,
    /// A packet rate it may not exceed (simple_switch's `set_queue_rate`): the time between
    /// two starts (ps), and when the next may start.
    gap_ps: Option<u64>,
    next_allowed_ps: u64,
    /// Packets it holds at most (`set_queue_depth`); more are tail-dropped.
    max_packets: Option<usize>,
}

impl PriorityFifo {
    /// Bytes waiting in it.
    fn bytes(&self) -> u64 {
        self.enqueued_bytes - self.started_cum_bytes
    }

    /// Frames and bytes in it that had arrived by `t_ps`.
    fn arrived_by(&self, t_ps: u64) -> (usize, u64) {
        let n = self.waiting.partition_point(|e| e.arrival_ps <= t_ps);
        let bytes = match n {
            0 => 0,
            n => self.waiting[n - 1].cum_bytes - self.started_cum_bytes,
        };
        (n, bytes)
    }

    /// The earliest its head may start, transmitter permitting (ps).
    fn ready_ps(&self) -> Option<u64> {
        let arrival = self.waiting.front()?.arrival_ps;
        let ready = arrival.max(self.storm.stormed_since().unwrap_or(self.pause.until()));
        Some(match self.gap_ps {
            Some(_) => ready.max(self.next_allowed_ps),
            None => ready,
        })
    }
}

/// A frame being transmitted or propagating on the link.
#[derive(Debug)]
struct OnWire {
    frame: FrameBuf,
    release_ps: u64,
}

/// A frame starting transmission, with the values its egress (ECN, INT hop, P4) needs. Hand
/// it back with [`EgressQueue::send`], [`EgressQueue::lose`] or [`EgressQueue::discard`]
/// before starting the next.
#[derive(Debug)]
pub struct Dequeued {
    /// The frame.
    pub frame: FrameBuf,
    /// Its priority.
    pub priority: u8,
    /// A MAC control frame of the switch's own (a PFC pause): no egress processing, no buffer.
    pub mac_control: bool,
    /// Its priority is in a pause storm: the PFC watchdog drops it.
    pub stormed: bool,
    /// When its transmission starts (ns): its egress timestamp.
    pub start_ns: u64,
    /// Bytes queued behind it (arrived, not yet started; every priority) when it started.
    pub qlen: u64,
    /// Bytes queued behind it in its own priority's FIFO when it started (what ECN marks on).
    pub priority_qlen: u64,
    /// Bytes transmitted on the port before it.
    pub tx_bytes_before: u64,
    /// When it was queued (ns; its arrival, kept in FIFO order).
    pub enqueued_ns: u64,
    /// Frames waiting when it was queued (v1model's `enq_qdepth`).
    pub enq_packets: u32,
    /// Frames waiting behind it when it started (v1model's `deq_qdepth`).
    pub deq_packets: u32,
    start_ps: u64,
}

/// A frame that has reached the far end of the link.
#[derive(Debug)]
pub struct Released {
    /// The frame.
    pub frame: FrameBuf,
    /// When it reached the far end (ns): end of transmission plus delay.
    pub release_ns: u64,
    /// When it was due to leave the queue (ns): `release_ns`, or the end of its serialization
    /// on a queue that releases then ([`EgressQueue::release_when_serialized`]).
    pub due_ns: u64,
}

/// A limit on the starts to make now, exclusive (ps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Until(u64);

impl Until {
    /// Every start up to and including `now_ns`.
    pub fn now(now_ns: u64) -> Until {
        Until((now_ns + 1) * PS_PER_NS)
    }

    /// Every start strictly before `t_ps`.
    pub fn before_ps(t_ps: u64) -> Until {
        Until(t_ps)
    }
}

/// Why a frame was not queued.
#[derive(Debug)]
pub enum Rejected {
    /// The buffer would overflow (tail drop); the frame is handed back.
    BufferFull(FrameBuf),
}

/// The queues of one egress port.
#[derive(Debug)]
pub struct EgressQueue {
    /// One per priority, then the MAC control lane.
    fifos: [PriorityFifo; PRIORITIES + 1],
    on_wire: VecDeque<OnWire>,
    rate: Rate,
    delay_ps: u64,
    buffer: u64,
    /// End of the last transmission started.
    tx_end_ps: u64,
    last_arrival_ps: u64,
    tx_bytes: u64,
    /// A frame has been started and not handed back yet.
    starting: bool,
    /// Wake the worker at each start, not only at releases (see [`EgressQueue::wake_at_starts`]).
    wake_at_starts: bool,
    /// Release frames as they finish serializing, a link's delay before they reach the far
    /// end (see [`EgressQueue::release_when_serialized`]).
    release_ahead: bool,
    /// The PFC watchdog's limits (`None`: pauses hold however long they last).
    watchdog: Option<PfcWatchdog>,
    /// Storms the watchdog declared.
    watchdog_trips: u64,
    /// Round robin between the priorities (`None`: strict priority).
    dwrr: Option<Dwrr>,
    /// What the link does to the frames it carries (`None`: it carries them as sent).
    impairment: LinkImpairment,
}

impl EgressQueue {
    /// A queue draining at `rate` into a link of `delay`, holding at most `buffer` bytes.
    pub fn new(rate: Rate, delay: Nanos, buffer: u64) -> EgressQueue {
        EgressQueue {
            fifos: Default::default(),
            on_wire: VecDeque::with_capacity(64),
            rate,
            delay_ps: delay.0 * PS_PER_NS,
            buffer,
            tx_end_ps: 0,
            last_arrival_ps: 0,
            tx_bytes: 0,
            starting: false,
            wake_at_starts: false,
            release_ahead: false,
            watchdog: None,
            watchdog_trips: 0,
            dwrr: None,
            impairment: LinkImpairment::default(),
        }
    }

    /// Chooses between the priorities with `scheduler`, for frames of at most `largest_frame`
    /// bytes (strict priority unless told otherwise).
    pub fn schedule(&mut self, scheduler: Scheduler, largest_frame: u64) {
        self.dwrr = match scheduler {
            Scheduler::Strict => None,
            Scheduler::Dwrr { weights } => Some(Dwrr::new(weights, largest_frame)),
        };
    }

    /// Watches the priorities for pause storms with `w`.
    pub fn watch_for_storms(&mut self, w: PfcWatchdog) {
        // A detection time of 0 would trip and restore at one instant for ever.
        self.watchdog = Some(PfcWatchdog {
            detect_ns: w.detect_ns.max(1),
            ..w
        });
    }

    /// Pause storms the watchdog has declared.
    pub fn watchdog_trips(&self) -> u64 {
        self.watchdog_trips
    }

    /// The watchdog's next event on any priority: its time (ps), priority and what it is.
    fn next_storm_event(&self) -> Option<(u64, usize, StormEvent)> {
        let w = self.watchdog.as_ref()?;
        self.fifos[..PRIORITIES]
            .iter()
            .enumerate()
            .filter_map(|(p, f)| {
                let e = f
                    .storm
                    .next(w, f.pause.until(), f.waiting.front().map(|x| x.arrival_ps))?;
                Some((e.at(), p, e))
            })
            .min_by_key(|e| e.0)
    }

    /// Carries out the watchdog's events due before `until` that come before the next start.
    /// A trip goes before a start at its instant (the frame it frees is dropped); a restore
    /// after one (what was due in the storm is dropped).
    fn watch(&mut self, until: Until) {
        while let Some((t, p, e)) = self.next_storm_event() {
            let start_first = self.next_start().is_some_and(|(s, _)| match e {
                StormEvent::Trip(_) => s < t,
                StormEvent::Restore(_) => s <= t,
            });
            if t >= until.0 || start_first {
                return;
            }
            self.fifos[p].storm.apply(e);
            if matches!(e, StormEvent::Trip(_)) {
                self.watchdog_trips += 1;
            }
        }
    }

    /// Makes [`EgressQueue::next_event_ns`] the next start when it comes before the next
    /// release: for a shared buffer, where a frame leaving frees space (and may end a pause)
    /// when it starts, not a link's delay later.
    pub fn wake_at_starts(&mut self) {
        self.wake_at_starts = true;
    }

    /// Releases each frame when its serialization ends rather than when it reaches the far
    /// end (its release time still says when that is): for a tunnel to another machine, whose
    /// network then has the link's delay to carry it in.
    pub fn release_when_serialized(&mut self) {
        self.release_ahead = true;
    }

    /// How long before its arrival at the far end a frame is released (ps).
    fn ahead_ps(&self) -> u64 {
        if self.release_ahead { self.delay_ps } else { 0 }
    }

    fn serialization_ps(&self, bytes: u64) -> u64 {
        (u128::from(bytes) * 8 * 1_000_000_000_000 / u128::from(self.rate.bps())) as u64
    }

    /// Bytes in the buffer (arrived, transmission not started). Exact at time `t` once every
    /// frame due to start by `t` has been started.
    pub fn occupancy(&self) -> u64 {
        self.fifos[..PRIORITIES].iter().map(PriorityFifo::bytes).sum()
    }

    /// Frames in the buffer, every priority.
    fn waiting(&self) -> usize {
        self.fifos[..PRIORITIES].iter().map(|f| f.waiting.len()).sum()
    }

    /// The time (ps) a frame arriving now is queued at: its arrival, kept in FIFO order.
    fn arrival_ps(&self, frame: &FrameBuf) -> u64 {
        (frame.arrival_ns * PS_PER_NS).max(self.last_arrival_ps)
    }

    /// The starts that come before `frame` joins the queue: those strictly before its arrival
    /// (a frame arriving as another starts counts as queued behind it). Start them
    /// ([`EgressQueue::start_due`]) before [`EgressQueue::enqueue`] so that occupancy and depths
    /// are the schedule's.
    pub fn before_arrival_of(&self, frame: &FrameBuf) -> Until {
        Until(self.arrival_ps(frame))
    }

    /// Queues `frame` with `priority` (0 to 7) as arrived at its `arrival_ns` (clamped so
    /// arrivals stay in FIFO order). Tail-drops when the bytes waiting plus this frame exceed
    /// the buffer.
    pub fn enqueue(&mut self, frame: FrameBuf, priority: u8) -> Result<(), Rejected> {
        let arrival_ps = self.arrival_ps(&frame);
        let len = frame.len as u64;
        if self.occupancy() + len > self.buffer {
            return Err(Rejected::BufferFull(frame));
        }
        let fifo = &self.fifos[usize::from(priority) % PRIORITIES];
        if fifo.max_packets.is_some_and(|m| fifo.waiting.len() >= m) {
            return Err(Rejected::BufferFull(frame));
        }
        self.last_arrival_ps = arrival_ps;
        let enq_packets = u32::try_from(self.waiting()).unwrap_or(u32::MAX);
        let fifo = &mut self.fifos[usize::from(priority) % PRIORITIES];
        fifo.enqueued_bytes += len;
        fifo.waiting.push_back(Waiting {
            frame,
            arrival_ps,
            cum_bytes: fifo.enqueued_bytes,
            enq_packets,
        });
        Ok(())
    }

    /// Queues a MAC control frame of the switch's own (a PFC pause) in the lane ahead of every
    /// priority: it goes at the next frame boundary from its arrival, paused by nothing, and
    /// takes no buffer space.
    pub fn enqueue_control(&mut self, frame: FrameBuf) {
        let lane = &mut self.fifos[CONTROL];
        // In order within its lane only: a pause does not wait for data stamped after it.
        let last = lane.waiting.back().map_or(0, |w| w.arrival_ps);
        let arrival_ps = (frame.arrival_ns * PS_PER_NS).max(last);
        lane.enqueued_bytes += frame.len as u64;
        lane.waiting.push_back(Waiting {
            frame,
            arrival_ps,
            cum_bytes: lane.enqueued_bytes,
            enq_packets: 0,
        });
    }

    /// Limits priority `priority` to `pps` packets a second (None: the line rate only), as
    /// simple_switch's `set_queue_rate` does.
    pub fn set_priority_rate(&mut self, priority: u8, pps: Option<u64>) {
        let fifo = &mut self.fifos[usize::from(priority) % PRIORITIES];
        fifo.gap_ps = pps.filter(|&r| r > 0).map(|r| 1_000_000_000_000 / r);
    }

    /// Limits priority `priority` to `packets` waiting (None: the buffer only), as
    /// simple_switch's `set_queue_depth` does.
    pub fn set_priority_depth(&mut self, priority: u8, packets: Option<u64>) {
        let fifo = &mut self.fifos[usize::from(priority) % PRIORITIES];
        fifo.max_packets = packets.map(|p| usize::try_from(p).unwrap_or(usize::MAX));
    }

    /// PFC: priority `priority` starts nothing from `at_ps` for `quanta` × 512 bit times at
    /// the port's rate (a later pause replaces an earlier one; 0 quanta resume at once). Start
    /// what is due before `at_ps` first ([`Until::before_ps`]): a pause does not reach back.
    pub fn pause(&mut self, priority: u8, at_ps: u64, quanta: u16) {
        let until = at_ps + int_format::pfc::pause_ps(quanta, self.rate.bps());
        let fifo = &mut self.fifos[usize::from(priority) % PRIORITIES];
        let held = fifo.pause.until() > at_ps;
        fifo.storm.on_pause(at_ps, quanta, held);
        fifo.pause.pause(at_ps, until);
    }

    /// Time priority `priority` has spent paused up to `now_ns` (ns).
    pub fn paused_ns(&self, priority: u8, now_ns: u64) -> u64 {
        self.fifos[usize::from(priority) % PRIORITIES]
            .pause
            .total(now_ns * PS_PER_NS)
            / PS_PER_NS
    }

    /// When priority `priority`'s current pause ends (ps; in the past when it is not paused).
    pub fn paused_until_ps(&self, priority: u8) -> u64 {
        self.fifos[usize::from(priority) % PRIORITIES].pause.until()
    }

    /// The next start: its time and lane. The transmitter frees at `tx_end`; at
    /// `max(tx_end, earliest ready head)` the control lane, else the priority the scheduler
    /// picks among those whose head is ready, goes.
    fn next_start(&self) -> Option<(u64, usize)> {
        let earliest = self.fifos.iter().filter_map(PriorityFifo::ready_ps).min()?;
        let at = earliest.max(self.tx_end_ps);
        let ready = |p: usize| self.fifos[p].ready_ps().is_some_and(|r| r <= at);
        if ready(CONTROL) {
            return Some((at, CONTROL));
        }
        let p = match &self.dwrr {
            None => (0..PRIORITIES).rev().find(|&p| ready(p))?,
            Some(d) => d.choose(|p| {
                let head = self.fifos[p].waiting.front().filter(|_| ready(p))?;
                Some(head.frame.len as u64)
            })?,
        };
        Some((at, p))
    }

    /// When the worker should next look at this queue (ns): the next release, or the earliest
    /// the next frame to start could be released (egress may make it longer, never earlier
    /// unless it shortens the frame).
    pub fn next_event_ns(&self) -> Option<u64> {
        let ahead = self.ahead_ps();
        let release = self.on_wire.front().map(|o| o.release_ps.saturating_sub(ahead));
        let start = self.next_start().and_then(|(s, p)| {
            if self.wake_at_starts {
                return Some(s);
            }
            let head = self.fifos[p].waiting.front()?;
            Some(s + self.serialization_ps(head.frame.len as u64) + self.delay_ps - ahead)
        });
        let storm = self.next_storm_event().map(|e| e.0);
        let t = [release, start, storm].into_iter().flatten().min()?;
        Some(t.div_ceil(PS_PER_NS))
    }

    /// Takes the next frame out of the buffer if its transmission starts before `until`.
    pub fn start_due(&mut self, until: Until) -> Option<Dequeued> {
        debug_assert!(!self.starting, "the previous frame was not handed back");
        self.watch(until);
        let (start_ps, p) = self.next_start()?;
        if start_ps >= until.0 || self.starting {
            return None;
        }
        let fifo = &mut self.fifos[p];
        let stormed = fifo.storm.stormed();
        let w = fifo.waiting.pop_front()?;
        fifo.started_cum_bytes = w.cum_bytes;
        if let Some(gap) = fifo.gap_ps {
            fifo.next_allowed_ps = start_ps + gap;
        }
        if let Some(d) = self.dwrr.as_mut().filter(|_| p < CONTROL) {
            d.sent(p, w.frame.len as u64, fifo.waiting.is_empty());
        }
        // Frames of every priority that had arrived when it started.
        let (mut behind, mut qlen, mut priority_qlen) = (0, 0, 0);
        for (q, (frames, bytes)) in self.fifos[..PRIORITIES]
            .iter()
            .map(|f| f.arrived_by(start_ps))
            .enumerate()
        {
            behind += frames;
            qlen += bytes;
            if q == p {
                priority_qlen = bytes;
            }
        }
        self.starting = true;
        Some(Dequeued {
            frame: w.frame,
            priority: p as u8,
            mac_control: p == CONTROL,
            stormed,
            start_ns: start_ps / PS_PER_NS,
            qlen,
            priority_qlen,
            tx_bytes_before: self.tx_bytes,
            enqueued_ns: w.arrival_ps / PS_PER_NS,
            enq_packets: w.enq_packets,
            deq_packets: u32::try_from(behind).unwrap_or(u32::MAX),
            start_ps,
        })
    }

    /// Puts the wire time of `d`, as egress left it, on the schedule; returns its release time.
    fn transmit(&mut self, d: &Dequeued) -> u64 {
        self.starting = false;
        let wire_len = d.frame.len as u64;
        self.tx_end_ps = d.start_ps + self.serialization_ps(wire_len);
        self.tx_bytes += wire_len;
        self.tx_end_ps + self.delay_ps
    }

    /// Transmits `d`: it is released when it reaches the far end.
    pub fn send(&mut self, d: Dequeued) {
        let release_ps = self.transmit(&d);
        self.put_on_wire(d.frame, release_ps);
    }

    /// Transmits `d` on a link that loses it: it takes its wire time and never arrives.
    pub fn lose(&mut self, d: Dequeued) -> FrameBuf {
        self.transmit(&d);
        d.frame
    }

    /// Drops `d` at egress: it takes no wire time.
    pub fn discard(&mut self, d: Dequeued) -> FrameBuf {
        self.starting = false;
        d.frame
    }

    /// Takes the next frame that has reached the far end by `now_ns` (or finished serializing,
    /// see [`EgressQueue::release_when_serialized`]).
    pub fn release_due(&mut self, now_ns: u64) -> Option<Released> {
        let due_ps = self.on_wire.front()?.release_ps.saturating_sub(self.ahead_ps());
        if due_ps > now_ns * PS_PER_NS {
            return None;
        }
        let o = self.on_wire.pop_front()?;
        Some(Released {
            frame: o.frame,
            release_ns: o.release_ps.div_ceil(PS_PER_NS),
            due_ns: due_ps.div_ceil(PS_PER_NS),
        })
    }

    /// The link impairs the frames it carries as `spec` says (replacing what it did), its draws
    /// seeded by `seed`.
    pub fn impair(&mut self, spec: ImpairmentSpec, seed: u64) {
        self.impairment.set(spec, seed);
        self.wake_for(spec);
    }

    /// The link impairs the frames it carries as `spec` says from now on, with draws of a
    /// stream of their own (so that a change does not replay the draws made before it).
    pub fn change_impairment(&mut self, spec: ImpairmentSpec) {
        self.impairment.change(spec);
        self.wake_for(spec);
    }

    /// A frame's own delay may be shorter than the link's (jitter, reordering): the worker
    /// must then look at each start, not only at the earliest release a start implies.
    fn wake_for(&mut self, spec: ImpairmentSpec) {
        if spec.reorders() {
            self.wake_at_starts = true;
        }
    }

    /// The link runs at `rate` from the next frame that starts.
    pub fn set_rate(&mut self, rate: Rate) {
        self.rate = rate;
    }

    /// The link's delay is `delay` for frames that start from now on; those on it keep theirs.
    pub fn set_delay(&mut self, delay: Nanos) {
        self.delay_ps = delay.0 * PS_PER_NS;
    }

    /// The buffer holds at most `bytes` from now on (frames already in it stay).
    pub fn set_buffer(&mut self, bytes: u64) {
        self.buffer = bytes;
    }

    /// Takes off the link every frame that had not reached its far end by `at_ns`: the link
    /// went down under them then.
    pub fn cut(&mut self, at_ns: u64) -> impl Iterator<Item = FrameBuf> + '_ {
        let arrived = self.on_wire.partition_point(|o| o.release_ps <= at_ns * PS_PER_NS);
        self.on_wire.drain(arrived..).map(|o| o.frame)
    }

    /// What the link does to `d`, which egress has finished with: lost, duplicated, its delay
    /// (corruption is done to the frame here).
    pub fn judge(&mut self, d: &mut Dequeued) -> Verdict {
        let delay_ns = self.delay_ps / PS_PER_NS;
        if d.mac_control {
            return Verdict {
                delay_ns,
                ..Verdict::default()
            };
        }
        let v = self.impairment.judge(d.frame.len, delay_ns);
        v.corrupt_frame(d.frame.bytes_mut());
        v
    }

    /// Transmits `d` as the link judged it ([`EgressQueue::judge`], not lost): released after
    /// its own delay, and a copy too when duplicated. Frames then reach the far end in the
    /// order of their release times, as netem's time-sorted queue delivers them.
    pub fn send_judged(&mut self, d: Dequeued, v: &Verdict) {
        let tx_end_ps = self.transmit(&d) - self.delay_ps;
        if v.duplicate {
            let copy = self.impairment.judge_duplicate(d.frame.len, self.delay_ps / PS_PER_NS);
            // A lost copy is simply not made; a corrupted one is flipped as the original.
            if !copy.lost {
                let mut frame = d.frame.duplicate();
                copy.corrupt_frame(frame.bytes_mut());
                self.put_on_wire(frame, tx_end_ps + copy.delay_ns * PS_PER_NS);
            }
        }
        self.put_on_wire(d.frame, tx_end_ps + v.delay_ns * PS_PER_NS);
    }

    /// Puts `frame` on the link to be released at `release_ps`, after every frame released no
    /// later.
    fn put_on_wire(&mut self, frame: FrameBuf, release_ps: u64) {
        let at = if self.on_wire.back().is_none_or(|o| o.release_ps <= release_ps) {
            self.on_wire.len()
        } else {
            self.on_wire.partition_point(|o| o.release_ps <= release_ps)
        };
        self.on_wire.insert(at, OnWire { frame, release_ps });
    }

    /// Frames held (waiting or on the link).
    pub fn len(&self) -> usize {
        self.fifos.iter().map(|f| f.waiting.len()).sum::<usize>() + self.on_wire.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes every frame out (at shutdown): those on the link, then each priority's.
    pub fn drain(&mut self) -> impl Iterator<Item = FrameBuf> + '_ {
        let waiting = self.fifos.iter_mut().flat_map(|f| f.waiting.drain(..).map(|w| w.frame));
        self.on_wire.drain(..).map(|o| o.frame).chain(waiting)
    }

    /// Bytes transmitted so far.
    pub fn tx_bytes(&self) -> u64 {
        self.tx_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FramePool;

    fn frame(pool: &FramePool, len: usize, arrival_ns: u64) -> FrameBuf {
        let mut f = pool.get();
        f.len = len;
        f.arrival_ns = arrival_ns;
        f
    }

    /// 1000 B at 8 Mb/s take exactly 1 ms.
    fn queue(buffer: u64, delay_ns: u64) -> EgressQueue {
        EgressQueue::new(Rate(8_000_000), Nanos(delay_ns), buffer)
    }

    /// What a worker does with an arrival: start what is due by then, then queue it.
    fn offer(q: &mut EgressQueue, f: FrameBuf, seen: &mut Vec<Seen>) -> Result<(), Rejected> {
        let until = q.before_arrival_of(&f);
        start_until(q, until, seen, 0);
        q.enqueue(f, 0)
    }

    /// What egress saw of one frame.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Seen {
        start_ns: u64,
        qlen: u64,
        tx_before: u64,
        enq: u32,
        deq: u32,
    }

    #[test]
    fn a_priority_given_a_packet_rate_and_depth_keeps_to_them() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        // 100-byte frames take 100 us at 8 Mb/s; 2,000 packets a second space starts 500 us.
        q.set_priority_rate(0, Some(2_000));
        q.set_priority_depth(0, Some(3));
        for _ in 0..3 {
            assert!(q.enqueue(frame(&pool, 100, 0), 0).is_ok());
        }
        assert!(matches!(
            q.enqueue(frame(&pool, 100, 0), 0),
            Err(Rejected::BufferFull(_))
        ));
        // Another priority has neither limit.
        for _ in 0..4 {
            assert!(q.enqueue(frame(&pool, 100, 0), 1).is_ok());
        }
        let mut starts = Vec::new();
        while let Some(d) = q.start_due(Until::now(10_000_000)) {
            starts.push((d.priority, d.start_ns));
            q.send(d);
        }
        let mine: Vec<u64> = starts.iter().filter(|s| s.0 == 0).map(|s| s.1).collect();
        assert_eq!(mine.len(), 3);
        for w in mine.windows(2) {
            assert!(w[1] - w[0] >= 500_000, "{starts:?}");
        }
        // Lifted, the line rate alone paces it again.
        q.set_priority_rate(0, None);
        q.set_priority_depth(0, None);
        for _ in 0..4 {
            assert!(q.enqueue(frame(&pool, 100, 20_000_000), 0).is_ok());
        }
        let mut last = None;
        while let Some(d) = q.start_due(Until::now(30_000_000)) {
            if let Some(l) = last {
                assert_eq!(d.start_ns - l, 100_000);
            }
            last = Some(d.start_ns);
            q.send(d);
        }
    }

    /// Starts every frame due by `now_ns`, each made `grow` bytes longer by egress.
    fn start_all(q: &mut EgressQueue, now_ns: u64, seen: &mut Vec<Seen>, grow: usize) {
        start_until(q, Until::now(now_ns), seen, grow);
    }

    fn start_until(q: &mut EgressQueue, until: Until, seen: &mut Vec<Seen>, grow: usize) {
        while let Some(mut d) = q.start_due(until) {
            seen.push(Seen {
                start_ns: d.start_ns,
                qlen: d.qlen,
                tx_before: d.tx_bytes_before,
                enq: d.enq_packets,
                deq: d.deq_packets,
            });
            d.frame.len += grow;
            q.send(d);
        }
    }

    #[test]
    fn a_tunnel_queue_releases_frames_as_they_finish_serializing() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 50_000);
        q.release_when_serialized();
        let mut seen = vec![];
        offer(&mut q, frame(&pool, 1000, 10), &mut seen).unwrap();
        assert_eq!(q.next_event_ns(), Some(10 + 1_000_000), "serialized, not arrived");
        start_all(&mut q, 1_000_009, &mut seen, 0);
        assert!(q.release_due(1_000_009).is_none());
        let r = q.release_due(1_000_010).expect("released once serialized");
        assert_eq!(r.release_ns, 1_050_010, "still says when it reaches the far end");
        assert_eq!(r.due_ns, 1_000_010, "and when it was due to leave");
    }

    #[test]
    fn departures_follow_the_line_rate_exactly() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 50_000);
        let mut seen = vec![];
        for _ in 0..4 {
            offer(&mut q, frame(&pool, 1000, 10), &mut seen).unwrap();
        }
        // The first ends at 10 ns + 1 ms and arrives 50 us later.
        assert_eq!(q.next_event_ns(), Some(10 + 1_000_000 + 50_000));
        start_all(&mut q, 1_049_999, &mut seen, 0);
        assert!(q.release_due(1_049_999).is_none());
        assert_eq!(q.release_due(1_050_010).map(|r| r.release_ns), Some(1_050_010));
        start_all(&mut q, 10_000_000, &mut seen, 0);
        let starts: Vec<u64> = seen.iter().map(|s| s.start_ns).collect();
        assert_eq!(starts, vec![10, 1_000_010, 2_000_010, 3_000_010]);
        let qlens: Vec<u64> = seen.iter().map(|s| s.qlen).collect();
        assert_eq!(
            qlens,
            vec![3000, 2000, 1000, 0],
            "a burst steps down one frame at a time"
        );
        let tx: Vec<u64> = seen.iter().map(|s| s.tx_before).collect();
        assert_eq!(tx, vec![0, 1000, 2000, 3000]);
        // In packets, as v1model counts: arriving together, each finds the ones before it
        // waiting, and leaves behind the ones after it.
        let depths: Vec<(u32, u32)> = seen.iter().map(|s| (s.enq, s.deq)).collect();
        assert_eq!(depths, vec![(0, 3), (1, 2), (2, 1), (3, 0)]);
        let released: Vec<u64> = std::iter::from_fn(|| q.release_due(u64::MAX / 2000).map(|r| r.release_ns)).collect();
        assert_eq!(released, vec![2_050_010, 3_050_010, 4_050_010]);
        assert!(q.is_empty());
    }

    #[test]
    fn qlen_counts_only_frames_that_had_arrived() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        let mut seen = vec![];
        offer(&mut q, frame(&pool, 1000, 0), &mut seen).unwrap();
        // Arrives after the first started: queued behind it, but not counted in its qlen.
        offer(&mut q, frame(&pool, 1000, 500_000), &mut seen).unwrap();
        start_all(&mut q, 2_000_000, &mut seen, 0);
        assert_eq!((seen[0].start_ns, seen[0].qlen), (0, 0));
        assert_eq!((seen[1].start_ns, seen[1].qlen), (1_000_000, 0));
    }

    #[test]
    fn tail_drop_counts_the_bytes_waiting_at_arrival() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(2500, 0);
        let mut seen = vec![];
        offer(&mut q, frame(&pool, 1000, 0), &mut seen).unwrap(); // starts at 0
        offer(&mut q, frame(&pool, 1000, 1), &mut seen).unwrap(); // the first started: 1000 queued
        offer(&mut q, frame(&pool, 1000, 1), &mut seen).unwrap(); // 2000 queued
        assert!(matches!(
            offer(&mut q, frame(&pool, 1000, 1), &mut seen),
            Err(Rejected::BufferFull(_))
        ));
        assert_eq!(q.occupancy(), 2000);
        // Once the first has ended and the second started, there is room again, even if the
        // worker has not released anything yet.
        offer(&mut q, frame(&pool, 1000, 1_000_001), &mut seen).unwrap();
        assert_eq!(q.occupancy(), 2000);
    }

    #[test]
    fn bytes_egress_adds_take_wire_time_not_buffer_space() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        let mut seen = vec![];
        for _ in 0..3 {
            q.enqueue(frame(&pool, 1000, 0), 0).unwrap();
        }
        // Each gains 24 bytes (an INT hop) when it starts: 1024 B take 1.024 ms.
        start_all(&mut q, 10_000_000, &mut seen, 24);
        let starts: Vec<u64> = seen.iter().map(|s| s.start_ns).collect();
        assert_eq!(starts, vec![0, 1_024_000, 2_048_000]);
        let qlens: Vec<u64> = seen.iter().map(|s| s.qlen).collect();
        assert_eq!(qlens, vec![2000, 1000, 0], "the buffer holds frames as they arrived");
        let tx: Vec<u64> = seen.iter().map(|s| s.tx_before).collect();
        assert_eq!(tx, vec![0, 1024, 2048], "txBytes counts what went on the wire");
        assert_eq!(q.tx_bytes(), 3072);
    }

    #[test]
    fn a_frame_dropped_at_egress_takes_no_wire_time_and_a_lost_one_does() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        for _ in 0..3 {
            q.enqueue(frame(&pool, 1000, 0), 0).unwrap();
        }
        let d = q.start_due(Until::now(0)).unwrap();
        let _lost = q.lose(d);
        let d = q.start_due(Until::now(1_000_000)).unwrap();
        assert_eq!(d.start_ns, 1_000_000, "a lost frame still occupied the wire");
        let _dropped = q.discard(d);
        let d = q.start_due(Until::now(1_000_000)).unwrap();
        assert_eq!(d.start_ns, 1_000_000, "a discarded frame did not");
        assert_eq!(d.tx_bytes_before, 1000);
        q.send(d);
        assert_eq!(q.release_due(2_000_000).map(|r| r.release_ns), Some(2_000_000));
    }

    #[test]
    fn fractional_serialization_times_do_not_drift() {
        let pool = FramePool::new(2048, 16);
        // 64 B at 100 Gb/s = 5.12 ns each; 1000 of them end at exactly 5120 ns.
        let mut q = EgressQueue::new(Rate(100_000_000_000), Nanos(0), u64::MAX);
        for _ in 0..1000 {
            q.enqueue(frame(&pool, 64, 0), 0).unwrap();
        }
        let mut seen = vec![];
        start_all(&mut q, 1_000_000, &mut seen, 0);
        assert_eq!(seen.last().map(|s| s.start_ns), Some(5114)); // 999 × 5.12 = 5114.88 ns
        assert_eq!(q.tx_bytes(), 64_000);
    }

    /// Frames of priority `p` (each 1000 B, arriving at `at_ns`) queued one after another.
    fn fill(q: &mut EgressQueue, pool: &FramePool, p: u8, n: usize, at_ns: u64) {
        for _ in 0..n {
            q.enqueue(frame(pool, 1000, at_ns), p).unwrap();
        }
    }

    /// (start, priority) of every frame started by `now_ns`.
    fn starts(q: &mut EgressQueue, now_ns: u64) -> Vec<(u64, u8)> {
        let mut out = vec![];
        while let Some(d) = q.start_due(Until::now(now_ns)) {
            out.push((d.start_ns, d.priority));
            q.send(d);
        }
        out
    }

    #[test]
    fn the_highest_waiting_priority_goes_next_without_cutting_a_frame() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        fill(&mut q, &pool, 0, 2, 0);
        // Priority 3 arrives while the first priority-0 frame is on the wire: it waits for
        // that frame to end, then goes before the other priority-0 frame.
        fill(&mut q, &pool, 3, 2, 500_000);
        assert_eq!(
            starts(&mut q, 10_000_000),
            vec![(0, 0), (1_000_000, 3), (2_000_000, 3), (3_000_000, 0)]
        );
    }

    #[test]
    fn a_paused_priority_waits_out_its_pause_while_the_others_go_on() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        fill(&mut q, &pool, 3, 3, 0);
        fill(&mut q, &pool, 0, 1, 0);
        // The first priority-3 frame starts at 0; a pause for priority 3 arrives at 0.5 ms for
        // 40 quanta (512 bits each at 8 Mb/s: 2.56 ms). It does not stop the frame on the
        // wire; priority 0 uses the gap.
        assert_eq!(starts(&mut q, 499_999), vec![(0, 3)]);
        q.pause(3, 500_000_000, 40);
        assert_eq!(q.paused_until_ps(3), 3_060_000_000);
        assert_eq!(starts(&mut q, 3_059_999), vec![(1_000_000, 0)]);
        assert_eq!(std::iter::from_fn(|| q.release_due(3_059_999)).count(), 2);
        assert_eq!(
            q.next_event_ns(),
            Some(4_060_000),
            "the next start is at the pause's end, its release 1 ms later"
        );
        assert_eq!(starts(&mut q, 10_000_000), vec![(3_060_000, 3), (4_060_000, 3)]);
        // A pause of 0 quanta (XON) ends a pause at once.
        fill(&mut q, &pool, 3, 1, 6_000_000);
        q.pause(3, 6_000_000_000, 1000);
        q.pause(3, 6_500_000_000, 0);
        assert_eq!(starts(&mut q, 10_000_000), vec![(6_500_000, 3)]);
    }

    /// (start, dropped by the watchdog) of every frame started by `now_ns`.
    fn starts_or_storm_drops(q: &mut EgressQueue, now_ns: u64) -> Vec<(u64, bool)> {
        let mut out = vec![];
        while let Some(d) = q.start_due(Until::now(now_ns)) {
            out.push((d.start_ns, d.stormed));
            if d.stormed {
                q.discard(d);
            } else {
                q.send(d);
            }
        }
        out
    }

    #[test]
    fn the_watchdog_drops_a_stormed_priority_until_its_pauses_stop() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        q.watch_for_storms(PfcWatchdog {
            detect_ns: 10_000_000,
            restore_ns: 5_000_000,
        });
        // The longest pause (4.19 s at 8 Mb/s) at 0, sent again at 8 ms; two frames wait
        // from 1 ms.
        q.pause(3, 0, u16::MAX);
        q.pause(3, 8_000_000_000, u16::MAX);
        fill(&mut q, &pool, 3, 2, 1_000_000);
        assert_eq!(q.next_event_ns(), Some(11_000_000), "the trip");
        assert_eq!(starts_or_storm_drops(&mut q, 10_999_999), vec![]);
        // Tripped: both leave unsent at once (a drop takes no wire time).
        assert_eq!(
            starts_or_storm_drops(&mut q, 11_000_000),
            vec![(11_000_000, true), (11_000_000, true)]
        );
        assert_eq!(q.watchdog_trips(), 1);
        // The storm goes on: pauses keep coming, and so do drops.
        q.pause(3, 12_000_000_000, u16::MAX);
        fill(&mut q, &pool, 3, 1, 14_000_000);
        assert_eq!(starts_or_storm_drops(&mut q, 14_000_000), vec![(14_000_000, true)]);
        assert_eq!(
            q.next_event_ns(),
            Some(17_000_000),
            "restored 5 ms after the last pause"
        );
        // Restored: the pause of 12 ms holds again, until an XON lifts it.
        fill(&mut q, &pool, 3, 1, 18_000_000);
        assert_eq!(starts_or_storm_drops(&mut q, 19_999_999), vec![]);
        q.pause(3, 20_000_000_000, 0);
        assert_eq!(starts_or_storm_drops(&mut q, 20_000_000), vec![(20_000_000, false)]);
        assert_eq!(q.watchdog_trips(), 1);
    }

    #[test]
    fn without_a_watchdog_a_pause_storm_holds_for_ever() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        q.pause(3, 0, u16::MAX);
        fill(&mut q, &pool, 3, 1, 1_000_000);
        assert_eq!(starts_or_storm_drops(&mut q, 4_000_000_000), vec![]);
        assert_eq!(q.watchdog_trips(), 0);
    }

    #[test]
    fn with_dwrr_backlogged_priorities_share_the_port_by_weight_and_pauses_still_hold() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        let mut weights = [1; PRIORITIES];
        weights[0] = 2;
        q.schedule(Scheduler::Dwrr { weights }, 1000);
        fill(&mut q, &pool, 0, 4, 0);
        fill(&mut q, &pool, 3, 4, 0);
        let order: Vec<u8> = starts(&mut q, 5_999_999).iter().map(|s| s.1).collect();
        assert_eq!(order, vec![3, 0, 0, 3, 0, 0], "priority 0 twice per round, 3 once");
        // A paused priority is skipped; the other has the port.
        q.pause(3, 6_000_000_000, u16::MAX);
        fill(&mut q, &pool, 0, 2, 6_000_000);
        let order: Vec<u8> = starts(&mut q, 9_999_999).iter().map(|s| s.1).collect();
        assert_eq!(order, vec![0, 0]);
    }

    #[test]
    fn queue_length_and_depths_count_every_priority() {
        let pool = FramePool::new(2048, 16);
        let mut q = queue(1_000_000, 0);
        fill(&mut q, &pool, 0, 2, 0);
        fill(&mut q, &pool, 5, 1, 0);
        assert_eq!(q.occupancy(), 3000);
        let d = q.start_due(Until::now(0)).unwrap();
        assert_eq!((d.priority, d.qlen, d.deq_packets, d.enq_packets), (5, 2000, 2, 2));
        assert_eq!(d.priority_qlen, 0, "nothing behind it in priority 5");
        q.send(d);
        let d = q.start_due(Until::now(1_000_000)).unwrap();
        assert_eq!((d.priority, d.qlen, d.deq_packets), (0, 1000, 1));
        assert_eq!(d.priority_qlen, 1000);
        q.send(d);
        assert_eq!(q.occupancy(), 1000);
        assert_eq!(q.len(), 3, "one waiting, two on the wire");
        assert_eq!(q.drain().count(), 3);
        assert!(q.is_empty());
    }
}
