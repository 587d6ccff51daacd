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

mod events;
mod overrides;
mod programs;
pub(crate) mod raw;

pub use events::{EventAction, ScenarioEvent};
pub use overrides::Overrides;
pub use programs::ProgramSpec;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use intlab_switch::units::Nanos;
use intlab_transport::cc::{ControllerConfig, HpccConfig};
use serde_saphyr::{Location, Spanned};

use crate::lab::TransportSettings;
use crate::topology::{LoadError, NodeKind, Topology, load_document, parse_yaml};
use crate::workload::{Application, PlannedFlow, SizeCdf, Workload, cdf};
use intlab_runtime::PollMode;
use raw::{DilationWord, RawApplication, RawDilation, RawPoisson, RawRun, RawWorkload};

/// The scenario `intlab run` uses when given no file: 4-to-1 incast under HPCC.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../topologies/incast-4to1.yaml");
/// The name the default scenario goes by in messages.
pub const DEFAULT_SCENARIO_NAME: &str = "topologies/incast-4to1.yaml (built in)";

/// How long a run may last when the file says nothing (scenario time).
const DEFAULT_DURATION: Nanos = Nanos(60_000_000_000);

/// Most worker threads a scenario may ask for: more than the machine's cores only makes them
/// wait for each other.
const MAX_WORKERS: usize = 256;

/// How the lab's workers run (`runtime:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// Worker threads (default: the machine's cores).
    pub workers: usize,
    /// How they wait for their next deadline (default: adaptive).
    pub poll: PollMode,
    /// How switches read and write their veth ports (default: system calls).
    pub packet_io: intlab_switch::config::PacketIo,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            workers: intlab_runtime::cores(),
            poll: PollMode::default(),
            // A lab's hosts and switches share the workers: AF_XDP measured no lighter there, and
            // would pin 5 MB of memory per port (docs/performance.md).
            packet_io: intlab_switch::config::PacketIo::Syscalls,
        }
    }
}

/// A checked scenario, in the file's units (before time dilation).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Where it came from, for messages.
    pub file: PathBuf,
    /// The folder of that file: relative paths in it (imports, CDFs, where programs start)
    /// start there.
    pub dir: PathBuf,
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
    /// `dilation: auto`: the run measures the machine and sets [`Scenario::dilation`] itself
    /// (the doctor measures it); until then `dilation` is 1.
    pub dilation_auto: bool,
    /// Transport settings of every host (file units).
    pub transport: TransportSettings,
    /// How the lab's workers run.
    pub runtime: RuntimeSettings,
    /// The grid `intlab sweep` runs when given none: (key, values) per axis.
    pub sweep: Vec<(String, Vec<String>)>,
    /// What the run does to its network as it goes, in time order.
    pub events: Vec<ScenarioEvent>,
    /// The programs the run starts in its hosts (`programs:`).
    pub programs: Vec<ProgramSpec>,
    /// How long after a link goes down or up the fabric's routes follow (scenario ns).
    pub reconverge_ns: u64,
    /// Which machine runs which part (`sites:`), if the file says.
    pub sites: Option<crate::sites::plan::SitePlan>,
}

/// What a lab left up (`intlab up`) takes of a scenario: no workload, no run.
#[derive(Debug, Clone)]
pub struct LabScenario {
    /// Its topology.
    pub topology: Topology,
    /// `runtime:`.
    pub runtime: RuntimeSettings,
    /// `transport:` (the hosts' MTU, ACKs, CNPs, INT).
    pub transport: TransportSettings,
    /// `controller:`: what the QPs of programs in the hosts run (HPCC when none is given).
    pub controller: ControllerConfig,
    /// `reconverge:` (scenario ns).
    pub reconverge_ns: u64,
}

/// `reconverge:`, or its default.
fn reconverge_ns(key: Option<&Spanned<Nanos>>) -> u64 {
    key.map_or(crate::lab_links::DEFAULT_RECONVERGE_NS, |r| r.value.0)
}

