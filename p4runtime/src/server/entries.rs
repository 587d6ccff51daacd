//! Table entries between P4Runtime's form (ids, byte strings, one `FieldMatch` per key that
//! is not a wildcard) and the executor's (indices, values, one `KeySet` per key).

use std::fmt;

use intlab_p4::exec::table::{StoredEntry, Via};
use intlab_p4::ir::{self, KeySet, MatchKind, mask};

use super::error::UpdateError;
use super::ids::Ids;
use crate::proto::p4::v1 as p4rt;
use p4rt::field_match::FieldMatchType;

/// A byte string as a value of `width` bits: any length, most significant byte first, but no
/// bit above the width may be set (P4Runtime's canonical form and the padded one both pass).
/// `what` names it in errors; it is only formatted for one (a Write of many entries would
/// otherwise make a string per field).
pub fn value(bytes: &[u8], width: u16, what: &dyn fmt::Display) -> Result<u128, UpdateError> {
    let significant: &[u8] = {
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
        &bytes[first..]
    };
    if significant.len() > 16 {
        return Err(UpdateError::invalid(format!(
            "{what}: {} bytes do not fit in {width} bits",
            bytes.len()
        )));
    }
    let v = significant.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b));
    if v & !mask(width) != 0 {
        return Err(UpdateError::invalid(format!(
            "{what}: {v:#x} does not fit in {width} bits"
        )));
    }
    Ok(v)
}

/// `v` as P4Runtime's canonical byte string: no leading zero bytes, one byte for 0.
pub fn canonical(v: u128) -> prost::bytes::Bytes {
    let bytes = v.to_be_bytes();
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(15);
    prost::bytes::Bytes::copy_from_slice(&bytes[first..])
}

/// The executor's entry for a P4Runtime table entry of table `t`: its key sets, priority,
/// action and arguments, or the profile member or group it runs.
pub fn from_p4rt(
    ids: &Ids,
    program: &ir::Program,
    t: usize,
    e: &p4rt::TableEntry,
) -> Result<(ir::Entry, Via), UpdateError> {
    let table = &program.tables[t];
    let mut matches = vec![KeySet::Any; table.keys.len()];
    let mut seen = vec![false; table.keys.len()];
    for m in &e.r#match {
        let k = (m.field_id as usize)
            .checked_sub(1)
            .filter(|&k| k < table.keys.len())
            .ok_or_else(|| UpdateError::invalid(format!("table `{}` has no match field {}", table.name, m.field_id)))?;
        if std::mem::replace(&mut seen[k], true) {
            return Err(UpdateError::invalid(format!("match field {} given twice", m.field_id)));
        }
        let key = &table.keys[k];
        matches[k] = key_set(
            key.kind,
            key.width,
            m,
            &format_args!("match field {} ({})", m.field_id, key.name),
        )?;
    }
    for (k, key) in table.keys.iter().enumerate() {
        if key.kind == MatchKind::Exact && !seen[k] {
            return Err(UpdateError::invalid(format!(
                "exact match field {} ({}) missing",
                k + 1,
                key.name
            )));
        }
    }
    let needs_priority = table.needs_priority();
    if needs_priority && e.priority <= 0 {
        return Err(UpdateError::invalid(format!(
            "table `{}` has ternary, range or optional keys: an entry needs a priority of 1 or more",
            table.name
        )));
    }
    if !needs_priority && e.priority != 0 {
        return Err(UpdateError::invalid(format!(
            "table `{}` takes no priority",
            table.name
        )));
    }
    use p4rt::table_action::Type;
    let profile = table.profile.map(|p| &program.profiles[p]);
    let (action, args, via) = match (e.action.as_ref().and_then(|a| a.r#type.as_ref()), profile) {
        (None, _) => (usize::MAX, Vec::new(), Via::Action),
        (Some(Type::Action(a)), None) => {
            let (i, args) = self::action(ids, program, t, a, false)?;
            (i, args, Via::Action)
        }
        (Some(Type::Action(_)), Some(p)) => {
            return Err(UpdateError::invalid(format!(
                "table `{}` runs members of its action profile `{}`: an entry names a member or a group",
                table.name, p.name
            )));
        }
        (Some(Type::ActionProfileMemberId(m)), Some(_)) => (0, Vec::new(), Via::Member(*m)),
        (Some(Type::ActionProfileGroupId(g)), Some(p)) if p.selector.is_some() => (0, Vec::new(), Via::Group(*g)),
        (Some(Type::ActionProfileGroupId(_)), Some(p)) => {
            return Err(UpdateError::invalid(format!(
                "`{}` is an action profile without a selector: it has no groups",
                p.name
            )));
        }
        (Some(Type::ActionProfileActionSet(_)), Some(_)) => {
            return Err(UpdateError::unimplemented(
                "one-shot action sets are not served: write a group",
            ));
        }
        (Some(_), None) => {
            return Err(UpdateError::invalid(format!(
                "table `{}` has no action profile: an entry names an action",
                table.name
            )));
        }
    };
    Ok((
        ir::Entry {
            matches,
            priority: i64::from(e.priority),
            action,
            args,
        },
        via,
    ))
}

