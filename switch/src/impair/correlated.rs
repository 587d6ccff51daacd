//! netem's correlated random numbers (`get_crandom` in the kernel's `sch_netem.c`): each draw
//! is a weighted mean of a fresh uniform draw and the previous result, the weight on the
//! previous one being the correlation. tc-netem(8) calls it the correlation of successive
//! values; it is known not to give exactly that correlation for probabilities far from 1/2,
//! and it is what netem users have measured their results with, so it is kept as netem has it.

/// A stream of uniform values in [0, 1), each `rho` correlated with the one before.
#[derive(Debug, Clone)]
pub struct Correlated {
    rho: f64,
    last: f64,
}

impl Correlated {
    /// A stream with correlation `rho` (0 to 1), starting from a random value as netem does.
    pub fn new(rho: f64, rng: &mut fastrand::Rng) -> Correlated {
        Correlated { rho, last: rng.f64() }
    }

    /// The next value.
    pub fn next(&mut self, rng: &mut fastrand::Rng) -> f64 {
        let fresh = rng.f64();
        if self.rho == 0.0 {
            return fresh;
        }
        self.last = (1.0 - self.rho) * fresh + self.rho * self.last;
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lag-1 autocorrelation of `n` values of a stream with correlation `rho`.
    fn lag1(rho: f64, n: usize) -> (f64, f64) {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut c = Correlated::new(rho, &mut rng);
        let v: Vec<f64> = (0..n).map(|_| c.next(&mut rng)).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let cov = v.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum::<f64>() / (n - 1) as f64;
        (mean, cov / var)
    }

    #[test]
    fn successive_values_are_as_correlated_as_asked() {
        // An AR(1) stream: its lag-1 autocorrelation is rho, its mean stays 1/2. With 200,000
        // values the estimate's standard error is under 0.003: 0.01 is over 3 of them.
        for rho in [0.0, 0.25, 0.5, 0.9] {
            let (mean, r) = lag1(rho, 200_000);
            assert!((mean - 0.5).abs() < 0.01, "rho {rho}: mean {mean}");
            assert!((r - rho).abs() < 0.01, "rho {rho}: lag-1 autocorrelation {r}");
        }
    }
}
