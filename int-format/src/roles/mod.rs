//! What the three INT roles do to a whole frame: a source inserts the shim and MD header, a
//! transit hop pushes its hop record, a sink strips the INT again; each fixes the IP and UDP
//! lengths and checksums it changes. The headers they write are [`crate::int`]'s views.

pub mod sink;
pub mod source;
pub mod transit;