/// The action and arguments of a table action; `default` when it is for the default entry.
pub fn action_call(
    ids: &Ids,
    program: &ir::Program,
    t: usize,
    a: &p4rt::TableAction,
    default: bool,
) -> Result<(usize, Vec<u128>), UpdateError> {
    match &a.r#type {
        Some(p4rt::table_action::Type::Action(a)) => action(ids, program, t, a, default),
        _ => Err(UpdateError::unimplemented(
            "a default entry runs an action: members, groups and action sets are for entries",
        )),
    }
}

/// Action `a` of table `t` (as its default when `default`): its index and arguments.
pub fn action(
    ids: &Ids,
    program: &ir::Program,
    t: usize,
    a: &p4rt::Action,
    default: bool,
) -> Result<(usize, Vec<u128>), UpdateError> {
    let table = &program.tables[t];
    let name = ids
        .action_name(a.action_id)
        .ok_or_else(|| UpdateError::not_found(format!("no action has id {}", a.action_id)))?;
    let listed = table
        .actions
        .iter()
        .find(|r| program.actions[r.action].name == name)
        .map(|r| (r.action, r.default_only, r.table_only));
    // P4's implicit NoAction: the default of a table that names none, for the default only.
    let implicit =
        (program.actions[table.default_action.0].name == name).then_some((table.default_action.0, true, false));
    let Some((index, default_only, table_only)) = listed.or(implicit) else {
        return Err(UpdateError::invalid(format!(
            "table `{}` has no action `{name}`",
            table.name
        )));
    };
    if default && table_only {
        return Err(UpdateError::invalid(format!(
            "`{name}` is @tableonly in `{}`",
            table.name
        )));
    }
    if !default && default_only {
        return Err(UpdateError::invalid(format!(
            "`{name}` is @defaultonly in `{}`",
            table.name
        )));
    }
    let action = &program.actions[index];
    if a.params.len() != action.params.len() {
        return Err(UpdateError::invalid(format!(
            "action `{name}` takes {} parameters, {} given",
            action.params.len(),
            a.params.len()
        )));
    }
    let mut args = vec![0; action.params.len()];
    let mut seen = vec![false; action.params.len()];
    for p in &a.params {
        let i = (p.param_id as usize)
            .checked_sub(1)
            .filter(|&i| i < action.params.len())
            .ok_or_else(|| UpdateError::invalid(format!("action `{name}` has no parameter {}", p.param_id)))?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(UpdateError::invalid(format!("parameter {} given twice", p.param_id)));
        }
        let param = &action.params[i];
        args[i] = value(
            &p.value,
            param.width,
            &format_args!("parameter {} ({})", p.param_id, param.name),
        )?;
    }
    Ok((index, args))
}

