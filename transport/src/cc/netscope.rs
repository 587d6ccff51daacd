//! Netscope's rate control (Patke et al., "Delay Sensitivity-driven Congestion Mitigation for
//! HPC Systems", ICS 2021, §5): DCQCN-style AIMD whose multiplicative decrease is weighted by
//! the application's delay sensitivity c_a. Every measurement window:
//!
//! - α ← (1 − g)·α + g·signal (the paper's equation 14);
//! - R ← R·(1 − α/(2 + c_a)) if the window saw congestion, else R + R_AI (equation 15).
//!
//! A high c_a (an application whose runtime follows its message delays) softens the cut; c_a
//! = 0 is the DCTCP/DCQCN cut R·(1 − α/2).
//!
//! Two substitutions, both because the paper's setting is a Cray Aries NIC, not RoCE:
//! - The signal. The paper's is the share of NIC-to-network injection stalls (`nic2hsn`,
//!   sampled once a second); intlab's is the share of this flow's packets acknowledged in the
//!   window that came back ECN-marked, counted from CNPs (run with `transport.cnp_interval:
//!   0us` so that each marked packet gets one, as DCTCP here does).
//! - "Congestion". Equation 15 decreases while α > 0, which after the first mark would be
//!   forever (an EWMA never returns to 0 exactly); intlab decreases in windows whose signal is
//!   above zero and increases in the others, which is how DCQCN, whose rate control Netscope
//!   says it adopts, treats a period without CNPs.
//!
//! - The window's length. A window lasts `window_ns` or the flow's smoothed RTT, whichever is
//!   longer: marks answer the rate of one RTT before, so a window shorter than the RTT would
//!   cut again for congestion already cut for (the paper's one-second windows are far longer
//!   than its RTTs; DCTCP and DCQCN likewise react at most once per window of data or per
//!   CNP interval). Measured on `topologies/two-apps-dc.yaml`: with 16 µs windows and no RTT
//!   floor, a 500 KB queue (400 µs) made both applications cut every window and collapse.
//!
//! The rate is per flow (per QP), as every controller here; Netscope throttles an application.

use serde::{Deserialize, Serialize};

use super::{Ack, Controller, PathInfo, check, check_fraction, check_time, scale_ns};

/// Netscope's parameters. The paper gives none but c_a's meaning (its Table 3 estimates c_a
/// from 0 to about 7, the ping-pong benchmark being 1), so the defaults are the rate control
/// it says it adopts: the window is DCQCN's α period K = 55 µs (Zhu et al. 2015), g = 1/16,
/// R_AI = 4 % and the minimum 0.4 % of the line rate are the ns-3 HPCC simulator's DCTCP rate
/// control (EwmaGain, DctcpRateAI 1000 Mb/s and MinRate 100 Mb/s at 25 Gb/s), and α starts at
/// 1 as in both.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetscopeConfig {
    /// c_a, the application's delay sensitivity (≥ 0): how much it is spared in a decrease.
    pub delay_sensitivity: f64,
    /// g, the gain of α's moving average.
    pub g: f64,
    /// Shortest measurement window (ns); a window lasts at least the smoothed RTT. None: the
    /// flow's base RTT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_ns: Option<u64>,
    /// R_AI per window without congestion, as a fraction of the line rate.
    pub rate_ai_fraction: f64,
    /// Lowest rate as a fraction of the line rate.
    pub min_rate_fraction: f64,
    /// α before the first window.
    pub initial_alpha: f64,
}

impl Default for NetscopeConfig {
    fn default() -> Self {
        NetscopeConfig {
            delay_sensitivity: 0.0,
            g: 1.0 / 16.0,
            window_ns: None,
            rate_ai_fraction: 1000.0 / 25_000.0,
            min_rate_fraction: 100.0 / 25_000.0,
            initial_alpha: 1.0,
        }
    }
}

