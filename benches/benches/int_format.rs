//! Per-frame cost of the INT transit step and of the ICRC, on a RoCEv2 frame carrying 1024 bytes
//! of payload (1,082 bytes on the wire before INT).

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{DEFAULT_INT_PORT, HopRecord, Instructions};
use int_format::roce::{BthRepr, Opcode, icrc};
use int_format::roles::{sink, source, transit};

fn write_middle(buf: &mut [u8], payload: usize) -> usize {
    let src = (MacAddress([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(198, 18, 0, 1));
    let dst = (MacAddress([2, 0, 0, 0, 0, 2]), Ipv4Addr::new(198, 18, 0, 2));
    let repr = RoceFrameRepr::new(src, dst, 49152, BthRepr::new(Opcode::WriteMiddle, 7, 1));
    repr.emit(buf, &vec![0xa5; payload]).expect("buffer holds the frame")
}

/// A frame that has passed the INT source and `hops` transit nodes, in a buffer with tailroom.
fn int_frame(hops: u32, payload: usize) -> (Vec<u8>, usize) {
    let mut buf = vec![0u8; 2048];
    let len = write_middle(&mut buf, payload);
    let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).expect("valid frame");
    let cfg = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions: Instructions::HPCC,
        hop_limit: 8,
    };
    let mut len = source::insert(&mut buf, &layout, &cfg).expect("source insert");
    for n in 0..hops {
        let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).expect("valid frame");
        len = transit::push_hop(&mut buf, &layout, &hop(n), 9000).expect("push").len;
    }
    (buf, len)
}

fn hop(n: u32) -> HopRecord {
    HopRecord {
        queue_id: Some(0),
        queue_occupancy: Some(10_000 + n),
        egress_ts: Some(1_000_000 + u64::from(n)),
        tx_bytes: Some(5_000_000),
        rate_kbps: Some(100_000_000),
        ..HopRecord::default()
    }
}

/// Each iteration restores the frame from a template (a copy of about 1 KB, warm in cache as a
/// just-received frame is) and then parses and transforms it. `reset_only` measures the copy alone.
fn transit_push(c: &mut Criterion) {
    let mut g = c.benchmark_group("int_transit");
    g.throughput(Throughput::Elements(1));
    for (hops, payload) in [(0u32, 1024), (2, 1024), (0, 64)] {
        let (template, len) = int_frame(hops, payload);
        let mut buf = template.clone();
        g.bench_function(format!("reset_only/{payload}B_payload_{hops}_hops_before"), |b| {
            b.iter(|| {
                buf[..len].copy_from_slice(black_box(&template[..len]));
                black_box(&mut buf);
            })
        });
        g.bench_function(format!("reset_parse_push/{payload}B_payload_{hops}_hops_before"), |b| {
            b.iter(|| {
                buf[..len].copy_from_slice(black_box(&template[..len]));
                let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).expect("valid frame");
                black_box(transit::push_hop(&mut buf, &layout, black_box(&hop(1)), 9000).expect("push"))
            })
        });
    }
    g.finish();
}

fn sink_strip(c: &mut Criterion) {
    let (template, len) = int_frame(3, 1024);
    let mut buf = template.clone();
    c.bench_function("int_sink/reset_parse_strip/1024B_payload_3_hops", |b| {
        b.iter(|| {
            buf[..len].copy_from_slice(black_box(&template[..len]));
            let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).expect("valid frame");
            black_box(sink::strip(&mut buf, &layout).expect("strip"))
        })
    });
}

fn icrc_1k(c: &mut Criterion) {
    let mut buf = vec![0u8; 2048];
    let len = write_middle(&mut buf, 1024);
    let packet = buf[14..len].to_vec();
    let mut g = c.benchmark_group("icrc");
    g.throughput(Throughput::Bytes(packet.len() as u64));
    g.bench_function("compute_1024B_payload", |b| {
        b.iter(|| icrc::compute(black_box(&packet)).expect("icrc"))
    });
    let (int_buf, int_len) = int_frame(3, 1024);
    g.bench_function("verify_int_stripped_3_hops", |b| {
        b.iter(|| {
            let layout = FrameLayout::parse(black_box(&int_buf[..int_len]), DEFAULT_INT_PORT).expect("valid");
            layout.icrc(&int_buf[..int_len]).expect("icrc").is_ok()
        })
    });
    g.finish();
}

criterion_group!(benches, transit_push, sink_strip, icrc_1k);
criterion_main!(benches);
