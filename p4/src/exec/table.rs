//! A table's entries, kept in the structure its key kinds allow: a hash map for all-exact keys,
//! one hash map per prefix length (longest first) for one lpm key among exact ones, and a scan
//! in priority order for ternary, range and optional keys.
//!
//! The control plane is kept in copies (see `Datapath::edit`): an edit changes a copy packets do
//! not read, after bringing it up to date with the handles the edits since touched
//! ([`TableState::follow`]), so that a write costs the same whatever the table's size.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::key_map::KeyMap;
use super::meter::MeterCell;
use crate::ir::{self, Entry, KeySet, MatchKind, mask};

/// Packets and bytes of an entry (its direct counter).
#[derive(Debug, Default)]
pub struct EntryCounter {
    /// Packets.
    pub packets: AtomicU64,
    /// Bytes.
    pub bytes: AtomicU64,
}

/// What an entry of a table with an action profile runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Its own action (a table without a profile).
    Action,
    /// A member of the table's profile.
    Member(u32),
    /// A group of the table's selector (one member chosen by the selector's hash).
    Group(u32),
}

/// Why [`TableState::insert`] refused an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// It does not fit the table's keys (why).
    #[error("{0}")]
    Misfit(String),
    /// An entry with its key (and priority, in a scanned table) exists.
    #[error("an entry with this key exists")]
    Taken,
    /// The table holds as many entries as its size.
    #[error("the table is full ({0} entries)")]
    Full(usize),
}

/// What packets change in an entry. Apart from the entry so that a modify, which copies the
/// entry, keeps them; together so that an insert allocates once for the three, not three
/// times (in a table of a million entries, each allocation and free is a cache miss).
#[derive(Debug, Default)]
pub struct EntryState {
    /// Its direct counter.
    pub counter: EntryCounter,
    /// Its direct meter.
    pub meter: MeterCell,
    /// When it was last hit (ns of the lab clock), for idle timeouts.
    pub last_hit: AtomicU64,
}

/// An entry with its handle, counter, meter and age.
#[derive(Debug, Clone)]
pub struct StoredEntry {
    /// The handle the control plane knows it by.
    pub handle: u32,
    /// The entry.
    pub entry: Entry,
    /// What it runs when the table has a profile.
    pub via: Via,
    /// What packets change in it: its counter, meter and age.
    pub state: Arc<EntryState>,
    /// How long it may go unhit before the control plane is told (ns; 0: it never ages).
    pub idle_timeout_ns: u64,
}

#[derive(Debug, Clone)]
enum Index {
    Exact(KeyMap),
    /// The lpm key's position, then (prefix length, map) longest first.
    Lpm(usize, Vec<(u32, KeyMap)>),
    /// Entry handles, highest priority first (ternary, range and optional keys, looked up by
    /// a scan; edits cost O(n) here).
    Scan(Vec<usize>),
}

impl Index {
    /// An empty index of the same kind.
    fn emptied(&self) -> Index {
        match self {
            Index::Exact(map) => Index::Exact(map.emptied()),
            Index::Lpm(p, _) => Index::Lpm(*p, Vec::new()),
            Index::Scan(_) => Index::Scan(Vec::new()),
        }
    }

    /// The map that holds entries with `matches`: the exact map, or the lpm group of their
    /// prefix length (None for a scan, or a length no entry has).
    fn map(&self, matches: &[KeySet]) -> Option<&KeyMap> {
        match self {
            Index::Exact(map) => Some(map),
            Index::Lpm(p, groups) => {
                let len = prefix_len(matches.get(*p)?);
                groups.iter().find(|g| g.0 == len).map(|g| &g.1)
            }
            Index::Scan(_) => None,
        }
    }

