//! netem's loss models (tc-netem(8) `loss`, the kernel's `loss_event`): random loss with a
//! correlation, the 4-state Markov model of the GI loss model (Salsano et al., "Definition of
//! a general and intuitive loss model for packet networks and its implementation in the
//! Netem module in the Linux kernel", 2012), and Gilbert-Elliott. Each decides, frame by
//! frame, whether the link loses it, with netem's transitions and its order of draws.

use super::correlated::Correlated;

/// Which loss model, with its parameters as tc-netem(8) names them (probabilities 0 to 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossModel {
    /// `loss random P [CORRELATION]`: each frame lost with probability `p`.
    Random {
        /// Loss probability.
        p: f64,
        /// Correlation with the previous draw.
        correlation: f64,
    },
    /// `loss state p13 [p31 [p32 [p23 [p14]]]]`: the 4-state Markov chain, numbered as in
    /// Salsano et al.: 1 receives in a gap, 2 receives within a burst, 3 loses within a burst,
    /// 4 is an isolated loss in a gap. A frame is lost when the chain moves into 3 or 4.
    FourState {
        /// Gap (1) to burst loss (3).
        p13: f64,
        /// Burst loss (3) back to the gap (1).
        p31: f64,
        /// Burst loss (3) to receiving within the burst (2).
        p32: f64,
        /// Receiving within the burst (2) to burst loss (3).
        p23: f64,
        /// Gap (1) to an isolated loss (4).
        p14: f64,
    },
    /// `loss gemodel p [r [1-h [1-k]]]`: Gilbert-Elliott, a good and a bad state.
    GilbertElliott {
        /// Good to bad.
        p: f64,
        /// Bad to good.
        r: f64,
        /// Loss probability in the bad state (`1-h`).
        loss_bad: f64,
        /// Loss probability in the good state (`1-k`).
        loss_good: f64,
    },
}

impl LossModel {
    /// The 4-state model from `p13` and those of the others given, with tc's defaults for the
    /// rest: only `p13`, Bernoulli loss (`p31 = 1 − p13`); with `p31`, Gilbert; with `p32` and
    /// `p23`, the 3-state GI model; with `p14`, all four.
    pub fn four_state(p13: f64, p31: Option<f64>, p32: Option<f64>, p23: Option<f64>, p14: Option<f64>) -> LossModel {
        LossModel::FourState {
            p13,
            p31: p31.unwrap_or(1.0 - p13),
            p32: p32.unwrap_or(0.0),
            p23: p23.unwrap_or(1.0),
            p14: p14.unwrap_or(0.0),
        }
    }

    /// Gilbert-Elliott from `p` and those of the others given, with tc's defaults: `r = 1 − p`,
    /// every frame lost in the bad state (`1-h` = 1), none in the good one (`1-k` = 0).
    pub fn gilbert_elliott(p: f64, r: Option<f64>, loss_bad: Option<f64>, loss_good: Option<f64>) -> LossModel {
        LossModel::GilbertElliott {
            p,
            r: r.unwrap_or(1.0 - p),
            loss_bad: loss_bad.unwrap_or(1.0),
            loss_good: loss_good.unwrap_or(0.0),
        }
    }

    /// The share of frames it loses in the long run.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::Random { p, .. } => p,
            LossModel::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                // The chain's stationary distribution, relative to π1: π4 = π1 p14 (an isolated
                // loss always returns to 1); π3 p31 = π1 p13 (the bursts' balance with the
                // gap); π2 p23 = π3 p32.
                if p31 == 0.0 {
                    return if p13 > 0.0 { 1.0 } else { p14 / (1.0 + p14) };
                }
                let pi3 = p13 / p31;
                let pi2 = if p23 > 0.0 { pi3 * p32 / p23 } else { 0.0 };
                let pi4 = p14;
                (pi3 + pi4) / (1.0 + pi2 + pi3 + pi4)
            }
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                if p + r == 0.0 {
                    return loss_good;
                }
                let bad = p / (p + r);
                bad * loss_bad + (1.0 - bad) * loss_good
            }
        }
    }
}

/// A loss model running: its state between frames.
#[derive(Debug, Clone)]
pub struct Loss {
    model: LossModel,
    correlated: Correlated,
    /// The 4-state model's state (1 to 4, see [`LossModel::FourState`]), or Gilbert-Elliott's
    /// (1 good, 2 bad).
    state: u8,
}

impl Loss {
    /// `model` from its first state (sending in a gap; good).
    pub fn new(model: LossModel, rng: &mut fastrand::Rng) -> Loss {
        let correlation = match model {
            LossModel::Random { correlation, .. } => correlation,
            _ => 0.0,
        };
        Loss {
            model,
            correlated: Correlated::new(correlation, rng),
            state: 1,
        }
    }

