//! System benchmark (run as root): h1 → intlab switch → h2 against h1 → Linux bridge → h2, side
//! by side in one run, with one sendmmsg UDP blaster. Reports received packets per second and
//! Gb/s for 64 B and 1400 B UDP payloads, their ratio, and one-way latency at low load; then the
//! same two paths under real applications: iperf3 UDP (64 B and 1400 B, unlimited rate) and TCP,
//! and ping, sender and receiver in the hosts' namespaces.
//!
//!     cargo bench -p intlab-benches --bench system
//!
//! Every datagram carries an INT header (0 hops), so the switch stamps a hop on each; the bridge
//! forwards the same bytes. Then the switch running P4 programs against its built-in pipeline
//! at 64 B (blaster and iperf3): `p4/programs/int_transit.p4` (the same INT hop) and a
//! tutorial-style `basic` forwarder (`testbed/tests/p4/forward_dscp.p4`). Options via
//! environment: INTLAB_BENCH_SECS (default 3), INTLAB_BENCH_WORKERS (switch workers, default:
//! cores), INTLAB_BENCH_ONLY=p4 (the P4 part alone), INTLAB_BENCH_ONLY=io (the switch's port
//! I/O: system calls, mapped rings and AF_XDP, with the bridge, under the blaster and
//! applications),
//! INTLAB_BENCH_ONLY=apps (iperf3 and ping, bridge and switch), INTLAB_BENCH_ONLY=ping (ping
//! alone, bridge and switch, mirrored), INTLAB_BENCH_ONLY=floor (iperf3 and ping through a
//! forwarder with no logic, AF_PACKET and AF_XDP, beside the bridge and the switch),
//! INTLAB_BENCH_PIPELINES (the P4 part's pipelines by name, comma-separated, the first the
//! reference; default `built-in,int_transit.p4,basic`).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use int_format::ethernet::MacAddress;
use int_format::int::{DEFAULT_INT_PORT, Instructions};
use int_format::roles::source;
use intlab_benches::apps::{Hosts, iperf3_tcp, iperf3_udp, ping_ms};
use intlab_benches::bare_forwarder::{BareForwarder, BareIo};
use intlab_lab::netns::{self, Namespace};
use intlab_switch::Switch;
use intlab_switch::config::{ArpMode, CaptureSpec, NextHop, P4Spec, PacketIo, PortIo, PortSpec, Route, SwitchSpec};
use intlab_switch::units::{Bytes, Nanos, Rate};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn host(i: u8) -> (MacAddress, Ipv4Addr) {
    (MacAddress([2, 0, 0, 0, 0, i]), Ipv4Addr::new(198, 18, 0, i))
}

/// Two hosts joined through the device under test.
struct Path {
    _switch: Option<Switch>,
    _forwarder: Option<BareForwarder>,
    h1: Namespace,
    h2: Namespace,
    _mid: Namespace,
}

fn hosts(tag: &str) -> (Namespace, Namespace, Namespace, [String; 4]) {
    let pid = std::process::id() % 100_000;
    let ns = |n: &str| Namespace::create(&format!("{}b{pid}{tag}-{n}", netns::PREFIX)).expect("namespace");
    let (h1, h2, mid) = (ns("h1"), ns("h2"), ns("mid"));
    let d = |n: &str| format!("ilb{pid}{tag}{n}");
    let devs = [d("h1"), d("h2"), d("m1"), d("m2")];
    netns::veth_pair(&devs[0], &h1, &devs[2], &mid).expect("veth 1");
    netns::veth_pair(&devs[1], &h2, &devs[3], &mid).expect("veth 2");
    for (i, ns, dev) in [(1u8, &h1, &devs[0]), (2, &h2, &devs[1])] {
        let (mac, addr) = host(i);
        ns.configure(dev, mac, addr, 24).expect("configure host");
        let (peer_mac, peer) = host(3 - i);
        ns.neighbor(dev, peer, peer_mac).expect("static neighbour");
    }
    (h1, h2, mid, devs)
}

/// What the switch under test runs.
#[derive(Debug, Clone, Copy)]
enum SwitchPipeline {
    /// Its built-in pipeline.
    BuiltIn,
    /// A P4 program (path from the workspace root) with its runtime JSON.
    P4 {
        name: &'static str,
        program: &'static str,
        runtime: &'static str,
    },
}

