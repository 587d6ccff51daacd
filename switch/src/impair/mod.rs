//! Impairments of one link direction, on the switch's schedule, with tc-netem(8)'s parameters
//! and meanings: delay jitter (with correlation and a distribution), loss (random with
//! correlation, the 4-state model, Gilbert-Elliott), duplication, corruption and reordering.
//! Each is decided per frame, in the kernel's order (`netem_enqueue`), from a generator seeded
//! by the scenario: the same seed loses, duplicates and reorders the same frames.

mod correlated;
mod distribution;
mod loss;

pub use correlated::Correlated;
pub use distribution::Distribution;
pub use loss::{Loss, LossModel};

/// What is done to the frames of one link direction (probabilities 0 to 1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ImpairmentSpec {
    /// `delay DELAY JITTER`: each frame's delay varies by up to (uniform) or with a spread of
    /// this much around the link's delay (ns).
    pub jitter_ns: u64,
    /// `delay DELAY JITTER CORRELATION`: correlation of successive delays.
    pub delay_correlation: f64,
    /// `distribution`: the jitter's shape.
    pub distribution: Distribution,
    /// `loss ...`: which frames the link loses.
    pub loss: Option<LossModel>,
    /// `duplicate P [CORRELATION]`: a frame arrives twice.
    pub duplicate: Chance,
    /// `corrupt P [CORRELATION]`: one bit of the frame's IP packet flipped.
    pub corrupt: Chance,
    /// `reorder P [CORRELATION]`: a frame is sent without the link's delay, ahead of those
    /// delayed before it.
    pub reorder: Chance,
    /// `gap N`: only every N-th frame may be reordered (tc's default 1 with `reorder`).
    pub gap: u32,
}

/// A probability and the correlation of successive draws.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Chance {
    /// Probability.
    pub p: f64,
    /// Correlation with the previous draw.
    pub correlation: f64,
}

impl ImpairmentSpec {
    /// Nothing is done.
    pub fn is_none(&self) -> bool {
        *self == ImpairmentSpec::default()
    }

    /// A frame's delay may be shorter than one sent before it (jitter, reordering).
    pub fn reorders(&self) -> bool {
        self.jitter_ns > 0 || self.reorder.p > 0.0
    }
}

/// Bytes before the IP packet of a lab frame (untagged Ethernet): corruption flips a bit after
/// them, where the receiver's checks (IP checksum, RoCE's ICRC) can catch it.
const ETHERNET_HEADER: usize = 14;

impl Verdict {
    /// Flips the bit it chose in `frame` (an Ethernet frame), if it corrupts it.
    pub fn corrupt_frame(&self, frame: &mut [u8]) {
        if let Some((byte, bit)) = self.corrupt {
            frame[ETHERNET_HEADER + byte] ^= 1 << bit;
        }
    }
}

/// One link direction's impairments as they are set and changed while the link runs.
#[derive(Debug, Clone, Default)]
pub struct LinkImpairment {
    /// The draws under way (`None`: the link carries frames as sent).
    running: Option<Impairment>,
    /// The seed they were made from.
    seed: u64,
}

impl LinkImpairment {
    /// Impairs as `spec` says (replacing what it did), its draws seeded by `seed`.
    pub fn set(&mut self, spec: ImpairmentSpec, seed: u64) {
        self.seed = seed;
        self.running = (!spec.is_none()).then(|| Impairment::new(spec, seed));
    }

