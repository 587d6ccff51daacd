//! Per-port counters, kept by the worker that owns the port and published as snapshots.

use std::path::Path;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::queue_trace::{QueuePoint, QueueTrace};
use crate::tm::PRIORITIES;

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than an Ethernet header.
    Runt,
    /// IPv4 or UDP header broken (truncated, bad checksum or lengths).
    Malformed,
    /// Not IPv4 and no MAC table entry.
    NonIpv4,
    /// No route and no MAC table entry for the destination.
    NoRoute,
    /// Broadcast or multicast that is not an ARP request the switch can answer.
    Broadcast,
    /// The egress buffer was full (tail drop).
    BufferFull,
    /// Lost on the egress link by configured fault injection.
    InjectedLoss,
    /// Larger than the switch's frame buffers.
    Oversize,
    /// The worker owning the egress port could not take it in time.
    HandoffFull,
    /// The egress device refused it.
    TxError,
    /// Its IPv4 TTL ran out here.
    TtlExpired,
    /// The P4 program dropped it (`mark_to_drop`, `egress_spec` 511).
    P4Drop,
    /// The P4 program sent it to a port number no port of the switch has.
    P4NoPort,
    /// Its priority was in a pause storm: the PFC watchdog drops it.
    PfcWatchdog,
    /// Its link was down: queued for it, on it, or arriving over it when it went down or
    /// while it was down.
    LinkDown,
    /// Arrived while the port's queue in the kernel (a socket's buffer, an AF_XDP ring) was
    /// full: the worker had not read the frames before it. Counted as the kernel reports it.
    RxOverflow,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 16] = [
        DropReason::Runt,
        DropReason::Malformed,
        DropReason::NonIpv4,
        DropReason::NoRoute,
        DropReason::Broadcast,
        DropReason::BufferFull,
        DropReason::InjectedLoss,
        DropReason::Oversize,
        DropReason::HandoffFull,
        DropReason::TxError,
        DropReason::TtlExpired,
        DropReason::P4Drop,
        DropReason::P4NoPort,
        DropReason::PfcWatchdog,
        DropReason::LinkDown,
        DropReason::RxOverflow,
    ];

    /// Snake-case name used in counter files and capture comments.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Runt => "runt",
            DropReason::Malformed => "malformed",
            DropReason::NonIpv4 => "non_ipv4",
            DropReason::NoRoute => "no_route",
            DropReason::Broadcast => "broadcast",
            DropReason::BufferFull => "buffer_full",
            DropReason::InjectedLoss => "injected_loss",
            DropReason::Oversize => "oversize",
            DropReason::HandoffFull => "handoff_full",
            DropReason::TxError => "tx_error",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::P4Drop => "p4_drop",
            DropReason::P4NoPort => "p4_no_port",
            DropReason::PfcWatchdog => "pfc_watchdog",
            DropReason::LinkDown => "link_down",
            DropReason::RxOverflow => "rx_overflow",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Frames the switch does not forward because they are not the lab's: the kernel's own
    /// IPv6 (router and neighbour solicitations, MLD) and broadcasts. Nothing a workload sends
    /// is refused for these reasons, so they are not counted as its losses.
    pub fn is_foreign(self) -> bool {
        matches!(self, DropReason::NonIpv4 | DropReason::Broadcast)
    }
}

