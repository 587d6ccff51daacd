//! Loading a topology from YAML, with errors that name the file, line, column and what was
//! expected.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use int_format::ethernet::MacAddress;
use intlab_switch::config::{EcnYaml, MmuYaml, NetemKeys, NetemValue, P4Yaml, PfcYaml, PrioritiesYaml};
use intlab_switch::units::{Bytes, Nanos, Rate};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use super::{
    Endpoint, HostInterface, LAB_MASK, LAB_NET, LAB_PREFIX_LEN, Link, LinkProps, Node, NodeKind, RouteOverride,
    Topology,
};

/// A topology that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LoadError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            return write!(f, "{}: {}", self.file.display(), self.message);
        }
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    name: Spanned<String>,
    #[serde(default)]
    defaults: RawDefaults,
    nodes: BTreeMap<String, Spanned<RawNode>>,
    links: Vec<Spanned<RawLink>>,
    #[serde(default)]
    routes: Vec<Spanned<RawRoute>>,
    #[serde(default)]
    mmu: Option<Spanned<MmuYaml>>,
    #[serde(default)]
    pfc: Option<Spanned<PfcYaml>>,
    #[serde(default)]
    priorities: Option<Spanned<PrioritiesYaml>>,
    // The run's keys: the scenario module reads them from the same document.
    #[serde(default, rename = "controller")]
    _controller: Option<IgnoredAny>,
    #[serde(default, rename = "controllers")]
    _controllers: Option<IgnoredAny>,
    #[serde(default, rename = "workload")]
    _workload: Option<IgnoredAny>,
    #[serde(default, rename = "duration")]
    _duration: Option<IgnoredAny>,
    #[serde(default, rename = "seed")]
    _seed: Option<IgnoredAny>,
    #[serde(default, rename = "capture")]
    _capture: Option<IgnoredAny>,
    #[serde(default, rename = "dilation")]
    _dilation: Option<IgnoredAny>,
    #[serde(default, rename = "transport")]
    _transport: Option<IgnoredAny>,
    #[serde(default, rename = "runtime")]
    _runtime: Option<IgnoredAny>,
    #[serde(default, rename = "sweep")]
    _sweep: Option<IgnoredAny>,
    #[serde(default, rename = "events")]
    _events: Option<IgnoredAny>,
    #[serde(default, rename = "programs")]
    _programs: Option<IgnoredAny>,
    #[serde(default, rename = "reconverge")]
    _reconverge: Option<IgnoredAny>,
    #[serde(default, rename = "sites")]
    _sites: Option<IgnoredAny>,
}

/// A route that replaces the computed next hops of one switch towards one host.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    switch: Spanned<String>,
    to: Spanned<String>,
    via: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default)]
    link: Option<Spanned<RawLink>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawKind {
    Host,
    Switch,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    kind: RawKind,
    #[serde(default)]
    address: Option<Spanned<String>>,
    #[serde(default)]
    mac: Option<Spanned<String>>,
    #[serde(default)]
    gateway: Option<Spanned<String>>,
    #[serde(default)]
    arp: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    p4: Option<Spanned<P4Yaml>>,
    #[serde(default)]
    mmu: Option<Spanned<MmuYaml>>,
    #[serde(default)]
    pfc: Option<Spanned<PfcYaml>>,
    #[serde(default)]
    priorities: Option<Spanned<PrioritiesYaml>>,
}

/// A link, or (without endpoints) the defaults of every link. One struct for both: serde's
/// flatten, which could share the properties, loses the position of a bad value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    #[serde(default)]
    endpoints: Option<[Spanned<String>; 2]>,
    #[serde(default)]
    rate: Option<Rate>,
    #[serde(default)]
    delay: Option<Nanos>,
    #[serde(default)]
    buffer: Option<Bytes>,
    #[serde(default)]
    ecn: Option<EcnYaml>,
    #[serde(default)]
    jitter: Option<Spanned<NetemValue>>,
    #[serde(default)]
    distribution: Option<Spanned<String>>,
    #[serde(default)]
    loss: Option<Spanned<NetemValue>>,
    #[serde(default)]
    duplicate: Option<Spanned<NetemValue>>,
    #[serde(default)]
    corrupt: Option<Spanned<NetemValue>>,
    #[serde(default)]
    reorder: Option<Spanned<NetemValue>>,
    #[serde(default)]
    gap: Option<Spanned<u32>>,
    #[serde(default)]
    towards: Option<Spanned<String>>,
}

impl RawLink {
    /// Its impairment keys, each from the link or else from `defaults`.
    fn netem<'a>(&'a self, defaults: &'a RawLink) -> NetemKeys<'a> {
        NetemKeys {
            jitter: self.jitter.as_ref().or(defaults.jitter.as_ref()),
            distribution: self.distribution.as_ref().or(defaults.distribution.as_ref()),
            loss: self.loss.as_ref().or(defaults.loss.as_ref()),
            duplicate: self.duplicate.as_ref().or(defaults.duplicate.as_ref()),
            corrupt: self.corrupt.as_ref().or(defaults.corrupt.as_ref()),
            reorder: self.reorder.as_ref().or(defaults.reorder.as_ref()),
            gap: self.gap.as_ref().or(defaults.gap.as_ref()),
        }
    }
}

/// Parses and checks a topology; `file` is only used in errors. A scenario's run keys
/// (controller, workload, ...) are parsed but not checked here.
pub fn load_str(text: &str, file: &Path) -> Result<Topology, LoadError> {
    load_document(text, file)
}

