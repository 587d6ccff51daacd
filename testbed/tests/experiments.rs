//! Experiments end to end: `compare` writes its table, report and overlaid plots (each plot
//! read back: an SVG with a line per controller and the controller in its legend); `sweep`
//! writes its CSV and heatmaps (a cell per point, each labelled); a WebSearch workload on the
//! leaf-spine reports slowdown by flow size. Run as root (scripts/test).

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use intlab_experiments::compare::{self, compare};
use intlab_experiments::sweep::{self, Axis, sweep};
use intlab_lab::run::Silent;
use intlab_lab::scenario::{Overrides, Scenario};

fn shipped(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(file)
}

/// An SVG plot's text, checked to be one.
fn svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        text.starts_with("<svg") && text.trim_end().ends_with("</svg>"),
        "{}: not an SVG",
        path.display()
    );
    text
}

/// Whether an SVG has a text element saying exactly `what`.
fn has_text(svg: &str, what: &str) -> bool {
    svg.split("<text").skip(1).any(|t| {
        t.split_once('>')
            .and_then(|(_, rest)| rest.split_once("</text>"))
            .is_some_and(|(inner, _)| inner.trim() == what)
    })
}

#[test]
fn compare_writes_a_table_a_report_and_overlaid_plots() {
    support::require_root();
    let _serial = support::serial();
    let out = support::scratch_dir("compare");
    let controllers = ["hpcc".to_owned(), "dcqcn".to_owned()];
    let stop = AtomicBool::new(false);
    let c = compare(
        Some(&shipped("incast-4to1-dc.yaml")),
        &[],
        &controllers,
        &out,
        &stop,
        &mut Silent,
    )
    .expect("the comparison runs");
    assert_eq!(c.entries.len(), 2);
    // The shipped file says `dilation: auto`: both runs at the one dilation it settled on.
    let dilation = |e: &compare::Entry| (e.results.summary.dilation, e.results.summary.dilation_warned.clone());
    assert!(c.entries[0].results.summary.dilation_auto);
    assert_eq!(dilation(&c.entries[0]), dilation(&c.entries[1]));
    let csv = std::fs::read_to_string(out.join(compare::TABLE_CSV)).expect("table");
    assert_eq!(csv.lines().count(), 3, "a header and a row per controller:\n{csv}");
    assert!(csv.lines().nth(1).is_some_and(|l| l.starts_with("hpcc,4/4,")), "{csv}");
    let report = std::fs::read_to_string(out.join(compare::REPORT)).expect("report");
    for link in [
        "fct_cdf.svg",
        "queue.svg",
        "throughput.svg",
        "hpcc/report.md",
        "dcqcn/report.md",
    ] {
        assert!(report.contains(link), "report misses {link}");
    }
    for plot in [compare::FCT_CDF, compare::QUEUE, compare::THROUGHPUT] {
        let text = svg(&out.join(plot));
        // Data lines are 2 px wide (the mesh and legend marks 1 px).
        let lines = text.matches("<polyline").count();
        let data = text
            .split("<polyline")
            .filter(|p| p.contains("stroke-width=\"2\""))
            .count();
        assert_eq!(data, 2, "{plot}: a line per controller ({lines} polylines)");
        assert!(has_text(&text, "hpcc") && has_text(&text, "dcqcn"), "{plot}: legend");
    }
    for cc in ["hpcc", "dcqcn"] {
        let run = out.join(cc);
        assert!(std::fs::read_to_string(run.join("report.md")).is_ok_and(|r| r.contains("```")));
        for plot in ["fct_cdf.svg", "rates.svg", "queue.svg"] {
            assert!(svg(&run.join(plot)).contains("<polyline"), "{cc}/{plot}: no line");
        }
    }
}

#[test]
fn sweep_writes_its_grid_and_heatmaps() {
    support::require_root();
    let _serial = support::serial();
    let out = support::scratch_dir("sweep");
    let axes = [
        Axis::parse("alpha=0.05,0.2").expect("axis"),
        Axis::parse("zeta=0.2,0.8").expect("axis"),
    ];
    let stop = AtomicBool::new(false);
    let runs = sweep(
        Some(&shipped("incast-4to1-dc.yaml")),
        Some("hpcc++"),
        &[],
        &axes,
        &out,
        &stop,
        &mut Silent,
    )
    .expect("the sweep runs");
    assert_eq!(runs.len(), 4);
    // Point 4 is α = 0.2, ζ = 0.8: β = 0.08.
    let scenario = std::fs::read_to_string(runs[3].dir.join("scenario.yaml")).expect("scenario");
    assert!(scenario.contains("beta: 0.08"), "{scenario}");
    let csv = std::fs::read_to_string(out.join(sweep::TABLE_CSV)).expect("csv");
    assert_eq!(csv.lines().count(), 5);
    assert!(
        csv.lines()
            .nth(4)
            .is_some_and(|l| l.starts_with("0.2,0.8,point-4,4,4,")),
        "{csv}"
    );
    for map in [sweep::HEATMAP_P99, sweep::HEATMAP_MAX] {
        let text = svg(&out.join(map));
        assert!(text.matches("<rect").count() >= 4, "{map}: a cell per point");
        let fct = runs[0].results.summary.fct_ns.expect("FCT").max / 1e3;
        if map == sweep::HEATMAP_MAX {
            assert!(has_text(&text, &format!("{fct:.0}")), "{map}: cell labels");
        }
    }
}

