//! What a link costs when it crosses machines (issue 36, run as root): h1 → s1 → s2 → h2 where
//! s1-s2 is an in-process link (one fabric, two workers), against the same where s1-s2 is a
//! VXLAN tunnel between two "machines" (network namespaces joined by a veth pair of MTU 1600;
//! s1 and s2 then separate switches of one worker each, as two sites run them), loaded as users
//! load them: iperf3 UDP (64 B and 1400 B, unlimited rate), TCP, and ping. Each path is
//! measured twice in mirrored order; the ratios are tunnel over in-process.
//!
//!     cargo bench -p intlab-benches --bench tunnel
//!
//! INTLAB_BENCH_SECS (default 3) sets each point's length. The s1-s2 link is 10 Gb/s with
//! 100 us of delay either way (the time a tunnel has to carry a frame; what the ping adds over
//! the other path beyond the frames' 66 bytes is the tunnel's own cost).

use std::net::Ipv4Addr;

use int_format::ethernet::MacAddress;
use int_format::int::DEFAULT_INT_PORT;
use intlab_benches::apps::{Hosts, iperf3_tcp, iperf3_udp, ping_ms};
use intlab_lab::netns::{self, Namespace};
use intlab_runtime::{PollMode, Runtime, RuntimeConfig};
use intlab_switch::config::{ArpMode, NextHop, PacketIo, PortIo, PortSpec, Route, SwitchSpec};
use intlab_switch::frame::FramePool;
use intlab_switch::units::{Bytes, Nanos, Rate};
use intlab_switch::{Fabric, Switch};

fn host(i: u8) -> (MacAddress, Ipv4Addr) {
    (MacAddress([2, 0, 0, 0, 0, i]), Ipv4Addr::new(198, 18, 0, i))
}

/// The hosts and the two machines, each host wired to its machine.
struct Machines {
    h1: Namespace,
    h2: Namespace,
    /// Machine a (s1) and b (s2).
    m: [Namespace; 2],
    /// Each machine's end of its host's veth.
    host_dev: [String; 2],
}

impl Machines {
    fn new(tag: &str) -> Machines {
        let pid = std::process::id() % 100_000;
        let ns = |n: &str| Namespace::create(&format!("{}b{pid}{tag}-{n}", netns::PREFIX)).expect("namespace");
        let (h1, h2, ma, mb) = (ns("h1"), ns("h2"), ns("ma"), ns("mb"));
        let d = |n: &str| format!("ilb{pid}{tag}{n}");
        netns::veth_pair(&d("h1"), &h1, &d("a1"), &ma).expect("h1's link");
        netns::veth_pair(&d("h2"), &h2, &d("b2"), &mb).expect("h2's link");
        netns::veth_pair(&d("ab"), &ma, &d("ba"), &mb).expect("the machines' link");
        for (m, dev, addr) in [(&ma, d("ab"), "10.254.0.1/24"), (&mb, d("ba"), "10.254.0.2/24")] {
            m.ip(&["addr", "add", addr, "dev", &dev]).expect("machine address");
            m.ip(&["link", "set", "dev", &dev, "mtu", "1600"]).expect("machine mtu");
        }
        for (i, ns, dev) in [(1u8, &h1, d("h1")), (2, &h2, d("h2"))] {
            let (mac, addr) = host(i);
            ns.configure(&dev, mac, addr, 24).expect("configure host");
            let (peer_mac, peer) = host(3 - i);
            ns.neighbor(&dev, peer, peer_mac).expect("static neighbour");
        }
        Machines {
            h1,
            h2,
            m: [ma, mb],
            host_dev: [d("a1"), d("b2")],
        }
    }

    fn hosts(&self) -> Hosts<'_> {
        Hosts {
            h1: &self.h1,
            h2: &self.h2,
            dst: host(2).1,
        }
    }

    /// Switch `k` (0: s1 on machine a, 1: s2 on machine b): its host's port first, then `link`.
    fn switch(&self, k: usize, link: PortIo, workers: usize) -> SwitchSpec {
        let port = |name: &str, io: PortIo, p4_port: u16| PortSpec {
            name: name.into(),
            io,
            rate: Rate(10_000_000_000),
            delay: Nanos(if p4_port == 2 { 100_000 } else { 0 }),
            buffer: Bytes(4_000_000),
            mtu: 1500,
            ecn: None,
            int: true,
            impair: Default::default(),
            impair_inbound: Default::default(),
            p4_port,
        };
        let host_port = PortIo::Veth {
            device: self.host_dev[k].clone(),
            netns: Some(self.m[k].path()),
        };
        let mine = host(k as u8 + 1).1;
        let other = host(2 - k as u8).1;
        SwitchSpec {
            name: format!("s{}", k + 1),
            node_id: k as u32 + 1,
            workers,
            int_port: DEFAULT_INT_PORT,
            ports: vec![port("host", host_port, 1), port("link", link, 2)],
            routes: vec![
                Route {
                    prefix: mine,
                    len: 32,
                    next: NextHop::Port(0),
                },
                Route {
                    prefix: other,
                    len: 32,
                    next: NextHop::Port(1),
                },
            ],
            macs: vec![],
            arp: ArpMode::Answer,
            neighbors: vec![],
            capture: None,
            counters_file: None,
            seed: 1,
            poll: PollMode::default(),
            packet_io: PacketIo::Syscalls,
            queue_trace_every: Nanos(0),
            p4: None,
            mmu: None,
            pfc: None,
            priorities: Default::default(),
        }
    }
}