/// The running totals of one port: kept live by its worker and published as they are.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize, PartialEq, Eq, Default)]
pub struct PortTotals {
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames transmitted.
    pub tx_frames: u64,
    /// Bytes transmitted (on the wire, INT included).
    pub tx_bytes: u64,
    /// ECN-capable frames marked CE at egress.
    pub ecn_marks: u64,
    /// INT hops pushed at egress.
    pub int_pushed: u64,
    /// INT frames whose remaining hop count was 0 (E set).
    pub int_hop_limit: u64,
    /// INT frames a hop would have pushed past the MTU (M set).
    pub int_mtu_exceeded: u64,
    /// Frames with malformed INT, forwarded untouched.
    pub int_malformed: u64,
    /// Largest queue occupancy seen at dequeue (bytes).
    pub queue_max: u64,
    /// PFC frames received: pauses of this port's transmission (802.1Qbb).
    #[serde(default)]
    pub pfc_rx: u64,
    /// Other MAC control frames received (802.3x PAUSE), dropped unheeded.
    #[serde(default)]
    pub mac_control_ignored: u64,
    /// PFC frames sent: this port's XOFFs (and their refreshes) and XONs to its upstream.
    #[serde(default)]
    pub pfc_tx: u64,
    /// Per priority: PFC frames received that named it (pause or resume).
    #[serde(default)]
    pub pfc_rx_priority: [u64; PRIORITIES],
    /// Per priority: PFC frames sent that named it (XOFF, refresh or XON).
    #[serde(default)]
    pub pfc_tx_priority: [u64; PRIORITIES],
    /// Per priority: time this port's transmitter was paused by the PFC frames it received (ns).
    #[serde(default)]
    pub pfc_paused_ns: [u64; PRIORITIES],
    /// Per priority: time this port held its upstream in XOFF, first XOFF to XON (ns).
    #[serde(default)]
    pub pfc_xoff_ns: [u64; PRIORITIES],
    /// Pause storms the PFC watchdog declared on this port's transmitter.
    #[serde(default)]
    pub pfc_watchdog_trips: u64,
    /// Frames queued here that reached their lossless ingress past its headroom: their sender
    /// went on longer after a pause than the headroom allows (see `Admission::Overrun`).
    #[serde(default)]
    pub pfc_overruns: u64,
    /// Frames a P4 program's egress sent back to the switch's ingress (`recirculate`).
    #[serde(default)]
    pub p4_recirculated: u64,
    /// Frames its link delivered twice (impairment `duplicate`).
    #[serde(default)]
    pub link_duplicated: u64,
    /// Frames its link delivered with a bit flipped (impairment `corrupt`).
    #[serde(default)]
    pub link_corrupted: u64,
    /// Frames its link sent ahead of frames delayed before them (impairment `reorder`).
    #[serde(default)]
    pub link_reordered: u64,
    /// Frames a host's link lost on their way in (of the `injected_loss` drops; the rest its
    /// own link lost on their way out).
    #[serde(default)]
    pub rx_link_lost: u64,
    /// Frames a host's link delivered twice on their way in.
    #[serde(default)]
    pub rx_link_duplicated: u64,
    /// Frames a host's link delivered with a bit flipped on their way in.
    #[serde(default)]
    pub rx_link_corrupted: u64,
    /// Frames a host's link delivered ahead of frames sent before them.
    #[serde(default)]
    pub rx_link_reordered: u64,
    /// Frames that came over a tunnel from another machine after the lab time they were due
    /// to arrive at: the machines' network (plus the sites' clock offset) took longer than the
    /// link's delay.
    #[serde(default)]
    pub tunnel_late: u64,
    /// The latest of them (ns).
    #[serde(default)]
    pub tunnel_late_max_ns: u64,
    /// Frames received on a tunnel device that carried no arrival stamp (dropped as malformed).
    #[serde(default)]
    pub tunnel_unstamped: u64,
    /// Frames received on a tunnel device whose tag did not check: not from the peer switch
    /// (dropped as malformed).
    #[serde(default)]
    pub tunnel_forged: u64,
    /// Tunnel frames whose time was outside the window around the lab clock (dropped as
    /// malformed).
    #[serde(default)]
    pub tunnel_out_of_window: u64,
    /// Tunnel frames dropped because the worker held as many as it may until their arrival.
    #[serde(default)]
    pub tunnel_held_full: u64,
}

/// Live counters of one port.
#[derive(Debug)]
pub struct PortCounters {
    /// What is summed as frames pass.
    pub totals: PortTotals,
    drops: [u64; DropReason::ALL.len()],
    queue: Histogram<u64>,
    trace: QueueTrace,
    /// How late frames were released against their exact schedule (ns).
    late: Histogram<u64>,
    /// Per priority: since when this port has held its upstream in XOFF (ns).
    xoff_since: [Option<u64>; PRIORITIES],
    /// When the first overruns happened (ns), up to [`OVERRUNS_KEPT`].
    overruns_at: Vec<u64>,
    /// The PFC frames received, up to [`PFC_KEPT`]: (ns, whether one paused a priority).
    pfc_received: Vec<(u64, bool)>,
    /// The XOFFs this port released, up to [`PFC_KEPT`]: (when asked for, when due at the far
    /// end; ns).
    xoffs_sent: Vec<(u64, u64)>,
}