/// Reads a whole scenario file's topology, checked (its run keys are the scenario's).
pub(crate) fn load_document(text: &str, file: &Path) -> Result<Topology, LoadError> {
    let raw: RawTopology = parse_yaml(text, file)?;
    let err = |at: &serde_saphyr::Location, message: String| located(file, at, message);
    if let Err(m) = plain_name(&raw.name.value, MAX_NAME) {
        return Err(err(&raw.name.referenced, format!("name: {m}")));
    }
    let nodes = load_nodes(&raw, file)?;
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    let links = load_links(&raw, &nodes, &index, file)?;
    for (i, n) in nodes.iter().enumerate() {
        if n.kind == NodeKind::Host && links.iter().filter(|l| l.ends.iter().any(|e| e.node == i)).count() != 1 {
            let at = &raw.nodes[&n.name].referenced;
            return Err(err(at, format!("host `{}` must have exactly one link", n.name)));
        }
    }
    let routes = load_routes(&raw, &nodes, &index, &links, file)?;
    let partial = Topology {
        name: String::new(),
        nodes: nodes.clone(),
        links: links.clone(),
        routes: routes.clone(),
        mmu: None,
        pfc: None,
        priorities: Default::default(),
    };
    if let Some((k, cycle)) = super::routing::first_loop(&partial) {
        let names: Vec<&str> = cycle.iter().map(|&n| nodes[n].name.as_str()).collect();
        return Err(err(
            &raw.routes[k].referenced,
            format!(
                "routes[{k}]: a forwarding loop towards `{}`: {} (frames would circle until their TTL ran out)",
                raw.routes[k].value.to.value,
                names.join(" -> ")
            ),
        ));
    }
    let tm = fabric_keys("", &raw.mmu, &raw.pfc, &raw.priorities).map_err(|(at, m)| err(at, m))?;
    let topology = Topology {
        name: raw.name.value,
        nodes,
        links,
        routes,
        mmu: tm.mmu,
        pfc: tm.pfc.flatten(),
        priorities: tm.priorities.unwrap_or_default(),
    };
    Ok(topology)
}

/// The nodes, in file order (the map is sorted by name; spans give the order), with their
/// addresses and interfaces given or assigned.
fn load_nodes(raw: &RawTopology, file: &Path) -> Result<Vec<Node>, LoadError> {
    let err = |at: &serde_saphyr::Location, message: String| located(file, at, message);
    let mut raw_nodes: Vec<(&String, &Spanned<RawNode>)> = raw.nodes.iter().collect();
    raw_nodes.sort_by_key(|(_, n)| (n.referenced.line(), n.referenced.column()));
    let mut nodes = Vec::new();
    let mut used: HashMap<Ipv4Addr, String> = HashMap::new();
    let mut next_host = 1u32;
    let mut hosts_seen = 0usize;
    let mut macs: HashMap<MacAddress, String> = HashMap::new();
    for (name, n) in &raw_nodes {
        if let Err(m) = plain_name(name, MAX_NAME) {
            return Err(err(&n.referenced, format!("node name: {m}")));
        }
        let kind = match n.value.kind {
            RawKind::Host => NodeKind::Host,
            RawKind::Switch => NodeKind::Switch,
        };
        if kind == NodeKind::Switch {
            let host_only = [&n.value.address, &n.value.mac, &n.value.gateway];
            if let Some(a) = host_only.into_iter().flatten().next() {
                return Err(err(
                    &a.referenced,
                    format!("node `{name}`: a switch has no address, mac or gateway (hosts do)"),
                ));
            }
            if let Some(a) = &n.value.arp {
                return Err(err(
                    &a.referenced,
                    format!("node `{name}`: a switch has no arp entries (hosts do)"),
                ));
            }
        }
        let (address, interface) = match kind {
            NodeKind::Switch => (None, None),
            NodeKind::Host => {
                let (ip, interface) = host_interface(name, &n.value, next_host, hosts_seen)
                    .map_err(|(at, m)| err(at.unwrap_or(&n.referenced), m))?;
                hosts_seen += 1;
                let ip = ip.unwrap_or_else(|| {
                    next_host += 1;
                    Ipv4Addr::from(LAB_NET + next_host - 1)
                });
                (Some(ip), Some(interface))
            }
        };
        if let Some(i) = &interface
            && let Some(other) = macs.insert(i.mac, (*name).clone())
        {
            let at = n.value.mac.as_ref().map_or(&n.referenced, |a| &a.referenced);
            return Err(err(
                at,
                format!("node `{name}`: duplicate MAC {} (also `{other}`)", i.mac),
            ));
        }
        if let Some(ip) = address
            && let Some(other) = used.insert(ip, (*name).clone())
        {
            let at = n.value.address.as_ref().map_or(&n.referenced, |a| &a.referenced);
            return Err(err(
                at,
                format!("node `{name}`: duplicate address {ip} (also `{other}`)"),
            ));
        }
        let p4 = p4_node(name, kind, &n.value, file)?;
        let tm = switch_tm(name, kind, &n.value).map_err(|(at, m)| err(at, m))?;
        nodes.push(Node {
            name: (*name).clone(),
            kind,
            address,
            interface,
            p4,
            tm,
        });
    }
    Ok(nodes)
}

