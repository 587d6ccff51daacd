//! A switch in the simulator: the lab's own ingress pipeline, egress queues, egress stage (ECN, INT),
//! shared buffer and PFC, as a shard of the lab runs them, with frames handed over in memory.

use int_format::pfc::PfcFrame;
use intlab_switch::SwitchSpec;
use intlab_switch::counters::{DropReason, PortCounters};
use intlab_switch::egress::{self, EgressPort};
use intlab_switch::fabric::{egress_queue, shared_buffer};
use intlab_switch::frame::{FrameBuf, FramePool};
use intlab_switch::pipeline::{Pipeline, Verdict};
use intlab_switch::port::InboundLink;
use intlab_switch::port_engine::{EgressDecision, PortView, Started, is_mac_control, pause_port, pfc_frame};
use intlab_switch::tm::{EgressQueue, Mmu, PfcSignal, Released, Until};

/// What is at the far end of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// Nothing: what leaves is lost.
    None,
    /// A host.
    Host(usize),
    /// Port `.1` of switch `.0`.
    Switch(usize, usize),
}

/// One port.
pub(crate) struct BedPort {
    pub(crate) queue: EgressQueue,
    pub(crate) egress: EgressPort,
    pub(crate) counters: PortCounters,
    /// What a host's link delivers here.
    pub(crate) inbound: InboundLink,
    pub(crate) peer: Peer,
    /// When the port next needs running, as last asked for.
    pub(crate) armed: Option<u64>,
}

impl BedPort {
    /// The port as the switch's port engine works on it: no capture, its link always up.
    fn view(&mut self, index: usize) -> PortView<'_> {
        PortView {
            index,
            queue: &mut self.queue,
            egress: &self.egress,
            counters: &mut self.counters,
            capture: None,
            link_up: true,
            capture_drops: false,
        }
    }
}

/// A switch of the simulator.
pub(crate) struct BedSwitch {
    pub(crate) spec: SwitchSpec,
    pipeline: Pipeline,
    mmu: Option<Mmu>,
    pub(crate) ports: Vec<BedPort>,
    pool: FramePool,
    rng: fastrand::Rng,
    /// PFC frames to send: (what, when, ns).
    pfc_due: Vec<(PfcSignal, u64)>,
    refreshed: Vec<PfcSignal>,
    /// When the MMU next refreshes its pauses, as last asked for.
    pub(crate) refresh_armed: Option<u64>,
}

impl BedSwitch {
    pub(crate) fn new(spec: SwitchSpec) -> BedSwitch {
        let mmu = shared_buffer(&spec);
        let ports = (0..spec.ports.len())
            .map(|i| {
                let p = &spec.ports[i];
                BedPort {
                    queue: egress_queue(&spec, i, mmu.is_some()),
                    egress: EgressPort::new(i, spec.node_id, p, spec.priorities.map),
                    counters: PortCounters::with_queue_trace(spec.queue_trace_every.0),
                    inbound: InboundLink::new(p.rate, p.delay),
                    peer: Peer::None,
                    armed: None,
                }
            })
            .collect();
        BedSwitch {
            pipeline: Pipeline::new(&spec),
            pool: FramePool::new(intlab_switch::frame_capacity(&spec), 1024),
            rng: fastrand::Rng::with_seed(spec.seed),
            mmu,
            ports,
            pfc_due: Vec::new(),
            refreshed: Vec::new(),
            refresh_armed: None,
            spec,
        }
    }

    /// A frame buffer holding `bytes`, arriving on `port` at `at_ns`.
    pub(crate) fn frame(&self, bytes: &[u8], port: usize, at_ns: u64) -> FrameBuf {
        let mut f = self.pool.get();
        let n = bytes.len().min(f.capacity());
        f.buffer_mut()[..n].copy_from_slice(&bytes[..n]);
        f.len = n;
        f.truncated = n < bytes.len();
        f.ingress = port as u16;
        f.arrival_ns = at_ns;
        f.arrival_known = true;
        f
    }

    /// Frees a frame's buffer.
    pub(crate) fn free(&self, frame: FrameBuf) {
        self.pool.put(frame);
    }

