//! The switch's configuration: the YAML users write for `intlab switch` ([`file`]), the YAML
//! of one key each that scenarios share with it ([`yaml`]), and the resolved [`SwitchSpec`] the
//! runtime is built from ([`spec`]; the lab builds a `SwitchSpec` directly).

mod file;
mod netem;
mod p4_ports;
mod spec;
mod values;
mod yaml;

use std::fmt;
use std::path::PathBuf;

pub use file::standalone_workers;
pub use netem::{NetemError, NetemKeys, NetemValue};
pub use p4_ports::{check_cpu_port, default_p4_port};
pub use spec::*;
pub use values::{parse_mac, parse_prefix, relative_to};
pub use yaml::*;

/// A configuration that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column, 0 when unknown.
    pub column: usize,
    /// Path of the offending field, e.g. `ports[1].name`.
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}
