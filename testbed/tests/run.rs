//! `intlab run` as a user runs it: the built-in default end to end (results folder, summary,
//! a capture tshark decodes), interrupted by SIGINT, and killed with SIGKILL then cleaned.
//! Run as root (scripts/test).

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use intlab_lab::netns;
use intlab_lab::results;
use support::{require_root, scratch_dir, serial, tshark_fields};

fn intlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_intlab"))
}

/// The namespace prefix of a run in process `pid` (see `RunOptions::tag` in main.rs).
fn run_prefix(pid: u32) -> String {
    format!("{}-", netns::run_prefix(pid, "r"))
}

fn leftovers(prefix: &str) -> Vec<String> {
    netns::lab_namespaces()
        .expect("the lab namespaces listed")
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Rows of a CSV file as maps from column to value.
fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).expect("CSV opens");
    let header: Vec<String> = r.headers().expect("header").iter().map(str::to_owned).collect();
    r.records()
        .map(|rec| {
            let rec = rec.expect("CSV record");
            header.iter().cloned().zip(rec.iter().map(str::to_owned)).collect()
        })
        .collect()
}

/// Starts `intlab run ARGS` and returns once it has started its flows (the lab is built).
/// Runs intlab with `args` to its end: its namespace prefix and its output.
fn run_to_end<'a>(args: impl IntoIterator<Item = &'a std::ffi::OsStr>) -> (String, Output) {
    let child = intlab()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("intlab runs");
    let prefix = run_prefix(child.id());
    (prefix, child.wait_with_output().expect("intlab ends"))
}

fn start_run(args: &[&str]) -> Child {
    let mut child = intlab()
        .arg("run")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("intlab runs");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = err.read_line(&mut line).expect("read stderr");
        assert!(n > 0, "intlab ended before running its flows: {seen}");
        seen.push_str(&line);
        if line.contains("running") && line.contains("flows") {
            break;
        }
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill with a live child's pid and a valid signal number.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

#[test]
fn the_default_scenario_runs_end_to_end_and_writes_every_result() {
    require_root();
    let _serial = serial();
    let out = scratch_dir("run-default");
    let (prefix, o) = run_to_end(["run".as_ref(), "--capture".as_ref(), "--out".as_ref(), out.as_os_str()]);
    let t = text(&o);
    eprintln!("{t}");
    assert!(o.status.success(), "{t}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    for want in [
        "incast-4to1 with hpcc",
        "completed, 4/4 flows completed",
        "FCT",
        "queue s1:eth5",
        "goodput",
    ] {
        assert!(stdout.contains(want), "summary lacks `{want}`: {stdout}");
    }
    assert!(leftovers(&prefix).is_empty(), "left: {:?}", leftovers(&prefix));
    // Nothing of the workload is lost in the default run; the kernel's own chatter the
    // switch does not forward is counted apart, never as a drop.
    assert!(
        stdout.contains("drops 0,"),
        "the default run drops nothing of its own: {stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(results::SUMMARY_JSON)).expect("summary"))
            .expect("json");
    assert!(
        summary["drops"] == 0 && summary["foreign_frames"].as_u64().is_some(),
        "{summary}"
    );

    for f in [
        results::SCENARIO,
        results::FLOWS,
        results::SERIES,
        results::QUEUES,
        results::COUNTERS,
        results::SUMMARY_JSON,
        results::SUMMARY_TXT,
        results::FCT_CDF,
        results::RATES,
        results::QUEUE,
    ] {
        let len = std::fs::metadata(out.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} missing or empty");
    }
    for f in [results::FCT_CDF, results::RATES, results::QUEUE] {
        let svg = std::fs::read_to_string(out.join(f)).expect("plot");
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{f} draws nothing"
        );
    }
    let flows = csv_rows(&out.join(results::FLOWS));
    assert_eq!(flows.len(), 4);
    for f in &flows {
        assert_eq!(f["completed"], "true", "{f:?}");
        assert_eq!(f["bytes_received"], f["size_bytes"], "{f:?}");
        let slowdown: f64 = f["slowdown"].parse().expect("slowdown");
        assert!(slowdown >= 1.0, "faster than an empty network: {f:?}");
    }
    let series = csv_rows(&out.join(results::SERIES));
    for id in 1..=4 {
        assert!(
            series.iter().any(|r| r["flow"] == id.to_string()),
            "no series for flow {id}"
        );
    }
    let queues = csv_rows(&out.join(results::QUEUES));
    assert!(
        queues.iter().any(|r| r["port"] == "eth5" && r["queue_bytes"] != "0"),
        "the bottleneck's queue was never above zero"
    );

    // The bottleneck's capture: RoCEv2 decoded natively, INT by our dissector.
    let pcap = out.join("capture/s1-eth5.pcapng");
    let rows = tshark_fields(
        &pcap,
        &["-c", "500", "-Y", "intlab_int"],
        &[
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "intlab_int.qlen",
            "intlab_int.tx_bytes",
        ],
    );
    assert!(rows.len() > 100, "tshark found {} INT frames", rows.len());
    // Arrivals and departures of both directions are written in time order.
    let mut reader = intlab_inspect::capture::CaptureReader::open(&pcap).expect("capture opens");
    let (mut last, mut frames) = (0u128, 0);
    while let Some(f) = reader.next_frame().expect("capture reads") {
        assert!(
            f.timestamp_ns >= last,
            "frame {} is {} ns before the one written before it",
            frames + 1,
            last - f.timestamp_ns
        );
        last = f.timestamp_ns;
        frames += 1;
    }
    assert!(frames > rows.len(), "{frames} frames in the capture");
    for r in &rows {
        assert!(!r[0].is_empty() && !r[1].is_empty(), "RoCE not decoded: {r:?}");
        // One hop (s1) with HPCC's fields: queue length and transmitted bytes.
        assert!(!r[2].is_empty() && !r[2].contains(','), "one INT queue length: {r:?}");
        assert!(!r[3].is_empty() && !r[3].contains(','), "one INT txBytes: {r:?}");
    }
}

#[test]
fn sigint_stops_a_run_keeps_its_partial_results_and_leaves_nothing() {
    require_root();
    let _serial = serial();
    let out = scratch_dir("run-sigint");
    let child = start_run(&[
        "--set",
        "workload.incast.size=200MB",
        "--out",
        out.to_str().expect("utf-8 path"),
    ]);
    let prefix = run_prefix(child.id());
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        !leftovers(&prefix).is_empty(),
        "the run's namespaces exist while it runs"
    );
    signal(&child, libc::SIGINT);
    let o = child.wait_with_output().expect("intlab ends");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(130), "{stdout}");
    assert!(stdout.contains("interrupted (partial results)"), "{stdout}");
    assert!(leftovers(&prefix).is_empty(), "left: {:?}", leftovers(&prefix));
    let flows = csv_rows(&out.join(results::FLOWS));
    assert_eq!(flows.len(), 4);
    assert!(flows.iter().all(|f| f["completed"] == "false"), "{flows:?}");
    let got: u64 = flows
        .iter()
        .map(|f| f["bytes_received"].parse::<u64>().expect("number"))
        .sum();
    assert!(got > 0, "nothing arrived before the interrupt");
    assert!(out.join(results::SCENARIO).exists() && out.join(results::QUEUE).exists());
}

