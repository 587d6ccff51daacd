//! `intlab compare`: one scenario, same seed, once per controller. Each run keeps its own
//! results folder; side by side come a table (text, CSV, Markdown), slowdown by flow size, and
//! overlaid plots (FCT CDF, bottleneck queue, aggregate throughput), gathered in `report.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use intlab_lab::results::{
    Line, Results, Summary, WriteError, csv_rows, fct_cdf_points, lines, queue_points, throughput_points,
    write_error_at,
};
use intlab_lab::run::{self, Progress, RunError};
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_lab::topology::LoadError;

/// The comparison table as CSV.
pub const TABLE_CSV: &str = "compare.csv";
/// The comparison table as printed.
pub const TABLE_TXT: &str = "compare.txt";
/// The report page, the overlaid FCT CDFs and the overlaid bottleneck queues take the names a
/// single run gives its own.
pub use intlab_lab::results::{FCT_CDF, QUEUE, REPORT};
/// Overlaid aggregate throughput.
pub const THROUGHPUT: &str = "throughput.svg";

/// Why a comparison failed.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The scenario with one of the controllers does not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A run failed.
    #[error("{controller}: {cause}")]
    Run {
        /// The controller of the failed run.
        controller: String,
        /// What failed.
        cause: RunError,
    },
    /// A comparison file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// One controller's run.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The controller, as given.
    pub controller: String,
    /// Where its results are.
    pub dir: PathBuf,
    /// Its results.
    pub results: Results,
}

/// Every run of a comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The scenario's name.
    pub scenario: String,
    /// One per controller, in the order given.
    pub entries: Vec<Entry>,
}

/// A folder name for a controller ("hpcc++" → "hpccpp").
pub fn folder_of(controller: &str) -> String {
    controller.replace('+', "p")
}

/// Runs `file` (the built-in scenario when None) with `set` applied under each of
/// `controllers` into `out/CONTROLLER/`, then writes the comparison into `out`. Every
/// controller's scenario is checked before the first run. `stop` ends the current run and
/// skips the rest.
pub fn compare(
    file: Option<&Path>,
    set: &[String],
    controllers: &[String],
    out: &Path,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Comparison, CompareError> {
    let mut scenarios = Vec::new();
    for cc in controllers {
        let o = Overrides {
            controller: Some(cc.clone()),
            set: set.to_vec(),
            only: None,
        };
        scenarios.push(Scenario::load_or_builtin(file, &o)?);
    }
    let series: Vec<(String, PathBuf, &Scenario)> = controllers
        .iter()
        .zip(&scenarios)
        .map(|(cc, s)| (cc.clone(), out.join(folder_of(cc)), s))
        .collect();
    let results = run::run_series(&series, 'c', stop, progress)
        .map_err(|(controller, cause)| CompareError::Run { controller, cause })?;
    let entries = series
        .into_iter()
        .zip(results)
        .map(|((controller, dir, _), results)| Entry {
            controller,
            dir,
            results,
        })
        .collect();
    let c = Comparison {
        scenario: scenarios.first().map_or_else(String::new, |s| s.topology.name.clone()),
        entries,
    };
    write(out, &c)?;
    Ok(c)
}

/// One row of the comparison table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Controller.
    pub controller: String,
    /// Flows completed of those planned.
    pub completed: String,
    /// FCT p50, p99, max (us).
    pub fct_p50_us: Option<f64>,
    /// FCT p99 (us).
    pub fct_p99_us: Option<f64>,
    /// FCT max (us).
    pub fct_max_us: Option<f64>,
    /// Slowdown p50.
    pub slowdown_p50: Option<f64>,
    /// Slowdown p99.
    pub slowdown_p99: Option<f64>,
    /// Slowdown max.
    pub slowdown_max: Option<f64>,
    /// Goodput over the receivers' link rates.
    pub normalized_goodput: f64,
    /// Mean RTT over path RTT.
    pub rtt_inflation: Option<f64>,
    /// Bottleneck queue p99 (bytes).
    pub queue_p99_bytes: Option<f64>,
    /// Frames dropped.
    pub drops: u64,
    /// Packets sent again.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Slowest application's runtime (us), when the workload has applications.
    pub app_runtime_max_us: Option<f64>,
    /// Largest p99 step time over applications (us): a collective's step is its slowest flow.
    pub step_p99_us: Option<f64>,
    /// The run's timing warning.
    pub timing_warning: bool,
}

