//! Tables: keys, action lists, defaults and `const entries`.

use crate::ast::{self, ExprKind};
use crate::error::Result;
use crate::info::{at_name, text};
use crate::ir::{self, KeySet, MatchKind};

use super::{Binding, Lowerer, Ty, mask};

/// Entries a table holds when it gives no `size` (BMv2's default).
const DEFAULT_SIZE: usize = 1024;

impl<'a> Lowerer<'a> {
    pub(super) fn table(&mut self, t: &'a ast::TableDecl) -> Result<usize> {
        let name = self.cp_name(&t.annotations, &t.name);
        let mut keys = Vec::new();
        for k in &t.keys {
            let kind = match k.match_kind.as_str() {
                "exact" => MatchKind::Exact,
                "lpm" => MatchKind::Lpm,
                "ternary" => MatchKind::Ternary,
                "range" => MatchKind::Range,
                "optional" => MatchKind::Optional,
                other => {
                    return self.err(
                        k.pos,
                        format!("match kind `{other}` is not supported (action selectors come later)"),
                    );
                }
            };
            let (expr, ty) = self.scalar(&k.expr)?;
            let Some(width) = ty.width() else {
                return self.err(k.pos, "a key must be a bit, int or bool value");
            };
            keys.push(ir::Key {
                expr,
                kind,
                width,
                name: at_name(&k.annotations).unwrap_or_else(|| text(&k.expr)),
            });
        }
        if keys.iter().filter(|k| k.kind == MatchKind::Lpm).count() > 1 {
            return self.err(t.pos, format!("table `{}` has more than one lpm key", t.name));
        }
        let mut actions = Vec::new();
        for r in &t.actions {
            if !r.args.is_empty() {
                return self.err(r.pos, "arguments bound in a table's action list are not supported");
            }
            actions.push(self.action_ref(&r.name, r.pos)?);
        }
        let no_action = self.action_ref("NoAction", t.pos)?;
        let (default_action, const_default) = match &t.default_action {
            Some((r, c)) => {
                let id = self.action_ref(&r.name, r.pos)?;
                if !actions.contains(&id) {
                    return self.err(
                        r.pos,
                        format!("default action `{}` is not in the table's actions", r.name),
                    );
                }
                (self.action_args(id, &r.args, r.pos)?, *c)
            }
            None => ((no_action, Vec::new()), false),
        };
        let const_entries = if t.entries.is_empty() {
            None
        } else {
            let mut entries = Vec::new();
            let n = t.entries.len() as i64;
            for (i, e) in t.entries.iter().enumerate() {
                let widths: Vec<(u16, Ty)> = keys.iter().map(|k| (k.width, Ty::Bits(k.width, false))).collect();
                let mut matches = self.key_sets(&single_or_list(&e.keys), &widths)?;
                for (m, k) in matches.iter_mut().zip(&keys) {
                    *m = self.entry_match(*m, k, e.pos)?;
                }
                let id = self.action_ref(&e.action.name, e.action.pos)?;
                if !actions.contains(&id) {
                    return self.err(
                        e.action.pos,
                        format!("action `{}` is not in the table's actions", e.action.name),
                    );
                }
                let (action, args) = self.action_args(id, &e.action.args, e.action.pos)?;
                let priority = match &e.priority {
                    Some(p) => self.constant(p)?.0 as i64,
                    None => n - i as i64,
                };
                entries.push(ir::Entry {
                    matches,
                    priority,
                    action,
                    args,
                });
            }
            Some(entries)
        };
        let size = match &t.size {
            Some(e) => self.constant(e)?.0 as usize,
            None => DEFAULT_SIZE,
        };
        let mut direct_counter = false;
        for (prop, value, pos) in &t.other {
            match prop.as_str() {
                "counters" => {
                    let ExprKind::Name(n) = &value.kind else {
                        return self.err(*pos, "counters = <direct_counter name> expected");
                    };
                    if !matches!(self.lookup(n), Some(Binding::DirectCounter)) {
                        return self.err(*pos, format!("`{n}` is not a direct_counter"));
                    }
                    direct_counter = true;
                }
                "support_timeout" | "psa_direct_counter" => {}
                other => {
                    return self.err(
                        *pos,
                        format!("table property `{other}` is not supported (meters and implementations come later)"),
                    );
                }
            }
        }
        self.out.tables.push(ir::Table {
            name,
            keys,
            actions,
            default_action,
            const_default,
            const_entries,
            size,
            direct_counter,
        });
        Ok(self.out.tables.len() - 1)
    }

    /// A key set written in `const entries`, checked against the key's match kind.
    fn entry_match(&self, m: KeySet, k: &ir::Key, pos: crate::source::Pos) -> Result<KeySet> {
        let ok = match (k.kind, m) {
            (_, KeySet::Any) => k.kind != MatchKind::Exact,
            (MatchKind::Exact | MatchKind::Optional, KeySet::Value(_)) => true,
            (MatchKind::Lpm, KeySet::Value(v)) => return Ok(KeySet::Mask(v, mask(k.width))),
            (MatchKind::Lpm, KeySet::Mask(_, msk)) => msk.leading_zeros() + msk.count_ones() == 128,
            (MatchKind::Ternary, KeySet::Value(v)) => return Ok(KeySet::Mask(v, mask(k.width))),
            (MatchKind::Ternary, KeySet::Mask(..)) => true,
            (MatchKind::Range, KeySet::Range(..)) => true,
            (MatchKind::Range, KeySet::Value(v)) => return Ok(KeySet::Range(v, v)),
            _ => false,
        };
        if ok {
            Ok(m)
        } else {
            self.err(
                pos,
                format!(
                    "key `{}` is {:?}; this entry's value does not fit that match kind",
                    k.name, k.kind
                ),
            )
        }
    }

    /// An action with constant arguments for its control-plane parameters.
    fn action_args(&self, id: usize, args: &[ast::Expr], pos: crate::source::Pos) -> Result<(usize, Vec<u128>)> {
        let a = &self.out.actions[id];
        let params: Vec<&ir::Param> = a.params.iter().filter(|p| p.control_plane).collect();
        if params.len() != args.len() {
            return self.err(
                pos,
                format!(
                    "action `{}` takes {} arguments, {} given",
                    a.name,
                    params.len(),
                    args.len()
                ),
            );
        }
        let mut values = Vec::new();
        for (p, e) in params.iter().zip(args) {
            values.push(self.constant(e)?.0 & mask(p.width));
        }
        Ok((id, values))
    }
}

/// The keys of an entry as one expression for [`Lowerer::key_sets`].
fn single_or_list(keys: &[ast::Expr]) -> ast::Expr {
    match keys {
        [one] => one.clone(),
        many => ast::Expr {
            kind: ExprKind::List(many.to_vec()),
            pos: many.first().map(|e| e.pos).unwrap_or_default(),
        },
    }
}
