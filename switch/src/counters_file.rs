//! The counters files of a fabric's switches: rewritten from what the shards publish five
//! times a second by a thread of their own (a file write has no place on a worker's loop), and
//! once more when the fabric goes, with the final counters.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::fabric_state::FabricShared;

/// How often the files are rewritten.
const EVERY: Duration = Duration::from_millis(200);

/// The thread that keeps the counters files current. Dropping it writes them a last time.
pub(crate) struct CountersWriter {
    shared: Arc<FabricShared>,
    files: Vec<(usize, PathBuf)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl CountersWriter {
    /// Starts rewriting `files` (switch index, path), if there are any.
    pub(crate) fn start(shared: Arc<FabricShared>, files: Vec<(usize, PathBuf)>) -> std::io::Result<Option<Self>> {
        if files.is_empty() {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (shared, files, stop) = (shared.clone(), files.clone(), stop.clone());
            std::thread::Builder::new().name("counters".into()).spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EVERY);
                    write_all(&shared, &files);
                }
            })?
        };
        Ok(Some(CountersWriter {
            shared,
            files,
            stop,
            thread: Some(thread),
        }))
    }
}

fn write_all(shared: &FabricShared, files: &[(usize, PathBuf)]) {
    for (s, path) in files {
        if let Err(e) = shared.snapshot(*s).write(path) {
            tracing::warn!("counters file {}: {e}", path.display());
        }
    }
}

impl Drop for CountersWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::warn!("the counters files' writer panicked");
        }
        write_all(&self.shared, &self.files);
    }
}
