//! What the long-running commands share: stopping on signals, their exit codes, results folders.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use intlab_lab::results::Ending;

/// A flag SIGINT and SIGTERM raise: the run stops, tears its lab down and writes its results.
/// A second signal ends the process at once, saying that `intlab clean` removes what is left.
pub(crate) fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    stop_on_signals_saying("tearing the lab down and writing the results")
}

/// [`stop_on_signals`], saying `what` the process does on the first signal.
pub(crate) fn stop_on_signals_saying(what: &'static str) -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("installing the signal handler")?;
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if flag.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "intlab: stopped at once; `sudo intlab clean` removes the namespaces this run leaves behind"
                    );
                    std::process::exit(130);
                }
                eprintln!("intlab: stopping: {what} (again to quit at once)");
            }
        })
        .context("starting the signal thread")?;
    Ok(stop)
}

/// 130 when interrupted, else 4 when a flow made no progress, else 3 when a run ran out of
/// time, else 0.
pub(crate) fn exit_code(stop: &AtomicBool, endings: impl Iterator<Item = Ending>) -> ExitCode {
    let endings: Vec<Ending> = endings.collect();
    if stop.load(Ordering::Relaxed) || endings.contains(&Ending::Interrupted) {
        ExitCode::from(130)
    } else if endings.contains(&Ending::NoProgress) {
        ExitCode::from(4)
    } else if endings.contains(&Ending::ProgramFailed) {
        ExitCode::from(5)
    } else if endings.contains(&Ending::TimedOut) {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// `base`, or the first of `base-2`, `base-3`, ... that does not exist yet.
pub(crate) fn free_folder(base: &str) -> PathBuf {
    let base = base.to_owned();
    (1..)
        .map(|k| PathBuf::from(if k == 1 { base.clone() } else { format!("{base}-{k}") }))
        .find(|p| !p.exists())
        .unwrap_or_else(|| PathBuf::from(base))
}
