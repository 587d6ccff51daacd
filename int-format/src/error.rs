//! The one error type of every view, builder and INT role in this crate.

use core::fmt;

/// Which header an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Ethernet II header.
    Ethernet,
    /// IPv4 header.
    Ipv4,
    /// UDP header.
    Udp,
    /// INT shim for TCP/UDP.
    IntShim,
    /// INT-MD metadata header.
    IntMd,
    /// INT hop metadata stack.
    IntStack,
    /// RoCEv2 Base Transport Header.
    Bth,
    /// RDMA Extended Transport Header.
    Reth,
    /// ACK Extended Transport Header.
    Aeth,
    /// Atomic Extended Transport Header.
    AtomicEth,
    /// Atomic ACK Extended Transport Header.
    AtomicAckEth,
    /// Datagram Extended Transport Header.
    Deth,
    /// Immediate data.
    ImmDt,
    /// Congestion Notification Packet body.
    Cnp,
    /// Invariant CRC trailer.
    Icrc,
    /// Priority flow control (MAC control) frame.
    Pfc,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Layer::Ethernet => "Ethernet",
            Layer::Ipv4 => "IPv4",
            Layer::Udp => "UDP",
            Layer::IntShim => "INT shim",
            Layer::IntMd => "INT-MD header",
            Layer::IntStack => "INT hop stack",
            Layer::Bth => "BTH",
            Layer::Reth => "RETH",
            Layer::Aeth => "AETH",
            Layer::AtomicEth => "AtomicETH",
            Layer::AtomicAckEth => "AtomicAckETH",
            Layer::Deth => "DETH",
            Layer::ImmDt => "ImmDt",
            Layer::Cnp => "CNP",
            Layer::Icrc => "ICRC",
            Layer::Pfc => "PFC",
        };
        f.write_str(name)
    }
}

/// Why a frame could not be parsed, built or changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The bytes end before the header does.
    #[error("{layer}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Header being read.
        layer: Layer,
        /// Bytes the header needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("{layer}: {what}")]
    Malformed {
        /// Header being read.
        layer: Layer,
        /// What is wrong, in a few words.
        what: &'static str,
    },
    /// The frame is well formed but is not of the kind the operation works on.
    #[error("{layer}: not applicable: {what}")]
    NotApplicable {
        /// Header that decided it.
        layer: Layer,
        /// Why the operation does not apply.
        what: &'static str,
    },
    /// The output buffer cannot hold the result.
    #[error("buffer too small: need {need} bytes, capacity {capacity}")]
    NoRoom {
        /// Bytes the result needs.
        need: usize,
        /// Bytes the buffer has.
        capacity: usize,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

/// Fails with [`Error::Truncated`] unless `have >= need`.
pub(crate) fn need(layer: Layer, need: usize, have: usize) -> Result<()> {
    if have < need {
        Err(Error::Truncated { layer, need, have })
    } else {
        Ok(())
    }
}
