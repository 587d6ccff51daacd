//! Work requests a QP is given and the work completions it gives back, with the numbers the
//! verbs API uses (libibverbs' `enum ibv_wc_status`, `ibv_wc_opcode`), so that a program's
//! completion carries the value the specification names.

use std::net::Ipv4Addr;

/// Scatter/gather entries a work request may carry at most (the device's `max_sge`).
pub const MAX_SGE: usize = 8;

/// Bytes of inline data a send request may carry at most (the device's `max_inline_data`).
pub const MAX_INLINE: usize = 256;

/// One piece of registered memory a work request reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Start address in the owner's memory.
    pub addr: u64,
    /// Bytes.
    pub length: u64,
    /// Local key of the memory region it lies in.
    pub lkey: u32,
}

/// A list of up to [`MAX_SGE`] scatter/gather entries, kept in place (no allocation per work
/// request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SgeList {
    entries: [Sge; MAX_SGE],
    len: usize,
}

impl SgeList {
    /// A list of `sges`; None when there are more than [`MAX_SGE`].
    pub fn new(sges: &[Sge]) -> Option<SgeList> {
        if sges.len() > MAX_SGE {
            return None;
        }
        let mut l = SgeList::default();
        l.entries[..sges.len()].copy_from_slice(sges);
        l.len = sges.len();
        Some(l)
    }

    /// A list of one entry.
    pub fn one(sge: Sge) -> SgeList {
        let mut l = SgeList::default();
        l.entries[0] = sge;
        l.len = 1;
        l
    }

    /// The entries.
    pub fn as_slice(&self) -> &[Sge] {
        &self.entries[..self.len]
    }

    /// Bytes in all (saturating: a list is at most 8 entries of 2^64).
    pub fn total(&self) -> u64 {
        self.as_slice().iter().fold(0u64, |a, s| a.saturating_add(s.length))
    }
}

/// What a send work request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOpcode {
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate (consumes a receive request at the far end).
    WriteImm,
    /// SEND.
    Send,
    /// SEND with immediate.
    SendImm,
    /// RDMA READ.
    Read,
    /// Atomic compare-and-swap of 8 bytes.
    CompareSwap,
    /// Atomic fetch-and-add of 8 bytes.
    FetchAdd,
}

impl SendOpcode {
    /// True for READ and the atomics: operations whose answer carries data back.
    pub fn is_read_or_atomic(self) -> bool {
        matches!(self, SendOpcode::Read | SendOpcode::CompareSwap | SendOpcode::FetchAdd)
    }

    /// True for the atomics.
    pub fn is_atomic(self) -> bool {
        matches!(self, SendOpcode::CompareSwap | SendOpcode::FetchAdd)
    }

    /// The completion opcode of a request of this kind.
    pub fn completion(self) -> WcOpcode {
        match self {
            SendOpcode::Write | SendOpcode::WriteImm => WcOpcode::RdmaWrite,
            SendOpcode::Send | SendOpcode::SendImm => WcOpcode::Send,
            SendOpcode::Read => WcOpcode::RdmaRead,
            SendOpcode::CompareSwap => WcOpcode::CompSwap,
            SendOpcode::FetchAdd => WcOpcode::FetchAdd,
        }
    }
}

/// Where a UD send goes (what the program's address handle and request name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// The destination host's address (its GID, an IPv4-mapped IPv6 address).
    pub addr: Ipv4Addr,
    /// The destination QP.
    pub qpn: u32,
    /// The queue key (one with the high bit set means the sending QP's own).
    pub qkey: u32,
}

/// A send work request, as posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    /// The program's identifier, returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub opcode: SendOpcode,
    /// A completion is wanted even when the QP signals only on request.
    pub signaled: bool,
    /// Wait for every earlier READ and atomic to complete before starting.
    pub fence: bool,
    /// Set the solicited event bit on the last packet.
    pub solicited: bool,
    /// Local memory: the data to send, or where a READ's data or an atomic's old value lands.
    pub sges: SgeList,
    /// Inline data (instead of `sges`), copied when posted.
    pub inline: Option<InlineData>,
    /// Immediate data (the *_IMM opcodes), in network byte order as a number.
    pub imm: u32,
    /// Remote address (WRITE, READ, atomics).
    pub remote_addr: u64,
    /// Remote key (WRITE, READ, atomics).
    pub rkey: u32,
    /// Compare value (compare-and-swap) or addend (fetch-and-add).
    pub compare_add: u64,
    /// Swap value (compare-and-swap).
    pub swap: u64,
    /// Destination of a UD send.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A request of `opcode` over `sges` with every other field zero.
    pub fn new(wr_id: u64, opcode: SendOpcode, sges: SgeList) -> SendWr {
        SendWr {
            wr_id,
            opcode,
            signaled: true,
            fence: false,
            solicited: false,
            sges,
            inline: None,
            imm: 0,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            ud: None,
        }
    }

    /// Bytes the request moves: its inline data or its entries' total.
    pub fn length(&self) -> u64 {
        match &self.inline {
            Some(d) => d.len() as u64,
            None => self.sges.total(),
        }
    }
}

