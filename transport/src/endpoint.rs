//! One emulated host's transport: a thread that owns the host's sockets and queue pairs, receives
//! and answers in batches, paces data out on each QP's virtual schedule, and runs the timers.
//! The caller decides where the thread runs (`enter` is called first, e.g. to join a network
//! namespace), so the transport itself knows nothing of namespaces.

use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use int_format::int::{HopRecord, IntHeaders, source};
use int_format::roce::{AethRepr, BthRepr, NakCode, Opcode, ROCEV2_PORT, Syndrome};
use int_format::{Error, Layer};
use serde::Serialize;

use crate::cc::{ControllerConfig, PathInfo};
use crate::flow::{
    Completion, FlowEvent, FlowPath, FlowRecord, FlowSpec, ReceiveRecord, STUCK_AFTER_TIMEOUTS, Sample, Stuck,
};
use crate::packet::{self, Addressing, Extension, Received};
use crate::receiver::{ReceiverPolicy, RecvQp, Replies, Reply};
use crate::sender::{SendQp, SenderTiming, WIRE_OVERHEAD};
use crate::socket::{BATCH, RecvBatch, SendBatch, Socket};

/// Hops a received echo may carry at most (more are ignored).
const MAX_HOPS: usize = 16;
/// The QP number of the lab's reachability probes: a receiver answers a data packet for it with
/// an ACK echoing its INT, and keeps no state. Flows must use other QP numbers.
pub const PROBE_QP: u32 = 0x00ff_ffff;
/// Batches read per socket per loop turn, so sending is never starved.
const RX_BATCHES_PER_TURN: usize = 4;

/// When data packets carry INT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntMode {
    /// When the controller needs it.
    #[default]
    Auto,
    /// Always (HPCC's instruction set if the controller names none); its bytes cost goodput.
    On,
    /// Never.
    Off,
}

/// How an endpoint behaves.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Name for logs and reports.
    pub name: String,
    /// The host's address: sockets bind to it, and only to it.
    pub ip: Ipv4Addr,
    /// UDP port that signals INT.
    pub int_port: u16,
    /// Payload bytes per packet (RoCE MTU: 1024, 2048 or 4096).
    pub mtu: u64,
    /// ACK every this many packets.
    pub ack_every: u32,
    /// Shortest time between CNPs of one QP (ns).
    pub cnp_interval_ns: u64,
    /// Sender timers.
    pub timing: SenderTiming,
    /// Longest sleep before polling again (ns).
    pub idle_poll_ns: u64,
    /// DSCP of every packet.
    pub dscp: u8,
    /// INT on data packets.
    pub int_mode: IntMode,
    /// Most switches that may stamp INT.
    pub hop_limit: u8,
    /// The host's NIC rate (b/s).
    pub line_rate_bps: u64,
    /// The largest base RTT of its paths (ns), which the RTO defaults from.
    pub base_rtt_ns: u64,
    /// The shared clock's origin: flow times are ns since it.
    pub origin: Instant,
    /// Where to announce each sent flow's completion, or that it is stuck, if anyone waits on
    /// them (a run, a workload whose next messages depend on earlier ones).
    pub events: Option<Sender<FlowEvent>>,
}

impl EndpointConfig {
    /// Defaults: MTU 1024, ACK per packet, CNPs at most every 50 us, RTO 16 base RTTs and at
    /// least 16 ms, doubling up to 64 times, 50 us idle poll, DSCP 26, INT when the controller
    /// needs it, hop limit 8, wake-ups 250 us late counted as stalls (several times the usual
    /// 20-70 us on the reference machine). The RTO must outlast the longest RTT a queue can cause: at
    /// emulation rates a few tens of KB queued are milliseconds, and a 4 ms RTO fired without
    /// any loss in a 4-to-1 incast at 100 Mb/s.
    pub fn new(name: &str, ip: Ipv4Addr, line_rate_bps: u64, base_rtt_ns: u64, origin: Instant) -> EndpointConfig {
        let rto = (16 * base_rtt_ns).max(16_000_000);
        EndpointConfig {
            name: name.to_owned(),
            ip,
            int_port: int_format::int::DEFAULT_INT_PORT,
            mtu: 1024,
            ack_every: 1,
            cnp_interval_ns: 50_000,
            timing: SenderTiming {
                rto_ns: rto,
                rto_max_ns: 64 * rto,
                burst_credit_ns: 100_000,
                sample_every_ns: 0,
                stall_ns: 250_000,
            },
            idle_poll_ns: 50_000,
            dscp: 26,
            int_mode: IntMode::Auto,
            hop_limit: 8,
            line_rate_bps,
            base_rtt_ns,
            origin,
            events: None,
        }
    }
}

