//! What a worker runs: tasks (a shard of switch ports, a host's transport), each woken by its
//! descriptors, its deadline, or another task.

use std::os::fd::RawFd;

use crate::clock::Clock;
use crate::hiccup::{Hiccup, LatestHiccup};

/// A task's number within its worker.
pub type TaskId = usize;

/// Work a worker drives. It never blocks: it does what is due and says when it next needs
/// running.
pub trait Task: Send {
    /// A short name, for logs.
    fn name(&self) -> &str;

    /// The descriptors to watch for input, each with a token the task knows it by (asked once,
    /// when the task is installed).
    fn sources(&self) -> Vec<(RawFd, u32)>;

    /// Does what is due: reads what [`Context::ready`] says has input, handles what other tasks
    /// sent it, fires what is due at [`Context::now`]. Returns when it next needs running (a
    /// deadline on the lab clock), if ever; input and wakes run it sooner.
    fn run(&mut self, cx: &mut Context<'_>) -> Option<u64>;

    /// The runtime stops: the last work (flush captures, publish what it counted).
    fn stop(&mut self);
}

/// What a task is told when it runs.
pub struct Context<'a> {
    pub(crate) clock: &'static Clock,
    /// Tokens of the task's descriptors that have input.
    pub ready: &'a [u32],
    /// The deadline this run was due at, when its timer fired.
    pub deadline: Option<u64>,
    /// Another task (or the lab) woke it.
    pub woken: bool,
    /// When the worker last asked the kernel which descriptors have input (lab ns): `ready`
    /// is as of then, so input that came since (a worker that lost its core) is not in it.
    pub polled_ns: u64,
    pub(crate) hiccup: &'a LatestHiccup,
}

impl Context<'_> {
    /// The lab clock now (read afresh on every call).
    pub fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The latest hiccup of any worker of the runtime: a frame in flight then may have
    /// arrived late for want of a core, not because of the emulated network.
    pub fn latest_hiccup(&self) -> Option<Hiccup> {
        self.hiccup.get()
    }

    /// The hiccups of any worker since a task had seen `seen` of them (the latest 16 at most),
    /// oldest first; `seen` (0 at first) moves on. A task that was held up itself learns of
    /// those that came while it waited, not only the latest.
    pub fn hiccups_since(&self, seen: &mut u64) -> Vec<Hiccup> {
        self.hiccup.since(seen)
    }
}
