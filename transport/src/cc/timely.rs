//! TIMELY (Mittal et al., SIGCOMM 2015) as the ns-3 HPCC simulator implements it
//! (`rdma-hw.cc`, `UpdateRateTimely`): a rate controller on the RTT and its gradient, updated
//! once per RTT (an ACK beyond the snd_nxt of the last update); other ACKs change nothing.
//!
//! With `rtt` the sample of the ACK and `last` the one of the previous update:
//! rtt_diff ← (1 − α)·rtt_diff + α·(rtt − last); gradient = rtt_diff / min_rtt.
//! - rtt < T_low, or T_low ≤ rtt ≤ T_high with gradient ≤ 0: R ← R + R_AI (R_HAI from the
//!   sixth increase in a row), capped at line rate;
//! - rtt > T_high: R ← R·(1 − β·(1 − T_high/rtt));
//! - otherwise: R ← R·max(0, 1 − β·gradient); decreases floor at the minimum rate.
//!
//! The first RTT only records its sample. RTT samples are the sender's own (packets sent once).

use serde::{Deserialize, Serialize};

use super::{Ack, Controller, PathInfo, check, check_fraction, check_time, scale_ns};

/// Consecutive increases after which R_HAI replaces R_AI (fixed at 5 in ns-3).
const HAI_AFTER: u32 = 5;

/// TIMELY's parameters. Defaults are the ns-3 `RdmaHw` attributes: α 0.875, β 0.8, R_AI 5 Mb/s
/// and R_HAI 50 Mb/s at 25 Gb/s (as fractions of the line rate), min rate 100 Mb/s at 25 Gb/s;
/// its thresholds T_low 50 µs and T_high 500 µs against a min RTT of 20 µs become, when not
/// set, 2.5 and 25 times the flow's base RTT, with the base RTT as the min RTT.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimelyConfig {
    /// α, the weight of the newest RTT difference.
    pub alpha: f64,
    /// β, the decrease factor.
    pub beta: f64,
    /// T_low (ns): below it, always increase; None: 2.5 × the min RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_low_ns: Option<u64>,
    /// T_high (ns): above it, always decrease; None: 25 × the min RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_high_ns: Option<u64>,
    /// The RTT that normalizes the gradient (ns); None: the flow's base RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt_ns: Option<u64>,
    /// R_AI as a fraction of the line rate.
    pub rate_ai_fraction: f64,
    /// R_HAI as a fraction of the line rate.
    pub rate_hai_fraction: f64,
    /// Lowest rate as a fraction of the line rate.
    pub min_rate_fraction: f64,
}

impl Default for TimelyConfig {
    fn default() -> Self {
        TimelyConfig {
            alpha: 0.875,
            beta: 0.8,
            t_low_ns: None,
            t_high_ns: None,
            min_rtt_ns: None,
            rate_ai_fraction: 5.0 / 25_000.0,
            rate_hai_fraction: 50.0 / 25_000.0,
            min_rate_fraction: 100.0 / 25_000.0,
        }
    }
}

impl TimelyConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check_fraction("alpha", self.alpha)?;
        check_fraction("beta", self.beta)?;
        check_fraction("rate_ai_fraction", self.rate_ai_fraction)?;
        check_fraction("rate_hai_fraction", self.rate_hai_fraction)?;
        check_fraction("min_rate_fraction", self.min_rate_fraction)?;
        check_time("min_rtt_ns", self.min_rtt_ns)?;
        if let (Some(lo), Some(hi)) = (self.t_low_ns, self.t_high_ns) {
            check(lo < hi, "t_low_ns", lo, "less than t_high_ns")?;
        }
        Ok(())
    }

    /// The parameters a flow on `path` runs with (see [`super::ControllerConfig::resolve`]).
    pub fn resolved(&self, path: &PathInfo) -> TimelyConfig {
        let min_rtt = self.min_rtt_ns.unwrap_or(path.base_rtt_ns).max(1);
        TimelyConfig {
            t_low_ns: Some(self.t_low_ns.unwrap_or(min_rtt * 5 / 2)),
            t_high_ns: Some(self.t_high_ns.unwrap_or(min_rtt * 25)),
            min_rtt_ns: Some(min_rtt),
            ..self.clone()
        }
    }

    /// The same parameters with every time that is set `factor` times longer (time dilation).
    pub fn dilated(&self, factor: f64) -> TimelyConfig {
        let scale = |ns: Option<u64>| ns.map(|ns| scale_ns(ns, factor));
        TimelyConfig {
            t_low_ns: scale(self.t_low_ns),
            t_high_ns: scale(self.t_high_ns),
            min_rtt_ns: scale(self.min_rtt_ns),
            ..self.clone()
        }
    }
}

/// TIMELY state of one flow.
#[derive(Debug, Clone)]
pub struct Timely {
    config: TimelyConfig,
    /// T_low, T_high and the min RTT (ns).
    t_low_ns: u64,
    t_high_ns: u64,
    min_rtt_ns: u64,
    line_rate: f64,
    rate: f64,
    rtt_diff: f64,
    last_rtt_ns: u64,
    inc_stage: u32,
    /// snd_nxt at the last update; None before the first RTT sample.
    last_update_seq: Option<u64>,
}

impl Timely {
    /// A flow starting at line rate.
    pub fn new(config: TimelyConfig, path: PathInfo) -> Timely {
        let line_rate = path.line_rate_bps as f64;
        let config = config.resolved(&path);
        Timely {
            t_low_ns: config.t_low_ns.unwrap_or(0),
            t_high_ns: config.t_high_ns.unwrap_or(0),
            min_rtt_ns: config.min_rtt_ns.unwrap_or(1).max(1),
            config,
            line_rate,
            rate: line_rate,
            rtt_diff: 0.0,
            last_rtt_ns: 0,
            inc_stage: 0,
            last_update_seq: None,
        }
    }

