//! A scenario: a topology plus everything a run needs (controller, workload, duration, seed,
//! capture, time dilation, transport settings), from one YAML file. The run's keys sit next
//! to the topology's:
//!
//! ```yaml
//! controller: { name: hpcc, eta: 0.95 }
//! workload: { incast: { receiver: h5, size: 2MB } }
//! duration: 10s
//! ```
//!
//! See `docs/scenarios.md` for every key.

mod overrides;
pub(crate) mod raw;

pub use overrides::Overrides;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use intlab_switch::units::Nanos;
use intlab_transport::cc::{ControllerConfig, HpccConfig};
use serde_saphyr::{Location, Spanned};

use crate::lab::TransportSettings;
use crate::topology::{LoadError, NodeKind, Topology, load_document};
use crate::workload::{PlannedFlow, Workload};
use raw::{RawRun, RawWorkload};

/// The scenario `intlab run` uses when given no file: 4-to-1 incast under HPCC.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../topologies/incast-4to1.yaml");
/// The name the default scenario goes by in messages.
pub const DEFAULT_SCENARIO_NAME: &str = "topologies/incast-4to1.yaml (built in)";

/// How long a run may last when the file says nothing (scenario time).
const DEFAULT_DURATION: Nanos = Nanos(60_000_000_000);

/// A checked scenario, in the file's units (before time dilation).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Where it came from, for messages.
    pub file: PathBuf,
    /// The YAML it was read from, command-line changes applied.
    pub text: String,
    /// The network.
    pub topology: Topology,
    /// The controller every flow runs.
    pub controller: ControllerConfig,
    /// The flows.
    pub workload: Workload,
    /// Longest the run may take (scenario time); unfinished flows are reported as such.
    pub duration: Nanos,
    /// Seed of every random draw (switch ECN and loss).
    pub seed: u64,
    /// Write a pcapng per switch port.
    pub capture: bool,
    /// Time dilation D ≥ 1: the lab runs rates / D and delays × D and reports in file units.
    pub dilation: f64,
    /// Transport settings of every host (file units).
    pub transport: TransportSettings,
}

impl Scenario {
    /// Reads and checks `file` with `overrides` applied.
    pub fn load(file: &Path, overrides: &Overrides) -> Result<Scenario, LoadError> {
        let text = std::fs::read_to_string(file).map_err(|e| LoadError {
            file: file.to_owned(),
            line: 0,
            column: 0,
            message: format!("cannot read it: {e}"),
        })?;
        Scenario::from_text(&text, file, overrides)
    }

    /// The built-in default with `overrides` applied.
    pub fn builtin(overrides: &Overrides) -> Result<Scenario, LoadError> {
        Scenario::from_text(DEFAULT_SCENARIO, Path::new(DEFAULT_SCENARIO_NAME), overrides)
    }

    /// Checks scenario `text`; `file` names it in errors.
    pub fn from_text(text: &str, file: &Path, overrides: &Overrides) -> Result<Scenario, LoadError> {
        let (text, file) = if overrides.is_empty() {
            (text.to_owned(), file.to_owned())
        } else {
            let changed = overrides.apply(text).map_err(|message| LoadError {
                file: file.to_owned(),
                line: 0,
                column: 0,
                message,
            })?;
            // Positions now refer to the changed document (written as scenario.yaml).
            let mut name = file.as_os_str().to_owned();
            name.push(" with --cc/--set");
            (changed, PathBuf::from(name))
        };
        let (topology, run) = load_document(&text, &file)?;
        Checker { file: &file }.scenario(text.clone(), topology, run)
    }

    /// Every flow of the workload.
    pub fn flows(&self) -> Vec<PlannedFlow> {
        self.workload.flows()
    }
}

struct Checker<'a> {
    file: &'a Path,
}