impl EndpointConfig {
    /// What a controller of this host knows of a flow on `route`.
    pub fn path_info(&self, route: FlowPath) -> PathInfo {
        PathInfo {
            line_rate_bps: self.line_rate_bps,
            base_rtt_ns: route.base_rtt_ns,
            fabric_rtt_ns: route.fabric_rtt_ns,
            hops: route.hops,
            mtu_wire_bytes: self.mtu + 12 + 16 + 4 + WIRE_OVERHEAD,
            mtu_bytes: self.mtu,
        }
    }
}

/// What an endpoint counted.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct EndpointCounters {
    /// Datagrams received.
    pub rx_datagrams: u64,
    /// Datagrams sent.
    pub tx_datagrams: u64,
    /// Datagrams the socket would not take.
    pub tx_dropped: u64,
    /// Dropped: ICRC did not verify.
    pub bad_icrc: u64,
    /// Dropped: INT broken or truncated.
    pub bad_int: u64,
    /// Dropped: not a RoCE packet this transport understands.
    pub malformed: u64,
    /// Dropped: no QP with that number here.
    pub unknown_qp: u64,
    /// Dropped: PSN outside any window.
    pub psn_out_of_window: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// NAKs sent.
    pub naks_sent: u64,
    /// CNPs sent.
    pub cnps_sent: u64,
    /// CE-marked data packets received.
    pub ce_received: u64,
    /// Wake-ups at least `SenderTiming::stall_ns` late (see [`Stall`]).
    pub stalls: u64,
    /// The latest wake-up (ns).
    pub stall_max_ns: u64,
    /// Median lateness of the timer wake-ups (ns): how far past its schedule the sender
    /// thread runs, the host side of the emulation's timing error.
    pub wake_late_p50_ns: u64,
    /// 99th percentile of that lateness (ns).
    pub wake_late_p99_ns: u64,
}

/// A wake-up of the endpoint thread that came late by at least `SenderTiming::stall_ns`: the host could not
/// send or receive meanwhile, as no real NIC would fail to. A stalled sender leaves its
/// bottleneck idle, which a controller measuring utilization (HPCC) answers by speeding up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stall {
    /// When the thread should have woken (endpoint clock, ns).
    pub at_ns: u64,
    /// How late it woke (ns).
    pub late_ns: u64,
}

/// Stalls an endpoint keeps the times of (the count goes on).
const MAX_STALLS_KEPT: usize = 100_000;

/// Everything an endpoint has to say at the end.
#[derive(Debug, Clone, Default)]
pub struct EndpointReport {
    /// Endpoint name.
    pub name: String,
    /// Flows it sent.
    pub sent: Vec<FlowRecord>,
    /// Flows it received.
    pub received: Vec<ReceiveRecord>,
    /// Time series per sent flow (when sampling is on).
    pub series: Vec<(u32, Vec<Sample>)>,
    /// Counters.
    pub counters: EndpointCounters,
    /// Its stalls, in time order.
    pub stalls: Vec<Stall>,
}

/// The answer to a reachability probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeReply {
    /// The tag the probe was sent with.
    pub tag: u32,
    /// Round trip (ns, endpoint clock).
    pub rtt_ns: u64,
    /// The INT hops of the probe's way there, in path order.
    pub hops: Vec<HopRecord>,
}

/// A probe to send: from a flow's UDP source port to its destination, so that ECMP takes it
/// the way the flow will go.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Destination host.
    pub dst: Ipv4Addr,
    /// UDP source port (the flow's).
    pub src_port: u16,
    /// Returned in the reply.
    pub tag: u32,
    /// Where the reply goes.
    pub reply: Sender<ProbeReply>,
}

