//! What a run hands back, in the scenario's units (time dilation undone): per-flow records,
//! per-flow time series, per-port queues over time, switch and host counters, and a summary.
//! `files` writes them (formats in docs/results.md), `plots` draws them, `table` prints the
//! summary.

mod applications;
mod fairness;
mod files;
mod late_pauses;
mod ns3;
mod plots;
pub mod program_figures;
pub mod program_outcome;
mod table;
mod workers;
mod write_error;

pub use applications::{ApplicationResult, outcomes};
pub use fairness::{Fairness, jain, windowed};
pub use files::csv_rows;
pub use files::{
    APPLICATIONS, COUNTERS, DATAPATH, FLOWS, PrepareError, QUEUES, REPORT, SCENARIO, SERIES, STALLS, SUMMARY_JSON,
    SUMMARY_TXT, WRITTEN, prepare, write_all, write_scenario, write_text,
};
pub use plots::{FCT_CDF, Line, QUEUE, RATES, fct_cdf_points, lines, queue_points, throughput_points};
pub use table::summary_table;
pub use workers::{WorkerFidelity, per_worker};
pub use write_error::WriteError;
pub use write_error::at as write_error_at;

use std::collections::HashMap;

use int_format::roce::{Bth, Reth};
use intlab_runtime::WorkerStats;
use intlab_switch::{PortSnapshot, SwitchSnapshot};
use intlab_transport::endpoint::EndpointCounters;
use intlab_transport::endpoint::EndpointReport;
use intlab_transport::flow::{FlowPath, FlowRecord, ReceiveRecord};
use intlab_transport::packet::WIRE_OVERHEAD;
use intlab_transport::program_qp::ProgramQp;
use serde::Serialize;

use crate::dilation::Dilation;
use crate::lab::LabReport;
use crate::scenario::Scenario;
use crate::topology::{Topology, routes};
use crate::workload::{PlannedFlow, Step};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Every flow completed.
    Completed,
    /// The scenario's duration passed first.
    TimedOut,
    /// Stopped by SIGINT or SIGTERM.
    Interrupted,
    /// A flow made no progress through several retransmission timeouts in a row (see
    /// [`Summary::diagnosis`]).
    NoProgress,
    /// Everything ended, but a program the run waited for failed (exited non-zero or was
    /// killed; see [`Summary::programs`]).
    ProgramFailed,
}

/// One flow's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowResult {
    /// Flow id (QP number).
    pub id: u32,
    /// Sending host.
    pub src: String,
    /// Receiving host.
    pub dst: String,
    /// The sending host's address.
    pub src_ip: std::net::Ipv4Addr,
    /// The receiving host's address.
    pub dst_ip: std::net::Ipv4Addr,
    /// Its UDP source port (the destination is RoCEv2's 4791).
    pub src_port: u16,
    /// Message bytes.
    pub size: u64,
    /// Start after the run began (ns).
    pub start_ns: u64,
    /// Flow completion time: start to the last byte acknowledged (ns), if it completed.
    pub fct_ns: Option<u64>,
    /// FCT on an empty network (ns): see [`ideal_fct_ns`].
    pub ideal_fct_ns: u64,
    /// FCT over the ideal FCT.
    pub slowdown: Option<f64>,
    /// Round trip of propagation on its path (ns).
    pub path_rtt_ns: u64,
    /// The base RTT its controller was given (ns): propagation, serialization and the host
    /// overhead the lab measured on its path.
    pub base_rtt_ns: Option<u64>,
    /// Bytes the receiver got intact.
    pub bytes_received: u64,
    /// Data packets sent, retransmissions included.
    pub packets_sent: u64,
    /// Packets sent again.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// NAKs received.
    pub naks: u64,
    /// CNPs received.
    pub cnps: u64,
    /// Smallest RTT sample (ns).
    pub rtt_min_ns: Option<u64>,
    /// Mean RTT (ns).
    pub rtt_mean_ns: Option<u64>,
    /// The application iteration it carried, if any.
    pub step: Option<Step>,
}

#[cfg(test)]
impl FlowResult {
    /// A flow of `id` from `a` to `b` that started at `start_ns`, with every count zero: what
    /// the results' unit tests build on.
    pub(crate) fn fixture(id: u32, start_ns: u64, fct_ns: Option<u64>) -> FlowResult {
        FlowResult {
            id,
            src: "a".into(),
            dst: "b".into(),
            src_ip: std::net::Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: std::net::Ipv4Addr::new(10, 0, 0, 2),
            src_port: 49152,
            size: 0,
            start_ns,
            fct_ns,
            ideal_fct_ns: 1,
            slowdown: None,
            path_rtt_ns: 0,
            base_rtt_ns: None,
            bytes_received: 0,
            packets_sent: 0,
            retransmissions: 0,
            timeouts: 0,
            naks: 0,
            cnps: 0,
            rtt_min_ns: None,
            rtt_mean_ns: None,
            step: None,
        }
    }
}

/// One point of a flow's time series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeriesPoint {
    /// Flow id.
    pub flow: u32,
    /// Time after the run began (ns).
    pub t_ns: u64,
    /// The controller's pacing rate (b/s).
    pub rate_bps: u64,
    /// Bytes acknowledged so far.
    pub acked_bytes: u64,
    /// The controller's window (bytes), if it uses one.
    pub window_bytes: Option<u64>,
    /// The controller's utilization estimate, if it has one.
    pub utilization: Option<f64>,
    /// Largest queue any hop reported in the INT of the ACK behind this point (bytes).
    pub int_qlen_bytes: Option<u64>,
    /// The RTT sample of the ACK behind this point (ns).
    pub rtt_ns: Option<u64>,
    /// The controller's target delay, if it has one (ns).
    pub target_delay_ns: Option<u64>,
}

/// One switch port's queue over time.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSeries {
    /// Switch name.
    pub switch: String,
    /// Port (interface) name.
    pub port: String,
    /// (time after the run began in ns, largest queue in the interval in bytes).
    pub points: Vec<(u64, u64)>,
}

/// A host's transport counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostCounters {
    /// Host name.
    pub host: String,
    /// Its counters.
    pub counters: EndpointCounters,
    /// The PFC words its NIC heeded: (when, scenario ns from the start; whether it paused).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pfc_received: Vec<(u64, bool)>,
    /// The XOFFs its NIC obeyed: (arrived, read), scenario ns from the start.
    #[serde(skip)]
    pub xoffs_read: Vec<(u64, u64)>,
}

/// A host's endpoint thread woke up late (see [`intlab_transport::endpoint::Stall`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostStall {
    /// Host name.
    pub host: String,
    /// When it should have woken, after the run began (ns).
    pub at_ns: u64,
    /// How late it woke (ns).
    pub late_ns: u64,
}

