//! PSA's `PSA_Switch`: an ingress pipeline (parser, control, deparser) and an egress pipeline
//! that parses the frame again, as BMv2's psa_switch runs them. Each pipeline has headers and
//! metadata of its own; the metadata the architecture passes between blocks (the `istd` and
//! `ostd` structs) is shared by the blocks that name it.

use crate::front::ast::{self, ExprKind, Type};
use crate::front::source::Pos;
use crate::ir::{self, BlockKind};

use super::ty::Ty;
use super::value::{Loc, Val};
use super::{Binding, Lowerer, R};

/// What each block is and the parameters it takes, for errors.
const ROLES: [(&str, &str); 6] = [
    (
        "ingress parser",
        "packet_in, out H, inout M, in psa_ingress_parser_input_metadata_t, in RESUBM, in RECIRCM",
    ),
    (
        "ingress control",
        "inout H, inout M, in psa_ingress_input_metadata_t, inout psa_ingress_output_metadata_t",
    ),
    (
        "ingress deparser",
        "packet_out, out CI2EM, out RESUBM, out NM, inout H, in M, in psa_ingress_output_metadata_t",
    ),
    (
        "egress parser",
        "packet_in, out H, inout M, in psa_egress_parser_input_metadata_t, in NM, in CI2EM, in CE2EM",
    ),
    (
        "egress control",
        "inout H, inout M, in psa_egress_input_metadata_t, inout psa_egress_output_metadata_t",
    ),
    (
        "egress deparser",
        "packet_out, out CE2EM, out RECIRCM, inout H, in M, in psa_egress_output_metadata_t, in psa_egress_deparser_input_metadata_t",
    ),
];

