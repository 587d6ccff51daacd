//! `intlab sensitivity`: an application's delay sensitivity, measured.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::signals::{exit_code, free_folder, stop_on_signals};
use crate::progress;

/// `intlab sensitivity`.
pub(crate) fn run_sensitivity(
    file: &std::path::Path,
    app: &str,
    congestion: &str,
    set: &[String],
    out: Option<PathBuf>,
) -> Result<ExitCode> {
    let axis = intlab_experiments::sweep::Axis::parse(congestion)?;
    let stop = stop_on_signals()?;
    let out = out.unwrap_or_else(|| free_folder(&format!("results/sensitivity-{app}")));
    intlab_lab::results::prepare(&out, false)?;
    let mut progress = progress::Reporter::new();
    let (runs, fit) =
        intlab_experiments::sensitivity::estimate(Some(file), app, &axis, set, &out, &stop, &mut progress)?;
    println!("{:>24}{:>20}{:>16}", axis.key, "mean message us", "runtime us");
    for r in &runs {
        let a = r.results.summary.applications.iter().find(|a| a.name == app);
        let cell = |x: Option<f64>| x.map_or("-".to_owned(), |v| format!("{:.1}", v / 1e3));
        println!(
            "{:>24}{:>20}{:>16}",
            r.point.first().map_or("", |p| p.1.as_str()),
            cell(a.and_then(|a| a.message_mean_ns)),
            cell(a.and_then(|a| a.runtime_ns.map(|n| n as f64)))
        );
    }
    match fit {
        Some(f) => {
            println!(
                "{app}: runtime = {:.1} us + {:.2} × mean message time (r = {:.3}); delay sensitivity c_a = {:.2}",
                f.intercept / 1e3,
                f.slope,
                f.r,
                f.c_a
            );
            println!(
                "give it to Netscope: `delay_sensitivity: {:.2}` on the application",
                f.c_a
            );
        }
        None => println!("{app}: fewer than two congestion levels finished with different message times: no fit"),
    }
    Ok(exit_code(&stop, runs.iter().map(|r| r.results.summary.ending)))
}