/// Flows of one size range and their slowdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeBucket {
    /// The range, as printed ("10KB-100KB").
    pub label: String,
    /// Completed flows in it.
    pub flows: usize,
    /// Their slowdown (FCT over ideal FCT).
    pub slowdown: Quantiles,
}

/// Upper bounds (bytes) of the size buckets, the last open-ended: the decades the HPCC and
/// Swift papers report tail slowdown by.
const SIZE_BOUNDS: [(u64, &str); 5] = [
    (10_000, "<10KB"),
    (100_000, "10KB-100KB"),
    (1_000_000, "100KB-1MB"),
    (10_000_000, "1MB-10MB"),
    (u64::MAX, ">=10MB"),
];

/// Slowdown of completed `flows` per size bucket.
pub fn slowdown_by_size(flows: &[FlowResult]) -> Vec<SizeBucket> {
    let mut lower = 0;
    SIZE_BOUNDS
        .iter()
        .filter_map(|&(upper, label)| {
            let v: Vec<f64> = flows
                .iter()
                .filter(|f| (lower..upper).contains(&f.size))
                .filter_map(|f| f.slowdown)
                .collect();
            lower = upper;
            let n = v.len();
            Quantiles::of(v).map(|slowdown| SizeBucket {
                label: label.to_owned(),
                flows: n,
                slowdown,
            })
        })
        .collect()
}

/// Order statistics of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Quantiles {
    /// Nearest-rank quantiles of `v`; None when empty.
    pub fn of(mut v: Vec<f64>) -> Option<Quantiles> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Quantiles {
            p50: at(0.5),
            p99: at(0.99),
            max: v[v.len() - 1],
        })
    }
}

/// What PFC did in a run (times in scenario units, summed over ports and priorities).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PfcSummary {
    /// PFC frames the switches sent (XOFFs, their refreshes, XONs).
    pub frames: u64,
    /// Time the switches' ingress ports held their upstream in XOFF (the bottleneck's pushback).
    pub xoff_ns: u64,
    /// Time the hosts' NICs were paused.
    pub host_paused_ns: u64,
    /// Time the switches' transmitters were paused (pauses spreading upstream).
    pub switch_paused_ns: u64,
    /// Pause storms the switches' PFC watchdogs declared.
    pub watchdog_trips: u64,
    /// Frames the watchdogs dropped.
    pub watchdog_drops: u64,
    /// Frames that reached a lossless ingress past its headroom (kept while the buffer has
    /// room): their senders went on longer after a pause than the headroom allows.
    pub overruns: u64,
    /// Of those, the ones no lateness of the lab explains, in a run that kept its schedule (see
    /// [`Summary::timing_warning`]): no host stall, worker hiccup or late pause ran into the
    /// time before them that the headroom covers. Nothing but a fault of the lab's MMU or PFC
    /// path makes these; the others are a timing failure (raise `dilation`).
    pub overruns_unexplained: u64,
    /// XOFFs a host obeyed later after their due time than the headroom allows for: the
    /// switch released them late or the host read them late.
    pub late_pauses: u64,
}

/// The numbers of the summary table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Controller name.
    pub controller: String,
    /// Time dilation the run used.
    pub dilation: f64,
    /// True when the run picked it itself (`dilation: auto`).
    pub dilation_auto: bool,
    /// The dilations `dilation: auto` ran at first, each of which did not keep time.
    pub dilation_warned: Vec<f64>,
    /// How it ended.
    pub ending: Ending,
    /// Flows planned.
    pub flows: usize,
    /// Flows completed.
    pub completed: usize,
    /// FCT of completed flows (ns).
    pub fct_ns: Option<Quantiles>,
    /// Slowdown of completed flows.
    pub slowdown: Option<Quantiles>,
    /// Bytes delivered × 8 over the time from the first start to the last completion (b/s).
    pub goodput_bps: f64,
    /// Goodput over the receivers' total link rate.
    pub normalized_goodput: f64,
    /// INT bytes on a full-size data packet over its wire bytes, on the flows' longest path
    /// (None when data carries no INT): the goodput INT costs.
    pub int_overhead: Option<f64>,
    /// Jain's index of the flows' throughput in windows of 10 base RTTs (the longest path
    /// RTT of the flows) after the first 50.
    pub fairness: Option<Fairness>,
    /// The port with the largest queue: "switch:port".
    pub bottleneck: Option<String>,
    /// Its queue at dequeue (bytes).
    pub bottleneck_queue: Option<Quantiles>,
    /// The bottleneck's configured line rate and the rate it carried over the workload (first
    /// start to last completion), b/s in scenario units: a saturated port that carried much
    /// less than its rate means the emulation fell short.
    pub bottleneck_rate_bps: Option<(u64, u64)>,
    /// Frames of the lab's (the workload's, its programs', the lab's control) dropped by every
    /// switch.
    pub drops: u64,
    /// Frames every switch did not forward because they were not the lab's: the kernel's IPv6
    /// and broadcast chatter on the hosts' interfaces.
    #[serde(default)]
    pub foreign_frames: u64,
    /// PFC's work, when the fabric has it.
    pub pfc: Option<PfcSummary>,
    /// Frames marked CE by every switch.
    pub ecn_marks: u64,
    /// Packets retransmitted.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// CNPs received by senders.
    pub cnps: u64,
    /// Bytes the receivers found corrupted (must be 0).
    pub content_errors: u64,
    /// Packets dropped for a bad ICRC (must be 0).
    pub bad_icrc: u64,
    /// Smallest propagation-only RTT of the flows' paths (ns).
    pub path_rtt_min_ns: u64,
    /// Per flow, its smallest measured RTT minus its path's propagation RTT (ns, scenario
    /// time): what the hosts and switches of this machine add to every round trip.
    pub rtt_excess_ns: Option<Quantiles>,
    /// Mean over flows of their mean RTT over their path's propagation RTT: how much the
    /// controller inflates round trips (queueing plus this machine's overhead).
    pub rtt_inflation: Option<f64>,
    /// Slowdown by flow size (only the buckets that hold flows).
    pub slowdown_by_size: Vec<SizeBucket>,
    /// 99th percentile, over every frame the switches sent, of how late it left against its
    /// exact schedule (ns, scenario time): the timing error this machine added.
    pub release_late_p99_ns: u64,
    /// Median of that lateness (ns, scenario time).
    pub release_late_p50_ns: u64,
    /// The worst port's 99th percentile of it (ns, scenario time): on a port that sent a few
    /// hundred frames, a single stall of the machine decides it.
    pub release_late_worst_port_p99_ns: u64,
    /// Worst median, over hosts, of how late a sender's timer wake-up came (ns, scenario
    /// time): its packets leave that much after their schedule, in one batch.
    pub host_wake_late_p50_ns: u64,
    /// Worst 99th percentile of that lateness over hosts (ns, scenario time).
    pub host_wake_late_p99_ns: u64,
    /// Host wake-ups that came late enough to count as stalls (the endpoint's `stall_ns`).
    pub host_stalls: u64,
    /// The latest host wake-up (ns, scenario time).
    pub host_stall_max_ns: u64,
    /// Time the hosts spent stalled over the time they ran (hosts × the workload's span).
    pub host_stall_fraction: f64,
    /// Share of the CPU time the hypervisor took while the workload ran (steal time; None when
    /// unknown): on a shared virtual machine, the usual cause of stalls.
    pub cpu_steal: Option<f64>,
    /// True when the machine did not keep up: switch release or host wake-up lateness (p99)
    /// above a tenth of the smallest path RTT, hosts stalled more than [`STALL_FRACTION_LIMIT`] of the
    /// time, or a PFC pause reached its sender too late for the headroom (see
    /// [`PfcSummary::overruns`]). A larger `dilation` gives more faithful results.
    pub timing_warning: bool,
    /// Each application's outcome (empty unless the workload has applications).
    pub applications: Vec<ApplicationResult>,
    /// The controller's parameters as the first flow ran them (set or derived from its path,
    /// see docs/transport.md), times in scenario units.
    pub controller_params: serde_json::Value,
    /// Host overhead of a round trip the lab's probes measured, over the flows' paths (ns,
    /// scenario time): part of every controller's base RTT.
    pub host_overhead_ns: Option<Quantiles>,
    /// Why the run stopped early, when a flow made no progress.
    pub diagnosis: Option<String>,
    /// The fidelity figures per runtime worker, with what each ran.
    pub workers: Vec<WorkerFidelity>,
    /// How well the sites of a lab spread over machines kept one clock and one schedule
    /// (None for a lab on one machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sites: Option<crate::sites::SitesTiming>,
    /// The programs the run started in its hosts (`programs:`), with their own figures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<program_outcome::ProgramOutcome>,
    /// The lab's count of the programs' QPs (None when no program made one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_qps: Option<ProgramQpFigures>,
}