    /// [`Index::map`] to change, an lpm group made (in its place, longest first, for keys of
    /// `widths`) when none has the length.
    fn map_mut(&mut self, matches: &[KeySet], widths: &[u16]) -> Option<&mut KeyMap> {
        match self {
            Index::Exact(map) => Some(map),
            Index::Lpm(p, groups) => {
                let len = prefix_len(matches.get(*p)?);
                let g = match groups.binary_search_by_key(&std::cmp::Reverse(len), |g| std::cmp::Reverse(g.0)) {
                    Ok(g) => g,
                    Err(g) => {
                        groups.insert(g, (len, KeyMap::new(widths)));
                        g
                    }
                };
                Some(&mut groups[g].1)
            }
            Index::Scan(_) => None,
        }
    }
}

/// The entries and default action of one table. An insert, modify or delete in an exact or lpm
/// table costs O(1) whatever the table's size (in a scanned table, O(n)).
///
/// An entry's handle is its slot in `entries`, so that nothing moves when one is deleted and
/// two copies of a table agree slot by slot: bringing one up to date with the other is copying
/// the slots the other's last edit touched.
#[derive(Debug, Clone)]
pub struct TableState {
    kinds: Vec<(MatchKind, u16)>,
    /// The keys' widths, for the index.
    widths: Vec<u16>,
    /// Entries by handle (None: a free handle), shared with the other copy of the table.
    entries: Vec<Option<Arc<StoredEntry>>>,
    /// How many slots of `entries` hold one.
    count: usize,
    /// The action run on a miss, and its arguments.
    pub default: (usize, Vec<u128>),
    index: Index,
    size: usize,
    /// Handles below `entries.len()` freed by deletions (reused lowest first, as BMv2 reuses
    /// them).
    free: BTreeSet<u32>,
    /// What the edit that made this copy changed, for the other copy to follow.
    journal: Journal,
}

/// The slots one or more edits of a table changed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Journal {
    /// Handles whose slot changed (in any order, repeats allowed).
    touched: Vec<u32>,
    /// The table was emptied: another copy takes it whole.
    whole: bool,
}

impl Journal {
    /// Adds what `later` changed.
    pub(crate) fn merge(&mut self, later: &Journal) {
        self.whole |= later.whole;
        if !self.whole {
            self.touched.extend_from_slice(&later.touched);
        }
    }

    /// How many slots it names (more than a table holds: copying the table whole is cheaper).
    pub(crate) fn len(&self) -> usize {
        self.touched.len()
    }
}

impl TableState {
    /// An empty table with its program's default action (and its `const entries`).
    pub fn new(t: &ir::Table) -> TableState {
        let kinds: Vec<(MatchKind, u16)> = t.keys.iter().map(|k| (k.kind, k.width)).collect();
        let lpm = kinds.iter().position(|k| k.0 == MatchKind::Lpm);
        let widths: Vec<u16> = kinds.iter().map(|k| k.1).collect();
        let all_exact_but_lpm = kinds.iter().all(|k| matches!(k.0, MatchKind::Exact | MatchKind::Lpm));
        let index = match lpm {
            None if all_exact_but_lpm => Index::Exact(KeyMap::new(&widths)),
            Some(p) if all_exact_but_lpm => Index::Lpm(p, Vec::new()),
            _ => Index::Scan(Vec::new()),
        };
        let mut s = TableState {
            kinds,
            widths,
            entries: Vec::new(),
            count: 0,
            default: t.default_action.clone(),
            index,
            size: t.size.max(t.entries.as_ref().map_or(0, |e| e.0.len())),
            free: BTreeSet::new(),
            journal: Journal::default(),
        };
        for e in t.entries.iter().flat_map(|e| &e.0) {
            // Entries in the source were checked against the keys at load.
            if let Err(m) = s.insert(e.clone(), Via::Action) {
                tracing::warn!(table = %t.name, "entry refused: {m}");
            }
        }
        s
    }

    /// The match kinds and widths of its keys.
    pub fn kinds(&self) -> &[(MatchKind, u16)] {
        &self.kinds
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries = Vec::new();
        self.count = 0;
        self.free = BTreeSet::new();
        self.index = self.index.emptied();
        self.journal.whole = true;
    }