impl Row {
    /// The row of one run's summary.
    pub fn of(controller: &str, s: &Summary) -> Row {
        let us = |ns: f64| ns / 1e3;
        Row {
            controller: controller.to_owned(),
            completed: format!("{}/{}", s.completed, s.flows),
            fct_p50_us: s.fct_ns.map(|q| us(q.p50)),
            fct_p99_us: s.fct_ns.map(|q| us(q.p99)),
            fct_max_us: s.fct_ns.map(|q| us(q.max)),
            slowdown_p50: s.slowdown.map(|q| q.p50),
            slowdown_p99: s.slowdown.map(|q| q.p99),
            slowdown_max: s.slowdown.map(|q| q.max),
            normalized_goodput: s.normalized_goodput,
            rtt_inflation: s.rtt_inflation,
            queue_p99_bytes: s.bottleneck_queue.map(|q| q.p99),
            drops: s.drops,
            retransmissions: s.retransmissions,
            timeouts: s.timeouts,
            app_runtime_max_us: s
                .applications
                .iter()
                .map(|a| a.runtime_ns.map(|n| n as f64 / 1e3))
                .reduce(|a, b| a.zip(b).map(|(a, b)| a.max(b)))
                .flatten(),
            step_p99_us: s
                .applications
                .iter()
                .filter_map(|a| a.iteration_ns.map(|q| q.p99 / 1e3))
                .reduce(f64::max),
            timing_warning: s.timing_warning,
        }
    }
}

fn cell(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".to_owned(), |v| format!("{v:.digits$}"))
}

/// The cells of `r` in the order of [`HEADER`].
fn cells(r: &Row) -> Vec<String> {
    vec![
        r.controller.clone(),
        r.completed.clone(),
        cell(r.fct_p50_us, 1),
        cell(r.fct_p99_us, 1),
        cell(r.fct_max_us, 1),
        cell(r.slowdown_p50, 2),
        cell(r.slowdown_p99, 2),
        cell(r.slowdown_max, 2),
        format!("{:.1}", r.normalized_goodput * 100.0),
        cell(r.rtt_inflation, 2),
        cell(r.queue_p99_bytes.map(|b| b / 1e3), 1),
        r.drops.to_string(),
        r.retransmissions.to_string(),
        r.timeouts.to_string(),
        cell(r.app_runtime_max_us, 1),
        cell(r.step_p99_us, 1),
        if r.timing_warning { "yes" } else { "" }.to_owned(),
    ]
}

/// Column titles of the printed and Markdown tables.
const HEADER: [&str; 17] = [
    "controller",
    "done",
    "FCT p50 us",
    "FCT p99 us",
    "FCT max us",
    "slow p50",
    "slow p99",
    "slow max",
    "goodput %",
    "RTT infl",
    "queue p99 KB",
    "drops",
    "retx",
    "RTOs",
    "app runtime us",
    "step p99 us",
    "timing warn",
];

/// The rows of `c`.
pub fn rows(c: &Comparison) -> Vec<Row> {
    c.entries
        .iter()
        .map(|e| Row::of(&e.controller, &e.results.summary))
        .collect()
}

