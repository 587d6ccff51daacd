//! `intlab sweep`: one scenario over a grid of parameter values (every combination), each run
//! in its own folder; the results as CSV and, for a two-parameter grid, heatmaps of p99 and
//! max FCT (the HPCC++ tuning study's metrics).
//!
//! A grid key without a dot is a controller parameter (`alpha` is `controller.alpha`); with
//! dots it is any scenario key. `zeta` is HPCC++'s ζ = 2β/α: it sets `controller.beta` to
//! ζ·α/2 for the α of the same point, so that a sweep can hold ζ fixed while α moves.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use plotters::prelude::*;

use intlab_lab::results::{Results, WriteError, write_error_at};
use intlab_lab::run::{self, Progress, RunError};
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_lab::topology::LoadError;

/// The sweep's table.
pub const TABLE_CSV: &str = "sweep.csv";
/// Heatmap of p99 FCT (two-parameter grids).
pub const HEATMAP_P99: &str = "heatmap_fct_p99.svg";
/// Heatmap of max FCT (two-parameter grids).
pub const HEATMAP_MAX: &str = "heatmap_fct_max.svg";

/// Why a sweep failed.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A grid is malformed.
    #[error("--grid {0}")]
    Grid(String),
    /// A point's scenario does not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A run failed.
    #[error("point {point}: {cause}")]
    Run {
        /// The point, as `key=value ...`.
        point: String,
        /// What failed.
        cause: RunError,
    },
    /// A file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// One grid dimension: a key and its values (YAML scalars, as written).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The key as given (`alpha`, `zeta`, `links.0.rate`).
    pub key: String,
    /// Its values.
    pub values: Vec<String>,
}

impl Axis {
    /// Parses `key=v1,v2,...`.
    pub fn parse(text: &str) -> Result<Axis, SweepError> {
        let (key, values) = text
            .split_once('=')
            .ok_or_else(|| SweepError::Grid(format!("{text}: expected key=value,value,...")))?;
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_owned()).collect();
        if key.is_empty() || values.iter().any(String::is_empty) {
            return Err(SweepError::Grid(format!("{text}: expected key=value,value,...")));
        }
        Ok(Axis {
            key: key.trim().to_owned(),
            values,
        })
    }
}

/// One point of the grid: a value per axis.
pub type Point = Vec<(String, String)>;

/// Every combination of the axes' values, the first axis varying slowest.
pub fn points(axes: &[Axis]) -> Vec<Point> {
    axes.iter().fold(vec![Vec::new()], |acc, axis| {
        acc.iter()
            .flat_map(|p| {
                axis.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((axis.key.clone(), v.clone()));
                    q
                })
            })
            .collect()
    })
}

/// The `--set` assignments of a point.
pub fn assignments(point: &Point) -> Result<Vec<String>, SweepError> {
    let path = |k: &str| {
        if k.contains('.') {
            k.to_owned()
        } else {
            format!("controller.{k}")
        }
    };
    let mut out = Vec::new();
    for (k, v) in point {
        if k == "zeta" {
            let alpha = point
                .iter()
                .find(|(k, _)| k == "alpha")
                .and_then(|(_, a)| a.parse::<f64>().ok())
                .ok_or_else(|| SweepError::Grid("zeta needs a numeric alpha axis in the same grid".into()))?;
            let zeta: f64 = v
                .parse()
                .map_err(|_| SweepError::Grid(format!("zeta={v}: expected a number")))?;
            out.push(format!("controller.beta={}", zeta * alpha / 2.0));
        } else {
            out.push(format!("{}={v}", path(k)));
        }
    }
    Ok(out)
}

