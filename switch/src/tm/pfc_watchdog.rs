//! The PFC watchdog, as switch vendors ship one (SONiC's pfcwd, Junos' `pfc-watchdog`): a
//! priority that pauses have held without a break while a frame of it waited for `detect` is
//! in a pause storm (a receiver that stopped reading, a deadlock). The watchdog then ignores
//! the pauses of that priority and drops its frames, those waiting and those that come, so its
//! share of the buffer drains and the upstream's XOFF lifts; it restores the priority once no
//! pause for it has arrived for `restore`. Vendors poll their queues (every 100 ms in Junos
//! and SONiC); the lab decides on its exact schedule instead, so a trip comes `detect` after
//! the hold began, not up to a poll later.

/// The watchdog's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcWatchdog {
    /// A frame that waits this long under an unbroken pause trips the watchdog (ns; default
    /// 200 ms, the detection time of SONiC's and Junos' watchdogs).
    pub detect_ns: u64,
    /// The priority is restored this long after the last pause for it arrived (ns; default 200
    /// ms, as SONiC's restoration time and Junos' recovery time).
    pub restore_ns: u64,
}

impl Default for PfcWatchdog {
    fn default() -> PfcWatchdog {
        PfcWatchdog {
            detect_ns: 200_000_000,
            restore_ns: 200_000_000,
        }
    }
}

/// The watchdog's view of one priority of one port (times in ps, the queue's unit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StormState {
    /// When the current unbroken hold began.
    held_since: u64,
    /// When the last pause (quanta above 0) arrived.
    last_pause: u64,
    /// In a storm since then: pauses ignored, frames dropped.
    stormed_since: Option<u64>,
}

/// What the watchdog does next on a priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StormEvent {
    /// Declares a storm at this time.
    Trip(u64),
    /// Restores the priority at this time.
    Restore(u64),
}

impl StormEvent {
    /// Its time (ps).
    pub fn at(self) -> u64 {
        match self {
            StormEvent::Trip(t) | StormEvent::Restore(t) => t,
        }
    }
}

impl StormState {
    /// A PFC frame for this priority arrived at `at` with `quanta`; `held` says whether an
    /// earlier pause still held at `at` (the hold goes on unbroken).
    pub fn on_pause(&mut self, at: u64, quanta: u16, held: bool) {
        if quanta == 0 {
            return;
        }
        if !held {
            self.held_since = at;
        }
        self.last_pause = at;
    }

    /// In a storm: pauses are ignored and frames dropped.
    pub fn stormed(&self) -> bool {
        self.stormed_since.is_some()
    }

    /// Since when frames may leave regardless of pauses (ps), in a storm.
    pub fn stormed_since(&self) -> Option<u64> {
        self.stormed_since
    }

    /// The next thing the watchdog does, given the priority's pause end `paused_until` and the
    /// arrival of its oldest waiting frame (`None`: nothing waits).
    pub fn next(&self, w: &PfcWatchdog, paused_until: u64, oldest: Option<u64>) -> Option<StormEvent> {
        if let Some(since) = self.stormed_since {
            return Some(StormEvent::Restore((self.last_pause + w.restore_ns * 1000).max(since)));
        }
        let trip = self.held_since.max(oldest?) + w.detect_ns * 1000;
        // Held right through to the trip; a pause that ends before it is no storm.
        (paused_until > trip).then_some(StormEvent::Trip(trip))
    }

    /// Carries out `e`.
    pub fn apply(&mut self, e: StormEvent) {
        match e {
            StormEvent::Trip(t) => self.stormed_since = Some(t),
            StormEvent::Restore(t) => {
                self.stormed_since = None;
                // Detection starts over: a pause still in force must hold `detect` again.
                self.held_since = t;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;

    fn watchdog() -> PfcWatchdog {
        PfcWatchdog {
            detect_ns: 10_000_000,
            restore_ns: 5_000_000,
        }
    }

    #[test]
    fn an_unbroken_hold_over_a_waiting_frame_trips_it_detect_after_the_later_of_the_two() {
        let w = watchdog();
        let mut s = StormState::default();
        s.on_pause(MS, u16::MAX, false);
        // Refreshed before each pause ends: one hold since 1 ms.
        s.on_pause(3 * MS, u16::MAX, true);
        assert_eq!(s.next(&w, 100 * MS, None), None, "nothing waits");
        assert_eq!(s.next(&w, 100 * MS, Some(2 * MS)), Some(StormEvent::Trip(12 * MS)));
        assert_eq!(s.next(&w, 100 * MS, Some(0)), Some(StormEvent::Trip(11 * MS)));
        assert_eq!(s.next(&w, 11 * MS, Some(0)), None, "the pause ends at the trip");
        // A break starts a new hold.
        s.on_pause(50 * MS, u16::MAX, false);
        assert_eq!(s.next(&w, 100 * MS, Some(0)), Some(StormEvent::Trip(60 * MS)));
    }

    #[test]
    fn a_storm_ends_restore_after_the_last_pause_and_xons_do_not_prolong_it() {
        let w = watchdog();
        let mut s = StormState::default();
        s.on_pause(0, u16::MAX, false);
        s.apply(StormEvent::Trip(10 * MS));
        assert!(s.stormed());
        assert_eq!(s.stormed_since(), Some(10 * MS));
        s.on_pause(20 * MS, u16::MAX, true);
        s.on_pause(22 * MS, 0, true);
        assert_eq!(s.next(&w, 0, None), Some(StormEvent::Restore(25 * MS)));
        s.apply(StormEvent::Restore(25 * MS));
        assert!(!s.stormed());
        // The last pause still holds: detection counts from the restore.
        assert_eq!(s.next(&w, 100 * MS, Some(0)), Some(StormEvent::Trip(35 * MS)));
    }

    #[test]
    fn a_restore_never_comes_before_its_trip() {
        let w = PfcWatchdog {
            detect_ns: 10_000_000,
            restore_ns: 1_000_000,
        };
        let mut s = StormState::default();
        s.on_pause(0, u16::MAX, false);
        s.apply(StormEvent::Trip(10 * MS));
        assert_eq!(s.next(&w, 100 * MS, Some(0)), Some(StormEvent::Restore(10 * MS)));
    }
}
