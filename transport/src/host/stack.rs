//! A host's transport without its sockets: queue pairs, the NIC, replies and probes, driven by
//! the datagrams and pause frames given to it and the time it is told. The lab's [`super::Host`]
//! feeds it from the kernel's sockets; the deterministic bed feeds it from memory on a virtual
//! clock, so both run the same code.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::Sender;
use hdrhistogram::Histogram;
use int_format::int::{HopRecord, source};
use int_format::roce::{AethRepr, BthRepr, NakCode, Opcode, ROCEV2_PORT, Syndrome};
use int_format::{Error, Layer};
use intlab_runtime::Hiccup;

use crate::cc::ControllerConfig;
use crate::classify::{Action, EchoedHops, classify};
use crate::endpoint::{
    EndpointConfig, EndpointCounters, EndpointReport, IntMode, MAX_STALLS_KEPT, PROBE_QP, Probe, ProbeReply, Stall,
};
use crate::flow::{
    Completion, FlowEvent, FlowNow, FlowPath, FlowRecord, FlowSpec, ReceiveRecord, STUCK_AFTER_TIMEOUTS, Sample, Stuck,
};
use crate::nic::Nic;
use crate::packet::{self, Addressing, Extension};
use crate::pause::Pause;
use crate::receiver::{ReceiverPolicy, RecvQp, Replies, Reply};
use crate::sender::{SendQp, WIRE_OVERHEAD};
use crate::socket::{ECT0, RecvMeta, SendBatch};

/// Where a host's datagrams go: the kernel's sockets in a lab, the bed's links in tests.
pub trait Wire {
    /// Sends the queued replies (ACKs, NAKs): UDP payloads from the host's RoCE port, each to
    /// its address; returns how many went.
    fn send_replies(&mut self, batch: &mut SendBatch) -> io::Result<usize>;
    /// Sends the queued IPv4 packets (data, CNPs, probes: headers written by the transport);
    /// returns how many went.
    fn send_packets(&mut self, batch: &mut SendBatch) -> io::Result<usize>;
}

struct Sending {
    qp: SendQp,
    /// Where its data goes.
    dst: SocketAddrV4,
    addressing: Addressing,
    /// Bumped whenever its state changes: timer entries of older generations are stale.
    generation: u64,
    /// In the NIC's serving queue.
    queued: bool,
    stuck_reported: bool,
}

struct PendingProbe {
    tag: u32,
    sent_ns: u64,
    reply: Sender<ProbeReply>,
}