#[test]
fn web_search_on_the_leaf_spine_reports_slowdown_by_size() {
    support::require_root();
    let _serial = support::serial();
    let overrides = Overrides {
        set: vec![
            "workload={poisson: {cdf: websearch, load: 0.5, window: 50ms}}".into(),
            "defaults.link.rate=1Gbps".into(),
        ],
        ..Overrides::default()
    };
    let s = Scenario::load(&shipped("leaf-spine.yaml"), &overrides).expect("loads");
    let r = support::run_scenario("ws", &s);
    assert_eq!(r.summary.completed, r.summary.flows, "every flow completes");
    assert!(r.summary.flows >= 8, "{} flows", r.summary.flows);
    let buckets = &r.summary.slowdown_by_size;
    assert!(buckets.len() >= 3, "{buckets:?}");
    assert_eq!(buckets.iter().map(|b| b.flows).sum::<usize>(), r.summary.completed);
}

#[test]
fn doctor_measures_the_machine_and_suggests_a_dilation() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_intlab"))
        .arg("doctor")
        .arg(shipped("incast-16to1.yaml"))
        .output()
        .expect("intlab runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("wake-up lateness of a 50 us sleep: p50"), "{out}");
    assert!(out.contains("kpps of 1 KB datagrams"), "{out}");
    let suggested: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("suggested dilation: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no suggestion in {out}"));
    // 17 hosts at 10 Gb/s behind an 8 us RTT: no 2-core machine runs that in real time.
    assert!(suggested >= 10.0, "{out}");
}

/// Whether any run in the `point-*` folders of `out` was late for the machine (the lab's timing
/// warning), and the largest share of CPU time the hypervisor took in any (unknown if any run
/// did not measure it).
fn points_machine(out: &Path) -> (bool, Option<f64>) {
    let mut late = false;
    let mut steal = Some(0.0_f64);
    let mut points_read = 0;
    let points = std::fs::read_dir(out).expect("the results folder");
    for p in points.map(|e| e.expect("an entry").path()) {
        if !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("point-")) {
            continue;
        }
        let s = support::summary_json(&p);
        late |= s["timing_warning"].as_bool().expect("timing_warning");
        steal = steal.zip(s["cpu_steal"].as_f64()).map(|(a, b)| a.max(b));
        points_read += 1;
    }
    assert!(points_read >= 2, "{points_read} points in {}", out.display());
    (late, steal)
}

#[test]
fn sensitivity_fits_runtime_against_message_time() {
    support::require_root();
    let _serial = support::serial();
    // Each level of congestion is a run of its own; one the machine did not keep up with
    // measured the machine (c_a 2.13 under 22-35 % steal once): the whole estimate is made again.
    let mut tries = support::Tries::new(
        3,
        std::time::Duration::from_secs(5),
        std::time::Instant::now() + support::PATIENCE,
    );
    let mut attempt = 0;
    let (out, text) = loop {
        let out = support::scratch_dir(&format!("sensitivity{attempt}"));
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_intlab"))
            .arg("sensitivity")
            .arg(shipped("two-apps-dc.yaml"))
            .args([
                "--app",
                "sensitive",
                "--congestion",
                "workload.applications.1.message=1MB,8MB",
            ])
            .args([
                "--set",
                "controller={name: dcqcn}",
                "--set",
                "workload.applications.0.iterations=4",
            ])
            .args(["--set", "workload.applications.1.iterations=2", "--out"])
            .arg(&out)
            .output()
            .expect("intlab runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let (late, steal) = points_machine(&out);
        if !late && steal.is_some_and(|x| x <= support::MAX_STEAL) {
            break (out, text);
        }
        eprintln!("attempt {attempt}: a point was late ({late}) or lost {steal:?} to steal (void)\n{text}");
        assert!(
            tries.again(steal, support::MAX_STEAL),
            "the machine did not keep up with any estimate"
        );
        attempt += 1;
    };
    let c_a: f64 = text
        .lines()
        .find_map(|l| l.split("delay sensitivity c_a = ").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no estimate in {text}"));
    // The sensitive application computes 50 us per 1 MB message of about 1 ms: its runtime
    // is almost all communication.
    assert!((0.5..1.5).contains(&c_a), "c_a {c_a}\n{text}");
    assert!(out.join("point-2/applications.csv").exists());
}
