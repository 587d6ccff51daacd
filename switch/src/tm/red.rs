//! RED-style ECN marking as the ns-3 HPCC switch does it, at dequeue.

/// ECN marking with RED thresholds, applied at dequeue to ECN-capable frames.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnSpec {
    /// Below this queue occupancy (bytes) nothing is marked.
    pub kmin: u64,
    /// Above this occupancy every ECN-capable frame is marked.
    pub kmax: u64,
    /// Marking probability reached at `kmax` (linear from 0 at `kmin`).
    pub pmax: f64,
}

/// Marking decision from queue occupancy.
#[derive(Debug, Clone, Copy)]
pub struct Red {
    spec: EcnSpec,
}

impl Red {
    /// Marks with `spec`'s thresholds.
    pub fn new(spec: EcnSpec) -> Red {
        Red { spec }
    }

    /// Probability of marking an ECN-capable frame leaving with `qlen` bytes queued behind it:
    /// 0 up to `kmin`, rising linearly to `pmax` at `kmax`, 1 above `kmax`.
    pub fn probability(&self, qlen: u64) -> f64 {
        let s = &self.spec;
        if qlen > s.kmax {
            1.0
        } else if qlen <= s.kmin || s.kmax == s.kmin {
            0.0
        } else {
            s.pmax * (qlen - s.kmin) as f64 / (s.kmax - s.kmin) as f64
        }
    }

    /// Draws the decision with a uniform `u` in [0, 1).
    pub fn should_mark(&self, qlen: u64, u: f64) -> bool {
        u < self.probability(qlen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        let r = Red::new(EcnSpec {
            kmin: 100,
            kmax: 300,
            pmax: 0.2,
        });
        assert_eq!(r.probability(50), 0.0);
        assert_eq!(r.probability(100), 0.0);
        assert!((r.probability(200) - 0.1).abs() < 1e-12);
        assert!((r.probability(300) - 0.2).abs() < 1e-12);
        assert_eq!(r.probability(301), 1.0);
        assert!(r.should_mark(301, 0.999_999));
        assert!(!r.should_mark(99, 0.0));
    }
}
