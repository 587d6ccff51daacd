//! One emulated host's transport, as its owner sees it: how it is configured, what it counts
//! and reports, and the [`Endpoint`] handle that gives it flows. The host itself
//! ([`crate::host::Host`]) is a task on a runtime worker; its sockets are opened wherever the
//! caller's `enter` puts a thread first (a host's network namespace, say), so the transport
//! knows nothing of namespaces.

use std::io;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::{Receiver, Sender};
use int_format::int::HopRecord;
use intlab_runtime::{Runtime, Waker};
use serde::Serialize;

use crate::cc::{ControllerConfig, PathInfo};
use crate::flow::{FlowEvent, FlowNow, FlowPath, FlowRecord, FlowSpec, ReceiveRecord, Sample};
use crate::host::Host;
use crate::packet::WIRE_OVERHEAD;
pub use crate::verbs::SenderTiming;

/// The QP number of the lab's reachability probes: a receiver answers a data packet for it with
/// an ACK echoing its INT, and keeps no state. Flows must use other QP numbers.
pub const PROBE_QP: u32 = 0x00ff_ffff;

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
    /// DSCP of data, ACKs and NAKs.
    pub dscp: u8,
    /// DSCP of CNPs: a class of their own, so they overtake the data they report on and no
    /// pause of the data's priority holds them (default 48, priority 6: NVIDIA ConnectX's
    /// `cnp_dscp` and `cnp_802p_prio` defaults).
    pub cnp_dscp: u8,
    /// Honour PFC: read the pause frames arriving on the host's interface and stop sending
    /// data while its priority (`priority`) is paused.
    pub pfc: bool,
    /// The 802.1p priority its data travels in, as the switches map its DSCP (default DSCP / 8).
    pub priority: u8,
    /// INT on data packets.
    pub int_mode: IntMode,
    /// Most switches that may stamp INT.
    pub hop_limit: u8,
    /// The host's NIC rate (b/s).
    pub line_rate_bps: u64,
    /// The largest base RTT of its paths (ns), which the RTO defaults from.
    pub base_rtt_ns: u64,
    /// Where to announce each sent flow's completion, or that it is stuck, if anyone waits on
    /// them (a run, a workload whose next messages depend on earlier ones).
    pub events: Option<Sender<FlowEvent>>,
    /// How its NIC treats the QPs of programs.
    pub programs: ProgramSettings,
}

/// How a host's NIC treats the QPs programs create through its verbs.
#[derive(Debug, Clone)]
pub struct ProgramSettings {
    /// The controller each program QP runs, as the lab's own flows do (the scenario's).
    pub controller: ControllerConfig,
    /// The lab's hosts a program QP may send to, with what the lab knows of the way there; a
    /// QP towards any other address is refused (the lab sends nowhere else).
    pub peers: std::collections::HashMap<Ipv4Addr, FlowPath>,
}

impl Default for ProgramSettings {
    /// Line rate, and no host to send to.
    fn default() -> Self {
        ProgramSettings {
            controller: ControllerConfig::LineRate,
            peers: std::collections::HashMap::new(),
        }
    }
}

