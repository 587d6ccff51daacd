//! p4c's STF tests ("simple test framework"): table entries, defaults and `simple_switch_CLI`
//! commands, packets sent in and packets expected out (hex, `*` for a nibble that may be
//! anything, `$` for "no byte more"), run in file order on a switch, as p4c's BMv2 runner
//! (`bmv2stf.py`) runs them on simple_switch: [`run`] on [`crate::sim::SimSwitch`] in memory,
//! [`run_on`] on any [`StfSwitch`] (the lab's switch on veth pairs, in the testbed).
//!
//! As that runner does, expectations are checked per port at the end, in order, and every
//! port a `packet` or `expect` names must send exactly the packets expected; ports the file
//! never names are not watched.

use std::collections::{BTreeMap, BTreeSet};

use crate::control::cli_commands::CliSession;
use crate::exec::Datapath;
use crate::ir::MatchKind;
use crate::sim::SimSwitch;

/// A line of an STF file that cannot be read or carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct StfError {
    /// The STF file.
    pub file: String,
    /// The line (from 1).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// What a packet line expects: a nibble each (None: any), and whether the packet ends there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    nibbles: Vec<Option<u8>>,
    exact_length: bool,
}

/// One command of an STF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `add TABLE [PRIORITY] KEY:VALUE... ACTION(ARG:VALUE, ...)`.
    Add {
        /// The table.
        table: String,
        /// Its priority (larger wins), if given.
        priority: Option<i64>,
        /// Key fields and values as written.
        matches: Vec<(String, String)>,
        /// The action.
        action: String,
        /// Its arguments by name.
        args: Vec<(String, String)>,
    },
    /// `setdefault TABLE ACTION(ARG:VALUE, ...)`.
    SetDefault {
        /// The table.
        table: String,
        /// The action.
        action: String,
        /// Its arguments by name.
        args: Vec<(String, String)>,
    },
    /// `packet PORT DATA`.
    Packet(u16, Vec<u8>),
    /// `expect PORT [DATA]` (no data: any one packet).
    Expect(u16, Option<Pattern>),
    /// `check_counter NAME(INDEX) [packets|bytes OP VALUE]`.
    CheckCounter {
        /// The counter.
        name: String,
        /// The cell.
        index: usize,
        /// What is compared, how, with what (`packets == 0` when none is written).
        check: (String, String, u64),
    },
    /// `remove all`: every table's entries.
    RemoveAll,
    /// `wait`: until the switch has done with what it was sent.
    Wait,
    /// A `simple_switch_CLI` command (`mc_mgrp_create`, `mirroring_add`, `register_write`, ...).
    Cli(String),
}

/// An STF file read.
#[derive(Debug, Clone)]
pub struct StfFile {
    /// Its name, for errors.
    pub name: String,
    /// Its commands with their lines.
    pub commands: Vec<(usize, Command)>,
}

/// The commands passed to `simple_switch_CLI` as they are.
const CLI_COMMANDS: &[&str] = &[
    "mirroring_add",
    "mirroring_add_mc",
    "mirroring_delete",
    "mirroring_get",
    "mc_mgrp_create",
    "mc_mgrp_destroy",
    "mc_node_create",
    "mc_node_update",
    "mc_node_associate",
    "mc_node_dissociate",
    "mc_node_destroy",
    "counter_read",
    "counter_write",
    "counter_reset",
    "register_read",
    "register_write",
    "register_reset",
    "meter_get_rates",
    "meter_set_rates",
    "meter_array_set_rates",
    "table_add",
    "table_set_default",
    "act_prof_create_member",
    "act_prof_modify_member",
    "act_prof_delete_member",
    "act_prof_create_group",
    "act_prof_delete_group",
    "act_prof_add_member_to_group",
    "act_prof_remove_member_from_group",
    "table_indirect_add",
    "table_indirect_add_with_group",
    "table_indirect_set_default",
    "table_indirect_set_default_with_group",
];

