//! A device's P4Runtime ids and the program's indices, both ways.

use std::collections::HashMap;

use intlab_p4::ir;

use crate::p4info::ids::{Kind, SymbolTable};

/// One kind of object: each one's id by its index in the program, and back.
#[derive(Debug, Default)]
struct Numbered {
    ids: Vec<u32>,
    by_id: HashMap<u32, usize>,
}

impl Numbered {
    /// The ids of objects in program order.
    fn new(ids: Vec<u32>) -> Numbered {
        let by_id = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        Numbered { ids, by_id }
    }

    fn index(&self, id: u32) -> Option<usize> {
        self.by_id.get(&id).copied()
    }
}

/// Ids of the program a device runs.
#[derive(Debug, Default)]
pub struct Ids {
    tables: Numbered,
    actions: HashMap<u32, String>,
    action_ids: HashMap<String, u32>,
    registers: Numbered,
    counters: Numbered,
    meters: Numbered,
    value_sets: Numbered,
    profiles: Numbered,
    digests: Numbered,
}

impl Ids {
    /// From the symbol table the P4Info was made with.
    pub fn new(program: &ir::Program, s: &SymbolTable) -> Ids {
        let mut ids = Ids {
            tables: Numbered::new(program.tables.iter().map(|t| s.id(Kind::Table, &t.name)).collect()),
            registers: Numbered::new(
                program
                    .registers
                    .iter()
                    .map(|r| s.id(Kind::Register, &r.name))
                    .collect(),
            ),
            counters: Numbered::new(
                program
                    .counters
                    .iter()
                    .map(|c| {
                        let kind = if c.table.is_some() {
                            Kind::DirectCounter
                        } else {
                            Kind::Counter
                        };
                        s.id(kind, &c.name)
                    })
                    .collect(),
            ),
            meters: Numbered::new(
                program
                    .meters
                    .iter()
                    .map(|m| {
                        let kind = if m.table.is_some() {
                            Kind::DirectMeter
                        } else {
                            Kind::Meter
                        };
                        s.id(kind, &m.name)
                    })
                    .collect(),
            ),
            value_sets: Numbered::new(
                program
                    .value_sets
                    .iter()
                    .map(|v| s.id(Kind::ValueSet, &v.name))
                    .collect(),
            ),
            profiles: Numbered::new(
                program
                    .profiles
                    .iter()
                    .map(|p| s.id(Kind::ActionProfile, &p.name))
                    .collect(),
            ),
            digests: Numbered::new(program.digests.iter().map(|d| s.id(Kind::Digest, &d.name)).collect()),
            ..Ids::default()
        };
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
        ids
    }

    /// The table with P4Runtime id `id`.
    pub fn table(&self, id: u32) -> Option<usize> {
        self.tables.index(id)
    }

    /// Table `t`'s id.
    pub fn table_id(&self, t: usize) -> u32 {
        self.tables.ids[t]
    }

    /// Every table, in the program's order.
    pub fn tables(&self) -> std::ops::Range<usize> {
        0..self.tables.ids.len()
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
        self.registers.index(id)
    }

    /// Register `r`'s id.
    pub fn register_id(&self, r: usize) -> u32 {
        self.registers.ids[r]
    }

    /// The counter (indexed or direct) with id `id`.
    pub fn counter(&self, id: u32) -> Option<usize> {
        self.counters.index(id)
    }

    /// Counter `c`'s id.
    pub fn counter_id(&self, c: usize) -> u32 {
        self.counters.ids[c]
    }

    /// The meter (indexed or direct) with id `id`.
    pub fn meter(&self, id: u32) -> Option<usize> {
        self.meters.index(id)
    }

    /// Meter `m`'s id.
    pub fn meter_id(&self, m: usize) -> u32 {
        self.meters.ids[m]
    }

    /// The value set with id `id`.
    pub fn value_set(&self, id: u32) -> Option<usize> {
        self.value_sets.index(id)
    }

    /// Value set `v`'s id.
    pub fn value_set_id(&self, v: usize) -> u32 {
        self.value_sets.ids[v]
    }

    /// The action profile (or selector) with id `id`.
    pub fn profile(&self, id: u32) -> Option<usize> {
        self.profiles.index(id)
    }

    /// Profile `p`'s id.
    pub fn profile_id(&self, p: usize) -> u32 {
        self.profiles.ids[p]
    }

    /// The digest with id `id`.
    pub fn digest(&self, id: u32) -> Option<usize> {
        self.digests.index(id)
    }

    /// Digest `d`'s id.
    pub fn digest_id(&self, d: usize) -> u32 {
        self.digests.ids[d]
    }
}
