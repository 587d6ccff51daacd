//! The INT of one frame read in place: shim, MD header and hop stack.

use crate::error::{Error, Layer, Result, need};

use super::{HopIter, IntMdHeader, IntMdRepr, IntShim, IntShimRepr};

/// Shim, MD header and hop stack found right after a UDP header.
#[derive(Debug, Clone, Copy)]
pub struct IntHeaders<'a> {
    /// The shim.
    pub shim: IntShimRepr,
    /// The MD header.
    pub md: IntMdRepr,
    /// The hop stack, newest hop first.
    pub stack: &'a [u8],
}

impl<'a> IntHeaders<'a> {
    /// Reads the INT at the front of `b` (the UDP payload).
    ///
    /// Checks the shim length covers the MD header and a whole number of hops.
    pub fn parse(b: &'a [u8]) -> Result<IntHeaders<'a>> {
        let shim = IntShimRepr::parse(&IntShim::new_checked(b)?)?;
        let total = self::wire_len(&shim);
        need(Layer::IntStack, total, b.len())?;
        let md = IntMdRepr::parse(&IntMdHeader::new_checked(&b[IntShim::<&[u8]>::LEN..])?)?;
        let stack = &b[IntShim::<&[u8]>::LEN + IntMdHeader::<&[u8]>::LEN..total];
        let hop_len = usize::from(md.hop_ml) * 4;
        if !stack.is_empty() && (hop_len == 0 || !stack.len().is_multiple_of(hop_len)) {
            return Err(Error::Malformed {
                layer: Layer::IntStack,
                what: "stack is not a whole number of hops",
            });
        }
        Ok(IntHeaders { shim, md, stack })
    }

    /// Bytes of shim, MD header and stack together.
    pub fn wire_len(&self) -> usize {
        wire_len(&self.shim)
    }

    /// Number of hops in the stack.
    pub fn hop_count(&self) -> usize {
        match usize::from(self.md.hop_ml) * 4 {
            0 => 0,
            n => self.stack.len() / n,
        }
    }

    /// The hops, newest first.
    pub fn hops(&self) -> HopIter<'a> {
        HopIter::new(self.stack, self.md.hop_ml, self.md.instructions)
    }
}

fn wire_len(shim: &IntShimRepr) -> usize {
    IntShim::<&[u8]>::LEN + usize::from(shim.length_words) * 4
}
