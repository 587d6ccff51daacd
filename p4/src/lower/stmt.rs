//! Statements, method calls and v1model's extern functions.

use crate::ast::{self, ExprKind, Stmt};
use crate::error::Result;
use crate::ir::{self, Algorithm, Expr, Extern, HeaderRef, ListItem, Op, Place};

use super::expr::Loc;
use super::{Binding, Lowerer, Ty, mask};

impl<'a> Lowerer<'a> {
    /// Lowers `s`, appending to `ops`.
    pub(super) fn stmt(&mut self, s: &'a Stmt, ops: &mut Vec<Op>) -> Result<()> {
        match s {
            Stmt::Empty(_) => {}
            Stmt::Block(b, _) => ops.extend(self.block(b)?),
            Stmt::Exit(_) => ops.push(Op::Exit),
            Stmt::Return(None, _) => ops.push(Op::Return),
            Stmt::Return(Some(_), pos) => return self.err(*pos, "`return` with a value is not supported"),
            Stmt::Const(k) => {
                let ty = self.ty(&k.ty, k.pos)?;
                let (v, _) = self.typed_constant(&k.value, &ty)?;
                self.bind(&k.name, Binding::Const(v, ty));
            }
            Stmt::Var(ty, name, init, pos) => {
                let t = self.ty(ty, *pos)?;
                let slot = self.alloc(&t);
                self.bind(name, Binding::Var(slot, t.clone()));
                match init {
                    Some(e) => {
                        let dst = ast::Expr {
                            kind: ExprKind::Name(name.clone()),
                            pos: *pos,
                        };
                        self.assign(&dst, e, ops)?;
                    }
                    // Locals start at zero each time their block runs (BMv2 does the same).
                    None => self.zero(slot, &t, ops),
                }
            }
            Stmt::Instance(i) => self.instance(i)?,
            Stmt::Assign(l, r, _) => self.assign(l, r, ops)?,
            Stmt::If(c, t, f, _) => {
                let (c, _) = self.scalar(c)?;
                let t = self.block(std::slice::from_ref(t))?;
                let f = match f {
                    Some(f) => self.block(std::slice::from_ref(f))?,
                    None => Vec::new(),
                };
                ops.push(Op::If(c, t, f));
            }
            Stmt::Switch(on, cases, pos) => self.switch(on, cases, *pos, ops)?,
            Stmt::Call(e, _) => self.call(e, ops)?,
        }
        Ok(())
    }

    fn zero(&self, slot: ir::Slot, t: &Ty, ops: &mut Vec<Op>) {
        let n = self.size(t);
        for i in 0..n {
            ops.push(Op::Set(Place::Slot(slot + i, 128), Expr::Const(0)));
        }
    }

    fn assign(&mut self, l: &ast::Expr, r: &ast::Expr, ops: &mut Vec<Op>) -> Result<()> {
        if let ExprKind::Slice(..) = &l.kind {
            let (p, _) = self.place(l)?;
            let (v, _) = self.scalar(r)?;
            ops.push(Op::Set(p, v));
            return Ok(());
        }
        let dst = self.loc(l)?;
        let t = dst.ty();
        if t.width().is_some() {
            let (p, _) = self.place(l)?;
            let (v, vt) = self.scalar(r)?;
            if let (Some(pw), Some(vw)) = (t.width(), vt.width())
                && pw != vw
                && vt != Ty::Error
            {
                return self.err(r.pos, format!("a {vw}-bit value assigned to a {pw}-bit place: cast it"));
            }
            ops.push(Op::Set(p, v));
            return Ok(());
        }
        // Aggregates: a list initialiser, or a copy of the same type.
        if let ExprKind::List(items) = &r.kind {
            let Loc::Slot(base, Ty::Struct(name)) = dst else {
                return self.err(r.pos, "a list initialises a struct here");
            };
            let fields = self.aggregates[&name].fields.clone();
            if fields.len() != items.len() {
                return self.err(
                    r.pos,
                    format!("{} values for the {} fields of `{name}`", items.len(), fields.len()),
                );
            }
            for (f, item) in fields.iter().zip(items) {
                let (off, ft) = self.field_offset(&name, &f.name).expect("field exists");
                let Some(w) = ft.width() else {
                    return self.err(item.pos, "nested aggregates in a list initialiser are not supported");
                };
                let (v, _) = self.scalar(item)?;
                ops.push(Op::Set(Place::Slot(base + off, w), v));
            }
            return Ok(());
        }
        let src = self.loc(r)?;
        if src.ty() != t {
            return self.err(r.pos, "assignment between different types");
        }
        match (dst, src) {
            (Loc::Slot(d, _), Loc::Slot(s, _)) => ops.push(Op::Copy(d, s, self.size(&t))),
            (d, s) => {
                let (Some(d), Some(s)) = (self.loc_header(d), self.loc_header(s)) else {
                    return self.err(l.pos, "this assignment is not supported");
                };
                ops.push(Op::CopyHeader(d, s, self.size(&t)));
            }
        }
        Ok(())
    }

