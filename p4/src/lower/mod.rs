//! Lowering of a parsed program to [`crate::ir`]: names are resolved and types computed (the
//! type checker), the package `main` is instantiated with every parser and control it holds
//! (constructor arguments bound, sub-parsers and sub-controls inlined at their apply, functions
//! and actions inlined at their calls, with copy-in and copy-out), side effects of expressions
//! become statements in P4's evaluation order, and values get their slots. Every problem found
//! is reported, and nothing of a refused program runs.
//!
//! Types are checked here rather than in a pass of their own: P4's generic declarations and
//! constructor parameters get their meaning when `main` instantiates them, and one walk that
//! knows both the types and the instance gives the exact widths the executor needs.

mod arch;
mod block;
mod call;
mod expr;
mod externs;
mod psa;
mod stmt;
mod table;
mod ty;
mod value;

use std::collections::HashMap;
use std::rc::Rc;

use crate::front::ast::{self, AggregateKind, Decl, Direction, ExprKind, Type};
use crate::front::diag::{Diagnostics, P4Error, P4Errors};
use crate::front::source::{Pos, SourceMap};
use crate::ir::{self, Slot};

use ty::{AggDef, EnumDef, FieldDef, Ty, Types};
use value::{CVal, Loc, Val};

/// An error was recorded; the caller goes on with the next statement or declaration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reported;

/// Results inside the lowering.
pub(crate) type R<T> = Result<T, Reported>;

/// Goes on past a part that failed: its error is in the diagnostics already, and the lowering
/// carries on to find the program's other errors.
pub(crate) fn carry_on<T>(result: R<T>) {
    if let Err(Reported) = result {
        // Recorded where it was found.
    }
}

