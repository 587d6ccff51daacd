//! P4Runtime for intlab's P4 switches: a program's P4Info as p4c writes it (same ids, names
//! and aliases), in protobuf's binary, text and JSON forms, and the gRPC server.

#![forbid(unsafe_code)]

pub mod format;
pub mod p4info;
pub mod proto;
pub mod server;