    fn loc_header(&self, l: Loc) -> Option<HeaderRef> {
        match l {
            Loc::Slot(s, Ty::Header(_)) => Some(HeaderRef::Fixed(s)),
            Loc::Element(st, i) => Some(HeaderRef::Element(st, Box::new(i))),
            Loc::Next(st) => Some(HeaderRef::Next(st)),
            _ => None,
        }
    }

    fn switch(
        &mut self,
        on: &ast::Expr,
        cases: &'a [(ast::SwitchLabel, Option<Vec<Stmt>>)],
        pos: crate::source::Pos,
        ops: &mut Vec<Op>,
    ) -> Result<()> {
        // `switch (t.apply().action_run)`
        if let ExprKind::Member(call, m) = &on.kind
            && m == "action_run"
        {
            let ExprKind::Call(f, _, _) = &call.kind else {
                return self.err(on.pos, "`t.apply().action_run` expected");
            };
            let ExprKind::Member(t, _) = &f.kind else {
                return self.err(on.pos, "`t.apply().action_run` expected");
            };
            let ExprKind::Name(tn) = &t.kind else {
                return self.err(on.pos, "a table expected");
            };
            let Some(Binding::Table(table)) = self.lookup(tn).cloned() else {
                return self.err(on.pos, format!("`{tn}` is not a table"));
            };
            let (out, default) = self.switch_cases(cases, |l, e| {
                let ExprKind::Name(a) = &e.kind else {
                    return l.err(e.pos, "an action name expected");
                };
                let id = l.action_ref(a, e.pos)?;
                if !l.out.tables[table].actions.contains(&id) {
                    return l.err(e.pos, format!("table `{tn}` has no action `{a}`"));
                }
                Ok(id)
            })?;
            ops.push(Op::Apply(table, Some(Box::new((out, default)))));
            return Ok(());
        }
        let (v, t) = self.scalar(on)?;
        let (out, default) = self.switch_cases(cases, |l, e| Ok(l.typed_constant(e, &t)?.0))?;
        if t.width().is_none() {
            return self.err(pos, "a switch on a value of unknown width");
        }
        ops.push(Op::Switch(v, out, default));
        Ok(())
    }

    /// The cases of a switch: labels (read by `label`) with the body they share (labels
    /// without a body fall through to the next), and the default body.
    fn switch_cases<T>(
        &mut self,
        cases: &'a [(ast::SwitchLabel, Option<Vec<Stmt>>)],
        mut label: impl FnMut(&mut Self, &ast::Expr) -> Result<T>,
    ) -> Result<ir::SwitchCases<T>> {
        let mut out = Vec::new();
        let mut default = Vec::new();
        let mut pending = Vec::new();
        for (l, body) in cases {
            match l {
                ast::SwitchLabel::Default(_) => {
                    if let Some(b) = body {
                        default = self.block(b)?;
                    }
                }
                ast::SwitchLabel::Expr(e) => {
                    pending.push(label(self, e)?);
                    if let Some(b) = body {
                        out.push((std::mem::take(&mut pending), self.block(b)?));
                    }
                }
            }
        }
        Ok((out, default))
    }

    /// A method or function call statement.
    fn call(&mut self, e: &'a ast::Expr, ops: &mut Vec<Op>) -> Result<()> {
        let ExprKind::Call(f, _, args) = &e.kind else {
            return self.err(e.pos, "a call expected");
        };
        match &f.kind {
            ExprKind::Member(obj, method) => self.method(e, obj, method, args, ops),
            ExprKind::Name(n) => self.function(e, n, args, ops),
            _ => self.err(e.pos, "a call expected"),
        }
    }