impl<'a> Lowerer<'a> {
    /// `PSA_Switch(IngressPipeline(ip, ig, id), PacketReplicationEngine(),
    /// EgressPipeline(ep, eg, ed), BufferingQueueingEngine()) main`, the pipelines given inline
    /// or as instances declared before.
    pub(crate) fn psa_switch(&mut self, main: &'a ast::Instance) -> R<()> {
        self.out.arch = ir::Arch::Psa;
        let args = self.package_args(main.pos, "PSA_Switch", &main.args, &["ingress", "pre", "egress", "bqe"])?;
        let ingress = self.pipeline(args[0], "IngressPipeline", &["ip", "ig", "id"])?;
        let egress = self.pipeline(args[2], "EgressPipeline", &["ep", "eg", "ed"])?;
        let mut uses = Vec::new();
        for a in ingress.into_iter().chain(egress) {
            uses.push(self.package_block(a)?);
        }
        let types: Vec<Vec<Ty>> = uses.iter().map(|u| self.block_param_types(u)).collect::<R<_>>()?;
        let want = [5, 4, 6, 6, 4, 6];
        for (i, (t, n)) in types.iter().zip(want).enumerate() {
            if t.len() != n {
                let (role, signature) = ROLES[i];
                return self.err(uses[i].pos, format!("PSA_Switch's {role} takes ({signature})"));
            }
        }
        let fresh = |l: &mut Self, t: &Ty| l.shared_values(std::slice::from_ref(t)).remove(0);
        // Ingress: headers, metadata and the architecture's structs, shared by its blocks;
        // what the deparser hands on (clone, resubmit, normal metadata) is its own.
        let (ih, im) = (fresh(self, &types[0][0]), fresh(self, &types[0][1]));
        let parser_in = fresh(self, &types[0][2]);
        let (resubmit_in, recirculate_in) = (fresh(self, &types[0][3]), fresh(self, &types[0][4]));
        let (ingress_in, ingress_out) = (fresh(self, &types[1][2]), fresh(self, &types[1][3]));
        let out_meta: Vec<Val> = (0..3).map(|k| fresh(self, &types[2][k])).collect();
        // Egress: the same, its headers and metadata zeroed for each frame.
        let first_egress = self.out.slots as ir::Slot;
        let (eh, em) = (fresh(self, &types[3][0]), fresh(self, &types[3][1]));
        let egress_state = (first_egress, self.out.slots as u32 - first_egress);
        let egress_parser_in = fresh(self, &types[3][2]);
        let in_meta: Vec<Val> = (3..6).map(|k| fresh(self, &types[3][k])).collect();
        let (egress_in, egress_out) = (fresh(self, &types[4][2]), fresh(self, &types[4][3]));
        let (e2e_out, recirculate_out) = (fresh(self, &types[5][0]), fresh(self, &types[5][1]));
        let deparser_in = fresh(self, &types[5][5]);

        let field = |l: &mut Self, v: &Val, names: &[&str]| -> R<Vec<ir::Slot>> {
            let Val::Loc(Loc::Fixed(base), t) = v else {
                return l.err(main.pos, "PSA metadata must be PSA's structs");
            };
            names
                .iter()
                .map(|n| match l.types.field(t, n, &l.out.headers) {
                    Some((off, _)) => Ok(base + off),
                    None => l.err(main.pos, format!("`{}` has no field `{n}`", l.types.name(t))),
                })
                .collect()
        };
        let slots = ir::PsaSlots {
            parser_in: arr(field(self, &parser_in, &["ingress_port", "packet_path"])?),
            ingress_in: arr(field(
                self,
                &ingress_in,
                &["ingress_port", "packet_path", "ingress_timestamp", "parser_error"],
            )?),
            ingress_out: arr(field(
                self,
                &ingress_out,
                &[
                    "class_of_service",
                    "clone",
                    "clone_session_id",
                    "drop",
                    "resubmit",
                    "multicast_group",
                    "egress_port",
                ],
            )?),
            egress_parser_in: arr(field(self, &egress_parser_in, &["egress_port", "packet_path"])?),
            egress_in: arr(field(
                self,
                &egress_in,
                &[
                    "class_of_service",
                    "egress_port",
                    "packet_path",
                    "instance",
                    "egress_timestamp",
                    "parser_error",
                ],
            )?),
            egress_out: arr(field(self, &egress_out, &["clone", "clone_session_id", "drop"])?),
            deparser_in: field(self, &deparser_in, &["egress_port"])?[0],
            egress_state,
        };
        self.out.psa = Some(slots);
        self.out.std = self.hidden_std();
        if let Val::Loc(Loc::Fixed(base), ht) = &ih {
            self.out.hdr = (*base, self.size(ht));
        }

        let some = |v: &Val| Some(v.clone());
        let values: [Vec<Option<Val>>; 6] = [
            vec![
                None,
                some(&ih),
                some(&im),
                some(&parser_in),
                some(&resubmit_in),
                some(&recirculate_in),
            ],
            vec![some(&ih), some(&im), some(&ingress_in), some(&ingress_out)],
            vec![
                None,
                some(&out_meta[0]),
                some(&out_meta[1]),
                some(&out_meta[2]),
                some(&ih),
                some(&im),
                some(&ingress_out),
            ],
            vec![
                None,
                some(&eh),
                some(&em),
                some(&egress_parser_in),
                some(&in_meta[0]),
                some(&in_meta[1]),
                some(&in_meta[2]),
            ],
            vec![some(&eh), some(&em), some(&egress_in), some(&egress_out)],
            vec![
                None,
                some(&e2e_out),
                some(&recirculate_out),
                some(&eh),
                some(&em),
                some(&egress_out),
                some(&deparser_in),
            ],
        ];
        let kinds = [
            BlockKind::Parser,
            BlockKind::Ingress,
            BlockKind::IngressDeparser,
            BlockKind::EgressParser,
            BlockKind::Egress,
            BlockKind::Deparser,
        ];
        for (i, (u, values)) in uses.iter().zip(values).enumerate() {
            self.bind_block(u, kinds[i], values, i == 0 || i == 3, "PSA_Switch", ROLES[i]);
        }
        Ok(())
    }

    /// Slots for what the executor keeps in v1model's standard metadata (parser errors, the
    /// packet's length), which PSA programs do not see.
    fn hidden_std(&mut self) -> ir::StdSlots {
        let mut next = || {
            let s = self.out.slots as ir::Slot;
            self.out.slots += 1;
            s
        };
        ir::StdSlots {
            ingress_port: next(),
            egress_spec: next(),
            egress_port: next(),
            instance_type: next(),
            packet_length: next(),
            enq_timestamp: next(),
            enq_qdepth: next(),
            deq_timedelta: next(),
            deq_qdepth: next(),
            ingress_global_timestamp: next(),
            egress_global_timestamp: next(),
            mcast_grp: next(),
            egress_rid: next(),
            checksum_error: next(),
            parser_error: next(),
            priority: next(),
            qid: next(),
        }
    }

