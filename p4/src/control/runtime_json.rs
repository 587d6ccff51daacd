//! The p4lang tutorials' runtime files (`sN-runtime.json`): table entries, default actions,
//! multicast groups and clone sessions, named as P4Info names them. Every refusal names the
//! file and the JSON path of the offending value.

use std::net::Ipv4Addr;
use std::path::Path;

use serde_json::Value;

use crate::exec::table::Via;
use crate::exec::{ControlPlane, Datapath, Session};
use crate::ir::{Entry, KeySet, MatchKind, mask};

/// A runtime file that could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {path}: {message}")]
pub struct RuntimeError {
    /// The file.
    pub file: String,
    /// JSON path of the offending value (`table_entries[2].match.hdr.ipv4.dstAddr`).
    pub path: String,
    /// What was wrong and what was expected.
    pub message: String,
}

/// Reads `path` and applies it to `dp`.
pub fn apply_file(dp: &Datapath, path: &Path) -> Result<(), RuntimeError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| RuntimeError {
        file: file.clone(),
        path: "(file)".into(),
        message: e.to_string(),
    })?;
    apply_text(dp, &file, &text)
}

/// Applies runtime JSON `text` (called `file` in errors) to `dp`: all of it, or nothing.
pub fn apply_text(dp: &Datapath, file: &str, text: &str) -> Result<(), RuntimeError> {
    dp.edit(|cp| apply(dp, cp, file, text))
}

fn apply(dp: &Datapath, cp: &mut ControlPlane, file: &str, text: &str) -> Result<(), RuntimeError> {
    let err = |path: String, message: String| RuntimeError {
        file: file.to_owned(),
        path,
        message,
    };
    let root: Value = serde_json::from_str(text).map_err(|e| {
        err(
            format!("line {} column {}", e.line(), e.column()),
            format!("not JSON: {e}"),
        )
    })?;
    if let Some(entries) = root.get("table_entries") {
        let Some(entries) = entries.as_array() else {
            return Err(err("table_entries".into(), "a list expected".into()));
        };
        for (i, e) in entries.iter().enumerate() {
            let at = format!("table_entries[{i}]");
            table_entry(dp, cp, e)
                .map_err(|(p, m)| err(if p.is_empty() { at.clone() } else { format!("{at}.{p}") }, m))?;
        }
    }
    for (key, group_key, is_group) in [
        ("multicast_group_entries", "multicast_group_id", true),
        ("clone_session_entries", "clone_session_id", false),
    ] {
        let Some(list) = root.get(key) else { continue };
        let Some(list) = list.as_array() else {
            return Err(err(key.into(), "a list expected".into()));
        };
        for (i, g) in list.iter().enumerate() {
            let at = format!("{key}[{i}]");
            let id = g
                .get(group_key)
                .and_then(Value::as_u64)
                .ok_or_else(|| err(format!("{at}.{group_key}"), "a number expected".into()))?;
            let mut replicas = Vec::new();
            let Some(list) = g.get("replicas").and_then(Value::as_array) else {
                return Err(err(
                    format!("{at}.replicas"),
                    "a list of {egress_port, instance} expected".into(),
                ));
            };
            for (j, r) in list.iter().enumerate() {
                let port = r
                    .get("egress_port")
                    .and_then(Value::as_u64)
                    .filter(|p| *p < 511)
                    .ok_or_else(|| {
                        err(
                            format!("{at}.replicas[{j}].egress_port"),
                            "a port number below 511 expected".into(),
                        )
                    })?;
                let rid = r.get("instance").and_then(Value::as_u64).unwrap_or(0);
                replicas.push((port as u16, rid as u16));
            }
            if is_group {
                let id = u16::try_from(id)
                    .ok()
                    .filter(|g| *g > 0)
                    .ok_or_else(|| err(format!("{at}.{group_key}"), "a group id of 1 to 65535 expected".into()))?;
                cp.set_group(id, &replicas);
            } else {
                let Some(&(port, _)) = replicas.first() else {
                    return Err(err(
                        format!("{at}.replicas"),
                        "a clone session needs one replica".into(),
                    ));
                };
                cp.sessions.insert(
                    id as u32,
                    Session {
                        port: Some(port),
                        group: None,
                        rid: 0,
                    },
                );
            }
        }
    }
    Ok(())
}

