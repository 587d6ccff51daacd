//! INT sink: removes the INT and restores the frame the source was given.

use crate::error::{Error, Layer, Result};
use crate::frame::{FrameLayout, fix_lengths};
use crate::udp::UdpPacket;

/// Strips the INT of the frame located by `layout` and returns the new length.
///
/// The original UDP destination port (from the shim) comes back, and with it IP total length,
/// UDP length and a present UDP checksum, so the RoCEv2 ICRC verifies again. Read the hops
/// (via [`FrameLayout::int`]) before calling this.
pub fn strip(frame: &mut [u8], layout: &FrameLayout) -> Result<usize> {
    if !layout.has_int() {
        return Err(Error::NotApplicable {
            layer: Layer::IntShim,
            what: "frame carries no INT",
        });
    }
    let at = layout.int_offset();
    frame.copy_within(layout.transport..layout.end, at);
    let new_end = layout.end - layout.int_len;
    UdpPacket::new_unchecked(&mut frame[layout.udp..]).set_dst_port(layout.dst_port);
    fix_lengths(frame, layout, new_end)?;
    Ok(new_end)
}
