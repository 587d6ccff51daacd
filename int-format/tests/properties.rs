//! Property tests: emit then parse gives the same values; arbitrary bytes never panic.

use std::net::Ipv4Addr;

use int_format::ethernet::{EthernetFrame, EthernetRepr, MacAddress};
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{HopRecord, Instructions, IntHeaders, IntMdHeader, IntMdRepr, IntShim, IntShimRepr, IntType};
use int_format::ipv4::{Ecn, Ipv4Packet, Ipv4Repr};
use int_format::roce::{
    Aeth, AethRepr, AtomicAckEth, AtomicEthRepr, Bth, BthRepr, DethRepr, ImmDt, NakCode, Opcode, Reth, RethRepr,
    Syndrome, icrc,
};
use int_format::roles::{sink, source, transit};
use int_format::udp::{UdpPacket, UdpRepr};
use proptest::prelude::*;

fn ecn() -> impl Strategy<Value = Ecn> {
    prop_oneof![Just(Ecn::NotEct), Just(Ecn::Ect1), Just(Ecn::Ect0), Just(Ecn::Ce)]
}

fn mac() -> impl Strategy<Value = MacAddress> {
    any::<[u8; 6]>().prop_map(MacAddress)
}

fn ipv4_repr() -> impl Strategy<Value = Ipv4Repr> {
    (
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
        any::<u8>(),
        0usize..1500,
        any::<u8>(),
        0u8..64,
        ecn(),
        any::<u16>(),
        any::<bool>(),
    )
        .prop_map(
            |(s, d, protocol, payload_len, ttl, dscp, ecn, ident, dont_frag)| Ipv4Repr {
                src: Ipv4Addr::from(s),
                dst: Ipv4Addr::from(d),
                protocol,
                payload_len,
                ttl,
                dscp,
                ecn,
                ident,
                dont_frag,
            },
        )
}

fn opcode() -> impl Strategy<Value = Opcode> {
    prop_oneof![
        (0u8..=0x0c).prop_map(Opcode::from_u8),
        Just(Opcode::Acknowledge),
        Just(Opcode::Cnp)
    ]
}

fn bth_repr() -> impl Strategy<Value = BthRepr> {
    (
        opcode(),
        any::<bool>(),
        any::<bool>(),
        0u8..4,
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        0u32..1 << 24,
        any::<bool>(),
        0u32..1 << 24,
    )
        .prop_map(
            |(opcode, solicited, migreq, pad_count, pkey, fecn, becn, dest_qp, ack_req, psn)| BthRepr {
                opcode,
                solicited,
                migreq,
                pad_count,
                tver: 0,
                pkey,
                fecn,
                becn,
                dest_qp,
                ack_req,
                psn,
            },
        )
}

fn syndrome() -> impl Strategy<Value = Syndrome> {
    prop_oneof![
        (0u8..32).prop_map(|credits| Syndrome::Ack { credits }),
        (0u8..32).prop_map(|timer| Syndrome::RnrNak { timer }),
        prop_oneof![
            Just(NakCode::PsnSequenceError),
            Just(NakCode::InvalidRequest),
            Just(NakCode::RemoteAccessError),
            Just(NakCode::RemoteOperationalError),
            Just(NakCode::InvalidRdRequest)
        ]
        .prop_map(Syndrome::Nak),
    ]
}

fn instructions() -> impl Strategy<Value = Instructions> {
    // Standard bits 0-8 and 15 (reserved bits 9-14 are allowed too), intlab DS bits 0-1.
    (
        any::<u16>(),
        prop_oneof![Just(0u16), Just(int_format::int::INTLAB_DOMAIN_ID), Just(7u16)],
        0u16..4,
    )
        .prop_map(|(bitmap, domain_id, ds)| Instructions {
            bitmap,
            domain_id,
            ds_instructions: ds << 14,
        })
        .prop_filter("hop fits 31 words", |i| i.hop_words().is_ok())
}

