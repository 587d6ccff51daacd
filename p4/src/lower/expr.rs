//! Expressions: names to locations, operators with P4's typing (widths, signedness, integer
//! literals taking their context's type), casts, slices, lists and records, and aggregates
//! read, compared and assigned slot by slot. Side effects of an expression go to the code
//! before it; a value read before a later side effect is kept in a temporary first, so the
//! order is P4's.

use crate::front::ast::{self, ExprKind};
use crate::front::source::Pos;
use crate::ir::{self, Binary, Expr, Op, Unary, mask};

use super::ty::Ty;
use super::value::{CVal, Loc, Val};
use super::{Binding, Lowerer, R, Reported, TypeBinding};

/// Something written to: a location, or some bits of a scalar at a location.
#[derive(Debug, Clone)]
pub(crate) enum LVal {
    /// A whole value.
    Loc(Loc, Ty),
    /// Bits `lo .. lo + w` of the scalar of width `full` at the location.
    Slice(Loc, u16, u16, u16),
}

impl LVal {
    /// The place a scalar of `width` bits is written to.
    pub(crate) fn place(&self, width: u16) -> ir::Place {
        match self {
            LVal::Loc(l, _) => l.place(width),
            LVal::Slice(l, full, lo, w) => ir::Place::Slice(Box::new(l.place(*full)), *lo, *w),
        }
    }

    /// The type written.
    pub(crate) fn ty(&self) -> Ty {
        match self {
            LVal::Loc(_, t) => t.clone(),
            LVal::Slice(_, _, _, w) => Ty::Bits(*w, false),
        }
    }
}

