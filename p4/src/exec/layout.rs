//! A header type's bytes and fields: where each field sits, so that a whole header is read
//! from a frame into its slots, or written back, with one 8-byte load or store per field
//! instead of a walk over its bits.

/// One field: the byte its bits start in, and how far its value sits from the bottom of the
/// big-endian 8-byte word read from that byte.
#[derive(Debug, Clone, Copy)]
struct FieldAt {
    byte: usize,
    shift: u32,
    mask: u64,
}

/// The layout of a header type.
#[derive(Debug, Clone)]
pub(super) struct HeaderLayout {
    widths: Box<[u16]>,
    fields: Box<[FieldAt]>,
    /// Its length in bytes.
    bytes: usize,
    /// Every field fits the 8-byte word at its first byte (none wider than 57 bits, or
    /// starting mid-byte past that): the fast read applies.
    fast: bool,
}

impl HeaderLayout {
    /// The layout of a header of fields `widths` bits wide (whole bytes in all).
    pub(super) fn new(widths: &[u16]) -> HeaderLayout {
        let mut bit = 0usize;
        let mut fast = true;
        let mut fields = Vec::with_capacity(widths.len());
        for &w in widths {
            let (w, lead) = (u32::from(w), (bit % 8) as u32);
            fast &= lead + w <= 64;
            fields.push(FieldAt {
                byte: bit / 8,
                shift: 64u32.saturating_sub(lead + w),
                mask: if w >= 64 { u64::MAX } else { (1u64 << w) - 1 },
            });
            bit += w as usize;
        }
        HeaderLayout {
            widths: widths.into(),
            fields: fields.into(),
            bytes: bit / 8,
            fast,
        }
    }

    /// Reads the header at the start of `src` (which holds at least its bytes) into `values`.
    pub(super) fn read(&self, src: &[u8], values: &mut [u128]) {
        // The last field's 8-byte word may run past the header: the frame's next bytes.
        let room = self.fields.last().is_some_and(|f| f.byte + 8 <= src.len());
        if !(self.fast && room) {
            return read_header(&src[..self.bytes], values, self.widths.iter().copied());
        }
        for (v, f) in values.iter_mut().zip(self.fields.iter()) {
            let mut word = [0u8; 8];
            word.copy_from_slice(&src[f.byte..f.byte + 8]);
            *v = u128::from((u64::from_be_bytes(word) >> f.shift) & f.mask);
        }
    }

    /// Appends the header with field `values` (each within its width) to `out`. (Not a store
    /// per field like `read`'s loads: a store that the next field's 8-byte load overlaps stalls
    /// the load until the store completes, which measured slower than the accumulator.)
    pub(super) fn write(&self, out: &mut Vec<u8>, values: &[u128]) {
        push_header(out, values, self.widths.iter().copied(), self.bytes)
    }
}

/// Appends a header, its field `values` of `widths` bits (whole bytes in all), to `out`, which
/// ends on a byte boundary (the deparser's output only ever holds whole headers).
fn push_header(out: &mut Vec<u8>, values: &[u128], widths: impl Iterator<Item = u16>, bytes: usize) {
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
fn read_header(b: &[u8], values: &mut [u128], widths: impl Iterator<Item = u16>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::hash::packed;

    /// Random headers of random field widths (1 to `max` bits) and values.
    fn headers(max: u64, n: usize) -> Vec<(Vec<u16>, Vec<u128>)> {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ max;
        let mut out = Vec::new();
        for _ in 0..n {
            let (mut widths, mut values) = (Vec::new(), Vec::new());
            let mut total = 0u32;
            while widths.is_empty() || !total.is_multiple_of(8) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let w = 1 + (seed % max) as u16;
                widths.push(w);
                values.push((u128::from(seed) << 64 | u128::from(seed.rotate_left(17))) & crate::lower::mask(w));
                total += u32::from(w);
            }
            out.push((widths, values));
        }
        out
    }

    #[test]
    fn a_header_is_written_and_read_as_its_fields_packed_one_by_one() {
        // Narrow fields take the fast paths, wide ones the bit walk; both must agree with the
        // field list packer (itself checked bit by bit in hash.rs).
        for max in [16, 57, 128] {
            for (widths, values) in headers(max, 400) {
                let layout = HeaderLayout::new(&widths);
                let mut want = vec![0xab];
                want.extend(packed(
                    &values.iter().copied().zip(widths.iter().copied()).collect::<Vec<_>>(),
                ));
                let mut got = vec![0xab];
                layout.write(&mut got, &values);
                assert_eq!(got, want, "fields of {widths:?}");
                // Read back with and without bytes after the header.
                for tail in [0usize, 8] {
                    let mut src = got[1..].to_vec();
                    src.resize(src.len() + tail, 0x5a);
                    let mut back = vec![0; values.len()];
                    layout.read(&src, &mut back);
                    assert_eq!(back, values, "read back with {tail} bytes after, fields of {widths:?}");
                }
            }
        }
    }
}
