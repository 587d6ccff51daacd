//! Statements: assignments (to union members too), conditionals, switches on values and on a
//! table's action, loops, local declarations, `exit` and `return`. A statement with an error
//! is reported and left out, and the rest goes on, so one run reports every error.

use crate::front::ast::{self, ExprKind, Stmt, SwitchLabel};
use crate::front::source::Pos;
use crate::ir::{Binary, Expr, Op};

use super::expr::LVal;
use super::ty::Ty;
use super::value::{CVal, Loc, Val};
use super::{Binding, Lowerer, R};

impl<'a> Lowerer<'a> {
    /// Lowers statements in a scope of their own.
    pub(crate) fn block(&mut self, stmts: &'a [Stmt]) -> Vec<Op> {
        self.push_scope();
        let mut code = Vec::new();
        for s in stmts {
            self.stmt(s, &mut code);
        }
        self.pop_scope();
        code
    }

    /// Lowers one statement into `code`; an error is recorded and the statement left out.
    pub(crate) fn stmt(&mut self, s: &'a Stmt, code: &mut Vec<Op>) {
        let mut mine = Vec::new();
        if self.stmt_inner(s, &mut mine).is_ok() {
            code.extend(mine);
        }
    }

    fn stmt_inner(&mut self, s: &'a Stmt, code: &mut Vec<Op>) -> R<()> {
        match s {
            Stmt::Assign(lhs, rhs, pos) => self.assignment(lhs, rhs, *pos, code),
            Stmt::CompoundAssign(op, lhs, rhs, pos) => {
                let lv = self.lvalue(lhs, code)?;
                let current = match &lv {
                    LVal::Loc(l, t) => Val::Loc(l.clone(), t.clone()),
                    LVal::Slice(l, _, lo, w) => Val::Expr(
                        super::expr::fold(Expr::Slice(Box::new(l.read()), *lo, *w)),
                        Ty::Bits(*w, false),
                    ),
                };
                let t = lv.ty();
                let want = if matches!(*op, "<<" | ">>") { None } else { Some(&t) };
                let mut later = Vec::new();
                let rv = self.expr(rhs, want, &mut later)?;
                let current = self.keep_before(current, &later, code);
                code.extend(later);
                let v = self.combine(op, current, rv, *pos, Some(&t), code)?;
                self.assign(&lv, v, *pos, code)
            }
            Stmt::Call(e, pos) => {
                if let ExprKind::Call(..) = &e.kind {
                    self.call(e, code)?;
                    Ok(())
                } else {
                    self.err(*pos, "a call expected")
                }
            }
            Stmt::If(c, then, otherwise, _) => {
                let c = self.condition(c, code)?;
                let then = self.block(std::slice::from_ref(&**then));
                let otherwise = match otherwise {
                    Some(o) => self.block(std::slice::from_ref(&**o)),
                    None => Vec::new(),
                };
                match c {
                    Expr::Const(v) => code.extend(if v != 0 { then } else { otherwise }),
                    c => code.push(Op::If(c, then, otherwise)),
                }
                Ok(())
            }
            Stmt::Block(stmts, _) => {
                let b = self.block(stmts);
                code.extend(b);
                Ok(())
            }
            Stmt::Switch(on, cases, pos) => self.switch(on, cases, *pos, code),
            Stmt::Exit(_) => {
                code.push(Op::Exit);
                Ok(())
            }
            Stmt::Return(e, pos) => {
                let ret = self.returns.last().cloned().flatten();
                match (e, ret) {
                    (Some(e), Some((loc, t))) => {
                        let v = self.expr(e, Some(&t), code)?;
                        self.assign(&LVal::Loc(loc, t), v, *pos, code)?;
                    }
                    (None, None) => {}
                    (Some(_), None) => {
                        return self.err(*pos, "`return` with a value outside a function that returns one");
                    }
                    (None, Some(_)) => return self.err(*pos, "`return` without the function's value"),
                }
                code.push(Op::Return);
                Ok(())
            }
            Stmt::Var(_, ty, name, init, pos) => {
                let t = self.ty(ty, *pos)?;
                if matches!(t, Ty::Extern(..) | Ty::Block(_) | Ty::Void | Ty::Str | Ty::DontCare) {
                    let n = self.types.name(&t);
                    return self.err(*pos, format!("`{name}`: a variable cannot be of {n}"));
                }
                let loc = Loc::Fixed(self.alloc(&t));
                match init {
                    Some(e) => {
                        let v = self.expr(e, Some(&t), code)?;
                        self.assign(&LVal::Loc(loc.clone(), t.clone()), v, *pos, code)?;
                    }
                    None => self.uninitialized(&t, &loc, code),
                }
                self.bind(name, Binding::Val(Val::Loc(loc, t)));
                Ok(())
            }
            Stmt::Const(k) => {
                let t = self.ty(&k.ty, k.pos)?;
                let v = self.const_expr(&k.value, Some(&t))?;
                self.bind(&k.name, Binding::Val(v));
                Ok(())
            }
            Stmt::Instance(i) => self.err(i.pos, "instances are declared among a parser's or control's locals"),
            Stmt::ValueSet(_, _, _, _, pos) => self.err(*pos, "value sets are declared among a parser's locals"),
            Stmt::For {
                init,
                cond,
                update,
                body,
                ..
            } => {
                self.push_scope();
                let r = (|| {
                    for s in init {
                        self.stmt_inner(s, code)?;
                    }
                    let mut prep = Vec::new();
                    let cond = match cond {
                        Some(c) => self.condition(c, &mut prep)?,
                        None => Expr::Const(1),
                    };
                    let mut up = Vec::new();
                    for s in update {
                        self.stmt_inner(s, &mut up)?;
                    }
                    let body = self.block(std::slice::from_ref(&**body));
                    code.push(Op::Loop {
                        prep,
                        cond,
                        body,
                        update: up,
                    });
                    Ok(())
                })();
                self.pop_scope();
                r
            }
            Stmt::ForIn {
                ty,
                var,
                range,
                body,
                pos,
            } => self.for_in(ty.as_ref(), var, range, body, *pos, code),
            Stmt::Break(_) => {
                code.push(Op::Break);
                Ok(())
            }
            Stmt::Continue(_) => {
                code.push(Op::Continue);
                Ok(())
            }
            Stmt::Empty(_) => Ok(()),
        }
    }

