//! Lowering of a checked program to [`crate::ir`]: types get slot layouts, names get slots,
//! tables, actions and extern instances. What the execution engine does not run is refused here
//! with its position, so a program never runs partially.

mod expr;
mod stmt;
mod table;

use std::collections::HashMap;

use crate::ast::{self, AggregateKind, ControlLocal, Decl, Direction, ExprKind, Stmt, Type};
use crate::error::{P4Error, Result};
use crate::info::at_name;
use crate::ir::{self, Slot};
use crate::source::{Pos, SourceMap};

/// A type as the lowering sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    /// `bit<W>` (false) or `int<W>` (true).
    Bits(u16, bool),
    /// `bool`.
    Bool,
    /// An integer literal without a width.
    Int,
    /// `error`.
    Error,
    /// A non-serializable enum (values are member indices).
    Enum(String),
    /// A header type (index into the program's header types).
    Header(usize),
    /// A struct type.
    Struct(String),
    /// A stack of headers.
    Stack(usize, u32),
    /// A string literal.
    Str,
}

impl Ty {
    /// Width of a scalar.
    fn width(&self) -> Option<u16> {
        match self {
            Ty::Bits(w, _) => Some(*w),
            Ty::Bool => Some(1),
            Ty::Error | Ty::Enum(_) => Some(32),
            _ => None,
        }
    }

    fn signed(&self) -> bool {
        matches!(self, Ty::Bits(_, true))
    }
}

/// What a name stands for.
#[derive(Debug, Clone)]
enum Binding {
    /// A value in slots.
    Var(Slot, Ty),
    /// A compile-time constant.
    Const(u128, Ty),
    /// `packet_in` or `packet_out`.
    Packet,
    /// A table.
    Table(usize),
    /// An action.
    Action(usize),
    /// A register.
    Register(usize),
    /// An indexed counter.
    Counter(usize),
    /// A direct counter (counted by its table on a hit).
    DirectCounter,
    /// intlab's metadata extern.
    Intlab,
}

/// Everything the lowering knows while it walks the program.
struct Lowerer<'a> {
    map: &'a SourceMap,
    typedefs: HashMap<String, ast::Type>,
    aggregates: HashMap<String, &'a ast::Aggregate>,
    header_ids: HashMap<String, usize>,
    enums: HashMap<String, (HashMap<String, u128>, Option<Ty>)>,
    top_actions: HashMap<String, &'a ast::ActionDecl>,
    /// Actions lowered so far, by (control, name); top-level ones under control "".
    action_ids: HashMap<(String, String), usize>,
    /// Scopes, innermost last.
    scopes: Vec<HashMap<String, Binding>>,
    /// The control being lowered (for control-plane names).
    control: String,
    /// The name of the program's egress control.
    egress: String,
    /// Slots of the pipeline's shared `hdr`, `meta` and `standard_metadata`.
    shared: [(Slot, Ty); 3],
    out: ir::Program,
}

/// Lowers `program` (already checked by [`crate::info::check`]).
pub fn lower(program: &ast::Program, map: &SourceMap) -> Result<ir::Program> {
    let mut l = Lowerer {
        map,
        typedefs: HashMap::new(),
        aggregates: HashMap::new(),
        header_ids: HashMap::new(),
        enums: HashMap::new(),
        top_actions: HashMap::new(),
        action_ids: HashMap::new(),
        scopes: vec![HashMap::new()],
        control: String::new(),
        egress: String::new(),
        shared: [(0, Ty::Bool), (0, Ty::Bool), (0, Ty::Bool)],
        out: ir::Program::default(),
    };
    l.declarations(program)?;
    l.pipeline(program)?;
    Ok(l.out)
}

impl<'a> Lowerer<'a> {
    fn err<T>(&self, pos: Pos, m: impl Into<String>) -> Result<T> {
        Err(P4Error::new(self.map, pos, m))
    }

    /// Whether the statements being lowered belong to the egress control.
    fn in_egress(&self) -> bool {
        !self.egress.is_empty() && self.control == self.egress
    }

