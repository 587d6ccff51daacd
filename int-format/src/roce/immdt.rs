//! Immediate data (4 bytes) carried by the *_IMM opcodes.

use crate::error::{Layer, Result, need};
use crate::field::{set_u32, u32_at};

/// Length of the ImmDt header.
pub const IMMDT_LEN: usize = 4;

/// The immediate value of a SEND or WRITE with immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImmDt(pub u32);

impl ImmDt {
    /// Reads the immediate value from the front of `b`.
    pub fn parse(b: &[u8]) -> Result<ImmDt> {
        need(Layer::ImmDt, IMMDT_LEN, b.len())?;
        Ok(ImmDt(u32_at(b, 0)))
    }

    /// Writes the immediate value into the front of `b` (at least 4 bytes).
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, 0, self.0);
    }
}
