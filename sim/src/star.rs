//! The lab of most behaviour tests: hosts on one switch, every link alike.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use intlab_switch::SwitchSpec;
use intlab_switch::config::{ArpMode, EcnSpec, NextHop, PacketIo, PortIo, PortSpec, Route};
use intlab_switch::counters::PortSnapshot;
use intlab_switch::impair::ImpairmentSpec;
use intlab_switch::tm::{MmuSpec, PfcSpec, PrioritySpec};
use intlab_switch::units::{Bytes, Nanos, Rate};
use intlab_transport::cc::ControllerConfig;
use intlab_transport::endpoint::{EndpointConfig, EndpointReport};
use intlab_transport::flow::{FlowPath, FlowRecord, FlowSpec, MessageKind, Sample, source_port};
use intlab_transport::packet::WIRE_OVERHEAD;

use crate::{HostId, SimError, Simulator, SwitchId};

/// Bytes a data packet carries besides its payload: Ethernet, IPv4 and UDP, BTH and ICRC, and
/// INT's shim and metadata headers with one hop of HPCC's instructions (24 bytes).
const DATA_OVERHEAD: u64 = WIRE_OVERHEAD + 16 + 12 + 24;
/// An ACK's bytes: the same, with an AETH instead of a payload.
const ACK_BYTES: u64 = DATA_OVERHEAD + 4;

/// Hosts `h1`..`hN` on switch `s1`, each on a link of the same rate, delay and buffer.
#[derive(Debug, Clone)]
pub struct Star {
    /// Hosts.
    pub hosts: usize,
    /// Every link's rate (b/s), the hosts' NICs included.
    pub rate_bps: u64,
    /// Every link's one-way propagation delay (ns).
    pub delay_ns: u64,
    /// Every port's buffer (bytes; with a shared buffer, their sum is its size).
    pub buffer: u64,
    /// ECN marking on every port.
    pub ecn: Option<EcnSpec>,
    /// PFC on the switch (and a shared buffer with it); hosts then honour it.
    pub pfc: Option<PfcSpec>,
    /// A shared buffer without PFC.
    pub mmu: Option<MmuSpec>,
    /// Payload bytes per packet (RoCE MTU).
    pub mtu: u64,
    /// Seed of the switch's ECN draws and its links' impairments.
    pub seed: u64,
    /// What every link does to the frames the switch sends on it (tc-netem's impairments).
    pub impair: ImpairmentSpec,
    /// Interval of the ports' queue traces (ns; 0: none).
    pub queue_trace_every_ns: u64,
}

impl Star {
    /// `hosts` hosts on 10 Gb/s links of 2 us and 2 MB buffers, nothing marked, no PFC, MTU
    /// 1,024: `topologies/incast-4to1-dc.yaml` without its ECN.
    pub fn new(hosts: usize) -> Star {
        Star {
            hosts,
            rate_bps: 10_000_000_000,
            delay_ns: 2_000,
            buffer: 2_000_000,
            ecn: None,
            pfc: None,
            mmu: None,
            mtu: 1024,
            seed: 1,
            impair: ImpairmentSpec::default(),
            queue_trace_every_ns: 1_000,
        }
    }

    /// `topologies/incast-4to1-dc.yaml`'s lab: 5 hosts on 10 Gb/s links of 2 us, 2 MB buffers,
    /// RED at 40-160 KB with pmax 0.2.
    pub fn incast_4to1_dc() -> Star {
        Star {
            ecn: Some(EcnSpec {
                kmin: 40_000,
                kmax: 160_000,
                pmax: 0.2,
            }),
            ..Star::new(5)
        }
    }

    /// `topologies/incast-4to1.yaml`'s lab (the built-in default): 5 hosts on 100 Mb/s links of
    /// 200 us, 1 MB buffers, RED at 20-80 KB with pmax 0.2.
    pub fn incast_4to1() -> Star {
        Star {
            rate_bps: 100_000_000,
            delay_ns: 200_000,
            buffer: 1_000_000,
            ecn: Some(EcnSpec {
                kmin: 20_000,
                kmax: 80_000,
                pmax: 0.2,
            }),
            ..Star::new(5)
        }
    }

