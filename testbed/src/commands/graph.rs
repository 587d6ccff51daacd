//! `intlab graph`: a scenario's topology drawn, on standard output.

use std::process::ExitCode;

use anyhow::Result;
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_lab::topology::graph;

/// What `intlab graph` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Graphviz's DOT.
    Dot,
    /// A Mermaid flowchart.
    Mermaid,
    /// An SVG laid out by intlab (hosts at the bottom, switch tiers above).
    Svg,
}

/// `intlab graph`.
pub(crate) fn graph(file: Option<&std::path::Path>, format: Format, set: Vec<String>) -> Result<ExitCode> {
    let overrides = Overrides {
        set,
        ..Overrides::default()
    };
    let s = Scenario::load_or_builtin(file, &overrides)?;
    let text = match format {
        Format::Dot => graph::dot(&s.topology),
        Format::Mermaid => graph::mermaid(&s.topology),
        Format::Svg => graph::svg(&s.topology),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
