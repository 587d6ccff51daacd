//! The channel between a program and the emulated RDMA NIC of the lab host it runs on, as a
//! real NIC offers it: commands for the slow path (create, modify, destroy), written to the
//! NIC's command file as libibverbs writes to `/dev/infiniband/uverbsN` (the answer lands in
//! the caller's memory, at the address the command gives); and for the fast path, queues in
//! memory both sides map (work requests one way, completions the other), a doorbell, and the
//! NIC reading and writing the program's registered memory itself.
//!
//! Both ends use this crate: the provider libibverbs loads into a program (`verbs-provider/`)
//! and the NIC in the lab (`transport/src/programs/`). To the NIC everything here is outside
//! input: every decoder is bounded, checks every field and never panics (`--bench fuzz`).

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod command;
pub mod device;
pub mod entry;
pub mod queue;
pub mod shared;
mod wire;

pub use wire::DecodeError;