    /// Starts an edit of this copy: its journal records the edit from here.
    pub(crate) fn begin_edit(&mut self) {
        self.journal = Journal::default();
    }

    /// The slots this copy's last edit changed.
    pub(crate) fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Makes this copy what `live` is, where the two differ in no slot but `journal`'s (the
    /// edits `live` had since this copy was like it, or this copy's own unfinished edit).
    pub(crate) fn follow(&mut self, live: &TableState, journal: &Journal) {
        self.default.clone_from(&live.default);
        if journal.whole || journal.len() > live.size.max(live.entries.len()) {
            let own = std::mem::take(&mut self.journal);
            self.clone_from(live);
            self.journal = own;
            return;
        }
        let mut touched = journal.touched.clone();
        touched.sort_unstable();
        touched.dedup();
        let slot = |t: &TableState, h: u32| t.entries.get(h as usize).cloned().flatten();
        let same = |h: u32| match (self.stored(h as usize), live.stored(h as usize)) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        // Keys leave the index before any arrives: within one edit a key may move from one
        // handle to another.
        let changed: Vec<u32> = touched.iter().copied().filter(|&h| !same(h)).collect();
        let scan = matches!(self.index, Index::Scan(_));
        for &h in &changed {
            if let Some(gone) = slot(self, h) {
                if !scan {
                    self.unindex(&gone, h as usize);
                }
                self.entries[h as usize] = None;
                self.count -= 1;
            }
        }
        for &h in &changed {
            if let Some(came) = slot(live, h) {
                let at = h as usize;
                if self.entries.len() <= at {
                    self.entries.resize(at + 1, None);
                }
                if !scan {
                    // Unique in `live`, so free here once the slots that held it were emptied.
                    let taken = self.index_at(&came.entry, at).is_err();
                    debug_assert!(!taken, "a key both copies hold at different handles");
                }
                self.entries[at] = Some(came);
                self.count += 1;
            }
        }
        self.entries.resize(live.entries.len(), None);
        for &h in &touched {
            if live.free.contains(&h) {
                self.free.insert(h);
            } else {
                self.free.remove(&h);
            }
        }
        // A delete at the end gives back the free handles before it; a scanned table's order
        // is copied whole (its edits cost O(n) anyway).
        self.free
            .split_off(&u32::try_from(self.entries.len()).unwrap_or(u32::MAX));
        if let (Index::Scan(mine), Index::Scan(theirs)) = (&mut self.index, &live.index) {
            mine.clone_from(theirs);
        }
        debug_assert_eq!(self.count, live.count);
    }

    /// Takes entry `gone`, at position `at`, out of the index.
    fn unindex(&mut self, gone: &StoredEntry, at: usize) {
        if let Index::Scan(order) = &mut self.index {
            order.retain(|&i| i != at);
            return;
        }
        if let Some(map) = self.index.map_mut(&gone.entry.matches, &self.widths) {
            map.remove(&self.widths, exact_key(&gone.entry.matches));
        }
        if let Index::Lpm(_, groups) = &mut self.index {
            groups.retain(|g| !g.1.is_empty());
        }
    }

    /// The position of the entry with handle `h` (the place [`TableState::modify`] and
    /// [`TableState::delete`] take).
    pub fn position(&self, h: u32) -> Option<usize> {
        let at = h as usize;
        self.entries.get(at)?.as_ref().map(|_| at)
    }

    /// The entry with handle `h`.
    pub fn get(&self, h: u32) -> Option<&StoredEntry> {
        self.entries.get(h as usize)?.as_deref()
    }

