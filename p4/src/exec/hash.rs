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
    while left > 0 {
        if (*bits).is_multiple_of(8) {
            buf.push(0);
        }
        let room = 8 - *bits % 8;
        let take = room.min(left);
        let chunk = ((value >> (left - take)) & ((1u128 << take) - 1)) as u8;
        let last = buf.len() - 1;
        buf[last] |= chunk << (room - take);
        *bits += take;
        left -= take;
    }
}

/// Reads `width` bits at bit offset `at` of `b` (which must hold them).
pub fn read_bits(b: &[u8], at: usize, width: u16) -> u128 {
    let mut v = 0u128;
    let mut bit = at;
    let mut left = usize::from(width);
    while left > 0 {
        let in_byte = bit % 8;
        let take = (8 - in_byte).min(left);
        let chunk = (b[bit / 8] >> (8 - in_byte - take)) & (((1u16 << take) - 1) as u8);
        v = (v << take) | u128::from(chunk);
        bit += take;
        left -= take;
    }
    v
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
}
