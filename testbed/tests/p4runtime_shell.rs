//! p4runtime-shell, unchanged (PyPI's, in the venv scripts/test makes), drives a lab's P4
//! switches as it drives BMv2's simple_switch_grpc: the tutorials-style topology of
//! tests/p4/tutorial imported without its runtime files, brought up with `intlab up`, each
//! switch's pipeline set and its tables written over P4Runtime, then every host pings every
//! other through the switches.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{Labs, intlab, intlab_ok as ok};

/// The Python with p4runtime-shell: INTLAB_P4RUNTIME_PYTHON, else scripts/test's venv.
fn python() -> PathBuf {
    let p = std::env::var_os("INTLAB_P4RUNTIME_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/p4runtime-venv/bin/python"),
        PathBuf::from,
    );
    assert!(
        p.exists(),
        "{} not found: scripts/test makes a venv with p4runtime-shell there (or set INTLAB_P4RUNTIME_PYTHON)",
        p.display()
    );
    p
}

#[test]
fn p4runtime_shell_sets_the_pipelines_and_fills_the_tables_and_every_host_pair_pings() {
    support::require_root();
    let python = python();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/p4");
    let dir = std::env::temp_dir().join(format!("intlab-p4rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    // The tutorial topology with no runtime file: the tables start empty.
    let topology: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("tutorial/topology.json")).expect("topology"))
            .expect("JSON");
    let mut topology = topology;
    topology["switches"] = serde_json::json!({ "s1": {}, "s2": {} });
    let topo_file = dir.join("topology.json");
    std::fs::write(&topo_file, topology.to_string()).expect("written");
    let program = fixtures.join("forward_dscp.p4");
    let scenario = dir.join("lab/basic.yaml");
    ok(&[
        "import",
        "p4-topology",
        &topo_file.to_string_lossy(),
        "--program",
        &program.to_string_lossy(),
        "--out",
        &scenario.to_string_lossy(),
    ]);
    let p4info = dir.join("forward_dscp.p4info.txtpb");
    ok(&[
        "p4",
        "info",
        &program.to_string_lossy(),
        "--out",
        &p4info.to_string_lossy(),
    ]);

    let name = format!("p4rt{}", std::process::id());
    let _up = Labs(vec![name.clone()]);
    let up = ok(&["up", &scenario.to_string_lossy(), "--name", &name]);
    // "  s1  P4Runtime on 127.0.0.1:50051 (device id 0)"
    let endpoint = |switch: &str| -> (String, u64) {
        let line = up
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{switch}  P4Runtime on ")))
            .unwrap_or_else(|| panic!("no P4Runtime address for {switch}: {up}"));
        let rest = line.split("P4Runtime on ").nth(1).expect("address");
        let (address, id) = rest.split_once(" (device id ").expect("device id");
        (address.to_owned(), id.trim_end_matches(')').parse().expect("a number"))
    };
    let (s1, s2) = (endpoint("s1"), endpoint("s2"));
    assert_eq!((s1.1, s2.1), (0, 1), "device ids in topology order");

    let fwd = |prefix: &str, mac: &str, port: u16| {
        serde_json::json!({
            "table": "LineIngress.ipv4_lpm",
            "action": "LineIngress.ipv4_forward",
            "match": { "hdr.ipv4.dstAddr": prefix },
            "params": { "dstAddr": mac, "port": port },
        })
    };
    // The fixture's entries (tests/p4/tutorial), at the lab's addresses.
    let plan = serde_json::json!({
        "p4info": p4info,
        "device_config": program,
        "switches": [
            { "address": s1.0, "device_id": s1.1, "entries": [
                fwd("198.18.1.1/32", "08:00:00:00:01:11", 1),
                fwd("198.18.2.2/32", "08:00:00:00:02:22", 2),
                fwd("198.18.3.0/24", "08:00:00:00:02:00", 3),
            ]},
            { "address": s2.0, "device_id": s2.1, "entries": [
                fwd("198.18.3.3/32", "08:00:00:00:03:33", 1),
                fwd("198.18.0.0/16", "08:00:00:00:01:00", 2),
            ]},
        ],
    });
    let plan_file = dir.join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).expect("written");
    let ping = |a: &str, b: &str| intlab(&["exec", "--lab", &name, a, "--", "ping", "-c", "1", "-W", "2", b]);
    assert!(
        !ping("h1", "198.18.3.3").status.success(),
        "the tables are empty before the controller writes them"
    );
    let shell = Command::new(&python)
        .arg(fixtures.join("p4runtime_shell.py"))
        .arg(&plan_file)
        .output()
        .expect("python runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&shell.stdout),
        String::from_utf8_lossy(&shell.stderr)
    );
    assert!(shell.status.success(), "p4runtime-shell: {said}");
    assert!(
        said.contains("3 written, 3 read back") && said.contains("2 written, 2 read back"),
        "{said}"
    );

    let address = |h: &str| {
        let n = h[1..].parse::<u8>().expect("hN");
        format!("198.18.{n}.{n}")
    };
    for a in ["h1", "h2", "h3"] {
        for b in ["h1", "h2", "h3"].into_iter().filter(|&b| b != a) {
            let out = ping(a, &address(b));
            let text = String::from_utf8_lossy(&out.stdout);
            let hops = if a == "h3" || b == "h3" { 2 } else { 1 };
            assert!(
                out.status.success() && text.contains(&format!("ttl={}", 64 - hops)),
                "{a} -> {b}: {text}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).expect("scratch folder removed");
}
