//! How a worker waits for its next deadline.

use serde::Deserialize;

/// How a worker waits. Threads that sleep wake 20 to 70 us late on the reference machine; a
/// worker that polls without sleeping is on time but holds its core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PollMode {
    /// Never sleep: poll the descriptors and the clock continuously.
    Spin,
    /// Sleep until the next deadline or input.
    Sleep,
    /// Sleep until [`ADAPTIVE_MARGIN_NS`] before the next deadline, then poll until it: on time
    /// like `spin` when deadlines are near, idle like `sleep` when they are not.
    #[default]
    Adaptive,
}

/// How long before a deadline an adaptive worker stops sleeping: above the wake-up lateness of
/// a sleeping thread at p99 on the reference machine (30 to 70 us).
pub const ADAPTIVE_MARGIN_NS: u64 = 100_000;

/// The longest a sleeping worker waits before looking at its descriptors again. On the
/// reference VM a wake-up sent from the other vCPU (a frame on a veth, an eventfd from another
/// worker) sometimes arrives milliseconds late while a thread's own timer does not (see
/// docs/performance.md), so input waits at most this long plus a timer's lateness.
pub const MAX_SLEEP_NS: u64 = 50_000;

impl PollMode {
    /// How long to wait for input at `now` with the next deadline at `next` (None: no deadline).
    pub fn timeout(self, now: u64, next: Option<u64>) -> u64 {
        let until = |d: u64, margin: u64| d.saturating_sub(now).saturating_sub(margin).min(MAX_SLEEP_NS);
        match (self, next) {
            (PollMode::Spin, _) => 0,
            (_, None) => MAX_SLEEP_NS,
            (PollMode::Sleep, Some(d)) => until(d, 0),
            (PollMode::Adaptive, Some(d)) => until(d, ADAPTIVE_MARGIN_NS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_waits_as_documented() {
        assert_eq!(PollMode::Spin.timeout(0, Some(1_000_000)), 0);
        assert_eq!(PollMode::Sleep.timeout(10, Some(30_010)), 30_000);
        assert_eq!(PollMode::Sleep.timeout(10, Some(1_000_000)), MAX_SLEEP_NS, "capped");
        assert_eq!(PollMode::Sleep.timeout(10, None), MAX_SLEEP_NS);
        assert_eq!(PollMode::Adaptive.timeout(0, Some(120_000)), 20_000);
        assert_eq!(PollMode::Adaptive.timeout(0, Some(50_000)), 0, "near: poll");
        assert_eq!(PollMode::Adaptive.timeout(0, None), MAX_SLEEP_NS);
    }
}
