//! What became of the programs a run started in its hosts (`programs:`): how each ended and
//! the figures it printed itself, as the summary reports them.

use std::path::PathBuf;

use serde::Serialize;

use crate::scenario::ProgramSpec;

/// How a program's life ended, as the run saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "how", content = "value")]
pub enum ProgramEnd {
    /// It exited with this status.
    Exited(i32),
    /// A signal (not the run's) ended it.
    Signalled(i32),
    /// It was still running when the run ended and was stopped.
    StoppedAtEnd,
    /// The run ended before its start time.
    NotStarted,
}

impl std::fmt::Display for ProgramEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProgramEnd::Exited(0) => write!(f, "exited 0"),
            ProgramEnd::Exited(c) => write!(f, "FAILED: exited {c}"),
            ProgramEnd::Signalled(s) => write!(f, "FAILED: killed by signal {s}"),
            ProgramEnd::StoppedAtEnd => write!(f, "still running at the end of the run: stopped"),
            ProgramEnd::NotStarted => write!(f, "not started: the run ended before its start"),
        }
    }
}

/// What became of one program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgramOutcome {
    /// The program as the scenario gives it.
    #[serde(flatten)]
    pub spec: ProgramSpec,
    /// Its host's name.
    pub host: String,
    /// How it ended.
    pub end: ProgramEnd,
    /// How long it ran (s, machine time; 0 when it never started).
    pub ran_s: f64,
    /// Its standard output and error, in the results folder.
    pub output: PathBuf,
    /// The figures it printed itself (perftest's last table, ucx_perftest's `Final:` line:
    /// column, value).
    pub figures: Vec<(String, f64)>,
}

impl ProgramOutcome {
    /// True when it failed: it exited non-zero or a signal killed it, or the run ended
    /// without it while waiting for it. A server the run does not wait for may be stopped.
    pub fn failed(&self) -> bool {
        match self.end {
            ProgramEnd::Exited(c) => c != 0,
            ProgramEnd::Signalled(_) => true,
            ProgramEnd::StoppedAtEnd | ProgramEnd::NotStarted => self.spec.wait,
        }
    }
}