    /// Whether the link loses the next frame.
    pub fn lose(&mut self, rng: &mut fastrand::Rng) -> bool {
        match self.model {
            LossModel::Random { p, .. } => p > 0.0 && self.correlated.next(rng) < p,
            LossModel::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                // One draw per frame against the current state's transitions, in the kernel's
                // order (`loss_4state`).
                let u = rng.f64();
                self.state = match self.state {
                    1 if u < p14 => 4,
                    1 if u < p14 + p13 => 3,
                    1 => 1,
                    2 if u < p23 => 3,
                    2 => 2,
                    3 if u < p32 => 2,
                    3 if u < p32 + p31 => 1,
                    3 => 3,
                    _ => 1,
                };
                self.state >= 3
            }
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                // First the transition, then the new state's loss draw.
                if self.state == 1 {
                    if rng.f64() < p {
                        self.state = 2;
                    }
                } else if rng.f64() < r {
                    self.state = 1;
                }
                let loss = if self.state == 2 { loss_bad } else { loss_good };
                rng.f64() < loss
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` frames through `model`: which were lost.
    fn run(model: LossModel, n: usize, seed: u64) -> Vec<bool> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut l = Loss::new(model, &mut rng);
        (0..n).map(|_| l.lose(&mut rng)).collect()
    }

    /// Mean length of the runs of consecutive losses.
    fn mean_burst(lost: &[bool]) -> f64 {
        let (mut bursts, mut in_burst) = (0usize, false);
        for &l in lost {
            if l && !in_burst {
                bursts += 1;
            }
            in_burst = l;
        }
        lost.iter().filter(|&&l| l).count() as f64 / bursts.max(1) as f64
    }

    #[test]
    fn each_model_loses_its_stationary_share() {
        // 1,000,000 frames: the share's standard error is below 0.0003 for independent draws
        // at 1-10 % and a few times that for bursts of 3-10; 0.002 is well above either.
        let models = [
            LossModel::Random {
                p: 0.01,
                correlation: 0.0,
            },
            LossModel::Random {
                p: 0.05,
                correlation: 0.0,
            },
            LossModel::four_state(0.01, None, None, None, None),
            LossModel::four_state(0.01, Some(0.3), Some(0.2), Some(0.1), Some(0.005)),
            LossModel::gilbert_elliott(0.01, Some(0.3), None, None),
            LossModel::gilbert_elliott(0.02, Some(0.2), Some(0.8), Some(0.01)),
        ];
        for m in models {
            let lost = run(m, 1_000_000, 11);
            let share = lost.iter().filter(|&&l| l).count() as f64 / lost.len() as f64;
            assert!(
                (share - m.mean_loss()).abs() < 0.002,
                "{m:?}: lost {share:.4}, expected {:.4}",
                m.mean_loss()
            );
        }
    }

    #[test]
    fn gilbert_losses_come_in_bursts_of_one_over_r() {
        // Every frame lost in the bad state, none in the good: a burst lasts until the first
        // bad-to-good transition, 1/r frames on average (geometric).
        for r in [0.5, 0.25, 0.1] {
            let lost = run(LossModel::gilbert_elliott(0.01, Some(r), None, None), 1_000_000, 3);
            let b = mean_burst(&lost);
            assert!((b - 1.0 / r).abs() < 0.05 / r, "r {r}: mean burst {b:.2}");
        }
        // Bernoulli loss at the same rate has bursts of 1/(1 − p).
        let b = mean_burst(&run(
            LossModel::Random {
                p: 0.02,
                correlation: 0.0,
            },
            1_000_000,
            3,
        ));
        assert!((b - 1.0 / 0.98).abs() < 0.01, "random: mean burst {b:.3}");
    }

    #[test]
    fn a_correlation_clusters_random_losses_and_loses_fewer_as_netem_s_does() {
        // netem's correlated draws average the previous one in: they bunch around 1/2, so a
        // loss below it comes rarer than P (tc-netem(8) users see it; the 4-state and
        // Gilbert-Elliott models are how to ask for bursts at a given rate), and a loss is
        // likelier right after a loss.
        let lost = run(
            LossModel::Random {
                p: 0.2,
                correlation: 0.5,
            },
            1_000_000,
            9,
        );
        let share = lost.iter().filter(|&&l| l).count() as f64 / lost.len() as f64;
        let after_loss =
            lost.windows(2).filter(|w| w[0] && w[1]).count() as f64 / lost.windows(2).filter(|w| w[0]).count() as f64;
        assert!(share < 0.2 - 0.02, "lost {share:.4}");
        assert!(
            after_loss > share + 0.05,
            "after a loss {after_loss:.4}, overall {share:.4}"
        );
    }

    #[test]
    fn the_same_seed_loses_the_same_frames() {
        let m = LossModel::four_state(0.02, Some(0.4), Some(0.1), Some(0.3), Some(0.01));
        assert_eq!(run(m, 10_000, 5), run(m, 10_000, 5));
        assert_ne!(run(m, 10_000, 5), run(m, 10_000, 6));
    }
}
