//! The time every switch in a process shares: nanoseconds since the first use, on the monotonic
//! clock, plus the wall-clock time of that origin for capture timestamps.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The process-wide switch clock.
#[derive(Debug)]
pub struct Clock {
    origin: Instant,
    epoch_ns_at_origin: u128,
}

static CLOCK: OnceLock<Clock> = OnceLock::new();

impl Clock {
    /// The shared clock, started on first use. INT timestamps of every switch in the process are
    /// on this one time base, so they compare along a path.
    pub fn get() -> &'static Clock {
        CLOCK.get_or_init(|| Clock {
            origin: Instant::now(),
            epoch_ns_at_origin: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
        })
    }

    /// The instant readings count from, so other components can share the time base.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// The switch-clock reading of a wall-clock time (ns since the Unix epoch), such as a
    /// kernel receive timestamp; never later than now.
    pub fn from_epoch_ns(&self, epoch_ns: u128) -> u64 {
        (epoch_ns.saturating_sub(self.epoch_ns_at_origin) as u64).min(self.now_ns())
    }

    /// Wall-clock nanoseconds since the Unix epoch of a clock reading.
    pub fn epoch_ns(&self, t: u64) -> u128 {
        self.epoch_ns_at_origin + u128::from(t)
    }
}
