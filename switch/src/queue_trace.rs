//! A port's queue over time, kept by the worker that owns the port: the largest occupancy seen
//! at dequeue in each fixed interval. Exact, because it reads the virtual schedule rather than
//! polling the queue from another thread.

use serde::{Deserialize, Serialize};

/// The largest queue seen at dequeue within one interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePoint {
    /// Start of the interval on the switch clock (ns).
    pub t_ns: u64,
    /// Largest occupancy at a dequeue in the interval (bytes).
    pub max_bytes: u64,
}

/// Collects [`QueuePoint`]s; intervals without a dequeue leave no point.
#[derive(Debug, Clone, Default)]
pub struct QueueTrace {
    every_ns: u64,
    current: Option<QueuePoint>,
    points: Vec<QueuePoint>,
}

impl QueueTrace {
    /// A trace with intervals of `every_ns`; 0 records nothing.
    pub fn new(every_ns: u64) -> QueueTrace {
        QueueTrace {
            every_ns,
            ..QueueTrace::default()
        }
    }

    /// Records the occupancy `qlen` a frame saw when it started leaving at `t_ns`.
    pub fn record(&mut self, t_ns: u64, qlen: u64) {
        if self.every_ns == 0 {
            return;
        }
        let start = t_ns - t_ns % self.every_ns;
        match &mut self.current {
            Some(p) if p.t_ns == start => p.max_bytes = p.max_bytes.max(qlen),
            current => {
                if let Some(done) = current.take() {
                    self.points.push(done);
                }
                *current = Some(QueuePoint {
                    t_ns: start,
                    max_bytes: qlen,
                });
            }
        }
    }

    /// Every point so far, the open interval included.
    pub fn points(&self) -> Vec<QueuePoint> {
        self.points.iter().copied().chain(self.current).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_largest_queue_per_interval() {
        let mut t = QueueTrace::new(100);
        for (at, q) in [(5, 10), (50, 30), (99, 20), (100, 0), (350, 7)] {
            t.record(at, q);
        }
        let got: Vec<(u64, u64)> = t.points().iter().map(|p| (p.t_ns, p.max_bytes)).collect();
        assert_eq!(got, [(0, 30), (100, 0), (300, 7)]);
    }

    #[test]
    fn zero_interval_records_nothing() {
        let mut t = QueueTrace::new(0);
        t.record(5, 10);
        assert!(t.points().is_empty());
    }
}
