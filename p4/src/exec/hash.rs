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
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The hash of `data` with `algo`.
pub fn hash(algo: Algorithm, data: &[u8]) -> u64 {
    match algo {
        Algorithm::Crc32 => u64::from(crc32fast::hash(data)),
        Algorithm::Crc16 => u64::from(crc16(data)),
        Algorithm::Csum16 => u64::from(csum16(data)),
        Algorithm::Identity => data.iter().take(8).fold(0u64, |v, &b| (v << 8) | u64::from(b)),
        Algorithm::Xor16 => data.chunks(2).fold(0u16, |v, c| {
            v ^ u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])
        }) as u64,
    }
}

/// Appends the low `width` bits of `value` to the bit string in `buf`, whose length in bits is
/// `*bits`.
pub fn push_bits(buf: &mut Vec<u8>, bits: &mut usize, value: u128, width: u16) {
    let mut left = usize::from(width);
    *bits += left;
    // Fill the partial last byte, then whole bytes, then the start of a new partial one: most
    // header fields are whole bytes on byte boundaries and take the middle loop alone.
    let used = (*bits - left) % 8;
    if used != 0 && left > 0 {
        let room = 8 - used;
        let take = room.min(left);
        let chunk = ((value >> (left - take)) as u8) & ((1u16 << take) - 1) as u8;
        if let Some(last) = buf.last_mut() {
            *last |= chunk << (room - take);
        }
        left -= take;
    }
    while left >= 8 {
        left -= 8;
        buf.push((value >> left) as u8);
    }
    if left > 0 {
        buf.push((value as u8) << (8 - left));
    }
}

/// Appends a header, its field `values` of `widths` bits (whole bytes in all), to `out`, which
/// ends on a byte boundary (the deparser's output only ever holds whole headers).
pub fn push_header(out: &mut Vec<u8>, values: &[u128], widths: impl Iterator<Item = u16>, bytes: usize) {
    let start = out.len();
    out.resize(start + bytes, 0);
    let dst = &mut out[start..];
    // Bits not yet written sit at the bottom of `acc`, fewer than 64 between fields; they leave
    // eight bytes at a time.
    let (mut acc, mut held, mut at) = (0u128, 0u32, 0usize);
    let mut put = |value: u128, width: u32| {
        acc = (acc << width) | value;
        held += width;
        if held >= 64 {
            held -= 64;
            dst[at..at + 8].copy_from_slice(&((acc >> held) as u64).to_be_bytes());
            at += 8;
            acc &= (1u128 << held) - 1;
        }
    };
    for (&v, w) in values.iter().zip(widths) {
        let w = u32::from(w);
        if w > 64 {
            put(v >> 64, w - 64);
            put(v & u128::from(u64::MAX), 64);
        } else {
            put(v, w);
        }
    }
    let rest = (held / 8) as usize;
    if rest > 0 {
        let last = ((acc << (64 - held)) as u64).to_be_bytes();
        dst[at..at + rest].copy_from_slice(&last[..rest]);
    }
}

/// Reads a header's fields of `widths` bits from `b` (its bytes, starting on a byte boundary)
/// into `values`, the bytes eight at a time.
pub fn read_header(b: &[u8], values: &mut [u128], widths: impl Iterator<Item = u16>) {
    // Bits read but not yet handed out sit at the bottom of `acc`.
    let (mut acc, mut avail, mut at) = (0u128, 0u32, 0usize);
    let mut take = |width: u32| -> u128 {
        while avail < width {
            if let Some(eight) = b.get(at..at + 8) {
                let mut word = [0u8; 8];
                word.copy_from_slice(eight);
                acc = (acc << 64) | u128::from(u64::from_be_bytes(word));
                avail += 64;
                at += 8;
            } else {
                acc = (acc << 8) | u128::from(b[at]);
                avail += 8;
                at += 1;
            }
        }
        avail -= width;
        let v = acc >> avail;
        acc &= (1u128 << avail) - 1;
        v
    };
    for (slot, w) in values.iter_mut().zip(widths) {
        let w = u32::from(w);
        *slot = if w > 64 {
            let high = take(w - 64);
            (high << 64) | take(64)
        } else {
            take(w)
        };
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
    fn bits_pack_big_endian_and_read_back() {
        let mut buf = Vec::new();
        let mut bits = 0;
        push_bits(&mut buf, &mut bits, 0x4, 4);
        push_bits(&mut buf, &mut bits, 0x5, 4);
        push_bits(&mut buf, &mut bits, 0x1, 3);
        assert_eq!(buf, vec![0x45, 0x20]);
        assert_eq!(bits, 11);
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
            let value = (u128::from(seed) << 64 | u128::from(seed.rotate_left(29))) & crate::lower::mask(width);
            let (mut buf, mut bits) = (Vec::new(), 0);
            push_bits(&mut buf, &mut bits, 0x1555, lead);
            push_bits(&mut buf, &mut bits, value, width);
            assert_eq!(bits, usize::from(lead + width));
            assert_eq!(buf.len(), bits.div_ceil(8), "no byte more than the bits need");
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

    #[test]
    fn a_header_is_written_as_its_fields_pushed_one_by_one_would_be_and_reads_back() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..500 {
            let (mut widths, mut values) = (Vec::new(), Vec::new());
            let mut total = 0u32;
            while widths.is_empty() || !total.is_multiple_of(8) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let w = 1 + (seed % 128) as u16;
                widths.push(w);
                values.push((u128::from(seed) << 64 | u128::from(seed.rotate_left(17))) & crate::lower::mask(w));
                total += u32::from(w);
            }
            let (mut want, mut bits) = (vec![0xab], 8);
            for (&v, &w) in values.iter().zip(&widths) {
                push_bits(&mut want, &mut bits, v, w);
            }
            let mut got = vec![0xab];
            push_header(&mut got, &values, widths.iter().copied(), total as usize / 8);
            assert_eq!(got, want, "fields of {widths:?}");
            let mut back = vec![0; values.len()];
            read_header(&got[1..], &mut back, widths.iter().copied());
            assert_eq!(back, values, "read back, fields of {widths:?}");
        }
    }
}
