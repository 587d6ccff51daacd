//! The shipped `int_transit.p4` against the built-in pipeline: the same frames, arriving at the
//! same times, go through the switch's own stages (ingress, the egress queue's exact schedule,
//! egress at the start of transmission) once with each, and every frame that leaves must be
//! byte-identical, hop records included.

use std::net::Ipv4Addr;
use std::path::Path;

use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{DEFAULT_INT_PORT, INTLAB_DOMAIN_ID, Instructions, IntHeaders};
use int_format::roce::{BthRepr, Opcode};
use int_format::roles::source;
use int_format::udp::UdpPacket;
use intlab_switch::SwitchSpec;
use intlab_switch::counters::PortCounters;
use intlab_switch::egress::{self, EgressPort};
use intlab_switch::frame::FramePool;
use intlab_switch::pipeline::{P4Egress, P4Pipeline, P4Verdict, Pipeline, Verdict};
use intlab_switch::tm::{EgressQueue, Until};

const PROGRAM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../p4/programs/int_transit.p4");

/// Three 10 Gb/s ports; P4 port numbers equal the port indices, which the built-in pipeline
/// writes as INT port IDs.
const SWITCH: &str = "\
node_id: 7
ports:
  - { name: p0, kind: tap, rate: 10Gbps, delay: 1us, buffer: 1MB, p4_port: 0 }
  - { name: p1, kind: tap, rate: 10Gbps, delay: 1us, buffer: 1MB, p4_port: 1 }
  - { name: p2, kind: tap, rate: 10Gbps, delay: 1us, buffer: 1MB, p4_port: 2 }
routes:
  - { prefix: 198.18.0.1/32, port: p0 }
  - { prefix: 198.18.0.2/32, port: p1 }
  - { prefix: 198.18.0.3/32, port: p2 }
";

const RUNTIME: &str = r#"{ "table_entries": [
  { "table": "IntIngress.ipv4_lpm", "match": { "hdr.ipv4.dst": ["198.18.0.1", 32] },
    "action_name": "IntIngress.forward", "action_params": { "port": 0 } },
  { "table": "IntIngress.ipv4_lpm", "match": { "hdr.ipv4.dst": ["198.18.0.2", 32] },
    "action_name": "IntIngress.forward", "action_params": { "port": 1 } },
  { "table": "IntIngress.ipv4_lpm", "match": { "hdr.ipv4.dst": ["198.18.0.3", 32] },
    "action_name": "IntIngress.forward", "action_params": { "port": 2 } }
] }"#;

fn host(n: u8) -> (MacAddress, Ipv4Addr) {
    (MacAddress([2, 0x1b, 0, 0, 0, n]), Ipv4Addr::new(198, 18, 0, n))
}

/// A RoCEv2 WRITE_MIDDLE from host `src` to `dst` with `payload` bytes, INT added by a source
/// asking `instructions` of at most `hop_limit` hops.
fn int_frame(src: u8, dst: u8, payload: usize, instructions: Instructions, hop_limit: u8, psn: u32) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let repr = RoceFrameRepr::new(
        host(src),
        host(dst),
        49152 + u16::from(src),
        BthRepr::new(Opcode::WriteMiddle, 9, psn),
    );
    let len = repr.emit(&mut buf, &vec![0x5a; payload]).expect("frame fits");
    let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).expect("valid frame");
    let cfg = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions,
        hop_limit,
    };
    let len = source::insert(&mut buf, &layout, &cfg).expect("INT inserted");
    buf.truncate(len);
    buf
}

/// Every field the switch can fill, reserved bits and checksum complement too.
const EVERYTHING: Instructions = Instructions {
    bitmap: 0xffff,
    domain_id: INTLAB_DOMAIN_ID,
    ds_instructions: 0xc000,
};

