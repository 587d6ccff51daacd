//! Driving one lab over several machines: the coordinator (`intlab run --sites`) plans the
//! parts, orders each site to build its own, starts them on one clock and merges their reports
//! into one results folder; a site (`intlab site`) serves those orders. What the two exchange and
//! share (parts, tunnels, the wire protocol, clock offsets) is [`crate::sites`]. See
//! docs/distributed.md.

mod coordinator;
mod serve;

pub use coordinator::{SiteAddresses, run_on_sites};
pub use serve::{CLOCK_ERROR_HOOK, Log, ServeError, SiteServer};
