//! The copies of the control plane that edits change while packets read another.
//!
//! An edit must not change what packets read (a frame sees all of an edit or none), so it changes
//! a copy and swaps it in. Copying the whole control plane per edit costs O(entries); a
//! persistent (path-copying) structure costs O(log n) per write but its node copies and frees
//! took most of a write's time at 100,000 entries. Here an edit takes a copy no packet holds
//! any more, brings it up to date by copying only the slots the edits since its version touched
//! (their journals), then changes it: a write costs O(1) whatever the table's size, for twice
//! the index's memory (entries themselves are shared).
//!
//! A packet thread keeps the plane it last read until it reads again, so an idle thread pins an
//! old copy; edits then work on another one, made by a whole copy when no free one is left.

use std::collections::VecDeque;
use std::sync::Arc;

use super::control_plane::ControlPlane;
use super::table::Journal;

/// Slot handles the log of recent edits holds at most, and edits: a copy older than the log
/// reaches is made again whole, which costs less than following that many changes.
const LOG_HANDLES: usize = 1 << 20;
/// See [`LOG_HANDLES`].
const LOG_EDITS: usize = 1 << 16;

/// Copies kept for edits beyond the live one (the others are let go once free): more than the
/// packet threads that may each pin one, so that one is free.
const KEPT: usize = 4;

/// A copy of the control plane and the version (count of edits) it holds.
#[derive(Debug)]
struct Copy {
    plane: Arc<ControlPlane>,
    version: u64,
}

/// The copies packets no longer get, and what recent edits changed.
#[derive(Debug, Default)]
pub(crate) struct PlaneCopies {
    /// Copies for edits, newest first.
    copies: Vec<Copy>,
    /// The version packets read.
    live: u64,
    /// Each recent edit's version and journals (one a table), oldest first.
    log: VecDeque<(u64, Vec<Journal>)>,
    /// Slot handles the log's journals hold.
    logged: usize,
    /// Copies let go while packets still read them: freed here once they do not, so that a
    /// packet thread never pays for freeing a plane.
    released: Vec<Arc<ControlPlane>>,
}

impl PlaneCopies {
    /// Applies `change` to a copy of `live` that packets do not read and returns it, with what
    /// `change` returned; on an error the copy is put back as `live` is, and nothing changed.
    pub(crate) fn edit<R, E>(
        &mut self,
        live: &Arc<ControlPlane>,
        change: impl FnOnce(&mut ControlPlane) -> Result<R, E>,
    ) -> Result<(Arc<ControlPlane>, R), E> {
        self.released.retain(|old| Arc::strong_count(old) > 1);
        let mut next = self.up_to_date(live);
        let plane = Arc::get_mut(&mut next).expect("a copy no one else holds");
        for t in &mut plane.tables {
            t.begin_edit();
        }
        let result = change(plane);
        let journals: Vec<Journal> = plane.tables.iter().map(|t| t.journal().clone()).collect();
        match result {
            Ok(r) => {
                self.logged += handles(&journals);
                self.log.push_back((self.live + 1, journals));
                Ok((next, r))
            }
            Err(e) => {
                plane.follow(live, &journals);
                self.copies.insert(
                    0,
                    Copy {
                        plane: next,
                        version: self.live,
                    },
                );
                Err(e)
            }
        }
    }

    /// Records that `next` (from [`PlaneCopies::edit`]) is live now and `old` was before.
    pub(crate) fn swapped(&mut self, old: Arc<ControlPlane>) {
        self.copies.insert(
            0,
            Copy {
                plane: old,
                version: self.live,
            },
        );
        self.live += 1;
        for extra in self.copies.drain(KEPT.min(self.copies.len())..) {
            self.released.push(extra.plane);
        }
        // Journals older than every copy are no longer needed; nor more than the log keeps (a
        // copy an idle packet thread pinned that long is made again whole once free).
        let oldest = self.copies.iter().map(|c| c.version).min().unwrap_or(self.live);
        while let Some((v, journals)) = self.log.front()
            && (*v <= oldest || self.logged > LOG_HANDLES || self.log.len() > LOG_EDITS)
        {
            self.logged -= handles(journals);
            self.log.pop_front();
        }
        // A copy the log no longer reaches back to would be made again whole: let it go.
        let first = self.log.front().map_or(self.live + 1, |(v, _)| *v);
        let (kept, stale): (Vec<Copy>, Vec<Copy>) = self.copies.drain(..).partition(|c| c.version + 1 >= first);
        self.copies = kept;
        self.released.extend(stale.into_iter().map(|c| c.plane));
    }