enum Command {
    Send(FlowSpec, ControllerConfig, FlowPath),
    Expect(FlowSpec),
    Probe(Probe),
    Stop,
}

/// A running endpoint.
pub struct Endpoint {
    commands: Sender<Command>,
    thread: Option<JoinHandle<io::Result<EndpointReport>>>,
    finished: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Endpoint")
    }
}

impl Endpoint {
    /// Starts the endpoint thread: it calls `enter` (to join the host's namespace, say), binds
    /// its sockets, and runs. Returns once the sockets are bound.
    pub fn start(
        config: EndpointConfig,
        enter: impl FnOnce() -> io::Result<()> + Send + 'static,
    ) -> io::Result<Endpoint> {
        let (commands, rx) = crossbeam_channel::unbounded();
        let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
        let finished = Arc::new(AtomicUsize::new(0));
        let done = finished.clone();
        let name = config.name.clone();
        let thread = std::thread::Builder::new().name(format!("ep-{name}")).spawn(move || {
            let setup = enter().and_then(|()| Host::open(config, rx, done));
            match setup {
                Ok(host) => {
                    let _ = ready_tx.send(Ok(()));
                    host.run()
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    Err(e)
                }
            }
        })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Endpoint {
                commands,
                thread: Some(thread),
                finished,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(io::Error::new(e.kind(), format!("endpoint {name}: {e}")))
            }
            Err(_) => Err(io::Error::other(format!("endpoint {name}: thread ended during start"))),
        }
    }

    /// Sends `flow`'s message (starting at its start time) under the controller `cc`, which
    /// takes what it derives from `path`. Fails
    /// when the endpoint thread has ended (its error comes with [`Endpoint::stop`]).
    pub fn send(&self, flow: FlowSpec, cc: ControllerConfig, path: FlowPath) -> io::Result<()> {
        self.command(Command::Send(flow, cc, path))
    }

    /// Prepares to receive `flow` (data for an unknown QP is dropped and counted).
    pub fn expect(&self, flow: FlowSpec) -> io::Result<()> {
        self.command(Command::Expect(flow))
    }

    /// Sends a reachability probe (see [`PROBE_QP`]); its reply, if any, comes on
    /// `probe.reply`. The probe's socket becomes the flow's when a flow with that source port
    /// is sent.
    pub fn probe(&self, probe: Probe) -> io::Result<()> {
        self.command(Command::Probe(probe))
    }

    fn command(&self, c: Command) -> io::Result<()> {
        self.commands
            .send(c)
            .map_err(|_| io::Error::other("the endpoint thread has ended"))
    }

    /// Flows completed so far here: sent flows fully acknowledged plus received flows complete.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }

    /// Stops the thread and returns the report.
    pub fn stop(mut self) -> io::Result<EndpointReport> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> io::Result<EndpointReport> {
        let _ = self.commands.send(Command::Stop);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| io::Error::other("endpoint thread panicked"))?,
            None => Ok(EndpointReport::default()),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.shutdown();
        }
    }
}

struct Sending {
    qp: SendQp,
    socket: Socket,
    batch: SendBatch,
    dst: SocketAddrV4,
    addressing: Addressing,
    done_counted: bool,
    stuck_reported: bool,
}

/// The endpoint thread's state.
struct Host {
    cfg: EndpointConfig,
    commands: Receiver<Command>,
    finished: Arc<AtomicUsize>,
    roce: Socket,
    int: Socket,
    control: SendBatch,
    rx: RecvBatch,
    senders: Vec<Sending>,
    sender_of: HashMap<u32, usize>,
    /// Sockets opened for probes, by source port, until a flow takes them.
    probe_sockets: HashMap<u16, Socket>,
    /// Probes awaiting replies, by PSN.
    probes: HashMap<u32, PendingProbe>,
    next_probe_psn: u32,
    receivers: HashMap<u32, RecvQp>,
    counters: EndpointCounters,
    policy: ReceiverPolicy,
    /// When the NIC finishes the data it was last given (ns): every QP shares its line rate.
    nic_free_ns: u64,
    /// The QP the NIC serves first next time (round robin).
    next_qp: usize,
    stalls: Vec<Stall>,
    /// Lateness of each timer wake-up (ns).
    wake_late: Histogram<u64>,
}

