//! A host's transport without its sockets: its NIC's verbs engine (QPs, memory regions,
//! completion queues), the NIC scheduler, replies and probes, driven by the datagrams and pause
//! frames given to it and the time it is told. The lab's host task feeds it from the
//! kernel's sockets; the simulator feeds it from memory on a virtual clock, so both run
//! the same code.
//!
//! The lab's own flows are QPs of this same engine, in a context of their own: a flow sent is a
//! QP with one RDMA WRITE (or SEND) of its message, whose memory is the flow's content pattern;
//! a flow expected is a QP whose responder checks every byte against that pattern. The verbs
//! programs call (create a QP, post a request) are in `stack/verbs.rs`.

pub(crate) mod verbs;

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::Sender;
use hdrhistogram::Histogram;
use int_format::int::HopRecord;
use int_format::roce::{AethRepr, AtomicAckEth, BthRepr, NakCode, Opcode, ROCEV2_PORT, Syndrome};
use int_format::roles::source;
use int_format::{Error, Layer};
use intlab_runtime::Hiccup;

use crate::cc::{ControllerConfig, LineRate};
use crate::classify::{Action, EchoedHops, classify};
use crate::endpoint_config::{EndpointConfig, IntMode, PROBE_QP};
use crate::endpoint_report::{EndpointCounters, EndpointReport, MAX_STALLS_KEPT, Probe, ProbeReply, Stall};
use crate::flow::{
    Completion, FlowEvent, FlowNow, FlowPath, FlowRecord, FlowSpec, MessageKind, ReceiveRecord, STUCK_AFTER_TIMEOUTS,
    Sample, Stuck,
};
use crate::nic::Nic;
use crate::packet::{self, Addressing, Extensions, WIRE_OVERHEAD};
use crate::pause::Pause;
use crate::program_qp::{ProgramOwner, ProgramQp};
use crate::socket::{ECT0, RecvMeta, SendBatch};
use crate::verbs::Verbs;
use crate::verbs::memory::Backing;
use crate::verbs::mr::{Access, MemoryRegion};
use crate::verbs::qp::{Qp, QpCaps, QpInit, QpState, QpType, RetryPolicy};
use crate::verbs::wr::{RecvWr, SendOpcode, SendWr, Sge, SgeList};
use crate::verbs::{Arrival, ReceiverPolicy, Replies, Reply};

/// Where a host's datagrams go: the kernel's sockets in a lab, the simulator's links in tests.
pub trait Wire {
    /// Sends the queued replies (ACKs, NAKs): UDP payloads from the host's RoCE port, each to
    /// its address; returns how many went.
    fn send_replies(&mut self, batch: &mut SendBatch) -> io::Result<usize>;
    /// Sends the queued IPv4 packets (data, CNPs, probes: headers written by the transport);
    /// returns how many went.
    fn send_packets(&mut self, batch: &mut SendBatch) -> io::Result<usize>;
}

/// A QP and what the NIC scheduler keeps of it.
struct Slot {
    qp: Qp,
    /// Bumped whenever its state changes: timer entries of older generations are stale.
    generation: u64,
    /// In the NIC's serving queue.
    queued: bool,
    stuck_reported: bool,
    /// The lab flow it sends, if it is one.
    sends: Option<FlowSpec>,
    /// The lab flow it receives, if it is one.
    receives: Option<FlowSpec>,
}

impl Slot {
    fn is_lab(&self) -> bool {
        self.sends.is_some() || self.receives.is_some()
    }
}

struct PendingProbe {
    tag: u32,
    sent_ns: u64,
    reply: Sender<ProbeReply>,
}

/// The objects of the lab's own flows: their context, protection domain and completion queue.
#[derive(Debug, Clone, Copy)]
struct LabObjects {
    context: usize,
    pd: u32,
    cq: u32,
}

