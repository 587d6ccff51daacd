//! A p4lang tutorials topology (`topology.json`: hosts with `ip`, `mac` and shell `commands`,
//! switches with their `runtime_json` or `cli_input`, links `[a, b, latency, Mb/s]` with
//! `sN-pK` switch ports) turned into an intlab scenario that runs a given P4 program.
//!
//! Host addresses outside the lab's range move into it keeping their last two bytes
//! (10.0.1.1 becomes 198.18.1.1), in the host settings and in the copies of the switches'
//! runtime and command files written beside the scenario, so the tables still match.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Component, Path, PathBuf};

use intlab_switch::units::{Nanos, Rate};
use serde::Deserialize;
use serde_json::Value;

/// What [`import`] wrote.
#[derive(Debug)]
pub struct Imported {
    /// The scenario file.
    pub scenario: PathBuf,
    /// The runtime and command files written beside it.
    pub tables: Vec<PathBuf>,
    /// What the scenario does not carry over (host commands, switch keys), one line each.
    pub warnings: Vec<String>,
}

/// A topology that could not be converted.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct ImportError {
    /// The file at fault.
    pub file: PathBuf,
    /// Where in it (a JSON path or line) and what was expected.
    pub message: String,
}

/// Writing to a `String` cannot fail.
const STRING_WRITE: &str = "writing to a String";

/// The rate of a link that names no bandwidth: Mininet leaves such a link unlimited, and the
/// lab needs one.
pub const DEFAULT_RATE: &str = "1Gbps";

#[derive(Debug, Deserialize)]
struct TutorialTopology {
    hosts: BTreeMap<String, TutorialHost>,
    switches: BTreeMap<String, BTreeMap<String, Value>>,
    links: Vec<Vec<Value>>,
}

#[derive(Debug, Deserialize)]
struct TutorialHost {
    ip: String,
    mac: String,
    #[serde(default)]
    commands: Vec<String>,
}

/// A host as the scenario will state it.
#[derive(Debug, Default)]
struct HostSettings {
    address: String,
    mac: String,
    gateway: Option<Ipv4Addr>,
    arp: Vec<(Ipv4Addr, String)>,
}

/// Where addresses outside the lab go: `a.b.x.y` to `198.18.x.y` for the one `a.b` the
/// hosts share; or, keeping them, private addresses stay as written.
#[derive(Debug, Clone, Copy)]
struct AddressMove {
    from: Option<[u8; 2]>,
    keep_private: bool,
}

impl AddressMove {
    /// The address in the lab, or `None` when it is neither in the lab nor in the moved /16.
    fn apply(self, ip: Ipv4Addr) -> Option<Ipv4Addr> {
        if super::in_lab_range(ip) || (self.keep_private && ip.is_private()) {
            return Some(ip);
        }
        let o = ip.octets();
        (self.from == Some([o[0], o[1]])).then(|| Ipv4Addr::new(198, 18, o[2], o[3]))
    }

    /// `text` with every IPv4 address of the moved /16 replaced, leaving the rest as written.
    fn in_text(self, text: &str) -> String {
        let Some(from) = self.from else { return text.to_owned() };
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while !rest.is_empty() {
            let start = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
            out.push_str(&rest[..start]);
            rest = &rest[start..];
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            match word.parse::<Ipv4Addr>() {
                Ok(ip) if ip.octets()[..2] == from => {
                    let o = ip.octets();
                    write!(out, "198.18.{}.{}", o[2], o[3]).expect(STRING_WRITE);
                }
                _ => out.push_str(word),
            }
            rest = &rest[end..];
        }
        out
    }
}

