//! A results file that could not be written, named.

use std::io;
use std::path::Path;

/// A CSV or JSON writing failure, with the file.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {cause}")]
pub struct WriteError {
    /// The file.
    pub file: String,
    /// What failed.
    pub cause: io::Error,
}

/// Turns an I/O error on file `name` of `dir` into a [`WriteError`] naming it.
pub fn at(dir: &Path, name: &str) -> impl Fn(io::Error) -> WriteError + use<> {
    let file = dir.join(name).display().to_string();
    move |cause| WriteError {
        file: file.clone(),
        cause,
    }
}
