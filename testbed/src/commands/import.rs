//! `intlab import p4-topology`: a p4lang tutorial's topology as a scenario.

use std::process::ExitCode;

use anyhow::Result;

use crate::ImportCommand;

/// Runs an import subcommand.
pub(crate) fn import(cmd: ImportCommand) -> Result<ExitCode> {
    let ImportCommand::P4Topology {
        topology,
        program,
        switch_programs,
        out,
        name,
        keep_addresses,
    } = cmd;
    let per_switch = switch_programs.into_iter().collect();
    let done = intlab_lab::topology::tutorial_json::import(
        &topology,
        &program,
        &per_switch,
        &out,
        name.as_deref(),
        keep_addresses,
    )?;
    for w in &done.warnings {
        eprintln!("intlab: not converted: {w}");
    }
    for t in &done.tables {
        println!("wrote {}", t.display());
    }
    println!("wrote {}", done.scenario.display());
    println!("next: intlab up {}", done.scenario.display());
    Ok(ExitCode::SUCCESS)
}