/// Reads an STF file's text.
pub fn parse(name: &str, text: &str) -> Result<StfFile, StfError> {
    let mut commands = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |message: String| StfError {
            file: name.to_owned(),
            line: i + 1,
            message,
        };
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let cmd = match word.to_ascii_lowercase().as_str() {
            "add" => add(rest).map_err(err)?,
            "setdefault" => {
                let (table, call) = rest
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| err("setdefault TABLE ACTION(...) expected".into()))?;
                let (action, args) = action_call(call.trim()).map_err(err)?;
                Command::SetDefault {
                    table: table.to_owned(),
                    action,
                    args,
                }
            }
            "packet" => {
                let (port, data) = port_and_data(rest).map_err(err)?;
                let p = pattern(data).map_err(err)?;
                if p.nibbles.iter().any(Option::is_none) || p.exact_length {
                    return Err(err("a packet sent has no `*` or `$`".into()));
                }
                let hex: String = p
                    .nibbles
                    .iter()
                    .map(|n| char::from_digit(u32::from(n.unwrap_or(0)), 16).unwrap_or('0'))
                    .collect();
                Command::Packet(port, bytes(&hex).map_err(err)?)
            }
            "expect" => {
                let (port, data) = port_and_data(rest).map_err(err)?;
                let p = if data.trim().is_empty() {
                    None
                } else {
                    Some(pattern(data).map_err(err)?)
                };
                Command::Expect(port, p)
            }
            "check_counter" => check_counter(rest).map_err(err)?,
            "remove" if rest.eq_ignore_ascii_case("all") => Command::RemoveAll,
            "wait" => Command::Wait,
            "no_packet" => Command::Wait,
            w if CLI_COMMANDS.contains(&w) => Command::Cli(line.to_owned()),
            other => return Err(err(format!("unknown STF command `{other}`"))),
        };
        commands.push((i + 1, cmd));
    }
    Ok(StfFile {
        name: name.to_owned(),
        commands,
    })
}

fn port_and_data(rest: &str) -> Result<(u16, &str), String> {
    let (port, data) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("`{port}` is not a port number"))?;
    Ok((port, data))
}

/// Hex digits, `*` and a final `$`, spaces anywhere.
fn pattern(data: &str) -> Result<Pattern, String> {
    let mut nibbles = Vec::new();
    let mut exact_length = false;
    for c in data.chars().filter(|c| !c.is_whitespace()) {
        if exact_length {
            return Err("`$` ends a packet's data".into());
        }
        match c {
            '*' => nibbles.push(None),
            '$' => exact_length = true,
            c => match c.to_digit(16) {
                Some(d) => nibbles.push(Some(d as u8)),
                None => return Err(format!("`{c}` is not a hex digit")),
            },
        }
    }
    Ok(Pattern { nibbles, exact_length })
}

fn bytes(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err("a packet's data is whole bytes (an even number of hex digits)".into());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

/// `TABLE [PRIORITY] KEY:VALUE... ACTION(ARG:VALUE, ...)`.
fn add(rest: &str) -> Result<Command, String> {
    let open = rest
        .find('(')
        .ok_or("add TABLE [PRIORITY] KEY:VALUE... ACTION(...) expected")?;
    let head = &rest[..open];
    let mut words: Vec<&str> = head.split_whitespace().collect();
    let action_name = words.pop().ok_or("an action expected")?;
    let call = format!("{action_name}{}", &rest[open..]);
    let call = match call.rfind(')') {
        Some(close) => call[..=close].to_owned(),
        None => return Err("`)` expected after the action's arguments".into()),
    };
    let mut words = words.into_iter();
    let table = words.next().ok_or("a table expected")?.to_owned();
    let mut priority = None;
    let mut matches = Vec::new();
    for w in words {
        match w.split_once(':') {
            Some((k, v)) => matches.push((k.to_owned(), v.to_owned())),
            None if priority.is_none() && matches.is_empty() => {
                priority = Some(
                    w.parse::<i64>()
                        .map_err(|_| format!("`{w}` is neither a priority nor KEY:VALUE"))?,
                );
            }
            None => return Err(format!("`{w}`: KEY:VALUE expected")),
        }
    }
    let (action, args) = action_call(&call)?;
    Ok(Command::Add {
        table,
        priority,
        matches,
        action,
        args,
    })
}

/// `NAME(ARG:VALUE, ...)`.
fn action_call(call: &str) -> Result<(String, Vec<(String, String)>), String> {
    let (name, rest) = call
        .split_once('(')
        .ok_or_else(|| format!("`{call}`: ACTION(...) expected"))?;
    let inner = rest.trim_end().strip_suffix(')').ok_or("`)` expected")?;
    let mut args = Vec::new();
    for a in inner.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let (k, v) = a.split_once(':').ok_or_else(|| format!("`{a}`: NAME:VALUE expected"))?;
        args.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok((name.trim().to_owned(), args))
}

fn check_counter(rest: &str) -> Result<Command, String> {
    let (name, after) = rest.split_once('(').ok_or("check_counter NAME(INDEX) expected")?;
    let (index, check) = after.split_once(')').ok_or("`)` expected")?;
    let index = index
        .trim()
        .parse::<usize>()
        .map_err(|_| format!("`{index}` is not an index"))?;
    let words: Vec<&str> = check.split_whitespace().collect();
    let check = match words.as_slice() {
        [] => ("packets".to_owned(), "==".to_owned(), 0),
        [what, op, v] => (
            what.to_ascii_lowercase(),
            (*op).to_owned(),
            v.parse::<u64>().map_err(|_| format!("`{v}` is not a count"))?,
        ),
        _ => return Err("check_counter NAME(INDEX) [packets|bytes OP VALUE] expected".into()),
    };
    Ok(Command::CheckCounter {
        name: name.trim().to_owned(),
        index,
        check,
    })
}

/// The verdict on one expectation (or on a packet nobody expected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The STF line it concerns (0 for an unexpected packet).
    pub line: usize,
    /// Whether it holds.
    pub passed: bool,
    /// What was expected and what came, with the difference.
    pub text: String,
}

