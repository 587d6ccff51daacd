//! A device's P4Runtime ids and the program's indices, both ways.

use std::collections::HashMap;

use intlab_p4::ir;

use crate::p4info::ids::{Kind, SymbolTable};

/// Ids of the program a device runs.
#[derive(Debug, Default)]
pub struct Ids {
    tables: HashMap<u32, usize>,
    table_ids: Vec<u32>,
    actions: HashMap<u32, String>,
    action_ids: HashMap<String, u32>,
    registers: HashMap<u32, usize>,
    counters: HashMap<u32, usize>,
    digests: HashMap<u32, usize>,
    digest_ids: Vec<u32>,
}

impl Ids {
    /// From the symbol table the P4Info was made with.
    pub fn new(program: &ir::Program, s: &SymbolTable) -> Ids {
        let mut ids = Ids::default();
        for (i, t) in program.tables.iter().enumerate() {
            let id = s.id(Kind::Table, &t.name);
            ids.tables.insert(id, i);
            ids.table_ids.push(id);
        }
        let names = program
            .actions
            .iter()
            .map(|a| a.name.as_str())
            .chain(program.called_actions.iter().map(|a| a.name.as_str()));
        for name in names {
            let id = s.id(Kind::Action, name);
            ids.actions.insert(id, name.to_owned());
            ids.action_ids.insert(name.to_owned(), id);
        }
        for (i, r) in program.registers.iter().enumerate() {
            ids.registers.insert(s.id(Kind::Register, &r.name), i);
        }
        for d in &program.digests {
            let id = s.id(Kind::Digest, &d.name);
            ids.digests.insert(id, ids.digest_ids.len());
            ids.digest_ids.push(id);
        }
        for (i, c) in program.counters.iter().enumerate() {
            let kind = if c.table.is_some() {
                Kind::DirectCounter
            } else {
                Kind::Counter
            };
            ids.counters.insert(s.id(kind, &c.name), i);
        }
        ids
    }

    /// The table with P4Runtime id `id`.
    pub fn table(&self, id: u32) -> Option<usize> {
        self.tables.get(&id).copied()
    }

    /// Table `t`'s id.
    pub fn table_id(&self, t: usize) -> u32 {
        self.table_ids[t]
    }

    /// Every table, in the program's order.
    pub fn tables(&self) -> std::ops::Range<usize> {
        0..self.table_ids.len()
    }

    /// The name of the action with id `id`.
    pub fn action_name(&self, id: u32) -> Option<&str> {
        self.actions.get(&id).map(String::as_str)
    }

    /// The id of action `name`.
    pub fn action_id(&self, name: &str) -> u32 {
        self.action_ids.get(name).copied().unwrap_or(0)
    }

    /// The register with id `id`.
    pub fn register(&self, id: u32) -> Option<usize> {
        self.registers.get(&id).copied()
    }

    /// The digest with id `id`.
    pub fn digest(&self, id: u32) -> Option<usize> {
        self.digests.get(&id).copied()
    }

    /// Digest `d`'s id.
    pub fn digest_id(&self, d: usize) -> u32 {
        self.digest_ids[d]
    }

    /// The counter (indexed or direct) with id `id`.
    pub fn counter(&self, id: u32) -> Option<usize> {
        self.counters.get(&id).copied()
    }
}
