//! Edges found by probing with bad input and rough handling: a run as a user without root, a
//! results folder that holds an earlier run, a second Ctrl-C, a switch counters file that
//! cannot be written. Each says what is wrong, once, before anything is created (or says how
//! to clean up). Run as root (scripts/test): the non-root case drops privileges itself.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use intlab_lab::netns;
use support::{require_root, scratch_dir, serial};

fn intlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_intlab"))
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn without_root_the_lab_says_so_before_creating_anything() {
    require_root();
    let dir = scratch_dir("edge-nobody");
    // The user `nobody` may write here.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    let out = dir.join("results");
    let o = intlab()
        .args(["run", "--out"])
        .arg(&out)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("intlab runs as nobody");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN)") && t.contains("Nothing was created"),
        "{t}"
    );
    assert_eq!(t.lines().count(), 1, "said once: {t}");
    assert!(!out.exists(), "a results folder was created");
}

#[test]
fn a_results_folder_with_an_earlier_run_is_refused_unless_forced() {
    require_root();
    let _serial = serial();
    let out = scratch_dir("edge-out");
    std::fs::create_dir_all(out.join("capture")).expect("mkdir");
    std::fs::write(out.join("capture").join("s1-eth5.pcapng"), b"stale").expect("write");
    std::fs::write(out.join("flows.csv"), b"stale").expect("write");
    std::fs::write(out.join("notes.txt"), b"mine").expect("write");
    let run = |force: bool| {
        let mut c = intlab();
        c.args(["run", "--set", "workload.incast.size=100KB", "--out"])
            .arg(&out);
        if force {
            c.arg("--force");
        }
        c.output().expect("intlab runs")
    };
    let o = run(false);
    let t = text(&o);
    assert!(
        !o.status.success() && t.contains("is not empty: choose another --out"),
        "{t}"
    );
    assert_eq!(
        std::fs::read(out.join("flows.csv")).expect("kept"),
        b"stale",
        "nothing touched"
    );
    let o = run(true);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!out.join("capture").exists(), "the stale capture is gone");
    assert!(
        std::fs::read_to_string(out.join("flows.csv"))
            .expect("flows")
            .starts_with("id,")
    );
    assert_eq!(
        std::fs::read(out.join("notes.txt")).expect("kept"),
        b"mine",
        "the user's own file stays"
    );
}

#[test]
fn a_second_ctrl_c_quits_at_once_and_says_how_to_clean() {
    require_root();
    let _serial = serial();
    let out = scratch_dir("edge-sigint");
    let mut child = intlab()
        .args(["run", "--set", "workload.incast.size=200MB", "--out"])
        .arg(out.join("r"))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("intlab runs");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    while !seen.contains("running") {
        let mut line = String::new();
        assert!(err.read_line(&mut line).expect("read") > 0, "ended early: {seen}");
        seen.push_str(&line);
    }
    let prefix = format!("{}-", netns::run_prefix(child.id(), "r"));
    for _ in 0..2 {
        // SAFETY: kill with a live child's pid and a valid signal number.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
        std::thread::sleep(Duration::from_millis(30));
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).expect("read");
    let status = child.wait().expect("ends");
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(
        rest.contains("`sudo intlab clean` removes the namespaces this run leaves behind"),
        "{rest}"
    );
    // What it left, `intlab clean` removes (its process is gone).
    let o = intlab().args(["clean", "--prefix", &prefix]).output().expect("clean");
    assert!(o.status.success(), "{}", text(&o));
    let left: Vec<String> = netns::lab_namespaces()
        .expect("the lab namespaces listed")
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "left: {left:?}");
}

#[test]
fn a_switch_whose_counters_file_cannot_be_written_does_not_start() {
    require_root();
    let dir = scratch_dir("edge-counters");
    let config = dir.join("switch.yaml");
    std::fs::write(
        &config,
        "node_id: 1\nports:\n  - { name: p1, kind: tap, device: ilbedge0, rate: 1Gbps }\ncounters_file: /nonexistent/dir/counters.json\n",
    )
    .expect("write");
    let o = intlab()
        .args(["switch", "--config"])
        .arg(&config)
        .output()
        .expect("intlab runs");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("counters file /nonexistent/dir/counters.json"), "{t}");
}
