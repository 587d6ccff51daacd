//! The architecture's externs: objects (registers, counters, meters, action profiles and
//! selectors, checksums, intlab's metadata) made from their instances, and the calls of their
//! methods and of extern functions (`mark_to_drop`, `hash`, checksums, clones, resubmit,
//! recirculate, digests, ...) lowered to [`crate::ir::Extern`].

use std::rc::Rc;

use crate::front::ast::{self, ExprKind, Type};
use crate::front::source::Pos;
use crate::ir::{self, Algorithm, ChecksumOp, CloneKind, CounterKind, Expr, Extern, ListItem, Op};

use super::call::void;
use super::expr::LVal;
use super::ty::Ty;
use super::value::{CVal, Loc, Val};
use super::{Binding, Lowerer, R, TypeBinding};

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
    /// PSA's `Hash<O>`: its algorithm and result type.
    Hash(Algorithm, Ty),
    /// PSA's `InternetChecksum`: the slot of its running sum.
    InternetChecksum(ir::Slot),
    /// PSA's `Random<T>(min, max)`.
    Random(Expr, Expr, Ty),
    /// PSA's `Digest<T>`.
    Digest(Ty),
    /// An object that only names a part of the architecture (PSA's replication and queueing
    /// engines).
    Architecture,
}

/// An extern object instance.
pub(crate) struct ExternInst {
    pub(crate) obj: ExternObj,
}

/// An extern instantiation's arguments, evaluated as constants, with what errors name.
struct ExternArgs<'n> {
    kind: &'n str,
    name: &'n str,
    pos: Pos,
    values: Vec<Val>,
}

