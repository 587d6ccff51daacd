//! Per-packet cost of the switch's pipeline in memory, the built-in one against P4 programs:
//! ingress, the egress queue and egress at the start of transmission, on one small RoCEv2
//! frame with an INT header (64 bytes of UDP payload, as the system bench's 64 B point).
//! The programs: `p4/programs/int_transit.p4` (the same work as the built-in pipeline) and
//! a tutorial-style `basic` forwarder (`testbed/tests/p4/forward_dscp.p4`: lpm, MAC rewrite,
//! TTL, DSCP, checksum). And the built-in pipeline once more on a switch with a shared buffer and
//! PFC, each frame counted in and out of the MMU as the port engine counts it.
//!
//!     cargo bench -p intlab-benches --bench p4

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use int_format::ethernet::MacAddress;
use int_format::frame::{FrameLayout, RoceFrameRepr};
use int_format::int::{DEFAULT_INT_PORT, Instructions};
use int_format::roce::{BthRepr, Opcode};
use int_format::roles::source;
use intlab_switch::SwitchSpec;
use intlab_switch::counters::PortCounters;
use intlab_switch::egress::{self, EgressPort};
use intlab_switch::frame::{FramePool, FrameStack};
use intlab_switch::pipeline::{P4Pipeline, P4Scratch, P4Verdict, Pipeline, Verdict};
use intlab_switch::tm::{EgressQueue, Mmu, MmuSpec, PfcSpec, Until, mmu_port};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

const SWITCH: &str = "\
node_id: 1
ports:
  - { name: p1, kind: tap, rate: 100Gbps, delay: 0us, buffer: 4MB }
  - { name: p2, kind: tap, rate: 100Gbps, delay: 0us, buffer: 4MB }
routes:
  - { prefix: 198.18.0.1/32, port: p1 }
  - { prefix: 198.18.0.2/32, port: p2 }
";

fn host(n: u8) -> (MacAddress, Ipv4Addr) {
    (MacAddress([2, 0x1b, 0, 0, 0, n - 1]), Ipv4Addr::new(198, 18, 0, n))
}

/// h1 → h2, 64 bytes of UDP payload: INT shim and MD header, BTH, 20 bytes, ICRC.
fn frame() -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let repr = RoceFrameRepr::new(host(1), host(2), 49152, BthRepr::new(Opcode::WriteMiddle, 7, 1));
    let len = repr.emit(&mut buf, &[0xa5; 20]).expect("frame fits");
    let layout = FrameLayout::parse(&buf[..len], DEFAULT_INT_PORT).expect("valid frame");
    let cfg = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions: Instructions::HPCC,
        hop_limit: 8,
    };
    let len = source::insert(&mut buf, &layout, &cfg).expect("INT inserted");
    buf.truncate(len);
    buf
}

/// The same frame with a UDP checksum, as kernel sockets send (the system bench's): a program
/// that keeps it right sums the payload again.
fn frame_with_udp_checksum() -> Vec<u8> {
    let mut f = frame();
    int_format::udp::UdpPacket::new_unchecked(&mut f[34..]).fill_checksum(host(1).1, host(2).1);
    f
}

fn program(file: &str, runtime: &str) -> P4Pipeline {
    let spec = SwitchSpec::from_yaml(SWITCH, Path::new("bench.yaml")).expect("switch spec");
    let loaded = intlab_p4::load(&Path::new(ROOT).join(file)).unwrap_or_else(|e| panic!("{e}"));
    let dp = intlab_p4::Datapath::new(loaded.ir, "s1");
    intlab_p4::runtime_json::apply_text(&dp, "bench", runtime).unwrap_or_else(|e| panic!("{e}"));
    P4Pipeline::new(dp, &spec.ports).expect("ports")
}

const INT_TRANSIT: &str = r#"{ "table_entries": [
  { "table": "IntIngress.ipv4_lpm", "match": { "hdr.ipv4.dst": ["198.18.0.2", 32] },
    "action_name": "IntIngress.forward", "action_params": { "port": 2 } } ] }"#;

const BASIC: &str = r#"{ "table_entries": [
  { "table": "LineIngress.ipv4_lpm", "match": { "hdr.ipv4.dstAddr": ["198.18.0.2", 32] },
    "action_name": "LineIngress.ipv4_forward",
    "action_params": { "dstAddr": "02:1b:00:00:00:01", "port": 2 } } ] }"#;

enum Mode {
    Native(Box<Pipeline>),
    P4(Box<P4Pipeline>),
}

/// One egress port and the frames going through it.
struct Stage {
    /// Free buffers as a switch worker keeps them: its own stack in front of the shared pool.
    frames: FrameStack,
    queue: EgressQueue,
    egress: EgressPort,
    counters: PortCounters,
    rng: fastrand::Rng,
    now_ns: u64,
    /// The packet states a P4 program runs in (as a switch worker keeps them).
    scratch: Option<P4Scratch>,
    /// The switch's shared buffer with PFC, when the bench counts frames in and out of one.
    mmu: Option<Mmu>,
}

