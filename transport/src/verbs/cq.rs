//! Completion queues: the work completions a NIC has for its owner to poll, and the arming a
//! completion channel waits on.

use std::collections::VecDeque;

use super::wr::{WcStatus, WorkCompletion};

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    /// The context that created it.
    pub context: usize,
    /// Entries it holds at most (what its owner asked for).
    pub capacity: usize,
    entries: VecDeque<WorkCompletion>,
    /// Armed by a request for notification: the next completion (only a solicited or failed
    /// one when `Some(true)`) raises an event, once.
    armed: Option<bool>,
    /// Completions that did not fit: the queue overran.
    pub overruns: u64,
    /// In its owner's list of queues with new completions.
    pub(crate) touched: bool,
}

impl CompletionQueue {
    /// An empty queue of `capacity` entries.
    pub fn new(context: usize, capacity: usize) -> CompletionQueue {
        CompletionQueue {
            context,
            capacity,
            entries: VecDeque::new(),
            armed: None,
            overruns: 0,
            touched: false,
        }
    }

    /// Adds a completion (from a packet with the solicited bit when `solicited`); true when it
    /// raises an event. A full queue keeps what it has and counts an overrun, as a NIC's CQ
    /// overrun loses the completion.
    pub fn push(&mut self, mut wc: WorkCompletion, solicited: bool) -> bool {
        wc.solicited = solicited;
        if self.entries.len() >= self.capacity {
            self.overruns += 1;
            return false;
        }
        self.entries.push_back(wc);
        match self.armed {
            Some(only_solicited) if !only_solicited || solicited || wc.status != WcStatus::Success => {
                self.armed = None;
                true
            }
            _ => false,
        }
    }

    /// Arms the queue: the next completion (a solicited one when `solicited_only`) raises an
    /// event. An unsolicited arm after a solicited one widens it, as the verbs say.
    pub fn arm(&mut self, solicited_only: bool) {
        let only_solicited = solicited_only && self.armed.is_none_or(|s| s);
        self.armed = Some(only_solicited);
    }

    /// Takes the oldest completion.
    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop_front()
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::wr::WcOpcode;

    fn wc(status: WcStatus) -> WorkCompletion {
        WorkCompletion::new(1, status, WcOpcode::Send, 9)
    }

    #[test]
    fn an_armed_queue_raises_one_event_and_a_full_one_overruns() {
        let mut q = CompletionQueue::new(0, 2);
        assert!(!q.push(wc(WcStatus::Success), false), "not armed");
        q.arm(false);
        assert!(q.push(wc(WcStatus::Success), false));
        assert!(!q.push(wc(WcStatus::Success), false), "full: lost, no event");
        assert_eq!((q.len(), q.overruns), (2, 1));
        assert!(q.pop().is_some() && q.pop().is_some() && q.pop().is_none());
    }

    #[test]
    fn solicited_arming_waits_for_a_solicited_or_failed_completion() {
        let mut q = CompletionQueue::new(0, 8);
        q.arm(true);
        assert!(!q.push(wc(WcStatus::Success), false));
        assert!(q.push(wc(WcStatus::Success), true));
        q.arm(true);
        assert!(q.push(wc(WcStatus::WrFlushErr), false), "an error always raises");
        q.arm(true);
        q.arm(false);
        assert!(q.push(wc(WcStatus::Success), false), "a later plain arm widens it");
    }
}
