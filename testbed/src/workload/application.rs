//! Applications: iterative jobs, as HPC codes and training jobs run. Each iteration computes
//! for a while and then exchanges one message between pairs of its ranks; the next iteration
//! computes once every message of this one has been delivered (acknowledged). An
//! application's runtime therefore follows its message delays, which is what a controller
//! that knows an application's delay sensitivity (Netscope) tries to protect.

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
    /// The (sender, receiver) pairs of one iteration.
    pub fn pairs(&self) -> Vec<(usize, usize)> {
        let n = self.ranks.len();
        match self.exchange {
            Exchange::Ring if n == 2 => vec![(self.ranks[0], self.ranks[1]), (self.ranks[1], self.ranks[0])],
            Exchange::Ring => (0..n).map(|i| (self.ranks[i], self.ranks[(i + 1) % n])).collect(),
            Exchange::AllToAll => self
                .ranks
                .iter()
                .flat_map(|&s| self.ranks.iter().filter(move |&&d| d != s).map(move |&d| (s, d)))
                .collect(),
        }
    }
}

/// Which iteration of which application a flow carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Step {
    /// The application (its index in the workload).
    pub app: u16,
    /// The iteration, from 0.
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
    /// The plan indices of each step's flows.
    flows_of: HashMap<Step, Vec<usize>>,
    /// Flows of each step not yet completed, and the latest completion so far.
    pending: HashMap<Step, (usize, u64)>,
    step_of: HashMap<u32, Step>,
}

impl Iterations {
    /// For `plan`'s flows of `apps`, with time running `dilation` times slower in the lab.
    pub fn new(apps: &[Application], plan: &[PlannedFlow], dilation: f64) -> Iterations {
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
            compute_ns: apps
                .iter()
                .map(|a| (a.compute_ns as f64 * dilation).round() as u64)
                .collect(),
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
        Some(Release {
            flows,
            start_ns: *last + self.compute_ns[usize::from(step.app)],
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
        for iteration in 0..app.iterations {
            let start_ns = app.start_ns + u64::from(iteration + 1) * app.compute_ns;
            for &(src, dst) in &pairs {
                out.push(PlannedFlow {
                    id: first_id + out.len() as u32,
                    src,
                    dst,
                    size: app.message,
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
    fn an_iteration_starts_when_the_last_message_of_the_previous_one_is_in() {
        let apps = [app(vec![1, 2], Exchange::Ring, 3), app(vec![3, 4], Exchange::Ring, 2)];
        let plan = plan(&apps, 1);
        assert_eq!(plan.len(), 2 * 3 + 2 * 2);
        assert_eq!(plan.iter().filter(|f| !Iterations::is_deferred(f)).count(), 4);
        assert_eq!((plan[0].start_ns, plan[2].start_ns), (60, 110));
        // Dilation 2: compute takes 100 ns in the lab.
        let mut it = Iterations::new(&apps, &plan, 2.0);
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