    /// What a variable declared without a value holds: its headers invalid, its stacks empty.
    pub(crate) fn uninitialized(&mut self, t: &Ty, loc: &Loc, code: &mut Vec<Op>) {
        let mut hs = Vec::new();
        self.headers_at(t, loc, &mut hs);
        code.extend(hs.into_iter().map(|h| Op::SetValid(h, false)));
        if let Ty::Stack(..) = t {
            code.push(Op::Set(loc.place(32), Expr::Const(0)));
        }
    }

    /// `lhs = rhs`; a union member that becomes valid makes the union's others invalid.
    fn assignment(&mut self, lhs: &'a ast::Expr, rhs: &'a ast::Expr, pos: Pos, code: &mut Vec<Op>) -> R<()> {
        let mut siblings = Vec::new();
        let lv = if let ExprKind::Member(b, f) = &lhs.kind {
            let base = self.expr(b, None, code)?;
            siblings.extend(self.union_siblings(&base, f));
            match self.field_of(base, f, lhs.pos)? {
                Val::Loc(Loc::Elem(st, i, o), t) => {
                    let i = self.snapshot(i, code);
                    LVal::Loc(Loc::Elem(st, i, o), t)
                }
                Val::Loc(l, t) => LVal::Loc(l, t),
                _ => return self.err(lhs.pos, format!("`{}` cannot be written", lhs.text())),
            }
        } else {
            self.lvalue(lhs, code)?
        };
        let t = lv.ty();
        let v = self.expr(rhs, Some(&t), code)?;
        self.assign(&lv, v, pos, code)?;
        if let (false, LVal::Loc(loc, Ty::Header(_))) = (siblings.is_empty(), &lv) {
            let invalidate = siblings.into_iter().map(|s| Op::SetValid(s, false)).collect();
            code.push(Op::If(Expr::IsValid(loc.header()), invalidate, Vec::new()));
        }
        Ok(())
    }

