//! The switch's configuration: the YAML users write for `intlab switch`, and the resolved
//! [`SwitchSpec`] the runtime is built from (the lab builds a `SwitchSpec` directly).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use int_format::ethernet::MacAddress;
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::units::{Bytes, Nanos, Rate};

/// A configuration that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column, 0 when unknown.
    pub column: usize,
    /// Path of the offending field, e.g. `ports[1].name`.
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// How a port reaches the outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortIo {
    /// A TAP device the switch creates (and keeps the fd of); its kernel side may then be moved
    /// into a host's namespace.
    Tap {
        /// Device name.
        device: String,
    },
    /// An AF_PACKET socket on an existing interface (the switch's end of a veth pair), opened in
    /// `netns` when given.
    Veth {
        /// Interface name.
        device: String,
        /// Namespace (a path such as /var/run/netns/NAME) the interface lives in.
        netns: Option<PathBuf>,
    },
    /// One end of an in-process link to another switch port of the same fabric.
    Link(crate::port::LinkEnd),
    /// A P4 switch's CPU port (`p4.cpu_port`), whose other end is the P4Runtime server.
    Controller,
}

/// How a switch reads and writes its veth ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacketIo {
    /// AF_PACKET sockets with recvmmsg and sendmmsg: a system call per batch each way.
    Syscalls,
    /// Receive and transmit rings mapped into the process (PACKET_MMAP): received frames are
    /// read without a system call, sent ones handed over with one `send` per batch.
    Ring,
    /// An AF_XDP socket per port, fed by a small XDP program on the veth: frames are copied to
    /// the switch inside the sender's own transmit path and read without a system call; sent
    /// ones handed over with one system call per batch. Needs a kernel with AF_XDP and frames
    /// that fit XDP on veth (an MTU up to about 3.5 KB).
    Xdp,
    /// AF_XDP where the kernel and the port allow it, else `syscalls` (with a warning that
    /// says why): the standalone switch's default.
    Auto,
}

/// ECN marking with RED thresholds, applied at dequeue to ECN-capable frames.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnSpec {
    /// Below this queue occupancy (bytes) nothing is marked.
    pub kmin: u64,
    /// Above this occupancy every ECN-capable frame is marked.
    pub kmax: u64,
    /// Marking probability reached at `kmax` (linear from 0 at `kmin`).
    pub pmax: f64,
}

/// One port, resolved.
#[derive(Debug, Clone)]
pub struct PortSpec {
    /// Port name, unique in the switch.
    pub name: String,
    /// Where frames come from and go to.
    pub io: PortIo,
    /// Egress line rate.
    pub rate: Rate,
    /// One-way propagation delay added after serialization.
    pub delay: Nanos,
    /// Egress buffer; frames that do not fit are dropped (tail drop).
    pub buffer: Bytes,
    /// Largest IP packet the egress link takes (INT sets M rather than exceed it).
    pub mtu: u16,
    /// ECN marking, if any.
    pub ecn: Option<EcnSpec>,
    /// Push an INT hop onto frames that carry INT.
    pub int: bool,
    /// Probability that a frame is lost on the egress link (fault injection).
    pub loss: f64,
    /// Its number in a P4 program (`standard_metadata.ingress_port`, `egress_spec`).
    pub p4_port: u16,
}

/// A P4 program run in place of the native pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Spec {
    /// The program (P4_16, v1model).
    pub program: PathBuf,
    /// Its runtime file (the p4lang tutorials' JSON), if any.
    pub runtime: Option<PathBuf>,
    /// A simple_switch_CLI command file, if any (applied after the runtime file).
    pub cli: Option<PathBuf>,
    /// Log each packet's way through the program (parser states, tables, actions, drops).
    pub trace: bool,
    /// Where it serves P4Runtime, if not where the tutorials' numbering puts it.
    pub p4runtime: P4RuntimeKey,
    /// The P4 port number of its CPU port, if it has one (simple_switch_grpc's `--cpu-port`):
    /// frames sent there reach the P4Runtime controller as PacketIn, PacketOuts arrive there.
    pub cpu_port: Option<u16>,
}

/// `p4.p4runtime`: where a P4 switch serves P4Runtime. Unset fields follow the tutorials'
/// numbering: the i-th P4 switch (from 0) on 127.0.0.1:50051+i with device id i.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4RuntimeKey {
    /// `HOST:PORT` on a loopback address.
    #[serde(default)]
    pub address: Option<String>,
    /// The device id controllers name.
    #[serde(default)]
    pub device_id: Option<u64>,
}

