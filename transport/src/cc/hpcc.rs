//! HPCC (Li et al., SIGCOMM 2019) exactly as the ns-3 simulator of its authors implements it
//! (`alibaba-edu/High-Precision-Congestion-Control`, `rdma-hw.cc`, `HandleAckHp`/`UpdateRateHp`,
//! single-rate mode):
//!
//! 1. The first ACK only stores the hop records and sets `last_update_seq = snd_nxt`.
//! 2. Per hop: τ = Δts, txRate = ΔtxBytes·8/τ, u = txRate/B + min(qlen, qlen_prev)/(B·T);
//!    U_hop = max over hops, with its τ (capped at T).
//! 3. U ← (U·(T − τ) + U_hop·τ)/T, and c = U/η.
//! 4. c ≥ 1 or stage ≥ maxStage: R = Rc/c + R_AI, stage 0; else R = Rc + R_AI, stage + 1;
//!    clamped to [min rate, line rate], applied at once.
//! 5. An ACK beyond `last_update_seq` commits Rc and the stage and moves `last_update_seq` to
//!    snd_nxt (once per RTT); other ACKs only apply R (fast react) or, without fast react,
//!    change nothing.
//!
//! The window is W = W_max·R/R_line with W_max = line rate × T (ns-3 VAR_WIN). T is the largest
//! base RTT of the run's flows unless set (ns-3 GLOBAL_T: maxRtt).

use serde::{Deserialize, Serialize};

use super::{Ack, Controller, HopSample, PathInfo, bdp_bytes, check_fraction, check_time, check_utilization, scale_ns};
use int_format::int::Instructions;

/// HPCC's parameters.
///
/// Defaults are those of ns-3 `run.py --cc hp` (what the paper's experiments ran): η = 0.95,
/// maxStage = 0, fast react on, R_AI = line rate / 2500 (10 Mb/s at 25 Gb/s, `10*bw/25` Mb/s),
/// min rate = line rate / 25 (1 Gb/s at 25 Gb/s, MIN_RATE 1000 Mb/s). [`HpccConfig::ns3_rdma_hw`]
/// gives the `RdmaHw` class defaults (maxStage 5, R_AI 5 Mb/s, min rate 100 Mb/s at 25 Gb/s);
/// [`HpccConfig::paper`] the paper's suggestion (η 0.95, maxStage 5).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HpccConfig {
    /// T, the base RTT (ns); None: the largest base RTT of the run's flows (derived).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_rtt_ns: Option<u64>,
    /// η, target utilization.
    pub eta: f64,
    /// maxStage: additive-increase stages before a multiplicative step (0 = always multiplicative).
    pub max_stage: u32,
    /// R_AI as a fraction of the line rate.
    pub rate_ai_fraction: f64,
    /// Lowest rate as a fraction of the line rate.
    pub min_rate_fraction: f64,
    /// Apply the computed rate on every ACK, not only once per RTT.
    pub fast_react: bool,
    /// Use a window as well as the rate (ns-3 HAS_WIN/VAR_WIN).
    pub window: bool,
}

impl Default for HpccConfig {
    fn default() -> Self {
        HpccConfig {
            base_rtt_ns: None,
            eta: 0.95,
            max_stage: 0,
            rate_ai_fraction: 10.0 / 25_000.0,
            min_rate_fraction: 1.0 / 25.0,
            fast_react: true,
            window: true,
        }
    }
}

impl HpccConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check_utilization("eta", self.eta)?;
        check_fraction("rate_ai_fraction", self.rate_ai_fraction)?;
        check_fraction("min_rate_fraction", self.min_rate_fraction)?;
        check_time("base_rtt_ns", self.base_rtt_ns)
    }

    /// T on `path`.
    pub fn t_ns(&self, path: &PathInfo) -> u64 {
        self.base_rtt_ns.unwrap_or(path.fabric_rtt_ns).max(1)
    }

    /// The parameters a flow on `path` runs with (see [`super::ControllerConfig::resolve`]).
    pub fn resolved(&self, path: &PathInfo) -> HpccConfig {
        HpccConfig {
            base_rtt_ns: Some(self.t_ns(path)),
            ..self.clone()
        }
    }

    /// The same parameters with T (if set) `factor` times longer (time dilation).
    pub fn dilated(&self, factor: f64) -> HpccConfig {
        HpccConfig {
            base_rtt_ns: self.base_rtt_ns.map(|t| scale_ns(t, factor)),
            ..self.clone()
        }
    }

    /// ns-3 `RdmaHw` attribute defaults: η 0.95, maxStage 5, R_AI 5 Mb/s and min rate 100 Mb/s
    /// (scaled here from their 25 Gb/s reference).
    pub fn ns3_rdma_hw() -> HpccConfig {
        HpccConfig {
            max_stage: 5,
            rate_ai_fraction: 5.0 / 25_000.0,
            min_rate_fraction: 100.0 / 25_000.0,
            ..Self::default()
        }
    }

    /// The paper's suggested values (Li et al. 2019): η 95 %, maxStage 5.
    pub fn paper() -> HpccConfig {
        HpccConfig {
            max_stage: 5,
            ..Self::default()
        }
    }

    /// The paper's values with its additive-increase rule for `flows` competing flows,
    /// W_AI = W_init·(1 − η)/N, i.e. R_AI = line rate·(1 − η)/N. Convergence to fairness takes
    /// a number of RTTs set by R_AI, so this matters when RTTs are long (an emulation's are).
    pub fn paper_for(flows: u32) -> HpccConfig {
        let base = Self::paper();
        HpccConfig {
            rate_ai_fraction: (1.0 - base.eta) / f64::from(flows.max(1)),
            ..base
        }
    }
}

