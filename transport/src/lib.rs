//! intlab's transport: RoCEv2-style reliable-connection queue pairs over kernel UDP sockets,
//! with the congestion controller as the only variable.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod classify;
pub mod content;
pub mod endpoint;
pub mod flow;
mod host;
pub use host::{HostStack, MAX_CQE, MAX_QP, MAX_QP_WR, PROGRAM_QPN_BASE, QpRequest, QpView, Wire};
pub mod nic;
pub mod packet;
pub mod pause;
pub mod socket;
pub mod verbs;