    fn declarations(&mut self, program: &'a ast::Program) -> Result<()> {
        for d in &program.decls {
            match d {
                Decl::Typedef { ty, name, .. } => {
                    self.typedefs.insert(name.clone(), ty.clone());
                }
                Decl::Aggregate(a) => {
                    if a.kind == AggregateKind::HeaderUnion {
                        return self.err(a.pos, format!("header_union `{}` is not supported", a.name));
                    }
                    self.aggregates.insert(a.name.clone(), a);
                }
                Decl::Enum(e) => {
                    let underlying = match &e.underlying {
                        Some(t) => Some(self.ty(t, e.pos)?),
                        None => None,
                    };
                    let mut members = HashMap::new();
                    for (i, (name, value, pos)) in e.members.iter().enumerate() {
                        let v = match value {
                            Some(v) => self.constant(v)?.0,
                            None if underlying.is_some() => {
                                return self.err(*pos, format!("member `{name}` of a serializable enum needs a value"));
                            }
                            None => i as u128,
                        };
                        members.insert(name.clone(), v);
                    }
                    self.enums.insert(e.name.clone(), (members, underlying));
                }
                Decl::Error(names) => {
                    for (n, _) in names {
                        if !self.out.errors.contains(n) {
                            self.out.errors.push(n.clone());
                        }
                    }
                }
                Decl::Const(k) => {
                    let ty = self.ty(&k.ty, k.pos)?;
                    let (v, _) = self.typed_constant(&k.value, &ty)?;
                    self.scopes[0].insert(k.name.clone(), Binding::Const(v, ty));
                }
                Decl::Action(a) => {
                    self.top_actions.insert(a.name.clone(), a);
                }
                _ => {}
            }
        }
        // Header types get their ids once every typedef is known.
        for d in &program.decls {
            if let Decl::Aggregate(a) = d
                && a.kind == AggregateKind::Header
            {
                let mut fields = Vec::new();
                for f in &a.fields {
                    match self.ty(&f.ty, f.pos)? {
                        Ty::Bits(w, _) => fields.push((f.name.clone(), w)),
                        Ty::Bool => fields.push((f.name.clone(), 1)),
                        _ => {
                            return self.err(
                                f.pos,
                                format!("field `{}` of header `{}`: a header field must be bit<W>, int<W> or bool (varbit is not supported)", f.name, a.name),
                            );
                        }
                    }
                }
                let bits: u32 = fields.iter().map(|f| u32::from(f.1)).sum();
                if !bits.is_multiple_of(8) {
                    return self.err(
                        a.pos,
                        format!(
                            "header `{}` is {bits} bits: a header is a whole number of bytes",
                            a.name
                        ),
                    );
                }
                self.header_ids.insert(a.name.clone(), self.out.headers.len());
                self.out.headers.push(ir::HeaderType {
                    name: a.name.clone(),
                    fields,
                });
            }
        }
        Ok(())
    }

    /// The lowering's type of an AST type.
    fn ty(&self, t: &Type, pos: Pos) -> Result<Ty> {
        Ok(match t {
            Type::Bit(w) | Type::Int(w) => {
                let w = self.constant(w)?.0;
                if w == 0 || w > 128 {
                    return self.err(pos, format!("width {w}: intlab runs widths of 1 to 128 bits"));
                }
                Ty::Bits(w as u16, matches!(t, Type::Int(_)))
            }
            Type::Bool => Ty::Bool,
            Type::Error => Ty::Error,
            Type::String => Ty::Str,
            Type::Varbit(_) => return self.err(pos, "varbit is not supported"),
            Type::Stack(e, n) => {
                let Ty::Header(h) = self.ty(e, pos)? else {
                    return self.err(pos, "a stack holds headers");
                };
                Ty::Stack(h, self.constant(n)?.0 as u32)
            }
            Type::Named(n, _) => {
                if let Some(t) = self.typedefs.get(n) {
                    return self.ty(t, pos);
                }
                if let Some(&h) = self.header_ids.get(n) {
                    return Ok(Ty::Header(h));
                }
                if let Some(a) = self.aggregates.get(n) {
                    return Ok(match a.kind {
                        AggregateKind::Struct => Ty::Struct(n.clone()),
                        // During declarations, before header ids exist.
                        _ => return self.err(pos, format!("header `{n}` used before its declaration")),
                    });
                }
                if let Some((_, u)) = self.enums.get(n) {
                    return Ok(u.clone().unwrap_or(Ty::Enum(n.clone())));
                }
                return self.err(pos, format!("type `{n}` is not declared"));
            }
            other => return self.err(pos, format!("type {other:?} is not supported here")),
        })
    }

