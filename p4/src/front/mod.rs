//! The front end: source files, the preprocessor, tokens, and the parser to the syntax tree.
//! Nothing here knows types or what a program means; that is the lowering's work.

pub mod ast;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod preprocess;
pub mod source;

use std::path::Path;

use diag::P4Errors;
use source::SourceMap;

/// Reads `path` (with its includes, preprocessed with `options`) and parses it.
pub fn parse_file(
    path: &Path,
    options: &preprocess::Options,
    sources: &mut SourceMap,
) -> Result<ast::Program, P4Errors> {
    let tokens = preprocess::preprocess_file(path, options, sources)?;
    parser::parse(&tokens, sources)
}

/// Parses program text; `name` names it in errors.
pub fn parse_text(name: &str, text: &str, sources: &mut SourceMap) -> Result<ast::Program, P4Errors> {
    let tokens = preprocess::preprocess_text(name, None, text.to_owned(), &preprocess::Options::default(), sources)?;
    parser::parse(&tokens, sources)
}
