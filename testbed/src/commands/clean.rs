//! `intlab clean`: what runs that were killed left behind.

use std::process::ExitCode;

use anyhow::Result;

/// Removes the namespaces under `prefix` whose process is gone (all of them with `force`) and
/// forgets labs whose process no longer runs.
pub(crate) fn clean(prefix: &str, force: bool) -> Result<ExitCode> {
    anyhow::ensure!(
        prefix.starts_with(intlab_lab::netns::PREFIX),
        "--prefix must start with `{}`: intlab only removes what it created",
        intlab_lab::netns::PREFIX
    );
    let c = intlab_lab::netns::clean(prefix, force);
    let (nic_dirs, nic_failures) = intlab_lab::nic_device::clean(prefix, force);
    for d in &nic_dirs {
        println!(
            "removed {}, the RDMA devices of a lab whose process is gone",
            d.display()
        );
    }
    for e in &nic_failures {
        eprintln!("intlab: {e}");
    }
    for name in intlab_lab::standing_lab::forget_dead()? {
        println!("forgot lab {name}: its process no longer runs");
    }
    let (site_leftovers, site_failures) = intlab_lab::sites::remove_leftovers(force);
    for what in &site_leftovers {
        println!("removed {what}, left by a killed `intlab site serve`");
    }
    for e in &site_failures {
        eprintln!("intlab: {e}");
    }
    for n in &c.removed {
        println!("removed namespace {n}");
    }
    for n in &c.live {
        println!("kept namespace {n}: its intlab process still runs (--force removes it)");
    }
    for e in &c.failed {
        eprintln!("intlab: {e}");
    }
    println!(
        "{} namespaces removed, {} of running labs kept, {} failures",
        c.removed.len(),
        c.live.len(),
        c.failed.len()
    );
    Ok(
        if c.failed.is_empty() && site_failures.is_empty() && nic_failures.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}