/// HPCC state of one flow.
#[derive(Debug, Clone)]
pub struct Hpcc {
    config: HpccConfig,
    path: PathInfo,
    /// T (ns).
    t_ns: u64,
    /// Committed rate Rc.
    rc: f64,
    /// Current (applied) rate.
    rate: f64,
    inc_stage: u32,
    last_update_seq: u64,
    u: f64,
    hops: Vec<HopSample>,
    started: bool,
}

impl Hpcc {
    /// Starts at line rate.
    pub fn new(config: HpccConfig, path: PathInfo) -> Hpcc {
        let line = path.line_rate_bps as f64;
        Hpcc {
            t_ns: config.t_ns(&path),
            config,
            path,
            rc: line,
            rate: line,
            inc_stage: 0,
            last_update_seq: 0,
            u: 1.0,
            hops: Vec::with_capacity(8),
            started: false,
        }
    }

    fn rate_ai(&self) -> f64 {
        self.config.rate_ai_fraction * self.path.line_rate_bps as f64
    }

    fn min_rate(&self) -> f64 {
        self.config.min_rate_fraction * self.path.line_rate_bps as f64
    }

    /// ns-3 `UpdateRateHp`.
    fn update(&mut self, ack: &Ack<'_>, fast_react: bool) {
        let samples = ack.hops.iter().map(HopSample::from_hop);
        if ack.hops.is_empty() || samples.clone().any(|s| s.is_none()) {
            return;
        }
        if self.started && ack.after_stall && self.hops.len() == ack.hops.len() {
            self.hops.clear();
            self.hops.extend(samples.flatten());
            return;
        }
        if !self.started || self.hops.len() != ack.hops.len() {
            // First feedback, or the path changed: keep the records and wait for the next.
            self.hops.clear();
            self.hops.extend(samples.flatten());
            self.started = true;
            self.last_update_seq = ack.sent_bytes;
            return;
        }
        let t = self.t_ns;
        let (mut max_u, mut dt, mut updated) = (0.0f64, 0u64, false);
        for (prev, s) in self.hops.iter_mut().zip(samples.flatten()) {
            if let Some((u, tau)) = s.utilization(prev, t) {
                updated = true;
                if u > max_u {
                    max_u = u;
                    dt = tau;
                }
            }
            *prev = s;
        }
        if updated {
            let dt = dt.min(t) as f64;
            let t = t as f64;
            self.u = (self.u * (t - dt) + max_u * dt) / t;
            let c = self.u / self.config.eta;
            let (new_rate, new_stage) = if c >= 1.0 || self.inc_stage >= self.config.max_stage {
                (self.rc / c + self.rate_ai(), 0)
            } else {
                (self.rc + self.rate_ai(), self.inc_stage + 1)
            };
            let new_rate = new_rate.clamp(self.min_rate(), self.path.line_rate_bps as f64);
            self.rate = new_rate;
            if !fast_react {
                self.rc = new_rate;
                self.inc_stage = new_stage;
            }
        }
        if !fast_react && ack.sent_bytes > self.last_update_seq {
            self.last_update_seq = ack.sent_bytes;
        }
    }

    /// The committed rate Rc (b/s).
    pub fn committed_rate(&self) -> f64 {
        self.rc
    }
}

impl Controller for Hpcc {
    fn name(&self) -> &'static str {
        "hpcc"
    }

    fn int_instructions(&self) -> Option<Instructions> {
        Some(Instructions::HPCC)
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        if !self.started || ack.acked_bytes > self.last_update_seq {
            self.update(ack, false);
        } else if self.config.fast_react {
            self.update(ack, true);
        }
    }

    fn rate_bps(&self) -> u64 {
        self.rate as u64
    }

    fn window_bytes(&self) -> Option<u64> {
        self.config.window.then(|| {
            let w_max = bdp_bytes(self.path.line_rate_bps, self.t_ns) as f64;
            let w = w_max * self.rate / self.path.line_rate_bps as f64;
            (w as u64).max(self.path.mtu_wire_bytes)
        })
    }

    fn utilization(&self) -> Option<f64> {
        Some(self.u)
    }
}

