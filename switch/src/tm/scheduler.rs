//! How a port's transmitter chooses between its priorities' FIFOs when more than one has a
//! frame ready: strict priority (the highest goes first, as PFC deployments usually run their
//! lossless class) or deficit weighted round robin (Shreedhar and Varghese's DRR with a quantum
//! per priority, as switch ASICs offer for sharing a port between classes).

use super::PRIORITIES;

/// The choice between priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheduler {
    /// The highest priority with a frame ready goes first.
    #[default]
    Strict,
    /// Deficit weighted round robin: each priority's share of a busy port in proportion to its
    /// weight (1 or more).
    Dwrr {
        /// Weight of each priority.
        weights: [u32; PRIORITIES],
    },
}

/// Deficit round robin's state on one port. A priority visited afresh gains its quantum
/// (weight × a frame of the largest size, so every visit sends at least one frame) and sends
/// while its head fits in its deficit; a priority that empties loses what it had left.
#[derive(Debug, Clone)]
pub struct Dwrr {
    quantum: [u64; PRIORITIES],
    deficit: [u64; PRIORITIES],
    current: usize,
}

impl Dwrr {
    /// Round robin with `weights` for frames of at most `largest_frame` bytes.
    pub fn new(weights: [u32; PRIORITIES], largest_frame: u64) -> Dwrr {
        Dwrr {
            quantum: weights.map(|w| u64::from(w.max(1)) * largest_frame),
            deficit: [0; PRIORITIES],
            current: 0,
        }
    }

    /// The priority to serve next, given each priority's ready head's length (`None`: nothing
    /// ready).
    pub fn choose(&self, head: impl Fn(usize) -> Option<u64>) -> Option<usize> {
        if head(self.current).is_some_and(|len| len <= self.deficit[self.current]) {
            return Some(self.current);
        }
        (1..=PRIORITIES)
            .map(|k| (self.current + k) % PRIORITIES)
            .find(|&p| head(p).is_some())
    }

    /// Accounts for a frame of `len` bytes sent from priority `p` (as [`Dwrr::choose`] said),
    /// which is `emptied` by it.
    pub fn sent(&mut self, p: usize, len: u64, emptied: bool) {
        let stays = p == self.current && len <= self.deficit[p];
        if !stays {
            self.current = p;
            self.deficit[p] += self.quantum[p];
        }
        self.deficit[p] = self.deficit[p].saturating_sub(len);
        if emptied {
            self.deficit[p] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order `n` frames of 1000 B leave in, priorities `busy` always backlogged.
    fn order(d: &mut Dwrr, busy: &[usize], n: usize) -> Vec<usize> {
        (0..n)
            .map(|_| {
                let p = d
                    .choose(|p| busy.contains(&p).then_some(1000))
                    .expect("a busy priority");
                d.sent(p, 1000, false);
                p
            })
            .collect()
    }

    #[test]
    fn backlogged_priorities_share_the_port_by_weight() {
        let mut weights = [1; PRIORITIES];
        weights[3] = 3;
        let mut d = Dwrr::new(weights, 1000);
        assert_eq!(order(&mut d, &[0, 3], 8), vec![3, 3, 3, 0, 3, 3, 3, 0]);
        // Alone, a priority has the port to itself.
        assert_eq!(order(&mut d, &[0], 3), vec![0, 0, 0]);
        assert_eq!(d.choose(|_| None), None);
    }

    #[test]
    fn a_priority_that_empties_keeps_no_credit() {
        let mut d = Dwrr::new([2; PRIORITIES], 1000);
        let p = d.choose(|p| (p == 1).then_some(600)).expect("ready");
        d.sent(p, 600, true);
        // Its 1400 B left are forgotten: the next visit starts from one quantum.
        assert_eq!(d.choose(|p| (p == 1).then_some(600)), Some(1));
        d.sent(1, 600, false);
        assert_eq!(d.deficit[1], 1400);
    }
}