fn label(point: &Point) -> String {
    point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One run of the sweep.
#[derive(Debug, Clone)]
pub struct SweepRun {
    /// Its point.
    pub point: Point,
    /// Its folder.
    pub dir: PathBuf,
    /// Its results.
    pub results: Results,
}

/// Runs `file` (the built-in scenario when None) under `controller` with `set`, once per point
/// of `axes`, into `out/point-K/`; writes `sweep.csv` and, for two axes, the heatmaps. Every
/// point's scenario is checked before the first run; `stop` skips the rest.
pub fn sweep(
    file: Option<&Path>,
    controller: Option<&str>,
    set: &[String],
    axes: &[Axis],
    out: &Path,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Vec<SweepRun>, SweepError> {
    let grid = points(axes);
    let mut scenarios = Vec::new();
    for p in &grid {
        let mut all = set.to_vec();
        all.extend(assignments(p)?);
        let o = Overrides {
            controller: controller.map(str::to_owned),
            set: all,
            only: None,
        };
        scenarios.push(Scenario::load_or_builtin(file, &o)?);
    }
    let series: Vec<(String, PathBuf, &Scenario)> = grid
        .iter()
        .zip(&scenarios)
        .enumerate()
        .map(|(k, (p, s))| (label(p), out.join(format!("point-{}", k + 1)), s))
        .collect();
    let results =
        run::run_series(&series, 's', stop, progress).map_err(|(point, cause)| SweepError::Run { point, cause })?;
    let runs: Vec<SweepRun> = grid
        .iter()
        .zip(series)
        .zip(results)
        .map(|((p, (_, dir, _)), results)| SweepRun {
            point: p.clone(),
            dir,
            results,
        })
        .collect();
    write(out, axes, &runs)?;
    Ok(runs)
}

/// The table as text: a row per point.
pub fn table(axes: &[Axis], runs: &[SweepRun]) -> String {
    let mut out = String::new();
    for a in axes {
        let _ = write!(out, "{:>18}", a.key);
    }
    let _ = writeln!(
        out,
        "{:>14}{:>14}{:>14}{:>10}{:>11}{:>14}",
        "FCT p50 us", "FCT p99 us", "FCT max us", "slow p99", "goodput%", "queue p99 KB"
    );
    for r in runs {
        for (_, v) in &r.point {
            let _ = write!(out, "{v:>18}");
        }
        let s = &r.results.summary;
        let f = |q: Option<f64>| q.map_or("-".to_owned(), |x| format!("{:.1}", x / 1e3));
        let _ = writeln!(
            out,
            "{:>14}{:>14}{:>14}{:>10}{:>11.1}{:>14}",
            f(s.fct_ns.map(|q| q.p50)),
            f(s.fct_ns.map(|q| q.p99)),
            f(s.fct_ns.map(|q| q.max)),
            s.slowdown.map_or("-".to_owned(), |q| format!("{:.2}", q.p99)),
            s.normalized_goodput * 100.0,
            f(s.bottleneck_queue.map(|q| q.p99)),
        );
    }
    out
}

fn write(out: &Path, axes: &[Axis], runs: &[SweepRun]) -> Result<(), WriteError> {
    let fail = |name: &str| write_error_at(out, name);
    std::fs::create_dir_all(out).map_err(fail(""))?;
    let mut csv = String::new();
    for a in axes {
        let _ = write!(csv, "{},", a.key);
    }
    csv.push_str(
        "folder,completed,flows,fct_p50_us,fct_p99_us,fct_max_us,slowdown_p99,normalized_goodput,queue_p99_bytes\n",
    );
    for r in runs {
        for (_, v) in &r.point {
            let _ = write!(csv, "{v},");
        }
        let s = &r.results.summary;
        let q = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{}",
            r.dir
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            s.completed,
            s.flows,
            q(s.fct_ns.map(|x| x.p50 / 1e3)),
            q(s.fct_ns.map(|x| x.p99 / 1e3)),
            q(s.fct_ns.map(|x| x.max / 1e3)),
            q(s.slowdown.map(|x| x.p99)),
            s.normalized_goodput,
            q(s.bottleneck_queue.map(|x| x.p99)),
        );
    }
    std::fs::write(out.join(TABLE_CSV), csv).map_err(fail(TABLE_CSV))?;
    if let [x, y] = axes {
        let p99 = |r: &Results| r.summary.fct_ns.map(|q| q.p99 / 1e3);
        let max = |r: &Results| r.summary.fct_ns.map(|q| q.max / 1e3);
        heatmap(&out.join(HEATMAP_P99), "p99 FCT (us)", x, y, runs, p99).map_err(fail(HEATMAP_P99))?;
        heatmap(&out.join(HEATMAP_MAX), "max FCT (us)", x, y, runs, max).map_err(fail(HEATMAP_MAX))?;
    }
    Ok(())
}

/// A grid of cells coloured by `value` (lighter is lower), each labelled with its value.
fn heatmap(
    path: &Path,
    what: &str,
    x: &Axis,
    y: &Axis,
    runs: &[SweepRun],
    value: fn(&Results) -> Option<f64>,
) -> std::io::Result<()> {
    let err = |e: DrawingAreaErrorKind<std::io::Error>| std::io::Error::other(e.to_string());
    let cell = |xi: usize, yi: usize| {
        runs.iter()
            .find(|r| {
                r.point.first().map(|p| &p.1) == Some(&x.values[xi])
                    && r.point.get(1).map(|p| &p.1) == Some(&y.values[yi])
            })
            .and_then(|r| value(&r.results))
    };
    let all: Vec<f64> = (0..x.values.len())
        .flat_map(|i| (0..y.values.len()).map(move |j| (i, j)))
        .filter_map(|(i, j)| cell(i, j))
        .collect();
    let (lo, hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    let root = SVGBackend::new(path, (800, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{what} over {} × {}", x.key, y.key), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x.values.len() as f64, 0.0..y.values.len() as f64)
        .map_err(err)?;
    let (xs, ys) = (x.values.clone(), y.values.clone());
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(x.key.as_str())
        .y_desc(y.key.as_str())
        .x_labels(xs.len() * 2 + 1)
        .y_labels(ys.len() * 2 + 1)
        .x_label_formatter(&|v| label_at(&xs, *v))
        .y_label_formatter(&|v| label_at(&ys, *v))
        .draw()
        .map_err(err)?;
    for i in 0..x.values.len() {
        for j in 0..y.values.len() {
            let v = cell(i, j);
            // White at the lowest value, deep red at the highest; grey where a run is missing.
            let colour = match v {
                Some(v) if hi > lo => {
                    let t = (v - lo) / (hi - lo);
                    RGBColor(255, (255.0 * (1.0 - 0.8 * t)) as u8, (255.0 * (1.0 - t)) as u8)
                }
                Some(_) => RGBColor(255, 230, 230),
                None => RGBColor(200, 200, 200),
            };
            let (x0, y0) = (i as f64, j as f64);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, y0), (x0 + 1.0, y0 + 1.0)],
                    colour.filled(),
                )))
                .map_err(err)?;
            let text = v.map_or("-".to_owned(), |v| format!("{v:.0}"));
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x0 + 0.4, y0 + 0.55),
                    ("sans-serif", 16),
                )))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)
}

/// The axis value a tick at `v` names (ticks at cell centres only).
fn label_at(values: &[String], v: f64) -> String {
    let k = v - 0.5;
    if k >= 0.0 && (k - k.round()).abs() < 1e-6 {
        values.get(k.round() as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_is_every_combination_and_zeta_sets_beta_from_alpha() {
        let axes = [
            Axis::parse("alpha=0.1,0.2").unwrap(),
            Axis::parse("zeta=0.4").unwrap(),
            Axis::parse("links.0.rate=1Gbps,2Gbps").unwrap(),
        ];
        let p = points(&axes);
        assert_eq!(p.len(), 4);
        assert_eq!(
            assignments(&p[3]).unwrap(),
            [
                "controller.alpha=0.2",
                "controller.beta=0.04000000000000001",
                "links.0.rate=2Gbps"
            ]
        );
        assert!(Axis::parse("alpha").is_err());
        assert!(Axis::parse("alpha=0.1,").is_err());
        let lonely_zeta = points(&[Axis::parse("zeta=0.4").unwrap()]);
        assert!(assignments(&lonely_zeta[0]).is_err());
    }
}
