//! `intlab site serve`: this machine's share of labs spread over several.

use std::process::ExitCode;

use anyhow::Result;

use super::signals::stop_on_signals_saying;

/// Serves coordinators on `listen` until Ctrl-C.
pub(crate) fn serve(listen: std::net::SocketAddr) -> Result<ExitCode> {
    intlab_lab::prerequisites::check()?;
    let stop = stop_on_signals_saying("tearing down this site's part and ending")?;
    intlab_lab::distributed::serve(listen, &stop, &mut |line| eprintln!("{line}"))?;
    Ok(ExitCode::SUCCESS)
}
