//! The packet replication engine over P4Runtime: multicast groups (replicas of port and
//! instance) and clone sessions (one replica: the port a clone goes to).

use intlab_p4::exec::Session;
use intlab_p4::exec::control_plane::ControlPlane;

use super::entries::{canonical, value};
use super::error::{UpdateError, check_exists};
use crate::proto::p4::v1 as p4rt;
use p4rt::entity::Entity;
use p4rt::packet_replication_engine_entry::Type as Pre;
use p4rt::update::Type;

/// A multicast group or clone session inserted, modified or deleted.
pub fn update(cp: &mut ControlPlane, kind: Type, p: &p4rt::PacketReplicationEngineEntry) -> Result<(), UpdateError> {
    match &p.r#type {
        Some(Pre::MulticastGroupEntry(m)) => multicast_update(cp, kind, m),
        Some(Pre::CloneSessionEntry(c)) => clone_session_update(cp, kind, c),
        None => Err(UpdateError::invalid(
            "a replication entry is a multicast group or a clone session",
        )),
    }
}

/// The multicast groups or clone sessions `p` asks for (id 0: all).
pub fn read(cp: &ControlPlane, p: &p4rt::PacketReplicationEngineEntry) -> Vec<p4rt::Entity> {
    let entity = |t| p4rt::Entity {
        entity: Some(Entity::PacketReplicationEngineEntry(
            p4rt::PacketReplicationEngineEntry { r#type: Some(t) },
        )),
    };
    match &p.r#type {
        Some(Pre::MulticastGroupEntry(m)) => cp
            .mc_groups
            .iter()
            .filter(|(g, _)| m.multicast_group_id == 0 || u32::from(**g) == m.multicast_group_id)
            .map(|(g, nodes)| {
                let replicas = nodes
                    .iter()
                    .filter_map(|n| cp.mc_nodes.get(n))
                    .flat_map(|n| n.ports.iter().map(|&port| replica(port, n.rid)))
                    .collect();
                entity(Pre::MulticastGroupEntry(p4rt::MulticastGroupEntry {
                    multicast_group_id: u32::from(*g),
                    replicas,
                    ..Default::default()
                }))
            })
            .collect(),
        Some(Pre::CloneSessionEntry(c)) => {
            let mut ids: Vec<u32> = cp
                .sessions
                .keys()
                .copied()
                .filter(|&s| c.session_id == 0 || s == c.session_id)
                .collect();
            ids.sort_unstable();
            ids.into_iter()
                .filter_map(|id| {
                    let s = cp.sessions[&id];
                    Some(entity(Pre::CloneSessionEntry(p4rt::CloneSessionEntry {
                        session_id: id,
                        replicas: vec![replica(s.port?, s.rid)],
                        ..Default::default()
                    })))
                })
                .collect()
        }
        None => Vec::new(),
    }
}

fn replica(port: u16, rid: u16) -> p4rt::Replica {
    p4rt::Replica {
        instance: u32::from(rid),
        port_kind: Some(p4rt::replica::PortKind::Port(canonical(u128::from(port)))),
        ..Default::default()
    }
}

/// A replica's port and instance.
fn port_and_instance(r: &p4rt::Replica) -> Result<(u16, u16), UpdateError> {
    // Clients before P4Runtime 1.4 (p4runtime-shell and the tutorials among them) send
    // `egress_port`.
    #[allow(deprecated)]
    let port = match &r.port_kind {
        Some(p4rt::replica::PortKind::Port(bytes)) => value(bytes, 16, &"replica port")? as u16,
        Some(p4rt::replica::PortKind::EgressPort(p)) => {
            u16::try_from(*p).map_err(|_| UpdateError::invalid(format!("replica port {p}")))?
        }
        None => return Err(UpdateError::invalid("a replica names its port")),
    };
    let rid =
        u16::try_from(r.instance).map_err(|_| UpdateError::invalid(format!("replica instance {}", r.instance)))?;
    Ok((port, rid))
}

fn multicast_update(cp: &mut ControlPlane, kind: Type, m: &p4rt::MulticastGroupEntry) -> Result<(), UpdateError> {
    let g = u16::try_from(m.multicast_group_id)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| UpdateError::invalid(format!("multicast group id {} (1 to 65535)", m.multicast_group_id)))?;
    check_exists(kind, cp.mc_groups.contains_key(&g), &format!("multicast group {g}"))?;
    if kind == Type::Delete {
        cp.set_group(g, &[]);
        cp.mc_groups.remove(&g);
        cp.rebuild_groups();
        return Ok(());
    }
    let replicas = m
        .replicas
        .iter()
        .map(port_and_instance)
        .collect::<Result<Vec<_>, _>>()?;
    cp.set_group(g, &replicas);
    Ok(())
}

fn clone_session_update(cp: &mut ControlPlane, kind: Type, c: &p4rt::CloneSessionEntry) -> Result<(), UpdateError> {
    let id = c.session_id;
    if id == 0 {
        return Err(UpdateError::invalid(
            "clone session id 0 (sessions are numbered from 1)",
        ));
    }
    check_exists(kind, cp.sessions.contains_key(&id), &format!("clone session {id}"))?;
    if kind == Type::Delete {
        cp.sessions.remove(&id);
        return Ok(());
    }
    if c.packet_length_bytes != 0 {
        return Err(UpdateError::unimplemented(format!(
            "clone session {id}: truncation to {} bytes (clones are whole, as on BMv2)",
            c.packet_length_bytes
        )));
    }
    let (port, rid) = match c.replicas.as_slice() {
        [one] => port_and_instance(one)?,
        [] => return Err(UpdateError::invalid(format!("clone session {id} has no replica"))),
        more => {
            return Err(UpdateError::unimplemented(format!(
                "clone session {id} has {} replicas: one is served (a clone to several ports goes \
                 through a multicast group, `mirroring_add_mc` in intlab p4 cli)",
                more.len()
            )));
        }
    };
    cp.sessions.insert(
        id,
        Session {
            port: Some(port),
            group: None,
            rid,
        },
    );
    Ok(())
}