    /// Host `i`'s address (from 1).
    pub fn ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 0, i as u8)
    }

    /// The base RTT between two hosts: both links each way, a full data packet one way and its
    /// ACK back, serialized at every link (store and forward).
    pub fn base_rtt_ns(&self) -> u64 {
        let ser = |bytes: u64| Rate(self.rate_bps).serialization_ns(bytes);
        2 * (2 * self.delay_ns + ser(self.mtu + DATA_OVERHEAD) + ser(ACK_BYTES))
    }

    /// The path between two hosts, as a controller is told it.
    pub fn path(&self) -> FlowPath {
        FlowPath {
            base_rtt_ns: self.base_rtt_ns(),
            fabric_rtt_ns: self.base_rtt_ns(),
            hops: 1,
        }
    }

    /// The switch.
    pub fn switch_spec(&self) -> SwitchSpec {
        let port = |i: usize| PortSpec {
            name: format!("eth{}", i + 1),
            io: PortIo::Veth {
                device: format!("bed{i}"),
                netns: None,
            },
            rate: Rate(self.rate_bps),
            delay: Nanos(self.delay_ns),
            buffer: Bytes(self.buffer),
            mtu: 1500,
            ecn: self.ecn,
            int: true,
            impair: self.impair,
            impair_inbound: ImpairmentSpec::default(),
            p4_port: i as u16,
        };
        SwitchSpec {
            name: "s1".into(),
            node_id: 1,
            workers: 1,
            int_port: int_format::int::DEFAULT_INT_PORT,
            ports: (0..self.hosts).map(port).collect(),
            routes: (0..self.hosts)
                .map(|i| Route {
                    prefix: Star::ip(i + 1),
                    len: 32,
                    next: NextHop::Port(i),
                })
                .collect(),
            macs: Vec::new(),
            arp: ArpMode::Answer,
            neighbors: Vec::new(),
            capture: None,
            counters_file: None::<PathBuf>,
            seed: self.seed,
            poll: Default::default(),
            packet_io: PacketIo::Syscalls,
            queue_trace_every: Nanos(self.queue_trace_every_ns),
            p4: None,
            mmu: self.mmu,
            pfc: self.pfc,
            priorities: PrioritySpec::default(),
        }
    }

    /// Host `i`'s transport settings (from 1): the lab's defaults for this link.
    pub fn host_config(&self, i: usize) -> EndpointConfig {
        let mut c = EndpointConfig::new(&format!("h{i}"), Star::ip(i), self.rate_bps, self.base_rtt_ns());
        c.mtu = self.mtu;
        c.pfc = self.pfc.is_some();
        c
    }

    /// The simulator: the switch and its hosts, each host's settings as [`Star::host_config`] then
    /// `configure` make them.
    pub fn build(
        &self,
        configure: impl Fn(&mut EndpointConfig),
    ) -> Result<(Simulator, SwitchId, Vec<HostId>), SimError> {
        let mut bed = Simulator::new();
        let s = bed.switch(self.switch_spec())?;
        let mut hosts = Vec::new();
        for i in 1..=self.hosts {
            let mut c = self.host_config(i);
            configure(&mut c);
            let h = bed.host(c)?;
            bed.link_host(h, s, i - 1)?;
            hosts.push(h);
        }
        Ok((bed, s, hosts))
    }
}

/// A flow of a run on a [`Star`].
#[derive(Debug, Clone)]
pub struct StarFlow {
    /// Sending host (from 1).
    pub src: usize,
    /// Receiving host (from 1).
    pub dst: usize,
    /// Bytes.
    pub size: u64,
    /// When it starts (ns).
    pub start_ns: u64,
    /// Its controller.
    pub cc: ControllerConfig,
}

/// What a run on a [`Star`] gave.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Each flow's completion time (ns), in the order given.
    pub fct_ns: Vec<u64>,
    /// Each flow's sender-side record and time series (every ACK), in the order given.
    pub flows: Vec<(FlowRecord, Vec<Sample>)>,
    /// Each switch port's counters, drops by cause and queue over time (largest occupancy per
    /// trace interval).
    pub ports: Vec<PortSnapshot>,
    /// The senders' reports, by host (from 1; hosts that sent nothing have none).
    pub reports: Vec<Option<EndpointReport>>,
    /// When the first flow started and the last completed (ns).
    pub span_ns: (u64, u64),
}

impl Outcome {
    /// The median FCT (ns; the mean of the middle two for an even count).
    pub fn fct_p50_ns(&self) -> u64 {
        let mut v = self.fct_ns.clone();
        v.sort_unstable();
        match v.len() {
            0 => 0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        }
    }

    /// Payload bytes delivered to host `dst` over the run's span, as a fraction of `rate_bps`
    /// (the lab summary's normalized goodput when `dst` is the only receiver).
    pub fn goodput(&self, flows: &[StarFlow], dst: usize, rate_bps: u64) -> f64 {
        let bytes: u64 = flows.iter().filter(|f| f.dst == dst).map(|f| f.size).sum();
        bytes as f64 * 8.0 / self.span_secs() / rate_bps as f64
    }

    /// Bytes switch port `port` sent over the run's span, as a fraction of `rate_bps`.
    pub fn busy(&self, port: usize, rate_bps: u64) -> f64 {
        self.ports[port].totals.tx_bytes as f64 * 8.0 / self.span_secs() / rate_bps as f64
    }

    fn span_secs(&self) -> f64 {
        (self.span_ns.1.saturating_sub(self.span_ns.0)).max(1) as f64 * 1e-9
    }

