//! The results folder: CSV and JSON files whose formats docs/results.md documents.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde::Serialize;

use super::write_error::{WriteError, at};

use super::{Results, plots, table};

/// File names in the results folder.
pub const SCENARIO: &str = "scenario.yaml";
/// Per-flow records.
pub const FLOWS: &str = "flows.csv";
/// Per-flow time series.
pub const SERIES: &str = "series.csv";
/// Per-port queues over time.
pub const QUEUES: &str = "queues.csv";
/// Host stalls.
pub const STALLS: &str = "stalls.csv";
/// The network's events (written when the scenario has `events:`).
pub const EVENTS: &str = "events.csv";
/// Per-application outcomes (written when the workload has applications).
pub const APPLICATIONS: &str = "applications.csv";
/// The QPs of programs in the hosts (written when there were any).
pub const QPS: &str = "qps.csv";
/// Switch and host counters.
pub const COUNTERS: &str = "counters.json";
/// The summary as JSON.
pub const SUMMARY_JSON: &str = "summary.json";
/// The summary table as printed.
pub const SUMMARY_TXT: &str = "summary.txt";
/// The run's report page: the summary and the plots.
pub const REPORT: &str = "report.md";
/// Why the lab's data path check failed (written instead of results when it fails).
pub const DATAPATH: &str = "datapath.txt";

/// Everything a run may write into its folder: what `--force` clears before a run.
pub const WRITTEN: [&str; 18] = [
    SCENARIO,
    EVENTS,
    FLOWS,
    QPS,
    SERIES,
    QUEUES,
    STALLS,
    APPLICATIONS,
    COUNTERS,
    SUMMARY_JSON,
    SUMMARY_TXT,
    REPORT,
    DATAPATH,
    plots::FCT_CDF,
    plots::RATES,
    plots::QUEUE,
    "capture",
    "counters.json.tmp",
];

/// Makes `dir` ready for a run's results: it must be missing or empty, so that no file of an
/// earlier run is taken for this one's; with `force`, what a run writes ([`WRITTEN`]) is
/// removed first and anything else left alone.
pub fn prepare(dir: &Path, force: bool) -> Result<(), PrepareError> {
    let entries: Vec<std::fs::DirEntry> = match std::fs::read_dir(dir) {
        Ok(d) => d.collect::<Result<_, _>>().map_err(at(dir, ""))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(at(dir, "")(e).into()),
    };
    if entries.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(PrepareError::NotEmpty(dir.display().to_string()));
    }
    for e in entries {
        let name = e.file_name();
        let Some(name) = name.to_str().filter(|n| WRITTEN.contains(n)) else {
            continue;
        };
        let path = e.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(at(dir, name))?;
    }
    Ok(())
}

/// Why a results folder cannot take a run.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// It holds files already.
    #[error(
        "the results folder {0} is not empty: choose another --out (`intlab run --force` replaces what a run writes there)"
    )]
    NotEmpty(String),
    /// It cannot be read or cleared.
    #[error(transparent)]
    Io(#[from] WriteError),
}

/// Writes `rows` as the CSV file `name` of `dir`, a header from the row's fields.
pub fn csv_rows<R: Serialize>(dir: &Path, name: &str, rows: impl IntoIterator<Item = R>) -> Result<(), WriteError> {
    let e = at(dir, name);
    let mut w = csv::Writer::from_path(dir.join(name)).map_err(|x| e(x.into()))?;
    for r in rows {
        w.serialize(r).map_err(|x| e(x.into()))?;
    }
    w.flush().map_err(e)
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

#[derive(Serialize)]
struct FlowRow<'a> {
    id: u32,
    src: &'a str,
    dst: &'a str,
    size_bytes: u64,
    start_us: f64,
    completed: bool,
    fct_us: Option<f64>,
    ideal_fct_us: f64,
    slowdown: Option<f64>,
    path_rtt_us: f64,
    base_rtt_us: Option<f64>,
    bytes_received: u64,
    packets_sent: u64,
    retransmissions: u64,
    timeouts: u64,
    naks: u64,
    cnps: u64,
    rtt_min_us: Option<f64>,
    rtt_mean_us: Option<f64>,
    app: Option<&'a str>,
    iteration: Option<u32>,
}

#[derive(Serialize)]
struct ApplicationRow<'a> {
    name: &'a str,
    delay_sensitivity: Option<f64>,
    iterations: u32,
    completed_iterations: u32,
    runtime_us: Option<f64>,
    iteration_p50_us: Option<f64>,
    iteration_p99_us: Option<f64>,
    message_mean_us: Option<f64>,
}

