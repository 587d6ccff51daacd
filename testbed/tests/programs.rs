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

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `intlab run FILE --out OUT`: its exit and what it printed.
fn run(file: &Path, out: &Path) -> (std::process::Output, String) {
    let o = intlab(&[
        "run",
        "--out",
        out.to_str().expect("utf-8"),
        file.to_str().expect("utf-8"),
    ]);
    let said = text(&o);
    (o, said)
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
    let (out, said) = run(&file, &out_dir);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a run stopped at its duration exits 3:\n{said}"
    );
    assert!(
        said.contains("program forever on h1: still running at the end of the run: stopped"),
        "{said}"
    );
    let s = support::summary_json(&out_dir);
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
    let (out, said) = run(&file, &out_dir);
    assert_eq!(out.status.code(), Some(5), "a failed program fails the run:\n{said}");
    assert!(said.contains("program bad on h2: FAILED: exited 3"), "{said}");
    let s = support::summary_json(&out_dir);
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

#[test]
fn ucx_perftest_over_rc_verbs_completes_with_its_figures_in_the_results() {
    require_root();
    let _one = serial();
    let (file, dir) = scenario(
        "programs-ucx",
        "controller: { name: dcqcn }
duration: 60s
programs:
  - { name: server, host: h2, run: ucx_perftest -d intlab0:1 -x rc_verbs, wait: false }
  - { name: client, host: h1, start: 1s, run: ucx_perftest 198.18.0.2 -d intlab0:1 -x rc_verbs -t put_bw -D zcopy -s 65536 -n 300 }
",
    );
    let out_dir = dir.join("results");
    let (out, said) = run(&file, &out_dir);
    let log = |name: &str| std::fs::read_to_string(out_dir.join(format!("programs/{name}.log"))).unwrap_or_default();
    assert!(
        out.status.success(),
        "{said}\nclient:\n{}\nserver:\n{}",
        log("client"),
        log("server")
    );
    let s = support::summary_json(&out_dir);
    let client = &s["programs"][1];
    let figure = |name: &str| {
        client["figures"]
            .as_array()
            .expect("figures")
            .iter()
            .find(|f| f[0] == name)
            .and_then(|f| f[1].as_f64())
    };
    assert_eq!(figure("iterations"), Some(300.0), "{client}");
    // UCX's MB are 2^20 bytes; the lab's goodput of the QPs is in b/s.
    let ucx_bps = figure("bandwidth overall[MB/sec]").expect("UCX's bandwidth") * 8.0 * 1_048_576.0;
    let lab_bps = s["program_qps"]["goodput_bps"]
        .as_f64()
        .expect("the lab counted the QPs");
    assert!(ucx_bps > 0.0 && lab_bps > 0.0, "no data: {s}");
    assert!(
        (ucx_bps / lab_bps - 1.0).abs() < 0.05,
        "UCX measured {ucx_bps:.0} b/s, the lab {lab_bps:.0} b/s"
    );
}

/// What one run of the shipped perftest incast and one of the lab's own flows, started as the
/// programs' QPs started, say of the bottleneck: goodput (share of the link), Jain's index of
/// the senders' mean rates, the queue's p99 (bytes), and whether the machine kept time.
#[derive(Debug)]
struct Incast {
    /// The dilation it ran at.
    dilation: u32,
    goodput: f64,
    jain: f64,
    queue_p99: f64,
    kept_up: bool,
    /// The share of the CPU time the hypervisor took (None: unknown).
    steal: Option<f64>,
}

/// Jain's index of `rates`.
fn jain(rates: &[f64]) -> f64 {
    let sum: f64 = rates.iter().sum();
    sum * sum / (rates.len() as f64 * rates.iter().map(|r| r * r).sum::<f64>())
}

/// CSV rows of `file` as maps from column to value.
fn csv_rows(file: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(file).expect("CSV written");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().expect("a header").split(',').collect();
    lines
        .map(|l| {
            head.iter()
                .map(|h| h.to_string())
                .zip(l.split(',').map(str::to_owned))
                .collect()
        })
        .collect()
}