/// Up to [`MAX_INLINE`] bytes carried in a work request itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct InlineData {
    bytes: [u8; MAX_INLINE],
    len: usize,
}

impl std::fmt::Debug for InlineData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InlineData({} bytes)", self.len)
    }
}

impl InlineData {
    /// A copy of `data`; None when it is longer than [`MAX_INLINE`].
    pub fn new(data: &[u8]) -> Option<InlineData> {
        if data.len() > MAX_INLINE {
            return None;
        }
        let mut d = InlineData {
            bytes: [0; MAX_INLINE],
            len: data.len(),
        };
        d.bytes[..data.len()].copy_from_slice(data);
        Some(d)
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A receive work request, as posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    /// The program's identifier, returned in the completion.
    pub wr_id: u64,
    /// Where received data lands.
    pub sges: SgeList,
}

/// The status of a work completion (`enum ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum WcStatus {
    /// Done.
    Success = 0,
    /// A received message was longer than the receive buffer, or a local length error.
    LocLenErr = 1,
    /// An inconsistency in a work request (bad opcode for the QP, ...).
    LocQpOpErr = 2,
    /// A local key or range that no memory region allowed.
    LocProtErr = 4,
    /// The QP was in the error state: the request was never carried out.
    WrFlushErr = 5,
    /// An unexpected answer from the far end.
    BadRespErr = 7,
    /// A local memory access failed.
    LocAccessErr = 8,
    /// The far end refused the request as invalid (an opcode its QP does not allow, a length).
    RemInvReqErr = 9,
    /// The far end refused access (bad rkey, range, or rights).
    RemAccessErr = 10,
    /// The far end could not carry the request out.
    RemOpErr = 11,
    /// No answer after the QP's retries (`retry_cnt`).
    RetryExcErr = 12,
    /// The far end stayed not ready after `rnr_retry` tries.
    RnrRetryExcErr = 13,
    /// A fatal error of the device.
    FatalErr = 19,
    /// Any other error.
    GeneralErr = 21,
}

/// The operation a work completion is for (`enum ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum WcOpcode {
    /// A SEND.
    Send = 0,
    /// An RDMA WRITE.
    RdmaWrite = 1,
    /// An RDMA READ.
    RdmaRead = 2,
    /// A compare-and-swap.
    CompSwap = 3,
    /// A fetch-and-add.
    FetchAdd = 4,
    /// A received SEND.
    Recv = 128,
    /// A received RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
}

/// A work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The request's identifier.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What it was.
    pub opcode: WcOpcode,
    /// Bytes received (receives), or moved (sends, for programs that look).
    pub byte_len: u32,
    /// Immediate data received, in network byte order as a number.
    pub imm: Option<u32>,
    /// The local QP.
    pub qp_num: u32,
    /// The sending QP (UD receives).
    pub src_qp: u32,
    /// A GRH is at the front of the receive buffer (UD receives).
    pub grh: bool,
    /// It came with the solicited event bit (what a completion channel armed for solicited
    /// events waits for).
    pub solicited: bool,
}

impl WorkCompletion {
    /// A completion of `wr_id` with `status` and `opcode` and nothing else.
    pub fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            imm: None,
            qp_num,
            src_qp: 0,
            grh: false,
            solicited: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_inline_data_hold_what_the_device_allows() {
        let s = Sge {
            addr: 1,
            length: 10,
            lkey: 2,
        };
        assert_eq!(SgeList::new(&[s; MAX_SGE]).map(|l| l.total()), Some(80));
        assert!(SgeList::new(&[s; MAX_SGE + 1]).is_none());
        assert_eq!(InlineData::new(&[7; MAX_INLINE]).map(|d| d.len()), Some(MAX_INLINE));
        assert!(InlineData::new(&[7; MAX_INLINE + 1]).is_none());
        let mut wr = SendWr::new(1, SendOpcode::Send, SgeList::one(s));
        assert_eq!(wr.length(), 10);
        wr.inline = InlineData::new(b"abc");
        assert_eq!(wr.length(), 3);
        assert_eq!(SendOpcode::WriteImm.completion(), WcOpcode::RdmaWrite);
        assert_eq!(WcStatus::RetryExcErr as u32, 12);
    }
}
