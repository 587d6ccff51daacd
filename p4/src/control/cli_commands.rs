//! `simple_switch_CLI` commands, with its syntax and what it prints: tables (`table_add`,
//! `table_modify`, `table_delete`, `table_clear`, `table_dump`, defaults, timeouts), action
//! profiles and selectors, the packet replication engine (`mc_*`), mirroring sessions,
//! counters, registers, meters, parser value sets and the egress queues' settings.
//!
//! Tables, actions and other objects are named as BMv2 names them (`MyIngress.ipv4_lpm`) or by
//! a suffix only one of them has (`ipv4_lpm`). Match fields are written per key kind: exact
//! `v`, lpm `v/len`, ternary `v&&&mask`, range `lo->hi`, optional as ternary (or `v`, `*`);
//! values as numbers, `0x..`, IPv4, IPv6 or MAC addresses. As in simple_switch_CLI, a table
//! with ternary, range or optional keys takes a priority last, and the lowest number wins.

use std::net::Ipv6Addr;
use std::path::Path;

use super::runtime_json::{fit, parse_value};
use crate::exec::control_plane::{McNode, free_handle};
use crate::exec::table::Via;
use crate::exec::{ControlPlane, Datapath, Session};
use crate::ir::{Entry, KeySet, MatchKind, mask};

/// A command that could not be applied, with its file and line.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct CommandError {
    /// The command file.
    pub file: String,
    /// Its line (from 1).
    pub line: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

/// A client of one switch's control plane, as a `simple_switch_CLI` session is.
#[derive(Debug, Default)]
pub struct CliSession {}

/// Applies the command file `path` to `dp`; returns what the commands printed.
pub fn apply_file(dp: &Datapath, path: &Path) -> Result<Vec<String>, CommandError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| CommandError {
        file: file.clone(),
        line: 0,
        message: format!("cannot read it: {e}"),
    })?;
    apply_text(dp, &file, &text)
}

/// Applies the commands in `text` (named `file` in errors), one per line (`#` starts a
/// comment): all of them, or none.
pub fn apply_text(dp: &Datapath, file: &str, text: &str) -> Result<Vec<String>, CommandError> {
    let mut session = CliSession::for_datapath(dp);
    dp.edit(|cp| {
        let mut printed = Vec::new();
        for (i, line) in text.lines().enumerate() {
            match session.command(dp, cp, line) {
                Ok(Some(out)) => printed.push(out),
                Ok(None) => {}
                Err(message) => {
                    return Err(CommandError {
                        file: file.to_owned(),
                        line: i + 1,
                        message,
                    });
                }
            }
        }
        Ok(printed)
    })
}

/// The commands this session takes, for `help`.
const COMMANDS: &[&str] = &[
    "act_prof_add_member_to_group",
    "act_prof_create_group",
    "act_prof_create_member",
    "act_prof_delete_group",
    "act_prof_delete_member",
    "act_prof_dump",
    "act_prof_dump_group",
    "act_prof_dump_member",
    "act_prof_modify_member",
    "act_prof_remove_member_from_group",
    "counter_read",
    "counter_reset",
    "counter_write",
    "digest_read",
    "get_time_elapsed",
    "mc_dump",
    "mc_mgrp_create",
    "mc_mgrp_destroy",
    "mc_node_associate",
    "mc_node_create",
    "mc_node_destroy",
    "mc_node_dissociate",
    "mc_node_update",
    "meter_array_set_rates",
    "meter_get_rates",
    "meter_set_rates",
    "mirroring_add",
    "mirroring_add_mc",
    "mirroring_delete",
    "mirroring_get",
    "pvs_add",
    "pvs_clear",
    "pvs_get",
    "pvs_remove",
    "register_read",
    "register_reset",
    "register_write",
    "set_queue_depth",
    "set_queue_rate",
    "show_actions",
    "show_tables",
    "table_add",
    "table_clear",
    "table_delete",
    "table_dump",
    "table_dump_entry",
    "table_indirect_add",
    "table_indirect_add_with_group",
    "table_indirect_delete",
    "table_indirect_reset_default",
    "table_indirect_set_default",
    "table_indirect_set_default_with_group",
    "table_info",
    "table_modify",
    "table_num_entries",
    "table_reset_default",
    "table_set_default",
    "table_set_timeout",
    "table_show_actions",
];

impl CliSession {
    /// A session on `dp`.
    pub fn for_datapath(_dp: &Datapath) -> CliSession {
        CliSession::default()
    }

    /// Runs one command line on `dp` (packets see all of its change or none); returns what it
    /// prints, if anything.
    pub fn run(&mut self, dp: &Datapath, line: &str) -> Result<Option<String>, String> {
        dp.edit(|cp| self.command(dp, cp, line))
    }

    /// Runs one command line on `cp`, a copy of `dp`'s control plane.
    fn command(&mut self, dp: &Datapath, cp: &mut ControlPlane, line: &str) -> Result<Option<String>, String> {
        let line = line.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&command, args)) = words.split_first() else {
            return Ok(None);
        };
        const GROUPS: [CommandGroup; 7] = [
            table_entry_commands,
            table_view_commands,
            profile_commands,
            multicast_commands,
            mirroring_commands,
            extern_commands,
            setting_commands,
        ];
        for group in GROUPS {
            if let Some(out) = group(dp, cp, command, args)? {
                return Ok((!out.is_empty()).then_some(out));
            }
        }
        Err(format!(
            "unknown command `{command}`: intlab takes simple_switch_CLI's commands ({})",
            COMMANDS.join(", ")
        ))
    }
}

/// One group of commands: what the command prints, or None if it is not in the group.
type CommandGroup = fn(&Datapath, &mut ControlPlane, &str, &[&str]) -> Result<Option<String>, String>;

