//! Architectures: how `main`'s package binds its blocks to the values they share. v1model's
//! `V1Switch` shares the headers, the user metadata and `standard_metadata` among its six
//! blocks, as BMv2's simple_switch does.

use crate::front::ast;
use crate::front::source::Pos;
use crate::ir::{self, BlockKind};

use super::ty::Ty;
use super::value::{Loc, Val};
use super::{Lowerer, R, carry_on};

/// V1Switch's blocks in order: what each is and the parameters it takes.
const V1SWITCH: [(&str, &str); 6] = [
    ("parser", "packet_in, out H, inout M, inout standard_metadata_t"),
    ("VerifyChecksum control", "inout H, inout M"),
    ("Ingress control", "inout H, inout M, inout standard_metadata_t"),
    ("Egress control", "inout H, inout M, inout standard_metadata_t"),
    ("ComputeChecksum control", "inout H, inout M"),
    ("Deparser control", "packet_out, in H"),
];

impl<'a> Lowerer<'a> {
    /// `V1Switch(p, vr, ig, eg, ck, dep) main`.
    pub(crate) fn v1switch(&mut self, main: &'a ast::Instance) -> R<()> {
        self.out.arch = ir::Arch::V1Model;
        let ordered = self.package_args(main.pos, "V1Switch", &main.args, &["p", "vr", "ig", "eg", "ck", "dep"])?;
        let mut uses = Vec::new();
        for a in ordered {
            uses.push(self.package_block(a)?);
        }
        // The parser's parameters give the shared types: headers, metadata, standard metadata.
        let types = self.block_param_types(&uses[0])?;
        let [hdr, meta, std] = types.as_slice() else {
            return self.err(
                uses[0].pos,
                "a v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)",
            );
        };
        let shared = self.shared_values(&[hdr.clone(), meta.clone(), std.clone()]);
        let (h, m, s) = (shared[0].clone(), shared[1].clone(), shared[2].clone());
        if let Val::Loc(Loc::Fixed(base), ht) = &h {
            self.out.hdr = (*base, self.size(ht));
        }
        self.out.std = self.std_slots(&s, main.pos)?;
        if let Val::Loc(Loc::Fixed(base), mt) = &m {
            let mut lists = Vec::new();
            self.field_lists(mt, *base, &mut lists);
            self.out.field_lists.extend(lists);
            let mut heads = Vec::new();
            self.types.headers_in(mt, *base, &self.out.headers, &mut heads);
            self.out.meta_headers = heads
                .into_iter()
                .map(|(slot, h)| (slot, self.size(&Ty::Header(h))))
                .collect();
        }
        let kinds = [
            BlockKind::Parser,
            BlockKind::Verify,
            BlockKind::Ingress,
            BlockKind::Egress,
            BlockKind::Compute,
            BlockKind::Deparser,
        ];
        for (i, (u, kind)) in uses.iter().zip(kinds).enumerate() {
            let values: Vec<Option<Val>> = match kind {
                BlockKind::Parser => vec![None, Some(h.clone()), Some(m.clone()), Some(s.clone())],
                BlockKind::Verify | BlockKind::Compute => vec![Some(h.clone()), Some(m.clone())],
                BlockKind::Deparser => vec![None, Some(h.clone())],
                _ => vec![Some(h.clone()), Some(m.clone()), Some(s.clone())],
            };
            self.bind_block(u, kind, values, i == 0, "V1Switch", V1SWITCH[i]);
        }
        Ok(())
    }