    /// Slots a value of `ty` takes.
    fn size(&self, ty: &Ty) -> u32 {
        match ty {
            Ty::Header(h) => self.out.headers[*h].stride(),
            Ty::Stack(h, n) => 1 + n * self.out.headers[*h].stride(),
            Ty::Struct(s) => self.aggregates[s]
                .fields
                .iter()
                .map(|f| self.ty(&f.ty, f.pos).map(|t| self.size(&t)).unwrap_or(1))
                .sum(),
            _ => 1,
        }
    }

    fn alloc(&mut self, ty: &Ty) -> Slot {
        let s = self.out.slots as Slot;
        self.out.slots += self.size(ty) as usize;
        s
    }

    fn bind(&mut self, name: &str, b: Binding) {
        self.scopes.last_mut().expect("a scope").insert(name.to_owned(), b);
    }

    fn lookup(&self, name: &str) -> Option<&Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// The V1Switch blocks, in order, with the shared `hdr`, `meta` and `standard_metadata`.
    fn pipeline(&mut self, program: &'a ast::Program) -> Result<()> {
        let main = program
            .decls
            .iter()
            .find_map(|d| match d {
                Decl::Instance(i) if i.name == "main" => Some(i),
                _ => None,
            })
            .expect("checked: main exists");
        let blocks: Vec<&Decl> = main
            .args
            .iter()
            .map(|a| {
                let ExprKind::Call(f, _, _) = &a.kind else {
                    unreachable!("checked")
                };
                let ExprKind::Name(n) = &f.kind else {
                    unreachable!("checked")
                };
                program
                    .decls
                    .iter()
                    .find(|d| {
                        matches!(d, Decl::Parser(p) if &p.name == n) || matches!(d, Decl::Control(k) if &k.name == n)
                    })
                    .expect("checked: blocks exist")
            })
            .collect();
        let Decl::Parser(parser) = blocks[0] else {
            unreachable!("checked")
        };
        if let Decl::Control(k) = blocks[3] {
            self.egress = k.name.clone();
        }
        let hdr = self.ty(&parser.params[1].ty, parser.params[1].pos)?;
        let meta = self.ty(&parser.params[2].ty, parser.params[2].pos)?;
        let std = self.ty(&parser.params[3].ty, parser.params[3].pos)?;
        let (h, m, s) = (self.alloc(&hdr), self.alloc(&meta), self.alloc(&std));
        self.out.field_lists = self.field_lists(m, &meta)?;
        self.shared = [(h, hdr), (m, meta), (s, std.clone())];
        self.out.std = self.std_slots(s, &std, parser.params[3].pos)?;
        self.parser(parser)?;
        let mut bodies = Vec::new();
        for (i, b) in blocks[1..].iter().enumerate() {
            let Decl::Control(k) = b else { unreachable!("checked") };
            // verify, ingress, egress, compute take (hdr, meta[, std]); the deparser (packet, hdr).
            let shared: &[usize] = if i == 4 { &[0] } else { &[0, 1, 2] };
            bodies.push(self.control_block(k, i == 4, shared)?);
        }
        let [verify, ingress, egress, compute, deparser] = <[Vec<ir::Op>; 5]>::try_from(bodies).expect("five controls");
        self.out.verify = verify;
        self.out.ingress = ingress;
        self.out.egress = egress;
        self.out.compute = compute;
        self.out.deparser = deparser;
        Ok(())
    }

