//! What the control plane sees of a program, checked: the v1model pipeline `main` names, and
//! every table with its keys (expression, match kind, width) and actions (with their
//! control-plane parameters), named as P4Info names them (control plus local name, or `@name`).

use std::collections::HashMap;
use std::fmt;

use crate::ast::*;
use crate::error::{P4Error, Result};
use crate::source::{Pos, SourceMap};

/// Match kinds v1model knows.
const MATCH_KINDS: &[&str] = &["exact", "ternary", "lpm", "range", "optional", "selector"];

/// The six blocks of a V1Switch, in the package's order, with their parameters.
const V1SWITCH: [(&str, &str, &str); 6] = [
    (
        "parser",
        "Parser",
        "packet_in, out H, inout M, inout standard_metadata_t",
    ),
    ("control", "VerifyChecksum", "inout H, inout M"),
    ("control", "Ingress", "inout H, inout M, inout standard_metadata_t"),
    ("control", "Egress", "inout H, inout M, inout standard_metadata_t"),
    ("control", "ComputeChecksum", "inout H, inout M"),
    ("control", "Deparser", "packet_out, in H"),
];

/// A program's control-plane view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgramInfo {
    /// The blocks `main` names, in V1Switch order (parser, verify checksum, ingress, egress,
    /// compute checksum, deparser).
    pub pipeline: Vec<String>,
    /// The parser's states in order.
    pub states: Vec<String>,
    /// Tables of every control in the pipeline.
    pub tables: Vec<TableInfo>,
    /// Actions of every control in the pipeline, and top-level actions they use.
    pub actions: Vec<ActionInfo>,
}

/// A table as the control plane names it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    /// `Control.table`, or the `@name`.
    pub name: String,
    /// Keys in order.
    pub keys: Vec<KeyInfo>,
    /// Names of the actions it may run (control-plane names).
    pub actions: Vec<String>,
    /// The default action with its arguments as written, and whether it is `const`.
    pub default_action: Option<(String, bool)>,
    /// `size`, if given.
    pub size: Option<u128>,
    /// `const entries` in the program.
    pub const_entries: usize,
}

/// A table key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyInfo {
    /// The expression as written (`hdr.ipv4.dstAddr`), or the `@name`.
    pub name: String,
    /// Match kind.
    pub match_kind: String,
    /// Width in bits.
    pub bits: u32,
}

/// An action as the control plane names it.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionInfo {
    /// `Control.action`, the `@name`, or the plain name of a top-level action.
    pub name: String,
    /// Parameters the control plane supplies: name and width.
    pub params: Vec<(String, u32)>,
}

impl fmt::Display for ProgramInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "pipeline: {}", self.pipeline.join(", "))?;
        writeln!(f, "parser states: {}", self.states.join(", "))?;
        for t in &self.tables {
            write!(f, "table {}", t.name)?;
            if let Some(s) = t.size {
                write!(f, " (size {s})")?;
            }
            writeln!(f)?;
            for k in &t.keys {
                writeln!(f, "    key {}: {} ({} bits)", k.name, k.match_kind, k.bits)?;
            }
            for a in &t.actions {
                writeln!(f, "    action {a}")?;
            }
            if let Some((d, c)) = &t.default_action {
                writeln!(f, "    default {}{d}", if *c { "const " } else { "" })?;
            }
            if t.const_entries > 0 {
                writeln!(f, "    const entries: {}", t.const_entries)?;
            }
        }
        for a in &self.actions {
            let params: Vec<String> = a.params.iter().map(|(n, w)| format!("{n}: bit<{w}>")).collect();
            writeln!(f, "action {}({})", a.name, params.join(", "))?;
        }
        Ok(())
    }
}