impl NetscopeConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check(
            self.delay_sensitivity.is_finite() && self.delay_sensitivity >= 0.0,
            "delay_sensitivity",
            self.delay_sensitivity,
            "a number of at least 0",
        )?;
        check_fraction("g", self.g)?;
        check_fraction("rate_ai_fraction", self.rate_ai_fraction)?;
        check_fraction("min_rate_fraction", self.min_rate_fraction)?;
        check(
            (0.0..=1.0).contains(&self.initial_alpha),
            "initial_alpha",
            self.initial_alpha,
            "a value in [0, 1]",
        )?;
        check_time("window_ns", self.window_ns)
    }

    /// The same parameters with the window (if set) `factor` times longer (time dilation).
    pub fn dilated(&self, factor: f64) -> NetscopeConfig {
        NetscopeConfig {
            window_ns: self.window_ns.map(|w| scale_ns(w, factor)),
            ..self.clone()
        }
    }

    /// The parameters a flow on `path` runs with (see [`super::ControllerConfig::resolve`]).
    pub fn resolved(&self, path: &PathInfo) -> NetscopeConfig {
        NetscopeConfig {
            window_ns: Some(self.window_ns.unwrap_or(path.base_rtt_ns).max(1)),
            ..self.clone()
        }
    }
}

/// Netscope state of one flow.
#[derive(Debug, Clone)]
pub struct Netscope {
    config: NetscopeConfig,
    line_rate: f64,
    mtu: u64,
    rate: f64,
    alpha: f64,
    /// End of the current window; None until the first feedback starts the windows.
    window_end_ns: Option<u64>,
    /// Packets acknowledged in the current window.
    acked_packets: u64,
    /// Marked packets reported (CNPs) in the current window.
    marks: u64,
    /// Smoothed RTT (ns; gain 1/8 as TCP's), once there is a sample.
    srtt_ns: Option<u64>,
}

impl Netscope {
    /// A flow starting at line rate.
    pub fn new(config: NetscopeConfig, path: PathInfo) -> Netscope {
        let alpha = config.initial_alpha.clamp(0.0, 1.0);
        let config = config.resolved(&path);
        Netscope {
            line_rate: path.line_rate_bps as f64,
            mtu: path.mtu_bytes.max(1),
            rate: path.line_rate_bps as f64,
            alpha,
            window_end_ns: None,
            acked_packets: 0,
            marks: 0,
            srtt_ns: None,
            config,
        }
    }

    /// α now.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Length of the next window: the configured one, or the smoothed RTT if longer.
    fn window(&self) -> u64 {
        self.config.window_ns.unwrap_or(1).max(self.srtt_ns.unwrap_or(0)).max(1)
    }

    fn start_windows(&mut self, now_ns: u64) {
        if self.window_end_ns.is_none() {
            self.window_end_ns = Some(now_ns + self.window());
        }
    }

    /// Closes every window that ended by `now_ns`. A window with no packet acknowledged and
    /// no mark carries no measurement: α and the rate stay.
    fn close_windows(&mut self, now_ns: u64) {
        let window = self.window();
        while let Some(end) = self.window_end_ns.filter(|&e| e <= now_ns) {
            if self.acked_packets > 0 || self.marks > 0 {
                let signal = (self.marks as f64 / self.acked_packets.max(1) as f64).min(1.0);
                let g = self.config.g;
                self.alpha = (1.0 - g) * self.alpha + g * signal;
                if self.marks > 0 {
                    let cut = self.alpha / (2.0 + self.config.delay_sensitivity.max(0.0));
                    self.rate = (self.rate * (1.0 - cut)).max(self.config.min_rate_fraction * self.line_rate);
                } else {
                    self.rate = (self.rate + self.config.rate_ai_fraction * self.line_rate).min(self.line_rate);
                }
            }
            self.acked_packets = 0;
            self.marks = 0;
            // After a long silence, start afresh rather than replaying empty windows.
            let next = end + window;
            self.window_end_ns = Some(if next <= now_ns { now_ns + window } else { next });
        }
    }
}

