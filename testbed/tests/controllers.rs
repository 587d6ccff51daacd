//! Every controller on the same datacenter-scale 4-to-1 incast (`topologies/incast-4to1-dc.yaml`,
//! 10 Gb/s run 100 times slower): each completes every flow intact, and HPCC's queue stays far
//! below DCQCN's. Run as root (scripts/test).

mod support;

use std::path::Path;

use intlab_testbed::results::Results;
use intlab_testbed::scenario::{Overrides, Scenario};

fn run_with(cc: &str) -> Results {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/incast-4to1-dc.yaml");
    let overrides = Overrides {
        controller: Some(cc.into()),
        set: vec![],
    };
    let s = Scenario::load(&path, &overrides).expect("the shipped scenario loads");
    support::run_scenario(&format!("cc-{}", cc.replace('+', "p")), &s)
}

#[test]
fn every_controller_completes_the_incast_and_hpcc_queues_least() {
    support::require_root();
    let _serial = support::serial();
    let mut p99 = Vec::new();
    for cc in ["hpcc", "hpcc++", "dcqcn", "swift", "dctcp", "timely"] {
        let r = run_with(cc);
        assert_eq!(r.summary.completed, 4, "{cc}: every flow completes");
        for f in &r.flows {
            assert_eq!(f.bytes_received, f.size, "{cc}: flow {} intact", f.id);
        }
        p99.push((cc, r.summary.bottleneck_queue.expect("a bottleneck").p99));
    }
    eprintln!("bottleneck queue p99 (bytes): {p99:?}");
    let of = |name: &str| p99.iter().find(|(c, _)| *c == name).map(|x| x.1).unwrap_or(0.0);
    assert!(
        of("hpcc") * 5.0 <= of("dcqcn"),
        "HPCC's queue p99 {} is not 5x below DCQCN's {}",
        of("hpcc"),
        of("dcqcn")
    );
}
