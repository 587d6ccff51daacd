//! Watching a lab while it runs: what it shows ([`LabView`]), the Prometheus text of it
//! ([`metrics`]) and the HTTP server that serves both (`--metrics`, [`LiveServer`]).

pub mod metrics;
mod server;
mod view;

pub use server::{LiveServer, ServeError, listen_address};
pub use view::{LabNow, LabView};