impl Controller for Netscope {
    fn name(&self) -> &'static str {
        "netscope"
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        if let Some(rtt) = ack.rtt_ns {
            self.srtt_ns = Some(self.srtt_ns.map_or(rtt, |s| s - s / 8 + rtt / 8));
        }
        self.close_windows(ack.now_ns);
        self.start_windows(ack.now_ns);
        self.acked_packets += ack.newly_acked.div_ceil(self.mtu);
    }

    fn on_cnp(&mut self, now_ns: u64) {
        self.close_windows(now_ns);
        self.start_windows(now_ns);
        self.marks += 1;
    }

    fn next_timer_ns(&self) -> Option<u64> {
        self.window_end_ns
    }

    fn on_timer(&mut self, now_ns: u64) {
        self.close_windows(now_ns);
    }

    fn rate_bps(&self) -> u64 {
        self.rate as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::fixtures;

    fn config(c_a: f64) -> NetscopeConfig {
        NetscopeConfig {
            delay_sensitivity: c_a,
            g: 0.5,
            window_ns: Some(1_000),
            rate_ai_fraction: 0.01,
            min_rate_fraction: 0.01,
            initial_alpha: 1.0,
        }
    }

    /// `packets` ACKs of 1,000 bytes (one packet each) at `t`.
    fn acks(n: &mut Netscope, t: u64, packets: u64) {
        for _ in 0..packets {
            n.on_ack(&fixtures::ack(t, 0, 0, None, &[]));
        }
    }

    #[test]
    fn the_cut_is_alpha_over_two_plus_c_a() {
        for (c_a, expect) in [(0.0, 1.0 - 0.625 / 2.0), (3.0, 1.0 - 0.625 / 5.0)] {
            let mut n = Netscope::new(config(c_a), fixtures::path(1000));
            // Window [0, 1000): 4 packets acknowledged, 1 marked: signal 0.25.
            acks(&mut n, 0, 4);
            n.on_cnp(500);
            assert_eq!(n.next_timer_ns(), Some(1_000));
            n.on_timer(1_000);
            // α = 0.5·1 + 0.5·0.25 = 0.625.
            assert!((n.alpha() - 0.625).abs() < 1e-12, "{}", n.alpha());
            assert_eq!(n.rate_bps(), (10e9 * expect) as u64, "c_a {c_a}");
            assert_eq!(n.next_timer_ns(), Some(2_000));
        }
    }

    #[test]
    fn a_window_without_marks_adds_r_ai_and_decays_alpha() {
        let mut n = Netscope::new(config(0.0), fixtures::path(1000));
        acks(&mut n, 0, 2);
        n.on_cnp(10);
        n.on_cnp(20);
        n.on_timer(1_000);
        // Signal 2/2 = 1: α stays 1, rate halves.
        assert_eq!(n.rate_bps(), 5_000_000_000);
        acks(&mut n, 1_500, 3);
        n.on_timer(2_000);
        // Signal 0: α = 0.5, +1 % of line rate.
        assert!((n.alpha() - 0.5).abs() < 1e-12);
        assert_eq!(n.rate_bps(), 5_100_000_000);
    }

    #[test]
    fn empty_windows_change_nothing_and_late_events_close_the_window_first() {
        let mut n = Netscope::new(config(0.0), fixtures::path(1000));
        acks(&mut n, 0, 1);
        // Silence until 5,500: the window [0, 1000) had one unmarked packet (+1 %, capped at
        // line rate; α halves); the later empty ones change nothing.
        n.on_cnp(5_500);
        assert!((n.alpha() - 0.5).abs() < 1e-12);
        assert_eq!(n.rate_bps(), 10_000_000_000);
        assert_eq!(n.next_timer_ns(), Some(6_500));
        // The CNP counts in the new window: signal 1 (mark only): α = 0.75, cut 0.375.
        n.on_timer(6_500);
        assert!((n.alpha() - 0.75).abs() < 1e-12);
        assert_eq!(n.rate_bps(), 6_250_000_000);
    }

    #[test]
    fn a_window_lasts_at_least_the_smoothed_rtt() {
        let mut n = Netscope::new(config(0.0), fixtures::path(1000));
        // RTT samples 4,000 then 12,000: srtt 4,000, then 4,000 − 500 + 1,500 = 5,000.
        n.on_ack(&fixtures::ack(0, 0, 0, Some(4_000), &[]));
        assert_eq!(n.next_timer_ns(), Some(4_000));
        n.on_cnp(100);
        n.on_ack(&fixtures::ack(3_000, 0, 0, Some(12_000), &[]));
        // The window [0, 4000): 2 packets, 1 mark: α = 0.5 + 0.5·0.5 = 0.75, cut 0.375.
        n.on_timer(4_000);
        assert_eq!(n.rate_bps(), 6_250_000_000);
        assert_eq!(n.next_timer_ns(), Some(9_000));
    }

    #[test]
    fn the_rate_stays_within_min_and_line_rate() {
        let mut n = Netscope::new(config(0.0), fixtures::path(1000));
        for w in 0..20 {
            acks(&mut n, w * 1_000, 1);
            n.on_cnp(w * 1_000 + 1);
        }
        n.on_timer(20_000);
        assert_eq!(n.rate_bps(), 100_000_000);
        for w in 21..200 {
            acks(&mut n, w * 1_000, 1);
        }
        n.on_timer(200_000);
        assert_eq!(n.rate_bps(), 10_000_000_000);
    }
}