    /// The user metadata fields each `@field_list(N, ...)` index names (what a clone keeps).
    fn field_lists(&self, base: Slot, meta: &Ty) -> Result<Vec<ir::FieldList>> {
        let mut lists: Vec<ir::FieldList> = Vec::new();
        let Ty::Struct(name) = meta else { return Ok(lists) };
        let mut off = 0;
        for f in &self.aggregates[name].fields {
            let size = self.size(&self.ty(&f.ty, f.pos)?);
            for a in f.annotations.iter().filter(|a| a.name == "field_list") {
                for arg in &a.args {
                    let (n, _) = self.constant(arg)?;
                    match lists.iter_mut().find(|l| l.index == n) {
                        Some(l) => l.fields.push((base + off, size)),
                        None => lists.push(ir::FieldList {
                            index: n,
                            fields: vec![(base + off, size)],
                        }),
                    }
                }
            }
            off += size;
        }
        Ok(lists)
    }

    fn std_slots(&self, base: Slot, std: &Ty, pos: Pos) -> Result<ir::StdSlots> {
        let Ty::Struct(name) = std else {
            return self.err(pos, "standard_metadata must be standard_metadata_t");
        };
        let field = |n: &str| -> Result<Slot> {
            match self.field_offset(name, n) {
                Some((off, _)) => Ok(base + off),
                None => self.err(pos, format!("standard_metadata_t has no `{n}`")),
            }
        };
        Ok(ir::StdSlots {
            ingress_port: field("ingress_port")?,
            egress_spec: field("egress_spec")?,
            egress_port: field("egress_port")?,
            instance_type: field("instance_type")?,
            packet_length: field("packet_length")?,
            enq_timestamp: field("enq_timestamp")?,
            enq_qdepth: field("enq_qdepth")?,
            deq_timedelta: field("deq_timedelta")?,
            deq_qdepth: field("deq_qdepth")?,
            ingress_global_timestamp: field("ingress_global_timestamp")?,
            egress_global_timestamp: field("egress_global_timestamp")?,
            mcast_grp: field("mcast_grp")?,
            egress_rid: field("egress_rid")?,
            checksum_error: field("checksum_error")?,
            parser_error: field("parser_error")?,
        })
    }

    /// Offset (in slots) and type of member `field` of struct `name`.
    fn field_offset(&self, name: &str, field: &str) -> Option<(Slot, Ty)> {
        let mut off = 0;
        for f in &self.aggregates.get(name)?.fields {
            let t = self.ty(&f.ty, f.pos).ok()?;
            if f.name == field {
                return Some((off, t));
            }
            off += self.size(&t);
        }
        None
    }

    /// Binds a block's parameters: the packet, and the shared values by position.
    fn bind_params(&mut self, params: &[ast::Param], shared: &[usize]) {
        let mut next = shared.iter();
        for p in params {
            let is_packet = matches!(&p.ty, Type::Named(n, _) if n == "packet_in" || n == "packet_out");
            if is_packet {
                self.bind(&p.name, Binding::Packet);
            } else if let Some(&i) = next.next() {
                let (slot, ty) = self.shared[i].clone();
                self.bind(&p.name, Binding::Var(slot, ty));
            }
        }
    }

    fn parser(&mut self, p: &'a ast::ParserDecl) -> Result<()> {
        self.scopes.push(HashMap::new());
        self.control = p.name.clone();
        self.bind_params(&p.params, &[0, 1, 2]);
        let mut locals = Vec::new();
        for s in &p.locals {
            self.stmt(s, &mut locals)?;
        }
        // `start` first, the others in order, so that targets are indices.
        let mut order: Vec<&ast::State> = p.states.iter().filter(|s| s.name == "start").collect();
        order.extend(p.states.iter().filter(|s| s.name != "start"));
        let index: HashMap<&str, usize> = order.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
        for (i, s) in order.iter().enumerate() {
            let mut ops = if i == 0 {
                std::mem::take(&mut locals)
            } else {
                Vec::new()
            };
            for st in &s.body {
                self.stmt(st, &mut ops)?;
            }
            let target = |name: &str| match name {
                "accept" => ir::Target::Accept,
                "reject" => ir::Target::Reject,
                n => ir::Target::State(index[n]),
            };
            let next = match &s.transition {
                ast::Transition::Direct(t, _) => ir::Next::To(target(t)),
                ast::Transition::Select { on, cases, .. } => {
                    let mut keys = Vec::new();
                    let mut widths = Vec::new();
                    for e in on {
                        let v = self.scalar(e)?;
                        let Some(w) = v.1.width() else {
                            return self.err(e.pos, "a select key must be a bit, int, bool or enum value");
                        };
                        keys.push(v.0);
                        widths.push((w, v.1));
                    }
                    let mut lowered = Vec::new();
                    for (set, t, _) in cases {
                        lowered.push((self.key_sets(set, &widths)?, target(t)));
                    }
                    ir::Next::Select { keys, cases: lowered }
                }
            };
            self.out.states.push(ir::State {
                name: s.name.clone(),
                ops,
                next,
            });
        }
        self.scopes.pop();
        Ok(())
    }