/// A host's transport, sending through `W`.
pub struct HostStack<W> {
    cfg: EndpointConfig,
    wire: W,
    finished: Arc<AtomicUsize>,
    tos: u8,
    control: SendBatch,
    data: SendBatch,
    /// The NIC's objects: contexts, PDs, memory regions, CQs, SRQs.
    verbs: Verbs,
    lab: LabObjects,
    /// QPs by slot; a removed one leaves its slot free.
    slots: Vec<Option<Slot>>,
    free_slots: Vec<usize>,
    /// QP number → its slot.
    slot_of: HashMap<u32, usize>,
    /// Lab flows sent and finished: what still arrives for them is of no use.
    finished_flows: HashSet<u32>,
    /// Records of the sent flows that finished.
    finished_records: Vec<(FlowRecord, Vec<Sample>)>,
    probes: HashMap<u32, PendingProbe>,
    next_probe_psn: u32,
    nic: Nic,
    counters: EndpointCounters,
    policy: ReceiverPolicy,
    stalls: Vec<Stall>,
    /// Lateness of every run (ns): after its deadline, or after its packets arrived.
    wake_late: Histogram<u64>,
    /// Lateness of runs due before this lab time (ns) is not counted.
    measure_from: u64,
    /// The first error that stopped part of the host's work.
    error: Option<io::Error>,
    /// Each sent flow's controller, resolved on its path.
    controllers: Vec<(u32, ControllerConfig)>,
    /// The lab's latest hiccup, as the senders know it.
    hiccup: Option<Hiccup>,
    /// The latest time it acted at (ns): datagrams come stamped with when they arrived, which
    /// may be before a step it already made, and its time never runs back.
    time_ns: u64,
    /// The PFC words its NIC heeded: (arrival ns, whether it paused), the last of each batch
    /// read, the first [`PFC_KEPT`].
    pfc_received: Vec<(u64, bool)>,
    /// The XOFFs on its data priority: (arrival, read) lab ns, the first [`PFC_KEPT`].
    xoffs_read: Vec<(u64, u64)>,
    /// The next program QP number to try.
    next_qpn: u32,
    /// The program behind each program context.
    owners: HashMap<usize, ProgramOwner>,
    /// Records of the program QPs destroyed, the latest [`CLOSED_QPS_KEPT`].
    closed_qps: std::collections::VecDeque<ProgramQp>,
}

/// Destroyed program QPs a host keeps the records of.
const CLOSED_QPS_KEPT: usize = 4096;

/// PFC words a host keeps the times of.
const PFC_KEPT: usize = 100_000;

