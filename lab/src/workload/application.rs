//! Applications: iterative jobs, as HPC codes and training jobs run. Each iteration (a step)
//! computes for a while and then exchanges messages between its ranks; the next step computes
//! once every message of this one has been delivered (acknowledged). An application's runtime
//! therefore follows its message delays, which is what a controller that knows an
//! application's delay sensitivity (Netscope) tries to protect, and a collective's step is as
//! slow as its slowest flow, which is what tail FCT measures.
//!
//! A step's exchange runs in phases, each waiting for the one before: one phase for `ring` and
//! `all_to_all`; 2(n − 1) ring phases of message/n bytes for `all_reduce` over n ranks (the
//! reduce-scatter then all-gather of ring all-reduce).

use crate::dilation::Dilation;
use std::collections::HashMap;

use intlab_transport::flow::MessageKind;

use super::PlannedFlow;

/// Which pairs of ranks exchange a message in an iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exchange {
    /// Rank i sends to rank i + 1 (the last to the first): a ring step.
    #[default]
    Ring,
    /// Every rank sends to every other.
    AllToAll,
    /// Ring all-reduce of the message: 2(n − 1) ring phases of message/n bytes.
    AllReduce,
}

/// One iterative job.
#[derive(Debug, Clone, PartialEq)]
pub struct Application {
    /// Name in results.
    pub name: String,
    /// Its hosts (node indices), one rank each, in rank order.
    pub ranks: Vec<usize>,
    /// Who sends to whom in an iteration.
    pub exchange: Exchange,
    /// Bytes of each message.
    pub message: u64,
    /// Compute time before each iteration's exchange (ns).
    pub compute_ns: u64,
    /// Iterations to run.
    pub iterations: u32,
    /// When it starts computing (ns after the run begins).
    pub start_ns: u64,
    /// Its delay sensitivity c_a, given to a controller that uses one (Netscope).
    pub delay_sensitivity: Option<f64>,
    /// WRITE or SEND.
    pub kind: MessageKind,
}

impl Application {
    /// Phases of one step.
    pub fn phases(&self) -> u32 {
        match self.exchange {
            Exchange::AllReduce => 2 * (self.ranks.len() as u32).saturating_sub(1).max(1),
            Exchange::Ring | Exchange::AllToAll => 1,
        }
    }

    /// Bytes of each message of a phase.
    pub fn phase_bytes(&self) -> u64 {
        match self.exchange {
            Exchange::AllReduce => self.message.div_ceil(self.ranks.len().max(1) as u64).max(1),
            Exchange::Ring | Exchange::AllToAll => self.message,
        }
    }

    /// The (sender, receiver) pairs of one phase.
    pub fn pairs(&self) -> Vec<(usize, usize)> {
        let n = self.ranks.len();
        match self.exchange {
            Exchange::Ring if n == 2 => vec![(self.ranks[0], self.ranks[1]), (self.ranks[1], self.ranks[0])],
            Exchange::Ring | Exchange::AllReduce => (0..n).map(|i| (self.ranks[i], self.ranks[(i + 1) % n])).collect(),
            Exchange::AllToAll => self
                .ranks
                .iter()
                .flat_map(|&s| self.ranks.iter().filter(move |&&d| d != s).map(move |&d| (s, d)))
                .collect(),
        }
    }
}

/// Which phase of which application a flow carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Step {
    /// The application (its index in the workload).
    pub app: u16,
    /// The phase, counted over the whole run from 0: step = iteration / phases.
    pub iteration: u32,
}

/// Flows of a later iteration to start, and when (ns on the lab's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// Indices into the plan.
    pub flows: Vec<usize>,
    /// Their start: the previous iteration's last completion plus the compute time.
    pub start_ns: u64,
}

/// Tracks a run's iterations and releases each one when the one before it has completed.
#[derive(Debug, Clone)]
pub struct Iterations {
    /// Compute time of each application, on the lab's clock (ns).
    compute_ns: Vec<u64>,
    /// Phases per step of each application.
    phases: Vec<u32>,
    /// The plan indices of each step's flows.
    flows_of: HashMap<Step, Vec<usize>>,
    /// Flows of each step not yet completed, and the latest completion so far.
    pending: HashMap<Step, (usize, u64)>,
    step_of: HashMap<u32, Step>,
}

impl Iterations {
    /// For `plan`'s flows of `apps`, with time running `dilation` times slower in the lab.
    pub fn new(apps: &[Application], plan: &[PlannedFlow], dilation: Dilation) -> Iterations {
        let mut flows_of: HashMap<Step, Vec<usize>> = HashMap::new();
        let mut step_of = HashMap::new();
        for (k, f) in plan.iter().enumerate() {
            if let Some(step) = f.step {
                flows_of.entry(step).or_default().push(k);
                step_of.insert(f.id, step);
            }
        }
        let pending = flows_of.iter().map(|(&s, f)| (s, (f.len(), 0))).collect();
        Iterations {
            compute_ns: apps.iter().map(|a| dilation.lab_ns(a.compute_ns)).collect(),
            phases: apps.iter().map(Application::phases).collect(),
            flows_of,
            pending,
            step_of,
        }
    }

    /// Whether flow `f` waits for an earlier iteration (it is not started with the others).
    pub fn is_deferred(f: &PlannedFlow) -> bool {
        f.step.is_some_and(|s| s.iteration > 0)
    }

