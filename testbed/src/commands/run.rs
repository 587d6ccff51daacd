//! `intlab run`: one scenario end to end.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use intlab_lab::distributed::{SiteAddresses, run_on_sites};
use intlab_lab::live::serve_where_asked;
use intlab_lab::results::summary_table;
use intlab_lab::run::{self as lab_run, RunOptions};
use intlab_lab::scenario::{Overrides, Scenario};

use super::signals::{exit_code, free_folder, stop_on_signals};
use crate::progress;

/// Where a run writes and what it shows, as the command line says.
pub(crate) struct Where {
    /// The results folder, if named.
    pub(crate) out: Option<PathBuf>,
    /// Capture every port.
    pub(crate) capture: bool,
    /// Replace an earlier run's files.
    pub(crate) force: bool,
    /// `--metrics` and `--web`.
    pub(crate) live: (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    /// `--sites`: the sites file of a lab spread over machines.
    pub(crate) sites: Option<PathBuf>,
    /// `--keys`: the lab's keys folder for `--sites`.
    pub(crate) keys: Option<PathBuf>,
}

/// `intlab run`: exit 0 when every flow completed, 3 when the duration ran out first, 4 when a
/// flow made no progress, 5 when a program the run waited for failed, 130 when interrupted
/// (results written in every case).
pub(crate) fn run_scenario(file: Option<&std::path::Path>, overrides: Overrides, w: Where) -> Result<ExitCode> {
    let scenario = Scenario::load_or_builtin(file, &overrides)?;
    let addresses = match (&w.sites, &scenario.sites) {
        (Some(path), _) => Some(SiteAddresses::load(path)?),
        (None, Some(sites)) => {
            eprintln!(
                "intlab: the scenario's `sites:` spreads it over {} machines: without --sites SITES.yaml (where each runs) it runs here whole",
                sites.names.len()
            );
            None
        }
        (None, None) => None,
    };
    anyhow::ensure!(
        addresses.is_none() || (w.live.0.is_none() && w.live.1.is_none()),
        "--metrics and --web show a lab on one machine: not with --sites"
    );
    let live = serve_where_asked(w.live.0, w.live.1)?
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
    let stop = stop_on_signals()?;
    let out = w.out.unwrap_or_else(|| {
        free_folder(&format!(
            "results/{}-{}",
            scenario.topology.name,
            scenario.controller.name()
        ))
    });
    let opts = RunOptions {
        out: out.clone(),
        capture: w.capture,
        tag: "r".into(),
        force: w.force,
        live,
    };
    let mut progress = progress::Reporter::new();
    let results = match addresses {
        Some(a) => {
            let folder = w.keys.unwrap_or_else(intlab_keys::default_folder);
            let keys = super::site::keys(&folder, intlab_keys::Role::Coordinator)?;
            run_on_sites(&scenario, &a, &keys, &opts, &stop, &mut progress)?
        }
        None => lab_run::run(&scenario, &opts, &stop, &mut progress)?,
    };
    print!("{}", summary_table(&results.summary));
    println!("results: {}", out.display());
    Ok(exit_code(&stop, std::iter::once(results.summary.ending)))
}