impl Host {
    fn open(cfg: EndpointConfig, commands: Receiver<Command>, finished: Arc<AtomicUsize>) -> io::Result<Host> {
        let roce = Socket::bind(SocketAddrV4::new(cfg.ip, ROCEV2_PORT), cfg.dscp)?;
        let int = Socket::bind(SocketAddrV4::new(cfg.ip, cfg.int_port), cfg.dscp)?;
        let policy = ReceiverPolicy {
            ack_every: cfg.ack_every.max(1),
            cnp_interval_ns: cfg.cnp_interval_ns,
        };
        Ok(Host {
            cfg,
            commands,
            finished,
            roce,
            int,
            control: SendBatch::default(),
            rx: RecvBatch::default(),
            senders: Vec::new(),
            sender_of: HashMap::new(),
            probe_sockets: HashMap::new(),
            probes: HashMap::new(),
            next_probe_psn: 0,
            receivers: HashMap::new(),
            counters: EndpointCounters::default(),
            policy,
            nic_free_ns: 0,
            next_qp: 0,
            stalls: Vec::new(),
            // Up to 1 s late at 2 significant digits: a few KB.
            wake_late: Histogram::new_with_max(1_000_000_000, 2).map_err(io::Error::other)?,
        })
    }

    fn now(&self) -> u64 {
        self.cfg.origin.elapsed().as_nanos() as u64
    }

    fn run(mut self) -> io::Result<EndpointReport> {
        intlab_runtime::sys::thread::precise_timers()?;
        loop {
            let mut stop = false;
            while let Ok(cmd) = self.commands.try_recv() {
                match cmd {
                    Command::Send(flow, cc, path) => self.add_sender(flow, &cc, path)?,
                    Command::Expect(flow) => {
                        self.receivers.insert(flow.id, RecvQp::new(flow, self.cfg.mtu));
                    }
                    Command::Probe(p) => self.send_probe(p)?,
                    Command::Stop => stop = true,
                }
            }
            if stop {
                break;
            }
            self.receive(false)?;
            self.receive(true)?;
            self.flush_control()?;
            self.send_data()?;
            self.wait();
        }
        Ok(self.report())
    }

    fn add_sender(&mut self, flow: FlowSpec, cc: &ControllerConfig, route: FlowPath) -> io::Result<()> {
        let path = self.cfg.path_info(route);
        let controller = cc
            .build(path)
            .map_err(|e| io::Error::other(format!("flow {}: {e}", flow.id)))?;
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
        let socket = match self.probe_sockets.remove(&flow.src_port()) {
            Some(s) => s,
            None => Socket::bind(SocketAddrV4::new(self.cfg.ip, flow.src_port()), self.cfg.dscp)?,
        };
        let qp = SendQp::new(flow, controller, int, self.cfg.mtu, self.cfg.timing);
        self.sender_of.insert(flow.id, self.senders.len());
        self.senders.push(Sending {
            qp,
            socket,
            batch: SendBatch::default(),
            dst: SocketAddrV4::new(flow.dst, port),
            addressing: Addressing {
                src: self.cfg.ip,
                dst: flow.dst,
                src_port: flow.src_port(),
            },
            done_counted: false,
            stuck_reported: false,
        });
        Ok(())
    }

