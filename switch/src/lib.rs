//! intlab's software switch.
//!
//! Frames come in on [`port`]s (TAP devices, AF_PACKET sockets on veth ends, in-process links),
//! go through the ingress [`pipeline`] (parse, exact-MAC and longest-prefix tables, ECMP), wait
//! in the traffic manager's per-port [`tm::EgressQueue`] on an exact virtual line-rate schedule,
//! and leave through the [`egress`] stage, which marks ECN and pushes the INT transit hop from
//! that schedule. A [`Fabric`] places the ports of one or many switches on the workers of an
//! `intlab_runtime::Runtime`; each worker's ports form one [`shard`]. See `docs/switch.md`.

#![warn(missing_docs)]

pub mod capture;
pub mod config;
pub mod counters;
mod counters_file;
pub mod egress;
pub mod fabric;
pub mod frame;
pub mod pipeline;
pub mod port;
pub mod queue_trace;
pub mod shard;
mod switch;
pub mod tm;
pub mod units;

pub use config::{ConfigError, SwitchSpec};
pub use counters::{DropReason, PortSnapshot, PortTotals, SwitchSnapshot};
pub use fabric::{Fabric, StartError, frame_capacity};
pub use switch::Switch;
