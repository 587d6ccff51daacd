//! Why a program is refused: where (file, line, column) and what was expected.

use crate::source::{Pos, SourceMap};

/// A refusal of a program, with the place it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct P4Error {
    /// `file:line:column`.
    pub at: String,
    /// The position, for tools.
    pub pos: Pos,
    /// What is wrong and what was expected.
    pub message: String,
}

impl P4Error {
    /// An error at `pos` of a file in `map`.
    pub fn new(map: &SourceMap, pos: Pos, message: impl Into<String>) -> P4Error {
        P4Error {
            at: map.at(pos).to_string(),
            pos,
            message: message.into(),
        }
    }
}

/// Results of the front end.
pub type Result<T> = std::result::Result<T, P4Error>;
