//! Splits P4_16 source into tokens. Preprocessor directives come out whole, as one token per
//! line, for the preprocessor to act on.

use super::diag::{P4Error, Result};
use super::source::{FileId, Pos, SourceMap};

/// An integer literal, with its width prefix when it has one (`8w255`, `16s-3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntLit {
    /// The value.
    pub value: u128,
    /// `Some((width, signed))` for `Nw`/`Ns` literals.
    pub width: Option<(u16, bool)>,
}

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenKind {
    /// An identifier or keyword.
    Ident(String),
    /// An integer literal.
    Int(IntLit),
    /// A string literal (without quotes; escapes kept as written).
    Str(String),
    /// An operator or separator.
    Punct(&'static str),
    /// A preprocessor line: what follows the `#`, continuation lines joined.
    Directive(String),
}

/// One token and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Where it starts.
    pub pos: Pos,
    /// Byte offsets in its file, so the parser can tell `>>` from `> >`.
    pub start: u32,
    /// Byte offset just past it.
    pub end: u32,
}

impl Token {
    /// The token as written (an integer in decimal, with its width prefix if it had one): what
    /// `#` and `##` make of it and how annotation bodies are given.
    pub fn spelling(&self) -> String {
        match &self.kind {
            TokenKind::Ident(w) => w.clone(),
            TokenKind::Int(v) => match v.width {
                Some((w, signed)) => format!("{w}{}{}", if signed { 's' } else { 'w' }, v.value),
                None => v.value.to_string(),
            },
            TokenKind::Str(x) => format!("\"{x}\""),
            TokenKind::Punct(p) => (*p).to_owned(),
            TokenKind::Directive(d) => format!("#{d}"),
        }
    }
}

/// Operators, longest first so that the first match is the right one.
const PUNCTS: &[&str] = &[
    "|+|=", "|-|=", "&&&", "|+|", "|-|", "...", "<<=", "==", "!=", "<=", ">=", "&&", "||", "<<", "++", "+=", "-=",
    "*=", "/=", "%=", "&=", "|=", "^=", "..", "{", "}", "(", ")", "[", "]", "<", ">", ";", ":", ",", ".", "=", "+",
    "-", "*", "/", "%", "&", "|", "^", "~", "!", "?", "@", "_", "#",
];

/// The operator or separator spelled `text`, if it is one (for the preprocessor's `##`).
pub fn punct_of(text: &str) -> Option<&'static str> {
    PUNCTS.iter().copied().find(|p| *p == text)
}

/// Tokens of file `file` (already in `map`).
pub fn lex(map: &SourceMap, file: FileId) -> Result<Vec<Token>> {
    Lexer::new(map, file, true).run()
}

/// Tokens of a macro body or condition in `file`: a `#` there is an operator (`#x`, `a ## b`),
/// never a directive.
pub fn lex_without_directives(map: &SourceMap, file: FileId) -> Result<Vec<Token>> {
    Lexer::new(map, file, false).run()
}

struct Lexer<'a> {
    map: &'a SourceMap,
    file: FileId,
    /// A `#` first on a line starts a directive.
    directives: bool,
    text: &'a [u8],
    at: usize,
    line: u32,
    line_start: usize,
    out: Vec<Token>,
}

