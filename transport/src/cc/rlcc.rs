//! RL-CC (Tessler et al., AAAI 2022; Fuhrer et al., CCGrid 2023): a learned policy decides a
//! rate multiplier once per RTT from the last two (multiplier, reward term) pairs. The policy,
//! its observation and reward live in `intlab_rlcc`; this is the part that runs on real
//! sockets.
//!
//! - On an ACK with an RTT sample, once at least one base RTT has passed since the last
//!   decision, the step the policy was trained with (deciding per ACK would compound up to ×1.2
//!   per packet; once per measured RTT, a 4-to-1 incast starting at line rate outran the
//!   ÷1.2 steps and filled a 2 MB buffer: 8-12 % goodput, 54,000 drops):
//!   inflation = RTT / base RTT; term = (max(inflation − β, 0)·√(rate / line rate) − target)·
//!   scale; the history takes (multiplier in force, term); a = π(history); rate ×= 1 + 0.2a
//!   (a ≥ 0) or ÷ 1 − 0.2a, within [min rate, line rate].
//! - A retransmission timeout is a decision too, with the time since the last RTT sample as
//!   the RTT: retransmitted packets give no sample (their RTT is ambiguous), so without this a
//!   flow whose queue outgrew the RTO would never decide again (measured: a 2 MB queue held for
//!   the whole run). So is a NAK, at most once per base RTT: in a 16-to-1 incast that overflows
//!   the buffer, flows in go-back-N otherwise kept their rates (goodput 11 %, with it 24 %).
//!   The papers' RTT probes do not have that gap.
//! - Flows start at line rate and never go below `min_rate_fraction` (see [`RlCcConfig`]).

use std::path::PathBuf;
use std::sync::Arc;

use intlab_rlcc::{History, Policy, PolicyError, RewardShape, multiplier};
use serde::Deserialize;

use super::{Ack, Controller, PathInfo, check, check_fraction};

/// RL-CC's parameters. Defaults: the shipped tree policy, the papers' target 0.064 and β 1.5,
/// the public configuration's scale 12.5, a floor of 5 % of the line rate: decisions ride on
/// ACKs, and at the floor a flow must still hear of the network every few base RTTs, as the
/// papers' RTT probes would tell it (docs/rlcc.md; at 0.1 %, 60 % goodput on the incast).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RlCcConfig {
    /// The policy file: MLP or trees JSON, or a PyTorch checkpoint in the public RL-CC layout
    /// (a relative path is taken from the working directory). None: the shipped trees.
    pub policy: Option<PathBuf>,
    /// The inflation control parameter.
    pub target: f64,
    /// The congestion tolerance β.
    pub beta: f64,
    /// Scale of the reward term in the observation.
    pub scale: f64,
    /// Lowest rate as a fraction of the line rate.
    pub min_rate_fraction: f64,
    /// The policy, once read (see [`RlCcConfig::resolve`]).
    #[serde(skip)]
    pub loaded: Option<Arc<Policy>>,
}

impl Default for RlCcConfig {
    fn default() -> Self {
        let shape = RewardShape::default();
        RlCcConfig {
            policy: None,
            target: shape.target,
            beta: shape.beta,
            scale: shape.scale,
            min_rate_fraction: 0.05,
            loaded: None,
        }
    }
}

impl RlCcConfig {
    /// Refuses values no run can use, naming the parameter.
    pub fn check(&self) -> Result<(), String> {
        check(self.target.is_finite(), "target", self.target, "a number")?;
        check(
            self.beta.is_finite() && self.beta >= 0.0,
            "beta",
            self.beta,
            "a number of at least 0",
        )?;
        check(
            self.scale.is_finite() && self.scale > 0.0,
            "scale",
            self.scale,
            "a number above 0",
        )?;
        check_fraction("min_rate_fraction", self.min_rate_fraction)
    }

    /// Reads the policy file now, so that a bad one is reported before a run starts.
    pub fn resolve(&mut self) -> Result<(), PolicyError> {
        self.loaded = Some(self.policy()?);
        Ok(())
    }

    /// The policy: as read by [`RlCcConfig::resolve`], or read now.
    fn policy(&self) -> Result<Arc<Policy>, PolicyError> {
        if let Some(p) = &self.loaded {
            return Ok(p.clone());
        }
        let policy = match &self.policy {
            Some(path) => Policy::load(path)?,
            None => Policy::builtin()?,
        };
        Ok(Arc::new(policy))
    }

    fn shape(&self) -> RewardShape {
        RewardShape {
            target: self.target,
            beta: self.beta,
            scale: self.scale,
        }
    }
}

/// RL-CC state of one flow.
#[derive(Debug, Clone)]
pub struct RlCc {
    policy: Arc<Policy>,
    shape: RewardShape,
    line_rate: f64,
    min_rate: f64,
    base_rtt_ns: u64,
    rate: f64,
    history: History,
    /// The multiplier applied at the last decision.
    last_multiplier: f64,
    /// No decision before this time (one base RTT after the last).
    next_decision_ns: u64,
    /// When the last RTT sample arrived (ns).
    last_sample_ns: u64,
}

impl RlCc {
    /// A flow at line rate. The policy is `config`'s, read now if [`RlCcConfig::resolve`] was
    /// not called; a file that cannot be read or is broken is an error naming it, never a
    /// fallback to another policy under the same name.
    pub fn new(config: &RlCcConfig, path: PathInfo) -> Result<RlCc, PolicyError> {
        let policy = config.policy()?;
        let line_rate = path.line_rate_bps as f64;
        Ok(RlCc {
            policy,
            shape: config.shape(),
            line_rate,
            min_rate: config.min_rate_fraction * line_rate,
            base_rtt_ns: path.base_rtt_ns.max(1),
            rate: line_rate,
            history: History::default(),
            last_multiplier: 1.0,
            next_decision_ns: 0,
            last_sample_ns: 0,
        })
    }