/// The P4 program a node runs, checked here (loaded once, so that a broken program or runtime
/// file stops the scenario before anything is built; the lab loads its own copy).
fn p4_node(name: &str, kind: NodeKind, n: &RawNode, file: &Path) -> Result<Option<super::P4Node>, LoadError> {
    let err = |at: &serde_saphyr::Location, message: String| located(file, at, message);
    let p4 = match &n.p4 {
        None => None,
        Some(p) if kind == NodeKind::Host => {
            return Err(err(
                &p.referenced,
                format!("node `{name}`: only a switch runs a P4 program"),
            ));
        }
        Some(p) => {
            let spec = p.value.spec(file);
            if let Some(cpu) = &p.value.cpu_port {
                let taken: Vec<(&str, u16)> = p.value.ports.iter().map(|(i, n)| (i.as_str(), *n)).collect();
                if let Err(e) = intlab_switch::config::check_cpu_port(cpu.value, &taken) {
                    return Err(err(&cpu.referenced, format!("node `{name}`: p4.cpu_port: {e}")));
                }
            }
            if let Err(e) = spec.p4runtime.resolve(0) {
                return Err(err(&p.referenced, format!("node `{name}`: p4.p4runtime: {e}")));
            }
            if let Err(e) = intlab_switch::pipeline::load_datapath(&spec, name) {
                return Err(err(&p.referenced, format!("node `{name}`: p4: {e}")));
            }
            if let Some(bad) = p.value.ports.values().find(|&&n| n >= intlab_p4::exec::DROP_PORT) {
                return Err(err(
                    &p.referenced,
                    format!("node `{name}`: p4.ports: {bad} is not below 511 (the drop port)"),
                ));
            }
            Some(super::P4Node {
                spec,
                ports: p.value.ports.clone(),
            })
        }
    };
    Ok(p4)
}

/// The links, each end a node's interface used once, their properties over `defaults.link`.
fn load_links(
    raw: &RawTopology,
    nodes: &[Node],
    index: &HashMap<&str, usize>,
    file: &Path,
) -> Result<Vec<Link>, LoadError> {
    let err = |at: &serde_saphyr::Location, message: String| located(file, at, message);
    let no_defaults = RawLink::default();
    let defaults = match &raw.defaults.link {
        Some(d) if d.value.endpoints.is_some() => {
            return Err(err(&d.referenced, "defaults.link: expected no `endpoints`".into()));
        }
        Some(d) if d.value.towards.is_some() => {
            return Err(err(
                &d.referenced,
                "defaults.link: `towards` names one end of one link: set it on the link".into(),
            ));
        }
        Some(d) => &d.value,
        None => &no_defaults,
    };
    let mut links = Vec::new();
    let mut taken: HashMap<(usize, String), usize> = HashMap::new();
    for (li, l) in raw.links.iter().enumerate() {
        let mut ends = Vec::new();
        let endpoints = l.value.endpoints.as_ref().ok_or_else(|| {
            err(
                &l.referenced,
                format!("links[{li}]: expected `endpoints: [\"node:interface\", \"node:interface\"]`"),
            )
        })?;
        for e in endpoints {
            let (node, interface) = e.value.split_once(':').ok_or_else(|| {
                err(
                    &e.referenced,
                    format!("links[{li}]: endpoint `{}`: expected \"node:interface\"", e.value),
                )
            })?;
            let &n = index.get(node).ok_or_else(|| {
                err(
                    &e.referenced,
                    format!("links[{li}]: endpoint `{}`: no node `{node}`", e.value),
                )
            })?;
            if let Err(m) = interface_name(interface) {
                return Err(err(&e.referenced, format!("links[{li}]: endpoint `{}`: {m}", e.value)));
            }
            if let Some(prev) = taken.insert((n, interface.to_owned()), li) {
                return Err(err(
                    &e.referenced,
                    format!("links[{li}]: interface `{}` is already used by links[{prev}]", e.value),
                ));
            }
            ends.push(Endpoint {
                node: n,
                interface: interface.to_owned(),
            });
        }
        if ends[0].node == ends[1].node {
            return Err(err(
                &l.referenced,
                format!("links[{li}]: both ends are on `{}`", nodes[ends[0].node].name),
            ));
        }
        let p = &l.value;
        let rate = p.rate.or(defaults.rate).ok_or_else(|| {
            err(
                &l.referenced,
                format!("links[{li}]: no rate (set `rate:` on the link or in defaults.link)"),
            )
        })?;
        let ecn = match p.ecn.or(defaults.ecn) {
            None => None,
            Some(e) => Some(
                e.resolve()
                    .map_err(|m| err(&l.referenced, format!("links[{li}]: ecn: {m}")))?,
            ),
        };
        let delay = p.delay.or(defaults.delay).unwrap_or(Nanos(0));
        let impair = p.netem(defaults).resolve(delay).map_err(|e| LoadError {
            file: file.to_owned(),
            line: e.line,
            column: e.column,
            message: format!("links[{li}]: {}: {}", e.key, e.message),
        })?;
        check_rate(rate).map_err(|m| err(&l.referenced, format!("links[{li}]: {m}")))?;
        let buffer = p.buffer.or(defaults.buffer).unwrap_or(Bytes(1_000_000));
        check_buffer(buffer).map_err(|m| err(&l.referenced, format!("links[{li}]: {m}")))?;
        let impair_towards = match &p.towards {
            None => None,
            Some(to) => Some(
                ends.iter()
                    .map(|e| e.node)
                    .find(|&n| nodes[n].name == to.value)
                    .ok_or_else(|| {
                        err(
                            &to.referenced,
                            format!(
                                "links[{li}]: towards `{}`: expected one of the link's ends ({})",
                                to.value,
                                ends.iter()
                                    .map(|e| nodes[e.node].name.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })?,
            ),
        };
        let props = LinkProps {
            rate,
            delay,
            buffer,
            ecn,
            impair,
            impair_towards,
        };
        let [a, b]: [Endpoint; 2] = ends
            .try_into()
            .map_err(|_| err(&l.referenced, "two endpoints".into()))?;
        links.push(Link { ends: [a, b], props });
    }
    Ok(links)
}

/// The routes the file sets over the computed ones.
fn load_routes(
    raw: &RawTopology,
    nodes: &[Node],
    index: &HashMap<&str, usize>,
    links: &[Link],
    file: &Path,
) -> Result<Vec<RouteOverride>, LoadError> {
    let err = |at: &serde_saphyr::Location, message: String| located(file, at, message);
    let mut routes = Vec::new();
    for (ri, r) in raw.routes.iter().enumerate() {
        let node = |name: &Spanned<String>, kind: NodeKind, what: &str| {
            index
                .get(name.value.as_str())
                .copied()
                .filter(|&n| nodes[n].kind == kind)
                .ok_or_else(|| {
                    err(
                        &name.referenced,
                        format!("routes[{ri}]: expected {what}, got `{}`", name.value),
                    )
                })
        };
        let switch = node(&r.value.switch, NodeKind::Switch, "the name of a switch")?;
        let host = node(&r.value.to, NodeKind::Host, "the name of a host")?;
        // An empty `via` is a route withdrawn: the switch drops that host's traffic (no_route).
        let mut via = Vec::new();
        for v in &r.value.via {
            let li = links
                .iter()
                .position(|l: &Link| l.ends.iter().any(|e| e.node == switch && e.interface == v.value))
                .ok_or_else(|| {
                    err(
                        &v.referenced,
                        format!(
                            "routes[{ri}]: `{}` is not an interface of `{}`",
                            v.value, r.value.switch.value
                        ),
                    )
                })?;
            via.push(li);
        }
        routes.push(RouteOverride { switch, host, via });
    }
    Ok(routes)
}

/// An error at `at` in `file`.
fn located(file: &Path, at: &serde_saphyr::Location, message: String) -> LoadError {
    LoadError {
        file: file.to_owned(),
        line: at.line() as usize,
        column: at.column() as usize,
        message,
    }
}

/// A switch node's own `mmu`, `pfc` and `priorities`; a host may have none.
fn switch_tm<'a>(
    name: &str,
    kind: NodeKind,
    n: &'a RawNode,
) -> std::result::Result<super::SwitchTm, (&'a serde_saphyr::Location, String)> {
    let given = [
        n.mmu.as_ref().map(|m| &m.referenced),
        n.pfc.as_ref().map(|p| &p.referenced),
        n.priorities.as_ref().map(|p| &p.referenced),
    ];
    if kind == NodeKind::Host
        && let Some(at) = given.into_iter().flatten().next()
    {
        return Err((at, format!("node `{name}`: mmu, pfc and priorities belong to switches")));
    }
    fabric_keys(&format!("node `{name}`: "), &n.mmu, &n.pfc, &n.priorities)
}

/// The `mmu`, `pfc` and `priorities` keys where given (the scenario's or a switch's own),
/// resolved; an error is placed at its key and starts with `prefix`.
fn fabric_keys<'a>(
    prefix: &str,
    mmu: &'a Option<Spanned<MmuYaml>>,
    pfc: &'a Option<Spanned<PfcYaml>>,
    priorities: &'a Option<Spanned<PrioritiesYaml>>,
) -> std::result::Result<super::SwitchTm, (&'a serde_saphyr::Location, String)> {
    let mut tm = super::SwitchTm::default();
    if let Some(m) = mmu {
        tm.mmu = Some(
            m.value
                .resolve()
                .map_err(|e| (&m.referenced, format!("{prefix}mmu: {e}")))?,
        );
    }
    if let Some(p) = pfc {
        tm.pfc = Some(
            p.value
                .resolve()
                .map_err(|e| (&p.referenced, format!("{prefix}pfc: {e}")))?,
        );
    }
    if let Some(p) = priorities {
        let classes = p.value.resolve();
        tm.priorities = Some(classes.map_err(|e| (&p.referenced, format!("{prefix}priorities: {e}")))?);
    }
    Ok(tm)
}

/// A position in the file and what is wrong there (`None`: the node itself).
type NodeError<'a> = (Option<&'a serde_saphyr::Location>, String);

