//! intlab's software switch.
//!
//! Frames come in on [`port`]s (TAP devices, AF_PACKET sockets on veth ends, in-process links),
//! go through the ingress [`pipeline`] (parse, exact-MAC and longest-prefix tables, ECMP), wait
//! in the traffic manager's per-port [`tm::EgressQueue`] on an exact virtual line-rate schedule,
//! and leave through the [`egress`] stage, which marks ECN and pushes the INT transit hop from
//! that schedule. Workers ([`worker`]) own ports and hand frames to each other over channels.
//! See `docs/switch.md`.

#![warn(missing_docs)]

pub mod capture;
pub mod clock;
pub mod config;
pub mod counters;
pub mod egress;
pub mod frame;
pub mod pipeline;
pub mod port;
pub mod queue_trace;
mod switch;
pub mod tm;
pub mod units;
pub mod worker;

pub use config::{ConfigError, SwitchSpec};
pub use counters::{DropReason, PortSnapshot, SwitchSnapshot};
pub use switch::{StartError, Switch, frame_capacity};
