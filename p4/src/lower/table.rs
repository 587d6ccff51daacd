//! Tables: keys (any expression, computed before the lookup), action lists (with arguments
//! bound there), defaults, entries with priorities, size, and what is attached (direct
//! counters and meters, action profiles and selectors, idle timeouts).

use crate::front::ast::{self, ExprKind, TableProperty};
use crate::front::source::Pos;
use crate::ir::{self, Expr, KeySet, MatchKind, Op, mask};

use super::call::ActionDef;
use super::externs::ExternObj;
use super::ty::Ty;
use super::value::{Loc, Val};
use super::{Binding, Lowerer, R};

/// Entries a table holds when it gives no `size` (BMv2's default).
const DEFAULT_SIZE: usize = 1024;

/// A table as its control's code refers to it.
pub(crate) struct TableRef {
    /// Its index in the program.
    pub(crate) id: usize,
    /// Its actions: the name the control writes (in `switch` cases), and the action's index.
    pub(crate) actions: Vec<(String, usize)>,
}

/// A table property with a value as written: its name, value, whether `const`, where, and
/// its annotations.
type PropertyValue<'a> = (&'a str, &'a ast::Expr, bool, Pos, &'a [ast::Annotation]);

/// A table's keys as lowered.
#[derive(Default)]
struct TableKeys {
    /// The keys matched, in order.
    keys: Vec<ir::Key>,
    /// Each key's type.
    types: Vec<Ty>,
    /// An action selector's keys (hashed, not matched) and their widths.
    selector: Vec<(Expr, u16)>,
    /// Statements that compute keys needing them into slots before each lookup.
    prep: Vec<Op>,
}

/// What a table's properties with values say.
struct TableProperties {
    default_action: Option<(usize, Vec<u128>)>,
    const_default: bool,
    size: usize,
    direct_counter: Option<usize>,
    direct_meter: Option<usize>,
    profile: Option<usize>,
    idle_timeout: bool,
    largest_wins: bool,
}

impl<'a> Lowerer<'a> {
    pub(crate) fn table(&mut self, t: &'a ast::TableDecl) -> R<TableRef> {
        let name = self.cp_name(&t.annotations, &t.name);
        let mut keys = TableKeys::default();
        let mut action_refs: &'a [ast::ActionRef] = &[];
        let mut entries_prop = None;
        let mut values: Vec<PropertyValue<'a>> = Vec::new();
        for p in &t.properties {
            match p {
                TableProperty::Key(ks, _) => {
                    for k in ks {
                        self.table_key(k, &mut keys);
                    }
                }
                TableProperty::Actions(refs, _) => action_refs = refs,
                TableProperty::Entries { is_const, entries, .. } => entries_prop = Some((*is_const, entries)),
                TableProperty::Value {
                    name: prop,
                    value,
                    is_const,
                    pos,
                    annotations,
                } => values.push((prop.as_str(), value, *is_const, *pos, annotations)),
            }
        }
        if keys.keys.iter().filter(|k| k.kind == MatchKind::Lpm).count() > 1 {
            return self.err(
                t.pos,
                format!("table `{}` has more than one lpm key (BMv2 refuses it too)", t.name),
            );
        }
        let id = self.out.tables.len();
        // The table's actions, each lowered for it.
        let mut actions = Vec::new();
        let mut table_actions = Vec::new();
        for r in action_refs {
            let Some(Binding::Action(def)) = self.lookup(&r.name).cloned() else {
                self.report(r.pos, format!("action `{}` is not declared", r.name));
                continue;
            };
            let Ok(a) = self.table_action(&def, &r.args, r.pos) else {
                continue;
            };
            actions.push((r.name.clone(), a));
            table_actions.push(ir::TableAction {
                action: a,
                default_only: r.annotations.iter().any(|x| x.name == "defaultonly"),
                table_only: r.annotations.iter().any(|x| x.name == "tableonly"),
            });
        }
        let props = self.table_properties(&name, id, values, &actions)?;
        let TableKeys {
            keys,
            types: key_types,
            selector: selector_keys,
            prep,
        } = keys;
        let TableProperties {
            default_action,
            const_default,
            size,
            direct_counter,
            direct_meter,
            profile,
            idle_timeout,
            largest_wins,
        } = props;
        let default_action = match default_action {
            Some(d) => d,
            // P4's default default is NoAction: the table's own when it lists it.
            None => match actions.iter().find(|(n, _)| n == "NoAction") {
                Some((_, a)) => (*a, Vec::new()),
                None => (self.no_action(), Vec::new()),
            },
        };
        let entries = match entries_prop {
            Some((is_const, list)) => Some((
                self.entries(list, &keys, &key_types, &actions, largest_wins)?,
                !is_const,
            )),
            None => None,
        };
        if profile.is_some_and(|p| self.out.profiles[p].selector.is_some()) && selector_keys.is_empty() {
            return self.err(
                t.pos,
                format!("table `{}`: an action_selector needs `selector` keys", t.name),
            );
        }
        self.out.tables.push(ir::Table {
            name,
            prep,
            keys,
            selector_keys,
            actions: table_actions,
            default_action,
            const_default,
            entries,
            size,
            direct_counter,
            direct_meter,
            profile,
            idle_timeout,
        });
        Ok(TableRef { id, actions })
    }

