//! Wire formats of intlab as typed zero-copy views and builders.
//!
//! Every header has a view (`Header<T: AsRef<[u8]>>` with `new_checked`, getters and, for
//! mutable buffers, setters) and a `Repr` with `parse` and `emit`, in the manner of smoltcp's
//! `wire` module. [`frame::FrameLayout`] locates all layers of a frame in one pass; the INT
//! roles ([`roles::source`], [`roles::transit`], [`roles::sink`]) change a frame in place and keep IP
//! and UDP lengths and checksums right. Nothing here allocates or does I/O.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checksum;
mod error;
pub mod ethernet;
mod field;
pub mod frame;
pub mod int;
pub mod ipv4;
pub mod pfc;
pub mod roce;
pub mod roles;
pub mod udp;

pub use error::{Error, Layer, Result};