/// A host's transport, sending through `W`.
pub struct HostStack<W> {
    cfg: EndpointConfig,
    wire: W,
    finished: Arc<AtomicUsize>,
    tos: u8,
    control: SendBatch,
    data: SendBatch,
    /// Sending queue pairs by slot; a finished one leaves its slot free.
    senders: Vec<Option<Sending>>,
    free_slots: Vec<usize>,
    /// QP number → its slot, or None once it finished.
    sender_of: HashMap<u32, Option<usize>>,
    /// Records of the sent flows that finished.
    finished_records: Vec<(FlowRecord, Vec<Sample>)>,
    receivers: HashMap<u32, RecvQp>,
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
}

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
        Ok(HostStack {
            tos: (cfg.dscp << 2) | ECT0,
            cfg,
            wire,
            finished,
            control: SendBatch::default(),
            data: SendBatch::default(),
            senders: Vec::new(),
            free_slots: Vec::new(),
            sender_of: HashMap::new(),
            finished_records: Vec::new(),
            receivers: HashMap::new(),
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
        for s in self.senders.iter_mut().flatten() {
            s.qp.note_stall();
        }
        self.counters.stalls += 1;
        self.counters.stall_max_ns = self.counters.stall_max_ns.max(late_ns);
        if self.stalls.len() < MAX_STALLS_KEPT {
            self.stalls.push(Stall { at_ns, late_ns });
        }
    }

    /// The lab's latest hiccup is `h`: its senders take no RTT sample from a packet in flight
    /// during it (see [`SendQp::note_hiccup`]).
    pub fn note_hiccup(&mut self, h: Hiccup) {
        if self.hiccup == Some(h) {
            return;
        }
        self.hiccup = Some(h);
        for s in self.senders.iter_mut().flatten() {
            s.qp.note_hiccup(h);
        }
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
        let port = if int.is_some() { self.cfg.int_port } else { ROCEV2_PORT };
        let qp = SendQp::new(flow, controller, int, self.cfg.mtu, self.cfg.timing);
        let sending = Sending {
            qp,
            dst: SocketAddrV4::new(flow.dst, port),
            addressing: Addressing {
                src: self.cfg.ip,
                dst: flow.dst,
                src_port: flow.src_port,
            },
            generation: 0,
            queued: false,
            stuck_reported: false,
        };
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.senders[i] = Some(sending);
                i
            }
            None => {
                self.senders.push(Some(sending));
                self.senders.len() - 1
            }
        };
        self.sender_of.insert(flow.id, Some(slot));
        self.schedule(slot, now);
        Ok(())
    }

    /// Slot `i`'s state changed at `now`: into the serving queue if it may send, a timer for
    /// its next event.
    fn schedule(&mut self, i: usize, now: u64) {
        let Some(Some(s)) = self.senders.get_mut(i) else { return };
        s.generation += 1;
        if s.qp.is_done() {
            return;
        }
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
        let Some(s) = self.senders.get_mut(i).and_then(Option::take) else {
            return;
        };
        let id = s.qp.spec().id;
        self.finished.fetch_add(1, Ordering::Relaxed);
        self.announce(FlowEvent::Completed(Completion { id, end_ns: now }));
        self.finished_records.push(s.qp.finish());
        self.sender_of.insert(id, None);
        self.free_slots.push(i);
    }

    /// Expects `flow`: its data is received, acknowledged and counted.
    pub fn expect(&mut self, flow: FlowSpec) {
        self.receivers.insert(flow.id, RecvQp::new(flow, self.cfg.mtu));
    }

    /// `frames` PFC frames arrived; `last` is the last word on the host's data priority among
    /// them, which pauses (or resumes) its NIC from when it arrived.
    pub fn pauses(&mut self, frames: usize, last: Option<Pause>) {
        self.counters.pfc_rx += frames as u64;
        if let Some(p) = last {
            self.nic.pause(p.at_ns, p.until_ns);
            if self.pfc_received.len() < PFC_KEPT {
                self.pfc_received.push((p.at_ns, p.until_ns > p.at_ns));
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
            Err(Error::Malformed { layer: Layer::Icrc, .. }) => {
                self.counters.bad_icrc += 1;
                return;
            }
            Err(
                Error::Truncated {
                    layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                    ..
                }
                | Error::Malformed {
                    layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                    ..
                },
            ) => {
                self.counters.bad_int += 1;
                return;
            }
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        let ce = meta.tos.unwrap_or(0) & 3 == 3;
        let mut echo = [0u8; 512];
        let echo_len = r.int_bytes.len().min(echo.len());
        echo[..echo_len].copy_from_slice(&r.int_bytes[..echo_len]);
        let from = *meta.from.ip();
        match classify(&r) {
            Action::Data { qp: PROBE_QP, psn } => {
                let replies = Replies {
                    ack: Some(Reply::Ack { psn, msn: 0 }),
                    ..Replies::default()
                };
                self.answer(PROBE_QP, replies, from, &echo[..echo_len]);
            }
            Action::Ack { qp: PROBE_QP, psn, .. } => match EchoedHops::parse(r.payload) {
                Ok(hops) => self.probe_answered(psn, now, hops.as_slice()),
                Err(_) => self.counters.bad_int += 1,
            },
            Action::Data { qp, psn } => {
                let Some(rq) = self.receivers.get_mut(&qp) else {
                    self.counters.unknown_qp += 1;
                    return;
                };
                let was_done = rq.is_done();
                let replies = rq.on_data(psn, r.payload, ce, now, &self.policy);
                if !was_done && rq.is_done() {
                    self.finished.fetch_add(1, Ordering::Relaxed);
                }
                self.counters.ce_received += u64::from(ce);
                self.answer(qp, replies, from, &echo[..echo_len]);
            }
            Action::Ack { qp, psn, nak } => {
                let hops = match EchoedHops::parse(r.payload) {
                    Ok(h) => h,
                    Err(_) => {
                        self.counters.bad_int += 1;
                        return;
                    }
                };
                let slot = match self.sender_of.get(&qp) {
                    Some(Some(s)) => *s,
                    // A late ACK of a flow that finished: nothing left to do.
                    Some(None) => return,
                    None => {
                        self.counters.unknown_qp += 1;
                        return;
                    }
                };
                let Some(Some(sending)) = self.senders.get_mut(slot) else {
                    return;
                };
                let ok = if nak {
                    sending.qp.on_nak(psn, now)
                } else {
                    sending.qp.on_ack(psn, now, hops.as_slice())
                };
                if !ok {
                    self.counters.psn_out_of_window += 1;
                }
                if sending.qp.is_done() {
                    self.retire(slot, now);
                } else {
                    self.schedule(slot, now);
                }
            }
            Action::Cnp { qp } => match self.sender_of.get(&qp) {
                Some(Some(s)) => {
                    let s = *s;
                    if let Some(Some(sending)) = self.senders.get_mut(s) {
                        sending.qp.on_cnp(now);
                    }
                    self.schedule(s, now);
                }
                Some(None) => {}
                None => self.counters.unknown_qp += 1,
            },
            Action::Unsupported => self.counters.malformed += 1,
        }
    }

    /// Queues the ACK/NAK and CNP a data packet produced, back to `to` on the RoCE port.
    fn answer(&mut self, qp: u32, replies: Replies, to: Ipv4Addr, echo: &[u8]) {
        if replies.out_of_window {
            self.counters.psn_out_of_window += 1;
        }
        let a = Addressing {
            src: self.cfg.ip,
            dst: to,
            src_port: ROCEV2_PORT,
        };
        let dst = SocketAddrV4::new(to, ROCEV2_PORT);
        for reply in [replies.ack, replies.cnp].into_iter().flatten() {
            if reply == Reply::Cnp {
                self.send_cnp(qp, &a);
                continue;
            }
            if self.control.is_full() {
                self.flush_control();
            }
            let (bth, ext, payload): (BthRepr, Extension, &[u8]) = match reply {
                Reply::Ack { psn, msn } => {
                    self.counters.acks_sent += 1;
                    let aeth = AethRepr {
                        syndrome: Syndrome::Ack {
                            credits: Syndrome::UNLIMITED_CREDITS,
                        },
                        msn,
                    };
                    (BthRepr::new(Opcode::Acknowledge, qp, psn), Extension::Aeth(aeth), echo)
                }
                Reply::Nak { psn, msn } => {
                    self.counters.naks_sent += 1;
                    let aeth = AethRepr {
                        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                        msn,
                    };
                    (BthRepr::new(Opcode::Acknowledge, qp, psn), Extension::Aeth(aeth), &[])
                }
                Reply::Cnp => continue,
            };
            match packet::write(self.control.slot(), &a, None, &bth, ext, payload) {
                Ok(n) => self.control.commit(n, dst),
                Err(e) => self.fail(io::Error::other(format!("building a reply: {e}"))),
            }
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
        match packet::write_ipv4(self.data.slot(), a, ROCEV2_PORT, tos, None, &bth, Extension::Cnp, &[]) {
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
            Extension::None,
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

    /// Runs the timers that are due: retransmission and controller timers.
    fn timers(&mut self, now: u64) {
        while let Some((i, generation)) = self.nic.due(now) {
            let Some(Some(s)) = self.senders.get_mut(i) else {
                continue;
            };
            if s.generation != generation {
                continue;
            }
            s.qp.on_timers(now);
            if !s.stuck_reported && s.qp.timeouts_in_a_row() >= STUCK_AFTER_TIMEOUTS {
                s.stuck_reported = true;
                let (packets_acked, packets) = s.qp.packets_acked();
                let stuck = Stuck {
                    id: s.qp.spec().id,
                    packets_acked,
                    packets,
                    timeouts: s.qp.record().timeouts,
                    at_ns: now,
                };
                self.announce(FlowEvent::Stuck(stuck));
            }
            self.schedule(i, now);
        }
    }

    /// Sends what the NIC may send now, queue pairs served round robin one packet at a time,
    /// never faster than the line rate in all (each queue pair still paces itself).
    fn send_data(&mut self, now: u64) {
        while let Some(i) = self.nic.next_to_serve(now, self.cfg.timing.burst_credit_ns) {
            let Some(Some(s)) = self.senders.get_mut(i) else {
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
            let Some(Some(s)) = self.senders.get_mut(i) else {
                continue;
            };
            let built =
                s.qp.build_next(now, self.data.slot(), &s.addressing, s.dst.port(), self.tos);
            match built {
                Ok(n) => {
                    self.data.commit(n, s.dst);
                    self.nic.sent(
                        n as u64 - packet::IPV4_UDP_HEADERS as u64 + WIRE_OVERHEAD,
                        self.cfg.line_rate_bps,
                    );
                }
                Err(e) => self.fail(io::Error::other(format!("building a packet: {e}"))),
            }
            self.schedule(i, now);
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
        finished
            .chain(self.senders.iter().flatten().map(|s| s.qp.now()))
            .collect()
    }

    /// What it did up to `now`: every flow's record and samples, its counters.
    pub fn report(&mut self, now: u64) -> EndpointReport {
        let mut sent = Vec::new();
        let mut series = Vec::new();
        let active = self.senders.drain(..).flatten().map(|s| s.qp.finish());
        for (record, samples) in std::mem::take(&mut self.finished_records).into_iter().chain(active) {
            if !samples.is_empty() {
                series.push((record.id, samples));
            }
            sent.push(record);
        }
        sent.sort_by_key(|r| r.id);
        let mut received: Vec<ReceiveRecord> = self.receivers.values().map(|r| r.record().clone()).collect();
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
        }
    }
}

impl<W: Wire> HostStack<W> {
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
        let senders = &self.senders;
        self.nic
            .prune(|i, g| !matches!(senders.get(i), Some(Some(s)) if s.generation == g));
        self.nic.next_deadline()
    }
}