#[test]
fn clean_removes_what_a_killed_run_left() {
    require_root();
    let _serial = serial();
    let out: PathBuf = scratch_dir("run-kill");
    let mut child = start_run(&[
        "--set",
        "workload.incast.size=200MB",
        "--capture",
        "--out",
        out.to_str().expect("utf-8 path"),
    ]);
    let prefix = run_prefix(child.id());
    // A running lab is not cleaned: its process still owns it.
    let o = intlab()
        .args(["clean", "--prefix", &prefix])
        .output()
        .expect("clean runs");
    assert!(
        text(&o).contains("0 namespaces removed, 6 of running labs kept"),
        "{}",
        text(&o)
    );
    assert_eq!(leftovers(&prefix).len(), 6, "the running lab lost namespaces");
    // Long enough for the switch to flush its captures once (every second).
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    // The killed run's capture reads up to where it was cut, and says where.
    let o = intlab()
        .arg("inspect")
        .arg(out.join("capture").join("s1-eth5.pcapng"))
        .output()
        .expect("inspect runs");
    let frames = String::from_utf8_lossy(&o.stdout).lines().count();
    assert!(o.status.success() && frames > 100, "{frames} frames: {}", text(&o));
    // A switch namespace and five hosts: no Drop ran.
    assert_eq!(leftovers(&prefix).len(), 6, "{:?}", leftovers(&prefix));
    let refused = intlab()
        .args(["clean", "--prefix", "other-"])
        .output()
        .expect("clean runs");
    assert!(!refused.status.success(), "only intlab's own names may be cleaned");
    let o = intlab()
        .args(["clean", "--prefix", &prefix])
        .output()
        .expect("clean runs");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("6 namespaces removed, 0 of running labs kept, 0 failures"),
        "{t}"
    );
    assert!(leftovers(&prefix).is_empty(), "left: {:?}", leftovers(&prefix));
}

#[test]
fn a_switch_running_a_p4_program_carries_every_flow_and_its_actions_show_on_the_wire() {
    require_root();
    let _serial = serial();
    let out = scratch_dir("run-p4");
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/p4/line.yaml");
    let (prefix, o) = run_to_end([
        "run".as_ref(),
        scenario.as_os_str(),
        "--capture".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("2/2 flows completed"), "{t}");
    assert!(leftovers(&prefix).is_empty(), "left: {:?}", leftovers(&prefix));
    for f in csv_rows(&out.join(results::FLOWS)) {
        assert_eq!(f["bytes_received"], f["size_bytes"], "{f:?}");
    }
    // What h1 sent to h2, as it arrived at s1 and as the program sent it on.
    let fields = ["ip.dsfield.dscp", "ip.ttl", "ip.checksum.status"];
    let filter = ["-o", "ip.check_checksum:TRUE", "-Y", "ip.dst == 198.18.0.2"];
    let inbound = tshark_fields(&out.join("capture/s1-eth1.pcapng"), &filter, &fields);
    let outbound = tshark_fields(&out.join("capture/s1-eth2.pcapng"), &filter, &fields);
    assert!(inbound.len() > 1000, "{} frames from h1", inbound.len());
    assert_eq!(inbound.len(), outbound.len(), "every frame forwarded, none added");
    for (i, o) in inbound.iter().zip(&outbound) {
        assert_ne!(i[0], "46", "the host does not send EF: {i:?}");
        assert_eq!(o[0], "46", "ipv4_forward sets DSCP 46: {o:?}");
        let (ti, to): (u8, u8) = (i[1].parse().expect("ttl"), o[1].parse().expect("ttl"));
        assert_eq!(to + 1, ti, "one hop off the TTL");
        assert_eq!(o[2], "1", "update_checksum left a good header checksum: {o:?}");
    }
}
