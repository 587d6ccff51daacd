//! One lab over several machines (sites): each runs its part of the topology
//! ([`SitePart`]), a link between two sites is a VXLAN tunnel between the machines, every
//! site's lab clock reads its coordinator's, and the coordinator (`intlab run --sites`) drives
//! the run and gathers one results folder. See docs/distributed.md.

mod clock_sync;
pub mod control_connection;
mod part;
pub mod plan;
pub mod protocol;
mod timing;

pub use clock_sync::{Exchange, KernelClock, Offset, best as best_offset};
pub use part::{
    CAPTURE_FOLDER, SitePart, TUNNEL_OVERHEAD, TunnelSpec, VXLAN_PORT, create_tunnel, device_name, device_owner,
    remove_leftovers, underlay_mtu,
};
pub use timing::{SiteClock, SitesTiming, TunnelTiming};