impl P4RuntimeKey {
    /// The address and device id of the `i`-th P4 switch. Refused for an address that is not
    /// `HOST:PORT` on loopback: the lab listens for nobody outside the machine.
    pub fn resolve(&self, i: usize) -> Result<(std::net::SocketAddr, u64), String> {
        let address = match &self.address {
            None => std::net::SocketAddr::from(([127, 0, 0, 1], 50051 + i as u16)),
            Some(a) => {
                let parsed: std::net::SocketAddr = a
                    .parse()
                    .map_err(|_| format!("address `{a}`: HOST:PORT expected, as 127.0.0.1:50051"))?;
                if !parsed.ip().is_loopback() {
                    return Err(format!(
                        "address `{a}`: P4Runtime listens on a loopback address only (127.0.0.1, [::1])"
                    ));
                }
                parsed
            }
        };
        Ok((address, self.device_id.unwrap_or(i as u64)))
    }
}

/// Where a route sends matching frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextHop {
    /// One port (index into the port list).
    Port(usize),
    /// An ECMP group: the 5-tuple hash picks one member.
    Ecmp(Vec<usize>),
}

/// An IPv4 route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Network address (host bits zero).
    pub prefix: Ipv4Addr,
    /// Prefix length.
    pub len: u8,
    /// Where it goes.
    pub next: NextHop,
}

/// What the switch does with ARP requests and other broadcast frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArpMode {
    /// Answer ARP requests for addresses in `neighbors` with their MAC; drop other broadcasts.
    #[default]
    Answer,
    /// Flood broadcast and multicast frames to every other port.
    Flood,
}

/// Packet capture settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureSpec {
    /// Folder the pcapng files go to (one per port: SWITCH-PORT.pcapng).
    pub dir: PathBuf,
    /// Ports to capture (indices); empty means all.
    pub ports: Vec<usize>,
    /// Also write dropped frames, with the reason as a comment.
    pub drops: bool,
}

/// A whole switch, resolved and checked.
#[derive(Debug, Clone)]
pub struct SwitchSpec {
    /// Name, used in capture file names and logs.
    pub name: String,
    /// INT node ID.
    pub node_id: u32,
    /// Worker threads (default: the number of cores).
    pub workers: usize,
    /// UDP destination port that signals INT.
    pub int_port: u16,
    /// Ports, in order (their index is the INT port ID).
    pub ports: Vec<PortSpec>,
    /// IPv4 routes, longest prefix wins.
    pub routes: Vec<Route>,
    /// Exact destination MAC → port, used for frames no route matches.
    pub macs: Vec<(MacAddress, usize)>,
    /// ARP handling.
    pub arp: ArpMode,
    /// IPv4 → MAC, for answering ARP.
    pub neighbors: Vec<(Ipv4Addr, MacAddress)>,
    /// Packet capture.
    pub capture: Option<CaptureSpec>,
    /// Counters file refreshed every second and written on exit.
    pub counters_file: Option<PathBuf>,
    /// Seed of the ECN and loss random draws.
    pub seed: u64,
    /// How the workers wait (see docs/switch.md).
    pub poll: intlab_runtime::PollMode,
    /// How veth ports are read and written.
    pub packet_io: PacketIo,
    /// Interval of each port's queue-over-time trace, returned in the final counters (0: none).
    pub queue_trace_every: Nanos,
    /// A P4 program that replaces the native pipeline.
    pub p4: Option<P4Spec>,
    /// One buffer shared by all ports (replaces the ports' `buffer`), if set; PFC implies it.
    pub mmu: Option<crate::tm::MmuSpec>,
    /// PFC: lossless priorities, paused upstream instead of dropped.
    pub pfc: Option<crate::tm::PfcSpec>,
    /// Classes: the DSCP → priority map and the choice between priorities.
    pub priorities: crate::tm::PrioritySpec,
}

