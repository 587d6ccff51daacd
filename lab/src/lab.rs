//! A running emulated cluster built from a [`Topology`]: a network namespace per host, the
//! hosts' links as veth pairs into one switch namespace, links between switches in-process,
//! routes from shortest paths with ECMP, and a transport endpoint per host. Every switch port
//! and every host runs on one runtime of a fixed number of workers (one per core unless told),
//! whatever the size of the lab (see [`crate::placement`] for what runs where). Everything it
//! creates carries the run's prefix and is removed when it is dropped, also on a panic.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use int_format::ethernet::MacAddress;
use intlab_runtime::{PollMode, Runtime, RuntimeConfig, WorkerStats};
use intlab_switch::config::default_p4_port;
use intlab_switch::config::{ArpMode, CaptureSpec, PortIo, PortSpec, SwitchSpec};
use intlab_switch::frame::FramePool;
use intlab_switch::tm::PfcSpec;
use intlab_switch::units::Nanos;
use intlab_switch::{Fabric, SwitchSnapshot};
use intlab_transport::cc::ControllerConfig;
use intlab_transport::endpoint::{Endpoint, EndpointConfig, EndpointReport, IntMode, Probe, ProgramSettings};
use intlab_transport::flow::{FlowEvent, FlowPath};

use crate::dilation::Dilation;
use crate::netns::{self, CommandError, Namespace};
use crate::placement::{Placement, PlannedLoad};
use crate::topology::{HostInterface, NodeKind, Routes, Topology, distances, routes};

/// Why a lab could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// An iproute2 command failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// A switch did not start.
    #[error(transparent)]
    Switch(#[from] intlab_switch::StartError),
    /// The workers did not start.
    #[error("starting the lab's workers: {cause}")]
    Runtime {
        /// What the system said.
        cause: std::io::Error,
    },
    /// The hosts' RDMA devices could not be served.
    #[error("the hosts' RDMA devices: {cause}")]
    Devices {
        /// What the system said.
        cause: std::io::Error,
    },
    /// An endpoint did not start.
    #[error("host {host}: {cause}")]
    Endpoint {
        /// Host name.
        host: String,
        /// What failed.
        cause: std::io::Error,
    },
}

/// How to build a lab.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// Prefix of every namespace (must start with [`netns::PREFIX`]); unique per run.
    pub prefix: String,
    /// Worker threads for every switch port and host (default: one per core).
    pub workers: usize,
    /// How the workers wait for their next deadline.
    pub poll: PollMode,
    /// How switches read and write their veth ports.
    pub packet_io: intlab_switch::config::PacketIo,
    /// Round-trip overhead of this machine allowed for before the lab measures it (ns): host
    /// and switch wake-ups, about 300-400 us measured here. Real time by nature: it does not
    /// scale with the dilation. It sizes the RTO and the sampling intervals; the controllers'
    /// base RTTs use the overhead the data path check measures.
    pub host_overhead_ns: u64,
    /// The time dilation the topology was built with: the network's own time constants that
    /// the lab adds (the RTO floor) scale with it, as the topology's delays did.
    pub dilation: Dilation,
    /// Folder for per-port captures, if wanted.
    pub capture: Option<PathBuf>,
    /// Seed of the switches' ECN and loss draws (switch k uses seed + k).
    pub seed: u64,
    /// Interval of the switches' queue-over-time traces (ns; 0: none).
    pub queue_trace_every_ns: u64,
    /// How the hosts' transports behave.
    pub transport: TransportSettings,
    /// How long after a link goes down or up the routes follow (scenario ns).
    pub reconverge_ns: u64,
    /// The traffic the workload plans, which the placement of hosts and ports on workers
    /// balances (empty: round robin).
    pub planned: Vec<PlannedLoad>,
    /// The part this machine builds of a lab spread over several (None: all of it).
    pub site: Option<crate::sites::SitePart>,
    /// The controller the QPs of programs in the hosts run (the scenario's).
    pub program_controller: ControllerConfig,
}

