//! A policy of either form, loaded from a file whose kind is recognized from its content.

use std::path::Path;

use crate::mlp::{MLP_FORMAT, Mlp};
use crate::observation::Observation;
use crate::trees::{TREES_FORMAT, TreeEnsemble};
use crate::{PolicyError, checkpoint};

/// The policy intlab ships (`policies/rlcc-trees.json`, made by `intlab rlcc train` and
/// `intlab rlcc distill`; the commands are in `policies/README.md`).
pub const BUILTIN_TREES: &str = include_str!("../../policies/rlcc-trees.json");

/// An RL-CC policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// The network.
    Mlp(Box<Mlp>),
    /// Its distillation to trees.
    Trees(TreeEnsemble),
}

impl Policy {
    /// The action for `obs`, in [−1, 1].
    pub fn act(&self, obs: &Observation) -> f32 {
        match self {
            Policy::Mlp(m) => m.act(obs),
            Policy::Trees(t) => t.act(obs),
        }
    }

    /// Reads a policy: our MLP or trees JSON, or a PyTorch checkpoint of RL-CC's network (see
    /// [`checkpoint`]).
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let bytes = std::fs::read(path).map_err(|e| PolicyError::at(path, e.to_string()))?;
        // JSON starts with `{` (after any whitespace); anything else is taken for a checkpoint.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return checkpoint::from_bytes(&bytes)
                .map(|m| Policy::Mlp(Box::new(m)))
                .map_err(|m| PolicyError::at(path, m));
        }
        let text = String::from_utf8(bytes).map_err(|_| PolicyError::at(path, "JSON that is not UTF-8".into()))?;
        Policy::from_json(&text).map_err(|m| PolicyError::at(path, m))
    }

    /// Parses an MLP or trees JSON file by its `format`.
    pub fn from_json(text: &str) -> Result<Policy, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(MLP_FORMAT) => Mlp::from_json(text).map(|m| Policy::Mlp(Box::new(m))),
            Some(TREES_FORMAT) => TreeEnsemble::from_json(text).map(Policy::Trees),
            other => Err(format!(
                "expected \"format\": \"{MLP_FORMAT}\" or \"{TREES_FORMAT}\", got {}",
                other.map_or("none".to_owned(), |f| format!("\"{f}\""))
            )),
        }
    }

    /// The shipped tree policy (compiled in from `policies/rlcc-trees.json`); an error, never
    /// a neutral stand-in, should that file ever be broken.
    pub fn builtin() -> Result<Policy, PolicyError> {
        TreeEnsemble::from_json(BUILTIN_TREES)
            .map(Policy::Trees)
            .map_err(|m| PolicyError::at(std::path::Path::new("policies/rlcc-trees.json (built in)"), m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::table;
    use crate::observation::RewardShape;

    /// The shipped MLP, from which the shipped trees were distilled.
    const SHIPPED_MLP: &str = include_str!("../../policies/rlcc-mlp.json");

    #[test]
    fn the_shipped_policy_speeds_up_when_under_utilized_and_slows_down_when_congested() {
        let trees = TreeEnsemble::from_json(BUILTIN_TREES).expect("the shipped trees are valid");
        assert!(trees.trees().len() <= crate::trees::MAX_TREES);
        assert_eq!(Policy::builtin(), Ok(Policy::Trees(trees)));
        let mlp = Policy::from_json(SHIPPED_MLP).expect("the shipped MLP is valid");
        for policy in [Policy::builtin().expect("the shipped policy"), mlp] {
            let t = table(&policy, &RewardShape::default());
            for row in &t {
                assert!(row[0] > 1.0, "under-utilized: {row:?}");
                assert!(row[2] < 1.0, "congested: {row:?}");
            }
        }
    }
}