// ---- The YAML form ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    #[serde(default = "default_name")]
    name: String,
    #[serde(default = "default_node_id")]
    node_id: u32,
    #[serde(default)]
    workers: Option<Spanned<usize>>,
    #[serde(default = "default_int_port")]
    int_port: u16,
    ports: Vec<RawPort>,
    #[serde(default)]
    routes: Vec<RawRoute>,
    #[serde(default)]
    macs: Vec<RawMac>,
    #[serde(default)]
    arp: ArpMode,
    #[serde(default)]
    neighbors: Vec<RawNeighbor>,
    #[serde(default)]
    capture: Option<RawCapture>,
    #[serde(default)]
    counters_file: Option<PathBuf>,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    poll: intlab_runtime::PollMode,
    #[serde(default = "standalone_packet_io")]
    packet_io: PacketIo,
    #[serde(default)]
    queue_trace_every: Nanos,
    #[serde(default)]
    p4: Option<Spanned<P4Yaml>>,
    #[serde(default)]
    mmu: Option<Spanned<MmuYaml>>,
    #[serde(default)]
    pfc: Option<Spanned<PfcYaml>>,
    #[serde(default)]
    priorities: Option<Spanned<PrioritiesYaml>>,
}

/// A switch's INT node id when its file gives none: the first.
fn default_node_id() -> u32 {
    1
}

fn default_name() -> String {
    "switch".into()
}

/// A switch run alone shares the machine with the applications whose frames it carries:
/// AF_XDP, which copies each frame to the switch inside the sender's own transmit path, carried
/// the most through it (docs/performance.md).
fn standalone_packet_io() -> PacketIo {
    PacketIo::Auto
}

/// A switch run alone gets one worker per core, but no more than one per two ports: a frame
/// between two ports of one worker needs no hand-off, and on two cores shared with the
/// applications, one worker carried a two-port switch's traffic better than two
/// (docs/performance.md).
pub fn standalone_workers(ports: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.min(ports.div_ceil(2)).max(1)
}

fn default_int_port() -> u16 {
    int_format::int::DEFAULT_INT_PORT
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawKind {
    Tap,
    Veth,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: Spanned<String>,
    kind: RawKind,
    #[serde(default)]
    device: Option<Spanned<String>>,
    #[serde(default)]
    netns: Option<PathBuf>,
    rate: Rate,
    #[serde(default)]
    delay: Nanos,
    #[serde(default = "default_buffer")]
    buffer: Bytes,
    #[serde(default = "default_mtu")]
    mtu: u16,
    #[serde(default)]
    ecn: Option<Spanned<EcnYaml>>,
    #[serde(default = "yes")]
    int: bool,
    #[serde(default)]
    loss: Option<Spanned<f64>>,
    #[serde(default)]
    p4_port: Option<u16>,
}

fn default_buffer() -> Bytes {
    Bytes(1_000_000)
}

fn default_mtu() -> u16 {
    1500
}

fn yes() -> bool {
    true
}

/// `p4:` as written, shared by the switch's own file and the lab's switch nodes: the program
/// and its files (relative to the file that names them), its P4 port numbers by interface (a
/// lab's switch node; the switch's own file numbers each port with its `p4_port`), and its
/// control plane.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4Yaml {
    /// The P4_16 program.
    pub program: PathBuf,
    /// Its runtime file (the tutorials' JSON).
    #[serde(default)]
    pub runtime: Option<PathBuf>,
    /// A `simple_switch_CLI` command file.
    #[serde(default)]
    pub cli: Option<PathBuf>,
    /// Interface name → P4 port number.
    #[serde(default)]
    pub ports: BTreeMap<String, u16>,
    /// Log each packet's way through the program.
    #[serde(default)]
    pub trace: bool,
    /// Where it serves P4Runtime.
    #[serde(default)]
    pub p4runtime: P4RuntimeKey,
    /// The P4 port number of its CPU port.
    #[serde(default)]
    pub cpu_port: Option<Spanned<u16>>,
}

impl P4Yaml {
    /// The spec it resolves to, its files found relative to `file` (the one that names them).
    pub fn spec(&self, file: &Path) -> P4Spec {
        let rel = |p: &Path| crate::pipeline::relative_to(file, p);
        P4Spec {
            program: rel(&self.program),
            runtime: self.runtime.as_deref().map(rel),
            cli: self.cli.as_deref().map(rel),
            trace: self.trace,
            p4runtime: self.p4runtime.clone(),
            cpu_port: self.cpu_port.as_ref().map(|c| c.value),
        }
    }
}