    /// Adds key `k` to `keys`; a key that cannot be is reported and left out.
    fn table_key(&mut self, k: &'a ast::TableKey, keys: &mut TableKeys) {
        let mut code = Vec::new();
        let Ok((e, ty)) = self.scalar(&k.expr, None, &mut code) else {
            return;
        };
        let Some(width) = ty.width(&self.types) else {
            self.report(k.pos, "a key must be a bit, int, bool, error or enum value");
            return;
        };
        self.note_controller_type(&ty);
        // A key that needs statements is computed into a slot before each lookup.
        let e = if code.is_empty() {
            e
        } else {
            let s = self.alloc(&ty);
            keys.prep.extend(code);
            keys.prep.push(Op::Set(ir::Place::Slot(s, width), e));
            Expr::Slot(s)
        };
        let kind = match k.match_kind.as_str() {
            "exact" => MatchKind::Exact,
            "lpm" => MatchKind::Lpm,
            "ternary" => MatchKind::Ternary,
            "range" => MatchKind::Range,
            "optional" => MatchKind::Optional,
            "selector" => {
                keys.selector.push((e, width));
                return;
            }
            other => {
                self.report(k.pos, format!("match kind `{other}` is not one v1model has"));
                return;
            }
        };
        // A validity key is named as p4c names it in P4Info: `hdr.h.$valid$`.
        let key_name = ast::annotation_string(&k.annotations, "name").unwrap_or_else(|| {
            let text = k.expr.text();
            match text.strip_suffix(".isValid()") {
                Some(h) => format!("{h}.$valid$"),
                None => text,
            }
        });
        keys.keys.push(ir::Key {
            expr: e,
            kind,
            width,
            name: key_name,
        });
        keys.types.push(ty);
    }

