//! The distributions of netem's delay jitter (tc-netem(8) `distribution`): the uniform default
//! and the tables iproute2 ships (`normal`, `pareto`, `paretonormal`), each an inverse CDF
//! scaled so that the jitter is its unit. The tables are computed here from the definitions
//! their generators in iproute2's `netem/` use rather than read from files: netem draws an
//! entry of 4,096 at random, which is this function at one of 4,096 points.

use std::fmt;
use std::str::FromStr;

/// netem's table values are 16-bit, in units of 1/8,192: nothing lies beyond this.
const TABLE_LIMIT: f64 = 32767.0 / 8192.0;

/// The shape of the delay jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Distribution {
    /// Evenly between delay − jitter and delay + jitter (netem without `distribution`).
    #[default]
    Uniform,
    /// Normal, the jitter its standard deviation (clipped at 4 of them, as netem's table).
    Normal,
    /// Pareto with shape 3, shifted to mean 0 and scaled by 4/3 (NIST Net's, as netem's).
    Pareto,
    /// A quarter normal and three quarters Pareto, drawn from one quantile.
    ParetoNormal,
}

impl Distribution {
    /// Its value at quantile `u` (0 to 1), in units of the jitter: the delay is
    /// `delay + jitter · value`.
    pub fn at(self, u: f64) -> f64 {
        match self {
            Distribution::Uniform => 2.0 * u - 1.0,
            Distribution::Normal => normal(u),
            Distribution::Pareto => pareto(u),
            Distribution::ParetoNormal => (normal(u) + 3.0 * pareto(u)) / 4.0,
        }
    }

    /// Its name as tc-netem(8) writes it.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::Pareto => "pareto",
            Distribution::ParetoNormal => "paretonormal",
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Distribution {
    type Err = String;

    fn from_str(s: &str) -> Result<Distribution, String> {
        [
            Distribution::Uniform,
            Distribution::Normal,
            Distribution::Pareto,
            Distribution::ParetoNormal,
        ]
        .into_iter()
        .find(|d| d.name() == s)
        .ok_or_else(|| format!("unknown distribution `{s}`: expected uniform, normal, pareto or paretonormal"))
    }
}

/// The standard normal quantile at `u`, clipped as netem's table is.
fn normal(u: f64) -> f64 {
    normal_quantile(u).clamp(-TABLE_LIMIT, TABLE_LIMIT)
}

/// NIST Net's Pareto: `(v^(-1/3) − 1.5) · 4/3` with `v = 1 − u`, mean 0 for shape 3.
fn pareto(u: f64) -> f64 {
    let v = (1.0 - u).max(f64::MIN_POSITIVE);
    ((v.powf(-1.0 / 3.0) - 1.5) * 4.0 / 3.0).min(TABLE_LIMIT)
}

/// The standard normal quantile (Acklam's rational approximation, relative error under
/// 1.2e-9: far finer than netem's table, whose steps are 1/8,192).
fn normal_quantile(u: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    const LOW: f64 = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if u <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if u >= 1.0 {
        return f64::INFINITY;
    }
    if u < LOW {
        tail((-2.0 * u.ln()).sqrt())
    } else if u > 1.0 - LOW {
        -tail((-2.0 * (1.0 - u).ln()).sqrt())
    } else {
        let q = u - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_quantile_matches_known_values() {
        // Φ⁻¹ at 0.5, 0.8413 (one standard deviation), 0.975 and 0.001.
        for (u, x) in [
            (0.5, 0.0),
            (0.841_344_746, 1.0),
            (0.975, 1.959_964),
            (0.001, -3.090_232),
        ] {
            assert!(
                (normal_quantile(u) - x).abs() < 1e-5,
                "Φ⁻¹({u}) = {}",
                normal_quantile(u)
            );
        }
    }

    /// Mean and standard deviation of a distribution over a fine grid of quantiles.
    fn moments(d: Distribution) -> (f64, f64) {
        let n = 1_000_000;
        let v: Vec<f64> = (0..n).map(|k| d.at((k as f64 + 0.5) / n as f64)).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        (mean, var.sqrt())
    }

    #[test]
    fn each_distribution_has_the_moments_of_its_definition() {
        // Uniform on [−1, 1): mean 0, sd 1/√3. Normal: 0 and 1 (the 4σ clip costs 0.03 %).
        // Pareto (shape 3): mean 0 and sd (4/3)·√0.75 = 1.15 unclipped; netem's table stops
        // at 4 (1.1 % of draws), which gives mean −0.0329 and sd 0.8209 (the clipped quantile
        // function integrated).
        let cases = [
            (Distribution::Uniform, 0.0, 1.0 / 3f64.sqrt()),
            (Distribution::Normal, 0.0, 1.0),
            (Distribution::Pareto, -0.0329, 0.8209),
        ];
        for (d, mean, sd) in cases {
            let (m, s) = moments(d);
            assert!(
                (m - mean).abs() < 1e-3 && (s - sd).abs() < 2e-3,
                "{d}: mean {m}, sd {s}"
            );
        }
        let m = moments(Distribution::Pareto).0;
        // Skewed: the median below the mean, a long right tail.
        assert!(Distribution::Pareto.at(0.5) < m && Distribution::Pareto.at(0.999) > 3.0);
    }

    #[test]
    fn names_read_back() {
        for d in ["uniform", "normal", "pareto", "paretonormal"] {
            assert_eq!(d.parse::<Distribution>().unwrap().name(), d);
        }
        assert!(
            "gaussian"
                .parse::<Distribution>()
                .unwrap_err()
                .contains("expected uniform")
        );
    }
}
