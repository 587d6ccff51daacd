//! One run of a scenario: build the lab (time dilation applied), start the workload, wait for
//! it with progress, stop on completion, on the scenario's duration or on a signal, and gather
//! and write the results. The lab is torn down on every path out, a panic included.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use intlab_runtime::clock::Clock;
use intlab_transport::flow::{FlowEvent, FlowPath, Stuck};

use crate::datapath::DataPathError;
use crate::host_programs::{HostPrograms, RunLabRecord};
use crate::lab::LabError;
use crate::life_cycle::{self, LabPlan, RunningLab, StartError, Watched, WorkloadClock, ending_now, flow_paths};
use crate::results::{self, Ending, Results, WriteError};
use crate::scenario::Scenario;
use crate::workload::Iterations;

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

impl From<StartError> for RunError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Host { host, error } => RunError::Host {
                host,
                error: error.to_string(),
            },
            StartError::Events(e) => RunError::Events(e),
            StartError::NotHere(m) => RunError::Sites(m),
        }
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
    let capture = capture_folder(s, opts)?;
    let plan = LabPlan::of_run(s, &opts.tag, capture);
    progress.step(&format!(
        "building {} ({} hosts, {} switches)",
        s.topology.name,
        plan.topology.hosts().count(),
        plan.topology.switches().count()
    ));
    let mut running = RunningLab::build(plan)?;
    let shown = Shown(&opts.live);
    for server in shown.0 {
        server.show(running.lab().view(running.plan().dilation.factor()));
    }
    progress.step("checking the data path");
    let every: Vec<usize> = (0..running.plan().flows.len()).collect();
    let reach = match running.probe(&every) {
        Ok(r) => r,
        Err(e) => {
            drop(running);
            results::write_text(&opts.out, results::DATAPATH, &e.report)?;
            return Err(e.into());
        }
    };
    let (paths, overheads) = flow_paths(running.plan(), &reach);
    let clock = WorkloadClock::start_in(START_MARGIN_NS, running.plan().dilation);
    let sends: Vec<(usize, u64, FlowPath)> = clock.first_sends(&running.plan().flows, &paths).collect();
    running.start(clock.t0_ns(), &sends)?;
    let plan = running.plan();
    let mut iterations = Iterations::new(&plan.applications, &plan.flows, plan.dilation);
    let (record, mut programs) = host_programs(s, &running, opts)?;
    if !s.programs.is_empty() {
        progress.step(&format!(
            "running {} programs in the hosts (their output: {})",
            s.programs.len(),
            opts.out.join(crate::host_programs::OUTPUT_FOLDER).display()
        ));
    }
    progress.begin(plan.flows.len() as u64);
    let lab = running.lab();
    let now = || Clock::get().now_ns();
    let mut stuck: Option<Stuck> = None;
    let ending = loop {
        let next_program =
            programs.start_due(lab, now().saturating_sub(clock.t0_ns()), |ns| plan.dilation.lab_ns(ns))?;
        let wait = next_program.map_or(POLL, |at| {
            POLL.min(Duration::from_nanos((clock.t0_ns() + at).saturating_sub(now())))
        });
        // Completions release later iterations as soon as they arrive; the rest is polled.
        if let Ok(e) = lab.events().recv_timeout(wait) {
            let events = std::iter::once(e).chain(lab.events().try_iter());
            for (k, start_ns) in released(events, &mut iterations, &mut stuck) {
                running.send(k, start_ns, paths[k])?;
            }
        }
        let finished = lab.finished();
        progress.advance((finished / 2) as u64);
        programs.reap();
        let done = finished >= 2 * plan.flows.len() && !programs.holding_the_run();
        if let Some(e) = ending_now(done, stuck.is_some(), stop, clock.past(s.duration.0)) {
            break e;
        }
    };
    // Before the lab stops, so that their QPs end on a running NIC.
    let programs = programs.finish();
    drop(record);
    let ended = clock.end(ending);
    let diagnosis = stuck.map(|x| running.no_progress_report(&x));
    progress.end();
    progress.step("stopping the lab");
    drop(shown);
    let stopped = running.stop();
    let failed_host = stopped.report.failed_hosts.first().cloned();
    let watched = Watched {
        paths: &paths,
        host_overhead_ns: &overheads,
        diagnosis,
        dilation_warned: warned,
    };
    let mut results = life_cycle::report(s, stopped, ended, watched);
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
    running: &RunningLab,
    opts: &RunOptions,
) -> Result<(Option<RunLabRecord>, HostPrograms), RunError> {
    let (lab, plan) = (running.lab(), running.plan());
    let record = match s.programs.is_empty() {
        true => None,
        false => Some(
            RunLabRecord::write(lab, &plan.topology, &s.file, &plan.cfg.prefix, &opts.tag)
                .map_err(RunError::ProgramsRecord)?,
        ),
    };
    let env = record.as_ref().map_or_else(Vec::new, |r| r.environment(&opts.out));
    let names = |n: usize| plan.topology.nodes[n].name.clone();
    let programs = HostPrograms::new(&s.programs, names, &opts.out, &s.dir, env).map_err(|cause| WriteError {
        file: opts.out.join(crate::host_programs::OUTPUT_FOLDER).display().to_string(),
        cause,
    })?;
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