/// Reads `topology` (a tutorials-style file), writes a scenario to `out` whose switches run
/// `program` (or the one `per_switch` gives a switch by name), with the runtime or command
/// files it names moved into the lab's addresses beside `out` (unless `keep_addresses`, and
/// they are private: then they stay as written). `name` is the scenario's name (default:
/// `out`'s file stem).
pub fn import(
    topology: &Path,
    program: &Path,
    per_switch: &BTreeMap<String, PathBuf>,
    out: &Path,
    name: Option<&str>,
    keep_addresses: bool,
) -> Result<Imported, ImportError> {
    let text = std::fs::read_to_string(topology).map_err(|e| failed(topology, e.to_string()))?;
    let topo: TutorialTopology = serde_json::from_str(&text)
        .map_err(|e| failed(topology, format!("line {} column {}: {e}", e.line(), e.column())))?;
    for p in std::iter::once(program).chain(per_switch.values().map(PathBuf::as_path)) {
        if !p.is_file() {
            return Err(failed(p, "no such P4 program".into()));
        }
    }
    if let Some(s) = per_switch.keys().find(|s| !topo.switches.contains_key(*s)) {
        let known: Vec<&str> = topo.switches.keys().map(String::as_str).collect();
        return Err(failed(
            topology,
            format!(
                "a program is given for switch `{s}`, which is not in `switches` ({})",
                known.join(", ")
            ),
        ));
    }
    let out_dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(out_dir).map_err(|e| failed(out_dir, e.to_string()))?;
    let name = match name {
        Some(n) => n.to_owned(),
        None => out
            .file_stem()
            .map_or("imported".into(), |s| s.to_string_lossy().into_owned()),
    };
    let moved = address_move(&topo, keep_addresses).map_err(|m| failed(topology, m))?;
    let mut warnings = Vec::new();

    let mut hosts = BTreeMap::new();
    for (h, host) in &topo.hosts {
        let settings = host_settings(h, host, moved, &mut warnings).map_err(|m| failed(topology, m))?;
        hosts.insert(h.clone(), settings);
    }

    let (links, ports) = tutorial_links(&topo, topology)?;
    let (switches, tables) = switch_files(&topo, topology, program, per_switch, out_dir, moved, &mut warnings)?;
    let program_ref = |p: &Path| path_from(out_dir, p).map_err(|m| failed(p, m));
    let gathered = Gathered {
        hosts,
        switches,
        ports,
        links,
        warnings,
    };
    let y = scenario_yaml(&gathered, &name, topology, moved, |s| {
        program_ref(per_switch.get(s).map_or(program, PathBuf::as_path))
    })?;
    std::fs::write(out, &y).map_err(|e| failed(out, e.to_string()))?;
    // The scenario must load as written, programs and tables included.
    super::load_str(&y, out).map_err(|e| failed(out, format!("the scenario written does not load: {e}")))?;
    Ok(Imported {
        scenario: out.to_owned(),
        tables,
        warnings: gathered.warnings,
    })
}

/// A link's two ends as the scenario names them, its rate and its delay.
type TutorialLink = ([String; 2], String, Nanos);

/// Each switch's ports by interface name.
type SwitchPorts = BTreeMap<String, BTreeMap<String, u16>>;

/// An error in `file`.
fn failed(file: &Path, message: String) -> ImportError {
    ImportError {
        file: file.to_owned(),
        message,
    }
}

