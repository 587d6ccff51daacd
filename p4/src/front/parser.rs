//! Recursive-descent parser from tokens to [`super::ast`], for the whole P4_16 grammar. A
//! declaration or statement that does not parse is reported and skipped, so one run reports
//! every syntax error it can find.

use std::collections::HashSet;

use super::ast::*;
use super::diag::{Diagnostics, P4Error, P4Errors};
use super::lexer::{Token, TokenKind};
use super::source::{Pos, SourceMap};

type PResult<T> = std::result::Result<T, P4Error>;

/// How deeply expressions and statements may nest: deeper programs are refused by name
/// instead of overflowing the stack.
pub const MAX_NESTING: usize = 256;

/// Parses a preprocessed token stream.
pub fn parse(tokens: &[Token], map: &SourceMap) -> Result<Program, P4Errors> {
    let mut p = Parser {
        tokens,
        at: 0,
        map,
        types: HashSet::new(),
        type_params: Vec::new(),
        depth: 0,
        in_width: 0,
        diags: Diagnostics::default(),
    };
    let mut decls = Vec::new();
    while !p.done() {
        if p.eat(";") {
            continue;
        }
        let start = p.at;
        match p.decl() {
            Ok(d) => decls.push(d),
            Err(e) => {
                p.diags.push(e);
                p.recover_decl(start);
            }
        }
    }
    p.diags.finish(Program { decls })
}

/// Words that start a type.
const TYPE_WORDS: &[&str] = &[
    "bit",
    "int",
    "varbit",
    "bool",
    "error",
    "string",
    "void",
    "tuple",
    "list",
    "match_kind",
];

/// Words that start a declaration at top level.
const DECL_WORDS: &[&str] = &[
    "const",
    "typedef",
    "type",
    "header",
    "header_union",
    "struct",
    "enum",
    "error",
    "match_kind",
    "extern",
    "parser",
    "control",
    "package",
    "action",
];

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    map: &'a SourceMap,
    /// Names declared as types so far: tells `(T) e` (a cast) from `(e)`, and `T x;` (a
    /// declaration) from `x = e;`.
    types: HashSet<String>,
    /// Type parameters of the declarations being read, innermost last.
    type_params: Vec<Vec<String>>,
    /// Nesting of expressions and statements being read.
    depth: usize,
    /// Reading a width (`bit<W>`): `>` closes it, so `>>` is two closings, not a shift.
    in_width: usize,
    diags: Diagnostics,
}

