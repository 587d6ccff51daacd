//! One run of a scenario: build the lab (time dilation applied), start the workload, wait for
//! it with progress, stop on completion, on the scenario's duration or on a signal, and gather
//! and write the results. The lab is torn down on every path out, a panic included.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use intlab_runtime::clock::Clock;
use intlab_transport::flow::{FlowEvent, FlowPath, FlowSpec, Stuck};

use crate::base_rtt;
use crate::datapath::{self, DataPathError, ProbeTarget};
use crate::dilation::Dilation;
use crate::host_programs::{HostPrograms, RunLabRecord};
use crate::lab::{self, Lab, LabConfig, LabError};
use crate::results::{self, Ending, Results, RunRecord, Timebase, WriteError};
use crate::scenario::Scenario;
use crate::workload::{Iterations, PlannedFlow};

/// Where and how to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The results folder (created if missing).
    pub out: PathBuf,
    /// Capture every switch port to pcapng, whatever the scenario says.
    pub capture: bool,
    /// Short tag in the run's namespace names, to tell concurrent runs apart.
    pub tag: String,
    /// Replace what an earlier run wrote in `out` (else `out` must be missing or empty).
    pub force: bool,
    /// Where the running lab is shown while it runs (`--metrics`, `--web`).
    pub live: Vec<std::sync::Arc<crate::live::LiveServer>>,
}

/// Shows a lab on the live servers while it lives: hidden again on every way out of a run.
struct Shown<'a>(&'a [std::sync::Arc<crate::live::LiveServer>]);

impl Drop for Shown<'_> {
    fn drop(&mut self) {
        for server in self.0 {
            server.hide();
        }
    }
}

/// Told how a run progresses.
pub trait Progress {
    /// A step that takes a while started.
    fn step(&mut self, what: &str);
    /// The workload started: `flows` to finish.
    fn begin(&mut self, flows: u64);
    /// `done` flows have finished so far.
    fn advance(&mut self, done: u64);
    /// The workload is over.
    fn end(&mut self);
}

