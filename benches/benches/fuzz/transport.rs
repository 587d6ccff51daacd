//! Datagrams with a valid ICRC through the transport's classifier into a receiving and a
//! sending queue pair.

use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{DEFAULT_INT_PORT, HopRecord, Instructions, IntHeaders, source, transit};
use int_format::roce::{AethRepr, BthRepr, Opcode, RethRepr, Syndrome, icrc};
use intlab_transport::cc::{ControllerConfig, PathInfo};
use intlab_transport::classify::{Action, EchoedHops, classify};
use intlab_transport::content;
use intlab_transport::flow::{FlowSpec, MessageKind};
use intlab_transport::packet::{self, Addressing, Extension};
use intlab_transport::receiver::{ReceiverPolicy, RecvQp};
use intlab_transport::sender::{SendQp, SenderTiming};
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
    let ext = if opcode.has_reth() {
        Extension::Reth(RethRepr {
            virtual_addr: 0,
            rkey: qp,
            dma_len: spec.size as u32,
        })
    } else if opcode.has_aeth() {
        Extension::Aeth(AethRepr {
            syndrome: Syndrome::from_u8(d.syndrome).ok()?,
            msn: 0,
        })
    } else if opcode == Opcode::Cnp {
        Extension::Cnp
    } else {
        Extension::None
    };
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

/// The transport past the ICRC check: one receiving and one sending QP of a flow, fed a
/// sequence of datagrams as a host feeds them.
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
    let path = PathInfo {
        line_rate_bps: 10_000_000_000,
        base_rtt_ns: 10_000,
        fabric_rtt_ns: 10_000,
        hops: 2,
        mtu_wire_bytes: MTU + 70,
        mtu_bytes: MTU,
    };
    let cc = controller
        .resolve(&path)
        .build(path)
        .map_err(|e| TestCaseError::fail(format!("controller: {e}")))?;
    let timing = SenderTiming {
        rto_ns: 100_000,
        rto_max_ns: 10_000_000,
        burst_credit_ns: 10_000,
        sample_every_ns: 0,
        stall_ns: 1 << 40,
    };
    let mut sender = SendQp::new(spec, cc, None, MTU, timing);
    let mut receiver = RecvQp::new(spec, MTU);
    let policy = ReceiverPolicy {
        ack_every: 1,
        cnp_interval_ns: 50_000,
    };
    let mut now = 0u64;
    let mut out = [0u8; 2048];
    for _ in 0..sent {
        now += 10_000;
        if sender.ready(now) {
            let _ = sender.build_next(now, &mut out, &a, 4791, 2);
        }
    }
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
        match classify(&r) {
            Action::Data { qp, psn } if qp == FLOW_QP => {
                tally.count("data for the QP");
                receiver.on_data(psn, r.payload, d.ce, now, &policy);
            }
            Action::Ack { qp, psn, nak } if qp == FLOW_QP => match EchoedHops::parse(r.payload) {
                Ok(hops) => {
                    tally.count(if nak { "NAK for the QP" } else { "ACK for the QP" });
                    if nak {
                        sender.on_nak(psn, now);
                    } else {
                        sender.on_ack(psn, now, hops.as_slice());
                    }
                }
                Err(_) => tally.count("ACK with a broken echo"),
            },
            Action::Cnp { qp } if qp == FLOW_QP => {
                tally.count("CNP for the QP");
                sender.on_cnp(now);
            }
            Action::Unsupported => tally.count("unsupported"),
            _ => tally.count("another QP"),
        }
        sender.on_timers(now);
        let _ = sender.next_event_ns();
        let rec = receiver.record();
        prop_assert!(
            rec.bytes_ok <= spec.size,
            "receiver accepted {} of {} bytes",
            rec.bytes_ok,
            spec.size
        );
        prop_assert_eq!(
            receiver.is_done(),
            rec.bytes_ok == spec.size,
            "done exactly when every byte arrived"
        );
        let (acked, packets) = sender.packets_acked();
        prop_assert!(acked <= packets, "acked {} of {} packets", acked, packets);
        prop_assert!(
            acked <= sender.record().packets_sent,
            "acked {} packets, sent {}",
            acked,
            sender.record().packets_sent
        );
        let rate = sender.controller().rate_bps();
        prop_assert!(
            rate > 0 && rate <= path.line_rate_bps,
            "{} asks for {} b/s on a {} b/s NIC",
            sender.controller().name(),
            rate,
            path.line_rate_bps
        );
    }
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