/// What a value name stands for.
#[derive(Clone)]
pub(crate) enum Binding<'a> {
    /// A variable, parameter or constant.
    Val(Val),
    /// `packet_in` or `packet_out`.
    Packet,
    /// An extern object instance.
    Extern(Rc<externs::ExternInst>),
    /// A table.
    Table(Rc<table::TableRef>),
    /// An action.
    Action(Rc<call::ActionDef<'a>>),
    /// Functions of this name (overloads).
    Function(Rc<Vec<call::FunctionDef<'a>>>),
    /// Extern functions of this name (overloads).
    ExternFn(Rc<Vec<&'a ast::Signature>>),
    /// A control instance.
    Control(Rc<block::ControlInst<'a>>),
    /// A parser instance.
    Parser(Rc<block::ParserInst<'a>>),
    /// A parser value set.
    ValueSet(usize),
    /// A top-level instance not yet made (a parser or control `main` names).
    Pending(&'a ast::Instance),
}

/// What a type name stands for.
#[derive(Clone)]
pub(crate) enum TypeBinding<'a> {
    /// A type.
    Ty(Ty),
    /// A generic header, union or struct.
    Generic(&'a ast::Aggregate),
    /// An extern object type.
    Extern(&'a ast::ExternDecl),
    /// A parser with its body.
    Parser(&'a ast::ParserDecl),
    /// A control with its body.
    Control(&'a ast::ControlDecl),
    /// A parser, control or package type without a body.
    BlockType,
}

/// One level of names.
#[derive(Clone, Default)]
pub(crate) struct Frame<'a> {
    values: HashMap<String, Binding<'a>>,
    types: HashMap<String, TypeBinding<'a>>,
}

/// Everything the lowering knows while it walks the program.
pub(crate) struct Lowerer<'a> {
    map: &'a SourceMap,
    diags: Diagnostics,
    types: Types,
    /// Names in scope, innermost last; the first frame holds the program's declarations.
    scopes: Vec<Frame<'a>>,
    /// The control-plane name prefix of the block being lowered (`MyIngress`, `MyIngress.c1`).
    prefix: String,
    /// Where a `return` of the function being inlined puts its value.
    returns: Vec<Option<(Loc, Ty)>>,
    /// The architecture block being lowered.
    block: Option<ir::BlockKind>,
    /// Inlined calls under way, to refuse recursion.
    calls: Vec<String>,
    /// How many action bodies are being lowered: an action called from another is inlined
    /// into it and is not the control plane's.
    action_bodies: usize,
    /// Extern object declarations by name.
    extern_decls: HashMap<String, &'a ast::ExternDecl>,
    /// Field lists made from `resubmit(data)`-style calls, numbered from here.
    next_field_list: u128,
    /// Parsers, controls, functions and actions lowered somewhere (the rest are checked on
    /// their own, so that their errors are reported too).
    used: std::collections::HashSet<String>,
    /// The parsers and controls being instantiated, outermost first: P4 has no recursion, and
    /// a block that instantiates itself (directly or through others) is refused here.
    instantiating: Vec<String>,
    /// Serializable enums a controller sees (the type of a controller header's field, a table
    /// key or an action parameter): P4Info lists these, as p4c does.
    controller_enums: std::collections::BTreeSet<usize>,
    /// `@id`s asked for, by control-plane name (noted as names are made, see [`Self::cp_name`]).
    annotated_ids: std::cell::RefCell<std::collections::BTreeMap<String, u32>>,
    out: ir::Program,
}

/// Lowers `program`.
pub fn lower(program: &ast::Program, map: &SourceMap) -> Result<ir::Program, P4Errors> {
    let mut l = Lowerer {
        map,
        diags: Diagnostics::default(),
        types: Types::default(),
        scopes: vec![Frame::default()],
        prefix: String::new(),
        returns: Vec::new(),
        block: None,
        calls: Vec::new(),
        action_bodies: 0,
        extern_decls: HashMap::new(),
        next_field_list: 1 << 64,
        used: std::collections::HashSet::new(),
        instantiating: Vec::new(),
        controller_enums: std::collections::BTreeSet::new(),
        annotated_ids: Default::default(),
        out: ir::Program::default(),
    };
    l.declarations(program);
    if l.diags.is_empty() {
        carry_on(l.main(program));
        l.check_unused(program);
    }
    let Lowerer {
        diags,
        mut out,
        types,
        controller_enums,
        annotated_ids,
        ..
    } = l;
    out.ids = annotated_ids.into_inner();
    out.serializable_enums = controller_enums
        .into_iter()
        .filter_map(|e| {
            let e = &types.enums[e];
            Some(ir::SerializableEnum {
                name: e.name.clone(),
                width: e.underlying?.0,
                members: e.members.clone(),
            })
        })
        .collect();
    diags.finish(out)
}

impl<'a> Lowerer<'a> {
    /// Records an error at `pos`.
    fn err<T>(&mut self, pos: Pos, m: impl Into<String>) -> R<T> {
        self.diags.push(P4Error::new(self.map, pos, m));
        Err(Reported)
    }

    /// Records an error at `pos` without failing.
    fn report(&mut self, pos: Pos, m: impl Into<String>) {
        self.diags.push(P4Error::new(self.map, pos, m));
    }

    // ---- names ----

    fn bind(&mut self, name: &str, b: Binding<'a>) {
        self.scopes
            .last_mut()
            .expect("a scope")
            .values
            .insert(name.to_owned(), b);
    }

    fn bind_type(&mut self, name: &str, b: TypeBinding<'a>) {
        self.scopes
            .last_mut()
            .expect("a scope")
            .types
            .insert(name.to_owned(), b);
    }

    fn lookup(&self, name: &str) -> Option<&Binding<'a>> {
        self.scopes.iter().rev().find_map(|s| s.values.get(name))
    }

    fn lookup_type(&self, name: &str) -> Option<&TypeBinding<'a>> {
        self.scopes.iter().rev().find_map(|s| s.types.get(name))
    }

    fn push_scope(&mut self) {
        self.scopes.push(Frame::default());
    }

    fn pop_scope(&mut self) {
        self.scopes.pop();
    }

    /// Runs `f` with `scopes` as the names in scope (a declaration's own), then restores them.
    fn with_scopes<T>(&mut self, scopes: Vec<Frame<'a>>, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = std::mem::replace(&mut self.scopes, scopes);
        let r = f(self);
        self.scopes = saved;
        r
    }

    /// The names of the program's top level only.
    fn global_scopes(&self) -> Vec<Frame<'a>> {
        vec![self.scopes[0].clone()]
    }

    /// The control-plane name of a local `name` with `annotations`: `@name` as P4Info gives
    /// it (a leading `.` makes it global), else the prefix and the name.
    /// An `@id(N)` among `annotations` is noted for that name (P4Info gives it that id).
    fn cp_name(&self, annotations: &[ast::Annotation], name: &str) -> String {
        let local = ast::annotation_string(annotations, "name").unwrap_or_else(|| name.to_owned());
        let cp = if let Some(global) = local.strip_prefix('.') {
            global.to_owned()
        } else if self.prefix.is_empty() {
            local
        } else {
            format!("{}.{local}", self.prefix)
        };
        if let Some(id) = ast::annotation_int(annotations, "id").and_then(|v| u32::try_from(v).ok()) {
            self.annotated_ids.borrow_mut().insert(cp.clone(), id);
        }
        cp
    }

    // ---- slots ----

    fn size(&self, t: &Ty) -> u32 {
        self.types.size(t, &self.out.headers)
    }

    /// Fresh slots for a value of `t`.
    fn alloc(&mut self, t: &Ty) -> Slot {
        let s = self.out.slots as Slot;
        self.out.slots += self.size(t).max(1) as usize;
        s
    }

    // ---- declarations ----

    fn declarations(&mut self, program: &'a ast::Program) {
        for d in &program.decls {
            carry_on(self.declaration(d));
        }
    }

    fn declaration(&mut self, d: &'a Decl) -> R<()> {
        match d {
            Decl::Typedef { ty, name, pos, .. } => {
                let t = self.ty(ty, *pos)?;
                self.bind_type(name, TypeBinding::Ty(t));
            }
            Decl::Aggregate(a) => {
                if ty::is_generic(a) {
                    self.bind_type(&a.name, TypeBinding::Generic(a));
                } else {
                    // A type refused is still declared, so that its uses are not refused again.
                    let t = self.aggregate(a, &[]).unwrap_or(Ty::DontCare);
                    self.bind_type(&a.name, TypeBinding::Ty(t));
                }
            }
            Decl::Enum(e) => self.enum_decl(e)?,
            Decl::Error(names) => {
                for (n, _) in names {
                    if !self.out.errors.contains(n) {
                        self.out.errors.push(n.clone());
                    }
                }
            }
            Decl::MatchKind(_) => {}
            Decl::Const(k) => {
                let t = self.ty(&k.ty, k.pos)?;
                let v = self.const_expr(&k.value, Some(&t))?;
                self.bind(&k.name, Binding::Val(v));
            }
            Decl::ExternObject(x) => {
                self.extern_decls.insert(x.name.clone(), x);
                self.bind_type(&x.name, TypeBinding::Extern(x));
            }
            Decl::ExternFunction(sig) => {
                let mut all = match self.scopes[0].values.get(&sig.name) {
                    Some(Binding::ExternFn(v)) => (**v).clone(),
                    _ => Vec::new(),
                };
                all.push(sig);
                self.scopes[0]
                    .values
                    .insert(sig.name.clone(), Binding::ExternFn(Rc::new(all)));
            }
            Decl::BlockType { sig, .. } => self.bind_type(&sig.name, TypeBinding::BlockType),
            Decl::Parser(p) => self.bind_type(&p.name, TypeBinding::Parser(p)),
            Decl::Control(c) => self.bind_type(&c.name, TypeBinding::Control(c)),
            Decl::Action(a) => {
                let def = call::ActionDef {
                    decl: a,
                    scopes: None,
                    prefix: String::new(),
                };
                self.bind(&a.name, Binding::Action(Rc::new(def)));
            }
            Decl::Function(f) => {
                let mut all = match self.scopes[0].values.get(&f.sig.name) {
                    Some(Binding::Function(v)) => (**v).clone(),
                    _ => Vec::new(),
                };
                all.push(call::FunctionDef { decl: f });
                self.scopes[0]
                    .values
                    .insert(f.sig.name.clone(), Binding::Function(Rc::new(all)));
            }
            Decl::Instance(i) => {
                if i.name == "main" {
                    return Ok(());
                }
                self.top_instance(i)?;
            }
        }
        Ok(())
    }

    /// A top-level instance other than `main`: an extern object now, a parser or control when
    /// `main` uses it.
    fn top_instance(&mut self, i: &'a ast::Instance) -> R<()> {
        let Type::Named(kind, _, _) = &i.ty else {
            return self.err(
                i.pos,
                format!("`{}`: an instance of an extern, parser or control expected", i.name),
            );
        };
        match self.lookup_type(kind) {
            Some(TypeBinding::Extern(_)) => {
                let inst = self.local_instance(i)?;
                self.bind(&i.name, inst);
            }
            Some(TypeBinding::Parser(_) | TypeBinding::Control(_) | TypeBinding::BlockType) => {
                self.bind(&i.name, Binding::Pending(i));
            }
            _ => return self.err(i.pos, format!("`{kind}` is not an extern, parser, control or package")),
        }
        Ok(())
    }

    fn enum_decl(&mut self, e: &'a ast::EnumDecl) -> R<()> {
        let underlying = match &e.underlying {
            Some(t) => match self.ty(t, e.pos)? {
                Ty::Bits(w, s) => Some((w, s)),
                other => {
                    let n = self.types.name(&other);
                    return self.err(
                        e.pos,
                        format!("enum `{}`: its type must be bit<W> or int<W>, not {n}", e.name),
                    );
                }
            },
            None => None,
        };
        let id = self.types.enums.len();
        let mut members = Vec::new();
        for (i, (name, value, pos)) in e.members.iter().enumerate() {
            let v = match (value, underlying) {
                (Some(v), Some((w, s))) => {
                    let c = self.const_expr(v, Some(&Ty::Bits(w, s)))?;
                    match c.constant().and_then(|c| c.bits(w)) {
                        Some(v) => v,
                        None => return self.err(*pos, format!("member `{name}`: a constant expected")),
                    }
                }
                (None, Some(_)) => {
                    return self.err(*pos, format!("member `{name}` of a serializable enum needs a value"));
                }
                (Some(_), None) => {
                    return self.err(
                        *pos,
                        format!("member `{name}`: only enums with a type (`enum bit<8> E`) give values"),
                    );
                }
                (None, None) => i as u128,
            };
            members.push((name.clone(), v));
        }
        self.types.enums.push(EnumDef {
            name: e.name.clone(),
            members,
            underlying,
        });
        self.bind_type(&e.name, TypeBinding::Ty(Ty::Enum(id)));
        Ok(())
    }

    /// Defines header, union or struct `a` with type arguments `args` (none for a plain one).
    fn aggregate(&mut self, a: &'a ast::Aggregate, args: &[Ty]) -> R<Ty> {
        let key = (a.name.clone(), args.to_vec());
        if !args.is_empty()
            && let Some(t) = self.types.instances.get(&key)
        {
            return Ok(t.clone());
        }
        if args.len() != a.type_params.len() {
            return self.err(
                a.pos,
                format!(
                    "`{}` takes {} type argument(s), {} given",
                    a.name,
                    a.type_params.len(),
                    args.len()
                ),
            );
        }
        self.push_scope();
        for (p, t) in a.type_params.iter().zip(args) {
            self.bind_type(p, TypeBinding::Ty(t.clone()));
        }
        let mut fields = Vec::new();
        let mut failed = false;
        for f in &a.fields {
            match self.ty(&f.ty, f.pos) {
                Ok(t) => fields.push(FieldDef {
                    name: f.name.clone(),
                    ty: t,
                    annotations: f.annotations.clone(),
                }),
                Err(_) => failed = true,
            }
        }
        self.pop_scope();
        if failed {
            return Err(Reported);
        }
        let name = if args.is_empty() {
            a.name.clone()
        } else {
            let names: Vec<String> = args.iter().map(|t| self.types.name(t)).collect();
            format!("{}<{}>", a.name, names.join(", "))
        };
        let def = AggDef {
            name: name.clone(),
            fields,
        };
        let t = match a.kind {
            AggregateKind::Header => {
                let h = self.header_type(&def, a)?;
                let id = self.types.headers.len();
                self.types.headers.push(def);
                self.out.headers.push(h);
                Ty::Header(id)
            }
            AggregateKind::HeaderUnion => {
                for f in &def.fields {
                    if !matches!(f.ty, Ty::Header(_)) {
                        return self.err(
                            a.pos,
                            format!("header_union `{}`: member `{}` is not a header", a.name, f.name),
                        );
                    }
                }
                self.types.unions.push(def);
                Ty::Union(self.types.unions.len() - 1)
            }
            AggregateKind::Struct => {
                self.types.structs.push(def);
                Ty::Struct(self.types.structs.len() - 1)
            }
        };
        if !args.is_empty() {
            self.types.instances.insert(key, t.clone());
        }
        Ok(t)
    }

    /// The executor's view of a header: its fields' widths (a struct's fields in its place)
    /// and its varbit.
    fn header_type(&mut self, def: &AggDef, a: &ast::Aggregate) -> R<ir::HeaderType> {
        let mut flat: Vec<FieldDef> = Vec::new();
        for f in &def.fields {
            let mut leaves = Vec::new();
            self.types.leaves(&f.ty, 0, &self.out.headers, &mut leaves);
            match &f.ty {
                Ty::Struct(_) if leaves.iter().all(|(_, t)| t.is_scalar()) => {
                    let names = self.leaf_names(&f.ty, &f.name);
                    for ((_, t), n) in leaves.into_iter().zip(names) {
                        flat.push(FieldDef {
                            name: n,
                            ty: t,
                            annotations: Vec::new(),
                        });
                    }
                }
                _ => flat.push(f.clone()),
            }
        }
        let mut fields = Vec::new();
        let mut varbit = None;
        for (i, f) in flat.iter().enumerate() {
            let w = match &f.ty {
                Ty::Bits(w, _) => *w,
                Ty::Bool => 1,
                Ty::Enum(e) if self.types.enums[*e].underlying.is_some() => f.ty.width(&self.types).unwrap_or(32),
                Ty::Varbit(w) => {
                    if varbit.is_some() {
                        return self.err(a.pos, format!("header `{}` has more than one varbit field", a.name));
                    }
                    varbit = Some(i);
                    *w
                }
                other => {
                    let n = self.types.name(other);
                    let pos = a.fields.iter().find(|x| x.name == f.name).map_or(a.pos, |x| x.pos);
                    return self.err(
                        pos,
                        format!(
                            "field `{}` of header `{}` is {n}: a header field is bit<W>, int<W>, varbit<W>, bool or a serializable enum",
                            f.name, a.name
                        ),
                    );
                }
            };
            fields.push((f.name.clone(), w));
        }
        let controller_header = ast::annotation_string(&a.annotations, "controller_header");
        if controller_header.is_some() {
            for f in &flat {
                self.note_controller_type(&f.ty);
            }
        }
        Ok(ir::HeaderType {
            name: def.name.clone(),
            fields,
            varbit,
            controller_header,
        })
    }

    /// Notes that a controller sees values of type `t` (P4Info lists its serializable enum).
    fn note_controller_type(&mut self, t: &Ty) {
        if let Ty::Enum(e) = t
            && self.types.enums[*e].underlying.is_some()
        {
            self.controller_enums.insert(*e);
        }
    }

    /// The names of a struct's scalar leaves, `prefix.field.inner`.
    fn leaf_names(&self, t: &Ty, prefix: &str) -> Vec<String> {
        match self.types.agg(t) {
            Some(a) => a
                .fields
                .iter()
                .flat_map(|f| self.leaf_names(&f.ty, &format!("{prefix}.{}", f.name)))
                .collect(),
            None => vec![prefix.to_owned()],
        }
    }

    /// The type an AST type names.
    fn ty(&mut self, t: &'a Type, pos: Pos) -> R<Ty> {
        Ok(match t {
            Type::Bit(w) | Type::Int(w) => {
                let w = self.width(w)?;
                let signed = matches!(t, Type::Int(_));
                if w > 128 {
                    return self.err(pos, format!("width {w}: intlab runs values of up to 128 bits"));
                }
                if signed && w == 0 {
                    return self.err(pos, "int<0> has no values: a signed type needs one bit at least");
                }
                Ty::Bits(w as u16, signed)
            }
            Type::Varbit(w) => {
                let w = self.width(w)?;
                if w > 0xffff {
                    return self.err(pos, format!("varbit<{w}> is wider than intlab's 65535 bits"));
                }
                Ty::Varbit(w as u16)
            }
            Type::Bool => Ty::Bool,
            Type::Error => Ty::Error,
            Type::String => Ty::Str,
            Type::Void => Ty::Void,
            Type::InfInt => Ty::InfInt,
            Type::MatchKind => Ty::MatchKind,
            Type::DontCare => Ty::DontCare,
            Type::Stack(e, n) => {
                let e = self.ty(e, pos)?;
                let n = self.const_expr(n, None)?;
                let Some(n) = n
                    .constant()
                    .and_then(|c| c.int(&Ty::InfInt))
                    .and_then(|n| u32::try_from(n).ok())
                else {
                    return self.err(pos, "a stack's size must be a non-negative constant");
                };
                Ty::Stack(Box::new(e), n)
            }
            Type::Tuple(items) => {
                let mut out = Vec::new();
                for i in items {
                    out.push(self.ty(i, pos)?);
                }
                Ty::Tuple(out)
            }
            Type::List(e) => {
                let e = self.ty(e, pos)?;
                Ty::Tuple(vec![e])
            }
            Type::Named(n, args, npos) => {
                let mut targs = Vec::new();
                for a in args {
                    targs.push(self.ty(a, *npos)?);
                }
                match self.lookup_type(n).cloned() {
                    Some(TypeBinding::Ty(t)) => {
                        if !targs.is_empty() {
                            return self.err(*npos, format!("`{n}` takes no type arguments"));
                        }
                        t
                    }
                    Some(TypeBinding::Generic(a)) => self.aggregate(a, &targs)?,
                    Some(TypeBinding::Extern(x)) => Ty::Extern(x.name.clone(), targs),
                    Some(TypeBinding::Parser(_) | TypeBinding::Control(_) | TypeBinding::BlockType) => {
                        Ty::Block(n.clone())
                    }
                    None => return self.err(*npos, format!("type `{n}` is not declared")),
                }
            }
        })
    }

    /// A width (`W` of `bit<W>`): a non-negative constant.
    fn width(&mut self, w: &'a ast::Expr) -> R<u32> {
        let v = self.const_expr(w, None)?;
        match v.constant().and_then(|c| c.int(v.ty().unwrap_or(&Ty::InfInt))) {
            Some(n) if (0..=i128::from(u32::MAX)).contains(&n) => Ok(n as u32),
            _ => self.err(w.pos, "a width must be a non-negative constant"),
        }
    }

    /// An expression that must be a compile-time constant.
    fn const_expr(&mut self, e: &'a ast::Expr, want: Option<&Ty>) -> R<Val> {
        let mut code = Vec::new();
        let v = self.expr(e, want, &mut code)?;
        let v = match (&v, want) {
            (Val::List(..) | Val::Record(..) | Val::Invalid, Some(t)) => {
                let t = t.clone();
                match self.const_aggregate(&v, &t) {
                    Some(c) => Val::Const(c, t),
                    None => return self.err(e.pos, "a compile-time constant expected"),
                }
            }
            (Val::Const(..), Some(t)) => self.convert(v.clone(), t, e.pos)?,
            _ => v,
        };
        if !code.is_empty() || !matches!(v, Val::Const(..)) {
            return self.err(e.pos, format!("`{}`: a compile-time constant expected", e.text()));
        }
        Ok(v)
    }

    /// A list or record of constants as a constant of aggregate type `t`.
    fn const_aggregate(&mut self, v: &Val, t: &Ty) -> Option<CVal> {
        match (v, t) {
            (Val::Const(c, ct), _) => {
                if ct == t {
                    return Some(c.clone());
                }
                let w = t.width(&self.types)?;
                Some(CVal::Bits(c.bits(w)?))
            }
            (Val::Invalid, Ty::Header(h)) => {
                let n = self.types.headers[*h].fields.len();
                let mut items = vec![CVal::Bits(0)];
                items.extend((0..n).map(|_| CVal::Bits(0)));
                Some(CVal::Agg(items))
            }
            (Val::List(items, _), Ty::Tuple(ts)) if items.len() == ts.len() => {
                let mut out = Vec::new();
                for (i, t) in items.iter().zip(ts) {
                    out.push(self.const_aggregate(i, t)?);
                }
                Some(CVal::Agg(out))
            }
            (Val::List(items, _), Ty::Struct(_) | Ty::Header(_)) => {
                let fields: Vec<Ty> = self.types.agg(t)?.fields.iter().map(|f| f.ty.clone()).collect();
                if fields.len() != items.len() {
                    return None;
                }
                let mut out = Vec::new();
                if matches!(t, Ty::Header(_)) {
                    out.push(CVal::Bits(1));
                }
                for (i, ft) in items.iter().zip(&fields) {
                    out.push(self.const_aggregate(i, ft)?);
                }
                Some(CVal::Agg(out))
            }
            (Val::Record(items, _), Ty::Struct(_) | Ty::Header(_)) => {
                let fields: Vec<(String, Ty)> = self
                    .types
                    .agg(t)?
                    .fields
                    .iter()
                    .map(|f| (f.name.clone(), f.ty.clone()))
                    .collect();
                let mut out = Vec::new();
                if matches!(t, Ty::Header(_)) {
                    out.push(CVal::Bits(1));
                }
                for (name, ft) in &fields {
                    let (_, v) = items.iter().find(|(n, _)| n == name)?;
                    out.push(self.const_aggregate(v, ft)?);
                }
                Some(CVal::Agg(out))
            }
            _ => None,
        }
    }

    /// An integer constant (a size, an index, an argument the control plane never sees).
    fn const_int(&mut self, e: &'a ast::Expr) -> R<i128> {
        let v = self.const_expr(e, None)?;
        match v.constant().and_then(|c| c.int(v.ty().unwrap_or(&Ty::InfInt))) {
            Some(n) => Ok(n),
            None => self.err(e.pos, format!("`{}`: an integer constant expected", e.text())),
        }
    }

    // ---- the package ----

    fn main(&mut self, program: &'a ast::Program) -> R<()> {
        let Some(main) = program.decls.iter().find_map(|d| match d {
            Decl::Instance(i) if i.name == "main" => Some(i),
            _ => None,
        }) else {
            let pos = program.decls.last().map_or(Pos::default(), decl_pos);
            return self.err(
                pos,
                "no `main`: a program ends with its package, as `V1Switch(p(), vr(), ig(), eg(), ck(), dep()) main;`",
            );
        };
        let Type::Named(package, _, _) = &main.ty else {
            return self.err(main.pos, "`main` must be an instance of a package");
        };
        match package.as_str() {
            "V1Switch" => self.v1switch(main),
            "PSA_Switch" => self.psa_switch(main),
            other => self.err(
                main.pos,
                format!(
                    "package `{other}` is not an architecture intlab runs: V1Switch (v1model) and PSA_Switch (PSA) are"
                ),
            ),
        }
    }

    /// A block `main` names: its declaration, its constructor arguments and its instance name.
    fn package_block(&mut self, arg: &'a ast::Arg) -> R<block::BlockUse<'a>> {
        let (name, targs, args, pos, instance) = match &arg.value.kind {
            ExprKind::Call(f, targs, args) => match &f.kind {
                ExprKind::Name(n) => (n.clone(), targs.as_slice(), args.as_slice(), arg.value.pos, None),
                _ => return self.err(arg.value.pos, "a parser or control expected"),
            },
            ExprKind::Name(n) => match self.lookup(n).cloned() {
                Some(Binding::Pending(i)) => {
                    let Type::Named(t, targs, _) = &i.ty else {
                        return self.err(i.pos, "a parser or control expected");
                    };
                    (
                        t.clone(),
                        targs.as_slice(),
                        i.args.as_slice(),
                        i.pos,
                        Some(i.name.clone()),
                    )
                }
                _ => return self.err(arg.value.pos, format!("`{n}` is not a parser or control instance")),
            },
            _ => return self.err(arg.value.pos, "a parser or control expected"),
        };
        let mut type_args = Vec::new();
        for t in targs {
            type_args.push(self.ty(t, pos)?);
        }
        match self.lookup_type(&name).cloned() {
            Some(TypeBinding::Parser(p)) => Ok(block::BlockUse {
                decl: block::BlockDecl::Parser(p),
                args,
                type_args,
                instance,
                pos,
            }),
            Some(TypeBinding::Control(c)) => Ok(block::BlockUse {
                decl: block::BlockDecl::Control(c),
                args,
                type_args,
                instance,
                pos,
            }),
            _ => self.err(pos, format!("`{name}` is not a parser or control with a body")),
        }
    }
}

impl<'a> Lowerer<'a> {
    /// Lowers, to check them, the parsers, controls, functions and actions `main` does not
    /// use (those without constructor or type parameters): what they would add to the program
    /// is dropped after.
    fn check_unused(&mut self, program: &'a ast::Program) {
        let kept = (
            self.out.slots,
            self.out.tables.len(),
            self.out.actions.len(),
            self.out.registers.len(),
            self.out.counters.len(),
            self.out.meters.len(),
            self.out.profiles.len(),
            self.out.value_sets.len(),
            self.out.digests.len(),
            self.out.field_lists.len(),
        );
        for d in &program.decls {
            carry_on(self.check_one(d));
        }
        self.out.slots = kept.0;
        self.out.tables.truncate(kept.1);
        self.out.actions.truncate(kept.2);
        self.out.registers.truncate(kept.3);
        self.out.counters.truncate(kept.4);
        self.out.meters.truncate(kept.5);
        self.out.profiles.truncate(kept.6);
        self.out.value_sets.truncate(kept.7);
        self.out.digests.truncate(kept.8);
        self.out.field_lists.truncate(kept.9);
    }

    fn check_one(&mut self, d: &'a Decl) -> R<()> {
        let no_args: &'a [ast::Arg] = &[];
        match d {
            Decl::Control(c)
                if c.ctor_params.is_empty()
                    && c.type_params.is_empty()
                    && !self.used.contains(&format!("block {}", c.name)) =>
            {
                let u = block::BlockUse {
                    decl: block::BlockDecl::Control(c),
                    args: no_args,
                    type_args: Vec::new(),
                    instance: None,
                    pos: c.pos,
                };
                self.control_instance(c, &u, c.name.clone(), block::Params::Own)?;
            }
            Decl::Parser(p)
                if p.ctor_params.is_empty()
                    && p.type_params.is_empty()
                    && !self.used.contains(&format!("block {}", p.name)) =>
            {
                let u = block::BlockUse {
                    decl: block::BlockDecl::Parser(p),
                    args: no_args,
                    type_args: Vec::new(),
                    instance: None,
                    pos: p.pos,
                };
                let inst = self.parser_instance(p, &u, p.name.clone(), block::Params::Own)?;
                let mut states = Vec::new();
                self.parser_states(&inst, ir::Target::Accept, &mut states)?;
            }
            Decl::Function(f) if f.sig.type_params.is_empty() && !self.used.contains(&format!("fn {}", f.sig.name)) => {
                self.with_scopes(self.global_scopes(), |l| {
                    l.push_scope();
                    let r = (|| {
                        let types = l.param_types(&f.sig.params)?;
                        for (p, t) in f.sig.params.iter().zip(types) {
                            let loc = Loc::Fixed(l.alloc(&t));
                            l.bind(&p.name, Binding::Val(Val::Loc(loc, t)));
                        }
                        let ret = match &f.sig.ret {
                            Some(t) => l.ty(t, f.sig.pos)?,
                            None => Ty::Void,
                        };
                        let ret_loc = (ret != Ty::Void).then(|| Loc::Fixed(l.alloc(&ret)));
                        l.returns.push(ret_loc.map(|loc| (loc, ret)));
                        l.block(&f.body);
                        l.returns.pop();
                        Ok(())
                    })();
                    l.pop_scope();
                    r
                })?;
            }
            Decl::Action(a) if !self.used.contains(&format!("action {}", a.name)) => {
                let def = call::ActionDef {
                    decl: a,
                    scopes: None,
                    prefix: String::new(),
                };
                self.check_action(&def)?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Where a declaration is.
fn decl_pos(d: &Decl) -> Pos {
    match d {
        Decl::Const(k) => k.pos,
        Decl::Typedef { pos, .. } => *pos,
        Decl::Aggregate(a) => a.pos,
        Decl::Enum(e) => e.pos,
        Decl::Error(v) | Decl::MatchKind(v) => v.first().map(|x| x.1).unwrap_or_default(),
        Decl::ExternObject(x) => x.pos,
        Decl::ExternFunction(s) => s.pos,
        Decl::BlockType { sig, .. } => sig.pos,
        Decl::Parser(p) => p.pos,
        Decl::Control(c) => c.pos,
        Decl::Action(a) => a.pos,
        Decl::Function(f) => f.sig.pos,
        Decl::Instance(i) => i.pos,
    }
}

/// Whether a parameter is written back after a call.
fn copies_out(d: Direction) -> bool {
    matches!(d, Direction::Out | Direction::InOut)
}
