//! Small labs for the switch tests: hosts in namespaces around one or two switches. Everything
//! is removed when the lab is dropped, also when a test fails.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use int_format::ethernet::MacAddress;
use intlab_switch::Switch;
use intlab_switch::config::{ArpMode, NextHop, PortIo, PortSpec, Route, SwitchSpec};
use intlab_switch::units::{Bytes, Nanos, Rate};
use intlab_testbed::netns::{self, Namespace};

/// Tests that measure rates or queues run one at a time: they share two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the one-at-a-time lock (a failed test does not poison it for the others).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fails unless running as root (the tests build namespaces; `scripts/test` runs them as root).
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "these tests create network namespaces: run them as root (scripts/test)"
    );
}

/// A name stem unique to this test process and `tag` (two characters).
pub fn stem(tag: &str) -> (String, String) {
    let pid = std::process::id() % 100_000;
    (format!("{}t{pid}{tag}", netns::PREFIX), format!("ilb{pid}{tag}"))
}

/// Host `i`'s MAC and address.
pub fn host(i: u8) -> (MacAddress, Ipv4Addr) {
    (MacAddress([2, 0, 0, 0, 0, i]), Ipv4Addr::new(198, 18, 0, i))
}

/// A port with plenty of everything; tests change what they measure.
pub fn port(name: &str, io: PortIo) -> PortSpec {
    PortSpec {
        name: name.into(),
        io,
        rate: Rate(1_000_000_000),
        delay: Nanos(0),
        buffer: Bytes(1_000_000),
        mtu: 1500,
        ecn: None,
        int: true,
        loss: 0.0,
    }
}

/// A switch spec with `ports`, /32 routes for `hosts` (host i behind port index), ARP answers.
pub fn switch_spec(
    name: &str,
    node_id: u32,
    ports: Vec<PortSpec>,
    hosts: &[(u8, usize)],
    capture: Option<&Path>,
) -> SwitchSpec {
    SwitchSpec {
        name: name.into(),
        node_id,
        workers: 2,
        int_port: int_format::int::DEFAULT_INT_PORT,
        ports,
        routes: hosts
            .iter()
            .map(|&(h, p)| Route {
                prefix: host(h).1,
                len: 32,
                next: NextHop::Port(p),
            })
            .collect(),
        macs: vec![],
        arp: ArpMode::Answer,
        neighbors: (1..=2).map(|h| (host(h).1, host(h).0)).collect(),
        capture: capture.map(|dir| intlab_switch::config::CaptureSpec {
            dir: dir.to_owned(),
            ports: vec![],
            drops: true,
        }),
        counters_file: None,
        seed: 1,
        idle_poll: intlab_switch::config::DEFAULT_IDLE_POLL,
    }
}

/// How hosts attach to the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// TAP devices created by the switch and moved into the hosts.
    Tap,
    /// veth pairs, the switch's ends in a switch namespace.
    Veth,
}

/// Two hosts, h1 and h2, each on its own port of one switch (or of a chain of switches).
/// Field order is drop order: switches close their devices before namespaces go.
pub struct TwoHosts {
    /// The switches, first the one h1 is on.
    pub switches: Vec<Switch>,
    /// Host 1 (198.18.0.1).
    pub h1: Namespace,
    /// Host 2 (198.18.0.2).
    pub h2: Namespace,
    /// Namespace holding the switch ends of veth pairs.
    pub sw: Option<Namespace>,
    /// The hosts' interface names.
    pub dev: [String; 2],
    /// Capture folder, when captures are on.
    pub captures: Option<PathBuf>,
}

impl TwoHosts {
    /// h1 - switch - h2. `tune` adjusts the switch (ports: [to h1, to h2]) before it starts.
    pub fn single(tag: &str, attach: Attach, capture: bool, tune: impl FnOnce(&mut SwitchSpec)) -> TwoHosts {
        require_root();
        let (ns, dev) = stem(tag);
        let h1 = Namespace::create(&format!("{ns}-h1")).expect("namespace h1");
        let h2 = Namespace::create(&format!("{ns}-h2")).expect("namespace h2");
        let host_dev = [format!("{dev}h1"), format!("{dev}h2")];
        let sw_dev = [format!("{dev}s1"), format!("{dev}s2")];
        let sw = match attach {
            Attach::Tap => None,
            Attach::Veth => {
                let sw = Namespace::create(&format!("{ns}-sw")).expect("namespace sw");
                netns::veth_pair(&host_dev[0], &h1, &sw_dev[0], &sw).expect("veth 1");
                netns::veth_pair(&host_dev[1], &h2, &sw_dev[1], &sw).expect("veth 2");
                Some(sw)
            }
        };
        let io = |i: usize| match attach {
            Attach::Tap => PortIo::Tap {
                device: host_dev[i].clone(),
            },
            Attach::Veth => PortIo::Veth {
                device: sw_dev[i].clone(),
                netns: sw.as_ref().map(Namespace::path),
            },
        };
        let ports = vec![port("p1", io(0)), port("p2", io(1))];
        let captures = capture.then(|| scratch_dir(tag));
        let mut spec = switch_spec("s1", 1, ports, &[(1, 0), (2, 1)], captures.as_deref());
        tune(&mut spec);
        let mut lab = TwoHosts {
            switches: vec![],
            h1,
            h2,
            sw,
            dev: host_dev.clone(),
            captures,
        };
        lab.switches.push(Switch::start(spec).expect("switch starts"));
        if attach == Attach::Tap {
            netns::move_into(&host_dev[0], &lab.h1).expect("move tap 1");
            netns::move_into(&host_dev[1], &lab.h2).expect("move tap 2");
        }
        lab.configure_hosts();
        lab
    }