impl Checker<'_> {
    fn err(&self, at: &Location, message: String) -> LoadError {
        LoadError {
            file: self.file.to_owned(),
            line: at.line() as usize,
            column: at.column() as usize,
            message,
        }
    }

    fn scenario(&self, text: String, topology: Topology, run: RawRun) -> Result<Scenario, LoadError> {
        let controller = run
            .controller
            .map_or(ControllerConfig::Hpcc(HpccConfig::default()), |c| c.value);
        let workload = match &run.workload {
            Some(w) => self.workload(&topology, w)?,
            None => {
                return Err(LoadError {
                    file: self.file.to_owned(),
                    line: 1,
                    column: 1,
                    message: "no `workload:`: expected one of incast, all_to_all or flows (see docs/scenarios.md)"
                        .into(),
                });
            }
        };
        let duration = match run.duration {
            Some(d) if d.value.0 == 0 => {
                return Err(self.err(&d.referenced, "duration: expected a time above zero".into()));
            }
            Some(d) => d.value,
            None => DEFAULT_DURATION,
        };
        let dilation = match run.dilation {
            Some(d) if !(d.value >= 1.0 && d.value <= 1e6) => {
                return Err(self.err(
                    &d.referenced,
                    format!("dilation: expected a factor from 1 to 1000000, got {}", d.value),
                ));
            }
            Some(d) => d.value,
            None => 1.0,
        };
        let mut transport = TransportSettings::default();
        if let Some(t) = &run.transport {
            if let Some(m) = &t.value.mtu {
                if !(m.value.is_power_of_two() && (256..=4096).contains(&m.value)) {
                    return Err(self.err(
                        &m.referenced,
                        format!(
                            "transport.mtu: expected a RoCE MTU (256, 512, 1024, 2048 or 4096), got {}",
                            m.value
                        ),
                    ));
                }
                transport.mtu = m.value;
            }
            if let Some(a) = &t.value.ack_every {
                if a.value == 0 {
                    return Err(self.err(&a.referenced, "transport.ack_every: expected at least 1".into()));
                }
                transport.ack_every = a.value;
            }
            if let Some(c) = t.value.cnp_interval {
                transport.cnp_interval_ns = c.0;
            }
            if let Some(i) = t.value.int {
                transport.int_mode = i;
            }
        }
        Ok(Scenario {
            file: self.file.to_owned(),
            text,
            topology,
            controller,
            workload,
            duration,
            seed: run.seed.unwrap_or(1),
            capture: run.capture.unwrap_or(false),
            dilation,
            transport,
        })
    }

    fn host(&self, t: &Topology, name: &Spanned<String>, what: &str) -> Result<usize, LoadError> {
        t.node(&name.value)
            .filter(|&n| t.nodes[n].kind == NodeKind::Host)
            .ok_or_else(|| {
                self.err(
                    &name.referenced,
                    format!("{what}: expected the name of a host, got `{}`", name.value),
                )
            })
    }

    fn hosts(&self, t: &Topology, names: &Option<Vec<Spanned<String>>>, what: &str) -> Result<Vec<usize>, LoadError> {
        let Some(names) = names else {
            return Ok(t.hosts().collect());
        };
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for n in names {
            let h = self.host(t, n, what)?;
            if !seen.insert(h) {
                return Err(self.err(&n.referenced, format!("{what}: `{}` is listed twice", n.value)));
            }
            out.push(h);
        }
        Ok(out)
    }

    fn size(&self, s: &Spanned<intlab_switch::units::Bytes>, what: &str) -> Result<u64, LoadError> {
        if s.value.0 == 0 {
            return Err(self.err(&s.referenced, format!("{what}: expected a size above zero")));
        }
        Ok(s.value.0)
    }

    fn count(&self, c: &Option<Spanned<u32>>, what: &str) -> Result<u32, LoadError> {
        match c {
            Some(c) if c.value == 0 => Err(self.err(&c.referenced, format!("{what}: expected at least 1"))),
            Some(c) => Ok(c.value),
            None => Ok(1),
        }
    }

    fn workload(&self, t: &Topology, w: &Spanned<RawWorkload>) -> Result<Workload, LoadError> {
        let workload = match &w.value {
            RawWorkload::Incast(i) => {
                let receiver = self.host(t, &i.receiver, "workload.incast.receiver")?;
                let mut senders = self.hosts(t, &i.senders, "workload.incast.senders")?;
                if i.senders.is_none() {
                    senders.retain(|&h| h != receiver);
                } else if let Some(s) = i.senders.iter().flatten().find(|s| s.value == i.receiver.value) {
                    return Err(self.err(
                        &s.referenced,
                        format!("workload.incast.senders: `{}` is the receiver", s.value),
                    ));
                }
                Workload::Incast {
                    senders,
                    receiver,
                    flows_per_sender: self.count(&i.flows_per_sender, "workload.incast.flows_per_sender")?,
                    size: self.size(&i.size, "workload.incast.size")?,
                    stagger_ns: i.stagger.map_or(0, |s| s.0),
                    kind: i.kind,
                }
            }
            RawWorkload::AllToAll(a) => Workload::AllToAll {
                hosts: self.hosts(t, &a.hosts, "workload.all_to_all.hosts")?,
                flows_per_pair: self.count(&a.flows_per_pair, "workload.all_to_all.flows_per_pair")?,
                size: self.size(&a.size, "workload.all_to_all.size")?,
                stagger_ns: a.stagger.map_or(0, |s| s.0),
                kind: a.kind,
            },
            RawWorkload::Flows(list) => {
                let mut flows = Vec::new();
                for (k, f) in list.iter().enumerate() {
                    let what = format!("workload.flows[{k}]");
                    let src = self.host(t, &f.value.src, &format!("{what}.src"))?;
                    let dst = self.host(t, &f.value.dst, &format!("{what}.dst"))?;
                    if src == dst {
                        return Err(self.err(
                            &f.value.dst.referenced,
                            format!(
                                "{what}: expected a destination other than the source `{}`",
                                f.value.src.value
                            ),
                        ));
                    }
                    flows.push(PlannedFlow {
                        id: k as u32 + 1,
                        src,
                        dst,
                        size: self.size(&f.value.size, &format!("{what}.size"))?,
                        start_ns: f.value.start.map_or(0, |s| s.0),
                        kind: f.value.kind,
                    });
                }
                Workload::Flows(flows)
            }
        };
        if workload.flows().is_empty() {
            return Err(self.err(&w.referenced, "workload: expected at least one flow".into()));
        }
        Ok(workload)
    }
}
