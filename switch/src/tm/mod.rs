//! The traffic manager: per-port egress queues (one FIFO per priority, strict priority or
//! DWRR between them, PFC pauses) on an exact line-rate schedule, the switch's shared buffer with PFC, the PFC watchdog, and ECN marking.

mod egress_queue;
mod mmu;
mod pfc_watchdog;
mod priority;
mod red;
mod scheduler;

pub use egress_queue::{Dequeued, EgressQueue, PRIORITIES, Rejected, Released, Until};
pub use mmu::{Admission, Mmu, MmuPort, MmuSpec, PfcSignal, PfcSpec, mmu_port};
pub use pfc_watchdog::PfcWatchdog;
pub use priority::{PriorityMap, PrioritySpec};
pub use red::{EcnSpec, Red};
pub use scheduler::Scheduler;