    /// h1 - s1 - (in-process link) - s2 - h2, TAP-attached. `tune` gets
    /// [s1 to h1, s1 to s2] and [s2 to s1, s2 to h2].
    pub fn chain(tag: &str, tune: impl FnOnce(&mut [PortSpec], &mut [PortSpec])) -> TwoHosts {
        require_root();
        let (ns, dev) = stem(tag);
        let h1 = Namespace::create(&format!("{ns}-h1")).expect("namespace h1");
        let h2 = Namespace::create(&format!("{ns}-h2")).expect("namespace h2");
        let host_dev = [format!("{dev}h1"), format!("{dev}h2")];
        let (a, b) = intlab_switch::port::link_pair(4096);
        let mut p1 = vec![
            port(
                "p1",
                PortIo::Tap {
                    device: host_dev[0].clone(),
                },
            ),
            port("p2", PortIo::Link(a)),
        ];
        let mut p2 = vec![
            port("p1", PortIo::Link(b)),
            port(
                "p2",
                PortIo::Tap {
                    device: host_dev[1].clone(),
                },
            ),
        ];
        tune(&mut p1, &mut p2);
        let captures = Some(scratch_dir(tag));
        let s1 = switch_spec("s1", 1, p1, &[(1, 0), (2, 1)], captures.as_deref());
        let s2 = switch_spec("s2", 2, p2, &[(1, 0), (2, 1)], captures.as_deref());
        let pool = intlab_switch::frame::FramePool::new(intlab_switch::frame_capacity(&s1), 1 << 14);
        let mut lab = TwoHosts {
            switches: vec![],
            h1,
            h2,
            sw: None,
            dev: host_dev.clone(),
            captures,
        };
        lab.switches
            .push(Switch::start_with_pool(s1, pool.clone()).expect("switch 1 starts"));
        lab.switches
            .push(Switch::start_with_pool(s2, pool).expect("switch 2 starts"));
        netns::move_into(&host_dev[0], &lab.h1).expect("move tap 1");
        netns::move_into(&host_dev[1], &lab.h2).expect("move tap 2");
        lab.configure_hosts();
        lab
    }

    fn configure_hosts(&self) {
        for (i, ns) in [(1u8, &self.h1), (2, &self.h2)] {
            let (mac, addr) = host(i);
            ns.configure(&self.dev[usize::from(i) - 1], mac, addr, 24)
                .expect("configure host");
        }
    }

    /// Stops every switch and returns their final counters, in order.
    pub fn stop(&mut self) -> Vec<intlab_switch::SwitchSnapshot> {
        self.switches.drain(..).map(Switch::stop).collect()
    }

    /// The capture file of `switch`'s `port`.
    pub fn capture(&self, switch: &str, port: &str) -> PathBuf {
        self.captures
            .as_ref()
            .expect("captures on")
            .join(format!("{switch}-{port}.pcapng"))
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        self.switches.clear();
        if let Some(dir) = &self.captures
            && !std::thread::panicking()
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh folder under the target's scratch space.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("switch-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A UDP socket bound inside `ns` at `addr`, with a receive buffer large enough that a test
/// thread waiting for the CPU loses nothing.
pub fn udp_in(ns: &Namespace, addr: SocketAddr) -> UdpSocket {
    use std::os::fd::AsRawFd;
    let s = ns.run(move || UdpSocket::bind(addr)).expect("bind in namespace");
    s.set_read_timeout(Some(Duration::from_millis(500))).expect("timeout");
    let size: libc::c_int = 32 << 20;
    // SAFETY: valid fd and a live c_int of the size passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "SO_RCVBUFFORCE");
    s
}

/// Sets IP_TOS (DSCP and ECN bits) on a socket.
pub fn set_tos(s: &UdpSocket, tos: u8) {
    use std::os::fd::AsRawFd;
    let v = libc::c_int::from(tos);
    // SAFETY: valid fd and a live c_int of the size passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            (&v as *const libc::c_int).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "IP_TOS");
}

/// Runs `intlab inspect --json` on a capture and returns one JSON value per frame.
pub fn inspect(path: &Path) -> Vec<serde_json::Value> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_intlab"))
        .args(["inspect", "--json"])
        .arg(path)
        .output()
        .expect("run intlab inspect");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("utf8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

/// The UDP payload a host sends to carry INT through the switch: shim and MD header with zero
/// hops (FULL instructions), then a RoCE-like body of `body` bytes.
pub fn int_payload(body: usize, hop_limit: u8) -> Vec<u8> {
    use int_format::int::{Instructions, source};
    let mut p = vec![0u8; 16 + body];
    let config = source::SourceConfig {
        int_port: int_format::int::DEFAULT_INT_PORT,
        instructions: Instructions::FULL,
        hop_limit,
    };
    source::write_header(&mut p, &config, 4791).expect("room for the header");
    for (i, b) in p[16..].iter_mut().enumerate() {
        *b = i as u8;
    }
    p
}
