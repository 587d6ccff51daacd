//! What a host's transport counts and reports, and the probes it answers.

use std::net::Ipv4Addr;

use crossbeam_channel::Sender;
use int_format::int::HopRecord;
use serde::Serialize;

use crate::flow::{FlowNow, FlowRecord, ReceiveRecord, Sample};

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
    /// The XOFFs on its data priority: (arrival, read) lab ns; a read after the arrival let
    /// frames out past the pause.
    #[serde(default)]
    pub xoffs_read: Vec<(u64, u64)>,
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