/// The links of `topo` (read from `topology`), and the switch ports they use: a host's end is
/// its eth0; a switch's `sN-pK` is its port eth<K>, P4 port K.
fn tutorial_links(topo: &TutorialTopology, topology: &Path) -> Result<(Vec<TutorialLink>, SwitchPorts), ImportError> {
    let mut ports: BTreeMap<String, BTreeMap<String, u16>> = BTreeMap::new();
    let mut links = Vec::new();
    for (i, link) in topo.links.iter().enumerate() {
        let at = |m: String| failed(topology, format!("links[{i}]: {m}"));
        let mut end = |k: usize| -> Result<String, ImportError> {
            let v = link.get(k).and_then(Value::as_str).ok_or_else(|| {
                at("expected [node, node, latency, bandwidth] with node names such as \"h1\" or \"s1-p2\"".into())
            })?;
            if topo.hosts.contains_key(v) {
                return Ok(format!("{v}:eth0"));
            }
            let (sw, port) = v
                .split_once("-p")
                .and_then(|(s, p)| Some((s, p.parse::<u16>().ok()?)))
                .filter(|(s, p)| topo.switches.contains_key(*s) && *p < intlab_p4::exec::DROP_PORT)
                .ok_or_else(|| {
                    at(format!(
                        "`{v}` is neither a host nor a switch port `sN-pK` of a listed switch"
                    ))
                })?;
            ports
                .entry(sw.to_owned())
                .or_default()
                .insert(format!("eth{port}"), port);
            Ok(format!("{sw}:eth{port}"))
        };
        let ends = [end(0)?, end(1)?];
        let delay = match link.get(2) {
            None | Some(Value::Null) => Nanos(0),
            Some(Value::Number(ms)) => ms
                .as_f64()
                .and_then(|ms| Nanos::parse(&format!("{ms}ms")))
                .ok_or_else(|| at(format!("latency {ms}: expected milliseconds")))?,
            // Mininet hands a string to tc as it is, and tc reads a bare number as
            // microseconds (the tutorials' mri and ecn topologies write "0").
            Some(Value::String(s)) => match s.trim().parse::<f64>() {
                Ok(us) if us >= 0.0 => Nanos((us * 1_000.0).round() as u64),
                _ => Nanos::parse(s).ok_or_else(|| at(format!("latency `{s}`: expected e.g. \"2ms\"")))?,
            },
            Some(v) => return Err(at(format!("latency {v}: expected e.g. \"2ms\""))),
        };
        let rate = match link.get(3) {
            None | Some(Value::Null) => DEFAULT_RATE.to_owned(),
            Some(Value::Number(mbps)) => {
                let r = format!("{mbps}Mbps");
                Rate::parse(&r).ok_or_else(|| at(format!("bandwidth {mbps}: expected Mb/s above 0")))?;
                r
            }
            Some(v) => return Err(at(format!("bandwidth {v}: expected a number of Mb/s"))),
        };
        links.push((ends, rate, delay));
    }

    Ok((links, ports))
}

/// Each switch's `p4:` keys beyond its program (its runtime or command file, written beside
/// the scenario with its addresses moved, and its CPU port), and the files written.
fn switch_files(
    topo: &TutorialTopology,
    topology: &Path,
    program: &Path,
    per_switch: &BTreeMap<String, PathBuf>,
    out_dir: &Path,
    moved: AddressMove,
    warnings: &mut Vec<String>,
) -> Result<(BTreeMap<String, String>, Vec<PathBuf>), ImportError> {
    let mut tables = Vec::new();
    let mut switches = BTreeMap::new();
    for (s, keys) in &topo.switches {
        let mut p4 = String::new();
        let mut filled = false;
        for (key, value) in keys {
            let file = match (key.as_str(), value.as_str()) {
                ("runtime_json" | "cli_input", Some(f)) => f,
                ("runtime_json" | "cli_input", None) => {
                    return Err(failed(topology, format!("switches.{s}.{key}: expected a file name")));
                }
                ("cpu_port", _) => {
                    let port = value
                        .as_u64()
                        .or_else(|| value.as_str().and_then(|v| v.trim().parse().ok()))
                        .filter(|&p| p < u64::from(intlab_p4::exec::DROP_PORT))
                        .ok_or_else(|| {
                            failed(
                                topology,
                                format!("switches.{s}.cpu_port: {value} is not a port below 511"),
                            )
                        })?;
                    write!(p4, ", cpu_port: {port}").expect(STRING_WRITE);
                    continue;
                }
                ("program", _) if per_switch.contains_key(s) => continue,
                ("program", _) => {
                    warnings.push(format!(
                        "switch {s}: `program` names a compiled BMv2 file; the switch runs {} instead \
                         (`--switch-program {s}=FILE.p4` names its source)",
                        program.display()
                    ));
                    continue;
                }
                _ => {
                    warnings.push(format!("switch {s}: `{key}` is not converted"));
                    continue;
                }
            };
            let source =
                tutorial_file(topology, file).map_err(|m| failed(topology, format!("switches.{s}.{key}: {m}")))?;
            let content = std::fs::read_to_string(&source).map_err(|e| failed(&source, e.to_string()))?;
            let (written, yaml_key) = if key == "runtime_json" {
                let mut json: Value = serde_json::from_str(&content)
                    .map_err(|e| failed(&source, format!("line {} column {}: {e}", e.line(), e.column())))?;
                move_json(&mut json, moved, "").map_err(|m| failed(&source, m))?;
                let text = serde_json::to_string_pretty(&json).map_err(|e| failed(&source, e.to_string()))?;
                (write_beside(out_dir, &format!("{s}-runtime.json"), &text)?, "runtime")
            } else {
                (
                    write_beside(out_dir, &format!("{s}-commands.txt"), &moved.in_text(&content))?,
                    "cli",
                )
            };
            write!(p4, ", {yaml_key}: {}", file_name(&written)).expect(STRING_WRITE);
            tables.push(written);
            filled = true;
        }
        if !filled {
            warnings.push(format!(
                "switch {s}: no runtime_json or cli_input: its tables start empty"
            ));
        }
        switches.insert(s.clone(), p4);
    }

    Ok((switches, tables))
}

