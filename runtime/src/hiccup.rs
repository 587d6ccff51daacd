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
}

/// The latest hiccup of any worker of one runtime, shared by them all.
#[derive(Debug, Default)]
pub(crate) struct LatestHiccup {
    start_ns: AtomicU64,
    end_ns: AtomicU64,
}

impl LatestHiccup {
    /// Keeps `h` if it ended later than the one kept, joined to it when the two overlap (two
    /// workers held up at once, or one again before its first hold-up was over): a frame in
    /// flight during either is then still known to be. Two workers may record at once; a
    /// reader may then see one's start with the other's end for a moment, which only widens
    /// the stretch it judges.
    pub(crate) fn record(&self, h: Hiccup) {
        let (start, end) = (
            self.start_ns.load(Ordering::Relaxed),
            self.end_ns.load(Ordering::Relaxed),
        );
        if h.end_ns > end {
            let joined = if h.start_ns <= end {
                h.start_ns.min(start)
            } else {
                h.start_ns
            };
            self.start_ns.store(joined, Ordering::Relaxed);
            self.end_ns.store(h.end_ns, Ordering::Release);
        }
    }

    /// The hiccup kept, if any.
    pub(crate) fn get(&self) -> Option<Hiccup> {
        let end_ns = self.end_ns.load(Ordering::Acquire);
        (end_ns > 0).then(|| Hiccup {
            start_ns: self.start_ns.load(Ordering::Relaxed).min(end_ns),
            end_ns,
        })
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
}
