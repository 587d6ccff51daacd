//! Calls: actions and functions inlined where they are called, with P4's copy-in and
//! copy-out (arguments evaluated left to right, `out` and `inout` ones written back however
//! the callee ends, `exit` included); methods of packets, headers, stacks and tables; and the
//! calls the architecture's externs take (in the `externs` module).

use crate::front::ast::{self, Direction, ExprKind, Type};
use crate::front::source::Pos;
use crate::ir::{Binary, Expr, HeaderRef, Op};

use super::expr::{LVal, const_or_expr};
use super::ty::Ty;
use super::value::{CVal, Loc, Val};
use super::{Binding, Frame, Lowerer, R, Reported, TypeBinding, copies_out};

/// An action: its declaration and the names it sees.
pub(crate) struct ActionDef<'a> {
    pub(crate) decl: &'a ast::ActionDecl,
    /// The scopes where it was declared (None: the program's top level).
    pub(crate) scopes: Option<Vec<Frame<'a>>>,
    /// The control-plane prefix of its control.
    pub(crate) prefix: String,
}

/// A function with a body.
#[derive(Clone)]
pub(crate) struct FunctionDef<'a> {
    pub(crate) decl: &'a ast::FunctionDecl,
}

/// An argument evaluated for a parameter: its value, and where to write back.
pub(crate) struct Bound {
    pub(crate) value: Option<Val>,
    pub(crate) back: Option<LVal>,
}

/// The value a call without one gives.
pub(crate) fn void() -> Val {
    Val::Const(CVal::Agg(Vec::new()), Ty::Void)
}