/// What the lab counted of the programs' QPs, in scenario units, to set beside what the
/// programs measured themselves and beside the lab's own flows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProgramQpFigures {
    /// QPs that received payload.
    pub receiving_qps: usize,
    /// Payload bytes they received.
    pub bytes_received: u64,
    /// Those bytes × 8 over the time from the first packet any of them received to the last
    /// message any of them completed (b/s).
    pub goodput_bps: f64,
    /// Jain's index of their receive rates, each from its own first packet to its last
    /// message (None for fewer than two).
    pub jain: Option<f64>,
}

impl ProgramQpFigures {
    /// The figures of `qps` (scenario units); None when none received anything.
    pub fn of<'a>(qps: impl Iterator<Item = &'a ProgramQp>) -> Option<ProgramQpFigures> {
        let receiving: Vec<&ProgramQp> = qps.filter(|q| q.bytes_received > 0).collect();
        let first = receiving.iter().filter_map(|q| q.first_received_ns).min()?;
        let last = receiving.iter().filter_map(|q| q.last_received_ns).max()?;
        let bytes_received: u64 = receiving.iter().map(|q| q.bytes_received).sum();
        let rates: Vec<f64> = receiving.iter().filter_map(|q| q.receive_bps()).collect();
        let jain = (rates.len() >= 2).then(|| {
            let sum: f64 = rates.iter().sum();
            let squares: f64 = rates.iter().map(|r| r * r).sum();
            sum * sum / (rates.len() as f64 * squares)
        });
        Some(ProgramQpFigures {
            receiving_qps: receiving.len(),
            bytes_received,
            goodput_bps: (last > first).then(|| bytes_received as f64 * 8e9 / (last - first) as f64)?,
            jain,
        })
    }
}

/// Host stall time above which a run is flagged as not faithful: a stalled sender leaves its
/// link idle, which rate controllers answer by speeding up.
pub const STALL_FRACTION_LIMIT: f64 = 0.02;

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct Results {
    /// Per flow, in id order.
    pub flows: Vec<FlowResult>,
    /// Per-flow time series.
    pub series: Vec<SeriesPoint>,
    /// Per-port queues over time (ports that sent anything).
    pub queues: Vec<QueueSeries>,
    /// Final switch counters (queue traces moved to `queues`).
    pub switches: Vec<SwitchSnapshot>,
    /// Hosts' transport counters.
    pub hosts: Vec<HostCounters>,
    /// Every host stall, in host then time order.
    pub stalls: Vec<HostStall>,
    /// What happened to the network (`events:`, and the routes following), in time order.
    pub events: Vec<NetworkEvent>,
    /// The QPs of programs in the hosts (by host), their times and rates in scenario units.
    pub program_qps: Vec<(String, ProgramQp)>,
    /// The summary.
    pub summary: Summary,
}

/// Something that happened to the network during a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkEvent {
    /// When, from the start of the workload (scenario ns).
    pub t_ns: u64,
    /// When on the captures' clock (ns since the Unix epoch, as pcapng stamps frames).
    pub epoch_ns: u64,
    /// What: `down leaf1-spine1`, `routes recomputed (1 link(s) down)`, ...
    pub what: String,
}

/// Bytes a flow of `size` puts on the wire without loss: every packet's Ethernet, IPv4, UDP,
/// BTH and ICRC, the RETH of a WRITE's first packet, and INT with one hop per switch.
fn wire_bytes(size: u64, mtu: u64, int_hop_bytes: Option<u64>, switches: u64) -> u64 {
    let packets = size.div_ceil(mtu).max(1);
    size + packets * (data_packet_bytes(0, int_hop_bytes, switches)) + Reth::<&[u8]>::LEN as u64
}

/// Bytes on the wire (Ethernet header to ICRC) of a data packet carrying `payload` bytes, with
/// `int_hop_bytes` of INT per switch over `switches` switches when data carries INT.
pub(crate) fn data_packet_bytes(payload: u64, int_hop_bytes: Option<u64>, switches: u64) -> u64 {
    payload + WIRE_OVERHEAD + Bth::<&[u8]>::LEN as u64 + 4 + int_hop_bytes.map_or(0, |h| 12 + h * switches)
}