/// What a test run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every expectation's verdict, and the packets nobody expected.
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// Whether every expectation held and nothing else came.
    pub fn passed(&self) -> bool {
        self.verdicts.iter().all(|v| v.passed)
    }
}

/// A switch an STF test drives: frames in on a port, frames out on ports.
pub trait StfSwitch {
    /// Sends `frame` in on P4 port `port`.
    fn send(&mut self, port: u16, frame: &[u8]) -> Result<(), String>;
    /// Waits until the switch is done with every frame it was sent, and returns the frames it
    /// sent out since the last call, in the order each port sent them.
    fn settle(&mut self) -> Result<Vec<(u16, Vec<u8>)>, String>;
}

/// The switch in memory, as an [`StfSwitch`]: a frame is done with when `send` returns.
struct InMemory<'d> {
    sim: SimSwitch<'d>,
    out: Vec<(u16, Vec<u8>)>,
}

impl StfSwitch for InMemory<'_> {
    fn send(&mut self, port: u16, frame: &[u8]) -> Result<(), String> {
        let out = self.sim.send(port, frame);
        self.out.extend(out);
        Ok(())
    }

    fn settle(&mut self) -> Result<Vec<(u16, Vec<u8>)>, String> {
        Ok(std::mem::take(&mut self.out))
    }
}

/// Runs `stf` on `dp` (a fresh datapath of the program under test) in memory.
pub fn run(dp: &Datapath, stf: &StfFile) -> Result<Report, StfError> {
    let mut sim = InMemory {
        sim: SimSwitch::new(dp),
        out: Vec::new(),
    };
    run_on(dp, stf, &mut sim)
}

