//! Flows (one message on one queue pair) and what the transport reports about them.

use std::net::Ipv4Addr;

use serde::Serialize;

/// How a message is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// RDMA WRITE (FIRST with RETH, MIDDLE, LAST; or ONLY).
    #[default]
    Write,
    /// SEND (FIRST, MIDDLE, LAST; or ONLY).
    Send,
}

/// One message from `src` to `dst` on queue pair `id` (the QP number at both ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSpec {
    /// Flow id and QP number (24 bits), unique in a run.
    pub id: u32,
    /// Sending host.
    pub src: Ipv4Addr,
    /// Receiving host.
    pub dst: Ipv4Addr,
    /// Message size in bytes.
    pub size: u64,
    /// When the sender starts (ns on the shared clock).
    pub start_ns: u64,
    /// WRITE or SEND.
    pub kind: MessageKind,
    /// UDP source port of its packets (ECMP hashes on it); whoever plans the flows gives a
    /// host's flows different ones ([`source_port`]).
    pub src_port: u16,
}

/// The UDP source port for a host's `n`-th flow (from 0): the dynamic range 49152-65535 in
/// turn, so that no two of a host's first 16,384 flows share one.
pub fn source_port(n: usize) -> u16 {
    49152 + (n % 16384) as u16
}

/// What the lab knows of the way a flow takes, for its controller (see
/// [`crate::cc::PathInfo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FlowPath {
    /// Base RTT of the flow's path (ns).
    pub base_rtt_ns: u64,
    /// The largest base RTT among the run's flows (ns).
    pub fabric_rtt_ns: u64,
    /// Switches on the path.
    pub hops: u32,
}

/// What the sender saw of a flow.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct FlowRecord {
    /// Flow id.
    pub id: u32,
    /// Sender.
    pub src: Ipv4Addr,
    /// Receiver.
    pub dst: Ipv4Addr,
    /// Message bytes.
    pub size: u64,
    /// Start (ns).
    pub start_ns: u64,
    /// When the last byte was acknowledged (ns), if it was.
    pub end_ns: Option<u64>,
    /// Data packets sent, retransmissions included.
    pub packets_sent: u64,
    /// Data packets sent again.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// NAKs received.
    pub naks: u64,
    /// CNPs received.
    pub cnps: u64,
    /// Bytes put on the wire for data packets (Ethernet frames, INT included).
    pub wire_bytes: u64,
    /// Smallest RTT sample (ns).
    pub rtt_min_ns: Option<u64>,
    /// Mean RTT sample (ns).
    pub rtt_mean_ns: Option<u64>,
}

impl FlowRecord {
    /// Flow completion time (ns), if it completed.
    pub fn fct_ns(&self) -> Option<u64> {
        self.end_ns.map(|e| e - self.start_ns)
    }
}

/// What the receiver saw of a flow.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ReceiveRecord {
    /// Flow id.
    pub id: u32,
    /// Message bytes expected.
    pub size: u64,
    /// Bytes received in order with the right content.
    pub bytes_ok: u64,
    /// Packets whose content was wrong (counted, never accepted).
    pub content_errors: u64,
    /// Packets received again (already had them).
    pub duplicates: u64,
    /// Packets that arrived after a gap (dropped, NAKed).
    pub out_of_order: u64,
    /// When the last byte arrived (ns), if it did.
    pub done_ns: Option<u64>,
}

/// One point of a flow's time series.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize, PartialEq)]
pub struct Sample {
    /// Time (ns).
    pub t_ns: u64,
    /// Bytes of the message acknowledged by then.
    pub acked_bytes: u64,
    /// Pacing rate (b/s).
    pub rate_bps: u64,
    /// Window (bytes), if the controller uses one.
    pub window_bytes: Option<u64>,
    /// The controller's utilization estimate, if it has one.
    pub utilization: Option<f64>,
    /// Largest queue occupancy (bytes) any hop reported in the INT of the ACK that triggered
    /// this sample.
    pub qlen_bytes: Option<u64>,
    /// The RTT sample of the ACK that triggered this sample (ns).
    pub rtt_ns: Option<u64>,
    /// The controller's target delay, if it has one (ns).
    pub target_delay_ns: Option<u64>,
}

/// A sent flow as it stands now, for a live view of a running lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowNow {
    /// Flow id.
    pub id: u32,
    /// Source host address.
    pub src: std::net::Ipv4Addr,
    /// Destination host address.
    pub dst: std::net::Ipv4Addr,
    /// Message bytes.
    pub size: u64,
    /// Message bytes acknowledged so far.
    pub acked_bytes: u64,
    /// Bytes put on the wire so far, headers and retransmissions included.
    pub wire_bytes: u64,
    /// Packets retransmitted so far.
    pub retransmissions: u64,
    /// The controller's pacing rate (b/s); 0 once the flow is done.
    pub rate_bps: u64,
    /// The controller's window (bytes), if it keeps one.
    pub window_bytes: Option<u64>,
    /// The latest RTT sample (ns), if there was one.
    pub rtt_ns: Option<u64>,
    /// Every byte is acknowledged.
    pub done: bool,
}

/// A sent flow became fully acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Completion {
    /// Flow id.
    pub id: u32,
    /// When its last byte was acknowledged (ns on the shared clock).
    pub end_ns: u64,
}

/// A sent flow has made no progress through [`STUCK_AFTER_TIMEOUTS`] retransmission timeouts in
/// a row: no byte it sent again was acknowledged. In a working lab this does not happen; the
/// run should stop and say why rather than wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Stuck {
    /// Flow id.
    pub id: u32,
    /// Packets of the message acknowledged (its last acknowledged PSN is one less).
    pub packets_acked: u64,
    /// Packets of the message.
    pub packets: u64,
    /// Timeouts so far.
    pub timeouts: u64,
    /// When it was declared stuck (ns on the shared clock).
    pub at_ns: u64,
}

/// Retransmission timeouts in a row without progress after which a flow is [`Stuck`]: the
/// most a RoCE QP retries before it fails (InfiniBand's `retry_cnt` is 3 bits, 7 at most).
/// Four stopped correct runs: on a link losing frames in bursts (netem's Gilbert-Elliott), a
/// last packet resent alone meets the burst again with the burst's own probability each time.
pub const STUCK_AFTER_TIMEOUTS: u32 = 7;

/// What an endpoint tells whoever waits on its sent flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum FlowEvent {
    /// Fully acknowledged.
    Completed(Completion),
    /// No progress (see [`Stuck`]).
    Stuck(Stuck),
}
