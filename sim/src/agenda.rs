//! The simulator's events in time order; events due at the same nanosecond run in the order they
//! were added, so a run is the same on every machine.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Events of type `E`, each due at a time (ns).
#[derive(Debug)]
pub(crate) struct Agenda<E> {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    events: HashMap<u64, E>,
    added: u64,
}

impl<E> Default for Agenda<E> {
    fn default() -> Self {
        Agenda {
            heap: BinaryHeap::new(),
            events: HashMap::new(),
            added: 0,
        }
    }
}

impl<E> Agenda<E> {
    /// Adds `event`, due at `at_ns`.
    pub(crate) fn add(&mut self, at_ns: u64, event: E) {
        self.heap.push(Reverse((at_ns, self.added)));
        self.events.insert(self.added, event);
        self.added += 1;
    }

    /// When the next event is due.
    pub(crate) fn next_ns(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// Takes the next event, with its time.
    pub(crate) fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse((t, k)) = self.heap.pop()?;
        self.events.remove(&k).map(|e| (t, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_in_time_order_and_ties_in_the_order_added() {
        let mut a = Agenda::default();
        a.add(30, "c");
        a.add(10, "a");
        a.add(30, "d");
        a.add(20, "b");
        let order: Vec<_> = std::iter::from_fn(|| a.pop()).collect();
        assert_eq!(order, [(10, "a"), (20, "b"), (30, "c"), (30, "d")]);
    }
}
