//! The C preprocessor as p4c runs it: `#include`, object-like and function-like `#define`
//! (variadic, `#` and `##`), `#undef`, `#if` with integer expressions and `defined`, `#ifdef`,
//! `#ifndef`, `#elif`, `#else`, `#endif`, `#error`, `#line` (and cpp's line markers, `# 12
//! "file"`), `__FILE__` and `__LINE__`, and p4c's `-I`,
//! `-D` and `-U` ([`Options`]). An include in quotes is looked for beside the file that names
//! it, then in the `-I` folders in order, then among the built-ins (`core.p4`, `v1model.p4`,
//! `psa.p4`, `intlab.p4`); one in angle brackets in the `-I` folders, then the built-ins.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::diag::{P4Error, Result};
use super::lexer::{IntLit, Token, TokenKind, lex, lex_without_directives};
use super::source::{SourceFile, SourceMap};

/// Built-in include files: (include name, text).
const BUILT_IN: &[(&str, &str)] = &[
    ("core.p4", include_str!("../../include/core.p4")),
    ("v1model.p4", include_str!("../../include/v1model.p4")),
    ("intlab.p4", include_str!("../../include/intlab.p4")),
    ("psa.p4", include_str!("../../include/psa.p4")),
];

/// Deepest nesting of includes (a cycle would otherwise never end).
const MAX_DEPTH: usize = 32;

/// Most tokens one macro use may expand to: a guard against macros that grow without end.
const MAX_EXPANSION: usize = 1 << 20;

/// What p4c's command line gives its preprocessor: `-I DIR`, `-D NAME[=VALUE]`, `-U NAME`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Include folders (`-I`), searched in order.
    pub include_dirs: Vec<PathBuf>,
    /// Macros defined before the program (`-D`): name and body (`1` when none was given).
    pub defines: Vec<(String, String)>,
    /// Macros undefined after the `-D`s (`-U`).
    pub undefines: Vec<String>,
}

impl Options {
    /// The options of `-I`, `-D` and `-U` as written on p4c's command line (`-D NAME` or
    /// `-D NAME=VALUE`).
    pub fn new(include_dirs: Vec<PathBuf>, defines: &[String], undefines: Vec<String>) -> Options {
        let mut o = Options {
            include_dirs,
            defines: Vec::new(),
            undefines,
        };
        for d in defines {
            o.define(d);
        }
        o
    }

    /// Adds `-D` as written: `NAME` (defined as 1) or `NAME=VALUE`.
    pub fn define(&mut self, written: &str) {
        let (name, value) = written.split_once('=').unwrap_or((written, "1"));
        self.defines.push((name.to_owned(), value.to_owned()));
    }
}

/// Reads `path` and everything it includes, and returns the tokens of the program with every
/// directive carried out.
pub fn preprocess_file(path: &Path, options: &Options, map: &mut SourceMap) -> Result<Vec<Token>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| P4Error::file(&path.display().to_string(), format!("cannot read it: {e}")))?;
    preprocess_text(&path.display().to_string(), Some(path.to_owned()), text, options, map)
}

/// The same for a program given as text; `name` names it in errors and `path` (if any) is where
/// its relative includes are looked up.
pub fn preprocess_text(
    name: &str,
    path: Option<PathBuf>,
    text: String,
    options: &Options,
    map: &mut SourceMap,
) -> Result<Vec<Token>> {
    let mut p = Preprocessor {
        map,
        defines: HashMap::new(),
        include_dirs: options.include_dirs.clone(),
        out: Vec::new(),
    };
    // The command line's macros, as if defined on lines before the program's first.
    let command_line = p.map.add(SourceFile {
        name: "<command line>".into(),
        path: None,
        text: String::new(),
    });
    let at = Token {
        kind: TokenKind::Directive(String::new()),
        pos: super::source::Pos {
            file: command_line,
            line: 1,
            column: 1,
        },
        start: 0,
        end: 0,
    };
    for (macro_name, value) in &options.defines {
        p.define(&format!("{macro_name} {value}"), &at)?;
    }
    for macro_name in &options.undefines {
        p.defines.remove(macro_name);
    }
    let id = p.map.add(SourceFile {
        name: name.to_owned(),
        path,
        text,
    });
    p.file(id, 0)?;
    Ok(p.out)
}

/// A macro: its parameters (None for an object-like macro) and its body.
#[derive(Debug, Clone)]
struct Macro {
    params: Option<Vec<String>>,
    variadic: bool,
    body: Vec<Token>,
}

