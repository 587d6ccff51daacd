//! The architecture's externs: objects (registers, counters, meters, action profiles and
//! selectors, checksums, intlab's metadata) made from their instances, and the calls of their
//! methods and of extern functions (`mark_to_drop`, `hash`, checksums, clones, resubmit,
//! recirculate, digests, ...) lowered to [`crate::ir::Extern`].

use std::rc::Rc;

use crate::front::ast::{self, ExprKind, Type};
use crate::front::source::Pos;
use crate::ir::{self, Algorithm, CloneKind, CounterKind, Expr, Extern, ListItem, Op};

use super::call::void;
use super::expr::LVal;
use super::ty::Ty;
use super::value::{CVal, Loc, Val};
use super::{Binding, Lowerer, R};

/// What an extern instance is.
#[derive(Debug, Clone)]
pub(crate) enum ExternObj {
    /// A register array, and its cells' type.
    Register(usize, Ty),
    /// An indexed counter.
    Counter(usize),
    /// A direct counter.
    DirectCounter(usize),
    /// An indexed meter.
    Meter(usize),
    /// A direct meter.
    DirectMeter(usize),
    /// An action profile or selector.
    Profile(usize),
    /// v1model's deprecated `Checksum16`.
    Checksum16,
    /// intlab's metadata.
    Intlab,
}

/// An extern object instance.
pub(crate) struct ExternInst {
    pub(crate) obj: ExternObj,
}

