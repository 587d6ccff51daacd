//! A worker's mailbox: what other threads send a worker (a task to install, a wake, stop) and
//! the doorbell that wakes it when it sleeps in the kernel; a [`Waker`] is one task's address
//! in it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_channel::Sender;

use crate::hiccup::LatestHiccup;
use crate::sys::eventfd::Doorbell;
use crate::task::{Task, TaskId};

/// What a worker is sent.
pub(crate) enum Message {
    Install(TaskId, Box<dyn Task>),
    Wake(TaskId),
    /// Measure lateness and busy time from this lab time on (ns).
    MeasureFrom(u64),
    Stop,
}

/// What a worker shares with the threads that wake it.
pub(crate) struct WorkerShared {
    pub(crate) index: usize,
    tx: Sender<Message>,
    pub(crate) bell: Doorbell,
    /// True while the worker waits with a timeout: a message must ring the bell.
    pub(crate) sleeping: AtomicBool,
    /// While the worker waits in the kernel (a timeout above 0, not a poll): since when it has
    /// had nothing to run (lab ns); `u64::MAX` while it runs tasks or polls.
    pub(crate) idle_since: AtomicU64,
    /// The latest hiccup of any worker of the runtime.
    pub(crate) hiccup: Arc<LatestHiccup>,
}

impl WorkerShared {
    pub(crate) fn new(index: usize, tx: Sender<Message>, bell: Doorbell, hiccup: Arc<LatestHiccup>) -> WorkerShared {
        WorkerShared {
            index,
            tx,
            bell,
            sleeping: AtomicBool::new(false),
            idle_since: AtomicU64::new(u64::MAX),
            hiccup,
        }
    }

    /// How long the worker has been waiting in the kernel with nothing to run at `now` (lab
    /// ns): a message reaches it only after a wake-up. None while it runs tasks or polls.
    pub(crate) fn idle_ns(&self, now: u64) -> Option<u64> {
        let since = self.idle_since.load(Ordering::Relaxed);
        (since != u64::MAX).then(|| now.saturating_sub(since))
    }

    /// Sends a message and rings the bell if the worker may be asleep. A worker that has
    /// stopped takes no more messages, and needs none.
    pub(crate) fn send(&self, m: Message) {
        if self.tx.send(m).is_ok() && self.sleeping.load(Ordering::SeqCst) {
            self.bell.ring();
        }
    }
}

/// Wakes one task from any thread: it runs on its worker soon, once however many wakes came.
#[derive(Clone)]
pub struct Waker {
    pub(crate) shared: Arc<WorkerShared>,
    pub(crate) task: TaskId,
}

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Waker(worker {}, task {})", self.shared.index, self.task)
    }
}

impl Waker {
    /// Wakes the task.
    pub fn wake(&self) {
        self.shared.send(Message::Wake(self.task));
    }

    /// How long the task's worker has been asleep in the kernel with nothing to run, at lab
    /// time `now` (ns): a wake reaches it only after the scheduler runs it again. None while
    /// it runs tasks or polls.
    pub fn worker_idle_ns(&self, now: u64) -> Option<u64> {
        self.shared.idle_ns(now)
    }

    /// The worker the task runs on.
    pub fn worker(&self) -> usize {
        self.shared.index
    }
}