/// Runs `stf` on `switch`, whose program runs on `dp` (fresh: no entries but the program's).
/// The control plane's commands wait for the frames sent before them to be done with.
pub fn run_on(dp: &Datapath, stf: &StfFile, switch: &mut dyn StfSwitch) -> Result<Report, StfError> {
    let mut cli = CliSession::for_datapath(dp);
    let mut expected: BTreeMap<u16, Vec<(usize, Option<Pattern>)>> = BTreeMap::new();
    let mut watched: BTreeSet<u16> = BTreeSet::new();
    let mut received: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
    let mut report = Report::default();
    for (line, cmd) in &stf.commands {
        let err = |message: String| StfError {
            file: stf.name.clone(),
            line: *line,
            message,
        };
        if !matches!(cmd, Command::Packet(..) | Command::Expect(..)) {
            for (p, frame) in switch.settle().map_err(err)? {
                received.entry(p).or_default().push(frame);
            }
        }
        match cmd {
            Command::Add {
                table,
                priority,
                matches,
                action,
                args,
            } => {
                let text = table_add(dp, table, *priority, matches, action, args).map_err(err)?;
                cli.run(dp, &text).map_err(|m| err(format!("{m} (as `{text}`)")))?;
            }
            Command::SetDefault { table, action, args } => {
                let t = dp.table_id(table).map_err(err)?;
                let a = table_action(dp, t, action).map_err(err)?;
                let values = action_values(dp, a, args).map_err(err)?;
                let text = format!(
                    "table_set_default {} {} {}",
                    dp.program().tables[t].name,
                    dp.program().actions[a].name,
                    values.join(" ")
                );
                cli.run(dp, &text).map_err(|m| err(format!("{m} (as `{text}`)")))?;
            }
            Command::Cli(text) => {
                if let Some(out) = cli.run(dp, text).map_err(err)? {
                    tracing::info!(target: "p4", "{out}");
                }
            }
            Command::Packet(port, data) => {
                watched.insert(*port);
                switch.send(*port, data).map_err(err)?;
            }
            Command::Expect(port, pattern) => {
                watched.insert(*port);
                expected.entry(*port).or_default().push((*line, pattern.clone()));
            }
            Command::CheckCounter { name, index, check } => {
                let c = dp.counter_id(name).map_err(err)?;
                let (packets, bytes) = dp
                    .counter_read(c, *index)
                    .ok_or_else(|| err(format!("counter `{name}` has no cell {index}")))?;
                let got = if check.0 == "bytes" { bytes } else { packets };
                let holds = match check.1.as_str() {
                    "==" => got == check.2,
                    "!=" => got != check.2,
                    "<" => got < check.2,
                    "<=" => got <= check.2,
                    ">" => got > check.2,
                    ">=" => got >= check.2,
                    op => return Err(err(format!("`{op}` is not a comparison"))),
                };
                report.verdicts.push(Verdict {
                    line: *line,
                    passed: holds,
                    text: format!(
                        "counter {name}[{index}] {} = {got}, expected {} {}",
                        check.0, check.1, check.2
                    ),
                });
            }
            Command::RemoveAll => {
                dp.edit(|cp| -> Result<(), StfError> {
                    for t in &mut cp.tables {
                        t.clear();
                    }
                    Ok(())
                })?;
                cli = CliSession::for_datapath(dp);
            }
            Command::Wait => {}
        }
    }
    let done = switch.settle().map_err(|message| StfError {
        file: stf.name.clone(),
        line: stf.commands.last().map_or(0, |(l, _)| *l),
        message,
    })?;
    for (p, frame) in done {
        received.entry(p).or_default().push(frame);
    }
    for port in watched {
        let want = expected.remove(&port).unwrap_or_default();
        let got = received.remove(&port).unwrap_or_default();
        for (i, (line, pattern)) in want.iter().enumerate() {
            let verdict = match (got.get(i), pattern) {
                (None, _) => Verdict {
                    line: *line,
                    passed: false,
                    text: format!(
                        "expect {port}: no packet came out of port {port} (it sent {})",
                        got.len()
                    ),
                },
                (Some(_), None) => Verdict {
                    line: *line,
                    passed: true,
                    text: format!("expect {port}: a packet"),
                },
                (Some(frame), Some(p)) => compare(port, p, frame, *line),
            };
            report.verdicts.push(verdict);
        }
        for frame in got.iter().skip(want.len()) {
            report.verdicts.push(Verdict {
                line: 0,
                passed: false,
                text: format!("port {port} sent a packet no `expect` asked for: {}", hex(frame)),
            });
        }
    }
    Ok(report)
}

/// The verdict on packet `frame` against `p`: the first nibble that differs, both shown.
fn compare(port: u16, p: &Pattern, frame: &[u8], line: usize) -> Verdict {
    let got: Vec<u8> = frame.iter().flat_map(|b| [b >> 4, b & 0xf]).collect();
    let want: String = p
        .nibbles
        .iter()
        .map(|n| n.map_or('*', |d| char::from_digit(u32::from(d), 16).unwrap_or('?')))
        .collect();
    let mut problem = None;
    if got.len() < p.nibbles.len() {
        problem = Some(format!("{} bytes came, {} expected", frame.len(), p.nibbles.len() / 2));
    } else if p.exact_length && got.len() > p.nibbles.len() {
        problem = Some(format!(
            "{} bytes came, {} expected (`$`)",
            frame.len(),
            p.nibbles.len() / 2
        ));
    }
    if problem.is_none()
        && let Some(i) = p.nibbles.iter().zip(&got).position(|(w, g)| w.is_some_and(|w| w != *g))
    {
        problem = Some(format!("byte {} differs", i / 2));
    }
    let mut text = format!("expect {port}");
    match &problem {
        None => {
            text.push_str(&format!(": {}", hex(frame)));
        }
        Some(why) => {
            text.push_str(&format!(
                ": {why}\n      expected {}\n      got      {}",
                spaced(&want),
                hex(frame)
            ));
        }
    }
    Verdict {
        line,
        passed: problem.is_none(),
        text,
    }
}

