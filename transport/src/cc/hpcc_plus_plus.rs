//! HPCC++ as a PD controller, the law of the public hpcc-tuning study
//! (`XhovaniM8/hpcc-tuning`, `src/hpcc_plus_plus.h`, and its blog post "HPCC parameter tuning"):
//!
//! W ← clamp(W · clamp(1 − α(U − η) − β·ΔU, 0.5, 1.5) + W_AI, 0.1·BDP, 2·BDP), R = W/T.
//!
//! Units and sampling, chosen here because the sources mix them: W, W_AI and BDP are bytes;
//! U = max over hops of qlen/(B·T) + txRate/B (dimensionless, no EWMA: each sample stands on its
//! own, as in the study); ΔU is U minus the U of the previous update (per feedback sample, not per
//! second, which would make β·ΔU/dt enormous at microsecond steps); an update happens at most once
//! per `sample_interval_ns` of hop time (T_s; default one base RTT), from the newest ACK, because
//! applying the multiplicative law on every per-packet ACK would compound it W/MTU times an RTT.
//!
//! The four ablations of the study: `pd` (the law above), `p_only` (β = 0), `pd_no_cwnd_clamp`
//! (no [0.1, 2]·BDP bound; W stays at least one packet), `pd_no_mult_clamp` (no [0.5, 1.5] bound
//! on the factor; it stays at least 0).

use serde::{Deserialize, Serialize};

use super::{Ack, Controller, HopSample, PathInfo, bdp_bytes, check, check_time, check_utilization, scale_ns};
use int_format::int::Instructions;

/// Which safeguards and terms are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ablation {
    /// Full PD law with both clamps.
    #[default]
    Pd,
    /// Proportional term only (β = 0).
    POnly,
    /// PD without the absolute window bound.
    PdNoCwndClamp,
    /// PD without the multiplicative-factor bound.
    PdNoMultClamp,
}

/// HPCC++ parameters. Defaults are the study's `hpcc_plus_plus.h`: α 0.1, β 0.02, η 0.95,
/// W_AI 1000 B; T_s here defaults to one base RTT (the header's 10 ms is a Python-model value;
/// its experiments used 10 us at T = 12 us).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HpccPlusPlusConfig {
    /// T, the base RTT (ns); None: the largest base RTT of the run's flows, as HPCC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_rtt_ns: Option<u64>,
    /// α, proportional gain.
    pub alpha: f64,
    /// β, derivative gain (per feedback sample).
    pub beta: f64,
    /// η, target utilization.
    pub eta: f64,
    /// W_AI, additive increase per update (bytes).
    pub w_ai_bytes: f64,
    /// T_s, shortest time between updates (ns); None: T.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_interval_ns: Option<u64>,
    /// Which variant.
    pub ablation: Ablation,
}

impl Default for HpccPlusPlusConfig {
    fn default() -> Self {
        HpccPlusPlusConfig {
            base_rtt_ns: None,
            alpha: 0.1,
            beta: 0.02,
            eta: 0.95,
            w_ai_bytes: 1000.0,
            sample_interval_ns: None,
            ablation: Ablation::Pd,
        }
    }
}

impl HpccPlusPlusConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check(
            self.alpha.is_finite() && self.alpha > 0.0,
            "alpha",
            self.alpha,
            "a gain above 0",
        )?;
        check(
            self.beta.is_finite() && self.beta >= 0.0,
            "beta",
            self.beta,
            "a gain of at least 0",
        )?;
        check_utilization("eta", self.eta)?;
        check(
            self.w_ai_bytes.is_finite() && self.w_ai_bytes >= 0.0,
            "w_ai_bytes",
            self.w_ai_bytes,
            "bytes, at least 0",
        )?;
        check_time("base_rtt_ns", self.base_rtt_ns)?;
        check_time("sample_interval_ns", self.sample_interval_ns)
    }

    /// T on `path`.
    pub fn t_ns(&self, path: &PathInfo) -> u64 {
        self.base_rtt_ns.unwrap_or(path.fabric_rtt_ns).max(1)
    }

    /// T_s on `path`.
    pub fn sample_interval(&self, path: &PathInfo) -> u64 {
        self.sample_interval_ns.unwrap_or_else(|| self.t_ns(path))
    }

    /// The parameters a flow on `path` runs with (see [`super::ControllerConfig::resolve`]).
    pub fn resolved(&self, path: &PathInfo) -> HpccPlusPlusConfig {
        HpccPlusPlusConfig {
            base_rtt_ns: Some(self.t_ns(path)),
            sample_interval_ns: Some(self.sample_interval(path)),
            ..self.clone()
        }
    }

    /// The same parameters with the times that are set `factor` times longer (time dilation).
    pub fn dilated(&self, factor: f64) -> HpccPlusPlusConfig {
        HpccPlusPlusConfig {
            base_rtt_ns: self.base_rtt_ns.map(|t| scale_ns(t, factor)),
            sample_interval_ns: self.sample_interval_ns.map(|t| scale_ns(t, factor)),
            ..self.clone()
        }
    }
}

