//! The time a lab runs on: nanoseconds since the process first asked, on the monotonic clock.
//! INT timestamps, schedules and timers of every switch and host in the process share it, so
//! they compare along a path; a step of the wall clock changes none of them. A lab spread over
//! several machines shifts each site's clock to read as its coordinator's ([`Clock::align`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The process-wide lab clock.
#[derive(Debug)]
pub struct Clock {
    origin: Instant,
    epoch_ns_at_origin: u128,
    /// CLOCK_MONOTONIC's reading at the origin (the clock `Instant` reads on Linux).
    monotonic_ns_at_origin: u64,
    /// Added to every reading: what another machine's lab clock read when this one read 0.
    shift_ns: AtomicI64,
}

static CLOCK: OnceLock<Clock> = OnceLock::new();

impl Clock {
    /// The shared clock, started on first use.
    pub fn get() -> &'static Clock {
        CLOCK.get_or_init(|| {
            let origin = Instant::now();
            // Both read CLOCK_MONOTONIC: the reading least after the origin's is the closest.
            let monotonic_ns_at_origin = (0..5)
                .map(|_| monotonic_ns().saturating_sub(origin.elapsed().as_nanos() as u64))
                .min()
                .unwrap_or(0);
            let (offset, _) = measure_offset(|| origin.elapsed().as_nanos() as u64, wall_ns);
            Clock {
                origin,
                epoch_ns_at_origin: offset.max(0) as u128,
                monotonic_ns_at_origin,
                shift_ns: AtomicI64::new(0),
            }
        })
    }

    /// The lab-clock reading of CLOCK_MONOTONIC reading `monotonic_ns` (a kernel timestamp,
    /// such as an XDP program's), never later than now: both are the same clock, so no wall
    /// clock step can shift it.
    pub fn lab_ns_of_monotonic(&self, monotonic_ns: u64) -> u64 {
        let since_origin = monotonic_ns.saturating_sub(self.monotonic_ns_at_origin);
        shifted(since_origin, self.shift()).min(self.now_ns())
    }

    /// Shifts every reading by `shift_ns` from now on, so that this clock reads what another
    /// process's lab clock reads (a lab site's coordinator, whose offset it measured). Only
    /// between runs: a reading taken before and one after do not compare.
    pub fn align(&self, shift_ns: i64) {
        self.shift_ns.store(shift_ns, Ordering::Relaxed);
    }

    /// The shift [`Clock::align`] set (0 unless a coordinator aligned it).
    pub fn shift(&self) -> i64 {
        self.shift_ns.load(Ordering::Relaxed)
    }

    /// The reading this clock would give with no shift (what [`Clock::align`] is measured
    /// against).
    pub fn unshifted_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// CLOCK_MONOTONIC's reading (ns) when this clock read 0 unshifted: two processes on one
    /// kernel know from it exactly how far apart their lab clocks are.
    pub fn monotonic_origin_ns(&self) -> u64 {
        self.monotonic_ns_at_origin
    }

    /// The instant readings count from, so other components can share the time base.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        shifted(self.origin.elapsed().as_nanos() as u64, self.shift())
    }

    /// How to turn wall-clock readings taken around now (a kernel receive timestamp, which is
    /// CLOCK_REALTIME) into lab-clock readings: the offset between the two clocks is measured
    /// now, so a step of the wall clock shifts only the frames received across it.
    pub fn realtime_map(&self) -> RealtimeMap {
        let (offset, now) = measure_offset(|| self.now_ns(), wall_ns);
        RealtimeMap { offset, now }
    }

    /// Wall-clock nanoseconds since the Unix epoch of a lab-clock reading (for capture files).
    pub fn epoch_ns(&self, t: u64) -> u128 {
        (self.epoch_ns_at_origin as i128 + i128::from(t) - i128::from(self.shift())).max(0) as u128
    }
}

/// `t` shifted by `shift`, never below 0.
#[inline]
fn shifted(t: u64, shift: i64) -> u64 {
    t.saturating_add_signed(shift)
}

