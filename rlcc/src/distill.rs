//! Distillation of the MLP into gradient-boosted regression trees (least squares, the action
//! itself as the target), as Fuhrer et al. did with CatBoost. Ours: up to 20 trees of depth up
//! to 4 grown greedily on 64 quantile bins per feature, learning rate 1 (CatBoost's setting in
//! the public script). The data follow the public script: previous multipliers from 0.8 to 1.2,
//! reward terms from −T to T and from T to 100·T with T = target·scale.

use crate::mlp::{INPUTS, Mlp};
use crate::observation::{Observation, RewardShape};
use crate::trees::{MAX_DEPTH, MAX_TREES, Node, Tree, TreeEnsemble};

/// Bins per feature.
const BINS: usize = 64;

/// Distillation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DistillConfig {
    /// Trees (at most 20).
    pub trees: usize,
    /// Depth of each (at most 4).
    pub depth: usize,
    /// Shrinkage of each tree's leaves.
    pub learning_rate: f32,
    /// Observations sampled; a fifth is held out to measure the RMSE.
    pub samples: usize,
    /// The reward's parameters (they set the range of reward terms sampled).
    pub shape: RewardShape,
    /// Seed of the sampling.
    pub seed: u64,
}

impl Default for DistillConfig {
    fn default() -> Self {
        DistillConfig {
            trees: MAX_TREES,
            depth: MAX_DEPTH,
            learning_rate: 1.0,
            samples: 200_000,
            shape: RewardShape::default(),
            seed: 1,
        }
    }
}

/// The distilled ensemble and how close it came.
#[derive(Debug, Clone, PartialEq)]
pub struct Distilled {
    /// The trees.
    pub trees: TreeEnsemble,
    /// RMSE of the trees' action against the MLP's on the held-out fifth.
    pub rmse: f64,
    /// The same on the fitted four fifths.
    pub train_rmse: f64,
}

/// Observations like the public script's: multipliers in [0.8, 1.2], reward terms over
/// [−T, T] for half the draws and [T, 100·T] for the rest.
fn sample(shape: &RewardShape, n: usize, seed: u64) -> Vec<Observation> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let t = (shape.target * shape.scale) as f32;
    let term = move |rng: &mut fastrand::Rng| {
        if rng.bool() {
            -t + 2.0 * t * rng.f32()
        } else {
            t + 99.0 * t * rng.f32()
        }
    };
    (0..n)
        .map(|_| {
            let a0 = 0.8 + 0.4 * rng.f32();
            let r0 = term(&mut rng);
            let a1 = 0.8 + 0.4 * rng.f32();
            let r1 = term(&mut rng);
            [a0, r0, a1, r1]
        })
        .collect()
}

/// Per-feature thresholds at quantiles of `x`.
fn thresholds(x: &[Observation]) -> Vec<Vec<f32>> {
    (0..INPUTS)
        .map(|f| {
            let mut v: Vec<f32> = x.iter().map(|o| o[f]).collect();
            v.sort_by(f32::total_cmp);
            let mut t: Vec<f32> = (1..BINS).map(|k| v[k * v.len() / BINS]).collect();
            t.dedup();
            t
        })
        .collect()
}

struct Grower<'a> {
    bins: &'a [[u8; INPUTS]],
    cuts: &'a [Vec<f32>],
    residual: &'a [f32],
    depth: usize,
    rate: f32,
}

impl Grower<'_> {
    /// Grows the subtree over `idx` at `depth` into `nodes`; returns its root's index.
    fn grow(&self, idx: &mut [u32], depth: usize, nodes: &mut Vec<Node>) -> u16 {
        let at = nodes.len();
        let sum: f64 = idx.iter().map(|&i| f64::from(self.residual[i as usize])).sum();
        let n = idx.len() as f64;
        nodes.push(Node::Leaf {
            leaf: self.rate * (sum / n.max(1.0)) as f32,
        });
        if depth >= self.depth || idx.len() < 2 {
            return at as u16;
        }
        // Best split by squared-error reduction over the binned thresholds.
        let mut best: Option<(f64, usize, usize)> = None;
        for f in 0..INPUTS {
            let mut count = [0f64; BINS];
            let mut total = [0f64; BINS];
            for &i in idx.iter() {
                let b = usize::from(self.bins[i as usize][f]);
                count[b] += 1.0;
                total[b] += f64::from(self.residual[i as usize]);
            }
            let (mut cl, mut sl) = (0.0, 0.0);
            for b in 0..self.cuts[f].len() {
                cl += count[b];
                sl += total[b];
                let (cr, sr) = (n - cl, sum - sl);
                if cl == 0.0 || cr == 0.0 {
                    continue;
                }
                let gain = sl * sl / cl + sr * sr / cr - sum * sum / n;
                if best.is_none_or(|(g, _, _)| gain > g) {
                    best = Some((gain, f, b));
                }
            }
        }
        let Some((_, f, b)) = best.filter(|&(g, _, _)| g > 1e-12) else {
            return at as u16;
        };
        let split = partition(idx, |i| usize::from(self.bins[i as usize][f]) <= b);
        let (left_idx, right_idx) = idx.split_at_mut(split);
        let left = self.grow(left_idx, depth + 1, nodes);
        let right = self.grow(right_idx, depth + 1, nodes);
        nodes[at] = Node::Split {
            feature: f as u8,
            threshold: self.cuts[f][b],
            left,
            right,
        };
        at as u16
    }
}