    fn switch(&mut self, on: &'a ast::Expr, cases: &'a [ast::SwitchCase], pos: Pos, code: &mut Vec<Op>) -> R<()> {
        // `switch (t.apply().action_run)`: labels are the table's actions.
        if let ExprKind::Member(call, m) = &on.kind
            && m == "action_run"
            && let ExprKind::Call(f, _, _) = &call.kind
            && let ExprKind::Member(t, apply) = &f.kind
            && apply == "apply"
            && let ExprKind::Name(tn) = &t.kind
            && let Some(Binding::Table(table)) = self.lookup(tn).cloned()
        {
            let slot = self.alloc(&Ty::Bits(32, false));
            code.push(Op::Apply {
                table: table.id,
                hit: None,
                action_run: Some(slot),
            });
            let mut labels = Vec::new();
            for c in cases {
                labels.push(match &c.label {
                    SwitchLabel::Default => None,
                    SwitchLabel::Expr(e) => {
                        let ExprKind::Name(n) = &e.kind else {
                            return self.err(e.pos, "a case of `action_run` is an action's name");
                        };
                        match table.actions.iter().find(|(a, _)| a == n) {
                            Some((_, id)) => Some(*id as u128),
                            None => return self.err(e.pos, format!("action `{n}` is not one of table `{tn}`'s")),
                        }
                    }
                });
            }
            return self.switch_cases(Expr::Slot(slot), cases, labels, code);
        }
        let (e, t) = self.scalar(on, None, code)?;
        let mut labels = Vec::new();
        for c in cases {
            labels.push(match &c.label {
                SwitchLabel::Default => None,
                SwitchLabel::Expr(l) => {
                    let v = self.const_expr(l, Some(&t))?;
                    let w = t.width(&self.types).unwrap_or(128);
                    match v.constant().and_then(|c| c.bits(w)) {
                        Some(b) => Some(b),
                        None => return self.err(l.pos, "a case label must be a constant"),
                    }
                }
            });
        }
        if !t.is_scalar() {
            return self.err(pos, "a switch on a value of no width");
        }
        self.switch_cases(e, cases, labels, code)
    }

    /// The cases of a switch; a label without a body shares the next one's.
    fn switch_cases(
        &mut self,
        on: Expr,
        cases: &'a [ast::SwitchCase],
        labels: Vec<Option<u128>>,
        code: &mut Vec<Op>,
    ) -> R<()> {
        let mut out: Vec<(Vec<u128>, Vec<Op>)> = Vec::new();
        let mut default = Vec::new();
        let mut pending: Vec<Option<u128>> = Vec::new();
        for (c, label) in cases.iter().zip(labels) {
            pending.push(label);
            let Some(body) = &c.body else { continue };
            let ops = self.block(body);
            let values: Vec<u128> = pending.iter().flatten().copied().collect();
            let is_default = pending.iter().any(Option::is_none);
            pending.clear();
            if is_default {
                default = ops.clone();
            }
            if !values.is_empty() {
                out.push((values, ops));
            }
        }
        code.push(Op::Switch(on, out, default));
        Ok(())
    }