    /// The properties with values of table `name` (its index `id`, its `actions`): default
    /// action, size, attached externs, priorities, idle timeout.
    fn table_properties(
        &mut self,
        name: &str,
        id: usize,
        values: Vec<PropertyValue<'a>>,
        actions: &[(String, usize)],
    ) -> R<TableProperties> {
        let mut props = TableProperties {
            default_action: None,
            const_default: false,
            size: DEFAULT_SIZE,
            direct_counter: None,
            direct_meter: None,
            profile: None,
            idle_timeout: false,
            largest_wins: true,
        };
        for (prop, value, is_const, pos, annotations) in values {
            match prop {
                "default_action" => {
                    let (a, args) = self.action_call(value, actions)?;
                    props.default_action = Some((a, args));
                    props.const_default = is_const;
                }
                "size" => props.size = self.const_int(value)?.max(0) as usize,
                // v1model's names, and PSA's.
                "implementation" | "psa_implementation" => {
                    let obj = self.attached(value, pos)?;
                    match obj {
                        ExternObj::Profile(p) => {
                            // An instance made in the property is named by the property's
                            // `@name`, as p4c names it, without its control's prefix.
                            if matches!(value.kind, ExprKind::Call(..))
                                && let Some(n) = ast::annotation_string(annotations, "name")
                            {
                                self.out.profiles[p].name = n.trim_start_matches('.').to_owned();
                            }
                            props.profile = Some(p);
                        }
                        _ => return self.err(pos, "implementation = an action_profile or action_selector"),
                    }
                }
                "counters" | "psa_direct_counter" => match self.attached(value, pos)? {
                    ExternObj::DirectCounter(c) => {
                        self.out.counters[c].table = Some(id);
                        props.direct_counter = Some(c);
                    }
                    _ => return self.err(pos, "counters = a direct_counter"),
                },
                "meters" | "psa_direct_meter" => match self.attached(value, pos)? {
                    ExternObj::DirectMeter(m) => {
                        self.out.meters[m].table = Some(id);
                        props.direct_meter = Some(m);
                    }
                    _ => return self.err(pos, "meters = a direct_meter"),
                },
                "largest_priority_wins" => {
                    let v = self.const_expr(value, Some(&Ty::Bool))?;
                    props.largest_wins = v.constant().and_then(|c| c.bits(1)) != Some(0);
                }
                "support_timeout" => {
                    let v = self.const_expr(value, Some(&Ty::Bool))?;
                    props.idle_timeout = v.constant().and_then(|c| c.bits(1)) == Some(1);
                }
                "psa_idle_timeout" => {
                    // PSA_IdleTimeout_t: NO_TIMEOUT (0) or NOTIFY_CONTROL (1).
                    let v = self.const_expr(value, None)?;
                    props.idle_timeout = v.constant().and_then(|c| c.bits(1)) == Some(1);
                }
                // Other properties are the target's to read; BMv2 ignores those it does not know.
                other => tracing::debug!(target: "p4", "table `{name}`: property `{other}` ignored"),
            }
        }
        Ok(props)
    }

    /// The extern object a table property names (an instance, or one made there).
    fn attached(&mut self, value: &'a ast::Expr, pos: Pos) -> R<ExternObj> {
        let b = match &value.kind {
            ExprKind::Name(n) => self.lookup(n).cloned(),
            ExprKind::Call(f, targs, args) => match &f.kind {
                ExprKind::Name(kind) => {
                    let name = format!("{}_{}", kind, self.out.tables.len());
                    let targs = self.type_args(targs, pos)?;
                    Some(self.extern_instance(kind, &targs, args, &name, &[], pos)?)
                }
                _ => None,
            },
            _ => None,
        };
        match b {
            Some(Binding::Extern(x)) => Ok(x.obj.clone()),
            _ => self.err(pos, format!("`{}` is not an extern instance", value.text())),
        }
    }

    fn type_args(&mut self, targs: &'a [ast::Type], pos: Pos) -> R<Vec<Ty>> {
        let mut out = Vec::new();
        for t in targs {
            out.push(self.ty(t, pos)?);
        }
        Ok(out)
    }