/// The table as aligned text, then slowdown by flow size when the flows span several sizes.
pub fn table(c: &Comparison) -> String {
    let body: Vec<Vec<String>> = rows(c).iter().map(cells).collect();
    let widths: Vec<usize> = (0..HEADER.len())
        .map(|k| {
            body.iter()
                .map(|r| r[k].len())
                .chain([HEADER[k].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in std::iter::once(HEADER.iter().map(|h| h.to_string()).collect::<Vec<_>>()).chain(body) {
        let padded: Vec<String> = line.iter().zip(&widths).map(|(x, w)| format!("{x:>w$}")).collect();
        let _ = writeln!(out, "{}", padded.join("  "));
    }
    out.push_str(&by_size(c, false));
    out.push_str(&by_program(c, false));
    out
}

/// The figure of a program's own that its row shows: perftest's mean bandwidth or latency.
const PROGRAM_FIGURES: [&str; 4] = [
    "BW average[MB/sec]",
    "t_avg[usec]",
    "t_typical[usec]",
    "bandwidth overall[MB/sec]",
];

/// Per controller, what each program measured itself (perftest's mean bandwidth or latency,
/// else how it ended) and the lab's count of the programs' QPs, as text or Markdown; empty
/// when no run started programs.
fn by_program(c: &Comparison, markdown: bool) -> String {
    let Some(first) = c.entries.iter().find(|e| !e.results.summary.programs.is_empty()) else {
        return String::new();
    };
    let names: Vec<&str> = first
        .results
        .summary
        .programs
        .iter()
        .map(|p| p.spec.name.as_str())
        .collect();
    let head: Vec<String> = std::iter::once("controller".to_owned())
        .chain(names.iter().map(|n| n.to_string()))
        .chain(["QPs' goodput (lab)".to_owned(), "QPs' Jain (lab)".to_owned()])
        .collect();
    let mut grid = vec![head];
    for e in &c.entries {
        let s = &e.results.summary;
        let mut row = vec![e.controller.clone()];
        for n in &names {
            let cell = s
                .programs
                .iter()
                .find(|p| p.spec.name == *n)
                .map_or("-".to_owned(), |p| {
                    // perftest's and UCX's known figure, else the first the program gave.
                    let figure = PROGRAM_FIGURES
                        .iter()
                        .find_map(|k| p.figures.iter().find(|(name, _)| name == k))
                        .or(p.figures.first());
                    match figure {
                        Some((k, v)) if !p.failed() => {
                            format!("{v} {}", k.split('[').nth(1).unwrap_or("]").trim_end_matches(']'))
                        }
                        _ => p.end.to_string(),
                    }
                });
            row.push(cell);
        }
        let q = s.program_qps;
        row.push(q.map_or("-".to_owned(), |q| format!("{:.1} Mb/s", q.goodput_bps / 1e6)));
        row.push(cell(q.and_then(|q| q.jain), 3));
        grid.push(row);
    }
    let mut out = String::from(if markdown {
        "\n### Programs (what each measured itself; the lab's count of their QPs)\n\n"
    } else {
        "\nprograms (what each measured itself; the lab's count of their QPs)\n"
    });
    for (k, r) in grid.iter().enumerate() {
        if markdown {
            let _ = writeln!(out, "| {} |", r.join(" | "));
            if k == 0 {
                let _ = writeln!(out, "|{}", "---|".repeat(r.len()));
            }
        } else {
            let _ = writeln!(out, "{}", r.iter().map(|x| format!("{x:>20}")).collect::<String>());
        }
    }
    out
}

/// Slowdown p50/p99 per size bucket and controller, as text or Markdown; empty when every flow
/// is in one bucket.
fn by_size(c: &Comparison, markdown: bool) -> String {
    let mut labels: Vec<String> = Vec::new();
    for e in &c.entries {
        for b in &e.results.summary.slowdown_by_size {
            if !labels.contains(&b.label) {
                labels.push(b.label.clone());
            }
        }
    }
    if labels.len() < 2 {
        return String::new();
    }
    let mut out = String::from(if markdown {
        "\n### Slowdown by flow size (p50 / p99)\n\n"
    } else {
        "\nslowdown by flow size (p50 / p99)\n"
    });
    let head: Vec<String> = std::iter::once("controller".to_owned())
        .chain(labels.iter().cloned())
        .collect();
    let mut grid = vec![head];
    for e in &c.entries {
        let mut row = vec![e.controller.clone()];
        for l in &labels {
            let b = e.results.summary.slowdown_by_size.iter().find(|b| &b.label == l);
            row.push(b.map_or("-".to_owned(), |b| {
                format!("{:.2} / {:.2} ({})", b.slowdown.p50, b.slowdown.p99, b.flows)
            }));
        }
        grid.push(row);
    }
    if markdown {
        for (k, r) in grid.iter().enumerate() {
            let _ = writeln!(out, "| {} |", r.join(" | "));
            if k == 0 {
                let _ = writeln!(out, "|{}", "---|".repeat(r.len()));
            }
        }
    } else {
        for r in &grid {
            let _ = writeln!(out, "{}", r.iter().map(|x| format!("{x:>24}")).collect::<String>());
        }
    }
    out
}

fn markdown_table(c: &Comparison) -> String {
    let mut out = format!("| {} |\n|{}\n", HEADER.join(" | "), "---|".repeat(HEADER.len()));
    for r in rows(c) {
        let _ = writeln!(out, "| {} |", cells(&r).join(" | "));
    }
    out
}

/// Writes the table, the overlaid plots and the report page into `out`.
pub fn write(out: &Path, c: &Comparison) -> Result<(), WriteError> {
    let fail = |name: &str| write_error_at(out, name);
    std::fs::create_dir_all(out).map_err(fail(""))?;
    csv_rows(out, TABLE_CSV, rows(c))?;
    std::fs::write(out.join(TABLE_TXT), table(c)).map_err(fail(TABLE_TXT))?;
    let overlay = |points: fn(&Results) -> Vec<(f64, f64)>| -> Vec<Line> {
        c.entries
            .iter()
            .map(|e| Line {
                label: e.controller.clone(),
                points: points(&e.results),
            })
            .collect()
    };
    let names = c
        .entries
        .iter()
        .map(|e| e.controller.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let caption = |what: &str| format!("{}: {what} ({names})", c.scenario);
    lines(
        &out.join(FCT_CDF),
        &caption("FCT CDF"),
        "flow completion time (ms)",
        "fraction of flows",
        &overlay(fct_cdf_points),
    )
    .map_err(fail(FCT_CDF))?;
    lines(
        &out.join(QUEUE),
        &caption("bottleneck queue"),
        "time (ms)",
        "largest queue per interval (KB)",
        &overlay(queue_points),
    )
    .map_err(fail(QUEUE))?;
    lines(
        &out.join(THROUGHPUT),
        &caption("throughput of all flows"),
        "time (ms)",
        "acknowledged (Gb/s)",
        &overlay(throughput_points),
    )
    .map_err(fail(THROUGHPUT))?;
    let mut report = format!(
        "# {}: {names}\n\nSame scenario and seed for every controller; each run's own results and report are in its folder.\n\n",
        c.scenario
    );
    report.push_str(&markdown_table(c));
    report.push_str(&by_size(c, true));
    report.push_str(&by_program(c, true));
    let _ = write!(
        report,
        "\n![FCT CDF]({FCT_CDF})\n\n![bottleneck queue]({QUEUE})\n\n![throughput]({THROUGHPUT})\n\nRuns:\n\n"
    );
    for e in &c.entries {
        let folder = e
            .dir
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
        let _ = writeln!(report, "- {}: [{folder}/report.md]({folder}/report.md)", e.controller);
    }
    std::fs::write(out.join(REPORT), report).map_err(fail(REPORT))
}
