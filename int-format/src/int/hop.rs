//! One hop of INT metadata, and the stack of them (newest first).

use crate::error::{Error, Layer, Result, need};
use crate::field::{set_u16, set_u24, set_u32, set_u64, u16_at, u24_at, u32_at, u64_at};

use super::{DsInstruction, Instruction, Instructions};

const ALL_ONES_32: u32 = u32::MAX;
const ALL_ONES_64: u64 = u64::MAX;
/// Largest queue or buffer occupancy that can be written; all ones means "unavailable".
const MAX_OCCUPANCY: u32 = 0x00ff_fffe;

/// The metadata one node adds. A field is `None` when the frame's instructions do not ask for it
/// (when parsing) or the node does not know it (when emitting; it is written as all ones).
///
/// Units: ports are interface indices, latencies and timestamps ns, occupancies bytes, txBytes
/// bytes, line rate kb/s. Values that do not fit a field saturate below all ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HopRecord {
    /// Bit 0: node ID.
    pub node_id: Option<u32>,
    /// Bit 1: L1 ingress interface ID.
    pub ingress_port: Option<u16>,
    /// Bit 1: L1 egress interface ID.
    pub egress_port: Option<u16>,
    /// Bit 2: time from ingress to egress in ns.
    pub hop_latency: Option<u32>,
    /// Bit 3: queue ID.
    pub queue_id: Option<u8>,
    /// Bit 3: bytes queued at the egress port when the frame left (24 bits).
    pub queue_occupancy: Option<u32>,
    /// Bit 4: ingress timestamp in ns.
    pub ingress_ts: Option<u64>,
    /// Bit 5: egress (departure) timestamp in ns.
    pub egress_ts: Option<u64>,
    /// Bit 6: L2 ingress interface ID.
    pub l2_ingress_port: Option<u32>,
    /// Bit 6: L2 egress interface ID.
    pub l2_egress_port: Option<u32>,
    /// Bit 7: egress Tx utilization (implementation-defined units; intlab writes unavailable).
    pub tx_utilization: Option<u32>,
    /// Bit 8: buffer ID.
    pub buffer_id: Option<u8>,
    /// Bit 8: buffer occupancy in bytes (24 bits).
    pub buffer_occupancy: Option<u32>,
    /// intlab DS bit 0: bytes sent on the egress port before this frame.
    pub tx_bytes: Option<u64>,
    /// intlab DS bit 1: egress line rate in kb/s.
    pub rate_kbps: Option<u32>,
}

impl HopRecord {
    /// Decodes one hop (`b` holds exactly Hop ML × 4 bytes) with the frame's instructions.
    ///
    /// Fields of another domain's DS block are skipped.
    pub fn parse(b: &[u8], ins: &Instructions) -> Result<HopRecord> {
        let standard = ins.standard_len();
        let ds = ins.ds_len();
        need(Layer::IntStack, standard + ds, b.len())?;
        let mut h = HopRecord::default();
        let mut at = 0;
        if ins.has(Instruction::NodeId) {
            h.node_id = Some(u32_at(b, at));
            at += 4;
        }
        if ins.has(Instruction::L1Ports) {
            h.ingress_port = Some(u16_at(b, at));
            h.egress_port = Some(u16_at(b, at + 2));
            at += 4;
        }
        if ins.has(Instruction::HopLatency) {
            h.hop_latency = Some(u32_at(b, at));
            at += 4;
        }
        if ins.has(Instruction::QueueOccupancy) {
            h.queue_id = Some(b[at]);
            h.queue_occupancy = Some(u24_at(b, at + 1));
            at += 4;
        }
        if ins.has(Instruction::IngressTimestamp) {
            h.ingress_ts = Some(u64_at(b, at));
            at += 8;
        }
        if ins.has(Instruction::EgressTimestamp) {
            h.egress_ts = Some(u64_at(b, at));
            at += 8;
        }
        if ins.has(Instruction::L2Ports) {
            h.l2_ingress_port = Some(u32_at(b, at));
            h.l2_egress_port = Some(u32_at(b, at + 4));
            at += 8;
        }
        if ins.has(Instruction::TxUtilization) {
            h.tx_utilization = Some(u32_at(b, at));
            at += 4;
        }
        if ins.has(Instruction::BufferOccupancy) {
            h.buffer_id = Some(b[at]);
            h.buffer_occupancy = Some(u24_at(b, at + 1));
            at += 4;
        }
        // Reserved bits 9-14 carry 4 bytes each of nothing we read.
        at += 4 * (ins.bitmap & 0x007e).count_ones() as usize;
        if ins.has_ds(DsInstruction::TxBytes) {
            h.tx_bytes = Some(u64_at(b, at));
            at += 8;
        }
        if ins.has_ds(DsInstruction::LineRate) {
            h.rate_kbps = Some(u32_at(b, at));
        }
        Ok(h)
    }