impl<'a> Lowerer<'a> {
    /// The other members of the header union `base` when its member `member` is written:
    /// making one member valid makes them invalid.
    pub(crate) fn union_siblings(&self, base: &Val, member: &str) -> Vec<crate::ir::HeaderRef> {
        let Val::Loc(loc, t @ Ty::Union(_)) = base else {
            return Vec::new();
        };
        let Some(def) = self.types.agg(t) else {
            return Vec::new();
        };
        def.fields
            .iter()
            .filter(|field| field.name != member)
            .filter_map(|field| self.types.field(t, &field.name, &self.out.headers))
            .map(|(off, _)| loc.at(off).header())
            .collect()
    }
    /// Lowers `e`; statements its side effects need go to `code`. `want` is the type the
    /// context expects, which integer literals, lists and records take.
    pub(crate) fn expr(&mut self, e: &'a ast::Expr, want: Option<&Ty>, code: &mut Vec<Op>) -> R<Val> {
        match &e.kind {
            ExprKind::Int(i) => {
                let v = match i.width {
                    Some((w, signed)) => Val::Const(CVal::Bits(i.value & mask(w)), Ty::Bits(w, signed)),
                    None => match i128::try_from(i.value) {
                        Ok(v) => Val::Const(CVal::Int(v), Ty::InfInt),
                        Err(_) => Val::Const(CVal::Bits(i.value), Ty::Bits(128, false)),
                    },
                };
                match want {
                    Some(t) if v.ty() == Some(&Ty::InfInt) && t.width(&self.types).is_some() => {
                        self.convert(v, t, e.pos)
                    }
                    _ => Ok(v),
                }
            }
            ExprKind::Bool(b) => Ok(Val::Const(CVal::Bits(u128::from(*b)), Ty::Bool)),
            ExprKind::Str(s) => Ok(Val::Const(CVal::Str(s.clone()), Ty::Str)),
            ExprKind::Name(n) => self.name(n, e.pos),
            ExprKind::This => self.err(e.pos, "`this` is only for abstract methods, which intlab does not run"),
            ExprKind::Member(b, f) => self.member(e, b, f, code),
            ExprKind::Index(b, i) => {
                let base = self.expr(b, None, code)?;
                self.index(base, i, e.pos, code)
            }
            ExprKind::Slice(b, hi, lo) => {
                let v = self.expr(b, None, code)?;
                let (hi, lo) = (self.const_int(hi)?, self.const_int(lo)?);
                self.slice(v, hi, lo, e.pos)
            }
            ExprKind::Call(..) => self.call(e, code),
            ExprKind::Unary(op, a) => self.unary(op, a, e.pos, want, code),
            ExprKind::Binary(op, a, b) => self.binary(op, a, b, e.pos, want, code),
            ExprKind::Cond(c, a, b) => self.conditional(c, a, b, e.pos, want, code),
            ExprKind::Cast(t, a) => {
                let to = self.ty(t, e.pos)?;
                let v = self.expr(a, Some(&to), code)?;
                self.cast(v, &to, e.pos, code)
            }
            ExprKind::List(items) => {
                let types: Option<Vec<Ty>> = match want {
                    Some(Ty::Tuple(ts)) if ts.len() == items.len() => Some(ts.clone()),
                    Some(t @ (Ty::Struct(_) | Ty::Header(_))) => self
                        .types
                        .agg(t)
                        .filter(|a| a.fields.len() == items.len())
                        .map(|a| a.fields.iter().map(|f| f.ty.clone()).collect()),
                    _ => None,
                };
                let mut vals: Vec<Val> = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let t = types.as_ref().map(|ts| &ts[i]);
                    let mut item_code = Vec::new();
                    let v = self.expr(item, t, &mut item_code)?;
                    // What the items before read is read before this one's side effects.
                    for prev in vals.iter_mut() {
                        *prev = self.keep_before(prev.clone(), &item_code, code);
                    }
                    code.extend(item_code);
                    vals.push(v);
                }
                Ok(Val::List(vals, e.pos))
            }
            ExprKind::Record(fields, _) => {
                let mut vals: Vec<(String, Val)> = Vec::new();
                for (name, item) in fields {
                    let t = want
                        .and_then(|w| self.types.field(w, name, &self.out.headers))
                        .map(|f| f.1);
                    let mut item_code = Vec::new();
                    let v = self.expr(item, t.as_ref(), &mut item_code)?;
                    for prev in vals.iter_mut() {
                        prev.1 = self.keep_before(prev.1.clone(), &item_code, code);
                    }
                    code.extend(item_code);
                    vals.push((name.clone(), v));
                }
                Ok(Val::Record(vals, e.pos))
            }
            ExprKind::Invalid => Ok(Val::Invalid),
            ExprKind::Mask(..) | ExprKind::Range(..) | ExprKind::Default => {
                self.err(e.pos, format!("`{}` is a key set, not a value", e.text()))
            }
            ExprKind::DontCare => self.err(e.pos, "`_` is not a value here"),
            ExprKind::Type(_) => self.err(e.pos, "a type is not a value"),
        }
    }

    /// `v`, kept in a temporary when `later` (code that runs after `v` is computed but before
    /// it is used) could change what `v` reads.
    pub(crate) fn keep_before(&mut self, v: Val, later: &[Op], code: &mut Vec<Op>) -> Val {
        if later.is_empty() {
            return v;
        }
        match v {
            Val::Expr(..) | Val::Loc(..) => {
                let Some(t) = v.ty().cloned() else { return v };
                let tmp = Loc::Fixed(self.alloc(&t));
                match self.assign(&LVal::Loc(tmp.clone(), t.clone()), v.clone(), Pos::default(), code) {
                    Ok(()) => Val::Loc(tmp, t),
                    Err(_) => v,
                }
            }
            v => v,
        }
    }

    fn name(&mut self, n: &str, pos: Pos) -> R<Val> {
        match self.lookup(n).cloned() {
            Some(Binding::Val(v)) => Ok(v),
            Some(Binding::Packet) => self.err(pos, format!("`{n}` is a packet: call its methods")),
            Some(_) => self.err(pos, format!("`{n}` is not a value")),
            None if self.lookup_type(n).is_some() => self.err(pos, format!("`{n}` is a type, not a value")),
            None => self.err(pos, format!("`{n}` is not declared")),
        }
    }

    fn member(&mut self, e: &'a ast::Expr, b: &'a ast::Expr, f: &str, code: &mut Vec<Op>) -> R<Val> {
        // `error.X`, `Enum.X`: members of types.
        if let ExprKind::Name(n) = &b.kind
            && self.lookup(n).is_none()
        {
            if n == "error" {
                return match self.out.errors.iter().position(|x| x == f) {
                    Some(i) => Ok(Val::Const(CVal::Bits(i as u128), Ty::Error)),
                    None => self.err(e.pos, format!("error `{f}` is not declared")),
                };
            }
            if let Some(TypeBinding::Ty(Ty::Enum(id))) = self.lookup_type(n).cloned() {
                let def = &self.types.enums[id];
                return match def.members.iter().find(|m| m.0 == f) {
                    Some((_, v)) => Ok(Val::Const(CVal::Bits(*v), Ty::Enum(id))),
                    None => {
                        let name = def.name.clone();
                        self.err(e.pos, format!("enum `{name}` has no member `{f}`"))
                    }
                };
            }
        }
        // `t.apply().hit`, `.miss`, `.action_run`.
        if let ExprKind::Call(inner, _, args) = &b.kind
            && let ExprKind::Member(t, m) = &inner.kind
            && m == "apply"
            && args.is_empty()
            && let ExprKind::Name(tn) = &t.kind
            && let Some(Binding::Table(table)) = self.lookup(tn).cloned()
        {
            let slot = self.alloc(&Ty::Bits(32, false));
            let op = match f {
                "hit" | "miss" => Op::Apply {
                    table: table.id,
                    hit: Some(slot),
                    action_run: None,
                },
                "action_run" => Op::Apply {
                    table: table.id,
                    hit: None,
                    action_run: Some(slot),
                },
                _ => {
                    return self.err(
                        e.pos,
                        format!("a table's apply gives `hit`, `miss` and `action_run`, not `{f}`"),
                    );
                }
            };
            code.push(op);
            return Ok(match f {
                "hit" => Val::Expr(Expr::Slot(slot), Ty::Bool),
                "miss" => Val::Expr(
                    Expr::BinaryConst(Binary::Eq, Box::new(Expr::Slot(slot)), 0, 1, false),
                    Ty::Bool,
                ),
                _ => Val::Expr(Expr::Slot(slot), Ty::Bits(32, false)),
            });
        }
        let base = self.expr(b, None, code)?;
        self.field_of(base, f, e.pos)
    }

    /// Field `f` of a value.
    pub(crate) fn field_of(&mut self, base: Val, f: &str, pos: Pos) -> R<Val> {
        match base {
            Val::Loc(loc, t @ (Ty::Struct(_) | Ty::Header(_) | Ty::Union(_))) => {
                match self.types.field(&t, f, &self.out.headers) {
                    Some((off, ft)) => Ok(Val::Loc(loc.at(off), ft)),
                    None => {
                        let n = self.types.name(&t);
                        self.err(pos, format!("`{n}` has no field `{f}`"))
                    }
                }
            }
            Val::Loc(Loc::Fixed(s), Ty::Stack(e, n)) => {
                let stack = self.stack_ref(s, &e, n);
                match f {
                    "size" => Ok(Val::Const(CVal::Bits(u128::from(n)), Ty::Bits(32, false))),
                    "nextIndex" => Ok(Val::Loc(Loc::Fixed(s), Ty::Bits(32, false))),
                    "lastIndex" => Ok(Val::Expr(
                        Expr::BinaryConst(Binary::Sub, Box::new(Expr::Slot(s)), 1, 32, false),
                        Ty::Bits(32, false),
                    )),
                    "next" => Ok(Val::Loc(Loc::Elem(stack, Expr::Slot(s), 0), *e)),
                    "last" => Ok(Val::Loc(
                        Loc::Elem(
                            stack,
                            Expr::BinaryConst(Binary::Sub, Box::new(Expr::Slot(s)), 1, 32, false),
                            0,
                        ),
                        *e,
                    )),
                    _ => self.err(pos, format!("a header stack has no `{f}`")),
                }
            }
            Val::Const(CVal::Agg(items), t @ (Ty::Struct(_) | Ty::Header(_))) => {
                let Some(a) = self.types.agg(&t) else {
                    return Err(Reported);
                };
                let skip = usize::from(matches!(t, Ty::Header(_)));
                match a.fields.iter().position(|x| x.name == f) {
                    Some(i) => Ok(Val::Const(items[i + skip].clone(), a.fields[i].ty.clone())),
                    None => {
                        let n = a.name.clone();
                        self.err(pos, format!("`{n}` has no field `{f}`"))
                    }
                }
            }
            Val::Record(items, _) => match items.into_iter().find(|(n, _)| n == f) {
                Some((_, v)) => Ok(v),
                None => self.err(pos, format!("no field `{f}`")),
            },
            other => {
                let t = other
                    .ty()
                    .map(|t| self.types.name(t))
                    .unwrap_or_else(|| "this value".into());
                self.err(pos, format!("{t} has no field `{f}`"))
            }
        }
    }

    pub(crate) fn stack_ref(&self, base: ir::Slot, elem: &Ty, size: u32) -> ir::StackRef {
        let header = match elem {
            Ty::Header(h) => *h,
            _ => usize::MAX,
        };
        ir::StackRef {
            base,
            stride: self.size(elem),
            size,
            header,
        }
    }

    /// `base[i]`.
    fn index(&mut self, base: Val, i: &'a ast::Expr, pos: Pos, code: &mut Vec<Op>) -> R<Val> {
        match base {
            Val::Loc(loc, Ty::Stack(e, n)) => {
                let iv = self.expr(i, Some(&Ty::Bits(32, false)), code)?;
                let stride = self.size(&e);
                if let Some(c) = iv.constant().and_then(|c| c.int(iv.ty().unwrap_or(&Ty::InfInt))) {
                    if c < 0 || c >= i128::from(n) {
                        return self.err(i.pos, format!("index {c} is outside the stack of {n}"));
                    }
                    return Ok(Val::Loc(loc.at(1 + c as u32 * stride), *e));
                }
                let Loc::Fixed(s) = loc else {
                    return self.err(pos, "a stack inside a stack element chosen at run time");
                };
                let index = self.read(&iv, i.pos)?;
                let stack = self.stack_ref(s, &e, n);
                Ok(Val::Loc(Loc::Elem(stack, index, 0), *e))
            }
            Val::Loc(loc, Ty::Tuple(ts)) => {
                let c = self.const_int(i)?;
                let Some(t) = ts.get(c as usize).cloned() else {
                    return self.err(i.pos, format!("index {c} is outside the tuple of {}", ts.len()));
                };
                let off: u32 = ts[..c as usize].iter().map(|t| self.size(t)).sum();
                Ok(Val::Loc(loc.at(off), t))
            }
            Val::List(items, _) => {
                let c = self.const_int(i)?;
                match items.into_iter().nth(c as usize) {
                    Some(v) => Ok(v),
                    None => self.err(i.pos, format!("index {c} is outside the list")),
                }
            }
            Val::Const(CVal::Agg(items), Ty::Tuple(ts)) => {
                let c = self.const_int(i)? as usize;
                match (items.get(c), ts.get(c)) {
                    (Some(v), Some(t)) => Ok(Val::Const(v.clone(), t.clone())),
                    _ => self.err(i.pos, format!("index {c} is outside the tuple")),
                }
            }
            other => {
                let t = other
                    .ty()
                    .map(|t| self.types.name(t))
                    .unwrap_or_else(|| "this value".into());
                self.err(pos, format!("{t} cannot be indexed: a header stack or tuple can"))
            }
        }
    }

    /// Bits `lo..=hi` of a value.
    fn slice(&mut self, v: Val, hi: i128, lo: i128, pos: Pos) -> R<Val> {
        let t = match v.ty() {
            Some(t) => t.clone(),
            None => return self.err(pos, "a slice of a value of no type"),
        };
        let w = match &t {
            Ty::Bits(w, _) => i128::from(*w),
            Ty::InfInt => 128,
            _ => {
                let n = self.types.name(&t);
                return self.err(pos, format!("a slice of {n}: only bit<W> and int<W> values have bits"));
            }
        };
        if lo < 0 || hi < lo || hi >= w {
            return self.err(pos, format!("slice [{hi}:{lo}] outside the value's {w} bits"));
        }
        let (lo, sw) = (lo as u16, (hi - lo + 1) as u16);
        if let Val::Const(c, _) = &v {
            let bits = c.bits(128).unwrap_or(0);
            return Ok(Val::Const(CVal::Bits((bits >> lo) & mask(sw)), Ty::Bits(sw, false)));
        }
        let e = self.read(&v, pos)?;
        Ok(Val::Expr(fold(Expr::Slice(Box::new(e), lo, sw)), Ty::Bits(sw, false)))
    }

    /// Where `e` is, to write it (index expressions computed now, into temporaries when they
    /// are not constants, so a later write goes where this one would).
    pub(crate) fn lvalue(&mut self, e: &'a ast::Expr, code: &mut Vec<Op>) -> R<LVal> {
        match &e.kind {
            ExprKind::Slice(b, hi, lo) => {
                let inner = self.lvalue(b, code)?;
                let (hi, lo) = (self.const_int(hi)?, self.const_int(lo)?);
                let (loc, full, base_lo, base_w) = match inner {
                    LVal::Loc(loc, Ty::Bits(w, _)) => (loc, w, 0, w),
                    LVal::Slice(loc, full, l, w) => (loc, full, l, w),
                    LVal::Loc(_, t) => {
                        let n = self.types.name(&t);
                        return self.err(e.pos, format!("a slice of {n}"));
                    }
                };
                if lo < 0 || hi < lo || hi >= i128::from(base_w) {
                    return self.err(e.pos, format!("slice [{hi}:{lo}] outside the value's {base_w} bits"));
                }
                Ok(LVal::Slice(loc, full, base_lo + lo as u16, (hi - lo + 1) as u16))
            }
            _ => {
                let v = self.expr(e, None, code)?;
                match v {
                    Val::Loc(Loc::Elem(st, i, o), t) => {
                        let i = self.snapshot(i, code);
                        Ok(LVal::Loc(Loc::Elem(st, i, o), t))
                    }
                    Val::Loc(l, t) => Ok(LVal::Loc(l, t)),
                    _ => self.err(e.pos, format!("`{}` cannot be written", e.text())),
                }
            }
        }
    }

    /// A run-time expression computed into a temporary now (a constant or a slot as it is).
    pub(crate) fn snapshot(&mut self, e: Expr, code: &mut Vec<Op>) -> Expr {
        match e {
            Expr::Const(_) => e,
            e => {
                let s = self.alloc(&Ty::Bits(128, false));
                code.push(Op::Set(ir::Place::Slot(s, 128), e));
                Expr::Slot(s)
            }
        }
    }

    /// A scalar value of type `want` (or its own).
    pub(crate) fn scalar(&mut self, e: &'a ast::Expr, want: Option<&Ty>, code: &mut Vec<Op>) -> R<(Expr, Ty)> {
        let v = self.expr(e, want, code)?;
        let v = match want {
            Some(t) => self.convert(v, t, e.pos)?,
            None => v,
        };
        let t = match v.ty() {
            Some(t) => t.clone(),
            None => return self.err(e.pos, format!("`{}` is not a single value", e.text())),
        };
        Ok((self.read(&v, e.pos)?, t))
    }

    /// A boolean condition.
    pub(crate) fn condition(&mut self, e: &'a ast::Expr, code: &mut Vec<Op>) -> R<Expr> {
        let (c, t) = self.scalar(e, Some(&Ty::Bool), code)?;
        if t != Ty::Bool {
            let n = self.types.name(&t);
            return self.err(e.pos, format!("a condition must be bool, not {n}"));
        }
        Ok(c)
    }

    /// A scalar value as an expression.
    pub(crate) fn read(&mut self, v: &Val, pos: Pos) -> R<Expr> {
        match v {
            Val::Const(c, t) => match c {
                CVal::Int(i) => Ok(Expr::Const(*i as u128)),
                CVal::Bits(b) => Ok(Expr::Const(*b & t.width(&self.types).map_or(u128::MAX, mask))),
                _ => {
                    let n = self.types.name(t);
                    self.err(pos, format!("{n} is not a single value"))
                }
            },
            Val::Expr(e, _) => Ok(e.clone()),
            Val::Loc(l, t) if t.is_scalar() => Ok(l.read()),
            Val::Loc(_, t) => {
                let n = self.types.name(t);
                self.err(pos, format!("{n} is not a single value"))
            }
            Val::List(..) | Val::Record(..) | Val::Invalid => self.err(pos, "a list is not a single value"),
        }
    }

    /// `v` as a value of type `t`, with the implicit conversions P4 makes (an integer literal
    /// to a width; a serializable enum to its type).
    pub(crate) fn convert(&mut self, v: Val, t: &Ty, pos: Pos) -> R<Val> {
        let Some(vt) = v.ty().cloned() else {
            return Ok(v);
        };
        if &vt == t || matches!(t, Ty::DontCare | Ty::Var(_)) {
            return Ok(v);
        }
        match (&v, &vt, t) {
            (Val::Const(c, _), Ty::InfInt, Ty::Bits(w, _)) => {
                // Cut to the width, as P4's implicit cast of an integer does (two's complement).
                let Some(bits) = c.bits(*w) else {
                    return self.err(pos, "an integer constant expected");
                };
                Ok(Val::Const(CVal::Bits(bits), t.clone()))
            }
            (Val::Const(c, _), Ty::InfInt, Ty::Enum(e)) if self.types.enums[*e].underlying.is_some() => {
                let w = t.width(&self.types).unwrap_or(32);
                Ok(Val::Const(CVal::Bits(c.bits(w).unwrap_or(0)), t.clone()))
            }
            (Val::Const(c, _), Ty::Bits(..), Ty::InfInt) => Ok(Val::Const(c.clone(), vt)),
            (_, Ty::Enum(e), Ty::Bits(w, s)) if self.types.enums[*e].underlying == Some((*w, *s)) => {
                Ok(retype(v, t.clone()))
            }
            (_, Ty::Bits(w, s), Ty::Enum(e)) if self.types.enums[*e].underlying == Some((*w, *s)) => {
                Ok(retype(v, t.clone()))
            }
            // `bool` and `bit<1>` convert only by casts; keep the value, the caller checks.
            _ => Ok(v),
        }
    }

    /// `(t) v`.
    pub(crate) fn cast(&mut self, v: Val, to: &Ty, pos: Pos, code: &mut Vec<Op>) -> R<Val> {
        if matches!(v, Val::List(..) | Val::Record(..) | Val::Invalid) {
            let loc = self.materialize(v, to, pos, code)?;
            return Ok(Val::Loc(loc, to.clone()));
        }
        let Some(from) = v.ty().cloned() else {
            return self.err(pos, "a cast of a value of no type");
        };
        if &from == to {
            return Ok(v);
        }
        let underlying = |l: &Self, t: &Ty| match t {
            Ty::Enum(e) => l.types.enums[*e].underlying.map(|(w, s)| Ty::Bits(w, s)),
            t => Some(t.clone()),
        };
        let (Some(f), Some(t)) = (underlying(self, &from), underlying(self, to)) else {
            let (a, b) = (self.types.name(&from), self.types.name(to));
            return self.err(pos, format!("cannot cast {a} to {b}"));
        };
        match (&f, &t) {
            (Ty::InfInt, Ty::Bits(..) | Ty::Bool) | (Ty::Bits(..), Ty::Bits(..)) | (Ty::Bool, Ty::Bits(1, false)) => {}
            (Ty::Bits(1, false), Ty::Bool) | (Ty::InfInt, Ty::InfInt) | (Ty::Bits(..), Ty::InfInt) => {}
            _ => {
                let (a, b) = (self.types.name(&from), self.types.name(to));
                return self.err(pos, format!("cannot cast {a} to {b}"));
            }
        }
        let tw = to.width(&self.types);
        if let Val::Const(c, _) = &v {
            let bits = match (&f, c) {
                (Ty::InfInt, CVal::Int(i)) => *i as u128,
                (Ty::Bits(fw, true), CVal::Bits(b)) => ir::ops::signed(*b, *fw) as u128,
                (_, c) => c.bits(128).unwrap_or(0),
            };
            return Ok(match (to, tw) {
                (Ty::InfInt, _) => Val::Const(CVal::Int(bits as i128), Ty::InfInt),
                (_, Some(w)) => Val::Const(CVal::Bits(bits & mask(w)), to.clone()),
                _ => Val::Const(CVal::Bits(bits), to.clone()),
            });
        }
        let e = self.read(&v, pos)?;
        let (Some(fw), Some(tw)) = (f.width(&self.types), tw) else {
            return Ok(retype(Val::Expr(e, from), to.clone()));
        };
        Ok(Val::Expr(
            fold(Expr::Cast(Box::new(e), fw, tw, f.signed(&self.types))),
            to.clone(),
        ))
    }

    fn unary(&mut self, op: &str, a: &'a ast::Expr, pos: Pos, want: Option<&Ty>, code: &mut Vec<Op>) -> R<Val> {
        let v = self.expr(a, want, code)?;
        let Some(t) = v.ty().cloned() else {
            return self.err(pos, format!("`{op}` of a list"));
        };
        let u = match op {
            "!" => {
                if t != Ty::Bool {
                    let n = self.types.name(&t);
                    return self.err(pos, format!("`!` needs a bool, not {n}"));
                }
                Unary::Not
            }
            "~" => Unary::Complement,
            "-" => Unary::Negate,
            _ => return Ok(v),
        };
        if let Val::Const(CVal::Int(i), _) = v {
            return match u {
                Unary::Negate => Ok(Val::Const(CVal::Int(i.wrapping_neg()), Ty::InfInt)),
                _ => self.err(pos, format!("`{op}` of an integer of no width: give it one (8w5)")),
            };
        }
        let Some(w) = t.width(&self.types) else {
            let n = self.types.name(&t);
            return self.err(pos, format!("`{op}` of {n}"));
        };
        let e = self.read(&v, pos)?;
        Ok(const_or_expr(fold(Expr::Unary(u, Box::new(e), w)), t))
    }

    fn binary(
        &mut self,
        op: &'static str,
        a: &'a ast::Expr,
        b: &'a ast::Expr,
        pos: Pos,
        want: Option<&Ty>,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        if op == "&&" || op == "||" {
            return self.logical(op, a, b, code);
        }
        // An integer literal takes the type of the other operand, not the context's: P4
        // widens nothing implicitly.
        let va = self.expr(a, None, code)?;
        let mut later = Vec::new();
        let b_want = match op {
            "<<" | ">>" | "++" => None,
            _ => va.ty().filter(|t| **t != Ty::InfInt).cloned(),
        };
        let vb = self.expr(b, b_want.as_ref(), &mut later)?;
        let va = self.keep_before(va, &later, code);
        code.extend(later);
        self.combine(op, va, vb, pos, want, code)
    }

    /// `va op vb` of values already evaluated (a binary operator, a compound assignment).
    pub(crate) fn combine(
        &mut self,
        op: &str,
        va: Val,
        vb: Val,
        pos: Pos,
        want: Option<&Ty>,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        let (a_pos, b_pos) = (pos, pos);
        // A literal on the left takes the right's type.
        let va = match (va.ty(), vb.ty()) {
            (Some(Ty::InfInt), Some(t)) if !matches!(op, "<<" | ">>" | "++") && *t != Ty::InfInt => {
                let t = t.clone();
                self.convert(va, &t, a_pos)?
            }
            _ => va,
        };
        let ta = va.ty().cloned();
        let is_aggregate = |t: &Option<Ty>| {
            t.as_ref()
                .is_none_or(|t| !t.is_scalar() && *t != Ty::InfInt && *t != Ty::Str)
        };
        if (op == "==" || op == "!=") && (is_aggregate(&ta) || is_aggregate(&vb.ty().cloned())) {
            let eq = self.aggregate_eq(va, vb, pos, code)?;
            return Ok(if op == "==" {
                eq
            } else {
                let e = self.read(&eq, pos)?;
                const_or_expr(fold(Expr::Unary(Unary::Not, Box::new(e), 1)), Ty::Bool)
            });
        }
        let Some(ta) = ta else {
            return self.err(pos, format!("`{op}` of a list"));
        };
        let Some(tb) = vb.ty().cloned() else {
            return self.err(pos, format!("`{op}` of a list"));
        };
        // Integers of no width: computed now.
        if let (Val::Const(ca, Ty::InfInt), Val::Const(cb, _)) = (&va, &vb)
            && (tb == Ty::InfInt || matches!(op, "<<" | ">>"))
        {
            let (x, y) = (ca.int(&Ty::InfInt), cb.int(&tb));
            if let (Some(x), Some(y)) = (x, y) {
                return self.int_binary(op, x, y, pos);
            }
        }
        if op == "++" {
            let (Some(wa), Some(wb)) = (ta.width(&self.types), tb.width(&self.types)) else {
                return self.err(pos, "`++` needs two values of known width (write 8w1, not 1)");
            };
            if ta == Ty::InfInt || tb == Ty::InfInt || matches!(ta, Ty::Bool) || matches!(tb, Ty::Bool) {
                return self.err(pos, "`++` needs bit<W> or int<W> values");
            }
            if u32::from(wa) + u32::from(wb) > 128 {
                return self.err(
                    pos,
                    format!("`++` of {wa} and {wb} bits: intlab runs values of up to 128 bits"),
                );
            }
            let (ea, eb) = (self.read(&va, pos)?, self.read(&vb, pos)?);
            return Ok(const_or_expr(
                fold(Expr::Concat(Box::new(ea), Box::new(eb), wb)),
                Ty::Bits(wa + wb, ta.signed(&self.types)),
            ));
        }
        let shift = op == "<<" || op == ">>";
        let t = if shift {
            if ta == Ty::InfInt {
                match want {
                    Some(w) if w.width(&self.types).is_some() => w.clone(),
                    _ => {
                        return self.err(
                            pos,
                            format!("`{op}` of an integer of no width by a run-time amount: give it a width"),
                        );
                    }
                }
            } else {
                ta.clone()
            }
        } else {
            // A serializable enum compares as its type.
            let ua = self.underlying(&ta);
            let ub = self.underlying(&tb);
            if ua != ub && tb != Ty::InfInt {
                let (x, y) = (self.types.name(&ta), self.types.name(&tb));
                return self.err(pos, format!("`{op}` on {x} and {y}: cast one to the other's type"));
            }
            ua
        };
        let va = if shift && ta == Ty::InfInt {
            self.convert(va, &t, a_pos)?
        } else {
            va
        };
        let vb = if !shift { self.convert(vb, &t, b_pos)? } else { vb };
        let Some(w) = t.width(&self.types) else {
            let n = self.types.name(&t);
            return self.err(pos, format!("`{op}` on {n}"));
        };
        let signed = t.signed(&self.types);
        let (bop, result) = match op {
            "+" => (Binary::Add, t.clone()),
            "-" => (Binary::Sub, t.clone()),
            "*" => (Binary::Mul, t.clone()),
            "/" => (Binary::Div, t.clone()),
            "%" => (Binary::Rem, t.clone()),
            "|+|" => (Binary::AddSat, t.clone()),
            "|-|" => (Binary::SubSat, t.clone()),
            "&" => (Binary::And, t.clone()),
            "|" => (Binary::Or, t.clone()),
            "^" => (Binary::Xor, t.clone()),
            "<<" => (Binary::Shl, t.clone()),
            ">>" => (Binary::Shr, t.clone()),
            "==" => (Binary::Eq, Ty::Bool),
            "!=" => (Binary::Ne, Ty::Bool),
            "<" => (Binary::Lt, Ty::Bool),
            "<=" => (Binary::Le, Ty::Bool),
            ">" => (Binary::Gt, Ty::Bool),
            ">=" => (Binary::Ge, Ty::Bool),
            other => return self.err(pos, format!("operator `{other}` is not P4")),
        };
        if matches!(bop, Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge) && t == Ty::Bool {
            return self.err(pos, format!("`{op}` on bool values"));
        }
        let (ea, eb) = (self.read(&va, pos)?, self.read(&vb, pos)?);
        let result_ty = if matches!(result, Ty::Enum(_)) {
            t.clone()
        } else {
            result
        };
        Ok(const_or_expr(
            fold(Expr::Binary(bop, Box::new(ea), Box::new(eb), w, signed)),
            result_ty,
        ))
    }

    /// A serializable enum's type (other types as they are).
    fn underlying(&self, t: &Ty) -> Ty {
        match t {
            Ty::Enum(e) => match self.types.enums[*e].underlying {
                Some((w, s)) => Ty::Bits(w, s),
                None => t.clone(),
            },
            t => t.clone(),
        }
    }

    /// An operator on two integers of no width.
    fn int_binary(&mut self, op: &str, x: i128, y: i128, pos: Pos) -> R<Val> {
        let int = |v: Option<i128>| v.map(|v| Val::Const(CVal::Int(v), Ty::InfInt));
        let boolean = |b: bool| Some(Val::Const(CVal::Bits(u128::from(b)), Ty::Bool));
        let r = match op {
            "+" => int(x.checked_add(y)),
            "-" => int(x.checked_sub(y)),
            "*" => int(x.checked_mul(y)),
            "/" if y > 0 && x >= 0 => int(Some(x / y)),
            "%" if y > 0 && x >= 0 => int(Some(x % y)),
            "/" | "%" => {
                return self.err(
                    pos,
                    format!("`{op}` of {x} by {y}: P4 divides non-negative integers by positive ones"),
                );
            }
            "&" => int(Some(x & y)),
            "|" => int(Some(x | y)),
            "^" => int(Some(x ^ y)),
            "<<" => int(u32::try_from(y)
                .ok()
                .and_then(|y| x.checked_shl(y))
                .filter(|v| v >> y.min(127) == x || y >= 127)),
            ">>" => int(u32::try_from(y).ok().map(|y| x >> y.min(127))),
            "==" => boolean(x == y),
            "!=" => boolean(x != y),
            "<" => boolean(x < y),
            "<=" => boolean(x <= y),
            ">" => boolean(x > y),
            ">=" => boolean(x >= y),
            "|+|" | "|-|" => return self.err(pos, format!("`{op}` needs values of a width")),
            other => return self.err(pos, format!("operator `{other}` on integers of no width")),
        };
        match r {
            Some(v) => Ok(v),
            None => self.err(pos, format!("`{x} {op} {y}` does not fit intlab's 128-bit integers")),
        }
    }

    /// `a && b`, `a || b`: `b` is evaluated only when it decides.
    fn logical(&mut self, op: &str, a: &'a ast::Expr, b: &'a ast::Expr, code: &mut Vec<Op>) -> R<Val> {
        let ea = self.condition(a, code)?;
        let mut later = Vec::new();
        let eb = self.condition(b, &mut later)?;
        let and = op == "&&";
        if let Expr::Const(c) = ea {
            // Decided by the left: the right is not evaluated.
            if (c != 0) != and {
                return Ok(Val::Const(CVal::Bits(c), Ty::Bool));
            }
            code.extend(later);
            return Ok(const_or_expr(eb, Ty::Bool));
        }
        if later.is_empty() {
            let bop = if and { Binary::LogicalAnd } else { Binary::LogicalOr };
            return Ok(Val::Expr(
                Expr::Binary(bop, Box::new(ea), Box::new(eb), 1, false),
                Ty::Bool,
            ));
        }
        let t = self.alloc(&Ty::Bool);
        code.push(Op::Set(ir::Place::Slot(t, 1), ea));
        later.push(Op::Set(ir::Place::Slot(t, 1), eb));
        let test = if and {
            Expr::Slot(t)
        } else {
            Expr::BinaryConst(Binary::Eq, Box::new(Expr::Slot(t)), 0, 1, false)
        };
        code.push(Op::If(test, later, Vec::new()));
        Ok(Val::Expr(Expr::Slot(t), Ty::Bool))
    }

    /// `c ? a : b`: only the branch taken is evaluated.
    fn conditional(
        &mut self,
        c: &'a ast::Expr,
        a: &'a ast::Expr,
        b: &'a ast::Expr,
        pos: Pos,
        want: Option<&Ty>,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        let ec = self.condition(c, code)?;
        let (mut ca, mut cb) = (Vec::new(), Vec::new());
        // The branches' type is the one of them that has one; the context's only when neither
        // has (two integer literals).
        let va = self.expr(a, None, &mut ca)?;
        let t_hint = va.ty().filter(|t| **t != Ty::InfInt).cloned();
        let vb = self.expr(b, t_hint.as_ref(), &mut cb)?;
        let t = match (va.ty(), vb.ty()) {
            (Some(Ty::InfInt), Some(t)) | (Some(t), _) if *t != Ty::InfInt => t.clone(),
            (_, Some(t)) if *t != Ty::InfInt => t.clone(),
            _ => match want {
                Some(w) => w.clone(),
                None => Ty::InfInt,
            },
        };
        if let Expr::Const(cv) = ec {
            let (v, branch) = if cv != 0 { (va, ca) } else { (vb, cb) };
            code.extend(branch);
            return self.convert(v, &t, pos);
        }
        if t == Ty::InfInt {
            return self.err(
                pos,
                "`?:` with integers of no width on a run-time condition: give them a width",
            );
        }
        let (va, vb) = (self.convert(va, &t, a.pos)?, self.convert(vb, &t, b.pos)?);
        if ca.is_empty() && cb.is_empty() && t.is_scalar() {
            let (ea, eb) = (self.read(&va, a.pos)?, self.read(&vb, b.pos)?);
            return Ok(Val::Expr(Expr::Cond(Box::new(ec), Box::new(ea), Box::new(eb)), t));
        }
        let tmp = Loc::Fixed(self.alloc(&t));
        self.assign(&LVal::Loc(tmp.clone(), t.clone()), va, a.pos, &mut ca)?;
        self.assign(&LVal::Loc(tmp.clone(), t.clone()), vb, b.pos, &mut cb)?;
        code.push(Op::If(ec, ca, cb));
        Ok(Val::Loc(tmp, t))
    }

    /// `v` at a location of its own (a temporary for what is not one).
    pub(crate) fn materialize(&mut self, v: Val, t: &Ty, pos: Pos, code: &mut Vec<Op>) -> R<Loc> {
        if let Val::Loc(l, lt) = &v
            && lt == t
        {
            return Ok(l.clone());
        }
        let tmp = Loc::Fixed(self.alloc(t));
        self.assign(&LVal::Loc(tmp.clone(), t.clone()), v, pos, code)?;
        Ok(tmp)
    }

    /// `dst = v`.
    pub(crate) fn assign(&mut self, dst: &LVal, v: Val, pos: Pos, code: &mut Vec<Op>) -> R<()> {
        let (loc, t) = match dst {
            LVal::Slice(loc, full, lo, w) => {
                let v = self.convert(v, &Ty::Bits(*w, false), pos)?;
                let e = self.read(&v, pos)?;
                let place = ir::Place::Slice(Box::new(loc.place(*full)), *lo, *w);
                code.push(Op::Set(place, e));
                return Ok(());
            }
            LVal::Loc(l, t) => (l.clone(), t.clone()),
        };
        let v = self.convert(v, &t, pos)?;
        if t.is_scalar() {
            if let Some(vt) = v.ty() {
                let (ut, uv) = (self.underlying(&t), self.underlying(vt));
                if ut != uv && *vt != Ty::InfInt {
                    let (a, b) = (self.types.name(&t), self.types.name(vt));
                    return self.err(pos, format!("a value of {b} assigned to {a}: cast it"));
                }
            }
            let e = self.read(&v, pos)?;
            let w = t.width(&self.types).unwrap_or(128);
            code.push(Op::Set(loc.place(w), e));
            return Ok(());
        }
        match v {
            Val::Loc(src, st) => {
                if st != t {
                    let (a, b) = (self.types.name(&t), self.types.name(&st));
                    return self.err(pos, format!("a value of {b} assigned to {a}"));
                }
                self.copy(&loc, &src, &t, code);
                Ok(())
            }
            Val::Invalid => {
                let mut hs = Vec::new();
                self.headers_at(&t, &loc, &mut hs);
                if hs.is_empty() {
                    let n = self.types.name(&t);
                    return self.err(pos, format!("`{{#}}` is an invalid header, not a value of {n}"));
                }
                for h in hs {
                    code.push(Op::SetValid(h, false));
                }
                Ok(())
            }
            Val::List(items, lpos) => self.assign_list(&loc, &t, items, lpos, code),
            Val::Record(items, rpos) => {
                let Some(a) = self.types.agg(&t).cloned() else {
                    let n = self.types.name(&t);
                    return self.err(rpos, format!("a record `{{f = ...}}` assigned to {n}"));
                };
                for f in &a.fields {
                    let Some((_, v)) = items.iter().find(|(n, _)| *n == f.name) else {
                        return self.err(
                            rpos,
                            format!("`{}` has a field `{}` this record does not give", a.name, f.name),
                        );
                    };
                    let (off, ft) = self
                        .types
                        .field(&t, &f.name, &self.out.headers)
                        .expect("a field of its type");
                    self.assign(&LVal::Loc(loc.at(off), ft), v.clone(), pos, code)?;
                }
                for (n, _) in &items {
                    if !a.fields.iter().any(|f| f.name == *n) {
                        return self.err(rpos, format!("`{}` has no field `{n}`", a.name));
                    }
                }
                if matches!(t, Ty::Header(_)) {
                    code.push(Op::SetValid(loc.header(), true));
                }
                Ok(())
            }
            Val::Const(CVal::Agg(items), ct) if ct == t => {
                let mut leaves = Vec::new();
                self.types.leaves(&t, 0, &self.out.headers, &mut leaves);
                let flat = flatten(&items);
                for ((off, lt), c) in leaves.iter().zip(flat) {
                    let w = lt.width(&self.types).unwrap_or(128);
                    code.push(Op::Set(loc.at(*off).place(w), Expr::Const(c & mask(w))));
                }
                Ok(())
            }
            other => {
                let (a, b) = (
                    self.types.name(&t),
                    other.ty().map(|t| self.types.name(t)).unwrap_or_default(),
                );
                self.err(pos, format!("a value of {b} assigned to {a}"))
            }
        }
    }

    /// `{a, b, ...}` into an aggregate of type `t` at `loc`.
    fn assign_list(&mut self, loc: &Loc, t: &Ty, items: Vec<Val>, pos: Pos, code: &mut Vec<Op>) -> R<()> {
        let parts: Vec<(u32, Ty)> = match t {
            Ty::Struct(_) | Ty::Header(_) => {
                let a = self.types.agg(t).cloned().expect("an aggregate");
                a.fields
                    .iter()
                    .map(|f| self.types.field(t, &f.name, &self.out.headers).expect("its field"))
                    .collect()
            }
            Ty::Tuple(ts) => {
                let mut off = 0;
                ts.iter()
                    .map(|x| {
                        let o = off;
                        off += self.size(x);
                        (o, x.clone())
                    })
                    .collect()
            }
            Ty::Stack(e, n) => {
                let stride = self.size(e);
                (0..*n).map(|i| (1 + i * stride, (**e).clone())).collect()
            }
            _ => {
                let n = self.types.name(t);
                return self.err(pos, format!("a list assigned to {n}"));
            }
        };
        if parts.len() != items.len() {
            let n = self.types.name(t);
            return self.err(
                pos,
                format!("{} values for {n}, which has {}", items.len(), parts.len()),
            );
        }
        for ((off, pt), v) in parts.into_iter().zip(items) {
            self.assign(&LVal::Loc(loc.at(off), pt), v, pos, code)?;
        }
        match t {
            Ty::Header(_) => code.push(Op::SetValid(loc.header(), true)),
            Ty::Stack(..) => code.push(Op::Set(loc.place(32), Expr::Const(0))),
            _ => {}
        }
        Ok(())
    }

    /// Copies a value of `t` from `src` to `dst`.
    pub(crate) fn copy(&mut self, dst: &Loc, src: &Loc, t: &Ty, code: &mut Vec<Op>) {
        let n = self.size(t);
        match (dst, src, t) {
            (Loc::Fixed(d), Loc::Fixed(s), _) => {
                if d != s {
                    code.push(Op::Copy(*d, *s, n));
                }
            }
            (_, _, Ty::Header(_)) => code.push(Op::CopyHeader(dst.header(), src.header(), n)),
            _ => {
                for i in 0..n {
                    code.push(Op::Set(dst.at(i).place(128), src.at(i).read()));
                }
            }
        }
    }

    /// The headers inside a value of `t` at `loc`.
    pub(crate) fn headers_at(&self, t: &Ty, loc: &Loc, out: &mut Vec<ir::HeaderRef>) {
        let mut hs = Vec::new();
        self.types.headers_in(t, 0, &self.out.headers, &mut hs);
        out.extend(hs.into_iter().map(|(off, _)| loc.at(off).header()));
    }

    /// `a == b` for aggregates: headers equal when both are invalid, or both valid with equal
    /// fields; the rest field by field.
    fn aggregate_eq(&mut self, a: Val, b: Val, pos: Pos, code: &mut Vec<Op>) -> R<Val> {
        let t = match (a.ty(), b.ty()) {
            (Some(t), _) | (None, Some(t)) => t.clone(),
            _ => return self.err(pos, "`==` of two lists: one needs a type"),
        };
        let la = self.materialize(a, &t, pos, code)?;
        let lb = self.materialize(b, &t, pos, code)?;
        let e = self.eq_at(&t, &la, &lb);
        Ok(const_or_expr(e, Ty::Bool))
    }

    /// Whether the values of `t` at `a` and `b` are equal.
    fn eq_at(&self, t: &Ty, a: &Loc, b: &Loc) -> Expr {
        let and = |x: Expr, y: Expr| match (&x, &y) {
            (Expr::Const(1), _) => y,
            (_, Expr::Const(1)) => x,
            _ => Expr::Binary(Binary::LogicalAnd, Box::new(x), Box::new(y), 1, false),
        };
        let eq = |x: Expr, y: Expr| Expr::Binary(Binary::Eq, Box::new(x), Box::new(y), 128, false);
        match t {
            Ty::Header(h) => {
                let ht = &self.out.headers[*h];
                let mut fields = Expr::Const(1);
                for i in 0..(ht.stride() - 1) {
                    fields = and(fields, eq(a.at(1 + i).read(), b.at(1 + i).read()));
                }
                let (va, vb) = (a.read(), b.read());
                let both_invalid = and(
                    Expr::BinaryConst(Binary::Eq, Box::new(va.clone()), 0, 1, false),
                    Expr::BinaryConst(Binary::Eq, Box::new(vb.clone()), 0, 1, false),
                );
                let both_valid = and(and(va, vb), fields);
                Expr::Binary(
                    Binary::LogicalOr,
                    Box::new(both_invalid),
                    Box::new(both_valid),
                    1,
                    false,
                )
            }
            Ty::Struct(_) | Ty::Union(_) => {
                let a_def = self.types.agg(t).cloned().expect("an aggregate");
                let mut e = Expr::Const(1);
                let mut off = 0;
                for f in &a_def.fields {
                    e = and(e, self.eq_at(&f.ty, &a.at(off), &b.at(off)));
                    off += self.size(&f.ty);
                }
                e
            }
            Ty::Stack(elem, n) => {
                let stride = self.size(elem);
                let mut e = Expr::Const(1);
                for i in 0..*n {
                    e = and(e, self.eq_at(elem, &a.at(1 + i * stride), &b.at(1 + i * stride)));
                }
                e
            }
            Ty::Tuple(ts) => {
                let mut e = Expr::Const(1);
                let mut off = 0;
                for x in ts {
                    e = and(e, self.eq_at(x, &a.at(off), &b.at(off)));
                    off += self.size(x);
                }
                e
            }
            // A varbit: its length and its data (zero past its length).
            Ty::Varbit(_) => {
                let mut e = Expr::Const(1);
                for i in 0..self.size(t) {
                    e = and(e, eq(a.at(i).read(), b.at(i).read()));
                }
                e
            }
            _ => eq(a.read(), b.read()),
        }
    }
}