impl<'a> Lexer<'a> {
    fn new(map: &'a SourceMap, file: FileId, directives: bool) -> Lexer<'a> {
        Lexer {
            map,
            file,
            directives,
            text: map.file(file).text.as_bytes(),
            at: 0,
            line: 1,
            line_start: 0,
            out: Vec::new(),
        }
    }

    fn pos(&self, at: usize) -> Pos {
        if at < self.line_start {
            // A token that began lines ago (a comment not closed): count from the start.
            let before = &self.text[..at];
            let line = before.iter().filter(|&&c| c == b'\n').count() as u32 + 1;
            let start = before.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
            let column = String::from_utf8_lossy(&self.text[start..at]).chars().count() as u32 + 1;
            return Pos {
                file: self.file,
                line,
                column,
            };
        }
        let column = String::from_utf8_lossy(&self.text[self.line_start..at]).chars().count() as u32 + 1;
        Pos {
            file: self.file,
            line: self.line,
            column,
        }
    }

    fn error<T>(&self, at: usize, message: impl Into<String>) -> Result<T> {
        Err(P4Error::new(self.map, self.pos(at), message))
    }

    fn peek(&self, k: usize) -> u8 {
        self.text.get(self.at + k).copied().unwrap_or(0)
    }

    fn newline(&mut self) {
        self.line += 1;
        self.line_start = self.at;
    }

    fn push(&mut self, kind: TokenKind, start: usize, pos: Pos) {
        self.out.push(Token {
            kind,
            pos,
            start: start as u32,
            end: self.at as u32,
        });
    }

    fn run(mut self) -> Result<Vec<Token>> {
        // Only whitespace and comments seen since the line began: a `#` starts a directive.
        let mut line_empty = true;
        while self.at < self.text.len() {
            let c = self.peek(0);
            match c {
                b'\n' => {
                    self.at += 1;
                    self.newline();
                    line_empty = true;
                }
                b' ' | b'\t' | b'\r' | 0x0c => self.at += 1,
                b'/' if self.peek(1) == b'/' => {
                    while self.at < self.text.len() && self.peek(0) != b'\n' {
                        self.at += 1;
                    }
                }
                b'/' if self.peek(1) == b'*' => self.block_comment()?,
                b'#' if line_empty && self.directives => self.directive(),
                _ => {
                    line_empty = false;
                    self.token()?;
                }
            }
        }
        Ok(self.out)
    }

    fn block_comment(&mut self) -> Result<()> {
        let start = self.at;
        self.at += 2;
        loop {
            if self.at >= self.text.len() {
                return self.error(start, "comment not closed: `*/` expected before the end of the file");
            }
            if self.peek(0) == b'*' && self.peek(1) == b'/' {
                self.at += 2;
                return Ok(());
            }
            if self.peek(0) == b'\n' {
                self.at += 1;
                self.newline();
            } else {
                self.at += 1;
            }
        }
    }

    /// A directive runs to the end of its line; a backslash before the newline continues it.
    fn directive(&mut self) {
        let start = self.at;
        let pos = self.pos(start);
        self.at += 1;
        let mut text = Vec::new();
        while self.at < self.text.len() {
            match self.peek(0) {
                b'\\' if self.peek(1) == b'\n' => {
                    self.at += 2;
                    self.newline();
                    text.push(b' ');
                }
                b'\n' => break,
                b'/' if self.peek(1) == b'/' => {
                    while self.at < self.text.len() && self.peek(0) != b'\n' {
                        self.at += 1;
                    }
                }
                c => {
                    text.push(c);
                    self.at += 1;
                }
            }
        }
        let text = String::from_utf8_lossy(&text).trim().to_owned();
        self.push(TokenKind::Directive(text), start, pos);
    }

    fn token(&mut self) -> Result<()> {
        let start = self.at;
        let pos = self.pos(start);
        let c = self.peek(0);
        if c.is_ascii_alphabetic() || (c == b'_' && (self.peek(1).is_ascii_alphanumeric() || self.peek(1) == b'_')) {
            while self.peek(0).is_ascii_alphanumeric() || self.peek(0) == b'_' {
                self.at += 1;
            }
            let word = String::from_utf8_lossy(&self.text[start..self.at]).into_owned();
            self.push(TokenKind::Ident(word), start, pos);
            return Ok(());
        }
        if c.is_ascii_digit() {
            let lit = self.number(start)?;
            self.push(TokenKind::Int(lit), start, pos);
            return Ok(());
        }
        if c == b'"' {
            self.at += 1;
            let body_start = self.at;
            loop {
                match self.peek(0) {
                    0 => return self.error(start, "string not closed before the end of the file"),
                    b'\n' => {
                        self.at += 1;
                        self.newline();
                    }
                    b'\\' => self.at += 2,
                    b'"' => break,
                    _ => self.at += 1,
                }
            }
            let body = String::from_utf8_lossy(&self.text[body_start..self.at]).into_owned();
            self.at += 1;
            self.push(TokenKind::Str(body), start, pos);
            return Ok(());
        }
        let rest = &self.text[self.at..];
        for p in PUNCTS {
            if rest.starts_with(p.as_bytes()) {
                self.at += p.len();
                self.push(TokenKind::Punct(p), start, pos);
                return Ok(());
            }
        }
        let ch = String::from_utf8_lossy(&rest[..rest.len().min(4)])
            .chars()
            .next()
            .unwrap_or('?');
        self.error(start, format!("unexpected character `{ch}`"))
    }

    /// `123`, `0x7f`, `0b1010`, `0o17`, `0d99`, with `_` between digits, and the width-prefixed
    /// forms `8w...` and `8s...`.
    fn number(&mut self, start: usize) -> Result<IntLit> {
        let lit = self.literal(start)?;
        if self.peek(0).is_ascii_alphanumeric() || self.peek(0) == b'_' {
            return self.error(
                start,
                format!("`{}` cannot follow an integer literal", self.peek(0) as char),
            );
        }
        Ok(lit)
    }

    fn literal(&mut self, start: usize) -> Result<IntLit> {
        let first = self.digits(10, start)?;
        let (kind, next) = (self.peek(0), self.peek(1));
        if (kind == b'w' || kind == b's') && next.is_ascii_digit() {
            let width = u16::try_from(first)
                .ok()
                .filter(|w| *w > 0)
                .map_or_else(|| self.error(start, "a width prefix must be 1 to 65535 bits"), Ok)?;
            self.at += 1;
            let value = self.unprefixed(start)?;
            if width < 128 && value >> width != 0 && kind == b'w' {
                return self.error(start, format!("{value} does not fit in {width} bits"));
            }
            return Ok(IntLit {
                value,
                width: Some((width, kind == b's')),
            });
        }
        if first == 0 && self.at == start + 1 && matches!(kind, b'x' | b'X' | b'b' | b'B' | b'o' | b'O' | b'd' | b'D') {
            self.at = start;
            let value = self.unprefixed(start)?;
            return Ok(IntLit { value, width: None });
        }
        Ok(IntLit {
            value: first,
            width: None,
        })
    }

    /// A literal with an optional base prefix.
    fn unprefixed(&mut self, start: usize) -> Result<u128> {
        let radix = if self.peek(0) == b'0' {
            match self.peek(1) {
                b'x' | b'X' => 16,
                b'b' | b'B' => 2,
                b'o' | b'O' => 8,
                b'd' | b'D' => 10,
                _ => 0,
            }
        } else {
            0
        };
        if radix == 0 {
            return self.digits(10, start);
        }
        self.at += 2;
        self.digits(radix, start)
    }

    fn digits(&mut self, radix: u32, start: usize) -> Result<u128> {
        let mut value: u128 = 0;
        let mut any = false;
        loop {
            let c = self.peek(0);
            if c == b'_' {
                self.at += 1;
                continue;
            }
            let Some(d) = (c as char).to_digit(radix) else {
                break;
            };
            value = match value
                .checked_mul(u128::from(radix))
                .and_then(|v| v.checked_add(u128::from(d)))
            {
                Some(v) => v,
                None => return self.error(start, "integer literal larger than 128 bits"),
            };
            any = true;
            self.at += 1;
        }
        if !any {
            return self.error(start, "digits expected in the integer literal");
        }
        Ok(value)
    }
}
