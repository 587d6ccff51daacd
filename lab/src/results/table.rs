//! The summary as the table `intlab run` prints.

use std::fmt::Write;

use super::{Ending, PfcSummary, Quantiles, Summary};

fn time(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.3} s", n / 1e9),
        n if n >= 1e6 => format!("{:.3} ms", n / 1e6),
        n => format!("{:.1} us", n / 1e3),
    }
}

fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} KB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

fn rate(bps: f64) -> String {
    match bps {
        r if r >= 1e9 => format!("{:.2} Gb/s", r / 1e9),
        r => format!("{:.1} Mb/s", r / 1e6),
    }
}

fn row(out: &mut String, name: &str, q: Option<Quantiles>, f: fn(f64) -> String) {
    let cells = q.map_or(["-".to_owned(), "-".to_owned(), "-".to_owned()], |q| {
        [f(q.p50), f(q.p99), f(q.max)]
    });
    let _ = writeln!(out, "  {name:<22} {:>12} {:>12} {:>12}", cells[0], cells[1], cells[2]);
}

/// What the summary's first line says of a dilation `dilation: auto` picked.
fn auto_note(s: &Summary) -> String {
    if !s.dilation_auto {
        return String::new();
    }
    let mut note = ", picked by `dilation: auto` for this machine".to_owned();
    if !s.dilation_warned.is_empty() {
        let tried: Vec<String> = s.dilation_warned.iter().map(f64::to_string).collect();
        let _ = write!(note, " after {} did not keep time", tried.join(" and "));
    }
    note
}

/// The summary as aligned text.
pub fn summary_table(s: &Summary) -> String {
    let mut out = String::new();
    let ending = match s.ending {
        Ending::Completed => "completed",
        Ending::TimedOut => "stopped at the scenario's duration",
        Ending::Interrupted => "interrupted (partial results)",
        Ending::NoProgress => "stopped: a flow made no progress",
        Ending::ProgramFailed => "ended: a program the run waited for failed",
    };
    let _ = writeln!(
        out,
        "{} with {} (dilation {}{}): {}, {}/{} flows completed",
        s.scenario,
        s.controller,
        s.dilation,
        auto_note(s),
        ending,
        s.completed,
        s.flows
    );
    if let Some(d) = &s.diagnosis {
        let _ = writeln!(out, "  {d}");
    }
    if let serde_json::Value::Object(params) = &s.controller_params {
        let shown: Vec<String> = params
            .iter()
            .filter(|(k, _)| k.as_str() != "name")
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(out, "  {} as run (flow 1's path): {}", s.controller, shown.join(", "));
    }
    let _ = writeln!(out, "  {:<22} {:>12} {:>12} {:>12}", "", "p50", "p99", "max");
    // A run of programs alone has no flows to time.
    let flows = s.flows > 0;
    if flows {
        row(&mut out, "FCT", s.fct_ns, time);
        row(&mut out, "slowdown", s.slowdown, |x| format!("{x:.2}"));
    }
    if s.slowdown_by_size.len() > 1 {
        for b in &s.slowdown_by_size {
            let name = format!("  {} ({})", b.label, b.flows);
            row(&mut out, &name, Some(b.slowdown), |x| format!("{x:.2}"));
        }
    }
    let queue = match &s.bottleneck {
        Some(b) => format!("queue {b}"),
        None => "queue".to_owned(),
    };
    row(&mut out, &queue, s.bottleneck_queue, bytes);
    if flows {
        row(&mut out, "host overhead per RTT", s.host_overhead_ns, time);
    }
    if let (Some(b), Some((configured, carried))) = (&s.bottleneck, s.bottleneck_rate_bps) {
        let _ = writeln!(
            out,
            "  bottleneck {b} carried {} of its {} ({:.1} %) from the first start to the last completion",
            rate(carried as f64),
            rate(configured as f64),
            carried as f64 / configured.max(1) as f64 * 100.0
        );
    }
    if flows {
        let _ = writeln!(
            out,
            "  goodput {} ({:.1} % of the receivers' links)",
            rate(s.goodput_bps),
            s.normalized_goodput * 100.0
        );
    }
    if let Some(x) = s.int_overhead {
        let _ = writeln!(
            out,
            "  INT on data: {:.1} % of a full packet's wire bytes (goodput it costs)",
            x * 100.0
        );
    }
    if let Some(f) = &s.fairness {
        let stalled = if f.empty_windows > 0 {
            format!("; {} windows where every flow stalled: no data", f.empty_windows)
        } else {
            String::new()
        };
        if f.windows > 0 {
            let _ = writeln!(
                out,
                "  fairness (Jain, {} windows of {}): mean {:.3}, min {:.3}{stalled}",
                f.windows,
                time(f.window_ns as f64),
                f.mean,
                f.min
            );
        } else {
            let _ = writeln!(out, "  fairness: no window with data{stalled}");
        }
    }
    workload_lines(&mut out, s);
    losses(&mut out, s);
    if let Some(p) = &s.pfc {
        pfc_lines(&mut out, p);
    }
    if s.content_errors + s.bad_icrc > 0 {
        let _ = writeln!(
            out,
            "  INTEGRITY: {} corrupted bytes, {} bad ICRCs",
            s.content_errors, s.bad_icrc
        );
    }
    timing_lines(&mut out, s);
    if let Some(sites) = &s.sites {
        out.push_str(&sites.report());
    }
    if s.timing_warning {
        let _ = writeln!(
            out,
            "  WARNING: the machine did not keep up (switches released frames or senders woke more \
             than a tenth of an RTT late at p99, hosts stalled over {:.0} % of the time, or PFC pauses came too late \
             for the headroom); results are less faithful: raise `dilation` (now {}).",
            super::STALL_FRACTION_LIMIT * 100.0,
            s.dilation
        );
    }
    out
}