    /// The key sets of a select case (or a const entry) for keys of `widths`.
    fn key_sets(&self, set: &ast::Expr, widths: &[(u16, Ty)]) -> Result<Vec<ir::KeySet>> {
        let items: Vec<&ast::Expr> = match &set.kind {
            ExprKind::List(items) => items.iter().collect(),
            ExprKind::Default | ExprKind::DontCare if widths.len() > 1 => {
                return Ok(vec![ir::KeySet::Any; widths.len()]);
            }
            _ => vec![set],
        };
        if items.len() != widths.len() {
            return self.err(set.pos, format!("{} values for {} keys", items.len(), widths.len()));
        }
        items
            .iter()
            .zip(widths)
            .map(|(e, (w, t))| self.key_set(e, *w, t))
            .collect()
    }

    fn key_set(&self, e: &ast::Expr, w: u16, t: &Ty) -> Result<ir::KeySet> {
        let mask = mask(w);
        Ok(match &e.kind {
            ExprKind::Default | ExprKind::DontCare => ir::KeySet::Any,
            ExprKind::Mask(v, m) => {
                ir::KeySet::Mask(self.typed_constant(v, t)?.0 & mask, self.typed_constant(m, t)?.0 & mask)
            }
            ExprKind::Range(lo, hi) => ir::KeySet::Range(
                self.typed_constant(lo, t)?.0 & mask,
                self.typed_constant(hi, t)?.0 & mask,
            ),
            _ => ir::KeySet::Value(self.typed_constant(e, t)?.0 & mask),
        })
    }

    /// A control: locals, actions, tables, then its apply block (with local initialisers first).
    fn control_block(&mut self, k: &'a ast::ControlDecl, deparser: bool, shared: &[usize]) -> Result<Vec<ir::Op>> {
        self.scopes.push(HashMap::new());
        self.control = k.name.clone();
        if deparser {
            self.bind_params(&k.params, &[0]);
        } else {
            self.bind_params(&k.params, shared);
        }
        let mut ops = Vec::new();
        for l in &k.locals {
            match l {
                ControlLocal::Stmt(s) => self.stmt(s, &mut ops)?,
                ControlLocal::Action(a) => {
                    let id = self.action(a, false)?;
                    self.bind(&a.name, Binding::Action(id));
                }
                ControlLocal::Table(t) => {
                    let id = self.table(t)?;
                    self.bind(&t.name, Binding::Table(id));
                }
            }
        }
        for s in &k.apply {
            self.stmt(s, &mut ops)?;
        }
        self.scopes.pop();
        Ok(ops)
    }

    /// Lowers action `a` (local to the current control unless `top`), once.
    fn action(&mut self, a: &'a ast::ActionDecl, top: bool) -> Result<usize> {
        let control = if top { String::new() } else { self.control.clone() };
        if let Some(&id) = self.action_ids.get(&(control.clone(), a.name.clone())) {
            return Ok(id);
        }
        let name = at_name(&a.annotations).unwrap_or_else(|| {
            if top {
                a.name.clone()
            } else {
                format!("{}.{}", self.control, a.name)
            }
        });
        self.scopes.push(HashMap::new());
        let mut params = Vec::new();
        for p in &a.params {
            let ty = self.ty(&p.ty, p.pos)?;
            let Some(width) = ty.width() else {
                return self.err(
                    p.pos,
                    format!(
                        "parameter `{}`: an action parameter must be a bit, int or bool value",
                        p.name
                    ),
                );
            };
            let slot = self.alloc(&ty);
            self.bind(&p.name, Binding::Var(slot, ty));
            params.push(ir::Param {
                name: p.name.clone(),
                slot,
                width,
                control_plane: p.direction == Direction::None,
                copy_back: matches!(p.direction, Direction::Out | Direction::InOut),
            });
        }
        let mut body = Vec::new();
        for s in &a.body {
            self.stmt(s, &mut body)?;
        }
        self.scopes.pop();
        let id = self.out.actions.len();
        self.out.actions.push(ir::Action { name, params, body });
        self.action_ids.insert((control, a.name.clone()), id);
        Ok(id)
    }

