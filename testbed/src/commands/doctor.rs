//! `intlab doctor`: what this machine can run, and at which dilation.

use std::process::ExitCode;

use anyhow::{Context, Result};
use intlab_lab::scenario::{Overrides, Scenario};

/// `intlab doctor`.
pub(crate) fn run_doctor(file: Option<&std::path::Path>, set: Vec<String>) -> Result<ExitCode> {
    use intlab_lab::doctor;
    let overrides = Overrides {
        set,
        ..Overrides::default()
    };
    let s = Scenario::load_or_builtin(file, &overrides)?;
    eprintln!("intlab: measuring this machine (about 1 s)");
    let m = doctor::measure().context("measuring this machine")?;
    let g = doctor::suggest(&s, &m, s.runtime.workers);
    let us = |ns: f64| ns / 1e3;
    println!(
        "wake-up lateness of a 50 us sleep: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        us(m.wakeup_late_ns.p50),
        us(m.wakeup_late_ns.p99),
        us(m.wakeup_late_ns.max)
    );
    println!(
        "packet rate: {:.0} kpps of 1 KB datagrams through loopback UDP, batched, one thread",
        m.packets_per_s / 1e3
    );
    println!(
        "{}: shortest path RTT {:.1} us; timing needs dilation {:.2} (10 x lateness p99 / RTT); \
         the workload at line rate would ask {:.0} kpps of data, which keeps the workers half busy at dilation {:.2}",
        s.topology.name,
        us(g.rtt_min_ns as f64),
        g.for_timing,
        g.packets_per_s / 1e3,
        g.for_rate
    );
    println!(
        "suggested dilation: {} (the scenario says {}){}",
        g.dilation,
        if s.dilation_auto {
            format!(
                "auto, which starts at {} and goes one step up (to {} at most) while a run warns",
                doctor::auto_start(&g),
                doctor::AUTO_MAX
            )
        } else {
            s.dilation.to_string()
        },
        if !s.dilation_auto && s.dilation < g.dilation {
            "; raise it: `--set dilation=N`"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}
