//! INT source: inserts an empty INT-MD header (0 hops) after the UDP header.

use crate::error::{Error, Layer, Result};
use crate::frame::{FrameLayout, fix_lengths};
use crate::udp::UdpPacket;

use crate::int::{INT_HEADER_LEN, Instructions, IntMdHeader, IntMdRepr, IntShim, IntShimRepr, IntType};

/// What a source asks of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceConfig {
    /// UDP destination port that signals INT.
    pub int_port: u16,
    /// Fields every hop adds.
    pub instructions: Instructions,
    /// Most hops that may add metadata (the initial remaining hop count).
    pub hop_limit: u8,
}

/// Writes an empty INT header (shim and MD header, zero hops) into the front of `buf`, for a
/// frame whose original UDP destination port is `orig_dst_port`; returns its length. A sender
/// that builds its own UDP payload (a user-space INT source) puts this first and sends to the
/// INT port.
pub fn write_header(buf: &mut [u8], config: &SourceConfig, orig_dst_port: u16) -> Result<usize> {
    config.instructions.validate()?;
    if buf.len() < INT_HEADER_LEN {
        return Err(Error::NoRoom {
            need: INT_HEADER_LEN,
            capacity: buf.len(),
        });
    }
    IntShimRepr {
        int_type: IntType::Md,
        npt: 1,
        length_words: (IntMdHeader::<&[u8]>::LEN / 4) as u8,
        next_field: orig_dst_port,
    }
    .emit(&mut IntShim::new_unchecked(&mut buf[..]));
    IntMdRepr {
        discard: false,
        hop_limit_exceeded: false,
        mtu_exceeded: false,
        hop_ml: config.instructions.hop_words()?,
        remaining_hops: config.hop_limit,
        instructions: config.instructions,
        ds_flags: 0,
    }
    .emit(&mut IntMdHeader::new_unchecked(&mut buf[IntShim::<&[u8]>::LEN..]));
    Ok(INT_HEADER_LEN)
}

/// Inserts shim and MD header into the frame `frame[..len]` (located by `layout`) and returns
/// the new length. Ethernet padding is dropped. IP total length, UDP length, the original
/// destination port (kept in the shim) and a present UDP checksum are all updated.
pub fn insert(frame: &mut [u8], layout: &FrameLayout, config: &SourceConfig) -> Result<usize> {
    if layout.has_int() {
        return Err(Error::NotApplicable {
            layer: Layer::IntShim,
            what: "frame already carries INT",
        });
    }
    config.instructions.validate()?;
    let new_end = layout.end + INT_HEADER_LEN;
    if frame.len() < new_end {
        return Err(Error::NoRoom {
            need: new_end,
            capacity: frame.len(),
        });
    }
    let at = layout.int_offset();
    frame.copy_within(at..layout.end, at + INT_HEADER_LEN);
    write_header(&mut frame[at..], config, layout.dst_port)?;
    UdpPacket::new_unchecked(&mut frame[layout.udp..]).set_dst_port(config.int_port);
    fix_lengths(frame, layout, new_end)?;
    Ok(new_end)
}
