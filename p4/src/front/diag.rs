//! Why a program is refused: each problem with its place (file, line, column) and what was
//! expected. The front end and the lowering collect every problem they can before giving up,
//! so a user sees them all at once.

use std::fmt;

use super::source::{Pos, SourceMap};

/// One refusal of a program, with the place it concerns.
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

    /// An error about a whole file (it cannot be read, say).
    pub fn file(name: &str, message: impl Into<String>) -> P4Error {
        P4Error {
            at: name.to_owned(),
            pos: Pos::default(),
            message: message.into(),
        }
    }
}

/// Every refusal of a program, in the order found (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Errors(pub Vec<P4Error>);

impl P4Errors {
    /// The first refusal.
    pub fn first(&self) -> &P4Error {
        &self.0[0]
    }
}

impl fmt::Display for P4Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for P4Errors {}

impl From<P4Error> for P4Errors {
    fn from(e: P4Error) -> P4Errors {
        P4Errors(vec![e])
    }
}

/// A single refusal (the preprocessor and lexer stop at their first).
pub type Result<T> = std::result::Result<T, P4Error>;

/// Problems collected while going on.
#[derive(Debug, Default)]
pub struct Diagnostics {
    errors: Vec<P4Error>,
}

/// Most problems reported in one run: past this the rest are usually echoes of the first.
const MAX_ERRORS: usize = 200;

impl Diagnostics {
    /// Records `e`.
    pub fn push(&mut self, e: P4Error) {
        if self.errors.len() < MAX_ERRORS && !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// Whether anything was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// How many were recorded.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// `Ok(v)` if nothing was recorded, else every problem.
    pub fn finish<T>(self, v: T) -> std::result::Result<T, P4Errors> {
        if self.errors.is_empty() {
            Ok(v)
        } else {
            Err(P4Errors(self.errors))
        }
    }

    /// The problems recorded, sorted by place.
    pub fn into_errors(self) -> P4Errors {
        P4Errors(self.errors)
    }
}
