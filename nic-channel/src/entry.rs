//! The entries of the shared queues: send and receive requests (program → NIC) and
//! completions (NIC → program), each of a fixed size, little-endian. A request the NIC reads
//! is checked field by field: an opcode, a count or a length out of range is refused, and the
//! NIC completes the request with an error rather than act on it.

use crate::wire::{DecodeError, Reader, Writer};

/// Bytes of a send request entry.
pub const SEND_WQE_LEN: usize = 512;
/// Bytes of a receive request entry.
pub const RECV_WQE_LEN: usize = 160;
/// Bytes of a completion entry.
pub const CQE_LEN: usize = 64;
/// Scatter/gather entries per request.
pub const MAX_SGE: usize = 8;
/// Inline bytes per send request.
pub const MAX_INLINE: usize = 256;

/// A scatter/gather entry (`struct ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Address in the program.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// What a send request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SendOp {
    /// RDMA WRITE.
    Write = 0,
    /// RDMA WRITE with immediate.
    WriteImm = 1,
    /// SEND.
    Send = 2,
    /// SEND with immediate.
    SendImm = 3,
    /// RDMA READ.
    Read = 4,
    /// Atomic compare-and-swap.
    CompareSwap = 5,
    /// Atomic fetch-and-add.
    FetchAdd = 6,
}

impl SendOp {
    fn from_u8(v: u8) -> Option<SendOp> {
        Some(match v {
            0 => SendOp::Write,
            1 => SendOp::WriteImm,
            2 => SendOp::Send,
            3 => SendOp::SendImm,
            4 => SendOp::Read,
            5 => SendOp::CompareSwap,
            6 => SendOp::FetchAdd,
            _ => return None,
        })
    }
}

/// Where a UD send goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdAddr {
    /// The destination's IPv4 address.
    pub addr: [u8; 4],
    /// The destination QP.
    pub qpn: u32,
    /// The queue key.
    pub qkey: u32,
}

/// A send request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendEntry {
    /// The program's identifier.
    pub wr_id: u64,
    /// What it asks.
    pub op: SendOp,
    /// A completion is wanted.
    pub signaled: bool,
    /// Wait for earlier READs and atomics.
    pub fence: bool,
    /// Solicited event at the far end.
    pub solicited: bool,
    /// Scatter/gather entries (`num_sge` of them are used).
    pub sges: [Sge; MAX_SGE],
    /// Entries used.
    pub num_sge: u8,
    /// Inline data (instead of the entries): its bytes and their count.
    pub inline: Option<([u8; MAX_INLINE], u16)>,
    /// Immediate data, in network byte order as a number.
    pub imm: u32,
    /// Remote address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Compare value or addend.
    pub compare_add: u64,
    /// Swap value.
    pub swap: u64,
    /// Destination of a UD send.
    pub ud: Option<UdAddr>,
}

mod flag {
    pub(super) const SIGNALED: u8 = 1;
    pub(super) const FENCE: u8 = 2;
    pub(super) const SOLICITED: u8 = 4;
    pub(super) const INLINE: u8 = 8;
    pub(super) const UD: u8 = 16;
}

fn read_sges(r: &mut Reader<'_>) -> Result<[Sge; MAX_SGE], DecodeError> {
    let mut sges = [Sge::default(); MAX_SGE];
    for s in &mut sges {
        *s = Sge {
            addr: r.u64()?,
            length: r.u32()?,
            lkey: r.u32()?,
        };
    }
    Ok(sges)
}

fn write_sges(w: &mut Writer<'_>, sges: &[Sge; MAX_SGE]) {
    for s in sges {
        w.u64(s.addr).u32(s.length).u32(s.lkey);
    }
}

