//! An in-process link between two switch ports of one lab: no device, no copy. Frames leave one
//! end at the exact time their transmission ends plus the link's delay, and arrive at the other
//! with that time; when both ends run on one worker the frame never leaves it.

use std::sync::atomic::{AtomicU64, Ordering};

/// One end of a link; the fabric joins the two ends of a pair (see [`link_pair`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LinkEnd {
    /// The link's number, shared by both ends.
    pub id: u64,
    /// Which end: 0 or 1.
    pub side: u8,
}

impl LinkEnd {
    /// The other end of the same link.
    pub fn peer(&self) -> LinkEnd {
        LinkEnd {
            id: self.id,
            side: 1 - self.side,
        }
    }
}

/// Two joined ends, to give to two ports.
pub fn link_pair() -> (LinkEnd, LinkEnd) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    (LinkEnd { id, side: 0 }, LinkEnd { id, side: 1 })
}
