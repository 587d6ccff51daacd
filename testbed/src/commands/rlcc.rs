//! `intlab rlcc`: RL-CC policies: train, distill, explain.

use std::process::ExitCode;

use anyhow::Result;

use crate::RlccCommand;

/// `intlab rlcc ...`.
pub(crate) fn run_rlcc(cmd: RlccCommand) -> Result<ExitCode> {
    match cmd {
        RlccCommand::Train {
            out,
            updates,
            seed,
            discount,
            noise,
            models,
        } => {
            let cfg = intlab_rlcc::train::TrainConfig {
                updates,
                seed,
                discount,
                noise,
                models,
                ..Default::default()
            };
            let bar = indicatif::ProgressBar::new(updates as u64).with_style(
                indicatif::ProgressStyle::with_template("training {bar:40} {pos}/{len} updates, reward {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let curve = intlab_rlcc::report::train_to(&cfg, &out, |p| {
                bar.inc(1);
                bar.set_message(format!("{:.4}", p.reward));
            })?;
            bar.finish_and_clear();
            let tail = &curve[curve.len().saturating_sub(50)..];
            let n = tail.len().max(1) as f64;
            println!(
                "trained {} updates: last 50 mean reward {:.4}, utilization {:.3}, queue {:.2} BDP",
                curve.len(),
                tail.iter().map(|p| p.reward).sum::<f64>() / n,
                tail.iter().map(|p| p.utilization).sum::<f64>() / n,
                tail.iter().map(|p| p.queue).sum::<f64>() / n
            );
            let (csv, svg) = intlab_rlcc::report::curve_paths(&out);
            println!(
                "weights: {}; training curve: {}, {}",
                out.display(),
                csv.display(),
                svg.display()
            );
        }
        RlccCommand::Distill { mlp, out, trees, seed } => {
            let cfg = intlab_rlcc::distill::DistillConfig {
                trees,
                seed,
                ..Default::default()
            };
            let d = intlab_rlcc::report::distill_to(&mlp, &cfg, &out)?;
            println!(
                "{} trees of depth ≤ {}: RMSE against the MLP {:.4} held out ({:.4} fitted); written to {}",
                d.trees.trees().len(),
                cfg.depth,
                d.rmse,
                d.train_rmse,
                out.display()
            );
        }
        RlccCommand::Explain { policy, trees } => {
            print!(
                "{}",
                intlab_rlcc::report::explain(&policy, trees.as_deref(), &intlab_rlcc::RewardShape::default())?
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