    fn receive(&mut self, via_int: bool) -> io::Result<()> {
        for _ in 0..RX_BATCHES_PER_TURN {
            let sock = if via_int { &self.int } else { &self.roce };
            let n = sock.recv_batch(&mut self.rx)?;
            let now = self.now();
            for i in 0..n {
                self.counters.rx_datagrams += 1;
                let (bytes, meta) = self.rx.get(i);
                let a = Addressing {
                    src: *meta.from.ip(),
                    dst: self.cfg.ip,
                    src_port: meta.from.port(),
                };
                // Decode first (borrowing the receive buffer), then act on a copy of what matters.
                match packet::parse(bytes, via_int, &a) {
                    Err(Error::Malformed { layer: Layer::Icrc, .. }) => self.counters.bad_icrc += 1,
                    Err(
                        Error::Truncated {
                            layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                            ..
                        }
                        | Error::Malformed {
                            layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                            ..
                        },
                    ) => self.counters.bad_int += 1,
                    Err(_) => self.counters.malformed += 1,
                    Ok(r) => {
                        let ce = meta.tos & 3 == 3;
                        let echo_len = r.int_bytes.len();
                        let mut echo = [0u8; 512];
                        let echo_len = echo_len.min(echo.len());
                        echo[..echo_len].copy_from_slice(&r.int_bytes[..echo_len]);
                        let action = Self::classify(&r);
                        match action {
                            Action::Data { qp: PROBE_QP, psn } => {
                                let replies = Replies {
                                    ack: Some(Reply::Ack { psn, msn: 0 }),
                                    ..Replies::default()
                                };
                                self.answer(PROBE_QP, replies, *meta.from.ip(), &echo[..echo_len])?;
                            }
                            Action::Ack { qp: PROBE_QP, psn, .. } => match hops_of(r.payload) {
                                Ok((hops, n)) => self.probe_answered(psn, now, &hops[..n]),
                                Err(()) => self.counters.bad_int += 1,
                            },
                            Action::Data { qp, psn } => {
                                let Some(rq) = self.receivers.get_mut(&qp) else {
                                    self.counters.unknown_qp += 1;
                                    continue;
                                };
                                let was_done = rq.is_done();
                                let replies = rq.on_data(psn, r.payload, ce, now, &self.policy);
                                if !was_done && rq.is_done() {
                                    self.finished.fetch_add(1, Ordering::Relaxed);
                                }
                                self.counters.ce_received += u64::from(ce);
                                self.answer(qp, replies, *meta.from.ip(), &echo[..echo_len])?;
                            }
                            Action::Ack { qp, psn, nak } => {
                                let hops = match hops_of(r.payload) {
                                    Ok(h) => h,
                                    Err(()) => {
                                        self.counters.bad_int += 1;
                                        continue;
                                    }
                                };
                                let Some(&s) = self.sender_of.get(&qp) else {
                                    self.counters.unknown_qp += 1;
                                    continue;
                                };
                                let sending = &mut self.senders[s];
                                let ok = if nak {
                                    sending.qp.on_nak(psn, now)
                                } else {
                                    sending.qp.on_ack(psn, now, &hops.0[..hops.1])
                                };
                                if !ok {
                                    self.counters.psn_out_of_window += 1;
                                }
                                if sending.qp.is_done() && !sending.done_counted {
                                    sending.done_counted = true;
                                    self.finished.fetch_add(1, Ordering::Relaxed);
                                    self.announce(FlowEvent::Completed(Completion { id: qp, end_ns: now }));
                                }
                            }
                            Action::Cnp { qp } => match self.sender_of.get(&qp) {
                                Some(&s) => self.senders[s].qp.on_cnp(now),
                                None => self.counters.unknown_qp += 1,
                            },
                            Action::Unsupported => self.counters.malformed += 1,
                        }
                    }
                }
            }
            if n < BATCH {
                break;
            }
        }
        Ok(())
    }

    fn classify(r: &Received<'_>) -> Action {
        let qp = r.bth.dest_qp;
        match r.bth.opcode {
            // Data without immediate (the *_IMM opcodes are not implemented: unsupported).
            Opcode::WriteFirst
            | Opcode::WriteMiddle
            | Opcode::WriteLast
            | Opcode::WriteOnly
            | Opcode::SendFirst
            | Opcode::SendMiddle
            | Opcode::SendLast
            | Opcode::SendOnly => Action::Data { qp, psn: r.bth.psn },
            Opcode::Acknowledge => match r.aeth.map(|a| a.syndrome) {
                Some(Syndrome::Ack { .. }) => Action::Ack {
                    qp,
                    psn: r.bth.psn,
                    nak: false,
                },
                Some(Syndrome::Nak(NakCode::PsnSequenceError)) => Action::Ack {
                    qp,
                    psn: r.bth.psn,
                    nak: true,
                },
                _ => Action::Unsupported,
            },
            Opcode::Cnp => Action::Cnp { qp },
            _ => Action::Unsupported,
        }
    }

