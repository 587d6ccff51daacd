//! The workload's time and its report: when it starts on the lab clock, how it ends, what the
//! hypervisor took meanwhile, and the one way a stopped lab (or the sites' stopped parts,
//! merged) becomes a run's results.

use std::sync::atomic::{AtomicBool, Ordering};

use intlab_runtime::clock::Clock;
use intlab_transport::flow::FlowPath;

use super::running::StoppedLab;
use crate::dilation::Dilation;
use crate::results::{Ending, Measurements, Results, RunRecord, Timebase};
use crate::scenario::Scenario;
use crate::workload::{Iterations, PlannedFlow};

/// The workload's clock, from its start on the lab clock.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadClock {
    t0_ns: u64,
    dilation: Dilation,
    cpu_before: Option<(u64, u64)>,
}

/// The workload's time once over: its span on the lab clock, how it ended, and the share of
/// the CPU time the hypervisor took meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    /// How the lab's clock maps onto the scenario's.
    pub time: Timebase,
    /// How the workload ended.
    pub ending: Ending,
    /// Share of this machine's CPU time the hypervisor took (None when unreadable).
    pub cpu_steal: Option<f64>,
}

impl WorkloadClock {
    /// A workload at dilation `dilation` starting `margin_ns` from now, so that every host
    /// has its flows before the first is due.
    pub fn start_in(margin_ns: u64, dilation: Dilation) -> WorkloadClock {
        WorkloadClock {
            t0_ns: Clock::get().now_ns() + margin_ns,
            dilation,
            cpu_before: cpu_steal_and_total(),
        }
    }

    /// The start (lab ns).
    pub fn t0_ns(&self) -> u64 {
        self.t0_ns
    }

    /// Lab time of scenario time `scenario_ns` after the start.
    pub fn at(&self, scenario_ns: u64) -> u64 {
        self.t0_ns + self.dilation.lab_ns(scenario_ns)
    }

    /// The flows of `flows` sent at the start (plan index, start in lab ns, path from `paths`):
    /// every one but the later iterations of an application, which their predecessors release.
    pub fn first_sends<'a>(
        &'a self,
        flows: &'a [PlannedFlow],
        paths: &'a [FlowPath],
    ) -> impl Iterator<Item = (usize, u64, FlowPath)> + 'a {
        flows
            .iter()
            .enumerate()
            .filter(|(_, f)| !Iterations::is_deferred(f))
            .map(|(k, f)| (k, self.at(f.start_ns), paths[k]))
    }

    /// Whether scenario time `duration_ns` after the start has passed.
    pub fn past(&self, duration_ns: u64) -> bool {
        Clock::get().now_ns() >= self.at(duration_ns)
    }

    /// The workload is over now, ended by `ending`.
    pub fn end(self, ending: Ending) -> Ended {
        let end_ns = Clock::get().now_ns();
        Ended {
            time: Timebase {
                t0_ns: self.t0_ns,
                end_ns,
                dilation: self.dilation,
            },
            ending,
            cpu_steal: steal_share(self.cpu_before, cpu_steal_and_total()),
        }
    }
}

/// How a workload ends now, if it does: everything it waits for `done` (each flow counted at
/// both ends, the programs it waits for exited), a flow `stuck`, a `stop` asked, the duration
/// `over`; None while it goes on.
pub fn ending_now(done: bool, stuck: bool, stop: &AtomicBool, over: bool) -> Option<Ending> {
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

/// What the workload's drivers knew besides the stopped lab: each flow's path as its
/// controller was told it, the host overhead its probes measured, why no flow moved (when
/// that ended it) and the dilations `dilation: auto` tried before.
#[derive(Debug)]
pub struct Watched<'a> {
    /// Each flow's path (plan order).
    pub paths: &'a [FlowPath],
    /// Each flow's host overhead (ns, plan order).
    pub host_overhead_ns: &'a [u64],
    /// Why no flow moved, when that ended the workload.
    pub diagnosis: Option<String>,
    /// Dilations tried before this one and found too fast.
    pub dilation_warned: &'a [f64],
}

/// The results of scenario `s` from its `stopped` lab (a lab over sites: the sites' reports
/// merged), its time `ended` and what its driver `watched`.
pub fn report(s: &Scenario, stopped: StoppedLab, ended: Ended, watched: Watched<'_>) -> Results {
    Results::of_run(
        s,
        RunRecord {
            plan: &stopped.plan.flows,
            report: stopped.report,
            time: ended.time,
            measured: Measurements {
                paths: watched.paths,
                host_overhead_ns: watched.host_overhead_ns,
            },
            ending: ended.ending,
            network_events: stopped.network_events,
            diagnosis: watched.diagnosis,
            dilation_warned: watched.dilation_warned.to_vec(),
            cpu_steal: ended.cpu_steal,
        },
    )
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

/// The share of the CPU time the hypervisor took between two readings of
/// [`cpu_steal_and_total`] (None when either is missing).
fn steal_share(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let ((steal0, total0), (steal1, total1)) = (before?, after?);
    (total1 > total0).then(|| steal1.saturating_sub(steal0) as f64 / (total1 - total0) as f64)
}