    /// The smoothed RTT difference (ns).
    pub fn rtt_diff_ns(&self) -> f64 {
        self.rtt_diff
    }
}

impl Controller for Timely {
    fn name(&self) -> &'static str {
        "timely"
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        let Some(rtt) = ack.rtt_ns else { return };
        let Some(last_seq) = self.last_update_seq else {
            self.last_update_seq = Some(ack.sent_bytes);
            self.last_rtt_ns = rtt;
            return;
        };
        if ack.acked_bytes <= last_seq {
            return;
        }
        let c = &self.config;
        let new_diff = rtt as f64 - self.last_rtt_ns as f64;
        let rtt_diff = (1.0 - c.alpha) * self.rtt_diff + c.alpha * new_diff;
        let gradient = rtt_diff / self.min_rtt_ns as f64;
        let factor = if rtt < self.t_low_ns {
            None
        } else if rtt > self.t_high_ns {
            Some(1.0 - c.beta * (1.0 - self.t_high_ns as f64 / rtt as f64))
        } else if gradient <= 0.0 {
            None
        } else {
            Some((1.0 - c.beta * gradient).max(0.0))
        };
        match factor {
            None => {
                let step = if self.inc_stage < HAI_AFTER {
                    c.rate_ai_fraction
                } else {
                    c.rate_hai_fraction
                };
                self.rate = (self.rate + step * self.line_rate).min(self.line_rate);
                self.inc_stage += 1;
            }
            Some(f) => {
                self.rate = (self.rate * f).max(c.min_rate_fraction * self.line_rate);
                self.inc_stage = 0;
            }
        }
        self.rtt_diff = rtt_diff;
        self.last_update_seq = Some(ack.sent_bytes.max(last_seq));
        self.last_rtt_ns = rtt;
    }

    fn rate_bps(&self) -> u64 {
        self.rate as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::fixtures;

    fn path() -> PathInfo {
        fixtures::path(1024)
    }

    /// Round numbers: α 0.5, β 0.5, T_low 10 us, T_high 100 us, min RTT 10 us, R_AI 1 %,
    /// R_HAI 10 %, min rate 1 %.
    fn config() -> TimelyConfig {
        TimelyConfig {
            alpha: 0.5,
            beta: 0.5,
            t_low_ns: Some(10_000),
            t_high_ns: Some(100_000),
            min_rtt_ns: Some(10_000),
            rate_ai_fraction: 0.01,
            rate_hai_fraction: 0.1,
            min_rate_fraction: 0.01,
        }
    }

    fn ack(acked: u64, sent: u64, rtt: u64) -> Ack<'static> {
        fixtures::ack(0, acked, sent, Some(rtt), &[])
    }

    #[test]
    fn gradient_decides_between_thresholds_once_per_rtt() {
        let mut t = Timely::new(config(), path());
        t.on_ack(&ack(1_000, 10_000, 20_000)); // first RTT: records 20 us, snd_nxt 10,000
        assert_eq!(t.rate_bps(), 10_000_000_000);
        t.on_ack(&ack(5_000, 12_000, 90_000)); // inside the RTT: nothing
        assert_eq!(t.rate_bps(), 10_000_000_000);
        // Rising: diff 0.5·0 + 0.5·(40 − 20) us = 10 us, gradient 1: R·(1 − 0.5).
        t.on_ack(&ack(11_000, 20_000, 40_000));
        assert_eq!(t.rtt_diff_ns(), 10_000.0);
        assert_eq!(t.rate_bps(), 5_000_000_000);
        // Falling: diff 0.5·10 + 0.5·(30 − 40) = 0: gradient 0: additive.
        t.on_ack(&ack(21_000, 30_000, 30_000));
        assert_eq!(t.rate_bps(), 5_100_000_000);
    }

    #[test]
    fn thresholds_override_the_gradient_and_hyper_increase_follows_five_increases() {
        let mut t = Timely::new(config(), path());
        t.on_ack(&ack(1, 10, 200_000));
        // Above T_high: R·(1 − 0.5·(1 − 100/200)) = 0.75 R, whatever the gradient.
        t.on_ack(&ack(11, 20, 200_000));
        assert_eq!(t.rate_bps(), 7_500_000_000);
        // Below T_low: increase even though the RTT rose (diff > 0).
        let mut seq = 20;
        for k in 0..5 {
            t.on_ack(&ack(seq + 1, seq + 10, 5_000 + k));
            seq += 10;
        }
        assert_eq!(t.rate_bps(), 8_000_000_000, "five additive steps of 100 Mb/s");
        t.on_ack(&ack(seq + 1, seq + 10, 5_000));
        assert_eq!(t.rate_bps(), 9_000_000_000, "the sixth is hyper: 1 Gb/s");
        t.on_ack(&ack(seq + 11, seq + 20, 5_000));
        assert_eq!(t.rate_bps(), 10_000_000_000, "capped at line rate");
    }

    #[test]
    fn decreases_stop_at_the_minimum_and_retransmitted_samples_are_ignored() {
        let mut t = Timely::new(config(), path());
        t.on_ack(&ack(1, 10, 10_000));
        // Gradient 0.5·(80 us)/10 us = 4: factor max(0, 1 − 2) = 0: floor at 1 %.
        t.on_ack(&ack(11, 20, 90_000));
        assert_eq!(t.rate_bps(), 100_000_000);
        let before = t.rtt_diff_ns();
        t.on_ack(&Ack {
            rtt_ns: None,
            ..ack(21, 30, 0)
        });
        assert_eq!(t.rtt_diff_ns(), before, "no RTT sample, no update");
    }
}
