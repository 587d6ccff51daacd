//! A gradient-boosted tree ensemble: the distilled RL-CC policy (at most 20 trees of depth at
//! most 4, as the paper's NIC could run). The action is tanh-free: the trees were fitted to
//! the MLP's action directly, so their sum is clamped to [−1, 1].
//!
//! File format (JSON, ours): `{"format": "intlab-rlcc-trees", "version": 1, "base": b, "trees":
//! [{"nodes": [...]}, ...]}`. A tree's nodes are a flat list, the root first; a split is
//! `{"feature": f, "threshold": t, "left": i, "right": j}` (go left when x[f] ≤ t; children come
//! after their parent) and a leaf `{"leaf": v}`. The action is base + the leaf of every tree.
//!
//! For speed each tree is also kept as a complete tree of depth 4 (a leaf higher up becomes
//! splits that never go right), walked without branches, `k = 2k + 1 + (x[f] > t)` four times,
//! all trees a level at a time. Following the nodes took 263 ns for 20 trees, mostly
//! mispredicted branches; this walk about 190-210 ns (`benches/benches/rlcc.rs`). On a CPU the
//! 4-12-12-1 MLP is faster still (about 100 ns: 204 multiply-adds in SIMD); trees pay off on
//! the NIC cores the paper targets, which have no vector unit.

use serde::{Deserialize, Serialize};

use crate::mlp::INPUTS;
use crate::observation::Observation;

/// Most trees an ensemble may have.
pub const MAX_TREES: usize = 20;
/// Deepest a tree may be (splits from root to leaf).
pub const MAX_DEPTH: usize = 4;
/// The format tag of a trees file.
pub const TREES_FORMAT: &str = "intlab-rlcc-trees";

/// One node of a tree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Node {
    /// Go to `left` when x[feature] ≤ threshold, else to `right` (indices in the tree).
    Split {
        /// Feature index (0-3).
        feature: u8,
        /// Threshold.
        threshold: f32,
        /// Index of the left child.
        left: u16,
        /// Index of the right child.
        right: u16,
    },
    /// A leaf's value.
    Leaf {
        /// Added to the action.
        leaf: f32,
    },
}

