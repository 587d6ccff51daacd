//! P4.org In-band Network Telemetry, INT-MD v2.1 over UDP with NPT=1.
//!
//! Layout after the UDP header: a 4-byte shim, a 12-byte MD header, then the hop stack,
//! newest hop first. The UDP destination port is rewritten to the INT port and the original one
//! is kept in the shim. Units and the intlab domain-specific block are in `docs/int-format.md`.

mod headers;
mod hop;
mod instructions;
mod md_header;
mod shim;

pub use headers::IntHeaders;
pub use hop::{HopIter, HopRecord};
pub use instructions::{DsInstruction, Instruction, Instructions};
pub use md_header::{IntMdHeader, IntMdRepr};
pub use shim::{IntShim, IntShimRepr, IntType};

/// Default UDP destination port that signals INT (INT v2.1 leaves it unassigned; intlab's choice,
/// a port no Wireshark dissector claims). Every role and tool takes the port as a parameter.
pub const DEFAULT_INT_PORT: u16 = 5790;

/// Domain-specific ID of intlab's domain-specific metadata (ASCII "IL").
///
/// In this domain DS instruction bit 0 adds the egress port's cumulative transmitted bytes
/// (8 bytes) and bit 1 its line rate in kb/s (4 bytes) to every hop.
pub const INTLAB_DOMAIN_ID: u16 = 0x494c;

/// Length of the shim and MD header together, the INT a source inserts.
pub const INT_HEADER_LEN: usize = IntShim::<&[u8]>::LEN + IntMdHeader::<&[u8]>::LEN;