    /// Frame `frame` has arrived on port `s` (at its `arrival_ns`): ingress, then its egress
    /// queue; a PFC frame pauses the port's transmitter instead.
    pub(crate) fn arrive(&mut self, s: usize, mut frame: FrameBuf) {
        let port = &mut self.ports[s];
        frame.ingress = s as u16;
        port.counters.totals.rx_frames += 1;
        port.counters.totals.rx_bytes += frame.len as u64;
        if frame.truncated {
            return self.drop_at(s, frame, DropReason::Oversize);
        }
        if is_mac_control(&frame) {
            return self.mac_control(s, frame);
        }
        let (verdict, notes) = self.pipeline.ingress(&mut frame);
        if notes.malformed_int {
            self.ports[s].counters.totals.int_malformed += 1;
        }
        match verdict {
            Verdict::Forward(p) => self.enqueue(p, frame),
            Verdict::Reply => self.enqueue(s, frame),
            // Hosts of the simulator know their neighbours: nothing floods.
            Verdict::Flood => self.drop_at(s, frame, DropReason::NoRoute),
            Verdict::Drop(why) => self.drop_at(s, frame, why),
        }
        self.send_pfc();
    }

    fn mac_control(&mut self, s: usize, frame: FrameBuf) {
        match PfcFrame::new_checked(frame.bytes()) {
            Ok(pfc) => {
                let at_ps = frame.arrival_ns * 1000;
                // Transmissions due before the pause arrived have started.
                self.start_due(s, Until::before_ps(at_ps));
                let port = &mut self.ports[s];
                pause_port(&mut port.queue, &mut port.counters, &pfc, at_ps);
            }
            Err(_) => self.ports[s].counters.totals.mac_control_ignored += 1,
        }
        self.free(frame);
    }

    fn enqueue(&mut self, s: usize, frame: FrameBuf) {
        let until = self.ports[s].queue.before_arrival_of(&frame);
        self.start_due(s, until);
        if let Some(refused) = self.ports[s]
            .view(s)
            .enqueue(frame, self.mmu.as_ref(), &mut self.pfc_due)
        {
            self.free(refused);
        }
    }

    /// Queues the PFC frames the buffer asked for, each on the port whose upstream it pauses.
    fn send_pfc(&mut self) {
        while let Some((sig, at)) = self.pfc_due.pop() {
            let mut frame = self.pool.get();
            match pfc_frame(self.spec.node_id, &sig).emit(frame.buffer_mut()) {
                Ok(len) => frame.len = len,
                Err(_) => {
                    self.free(frame);
                    continue;
                }
            }
            frame.arrival_ns = at;
            frame.arrival_known = true;
            frame.ingress = sig.port as u16;
            self.enqueue(sig.port, frame);
        }
    }

    /// Starts every frame of port `s` due before `until`, through egress.
    fn start_due(&mut self, s: usize, until: Until) {
        let rng = &mut self.rng;
        let mut stage = |d: &mut intlab_switch::tm::Dequeued, egress: &EgressPort, counters: &mut PortCounters| {
            egress::process(d, egress, counters, rng);
            EgressDecision::Send
        };
        let mut out = Started::default();
        self.ports[s]
            .view(s)
            .start_due(until, self.mmu.as_ref(), &mut stage, &mut out);
        self.pfc_due.extend(out.pfc);
        for frame in out.freed {
            self.pool.put(frame);
        }
    }

    /// Runs port `s` at `now`: starts what is due, and returns what has reached the far end.
    pub(crate) fn run_port(&mut self, s: usize, now: u64, out: &mut Vec<Released>) {
        self.start_due(s, Until::now(now));
        while let Some(r) = self.ports[s].queue.release_due(now) {
            out.push(r);
        }
        self.send_pfc();
    }

    /// Sends again the XOFFs that would run out while their ingress is still over its
    /// threshold; returns when the next is due.
    pub(crate) fn refresh_pauses(&mut self, now: u64) -> Option<u64> {
        let mmu = self.mmu.as_ref()?;
        let next = mmu.refresh(now, &mut self.refreshed);
        for sig in self.refreshed.drain(..) {
            self.pfc_due.push((sig, now));
        }
        self.send_pfc();
        next
    }

    /// True when it has PFC.
    pub(crate) fn has_pfc(&self) -> bool {
        self.spec.pfc.is_some()
    }

    fn drop_at(&mut self, s: usize, frame: FrameBuf, why: DropReason) {
        self.ports[s].counters.drop(why);
        self.free(frame);
    }
}