/// The shipped perftest incast under `cc` at `dilation` in run folder `dir`: its figures, and
/// the lab's own flows of the same bytes, each starting when the matching program's QP sent its
/// first packet.
fn programs_incast(cc: &str, dilation: u32, dir: &Path) -> (Incast, Vec<String>) {
    let out = intlab(&[
        "run",
        "--cc",
        cc,
        "--set",
        &format!("dilation={dilation}"),
        "--out",
        dir.to_str().expect("utf-8"),
        topologies().join("perftest-incast-4to1.yaml").to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let p = support::summary_json(dir);
    let qps = csv_rows(&dir.join("qps.csv"));
    let senders: Vec<_> = qps.iter().filter(|q| q["bytes_sent"] != "0").collect();
    assert_eq!(senders.len(), 4, "four clients' QPs sent: {qps:?}");
    let first =
        |q: &std::collections::HashMap<String, String>| q["first_sent_us"].parse::<f64>().expect("first_sent_us");
    let t0 = senders.iter().map(|q| first(q)).fold(f64::INFINITY, f64::min);
    let flows = senders
        .iter()
        .map(|q| {
            format!(
                "{{src: {}, dst: h5, size: {}, start: {:.0}us}}",
                q["host"],
                q["bytes_sent"],
                first(q) - t0
            )
        })
        .collect();
    let program_qps = &p["program_qps"];
    let incast = Incast {
        dilation,
        goodput: program_qps["goodput_bps"].as_f64().expect("the lab counted the QPs") / 100e6,
        jain: program_qps["jain"].as_f64().expect("four QPs' Jain"),
        queue_p99: bottleneck_queue_p99(&p),
        kept_up: p["timing_warning"] == false,
        steal: p["cpu_steal"].as_f64(),
    };
    (incast, flows)
}

/// The lab's own incast of `flows` (from [`programs_incast`]) under `cc` at `dilation` in run
/// folder `dir`.
fn own_incast(cc: &str, flows: &[String], dilation: u32, dir: &Path) -> Incast {
    let out = intlab(&[
        "run",
        "--cc",
        cc,
        "--set",
        &format!("dilation={dilation}"),
        "--set",
        &format!("workload={{flows: [{}]}}", flows.join(", ")),
        "--out",
        dir.to_str().expect("utf-8"),
        topologies().join("incast-4to1.yaml").to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let f = support::summary_json(dir);
    let rates: Vec<f64> = csv_rows(&dir.join("flows.csv"))
        .iter()
        .map(|r| r["size_bytes"].parse::<f64>().expect("size") / r["fct_us"].parse::<f64>().expect("fct"))
        .collect();
    Incast {
        dilation,
        goodput: f["normalized_goodput"].as_f64().expect("goodput"),
        jain: jain(&rates),
        queue_p99: bottleneck_queue_p99(&f),
        kept_up: f["timing_warning"] == false,
        steal: f["cpu_steal"].as_f64(),
    }
}

/// The shipped topologies' folder.
fn topologies() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies")
}

/// The p99 of the bottleneck's queue in a run's summary.
fn bottleneck_queue_p99(summary: &Value) -> f64 {
    summary["bottleneck_queue"]["p99"].as_f64().expect("a bottleneck queue")
}

/// How far (points) the programs' goodput may be from the lab's own flows': the lab's runs
/// against the simulator's allow 3 (testbed/tests/controllers.rs).
const GOODPUT_TOLERANCE: f64 = 0.03;
/// Where the goodput turns on RED's draws, as DCQCN's does, each run is one draw, and here two lab
/// runs are compared (the programs' and the own flows'): they may be as far apart as the lab's own
/// runs of this incast spread, 0.749-0.886 in seven (testbed/tests/controllers.rs). Half the
/// simulator's 20-seed range (0.055), the bound before, is the allowance for one draw against a
/// range, not for the gap between two draws: a suite failed on 0.814 against 0.872 (2026-11-29).
/// Measured besides: 0.872 against 0.854 (2026-11-28), 0.857 against 0.869 (2026-11-29); HPCC
/// 0.885 against 0.889 and 0.886 against 0.897.
const DCQCN_GOODPUT_TOLERANCE: f64 = 0.14;
/// How far Jain's indices of the senders' mean rates may be apart.
const JAIN_TOLERANCE: f64 = 0.03;
/// Runs of the pair, either side, that the machine may be late with before it is said not to
/// keep up (at dilation 1 the reference VM takes a vCPU away often enough that three tries of
/// DCQCN's pair all warned once).
const TRIES: usize = 8;

/// The dilation of the pair by late runs so far: the scenario's own 1 first; then 2, where the
/// busy-polling perftest processes' share of the two cores costs the lab half as much of an
/// RTT (at 1 the switch released frames 107-176 us late at p99, past a tenth of the 1 ms RTT,
/// in five tries in a row on 2026-11-29 with 0.1-0.7 % steal), and the lab's own flows move up
/// with the programs (CI on 2026-11-30: the programs kept up at 1, then five runs of DCQCN's
/// own flows at 1 were all late with 0.2-0.3 % steal); 4 last.
const DILATION_BY_TRY: [u32; TRIES] = [1, 1, 2, 2, 2, 4, 4, 4];

/// The programs' incast under `cc` and the lab's own flows of its bytes, both from runs the
/// machine kept up with at one dilation (the same conditions). The programs run first, then
/// their twin; a side that kept up is kept while the other is made again at its dilation, and
/// every late run moves the pair along [`DILATION_BY_TRY`], both sides made again when the
/// dilation changes. Runs the hypervisor spoiled are waited out (see [`support::Tries`]).
fn kept_up_pair(cc: &str) -> (Incast, Incast) {
    let mut late = Vec::new();
    let mut tries = support::Tries::new(
        TRIES,
        std::time::Duration::from_secs(1),
        std::time::Instant::now() + support::PATIENCE,
    );
    let mut programs: Option<(Incast, Vec<String>)> = None;
    for run in 0.. {
        let dilation = DILATION_BY_TRY[late.len().min(TRIES - 1)];
        let (side, incast) = match programs.take().filter(|(p, _)| p.dilation == dilation) {
            None => {
                let dir = scratch_dir(&format!("programs-incast-{cc}-{run}")).join("programs");
                let (incast, flows) = programs_incast(cc, dilation, &dir);
                eprintln!("{cc}: the programs: {incast:?}");
                if incast.kept_up {
                    programs = Some((incast, flows));
                    continue;
                }
                ("the programs", incast)
            }
            Some((p, flows)) => {
                let dir = scratch_dir(&format!("programs-incast-{cc}-own-{run}")).join("flows");
                let own = own_incast(cc, &flows, dilation, &dir);
                eprintln!("{cc}: the own flows: {own:?}");
                if own.kept_up {
                    return (p, own);
                }
                programs = Some((p, flows));
                ("the own flows", own)
            }
        };
        let steal = incast.steal;
        late.push((side, incast));
        assert!(
            tries.again(steal, support::MAX_STEAL),
            "{cc}: the machine did not keep up: {late:?}"
        );
    }
    unreachable!("the runs above return or fail")
}

#[test]
fn a_perftest_incast_carries_what_the_labs_own_flows_carry_under_hpcc_and_dcqcn() {
    require_root();
    let _one = serial();
    for cc in ["hpcc", "dcqcn"] {
        let (programs, own) = kept_up_pair(cc);
        let gap = if cc == "dcqcn" {
            DCQCN_GOODPUT_TOLERANCE
        } else {
            GOODPUT_TOLERANCE
        };
        assert!(
            (programs.goodput - own.goodput).abs() <= gap,
            "{cc}: goodput {:.3} (programs) against {:.3} (the lab's flows)",
            programs.goodput,
            own.goodput
        );
        assert!(
            (programs.jain - own.jain).abs() <= JAIN_TOLERANCE,
            "{cc}: Jain {:.3} (programs) against {:.3}",
            programs.jain,
            own.jain
        );
        // The same queue within a frame's worth of KB or a third.
        let (a, b) = (programs.queue_p99, own.queue_p99);
        assert!(
            (a - b).abs() <= (10e3f64).max(a.max(b) / 3.0),
            "{cc}: bottleneck queue p99 {a} B (programs) against {b} B"
        );
    }
}

#[test]
fn open_mpi_over_ucx_runs_an_allreduce_on_8_hosts_under_two_controllers() {
    require_root();
    let _one = serial();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mpi/allreduce-leaf-spine.yaml");
    let out = scratch_dir("programs-mpi").join("compare");
    let o = intlab(&[
        "compare",
        "--cc",
        "hpcc,dcqcn",
        "--out",
        out.to_str().expect("utf-8"),
        example.to_str().expect("utf-8"),
    ]);
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    for cc in ["hpcc", "dcqcn"] {
        let log = std::fs::read_to_string(out.join(cc).join("programs/allreduce.log")).expect("mpirun's output kept");
        assert!(log.contains("on 8 ranks, 5 rounds: 0 wrong elements"), "{cc}:\n{log}");
        let s = support::summary_json(&out.join(cc));
        let figures = s["programs"][0]["figures"].as_array().expect("figures").clone();
        let mean = figures
            .iter()
            .find(|f| f[0] == "allreduce mean[s]")
            .and_then(|f| f[1].as_f64());
        assert!(mean.is_some_and(|m| m > 0.0), "{cc}: no completion time: {figures:?}");
        // The collective's bytes crossed the lab's NICs between eight hosts.
        let hosts: std::collections::HashSet<String> = csv_rows(&out.join(cc).join("qps.csv"))
            .iter()
            .filter(|q| q["bytes_received"] != "0")
            .map(|q| q["host"].clone())
            .collect();
        assert_eq!(hosts.len(), 8, "{cc}: QPs received on {hosts:?}");
    }
    // The report shows the collective's completion time per controller.
    let table = std::fs::read_to_string(out.join("compare.txt")).expect("compare.txt");
    let programs = table
        .split("programs (")
        .nth(1)
        .expect("a programs table in compare.txt");
    for cc in ["hpcc", "dcqcn"] {
        let row = programs
            .lines()
            .find(|l| l.split_whitespace().next() == Some(cc))
            .unwrap_or_else(|| panic!("no {cc} row:\n{table}"));
        let seconds: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(seconds.get(2), Some(&"s"), "{cc}: `{row}`");
        assert!(seconds[1].parse::<f64>().is_ok_and(|x| x > 0.0), "{cc}: `{row}`");
    }
}
