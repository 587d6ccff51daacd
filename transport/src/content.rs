//! The bytes of every message: a pattern both ends compute from the flow id and the offset, so
//! the receiver checks each payload where it lands and a corruption cannot pass unseen.

/// The 4-byte word at byte offset `offset` (a multiple of 4) of flow `flow`'s message.
#[inline]
fn word(flow: u32, offset: u64) -> [u8; 4] {
    let i = (offset / 4) as u32;
    (i.wrapping_mul(0x9e37_79b1) ^ flow.wrapping_mul(0x85eb_ca77) ^ (offset >> 34) as u32).to_le_bytes()
}

/// Fills `buf` with the message bytes starting at `offset` (a multiple of 4).
pub fn fill(flow: u32, offset: u64, buf: &mut [u8]) {
    for (k, chunk) in buf.chunks_mut(4).enumerate() {
        let w = word(flow, offset + 4 * k as u64);
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// True when `buf` holds the message bytes starting at `offset` (a multiple of 4).
pub fn matches(flow: u32, offset: u64, buf: &[u8]) -> bool {
    buf.chunks(4)
        .enumerate()
        .all(|(k, chunk)| chunk == &word(flow, offset + 4 * k as u64)[..chunk.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_then_match_and_any_flip_is_caught() {
        let mut b = vec![0u8; 1026];
        fill(7, 4096, &mut b);
        assert!(matches(7, 4096, &b));
        assert!(!matches(8, 4096, &b), "another flow's bytes differ");
        assert!(!matches(7, 4100, &b), "another offset's bytes differ");
        for i in [0, 513, 1025] {
            b[i] ^= 0x10;
            assert!(!matches(7, 4096, &b));
            b[i] ^= 0x10;
        }
    }
}