/// PFC frames a port keeps the times of (the count goes on).
pub const PFC_KEPT: usize = 100_000;

/// Overruns a port keeps the times of (the count goes on): enough to say what explains them.
pub const OVERRUNS_KEPT: usize = 10_000;

impl Default for PortCounters {
    fn default() -> Self {
        PortCounters {
            totals: PortTotals::default(),
            drops: [0; DropReason::ALL.len()],
            trace: QueueTrace::default(),
            // Queues of up to 4 GB at 3 significant digits.
            queue: Histogram::new_with_max(1 << 32, 3)
                .unwrap_or_else(|_| Histogram::new(3).expect("3 digits is valid")),
            // Lateness up to about 18 minutes at 2 significant digits.
            late: Histogram::new_with_max(1 << 40, 2).unwrap_or_else(|_| Histogram::new(2).expect("2 digits is valid")),
            xoff_since: [None; PRIORITIES],
            overruns_at: Vec::new(),
            pfc_received: Vec::new(),
            xoffs_sent: Vec::new(),
        }
    }
}

impl PortCounters {
    /// Counts a drop.
    pub fn drop(&mut self, why: DropReason) {
        self.drops[why.index()] += 1;
    }

    /// Counts an overrun: a frame that arrived at `at_ns` past its lossless ingress's headroom.
    pub fn overrun(&mut self, at_ns: u64) {
        self.totals.pfc_overruns += 1;
        if self.overruns_at.len() < OVERRUNS_KEPT {
            self.overruns_at.push(at_ns);
        }
    }

    /// Notes a PFC frame that arrived at `at_ns`: `pause` when it paused some priority (else it
    /// resumed them).
    pub fn pfc_received(&mut self, at_ns: u64, pause: bool) {
        if self.pfc_received.len() < PFC_KEPT {
            self.pfc_received.push((at_ns, pause));
        }
    }

    /// Notes the release of `frame`, due at the far end at `due_ns`, if it is an XOFF that the
    /// switch's buffer asked for at `asked_ns`: the lab compares that due time with when the
    /// upstream obeyed.
    pub fn released_mac_control(&mut self, frame: &[u8], asked_ns: u64, due_ns: u64) {
        let Ok(pfc) = int_format::pfc::PfcFrame::new_checked(frame) else {
            return;
        };
        let pauses = (0..PRIORITIES).any(|p| pfc.quanta(p).is_some_and(|q| q > 0));
        if pauses && self.xoffs_sent.len() < PFC_KEPT {
            self.xoffs_sent.push((asked_ns, due_ns));
        }
    }

    /// Counts `n` frames dropped for `why` at once (as the kernel reports them).
    pub fn drop_many(&mut self, why: DropReason, n: u64) {
        self.drops[why.index()] += n;
    }

    /// Drops counted for `why`.
    pub fn drops(&self, why: DropReason) -> u64 {
        self.drops[why.index()]
    }

    /// Counters that also keep the queue over time in intervals of `every_ns` (0: not kept).
    pub fn with_queue_trace(every_ns: u64) -> PortCounters {
        PortCounters {
            trace: QueueTrace::new(every_ns),
            ..PortCounters::default()
        }
    }

    /// Records the queue occupancy `qlen` a frame saw when it started leaving at `t_ns`.
    pub fn record_queue(&mut self, t_ns: u64, qlen: u64) {
        self.totals.queue_max = self.totals.queue_max.max(qlen);
        self.trace.record(t_ns, qlen);
        let _ = self.queue.record(qlen.min(self.queue.high()));
    }

    /// Records how late (ns) a frame was released after its scheduled time.
    pub fn record_lateness(&mut self, late_ns: u64) {
        let _counted = self.late.record(late_ns.min(self.late.high()));
    }

