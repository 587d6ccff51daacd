//! A whole shipped scenario through the library's run: fat-tree k=4, every host sending to
//! every other host (240 flows); every flow accounted for, nothing left behind. Run as root
//! (scripts/test).

mod support;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use intlab_testbed::netns;
use intlab_testbed::results::Ending;
use intlab_testbed::run::{Progress, RunOptions, run};
use intlab_testbed::scenario::{Overrides, Scenario};
use intlab_testbed::workload::Workload;

/// Notes when the lab was being built and when the flows started.
#[derive(Default)]
struct Timings {
    building: Option<Instant>,
    setup: Option<Duration>,
}

impl Progress for Timings {
    fn step(&mut self, what: &str) {
        if what.starts_with("building") {
            self.building = Some(Instant::now());
        }
    }

    fn begin(&mut self, _flows: u64) {
        self.setup = self.building.map(|b| b.elapsed());
    }

    fn advance(&mut self, _done: u64) {}

    fn end(&mut self) {}
}

#[test]
fn fat_tree_all_to_all_accounts_for_every_byte_and_leaves_nothing() {
    support::require_root();
    let _serial = support::serial();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/fat-tree-k4.yaml");
    let s = Scenario::load(&path, &Overrides::default()).expect("the shipped scenario loads");
    assert!(matches!(s.workload, Workload::AllToAll { .. }));
    let opts = RunOptions {
        out: support::scratch_dir("fat-tree"),
        capture: false,
        tag: "ft".into(),
    };
    let prefix = format!("{}ft{}-", netns::PREFIX, std::process::id() % 100_000);
    let mut timings = Timings::default();
    let r = run(&s, &opts, &AtomicBool::new(false), &mut timings).expect("the run completes");
    let setup = timings.setup.expect("flows started");
    eprintln!(
        "fat-tree k=4: setup {setup:?}\n{}",
        intlab_testbed::results::summary_table(&r.summary)
    );
    assert_eq!(r.flows.len(), 16 * 15);
    for f in &r.flows {
        assert_eq!(
            f.bytes_received, f.size,
            "flow {} ({} -> {}): bytes received",
            f.id, f.src, f.dst
        );
        assert!(f.fct_ns.is_some(), "flow {} acknowledged", f.id);
    }
    assert_eq!(r.summary.ending, Ending::Completed);
    assert_eq!((r.summary.content_errors, r.summary.bad_icrc), (0, 0));
    assert!(setup < Duration::from_secs(30), "setup took {setup:?}");
    let left: Vec<String> = netns::lab_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}
