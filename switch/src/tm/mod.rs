//! The traffic manager: per-port egress queues on an exact line-rate schedule, and ECN marking.

mod egress_queue;
mod red;

pub use egress_queue::{Dequeued, EgressQueue, Rejected, Released, Until};
pub use red::Red;
