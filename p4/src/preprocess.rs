//! The preprocessor P4 programs use: `#include`, object-like `#define` and `#undef`,
//! `#ifdef`/`#ifndef`/`#if 0|1`/`#else`/`#endif`. `core.p4`, `v1model.p4` and `intlab.p4` are
//! built in and found by their include names; other includes are read relative to the file that
//! names them. Function-like macros and `#if` expressions are refused by name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{P4Error, Result};
use crate::lexer::{Token, TokenKind, lex};
use crate::source::{SourceFile, SourceMap};

/// Built-in include files: (include name, text).
const BUILT_IN: &[(&str, &str)] = &[
    ("core.p4", include_str!("../include/core.p4")),
    ("v1model.p4", include_str!("../include/v1model.p4")),
    ("intlab.p4", include_str!("../include/intlab.p4")),
];

/// Deepest nesting of includes (a cycle would otherwise never end).
const MAX_DEPTH: usize = 32;

/// Reads `path` and everything it includes, and returns the tokens of the program with every
/// directive carried out.
pub fn preprocess_file(path: &Path, map: &mut SourceMap) -> Result<Vec<Token>> {
    let text = std::fs::read_to_string(path).map_err(|e| P4Error {
        at: path.display().to_string(),
        pos: Default::default(),
        message: format!("cannot read it: {e}"),
    })?;
    preprocess_text(&path.display().to_string(), Some(path.to_owned()), text, map)
}

/// The same for a program given as text; `name` names it in errors and `path` (if any) is where
/// its relative includes are looked up.
pub fn preprocess_text(name: &str, path: Option<PathBuf>, text: String, map: &mut SourceMap) -> Result<Vec<Token>> {
    let mut p = Preprocessor {
        map,
        defines: HashMap::new(),
        out: Vec::new(),
        included_once: Vec::new(),
    };
    let id = p.map.add(SourceFile {
        name: name.to_owned(),
        path,
        text,
    });
    p.file(id, 0)?;
    Ok(p.out)
}

struct Preprocessor<'a> {
    map: &'a mut SourceMap,
    defines: HashMap<String, Vec<Token>>,
    out: Vec<Token>,
    /// Built-ins already read: they are guarded as the originals are.
    included_once: Vec<&'static str>,
}

/// One open `#if`-family block.
struct Conditional {
    /// This branch is taken.
    active: bool,
    /// Some branch of this block was taken (an `#else` is then skipped).
    taken: bool,
    /// The enclosing code is taken.
    parent: bool,
    else_seen: bool,
}

impl Conditional {
    /// A block opened inside code that is taken (`parent`) or not, with condition `cond`.
    fn open(parent: bool, cond: bool) -> Conditional {
        Conditional {
            active: parent && cond,
            taken: cond,
            parent,
            else_seen: false,
        }
    }
}

