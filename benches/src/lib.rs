//! Benchmarks live in `benches/`; this library holds what they share.

pub mod bare_forwarder;
