//! One run of a scenario: build the lab (time dilation applied), start the workload, wait for
//! it with progress, stop on completion, on the scenario's duration or on a signal, and gather
//! and write the results. The lab is torn down on every path out, a panic included.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use intlab_switch::clock::Clock;
use intlab_switch::units::{Nanos, Rate};
use intlab_transport::flow::FlowSpec;

use crate::lab::{self, Lab, LabConfig, LabError};
use crate::results::{self, Ending, Results, Timebase, WriteError};
use crate::scenario::Scenario;
use crate::topology::Topology;
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
    /// The lab could not be built.
    #[error("building the lab: {0}")]
    Lab(#[from] LabError),
    /// A results file could not be written.
    #[error("writing results: {0}")]
    Write(#[from] WriteError),
}

/// How often the run looks at its flows, the clock and the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// Time between the lab being ready and the first flow, so every endpoint has its flows.
const START_MARGIN_NS: u64 = 20_000_000;

/// The topology as the lab runs it under dilation `d`: rates / d, delays × d.
pub fn dilate(t: &Topology, d: f64) -> Topology {
    let mut t = t.clone();
    for l in &mut t.links {
        l.props.rate = Rate(((l.props.rate.bps() as f64 / d).round() as u64).max(1));
        l.props.delay = Nanos((l.props.delay.0 as f64 * d).round() as u64);
    }
    t
}

/// Longest idle sleep of switch workers and endpoints: 50 us while the threads are few, longer
/// when they would otherwise spend the machine's cores waking up for nothing.
fn idle_poll_ns(t: &Topology) -> u64 {
    let threads = t.nodes.len() as u64;
    50_000 * (threads / 8).max(1)
}

/// CPU time stolen by the hypervisor and all CPU time so far, from /proc/stat (jiffies).
fn cpu_steal_and_total() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = cpu.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    let steal = *fields.get(7)?;
    Some((steal, fields.iter().take(8).sum()))
}

/// Runs `s`, writes its results into `opts.out`, and returns them. `stop` ends the run early
/// (its results are still written, marked interrupted).
pub fn run(
    s: &Scenario,
    opts: &RunOptions,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Results, RunError> {
    crate::prerequisites::check()?;
    results::write_scenario(&opts.out, &s.text)?;
    let d = s.dilation;
    let topology = dilate(&s.topology, d);
    let mut cfg = LabConfig::new(&opts.tag);
    cfg.origin = Clock::get().origin();
    cfg.seed = s.seed;
    cfg.idle_poll_ns = idle_poll_ns(&topology);
    if s.capture || opts.capture {
        let dir = opts.out.join("capture");
        std::fs::create_dir_all(&dir).map_err(|source| WriteError {
            file: dir.display().to_string(),
            source,
        })?;
        cfg.capture = Some(dir);
    }
    cfg.transport = s.transport;
    cfg.transport.cnp_interval_ns = (s.transport.cnp_interval_ns as f64 * d).round() as u64;
    let base_rtt = lab::base_rtt_ns(&topology, &cfg);
    cfg.transport.sample_every_ns = base_rtt / 2;
    cfg.queue_trace_every_ns = base_rtt / 2;

    progress.step(&format!(
        "building {} ({} hosts, {} switches)",
        s.topology.name,
        topology.hosts().count(),
        topology.switches().count()
    ));
    let lab = Lab::build(&topology, &cfg)?;
    let plan = s.flows();
    let apps = s.workload.applications();
    let controller = s.controller.dilated(d);
    let clock = Clock::get();
    let t0 = clock.now_ns() + START_MARGIN_NS;
    let spec = |f: &PlannedFlow, start_ns: u64| FlowSpec {
        id: f.id,
        src: topology.nodes[f.src].address.expect("hosts have addresses"),
        dst: topology.nodes[f.dst].address.expect("hosts have addresses"),
        size: f.size,
        start_ns,
        kind: f.kind,
    };
    let send = |f: &PlannedFlow, start_ns: u64| {
        let cc = controller.for_application(f.step.and_then(|st| apps[usize::from(st.app)].delay_sensitivity));
        lab.endpoint(f.src).send(spec(f, start_ns), cc);
    };
    // Every receiver is ready from the start, so a flow released late finds its QP.
    for f in &plan {
        lab.endpoint(f.dst).expect(spec(f, 0));
    }
    for f in plan.iter().filter(|f| !Iterations::is_deferred(f)) {
        send(f, t0 + (f.start_ns as f64 * d).round() as u64);
    }
    let mut iterations = Iterations::new(apps, &plan, d);
    let deadline = t0 + (s.duration.0 as f64 * d).round() as u64;
    let cpu_before = cpu_steal_and_total();
    progress.begin(plan.len() as u64);
    let ending = loop {
        // Completions release later iterations as soon as they arrive; the rest is polled.
        if let Ok(c) = lab.completions().recv_timeout(POLL) {
            for c in std::iter::once(c).chain(lab.completions().try_iter()) {
                if let Some(r) = iterations.complete(c.id, c.end_ns) {
                    for &k in &r.flows {
                        send(&plan[k], r.start_ns);
                    }
                }
            }
        }
        // Each completed flow counts at both ends.
        let finished = lab.finished();
        progress.advance((finished / 2) as u64);
        if finished >= 2 * plan.len() {
            break Ending::Completed;
        }
        if stop.load(Ordering::Relaxed) {
            break Ending::Interrupted;
        }
        if clock.now_ns() >= deadline {
            break Ending::TimedOut;
        }
    };
    progress.end();
    let cpu_after = cpu_steal_and_total();
    progress.step("stopping the lab");
    let report = lab.stop();
    let time = Timebase { t0_ns: t0, dilation: d };
    let mut results = Results::collect(s, &plan, report, time, ending);
    if let (Some((s0, t0)), Some((s1, t1))) = (cpu_before, cpu_after)
        && t1 > t0
    {
        results.summary.cpu_steal = Some(s1.saturating_sub(s0) as f64 / (t1 - t0) as f64);
    }
    progress.step("writing results");
    results::write_all(&opts.out, &results)?;
    Ok(results)
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
        };
        out.push(run(s, &opts, stop, progress).map_err(|e| (label.clone(), e))?);
    }
    Ok(out)
}