impl Scenario {
    /// Reads and checks `file` with `overrides` applied.
    pub fn load(file: &Path, overrides: &Overrides) -> Result<Scenario, LoadError> {
        Scenario::from_text(&read(file)?, file, overrides)
    }

    /// The topology and `runtime:` keys of scenario `file`, for a lab built without a run
    /// (`intlab up`): the run keys (workload, controller, ...) are not required.
    pub fn load_lab(file: &Path) -> Result<LabScenario, LoadError> {
        Scenario::lab_from_text(&read(file)?, file)
    }

    /// The built-in scenario's lab (`intlab up` with no file builds what `intlab run` runs).
    pub fn builtin_lab() -> Result<LabScenario, LoadError> {
        Scenario::lab_from_text(DEFAULT_SCENARIO, Path::new(DEFAULT_SCENARIO_NAME))
    }

    /// The lab of scenario `text`; `file` names it in errors and places its relative paths.
    fn lab_from_text(text: &str, file: &Path) -> Result<LabScenario, LoadError> {
        let (topology, run) = (load_document(text, file)?, parse_yaml::<RawRun>(text, file)?);
        let dir = folder_of(file);
        let checker = Checker { file, dir: &dir };
        let runtime = checker.runtime(run.runtime.as_ref())?;
        let transport = checker.transport(&topology, run.transport.as_ref())?;
        let controller = checker.controller(run.controller)?;
        Ok(LabScenario {
            reconverge_ns: reconverge_ns(run.reconverge.as_ref()),
            topology,
            runtime,
            transport,
            controller,
        })
    }

    /// `file`, or the built-in default when there is none, with `overrides` applied.
    pub fn load_or_builtin(file: Option<&Path>, overrides: &Overrides) -> Result<Scenario, LoadError> {
        match file {
            Some(f) => Scenario::load(f, overrides),
            None => Scenario::builtin(overrides),
        }
    }

    /// The built-in default with `overrides` applied.
    pub fn builtin(overrides: &Overrides) -> Result<Scenario, LoadError> {
        Scenario::from_text(DEFAULT_SCENARIO, Path::new(DEFAULT_SCENARIO_NAME), overrides)
    }

    /// Checks scenario `text`; `file` names it in errors.
    pub fn from_text(text: &str, file: &Path, overrides: &Overrides) -> Result<Scenario, LoadError> {
        // Taken before the name gains its flags (`--cc/--set` holds a slash).
        let dir = folder_of(file);
        let (text, file) = if overrides.is_empty() {
            (text.to_owned(), file.to_owned())
        } else {
            // Read as the file it is, so that its own faults (a key given twice) are told at
            // its line; the changes then apply to what was read.
            let doc: serde_json::Value = parse_yaml(text, file)?;
            let changed = overrides.apply(doc).map_err(|message| LoadError {
                file: file.to_owned(),
                line: 0,
                column: 0,
                message,
            })?;
            // Positions now refer to the changed document (written as scenario.yaml).
            let mut name = file.as_os_str().to_owned();
            name.push(format!(" with {}", overrides.flags()));
            (changed, PathBuf::from(name))
        };
        let quote = |mut e: LoadError| {
            // The changed document exists nowhere the user can see: quote the line.
            if !overrides.is_empty()
                && let Some(line) = text.lines().nth(e.line.wrapping_sub(1))
            {
                e.message = format!("{} (at `{}`)", e.message, line.trim());
            }
            e
        };
        let topology = load_document(&text, &file).map_err(quote)?;
        let run: RawRun = parse_yaml(&text, &file).map_err(quote)?;
        Checker { file: &file, dir: &dir }
            .scenario(text.clone(), topology, run)
            .map_err(quote)
    }

    /// Every flow of the workload.
    pub fn flows(&self) -> Vec<PlannedFlow> {
        self.workload.flows()
    }
}

