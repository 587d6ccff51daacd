//! A host's NIC scheduler: which queue pair sends next, and when. Queue pairs that may send
//! now wait in a round-robin queue and the NIC serves them one packet at a time, never faster
//! than its line rate in all; the others wait on a timer heap for their next event (a packet
//! their pacing allows, a retransmission timeout, their controller's timer). Nothing here scans
//! every queue pair: a host with thousands of them does per packet what a host with one does.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use int_format::pfc::PauseState;

/// The scheduler's state. Queue pairs are named by their slot in the host.
#[derive(Debug, Default)]
pub struct Nic {
    /// Queue pairs that may send now, in serving order.
    ready: VecDeque<usize>,
    /// (when, slot, generation): a queue pair's next event; entries of an older generation
    /// than the slot's are stale.
    timers: BinaryHeap<Reverse<(u64, usize, u64)>>,
    /// When the NIC finishes sending what it was last given (ns).
    free_ns: u64,
    /// PFC: the host's data priority is paused until its end (ns).
    pause: PauseState,
}

impl Nic {
    /// Puts slot `i` at the back of the serving queue.
    pub fn ready(&mut self, i: usize) {
        self.ready.push_back(i);
    }

    /// Wakes slot `i` (at generation `generation`) at `t`.
    pub fn at(&mut self, t: u64, i: usize, generation: u64) {
        self.timers.push(Reverse((t, i, generation)));
    }

    /// The next queue pair to serve, if the NIC is free at `now` (it may catch up at most
    /// `burst_credit_ns` of time it sat idle: a late wake-up sends what was due, but an idle NIC
    /// banks nothing).
    pub fn next_to_serve(&mut self, now: u64, burst_credit_ns: u64) -> Option<usize> {
        // Nor does a paused one: it sends at its line rate from the pause's end.
        let floor = now.saturating_sub(burst_credit_ns).max(self.pause.until().min(now));
        self.free_ns = self.free_ns.max(floor);
        if self.free_ns > now || self.pause.until() > now {
            return None;
        }
        self.ready.pop_front()
    }

    /// PFC: a pause frame received at `at_ns` stops the NIC until `until_ns` (`at_ns`: resume),
    /// replacing the pause in effect. A frame in transmission is not cut.
    pub fn pause(&mut self, at_ns: u64, until_ns: u64) {
        self.pause.pause(at_ns, until_ns);
    }

    /// Time the NIC has spent paused up to `now` (ns).
    pub fn paused_ns(&self, now: u64) -> u64 {
        self.pause.total(now)
    }

    /// The NIC sent `wire_bytes` at `bps`.
    pub fn sent(&mut self, wire_bytes: u64, bps: u64) {
        self.free_ns += wire_bytes * 8 * 1_000_000_000 / bps.max(1);
    }

    /// The earliest timer entry due at `now`: (slot, generation).
    pub fn due(&mut self, now: u64) -> Option<(usize, u64)> {
        match self.timers.peek() {
            Some(&Reverse((t, i, g))) if t <= now => {
                self.timers.pop();
                Some((i, g))
            }
            _ => None,
        }
    }

    /// When the host next needs running: its earliest timer, or when the NIC frees while queue
    /// pairs wait to send (stale timers included: they cost a spurious run, not a missed one).
    pub fn next_deadline(&self) -> Option<u64> {
        let timer = self.timers.peek().map(|Reverse((t, _, _))| *t);
        let nic = (!self.ready.is_empty()).then_some(self.free_ns.max(self.pause.until()));
        [timer, nic].into_iter().flatten().min()
    }

    /// Drops timer entries that are stale by `is_stale(slot, generation)` from the top, so the
    /// deadline is a live one.
    pub fn prune(&mut self, is_stale: impl Fn(usize, u64) -> bool) {
        while let Some(&Reverse((_, i, g))) = self.timers.peek() {
            if !is_stale(i, g) {
                return;
            }
            self.timers.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nic_serves_round_robin_at_its_line_rate() {
        let mut n = Nic::default();
        n.ready(1);
        n.ready(2);
        assert_eq!(n.next_to_serve(1_000, 0), Some(1));
        // 125 bytes at 1 Gb/s: busy for 1 us.
        n.sent(125, 1_000_000_000);
        assert_eq!(n.next_to_serve(1_500, 0), None, "still sending");
        assert_eq!(n.next_deadline(), Some(2_000));
        assert_eq!(n.next_to_serve(2_000, 0), Some(2));
        assert_eq!(n.next_to_serve(2_000, 0), None, "nobody waits");
    }

    #[test]
    fn timers_fire_in_order_and_stale_ones_are_pruned() {
        let mut n = Nic::default();
        n.at(50, 7, 1);
        n.at(30, 8, 4);
        n.at(40, 7, 0);
        n.prune(|i, g| i == 7 && g == 0);
        assert_eq!(n.next_deadline(), Some(30));
        assert_eq!(n.due(35), Some((8, 4)));
        assert_eq!(n.due(35), None);
        assert_eq!(n.due(45), Some((7, 0)), "not on top when pruned; the host skips it");
        assert_eq!(n.due(45), None);
        assert_eq!(n.due(50), Some((7, 1)));
    }

    #[test]
    fn a_paused_nic_serves_nobody_until_the_pause_ends_or_is_lifted() {
        let mut n = Nic::default();
        n.ready(1);
        n.pause(1_000, 5_000);
        assert_eq!(n.next_to_serve(4_999, 100_000), None, "paused");
        assert_eq!(n.next_deadline(), Some(5_000));
        // Nothing banked while paused: one frame at 5,000, the next a serialization later.
        assert_eq!(n.next_to_serve(5_000, 100_000), Some(1));
        n.sent(125, 1_000_000_000);
        n.ready(1);
        assert_eq!(n.next_to_serve(5_500, 100_000), None);
        assert_eq!(n.next_deadline(), Some(6_000));
        // A new pause, lifted early by an XON.
        n.pause(7_000, 100_000);
        assert_eq!(n.next_to_serve(8_000, 100_000), None);
        n.pause(9_000, 9_000);
        assert_eq!(n.next_to_serve(9_000, 100_000), Some(1));
        assert_eq!(n.paused_ns(20_000), 4_000 + 2_000);
    }

    #[test]
    fn an_idle_nic_banks_no_more_than_the_burst_credit() {
        let mut n = Nic::default();
        n.ready(3);
        assert_eq!(n.next_to_serve(1_000_000, 100), Some(3));
        n.sent(125, 1_000_000_000);
        // Free from 999,900 (credit) + 1,000 = 1,000,900.
        assert_eq!(n.next_deadline(), None);
        n.ready(3);
        assert_eq!(n.next_deadline(), Some(1_000_900));
    }
}
