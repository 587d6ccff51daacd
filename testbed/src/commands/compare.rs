//! `intlab compare`: one scenario under several controllers, side by side.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::signals::{exit_code, free_folder, stop_on_signals};
use crate::progress;

/// `intlab compare`: exit 0 when every run completed every flow, 3 when one ran out of time,
/// 130 when interrupted.
pub(crate) fn run_compare(
    file: Option<&std::path::Path>,
    cc: &[String],
    set: &[String],
    out: Option<PathBuf>,
) -> Result<ExitCode> {
    let stop = stop_on_signals()?;
    let name = match file {
        Some(f) => f
            .file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().into_owned()),
        None => "incast-4to1".to_owned(),
    };
    let out = out.unwrap_or_else(|| free_folder(&format!("results/compare-{name}")));
    intlab_lab::results::prepare(&out, false)?;
    let mut progress = progress::Reporter::new();
    let c = intlab_experiments::compare::compare(file, set, cc, &out, &stop, &mut progress)?;
    print!("{}", intlab_experiments::compare::table(&c));
    println!(
        "comparison: {}",
        out.join(intlab_experiments::compare::REPORT).display()
    );
    Ok(exit_code(&stop, c.entries.iter().map(|e| e.results.summary.ending)))
}