/// ECN thresholds as written in YAML (`{ kmin: 20KB, kmax: 80KB, pmax: 0.2 }`), shared by the
/// switch configuration and the lab's topologies.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnYaml {
    /// Lower threshold.
    pub kmin: Bytes,
    /// Upper threshold.
    pub kmax: Bytes,
    /// Marking probability at `kmax`.
    pub pmax: f64,
}

impl EcnYaml {
    /// The checked thresholds, or what is wrong with them.
    pub fn resolve(&self) -> Result<EcnSpec, String> {
        if !(0.0..=1.0).contains(&self.pmax) || self.kmin.0 > self.kmax.0 {
            return Err(format!(
                "expected kmin <= kmax and pmax in [0, 1], got kmin {} B, kmax {} B, pmax {}",
                self.kmin.0, self.kmax.0, self.pmax
            ));
        }
        Ok(EcnSpec {
            kmin: self.kmin.0,
            kmax: self.kmax.0,
            pmax: self.pmax,
        })
    }
}

/// A shared buffer as written in YAML (`{ shared: 12MB, alpha: 0.125, reserve: 4KiB }`),
/// shared by the switch configuration and the lab's topologies.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmuYaml {
    /// The whole buffer (default: the sum of the ports' `buffer`).
    #[serde(default)]
    pub shared: Option<Bytes>,
    /// Dynamic threshold factor (default 1/8).
    #[serde(default)]
    pub alpha: Option<f64>,
    /// Reserve per ingress port and priority (default 4 KiB).
    #[serde(default)]
    pub reserve: Option<Bytes>,
}

impl MmuYaml {
    /// The checked settings, or what is wrong with them.
    pub fn resolve(&self) -> Result<crate::tm::MmuSpec, String> {
        let d = crate::tm::MmuSpec::default();
        let alpha = self.alpha.unwrap_or(d.alpha);
        if !(alpha > 0.0 && alpha.is_finite()) {
            return Err(format!("alpha: expected a number above 0, got {alpha}"));
        }
        if self.shared.is_some_and(|b| b.0 == 0) {
            return Err("shared: expected a size above 0".into());
        }
        Ok(crate::tm::MmuSpec {
            shared: self.shared.map(|b| b.0),
            alpha,
            reserve: self.reserve.map_or(d.reserve, |b| b.0),
        })
    }
}

/// PFC as written in YAML (`{ enabled: true, priorities: [3], xoff: 100KB, xon: 3KiB,
/// headroom: 20KB }`; every key optional), shared by the switch configuration and the lab's
/// topologies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcYaml {
    /// On (default) or off.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Lossless priorities (default [3]).
    #[serde(default)]
    pub priorities: Option<Vec<u8>>,
    /// Static XOFF threshold (default: dynamic).
    #[serde(default)]
    pub xoff: Option<Bytes>,
    /// XON offset below the XOFF threshold (default 3 KiB).
    #[serde(default)]
    pub xon: Option<Bytes>,
    /// Headroom per ingress port (default: from the link).
    #[serde(default)]
    pub headroom: Option<Bytes>,
    /// The PFC watchdog (default: on, 200 ms / 200 ms).
    #[serde(default)]
    pub watchdog: Option<WatchdogYaml>,
}

/// The PFC watchdog as written in YAML (`{ enabled: true, detect: 200ms, restore: 200ms }`;
/// every key optional).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchdogYaml {
    /// On (default) or off.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// How long a frame waits under an unbroken pause before the watchdog trips.
    #[serde(default)]
    pub detect: Option<Nanos>,
    /// How long after the last pause the priority is restored.
    #[serde(default)]
    pub restore: Option<Nanos>,
}

impl WatchdogYaml {
    /// The checked settings (`None` when disabled), or what is wrong with them.
    pub fn resolve(&self) -> Result<Option<crate::tm::PfcWatchdog>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let d = crate::tm::PfcWatchdog::default();
        let detect = self.detect.map_or(d.detect_ns, |t| t.0);
        if detect == 0 {
            return Err("watchdog: detect: expected a time above 0".into());
        }
        Ok(Some(crate::tm::PfcWatchdog {
            detect_ns: detect,
            restore_ns: self.restore.map_or(d.restore_ns, |t| t.0),
        }))
    }
}