/// FCT of a flow alone on the network (ns): its wire bytes at the slowest rate on its path,
/// one packet's store-and-forward at every other link, and a round trip of propagation (the
/// data there, the last ACK back). Host processing is not in it, so a slowdown shows what the
/// machine added too (the summary reports that separately).
pub fn ideal_fct_ns(t: &Topology, path: &[usize], size: u64, mtu: u64, int_hop_bytes: Option<u64>) -> u64 {
    let switches = path.len().saturating_sub(1) as u64;
    let bytes = wire_bytes(size, mtu, int_hop_bytes, switches);
    let slowest = path
        .iter()
        .map(|&l| t.links[l].props.rate.bps())
        .min()
        .unwrap_or(1)
        .max(1);
    let prop: u64 = path.iter().map(|&l| t.links[l].props.delay.0).sum();
    let packet = wire_bytes(size.min(mtu), mtu, int_hop_bytes, switches);
    let store_forward: u64 = path
        .iter()
        .skip(1)
        .map(|&l| t.links[l].props.rate.serialization_ns(packet))
        .sum();
    (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(slowest)) as u64 + store_forward + 2 * prop
}

/// The INT bytes per hop the scenario's data carries, if any.
pub(crate) fn int_hop_bytes(s: &Scenario) -> Option<u64> {
    crate::base_rtt::int_hop_bytes(s.transport.int_mode, &s.controller)
}

/// How the lab's clock maps onto the scenario's time.
#[derive(Debug, Clone, Copy)]
pub struct Timebase {
    /// Lab clock reading of the run's start (ns).
    pub t0_ns: u64,
    /// Lab clock reading of the run's end (ns): when it completed, timed out or was stopped.
    pub end_ns: u64,
    /// The run's time dilation.
    pub dilation: Dilation,
}

impl Timebase {
    /// A lab clock reading as scenario time after the start.
    pub fn at(&self, lab_ns: u64) -> u64 {
        self.span(lab_ns.saturating_sub(self.t0_ns))
    }

    /// A lab duration as scenario time.
    pub fn span(&self, lab_ns: u64) -> u64 {
        self.dilation.scenario_ns(lab_ns)
    }

    /// A lab rate as a scenario rate.
    pub fn rate(&self, lab_bps: u64) -> u64 {
        self.dilation.scenario_bps(lab_bps)
    }

    /// Change `what` made to the network at lab time `lab_ns`, as the results list it.
    pub fn event(&self, lab_ns: u64, what: String) -> NetworkEvent {
        NetworkEvent {
            t_ns: self.at(lab_ns),
            epoch_ns: u64::try_from(intlab_runtime::clock::Clock::get().epoch_ns(lab_ns)).unwrap_or(u64::MAX),
            what,
        }
    }
}

/// What the lab measured of its paths before the flows started (lab units), by flow in plan
/// order.
#[derive(Debug, Clone, Copy)]
pub struct Measurements<'a> {
    /// What each flow's controller was told of its path.
    pub paths: &'a [FlowPath],
    /// The host overhead the probes measured on each flow's path (ns).
    pub host_overhead_ns: &'a [u64],
}

/// What a run saw, on one machine or over sites, as its driver hands it to the results: the
/// stopped lab's report and what was measured around it (lab units).
#[derive(Debug)]
pub struct RunRecord<'a> {
    /// The flows the run planned.
    pub plan: &'a [PlannedFlow],
    /// The stopped lab's report (a lab over sites: the sites' reports merged).
    pub report: LabReport,
    /// How the lab's clock maps onto the scenario's.
    pub time: Timebase,
    /// What the probes measured of the flows' paths.
    pub measured: Measurements<'a>,
    /// How the run ended.
    pub ending: Ending,
    /// Changes made to the network while it ran: (lab ns, what).
    pub network_events: Vec<(u64, String)>,
    /// Why no flow moved, when that ended it.
    pub diagnosis: Option<String>,
    /// Dilations tried before this one and found too fast.
    pub dilation_warned: Vec<f64>,
    /// Share of the CPU time the hypervisor took while it ran.
    pub cpu_steal: Option<f64>,
}

impl Results {
    /// The results of run `r` of scenario `s`: every driver (a run, a lab over sites) collects
    /// them here, then adds what only it knows.
    pub fn of_run(s: &Scenario, r: RunRecord<'_>) -> Results {
        let mut results = Results::collect(s, r.plan, r.report, r.time, r.ending, &r.measured);
        results.summary.diagnosis = r.diagnosis;
        results.summary.dilation_warned = r.dilation_warned;
        results.summary.cpu_steal = r.cpu_steal;
        results.events = r
            .network_events
            .into_iter()
            .map(|(at, what)| r.time.event(at, what))
            .collect();
        results
    }

    /// Gathers a stopped lab's report for scenario `s`, whose flows were `plan`.
    pub fn collect(
        s: &Scenario,
        plan: &[PlannedFlow],
        report: LabReport,
        time: Timebase,
        ending: Ending,
        measured_paths: &Measurements<'_>,
    ) -> Results {
        let t = &s.topology;
        let r = routes(t);
        let hop_bytes = int_hop_bytes(s);
        // The first flow's controller as its host ran it, for the summary.
        let ran = report
            .hosts
            .iter()
            .flat_map(|h| h.controllers.iter())
            .min_by_key(|(id, _)| *id)
            .map(|(_, c)| time.dilation.scenario_controller(c));
        let HostParts {
            sent,
            received,
            series,
            hosts,
            mut stalls,
            program_qps,
        } = HostParts::of(report.hosts, time);
        let paths: Vec<Vec<usize>> = plan
            .iter()
            .map(|p| r.path(t, p.src, p.dst).unwrap_or_default())
            .collect();
        let flows = flow_results(s, plan, &paths, &sent, &received, time, measured_paths);
        let content_errors = received.values().map(|x| x.content_errors).sum();
        let mut switches = report.switches;
        let queues = in_scenario_time(&mut switches, time);
        // A worker's hiccup held up every host and port it owns, whether or not a host had a
        // wake-up due then: listed with the hosts' stalls, so whoever reads the run can leave
        // those moments out. The summary's stall figures stay the hosts' own.
        let hiccups = worker_hiccups(&report.workers, time);
        let late_pauses = late_pauses::late_pauses(t, &switches, &hosts, time.span(crate::lab::HOST_PFC_LATENESS_NS));
        let measured = Measured {
            late_pauses: &late_pauses,
            program_rtt_min_ns: program_qps.iter().filter_map(|(_, q)| q.rtt_min_ns).min(),
            flows: &flows,
            series: &series,
            stalls: &stalls,
            hiccups: &hiccups,
            switches: &switches,
            hosts: &hosts,
            content_errors,
            max_path_switches: paths
                .iter()
                .map(|p| p.len().saturating_sub(1) as u64)
                .max()
                .unwrap_or(0),
            hop_bytes,
        };
        let mut summary = summarize(s, &measured, time, ending);
        summary.controller_params = ran
            .and_then(|c| serde_json::to_value(c).ok())
            .unwrap_or(serde_json::Value::Null);
        summary.host_overhead_ns = Quantiles::of(
            measured_paths
                .host_overhead_ns
                .iter()
                .map(|&n| time.span(n) as f64)
                .collect(),
        );
        summary.workers = per_worker(
            &report.workers,
            &switches,
            &hosts,
            &report.host_worker,
            &report.port_worker,
            time,
        );
        stalls.extend(hiccups);
        stalls.sort_by_key(|x| x.at_ns);
        summary.program_qps = ProgramQpFigures::of(program_qps.iter().map(|(_, q)| q));
        Results {
            flows,
            series,
            queues,
            switches,
            hosts,
            stalls,
            events: Vec::new(),
            program_qps,
            summary,
        }
    }
}

