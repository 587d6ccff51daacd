//! Controller decision time per event: per ACK for HPCC with 5 INT hops and HPCC++ (every ACK
//! past its sample interval, so each call does the full PD step), for TIMELY (every ACK a full
//! update), Swift (delays around its target), DCTCP (a window per ACK, a mark every fourth)
//! and Netscope (a mark every fourth ACK); per CNP plus due timer for DCQCN (every CNP ends
//! in a decrease).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use int_format::int::HopRecord;
use intlab_transport::cc::{
    Ack, Controller, Dcqcn, DcqcnConfig, Dctcp, DctcpConfig, Hpcc, HpccConfig, HpccPlusPlus, HpccPlusPlusConfig,
    Netscope, NetscopeConfig, PathInfo, Swift, SwiftConfig, Timely, TimelyConfig,
};

const HOPS: usize = 5;
const ACKS: usize = 1024;

fn path() -> PathInfo {
    PathInfo {
        line_rate_bps: 100_000_000_000,
        base_rtt_ns: 10_000,
        fabric_rtt_ns: 10_000,
        hops: 1,
        mtu_wire_bytes: 1100,
        mtu_bytes: 1024,
    }
}

/// A stream of ACK feedback: every hop busy, queues wandering, 1 us apart.
fn feedback() -> Vec<[HopRecord; HOPS]> {
    (0..ACKS as u64)
        .map(|k| {
            std::array::from_fn(|h| HopRecord {
                egress_ts: Some(k * 1000 + h as u64 * 300),
                tx_bytes: Some(k * 12_000 + h as u64),
                queue_occupancy: Some(((k * 7919 + h as u64 * 104_729) % 60_000) as u32),
                rate_kbps: Some(100_000_000),
                ..HopRecord::default()
            })
        })
        .collect()
}

fn run(c: &mut Criterion, name: &str, mut cc: Box<dyn Controller>, every_ns: u64) {
    let fb = feedback();
    let mut k = 0usize;
    let mut round = 0u64;
    c.bench_function(name, |b| {
        b.iter(|| {
            let hops = &fb[k];
            let t = round * ACKS as u64 * every_ns + k as u64 * every_ns;
            let mut shifted = *hops;
            for h in &mut shifted {
                h.egress_ts = h.egress_ts.map(|x| x + t);
                h.tx_bytes = h.tx_bytes.map(|x| x + round * ACKS as u64 * 12_000);
            }
            cc.on_ack(&Ack {
                now_ns: t,
                acked_bytes: t,
                sent_bytes: t + 50_000,
                newly_acked: 1000,
                rtt_ns: Some(12_000),
                hops: black_box(&shifted),
                after_stall: false,
            });
            k += 1;
            if k == ACKS {
                k = 0;
                round += 1;
            }
            black_box(cc.rate_bps())
        })
    });
}

/// Benches `event(cc, k)` for k = 0, 1, 2, ...
fn run_events(
    c: &mut Criterion,
    name: &str,
    mut cc: Box<dyn Controller>,
    mut event: impl FnMut(&mut dyn Controller, u64),
) {
    let mut k = 0u64;
    c.bench_function(name, |b| {
        b.iter(|| {
            event(cc.as_mut(), black_box(k));
            k += 1;
            black_box(cc.rate_bps())
        })
    });
}

fn ack(t: u64, rtt_ns: u64) -> Ack<'static> {
    Ack {
        now_ns: t,
        acked_bytes: t + 1,
        sent_bytes: t + 1,
        newly_acked: 1000,
        rtt_ns: Some(rtt_ns),
        hops: &[],
        after_stall: false,
    }
}

fn controllers(c: &mut Criterion) {
    run_events(
        c,
        "cc_per_event/dcqcn_cnp_and_timer",
        Box::new(Dcqcn::new(DcqcnConfig::default(), path())),
        |cc, k| {
            cc.on_cnp(k * 5_000);
            cc.on_timer(k * 5_000 + 4_999);
        },
    );
    run_events(
        c,
        "cc_per_ack/swift",
        Box::new(Swift::new(SwiftConfig::default(), path())),
        |cc, k| cc.on_ack(&ack(k * 1000, 10_000 + (k * 7919) % 40_000)),
    );
    run_events(
        c,
        "cc_per_ack/timely",
        Box::new(Timely::new(TimelyConfig::default(), path())),
        |cc, k| cc.on_ack(&ack(k * 1000, 20_000 + (k * 7919) % 100_000)),
    );
    run_events(
        c,
        "cc_per_ack/dctcp",
        Box::new(Dctcp::new(DctcpConfig::default(), path())),
        |cc, k| {
            if k % 4 == 0 {
                cc.on_cnp(k * 1000);
            }
            cc.on_ack(&ack(k * 1000, 12_000));
        },
    );
    run_events(
        c,
        "cc_per_ack/netscope",
        Box::new(Netscope::new(NetscopeConfig::default(), path())),
        |cc, k| {
            // ACKs 1 us apart, a mark every fourth: a window closes every 55th ACK.
            if k % 4 == 0 {
                cc.on_cnp(k * 1000);
            }
            cc.on_ack(&ack(k * 1000, 12_000));
        },
    );
    run(
        c,
        "cc_per_ack/hpcc_5_hops",
        Box::new(Hpcc::new(HpccConfig::paper(), path())),
        1000,
    );
    run(
        c,
        "cc_per_ack/hpcc_plus_plus_5_hops",
        Box::new(HpccPlusPlus::new(
            HpccPlusPlusConfig {
                sample_interval_ns: Some(1),
                ..Default::default()
            },
            path(),
        )),
        1000,
    );
}

criterion_group!(benches, controllers);
criterion_main!(benches);