    /// A package's arguments in its parameters' order (`names`), given by position or by name.
    pub(crate) fn package_args(
        &mut self,
        pos: Pos,
        package: &str,
        args: &'a [ast::Arg],
        names: &[&str],
    ) -> R<Vec<&'a ast::Arg>> {
        if args.len() != names.len() {
            return self.err(
                pos,
                format!(
                    "{package} takes {} arguments ({}), {} given",
                    names.len(),
                    names.join(", "),
                    args.len()
                ),
            );
        }
        let mut ordered = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let a = args
                .iter()
                .find(|a| a.name.as_deref() == Some(*n))
                .or_else(|| args.get(i).filter(|a| a.name.is_none()));
            match a {
                Some(a) => ordered.push(a),
                None => return self.err(pos, format!("{package}'s `{n}` is not given")),
            }
        }
        Ok(ordered)
    }

    /// The blocks of pipeline package `package` given as `arg`: inline (`IngressPipeline(...)`)
    /// or an instance declared before (`IngressPipeline(...) ip;` and `ip`).
    fn pipeline(&mut self, arg: &'a ast::Arg, package: &str, names: &[&str]) -> R<Vec<&'a ast::Arg>> {
        let (ty, args, pos) = match &arg.value.kind {
            ExprKind::Call(f, _, args) => match &f.kind {
                ExprKind::Name(n) => (n.clone(), args.as_slice(), arg.value.pos),
                _ => return self.err(arg.value.pos, format!("an {package} expected")),
            },
            ExprKind::Name(n) => match self.lookup(n).cloned() {
                Some(Binding::Pending(i)) => match &i.ty {
                    Type::Named(t, _, _) => (t.clone(), i.args.as_slice(), i.pos),
                    _ => return self.err(i.pos, format!("an {package} expected")),
                },
                _ => return self.err(arg.value.pos, format!("`{n}` is not an {package}")),
            },
            _ => return self.err(arg.value.pos, format!("an {package} expected")),
        };
        if ty != package {
            return self.err(pos, format!("`{ty}` given where PSA_Switch takes an {package}"));
        }
        self.package_args(pos, package, args, names)
    }
}

impl<'a> Lowerer<'a> {
    /// PSA's functions of its output metadata, as the specification defines them:
    /// `psa_clone_i2e(o)` and `psa_clone_e2e(o)` are `o.clone`, `psa_resubmit(o)` is
    /// `!o.drop && o.resubmit`, `psa_normal(o)` is `!o.drop && !o.resubmit`, and
    /// `psa_recirculate(o, d)` is `!o.drop && d.egress_port == PSA_PORT_RECIRCULATE`.
    pub(crate) fn psa_function(
        &mut self,
        name: &str,
        args: &[&'a ast::Expr],
        pos: Pos,
        code: &mut Vec<ir::Op>,
    ) -> R<Val> {
        let arity = if name == "psa_recirculate" { 2 } else { 1 };
        if args.len() != arity {
            return self.err(pos, format!("{name} takes {arity} argument(s)"));
        }
        let mut field = |l: &mut Self, arg: &'a ast::Expr, f: &str| -> R<ir::Expr> {
            let v = l.expr(arg, None, code)?;
            let Val::Loc(Loc::Fixed(base), t) = &v else {
                return l.err(arg.pos, format!("{name}: PSA's metadata expected"));
            };
            match l.types.field(t, f, &l.out.headers) {
                Some((off, _)) => Ok(ir::Expr::Slot(base + off)),
                None => l.err(arg.pos, format!("{name}: `{}` has no `{f}`", l.types.name(t))),
            }
        };
        let not = |e: ir::Expr| ir::Expr::Cond(Box::new(e), Box::new(ir::Expr::Const(0)), Box::new(ir::Expr::Const(1)));
        let and = |a: ir::Expr, b: ir::Expr| ir::Expr::Cond(Box::new(a), Box::new(b), Box::new(ir::Expr::Const(0)));
        let e = match name {
            "psa_clone_i2e" | "psa_clone_e2e" => field(self, args[0], "clone")?,
            "psa_resubmit" => and(not(field(self, args[0], "drop")?), field(self, args[0], "resubmit")?),
            "psa_normal" => and(
                not(field(self, args[0], "drop")?),
                not(field(self, args[0], "resubmit")?),
            ),
            "psa_recirculate" => {
                let port = field(self, args[1], "egress_port")?;
                let recirculates = ir::Expr::BinaryConst(ir::Binary::Eq, Box::new(port), 0xffff_fffa, 32, false);
                and(not(field(self, args[0], "drop")?), recirculates)
            }
            other => {
                return self.err(
                    pos,
                    format!("extern function `{other}` is not one intlab runs (docs/p4.md)"),
                );
            }
        };
        Ok(Val::Expr(e, Ty::Bool))
    }
}

/// The slots of `v`, which has `N` (the caller asked for `N` names).
fn arr<const N: usize>(v: Vec<ir::Slot>) -> [ir::Slot; N] {
    let mut out = [0; N];
    out.copy_from_slice(&v);
    out
}