/// One element of `table_entries`; errors carry a path relative to it.
fn table_entry(dp: &Datapath, cp: &mut ControlPlane, e: &Value) -> Result<(), (String, String)> {
    let name = e
        .get("table")
        .and_then(Value::as_str)
        .ok_or_else(|| ("table".to_owned(), "a table name expected".to_owned()))?;
    let t = dp.table_id(name).map_err(|m| ("table".to_owned(), m))?;
    let action_name = e
        .get("action_name")
        .and_then(Value::as_str)
        .ok_or_else(|| ("action_name".to_owned(), "an action name expected".to_owned()))?;
    let action = dp
        .action_of(t, action_name)
        .map_err(|m| ("action_name".to_owned(), m))?;
    let params = e
        .get("action_params")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let mut args = Vec::new();
    for p in dp.program.actions[action].params.iter() {
        let v = params.get(&p.name).ok_or_else(|| {
            (
                format!("action_params.{}", p.name),
                format!("parameter `{}` ({} bits) is missing", p.name, p.width),
            )
        })?;
        args.push(value(v, p.width).map_err(|m| (format!("action_params.{}", p.name), m))?);
    }
    if e.get("default_action").and_then(Value::as_bool) == Some(true) {
        dp.check_default_allowed(t)
            .map_err(|m| ("default_action".to_owned(), m))?;
        cp.tables[t].default = (action, args);
        return Ok(());
    }
    dp.check_entries_allowed(t).map_err(|m| ("table".to_owned(), m))?;
    let table = &dp.program.tables[t];
    let matches_json = e.get("match").cloned().unwrap_or(Value::Object(Default::default()));
    let Some(fields) = matches_json.as_object() else {
        return Err(("match".into(), "an object of key name to value expected".into()));
    };
    for k in fields.keys() {
        if !table.keys.iter().any(|x| &x.name == k) {
            let known: Vec<&str> = table.keys.iter().map(|k| k.name.as_str()).collect();
            return Err((
                format!("match.{k}"),
                format!("table `{name}` has no key `{k}` (its keys: {})", known.join(", ")),
            ));
        }
    }
    let mut matches = Vec::new();
    for k in &table.keys {
        let at = format!("match.{}", k.name);
        let set = match fields.get(&k.name) {
            None if k.kind == MatchKind::Exact => return Err((at, "an exact key cannot be left out".into())),
            None => KeySet::Any,
            Some(v) => key_set(v, k.kind, k.width).map_err(|m| (at, m))?,
        };
        matches.push(set);
    }
    let priority = e.get("priority").and_then(Value::as_i64).unwrap_or(0);
    let entry = Entry {
        matches,
        priority,
        action,
        args,
    };
    cp.tables[t]
        .insert(entry, Via::Action)
        .map_err(|m| (String::new(), m.to_string()))?;
    Ok(())
}

fn key_set(v: &Value, kind: MatchKind, w: u16) -> Result<KeySet, String> {
    let pair = |what: &str| -> Result<(u128, u128), String> {
        match v.as_array().map(Vec::as_slice) {
            Some([a, b]) => Ok((value(a, w)?, value(b, 128)?)),
            _ => Err(format!("[{what}] expected for a {kind:?} key of {w} bits")),
        }
    };
    Ok(match kind {
        // The tutorials write some exact keys as a list of one (basic_tunnel's `[1]`), which
        // their P4Runtime helper unwraps.
        MatchKind::Exact | MatchKind::Optional => match v.as_array().map(Vec::as_slice) {
            Some([one]) => KeySet::Value(value(one, w)?),
            _ => KeySet::Value(value(v, w)?),
        },
        MatchKind::Lpm => {
            let (a, len) = pair("value, prefix length")?;
            crate::exec::table::prefix(a, len, w)?
        }
        MatchKind::Ternary => {
            let (a, m) = pair("value, mask")?;
            KeySet::Mask(a & m, m & mask(w))
        }
        MatchKind::Range => {
            let (lo, hi) = pair("low, high")?;
            KeySet::Range(lo, hi)
        }
    })
}

/// A value as the tutorials write it: a number, "0x..", a dotted IPv4 address or a MAC.
pub fn value(v: &Value, w: u16) -> Result<u128, String> {
    let n = match v {
        Value::Number(n) => n
            .as_u64()
            .map(u128::from)
            .ok_or_else(|| format!("{n} is not a whole number of 0 or more"))?,
        Value::Bool(b) => u128::from(*b),
        Value::String(s) => parse_value(s)?,
        other => return Err(format!("{other} is not a value")),
    };
    fit(n, w)
}

/// `n` if it fits in `w` bits.
pub fn fit(n: u128, w: u16) -> Result<u128, String> {
    if n & !mask(w) != 0 {
        return Err(format!("{n:#x} does not fit in {w} bits"));
    }
    Ok(n)
}

/// Parses "10.0.1.1", "08:00:00:00:01:11", "0x1f" or "42".
pub fn parse_value(s: &str) -> Result<u128, String> {
    if let Ok(ip) = s.parse::<Ipv4Addr>() {
        return Ok(u128::from(u32::from(ip)));
    }
    if s.len() == 17 && s.split(':').count() == 6 {
        let mut v = 0u128;
        for part in s.split(':') {
            v = (v << 8) | u128::from(u8::from_str_radix(part, 16).map_err(|_| format!("`{s}` is not a MAC address"))?);
        }
        return Ok(v);
    }
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u128::from_str_radix(hex, 16).map_err(|_| format!("`{s}` is not a hexadecimal number"));
    }
    s.parse::<u128>()
        .map_err(|_| format!("`{s}` is not a number, an IPv4 address or a MAC address"))
}