#[derive(Serialize)]
struct SeriesRow {
    flow: u32,
    t_us: f64,
    rate_mbps: f64,
    acked_bytes: u64,
    window_bytes: Option<u64>,
    utilization: Option<f64>,
    int_qlen_bytes: Option<u64>,
    rtt_us: Option<f64>,
    target_delay_us: Option<f64>,
}

#[derive(Serialize)]
struct QueueRow<'a> {
    switch: &'a str,
    port: &'a str,
    t_us: f64,
    queue_bytes: u64,
}

#[derive(Serialize)]
struct QpRow<'a> {
    host: &'a str,
    pid: u32,
    program: &'a str,
    qpn: u32,
    transport: &'a str,
    state: &'a str,
    peer: Option<std::net::Ipv4Addr>,
    peer_qpn: Option<u32>,
    controller: &'a str,
    messages_sent: u64,
    bytes_sent: u64,
    messages_received: u64,
    bytes_received: u64,
    packets_sent: u64,
    wire_bytes: u64,
    retransmissions: u64,
    timeouts: u64,
    naks: u64,
    cnps: u64,
    rtt_min_us: Option<f64>,
    rtt_mean_us: Option<f64>,
    first_sent_us: Option<f64>,
    last_progress_us: Option<f64>,
    send_mbps: Option<f64>,
    first_received_us: Option<f64>,
    last_received_us: Option<f64>,
    receive_mbps: Option<f64>,
}

#[derive(Serialize)]
struct StallRow<'a> {
    host: &'a str,
    t_us: f64,
    late_us: f64,
}

#[derive(Serialize)]
struct EventRow<'a> {
    t_us: f64,
    /// As Wireshark's `frame.time_epoch`, to find the event in a capture.
    epoch_s: String,
    event: &'a str,
}

#[derive(Serialize)]
struct Counters<'a> {
    switches: &'a [intlab_switch::SwitchSnapshot],
    hosts: &'a [super::HostCounters],
}

/// Writes the scenario text as resolved; the first file of a run, so even a run stopped early
/// leaves what it was running.
pub fn write_scenario(dir: &Path, text: &str) -> Result<(), WriteError> {
    std::fs::create_dir_all(dir).map_err(at(dir, ""))?;
    std::fs::write(dir.join(SCENARIO), text).map_err(at(dir, SCENARIO))
}

/// Writes `text` as file `name` of `dir`.
pub fn write_text(dir: &Path, name: &str, text: &str) -> Result<(), WriteError> {
    std::fs::write(dir.join(name), text).map_err(at(dir, name))
}

/// Writes every results file and plot into `dir` (which exists).
pub fn write_all(dir: &Path, r: &Results) -> Result<(), WriteError> {
    write_flows(dir, r)?;
    if !r.summary.applications.is_empty() {
        csv_rows(
            dir,
            APPLICATIONS,
            r.summary.applications.iter().map(|a| ApplicationRow {
                name: &a.name,
                delay_sensitivity: a.delay_sensitivity,
                iterations: a.iterations,
                completed_iterations: a.completed_iterations,
                runtime_us: a.runtime_ns.map(us),
                iteration_p50_us: a.iteration_ns.map(|q| q.p50 / 1e3),
                iteration_p99_us: a.iteration_ns.map(|q| q.p99 / 1e3),
                message_mean_us: a.message_mean_ns.map(|m| m / 1e3),
            }),
        )?;
    }
    csv_rows(
        dir,
        SERIES,
        r.series.iter().map(|p| SeriesRow {
            flow: p.flow,
            t_us: us(p.t_ns),
            rate_mbps: p.rate_bps as f64 / 1e6,
            acked_bytes: p.acked_bytes,
            window_bytes: p.window_bytes,
            utilization: p.utilization,
            int_qlen_bytes: p.int_qlen_bytes,
            rtt_us: p.rtt_ns.map(us),
            target_delay_us: p.target_delay_ns.map(us),
        }),
    )?;
    csv_rows(
        dir,
        QUEUES,
        r.queues.iter().flat_map(|q| {
            q.points.iter().map(|&(t, b)| QueueRow {
                switch: &q.switch,
                port: &q.port,
                t_us: us(t),
                queue_bytes: b,
            })
        }),
    )?;
    write_program_qps(dir, r)?;
    csv_rows(
        dir,
        STALLS,
        r.stalls.iter().map(|s| StallRow {
            host: &s.host,
            t_us: us(s.at_ns),
            late_us: us(s.late_ns),
        }),
    )?;
    if !r.events.is_empty() {
        csv_rows(
            dir,
            EVENTS,
            r.events.iter().map(|e| EventRow {
                t_us: us(e.t_ns),
                epoch_s: format!("{}.{:09}", e.epoch_ns / 1_000_000_000, e.epoch_ns % 1_000_000_000),
                event: &e.what,
            }),
        )?;
    }
    json(
        dir,
        COUNTERS,
        &Counters {
            switches: &r.switches,
            hosts: &r.hosts,
        },
    )?;
    json(dir, SUMMARY_JSON, &r.summary)?;
    let table = table::summary_table(&r.summary);
    std::fs::write(dir.join(SUMMARY_TXT), &table).map_err(at(dir, SUMMARY_TXT))?;
    plots::draw_all(dir, r).map_err(at(dir, "plots"))?;
    super::ns3::write(dir, r)?;
    write_report(dir, r, &table)
}

