//! Meters as BMv2 runs them: a two-rate three-color marker (RFC 2698) per cell, its rates in
//! units (packets or bytes) per microsecond and its bursts in units, its tokens counted from
//! one time origin so that rounding never accumulates. An unconfigured meter marks green.
//!
//! A cell is shared by every worker whose frames it meters, and is kept in atomics rather than
//! behind a lock: a worker that loses its core while holding a lock would stop every other
//! worker metering through that cell. Each bucket is claimed in two atomic steps (the time's
//! new tokens, then the packet's), so one worker alone sees exactly BMv2's arithmetic; workers
//! racing on one cell may cap a bucket at its burst in a different order, a token or a few at
//! most, as two pipelines of a hardware switch sharing a meter would.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// v1model's colors (BMv2's): green, yellow, red.
pub const GREEN: u128 = 0;

/// The rates a cell has at most: committed and peak.
const RATES: usize = 2;

/// A BMv2 color as PSA numbers it (`PSA_MeterColor_t`: RED, GREEN, YELLOW), as psa_switch
/// converts it.
pub fn psa_color(bmv2: u128) -> u128 {
    match bmv2 {
        0 => 1,
        1 => 2,
        _ => 0,
    }
}

/// One rate of a meter cell.
#[derive(Debug, Default)]
struct Rate {
    /// Units per microsecond (an `f64`'s bits).
    info_rate: AtomicU64,
    burst: AtomicU64,
    tokens: AtomicU64,
    /// Tokens the time since the origin has given, when last updated.
    tokens_last: AtomicU64,
}

impl Rate {
    fn info_rate(&self) -> f64 {
        f64::from_bits(self.info_rate.load(Ordering::Relaxed))
    }

    /// Takes `units` tokens at `micros`, after adding those the time since the last update
    /// gave; false when there are too few (the tokens added are kept).
    fn take(&self, micros: u64, units: u64) -> bool {
        let since = (micros as f64 * self.info_rate()) as u64;
        // Whoever moves `tokens_last` on adds the tokens between, so each is added once.
        let new = since.saturating_sub(self.tokens_last.fetch_max(since, Ordering::Relaxed));
        let burst = self.burst.load(Ordering::Relaxed);
        let filled = |t: u64| (t + new).min(burst);
        let step = |t: u64| {
            let t = filled(t);
            Some(if t >= units { t - units } else { t })
        };
        let before = match self.tokens.fetch_update(Ordering::Relaxed, Ordering::Relaxed, step) {
            Ok(t) | Err(t) => t,
        };
        filled(before) >= units
    }
}

/// One meter cell: its rates, peak first.
#[derive(Debug, Default)]
pub struct MeterCell {
    /// How many of `rates` are set (0: the cell marks green).
    count: AtomicUsize,
    rates: [Rate; RATES],
}

impl MeterCell {
    /// Sets the rates `(units per microsecond, burst)`, committed rate first as
    /// simple_switch_CLI gives them; refused when a later rate is below an earlier one, or
    /// when there are more than two.
    ///
    /// A frame metered while the rates change may see some of each; the change itself is
    /// whole once this returns.
    pub fn set_rates(&self, rates: &[(f64, u64)]) -> Result<(), String> {
        if rates.len() > RATES {
            return Err(format!("a meter has at most {RATES} rates, not {}", rates.len()));
        }
        for w in rates.windows(2) {
            if w[1].0 < w[0].0 {
                return Err(format!("rate {} is below the rate {} before it", w[1].0, w[0].0));
            }
        }
        self.count.store(0, Ordering::Release);
        for (cell, &(info_rate, burst)) in self.rates.iter().zip(rates.iter().rev()) {
            cell.info_rate.store(info_rate.to_bits(), Ordering::Relaxed);
            cell.burst.store(burst, Ordering::Relaxed);
            cell.tokens.store(burst, Ordering::Relaxed);
            cell.tokens_last.store(0, Ordering::Relaxed);
        }
        self.count.store(rates.len(), Ordering::Release);
        Ok(())
    }

    /// The rates as set, committed first (empty when unconfigured).
    pub fn rates(&self) -> Vec<(f64, u64)> {
        let n = self.count.load(Ordering::Acquire);
        let rates = self.rates[..n].iter();
        rates
            .rev()
            .map(|r| (r.info_rate(), r.burst.load(Ordering::Relaxed)))
            .collect()
    }

    /// Forgets the rates: the cell marks green again.
    pub fn reset(&self) {
        self.count.store(0, Ordering::Release);
    }

    /// The color of a packet of `units` at `micros` since the origin.
    pub fn execute(&self, micros: u64, units: u64) -> u128 {
        let n = self.count.load(Ordering::Acquire);
        for (k, rate) in self.rates[..n].iter().enumerate() {
            if !rate.take(micros, units) {
                // Colors count from the committed rate (1, yellow), which is kept last.
                return (n - k) as u128;
            }
        }
        GREEN
    }
}

/// An array of meter cells.
#[derive(Debug)]
pub struct MeterArray {
    /// Whether it meters bytes (else packets).
    pub bytes: bool,
    /// Its cells.
    pub cells: Box<[MeterCell]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_rate_meter_marks_yellow_past_its_committed_burst_and_red_past_its_peak() {
        let m = MeterCell::default();
        assert_eq!(m.execute(0, 1), GREEN, "unconfigured");
        // 1 packet per second committed with a burst of 2, 2 per second peak with a burst of 3.
        m.set_rates(&[(1e-6, 2), (2e-6, 3)]).unwrap();
        let colors: Vec<u128> = (0..4).map(|_| m.execute(0, 1)).collect();
        assert_eq!(colors, [0, 0, 1, 2], "green twice, then yellow, then red");
        // A second later both buckets have a token more.
        assert_eq!(m.execute(1_000_000, 1), 0);
        assert!(m.set_rates(&[(2.0, 1), (1.0, 1)]).is_err(), "peak below committed");
        assert!(m.set_rates(&[(1.0, 1), (2.0, 1), (3.0, 1)]).is_err(), "three rates");
        assert_eq!(m.rates(), [(1e-6, 2), (2e-6, 3)], "refused changes change nothing");
        m.reset();
        assert_eq!(m.execute(1_000_000, 100), GREEN, "forgotten");
    }

    #[test]
    fn a_single_rate_marks_yellow_when_it_runs_out() {
        let m = MeterCell::default();
        m.set_rates(&[(1e-6, 1)]).unwrap();
        assert_eq!([m.execute(0, 1), m.execute(0, 1)], [0, 1]);
    }

    #[test]
    fn workers_sharing_a_cell_take_no_more_tokens_than_it_gives() {
        let m = MeterCell::default();
        // 1,000 packets of burst each, no refill within the test's time origin.
        m.set_rates(&[(1e-12, 1_000), (1e-12, 1_000)]).unwrap();
        let greens = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..1_000).filter(|_| m.execute(0, 1) == GREEN).count()))
                .collect();
            workers.into_iter().map(|w| w.join().expect("worker")).sum::<usize>()
        });
        assert_eq!(greens, 1_000, "exactly the burst is green across racing workers");
    }
}