impl EndpointConfig {
    /// Defaults: MTU 1024, ACK per packet, CNPs at most every 50 us, RTO 16 base RTTs and at
    /// least 16 ms, doubling up to 64 times, DSCP 26 (CNPs 48), INT when the controller
    /// needs it, hop limit 8, wake-ups 250 us late counted as stalls (several times the usual
    /// 20-70 us on the reference machine). The RTO must outlast the longest RTT a queue can cause: at
    /// emulation rates a few tens of KB queued are milliseconds, and a 4 ms RTO fired without
    /// any loss in a 4-to-1 incast at 100 Mb/s.
    pub fn new(name: &str, ip: Ipv4Addr, line_rate_bps: u64, base_rtt_ns: u64) -> EndpointConfig {
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
            dscp: 26,
            cnp_dscp: 48,
            pfc: false,
            priority: 26 / 8,
            int_mode: IntMode::Auto,
            hop_limit: 8,
            line_rate_bps,
            base_rtt_ns,
            events: None,
            programs: ProgramSettings::default(),
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
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
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
    /// Median lateness of the host's runs (ns): after a deadline (a packet due, a timer), how
    /// much later it ran; after packets arrived, how long after the kernel received them. The
    /// host side of the emulation's timing error.
    pub wake_late_p50_ns: u64,
    /// 99th percentile of that lateness (ns).
    pub wake_late_p99_ns: u64,
    /// PFC frames received (with PFC on).
    pub pfc_rx: u64,
    /// Time the NIC spent paused by them (ns).
    pub pfc_paused_ns: u64,
}

/// A run of the host that came late by at least `SenderTiming::stall_ns`: the host could not
/// send or receive meanwhile, as no real NIC would fail to. A stalled sender leaves its
/// bottleneck idle, which a controller measuring utilization (HPCC) answers by speeding up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Stall {
    /// When the thread should have woken (endpoint clock, ns).
    pub at_ns: u64,
    /// How late it woke (ns).
    pub late_ns: u64,
}

/// Stalls an endpoint keeps the times of (the count goes on).
pub(crate) const MAX_STALLS_KEPT: usize = 100_000;

/// Everything an endpoint has to say at the end.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
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
    /// Each sent flow's controller as it ran: its parameters resolved on the flow's path (in
    /// the lab's time, dilated like everything else).
    pub controllers: Vec<(u32, crate::cc::ControllerConfig)>,
    /// The PFC words its NIC heeded: (arrival, lab ns; whether it paused), the last of each
    /// batch of PFC frames read.
    pub pfc_received: Vec<(u64, bool)>,
    /// The QPs programs made on its NIC, those destroyed first.
    pub program_qps: Vec<crate::program_qp::ProgramQp>,
}

/// A host as a live view sees it at one moment.
#[derive(Debug, Clone, Default)]
pub struct HostNow {
    /// The flows it was given to send.
    pub flows: Vec<FlowNow>,
    /// The QPs of its programs, those destroyed first.
    pub qps: Vec<crate::program_qp::ProgramQp>,
    /// The objects its programs hold on its NIC now, and their QPs.
    pub objects: (crate::verbs::ObjectCounts, usize),
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

pub(crate) enum Command {
    Send(FlowSpec, ControllerConfig, FlowPath),
    Expect(FlowSpec),
    Probe(Probe),
    MeasureFrom(u64),
    Now(Sender<HostNow>),
    Program(crate::programs::ProgramRequest),
}

/// Where a host takes its programs' requests from (the command file hands them over).
#[derive(Clone)]
pub struct ProgramPort {
    name: String,
    commands: Sender<Command>,
    waker: Waker,
}

impl std::fmt::Debug for ProgramPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgramPort({})", self.name)
    }
}

impl ProgramPort {
    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Hands `req` to the host; when the host has stopped, answers it with `EIO` and says so.
    pub fn send(&self, req: crate::programs::ProgramRequest) -> io::Result<()> {
        match self.commands.send(Command::Program(req)) {
            Ok(()) => {
                self.waker.wake();
                Ok(())
            }
            Err(e) => {
                if let Command::Program(req) = e.into_inner() {
                    (req.reply)(Err(libc::EIO));
                }
                Err(io::Error::other(format!("host {} has stopped", self.name)))
            }
        }
    }
}

/// A host's transport running on a runtime worker: what its owner gives it flows through.
pub struct Endpoint {
    name: String,
    commands: Sender<Command>,
    waker: Waker,
    finished: Arc<AtomicUsize>,
    report: Receiver<io::Result<EndpointReport>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({})", self.name)
    }
}