struct Preprocessor<'a> {
    map: &'a mut SourceMap,
    defines: HashMap<String, Macro>,
    /// `-I` folders, in order.
    include_dirs: Vec<PathBuf>,
    out: Vec<Token>,
}

/// One open `#if`-family block.
struct Conditional {
    /// This branch is taken.
    active: bool,
    /// Some branch of this block was taken (a later `#elif` or `#else` is then skipped).
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

/// Where `#line` put the lines after it: the line that follows the directive (physical line
/// `after`) is line `line` of the file the map knows as `file`.
#[derive(Debug, Clone, Copy)]
struct Presumed {
    after: u32,
    line: u32,
    file: u32,
}

impl Presumed {
    /// `pos`, a physical position after the directive, as the directive presumes it.
    fn relocate(&self, pos: &mut super::source::Pos) {
        pos.line = self.line.saturating_add(pos.line.saturating_sub(self.after));
        pos.file = self.file;
    }
}

/// A token with the macros that may no longer expand in it (C's "hide set").
#[derive(Clone)]
struct Painted {
    token: Token,
    hidden: Rc<HashSet<String>>,
}

impl Preprocessor<'_> {
    fn file(&mut self, id: u32, depth: usize) -> Result<()> {
        let tokens = lex(self.map, id)?;
        let mut stack: Vec<Conditional> = Vec::new();
        let active = |stack: &[Conditional]| stack.last().is_none_or(|c| c.active);
        // Tokens waiting for expansion: a function-like macro's arguments may span lines.
        let mut pending: Vec<Token> = Vec::new();
        // Set by `#line`: errors, `__LINE__` and `__FILE__` then speak of the presumed place.
        let mut presumed: Option<Presumed> = None;
        for mut t in tokens {
            let physical_line = t.pos.line;
            if let Some(p) = &presumed {
                p.relocate(&mut t.pos);
            }
            let TokenKind::Directive(text) = &t.kind else {
                if active(&stack) {
                    pending.push(t);
                }
                continue;
            };
            let (word, rest) = split_word(text);
            let is_conditional = matches!(word, "ifdef" | "ifndef" | "if" | "elif" | "else" | "endif");
            if !is_conditional && !active(&stack) {
                continue;
            }
            if !is_conditional || word == "if" || word == "elif" {
                // Definitions change only here: what came before expands with the old ones.
                self.flush(&mut pending)?;
            }
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
                    let parent = active(&stack);
                    let cond = parent && self.condition(rest, &t)?;
                    stack.push(Conditional::open(parent, cond));
                }
                "elif" => {
                    let Some(c) = stack.last() else {
                        return err("#elif without #if".into());
                    };
                    if c.else_seen {
                        return err("#elif after #else".into());
                    }
                    let (parent, taken) = (c.parent, c.taken);
                    let cond = parent && !taken && self.condition(rest, &t)?;
                    let c = stack.last_mut().expect("checked above");
                    c.active = cond;
                    c.taken = taken || cond;
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
                "endif" => {
                    if stack.pop().is_none() {
                        return err("#endif without #if".into());
                    }
                }
                "define" => self.define(rest, &t)?,
                "undef" => {
                    let (name, _) = split_word(rest);
                    self.defines.remove(name);
                }
                "include" => self.include(rest.trim(), &t, id, depth)?,
                "error" => return err(format!("#error {}", rest.trim())),
                "warning" => tracing::warn!("{}: #warning {}", self.map.at(t.pos), rest.trim()),
                "line" => presumed = Some(self.line_directive(rest, &t, physical_line, presumed, id)?),
                // A line marker as cpp writes them into its output: `# 12 "file" 2`.
                marker if marker.bytes().all(|b| b.is_ascii_digit()) && !marker.is_empty() => {
                    presumed = Some(self.line_directive(text, &t, physical_line, presumed, id)?);
                }
                "pragma" | "" => {}
                other => return err(format!("unknown directive `#{other}`")),
            }
        }
        self.flush(&mut pending)?;
        if !stack.is_empty() {
            let name = &self.map.file(id).name;
            return Err(P4Error::file(
                name,
                "#if block not closed: #endif expected before the end of the file",
            ));
        }
        Ok(())
    }

    /// `#line N` or `#line N "name"` (`spec`, after the word) at physical line `physical` of
    /// file `id`: from the next line on, lines count from N, in a file of that name if one is
    /// given (else the one `current` presumes, else `id`). Flags after the name (cpp's line
    /// markers carry some) are skipped.
    fn line_directive(
        &mut self,
        spec: &str,
        at: &Token,
        physical: u32,
        current: Option<Presumed>,
        id: u32,
    ) -> Result<Presumed> {
        let err = |m: String| Err(P4Error::new(self.map, at.pos, m));
        let (number, rest) = split_word(spec);
        let line = match number.parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => return err(format!("#line needs a line number from 1, found `{}`", spec.trim())),
        };
        let rest = rest.trim();
        let file = if rest.is_empty() {
            current.map_or(id, |p| p.file)
        } else {
            let Some(name) = quoted(rest) else {
                return err(format!("#line {line}: a file name in quotes expected, found `{rest}`"));
            };
            let path = self.map.file(id).path.clone();
            self.map.add(SourceFile {
                name,
                path,
                text: String::new(),
            })
        };
        Ok(Presumed {
            after: physical + 1,
            line,
            file,
        })
    }

    /// Expands the waiting tokens into the output.
    fn flush(&mut self, pending: &mut Vec<Token>) -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let tokens = std::mem::take(pending);
        let expanded = self.expand(tokens)?;
        self.out.extend(expanded);
        Ok(())
    }

    /// `#define NAME body` or `#define NAME(a, b) body`.
    fn define(&mut self, rest: &str, at: &Token) -> Result<()> {
        let err = |m: String| Err(P4Error::new(self.map, at.pos, m));
        let (name, after) = split_word(rest);
        if name.is_empty() || !is_ident(name) {
            return err(format!("#define needs a macro name, found `{}`", rest.trim()));
        }
        let after_name = &rest.trim_start()[name.len()..];
        let (params, variadic, body) = if let Some(list) = after_name.strip_prefix('(') {
            let Some(close) = list.find(')') else {
                return err(format!("macro `{name}`: `)` expected after its parameters"));
            };
            let mut params = Vec::new();
            let mut variadic = false;
            for p in list[..close].split(',').map(str::trim).filter(|p| !p.is_empty()) {
                if p == "..." {
                    variadic = true;
                } else if is_ident(p) {
                    params.push(p.to_owned());
                } else {
                    return err(format!("macro `{name}`: `{p}` is not a parameter name"));
                }
            }
            (Some(params), variadic, &list[close + 1..])
        } else {
            (None, false, after)
        };
        let body = self.lex_fragment(body, at)?;
        self.defines.insert(name.to_owned(), Macro { params, variadic, body });
        Ok(())
    }

    /// Tokens of a macro body or an `#if` condition, placed at the directive.
    fn lex_fragment(&mut self, body: &str, at: &Token) -> Result<Vec<Token>> {
        let id = self.map.add(SourceFile {
            name: self.map.file(at.pos.file).name.clone(),
            path: None,
            text: body.to_owned(),
        });
        let mut tokens = lex_without_directives(self.map, id)?;
        for t in &mut tokens {
            // Errors in an expansion point at the #define line.
            t.pos = at.pos;
        }
        Ok(tokens)
    }

    /// Expands every macro in `tokens`, rescanning what each expands to.
    fn expand(&self, tokens: Vec<Token>) -> Result<Vec<Token>> {
        let none = Rc::new(HashSet::new());
        // A stack, next token last: an expansion is pushed back to be scanned again.
        let mut input: Vec<Painted> = tokens
            .into_iter()
            .rev()
            .map(|token| Painted {
                token,
                hidden: none.clone(),
            })
            .collect();
        let mut out = Vec::new();
        let mut produced = 0usize;
        while let Some(p) = input.pop() {
            let TokenKind::Ident(name) = &p.token.kind else {
                out.push(p.token);
                continue;
            };
            let Some(m) = self.defines.get(name.as_str()) else {
                out.push(self.predefined(p.token));
                continue;
            };
            if p.hidden.contains(name.as_str()) {
                out.push(p.token);
                continue;
            }
            let mut hidden = (*p.hidden).clone();
            hidden.insert(name.clone());
            let hidden = Rc::new(hidden);
            let body: Vec<Token> = match &m.params {
                None => self.replace(&m.body, &[], &[], &[], false, &p.token)?,
                Some(params) => {
                    // A function-like macro's name without `(` is left alone, as in C.
                    if !matches!(input.last(), Some(n) if n.token.kind == TokenKind::Punct("(")) {
                        out.push(p.token);
                        continue;
                    }
                    input.pop();
                    let args = self.arguments(&mut input, name, &p.token)?;
                    self.substitute(m, params, args, name, &p.token)?
                }
            };
            produced += body.len();
            if produced > MAX_EXPANSION {
                return Err(P4Error::new(
                    self.map,
                    p.token.pos,
                    format!("macro `{name}` expands without end"),
                ));
            }
            for mut b in body.into_iter().rev() {
                b.pos = p.token.pos;
                b.start = p.token.start;
                b.end = p.token.end;
                input.push(Painted {
                    token: b,
                    hidden: hidden.clone(),
                });
            }
        }
        Ok(out)
    }

    /// The arguments of a function-like macro use, its `(` already taken: split at commas
    /// outside parentheses.
    fn arguments(&self, input: &mut Vec<Painted>, name: &str, at: &Token) -> Result<Vec<Vec<Token>>> {
        let mut args = vec![Vec::new()];
        let mut depth = 0usize;
        loop {
            let Some(p) = input.pop() else {
                return Err(P4Error::new(
                    self.map,
                    at.pos,
                    format!("macro `{name}`: `)` expected after its arguments"),
                ));
            };
            match p.token.kind {
                TokenKind::Punct("(") => depth += 1,
                TokenKind::Punct(")") if depth == 0 => break,
                TokenKind::Punct(")") => depth -= 1,
                TokenKind::Punct(",") if depth == 0 => {
                    args.push(Vec::new());
                    continue;
                }
                _ => {}
            }
            args.last_mut().expect("one at least").push(p.token);
        }
        if args.len() == 1 && args[0].is_empty() {
            args.clear();
        }
        Ok(args)
    }

    /// A function-like macro's body with its parameters replaced by their (expanded) arguments.
    fn substitute(
        &self,
        m: &Macro,
        params: &[String],
        mut args: Vec<Vec<Token>>,
        name: &str,
        at: &Token,
    ) -> Result<Vec<Token>> {
        if args.len() < params.len() && params.len() == 1 && args.is_empty() {
            args.push(Vec::new());
        }
        let fits = if m.variadic {
            args.len() >= params.len()
        } else {
            args.len() == params.len()
        };
        if !fits {
            return Err(P4Error::new(
                self.map,
                at.pos,
                format!(
                    "macro `{name}` takes {} argument(s), {} given",
                    params.len(),
                    args.len()
                ),
            ));
        }
        let rest: Vec<Token> = if m.variadic && args.len() > params.len() {
            let mut joined = Vec::new();
            for (i, a) in args.drain(params.len()..).enumerate() {
                if i > 0 {
                    joined.push(Token {
                        kind: TokenKind::Punct(","),
                        pos: at.pos,
                        start: at.start,
                        end: at.end,
                    });
                }
                joined.extend(a);
            }
            joined
        } else {
            Vec::new()
        };
        // `__VA_ARGS__` is one more parameter.
        let mut names: Vec<&str> = params.iter().map(String::as_str).collect();
        if m.variadic {
            names.push("__VA_ARGS__");
            args.push(rest);
        }
        let mut expanded = Vec::with_capacity(args.len());
        for a in &args {
            expanded.push(self.expand(a.clone())?);
        }
        self.replace(&m.body, &names, &args, &expanded, true, at)
    }

    /// A macro body with its parameters `names` replaced as C does: by the argument as written
    /// after `#` (a string of it) and beside `##` (pasted to its neighbour), else by the argument
    /// expanded. `function_like` says whether `#` stringizes.
    fn replace(
        &self,
        body: &[Token],
        names: &[&str],
        raw: &[Vec<Token>],
        expanded: &[Vec<Token>],
        function_like: bool,
        at: &Token,
    ) -> Result<Vec<Token>> {
        // `##` is two `#` with nothing between them.
        let paste_at = |i: usize| {
            matches!((body.get(i), body.get(i + 1)), (Some(a), Some(b))
                if a.kind == TokenKind::Punct("#") && b.kind == TokenKind::Punct("#") && a.end == b.start)
        };
        let param = |t: &Token| match &t.kind {
            TokenKind::Ident(w) => names.iter().position(|n| n == w),
            _ => None,
        };
        let mut out: Vec<Token> = Vec::new();
        // The next tokens are pasted onto the last one out.
        let mut pasting = false;
        let mut i = 0;
        while i < body.len() {
            let t = &body[i];
            if paste_at(i) {
                if i == 0 {
                    return Err(P4Error::new(self.map, at.pos, "`##` at the start of a macro body"));
                }
                pasting = true;
                i += 2;
                continue;
            }
            let stringized = function_like && t.kind == TokenKind::Punct("#");
            let piece: Vec<Token> = match (stringized, body.get(i + 1).and_then(param)) {
                (true, Some(k)) => {
                    i += 1;
                    vec![Token {
                        kind: TokenKind::Str(spell_all(&raw[k])),
                        ..t.clone()
                    }]
                }
                (true, None) => {
                    return Err(P4Error::new(
                        self.map,
                        at.pos,
                        "`#` in a macro body must come before a parameter",
                    ));
                }
                _ => match param(t) {
                    Some(k) if pasting || paste_at(i + 1) => raw[k].clone(),
                    Some(k) => expanded[k].clone(),
                    None => vec![t.clone()],
                },
            };
            i += 1;
            let mut piece = piece.into_iter();
            if std::mem::take(&mut pasting) {
                match (out.pop(), piece.next()) {
                    (Some(left), Some(right)) => out.push(self.paste(&left, &right, at)?),
                    (left, right) => out.extend(left.into_iter().chain(right)),
                }
            }
            out.extend(piece);
        }
        if pasting {
            return Err(P4Error::new(self.map, at.pos, "`##` at the end of a macro body"));
        }
        Ok(out)
    }

    /// One token of `left` and `right` written together (`##`), or an error naming both.
    fn paste(&self, left: &Token, right: &Token, at: &Token) -> Result<Token> {
        let text = format!("{}{}", left.spelling(), right.spelling());
        let kind = if is_ident(&text) {
            Some(TokenKind::Ident(text.clone()))
        } else if text.bytes().all(|b| b.is_ascii_alphanumeric()) && text.as_bytes()[0].is_ascii_digit() {
            parse_int(&text).map(|value| TokenKind::Int(IntLit { value, width: None }))
        } else {
            super::lexer::punct_of(&text).map(TokenKind::Punct)
        };
        kind.map(|kind| Token { kind, ..left.clone() }).ok_or_else(|| {
            P4Error::new(
                self.map,
                at.pos,
                format!(
                    "pasting `{}` and `{}` gives `{text}`, not one token",
                    left.spelling(),
                    right.spelling()
                ),
            )
        })
    }

    /// `__FILE__` and `__LINE__` where no macro of that name is defined: the file and line of
    /// the use; any other token as it is.
    fn predefined(&self, t: Token) -> Token {
        let kind = match &t.kind {
            TokenKind::Ident(w) if w == "__FILE__" => TokenKind::Str(self.map.file(t.pos.file).name.clone()),
            TokenKind::Ident(w) if w == "__LINE__" => TokenKind::Int(IntLit {
                value: u128::from(t.pos.line),
                width: None,
            }),
            _ => return t,
        };
        Token { kind, ..t }
    }

    /// The value of an `#if` or `#elif` condition.
    fn condition(&mut self, text: &str, at: &Token) -> Result<bool> {
        let tokens = self.lex_fragment(text, at)?;
        // `defined NAME` and `defined(NAME)` are decided before expansion.
        let mut resolved = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            if matches!(&tokens[i].kind, TokenKind::Ident(w) if w == "defined") {
                let (name, next) = match (tokens.get(i + 1).map(|t| &t.kind), tokens.get(i + 2).map(|t| &t.kind)) {
                    (Some(TokenKind::Punct("(")), Some(TokenKind::Ident(n))) => (n.clone(), i + 4),
                    (Some(TokenKind::Ident(n)), _) => (n.clone(), i + 2),
                    _ => {
                        return Err(P4Error::new(self.map, at.pos, "`defined` needs a macro name"));
                    }
                };
                let v = u128::from(self.defines.contains_key(&name));
                resolved.push(Token {
                    kind: TokenKind::Int(IntLit { value: v, width: None }),
                    ..tokens[i].clone()
                });
                i = next;
                continue;
            }
            resolved.push(tokens[i].clone());
            i += 1;
        }
        let expanded = self.expand(resolved)?;
        let mut e = CondExpr {
            tokens: &expanded,
            at: 0,
        };
        let v = e.ternary();
        match v {
            Some(v) if e.at == expanded.len() => Ok(v != 0),
            _ => Err(P4Error::new(
                self.map,
                at.pos,
                format!("#if condition `{}` is not an integer expression", text.trim()),
            )),
        }
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
        let dir = self
            .map
            .file(from)
            .path
            .as_ref()
            .and_then(|p| p.parent().map(Path::to_owned))
            .unwrap_or_default();
        let local = dir.join(name);
        let beside = (!system).then(|| local.clone());
        let found = beside
            .into_iter()
            .chain(self.include_dirs.iter().map(|d| d.join(name)))
            .find(|p| p.is_file());
        if let Some(file) = found {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => return err(format!("cannot read include `{}`: {e}", file.display())),
            };
            let id = self.map.add(SourceFile {
                name: file.display().to_string(),
                path: Some(file),
                text,
            });
            return self.file(id, depth + 1);
        }
        let base = Path::new(name).file_name().and_then(|n| n.to_str()).unwrap_or(name);
        if let Some((builtin, text)) = BUILT_IN.iter().find(|(n, _)| *n == base) {
            let id = self.map.add(SourceFile {
                name: format!("<{builtin}>"),
                path: None,
                text: (*text).to_owned(),
            });
            return self.file(id, depth + 1);
        }
        // One message whichever way the include is written: what was looked for, and where.
        let mut looked: Vec<String> = Vec::new();
        if !system {
            looked.push(format!("no file {}", local.display()));
        }
        looked.extend(self.include_dirs.iter().map(|d| format!("none in -I {}", d.display())));
        looked.push("no built-in of that name (intlab has core.p4, v1model.p4, psa.p4 and intlab.p4)".into());
        err(format!("cannot include `{name}`: {}", looked.join(", ")))
    }
}