const P4_PROGRAMS: [SwitchPipeline; 2] = [
    SwitchPipeline::P4 {
        name: "int_transit.p4",
        program: "p4/programs/int_transit.p4",
        runtime: r#"{ "table_entries": [
  { "table": "IntIngress.ipv4_lpm", "match": { "hdr.ipv4.dst": ["198.18.0.1", 32] },
    "action_name": "IntIngress.forward", "action_params": { "port": 1 } },
  { "table": "IntIngress.ipv4_lpm", "match": { "hdr.ipv4.dst": ["198.18.0.2", 32] },
    "action_name": "IntIngress.forward", "action_params": { "port": 2 } } ] }"#,
    },
    SwitchPipeline::P4 {
        name: "basic",
        program: "testbed/tests/p4/forward_dscp.p4",
        runtime: r#"{ "table_entries": [
  { "table": "LineIngress.ipv4_lpm", "match": { "hdr.ipv4.dstAddr": ["198.18.0.1", 32] },
    "action_name": "LineIngress.ipv4_forward",
    "action_params": { "dstAddr": "02:00:00:00:00:01", "port": 1 } },
  { "table": "LineIngress.ipv4_lpm", "match": { "hdr.ipv4.dstAddr": ["198.18.0.2", 32] },
    "action_name": "LineIngress.ipv4_forward",
    "action_params": { "dstAddr": "02:00:00:00:00:02", "port": 2 } } ] }"#,
    },
];

/// The switch's P4 settings for `pipeline`; the runtime file is written next to the bench's
/// other scratch files.
fn p4_spec(pipeline: SwitchPipeline) -> Option<P4Spec> {
    let SwitchPipeline::P4 { name, program, runtime } = pipeline else {
        return None;
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let file = std::env::temp_dir().join(format!("intlab-bench-{}-{name}.json", std::process::id()));
    std::fs::write(&file, runtime).expect("runtime file written");
    Some(P4Spec {
        program: root.join(program),
        preprocessor: Default::default(),
        runtime: Some(file),
        cli: None,
        trace: false,
        p4runtime: Default::default(),
        cpu_port: None,
    })
}

fn through_switch(workers: usize, pipeline: SwitchPipeline, packet_io: PacketIo) -> Path {
    let (h1, h2, mid, devs) = hosts(&format!("s{workers}"));
    let port = |name: &str, dev: &str, p4_port: u16| PortSpec {
        name: name.into(),
        io: PortIo::Veth {
            device: dev.into(),
            netns: Some(mid.path()),
        },
        rate: Rate(100_000_000_000),
        delay: Nanos(0),
        buffer: Bytes(4_000_000),
        mtu: 1500,
        ecn: None,
        int: true,
        impair: intlab_switch::impair::ImpairmentSpec::default(),
        impair_inbound: intlab_switch::impair::ImpairmentSpec::default(),
        p4_port,
    };
    let spec = SwitchSpec {
        name: "bench".into(),
        node_id: 1,
        workers,
        int_port: DEFAULT_INT_PORT,
        ports: vec![port("p1", &devs[2], 1), port("p2", &devs[3], 2)],
        routes: (1..=2)
            .map(|h| Route {
                prefix: host(h).1,
                len: 32,
                next: NextHop::Port(usize::from(h) - 1),
            })
            .collect(),
        macs: vec![],
        arp: ArpMode::Answer,
        neighbors: vec![],
        capture: None::<CaptureSpec>,
        counters_file: None,
        seed: 1,
        poll: intlab_runtime::PollMode::default(),
        packet_io,
        queue_trace_every: intlab_switch::units::Nanos(0),
        p4: p4_spec(pipeline),
        mmu: None,
        pfc: None,
        priorities: Default::default(),
    };
    // The program loads when the switch starts; its runtime file is not needed after that.
    let runtime = spec.p4.as_ref().and_then(|p| p.runtime.clone());
    let switch = Switch::start(spec).expect("switch starts");
    if let Some(f) = runtime {
        std::fs::remove_file(&f).expect("scratch runtime file removed");
    }
    Path {
        _switch: Some(switch),
        _forwarder: None,
        h1,
        h2,
        _mid: mid,
    }
}

fn through_bridge() -> Path {
    let (h1, h2, mid, devs) = hosts("br");
    mid.ip(&["link", "add", "br0", "type", "bridge"]).expect("bridge");
    for d in &devs[2..] {
        mid.ip(&["link", "set", "dev", d, "master", "br0"]).expect("enslave");
    }
    mid.ip(&["link", "set", "dev", "br0", "up"]).expect("bridge up");
    Path {
        _switch: None,
        _forwarder: None,
        h1,
        h2,
        _mid: mid,
    }
}

/// Through a forwarder with no logic (see [`BareForwarder`]).
fn through_bare_forwarder(io: BareIo) -> Path {
    let tag = match io {
        BareIo::Syscalls => "fs",
        BareIo::Xdp => "fx",
    };
    let (h1, h2, mid, devs) = hosts(tag);
    let fwd = BareForwarder::start(mid.path().as_path(), &devs[2], &devs[3], io).expect("bare forwarder starts");
    Path {
        _switch: None,
        _forwarder: Some(fwd),
        h1,
        h2,
        _mid: mid,
    }
}

fn int_datagram(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(16)];
    let config = source::SourceConfig {
        int_port: DEFAULT_INT_PORT,
        instructions: Instructions::HPCC,
        hop_limit: 8,
    };
    source::write_header(&mut p, &config, 4791).expect("room for the header");
    p
}

