//! The decoded form of one frame, as `intlab inspect --json` prints it.

use int_format::ethernet::{EthernetFrame, ethertype};
use int_format::frame::FrameLayout;
use int_format::int::{HopRecord, IntHeaders};
use int_format::ipv4::{Ecn, Ipv4Packet};
use int_format::roce::{
    ATOMIC_ACK_ETH_LEN, Aeth, AtomicAckEth, AtomicEth, Bth, BthRepr, Deth, ImmDt, NakCode, Opcode, Reth, Syndrome,
};
use int_format::udp::UdpPacket;
use serde::Serialize;

use crate::capture::CapturedFrame;

/// Everything decoded from one frame. Layers that are absent are left out of the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct FrameRecord {
    /// Frame number in the file, from 1.
    pub frame: usize,
    /// Capture timestamp in ns.
    pub timestamp_ns: u128,
    /// Interface index.
    pub interface: u32,
    /// Interface name, when the capture gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface_name: Option<String>,
    /// Captured length.
    pub len: usize,
    /// Packet comment (the switch writes drop reasons here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Ethernet header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eth: Option<EthRecord>,
    /// IPv4 header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Record>,
    /// UDP header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpRecord>,
    /// INT shim, MD header and hops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub int: Option<IntRecord>,
    /// RoCEv2 headers and ICRC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roce: Option<RoceRecord>,
    /// Why decoding stopped early, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Ethernet fields.
#[derive(Debug, Clone, Serialize)]
pub struct EthRecord {
    /// Source MAC.
    pub src: String,
    /// Destination MAC.
    pub dst: String,
    /// EtherType.
    pub ethertype: u16,
}

/// IPv4 fields.
#[derive(Debug, Clone, Serialize)]
pub struct Ipv4Record {
    /// Source address.
    pub src: String,
    /// Destination address.
    pub dst: String,
    /// DSCP.
    pub dscp: u8,
    /// ECN codepoint: "Not-ECT", "ECT(1)", "ECT(0)" or "CE".
    pub ecn: &'static str,
    /// Total length.
    pub total_len: u16,
    /// Identification.
    pub ident: u16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol.
    pub protocol: u8,
    /// Header checksum right.
    pub checksum_ok: bool,
}

/// UDP fields.
#[derive(Debug, Clone, Serialize)]
pub struct UdpRecord {
    /// Source port.
    pub src_port: u16,
    /// Destination port as on the wire (the INT port when INT is present).
    pub dst_port: u16,
    /// Length field.
    pub len: u16,
    /// Checksum (0 = none).
    pub checksum: u16,
    /// Checksum absent or right.
    pub checksum_ok: bool,
}

/// INT shim and MD header fields, with every hop.
#[derive(Debug, Clone, Serialize)]
pub struct IntRecord {
    /// Shim type (1 = INT-MD).
    pub int_type: u8,
    /// Next protocol type.
    pub npt: u8,
    /// Shim length in words (MD header + stack).
    pub length_words: u8,
    /// Original UDP destination port (NPT=1).
    pub orig_dst_port: u16,
    /// MD version.
    pub version: u8,
    /// D flag.
    pub discard: bool,
    /// E flag: hop limit exceeded.
    pub hop_limit_exceeded: bool,
    /// M flag: MTU exceeded.
    pub mtu_exceeded: bool,
    /// Hop ML in words.
    pub hop_ml: u8,
    /// Remaining hop count.
    pub remaining_hops: u8,
    /// Instruction bitmap.
    pub instruction_bitmap: u16,
    /// Domain-specific ID.
    pub domain_id: u16,
    /// DS instructions.
    pub ds_instructions: u16,
    /// DS flags.
    pub ds_flags: u16,
    /// Hops, newest first.
    pub hops: Vec<HopJson>,
}

