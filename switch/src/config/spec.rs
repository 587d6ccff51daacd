//! The resolved configuration a switch is built from: ports, routes, its P4 program, its
//! buffer and PFC. `intlab switch` resolves it from its file (the `file` module); the lab builds it
//! directly.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use int_format::ethernet::MacAddress;
use serde::Deserialize;

pub use crate::port::{PacketIo, PortIo};
pub use crate::tm::EcnSpec;
use crate::units::{Bytes, Nanos, Rate};

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
    /// What the egress link does to the frames it carries: jitter, loss, duplication,
    /// corruption, reordering (tc-netem's, see [`crate::impair`]).
    pub impair: crate::impair::ImpairmentSpec,
    /// What a host's link does to the frames the host sends to this port (a link between two
    /// switches is impaired each way by the egress of the end that sends).
    pub impair_inbound: crate::impair::ImpairmentSpec,
    /// Its number in a P4 program (`standard_metadata.ingress_port`, `egress_spec`).
    pub p4_port: u16,
}

/// A P4 program run in place of the native pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Spec {
    /// The program (P4_16, v1model).
    pub program: PathBuf,
    /// How its preprocessor runs (p4c's `-I`, `-D`, `-U`).
    pub preprocessor: intlab_p4::PreprocessorOptions,
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
    /// Serve over TLS (as P4Runtime servers offer), with client certificates when `client_ca`
    /// is given; plain gRPC on loopback without it.
    #[serde(default)]
    pub tls: Option<P4RuntimeTls>,
}

/// `p4.p4runtime.tls`: the server's certificate and key, and the authority whose
/// certificates clients must show (PEM files, relative to the file that names them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4RuntimeTls {
    /// The server's certificate chain.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// Clients must show a certificate this authority signed (mutual TLS).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
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
    /// Seed of the ECN marks' and the links' impairments' random draws.
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