    fn method(
        &mut self,
        e: &ast::Expr,
        obj: &ast::Expr,
        method: &str,
        args: &[ast::Expr],
        ops: &mut Vec<Op>,
    ) -> Result<()> {
        if let ExprKind::Name(n) = &obj.kind {
            match self.lookup(n).cloned() {
                Some(Binding::Packet) => return self.packet_method(e, method, args, ops),
                Some(Binding::Table(t)) if method == "apply" => {
                    ops.push(Op::Apply(t, None));
                    return Ok(());
                }
                Some(Binding::Register(r)) => {
                    return match (method, args) {
                        ("read", [out, index]) => {
                            let (p, _) = self.place(out)?;
                            let (i, _) = self.scalar(index)?;
                            ops.push(Op::Extern(Box::new(Extern::RegisterRead(r, p, i))));
                            Ok(())
                        }
                        ("write", [index, value]) => {
                            let (i, _) = self.scalar(index)?;
                            let (v, _) = self.scalar(value)?;
                            ops.push(Op::Extern(Box::new(Extern::RegisterWrite(r, i, v))));
                            Ok(())
                        }
                        _ => self.err(
                            e.pos,
                            format!("register `{n}`: read(out value, index) or write(index, value) expected"),
                        ),
                    };
                }
                Some(Binding::Counter(c)) if method == "count" && args.len() == 1 => {
                    let (i, _) = self.scalar(&args[0])?;
                    ops.push(Op::Extern(Box::new(Extern::Count(c, i))));
                    return Ok(());
                }
                // A direct counter counts each hit of its table; its `count()` adds nothing.
                Some(Binding::DirectCounter) if method == "count" => return Ok(()),
                _ => {}
            }
        }
        match method {
            "setValid" | "setInvalid" => {
                let (h, _) = self.header_ref(obj)?;
                ops.push(Op::SetValid(h, method == "setValid"));
            }
            "push_front" | "pop_front" => {
                let Loc::Slot(s, Ty::Stack(h, n)) = self.loc(obj)? else {
                    return self.err(obj.pos, "a header stack expected");
                };
                let count = match args.first() {
                    Some(a) => self.constant(a)?.0 as u32,
                    None => return self.err(e.pos, format!("{method}(count) expected")),
                };
                let stack = ir::StackRef {
                    base: s,
                    stride: self.out.headers[h].stride(),
                    size: n,
                    header: h,
                };
                ops.push(if method == "push_front" {
                    Op::PushFront(stack, count)
                } else {
                    Op::PopFront(stack, count)
                });
            }
            "apply" => return self.err(e.pos, format!("`{}` is not a table", crate::info::text(obj))),
            other => return self.err(e.pos, format!("method `{other}` is not supported here")),
        }
        Ok(())
    }

    fn packet_method(&mut self, e: &ast::Expr, method: &str, args: &[ast::Expr], ops: &mut Vec<Op>) -> Result<()> {
        match (method, args) {
            ("extract", [h]) => {
                let (r, t) = self.header_ref(h)?;
                ops.push(Op::Extract(r, t));
            }
            ("extract", [_, _]) => {
                return self.err(e.pos, "extract of a variable-size header (varbit) is not supported");
            }
            ("advance", [n]) => {
                let (n, _) = self.scalar(n)?;
                ops.push(Op::Advance(n));
            }
            ("emit", [h]) => self.emit(h, ops)?,
            _ => {
                return self.err(
                    e.pos,
                    format!("packet.{method} with {} arguments is not supported", args.len()),
                );
            }
        }
        Ok(())
    }

    /// `emit` of a header, a stack (each element) or a struct (each member in order).
    fn emit(&self, h: &ast::Expr, ops: &mut Vec<Op>) -> Result<()> {
        let loc = self.loc(h)?;
        self.emit_loc(loc, h, ops)
    }