    /// An action of a table as the table runs it: arguments bound in the action list copied
    /// in, the control plane's in their slots, the body, then what is copied out.
    pub(crate) fn table_action(&mut self, def: &ActionDef<'a>, bound_args: &'a [ast::Arg], pos: Pos) -> R<usize> {
        let a = def.decl;
        self.used.insert(super::call::action_key(def));
        let scopes = def.scopes.clone().unwrap_or_else(|| self.global_scopes());
        let types = self.with_scopes(scopes.clone(), |l| l.param_types(&a.params))?;
        let n_bound = bound_args.len();
        if n_bound > a.params.len() {
            return self.err(
                pos,
                format!(
                    "action `{}` takes {} arguments, {n_bound} given",
                    a.name,
                    a.params.len()
                ),
            );
        }
        for p in &a.params[n_bound..] {
            if p.direction != ast::Direction::None {
                return self.err(
                    pos,
                    format!(
                        "action `{}`: parameter `{}` has a direction, so the table's action list must give it",
                        a.name, p.name
                    ),
                );
            }
        }
        let mut code = Vec::new();
        let args: Vec<&'a ast::Arg> = bound_args.iter().collect();
        let opt_types: Vec<Option<Ty>> = types[..n_bound].iter().cloned().map(Some).collect();
        let params: Vec<&'a ast::Param> = a.params[..n_bound].iter().collect();
        let bound = self.bind_args(&params, &opt_types, &args, pos, &mut code)?;
        let name = {
            let saved = std::mem::replace(&mut self.prefix, def.prefix.clone());
            let n = self.cp_name(&a.annotations, &a.name);
            self.prefix = saved;
            n
        };
        let prefix = def.prefix.clone();
        let (params, body) = self.with_scopes(scopes, |l| {
            l.push_scope();
            let saved = std::mem::replace(&mut l.prefix, prefix);
            let r = (|| {
                let copy_out = l.enter_params(&a.params[..n_bound], &types[..n_bound], bound, pos, &mut code)?;
                let mut params = Vec::new();
                for (p, t) in a.params[n_bound..].iter().zip(&types[n_bound..]) {
                    let Some(width) = t.width(&l.types) else {
                        let n = l.types.name(t);
                        return l.err(
                            p.pos,
                            format!(
                                "parameter `{}` is {n}: the control plane gives bit<W>, int<W>, bool or enum values",
                                p.name
                            ),
                        );
                    };
                    l.note_controller_type(t);
                    let slot = l.alloc(t);
                    l.bind(&p.name, Binding::Val(Val::Loc(Loc::Fixed(slot), t.clone())));
                    params.push(ir::Param {
                        name: p.name.clone(),
                        slot,
                        width,
                    });
                }
                l.returns.push(None);
                l.action_bodies += 1;
                let body = l.block(&a.body);
                l.action_bodies -= 1;
                l.returns.pop();
                super::stmt::push_scope(&mut code, body, copy_out);
                Ok((params, std::mem::take(&mut code)))
            })();
            l.prefix = saved;
            l.pop_scope();
            r
        })?;
        self.out.actions.push(ir::Action {
            name,
            params,
            body,
            annotations: ast::p4info_annotations(&a.annotations),
        });
        Ok(self.out.actions.len() - 1)
    }

