//! Frames through int-format's views, the three INT roles and the switch's ingress.

use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{DEFAULT_INT_PORT, HopRecord, Instructions};
use int_format::roce::{AethRepr, BthRepr, Opcode, RethRepr, Syndrome};
use int_format::roles::{sink, source, transit};
use intlab_switch::SwitchSpec;
use intlab_switch::frame::FramePool;
use intlab_switch::pipeline::Pipeline;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Instant;

use crate::mutation::*;
use crate::{Report, Tally, finish, runner};

/// Hop records with any values, as a switch (or a broken one) writes them.
pub fn hop_record() -> impl Strategy<Value = HopRecord> {
    (
        any::<u32>(),
        any::<u16>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(|(node, port, qlen, ts, tx, rate)| HopRecord {
            node_id: Some(node),
            ingress_port: Some(port),
            egress_port: Some(port.rotate_left(3)),
            hop_latency: Some(qlen.rotate_left(7)),
            queue_id: Some(0),
            queue_occupancy: Some(qlen & 0xff_ffff),
            egress_ts: Some(ts),
            tx_bytes: Some(tx),
            rate_kbps: Some(rate),
            ..HopRecord::default()
        })
}

/// The instruction sets the lab uses, and any other.
pub fn instructions() -> impl Strategy<Value = Instructions> {
    prop_oneof![
        Just(Instructions::HPCC),
        Just(Instructions::FULL),
        (any::<u16>(), any::<u16>(), any::<u16>()).prop_map(|(bitmap, domain_id, ds_instructions)| Instructions {
            bitmap,
            domain_id,
            ds_instructions
        }),
    ]
}

/// A RoCEv2 frame as a host sends it, after the INT source and `hops` transit switches.
pub fn roce_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        (0u8..=0x1f).prop_map(Opcode::from_u8),
        any::<u32>(),
        any::<u32>(),
        proptest::collection::vec(any::<u8>(), 0..96),
        proptest::option::of(instructions()),
        proptest::collection::vec(hop_record(), 0..6),
        0u8..8,
    )
        .prop_map(|(opcode, qp, psn, payload, int, hops, hop_limit)| {
            let src = (MacAddress([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(198, 18, 0, 1));
            let dst = (MacAddress([2, 0, 0, 0, 0, 2]), Ipv4Addr::new(198, 18, 0, 2));
            let mut repr = RoceFrameRepr::new(src, dst, 49152, BthRepr::new(opcode, qp & 0xff_ffff, psn & 0xff_ffff));
            if opcode.has_reth() {
                repr.reth = Some(RethRepr {
                    virtual_addr: u64::from(psn),
                    rkey: qp,
                    dma_len: payload.len() as u32,
                });
            }
            if opcode.has_aeth() {
                repr.aeth = Some(AethRepr {
                    syndrome: Syndrome::Ack { credits: 0x1f },
                    msn: psn & 0xff_ffff,
                });
            }
            if opcode.has_immdt() {
                repr.immdt = Some(int_format::roce::ImmDt(qp));
            }
            let mut buf = vec![0u8; 2048];
            let Ok(mut len) = repr.emit(&mut buf, &payload) else {
                return Vec::new();
            };
            if let Some(instructions) = int {
                let cfg = source::SourceConfig {
                    int_port: DEFAULT_INT_PORT,
                    instructions,
                    hop_limit,
                };
                let grown =
                    FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).and_then(|l| source::insert(&mut buf, &l, &cfg));
                if let Ok(n) = grown {
                    len = n;
                    for h in &hops {
                        match FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT)
                            .and_then(|l| transit::push_hop(&mut buf, &l, h, 1500))
                        {
                            Ok(p) => len = p.len,
                            Err(_) => break,
                        }
                    }
                }
            }
            buf.truncate(len);
            buf
        })
}

/// Mostly frames the lab writes, sometimes random bytes.
pub fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => roce_frame(),
        1 => proptest::collection::vec(any::<u8>(), 0..128),
    ]
}

/// A frame after up to five mutations, its IPv4 checksum repaired or not.
pub fn mutated_frame() -> impl Strategy<Value = (Vec<u8>, bool)> {
    (any_frame(), proptest::collection::vec(mutation(), 0..6), any::<bool>()).prop_map(|(f, m, repair)| {
        let mut f = apply(f, &m);
        if repair {
            repair_ipv4_checksum(&mut f);
        }
        (f, repair)
    })
}

