//! Swift (Kumar et al., SIGCOMM 2020): a delay-based window. Rules from the paper's Algorithm 1
//! as htsim implements them (`Broadcom/csg-htsim`, `sim/swift.cpp`): one window in bytes
//! against the whole RTT the sender measures (no fabric/endpoint split).
//!
//! - Target delay = base + hops·h + fs, with the flow-scaling term
//!   fs = clamp(α_fs/√cwnd + β_fs, 0, fs_range) (cwnd in packets),
//!   α_fs = fs_range / (1/√fs_min_cwnd − 1/√fs_max_cwnd), β_fs = −α_fs/√fs_max_cwnd.
//! - Each ACK with an RTT sample: the retransmit count resets; below the target
//!   cwnd += ai·acked/cwnd (cwnd ≥ 1 packet) or ai·acked; above it, at most once per RTT,
//!   cwnd ×= max(1 − β·(delay − target)/delay, 1 − max_mdf).
//! - Retransmission timeout: the count grows; at `retx_reset_threshold` cwnd = min_cwnd, else
//!   (once per RTT) cwnd ×= 1 − max_mdf. A NAK (fast recovery) resets the count and decreases
//!   the same way.
//! - cwnd stays in [min_cwnd, max_cwnd]; below one packet the sender paces at cwnd/RTT.
//!
//! The hop count comes from the INT echo when there is one, else from `hops`.

use serde::{Deserialize, Serialize};

use super::{Ack, Controller, PathInfo, check, check_fraction, check_time, scale_ns};

/// Swift's parameters. Defaults are htsim's (its comments call several "guesses"; the paper
/// gives no numeric defaults): ai 1 packet, β 0.8, max_mdf 0.5, h = base / 6.55 per hop,
/// fs_range 5 × base, fs over 0.1 to 100 packets, 5 timeouts before the reset, min cwnd 0.01
/// packet (htsim's 10 bytes at a 1 KB MSS), max cwnd 1000 packets. The base target follows the
/// fabric: the flow's base RTT (htsim's fixed 20 µs is about the unloaded RTT of its 1 µs-link
/// fat-tree; a fixed target below the base RTT collapses the window), and the hop count is the
/// path's when ACKs carry no INT.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwiftConfig {
    /// Additive increase per RTT (packets).
    pub ai: f64,
    /// β, the multiplicative decrease gain.
    pub beta: f64,
    /// Largest multiplicative decrease in one step.
    pub max_mdf: f64,
    /// Base target delay (ns); None: the flow's base RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_target_ns: Option<u64>,
    /// Target added per hop (ns); None: base / 6.55 (htsim's `set_hdiv`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_hop_ns: Option<u64>,
    /// Largest flow-scaling addition (ns); None: 5 × base.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_range_ns: Option<u64>,
    /// cwnd (packets) at which flow scaling adds `fs_range`.
    pub fs_min_cwnd: f64,
    /// cwnd (packets) at which flow scaling adds nothing.
    pub fs_max_cwnd: f64,
    /// Timeouts in a row after which cwnd drops to `min_cwnd`.
    pub retx_reset_threshold: u32,
    /// Smallest window (packets).
    pub min_cwnd: f64,
    /// Largest window (packets).
    pub max_cwnd: f64,
    /// Hops to assume when ACKs carry no INT; None: the path's switches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hops: Option<u32>,
}

impl Default for SwiftConfig {
    fn default() -> Self {
        SwiftConfig {
            ai: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            base_target_ns: None,
            per_hop_ns: None,
            fs_range_ns: None,
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            retx_reset_threshold: 5,
            min_cwnd: 0.01,
            max_cwnd: 1000.0,
            hops: None,
        }
    }
}

