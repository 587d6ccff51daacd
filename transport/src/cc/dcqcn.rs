//! DCQCN's reaction point (Zhu et al., SIGCOMM 2015) as the ns-3 HPCC simulator implements it
//! (`rdma-hw.cc`, "Mellanox" version), with the paper's byte counter as an option. The
//! notification point is the transport's receiver: a CNP per QP at most every
//! `cnp_interval` when CE-marked data arrives; the switch marks with RED.
//!
//! - First CNP: rate = target = `rate_on_first_cnp` · rate; the α timer (every
//!   `alpha_interval`) and the decrease timer (every `decrease_interval`, 1 ns after it) start.
//! - α timer: α ← (1 − g)·α + g if a CNP arrived in the period, else (1 − g)·α.
//! - Decrease timer, if a CNP arrived in the period: target = rate (unless `clamp_target` is off
//!   and the stage is 0), rate ← max(min rate, rate·(1 − α/2)), stages to 0, the increase timer
//!   restarts.
//! - Increase timer (every `increase_interval`), and with a byte counter every `byte_counter`
//!   bytes sent: fast recovery rate ← (rate + target)/2 while the stage is below F; then
//!   additive (target += R_AI) and hyper (target += R_HAI) increase, each followed by the same
//!   averaging. ns-3 has only the timer, with additive at stage F and hyper above; with a byte
//!   counter (the paper) the stage of each event is compared: hyper once both the timer and
//!   the byte stage exceed F, additive once either reaches F.
//!
//! The timers are kept as deadlines and run lazily: periods without a CNP change nothing but
//! α, which is caught up by multiplication, so the endpoint only wakes for a decrease that is
//! due or for the increase timer.

use serde::{Deserialize, Serialize};

use super::{Ack, Controller, PathInfo, check, check_fraction, check_time, scale_ns};

/// The base RTT the ns-3 values were chosen for (ns): the HPCC paper's fat-tree of 1 µs links,
/// whose longest round trip (six links each way) is 12 µs, the T htsim gives HPCC on it. Timers
/// left unset scale with the flow's base RTT against it, so a fabric 100 times slower (or a
/// lab dilated 100 times) gets timers 100 times longer.
pub const REFERENCE_RTT_NS: u64 = 12_000;

/// DCQCN's parameters.
///
/// Defaults are the ns-3 HPCC simulator's `run.py --cc dcqcn` (its `config.txt` differs only
/// where run.py overrides it): g = 1/256, α timer 1 µs, decrease timer 4 µs, increase timer
/// 300 µs (each at [`REFERENCE_RTT_NS`], scaled to the flow's base RTT when not set), F = 1, R_AI = line rate / 5000 and R_HAI = line rate / 500 (5 and 50 Mb/s at
/// 25 Gb/s, `5*bw/25` and `50*bw/25` Mb/s), min rate = line rate / 25 (1000 Mb/s at 25 Gb/s),
/// no target clamp, no byte counter. [`DcqcnConfig::paper`] gives the paper's values.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnConfig {
    /// g, the gain of α's moving average.
    pub g: f64,
    /// α timer period (ns): ALPHA_RESUME_INTERVAL; None: 1 µs at [`REFERENCE_RTT_NS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha_interval_ns: Option<u64>,
    /// Decrease timer period (ns): at most one decrease per period (RATE_DECREASE_INTERVAL);
    /// None: 4 µs at [`REFERENCE_RTT_NS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decrease_interval_ns: Option<u64>,
    /// Increase timer period (ns): RP_TIMER; None: 300 µs at [`REFERENCE_RTT_NS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub increase_interval_ns: Option<u64>,
    /// F: fast recovery steps before additive increase (FAST_RECOVERY_TIMES).
    pub fast_recovery_steps: u32,
    /// R_AI as a fraction of the line rate.
    pub rate_ai_fraction: f64,
    /// R_HAI (hyper increase) as a fraction of the line rate.
    pub rate_hai_fraction: f64,
    /// Lowest rate as a fraction of the line rate (MIN_RATE).
    pub min_rate_fraction: f64,
    /// The rate after the first CNP, as a fraction of the rate then (RateOnFirstCnp).
    pub rate_on_first_cnp: f64,
    /// Set the target to the current rate on every decrease, also in stage 0
    /// (CLAMP_TARGET_RATE).
    pub clamp_target: bool,
    /// The paper's byte counter: an increase event every this many bytes sent (None: timer only).
    pub byte_counter: Option<u64>,
}