impl Stage {
    fn new(shared_buffer: bool) -> Stage {
        let spec = SwitchSpec::from_yaml(SWITCH, Path::new("bench.yaml")).expect("switch spec");
        let p = &spec.ports[1];
        let mmu = shared_buffer.then(|| {
            let pfc = PfcSpec::default();
            let ports = spec
                .ports
                .iter()
                .map(|p| mmu_port(p.rate.0, p.delay.0, 1514, Some(&pfc)));
            Mmu::new(8 << 20, &MmuSpec::default(), Some(pfc), ports.collect())
        });
        Stage {
            frames: FrameStack::new(FramePool::new(2048, 16)),
            queue: EgressQueue::new(p.rate, p.delay, p.buffer.0),
            egress: EgressPort::new(1, spec.node_id, p, spec.priorities.map),
            counters: PortCounters::default(),
            rng: fastrand::Rng::with_seed(1),
            now_ns: 0,
            scratch: None,
            mmu,
        }
    }

    /// One frame in on p1 and out of p2, 100 ns after the previous one (no queue builds).
    fn forward(&mut self, mode: &Mode, template: &[u8]) -> usize {
        self.now_ns += 100;
        let mut f = self.frames.get();
        f.buffer_mut()[..template.len()].copy_from_slice(template);
        f.len = template.len();
        f.arrival_ns = self.now_ns;
        let forwarded = match mode {
            Mode::Native(p) => matches!(p.ingress(&mut f).0, Verdict::Forward(1)),
            Mode::P4(p) => {
                let work = self.scratch.get_or_insert_with(|| p.scratch());
                matches!(p.ingress(&mut f, 0, work, None).verdict, P4Verdict::Forward(1))
            }
        };
        assert!(forwarded, "the frame is routed to p2");
        // Counted in the shared buffer as the port engine counts it: in at the queue, out at the
        // start of transmission (lossless priority 3, RoCE's).
        let (len, at) = (f.len as u64, f.arrival_ns);
        if let Some(m) = &self.mmu {
            black_box(m.admit(0, 1, 3, len, at));
        }
        self.queue.enqueue(f, 0).expect("room");
        let mut d = self.queue.start_due(Until::now(self.now_ns)).expect("starts at once");
        if let Some(m) = &self.mmu {
            black_box(m.release(0, 1, 3, len));
        }
        match mode {
            Mode::Native(_) => {
                egress::process(&mut d, &self.egress, &mut self.counters, &mut self.rng);
            }
            Mode::P4(p) => {
                let work = self.scratch.as_mut().expect("made at ingress");
                let mut clone = None;
                let frames = &mut self.frames;
                p.egress(&mut d, &self.egress, work, &mut || frames.get(), &mut clone);
                egress::p4_sent(&d, &mut self.counters);
            }
        }
        self.queue.send(d);
        let out = self.queue.release_due(self.now_ns + 1_000).expect("released");
        let len = out.frame.len;
        self.frames.put(out.frame);
        len
    }
}

fn per_packet(c: &mut Criterion) {
    let spec = SwitchSpec::from_yaml(SWITCH, Path::new("bench.yaml")).expect("switch spec");
    let templates = [("", frame()), (", UDP checksum", frame_with_udp_checksum())];
    let modes = [
        ("built-in", Mode::Native(Box::new(Pipeline::new(&spec)))),
        (
            "int_transit.p4",
            Mode::P4(Box::new(program("p4/programs/int_transit.p4", INT_TRANSIT))),
        ),
        (
            "basic (forward_dscp.p4)",
            Mode::P4(Box::new(program("testbed/tests/p4/forward_dscp.p4", BASIC))),
        ),
    ];
    let mut g = c.benchmark_group("switch_per_packet");
    g.throughput(Throughput::Elements(1));
    for (variant, template) in &templates {
        for (name, mode) in &modes {
            let mut stage = Stage::new(false);
            let out = stage.forward(mode, template);
            assert!(out >= template.len(), "{name}: {out} bytes out of {}", template.len());
            g.bench_function(format!("{name}{variant}"), |b| {
                b.iter(|| black_box(stage.forward(mode, black_box(template))))
            });
        }
    }
    // The built-in pipeline on a switch with a shared buffer and PFC.
    let (mode, template) = (&modes[0].1, &templates[0].1);
    let mut stage = Stage::new(true);
    stage.forward(mode, template);
    g.bench_function("built-in, shared buffer with PFC", |b| {
        b.iter(|| black_box(stage.forward(mode, black_box(template))))
    });
    g.finish();
}

criterion_group!(benches, per_packet);
criterion_main!(benches);