    /// A copy no packet holds, made what `live` is: the newest free copy brought up to date
    /// with the journals since its version (the log reaches back to every kept copy: see
    /// [`PlaneCopies::swapped`]), or a whole copy of `live` when none is free.
    fn up_to_date(&mut self, live: &Arc<ControlPlane>) -> Arc<ControlPlane> {
        let free = self
            .copies
            .iter()
            .position(|c| Arc::strong_count(&c.plane) == 1 && Arc::weak_count(&c.plane) == 0);
        let Some(i) = free else {
            return Arc::new(ControlPlane::clone(live));
        };
        let Copy { mut plane, version } = self.copies.remove(i);
        debug_assert!(
            version + 1 >= self.log.front().map_or(self.live + 1, |(v, _)| *v),
            "a kept copy the log reaches"
        );
        let mut since: Vec<Journal> = vec![Journal::default(); live.tables.len()];
        for (_, journals) in self.log.iter().filter(|(v, _)| *v > version) {
            for (all, one) in since.iter_mut().zip(journals) {
                all.merge(one);
            }
        }
        Arc::get_mut(&mut plane).expect("a free copy").follow(live, &since);
        plane
    }
}

/// Slot handles `journals` name.
fn handles(journals: &[Journal]) -> usize {
    journals.iter().map(Journal::len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::table::{TableState, Via, prefix_mask};
    use crate::ir::{self, Entry, KeySet, MatchKind};

    /// A table of one key of `kind`, large enough for the writes below.
    fn table(kind: MatchKind) -> ir::Table {
        ir::Table {
            size: 1 << 12,
            ..crate::exec::table::tests::table(&[kind])
        }
    }

    /// One random write: an insert, a delete of what `find` finds, or a modify.
    fn write(t: &mut TableState, kind: MatchKind, r: u64, step: usize) -> Result<(), String> {
        let v = u128::from(r >> 8) % 48;
        let matches = match kind {
            MatchKind::Exact => vec![KeySet::Value(v)],
            MatchKind::Lpm => {
                let len = (r % 5) as u32 + 28;
                vec![KeySet::Mask(v & prefix_mask(len, 32), prefix_mask(len, 32))]
            }
            _ => vec![KeySet::Mask(v, 0x3c)],
        };
        let priority = (r >> 20) as i64 % 3;
        match (r >> 30) % 4 {
            0 | 1 => t
                .insert(
                    Entry {
                        matches,
                        priority,
                        action: step,
                        args: vec![],
                    },
                    Via::Action,
                )
                .map(drop)
                .map_err(|e| e.to_string()),
            2 => {
                let at = t.find(&matches, priority).ok_or("none to delete")?;
                t.delete(at).then_some(()).ok_or_else(|| "not deleted".into())
            }
            _ => {
                let at = t.find(&matches, priority).ok_or("none to modify")?;
                t.modify(at, step, vec![step as u128], Via::Action)
                    .then_some(())
                    .ok_or_else(|| "not modified".into())
            }
        }
    }

    /// Edits through the copies, some failing halfway and some while old planes are held,
    /// always leave the live plane as one table edited in place (itself checked against a
    /// linear scan in table.rs) with the same writes.
    #[test]
    fn edits_on_copies_leave_the_live_plane_as_edits_in_place_would() {
        for kind in [MatchKind::Exact, MatchKind::Lpm, MatchKind::Ternary] {
            let fresh = TableState::new(&table(kind));
            let mut shadow = fresh.clone();
            let mut live = Arc::new(ControlPlane {
                tables: vec![fresh],
                ..ControlPlane::of(&ir::Program::default())
            });
            let mut copies = PlaneCopies::default();
            let mut held: Vec<Arc<ControlPlane>> = Vec::new();
            let mut rng = 0x9e37_79b9_u64;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut scratch = Vec::new();
            for step in 0..3_000 {
                let writes: Vec<u64> = (0..1 + next() % 6).map(|_| next()).collect();
                let fails = next() % 5 == 0;
                let edited = copies.edit(&live, |cp| {
                    for &w in &writes {
                        let _refused = write(&mut cp.tables[0], kind, w, step);
                    }
                    if fails { Err(()) } else { Ok(()) }
                });
                match edited {
                    Ok((plane, ())) => {
                        for &w in &writes {
                            let _refused = write(&mut shadow, kind, w, step);
                        }
                        copies.swapped(std::mem::replace(&mut live, plane));
                    }
                    Err(()) => assert!(fails),
                }
                // A packet thread holds a plane for a while now and then.
                if next() % 7 == 0 {
                    held.push(Arc::clone(&live));
                }
                if held.len() > 5 || next() % 3 == 0 {
                    held.clear();
                }
                let t = &live.tables[0];
                assert_eq!(t.len(), shadow.len(), "{kind:?}, step {step}");
                for e in shadow.entries() {
                    let mine = t.get(e.handle).map(|s| (&s.entry, s.via));
                    assert_eq!(
                        mine,
                        Some((&e.entry, e.via)),
                        "{kind:?}, step {step}, handle {}",
                        e.handle
                    );
                }
                for probe in 0..48u128 {
                    let got = t.lookup(&[probe], &mut scratch).map(|s| s.handle);
                    let want = shadow.lookup(&[probe], &mut scratch).map(|s| s.handle);
                    assert_eq!(got, want, "{kind:?}, step {step}, key {probe}");
                }
            }
        }
    }

    /// A copy an idle packet thread pins while edits go on: the log of their journals stops at
    /// its bound, the copy is let go once the log no longer reaches it, and edits stay right.
    #[test]
    fn a_copy_pinned_past_the_log_is_let_go_and_the_log_stays_bounded() {
        let fresh = TableState::new(&table(MatchKind::Exact));
        let mut shadow = fresh.clone();
        let mut live = Arc::new(ControlPlane {
            tables: vec![fresh],
            ..ControlPlane::of(&ir::Program::default())
        });
        let mut copies = PlaneCopies::default();
        let pinned = Arc::clone(&live);
        let mut scratch = Vec::new();
        for step in 0..LOG_EDITS + 100 {
            let r = (step as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let (plane, ()) = copies
                .edit(&live, |cp| {
                    let _refused = write(&mut cp.tables[0], MatchKind::Exact, r, step);
                    Ok::<(), ()>(())
                })
                .expect("no edit fails");
            let _refused = write(&mut shadow, MatchKind::Exact, r, step);
            copies.swapped(std::mem::replace(&mut live, plane));
            assert!(
                copies.log.len() <= LOG_EDITS,
                "step {step}: {} edits logged",
                copies.log.len()
            );
        }
        assert!(
            !copies.copies.iter().any(|c| Arc::ptr_eq(&c.plane, &pinned)),
            "not kept"
        );
        assert!(
            copies.released.iter().any(|p| Arc::ptr_eq(p, &pinned)),
            "freed once free"
        );
        drop(pinned);
        for step in 0..20 {
            let r = (step + 7u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let (plane, ()) = copies
                .edit(&live, |cp| {
                    let _refused = write(&mut cp.tables[0], MatchKind::Exact, r, step as usize);
                    Ok::<(), ()>(())
                })
                .expect("no edit fails");
            let _refused = write(&mut shadow, MatchKind::Exact, r, step as usize);
            copies.swapped(std::mem::replace(&mut live, plane));
            for probe in 0..48u128 {
                let got = live.tables[0].lookup(&[probe], &mut scratch).map(|s| s.handle);
                let want = shadow.lookup(&[probe], &mut scratch).map(|s| s.handle);
                assert_eq!(got, want, "step {step}, key {probe}");
            }
        }
    }
}