/// HPCC++ state of one flow.
#[derive(Debug, Clone)]
pub struct HpccPlusPlus {
    config: HpccPlusPlusConfig,
    path: PathInfo,
    /// T (ns).
    t_ns: u64,
    /// T_s (ns).
    interval_ns: u64,
    window: f64,
    u: Option<f64>,
    hops: Vec<HopSample>,
    /// Hop time of the last update (newest hop's ts).
    last_update_ts: Option<u64>,
}

impl HpccPlusPlus {
    /// Starts with W = BDP (R = line rate).
    pub fn new(config: HpccPlusPlusConfig, path: PathInfo) -> HpccPlusPlus {
        let t_ns = config.t_ns(&path);
        HpccPlusPlus {
            window: bdp_bytes(path.line_rate_bps, t_ns) as f64,
            t_ns,
            interval_ns: config.sample_interval(&path),
            config,
            path,
            u: None,
            hops: Vec::new(),
            last_update_ts: None,
        }
    }

    /// The PD step from utilization `u` given the previous `u_prev`.
    fn step(&mut self, u: f64, u_prev: f64) {
        let c = &self.config;
        let beta = if c.ablation == Ablation::POnly { 0.0 } else { c.beta };
        let mut m = 1.0 - c.alpha * (u - c.eta) - beta * (u - u_prev);
        m = if c.ablation == Ablation::PdNoMultClamp {
            m.max(0.0)
        } else {
            m.clamp(0.5, 1.5)
        };
        let bdp = bdp_bytes(self.path.line_rate_bps, self.t_ns) as f64;
        let w = self.window * m + c.w_ai_bytes;
        self.window = if c.ablation == Ablation::PdNoCwndClamp {
            w.max(self.path.mtu_wire_bytes as f64)
        } else {
            w.clamp(0.1 * bdp, 2.0 * bdp)
        };
    }
}

impl Controller for HpccPlusPlus {
    fn name(&self) -> &'static str {
        "hpcc++"
    }

    fn int_instructions(&self) -> Option<Instructions> {
        Some(Instructions::HPCC)
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        if ack.hops.is_empty() || ack.hops.iter().any(|h| HopSample::from_hop(h).is_none()) {
            return;
        }
        let newest = ack.hops.iter().filter_map(|h| h.egress_ts).max().unwrap_or(0);
        if self.hops.len() != ack.hops.len() || ack.after_stall {
            self.hops.clear();
            self.hops.extend(ack.hops.iter().filter_map(HopSample::from_hop));
            self.last_update_ts = Some(newest);
            return;
        }
        // Between updates the stored records stay, so U covers the whole sample interval.
        if self
            .last_update_ts
            .is_some_and(|t| newest.wrapping_sub(t) < self.interval_ns)
        {
            return;
        }
        let t = self.t_ns;
        let mut u: Option<f64> = None;
        for (prev, s) in self
            .hops
            .iter_mut()
            .zip(ack.hops.iter().filter_map(HopSample::from_hop))
        {
            if let Some((x, _)) = s.utilization(prev, t) {
                u = Some(u.map_or(x, |m| m.max(x)));
            }
            *prev = s;
        }
        self.last_update_ts = Some(newest);
        let Some(u) = u else { return };
        let u_prev = self.u.unwrap_or(u);
        self.step(u, u_prev);
        self.u = Some(u);
    }

    fn rate_bps(&self) -> u64 {
        let r = self.window * 8.0 * 1e9 / self.t_ns as f64;
        (r as u64).min(self.path.line_rate_bps)
    }

    fn window_bytes(&self) -> Option<u64> {
        Some(self.window as u64)
    }

    fn utilization(&self) -> Option<f64> {
        self.u
    }
}

#[cfg(test)]
mod tests {
    use int_format::int::HopRecord;

    use super::*;
    use crate::cc::fixtures;

    /// 10 Gb/s, T = 10 us: BDP 12,500 B.
    fn path() -> PathInfo {
        fixtures::path(1024)
    }

    fn hop(ts: u64, tx: u64, q: u32) -> HopRecord {
        HopRecord {
            egress_ts: Some(ts),
            tx_bytes: Some(tx),
            queue_occupancy: Some(q),
            rate_kbps: Some(10_000_000),
            ..HopRecord::default()
        }
    }