/// Moves the items for which `left` holds to the front; returns how many there are.
fn partition(v: &mut [u32], left: impl Fn(u32) -> bool) -> usize {
    let mut k = 0;
    for j in 0..v.len() {
        if left(v[j]) {
            v.swap(k, j);
            k += 1;
        }
    }
    k
}

fn rmse(trees: &TreeEnsemble, x: &[Observation], y: &[f32]) -> f64 {
    let se: f64 = x.iter().zip(y).map(|(o, &t)| f64::from(trees.act(o) - t).powi(2)).sum();
    (se / x.len().max(1) as f64).sqrt()
}

/// Fits trees to `mlp`'s actions.
pub fn distill(mlp: &Mlp, cfg: &DistillConfig) -> Distilled {
    let x = sample(&cfg.shape, cfg.samples.max(10), cfg.seed);
    let y: Vec<f32> = x.iter().map(|o| mlp.act(o)).collect();
    let held = x.len() / 5;
    let (x_test, x_fit) = x.split_at(held);
    let (y_test, y_fit) = y.split_at(held);
    let cuts = thresholds(x_fit);
    // A value goes in bin b when it is at most cut b (the last bin: above every cut).
    let bins: Vec<[u8; INPUTS]> = x_fit
        .iter()
        .map(|o| std::array::from_fn(|f| cuts[f].partition_point(|&c| c < o[f]) as u8))
        .collect();
    let base = y_fit.iter().sum::<f32>() / y_fit.len() as f32;
    let mut pred = vec![base; y_fit.len()];
    let mut grown = Vec::new();
    for _ in 0..cfg.trees.min(MAX_TREES) {
        let residual: Vec<f32> = y_fit.iter().zip(&pred).map(|(y, p)| y - p).collect();
        let grower = Grower {
            bins: &bins,
            cuts: &cuts,
            residual: &residual,
            depth: cfg.depth.min(MAX_DEPTH),
            rate: cfg.learning_rate,
        };
        let mut idx: Vec<u32> = (0..x_fit.len() as u32).collect();
        let mut nodes = Vec::new();
        grower.grow(&mut idx, 0, &mut nodes);
        let tree = Tree { nodes };
        for (p, o) in pred.iter_mut().zip(x_fit) {
            *p += tree.eval(o);
        }
        grown.push(tree);
    }
    // Grown within the limits: the checks cannot fail.
    let trees = TreeEnsemble::new(base, grown).unwrap_or_else(|e| unreachable!("distilled trees: {e}"));
    Distilled {
        rmse: rmse(&trees, x_test, y_test),
        train_rmse: rmse(&trees, x_fit, y_fit),
        trees,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_follow_a_network_closely_and_respect_the_limits() {
        // The reflex, plus 0.3·relu(−r0): a memory of the older term.
        let mut mlp = Mlp::reflex(1.0);
        mlp.w1[2][1] = -1.0;
        mlp.w2[2][2] = 1.0;
        mlp.w3[2] = 0.3;
        let cfg = DistillConfig {
            samples: 20_000,
            ..DistillConfig::default()
        };
        let d = distill(&mlp, &cfg);
        assert_eq!(d.trees.trees().len(), 20);
        assert!(d.rmse < 0.05, "held-out RMSE {}", d.rmse);
        // A constant network is fitted exactly by the base alone.
        let flat = distill(&Mlp::zeros(), &cfg);
        assert!(flat.rmse < 1e-6);
    }
}