impl PfcYaml {
    /// The checked settings (`None` when disabled), or what is wrong with them.
    pub fn resolve(&self) -> Result<Option<crate::tm::PfcSpec>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let d = crate::tm::PfcSpec::default();
        let priorities = match &self.priorities {
            None => d.priorities,
            Some(list) => {
                let mut mask = 0u8;
                for &p in list {
                    if usize::from(p) >= crate::tm::PRIORITIES {
                        return Err(format!("priorities: {p} is not a priority 0-7"));
                    }
                    mask |= 1 << p;
                }
                mask
            }
        };
        Ok(Some(crate::tm::PfcSpec {
            priorities,
            xoff: self.xoff.map(|b| b.0),
            xon_offset: self.xon.map_or(d.xon_offset, |b| b.0),
            headroom: self.headroom.map(|b| b.0),
            response_ns: d.response_ns,
            watchdog: match &self.watchdog {
                Some(w) => w.resolve()?,
                None => d.watchdog,
            },
        }))
    }
}

/// A switch's classes as written in YAML (`{ dscp: { 26: 3, 48: 6 }, scheduler: dwrr,
/// weights: [1, 1, 1, 4, 1, 1, 1, 1] }`; every key optional), shared by the switch
/// configuration and the lab's topologies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrioritiesYaml {
    /// DSCP → priority for the DSCPs given; the others keep DSCP / 8.
    #[serde(default)]
    pub dscp: Option<std::collections::BTreeMap<u8, u8>>,
    /// `strict` (default) or `dwrr`.
    #[serde(default)]
    pub scheduler: Option<SchedulerYaml>,
    /// DWRR weight of each priority, eight of them (default: all 1).
    #[serde(default)]
    pub weights: Option<Vec<u32>>,
}

/// How a port chooses between priorities, as written in YAML.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerYaml {
    /// Strict priority.
    Strict,
    /// Deficit weighted round robin.
    Dwrr,
}

impl PrioritiesYaml {
    /// The checked settings, or what is wrong with them.
    pub fn resolve(&self) -> Result<crate::tm::PrioritySpec, String> {
        let n = crate::tm::PRIORITIES;
        let mut map = crate::tm::PriorityMap::default();
        for (&dscp, &priority) in self.dscp.iter().flatten() {
            if dscp > 63 {
                return Err(format!("dscp: {dscp} is not a DSCP 0-63"));
            }
            if usize::from(priority) >= n {
                return Err(format!("dscp: {dscp} maps to {priority}, not a priority 0-7"));
            }
            map.set(dscp, priority);
        }
        let weights = match &self.weights {
            None => [1; crate::tm::PRIORITIES],
            Some(w) if w.len() != n || w.contains(&0) => {
                return Err(format!("weights: expected {n} weights of 1 or more, got {w:?}"));
            }
            Some(w) => std::array::from_fn(|p| w[p]),
        };
        let scheduler = match self.scheduler.unwrap_or(SchedulerYaml::Strict) {
            SchedulerYaml::Strict if self.weights.is_some() => {
                return Err("weights: only for `scheduler: dwrr`".into());
            }
            SchedulerYaml::Strict => crate::tm::Scheduler::Strict,
            SchedulerYaml::Dwrr => crate::tm::Scheduler::Dwrr { weights },
        };
        Ok(crate::tm::PrioritySpec { map, scheduler })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    prefix: Spanned<String>,
    #[serde(default)]
    port: Option<Spanned<String>>,
    #[serde(default)]
    ecmp: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMac {
    mac: Spanned<String>,
    port: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNeighbor {
    ip: Spanned<String>,
    mac: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapture {
    dir: PathBuf,
    #[serde(default)]
    ports: Vec<Spanned<String>>,
    #[serde(default)]
    drops: bool,
}

/// Parses "aa:bb:cc:dd:ee:ff".
pub fn parse_mac(s: &str) -> Option<MacAddress> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(MacAddress(out))
}

/// Parses "198.18.0.0/15" into the network address and length; host bits must be zero.
pub fn parse_prefix(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or("expected an IPv4 prefix such as 198.18.0.0/24")?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| format!("`{addr}` is not an IPv4 address"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|&l| l <= 32)
        .ok_or(format!("`{len}` is not a prefix length 0-32"))?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    if u32::from(addr) & !mask != 0 {
        return Err(format!("{addr}/{len} has host bits set"));
    }
    Ok((addr, len))
}

impl SwitchSpec {
    /// Reads and checks a YAML switch configuration.
    pub fn load(path: &Path) -> Result<SwitchSpec, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_owned(),
            line: 0,
            column: 0,
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        Self::from_yaml(&text, path)
    }

    /// Parses and checks YAML text; `path` is only used in errors.
    pub fn from_yaml(text: &str, path: &Path) -> Result<SwitchSpec, ConfigError> {
        let raw: RawSwitch = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
            ConfigError {
                file: path.to_owned(),
                line,
                column,
                field: String::new(),
                message: e.to_string(),
            }
        })?;
        Resolver { path }.resolve(raw)
    }

