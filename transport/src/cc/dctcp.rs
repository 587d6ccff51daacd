//! DCTCP-style rate control for RDMA, as the ns-3 HPCC simulator implements it
//! (`rdma-hw.cc`, `HandleAckDctcp`): α ← (1 − g)·α + g·F once per window of data (F the
//! fraction of packets whose ECN mark came back), a decrease R ← max(min, R·(1 − α/2)) on a
//! mark unless already in CWR (until everything sent at the decrease is acknowledged), and an
//! additive step R_AI per window while not in CWR.
//!
//! ns-3 echoes each mark in a flag of the ACK; intlab's receiver sends CNPs, so a CNP is the
//! echo of one mark: run DCTCP with `transport.cnp_interval: 0` (a CNP per marked packet), or
//! F counts at most one mark per CNP interval.

use serde::Deserialize;

use super::{Ack, Controller, PathInfo, check_fraction};

/// DCTCP's parameters. Defaults are the ns-3 `RdmaHw` attributes with run.py's values: g =
/// 1/16 (EwmaGain), R_AI 1000 Mb/s at 25 Gb/s (DctcpRateAI, as a fraction of the line rate),
/// min rate 100 Mb/s at 25 Gb/s.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DctcpConfig {
    /// g, the gain of α's moving average.
    pub g: f64,
    /// R_AI per window as a fraction of the line rate.
    pub rate_ai_fraction: f64,
    /// Lowest rate as a fraction of the line rate.
    pub min_rate_fraction: f64,
}

impl DctcpConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check_fraction("g", self.g)?;
        check_fraction("rate_ai_fraction", self.rate_ai_fraction)?;
        check_fraction("min_rate_fraction", self.min_rate_fraction)
    }
}

impl Default for DctcpConfig {
    fn default() -> Self {
        DctcpConfig {
            g: 1.0 / 16.0,
            rate_ai_fraction: 1000.0 / 25_000.0,
            min_rate_fraction: 100.0 / 25_000.0,
        }
    }
}

/// DCTCP state of one flow.
#[derive(Debug, Clone)]
pub struct Dctcp {
    config: DctcpConfig,
    line_rate: f64,
    mtu: u64,
    rate: f64,
    alpha: f64,
    /// Marks echoed in the current window.
    marks: u64,
    /// Packets the current window holds.
    batch_packets: u64,
    /// snd_nxt at the start of the current window; None before the first ACK.
    last_update_seq: Option<u64>,
    /// In CWR until an ACK passes this snd_nxt.
    cwr_until: Option<u64>,
    sent_bytes: u64,
}

impl Dctcp {
    /// A flow starting at line rate with α = 1.
    pub fn new(config: DctcpConfig, path: PathInfo) -> Dctcp {
        let line_rate = path.line_rate_bps as f64;
        Dctcp {
            config,
            line_rate,
            mtu: path.mtu_bytes.max(1),
            rate: line_rate,
            alpha: 1.0,
            marks: 0,
            batch_packets: 1,
            last_update_seq: None,
            cwr_until: None,
            sent_bytes: 0,
        }
    }

    /// α now.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
}

impl Controller for Dctcp {
    fn name(&self) -> &'static str {
        "dctcp"
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        self.sent_bytes = ack.sent_bytes;
        let new_window = match self.last_update_seq {
            None => {
                self.last_update_seq = Some(ack.sent_bytes);
                self.batch_packets = ack.sent_bytes / self.mtu + 1;
                true
            }
            Some(seq) if ack.acked_bytes > seq => {
                let fraction = (self.marks as f64 / self.batch_packets as f64).min(1.0);
                self.alpha = (1.0 - self.config.g) * self.alpha + self.config.g * fraction;
                self.last_update_seq = Some(ack.sent_bytes);
                self.marks = 0;
                self.batch_packets = ack.sent_bytes.saturating_sub(ack.acked_bytes) / self.mtu + 1;
                true
            }
            Some(_) => false,
        };
        if self.cwr_until.is_some_and(|h| ack.acked_bytes > h) {
            self.cwr_until = None;
        }
        if new_window && self.cwr_until.is_none() {
            self.rate = (self.rate + self.config.rate_ai_fraction * self.line_rate).min(self.line_rate);
        }
    }

    fn on_cnp(&mut self, _now_ns: u64) {
        self.marks += 1;
        if self.cwr_until.is_none() {
            self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.config.min_rate_fraction * self.line_rate);
            self.cwr_until = Some(self.sent_bytes);
        }
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
        fixtures::path(1000)
    }

    fn config() -> DctcpConfig {
        DctcpConfig {
            g: 0.5,
            rate_ai_fraction: 0.01,
            min_rate_fraction: 0.01,
        }
    }

    fn ack(acked: u64, sent: u64) -> Ack<'static> {
        fixtures::ack(0, acked, sent, None, &[])
    }

    #[test]
    fn a_mark_cuts_once_per_window_by_alpha_over_two() {
        let mut d = Dctcp::new(config(), path());
        // First ACK: window of 9,999/1000 + 1 = 10 packets up to snd_nxt 9,999; AI capped.
        d.on_ack(&ack(1_000, 9_999));
        assert_eq!(d.rate_bps(), 10_000_000_000);
        // Two marks in the window: one cut (α = 1: halve), the second is inside CWR.
        d.on_cnp(0);
        d.on_cnp(0);
        assert_eq!(d.rate_bps(), 5_000_000_000);
        // The window ends (ACK past 9,999): α = 0.5·1 + 0.5·(2/10) = 0.6; CWR ends too (past
        // snd_nxt at the cut, 9,999); additive step.
        d.on_ack(&ack(10_000, 20_000));
        assert!((d.alpha() - 0.6).abs() < 1e-12, "{}", d.alpha());
        assert_eq!(d.rate_bps(), 5_100_000_000);
        // Next mark: R·(1 − 0.3).
        d.on_cnp(0);
        assert_eq!(d.rate_bps(), (5.1e9 * 0.7) as u64);
    }

    #[test]
    fn alpha_decays_without_marks_and_rate_grows_per_window_outside_cwr() {
        let mut d = Dctcp::new(config(), path());
        d.on_ack(&ack(1_000, 10_000));
        d.on_cnp(0);
        assert_eq!(d.rate_bps(), 5_000_000_000);
        // Inside the window and in CWR: nothing.
        d.on_ack(&ack(5_000, 12_000));
        assert_eq!(d.rate_bps(), 5_000_000_000);
        // Window ends at 10,000 (α = 0.5 + 0.5·1/11): CWR ended at 10,000 too: +1 %.
        d.on_ack(&ack(10_001, 20_000));
        assert_eq!(d.rate_bps(), 5_100_000_000);
        let a = d.alpha();
        assert!((a - (0.5 + 0.5 / 11.0)).abs() < 1e-12, "{a}");
        // A window without marks: α halves, +1 %.
        d.on_ack(&ack(20_001, 30_000));
        assert!((d.alpha() - a / 2.0).abs() < 1e-12);
        assert_eq!(d.rate_bps(), 5_200_000_000);
    }
}
