//! Every controller on every shipped scenario, as a user runs them (`intlab run FILE --cc NAME`),
//! with flow sizes cut down so the matrix fits CI: each run exits 0 with every flow intact. The
//! full-size matrix is recorded in docs/experiments.md. Run as root (scripts/test).

mod support;

use std::path::Path;
use std::process::Command;

use support::{require_root, scratch_dir, serial};

const CONTROLLERS: [&str; 8] = [
    "hpcc", "hpcc++", "dcqcn", "swift", "timely", "dctcp", "netscope", "rlcc",
];

/// Each shipped scenario with the `--set` keys that shrink its workload.
const SCENARIOS: [(&str, &[&str]); 12] = [
    (
        "dumbbell.yaml",
        &[
            "workload.flows.0.size=300KB",
            "workload.flows.1.size=200KB",
            "workload.flows.1.start=5ms",
        ],
    ),
    ("fat-tree-k4.yaml", &["workload.all_to_all.size=8KB"]),
    // The largest lab: a fixed dilation (one that keeps time here) runs each controller once,
    // where `dilation: auto` may run it again one step up.
    ("fat-tree-k8.yaml", &["workload.permutation.size=8KB", "dilation=100"]),
    ("hpcc-ablations.yaml", &["workload.incast.size=100KB"]),
    ("incast-16to1.yaml", &["workload.incast.size=100KB"]),
    ("incast-4to1-dc.yaml", &["workload.incast.size=200KB"]),
    ("incast-4to1.yaml", &["workload.incast.size=200KB"]),
    ("leaf-spine.yaml", &["workload.all_to_all.size=8KB"]),
    // perftest: 16 WRITEs of 64 KB per client instead of 256 (the run then checks each
    // program exited 0).
    (
        "perftest-incast-4to1.yaml",
        &[
            "programs.0.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18601",
            "programs.1.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18602",
            "programs.2.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18603",
            "programs.3.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18604",
            "programs.4.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18601 198.18.0.5",
            "programs.5.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18602 198.18.0.5",
            "programs.6.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18603 198.18.0.5",
            "programs.7.run=ib_write_bw -d intlab0 -F -s 65536 -n 16 -p 18604 198.18.0.5",
        ],
    ),
    // Two QPs per host instead of 128 (the full size takes a minute per controller); its
    // `dilation: auto` stays.
    (
        "qp-8192.yaml",
        &["workload.permutation.flows_per_pair=2", "workload.permutation.size=8KB"],
    ),
    (
        "parking-lot.yaml",
        &[
            "workload.flows.0.size=300KB",
            "workload.flows.1.size=200KB",
            "workload.flows.2.size=200KB",
            "workload.flows.3.size=200KB",
        ],
    ),
    (
        "two-apps-dc.yaml",
        &[
            "workload.applications.0.message=100KB",
            "workload.applications.0.iterations=2",
            "workload.applications.1.message=100KB",
            "workload.applications.1.iterations=2",
        ],
    ),
];

/// `fct.txt` read as the ns-3 HPCC simulator's analysis reads it (`analysis/fct_analysis.py`:
/// whitespace-separated, sip and dip in hex, then sport, dport, size, start, FCT and standalone
/// FCT in ns): a line per completed flow, the sizes of `sizes`, slowdowns of at least 1 where
/// the run is not faster than its flows alone could be.
fn ns3_fct_matches(path: &Path, sizes: &[u64]) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{e}"))?;
    let mut got = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 8 {
            return Err(format!("{} columns in `{line}`", f.len()));
        }
        for ip in &f[..2] {
            u32::from_str_radix(ip, 16).map_err(|_| format!("`{ip}` is not an address in hex"))?;
        }
        let n: Vec<u64> = f[2..]
            .iter()
            .map(|x| x.parse::<u64>().map_err(|_| format!("`{x}` is not a number")))
            .collect::<Result<_, _>>()?;
        if n[1] != 100 || n[4] == 0 || n[5] == 0 {
            return Err(format!("`{line}`: dport 100, an FCT and a standalone FCT expected"));
        }
        got.push(n[2]);
    }
    let mut want = sizes.to_vec();
    want.sort_unstable();
    got.sort_unstable();
    if got != want {
        return Err(format!("sizes {got:?}, flows.csv {want:?}"));
    }
    Ok(())
}

#[test]
fn every_controller_completes_every_shipped_scenario_intact() {
    require_root();
    let _serial = serial();
    let topologies = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let shipped: Vec<String> = std::fs::read_dir(&topologies)
        .expect("topologies/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    for name in &shipped {
        assert!(
            SCENARIOS.iter().any(|(f, _)| f == name),
            "{name} is shipped but not in the matrix"
        );
    }
    let mut failures = Vec::new();
    for (file, sets) in SCENARIOS {
        // The first controller's run picks its dilation as a user's does (`dilation: auto`
        // measures the machine, then steps up from there); the others run at the dilation it
        // picked, not measuring and stepping again: the matrix checks that every run completes
        // intact, and the stepping is the dilation tests' to check.
        let mut picked: Option<f64> = None;
        for cc in CONTROLLERS {
            let out = scratch_dir(&format!("mx-{}-{}", &file[..file.len() - 5], cc.replace('+', "p")));
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_intlab"));
            cmd.arg("run")
                .arg(topologies.join(file))
                .args(["--cc", cc, "--out"])
                .arg(out.join("r"));
            for s in sets {
                cmd.args(["--set", s]);
            }
            if let Some(d) = &picked {
                cmd.args(["--set", &format!("dilation={d}")]);
            }
            let o = cmd.output().expect("intlab runs");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            let summary = text
                .lines()
                .find(|l| l.contains("flows completed"))
                .unwrap_or("no summary")
                .to_owned();
            eprintln!("{file} {cc}: exit {:?}: {summary}", o.status.code());
            if !o.status.success() {
                failures.push(format!("{file} --cc {cc}: exit {:?}\n{text}", o.status.code()));
                continue;
            }
            if picked.is_none() {
                picked = support::summary_json(&out.join("r"))["dilation"].as_f64();
            }
            // A scenario of programs alone has no flows (its programs exited 0: the exit says
            // so); the lab must have counted their QPs.
            let flows_csv = out.join("r").join("flows.csv");
            if std::fs::metadata(&flows_csv).expect("flows.csv").len() == 0 {
                let qps = std::fs::read_to_string(out.join("r").join("qps.csv")).unwrap_or_default();
                if qps.lines().count() < 2 {
                    failures.push(format!("{file} --cc {cc}: no flows and no program QPs counted"));
                }
                continue;
            }
            let mut flows = csv::Reader::from_path(&flows_csv).expect("flows.csv");
            let header = flows.headers().expect("header").clone();
            let col = |n: &str| header.iter().position(|h| h == n).expect("column");
            let (size, got) = (col("size_bytes"), col("bytes_received"));
            let mut sizes = Vec::new();
            for rec in flows.records() {
                let rec = rec.expect("row");
                if rec[size] != rec[got] {
                    failures.push(format!("{file} --cc {cc}: a flow is not intact: {rec:?}"));
                }
                sizes.push(rec[size].parse::<u64>().expect("a size"));
            }
            if let Err(e) = ns3_fct_matches(&out.join("r").join("ns3").join("fct.txt"), &sizes) {
                failures.push(format!("{file} --cc {cc}: ns3/fct.txt: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