impl<'a> Lowerer<'a> {
    /// A call in an expression or as a statement.
    pub(crate) fn call(&mut self, e: &'a ast::Expr, code: &mut Vec<Op>) -> R<Val> {
        let ExprKind::Call(f, targs, args) = &e.kind else {
            return self.err(e.pos, "a call expected");
        };
        match &f.kind {
            ExprKind::Name(n) => match self.lookup(n).cloned() {
                Some(Binding::Action(def)) => {
                    self.inline_action(&def, args, e.pos, code)?;
                    Ok(void())
                }
                Some(Binding::Function(defs)) => {
                    let Some(def) = defs.iter().find(|d| fits_arity(&d.decl.sig.params, args)).cloned() else {
                        return self.err(e.pos, format!("no function `{n}` takes {} argument(s)", args.len()));
                    };
                    self.inline_function(&def, targs, args, e.pos, code)
                }
                Some(Binding::ExternFn(sigs)) => self.extern_function(n, &sigs, targs, args, e.pos, code),
                Some(_) => self.err(e.pos, format!("`{n}` cannot be called")),
                None if self.lookup_type(n).is_some() => self.err(
                    e.pos,
                    format!("`{n}(...)` makes an instance: declare it (`{n}(...) name;`) and use it by name"),
                ),
                None => self.err(e.pos, format!("`{n}` is not declared")),
            },
            ExprKind::Member(obj, m) => self.method(e, obj, m, targs, args, code),
            _ => self.err(e.pos, format!("`{}` cannot be called", f.text())),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn method(
        &mut self,
        e: &'a ast::Expr,
        obj: &'a ast::Expr,
        m: &str,
        targs: &'a [Type],
        args: &'a [ast::Arg],
        code: &mut Vec<Op>,
    ) -> R<Val> {
        if matches!(
            m,
            "minSizeInBits" | "minSizeInBytes" | "maxSizeInBits" | "maxSizeInBytes"
        ) && args.is_empty()
        {
            return self.size_of(obj, m, e.pos);
        }
        if let ExprKind::Name(n) = &obj.kind {
            match self.lookup(n).cloned() {
                Some(Binding::Packet) => return self.packet_method(e, m, targs, args, code),
                Some(Binding::Table(t)) => {
                    if m != "apply" || !args.is_empty() {
                        return self.err(e.pos, format!("a table has `apply()`, not `{m}`"));
                    }
                    code.push(Op::Apply {
                        table: t.id,
                        hit: None,
                        action_run: None,
                    });
                    return Ok(void());
                }
                Some(Binding::Extern(x)) => return self.extern_method(&x, m, args, e.pos, code),
                Some(Binding::Control(c)) => {
                    if m != "apply" {
                        return self.err(e.pos, format!("a control has `apply(...)`, not `{m}`"));
                    }
                    self.apply_control(&c, args, e.pos, code)?;
                    return Ok(void());
                }
                Some(Binding::Parser(_)) => {
                    return self.err(e.pos, "a parser is applied from a parser state, as its own statement");
                }
                // `C.apply(args)`: an instance of control C made here, as `C() c; c.apply(args)`.
                None if m == "apply" && matches!(self.lookup_type(n), Some(TypeBinding::Control(_))) => {
                    let Binding::Control(c) = self.instance_of(n, &[], &[], n, &[], e.pos)? else {
                        return self.err(e.pos, format!("`{n}` is not a control"));
                    };
                    self.apply_control(&c, args, e.pos, code)?;
                    return Ok(void());
                }
                _ => {}
            }
        }
        self.value_method(obj, m, args, e.pos, code)
    }

    /// `T.minSizeInBits()` and friends, of a type or of a value's type.
    fn size_of(&mut self, obj: &'a ast::Expr, m: &str, pos: Pos) -> R<Val> {
        let t = match &obj.kind {
            ExprKind::Type(t) => self.ty(t, pos)?,
            ExprKind::Name(n) if self.lookup(n).is_none() && self.lookup_type(n).is_some() => {
                match self.lookup_type(n).cloned() {
                    Some(TypeBinding::Ty(t)) => t,
                    _ => return self.err(pos, format!("`{n}` has no size in bits")),
                }
            }
            _ => {
                // Only its type counts: the code that computes it is not kept.
                let v = self.expr(obj, None, &mut Vec::new())?;
                match v.ty() {
                    Some(t) => t.clone(),
                    None => return self.err(pos, format!("`{m}` of a value of no type")),
                }
            }
        };
        let bits = if m.starts_with("max") {
            self.types.max_bits(&t)
        } else {
            self.types.bits(&t)
        };
        let Some(bits) = bits else {
            let n = self.types.name(&t);
            return self.err(pos, format!("{n} has no size in bits"));
        };
        let v = if m.ends_with("Bytes") { bits.div_ceil(8) } else { bits };
        Ok(Val::Const(CVal::Int(i128::from(v)), Ty::InfInt))
    }

    /// Methods of values: headers, unions and stacks.
    fn value_method(
        &mut self,
        obj: &'a ast::Expr,
        m: &str,
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        // A union member: making it valid makes the others invalid.
        let mut union_siblings: Vec<HeaderRef> = Vec::new();
        let v = match &obj.kind {
            ExprKind::Member(b, f) => {
                let base = self.expr(b, None, code)?;
                union_siblings.extend(self.union_siblings(&base, f));
                self.field_of(base, f, obj.pos)?
            }
            _ => self.expr(obj, None, code)?,
        };
        match (m, &v) {
            ("isValid", Val::Loc(loc, Ty::Header(_))) if args.is_empty() => {
                Ok(Val::Expr(Expr::IsValid(loc.header()), Ty::Bool))
            }
            ("isValid", Val::Loc(loc, t @ Ty::Union(_))) if args.is_empty() => {
                let mut hs = Vec::new();
                self.headers_at(t, loc, &mut hs);
                let mut e = Expr::Const(0);
                for h in hs {
                    let v = Expr::IsValid(h);
                    e = match e {
                        Expr::Const(0) => v,
                        e => Expr::Binary(Binary::LogicalOr, Box::new(e), Box::new(v), 1, false),
                    };
                }
                Ok(const_or_expr(e, Ty::Bool))
            }
            ("setValid" | "setInvalid", Val::Loc(loc, Ty::Header(_))) if args.is_empty() => {
                let valid = m == "setValid";
                if valid {
                    for s in union_siblings {
                        code.push(Op::SetValid(s, false));
                    }
                }
                code.push(Op::SetValid(loc.header(), valid));
                Ok(super::call::void())
            }
            ("push_front" | "pop_front", Val::Loc(Loc::Fixed(s), Ty::Stack(elem, n))) => {
                let [count] = args else {
                    return self.err(pos, format!("{m}(count) expected"));
                };
                let c = self.const_int(&count.value)?;
                if c < 0 {
                    return self.err(pos, format!("{m} by {c}"));
                }
                let stack = self.stack_ref(*s, elem, *n);
                code.push(if m == "push_front" {
                    Op::PushFront(stack, c as u32)
                } else {
                    Op::PopFront(stack, c as u32)
                });
                Ok(super::call::void())
            }
            _ => {
                let t = v
                    .ty()
                    .map(|t| self.types.name(t))
                    .unwrap_or_else(|| "this value".into());
                self.err(pos, format!("{t} has no method `{m}` that intlab knows"))
            }
        }
    }

    /// Evaluates `args` for `params` in order, in the caller's scope: values to copy in, places
    /// to copy out. `types` are the parameters' types (None where generic).
    pub(crate) fn bind_args(
        &mut self,
        params: &[&'a ast::Param],
        types: &[Option<Ty>],
        args: &[&'a ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Vec<Bound>> {
        let ordered = self.order_args(params, args, pos)?;
        let mut out = Vec::new();
        for (i, (p, a)) in params.iter().zip(ordered).enumerate() {
            let t = types.get(i).cloned().flatten();
            let Some(a) = a else {
                // An @optional parameter left out.
                out.push(Bound {
                    value: None,
                    back: None,
                });
                continue;
            };
            if matches!(a.kind, ExprKind::DontCare) {
                out.push(Bound {
                    value: None,
                    back: None,
                });
                continue;
            }
            match p.direction {
                Direction::Out | Direction::InOut => {
                    let lv = self.lvalue(a, code)?;
                    let value = if p.direction == Direction::InOut {
                        match &lv {
                            LVal::Loc(l, lt) => Some(Val::Loc(l.clone(), lt.clone())),
                            LVal::Slice(l, _, lo, w) => Some(Val::Expr(
                                super::expr::fold(Expr::Slice(Box::new(l.read()), *lo, *w)),
                                Ty::Bits(*w, false),
                            )),
                        }
                    } else {
                        None
                    };
                    // Later arguments must not change what an earlier `inout` argument copied.
                    let value = match value {
                        Some(v) if p.direction == Direction::InOut => {
                            let vt = v.ty().cloned().unwrap_or(Ty::InfInt);
                            let loc = self.materialize_copy(v, &vt, a.pos, code)?;
                            Some(Val::Loc(loc, vt))
                        }
                        v => v,
                    };
                    out.push(Bound { value, back: Some(lv) });
                }
                Direction::In | Direction::None => {
                    let mut later = Vec::new();
                    let v = self.expr(a, t.as_ref(), &mut later)?;
                    code.extend(later);
                    let v = match (&v, &t) {
                        (Val::Loc(..) | Val::Expr(..), _) => {
                            let vt = v.ty().cloned().expect("typed");
                            let loc = self.materialize_copy(v, &vt, a.pos, code)?;
                            Val::Loc(loc, vt)
                        }
                        _ => v,
                    };
                    out.push(Bound {
                        value: Some(v),
                        back: None,
                    });
                }
            }
        }
        Ok(out)
    }

    /// A copy of `v` in a temporary (copy-in: the callee's writes must not reach the caller's
    /// variable, nor the caller's later writes the value passed).
    fn materialize_copy(&mut self, v: Val, t: &Ty, pos: Pos, code: &mut Vec<Op>) -> R<Loc> {
        let tmp = Loc::Fixed(self.alloc(t));
        self.assign(&LVal::Loc(tmp.clone(), t.clone()), v, pos, code)?;
        Ok(tmp)
    }

    /// Arguments matched to parameters by position or by name, defaults filled in.
    fn order_args(
        &mut self,
        params: &[&'a ast::Param],
        args: &[&'a ast::Arg],
        pos: Pos,
    ) -> R<Vec<Option<&'a ast::Expr>>> {
        let mut out: Vec<Option<&'a ast::Expr>> = vec![None; params.len()];
        let named = args.iter().any(|a| a.name.is_some());
        if named {
            for a in args {
                let Some(n) = &a.name else {
                    return self.err(pos, "arguments are all named or none");
                };
                match params.iter().position(|p| &p.name == n) {
                    Some(i) => out[i] = Some(&a.value),
                    None => return self.err(a.value.pos, format!("no parameter `{n}`")),
                }
            }
        } else {
            if args.len() > params.len() {
                return self.err(
                    pos,
                    format!("{} arguments given, {} expected", args.len(), params.len()),
                );
            }
            for (i, a) in args.iter().enumerate() {
                out[i] = Some(&a.value);
            }
        }
        for (i, p) in params.iter().enumerate() {
            if out[i].is_none() {
                if let Some(d) = &p.default {
                    out[i] = Some(d);
                } else if !p.annotations.iter().any(|a| a.name == "optional") {
                    return self.err(pos, format!("no argument for parameter `{}`", p.name));
                }
            }
        }
        Ok(out)
    }

    /// Binds the parameters of an inlined callee to fresh slots, copying in what was passed;
    /// returns the copy-out statements.
    pub(crate) fn enter_params(
        &mut self,
        params: &[ast::Param],
        types: &[Ty],
        bound: Vec<Bound>,
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Vec<Op>> {
        let mut copy_out = Vec::new();
        for ((p, t), b) in params.iter().zip(types).zip(bound) {
            let loc = Loc::Fixed(self.alloc(t));
            if let Some(v) = b.value {
                self.assign(&LVal::Loc(loc.clone(), t.clone()), v, pos, code)?;
            } else if p.direction == Direction::Out {
                // An `out` parameter starts uninitialized: its headers invalid.
                let mut hs = Vec::new();
                self.headers_at(t, &loc, &mut hs);
                code.extend(hs.into_iter().map(|h| Op::SetValid(h, false)));
            }
            if copies_out(p.direction)
                && let Some(back) = b.back
            {
                self.assign(&back, Val::Loc(loc.clone(), t.clone()), pos, &mut copy_out)?;
            }
            self.bind(&p.name, Binding::Val(Val::Loc(loc, t.clone())));
        }
        Ok(copy_out)
    }

    /// Inlines a direct call of an action.
    pub(crate) fn inline_action(
        &mut self,
        def: &ActionDef<'a>,
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<()> {
        let a = def.decl;
        self.used.insert(action_key(def));
        if self.calls.iter().any(|c| c == &a.name) {
            return self.err(pos, format!("action `{}` calls itself: P4 has no recursion", a.name));
        }
        let scopes = def.scopes.clone().unwrap_or_else(|| self.global_scopes());
        let types = self.with_scopes(scopes.clone(), |l| l.param_types(&a.params))?;
        self.note_called_action(def);
        let args: Vec<&'a ast::Arg> = args.iter().collect();
        let params: Vec<&'a ast::Param> = a.params.iter().collect();
        let bound = self.bind_args(
            &params,
            &types.iter().cloned().map(Some).collect::<Vec<_>>(),
            &args,
            pos,
            code,
        )?;
        let prefix = def.prefix.clone();
        self.calls.push(a.name.clone());
        let r = self.with_scopes(scopes, |l| {
            l.push_scope();
            let saved = std::mem::replace(&mut l.prefix, prefix);
            let mut entry = Vec::new();
            let r = l
                .enter_params(&a.params, &types, bound, pos, &mut entry)
                .map(|copy_out| {
                    l.returns.push(None);
                    l.action_bodies += 1;
                    let body = l.block(&a.body);
                    l.action_bodies -= 1;
                    l.returns.pop();
                    super::stmt::push_scope(&mut entry, body, copy_out);
                    entry
                });
            l.prefix = saved;
            l.pop_scope();
            r
        });
        self.calls.pop();
        code.extend(r?);
        Ok(())
    }

    /// Keeps the control-plane name of an action a control calls directly, for P4Info.
    fn note_called_action(&mut self, def: &ActionDef<'a>) {
        let a = def.decl;
        let saved = std::mem::replace(&mut self.prefix, def.prefix.clone());
        let name = self.cp_name(&a.annotations, &a.name);
        self.prefix = saved;
        if self.action_bodies > 0
            || a.annotations.iter().any(|x| x.name == "hidden")
            || self.out.called_actions.iter().any(|c| c.name == name)
        {
            return;
        }
        self.out.called_actions.push(crate::ir::CalledAction {
            name,
            annotations: ast::p4info_annotations(&a.annotations),
        });
    }

    /// The types of parameters, in the current scope.
    pub(crate) fn param_types(&mut self, params: &'a [ast::Param]) -> R<Vec<Ty>> {
        let mut out = Vec::new();
        let mut failed = false;
        for p in params {
            match self.ty(&p.ty, p.pos) {
                Ok(t) => out.push(t),
                Err(_) => failed = true,
            }
        }
        if failed { Err(Reported) } else { Ok(out) }
    }

    /// Inlines a call of a function; its value is in a temporary.
    fn inline_function(
        &mut self,
        def: &FunctionDef<'a>,
        targs: &'a [Type],
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        let f = def.decl;
        let name = &f.sig.name;
        self.used.insert(format!("fn {name}"));
        if self.calls.iter().any(|c| c == name) {
            return self.err(pos, format!("function `{name}` calls itself: P4 has no recursion"));
        }
        let mut given = Vec::new();
        for t in targs {
            given.push(self.ty(t, pos)?);
        }
        let scopes = self.global_scopes();
        // Parameter types with the type parameters not yet known.
        let tparams = f.sig.type_params.clone();
        let open: Vec<Option<Ty>> = self.with_scopes(scopes.clone(), |l| {
            l.push_scope();
            for (i, tp) in tparams.iter().enumerate() {
                let t = given.get(i).cloned().unwrap_or(Ty::Var(tp.clone()));
                l.bind_type(tp, TypeBinding::Ty(t));
            }
            let r = f
                .sig
                .params
                .iter()
                .map(|p| l.ty(&p.ty, p.pos).ok().filter(|t| !contains_var(t)))
                .collect();
            l.pop_scope();
            r
        });
        let args: Vec<&'a ast::Arg> = args.iter().collect();
        let params: Vec<&'a ast::Param> = f.sig.params.iter().collect();
        let bound = self.bind_args(&params, &open, &args, pos, code)?;
        // Type parameters inferred from what was passed.
        let mut inferred: Vec<(String, Ty)> = tparams
            .iter()
            .enumerate()
            .filter_map(|(i, tp)| given.get(i).map(|t| (tp.clone(), t.clone())))
            .collect();
        for (p, b) in f.sig.params.iter().zip(&bound) {
            if let Type::Named(n, a, _) = &p.ty
                && a.is_empty()
                && tparams.contains(n)
                && !inferred.iter().any(|(x, _)| x == n)
            {
                let t = b
                    .value
                    .as_ref()
                    .and_then(|v| v.ty().cloned())
                    .or_else(|| b.back.as_ref().map(LVal::ty));
                if let Some(t) = t {
                    inferred.push((n.clone(), t));
                }
            }
        }
        self.calls.push(name.clone());
        let r = self.with_scopes(scopes, |l| {
            l.push_scope();
            for (n, t) in &inferred {
                l.bind_type(n, TypeBinding::Ty(t.clone()));
            }
            let r = (|| {
                let types = l.param_types(&f.sig.params)?;
                let ret = match &f.sig.ret {
                    Some(t) => l.ty(t, f.sig.pos)?,
                    None => Ty::Void,
                };
                let mut entry = Vec::new();
                let copy_out = l.enter_params(&f.sig.params, &types, bound, pos, &mut entry)?;
                let ret_loc = (ret != Ty::Void).then(|| Loc::Fixed(l.alloc(&ret)));
                l.returns.push(ret_loc.clone().map(|loc| (loc, ret.clone())));
                let body = l.block(&f.body);
                l.returns.pop();
                super::stmt::push_scope(&mut entry, body, copy_out);
                Ok((entry, ret_loc.map(|loc| Val::Loc(loc, ret))))
            })();
            l.pop_scope();
            r
        });
        self.calls.pop();
        let (entry, value) = r?;
        code.extend(entry);
        Ok(value.unwrap_or_else(void))
    }

    /// Methods of `packet_in` and `packet_out`.
    fn packet_method(
        &mut self,
        e: &'a ast::Expr,
        m: &str,
        targs: &'a [Type],
        args: &'a [ast::Arg],
        code: &mut Vec<Op>,
    ) -> R<Val> {
        let pos = e.pos;
        match (m, args) {
            ("extract", [h]) => {
                let target = self.extract_target(&h.value, targs, pos, code)?;
                self.extract_into(target, None, pos, code)?;
                Ok(void())
            }
            ("extract", [h, n]) => {
                let target = self.extract_target(&h.value, targs, pos, code)?;
                let (bits, _) = self.scalar(&n.value, Some(&Ty::Bits(32, false)), code)?;
                self.extract_into(target, Some(bits), pos, code)?;
                Ok(void())
            }
            ("lookahead", []) => {
                let Some(t) = targs.first() else {
                    return self.err(pos, "lookahead needs its type: lookahead<T>()");
                };
                let t = self.ty(t, pos)?;
                self.lookahead(&t, pos, code)
            }
            ("advance", [n]) => {
                let (bits, _) = self.scalar(&n.value, Some(&Ty::Bits(32, false)), code)?;
                code.push(Op::Advance(bits));
                Ok(void())
            }
            ("length", []) => Ok(Val::Expr(Expr::PacketLength, Ty::Bits(32, false))),
            ("emit", [h]) => {
                let v = self.expr(&h.value, None, code)?;
                let Some(t) = v.ty().cloned() else {
                    return self.err(pos, "emit takes a header, a stack, a union or a struct of them");
                };
                let loc = self.materialize(v, &t, pos, code)?;
                self.emit(&t, &loc, pos, code)?;
                Ok(void())
            }
            _ => self.err(pos, format!("a packet has no `{m}` with {} argument(s)", args.len())),
        }
    }

    /// The header an `extract` writes, with the siblings to make invalid when it is a union
    /// member.
    fn extract_target(
        &mut self,
        h: &'a ast::Expr,
        targs: &'a [Type],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<(Loc, Ty, Vec<HeaderRef>)> {
        if matches!(h.kind, ExprKind::DontCare) {
            // `extract<T>(_)`: into a header of the program's nobody reads.
            let Some(t) = targs.first() else {
                return self.err(pos, "extract<T>(_) needs its type");
            };
            let t = self.ty(t, pos)?;
            let loc = Loc::Fixed(self.alloc(&t));
            return Ok((loc, t, Vec::new()));
        }
        let mut siblings = Vec::new();
        if let ExprKind::Member(b, f) = &h.kind {
            let base = self.expr(b, None, code)?;
            siblings.extend(self.union_siblings(&base, f));
            let v = self.field_of(base, f, h.pos)?;
            return match v {
                Val::Loc(l, t) => Ok((l, t, siblings)),
                _ => self.err(h.pos, "extract writes a header"),
            };
        }
        match self.lvalue(h, code)? {
            LVal::Loc(l, t) => Ok((l, t, siblings)),
            LVal::Slice(..) => self.err(h.pos, "extract writes a header"),
        }
    }

    fn extract_into(
        &mut self,
        (loc, t, siblings): (Loc, Ty, Vec<HeaderRef>),
        bits: Option<Expr>,
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<()> {
        let Ty::Header(h) = t else {
            let n = self.types.name(&t);
            return self.err(pos, format!("extract writes a header, not {n}"));
        };
        let has_varbit = self.out.headers[h].varbit.is_some();
        let r = match &loc {
            // `stack.next`: the element at the stack's next index, which then moves on.
            Loc::Elem(st, Expr::Slot(s), off) if *s == st.base => HeaderRef::Next(*st, *off),
            l => l.header(),
        };
        for s in siblings {
            code.push(Op::SetValid(s, false));
        }
        match (bits, has_varbit) {
            (None, false) => code.push(Op::Extract(r, h)),
            (Some(b), true) => code.push(Op::ExtractVar(r, h, b)),
            (None, true) => code.push(Op::ExtractVar(r, h, Expr::Const(0))),
            (Some(_), false) => {
                let n = self.types.headers[h].name.clone();
                return self.err(
                    pos,
                    format!("extract with a length needs a header with a varbit; `{n}` has none"),
                );
            }
        }
        Ok(())
    }

    /// `packet.lookahead<T>()`: the bits at the parser's cursor as a value of `t`.
    fn lookahead(&mut self, t: &Ty, pos: Pos, code: &mut Vec<Op>) -> R<Val> {
        let Some(need) = self.types.bits(t) else {
            let n = self.types.name(t);
            return self.err(pos, format!("lookahead of {n}: a type of fixed width expected"));
        };
        if let Some(w) = t.width(&self.types) {
            return Ok(Val::Expr(
                Expr::Lookahead {
                    skip: 0,
                    width: w,
                    need,
                },
                t.clone(),
            ));
        }
        let loc = Loc::Fixed(self.alloc(t));
        let mut leaves = Vec::new();
        self.types.leaves(t, 0, &self.out.headers, &mut leaves);
        let mut skip = 0u32;
        for (off, lt) in leaves {
            // A header's validity slot is set, not read.
            let is_validity = matches!(t, Ty::Header(_)) && off == 0 || self.is_validity(t, off);
            if is_validity {
                code.push(Op::Set(loc.at(off).place(1), Expr::Const(1)));
                continue;
            }
            let w = lt.width(&self.types).unwrap_or(0);
            code.push(Op::Set(
                loc.at(off).place(w),
                Expr::Lookahead {
                    skip: skip as u16,
                    width: w,
                    need,
                },
            ));
            skip += u32::from(w);
        }
        Ok(Val::Loc(loc, t.clone()))
    }

    /// Whether slot `off` of a value of `t` is a header's validity.
    fn is_validity(&self, t: &Ty, off: u32) -> bool {
        let mut hs = Vec::new();
        self.types.headers_in(t, 0, &self.out.headers, &mut hs);
        hs.iter().any(|(b, _)| *b == off)
    }

    /// `packet.emit(v)`: a header, or each header of a union, stack or struct in order.
    pub(crate) fn emit(&mut self, t: &Ty, loc: &Loc, pos: Pos, code: &mut Vec<Op>) -> R<()> {
        match t {
            Ty::Header(h) => code.push(Op::Emit(loc.header(), *h)),
            Ty::Union(_) | Ty::Struct(_) => {
                let a = self.types.agg(t).cloned().expect("an aggregate");
                let mut off = 0;
                for f in &a.fields {
                    self.emit(&f.ty, &loc.at(off), pos, code)?;
                    off += self.size(&f.ty);
                }
            }
            Ty::Stack(e, n) => {
                let stride = self.size(e);
                for i in 0..*n {
                    self.emit(e, &loc.at(1 + i * stride), pos, code)?;
                }
            }
            _ => {
                let n = self.types.name(t);
                return self.err(
                    pos,
                    format!("emit takes headers, unions, stacks and structs of them, not {n}"),
                );
            }
        }
        Ok(())
    }
}

/// Whether a call with `args` can be of a callee with `params`.
fn fits_arity(params: &[ast::Param], args: &[ast::Arg]) -> bool {
    let required = params
        .iter()
        .filter(|p| p.default.is_none() && !p.annotations.iter().any(|a| a.name == "optional"))
        .count();
    args.len() >= required && args.len() <= params.len()
}

/// Whether a type still has a type variable in it.
fn contains_var(t: &Ty) -> bool {
    match t {
        Ty::Var(_) => true,
        Ty::Stack(e, _) => contains_var(e),
        Ty::Tuple(items) | Ty::Extern(_, items) => items.iter().any(contains_var),
        _ => false,
    }
}

/// How [`Lowerer::check_unused`] knows an action was lowered: `action Control.name`, or
/// `action name` at top level.
pub(crate) fn action_key(def: &ActionDef<'_>) -> String {
    if def.prefix.is_empty() {
        format!("action {}", def.decl.name)
    } else {
        format!("action {}.{}", def.prefix, def.decl.name)
    }
}