    /// The entry at position `at`, shared.
    pub fn stored(&self, at: usize) -> Option<&Arc<StoredEntry>> {
        self.entries.get(at)?.as_ref()
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The most entries it holds.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Changes what entry `at` runs, keeping its key, counter and meter; false if there is
    /// none.
    pub fn modify(&mut self, at: usize, action: usize, args: Vec<u128>, via: Via) -> bool {
        self.journal.touched.push(u32::try_from(at).unwrap_or(u32::MAX));
        match self.entries.get_mut(at).and_then(Option::as_mut).map(Arc::make_mut) {
            Some(e) => {
                e.entry.action = action;
                e.entry.args = args;
                e.via = via;
                true
            }
            None => false,
        }
    }

    /// Sets how long entry `at` may go unhit (ns, 0: never ages), counting from `now_ns`; false
    /// if there is none.
    pub fn set_idle_timeout(&mut self, at: usize, timeout_ns: u64, now_ns: u64) -> bool {
        self.journal.touched.push(u32::try_from(at).unwrap_or(u32::MAX));
        match self.entries.get_mut(at).and_then(Option::as_mut).map(Arc::make_mut) {
            Some(e) => {
                e.idle_timeout_ns = timeout_ns;
                e.state.last_hit.store(now_ns, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// The entries, by handle.
    pub fn entries(&self) -> impl Iterator<Item = &Arc<StoredEntry>> + '_ {
        self.entries.iter().flatten()
    }

    /// Adds an entry; returns its handle. Refused if it does not fit the keys, repeats a key or
    /// the table is full: a caller that would look the key up first to tell "exists" need not,
    /// which saves a lookup in a table too large for the cache.
    pub fn insert(&mut self, e: Entry, via: Via) -> Result<u32, InsertError> {
        self.check(&e)?;
        let reused = self.free.first().copied();
        let h = reused.unwrap_or_else(|| u32::try_from(self.entries.len()).unwrap_or(u32::MAX));
        self.index_at(&e, h as usize)?;
        let stored = Some(Arc::new(StoredEntry {
            handle: h,
            entry: e,
            via,
            state: Arc::default(),
            idle_timeout_ns: 0,
        }));
        if reused.is_some() {
            self.free.remove(&h);
            self.entries[h as usize] = stored;
        } else {
            self.entries.push(stored);
        }
        self.count += 1;
        self.journal.touched.push(h);
        Ok(h)
    }

    /// Refuses an entry that does not fit the keys, or a full table.
    fn check(&self, e: &Entry) -> Result<(), InsertError> {
        if e.matches.len() != self.kinds.len() {
            return Err(InsertError::Misfit(format!(
                "{} key values for {} keys",
                e.matches.len(),
                self.kinds.len()
            )));
        }
        for (i, (m, (kind, w))) in e.matches.iter().zip(&self.kinds).enumerate() {
            let fits = |v: u128| v & !mask(*w) == 0;
            let ok = match (kind, m) {
                (MatchKind::Exact, KeySet::Value(v)) => fits(*v),
                (MatchKind::Lpm, KeySet::Mask(v, m)) => fits(*v) && fits(*m) && is_prefix(*m, *w),
                (MatchKind::Ternary, KeySet::Mask(v, m)) => fits(*v) && fits(*m),
                (MatchKind::Range, KeySet::Range(lo, hi)) => fits(*lo) && fits(*hi) && lo <= hi,
                (MatchKind::Optional, KeySet::Value(v)) => fits(*v),
                (MatchKind::Optional | MatchKind::Ternary | MatchKind::Range | MatchKind::Lpm, KeySet::Any) => true,
                _ => false,
            };
            if !ok {
                return Err(InsertError::Misfit(format!(
                    "key {i} is {kind:?} of {w} bits; {m:?} does not fit it"
                )));
            }
        }
        if self.count >= self.size {
            return Err(InsertError::Full(self.size));
        }
        Ok(())
    }

    /// Indexes entry `e` at position `at`; refused if its key (and priority, where lookups
    /// scan) is taken.
    fn index_at(&mut self, e: &Entry, at: usize) -> Result<(), InsertError> {
        if let Index::Scan(order) = &mut self.index {
            if self
                .entries
                .iter()
                .flatten()
                .any(|s| s.entry.matches == e.matches && s.entry.priority == e.priority)
            {
                return Err(InsertError::Taken);
            }
            let entries = &self.entries;
            let pos = order.partition_point(|&i| entries[i].as_ref().is_some_and(|s| s.entry.priority >= e.priority));
            order.insert(pos, at);
            return Ok(());
        }
        let map = self
            .index
            .map_mut(&e.matches, &self.widths)
            .expect("exact and lpm tables have maps");
        if map.insert_new(&self.widths, exact_key(&e.matches), at) {
            Ok(())
        } else {
            Err(InsertError::Taken)
        }
    }

    /// Removes entry `at` (the others keep their handles, places and counters); false if there
    /// is none.
    pub fn delete(&mut self, at: usize) -> bool {
        let Some(gone) = self.entries.get(at).cloned().flatten() else {
            return false;
        };
        self.unindex(&gone, at);
        self.count -= 1;
        self.journal.touched.push(u32::try_from(at).unwrap_or(u32::MAX));
        if at + 1 == self.entries.len() {
            // Free handles at the end go with the slot, so that a table emptied by deletions
            // holds no slots.
            self.entries.pop();
            while let Some(None) = self.entries.last() {
                self.entries.pop();
                let last = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
                self.free.remove(&last);
                self.journal.touched.push(last);
            }
        } else {
            self.entries[at] = None;
            self.free.insert(u32::try_from(at).unwrap_or(u32::MAX));
        }
        true
    }

    /// The entry `key` hits, if any; `scratch` is reused for masked keys.
    pub fn lookup(&self, key: &[u128], scratch: &mut Vec<u128>) -> Option<&StoredEntry> {
        let i = match &self.index {
            Index::Exact(map) => map.get(&self.widths, key)?,
            Index::Lpm(p, groups) => {
                scratch.clear();
                scratch.extend_from_slice(key);
                let w = self.kinds[*p].1;
                groups.iter().find_map(|(len, map)| {
                    scratch[*p] = key[*p] & prefix_mask(*len, w);
                    map.get(&self.widths, scratch)
                })?
            }
            Index::Scan(order) => *order.iter().find(|&&i| {
                self.entries[i]
                    .as_ref()
                    .is_some_and(|s| s.entry.matches.iter().zip(key).all(|(m, v)| m.contains(*v)))
            })?,
        };
        self.entries.get(i)?.as_deref()
    }

    /// Counts a hit on entry `e`.
    pub fn count(e: &StoredEntry, bytes: u64) {
        e.state.counter.packets.fetch_add(1, Ordering::Relaxed);
        e.state.counter.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The entry whose match and priority are `matches` and `priority` (the priority only
    /// where lookups scan): through the index, O(1), for exact and lpm tables.
    pub fn find(&self, matches: &[KeySet], priority: i64) -> Option<usize> {
        match &self.index {
            Index::Scan(_) => self.entries.iter().position(|e| {
                e.as_ref()
                    .is_some_and(|e| e.entry.matches == matches && e.entry.priority == priority)
            }),
            index => index
                .map(matches)?
                .get_fields(&self.widths, exact_key(matches))
                .filter(|&at| self.entries[at].as_ref().is_some_and(|e| e.entry.matches == matches)),
        }
    }
}

/// The exact-match key of an entry (an lpm key by its masked value).
fn exact_key(matches: &[KeySet]) -> impl Iterator<Item = u128> + '_ {
    matches.iter().map(|m| match *m {
        KeySet::Value(v) => v,
        KeySet::Mask(v, m) => v & m,
        _ => 0,
    })
}

/// The prefix length of an lpm key's key set (a wildcard is length 0).
fn prefix_len(m: &KeySet) -> u32 {
    match m {
        KeySet::Mask(_, m) => m.count_ones(),
        _ => 0,
    }
}

/// The mask of a `len`-bit prefix of a `w`-bit key.
pub fn prefix_mask(len: u32, w: u16) -> u128 {
    if len == 0 {
        0
    } else {
        mask(w) & !(mask(w) >> len.min(u32::from(w)))
    }
}

/// The key set of an lpm key of `w` bits matching the first `len` bits of `v`.
pub fn prefix(v: u128, len: u128, w: u16) -> Result<KeySet, String> {
    if len > u128::from(w) {
        return Err(format!("prefix length {len} of a {w}-bit key"));
    }
    let m = prefix_mask(len as u32, w);
    Ok(KeySet::Mask(v & m, m))
}

fn is_prefix(m: u128, w: u16) -> bool {
    m == prefix_mask(m.count_ones(), w)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A table of one 32-bit key of each of `kinds`, 16 entries at most.
    pub(crate) fn table(kinds: &[MatchKind]) -> ir::Table {
        ir::Table {
            name: "t".into(),
            keys: kinds
                .iter()
                .map(|k| ir::Key {
                    expr: ir::Expr::Const(0),
                    kind: *k,
                    width: 32,
                    name: "k".into(),
                })
                .collect(),
            prep: vec![],
            selector_keys: vec![],
            actions: vec![],
            default_action: (0, vec![]),
            const_default: false,
            entries: None,
            size: 16,
            direct_counter: None,
            direct_meter: None,
            profile: None,
            idle_timeout: false,
        }
    }

    impl TableState {
        fn insert_direct(&mut self, e: Entry) -> Result<usize, InsertError> {
            let h = self.insert(e, Via::Action)?;
            Ok(self.position(h).expect("just added"))
        }
    }

    fn entry(matches: Vec<KeySet>, priority: i64, action: usize) -> Entry {
        Entry {
            matches,
            priority,
            action,
            args: vec![],
        }
    }

    #[test]
    fn the_longest_prefix_wins_whatever_the_insertion_order() {
        let mut t = TableState::new(&table(&[MatchKind::Lpm]));
        let mut s = Vec::new();
        t.insert_direct(entry(vec![KeySet::Mask(0x0a00_0000, prefix_mask(8, 32))], 0, 1))
            .unwrap();
        t.insert_direct(entry(vec![KeySet::Mask(0x0a01_0100, prefix_mask(24, 32))], 0, 2))
            .unwrap();
        t.insert_direct(entry(vec![KeySet::Mask(0, 0)], 0, 3)).unwrap();
        assert_eq!(t.lookup(&[0x0a01_0105], &mut s).unwrap().entry.action, 2);
        assert_eq!(t.lookup(&[0x0a02_0105], &mut s).unwrap().entry.action, 1);
        assert_eq!(t.lookup(&[0x0b00_0000], &mut s).unwrap().entry.action, 3);
        assert!(
            t.insert_direct(entry(vec![KeySet::Mask(0x0a00_0000, 0x00ff_0000)], 0, 1))
                .is_err(),
            "not a prefix"
        );
        assert!(
            t.insert_direct(entry(vec![KeySet::Mask(0x0a00_0000, prefix_mask(8, 32))], 0, 1))
                .is_err(),
            "a repeat"
        );
    }

    #[test]
    fn ternary_entries_match_by_priority_and_deletion_keeps_the_rest() {
        let mut t = TableState::new(&table(&[MatchKind::Ternary, MatchKind::Range]));
        let mut s = Vec::new();
        t.insert_direct(entry(vec![KeySet::Mask(0, 0), KeySet::Range(0, 100)], 1, 1))
            .unwrap();
        let hi = t
            .insert_direct(entry(vec![KeySet::Mask(5, 0xff), KeySet::Range(10, 20)], 9, 2))
            .unwrap();
        assert_eq!(t.lookup(&[5, 15], &mut s).unwrap().entry.action, 2);
        assert_eq!(t.lookup(&[5, 25], &mut s).unwrap().entry.action, 1);
        assert!(t.lookup(&[5, 200], &mut s).is_none());
        assert!(t.delete(hi));
        assert_eq!(t.lookup(&[5, 15], &mut s).unwrap().entry.action, 1);
        assert!(
            t.insert_direct(entry(vec![KeySet::Value(1), KeySet::Range(0, 1)], 0, 1))
                .is_err(),
            "a ternary key needs a mask"
        );
    }

    /// The entry a linear scan of `entries` picks for `key`: the longest prefix for an lpm
    /// table, the highest priority (the first inserted among equals) for a scanned one.
    fn reference<'a>(entries: &'a [(u32, Entry)], kinds: &[MatchKind], key: &[u128]) -> Option<&'a Entry> {
        let hits = entries
            .iter()
            .filter(|(_, e)| e.matches.iter().zip(key).all(|(m, v)| m.contains(*v)));
        if kinds.contains(&MatchKind::Ternary) {
            // Highest priority, first inserted (lowest insertion number) among equals.
            hits.min_by_key(|(n, e)| (std::cmp::Reverse(e.priority), *n))
                .map(|(_, e)| e)
        } else {
            hits.max_by_key(|(_, e)| match e.matches[0] {
                KeySet::Mask(_, m) => m.count_ones(),
                _ => 32,
            })
            .map(|(_, e)| e)
        }
    }

    #[test]
    fn inserts_and_deletes_in_any_order_keep_every_index_right() {
        for kinds in [[MatchKind::Exact], [MatchKind::Lpm], [MatchKind::Ternary]] {
            let mut t = TableState::new(&ir::Table {
                size: 1 << 12,
                ..table(&kinds)
            });
            let mut model: Vec<(u32, Entry)> = Vec::new();
            let mut handles: Vec<u32> = Vec::new();
            let mut rng = 0x2545_f491_u64;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut scratch = Vec::new();
            for step in 0..4_000u32 {
                let v = (next() % 64) as u128;
                let matches = match kinds[0] {
                    MatchKind::Exact => vec![KeySet::Value(v)],
                    MatchKind::Lpm => {
                        let len = (next() % 7) as u32 + 26;
                        vec![KeySet::Mask(v & prefix_mask(len, 32), prefix_mask(len, 32))]
                    }
                    _ => vec![KeySet::Mask(v, 0x3c)],
                };
                let priority = (next() % 4) as i64;
                if next() % 3 == 0 && !model.is_empty() {
                    let k = (next() as usize) % model.len();
                    let (_, gone) = model.remove(k);
                    let h = handles.remove(k);
                    let at = t.find(&gone.matches, gone.priority).expect("a stored entry is found");
                    assert_eq!(t.stored(at).map(|s| s.handle), Some(h), "step {step}: found by its key");
                    assert!(t.delete(at));
                    assert!(t.find(&gone.matches, gone.priority).is_none(), "step {step}: gone");
                } else {
                    let e = entry(matches, priority, step as usize);
                    match t.insert(e.clone(), Via::Action) {
                        Ok(h) => {
                            model.push((step, e));
                            handles.push(h);
                        }
                        Err(m) => assert_eq!(m, InsertError::Taken, "step {step}"),
                    }
                }
                assert_eq!(t.len(), model.len());
                for (h, (_, e)) in handles.iter().zip(&model) {
                    assert_eq!(t.get(*h).map(|s| &s.entry), Some(e), "step {step}: handle {h}");
                }
                for probe in 0..64u128 {
                    let got = t.lookup(&[probe], &mut scratch).map(|s| &s.entry);
                    let want = reference(&model, &kinds, &[probe]);
                    assert_eq!(got, want, "{kinds:?}, step {step}, key {probe}");
                }
            }
        }
    }

    #[test]
    fn exact_tables_refuse_values_wider_than_their_key() {
        let mut t = TableState::new(&table(&[MatchKind::Exact]));
        assert!(t.insert_direct(entry(vec![KeySet::Value(1 << 40)], 0, 1)).is_err());
        t.insert_direct(entry(vec![KeySet::Value(7)], 0, 1)).unwrap();
        assert_eq!(t.lookup(&[7], &mut Vec::new()).unwrap().entry.action, 1);
        assert!(t.lookup(&[8], &mut Vec::new()).is_none());
    }
}
