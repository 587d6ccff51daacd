//! intlab's software switch.
//!
//! Frames come in on [`port`]s (TAP devices, veth ends through AF_XDP, packet rings or
//! AF_PACKET sockets, in-process links, a P4 switch's CPU port), go through the ingress
//! [`pipeline`] (the built-in tables, exact MAC, longest prefix and ECMP, or a P4 program), are
//! admitted by the shared buffer ([`tm::Mmu`], with PFC), wait in the traffic manager's per-port
//! [`tm::EgressQueue`] (eight priorities) on an exact virtual line-rate schedule, and leave
//! through the [`egress`] stage, which marks ECN and pushes the INT transit hop from that
//! schedule (or runs the P4 program's egress). A [`Fabric`] places the ports of one or many
//! switches on the workers of an `intlab_runtime::Runtime`; each worker's ports form one
//! [`shard`]. See `docs/switch.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
pub mod config;
pub mod counters;
mod counters_file;
pub mod egress;
pub mod fabric;
mod fabric_state;
pub mod frame;
pub mod impair;
pub mod link_change;
pub mod pipeline;
pub mod port;
pub mod port_engine;
pub mod queue_trace;
pub mod shard;
mod switch;
pub mod tm;
pub mod units;

pub use config::{ConfigError, SwitchSpec};
pub use counters::{DropReason, PortSnapshot, PortTotals, SwitchSnapshot};
pub use fabric::{Fabric, LinkChangeError, StartError, frame_capacity};
pub use link_change::LinkChange;
pub use switch::Switch;
