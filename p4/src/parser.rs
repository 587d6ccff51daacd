//! Recursive-descent parser from tokens to [`crate::ast`]. A construct outside the supported
//! subset is refused at its position with its name.

use std::collections::HashSet;

use crate::ast::*;
use crate::error::{P4Error, Result};
use crate::lexer::{Token, TokenKind};
use crate::source::{Pos, SourceMap};

/// Parses a preprocessed token stream.
pub fn parse(tokens: &[Token], map: &SourceMap) -> Result<Program> {
    let mut p = Parser {
        tokens,
        at: 0,
        map,
        types: HashSet::new(),
    };
    let mut decls = Vec::new();
    while !p.done() {
        if p.eat(";") {
            continue;
        }
        decls.push(p.decl()?);
    }
    Ok(Program { decls })
}

/// Words that start a type.
const TYPE_WORDS: &[&str] = &["bit", "int", "varbit", "bool", "error", "string", "void", "tuple"];

/// Keywords the subset does not have, with what to say.
const REFUSED: &[(&str, &str)] = &[
    ("value_set", "parser value sets are not supported"),
    ("header_union", "header unions are not supported yet"),
    ("abstract", "abstract extern methods are not supported"),
    ("list", "list types are not supported"),
    ("for", "for loops are not supported"),
];

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    map: &'a SourceMap,
    /// Names declared as types so far: tells `(T) e` (a cast) from `(e)`.
    types: HashSet<String>,
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

    fn error<T>(&self, message: impl Into<String>) -> Result<T> {
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
        matches!(self.peek(0), Some(TokenKind::Punct(q)) if *q == p)
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

    fn expect(&mut self, p: &str) -> Result<()> {
        if self.eat(p) {
            Ok(())
        } else {
            self.error(format!("`{p}` expected, found {}", self.describe()))
        }
    }

    fn expect_word(&mut self, w: &str) -> Result<()> {
        if self.eat_word(w) {
            Ok(())
        } else {
            self.error(format!("`{w}` expected, found {}", self.describe()))
        }
    }

    fn ident(&mut self) -> Result<String> {
        match self.peek(0) {
            Some(TokenKind::Ident(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => self.error(format!("a name expected, found {}", self.describe())),
        }
    }

    /// A `>` that closes a type argument list; `>>` lexes as two of them.
    fn close_angle(&mut self) -> Result<()> {
        self.expect(">")
    }

    fn annotations(&mut self) -> Result<Vec<Annotation>> {
        let mut out = Vec::new();
        while self.is("@") {
            let pos = self.pos();
            self.at += 1;
            let name = self.ident()?;
            let mut args = Vec::new();
            if self.is("(") {
                // Annotation bodies may hold anything; keep the expressions that parse.
                let start = self.at;
                self.at += 1;
                let mut ok = true;
                while !self.is(")") && !self.done() {
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
                if !ok || !self.is(")") {
                    self.at = start;
                    self.skip_balanced("(", ")")?;
                    args.clear();
                } else {
                    self.at += 1;
                }
            } else if self.is("[") {
                self.skip_balanced("[", "]")?;
            }
            out.push(Annotation { name, args, pos });
        }
        Ok(out)
    }

    fn skip_balanced(&mut self, open: &str, close: &str) -> Result<()> {
        let start = self.pos();
        let mut depth = 0;
        while !self.done() {
            if self.is(open) {
                depth += 1;
            } else if self.is(close) {
                depth -= 1;
                if depth == 0 {
                    self.at += 1;
                    return Ok(());
                }
            }
            self.at += 1;
        }
        Err(P4Error::new(
            self.map,
            start,
            format!("`{close}` expected to close `{open}`"),
        ))
    }

    fn refuse_unsupported(&self) -> Result<()> {
        if let Some(TokenKind::Ident(w)) = self.peek(0)
            && let Some((_, why)) = REFUSED.iter().find(|(k, _)| k == w)
        {
            return self.error(format!("`{w}`: {why}"));
        }
        Ok(())
    }

    // ---- Declarations ----

    fn decl(&mut self) -> Result<Decl> {
        let annotations = self.annotations()?;
        self.refuse_unsupported()?;
        let pos = self.pos();
        let word = match self.peek(0) {
            Some(TokenKind::Ident(w)) => w.clone(),
            _ => return self.error(format!("a declaration expected, found {}", self.describe())),
        };
        match word.as_str() {
            "const" => Ok(Decl::Const(self.const_decl(annotations)?)),
            "typedef" | "type" => {
                self.at += 1;
                let ty = self.ty()?;
                let name = self.ident()?;
                self.expect(";")?;
                self.types.insert(name.clone());
                Ok(Decl::Typedef { ty, name, pos })
            }
            "header" | "struct" => {
                self.at += 1;
                let kind = if word == "header" {
                    AggregateKind::Header
                } else {
                    AggregateKind::Struct
                };
                let name = self.ident()?;
                self.types.insert(name.clone());
                self.expect("{")?;
                let mut fields = Vec::new();
                while !self.eat("}") {
                    let annotations = self.annotations()?;
                    let pos = self.pos();
                    let ty = self.ty()?;
                    let fname = self.ident()?;
                    self.expect(";")?;
                    fields.push(Field {
                        annotations,
                        ty,
                        name: fname,
                        pos,
                    });
                }
                Ok(Decl::Aggregate(Aggregate {
                    kind,
                    annotations,
                    name,
                    fields,
                    pos,
                }))
            }
            "enum" => {
                self.at += 1;
                let underlying = if self.is_word("bit") || self.is_word("int") {
                    Some(self.ty()?)
                } else {
                    None
                };
                let name = self.ident()?;
                self.types.insert(name.clone());
                self.expect("{")?;
                let mut members = Vec::new();
                while !self.eat("}") {
                    let mpos = self.pos();
                    let m = self.ident()?;
                    let value = if self.eat("=") { Some(self.expr()?) } else { None };
                    members.push((m, value, mpos));
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                Ok(Decl::Enum(EnumDecl {
                    name,
                    underlying,
                    members,
                    pos,
                }))
            }
            "error" | "match_kind" if self.is_at(1, "{") => {
                self.at += 2;
                let mut names = Vec::new();
                while !self.eat("}") {
                    let p = self.pos();
                    names.push((self.ident()?, p));
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                Ok(if word == "error" {
                    Decl::Error(names)
                } else {
                    Decl::MatchKind(names)
                })
            }
            "extern" => self.extern_decl(annotations),
            "parser" => self.parser_decl(annotations),
            "control" => self.control_decl(annotations),
            "package" => {
                self.at += 1;
                let sig = self.signature_rest(annotations, None, pos)?;
                self.expect(";")?;
                self.types.insert(sig.name.clone());
                Ok(Decl::TypeDecl { kind: "package", sig })
            }
            "action" => Ok(Decl::Action(self.action(annotations)?)),
            _ => {
                let ty = self.ty()?;
                if self.is("(") {
                    let args = self.args()?;
                    let name = self.ident()?;
                    self.expect(";")?;
                    return Ok(Decl::Instance(Instance {
                        annotations,
                        ty,
                        args,
                        name,
                        pos,
                    }));
                }
                if matches!(self.peek(0), Some(TokenKind::Ident(_))) && self.is_at(1, "(") {
                    return self.error("functions are not supported: use an action");
                }
                self.error(format!("a declaration expected, found {}", self.describe()))
            }
        }
    }

    fn const_decl(&mut self, annotations: Vec<Annotation>) -> Result<ConstDecl> {
        let pos = self.pos();
        self.expect_word("const")?;
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

    fn type_params(&mut self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        if self.eat("<") {
            loop {
                let n = self.ident()?;
                self.types.insert(n.clone());
                out.push(n);
                if !self.eat(",") {
                    break;
                }
            }
            self.close_angle()?;
        }
        Ok(out)
    }

    /// After the keyword (and return type): `name<T>(params)`.
    fn signature_rest(&mut self, annotations: Vec<Annotation>, ret: Option<Type>, pos: Pos) -> Result<Signature> {
        let name = self.ident()?;
        let type_params = self.type_params()?;
        let params = self.params()?;
        Ok(Signature {
            annotations,
            ret,
            name,
            type_params,
            params,
            pos,
        })
    }

    fn extern_decl(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        let pos = self.pos();
        self.expect_word("extern")?;
        // `extern Name<T> {` is an object; anything else is a function.
        let object = matches!(self.peek(0), Some(TokenKind::Ident(_)))
            && (self.is_at(1, "{") || self.is_at(1, "<"))
            && !self.is_word("bit")
            && !self.is_word("int");
        if object {
            let name = self.ident()?;
            self.types.insert(name.clone());
            let type_params = self.type_params()?;
            self.expect("{")?;
            let mut methods = Vec::new();
            while !self.eat("}") {
                let annotations = self.annotations()?;
                self.refuse_unsupported()?;
                let mpos = self.pos();
                let sig = if self.is_word(&name) && self.is_at(1, "(") {
                    self.signature_rest(annotations, None, mpos)?
                } else {
                    let ret = self.ty()?;
                    self.signature_rest(annotations, Some(ret), mpos)?
                };
                self.expect(";")?;
                methods.push(sig);
            }
            return Ok(Decl::ExternObject {
                annotations,
                name,
                type_params,
                methods,
                pos,
            });
        }
        let ret = self.ty()?;
        let sig = self.signature_rest(annotations, Some(ret), pos)?;
        self.expect(";")?;
        Ok(Decl::ExternFunction(sig))
    }

    fn params(&mut self) -> Result<Vec<Param>> {
        self.expect("(")?;
        let mut out = Vec::new();
        while !self.eat(")") {
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
            out.push(Param {
                annotations,
                direction,
                ty,
                name,
                default,
                pos,
            });
            if !self.eat(",") {
                self.expect(")")?;
                break;
            }
        }
        Ok(out)
    }

    fn parser_decl(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        let pos = self.pos();
        self.expect_word("parser")?;
        let sig = self.signature_rest(annotations, None, pos)?;
        if self.eat(";") {
            self.types.insert(sig.name.clone());
            return Ok(Decl::TypeDecl { kind: "parser", sig });
        }
        if !sig.type_params.is_empty() {
            return self.error("a parser with type parameters is not supported");
        }
        if self.is("(") {
            return self.error("parser constructor parameters are not supported");
        }
        self.expect("{")?;
        let mut locals = Vec::new();
        let mut states = Vec::new();
        while !self.eat("}") {
            let ann = self.annotations()?;
            if self.is_word("state") {
                states.push(self.state(ann)?);
            } else {
                locals.push(self.stmt()?);
            }
        }
        Ok(Decl::Parser(ParserDecl {
            annotations: sig.annotations,
            name: sig.name,
            params: sig.params,
            locals,
            states,
            pos,
        }))
    }

    fn state(&mut self, annotations: Vec<Annotation>) -> Result<State> {
        let pos = self.pos();
        self.expect_word("state")?;
        let name = self.ident()?;
        self.expect("{")?;
        let mut body = Vec::new();
        while !self.is_word("transition") {
            if self.is("}") {
                // A state without transition rejects (P4_16 8.5).
                self.at += 1;
                return Ok(State {
                    annotations,
                    name,
                    body,
                    transition: Transition::Direct("reject".into(), pos),
                    pos,
                });
            }
            body.push(self.stmt()?);
        }
        let tpos = self.pos();
        self.at += 1;
        let transition = if self.eat_word("select") {
            self.expect("(")?;
            let mut on = Vec::new();
            while !self.eat(")") {
                on.push(self.expr()?);
                if !self.eat(",") {
                    self.expect(")")?;
                    break;
                }
            }
            self.expect("{")?;
            let mut cases = Vec::new();
            while !self.eat("}") {
                let cpos = self.pos();
                let keyset = self.keyset()?;
                self.expect(":")?;
                let target = self.ident()?;
                self.expect(";")?;
                cases.push((keyset, target, cpos));
            }
            Transition::Select { on, cases, pos: tpos }
        } else {
            let target = self.ident()?;
            self.expect(";")?;
            Transition::Direct(target, tpos)
        };
        self.expect("}")?;
        Ok(State {
            annotations,
            name,
            body,
            transition,
            pos,
        })
    }

    /// A select case's or an entry's keyset: a tuple `(a, b)` or one simple keyset.
    fn keyset(&mut self) -> Result<Expr> {
        let pos = self.pos();
        if self.is("(") && self.tuple_keyset_ahead() {
            self.at += 1;
            let mut items = Vec::new();
            while !self.eat(")") {
                items.push(self.simple_keyset()?);
                if !self.eat(",") {
                    self.expect(")")?;
                    break;
                }
            }
            return Ok(Expr {
                kind: ExprKind::List(items),
                pos,
            });
        }
        self.simple_keyset()
    }

    /// True when the `(` here opens a tuple of keysets (a comma at its top level).
    fn tuple_keyset_ahead(&self) -> bool {
        let mut depth = 0;
        for t in &self.tokens[self.at..] {
            match &t.kind {
                TokenKind::Punct("(") | TokenKind::Punct("[") | TokenKind::Punct("{") => depth += 1,
                TokenKind::Punct(")") | TokenKind::Punct("]") | TokenKind::Punct("}") => {
                    depth -= 1;
                    if depth == 0 {
                        return false;
                    }
                }
                TokenKind::Punct(",") if depth == 1 => return true,
                _ => {}
            }
        }
        false
    }

    fn simple_keyset(&mut self) -> Result<Expr> {
        let pos = self.pos();
        if self.eat_word("default") {
            return Ok(Expr {
                kind: ExprKind::Default,
                pos,
            });
        }
        if self.eat("_") {
            return Ok(Expr {
                kind: ExprKind::DontCare,
                pos,
            });
        }
        let a = self.expr()?;
        if self.eat("&&&") {
            let b = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Mask(Box::new(a), Box::new(b)),
                pos,
            });
        }
        if self.eat("..") {
            let b = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Range(Box::new(a), Box::new(b)),
                pos,
            });
        }
        Ok(a)
    }

    fn control_decl(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        let pos = self.pos();
        self.expect_word("control")?;
        let sig = self.signature_rest(annotations, None, pos)?;
        if self.eat(";") {
            self.types.insert(sig.name.clone());
            return Ok(Decl::TypeDecl { kind: "control", sig });
        }
        if !sig.type_params.is_empty() {
            return self.error("a control with type parameters is not supported");
        }
        if self.is("(") {
            return self.error("control constructor parameters are not supported");
        }
        self.expect("{")?;
        let mut locals = Vec::new();
        loop {
            let ann = self.annotations()?;
            if self.eat_word("apply") {
                break;
            }
            if self.is("}") || self.done() {
                return self.error("`apply { ... }` expected in the control");
            }
            if self.is_word("action") {
                locals.push(ControlLocal::Action(self.action(ann)?));
            } else if self.is_word("table") {
                locals.push(ControlLocal::Table(self.table(ann)?));
            } else {
                locals.push(ControlLocal::Stmt(self.stmt_with(ann)?));
            }
        }
        let apply = self.block()?;
        self.expect("}")?;
        Ok(Decl::Control(ControlDecl {
            annotations: sig.annotations,
            name: sig.name,
            params: sig.params,
            locals,
            apply,
            pos,
        }))
    }

    fn action(&mut self, annotations: Vec<Annotation>) -> Result<ActionDecl> {
        let pos = self.pos();
        self.expect_word("action")?;
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

    fn action_ref(&mut self) -> Result<ActionRef> {
        let annotations = self.annotations()?;
        let pos = self.pos();
        let name = self.ident()?;
        let args = if self.is("(") { self.args()? } else { Vec::new() };
        Ok(ActionRef {
            annotations,
            name,
            args,
            pos,
        })
    }

    fn table(&mut self, annotations: Vec<Annotation>) -> Result<TableDecl> {
        let pos = self.pos();
        self.expect_word("table")?;
        let name = self.ident()?;
        self.expect("{")?;
        let mut t = TableDecl {
            annotations,
            name,
            keys: Vec::new(),
            actions: Vec::new(),
            default_action: None,
            entries: Vec::new(),
            size: None,
            other: Vec::new(),
            pos,
        };
        while !self.eat("}") {
            let _ = self.annotations()?;
            let ppos = self.pos();
            let is_const = self.eat_word("const");
            let prop = self.ident()?;
            match prop.as_str() {
                "key" => {
                    self.expect("=")?;
                    self.expect("{")?;
                    while !self.eat("}") {
                        let kpos = self.pos();
                        let expr = self.expr()?;
                        self.expect(":")?;
                        let match_kind = self.ident()?;
                        let annotations = self.annotations()?;
                        self.expect(";")?;
                        t.keys.push(TableKey {
                            expr,
                            match_kind,
                            annotations,
                            pos: kpos,
                        });
                    }
                }
                "actions" => {
                    self.expect("=")?;
                    self.expect("{")?;
                    while !self.eat("}") {
                        t.actions.push(self.action_ref()?);
                        self.expect(";")?;
                    }
                }
                "default_action" => {
                    self.expect("=")?;
                    let a = self.action_ref()?;
                    self.expect(";")?;
                    t.default_action = Some((a, is_const));
                }
                "entries" => {
                    self.expect("=")?;
                    self.expect("{")?;
                    while !self.eat("}") {
                        let epos = self.pos();
                        if self.is_word("priority") {
                            return self.error("entry priorities (`priority =`) are not supported yet");
                        }
                        let keyset = self.keyset()?;
                        let keys = match keyset.kind {
                            ExprKind::List(items) => items,
                            _ => vec![keyset],
                        };
                        self.expect(":")?;
                        let action = self.action_ref()?;
                        self.expect(";")?;
                        t.entries.push(Entry {
                            keys,
                            action,
                            priority: None,
                            pos: epos,
                        });
                    }
                }
                "size" => {
                    self.expect("=")?;
                    t.size = Some(self.expr()?);
                    self.expect(";")?;
                }
                _ => {
                    self.expect("=")?;
                    let e = self.expr()?;
                    self.expect(";")?;
                    t.other.push((prop, e, ppos));
                }
            }
        }
        Ok(t)
    }

    // ---- Statements ----

    fn block(&mut self) -> Result<Vec<Stmt>> {
        self.expect("{")?;
        let mut out = Vec::new();
        while !self.eat("}") {
            if self.done() {
                return self.error("`}` expected before the end of the program");
            }
            out.push(self.stmt()?);
        }
        Ok(out)
    }

    fn stmt(&mut self) -> Result<Stmt> {
        let ann = self.annotations()?;
        self.stmt_with(ann)
    }

    fn stmt_with(&mut self, annotations: Vec<Annotation>) -> Result<Stmt> {
        self.refuse_unsupported()?;
        let pos = self.pos();
        if self.eat(";") {
            return Ok(Stmt::Empty(pos));
        }
        if self.is("{") {
            return Ok(Stmt::Block(self.block()?, pos));
        }
        if self.is_word("const") {
            return Ok(Stmt::Const(self.const_decl(annotations)?));
        }
        if self.eat_word("if") {
            self.expect("(")?;
            let c = self.expr()?;
            self.expect(")")?;
            let then = self.stmt()?;
            let els = if self.eat_word("else") {
                Some(Box::new(self.stmt()?))
            } else {
                None
            };
            return Ok(Stmt::If(c, Box::new(then), els, pos));
        }
        if self.eat_word("exit") {
            self.expect(";")?;
            return Ok(Stmt::Exit(pos));
        }
        if self.eat_word("return") {
            let e = if self.is(";") { None } else { Some(self.expr()?) };
            self.expect(";")?;
            return Ok(Stmt::Return(e, pos));
        }
        if self.eat_word("switch") {
            self.expect("(")?;
            let e = self.expr()?;
            self.expect(")")?;
            self.expect("{")?;
            let mut cases = Vec::new();
            while !self.eat("}") {
                let lpos = self.pos();
                let label = if self.eat_word("default") {
                    SwitchLabel::Default(lpos)
                } else {
                    SwitchLabel::Expr(self.expr()?)
                };
                self.expect(":")?;
                let body = if self.is("{") { Some(self.block()?) } else { None };
                cases.push((label, body));
            }
            return Ok(Stmt::Switch(e, cases, pos));
        }
        if self.declaration_ahead() {
            let ty = self.ty()?;
            if self.is("(") {
                let args = self.args()?;
                let name = self.ident()?;
                self.expect(";")?;
                return Ok(Stmt::Instance(Instance {
                    annotations,
                    ty,
                    args,
                    name,
                    pos,
                }));
            }
            let name = self.ident()?;
            let init = if self.eat("=") { Some(self.expr()?) } else { None };
            self.expect(";")?;
            return Ok(Stmt::Var(ty, name, init, pos));
        }
        let lhs = self.expr()?;
        if self.eat("=") {
            let rhs = self.expr()?;
            self.expect(";")?;
            return Ok(Stmt::Assign(lhs, rhs, pos));
        }
        for op in ["+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<="] {
            if self.is(op) {
                return self.error(format!(
                    "compound assignment `{op}` is not supported: write `x = x {} y`",
                    &op[..op.len() - 1]
                ));
            }
        }
        if !matches!(lhs.kind, ExprKind::Call(..)) {
            return self.error(format!("`=` or `;` after a call expected, found {}", self.describe()));
        }
        self.expect(";")?;
        Ok(Stmt::Call(lhs, pos))
    }

    /// True when a statement here declares a variable or an instance: it starts with a type
    /// word, or with a type name followed by a name, `<`, `[ ... ] name` or `(`.
    fn declaration_ahead(&self) -> bool {
        let Some(TokenKind::Ident(w)) = self.peek(0) else {
            return false;
        };
        if TYPE_WORDS.contains(&w.as_str()) {
            // `error.NoMatch` is an expression.
            return !(w == "error" && self.is_at(1, "."));
        }
        match self.peek(1) {
            Some(TokenKind::Ident(_)) => true,
            Some(TokenKind::Punct("<")) | Some(TokenKind::Punct("(")) => self.types.contains(w),
            Some(TokenKind::Punct("[")) => {
                // `h_t[4] stack;` declares; `x[3] = ...` assigns.
                self.types.contains(w)
            }
            _ => false,
        }
    }

    // ---- Types ----

    fn ty(&mut self) -> Result<Type> {
        let pos = self.pos();
        let word = self
            .ident()
            .map_err(|_| P4Error::new(self.map, pos, format!("a type expected, found {}", self.describe())))?;
        let base = match word.as_str() {
            "bit" | "int" | "varbit" => {
                if !self.eat("<") {
                    if word == "int" {
                        Type::InfInt
                    } else if word == "bit" {
                        Type::Bit(Box::new(Expr {
                            kind: ExprKind::Int(crate::lexer::IntLit { value: 1, width: None }),
                            pos,
                        }))
                    } else {
                        return self.error("varbit needs a width: varbit<W>");
                    }
                } else {
                    let w = self.primary()?;
                    self.close_angle()?;
                    match word.as_str() {
                        "bit" => Type::Bit(Box::new(w)),
                        "int" => Type::Int(Box::new(w)),
                        _ => Type::Varbit(Box::new(w)),
                    }
                }
            }
            "bool" => Type::Bool,
            "error" => Type::Error,
            "string" => Type::String,
            "void" => Type::Void,
            "tuple" => {
                self.expect("<")?;
                let mut items = Vec::new();
                loop {
                    items.push(self.ty()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.close_angle()?;
                Type::Tuple(items)
            }
            "_" => Type::DontCare,
            _ => {
                let mut args = Vec::new();
                if self.is("<") {
                    self.at += 1;
                    loop {
                        args.push(self.ty()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.close_angle()?;
                }
                Type::Named(word, args)
            }
        };
        if self.is("[") && !self.is_at(1, "]") {
            self.at += 1;
            let n = self.expr()?;
            self.expect("]")?;
            return Ok(Type::Stack(Box::new(base), Box::new(n)));
        }
        Ok(base)
    }

    // ---- Expressions ----

    fn args(&mut self) -> Result<Vec<Expr>> {
        self.expect("(")?;
        let mut out = Vec::new();
        while !self.eat(")") {
            if self.is("_") {
                let pos = self.pos();
                self.at += 1;
                out.push(Expr {
                    kind: ExprKind::DontCare,
                    pos,
                });
            } else {
                out.push(self.expr()?);
            }
            if !self.eat(",") {
                self.expect(")")?;
                break;
            }
        }
        Ok(out)
    }

    fn expr(&mut self) -> Result<Expr> {
        let c = self.binary(0)?;
        if self.is("?") {
            let pos = c.pos;
            self.at += 1;
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

    /// The binary operator here, if it binds at `level` (0 = loosest), and its token count.
    fn binary_op(&self, level: usize) -> Option<(&'static str, usize)> {
        const LEVELS: &[&[&str]] = &[
            &["||"],
            &["&&"],
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<", ">", "<=", ">="],
            &["<<", ">>"],
            &["++"],
            &["+", "-", "|+|", "|-|"],
            &["*", "/", "%"],
        ];
        let ops = LEVELS.get(level)?;
        let Some(TokenKind::Punct(p)) = self.peek(0) else {
            return None;
        };
        // `>>` is two adjacent `>` (so that `bit<8>>` closes two lists elsewhere).
        if *p == ">" && self.is_at(1, ">") && self.tokens[self.at].end == self.tokens[self.at + 1].start {
            return ops.contains(&">>").then_some((">>", 2));
        }
        ops.iter().find(|o| *o == p).map(|o| (*o, 1))
    }

    fn binary(&mut self, level: usize) -> Result<Expr> {
        if level > 10 {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        while let Some((op, n)) = self.binary_op(level) {
            self.at += n;
            let rhs = self.binary(level + 1)?;
            let pos = lhs.pos;
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                pos,
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr> {
        let pos = self.pos();
        for op in ["!", "~", "-", "+"] {
            if self.is(op) {
                self.at += 1;
                let e = self.unary()?;
                return Ok(Expr {
                    kind: ExprKind::Unary(op, Box::new(e)),
                    pos,
                });
            }
        }
        if self.is("(") && self.cast_ahead() {
            self.at += 1;
            let ty = self.ty()?;
            self.expect(")")?;
            let e = self.unary()?;
            return Ok(Expr {
                kind: ExprKind::Cast(ty, Box::new(e)),
                pos,
            });
        }
        self.postfix()
    }

    /// `(` followed by a type and `)`: a cast.
    fn cast_ahead(&self) -> bool {
        match self.peek(1) {
            Some(TokenKind::Ident(w)) if ["bit", "int", "varbit", "bool"].contains(&w.as_str()) => true,
            Some(TokenKind::Ident(w)) if self.types.contains(w) => self.is_at(2, ")") || self.is_at(2, "<"),
            _ => false,
        }
    }

    fn postfix(&mut self) -> Result<Expr> {
        let mut e = self.primary()?;
        loop {
            let pos = e.pos;
            if self.eat(".") {
                let name = self.ident()?;
                e = Expr {
                    kind: ExprKind::Member(Box::new(e), name),
                    pos,
                };
            } else if self.is("[") {
                self.at += 1;
                let i = self.expr()?;
                if self.eat(":") {
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
                let mut tys = Vec::new();
                loop {
                    tys.push(self.ty()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.close_angle()?;
                let args = self.args()?;
                e = Expr {
                    kind: ExprKind::Call(Box::new(e), tys, args),
                    pos,
                };
            } else {
                return Ok(e);
            }
        }
    }

    /// `f<bit<8>>(...)`: a `<` that opens type arguments of a call (its `>`s then `(`).
    fn type_args_call_ahead(&self) -> bool {
        let mut depth = 0;
        for (i, t) in self.tokens[self.at..].iter().enumerate() {
            match &t.kind {
                TokenKind::Punct("<") => depth += 1,
                TokenKind::Punct(">") => {
                    depth -= 1;
                    if depth == 0 {
                        return matches!(
                            self.tokens.get(self.at + i + 1).map(|t| &t.kind),
                            Some(TokenKind::Punct("("))
                        );
                    }
                }
                TokenKind::Ident(_) | TokenKind::Int(_) | TokenKind::Punct(",") => {}
                _ => return false,
            }
        }
        false
    }

    fn primary(&mut self) -> Result<Expr> {
        let pos = self.pos();
        let kind = match self.peek(0).cloned() {
            Some(TokenKind::Int(i)) => {
                self.at += 1;
                ExprKind::Int(i)
            }
            Some(TokenKind::Str(s)) => {
                self.at += 1;
                ExprKind::Str(s)
            }
            Some(TokenKind::Ident(w)) => match w.as_str() {
                "true" | "false" => {
                    self.at += 1;
                    ExprKind::Bool(w == "true")
                }
                "bit" | "int" | "varbit" | "bool" if self.is_at(1, "<") || w == "bool" => ExprKind::Type(self.ty()?),
                _ => {
                    self.at += 1;
                    ExprKind::Name(w)
                }
            },
            Some(TokenKind::Punct("(")) => {
                self.at += 1;
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            Some(TokenKind::Punct("{")) => {
                self.at += 1;
                let mut items = Vec::new();
                while !self.eat("}") {
                    items.push(self.expr()?);
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                ExprKind::List(items)
            }
            _ => return self.error(format!("an expression expected, found {}", self.describe())),
        };
        Ok(Expr { kind, pos })
    }
}
