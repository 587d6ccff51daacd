//! The latest time the lab froze: a worker that lost its core (or overslept) held up every
//! port and host it owns at once, so a frame in flight then arrived late for a reason that is
//! not the emulated network's. Tasks read it to tell such measurements apart.

use std::sync::atomic::{AtomicU64, Ordering};

/// A stretch of lab time (ns) during which a worker ran nothing it was due to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hiccup {
    /// When the work held up was due.
    pub start_ns: u64,
    /// When the worker got round to it.
    pub end_ns: u64,
}

impl Hiccup {
    /// Whether something that began at `from` and ended at `to` spans part of it.
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        from < self.end_ns && to > self.start_ns
    }

    /// Whether it spans part of the stretch from `from` to `to` and is over a hundredth of it:
    /// a delay-based controller reads changes of a few percent of an RTT (TIMELY's gradient),
    /// so only a hiccup well below that leaves a measurement of the stretch standing.
    pub fn distorts(&self, from: u64, to: u64) -> bool {
        self.overlaps(from, to) && self.end_ns.saturating_sub(self.start_ns) * 100 > to.saturating_sub(from)
    }
}

/// Hiccups kept: a task that was itself held up reads the ones that came meanwhile.
const KEPT: usize = 16;

/// The recent hiccups of every worker of one runtime, shared by them all: the latest
/// [`KEPT`], each numbered in the order recorded.
#[derive(Debug, Default)]
pub(crate) struct LatestHiccup {
    slots: [(AtomicU64, AtomicU64); KEPT],
    /// Hiccups recorded so far; the latest is number `recorded - 1`.
    recorded: AtomicU64,
}

impl LatestHiccup {
    /// Records `h` if it ended later than the latest, joined to it when the two overlap (two
    /// workers held up at once, or one again before its first hold-up was over): a frame in
    /// flight during either is then still known to be. Two workers may record at once; a
    /// reader may then see one's start with the other's end for a moment, which only widens
    /// the stretch it judges.
    pub(crate) fn record(&self, h: Hiccup) {
        let latest = self.get();
        if latest.is_some_and(|l| h.end_ns <= l.end_ns) {
            return;
        }
        let start = match latest {
            Some(l) if h.start_ns <= l.end_ns => h.start_ns.min(l.start_ns),
            _ => h.start_ns,
        };
        let n = self.recorded.load(Ordering::Relaxed);
        let (s, e) = &self.slots[(n % KEPT as u64) as usize];
        s.store(start, Ordering::Relaxed);
        e.store(h.end_ns, Ordering::Relaxed);
        self.recorded.store(n + 1, Ordering::Release);
    }

    /// Hiccup number `n`, while still kept.
    fn nth(&self, n: u64) -> Hiccup {
        let (s, e) = &self.slots[(n % KEPT as u64) as usize];
        let end_ns = e.load(Ordering::Relaxed);
        Hiccup {
            start_ns: s.load(Ordering::Relaxed).min(end_ns),
            end_ns,
        }
    }

    /// The latest hiccup, if any.
    pub(crate) fn get(&self) -> Option<Hiccup> {
        let n = self.recorded.load(Ordering::Acquire);
        (n > 0).then(|| self.nth(n - 1))
    }

    /// The hiccups recorded since a reader had seen `seen` of them (the latest [`KEPT`] at
    /// most), oldest first; `seen` moves on to all of them.
    pub(crate) fn since(&self, seen: &mut u64) -> Vec<Hiccup> {
        let n = self.recorded.load(Ordering::Acquire);
        let from = (*seen).max(n.saturating_sub(KEPT as u64));
        *seen = n;
        (from..n).map(|k| self.nth(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_ending_hiccup_is_kept() {
        let l = LatestHiccup::default();
        assert_eq!(l.get(), None);
        l.record(Hiccup {
            start_ns: 100,
            end_ns: 400,
        });
        l.record(Hiccup {
            start_ns: 50,
            end_ns: 300,
        });
        assert_eq!(
            l.get(),
            Some(Hiccup {
                start_ns: 100,
                end_ns: 400
            })
        );
        l.record(Hiccup {
            start_ns: 900,
            end_ns: 1200,
        });
        assert_eq!(
            l.get(),
            Some(Hiccup {
                start_ns: 900,
                end_ns: 1200
            })
        );
        // One that overlaps the one kept joins it.
        l.record(Hiccup {
            start_ns: 1100,
            end_ns: 1500,
        });
        assert_eq!(
            l.get(),
            Some(Hiccup {
                start_ns: 900,
                end_ns: 1500
            })
        );
    }

    #[test]
    fn a_reader_held_up_meanwhile_sees_every_hiccup_since_it_last_looked() {
        let l = LatestHiccup::default();
        let mut seen = 0;
        assert!(l.since(&mut seen).is_empty());
        let h = |start_ns, end_ns| Hiccup { start_ns, end_ns };
        l.record(h(100, 400));
        l.record(h(900, 1200));
        assert_eq!(l.since(&mut seen), vec![h(100, 400), h(900, 1200)]);
        assert!(l.since(&mut seen).is_empty(), "each once");
        l.record(h(1100, 1500));
        assert_eq!(l.since(&mut seen), vec![h(900, 1500)], "joined");
        for k in 0..40 {
            l.record(h(10_000 + k * 1000, 10_500 + k * 1000));
        }
        let kept = l.since(&mut seen);
        assert_eq!(kept.len(), KEPT, "the latest kept");
        assert_eq!(kept.last(), Some(&h(49_000, 49_500)));
    }

    #[test]
    fn a_flight_spans_a_hiccup_only_when_they_overlap() {
        let h = Hiccup {
            start_ns: 100,
            end_ns: 400,
        };
        assert!(h.overlaps(50, 150));
        assert!(h.overlaps(200, 300));
        assert!(h.overlaps(350, 500));
        assert!(!h.overlaps(10, 100));
        assert!(!h.overlaps(400, 500));
    }

    #[test]
    fn a_hiccup_distorts_a_flight_it_is_over_a_hundredth_of() {
        let h = Hiccup {
            start_ns: 100,
            end_ns: 400,
        };
        assert!(h.distorts(50, 29_999), "300 of 29,949");
        assert!(!h.distorts(50, 30_050), "300 of 30,000 is a hundredth");
        assert!(!h.distorts(400, 450), "no overlap");
    }
}
