//! Parsers and controls made into instances: constructor arguments bound, locals declared
//! (variables, constants, extern objects, tables, actions, sub-parsers and sub-controls), and
//! their code lowered. A control's code is inlined where it is applied; a sub-parser's states
//! are lowered again at each apply, between the two halves of the state that applies it.

use std::collections::HashMap;
use std::rc::Rc;

use crate::front::ast::{self, ControlLocal, Direction, ExprKind, Stmt, Transition, Type};
use crate::front::source::Pos;
use crate::ir::{self, CaseMatch, KeySet, Next, Op, Target, mask};

use super::call::{ActionDef, Bound};
use super::expr::LVal;
use super::ty::Ty;
use super::value::{Loc, Val};
use super::{Binding, Frame, Lowerer, R, TypeBinding, carry_on};

/// A parser or control declaration with a body.
#[derive(Clone, Copy)]
pub(crate) enum BlockDecl<'a> {
    Parser(&'a ast::ParserDecl),
    Control(&'a ast::ControlDecl),
}

/// A parser or control about to be instantiated.
pub(crate) struct BlockUse<'a> {
    pub(crate) decl: BlockDecl<'a>,
    /// Constructor arguments.
    pub(crate) args: &'a [ast::Arg],
    /// Type arguments given.
    pub(crate) type_args: Vec<Ty>,
    /// The instance's name when it has one (`MyIngress() ig;`).
    pub(crate) instance: Option<String>,
    pub(crate) pos: Pos,
}

/// How an instance's parameters are bound.
pub(crate) enum Params {
    /// To the architecture's shared values (a top-level block): one per parameter, None for
    /// the packet.
    Shared(Vec<Option<Val>>),
    /// To slots of their own, copied in and out at each apply.
    Own,
}

/// A parameter of an instance: its declaration, where it lives, its type.
pub(crate) type InstParam<'a> = (&'a ast::Param, Loc, Ty);

/// A control instance.
pub(crate) struct ControlInst<'a> {
    /// Its parameters but the packet.
    pub(crate) params: Vec<InstParam<'a>>,
    /// Its apply block (with its locals' initialisation first).
    pub(crate) body: Vec<Op>,
}

/// A parser instance: its states are lowered where it is applied.
pub(crate) struct ParserInst<'a> {
    pub(crate) decl: &'a ast::ParserDecl,
    pub(crate) name: String,
    pub(crate) params: Vec<InstParam<'a>>,
    /// Its names: constructor parameters, parameters and locals.
    pub(crate) scopes: Vec<Frame<'a>>,
    /// Its locals' initialisation, run on entry.
    pub(crate) init: Vec<Op>,
}

/// How deep instances of parsers and controls may nest (p4c's own samples nest a few).
const MAX_INSTANCE_DEPTH: usize = 64;