/// simple_switch_CLI's table entry and default-action commands: what `command` prints (None: not one).
fn table_entry_commands(
    dp: &Datapath,
    cp: &mut ControlPlane,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, String> {
    let out = match command {
        "table_add" => table_add(dp, cp, args, false)?,
        "table_indirect_add" | "table_indirect_add_with_group" => table_add(dp, cp, args, command.ends_with("group"))?,
        "table_set_default" => table_set_default(dp, cp, args)?,
        "table_indirect_set_default" | "table_indirect_set_default_with_group" => {
            let [table, handle] = args else {
                return Err(usage(&format!("{command} TABLE HANDLE")));
            };
            let t = dp.table_id(table)?;
            dp.check_default_allowed(t)?;
            let h = number(handle, 32, "a handle")? as u32;
            let p = profile_of(dp, t)?;
            let (a, args) = if command.ends_with("group") {
                let g = cp.profiles[p]
                    .groups
                    .get(&h)
                    .ok_or_else(|| format!("no group with handle {h}"))?;
                let m = g.first().ok_or("the group has no member")?;
                cp.profiles[p].members[m].clone()
            } else {
                cp.profiles[p]
                    .members
                    .get(&h)
                    .cloned()
                    .ok_or_else(|| format!("no member with handle {h}"))?
            };
            cp.tables[t].default = (a, args);
            String::new()
        }
        "table_reset_default" | "table_indirect_reset_default" => {
            let [table] = args else {
                return Err(usage(&format!("{command} TABLE")));
            };
            let t = dp.table_id(table)?;
            dp.check_default_allowed(t)?;
            cp.tables[t].default = dp.program.tables[t].default_action.clone();
            String::new()
        }
        "table_delete" | "table_indirect_delete" => {
            let [table, handle] = args else {
                return Err(usage(&format!("{command} TABLE HANDLE")));
            };
            let t = dp.table_id(table)?;
            dp.check_entries_allowed(t)?;
            let h = number(handle, 32, "an entry handle")? as u32;
            let at = cp.tables[t].position(h).ok_or_else(|| {
                format!(
                    "Invalid table operation (INVALID_HANDLE): table `{}` has no entry {h}",
                    dp.program.tables[t].name
                )
            })?;
            cp.tables[t].delete(at);
            format!("Deleting entry {h} from {table}")
        }
        "table_modify" => table_modify(dp, cp, args)?,
        "table_clear" => {
            let [table] = args else {
                return Err(usage("table_clear TABLE"));
            };
            let t = dp.table_id(table)?;
            dp.check_entries_allowed(t)?;
            cp.tables[t].clear();
            String::new()
        }
        "table_set_timeout" => {
            let [table, handle, ms] = args else {
                return Err(usage("table_set_timeout TABLE HANDLE TIMEOUT_MS"));
            };
            let t = dp.table_id(table)?;
            if !dp.program.tables[t].idle_timeout {
                return Err(format!("Table {table} does not support entry timeouts"));
            }
            let h = number(handle, 32, "an entry handle")? as u32;
            let ms = number(ms, 32, "a timeout")?;
            cp.tables[t]
                .get(h)
                .ok_or_else(|| format!("table `{table}` has no entry {h}"))?;
            format!("Setting a {ms} ms timeout for entry {h}")
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// simple_switch_CLI's commands that show tables and entries: what `command` prints (None: not one).
fn table_view_commands(
    dp: &Datapath,
    cp: &mut ControlPlane,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, String> {
    let out = match command {
        "table_num_entries" => {
            let [table] = args else {
                return Err(usage("table_num_entries TABLE"));
            };
            let t = dp.table_id(table)?;
            cp.tables[t].len().to_string()
        }
        "table_dump" => {
            let [table] = args else {
                return Err(usage("table_dump TABLE"));
            };
            table_dump(dp, cp, dp.table_id(table)?)
        }
        "table_dump_entry" => {
            let [table, handle] = args else {
                return Err(usage("table_dump_entry TABLE HANDLE"));
            };
            let t = dp.table_id(table)?;
            let h = number(handle, 32, "an entry handle")? as u32;
            let e = cp.tables[t]
                .get(h)
                .ok_or_else(|| format!("table `{table}` has no entry {h}"))?;
            dump_entry(dp, t, e)
        }
        "show_tables" => {
            let mut out = String::new();
            for t in &dp.program.tables {
                let ap = t
                    .profile
                    .map_or("None".to_owned(), |p| dp.program.profiles[p].name.clone());
                let mk: Vec<String> = t
                    .keys
                    .iter()
                    .map(|k| format!("{}({}, {})", k.name, k.kind.name(), k.width))
                    .collect();
                out.push_str(&format!("{:30} [implementation={ap}, mk={}]\n", t.name, mk.join(",\t")));
            }
            out.trim_end().to_owned()
        }
        "show_actions" => {
            let mut seen = Vec::new();
            let mut out = String::new();
            for a in &dp.program.actions {
                if seen.contains(&a.name) {
                    continue;
                }
                seen.push(a.name.clone());
                let ps: Vec<String> = a.params.iter().map(|p| format!("{}({})", p.name, p.width)).collect();
                out.push_str(&format!("{:30} [{}]\n", a.name, ps.join(",\t")));
            }
            out.trim_end().to_owned()
        }
        "table_show_actions" | "table_info" => {
            let [table] = args else {
                return Err(usage(&format!("{command} TABLE")));
            };
            let t = &dp.program.tables[dp.table_id(table)?];
            let mut out = String::new();
            if command == "table_info" {
                let mk: Vec<String> = t
                    .keys
                    .iter()
                    .map(|k| format!("{}({}, {})", k.name, k.kind.name(), k.width))
                    .collect();
                out.push_str(&format!("{:30} [mk={}]\n", t.name, mk.join(",\t")));
                out.push_str(&format!("{}\n", "*".repeat(80)));
            }
            for ta in &t.actions {
                let a = &dp.program.actions[ta.action];
                let ps: Vec<String> = a.params.iter().map(|p| format!("{}({})", p.name, p.width)).collect();
                out.push_str(&format!("{:30} [{}]\n", a.name, ps.join(",\t")));
            }
            out.trim_end().to_owned()
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// simple_switch_CLI's action profile and selector commands: what `command` prints (None: not one).
fn profile_commands(
    dp: &Datapath,
    cp: &mut ControlPlane,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, String> {
    let out = match command {
        "act_prof_create_member" | "table_indirect_create_member" => {
            let [prof, action, rest @ ..] = args else {
                return Err(usage(&format!("{command} PROFILE ACTION ARG...")));
            };
            let p = profile_named(dp, prof, command.starts_with("table"))?;
            let a = profile_action(dp, p, action)?;
            let values = action_args(dp, a, rest)?;
            let h = free_handle(&cp.profiles[p].members);
            cp.profiles[p].members.insert(h, (a, values));
            format!("Member has been created with handle {h}")
        }
        "act_prof_delete_member" | "table_indirect_delete_member" => {
            let [prof, handle] = args else {
                return Err(usage(&format!("{command} PROFILE HANDLE")));
            };
            let p = profile_named(dp, prof, command.starts_with("table"))?;
            let h = number(handle, 32, "a member handle")? as u32;
            if cp.profiles[p].groups.values().any(|g| g.contains(&h)) {
                return Err(format!("member {h} is in a group: remove it from the group first"));
            }
            cp.profiles[p]
                .members
                .remove(&h)
                .ok_or_else(|| format!("no member with handle {h}"))?;
            String::new()
        }
        "act_prof_modify_member" | "table_indirect_modify_member" => {
            let [prof, action, handle, rest @ ..] = args else {
                return Err(usage(&format!("{command} PROFILE ACTION HANDLE ARG...")));
            };
            let p = profile_named(dp, prof, command.starts_with("table"))?;
            let a = profile_action(dp, p, action)?;
            let h = number(handle, 32, "a member handle")? as u32;
            let rest = rest.strip_prefix(&["=>"]).unwrap_or(rest);
            let values = action_args(dp, a, rest)?;
            let m = cp.profiles[p]
                .members
                .get_mut(&h)
                .ok_or_else(|| format!("no member with handle {h}"))?;
            *m = (a, values);
            String::new()
        }
        "act_prof_create_group" | "table_indirect_create_group" => {
            let [prof] = args else {
                return Err(usage(&format!("{command} PROFILE")));
            };
            let p = profile_named(dp, prof, command.starts_with("table"))?;
            selector_only(dp, p)?;
            let h = free_handle(&cp.profiles[p].groups);
            cp.profiles[p].groups.insert(h, Vec::new());
            format!("Group has been created with handle {h}")
        }
        "act_prof_delete_group" | "table_indirect_delete_group" => {
            let [prof, handle] = args else {
                return Err(usage(&format!("{command} PROFILE HANDLE")));
            };
            let p = profile_named(dp, prof, command.starts_with("table"))?;
            selector_only(dp, p)?;
            let h = number(handle, 32, "a group handle")? as u32;
            cp.profiles[p]
                .groups
                .remove(&h)
                .ok_or_else(|| format!("no group with handle {h}"))?;
            String::new()
        }
        "act_prof_add_member_to_group"
        | "table_indirect_add_member_to_group"
        | "act_prof_remove_member_from_group"
        | "table_indirect_remove_member_from_group" => {
            let [prof, member, group] = args else {
                return Err(usage(&format!("{command} PROFILE MEMBER GROUP")));
            };
            let p = profile_named(dp, prof, command.starts_with("table"))?;
            selector_only(dp, p)?;
            let (m, g) = (
                number(member, 32, "a member handle")? as u32,
                number(group, 32, "a group handle")? as u32,
            );
            if !cp.profiles[p].members.contains_key(&m) {
                return Err(format!("no member with handle {m}"));
            }
            let members = cp.profiles[p]
                .groups
                .get_mut(&g)
                .ok_or_else(|| format!("no group with handle {g}"))?;
            if command.contains("add") {
                if members.contains(&m) {
                    return Err(format!("member {m} is in group {g} already"));
                }
                members.push(m);
            } else {
                let at = members
                    .iter()
                    .position(|x| *x == m)
                    .ok_or_else(|| format!("member {m} is not in group {g}"))?;
                members.remove(at);
            }
            String::new()
        }
        "act_prof_dump" => {
            let [prof] = args else {
                return Err(usage("act_prof_dump PROFILE"));
            };
            dump_profile(dp, cp, dp.profile_id(prof)?)
        }
        "act_prof_dump_member" => {
            let [prof, handle] = args else {
                return Err(usage("act_prof_dump_member PROFILE HANDLE"));
            };
            let p = dp.profile_id(prof)?;
            let h = number(handle, 32, "a member handle")? as u32;
            let (a, values) = cp.profiles[p]
                .members
                .get(&h)
                .ok_or_else(|| format!("no member with handle {h}"))?;
            format!("Dumping member {h}\n{}", action_entry(dp, *a, values))
        }
        "act_prof_dump_group" => {
            let [prof, handle] = args else {
                return Err(usage("act_prof_dump_group PROFILE HANDLE"));
            };
            let p = dp.profile_id(prof)?;
            let h = number(handle, 32, "a group handle")? as u32;
            let g = cp.profiles[p]
                .groups
                .get(&h)
                .ok_or_else(|| format!("no group with handle {h}"))?;
            let m: Vec<String> = g.iter().map(u32::to_string).collect();
            format!("Dumping group {h}\nMembers: [{}]", m.join(", "))
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// simple_switch_CLI's multicast group and node commands: what `command` prints (None: not one).
fn multicast_commands(
    _dp: &Datapath,
    cp: &mut ControlPlane,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, String> {
    let out = match command {
        "mc_mgrp_create" => {
            let [g] = args else {
                return Err(usage("mc_mgrp_create GROUP"));
            };
            let g = group_id(g)?;
            if cp.mc_groups.contains_key(&g) {
                return Err(format!("Invalid PRE operation (DUPLICATE_ENTRY): group {g} exists"));
            }
            cp.mc_groups.insert(g, Vec::new());
            cp.rebuild_groups();
            format!("Creating multicast group {g}")
        }
        "mc_mgrp_destroy" => {
            let [g] = args else {
                return Err(usage("mc_mgrp_destroy GROUP"));
            };
            let g = group_id(g)?;
            cp.mc_groups
                .remove(&g)
                .ok_or_else(|| format!("Invalid PRE operation (INVALID_MGID): no group {g}"))?;
            cp.rebuild_groups();
            format!("Destroying multicast group {g}")
        }
        "mc_node_create" | "mc_node_update" => {
            let [first, rest @ ..] = args else {
                return Err(usage(&format!(
                    "{command} {} PORT...",
                    if command.ends_with("create") { "RID" } else { "NODE" }
                )));
            };
            let ports: Vec<u16> = rest
                .iter()
                .take_while(|p| **p != "|")
                .map(|p| port(p))
                .collect::<Result<_, _>>()?;
            let map = port_map(&ports);
            if command.ends_with("create") {
                let rid = number(first, 16, "a replication id")? as u16;
                let h = free_handle(&cp.mc_nodes);
                cp.mc_nodes.insert(h, McNode { rid, ports });
                format!("Creating node with rid {rid} and with port map {map}\nnode was created with handle {h}")
            } else {
                let h = number(first, 32, "a node handle")? as u32;
                let n = cp
                    .mc_nodes
                    .get_mut(&h)
                    .ok_or_else(|| format!("Invalid PRE operation (INVALID_L1_HANDLE): no node {h}"))?;
                n.ports = ports;
                cp.rebuild_groups();
                format!("Updating node {h} with port map {map}")
            }
        }
        "mc_node_associate" | "mc_node_dissociate" => {
            let [g, node] = args else {
                return Err(usage(&format!("{command} GROUP NODE")));
            };
            let g = group_id(g)?;
            let h = number(node, 32, "a node handle")? as u32;
            if !cp.mc_nodes.contains_key(&h) {
                return Err(format!("Invalid PRE operation (INVALID_L1_HANDLE): no node {h}"));
            }
            let nodes = cp
                .mc_groups
                .get_mut(&g)
                .ok_or_else(|| format!("Invalid PRE operation (INVALID_MGID): no group {g}"))?;
            let text = if command.ends_with("associate") && !command.contains("dis") {
                if cp.mc_groups.values().any(|n| n.contains(&h)) {
                    return Err(format!(
                        "Invalid PRE operation (L1_HANDLE_ASSOCIATED): node {h} is in a group"
                    ));
                }
                let nodes = cp.mc_groups.get_mut(&g).expect("checked above");
                nodes.push(h);
                format!("Associating node {h} to multicast group {g}")
            } else {
                let at = nodes.iter().position(|x| *x == h).ok_or_else(|| {
                    format!("Invalid PRE operation (L1_HANDLE_NOT_ASSOCIATED): node {h} is not in group {g}")
                })?;
                nodes.remove(at);
                format!("Dissociating node {h} from multicast group {g}")
            };
            cp.rebuild_groups();
            text
        }
        "mc_node_destroy" => {
            let [node] = args else {
                return Err(usage("mc_node_destroy NODE"));
            };
            let h = number(node, 32, "a node handle")? as u32;
            cp.mc_nodes
                .remove(&h)
                .ok_or_else(|| format!("Invalid PRE operation (INVALID_L1_HANDLE): no node {h}"))?;
            for nodes in cp.mc_groups.values_mut() {
                nodes.retain(|x| *x != h);
            }
            cp.rebuild_groups();
            format!("Destroying node {h}")
        }
        "mc_dump" => {
            let mut out = String::from("==========\nMC ENTRIES\n");
            for (g, nodes) in &cp.mc_groups {
                out.push_str(&format!("**********\nmgrp({g})\n"));
                for h in nodes {
                    if let Some(n) = cp.mc_nodes.get(h) {
                        let ports: Vec<String> = n.ports.iter().map(u16::to_string).collect();
                        out.push_str(&format!(
                            "  -> (L1h={h}, rid={}) -> (ports=[{}], lags=[])\n",
                            n.rid,
                            ports.join(", ")
                        ));
                    }
                }
            }
            out.push_str("==========\nLAGS\nNone for this PRE type\n==========");
            out
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// simple_switch_CLI's clone session commands: what `command` prints (None: not one).
fn mirroring_commands(
    _dp: &Datapath,
    cp: &mut ControlPlane,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, String> {
    let out = match command {
        "mirroring_add" | "mirroring_add_mc" => {
            let [session, to] = args else {
                return Err(usage(&format!(
                    "{command} SESSION {}",
                    if command.ends_with("mc") { "GROUP" } else { "PORT" }
                )));
            };
            let session = number(session, 32, "a session id")? as u32;
            let s = if command.ends_with("mc") {
                Session {
                    port: None,
                    group: Some(group_id(to)?),
                    rid: 0,
                }
            } else {
                Session {
                    port: Some(port(to)?),
                    group: None,
                    rid: 0,
                }
            };
            cp.sessions.insert(session, s);
            String::new()
        }
        "mirroring_delete" => {
            let [session] = args else {
                return Err(usage("mirroring_delete SESSION"));
            };
            let session = number(session, 32, "a session id")? as u32;
            cp.sessions
                .remove(&session)
                .ok_or_else(|| format!("Invalid mirroring operation (SESSION_NOT_FOUND): no session {session}"))?;
            String::new()
        }
        "mirroring_get" => {
            let [session] = args else {
                return Err(usage("mirroring_get SESSION"));
            };
            let id = number(session, 32, "a session id")? as u32;
            let s = cp
                .sessions
                .get(&id)
                .ok_or_else(|| format!("Invalid mirroring operation (SESSION_NOT_FOUND): no session {id}"))?;
            format!(
                "MirroringSessionConfig(port={}, mgid={})",
                s.port.map_or("None".to_owned(), |p| p.to_string()),
                s.group.map_or("None".to_owned(), |g| g.to_string())
            )
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// simple_switch_CLI's register, counter and meter commands: what `command` prints (None: not one).
fn extern_commands(
    dp: &Datapath,
    cp: &mut ControlPlane,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, String> {
    let out = match command {
        "register_read" => {
            let (name, index) = match args {
                [name] => (*name, None),
                [name, i] => (*name, Some(number(i, 32, "an index")? as usize)),
                _ => return Err(usage("register_read REGISTER [INDEX]")),
            };
            let r = dp.register_id(name)?;
            let cells = dp.program.registers[r].size;
            let cell = |i: usize| dp.register_read(r, i).ok_or_else(|| out_of_range(name, i, cells));
            match index {
                Some(i) => format!("{name}[{i}]= {}", cell(i)?),
                None => {
                    let all = (0..cells).map(cell).collect::<Result<Vec<u128>, String>>()?;
                    let all: Vec<String> = all.iter().map(u128::to_string).collect();
                    format!("{name}= {}", all.join(", "))
                }
            }
        }
        "register_write" => {
            let [name, i, v] = args else {
                return Err(usage("register_write REGISTER INDEX VALUE"));
            };
            let r = dp.register_id(name)?;
            let reg = &dp.program.registers[r];
            let v = value(v, reg.width)?;
            let i = number(i, 32, "an index")? as usize;
            if !dp.register_write(r, i, v) {
                return Err(out_of_range(name, i, reg.size));
            }
            String::new()
        }
        "register_reset" => {
            let [name] = args else {
                return Err(usage("register_reset REGISTER"));
            };
            dp.register_reset(dp.register_id(name)?);
            String::new()
        }
        "counter_read" | "counter_write" => counter(dp, cp, command, args)?,
        "counter_reset" => {
            let [name] = args else {
                return Err(usage("counter_reset COUNTER"));
            };
            let c = dp.counter_id(name)?;
            match dp.program.counters[c].table {
                Some(t) => {
                    for e in cp.tables[t].entries() {
                        e.state.counter.packets.store(0, std::sync::atomic::Ordering::Relaxed);
                        e.state.counter.bytes.store(0, std::sync::atomic::Ordering::Relaxed);
                    }
                    format!("this is the direct counter for table {}", dp.program.tables[t].name)
                }
                None => {
                    dp.counter_reset(c);
                    String::new()
                }
            }
        }
        "meter_set_rates" | "meter_array_set_rates" | "meter_get_rates" => meter(dp, cp, command, args)?,
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// simple_switch_CLI's queue, value set, digest and help commands: what `command` prints (None: not one).
fn setting_commands(
    dp: &Datapath,
    cp: &mut ControlPlane,
    command: &str,
    args: &[&str],
) -> Result<Option<String>, String> {
    let out = match command {
        "set_queue_rate" | "set_queue_depth" => {
            let (v, port, prio) = match args {
                [v] => (*v, None, None),
                [v, p] => (*v, Some(port(p)?), None),
                [v, p, q] => (*v, Some(port(p)?), Some(number(q, 3, "a priority of 0 to 7")? as u8)),
                _ => return Err(usage(&format!("{command} VALUE [PORT [PRIORITY]]"))),
            };
            let v = number(v, 64, "a whole number")? as u64;
            let map = if command.ends_with("rate") {
                &mut cp.queues.rates
            } else {
                &mut cp.queues.depths
            };
            map.insert((port, prio), v);
            String::new()
        }
        "pvs_add" | "pvs_remove" => {
            let [name, v] = args else {
                return Err(usage(&format!("{command} VALUE_SET VALUE")));
            };
            let s = value_set(dp, name)?;
            let set = &dp.program.value_sets[s];
            let member = value_set_member(v, &set.widths)?;
            let members = &mut cp.value_sets[s];
            if command == "pvs_add" {
                if members.len() >= set.size.max(1) && set.size > 0 {
                    return Err(format!("value set `{}` is full ({} members)", set.name, set.size));
                }
                if !members.contains(&member) {
                    members.push(member);
                }
            } else {
                members.retain(|m| *m != member);
            }
            String::new()
        }
        "pvs_clear" => {
            let [name] = args else {
                return Err(usage("pvs_clear VALUE_SET"));
            };
            let s = value_set(dp, name)?;
            cp.value_sets[s].clear();
            String::new()
        }
        "pvs_get" => {
            let [name] = args else {
                return Err(usage("pvs_get VALUE_SET"));
            };
            let s = value_set(dp, name)?;
            let values: Vec<String> = cp.value_sets[s]
                .iter()
                .map(|m| {
                    m.iter()
                        .map(|k| match k {
                            KeySet::Value(v) => format!("{v:#x}"),
                            other => format!("{other:?}"),
                        })
                        .collect::<Vec<_>>()
                        .join(":")
                })
                .collect();
            values.join("\n")
        }
        "digest_read" => {
            let (messages, dropped) = dp.take_digests();
            let mut out = String::new();
            for m in &messages {
                let d = &dp.program.digests[m.digest];
                let fields: Vec<String> = d
                    .fields
                    .iter()
                    .zip(&m.values)
                    .map(|((n, _), v)| format!("{n}={v:#x}"))
                    .collect();
                out.push_str(&format!("{}: {}\n", d.name, fields.join(", ")));
            }
            if dropped > 0 {
                out.push_str(&format!("({dropped} digests dropped before they were read)\n"));
            }
            out.trim_end().to_owned()
        }
        "get_time_elapsed" => "0".to_owned(),
        "help" => COMMANDS.join("\n"),
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// `table_add TABLE ACTION MATCH... => ARG... [PRIORITY]`, or the indirect forms
/// `table_indirect_add[_with_group] TABLE MATCH... => HANDLE [PRIORITY]`.
fn table_add(dp: &Datapath, cp: &mut ControlPlane, args: &[&str], group: bool) -> Result<String, String> {
    let indirect = args
        .first()
        .is_some_and(|t| dp.table_id(t).is_ok_and(|t| dp.program.tables[t].profile.is_some()));
    let use_ = if indirect {
        "table_indirect_add TABLE MATCH... => HANDLE [PRIORITY]"
    } else {
        "table_add TABLE ACTION MATCH... => ARG... [PRIORITY]"
    };
    let (table, action, rest) = match (indirect, args) {
        (true, [table, rest @ ..]) => (*table, None, rest),
        (false, [table, action, rest @ ..]) => (*table, Some(*action), rest),
        _ => return Err(usage(use_)),
    };
    let t = dp.table_id(table)?;
    dp.check_entries_allowed(t)?;
    let def = &dp.program.tables[t];
    let arrow = rest.iter().position(|w| *w == "=>").ok_or_else(|| usage(use_))?;
    let (fields, after) = (&rest[..arrow], &rest[arrow + 1..]);
    if fields.len() != def.keys.len() {
        let keys: Vec<String> = def
            .keys
            .iter()
            .map(|k| format!("{} ({})", k.name, k.kind.name()))
            .collect();
        return Err(format!(
            "Table {} needs {} key fields ({}); got {}",
            def.name,
            def.keys.len(),
            keys.join(", "),
            fields.len()
        ));
    }
    let matches = def
        .keys
        .iter()
        .zip(fields)
        .map(|(k, f)| key_set(f, k.kind, k.width).map_err(|m| format!("Invalid match key: key `{}`: {m}", k.name)))
        .collect::<Result<Vec<KeySet>, String>>()?;
    let prioritized = def.needs_priority();
    let (after, priority) = match (prioritized, after.split_last()) {
        (true, Some((p, rest))) => (rest, number(p, 31, "a priority")? as i64),
        (true, None) => return Err("Table is ternary, but could not extract a valid priority from args".into()),
        (false, _) => (after, 0),
    };
    // simple_switch_CLI: the lowest number wins; intlab's tables: the highest.
    let priority = -priority;
    let (a, values, via) = match action {
        Some(action) => {
            let a = dp.action_of(t, action)?;
            (a, action_args(dp, a, after)?, Via::Action)
        }
        None => {
            let [handle] = after else {
                return Err(usage(use_));
            };
            let h = number(handle, 32, "a handle")? as u32;
            let p = profile_of(dp, t)?;
            if group {
                cp.profiles[p]
                    .groups
                    .get(&h)
                    .ok_or_else(|| format!("no group with handle {h}"))?;
                (0, Vec::new(), Via::Group(h))
            } else {
                cp.profiles[p]
                    .members
                    .get(&h)
                    .ok_or_else(|| format!("no member with handle {h}"))?;
                (0, Vec::new(), Via::Member(h))
            }
        }
    };
    let entry = Entry {
        matches: matches.clone(),
        priority,
        action: a,
        args: values.clone(),
    };
    let h = cp.tables[t]
        .insert(entry, via)
        .map_err(|m| format!("Invalid table operation: {m}"))?;
    let mut out = String::new();
    if action.is_some() {
        out.push_str(&format!(
            "Adding entry to {} match table {}\n",
            match_type(def),
            def.name
        ));
        let keys: Vec<String> = def
            .keys
            .iter()
            .zip(&matches)
            .map(|(k, m)| match_str(k.kind, k.width, m))
            .collect();
        out.push_str(&format!("{:20} {}\n", "match key:", keys.join("\t")));
        out.push_str(&format!("{:20} {}\n", "action:", dp.program.actions[a].name));
        let data: Vec<String> = dp.program.actions[a]
            .params
            .iter()
            .zip(&values)
            .map(|(p, v)| bytes_str(*v, p.width))
            .collect();
        out.push_str(&format!("{:20} {}\n", "runtime data:", data.join("\t")));
    } else {
        out.push_str(&format!("Adding entry to indirect match table {}\n", def.name));
    }
    out.push_str(&format!("Entry has been added with handle {h}"));
    Ok(out)
}

/// `table_modify TABLE ACTION HANDLE [=>] ARG...`.
fn table_modify(dp: &Datapath, cp: &mut ControlPlane, args: &[&str]) -> Result<String, String> {
    let [table, action, handle, rest @ ..] = args else {
        return Err(usage("table_modify TABLE ACTION HANDLE ARG..."));
    };
    let t = dp.table_id(table)?;
    dp.check_entries_allowed(t)?;
    let a = dp.action_of(t, action)?;
    let h = number(handle, 32, "an entry handle")? as u32;
    let rest = rest.strip_prefix(&["=>"]).unwrap_or(rest);
    let values = action_args(dp, a, rest)?;
    let at = cp.tables[t]
        .position(h)
        .ok_or_else(|| format!("Invalid table operation (INVALID_HANDLE): table `{table}` has no entry {h}"))?;
    cp.tables[t].modify(at, a, values, Via::Action);
    Ok(format!(
        "Modifying entry {h} for {} match table {table}",
        match_type(&dp.program.tables[t])
    ))
}

/// `table_set_default TABLE ACTION ARG...`.
fn table_set_default(dp: &Datapath, cp: &mut ControlPlane, args: &[&str]) -> Result<String, String> {
    let [table, action, rest @ ..] = args else {
        return Err(usage("table_set_default TABLE ACTION ARG..."));
    };
    let t = dp.table_id(table)?;
    let a = dp.action_of(t, action)?;
    dp.check_default_allowed(t)?;
    if dp.program.tables[t]
        .actions
        .iter()
        .any(|x| x.action == a && x.table_only)
    {
        return Err(format!("action `{action}` is @tableonly: it cannot be the default"));
    }
    let values = action_args(dp, a, rest)?;
    let data: Vec<String> = dp.program.actions[a]
        .params
        .iter()
        .zip(&values)
        .map(|(p, v)| bytes_str(*v, p.width))
        .collect();
    cp.tables[t].default = (a, values);
    Ok(format!(
        "Setting default action of {}\n{:20} {}\n{:20} {}",
        dp.program.tables[t].name,
        "action:",
        dp.program.actions[a].name,
        "runtime data:",
        data.join("\t")
    ))
}

/// `counter_read NAME INDEX` and `counter_write NAME INDEX PACKETS BYTES` (a direct counter's
/// index is its table's entry handle).
fn counter(dp: &Datapath, cp: &mut ControlPlane, command: &str, args: &[&str]) -> Result<String, String> {
    let (name, index, write) = match (command, args) {
        ("counter_read", [name, i]) => (*name, *i, None),
        ("counter_write", [name, i, p, b]) => (
            *name,
            *i,
            Some((number(p, 64, "packets")? as u64, number(b, 64, "bytes")? as u64)),
        ),
        ("counter_read", _) => return Err(usage("counter_read COUNTER INDEX")),
        _ => return Err(usage("counter_write COUNTER INDEX PACKETS BYTES")),
    };
    let c = dp.counter_id(name)?;
    let i = number(index, 32, "an index")? as usize;
    let mut out = String::new();
    let (packets, bytes) = match dp.program.counters[c].table {
        Some(t) => {
            out.push_str(&format!(
                "this is the direct counter for table {}\n",
                dp.program.tables[t].name
            ));
            let e = cp.tables[t]
                .get(i as u32)
                .ok_or_else(|| format!("table `{}` has no entry {i}", dp.program.tables[t].name))?;
            if let Some((p, b)) = write {
                e.state.counter.packets.store(p, std::sync::atomic::Ordering::Relaxed);
                e.state.counter.bytes.store(b, std::sync::atomic::Ordering::Relaxed);
            }
            (
                e.state.counter.packets.load(std::sync::atomic::Ordering::Relaxed),
                e.state.counter.bytes.load(std::sync::atomic::Ordering::Relaxed),
            )
        }
        None => {
            if let Some((p, b)) = write
                && !dp.counter_write(c, i, p, b)
            {
                return Err(out_of_range(name, i, dp.program.counters[c].size));
            }
            dp.counter_read(c, i)
                .ok_or_else(|| out_of_range(name, i, dp.program.counters[c].size))?
        }
    };
    if write.is_some() {
        out.push_str(&format!("{name}[{i}] has been updated"));
    } else {
        out.push_str(&format!("{name}[{i}]= ({bytes} bytes, {packets} packets)"));
    }
    Ok(out)
}

/// `meter_set_rates NAME INDEX R:B R:B`, `meter_array_set_rates NAME R:B R:B`,
/// `meter_get_rates NAME INDEX` (a direct meter's index is its table's entry handle).
fn meter(dp: &Datapath, cp: &mut ControlPlane, command: &str, args: &[&str]) -> Result<String, String> {
    let Some((name, rest)) = args.split_first() else {
        return Err(usage(&format!("{command} METER ...")));
    };
    let m = dp.meter_id(name)?;
    let parse_rates = |rates: &[&str]| -> Result<Vec<(f64, u64)>, String> {
        if rates.len() != 2 {
            return Err(format!("Invalid number of rates, expected 2 but got {}", rates.len()));
        }
        rates
            .iter()
            .map(|r| {
                let (rate, burst) = r.split_once(':').ok_or("Error while parsing rates")?;
                Ok((
                    rate.parse::<f64>().map_err(|_| "Error while parsing rates")?,
                    burst.parse::<u64>().map_err(|_| "Error while parsing rates")?,
                ))
            })
            .collect()
    };
    let direct = dp.program.meters[m].table;
    let cell = |i: usize| -> Result<&crate::exec::meter::MeterCell, String> {
        let t = direct.expect("a direct meter");
        cp.tables[t]
            .get(i as u32)
            .map(|e| &e.state.meter)
            .ok_or_else(|| format!("table `{}` has no entry {i}", dp.program.tables[t].name))
    };
    match command {
        "meter_array_set_rates" => {
            let rates = parse_rates(rest)?;
            if direct.is_some() {
                return Err(format!(
                    "`{name}` is a direct meter: set its entries' rates with meter_set_rates"
                ));
            }
            for i in 0..dp.meter_cells(m) {
                if let Some(c) = dp.meter_cell(m, i) {
                    c.set_rates(&rates)?;
                }
            }
            Ok(String::new())
        }
        "meter_set_rates" => {
            let [index, rates @ ..] = rest else {
                return Err(usage("meter_set_rates METER INDEX RATE:BURST RATE:BURST"));
            };
            let i = number(index, 32, "an index")? as usize;
            let rates = parse_rates(rates)?;
            match direct {
                Some(_) => cell(i)?.set_rates(&rates)?,
                None => dp
                    .meter_cell(m, i)
                    .ok_or_else(|| out_of_range(name, i, dp.meter_cells(m)))?
                    .set_rates(&rates)?,
            }
            Ok(String::new())
        }
        _ => {
            let [index] = rest else {
                return Err(usage("meter_get_rates METER INDEX"));
            };
            let i = number(index, 32, "an index")? as usize;
            let rates = match direct {
                Some(_) => cell(i)?.rates(),
                None => dp
                    .meter_cell(m, i)
                    .ok_or_else(|| out_of_range(name, i, dp.meter_cells(m)))?
                    .rates(),
            };
            let mut out = String::new();
            if rates.len() != 2 {
                out.push_str(&format!(
                    "WARNING: expected 2 rates but only received {}\n",
                    rates.len()
                ));
            }
            for (k, (r, b)) in rates.iter().enumerate() {
                out.push_str(&format!("{k}: info rate = {r}, burst size = {b}\n"));
            }
            Ok(out.trim_end().to_owned())
        }
    }
}

/// `table_dump`: every entry, the profile's members and groups, the default.
fn table_dump(dp: &Datapath, cp: &ControlPlane, t: usize) -> String {
    let mut out = String::from("==========\nTABLE ENTRIES\n");
    for e in cp.tables[t].entries() {
        out.push_str(&format!("**********\n{}\n", dump_entry(dp, t, e)));
    }
    if let Some(p) = dp.program.tables[t].profile {
        out.push_str(&format!("{}\n", dump_profile(dp, cp, p)));
    }
    let (a, args) = &cp.tables[t].default;
    out.push_str(&format!(
        "==========\nDumping default entry\n{}\n==========",
        action_entry(dp, *a, args)
    ));
    out
}

fn dump_entry(dp: &Datapath, t: usize, e: &crate::exec::table::StoredEntry) -> String {
    let def = &dp.program.tables[t];
    let w = def.keys.iter().map(|k| k.name.len()).max().unwrap_or(0).max(20);
    let mut out = format!("Dumping entry {:#x}\nMatch key:\n", e.handle);
    for (k, m) in def.keys.iter().zip(&e.entry.matches) {
        let text = match_str(k.kind, k.width, m);
        let (kind, value) = text.split_once('-').unwrap_or(("", &text));
        out.push_str(&format!("* {:w$}: {:10}{}\n", k.name, kind, value.replace(':', "")));
    }
    if def.needs_priority() {
        out.push_str(&format!("Priority: {}\n", -e.entry.priority));
    }
    out.push_str(&match e.via {
        Via::Action => action_entry(dp, e.entry.action, &e.entry.args),
        Via::Member(m) => format!("Index: member({m})"),
        Via::Group(g) => format!("Index: group({g})"),
    });
    out
}

fn dump_profile(dp: &Datapath, cp: &ControlPlane, p: usize) -> String {
    let mut out = String::from("==========\nMEMBERS\n");
    for (h, (a, args)) in &cp.profiles[p].members {
        out.push_str(&format!(
            "**********\nDumping member {h}\n{}\n",
            action_entry(dp, *a, args)
        ));
    }
    if dp.program.profiles[p].selector.is_some() {
        out.push_str("==========\nGROUPS\n");
        for (h, members) in &cp.profiles[p].groups {
            let m: Vec<String> = members.iter().map(u32::to_string).collect();
            out.push_str(&format!("**********\nDumping group {h}\nMembers: [{}]\n", m.join(", ")));
        }
    }
    out.trim_end().to_owned()
}

fn action_entry(dp: &Datapath, a: usize, args: &[u128]) -> String {
    let action = &dp.program.actions[a];
    let data: Vec<String> = action
        .params
        .iter()
        .zip(args)
        .map(|(p, v)| bytes_str(*v, p.width).replace(':', ""))
        .collect();
    format!("Action entry: {} - {}", action.name, data.join(", "))
}

/// BMv2's name of a table's match type (its most general key).
fn match_type(t: &crate::ir::Table) -> &'static str {
    if t.keys.iter().any(|k| k.kind == MatchKind::Range) {
        "range"
    } else if t
        .keys
        .iter()
        .any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Optional))
    {
        "ternary"
    } else if t.keys.iter().any(|k| k.kind == MatchKind::Lpm) {
        "lpm"
    } else {
        "exact"
    }
}

/// A match as simple_switch_CLI prints it (`EXACT-0a:00:01:01`).
fn match_str(kind: MatchKind, w: u16, m: &KeySet) -> String {
    let b = |v: u128| bytes_str(v, w);
    match (kind, m) {
        (MatchKind::Lpm, KeySet::Mask(v, msk)) => format!("LPM-{}/{}", b(*v), msk.count_ones()),
        (MatchKind::Lpm, KeySet::Any) => format!("LPM-{}/0", b(0)),
        (_, KeySet::Value(v)) if kind == MatchKind::Exact => format!("EXACT-{}", b(*v)),
        (_, KeySet::Value(v)) => format!("TERNARY-{} &&& {}", b(*v), b(mask(w))),
        (_, KeySet::Mask(v, msk)) => format!("TERNARY-{} &&& {}", b(*v), b(*msk)),
        (_, KeySet::Any) if kind == MatchKind::Range => format!("RANGE-{} -> {}", b(0), b(mask(w))),
        (_, KeySet::Any) => format!("TERNARY-{} &&& {}", b(0), b(0)),
        (_, KeySet::Range(lo, hi)) => format!("RANGE-{} -> {}", b(*lo), b(*hi)),
    }
}

/// A value of `w` bits as its bytes, `0a:00:01:01`.
fn bytes_str(v: u128, w: u16) -> String {
    let n = usize::from(w).div_ceil(8).max(1);
    (0..n)
        .rev()
        .map(|i| format!("{:02x}", (v >> (8 * i)) as u8))
        .collect::<Vec<_>>()
        .join(":")
}

/// simple_switch_CLI's port map: a bit string, port 0 last.
fn port_map(ports: &[u16]) -> String {
    let max = ports.iter().copied().max().map_or(0, |m| usize::from(m) + 1);
    (0..max)
        .rev()
        .map(|p| if ports.contains(&(p as u16)) { '1' } else { '0' })
        .collect()
}

fn usage(form: &str) -> String {
    format!("expected `{form}`")
}

fn out_of_range(name: &str, i: usize, size: usize) -> String {
    format!("index {i} is out of range for `{name}` ({size} cells)")
}

fn action_args(dp: &Datapath, a: usize, text: &[&str]) -> Result<Vec<u128>, String> {
    let params = &dp.program.actions[a].params;
    if text.len() != params.len() {
        return Err(format!(
            "Action {} needs {} parameters; got {}",
            dp.program.actions[a].name,
            params.len(),
            text.len()
        ));
    }
    params
        .iter()
        .zip(text)
        .map(|(p, t)| value(t, p.width).map_err(|m| format!("Invalid runtime data: argument `{}`: {m}", p.name)))
        .collect()
}

/// The profile of table `t`.
fn profile_of(dp: &Datapath, t: usize) -> Result<usize, String> {
    dp.program.tables[t]
        .profile
        .ok_or_else(|| "Cannot run this command on non-indirect table".to_owned())
}

/// A profile named directly, or (the deprecated `table_indirect_*` forms) by its table.
fn profile_named(dp: &Datapath, name: &str, by_table: bool) -> Result<usize, String> {
    if by_table {
        return profile_of(dp, dp.table_id(name)?);
    }
    dp.profile_id(name)
}

fn selector_only(dp: &Datapath, p: usize) -> Result<(), String> {
    match dp.program.profiles[p].selector {
        Some(_) => Ok(()),
        None => Err("Cannot run this command on an action profile without selector".into()),
    }
}

/// An action of a table that profile `p` holds.
fn profile_action(dp: &Datapath, p: usize, name: &str) -> Result<usize, String> {
    let t = dp
        .program
        .tables
        .iter()
        .position(|t| t.profile == Some(p))
        .ok_or_else(|| format!("no table uses action profile `{}`", dp.program.profiles[p].name))?;
    dp.action_of(t, name)
}

fn value_set(dp: &Datapath, name: &str) -> Result<usize, String> {
    crate::exec::resolve(
        dp.program.value_sets.iter().map(|s| s.name.as_str()),
        name,
        "value set",
        "the program",
    )
}

/// A value set member from one number spanning its fields.
fn value_set_member(v: &str, widths: &[u16]) -> Result<Vec<KeySet>, String> {
    let total: u16 = widths.iter().sum();
    let mut n = value(v, total)?;
    let mut out = vec![KeySet::Any; widths.len()];
    for (i, w) in widths.iter().enumerate().rev() {
        out[i] = KeySet::Value(n & mask(*w));
        n = n.checked_shr(u32::from(*w)).unwrap_or(0);
    }
    Ok(out)
}

/// A value of `w` bits: a number, `0x..`, an IPv4, IPv6 or MAC address.
fn value(s: &str, w: u16) -> Result<u128, String> {
    if let Ok(ip) = s.parse::<Ipv6Addr>() {
        return fit(u128::from(ip), w);
    }
    fit(parse_value(s)?, w)
}

fn number(s: &str, w: u16, what: &str) -> Result<u128, String> {
    value(s, w).map_err(|m| format!("{what} expected: {m}"))
}

fn port(s: &str) -> Result<u16, String> {
    let p = number(s, 16, "a port number")?;
    if p >= u128::from(crate::exec::DROP_PORT) {
        return Err(format!("port {p} is not below 511 (the drop port)"));
    }
    Ok(p as u16)
}

fn group_id(s: &str) -> Result<u16, String> {
    let g = number(s, 16, "a multicast group id")?;
    if g == 0 {
        return Err("group 0 means no multicast; use 1 to 65535".into());
    }
    Ok(g as u16)
}

/// One match field written for a key of `kind` and `w` bits.
fn key_set(s: &str, kind: MatchKind, w: u16) -> Result<KeySet, String> {
    Ok(match kind {
        MatchKind::Exact => KeySet::Value(value(s, w)?),
        MatchKind::Optional if s == "*" => KeySet::Any,
        MatchKind::Optional => match s.split_once("&&&") {
            // BMv2 runs optional keys as ternary ones: a full mask or none.
            Some((v, m)) => {
                let m = value(m, w)?;
                if m == 0 {
                    KeySet::Any
                } else if m == mask(w) {
                    KeySet::Value(value(v, w)?)
                } else {
                    return Err(format!("`{s}`: an optional key's mask is all ones or 0"));
                }
            }
            None => KeySet::Value(value(s, w)?),
        },
        MatchKind::Lpm => {
            let (v, len) = s
                .split_once('/')
                .ok_or_else(|| format!("`{s}`: VALUE/PREFIX_LENGTH expected for an lpm key"))?;
            crate::exec::table::prefix(value(v, w)?, number(len, 8, "a prefix length")?, w)?
        }
        MatchKind::Ternary => {
            let (v, m) = s
                .split_once("&&&")
                .ok_or_else(|| format!("`{s}`: VALUE&&&MASK expected for a ternary key"))?;
            let m = fit(parse_value(m)? & mask(w), w)?;
            KeySet::Mask(value(v, w)? & m, m)
        }
        MatchKind::Range => {
            let (lo, hi) = s
                .split_once("->")
                .ok_or_else(|| format!("`{s}`: LOW->HIGH expected for a range key"))?;
            let (lo, hi) = (value(lo, w)?, value(hi, w)?);
            if lo > hi {
                return Err(format!("`{s}`: the low end is above the high end"));
            }
            KeySet::Range(lo, hi)
        }
    })
}
