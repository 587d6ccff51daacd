//! What the control plane sees of a lowered program, for `intlab p4 check`: the pipeline's
//! blocks, the parser's states, every table with its keys, actions and default, and every
//! action with its control-plane parameters, named as P4Info names them.

use std::fmt;

use crate::ir::{self, BlockBody};

/// A program's control-plane view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgramInfo {
    /// The blocks `main` names, in the package's order.
    pub pipeline: Vec<String>,
    /// The parser's states in order.
    pub states: Vec<String>,
    /// Every table.
    pub tables: Vec<TableInfo>,
    /// Every action a table runs, once per name.
    pub actions: Vec<ActionInfo>,
}

/// A table as the control plane names it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    /// `Control.table`, or the `@name`.
    pub name: String,
    /// Keys in order.
    pub keys: Vec<KeyInfo>,
    /// Names of the actions it may run.
    pub actions: Vec<String>,
    /// The default action, and whether it is `const`.
    pub default_action: Option<(String, bool)>,
    /// `size`.
    pub size: usize,
    /// Entries given in the program.
    pub entries: usize,
}

/// A table key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyInfo {
    /// The expression as written (`hdr.ipv4.dstAddr`), or the `@name`.
    pub name: String,
    /// Match kind.
    pub match_kind: String,
    /// Width in bits.
    pub bits: u32,
}

/// An action as the control plane names it.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionInfo {
    /// `Control.action`, the `@name`, or the plain name of a top-level action.
    pub name: String,
    /// Parameters the control plane supplies: name and width.
    pub params: Vec<(String, u32)>,
}

impl ProgramInfo {
    /// The view of `p`.
    pub fn of(p: &ir::Program) -> ProgramInfo {
        let states = match p.block(ir::BlockKind::Parser).map(|b| &b.body) {
            Some(BlockBody::Parser(states)) => states.iter().map(|s| s.name.clone()).collect(),
            _ => Vec::new(),
        };
        let tables = p
            .tables
            .iter()
            .map(|t| {
                let (d, args) = &t.default_action;
                let args: Vec<String> = args.iter().map(u128::to_string).collect();
                TableInfo {
                    name: t.name.clone(),
                    keys: t
                        .keys
                        .iter()
                        .map(|k| KeyInfo {
                            name: k.name.clone(),
                            match_kind: k.kind.name().to_owned(),
                            bits: u32::from(k.width),
                        })
                        .collect(),
                    actions: t.actions.iter().map(|a| p.actions[a.action].name.clone()).collect(),
                    default_action: Some((format!("{}({})", p.actions[*d].name, args.join(", ")), t.const_default)),
                    size: t.size,
                    entries: t.entries.as_ref().map_or(0, |e| e.0.len()),
                }
            })
            .collect();
        let mut actions: Vec<ActionInfo> = Vec::new();
        for a in &p.actions {
            if actions.iter().any(|x| x.name == a.name) {
                continue;
            }
            actions.push(ActionInfo {
                name: a.name.clone(),
                params: a.params.iter().map(|x| (x.name.clone(), u32::from(x.width))).collect(),
            });
        }
        ProgramInfo {
            pipeline: p.blocks.iter().map(|b| b.name.clone()).collect(),
            states,
            tables,
            actions,
        }
    }
}

impl fmt::Display for ProgramInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "pipeline: {}", self.pipeline.join(", "))?;
        writeln!(f, "parser states: {}", self.states.join(", "))?;
        for t in &self.tables {
            writeln!(f, "table {} (size {})", t.name, t.size)?;
            for k in &t.keys {
                writeln!(f, "    key {}: {} ({} bits)", k.name, k.match_kind, k.bits)?;
            }
            for a in &t.actions {
                writeln!(f, "    action {a}")?;
            }
            if let Some((d, c)) = &t.default_action {
                writeln!(f, "    default {}{d}", if *c { "const " } else { "" })?;
            }
            if t.entries > 0 {
                writeln!(f, "    entries: {}", t.entries)?;
            }
        }
        for a in &self.actions {
            let params: Vec<String> = a.params.iter().map(|(n, w)| format!("{n}: bit<{w}>")).collect();
            writeln!(f, "action {}({})", a.name, params.join(", "))?;
        }
        Ok(())
    }
}
