//! Datagrams with a valid ICRC through a host's transport (the classifier, the verbs engine's
//! responder and completer) into a host receiving a flow and a host sending it.

use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{DEFAULT_INT_PORT, HopRecord, Instructions, IntHeaders};
use int_format::roce::{AethRepr, BthRepr, Opcode, RethRepr, Syndrome, icrc};
use int_format::roles::{source, transit};
use intlab_transport::cc::ControllerConfig;
use intlab_transport::classify::{Action, classify};
use intlab_transport::content;
use intlab_transport::endpoint::EndpointConfig;
use intlab_transport::flow::{FlowPath, FlowSpec, MessageKind};
use intlab_transport::packet::{self, Addressing, Extensions};
use intlab_transport::socket::{RecvMeta, SendBatch};
use intlab_transport::{HostStack, Wire};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::net::Ipv4Addr;
use std::time::Instant;

use crate::frames::hop_record;
use crate::mutation::*;
use crate::{Report, Tally, finish, runner};

/// A datagram sent to a host: what it is built from before mutation.
#[derive(Debug, Clone)]
pub struct Datagram {
    opcode: u8,
    own_qp: bool,
    psn: u32,
    syndrome: u8,
    payload: Payload,
    hops: Vec<HopRecord>,
    via_int: bool,
    mutations: Vec<Mutation>,
    ce: bool,
}

#[derive(Debug, Clone)]
pub enum Payload {
    /// The flow's content at the PSN's offset (what the sender sends).
    Content,
    Random(Vec<u8>),
}

/// Datagrams of every kind, mostly for the flow's QP and near its PSNs.
pub fn datagram() -> impl Strategy<Value = Datagram> {
    (
        prop_oneof![
            3 => Just(0x0au8), 3 => Just(0x06), 3 => Just(0x07), 3 => Just(0x08),
            6 => Just(0x11), 3 => Just(0x81), 1 => Just(0x04), 2 => any::<u8>()
        ],
        prop::bool::weighted(0.9),
        prop_oneof![4 => 0u32..24, 1 => any::<u32>()],
        prop_oneof![3 => Just(0x1fu8), 2 => Just(0x60), 1 => any::<u8>()],
        prop_oneof![3 => Just(Payload::Content), 1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Payload::Random)],
        proptest::collection::vec(hop_record(), 0..5),
        any::<bool>(),
        proptest::collection::vec(mutation(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(opcode, own_qp, psn, syndrome, payload, hops, via_int, mutations, ce)| Datagram {
            opcode,
            own_qp,
            psn,
            syndrome,
            payload,
            hops,
            via_int,
            mutations,
            ce,
        })
}

/// The flow's QP number.
pub const FLOW_QP: u32 = 7;
/// Payload bytes a packet of the flow carries.
pub const MTU: u64 = 1000;

/// The INT bytes a data frame carries after the source and one transit push per hop.
pub fn echoed_int(hops: &[HopRecord]) -> Option<Vec<u8>> {
    let src = (MacAddress([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(198, 18, 0, 1));
    let dst = (MacAddress([2, 0, 0, 0, 0, 2]), Ipv4Addr::new(198, 18, 0, 2));
    let repr = RoceFrameRepr::new(src, dst, 49152, BthRepr::new(Opcode::WriteMiddle, FLOW_QP, 0));
    let mut buf = vec![0u8; 2048];
    let len = repr.emit(&mut buf, &[0; 16]).ok()?;
    let cfg = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions: Instructions::HPCC,
        hop_limit: 8,
    };
    let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).ok()?;
    let mut len = source::insert(&mut buf, &layout, &cfg).ok()?;
    for h in hops {
        let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).ok()?;
        len = transit::push_hop(&mut buf, &layout, h, 1500).ok()?.len;
    }
    let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).ok()?;
    Some(buf[layout.int_offset()..layout.transport].to_vec())
}

