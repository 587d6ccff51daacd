//! Delay sensitivity (Netscope, Patke et al., ICS 2021, §4): how much an application's runtime
//! follows the time its messages take. The application runs under several levels of synthetic
//! congestion (a sweep of one scenario key: a background application's message size, a link
//! rate, ...); runtime is fitted against mean message delivery time by least squares.
//!
//! c_a is the fit's elasticity at the mean, slope × mean(message time) / mean(runtime): the
//! share of runtime that moves with message time. An application that only communicates (the
//! paper's ping-pong, its unit) has c_a = 1; one that mostly computes, close to 0. The paper's
//! own estimator is a model over network counters; this is its definition (the gradient of
//! runtime against message delivery time) measured directly, normalized so that c_a = 1 is
//! the paper's ping-pong.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::sweep::{Axis, SweepError, SweepRun, sweep};
use intlab_lab::run::Progress;

/// A least-squares line through (mean message time, runtime), both in ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// The points, one per congestion level that finished.
    pub points: Vec<(f64, f64)>,
    /// Runtime per unit of message time.
    pub slope: f64,
    /// Runtime at zero message time (ns).
    pub intercept: f64,
    /// Pearson's correlation of the points.
    pub r: f64,
    /// The delay sensitivity: the elasticity at the mean.
    pub c_a: f64,
}

/// Fits `points`; None with fewer than two distinct message times.
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 || my <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some(Fit {
        points: points.to_vec(),
        slope,
        intercept: my - slope * mx,
        r: if syy > 0.0 { sxy / (sxx * syy).sqrt() } else { 0.0 },
        c_a: slope * mx / my,
    })
}

/// Runs `file` once per value of `congestion` and fits application `app`'s runtime against its
/// mean message time; the runs land in `out/point-K/` as a sweep's do.
pub fn estimate(
    file: Option<&Path>,
    app: &str,
    congestion: &Axis,
    set: &[String],
    out: &Path,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<(Vec<SweepRun>, Option<Fit>), SweepError> {
    let runs = sweep(file, None, set, std::slice::from_ref(congestion), out, stop, progress)?;
    let mut points = Vec::new();
    for r in &runs {
        let a = r
            .results
            .summary
            .applications
            .iter()
            .find(|a| a.name == app)
            .ok_or_else(|| SweepError::Grid(format!("the workload has no application `{app}`")))?;
        if let (Some(m), Some(t)) = (a.message_mean_ns, a.runtime_ns) {
            points.push((m, t as f64));
        }
    }
    Ok((runs, fit(&points)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pure_communicator_has_c_a_one_and_compute_lowers_it() {
        // 10 iterations, no compute: runtime = 10 × message time.
        let pure: Vec<(f64, f64)> = [1.0, 2.0, 4.0].iter().map(|&m| (m, 10.0 * m)).collect();
        let f = fit(&pure).expect("fits");
        assert!((f.c_a - 1.0).abs() < 1e-12 && (f.r - 1.0).abs() < 1e-12, "{f:?}");
        // 10 iterations of 3 units of compute: runtime = 10 × (3 + m); at the mean m = 7/3,
        // c_a = 10 × (7/3) / (10 × (3 + 7/3)) = 7/16.
        let busy: Vec<(f64, f64)> = [1.0, 2.0, 4.0].iter().map(|&m| (m, 10.0 * (3.0 + m))).collect();
        let f = fit(&busy).expect("fits");
        assert!((f.c_a - 7.0 / 16.0).abs() < 1e-12, "{}", f.c_a);
        assert!(fit(&[(1.0, 5.0)]).is_none());
        assert!(fit(&[(1.0, 5.0), (1.0, 6.0)]).is_none());
    }
}
