//! Benchmarks live in `benches/`; this library holds what they share.

#![forbid(unsafe_code)]

pub mod apps;
pub mod bare_forwarder;