fn hop_for(ins: Instructions) -> impl Strategy<Value = HopRecord> {
    use int_format::int::{DsInstruction as D, Instruction as I};
    (
        any::<[u32; 8]>(),
        any::<[u64; 3]>(),
        any::<[u16; 2]>(),
        any::<[u8; 2]>(),
    )
        .prop_map(move |(w, d, p, b)| {
            let on = |i: I| ins.has(i);
            let occupancy = |v: u32| v & 0x00ff_ffff;
            HopRecord {
                node_id: on(I::NodeId).then_some(w[0]),
                ingress_port: on(I::L1Ports).then_some(p[0]),
                egress_port: on(I::L1Ports).then_some(p[1]),
                hop_latency: on(I::HopLatency).then_some(w[1]),
                queue_id: on(I::QueueOccupancy).then_some(b[0]),
                queue_occupancy: on(I::QueueOccupancy).then_some(occupancy(w[2]).min(0xff_fffe)),
                ingress_ts: on(I::IngressTimestamp).then_some(d[0]),
                egress_ts: on(I::EgressTimestamp).then_some(d[1]),
                l2_ingress_port: on(I::L2Ports).then_some(w[3]),
                l2_egress_port: on(I::L2Ports).then_some(w[4]),
                tx_utilization: on(I::TxUtilization).then_some(w[5]),
                buffer_id: on(I::BufferOccupancy).then_some(b[1]),
                buffer_occupancy: on(I::BufferOccupancy).then_some(occupancy(w[6]).min(0xff_fffe)),
                tx_bytes: ins.has_ds(D::TxBytes).then_some(d[2]),
                rate_kbps: ins.has_ds(D::LineRate).then_some(w[7]),
            }
            .with_latency_below_all_ones()
        })
}

trait BelowAllOnes {
    fn with_latency_below_all_ones(self) -> Self;
}

impl BelowAllOnes for HopRecord {
    /// Hop latency saturates below all ones when emitted; keep generated values in range.
    fn with_latency_below_all_ones(mut self) -> Self {
        self.hop_latency = self.hop_latency.map(|v| v.min(u32::MAX - 1));
        self
    }
}

