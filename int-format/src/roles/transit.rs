//! INT transit: a node pushes its hop record on top of the stack.

use crate::error::{Error, Layer, Result};
use crate::frame::{FrameLayout, fix_lengths, refresh_udp_checksum};

use crate::int::{HopRecord, IntMdHeader, IntShim};

/// What a transit node did with a frame's INT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// The hop was added.
    Pushed,
    /// The remaining hop count was zero: nothing added, E set.
    HopLimitExceeded,
    /// The hop would have made the IP packet larger than the MTU: nothing added, M set.
    MtuExceeded,
}

/// The result of [`push_hop`]: what happened and the frame's new length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Push {
    /// What happened.
    pub outcome: PushOutcome,
    /// Length of the frame afterwards (Ethernet padding is dropped).
    pub len: usize,
}

/// Pushes `hop` onto the INT stack of the frame located by `layout`, newest first.
///
/// `mtu` is the largest IP packet (in bytes) the egress link takes. The remaining hop count is
/// decremented, shim length, IP total length, UDP length and a present UDP checksum updated.
/// Fails when the frame has no INT or its Hop ML disagrees with its instructions.
pub fn push_hop(frame: &mut [u8], layout: &FrameLayout, hop: &HopRecord, mtu: usize) -> Result<Push> {
    let (shim, md) = match layout.int(frame) {
        Some(r) => r.map(|int| (int.shim, int.md))?,
        None => {
            return Err(Error::NotApplicable {
                layer: Layer::IntShim,
                what: "frame carries no INT",
            });
        }
    };
    let hop_words = md.instructions.hop_words()?;
    if hop_words != md.hop_ml {
        return Err(Error::Malformed {
            layer: Layer::IntMd,
            what: "Hop ML does not match the instructions",
        });
    }
    let hop_len = usize::from(hop_words) * 4;
    let (remaining, length_words) = (md.remaining_hops, shim.length_words);
    let md_at = layout.int_offset() + IntShim::<&[u8]>::LEN;
    let new_end = layout.end + hop_len;

    let refused = if remaining == 0 {
        IntMdHeader::new_unchecked(&mut frame[md_at..]).set_hop_limit_exceeded();
        Some(PushOutcome::HopLimitExceeded)
    } else if new_end - layout.ip > mtu || usize::from(length_words) + usize::from(hop_words) > 255 {
        IntMdHeader::new_unchecked(&mut frame[md_at..]).set_mtu_exceeded();
        Some(PushOutcome::MtuExceeded)
    } else {
        None
    };
    if let Some(outcome) = refused {
        refresh_udp_checksum(frame, layout);
        return Ok(Push {
            outcome,
            len: layout.end,
        });
    }
    if frame.len() < new_end {
        return Err(Error::NoRoom {
            need: new_end,
            capacity: frame.len(),
        });
    }
    let stack_at = md_at + IntMdHeader::<&[u8]>::LEN;
    frame.copy_within(stack_at..layout.end, stack_at + hop_len);
    hop.emit(&mut frame[stack_at..stack_at + hop_len], &md.instructions)?;
    IntMdHeader::new_unchecked(&mut frame[md_at..]).set_remaining_hops(remaining - 1);
    IntShim::new_unchecked(&mut frame[layout.int_offset()..]).set_length_words(length_words + hop_words);
    fix_lengths(frame, layout, new_end)?;
    Ok(Push {
        outcome: PushOutcome::Pushed,
        len: new_end,
    })
}