    /// Lowers block `u` of package `package` as the pipeline's block `kind`, its parameters
    /// bound to `values` (None for the packet); `role` says what the package wants there, for
    /// errors, which are reported and passed over.
    pub(crate) fn bind_block(
        &mut self,
        u: &super::block::BlockUse<'a>,
        kind: BlockKind,
        values: Vec<Option<Val>>,
        expect_parser: bool,
        package: &str,
        (role, signature): (&str, &str),
    ) {
        let is_parser = matches!(u.decl, super::block::BlockDecl::Parser(_));
        if expect_parser != is_parser {
            let what = if expect_parser { "a parser" } else { "a control" };
            self.report(u.pos, format!("{package}'s {role} must be {what}"));
            return;
        }
        let (name, params) = match u.decl {
            super::block::BlockDecl::Parser(p) => (&p.name, p.params.len()),
            super::block::BlockDecl::Control(c) => (&c.name, c.params.len()),
        };
        if params != values.len() {
            self.report(
                u.pos,
                format!(
                    "`{name}` takes {params} parameters; {package}'s {role} takes {} ({signature})",
                    values.len()
                ),
            );
            return;
        }
        carry_on(if is_parser {
            self.top_parser(u, values, kind)
        } else {
            self.top_control(u, values, kind)
        });
    }

    /// Where `standard_metadata`'s fields live.
    fn std_slots(&mut self, std: &Val, pos: Pos) -> R<ir::StdSlots> {
        let Val::Loc(Loc::Fixed(base), t) = std else {
            return self.err(pos, "standard_metadata must be standard_metadata_t");
        };
        let (base, t) = (*base, t.clone());
        let field = |l: &mut Self, n: &str| -> R<ir::Slot> {
            match l.types.field(&t, n, &l.out.headers) {
                Some((off, _)) => Ok(base + off),
                None => l.err(pos, format!("standard_metadata_t has no `{n}`")),
            }
        };
        Ok(ir::StdSlots {
            ingress_port: field(self, "ingress_port")?,
            egress_spec: field(self, "egress_spec")?,
            egress_port: field(self, "egress_port")?,
            instance_type: field(self, "instance_type")?,
            packet_length: field(self, "packet_length")?,
            enq_timestamp: field(self, "enq_timestamp")?,
            enq_qdepth: field(self, "enq_qdepth")?,
            deq_timedelta: field(self, "deq_timedelta")?,
            deq_qdepth: field(self, "deq_qdepth")?,
            ingress_global_timestamp: field(self, "ingress_global_timestamp")?,
            egress_global_timestamp: field(self, "egress_global_timestamp")?,
            mcast_grp: field(self, "mcast_grp")?,
            egress_rid: field(self, "egress_rid")?,
            checksum_error: field(self, "checksum_error")?,
            parser_error: field(self, "parser_error")?,
            priority: field(self, "priority")?,
            qid: field(self, "qid")?,
        })
    }

    /// The user metadata fields each `@field_list(N, ...)` index names, at any depth.
    fn field_lists(&self, t: &Ty, base: ir::Slot, lists: &mut Vec<ir::FieldList>) {
        let Some(def) = self.types.agg(t).filter(|_| matches!(t, Ty::Struct(_))) else {
            return;
        };
        let mut off = 0;
        for f in &def.fields {
            let size = self.size(&f.ty);
            for a in f.annotations.iter().filter(|a| a.name == "field_list") {
                for arg in &a.args {
                    // A number, or the name of a constant (`const int FL_PACKET_IN = 1;`).
                    let index = match &arg.kind {
                        crate::front::ast::ExprKind::Int(n) => n.value,
                        crate::front::ast::ExprKind::Name(name) => match self.lookup(name) {
                            Some(super::Binding::Val(v)) => {
                                match v.constant().and_then(|c| c.int(v.ty().unwrap_or(&Ty::InfInt))) {
                                    Some(n) => n as u128,
                                    None => continue,
                                }
                            }
                            _ => continue,
                        },
                        _ => continue,
                    };
                    match lists.iter_mut().find(|l| l.index == index) {
                        Some(l) => l.fields.push((base + off, size)),
                        None => lists.push(ir::FieldList {
                            index,
                            fields: vec![(base + off, size)],
                        }),
                    }
                }
            }
            self.field_lists(&f.ty, base + off, lists);
            off += size;
        }
    }
}