impl<W: Wire> HostStack<W> {
    /// A host of `cfg` with no queue pairs, sending through `wire`; `finished` counts the flows
    /// it completes (sent and fully acknowledged, or received whole).
    pub fn new(cfg: EndpointConfig, wire: W, finished: Arc<AtomicUsize>) -> io::Result<HostStack<W>> {
        let policy = ReceiverPolicy {
            ack_every: cfg.ack_every.max(1),
            cnp_interval_ns: cfg.cnp_interval_ns,
        };
        let mut verbs = Verbs::default();
        let context = verbs.create_context(None);
        let pd = verbs.alloc_pd(context).map_err(io::Error::other)?;
        let cq = verbs.create_cq(context, usize::MAX).map_err(io::Error::other)?;
        Ok(HostStack {
            tos: (cfg.dscp << 2) | ECT0,
            cfg,
            wire,
            finished,
            control: SendBatch::default(),
            data: SendBatch::default(),
            verbs,
            lab: LabObjects { context, pd, cq },
            slots: Vec::new(),
            free_slots: Vec::new(),
            slot_of: HashMap::new(),
            finished_flows: HashSet::new(),
            finished_records: Vec::new(),
            probes: HashMap::new(),
            next_probe_psn: 0,
            nic: Nic::default(),
            counters: EndpointCounters::default(),
            policy,
            stalls: Vec::new(),
            // Up to 1 s late at 2 significant digits: a few KB.
            wake_late: Histogram::new_with_max(1_000_000_000, 2).map_err(io::Error::other)?,
            measure_from: 0,
            error: None,
            controllers: Vec::new(),
            hiccup: None,
            time_ns: 0,
            pfc_received: Vec::new(),
            xoffs_read: Vec::new(),
            next_qpn: 0,
            owners: HashMap::new(),
            closed_qps: std::collections::VecDeque::new(),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    /// Where it sends.
    pub fn wire(&self) -> &W {
        &self.wire
    }

    /// Where it sends, to read from.
    pub fn wire_mut(&mut self) -> &mut W {
        &mut self.wire
    }

    /// The first error that stopped part of its work, taken.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    /// Lateness of runs due before lab time `t` (ns) is not counted.
    pub fn measure_from(&mut self, t: u64) {
        self.measure_from = t;
    }

    /// Records a failure: kept (the first), and logged.
    pub fn fail(&mut self, e: io::Error) {
        tracing::warn!(host = %self.cfg.name, "{e}");
        self.error.get_or_insert(e);
    }

    fn announce(&self, e: FlowEvent) {
        // A listener that has gone (the run ended) missed nothing it needed.
        if let Some(c) = &self.cfg.events {
            let _gone = c.send(e);
        }
    }

    /// This run came `late_ns` after what called for it (due at `at_ns`): counted, and a stall
    /// when late enough; the queue pairs then mark their next packet (see `Ack::after_stall`).
    pub fn note_lateness(&mut self, at_ns: u64, late_ns: u64) {
        if at_ns < self.measure_from {
            return;
        }
        let _counted = self.wake_late.record(late_ns.min(self.wake_late.high()));
        if late_ns < self.cfg.timing.stall_ns {
            return;
        }
        for s in self.slots.iter_mut().flatten() {
            s.qp.note_stall();
        }
        self.counters.stalls += 1;
        self.counters.stall_max_ns = self.counters.stall_max_ns.max(late_ns);
        if self.stalls.len() < MAX_STALLS_KEPT {
            self.stalls.push(Stall { at_ns, late_ns });
        }
    }

    /// The lab's latest hiccup is `h`: its senders take no RTT sample from a packet in flight
    /// during it (see [`Qp::note_hiccup`]).
    pub fn note_hiccup(&mut self, h: Hiccup) {
        if self.hiccup == Some(h) {
            return;
        }
        self.hiccup = Some(h);
        for s in self.slots.iter_mut().flatten() {
            s.qp.note_hiccup(h);
        }
    }

    /// A QP of the lab's own flows numbered `qpn` towards `dst` from UDP port `src_port`.
    fn lab_qp(&self, qpn: u32, dst: Ipv4Addr, src_port: u16, cc: Box<dyn crate::cc::Controller>) -> Qp {
        let init = QpInit {
            qpn,
            kind: QpType::Rc,
            context: self.lab.context,
            pd: self.lab.pd,
            send_cq: self.lab.cq,
            recv_cq: self.lab.cq,
            srq: None,
            sig_all: false,
            caps: QpCaps {
                max_send_wr: 1,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            retry: RetryPolicy::Backoff,
            timing: self.cfg.timing,
            mtu: self.cfg.mtu as u32,
            local: Addressing {
                src: self.cfg.ip,
                dst,
                src_port,
            },
        };
        let mut qp = Qp::new(init, cc);
        qp.attr.dest_qpn = qpn;
        qp.attr.dest = Some(dst);
        qp.attr.access = Access(Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        qp.attr.state = QpState::Rts;
        qp
    }

    /// Registers flow `flow`'s message as a memory region keyed by its id (its content pattern).
    fn register_flow(&mut self, flow: &FlowSpec) {
        if let Some(old) = self.verbs.mrs.get(flow.id)
            && old.context == self.lab.context
        {
            self.verbs.mrs.deregister(flow.id);
        }
        let registered = self.verbs.mrs.register_with_key(MemoryRegion {
            context: self.lab.context,
            pd: self.lab.pd,
            addr: 0,
            len: flow.size,
            access: Access(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            key: flow.id,
            backing: Backing::Pattern { flow: flow.id },
        });
        if !registered {
            self.fail(io::Error::other(format!("flow {}: its key is a program's", flow.id)));
        }
    }

    /// Puts `slot` in a free place and indexes it by its QP number; returns the place.
    fn install(&mut self, slot: Slot) -> usize {
        let qpn = slot.qp.qpn;
        if let Some(old) = self.slot_of.get(&qpn).copied() {
            self.slots[old] = None;
            self.free_slots.push(old);
        }
        let i = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.slot_of.insert(qpn, i);
        i
    }

    /// Starts sending `flow` at `now` under controller `cc` along `route`.
    pub fn add_sender(&mut self, flow: FlowSpec, cc: &ControllerConfig, route: FlowPath, now: u64) -> io::Result<()> {
        let path = self.cfg.path_info(route);
        let controller = cc
            .build(path)
            .map_err(|e| io::Error::other(format!("flow {}: {e}", flow.id)))?;
        self.controllers.push((flow.id, cc.resolve(&path)));
        let instructions = match self.cfg.int_mode {
            IntMode::Auto => controller.int_instructions(),
            IntMode::On => Some(
                controller
                    .int_instructions()
                    .unwrap_or(int_format::int::Instructions::HPCC),
            ),
            IntMode::Off => None,
        };
        let int = instructions.map(|instructions| source::SourceConfig {
            int_port: self.cfg.int_port,
            instructions,
            hop_limit: self.cfg.hop_limit,
        });
        let mut qp = self.lab_qp(flow.id, flow.dst, flow.src_port, controller);
        qp.dst_port = if int.is_some() { self.cfg.int_port } else { ROCEV2_PORT };
        qp.int = int;
        qp.not_before(flow.start_ns);
        self.register_flow(&flow);
        let opcode = match flow.kind {
            MessageKind::Write => SendOpcode::Write,
            MessageKind::Send => SendOpcode::Send,
        };
        let mut wr = SendWr::new(
            u64::from(flow.id),
            opcode,
            SgeList::one(Sge {
                addr: 0,
                length: flow.size,
                lkey: flow.id,
            }),
        );
        wr.signaled = false;
        wr.rkey = flow.id;
        qp.post_send(&mut self.verbs, wr)
            .map_err(|e| io::Error::other(format!("flow {}: {e}", flow.id)))?;
        self.finished_flows.remove(&flow.id);
        let slot = self.install(Slot {
            qp,
            generation: 0,
            queued: false,
            stuck_reported: false,
            sends: Some(flow),
            receives: None,
        });
        self.schedule(slot, now);
        Ok(())
    }

    /// Slot `i`'s state changed at `now`: into the serving queue if it may send, a timer for
    /// its next event.
    fn schedule(&mut self, i: usize, now: u64) {
        let Some(Some(s)) = self.slots.get_mut(i) else { return };
        s.generation += 1;
        if !s.queued && s.qp.ready(now) {
            s.queued = true;
            self.nic.ready(i);
        }
        // A queue pair waiting for the NIC (busy, or paused by PFC) is served when the NIC
        // frees; only its timers need waking for.
        let next = if s.queued {
            s.qp.next_timer_ns()
        } else {
            s.qp.next_event_ns()
        };
        if let Some(t) = next {
            self.nic.at(t.max(now + 1), i, s.generation);
        }
    }

    /// Slot `i`'s flow is fully acknowledged: announced, its record kept, its slot freed.
    fn retire(&mut self, i: usize, now: u64) {
        let Some(mut s) = self.slots.get_mut(i).and_then(Option::take) else {
            return;
        };
        self.free_slots.push(i);
        self.slot_of.remove(&s.qp.qpn);
        let Some(flow) = s.sends else { return };
        self.finished.fetch_add(1, Ordering::Relaxed);
        self.announce(FlowEvent::Completed(Completion {
            id: flow.id,
            end_ns: now,
        }));
        let record = flow_record(&flow, &s.qp, Some(now));
        let series = s.qp.take_series();
        self.finished_records.push((record, series));
        self.finished_flows.insert(flow.id);
        self.verbs.mrs.deregister(flow.id);
    }

    /// Expects `flow`: its data is received, acknowledged and counted.
    pub fn expect(&mut self, flow: FlowSpec) {
        let mut qp = self.lab_qp(
            flow.id,
            flow.src,
            flow.src_port,
            Box::new(LineRate(self.cfg.line_rate_bps)),
        );
        qp.resp.limit = Some(flow.size.div_ceil(self.cfg.mtu).max(1));
        qp.resp.lenient = true;
        self.register_flow(&flow);
        if flow.kind == MessageKind::Send {
            let wr = RecvWr {
                wr_id: u64::from(flow.id),
                sges: SgeList::one(Sge {
                    addr: 0,
                    length: flow.size,
                    lkey: flow.id,
                }),
            };
            if let Err(e) = qp.post_recv(&mut self.verbs, wr) {
                self.fail(io::Error::other(format!("flow {}: {e}", flow.id)));
            }
        }
        self.install(Slot {
            qp,
            generation: 0,
            queued: false,
            stuck_reported: false,
            sends: None,
            receives: Some(flow),
        });
    }

    /// `frames` PFC frames arrived and were read at `read_ns`; `last` is the last word on the
    /// host's data priority among them, which pauses (or resumes) its NIC from when it arrived.
    /// What the host sent between an XOFF's arrival and its reading went out past the pause:
    /// the read time is kept so that the lab can tell such overruns from faults.
    pub fn pauses(&mut self, frames: usize, last: Option<Pause>, read_ns: u64) {
        self.counters.pfc_rx += frames as u64;
        if let Some(p) = last {
            self.nic.pause(p.at_ns, p.until_ns);
            let xoff = p.until_ns > p.at_ns;
            if self.pfc_received.len() < PFC_KEPT {
                self.pfc_received.push((p.at_ns, xoff));
            }
            if xoff && self.xoffs_read.len() < PFC_KEPT {
                self.xoffs_read.push((p.at_ns, read_ns.max(p.at_ns)));
            }
        }
    }

    /// Handles a datagram that arrived at `arrived` on the RoCE port (on the INT port if
    /// `via_int`), as the socket reported it. It acts at that time, as a NIC stamps and handles
    /// a packet when it arrives: an RTT sample then measures the network, not how late the
    /// host's thread got round to reading it.
    pub fn datagram(&mut self, bytes: &[u8], meta: RecvMeta, via_int: bool, arrived: u64) {
        let now = self.advance(arrived);
        self.counters.rx_datagrams += 1;
        let a = Addressing {
            src: *meta.from.ip(),
            dst: self.cfg.ip,
            src_port: meta.from.port(),
        };
        // Decode first (borrowing the receive buffer), then act on a copy of what matters.
        let r = match packet::parse(bytes, via_int, &a) {
            Ok(r) => r,
            Err(e) => {
                self.count_unparsed(&e);
                return;
            }
        };
        let ce = meta.tos.unwrap_or(0) & 3 == 3;
        let mut echo = [0u8; 512];
        let echo_len = r.int_bytes.len().min(echo.len());
        echo[..echo_len].copy_from_slice(&r.int_bytes[..echo_len]);
        let from = *meta.from.ip();
        let action = classify(&r);
        match action {
            Action::Request { qp: PROBE_QP, psn } => {
                let replies = Replies {
                    ack: Some(Reply::Ack { psn, msn: 0 }),
                    ..Replies::default()
                };
                self.answer(PROBE_QP, replies, from, &echo[..echo_len]);
                return;
            }
            Action::Ack { qp: PROBE_QP, psn } => {
                match EchoedHops::parse(r.payload) {
                    Ok(hops) => self.probe_answered(psn, now, hops.as_slice()),
                    Err(_) => self.counters.bad_int += 1,
                }
                return;
            }
            Action::Unsupported => {
                self.counters.malformed += 1;
                return;
            }
            _ => {}
        }
        let qpn = action.qp().unwrap_or(PROBE_QP);
        // An ACK or NAK parses its echo first: broken INT is counted as such.
        let hops = if matches!(action, Action::Ack { .. } | Action::Nak { .. }) {
            match EchoedHops::parse(r.payload) {
                Ok(h) => Some(h),
                Err(_) => {
                    self.counters.bad_int += 1;
                    return;
                }
            }
        } else {
            None
        };
        let Some(&i) = self.slot_of.get(&qpn) else {
            // What still comes for a flow that finished is of no use; anything else is for a QP
            // this host does not have.
            let late = self.finished_flows.contains(&qpn) && !matches!(action, Action::Request { .. });
            if !late {
                self.counters.unknown_qp += 1;
            }
            return;
        };
        let Some(Some(slot)) = self.slots.get_mut(i) else {
            return;
        };
        // The lab's own flows speak the subset they always spoke: WRITE and SEND without
        // immediate to a flow received; ACKs, PSN sequence NAKs and CNPs to a flow sent.
        if slot.is_lab() {
            let towards_receiver = matches!(action, Action::Request { .. });
            let here = if towards_receiver {
                slot.receives.is_some()
            } else {
                slot.sends.is_some()
            };
            if !here {
                self.counters.unknown_qp += 1;
                return;
            }
            if !lab_understands(&action, r.bth.opcode) {
                self.counters.malformed += 1;
                return;
            }
        }
        let verbs = &mut self.verbs;
        match action {
            Action::Request { .. } => {
                let lab_receiver = slot.receives.is_some();
                let before = slot.qp.resp.messages();
                let arrival = Arrival {
                    now,
                    ce,
                    src: from,
                    dst: self.cfg.ip,
                    tos: meta.tos.unwrap_or(0),
                    roce_len: bytes.len() - r.int_bytes.len(),
                };
                let replies = slot.qp.receive(&r, &arrival, &self.policy, verbs);
                if lab_receiver && before == 0 && slot.qp.resp.messages() > 0 {
                    self.finished.fetch_add(1, Ordering::Relaxed);
                }
                let dest = slot.qp.attr.dest_qpn;
                self.counters.ce_received += u64::from(ce);
                self.answer(dest, replies, from, &echo[..echo_len]);
            }
            Action::Ack { psn, .. } => {
                let hops = hops.as_ref().map_or(&[][..], EchoedHops::as_slice);
                if !slot.qp.on_ack(psn, now, hops, verbs) {
                    self.counters.psn_out_of_window += 1;
                }
            }
            Action::Nak { psn, code, .. } => {
                if !slot.qp.on_nak(psn, code, now, verbs) {
                    self.counters.psn_out_of_window += 1;
                }
            }
            Action::RnrNak { psn, timer, .. } => {
                if !slot.qp.on_rnr_nak(psn, timer, now, verbs) {
                    self.counters.psn_out_of_window += 1;
                }
            }
            Action::ReadResponse { psn, .. } => {
                if !slot
                    .qp
                    .on_read_response(psn, r.bth.opcode, r.ext.aeth, r.payload, now, verbs)
                {
                    self.counters.psn_out_of_window += 1;
                }
            }
            Action::AtomicAck { psn, orig, .. } => {
                if !slot.qp.on_atomic_ack(psn, orig, now, verbs) {
                    self.counters.psn_out_of_window += 1;
                }
            }
            Action::Cnp { .. } => slot.qp.on_cnp(now),
            Action::Unsupported => {}
        }
        self.after_change(i, now);
    }

    /// Counts a datagram that did not parse, by what was wrong with it.
    fn count_unparsed(&mut self, e: &Error) {
        let counter = match e {
            Error::Malformed { layer: Layer::Icrc, .. } => &mut self.counters.bad_icrc,
            Error::Truncated {
                layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                ..
            }
            | Error::Malformed {
                layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                ..
            } => &mut self.counters.bad_int,
            _ => &mut self.counters.malformed,
        };
        *counter += 1;
    }

    /// Slot `i` changed at `now`: a lab flow fully acknowledged retires, anything else is
    /// scheduled again.
    fn after_change(&mut self, i: usize, now: u64) {
        let Some(Some(s)) = self.slots.get_mut(i) else {
            return;
        };
        if s.sends.is_some() && s.qp.send_idle() {
            self.retire(i, now);
        } else {
            self.schedule(i, now);
        }
    }

    /// Queues the ACK, NAK or atomic answer and the CNP a request produced, back to `to`'s QP
    /// `dest` on the RoCE port.
    fn answer(&mut self, dest: u32, replies: Replies, to: Ipv4Addr, echo: &[u8]) {
        if replies.out_of_window {
            self.counters.psn_out_of_window += 1;
        }
        let a = Addressing {
            src: self.cfg.ip,
            dst: to,
            src_port: ROCEV2_PORT,
        };
        for reply in [replies.ack, replies.cnp].into_iter().flatten() {
            self.reply(dest, reply, &a, echo);
        }
    }

    /// Queues one reply to QP `dest` with addressing `a` (an ACK echoes `echo`, the INT of the
    /// packet it acknowledges).
    fn reply(&mut self, dest: u32, reply: Reply, a: &Addressing, echo: &[u8]) {
        if reply == Reply::Cnp {
            self.send_cnp(dest, a);
            return;
        }
        if self.control.is_full() {
            self.flush_control();
        }
        let aeth = |syndrome, msn| Extensions::aeth(AethRepr { syndrome, msn });
        let (bth, ext, payload): (BthRepr, Extensions, &[u8]) = match reply {
            Reply::Ack { psn, msn } => {
                self.counters.acks_sent += 1;
                let s = Syndrome::Ack {
                    credits: Syndrome::UNLIMITED_CREDITS,
                };
                (BthRepr::new(Opcode::Acknowledge, dest, psn), aeth(s, msn), echo)
            }
            Reply::Nak { code, psn, msn } => {
                self.counters.naks_sent += 1;
                (
                    BthRepr::new(Opcode::Acknowledge, dest, psn),
                    aeth(Syndrome::Nak(code), msn),
                    &[],
                )
            }
            Reply::RnrNak { timer, psn, msn } => {
                self.counters.naks_sent += 1;
                (
                    BthRepr::new(Opcode::Acknowledge, dest, psn),
                    aeth(Syndrome::RnrNak { timer }, msn),
                    &[],
                )
            }
            Reply::AtomicAck { psn, msn, orig } => {
                self.counters.acks_sent += 1;
                let mut ext = aeth(
                    Syndrome::Ack {
                        credits: Syndrome::UNLIMITED_CREDITS,
                    },
                    msn,
                );
                ext.atomic_ack = Some(AtomicAckEth(orig));
                (BthRepr::new(Opcode::AtomicAcknowledge, dest, psn), ext, &[])
            }
            Reply::Cnp => return,
        };
        match packet::write(self.control.slot(), a, None, &bth, ext, payload) {
            Ok(n) => self.control.commit(n, SocketAddrV4::new(a.dst, ROCEV2_PORT)),
            Err(e) => self.fail(io::Error::other(format!("building a reply: {e}"))),
        }
    }

    /// Queues a CNP for `qp` with addressing `a`, in the CNPs' own class: the kernel socket
    /// sends with one TOS, so it goes out through the raw socket with an IPv4 header of its own.
    fn send_cnp(&mut self, qp: u32, a: &Addressing) {
        if self.data.is_full() {
            self.flush_data();
        }
        let bth = BthRepr::new(Opcode::Cnp, qp, 0);
        let tos = self.cfg.cnp_dscp << 2;
        match packet::write_ipv4(self.data.slot(), a, ROCEV2_PORT, tos, None, &bth, Extensions::NONE, &[]) {
            Ok(n) => {
                self.counters.cnps_sent += 1;
                self.data.commit(n, SocketAddrV4::new(a.dst, 0));
            }
            Err(e) => self.fail(io::Error::other(format!("building a CNP: {e}"))),
        }
    }

    /// Sends the replies queued so far.
    pub fn flush_control(&mut self) {
        let queued = self.control.len();
        let sent = self.wire.send_replies(&mut self.control);
        self.count_sent(queued, sent, "sending replies");
    }

    fn flush_data(&mut self) {
        let queued = self.data.len();
        let sent = self.wire.send_packets(&mut self.data);
        self.count_sent(queued, sent, "sending data");
    }

    /// Counts what a batch of `queued` datagrams became; a failed send fails the host.
    fn count_sent(&mut self, queued: usize, sent: io::Result<usize>, what: &str) {
        match sent {
            Ok(sent) => {
                self.counters.tx_datagrams += sent as u64;
                self.counters.tx_dropped += (queued - sent) as u64;
            }
            Err(e) => {
                self.counters.tx_dropped += queued as u64;
                self.fail(io::Error::new(e.kind(), format!("{what}: {e}")));
            }
        }
    }

    /// Sends a probe at `now` from its flow's source port, with INT (every field the switches
    /// know).
    pub fn send_probe(&mut self, p: Probe, now: u64) {
        let psn = self.next_probe_psn & 0x00ff_ffff;
        self.next_probe_psn = self.next_probe_psn.wrapping_add(1);
        let int = source::SourceConfig {
            int_port: self.cfg.int_port,
            instructions: int_format::int::Instructions::FULL,
            hop_limit: self.cfg.hop_limit,
        };
        let a = Addressing {
            src: self.cfg.ip,
            dst: p.dst,
            src_port: p.src_port,
        };
        if self.data.is_full() {
            self.flush_data();
        }
        let bth = BthRepr::new(Opcode::SendOnly, PROBE_QP, psn);
        let built = packet::write_ipv4(
            self.data.slot(),
            &a,
            self.cfg.int_port,
            self.tos,
            Some(&int),
            &bth,
            Extensions::NONE,
            &[],
        );
        match built {
            Ok(n) => self.data.commit(n, SocketAddrV4::new(p.dst, 0)),
            Err(e) => return self.fail(io::Error::other(format!("building a probe: {e}"))),
        }
        self.probes.insert(
            psn,
            PendingProbe {
                tag: p.tag,
                sent_ns: now,
                reply: p.reply,
            },
        );
    }

    fn probe_answered(&mut self, psn: u32, now: u64, hops: &[HopRecord]) {
        match self.probes.remove(&psn) {
            Some(p) => {
                // The lab may have stopped listening: the reply is then of no use to anyone.
                let _unheard = p.reply.send(ProbeReply {
                    tag: p.tag,
                    rtt_ns: now.saturating_sub(p.sent_ns),
                    hops: hops.to_vec(),
                });
            }
            None => self.counters.unknown_qp += 1,
        }
    }

    /// Runs the timers that are due: retransmission, RNR and controller timers.
    fn timers(&mut self, now: u64) {
        while let Some((i, generation)) = self.nic.due(now) {
            let Some(Some(s)) = self.slots.get_mut(i) else {
                continue;
            };
            if s.generation != generation {
                continue;
            }
            s.qp.on_timers(now, &mut self.verbs);
            if let Some(flow) = s.sends
                && !s.stuck_reported
                && s.qp.timeouts_in_a_row() >= STUCK_AFTER_TIMEOUTS
            {
                s.stuck_reported = true;
                let (packets_acked, packets) = s.qp.packets_acked();
                let stuck = Stuck {
                    id: flow.id,
                    packets_acked,
                    packets,
                    timeouts: s.qp.sender_stats().timeouts,
                    at_ns: now,
                };
                self.announce(FlowEvent::Stuck(stuck));
            }
            self.after_change(i, now);
        }
    }

    /// Sends what the NIC may send now, queue pairs served round robin one packet at a time,
    /// never faster than the line rate in all (each queue pair still paces itself).
    fn send_data(&mut self, now: u64) {
        while let Some(i) = self.nic.next_to_serve(now, self.cfg.timing.burst_credit_ns) {
            let Some(Some(s)) = self.slots.get_mut(i) else {
                continue;
            };
            s.queued = false;
            if !s.qp.ready(now) {
                self.schedule(i, now);
                continue;
            }
            if self.data.is_full() {
                self.flush_data();
            }
            let Some(Some(s)) = self.slots.get_mut(i) else {
                continue;
            };
            match s.qp.build_next(now, self.data.slot(), self.tos, &mut self.verbs) {
                Ok(Some(n)) => {
                    let ip = &self.data.slot()[..n];
                    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
                    self.data.commit(n, SocketAddrV4::new(dst, 0));
                    self.nic.sent(
                        n as u64 - packet::IPV4_UDP_HEADERS as u64 + WIRE_OVERHEAD,
                        self.cfg.line_rate_bps,
                    );
                }
                Ok(None) => {}
                Err(e) => self.fail(io::Error::other(format!("building a packet: {e}"))),
            }
            self.send_pending_replies(i);
            self.after_change(i, now);
        }
    }

    /// Sends the replies QP slot `i` made on its own (a READ it could not read).
    fn send_pending_replies(&mut self, i: usize) {
        let Some(Some(s)) = self.slots.get_mut(i) else {
            return;
        };
        let pending = s.qp.take_pending_replies();
        if pending.is_empty() {
            return;
        }
        let (dest, to) = (s.qp.attr.dest_qpn, s.qp.addressing.dst);
        let a = Addressing {
            src: self.cfg.ip,
            dst: to,
            src_port: ROCEV2_PORT,
        };
        for r in pending {
            self.reply(dest, r, &a, &[]);
        }
    }

    /// Every flow it was given to send, as it stands now: finished ones first.
    pub fn flows_now(&self) -> Vec<FlowNow> {
        let finished = self.finished_records.iter().map(|(r, _)| FlowNow {
            id: r.id,
            src: r.src,
            dst: r.dst,
            size: r.size,
            acked_bytes: r.size,
            wire_bytes: r.wire_bytes,
            retransmissions: r.retransmissions,
            rate_bps: 0,
            window_bytes: None,
            rtt_ns: None,
            done: true,
        });
        let active = self.slots.iter().flatten().filter_map(|s| {
            let flow = s.sends?;
            let st = s.qp.sender_stats();
            Some(FlowNow {
                id: flow.id,
                src: flow.src,
                dst: flow.dst,
                size: flow.size,
                acked_bytes: s.qp.acked_bytes(),
                wire_bytes: st.wire_bytes,
                retransmissions: st.retransmissions,
                rate_bps: s.qp.cc.rate_bps(),
                window_bytes: s.qp.cc.window_bytes(),
                rtt_ns: st.rtt_last_ns,
                done: false,
            })
        });
        finished.chain(active).collect()
    }

    /// What it did up to `now`: every flow's record and samples, its counters.
    pub fn report(&mut self, now: u64) -> EndpointReport {
        let mut sent = Vec::new();
        let mut series = Vec::new();
        let mut received: Vec<ReceiveRecord> = Vec::new();
        let mut active = Vec::new();
        for s in self.slots.iter_mut().flatten() {
            if let Some(flow) = s.sends {
                active.push((flow_record(&flow, &s.qp, None), s.qp.take_series()));
            }
            if let Some(flow) = s.receives {
                let st = s.qp.receiver_stats();
                received.push(ReceiveRecord {
                    id: flow.id,
                    size: flow.size,
                    bytes_ok: st.bytes_ok,
                    content_errors: st.content_errors,
                    duplicates: st.duplicates,
                    out_of_order: st.out_of_order,
                    done_ns: st.last_message_ns.filter(|_| st.messages > 0),
                });
            }
        }
        for (record, samples) in std::mem::take(&mut self.finished_records).into_iter().chain(active) {
            if !samples.is_empty() {
                series.push((record.id, samples));
            }
            sent.push(record);
        }
        sent.sort_by_key(|r| r.id);
        received.sort_by_key(|r| r.id);
        EndpointReport {
            name: self.cfg.name.clone(),
            sent,
            received,
            series,
            counters: EndpointCounters {
                wake_late_p50_ns: self.wake_late.value_at_quantile(0.5),
                wake_late_p99_ns: self.wake_late.value_at_quantile(0.99),
                pfc_paused_ns: self.nic.paused_ns(now),
                ..self.counters.clone()
            },
            stalls: std::mem::take(&mut self.stalls),
            controllers: std::mem::take(&mut self.controllers),
            pfc_received: std::mem::take(&mut self.pfc_received),
            xoffs_read: std::mem::take(&mut self.xoffs_read),
            program_qps: self.program_qps_now(),
        }
    }

    /// Its time for an event at `t`: `t`, or the latest time it acted at if that is later.
    fn advance(&mut self, t: u64) -> u64 {
        self.time_ns = self.time_ns.max(t);
        self.time_ns
    }

    /// Does what is due at `now` once the inputs are in: replies out, timers, data the NIC may
    /// send; returns when it next needs running.
    pub fn step(&mut self, now: u64) -> Option<u64> {
        let now = self.advance(now);
        self.flush_control();
        self.timers(now);
        self.send_data(now);
        if !self.data.is_empty() {
            self.flush_data();
        }
        if !self.control.is_empty() {
            self.flush_control();
        }
        // The lab's own completions (receives of SEND flows) need no one's attention.
        while self
            .verbs
            .cq_mut(self.lab.context, self.lab.cq)
            .is_ok_and(|q| q.pop().is_some())
        {}
        let slots = &self.slots;
        self.nic
            .prune(|i, g| !matches!(slots.get(i), Some(Some(s)) if s.generation == g));
        self.nic.next_deadline()
    }
}

/// True for what the lab's own flows answer: data (WRITE or SEND without immediate), ACKs, PSN
/// sequence NAKs and CNPs; anything else sent to them is malformed to them.
fn lab_understands(action: &Action, opcode: Opcode) -> bool {
    match action {
        Action::Request { .. } => matches!(
            opcode,
            Opcode::WriteFirst
                | Opcode::WriteMiddle
                | Opcode::WriteLast
                | Opcode::WriteOnly
                | Opcode::SendFirst
                | Opcode::SendMiddle
                | Opcode::SendLast
                | Opcode::SendOnly
        ),
        Action::Ack { .. } | Action::Cnp { .. } => true,
        Action::Nak { code, .. } => *code == NakCode::PsnSequenceError,
        _ => false,
    }
}

/// The record of lab flow `flow` sent on `qp` (finished at `end_ns`, if it has).
fn flow_record(flow: &FlowSpec, qp: &Qp, end_ns: Option<u64>) -> FlowRecord {
    let st = qp.sender_stats();
    FlowRecord {
        id: flow.id,
        src: flow.src,
        dst: flow.dst,
        size: flow.size,
        start_ns: flow.start_ns,
        end_ns,
        packets_sent: st.packets_sent,
        retransmissions: st.retransmissions,
        timeouts: st.timeouts,
        naks: st.naks,
        cnps: st.cnps,
        wire_bytes: st.wire_bytes,
        rtt_min_ns: st.rtt_min_ns,
        rtt_mean_ns: st.rtt_mean_ns,
    }
}