/// The transport settings every host of a lab shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransportSettings {
    /// Payload bytes per packet (RoCE MTU 1024, 2048 or 4096).
    pub mtu: u64,
    /// ACK every this many packets.
    pub ack_every: u32,
    /// Shortest time between CNPs of one QP (ns).
    pub cnp_interval_ns: u64,
    /// DSCP of CNPs.
    pub cnp_dscp: u8,
    /// When data carries INT.
    pub int_mode: IntMode,
    /// Spacing of the per-flow time series (ns; 0: none).
    pub sample_every_ns: u64,
}

impl TransportSettings {
    /// The IP MTU of the lab's links: Ethernet's 1500 unless the RoCE MTU needs more, with
    /// room for the IP, UDP, BTH, RETH, ICRC and up to 8 INT hops.
    pub fn link_mtu(&self) -> u16 {
        if self.mtu <= 1024 {
            1500
        } else {
            u16::try_from(self.mtu + 512).unwrap_or(u16::MAX)
        }
    }
}

impl Default for TransportSettings {
    /// The endpoint's defaults (see [`EndpointConfig::new`]), no time series.
    fn default() -> Self {
        TransportSettings {
            mtu: 1024,
            ack_every: 1,
            cnp_interval_ns: 50_000,
            cnp_dscp: 48,
            int_mode: IntMode::Auto,
            sample_every_ns: 0,
        }
    }
}

impl LabConfig {
    /// A configuration with a prefix unique to this process.
    pub fn new(tag: &str) -> LabConfig {
        LabConfig {
            prefix: netns::run_prefix(std::process::id(), tag),
            workers: intlab_runtime::cores(),
            poll: PollMode::default(),
            packet_io: intlab_switch::config::PacketIo::Syscalls,
            host_overhead_ns: 400_000,
            dilation: Dilation::new(1.0),
            capture: None,
            seed: 0,
            queue_trace_every_ns: 0,
            transport: TransportSettings::default(),
            reconverge_ns: crate::lab_links::DEFAULT_RECONVERGE_NS,
            planned: Vec::new(),
            site: None,
            program_controller: ControllerConfig::Hpcc(Default::default()),
        }
    }

    /// Whether this machine builds node `n`.
    fn here(&self, n: usize) -> bool {
        self.site.as_ref().is_none_or(|p| p.here[n])
    }
}

/// What a lab reports when it stops.
#[derive(Debug, Clone, Default)]
pub struct LabReport {
    /// One report per host, in the topology's host order.
    pub hosts: Vec<EndpointReport>,
    /// Final counters of every switch.
    pub switches: Vec<SwitchSnapshot>,
    /// Hosts whose endpoint ended with an error (name, error): their flows are unfinished.
    pub failed_hosts: Vec<(String, String)>,
    /// What each worker measured of itself (empty when a worker panicked).
    pub workers: Vec<WorkerStats>,
    /// The worker each host ran on, by host name.
    pub host_worker: HashMap<String, usize>,
    /// The worker each switch port ran on, by (switch, port) name.
    pub port_worker: HashMap<(String, String), usize>,
}

/// A running lab. Field order is teardown order: programs lose their devices first, the
/// workers stop before the namespaces go.
pub struct Lab {
    nics: Option<crate::nic_device::LabNics>,
    runtime: Option<Runtime>,
    endpoints: Vec<Option<Endpoint>>,
    fabric: Fabric,
    links: std::sync::Arc<crate::lab_links::LabLinks>,
    hosts: Vec<Option<Namespace>>,
    _switch_ns: Namespace,
    topology: Topology,
    base_rtt_ns: u64,
    events: Receiver<FlowEvent>,
    /// Host names, by node index (for reports).
    host_names: Vec<String>,
    host_worker: HashMap<String, usize>,
    port_worker: HashMap<(String, String), usize>,
    /// Each host's RDMA device, by node index.
    devices: Vec<Option<crate::nic_device::HostDevice>>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lab({})", self.topology.name)
    }
}

