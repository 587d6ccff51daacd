//! P4Runtime ids and aliases as p4c gives them, so a controller written against p4c's P4Info
//! finds the same objects here: an id is the object type's 8-bit prefix over the low 24 bits
//! of a Jenkins one-at-a-time hash of the object's name, taken in sorted name order with
//! linear probing past ids already used; an `@id` annotation wins. An alias is the shortest
//! dotted suffix of the name that no other object's name shares.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The 8-bit id prefix of each kind of object (P4Info's `ID.Prefix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Actions.
    Action = 0x01,
    /// Tables.
    Table = 0x02,
    /// Parser value sets.
    ValueSet = 0x03,
    /// `@controller_header` headers.
    ControllerHeader = 0x04,
    /// Action profiles and selectors.
    ActionProfile = 0x11,
    /// Indexed counters.
    Counter = 0x12,
    /// Direct counters.
    DirectCounter = 0x13,
    /// Indexed meters.
    Meter = 0x14,
    /// Direct meters.
    DirectMeter = 0x15,
    /// Registers.
    Register = 0x16,
    /// Digests.
    Digest = 0x17,
}

/// An `@id` that cannot be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Its top byte names another kind of object.
    #[error("{name}: @id {id:#x} has the wrong 8-bit prefix for a {kind:?}")]
    WrongPrefix {
        /// The object.
        name: String,
        /// The id asked for.
        id: u32,
        /// The object's kind.
        kind: Kind,
    },
    /// Another object has it already.
    #[error("{name}: @id {id:#x} is given to another object too")]
    Taken {
        /// The object.
        name: String,
        /// The id asked for.
        id: u32,
    },
    /// Every id of the kind is taken.
    #[error("no id left for {0}")]
    Full(String),
}

/// Every control-plane object's name, then its id and alias.
#[derive(Debug, Default)]
pub struct SymbolTable {
    /// Per kind: name and the `@id` it asked for, if any.
    names: BTreeMap<Kind, BTreeMap<String, Option<u32>>>,
    ids: HashMap<(Kind, String), u32>,
    /// Per name, read right to left by component: how many names end that way.
    suffixes: HashMap<Vec<String>, usize>,
    seen: BTreeSet<String>,
}

impl SymbolTable {
    /// Adds an object (a second add of the same kind and name is the same object).
    pub fn add(&mut self, kind: Kind, name: &str, id: Option<u32>) {
        let of_kind = self.names.entry(kind).or_default();
        if of_kind.contains_key(name) {
            return;
        }
        of_kind.insert(name.to_owned(), id);
        // Aliases are unique across kinds: p4c keeps one suffix set for every object.
        if self.seen.insert(name.to_owned()) {
            let mut key = Vec::new();
            for part in name.rsplit('.') {
                key.push(part.to_owned());
                *self.suffixes.entry(key.clone()).or_default() += 1;
            }
        }
    }

    /// Gives every object its id: `@id`s first, then hashes in name order.
    pub fn assign(&mut self) -> Result<(), IdError> {
        let mut used = BTreeSet::new();
        for (&kind, names) in &self.names {
            let prefix = (kind as u32) << 24;
            for (name, id) in names {
                let Some(id) = *id else { continue };
                if id & 0xff00_0000 != 0 && id & 0xff00_0000 != prefix {
                    return Err(IdError::WrongPrefix {
                        name: name.clone(),
                        id,
                        kind,
                    });
                }
                let id = id | prefix;
                if !used.insert(id) {
                    return Err(IdError::Taken { name: name.clone(), id });
                }
                self.ids.insert((kind, name.clone()), id);
            }
        }
        for (&kind, names) in &self.names {
            let prefix = (kind as u32) << 24;
            for (name, id) in names {
                if id.is_some() {
                    continue;
                }
                let start = one_at_a_time(name.as_bytes());
                let mut h = start;
                let id = loop {
                    let id = prefix | (h & 0x00ff_ffff);
                    if !used.contains(&id) {
                        break id;
                    }
                    h = h.wrapping_add(1);
                    if h == start {
                        return Err(IdError::Full(name.clone()));
                    }
                };
                used.insert(id);
                self.ids.insert((kind, name.clone()), id);
            }
        }
        Ok(())
    }

    /// The id of an added object (0 before [`SymbolTable::assign`] or for an unknown one).
    pub fn id(&self, kind: Kind, name: &str) -> u32 {
        self.ids.get(&(kind, name.to_owned())).copied().unwrap_or(0)
    }

    /// The shortest dotted suffix of `name` that no other object's name ends with.
    pub fn alias(&self, name: &str) -> String {
        let parts: Vec<&str> = name.split('.').collect();
        let mut key = Vec::new();
        let mut needed = 0;
        for part in parts.iter().rev() {
            key.push((*part).to_owned());
            needed += 1;
            if self.suffixes.get(&key).copied().unwrap_or(0) < 2 {
                break;
            }
        }
        parts[parts.len() - needed..].join(".")
    }
}

/// Bob Jenkins' one-at-a-time hash, as p4c hashes a name for its id.
pub fn one_at_a_time(key: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in key {
        h = h.wrapping_add(u32::from(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_aliases_are_p4cs() {
        // From p4c's expected P4Info of basic_routing-bmv2.p4.
        let mut t = SymbolTable::default();
        t.add(Kind::Table, "ingress.bd", None);
        t.add(Kind::Table, "ingress.ipv4_fib", None);
        t.add(Kind::Action, "NoAction", None);
        t.assign().expect("ids");
        assert_eq!(t.id(Kind::Table, "ingress.bd"), 48392551);
        assert_eq!(t.id(Kind::Table, "ingress.ipv4_fib"), 41084491);
        assert_eq!(t.id(Kind::Action, "NoAction"), 21257015);
        assert_eq!(t.alias("ingress.bd"), "bd");
    }

    #[test]
    fn an_alias_grows_until_it_is_unique_and_ids_probe_past_collisions() {
        let mut t = SymbolTable::default();
        t.add(Kind::Table, "a.x.t", None);
        t.add(Kind::Table, "b.x.t", None);
        t.add(Kind::Action, "c.u", Some(7));
        t.assign().expect("ids");
        assert_eq!(t.alias("a.x.t"), "a.x.t");
        assert_eq!(t.alias("c.u"), "u");
        assert_eq!(t.id(Kind::Action, "c.u"), 0x0100_0007);
        // "u"'s hash is taken by an @id: it probes to the next id.
        let mut probed = SymbolTable::default();
        let taken = one_at_a_time(b"u") & 0x00ff_ffff;
        probed.add(Kind::Table, "t", Some(taken));
        probed.add(Kind::Table, "u", None);
        probed.assign().expect("ids");
        assert_eq!(probed.id(Kind::Table, "t"), 0x0200_0000 | taken);
        assert_eq!(probed.id(Kind::Table, "u"), 0x0200_0000 | ((taken + 1) & 0x00ff_ffff));
        let mut clash = SymbolTable::default();
        clash.add(Kind::Table, "t", Some(0x0100_0001));
        assert!(matches!(clash.assign(), Err(IdError::WrongPrefix { .. })));
    }
}