/// Checks `program` and lists what its control plane sees.
pub fn check(program: &Program, map: &SourceMap) -> Result<ProgramInfo> {
    let mut c = Checker {
        map,
        typedefs: HashMap::new(),
        aggregates: HashMap::new(),
        consts: HashMap::new(),
        actions: HashMap::new(),
        blocks: HashMap::new(),
    };
    let mut main = None;
    for d in &program.decls {
        match d {
            Decl::Typedef { ty, name, .. } => {
                c.typedefs.insert(name.clone(), ty.clone());
            }
            Decl::Aggregate(a) => {
                c.aggregates.insert(a.name.clone(), a.clone());
            }
            Decl::Enum(e) => {
                if let Some(t) = &e.underlying {
                    c.typedefs.insert(e.name.clone(), t.clone());
                }
            }
            Decl::Const(k) => {
                c.consts.insert(k.name.clone(), k.value.clone());
            }
            Decl::Action(a) => {
                c.actions.insert(a.name.clone(), a.clone());
            }
            Decl::Parser(p) => {
                c.blocks.insert(p.name.clone(), ("parser", d));
            }
            Decl::Control(k) => {
                c.blocks.insert(k.name.clone(), ("control", d));
            }
            Decl::Instance(i) if i.name == "main" => main = Some(i),
            _ => {}
        }
    }
    let Some(main) = main else {
        let pos = program.decls.last().map(decl_pos).unwrap_or_default();
        return Err(P4Error::new(
            map,
            pos,
            "no `main`: a v1model program ends with `V1Switch(...) main;`",
        ));
    };
    c.pipeline(main)
}

/// "a" or "an" before `word`.
fn article(word: &str) -> &'static str {
    if word.starts_with(['A', 'E', 'I', 'O', 'U']) {
        "an"
    } else {
        "a"
    }
}

fn decl_pos(d: &Decl) -> Pos {
    match d {
        Decl::Const(k) => k.pos,
        Decl::Typedef { pos, .. } => *pos,
        Decl::Aggregate(a) => a.pos,
        Decl::Enum(e) => e.pos,
        Decl::Error(v) | Decl::MatchKind(v) => v.first().map(|x| x.1).unwrap_or_default(),
        Decl::ExternObject { pos, .. } => *pos,
        Decl::ExternFunction(s) => s.pos,
        Decl::TypeDecl { sig, .. } => sig.pos,
        Decl::Parser(p) => p.pos,
        Decl::Control(k) => k.pos,
        Decl::Action(a) => a.pos,
        Decl::Instance(i) => i.pos,
    }
}

struct Checker<'a> {
    map: &'a SourceMap,
    typedefs: HashMap<String, Type>,
    aggregates: HashMap<String, Aggregate>,
    consts: HashMap<String, Expr>,
    actions: HashMap<String, ActionDecl>,
    blocks: HashMap<String, (&'static str, &'a Decl)>,
}

/// The `@name` of a declaration, if it has one.
pub(crate) fn at_name(annotations: &[Annotation]) -> Option<String> {
    annotations
        .iter()
        .find(|a| a.name == "name")
        .and_then(|a| match a.args.first() {
            Some(Expr {
                kind: ExprKind::Str(s), ..
            }) => Some(s.trim_start_matches('.').to_owned()),
            _ => None,
        })
}

/// An expression as written, for key names.
pub(crate) fn text(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Member(b, n) => format!("{}.{n}", text(b)),
        ExprKind::Index(b, i) => format!("{}[{}]", text(b), text(i)),
        ExprKind::Slice(b, h, l) => format!("{}[{}:{}]", text(b), text(h), text(l)),
        ExprKind::Int(i) => i.value.to_string(),
        ExprKind::Call(f, _, args) => format!("{}({})", text(f), args.iter().map(text).collect::<Vec<_>>().join(", ")),
        _ => "<expression>".into(),
    }
}