    /// Impairs as `spec` says from now on, with draws of a stream of their own (so that a
    /// change does not replay the draws made before it).
    pub fn change(&mut self, spec: ImpairmentSpec) {
        self.set(spec, self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
    }

    /// What it does, if anything.
    pub fn spec(&self) -> Option<&ImpairmentSpec> {
        self.running.as_ref().map(Impairment::spec)
    }

    /// The fate of an Ethernet frame of `len` bytes on a link of delay `delay_ns` (only the
    /// delay when it impairs nothing).
    pub fn judge(&mut self, len: usize, delay_ns: u64) -> Verdict {
        match self.running.as_mut() {
            Some(im) => im.judge(len.saturating_sub(ETHERNET_HEADER), delay_ns),
            None => Verdict {
                delay_ns,
                ..Verdict::default()
            },
        }
    }

    /// The fate of the second copy of a frame of `len` bytes it duplicated.
    pub fn judge_duplicate(&mut self, len: usize, delay_ns: u64) -> Verdict {
        match self.running.as_mut() {
            Some(im) => im.judge_duplicate(len.saturating_sub(ETHERNET_HEADER), delay_ns),
            None => Verdict {
                delay_ns,
                ..Verdict::default()
            },
        }
    }
}

/// What happens to one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    /// The link loses it.
    pub lost: bool,
    /// A second copy arrives too (judged on its own, never duplicated again).
    pub duplicate: bool,
    /// Flip bit `.1` of byte `.0` of its IP packet.
    pub corrupt: Option<(usize, u8)>,
    /// Sent at once, ahead of frames delayed before it.
    pub reordered: bool,
    /// Its delay on the link (ns), the link's own with jitter, or 0 when reordered.
    pub delay_ns: u64,
}

/// One link direction's impairments, running.
#[derive(Debug, Clone)]
pub struct Impairment {
    spec: ImpairmentSpec,
    rng: fastrand::Rng,
    delay: Correlated,
    loss: Option<Loss>,
    duplicate: Correlated,
    corrupt: Correlated,
    reorder: Correlated,
    /// Frames delayed since the last one reordered (netem's `counter`).
    counter: u32,
}

impl Impairment {
    /// `spec` from its first frame, its draws seeded by `seed`.
    pub fn new(spec: ImpairmentSpec, seed: u64) -> Impairment {
        let mut rng = fastrand::Rng::with_seed(seed);
        Impairment {
            delay: Correlated::new(spec.delay_correlation, &mut rng),
            loss: spec.loss.map(|m| Loss::new(m, &mut rng)),
            duplicate: Correlated::new(spec.duplicate.correlation, &mut rng),
            corrupt: Correlated::new(spec.corrupt.correlation, &mut rng),
            reorder: Correlated::new(spec.reorder.correlation, &mut rng),
            counter: 0,
            spec,
            rng,
        }
    }

    /// Its parameters.
    pub fn spec(&self) -> &ImpairmentSpec {
        &self.spec
    }

    /// The fate of a frame whose IP packet is `ip_len` bytes, on a link of delay `delay_ns`.
    pub fn judge(&mut self, ip_len: usize, delay_ns: u64) -> Verdict {
        let duplicate = self.spec.duplicate.p > 0.0 && self.duplicate.next(&mut self.rng) < self.spec.duplicate.p;
        self.judge_copy(ip_len, delay_ns, duplicate)
    }

    /// The fate of the second copy of a duplicated frame: as any frame's, never duplicated.
    pub fn judge_duplicate(&mut self, ip_len: usize, delay_ns: u64) -> Verdict {
        self.judge_copy(ip_len, delay_ns, false)
    }

    fn judge_copy(&mut self, ip_len: usize, delay_ns: u64, duplicate: bool) -> Verdict {
        let lost = self.loss.as_mut().is_some_and(|l| l.lose(&mut self.rng));
        if lost && !duplicate {
            return Verdict {
                lost: true,
                ..Verdict::default()
            };
        }
        // A duplicated frame the link loses still arrives once (netem counts one copy down).
        let duplicate = duplicate && !lost;
        let corrupt =
            (self.spec.corrupt.p > 0.0 && ip_len > 0 && self.corrupt.next(&mut self.rng) < self.spec.corrupt.p)
                .then(|| (self.rng.usize(..ip_len), self.rng.u8(..8)));
        let reordered = self.spec.gap > 0
            && self.counter + 1 >= self.spec.gap
            && self.reorder.next(&mut self.rng) < self.spec.reorder.p;
        let delay_ns = if reordered {
            self.counter = 0;
            0
        } else {
            self.counter += 1;
            self.delay(delay_ns)
        };
        Verdict {
            lost: false,
            duplicate,
            corrupt,
            reordered,
            delay_ns,
        }
    }