/// A host's address (when given) and interface: `address: A[/LEN]`, `mac`, `gateway`, `arp`.
/// Everything must stay inside the lab's range; the gateway on the host's own subnet.
fn host_interface<'a>(
    name: &str,
    n: &'a RawNode,
    next_host: u32,
    host_number: usize,
) -> Result<(Option<Ipv4Addr>, HostInterface), NodeError<'a>> {
    let lab_address = |text: &str, at: &'a serde_saphyr::Location, what: &str| -> Result<Ipv4Addr, NodeError<'a>> {
        let ip: Ipv4Addr = text.parse().map_err(|_| {
            (
                Some(at),
                format!("node `{name}`: {what} `{text}` is not an IPv4 address"),
            )
        })?;
        lab_host_address(ip).map_err(|m| (Some(at), format!("node `{name}`: {what} {m}")))?;
        Ok(ip)
    };
    let mut interface = HostInterface::lab_default(host_number);
    let mut address = None;
    if let Some(a) = &n.address {
        let (ip, len) = match a.value.split_once('/') {
            None => (a.value.as_str(), None),
            Some((ip, len)) => (ip, Some(len)),
        };
        address = Some(lab_address(ip, &a.referenced, "address")?);
        if let Some(len) = len {
            interface.prefix_len = len
                .parse()
                .ok()
                .filter(|l| (LAB_PREFIX_LEN..=31).contains(l))
                .ok_or_else(|| {
                    (
                        Some(&a.referenced),
                        format!(
                            "node `{name}`: address `{}`: expected a prefix length from {LAB_PREFIX_LEN} (the lab's range) to 31",
                            a.value
                        ),
                    )
                })?;
        }
    }
    if let Some(m) = &n.mac {
        interface.mac = intlab_switch::config::parse_mac(&m.value)
            .filter(|mac| mac.0[0] & 1 == 0)
            .ok_or_else(|| {
                (
                    Some(&m.referenced),
                    format!(
                        "node `{name}`: mac `{}`: expected a unicast MAC such as 08:00:00:00:01:11",
                        m.value
                    ),
                )
            })?;
    }
    let own = address.unwrap_or(Ipv4Addr::from(LAB_NET + next_host));
    let mask = u32::MAX << (32 - u32::from(interface.prefix_len));
    if let Some(g) = &n.gateway {
        let gw = lab_address(&g.value, &g.referenced, "gateway")?;
        if u32::from(gw) & mask != u32::from(own) & mask || gw == own {
            return Err((
                Some(&g.referenced),
                format!(
                    "node `{name}`: gateway {gw} is not another address on the host's subnet {}/{}",
                    Ipv4Addr::from(u32::from(own) & mask),
                    interface.prefix_len
                ),
            ));
        }
        interface.gateway = Some(gw);
    }
    if let Some(arp) = &n.arp {
        for (ip, mac) in &arp.value {
            let entry = |m: String| (Some(&arp.referenced), format!("node `{name}`: arp `{ip}`: {m}"));
            let ip: Ipv4Addr = ip.parse().map_err(|_| entry("expected an IPv4 address".into()))?;
            lab_host_address(ip).map_err(entry)?;
            let mac = intlab_switch::config::parse_mac(mac)
                .ok_or_else(|| entry(format!("`{mac}` is not a MAC such as 08:00:00:00:01:00")))?;
            interface.arp.push((ip, mac));
        }
    }
    Ok((address, interface))
}