impl SendEntry {
    /// Writes the entry into `out` ([`SEND_WQE_LEN`] bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        let mut w = Writer { out };
        let flags = [
            (self.signaled, flag::SIGNALED),
            (self.fence, flag::FENCE),
            (self.solicited, flag::SOLICITED),
            (self.inline.is_some(), flag::INLINE),
            (self.ud.is_some(), flag::UD),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |f, (_, bit)| f | bit);
        let inline_len = self.inline.map_or(0, |(_, n)| n);
        let ud = self.ud.unwrap_or(UdAddr {
            addr: [0; 4],
            qpn: 0,
            qkey: 0,
        });
        w.u64(self.wr_id)
            .u8(self.op as u8)
            .u8(flags)
            .u8(self.num_sge)
            .u8(0)
            .u16(inline_len)
            .u16(0)
            .u32(self.imm)
            .u32(self.rkey)
            .u64(self.remote_addr)
            .u64(self.compare_add)
            .u64(self.swap)
            .bytes(&ud.addr)
            .u32(ud.qpn)
            .u32(ud.qkey)
            .u32(0);
        write_sges(&mut w, &self.sges);
        match &self.inline {
            Some((bytes, _)) => w.bytes(bytes),
            None => w.zeros(MAX_INLINE),
        };
        w.zeros(SEND_WQE_LEN - w.out.len());
    }

    /// Reads an entry the program wrote.
    pub fn decode(b: &[u8]) -> Result<SendEntry, DecodeError> {
        let mut r = Reader::new(b, "send request");
        let wr_id = r.u64()?;
        let op_byte = r.u8()?;
        let op = SendOp::from_u8(op_byte).ok_or(DecodeError::Range {
            what: "send opcode",
            value: op_byte.into(),
        })?;
        let flags = r.u8()?;
        let num_sge = r.u8()?;
        if usize::from(num_sge) > MAX_SGE {
            return Err(DecodeError::Range {
                what: "scatter/gather entries",
                value: num_sge.into(),
            });
        }
        r.skip(1)?;
        let inline_len = r.u16()?;
        if usize::from(inline_len) > MAX_INLINE {
            return Err(DecodeError::Range {
                what: "inline bytes",
                value: inline_len.into(),
            });
        }
        r.skip(2)?;
        let imm = r.u32()?;
        let rkey = r.u32()?;
        let remote_addr = r.u64()?;
        let compare_add = r.u64()?;
        let swap = r.u64()?;
        let addr = r.bytes::<4>()?;
        let qpn = r.u32()?;
        let qkey = r.u32()?;
        r.skip(4)?;
        let sges = read_sges(&mut r)?;
        let bytes = r.bytes::<MAX_INLINE>()?;
        Ok(SendEntry {
            wr_id,
            op,
            signaled: flags & flag::SIGNALED != 0,
            fence: flags & flag::FENCE != 0,
            solicited: flags & flag::SOLICITED != 0,
            sges,
            num_sge,
            inline: (flags & flag::INLINE != 0).then_some((bytes, inline_len)),
            imm,
            remote_addr,
            rkey,
            compare_add,
            swap,
            ud: (flags & flag::UD != 0).then_some(UdAddr { addr, qpn, qkey }),
        })
    }
}

/// A receive request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvEntry {
    /// The program's identifier.
    pub wr_id: u64,
    /// Scatter/gather entries (`num_sge` of them are used).
    pub sges: [Sge; MAX_SGE],
    /// Entries used.
    pub num_sge: u8,
}

impl RecvEntry {
    /// Writes the entry into `out` ([`RECV_WQE_LEN`] bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        let mut w = Writer { out };
        w.u64(self.wr_id).u32(u32::from(self.num_sge)).u32(0);
        write_sges(&mut w, &self.sges);
        w.zeros(RECV_WQE_LEN - w.out.len());
    }

    /// Reads an entry the program wrote.
    pub fn decode(b: &[u8]) -> Result<RecvEntry, DecodeError> {
        let mut r = Reader::new(b, "receive request");
        let wr_id = r.u64()?;
        let num_sge = r.u32()?;
        if num_sge as usize > MAX_SGE {
            return Err(DecodeError::Range {
                what: "scatter/gather entries",
                value: num_sge.into(),
            });
        }
        r.skip(4)?;
        Ok(RecvEntry {
            wr_id,
            sges: read_sges(&mut r)?,
            num_sge: num_sge as u8,
        })
    }
}