/// What the hosts reported, in scenario time.
struct HostParts {
    /// Flows sent, by id.
    sent: HashMap<u32, FlowRecord>,
    /// Flows received, by id.
    received: HashMap<u32, ReceiveRecord>,
    series: Vec<SeriesPoint>,
    hosts: Vec<HostCounters>,
    stalls: Vec<HostStall>,
    /// Programs' QPs, with their hosts.
    program_qps: Vec<(String, ProgramQp)>,
}

impl HostParts {
    /// The parts of `reports`, their times in the scenario's.
    fn of(reports: Vec<EndpointReport>, time: Timebase) -> HostParts {
        let mut parts = HostParts {
            sent: HashMap::new(),
            received: HashMap::new(),
            series: Vec::new(),
            hosts: Vec::new(),
            stalls: Vec::new(),
            program_qps: Vec::new(),
        };
        for h in reports {
            parts.stalls.extend(h.stalls.iter().map(|s| HostStall {
                host: h.name.clone(),
                at_ns: time.at(s.at_ns),
                late_ns: time.span(s.late_ns),
            }));
            for f in h.sent {
                parts.sent.insert(f.id, f);
            }
            for f in h.received {
                parts.received.insert(f.id, f);
            }
            for (flow, samples) in h.series {
                parts.series.extend(samples.iter().map(|x| SeriesPoint {
                    flow,
                    t_ns: time.at(x.t_ns),
                    rate_bps: time.rate(x.rate_bps),
                    acked_bytes: x.acked_bytes,
                    window_bytes: x.window_bytes,
                    utilization: x.utilization,
                    int_qlen_bytes: x.qlen_bytes,
                    rtt_ns: x.rtt_ns.map(|n| time.span(n)),
                    target_delay_ns: x.target_delay_ns.map(|n| time.span(n)),
                }));
            }
            parts.program_qps.extend(h.program_qps.into_iter().map(|q| {
                let at = |t: Option<u64>| t.map(|t| time.at(t));
                let q = ProgramQp {
                    rate_bps: time.rate(q.rate_bps),
                    rtt_min_ns: q.rtt_min_ns.map(|n| time.span(n)),
                    rtt_mean_ns: q.rtt_mean_ns.map(|n| time.span(n)),
                    first_sent_ns: at(q.first_sent_ns),
                    last_progress_ns: at(q.last_progress_ns),
                    first_received_ns: at(q.first_received_ns),
                    last_received_ns: at(q.last_received_ns),
                    ..q
                };
                (h.name.clone(), q)
            }));
            parts.hosts.push(HostCounters {
                host: h.name,
                counters: h.counters,
                pfc_received: h.pfc_received.iter().map(|&(t, p)| (time.at(t), p)).collect(),
                xoffs_read: h.xoffs_read.iter().map(|&(a, r)| (time.at(a), time.at(r))).collect(),
            });
        }
        parts
    }
}

/// Each planned flow's result (`paths`: their links), from what the hosts sent and received.
fn flow_results(
    s: &Scenario,
    plan: &[PlannedFlow],
    paths: &[Vec<usize>],
    sent: &HashMap<u32, FlowRecord>,
    received: &HashMap<u32, ReceiveRecord>,
    time: Timebase,
    measured_paths: &Measurements<'_>,
) -> Vec<FlowResult> {
    let t = &s.topology;
    let hop_bytes = int_hop_bytes(s);
    let src_ports = crate::workload::source_ports(plan);
    let address = |n: usize| t.nodes[n].address.unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
    plan.iter()
        .zip(paths)
        .enumerate()
        .map(|(k, (p, path))| {
            let ideal = ideal_fct_ns(t, path, p.size, s.transport.mtu, hop_bytes);
            let rec = sent.get(&p.id);
            let fct = rec.and_then(|f| f.fct_ns()).map(|n| time.span(n));
            FlowResult {
                id: p.id,
                src: t.nodes[p.src].name.clone(),
                dst: t.nodes[p.dst].name.clone(),
                src_ip: address(p.src),
                dst_ip: address(p.dst),
                src_port: src_ports[k],
                size: p.size,
                // Later iterations start when released, not when planned.
                start_ns: rec.map_or(p.start_ns, |f| time.at(f.start_ns)),
                fct_ns: fct,
                ideal_fct_ns: ideal,
                slowdown: fct.map(|f| f as f64 / ideal.max(1) as f64),
                path_rtt_ns: 2 * path.iter().map(|&l| t.links[l].props.delay.0).sum::<u64>(),
                base_rtt_ns: measured_paths.paths.get(k).map(|f| time.span(f.base_rtt_ns)),
                bytes_received: received.get(&p.id).map_or(0, |x| x.bytes_ok),
                packets_sent: rec.map_or(0, |f| f.packets_sent),
                retransmissions: rec.map_or(0, |f| f.retransmissions),
                timeouts: rec.map_or(0, |f| f.timeouts),
                naks: rec.map_or(0, |f| f.naks),
                cnps: rec.map_or(0, |f| f.cnps),
                rtt_min_ns: rec.and_then(|f| f.rtt_min_ns).map(|n| time.span(n)),
                rtt_mean_ns: rec.and_then(|f| f.rtt_mean_ns).map(|n| time.span(n)),
                step: p.step,
            }
        })
        .collect()
}

/// The workers' hiccups from the run's start, as stalls: a hiccup held up every host and port
/// its worker owns, whether or not a host had a wake-up due then.
fn worker_hiccups(workers: &[WorkerStats], time: Timebase) -> Vec<HostStall> {
    workers
        .iter()
        .flat_map(|w| {
            w.hiccups
                .iter()
                .filter(|&&(at, _)| at >= time.t0_ns)
                .map(move |&(at, late)| HostStall {
                    host: format!("worker{}", w.worker),
                    at_ns: time.at(at),
                    late_ns: time.span(late),
                })
        })
        .collect()
}