impl Preprocessor<'_> {
    fn file(&mut self, id: u32, depth: usize) -> Result<()> {
        let tokens = lex(self.map, id)?;
        let mut stack: Vec<Conditional> = Vec::new();
        let active = |stack: &[Conditional]| stack.last().is_none_or(|c| c.active);
        for t in tokens {
            let TokenKind::Directive(text) = &t.kind else {
                if active(&stack) {
                    self.expand(t, 0)?;
                }
                continue;
            };
            let (word, rest) = split_word(text);
            let err = |m: String| Err(P4Error::new(self.map, t.pos, m));
            match word {
                "ifdef" | "ifndef" => {
                    let (name, _) = split_word(rest);
                    if name.is_empty() {
                        return err(format!("#{word} needs a macro name"));
                    }
                    let defined = self.defines.contains_key(name);
                    let cond = if word == "ifdef" { defined } else { !defined };
                    stack.push(Conditional::open(active(&stack), cond));
                }
                "if" => {
                    let cond = match rest.trim() {
                        "0" => false,
                        "1" => true,
                        other => {
                            return err(format!(
                                "#if with an expression (`{other}`) is not supported: use #ifdef, #ifndef, #if 0 or #if 1"
                            ));
                        }
                    };
                    stack.push(Conditional::open(active(&stack), cond));
                }
                "else" => match stack.last_mut() {
                    Some(c) if !c.else_seen => {
                        c.else_seen = true;
                        c.active = c.parent && !c.taken;
                        c.taken = true;
                    }
                    Some(_) => return err("a second #else in one #if block".into()),
                    None => return err("#else without #if".into()),
                },
                "elif" => return err("#elif is not supported: nest #ifdef blocks instead".into()),
                "endif" => {
                    if stack.pop().is_none() {
                        return err("#endif without #if".into());
                    }
                }
                _ if !active(&stack) => {}
                "define" => {
                    let (name, body) = split_word(rest);
                    if name.is_empty() || !is_ident(name) {
                        return err(format!("#define needs a macro name, found `{name}`"));
                    }
                    if rest.trim_start()[name.len()..].starts_with('(') {
                        return err(format!("function-like macro `{name}(...)` is not supported"));
                    }
                    let tokens = self.lex_fragment(body, &t)?;
                    self.defines.insert(name.to_owned(), tokens);
                }
                "undef" => {
                    let (name, _) = split_word(rest);
                    self.defines.remove(name);
                }
                "include" => self.include(rest.trim(), &t, id, depth)?,
                "error" => return err(format!("#error {rest}")),
                "pragma" | "line" => {}
                other => return err(format!("unknown directive `#{other}`")),
            }
        }
        if !stack.is_empty() {
            let name = &self.map.file(id).name;
            return Err(P4Error {
                at: name.clone(),
                pos: Default::default(),
                message: "#if block not closed: #endif expected before the end of the file".into(),
            });
        }
        Ok(())
    }

    /// Tokens of a macro body, placed at the directive.
    fn lex_fragment(&mut self, body: &str, at: &Token) -> Result<Vec<Token>> {
        let id = self.map.add(SourceFile {
            name: self.map.file(at.pos.file).name.clone(),
            path: None,
            text: body.to_owned(),
        });
        let mut tokens = lex(self.map, id)?;
        for t in &mut tokens {
            // Errors in an expansion point at the #define line.
            t.pos = at.pos;
        }
        Ok(tokens)
    }

    fn expand(&mut self, t: Token, depth: usize) -> Result<()> {
        if let TokenKind::Ident(name) = &t.kind
            && let Some(body) = self.defines.get(name)
        {
            if depth > 64 {
                return Err(P4Error::new(
                    self.map,
                    t.pos,
                    format!("macro `{name}` expands without end"),
                ));
            }
            for mut b in body.clone() {
                b.pos = t.pos;
                b.start = t.start;
                b.end = t.end;
                self.expand(b, depth + 1)?;
            }
            return Ok(());
        }
        self.out.push(t);
        Ok(())
    }

    fn include(&mut self, what: &str, t: &Token, from: u32, depth: usize) -> Result<()> {
        let err = |m: String| Err(P4Error::new(self.map, t.pos, m));
        let (name, system) = if let Some(n) = what.strip_prefix('<').and_then(|s| s.strip_suffix('>')) {
            (n, true)
        } else if let Some(n) = what.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            (n, false)
        } else {
            return err(format!("#include needs <file> or \"file\", found `{what}`"));
        };
        if depth >= MAX_DEPTH {
            return err(format!(
                "includes nested more than {MAX_DEPTH} deep (a cycle?) at `{name}`"
            ));
        }
        let base = Path::new(name).file_name().and_then(|n| n.to_str()).unwrap_or(name);
        if let Some((builtin, text)) = BUILT_IN.iter().find(|(n, _)| *n == base) {
            if self.included_once.contains(builtin) {
                return Ok(());
            }
            self.included_once.push(builtin);
            let id = self.map.add(SourceFile {
                name: format!("<{builtin}>"),
                path: None,
                text: (*text).to_owned(),
            });
            return self.file(id, depth + 1);
        }
        if system {
            return err(format!(
                "no built-in include `{name}`: intlab has core.p4, v1model.p4 and intlab.p4 (the v1model architecture only)"
            ));
        }
        let dir = self
            .map
            .file(from)
            .path
            .as_ref()
            .and_then(|p| p.parent().map(Path::to_owned))
            .unwrap_or_default();
        let path = dir.join(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => return err(format!("cannot read include `{}`: {e}", path.display())),
        };
        let id = self.map.add(SourceFile {
            name: path.display().to_string(),
            path: Some(path),
            text,
        });
        self.file(id, depth + 1)
    }
}

fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

fn is_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
