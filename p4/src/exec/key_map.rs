//! The index of a table's entries by exact key values (an lpm key by its masked value).
//!
//! A key whose fields fit in 128 bits together (nearly every table's) is packed into one number,
//! so that the map holds its keys inline and a lookup hashes one number. Wider keys are boxed.
//! Keys of 64 bits or fewer (an IPv4 address, a MAC, most exact keys) are packed into a `u64`:
//! a slot of 16 bytes rather than 32, so that a table of a million entries has half the index
//! to miss the cache in.
//!
//! Hashed with foldhash, several times faster than the standard SipHash on these short keys; the
//! keys come from the control plane, not from packets, so a flood of crafted keys is not a
//! concern.

use std::collections::HashMap;

use crate::ir::mask;

/// Keys of 64 bits or fewer, packed into one number.
type NarrowMap = HashMap<u64, usize, foldhash::fast::RandomState>;

/// Keys of 65 to 128 bits, packed into one number.
type PackedMap = HashMap<u128, usize, foldhash::fast::RandomState>;

/// Keys wider than 128 bits.
type WideMap = HashMap<Box<[u128]>, usize, foldhash::fast::RandomState>;

/// Entry positions by exact key values.
#[derive(Debug, Clone)]
pub(crate) enum KeyMap {
    /// Keys whose fields' widths add up to 64 bits or fewer.
    Narrow(NarrowMap),
    /// Keys whose fields' widths add up to 65 to 128 bits.
    Packed(PackedMap),
    /// Wider keys.
    Wide(WideMap),
}

impl KeyMap {
    /// An empty map for keys of fields `widths` wide.
    pub(crate) fn new(widths: &[u16]) -> KeyMap {
        match widths.iter().map(|&w| u32::from(w)).sum::<u32>() {
            0..=64 => KeyMap::Narrow(NarrowMap::default()),
            65..=128 => KeyMap::Packed(PackedMap::default()),
            _ => KeyMap::Wide(WideMap::default()),
        }
    }

    /// An empty map of the same kind.
    pub(crate) fn emptied(&self) -> KeyMap {
        match self {
            KeyMap::Narrow(_) => KeyMap::Narrow(NarrowMap::default()),
            KeyMap::Packed(_) => KeyMap::Packed(PackedMap::default()),
            KeyMap::Wide(_) => KeyMap::Wide(WideMap::default()),
        }
    }

    /// Whether it holds no key.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            KeyMap::Narrow(m) => m.is_empty(),
            KeyMap::Packed(m) => m.is_empty(),
            KeyMap::Wide(m) => m.is_empty(),
        }
    }

    /// The position stored under `key` (one value per field, each within its width).
    pub(crate) fn get(&self, widths: &[u16], key: &[u128]) -> Option<usize> {
        match self {
            KeyMap::Narrow(m) => m.get(&narrow(pack(widths, key.iter().copied()))).copied(),
            KeyMap::Packed(m) => m.get(&pack(widths, key.iter().copied())).copied(),
            KeyMap::Wide(m) => m.get(key).copied(),
        }
    }

    /// [`KeyMap::get`] for a key given field by field.
    pub(crate) fn get_fields(&self, widths: &[u16], key: impl Iterator<Item = u128>) -> Option<usize> {
        match self {
            KeyMap::Narrow(m) => m.get(&narrow(pack(widths, key))).copied(),
            KeyMap::Packed(m) => m.get(&pack(widths, key)).copied(),
            KeyMap::Wide(m) => m.get(key.collect::<Vec<u128>>().as_slice()).copied(),
        }
    }

    /// Stores `at` under `key`; false (and nothing stored) if the key is taken.
    pub(crate) fn insert_new(&mut self, widths: &[u16], key: impl Iterator<Item = u128>, at: usize) -> bool {
        let vacant = match self {
            KeyMap::Narrow(m) => m.entry(narrow(pack(widths, key))).or_insert(usize::MAX),
            KeyMap::Packed(m) => m.entry(pack(widths, key)).or_insert(usize::MAX),
            KeyMap::Wide(m) => m.entry(key.collect()).or_insert(usize::MAX),
        };
        if *vacant != usize::MAX {
            return false;
        }
        *vacant = at;
        true
    }

    /// Removes `key`.
    pub(crate) fn remove(&mut self, widths: &[u16], key: impl Iterator<Item = u128>) {
        match self {
            KeyMap::Narrow(m) => {
                m.remove(&narrow(pack(widths, key)));
            }
            KeyMap::Packed(m) => {
                m.remove(&pack(widths, key));
            }
            KeyMap::Wide(m) => {
                let key: Vec<u128> = key.collect();
                m.remove(key.as_slice());
            }
        }
    }
}

