//! RoCEv2: the InfiniBand transport headers carried in UDP (destination port 4791).

mod aeth;
mod atomic_eth;
mod bth;
mod cnp;
mod deth;
mod extensions;
pub mod icrc;
mod immdt;
mod opcode;
mod reth;

pub use aeth::{Aeth, AethRepr, NakCode, Syndrome};
pub use atomic_eth::{ATOMIC_ACK_ETH_LEN, AtomicAckEth, AtomicEth, AtomicEthRepr};
pub use bth::{Bth, BthRepr};
pub use cnp::{CNP_BODY_LEN, CnpBody};
pub use deth::{Deth, DethRepr};
pub use extensions::Extensions;
pub use immdt::{IMMDT_LEN, ImmDt};
pub use opcode::Opcode;
pub use reth::{Reth, RethRepr};

/// UDP destination port of RoCEv2 (IANA).
pub const ROCEV2_PORT: u16 = 4791;

/// Default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;
