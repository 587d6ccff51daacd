//! intlab's runtime, below the switch and the transport: a fixed set of workers, one thread
//! per core, each running one event loop over the switch ports and hosts placed on it
//! ([`Runtime`], [`Task`]); the lab clock ([`clock`]); and the system calls the lab needs,
//! wrapped once in [`sys`], the only module of the data path allowed `unsafe` system calls.
//! rustix covers some of them, but not recvmmsg or the ethtool ioctl, and one small module
//! over libc is simpler to audit than two layers.

#![warn(missing_docs)]

pub mod clock;
mod hiccup;
mod mailbox;
mod poll;
mod runtime;
pub mod sys;
mod task;
mod worker;

pub use hiccup::Hiccup;
pub use mailbox::Waker;
pub use poll::{ADAPTIVE_MARGIN_NS, MAX_SLEEP_NS, PollMode};
pub use runtime::{Reservation, Runtime, RuntimeConfig, cores};
pub use task::{Context, Task, TaskId};
pub use worker::{HICCUP_NS, WorkerStats};