    /// Flow `id` completed at `end_ns`: the next iteration of its application, if this one is
    /// now complete and there is a next.
    pub fn complete(&mut self, id: u32, end_ns: u64) -> Option<Release> {
        let step = *self.step_of.get(&id)?;
        let (left, last) = self.pending.get_mut(&step)?;
        *left = left.checked_sub(1)?;
        *last = (*last).max(end_ns);
        if *left > 0 {
            return None;
        }
        let next = Step {
            app: step.app,
            iteration: step.iteration + 1,
        };
        let flows = self.flows_of.get(&next)?.clone();
        let app = usize::from(step.app);
        // Compute comes before a step's first phase only.
        let compute = if next.iteration.is_multiple_of(self.phases[app].max(1)) {
            self.compute_ns[app]
        } else {
            0
        };
        Some(Release {
            flows,
            start_ns: *last + compute,
        })
    }
}

/// Plans every flow of `apps`, numbering from `first_id`: iteration 0 starts after the first
/// compute; later iterations are released by [`Iterations`] (their `start_ns` is the earliest
/// they could start, were every message instant).
pub(super) fn plan(apps: &[Application], first_id: u32) -> Vec<PlannedFlow> {
    let mut out = Vec::new();
    for (a, app) in apps.iter().enumerate() {
        let pairs = app.pairs();
        let phases = app.phases();
        for iteration in 0..app.iterations * phases {
            let start_ns = app.start_ns + u64::from(iteration / phases + 1) * app.compute_ns;
            for &(src, dst) in &pairs {
                out.push(PlannedFlow {
                    id: first_id + out.len() as u32,
                    src,
                    dst,
                    size: app.phase_bytes(),
                    start_ns,
                    kind: app.kind,
                    step: Some(Step {
                        app: a as u16,
                        iteration,
                    }),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(ranks: Vec<usize>, exchange: Exchange, iterations: u32) -> Application {
        Application {
            name: "a".into(),
            ranks,
            exchange,
            message: 1000,
            compute_ns: 50,
            iterations,
            start_ns: 10,
            delay_sensitivity: None,
            kind: MessageKind::Write,
        }
    }

    #[test]
    fn exchanges_pair_the_ranks() {
        assert_eq!(app(vec![4, 7], Exchange::Ring, 1).pairs(), [(4, 7), (7, 4)]);
        assert_eq!(app(vec![1, 2, 3], Exchange::Ring, 1).pairs(), [(1, 2), (2, 3), (3, 1)]);
        assert_eq!(
            app(vec![1, 2, 3], Exchange::AllToAll, 1).pairs(),
            [(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]
        );
    }

    #[test]
    fn an_all_reduce_step_is_2n_minus_2_ring_phases_with_compute_before_the_first() {
        let mut a = app(vec![1, 2, 3], Exchange::AllReduce, 2);
        a.message = 3000;
        assert_eq!((a.phases(), a.phase_bytes()), (4, 1000));
        let plan = plan(std::slice::from_ref(&a), 1);
        assert_eq!(plan.len(), 2 * 4 * 3, "2 steps × 4 phases × 3 ring sends");
        let mut it = Iterations::new(std::slice::from_ref(&a), &plan, Dilation::new(1.0));
        // Phase 0 (flows 1-3) done at 500: phase 1 starts at once.
        it.complete(1, 400);
        it.complete(2, 450);
        assert_eq!(it.complete(3, 500).map(|r| r.start_ns), Some(500));
        // Phase 3 ends the first step: phase 4 (step 2) computes 50 ns first.
        for id in 4..=9 {
            it.complete(id, 600);
        }
        assert_eq!(it.complete(10, 700).map(|r| r.start_ns), None);
        it.complete(11, 700);
        assert_eq!(it.complete(12, 800).map(|r| (r.flows[0], r.start_ns)), Some((12, 850)));
    }

    #[test]
    fn an_iteration_starts_when_the_last_message_of_the_previous_one_is_in() {
        let apps = [app(vec![1, 2], Exchange::Ring, 3), app(vec![3, 4], Exchange::Ring, 2)];
        let plan = plan(&apps, 1);
        assert_eq!(plan.len(), 2 * 3 + 2 * 2);
        assert_eq!(plan.iter().filter(|f| !Iterations::is_deferred(f)).count(), 4);
        assert_eq!((plan[0].start_ns, plan[2].start_ns), (60, 110));
        // Dilation 2: compute takes 100 ns in the lab.
        let mut it = Iterations::new(&apps, &plan, Dilation::new(2.0));
        assert_eq!(it.complete(1, 1_000), None);
        // Flow 2 completes the first iteration of app 0: flows 3 and 4 start 100 ns later.
        assert_eq!(
            it.complete(2, 900),
            Some(Release {
                flows: vec![2, 3],
                start_ns: 1_100
            })
        );
        // A flow completing twice, or a flow of no application, releases nothing.
        assert_eq!(it.complete(2, 950), None);
        assert_eq!(it.complete(99, 950), None);
        // App 1's second iteration (flows 9, 10) is its last: nothing after it.
        assert_eq!(it.complete(7, 10), None);
        assert_eq!(
            it.complete(8, 20),
            Some(Release {
                flows: vec![8, 9],
                start_ns: 120
            })
        );
        assert_eq!(it.complete(9, 500), None);
        assert_eq!(it.complete(10, 600), None);
    }
}