impl Default for DcqcnConfig {
    fn default() -> Self {
        DcqcnConfig {
            g: 1.0 / 256.0,
            alpha_interval_ns: None,
            decrease_interval_ns: None,
            increase_interval_ns: None,
            fast_recovery_steps: 1,
            rate_ai_fraction: 5.0 / 25_000.0,
            rate_hai_fraction: 50.0 / 25_000.0,
            min_rate_fraction: 1.0 / 25.0,
            rate_on_first_cnp: 1.0,
            clamp_target: false,
            byte_counter: None,
        }
    }
}

impl DcqcnConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check_fraction("g", self.g)?;
        check_fraction("rate_ai_fraction", self.rate_ai_fraction)?;
        check_fraction("rate_hai_fraction", self.rate_hai_fraction)?;
        check_fraction("min_rate_fraction", self.min_rate_fraction)?;
        check_fraction("rate_on_first_cnp", self.rate_on_first_cnp)?;
        check_time("alpha_interval_ns", self.alpha_interval_ns)?;
        check_time("decrease_interval_ns", self.decrease_interval_ns)?;
        check_time("increase_interval_ns", self.increase_interval_ns)?;
        check(self.byte_counter != Some(0), "byte_counter", 0, "bytes above 0")
    }

    /// The paper's values (Zhu et al. 2015, §5 and Table 1, as summarized in
    /// `reference/cc-algorithms.md` §3): g = 1/256, α timer K = 55 µs, at most one decrease
    /// per 50 µs (the NP's CNP interval N), increase timer T = 55 µs, F = 5, byte counter
    /// 10 MB, R_AI 40 Mb/s at 40 Gb/s (line / 1000); R_HAI is not in that summary: 10 × R_AI,
    /// the ratio ns-3 uses.
    pub fn paper() -> DcqcnConfig {
        DcqcnConfig {
            g: 1.0 / 256.0,
            alpha_interval_ns: Some(55_000),
            decrease_interval_ns: Some(50_000),
            increase_interval_ns: Some(55_000),
            fast_recovery_steps: 5,
            rate_ai_fraction: 1.0 / 1000.0,
            rate_hai_fraction: 10.0 / 1000.0,
            byte_counter: Some(10_000_000),
            ..DcqcnConfig::default()
        }
    }

    /// The same parameters with every time that is set `factor` times longer (time dilation).
    pub fn dilated(&self, factor: f64) -> DcqcnConfig {
        let scale = |ns: Option<u64>| ns.map(|ns| scale_ns(ns, factor));
        DcqcnConfig {
            alpha_interval_ns: scale(self.alpha_interval_ns),
            decrease_interval_ns: scale(self.decrease_interval_ns),
            increase_interval_ns: scale(self.increase_interval_ns),
            ..self.clone()
        }
    }

    /// The (α, decrease, increase) timer periods on `path` (ns).
    pub fn timers(&self, path: &PathInfo) -> (u64, u64, u64) {
        let at_path = |set: Option<u64>, reference: u64| {
            set.unwrap_or_else(|| scale_ns(reference, path.base_rtt_ns as f64 / REFERENCE_RTT_NS as f64))
                .max(1)
        };
        (
            at_path(self.alpha_interval_ns, 1_000),
            at_path(self.decrease_interval_ns, 4_000),
            at_path(self.increase_interval_ns, 300_000),
        )
    }

    /// The parameters a flow on `path` runs with (see [`super::ControllerConfig::resolve`]).
    pub fn resolved(&self, path: &PathInfo) -> DcqcnConfig {
        let (a, d, i) = self.timers(path);
        DcqcnConfig {
            alpha_interval_ns: Some(a),
            decrease_interval_ns: Some(d),
            increase_interval_ns: Some(i),
            ..self.clone()
        }
    }
}

