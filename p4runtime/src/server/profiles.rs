//! Action profiles and selectors over P4Runtime: members (an action with its arguments, under
//! the id the controller gives it) and, for a selector, groups of members (a member of weight
//! W is listed W times, so the selector's hash picks it W times as often). Table entries of a
//! table with a profile name a member or a group.

use intlab_p4::exec::control_plane::{ControlPlane, ProfileState};
use intlab_p4::exec::table::Via;
use intlab_p4::ir;

use super::entries;
use super::error::{UpdateError, check_exists};
use super::ids::Ids;
use crate::proto::p4::v1 as p4rt;
use p4rt::update::Type;

/// Refused when what an entry runs is not in its table's profile `p`.
pub fn check_runs(p: &ProfileState, via: Via) -> Result<(), UpdateError> {
    match via {
        Via::Member(m) if !p.members.contains_key(&m) => Err(UpdateError::not_found(format!("no member {m}"))),
        Via::Group(g) if !p.groups.contains_key(&g) => Err(UpdateError::not_found(format!("no group {g}"))),
        _ => Ok(()),
    }
}

/// Profile `id` and a table that runs it (whose actions its members take).
fn profile(ids: &Ids, program: &ir::Program, id: u32) -> Result<(usize, usize), UpdateError> {
    let p = ids
        .profile(id)
        .ok_or_else(|| UpdateError::not_found(format!("no action profile has id {id}")))?;
    let t = program
        .tables
        .iter()
        .position(|t| t.profile == Some(p))
        .ok_or_else(|| UpdateError::not_found(format!("no table runs action profile {id}")))?;
    Ok((p, t))
}

/// Whether an entry of a table running profile `p` runs `via`.
fn used_by_entries(cp: &ControlPlane, program: &ir::Program, p: usize, via: Via) -> bool {
    program
        .tables
        .iter()
        .enumerate()
        .filter(|(_, t)| t.profile == Some(p))
        .any(|(t, _)| cp.tables[t].entries().any(|e| e.via == via))
}

/// A member inserted, modified or deleted.
pub fn member_update(
    cp: &mut ControlPlane,
    ids: &Ids,
    program: &ir::Program,
    kind: Type,
    m: &p4rt::ActionProfileMember,
) -> Result<(), UpdateError> {
    let (p, t) = profile(ids, program, m.action_profile_id)?;
    let exists = cp.profiles[p].members.contains_key(&m.member_id);
    check_exists(kind, exists, &format!("member {}", m.member_id))?;
    if kind == Type::Delete {
        let in_group = cp.profiles[p].groups.values().any(|g| g.contains(&m.member_id));
        if in_group || used_by_entries(cp, program, p, Via::Member(m.member_id)) {
            return Err(UpdateError {
                code: tonic::Code::FailedPrecondition,
                message: format!("member {} is in a group or a table entry", m.member_id),
            });
        }
        cp.profiles[p].members.remove(&m.member_id);
        return Ok(());
    }
    let a = m
        .action
        .as_ref()
        .ok_or_else(|| UpdateError::invalid("a member runs an action"))?;
    let size = program.profiles[p].size;
    if kind == Type::Insert && size > 0 && cp.profiles[p].members.len() >= size {
        return Err(UpdateError {
            code: tonic::Code::ResourceExhausted,
            message: format!("action profile `{}` holds {size} members", program.profiles[p].name),
        });
    }
    let call = entries::action(ids, program, t, a, false)?;
    cp.profiles[p].members.insert(m.member_id, call);
    Ok(())
}