impl ExternArgs<'_> {
    /// Argument `i` as an integer constant.
    fn int(&self, l: &mut Lowerer, i: usize) -> R<i128> {
        match self
            .values
            .get(i)
            .and_then(|v| v.constant().and_then(|c| c.int(v.ty().unwrap_or(&Ty::InfInt))))
        {
            Some(n) => Ok(n),
            None => l.err(
                self.pos,
                format!(
                    "{} `{}`: argument {} must be an integer constant",
                    self.kind,
                    self.name,
                    i + 1
                ),
            ),
        }
    }

    /// Argument `i` as an enum member's name, in lower case (PSA's members are upper case,
    /// PACKETS; v1model's lower case, packets).
    fn member(&self, l: &Lowerer, i: usize) -> Option<String> {
        match self.values.get(i) {
            Some(Val::Const(CVal::Bits(v), Ty::Enum(e))) => {
                l.types.enums[*e].members.get(*v as usize).map(|m| m.0.to_lowercase())
            }
            _ => None,
        }
    }
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
        let a = ExternArgs {
            kind,
            name,
            pos,
            values,
        };
        let obj = match kind {
            "Register" | "register" => self.register_instance(&a, targs, cp)?,
            "counter" | "direct_counter" | "Counter" | "DirectCounter" | "meter" | "direct_meter" | "Meter"
            | "DirectMeter" => self.counter_or_meter_instance(&a, cp)?,
            "action_profile" | "ActionProfile" | "action_selector" | "ActionSelector" => {
                self.profile_instance(&a, cp)?
            }
            "Hash" => {
                let Some(out) = targs.first().cloned() else {
                    return self.err(pos, format!("Hash `{name}` needs its result type: Hash<O>"));
                };
                let algo = match a.member(self, 0) {
                    Some(a) => self.algorithm_named(&psa_algorithm(&a), pos)?,
                    None => return self.err(pos, format!("Hash `{name}`: a PSA_HashAlgorithm_t first")),
                };
                ExternObj::Hash(algo, out)
            }
            "InternetChecksum" => ExternObj::InternetChecksum(self.alloc(&Ty::Bits(16, false))),
            "Random" => {
                let Some(t) = targs.first().cloned() else {
                    return self.err(pos, format!("Random `{name}` needs its type: Random<T>"));
                };
                let (Some(lo), Some(hi)) = (a.int(self, 0).ok(), a.int(self, 1).ok()) else {
                    return self.err(pos, format!("Random `{name}`: constant bounds expected"));
                };
                ExternObj::Random(Expr::Const(lo as u128), Expr::Const(hi as u128), t)
            }
            "Digest" => match targs.first() {
                Some(t) => ExternObj::Digest(t.clone()),
                None => return self.err(pos, format!("Digest `{name}` needs its type: Digest<T>")),
            },
            "PacketReplicationEngine" | "BufferingQueueingEngine" => ExternObj::Architecture,
            "Checksum16" => ExternObj::Checksum16,
            "intlab_metadata" => ExternObj::Intlab,
            other => {
                return self.err(
                    pos,
                    format!("extern `{other}` is not one intlab runs (v1model's and PSA's externs and intlab_metadata are; docs/p4.md)"),
                );
            }
        };
        Ok(Binding::Extern(Rc::new(ExternInst { obj })))
    }

    /// A `Register<T, S>` (PSA) or `register<T>` (v1model).
    fn register_instance(&mut self, a: &ExternArgs, targs: &[Ty], cp: String) -> R<ExternObj> {
        let (name, pos) = (a.name, a.pos);
        Ok(match a.kind {
            "Register" => {
                let Some(t) = targs.first().cloned() else {
                    return self.err(pos, format!("Register `{name}` needs its type: Register<T, S>"));
                };
                let Some(width) = t.width(&self.types).filter(|w| *w <= 128) else {
                    return self.err(
                        pos,
                        format!("Register `{name}`: cells of up to 128 bits of bit<W> type"),
                    );
                };
                let size = a.int(self, 0)?.max(0) as usize;
                let init = match a.values.get(1) {
                    None => 0,
                    Some(v) => match v.constant().and_then(|c| c.bits(width)) {
                        Some(b) => b,
                        None => {
                            return self.err(pos, format!("Register `{name}`: the initial value must be a constant"));
                        }
                    },
                };
                self.out.registers.push(ir::Register {
                    name: cp,
                    width,
                    size,
                    init,
                });
                ExternObj::Register(self.out.registers.len() - 1, t)
            }
            "register" => {
                let width = match targs.first() {
                    Some(Ty::Bits(w, _)) => *w,
                    Some(Ty::Bool) => 1,
                    Some(t) if t.width(&self.types).is_some() => t.width(&self.types).unwrap_or(32),
                    _ => return self.err(pos, format!("register `{name}` holds bit<W> or int<W> values")),
                };
                let size = a.int(self, 0)?.max(0) as usize;
                self.out.registers.push(ir::Register {
                    name: cp,
                    width,
                    size,
                    init: 0,
                });
                ExternObj::Register(
                    self.out.registers.len() - 1,
                    targs.first().cloned().unwrap_or(Ty::Bits(width, false)),
                )
            }
            _ => unreachable!("extern_instance passes only registers"),
        })
    }

    /// A counter or meter, indexed or direct, of v1model or PSA.
    fn counter_or_meter_instance(&mut self, a: &ExternArgs, cp: String) -> R<ExternObj> {
        let kind = a.kind;
        Ok(match kind {
            "counter" | "direct_counter" | "Counter" | "DirectCounter" => {
                let (size, kind_at) = if kind == "counter" || kind == "Counter" {
                    (a.int(self, 0)?.max(0) as usize, 1)
                } else {
                    (0, 0)
                };
                let ck = match a.member(self, kind_at).as_deref() {
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
                if kind == "counter" || kind == "Counter" {
                    ExternObj::Counter(id)
                } else {
                    ExternObj::DirectCounter(id)
                }
            }
            "meter" | "direct_meter" | "Meter" | "DirectMeter" => {
                let (size, kind_at) = if kind == "meter" || kind == "Meter" {
                    (a.int(self, 0)?.max(0) as usize, 1)
                } else {
                    (0, 0)
                };
                let bytes = a.member(self, kind_at).as_deref() == Some("bytes");
                self.out.meters.push(ir::Meter {
                    name: cp,
                    size,
                    bytes,
                    table: None,
                });
                let id = self.out.meters.len() - 1;
                if kind == "meter" || kind == "Meter" {
                    ExternObj::Meter(id)
                } else {
                    ExternObj::DirectMeter(id)
                }
            }
            _ => unreachable!("extern_instance passes only counters and meters"),
        })
    }

    /// An action profile or action selector.
    fn profile_instance(&mut self, a: &ExternArgs, cp: String) -> R<ExternObj> {
        let (name, pos) = (a.name, a.pos);
        Ok(match a.kind {
            "action_profile" | "ActionProfile" => {
                let size = a.int(self, 0)?.max(0) as usize;
                self.out.profiles.push(ir::Profile {
                    name: cp,
                    size,
                    selector: None,
                });
                ExternObj::Profile(self.out.profiles.len() - 1)
            }
            "action_selector" | "ActionSelector" => {
                let algo = match a.member(self, 0) {
                    Some(a) => self.algorithm_named(&psa_algorithm(&a), pos)?,
                    None => return self.err(pos, format!("action_selector `{name}`: a HashAlgorithm first")),
                };
                let size = a.int(self, 1)?.max(0) as usize;
                let width = a.int(self, 2)?.clamp(0, 64) as u16;
                self.out.profiles.push(ir::Profile {
                    name: cp,
                    size,
                    selector: Some((algo, width)),
                });
                ExternObj::Profile(self.out.profiles.len() - 1)
            }
            _ => unreachable!("extern_instance passes only action profiles and selectors"),
        })
    }

    /// `Hash.get_hash(data)` or `get_hash(base, data, max)` (PSA): its value.
    fn hash_get(&mut self, algo: Algorithm, out: &Ty, args: &'a [ast::Arg], pos: Pos, code: &mut Vec<Op>) -> R<Val> {
        let (base, data, max) = match args {
            [d] => (None, &d.value, None),
            [b, d, m] => (Some(&b.value), &d.value, Some(&m.value)),
            _ => return self.err(pos, "get_hash(data) or get_hash(base, data, max) expected"),
        };
        let w = out.width(&self.types).unwrap_or(32);
        let base = match base {
            Some(b) => self.scalar(b, Some(out), code)?.0,
            None => Expr::Const(0),
        };
        let data = self.data_items(data, code)?;
        let max = match max {
            Some(m) => self.scalar(m, Some(out), code)?.0,
            None => Expr::Const(0),
        };
        let s = self.alloc(out);
        code.push(Op::Extern(Box::new(Extern::HashValue {
            out: ir::Place::Slot(s, w),
            algo,
            data,
            width: w,
            base,
            max,
            right_aligned: true,
        })));
        Ok(Val::Loc(Loc::Fixed(s), out.clone()))
    }

    /// A method of `InternetChecksum` (PSA) whose state is in `state`: its value for `get` and
    /// `get_state`.
    fn internet_checksum(
        &mut self,
        state: ir::Slot,
        m: &str,
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Val> {
        let a = |i: usize| args.get(i).map(|a| &a.value);
        let op = match m {
            "clear" => ChecksumOp::Clear,
            "add" => ChecksumOp::Add,
            "subtract" => ChecksumOp::Subtract,
            "get" => ChecksumOp::Get,
            "get_state" => ChecksumOp::GetState,
            "set_state" => ChecksumOp::SetState,
            other => return self.err(pos, format!("InternetChecksum has no `{other}`")),
        };
        let data = match (op, a(0)) {
            (ChecksumOp::Add | ChecksumOp::Subtract, Some(d)) => self.data_items(d, code)?,
            (ChecksumOp::Add | ChecksumOp::Subtract, None) => {
                return self.err(pos, format!("{m}(data) expected"));
            }
            _ => Vec::new(),
        };
        let input = match (op, a(0)) {
            (ChecksumOp::SetState, Some(v)) => Some(self.scalar(v, Some(&Ty::Bits(16, false)), code)?.0),
            (ChecksumOp::SetState, None) => return self.err(pos, "set_state(value) expected"),
            _ => None,
        };
        let result = matches!(op, ChecksumOp::Get | ChecksumOp::GetState).then(|| self.alloc(&Ty::Bits(16, false)));
        code.push(Op::Extern(Box::new(Extern::ChecksumState {
            state,
            op,
            algo: Algorithm::Csum16,
            data,
            value: result.map(|s| ir::Place::Slot(s, 16)),
            input,
        })));
        Ok(match result {
            Some(s) => Val::Loc(Loc::Fixed(s), Ty::Bits(16, false)),
            None => void(),
        })
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
            // PSA's form: the value is the call's.
            (ExternObj::Register(r, t), "read") if args.len() == 1 => {
                let (i, _) = self.scalar(&args[0].value, Some(&Ty::Bits(32, false)), code)?;
                let (s, w) = (self.alloc(t), t.width(&self.types).unwrap_or(32));
                code.push(Op::Extern(Box::new(Extern::RegisterRead(*r, ir::Place::Slot(s, w), i))));
                Ok(Val::Loc(Loc::Fixed(s), t.clone()))
            }
            (ExternObj::Meter(id), "execute") | (ExternObj::DirectMeter(id), "execute") => {
                let index = match (&x.obj, a(0)) {
                    (ExternObj::Meter(_), Some(i)) => Some(self.scalar(i, Some(&Ty::Bits(32, false)), code)?.0),
                    (ExternObj::Meter(_), None) => return self.err(pos, "Meter.execute(index) expected"),
                    _ => None,
                };
                let color = match self.lookup_type("PSA_MeterColor_t").cloned() {
                    Some(TypeBinding::Ty(t)) => t,
                    _ => return self.err(pos, "execute() needs psa.p4's PSA_MeterColor_t"),
                };
                let (s, w) = (self.alloc(&color), color.width(&self.types).unwrap_or(32));
                code.push(Op::Extern(Box::new(Extern::Meter {
                    meter: *id,
                    index,
                    out: ir::Place::Slot(s, w),
                    psa_colors: true,
                })));
                Ok(Val::Loc(Loc::Fixed(s), color))
            }
            (ExternObj::Hash(algo, out), "get_hash") => self.hash_get(*algo, out, args, pos, code),
            (ExternObj::InternetChecksum(state), m) => self.internet_checksum(*state, m, args, pos, code),
            (ExternObj::Random(lo, hi, t), "read") => {
                let (s, w) = (self.alloc(t), t.width(&self.types).unwrap_or(32));
                code.push(Op::Extern(Box::new(Extern::Random(
                    ir::Place::Slot(s, w),
                    lo.clone(),
                    hi.clone(),
                ))));
                Ok(Val::Loc(Loc::Fixed(s), t.clone()))
            }
            (ExternObj::Digest(t), "pack") => {
                let Some(data) = a(0) else {
                    return self.err(pos, "Digest.pack(data) expected");
                };
                let d = self.digest(Some(t.clone()), 0, data, code)?;
                code.push(Op::Extern(Box::new(d)));
                Ok(void())
            }
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
                    psa_colors: false,
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
                    psa_colors: false,
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
                    right_aligned: false,
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

    /// v1model's `verify_checksum`/`update_checksum` (and `_with_payload`) call `name` with its
    /// arguments `ordered` (`args` as written, for where an error points).
    fn checksum_call(
        &mut self,
        name: &str,
        ordered: &[&'a ast::Expr],
        args: &'a [ast::Arg],
        pos: Pos,
        code: &mut Vec<Op>,
    ) -> R<Extern> {
        let a = |i: usize| ordered.get(i).copied();
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
        Ok(Extern::Checksum {
            verify: name.starts_with("verify"),
            condition,
            data,
            field: lv.place(width),
            current,
            width,
            algo,
            payload: name.ends_with("with_payload"),
        })
    }

    /// v1model's `clone`, `clone3` and `clone_preserving_field_list` call `name` with its
    /// arguments `ordered`.
    fn clone_call(&mut self, name: &str, ordered: &[&'a ast::Expr], pos: Pos, code: &mut Vec<Op>) -> R<Extern> {
        let a = |i: usize| ordered.get(i).copied();
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
        Ok(Extern::Clone {
            kind,
            session,
            field_list,
        })
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
        if name.starts_with("psa_") {
            return self.psa_function(name, &ordered, pos, code);
        }
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
                self.checksum_call(name, &ordered, args, pos, code)?
            }
            "clone" | "clone3" | "clone_preserving_field_list" => self.clone_call(name, &ordered, pos, code)?,
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
                let ty = match targs.first() {
                    Some(t) => Some(self.ty(t, pos)?),
                    None => None,
                };
                self.digest(ty, receiver, data, code)?
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

    /// A digest of `data` sent to receiver `receiver`: its type (`ty`, the type argument, or
    /// the data's own) names it and its fields to the control plane, as in P4Info.
    fn digest(&mut self, ty: Option<Ty>, receiver: u128, data: &'a ast::Expr, code: &mut Vec<Op>) -> R<Extern> {
        // Evaluated aside for its type only: the data's code is emitted once, by `data_items`.
        let ty = match ty {
            Some(t) => Some(t),
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
        Ok(Extern::Digest { digest, data: items })
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

/// A PSA hash algorithm's name (lower case) as BMv2 names it: p4c's psa backend maps
/// ONES_COMPLEMENT16 to csum16 and TARGET_DEFAULT to crc16.
fn psa_algorithm(name: &str) -> String {
    match name {
        "ones_complement16" => "csum16".to_owned(),
        "target_default" => "crc16".to_owned(),
        other => other.to_owned(),
    }
}