/// What an import gathered, to be written as a scenario.
struct Gathered {
    hosts: BTreeMap<String, HostSettings>,
    switches: BTreeMap<String, String>,
    ports: SwitchPorts,
    links: Vec<TutorialLink>,
    warnings: Vec<String>,
}

/// The scenario's text: a comment saying where it came from and what was not converted, then
/// nodes and links; `program_of` gives the program a switch runs, as the scenario names it.
fn scenario_yaml(
    g: &Gathered,
    name: &str,
    topology: &Path,
    moved: AddressMove,
    program_of: impl Fn(&str) -> Result<PathBuf, ImportError>,
) -> Result<String, ImportError> {
    let Gathered {
        hosts,
        switches,
        ports,
        links,
        warnings,
    } = g;
    let mut y = String::new();
    writeln!(
        y,
        "# Imported by `intlab import p4-topology` from {}.",
        topology.display()
    )
    .expect(STRING_WRITE);
    if let Some([a, b]) = moved.from {
        writeln!(
            y,
            "# Addresses moved into the lab's range: {a}.{b}.X.Y is 198.18.X.Y here and in the table files."
        )
        .expect(STRING_WRITE);
    }
    writeln!(
        y,
        "# Links without a bandwidth run at {DEFAULT_RATE} (Mininet leaves them unlimited)."
    )
    .expect(STRING_WRITE);
    for w in warnings {
        writeln!(y, "# Not converted: {w}").expect(STRING_WRITE);
    }
    writeln!(y, "name: {name}").expect(STRING_WRITE);
    writeln!(y, "nodes:").expect(STRING_WRITE);
    for (h, s) in hosts {
        write!(y, "  {h}: {{ kind: host, address: {}, mac: \"{}\"", s.address, s.mac).expect(STRING_WRITE);
        if let Some(g) = s.gateway {
            write!(y, ", gateway: {g}").expect(STRING_WRITE);
        }
        if !s.arp.is_empty() {
            let entries: Vec<String> = s.arp.iter().map(|(ip, mac)| format!("{ip}: \"{mac}\"")).collect();
            write!(y, ", arp: {{ {} }}", entries.join(", ")).expect(STRING_WRITE);
        }
        writeln!(y, " }}").expect(STRING_WRITE);
    }
    for (s, tables) in switches {
        let port_list: Vec<String> = ports
            .get(s)
            .map(|p| p.iter().map(|(i, n)| format!("{i}: {n}")).collect())
            .unwrap_or_default();
        writeln!(
            y,
            "  {s}: {{ kind: switch, p4: {{ program: {}{tables}, ports: {{ {} }} }} }}",
            program_of(s)?.display(),
            port_list.join(", ")
        )
        .expect(STRING_WRITE);
    }
    writeln!(y, "links:").expect(STRING_WRITE);
    for ([a, b], rate, delay) in links {
        writeln!(
            y,
            "  - {{ endpoints: [\"{a}\", \"{b}\"], rate: {rate}, delay: {} }}",
            duration(*delay)
        )
        .expect(STRING_WRITE);
    }
    Ok(y)
}

