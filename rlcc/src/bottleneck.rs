//! A fluid model of N flows sharing one bottleneck, stepped once per base RTT: what
//! `intlab rlcc train` trains against. Each flow's rate is a fraction of the line rate; the
//! queue (in bandwidth-delay products) grows by the excess of the rates' sum over the line rate
//! each RTT. A flow measures the RTT of what it sent one RTT before: inflation 1 + q with q
//! the queue then (plus measurement noise), so its feedback lags by the RTT it measures, as on
//! a real network, where deciding every base RTT on that lagging signal overshoots. It trains in
//! seconds where the lab would take hours, and the policy is then checked on the lab (see
//! docs/rlcc.md); the papers trained in a simulator too (OMNeT++).

use crate::observation::{History, RewardShape, multiplier};

/// Largest queue, in BDPs (the buffer).
const BUFFER_BDPS: f64 = 64.0;

/// One flow of the model.
#[derive(Debug, Clone)]
pub struct FluidFlow {
    /// Rate as a fraction of the line rate.
    pub rate: f64,
    /// Its history of (multiplier, reward term).
    pub history: History,
    /// The multiplier it applied last.
    pub last_multiplier: f64,
    /// Its latest reward term.
    pub term: f64,
}

/// The shared bottleneck.
#[derive(Debug, Clone)]
pub struct Bottleneck {
    /// The flows.
    pub flows: Vec<FluidFlow>,
    /// Queue in BDPs.
    pub queue: f64,
    /// Standard deviation of the RTT-inflation noise each flow measures.
    pub noise: f64,
    /// Lowest rate a flow may fall to (fraction of line rate), as the transport's floor.
    pub min_rate: f64,
    /// The queue at the end of each past step, newest last (as far back as an RTT reaches).
    past: Vec<f64>,
    rng: fastrand::Rng,
}

impl Bottleneck {
    /// `n` flows and an empty queue; with probability `line_rate_starts` (drawn by `seed`) the
    /// flows start at line rate, as the transport's do, else at random rates from the floor
    /// `min_rate` to line rate.
    pub fn new(n: usize, noise: f64, min_rate: f64, line_rate_starts: f64, seed: u64) -> Bottleneck {
        let mut rng = fastrand::Rng::with_seed(seed);
        let at_line_rate = rng.f64() < line_rate_starts;
        let flows = (0..n.max(1))
            .map(|_| FluidFlow {
                rate: if at_line_rate {
                    1.0
                } else {
                    min_rate + (1.0 - min_rate) * rng.f64()
                },
                history: History::default(),
                last_multiplier: 1.0,
                term: 0.0,
            })
            .collect();
        Bottleneck {
            flows,
            queue: 0.0,
            noise,
            min_rate,
            past: vec![0.0],
            rng,
        }
    }

    /// Every flow measures its RTT inflation and records its reward term under `shape`.
    pub fn observe(&mut self, shape: &RewardShape) {
        // The packets acknowledged now left when the queue they met had to build up: walk back
        // while the RTT they saw reaches further into the past than the step we look at.
        let mut back = 0usize;
        while back + 1 < self.past.len() && (back as f64) < self.past[self.past.len() - 1 - back] {
            back += 1;
        }
        let seen = self.past[self.past.len() - 1 - back];
        for f in &mut self.flows {
            // A symmetric triangular draw: cheap and bounded.
            let noise = self.noise * (self.rng.f64() - self.rng.f64());
            let inflation = (1.0 + seen + noise).max(1.0);
            f.term = shape.term(inflation, f.rate);
            f.history.push(f.last_multiplier, f.term);
        }
    }

    /// Applies each flow's action and advances one RTT.
    pub fn step(&mut self, actions: &[f32]) {
        for (f, &a) in self.flows.iter_mut().zip(actions) {
            let m = multiplier(f64::from(a));
            f.last_multiplier = m;
            f.rate = (f.rate * m).clamp(self.min_rate, 1.0);
        }
        let sum: f64 = self.flows.iter().map(|f| f.rate).sum();
        self.queue = (self.queue + sum - 1.0).clamp(0.0, BUFFER_BDPS);
        self.past.push(self.queue);
        if self.past.len() > BUFFER_BDPS as usize + 2 {
            self.past.remove(0);
        }
    }

    /// Share of the line rate the flows use (capped at 1: what the link carries).
    pub fn utilization(&self) -> f64 {
        let sum: f64 = self.flows.iter().map(|f| f.rate).sum();
        if self.queue > 0.0 { 1.0 } else { sum.min(1.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_integrates_the_excess_rate() {
        let mut b = Bottleneck::new(2, 0.0, 0.001, 0.0, 1);
        for f in &mut b.flows {
            f.rate = 0.6;
        }
        b.step(&[0.0, 0.0]);
        assert!((b.queue - 0.2).abs() < 1e-12);
        b.observe(&RewardShape::default());
        // Inflation 1.2 < β: every flow reads −target·scale.
        assert!((b.flows[0].term + 0.8).abs() < 1e-12);
        b.step(&[-1.0, -1.0]);
        // 2 × 0.5 = 1.0: the queue holds.
        assert!((b.queue - 0.2).abs() < 1e-9, "{}", b.queue);
        assert_eq!(b.flows[1].history.observation()[2], 1.0);
    }

    #[test]
    fn a_flow_sees_the_queue_one_rtt_late() {
        let mut b = Bottleneck::new(1, 0.0, 0.001, 0.0, 1);
        let shape = RewardShape::default();
        // Queue 3 BDPs after one step, then 5: an RTT of 6 base RTTs reaches back past both.
        b.flows[0].rate = 1.0;
        b.queue = 3.0;
        b.step(&[0.0]);
        b.queue = 5.0;
        b.past.push(5.0);
        b.observe(&shape);
        // The oldest step in reach is the initial empty queue: inflation 1, term −0.8.
        assert!((b.flows[0].term + 0.8).abs() < 1e-12, "{}", b.flows[0].term);
        b.past = vec![0.0, 0.0, 0.0, 4.0];
        b.observe(&shape);
        // The newest queue (4) is an RTT of 5 away; the step before it had an empty queue,
        // which is what the packets acknowledged now met: inflation 1.
        assert!((b.flows[0].term + 0.8).abs() < 1e-12);
        b.past = vec![2.0, 2.0, 2.0, 2.0];
        b.observe(&shape);
        // Steady queue 2: inflation 3, (3 − 1.5)·1 − 0.064, scaled.
        assert!((b.flows[0].term - (1.5 - 0.064) * 12.5).abs() < 1e-9);
    }
}