    fn emit_loc(&self, loc: Loc, h: &ast::Expr, ops: &mut Vec<Op>) -> Result<()> {
        match loc {
            Loc::Slot(s, Ty::Header(t)) => ops.push(Op::Emit(HeaderRef::Fixed(s), t)),
            Loc::Slot(s, Ty::Stack(t, n)) => {
                let stride = self.out.headers[t].stride();
                for i in 0..n {
                    ops.push(Op::Emit(HeaderRef::Fixed(s + 1 + i * stride), t));
                }
            }
            Loc::Slot(s, Ty::Struct(name)) => {
                for f in &self.aggregates[&name].fields {
                    let (off, ft) = self.field_offset(&name, &f.name).expect("field exists");
                    self.emit_loc(Loc::Slot(s + off, ft), h, ops)?;
                }
            }
            Loc::Slot(_, _) => return self.err(h.pos, "emit takes a header, a header stack or a struct of them"),
            Loc::Element(st, i) => ops.push(Op::Emit(HeaderRef::Element(st, Box::new(i)), st.header)),
            _ => return self.err(h.pos, "emit takes a header, a header stack or a struct of them"),
        }
        Ok(())
    }

    /// Calls of actions and of extern functions.
    fn function(&mut self, e: &ast::Expr, name: &str, args: &[ast::Expr], ops: &mut Vec<Op>) -> Result<()> {
        let ext = match name {
            "mark_to_drop" => Extern::MarkToDrop,
            "verify" => {
                let [c, err] = args else {
                    return self.err(e.pos, "verify(condition, error) expected");
                };
                let (c, _) = self.scalar(c)?;
                let (err, _) = self.constant(err)?;
                ops.push(Op::Verify(c, err));
                return Ok(());
            }
            "hash" => {
                let [out, algo, base, data, max] = args else {
                    return self.err(e.pos, "hash(result, algorithm, base, data, max) expected");
                };
                Extern::Hash {
                    out: self.place(out)?.0,
                    algo: self.algorithm(algo)?,
                    base: self.scalar(base)?.0,
                    data: self.list(data)?,
                    max: self.scalar(max)?.0,
                }
            }
            "verify_checksum" | "update_checksum" | "verify_checksum_with_payload" | "update_checksum_with_payload" => {
                let [cond, data, field, algo] = args else {
                    return self.err(e.pos, format!("{name}(condition, data, checksum, algorithm) expected"));
                };
                let algo = self.algorithm(algo)?;
                if algo != Algorithm::Csum16 {
                    return self.err(args[3].pos, "checksums are computed with HashAlgorithm.csum16 here");
                }
                Extern::Checksum {
                    verify: name.starts_with("verify"),
                    condition: self.scalar(cond)?.0,
                    data: self.list(data)?,
                    field: self.place(field)?.0,
                    current: self.scalar(field)?.0,
                    algo,
                    payload: name.ends_with("with_payload"),
                }
            }
            "clone" | "clone_preserving_field_list" => {
                let (Some(kind), Some(session)) = (args.first(), args.get(1)) else {
                    return self.err(e.pos, format!("{name}(type, session, ...) expected"));
                };
                // CloneType is declared I2E, E2E: I2E is 0.
                if self.constant(kind)?.0 != 0 {
                    return self.err(
                        kind.pos,
                        "CloneType.E2E (a clone of the frame leaving egress) is not supported; CloneType.I2E is",
                    );
                }
                if self.in_egress() {
                    return self.err(
                        e.pos,
                        format!("{name} in the egress control: only ingress clones (I2E) are supported"),
                    );
                }
                let field_list = match (name, args.get(2)) {
                    ("clone", None) => None,
                    ("clone_preserving_field_list", Some(n)) => Some(self.constant(n)?.0),
                    _ => {
                        return self.err(
                            e.pos,
                            "clone(type, session) or clone_preserving_field_list(type, session, index) expected",
                        );
                    }
                };
                Extern::Clone {
                    session: self.scalar(session)?.0,
                    field_list,
                }
            }
            "clone3" => {
                return self.err(
                    e.pos,
                    "clone3 is not supported (v1model deprecates it): use clone_preserving_field_list with a @field_list annotation",
                );
            }
            "truncate" => match args {
                [n] => Extern::Truncate(self.scalar(n)?.0),
                _ => return self.err(e.pos, "truncate(length) expected"),
            },
            "log_msg" => {
                let Some(ast::Expr {
                    kind: ExprKind::Str(fmt),
                    ..
                }) = args.first()
                else {
                    return self.err(e.pos, "log_msg(\"format\"[, {values}]) expected");
                };
                let mut values = Vec::new();
                if let Some(d) = args.get(1) {
                    for item in self.list(d)? {
                        values.push(item.value);
                    }
                }
                Extern::Log(fmt.clone(), values)
            }
            "random" => {
                let [out, lo, hi] = args else {
                    return self.err(e.pos, "random(result, lo, hi) expected");
                };
                Extern::Random(self.place(out)?.0, self.scalar(lo)?.0, self.scalar(hi)?.0)
            }
            "assert" | "assume" => match args {
                [c] => Extern::Assert(self.scalar(c)?.0),
                _ => return self.err(e.pos, format!("{name}(condition) expected")),
            },
            "digest"
            | "resubmit"
            | "resubmit_preserving_field_list"
            | "recirculate"
            | "recirculate_preserving_field_list" => {
                return self.err(e.pos, format!("`{name}` is not supported yet (docs/p4.md)"));
            }
            _ => return self.action_call(e, name, args, ops),
        };
        ops.push(Op::Extern(Box::new(ext)));
        Ok(())
    }

