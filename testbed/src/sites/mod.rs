//! One lab over several machines (sites): each runs its part of the topology
//! ([`SitePart`]), a link between two sites is a VXLAN tunnel between the machines, every
//! site's lab clock reads its coordinator's, and the coordinator (`intlab run --sites`) drives
//! the run and gathers one results folder. See docs/distributed.md.

mod clock_sync;
mod coordinator;
mod part;
pub mod protocol;
mod serve;
mod timing;

pub use clock_sync::{Exchange, Offset, best as best_offset};
pub use coordinator::{SiteAddresses, run_on_sites};
pub use part::{
    SitePart, TUNNEL_OVERHEAD, TunnelSpec, VXLAN_PORT, create_tunnel, device_name, device_owner, remove_leftovers,
    underlay_mtu,
};
pub use serve::{ServeError, serve};
pub use timing::{SiteClock, SitesTiming, TunnelTiming};