/// Checks that `ip` can be a host's (or gateway's) address: in the lab's range, or private
/// (RFC 1918, as the p4lang tutorials write theirs). Either lives only inside the lab's
/// namespaces, which have no way out to a real network.
fn lab_host_address(ip: Ipv4Addr) -> Result<(), String> {
    if ip.is_private() {
        return Ok(());
    }
    if !super::in_lab_range(ip) {
        return Err(format!(
            "{ip} is outside the lab's 198.18.0.0/15 and the private ranges (10/8, 172.16/12, 192.168/16)"
        ));
    }
    if u32::from(ip) == LAB_NET || u32::from(ip) == LAB_NET | !LAB_MASK {
        return Err(format!("{ip} is the network's own or its broadcast address, no host's"));
    }
    Ok(())
}

/// Adds what the YAML parser's own words leave unsaid, and drops what speaks to its callers.
/// Deserializes `text` (YAML from `file`), with the error's line, column and a hint.
pub(crate) fn parse_yaml<T: serde::de::DeserializeOwned>(text: &str, file: &Path) -> Result<T, LoadError> {
    serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        LoadError {
            file: file.to_owned(),
            line,
            column,
            message: with_hint(first_line(&e.to_string())),
        }
    })
}

fn with_hint(m: String) -> String {
    if m.contains("block mapping") || m.contains("block sequence") || m.contains("mapping values") {
        format!("{m} (expected the indentation of the lines above)")
    } else if m.starts_with("cannot deserialize null into") {
        "expected a value, got none".to_owned()
    } else if let Some(rest) = m.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest);
        format!("`{key}` is given twice: expected each name once")
    } else {
        m
    }
}

/// Longest node or scenario name: it goes into namespace and file names.
pub(super) const MAX_NAME: usize = 32;
/// Slowest and fastest link: INT carries the line rate in kb/s in 32 bits.
const MIN_RATE_BPS: u64 = 1_000;
const MAX_RATE_BPS: u64 = u32::MAX as u64 * 1_000;
/// The smallest useful buffer: one full-size Ethernet frame (1500 B IP + 18 B Ethernet).
const MIN_BUFFER: u64 = 1518;

/// A line rate INT can report.
fn check_rate(rate: Rate) -> Result<(), String> {
    match (MIN_RATE_BPS..=MAX_RATE_BPS).contains(&rate.bps()) {
        true => Ok(()),
        false => Err(format!(
            "rate {rate}: expected 1 kb/s to 4.29 Tb/s (INT reports line rate in kb/s in 32 bits)"
        )),
    }
}

/// A buffer that holds a full-size frame.
fn check_buffer(buffer: Bytes) -> Result<(), String> {
    match buffer.0 >= MIN_BUFFER {
        true => Ok(()),
        false => Err(format!(
            "buffer {} B holds no full-size Ethernet frame ({MIN_BUFFER} B): every data packet would be dropped",
            buffer.0
        )),
    }
}

/// Link keys to set on a link that exists (a scenario's `events:`, `intlab link set`): any of
/// a link's keys but `endpoints`, as written under `links:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct LinkKeys(RawLink);

impl LinkKeys {
    /// Reads `KEY=VALUE` words (`delay=50us`, `loss=1% 25%`) as link keys; `origin` names
    /// them in errors.
    pub fn from_words(words: &[String], origin: &Path) -> Result<LinkKeys, LoadError> {
        let mut yaml = String::new();
        for w in words {
            let (k, v) = w.split_once('=').ok_or_else(|| LoadError {
                file: origin.to_owned(),
                line: 0,
                column: 0,
                message: format!("`{w}`: expected KEY=VALUE, e.g. delay=50us"),
            })?;
            yaml.push_str(&format!("{}: {}\n", k.trim(), v.trim()));
        }
        parse_yaml(&yaml, origin)
    }