impl<'a> Lowerer<'a> {
    /// Makes an instance of extern `kind`.
    pub(crate) fn extern_instance(
        &mut self,
        kind: &str,
        targs: &[Ty],
        args: &'a [ast::Arg],
        name: &str,
        annotations: &[ast::Annotation],
        pos: Pos,
    ) -> R<Binding<'a>> {
        let cp = self.cp_name(annotations, name);
        let mut values = Vec::new();
        for a in args {
            values.push(self.const_expr(&a.value, None)?);
        }
        let int = |l: &mut Self, i: usize| -> R<i128> {
            match values
                .get(i)
                .and_then(|v| v.constant().and_then(|c| c.int(v.ty().unwrap_or(&Ty::InfInt))))
            {
                Some(n) => Ok(n),
                None => l.err(
                    pos,
                    format!("{kind} `{name}`: argument {} must be an integer constant", i + 1),
                ),
            }
        };
        let member = |l: &Self, i: usize| -> Option<String> {
            match values.get(i) {
                Some(Val::Const(CVal::Bits(v), Ty::Enum(e))) => {
                    l.types.enums[*e].members.get(*v as usize).map(|m| m.0.clone())
                }
                _ => None,
            }
        };
        let obj = match kind {
            "register" => {
                let width = match targs.first() {
                    Some(Ty::Bits(w, _)) => *w,
                    Some(Ty::Bool) => 1,
                    Some(t) if t.width(&self.types).is_some() => t.width(&self.types).unwrap_or(32),
                    _ => return self.err(pos, format!("register `{name}` holds bit<W> or int<W> values")),
                };
                let size = int(self, 0)?.max(0) as usize;
                self.out.registers.push(ir::Register { name: cp, width, size });
                ExternObj::Register(
                    self.out.registers.len() - 1,
                    targs.first().cloned().unwrap_or(Ty::Bits(width, false)),
                )
            }
            "counter" | "direct_counter" => {
                let (size, kind_at) = if kind == "counter" {
                    (int(self, 0)?.max(0) as usize, 1)
                } else {
                    (0, 0)
                };
                let ck = match member(self, kind_at).as_deref() {
                    Some("packets") => CounterKind::Packets,
                    Some("bytes") => CounterKind::Bytes,
                    _ => CounterKind::PacketsAndBytes,
                };
                self.out.counters.push(ir::Counter {
                    name: cp,
                    size,
                    kind: ck,
                    table: None,
                });
                let id = self.out.counters.len() - 1;
                if kind == "counter" {
                    ExternObj::Counter(id)
                } else {
                    ExternObj::DirectCounter(id)
                }
            }
            "meter" | "direct_meter" => {
                let (size, kind_at) = if kind == "meter" {
                    (int(self, 0)?.max(0) as usize, 1)
                } else {
                    (0, 0)
                };
                let bytes = member(self, kind_at).as_deref() == Some("bytes");
                self.out.meters.push(ir::Meter {
                    name: cp,
                    size,
                    bytes,
                    table: None,
                });
                let id = self.out.meters.len() - 1;
                if kind == "meter" {
                    ExternObj::Meter(id)
                } else {
                    ExternObj::DirectMeter(id)
                }
            }
            "action_profile" => {
                let size = int(self, 0)?.max(0) as usize;
                self.out.profiles.push(ir::Profile {
                    name: cp,
                    size,
                    selector: None,
                });
                ExternObj::Profile(self.out.profiles.len() - 1)
            }
            "action_selector" => {
                let algo = match member(self, 0) {
                    Some(a) => self.algorithm_named(&a, pos)?,
                    None => return self.err(pos, format!("action_selector `{name}`: a HashAlgorithm first")),
                };
                let size = int(self, 1)?.max(0) as usize;
                let width = int(self, 2)?.clamp(0, 64) as u16;
                self.out.profiles.push(ir::Profile {
                    name: cp,
                    size,
                    selector: Some((algo, width)),
                });
                ExternObj::Profile(self.out.profiles.len() - 1)
            }
            "Checksum16" => ExternObj::Checksum16,
            "intlab_metadata" => ExternObj::Intlab,
            other => {
                return self.err(
                    pos,
                    format!("extern `{other}` is not one intlab runs (v1model's externs and intlab_metadata are; docs/p4.md)"),
                );
            }
        };
        Ok(Binding::Extern(Rc::new(ExternInst { obj })))
    }

    /// A method call on an extern instance.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn extern_method(
        &mut self,
        x: &ExternInst,
        m: &str,
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        let a = |i: usize| args.get(i).map(|a| &a.value);
        match (&x.obj, m) {
            (ExternObj::Register(r, t), "read") => {
                let (Some(out), Some(index)) = (a(0), a(1)) else {
                    return self.err(pos, "register.read(out result, index) expected");
                };
                let lv = self.lvalue(out, code)?;
                let (i, _) = self.scalar(index, Some(&Ty::Bits(32, false)), code)?;
                let w = t.width(&self.types).unwrap_or(32);
                code.push(Op::Extern(Box::new(Extern::RegisterRead(*r, lv.place(w), i))));
                Ok(void())
            }
            (ExternObj::Register(r, t), "write") => {
                let (Some(index), Some(value)) = (a(0), a(1)) else {
                    return self.err(pos, "register.write(index, value) expected");
                };
                let (i, _) = self.scalar(index, Some(&Ty::Bits(32, false)), code)?;
                let t = t.clone();
                let (v, _) = self.scalar(value, Some(&t), code)?;
                code.push(Op::Extern(Box::new(Extern::RegisterWrite(*r, i, v))));
                Ok(void())
            }
            (ExternObj::Counter(c), "count") => {
                let Some(index) = a(0) else {
                    return self.err(pos, "counter.count(index) expected");
                };
                let (i, _) = self.scalar(index, Some(&Ty::Bits(32, false)), code)?;
                code.push(Op::Extern(Box::new(Extern::Count(*c, i))));
                Ok(void())
            }
            // A direct counter counts each hit of its table; `count()` adds nothing.
            (ExternObj::DirectCounter(_), "count") => Ok(void()),
            (ExternObj::Meter(id), "execute_meter") => {
                let (Some(index), Some(out)) = (a(0), a(1)) else {
                    return self.err(pos, "meter.execute_meter(index, out result) expected");
                };
                let (i, _) = self.scalar(index, Some(&Ty::Bits(32, false)), code)?;
                let lv = self.lvalue(out, code)?;
                let w = lv.ty().width(&self.types).unwrap_or(32);
                code.push(Op::Extern(Box::new(Extern::Meter {
                    meter: *id,
                    index: Some(i),
                    out: lv.place(w),
                    color_in: None,
                })));
                Ok(void())
            }
            (ExternObj::DirectMeter(id), "read") => {
                let Some(out) = a(0) else {
                    return self.err(pos, "direct_meter.read(out result) expected");
                };
                let lv = self.lvalue(out, code)?;
                let w = lv.ty().width(&self.types).unwrap_or(32);
                code.push(Op::Extern(Box::new(Extern::Meter {
                    meter: *id,
                    index: None,
                    out: lv.place(w),
                    color_in: None,
                })));
                Ok(void())
            }
            (ExternObj::Checksum16, "get") => {
                let Some(data) = a(0) else {
                    return self.err(pos, "Checksum16.get(data) expected");
                };
                let data = self.data_items(data, code)?;
                let s = self.alloc(&Ty::Bits(16, false));
                code.push(Op::Extern(Box::new(Extern::HashValue {
                    out: ir::Place::Slot(s, 16),
                    algo: Algorithm::Csum16,
                    data,
                    width: 16,
                    base: Expr::Const(0),
                    max: Expr::Const(0),
                })));
                Ok(Val::Loc(Loc::Fixed(s), Ty::Bits(16, false)))
            }
            (ExternObj::Intlab, m) => {
                use ir::IntlabValue as V;
                let (v, w) = match m {
                    "queue_bytes" => (V::QueueBytes, 32),
                    "tx_bytes" => (V::TxBytes, 64),
                    "departure_ns" => (V::DepartureNs, 64),
                    "arrival_ns" => (V::ArrivalNs, 64),
                    "line_rate_kbps" => (V::LineRateKbps, 32),
                    "node_id" => (V::NodeId, 32),
                    "mtu" => (V::Mtu, 32),
                    other => return self.err(pos, format!("intlab_metadata has no `{other}`")),
                };
                Ok(Val::Expr(Expr::Intlab(v), Ty::Bits(w, false)))
            }
            (_, m) => self.err(pos, format!("this extern has no method `{m}` intlab runs")),
        }
    }

    /// A call of an extern function.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn extern_function(
        &mut self,
        name: &str,
        sigs: &[&'a ast::Signature],
        targs: &'a [Type],
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        // Named arguments (`update_checksum(condition = true, ...)`) in the declaration's order.
        let ordered: Vec<&'a ast::Expr> = if args.iter().any(|a| a.name.is_some()) {
            let Some(sig) = sigs.iter().find(|s| {
                args.iter()
                    .all(|a| a.name.as_ref().is_some_and(|n| s.params.iter().any(|p| &p.name == n)))
            }) else {
                return self.err(pos, format!("no `{name}` has parameters of these names"));
            };
            sig.params
                .iter()
                .filter_map(|p| args.iter().find(|a| a.name.as_ref() == Some(&p.name)).map(|a| &a.value))
                .collect()
        } else {
            args.iter().map(|a| &a.value).collect()
        };
        let a = |i: usize| ordered.get(i).copied();
        let ext = match name {
            "mark_to_drop" => Extern::MarkToDrop,
            "verify" => {
                let (Some(c), Some(err)) = (a(0), a(1)) else {
                    return self.err(pos, "verify(condition, error) expected");
                };
                let c = self.condition(c, code)?;
                let (err, _) = self.scalar(err, Some(&Ty::Error), code)?;
                code.push(Op::Verify(c, err));
                return Ok(void());
            }
            "static_assert" => {
                let Some(c) = a(0) else {
                    return self.err(pos, "static_assert(condition) expected");
                };
                let v = self.const_expr(c, Some(&Ty::Bool))?;
                if v.constant().and_then(|c| c.bits(1)) != Some(1) {
                    let msg = match a(1).map(|e| &e.kind) {
                        Some(ExprKind::Str(s)) => s.clone(),
                        _ => "static_assert failed".into(),
                    };
                    return self.err(pos, msg);
                }
                return Ok(Val::Const(CVal::Bits(1), Ty::Bool));
            }
            "hash" => {
                let (Some(out), Some(algo), Some(base), Some(data), Some(max)) = (a(0), a(1), a(2), a(3), a(4)) else {
                    return self.err(pos, "hash(result, algorithm, base, data, max) expected");
                };
                let lv = self.lvalue(out, code)?;
                let width = lv.ty().width(&self.types).unwrap_or(32);
                let algo = self.algorithm(algo)?;
                let (base, _) = self.scalar(base, Some(&Ty::Bits(width.max(1), false)), code)?;
                let data = self.data_items(data, code)?;
                let (max, _) = self.scalar(max, Some(&Ty::Bits(64, false)), code)?;
                Extern::Hash {
                    out: lv.place(width),
                    algo,
                    base,
                    data,
                    max,
                    width,
                }
            }
            "verify_checksum" | "update_checksum" | "verify_checksum_with_payload" | "update_checksum_with_payload" => {
                let (Some(c), Some(data), Some(field), Some(algo)) = (a(0), a(1), a(2), a(3)) else {
                    return self.err(pos, format!("{name}(condition, data, checksum, algorithm) expected"));
                };
                let condition = self.condition(c, code)?;
                let data = self.data_items(data, code)?;
                let lv = self.lvalue(field, code)?;
                let width = lv.ty().width(&self.types).unwrap_or(16);
                let current = match &lv {
                    LVal::Loc(l, _) => l.read(),
                    LVal::Slice(l, _, lo, w) => super::expr::fold(Expr::Slice(Box::new(l.read()), *lo, *w)),
                };
                let algo = self.algorithm(algo)?;
                if !matches!(
                    algo,
                    Algorithm::Csum16
                        | Algorithm::Crc16
                        | Algorithm::Crc32
                        | Algorithm::Crc16Custom
                        | Algorithm::Crc32Custom
                        | Algorithm::Identity
                        | Algorithm::Xor16
                ) {
                    return self.err(
                        args[3].value.pos,
                        "a checksum by this algorithm is not one BMv2 computes",
                    );
                }
                Extern::Checksum {
                    verify: name.starts_with("verify"),
                    condition,
                    data,
                    field: lv.place(width),
                    current,
                    width,
                    algo,
                    payload: name.ends_with("with_payload"),
                }
            }
            "clone" | "clone3" | "clone_preserving_field_list" => {
                let (Some(kind), Some(session)) = (a(0), a(1)) else {
                    return self.err(pos, format!("{name}(type, session, ...) expected"));
                };
                let kind = match self.enum_member(kind)?.as_str() {
                    "I2E" => CloneKind::IngressToEgress,
                    "E2E" => CloneKind::EgressToEgress,
                    other => return self.err(pos, format!("clone type `{other}`: I2E or E2E")),
                };
                let (session, _) = self.scalar(session, Some(&Ty::Bits(32, false)), code)?;
                let field_list = match (name, a(2)) {
                    ("clone", _) => None,
                    ("clone_preserving_field_list", Some(n)) => Some(self.const_int(n)? as u128),
                    ("clone3", Some(data)) => Some(self.call_field_list(data, code)?),
                    _ => return self.err(pos, format!("{name}: a third argument expected")),
                };
                Extern::Clone {
                    kind,
                    session,
                    field_list,
                }
            }
            "resubmit" | "resubmit_preserving_field_list" | "recirculate" | "recirculate_preserving_field_list" => {
                let list = match (name.ends_with("field_list"), a(0)) {
                    (true, Some(n)) => Some(self.const_int(n)? as u128),
                    (false, Some(data)) => Some(self.call_field_list(data, code)?),
                    _ => return self.err(pos, format!("{name}: an argument expected")),
                };
                if name.starts_with("resubmit") {
                    Extern::Resubmit(list)
                } else {
                    Extern::Recirculate(list)
                }
            }
            "digest" => {
                let (Some(receiver), Some(data)) = (a(0), a(1)) else {
                    return self.err(pos, "digest(receiver, data) expected");
                };
                let receiver = self.const_int(receiver).unwrap_or(0) as u128;
                // The digest's type (named by the type argument, or the data's own): its name
                // and fields name the digest to the control plane, as in P4Info. Evaluated
                // aside: the data's code is emitted once, by `data_items`.
                let ty = match targs.first() {
                    Some(t) => Some(self.ty(t, pos)?),
                    None => self.expr(data, None, &mut Vec::new())?.ty().cloned(),
                };
                let (type_name, fields) = match ty.as_ref() {
                    Some(t @ (Ty::Struct(_) | Ty::Header(_))) => {
                        let def = self.types.agg(t).cloned().expect("an aggregate");
                        let fields: Vec<(String, u16)> = def
                            .fields
                            .iter()
                            .map(|f| (f.name.clone(), f.ty.width(&self.types).unwrap_or(0)))
                            .collect();
                        (def.name, fields)
                    }
                    Some(t) => (
                        self.types.name(t),
                        vec![("value".to_owned(), t.width(&self.types).unwrap_or(0))],
                    ),
                    None => (format!("digest_{}", self.out.digests.len()), Vec::new()),
                };
                let items = self.data_items(data, code)?;
                let fields = if fields.is_empty() {
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, it)| (format!("field_{i}"), it.width))
                        .collect()
                } else {
                    fields
                };
                let digest = match self.out.digests.iter().position(|d| d.name == type_name) {
                    Some(d) => d,
                    None => {
                        self.out.digests.push(ir::Digest {
                            name: type_name,
                            receiver,
                            fields,
                        });
                        self.out.digests.len() - 1
                    }
                };
                Extern::Digest { digest, data: items }
            }
            "random" => {
                let (Some(out), Some(lo), Some(hi)) = (a(0), a(1), a(2)) else {
                    return self.err(pos, "random(result, lo, hi) expected");
                };
                let lv = self.lvalue(out, code)?;
                let t = lv.ty();
                let w = t.width(&self.types).unwrap_or(32);
                let (lo, _) = self.scalar(lo, Some(&t), code)?;
                let (hi, _) = self.scalar(hi, Some(&t), code)?;
                Extern::Random(lv.place(w), lo, hi)
            }
            "truncate" => {
                let Some(n) = a(0) else {
                    return self.err(pos, "truncate(length) expected");
                };
                let (n, _) = self.scalar(n, Some(&Ty::Bits(32, false)), code)?;
                Extern::Truncate(n)
            }
            "assert" | "assume" => {
                let Some(c) = a(0) else {
                    return self.err(pos, format!("{name}(condition) expected"));
                };
                Extern::Assert(self.condition(c, code)?)
            }
            "log_msg" => {
                let Some(ExprKind::Str(fmt)) = a(0).map(|e| &e.kind) else {
                    return self.err(pos, "log_msg(\"format\"[, {values}]) expected");
                };
                let mut values = Vec::new();
                if let Some(d) = a(1) {
                    for item in self.data_items(d, code)? {
                        values.push(item.value);
                    }
                }
                Extern::Log(fmt.clone(), values)
            }
            other => {
                return self.err(
                    pos,
                    format!("extern function `{other}` is not one intlab runs (docs/p4.md)"),
                );
            }
        };
        code.push(Op::Extern(Box::new(ext)));
        Ok(void())
    }

    /// The name of the enum member `e` is (a `HashAlgorithm`, a `CloneType`).
    fn enum_member(&mut self, e: &'a ast::Expr) -> R<String> {
        let v = self.const_expr(e, None)?;
        match v {
            Val::Const(CVal::Bits(i), Ty::Enum(id)) => match self.types.enums[id].members.iter().find(|m| m.1 == i) {
                Some(m) => Ok(m.0.clone()),
                None => self.err(e.pos, "an enum member expected"),
            },
            _ => self.err(e.pos, format!("`{}`: an enum member expected", e.text())),
        }
    }

    fn algorithm(&mut self, e: &'a ast::Expr) -> R<Algorithm> {
        let name = self.enum_member(e)?;
        self.algorithm_named(&name, e.pos)
    }

    fn algorithm_named(&mut self, name: &str, pos: Pos) -> R<Algorithm> {
        Ok(match name {
            "crc32" => Algorithm::Crc32,
            "crc32_custom" => Algorithm::Crc32Custom,
            "crc16" => Algorithm::Crc16,
            "crc16_custom" => Algorithm::Crc16Custom,
            "csum16" => Algorithm::Csum16,
            "identity" => Algorithm::Identity,
            "xor16" => Algorithm::Xor16,
            "random" => Algorithm::Random,
            other => return self.err(pos, format!("hash algorithm `{other}` is not one BMv2 has")),
        })
    }

    /// A field list a `resubmit(data)`-style call names: the metadata places in `data`.
    fn call_field_list(&mut self, data: &'a ast::Expr, code: &mut Vec<Op>) -> R<u128> {
        let items: Vec<&'a ast::Expr> = match &data.kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![data],
        };
        let mut fields = Vec::new();
        for e in items {
            match self.lvalue(e, code)? {
                LVal::Loc(Loc::Fixed(s), t) => fields.push((s, self.size(&t))),
                _ => return self.err(e.pos, "a field list names whole fields of the metadata"),
            }
        }
        let index = self.next_field_list;
        self.next_field_list += 1;
        self.out.field_lists.push(ir::FieldList { index, fields });
        Ok(index)
    }

    /// The values of a field list (hashes, checksums, digests, logs), each with its width and
    /// the validity of the header it belongs to (BMv2 leaves invalid headers' fields out).
    pub(crate) fn data_items(&mut self, e: &'a ast::Expr, code: &mut Vec<Op>) -> R<Vec<ListItem>> {
        let items: Vec<&'a ast::Expr> = match &e.kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![e],
        };
        let mut out = Vec::new();
        for item in items {
            let valid = self.header_of_field(item);
            let v = self.expr(item, None, code)?;
            self.push_items(v, valid, item.pos, &mut out)?;
        }
        Ok(out)
    }

    fn push_items(&mut self, v: Val, valid: Option<ir::Slot>, pos: Pos, out: &mut Vec<ListItem>) -> R<()> {
        match v {
            Val::List(items, _) => {
                for i in items {
                    self.push_items(i, None, pos, out)?;
                }
            }
            Val::Loc(Loc::Fixed(s), Ty::Varbit(w)) => out.push(ListItem {
                value: Expr::Slot(s),
                width: w,
                valid,
                varbit: true,
            }),
            Val::Loc(loc, t) if !t.is_scalar() => {
                let Loc::Fixed(base) = loc else {
                    return self.err(pos, "a field list of a stack element chosen at run time");
                };
                let mut leaves = Vec::new();
                self.types.leaves(&t, base, &self.out.headers, &mut leaves);
                let mut heads = Vec::new();
                self.types.headers_in(&t, base, &self.out.headers, &mut heads);
                for (slot, lt) in leaves {
                    if heads.iter().any(|(h, _)| *h == slot) {
                        continue;
                    }
                    let varbit = self.is_varbit_length(&t, base, slot);
                    let owner = heads
                        .iter()
                        .filter(|(h, ht)| slot > *h && slot <= h + self.out.headers[*ht].stride())
                        .map(|(h, _)| *h)
                        .next();
                    let width = varbit.unwrap_or_else(|| lt.width(&self.types).unwrap_or(0));
                    out.push(ListItem {
                        value: Expr::Slot(slot),
                        width,
                        valid: owner,
                        varbit: varbit.is_some(),
                    });
                }
            }
            v => {
                let Some(t) = v.ty().cloned() else {
                    return self.err(pos, "a field list item of no type");
                };
                let Some(width) = t.width(&self.types).filter(|_| t != Ty::InfInt) else {
                    return self.err(pos, "a field list holds values of known width (write 8w1, not 1)");
                };
                let value = self.read(&v, pos)?;
                out.push(ListItem {
                    value,
                    width,
                    valid,
                    varbit: false,
                });
            }
        }
        Ok(())
    }

    /// The maximum width of the varbit whose length is at `slot`, in a value of `t` at `base`.
    fn is_varbit_length(&self, t: &Ty, base: ir::Slot, slot: ir::Slot) -> Option<u16> {
        let mut heads = Vec::new();
        self.types.headers_in(t, base, &self.out.headers, &mut heads);
        heads.iter().find_map(|(h, ht)| {
            let def = &self.out.headers[*ht];
            let v = def.varbit?;
            (h + def.field_slot(v) == slot).then_some(def.fields[v].1)
        })
    }

    /// The validity slot of the header a field path `h.f` belongs to.
    fn header_of_field(&mut self, e: &'a ast::Expr) -> Option<ir::Slot> {
        let ExprKind::Member(b, _) = &e.kind else { return None };
        // `error.X` and `Enum.X` are members of types, not of headers.
        if let ExprKind::Name(n) = &b.kind
            && self.lookup(n).is_none()
        {
            return None;
        }
        let mut scratch = Vec::new();
        let v = self.expr(b, None, &mut scratch).ok()?;
        match v {
            Val::Loc(Loc::Fixed(s), Ty::Header(_)) if scratch.is_empty() => Some(s),
            _ => None,
        }
    }
}