/// A group inserted, modified or deleted.
pub fn group_update(
    cp: &mut ControlPlane,
    ids: &Ids,
    program: &ir::Program,
    kind: Type,
    g: &p4rt::ActionProfileGroup,
) -> Result<(), UpdateError> {
    let (p, _) = profile(ids, program, g.action_profile_id)?;
    if program.profiles[p].selector.is_none() {
        return Err(UpdateError::invalid(format!(
            "`{}` is an action profile without a selector: it has no groups",
            program.profiles[p].name
        )));
    }
    let exists = cp.profiles[p].groups.contains_key(&g.group_id);
    check_exists(kind, exists, &format!("group {}", g.group_id))?;
    if kind == Type::Delete {
        if used_by_entries(cp, program, p, Via::Group(g.group_id)) {
            return Err(UpdateError {
                code: tonic::Code::FailedPrecondition,
                message: format!("group {} is in a table entry", g.group_id),
            });
        }
        cp.profiles[p].groups.remove(&g.group_id);
        return Ok(());
    }
    let mut members = Vec::new();
    for m in &g.members {
        if !cp.profiles[p].members.contains_key(&m.member_id) {
            return Err(UpdateError::not_found(format!("no member {}", m.member_id)));
        }
        let weight = usize::try_from(m.weight.max(1))
            .map_err(|_| UpdateError::invalid(format!("member {} weight {}", m.member_id, m.weight)))?;
        if members.contains(&m.member_id) {
            return Err(UpdateError::invalid(format!("member {} listed twice", m.member_id)));
        }
        members.extend(std::iter::repeat_n(m.member_id, weight));
    }
    if g.max_size > 0 && members.len() > g.max_size as usize {
        return Err(UpdateError::invalid(format!(
            "group {}: {} members (weights counted) above its max_size {}",
            g.group_id,
            members.len(),
            g.max_size
        )));
    }
    cp.profiles[p].groups.insert(g.group_id, members);
    Ok(())
}

/// The profiles a read names (id 0: every one).
fn profiles(ids: &Ids, program: &ir::Program, id: u32) -> Result<Vec<usize>, UpdateError> {
    if id == 0 {
        return Ok((0..program.profiles.len()).collect());
    }
    Ok(vec![profile(ids, program, id)?.0])
}

/// The members `m` names (id 0: all).
pub fn read_members(
    cp: &ControlPlane,
    ids: &Ids,
    program: &ir::Program,
    m: &p4rt::ActionProfileMember,
) -> Result<Vec<p4rt::Entity>, UpdateError> {
    let mut out = Vec::new();
    for p in profiles(ids, program, m.action_profile_id)? {
        for (&id, (a, args)) in &cp.profiles[p].members {
            if m.member_id != 0 && id != m.member_id {
                continue;
            }
            let Some(p4rt::table_action::Type::Action(action)) = entries::action_of(ids, program, *a, args).r#type
            else {
                continue;
            };
            out.push(p4rt::Entity {
                entity: Some(p4rt::entity::Entity::ActionProfileMember(p4rt::ActionProfileMember {
                    action_profile_id: ids.profile_id(p),
                    member_id: id,
                    action: Some(action),
                })),
            });
        }
    }
    Ok(out)
}

/// The groups `g` names (id 0: all), each member with its weight.
pub fn read_groups(
    cp: &ControlPlane,
    ids: &Ids,
    program: &ir::Program,
    g: &p4rt::ActionProfileGroup,
) -> Result<Vec<p4rt::Entity>, UpdateError> {
    let mut out = Vec::new();
    for p in profiles(ids, program, g.action_profile_id)? {
        for (&id, listed) in &cp.profiles[p].groups {
            if g.group_id != 0 && id != g.group_id {
                continue;
            }
            let mut members: Vec<p4rt::action_profile_group::Member> = Vec::new();
            for &m in listed {
                match members.iter_mut().find(|x| x.member_id == m) {
                    Some(x) => x.weight += 1,
                    None => members.push(p4rt::action_profile_group::Member {
                        member_id: m,
                        weight: 1,
                        ..Default::default()
                    }),
                }
            }
            out.push(p4rt::Entity {
                entity: Some(p4rt::entity::Entity::ActionProfileGroup(p4rt::ActionProfileGroup {
                    action_profile_id: ids.profile_id(p),
                    group_id: id,
                    members,
                    ..Default::default()
                })),
            });
        }
    }
    Ok(out)
}
