//! PacketIn and PacketOut through a switch's CPU port. A frame the program sends to the CPU
//! port starts with its `@controller_header("packet_in")` header, whose fields become the
//! PacketIn's metadata and whose bytes are taken off the payload; a PacketOut's metadata are
//! written as the `@controller_header("packet_out")` header in front of its payload, and the
//! frame arrives on the CPU port, as simple_switch_grpc does with `--cpu-port`.

use super::entries::{canonical, value};
use super::error::UpdateError;
use crate::proto::p4::config::v1 as p4i;
use crate::proto::p4::v1 as p4rt;

/// The fields of one controller header, in the order they are on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerHeader {
    /// Metadata id and width in bits, field by field.
    fields: Vec<(u32, u16)>,
}

impl ControllerHeader {
    /// The header `name` ("packet_in", "packet_out") of `info`; none (no metadata) when the
    /// program declares none.
    pub fn of(info: &p4i::P4Info, name: &str) -> ControllerHeader {
        let header = info
            .controller_packet_metadata
            .iter()
            .find(|h| h.preamble.as_ref().is_some_and(|p| p.name == name));
        ControllerHeader {
            fields: header
                .into_iter()
                .flat_map(|h| &h.metadata)
                .map(|m| (m.id, u16::try_from(m.bitwidth).unwrap_or(0)))
                .collect(),
        }
    }

    /// Its length in bytes (P4 compilers make controller headers whole bytes).
    fn bytes(&self) -> usize {
        let bits: usize = self.fields.iter().map(|&(_, w)| usize::from(w)).sum();
        bits.div_ceil(8)
    }

    /// The PacketIn for `frame` as the switch sent it to its CPU port; None when the frame is
    /// shorter than the header.
    pub fn packet_in(&self, frame: &[u8]) -> Option<p4rt::PacketIn> {
        let len = self.bytes();
        if frame.len() < len {
            return None;
        }
        let mut at = 0;
        let metadata = self
            .fields
            .iter()
            .map(|&(id, width)| {
                let v = read_bits(frame, at, width);
                at += usize::from(width);
                p4rt::PacketMetadata {
                    metadata_id: id,
                    value: canonical(v),
                }
            })
            .collect();
        Some(p4rt::PacketIn {
            payload: prost::bytes::Bytes::copy_from_slice(&frame[len..]),
            metadata,
        })
    }

    /// The frame a PacketOut puts on the CPU port: the header from its metadata (a field it
    /// does not give is 0), then its payload.
    pub fn packet_out(&self, out: &p4rt::PacketOut) -> Result<Vec<u8>, UpdateError> {
        let mut frame = vec![0u8; self.bytes()];
        for m in &out.metadata {
            let Some(field) = self.fields.iter().position(|&(id, _)| id == m.metadata_id) else {
                return Err(UpdateError::invalid(format!(
                    "packet_out has no metadata {} (it has {:?})",
                    m.metadata_id,
                    self.fields.iter().map(|f| f.0).collect::<Vec<_>>()
                )));
            };
            let width = self.fields[field].1;
            let v = value(&m.value, width, &format_args!("packet_out metadata {}", m.metadata_id))?;
            let at: usize = self.fields[..field].iter().map(|&(_, w)| usize::from(w)).sum();
            write_bits(&mut frame, at, width, v);
        }
        frame.extend_from_slice(&out.payload);
        Ok(frame)
    }
}

/// `width` bits (at most 128) of `bytes` from bit `at`, most significant first.
fn read_bits(bytes: &[u8], at: usize, width: u16) -> u128 {
    (0..usize::from(width).min(128)).fold(0u128, |v, i| {
        let bit = at + i;
        (v << 1) | u128::from((bytes[bit / 8] >> (7 - bit % 8)) & 1)
    })
}

/// Writes the low `width` bits of `v` into `bytes` from bit `at`, most significant first.
fn write_bits(bytes: &mut [u8], at: usize, width: u16, v: u128) {
    let width = usize::from(width).min(128);
    for i in 0..width {
        let bit = at + i;
        let set = (v >> (width - 1 - i)) & 1 == 1;
        let m = 1u8 << (7 - bit % 8);
        if set {
            bytes[bit / 8] |= m;
        } else {
            bytes[bit / 8] &= !m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(widths: &[u16]) -> ControllerHeader {
        ControllerHeader {
            fields: widths.iter().enumerate().map(|(i, &w)| (i as u32 + 1, w)).collect(),
        }
    }

    #[test]
    fn a_packet_out_header_reads_back_as_a_packet_in() {
        // The flowcache exercise's header: 9-bit port, 7 bits of padding, an 8-bit reason.
        let h = header(&[9, 7, 8]);
        let out = p4rt::PacketOut {
            payload: vec![0xaa, 0xbb].into(),
            metadata: vec![
                p4rt::PacketMetadata {
                    metadata_id: 1,
                    value: vec![0x01, 0xfe].into(),
                },
                p4rt::PacketMetadata {
                    metadata_id: 3,
                    value: vec![0x05].into(),
                },
            ],
        };
        let frame = h.packet_out(&out).expect("fits");
        assert_eq!(frame, vec![0xff, 0x00, 0x05, 0xaa, 0xbb]);
        let back = h.packet_in(&frame).expect("long enough");
        assert_eq!(back.payload, vec![0xaa, 0xbb]);
        let values: Vec<_> = back
            .metadata
            .iter()
            .map(|m| (m.metadata_id, m.value.to_vec()))
            .collect();
        assert_eq!(values, vec![(1, vec![0x01, 0xfe]), (2, vec![0]), (3, vec![5])]);
    }

    #[test]
    fn a_value_wider_than_its_field_or_an_unknown_id_is_refused() {
        let h = header(&[9, 7]);
        let with = |id, value: Vec<u8>| p4rt::PacketOut {
            payload: Default::default(),
            metadata: vec![p4rt::PacketMetadata {
                metadata_id: id,
                value: value.into(),
            }],
        };
        assert!(h.packet_out(&with(1, vec![0x02, 0x00])).is_err());
        assert!(h.packet_out(&with(9, vec![1])).is_err());
        assert!(h.packet_in(&[0]).is_none());
    }
}
