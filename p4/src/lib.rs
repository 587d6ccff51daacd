//! intlab's P4_16 front end for the v1model architecture: a preprocessor (with `core.p4`,
//! `v1model.p4` and `intlab.p4` built in), a lexer, a parser to [`ast`], and the checks and
//! control-plane listing of [`info`]. What is outside the supported subset is refused with
//! `file:line:column` and its name (docs/p4.md).

#![warn(missing_docs)]

pub mod ast;
pub mod cli_commands;
pub mod error;
pub mod exec;
pub mod info;
pub mod ir;
pub mod lexer;
pub mod lower;
pub mod parser;
pub mod preprocess;
pub mod runtime_json;
pub mod source;

use std::path::Path;

pub use error::{P4Error, Result};
pub use exec::{
    Arrival, CarriedState, Datapath, Decision, Departure, INSTANCE_INGRESS_CLONE, INSTANCE_REPLICATION, IngressResult,
    PacketState,
};
pub use info::ProgramInfo;
pub use source::SourceMap;

/// A program read, parsed and checked.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Its files, for positions.
    pub sources: SourceMap,
    /// The declarations.
    pub program: ast::Program,
    /// Its parser, controls, tables and actions as the control plane names them.
    pub info: ProgramInfo,
    /// The program lowered for execution.
    pub ir: ir::Program,
}

/// Reads, parses and checks the program in `path`.
pub fn load(path: &Path) -> Result<Loaded> {
    let mut sources = SourceMap::default();
    let tokens = preprocess::preprocess_file(path, &mut sources)?;
    finish(tokens, sources)
}

/// The same for program text; `name` names it in errors.
pub fn load_text(name: &str, text: &str) -> Result<Loaded> {
    let mut sources = SourceMap::default();
    let tokens = preprocess::preprocess_text(name, None, text.to_owned(), &mut sources)?;
    finish(tokens, sources)
}

fn finish(tokens: Vec<lexer::Token>, sources: SourceMap) -> Result<Loaded> {
    let program = parser::parse(&tokens, &sources)?;
    let info = info::check(&program, &sources)?;
    let ir = lower::lower(&program, &sources)?;
    Ok(Loaded {
        sources,
        program,
        info,
        ir,
    })
}
