//! v1model's hash and checksum algorithms, computed as BMv2 computes them so that ECMP choices
//! and filter indices match a program run on BMv2: fields are packed bit by bit (big-endian,
//! fields of invalid headers left out, the last byte padded with zeros), then hashed.

use crate::ir::Algorithm;

/// CRC-16/ARC (polynomial 0x8005 reflected, initial value 0, no final XOR): BMv2's `crc16`.
const CRC16_TABLE: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut b = 0;
        while b < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xa001 } else { c >> 1 };
            b += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |c, &b| {
        (c >> 8) ^ CRC16_TABLE[usize::from((c ^ u16::from(b)) as u8)]
    })
}

/// The Internet checksum (RFC 1071) of `data`, an odd last byte padded with zero.
pub fn csum16(data: &[u8]) -> u16 {
    csum16_of(data, &[])
}

/// The Internet checksum of `a` followed by `b` (a field list and the payload after it),
/// without joining them.
pub fn csum16_of(a: &[u8], b: &[u8]) -> u16 {
    let sum = if a.len().is_multiple_of(2) {
        ones_sum(a) + ones_sum(b)
    } else {
        // `b` starts in the middle of a word: its first byte completes `a`'s last one.
        let (head, last) = a.split_at(a.len() - 1);
        let joined = [last[0], b.first().copied().unwrap_or(0)];
        ones_sum(head) + ones_sum(&joined) + ones_sum(b.get(1..).unwrap_or(&[]))
    };
    !fold(sum)
}

/// Big-endian 16-bit words of `data` summed (an odd last byte is the high byte of a word),
/// four bytes at a time: 2^16 is 1 in ones' complement arithmetic, so a 32-bit word counts as
/// its two halves.
fn ones_sum(data: &[u8]) -> u64 {
    let mut sum = 0u64;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum + u64::from(u32::from_be_bytes(tail))
}

/// A sum folded to 16 bits, ones' complement.
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// `(value, width)`s packed as a field list is; the bytes (for tests).
#[cfg(test)]
pub(crate) fn packed(items: &[(u128, u16)]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut p = BitPacker::new(&mut buf);
    for &(v, w) in items {
        p.push(v, w);
    }
    p.finish();
    buf
}

/// The hash of `data` with `algo`.
pub fn hash(algo: Algorithm, data: &[u8]) -> u64 {
    match algo {
        // BMv2's custom CRCs start with the standard ones' parameters, which only its own CLI
        // changes.
        Algorithm::Crc32 | Algorithm::Crc32Custom => u64::from(crc32fast::hash(data)),
        Algorithm::Crc16 | Algorithm::Crc16Custom => u64::from(crc16(data)),
        Algorithm::Csum16 => u64::from(csum16(data)),
        Algorithm::Identity => data.iter().take(8).fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        Algorithm::Xor16 => data.chunks(2).fold(0u16, |v, c| {
            v ^ u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])
        }) as u64,
        // The caller draws the value: a hash of the data would not be random.
        Algorithm::Random => 0,
    }
}

/// Packs values of any width into bytes appended to a buffer, most significant bit first
/// (BMv2's layout of a field list); [`BitPacker::finish`] pads the last byte with zeros.
pub struct BitPacker<'a> {
    out: &'a mut Vec<u8>,
    /// Where in `out` its bytes start.
    start: usize,
    /// Bits not yet written, at the bottom: fewer than 64 between pushes.
    acc: u64,
    held: u32,
}

impl<'a> BitPacker<'a> {
    /// A packer appending to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> BitPacker<'a> {
        let start = out.len();
        BitPacker {
            out,
            start,
            acc: 0,
            held: 0,
        }
    }

    /// Appends the low `width` bits of `value` (which has no bits above them).
    // Always inlined: it is the inner loop of every checksum and hash, and rustc would not.
    #[inline(always)]
    pub fn push(&mut self, value: u128, width: u16) {
        let w = u32::from(width);
        if w > 64 {
            self.put((value >> 64) as u64, w - 64);
            self.put(value as u64, 64);
        } else {
            self.put(value as u64, w);
        }
    }

    /// Appends `width` (at most 64) bits, 64-bit arithmetic only: most fields are narrow.
    #[inline]
    fn put(&mut self, value: u64, width: u32) {
        let total = self.held + width;
        if total < 64 {
            // `width` < 64 here, so the shift is defined.
            self.acc = (self.acc << width) | value;
            self.held = total;
            return;
        }
        // A word is full: the bits held on top, then the value's leading bits.
        let spill = total - 64;
        let top = if self.held == 0 {
            0
        } else {
            self.acc << (64 - self.held)
        };
        self.out.extend_from_slice(&(top | (value >> spill)).to_be_bytes());
        self.acc = if spill == 0 { 0 } else { value & ((1u64 << spill) - 1) };
        self.held = spill;
    }

    /// Writes the bits still held, the last byte padded with zeros.
    pub fn finish(self) {
        let bytes = self.held.div_ceil(8) as usize;
        if bytes > 0 {
            let last = (self.acc << (64 - self.held)).to_be_bytes();
            self.out.extend_from_slice(&last[..bytes]);
        }
    }

    /// Writes the bits still held with the zeros in front instead: everything this packer
    /// packed moves right to end on a byte boundary (PSA's `Hash` packs its field list so).
    pub fn finish_right_aligned(self) {
        let start = self.start;
        let pad = (8 - self.held % 8) % 8;
        let out = &mut *self.out;
        let bytes = self.held.div_ceil(8) as usize;
        if bytes > 0 {
            let last = (self.acc << (64 - self.held)).to_be_bytes();
            out.extend_from_slice(&last[..bytes]);
        }
        if pad == 0 {
            return;
        }
        let mut carry = 0u8;
        for b in &mut out[start..] {
            let next = *b << (8 - pad);
            *b = (*b >> pad) | carry;
            carry = next;
        }
    }
}