/// The traffic: (ingress port, arrival ns, frame).
fn traffic() -> Vec<(usize, u64, Vec<u8>)> {
    let mut frames = Vec::new();
    // Two senders at line rate into p2: its queue builds by one frame every two.
    let ser_ns = |len: usize| (len as u64 * 8) / 10;
    for j in 0..40u32 {
        let a = int_frame(1, 3, 1024, Instructions::HPCC, 8, j);
        let b = int_frame(2, 3, 1024, Instructions::FULL, 8, j);
        frames.push((0, u64::from(j) * ser_ns(a.len()), a));
        frames.push((1, 13 + u64::from(j) * ser_ns(b.len()), b));
    }
    // Towards p1: every field; no hop left (E); too big for the MTU (M); a UDP checksum
    // present; plain RoCE without INT; TTL 1 (dropped by both).
    let t = 100_000;
    frames.push((0, t, int_frame(1, 2, 256, EVERYTHING, 8, 1)));
    frames.push((0, t + 10, int_frame(1, 2, 256, Instructions::HPCC, 0, 2)));
    frames.push((0, t + 20, int_frame(1, 2, 1432, Instructions::HPCC, 8, 3)));
    let mut summed = int_frame(1, 2, 300, Instructions::FULL, 8, 4);
    UdpPacket::new_unchecked(&mut summed[34..]).fill_checksum(host(1).1, host(2).1);
    frames.push((0, t + 30, summed));
    let mut plain = vec![0u8; 2048];
    let repr = RoceFrameRepr::new(host(1), host(2), 49153, BthRepr::new(Opcode::WriteMiddle, 9, 5));
    let len = repr.emit(&mut plain, &[7; 100]).expect("frame fits");
    plain.truncate(len);
    frames.push((0, t + 40, plain.clone()));
    let mut dying = int_frame(1, 2, 64, Instructions::HPCC, 8, 6);
    dying[22] = 1;
    let sum = int_format::checksum::checksum(&{
        let mut h = dying[14..34].to_vec();
        h[10..12].fill(0);
        h
    });
    dying[24..26].copy_from_slice(&sum.to_be_bytes());
    frames.push((0, t + 50, dying));
    frames.sort_by_key(|f| f.1);
    frames
}

enum Mode<'a> {
    Native(&'a Pipeline),
    P4(&'a P4Pipeline),
}

struct PortState {
    queue: EgressQueue,
    egress: EgressPort,
    counters: PortCounters,
    out: Vec<Vec<u8>>,
}

/// What left each port, in order, after `frames` went through the switch in `mode`.
fn forward(spec: &SwitchSpec, mode: &Mode, frames: &[(usize, u64, Vec<u8>)]) -> Vec<Vec<Vec<u8>>> {
    let pool = FramePool::new(2048, 16);
    let mut rng = fastrand::Rng::with_seed(1);
    let mut ports: Vec<PortState> = spec
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| PortState {
            queue: EgressQueue::new(p.rate, p.delay, p.buffer.0),
            egress: EgressPort::new(i, spec.node_id, p, spec.priorities.map),
            counters: PortCounters::default(),
            out: Vec::new(),
        })
        .collect();
    // Ingress and egress in packet states of their own, as on two workers: egress sees only
    // what the frame carries.
    let (mut ingress_work, mut egress_work) = match mode {
        Mode::Native(_) => (None, None),
        Mode::P4(p) => (Some(p.scratch()), Some(p.scratch())),
    };
    let mut start = |port: &mut PortState, until: Until| {
        while let Some(mut d) = port.queue.start_due(until) {
            match mode {
                Mode::Native(_) => egress::process(&mut d, &port.egress, &mut port.counters, &mut rng),
                Mode::P4(p) => {
                    let work = egress_work.as_mut().expect("a P4 switch's scratch");
                    let mut clone = None;
                    let e = p.egress(&mut d, &port.egress, work, &mut || pool.get(), &mut clone);
                    assert!(matches!(e, P4Egress::Send), "{e:?}");
                    egress::p4_sent(&d, &mut port.counters);
                }
            }
            port.queue.send(d);
        }
    };
    for (inp, at, bytes) in frames {
        let mut f = pool.get();
        f.buffer_mut()[..bytes.len()].copy_from_slice(bytes);
        f.len = bytes.len();
        f.ingress = *inp as u16;
        f.arrival_ns = *at;
        f.arrival_known = true;
        let to = match mode {
            Mode::Native(p) => match p.ingress(&mut f).0 {
                Verdict::Forward(o) => Some(o),
                _ => None,
            },
            Mode::P4(p) => match p
                .ingress(
                    &mut f,
                    *inp,
                    ingress_work.as_mut().expect("a P4 switch's scratch"),
                    None,
                )
                .verdict
            {
                P4Verdict::Forward(o) => Some(o),
                _ => None,
            },
        };
        let Some(o) = to else { continue };
        let until = ports[o].queue.before_arrival_of(&f);
        start(&mut ports[o], until);
        ports[o].queue.enqueue(f, 0).expect("the buffer has room");
    }
    for port in &mut ports {
        start(port, Until::now(u64::MAX / 2000));
        while let Some(r) = port.queue.release_due(u64::MAX / 2000) {
            port.out.push(r.frame.bytes().to_vec());
        }
    }
    ports.into_iter().map(|p| p.out).collect()
}