/// One hop; fields the instructions did not ask for are left out.
#[derive(Debug, Clone, Serialize)]
pub struct HopJson {
    /// Node ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u32>,
    /// L1 ingress port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress_port: Option<u16>,
    /// L1 egress port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_port: Option<u16>,
    /// Hop latency, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop_latency: Option<u32>,
    /// Queue ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_id: Option<u8>,
    /// Queue occupancy, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qlen: Option<u32>,
    /// Ingress timestamp, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress_ts: Option<u64>,
    /// Egress timestamp, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
    /// L2 ingress interface.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_ingress_port: Option<u32>,
    /// L2 egress interface.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_egress_port: Option<u32>,
    /// Egress Tx utilization.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_utilization: Option<u32>,
    /// Buffer ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_id: Option<u8>,
    /// Buffer occupancy, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_occupancy: Option<u32>,
    /// Bytes sent on the egress port before this frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    /// Egress line rate, kb/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
}

impl From<HopRecord> for HopJson {
    fn from(h: HopRecord) -> Self {
        HopJson {
            node_id: h.node_id,
            ingress_port: h.ingress_port,
            egress_port: h.egress_port,
            hop_latency: h.hop_latency,
            queue_id: h.queue_id,
            qlen: h.queue_occupancy,
            ingress_ts: h.ingress_ts,
            ts: h.egress_ts,
            l2_ingress_port: h.l2_ingress_port,
            l2_egress_port: h.l2_egress_port,
            tx_utilization: h.tx_utilization,
            buffer_id: h.buffer_id,
            buffer_occupancy: h.buffer_occupancy,
            tx_bytes: h.tx_bytes,
            rate: h.rate_kbps,
        }
    }
}

/// RoCEv2 fields.
#[derive(Debug, Clone, Serialize)]
pub struct RoceRecord {
    /// Opcode name, e.g. "RDMA_WRITE_FIRST".
    pub opcode_name: &'static str,
    /// The BTH's fields (the opcode as its byte).
    #[serde(flatten)]
    pub bth: BthRepr,
    /// DETH, when the opcode carries one (UD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deth: Option<DethRecord>,
    /// RETH, when the opcode carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reth: Option<RethRecord>,
    /// AtomicETH, when the opcode carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic: Option<AtomicRecord>,
    /// AETH, when the opcode carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aeth: Option<AethRecord>,
    /// The original value an ATOMIC ACKNOWLEDGE returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic_orig: Option<u64>,
    /// Immediate data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub immdt: Option<u32>,
    /// Payload bytes (pad excluded).
    pub payload_len: usize,
    /// ICRC check (INT virtually stripped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icrc: Option<IcrcRecord>,
}

/// RETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct RethRecord {
    /// Virtual address.
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

/// DETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct DethRecord {
    /// Queue key.
    pub qkey: u32,
    /// Source QP.
    pub src_qp: u32,
}

/// AtomicETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct AtomicRecord {
    /// Virtual address.
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap or add value.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

/// AETH fields.
#[derive(Debug, Clone, Serialize)]
pub struct AethRecord {
    /// Syndrome byte.
    pub syndrome: u8,
    /// "ACK", "RNR_NAK", "NAK" or "reserved".
    pub kind: &'static str,
    /// NAK code name, for NAKs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nak: Option<&'static str>,
    /// Credit count, for ACKs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credits: Option<u8>,
    /// MSN.
    pub msn: u32,
}

/// The ICRC as stored and as computed.
#[derive(Debug, Clone, Serialize)]
pub struct IcrcRecord {
    /// Stored value (the CRC; on the wire least significant byte first).
    pub stored: u32,
    /// Computed value.
    pub computed: u32,
    /// They agree.
    pub ok: bool,
}

impl FrameRecord {
    /// Decodes a captured frame; decoding stops at the first layer that is broken and says why.
    pub fn decode(number: usize, f: &CapturedFrame, int_port: u16) -> FrameRecord {
        let mut rec = FrameRecord {
            frame: number,
            timestamp_ns: f.timestamp_ns,
            interface: f.interface,
            interface_name: f.interface_name.clone(),
            len: f.data.len(),
            comment: f.comment.clone(),
            eth: None,
            ipv4: None,
            udp: None,
            int: None,
            roce: None,
            error: None,
        };
        if let Err(e) = rec.fill(&f.data, int_port) {
            rec.error = Some(e.to_string());
        }
        rec
    }