    /// Index of the port called `name`.
    pub fn port_index(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|p| p.name == name)
    }
}

struct Resolver<'a> {
    path: &'a Path,
}

impl Resolver<'_> {
    fn err<T>(&self, at: &Spanned<T>, field: String, message: String) -> ConfigError {
        ConfigError {
            file: self.path.to_owned(),
            line: at.referenced.line() as usize,
            column: at.referenced.column() as usize,
            field,
            message,
        }
    }

    fn resolve(&self, raw: RawSwitch) -> Result<SwitchSpec, ConfigError> {
        let mut names: HashMap<String, (usize, usize)> = HashMap::new();
        let mut devices: HashMap<String, usize> = HashMap::new();
        let mut ports = Vec::new();
        if raw.ports.is_empty() {
            return Err(ConfigError {
                file: self.path.to_owned(),
                line: 0,
                column: 0,
                field: "ports".into(),
                message: "a switch needs at least one port".into(),
            });
        }
        for (i, p) in raw.ports.into_iter().enumerate() {
            let name = p.name.value.clone();
            if name.is_empty() {
                return Err(self.err(&p.name, format!("ports[{i}].name"), "must not be empty".into()));
            }
            if let Some((_, line)) = names.get(&name) {
                return Err(self.err(
                    &p.name,
                    format!("ports[{i}].name"),
                    format!("duplicate port name `{name}` (first defined at line {line})"),
                ));
            }
            names.insert(name.clone(), (i, p.name.referenced.line() as usize));
            let device = p.device.as_ref().map_or(name.clone(), |d| d.value.clone());
            if device.is_empty() || device.len() > 15 {
                let at = p.device.as_ref().unwrap_or(&p.name);
                return Err(self.err(
                    at,
                    format!("ports[{i}].device"),
                    format!("`{device}` is not a Linux interface name (1-15 characters)"),
                ));
            }
            if let Some(line) = devices.insert(device.clone(), p.name.referenced.line() as usize) {
                let at = p.device.as_ref().unwrap_or(&p.name);
                return Err(self.err(
                    at,
                    format!("ports[{i}].device"),
                    format!("duplicate device `{device}` (also used at line {line})"),
                ));
            }
            let ecn = match &p.ecn {
                None => None,
                Some(e) => Some(
                    e.value
                        .resolve()
                        .map_err(|m| self.err(e, format!("ports[{i}].ecn"), m))?,
                ),
            };
            let loss = match &p.loss {
                Some(l) if !(0.0..1.0).contains(&l.value) => {
                    return Err(self.err(
                        l,
                        format!("ports[{i}].loss"),
                        format!("expected a probability in [0, 1), got {}", l.value),
                    ));
                }
                Some(l) => l.value,
                None => 0.0,
            };
            if p.mtu < 68 {
                return Err(self.err(
                    &p.name,
                    format!("ports[{i}].mtu"),
                    format!("expected at least 68, got {}", p.mtu),
                ));
            }
            let io = match p.kind {
                RawKind::Tap => PortIo::Tap { device },
                RawKind::Veth => PortIo::Veth { device, netns: p.netns },
            };
            let p4_port = p.p4_port.unwrap_or_else(|| crate::pipeline::default_p4_port(&name, i));
            ports.push(PortSpec {
                name,
                io,
                rate: p.rate,
                delay: p.delay,
                buffer: p.buffer,
                mtu: p.mtu,
                ecn,
                int: p.int,
                loss,
                p4_port,
            });
        }
        let port = |s: &Spanned<String>, field: String| -> Result<usize, ConfigError> {
            names.get(&s.value).map(|&(i, _)| i).ok_or_else(|| {
                let known: Vec<&str> = names.keys().map(String::as_str).collect();
                self.err(
                    s,
                    field,
                    format!("unknown port `{}` (ports are: {})", s.value, sorted(known)),
                )
            })
        };

        let mut routes = Vec::new();
        for (i, r) in raw.routes.iter().enumerate() {
            let (prefix, len) =
                parse_prefix(&r.prefix.value).map_err(|m| self.err(&r.prefix, format!("routes[{i}].prefix"), m))?;
            let next = match (&r.port, &r.ecmp) {
                (Some(p), None) => NextHop::Port(port(p, format!("routes[{i}].port"))?),
                (None, Some(group)) if !group.is_empty() => NextHop::Ecmp(
                    group
                        .iter()
                        .enumerate()
                        .map(|(j, p)| port(p, format!("routes[{i}].ecmp[{j}]")))
                        .collect::<Result<_, _>>()?,
                ),
                _ => {
                    return Err(self.err(
                        &r.prefix,
                        format!("routes[{i}]"),
                        "expected exactly one of `port: NAME` or `ecmp: [NAME, ...]`".into(),
                    ));
                }
            };
            routes.push(Route { prefix, len, next });
        }
        let mut macs = Vec::new();
        for (i, m) in raw.macs.iter().enumerate() {
            let mac = parse_mac(&m.mac.value).ok_or_else(|| {
                self.err(
                    &m.mac,
                    format!("macs[{i}].mac"),
                    format!("`{}` is not a MAC address (aa:bb:cc:dd:ee:ff)", m.mac.value),
                )
            })?;
            macs.push((mac, port(&m.port, format!("macs[{i}].port"))?));
        }
        let mut neighbors = Vec::new();
        for (i, n) in raw.neighbors.iter().enumerate() {
            let ip: Ipv4Addr = n.ip.value.parse().map_err(|_| {
                self.err(
                    &n.ip,
                    format!("neighbors[{i}].ip"),
                    format!("`{}` is not an IPv4 address", n.ip.value),
                )
            })?;
            let mac = parse_mac(&n.mac.value).ok_or_else(|| {
                self.err(
                    &n.mac,
                    format!("neighbors[{i}].mac"),
                    format!("`{}` is not a MAC address (aa:bb:cc:dd:ee:ff)", n.mac.value),
                )
            })?;
            neighbors.push((ip, mac));
        }
        let capture = match raw.capture {
            None => None,
            Some(c) => Some(CaptureSpec {
                dir: c.dir,
                ports: c
                    .ports
                    .iter()
                    .enumerate()
                    .map(|(j, p)| port(p, format!("capture.ports[{j}]")))
                    .collect::<Result<_, _>>()?,
                drops: c.drops,
            }),
        };
        let workers = match raw.workers {
            None => standalone_workers(ports.len()),
            Some(w) if w.value == 0 => {
                return Err(self.err(&w, "workers".into(), "expected at least 1".into()));
            }
            Some(w) => w.value,
        };
        let mmu = match &raw.mmu {
            Some(m) => Some(m.value.resolve().map_err(|e| self.err(m, "mmu".into(), e))?),
            None => None,
        };
        let pfc = match &raw.pfc {
            Some(p) => p.value.resolve().map_err(|e| self.err(p, "pfc".into(), e))?,
            None => None,
        };
        let priorities = match &raw.priorities {
            Some(p) => p.value.resolve().map_err(|e| self.err(p, "priorities".into(), e))?,
            None => crate::tm::PrioritySpec::default(),
        };
        if let Some(p4) = &raw.p4 {
            if !p4.value.ports.is_empty() {
                return Err(self.err(
                    p4,
                    "p4.ports".into(),
                    "a switch's own file numbers each port with its `p4_port`".into(),
                ));
            }
            if let Some(cpu) = &p4.value.cpu_port {
                let taken: Vec<(&str, u16)> = ports.iter().map(|p| (p.name.as_str(), p.p4_port)).collect();
                crate::pipeline::check_cpu_port(cpu.value, &taken)
                    .map_err(|m| self.err(cpu, "p4.cpu_port".into(), m))?;
            }
        }
        Ok(SwitchSpec {
            name: raw.name,
            node_id: raw.node_id,
            workers,
            int_port: raw.int_port,
            ports,
            routes,
            macs,
            arp: raw.arp,
            neighbors,
            capture,
            counters_file: raw.counters_file,
            seed: raw.seed,
            poll: raw.poll,
            packet_io: raw.packet_io,
            queue_trace_every: raw.queue_trace_every,
            p4: raw.p4.map(|p| p.value.spec(self.path)),
            mmu,
            pfc,
            priorities,
        })
    }
}

