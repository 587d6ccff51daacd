//! A lab's thread count follows the machine, not the topology: every shipped scenario, fat-tree
//! k = 8 (208 nodes) included, runs on at most cores + 4 OS threads from start to Ctrl-C, and
//! leaves nothing behind.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use intlab_testbed::netns;
use support::{require_root, scratch_dir, serial};

/// OS threads of process `pid` now (0 once it is gone).
fn threads_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// Runs `scenario` until its flows have run for `watch`, then interrupts it; returns the most
/// threads seen at any sample from start to exit and what it printed.
fn peak_threads(scenario: &Path, tag: &str, watch: Duration) -> (usize, String) {
    let out = scratch_dir(tag);
    let mut child = Command::new(env!("CARGO_BIN_EXE_intlab"))
        .args(["run", "--force", "--out"])
        .arg(out.join("results"))
        .arg(scenario)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("intlab starts");
    let pid = child.id();
    let err = child.stderr.take().expect("stderr piped");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("flows finished after") {
                let _gone_if_done = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let mut peak = 0;
    let started = Instant::now();
    let mut running_since = None;
    loop {
        peak = peak.max(threads_of(pid));
        if running_since.is_none() && rx.try_recv().is_ok() {
            running_since = Some(Instant::now());
        }
        let watched = running_since.is_some_and(|t| t.elapsed() > watch);
        if watched || started.elapsed() > Duration::from_secs(240) {
            break;
        }
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if child.try_wait().expect("wait").is_none() {
        // SAFETY: kill with a live child's pid and a valid signal number.
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
        while child.try_wait().expect("wait").is_none() {
            peak = peak.max(threads_of(pid));
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let said = reader.join().expect("reader");
    assert!(
        running_since.is_some(),
        "{}: the flows never ran:\n{said}",
        scenario.display()
    );
    let left: Vec<String> = netns::lab_namespaces()
        .expect("the lab namespaces listed")
        .into_iter()
        .filter(|n| netns::owner(n) == Some(pid))
        .collect();
    assert!(left.is_empty(), "{}: left behind {left:?}", scenario.display());
    (peak, said)
}

#[test]
fn every_shipped_scenario_runs_on_cores_plus_four_threads() {
    require_root();
    let _serial = serial();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("topologies folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.iter().any(|f| f.ends_with("fat-tree-k8.yaml")), "{files:?}");
    let mut report = Vec::new();
    for (k, f) in files.iter().enumerate() {
        let (peak, said) = peak_threads(f, &format!("threads{k}"), Duration::from_millis(1500));
        eprintln!("{}: at most {peak} threads", f.display());
        report.push((f.clone(), peak, said));
    }
    for (f, peak, said) in &report {
        assert!(
            *peak <= cores + 4,
            "{}: {peak} threads on {cores} cores:\n{said}",
            f.display()
        );
    }
}
