//! A port on a tunnel to another machine's switch (a lab spread over sites): frames leave as
//! soon as they are serialized, each carrying the lab time it reaches the far end, and the far
//! switch holds it until then, so that the link's delay hides the machines' network. The time
//! travels in an 8-byte trailer after the frame (the tunnel device carries it as payload): the
//! lab time in the low 48 bits (78 hours of ns) under a 16-bit mark, so that whatever else the
//! device receives is told apart.

use crate::frame::FrameBuf;

/// Bytes the stamp adds to each frame.
pub const STAMP_LEN: usize = 8;

/// The mark in the stamp's top 16 bits.
const MARK: u64 = 0x1AB0;

/// Lab times the stamp holds.
const TIME_MASK: u64 = (1 << 48) - 1;

/// Appends the lab time `arrival_ns` the frame reaches the far end at; false when the frame's
/// buffer has no room (the frame is then not to be sent: the far end could not place it).
pub fn stamp(frame: &mut FrameBuf, arrival_ns: u64) -> bool {
    let len = frame.len;
    let Some(room) = frame.buffer_mut().get_mut(len..len + STAMP_LEN) else {
        return false;
    };
    room.copy_from_slice(&(MARK << 48 | arrival_ns & TIME_MASK).to_be_bytes());
    frame.len = len + STAMP_LEN;
    true
}

/// Takes the stamp off `frame`: the lab time it arrives at, or None for a frame that carries
/// none (the device's own traffic, or one cut short).
pub fn unstamp(frame: &mut FrameBuf) -> Option<u64> {
    let at = frame.len.checked_sub(STAMP_LEN)?;
    if frame.truncated {
        return None;
    }
    let word = u64::from_be_bytes(frame.bytes()[at..].try_into().ok()?);
    if word >> 48 != MARK {
        return None;
    }
    frame.len = at;
    Some(word & TIME_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(bytes: &[u8]) -> FrameBuf {
        let mut f = crate::frame::FramePool::new(256, 1).get();
        f.buffer_mut()[..bytes.len()].copy_from_slice(bytes);
        f.len = bytes.len();
        f
    }

    #[test]
    fn a_stamped_frame_comes_back_as_it_was_with_its_time() {
        let mut f = frame(&[7; 60]);
        assert!(stamp(&mut f, 123_456_789_012));
        assert_eq!(f.len, 68);
        assert_eq!(unstamp(&mut f), Some(123_456_789_012));
        assert_eq!(f.bytes(), &[7; 60][..]);
    }

    #[test]
    fn a_frame_without_the_mark_is_refused_and_left_alone() {
        let mut f = frame(&[0x33; 90]);
        assert_eq!(unstamp(&mut f), None);
        assert_eq!(f.len, 90);
        let mut short = frame(&[1, 2, 3]);
        assert_eq!(unstamp(&mut short), None);
    }

    #[test]
    fn a_full_buffer_is_not_stamped() {
        let mut f = crate::frame::FramePool::new(64, 1).get();
        f.len = f.buffer_mut().len();
        assert!(!stamp(&mut f, 5));
    }
}