fn sorted(mut v: Vec<&str>) -> String {
    v.sort_unstable();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p4runtime_defaults_to_the_tutorials_numbering_and_listens_on_loopback_only() {
        let key = P4RuntimeKey::default();
        assert_eq!(key.resolve(2), Ok(("127.0.0.1:50053".parse().expect("address"), 2)));
        let set = P4RuntimeKey {
            address: Some("[::1]:9559".into()),
            device_id: Some(7),
        };
        assert_eq!(set.resolve(0), Ok(("[::1]:9559".parse().expect("address"), 7)));
        let outside = P4RuntimeKey {
            address: Some("0.0.0.0:9559".into()),
            device_id: None,
        };
        assert!(outside.resolve(0).is_err_and(|e| e.contains("loopback")));
        let garbage = P4RuntimeKey {
            address: Some("localhost".into()),
            device_id: None,
        };
        assert!(garbage.resolve(0).is_err_and(|e| e.contains("HOST:PORT")));
    }

    const GOOD: &str = "\
node_id: 7
ports:
  - name: p1
    kind: tap
    rate: 200Mbps
    delay: 10us
    buffer: 100KB
    ecn: { kmin: 20KB, kmax: 80KB, pmax: 0.2 }
  - name: p2
    kind: veth
    device: sw-p2
    rate: 1Gbps
routes:
  - prefix: 198.18.0.1/32
    port: p1
  - prefix: 198.18.1.0/24
    ecmp: [p1, p2]
neighbors:
  - { ip: 198.18.0.1, mac: \"02:00:00:00:00:01\" }
";

    fn load(text: &str) -> Result<SwitchSpec, ConfigError> {
        SwitchSpec::from_yaml(text, Path::new("sw.yaml"))
    }

    #[test]
    fn good_config_resolves() {
        let s = load(GOOD).unwrap();
        assert_eq!(s.node_id, 7);
        assert_eq!(s.ports.len(), 2);
        assert_eq!(s.ports[0].rate, Rate(200_000_000));
        assert_eq!(s.ports[0].delay, Nanos(10_000));
        assert_eq!(
            s.ports[0].ecn,
            Some(EcnSpec {
                kmin: 20_000,
                kmax: 80_000,
                pmax: 0.2
            })
        );
        assert_eq!(
            s.ports[1].io,
            PortIo::Veth {
                device: "sw-p2".into(),
                netns: None
            }
        );
        assert_eq!(s.routes[1].next, NextHop::Ecmp(vec![0, 1]));
        assert_eq!(s.int_port, int_format::int::DEFAULT_INT_PORT);
    }

    #[test]
    fn unknown_port_names_file_line_and_field() {
        let e = load(&GOOD.replace("    port: p1\n", "    port: p9\n")).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (15, "routes[0].port"));
        assert!(e.message.contains("unknown port `p9`"), "{e}");
        assert!(e.to_string().starts_with("sw.yaml:15:11: routes[0].port:"), "{e}");
    }

    #[test]
    fn duplicate_name_points_at_the_second() {
        let e = load(&GOOD.replace("name: p2", "name: p1")).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (9, "ports[1].name"));
        assert!(e.message.contains("first defined at line 3"), "{e}");
    }

    #[test]
    fn missing_field_is_reported_with_its_name_and_place() {
        let e = load(&GOOD.replace("    rate: 1Gbps\n", "")).unwrap_err();
        assert!(e.message.contains("rate"), "{e}");
        assert!(e.line > 0, "{e}");
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(
            load(&GOOD.replace("rate: 200Mbps", "rate: -5Mbps"))
                .unwrap_err()
                .message
                .contains("rate")
        );
        assert!(
            load(&GOOD.replace("kmin: 20KB", "kmin: 90KB"))
                .unwrap_err()
                .field
                .contains("ecn")
        );
        assert!(
            load(&GOOD.replace("198.18.1.0/24", "198.18.1.1/24"))
                .unwrap_err()
                .message
                .contains("host bits")
        );
        assert!(
            load(&GOOD.replace("node_id: 7", "node_id: 7\ncolour: blue"))
                .unwrap_err()
                .message
                .contains("colour")
        );
    }
}
