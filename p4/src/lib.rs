//! intlab's P4_16 compiler and executor, split by stage as compilers are: the front end reads
//! programs ([`front`]: preprocessor, lexer, parser, with every problem reported at once), the
//! lowering checks types and instantiates the package into a slot-addressed program ([`lower`]
//! to [`ir`]), the executor runs it on frames ([`exec`]), and the control plane fills its
//! tables ([`control`]: runtime JSON, `simple_switch_CLI` commands). [`stf`] runs p4c's STF
//! tests and [`sim`] is a switch in memory that runs a program as BMv2's simple_switch does.
//! A stage imports only from the stages before it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod control;
pub mod exec;
pub mod front;
pub mod info;
pub mod ir;
pub mod lower;
pub mod sim;
pub mod stf;

use std::path::Path;

pub use control::{cli_commands, runtime_json};
pub use exec::{
    Arrival, CarriedState, Datapath, Decision, Departure, INSTANCE_INGRESS_CLONE, INSTANCE_REPLICATION, IngressResult,
    PSA_RECIRCULATE_PORT, PacketState,
};
pub use front::diag::{P4Error, P4Errors};
pub use front::preprocess::Options as PreprocessorOptions;
pub use front::source::SourceMap;
pub use info::ProgramInfo;

/// A program read, checked and lowered.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Its files, for positions.
    pub sources: SourceMap,
    /// The declarations as written.
    pub program: front::ast::Program,
    /// Its pipeline, tables and actions as the control plane names them.
    pub info: ProgramInfo,
    /// The program lowered for execution.
    pub ir: ir::Program,
}

/// Reads, checks and lowers the program in `path`; every problem found is in the error.
pub fn load(path: &Path) -> Result<Loaded, P4Errors> {
    load_with(path, &PreprocessorOptions::default())
}

/// [`load`] with p4c's preprocessor options (`-I`, `-D`, `-U`).
pub fn load_with(path: &Path, options: &PreprocessorOptions) -> Result<Loaded, P4Errors> {
    let mut sources = SourceMap::default();
    let program = front::parse_file(path, options, &mut sources)?;
    finish(program, sources)
}

/// The same for program text; `name` names it in errors.
pub fn load_text(name: &str, text: &str) -> Result<Loaded, P4Errors> {
    let mut sources = SourceMap::default();
    let program = front::parse_text(name, text, &mut sources)?;
    finish(program, sources)
}

fn finish(program: front::ast::Program, sources: SourceMap) -> Result<Loaded, P4Errors> {
    let ir = lower::lower(&program, &sources)?;
    let info = ProgramInfo::of(&ir);
    Ok(Loaded {
        sources,
        program,
        info,
        ir,
    })
}
