//! The topology a scenario describes: nodes (hosts and switches), links with their rate, delay,
//! buffer, ECN and loss, and the routes derived from them. Loaded from YAML close to
//! containerlab's (`nodes:`, `links:` with `endpoints: ["s1:eth1", "h1:eth0"]`).

pub mod graph;
mod link_names;
mod load;
mod routing;
pub mod tutorial_json;

pub use load::{LinkKeys, LoadError, load_str};
pub(crate) use load::{first_line, load_document, parse_yaml};

/// Checks a name the lab uses in file and namespace names (letters, digits, `-`, `_`, `.`).
pub fn check_name(name: &str) -> Result<(), String> {
    load::plain_name(name, load::MAX_NAME)
}
pub use routing::{Routes, distances, routes, routes_without, shortest_paths};

use std::net::Ipv4Addr;

use int_format::ethernet::MacAddress;
use intlab_switch::config::EcnSpec;
use intlab_switch::units::{Bytes, Nanos, Rate};

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// An emulated host running a transport endpoint.
    Host,
    /// A software switch.
    Switch,
}

/// A node of the topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Unique name.
    pub name: String,
    /// Host or switch.
    pub kind: NodeKind,
    /// A host's address (198.18.0.0/15); switches have none.
    pub address: Option<Ipv4Addr>,
    /// A host's interface beyond its address; switches have none.
    pub interface: Option<HostInterface>,
    /// A switch's P4 program, when it runs one instead of the native pipeline.
    pub p4: Option<P4Node>,
    /// What a switch sets itself of the scenario's `mmu`, `pfc` and `priorities`.
    pub tm: SwitchTm,
}

/// A switch node's own `mmu`, `pfc` and `priorities`: each one given replaces the scenario's
/// for that switch (ToRs and spines with different buffers, PFC on some tiers only).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SwitchTm {
    /// Its shared buffer.
    pub mmu: Option<intlab_switch::tm::MmuSpec>,
    /// PFC on it (`Some(None)`: off although the scenario turns it on).
    pub pfc: Option<Option<intlab_switch::tm::PfcSpec>>,
    /// Its classes.
    pub priorities: Option<intlab_switch::tm::PrioritySpec>,
}

/// How a host's interface is set up, as a tutorials-style topology states it: the subnet it sees
/// as on-link, its MAC, a default gateway and static neighbours. By default the whole lab range
/// is on-link and the MAC is `02:1b:00:00:` and the host's position among hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInterface {
    /// Prefix length of the host's subnet.
    pub prefix_len: u8,
    /// The interface's MAC.
    pub mac: MacAddress,
    /// Next hop for everything off the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// Static neighbour entries (address, MAC); when any is given, or a gateway, the lab adds
    /// none of its own.
    pub arp: Vec<(Ipv4Addr, MacAddress)>,
}

impl HostInterface {
    /// The lab's choice for host number `i` (its position among hosts): the whole lab range
    /// on-link, a locally administered MAC, no gateway.
    pub fn lab_default(i: usize) -> HostInterface {
        HostInterface {
            prefix_len: LAB_PREFIX_LEN,
            mac: MacAddress([0x02, 0x1b, 0, 0, (i >> 8) as u8, i as u8]),
            gateway: None,
            arp: Vec::new(),
        }
    }

    /// True when the topology says how this host reaches others (gateway or neighbours), so
    /// the lab must not add its own neighbour entries.
    pub fn is_explicit(&self) -> bool {
        self.gateway.is_some() || !self.arp.is_empty()
    }
}

/// Prefix length of the lab's address range 198.18.0.0/15.
pub const LAB_PREFIX_LEN: u8 = 15;

/// The lab's address block: 198.18.0.0/15 (benchmarking, RFC 2544), as a number.
pub(crate) const LAB_NET: u32 = 0xc612_0000;
/// Its mask.
pub(crate) const LAB_MASK: u32 = u32::MAX << (32 - LAB_PREFIX_LEN);

/// True when `ip` is inside the lab's range.
pub fn in_lab_range(ip: Ipv4Addr) -> bool {
    u32::from(ip) & LAB_MASK == LAB_NET
}

/// A switch's P4 program and its port numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Node {
    /// The program and its runtime file (paths resolved against the scenario's folder).
    pub spec: intlab_switch::config::P4Spec,
    /// P4 port numbers given by interface; the others are numbered by
    /// [`intlab_switch::config::default_p4_port`].
    pub ports: std::collections::BTreeMap<String, u16>,
}

/// One end of a link: a node and its interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Node index.
    pub node: usize,
    /// Interface name on that node ("eth1").
    pub interface: String,
}