/// Builds `d` as the wire carries it (UDP payload with a valid ICRC), None when the opcode and
/// its headers cannot be written.
pub fn build(d: &Datagram, spec: &FlowSpec, a: &Addressing) -> Option<Vec<u8>> {
    let opcode = Opcode::from_u8(d.opcode);
    let qp = if d.own_qp {
        FLOW_QP
    } else {
        d.psn.rotate_left(5) & 0xff_ffff
    };
    let bth = BthRepr::new(opcode, qp, d.psn & 0xff_ffff);
    let mut ext = Extensions::NONE;
    if opcode.has_reth() {
        ext.reth = Some(RethRepr {
            virtual_addr: 0,
            rkey: qp,
            dma_len: spec.size as u32,
        });
    }
    if opcode.has_aeth() {
        ext.aeth = Some(AethRepr {
            syndrome: Syndrome::from_u8(d.syndrome).ok()?,
            msn: 0,
        });
    }
    if opcode.has_atomic_eth() {
        ext.atomic = Some(int_format::roce::AtomicEthRepr {
            virtual_addr: u64::from(d.psn) * 8,
            rkey: qp,
            swap_add: 1,
            compare: 0,
        });
    }
    if opcode.has_atomic_ack_eth() {
        ext.atomic_ack = Some(int_format::roce::AtomicAckEth(u64::from(d.syndrome)));
    }
    if opcode.has_deth() {
        ext.deth = Some(int_format::roce::DethRepr { qkey: 0, src_qp: qp });
    }
    if opcode.has_immdt() {
        ext.immdt = Some(int_format::roce::ImmDt(d.psn));
    }
    // An ACK carries the echoed INT (shim, MD header, hops) as its payload: the INT a data
    // packet gathered on its way, as the switches wrote it.
    let payload: Vec<u8> = if opcode.has_aeth() {
        echoed_int(&d.hops)?
    } else {
        match &d.payload {
            Payload::Content => {
                let offset = u64::from(d.psn) * MTU;
                let len = spec.size.saturating_sub(offset).min(MTU) as usize;
                let mut p = vec![0u8; len];
                content::fill(spec.id, offset, &mut p);
                p
            }
            Payload::Random(p) => p.clone(),
        }
    };
    let mut buf = vec![0u8; 4096];
    let cfg = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions: Instructions::HPCC,
        hop_limit: 8,
    };
    let int = d.via_int.then_some(&cfg);
    let n = packet::write(&mut buf, a, int, &bth, ext, &payload).ok()?;
    buf.truncate(n);
    let int_len = if d.via_int {
        IntHeaders::parse(&buf).map(|i| i.wire_len()).unwrap_or(0)
    } else {
        0
    };
    let mut dgram = apply(buf, &d.mutations);
    // Seal the mutated bytes with the ICRC a receiver expects, so they get past its check.
    if dgram.len() >= int_len + 16 {
        let crc_at = dgram.len() - icrc::ICRC_LEN;
        let crc = packet::icrc_for(a, &dgram[int_len..crc_at]).ok()?;
        dgram[crc_at..].copy_from_slice(&crc.to_le_bytes());
    }
    Some(dgram)
}

/// A wire that keeps nothing: what the hosts answer is not the target's concern.
pub struct Nowhere;

impl Wire for Nowhere {
    fn send_replies(&mut self, batch: &mut SendBatch) -> std::io::Result<usize> {
        Ok(batch.drain(|_, _| {}))
    }

    fn send_packets(&mut self, batch: &mut SendBatch) -> std::io::Result<usize> {
        Ok(batch.drain(|_, _| {}))
    }
}