    /// One decision from an RTT sample.
    fn decide(&mut self, now_ns: u64, rtt_ns: u64) {
        let inflation = rtt_ns as f64 / self.base_rtt_ns as f64;
        let term = self.shape.term(inflation, self.rate / self.line_rate);
        self.history.push(self.last_multiplier, term);
        let m = multiplier(f64::from(self.policy.act(&self.history.observation())));
        self.last_multiplier = m;
        self.rate = (self.rate * m).clamp(self.min_rate, self.line_rate);
        self.next_decision_ns = now_ns + self.base_rtt_ns;
    }
}

impl Controller for RlCc {
    fn name(&self) -> &'static str {
        "rlcc"
    }

    fn on_ack(&mut self, ack: &Ack<'_>) {
        let Some(rtt) = ack.rtt_ns else { return };
        self.last_sample_ns = ack.now_ns;
        if ack.now_ns >= self.next_decision_ns {
            self.decide(ack.now_ns, rtt);
        }
    }

    fn on_loss(&mut self, now_ns: u64) {
        if now_ns >= self.next_decision_ns && self.last_sample_ns > 0 {
            self.on_timeout(now_ns);
        }
    }

    fn on_timeout(&mut self, now_ns: u64) {
        let waited = now_ns.saturating_sub(self.last_sample_ns).max(self.base_rtt_ns);
        self.decide(now_ns, waited);
    }

    fn rate_bps(&self) -> u64 {
        self.rate as u64
    }
}

#[cfg(test)]
mod tests {
    use intlab_rlcc::Mlp;

    use super::*;
    use crate::cc::fixtures;

    /// A policy that speeds up fully when the newest term is negative and slows down fully
    /// when it is positive.
    fn reflex() -> RlCcConfig {
        RlCcConfig {
            loaded: Some(Arc::new(Policy::Mlp(Box::new(Mlp::reflex(100.0))))),
            ..RlCcConfig::default()
        }
    }

    #[test]
    fn an_unreadable_policy_is_an_error_naming_it_never_a_fallback() {
        let c = RlCcConfig {
            policy: Some("no/such/policy.json".into()),
            ..RlCcConfig::default()
        };
        let e = RlCc::new(&c, fixtures::path(1000)).expect_err("no policy, no controller");
        assert_eq!(e.file, std::path::Path::new("no/such/policy.json"));
        let e = crate::cc::ControllerConfig::Rlcc(c)
            .build(fixtures::path(1000))
            .expect_err("nor through the config");
        assert!(e.to_string().contains("no/such/policy.json"), "{e}");
    }

    #[test]
    fn one_decision_per_base_rtt_from_the_rtt_inflation() {
        // Base RTT 10 us at 10 Gb/s.
        let mut c = RlCc::new(&reflex(), fixtures::path(1000)).expect("the reflex policy is loaded");
        // RTT 40 us: inflation 4, term (2.5·1 − 0.064)·12.5 > 0: divide by 1.2.
        c.on_ack(&fixtures::ack(0, 0, 0, Some(40_000), &[]));
        let once = (10e9 / 1.2) as u64;
        assert!(c.rate_bps().abs_diff(once) <= 1, "{}", c.rate_bps());
        // Within one base RTT: no decision.
        c.on_ack(&fixtures::ack(9_999, 0, 0, Some(40_000), &[]));
        assert!(c.rate_bps().abs_diff(once) <= 1);
        assert_eq!(
            c.history.observation()[2] as f64,
            1.0,
            "multiplier in force at the decision"
        );
        // An RTT later at inflation 1 (< β): term −0.8: multiply by 1.2 (capped at line rate).
        c.on_ack(&fixtures::ack(40_000, 0, 0, Some(10_000), &[]));
        assert!(c.rate_bps().abs_diff(10_000_000_000) <= 1, "{}", c.rate_bps());
        let obs = c.history.observation();
        assert!(
            (obs[2] - 1.0 / 1.2).abs() < 1e-6 && (obs[3] + 0.8).abs() < 1e-6,
            "{obs:?}"
        );
        // ACKs without an RTT sample (retransmitted packets) decide nothing.
        c.on_ack(&fixtures::ack(90_000, 0, 0, None, &[]));
        assert_eq!(c.history.observation(), obs);
        // A timeout 1 ms after the last sample (at 40 us) decides as an RTT of 960 us.
        c.on_timeout(1_000_000);
        let term = RewardShape::default().term(96.0, 1.0) as f32;
        assert!((c.history.observation()[3] - term).abs() < 1e-3);
        assert!(c.rate_bps().abs_diff(once) <= 1, "{}", c.rate_bps());
        // A NAK within a base RTT of that decision decides nothing; one later decides as the
        // timeout does (1.02 ms since the sample: congested, divide again).
        c.on_loss(1_005_000);
        assert!(c.rate_bps().abs_diff(once) <= 1);
        c.on_loss(1_020_000);
        let twice = (10e9 / 1.2 / 1.2) as u64;
        assert!(c.rate_bps().abs_diff(twice) <= 1, "{}", c.rate_bps());
    }

    #[test]
    fn a_missing_policy_file_is_reported_by_resolve() {
        let mut cfg = RlCcConfig {
            policy: Some(PathBuf::from("/nonexistent/policy.json")),
            ..RlCcConfig::default()
        };
        let e = cfg.resolve().unwrap_err();
        assert_eq!(e.file, PathBuf::from("/nonexistent/policy.json"));
    }
}