/// DCQCN reaction-point state of one flow.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    config: DcqcnConfig,
    /// Timer periods (ns).
    alpha_interval_ns: u64,
    decrease_interval_ns: u64,
    increase_interval_ns: u64,
    line_rate: f64,
    rate: f64,
    target: f64,
    alpha: f64,
    /// Set at the first CNP: when the α and decrease timers started.
    started_ns: Option<u64>,
    /// A CNP arrived in the current α period.
    cnp_for_alpha: bool,
    /// Next α timer firing (ns).
    alpha_next_ns: u64,
    /// End of the decrease period holding a CNP, when one is pending.
    decrease_due_ns: Option<u64>,
    /// Next increase timer firing (ns), once the first decrease restarted it.
    increase_next_ns: Option<u64>,
    timer_stage: u32,
    byte_stage: u32,
    /// Bytes sent when the byte counter last fired or was reset.
    bytes_mark: u64,
    /// Bytes sent, as last reported by an ACK.
    sent_bytes: u64,
}

impl Dcqcn {
    /// A flow starting at line rate.
    pub fn new(config: DcqcnConfig, path: PathInfo) -> Dcqcn {
        let line_rate = path.line_rate_bps as f64;
        let (alpha_interval_ns, decrease_interval_ns, increase_interval_ns) = config.timers(&path);
        Dcqcn {
            alpha_interval_ns,
            decrease_interval_ns,
            increase_interval_ns,
            config,
            line_rate,
            rate: line_rate,
            target: line_rate,
            alpha: 1.0,
            started_ns: None,
            cnp_for_alpha: false,
            alpha_next_ns: 0,
            decrease_due_ns: None,
            increase_next_ns: None,
            timer_stage: 0,
            byte_stage: 0,
            bytes_mark: 0,
            sent_bytes: 0,
        }
    }

    /// α now (after the α periods that ended by the last event).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The target rate (b/s).
    pub fn target_bps(&self) -> f64 {
        self.target
    }

    fn min_rate(&self) -> f64 {
        self.config.min_rate_fraction * self.line_rate
    }

    /// Runs the α timer up to `t`: the period holding a CNP adds g, later ones only decay.
    fn advance_alpha(&mut self, t: u64) {
        let Some(_) = self.started_ns else { return };
        let period = self.alpha_interval_ns;
        let g = self.config.g;
        if self.alpha_next_ns <= t {
            let hit = if std::mem::take(&mut self.cnp_for_alpha) {
                g
            } else {
                0.0
            };
            self.alpha = (1.0 - g) * self.alpha + hit;
            self.alpha_next_ns += period;
        }
        if self.alpha_next_ns <= t {
            let k = (t - self.alpha_next_ns) / period + 1;
            self.alpha *= (1.0 - g).powf(k as f64);
            self.alpha_next_ns += k * period;
        }
    }

    fn decrease(&mut self, now: u64) {
        if self.config.clamp_target || self.timer_stage != 0 || self.byte_stage != 0 {
            self.target = self.rate;
        }
        self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.min_rate());
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes_mark = self.sent_bytes;
        self.increase_next_ns = Some(now + self.increase_interval_ns);
    }

    /// One increase event; `stage` is the stage of the counter that fired.
    fn increase(&mut self) {
        let f = self.config.fast_recovery_steps;
        let (t, b) = (self.timer_stage, self.byte_stage);
        let (additive, hyper) = match self.config.byte_counter {
            None => (t == f, t > f),
            Some(_) => (t.max(b) >= f && t.min(b) <= f, t.min(b) > f),
        };
        if hyper {
            self.target += self.config.rate_hai_fraction * self.line_rate;
        } else if additive {
            self.target += self.config.rate_ai_fraction * self.line_rate;
        }
        self.target = self.target.min(self.line_rate);
        self.rate = ((self.rate + self.target) / 2.0).clamp(self.min_rate(), self.line_rate);
    }
}

