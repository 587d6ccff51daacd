//! Loading a topology from YAML, with errors that name the file, line, column and what was
//! expected.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use intlab_switch::config::EcnYaml;
use intlab_switch::units::{Bytes, Nanos, Rate};
use intlab_transport::cc::ControllerConfig;
use serde::Deserialize;

use crate::scenario::raw::{RawAxis, RawRun, RawTransport, RawWorkload};
use serde_saphyr::Spanned;

use super::{Endpoint, Link, LinkProps, Node, NodeKind, RouteOverride, Topology};

/// The lab's address block: 198.18.0.0/15 (benchmarking, RFC 2544).
const LAB_NET: u32 = 0xc612_0000;
const LAB_MASK: u32 = 0xfffe_0000;

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
    name: String,
    #[serde(default)]
    defaults: RawDefaults,
    nodes: BTreeMap<String, Spanned<RawNode>>,
    links: Vec<Spanned<RawLink>>,
    #[serde(default)]
    routes: Vec<Spanned<RawRoute>>,
    // The run's keys, checked by `crate::scenario`.
    #[serde(default)]
    controller: Option<Spanned<ControllerConfig>>,
    #[serde(default)]
    workload: Option<Spanned<RawWorkload>>,
    #[serde(default)]
    duration: Option<Spanned<Nanos>>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    capture: Option<bool>,
    #[serde(default)]
    dilation: Option<Spanned<f64>>,
    #[serde(default)]
    transport: Option<Spanned<RawTransport>>,
    #[serde(default)]
    sweep: Vec<RawAxis>,
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
}

/// A link, or (without endpoints) the defaults of every link. One struct for both: serde's
/// flatten, which could share the properties, loses the position of a bad value.
#[derive(Debug, Default, Deserialize)]
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
    loss: Option<f64>,
}

/// Parses and checks a topology; `file` is only used in errors. A scenario's run keys
/// (controller, workload, ...) are parsed but not checked here.
pub fn load_str(text: &str, file: &Path) -> Result<Topology, LoadError> {
    load_document(text, file).map(|(t, _)| t)
}

/// Parses a whole scenario file: the checked topology and the run's keys as written.
pub(crate) fn load_document(text: &str, file: &Path) -> Result<(Topology, RawRun), LoadError> {
    let raw: RawTopology = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        LoadError {
            file: file.to_owned(),
            line,
            column,
            message: with_hint(first_line(&e.to_string())),
        }
    })?;
    let err = |at: &serde_saphyr::Location, message: String| LoadError {
        file: file.to_owned(),
        line: at.line() as usize,
        column: at.column() as usize,
        message,
    };

    // Nodes in file order (the map is sorted by name; spans give the order).
    let mut raw_nodes: Vec<(&String, &Spanned<RawNode>)> = raw.nodes.iter().collect();
    raw_nodes.sort_by_key(|(_, n)| (n.referenced.line(), n.referenced.column()));
    let mut nodes = Vec::new();
    let mut used: HashMap<Ipv4Addr, String> = HashMap::new();
    let mut next_host = 1u32;
    for (name, n) in &raw_nodes {
        if name.is_empty() || name.contains(':') {
            return Err(err(
                &n.referenced,
                format!("node name `{name}`: expected a name without ':'"),
            ));
        }
        let kind = match n.value.kind {
            RawKind::Host => NodeKind::Host,
            RawKind::Switch => NodeKind::Switch,
        };
        let address = match (kind, &n.value.address) {
            (NodeKind::Switch, Some(a)) => {
                return Err(err(&a.referenced, format!("node `{name}`: switches have no address")));
            }
            (NodeKind::Switch, None) => None,
            (NodeKind::Host, Some(a)) => {
                let ip: Ipv4Addr = a.value.parse().map_err(|_| {
                    err(
                        &a.referenced,
                        format!("node `{name}`: `{}` is not an IPv4 address", a.value),
                    )
                })?;
                if u32::from(ip) & LAB_MASK != LAB_NET {
                    return Err(err(
                        &a.referenced,
                        format!("node `{name}`: {ip} is outside the lab's 198.18.0.0/15"),
                    ));
                }
                Some(ip)
            }
            (NodeKind::Host, None) => {
                let ip = Ipv4Addr::from(LAB_NET + next_host);
                next_host += 1;
                Some(ip)
            }
        };
        if let Some(ip) = address
            && let Some(other) = used.insert(ip, (*name).clone())
        {
            let at = n.value.address.as_ref().map_or(&n.referenced, |a| &a.referenced);
            return Err(err(
                at,
                format!("node `{name}`: duplicate address {ip} (also `{other}`)"),
            ));
        }
        nodes.push(Node {
            name: (*name).clone(),
            kind,
            address,
        });
    }
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();

    let no_defaults = RawLink::default();
    let defaults = match &raw.defaults.link {
        Some(d) if d.value.endpoints.is_some() => {
            return Err(err(&d.referenced, "defaults.link: expected no `endpoints`".into()));
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
        let loss = p.loss.or(defaults.loss).unwrap_or(0.0);
        if !(0.0..1.0).contains(&loss) {
            return Err(err(
                &l.referenced,
                format!("links[{li}]: loss: expected a probability in [0, 1), got {loss}"),
            ));
        }
        let props = LinkProps {
            rate,
            delay: p.delay.or(defaults.delay).unwrap_or(Nanos(0)),
            buffer: p.buffer.or(defaults.buffer).unwrap_or(Bytes(1_000_000)),
            ecn,
            loss,
        };
        let [a, b]: [Endpoint; 2] = ends
            .try_into()
            .map_err(|_| err(&l.referenced, "two endpoints".into()))?;
        links.push(Link { ends: [a, b], props });
    }
    for (i, n) in nodes.iter().enumerate() {
        if n.kind == NodeKind::Host && links.iter().filter(|l| l.ends.iter().any(|e| e.node == i)).count() != 1 {
            let at = &raw.nodes[&n.name].referenced;
            return Err(err(at, format!("host `{}` must have exactly one link", n.name)));
        }
    }
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
    let run = RawRun {
        controller: raw.controller,
        workload: raw.workload,
        duration: raw.duration,
        seed: raw.seed,
        capture: raw.capture,
        dilation: raw.dilation,
        transport: raw.transport,
        sweep: raw.sweep,
    };
    let topology = Topology {
        name: raw.name,
        nodes,
        links,
        routes,
    };
    Ok((topology, run))
}

/// Adds what the YAML parser's own words leave unsaid.
fn with_hint(m: String) -> String {
    if m.contains("block mapping") || m.contains("block sequence") || m.contains("mapping values") {
        format!("{m} (expected the indentation of the lines above)")
    } else {
        m
    }
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
        let e = error(&INCAST.replace("address: 198.18.7.7", "address: 10.0.0.1"));
        assert!(e.message.contains("outside the lab"), "{e}");
    }
}