/// One tree: its nodes, the root first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tree {
    /// The nodes.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// The leaf value `obs` reaches.
    pub fn eval(&self, obs: &Observation) -> f32 {
        let mut k = 0usize;
        loop {
            match self.nodes[k] {
                Node::Leaf { leaf } => return leaf,
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    k = if obs[usize::from(feature)] <= threshold {
                        usize::from(left)
                    } else {
                        usize::from(right)
                    }
                }
            }
        }
    }

    /// Checks indices, features, numbers and depth.
    fn check(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("a tree without nodes".into());
        }
        let mut depth = vec![0usize; self.nodes.len()];
        for (k, n) in self.nodes.iter().enumerate() {
            match *n {
                Node::Leaf { leaf } if !leaf.is_finite() => return Err(format!("node {k}: leaf {leaf} is not finite")),
                Node::Leaf { .. } => {}
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    if usize::from(feature) >= INPUTS {
                        return Err(format!("node {k}: feature {feature}, expected 0 to {}", INPUTS - 1));
                    }
                    if !threshold.is_finite() {
                        return Err(format!("node {k}: threshold {threshold} is not finite"));
                    }
                    for c in [left, right] {
                        let c = usize::from(c);
                        if c <= k || c >= self.nodes.len() {
                            return Err(format!(
                                "node {k}: child {c}, expected an index after {k} and below {}",
                                self.nodes.len()
                            ));
                        }
                        depth[c] = depth[k] + 1;
                        if depth[c] > MAX_DEPTH {
                            return Err(format!("node {c} is at depth {}, deeper than {MAX_DEPTH}", depth[c]));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Splits of a complete tree of depth [`MAX_DEPTH`].
const SPLITS: usize = (1 << MAX_DEPTH) - 1;

/// Slots per array of a complete tree: a power of two, so that masking an index with
/// `SLOTS - 1` keeps it in bounds without a check (the split arrays have one unused slot).
const SLOTS: usize = SPLITS + 1;

/// A tree as a complete tree of depth [`MAX_DEPTH`], for branch-free evaluation.
#[derive(Debug, Clone, PartialEq)]
struct Complete {
    split: [(u8, f32); SLOTS],
    leaf: [f32; SLOTS],
}

impl Complete {
    fn of(tree: &Tree) -> Complete {
        let mut c = Complete {
            split: [(0, f32::INFINITY); SLOTS],
            leaf: [0.0; SLOTS],
        };
        c.fill(tree, 0, 0);
        c
    }

    /// Places `tree`'s node `node` at slot `slot` of the complete tree.
    fn fill(&mut self, tree: &Tree, node: usize, slot: usize) {
        if slot >= SPLITS {
            if let Node::Leaf { leaf } = tree.nodes[node] {
                self.leaf[slot - SPLITS] = leaf;
            }
            return;
        }
        match tree.nodes[node] {
            Node::Split {
                feature,
                threshold,
                left,
                right,
            } => {
                self.split[slot] = (feature, threshold);
                self.fill(tree, usize::from(left), 2 * slot + 1);
                self.fill(tree, usize::from(right), 2 * slot + 2);
            }
            // A leaf above the last level: a split that always goes left (x ≤ ∞), whose
            // subtree holds the leaf on every side.
            Node::Leaf { .. } => {
                self.fill(tree, node, 2 * slot + 1);
                self.fill(tree, node, 2 * slot + 2);
            }
        }
    }

    /// One level down from slot `k`.
    #[inline(always)]
    fn down(&self, obs: &Observation, k: usize) -> usize {
        let (feature, threshold) = self.split[k & (SLOTS - 1)];
        2 * k + 1 + usize::from(obs[usize::from(feature) & 3] > threshold)
    }

    /// The leaf a walk that ended at slot `k` (past the splits) reaches.
    #[inline(always)]
    fn leaf_at(&self, k: usize) -> f32 {
        self.leaf[k.wrapping_sub(SPLITS) & (SLOTS - 1)]
    }

    #[cfg(test)]
    fn eval(&self, obs: &Observation) -> f32 {
        let mut k = 0usize;
        for _ in 0..MAX_DEPTH {
            k = self.down(obs, k);
        }
        self.leaf_at(k)
    }
}

/// The ensemble.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeEnsemble {
    base: f32,
    trees: Vec<Tree>,
    complete: Vec<Complete>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreesFile {
    format: String,
    version: u32,
    base: f32,
    trees: Vec<Tree>,
}

impl TreeEnsemble {
    /// An ensemble of `trees` starting from `base`, once they pass the limits (trees, depth)
    /// and every node's checks.
    pub fn new(base: f32, trees: Vec<Tree>) -> Result<TreeEnsemble, String> {
        if trees.len() > MAX_TREES {
            return Err(format!("{} trees, at most {MAX_TREES} allowed", trees.len()));
        }
        if !base.is_finite() {
            return Err(format!("base {base} is not finite"));
        }
        for (k, t) in trees.iter().enumerate() {
            t.check().map_err(|m| format!("tree {k}: {m}"))?;
        }
        Ok(TreeEnsemble {
            base,
            complete: trees.iter().map(Complete::of).collect(),
            trees,
        })
    }

    /// The starting value of every prediction.
    pub fn base(&self) -> f32 {
        self.base
    }

    /// The trees.
    pub fn trees(&self) -> &[Tree] {
        &self.trees
    }

    /// The action for `obs`, in [−1, 1].
    pub fn act(&self, obs: &Observation) -> f32 {
        // Level by level across the trees, so that their walks overlap in the pipeline.
        let mut at = [0usize; MAX_TREES];
        for _ in 0..MAX_DEPTH {
            for (k, t) in at.iter_mut().zip(&self.complete) {
                *k = t.down(obs, *k);
            }
        }
        let leaves: f32 = at.iter().zip(&self.complete).map(|(&k, t)| t.leaf_at(k)).sum();
        (self.base + leaves).clamp(-1.0, 1.0)
    }

    /// Parses a trees file's text.
    pub fn from_json(text: &str) -> Result<TreeEnsemble, String> {
        let f: TreesFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if f.format != TREES_FORMAT || f.version != 1 {
            return Err(format!(
                "expected format \"{TREES_FORMAT}\" version 1, got \"{}\" version {}",
                f.format, f.version
            ));
        }
        TreeEnsemble::new(f.base, f.trees)
    }

    /// The file text.
    pub fn to_json(&self) -> String {
        let f = TreesFile {
            format: TREES_FORMAT.into(),
            version: 1,
            base: self.base,
            trees: self.trees.clone(),
        };
        serde_json::to_string_pretty(&f).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(feature: u8, threshold: f32, left: u16, right: u16) -> Node {
        Node::Split {
            feature,
            threshold,
            left,
            right,
        }
    }

    #[test]
    fn an_ensemble_adds_its_leaves_to_the_base_and_clamps() {
        let t = Tree {
            nodes: vec![
                split(3, 0.0, 1, 2),
                Node::Leaf { leaf: 0.5 },
                Node::Leaf { leaf: -0.25 },
            ],
        };
        let e = TreeEnsemble::new(0.1, vec![t.clone(), t]).expect("valid");
        assert!((e.act(&[0.0, 0.0, 0.0, -1.0]) - 1.0).abs() < 1e-7, "0.1 + 1.0, clamped");
        assert!((e.act(&[0.0, 0.0, 0.0, 1.0]) + 0.4).abs() < 1e-7);
        assert_eq!(TreeEnsemble::from_json(&e.to_json()), Ok(e));
    }

    #[test]
    fn the_branch_free_walk_agrees_with_the_nodes() {
        // A lopsided tree: a leaf at depth 1, splits down to depth 4 on the other side.
        let t = Tree {
            nodes: vec![
                split(0, 0.5, 1, 2),
                Node::Leaf { leaf: 1.0 },
                split(1, 0.0, 3, 4),
                split(2, 0.25, 5, 6),
                Node::Leaf { leaf: 2.0 },
                split(3, -1.0, 7, 8),
                Node::Leaf { leaf: 3.0 },
                Node::Leaf { leaf: 4.0 },
                Node::Leaf { leaf: 5.0 },
            ],
        };
        let c = Complete::of(&t);
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..10_000 {
            let obs: Observation = std::array::from_fn(|_| rng.f32() * 4.0 - 2.0);
            assert_eq!(c.eval(&obs), t.eval(&obs), "{obs:?}");
        }
    }

    #[test]
    fn bad_trees_are_refused_with_the_node_and_the_rule() {
        let file = |nodes: &str| {
            format!(
                "{{\"format\": \"intlab-rlcc-trees\", \"version\": 1, \"base\": 0, \"trees\": [{{\"nodes\": {nodes}}}]}}"
            )
        };
        let loop_back = file("[{\"feature\": 0, \"threshold\": 1, \"left\": 0, \"right\": 1}, {\"leaf\": 1}]");
        let e = TreeEnsemble::from_json(&loop_back).unwrap_err();
        assert!(e.contains("tree 0: node 0: child 0, expected an index after 0"), "{e}");
        let bad_feature =
            file("[{\"feature\": 4, \"threshold\": 1, \"left\": 1, \"right\": 2}, {\"leaf\": 1}, {\"leaf\": 2}]");
        assert!(TreeEnsemble::from_json(&bad_feature).unwrap_err().contains("feature 4"));
        // Five splits in a row (each left child the next split): the fifth leaf is at depth 5.
        let chain: Vec<String> = (0..5)
            .map(|k| {
                format!(
                    "{{\"feature\": 0, \"threshold\": 0, \"left\": {}, \"right\": {}}}",
                    k + 1,
                    k + 6
                )
            })
            .chain((0..6).map(|_| "{\"leaf\": 0}".to_owned()))
            .collect();
        let deep = file(&format!("[{}]", chain.join(",")));
        let e = TreeEnsemble::from_json(&deep).unwrap_err();
        assert!(e.contains("deeper than 4"), "{e}");
        assert!(
            TreeEnsemble::from_json(&file("[]"))
                .unwrap_err()
                .contains("without nodes")
        );
        assert!(TreeEnsemble::from_json("[1, 2]").is_err());
    }
}
