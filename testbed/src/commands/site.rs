//! `intlab site`: this machine's share of labs spread over several, and the keys that let
//! only the lab's own coordinator drive it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use intlab_keys::{LabKeys, Role};

use super::signals::stop_on_signals_saying;

/// Serves coordinators holding the lab's keys (from `keys` or the default folder) on `listen`
/// until Ctrl-C.
pub(crate) fn serve(listen: std::net::SocketAddr, keys: Option<PathBuf>) -> Result<ExitCode> {
    intlab_lab::prerequisites::check()?;
    let folder = keys.unwrap_or_else(intlab_keys::default_folder);
    let keys = self::keys(&folder, Role::Site)?;
    let server = intlab_lab::distributed::SiteServer::bind(listen, &keys)?;
    let stop = stop_on_signals_saying("tearing down this site's part and ending")?;
    server.serve(stop, std::sync::Arc::new(|line: &str| eprintln!("{line}")))?;
    Ok(ExitCode::SUCCESS)
}

/// `intlab site init`: makes a new lab's keys.
pub(crate) fn init(folder: Option<PathBuf>) -> Result<ExitCode> {
    let folder = folder.unwrap_or_else(intlab_keys::default_folder);
    let files = intlab_keys::init(&folder)?;
    println!("made the keys of a new lab in {}:", folder.display());
    for f in files {
        println!("  {}", f.display());
    }
    println!("copy this folder to every machine of the lab (site servers and the coordinator); keep it private");
    Ok(ExitCode::SUCCESS)
}

/// `role`'s keys from `folder`, or an error saying how to make them.
pub(crate) fn keys(folder: &Path, role: Role) -> Result<LabKeys> {
    LabKeys::load(folder, role).with_context(|| {
        format!(
            "reading the lab's keys in {} (make them once with `intlab site init {}` and copy the folder to every machine)",
            folder.display(),
            folder.display()
        )
    })
}
