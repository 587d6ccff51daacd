//! intlab's simulator: the lab's own transport stacks ([`intlab_transport::HostStack`]),
//! NIC model, switch pipeline, egress queues, shared buffer and PFC, driven on a virtual clock
//! over in-memory links, with no sockets and no threads (as smoltcp's `tests/netsim.rs` drives
//! its stack). The same inputs give the same frames at the same nanoseconds on every run, so
//! behaviour is tested here exactly and without retries; the real lab's tests check that it
//! keeps time and carries what the simulator predicts.
//!
//! What differs from the lab is only what the lab adds by running on a machine: wake-up
//! lateness, the kernel's sockets, and threads. Hosts are stepped the moment anything is due.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agenda;
mod host;
mod simulator;
pub mod star;
mod switch;

pub use simulator::{HostId, SimError, Simulator, SwitchId};
