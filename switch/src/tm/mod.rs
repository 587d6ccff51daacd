//! The traffic manager: per-port egress queues (one FIFO per priority, PFC pauses) on an exact
//! line-rate schedule, the switch's shared buffer with PFC, and ECN marking.

mod egress_queue;
mod mmu;
mod priority;
mod red;

pub use egress_queue::{Dequeued, EgressQueue, PRIORITIES, Rejected, Released, Until};
pub use mmu::{Admission, Mmu, MmuPort, MmuSpec, PfcSignal, PfcSpec, mmu_port};
pub use priority::PriorityMap;
pub use red::Red;