/// An `#if` condition: C's integer expressions over literals (names left after expansion are 0).
struct CondExpr<'a> {
    tokens: &'a [Token],
    at: usize,
}

impl CondExpr<'_> {
    fn punct(&self) -> Option<&'static str> {
        match self.tokens.get(self.at).map(|t| &t.kind) {
            Some(TokenKind::Punct(p)) => Some(p),
            _ => None,
        }
    }

    /// Whether the next tokens are `>` `>` written together (the lexer splits `>>`).
    fn shift_right(&self) -> bool {
        matches!((self.tokens.get(self.at), self.tokens.get(self.at + 1)),
            (Some(a), Some(b)) if a.kind == TokenKind::Punct(">") && b.kind == TokenKind::Punct(">") && a.end == b.start)
    }

    fn ternary(&mut self) -> Option<i128> {
        let c = self.binary(0)?;
        if self.punct() == Some("?") {
            self.at += 1;
            let a = self.ternary()?;
            if self.punct() != Some(":") {
                return None;
            }
            self.at += 1;
            let b = self.ternary()?;
            return Some(if c != 0 { a } else { b });
        }
        Some(c)
    }

    fn operator(&self, level: usize) -> Option<(&'static str, usize)> {
        const LEVELS: &[&[&str]] = &[
            &["||"],
            &["&&"],
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<", ">", "<=", ">="],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let ops = LEVELS.get(level)?;
        if ops.contains(&">>") && self.shift_right() {
            return Some((">>", 2));
        }
        let p = self.punct()?;
        if p == ">" && self.shift_right() {
            return None;
        }
        ops.iter().find(|o| **o == p).map(|o| (*o, 1))
    }

    fn binary(&mut self, level: usize) -> Option<i128> {
        if level >= 10 {
            return self.unary();
        }
        let mut a = self.binary(level + 1)?;
        while let Some((op, n)) = self.operator(level) {
            self.at += n;
            let b = self.binary(level + 1)?;
            a = match op {
                "||" => i128::from(a != 0 || b != 0),
                "&&" => i128::from(a != 0 && b != 0),
                "|" => a | b,
                "^" => a ^ b,
                "&" => a & b,
                "==" => i128::from(a == b),
                "!=" => i128::from(a != b),
                "<" => i128::from(a < b),
                ">" => i128::from(a > b),
                "<=" => i128::from(a <= b),
                ">=" => i128::from(a >= b),
                "<<" => a.checked_shl(u32::try_from(b).ok()?)?,
                ">>" => a.checked_shr(u32::try_from(b).ok()?)?,
                "+" => a.checked_add(b)?,
                "-" => a.checked_sub(b)?,
                "*" => a.checked_mul(b)?,
                "/" => a.checked_div(b)?,
                "%" => a.checked_rem(b)?,
                _ => return None,
            };
        }
        Some(a)
    }

    fn unary(&mut self) -> Option<i128> {
        match self.punct() {
            Some("!") => {
                self.at += 1;
                Some(i128::from(self.unary()? == 0))
            }
            Some("-") => {
                self.at += 1;
                self.unary()?.checked_neg()
            }
            Some("+") => {
                self.at += 1;
                self.unary()
            }
            Some("~") => {
                self.at += 1;
                Some(!self.unary()?)
            }
            Some("(") => {
                self.at += 1;
                let v = self.ternary()?;
                if self.punct() != Some(")") {
                    return None;
                }
                self.at += 1;
                Some(v)
            }
            _ => {
                let t = self.tokens.get(self.at)?;
                self.at += 1;
                match &t.kind {
                    TokenKind::Int(i) => i128::try_from(i.value).ok(),
                    // A name no macro defines counts as 0, as in C.
                    TokenKind::Ident(_) => Some(0),
                    _ => None,
                }
            }
        }
    }
}

