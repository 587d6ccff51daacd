//! RL-CC decision time per RTT sample: the shipped trees and the shipped MLP on the same
//! observations (the paper's NIC took 0.9 µs for its trees), and the whole controller step
//! (observation, policy, rate) on an ACK with an RTT sample.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use intlab_rlcc::{Observation, Policy};
use intlab_transport::cc::{Ack, ControllerConfig, PathInfo, RlCcConfig};

const SHIPPED_MLP: &str = include_str!("../../policies/rlcc-mlp.json");

/// Observations over the range the policy sees: multipliers around 1, reward terms from
/// under-utilized to deeply congested.
fn observations() -> Vec<Observation> {
    (0..1024u32)
        .map(|k| {
            let f = |m: u32, span: f32, low: f32| low + span * ((k * m % 1009) as f32 / 1009.0);
            [f(7, 0.4, 0.8), f(13, 20.0, -0.8), f(17, 0.4, 0.8), f(19, 20.0, -0.8)]
        })
        .collect()
}

fn policies(c: &mut Criterion) {
    let obs = observations();
    let trees = Policy::builtin().expect("the shipped policy");
    let mlp = Policy::from_json(SHIPPED_MLP).expect("the shipped MLP");
    for (name, p) in [("rlcc_decision/trees", &trees), ("rlcc_decision/mlp", &mlp)] {
        let mut k = 0usize;
        c.bench_function(name, |b| {
            b.iter(|| {
                k = (k + 1) % obs.len();
                black_box(p.act(black_box(&obs[k])))
            })
        });
    }
    let path = PathInfo {
        line_rate_bps: 100_000_000_000,
        base_rtt_ns: 10_000,
        fabric_rtt_ns: 10_000,
        hops: 1,
        mtu_wire_bytes: 1100,
        mtu_bytes: 1024,
    };
    let mut cc = ControllerConfig::Rlcc(RlCcConfig::default())
        .build(path)
        .expect("the shipped policy loads");
    let mut t = 0u64;
    c.bench_function("rlcc_decision/controller_step", |b| {
        b.iter(|| {
            // Every ACK a base RTT apart: each one is a decision.
            t += 10_000;
            cc.on_ack(&Ack {
                now_ns: t,
                acked_bytes: t,
                sent_bytes: t,
                newly_acked: 1000,
                rtt_ns: Some(10_000 + (t * 7919) % 40_000),
                hops: &[],
                after_stall: false,
            });
            black_box(cc.rate_bps())
        })
    });
}

criterion_group!(benches, policies);
criterion_main!(benches);
