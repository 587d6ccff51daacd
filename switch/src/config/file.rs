//! The file `intlab switch` reads (docs/switch.md): its schema, its defaults (the standalone
//! switch's worker and port I/O policy among them) and its resolution into a [`SwitchSpec`],
//! every mistake reported at its line.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::units::{Bytes, Nanos, Rate};

use super::ConfigError;
use super::netem::{NetemKeys, NetemValue};
use super::spec::{ArpMode, CaptureSpec, NextHop, PacketIo, PortIo, PortSpec, Route, SwitchSpec};
use super::values::{parse_mac, parse_prefix};
use super::yaml::{EcnYaml, MmuYaml, P4Yaml, PfcYaml, PrioritiesYaml, yes};

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
    p4_port: Option<u16>,
}

impl RawPort {
    /// Its impairment keys.
    fn netem(&self) -> NetemKeys<'_> {
        NetemKeys {
            jitter: self.jitter.as_ref(),
            distribution: self.distribution.as_ref(),
            loss: self.loss.as_ref(),
            duplicate: self.duplicate.as_ref(),
            corrupt: self.corrupt.as_ref(),
            reorder: self.reorder.as_ref(),
            gap: self.gap.as_ref(),
        }
    }
}

fn default_buffer() -> Bytes {
    Bytes(1_000_000)
}

fn default_mtu() -> u16 {
    1500
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

    /// Port `i` of the file; `names` and `devices` hold the ports' names and devices before it
    /// (with their lines), and get this one's.
    fn port_spec(
        &self,
        i: usize,
        p: RawPort,
        names: &mut HashMap<String, (usize, usize)>,
        devices: &mut HashMap<String, usize>,
    ) -> Result<PortSpec, ConfigError> {
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
        let impair = p.netem().resolve(p.delay).map_err(|e| ConfigError {
            file: self.path.to_owned(),
            line: e.line,
            column: e.column,
            field: format!("ports[{i}].{}", e.key),
            message: e.message,
        })?;
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
        let p4_port = p.p4_port.unwrap_or_else(|| super::default_p4_port(&name, i));
        Ok(PortSpec {
            name,
            io,
            rate: p.rate,
            delay: p.delay,
            buffer: p.buffer,
            mtu: p.mtu,
            ecn,
            int: p.int,
            impair,
            // What arrives from a TAP or veth peer is the peer's to impair (tc on its end).
            impair_inbound: crate::impair::ImpairmentSpec::default(),
            p4_port,
        })
    }

    /// The switch the file describes, every value checked.
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
            ports.push(self.port_spec(i, p, &mut names, &mut devices)?);
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
                super::check_cpu_port(cpu.value, &taken).map_err(|m| self.err(cpu, "p4.cpu_port".into(), m))?;
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
    use crate::config::{EcnSpec, P4RuntimeKey};

    #[test]
    fn p4runtime_defaults_to_the_tutorials_numbering_and_listens_on_loopback_only() {
        let key = P4RuntimeKey::default();
        assert_eq!(key.resolve(2), Ok(("127.0.0.1:50053".parse().expect("address"), 2)));
        let set = P4RuntimeKey {
            address: Some("[::1]:9559".into()),
            device_id: Some(7),
            tls: None,
        };
        assert_eq!(set.resolve(0), Ok(("[::1]:9559".parse().expect("address"), 7)));
        let outside = P4RuntimeKey {
            address: Some("0.0.0.0:9559".into()),
            device_id: None,
            tls: None,
        };
        assert!(outside.resolve(0).is_err_and(|e| e.contains("loopback")));
        let garbage = P4RuntimeKey {
            address: Some("localhost".into()),
            device_id: None,
            tls: None,
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