/// Reports nothing (for tests and library use).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn step(&mut self, _what: &str) {}
    fn begin(&mut self, _flows: u64) {}
    fn advance(&mut self, _done: u64) {}
    fn end(&mut self) {}
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The machine lacks what the lab needs.
    #[error(transparent)]
    Prerequisite(#[from] crate::prerequisites::Missing),
    /// The results folder holds an earlier run's files.
    #[error(transparent)]
    Folder(#[from] results::PrepareError),
    /// The lab could not be built.
    #[error("building the lab: {0}")]
    Lab(LabError),
    /// A results file could not be written.
    #[error("writing results: {0}")]
    Write(WriteError),
    /// The lab's data path does not carry every flow (checked before any flow starts).
    #[error(transparent)]
    DataPath(#[from] DataPathError),
    /// `dilation: auto` could not measure the machine.
    #[error("measuring this machine for `dilation: auto`: {0}")]
    Machine(String),
    /// The thread that plays the scenario's `events:` did not start.
    #[error("starting the thread of the scenario's events: {0}")]
    Events(std::io::Error),
    /// A lab spread over machines could not run (no `sites:`, no address for a site,
    /// interrupted before it started).
    #[error("{0}")]
    Sites(String),
    /// A site of a lab spread over machines failed or could not be reached.
    #[error("site {site}: {message}")]
    Site {
        /// The site (or the sites file).
        site: String,
        /// What went wrong.
        message: String,
    },
    /// A program of the scenario could not be started.
    #[error(transparent)]
    Program(#[from] crate::host_programs::StartError),
    /// The run's lab could not be recorded for its programs to reach its hosts.
    #[error("recording the run's lab for its programs: {0}")]
    ProgramsRecord(crate::standing_lab::StandingLabError),
    /// A host's transport stopped working.
    #[error("host {host}'s transport failed: {error} (results written, its flows unfinished)")]
    Host {
        /// Host name.
        host: String,
        /// What failed.
        error: String,
    },
}

// Written out rather than `#[from]`, which would also make the inner error the source and so
// print it twice in an error chain.
impl From<LabError> for RunError {
    fn from(e: LabError) -> Self {
        RunError::Lab(e)
    }
}

impl From<WriteError> for RunError {
    fn from(e: WriteError) -> Self {
        RunError::Write(e)
    }
}

/// How often the run looks at its flows, the clock and the stop flag.
pub(crate) const POLL: Duration = Duration::from_millis(50);
/// Time between the lab being ready and the first flow, so every endpoint has its flows.
const START_MARGIN_NS: u64 = 20_000_000;
/// How long the data path check waits for every flow's probes at least (real time).
const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// CPU time stolen by the hypervisor and all CPU time so far, from /proc/stat (jiffies).
pub(crate) fn cpu_steal_and_total() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = cpu.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    let steal = *fields.get(7)?;
    Some((steal, fields.iter().take(8).sum()))
}

/// Runs `s`, writes its results into `opts.out`, and returns them. `stop` ends the run early
/// (its results are still written, marked interrupted). With `dilation: auto` the run starts
/// at the dilation this machine is expected to keep time at, and runs again one step up while
/// the run warns that it did not (the results are the last run's; its summary lists the
/// dilations that warned).
pub fn run(
    s: &Scenario,
    opts: &RunOptions,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Results, RunError> {
    crate::prerequisites::check()?;
    stepping_up(s, opts, stop, progress, &mut run_once)
}

/// One run of a scenario at its dilation, given the dilations `dilation: auto` tried before.
pub(crate) type RunOnce<'a> =
    dyn FnMut(&Scenario, &RunOptions, &AtomicBool, &mut dyn Progress, &[f64]) -> Result<Results, RunError> + 'a;

/// Runs `s` with `once`; with `dilation: auto`, from the dilation this machine is expected to
/// keep time at, one step up while a run warns (see [`run`]).
pub(crate) fn stepping_up(
    s: &Scenario,
    opts: &RunOptions,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
    once: &mut RunOnce<'_>,
) -> Result<Results, RunError> {
    if !picks_dilation(s) {
        return once(s, opts, stop, progress, &[]);
    }
    // Refused before the machine is measured, not a second later.
    results::prepare(&opts.out, opts.force)?;
    let mut d = auto_start(s, progress)?;
    let mut warned = Vec::new();
    let mut opts = opts.clone();
    loop {
        let r = once(&at_dilation(s, d), &opts, stop, progress, &warned)?;
        match step_up_after(&r, stop, progress) {
            Some(next) => {
                warned.push(d);
                d = next;
                // What is in the folder now is the warned run's.
                opts.force = true;
            }
            None => return Ok(r),
        }
    }
}

/// True when the run picks its dilation (`dilation: auto`): not when it starts programs, which
/// run on the machine's clock and are read at dilation 1 (docs/verbs.md).
fn picks_dilation(s: &Scenario) -> bool {
    s.dilation_auto && s.programs.is_empty()
}

/// Where `dilation: auto` starts for `s` on this machine (measured, about 1 s).
fn auto_start(s: &Scenario, progress: &mut dyn Progress) -> Result<f64, RunError> {
    progress.step("measuring this machine for `dilation: auto` (about 1 s)");
    let m = crate::doctor::measure().map_err(|e| RunError::Machine(e.to_string()))?;
    let g = crate::doctor::suggest(s, &m, s.runtime.workers);
    let d = crate::doctor::auto_start(&g);
    tracing::info!(?g, start = d, "dilation: auto");
    Ok(d)
}

/// `s` at dilation `d` (still marked as picked by `dilation: auto`).
fn at_dilation(s: &Scenario, d: f64) -> Scenario {
    Scenario {
        dilation: d,
        ..s.clone()
    }
}

/// The dilation to run again at after a `dilation: auto` run that did not keep time (`r`);
/// None when it did, was stopped, or is at [`crate::doctor::AUTO_MAX`] already.
fn step_up_after(r: &Results, stop: &AtomicBool, progress: &mut dyn Progress) -> Option<f64> {
    let d = r.summary.dilation;
    let next = crate::doctor::auto_next(d, r.summary.timing_warning && !stop.load(Ordering::Relaxed))?;
    progress.step(&format!(
        "dilation {d} did not keep time on this machine (timing warning): running again at {next}"
    ));
    Some(next)
}

/// One run at `s.dilation`; `warned` are the dilations `dilation: auto` tried before it.
fn run_once(
    s: &Scenario,
    opts: &RunOptions,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
    warned: &[f64],
) -> Result<Results, RunError> {
    results::prepare(&opts.out, opts.force)?;
    results::write_scenario(&opts.out, &s.text)?;
    let d = Dilation::new(s.dilation);
    let capture = capture_folder(s, opts)?;
    let LabPlan {
        topology,
        cfg,
        plan,
        base_rtt,
    } = LabPlan::new(s, &opts.tag, capture);
    progress.step(&format!(
        "building {} ({} hosts, {} switches)",
        s.topology.name,
        topology.hosts().count(),
        topology.switches().count()
    ));
    let lab = Lab::build(&topology, &cfg)?;
    let shown = Shown(&opts.live);
    for server in shown.0 {
        server.show(lab.view(d.factor()));
    }
    let apps = s.workload.applications();
    let controller = d.controller(&s.controller);
    let src_ports = crate::workload::source_ports(&plan);
    let spec = |k: usize, start_ns: u64| flow_spec(&topology, &plan, &src_ports, k, start_ns);
    progress.step("checking the data path");
    let targets = probe_targets(&plan, &src_ports);
    let limit = PROBE_LIMIT.max(Duration::from_nanos(20 * base_rtt));
    let reach = match datapath::check(&lab, &targets, limit) {
        Ok(r) => r,
        Err(e) => {
            drop(lab);
            results::write_text(&opts.out, results::DATAPATH, &e.report)?;
            return Err(e.into());
        }
    };
    let (paths, overheads) = flow_paths(s, &topology, &plan, &reach);
    let clock = Clock::get();
    let t0 = clock.now_ns() + START_MARGIN_NS;
    let send = |k: usize, start_ns: u64| {
        let f = &plan[k];
        let cc = flow_controller(&controller, apps, f);
        lab.endpoint(f.src).send(spec(k, start_ns), cc, paths[k])
    };
    let host_failed = |n: usize, e: std::io::Error| RunError::Host {
        host: topology.nodes[n].name.clone(),
        error: e.to_string(),
    };
    lab.measure_from(t0).map_err(|(n, e)| host_failed(n, e))?;
    // Every receiver is ready from the start, so a flow released late finds its QP.
    for (k, f) in plan.iter().enumerate() {
        lab.endpoint(f.dst)
            .expect(spec(k, 0))
            .map_err(|e| host_failed(f.dst, e))?;
    }
    for (k, f) in plan.iter().enumerate().filter(|(_, f)| !Iterations::is_deferred(f)) {
        send(k, t0 + d.lab_ns(f.start_ns)).map_err(|e| host_failed(f.src, e))?;
    }
    let player = crate::event_player::EventPlayer::start(lab.links().clone(), s.events.clone(), t0, d)
        .map_err(RunError::Events)?;
    let index: std::collections::HashMap<u32, usize> = plan.iter().enumerate().map(|(k, f)| (f.id, k)).collect();
    let mut iterations = Iterations::new(apps, &plan, d);
    let deadline = t0 + d.lab_ns(s.duration.0);
    let (record, mut programs) = host_programs(s, &lab, &topology, &cfg, opts)?;
    let cpu_before = cpu_steal_and_total();
    if !s.programs.is_empty() {
        progress.step(&format!(
            "running {} programs in the hosts (their output: {})",
            s.programs.len(),
            opts.out.join(crate::host_programs::OUTPUT_FOLDER).display()
        ));
    }
    progress.begin(plan.len() as u64);
    let mut stuck: Option<Stuck> = None;
    let ending = loop {
        let next_program = programs.start_due(&lab, clock.now_ns().saturating_sub(t0), |ns| d.lab_ns(ns))?;
        let wait = next_program.map_or(POLL, |at| {
            POLL.min(Duration::from_nanos((t0 + at).saturating_sub(clock.now_ns())))
        });
        // Completions release later iterations as soon as they arrive; the rest is polled.
        if let Ok(e) = lab.events().recv_timeout(wait) {
            let events = std::iter::once(e).chain(lab.events().try_iter());
            for (k, start_ns) in released(events, &mut iterations, &mut stuck) {
                send(k, start_ns).map_err(|e| host_failed(plan[k].src, e))?;
            }
        }
        let finished = lab.finished();
        progress.advance((finished / 2) as u64);
        programs.reap();
        let done = finished >= 2 * plan.len() && !programs.holding_the_run();
        if let Some(e) = ending_now(done, stuck.is_some(), stop, clock.now_ns() >= deadline) {
            break e;
        }
    };
    // Before the lab stops, so that their QPs end on a running NIC.
    let programs = programs.finish();
    drop(record);
    let end_ns = clock.now_ns();
    let diagnosis = stuck.map(|x| {
        let f = &plan[index[&x.id]];
        no_progress_report(&lab, &x, &topology.nodes[f.src].name, &topology.nodes[f.dst].name)
    });
    progress.end();
    let cpu_after = cpu_steal_and_total();
    progress.step("stopping the lab");
    drop(shown);
    drop(player);
    let network_events = lab.links().events().into_iter().map(|e| (e.at_ns, e.what)).collect();
    let report = lab.stop();
    let failed_host = report.failed_hosts.first().cloned();
    let mut results = Results::of_run(
        s,
        RunRecord {
            plan: &plan,
            report,
            time: Timebase {
                t0_ns: t0,
                end_ns,
                dilation: d,
            },
            measured: results::Measurements {
                paths: &paths,
                host_overhead_ns: &overheads,
            },
            ending,
            network_events,
            diagnosis,
            dilation_warned: warned.to_vec(),
            cpu_steal: steal_share(cpu_before, cpu_after),
        },
    );
    if ending == Ending::Completed && programs.iter().any(|p| p.failed()) {
        results.summary.ending = Ending::ProgramFailed;
    }
    results.summary.programs = programs;
    progress.step("writing results");
    results::write_all(&opts.out, &results)?;
    if let Some((host, error)) = failed_host {
        return Err(RunError::Host { host, error });
    }
    Ok(results)
}

/// The flows (plan index, start in lab ns) that `events` release: later iterations of an
/// application whose iteration completed. The first flow reported stuck is kept in `stuck`.
fn released(
    events: impl Iterator<Item = FlowEvent>,
    iterations: &mut Iterations,
    stuck: &mut Option<Stuck>,
) -> Vec<(usize, u64)> {
    let mut flows = Vec::new();
    for e in events {
        match e {
            FlowEvent::Completed(c) => {
                if let Some(r) = iterations.complete(c.id, c.end_ns) {
                    flows.extend(r.flows.iter().map(|&k| (k, r.start_ns)));
                }
            }
            FlowEvent::Stuck(x) => {
                stuck.get_or_insert(x);
            }
        }
    }
    flows
}

/// The run's programs, ready to start, and the lab's record they reach the run's other hosts
/// through (MPI's launcher does); no record when the scenario runs no program.
fn host_programs(
    s: &Scenario,
    lab: &Lab,
    topology: &crate::topology::Topology,
    cfg: &LabConfig,
    opts: &RunOptions,
) -> Result<(Option<RunLabRecord>, HostPrograms), RunError> {
    let record = match s.programs.is_empty() {
        true => None,
        false => Some(
            RunLabRecord::write(lab, topology, &s.file, &cfg.prefix, &opts.tag).map_err(RunError::ProgramsRecord)?,
        ),
    };
    let env = record.as_ref().map_or_else(Vec::new, |r| r.environment(&opts.out));
    let programs = HostPrograms::new(&s.programs, |n| topology.nodes[n].name.clone(), &opts.out, &s.dir, env).map_err(
        |cause| WriteError {
            file: opts.out.join(crate::host_programs::OUTPUT_FOLDER).display().to_string(),
            cause,
        },
    )?;
    Ok((record, programs))
}

/// The folder the run's captures go to, made, when the scenario or the options ask for them.
fn capture_folder(s: &Scenario, opts: &RunOptions) -> Result<Option<PathBuf>, WriteError> {
    if !(s.capture || opts.capture) {
        return Ok(None);
    }
    let dir = opts.out.join("capture");
    std::fs::create_dir_all(&dir).map_err(|cause| WriteError {
        file: dir.display().to_string(),
        cause,
    })?;
    Ok(Some(dir))
}

/// What the data path check probes: each flow's ends, from the flow's own source port.
fn probe_targets(plan: &[PlannedFlow], src_ports: &[u16]) -> Vec<ProbeTarget> {
    plan.iter()
        .enumerate()
        .map(|(k, f)| ProbeTarget {
            flow: f.id,
            src: f.src,
            dst: f.dst,
            src_port: src_ports[k],
        })
        .collect()
}

/// How a run ends now, if it does: everything it waits for `done` (each flow counted at both
/// ends, the programs it waits for exited), a flow `stuck`, a `stop` asked, the duration
/// `over`; None while it goes on.
pub(crate) fn ending_now(done: bool, stuck: bool, stop: &AtomicBool, over: bool) -> Option<Ending> {
    if done {
        Some(Ending::Completed)
    } else if stuck {
        Some(Ending::NoProgress)
    } else if stop.load(Ordering::Relaxed) {
        Some(Ending::Interrupted)
    } else if over {
        Some(Ending::TimedOut)
    } else {
        None
    }
}

/// The share of the CPU time the hypervisor took between two readings of
/// [`cpu_steal_and_total`] (None when either is missing).
pub(crate) fn steal_share(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let ((steal0, total0), (steal1, total1)) = (before?, after?);
    (total1 > total0).then(|| steal1.saturating_sub(steal0) as f64 / (total1 - total0) as f64)
}

/// What a run builds its lab from: the scenario's topology at its dilation, the lab's
/// configuration, the planned flows and the base RTT they size from.
pub(crate) struct LabPlan {
    /// The topology, dilated.
    pub(crate) topology: crate::topology::Topology,
    /// How to build the lab.
    pub(crate) cfg: LabConfig,
    /// The workload's flows.
    pub(crate) plan: Vec<crate::workload::PlannedFlow>,
    /// The base RTT a lab of the topology gives its controllers (ns).
    pub(crate) base_rtt: u64,
}

impl LabPlan {
    /// The lab of `s` (at its dilation), its namespaces tagged `tag`, captured into `capture`.
    pub(crate) fn new(s: &Scenario, tag: &str, capture: Option<PathBuf>) -> LabPlan {
        let d = Dilation::new(s.dilation);
        let topology = d.topology(&s.topology);
        let mut cfg = LabConfig::new(tag);
        cfg.seed = s.seed;
        cfg.workers = s.runtime.workers;
        cfg.poll = s.runtime.poll;
        cfg.packet_io = s.runtime.packet_io;
        cfg.dilation = d;
        cfg.capture = capture;
        cfg.transport = s.transport;
        cfg.reconverge_ns = s.reconverge_ns;
        cfg.program_controller = s.controller.clone();
        cfg.transport.cnp_interval_ns = d.lab_ns(s.transport.cnp_interval_ns);
        let plan = s.flows();
        cfg.planned = plan.iter().map(|f| (f.src, f.dst, f.size)).collect();
        let base_rtt = lab::base_rtt_ns(&topology, &cfg);
        cfg.transport.sample_every_ns = base_rtt / 2;
        cfg.queue_trace_every_ns = base_rtt / 2;
        LabPlan {
            topology,
            cfg,
            plan,
            base_rtt,
        }
    }
}

/// Flow `k` of `plan` as its hosts are told it, starting at lab time `start_ns`.
pub(crate) fn flow_spec(
    topology: &crate::topology::Topology,
    plan: &[crate::workload::PlannedFlow],
    src_ports: &[u16],
    k: usize,
    start_ns: u64,
) -> FlowSpec {
    let f = &plan[k];
    FlowSpec {
        id: f.id,
        src: topology.nodes[f.src].address.expect("hosts have addresses"),
        dst: topology.nodes[f.dst].address.expect("hosts have addresses"),
        size: f.size,
        start_ns,
        kind: f.kind,
        src_port: src_ports[k],
    }
}

/// The controller flow `f` runs: `controller`, tuned to its application's delay sensitivity
/// when it belongs to one of `apps` (Netscope).
pub(crate) fn flow_controller(
    controller: &intlab_transport::cc::ControllerConfig,
    apps: &[crate::workload::Application],
    f: &crate::workload::PlannedFlow,
) -> intlab_transport::cc::ControllerConfig {
    controller.for_application(f.step.and_then(|st| apps[usize::from(st.app)].delay_sensitivity))
}

/// What each flow's controller is told of its path, from what its probes found (`reach`), and
/// each flow's host overhead (ns): a host probing many flows at once queues its own probes
/// behind each other, so a flow's probe RTT overstates what the hosts add; the least any flow
/// between the same two hosts measured is the hosts' overhead.
pub(crate) fn flow_paths(
    s: &Scenario,
    topology: &crate::topology::Topology,
    plan: &[crate::workload::PlannedFlow],
    reach: &[datapath::Reach],
) -> (Vec<FlowPath>, Vec<u64>) {
    let hop_bytes = results::int_hop_bytes(s);
    let mut least: std::collections::HashMap<(usize, usize), u64> = std::collections::HashMap::new();
    for (f, r) in plan.iter().zip(reach) {
        let o = base_rtt::host_overhead_ns(topology, &r.links, r.rtt_min_ns);
        least
            .entry((f.src, f.dst))
            .and_modify(|m| *m = (*m).min(o))
            .or_insert(o);
    }
    let overheads: Vec<u64> = plan.iter().map(|f| least[&(f.src, f.dst)]).collect();
    let mut paths: Vec<FlowPath> = reach
        .iter()
        .zip(&overheads)
        .map(|(r, &overhead)| FlowPath {
            base_rtt_ns: base_rtt::data_rtt_ns(topology, &r.links, s.transport.mtu, hop_bytes) + overhead,
            fabric_rtt_ns: 0,
            hops: r.links.len().saturating_sub(1) as u32,
        })
        .collect();
    let fabric_rtt_ns = paths.iter().map(|p| p.base_rtt_ns).max().unwrap_or(0);
    for p in &mut paths {
        p.fabric_rtt_ns = fabric_rtt_ns;
    }
    (paths, overheads)
}

/// Why a run stopped at flow `x`: where it was, and what every switch port dropped so far.
pub(crate) fn no_progress_report(lab: &Lab, x: &Stuck, src: &str, dst: &str) -> String {
    let mut out = format!(
        "flow {} ({src} -> {dst}) made no progress through {} retransmission timeouts in a row: {} of {} packets acknowledged",
        x.id,
        intlab_transport::flow::STUCK_AFTER_TIMEOUTS,
        x.packets_acked,
        x.packets
    );
    if x.packets_acked > 0 {
        out.push_str(&format!(
            " (last PSN acknowledged {})",
            (x.packets_acked - 1) & 0xff_ffff
        ));
    }
    let mut drops = Vec::new();
    for sw in lab.switch_counters() {
        for p in &sw.ports {
            for (why, n) in &p.drops {
                drops.push(format!("switch {} port {} dropped {n} ({why})", sw.switch, p.name));
            }
        }
    }
    if drops.is_empty() {
        out.push_str("; no switch dropped anything");
    } else {
        out.push_str("; ");
        out.push_str(&drops.join(", "));
    }
    out
}

/// Runs each `(label, folder, scenario)` of `series` in turn (`intlab compare`, `intlab
/// sweep`), saying which on `progress`; stops before the next once `stop` is raised. Namespace
/// tags are `tag` and the run's number. A failure names the run's label.
pub fn run_series(
    series: &[(String, PathBuf, &Scenario)],
    tag: char,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Vec<Results>, (String, RunError)> {
    if let Some((label, _, _)) = series.first() {
        crate::prerequisites::check().map_err(|e| (label.clone(), e.into()))?;
    }
    // Runs set side by side share one dilation: when one of them warns under `dilation: auto`,
    // every run of the series is made again one step up.
    let mut d = match series.iter().find(|(_, _, s)| picks_dilation(s)) {
        Some((label, _, s)) => Some(auto_start(s, progress).map_err(|e| (label.clone(), e))?),
        None => None,
    };
    let mut warned = Vec::new();
    'series: loop {
        let mut out = Vec::new();
        for (k, (label, dir, s)) in series.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            progress.step(&format!("run {} of {}: {label}", k + 1, series.len()));
            let opts = RunOptions {
                out: dir.clone(),
                capture: false,
                tag: format!("{tag}{k}"),
                force: !warned.is_empty(),
                live: Vec::new(),
            };
            let r = match d.filter(|_| picks_dilation(s)) {
                Some(at) => run_once(&at_dilation(s, at), &opts, stop, progress, &warned),
                None => run_once(s, &opts, stop, progress, &[]),
            }
            .map_err(|e| (label.clone(), e))?;
            if picks_dilation(s)
                && let Some(next) = step_up_after(&r, stop, progress)
            {
                warned.push(r.summary.dilation);
                d = Some(next);
                continue 'series;
            }
            out.push(r);
        }
        return Ok(out);
    }
}
