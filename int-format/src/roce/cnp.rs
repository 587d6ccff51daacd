//! The body of a RoCEv2 Congestion Notification Packet: 16 reserved bytes after the BTH.

use crate::error::{Error, Layer, Result, need};

/// Length of the CNP body.
pub const CNP_BODY_LEN: usize = 16;

/// The reserved body of a CNP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CnpBody;

impl CnpBody {
    /// Checks the 16 reserved bytes are there and zero.
    pub fn parse(b: &[u8]) -> Result<CnpBody> {
        need(Layer::Cnp, CNP_BODY_LEN, b.len())?;
        if b[..CNP_BODY_LEN].iter().any(|&x| x != 0) {
            return Err(Error::Malformed {
                layer: Layer::Cnp,
                what: "reserved bytes are not zero",
            });
        }
        Ok(CnpBody)
    }

    /// Writes 16 zero bytes into the front of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        b[..CNP_BODY_LEN].fill(0);
    }
}