/// The s1-s2 link as the path runs it.
enum Link {
    /// One fabric of both switches on a runtime of two workers.
    InProcess(Runtime, Fabric),
    /// Two switches, each on its own worker, over VXLAN.
    Tunnel(Switch, Switch),
}

fn in_process(m: &Machines) -> Link {
    let (a, b) = intlab_switch::port::link_pair();
    let specs = vec![m.switch(0, PortIo::Link(a), 2), m.switch(1, PortIo::Link(b), 2)];
    let rt = Runtime::start(&RuntimeConfig {
        workers: 2,
        poll: PollMode::default(),
        name: "bench".into(),
    })
    .expect("runtime");
    let capacity = specs.iter().map(intlab_switch::frame_capacity).max().unwrap_or(2048);
    let fabric = Fabric::start(&rt, specs, FramePool::new(capacity, 1 << 14), &|s, _| s).expect("fabric");
    Link::InProcess(rt, fabric)
}

fn tunnel(m: &Machines) -> Link {
    let mut switches = Vec::new();
    for (k, (local, remote)) in [("10.254.0.1", "10.254.0.2"), ("10.254.0.2", "10.254.0.1")]
        .into_iter()
        .enumerate()
    {
        let dev = "vxbench";
        let args = [
            "link",
            "add",
            dev,
            "type",
            "vxlan",
            "id",
            "1",
            "local",
            local,
            "remote",
            remote,
            "dstport",
            "4789",
            "nolearning",
        ];
        m.m[k].ip(&args).expect("vxlan device");
        m.m[k]
            .ip(&["link", "set", "dev", dev, "mtu", "1516", "up"])
            .expect("vxlan up");
        m.m[k].disable_offloads(dev).expect("offloads off");
        let io = PortIo::Tunnel {
            device: dev.into(),
            netns: m.m[k].path(),
            seal: intlab_switch::port::tunnel::TunnelSeal::new([5; 16], 1),
        };
        switches.push(Switch::start(m.switch(k, io, 1)).expect("switch starts"));
    }
    let s2 = switches.pop().expect("two");
    let s1 = switches.pop().expect("two");
    Link::Tunnel(s1, s2)
}

impl Link {
    fn stop(self) {
        match self {
            Link::InProcess(rt, fabric) => {
                if let Err(failed) = rt.stop() {
                    eprintln!("workers {failed:?} panicked");
                }
                drop(fabric);
            }
            Link::Tunnel(a, b) => {
                a.stop();
                b.stop();
            }
        }
    }

    /// Frames that came over the tunnel after their due time, and the latest (ns).
    fn late(&self) -> (u64, u64) {
        match self {
            Link::InProcess(..) => (0, 0),
            Link::Tunnel(a, b) => [a.counters(), b.counters()]
                .iter()
                .flat_map(|s| s.ports.iter())
                .fold((0, 0), |(n, m), p| {
                    (n + p.totals.tunnel_late, m.max(p.totals.tunnel_late_max_ns))
                }),
        }
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("tunnel bench: run as root (it builds network namespaces)");
        std::process::exit(1);
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let secs = std::env::var("INTLAB_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3u64);
    let machines = Machines::new("t");
    println!("intlab tunnel benchmark: {secs} s per point; s1-s2 10 Gb/s, 100 us; in-process link vs VXLAN tunnel");
    let mut sums = [[0.0f64; 4]; 2];
    for k in [0usize, 1, 1, 0] {
        let link = if k == 0 {
            in_process(&machines)
        } else {
            tunnel(&machines)
        };
        let h = machines.hosts();
        let figures = [
            iperf3_udp(h, 64, secs).0 / 1e3,
            iperf3_udp(h, 1400, secs).2,
            iperf3_tcp(h, secs),
            ping_ms(h),
        ];
        let (late, latest) = link.late();
        println!(
            "  {:<11} UDP 64 B {:>7.1} kpps, UDP 1400 B {:>6.3} Gb/s, TCP {:>6.3} Gb/s, ping {:.3} ms{}",
            if k == 0 { "in-process" } else { "tunnel" },
            figures[0],
            figures[1],
            figures[2],
            figures[3],
            if k == 1 {
                format!("; {late} frames late, the latest {:.0} us", latest as f64 / 1e3)
            } else {
                String::new()
            }
        );
        for (s, f) in sums[k].iter_mut().zip(figures) {
            *s += f / 2.0;
        }
        link.stop();
        if k == 1 {
            for m in &machines.m {
                m.ip(&["link", "del", "vxbench"]).expect("vxlan device removed");
            }
        }
    }
    let [p, t] = sums;
    println!(
        "tunnel / in-process (mean of two): UDP 64 B {:.2}x, UDP 1400 B {:.2}x, TCP {:.2}x; ping {:.3} vs {:.3} ms (+{:.0} us)",
        t[0] / p[0],
        t[1] / p[1],
        t[2] / p[2],
        t[3],
        p[3],
        (t[3] - p[3]) * 1e3
    );
}
