//! A lab's thread count follows the machine, not the topology: every shipped scenario, fat-tree
//! k = 8 (208 nodes) included, runs on at most cores + 4 OS threads from start to Ctrl-C, and
//! leaves nothing behind. The server of the hosts' RDMA command files (docs/verbs.md) adds its
//! two threads, which sleep in the kernel until a program calls a slow-path verb; they are
//! counted apart, and there are never more than two of them.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use intlab_lab::netns;
use support::{require_root, scratch_dir, serial};

/// OS threads of process `pid` now (0 once it is gone).
/// The command file server's threads (fuser names them `fuser-bg` and `fuser-0`).
const COMMAND_FILE_THREADS: usize = 2;

/// OS threads of process `pid` now, apart from the command file server's (0 once it is
/// gone), and the command file server's.
fn threads_of(pid: u32) -> (usize, usize) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    let (mut lab, mut server) = (0, 0);
    for t in tasks.map_while(Result::ok) {
        // A thread that ended between the listing and the read counts as neither.
        let Ok(name) = std::fs::read_to_string(t.path().join("comm")) else {
            continue;
        };
        if name.starts_with("fuser") {
            server += 1;
        } else {
            lab += 1;
        }
    }
    (lab, server)
}

/// Runs `scenario` until its flows have run for `watch`, then interrupts it; returns the most
/// threads seen at any sample from start to exit (the lab's, the command file server's) and
/// what it printed.
fn peak_threads(scenario: &Path, tag: &str, watch: Duration) -> ((usize, usize), String) {
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
    let mut peak = (0, 0);
    let sample = |peak: &mut (usize, usize)| {
        let (lab, server) = threads_of(pid);
        *peak = (peak.0.max(lab), peak.1.max(server));
    };
    let started = Instant::now();
    let mut running_since = None;
    loop {
        sample(&mut peak);
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
            sample(&mut peak);
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
        eprintln!(
            "{}: at most {} threads and {} of the command file server",
            f.display(),
            peak.0,
            peak.1
        );
        report.push((f.clone(), peak, said));
    }
    for (f, (lab, server), said) in &report {
        assert!(
            *lab <= cores + 4,
            "{}: {lab} threads on {cores} cores:\n{said}",
            f.display()
        );
        assert!(
            (1..=COMMAND_FILE_THREADS).contains(server),
            "{}: {server} threads serve the command files:\n{said}",
            f.display()
        );
    }
}