/// The transport past the ICRC check: a host receiving a flow and the host sending it, each fed
/// a sequence of datagrams as the lab feeds them (each host takes what is for its QPs).
pub fn transport_case(
    controller: &ControllerConfig,
    sent: u64,
    datagrams: &[Datagram],
    tally: &Tally,
) -> Result<(), TestCaseError> {
    let a = Addressing {
        src: Ipv4Addr::new(198, 18, 0, 2),
        dst: Ipv4Addr::new(198, 18, 0, 1),
        src_port: 49159,
    };
    let spec = FlowSpec {
        id: FLOW_QP,
        src: a.dst,
        dst: a.src,
        size: 12_345,
        start_ns: 0,
        kind: MessageKind::Write,
        src_port: a.src_port,
    };
    let line_rate = 10_000_000_000;
    let host = |name: &str, ip: Ipv4Addr| {
        let mut cfg = EndpointConfig::new(name, ip, line_rate, 10_000);
        cfg.mtu = MTU;
        cfg.timing.rto_ns = 100_000;
        cfg.timing.rto_max_ns = 10_000_000;
        cfg.timing.burst_credit_ns = 10_000;
        HostStack::new(
            cfg,
            Nowhere,
            std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        )
        .map_err(|e| TestCaseError::fail(format!("host: {e}")))
    };
    let mut sender = host("h1", spec.src)?;
    let mut receiver = host("h2", spec.dst)?;
    let route = FlowPath {
        base_rtt_ns: 10_000,
        fabric_rtt_ns: 10_000,
        hops: 2,
    };
    sender
        .add_sender(spec, controller, route, 0)
        .map_err(|e| TestCaseError::fail(format!("controller: {e}")))?;
    receiver.expect(spec);
    let mut now = 0u64;
    for _ in 0..sent {
        now += 10_000;
        let _ = sender.step(now);
    }
    let packets = spec.size.div_ceil(MTU);
    for d in datagrams {
        now += 1_000;
        let Some(bytes) = build(d, &spec, &a) else {
            tally.count("not buildable");
            continue;
        };
        let r = match packet::parse(&bytes, d.via_int, &a) {
            Ok(r) => r,
            Err(_) => {
                tally.count("refused by the parser");
                continue;
            }
        };
        tally.count("past the ICRC check");
        tally.count(match classify(&r) {
            a if a.qp() != Some(FLOW_QP) => "another QP",
            Action::Request { .. } => "request for the flow's QP",
            Action::Ack { .. } => "ACK for the flow's QP",
            Action::Nak { .. } => "NAK for the flow's QP",
            Action::Cnp { .. } => "CNP for the flow's QP",
            Action::Unsupported => "unsupported",
            _ => "other answer for the flow's QP",
        });
        let meta = RecvMeta {
            len: bytes.len(),
            truncated: false,
            from: std::net::SocketAddrV4::new(a.src, a.src_port),
            tos: Some(if d.ce { 3 } else { 2 }),
            realtime_ns: None,
            vlan: None,
        };
        // The receiver hears the sender's packets; the sender hears the receiver's answers.
        receiver.datagram(&bytes, meta, d.via_int, now);
        let back = RecvMeta {
            from: std::net::SocketAddrV4::new(a.dst, 4791),
            ..meta
        };
        sender.datagram(&bytes, back, d.via_int, now);
        let _ = sender.step(now);
        let _ = receiver.step(now);
        let flows = sender.flows_now();
        let f = flows
            .first()
            .ok_or_else(|| TestCaseError::fail("the sender lost its flow"))?;
        prop_assert!(
            f.acked_bytes <= spec.size,
            "acked {} of {} bytes",
            f.acked_bytes,
            spec.size
        );
        prop_assert!(
            f.acked_bytes <= f.wire_bytes,
            "acked {} bytes, put {} on the wire",
            f.acked_bytes,
            f.wire_bytes
        );
        prop_assert!(
            f.done || f.rate_bps > 0 && f.rate_bps <= line_rate,
            "the controller asks for {} b/s on a {} b/s NIC",
            f.rate_bps,
            line_rate
        );
    }
    let rec = receiver.report(now);
    let r = rec
        .received
        .first()
        .ok_or_else(|| TestCaseError::fail("the receiver lost its flow"))?;
    prop_assert!(
        r.bytes_ok <= spec.size,
        "receiver accepted {} of {} bytes",
        r.bytes_ok,
        spec.size
    );
    prop_assert_eq!(
        r.done_ns.is_some(),
        r.bytes_ok == spec.size,
        "done exactly when every byte arrived"
    );
    let sent = sender.report(now);
    let s = sent
        .sent
        .first()
        .ok_or_else(|| TestCaseError::fail("no record of the flow sent"))?;
    let acked_packets = if s.end_ns.is_some() { packets } else { 0 };
    prop_assert!(
        acked_packets <= s.packets_sent,
        "acked {} packets, sent {}",
        acked_packets,
        s.packets_sent
    );
    Ok(())
}

/// Runs the transport target with each controller in turn.
pub fn fuzz_transport(cases: u32) -> Report {
    let controllers: Vec<ControllerConfig> = [
        "hpcc",
        "hpcc++",
        "dcqcn",
        "swift",
        "timely",
        "dctcp",
        "netscope",
        "rlcc",
        "line_rate",
    ]
    .iter()
    .map(|name| serde_json::from_value(serde_json::json!({ "name": name })).expect("controller config"))
    .collect();
    let tally = Tally::default();
    let started = Instant::now();
    let strategy = (
        0..controllers.len(),
        0u64..14,
        proptest::collection::vec(datagram(), 1..12),
    );
    let result = runner(cases).run(&strategy, |(c, sent, datagrams)| {
        transport_case(&controllers[c], sent, &datagrams, &tally)
    });
    finish("transport past the ICRC check", cases, started, tally, result)
}
