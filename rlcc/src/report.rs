//! The `intlab rlcc` commands: train a policy network against the fluid bottleneck, distil it
//! to trees, and explain a policy with RL-CC's Table VI. The algorithms are in `intlab_rlcc`;
//! this is files, plots and words.

use std::io;
use std::path::{Path, PathBuf};

use crate::distill::{DistillConfig, Distilled, distill};
use crate::explain::{render, table};
use crate::train::{CurvePoint, TrainConfig, train};
use crate::{Mlp, Policy, PolicyError, RewardShape};
use plotters::prelude::*;

/// Why an `intlab rlcc` command failed.
#[derive(Debug, thiserror::Error)]
pub enum RlccError {
    /// A policy file could not be read or is not a policy.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A file could not be written.
    #[error("{file}: {message}")]
    Write {
        /// The file.
        file: PathBuf,
        /// What failed.
        message: String,
    },
    /// `distill` was given something other than an MLP.
    #[error("{0}: expected an MLP policy (intlab-rlcc-mlp JSON or a PyTorch checkpoint), got trees")]
    NotAnMlp(PathBuf),
}

fn write(file: &Path, text: &str) -> Result<(), RlccError> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| RlccError::Write {
            file: dir.to_owned(),
            message: e.to_string(),
        })?;
    }
    std::fs::write(file, text).map_err(|e| RlccError::Write {
        file: file.to_owned(),
        message: e.to_string(),
    })
}

/// The training curve's files next to the weights: `NAME-training.csv` and `.svg`.
pub fn curve_paths(weights: &Path) -> (PathBuf, PathBuf) {
    let stem = weights
        .file_stem()
        .map_or("policy".into(), |s| s.to_string_lossy().into_owned());
    let dir = weights.parent().unwrap_or(Path::new(""));
    (
        dir.join(format!("{stem}-training.csv")),
        dir.join(format!("{stem}-training.svg")),
    )
}

/// Trains with `cfg`, writes the MLP to `out` and its training curve beside it; `progress`
/// hears of each update. Returns the curve.
pub fn train_to(
    cfg: &TrainConfig,
    out: &Path,
    progress: impl FnMut(&CurvePoint),
) -> Result<Vec<CurvePoint>, RlccError> {
    let (mlp, curve) = train(cfg, progress);
    write(out, &mlp.to_json())?;
    let (csv, svg) = curve_paths(out);
    let mut text = String::from("update,reward,utilization,queue_bdp\n");
    for p in &curve {
        text.push_str(&format!(
            "{},{:.6},{:.6},{:.6}\n",
            p.update, p.reward, p.utilization, p.queue
        ));
    }
    write(&csv, &text)?;
    plot_curve(&svg, &curve).map_err(|e| RlccError::Write {
        file: svg.clone(),
        message: e.to_string(),
    })?;
    Ok(curve)
}

/// The reward per update (a moving mean over 20 updates), and the utilization.
fn plot_curve(path: &Path, curve: &[CurvePoint]) -> io::Result<()> {
    let err = |e: DrawingAreaErrorKind<io::Error>| io::Error::other(e.to_string());
    let smooth: Vec<(f64, f64, f64)> = curve
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let from = k.saturating_sub(19);
            let w = &curve[from..=k];
            let n = w.len() as f64;
            (
                p.update as f64,
                w.iter().map(|x| x.reward).sum::<f64>() / n,
                w.iter().map(|x| x.utilization).sum::<f64>() / n,
            )
        })
        .collect();
    let low = smooth.iter().map(|p| p.1).fold(0.0f64, f64::min).min(-1e-3);
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("RL-CC training: reward and utilization", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(50)
        .build_cartesian_2d(0.0..(curve.len().max(1) as f64), low * 1.05..0.0)
        .map_err(err)?
        .set_secondary_coord(0.0..(curve.len().max(1) as f64), 0.0..1.05);
    chart
        .configure_mesh()
        .x_desc("update")
        .y_desc("mean reward −δ² (20-update mean)")
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("bottleneck utilization")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(smooth.iter().map(|p| (p.0, p.1)), BLUE.stroke_width(2)))
        .map_err(err)?
        .label("reward")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .draw_secondary_series(LineSeries::new(smooth.iter().map(|p| (p.0, p.2)), RED.stroke_width(1)))
        .map_err(err)?
        .label("utilization")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .configure_series_labels()
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Reads an MLP (our JSON or a PyTorch checkpoint).
pub fn load_mlp(path: &Path) -> Result<Mlp, RlccError> {
    match Policy::load(path)? {
        Policy::Mlp(m) => Ok(*m),
        Policy::Trees(_) => Err(RlccError::NotAnMlp(path.to_owned())),
    }
}

/// Distils the MLP in `mlp_file` with `cfg` and writes the trees to `out`.
pub fn distill_to(mlp_file: &Path, cfg: &DistillConfig, out: &Path) -> Result<Distilled, RlccError> {
    let mlp = load_mlp(mlp_file)?;
    let d = distill(&mlp, cfg);
    write(out, &d.trees.to_json())?;
    Ok(d)
}

/// Table VI for the policy in `file` and, when it is an MLP, for its trees side by side (the
/// trees in `trees`, or distilled now with the default settings).
pub fn explain(file: &Path, trees: Option<&Path>, shape: &RewardShape) -> Result<String, RlccError> {
    let policy = Policy::load(file)?;
    let mut out = render(
        &format!("{} (multiplier applied)", file.display()),
        &table(&policy, shape),
    );
    if let Policy::Mlp(mlp) = &policy {
        let (name, t) = match trees {
            Some(path) => (path.display().to_string(), Policy::load(path)?),
            None => {
                let d = distill(mlp, &DistillConfig::default());
                (
                    format!("its trees, distilled now (RMSE {:.4})", d.rmse),
                    Policy::Trees(d.trees),
                )
            }
        };
        out.push('\n');
        out.push_str(&render(&name, &table(&t, shape)));
    }
    Ok(out)
}