impl<'a> Lowerer<'a> {
    /// Binds an instance's type and constructor parameters in a new scope (on the program's
    /// top level), evaluating the constructor arguments where they are written.
    fn enter_instance(
        &mut self,
        type_params: &[String],
        ctor_params: &'a [ast::Param],
        u: &BlockUse<'a>,
        what: &str,
    ) -> R<Vec<Frame<'a>>> {
        if u.type_args.len() > type_params.len() {
            return self.err(u.pos, format!("{what} takes {} type argument(s)", type_params.len()));
        }
        if u.args.len() > ctor_params.len() {
            return self.err(
                u.pos,
                format!(
                    "{what} takes {} constructor argument(s), {} given",
                    ctor_params.len(),
                    u.args.len()
                ),
            );
        }
        let mut frame = Frame::default();
        for (p, t) in type_params.iter().zip(&u.type_args) {
            frame.types.insert(p.clone(), TypeBinding::Ty(t.clone()));
        }
        // Constructor arguments are constants or instances, evaluated in the caller's scope.
        let mut scopes = self.global_scopes();
        scopes.push(frame);
        for (i, p) in ctor_params.iter().enumerate() {
            let arg = u
                .args
                .iter()
                .find(|a| a.name.as_deref() == Some(&p.name))
                .or_else(|| u.args.get(i).filter(|a| a.name.is_none()))
                .map(|a| &a.value)
                .or(p.default.as_ref());
            let Some(arg) = arg else {
                return self.err(
                    u.pos,
                    format!("{what}: no value for constructor parameter `{}`", p.name),
                );
            };
            let t = self.with_scopes(scopes.clone(), |l| l.ty(&p.ty, p.pos))?;
            let b = match &t {
                Ty::Block(_) | Ty::Extern(..) => self.ctor_instance_arg(arg, &p.name)?,
                _ => Binding::Val(self.const_expr(arg, Some(&t))?),
            };
            scopes.last_mut().expect("a frame").values.insert(p.name.clone(), b);
        }
        Ok(scopes)
    }

    /// A constructor argument that is an instance (`C(D())`, `C(my_register)`).
    fn ctor_instance_arg(&mut self, arg: &'a ast::Expr, param: &str) -> R<Binding<'a>> {
        match &arg.kind {
            ExprKind::Name(n) => match self.lookup(n).cloned() {
                Some(b @ (Binding::Extern(_) | Binding::Control(_) | Binding::Parser(_))) => Ok(b),
                _ => self.err(arg.pos, format!("`{n}` is not an instance")),
            },
            ExprKind::Call(f, targs, args) => {
                let ExprKind::Name(n) = &f.kind else {
                    return self.err(arg.pos, "an instance expected");
                };
                self.instance_of(n, targs, args, param, &[], arg.pos)
            }
            _ => self.err(arg.pos, "an instance expected"),
        }
    }

    /// Binds parameters: to the shared values, or to slots of their own.
    fn bind_block_params(&mut self, params: &'a [ast::Param], binding: &Params, pos: Pos) -> R<Vec<InstParam<'a>>> {
        let mut out = Vec::new();
        for (i, p) in params.iter().enumerate() {
            let is_packet = matches!(&p.ty, Type::Named(n, _, _) if n == "packet_in" || n == "packet_out");
            if is_packet {
                self.bind(&p.name, Binding::Packet);
                continue;
            }
            let t = self.ty(&p.ty, p.pos)?;
            match binding {
                Params::Shared(vals) => match vals.get(i).cloned().flatten() {
                    Some(Val::Loc(l, lt)) => {
                        if lt != t {
                            let (a, b) = (self.types.name(&t), self.types.name(&lt));
                            return self.err(
                                p.pos,
                                format!("parameter `{}` is {a}; the architecture passes {b}", p.name),
                            );
                        }
                        self.bind(&p.name, Binding::Val(Val::Loc(l.clone(), t.clone())));
                        out.push((p, l, t));
                    }
                    _ => {
                        return self.err(
                            pos,
                            format!("parameter `{}` has no value from the architecture", p.name),
                        );
                    }
                },
                Params::Own => {
                    let l = Loc::Fixed(self.alloc(&t));
                    self.bind(&p.name, Binding::Val(Val::Loc(l.clone(), t.clone())));
                    out.push((p, l, t));
                }
            }
        }
        Ok(out)
    }

    /// Makes a control instance named `prefix`.
    pub(crate) fn control_instance(
        &mut self,
        c: &'a ast::ControlDecl,
        u: &BlockUse<'a>,
        prefix: String,
        binding: Params,
    ) -> R<ControlInst<'a>> {
        self.instantiating_block(&c.name, u.pos, |l| l.control_instance_of(c, u, prefix, binding))
    }

    /// Runs `make`, the instantiation of block `name`, with the block marked as used and as
    /// being instantiated; refused when it already is (it would contain itself) or when
    /// instances nest deeper than [`MAX_INSTANCE_DEPTH`].
    fn instantiating_block<T>(&mut self, name: &str, pos: Pos, make: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.used.insert(format!("block {name}"));
        if self.instantiating.iter().any(|n| n == name) {
            let chain = self.instantiating.join(" → ");
            return self.err(
                pos,
                format!("`{name}` instantiates itself ({chain} → {name}): P4 has no recursion"),
            );
        }
        if self.instantiating.len() >= MAX_INSTANCE_DEPTH {
            return self.err(pos, format!("instances nested more than {MAX_INSTANCE_DEPTH} deep"));
        }
        self.instantiating.push(name.to_owned());
        let r = make(self);
        self.instantiating.pop();
        r
    }

    fn control_instance_of(
        &mut self,
        c: &'a ast::ControlDecl,
        u: &BlockUse<'a>,
        prefix: String,
        binding: Params,
    ) -> R<ControlInst<'a>> {
        let scopes = self.enter_instance(&c.type_params, &c.ctor_params, u, &format!("control `{}`", c.name))?;
        let saved = std::mem::replace(&mut self.prefix, prefix);
        let r = self.with_scopes(scopes, |l| {
            l.push_scope();
            let params = l.bind_block_params(&c.params, &binding, u.pos)?;
            l.push_scope();
            let mut body = Vec::new();
            for local in &c.locals {
                carry_on(l.control_local(local, &mut body));
            }
            body.extend(l.block(&c.apply));
            l.check_unused_actions(c);
            Ok(ControlInst { params, body })
        });
        self.prefix = saved;
        r
    }

    /// Lowers, to check them, the actions of control `c` no table runs and no code calls;
    /// what they add to the program is dropped after.
    fn check_unused_actions(&mut self, c: &'a ast::ControlDecl) {
        let (slots, actions) = (self.out.slots, self.out.actions.len());
        for local in &c.locals {
            let ControlLocal::Action(a) = local else { continue };
            let key = format!("action {}.{}", self.prefix, a.name);
            if self.used.contains(&key) {
                continue;
            }
            if let Some(Binding::Action(def)) = self.lookup(&a.name).cloned() {
                carry_on(self.check_action(&def));
            }
        }
        self.out.slots = slots;
        self.out.actions.truncate(actions);
    }

    /// Lowers an action's body with every parameter in a slot of its own, to check it.
    pub(crate) fn check_action(&mut self, def: &super::call::ActionDef<'a>) -> R<()> {
        let a = def.decl;
        self.used.insert(super::call::action_key(def));
        let scopes = def.scopes.clone().unwrap_or_else(|| self.global_scopes());
        let prefix = def.prefix.clone();
        self.with_scopes(scopes, |l| {
            l.push_scope();
            let saved = std::mem::replace(&mut l.prefix, prefix);
            let r = l.param_types(&a.params).map(|types| {
                for (p, t) in a.params.iter().zip(types) {
                    let loc = Loc::Fixed(l.alloc(&t));
                    l.bind(&p.name, Binding::Val(Val::Loc(loc, t)));
                }
                l.returns.push(None);
                l.action_bodies += 1;
                l.block(&a.body);
                l.action_bodies -= 1;
                l.returns.pop();
            });
            l.prefix = saved;
            l.pop_scope();
            r
        })
    }

    fn control_local(&mut self, local: &'a ControlLocal, init: &mut Vec<Op>) -> R<()> {
        match local {
            ControlLocal::Action(a) => {
                let def = ActionDef {
                    decl: a,
                    scopes: Some(self.scopes.clone()),
                    prefix: self.prefix.clone(),
                };
                self.bind(&a.name, Binding::Action(Rc::new(def)));
            }
            ControlLocal::Table(t) => {
                let r = self.table(t)?;
                self.bind(&t.name, Binding::Table(Rc::new(r)));
            }
            ControlLocal::Stmt(s) => self.block_local(s, init)?,
        }
        Ok(())
    }

    /// A variable, constant or instance among a parser's or control's locals.
    fn block_local(&mut self, s: &'a Stmt, init: &mut Vec<Op>) -> R<()> {
        match s {
            Stmt::Instance(i) => {
                let b = self.local_instance(i)?;
                self.bind(&i.name, b);
            }
            Stmt::ValueSet(t, size, name, annotations, pos) => {
                let t = self.ty(t, *pos)?;
                let size = self.const_int(size)?;
                let mut widths = Vec::new();
                let mut leaves = Vec::new();
                self.types.leaves(&t, 0, &self.out.headers, &mut leaves);
                for (_, lt) in leaves {
                    widths.push(lt.width(&self.types).unwrap_or(0));
                }
                let fields = match self.types.agg(&t) {
                    Some(a) if a.fields.len() == widths.len() => a
                        .fields
                        .iter()
                        .map(|f| (f.name.clone(), value_set_match(&f.annotations)))
                        .collect(),
                    _ => Vec::new(),
                };
                let cp = self.cp_name(annotations, name);
                self.out.value_sets.push(ir::ValueSet {
                    name: cp,
                    widths,
                    fields,
                    size: size.max(0) as usize,
                });
                self.bind(name, Binding::ValueSet(self.out.value_sets.len() - 1));
            }
            s => self.stmt(s, init),
        }
        Ok(())
    }

    /// An instance declared among a parser's or control's locals: an extern object, or a
    /// sub-parser or sub-control.
    pub(crate) fn local_instance(&mut self, i: &'a ast::Instance) -> R<Binding<'a>> {
        let Type::Named(kind, targs, _) = &i.ty else {
            return self.err(
                i.pos,
                format!("`{}`: an instance of an extern, parser or control expected", i.name),
            );
        };
        self.instance_of(kind, targs, &i.args, &i.name, &i.annotations, i.pos)
    }

    /// An instance `kind<targs>(args) name`.
    pub(crate) fn instance_of(
        &mut self,
        kind: &str,
        targs: &'a [Type],
        args: &'a [ast::Arg],
        name: &str,
        annotations: &[ast::Annotation],
        pos: Pos,
    ) -> R<Binding<'a>> {
        let mut type_args = Vec::new();
        for t in targs {
            type_args.push(self.ty(t, pos)?);
        }
        let prefix = self.cp_name(annotations, name);
        let u = |decl| BlockUse {
            decl,
            args,
            type_args: type_args.clone(),
            instance: Some(name.to_owned()),
            pos,
        };
        match self.lookup_type(kind).cloned() {
            Some(TypeBinding::Extern(_)) => self.extern_instance(kind, &type_args, args, name, annotations, pos),
            // A typedef of an extern type with its arguments (`typedef register<E> Table;`).
            Some(TypeBinding::Ty(Ty::Extern(x, xargs))) => {
                self.extern_instance(&x, &xargs, args, name, annotations, pos)
            }
            Some(TypeBinding::Control(c)) => {
                let inst = self.control_instance(c, &u(BlockDecl::Control(c)), prefix, Params::Own)?;
                Ok(Binding::Control(Rc::new(inst)))
            }
            Some(TypeBinding::Parser(p)) => {
                let inst = self.parser_instance(p, &u(BlockDecl::Parser(p)), prefix, Params::Own)?;
                Ok(Binding::Parser(Rc::new(inst)))
            }
            _ => self.err(pos, format!("`{kind}` is not an extern, parser or control with a body")),
        }
    }

    /// Applies a control instance: arguments copied in, its body, arguments copied out.
    pub(crate) fn apply_control(
        &mut self,
        c: &ControlInst<'a>,
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<()> {
        let bound = self.instance_args(&c.params, args, pos, code)?;
        let copy_out = self.copy_in_instance(&c.params, bound, pos, code)?;
        super::stmt::push_scope(code, c.body.clone(), copy_out);
        Ok(())
    }

    /// Evaluates the arguments of an instance's apply.
    fn instance_args(
        &mut self,
        params: &[InstParam<'a>],
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Vec<Bound>> {
        let decls: Vec<&'a ast::Param> = params.iter().map(|p| p.0).collect();
        // A packet argument is the packet itself: not a parameter with a slot.
        let args: Vec<&'a ast::Arg> = args
            .iter()
            .filter(|a| !matches!(&a.value.kind, ExprKind::Name(n) if matches!(self.lookup(n), Some(Binding::Packet))))
            .collect();
        let types: Vec<Option<Ty>> = params.iter().map(|p| Some(p.2.clone())).collect();
        self.bind_args(&decls, &types, &args, pos, code)
    }

    /// Copies arguments into an instance's parameter slots; returns the copy-out.
    fn copy_in_instance(
        &mut self,
        params: &[InstParam<'a>],
        bound: Vec<Bound>,
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Vec<Op>> {
        let mut copy_out = Vec::new();
        for ((decl, loc, t), b) in params.iter().zip(bound) {
            if let Some(v) = b.value {
                self.assign(&LVal::Loc(loc.clone(), t.clone()), v, pos, code)?;
            } else if decl.direction == Direction::Out {
                self.uninitialized(t, loc, code);
            }
            if super::copies_out(decl.direction)
                && let Some(back) = b.back
            {
                self.assign(&back, Val::Loc(loc.clone(), t.clone()), pos, &mut copy_out)?;
            }
        }
        Ok(copy_out)
    }

    /// Makes a parser instance named `prefix` (its states are lowered where it is applied).
    pub(crate) fn parser_instance(
        &mut self,
        p: &'a ast::ParserDecl,
        u: &BlockUse<'a>,
        prefix: String,
        binding: Params,
    ) -> R<ParserInst<'a>> {
        self.instantiating_block(&p.name, u.pos, |l| l.parser_instance_of(p, u, prefix, binding))
    }

    fn parser_instance_of(
        &mut self,
        p: &'a ast::ParserDecl,
        u: &BlockUse<'a>,
        prefix: String,
        binding: Params,
    ) -> R<ParserInst<'a>> {
        let scopes = self.enter_instance(&p.type_params, &p.ctor_params, u, &format!("parser `{}`", p.name))?;
        let saved = std::mem::replace(&mut self.prefix, prefix.clone());
        let r = self.with_scopes(scopes, |l| {
            l.push_scope();
            let params = l.bind_block_params(&p.params, &binding, u.pos)?;
            l.push_scope();
            let mut init = Vec::new();
            for s in &p.locals {
                carry_on(l.block_local(s, &mut init));
            }
            Ok(ParserInst {
                decl: p,
                name: prefix,
                params,
                scopes: l.scopes.clone(),
                init,
            })
        });
        self.prefix = saved;
        r
    }

    /// Lowers a parser instance's states into `states`; its `accept` goes to `accept`.
    /// Returns the index of its start state.
    pub(crate) fn parser_states(
        &mut self,
        inst: &ParserInst<'a>,
        accept: Target,
        states: &mut Vec<ir::State>,
    ) -> R<usize> {
        let p = inst.decl;
        let Some(start) = p.states.iter().find(|s| s.name == "start") else {
            return self.err(p.pos, format!("parser `{}` has no `start` state", p.name));
        };
        let mut order: Vec<&'a ast::State> = vec![start];
        order.extend(p.states.iter().filter(|s| s.name != "start"));
        let base = states.len();
        let index: HashMap<&str, usize> = order
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), base + i))
            .collect();
        for s in &order {
            states.push(ir::State {
                name: self.state_name(inst, &s.name),
                ops: Vec::new(),
                next: Next::To(Target::Reject),
            });
        }
        let saved = std::mem::replace(&mut self.prefix, inst.name.clone());
        for (i, s) in order.iter().enumerate() {
            let first = if i == 0 { inst.init.clone() } else { Vec::new() };
            carry_on(self.with_scopes(inst.scopes.clone(), |l| {
                l.state(inst, s, base + i, first, &index, accept, states)
            }));
        }
        self.prefix = saved;
        Ok(base)
    }

    /// A state's name in traces: a sub-parser's states carry its instance name.
    fn state_name(&self, inst: &ParserInst<'a>, state: &str) -> String {
        if inst.name.is_empty() {
            state.to_owned()
        } else {
            format!("{}.{state}", inst.name)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn state(
        &mut self,
        inst: &ParserInst<'a>,
        s: &'a ast::State,
        at: usize,
        first: Vec<Op>,
        index: &HashMap<&str, usize>,
        accept: Target,
        states: &mut Vec<ir::State>,
    ) -> R<()> {
        self.push_scope();
        let mut at = at;
        let mut ops = first;
        for st in &s.body {
            let sub = self.sub_parser_apply(st).or_else(|| self.sub_parser_type_apply(st));
            if let Some((sub, args, pos)) = sub {
                // The state ends here: the sub-parser's states run, then the rest of this one.
                let bound = self.instance_args(&sub.params, args, pos, &mut ops)?;
                let mut copy_out = Vec::new();
                let r = self.copy_in_instance(&sub.params, bound, pos, &mut ops);
                if let Ok(c) = r {
                    copy_out = c;
                }
                let cont = states.len();
                states.push(ir::State {
                    name: format!("{}.{}", states[at].name, "after"),
                    ops: Vec::new(),
                    next: Next::To(Target::Reject),
                });
                let sub_start = self.parser_states(&sub, Target::State(cont), states)?;
                states[at].ops = std::mem::take(&mut ops);
                states[at].next = Next::To(Target::State(sub_start));
                at = cont;
                ops = copy_out;
                continue;
            }
            self.stmt(st, &mut ops);
        }
        let target = |l: &mut Self, name: &str, pos: Pos| -> R<Target> {
            match name {
                "accept" => Ok(accept),
                "reject" => Ok(Target::Reject),
                n => match index.get(n) {
                    Some(i) => Ok(Target::State(*i)),
                    None => l.err(
                        pos,
                        format!("state `{n}` is not declared in parser `{}`", inst.decl.name),
                    ),
                },
            }
        };
        let next = match &s.transition {
            Transition::Direct(t, pos) => Next::To(target(self, t, *pos)?),
            Transition::Select { on, cases, .. } => {
                let mut keys = Vec::new();
                let mut types = Vec::new();
                for e in on {
                    let (k, t) = self.scalar(e, None, &mut ops)?;
                    keys.push(k);
                    types.push(t);
                }
                let mut lowered = Vec::new();
                for (set, t, pos) in cases {
                    let m = self.case_match(set, &types)?;
                    lowered.push((m, target(self, t, *pos)?));
                }
                Next::Select { keys, cases: lowered }
            }
        };
        self.pop_scope();
        states[at].ops = ops;
        states[at].next = next;
        Ok(())
    }

    /// `p.apply(packet, args)` as a statement, when `p` is a parser instance.
    fn sub_parser_apply(&self, s: &'a Stmt) -> Option<(Rc<ParserInst<'a>>, &'a [ast::Arg], Pos)> {
        let Stmt::Call(e, pos) = s else { return None };
        let ExprKind::Call(f, _, args) = &e.kind else {
            return None;
        };
        let ExprKind::Member(obj, m) = &f.kind else { return None };
        let ExprKind::Name(n) = &obj.kind else { return None };
        match (m.as_str(), self.lookup(n)) {
            ("apply", Some(Binding::Parser(p))) => Some((p.clone(), args.as_slice(), *pos)),
            _ => None,
        }
    }

    /// `P.apply(packet, args)` with `P` a parser type: an instance made here.
    fn sub_parser_type_apply(&mut self, s: &'a Stmt) -> Option<(Rc<ParserInst<'a>>, &'a [ast::Arg], Pos)> {
        let Stmt::Call(e, pos) = s else { return None };
        let ExprKind::Call(f, _, args) = &e.kind else {
            return None;
        };
        let ExprKind::Member(obj, m) = &f.kind else { return None };
        let ExprKind::Name(n) = &obj.kind else { return None };
        if m != "apply" || self.lookup(n).is_some() || !matches!(self.lookup_type(n), Some(TypeBinding::Parser(_))) {
            return None;
        }
        match self.instance_of(n, &[], &[], n, &[], *pos) {
            Ok(Binding::Parser(p)) => Some((p, args.as_slice(), *pos)),
            _ => None,
        }
    }

    /// A `select` case: key sets for the keys of `types`, or a value set.
    fn case_match(&mut self, set: &'a ast::Expr, types: &[Ty]) -> R<CaseMatch> {
        if let ExprKind::Name(n) = &set.kind
            && let Some(Binding::ValueSet(id)) = self.lookup(n).cloned()
        {
            return Ok(CaseMatch::ValueSet(id));
        }
        Ok(CaseMatch::Keys(self.key_sets(set, types)?))
    }

    /// The key sets of a select case or a table entry for keys of `types`.
    pub(crate) fn key_sets(&mut self, set: &'a ast::Expr, types: &[Ty]) -> R<Vec<KeySet>> {
        let items: Vec<&'a ast::Expr> = match &set.kind {
            ExprKind::List(items) => items.iter().collect(),
            ExprKind::Default | ExprKind::DontCare if types.len() != 1 => {
                return Ok(vec![KeySet::Any; types.len()]);
            }
            _ => vec![set],
        };
        if items.len() != types.len() {
            return self.err(set.pos, format!("{} values for {} keys", items.len(), types.len()));
        }
        let mut out = Vec::new();
        for (e, t) in items.iter().zip(types) {
            out.push(self.key_set(e, t)?);
        }
        Ok(out)
    }

    fn key_set(&mut self, e: &'a ast::Expr, t: &Ty) -> R<KeySet> {
        let w = t.width(&self.types).unwrap_or(128);
        let m = mask(w);
        let value = |l: &mut Self, e: &'a ast::Expr| -> R<u128> {
            let v = l.const_expr(e, Some(t))?;
            match v.constant().and_then(|c| c.bits(w)) {
                Some(b) => Ok(b & m),
                None => l.err(e.pos, format!("`{}`: a constant expected in a key set", e.text())),
            }
        };
        Ok(match &e.kind {
            ExprKind::Default | ExprKind::DontCare => KeySet::Any,
            ExprKind::Mask(v, k) => KeySet::Mask(value(self, v)?, value(self, k)?),
            ExprKind::Range(lo, hi) => KeySet::Range(value(self, lo)?, value(self, hi)?),
            _ => KeySet::Value(value(self, e)?),
        })
    }

    /// Lowers a top-level parser into a block of the program.
    pub(crate) fn top_parser(&mut self, u: &BlockUse<'a>, shared: Vec<Option<Val>>, kind: ir::BlockKind) -> R<()> {
        let BlockDecl::Parser(p) = u.decl else {
            return self.err(u.pos, "a parser expected here");
        };
        let name = u.instance.clone().unwrap_or_else(|| p.name.clone());
        self.block = Some(kind);
        let inst = self.parser_instance(p, u, name.clone(), Params::Shared(shared))?;
        let mut states = Vec::new();
        let top = ParserInst {
            name: String::new(),
            ..inst
        };
        self.parser_states(&top, Target::Accept, &mut states)?;
        self.out.blocks.push(ir::Block {
            kind,
            name,
            body: ir::BlockBody::Parser(states),
        });
        Ok(())
    }

    /// Lowers a top-level control into a block of the program.
    pub(crate) fn top_control(&mut self, u: &BlockUse<'a>, shared: Vec<Option<Val>>, kind: ir::BlockKind) -> R<()> {
        let BlockDecl::Control(c) = u.decl else {
            return self.err(u.pos, "a control expected here");
        };
        let name = u.instance.clone().unwrap_or_else(|| c.name.clone());
        self.block = Some(kind);
        let inst = self.control_instance(c, u, name.clone(), Params::Shared(shared))?;
        self.out.blocks.push(ir::Block {
            kind,
            name,
            body: ir::BlockBody::Control(inst.body),
        });
        Ok(())
    }

    /// The slots of the architecture's shared values of types `types`.
    pub(crate) fn shared_values(&mut self, types: &[Ty]) -> Vec<Val> {
        types
            .iter()
            .map(|t| {
                let s = self.alloc(t);
                Val::Loc(Loc::Fixed(s), t.clone())
            })
            .collect()
    }

    /// The types of a block's non-packet parameters.
    pub(crate) fn block_param_types(&mut self, u: &BlockUse<'a>) -> R<Vec<Ty>> {
        let (params, tparams): (&[ast::Param], &[String]) = match u.decl {
            BlockDecl::Parser(p) => (&p.params, &p.type_params),
            BlockDecl::Control(c) => (&c.params, &c.type_params),
        };
        let mut frame = Frame::default();
        for (p, t) in tparams.iter().zip(&u.type_args) {
            frame.types.insert(p.clone(), TypeBinding::Ty(t.clone()));
        }
        let mut scopes = self.global_scopes();
        scopes.push(frame);
        self.with_scopes(scopes, |l| {
            let mut out = Vec::new();
            for p in params {
                if matches!(&p.ty, Type::Named(n, _, _) if n == "packet_in" || n == "packet_out") {
                    continue;
                }
                out.push(l.ty(&p.ty, p.pos)?);
            }
            Ok(out)
        })
    }
}

/// A value set field's `@match(KIND)`; exact when it has none.
fn value_set_match(annotations: &[ast::Annotation]) -> ir::MatchKind {
    let kind = annotations
        .iter()
        .find(|a| a.name == "match")
        .map(|a| a.body.trim().to_owned())
        .unwrap_or_default();
    match kind.as_str() {
        "ternary" => ir::MatchKind::Ternary,
        "lpm" => ir::MatchKind::Lpm,
        "range" => ir::MatchKind::Range,
        "optional" => ir::MatchKind::Optional,
        _ => ir::MatchKind::Exact,
    }
}