fn hex(b: &[u8]) -> String {
    let s: String = b.iter().map(|x| format!("{x:02x}")).collect();
    spaced(&s)
}

/// Hex digits in groups of two, for reading.
fn spaced(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    chars
        .chunks(2)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The action of table `t` an STF file names: its full name, or a name it ends with.
fn table_action(dp: &Datapath, t: usize, name: &str) -> Result<usize, String> {
    if let Ok(a) = dp.action_of(t, name) {
        return Ok(a);
    }
    let p = dp.program();
    let found: Vec<usize> = p.tables[t]
        .actions
        .iter()
        .map(|a| a.action)
        .filter(|&a| p.actions[a].name.ends_with(name))
        .collect();
    match found.as_slice() {
        [a] => Ok(*a),
        _ => dp.action_of(t, name),
    }
}

/// An action's arguments in parameter order, from `name:value` pairs.
fn action_values(dp: &Datapath, a: usize, args: &[(String, String)]) -> Result<Vec<String>, String> {
    let action = &dp.program().actions[a];
    let mut out = Vec::new();
    for p in &action.params {
        match args.iter().find(|(n, _)| *n == p.name) {
            Some((_, v)) => out.push(v.clone()),
            None => return Err(format!("action `{}` needs argument `{}`", action.name, p.name)),
        }
    }
    for (n, _) in args {
        if !action.params.iter().any(|p| p.name == *n) {
            return Err(format!("action `{}` has no parameter `{n}`", action.name));
        }
    }
    Ok(out)
}

/// The `table_add` command an STF `add` stands for, as p4c's BMv2 runner writes it: every key
/// in order (those not given match anything, or 0 for an exact key), ternary values with `*`
/// as masks, lpm values as prefixes of the digits written, a priority for tables that need one.
fn table_add(
    dp: &Datapath,
    table: &str,
    priority: Option<i64>,
    matches: &[(String, String)],
    action: &str,
    args: &[(String, String)],
) -> Result<String, String> {
    let t = dp.table_id(table)?;
    let def = &dp.program().tables[t];
    let mut fields: Vec<Option<String>> = vec![None; def.keys.len()];
    for (k, v) in matches {
        let i = key_index(def, k)?;
        fields[i] = Some(v.clone());
    }
    let mut words = Vec::new();
    for (k, given) in def.keys.iter().zip(fields) {
        words.push(match (k.kind, given) {
            (MatchKind::Exact, None) => "0".to_owned(),
            (MatchKind::Exact | MatchKind::Optional, Some(v)) => v,
            (MatchKind::Optional, None) => "*".to_owned(),
            (MatchKind::Ternary, None) => "0&&&0".to_owned(),
            (MatchKind::Ternary, Some(v)) => ternary(&v)?,
            (MatchKind::Lpm, None) => "0/0".to_owned(),
            (MatchKind::Lpm, Some(v)) => lpm(&v),
            (MatchKind::Range, None) => format!("0->{}", crate::ir::mask(k.width)),
            (MatchKind::Range, Some(v)) if v.contains("->") => v,
            (MatchKind::Range, Some(v)) => format!("{v}->{v}"),
        });
    }
    let a = table_action(dp, t, action)?;
    let values = action_values(dp, a, args)?;
    let mut text = format!(
        "table_add {} {} {} => {}",
        def.name,
        dp.program().actions[a].name,
        words.join(" "),
        values.join(" ")
    );
    if def.needs_priority() {
        // simple_switch_CLI's lowest number wins; an STF file's largest (bmv2stf.py maps them so).
        let p = 10_000 - priority.unwrap_or(0);
        text.push_str(&format!(" {p}"));
    }
    Ok(text)
}

/// The key an STF file names: its full name, `$valid$` forms of `isValid()`, `a$0` for
/// `a[0]`, or a suffix after a `.`.
fn key_index(def: &crate::ir::Table, name: &str) -> Result<usize, String> {
    let mut n = name.to_owned();
    // `extra$0.h` is `extra[0].h`.
    while let Some(i) = n
        .find('$')
        .filter(|&i| n[i + 1..].starts_with(|c: char| c.is_ascii_digit()))
    {
        let digits: String = n[i + 1..].chars().take_while(char::is_ascii_digit).collect();
        n = format!("{}[{digits}]{}", &n[..i], &n[i + 1 + digits.len()..]);
    }
    let valid_forms = |k: &str| -> Vec<String> {
        let base = k.strip_suffix(".isValid()").unwrap_or(k);
        vec![format!("{base}.$valid$"), format!("{base}.valid"), format!("{base}$")]
    };
    let names: Vec<&str> = def.keys.iter().map(|k| k.name.as_str()).collect();
    if let Some(i) = names.iter().position(|k| *k == n) {
        return Ok(i);
    }
    if let Some(i) = names.iter().position(|k| valid_forms(k).contains(&n)) {
        return Ok(i);
    }
    let suffix = format!(".{n}");
    let found: Vec<usize> = names
        .iter()
        .enumerate()
        .filter(|(_, k)| k.ends_with(&suffix) || valid_forms(k).iter().any(|f| f.ends_with(&suffix)))
        .map(|(i, _)| i)
        .collect();
    match found.as_slice() {
        [i] => Ok(*i),
        _ => Err(format!(
            "table `{}` has no key `{name}` (it has {})",
            def.name,
            names.join(", ")
        )),
    }
}

/// `0x**01` as `0x0001&&&0x00ff`.
fn ternary(v: &str) -> Result<String, String> {
    if v.contains("&&&") {
        return Ok(v.to_owned());
    }
    let (prefix, digits, per) = if let Some(d) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        ("0x", d, 'f')
    } else if let Some(d) = v.strip_prefix("0b").or_else(|| v.strip_prefix("0B")) {
        ("0b", d, '1')
    } else {
        // A decimal value matches exactly.
        return Ok(format!("{v}&&&{}", u128::MAX));
    };
    let value: String = digits.chars().map(|c| if c == '*' { '0' } else { c }).collect();
    let m: String = digits.chars().map(|c| if c == '*' { '0' } else { per }).collect();
    Ok(format!("{prefix}{value}&&&{prefix}{m}"))
}