    /// An action that does nothing: a table's default when it names none.
    fn no_action(&mut self) -> usize {
        self.out.actions.push(ir::Action {
            name: "NoAction".into(),
            params: Vec::new(),
            body: Vec::new(),
            // As core.p4 declares it.
            annotations: vec![r#"@noWarn("unused")"#.into()],
        });
        self.out.actions.len() - 1
    }

    /// `a(args)` (a default action, an entry's action): the table's action and the values of
    /// the control plane's parameters.
    fn action_call(&mut self, e: &'a ast::Expr, actions: &[(String, usize)]) -> R<(usize, Vec<u128>)> {
        let (name, args): (&str, &'a [ast::Arg]) = match &e.kind {
            ExprKind::Name(n) => (n, &[]),
            ExprKind::Call(f, _, args) => match &f.kind {
                ExprKind::Name(n) => (n, args),
                _ => return self.err(e.pos, "an action expected"),
            },
            _ => return self.err(e.pos, "an action expected"),
        };
        self.action_args(name, args, e.pos, actions)
    }

    fn action_args(
        &mut self,
        name: &str,
        args: &'a [ast::Arg],
        pos: Pos,
        actions: &[(String, usize)],
    ) -> R<(usize, Vec<u128>)> {
        let Some(&(_, id)) = actions.iter().find(|(n, _)| n == name) else {
            let known: Vec<&str> = actions.iter().map(|a| a.0.as_str()).collect();
            return self.err(
                pos,
                format!("action `{name}` is not one of the table's ({})", known.join(", ")),
            );
        };
        let params = self.out.actions[id].params.clone();
        // Arguments bound in the action list come first; the control plane's are the last.
        let skip = args.len().saturating_sub(params.len());
        let given = &args[skip..];
        if given.len() != params.len() {
            return self.err(
                pos,
                format!(
                    "action `{name}` takes {} control-plane argument(s), {} given",
                    params.len(),
                    given.len()
                ),
            );
        }
        let mut values = Vec::new();
        for (p, a) in params.iter().zip(given) {
            let v = self.const_expr(&a.value, Some(&Ty::Bits(p.width, false)))?;
            match v.constant().and_then(|c| c.bits(p.width)) {
                Some(b) => values.push(b & mask(p.width)),
                None => return self.err(a.value.pos, "a constant expected"),
            }
        }
        Ok((id, values))
    }

    /// A table's `entries`. Priorities are kept as "larger wins": `priority = N` as written
    /// (negated when the table says `largest_priority_wins = false`); `@priority(N)`, BMv2's own
    /// where the smaller wins, negated; an entry with neither ranks by its place, the first
    /// highest (p4c gives it BMv2 priority 1, 2, ...).
    fn entries(
        &mut self,
        list: &'a [ast::Entry],
        keys: &[ir::Key],
        key_types: &[Ty],
        actions: &[(String, usize)],
        largest_wins: bool,
    ) -> R<Vec<ir::Entry>> {
        let mut out = Vec::new();
        for (i, e) in list.iter().enumerate() {
            let mut matches = self.key_sets(&e.keys, key_types)?;
            for (m, k) in matches.iter_mut().zip(keys) {
                *m = self.entry_match(*m, k, e.pos)?;
            }
            let (action, args) = self.action_args(&e.action.name, &e.action.args, e.action.pos, actions)?;
            let annotated = e
                .annotations
                .iter()
                .find(|a| a.name == "priority")
                .and_then(|a| a.args.first());
            let priority = match (&e.priority, annotated) {
                (Some(p), _) => {
                    let p = self.const_int(p)? as i64;
                    if largest_wins { p } else { -p }
                }
                (None, Some(p)) => -(self.const_int(p)? as i64),
                (None, None) => -(i as i64 + 1),
            };
            out.push(ir::Entry {
                matches,
                priority,
                action,
                args,
            });
        }
        Ok(out)
    }

    /// A key set written in an entry, checked against its key's match kind.
    fn entry_match(&mut self, m: KeySet, k: &ir::Key, pos: Pos) -> R<KeySet> {
        let full = mask(k.width);
        let ok = match (k.kind, m) {
            (MatchKind::Exact, KeySet::Any) => false,
            (_, KeySet::Any) => true,
            (MatchKind::Exact | MatchKind::Optional, KeySet::Value(_)) => true,
            (MatchKind::Lpm, KeySet::Value(v)) => return Ok(KeySet::Mask(v, full)),
            (MatchKind::Lpm, KeySet::Mask(_, msk)) => {
                let msk = msk & full;
                msk == crate::ir::mask(k.width) & !(full >> msk.count_ones())
            }
            (MatchKind::Ternary, KeySet::Value(v)) => return Ok(KeySet::Mask(v, full)),
            (MatchKind::Ternary, KeySet::Mask(v, msk)) => return Ok(KeySet::Mask(v & msk, msk)),
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
                    "key `{}` is {}; this entry's `{m:?}` does not fit it",
                    k.name,
                    k.kind.name()
                ),
            )
        }
    }
}