    /// Counts a frame its link carries as `v` says (sent: the link did not lose it).
    pub fn sent(&mut self, len: usize, v: &crate::impair::Verdict) {
        let t = &mut self.totals;
        t.tx_frames += 1;
        t.tx_bytes += len as u64;
        t.link_duplicated += u64::from(v.duplicate);
        t.link_corrupted += u64::from(v.corrupt.is_some());
        t.link_reordered += u64::from(v.reordered);
    }

    /// Counts the switch's own MAC control frame `frame` this port started sending at `at_ns`:
    /// a PFC frame is counted per priority ([`PortCounters::pfc_sent`]), anything else not.
    pub fn mac_control_sent(&mut self, at_ns: u64, frame: &[u8]) {
        if let Ok(pfc) = int_format::pfc::PfcFrame::new_checked(frame) {
            self.pfc_sent(at_ns, std::array::from_fn(|p| pfc.quanta(p)));
        }
    }

    /// Counts a PFC frame this port sent at `at_ns` with `quanta` per priority: an XOFF
    /// starts (or continues) holding that priority upstream, an XON (0) ends it.
    pub fn pfc_sent(&mut self, at_ns: u64, quanta: [Option<u16>; PRIORITIES]) {
        self.totals.pfc_tx += 1;
        for (p, q) in quanta.iter().enumerate() {
            self.totals.pfc_tx_priority[p] += u64::from(q.is_some());
            match (q, self.xoff_since[p]) {
                (Some(0), Some(since)) => {
                    self.totals.pfc_xoff_ns[p] += at_ns.saturating_sub(since);
                    self.xoff_since[p] = None;
                }
                (Some(q), None) if *q > 0 => self.xoff_since[p] = Some(at_ns),
                _ => {}
            }
        }
    }

    /// A copy for publishing at `now_ns` (an XOFF still on counts up to then); the queue trace
    /// only when `with_trace` (it grows with the run).
    pub fn snapshot(&self, name: &str, io: &str, with_trace: bool, now_ns: u64) -> PortSnapshot {
        let mut totals = self.totals;
        for (p, since) in self.xoff_since.iter().enumerate() {
            if let Some(since) = since {
                totals.pfc_xoff_ns[p] += now_ns.saturating_sub(*since);
            }
        }
        PortSnapshot {
            name: name.to_owned(),
            io: io.to_owned(),
            totals,
            drops: DropReason::ALL
                .iter()
                .map(|d| (d.name().to_owned(), self.drops[d.index()]))
                .filter(|(_, n)| *n > 0)
                .collect(),
            queue_now: 0,
            queue_p50: self.queue.value_at_quantile(0.5),
            queue_p99: self.queue.value_at_quantile(0.99),
            queue_samples: self.queue.len(),
            release_late_p50_ns: self.late.value_at_quantile(0.5),
            release_late_p99_ns: self.late.value_at_quantile(0.99),
            release_late_max_ns: self.late.max(),
            release_late: if with_trace {
                self.late
                    .iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect()
            } else {
                Vec::new()
            },
            queue_trace: if with_trace { self.trace.points() } else { Vec::new() },
            overruns_at: self.overruns_at.clone(),
            pfc_received: if with_trace {
                self.pfc_received.clone()
            } else {
                Vec::new()
            },
            xoffs_sent: if with_trace {
                self.xoffs_sent.clone()
            } else {
                Vec::new()
            },
        }
    }
}

