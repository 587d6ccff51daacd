//! Shared receive queues: receive requests any QP attached to them takes from, in order, with
//! the limit event a program may ask for when they run low.

use std::collections::VecDeque;

use super::wr::RecvWr;

/// A shared receive queue.
#[derive(Debug)]
pub struct SharedReceiveQueue {
    /// The context that created it.
    pub context: usize,
    /// Its protection domain.
    pub pd: u32,
    /// Requests it holds at most.
    pub max_wr: usize,
    /// Entries a request may have at most.
    pub max_sge: usize,
    queue: VecDeque<RecvWr>,
    /// When set, taking a request that leaves fewer than this raises the limit event, once.
    limit: u32,
}

impl SharedReceiveQueue {
    /// An empty queue.
    pub fn new(context: usize, pd: u32, max_wr: usize, max_sge: usize) -> SharedReceiveQueue {
        SharedReceiveQueue {
            context,
            pd,
            max_wr,
            max_sge,
            queue: VecDeque::new(),
            limit: 0,
        }
    }

    /// Adds a request; false when the queue is full.
    pub fn post(&mut self, wr: RecvWr) -> bool {
        if self.queue.len() >= self.max_wr {
            return false;
        }
        self.queue.push_back(wr);
        true
    }

    /// Takes the oldest request, and whether that crossed the armed limit.
    pub fn take(&mut self) -> Option<(RecvWr, bool)> {
        let wr = self.queue.pop_front()?;
        let crossed = self.limit > 0 && (self.queue.len() as u64) < u64::from(self.limit);
        if crossed {
            self.limit = 0;
        }
        Some((wr, crossed))
    }

    /// Arms the limit event (0 disarms).
    pub fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// The armed limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::wr::SgeList;

    #[test]
    fn a_full_queue_refuses_and_the_limit_fires_once() {
        let mut q = SharedReceiveQueue::new(0, 1, 3, 1);
        let wr = |id| RecvWr {
            wr_id: id,
            sges: SgeList::default(),
        };
        assert!(q.post(wr(1)) && q.post(wr(2)) && q.post(wr(3)));
        assert!(!q.post(wr(4)));
        q.set_limit(2);
        assert_eq!(q.take().map(|(w, c)| (w.wr_id, c)), Some((1, false)));
        assert_eq!(q.take().map(|(w, c)| (w.wr_id, c)), Some((2, true)));
        assert_eq!(q.take().map(|(w, c)| (w.wr_id, c)), Some((3, false)), "fired once");
        assert!(q.take().is_none());
    }
}