/// Puts the times the switches' counters keep (PFC frames received, XOFFs sent) in scenario
/// time from the start, and takes out their queue traces: the queue series of the ports that
/// sent anything.
fn in_scenario_time(switches: &mut [SwitchSnapshot], time: Timebase) -> Vec<QueueSeries> {
    let mut queues = Vec::new();
    for sw in switches {
        for p in &mut sw.ports {
            for (t, _) in &mut p.pfc_received {
                *t = time.at(*t);
            }
            for (asked, due) in &mut p.xoffs_sent {
                (*asked, *due) = (time.at(*asked), time.at(*due));
            }
            let trace = std::mem::take(&mut p.queue_trace);
            if p.totals.tx_frames > 0 {
                queues.push(QueueSeries {
                    switch: sw.switch.clone(),
                    port: p.name.clone(),
                    points: trace.iter().map(|q| (time.at(q.t_ns), q.max_bytes)).collect(),
                });
            }
        }
    }
    queues
}

/// What the summary is computed from.
struct Measured<'a> {
    flows: &'a [FlowResult],
    series: &'a [SeriesPoint],
    stalls: &'a [HostStall],
    /// The workers' hiccups, in the same form.
    hiccups: &'a [HostStall],
    /// The XOFFs hosts obeyed later than the headroom allows, in the same form.
    late_pauses: &'a [HostStall],
    switches: &'a [SwitchSnapshot],
    hosts: &'a [HostCounters],
    content_errors: u64,
    /// Switches on the longest path any flow took.
    max_path_switches: u64,
    /// INT bytes per hop on data, if data carries INT.
    hop_bytes: Option<u64>,
    /// The smallest RTT any program's QP saw (scenario ns).
    program_rtt_min_ns: Option<u64>,
}

fn summarize(s: &Scenario, m: &Measured<'_>, time: Timebase, ending: Ending) -> Summary {
    let t = &s.topology;
    let (flows, switches, hosts) = (m.flows, m.switches, m.hosts);
    let done: Vec<&FlowResult> = flows.iter().filter(|f| f.fct_ns.is_some()).collect();
    let fct = Quantiles::of(done.iter().filter_map(|f| f.fct_ns).map(|n| n as f64).collect());
    let slowdown = Quantiles::of(done.iter().filter_map(|f| f.slowdown).collect());
    let (first, last, goodput_bps) = delivery(flows, time);
    let capacity = receivers_capacity(t, flows);
    let busiest = switches
        .iter()
        .flat_map(|sw| sw.ports.iter().map(move |p| (sw, p)))
        .filter(|(_, p)| p.queue_samples > 0)
        .max_by_key(|(_, p)| (p.queue_p99, p.totals.queue_max, p.totals.tx_bytes));
    // Programs' QPs have no planned path: their smallest RTT stands for it in a run without flows.
    let path_rtt_min_ns = flows
        .iter()
        .map(|f| f.path_rtt_ns)
        .min()
        .or(m.program_rtt_min_ns)
        .unwrap_or(0);
    let all_ports = || switches.iter().flat_map(|sw| &sw.ports);
    let release_late_worst_port_p99_ns = all_ports()
        .filter(|p| p.totals.tx_frames > 0)
        .map(|p| time.span(p.release_late_p99_ns))
        .max()
        .unwrap_or(0);
    let pooled = |q| PortSnapshot::pooled_lateness(all_ports(), q).map(|ns| time.span(ns));
    let (release_late_p99_ns, release_late_p50_ns) = (
        pooled(0.99).unwrap_or(release_late_worst_port_p99_ns),
        pooled(0.5).unwrap_or(0),
    );
    let host_wake_late_p50_ns = time.span(hosts.iter().map(|h| h.counters.wake_late_p50_ns).max().unwrap_or(0));
    let host_wake_late_p99_ns = time.span(hosts.iter().map(|h| h.counters.wake_late_p99_ns).max().unwrap_or(0));
    // Hosts ran from the run's start to its end; a stall counts for the part inside that.
    let host_span = time.at(time.end_ns);
    let stalled: u64 = m
        .stalls
        .iter()
        .map(|s| (s.at_ns + s.late_ns).min(host_span).saturating_sub(s.at_ns))
        .sum();
    let host_stall_fraction = if hosts.is_empty() || host_span == 0 {
        0.0
    } else {
        (stalled as f64 / (hosts.len() as u64 * host_span) as f64).min(1.0)
    };
    let int_overhead = m.hop_bytes.map(|h| {
        let mtu = s.transport.mtu;
        let with_int = wire_bytes(mtu, mtu, Some(h), m.max_path_switches);
        (with_int - wire_bytes(mtu, mtu, None, 0)) as f64 / with_int as f64
    });
    let rtt = flows.iter().map(|f| f.path_rtt_ns).max().unwrap_or(0);
    // Behind its schedule, the lab ran late in ways no single recorded stall bounds (a worker
    // catching up on tens of milliseconds of due frames in one run, its other tasks and the
    // shard it borrowed waiting meanwhile): an overrun then is the machine's, not a fault.
    let behind = release_late_p99_ns.max(host_wake_late_p99_ns) * 10 > path_rtt_min_ns
        || host_stall_fraction > STALL_FRACTION_LIMIT;
    let pfc = t.any_pfc().then(|| pfc_summary(m, time, rtt, behind));
    Summary {
        scenario: t.name.clone(),
        controller: s.controller.name().to_owned(),
        dilation: s.dilation,
        dilation_auto: s.dilation_auto,
        dilation_warned: Vec::new(),
        ending,
        flows: flows.len(),
        completed: done.len(),
        fct_ns: fct,
        slowdown,
        goodput_bps,
        normalized_goodput: if capacity > 0 {
            goodput_bps / capacity as f64
        } else {
            0.0
        },
        int_overhead,
        fairness: fairness::windowed(flows, m.series, 10 * rtt, 50 * rtt, &[]),
        bottleneck: busiest.map(|(sw, p)| format!("{}:{}", sw.switch, p.name)),
        bottleneck_rate_bps: busiest.and_then(|(sw, p)| {
            let node = t.node(&sw.switch)?;
            let (link, _) = t.link_at(node, &p.name)?;
            let span = last.saturating_sub(first);
            let carried =
                (span > 0).then(|| (u128::from(p.totals.tx_bytes) * 8 * 1_000_000_000 / u128::from(span)) as u64)?;
            Some((t.links[link].props.rate.bps(), carried))
        }),
        bottleneck_queue: busiest.map(|(_, p)| Quantiles {
            p50: p.queue_p50 as f64,
            p99: p.queue_p99 as f64,
            max: p.totals.queue_max as f64,
        }),
        drops: all_ports().map(|p| p.lab_drops()).sum(),
        foreign_frames: all_ports().map(|p| p.foreign_frames()).sum(),
        timing_warning: behind || pfc.as_ref().is_some_and(|p| p.overruns > p.overruns_unexplained),
        pfc,
        ecn_marks: all_ports().map(|p| p.totals.ecn_marks).sum(),
        retransmissions: flows.iter().map(|f| f.retransmissions).sum(),
        timeouts: flows.iter().map(|f| f.timeouts).sum(),
        cnps: flows.iter().map(|f| f.cnps).sum(),
        content_errors: m.content_errors,
        bad_icrc: hosts.iter().map(|h| h.counters.bad_icrc).sum(),
        path_rtt_min_ns,
        rtt_excess_ns: Quantiles::of(
            flows
                .iter()
                .filter_map(|f| f.rtt_min_ns.map(|r| r.saturating_sub(f.path_rtt_ns) as f64))
                .collect(),
        ),
        rtt_inflation: {
            let v: Vec<f64> = flows
                .iter()
                .filter_map(|f| Some(f.rtt_mean_ns? as f64 / f.path_rtt_ns.max(1) as f64))
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        },
        slowdown_by_size: slowdown_by_size(flows),
        release_late_p99_ns,
        release_late_p50_ns,
        release_late_worst_port_p99_ns,
        host_wake_late_p50_ns,
        host_wake_late_p99_ns,
        host_stalls: hosts.iter().map(|h| h.counters.stalls).sum(),
        host_stall_max_ns: time.span(hosts.iter().map(|h| h.counters.stall_max_ns).max().unwrap_or(0)),
        host_stall_fraction,
        cpu_steal: None,
        applications: outcomes(s.workload.applications(), flows),
        controller_params: serde_json::Value::Null,
        host_overhead_ns: None,
        diagnosis: None,
        workers: Vec::new(),
        sites: None,
        programs: Vec::new(),
        program_qps: None,
    }
}