#[cfg(test)]
mod tests {
    use int_format::int::HopRecord;

    use super::*;
    use crate::cc::fixtures;

    /// 10 Gb/s NIC, T = 10 us (BDP 12,500 B).
    fn path() -> PathInfo {
        fixtures::path(1024)
    }

    fn hop(ts: u64, tx: u64, q: u32, rate_gbps: u32) -> HopRecord {
        HopRecord {
            egress_ts: Some(ts),
            tx_bytes: Some(tx),
            queue_occupancy: Some(q),
            rate_kbps: Some(rate_gbps * 1_000_000),
            ..HopRecord::default()
        }
    }

    fn ack(now: u64, acked: u64, sent: u64, hops: &[HopRecord]) -> Ack<'_> {
        fixtures::ack(now, acked, sent, None, hops)
    }

    fn config(max_stage: u32) -> HpccConfig {
        HpccConfig {
            base_rtt_ns: None,
            eta: 0.95,
            max_stage,
            rate_ai_fraction: 0.001,
            min_rate_fraction: 0.01,
            fast_react: true,
            window: true,
        }
    }

    #[test]
    fn first_ack_only_stores() {
        let mut h = Hpcc::new(config(0), path());
        h.on_ack(&ack(0, 1000, 50_000, &[hop(1000, 0, 0, 10)]));
        assert_eq!(h.rate_bps(), 10_000_000_000);
        assert_eq!(h.last_update_seq, 50_000);
    }

    #[test]
    fn multi_hop_takes_the_most_utilized_hop_and_commits_once_per_rtt() {
        let mut h = Hpcc::new(config(0), path());
        // Hop 1 at 10 Gb/s half busy; hop 2 at 10 Gb/s fully busy with 12,500 B queued.
        h.on_ack(&ack(0, 1000, 50_000, &[hop(0, 0, 0, 10), hop(0, 0, 12_500, 10)]));
        // 5 us later: hop 1 sent 3,125 B (5 Gb/s), hop 2 sent 6,250 B (10 Gb/s), queue steady.
        h.on_ack(&ack(
            5_000,
            60_000,
            100_000,
            &[hop(5_000, 3_125, 0, 10), hop(5_000, 6_250, 12_500, 10)],
        ));
        // Hop 2: u = 1.0 + 12,500·8/(10e9·10e-6) = 2.0; τ = 5 us; U = (1·5 + 2·5)/10 = 1.5.
        let u = 1.5;
        let c: f64 = u / 0.95;
        let expect = 10e9 / c + 10e6;
        assert!((h.utilization().unwrap() - u).abs() < 1e-12);
        assert!(
            (h.rate_bps() as f64 - expect).abs() < 2.0,
            "{} vs {expect}",
            h.rate_bps()
        );
        assert!(
            (h.committed_rate() - expect).abs() < 1e-3,
            "an ACK past last_update_seq commits"
        );
        assert_eq!(h.last_update_seq, 100_000);
        // Next ACK inside the same RTT (acked 70,000 < 100,000): fast react from the committed Rc.
        h.on_ack(&ack(
            10_000,
            70_000,
            120_000,
            &[hop(10_000, 6_250, 0, 10), hop(10_000, 12_500, 12_500, 10)],
        ));
        let u2 = (u * 5.0 + 2.0 * 5.0) / 10.0;
        let fast = expect / (u2 / 0.95) + 10e6;
        assert!((h.rate_bps() as f64 - fast).abs() < 2.0);
        assert!((h.committed_rate() - expect).abs() < 1e-3, "fast react does not commit");
        assert_eq!(h.last_update_seq, 100_000);
    }

    #[test]
    fn an_ack_after_a_stall_is_a_new_baseline() {
        let mut h = Hpcc::new(config(2), path());
        h.on_ack(&ack(0, 1, 10, &[hop(0, 0, 11_250, 10)]));
        h.on_ack(&ack(10_000, 20, 30, &[hop(10_000, 12_500, 11_250, 10)]));
        let (rate, u) = (h.rate_bps(), h.utilization());
        // The sender stalled 1 ms: the link sent only 1,000 B meanwhile. As a sample that is
        // U = 0.0008 and a jump to line rate; flagged, it only replaces the stored hop.
        let stalled = [hop(1_010_000, 13_500, 0, 10)];
        h.on_ack(&Ack {
            after_stall: true,
            ..ack(1_010_000, 40, 50, &stalled)
        });
        assert_eq!((h.rate_bps(), h.utilization()), (rate, u));
        // The next ACK measures from the new baseline: 10 us, line busy, no queue: U moves
        // from 1.9 towards 1.0 (τ = T), c = 1/0.95, R = 5.01 G·0.95 + 10 M.
        h.on_ack(&ack(1_020_000, 60, 70, &[hop(1_020_000, 26_000, 0, 10)]));
        assert_eq!(h.utilization(), Some(1.0));
        assert_eq!(h.rate_bps(), (5_010_000_000.0 * 0.95 + 10e6) as u64);
    }

    #[test]
    fn additive_stages_until_max_stage() {
        let mut h = Hpcc::new(config(2), path());
        // Every ACK here acknowledges past last_update_seq, so every update commits.
        h.on_ack(&ack(0, 1, 10, &[hop(0, 0, 11_250, 10)]));
        // Line busy (12,500 B in 10 us = 10 Gb/s) and 11,250 B queued: u = 1 + 0.9 = 1.9 = U,
        // c = 2: multiplicative, R = 10 G/2 + 10 M.
        h.on_ack(&ack(10_000, 20, 30, &[hop(10_000, 12_500, 11_250, 10)]));
        assert_eq!(h.rate_bps(), 5_010_000_000);
        assert_eq!(h.inc_stage, 0);
        // Then 40 % busy, no queue: U = 0.4, c = 0.421 < 1: two additive stages...
        h.on_ack(&ack(20_000, 40, 50, &[hop(20_000, 17_500, 0, 10)]));
        assert_eq!((h.rate_bps(), h.inc_stage), (5_020_000_000, 1));
        h.on_ack(&ack(30_000, 60, 70, &[hop(30_000, 22_500, 0, 10)]));
        assert_eq!((h.rate_bps(), h.inc_stage), (5_030_000_000, 2));
        // ...then, at maxStage, multiplicative: 5.03 G / (0.4/0.95) + 10 M, clamped to line rate.
        h.on_ack(&ack(40_000, 80, 90, &[hop(40_000, 27_500, 0, 10)]));
        assert_eq!((h.rate_bps(), h.inc_stage), (10_000_000_000, 0));
    }

    #[test]
    fn without_fast_react_acks_inside_the_rtt_change_nothing() {
        let mut h = Hpcc::new(
            HpccConfig {
                fast_react: false,
                ..config(0)
            },
            path(),
        );
        h.on_ack(&ack(0, 1, 1_000, &[hop(0, 0, 11_250, 10)]));
        h.on_ack(&ack(10_000, 500, 2_000, &[hop(10_000, 12_500, 11_250, 10)]));
        assert_eq!(h.rate_bps(), 10_000_000_000, "acked 500 <= last_update_seq 1,000");
    }

    #[test]
    fn wraparound_of_ts_and_tx_bytes() {
        let mut h = Hpcc::new(config(0), path());
        let (t0, b0) = (u64::MAX - 2_000, u64::MAX - 1_000);
        h.on_ack(&ack(0, 1, 10, &[hop(t0, b0, 0, 10)]));
        // 10 us later (wrapped), 12,500 B later (wrapped): exactly line rate, no queue: u = 1.
        h.on_ack(&ack(
            10_000,
            20,
            30,
            &[hop(t0.wrapping_add(10_000), b0.wrapping_add(12_500), 0, 10)],
        ));
        assert!((h.utilization().unwrap() - 1.0).abs() < 1e-12);
        let expect = 10e9 / (1.0 / 0.95) + 10e6;
        assert!((h.rate_bps() as f64 - expect).abs() < 2.0);
    }

    #[test]
    fn rate_is_clamped_and_window_follows_rate() {
        let mut h = Hpcc::new(config(0), path());
        h.on_ack(&ack(0, 1, 10, &[hop(0, 0, 16_000_000, 10)]));
        h.on_ack(&ack(10_000, 20, 30, &[hop(10_000, 12_500, 16_000_000, 10)]));
        assert_eq!(h.rate_bps(), 100_000_000, "min rate = 1 % of line rate");
        assert_eq!(h.window_bytes(), Some(1100), "at least one packet");
        let fresh = Hpcc::new(config(0), path());
        assert_eq!(fresh.window_bytes(), Some(12_500), "BDP at line rate");
    }

    #[test]
    fn paper_rule_for_additive_increase() {
        let c = HpccConfig::paper_for(4);
        assert!((c.rate_ai_fraction - 0.0125).abs() < 1e-12, "(1 - 0.95)/4");
        assert_eq!((c.eta, c.max_stage), (0.95, 5));
    }

    #[test]
    fn acks_without_int_change_nothing() {
        let mut h = Hpcc::new(config(0), path());
        h.on_ack(&ack(0, 1, 10, &[]));
        h.on_ack(&ack(1, 2, 20, &[HopRecord::default()]));
        assert_eq!(h.rate_bps(), 10_000_000_000);
    }
}
