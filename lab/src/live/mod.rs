//! Watching a lab while it runs: what it shows ([`LabView`]), the Prometheus text of it
//! ([`metrics`]), a live page ([`page`]) and the HTTP server that serves them (`--metrics`,
//! `--web`, [`LiveServer`]).

pub mod metrics;
pub mod page;
mod server;
mod view;

pub use server::{LiveServer, ServeError, listen_address, serve_where_asked};
pub use view::{LabNow, LabView};