    /// Port `port`'s largest queue per trace interval from `from_ns` to `to_ns` (bytes).
    pub fn queue(&self, port: usize, from_ns: u64, to_ns: u64) -> Vec<u64> {
        self.ports[port]
            .queue_trace
            .iter()
            .filter(|p| (from_ns..to_ns).contains(&p.t_ns))
            .map(|p| p.max_bytes)
            .collect()
    }
}

/// Why a run gave no figures.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The simulator could not be built.
    #[error(transparent)]
    Simulator(#[from] SimError),
    /// Not every flow completed in the time given.
    #[error("{finished} of {flows} flow ends finished in {limit_ns} ns")]
    Unfinished {
        /// Flow ends (senders and receivers) that finished.
        finished: usize,
        /// Flow ends there were.
        flows: usize,
        /// The time given.
        limit_ns: u64,
    },
    /// A host's transport failed.
    #[error("a host failed: {0}")]
    Host(#[from] std::io::Error),
    /// A flow names a host the star does not have, or sends to itself.
    #[error("flow {index}: from host {src} to host {dst}, on a star of hosts 1 to {hosts}")]
    BadFlow {
        /// The flow's place in the list.
        index: usize,
        /// Its sender.
        src: usize,
        /// Its receiver.
        dst: usize,
        /// Hosts of the star.
        hosts: usize,
    },
}

impl Star {
    /// Runs `flows` (hosts set up by `configure`; every ACK sampled, every port's queue traced
    /// every `queue_trace_every_ns`) until every flow completed or `limit_ns`.
    pub fn run(
        &self,
        flows: &[StarFlow],
        limit_ns: u64,
        configure: impl Fn(&mut EndpointConfig),
    ) -> Result<Outcome, RunError> {
        let valid = |h: usize| (1..=self.hosts).contains(&h);
        if let Some((index, f)) = flows
            .iter()
            .enumerate()
            .find(|(_, f)| !valid(f.src) || !valid(f.dst) || f.src == f.dst)
        {
            return Err(RunError::BadFlow {
                index,
                src: f.src,
                dst: f.dst,
                hosts: self.hosts,
            });
        }
        let (mut bed, s, hosts) = self.build(|c| {
            c.timing.sample_every_ns = 1;
            configure(c)
        })?;
        let mut sent_by = vec![0usize; self.hosts + 1];
        for (i, f) in flows.iter().enumerate() {
            let flow = FlowSpec {
                id: i as u32 + 1,
                src: Star::ip(f.src),
                dst: Star::ip(f.dst),
                size: f.size,
                start_ns: f.start_ns,
                kind: MessageKind::Write,
                src_port: source_port(sent_by[f.src]),
            };
            sent_by[f.src] += 1;
            bed.expect(hosts[f.dst - 1], flow);
            bed.send(hosts[f.src - 1], flow, f.cc.clone(), self.path());
        }
        if !bed.run_until_finished(2 * flows.len(), limit_ns) {
            return Err(RunError::Unfinished {
                finished: bed.finished(),
                flows: 2 * flows.len(),
                limit_ns,
            });
        }
        let mut reports = vec![None];
        for (i, &h) in hosts.iter().enumerate() {
            reports.push(if sent_by[i + 1] > 0 { Some(bed.report(h)?) } else { None });
        }
        let mut records: Vec<(FlowRecord, Vec<Sample>)> = Vec::new();
        for r in reports.iter_mut().flatten() {
            let mut series = std::mem::take(&mut r.series);
            for rec in &r.sent {
                let samples = series
                    .iter()
                    .position(|(id, _)| *id == rec.id)
                    .map(|k| series.swap_remove(k).1)
                    .unwrap_or_default();
                records.push((rec.clone(), samples));
            }
        }
        records.sort_by_key(|(r, _)| r.id);
        let fct_ns: Vec<u64> = records.iter().filter_map(|(r, _)| r.fct_ns()).collect();
        let first = flows.iter().map(|f| f.start_ns).min().unwrap_or(0);
        let last = records.iter().filter_map(|(r, _)| r.end_ns).max().unwrap_or(first);
        let ports = (0..self.hosts)
            .map(|p| {
                bed.port_counters(s, p)
                    .snapshot(&format!("eth{}", p + 1), "bed", true, bed.now_ns())
            })
            .collect();
        Ok(Outcome {
            fct_ns,
            flows: records,
            ports,
            reports,
            span_ns: (first, last),
        })
    }

    /// Hosts 1..N−1 each send `size` bytes to host N at time 0 under `cc`.
    pub fn incast_flows(&self, cc: &ControllerConfig, size: u64) -> Vec<StarFlow> {
        (1..self.hosts)
            .map(|src| StarFlow {
                src,
                dst: self.hosts,
                size,
                start_ns: 0,
                cc: cc.clone(),
            })
            .collect()
    }
}
