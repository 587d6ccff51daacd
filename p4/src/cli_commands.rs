//! Filling a program's tables from `simple_switch_CLI` commands, as BMv2 users write them in
//! command files (`s1-commands.txt`): `table_add`, `table_set_default`, `table_delete`,
//! `mc_mgrp_create`, `mc_node_create`, `mc_node_associate`, `mirroring_add`,
//! `register_read`/`register_write` and `counter_read`.
//!
//! Tables and actions are named as BMv2 names them (`MyIngress.ipv4_lpm`) or by a suffix that
//! only one of them has (`ipv4_lpm`). Match fields are written per key kind: exact `v`, lpm
//! `v/len`, ternary `v&&&mask`, range `lo->hi`, optional `v` (or `*` for any); values as
//! numbers, `0x..`, IPv4 or MAC addresses. As in simple_switch_CLI, a table with ternary, range
//! or optional keys takes a priority after the action's arguments, and the lowest number wins.

use std::collections::HashMap;
use std::path::Path;

use crate::exec::{ControlPlane, Datapath};
use crate::ir::{Entry, KeySet, MatchKind};
use crate::runtime_json::{fit, parse_value};

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

/// The handles simple_switch_CLI gives out, kept across commands: table entries (per table,
/// from 0) and multicast nodes.
#[derive(Debug, Default)]
pub struct CliSession {
    next_handle: HashMap<usize, u32>,
    /// (table, handle) → the entry's match and priority, which find it again.
    entries: HashMap<(usize, u32), (Vec<KeySet>, i64)>,
    /// Multicast nodes: (replication id, ports).
    nodes: Vec<(u16, Vec<u16>)>,
}

/// Applies the command file `path` to `dp`; returns what the read commands printed.
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

impl CliSession {
    /// A session on `dp`: entries already there (from source or a runtime file) hold the first
    /// handles of their tables, as they would on BMv2.
    pub fn for_datapath(dp: &Datapath) -> CliSession {
        let mut s = CliSession::default();
        for (t, table) in dp.control().tables.iter().enumerate() {
            for e in table.entries() {
                let h = s.take_handle(t);
                s.entries.insert((t, h), (e.entry.matches.clone(), e.entry.priority));
            }
        }
        s
    }

    fn take_handle(&mut self, t: usize) -> u32 {
        let n = self.next_handle.entry(t).or_default();
        *n += 1;
        *n - 1
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
        match command {
            "table_add" => self.table_add(dp, cp, args).map(Some),
            "table_set_default" => table_set_default(dp, cp, args).map(|()| None),
            "table_delete" => self.table_delete(dp, cp, args).map(|()| None),
            "mc_mgrp_create" => {
                let [g] = args else {
                    return Err(usage("mc_mgrp_create GROUP"));
                };
                let g = group_id(g)?;
                cp.groups.entry(g).or_default();
                Ok(None)
            }
            "mc_node_create" => {
                let [rid, ports @ ..] = args else {
                    return Err(usage("mc_node_create RID PORT..."));
                };
                let rid = number(rid, 16, "a replication id")? as u16;
                let ports = ports.iter().map(|p| port(p)).collect::<Result<Vec<u16>, String>>()?;
                self.nodes.push((rid, ports));
                Ok(Some(format!("node was created with handle {}", self.nodes.len() - 1)))
            }
            "mc_node_associate" => {
                let [g, node] = args else {
                    return Err(usage("mc_node_associate GROUP NODE_HANDLE"));
                };
                let g = group_id(g)?;
                let n = number(node, 32, "a node handle")? as usize;
                let (rid, ports) = self
                    .nodes
                    .get(n)
                    .ok_or_else(|| format!("no multicast node with handle {n} (create it with mc_node_create)"))?;
                let group = cp
                    .groups
                    .get_mut(&g)
                    .ok_or_else(|| format!("no multicast group {g} (create it with mc_mgrp_create)"))?;
                group.extend(ports.iter().map(|&p| (p, *rid)));
                Ok(None)
            }
            "mirroring_add" => {
                let [session, p] = args else {
                    return Err(usage("mirroring_add SESSION PORT"));
                };
                let session = number(session, 32, "a session id")? as u32;
                cp.sessions.insert(session, port(p)?);
                Ok(None)
            }
            "register_read" => {
                let (name, index) = match args {
                    [name] => (*name, None),
                    [name, i] => (*name, Some(number(i, 32, "an index")? as usize)),
                    _ => return Err(usage("register_read REGISTER [INDEX]")),
                };
                let r = dp.register_id(name)?;
                let cells = dp.program.registers[r].size;
                let cell = |i: usize| dp.register_read(r, i).ok_or_else(|| out_of_range(name, i, cells));
                Ok(Some(match index {
                    Some(i) => format!("{name}[{i}]= {}", cell(i)?),
                    None => {
                        let all = (0..cells).map(cell).collect::<Result<Vec<u64>, String>>()?;
                        let all: Vec<String> = all.iter().map(u64::to_string).collect();
                        format!("{name}= {}", all.join(", "))
                    }
                }))
            }
            "register_write" => {
                let [name, i, v] = args else {
                    return Err(usage("register_write REGISTER INDEX VALUE"));
                };
                let r = dp.register_id(name)?;
                let reg = &dp.program.registers[r];
                let v = value(v, reg.width)?;
                let i = number(i, 32, "an index")? as usize;
                if !dp.register_write(r, i, v as u64) {
                    return Err(out_of_range(name, i, reg.size));
                }
                Ok(None)
            }
            "counter_read" => {
                let [name, i] = args else {
                    return Err(usage("counter_read COUNTER INDEX"));
                };
                let c = dp.counter_id(name)?;
                let i = number(i, 32, "an index")? as usize;
                let (packets, bytes) = dp
                    .counter_read(c, i)
                    .ok_or_else(|| out_of_range(name, i, dp.program.counters[c].size))?;
                Ok(Some(format!("{name}[{i}]= (packets={packets}, bytes={bytes})")))
            }
            other => Err(format!(
                "unknown command `{other}` (intlab runs table_add, table_set_default, table_delete, \
                 mc_mgrp_create, mc_node_create, mc_node_associate, mirroring_add, register_read, \
                 register_write, counter_read)"
            )),
        }
    }