    fn fill(&mut self, b: &[u8], int_port: u16) -> Result<(), int_format::Error> {
        let eth = EthernetFrame::new_checked(b)?;
        self.eth = Some(EthRecord {
            src: eth.src_addr().to_string(),
            dst: eth.dst_addr().to_string(),
            ethertype: eth.ethertype(),
        });
        if eth.ethertype() != ethertype::IPV4 {
            return Ok(());
        }
        let ip = Ipv4Packet::new_checked(&b[14..])?;
        self.ipv4 = Some(Ipv4Record {
            src: ip.src_addr().to_string(),
            dst: ip.dst_addr().to_string(),
            dscp: ip.dscp(),
            ecn: ecn_name(ip.ecn()),
            total_len: ip.total_len(),
            ident: ip.ident(),
            ttl: ip.ttl(),
            protocol: ip.protocol(),
            checksum_ok: ip.verify_checksum(),
        });
        if ip.protocol() != int_format::ipv4::PROTOCOL_UDP {
            return Ok(());
        }
        let udp_at = 14 + ip.header_len();
        let udp = UdpPacket::new_checked(&b[udp_at..14 + usize::from(ip.total_len())])?;
        self.udp = Some(UdpRecord {
            src_port: udp.src_port(),
            dst_port: udp.dst_port(),
            len: udp.len(),
            checksum: udp.checksum(),
            checksum_ok: udp.verify_checksum(ip.src_addr(), ip.dst_addr()),
        });
        let layout = FrameLayout::parse(b, int_port)?;
        if let Some(int) = layout.int(b) {
            self.int = Some(int_record(&int?)?);
        }
        if layout.is_roce() {
            self.roce = Some(roce_record(b, &layout)?);
        }
        Ok(())
    }
}

fn int_record(int: &IntHeaders<'_>) -> Result<IntRecord, int_format::Error> {
    Ok(IntRecord {
        int_type: int.shim.int_type.bits(),
        npt: int.shim.npt,
        length_words: int.shim.length_words,
        orig_dst_port: int.shim.next_field,
        version: int_format::int::IntMdRepr::VERSION,
        discard: int.md.discard,
        hop_limit_exceeded: int.md.hop_limit_exceeded,
        mtu_exceeded: int.md.mtu_exceeded,
        hop_ml: int.md.hop_ml,
        remaining_hops: int.md.remaining_hops,
        instruction_bitmap: int.md.instructions.bitmap,
        domain_id: int.md.instructions.domain_id,
        ds_instructions: int.md.instructions.ds_instructions,
        ds_flags: int.md.ds_flags,
        hops: int.hops().map(|h| h.map(HopJson::from)).collect::<Result<_, _>>()?,
    })
}

fn roce_record(b: &[u8], layout: &FrameLayout) -> Result<RoceRecord, int_format::Error> {
    let r = layout.roce(b)?;
    let bth = BthRepr::parse(&Bth::new_checked(&b[r.bth..])?)?;
    let op = bth.opcode;
    let mut at = r.ext;
    let deth = if op.has_deth() {
        let v = Deth::new_checked(&b[at..])?;
        at += Deth::<&[u8]>::LEN;
        Some(DethRecord {
            qkey: v.qkey(),
            src_qp: v.src_qp(),
        })
    } else {
        None
    };
    let reth = if op.has_reth() {
        let v = Reth::new_checked(&b[at..])?;
        at += Reth::<&[u8]>::LEN;
        Some(RethRecord {
            virtual_addr: v.virtual_addr(),
            rkey: v.rkey(),
            dma_len: v.dma_len(),
        })
    } else {
        None
    };
    let atomic = if op.has_atomic_eth() {
        let v = AtomicEth::new_checked(&b[at..])?;
        at += AtomicEth::<&[u8]>::LEN;
        Some(AtomicRecord {
            virtual_addr: v.virtual_addr(),
            rkey: v.rkey(),
            swap_add: v.swap_add(),
            compare: v.compare(),
        })
    } else {
        None
    };
    let aeth = if op.has_aeth() {
        let v = Aeth::new_checked(&b[at..])?;
        at += Aeth::<&[u8]>::LEN;
        Some(aeth_record(v.syndrome_byte(), v.msn()))
    } else {
        None
    };
    let atomic_orig = if op.has_atomic_ack_eth() {
        let v = AtomicAckEth::parse(&b[at..])?;
        at += ATOMIC_ACK_ETH_LEN;
        Some(v.0)
    } else {
        None
    };
    let immdt = if op.has_immdt() {
        Some(ImmDt::parse(&b[at..])?.0)
    } else {
        None
    };
    let icrc = layout.icrc(b).ok().map(|c| IcrcRecord {
        stored: c.stored,
        computed: c.computed,
        ok: c.is_ok(),
    });
    Ok(RoceRecord {
        opcode_name: opcode_name(op),
        bth,
        deth,
        reth,
        atomic,
        aeth,
        atomic_orig,
        immdt,
        payload_len: r.payload_len,
        icrc,
    })
}

