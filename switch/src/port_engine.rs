//! The per-frame sequence of one switch port, written once: a frame admitted to the switch's
//! shared buffer and queued, its transmission started when due (the buffer released, the egress
//! stage run on it, the link's impairments judged), or dropped and counted. Where frames come
//! from and where they go once they have crossed the link (sockets, other workers, memory) and
//! what time it is are the driver's: a shard of the lab drives it on the runtime, the simulator
//! on its virtual clock, so the simulator checks the code the lab runs.

use int_format::ethernet::{EthernetFrame, MacAddress, ethertype};
use int_format::pfc::{PfcFrame, PfcRepr};

use crate::capture::PortCapture;
use crate::counters::{DropReason, PortCounters};
use crate::egress::EgressPort;
use crate::frame::FrameBuf;
use crate::tm::{Admission, Dequeued, EgressQueue, Mmu, PRIORITIES, PfcSignal, Rejected, Until};

/// One port as the engine works on it, borrowed from its driver.
pub struct PortView<'a> {
    /// The port's index in its switch.
    pub index: usize,
    /// Its egress queue.
    pub queue: &'a mut EgressQueue,
    /// Its egress settings.
    pub egress: &'a EgressPort,
    /// Its counters.
    pub counters: &'a mut PortCounters,
    /// Its capture, if on.
    pub capture: Option<&'a mut PortCapture>,
    /// Its link is up: a frame due on a link that is down leaves the buffer unsent.
    pub link_up: bool,
    /// Dropped frames go into the capture too.
    pub capture_drops: bool,
}

/// What a port's egress stage decided for a frame whose transmission starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressDecision {
    /// On the wire.
    Send,
    /// Dropped, for this reason.
    Drop(DropReason),
    /// Taken out of the queue for the driver (a P4 program's recirculation), in
    /// [`Started::diverted`].
    Divert,
}

/// What starting a port's due frames leaves its driver.
#[derive(Debug, Default)]
pub struct Started {
    /// Buffers to free: frames dropped or lost, counted already.
    pub freed: Vec<FrameBuf>,
    /// Frames the egress stage diverted, in order.
    pub diverted: Vec<FrameBuf>,
    /// PFC signals the shared buffer raised, each with when (ns).
    pub pfc: Vec<(PfcSignal, u64)>,
}

