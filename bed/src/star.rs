//! The lab of most behaviour tests: hosts on one switch, every link alike.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use intlab_switch::SwitchSpec;
use intlab_switch::config::{ArpMode, EcnSpec, NextHop, PacketIo, PortIo, PortSpec, Route};
use intlab_switch::tm::{MmuSpec, PfcSpec, PrioritySpec};
use intlab_switch::units::{Bytes, Nanos, Rate};
use intlab_transport::cc::ControllerConfig;
use intlab_transport::endpoint::{EndpointConfig, EndpointReport};
use intlab_transport::flow::{FlowPath, FlowSpec, MessageKind, source_port};
use intlab_transport::sender::WIRE_OVERHEAD;

use crate::{Bed, BedError, HostId, SwitchId};

/// Bytes a data packet carries besides its payload: Ethernet, IPv4 and UDP, BTH and ICRC, and
/// INT's headers with one hop (HPCC's instructions).
const DATA_OVERHEAD: u64 = WIRE_OVERHEAD + 16 + 12 + 8;
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
    /// Seed of the switch's ECN and loss draws.
    pub seed: u64,
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
            mtu: 9000,
            ecn: self.ecn,
            int: true,
            loss: 0.0,
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
            queue_trace_every: Nanos(0),
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

    /// The bed: the switch and its hosts, each host's settings as [`Star::host_config`] then
    /// `configure` make them.
    pub fn build(&self, configure: impl Fn(&mut EndpointConfig)) -> Result<(Bed, SwitchId, Vec<HostId>), BedError> {
        let mut bed = Bed::new();
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

/// What an incast on a [`Star`] gave.
#[derive(Debug, Clone)]
pub struct Incast {
    /// Each sender's flow completion time (ns), in sender order.
    pub fct_ns: Vec<u64>,
    /// Payload delivered over the time from the first start to the last completion, as a
    /// fraction of the receiver's line rate (the lab summary's `normalized_goodput`).
    pub goodput: f64,
    /// Bytes the receiver's port sent over the same time, as a fraction of its line rate.
    pub busy: f64,
    /// The receiver's port: its counters.
    pub port: intlab_switch::counters::PortTotals,
    /// The senders' reports, in sender order.
    pub senders: Vec<EndpointReport>,
}

impl Incast {
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
}

/// Why an incast gave no figures.
#[derive(Debug, thiserror::Error)]
pub enum IncastError {
    /// The bed could not be built.
    #[error(transparent)]
    Bed(#[from] BedError),
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
}

impl Star {
    /// Hosts 1..`senders` each send `size` bytes to the last host at time 0 under `cc` (hosts
    /// set up by `configure`), run until every flow completed or `limit_ns`.
    pub fn incast(
        &self,
        cc: &ControllerConfig,
        size: u64,
        limit_ns: u64,
        configure: impl Fn(&mut EndpointConfig),
    ) -> Result<Incast, IncastError> {
        let senders = self.hosts - 1;
        let (mut bed, s, hosts) = self.build(configure)?;
        let receiver = hosts[senders];
        for (i, &h) in hosts[..senders].iter().enumerate() {
            let flow = FlowSpec {
                id: i as u32 + 1,
                src: Star::ip(i + 1),
                dst: Star::ip(self.hosts),
                size,
                start_ns: 0,
                kind: MessageKind::Write,
                src_port: source_port(i),
            };
            bed.expect(receiver, flow);
            bed.send(h, flow, cc.clone(), self.path());
        }
        if !bed.run_until_finished(2 * senders, limit_ns) {
            return Err(IncastError::Unfinished {
                finished: bed.finished(),
                flows: 2 * senders,
                limit_ns,
            });
        }
        let senders: Vec<EndpointReport> = hosts[..senders]
            .iter()
            .map(|&h| bed.report(h))
            .collect::<Result<_, _>>()?;
        let fct_ns: Vec<u64> = senders
            .iter()
            .flat_map(|r| r.sent.iter().filter_map(|f| f.fct_ns()))
            .collect();
        let last = fct_ns.iter().copied().max().unwrap_or(0).max(1) as f64;
        let port = bed.port_counters(s, self.hosts - 1).totals;
        let line = self.rate_bps as f64 * 1e-9;
        let delivered = size as f64 * senders.len() as f64;
        Ok(Incast {
            goodput: delivered * 8.0 / last / line,
            busy: port.tx_bytes as f64 * 8.0 / last / line,
            fct_ns,
            port,
            senders,
        })
    }
}
