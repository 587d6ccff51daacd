//! How `intlab run` shows progress: a bar on a terminal, plain lines otherwise (CI logs, pipes).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use intlab_lab::run::Progress;

/// Least time between two plain progress lines.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// A bar or plain lines on standard error.
pub struct Reporter {
    bar: Option<ProgressBar>,
    terminal: bool,
    started: Instant,
    total: u64,
    last_line: Option<(Instant, u64)>,
}

impl Reporter {
    /// A bar when standard error is a terminal.
    pub fn new() -> Reporter {
        Reporter {
            bar: None,
            terminal: std::io::stderr().is_terminal(),
            started: Instant::now(),
            total: 0,
            last_line: None,
        }
    }
}

impl Progress for Reporter {
    fn step(&mut self, what: &str) {
        eprintln!("intlab: {what}");
    }

    fn begin(&mut self, flows: u64) {
        self.started = Instant::now();
        self.total = flows;
        if self.terminal {
            let bar = ProgressBar::new(flows);
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} flows")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            self.bar = Some(bar);
        } else {
            eprintln!("intlab: running {flows} flows");
        }
    }

    fn advance(&mut self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            return;
        }
        let due = self
            .last_line
            .is_none_or(|(at, n)| n != done && at.elapsed() >= LINE_EVERY);
        if due {
            eprintln!(
                "intlab: {done}/{} flows finished after {:.1} s",
                self.total,
                self.started.elapsed().as_secs_f64()
            );
            self.last_line = Some((Instant::now(), done));
        }
    }

    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
}