    /// Writes this hop with the frame's instructions into `b` (exactly Hop ML × 4 bytes);
    /// unknown fields, reserved bits and the checksum complement are written as all ones.
    pub fn emit(&self, b: &mut [u8], ins: &Instructions) -> Result<()> {
        let len = ins.standard_len() + ins.ds_len();
        if b.len() < len {
            return Err(Error::NoRoom {
                need: len,
                capacity: b.len(),
            });
        }
        let mut at = 0;
        if ins.has(Instruction::NodeId) {
            set_u32(b, at, self.node_id.unwrap_or(ALL_ONES_32));
            at += 4;
        }
        if ins.has(Instruction::L1Ports) {
            set_u16(b, at, self.ingress_port.unwrap_or(u16::MAX));
            set_u16(b, at + 2, self.egress_port.unwrap_or(u16::MAX));
            at += 4;
        }
        if ins.has(Instruction::HopLatency) {
            set_u32(b, at, self.hop_latency.map_or(ALL_ONES_32, |v| v.min(ALL_ONES_32 - 1)));
            at += 4;
        }
        if ins.has(Instruction::QueueOccupancy) {
            b[at] = self.queue_id.unwrap_or(u8::MAX);
            set_u24(
                b,
                at + 1,
                self.queue_occupancy.map_or(0xff_ffff, |v| v.min(MAX_OCCUPANCY)),
            );
            at += 4;
        }
        if ins.has(Instruction::IngressTimestamp) {
            set_u64(b, at, self.ingress_ts.unwrap_or(ALL_ONES_64));
            at += 8;
        }
        if ins.has(Instruction::EgressTimestamp) {
            set_u64(b, at, self.egress_ts.unwrap_or(ALL_ONES_64));
            at += 8;
        }
        if ins.has(Instruction::L2Ports) {
            set_u32(b, at, self.l2_ingress_port.unwrap_or(ALL_ONES_32));
            set_u32(b, at + 4, self.l2_egress_port.unwrap_or(ALL_ONES_32));
            at += 8;
        }
        if ins.has(Instruction::TxUtilization) {
            set_u32(b, at, self.tx_utilization.unwrap_or(ALL_ONES_32));
            at += 4;
        }
        if ins.has(Instruction::BufferOccupancy) {
            b[at] = self.buffer_id.unwrap_or(u8::MAX);
            set_u24(
                b,
                at + 1,
                self.buffer_occupancy.map_or(0xff_ffff, |v| v.min(MAX_OCCUPANCY)),
            );
            at += 4;
        }
        let reserved = 4 * (ins.bitmap & 0x007e).count_ones() as usize;
        b[at..at + reserved].fill(0xff);
        at += reserved;
        if ins.has_ds(DsInstruction::TxBytes) {
            set_u64(b, at, self.tx_bytes.unwrap_or(ALL_ONES_64));
            at += 8;
        }
        if ins.has_ds(DsInstruction::LineRate) {
            set_u32(b, at, self.rate_kbps.unwrap_or(ALL_ONES_32));
            at += 4;
        }
        if ins.has(Instruction::ChecksumComplement) {
            // intlab fixes the UDP checksum itself, so the complement is "unavailable".
            set_u32(b, at, ALL_ONES_32);
        }
        Ok(())
    }
}

/// Iterates over a hop stack, newest hop first.
#[derive(Debug, Clone)]
pub struct HopIter<'a> {
    rest: &'a [u8],
    hop_len: usize,
    instructions: Instructions,
}

impl<'a> HopIter<'a> {
    /// Iterates over `stack`, whose hops are `hop_ml` words each.
    pub fn new(stack: &'a [u8], hop_ml: u8, instructions: Instructions) -> HopIter<'a> {
        HopIter {
            rest: stack,
            hop_len: usize::from(hop_ml) * 4,
            instructions,
        }
    }
}

impl Iterator for HopIter<'_> {
    type Item = Result<HopRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.hop_len == 0 {
            return None;
        }
        if self.rest.len() < self.hop_len {
            let have = self.rest.len();
            self.rest = &[];
            return Some(Err(Error::Truncated {
                layer: Layer::IntStack,
                need: self.hop_len,
                have,
            }));
        }
        let (hop, rest) = self.rest.split_at(self.hop_len);
        self.rest = rest;
        Some(HopRecord::parse(hop, &self.instructions))
    }
}