/// The /16 the hosts' addresses move from, when they are outside the lab.
fn address_move(topo: &TutorialTopology, keep_private: bool) -> Result<AddressMove, String> {
    let mut from: Option<[u8; 2]> = None;
    for (h, host) in &topo.hosts {
        let ip = host_ip(h, &host.ip)?.0;
        if (AddressMove {
            from: None,
            keep_private,
        })
        .apply(ip)
        .is_some()
        {
            continue;
        }
        if keep_private {
            return Err(format!(
                "hosts.{h}.ip: {ip} is not a private address (10/8, 172.16/12, 192.168/16), which a lab keeps"
            ));
        }
        let o = ip.octets();
        match from {
            None => from = Some([o[0], o[1]]),
            Some(f) if f == [o[0], o[1]] => {}
            Some([a, b]) => {
                return Err(format!(
                    "hosts.{h}.ip: {ip} is outside {a}.{b}.0.0/16, where the other hosts are: addresses move into the lab's 198.18.0.0/15 keeping their last two bytes, so they must share the first two"
                ));
            }
        }
    }
    Ok(AddressMove { from, keep_private })
}

fn host_ip(h: &str, ip: &str) -> Result<(Ipv4Addr, Option<u8>), String> {
    let (addr, len) = match ip.split_once('/') {
        Some((a, l)) => (
            a,
            Some(
                l.parse::<u8>()
                    .map_err(|_| format!("hosts.{h}.ip: `{ip}`: bad prefix length"))?,
            ),
        ),
        None => (ip, None),
    };
    let addr = addr
        .parse()
        .map_err(|_| format!("hosts.{h}.ip: `{ip}`: expected an IPv4 address such as 10.0.1.1/24"))?;
    Ok((addr, len))
}

/// A host's settings: its address and MAC, and what its shell commands set up (a default
/// gateway, static ARP entries); any other command is reported, not run.
fn host_settings(
    h: &str,
    host: &TutorialHost,
    moved: AddressMove,
    warnings: &mut Vec<String>,
) -> Result<HostSettings, String> {
    let (ip, len) = host_ip(h, &host.ip)?;
    let lab = |ip: Ipv4Addr, what: &str| {
        moved
            .apply(ip)
            .ok_or_else(|| format!("hosts.{h}: {what} {ip} cannot move into the lab's range with the hosts' addresses"))
    };
    let mut s = HostSettings {
        address: match len {
            Some(l) => format!("{}/{l}", lab(ip, "address")?),
            None => lab(ip, "address")?.to_string(),
        },
        mac: host.mac.clone(),
        ..HostSettings::default()
    };
    for (k, cmd) in host.commands.iter().enumerate() {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let at = |m: &str| format!("hosts.{h}.commands[{k}]: `{cmd}`: {m}");
        let ip_word = |w: Option<&&str>| -> Result<Ipv4Addr, String> {
            let w = w.ok_or_else(|| at("expected an address"))?;
            let ip = w.parse().map_err(|_| at(&format!("`{w}` is not an IPv4 address")))?;
            lab(ip, "address").map_err(|m| at(&m))
        };
        match words.as_slice() {
            ["route", "add", "default", "gw", rest @ ..] | ["ip", "route", "add", "default", "via", rest @ ..] => {
                s.gateway = Some(ip_word(rest.first())?);
            }
            ["arp", rest @ ..] if rest.contains(&"-s") => {
                let i = rest.iter().position(|w| *w == "-s").unwrap_or(0);
                let mac = rest.get(i + 2).ok_or_else(|| at("expected `-s ADDRESS MAC`"))?;
                s.arp.push((ip_word(rest.get(i + 1))?, (*mac).to_owned()));
            }
            ["ip", "neigh" | "neighbor", "add", ip, rest @ ..] => {
                let i = rest
                    .iter()
                    .position(|w| *w == "lladdr")
                    .ok_or_else(|| at("expected `lladdr MAC`"))?;
                let mac = rest.get(i + 1).ok_or_else(|| at("expected `lladdr MAC`"))?;
                s.arp.push((ip_word(Some(ip))?, (*mac).to_owned()));
            }
            _ => warnings.push(format!(
                "host {h}: command `{cmd}` (run it with `intlab exec {h} -- ...`)"
            )),
        }
    }
    Ok(s)
}