/// Wall-clock readings bracketed by lab-clock readings this close (ns) give the clocks' offset
/// to within a microsecond: a few vDSO reads take well under it, unless the thread lost its
/// core between them.
const TIGHT_BRACKET_NS: u64 = 2_000;
/// Brackets tried for a tight one: losing the core once between two clock reads is rare,
/// three times in a row rarer than anything this lab measures.
const BRACKET_TRIES: usize = 4;

/// The offset of the wall clock from the lab clock (ns) and the last lab reading taken.
///
/// Each try reads lab, wall, lab and places the wall reading at the middle of its bracket; the
/// tightest bracket wins. Reading each clock once, as a single pair, is off by however long the
/// thread was preempted between the two reads (milliseconds on a busy machine), and every
/// frame stamped through such a map would land that much late.
fn measure_offset(mut lab_ns: impl FnMut() -> u64, mut wall_ns: impl FnMut() -> u128) -> (i128, u64) {
    let mut best: Option<(u64, i128)> = None;
    let mut last = 0;
    for _ in 0..BRACKET_TRIES {
        let before = lab_ns();
        let wall = wall_ns();
        last = lab_ns();
        let width = last.saturating_sub(before);
        let middle = i128::from(before) + i128::from(width / 2);
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, wall as i128 - middle));
        }
        if width <= TIGHT_BRACKET_NS {
            break;
        }
    }
    (best.map_or(0, |(_, offset)| offset), last)
}

/// CLOCK_REALTIME now, in ns since the Unix epoch.
fn wall_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// CLOCK_MONOTONIC now, in ns.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a live timespec for the kernel to fill; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall clock to lab clock, as measured at one moment (see [`Clock::realtime_map`]).
#[derive(Debug, Clone, Copy)]
pub struct RealtimeMap {
    offset: i128,
    now: u64,
}

impl RealtimeMap {
    /// The lab-clock reading of wall-clock time `realtime_ns`, never later than when the map
    /// was made (a receive timestamp is in the past).
    pub fn lab_ns(&self, realtime_ns: u128) -> u64 {
        let t = realtime_ns as i128 - self.offset;
        (t.max(0) as u64).min(self.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_readings_map_onto_the_lab_clock() {
        let c = Clock::get();
        let before = c.now_ns();
        let rt = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let m = c.realtime_map();
        let t = m.lab_ns(rt);
        assert!(t + 1_000_000 >= before && t <= c.now_ns(), "{before} {t}");
        assert_eq!(m.lab_ns(rt + 10_000_000_000), m.now, "never in the future");
        assert_eq!(m.lab_ns(0), 0);
    }

    #[test]
    fn a_thread_preempted_between_the_clock_reads_does_not_shift_the_map() {
        // The wall clock is 1e18 ns ahead of the lab clock. The first bracket loses the core
        // for 13 ms between the wall read and the second lab read; the next is tight.
        const AHEAD: u128 = 1_000_000_000_000_000_000;
        let mut lab = [0, 13_000_000, 13_000_100, 13_000_300].into_iter();
        let mut wall = [AHEAD + 100, AHEAD + 13_000_200].into_iter();
        let (offset, now) = measure_offset(|| lab.next().expect("lab read"), || wall.next().expect("wall read"));
        assert_eq!(offset, AHEAD as i128, "from the tight bracket");
        assert_eq!(now, 13_000_300, "the last lab reading");
        let map = RealtimeMap { offset, now };
        assert_eq!(
            map.lab_ns(AHEAD + 5_000_000),
            5_000_000,
            "a frame of 8 ms ago lands where it arrived"
        );
    }

    #[test]
    fn a_shifted_reading_saturates_at_zero() {
        assert_eq!(shifted(100, -30), 70);
        assert_eq!(shifted(100, 30), 130);
        assert_eq!(shifted(10, -30), 0, "a coordinator's clock is never before 0");
    }

    #[test]
    fn monotonic_readings_map_onto_the_lab_clock() {
        let c = Clock::get();
        let before = c.now_ns();
        let t = c.lab_ns_of_monotonic(monotonic_ns());
        let after = c.now_ns();
        assert!(t >= before && t <= after, "{before} <= {t} <= {after}");
        let far = c.lab_ns_of_monotonic(u64::MAX);
        assert!(far >= after && far <= c.now_ns(), "never in the future");
        assert_eq!(c.lab_ns_of_monotonic(0), 0);
    }
}