    /// The link's delay with this frame's jitter (netem's `tabledist`; never below 0).
    fn delay(&mut self, delay_ns: u64) -> u64 {
        if self.spec.jitter_ns == 0 {
            return delay_ns;
        }
        let u = self.delay.next(&mut self.rng);
        let offset = self.spec.jitter_ns as f64 * self.spec.distribution.at(u);
        (delay_ns as f64 + offset).max(0.0).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(spec: ImpairmentSpec, n: usize, seed: u64) -> Vec<Verdict> {
        let mut im = Impairment::new(spec, seed);
        (0..n).map(|_| im.judge(1000, 100_000)).collect()
    }

    #[test]
    fn duplicates_and_corruptions_come_at_their_rates() {
        let spec = ImpairmentSpec {
            duplicate: Chance {
                p: 0.02,
                correlation: 0.0,
            },
            corrupt: Chance {
                p: 0.01,
                correlation: 0.0,
            },
            ..ImpairmentSpec::default()
        };
        let v = frames(spec, 500_000, 1);
        let share = |f: &dyn Fn(&Verdict) -> bool| v.iter().filter(|x| f(x)).count() as f64 / v.len() as f64;
        // Standard errors 0.0002 and 0.00014: 0.001 is five of them or more.
        assert!((share(&|x| x.duplicate) - 0.02).abs() < 0.001);
        assert!((share(&|x| x.corrupt.is_some()) - 0.01).abs() < 0.001);
        assert!(
            v.iter()
                .filter_map(|x| x.corrupt)
                .all(|(byte, bit)| byte < 1000 && bit < 8)
        );
    }

    #[test]
    fn reordering_sends_one_frame_in_gap_at_most_ahead() {
        // netem: with gap 5, the first four frames after a reordered one are delayed; the
        // fifth is sent at once with probability p.
        let spec = ImpairmentSpec {
            reorder: Chance {
                p: 1.0,
                correlation: 0.0,
            },
            gap: 5,
            ..ImpairmentSpec::default()
        };
        let v = frames(spec, 20, 1);
        let immediate: Vec<usize> = (0..20).filter(|&k| v[k].delay_ns == 0).collect();
        assert_eq!(immediate, vec![4, 9, 14, 19]);
        let spec = ImpairmentSpec {
            reorder: Chance {
                p: 0.25,
                correlation: 0.0,
            },
            gap: 1,
            ..ImpairmentSpec::default()
        };
        let v = frames(spec, 400_000, 2);
        let share = v.iter().filter(|x| x.delay_ns == 0).count() as f64 / v.len() as f64;
        assert!((share - 0.25).abs() < 0.003, "reordered {share}");
    }

    #[test]
    fn jitter_spreads_the_delay_as_its_distribution_says() {
        for (distribution, sd) in [(Distribution::Uniform, 1.0 / 3f64.sqrt()), (Distribution::Normal, 1.0)] {
            let spec = ImpairmentSpec {
                jitter_ns: 10_000,
                distribution,
                ..ImpairmentSpec::default()
            };
            let v = frames(spec, 200_000, 3);
            let d: Vec<f64> = v.iter().map(|x| x.delay_ns as f64).collect();
            let mean = d.iter().sum::<f64>() / d.len() as f64;
            let s = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
            // Standard error of the mean 23 ns (normal), of the sd about 16 ns: 100 ns and
            // 1 % are several of them.
            assert!((mean - 100_000.0).abs() < 100.0, "{distribution}: mean {mean}");
            assert!((s / 10_000.0 - sd).abs() < 0.01, "{distribution}: sd {s}");
        }
    }

    #[test]
    fn a_lost_frame_s_duplicate_still_arrives() {
        let spec = ImpairmentSpec {
            loss: Some(LossModel::Random {
                p: 1.0,
                correlation: 0.0,
            }),
            duplicate: Chance {
                p: 1.0,
                correlation: 0.0,
            },
            ..ImpairmentSpec::default()
        };
        let v = frames(spec, 10, 4);
        assert!(v.iter().all(|x| !x.lost && !x.duplicate));
    }
}