/// The text of scenario `file`.
fn read(file: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(file).map_err(|e| LoadError {
        file: file.to_owned(),
        line: 0,
        column: 0,
        message: format!("cannot read it: {e}"),
    })
}

struct Checker<'a> {
    file: &'a Path,
    /// The folder of the file as the user named it: relative paths in it start there.
    dir: &'a Path,
}

/// The folder of scenario `file`, where the relative paths it names start (`.` for a bare
/// file name).
fn folder_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

impl Checker<'_> {
    /// `runtime:` checked.
    fn runtime(&self, raw: Option<&Spanned<raw::RawRuntime>>) -> Result<RuntimeSettings, LoadError> {
        let mut runtime = RuntimeSettings::default();
        if let Some(r) = raw {
            if let Some(w) = &r.value.workers {
                if w.value == 0 || w.value > MAX_WORKERS {
                    return Err(self.err(
                        &w.referenced,
                        format!(
                            "runtime.workers: expected 1 to {MAX_WORKERS} worker threads, got {}",
                            w.value
                        ),
                    ));
                }
                runtime.workers = w.value;
            }
            if let Some(io) = r.value.packet_io {
                runtime.packet_io = io;
            }
            if let Some(p) = r.value.poll {
                runtime.poll = p;
            }
        }
        Ok(runtime)
    }

    /// `controller:` checked (an RL-CC policy file read now, so that a bad one stops the run
    /// before it starts); HPCC with its defaults when there is none.
    fn controller(&self, raw: Option<Spanned<ControllerConfig>>) -> Result<ControllerConfig, LoadError> {
        let Some(c) = raw else {
            return Ok(ControllerConfig::Hpcc(HpccConfig::default()));
        };
        let mut controller = c.value;
        controller
            .check()
            .map_err(|m| self.err(&c.referenced, format!("controller.{m}")))?;
        if let ControllerConfig::Rlcc(r) = &mut controller {
            r.resolve()
                .map_err(|e| self.err(&c.referenced, format!("controller.policy: {e}")))?;
        }
        Ok(controller)
    }

    /// `transport:` checked against the links' buffers.
    fn transport(
        &self,
        topology: &Topology,
        raw: Option<&Spanned<raw::RawTransport>>,
    ) -> Result<TransportSettings, LoadError> {
        let mut transport = TransportSettings::default();
        if let Some(t) = raw {
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
            if let Some(d) = &t.value.cnp_dscp {
                if d.value > 63 {
                    return Err(self.err(
                        &d.referenced,
                        format!("transport.cnp_dscp: expected a DSCP 0-63, got {}", d.value),
                    ));
                }
                transport.cnp_dscp = d.value;
            }
            if let Some(i) = t.value.int {
                transport.int_mode = i;
            }
            if let Some(m) = &t.value.mtu {
                let frame = u64::from(transport.link_mtu()) + 18;
                if let Some((li, l)) = topology
                    .links
                    .iter()
                    .enumerate()
                    .find(|(_, l)| l.props.buffer.0 < frame)
                {
                    return Err(self.err(
                        &m.referenced,
                        format!(
                            "transport.mtu {} makes frames of {frame} B, which links[{li}]'s buffer of {} B cannot hold",
                            m.value, l.props.buffer.0
                        ),
                    ));
                }
            }
        }
        Ok(transport)
    }

    fn err(&self, at: &Location, message: String) -> LoadError {
        LoadError {
            file: self.file.to_owned(),
            line: at.line() as usize,
            column: at.column() as usize,
            message,
        }
    }

    fn scenario(&self, text: String, topology: Topology, run: RawRun) -> Result<Scenario, LoadError> {
        let mut names = Vec::new();
        for c in &run.controllers {
            let name = c.value.name();
            if names.contains(&name) {
                return Err(self.err(&c.referenced, format!("controllers: `{name}` is listed twice")));
            }
            names.push(name);
            c.value
                .check()
                .map_err(|m| self.err(&c.referenced, format!("controllers ({name}): {m}")))?;
        }
        let controller = self.controller(run.controller)?;
        let programs = programs::check(&run.programs, &topology, |at, m| self.err(at, m))?;
        let workload = match &run.workload {
            Some(w) => self.workload(&topology, w, run.seed.unwrap_or(1))?,
            // The programs are the workload.
            None if !programs.is_empty() => Workload::Flows(Vec::new()),
            None => {
                return Err(LoadError {
                    file: self.file.to_owned(),
                    line: 1,
                    column: 1,
                    message: "no `workload:` and no `programs:`: expected a workload (incast, all_to_all, flows, applications, ...) or programs (see docs/scenarios.md)"
                        .into(),
                });
            }
        };
        let seed = run.seed.unwrap_or(1);
        let duration = match run.duration {
            Some(d) if d.value.0 == 0 => {
                return Err(self.err(&d.referenced, "duration: expected a time above zero".into()));
            }
            Some(d) => d.value,
            None => DEFAULT_DURATION,
        };
        let (dilation, dilation_auto) = match &run.dilation {
            Some(d) => match d.value {
                RawDilation::Word(DilationWord::Auto) => (1.0, true),
                RawDilation::Factor(f) if !(1.0..=1e6).contains(&f) => {
                    return Err(self.err(
                        &d.referenced,
                        format!("dilation: expected a factor from 1 to 1000000 or `auto`, got {f}"),
                    ));
                }
                RawDilation::Factor(f) => (f, false),
            },
            None => (1.0, false),
        };
        let transport = self.transport(&topology, run.transport.as_ref())?;
        if let Some(d) = &run.dilation
            && let Some((li, l)) = topology
                .links
                .iter()
                .enumerate()
                .find(|(_, l)| crate::dilation::Dilation::new(dilation).lab_bps(l.props.rate.bps()) < 1000)
        {
            return Err(self.err(
                &d.referenced,
                format!(
                    "dilation {dilation} runs links[{li}]'s {} below 1 kb/s, which INT cannot report",
                    l.props.rate
                ),
            ));
        }
        let runtime = self.runtime(run.runtime.as_ref())?;
        let events = events::check(&run.events, &topology, |at, m| self.err(at, m))?;
        let reconverge_ns = reconverge_ns(run.reconverge.as_ref());
        let sites = match &run.sites {
            None => None,
            Some(sites) => {
                let names = sites.value.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect();
                // Where the site the error is about is written, else where `sites:` is.
                let at = |e: &crate::sites::plan::SitesError| {
                    e.site()
                        .and_then(|k| sites.value.get(k))
                        .map_or(&sites.referenced, |v| &v.referenced)
                };
                Some(
                    crate::sites::plan::SitePlan::from_names(&topology, &names)
                        .map_err(|e| self.err(at(&e), format!("sites: {e}")))?,
                )
            }
        };
        Ok(Scenario {
            file: self.file.to_owned(),
            dir: self.dir.to_owned(),
            text,
            topology,
            controller,
            workload,
            duration,
            seed,
            capture: run.capture.unwrap_or(false),
            dilation,
            dilation_auto,
            transport,
            runtime,
            sweep: run.sweep.into_iter().map(|a| (a.key, a.values)).collect(),
            events,
            programs,
            reconverge_ns,
            sites,
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

    fn workload(&self, t: &Topology, w: &Spanned<RawWorkload>, seed: u64) -> Result<Workload, LoadError> {
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
                        step: None,
                    });
                }
                Workload::Flows(flows)
            }
            RawWorkload::Poisson(p) => self.poisson(t, p, seed)?,
            RawWorkload::Permutation(p) => {
                let hosts = self.hosts(t, &p.hosts, "workload.permutation.hosts")?;
                if hosts.len() < 2 {
                    return Err(self.err(
                        &w.referenced,
                        "workload.permutation: expected at least two hosts".into(),
                    ));
                }
                Workload::Permutation {
                    hosts,
                    flows_per_pair: self.count(&p.flows_per_pair, "workload.permutation.flows_per_pair")?,
                    size: self.size(&p.size, "workload.permutation.size")?,
                    seed,
                }
            }
            RawWorkload::LongShort(l) => {
                let what = "workload.long_short";
                let receiver = self.host(t, &l.receiver, &format!("{what}.receiver"))?;
                let mut senders = self.hosts(t, &l.senders, &format!("{what}.senders"))?;
                senders.retain(|&h| h != receiver);
                if senders.is_empty() {
                    return Err(self.err(
                        &l.receiver.referenced,
                        format!("{what}: expected senders other than the receiver"),
                    ));
                }
                Workload::LongShort {
                    senders,
                    receiver,
                    long: l.long.value,
                    long_size: self.size(&l.long_size, &format!("{what}.long_size"))?,
                    short: l.short.value,
                    short_size: self.size(&l.short_size, &format!("{what}.short_size"))?,
                    window_ns: l.window.value.0,
                    seed,
                }
            }
            RawWorkload::Import(i) => {
                let hosts = self.hosts(t, &i.hosts, "workload.import.hosts")?;
                let path = self.dir.join(&i.file.value);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    self.err(
                        &i.file.referenced,
                        format!("workload.import.file: cannot read {}: {e}", path.display()),
                    )
                })?;
                let flows = crate::workload::import(i.format, &text, &hosts).map_err(|(line, message)| LoadError {
                    file: path.clone(),
                    line,
                    column: 1,
                    message,
                })?;
                Workload::Flows(flows)
            }
            RawWorkload::Applications(list) => {
                let mut apps = Vec::new();
                for (k, a) in list.iter().enumerate() {
                    apps.push(self.application(t, &a.value, &format!("workload.applications[{k}]"))?);
                }
                Workload::Applications(apps)
            }
        };
        if workload.flows().is_empty() {
            return Err(self.err(&w.referenced, "workload: expected at least one flow".into()));
        }
        Ok(workload)
    }

    fn poisson(&self, t: &Topology, p: &RawPoisson, seed: u64) -> Result<Workload, LoadError> {
        let what = "workload.poisson";
        let text = if let Some(text) = cdf::builtin(&p.cdf.value) {
            text.to_owned()
        } else {
            let base = self.dir;
            let path = base.join(&p.cdf.value);
            std::fs::read_to_string(&path).map_err(|e| {
                self.err(
                    &p.cdf.referenced,
                    format!(
                        "{what}.cdf: expected `websearch`, `fbhadoop` or a CDF file, cannot read {}: {e}",
                        path.display()
                    ),
                )
            })?
        };
        let cdf = SizeCdf::parse(&text).map_err(|(line, m)| {
            self.err(
                &p.cdf.referenced,
                format!("{what}.cdf: {} line {line}: {m}", p.cdf.value),
            )
        })?;
        if !(p.load.value > 0.0 && p.load.value <= 1.0) {
            return Err(self.err(
                &p.load.referenced,
                format!("{what}.load: expected a fraction in (0, 1], got {}", p.load.value),
            ));
        }
        if p.window.value.0 == 0 {
            return Err(self.err(
                &p.window.referenced,
                format!("{what}.window: expected a time above zero"),
            ));
        }
        let hosts = self.hosts(t, &p.hosts, &format!("{what}.hosts"))?;
        let link_bps = hosts
            .iter()
            .filter_map(|&h| t.links_of(h).next().map(|(l, _)| t.links[l].props.rate.bps()))
            .min()
            .unwrap_or(0);
        Ok(Workload::Poisson {
            cdf,
            hosts,
            link_bps,
            load: p.load.value,
            window_ns: p.window.value.0,
            seed,
        })
    }

    fn application(&self, t: &Topology, a: &RawApplication, what: &str) -> Result<Application, LoadError> {
        let ranks = self.hosts(t, &Some(a.ranks.value.clone()), &format!("{what}.ranks"))?;
        if ranks.len() < 2 {
            return Err(self.err(
                &a.ranks.referenced,
                format!("{what}.ranks: expected at least two hosts, got {}", ranks.len()),
            ));
        }
        let delay_sensitivity = match &a.delay_sensitivity {
            Some(c) if !(c.value.is_finite() && c.value >= 0.0) => {
                return Err(self.err(
                    &c.referenced,
                    format!("{what}.delay_sensitivity: expected a number ≥ 0, got {}", c.value),
                ));
            }
            c => c.as_ref().map(|c| c.value),
        };
        Ok(Application {
            name: a.name.value.clone(),
            ranks,
            exchange: a.exchange,
            message: self.size(&a.message, &format!("{what}.message"))?,
            compute_ns: a.compute.map_or(0, |c| c.0),
            iterations: self.count(&Some(a.iterations.clone()), &format!("{what}.iterations"))?,
            start_ns: a.start.map_or(0, |s| s.0),
            delay_sensitivity,
            kind: a.kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "\
name: t
defaults:
  link: { rate: 100Mbps, delay: 10us }
nodes:
  s1: { kind: switch }
  h1: { kind: host }
  h2: { kind: host }
  h3: { kind: host }
links:
  - endpoints: [\"s1:1\", \"h1:0\"]
  - endpoints: [\"s1:2\", \"h2:0\"]
  - endpoints: [\"s1:3\", \"h3:0\"]
";

    fn load(run: &str) -> Result<Scenario, LoadError> {
        Scenario::from_text(&format!("{BASE}{run}"), Path::new("s.yaml"), &Overrides::default())
    }

    fn error(run: &str) -> LoadError {
        let e = load(run).unwrap_err();
        assert!(e.line > 0, "no position: {e}");
        e
    }

    #[test]
    fn run_keys_have_documented_defaults() {
        let s = load("workload:\n  incast: { receiver: h3, size: 10KB }\n").unwrap();
        assert_eq!(s.controller, ControllerConfig::Hpcc(HpccConfig::default()));
        assert_eq!(
            (s.duration, s.seed, s.capture, s.dilation),
            (DEFAULT_DURATION, 1, false, 1.0)
        );
        assert_eq!(s.transport, TransportSettings::default());
        let pairs: Vec<(usize, usize)> = s.flows().iter().map(|f| (f.src, f.dst)).collect();
        assert_eq!(
            pairs,
            [(1, 3), (2, 3)],
            "every other host sends when no senders are listed"
        );
    }

    #[test]
    fn the_builtin_default_is_a_4_to_1_incast_under_hpcc() {
        let s = Scenario::builtin(&Overrides::default()).unwrap();
        assert_eq!(s.controller.name(), "hpcc");
        let flows = s.flows();
        assert_eq!(flows.len(), 4);
        assert!(flows.iter().all(|f| s.topology.nodes[f.dst].name == "h5"));
    }

    #[test]
    fn dilation_is_a_factor_or_auto() {
        let w = "workload:\n  incast: { receiver: h3, size: 10KB }\n";
        let s = load(&format!("{w}dilation: auto\n")).unwrap();
        assert!(s.dilation_auto);
        let s = load(&format!("{w}dilation: 20\n")).unwrap();
        assert_eq!((s.dilation, s.dilation_auto), (20.0, false));
        assert!(load(&format!("{w}dilation: fast\n")).is_err(), "only `auto` is a word");
    }

    #[test]
    fn the_switch_port_io_is_system_calls_unless_another_is_asked_for() {
        use intlab_switch::config::PacketIo;
        let w = "workload:\n  incast: { receiver: h3, size: 10KB }\n";
        let s = load(w).unwrap();
        assert_eq!(s.runtime.packet_io, PacketIo::Syscalls);
        for (word, io) in [
            ("ring", PacketIo::Ring),
            ("xdp", PacketIo::Xdp),
            ("auto", PacketIo::Auto),
        ] {
            let s = load(&format!("{w}runtime: {{ packet_io: {word} }}\n")).unwrap();
            assert_eq!(s.runtime.packet_io, io);
        }
        assert!(load(&format!("{w}runtime: {{ packet_io: dpdk }}\n")).is_err());
    }

    #[test]
    fn run_mistakes_name_the_line_and_the_expectation() {
        let w = "workload:\n  incast: { receiver: h3, size: 10KB }\n";
        assert!(error("").message.contains("no `workload:`"));
        let e = error(&format!("{w}dilation: 0.5\n"));
        assert!(e.message.contains("dilation: expected a factor from 1"), "{e}");
        assert_eq!(e.line, 15);
        let e = error(&format!("{w}transport: {{ ack_every: 0 }}\n"));
        assert!(e.message.contains("ack_every: expected at least 1"), "{e}");
        let e = error(&format!("{w}transport: {{ cnp_dscp: 64 }}\n"));
        assert!(e.message.contains("cnp_dscp: expected a DSCP 0-63, got 64"), "{e}");
        let e = error("workload:\n  incast: { senders: [h1, h1], receiver: h3, size: 1KB }\n");
        assert!(e.message.contains("`h1` is listed twice"), "{e}");
        let e = error("workload:\n  incast: { senders: [h1, h3], receiver: h3, size: 1KB }\n");
        assert!(e.message.contains("`h3` is the receiver"), "{e}");
        let e = error("workload:\n  flows:\n    - { src: h1, dst: h1, size: 1KB }\n");
        assert!(e.message.contains("other than the source"), "{e}");
        let e = error("workload:\n  incast: { receiver: s1, size: 1KB }\n");
        assert!(e.message.contains("expected the name of a host, got `s1`"), "{e}");
        let e = error(&format!("{w}controller: {{ name: hpcc, etta: 0.9 }}\n"));
        assert!(e.message.contains("etta"), "{e}");
        let e = error(&format!("{w}duration: 0s\n"));
        assert!(e.message.contains("duration: expected a time above zero"), "{e}");
        let e = error(&format!(
            "{w}controllers:\n  - {{ name: dcqcn }}\n  - {{ name: dcqcn }}\n"
        ));
        assert!(e.message.contains("controllers: `dcqcn` is listed twice"), "{e}");
        assert_eq!(e.line, 17);
        let e = error(&format!("{w}controllers:\n  - {{ name: hpcc, eta: 2 }}\n"));
        assert!(e.message.contains("controllers (hpcc): eta"), "{e}");
        let apps = "workload:\n  applications:\n    - { name: a, ranks: [h1, h2], message: 1KB, iterations: 2";
        let e = error(&format!("{apps}, delay_sensitivity: -1 }}\n"));
        assert!(
            e.message
                .contains("applications[0].delay_sensitivity: expected a number ≥ 0, got -1"),
            "{e}"
        );
        let e = error("workload:\n  applications:\n    - { name: a, ranks: [h1], message: 1KB, iterations: 1 }\n");
        assert!(e.message.contains("ranks: expected at least two hosts, got 1"), "{e}");
        let e = error(&format!("{apps}, exchange: star }}\n"));
        assert!(e.message.contains("star"), "{e}");
    }

    #[test]
    fn applications_plan_their_first_iteration_and_defer_the_rest() {
        let s = load(
            "controller: { name: netscope }\nworkload:\n  applications:\n    - { name: a, ranks: [h1, h2, h3], \
             message: 1KB, compute: 5us, iterations: 2, delay_sensitivity: 3 }\n",
        )
        .unwrap();
        let flows = s.flows();
        assert_eq!(flows.len(), 6, "a ring of 3 ranks, 2 iterations");
        assert_eq!(
            flows
                .iter()
                .filter(|f| !crate::workload::Iterations::is_deferred(f))
                .count(),
            3
        );
        assert_eq!(flows[0].start_ns, 5_000);
        let c_a = s.workload.applications()[0].delay_sensitivity;
        assert_eq!(
            s.controller.for_application(c_a),
            ControllerConfig::Netscope(intlab_transport::cc::NetscopeConfig {
                delay_sensitivity: 3.0,
                ..Default::default()
            })
        );
    }

    #[test]
    fn overrides_are_checked_like_the_file() {
        let o = Overrides {
            controller: Some("hpcc++".into()),
            set: vec!["workload.incast.size=2KB".into(), "dilation=4".into()],
            only: None,
        };
        let text = format!("{BASE}workload:\n  incast: {{ receiver: h3, size: 10KB }}\n");
        let s = Scenario::from_text(&text, Path::new("s.yaml"), &o).unwrap();
        assert_eq!(
            (s.controller.name(), s.dilation, s.flows()[0].size),
            ("hpcc++", 4.0, 2000)
        );
        let bad = Overrides {
            controller: None,
            set: vec!["dilation=0".into()],
            only: None,
        };
        let e = Scenario::from_text(&text, Path::new("s.yaml"), &bad).unwrap_err();
        assert!(e.to_string().starts_with("s.yaml with --set:"), "{e}");
        assert!(e.message.contains("(at `dilation: 0`)"), "{e}");
        // A fault of the file itself is told at its line, whatever the command line changes.
        let twice = format!("{text}dilation: 2\ndilation: 3\n");
        let line = twice.lines().count();
        let e = Scenario::from_text(&twice, Path::new("s.yaml"), &o).unwrap_err();
        assert_eq!((e.file.as_path(), e.line), (Path::new("s.yaml"), line), "{e}");
        assert!(e.message.contains("`dilation` is given twice"), "{e}");
    }

    #[test]
    fn permutations_send_and_receive_once_each_and_long_short_starts_its_short_flows_late() {
        let s = load("workload:\n  permutation: { size: 1KB }\nseed: 9\n").unwrap();
        let f = s.flows();
        let mut src: Vec<usize> = f.iter().map(|f| f.src).collect();
        let mut dst: Vec<usize> = f.iter().map(|f| f.dst).collect();
        src.sort_unstable();
        dst.sort_unstable();
        assert_eq!((src.clone(), dst), (vec![1, 2, 3], vec![1, 2, 3]));
        assert!(f.iter().all(|f| f.src != f.dst));
        let s = load(
            "workload:\n  long_short: { receiver: h3, long: 2, long_size: 1MB, short: 5, short_size: 10KB, window: 1ms }\n",
        )
        .unwrap();
        let f = s.flows();
        assert_eq!(f.len(), 7);
        assert!(f[..2].iter().all(|f| f.size == 1_000_000 && f.start_ns == 0));
        assert!(
            f[2..]
                .iter()
                .all(|f| f.size == 10_000 && f.start_ns < 1_000_000 && f.dst == 3)
        );
    }

    #[test]
    fn imported_flow_files_map_nodes_to_hosts_and_name_their_bad_line() {
        let dir = std::env::temp_dir().join(format!("intlab-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("flows.txt"), "2\n0 2 3 100 5000 2.0\n1 7 3 100 5000 2.0\n").unwrap();
        std::fs::write(
            dir.join("ok.cm"),
            "Nodes 3\nConnections 1\n1->0 id 1 start 5 size 700\n",
        )
        .unwrap();
        let text = |w: &str| format!("{BASE}workload:\n  import: {w}\n");
        let at = dir.join("s.yaml");
        let s = Scenario::from_text(&text("{ format: htsim, file: ok.cm }"), &at, &Overrides::default()).unwrap();
        let f = s.flows();
        assert_eq!((f[0].src, f[0].dst, f[0].size, f[0].start_ns), (2, 1, 700, 5_000));
        let e = Scenario::from_text(&text("{ format: ns3, file: flows.txt }"), &at, &Overrides::default()).unwrap_err();
        assert_eq!((e.file.clone(), e.line), (dir.join("flows.txt"), 3), "{e}");
        assert!(e.message.contains("node 7"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