/// The text of the string literal `s` starts with (`\\` and `\"` unescaped), if it starts
/// with one; what follows it is not looked at.
fn quoted(s: &str) -> Option<String> {
    let mut chars = s.strip_prefix('"')?.chars();
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
}

fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// Tokens as `#` writes them into a string: spaced where they were apart in the source.
fn spell_all(tokens: &[Token]) -> String {
    let mut s = String::new();
    for (k, t) in tokens.iter().enumerate() {
        if k > 0 && tokens[k - 1].end != t.start {
            s.push(' ');
        }
        // Inside a string literal a quote or backslash is escaped.
        s.push_str(&t.spelling().replace('\\', "\\\\").replace('"', "\\\""));
    }
    s
}

/// A decimal, `0x`, `0o` or `0b` number as one pasted token.
fn parse_int(text: &str) -> Option<u128> {
    let lower = text.to_ascii_lowercase();
    let (digits, radix) = match lower.get(..2) {
        Some("0x") => (&lower[2..], 16),
        Some("0o") => (&lower[2..], 8),
        Some("0b") => (&lower[2..], 2),
        _ => (lower.as_str(), 10),
    };
    u128::from_str_radix(digits, radix).ok()
}

fn is_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Result<Vec<String>> {
        words_with(text, &Options::default())
    }

    fn words_with(text: &str, options: &Options) -> Result<Vec<String>> {
        let mut map = SourceMap::default();
        let tokens = preprocess_text("t.p4", None, text.to_owned(), options, &mut map)?;
        Ok(tokens
            .iter()
            .map(|t| match &t.kind {
                TokenKind::Ident(w) => w.clone(),
                TokenKind::Int(i) => i.value.to_string(),
                TokenKind::Punct(p) => (*p).to_owned(),
                TokenKind::Str(s) => format!("\"{s}\""),
                TokenKind::Directive(d) => format!("#{d}"),
            })
            .collect())
    }

    #[test]
    fn function_like_macros_take_their_arguments_and_rescan() {
        let got = words("#define SQ(x) ((x) * (x))\n#define TWICE(f, v) f(f(v))\nTWICE(SQ, a + 1) SQ\n").unwrap();
        assert_eq!(
            got.join(" "),
            "( ( ( ( a + 1 ) * ( a + 1 ) ) ) * ( ( ( a + 1 ) * ( a + 1 ) ) ) ) SQ"
        );
    }

    #[test]
    fn a_macro_does_not_expand_inside_itself() {
        assert_eq!(words("#define A A + 1\nA\n").unwrap().join(" "), "A + 1");
    }

    #[test]
    fn if_elif_else_choose_by_integer_expressions_and_defined() {
        let text = "#define V 20200408\n#if V >= 20200408 && !defined(X)\nyes\n#elif 1\nno\n#else\nno\n#endif\n\
                    #if (1 << 3) == 8 ? 0 : 1\nno\n#elif defined V\nalso\n#endif\n";
        assert_eq!(words(text).unwrap(), ["yes", "also"]);
    }

    #[test]
    fn paste_and_stringize_take_the_argument_as_written() {
        let text = "#define N 7\n#define R(num) register<bit<32>>(N) sketch##num;\nR(0) R(N)\n\
                    #define S(x) #x\nS(a  +  \"b\") S(N)\n#define CAT(a, b) a ## b\nCAT(1, 5) CAT(<, <) CAT(, z)\n";
        assert_eq!(
            words(text).unwrap().join(" "),
            "register < bit < 32 > > ( 7 ) sketch0 ; register < bit < 32 > > ( 7 ) sketchN ; \
             \"a + \\\"b\\\"\" \"N\" 15 << z"
        );
        let e = words("#define P(a, b) a ## b\nP(+, /)\n").unwrap_err();
        assert!(e.message.contains("pasting `+` and `/`"), "{e}");
    }

    #[test]
    fn line_directives_and_line_markers_move_the_lines_after_them() {
        assert_eq!(
            words("#line 100\nx __LINE__\ny __LINE__\n").unwrap(),
            ["x", "100", "y", "101"]
        );
        assert_eq!(
            words("a __FILE__\n#line 7 \"gen/out.p4\"\n__FILE__ __LINE__\n").unwrap(),
            ["a", "\"t.p4\"", "\"gen/out.p4\"", "7"]
        );
        // cpp's own output: `# N "file" flags`; a later directive without a name keeps it.
        assert_eq!(
            words("# 20 \"a.p4\" 1\n__LINE__\n#line 3\n__FILE__ __LINE__\n").unwrap(),
            ["20", "\"a.p4\"", "3"]
        );
        // Errors name the presumed place; a skipped block's #line does nothing.
        let e = words("#if 0\n#line 5 \"no.p4\"\n#endif\n#line 40 \"gen.p4\"\n\n#error stop\n").unwrap_err();
        assert_eq!(e.at, "gen.p4:41:1", "{e}");
        let e = words("#line x\n").unwrap_err();
        assert!(e.message.contains("#line needs a line number from 1, found `x`"), "{e}");
        let e = words("#line 0\n").unwrap_err();
        assert!(e.message.contains("from 1"), "{e}");
        let e = words("#line 4 gen.p4\n").unwrap_err();
        assert!(
            e.message.contains("a file name in quotes expected, found `gen.p4`"),
            "{e}"
        );
    }

    #[test]
    fn file_and_line_name_the_use_and_the_command_line_defines_and_undefines() {
        assert_eq!(words("a\n__LINE__ __FILE__\n").unwrap(), ["a", "2", "\"t.p4\""]);
        let mut o = Options::default();
        o.define("WITH_INT");
        o.define("SIZE=1024");
        o.define("GONE=2");
        o.undefines.push("GONE".into());
        let text = "#ifdef WITH_INT\nint\n#endif\nSIZE GONE\n#if defined(GONE)\nno\n#endif\n";
        assert_eq!(words_with(text, &o).unwrap(), ["int", "1024", "GONE"]);
    }

    #[test]
    fn includes_are_found_beside_the_file_then_in_the_include_folders_in_order() {
        let dir = std::env::temp_dir().join(format!("intlab-pp-{}", std::process::id()));
        let (a, b, src) = (dir.join("a"), dir.join("b"), dir.join("src"));
        for d in [&a, &b, &src] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(a.join("shared")).unwrap();
        std::fs::write(a.join("shared/size.p4"), "from_a\n").unwrap();
        std::fs::write(b.join("only_b.p4"), "from_b\n").unwrap();
        std::fs::write(src.join("here.p4"), "beside\n").unwrap();
        let main = src.join("main.p4");
        std::fs::write(
            &main,
            "#include \"here.p4\"\n#include \"shared/size.p4\"\n#include <only_b.p4>\n",
        )
        .unwrap();
        let mut map = SourceMap::default();
        let none = preprocess_file(&main, &Options::default(), &mut map).unwrap_err();
        assert!(none.message.contains("cannot include `shared/size.p4`"), "{none}");
        let o = Options {
            include_dirs: vec![b.clone(), a.clone()],
            ..Options::default()
        };
        let tokens = preprocess_file(&main, &o, &mut map).unwrap();
        let got: Vec<String> = tokens.iter().map(Token::spelling).collect();
        assert_eq!(got, ["beside", "from_a", "from_b"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wrong_argument_count_names_the_macro() {
        let e = words("#define F(a, b) a\nF(1)\n").unwrap_err();
        assert!(e.message.contains("macro `F` takes 2"), "{e}");
    }
}