/// A packed key of fields 64 bits wide or fewer together, which [`pack`] keeps below 2^64.
fn narrow(packed: u128) -> u64 {
    debug_assert!(packed >> 64 == 0, "a narrow key wider than 64 bits");
    packed as u64
}

/// The fields of `key` side by side, the first in the highest bits: distinct keys give distinct
/// numbers when the widths add up to 128 or fewer. Each value is cut to its width, as a value of
/// a field that wide is, so that a wider one cannot spill into its neighbour.
fn pack(widths: &[u16], key: impl Iterator<Item = u128>) -> u128 {
    key.zip(widths).fold(0, |acc, (v, &w)| {
        acc.checked_shl(u32::from(w)).unwrap_or(0) | (v & mask(w))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that differ in one field each, and one with every field full, stay apart in a map
    /// for `widths` (three fields).
    fn fields_stay_apart(widths: [u16; 3]) -> KeyMap {
        let mut m = KeyMap::new(&widths);
        let full = |w: u16| mask(w);
        let keys = [
            [1u128, 0, 0],
            [0, 1, 0],
            [0, 0, 1],
            [full(widths[0]), full(widths[1]), full(widths[2])],
        ];
        for (at, k) in keys.iter().enumerate() {
            assert!(m.insert_new(&widths, k.iter().copied(), at));
        }
        for (at, k) in keys.iter().enumerate() {
            assert_eq!(m.get(&widths, k), Some(at));
            assert!(!m.insert_new(&widths, k.iter().copied(), 9), "taken");
        }
        m.remove(&widths, keys[1].iter().copied());
        assert_eq!(m.get(&widths, &keys[1]), None);
        assert_eq!(m.get(&widths, &keys[2]), Some(2));
        m
    }

    #[test]
    fn packed_keys_of_different_fields_never_collide() {
        assert!(matches!(fields_stay_apart([48, 16, 64]), KeyMap::Packed(_)));
        assert!(matches!(fields_stay_apart([32, 16, 16]), KeyMap::Narrow(_)));
        assert!(matches!(fields_stay_apart([1, 1, 1]), KeyMap::Narrow(_)));
    }

    #[test]
    fn keys_of_64_bits_are_narrow_and_of_65_packed() {
        assert!(matches!(KeyMap::new(&[64]), KeyMap::Narrow(_)));
        assert!(matches!(KeyMap::new(&[64, 1]), KeyMap::Packed(_)));
        let mut m = KeyMap::new(&[32, 32]);
        assert!(m.insert_new(&[32, 32], [u128::from(u32::MAX), 0].into_iter(), 0));
        assert!(m.insert_new(&[32, 32], [0, u128::from(u32::MAX)].into_iter(), 1));
        assert_eq!(m.get(&[32, 32], &[0, u128::from(u32::MAX)]), Some(1));
    }

    #[test]
    fn keys_wider_than_128_bits_are_kept_whole() {
        let widths = [128, 1];
        let mut m = KeyMap::new(&widths);
        assert!(matches!(m, KeyMap::Wide(_)));
        assert!(m.insert_new(&widths, [u128::MAX, 0].into_iter(), 0));
        assert!(m.insert_new(&widths, [u128::MAX, 1].into_iter(), 1));
        assert_eq!(m.get(&widths, &[u128::MAX, 1]), Some(1));
        m.remove(&widths, [u128::MAX, 0].into_iter());
        assert!(!m.is_empty());
        assert_eq!(m.get(&widths, &[u128::MAX, 0]), None);
    }

    #[test]
    fn a_value_wider_than_its_field_does_not_reach_the_next() {
        assert_eq!(pack(&[8, 8], [0x1ff, 0x01].into_iter()), 0xff01);
    }

    #[test]
    fn one_field_of_128_bits_is_packed_as_itself() {
        assert_eq!(pack(&[128], [u128::MAX].into_iter()), u128::MAX);
        assert_eq!(pack(&[0, 128], [0, 5].into_iter()), 5);
    }
}
