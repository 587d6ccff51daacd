//! Source files and positions: every token knows the file, line and column it came from, so
//! every refusal can name them.

use std::fmt;
use std::path::PathBuf;

/// Index of a file in a [`SourceMap`].
pub type FileId = u32;

/// A place in a source file: byte offset, 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// The file.
    pub file: FileId,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (in characters).
    pub column: u32,
}

/// One file read into the program: the user's, or a built-in include.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// How errors name it: the path as given, or `<core.p4>` for a built-in.
    pub name: String,
    /// Where it was read from (None for built-ins).
    pub path: Option<PathBuf>,
    /// Its text.
    pub text: String,
}

/// Every file of a program, indexed by [`FileId`].
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// Adds a file and returns its id.
    pub fn add(&mut self, file: SourceFile) -> FileId {
        self.files.push(file);
        (self.files.len() - 1) as FileId
    }

    /// The file with id `id`.
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id as usize]
    }

    /// `pos` as `file:line:column`.
    pub fn at(&self, pos: Pos) -> Located<'_> {
        Located { map: self, pos }
    }
}

/// A position printed as `file:line:column`.
#[derive(Debug, Clone, Copy)]
pub struct Located<'a> {
    map: &'a SourceMap,
    pos: Pos,
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self
            .map
            .files
            .get(self.pos.file as usize)
            .map_or("?", |s| s.name.as_str());
        write!(f, "{name}:{}:{}", self.pos.line, self.pos.column)
    }
}
