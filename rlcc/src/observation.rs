//! What an RL-CC agent sees and how its output becomes a rate: the reward term, the history of
//! (action, reward term) pairs, and the action's multiplier. From Fuhrer et al. (CCGrid 2023)
//! eq. 1 and 4 and the public RL-CC code's feature layout (`reference/cc-algorithms.md` §5).

use serde::{Deserialize, Serialize};

/// Features of one observation: [a(t−1), r(t−1), a(t), r(t)], oldest first, where a is the
/// multiplier applied before and r the scaled reward term then.
pub type Observation = [f32; 4];

/// Largest step of one action: the rate is multiplied by up to 1 + 0.2 or divided by up to
/// 1 + 0.2.
pub const ACTION_STEP: f64 = 0.2;

/// The reward's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RewardShape {
    /// The inflation control parameter `target` (the paper's 0.064).
    pub target: f64,
    /// The congestion tolerance β: RTT inflation below it counts as no congestion (1.5).
    pub beta: f64,
    /// Scale of the reward term in the observation (12.5 in the public code's configuration).
    pub scale: f64,
}

impl Default for RewardShape {
    fn default() -> Self {
        RewardShape {
            target: 0.064,
            beta: 1.5,
            scale: 12.5,
        }
    }
}

impl RewardShape {
    /// The observation's reward term: (max(inflation − β, 0)·√rate − target)·scale, rate as a
    /// fraction of line rate. Negative: under-utilized; 0: on target; positive: congested.
    /// It is −scale times the paper's δ (eq. 4).
    pub fn term(&self, rtt_inflation: f64, rate_fraction: f64) -> f64 {
        ((rtt_inflation - self.beta).max(0.0) * rate_fraction.max(0.0).sqrt() - self.target) * self.scale
    }
}

/// The multiplier an action a ∈ [−1, 1] applies to the rate: 1 + 0.2a when a ≥ 0, else
/// 1/(1 − 0.2a).
pub fn multiplier(action: f64) -> f64 {
    let a = action.clamp(-1.0, 1.0);
    if a >= 0.0 {
        1.0 + ACTION_STEP * a
    } else {
        1.0 / (1.0 - ACTION_STEP * a)
    }
}

/// The last two (multiplier, reward term) pairs of one flow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct History {
    pairs: [(f32, f32); 2],
}

impl Default for History {
    /// As at a flow's start: multiplier 1 (no action yet), reward term 0.
    fn default() -> Self {
        History { pairs: [(1.0, 0.0); 2] }
    }
}

impl History {
    /// Records the multiplier in force and the reward term just measured.
    pub fn push(&mut self, multiplier: f64, term: f64) {
        self.pairs = [self.pairs[1], (multiplier as f32, term as f32)];
    }

    /// The observation, oldest pair first.
    pub fn observation(&self) -> Observation {
        let [(a0, r0), (a1, r1)] = self.pairs;
        [a0, r0, a1, r1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reward_term_is_zero_on_target_and_negative_below_beta() {
        let r = RewardShape::default();
        assert!((r.term(1.0, 0.25) + 0.8).abs() < 1e-12, "below β: −target·scale");
        // On target: (inflation − 1.5)·√0.25 = 0.064.
        assert!(r.term(1.5 + 0.128, 0.25).abs() < 1e-12);
        assert!(r.term(3.0, 0.25) > 0.0);
    }

    #[test]
    fn actions_multiply_or_divide_by_up_to_1_2_and_history_keeps_two_pairs_oldest_first() {
        assert_eq!(multiplier(1.0), 1.2);
        assert!((multiplier(-1.0) - 1.0 / 1.2).abs() < 1e-15);
        assert_eq!(multiplier(0.0), 1.0);
        assert_eq!(multiplier(7.0), 1.2, "clamped");
        let mut h = History::default();
        assert_eq!(h.observation(), [1.0, 0.0, 1.0, 0.0]);
        h.push(1.1, -0.5);
        h.push(0.9, 2.0);
        h.push(1.2, 0.25);
        assert_eq!(h.observation(), [0.9, 2.0, 1.2, 0.25]);
    }
}
