//! Every topology in `topologies/` loads, has the shape its comment promises, and routes every
//! host from every switch, with the ECMP fan-out the shape implies.

use std::path::{Path, PathBuf};

use intlab_testbed::topology::{Topology, load_str, shortest_paths};

fn load(name: &str) -> Topology {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    load_str(&text, &path).unwrap_or_else(|e| panic!("{e}"))
}

fn counts(t: &Topology) -> (usize, usize) {
    (t.hosts().count(), t.switches().count())
}

/// Every switch reaches every host; returns the largest number of next hops seen.
fn check_reachability(t: &Topology) -> usize {
    let r = shortest_paths(t);
    let mut widest = 0;
    for s in t.switches() {
        for h in t.hosts() {
            let n = r.next[s][h].len();
            assert!(
                n > 0,
                "{}: switch {} cannot reach {}",
                t.name,
                t.nodes[s].name,
                t.nodes[h].name
            );
            widest = widest.max(n);
        }
    }
    widest
}

#[test]
fn every_shipped_topology_loads_and_routes() {
    let shapes = [
        ("dumbbell.yaml", 4, 2, 1),
        ("incast-4to1.yaml", 5, 1, 1),
        ("incast-16to1.yaml", 17, 1, 1),
        ("leaf-spine.yaml", 16, 6, 2),
        ("fat-tree-k4.yaml", 16, 20, 2),
        ("parking-lot.yaml", 8, 4, 1),
    ];
    for (file, hosts, switches, ecmp) in shapes {
        let t = load(file);
        assert_eq!(counts(&t), (hosts, switches), "{file}");
        assert_eq!(check_reachability(&t), ecmp, "{file}: widest ECMP group");
    }
    let files = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies"))
        .expect("topologies folder")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        })
        .count();
    assert_eq!(files, shapes.len(), "a topology file without a test");
}

#[test]
fn fat_tree_spreads_over_aggregation_then_core() {
    let t = load("fat-tree-k4.yaml");
    let r = shortest_paths(&t);
    let edge = t.node("p1edge1").expect("edge switch");
    let agg = t.node("p1agg1").expect("aggregation switch");
    let core = t.node("core1").expect("core switch");
    let local = t.node("h2").expect("host on the same edge");
    let same_pod = t.node("h3").expect("host in the same pod");
    let far = t.node("h16").expect("host in pod 4");
    assert_eq!(r.next[edge][local].len(), 1, "a host on the same edge switch: direct");
    assert_eq!(r.next[edge][same_pod].len(), 2, "same pod: either aggregation switch");
    assert_eq!(r.next[edge][far].len(), 2, "another pod: either aggregation switch");
    assert_eq!(r.next[agg][far].len(), 2, "then either of its core switches");
    assert_eq!(
        r.next[core][far].len(),
        1,
        "a core switch has one way down into each pod"
    );
}