    /// The action a name refers to: a local one, or a top-level one (lowered on first use).
    fn action_ref(&mut self, name: &str, pos: Pos) -> Result<usize> {
        if let Some(Binding::Action(id)) = self.lookup(name) {
            return Ok(*id);
        }
        match self.top_actions.get(name) {
            Some(a) => self.action(a, true),
            None => self.err(pos, format!("action `{name}` is not declared")),
        }
    }

    /// The value of a compile-time constant expression, with its type.
    fn constant(&self, e: &ast::Expr) -> Result<(u128, Ty)> {
        let (v, t) = self.scalar(e)?;
        match v {
            ir::Expr::Const(c) => Ok((c, t)),
            _ => self.err(e.pos, "a compile-time constant expected"),
        }
    }

    /// A constant converted to type `t` (masked to its width).
    fn typed_constant(&self, e: &ast::Expr, t: &Ty) -> Result<(u128, Ty)> {
        let (v, _) = self.constant(e)?;
        Ok((v & t.width().map_or(u128::MAX, mask), t.clone()))
    }

    /// Control-plane name of a control local (`Control.name`, or `@name`).
    fn cp_name(&self, annotations: &[ast::Annotation], name: &str) -> String {
        at_name(annotations).unwrap_or_else(|| format!("{}.{name}", self.control))
    }

    /// Declares an extern instance (`register<bit<32>>(n) r;`, `counter(n, type) c;`, ...).
    fn instance(&mut self, i: &ast::Instance) -> Result<()> {
        let Type::Named(kind, targs) = &i.ty else {
            return self.err(i.pos, "an instance of an extern expected");
        };
        let name = self.cp_name(&i.annotations, &i.name);
        let b = match kind.as_str() {
            "register" => {
                let width = match targs.first().map(|t| self.ty(t, i.pos)).transpose()? {
                    Some(Ty::Bits(w, _)) if w <= 64 => w,
                    Some(Ty::Bool) => 1,
                    _ => return self.err(i.pos, "a register holds bit<W> values of at most 64 bits here"),
                };
                let size = self.instance_size(i)?;
                self.out.registers.push(ir::Register { name, width, size });
                Binding::Register(self.out.registers.len() - 1)
            }
            "counter" => {
                let size = self.instance_size(i)?;
                self.out.counters.push(ir::Counter { name, size });
                Binding::Counter(self.out.counters.len() - 1)
            }
            "direct_counter" => Binding::DirectCounter,
            "intlab_metadata" => Binding::Intlab,
            "meter" | "direct_meter" | "action_profile" | "action_selector" | "Checksum16" => {
                return self.err(i.pos, format!("extern `{kind}` is not supported yet (docs/p4.md)"));
            }
            other => return self.err(i.pos, format!("unknown extern `{other}`")),
        };
        self.bind(&i.name, b);
        Ok(())
    }

    fn instance_size(&self, i: &ast::Instance) -> Result<usize> {
        match i.args.first() {
            Some(e) => Ok(self.constant(e)?.0 as usize),
            None => self.err(i.pos, "the instance needs its size"),
        }
    }

    /// Lowers a statement list into a new block.
    fn block(&mut self, stmts: &'a [Stmt]) -> Result<Vec<ir::Op>> {
        self.scopes.push(HashMap::new());
        let mut ops = Vec::new();
        for s in stmts {
            self.stmt(s, &mut ops)?;
        }
        self.scopes.pop();
        Ok(ops)
    }
}

/// All ones in the low `w` bits.
pub(crate) fn mask(w: u16) -> u128 {
    if w >= 128 { u128::MAX } else { (1u128 << w) - 1 }
}
