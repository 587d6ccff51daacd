//! Programs as a run's workload (`programs:`, issue 44), through the `intlab` binary as a user
//! runs them: a program that never ends is stopped at the scenario's end and the run says
//! so; one that fails makes the run fail; perftest's incast of real programs under two
//! controllers (`intlab compare`) against the lab's own 4-to-1 flows in the same network.
//! Needs root and perftest (`scripts/test` installs it).

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{intlab, require_root, scratch_dir, serial};

/// Two hosts on one switch, at a rate this machine keeps at dilation 1.
const PAIR: &str = "name: programs-pair
defaults:
  link: { rate: 100Mbps, delay: 20us, buffer: 1MB }
nodes:
  s1: { kind: switch }
  h1: { kind: host }
  h2: { kind: host }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
  - endpoints: [\"s1:eth2\", \"h2:eth0\"]
";

/// Writes `PAIR` with `run` keys into a scratch folder; returns the file and the folder.
fn scenario(tag: &str, run: &str) -> (PathBuf, PathBuf) {
    let dir = scratch_dir(tag);
    let file = dir.join("scenario.yaml");
    std::fs::write(&file, format!("{PAIR}{run}")).expect("scenario written");
    (file, dir)
}

fn summary(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// True while a process whose command line holds `marker` lives.
fn alive(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker)))
}

#[test]
fn a_program_that_never_ends_is_stopped_and_one_that_fails_fails_the_run() {
    require_root();
    let _one = serial();
    // A marker no other process has: the test looks for it once the run is over.
    let marker = format!("{}.25", 600 + std::process::id() % 1000);
    let (file, dir) = scenario(
        "programs-forever",
        &format!(
            "duration: 2s\nprograms:\n  - {{ name: forever, host: h1, run: sleep {marker} }}\n  - {{ name: child, host: h2, run: \"sleep {marker} & sleep {marker}\" }}\n"
        ),
    );
    let out_dir = dir.join("results");
    let out = intlab(&[
        "run",
        "--out",
        out_dir.to_str().expect("utf-8"),
        file.to_str().expect("utf-8"),
    ]);
    let said = text(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a run stopped at its duration exits 3:\n{said}"
    );
    assert!(
        said.contains("program forever on h1: still running at the end of the run: stopped"),
        "{said}"
    );
    let s = summary(&out_dir);
    assert_eq!(s["ending"], "timed_out", "{s}");
    for p in s["programs"].as_array().expect("programs in the summary") {
        assert_eq!(p["end"]["how"], "stopped_at_end", "{p}");
        assert!(p["ran_s"].as_f64().expect("ran_s") >= 1.5, "{p}");
    }
    // The shell's background child went with its group.
    assert!(!alive(&marker), "a program outlived its run");

    let (file, dir) = scenario(
        "programs-fail",
        "programs:\n  - { name: ok, host: h1, run: [\"true\"] }\n  - { name: bad, host: h2, run: \"echo about to fail; exit 3\" }\n",
    );
    let out_dir = dir.join("results");
    let out = intlab(&[
        "run",
        "--out",
        out_dir.to_str().expect("utf-8"),
        file.to_str().expect("utf-8"),
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(5), "a failed program fails the run:\n{said}");
    assert!(said.contains("program bad on h2: FAILED: exited 3"), "{said}");
    let s = summary(&out_dir);
    assert_eq!(s["ending"], "program_failed", "{s}");
    assert_eq!(
        s["programs"][0]["end"],
        serde_json::json!({"how": "exited", "value": 0}),
        "{s}"
    );
    let log = std::fs::read_to_string(out_dir.join("programs/bad.log")).expect("the program's output kept");
    assert_eq!(log, "about to fail\n");
}

#[test]
fn a_program_the_scenario_gets_wrong_is_refused_with_where() {
    let (file, _dir) = scenario("programs-bad", "programs:\n  - { host: s1, run: ib_write_bw }\n");
    let out = intlab(&["run", file.to_str().expect("utf-8")]);
    let said = text(&out);
    assert!(!out.status.success());
    assert!(
        said.contains("scenario.yaml:12:") && said.contains("programs[0].host: expected the name of a host, got `s1`"),
        "{said}"
    );
}
