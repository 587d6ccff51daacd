//! intlab's transport: each host's RoCE NIC, a verbs engine (`verbs`: RC and UD queue pairs,
//! memory regions, completion queues) on kernel UDP sockets with the congestion controller as
//! the only variable. The lab's own flows are QPs of that engine; so are the QPs of programs
//! that drive the NIC through libibverbs (`programs`, with the provider in
//! `intlab-verbs-provider`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod classify;
pub mod command_file;
pub mod content;
pub mod endpoint;
mod endpoint_config;
mod endpoint_report;
pub mod flow;
mod host;
mod stack;
pub use stack::verbs::{MAX_CQE, MAX_QP, MAX_QP_WR, PROGRAM_QPN_BASE, QpRequest, QpView};
pub use stack::{HostStack, Wire};
pub mod nic;
pub mod packet;
pub mod pause;
pub mod program_qp;
pub mod programs;
pub mod socket;
pub mod verbs;