/// When the flows' bytes were delivered and the goodput over that time: from the first start
/// to the last completion when every flow completed, else to the run's end (unfinished flows
/// were still delivering).
fn delivery(flows: &[FlowResult], time: Timebase) -> (u64, u64, f64) {
    let first = flows.iter().map(|f| f.start_ns).min().unwrap_or(0);
    let completions = || flows.iter().filter_map(|f| f.fct_ns.map(|n| f.start_ns + n));
    let last_completion = completions().max().unwrap_or(first);
    let last = if completions().count() == flows.len() {
        last_completion
    } else {
        last_completion.max(time.at(time.end_ns))
    };
    let delivered: u64 = flows.iter().map(|f| f.bytes_received).sum();
    let goodput_bps = if last > first {
        delivered as f64 * 8.0 / ((last - first) as f64 * 1e-9)
    } else {
        0.0
    };
    (first, last, goodput_bps)
}

/// The line rates of the links into the hosts that receive flows, added up.
fn receivers_capacity(t: &Topology, flows: &[FlowResult]) -> u64 {
    let mut receivers: Vec<&str> = flows.iter().map(|f| f.dst.as_str()).collect();
    receivers.sort_unstable();
    receivers.dedup();
    receivers
        .iter()
        .filter_map(|r| t.node(r))
        .filter_map(|n| t.links_of(n).next())
        .map(|(l, _)| t.links[l].props.rate.bps())
        .sum()
}

/// The pause frames of a run and the overruns past headroom, with those nothing late explains
/// (`rtt`: the longest path's round trip, scenario ns); none of them is unexplained in a run
/// that fell `behind` its schedule.
fn pfc_summary(m: &Measured<'_>, time: Timebase, rtt: u64, behind: bool) -> PfcSummary {
    let all_ports = || m.switches.iter().flat_map(|sw| &sw.ports);
    let overruns: u64 = all_ports().map(|p| p.totals.pfc_overruns).sum();
    let overruns_at: Vec<u64> = all_ports()
        .flat_map(|p| p.overruns_at.iter().map(|&t| time.at(t)))
        .collect();
    // Overruns past the kept times count as explained only if the kept ones all were.
    let unexplained_kept = if behind {
        0
    } else {
        unexplained_overruns(
            &overruns_at,
            m.stalls.iter().chain(m.hiccups).chain(m.late_pauses),
            rtt + time.span(crate::lab::HOST_PFC_RESPONSE_NS),
        )
    };
    let overruns_unexplained = if unexplained_kept == 0 {
        0
    } else {
        unexplained_kept + overruns.saturating_sub(overruns_at.len() as u64)
    };
    PfcSummary {
        frames: all_ports().map(|p| p.totals.pfc_tx).sum(),
        xoff_ns: time.span(all_ports().flat_map(|p| p.totals.pfc_xoff_ns).sum()),
        host_paused_ns: time.span(m.hosts.iter().map(|h| h.counters.pfc_paused_ns).sum()),
        switch_paused_ns: time.span(all_ports().flat_map(|p| p.totals.pfc_paused_ns).sum()),
        watchdog_trips: all_ports().map(|p| p.totals.pfc_watchdog_trips).sum(),
        watchdog_drops: all_ports()
            .map(|p| p.drops_for(intlab_switch::DropReason::PfcWatchdog))
            .sum(),
        overruns,
        overruns_unexplained,
        late_pauses: m.late_pauses.len() as u64,
    }
}

