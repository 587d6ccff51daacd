//! Meters as BMv2 runs them: a two-rate three-color marker (RFC 2698) per cell, its rates in
//! units (packets or bytes) per microsecond and its bursts in units, its tokens counted from
//! one time origin so that rounding never accumulates. An unconfigured meter marks green.

use std::sync::Mutex;

/// v1model's colors (BMv2's): green, yellow, red.
pub const GREEN: u128 = 0;

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
#[derive(Debug, Clone, Copy)]
struct Rate {
    /// Units per microsecond.
    info_rate: f64,
    burst: u64,
    tokens: u64,
    /// Tokens the time since the origin has given, when last updated.
    tokens_last: u64,
    /// The color a packet gets when this rate has too few tokens.
    color: u128,
}

/// One meter cell: its rates, peak first.
#[derive(Debug, Clone, Default)]
pub struct MeterCell {
    rates: Vec<Rate>,
}

impl MeterCell {
    /// Sets the rates `(units per microsecond, burst)`, committed rate first as
    /// simple_switch_CLI gives them; refused when a later rate is below an earlier one.
    pub fn set_rates(&mut self, rates: &[(f64, u64)]) -> Result<(), String> {
        for w in rates.windows(2) {
            if w[1].0 < w[0].0 {
                return Err(format!("rate {} is below the rate {} before it", w[1].0, w[0].0));
            }
        }
        self.rates = rates
            .iter()
            .enumerate()
            .map(|(i, &(info_rate, burst))| Rate {
                info_rate,
                burst,
                tokens: burst,
                tokens_last: 0,
                color: i as u128 + 1,
            })
            .rev()
            .collect();
        Ok(())
    }

    /// The rates as set, committed first (empty when unconfigured).
    pub fn rates(&self) -> Vec<(f64, u64)> {
        self.rates.iter().rev().map(|r| (r.info_rate, r.burst)).collect()
    }

    /// Forgets the rates: the cell marks green again.
    pub fn reset(&mut self) {
        self.rates.clear();
    }

    /// The color of a packet of `units` at `micros` since the origin.
    pub fn execute(&mut self, micros: u64, units: u64) -> u128 {
        let mut color = GREEN;
        for rate in &mut self.rates {
            let since = (micros as f64 * rate.info_rate) as u64;
            let new = since.saturating_sub(rate.tokens_last);
            rate.tokens_last = since.max(rate.tokens_last);
            rate.tokens = (rate.tokens + new).min(rate.burst);
            if rate.tokens < units {
                color = rate.color;
                break;
            }
            rate.tokens -= units;
        }
        color
    }
}

/// An array of meter cells.
#[derive(Debug)]
pub struct MeterArray {
    /// Whether it meters bytes (else packets).
    pub bytes: bool,
    /// Its cells.
    pub cells: Box<[Mutex<MeterCell>]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_rate_meter_marks_yellow_past_its_committed_burst_and_red_past_its_peak() {
        let mut m = MeterCell::default();
        assert_eq!(m.execute(0, 1), GREEN, "unconfigured");
        // 1 packet per second committed with a burst of 2, 2 per second peak with a burst of 3.
        m.set_rates(&[(1e-6, 2), (2e-6, 3)]).unwrap();
        let colors: Vec<u128> = (0..4).map(|_| m.execute(0, 1)).collect();
        assert_eq!(colors, [0, 0, 1, 2], "green twice, then yellow, then red");
        // A second later both buckets have a token more.
        assert_eq!(m.execute(1_000_000, 1), 0);
        assert!(m.set_rates(&[(2.0, 1), (1.0, 1)]).is_err(), "peak below committed");
    }
}
