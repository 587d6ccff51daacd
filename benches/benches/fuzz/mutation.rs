//! Mutations of byte strings: what damage does to a frame or a file.

use proptest::prelude::*;
use proptest::sample::Index;

/// One change to a byte string.
#[derive(Debug, Clone)]
pub enum Mutation {
    Flip(Index, u8),
    Set(Index, u8),
    Insert(Index, Vec<u8>),
    Remove(Index, usize),
    Truncate(Index),
    /// Copies a slice of the input over another place (repeats structure, as real damage does).
    Splice(Index, Index, usize),
}

/// Any one mutation, small changes more often than large ones.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        4 => (any::<Index>(), prop_oneof![Just(0u8), Just(0xff), Just(0x7f), Just(0x80), Just(1), any::<u8>()])
            .prop_map(|(i, v)| Mutation::Set(i, v)),
        1 => (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..16)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        1 => (any::<Index>(), 1usize..16).prop_map(|(i, n)| Mutation::Remove(i, n)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), any::<Index>(), 1usize..32).prop_map(|(a, b, n)| Mutation::Splice(a, b, n)),
    ]
}

/// `bytes` after `mutations`, in order.
pub fn apply(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        if bytes.is_empty() {
            if let Mutation::Insert(_, v) = m {
                bytes.extend_from_slice(v);
            }
            continue;
        }
        let len = bytes.len();
        match m {
            Mutation::Flip(i, b) => bytes[i.index(len)] ^= 1 << b,
            Mutation::Set(i, v) => bytes[i.index(len)] = *v,
            Mutation::Insert(i, v) => {
                let at = i.index(len + 1);
                bytes.splice(at..at, v.iter().copied());
            }
            Mutation::Remove(i, n) => {
                let at = i.index(len);
                bytes.drain(at..(at + n).min(len));
            }
            Mutation::Truncate(i) => bytes.truncate(i.index(len)),
            Mutation::Splice(from, to, n) => {
                let (from, to) = (from.index(len), to.index(len));
                let n = (*n).min(len - from).min(len - to);
                bytes.copy_within(from..from + n, to);
            }
        }
    }
    bytes
}

/// Refreshes the IPv4 header checksum of an Ethernet frame so a mutated frame reaches the
/// layers behind it.
pub fn repair_ipv4_checksum(frame: &mut [u8]) {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    if ihl < 20 || frame.len() < 14 + ihl {
        return;
    }
    frame[24..26].fill(0);
    let c = int_format::checksum::checksum(&frame[14..14 + ihl]);
    frame[24..26].copy_from_slice(&c.to_be_bytes());
}
