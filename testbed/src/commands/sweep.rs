//! `intlab sweep`: one scenario over a grid of parameters.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use intlab_lab::scenario::{Overrides, Scenario};

use super::signals::{exit_code, free_folder, stop_on_signals};
use crate::progress;

/// `intlab sweep`: exit 0 when every run completed, 3 when one ran out of time, 130 when
/// interrupted.
pub(crate) fn run_sweep(
    file: Option<&std::path::Path>,
    cc: Option<&str>,
    grid: &[String],
    set: &[String],
    out: Option<PathBuf>,
) -> Result<ExitCode> {
    use intlab_experiments::sweep::{self, Axis};
    let mut axes = grid.iter().map(|g| Axis::parse(g)).collect::<Result<Vec<_>, _>>()?;
    let scenario = Scenario::load_or_builtin(file, &Overrides::default())?;
    if axes.is_empty() {
        axes = scenario
            .sweep
            .iter()
            .map(|(key, values)| Axis {
                key: key.clone(),
                values: values.clone(),
            })
            .collect();
    }
    anyhow::ensure!(
        !axes.is_empty(),
        "no grid: give --grid key=v1,v2 or a `sweep:` in the scenario (docs/experiments.md)"
    );
    let stop = stop_on_signals()?;
    let out = out.unwrap_or_else(|| free_folder(&format!("results/sweep-{}", scenario.topology.name)));
    intlab_lab::results::prepare(&out, false)?;
    let mut progress = progress::Reporter::new();
    let runs = sweep::sweep(file, cc, set, &axes, &out, &stop, &mut progress)?;
    print!("{}", sweep::table(&axes, &runs));
    println!("sweep: {}", out.join(sweep::TABLE_CSV).display());
    Ok(exit_code(&stop, runs.iter().map(|r| r.results.summary.ending)))
}
