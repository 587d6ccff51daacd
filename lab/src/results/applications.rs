//! What each application (iterative job) of a run achieved: its runtime, the time of its
//! iterations and of its messages. Runtime increase over an isolated run is what delay
//! sensitivity is about (Netscope's Table 1).

use serde::Serialize;

use super::{FlowResult, Quantiles};
use crate::workload::Application;

/// One application's outcome, in scenario time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplicationResult {
    /// Its name in the scenario.
    pub name: String,
    /// Iterations planned.
    pub iterations: u32,
    /// Iterations whose every message was delivered.
    pub completed_iterations: u32,
    /// From its start to its last iteration's last message acknowledged (ns), if it finished.
    pub runtime_ns: Option<u64>,
    /// Each completed iteration's time, compute included (ns).
    pub iteration_ns: Option<Quantiles>,
    /// Mean message completion time (ns): the "message delivery time" runtime follows.
    pub message_mean_ns: Option<f64>,
    /// Its delay sensitivity c_a, as the scenario gave it.
    pub delay_sensitivity: Option<f64>,
}

/// The outcome of each of `apps` from its flows' records.
pub fn outcomes(apps: &[Application], flows: &[FlowResult]) -> Vec<ApplicationResult> {
    apps.iter()
        .enumerate()
        .map(|(a, app)| {
            let mine: Vec<&FlowResult> = flows
                .iter()
                .filter(|f| f.step.is_some_and(|s| usize::from(s.app) == a))
                .collect();
            // End of each step: its last message acknowledged; None if one never was.
            let phases = app.phases().max(1);
            let mut ends: Vec<Option<u64>> = vec![Some(0); app.iterations as usize];
            for f in &mine {
                let Some(step) = f.step else { continue };
                let end = f.fct_ns.map(|fct| f.start_ns + fct);
                let Some(slot) = ends.get_mut((step.iteration / phases) as usize) else {
                    continue;
                };
                *slot = slot.zip(end).map(|(a, b)| a.max(b));
            }
            let done: Vec<u64> = ends.iter().map_while(|e| *e).collect();
            let mut begin = app.start_ns;
            let iteration_ns = Quantiles::of(
                done.iter()
                    .map(|&e| {
                        let took = e.saturating_sub(begin);
                        begin = e;
                        took as f64
                    })
                    .collect(),
            );
            let fcts: Vec<u64> = mine.iter().filter_map(|f| f.fct_ns).collect();
            ApplicationResult {
                name: app.name.clone(),
                iterations: app.iterations,
                completed_iterations: done.len() as u32,
                runtime_ns: (done.len() == app.iterations as usize)
                    .then(|| done.last().map(|e| e.saturating_sub(app.start_ns)))
                    .flatten(),
                iteration_ns,
                message_mean_ns: (!fcts.is_empty()).then(|| fcts.iter().sum::<u64>() as f64 / fcts.len() as f64),
                delay_sensitivity: app.delay_sensitivity,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use intlab_transport::flow::MessageKind;

    use super::*;
    use crate::workload::{Exchange, Step};

    fn flow(app: u16, iteration: u32, start_ns: u64, fct_ns: Option<u64>) -> FlowResult {
        FlowResult {
            step: Some(Step { app, iteration }),
            ..FlowResult::fixture(0, start_ns, fct_ns)
        }
    }

    fn app(iterations: u32) -> Application {
        Application {
            name: "j".into(),
            ranks: vec![0, 1],
            exchange: Exchange::Ring,
            message: 1,
            compute_ns: 10,
            iterations,
            start_ns: 100,
            delay_sensitivity: Some(2.0),
            kind: MessageKind::Write,
        }
    }

    #[test]
    fn runtime_runs_to_the_last_message_of_the_last_iteration() {
        let flows = [
            flow(0, 0, 110, Some(40)),
            flow(0, 0, 110, Some(60)),
            flow(0, 1, 180, Some(20)),
            flow(0, 1, 180, Some(30)),
            flow(1, 0, 0, Some(1_000)),
        ];
        let r = &outcomes(&[app(2)], &flows)[0];
        assert_eq!((r.completed_iterations, r.runtime_ns), (2, Some(110)));
        // Iterations: 100 → 170 (70), 170 → 210 (40).
        assert_eq!(r.iteration_ns.map(|q| (q.p50, q.max)), Some((40.0, 70.0)));
        assert_eq!(r.message_mean_ns, Some(37.5));
    }

    #[test]
    fn an_unfinished_iteration_leaves_no_runtime() {
        let flows = [
            flow(0, 0, 110, Some(40)),
            flow(0, 0, 110, None),
            flow(0, 1, 180, Some(1)),
        ];
        let r = &outcomes(&[app(2)], &flows)[0];
        assert_eq!((r.completed_iterations, r.runtime_ns), (0, None));
    }
}