/// int-format's views and the three INT roles, and the switch's ingress, on one frame.
pub fn int_format_case(
    frame: &[u8],
    pipeline: &Pipeline,
    pool: &FramePool,
    tally: &Tally,
) -> Result<(), TestCaseError> {
    let mut f = pool.get();
    let n = frame.len().min(f.capacity());
    f.buffer_mut()[..n].copy_from_slice(&frame[..n]);
    f.len = n;
    let _ = pipeline.ingress(&mut f);
    pool.put(f);

    let Ok(layout) = FrameLayout::parse(frame, DEFAULT_INT_PORT) else {
        tally.count("not IPv4/UDP or broken below UDP");
        return Ok(());
    };
    tally.count("parsed to UDP");
    if layout.is_roce() {
        match layout.roce(frame) {
            Ok(_) => tally.count("RoCE headers parsed"),
            Err(_) => tally.count("RoCE headers refused"),
        }
        if let Ok(c) = layout.icrc(frame) {
            tally.count(if c.is_ok() { "ICRC verifies" } else { "ICRC mismatch" });
        }
    }
    let hops_before = match layout.int(frame) {
        Some(Ok(int)) => {
            tally.count("INT parsed");
            // Decode every hop record (the parse is what is fuzzed; the values are not used).
            int.hops().for_each(drop);
            Some(int.hop_count())
        }
        Some(Err(_)) => {
            tally.count("INT refused");
            None
        }
        None => None,
    };

    let mut buf = frame.to_vec();
    buf.resize(frame.len() + 512, 0);
    if let Ok(p) = transit::push_hop(&mut buf, &layout, &HopRecord::default(), 1500) {
        tally.count("transit push");
        let again = FrameLayout::parse(&buf[..p.len], DEFAULT_INT_PORT)
            .map_err(|e| TestCaseError::fail(format!("push_hop wrote a frame that does not parse: {e}")))?;
        let int = again.int(&buf[..p.len]).and_then(Result::ok);
        let count = int.map(|i| i.hop_count());
        // Hops of an empty instruction set take no bytes: only the remaining count shows them.
        if p.outcome == transit::PushOutcome::Pushed
            && int.is_some_and(|i| i.md.hop_ml > 0)
            && let Some(before) = hops_before
        {
            prop_assert_eq!(count, Some(before + 1), "a pushed hop is one more hop");
        }
    }
    let mut buf = frame.to_vec();
    if let Ok(len) = sink::strip(&mut buf, &layout) {
        tally.count("sink strip");
        let again = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT);
        if layout.dst_port != DEFAULT_INT_PORT {
            let again =
                again.map_err(|e| TestCaseError::fail(format!("strip wrote a frame that does not parse: {e}")))?;
            prop_assert!(!again.has_int(), "stripped frame still carries INT");
        }
    }
    let mut buf = frame.to_vec();
    buf.resize(frame.len() + 512, 0);
    let cfg = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions: Instructions::HPCC,
        hop_limit: 4,
    };
    if !layout.has_int()
        && let Ok(len) = source::insert(&mut buf, &layout, &cfg)
    {
        tally.count("source insert");
        let again = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT)
            .map_err(|e| TestCaseError::fail(format!("source insert wrote a frame that does not parse: {e}")))?;
        prop_assert!(again.has_int(), "inserted INT not found");
    }
    Ok(())
}

/// Runs the frames target.
pub fn fuzz_frames(cases: u32) -> Report {
    let spec = SwitchSpec::from_yaml(
        "node_id: 1\nports:\n  - { name: p1, kind: tap, rate: 1Gbps }\n  - { name: p2, kind: tap, rate: 1Gbps }\n\
         routes:\n  - { prefix: 198.18.0.2/32, port: p2 }\n",
        Path::new("fuzz.yaml"),
    )
    .expect("the fuzz switch's config is valid");
    let pipeline = Pipeline::new(&spec);
    let pool = FramePool::new(intlab_switch::frame_capacity(&spec), 4);
    let tally = Tally::default();
    let started = Instant::now();
    let result = runner(cases).run(&mutated_frame(), |(frame, _)| {
        int_format_case(&frame, &pipeline, &pool, &tally)
    });
    finish("int-format frames + switch ingress", cases, started, tally, result)
}