impl Lab {
    /// Builds and starts everything `t` describes.
    pub fn build(t: &Topology, cfg: &LabConfig) -> Result<Lab, LabError> {
        let started = Instant::now();
        match intlab_runtime::sys::rlimit::raise_open_files() {
            Ok(n) => tracing::debug!(limit = n, "open files"),
            Err(e) => tracing::warn!("the open files limit stays where it was: {e}"),
        }
        let link_mtu = cfg.transport.link_mtu();
        let switch_ns = Namespace::create(&format!("{}-sw", cfg.prefix))?;
        let mut hosts: Vec<Option<Namespace>> = (0..t.nodes.len()).map(|_| None).collect();
        let host_order: Vec<usize> = t.hosts().collect();
        let mac_of: HashMap<usize, MacAddress> = host_order.iter().map(|&h| (h, host_interface(t, h).mac)).collect();
        for &h in host_order.iter().filter(|&&h| cfg.here(h)) {
            hosts[h] = Some(Namespace::create(&format!("{}-{}", cfg.prefix, t.nodes[h].name))?);
        }
        let mut ends = wire_links(t, cfg, &switch_ns, &hosts, link_mtu)?;
        add_static_neighbours(t, cfg, &hosts, &mac_of)?;
        let routes = routes(t);
        let neighbors: Vec<(Ipv4Addr, MacAddress)> = host_order
            .iter()
            .map(|&h| (t.nodes[h].address.expect("address"), mac_of[&h]))
            .collect();
        let placement = Placement::new(t, cfg.workers, &cfg.planned, cfg.transport.mtu);
        tracing::debug!(load = ?placement.load, "placement");
        let SwitchPlan {
            specs,
            port_worker,
            link_ports,
        } = switch_plan(t, cfg, &placement, &routes, &neighbors, &mut ends, link_mtu);
        let runtime = Runtime::start(&RuntimeConfig {
            workers: cfg.workers,
            poll: cfg.poll,
            name: "lab".into(),
        })
        .map_err(|cause| LabError::Runtime { cause })?;
        let capacity = specs.iter().map(intlab_switch::frame_capacity).max().unwrap_or(2048);
        // Enough frames for every port's full buffer of minimum-size frames would be far too
        // many; a pool that runs dry allocates, so this only sizes the steady state.
        let pool = FramePool::new(capacity, 1 << 16);
        let port_names: HashMap<(String, String), usize> = specs
            .iter()
            .enumerate()
            .flat_map(|(s, spec)| {
                let port_worker = &port_worker;
                spec.ports
                    .iter()
                    .enumerate()
                    .map(move |(p, port)| ((spec.name.clone(), port.name.clone()), port_worker[s][p]))
            })
            .collect();
        let fabric = Fabric::start(&runtime, specs, pool, &|s, p| port_worker[s][p])?;
        let links = std::sync::Arc::new(crate::lab_links::LabLinks::new(
            fabric.clone(),
            t,
            link_ports,
            cfg.dilation,
            cfg.reconverge_ns,
        ));
        let base_rtt_ns = base_rtt_ns(t, cfg);
        let (announce, events) = crossbeam_channel::unbounded();
        let mut lab = Lab {
            nics: None,
            runtime: Some(runtime),
            endpoints: (0..t.nodes.len()).map(|_| None).collect(),
            fabric,
            links,
            hosts,
            _switch_ns: switch_ns,
            topology: t.clone(),
            base_rtt_ns,
            events,
            host_names: t.nodes.iter().map(|n| n.name.clone()).collect(),
            host_worker: placement
                .host
                .iter()
                .filter(|&(&h, _)| cfg.here(h))
                .map(|(&h, &w)| (t.nodes[h].name.clone(), w))
                .collect(),
            port_worker: port_names,
            devices: (0..t.nodes.len()).map(|_| None).collect(),
        };
        let drain = longest_drain_ns(t);
        for &h in host_order.iter().filter(|&&h| cfg.here(h)) {
            let node = &t.nodes[h];
            let ec = endpoint_config(t, cfg, h, base_rtt_ns, drain, &routes, announce.clone());
            let ns = lab.hosts[h].as_ref().expect("host namespace");
            let rt = lab.runtime.as_ref().expect("running");
            let ep = Endpoint::start(ec, rt, placement.host[&h], ns.enter()).map_err(|cause| LabError::Endpoint {
                host: node.name.clone(),
                cause,
            })?;
            lab.endpoints[h] = Some(ep);
        }
        lab.serve_devices(t, cfg)?;
        tracing::info!(topology = %t.name, workers = cfg.workers, took = ?started.elapsed(), "lab built");
        Ok(lab)
    }