fn aeth_record(syndrome: u8, msn: u32) -> AethRecord {
    let (kind, nak, credits) = match Syndrome::from_u8(syndrome) {
        Ok(Syndrome::Ack { credits }) => ("ACK", None, Some(credits)),
        Ok(Syndrome::RnrNak { .. }) => ("RNR_NAK", None, None),
        Ok(Syndrome::Nak(code)) => ("NAK", Some(nak_name(code)), None),
        Err(_) => ("reserved", None, None),
    };
    AethRecord {
        syndrome,
        kind,
        nak,
        credits,
        msn,
    }
}

fn nak_name(code: NakCode) -> &'static str {
    match code {
        NakCode::PsnSequenceError => "PSN_SEQUENCE_ERROR",
        NakCode::InvalidRequest => "INVALID_REQUEST",
        NakCode::RemoteAccessError => "REMOTE_ACCESS_ERROR",
        NakCode::RemoteOperationalError => "REMOTE_OPERATIONAL_ERROR",
        NakCode::InvalidRdRequest => "INVALID_RD_REQUEST",
    }
}

/// The RC opcode names used by the InfiniBand specification (and Wireshark).
pub(crate) fn opcode_name(op: Opcode) -> &'static str {
    match op {
        Opcode::SendFirst => "SEND_FIRST",
        Opcode::SendMiddle => "SEND_MIDDLE",
        Opcode::SendLast => "SEND_LAST",
        Opcode::SendLastImm => "SEND_LAST_WITH_IMMEDIATE",
        Opcode::SendOnly => "SEND_ONLY",
        Opcode::SendOnlyImm => "SEND_ONLY_WITH_IMMEDIATE",
        Opcode::WriteFirst => "RDMA_WRITE_FIRST",
        Opcode::WriteMiddle => "RDMA_WRITE_MIDDLE",
        Opcode::WriteLast => "RDMA_WRITE_LAST",
        Opcode::WriteLastImm => "RDMA_WRITE_LAST_WITH_IMMEDIATE",
        Opcode::WriteOnly => "RDMA_WRITE_ONLY",
        Opcode::WriteOnlyImm => "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        Opcode::ReadRequest => "RDMA_READ_REQUEST",
        Opcode::ReadResponseFirst => "RDMA_READ_RESPONSE_FIRST",
        Opcode::ReadResponseMiddle => "RDMA_READ_RESPONSE_MIDDLE",
        Opcode::ReadResponseLast => "RDMA_READ_RESPONSE_LAST",
        Opcode::ReadResponseOnly => "RDMA_READ_RESPONSE_ONLY",
        Opcode::Acknowledge => "ACKNOWLEDGE",
        Opcode::AtomicAcknowledge => "ATOMIC_ACKNOWLEDGE",
        Opcode::CompareSwap => "COMPARE_SWAP",
        Opcode::FetchAdd => "FETCH_ADD",
        Opcode::UdSendOnly => "UD_SEND_ONLY",
        Opcode::UdSendOnlyImm => "UD_SEND_ONLY_WITH_IMMEDIATE",
        Opcode::Cnp => "CNP",
        Opcode::Other(_) => "UNKNOWN",
    }
}

pub(crate) fn ecn_name(e: Ecn) -> &'static str {
    match e {
        Ecn::NotEct => "Not-ECT",
        Ecn::Ect1 => "ECT(1)",
        Ecn::Ect0 => "ECT(0)",
        Ecn::Ce => "CE",
    }
}