impl Parser<'_> {
    fn done(&self) -> bool {
        self.at >= self.tokens.len()
    }

    fn peek(&self, k: usize) -> Option<&TokenKind> {
        self.tokens.get(self.at + k).map(|t| &t.kind)
    }

    fn pos(&self) -> Pos {
        self.tokens
            .get(self.at)
            .or_else(|| self.tokens.last())
            .map(|t| t.pos)
            .unwrap_or_default()
    }

    fn error<T>(&self, message: impl Into<String>) -> PResult<T> {
        Err(P4Error::new(self.map, self.pos(), message))
    }

    fn describe(&self) -> String {
        match self.peek(0) {
            None => "the end of the program".into(),
            Some(TokenKind::Ident(s)) => format!("`{s}`"),
            Some(TokenKind::Punct(p)) => format!("`{p}`"),
            Some(TokenKind::Int(i)) => format!("`{}`", i.value),
            Some(TokenKind::Str(s)) => format!("\"{s}\""),
            Some(TokenKind::Directive(d)) => format!("`#{d}`"),
        }
    }

    fn is(&self, p: &str) -> bool {
        self.is_at(0, p)
    }

    fn is_at(&self, k: usize, p: &str) -> bool {
        matches!(self.peek(k), Some(TokenKind::Punct(q)) if *q == p)
    }

    fn is_word(&self, w: &str) -> bool {
        self.is_word_at(0, w)
    }

    fn is_word_at(&self, k: usize, w: &str) -> bool {
        matches!(self.peek(k), Some(TokenKind::Ident(s)) if s == w)
    }

    fn word_at(&self, k: usize) -> Option<&str> {
        match self.peek(k) {
            Some(TokenKind::Ident(s)) => Some(s),
            _ => None,
        }
    }

    /// Whether tokens `k` and `k + 1` touch (`>>` written together, not `> >`).
    fn adjacent(&self, k: usize) -> bool {
        match (self.tokens.get(self.at + k), self.tokens.get(self.at + k + 1)) {
            (Some(a), Some(b)) => a.end == b.start && a.pos.file == b.pos.file && a.pos.line == b.pos.line,
            _ => false,
        }
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if self.is_word(w) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> PResult<()> {
        if self.eat(p) {
            Ok(())
        } else {
            self.error(format!("`{p}` expected, found {}", self.describe()))
        }
    }

    fn expect_word(&mut self, w: &str) -> PResult<()> {
        if self.eat_word(w) {
            Ok(())
        } else {
            self.error(format!("`{w}` expected, found {}", self.describe()))
        }
    }

    fn ident(&mut self) -> PResult<String> {
        match self.peek(0) {
            Some(TokenKind::Ident(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => self.error(format!("a name expected, found {}", self.describe())),
        }
    }

    /// A `.name` or `name`.
    fn path_name(&mut self) -> PResult<String> {
        self.eat(".");
        self.ident()
    }

    fn is_type_name(&self, name: &str) -> bool {
        self.types.contains(name) || self.type_params.iter().any(|s| s.iter().any(|t| t == name))
    }

    fn declare_type(&mut self, name: &str) {
        self.types.insert(name.to_owned());
    }

    /// Enters one more level of nesting; refused past [`MAX_NESTING`].
    fn nest(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return self.error(format!(
                "nested more than {MAX_NESTING} levels deep: intlab reads up to {MAX_NESTING} levels of nested expressions and statements"
            ));
        }
        Ok(())
    }

    /// After a declaration that failed at `start`: skips to the next `;` or the `}` closing a
    /// block at depth 0, whichever comes first, and past it.
    fn recover_decl(&mut self, start: usize) {
        if self.at == start {
            self.at += 1;
        }
        let mut depth = 0i32;
        while !self.done() {
            if self.is("{") || self.is("(") {
                depth += 1;
            } else if self.is("}") || self.is(")") {
                depth -= 1;
                if depth <= 0 && self.is("}") {
                    self.at += 1;
                    if depth < 0 {
                        return;
                    }
                    // A declaration that ends in a block: done unless `;` or `main` follows.
                    return;
                }
            } else if self.is(";") && depth <= 0 {
                self.at += 1;
                return;
            } else if depth <= 0 && self.word_at(0).is_some_and(|w| DECL_WORDS.contains(&w)) && self.at > start + 1 {
                return;
            }
            self.at += 1;
        }
    }

    /// After a statement that failed: skips to the next `;` in this block, or to the `}` that
    /// closes it (not consumed).
    fn recover_stmt(&mut self, start: usize) {
        if self.at == start && !self.is("}") {
            self.at += 1;
        }
        let mut depth = 0i32;
        while !self.done() {
            if self.is("{") || self.is("(") {
                depth += 1;
            } else if self.is(")") {
                depth -= 1;
            } else if self.is("}") {
                if depth <= 0 {
                    return;
                }
                depth -= 1;
                if depth == 0 {
                    self.at += 1;
                    return;
                }
            } else if self.is(";") && depth <= 0 {
                self.at += 1;
                return;
            }
            self.at += 1;
        }
    }

    fn annotations(&mut self) -> PResult<Vec<Annotation>> {
        let mut out = Vec::new();
        while self.is("@") {
            let pos = self.pos();
            self.at += 1;
            let name = self.ident()?;
            let mut args = Vec::new();
            let mut body = String::new();
            if name == "pragma" {
                // `@pragma name args...` runs to the end of its line.
                let line = pos.line;
                let start = self.at;
                while !self.done() && self.pos().line == line {
                    self.at += 1;
                }
                body = self.text_between(start, self.at);
            } else if self.is("(") {
                let (start, end) = self.balanced("(", ")")?;
                body = self.text_between(start + 1, end - 1);
                let saved = self.at;
                self.at = start + 1;
                let mut ok = true;
                while self.at < end - 1 {
                    match self.expr() {
                        Ok(e) => args.push(e),
                        Err(_) => {
                            ok = false;
                            break;
                        }
                    }
                    if !self.eat(",") {
                        break;
                    }
                }
                if !ok || self.at != end - 1 {
                    args.clear();
                }
                self.at = saved;
            } else if self.is("[") {
                let (start, end) = self.balanced("[", "]")?;
                body = self.text_between(start + 1, end - 1);
            }
            out.push(Annotation { name, args, body, pos });
        }
        Ok(out)
    }

    /// The source text of tokens `start..end`.
    fn text_between(&self, start: usize, end: usize) -> String {
        let mut s = String::new();
        for (i, t) in self.tokens[start..end.min(self.tokens.len())].iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(&t.spelling());
        }
        s
    }

    /// Skips a balanced `open ... close` starting here; returns its token range.
    fn balanced(&mut self, open: &str, close: &str) -> PResult<(usize, usize)> {
        let start = self.at;
        let pos = self.pos();
        let mut depth = 0;
        while !self.done() {
            if self.is(open) {
                depth += 1;
            } else if self.is(close) {
                depth -= 1;
                if depth == 0 {
                    self.at += 1;
                    return Ok((start, self.at));
                }
            }
            self.at += 1;
        }
        Err(P4Error::new(
            self.map,
            pos,
            format!("`{close}` expected to close this `{open}`"),
        ))
    }

    // ---- declarations ----

    fn decl(&mut self) -> PResult<Decl> {
        let annotations = self.annotations()?;
        let pos = self.pos();
        let Some(word) = self.word_at(0).map(str::to_owned) else {
            if self.is(".") {
                return self.function_or_instance(annotations, pos);
            }
            return self.error(format!("a declaration expected, found {}", self.describe()));
        };
        match word.as_str() {
            "const" => {
                self.at += 1;
                Ok(Decl::Const(self.const_rest(annotations, pos)?))
            }
            "typedef" | "type" => {
                self.at += 1;
                let ty = if self
                    .word_at(0)
                    .is_some_and(|w| matches!(w, "header" | "struct" | "header_union" | "enum"))
                {
                    // `typedef struct S { ... } T;` declares S too.
                    match self.decl()? {
                        Decl::Aggregate(a) => Type::Named(a.name.clone(), Vec::new(), a.pos),
                        Decl::Enum(e) => Type::Named(e.name.clone(), Vec::new(), e.pos),
                        _ => return self.error("a type expected"),
                    }
                } else {
                    self.ty()?
                };
                let name = self.ident()?;
                self.expect(";")?;
                self.declare_type(&name);
                Ok(Decl::Typedef {
                    annotations,
                    ty,
                    name,
                    newtype: word == "type",
                    pos,
                })
            }
            "header" | "header_union" | "struct" => {
                self.at += 1;
                let kind = match word.as_str() {
                    "header" => AggregateKind::Header,
                    "header_union" => AggregateKind::HeaderUnion,
                    _ => AggregateKind::Struct,
                };
                let name = self.ident()?;
                self.declare_type(&name);
                let type_params = self.type_params()?;
                self.type_params.push(type_params.clone());
                let fields = self.fields();
                self.type_params.pop();
                Ok(Decl::Aggregate(Aggregate {
                    kind,
                    annotations,
                    name,
                    type_params,
                    fields: fields?,
                    pos,
                }))
            }
            "enum" => {
                self.at += 1;
                self.enum_rest(annotations, pos)
            }
            "error" | "match_kind" if self.is_at(1, "{") => {
                self.at += 2;
                let mut names = Vec::new();
                while !self.is("}") {
                    let p = self.pos();
                    names.push((self.ident()?, p));
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}")?;
                Ok(if word == "error" {
                    Decl::Error(names)
                } else {
                    Decl::MatchKind(names)
                })
            }
            "extern" => {
                self.at += 1;
                self.extern_decl(annotations, pos)
            }
            "parser" | "control" => {
                self.at += 1;
                let name = self.ident()?;
                self.declare_type(&name);
                let type_params = self.type_params()?;
                self.type_params.push(type_params.clone());
                let r = self.block_decl(&word, annotations, name, type_params, pos);
                self.type_params.pop();
                r
            }
            "package" => {
                self.at += 1;
                let name = self.ident()?;
                self.declare_type(&name);
                let type_params = self.type_params()?;
                self.type_params.push(type_params.clone());
                let params = self.params();
                self.type_params.pop();
                self.expect(";")?;
                Ok(Decl::BlockType {
                    kind: BlockKind::Package,
                    sig: Signature {
                        annotations,
                        ret: None,
                        name,
                        type_params,
                        params: params?,
                        is_abstract: false,
                        pos,
                    },
                })
            }
            "action" => {
                self.at += 1;
                Ok(Decl::Action(self.action_rest(annotations, pos)?))
            }
            "value_set" => self.error("value_set is declared inside a parser"),
            _ => self.function_or_instance(annotations, pos),
        }
    }

    /// After `enum`: `[bit<W>] Name { A [= v], ... }`.
    fn enum_rest(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<Decl> {
        let underlying = if self.is_word("bit") || self.is_word("int") || self.word_at(1).is_some() {
            Some(self.ty()?)
        } else {
            None
        };
        let name = self.ident()?;
        self.declare_type(&name);
        self.expect("{")?;
        let mut members = Vec::new();
        while !self.is("}") {
            self.annotations()?;
            let mpos = self.pos();
            let m = self.ident()?;
            let value = if self.eat("=") { Some(self.expr()?) } else { None };
            members.push((m, value, mpos));
            if !self.eat(",") {
                break;
            }
        }
        self.expect("}")?;
        Ok(Decl::Enum(EnumDecl {
            annotations,
            name,
            underlying,
            members,
            pos,
        }))
    }

    /// At top level, after annotations: `T f<...>(...) { ... }` (a function) or
    /// `T(args) name;` (an instance).
    fn function_or_instance(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<Decl> {
        let ty = self.ty()?;
        if self.is("(") {
            return Ok(Decl::Instance(self.instance_rest(annotations, ty, pos)?));
        }
        let name = self.ident()?;
        if self.is("(") || self.is("<") {
            let type_params = self.type_params()?;
            self.type_params.push(type_params.clone());
            let r = (|| {
                let params = self.params()?;
                let body = self.block()?;
                Ok(Decl::Function(FunctionDecl {
                    sig: Signature {
                        annotations,
                        ret: Some(ty),
                        name,
                        type_params,
                        params,
                        is_abstract: false,
                        pos,
                    },
                    body,
                }))
            })();
            self.type_params.pop();
            return r;
        }
        if self.is("=") || self.is(";") {
            return self.error(format!(
                "`{name}`: a variable at top level is not P4; declare it `const` or inside a control"
            ));
        }
        self.error(format!("a declaration expected, found {}", self.describe()))
    }

    fn const_rest(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<ConstDecl> {
        let ty = self.ty()?;
        let name = self.ident()?;
        self.expect("=")?;
        let value = self.expr()?;
        self.expect(";")?;
        Ok(ConstDecl {
            annotations,
            ty,
            name,
            value,
            pos,
        })
    }

    fn fields(&mut self) -> PResult<Vec<Field>> {
        self.expect("{")?;
        let mut fields = Vec::new();
        while !self.is("}") && !self.done() {
            let annotations = self.annotations()?;
            let pos = self.pos();
            let mut ty = self.ty()?;
            let name = self.ident()?;
            while self.eat("[") {
                let n = self.expr()?;
                self.expect("]")?;
                ty = Type::Stack(Box::new(ty), Box::new(n));
            }
            self.expect(";")?;
            fields.push(Field {
                annotations,
                ty,
                name,
                pos,
            });
        }
        self.expect("}")?;
        Ok(fields)
    }

    fn type_params(&mut self) -> PResult<Vec<String>> {
        let mut out = Vec::new();
        if self.eat("<") {
            while !self.is(">") {
                out.push(self.ident()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(">")?;
        }
        Ok(out)
    }

    fn extern_decl(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<Decl> {
        // `extern Name<T> { ... }` or `extern R f<T>(...);`
        let is_object = self.word_at(0).is_some() && (self.is_at(1, "{") || self.is_at(1, "<") && self.object_ahead());
        if !is_object {
            let sig = self.signature(annotations, pos)?;
            self.expect(";")?;
            return Ok(Decl::ExternFunction(sig));
        }
        let name = self.ident()?;
        self.declare_type(&name);
        let type_params = self.type_params()?;
        self.type_params.push(type_params.clone());
        let methods = (|| {
            self.expect("{")?;
            let mut methods = Vec::new();
            while !self.is("}") && !self.done() {
                let ma = self.annotations()?;
                let mpos = self.pos();
                let is_abstract = self.eat_word("abstract");
                if self.is_word(&name) && self.is_at(1, "(") {
                    // A constructor.
                    self.at += 1;
                    let params = self.params()?;
                    self.expect(";")?;
                    methods.push(Signature {
                        annotations: ma,
                        ret: None,
                        name: name.clone(),
                        type_params: Vec::new(),
                        params,
                        is_abstract: false,
                        pos: mpos,
                    });
                    continue;
                }
                let mut sig = self.signature(ma, mpos)?;
                sig.is_abstract = is_abstract;
                self.expect(";")?;
                methods.push(sig);
            }
            self.expect("}")?;
            Ok(methods)
        })();
        self.type_params.pop();
        Ok(Decl::ExternObject(ExternDecl {
            annotations,
            name,
            type_params,
            methods: methods?,
            pos,
        }))
    }

    /// After `extern Name`: whether `<...>` is followed by `{` (an object with type parameters).
    fn object_ahead(&self) -> bool {
        let mut depth = 0;
        let mut k = 1;
        while let Some(t) = self.peek(k) {
            match t {
                TokenKind::Punct("<") => depth += 1,
                TokenKind::Punct(">") => {
                    depth -= 1;
                    if depth == 0 {
                        return self.is_at(k + 1, "{");
                    }
                }
                TokenKind::Punct("(") | TokenKind::Punct(";") => return false,
                _ => {}
            }
            k += 1;
        }
        false
    }

    /// `R name<T>(params)`.
    fn signature(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<Signature> {
        // The return type may use the method's own type parameters (`T lookahead<T>()`).
        let save = self.at;
        let mut scan = self.at;
        while let Some(t) = self.tokens.get(scan) {
            if matches!(t.kind, TokenKind::Punct("(")) {
                break;
            }
            scan += 1;
        }
        // Find `name <T, ...>` right before `(`: collect idents after `<` as type parameters.
        let mut early = Vec::new();
        if scan > 0 && matches!(self.tokens.get(scan - 1).map(|t| &t.kind), Some(TokenKind::Punct(">"))) {
            let mut k = scan - 1;
            while k > save {
                k -= 1;
                match &self.tokens[k].kind {
                    TokenKind::Ident(w) => early.push(w.clone()),
                    TokenKind::Punct(",") => {}
                    TokenKind::Punct("<") => break,
                    _ => {
                        early.clear();
                        break;
                    }
                }
            }
        }
        self.type_params.push(early);
        let r = (|| {
            let ret = self.ty()?;
            let name = self.ident()?;
            let type_params = self.type_params()?;
            self.type_params.push(type_params.clone());
            let params = self.params();
            self.type_params.pop();
            Ok(Signature {
                annotations,
                ret: Some(ret),
                name,
                type_params,
                params: params?,
                is_abstract: false,
                pos,
            })
        })();
        self.type_params.pop();
        r
    }

    fn params(&mut self) -> PResult<Vec<Param>> {
        self.expect("(")?;
        let mut params = Vec::new();
        while !self.is(")") {
            let annotations = self.annotations()?;
            let pos = self.pos();
            let direction = if self.eat_word("inout") {
                Direction::InOut
            } else if self.eat_word("in") {
                Direction::In
            } else if self.eat_word("out") {
                Direction::Out
            } else {
                Direction::None
            };
            let ty = self.ty()?;
            let name = self.ident()?;
            let default = if self.eat("=") { Some(self.expr()?) } else { None };
            params.push(Param {
                annotations,
                direction,
                ty,
                name,
                default,
                pos,
            });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok(params)
    }

    /// A parser or control after its name and type parameters: a type declaration (`;`) or a
    /// declaration with its body.
    fn block_decl(
        &mut self,
        word: &str,
        annotations: Vec<Annotation>,
        name: String,
        type_params: Vec<String>,
        pos: Pos,
    ) -> PResult<Decl> {
        let params = self.params()?;
        let kind = if word == "parser" {
            BlockKind::Parser
        } else {
            BlockKind::Control
        };
        if self.eat(";") {
            return Ok(Decl::BlockType {
                kind,
                sig: Signature {
                    annotations,
                    ret: None,
                    name,
                    type_params,
                    params,
                    is_abstract: false,
                    pos,
                },
            });
        }
        let ctor_params = if self.is("(") { self.params()? } else { Vec::new() };
        self.expect("{")?;
        if kind == BlockKind::Parser {
            let mut locals = Vec::new();
            let mut states = Vec::new();
            while !self.is("}") && !self.done() {
                let start = self.at;
                let r = (|| {
                    let annotations = self.annotations()?;
                    if self.is_word("state") {
                        let spos = self.pos();
                        self.at += 1;
                        states.push(self.state(annotations, spos)?);
                    } else {
                        let s = self.stmt_with(annotations)?;
                        match s {
                            Stmt::Const(_) | Stmt::Var(..) | Stmt::Instance(_) | Stmt::ValueSet(..) => locals.push(s),
                            _ => return self.error("a parser holds declarations and states"),
                        }
                    }
                    Ok(())
                })();
                if let Err(e) = r {
                    self.diags.push(e);
                    self.recover_stmt(start);
                }
            }
            self.expect("}")?;
            return Ok(Decl::Parser(ParserDecl {
                annotations,
                name,
                type_params,
                params,
                ctor_params,
                locals,
                states,
                pos,
            }));
        }
        let mut locals = Vec::new();
        let mut apply = Vec::new();
        let mut seen_apply = false;
        while !self.is("}") && !self.done() {
            let start = self.at;
            let r = (|| {
                let la = self.annotations()?;
                let lpos = self.pos();
                if self.eat_word("action") {
                    locals.push(ControlLocal::Action(self.action_rest(la, lpos)?));
                } else if self.eat_word("table") {
                    locals.push(ControlLocal::Table(self.table(la, lpos)?));
                } else if self.is_word("apply") && (self.is_at(1, "{") || self.is_at(1, "@")) {
                    self.at += 1;
                    self.annotations()?;
                    apply = self.block()?;
                    seen_apply = true;
                } else {
                    let s = self.stmt_with(la)?;
                    match s {
                        Stmt::Const(_) | Stmt::Var(..) | Stmt::Instance(_) => locals.push(ControlLocal::Stmt(s)),
                        _ => return self.error("a control holds declarations, actions, tables and `apply { ... }`"),
                    }
                }
                Ok(())
            })();
            if let Err(e) = r {
                self.diags.push(e);
                self.recover_stmt(start);
            }
        }
        self.expect("}")?;
        if !seen_apply {
            return Err(P4Error::new(
                self.map,
                pos,
                format!("control `{name}` has no `apply {{ ... }}` block"),
            ));
        }
        Ok(Decl::Control(ControlDecl {
            annotations,
            name,
            type_params,
            params,
            ctor_params,
            locals,
            apply,
            pos,
        }))
    }

    fn state(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<State> {
        let name = self.ident()?;
        self.expect("{")?;
        let mut body = Vec::new();
        let mut transition = None;
        while !self.is("}") && !self.done() {
            if self.is_word("transition") {
                let tpos = self.pos();
                self.at += 1;
                transition = Some(self.transition(tpos)?);
                break;
            }
            let start = self.at;
            match self.stmt() {
                Ok(s) => body.push(s),
                Err(e) => {
                    self.diags.push(e);
                    self.recover_stmt(start);
                }
            }
        }
        self.expect("}")?;
        Ok(State {
            annotations,
            name,
            body,
            transition: transition.unwrap_or(Transition::Direct("reject".into(), pos)),
            pos,
        })
    }

    fn transition(&mut self, pos: Pos) -> PResult<Transition> {
        if self.eat_word("select") {
            self.expect("(")?;
            let mut on = Vec::new();
            while !self.is(")") {
                on.push(self.expr()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(")")?;
            self.expect("{")?;
            let mut cases = Vec::new();
            while !self.is("}") && !self.done() {
                self.annotations()?;
                let cpos = self.pos();
                let set = self.keyset()?;
                self.expect(":")?;
                let target = self.path_name()?;
                self.expect(";")?;
                cases.push((set, target, cpos));
            }
            self.expect("}")?;
            self.eat(";");
            return Ok(Transition::Select { on, cases, pos });
        }
        let tpos = self.pos();
        let target = self.path_name()?;
        self.expect(";")?;
        Ok(Transition::Direct(target, tpos))
    }

    /// A key set: a tuple `(a, b)`, `_`, `default`, or one set expression.
    fn keyset(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        if self.is("(") && self.tuple_keyset_ahead() {
            self.at += 1;
            let mut items = Vec::new();
            while !self.is(")") {
                items.push(self.simple_keyset()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(")")?;
            return Ok(Expr {
                kind: ExprKind::List(items),
                pos,
            });
        }
        self.simple_keyset()
    }

    /// Whether the `(` here opens a tuple (a comma at its top level).
    fn tuple_keyset_ahead(&self) -> bool {
        let mut depth = 0;
        let mut k = 0;
        while let Some(t) = self.peek(k) {
            match t {
                TokenKind::Punct("(") | TokenKind::Punct("[") | TokenKind::Punct("{") => depth += 1,
                TokenKind::Punct(")") | TokenKind::Punct("]") | TokenKind::Punct("}") => {
                    depth -= 1;
                    if depth == 0 {
                        return false;
                    }
                }
                TokenKind::Punct(",") if depth == 1 => return true,
                TokenKind::Punct(";") => return false,
                _ => {}
            }
            k += 1;
        }
        false
    }

    fn simple_keyset(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        if self.is("(") {
            // `(v &&& m)`: a set in parentheses.
            let save = self.at;
            self.at += 1;
            if let Ok(e) = self.simple_keyset()
                && matches!(e.kind, ExprKind::Mask(..) | ExprKind::Range(..))
                && self.eat(")")
            {
                return Ok(e);
            }
            self.at = save;
        }
        if self.eat_word("default") {
            return Ok(Expr {
                kind: ExprKind::Default,
                pos,
            });
        }
        if self.is("_") {
            self.at += 1;
            return Ok(Expr {
                kind: ExprKind::DontCare,
                pos,
            });
        }
        let e = self.expr()?;
        if self.eat("&&&") {
            let m = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Mask(Box::new(e), Box::new(m)),
                pos,
            });
        }
        if self.eat("..") {
            let hi = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Range(Box::new(e), Box::new(hi)),
                pos,
            });
        }
        Ok(e)
    }

    fn action_rest(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<ActionDecl> {
        let name = self.ident()?;
        let params = self.params()?;
        let body = self.block()?;
        Ok(ActionDecl {
            annotations,
            name,
            params,
            body,
            pos,
        })
    }

    fn action_ref(&mut self) -> PResult<ActionRef> {
        let annotations = self.annotations()?;
        let pos = self.pos();
        let name = self.path_name()?;
        let args = if self.is("(") { self.args()? } else { Vec::new() };
        Ok(ActionRef {
            annotations,
            name,
            args,
            pos,
        })
    }

    fn table(&mut self, annotations: Vec<Annotation>, pos: Pos) -> PResult<TableDecl> {
        let name = self.ident()?;
        self.expect("{")?;
        let mut properties = Vec::new();
        while !self.is("}") && !self.done() {
            let pa = self.annotations()?;
            let ppos = self.pos();
            let is_const = self.eat_word("const");
            let prop = self.ident()?;
            match prop.as_str() {
                "key" if !is_const => {
                    self.expect("=")?;
                    self.expect("{")?;
                    let mut keys = Vec::new();
                    while !self.is("}") && !self.done() {
                        let kpos = self.pos();
                        let expr = self.expr()?;
                        self.expect(":")?;
                        let match_kind = self.path_name()?;
                        let annotations = self.annotations()?;
                        self.expect(";")?;
                        keys.push(TableKey {
                            expr,
                            match_kind,
                            annotations,
                            pos: kpos,
                        });
                    }
                    self.expect("}")?;
                    self.eat(";");
                    properties.push(TableProperty::Key(keys, ppos));
                }
                "actions" if !is_const => {
                    self.expect("=")?;
                    self.expect("{")?;
                    let mut actions = Vec::new();
                    while !self.is("}") && !self.done() {
                        actions.push(self.action_ref()?);
                        if !self.eat(";") && !self.eat(",") {
                            break;
                        }
                    }
                    self.expect("}")?;
                    self.eat(";");
                    properties.push(TableProperty::Actions(actions, ppos));
                }
                "entries" => {
                    self.expect("=")?;
                    self.expect("{")?;
                    let mut entries = Vec::new();
                    while !self.is("}") && !self.done() {
                        entries.push(self.entry()?);
                    }
                    self.expect("}")?;
                    self.eat(";");
                    properties.push(TableProperty::Entries {
                        is_const,
                        entries,
                        pos: ppos,
                    });
                }
                _ => {
                    self.expect("=")?;
                    let value = self.expr()?;
                    self.expect(";")?;
                    properties.push(TableProperty::Value {
                        annotations: pa,
                        is_const,
                        name: prop,
                        value,
                        pos: ppos,
                    });
                }
            }
        }
        self.expect("}")?;
        Ok(TableDecl {
            annotations,
            name,
            properties,
            pos,
        })
    }

    fn entry(&mut self) -> PResult<Entry> {
        let mut annotations = self.annotations()?;
        let pos = self.pos();
        let is_const = self.eat_word("const");
        let mut priority = None;
        if self.is_word("priority") && self.is_at(1, "=") {
            self.at += 2;
            priority = Some(if self.is("(") { self.primary()? } else { self.unary()? });
            self.expect(":")?;
        }
        let keys = self.keyset()?;
        self.expect(":")?;
        let action = self.action_ref()?;
        annotations.extend(self.annotations()?);
        self.expect(";")?;
        Ok(Entry {
            annotations,
            is_const,
            keys,
            action,
            priority,
            pos,
        })
    }

    // ---- statements ----

    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.expect("{")?;
        let mut out = Vec::new();
        while !self.is("}") && !self.done() {
            let start = self.at;
            match self.stmt() {
                Ok(s) => out.push(s),
                Err(e) => {
                    self.diags.push(e);
                    self.recover_stmt(start);
                }
            }
        }
        self.expect("}")?;
        Ok(out)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let annotations = self.annotations()?;
        self.nest()?;
        let r = self.stmt_with(annotations);
        self.depth -= 1;
        r
    }

    fn stmt_with(&mut self, annotations: Vec<Annotation>) -> PResult<Stmt> {
        let pos = self.pos();
        if self.eat(";") {
            return Ok(Stmt::Empty(pos));
        }
        if self.is("{") {
            return Ok(Stmt::Block(self.block()?, pos));
        }
        match self.word_at(0) {
            Some("if") if self.is_at(1, "(") => {
                self.at += 1;
                self.expect("(")?;
                let c = self.expr()?;
                self.expect(")")?;
                let then = Box::new(self.stmt()?);
                let otherwise = if self.eat_word("else") {
                    Some(Box::new(self.stmt()?))
                } else {
                    None
                };
                return Ok(Stmt::If(c, then, otherwise, pos));
            }
            Some("switch") if self.is_at(1, "(") => return self.switch(pos),
            Some("exit") if self.is_at(1, ";") => {
                self.at += 2;
                return Ok(Stmt::Exit(pos));
            }
            Some("return") => {
                self.at += 1;
                if self.eat(";") {
                    return Ok(Stmt::Return(None, pos));
                }
                let e = self.expr()?;
                self.expect(";")?;
                return Ok(Stmt::Return(Some(e), pos));
            }
            Some("break") if self.is_at(1, ";") => {
                self.at += 2;
                return Ok(Stmt::Break(pos));
            }
            Some("continue") if self.is_at(1, ";") => {
                self.at += 2;
                return Ok(Stmt::Continue(pos));
            }
            Some("for") if self.is_at(1, "(") => return self.for_stmt(pos),
            Some("const") => {
                self.at += 1;
                return Ok(Stmt::Const(self.const_rest(annotations, pos)?));
            }
            Some("value_set") => {
                self.at += 1;
                self.expect("<")?;
                let ty = self.ty()?;
                self.close_angle()?;
                self.expect("(")?;
                let size = self.expr()?;
                self.expect(")")?;
                let name = self.ident()?;
                self.expect(";")?;
                return Ok(Stmt::ValueSet(ty, size, name, annotations, pos));
            }
            _ => {}
        }
        if self.declaration_ahead() {
            let ty = self.ty()?;
            if self.is("(") {
                return Ok(Stmt::Instance(self.instance_rest(annotations, ty, pos)?));
            }
            let name = self.ident()?;
            let mut ty = ty;
            while self.eat("[") {
                let n = self.expr()?;
                self.expect("]")?;
                ty = Type::Stack(Box::new(ty), Box::new(n));
            }
            let init = if self.eat("=") { Some(self.expr()?) } else { None };
            self.expect(";")?;
            return Ok(Stmt::Var(annotations, ty, name, init, pos));
        }
        let lhs = self.expr()?;
        if self.eat("=") {
            let rhs = self.expr()?;
            self.expect(";")?;
            return Ok(Stmt::Assign(lhs, rhs, pos));
        }
        if let Some(op) = self.compound_op() {
            let rhs = self.expr()?;
            self.expect(";")?;
            return Ok(Stmt::CompoundAssign(op, lhs, rhs, pos));
        }
        if matches!(lhs.kind, ExprKind::Call(..)) {
            self.expect(";")?;
            return Ok(Stmt::Call(lhs, pos));
        }
        self.error(format!("`=`, `(` or `;` expected, found {}", self.describe()))
    }

    /// `+=` and friends: the operator, consumed.
    fn compound_op(&mut self) -> Option<&'static str> {
        let op = match self.peek(0) {
            Some(TokenKind::Punct(p)) => match *p {
                "+=" => "+",
                "-=" => "-",
                "*=" => "*",
                "/=" => "/",
                "%=" => "%",
                "&=" => "&",
                "|=" => "|",
                "^=" => "^",
                "<<=" => "<<",
                "|+|=" => "|+|",
                "|-|=" => "|-|",
                ">" if self.is_at(1, ">=") && self.adjacent(0) => {
                    self.at += 2;
                    return Some(">>");
                }
                _ => return None,
            },
            _ => return None,
        };
        self.at += 1;
        Some(op)
    }

    fn switch(&mut self, pos: Pos) -> PResult<Stmt> {
        self.at += 1;
        self.expect("(")?;
        let on = self.expr()?;
        self.expect(")")?;
        self.expect("{")?;
        let mut cases = Vec::new();
        while !self.is("}") && !self.done() {
            let cpos = self.pos();
            let label = if self.eat_word("default") {
                SwitchLabel::Default
            } else {
                SwitchLabel::Expr(self.expr()?)
            };
            self.expect(":")?;
            let body = if self.is("{") { Some(self.block()?) } else { None };
            cases.push(SwitchCase { label, body, pos: cpos });
        }
        self.expect("}")?;
        Ok(Stmt::Switch(on, cases, pos))
    }

    fn for_stmt(&mut self, pos: Pos) -> PResult<Stmt> {
        self.at += 1;
        self.expect("(")?;
        // `for (T x in e)` or `for (x in e)`.
        let in_form = {
            let mut k = 0;
            let mut depth = 0;
            let mut found = false;
            while let Some(t) = self.peek(k) {
                match t {
                    TokenKind::Punct("(") | TokenKind::Punct("<") => depth += 1,
                    TokenKind::Punct(")") if depth == 0 => break,
                    TokenKind::Punct(")") | TokenKind::Punct(">") => depth -= 1,
                    TokenKind::Punct(";") => break,
                    TokenKind::Ident(w) if w == "in" && depth == 0 => {
                        found = true;
                        break;
                    }
                    _ => {}
                }
                k += 1;
            }
            found
        };
        if in_form {
            let ty = if self.is_at(1, "in") || (self.word_at(0).is_some() && self.is_word_at(1, "in")) {
                None
            } else {
                Some(self.ty()?)
            };
            let var = self.ident()?;
            self.expect_word("in")?;
            let range = self.simple_keyset()?;
            self.expect(")")?;
            let body = Box::new(self.stmt()?);
            return Ok(Stmt::ForIn {
                ty,
                var,
                range,
                body,
                pos,
            });
        }
        let mut init = Vec::new();
        while !self.is(";") {
            init.push(self.simple_stmt()?);
            if !self.eat(",") {
                break;
            }
        }
        self.expect(";")?;
        let cond = if self.is(";") { None } else { Some(self.expr()?) };
        self.expect(";")?;
        let mut update = Vec::new();
        while !self.is(")") {
            update.push(self.simple_stmt()?);
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        let body = Box::new(self.stmt()?);
        Ok(Stmt::For {
            init,
            cond,
            update,
            body,
            pos,
        })
    }

    /// A declaration, assignment or call without its `;` (a `for` loop's parts).
    fn simple_stmt(&mut self) -> PResult<Stmt> {
        let pos = self.pos();
        if self.declaration_ahead() {
            let ty = self.ty()?;
            let name = self.ident()?;
            let init = if self.eat("=") { Some(self.expr()?) } else { None };
            return Ok(Stmt::Var(Vec::new(), ty, name, init, pos));
        }
        let lhs = self.expr()?;
        if self.eat("=") {
            let rhs = self.expr()?;
            return Ok(Stmt::Assign(lhs, rhs, pos));
        }
        if let Some(op) = self.compound_op() {
            let rhs = self.expr()?;
            return Ok(Stmt::CompoundAssign(op, lhs, rhs, pos));
        }
        Ok(Stmt::Call(lhs, pos))
    }

    /// Whether a declaration starts here (a type then a name, or a type then `(` for an
    /// instance).
    fn declaration_ahead(&self) -> bool {
        let Some(w) = self.word_at(0) else {
            return self.is(".") && self.word_at(1).is_some_and(|w| self.is_type_name(w));
        };
        if TYPE_WORDS.contains(&w) {
            // `error.X` is an expression.
            return !(w == "error" && self.is_at(1, "."));
        }
        if !self.is_type_name(w) {
            return false;
        }
        // `T x`, `T<...> x`, `T[n] x`, `T(args) x`.
        match self.peek(1) {
            Some(TokenKind::Ident(_)) => true,
            Some(TokenKind::Punct("<")) | Some(TokenKind::Punct("(")) | Some(TokenKind::Punct("[")) => {
                let mut k = 1;
                let mut depth = 0;
                while let Some(t) = self.peek(k) {
                    match t {
                        TokenKind::Punct("<") | TokenKind::Punct("(") | TokenKind::Punct("[") => depth += 1,
                        TokenKind::Punct(">") | TokenKind::Punct(")") | TokenKind::Punct("]") => {
                            depth -= 1;
                            if depth == 0 {
                                let next = self.peek(k + 1);
                                return matches!(next, Some(TokenKind::Ident(_)))
                                    || (matches!(next, Some(TokenKind::Punct("("))) && !self.is_at(1, "("))
                                    || matches!(next, Some(TokenKind::Punct("["))) && self.is_at(1, "<");
                            }
                        }
                        TokenKind::Punct(";") => return false,
                        _ => {}
                    }
                    k += 1;
                }
                false
            }
            _ => false,
        }
    }

    fn instance_rest(&mut self, annotations: Vec<Annotation>, ty: Type, pos: Pos) -> PResult<Instance> {
        let args = self.args()?;
        let name = self.ident()?;
        let mut body = Vec::new();
        if self.eat("=") {
            self.expect("{")?;
            while !self.is("}") && !self.done() {
                let fa = self.annotations()?;
                let fpos = self.pos();
                let sig_pos = fpos;
                let ret = self.ty()?;
                let fname = self.ident()?;
                let type_params = self.type_params()?;
                let params = self.params()?;
                let fbody = self.block()?;
                body.push(FunctionDecl {
                    sig: Signature {
                        annotations: fa,
                        ret: Some(ret),
                        name: fname,
                        type_params,
                        params,
                        is_abstract: false,
                        pos: sig_pos,
                    },
                    body: fbody,
                });
            }
            self.expect("}")?;
        }
        self.expect(";")?;
        Ok(Instance {
            annotations,
            ty,
            args,
            name,
            body,
            pos,
        })
    }

    // ---- types ----

    fn close_angle(&mut self) -> PResult<()> {
        // `>>=` and `>=` never close a type argument list in valid programs.
        self.expect(">")
    }

    fn ty(&mut self) -> PResult<Type> {
        let pos = self.pos();
        let base = self.base_type(pos)?;
        let mut t = base;
        while self.is("[") {
            self.at += 1;
            let n = self.expr()?;
            self.expect("]")?;
            t = Type::Stack(Box::new(t), Box::new(n));
        }
        Ok(t)
    }

    fn base_type(&mut self, pos: Pos) -> PResult<Type> {
        if self.is("_") {
            self.at += 1;
            return Ok(Type::DontCare);
        }
        self.eat(".");
        let word = self.ident()?;
        Ok(match word.as_str() {
            "bit" | "int" | "varbit" => {
                let w = if self.eat("<") {
                    // Above the comparisons, so that `>` closes the width.
                    self.in_width += 1;
                    let w = self.binary(4);
                    self.in_width -= 1;
                    let w = w?;
                    self.close_angle()?;
                    Some(w)
                } else {
                    None
                };
                match (word.as_str(), w) {
                    ("bit", w) => Type::Bit(Box::new(w.unwrap_or(Expr {
                        kind: ExprKind::Int(super::lexer::IntLit { value: 1, width: None }),
                        pos,
                    }))),
                    ("int", Some(w)) => Type::Int(Box::new(w)),
                    ("int", None) => Type::InfInt,
                    (_, Some(w)) => Type::Varbit(Box::new(w)),
                    (_, None) => return self.error("varbit needs its maximum width: varbit<W>"),
                }
            }
            "bool" => Type::Bool,
            "error" => Type::Error,
            "string" => Type::String,
            "void" => Type::Void,
            "match_kind" => Type::MatchKind,
            "tuple" | "list" => {
                self.expect("<")?;
                let mut items = Vec::new();
                while !self.is(">") {
                    items.push(self.ty()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.close_angle()?;
                if word == "list" {
                    let [one] = <[Type; 1]>::try_from(items)
                        .map_err(|_| P4Error::new(self.map, pos, "list<T> takes one type"))?;
                    Type::List(Box::new(one))
                } else {
                    Type::Tuple(items)
                }
            }
            _ => {
                let mut args = Vec::new();
                if self.is("<") && self.type_args_ahead() {
                    self.at += 1;
                    while !self.is(">") {
                        args.push(self.ty()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.close_angle()?;
                }
                Type::Named(word, args, pos)
            }
        })
    }

    /// Whether a `<` here opens type arguments: a balanced `<...>` holding only what types
    /// are made of.
    fn type_args_ahead(&self) -> bool {
        let mut depth = 0;
        let mut k = 0;
        while let Some(t) = self.peek(k) {
            match t {
                TokenKind::Punct("<") => depth += 1,
                TokenKind::Punct(">") => {
                    depth -= 1;
                    if depth == 0 {
                        return true;
                    }
                }
                TokenKind::Punct(",") | TokenKind::Punct("_") | TokenKind::Punct("[") | TokenKind::Punct("]") => {}
                TokenKind::Punct("(") | TokenKind::Punct(")") | TokenKind::Punct(".") => {}
                TokenKind::Punct("+") | TokenKind::Punct("-") | TokenKind::Punct("*") => {}
                TokenKind::Ident(_) | TokenKind::Int(_) => {}
                _ => return false,
            }
            k += 1;
        }
        false
    }

    /// Whether a type starts here and what follows it is `)` (a cast `(T) e`).
    fn cast_ahead(&mut self) -> bool {
        let save = self.at;
        self.at += 1; // `(`
        let starts_type = match self.word_at(0) {
            Some(w) if TYPE_WORDS.contains(&w) => !(w == "error" && self.is_at(1, ".")),
            Some(w) => self.is_type_name(w) && !self.is_at(1, ".") && !self.is_at(1, "("),
            None => false,
        };
        let ok = starts_type && self.ty().is_ok() && self.is(")");
        self.at = save;
        ok
    }

    // ---- expressions ----

    fn args(&mut self) -> PResult<Vec<Arg>> {
        self.expect("(")?;
        let mut out = Vec::new();
        while !self.is(")") {
            let name = if self.word_at(0).is_some() && self.is_at(1, "=") && !self.is_at(1, "==") {
                let n = self.ident()?;
                self.at += 1;
                Some(n)
            } else {
                None
            };
            let value = if self.is("_") && (self.is_at(1, ",") || self.is_at(1, ")")) {
                let pos = self.pos();
                self.at += 1;
                Expr {
                    kind: ExprKind::DontCare,
                    pos,
                }
            } else {
                self.expr()?
            };
            out.push(Arg { name, value });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok(out)
    }

    fn expr(&mut self) -> PResult<Expr> {
        self.nest()?;
        let r = self.conditional();
        self.depth -= 1;
        r
    }

    fn conditional(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Cond(Box::new(c), Box::new(a), Box::new(b)),
                pos,
            });
        }
        Ok(c)
    }

    /// The binary operator at `level` (lowest first) here: the operator and its token count.
    fn binary_op(&self, level: usize) -> Option<(&'static str, usize)> {
        const LEVELS: &[&[&str]] = &[
            &["||"],
            &["&&"],
            &["==", "!="],
            &["<", ">", "<=", ">="],
            &["|"],
            &["^"],
            &["&"],
            &["<<", ">>"],
            &["++", "+", "-", "|+|", "|-|"],
            &["*", "/", "%"],
        ];
        let ops = LEVELS.get(level)?;
        if self.in_width > 0 && self.is(">") {
            return None;
        }
        // `>>` is two `>` written together; `> >` closes type arguments.
        if self.is(">") && self.is_at(1, ">") && self.adjacent(0) {
            return ops.contains(&">>").then_some((">>", 2));
        }
        if self.is(">") && self.is_at(1, ">=") && self.adjacent(0) {
            return None;
        }
        // `[lsb +: width]`: the `+` belongs to the slice.
        if self.is("+") && self.is_at(1, ":") {
            return None;
        }
        let Some(TokenKind::Punct(p)) = self.peek(0) else {
            return None;
        };
        ops.iter().find(|o| **o == *p).map(|o| (*o, 1))
    }

    fn binary(&mut self, level: usize) -> PResult<Expr> {
        if level >= 10 {
            return self.unary();
        }
        let pos = self.pos();
        let mut a = self.binary(level + 1)?;
        while let Some((op, n)) = self.binary_op(level) {
            self.at += n;
            let b = self.binary(level + 1)?;
            a = Expr {
                kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
                pos,
            };
        }
        Ok(a)
    }

    fn unary(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        for op in ["!", "~", "-", "+"] {
            if self.is(op) {
                self.at += 1;
                self.nest()?;
                let e = self.unary();
                self.depth -= 1;
                return Ok(Expr {
                    kind: ExprKind::Unary(op, Box::new(e?)),
                    pos,
                });
            }
        }
        if self.is("(") && self.cast_ahead() {
            self.at += 1;
            let t = self.ty()?;
            self.expect(")")?;
            self.nest()?;
            let e = self.unary();
            self.depth -= 1;
            return Ok(Expr {
                kind: ExprKind::Cast(t, Box::new(e?)),
                pos,
            });
        }
        self.postfix()
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        loop {
            let pos = self.pos();
            if self.is(".") {
                self.at += 1;
                let name = self.ident()?;
                e = Expr {
                    kind: ExprKind::Member(Box::new(e), name),
                    pos,
                };
            } else if self.is("[") {
                self.at += 1;
                let i = self.expr()?;
                if self.is("+") && self.is_at(1, ":") {
                    // `e[lsb +: width]` is `e[lsb + width - 1 : lsb]`.
                    self.at += 2;
                    let w = self.expr()?;
                    self.expect("]")?;
                    let one = Expr {
                        kind: ExprKind::Int(super::lexer::IntLit { value: 1, width: None }),
                        pos,
                    };
                    let hi = Expr {
                        kind: ExprKind::Binary(
                            "-",
                            Box::new(Expr {
                                kind: ExprKind::Binary("+", Box::new(i.clone()), Box::new(w)),
                                pos,
                            }),
                            Box::new(one),
                        ),
                        pos,
                    };
                    e = Expr {
                        kind: ExprKind::Slice(Box::new(e), Box::new(hi), Box::new(i)),
                        pos,
                    };
                } else if self.eat(":") {
                    let lo = self.expr()?;
                    self.expect("]")?;
                    e = Expr {
                        kind: ExprKind::Slice(Box::new(e), Box::new(i), Box::new(lo)),
                        pos,
                    };
                } else {
                    self.expect("]")?;
                    e = Expr {
                        kind: ExprKind::Index(Box::new(e), Box::new(i)),
                        pos,
                    };
                }
            } else if self.is("(") {
                let args = self.args()?;
                e = Expr {
                    kind: ExprKind::Call(Box::new(e), Vec::new(), args),
                    pos,
                };
            } else if self.is("<") && self.type_args_call_ahead() {
                self.at += 1;
                let mut targs = Vec::new();
                while !self.is(">") {
                    targs.push(self.ty()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.close_angle()?;
                if !self.is("(") {
                    // `T<args>` as a type in an expression, then a member (`S<T>.minSizeInBits()`).
                    let ExprKind::Name(n) = &e.kind else {
                        return self.error("`(` expected after type arguments");
                    };
                    e = Expr {
                        kind: ExprKind::Type(Type::Named(n.clone(), targs, e.pos)),
                        pos: e.pos,
                    };
                    continue;
                }
                let args = self.args()?;
                e = Expr {
                    kind: ExprKind::Call(Box::new(e), targs, args),
                    pos,
                };
            } else {
                return Ok(e);
            }
        }
    }

    /// Whether `<` here opens type arguments of a call: a balanced `<...>` of type words
    /// followed by `(` (or by `.` for a generic type's member).
    fn type_args_call_ahead(&self) -> bool {
        let mut depth = 0;
        let mut k = 0;
        while let Some(t) = self.peek(k) {
            match t {
                TokenKind::Punct("<") => depth += 1,
                TokenKind::Punct(">") => {
                    depth -= 1;
                    if depth == 0 {
                        return self.is_at(k + 1, "(") || self.is_at(k + 1, ".");
                    }
                }
                TokenKind::Punct(",") | TokenKind::Punct("_") | TokenKind::Punct("[") | TokenKind::Punct("]") => {}
                TokenKind::Ident(_) | TokenKind::Int(_) => {}
                _ => return false,
            }
            k += 1;
        }
        false
    }

    fn primary(&mut self) -> PResult<Expr> {
        let pos = self.pos();
        let Some(t) = self.peek(0).cloned() else {
            return self.error("an expression expected, found the end of the program");
        };
        let kind = match t {
            TokenKind::Int(i) => {
                self.at += 1;
                ExprKind::Int(i)
            }
            TokenKind::Str(s) => {
                self.at += 1;
                ExprKind::Str(s)
            }
            TokenKind::Punct("(") => {
                self.at += 1;
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            TokenKind::Punct("{") => return self.braced(pos),
            TokenKind::Punct(".") => {
                self.at += 1;
                ExprKind::Name(self.ident()?)
            }
            TokenKind::Punct("_") => {
                self.at += 1;
                ExprKind::DontCare
            }
            TokenKind::Ident(w) => match w.as_str() {
                "true" => {
                    self.at += 1;
                    ExprKind::Bool(true)
                }
                "false" => {
                    self.at += 1;
                    ExprKind::Bool(false)
                }
                "this" => {
                    self.at += 1;
                    ExprKind::This
                }
                "default" => {
                    self.at += 1;
                    ExprKind::Default
                }
                "bit" | "int" | "varbit" | "bool" | "string" | "tuple"
                    if !self.is_at(1, ".") || w == "bit" || w == "int" =>
                {
                    ExprKind::Type(self.ty()?)
                }
                _ => {
                    self.at += 1;
                    ExprKind::Name(w)
                }
            },
            _ => return self.error(format!("an expression expected, found {}", self.describe())),
        };
        Ok(Expr { kind, pos })
    }

    /// `{ a, b }`, `{ f = a, ... }`, `{#}` or `{}`.
    fn braced(&mut self, pos: Pos) -> PResult<Expr> {
        self.at += 1;
        if self.is("#") && self.is_at(1, "}") {
            self.at += 2;
            return Ok(Expr {
                kind: ExprKind::Invalid,
                pos,
            });
        }
        let record = self.word_at(0).is_some() && self.is_at(1, "=") || self.is("...") && self.is_at(1, "}");
        if record {
            let mut fields = Vec::new();
            let mut rest = false;
            while !self.is("}") {
                if self.eat("...") {
                    rest = true;
                    break;
                }
                let n = self.ident()?;
                self.expect("=")?;
                fields.push((n, self.expr()?));
                if !self.eat(",") {
                    break;
                }
            }
            self.expect("}")?;
            return Ok(Expr {
                kind: ExprKind::Record(fields, rest),
                pos,
            });
        }
        let mut items = Vec::new();
        while !self.is("}") {
            if self.eat("...") {
                break;
            }
            items.push(self.expr()?);
            if !self.eat(",") {
                break;
            }
        }
        self.expect("}")?;
        Ok(Expr {
            kind: ExprKind::List(items),
            pos,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::preprocess::preprocess_text;

    fn parse_text(text: &str) -> Result<Program, P4Errors> {
        let mut map = SourceMap::default();
        let tokens = preprocess_text("t.p4", None, text.to_owned(), &Default::default(), &mut map)?;
        parse(&tokens, &map)
    }

    #[test]
    fn bitwise_operators_bind_tighter_than_comparisons_as_in_p4() {
        let p = parse_text("const bool b = 1 & 2 == 2;").unwrap();
        let Decl::Const(c) = &p.decls[0] else { panic!() };
        let ExprKind::Binary(op, a, _) = &c.value.kind else {
            panic!()
        };
        assert_eq!(*op, "==");
        assert!(matches!(a.kind, ExprKind::Binary("&", _, _)));
    }

    #[test]
    fn every_syntax_error_of_a_program_is_reported() {
        let e = parse_text("const bit<8> a = ;\nconst bit<8> b = 1;\nheader h { bit<8> x }\nconst bit<8> c = (;\n")
            .unwrap_err();
        assert_eq!(e.0.len(), 3, "{e}");
        assert!(e.0[0].at.ends_with(":1:18"), "{e}");
        assert!(e.0[2].at.starts_with("t.p4:4"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_by_name_not_by_a_crash() {
        let text = format!("const bit<8> a = {}1{};", "(".repeat(20_000), ")".repeat(20_000));
        let e = parse_text(&text).unwrap_err();
        assert!(e.first().message.contains("nested more than"), "{e}");
    }

    #[test]
    fn shifts_written_as_two_angles_are_told_from_closing_type_arguments() {
        let p = parse_text("extern E<T> { E(); }\nconst bit<8> a = 8 >> 1;\nconst bit<8> b = 8 > > 1;").unwrap_err();
        assert_eq!(p.0.len(), 1, "only `> >` is wrong: {p}");
        parse_text("struct s<T> { T f; }\ntypedef s<bit<8>> t;").unwrap();
    }
}