    /// The link `props` with these keys set, and the change that makes it so; `ends` are the
    /// link's two nodes (index, name), which `towards` names one of. Impairment keys replace the
    /// link's impairments whole, as `tc qdisc change ... netem` does: a key not given is off
    /// afterwards.
    pub fn apply(
        &self,
        props: &LinkProps,
        ends: [(usize, &str); 2],
    ) -> Result<(LinkProps, intlab_switch::LinkChange), String> {
        let k = &self.0;
        if k.endpoints.is_some() {
            return Err("`endpoints`: a link's ends cannot change".into());
        }
        let mut new = *props;
        let mut change = intlab_switch::LinkChange::default();
        if let Some(rate) = k.rate {
            check_rate(rate)?;
            new.rate = rate;
            change.rate = Some(rate);
        }
        if let Some(delay) = k.delay {
            new.delay = delay;
            change.delay = Some(delay);
        }
        if let Some(buffer) = k.buffer {
            check_buffer(buffer)?;
            new.buffer = buffer;
            change.buffer = Some(buffer);
        }
        if let Some(ecn) = k.ecn {
            let ecn = ecn.resolve().map_err(|m| format!("ecn: {m}"))?;
            new.ecn = Some(ecn);
            change.ecn = Some(Some(ecn));
        }
        let no_defaults = RawLink::default();
        let keys = k.netem(&no_defaults);
        let given = [keys.jitter, keys.loss, keys.duplicate, keys.corrupt, keys.reorder]
            .iter()
            .any(Option::is_some)
            || keys.distribution.is_some()
            || keys.gap.is_some();
        if given {
            new.impair = keys
                .resolve(new.delay)
                .map_err(|e| format!("{} (line {}): {}", e.key, e.line, e.message))?;
            new.impair_towards = None;
            change.impair = Some(new.impair);
        }
        if let Some(to) = &k.towards {
            let (n, _) = ends.iter().find(|(_, name)| *name == to.value).ok_or_else(|| {
                format!(
                    "towards `{}`: expected one of the link's ends ({}, {})",
                    to.value, ends[0].1, ends[1].1
                )
            })?;
            new.impair_towards = Some(*n);
            change.impair = Some(new.impair);
        }
        if change == intlab_switch::LinkChange::default() {
            return Err(
                "no key to set (rate, delay, buffer, ecn, jitter, distribution, loss, duplicate, corrupt, reorder, gap, towards)"
                    .into(),
            );
        }
        Ok((new, change))
    }
}

/// Checks a name that becomes part of file and namespace names: 1 to `max` letters, digits,
/// `-`, `_` and `.`, not starting with `-` or `.`.
pub(crate) fn plain_name(name: &str, max: usize) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > max {
        return Err(format!("`{name}`: expected 1 to {max} characters"));
    }
    if let Some(c) = name.chars().find(|&c| !ok_char(c)) {
        return Err(format!(
            "`{name}`: `{c}` is not allowed (letters, digits, -, _ and . only)"
        ));
    }
    if name.starts_with(['-', '.']) {
        return Err(format!("`{name}`: expected a letter, digit or _ first"));
    }
    Ok(())
}

/// Checks an interface name as Linux takes it: at most 15 bytes, and not `lo`.
fn interface_name(name: &str) -> Result<(), String> {
    plain_name(name, 15).map_err(|m| format!("interface {m}"))?;
    if name == "lo" {
        return Err("interface `lo`: that is every namespace's loopback".into());
    }
    Ok(())
}