/// The leaves of a constant aggregate, flattened in field order.
fn flatten(items: &[CVal]) -> Vec<u128> {
    let mut out = Vec::new();
    for i in items {
        match i {
            CVal::Agg(inner) => out.extend(flatten(inner)),
            c => out.push(c.bits(128).unwrap_or(0)),
        }
    }
    out
}

/// `v` with type `t` (same bits).
fn retype(v: Val, t: Ty) -> Val {
    match v {
        Val::Const(c, _) => Val::Const(c, t),
        Val::Expr(e, _) => Val::Expr(e, t),
        Val::Loc(l, _) => Val::Loc(l, t),
        v => v,
    }
}

/// A folded expression: a constant when it folded to one.
pub(crate) fn const_or_expr(e: Expr, t: Ty) -> Val {
    match e {
        Expr::Const(c) => Val::Const(CVal::Bits(c), t),
        e => Val::Expr(e, t),
    }
}

/// Folds an expression whose operands are constants, and gives the shapes packets evaluate
/// most a node of their own: each node costs a dispatch per packet, so the fewer the faster.
pub(crate) fn fold(e: Expr) -> Expr {
    match constant_folded(e) {
        // Values are kept masked to their width, so widening an unsigned one changes nothing.
        Expr::Cast(a, from, to, signed) if to >= from && (!signed || to == from) => *a,
        Expr::Slice(a, lo, w) => match *a {
            Expr::Slot(s) => Expr::SlotBits(s, lo, w),
            a => Expr::Slice(Box::new(a), lo, w),
        },
        Expr::Binary(op, a, b, w, s) if !matches!(op, Binary::LogicalAnd | Binary::LogicalOr) => match (*a, *b) {
            (a, Expr::Const(c)) => Expr::BinaryConst(op, Box::new(a), c, w, s),
            (Expr::Const(c), b) if commutes(op) => Expr::BinaryConst(op, Box::new(b), c, w, s),
            (a, b) => Expr::Binary(op, Box::new(a), Box::new(b), w, s),
        },
        e => e,
    }
}

/// `a op b == b op a` at any width and signedness.
fn commutes(op: Binary) -> bool {
    matches!(
        op,
        Binary::Add | Binary::Mul | Binary::AddSat | Binary::And | Binary::Or | Binary::Xor | Binary::Eq | Binary::Ne
    )
}

fn constant_folded(e: Expr) -> Expr {
    let all_const = match &e {
        Expr::Unary(_, a, _) | Expr::Slice(a, _, _) | Expr::Cast(a, _, _, _) => matches!(**a, Expr::Const(_)),
        Expr::Binary(_, a, b, _, _) | Expr::Concat(a, b, _) => {
            matches!(**a, Expr::Const(_)) && matches!(**b, Expr::Const(_))
        }
        _ => false,
    };
    if all_const {
        Expr::Const(ir::ops::constant(&e))
    } else {
        e
    }
}