    /// `table_add TABLE ACTION MATCH... => ARG... [PRIORITY]`; prints the entry's handle.
    fn table_add(&mut self, dp: &Datapath, cp: &mut ControlPlane, args: &[&str]) -> Result<String, String> {
        const USE: &str = "table_add TABLE ACTION MATCH... => ARG... [PRIORITY]";
        let [table, action, rest @ ..] = args else {
            return Err(usage(USE));
        };
        let arrow = rest.iter().position(|w| *w == "=>").ok_or_else(|| usage(USE))?;
        let (fields, after) = (&rest[..arrow], &rest[arrow + 1..]);
        let t = dp.table_id(table)?;
        let a = dp.action_of(t, action)?;
        dp.check_entries_allowed(t)?;
        let def = &dp.program.tables[t];
        if fields.len() != def.keys.len() {
            let keys: Vec<String> = def.keys.iter().map(|k| format!("{} ({:?})", k.name, k.kind)).collect();
            return Err(format!(
                "table `{}` has {} key(s), {}; got {} match field(s)",
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
            .map(|(k, f)| key_set(f, k.kind, k.width).map_err(|m| format!("key `{}`: {m}", k.name)))
            .collect::<Result<Vec<KeySet>, String>>()?;
        let prioritized = def
            .keys
            .iter()
            .any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range | MatchKind::Optional));
        let wanted = arg_count(dp, a);
        let (args_text, priority) = match (prioritized, after.len()) {
            (true, n) if n == wanted + 1 => (&after[..wanted], Some(after[wanted])),
            (false, n) if n == wanted => (after, None),
            _ => {
                return Err(format!(
                    "action `{}` takes {wanted} argument(s){}; got {}",
                    dp.program.actions[a].name,
                    if prioritized {
                        " and this table a priority after them"
                    } else {
                        ""
                    },
                    after.len()
                ));
            }
        };
        let args = action_args(dp, a, args_text)?;
        // simple_switch_CLI: the lowest number wins; intlab's tables: the highest.
        let priority = match priority {
            Some(p) => -(number(p, 31, "a priority")? as i64),
            None => 0,
        };
        let entry = Entry {
            matches: matches.clone(),
            priority,
            action: a,
            args,
        };
        cp.tables[t].insert(entry)?;
        let h = self.take_handle(t);
        self.entries.insert((t, h), (matches, priority));
        Ok(format!(
            "entry added to `{}` with handle {h}",
            dp.program.tables[t].name
        ))
    }

    /// `table_delete TABLE HANDLE`.
    fn table_delete(&mut self, dp: &Datapath, cp: &mut ControlPlane, args: &[&str]) -> Result<(), String> {
        let [table, handle] = args else {
            return Err(usage("table_delete TABLE HANDLE"));
        };
        let t = dp.table_id(table)?;
        let h = number(handle, 32, "an entry handle")? as u32;
        let (matches, priority) = self
            .entries
            .remove(&(t, h))
            .ok_or_else(|| format!("table `{}` has no entry with handle {h}", dp.program.tables[t].name))?;
        let at = cp.tables[t]
            .entries()
            .iter()
            .position(|e| e.entry.matches == matches && e.entry.priority == priority)
            .ok_or_else(|| format!("the entry with handle {h} is gone"))?;
        cp.tables[t].delete(at);
        Ok(())
    }
}

/// `table_set_default TABLE ACTION ARG...`.
fn table_set_default(dp: &Datapath, cp: &mut ControlPlane, args: &[&str]) -> Result<(), String> {
    let [table, action, rest @ ..] = args else {
        return Err(usage("table_set_default TABLE ACTION ARG..."));
    };
    let t = dp.table_id(table)?;
    let a = dp.action_of(t, action)?;
    dp.check_default_allowed(t)?;
    let wanted = arg_count(dp, a);
    if rest.len() != wanted {
        return Err(format!(
            "action `{}` takes {wanted} argument(s); got {}",
            dp.program.actions[a].name,
            rest.len()
        ));
    }
    let args = action_args(dp, a, rest)?;
    cp.tables[t].default = (a, args);
    Ok(())
}

fn usage(form: &str) -> String {
    format!("expected `{form}`")
}

fn out_of_range(name: &str, i: usize, size: usize) -> String {
    format!("index {i} is out of range for `{name}` ({size} cells)")
}

fn arg_count(dp: &Datapath, a: usize) -> usize {
    dp.program.actions[a].params.iter().filter(|p| p.control_plane).count()
}

fn action_args(dp: &Datapath, a: usize, text: &[&str]) -> Result<Vec<u128>, String> {
    dp.program.actions[a]
        .params
        .iter()
        .filter(|p| p.control_plane)
        .zip(text)
        .map(|(p, t)| value(t, p.width).map_err(|m| format!("argument `{}`: {m}", p.name)))
        .collect()
}

/// A value of `w` bits.
fn value(s: &str, w: u16) -> Result<u128, String> {
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
        MatchKind::Optional => KeySet::Value(value(s, w)?),
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
            let m = value(m, w)?;
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