impl Checker<'_> {
    fn err<T>(&self, pos: Pos, m: impl Into<String>) -> Result<T> {
        Err(P4Error::new(self.map, pos, m))
    }

    fn pipeline(&self, main: &Instance) -> Result<ProgramInfo> {
        let Type::Named(pkg, _) = &main.ty else {
            return self.err(main.pos, "`main` must be a V1Switch");
        };
        if pkg != "V1Switch" {
            return self.err(
                main.pos,
                format!("`main` is a `{pkg}`: intlab runs the v1model architecture (V1Switch) only"),
            );
        }
        if main.args.len() != 6 {
            return self.err(
                main.pos,
                format!("V1Switch takes 6 blocks (parser, verify checksum, ingress, egress, compute checksum, deparser), {} given", main.args.len()),
            );
        }
        let mut info = ProgramInfo::default();
        for (arg, (kind, role, params)) in main.args.iter().zip(V1SWITCH) {
            let name = match &arg.kind {
                ExprKind::Call(f, _, a) if a.is_empty() => match &f.kind {
                    ExprKind::Name(n) => n.clone(),
                    _ => return self.err(arg.pos, format!("the {role} block: `Name()` expected")),
                },
                _ => return self.err(arg.pos, format!("the {role} block: `Name()` expected")),
            };
            let Some((found, decl)) = self.blocks.get(&name) else {
                return self.err(arg.pos, format!("the {role} block `{name}` is not declared"));
            };
            if *found != kind {
                return self.err(
                    arg.pos,
                    format!("the {role} block must be a {kind}; `{name}` is a {found}"),
                );
            }
            let given = match decl {
                Decl::Parser(p) => p.params.len(),
                Decl::Control(k) => k.params.len(),
                _ => 0,
            };
            let want = params.split(", ").count();
            if given != want {
                return self.err(
                    arg.pos,
                    format!(
                        "`{name}` takes {given} parameters; {} {role} {kind} takes {want} ({params})",
                        article(role)
                    ),
                );
            }
            match decl {
                Decl::Parser(p) => {
                    info.states = p.states.iter().map(|s| s.name.clone()).collect();
                    self.check_parser(p)?;
                }
                Decl::Control(k) => self.control(k, &mut info)?,
                _ => {}
            }
            info.pipeline.push(name);
        }
        Ok(info)
    }

    fn check_parser(&self, p: &ParserDecl) -> Result<()> {
        if !p.states.iter().any(|s| s.name == "start") {
            return self.err(p.pos, format!("parser `{}` has no `start` state", p.name));
        }
        for s in &p.states {
            let targets: Vec<(&String, Pos)> = match &s.transition {
                Transition::Direct(t, pos) => vec![(t, *pos)],
                Transition::Select { cases, .. } => cases.iter().map(|(_, t, pos)| (t, *pos)).collect(),
            };
            for (t, pos) in targets {
                if t != "accept" && t != "reject" && !p.states.iter().any(|x| &x.name == t) {
                    return self.err(pos, format!("state `{t}` is not declared in parser `{}`", p.name));
                }
            }
        }
        Ok(())
    }

    fn control(&self, k: &ControlDecl, info: &mut ProgramInfo) -> Result<()> {
        let mut actions: HashMap<&str, &ActionDecl> = HashMap::new();
        for l in &k.locals {
            if let ControlLocal::Action(a) = l {
                actions.insert(&a.name, a);
                if !info.actions.iter().any(|x| x.name == self.action_name(k, a, false)) {
                    info.actions.push(ActionInfo {
                        name: self.action_name(k, a, false),
                        params: self.cp_params(a)?,
                    });
                }
            }
        }
        for l in &k.locals {
            let ControlLocal::Table(t) = l else { continue };
            let mut keys = Vec::new();
            for key in &t.keys {
                if !MATCH_KINDS.contains(&key.match_kind.as_str()) {
                    return self.err(
                        key.pos,
                        format!(
                            "unknown match kind `{}`: expected one of {}",
                            key.match_kind,
                            MATCH_KINDS.join(", ")
                        ),
                    );
                }
                let bits = self.width_of(&key.expr, k)?;
                keys.push(KeyInfo {
                    name: at_name(&key.annotations).unwrap_or_else(|| text(&key.expr)),
                    match_kind: key.match_kind.clone(),
                    bits,
                });
            }
            let mut names = Vec::new();
            for r in &t.actions {
                let (name, decl) = self.resolve_action(k, &actions, r)?;
                if decl.params.iter().any(|p| p.direction != Direction::None) && r.args.is_empty() {
                    return self.err(
                        r.pos,
                        format!("action `{}` has directional parameters: bind them here", r.name),
                    );
                }
                if !info.actions.iter().any(|x| x.name == name) {
                    info.actions.push(ActionInfo {
                        name: name.clone(),
                        params: self.cp_params(decl)?,
                    });
                }
                names.push(name);
            }
            let default_action = match &t.default_action {
                Some((r, is_const)) => {
                    let (name, decl) = self.resolve_action(k, &actions, r)?;
                    if !t.actions.iter().any(|a| a.name == r.name) {
                        return self.err(
                            r.pos,
                            format!("default action `{}` is not in the table's actions", r.name),
                        );
                    }
                    let want = decl.params.iter().filter(|p| p.direction == Direction::None).count();
                    if r.args.len() != want {
                        return self.err(
                            r.pos,
                            format!(
                                "default action `{}` takes {want} arguments, {} given",
                                r.name,
                                r.args.len()
                            ),
                        );
                    }
                    Some((
                        format!("{name}({})", r.args.iter().map(text).collect::<Vec<_>>().join(", ")),
                        *is_const,
                    ))
                }
                None => None,
            };
            for e in &t.entries {
                if e.keys.len() != t.keys.len() {
                    return self.err(
                        e.pos,
                        format!(
                            "entry has {} keys; table `{}` has {}",
                            e.keys.len(),
                            t.name,
                            t.keys.len()
                        ),
                    );
                }
                let (_, decl) = self.resolve_action(k, &actions, &e.action)?;
                let want = decl.params.iter().filter(|p| p.direction == Direction::None).count();
                if e.action.args.len() != want {
                    return self.err(
                        e.action.pos,
                        format!(
                            "action `{}` takes {want} arguments, {} given",
                            e.action.name,
                            e.action.args.len()
                        ),
                    );
                }
            }
            let size = match &t.size {
                Some(e) => Some(self.eval(e)?),
                None => None,
            };
            info.tables.push(TableInfo {
                name: at_name(&t.annotations).unwrap_or_else(|| format!("{}.{}", k.name, t.name)),
                keys,
                actions: names,
                default_action,
                size,
                const_entries: t.entries.len(),
            });
        }
        Ok(())
    }

    fn action_name(&self, k: &ControlDecl, a: &ActionDecl, top: bool) -> String {
        at_name(&a.annotations).unwrap_or_else(|| {
            if top {
                a.name.clone()
            } else {
                format!("{}.{}", k.name, a.name)
            }
        })
    }

    fn resolve_action<'b>(
        &'b self,
        k: &ControlDecl,
        local: &HashMap<&str, &'b ActionDecl>,
        r: &ActionRef,
    ) -> Result<(String, &'b ActionDecl)> {
        if let Some(a) = local.get(r.name.as_str()) {
            return Ok((self.action_name(k, a, false), a));
        }
        if let Some(a) = self.actions.get(&r.name) {
            return Ok((self.action_name(k, a, true), a));
        }
        self.err(r.pos, format!("action `{}` is not declared", r.name))
    }

    /// The parameters the control plane gives an action: the directionless ones.
    fn cp_params(&self, a: &ActionDecl) -> Result<Vec<(String, u32)>> {
        a.params
            .iter()
            .filter(|p| p.direction == Direction::None)
            .map(|p| Ok((p.name.clone(), self.type_width(&p.ty, p.pos)?)))
            .collect()
    }

    /// A compile-time integer.
    fn eval(&self, e: &Expr) -> Result<u128> {
        match &e.kind {
            ExprKind::Int(i) => Ok(i.value),
            ExprKind::Name(n) => match self.consts.get(n) {
                Some(v) => self.eval(v),
                None => self.err(e.pos, format!("`{n}` is not a constant")),
            },
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                Ok(match *op {
                    "+" => a.wrapping_add(b),
                    "-" => a.wrapping_sub(b),
                    "*" => a.wrapping_mul(b),
                    "<<" => a.checked_shl(b as u32).unwrap_or(0),
                    ">>" => a.checked_shr(b as u32).unwrap_or(0),
                    "/" if b != 0 => a / b,
                    _ => return self.err(e.pos, format!("`{op}` is not supported in a constant")),
                })
            }
            _ => self.err(e.pos, "a constant integer expected"),
        }
    }

    fn type_width(&self, ty: &Type, pos: Pos) -> Result<u32> {
        match ty {
            Type::Bit(w) | Type::Int(w) => Ok(self.eval(w)? as u32),
            Type::Bool => Ok(1),
            Type::Named(n, _) => match self.typedefs.get(n) {
                Some(t) => self.type_width(t, pos),
                None => self.err(pos, format!("`{n}` is not a bit type: a key or action parameter must be bit<W>, int<W>, bool or a typedef of them")),
            },
            _ => self.err(pos, "a key or action parameter must be bit<W>, int<W>, bool or a typedef of them"),
        }
    }

    /// The type of a struct or header path, for key widths.
    fn type_of(&self, e: &Expr, k: &ControlDecl) -> Result<Type> {
        match &e.kind {
            ExprKind::Name(n) => match k.params.iter().find(|p| &p.name == n) {
                Some(p) => Ok(p.ty.clone()),
                None => {
                    for l in &k.locals {
                        if let ControlLocal::Stmt(Stmt::Var(ty, name, _, _)) = l
                            && name == n
                        {
                            return Ok(ty.clone());
                        }
                    }
                    self.err(
                        e.pos,
                        format!("`{n}` is not a parameter or variable of control `{}`", k.name),
                    )
                }
            },
            ExprKind::Member(b, field) => {
                let bt = self.resolve(self.type_of(b, k)?);
                let Type::Named(agg, _) = &bt else {
                    return self.err(e.pos, format!("`{}` has no fields", text(b)));
                };
                match self
                    .aggregates
                    .get(agg)
                    .and_then(|a| a.fields.iter().find(|f| &f.name == field))
                {
                    Some(f) => Ok(f.ty.clone()),
                    None => self.err(e.pos, format!("`{agg}` has no field `{field}`")),
                }
            }
            ExprKind::Index(b, _) => match self.resolve(self.type_of(b, k)?) {
                Type::Stack(t, _) => Ok(*t),
                _ => self.err(e.pos, format!("`{}` is not a header stack", text(b))),
            },
            ExprKind::Slice(_, hi, lo) => {
                let w = self.eval(hi)? as i128 - self.eval(lo)? as i128 + 1;
                if w <= 0 {
                    return self.err(e.pos, "a slice [hi:lo] needs hi >= lo");
                }
                Ok(Type::Bit(Box::new(Expr {
                    kind: ExprKind::Int(crate::lexer::IntLit {
                        value: w as u128,
                        width: None,
                    }),
                    pos: e.pos,
                })))
            }
            ExprKind::Call(f, _, args)
                if args.is_empty() && matches!(&f.kind, ExprKind::Member(_, m) if m == "isValid") =>
            {
                Ok(Type::Bool)
            }
            _ => self.err(e.pos, "a table key must be a field, a slice of one, or isValid()"),
        }
    }

    fn resolve(&self, t: Type) -> Type {
        match &t {
            Type::Named(n, _) if self.typedefs.contains_key(n) => self.resolve(self.typedefs[n].clone()),
            _ => t,
        }
    }

    fn width_of(&self, e: &Expr, k: &ControlDecl) -> Result<u32> {
        let t = self.type_of(e, k)?;
        self.type_width(&t, e.pos)
    }
}