/// A completion, with the fields of `struct ibv_wc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cqe {
    /// The request's identifier.
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    /// Vendor error.
    pub vendor_err: u32,
    /// Bytes.
    pub byte_len: u32,
    /// Immediate data as the program reads `imm_data` (network byte order in memory).
    pub imm_data: u32,
    /// The local QP.
    pub qp_num: u32,
    /// The source QP (UD).
    pub src_qp: u32,
    /// `enum ibv_wc_flags`.
    pub wc_flags: u32,
    /// Partition key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
}

impl Cqe {
    /// Writes the entry into `out` ([`CQE_LEN`] bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        let mut w = Writer { out };
        w.u64(self.wr_id)
            .u32(self.status)
            .u32(self.opcode)
            .u32(self.vendor_err)
            .u32(self.byte_len)
            .u32(self.imm_data)
            .u32(self.qp_num)
            .u32(self.src_qp)
            .u32(self.wc_flags)
            .u16(self.pkey_index)
            .u16(self.slid)
            .u8(self.sl)
            .u8(self.dlid_path_bits);
        w.zeros(CQE_LEN - w.out.len());
    }

    /// Reads an entry the NIC wrote.
    pub fn decode(b: &[u8]) -> Result<Cqe, DecodeError> {
        let mut r = Reader::new(b, "completion");
        Ok(Cqe {
            wr_id: r.u64()?,
            status: r.u32()?,
            opcode: r.u32()?,
            vendor_err: r.u32()?,
            byte_len: r.u32()?,
            imm_data: r.u32()?,
            qp_num: r.u32()?,
            src_qp: r.u32()?,
            wc_flags: r.u32()?,
            pkey_index: r.u16()?,
            slid: r.u16()?,
            sl: r.u8()?,
            dlid_path_bits: r.u8()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_at_their_fixed_sizes() {
        let mut inline = [0u8; MAX_INLINE];
        inline[..3].copy_from_slice(b"abc");
        let mut sges = [Sge::default(); MAX_SGE];
        sges[0] = Sge {
            addr: 0x1000,
            length: 64,
            lkey: 0x8000_0101,
        };
        let s = SendEntry {
            wr_id: 7,
            op: SendOp::WriteImm,
            signaled: true,
            fence: false,
            solicited: true,
            sges,
            num_sge: 1,
            inline: Some((inline, 3)),
            imm: 0x1234,
            remote_addr: 0x7f00,
            rkey: 9,
            compare_add: 1,
            swap: 2,
            ud: Some(UdAddr {
                addr: [198, 18, 0, 2],
                qpn: 0x80_0001,
                qkey: 0x1111,
            }),
        };
        let mut b = Vec::new();
        s.encode(&mut b);
        assert_eq!(b.len(), SEND_WQE_LEN);
        assert_eq!(SendEntry::decode(&b).expect("decodes"), s);
        let r = RecvEntry {
            wr_id: 3,
            sges,
            num_sge: 1,
        };
        r.encode(&mut b);
        assert_eq!(b.len(), RECV_WQE_LEN);
        assert_eq!(RecvEntry::decode(&b).expect("decodes"), r);
        let c = Cqe {
            wr_id: 1,
            status: 12,
            opcode: 128,
            byte_len: 40,
            src_qp: 5,
            wc_flags: 1,
            ..Cqe::default()
        };
        c.encode(&mut b);
        assert_eq!(b.len(), CQE_LEN);
        assert_eq!(Cqe::decode(&b).expect("decodes"), c);
    }

    #[test]
    fn a_request_out_of_range_is_refused() {
        let mut b = vec![0u8; SEND_WQE_LEN];
        b[8] = 7;
        assert!(SendEntry::decode(&b).is_err(), "opcode 7");
        b[8] = 0;
        b[10] = 9;
        assert!(SendEntry::decode(&b).is_err(), "9 entries");
        b[10] = 0;
        b[12..14].copy_from_slice(&257u16.to_le_bytes());
        assert!(SendEntry::decode(&b).is_err(), "257 inline bytes");
        let mut r = vec![0u8; RECV_WQE_LEN];
        r[8] = 9;
        assert!(RecvEntry::decode(&r).is_err());
        assert!(SendEntry::decode(&b[..100]).is_err());
    }
}
