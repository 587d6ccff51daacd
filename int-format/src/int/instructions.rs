//! The instruction bitmap and domain-specific instructions: which fields each hop carries.

use crate::error::{Error, Layer, Result};

use super::INTLAB_DOMAIN_ID;

/// One bit of the INT v2.1 instruction bitmap (bit 0 is the most significant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Instruction {
    /// Bit 0: node ID (4 bytes).
    NodeId = 0,
    /// Bit 1: L1 ingress and egress interface IDs (2 + 2 bytes).
    L1Ports = 1,
    /// Bit 2: hop latency in ns (4 bytes).
    HopLatency = 2,
    /// Bit 3: queue ID (1 byte) and queue occupancy in bytes (3 bytes).
    QueueOccupancy = 3,
    /// Bit 4: ingress timestamp in ns (8 bytes).
    IngressTimestamp = 4,
    /// Bit 5: egress timestamp in ns (8 bytes).
    EgressTimestamp = 5,
    /// Bit 6: L2 ingress and egress interface IDs (4 + 4 bytes).
    L2Ports = 6,
    /// Bit 7: egress interface Tx utilization (4 bytes).
    TxUtilization = 7,
    /// Bit 8: buffer ID (1 byte) and buffer occupancy (3 bytes).
    BufferOccupancy = 8,
    /// Bit 15: checksum complement (4 bytes, always the last field of a hop).
    ChecksumComplement = 15,
}

impl Instruction {
    /// The bit's mask in the 16-bit bitmap.
    pub const fn mask(self) -> u16 {
        0x8000 >> (self as u8)
    }
}

/// One bit of intlab's domain-specific instructions (domain [`INTLAB_DOMAIN_ID`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum DsInstruction {
    /// DS bit 0: cumulative bytes transmitted on the egress port before this frame (8 bytes).
    TxBytes = 0,
    /// DS bit 1: egress line rate in kb/s (4 bytes).
    LineRate = 1,
}

impl DsInstruction {
    /// The bit's mask in the 16-bit DS instruction field.
    pub const fn mask(self) -> u16 {
        0x8000 >> (self as u8)
    }
}

/// The per-hop field selection of a frame: bitmap, domain ID and DS instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instructions {
    /// INT v2.1 instruction bitmap.
    pub bitmap: u16,
    /// Domain-specific ID (0 = none).
    pub domain_id: u16,
    /// Domain-specific instructions (meaningful for [`INTLAB_DOMAIN_ID`] only).
    pub ds_instructions: u16,
}

/// Bytes per hop of each standard bit, in bit order; reserved bits 9 to 14 take 4 bytes each.
const FIELD_LEN: [usize; 16] = [4, 4, 4, 4, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4];

impl Instructions {
    /// What HPCC needs: queue occupancy, egress timestamp, txBytes and line rate (24 bytes a hop).
    pub const HPCC: Instructions = Instructions {
        bitmap: Instruction::QueueOccupancy.mask() | Instruction::EgressTimestamp.mask(),
        domain_id: INTLAB_DOMAIN_ID,
        ds_instructions: DsInstruction::TxBytes.mask() | DsInstruction::LineRate.mask(),
    };

    /// Everything the intlab switch knows: bits 0, 1, 2, 3, 5 and both DS fields (36 bytes a hop).
    pub const FULL: Instructions = Instructions {
        bitmap: Instruction::NodeId.mask()
            | Instruction::L1Ports.mask()
            | Instruction::HopLatency.mask()
            | Instruction::QueueOccupancy.mask()
            | Instruction::EgressTimestamp.mask(),
        domain_id: INTLAB_DOMAIN_ID,
        ds_instructions: DsInstruction::TxBytes.mask() | DsInstruction::LineRate.mask(),
    };

    /// True when bit `i` is requested.
    pub fn has(&self, i: Instruction) -> bool {
        self.bitmap & i.mask() != 0
    }

    /// True when DS bit `i` is requested and the domain is intlab's.
    pub fn has_ds(&self, i: DsInstruction) -> bool {
        self.domain_id == INTLAB_DOMAIN_ID && self.ds_instructions & i.mask() != 0
    }

    /// Bytes of the standard (bitmap) fields of one hop, checksum complement included.
    pub fn standard_len(&self) -> usize {
        (0..16)
            .filter(|b| self.bitmap & (0x8000 >> b) != 0)
            .map(|b| FIELD_LEN[b])
            .sum()
    }

    /// Bytes of intlab's domain-specific fields of one hop (zero in another domain).
    pub fn ds_len(&self) -> usize {
        let mut n = 0;
        if self.has_ds(DsInstruction::TxBytes) {
            n += 8;
        }
        if self.has_ds(DsInstruction::LineRate) {
            n += 4;
        }
        n
    }

    /// Hop ML: the length of one hop in 4-byte words.
    pub fn hop_words(&self) -> Result<u8> {
        let words = (self.standard_len() + self.ds_len()) / 4;
        u8::try_from(words).ok().filter(|&w| w <= 31).ok_or(Error::Malformed {
            layer: Layer::IntMd,
            what: "hop metadata longer than 31 words",
        })
    }

    /// Checks the selection is one a source may send: intlab DS bits other than 0 and 1 are
    /// undefined, and a hop must not exceed 31 words.
    pub fn validate(&self) -> Result<()> {
        if self.domain_id == INTLAB_DOMAIN_ID && self.ds_instructions & 0x3fff != 0 {
            return Err(Error::Malformed {
                layer: Layer::IntMd,
                what: "undefined intlab DS instruction bit",
            });
        }
        self.hop_words().map(|_| ())
    }
}