impl PortView<'_> {
    /// Queues `frame`, arrived at its `arrival_ns`, in the priority its P4 program chose or its
    /// DSCP or VLAN priority says, once the switch's shared buffer `mmu` (if it has one) admits
    /// it; a PFC signal the buffer raises goes to `pfc`. A MAC control frame (the switch's own
    /// PFC) goes ahead of every queue, in no buffer. Returns a frame refused, counted, to free.
    pub fn enqueue(&mut self, frame: FrameBuf, mmu: Option<&Mmu>, pfc: &mut Vec<(PfcSignal, u64)>) -> Option<FrameBuf> {
        if is_mac_control(&frame) {
            self.queue.enqueue_control(frame);
            return None;
        }
        let priority = match frame.p4_priority {
            Some(p) => p.min(PRIORITIES as u8 - 1),
            None => self.egress.priorities.of(frame.bytes()),
        };
        let (len, at) = (frame.len as u64, frame.arrival_ns);
        match mmu.map(|m| m.admit(usize::from(frame.ingress), self.index, priority, len, at)) {
            Some(Admission::Admit(Some(sig))) => pfc.push((sig, at)),
            Some(Admission::Drop) => return Some(self.dropped(frame, DropReason::BufferFull, true)),
            Some(Admission::Overrun) => self.counters.overrun(at),
            Some(Admission::Admit(None)) | None => {}
        }
        match self.queue.enqueue(frame, priority) {
            Ok(()) => None,
            Err(Rejected::BufferFull(frame)) => Some(self.dropped(frame, DropReason::BufferFull, true)),
        }
    }

    /// Starts the transmission of every frame due before `until`: its room in the shared buffer
    /// `mmu` released, `stage` (ECN and INT, or a P4 program's egress) run on it, then the
    /// link's impairments judged. What is left to do goes to `out`.
    pub fn start_due(
        &mut self,
        until: Until,
        mmu: Option<&Mmu>,
        stage: &mut dyn FnMut(&mut Dequeued, &EgressPort, &mut PortCounters) -> EgressDecision,
        out: &mut Started,
    ) {
        while let Some(mut d) = self.queue.start_due(until) {
            if d.mac_control {
                if !self.link_up {
                    out.freed.push(self.queue.discard(d));
                    continue;
                }
                self.counters.mac_control_sent(d.start_ns, d.frame.bytes());
                // The link impairs no MAC control frame (netem, above the MAC, never sees one).
                out.freed.extend(self.transmit(d));
                continue;
            }
            if let Some(mmu) = mmu
                && let Some(sig) = mmu.release(usize::from(d.frame.ingress), self.index, d.priority, d.frame.len as u64)
            {
                out.pfc.push((sig, d.start_ns));
            }
            let at = d.start_ns;
            // A priority in a pause storm goes nowhere: its frames leave the buffer unsent.
            let (frame, why) = if d.stormed {
                (self.queue.discard(d), DropReason::PfcWatchdog)
            } else if !self.link_up {
                (self.queue.discard(d), DropReason::LinkDown)
            } else {
                match stage(&mut d, self.egress, self.counters) {
                    EgressDecision::Send => match self.transmit(d) {
                        Some(lost) => (lost, DropReason::InjectedLoss),
                        None => continue,
                    },
                    EgressDecision::Drop(why) => (self.queue.discard(d), why),
                    EgressDecision::Divert => {
                        out.diverted.push(self.queue.discard(d));
                        continue;
                    }
                }
            };
            self.counters.drop(why);
            if let Some(c) = self.capture.as_deref_mut().filter(|_| self.capture_drops) {
                c.dropped(at, frame.bytes(), why, true);
            }
            out.freed.push(frame);
        }
    }

    /// Puts `d` on the wire as its link judges it; a frame the link loses comes back.
    fn transmit(&mut self, mut d: Dequeued) -> Option<FrameBuf> {
        let v = self.queue.judge(&mut d);
        if v.lost {
            return Some(self.queue.lose(d));
        }
        self.counters.sent(d.frame.len, &v);
        if let Some(c) = self.capture.as_deref_mut() {
            c.outbound(d.start_ns, d.frame.bytes());
        }
        self.queue.send_judged(d, &v);
        None
    }

    /// Counts `frame` dropped for `why` (and captures it, if drops are); `outbound`: it was
    /// leaving. Returns it to free.
    pub fn dropped(&mut self, frame: FrameBuf, why: DropReason, outbound: bool) -> FrameBuf {
        self.counters.drop(why);
        if let Some(c) = self.capture.as_deref_mut().filter(|_| self.capture_drops) {
            c.dropped(frame.arrival_ns, frame.bytes(), why, outbound);
        }
        frame
    }
}

/// The PFC frame switch `node_id` sends for `sig`: the longest pause (XOFF) or none (XON) of
/// its priority, from a MAC made of the node ID and the port.
pub fn pfc_frame(node_id: u32, sig: &PfcSignal) -> PfcRepr {
    let mut quanta = [None; PRIORITIES];
    quanta[usize::from(sig.priority) % PRIORITIES] = Some(if sig.pause { u16::MAX } else { 0 });
    let node = node_id.to_be_bytes();
    let port = sig.port.to_be_bytes();
    PfcRepr {
        // Locally administered: the switch's node ID and the port.
        src: MacAddress([0x02, 0x1c, node[2], node[3], port[6], port[7]]),
        quanta,
    }
}

/// A PFC frame that arrived at `at_ps` on a port: each priority it names is paused (or resumed)
/// on the port's transmitter from then, and counted.
pub fn pause_port(queue: &mut EgressQueue, counters: &mut PortCounters, pfc: &PfcFrame<&[u8]>, at_ps: u64) {
    let mut pauses = false;
    for p in 0..PRIORITIES {
        if let Some(quanta) = pfc.quanta(p) {
            queue.pause(p as u8, at_ps, quanta);
            counters.totals.pfc_rx_priority[p] += 1;
            pauses |= quanta > 0;
        }
    }
    counters.totals.pfc_rx += 1;
    counters.pfc_received(at_ps / 1000, pauses);
}

/// True for a MAC control frame (PFC, 802.3x PAUSE).
pub fn is_mac_control(frame: &FrameBuf) -> bool {
    EthernetFrame::new_checked(frame.bytes()).is_ok_and(|e| e.ethertype() == ethertype::MAC_CONTROL)
}
