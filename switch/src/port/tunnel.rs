//! A port on a tunnel to another machine's switch (a lab spread over sites): frames leave as
//! soon as they are serialized, each carrying the lab time it reaches the far end, and the far
//! switch holds it until then, so that the link's delay hides the machines' network. The time
//! travels in a 16-byte trailer after the frame (the tunnel device carries it as payload): the
//! lab time in the low 48 bits (78 hours of ns) under a 16-bit mark, then a tag, a keyed hash
//! (SipHash-2-4) of the tunnel's number, the frame and the time.
//!
//! The tag is what makes a tunnel accept only its peer. The kernel's VXLAN device takes frames
//! of its number from any sender on UDP 4789, and a sender's address proves nothing (UDP is
//! easily spoofed); a frame whose tag does not check was not made by a switch holding the run's
//! key, which only the coordinator and its sites have (sent over their TLS connection), and is
//! dropped and counted. A copy of a genuine frame sent again carries an old time and is dropped
//! as out of the window around the lab clock, or counted late.

use siphasher::sip::SipHasher24;
use std::hash::Hasher;

use crate::frame::FrameBuf;

/// Bytes the trailer adds to each frame.
pub const STAMP_LEN: usize = 16;

/// The mark in the stamp's top 16 bits.
const MARK: u64 = 0x1AB0;

/// Lab times the stamp holds.
const TIME_MASK: u64 = (1 << 48) - 1;

/// One tunnel's key and number: what its trailers are tagged with.
#[derive(Clone, PartialEq, Eq)]
pub struct TunnelSeal {
    key: [u8; 16],
    vni: u32,
}

impl std::fmt::Debug for TunnelSeal {
    // Never the key: configurations are logged.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelSeal")
            .field("vni", &self.vni)
            .finish_non_exhaustive()
    }
}

/// Why a frame from a tunnel is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsealed {
    /// It carries no trailer (the device's own traffic, or a frame cut short).
    Unstamped,
    /// Its trailer's tag does not check: not from the peer.
    Forged,
}

impl TunnelSeal {
    /// The seal of tunnel `vni` under the run's `key`.
    pub fn new(key: [u8; 16], vni: u32) -> TunnelSeal {
        TunnelSeal { key, vni }
    }

    fn tag(&self, frame: &[u8], word: u64) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write_u32(self.vni);
        h.write(frame);
        h.write_u64(word);
        h.finish()
    }

    /// Appends the lab time `arrival_ns` the frame reaches the far end at, and the tag; false
    /// when the frame's buffer has no room (the frame is then not to be sent: the far end could
    /// not place it).
    pub fn stamp(&self, frame: &mut FrameBuf, arrival_ns: u64) -> bool {
        let len = frame.len;
        let word = MARK << 48 | arrival_ns & TIME_MASK;
        let tag = self.tag(frame.bytes(), word);
        let Some(room) = frame.buffer_mut().get_mut(len..len + STAMP_LEN) else {
            return false;
        };
        room[..8].copy_from_slice(&word.to_be_bytes());
        room[8..].copy_from_slice(&tag.to_be_bytes());
        frame.len = len + STAMP_LEN;
        true
    }

    /// Takes the trailer off `frame`: the lab time it arrives at. A frame refused is left as
    /// it came.
    pub fn unstamp(&self, frame: &mut FrameBuf) -> Result<u64, Unsealed> {
        let at = frame.len.checked_sub(STAMP_LEN).ok_or(Unsealed::Unstamped)?;
        if frame.truncated {
            return Err(Unsealed::Unstamped);
        }
        let bytes = frame.bytes();
        let word = u64::from_be_bytes(bytes[at..at + 8].try_into().map_err(|_| Unsealed::Unstamped)?);
        if word >> 48 != MARK {
            return Err(Unsealed::Unstamped);
        }
        let tag = u64::from_be_bytes(bytes[at + 8..].try_into().map_err(|_| Unsealed::Unstamped)?);
        if tag != self.tag(&bytes[..at], word) {
            return Err(Unsealed::Forged);
        }
        frame.len = at;
        Ok(word & TIME_MASK)
    }
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

    const SEAL: [u8; 16] = [9; 16];

    #[test]
    fn a_stamped_frame_comes_back_as_it_was_with_its_time() {
        let seal = TunnelSeal::new(SEAL, 3);
        let mut f = frame(&[7; 60]);
        assert!(seal.stamp(&mut f, 123_456_789_012));
        assert_eq!(f.len, 76);
        assert_eq!(seal.unstamp(&mut f), Ok(123_456_789_012));
        assert_eq!(f.bytes(), &[7; 60][..]);
    }

    #[test]
    fn a_frame_without_the_mark_is_refused_and_left_alone() {
        let seal = TunnelSeal::new(SEAL, 3);
        let mut f = frame(&[0x33; 90]);
        assert_eq!(seal.unstamp(&mut f), Err(Unsealed::Unstamped));
        assert_eq!(f.len, 90);
        let mut short = frame(&[1, 2, 3]);
        assert_eq!(seal.unstamp(&mut short), Err(Unsealed::Unstamped));
    }

    #[test]
    fn a_frame_tagged_with_another_key_or_tunnel_or_changed_on_the_way_is_forged() {
        let seal = TunnelSeal::new(SEAL, 3);
        for other in [TunnelSeal::new([8; 16], 3), TunnelSeal::new(SEAL, 4)] {
            let mut f = frame(&[7; 60]);
            assert!(other.stamp(&mut f, 5));
            assert_eq!(seal.unstamp(&mut f), Err(Unsealed::Forged));
            assert_eq!(f.len, 76, "left as it came");
        }
        let mut f = frame(&[7; 60]);
        assert!(seal.stamp(&mut f, 5));
        f.buffer_mut()[10] ^= 1;
        assert_eq!(seal.unstamp(&mut f), Err(Unsealed::Forged));
        let mut f = frame(&[7; 60]);
        assert!(seal.stamp(&mut f, 5));
        f.buffer_mut()[67] ^= 1; // the time
        assert_eq!(seal.unstamp(&mut f), Err(Unsealed::Forged));
    }

    #[test]
    fn a_full_buffer_is_not_stamped() {
        let mut f = crate::frame::FramePool::new(64, 1).get();
        f.len = f.buffer_mut().len();
        assert!(!TunnelSeal::new(SEAL, 1).stamp(&mut f, 5));
    }

    #[test]
    fn the_key_is_never_printed() {
        assert!(!format!("{:?}", TunnelSeal::new(SEAL, 1)).contains('9'));
    }
}
