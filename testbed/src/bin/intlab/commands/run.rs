//! `intlab run`: one scenario end to end.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use intlab_testbed::live::serve_where_asked;
use intlab_testbed::results::summary_table;
use intlab_testbed::run::{self as lab_run, RunOptions};
use intlab_testbed::scenario::{Overrides, Scenario};

use super::signals::{exit_code, free_folder, stop_on_signals};
use crate::progress;

/// `intlab run`: exit 0 when every flow completed, 3 when the duration ran out first, 4 when a
/// flow made no progress, 130 when interrupted (results written in every case).
pub(crate) fn run_scenario(
    file: Option<&std::path::Path>,
    overrides: Overrides,
    out: Option<PathBuf>,
    capture: bool,
    force: bool,
    (metrics, web): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
) -> Result<ExitCode> {
    let scenario = Scenario::load_or_builtin(file, &overrides)?;
    if let Some(sites) = &scenario.sites {
        eprintln!(
            "intlab: the scenario's `sites:` spreads it over {} machines, which intlab cannot do yet: it runs here whole",
            sites.names.len()
        );
    }
    let live = serve_where_asked(metrics, web)?
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
    let stop = stop_on_signals()?;
    let out = out.unwrap_or_else(|| {
        free_folder(&format!(
            "results/{}-{}",
            scenario.topology.name,
            scenario.controller.name()
        ))
    });
    let opts = RunOptions {
        out: out.clone(),
        capture,
        tag: "r".into(),
        force,
        live,
    };
    let mut progress = progress::Reporter::new();
    let results = lab_run::run(&scenario, &opts, &stop, &mut progress)?;
    print!("{}", summary_table(&results.summary));
    println!("results: {}", out.display());
    Ok(exit_code(&stop, std::iter::once(results.summary.ending)))
}