/// Properties of a link, the same both ways.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkProps {
    /// Line rate.
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Nanos,
    /// Egress buffer at each switch end.
    pub buffer: Bytes,
    /// ECN marking at each switch end.
    pub ecn: Option<EcnSpec>,
    /// What the link does to the frames it carries (tc-netem's impairments): both ways, or
    /// only towards `impair_towards`.
    pub impair: intlab_switch::impair::ImpairmentSpec,
    /// The node (one of the link's ends) whose way alone the impairments apply to (`towards:`).
    pub impair_towards: Option<usize>,
}

impl LinkProps {
    /// What the link does to the frames going towards node `to`.
    pub fn impair_towards(&self, to: usize) -> intlab_switch::impair::ImpairmentSpec {
        match self.impair_towards {
            Some(n) if n != to => intlab_switch::impair::ImpairmentSpec::default(),
            _ => self.impair,
        }
    }
}

/// A point-to-point link.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// Its two ends.
    pub ends: [Endpoint; 2],
    /// Its properties.
    pub props: LinkProps,
}

/// A loaded, checked topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Name.
    pub name: String,
    /// Nodes, in file order.
    pub nodes: Vec<Node>,
    /// Links, in file order.
    pub links: Vec<Link>,
    /// Routes given in the file, replacing the computed ones.
    pub routes: Vec<RouteOverride>,
    /// Every switch's shared buffer, when set (`mmu:`; PFC implies one), unless it sets its own.
    pub mmu: Option<intlab_switch::tm::MmuSpec>,
    /// PFC on every switch and its hosts, when on (`pfc:`), unless a switch sets its own.
    pub pfc: Option<intlab_switch::tm::PfcSpec>,
    /// Every switch's classes (`priorities:`): DSCP → priority, strict priority or DWRR, unless
    /// a switch sets its own.
    pub priorities: intlab_switch::tm::PrioritySpec,
}

/// The next hops one switch uses towards one host, given instead of computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteOverride {
    /// The switch (node index).
    pub switch: usize,
    /// The destination host (node index).
    pub host: usize,
    /// Links to forward on (ECMP over them when more than one).
    pub via: Vec<usize>,
}

impl Topology {
    /// Switch node `s`'s shared buffer.
    pub fn mmu_of(&self, s: usize) -> Option<intlab_switch::tm::MmuSpec> {
        self.nodes[s].tm.mmu.or(self.mmu)
    }

    /// PFC on switch node `s`, if on.
    pub fn pfc_of(&self, s: usize) -> Option<intlab_switch::tm::PfcSpec> {
        self.nodes[s].tm.pfc.unwrap_or(self.pfc)
    }

    /// Switch node `s`'s classes.
    pub fn priorities_of(&self, s: usize) -> intlab_switch::tm::PrioritySpec {
        self.nodes[s].tm.priorities.unwrap_or(self.priorities)
    }

    /// Whether any switch runs PFC.
    pub fn any_pfc(&self) -> bool {
        self.switches().any(|s| self.pfc_of(s).is_some())
    }

    /// The switch host node `h` is attached to, if any.
    pub fn switch_of(&self, h: usize) -> Option<usize> {
        self.links_of(h)
            .map(|(l, _)| &self.links[l].ends)
            .flat_map(|ends| ends.iter().map(|e| e.node))
            .find(|&n| self.nodes[n].kind == NodeKind::Switch)
    }

    /// Index of the node called `name`.
    pub fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Host indices, in file order.
    pub fn hosts(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Host)
            .map(|(i, _)| i)
    }

    /// Switch indices, in file order.
    pub fn switches(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Switch)
            .map(|(i, _)| i)
    }

    /// Links at node `n`: (link index, which end is `n`).
    pub fn links_of(&self, n: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.links
            .iter()
            .enumerate()
            .filter_map(move |(i, l)| l.ends.iter().position(|e| e.node == n).map(|end| (i, end)))
    }

    /// The link at interface `interface` of node `n`: (link index, which end is `n`).
    pub fn link_at(&self, n: usize, interface: &str) -> Option<(usize, usize)> {
        self.links_of(n)
            .find(|&(l, end)| self.links[l].ends[end].interface == interface)
    }
}

/// For tests: switch `s` with hosts `a` (port `1`) and `b` (port `2`) on links of 1 Gb/s and
/// 10 us.
#[cfg(test)]
pub(crate) fn two_hosts_on_a_switch() -> Topology {
    load_str(
        "name: x\nnodes:\n  s: { kind: switch }\n  a: { kind: host }\n  b: { kind: host }\nlinks:\n  - { endpoints: [\"s:1\", \"a:0\"], rate: 1Gbps, delay: 10us }\n  - { endpoints: [\"s:2\", \"b:0\"], rate: 1Gbps, delay: 10us }\n",
        std::path::Path::new("x.yaml"),
    )
    .expect("the test topology loads")
}