    fn feed(h: &mut HpccPlusPlus, ts: u64, tx: u64, q: u32) {
        let hops = [hop(ts, tx, q)];
        h.on_ack(&Ack {
            now_ns: ts,
            acked_bytes: 0,
            sent_bytes: 0,
            newly_acked: 0,
            rtt_ns: None,
            hops: &hops,
            after_stall: false,
        });
    }

    fn cc(ablation: Ablation) -> HpccPlusPlus {
        HpccPlusPlus::new(
            HpccPlusPlusConfig {
                alpha: 0.5,
                beta: 0.3,
                ablation,
                ..Default::default()
            },
            path(),
        )
    }

    /// U = 1 + q/12,500 when the link is fully busy (12,500 B every 10 us).
    fn busy(h: &mut HpccPlusPlus, k: u64, q: u32) {
        feed(h, k * 10_000, k * 12_500, q);
    }

    #[test]
    fn pd_step_by_hand() {
        let mut h = cc(Ablation::Pd);
        busy(&mut h, 0, 0);
        // U = 1.0: m = 1 − 0.5·0.05 − 0 (first sample, ΔU = 0) = 0.975; W = 12,500·0.975 + 1000.
        busy(&mut h, 1, 0);
        assert!((h.window - 13_187.5).abs() < 1e-9, "{}", h.window);
        assert_eq!(h.utilization(), Some(1.0));
        // U = 1.5 (6,250 B queued: min(6250, 0) = 0 → still 1.0 — qlen uses the min of two samples).
        busy(&mut h, 2, 6_250);
        assert!((h.window - (13_187.5 * 0.975 + 1000.0)).abs() < 1e-9);
        // Now both samples have 6,250 B: U = 1.5, ΔU = 0.5: m = 1 − 0.5·0.55 − 0.3·0.5 = 0.575.
        let w = h.window;
        busy(&mut h, 3, 6_250);
        assert!((h.window - (w * 0.575 + 1000.0)).abs() < 1e-9);
        assert_eq!(h.rate_bps(), (h.window * 8.0 * 1e9 / 10_000.0) as u64);
    }

    #[test]
    fn updates_at_most_once_per_sample_interval() {
        let mut h = cc(Ablation::Pd);
        busy(&mut h, 0, 0);
        feed(&mut h, 5_000, 6_250, 0); // half an RTT later: ignored
        assert_eq!(h.window, 12_500.0);
        busy(&mut h, 1, 0);
        assert!((h.window - 13_187.5).abs() < 1e-9);
    }

    /// A deep queue: U = 1 + 50,000/12,500 = 5 on two samples in a row.
    fn deep(ablation: Ablation) -> HpccPlusPlus {
        let mut h = cc(ablation);
        busy(&mut h, 0, 50_000);
        busy(&mut h, 1, 50_000);
        h
    }

    #[test]
    fn ablations_differ_exactly_where_they_should() {
        // m = 1 − 0.5·(5 − 0.95) = −1.025 (ΔU = 0 on the first update).
        let pd = deep(Ablation::Pd);
        assert_eq!(pd.window, 0.5 * 12_500.0 + 1000.0, "factor clamped to 0.5");
        let p_only = deep(Ablation::POnly);
        assert_eq!(p_only.window, pd.window, "no ΔU yet, so P and PD agree");
        let no_mult = deep(Ablation::PdNoMultClamp);
        assert_eq!(no_mult.window, 1250.0, "factor 0 → W_AI 1000 → raised to 0.1·BDP");
        let no_cwnd = deep(Ablation::PdNoCwndClamp);
        assert_eq!(no_cwnd.window, pd.window);

        // Rising utilization: ΔU > 0 separates P from PD.
        let mut p = cc(Ablation::POnly);
        let mut d = cc(Ablation::Pd);
        for h in [&mut p, &mut d] {
            busy(h, 0, 1_250);
            busy(h, 1, 1_250); // U 1.1
            busy(h, 2, 2_500);
            busy(h, 3, 2_500); // U 1.2, ΔU 0.1 at this update
        }
        assert!(d.window < p.window, "the D term damps a rising U");

        // Growth beyond 2·BDP only without the window clamp.
        let mut free = cc(Ablation::PdNoCwndClamp);
        let mut bounded = cc(Ablation::Pd);
        for k in 0..40 {
            feed(&mut free, k * 10_000, k * 1_250, 0); // 10 % busy: U 0.1, m = 1.425
            feed(&mut bounded, k * 10_000, k * 1_250, 0);
        }
        assert_eq!(bounded.window, 25_000.0);
        assert!(free.window > 1e6);
        assert_eq!(free.rate_bps(), 10_000_000_000, "rate never exceeds line rate");
    }
}