impl Controller for Dcqcn {
    fn name(&self) -> &'static str {
        "dcqcn"
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        self.sent_bytes = ack.sent_bytes;
        let Some(counter) = self.config.byte_counter else {
            return;
        };
        if self.increase_next_ns.is_none() {
            // No decrease yet: nothing to recover from.
            self.bytes_mark = ack.sent_bytes;
            return;
        }
        while ack.sent_bytes >= self.bytes_mark + counter.max(1) {
            self.bytes_mark += counter.max(1);
            self.increase();
            self.byte_stage += 1;
        }
    }

    fn on_cnp(&mut self, now_ns: u64) {
        self.on_timer(now_ns);
        if self.started_ns.is_none() {
            self.started_ns = Some(now_ns);
            self.alpha = 1.0;
            self.alpha_next_ns = now_ns + self.alpha_interval_ns;
            self.rate *= self.config.rate_on_first_cnp;
            self.target = self.rate;
        }
        self.advance_alpha(now_ns);
        self.cnp_for_alpha = true;
        if self.decrease_due_ns.is_none() {
            // The decrease timer ticks 1 ns after each multiple of its period from the first CNP.
            let first = self.started_ns.unwrap_or(now_ns) + 1;
            let period = self.decrease_interval_ns;
            let k = now_ns.saturating_sub(first) / period + 1;
            self.decrease_due_ns = Some(first + k * period);
        }
    }

    fn next_timer_ns(&self) -> Option<u64> {
        [self.decrease_due_ns, self.increase_next_ns]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_timer(&mut self, now_ns: u64) {
        loop {
            let decrease = self.decrease_due_ns.filter(|&t| t <= now_ns);
            let increase = self.increase_next_ns.filter(|&t| t <= now_ns);
            match (decrease, increase) {
                (Some(d), i) if i.is_none_or(|i| d <= i) => {
                    self.advance_alpha(d);
                    self.decrease_due_ns = None;
                    self.decrease(d);
                }
                (_, Some(i)) => {
                    self.increase();
                    self.timer_stage += 1;
                    self.increase_next_ns = Some(i + self.increase_interval_ns);
                }
                _ => break,
            }
        }
        self.advance_alpha(now_ns);
    }

    fn rate_bps(&self) -> u64 {
        self.rate as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::fixtures;

    const LINE: f64 = 10e9;

    fn path() -> PathInfo {
        fixtures::path(1024)
    }

    /// Round numbers: g 1/16, α timer 10 us, decrease timer 5 us, increase timer 100 us, F 2,
    /// R_AI 1 % and R_HAI 10 % of the line, min rate 1 %.
    fn config() -> DcqcnConfig {
        DcqcnConfig {
            g: 1.0 / 16.0,
            alpha_interval_ns: Some(10_000),
            decrease_interval_ns: Some(5_000),
            increase_interval_ns: Some(100_000),
            fast_recovery_steps: 2,
            rate_ai_fraction: 0.01,
            rate_hai_fraction: 0.1,
            min_rate_fraction: 0.01,
            rate_on_first_cnp: 1.0,
            clamp_target: false,
            byte_counter: None,
        }
    }

    #[test]
    fn first_cnp_halves_the_rate_at_the_end_of_its_decrease_period() {
        let mut d = Dcqcn::new(config(), path());
        d.on_cnp(1_000);
        assert_eq!(d.rate_bps(), 10_000_000_000, "no decrease before the period ends");
        // The decrease timer ticks at 1,000 + 1 + 5,000.
        assert_eq!(d.next_timer_ns(), Some(6_001));
        d.on_timer(6_001);
        // α = 1: rate × (1 − 1/2); stage 0 without clamp: the target stays at line rate.
        assert_eq!(d.rate_bps(), 5_000_000_000);
        assert_eq!(d.target_bps(), LINE);
        // A second CNP in the same period would have changed nothing: one decrease per period.
        assert_eq!(d.next_timer_ns(), Some(106_001), "only the increase timer is left");
    }

    #[test]
    fn alpha_adds_g_for_a_period_with_a_cnp_and_decays_otherwise() {
        let mut d = Dcqcn::new(config(), path());
        d.on_cnp(0);
        // α periods end at 10, 20, 30 us: the first held the CNP (α = 15/16·1 + 1/16 = 1),
        // the next two decay: (15/16)².
        d.on_timer(30_000);
        assert!((d.alpha() - (15.0f64 / 16.0).powi(2)).abs() < 1e-12, "{}", d.alpha());
        d.on_cnp(35_000);
        d.on_timer(40_000);
        // The period [30, 40) held a CNP: α = 15/16·α + 1/16.
        let want = 15.0 / 16.0 * (15.0f64 / 16.0).powi(2) + 1.0 / 16.0;
        assert!((d.alpha() - want).abs() < 1e-12, "{}", d.alpha());
    }

    #[test]
    fn recovery_is_fast_then_additive_then_hyper() {
        let mut d = Dcqcn::new(config(), path());
        d.on_cnp(0);
        d.on_timer(5_001);
        assert_eq!(d.rate_bps(), 5_000_000_000);
        // α decayed over the first increase period does not matter for increases.
        // Stage 0, 1 < F = 2: fast recovery towards the target (10 G).
        d.on_timer(105_001);
        assert_eq!(d.rate_bps(), 7_500_000_000);
        d.on_timer(205_001);
        assert_eq!(d.rate_bps(), 8_750_000_000);
        // Stage 2 = F: additive, target 10 G + 1 % → capped at line rate; rate averages.
        d.on_timer(305_001);
        assert_eq!(d.rate_bps(), 9_375_000_000);
        // Stage 3 > F: hyper; the target stays capped.
        d.on_timer(405_001);
        assert_eq!(d.rate_bps(), 9_687_500_000);
    }

    #[test]
    fn a_later_decrease_uses_alpha_and_sets_the_target_once_recovering() {
        let mut d = Dcqcn::new(config(), path());
        d.on_cnp(0);
        d.on_timer(5_001);
        d.on_timer(105_001); // one fast recovery step: 7.5 G, stage 1
        d.on_cnp(106_000);
        // The decrease period ends at 1 + 22·5,000 = 110,001; α catches up to then: the first
        // α period held the first CNP (α = 1), 9 more decayed, and the one ending at 110,000
        // held the new CNP: α = (15/16)^10 + 1/16.
        d.on_timer(110_001);
        let alpha = (15.0f64 / 16.0).powi(10) + 1.0 / 16.0;
        assert!((d.alpha() - alpha).abs() < 1e-12, "{}", d.alpha());
        assert_eq!(d.target_bps(), 7.5e9, "stage 1: the target takes the rate");
        assert_eq!(d.rate_bps(), (7.5e9 * (1.0 - alpha / 2.0)) as u64);
        assert_eq!(d.next_timer_ns(), Some(210_001), "the increase timer restarted");
    }

    #[test]
    fn the_rate_never_falls_below_the_minimum() {
        let mut d = Dcqcn::new(config(), path());
        for k in 0..40 {
            d.on_cnp(k * 5_000);
            d.on_timer(k * 5_000 + 4_999);
        }
        d.on_timer(1_000_000);
        assert!(d.rate_bps() >= 100_000_000, "{}", d.rate_bps());
        let mut floor = Dcqcn::new(config(), path());
        for k in 0..400 {
            floor.on_cnp(k * 5_000);
        }
        floor.on_timer(2_000_000);
        assert!(floor.rate_bps() >= 100_000_000);
    }

    fn ack(sent: u64) -> Ack<'static> {
        fixtures::ack(0, sent, sent, None, &[])
    }

    #[test]
    fn the_byte_counter_drives_increases_and_hyper_needs_both_counters_past_f() {
        let mut d = Dcqcn::new(
            DcqcnConfig {
                byte_counter: Some(1_000_000),
                ..config()
            },
            path(),
        );
        d.on_ack(&ack(500_000));
        d.on_cnp(0);
        d.on_timer(5_001);
        assert_eq!(d.rate_bps(), 5_000_000_000);
        // 3 MB sent since the decrease: three byte events (stages 0, 1: fast recovery; 2 = F:
        // additive since max(t, b) = F; the target is capped at line rate).
        d.on_ack(&ack(3_500_000));
        assert_eq!(d.rate_bps(), 9_375_000_000);
        assert_eq!((d.timer_stage, d.byte_stage), (0, 3));
        // The timer's stage 0: fast recovery would need max < F; the byte stage is 3 > F, the
        // timer stage 0 ≤ F: additive (not hyper).
        let target = d.target_bps();
        d.on_timer(105_001);
        assert_eq!(d.target_bps(), target.min(LINE));
        assert_eq!(d.rate_bps(), 9_687_500_000);
    }
}
