//! The traffic manager: per-port egress queues (one FIFO per priority, PFC pauses) on an exact
//! line-rate schedule, and ECN marking.

mod egress_queue;
mod priority;
mod red;

pub use egress_queue::{Dequeued, EgressQueue, PRIORITIES, Rejected, Released, Until};
pub use priority::PriorityMap;
pub use red::Red;