    /// Tells whoever listens about a flow; a listener that has gone (the run ended) misses
    /// nothing it needed.
    fn announce(&self, e: FlowEvent) {
        if let Some(c) = &self.cfg.events {
            let _gone = c.send(e);
        }
    }

    /// Sends probe `p` from a socket on its source port (kept for the flow that will use it).
    fn send_probe(&mut self, p: Probe) -> io::Result<()> {
        let socket = match self.probe_sockets.entry(p.src_port) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Socket::bind(SocketAddrV4::new(self.cfg.ip, p.src_port), self.cfg.dscp)?)
            }
        };
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
        let mut buf = [0u8; 256];
        let bth = BthRepr::new(Opcode::SendOnly, PROBE_QP, psn);
        let n = packet::write(&mut buf, &a, Some(&int), &bth, Extension::None, &[]).map_err(io::Error::other)?;
        let sent_ns = self.cfg.origin.elapsed().as_nanos() as u64;
        socket.send_one(&buf[..n], SocketAddrV4::new(p.dst, self.cfg.int_port))?;
        self.counters.tx_datagrams += 1;
        self.probes.insert(
            psn,
            PendingProbe {
                tag: p.tag,
                sent_ns,
                reply: p.reply,
            },
        );
        Ok(())
    }

    fn probe_answered(&mut self, psn: u32, now: u64, hops: &[HopRecord]) {
        match self.probes.remove(&psn) {
            Some(p) => {
                // The run may have stopped listening: the reply is then of no use to anyone.
                let _unheard = p.reply.send(ProbeReply {
                    tag: p.tag,
                    rtt_ns: now.saturating_sub(p.sent_ns),
                    hops: hops.to_vec(),
                });
            }
            None => self.counters.unknown_qp += 1,
        }
    }

    /// Queues the ACK/NAK and CNP a data packet produced, back to `to` on the RoCE port.
    fn answer(&mut self, qp: u32, replies: Replies, to: Ipv4Addr, echo: &[u8]) -> io::Result<()> {
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
            if self.control.is_full() {
                self.flush_control()?;
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
                Reply::Cnp => {
                    self.counters.cnps_sent += 1;
                    (BthRepr::new(Opcode::Cnp, qp, 0), Extension::Cnp, &[])
                }
            };
            let n = packet::write(self.control.slot(), &a, None, &bth, ext, payload).map_err(io::Error::other)?;
            self.control.commit(n, dst);
        }
        Ok(())
    }

    fn flush_control(&mut self) -> io::Result<()> {
        let queued = self.control.len();
        let sent = self.roce.send_batch(&mut self.control)?;
        self.counters.tx_datagrams += sent as u64;
        self.counters.tx_dropped += (queued - sent) as u64;
        Ok(())
    }

    /// Sends what is due as a NIC would: QPs served round robin, one packet at a time, never
    /// faster than the line rate in total, so the host's link never queues more than a real
    /// NIC lets it (each QP still paces itself at its controller's rate).
    fn send_data(&mut self) -> io::Result<()> {
        let now = self.now();
        let mut stuck = Vec::new();
        for s in &mut self.senders {
            s.qp.on_timers(now);
            if !s.stuck_reported && s.qp.timeouts_in_a_row() >= STUCK_AFTER_TIMEOUTS {
                s.stuck_reported = true;
                let (packets_acked, packets) = s.qp.packets_acked();
                stuck.push(Stuck {
                    id: s.qp.spec().id,
                    packets_acked,
                    packets,
                    timeouts: s.qp.record().timeouts,
                    at_ns: now,
                });
            }
        }
        for s in stuck {
            self.announce(FlowEvent::Stuck(s));
        }
        // A late wake-up sends what was due, but an idle NIC banks no more than the burst credit.
        self.nic_free_ns = self
            .nic_free_ns
            .max(now.saturating_sub(self.cfg.timing.burst_credit_ns));
        let n_qps = self.senders.len();
        while self.nic_free_ns <= now {
            let mut sent_one = false;
            for k in 0..n_qps {
                let i = (self.next_qp + k) % n_qps;
                let s = &mut self.senders[i];
                if !s.qp.ready(now) || s.batch.is_full() {
                    continue;
                }
                let n =
                    s.qp.build_next(now, s.batch.slot(), &s.addressing)
                        .map_err(io::Error::other)?;
                s.batch.commit(n, s.dst);
                let wire_bits = (n as u64 + WIRE_OVERHEAD) * 8;
                self.nic_free_ns += wire_bits * 1_000_000_000 / self.cfg.line_rate_bps.max(1);
                self.next_qp = (i + 1) % n_qps;
                sent_one = true;
                break;
            }
            if !sent_one {
                break;
            }
        }
        for s in &mut self.senders {
            let queued = s.batch.len();
            if queued > 0 {
                let sent = s.socket.send_batch(&mut s.batch)?;
                self.counters.tx_datagrams += sent as u64;
                self.counters.tx_dropped += (queued - sent) as u64;
            }
        }
        Ok(())
    }

    fn wait(&mut self) {
        let now = self.now();
        // A QP due now while the NIC is busy waits for the NIC.
        let next = self
            .senders
            .iter()
            .filter_map(|s| s.qp.next_event_ns())
            .min()
            .map(|t| if t <= now { t.max(self.nic_free_ns) } else { t });
        let sleep = next
            .map_or(self.cfg.idle_poll_ns, |t| t.saturating_sub(now))
            .min(self.cfg.idle_poll_ns);
        if sleep == 0 {
            return;
        }
        let mut fds = [
            libc::pollfd {
                fd: self.roce.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.int.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let d = Duration::from_nanos(sleep);
        let ts = libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a live pollfd array of the length passed and a valid timespec.
        let ready = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
        let late = self.now().saturating_sub(now + sleep);
        // Only a timer wake-up has a schedule to be late for; a packet wakes the thread early.
        if ready == 0 {
            let _ = self.wake_late.record(late);
        }
        if late >= self.cfg.timing.stall_ns {
            for s in &mut self.senders {
                s.qp.note_stall();
            }
            self.counters.stalls += 1;
            self.counters.stall_max_ns = self.counters.stall_max_ns.max(late);
            if self.stalls.len() < MAX_STALLS_KEPT {
                self.stalls.push(Stall {
                    at_ns: now + sleep,
                    late_ns: late,
                });
            }
        }
    }

    fn report(self) -> EndpointReport {
        let mut sent = Vec::new();
        let mut series = Vec::new();
        for s in self.senders {
            let (record, samples) = s.qp.finish();
            if !samples.is_empty() {
                series.push((record.id, samples));
            }
            sent.push(record);
        }
        let mut received: Vec<ReceiveRecord> = self.receivers.values().map(|r| r.record().clone()).collect();
        received.sort_by_key(|r| r.id);
        EndpointReport {
            name: self.cfg.name,
            sent,
            received,
            series,
            counters: EndpointCounters {
                wake_late_p50_ns: self.wake_late.value_at_quantile(0.5),
                wake_late_p99_ns: self.wake_late.value_at_quantile(0.99),
                ..self.counters
            },
            stalls: self.stalls,
        }
    }
}

struct PendingProbe {
    tag: u32,
    sent_ns: u64,
    reply: Sender<ProbeReply>,
}

enum Action {
    Data { qp: u32, psn: u32 },
    Ack { qp: u32, psn: u32, nak: bool },
    Cnp { qp: u32 },
    Unsupported,
}

/// The hops of an echoed INT (ACK payload), in path order; an empty payload means no INT.
fn hops_of(payload: &[u8]) -> Result<([HopRecord; MAX_HOPS], usize), ()> {
    let mut out = [HopRecord::default(); MAX_HOPS];
    if payload.is_empty() {
        return Ok((out, 0));
    }
    let int = IntHeaders::parse(payload).map_err(|_| ())?;
    let n = int.hop_count().min(MAX_HOPS);
    // The stack is newest first; controllers want the path order.
    for (i, hop) in int.hops().take(n).enumerate() {
        out[n - 1 - i] = hop.map_err(|_| ())?;
    }
    Ok((out, n))
}