/// The key set a P4Runtime field match gives a key of `kind` and `w` bits (`what` names it in
/// errors).
pub fn key_set(kind: MatchKind, w: u16, m: &p4rt::FieldMatch, what: &dyn fmt::Display) -> Result<KeySet, UpdateError> {
    Ok(match (kind, &m.field_match_type) {
        (MatchKind::Exact, Some(FieldMatchType::Exact(x))) => KeySet::Value(value(&x.value, w, what)?),
        (MatchKind::Optional, Some(FieldMatchType::Optional(x))) => KeySet::Value(value(&x.value, w, what)?),
        (MatchKind::Lpm, Some(FieldMatchType::Lpm(x))) => {
            let len = u32::try_from(x.prefix_len)
                .ok()
                .filter(|&l| l >= 1 && l <= u32::from(w))
                .ok_or_else(|| {
                    UpdateError::invalid(format!("{what}: prefix length {} of a {w}-bit key", x.prefix_len))
                })?;
            let v = value(&x.value, w, what)?;
            let m = intlab_p4::exec::table::prefix_mask(len, w);
            if v & !m != 0 {
                return Err(UpdateError::invalid(format!(
                    "{what}: {v:#x} has bits past its /{len} prefix"
                )));
            }
            KeySet::Mask(v, m)
        }
        (MatchKind::Ternary, Some(FieldMatchType::Ternary(x))) => {
            let (v, m) = (value(&x.value, w, what)?, value(&x.mask, w, what)?);
            if m == 0 {
                return Err(UpdateError::invalid(format!(
                    "{what}: a mask of 0 is written by leaving the field out"
                )));
            }
            if v & !m != 0 {
                return Err(UpdateError::invalid(format!(
                    "{what}: value {v:#x} has bits outside its mask {m:#x}"
                )));
            }
            KeySet::Mask(v, m)
        }
        (MatchKind::Range, Some(FieldMatchType::Range(x))) => {
            let (lo, hi) = (value(&x.low, w, what)?, value(&x.high, w, what)?);
            if lo > hi {
                return Err(UpdateError::invalid(format!("{what}: low {lo:#x} above high {hi:#x}")));
            }
            if lo == 0 && hi == mask(w) {
                return Err(UpdateError::invalid(format!(
                    "{what}: the whole range is written by leaving the field out"
                )));
            }
            KeySet::Range(lo, hi)
        }
        (kind, _) => {
            return Err(UpdateError::invalid(format!(
                "{what} is {}: another kind of match given",
                kind.name()
            )));
        }
    })
}

/// A stored entry of table `t` in P4Runtime's form.
pub fn to_p4rt(ids: &Ids, program: &ir::Program, t: usize, stored: &StoredEntry) -> p4rt::TableEntry {
    let table = &program.tables[t];
    let e = &stored.entry;
    let mut r#match = Vec::new();
    for (k, (key, set)) in table.keys.iter().zip(&e.matches).enumerate() {
        let Some(field_match_type) = field_match(key.kind, *set) else {
            continue;
        };
        r#match.push(p4rt::FieldMatch {
            field_id: k as u32 + 1,
            field_match_type: Some(field_match_type),
        });
    }
    p4rt::TableEntry {
        table_id: ids.table_id(t),
        r#match,
        action: Some(match stored.via {
            Via::Action => action_of(ids, program, e.action, &e.args),
            Via::Member(m) => p4rt::TableAction {
                r#type: Some(p4rt::table_action::Type::ActionProfileMemberId(m)),
            },
            Via::Group(g) => p4rt::TableAction {
                r#type: Some(p4rt::table_action::Type::ActionProfileGroupId(g)),
            },
        }),
        priority: e.priority as i32,
        ..Default::default()
    }
}

/// A key set of a key of `kind` in P4Runtime's form; None for a wildcard (a field left out).
pub fn field_match(kind: MatchKind, set: KeySet) -> Option<FieldMatchType> {
    Some(match (kind, set) {
        (_, KeySet::Any) => return None,
        (MatchKind::Optional, KeySet::Value(v)) => {
            FieldMatchType::Optional(p4rt::field_match::Optional { value: canonical(v) })
        }
        (_, KeySet::Value(v)) => FieldMatchType::Exact(p4rt::field_match::Exact { value: canonical(v) }),
        (MatchKind::Lpm, KeySet::Mask(v, m)) => FieldMatchType::Lpm(p4rt::field_match::Lpm {
            value: canonical(v),
            prefix_len: m.count_ones() as i32,
        }),
        (_, KeySet::Mask(v, m)) => FieldMatchType::Ternary(p4rt::field_match::Ternary {
            value: canonical(v),
            mask: canonical(m),
        }),
        (_, KeySet::Range(lo, hi)) => FieldMatchType::Range(p4rt::field_match::Range {
            low: canonical(lo),
            high: canonical(hi),
        }),
    })
}

/// Action `a` with `args` as a P4Runtime table action.
pub fn action_of(ids: &Ids, program: &ir::Program, a: usize, args: &[u128]) -> p4rt::TableAction {
    p4rt::TableAction {
        r#type: Some(p4rt::table_action::Type::Action(p4rt::Action {
            action_id: ids.action_id(&program.actions[a].name),
            params: args
                .iter()
                .enumerate()
                .map(|(i, &v)| p4rt::action::Param {
                    param_id: i as u32 + 1,
                    value: canonical(v),
                })
                .collect(),
        })),
    }
}