    /// `for (T x in lo .. hi)` and `for (x in list)`.
    fn for_in(
        &mut self,
        ty: Option<&'a ast::Type>,
        var: &str,
        range: &'a ast::Expr,
        body: &'a Stmt,
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<()> {
        self.push_scope();
        let r = (|| {
            let declared = match ty {
                Some(t) => Some(self.ty(t, pos)?),
                None => None,
            };
            if let ExprKind::Range(lo, hi) = &range.kind {
                let t = match declared.clone().or_else(|| match self.lookup(var) {
                    Some(Binding::Val(v)) => v.ty().cloned(),
                    _ => None,
                }) {
                    Some(t) => t,
                    None => return self.err(pos, format!("`{var}`: the loop variable needs a type")),
                };
                let loc = match (declared.is_some(), self.lookup(var).cloned()) {
                    (false, Some(Binding::Val(Val::Loc(l, _)))) => l,
                    _ => {
                        let l = Loc::Fixed(self.alloc(&t));
                        self.bind(var, Binding::Val(Val::Loc(l.clone(), t.clone())));
                        l
                    }
                };
                let w = t.width(&self.types).unwrap_or(32);
                let (lo, _) = self.scalar(lo, Some(&t), code)?;
                let mut prep = Vec::new();
                let (hi, _) = self.scalar(hi, Some(&t), &mut prep)?;
                code.push(Op::Set(loc.place(w), lo));
                let signed = t.signed(&self.types);
                let cond = Expr::Binary(Binary::Le, Box::new(loc.read()), Box::new(hi.clone()), w, signed);
                // Stop before the variable would wrap past its width.
                let last = Expr::Binary(Binary::Eq, Box::new(loc.read()), Box::new(hi), w, false);
                let body = self.block(std::slice::from_ref(body));
                let mut update = vec![Op::If(last, vec![Op::Break], Vec::new())];
                update.push(Op::Set(
                    loc.place(w),
                    Expr::BinaryConst(Binary::Add, Box::new(loc.read()), 1, w, false),
                ));
                code.push(Op::Loop {
                    prep,
                    cond,
                    body,
                    update,
                });
                return Ok(());
            }
            // A list: one pass per element, unrolled.
            let v = self.expr(range, None, code)?;
            let items = match v {
                Val::List(items, _) => items,
                Val::Const(CVal::Agg(items), Ty::Tuple(ts)) => {
                    items.into_iter().zip(ts).map(|(c, t)| Val::Const(c, t)).collect()
                }
                _ => return self.err(range.pos, "`for ... in` needs a range `a .. b` or a list"),
            };
            for item in items {
                self.push_scope();
                let t = declared.clone().or_else(|| item.ty().cloned()).unwrap_or(Ty::InfInt);
                let t = if t == Ty::InfInt { Ty::Bits(32, false) } else { t };
                let loc = Loc::Fixed(self.alloc(&t));
                self.assign(&LVal::Loc(loc.clone(), t.clone()), item, pos, code)?;
                self.bind(var, Binding::Val(Val::Loc(loc, t)));
                let body = self.block(std::slice::from_ref(body));
                self.pop_scope();
                code.push(Op::Loop {
                    prep: Vec::new(),
                    cond: Expr::Const(1),
                    body,
                    update: vec![Op::Break],
                });
            }
            Ok(())
        })();
        self.pop_scope();
        r
    }
}

/// Appends an inlined call's code: its body in a scope that ends at a `return` and copies out
/// however the body ends, or the body alone when it neither returns nor copies anything out
/// (each scope costs a packet a call and a check).
pub(crate) fn push_scope(code: &mut Vec<Op>, body: Vec<Op>, copy_out: Vec<Op>) {
    if copy_out.is_empty() && !returns(&body) {
        code.extend(body);
    } else {
        code.push(Op::Scope { body, copy_out });
    }
}

/// Whether a `return` in `ops` would end the scope they are in (one inside a nested scope
/// ends that one).
fn returns(ops: &[Op]) -> bool {
    ops.iter().any(|op| match op {
        Op::Return => true,
        Op::If(_, a, b) => returns(a) || returns(b),
        Op::Switch(_, cases, default) => cases.iter().any(|(_, b)| returns(b)) || returns(default),
        Op::Loop { prep, body, update, .. } => returns(prep) || returns(body) || returns(update),
        _ => false,
    })
}