/// How many of the overruns at `overruns_at` (scenario ns) no lateness explains. The headroom
/// covers what arrives within `window_ns` of a pause being due (the path's round trip plus the
/// hosts' response allowance): an overrun is the lab's lateness when a stall or hiccup began
/// before it and ended less than `window_ns` before it; the sender or the switch was then not
/// running when the pause had to be sent or obeyed.
fn unexplained_overruns<'a>(overruns_at: &[u64], lateness: impl Iterator<Item = &'a HostStall>, window_ns: u64) -> u64 {
    let late: Vec<(u64, u64)> = lateness.map(|s| (s.at_ns, s.at_ns + s.late_ns + window_ns)).collect();
    overruns_at
        .iter()
        .filter(|&&t| !late.iter().any(|&(from, to)| from <= t && t <= to))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that measured nothing, for a test to fill in.
    fn nothing() -> Measured<'static> {
        Measured {
            program_rtt_min_ns: None,
            flows: &[],
            series: &[],
            stalls: &[],
            hiccups: &[],
            late_pauses: &[],
            switches: &[],
            hosts: &[],
            content_errors: 0,
            max_path_switches: 1,
            hop_bytes: None,
        }
    }

    #[test]
    fn quantiles_use_nearest_rank() {
        let q = Quantiles::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!((q.p50, q.p99, q.max), (50.0, 99.0, 100.0));
        let q = Quantiles::of(vec![3.0]).unwrap();
        assert_eq!((q.p50, q.p99, q.max), (3.0, 3.0, 3.0));
        assert!(Quantiles::of(vec![]).is_none());
    }

    #[test]
    fn ideal_fct_of_one_packet_over_two_links() {
        let t = crate::topology::two_hosts_on_a_switch();
        // 1000 B WRITE ONLY without INT: 1000 + 42 + 12 + 4 + 16 = 1074 B = 8592 ns at 1 Gb/s,
        // twice (store and forward), plus 2 × 20 us of propagation.
        assert_eq!(ideal_fct_ns(&t, &[0, 1], 1000, 1024, None), 8592 * 2 + 40_000);
        // INT adds its 12-byte header and one 24-byte hop per packet.
        assert_eq!(
            ideal_fct_ns(&t, &[0, 1], 1000, 1024, Some(24)),
            (1074 + 36) * 8 * 2 + 40_000
        );
    }

    #[test]
    fn the_stall_share_is_of_the_run_even_when_nothing_completed() {
        let s = Scenario::builtin(&crate::scenario::Overrides::default()).unwrap();
        let flows: Vec<FlowResult> = (1..=4).map(|id| FlowResult::fixture(id, 0, None)).collect();
        let hosts: Vec<HostCounters> = (1..=5)
            .map(|h| HostCounters {
                host: format!("h{h}"),
                counters: EndpointCounters::default(),
                pfc_received: Vec::new(),
                xoffs_read: Vec::new(),
            })
            .collect();
        let stall = |at_ns, late_ns| HostStall {
            host: "h1".into(),
            at_ns,
            late_ns,
        };
        // 10 ms of run; 1 ms stalled, and a stall at the end counted only up to the end.
        let stalls = [stall(2_000_000, 1_000_000), stall(9_500_000, 4_000_000)];
        let m = Measured {
            flows: &flows,
            stalls: &stalls,
            hosts: &hosts,
            ..nothing()
        };
        let time = Timebase {
            t0_ns: 5_000_000,
            end_ns: 15_000_000,
            dilation: Dilation::new(1.0),
        };
        let sum = summarize(&s, &m, time, Ending::TimedOut);
        assert_eq!(sum.completed, 0);
        assert!(
            (sum.host_stall_fraction - 1.5e6 / (5.0 * 10e6)).abs() < 1e-12,
            "{}",
            sum.host_stall_fraction
        );
    }

    #[test]
    fn goodput_of_an_unfinished_run_counts_to_its_end() {
        let s = Scenario::builtin(&crate::scenario::Overrides::default()).unwrap();
        let done = FlowResult {
            bytes_received: 1_000_000,
            ..FlowResult::fixture(1, 0, Some(10_000_000))
        };
        let partial = FlowResult {
            bytes_received: 500_000,
            ..FlowResult::fixture(2, 0, None)
        };
        let flows = [done, partial];
        let m = Measured {
            flows: &flows,
            ..nothing()
        };
        let time = Timebase {
            t0_ns: 0,
            end_ns: 20_000_000,
            dilation: Dilation::new(1.0),
        };
        // 1.5 MB in the 20 ms the run lasted, not in the 10 ms to the one completion.
        let sum = summarize(&s, &m, time, Ending::TimedOut);
        assert!(
            (sum.goodput_bps - 1.5e6 * 8.0 / 0.02).abs() < 1e-3,
            "{}",
            sum.goodput_bps
        );
        let all_done = [flows[0].clone()];
        let sum = summarize(&s, &Measured { flows: &all_done, ..m }, time, Ending::Completed);
        assert!((sum.goodput_bps - 1e6 * 8.0 / 0.01).abs() < 1e-3, "{}", sum.goodput_bps);
    }

    #[test]
    fn slowdown_is_bucketed_by_size_decade() {
        let flow = |size: u64, slowdown: Option<f64>| FlowResult {
            size,
            slowdown,
            ..FlowResult::fixture(1, 0, Some(1))
        };
        let flows = [
            flow(1_000, Some(2.0)),
            flow(9_999, Some(4.0)),
            flow(10_000, Some(1.5)),
            flow(5_000_000, Some(1.1)),
            flow(5_000_000, None),
        ];
        let b = slowdown_by_size(&flows);
        let got: Vec<(&str, usize, f64)> = b.iter().map(|b| (b.label.as_str(), b.flows, b.slowdown.max)).collect();
        assert_eq!(got, [("<10KB", 2, 4.0), ("10KB-100KB", 1, 1.5), ("1MB-10MB", 1, 1.1)]);
    }

    #[test]
    fn an_overrun_nothing_explains_is_a_fault_only_in_a_run_that_kept_its_schedule() {
        let mut port = PortSnapshot {
            name: "eth1".into(),
            overruns_at: vec![1_000_000],
            ..PortSnapshot::default()
        };
        port.totals.pfc_overruns = 1;
        let switches = [SwitchSnapshot {
            switch: "s1".into(),
            ports: vec![port],
            ..SwitchSnapshot::default()
        }];
        let m = Measured {
            switches: &switches,
            ..nothing()
        };
        let time = Timebase {
            t0_ns: 0,
            end_ns: 10_000_000,
            dilation: Dilation::new(1.0),
        };
        let kept = pfc_summary(&m, time, 10_000, false);
        assert_eq!((kept.overruns, kept.overruns_unexplained), (1, 1));
        let behind = pfc_summary(&m, time, 10_000, true);
        assert_eq!((behind.overruns, behind.overruns_unexplained), (1, 0));
    }

    #[test]
    fn an_overrun_is_the_labs_lateness_only_when_a_stall_ran_into_its_window() {
        let late = |host: &str, at_ns, late_ns| HostStall {
            host: host.into(),
            at_ns,
            late_ns,
        };
        let stalls = [late("h1", 1_000_000, 500_000), late("worker0", 5_000_000, 100_000)];
        // A window of 200 us after each: 1.0-1.7 ms and 5.0-5.3 ms.
        let at = [1_000_000, 1_650_000, 1_750_000, 5_300_000, 900_000];
        assert_eq!(
            unexplained_overruns(&at, stalls.iter(), 200_000),
            2,
            "1.75 ms and 0.9 ms"
        );
        assert_eq!(
            unexplained_overruns(&at, [].iter(), 200_000),
            5,
            "nothing late: all of them"
        );
    }
}