    fn action_call(&mut self, e: &ast::Expr, name: &str, args: &[ast::Expr], ops: &mut Vec<Op>) -> Result<()> {
        let id = self.action_ref(name, e.pos)?;
        let params = self.out.actions[id].params.clone();
        if params.len() != args.len() {
            return self.err(
                e.pos,
                format!("action `{name}` takes {} arguments, {} given", params.len(), args.len()),
            );
        }
        let mut values = Vec::new();
        let mut back = Vec::new();
        for (p, a) in params.iter().zip(args) {
            let (v, _) = self.scalar(a)?;
            values.push(v);
            if p.copy_back {
                let Ok((place, _)) = self.place(a) else {
                    return self.err(
                        a.pos,
                        format!("argument of out/inout parameter `{}` must be a place", p.name),
                    );
                };
                back.push((place, p.slot));
            }
        }
        ops.push(Op::Call(id, values, back));
        Ok(())
    }

    fn algorithm(&self, e: &ast::Expr) -> Result<Algorithm> {
        let ExprKind::Member(_, name) = &e.kind else {
            return self.err(e.pos, "HashAlgorithm.<name> expected");
        };
        Ok(match name.as_str() {
            "crc32" => Algorithm::Crc32,
            "crc16" => Algorithm::Crc16,
            "csum16" => Algorithm::Csum16,
            "identity" => Algorithm::Identity,
            "xor16" => Algorithm::Xor16,
            other => {
                return self.err(
                    e.pos,
                    format!("hash algorithm `{other}` is not supported (crc32, crc16, csum16, identity, xor16 are)"),
                );
            }
        })
    }

    /// A field list `{a, b, ...}` (or one value), each with its width and header validity.
    fn list(&self, e: &ast::Expr) -> Result<Vec<ListItem>> {
        let items: Vec<&ast::Expr> = match &e.kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![e],
        };
        let mut out = Vec::new();
        for item in items {
            // A whole header contributes its fields.
            if let Ok(Loc::Slot(s, Ty::Header(h))) = self.loc(item) {
                for (i, (_, w)) in self.out.headers[h].fields.iter().enumerate() {
                    out.push(ListItem {
                        value: Expr::Slot(s + 1 + i as u32),
                        width: *w,
                        valid: Some(s),
                    });
                }
                continue;
            }
            let (v, t) = self.scalar(item)?;
            let Some(width) = t.width() else {
                return self.err(item.pos, "a field list holds values of known width (write 8w1, not 1)");
            };
            out.push(ListItem {
                value: match v {
                    Expr::Const(c) => Expr::Const(c & mask(width)),
                    v => v,
                },
                width,
                valid: self.validity_of(item),
            });
        }
        Ok(out)
    }

    /// The validity slot of the header a field path belongs to.
    fn validity_of(&self, e: &ast::Expr) -> Option<ir::Slot> {
        if let ExprKind::Member(b, _) = &e.kind
            && let Ok(Loc::Slot(s, Ty::Header(_))) = self.loc(b)
        {
            return Some(s);
        }
        None
    }
}