/// `flows.csv`: one row per flow.
fn write_flows(dir: &Path, r: &Results) -> Result<(), WriteError> {
    csv_rows(
        dir,
        FLOWS,
        r.flows.iter().map(|f| FlowRow {
            id: f.id,
            src: &f.src,
            dst: &f.dst,
            size_bytes: f.size,
            start_us: us(f.start_ns),
            completed: f.fct_ns.is_some(),
            fct_us: f.fct_ns.map(us),
            ideal_fct_us: us(f.ideal_fct_ns),
            slowdown: f.slowdown,
            path_rtt_us: us(f.path_rtt_ns),
            base_rtt_us: f.base_rtt_ns.map(us),
            bytes_received: f.bytes_received,
            packets_sent: f.packets_sent,
            retransmissions: f.retransmissions,
            timeouts: f.timeouts,
            naks: f.naks,
            cnps: f.cnps,
            rtt_min_us: f.rtt_min_ns.map(us),
            rtt_mean_us: f.rtt_mean_ns.map(us),
            app: f
                .step
                .and_then(|s| r.summary.applications.get(usize::from(s.app)))
                .map(|a| a.name.as_str()),
            iteration: f.step.map(|s| s.iteration),
        }),
    )
}

/// `qps.csv`, when programs in the hosts made QPs: one row per QP.
fn write_program_qps(dir: &Path, r: &Results) -> Result<(), WriteError> {
    if r.program_qps.is_empty() {
        return Ok(());
    }
    csv_rows(
        dir,
        QPS,
        r.program_qps.iter().map(|(host, q)| QpRow {
            host,
            pid: q.owner.pid,
            program: &q.owner.command,
            qpn: q.qpn,
            transport: &q.transport,
            state: &q.state,
            peer: q.peer,
            peer_qpn: q.peer_qpn,
            controller: &q.controller,
            messages_sent: q.messages_sent,
            bytes_sent: q.bytes_sent,
            messages_received: q.messages_received,
            bytes_received: q.bytes_received,
            packets_sent: q.packets_sent,
            wire_bytes: q.wire_bytes,
            retransmissions: q.retransmissions,
            timeouts: q.timeouts,
            naks: q.naks,
            cnps: q.cnps,
            rtt_min_us: q.rtt_min_ns.map(us),
            rtt_mean_us: q.rtt_mean_ns.map(us),
            first_sent_us: q.first_sent_ns.map(us),
            last_progress_us: q.last_progress_ns.map(us),
            send_mbps: q.send_bps().map(|b| b / 1e6),
            first_received_us: q.first_received_ns.map(us),
            last_received_us: q.last_received_ns.map(us),
            receive_mbps: q.receive_bps().map(|b| b / 1e6),
        }),
    )
}

/// `report.md`: the summary table, the plots, and what each file is.
fn write_report(dir: &Path, r: &Results, table: &str) -> Result<(), WriteError> {
    let report = format!(
        "# {} with {}

```
{table}```

![FCT CDF]({})

![rates]({})

![queue]({})

Files: {FLOWS}, {SERIES}, {QUEUES}, {STALLS}, {COUNTERS}, {SUMMARY_JSON}; as the ns-3 HPCC simulator writes them: {ns3}/{fct}, {ns3}/{qlen}, {ns3}/{pfc} (docs/results.md).
",
        r.summary.scenario,
        r.summary.controller,
        plots::FCT_CDF,
        plots::RATES,
        plots::QUEUE,
        ns3 = super::ns3::DIR,
        fct = super::ns3::FCT,
        qlen = super::ns3::QLEN,
        pfc = super::ns3::PFC,
    );
    std::fs::write(dir.join(REPORT), report).map_err(at(dir, REPORT))
}

fn json<T: Serialize>(dir: &Path, name: &str, v: &T) -> Result<(), WriteError> {
    let e = at(dir, name);
    let mut w = BufWriter::new(File::create(dir.join(name)).map_err(&e)?);
    serde_json::to_writer_pretty(&mut w, v).map_err(|x| e(x.into()))?;
    writeln!(w).and_then(|()| w.flush()).map_err(e)
}