impl SwiftConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check(self.ai.is_finite() && self.ai > 0.0, "ai", self.ai, "packets above 0")?;
        check_fraction("beta", self.beta)?;
        check(
            self.max_mdf > 0.0 && self.max_mdf < 1.0,
            "max_mdf",
            self.max_mdf,
            "a factor in (0, 1)",
        )?;
        check(
            self.min_cwnd.is_finite() && self.min_cwnd > 0.0,
            "min_cwnd",
            self.min_cwnd,
            "packets above 0",
        )?;
        check(
            self.max_cwnd >= self.min_cwnd,
            "max_cwnd",
            self.max_cwnd,
            "at least min_cwnd",
        )?;
        check(
            self.fs_min_cwnd > 0.0,
            "fs_min_cwnd",
            self.fs_min_cwnd,
            "packets above 0",
        )?;
        check(
            self.fs_max_cwnd > self.fs_min_cwnd,
            "fs_max_cwnd",
            self.fs_max_cwnd,
            "more than fs_min_cwnd",
        )?;
        check_time("base_target_ns", self.base_target_ns)
    }

    /// The same parameters with every time that is set `factor` times longer (time dilation).
    pub fn dilated(&self, factor: f64) -> SwiftConfig {
        let scale = |ns: Option<u64>| ns.map(|ns| scale_ns(ns, factor));
        SwiftConfig {
            base_target_ns: scale(self.base_target_ns),
            per_hop_ns: scale(self.per_hop_ns),
            fs_range_ns: scale(self.fs_range_ns),
            ..self.clone()
        }
    }

    /// The parameters a flow on `path` runs with (see [`super::ControllerConfig::resolve`]).
    pub fn resolved(&self, path: &PathInfo) -> SwiftConfig {
        let base = self.base_target_ns.unwrap_or(path.base_rtt_ns).max(1);
        SwiftConfig {
            base_target_ns: Some(base),
            per_hop_ns: Some(self.per_hop_ns.unwrap_or((base as f64 / 6.55).round() as u64)),
            fs_range_ns: Some(self.fs_range_ns.unwrap_or(5 * base)),
            hops: Some(self.hops.unwrap_or(path.hops)),
            ..self.clone()
        }
    }
}

/// Swift state of one flow.
#[derive(Debug, Clone)]
pub struct Swift {
    config: SwiftConfig,
    /// Base target, target per hop and flow-scaling range (ns).
    base_target: f64,
    per_hop: f64,
    fs_range: f64,
    line_rate: f64,
    mss: f64,
    /// Window in packets.
    cwnd: f64,
    retransmits: u32,
    last_decrease_ns: Option<u64>,
    /// Latest RTT sample (ns).
    rtt_ns: u64,
    hops: u32,
}

impl Swift {
    /// A flow starting with one bandwidth-delay product of window.
    pub fn new(config: SwiftConfig, path: PathInfo) -> Swift {
        let config = config.resolved(&path);
        let mss = path.mtu_bytes.max(1) as f64;
        let cwnd = (path.bdp_bytes() as f64 / mss).clamp(config.min_cwnd, config.max_cwnd);
        let ns = |v: Option<u64>| v.unwrap_or(0) as f64;
        Swift {
            hops: config.hops.unwrap_or(path.hops),
            base_target: ns(config.base_target_ns),
            per_hop: ns(config.per_hop_ns),
            fs_range: ns(config.fs_range_ns),
            config,
            line_rate: path.line_rate_bps as f64,
            mss,
            cwnd,
            retransmits: 0,
            last_decrease_ns: None,
            rtt_ns: path.base_rtt_ns.max(1),
        }
    }

    /// The window in packets.
    pub fn cwnd_packets(&self) -> f64 {
        self.cwnd
    }

    /// The target delay now (ns).
    pub fn target_ns(&self) -> f64 {
        let c = &self.config;
        let range = self.fs_range;
        let alpha = range / (1.0 / c.fs_min_cwnd.sqrt() - 1.0 / c.fs_max_cwnd.sqrt());
        let beta = -alpha / c.fs_max_cwnd.sqrt();
        let fs = (alpha / self.cwnd.sqrt() + beta).clamp(0.0, range);
        self.base_target + f64::from(self.hops) * self.per_hop + fs
    }