fn socket_in(ns: &Namespace, bind: SocketAddr, connect: Option<SocketAddr>) -> UdpSocket {
    let s = ns
        .run(move || {
            let s = UdpSocket::bind(bind)?;
            if let Some(c) = connect {
                s.connect(c)?;
            }
            Ok(s)
        })
        .expect("socket in namespace");
    let size: libc::c_int = 64 << 20;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        // SAFETY: valid fd and a live c_int.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                4,
            )
        };
    }
    s.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    s
}

/// Blasts `payload` with sendmmsg for `secs`; returns (received packets per second, Gb/s of
/// Ethernet frames) measured at the receiver over the middle of the run.
fn blast(path: &Path, payload: &[u8], secs: u64) -> (f64, f64) {
    let dst = SocketAddr::from((host(2).1, DEFAULT_INT_PORT));
    let rx = socket_in(&path.h2, dst, None);
    let tx = socket_in(&path.h1, SocketAddr::from((host(1).1, 40000)), Some(dst));
    let stop = Arc::new(AtomicBool::new(false));
    let counting = Arc::new(AtomicBool::new(false));
    let (stop2, counting2) = (stop.clone(), counting.clone());
    let receiver = std::thread::spawn(move || {
        const BATCH: usize = 64;
        let mut bufs = vec![[0u8; 2048]; BATCH];
        let mut iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: zeroed mmsghdr is valid; each points at one live iovec.
        let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        let mut tv = libc::timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        let (mut n, mut bytes, mut started) = (0u64, 0u64, None);
        while !stop2.load(Ordering::Relaxed) {
            // SAFETY: msgs point at valid iovecs over `bufs`, alive for the call.
            let r = unsafe {
                libc::recvmmsg(
                    rx.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_WAITFORONE,
                    &mut tv,
                )
            };
            if r > 0 && counting2.load(Ordering::Relaxed) {
                started.get_or_insert_with(Instant::now);
                n += r as u64;
                bytes += msgs[..r as usize]
                    .iter()
                    .map(|m| u64::from(m.msg_len) + 42)
                    .sum::<u64>();
            }
        }
        (n, bytes, started.map(|s| s.elapsed()))
    });
    let payload = payload.to_vec();
    let stop3 = stop.clone();
    let sender = std::thread::spawn(move || {
        const BATCH: usize = 64;
        let mut iov: Vec<libc::iovec> = (0..BATCH)
            .map(|_| libc::iovec {
                iov_base: payload.as_ptr() as *mut libc::c_void,
                iov_len: payload.len(),
            })
            .collect();
        // SAFETY: zeroed mmsghdr is valid; each points at one live iovec.
        let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        while !stop3.load(Ordering::Relaxed) {
            // SAFETY: msgs point at valid iovecs over `payload`, alive for the call.
            unsafe { libc::sendmmsg(tx.as_raw_fd(), msgs.as_mut_ptr(), BATCH as u32, 0) };
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    counting.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(secs));
    counting.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    let (n, bytes, elapsed) = receiver.join().expect("receiver");
    let t = elapsed.map_or(f64::NAN, |d| d.as_secs_f64().min(secs as f64).max(1e-9));
    (n as f64 / t, bytes as f64 * 8.0 / t / 1e9)
}

/// One-way latency at low load: 2000 datagrams 1 ms apart, each carrying its send time
/// (CLOCK_REALTIME); the receive time is the kernel's (SO_TIMESTAMPNS), so the receiving
/// thread's own wake-up delay is not counted. Returns (p50, p99) in us.
fn latency(path: &Path) -> (f64, f64) {
    let dst = SocketAddr::from((host(2).1, 9100));
    let rx = socket_in(&path.h2, dst, None);
    let on: libc::c_int = 1;
    // SAFETY: valid fd and a live c_int.
    unsafe {
        libc::setsockopt(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            4,
        )
    };
    let tx = socket_in(&path.h1, SocketAddr::from((host(1).1, 40001)), Some(dst));
    let receiver = std::thread::spawn(move || {
        let mut lat = Vec::new();
        loop {
            let mut buf = [0u8; 64];
            let mut control = [0u64; 8];
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: zeroed msghdr is valid; it points at live buffers for the call.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = 64;
            // SAFETY: as above.
            let n = unsafe { libc::recvmsg(rx.as_raw_fd(), &mut msg, 0) };
            if n < 8 {
                break;
            }
            let sent = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
            // SAFETY: the kernel filled msg_control; the walk stays inside it.
            let received = unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                if c.is_null() || (*c).cmsg_type != libc::SCM_TIMESTAMPNS {
                    continue;
                }
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            };
            lat.push(received.saturating_sub(sent));
        }
        lat
    });
    for _ in 0..2000 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let _ = tx.send(&now.to_le_bytes());
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut lat = receiver.join().expect("receiver");
    lat.sort_unstable();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p) as usize)
            .map_or(f64::NAN, |&v| v as f64 / 1000.0)
    };
    (q(0.5), q(0.99))
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("system bench: run as root (it builds network namespaces)");
        std::process::exit(1);
    }
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` and `cargo test --benches` probe harness=false benches.
    }
    let secs = env_or("INTLAB_BENCH_SECS", 3);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let workers = env_or("INTLAB_BENCH_WORKERS", cores as u64) as usize;
    match std::env::var("INTLAB_BENCH_ONLY").as_deref() {
        Ok("p4") => return p4_programs(secs, workers),
        Ok("io") => return packet_io(secs, workers),
        Ok("apps") => return with_applications(secs, workers),
        Ok("ping") => return ping_alone(workers),
        Ok("floor") => return floor(secs),
        _ => {}
    }
    // The blaster and latency points measure the switch as `intlab switch` runs it by default
    // (AF_XDP ports where possible, one worker for two ports) unless INTLAB_BENCH_WORKERS says.
    let main_workers = match std::env::var("INTLAB_BENCH_WORKERS") {
        Ok(_) => workers,
        Err(_) => intlab_switch::config::standalone_workers(2),
    };
    println!(
        "intlab system benchmark: {secs} s per point, switch workers {main_workers}, port I/O auto, INT stamping on"
    );
    println!(
        "{:<10} {:>14} {:>10} {:>14} {:>10} {:>8}",
        "payload", "bridge kpps", "Gb/s", "switch kpps", "Gb/s", "ratio"
    );
    for size in [64usize, 1400] {
        let payload = int_datagram(size);
        let bridge = through_bridge();
        let (b_pps, b_gbps) = blast(&bridge, &payload, secs);
        drop(bridge);
        let switch = through_switch(main_workers, SwitchPipeline::BuiltIn, PacketIo::Auto);
        let (s_pps, s_gbps) = blast(&switch, &payload, secs);
        drop(switch);
        println!(
            "{:<10} {:>14.1} {:>10.3} {:>14.1} {:>10.3} {:>8.2}",
            format!("{size} B"),
            b_pps / 1e3,
            b_gbps,
            s_pps / 1e3,
            s_gbps,
            s_pps / b_pps
        );
    }
    let bridge = through_bridge();
    let (b50, b99) = latency(&bridge);
    drop(bridge);
    let switch = through_switch(main_workers, SwitchPipeline::BuiltIn, PacketIo::Auto);
    let (s50, s99) = latency(&switch);
    let late = switch._switch.as_ref().map(|s| s.counters().ports).unwrap_or_default();
    drop(switch);
    for p in late {
        println!(
            "switch port {}: {} frames; released late by p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            p.name,
            p.totals.tx_frames,
            p.release_late_p50_ns as f64 / 1e3,
            p.release_late_p99_ns as f64 / 1e3,
            p.release_late_max_ns as f64 / 1e3
        );
    }
    println!("one-way latency at 1000 pps (us): bridge p50 {b50:.1} p99 {b99:.1}; switch p50 {s50:.1} p99 {s99:.1}");
    println!(
        "added by the switch over the bridge (us): p50 {:.1}, p99 {:.1}",
        s50 - b50,
        s99 - b99
    );
    with_applications(secs, workers);
    p4_programs(secs, workers);
}

/// Measures each of `n` paths twice, in mirrored order (0 to n-1, then back), and returns each
/// path's figures averaged over its two runs: on this shared machine a run's place in the
/// sequence moved it by a tenth or more.
fn mirrored<const K: usize>(n: usize, mut measure: impl FnMut(usize) -> [f64; K]) -> Vec<[f64; K]> {
    let mut sums = vec![[0.0; K]; n];
    for i in (0..n).chain((0..n).rev()) {
        for (sum, v) in sums[i].iter_mut().zip(measure(i)) {
            *sum += v / 2.0;
        }
    }
    sums
}

/// The switch running P4 programs against its built-in pipeline at 64 B, blaster and iperf3
/// UDP, received kpps and the ratio to the built-in pipeline, each pipeline twice in mirrored
/// order ([`mirrored`]).
fn p4_programs(secs: u64, workers: usize) {
    let payload = int_datagram(64);
    let iperf = std::process::Command::new("iperf3").arg("-V").output().is_ok();
    println!(
        "P4 programs at 64 B, switch with {workers} workers, each pipeline twice in mirrored order (BMv2 simple_switch: 29.5 kpps on this machine class):"
    );
    let name = |p: &SwitchPipeline| match p {
        SwitchPipeline::BuiltIn => "built-in",
        SwitchPipeline::P4 { name, .. } => name,
    };
    let all = std::iter::once(SwitchPipeline::BuiltIn).chain(P4_PROGRAMS);
    let pipelines: Vec<SwitchPipeline> = match std::env::var("INTLAB_BENCH_PIPELINES") {
        Ok(list) => list
            .split(',')
            .map(|wanted| {
                all.clone()
                    .find(|p| name(p) == wanted.trim())
                    .unwrap_or_else(|| panic!("INTLAB_BENCH_PIPELINES: no pipeline `{wanted}`"))
            })
            .collect(),
        Err(_) => all.collect(),
    };
    let means = mirrored(pipelines.len(), |i| {
        let path = through_switch(workers, pipelines[i], PacketIo::Syscalls);
        let (pps, _) = blast(&path, &payload, secs);
        let udp = if iperf {
            iperf3_udp(path.hosts(), 64, secs).0
        } else {
            f64::NAN
        };
        drop(path);
        println!(
            "    {:<16} blaster {:>8.1} kpps, iperf3 UDP {:>8.1} kpps",
            name(&pipelines[i]),
            pps / 1e3,
            udp / 1e3
        );
        [pps, udp]
    });
    let [b_pps, b_udp] = means[0];
    for (p, &[pps, udp]) in pipelines.iter().zip(&means) {
        println!(
            "  {:<16} blaster {:>8.1} kpps ({:.2}x), iperf3 UDP {:>8.1} kpps ({:.2}x); {:.1}x BMv2",
            name(p),
            pps / 1e3,
            pps / b_pps,
            udp / 1e3,
            udp / b_udp,
            pps / 29_500.0
        );
    }
}

/// What iperf3 and ping measured over one path.
#[derive(Debug, Default, Clone, Copy)]
struct AppFigures {
    /// UDP, 64-byte payloads, unlimited rate: datagrams per second the receiver got.
    udp64_kpps: f64,
    /// Share of those datagrams lost.
    udp64_loss: f64,
    /// UDP, 1400-byte payloads: Gb/s received.
    udp1400_gbps: f64,
    /// TCP: Gb/s received.
    tcp_gbps: f64,
    /// ping round trip, mean (ms).
    ping_ms: f64,
}

impl Path {
    /// Its two hosts, for the applications.
    fn hosts(&self) -> Hosts<'_> {
        Hosts {
            h1: &self.h1,
            h2: &self.h2,
            dst: host(2).1,
        }
    }
}

/// Ping alone through the bridge and the switch, each twice in mirrored order.
fn ping_alone(workers: usize) {
    let means = mirrored(2, |i| {
        let path = if i == 0 {
            through_bridge()
        } else {
            through_switch(workers, SwitchPipeline::BuiltIn, PacketIo::Auto)
        };
        [ping_ms(path.hosts())]
    });
    let (b, s) = (means[0][0], means[1][0]);
    println!(
        "ping, bridge vs switch with {workers} workers: {b:.3} vs {s:.3} ms ({:.2}x)",
        s / b
    );
}

fn applications(path: &Path, secs: u64) -> AppFigures {
    let (pps, loss, _) = iperf3_udp(path.hosts(), 64, secs);
    let (_, _, gbps) = iperf3_udp(path.hosts(), 1400, secs);
    AppFigures {
        udp64_kpps: pps / 1e3,
        udp64_loss: loss,
        udp1400_gbps: gbps,
        tcp_gbps: iperf3_tcp(path.hosts(), secs),
        ping_ms: ping_ms(path.hosts()),
    }
}

/// The switch's ways of reading and writing its veth ports (system calls, mapped rings, AF_XDP)
/// against the bridge: blaster at 64 B and 1400 B, iperf3 UDP and TCP, ping, each path twice in
/// mirrored order ([`mirrored`]).
fn packet_io(secs: u64, workers: usize) {
    #[derive(Clone, Copy)]
    enum Way {
        Bridge,
        Switch(PacketIo),
    }
    let ways = [
        Way::Bridge,
        Way::Switch(PacketIo::Syscalls),
        Way::Switch(PacketIo::Ring),
        Way::Switch(PacketIo::Xdp),
    ];
    let name = |w: Way| match w {
        Way::Bridge => "bridge",
        Way::Switch(PacketIo::Syscalls) => "switch, syscalls",
        Way::Switch(PacketIo::Ring) => "switch, rings",
        Way::Switch(PacketIo::Xdp | PacketIo::Auto) => "switch, AF_XDP",
    };
    let (small, large) = (int_datagram(64), int_datagram(1400));
    println!("switch port I/O, {workers} workers, each path twice in mirrored order:");
    let means = mirrored(ways.len(), |i| {
        let path = match ways[i] {
            Way::Bridge => through_bridge(),
            Way::Switch(io) => through_switch(workers, SwitchPipeline::BuiltIn, io),
        };
        let (b64, _) = blast(&path, &small, secs);
        let (_, b1400) = blast(&path, &large, secs);
        let a = applications(&path, secs);
        drop(path);
        let row = [
            b64 / 1e3,
            b1400,
            a.udp64_kpps,
            a.udp1400_gbps,
            a.tcp_gbps,
            a.ping_ms,
            a.udp64_loss * 100.0,
        ];
        println!(
            "    {:<17} blaster 64 B {:>7.1} kpps, 1400 B {:>5.2} Gb/s; iperf3 UDP 64 B {:>6.1} kpps (loss {:.1} %), 1400 B {:>5.2} Gb/s, TCP {:>5.2} Gb/s; ping {:.3} ms",
            name(ways[i]),
            row[0],
            row[1],
            row[2],
            row[6],
            row[3],
            row[4],
            row[5]
        );
        row
    });
    let base = means[0];
    for (w, m) in ways.iter().zip(&means) {
        println!(
            "  {:<17} blaster 64 B {:.2}x, 1400 B {:.2}x; iperf3 UDP 64 B {:.2}x, 1400 B {:.2}x, TCP {:.2}x; ping {:.2}x (of the bridge)",
            name(*w),
            m[0] / base[0],
            m[1] / base[1],
            m[2] / base[2],
            m[3] / base[3],
            m[4] / base[4],
            m[5] / base[5]
        );
    }
}

/// Runs the applications over `path`, takes it down, prints its row under `label` and returns
/// its figures: UDP 64 B kpps, UDP 1400 B Gb/s, TCP Gb/s, ping ms.
fn application_row(label: &str, path: Path, secs: u64) -> [f64; 4] {
    let a = applications(&path, secs);
    drop(path);
    println!(
        "    {label:<34} UDP 64 B {:>6.1} kpps (loss {:.1} %), 1400 B {:>5.2} Gb/s, TCP {:>5.2} Gb/s; ping {:.3} ms",
        a.udp64_kpps,
        a.udp64_loss * 100.0,
        a.udp1400_gbps,
        a.tcp_gbps,
        a.ping_ms
    );
    [a.udp64_kpps, a.udp1400_gbps, a.tcp_gbps, a.ping_ms]
}

/// Prints every path's figures but the first's as ratios of the first's (the bridge's).
fn application_ratios(labels: &[String], means: &[[f64; 4]]) {
    let b = means[0];
    for (label, m) in labels.iter().zip(means).skip(1) {
        println!(
            "  {label:<34} UDP 64 B {:.2}x, UDP 1400 B {:.2}x, TCP {:.2}x of the bridge; ping {:.2}x ({:.3} vs {:.3} ms)",
            m[0] / b[0],
            m[1] / b[1],
            m[2] / b[2],
            m[3] / b[3],
            m[3],
            b[3]
        );
    }
}

/// What applications get through a forwarder with no logic at all (AF_PACKET and AF_XDP) and
/// through the switch as `intlab switch` runs by default, against the bridge, each path twice
/// in mirrored order: the share of the bridge no user-space switch on this machine can exceed.
fn floor(secs: u64) {
    #[derive(Clone, Copy)]
    enum Way {
        Bridge,
        Bare(BareIo),
        Switch,
    }
    let ways = [
        Way::Bridge,
        Way::Bare(BareIo::Syscalls),
        Way::Bare(BareIo::Xdp),
        Way::Switch,
    ];
    let default_workers = intlab_switch::config::standalone_workers(2);
    let labels: Vec<String> = ways
        .iter()
        .map(|w| match w {
            Way::Bridge => "bridge",
            Way::Bare(BareIo::Syscalls) => "no logic, AF_PACKET",
            Way::Bare(BareIo::Xdp) => "no logic, AF_XDP",
            Way::Switch => "switch (default)",
        })
        .map(String::from)
        .collect();
    println!("applications through a forwarder with no logic, each path twice in mirrored order:");
    let means = mirrored(ways.len(), |i| {
        let path = match ways[i] {
            Way::Bridge => through_bridge(),
            Way::Bare(io) => through_bare_forwarder(io),
            Way::Switch => through_switch(default_workers, SwitchPipeline::BuiltIn, PacketIo::Auto),
        };
        application_row(&labels[i], path, secs)
    });
    application_ratios(&labels, &means);
}

/// The switch and the bridge under real applications (iperf3, ping), same namespaces and veths,
/// each path twice in mirrored order: the switch as `intlab switch` runs by default (AF_XDP
/// ports, one worker for its two ports), and with `workers` workers on AF_XDP and on AF_PACKET
/// sockets (the configuration issue 13 measured).
fn with_applications(secs: u64, workers: usize) {
    for program in ["iperf3", "ping"] {
        if std::process::Command::new(program).arg("-V").output().is_err() {
            println!("applications: skipped, `{program}` is not installed (apt-get install iperf3 iputils-ping)");
            return;
        }
    }
    let default_workers = intlab_switch::config::standalone_workers(2);
    let ways: [Option<(usize, PacketIo)>; 4] = [
        None,
        Some((workers, PacketIo::Syscalls)),
        Some((workers, PacketIo::Auto)),
        Some((default_workers, PacketIo::Auto)),
    ];
    let labels: Vec<String> = ways
        .iter()
        .enumerate()
        .map(|(i, w)| match w {
            None => "bridge".to_string(),
            Some((n, io)) => format!(
                "switch, {n} worker{}, {}{}",
                if *n == 1 { "" } else { "s" },
                if *io == PacketIo::Syscalls {
                    "AF_PACKET"
                } else {
                    "AF_XDP"
                },
                if i == 3 { " (default)" } else { "" }
            ),
        })
        .collect();
    println!("applications (iperf3 and ping in h1 and h2), each path twice in mirrored order:");
    let means = mirrored(ways.len(), |i| {
        let path = match ways[i] {
            None => through_bridge(),
            Some((n, io)) => through_switch(n, SwitchPipeline::BuiltIn, io),
        };
        application_row(&labels[i], path, secs)
    });
    application_ratios(&labels, &means);
}