/// The summary's lines of the applications' and programs' own figures.
fn workload_lines(out: &mut String, s: &Summary) {
    for a in &s.applications {
        let runtime = a.runtime_ns.map_or_else(
            || format!("unfinished ({}/{} iterations)", a.completed_iterations, a.iterations),
            |r| time(r as f64),
        );
        let _ = writeln!(
            out,
            "  application {}: runtime {runtime}, iteration p50 {}, mean message {}",
            a.name,
            a.iteration_ns.map_or("-".to_owned(), |q| time(q.p50)),
            a.message_mean_ns.map_or("-".to_owned(), time)
        );
    }
    for p in &s.programs {
        let figures: Vec<String> = p.figures.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let said = if figures.is_empty() {
            String::new()
        } else {
            format!("; it measured: {}", figures.join(", "))
        };
        let _ = writeln!(
            out,
            "  program {} on {}: {} after {:.2} s{said}",
            p.spec.name, p.host, p.end, p.ran_s
        );
    }
    if let Some(q) = &s.program_qps {
        let jain = q.jain.map_or(String::new(), |j| format!(", Jain {j:.3}"));
        let _ = writeln!(
            out,
            "  programs' QPs as the lab counted them: {} receiving, {} received, goodput {}{jain}",
            q.receiving_qps,
            bytes(q.bytes_received as f64),
            rate(q.goodput_bps)
        );
    }
}

/// The summary's lines of pause frames, and of frames past a paused ingress's headroom.
fn pfc_lines(out: &mut String, p: &PfcSummary) {
    let _ = writeln!(
        out,
        "  PFC: {} pause frames; upstream held in XOFF {} in all; paused: hosts {}, switch ports {}",
        p.frames,
        time(p.xoff_ns as f64),
        time(p.host_paused_ns as f64),
        time(p.switch_paused_ns as f64)
    );
    let late = p.overruns - p.overruns_unexplained;
    if late > 0 {
        let _ = writeln!(
            out,
            "  PFC OVERRUN: {late} frames reached a paused ingress past its headroom (kept): the lab behind its \
             schedule, a host stall or worker hiccup (stalls.csv), or a pause released or read late ({} XOFFs), \
             kept their senders from hearing the pause in time",
            p.late_pauses
        );
    }
    if p.overruns_unexplained > 0 {
        let _ = writeln!(
            out,
            "  PFC FAULT: {} frames reached a paused ingress past its headroom with nothing late in the lab \
             to explain it: a fault of intlab's MMU or PFC path, please report it",
            p.overruns_unexplained
        );
    }
    if p.watchdog_trips > 0 {
        let _ = writeln!(
            out,
            "  PFC WATCHDOG: {} pause storms declared, {} frames dropped",
            p.watchdog_trips, p.watchdog_drops
        );
    }
}

/// The summary's lines of how late the lab ran against its schedule.
fn timing_lines(out: &mut String, s: &Summary) {
    let rtt = s.path_rtt_min_ns.max(1) as f64;
    let share = |ns: u64| format!("{} ({:.1} %)", time(ns as f64), ns as f64 / rtt * 100.0);
    let _ = writeln!(
        out,
        "  timing: shortest path RTT {}; a flow's smallest RTT exceeds its path's by {} (p50)",
        time(s.path_rtt_min_ns as f64),
        s.rtt_excess_ns.map_or("-".to_owned(), |q| time(q.p50)),
    );
    let _ = writeln!(
        out,
        "  late against the schedule (share of that RTT): switches release frames {} at p50, {} at p99",
        share(s.release_late_p50_ns),
        share(s.release_late_p99_ns),
    );
    let _ = writeln!(
        out,
        "  senders wake {} at p50, {} at p99",
        share(s.host_wake_late_p50_ns),
        share(s.host_wake_late_p99_ns)
    );
    if s.host_stalls > 0 {
        let _ = writeln!(
            out,
            "  hosts stalled {} times, {:.2} % of their time (the longest {}): stalls.csv says when",
            s.host_stalls,
            s.host_stall_fraction * 100.0,
            time(s.host_stall_max_ns as f64)
        );
    }
    for w in &s.workers {
        let _ = writeln!(
            out,
            "  worker {} ({} hosts, {} ports): busy {:.0} %, timers {} late, releases {}, senders {} (p99)",
            w.worker,
            w.hosts,
            w.ports,
            w.busy * 100.0,
            time(w.timer_late_p99_ns as f64),
            time(w.release_late_p99_ns as f64),
            time(w.host_wake_late_p99_ns as f64),
        );
    }
    if let Some(steal) = s.cpu_steal.filter(|&x| x > 0.0) {
        let _ = writeln!(
            out,
            "  the hypervisor took {:.1} % of the CPU time (steal)",
            steal * 100.0
        );
    }
}

/// The summary's line of losses and marks, and the frames not forwarded for not being the lab's.
fn losses(out: &mut String, s: &Summary) {
    let _ = writeln!(
        out,
        "  drops {}, ECN marks {}, retransmissions {}, timeouts {}, CNPs {}",
        s.drops, s.ecn_marks, s.retransmissions, s.timeouts, s.cnps
    );
    if s.foreign_frames > 0 {
        let _ = writeln!(
            out,
            "  not forwarded, not the lab's: {} frames (the kernel's IPv6 and broadcasts)",
            s.foreign_frames
        );
    }
}