    /// Gives every host built here its RDMA device: the command files served, each host's
    /// device described for the programs started in it.
    fn serve_devices(&mut self, t: &Topology, cfg: &LabConfig) -> Result<(), LabError> {
        let built: Vec<usize> = (0..t.nodes.len()).filter(|&n| self.endpoints[n].is_some()).collect();
        let ports = built
            .iter()
            .map(|&h| self.endpoints[h].as_ref().expect("built").program_port())
            .collect();
        let nics =
            crate::nic_device::LabNics::serve(&cfg.prefix, ports).map_err(|cause| LabError::Devices { cause })?;
        for &h in &built {
            let node = &t.nodes[h];
            let Some((li, end)) = t.links_of(h).next() else {
                continue;
            };
            let link = &t.links[li];
            self.devices[h] = Some(nics.device(
                &node.name,
                node.address.expect("hosts have addresses"),
                &link.ends[end].interface,
                u32::try_from(cfg.transport.mtu).unwrap_or(4096),
                link.props.rate.bps(),
            ));
        }
        self.nics = Some(nics);
        Ok(())
    }

    /// The RDMA device of host node `n`, when it was built here.
    pub fn device(&self, n: usize) -> Option<&crate::nic_device::HostDevice> {
        self.devices.get(n).and_then(Option::as_ref)
    }

    /// The endpoint of host node `n`.
    pub fn endpoint(&self, n: usize) -> &Endpoint {
        self.endpoints[n].as_ref().expect("a host node")
    }

    /// The base RTT given to the controllers (ns).
    pub fn base_rtt_ns(&self) -> u64 {
        self.base_rtt_ns
    }

    /// Sent flows as they become fully acknowledged or stuck, from every host.
    pub fn events(&self) -> &Receiver<FlowEvent> {
        &self.events
    }

    /// The topology it runs (time dilation applied).
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Sends a reachability probe from host node `n`.
    pub fn probe(&self, n: usize, p: Probe) -> std::io::Result<()> {
        self.endpoint(n).probe(p)
    }

    /// The namespace of host node `n`.
    pub fn namespace(&self, n: usize) -> &Namespace {
        self.hosts[n].as_ref().expect("a host node")
    }

    /// The namespace of host node `n`, when this machine runs it.
    pub fn host_namespace(&self, n: usize) -> Option<&Namespace> {
        self.hosts.get(n)?.as_ref()
    }

    /// Its links, to set, take down and bring up while it runs.
    pub fn links(&self) -> &std::sync::Arc<crate::lab_links::LabLinks> {
        &self.links
    }

    /// A handle for watching the lab while it runs (`--metrics`); `dilation` is the one it
    /// was built with.
    pub fn view(&self, dilation: f64) -> crate::live::LabView {
        let hosts = self.endpoints.iter().flatten().map(Endpoint::watcher).collect();
        let host_of = self
            .topology
            .hosts()
            .filter_map(|h| Some((self.topology.nodes[h].address?, self.topology.nodes[h].name.clone())))
            .collect();
        crate::live::LabView::new(
            &self.topology.name,
            dilation,
            self.fabric.clone(),
            (hosts, host_of),
            self.links.clone(),
        )
    }

    /// The switches that run a P4 program, by name, with their datapaths (tables to edit).
    pub fn p4_datapaths(&self) -> Vec<(String, std::sync::Arc<intlab_p4::Datapath>)> {
        self.fabric.p4_datapaths()
    }

    /// The controller's end of each P4 switch's CPU port.
    pub fn cpu_ports(&self) -> Vec<intlab_switch::port::CpuPortEnd> {
        self.fabric.cpu_ports()
    }

    /// Every switch's counters as they are now (the last published ones when a worker does
    /// not answer within a second, which the log says).
    pub fn switch_counters(&self) -> Vec<SwitchSnapshot> {
        self.fabric.counters_now(Duration::from_secs(1)).unwrap_or_else(|| {
            tracing::warn!("switch workers did not publish on request");
            (0..self.fabric.specs().len())
                .map(|s| self.fabric.counters(s))
                .collect()
        })
    }