fn int_of(frame: &[u8]) -> Option<IntHeaders<'_>> {
    let layout = FrameLayout::parse(frame, DEFAULT_INT_PORT).ok()?;
    layout.int(frame)?.ok()
}

#[test]
fn int_transit_p4_writes_the_hop_records_the_built_in_pipeline_writes() {
    let spec = SwitchSpec::from_yaml(SWITCH, Path::new("int-transit.yaml")).expect("switch spec");
    let native = Pipeline::new(&spec);
    let loaded = intlab_p4::load(Path::new(PROGRAM)).unwrap_or_else(|e| panic!("{e}"));
    let dp = intlab_p4::Datapath::new(loaded.ir, "s7");
    intlab_p4::runtime_json::apply_text(&dp, "runtime", RUNTIME).unwrap_or_else(|e| panic!("{e}"));
    let p4 = P4Pipeline::new(dp, &spec.ports).expect("ports");

    let frames = traffic();
    let want = forward(&spec, &Mode::Native(&native), &frames);
    let got = forward(&spec, &Mode::P4(&p4), &frames);

    // The traffic means something: 80 frames into p2, queued; 5 to p1 (TTL 1 dies).
    assert_eq!(want[2].len(), 80);
    assert_eq!(want[1].len(), 5);
    let hops: Vec<_> = want[2]
        .iter()
        .map(|f| {
            int_of(f)
                .expect("INT on every frame")
                .hops()
                .next()
                .expect("one hop")
                .expect("hop parses")
        })
        .collect();
    assert!(
        hops.iter().any(|h| h.queue_occupancy.unwrap_or(0) > 10_000),
        "the queue built"
    );
    assert!(
        hops.iter()
            .all(|h| h.tx_bytes.is_some() && h.rate_kbps == Some(10_000_000))
    );
    let p1: Vec<_> = want[1].iter().map(|f| int_of(f)).collect();
    assert!(p1.iter().flatten().any(|i| i.md.hop_limit_exceeded), "E set");
    assert!(p1.iter().flatten().any(|i| i.md.mtu_exceeded), "M set");
    assert_eq!(p1.iter().filter(|i| i.is_none()).count(), 1, "the frame without INT");
    let summed = &want[1][3];
    let udp = UdpPacket::new_unchecked(&summed[34..]);
    assert!(udp.checksum() != 0 && udp.verify_checksum(host(1).1, host(2).1));

    for (port, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(w.len(), g.len(), "frames out of port {port}");
        for (k, (a, b)) in w.iter().zip(g).enumerate() {
            assert!(
                a == b,
                "port {port} frame {k} differs:\n built-in {a:02x?}\n P4       {b:02x?}"
            );
        }
    }
}
