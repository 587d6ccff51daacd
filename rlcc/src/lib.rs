//! RL-CC (Tessler et al., AAAI 2022; Fuhrer et al., CCGrid 2023): the learned rate controller's
//! observation and reward, its two policy forms (the MLP and its distillation to boosted
//! trees) with their files, a loader for the public PyTorch checkpoint, training against a
//! fluid model of a shared bottleneck, distillation, and the Table VI explanation. The
//! controller that runs a policy on real sockets is `intlab_transport::cc::RlCc`.

#![forbid(unsafe_code)]

pub mod bottleneck;
pub mod checkpoint;
pub mod distill;
pub mod explain;
pub mod mlp;
pub mod observation;
pub mod pickle;
pub mod policy;
pub mod report;
pub mod train;
pub mod trees;

pub use mlp::Mlp;
pub use observation::{History, Observation, RewardShape, multiplier};
pub use policy::Policy;
pub use trees::TreeEnsemble;

use std::path::{Path, PathBuf};

/// A policy file could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct PolicyError {
    /// The file.
    pub file: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

impl PolicyError {
    fn at(file: &Path, message: String) -> PolicyError {
        PolicyError {
            file: file.to_owned(),
            message,
        }
    }
}
