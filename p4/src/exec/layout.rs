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

/// A piece of a field's value that lands in one big-endian 8-byte word of the header: the
/// field's low 64 bits (or the bits above them), shifted to its place in the word.
#[derive(Debug, Clone, Copy)]
struct WordPart {
    field: u32,
    high: bool,
    /// Left shift if positive, right shift if negative.
    shift: i32,
}

/// The layout of a header type.
#[derive(Debug, Clone)]
pub(super) struct HeaderLayout {
    widths: Box<[u16]>,
    fields: Box<[FieldAt]>,
    /// The parts of each 8-byte word of the header, the words in order (the last one may be
    /// partly outside the header): `write` ORs them together and stores the word.
    parts: Box<[WordPart]>,
    /// Where each word's parts end in `parts`.
    word_ends: Box<[u32]>,
    /// Its length in bytes.
    bytes: usize,
    /// Every field fits the 8-byte word at its first byte (none wider than 57 bits, or
    /// starting mid-byte past that): the fast read applies.
    fast: bool,
}

impl HeaderLayout {
    /// The layout of header type `h` (a header with a varbit is read and written field by
    /// field instead).
    pub(super) fn new(h: &crate::ir::HeaderType) -> HeaderLayout {
        let widths: Vec<u16> = h.fields.iter().map(|f| f.1).collect();
        HeaderLayout::of_widths(&widths)
    }

    /// The layout of a header of fields `widths` bits wide (whole bytes in all).
    pub(super) fn of_widths(widths: &[u16]) -> HeaderLayout {
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
        let (parts, word_ends) = word_parts(widths);
        HeaderLayout {
            widths: widths.into(),
            fields: fields.into(),
            parts,
            word_ends,
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

    /// Appends the header with field `values` (each within its width) to `out`: each 8-byte
    /// word made in a register from the parts planned for it, then stored once. (A store per
    /// field, like `read`'s loads, stalls when the next field's 8-byte load overlaps it; a
    /// bit accumulator spends a branch and 128-bit shifts on every field.)
    pub(super) fn write(&self, out: &mut Vec<u8>, values: &[u128]) {
        let length = out.len() + self.bytes;
        out.reserve(8 * self.word_ends.len());
        let mut start = 0usize;
        for &end in self.word_ends.iter() {
            let mut word = 0u64;
            for p in &self.parts[start..end as usize] {
                let v = values[p.field as usize];
                let v = if p.high { (v >> 64) as u64 } else { v as u64 };
                word |= if p.shift >= 0 { v << p.shift } else { v >> -p.shift };
            }
            start = end as usize;
            // Whole words, a constant-length copy; what passes the header is cut off below.
            out.extend_from_slice(&word.to_be_bytes());
        }
        out.truncate(length);
    }
}

/// The plan of [`HeaderLayout::write`] for fields `widths` bits wide: each word's parts, and
/// where each word's parts end.
fn word_parts(widths: &[u16]) -> (Box<[WordPart]>, Box<[u32]>) {
    // Every field as pieces of at most 64 bits: (field, high half, first bit, width).
    let mut pieces = Vec::new();
    let mut bit = 0i64;
    for (i, &w) in widths.iter().enumerate() {
        let w = i64::from(w);
        if w == 0 {
            continue; // `bit<0>`: nothing to place
        }
        if w > 64 {
            pieces.push((i as u32, true, bit, w - 64));
            pieces.push((i as u32, false, bit + w - 64, 64));
        } else {
            pieces.push((i as u32, false, bit, w));
        }
        bit += w;
    }
    let words = (bit as usize).div_ceil(64);
    let mut per_word: Vec<Vec<WordPart>> = vec![Vec::new(); words];
    for (field, high, first, width) in pieces {
        let end = first + width;
        // A piece ending at bit `end` of the header sits `64 * (k + 1) - end` bits above the
        // bottom of word k (negative: below it, so it is shifted right into the word).
        for k in (first / 64)..=((end - 1) / 64) {
            let shift = 64 * (k + 1) - end;
            per_word[k as usize].push(WordPart {
                field,
                high,
                shift: shift as i32,
            });
        }
    }
    let mut parts = Vec::new();
    let mut ends = Vec::new();
    for w in per_word {
        parts.extend(w);
        ends.push(parts.len() as u32);
    }
    (parts.into(), ends.into())
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
                values.push((u128::from(seed) << 64 | u128::from(seed.rotate_left(17))) & crate::ir::mask(w));
                total += u32::from(w);
            }
            out.push((widths, values));
        }
        out
    }

    #[test]
    fn a_zero_width_field_takes_no_bits() {
        let mut out = Vec::new();
        HeaderLayout::of_widths(&[0, 8, 0, 8]).write(&mut out, &[0, 0x12, 0, 0x34]);
        assert_eq!(out, [0x12, 0x34]);
    }

    #[test]
    fn a_header_is_written_and_read_as_its_fields_packed_one_by_one() {
        // Narrow fields take the fast paths, wide ones the bit walk; both must agree with the
        // field list packer (itself checked bit by bit in hash.rs).
        for max in [16, 57, 128] {
            for (widths, values) in headers(max, 400) {
                let layout = HeaderLayout::of_widths(&widths);
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