/// What a serde-saphyr message says, without the source snippet after its first line and the
/// "error: line L column C: " before it (the caller prints the position itself).
pub(crate) fn first_line(m: &str) -> String {
    let line = m.lines().next().unwrap_or(m);
    let bare = line.strip_prefix("error: ").unwrap_or(line);
    match bare.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((position, rest)) if position.contains(" column ") => rest.to_owned(),
        _ => bare.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INCAST: &str = "\
name: incast
defaults:
  link: { rate: 100Mbps, delay: 200us, buffer: 1MB }
nodes:
  s1: { kind: switch }
  h1: { kind: host }
  h2: { kind: host }
  h3: { kind: host, address: 198.18.7.7 }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
  - endpoints: [\"s1:eth2\", \"h2:eth0\"]
    rate: 1Gbps
  - endpoints: [\"s1:eth3\", \"h3:eth0\"]
";

    fn load(text: &str) -> Result<Topology, LoadError> {
        load_str(text, Path::new("t.yaml"))
    }

    #[test]
    fn loads_with_defaults_overrides_and_addresses() {
        let t = load(INCAST).unwrap();
        assert_eq!(
            t.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["s1", "h1", "h2", "h3"]
        );
        assert_eq!(t.nodes[1].address, Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(t.nodes[3].address, Some(Ipv4Addr::new(198, 18, 7, 7)));
        assert_eq!(t.links[0].props.rate, Rate(100_000_000));
        assert_eq!(t.links[1].props.rate, Rate(1_000_000_000));
        assert_eq!(t.links[2].props.delay, Nanos(200_000));
    }

    #[test]
    fn a_broken_p4_program_or_runtime_file_stops_the_scenario_with_both_positions() {
        let dir = std::env::temp_dir().join(format!("intlab-p4-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbed/tests/p4");
        let good = std::fs::read_to_string(fixtures.join("forward_dscp.p4")).expect("fixture");
        std::fs::write(
            dir.join("bad.p4"),
            good.replace("ipv4_lpm.apply();", "ipv4_lpm.apply(;"),
        )
        .expect("write");
        std::fs::write(dir.join("good.p4"), &good).expect("write");
        std::fs::write(
            dir.join("bad.json"),
            r#"{"table_entries":[{"table":"LineIngress.nope","action_name":"NoAction"}]}"#,
        )
        .expect("write");
        let scenario = dir.join("s.yaml");
        let with = |p4: &str| INCAST.replace("  s1: { kind: switch }", &format!("  s1: {{ kind: switch, p4: {p4} }}"));
        let e = load_str(&with("{ program: bad.p4 }"), &scenario).unwrap_err();
        let m = e.to_string();
        assert!(e.line == 5 && m.contains("node `s1`: p4:"), "{m}");
        assert!(
            m.contains("bad.p4:") && m.contains("expression expected"),
            "the program's own position: {m}"
        );
        let e = load_str(&with("{ program: good.p4, runtime: bad.json }"), &scenario).unwrap_err();
        assert!(
            e.to_string()
                .contains("bad.json: table_entries[0].table: the program has no table `LineIngress.nope`"),
            "{e}"
        );
        let e = load_str(&with("{ program: good.p4, ports: { eth1: 511 } }"), &scenario).unwrap_err();
        assert!(e.to_string().contains("511"), "{e}");
        let t = load_str(&with("{ program: good.p4 }"), &scenario).expect("a good program loads");
        assert_eq!(
            t.nodes[0].p4.as_ref().map(|p| p.spec.program.clone()),
            Some(dir.join("good.p4"))
        );
        std::fs::remove_dir_all(&dir).expect("temp dir removed");
    }

    fn error(text: &str) -> LoadError {
        let e = load(text).unwrap_err();
        assert!(e.line > 0 && e.column > 0, "no position: {e}");
        e
    }

    #[test]
    fn mistakes_name_file_line_column_and_expectation() {
        let e = error(&INCAST.replace("\"s1:eth3\", \"h3:eth0\"", "\"s1:eth3\", \"h9:eth0\""));
        assert_eq!(e.line, 13);
        assert!(e.message.contains("no node `h9`"), "{e}");
        assert!(e.to_string().starts_with("t.yaml:13:"), "{e}");
        let e = error(&INCAST.replace("rate: 1Gbps", "rate: -1Gbps"));
        assert!(e.message.contains("rate"), "{e}");
        let e = error(&INCAST.replace("address: 198.18.7.7", "address: 198.18.0.1"));
        assert!(e.message.contains("duplicate address 198.18.0.1"), "{e}");
        let e = error(&INCAST.replace("  h2: { kind: host }", "  h2: { kind: host, colour: red }"));
        assert!(e.message.contains("colour"), "{e}");
        let e = error(&INCAST.replace(
            "  - endpoints: [\"s1:eth2\", \"h2:eth0\"]\n    rate: 1Gbps",
            "  - endpoints: [\"s1:eth2\", \"h2:eth0\"]\n      rate: 1Gbps",
        ));
        assert!(e.line >= 11, "bad indentation: {e}");
        let e = error(&INCAST.replace("address: 198.18.7.7", "address: 192.0.2.1"));
        assert!(e.message.contains("outside the lab"), "{e}");
    }

    #[test]
    fn the_pfc_watchdog_is_on_by_default_and_its_keys_are_checked_where_written() {
        let with = |pfc: &str| INCAST.replace("nodes:", &format!("pfc: {pfc}\nnodes:"));
        let watchdog = |pfc: &str| load(&with(pfc)).unwrap().pfc.expect("PFC on").watchdog;
        let default = intlab_switch::tm::PfcWatchdog::default();
        assert_eq!(watchdog("{}"), Some(default));
        assert_eq!(
            watchdog("{ watchdog: { detect: 5ms } }"),
            Some(intlab_switch::tm::PfcWatchdog {
                detect_ns: 5_000_000,
                ..default
            })
        );
        assert_eq!(watchdog("{ watchdog: { enabled: false } }"), None);
        let e = error(&with("{ watchdog: { detect: 0ms } }"));
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("detect"), "{e}");
        let e = error(&with("{ watchdog: { restor: 1ms } }"));
        assert!(e.message.contains("restor"), "{e}");
    }

    #[test]
    fn a_switch_may_set_its_own_buffer_pfc_and_classes_and_its_hosts_follow_it() {
        let text = INCAST.replace("nodes:", "mmu: { shared: 1MB }\npfc: {}\nnodes:").replace(
            "  s1: { kind: switch }",
            "  s1: { kind: switch, mmu: { shared: 4MB }, pfc: { enabled: false }, priorities: { dscp: { 26: 5 } } }",
        );
        let t = load(&text).unwrap_or_else(|e| panic!("{e}"));
        let s1 = t.node("s1").expect("s1");
        assert_eq!(t.mmu_of(s1).and_then(|m| m.shared), Some(4_000_000), "its own buffer");
        assert!(
            t.pfc_of(s1).is_none(),
            "PFC off on s1 although the scenario turns it on"
        );
        assert!(!t.any_pfc(), "no switch runs PFC");
        assert_eq!(t.priorities_of(s1).map.of_dscp(26), 5);
        let h1 = t.node("h1").expect("h1");
        assert_eq!(t.switch_of(h1), Some(s1));
        // Without its own keys a switch takes the scenario's.
        let plain = load(&INCAST.replace("nodes:", "mmu: { shared: 1MB }\npfc: {}\nnodes:")).expect("valid");
        assert_eq!(plain.mmu_of(s1).and_then(|m| m.shared), Some(1_000_000));
        assert!(plain.pfc_of(s1).is_some() && plain.any_pfc());
        // Hosts have none of them, and bad values are refused where written.
        let host = INCAST.replace("  h1: { kind: host }", "  h1: { kind: host, pfc: {} }");
        let e = load(&host).expect_err("a host with pfc");
        assert!(
            e.message
                .contains("node `h1`: mmu, pfc and priorities belong to switches"),
            "{e}"
        );
        let bad = INCAST.replace("  s1: { kind: switch }", "  s1: { kind: switch, mmu: { alpha: 0 } }");
        let e = load(&bad).expect_err("alpha 0");
        assert!(e.message.starts_with("node `s1`: mmu:") && e.line > 0, "{e}");
    }

    #[test]
    fn priorities_map_dscps_and_choose_a_scheduler_checked_where_written() {
        use intlab_switch::tm::Scheduler;
        let with = |p: &str| INCAST.replace("nodes:", &format!("priorities: {p}\nnodes:"));
        let t = load(&with(
            "{ dscp: { 26: 5 }, scheduler: dwrr, weights: [1, 1, 1, 1, 1, 4, 1, 1] }",
        ))
        .unwrap();
        assert_eq!((t.priorities.map.of_dscp(26), t.priorities.map.of_dscp(48)), (5, 6));
        let mut weights = [1; 8];
        weights[5] = 4;
        assert_eq!(t.priorities.scheduler, Scheduler::Dwrr { weights });
        assert_eq!(load(INCAST).unwrap().priorities.scheduler, Scheduler::Strict);
        for (bad, says) in [
            ("{ dscp: { 64: 1 } }", "not a DSCP"),
            ("{ dscp: { 26: 8 } }", "not a priority"),
            ("{ scheduler: dwrr, weights: [1, 2] }", "8 weights"),
            ("{ scheduler: dwrr, weights: [1, 1, 1, 0, 1, 1, 1, 1] }", "8 weights"),
            ("{ weights: [1, 1, 1, 1, 1, 1, 1, 1] }", "only for"),
            ("{ scheduler: wfq }", "wfq"),
        ] {
            let e = error(&with(bad));
            assert_eq!(e.line, 4, "{bad}: {e}");
            assert!(e.message.contains(says), "{bad}: {e}");
        }
    }

    /// The tutorials' way of addressing a host: its own subnet, MAC, gateway and ARP entry.
    const TUTORIAL_HOST: &str = "h3: { kind: host, address: 198.18.3.3/24, mac: \"08:00:00:00:03:33\", \
        gateway: 198.18.3.30, arp: { 198.18.3.30: \"08:00:00:00:02:00\" } }";

    #[test]
    fn a_host_may_state_its_subnet_mac_gateway_and_neighbours() {
        let t = load(&INCAST.replace("h3: { kind: host, address: 198.18.7.7 }", TUTORIAL_HOST)).unwrap();
        let h3 = t.nodes[3].interface.as_ref().expect("a host's interface");
        assert_eq!(t.nodes[3].address, Some(Ipv4Addr::new(198, 18, 3, 3)));
        assert_eq!(h3.prefix_len, 24);
        assert_eq!(h3.mac, MacAddress([8, 0, 0, 0, 3, 0x33]));
        assert_eq!(h3.gateway, Some(Ipv4Addr::new(198, 18, 3, 30)));
        assert_eq!(
            h3.arp,
            [(Ipv4Addr::new(198, 18, 3, 30), MacAddress([8, 0, 0, 0, 2, 0]))]
        );
        assert!(h3.is_explicit());
        let h1 = t.nodes[1].interface.as_ref().expect("a host's interface");
        assert_eq!(
            (h1.prefix_len, h1.mac),
            (LAB_PREFIX_LEN, MacAddress([2, 0x1b, 0, 0, 0, 0]))
        );
        assert!(!h1.is_explicit() && t.nodes[0].interface.is_none());
    }

    #[test]
    fn a_bad_subnet_mac_gateway_or_neighbour_is_refused_where_written() {
        let with = |from: &str, to: &str| {
            let e = error(&INCAST.replace(
                "h3: { kind: host, address: 198.18.7.7 }",
                &TUTORIAL_HOST.replace(from, to),
            ));
            assert_eq!(e.line, 8, "{e}");
            e.message
        };
        assert!(with("/24", "/8").contains("prefix length from 15"));
        assert!(with("08:00:00:00:03:33", "09:00:00:00:03:33").contains("unicast MAC"));
        assert!(with("08:00:00:00:03:33", "02:1b:00:00:00:00").contains("duplicate MAC 02:1b:00:00:00:00 (also `h1`)"));
        assert!(
            with("gateway: 198.18.3.30", "gateway: 198.18.4.30")
                .contains("not another address on the host's subnet 198.18.3.0/24")
        );
        assert!(with("gateway: 198.18.3.30", "gateway: 192.0.2.30").contains("outside the lab"));
        assert!(with("{ 198.18.3.30:", "{ 192.0.2.30:").contains("arp `192.0.2.30`: 192.0.2.30 is outside the lab"));
        assert!(with("\"08:00:00:00:02:00\"", "nope").contains("`nope` is not a MAC"));
        let e = error(&INCAST.replace(
            "s1: { kind: switch }",
            "s1: { kind: switch, mac: \"08:00:00:00:00:01\" }",
        ));
        assert!(e.message.contains("a switch has no address, mac or gateway"), "{e}");
    }
}
