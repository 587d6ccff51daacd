//! Every topology in `topologies/` loads, has the shape its comment promises, and routes every
//! host from every switch, with the ECMP fan-out the shape implies.

use std::path::{Path, PathBuf};

use intlab_lab::scenario::{Overrides, Scenario};
use intlab_lab::topology::{Topology, shortest_paths};

/// A shipped file as a whole scenario (every one has a workload: flows or programs),
/// returning its topology.
fn load(name: &str) -> Topology {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(name);
    let s = Scenario::load(&path, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !s.flows().is_empty() || !s.programs.is_empty(),
        "{name}: no flows and no programs"
    );
    s.topology
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
        ("incast-4to1-dc.yaml", 5, 1, 1),
        ("perftest-incast-4to1.yaml", 5, 1, 1),
        ("incast-16to1.yaml", 17, 1, 1),
        ("leaf-spine.yaml", 16, 6, 2),
        ("fat-tree-k4.yaml", 16, 20, 2),
        ("fat-tree-k8.yaml", 128, 80, 4),
        ("qp-8192.yaml", 64, 12, 4),
        ("parking-lot.yaml", 8, 4, 1),
        ("two-apps-dc.yaml", 4, 2, 1),
        ("hpcc-ablations.yaml", 9, 1, 1),
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

/// The scenario the bad-input tests break one line at a time (line numbers matter).
const GOOD: &str = "\
name: t
defaults:
  link: { rate: 100Mbps, delay: 10us }
nodes:
  s1: { kind: switch }
  h1: { kind: host }
  h2: { kind: host, address: 198.18.0.9 }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
  - endpoints: [\"s1:eth2\", \"h2:eth0\"]
    rate: 1Gbps
workload:
  incast: { senders: [h1], receiver: h2, size: 1MB }
transport: { mtu: 1024 }
";

/// Runs `intlab run` on `text` as a file and returns (success, stderr).
fn run_file(name: &str, text: &str, extra: &[&str]) -> (bool, String) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write scenario");
    let out = dir.join(format!("{name}-results"));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_intlab"))
        .arg("run")
        .arg(&file)
        .args(extra)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("intlab runs");
    assert!(!out.exists(), "{name}: a results folder was created for a bad scenario");
    (o.status.success(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn bad_scenarios_fail_with_file_line_column_and_expectation_and_build_nothing() {
    let before = intlab_lab::netns::lab_namespaces()
        .expect("the lab namespaces listed")
        .len();
    let (ok, err) = run_file("good.yaml", GOOD, &["--set", "workload.incast.size=0B"]);
    assert!(!ok && err.contains("size above zero"), "{err}");
    let (ok, err) = run_file("good.yaml", GOOD, &["--set", "name="]);
    assert!(!ok && err.contains("--set name=: expected a value after `=`"), "{err}");
    let (ok, err) = run_file("good.yaml", GOOD, &["--set", "name=null"]);
    assert!(
        !ok && err.contains("expected a value, got none") && !err.contains("Option<"),
        "{err}"
    );
    let (ok, err) = run_file("good.yaml", GOOD, &["--set", "dilation=1000000"]);
    assert!(!ok && err.contains("runs links[0]'s 100Mbps below 1 kb/s"), "{err}");
    assert_eq!(err.lines().count(), 1, "one message, once: {err}");
    let looped = "name: t\ndefaults:\n  link: { rate: 100Mbps }\nnodes:\n  s1: { kind: switch }\n  s2: { kind: switch }\n  h1: { kind: host }\n  h2: { kind: host }\nlinks:\n  - endpoints: [\"s1:eth1\", \"h1:eth0\"]\n  - endpoints: [\"s2:eth1\", \"h2:eth0\"]\n  - endpoints: [\"s1:eth2\", \"s2:eth2\"]\nroutes:\n  - { switch: s2, to: h2, via: [eth2] }\nworkload:\n  incast: { senders: [h1], receiver: h2, size: 1MB }\n";
    let cases: [(&str, String, &str, &str); 21] = [
        (
            "loop.yaml",
            looped.to_owned(),
            ":14:5:",
            "routes[0]: a forwarding loop towards `h2`: s1 -> s2 -> s1",
        ),
        (
            "escape.yaml",
            GOOD.replace("name: t", "name: ../../escape"),
            ":1:7:",
            "name: `../../escape`: `/` is not allowed",
        ),
        (
            "slash.yaml",
            GOOD.replace("h1: { kind: host }", "h1/x: { kind: host }")
                .replace("h1:eth0", "h1/x:eth0"),
            ":6:",
            "node name: `h1/x`: `/` is not allowed",
        ),
        (
            "space.yaml",
            GOOD.replace("h1: { kind: host }", "\"h 1\": { kind: host }"),
            ":6:",
            "node name: `h 1`: ` ` is not allowed",
        ),
        (
            "long-node.yaml",
            GOOD.replace("h1: { kind: host }", &format!("{}: {{ kind: host }}", "h".repeat(33))),
            ":6:",
            "expected 1 to 32 characters",
        ),
        (
            "lo.yaml",
            GOOD.replace("h1:eth0", "h1:lo"),
            ":9:",
            "interface `lo`: that is every namespace's loopback",
        ),
        (
            "long-interface.yaml",
            GOOD.replace("h1:eth0", "h1:ethernet01234567"),
            ":9:",
            "interface `ethernet01234567`: expected 1 to 15 characters",
        ),
        (
            "buffer.yaml",
            GOOD.replace("delay: 10us }", "delay: 10us, buffer: 0 }"),
            ":9:",
            "buffer 0 B holds no full-size Ethernet frame",
        ),
        (
            "slow.yaml",
            GOOD.replace("rate: 1Gbps", "rate: 500bps"),
            ":10:",
            "links[1]: rate 0.5kbps: expected 1 kb/s to 4.29 Tb/s",
        ),
        (
            "fast.yaml",
            GOOD.replace("rate: 1Gbps", "rate: 5Tbps"),
            ":10:",
            "expected 1 kb/s to 4.29 Tb/s",
        ),
        (
            "broadcast.yaml",
            GOOD.replace("198.18.0.9", "198.19.255.255"),
            ":7:",
            "198.19.255.255 is the network's own or its broadcast address",
        ),
        (
            "duplicate-node.yaml",
            GOOD.replace("  h2: { kind: host, address: 198.18.0.9 }", "  h1: { kind: host }"),
            ":7:3:",
            "`h1` is given twice: expected each name once",
        ),
        (
            "eta.yaml",
            format!("{GOOD}controller: {{ name: hpcc, eta: -5 }}\n"),
            ":15:",
            "controller.eta: expected a utilization in (0, 1], got -5",
        ),
        (
            "bad-policy.yaml",
            format!("{GOOD}controller: {{ name: rlcc, policy: /nonexistent/p.json }}\n"),
            ":15:",
            "controller.policy: /nonexistent/p.json",
        ),
        (
            "indent.yaml",
            GOOD.replace("    rate: 1Gbps", "      rate: 1Gbps"),
            ":11:7:",
            "expected the indentation of the lines above",
        ),
        (
            "unknown-key.yaml",
            GOOD.replace("h1: { kind: host }", "h1: { kind: host, colour: red }"),
            ":6:",
            "colour",
        ),
        (
            "missing-node.yaml",
            GOOD.replace("h2:eth0", "h9:eth0"),
            ":10:",
            "no node `h9`",
        ),
        (
            "negative-rate.yaml",
            GOOD.replace("rate: 1Gbps", "rate: -1Gbps"),
            ":11:",
            "rate",
        ),
        (
            "duplicate-address.yaml",
            GOOD.replace("198.18.0.9", "198.18.0.1"),
            ":7:",
            "duplicate address 198.18.0.1",
        ),
        (
            "workload-host.yaml",
            GOOD.replace("senders: [h1]", "senders: [h7]"),
            ":13:",
            "expected the name of a host, got `h7`",
        ),
        (
            "mtu.yaml",
            GOOD.replace("mtu: 1024", "mtu: 1500"),
            ":14:",
            "expected a RoCE MTU",
        ),
    ];
    for (name, text, at, what) in cases {
        let (ok, err) = run_file(name, &text, &[]);
        assert!(!ok, "{name} was accepted");
        assert!(err.contains(&format!("{name}{at}")), "{name}: no file:line: in {err}");
        assert!(err.contains(what), "{name}: `{what}` not in {err}");
    }
    assert_eq!(
        intlab_lab::netns::lab_namespaces()
            .expect("the lab namespaces listed")
            .len(),
        before,
        "a namespace was created"
    );
}