impl Endpoint {
    /// Opens the host's sockets on a thread that first calls `enter` (to join the host's
    /// namespace, say; they stay there), then starts the host on worker `worker` of `rt`.
    pub fn start(
        config: EndpointConfig,
        rt: &Runtime,
        worker: usize,
        enter: impl FnOnce() -> io::Result<()> + Send + 'static,
    ) -> io::Result<Endpoint> {
        let name = config.name.clone();
        let ip = config.ip;
        let (int_port, dscp, pfc) = (config.int_port, config.dscp, config.pfc);
        let sockets = std::thread::Builder::new()
            .name(format!("open-{name}"))
            .spawn(move || {
                enter()?;
                crate::host::Sockets::open(ip, int_port, dscp, pfc)
            })?
            .join()
            .map_err(|_| io::Error::other(format!("endpoint {name}: opening its sockets panicked")))?
            .map_err(|e| io::Error::new(e.kind(), format!("endpoint {name}: {e}")))?;
        let (commands, rx) = crossbeam_channel::unbounded();
        let (report_tx, report) = crossbeam_channel::bounded(1);
        let finished = Arc::new(AtomicUsize::new(0));
        let place = rt.reserve(worker);
        let waker = place.waker();
        let host = Host::new(config, sockets, rx, finished.clone(), report_tx)?;
        rt.install(place, Box::new(host));
        Ok(Endpoint {
            name,
            commands,
            waker,
            finished,
            report,
        })
    }

    /// Sends `flow`'s message (starting at its start time) under the controller `cc`, which
    /// takes what it derives from `path`. Fails when the host has stopped.
    pub fn send(&self, flow: FlowSpec, cc: ControllerConfig, path: FlowPath) -> io::Result<()> {
        self.command(Command::Send(flow, cc, path))
    }

    /// Prepares to receive `flow` (data for an unknown QP is dropped and counted).
    pub fn expect(&self, flow: FlowSpec) -> io::Result<()> {
        self.command(Command::Expect(flow))
    }

    /// Sends a reachability probe (see [`PROBE_QP`]); its reply, if any, comes on
    /// `probe.reply`.
    pub fn probe(&self, probe: Probe) -> io::Result<()> {
        self.command(Command::Probe(probe))
    }

    /// Counts wake-up lateness and stalls only from lab time `t_ns` on (a run's start, so that
    /// setting up and checking the data path do not count).
    pub fn measure_from(&self, t_ns: u64) -> io::Result<()> {
        self.command(Command::MeasureFrom(t_ns))
    }

    fn command(&self, c: Command) -> io::Result<()> {
        self.commands
            .send(c)
            .map_err(|_| io::Error::other(format!("endpoint {}: the host has stopped", self.name)))?;
        self.waker.wake();
        Ok(())
    }

    /// Where the host's programs' requests go (for the command file).
    pub fn program_port(&self) -> ProgramPort {
        ProgramPort {
            name: self.name.clone(),
            commands: self.commands.clone(),
            waker: self.waker.clone(),
        }
    }

    /// A handle that asks the host for its flows while it runs, from any thread.
    pub fn watcher(&self) -> EndpointWatcher {
        EndpointWatcher {
            name: self.name.clone(),
            commands: self.commands.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Flows completed so far here: sent flows fully acknowledged plus received flows complete.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }

    /// The host's report, once its runtime has stopped (the first error it met, if one stopped
    /// it).
    pub fn report(self) -> io::Result<EndpointReport> {
        self.report.recv().unwrap_or_else(|_| {
            Err(io::Error::other(format!(
                "endpoint {}: its worker ended without a report",
                self.name
            )))
        })
    }
}

/// Asks a running host how its sent flows stand (see [`Endpoint::watcher`]).
#[derive(Clone)]
pub struct EndpointWatcher {
    name: String,
    commands: Sender<Command>,
    waker: Waker,
}

impl std::fmt::Debug for EndpointWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EndpointWatcher({})", self.name)
    }
}

impl EndpointWatcher {
    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Asks for every flow the host was given to send and every QP of its programs, as they
    /// stand now: the answer comes on the receiver at the host's next run. Asking every host
    /// before waiting on any costs one wake-up in all, not one per host. Fails when the host
    /// has stopped.
    pub fn ask_now(&self) -> io::Result<Receiver<HostNow>> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.commands
            .send(Command::Now(tx))
            .map_err(|_| io::Error::other(format!("endpoint {}: the host has stopped", self.name)))?;
        self.waker.wake();
        Ok(rx)
    }
}
