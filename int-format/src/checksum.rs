//! The Internet checksum (RFC 1071) used by the IPv4 header and UDP.

use std::net::Ipv4Addr;

/// One's-complement sum of `data` as big-endian 16-bit words, folded to 16 bits.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    fold(sum_words(data, 0))
}

/// Adds `data` as big-endian words to a running 32-bit accumulator (not yet folded).
pub(crate) fn sum_words(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a wide accumulator to 16 bits with end-around carry.
pub(crate) fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum over `data` (the complement of the one's-complement sum).
pub fn checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// The UDP checksum over the IPv4 pseudo-header and `udp` (whose checksum field must read zero).
///
/// A computed zero is sent as 0xFFFF, because zero on the wire means "no checksum" (RFC 768).
pub fn udp_ipv4(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
    let mut acc = sum_words(&src.octets(), 0);
    acc = sum_words(&dst.octets(), acc);
    acc += 17 + udp.len() as u64;
    acc = sum_words(udp, acc);
    match !fold(acc) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: the sum of these words is 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }
}