/// `0x0a01****` as `0x0a010000/16`; a value without `*` or `/` is a full prefix of its digits.
fn lpm(v: &str) -> String {
    if v.contains('/') {
        return v.to_owned();
    }
    let (prefix, digits, bits) = if let Some(d) = v.strip_prefix("0x") {
        ("0x", d.to_owned(), 4)
    } else if let Some(d) = v.strip_prefix("0b") {
        ("0b", d.to_owned(), 1)
    } else {
        match v.parse::<u128>() {
            Ok(n) => ("0x", format!("{n:x}"), 4),
            Err(_) => return v.to_owned(),
        }
    };
    let len = digits.chars().filter(|c| *c != '*').count() * bits;
    let value: String = digits.chars().map(|c| if c == '*' { '0' } else { c }).collect();
    format!("{prefix}{value}/{len}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stf_lines_are_read_as_p4c_writes_them() {
        let f = parse(
            "t.stf",
            "add test1 503 data.f1:0x****0202 ingress.setb1(val:7, port:3)\n\
             # a comment\n\
             setdefault t act()\n\
             packet 0 0102 03\n\
             expect 1 01** 03 $\n\
             mc_mgrp_create 1\n",
        )
        .unwrap();
        assert_eq!(f.commands.len(), 5);
        assert_eq!(
            f.commands[0].1,
            Command::Add {
                table: "test1".into(),
                priority: Some(503),
                matches: vec![("data.f1".into(), "0x****0202".into())],
                action: "ingress.setb1".into(),
                args: vec![("val".into(), "7".into()), ("port".into(), "3".into())],
            }
        );
        assert_eq!(f.commands[2].1, Command::Packet(0, vec![1, 2, 3]));
        let Command::Expect(1, Some(p)) = &f.commands[3].1 else {
            panic!()
        };
        assert!(p.exact_length);
        assert!(compare(1, p, &[1, 0xff, 3], 5).passed);
        assert!(!compare(1, p, &[1, 0xff, 3, 4], 5).passed, "`$`: no byte more");
        assert!(!compare(1, p, &[2, 0xff, 3], 5).passed);
        assert!(parse("t.stf", "expect x 00\n").is_err());
    }

    #[test]
    fn ternary_and_lpm_values_become_masks_and_prefixes_of_the_digits_written() {
        assert_eq!(ternary("0x****0101").unwrap(), "0x00000101&&&0x0000ffff");
        assert_eq!(lpm("0x0a01****"), "0x0a010000/16");
        assert_eq!(lpm("0x0a010065"), "0x0a010065/32");
    }
}