/// Every address string of the moved /16 in a runtime file replaced; an lpm prefix shorter
/// than /16 on such an address cannot move and is refused.
fn move_json(v: &mut Value, moved: AddressMove, path: &str) -> Result<(), String> {
    match v {
        Value::String(s) => {
            if let Ok(ip) = s.parse::<Ipv4Addr>()
                && let Some(to) = moved.apply(ip)
            {
                *s = to.to_string();
            }
        }
        Value::Array(items) => {
            if let [Value::String(a), Value::Number(len)] = items.as_slice()
                && let Ok(ip) = a.parse::<Ipv4Addr>()
                && moved.apply(ip) != Some(ip)
                && len.as_u64().is_some_and(|l| l < 16)
            {
                return Err(format!(
                    "{path}: the prefix {a}/{len} is wider than the /16 that moves into the lab's range"
                ));
            }
            for (i, item) in items.iter_mut().enumerate() {
                move_json(item, moved, &format!("{path}[{i}]"))?;
            }
        }
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                move_json(item, moved, &p)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A file the tutorials name relative to the exercise folder, which is the topology's folder
/// or the one above it (`pod-topo/s1-runtime.json` from `exercises/basic`).
fn tutorial_file(topology: &Path, file: &str) -> Result<PathBuf, String> {
    let dir = topology.parent().unwrap_or(Path::new("."));
    let candidates: Vec<PathBuf> = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(file))
        .collect();
    candidates.iter().find(|c| c.is_file()).cloned().ok_or_else(|| {
        let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
        format!("`{file}` not found (looked for {})", tried.join(" and "))
    })
}

/// `d` in the largest unit that writes it whole ("2ms", "150us").
fn duration(d: Nanos) -> String {
    match d.0 {
        0 => "0ms".into(),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

fn write_beside(dir: &Path, name: &str, text: &str) -> Result<PathBuf, ImportError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| ImportError {
        file: path.clone(),
        message: e.to_string(),
    })?;
    Ok(path)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// `target` as a path relative to folder `dir` (both resolved first), so the scenario keeps
/// working when the two move together.
fn path_from(dir: &Path, target: &Path) -> Result<PathBuf, String> {
    let dir = dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let target = target.canonicalize().map_err(|e| e.to_string())?;
    let a: Vec<Component> = dir.components().collect();
    let b: Vec<Component> = target.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel = PathBuf::new();
    for _ in common..a.len() {
        rel.push("..");
    }
    for c in &b[common..] {
        rel.push(c);
    }
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_of_the_moved_range_change_in_text_and_nowhere_else() {
        let m = AddressMove {
            from: Some([10, 0]),
            keep_private: false,
        };
        assert_eq!(
            m.in_text("table_add ipv4_lpm ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 2\nx 10.1.0.1 1.2"),
            "table_add ipv4_lpm ipv4_forward 198.18.2.2/32 => 08:00:00:00:02:22 2\nx 10.1.0.1 1.2"
        );
        assert_eq!(m.apply(Ipv4Addr::new(10, 0, 3, 4)), Some(Ipv4Addr::new(198, 18, 3, 4)));
        assert_eq!(
            m.apply(Ipv4Addr::new(198, 19, 3, 4)),
            Some(Ipv4Addr::new(198, 19, 3, 4))
        );
        assert_eq!(m.apply(Ipv4Addr::new(10, 1, 3, 4)), None);
        let mut j: Value = serde_json::json!({"match": {"hdr.ipv4.dstAddr": ["10.0.1.1", 32]}, "n": "10.0.1.1x"});
        move_json(&mut j, m, "").unwrap();
        assert_eq!(j["match"]["hdr.ipv4.dstAddr"][0], "198.18.1.1");
        assert_eq!(j["n"], "10.0.1.1x");
        let mut wide: Value = serde_json::json!({"m": ["10.0.0.0", 8]});
        assert!(
            move_json(&mut wide, m, "")
                .unwrap_err()
                .contains("m: the prefix 10.0.0.0/8")
        );
    }

    #[test]
    fn latencies_read_as_mininet_hands_them_to_tc() {
        let dir = std::env::temp_dir().join(format!("intlab-tutorial-latency-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbed/tests/p4/forward_dscp.p4");
        let topology = dir.join("topology.json");
        // A number is milliseconds (run_exercise.py appends "ms"); a string goes to tc as it
        // is, which reads a bare number as microseconds.
        std::fs::write(
            &topology,
            r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"},
                          "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22"},
                          "h3": {"ip": "10.0.3.3/24", "mac": "08:00:00:00:03:33"}},
                "switches": {"s1": {}},
                "links": [["h1", "s1-p1", "0", 0.25], ["h2", "s1-p2", "250"], ["h3", "s1-p3", 2]]}"#,
        )
        .expect("write");
        import(&topology, &program, &BTreeMap::new(), &dir.join("s.yaml"), None, false).expect("imports");
        let yaml = std::fs::read_to_string(dir.join("s.yaml")).expect("the scenario");
        for (end, delay) in [
            ("s1:eth1", "delay: 0ms"),
            ("s1:eth2", "delay: 250us"),
            ("s1:eth3", "delay: 2ms"),
        ] {
            let line = yaml.lines().find(|l| l.contains(end)).expect("the link");
            assert!(line.contains(delay), "{line}");
        }
        std::fs::remove_dir_all(&dir).expect("temp dir removed");
    }

    #[test]
    fn kept_addresses_stay_as_written_and_a_cpu_port_becomes_the_switchs() {
        let dir = std::env::temp_dir().join(format!("intlab-tutorial-keep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbed/tests/p4/forward_dscp.p4");
        let topology = dir.join("topology.json");
        let write = |h2: &str| {
            let json = format!(
                r#"{{"hosts": {{"h1": {{"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11",
                                      "commands": ["route add default gw 10.0.1.10 dev eth0"]}},
                              "h2": {{"ip": "{h2}", "mac": "08:00:00:00:02:22"}}}},
                    "switches": {{"s1": {{"cpu_port": "510"}}}},
                    "links": [["h1", "s1-p1"], ["h2", "s1-p2"]]}}"#
            );
            std::fs::write(&topology, json).expect("write");
        };
        write("10.0.2.2/24");
        let out = dir.join("s.yaml");
        let done = import(&topology, &program, &BTreeMap::new(), &out, None, true).expect("imports");
        let yaml = std::fs::read_to_string(&out).expect("the scenario");
        assert!(
            yaml.contains("address: 10.0.1.1/24") && yaml.contains("gateway: 10.0.1.10"),
            "{yaml}"
        );
        assert!(!yaml.contains("198.18."), "{yaml}");
        let s1 = yaml.lines().find(|l| l.starts_with("  s1: ")).expect("s1");
        assert!(s1.contains("cpu_port: 510"), "{s1}");
        assert!(
            !done.warnings.iter().any(|w| w.contains("cpu_port")),
            "{:?}",
            done.warnings
        );
        // Kept, an address outside the private ranges cannot be a lab's.
        write("8.8.8.8/24");
        let e = import(&topology, &program, &BTreeMap::new(), &out, None, true).expect_err("refused");
        assert!(
            e.to_string().contains("hosts.h2.ip: 8.8.8.8 is not a private address"),
            "{e}"
        );
        // Moved as before without the flag.
        write("10.0.2.2/24");
        import(&topology, &program, &BTreeMap::new(), &out, None, false).expect("imports");
        let yaml = std::fs::read_to_string(&out).expect("the scenario");
        assert!(yaml.contains("address: 198.18.1.1/24"), "{yaml}");
        std::fs::remove_dir_all(&dir).expect("temp dir removed");
    }

    #[test]
    fn a_switch_given_its_own_program_runs_it_and_the_others_run_the_default() {
        let dir = std::env::temp_dir().join(format!("intlab-tutorial-programs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbed/tests/p4/forward_dscp.p4");
        let other = Path::new(env!("CARGO_MANIFEST_DIR")).join("../p4/programs/int_transit.p4");
        let topology = dir.join("topology.json");
        // As the firewall exercise: s2 names its own compiled program.
        std::fs::write(
            &topology,
            r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"},
                          "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22"}},
                "switches": {"s1": {}, "s2": {"program": "../basic/build/basic.json"}},
                "links": [["h1", "s1-p1"], ["h2", "s2-p1"], ["s1-p2", "s2-p2"]]}"#,
        )
        .expect("write");
        let out = dir.join("s.yaml");
        let switch_line = |s: &str| {
            let yaml = std::fs::read_to_string(&out).expect("the scenario");
            let prefix = format!("  {s}: ");
            yaml.lines()
                .find(|l| l.starts_with(&prefix))
                .expect("the switch")
                .to_owned()
        };
        let done = import(&topology, &program, &BTreeMap::new(), &out, None, false).expect("imports");
        assert!(switch_line("s2").contains("forward_dscp.p4"), "{}", switch_line("s2"));
        assert!(
            done.warnings.iter().any(|w| w.contains("--switch-program s2=FILE.p4")),
            "{:?}",
            done.warnings
        );
        let per_switch = BTreeMap::from([("s2".to_owned(), other.clone())]);
        let done = import(&topology, &program, &per_switch, &out, None, false).expect("imports");
        assert!(switch_line("s1").contains("forward_dscp.p4"), "{}", switch_line("s1"));
        assert!(switch_line("s2").contains("int_transit.p4"), "{}", switch_line("s2"));
        assert!(
            done.warnings.iter().all(|w| !w.contains("compiled BMv2 file")),
            "{:?}",
            done.warnings
        );
        let per_switch = BTreeMap::from([("s9".to_owned(), other)]);
        let e = import(&topology, &program, &per_switch, &out, None, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("switch `s9`, which is not in `switches` (s1, s2)"), "{e}");
        std::fs::remove_dir_all(&dir).expect("temp dir removed");
    }

    #[test]
    fn a_topology_that_cannot_become_a_lab_is_refused_with_where() {
        let dir = std::env::temp_dir().join(format!("intlab-tutorial-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testbed/tests/p4/forward_dscp.p4");
        let try_import = |json: &str| {
            let topology = dir.join("topology.json");
            std::fs::write(&topology, json).expect("write");
            import(&topology, &program, &BTreeMap::new(), &dir.join("s.yaml"), None, false)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let host = |ip: &str| format!(r#"{{"ip": "{ip}", "mac": "08:00:00:00:01:11"}}"#);
        let two = |a: &str, b: &str, link: &str| {
            format!(
                r#"{{"hosts": {{"h1": {}, "h2": {}}}, "switches": {{"s1": {{}}}}, "links": [["h1", "s1-p1"], {link}]}}"#,
                host(a),
                host(b)
            )
        };
        let e = try_import(&two("10.0.1.1/24", "10.1.2.2/24", r#"["h2", "s1-p2"]"#));
        assert!(e.contains("hosts.h2.ip: 10.1.2.2 is outside 10.0.0.0/16"), "{e}");
        let e = try_import(&two("10.0.1.1/24", "10.0.2.2/24", r#"["h2", "s1-eth2"]"#));
        assert!(
            e.contains("links[1]: `s1-eth2` is neither a host nor a switch port"),
            "{e}"
        );
        let e = try_import(&two("10.0.1.1/24", "10.0.2.2/24", r#"["h2", "s1-p2", "fast"]"#));
        assert!(e.contains("links[1]: latency `fast`"), "{e}");
        let e = try_import(&two("10.0.1.1/24", "10.0.2.2/24", r#"["h2", "s3-p2"]"#));
        assert!(e.contains("`s3-p2`"), "{e}");
        let e = try_import(r#"{"hosts": {}, "switches": {}, "links": [}"#);
        assert!(e.contains("topology.json: line 1 column"), "{e}");
        std::fs::remove_dir_all(&dir).expect("temp dir removed");
    }
}