    fn can_decrease(&self, now: u64) -> bool {
        self.last_decrease_ns
            .is_none_or(|t| now.saturating_sub(t) >= self.rtt_ns)
    }

    fn set_cwnd(&mut self, cwnd: f64, now: u64) {
        let cwnd = cwnd.clamp(self.config.min_cwnd, self.config.max_cwnd);
        if cwnd < self.cwnd {
            self.last_decrease_ns = Some(now);
        }
        self.cwnd = cwnd;
    }
}

impl Controller for Swift {
    fn name(&self) -> &'static str {
        "swift"
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        if !ack.hops.is_empty() {
            self.hops = ack.hops.len() as u32;
        }
        let Some(delay) = ack.rtt_ns else { return };
        self.retransmits = 0;
        let can_decrease = self.can_decrease(ack.now_ns);
        self.rtt_ns = delay.max(1);
        let acked = ack.newly_acked as f64 / self.mss;
        let target = self.target_ns();
        let delay = delay as f64;
        if delay < target {
            let grow = if self.cwnd >= 1.0 {
                self.config.ai * acked / self.cwnd
            } else {
                self.config.ai * acked
            };
            self.set_cwnd(self.cwnd + grow, ack.now_ns);
        } else if can_decrease {
            let factor = (1.0 - self.config.beta * (delay - target) / delay).max(1.0 - self.config.max_mdf);
            self.set_cwnd(self.cwnd * factor, ack.now_ns);
        }
    }

    fn on_loss(&mut self, now_ns: u64) {
        self.retransmits = 0;
        if self.can_decrease(now_ns) {
            self.set_cwnd(self.cwnd * (1.0 - self.config.max_mdf), now_ns);
        }
    }

    fn on_timeout(&mut self, now_ns: u64) {
        self.retransmits += 1;
        if self.retransmits >= self.config.retx_reset_threshold {
            self.set_cwnd(self.config.min_cwnd, now_ns);
        } else if self.can_decrease(now_ns) {
            self.set_cwnd(self.cwnd * (1.0 - self.config.max_mdf), now_ns);
        }
    }

    fn target_delay_ns(&self) -> Option<u64> {
        Some(self.target_ns() as u64)
    }

    fn rate_bps(&self) -> u64 {
        if self.cwnd >= 1.0 {
            self.line_rate as u64
        } else {
            // Below one packet: one packet per RTT/cwnd.
            let bps = self.cwnd * self.mss * 8.0 * 1e9 / self.rtt_ns as f64;
            bps.min(self.line_rate) as u64
        }
    }

    fn window_bytes(&self) -> Option<u64> {
        Some((self.cwnd * self.mss).max(self.mss) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::fixtures;

    /// 10 Gb/s, T = 10 us: BDP 12,500 B = 12.5 packets of 1,000 B.
    fn path() -> PathInfo {
        fixtures::path(1000)
    }

    /// Base 10 us, 2 us per hop, flow scaling 0 to 20 us between 1 and 100 packets.
    fn config() -> SwiftConfig {
        SwiftConfig {
            base_target_ns: Some(10_000),
            per_hop_ns: Some(2_000),
            fs_range_ns: Some(20_000),
            fs_min_cwnd: 1.0,
            fs_max_cwnd: 100.0,
            ..SwiftConfig::default()
        }
    }

    fn ack(now: u64, rtt: u64) -> Ack<'static> {
        fixtures::ack(now, 0, 0, Some(rtt), &[])
    }

    #[test]
    fn target_scales_with_hops_and_shrinks_as_the_window_grows() {
        let mut s = Swift::new(config(), path());
        // α_fs = 20 us / (1 − 1/10) = 22.2 us; β_fs = −2.22 us. At 12.5 packets:
        // fs = 22,222/√12.5 − 2,222 = 4,063 ns; target = 10 + 1·2 + 4.063 us.
        let alpha = 20_000.0 / 0.9;
        let fs = alpha / 12.5f64.sqrt() - alpha / 10.0;
        assert!((s.target_ns() - (12_000.0 + fs)).abs() < 1e-6, "{}", s.target_ns());
        s.cwnd = 100.0;
        assert!(
            (s.target_ns() - 12_000.0).abs() < 1e-6,
            "no flow scaling at fs_max_cwnd"
        );
        s.cwnd = 0.5;
        assert!((s.target_ns() - 32_000.0).abs() < 1e-6, "capped at fs_range");
    }

    #[test]
    fn unset_targets_follow_the_path() {
        let slow = PathInfo {
            base_rtt_ns: 1_000_000,
            hops: 3,
            ..path()
        };
        let c = SwiftConfig::default().resolved(&slow);
        assert_eq!(
            (c.base_target_ns, c.per_hop_ns, c.fs_range_ns, c.hops),
            (Some(1_000_000), Some(152_672), Some(5_000_000), Some(3))
        );
        let set = SwiftConfig {
            base_target_ns: Some(20_000),
            hops: Some(1),
            ..SwiftConfig::default()
        }
        .resolved(&slow);
        assert_eq!(
            (set.base_target_ns, set.per_hop_ns, set.hops),
            (Some(20_000), Some(3053), Some(1))
        );
    }

    #[test]
    fn below_target_grows_by_ai_over_cwnd_per_packet() {
        let mut s = Swift::new(config(), path());
        s.on_ack(&ack(1_000, 11_000));
        assert!((s.cwnd_packets() - (12.5 + 1.0 / 12.5)).abs() < 1e-12);
        assert_eq!(s.rate_bps(), 10_000_000_000, "a window of packets: no pacing");
    }

    #[test]
    fn above_target_decreases_once_per_rtt_bounded_by_max_mdf() {
        let mut s = Swift::new(config(), path());
        let target = s.target_ns();
        // Delay 40 us: factor 1 − 0.8·(40 − target)/40.
        s.on_ack(&ack(1_000, 40_000));
        let want = 12.5 * (1.0 - 0.8 * (40_000.0 - target) / 40_000.0);
        assert!((s.cwnd_packets() - want).abs() < 1e-9, "{}", s.cwnd_packets());
        // 20 us later, within one RTT (40 us) of the decrease: no second decrease.
        s.on_ack(&ack(21_000, 400_000));
        assert!((s.cwnd_packets() - want).abs() < 1e-9);
        // After an RTT (the latest sample, 400 us): a huge delay is capped at max_mdf = 0.5.
        s.on_ack(&ack(500_000, 400_000));
        assert!((s.cwnd_packets() - want * 0.5).abs() < 1e-9);
    }

    #[test]
    fn timeouts_halve_then_reset_and_a_tiny_window_paces() {
        let mut s = Swift::new(config(), path());
        s.on_timeout(1_000);
        assert_eq!(s.cwnd_packets(), 6.25);
        // Within the RTT: counted, no decrease; the fifth in a row resets to min_cwnd.
        for t in [2_000, 3_000, 4_000] {
            s.on_timeout(t);
        }
        assert_eq!(s.cwnd_packets(), 6.25);
        s.on_timeout(5_000);
        assert_eq!(s.cwnd_packets(), 0.01);
        // Below one packet: one MSS per RTT/cwnd = 0.01·8,000 bits per 10 us = 8 Mb/s.
        assert_eq!(s.rate_bps(), 8_000_000);
        assert_eq!(s.window_bytes(), Some(1000), "one packet may still be in flight");
        // An ACK resets the count (and adds ai·1 packet below one packet): the next timeout
        // halves again instead of resetting.
        s.on_ack(&ack(100_000, 5_000));
        let w = s.cwnd_packets();
        s.on_timeout(200_000);
        assert!((s.cwnd_packets() - w * 0.5).abs() < 1e-12);
    }
}