    /// Lateness, stalls and the workers' busy time count from lab time `t_ns` on (the run's
    /// start): setting up and the data path check are not the run.
    /// Fails naming the node of a host that has stopped.
    pub fn measure_from(&self, t_ns: u64) -> Result<(), (usize, std::io::Error)> {
        if let Some(rt) = &self.runtime {
            rt.measure_from(t_ns);
        }
        self.fabric.measure_from(t_ns);
        for (n, e) in self.endpoints.iter().enumerate() {
            if let Some(e) = e {
                e.measure_from(t_ns).map_err(|err| (n, err))?;
            }
        }
        Ok(())
    }

    /// Flows finished so far, counted at both ends (a completed flow counts twice: its sender
    /// saw every byte acknowledged, its receiver got every byte).
    pub fn finished(&self) -> usize {
        self.endpoints.iter().flatten().map(Endpoint::finished).sum()
    }

    /// Waits until the hosts have `n` finished flows between them, or `limit` passes.
    pub fn wait_finished(&self, n: usize, limit: Duration) -> bool {
        let t = Instant::now();
        loop {
            if self.finished() >= n {
                return true;
            }
            if t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops everything, removes every namespace, and reports.
    pub fn stop(mut self) -> LabReport {
        drop(self.nics.take());
        let workers = match self.runtime.take().map(Runtime::stop) {
            Some(Ok(stats)) => stats,
            Some(Err(failed)) => {
                tracing::error!("workers {failed:?} panicked: their hosts and ports report nothing");
                self.fabric.note_failed_workers(failed.len());
                Vec::new()
            }
            None => Vec::new(),
        };
        let mut hosts = Vec::new();
        let mut failed_hosts = Vec::new();
        for (n, e) in self.endpoints.drain(..).enumerate() {
            let Some(e) = e else { continue };
            match e.report() {
                Ok(r) => hosts.push(r),
                Err(err) => failed_hosts.push((self.host_names[n].clone(), err.to_string())),
            }
        }
        let switches = (0..self.fabric.specs().len())
            .map(|s| self.fabric.counters(s))
            .collect();
        LabReport {
            hosts,
            switches,
            failed_hosts,
            workers,
            host_worker: std::mem::take(&mut self.host_worker),
            port_worker: std::mem::take(&mut self.port_worker),
        }
    }
}

/// How long after a pause reaches it an emulated host may still send (real ns): its NIC
/// model's burst credit plus the lateness allowed for. A 4-to-1 incast with PFC measured up to
/// 9 frames after an XOFF on a 100 Mb/s link of 200 us, about 320 us more than the wire's
/// round trip. Headroom covers it, so that PFC stays lossless.
pub(crate) const HOST_PFC_RESPONSE_NS: u64 = HOST_PFC_BURST_NS + HOST_PFC_LATENESS_NS;

/// The part of [`HOST_PFC_RESPONSE_NS`] a host's NIC model sends in one burst (real ns).
const HOST_PFC_BURST_NS: u64 = 100_000;

/// The part of [`HOST_PFC_RESPONSE_NS`] for the switch's release lateness and the host's
/// wake-up lateness together (real ns), at their usual p99 on the reference machine (tens of us
/// each, with room). A pause obeyed later than this after its due time overran the headroom
/// through the lab's timing (see `results::late_pauses`).
pub(crate) const HOST_PFC_LATENESS_NS: u64 = 300_000;

/// The smallest RTO at dilation 1 (ns): at emulation rates a few tens of KB queued are
/// milliseconds (EndpointConfig::new).
const MIN_RTO_NS: u64 = 16_000_000;

/// The longest any switch port's full buffer takes to drain at its link's rate (ns).
fn longest_drain_ns(t: &Topology) -> u64 {
    t.links
        .iter()
        .map(|l| (u128::from(l.props.buffer.0) * 8_000_000_000 / u128::from(l.props.rate.bps().max(1))) as u64)
        .max()
        .unwrap_or(0)
}

/// What the lab knows of the way from host `h` to every host (itself included), for the controllers of
/// the QPs programs in `h` create: the unloaded round trip of a full data packet and its ACK
/// on the routed path plus the machine's overhead, as the lab's own flows are told before
/// their probes measure it.
fn peer_paths(
    t: &Topology,
    routes: &crate::topology::Routes,
    cfg: &LabConfig,
    h: usize,
    fabric_rtt_ns: u64,
) -> HashMap<Ipv4Addr, FlowPath> {
    let hop_bytes = crate::base_rtt::int_hop_bytes(cfg.transport.int_mode, &cfg.program_controller);
    t.hosts()
        .filter_map(|o| {
            // A host reaches itself without the network, as a NIC loops back a packet to its
            // own address (UCX and MPI connect a process to itself).
            let links = if o == h { Vec::new() } else { routes.path(t, h, o)? };
            let path = FlowPath {
                base_rtt_ns: crate::base_rtt::data_rtt_ns(t, &links, cfg.transport.mtu, hop_bytes)
                    + cfg.host_overhead_ns,
                fabric_rtt_ns,
                hops: links.len().saturating_sub(1) as u32,
            };
            Some((t.nodes[o].address?, path))
        })
        .collect()
}

/// The base RTT a lab of `t` gives its controllers (ns): twice the longest one-way propagation
/// between hosts plus this machine's overhead.
pub fn base_rtt_ns(t: &Topology, cfg: &LabConfig) -> u64 {
    2 * max_path_delay(t) + cfg.host_overhead_ns
}

/// An upper bound of the one-way propagation delay between two hosts (ns): the most links on a
/// shortest path between two hosts, times the largest link delay.
fn max_path_delay(t: &Topology) -> u64 {
    let max_delay = t.links.iter().map(|l| l.props.delay.0).max().unwrap_or(0);
    let hosts: Vec<usize> = t.hosts().collect();
    let hops = hosts
        .iter()
        .flat_map(|&a| {
            let d = distances(t, a);
            hosts
                .iter()
                .map(move |&b| d[b])
                .filter(|&x| x != usize::MAX)
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(1);
    max_delay * hops as u64
}

/// Host `h`'s interface (every host has one; switches have none).
fn host_interface(t: &Topology, h: usize) -> &HostInterface {
    t.nodes[h].interface.as_ref().expect("hosts have an interface")
}

/// Wires every link of `t` this machine builds: a veth per host link (the host's end named as
/// in the topology, configured in the host's namespace; the switch's end `x<link>`), an
/// in-process pair per link between two switches, a tunnel per link cut between sites. Returns
/// each end's port IO, by (link, end).
fn wire_links(
    t: &Topology,
    cfg: &LabConfig,
    switch_ns: &Namespace,
    hosts: &[Option<Namespace>],
    link_mtu: u16,
) -> Result<HashMap<(usize, usize), PortIo>, LabError> {
    let mut ends: HashMap<(usize, usize), PortIo> = HashMap::new();
    for (li, link) in t.links.iter().enumerate() {
        let kinds = link.ends.each_ref().map(|e| t.nodes[e.node].kind);
        let here = link.ends.each_ref().map(|e| cfg.here(e.node));
        if here == [false, false] {
            continue;
        }
        if let Some(tunnel) = cfg.site.as_ref().and_then(|p| p.tunnel(li)) {
            let end = usize::from(here[1]);
            let device = crate::sites::create_tunnel(li, tunnel, link_mtu, switch_ns)?;
            let netns = switch_ns.path();
            let seal = tunnel.seal.clone();
            ends.insert((li, end), PortIo::Tunnel { device, netns, seal });
            continue;
        }
        match kinds {
            [NodeKind::Switch, NodeKind::Switch] => {
                let (a, b) = intlab_switch::port::link_pair();
                ends.insert((li, 0), PortIo::Link(a));
                ends.insert((li, 1), PortIo::Link(b));
            }
            _ => {
                let (he, se) = if kinds[0] == NodeKind::Host { (0, 1) } else { (1, 0) };
                let host = link.ends[he].node;
                let dev = format!("x{li}");
                let ns = hosts[host].as_ref().expect("host namespace");
                netns::veth_pair(&link.ends[he].interface, ns, &dev, switch_ns)?;
                if link_mtu != 1500 {
                    let mtu = link_mtu.to_string();
                    ns.ip(&["link", "set", "dev", &link.ends[he].interface, "mtu", &mtu])?;
                    switch_ns.ip(&["link", "set", "dev", &dev, "mtu", &mtu])?;
                }
                let addr = t.nodes[host].address.expect("hosts have addresses");
                let host_dev = &link.ends[he].interface;
                let host_if = host_interface(t, host);
                ns.configure(host_dev, host_if.mac, addr, host_if.prefix_len)?;
                for &(ip, mac) in &host_if.arp {
                    ns.neighbor(host_dev, ip, mac)?;
                }
                if let Some(gw) = host_if.gateway {
                    ns.ip(&["route", "add", "default", "via", &gw.to_string(), "dev", host_dev])?;
                }
                ends.insert(
                    (li, se),
                    PortIo::Veth {
                        device: dev,
                        netns: Some(switch_ns.path()),
                    },
                );
            }
        }
    }
    Ok(ends)
}

/// A P4 program answers no ARP (the native pipeline does): hosts then know every other host's
/// MAC from the start, as the p4lang tutorials' hosts do with static entries. A host given a
/// gateway or neighbours gets exactly those.
fn add_static_neighbours(
    t: &Topology,
    cfg: &LabConfig,
    hosts: &[Option<Namespace>],
    mac_of: &HashMap<usize, MacAddress>,
) -> Result<(), LabError> {
    let host_order: Vec<usize> = t.hosts().collect();
    if t.nodes.iter().any(|n| n.p4.is_some()) {
        for &h in host_order
            .iter()
            .filter(|&&h| cfg.here(h) && !host_interface(t, h).is_explicit())
        {
            let ns = hosts[h].as_ref().expect("host namespace");
            let dev = t
                .links
                .iter()
                .flat_map(|l| &l.ends)
                .find(|e| e.node == h)
                .map(|e| e.interface.as_str());
            let Some(dev) = dev else { continue };
            for &o in host_order.iter().filter(|&&o| o != h) {
                ns.neighbor(dev, t.nodes[o].address.expect("hosts have addresses"), mac_of[&o])?;
            }
        }
    }
    Ok(())
}

/// The switches of a lab, planned: their specs, which worker runs each port, and each link's
/// ports (switch, port) at its two ends.
struct SwitchPlan {
    specs: Vec<SwitchSpec>,
    /// (switch, port) -> worker.
    port_worker: Vec<Vec<usize>>,
    link_ports: Vec<[Option<(usize, usize)>; 2]>,
}

/// The specs of the switches of `t` this machine builds, their ports' IO taken from `ends`.
fn switch_plan(
    t: &Topology,
    cfg: &LabConfig,
    placement: &Placement,
    routes: &Routes,
    neighbors: &[(Ipv4Addr, MacAddress)],
    ends: &mut HashMap<(usize, usize), PortIo>,
    link_mtu: u16,
) -> SwitchPlan {
    let mut specs = Vec::new();
    let mut port_worker: Vec<Vec<usize>> = Vec::new();
    let mut link_ports: Vec<[Option<(usize, usize)>; 2]> = vec![[None; 2]; t.links.len()];
    // The k-th switch of the topology keeps its node id and seed on whichever site it runs.
    for (k, s) in t.switches().enumerate().filter(|&(_, s)| cfg.here(s)) {
        let fabric_index = specs.len();
        let mut ports = Vec::new();
        let mut workers = Vec::new();
        let mut port_of_link = HashMap::new();
        for (li, end) in t.links_of(s) {
            let props = &t.links[li].props;
            let far = t.links[li].ends[1 - end].node;
            port_of_link.insert(li, ports.len());
            workers.push(placement.link[&li]);
            ports.push(PortSpec {
                name: t.links[li].ends[end].interface.clone(),
                io: ends.remove(&(li, end)).expect("every link end wired once"),
                rate: props.rate,
                delay: props.delay,
                buffer: props.buffer,
                mtu: link_mtu,
                ecn: props.ecn,
                int: true,
                impair: props.impair_towards(far),
                impair_inbound: match t.nodes[far].kind {
                    NodeKind::Host => props.impair_towards(s),
                    NodeKind::Switch => intlab_switch::impair::ImpairmentSpec::default(),
                },
                p4_port: t.nodes[s]
                    .p4
                    .as_ref()
                    .and_then(|p| p.ports.get(&t.links[li].ends[end].interface).copied())
                    .unwrap_or_else(|| default_p4_port(&t.links[li].ends[end].interface, ports.len())),
            });
        }
        let table = crate::lab_links::switch_routes(t, routes, s, |li| port_of_link.get(&li).copied());
        for (&li, &p) in &port_of_link {
            let end = usize::from(t.links[li].ends[1].node == s);
            link_ports[li][end] = Some((fabric_index, p));
        }
        port_worker.push(workers);
        specs.push(SwitchSpec {
            name: t.nodes[s].name.clone(),
            node_id: k as u32 + 1,
            workers: cfg.workers,
            int_port: int_format::int::DEFAULT_INT_PORT,
            ports,
            routes: table,
            macs: vec![],
            arp: ArpMode::Answer,
            neighbors: neighbors.to_vec(),
            capture: cfg.capture.as_ref().map(|dir| CaptureSpec {
                dir: dir.clone(),
                ports: vec![],
                drops: true,
            }),
            counters_file: None,
            seed: cfg.seed.wrapping_add(k as u64),
            poll: cfg.poll,
            packet_io: cfg.packet_io,
            queue_trace_every: Nanos(cfg.queue_trace_every_ns),
            p4: t.nodes[s].p4.as_ref().map(|p| p.spec.clone()),
            mmu: t.mmu_of(s),
            pfc: t.pfc_of(s).map(|p| PfcSpec {
                response_ns: HOST_PFC_RESPONSE_NS,
                ..p
            }),
            priorities: t.priorities_of(s),
        });
    }
    SwitchPlan {
        specs,
        port_worker,
        link_ports,
    }
}

/// The transport settings of host `h` of `t`: its line rate, the lab's transport keys, PFC and
/// priorities as its switch has them, an RTO past the longest queue (`drain` ns), and what its
/// programs' QPs run.
fn endpoint_config(
    t: &Topology,
    cfg: &LabConfig,
    h: usize,
    base_rtt_ns: u64,
    drain: u64,
    routes: &Routes,
    announce: crossbeam_channel::Sender<intlab_transport::flow::FlowEvent>,
) -> EndpointConfig {
    let node = &t.nodes[h];
    let rate = t
        .links_of(h)
        .next()
        .map(|(li, _)| t.links[li].props.rate.bps())
        .unwrap_or(1_000_000_000);
    let mut ec = EndpointConfig::new(&node.name, node.address.expect("address"), rate, base_rtt_ns);
    let tr = &cfg.transport;
    ec.mtu = tr.mtu;
    // A host heeds pauses, and classes its data, as the switch it is attached to does.
    let switch = t.switch_of(h);
    ec.pfc = switch.is_some_and(|s| t.pfc_of(s).is_some());
    ec.priority = switch.map_or(t.priorities, |s| t.priorities_of(s)).map.of_dscp(ec.dscp);
    ec.ack_every = tr.ack_every;
    ec.cnp_interval_ns = tr.cnp_interval_ns;
    ec.cnp_dscp = tr.cnp_dscp;
    ec.int_mode = tr.int_mode;
    ec.timing.sample_every_ns = tr.sample_every_ns;
    // A full buffer is no loss: the RTO outlasts the longest queue a port can hold. Its
    // floor is emulated time, so it dilates with the network.
    let floor = cfg.dilation.lab_ns(MIN_RTO_NS);
    let rto = ec.timing.rto_ns.max(2 * drain).max(floor);
    if rto != ec.timing.rto_ns {
        ec.timing.rto_ns = rto;
        ec.timing.rto_max_ns = 64 * rto;
    }
    ec.events = Some(announce);
    ec.programs = ProgramSettings {
        controller: cfg.program_controller.clone(),
        peers: peer_paths(t, routes, cfg, h, base_rtt_ns),
    };
    ec
}
