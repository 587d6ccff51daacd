//! A new user's first hour (issue 12): the README's main command on a machine that has only
//! what intlab needs (iproute2), a broken data path stopped before any flow runs with the hop
//! named, a checksum offload left on named as such, and a flow that makes no progress ending
//! the run with a diagnosis. Run as root (scripts/test).

mod support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use intlab_lab::datapath::{self, ProbeTarget};
use intlab_lab::lab::{Lab, LabConfig};
use intlab_lab::netns;
use intlab_lab::results::{DATAPATH, Ending};
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_runtime::sys::offload::{self, Offload};
use support::{require_root, scratch_dir, serial};

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A folder holding links to `programs` only, for PATH: a machine with nothing else.
fn bare_path(tag: &str, programs: &[&str]) -> PathBuf {
    let dir = scratch_dir(tag);
    for p in programs {
        let real = intlab_lab::prerequisites::find_program(p).unwrap_or_else(|| panic!("{p} is installed here"));
        symlink(real, dir.join(p)).expect("link");
    }
    dir
}

/// Lab namespaces that the ended `intlab` process `pid` left behind. Only its own: another
/// test's lab, or one a killed run left on the machine earlier, is none of this test's business.
fn leaked(pid: u32) -> Vec<String> {
    netns::lab_namespaces()
        .expect("the lab namespaces listed")
        .into_iter()
        .filter(|n| netns::owner(n) == Some(pid))
        .collect()
}

/// Runs the `intlab` binary with `path` as its PATH; returns its process id and its output.
fn intlab(path: &Path, args: &[&str]) -> (u32, Output) {
    let child = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .env("PATH", path)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("intlab runs");
    let pid = child.id();
    (pid, child.wait_with_output().expect("intlab ends"))
}

#[test]
fn the_default_scenario_runs_with_nothing_but_iproute2() {
    require_root();
    let _serial = serial();
    let path = bare_path("fh-path", &["ip"]);
    let out = scratch_dir("fh-run").join("results");
    let (pid, o) = intlab(
        &path,
        &[
            "run",
            "--set",
            "workload.incast.size=1MB",
            "--out",
            out.to_str().expect("utf-8"),
        ],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("4/4 flows completed"), "{t}");
    assert!(leaked(pid).is_empty(), "left behind: {:?}", leaked(pid));

    // Without iproute2: said up front, nothing created.
    let empty = scratch_dir("fh-empty");
    let out = scratch_dir("fh-none").join("results");
    let (_, o) = intlab(&empty, &["run", "--out", out.to_str().expect("utf-8")]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("needs the `ip` program") && t.contains("apt-get install iproute2"),
        "{t}"
    );
    assert!(!out.exists(), "a results folder was created");
}

#[test]
fn a_withdrawn_route_stops_the_run_before_any_flow_and_names_the_hop() {
    require_root();
    let _serial = serial();
    let dir = scratch_dir("fh-route");
    let file = dir.join("broken.yaml");
    let base = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/incast-4to1.yaml"))
        .expect("the default scenario");
    std::fs::write(&file, format!("{base}routes:\n  - {{ switch: s1, to: h5, via: [] }}\n")).expect("write");
    let out = dir.join("results");
    let (pid, o) = intlab(
        &bare_path("fh-rpath", &["ip"]),
        &[
            "run",
            file.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ],
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    // Stopped at the check, before any flow (no wall-clock bound: the machine is shared).
    assert!(t.contains("data path check failed: 4 of 4 flows"), "{t}");
    assert!(
        t.contains("=> dropped at switch s1 port eth1: 3 (no_route)"),
        "the report names the hop and the reason: {t}"
    );
    let report = std::fs::read_to_string(out.join(DATAPATH)).expect("the report is kept");
    assert!(report.contains("no_route"), "{report}");
    assert!(!out.join(intlab_lab::results::FLOWS).exists(), "no flow ran");
    assert!(leaked(pid).is_empty(), "left behind: {:?}", leaked(pid));
}

/// The default scenario, loaded, with `sets` applied.
fn default_with(sets: &[&str]) -> Scenario {
    let o = Overrides {
        set: sets.iter().map(|s| (*s).to_owned()).collect(),
        ..Overrides::default()
    };
    Scenario::builtin(&o).expect("the default scenario loads")
}

#[test]
fn a_checksum_offload_left_on_is_named_as_the_cause() {
    require_root();
    let _serial = serial();
    let s = default_with(&[]);
    let t = &s.topology;
    let lab = Lab::build(t, &LabConfig::new("fhc")).expect("lab builds");
    let h1 = t.node("h1").expect("h1");
    let h5 = t.node("h5").expect("h5");
    // What a lab without `ethtool -K eth0 tx off` had: the answers (ACKs carry no INT, so no
    // switch rewrites their checksum) leave h5 with the checksum still to be filled in.
    lab.namespace(h5)
        .run(|| offload::set("eth0", Offload::TxChecksum, true).map_err(std::io::Error::other))
        .expect("tx checksum offload turns on");
    let target = ProbeTarget {
        flow: 1,
        src: h1,
        dst: h5,
        src_port: 50000,
    };
    let err = datapath::check(&lab, &[target], Duration::from_millis(500)).expect_err("the probes are lost");
    drop(lab);
    assert!(
        err.report.contains("host h1's kernel: ") && err.report.contains("UDP checksum errors +3"),
        "{err}"
    );
    assert!(
        err.report.contains(
            "=> h1's kernel dropped the answers for bad UDP checksums: transmit checksum offload is on at h5"
        ),
        "{err}"
    );
}

#[test]
fn a_flow_that_makes_no_progress_ends_the_run_with_a_diagnosis() {
    require_root();
    let _serial = serial();
    // At a fixed dilation: a run that cannot progress is not made faithful by a slower one,
    // and `auto` would make it again at each step when the machine is busy.
    let mut s = default_with(&["workload.incast.size=200KB", "dilation=1"]);
    // A buffer smaller than one data packet: probes fit, data never does.
    let to_h5 = s
        .topology
        .links
        .iter()
        .position(|l| l.ends.iter().any(|e| e.interface == "eth5"))
        .expect("the link to h5");
    s.topology.links[to_h5].props.buffer = intlab_switch::units::Bytes(600);
    let r = support::run_scenario("fh-stuck", &s);
    // Ended by the diagnosis, not by the scenario's 30 s duration.
    assert_eq!(r.summary.ending, Ending::NoProgress);
    assert_eq!(r.summary.completed, 0);
    let d = r.summary.diagnosis.clone().expect("a diagnosis");
    assert!(d.contains("made no progress through 7 retransmission timeouts"), "{d}");
    assert!(d.contains("0 of 196 packets acknowledged"), "{d}");
    assert!(
        d.contains("switch s1 port eth5 dropped") && d.contains("(buffer_full)"),
        "{d}"
    );
    // The stall share stays a share even when nothing completed.
    assert!(
        (0.0..=1.0).contains(&r.summary.host_stall_fraction),
        "{}",
        r.summary.host_stall_fraction
    );
}