/// Reads `width` bits at bit offset `at` of `b` (which must hold them).
pub fn read_bits(b: &[u8], at: usize, width: u16) -> u128 {
    let width = usize::from(width);
    if width > 120 {
        // Up to 17 bytes would not fit the accumulator: bit by bit.
        return (at..at + width).fold(0, |v, i| (v << 1) | u128::from((b[i / 8] >> (7 - i % 8)) & 1));
    }
    let (first, end) = (at / 8, (at + width).div_ceil(8));
    // The bytes that hold the field, big-endian, then the bits after it shifted out.
    let mut v = 0u128;
    let mut lead = 0;
    for (i, &byte) in b[first..end].iter().enumerate() {
        if i == 0 {
            lead = at % 8;
            v = u128::from(byte & (0xff >> lead));
        } else {
            v = (v << 8) | u128::from(byte);
        }
    }
    let total = (end - first) * 8 - lead;
    v >> (total - width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_list_packs_left_aligned_for_v1model_and_right_aligned_for_psa() {
        // 12 bits, then 12 more: v1model pads the end, PSA's Hash pads the front.
        assert_eq!(packed(&[(0x456, 12)]), [0x45, 0x60]);
        let mut buf = Vec::new();
        let mut p = BitPacker::new(&mut buf);
        p.push(0x456, 12);
        p.finish_right_aligned();
        assert_eq!(buf, [0x04, 0x56]);
        buf.clear();
        let mut p = BitPacker::new(&mut buf);
        p.push(0xabc, 12);
        p.push(0xdef, 12);
        p.push(0x1, 4);
        p.finish_right_aligned();
        assert_eq!(buf, [0x0a, 0xbc, 0xde, 0xf1]);
        // A whole number of bytes moves nowhere.
        buf.clear();
        let mut p = BitPacker::new(&mut buf);
        p.push(0x1234, 16);
        p.finish_right_aligned();
        assert_eq!(buf, [0x12, 0x34]);
    }

    #[test]
    fn the_crcs_give_their_published_check_values() {
        // The check value of each CRC catalogue entry is its CRC of "123456789".
        assert_eq!(hash(Algorithm::Crc16, b"123456789"), 0xbb3d);
        assert_eq!(hash(Algorithm::Crc32, b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn the_internet_checksum_of_a_known_ipv4_header_verifies() {
        // An IPv4 header with its checksum (0xb861) in place sums to zero.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(csum16(&h), 0);
        let mut zeroed = h;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(csum16(&zeroed), 0xb861);
    }

    #[test]
    fn the_checksum_of_two_parts_is_that_of_the_parts_joined() {
        let data: Vec<u8> = (0..61u32).map(|i| (i * 37 + 11) as u8).collect();
        for cut in 0..data.len() {
            assert_eq!(csum16_of(&data[..cut], &data[cut..]), csum16(&data), "cut at {cut}");
        }
        // Against RFC 1071's 16 bits at a time.
        let mut sum: u32 = data
            .chunks(2)
            .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(csum16(&data), !(sum as u16));
    }

    #[test]
    fn bits_pack_big_endian_and_read_back() {
        let buf = packed(&[(0x4, 4), (0x5, 4), (0x1, 3)]);
        assert_eq!(buf, vec![0x45, 0x20]);
        assert_eq!(read_bits(&buf, 0, 4), 4);
        assert_eq!(read_bits(&buf, 4, 7), 0x29);
        assert_eq!(hash(Algorithm::Identity, &[1, 2]), 0x0102);
        assert_eq!(hash(Algorithm::Xor16, &[1, 2, 3]), 0x0102 ^ 0x0300);
    }

    #[test]
    fn bits_pack_and_read_as_one_bit_at_a_time_would_at_every_offset_and_width() {
        let bit = |b: &[u8], i: usize| (b[i / 8] >> (7 - i % 8)) & 1;
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let (lead, width) = ((seed % 13) as u16, (seed >> 8) as u16 % 129);
            let value = (u128::from(seed) << 64 | u128::from(seed.rotate_left(29))) & crate::ir::mask(width);
            let buf = packed(&[(0x1555 & crate::ir::mask(lead), lead), (value, width)]);
            assert_eq!(
                buf.len(),
                usize::from(lead + width).div_ceil(8),
                "no byte more than the bits need"
            );
            let l = usize::from(lead);
            for i in 0..usize::from(width) {
                let want = ((value >> (usize::from(width) - 1 - i)) & 1) as u8;
                assert_eq!(bit(&buf, l + i), want, "bit {i} of {width} after {lead}");
            }
            for i in l + usize::from(width)..buf.len() * 8 {
                assert_eq!(bit(&buf, i), 0, "padding is zero");
            }
            assert_eq!(read_bits(&buf, l, width), value, "{width} bits at {lead}");
        }
    }
}