/// Counters of one port at one moment, as written to the counters file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default, serde::Deserialize)]
pub struct PortSnapshot {
    /// Port name.
    pub name: String,
    /// How the port moves frames: `af_xdp`, `af_packet`, `af_packet_ring` (veth ports), `tap`
    /// or `link` (in-process).
    #[serde(default)]
    pub io: String,
    /// The port's totals.
    #[serde(flatten)]
    pub totals: PortTotals,
    /// Drops by reason (reasons with zero drops left out).
    pub drops: std::collections::BTreeMap<String, u64>,
    /// Bytes queued when the snapshot was taken.
    #[serde(default)]
    pub queue_now: u64,
    /// Median queue at dequeue, bytes.
    pub queue_p50: u64,
    /// 99th percentile queue at dequeue, bytes.
    pub queue_p99: u64,
    /// Dequeues sampled.
    pub queue_samples: u64,
    /// Median delay between a frame's scheduled release and the worker releasing it (ns): the
    /// timing error the emulation adds, beyond the exact schedule.
    pub release_late_p50_ns: u64,
    /// 99th percentile of that delay (ns).
    pub release_late_p99_ns: u64,
    /// Largest such delay (ns).
    pub release_late_max_ns: u64,
    /// Every release's delay as (ns, frames) at 2 significant digits, in the final counters:
    /// to pool the ports' lateness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub release_late: Vec<(u64, u64)>,
    /// The queue over time, in the final counters of a switch that keeps it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_trace: Vec<QueuePoint>,
    /// When frames overran their ingress's headroom (ns; the first [`OVERRUNS_KEPT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overruns_at: Vec<u64>,
    /// The PFC frames received (ns, whether it paused), in the final counters: the first
    /// [`PFC_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pfc_received: Vec<(u64, bool)>,
    /// The XOFFs it released (when its buffer asked for one, when it was due at the far end;
    /// ns), in the final counters: the first [`PFC_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xoffs_sent: Vec<(u64, u64)>,
}

impl PortSnapshot {
    /// The `q` quantile (0-1) of the release lateness of every frame the `ports` sent,
    /// pooled (ns); None when they recorded none.
    pub fn pooled_lateness<'a>(ports: impl Iterator<Item = &'a PortSnapshot>, q: f64) -> Option<u64> {
        let mut all: Vec<(u64, u64)> = ports.flat_map(|p| p.release_late.iter().copied()).collect();
        all.sort_unstable();
        let total: u64 = all.iter().map(|&(_, n)| n).sum();
        // Nearest rank, as hdrhistogram's value_at_quantile.
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total.max(1));
        let mut seen = 0;
        all.into_iter().find_map(|(v, n)| {
            seen += n;
            (seen >= rank).then_some(v)
        })
    }

    /// Total drops of every reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum()
    }

    /// Drops of the lab's own frames: every reason but [`DropReason::is_foreign`].
    pub fn lab_drops(&self) -> u64 {
        self.total_drops() - self.foreign_frames()
    }

    /// Frames not forwarded because they were not the lab's ([`DropReason::is_foreign`]).
    pub fn foreign_frames(&self) -> u64 {
        DropReason::ALL
            .iter()
            .filter(|d| d.is_foreign())
            .map(|&d| self.drops_for(d))
            .sum()
    }

    /// Drops for one reason.
    pub fn drops_for(&self, why: DropReason) -> u64 {
        self.drops.get(why.name()).copied().unwrap_or(0)
    }
}

/// Every port of a switch at one moment.
#[derive(Debug, Clone, Serialize, serde::Deserialize, Default)]
pub struct SwitchSnapshot {
    /// Switch name.
    pub switch: String,
    /// Node ID.
    pub node_id: u32,
    /// Switch clock when taken (ns).
    pub time_ns: u64,
    /// Ports in configuration order.
    pub ports: Vec<PortSnapshot>,
    /// Worker threads that ended by panicking (0 in a healthy switch).
    pub failed_workers: usize,
    /// Times a worker ran another worker's ports itself, frames in hand, because that worker
    /// was asleep (over every switch of the lab).
    #[serde(default)]
    pub borrowed_runs: u64,
}

impl SwitchSnapshot {
    /// Writes the snapshot as JSON, atomically (temporary file, then rename).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_chatter_is_counted_apart_from_the_labs_drops() {
        let mut c = PortCounters::default();
        c.drop(DropReason::NonIpv4);
        c.drop(DropReason::NonIpv4);
        c.drop(DropReason::Broadcast);
        c.drop(DropReason::BufferFull);
        let s = c.snapshot("eth1", "veth", false, 0);
        assert_eq!((s.total_drops(), s.lab_drops(), s.foreign_frames()), (4, 1, 3));
    }
}