proptest! {
    #[test]
    fn ethernet_round_trip(src in mac(), dst in mac(), ethertype in any::<u16>()) {
        let repr = EthernetRepr { src, dst, ethertype };
        let mut buf = [0u8; 14];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&buf[..]).unwrap()).unwrap(), repr);
    }

    #[test]
    fn ipv4_round_trip(repr in ipv4_repr()) {
        let mut buf = vec![0u8; 20 + repr.payload_len];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..])).unwrap();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), repr);
    }

    #[test]
    fn udp_round_trip(src_port in any::<u16>(), dst_port in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..64), checksum in any::<bool>()) {
        let repr = UdpRepr { src_port, dst_port, payload_len: payload.len() };
        let mut buf = vec![0u8; 8 + payload.len()];
        buf[8..].copy_from_slice(&payload);
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        repr.emit(&mut p).unwrap();
        let (a, b) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 1));
        if checksum {
            p.fill_checksum(a, b);
            prop_assert_ne!(p.checksum(), 0);
        }
        prop_assert_eq!(UdpRepr::parse(&UdpPacket::new_checked(&buf[..]).unwrap(), a, b).unwrap(), repr);
    }

    #[test]
    fn bth_round_trip(repr in bth_repr()) {
        let mut buf = [0u8; 12];
        repr.emit(&mut Bth::new_unchecked(&mut buf[..]));
        prop_assert_eq!(BthRepr::parse(&Bth::new_checked(&buf[..]).unwrap()).unwrap(), repr);
    }

    #[test]
    fn reth_aeth_immdt_round_trip(virtual_addr in any::<u64>(), rkey in any::<u32>(), dma_len in any::<u32>(), syndrome in syndrome(), msn in 0u32..1 << 24, imm in any::<u32>()) {
        let reth = RethRepr { virtual_addr, rkey, dma_len };
        let mut b = [0u8; 16];
        reth.emit(&mut Reth::new_unchecked(&mut b[..]));
        prop_assert_eq!(RethRepr::parse(&Reth::new_checked(&b[..]).unwrap()).unwrap(), reth);
        let aeth = AethRepr { syndrome, msn };
        let mut a = [0u8; 4];
        aeth.emit(&mut Aeth::new_unchecked(&mut a[..]));
        prop_assert_eq!(AethRepr::parse(&Aeth::new_checked(&a[..]).unwrap()).unwrap(), aeth);
        let mut i = [0u8; 4];
        ImmDt(imm).emit(&mut i);
        prop_assert_eq!(ImmDt::parse(&i).unwrap(), ImmDt(imm));
    }

    #[test]
    fn shim_and_md_round_trip(length_words in 3u8..=255, next_field in any::<u16>(), npt in 0u8..3, ins in instructions(), d in any::<bool>(), e in any::<bool>(), m in any::<bool>(), rhc in any::<u8>(), ds_flags in any::<u16>()) {
        let shim = IntShimRepr { int_type: IntType::Md, npt, length_words, next_field };
        let mut s = [0u8; 4];
        shim.emit(&mut IntShim::new_unchecked(&mut s[..]));
        prop_assert_eq!(IntShimRepr::parse(&IntShim::new_checked(&s[..]).unwrap()).unwrap(), shim);
        let md = IntMdRepr { discard: d, hop_limit_exceeded: e, mtu_exceeded: m, hop_ml: ins.hop_words().unwrap(), remaining_hops: rhc, instructions: ins, ds_flags };
        let mut h = [0u8; 12];
        md.emit(&mut IntMdHeader::new_unchecked(&mut h[..]));
        prop_assert_eq!(IntMdRepr::parse(&IntMdHeader::new_checked(&h[..]).unwrap()).unwrap(), md);
    }

    #[test]
    fn hop_round_trip((ins, hop) in instructions().prop_flat_map(|i| (Just(i), hop_for(i)))) {
        let len = usize::from(ins.hop_words().unwrap()) * 4;
        let mut b = vec![0u8; len];
        hop.emit(&mut b, &ins).unwrap();
        prop_assert_eq!(HopRecord::parse(&b, &ins).unwrap(), hop);
    }

    #[test]
    fn whole_frame_round_trip(bth in bth_repr(), ip in ipv4_repr(), src in mac(), dst in mac(), sport in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..300), hops in 0u8..6) {
        let op = bth.opcode;
        let repr = RoceFrameRepr {
            eth: EthernetRepr { src, dst, ethertype: 0 },
            ip,
            udp_src_port: sport,
            bth,
            deth: op.has_deth().then_some(DethRepr { qkey: 5, src_qp: 6 }),
            reth: op.has_reth().then_some(RethRepr { virtual_addr: 1, rkey: 2, dma_len: 3 }),
            atomic: op.has_atomic_eth().then_some(AtomicEthRepr { virtual_addr: 8, rkey: 2, swap_add: 7, compare: 1 }),
            aeth: op.has_aeth().then_some(AethRepr { syndrome: Syndrome::Ack { credits: 31 }, msn: 9 }),
            atomic_ack: op.has_atomic_ack_eth().then_some(AtomicAckEth(11)),
            immdt: op.has_immdt().then_some(ImmDt(4)),
        };
        let mut buf = vec![0u8; 2048];
        let len = repr.emit(&mut buf, &payload).unwrap();
        let original = buf[..len].to_vec();
        let port = 5790;
        let layout = FrameLayout::parse(&buf[..len], port).unwrap();
        let r = layout.roce(&buf[..len]).unwrap();
        prop_assert_eq!(&buf[r.payload..r.payload + r.payload_len], &payload[..]);
        prop_assert!(icrc::verify(&buf[14..len]).unwrap());
        let parsed = BthRepr::parse(&Bth::new_checked(&buf[r.bth..]).unwrap()).unwrap();
        prop_assert_eq!(BthRepr { pad_count: 0, ..parsed }, BthRepr { pad_count: 0, ..bth });

        // Source, `hops` transits and sink give back the frame, and the ICRC holds throughout.
        let cfg = source::SourceConfig { int_port: port, instructions: Instructions::FULL, hop_limit: 8 };
        let mut len = source::insert(&mut buf, &layout, &cfg).unwrap();
        for n in 0..hops {
            let l = FrameLayout::parse(&buf[..len], port).unwrap();
            len = transit::push_hop(&mut buf, &l, &HopRecord { node_id: Some(n.into()), ..HopRecord::default() }, 9000).unwrap().len;
        }
        let l = FrameLayout::parse(&buf[..len], port).unwrap();
        prop_assert!(l.icrc(&buf[..len]).unwrap().is_ok());
        prop_assert_eq!(l.int(&buf[..len]).unwrap().unwrap().hop_count(), usize::from(hops));
        let len = sink::strip(&mut buf, &l).unwrap();
        prop_assert_eq!(&buf[..len], &original[..]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = EthernetRepr::parse(&EthernetFrame::new_unchecked(&bytes[..]));
        let _ = Ipv4Packet::new_checked(&bytes[..]).and_then(|p| Ipv4Repr::parse(&p));
        let _ = UdpPacket::new_checked(&bytes[..]).and_then(|p| UdpRepr::parse(&p, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST));
        let _ = Bth::new_checked(&bytes[..]).and_then(|b| BthRepr::parse(&b));
        let _ = Reth::new_checked(&bytes[..]).and_then(|r| RethRepr::parse(&r));
        let _ = Aeth::new_checked(&bytes[..]).and_then(|a| AethRepr::parse(&a));
        let _ = ImmDt::parse(&bytes);
        let _ = IntShim::new_checked(&bytes[..]).and_then(|s| IntShimRepr::parse(&s));
        let _ = IntMdHeader::new_checked(&bytes[..]).and_then(|h| IntMdRepr::parse(&h));
        if let Ok(int) = IntHeaders::parse(&bytes) {
            for hop in int.hops() {
                let _ = hop;
            }
        }
        let _ = icrc::verify(&bytes);
    }

    /// Arbitrary bytes behind a valid Ethernet/IPv4/UDP prefix reach the INT and RoCE parsers and
    /// the three roles; none may panic.
    #[test]
    fn arbitrary_udp_payload_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..200), to_int in any::<bool>(), len_cut in 0usize..8) {
        let port = 5790;
        let mut buf = vec![0u8; 1024];
        let ip = Ipv4Repr { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 18, 0, 2), protocol: 17, payload_len: 8 + payload.len(), ttl: 64, dscp: 0, ecn: Ecn::NotEct, ident: 0, dont_frag: true };
        EthernetRepr { src: MacAddress::default(), dst: MacAddress::default(), ethertype: 0x0800 }.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..])).unwrap();
        UdpRepr { src_port: 1, dst_port: if to_int { port } else { 4791 }, payload_len: payload.len() }.emit(&mut UdpPacket::new_unchecked(&mut buf[34..])).unwrap();
        buf[42..42 + payload.len()].copy_from_slice(&payload);
        let len = (42 + payload.len()).saturating_sub(len_cut);
        if let Ok(layout) = FrameLayout::parse(&buf[..len], port) {
            let _ = layout.roce(&buf[..len]);
            let _ = layout.icrc(&buf[..len]);
            if let Some(Ok(int)) = layout.int(&buf[..len]) {
                for hop in int.hops() { let _ = hop; }
            }
            let mut copy = buf.clone();
            let _ = transit::push_hop(&mut copy, &layout, &HopRecord::default(), 1500);
            let mut copy = buf.clone();
            let _ = sink::strip(&mut copy, &layout);
            let mut copy = buf.clone();
            let _ = source::insert(&mut copy, &layout, &source::SourceConfig { int_port: port, instructions: Instructions::HPCC, hop_limit: 4 });
        }
    }
}
