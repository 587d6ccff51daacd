//! Whole labs built from the shipped topologies: every flow accounted for, nothing left behind.
//! Run as root (scripts/test).

use std::path::Path;
use std::time::Duration;

use intlab_testbed::lab::{Lab, LabConfig};
use intlab_testbed::netns;
use intlab_testbed::topology::load_str;
use intlab_transport::cc::{ControllerConfig, HpccConfig};
use intlab_transport::flow::{FlowSpec, MessageKind};

fn leftovers(prefix: &str) -> Vec<String> {
    netns::lab_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[test]
fn fat_tree_all_to_all_accounts_for_every_byte_and_leaves_nothing() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "run as root (scripts/test)");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/fat-tree-k4.yaml");
    let t = load_str(&std::fs::read_to_string(&path).expect("topology file"), &path).expect("valid topology");
    let mut cfg = LabConfig::new("ft");
    // Twenty switches and sixteen endpoints on two cores: poll less often than the default.
    cfg.idle_poll_ns = 500_000;
    let prefix = cfg.prefix.clone();
    let built = std::time::Instant::now();
    let lab = Lab::build(&t, &cfg).expect("lab builds");
    let setup = built.elapsed();
    let hosts: Vec<usize> = t.hosts().collect();
    let start_ns = cfg.origin.elapsed().as_nanos() as u64 + 50_000_000;
    let mut flows = Vec::new();
    for &a in &hosts {
        for &b in &hosts {
            if a != b {
                let id = flows.len() as u32 + 1;
                let size = 20_000 + 1000 * u64::from(id % 7);
                let f = FlowSpec {
                    id,
                    src: t.nodes[a].address.expect("address"),
                    dst: t.nodes[b].address.expect("address"),
                    size,
                    start_ns,
                    kind: MessageKind::Write,
                };
                lab.endpoint(b).expect(f);
                flows.push((a, f));
            }
        }
    }
    for (a, f) in &flows {
        lab.endpoint(*a)
            .send(*f, ControllerConfig::Hpcc(HpccConfig::paper_for(4)));
    }
    let all = lab.wait_finished(2 * flows.len(), Duration::from_secs(120));
    let report = lab.stop();
    eprintln!(
        "fat-tree k=4: setup {setup:?}, {} flows, all finished: {all}",
        flows.len()
    );
    assert!(setup < Duration::from_secs(30), "setup took {setup:?}");
    let sent: Vec<_> = report.hosts.iter().flat_map(|h| h.sent.iter()).collect();
    let received: Vec<_> = report.hosts.iter().flat_map(|h| h.received.iter()).collect();
    assert_eq!((sent.len(), received.len()), (flows.len(), flows.len()));
    for (_, f) in &flows {
        let r = received.iter().find(|r| r.id == f.id).expect("receiver record");
        let s = sent.iter().find(|s| s.id == f.id).expect("sender record");
        assert_eq!(r.bytes_ok, f.size, "flow {}: bytes received", f.id);
        assert_eq!(r.content_errors, 0);
        assert!(s.end_ns.is_some(), "flow {} acknowledged", f.id);
    }
    assert!(all);
    assert!(
        leftovers(&prefix).is_empty(),
        "namespaces left: {:?}",
        leftovers(&prefix)
    );
}
