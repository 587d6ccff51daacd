//! How a host's transport is configured: its line rate, MTU, ACK and CNP policy, when data
//! carries INT, and what programs' QPs are allowed.

use std::net::Ipv4Addr;

use crossbeam_channel::Sender;

use crate::cc::{ControllerConfig, PathInfo};
use crate::flow::{FlowEvent, FlowPath};
use crate::packet::WIRE_OVERHEAD;
use crate::verbs::SenderTiming;

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
