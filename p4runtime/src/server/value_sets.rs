//! Parser value sets over P4Runtime: a ValueSetEntry is the whole set (written with MODIFY),
//! each member one field match per field of the set's type, of that field's `@match` kind.

use intlab_p4::exec::control_plane::ControlPlane;
use intlab_p4::ir::{self, KeySet, MatchKind};

use super::entries::{field_match, key_set};
use super::error::UpdateError;
use super::ids::Ids;
use crate::proto::p4::v1 as p4rt;

/// Field `f`'s match kind in value set `v` (exact unless its `@match` says otherwise).
fn kind(v: &ir::ValueSet, f: usize) -> MatchKind {
    v.fields.get(f).map_or(MatchKind::Exact, |(_, k)| *k)
}

/// Replaces value set `e.value_set_id`'s members.
pub fn update(
    cp: &mut ControlPlane,
    ids: &Ids,
    program: &ir::Program,
    kind_of_update: p4rt::update::Type,
    e: &p4rt::ValueSetEntry,
) -> Result<(), UpdateError> {
    let s = ids
        .value_set(e.value_set_id)
        .ok_or_else(|| UpdateError::not_found(format!("no value set has id {}", e.value_set_id)))?;
    if kind_of_update != p4rt::update::Type::Modify {
        return Err(UpdateError::invalid("a value set is written whole, with MODIFY"));
    }
    let set = &program.value_sets[s];
    if set.size > 0 && e.members.len() > set.size {
        return Err(UpdateError {
            code: tonic::Code::ResourceExhausted,
            message: format!(
                "value set `{}` holds {} members; {} given",
                set.name,
                set.size,
                e.members.len()
            ),
        });
    }
    let mut members = Vec::new();
    for (n, m) in e.members.iter().enumerate() {
        let mut keys = vec![KeySet::Any; set.widths.len()];
        for fm in &m.r#match {
            let f = (fm.field_id as usize)
                .checked_sub(1)
                .filter(|&f| f < set.widths.len())
                .ok_or_else(|| UpdateError::invalid(format!("member {n}: no match field {}", fm.field_id)))?;
            keys[f] = key_set(
                kind(set, f),
                set.widths[f],
                fm,
                &format_args!("member {n}, match field {}", fm.field_id),
            )?;
        }
        if let Some(f) = (0..keys.len()).find(|&f| kind(set, f) == MatchKind::Exact && keys[f] == KeySet::Any) {
            return Err(UpdateError::invalid(format!(
                "member {n}: exact match field {} missing",
                f + 1
            )));
        }
        if !members.contains(&keys) {
            members.push(keys);
        }
    }
    cp.value_sets[s] = members;
    Ok(())
}

/// Value set `e.value_set_id` (0: every one) with its members.
pub fn read(
    cp: &ControlPlane,
    ids: &Ids,
    program: &ir::Program,
    e: &p4rt::ValueSetEntry,
) -> Result<Vec<p4rt::Entity>, UpdateError> {
    let sets: Vec<usize> = if e.value_set_id == 0 {
        (0..program.value_sets.len()).collect()
    } else {
        vec![
            ids.value_set(e.value_set_id)
                .ok_or_else(|| UpdateError::not_found(format!("no value set has id {}", e.value_set_id)))?,
        ]
    };
    Ok(sets
        .into_iter()
        .map(|s| {
            let set = &program.value_sets[s];
            let members = cp.value_sets[s]
                .iter()
                .map(|keys| p4rt::ValueSetMember {
                    r#match: keys
                        .iter()
                        .enumerate()
                        .filter_map(|(f, k)| {
                            Some(p4rt::FieldMatch {
                                field_id: f as u32 + 1,
                                field_match_type: Some(field_match(kind(set, f), *k)?),
                            })
                        })
                        .collect(),
                })
                .collect();
            p4rt::Entity {
                entity: Some(p4rt::entity::Entity::ValueSetEntry(p4rt::ValueSetEntry {
                    value_set_id: ids.value_set_id(s),
                    members,
                })),
            }
        })
        .collect())
}
