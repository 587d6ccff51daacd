//! PFC through the lab: line-rate senders into one port, with a shared buffer too small for
//! them. With PFC the fabric is lossless and every pause is a real frame on the wire, decoded by
//! tshark's own dissector, counted alike by the switch that sent it and the host that obeyed
//! it; without PFC the same buffer drops. A host alone, paused by frames a test writes on its
//! link, measured from the switch's capture of what it sent. And a pause storm from a receiver
//! that stopped reading, which freezes its sender's other flow unless the PFC watchdog steps
//! in. Head-of-line blocking: pauses slow a flow that only shares an upstream link with an
//! incast. And HPCC pausing far less than DCQCN on one incast, as its paper reports. Run as root
//! (scripts/test).

mod support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use int_format::ethernet::MacAddress;
use int_format::pfc::{PRIORITIES, PfcRepr, pause_ps};
use intlab_lab::netns::Namespace;
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_runtime::clock::Clock;
use intlab_runtime::sys::socket;
use intlab_switch::DropReason;
use intlab_switch::tm::{MmuSpec, PfcSpec, PfcWatchdog};
use intlab_transport::cc::ControllerConfig;
use intlab_transport::endpoint::{Endpoint, EndpointConfig};
use intlab_transport::flow::MessageKind;
use support::{Attach, Lab, Need, host};

/// A scenario of 100 Mb/s, 20 us links with the `fabric` keys: hosts h1..h`hosts` on switch
/// s1 (h`i` on s1:eth`i`), then the `rest` (more nodes and links, the run).
fn scenario_text(name: &str, fabric: &str, hosts: u8, more_nodes: &str, rest: &str) -> String {
    let nodes: String = (1..=hosts).map(|i| format!("  h{i}: {{ kind: host }}\n")).collect();
    let links: String = (1..=hosts)
        .map(|i| format!("  - endpoints: [\"s1:eth{i}\", \"h{i}:eth0\"]\n"))
        .collect();
    format!(
        "name: {name}\ndefaults:\n  link: {{ rate: 100Mbps, delay: 20us }}\n{fabric}\n\
         nodes:\n  s1: {{ kind: switch }}\n{nodes}{more_nodes}links:\n{links}{rest}"
    )
}

/// Three line-rate senders into h4 through one switch whose 300 KB buffer is shared.
fn incast(fabric: &str) -> String {
    scenario_text(
        "pfc-incast",
        fabric,
        4,
        "",
        "controller: { name: line_rate }\nworkload:\n  incast: { receiver: h4, size: 1MB }\n",
    )
}

/// Time dilation of each attempt, both runs at the same one. PFC is lossless only if the hosts
/// obey within their headroom, which a machine that stalls them for milliseconds cannot
/// promise: a frame a late pause let through past the headroom is counted (an overrun, a timing
/// failure) and such a run is void (`Need::PausesInTime`). On one day's VM, 4 PFC runs of 5 at
/// dilation 20 had no overrun while every one of them was late past a tenth of an RTT at p99
/// elsewhere.
const DILATIONS: [f64; 4] = [10.0, 20.0, 20.0, 20.0];

/// See [`support::MAX_STEAL`].
const MAX_STEAL: f64 = support::MAX_STEAL;

#[test]
fn pfc_keeps_an_incast_lossless_and_its_pauses_are_on_the_wire() {
    support::require_root();
    let _serial = support::serial();
    // The same buffer with and without PFC, run at the same dilation, both kept up with.
    let set: Vec<Scenario> = [("pfc-off", ""), ("pfc-on", "\npfc: {}")]
        .iter()
        .map(|(name, pfc)| {
            let text = incast(&format!("capture: true\nmmu: {{ shared: 300KB }}{pfc}"));
            Scenario::from_text(&text, Path::new(&format!("{name}.yaml")), &Overrides::default()).expect("valid")
        })
        .collect();
    let mut runs = support::run_all_counting_in_dirs(
        "pfc",
        &set,
        &DILATIONS,
        MAX_STEAL,
        Duration::from_secs(2),
        Need::PausesInTime,
    );
    let (out, r) = runs.pop().expect("the PFC run");
    let (_, lossy) = runs.pop().expect("the run without PFC");
    assert!(lossy.summary.drops > 0, "without PFC the shared buffer overflows");
    assert!(lossy.summary.pfc.is_none());

    let captures = out.join("capture");
    assert_eq!(r.summary.drops, 0, "lossless");
    for f in &r.flows {
        assert_eq!(f.bytes_received, f.size, "flow {} intact", f.id);
        assert_eq!(f.retransmissions, 0, "flow {}: nothing resent", f.id);
    }
    let pfc = r.summary.pfc.expect("PFC figures");
    assert_eq!(pfc.overruns, 0, "every pause in time");
    assert!(pfc.frames > 0 && pfc.xoff_ns > 0 && pfc.host_paused_ns > 0, "{pfc:?}");

    let ports = &r.switches[0].ports;
    let mut decoded_total = 0;
    for (i, port) in ports.iter().enumerate() {
        let host = format!("h{}", i + 1);
        let rx = r
            .hosts
            .iter()
            .find(|h| h.host == host)
            .map(|h| h.counters.pfc_rx)
            .expect("the host's counters");
        assert_eq!(rx, port.totals.pfc_tx, "{host} heard every pause {} sent", port.name);
        let mut by_priority = [0; 8];
        by_priority[3] = port.totals.pfc_tx;
        assert_eq!(
            port.totals.pfc_tx_priority, by_priority,
            "{}: priority 3's only",
            port.name
        );
        // Outbound frames only: the switch's own pauses.
        let rows = support::tshark_fields(
            &captures.join(format!("s1-{}.pcapng", port.name)),
            &["-Y", "macc && frame.p2p_dir == 0"],
            &["macc.opcode", "macc.cbfc.enbv", "macc.cbfc.pause_time.c3", "eth.dst"],
        );
        assert_eq!(
            rows.len() as u64,
            port.totals.pfc_tx,
            "{}: pauses in the capture",
            port.name
        );
        for row in &rows {
            assert_eq!(row[0], "0x0101", "{}: opcode {row:?}", port.name);
            assert_eq!(row[1], "0x0008", "{}: class-enable vector {row:?}", port.name);
            assert!(row[2] == "65535" || row[2] == "0", "{}: quanta {row:?}", port.name);
            assert_eq!(row[3], "01:80:c2:00:00:01");
        }
        decoded_total += rows.len() as u64;
    }
    assert_eq!(decoded_total, pfc.frames);
    assert_eq!(ports[3].totals.pfc_tx, 0, "the receiver's port pauses nobody");
    // The hosts heard them, as the ns-3 HPCC simulator's pfc.txt says: time, node, node type
    // (0: host), device, pause (1) or resume (0); one line per batch a host's NIC read.
    let text = std::fs::read_to_string(out.join("ns3/pfc.txt")).expect("ns3/pfc.txt");
    let lines: Vec<Vec<u64>> = text
        .lines()
        .map(|l| l.split(' ').map(|w| w.parse().expect("a number")).collect())
        .collect();
    assert!(lines.iter().all(|l| l.len() == 5 && l[2] <= 1 && l[4] <= 1), "{text}");
    assert!(lines.windows(2).all(|w| w[0][0] <= w[1][0]), "in time order");
    let hosts_heard: u64 = r.hosts.iter().map(|h| h.counters.pfc_rx).sum();
    let host_lines = lines.iter().filter(|l| l[2] == 0).count() as u64;
    assert!(
        host_lines > 0 && host_lines <= hosts_heard,
        "{host_lines} lines for {hosts_heard} pauses heard"
    );
    assert!(lines.iter().any(|l| l[2] == 0 && l[4] == 1) && lines.iter().any(|l| l[2] == 0 && l[4] == 0));
    // Every sender was held and let go: its port's XOFF time is counted and ended.
    for port in &ports[..3] {
        assert!(port.totals.pfc_xoff_ns[3] > 0, "{}: held in XOFF", port.name);
    }
}

/// An incast h1, h2 -> h4 behind s2, and a victim h3 -> h5 whose only shared link with it is
/// s1 -> s2 (400 Mb/s: room for all three at 100 Mb/s). Without PFC, s2 drops the incast at
/// the port to h4 and the victim goes its own way; with PFC, s2 pauses the whole link from s1
/// for the incast, the victim's frames included.
fn head_of_line(fabric: &str) -> String {
    scenario_text(
        "pfc-victim",
        fabric,
        3,
        "  s2: { kind: switch }\n  h4: { kind: host }\n  h5: { kind: host }\n",
        "  - endpoints: [\"s1:eth4\", \"s2:eth1\"]\n    rate: 400Mbps\n\
         \x20 - endpoints: [\"s2:eth2\", \"h4:eth0\"]\n\
         \x20 - endpoints: [\"s2:eth3\", \"h5:eth0\"]\n\
         controller: { name: line_rate }\n\
         workload:\n\
         \x20 flows:\n\
         \x20   - { src: h1, dst: h4, size: 1MB }\n\
         \x20   - { src: h2, dst: h4, size: 1MB }\n\
         \x20   - { src: h3, dst: h5, size: 500KB }\n",
    )
}

#[test]
fn pauses_slow_a_victim_that_only_shares_an_upstream_link_with_an_incast() {
    support::require_root();
    let _serial = support::serial();
    let set: Vec<Scenario> = [("hol-off", ""), ("hol-on", "\npfc: {}")]
        .iter()
        .map(|(name, pfc)| {
            let text = head_of_line(&format!("mmu: {{ shared: 300KB }}{pfc}"));
            Scenario::from_text(&text, Path::new(&format!("{name}.yaml")), &Overrides::default()).expect("valid")
        })
        .collect();
    // A pause between two switches crosses from one worker to the other: a worker that
    // lost its CPU for a millisecond delays it by as much in real time, which at dilation 20
    // overran s2's headroom from s1 in 4 runs of 4 on one day's VM and at 100 in none: the
    // attempts run at 100, 200 and 400 (each doubling halves the weight of the VM's pauses;
    // on 2026-11-28 CI kept up with it neither at 100 nor at 200).
    let runs: Vec<_> = support::run_all_counting_in_dirs(
        "hol",
        &set,
        &[100.0, 200.0, 400.0],
        MAX_STEAL,
        Duration::from_secs(2),
        Need::PausesInTime,
    )
    .into_iter()
    .map(|(_, r)| r)
    .collect();
    // The victim's goodput over its line rate (100 Mb/s), and the slowdown it says.
    let victim = |r: &intlab_lab::results::Results| {
        let f = r.flows.iter().find(|f| f.src == "h3").expect("the victim");
        assert_eq!(f.bytes_received, f.size, "the victim arrived whole");
        let fct = f.fct_ns.expect("the victim completed");
        (
            f.size as f64 * 8.0 / (fct as f64 * 1e-9) / 100e6,
            f.slowdown.expect("a slowdown"),
        )
    };
    let ((off, off_slowdown), (on, on_slowdown)) = (victim(&runs[0]), victim(&runs[1]));
    eprintln!(
        "victim goodput: PFC off {:.1} % of its line rate (slowdown {off_slowdown:.2}), on {:.1} % (slowdown {on_slowdown:.2})",
        off * 100.0,
        on * 100.0
    );
    let incast_pause = runs[1].switches.iter().find(|s| s.switch == "s1").map(|s| {
        s.ports
            .iter()
            .find(|p| p.name == "eth4")
            .map_or(0, |p| p.totals.pfc_paused_ns[3])
    });
    eprintln!(
        "s1's port to s2 paused {:.1} ms",
        incast_pause.unwrap_or(0) as f64 / runs[1].summary.dilation / 1e6
    );
    assert!(
        runs[0].summary.drops > 0,
        "without PFC the incast overflows s2's buffer"
    );
    assert_eq!(runs[1].summary.drops, 0, "with PFC nothing is dropped");
    assert!(incast_pause.is_some_and(|ns| ns > 0), "s2 paused the link from s1");
    // What each run should give: without PFC nothing queues on the victim's path but a frame
    // of each other sender at s1 (three 100 Mb/s senders into 400 Mb/s), a slowdown of 1;
    // with PFC it shares s1's one queue towards s2 with the incast, whose pauses hold all
    // three senders alike, so as one of three equal arrivals at s1 while the incast's two
    // fill h4's 100 Mb/s it gets half its line rate, a slowdown of 2 (measured 1.00 and 1.93,
    // 2026-11-27). Each run must be nearer its own prediction than the other's.
    let between = 1.5;
    assert!(
        off_slowdown < between,
        "without PFC the victim runs at its line rate: slowdown {off_slowdown:.2}"
    );
    assert!(
        on_slowdown > between,
        "with PFC the victim is slowed by pauses meant for the incast: slowdown {on_slowdown:.2} ({:.1} % of its line rate against {:.1} %)",
        on * 100.0,
        off * 100.0
    );
}

#[test]
fn a_16_to_1_incast_with_pfc_loses_nothing_under_any_controller() {
    support::require_root();
    let _serial = support::serial();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/incast-16to1.yaml");
    let text = std::fs::read_to_string(&root).expect("the shipped scenario");
    let text = format!("{text}\nmmu: {{ shared: 4MB }}\npfc: {{}}\n");
    for cc in ["hpcc", "hpcc++", "dcqcn", "swift", "rlcc", "netscope"] {
        let overrides = Overrides {
            controller: Some(cc.into()),
            ..Overrides::default()
        };
        let s = Scenario::from_text(&text, &root, &overrides).expect("valid");
        // A run where a stall let a sender miss a pause (an overrun the summary explains by
        // it) is void; an overrun nothing explains fails the test in any attempt.
        let r = support::run_all_counting_in_dirs(
            "i16",
            std::slice::from_ref(&s),
            &[200.0, 300.0, 300.0, 400.0],
            MAX_STEAL,
            Duration::from_secs(2),
            Need::PausesInTime,
        )
        .pop()
        .expect("one run")
        .1;
        assert_eq!(r.summary.pfc.map(|p| p.overruns), Some(0), "{cc}: every pause in time");
        assert_eq!(r.flows.len(), 16);
        for f in &r.flows {
            assert_eq!(f.bytes_received, f.size, "{cc}: flow {} intact", f.id);
            assert_eq!(f.retransmissions, 0, "{cc}: flow {}: nothing resent", f.id);
        }
        assert_eq!(r.summary.drops, 0, "{cc}: lossless");
    }
}

/// Writes PFC frames onto a link from one of its ends, unknown to whatever else uses that end
/// (sockets there do not see what others send).
struct PauseInjector {
    fd: OwnedFd,
}

impl PauseInjector {
    /// On interface `dev` of namespace `ns`.
    fn open(ns: &Namespace, dev: &str) -> PauseInjector {
        let dev = dev.to_owned();
        let fd = ns
            .run(move || socket::packet(&dev))
            .expect("a packet socket on the link");
        PauseInjector { fd }
    }

    /// Sends a frame with `quanta` per priority; returns the wall-clock times just before and
    /// just after the call (a veth hands the frame to its peer within it). The frame left
    /// somewhere between the two: on a loaded machine this thread can lose its CPU for
    /// milliseconds on either side of send(2), so one time stamp alone can be far off.
    fn send(&self, quanta: [Option<u16>; PRIORITIES]) -> Sent {
        let mut buf = [0u8; 64];
        let repr = PfcRepr {
            src: MacAddress([2, 0, 0, 0, 0, 0xfe]),
            quanta,
        };
        let len = repr.emit(&mut buf).expect("a PFC frame fits");
        let before = epoch_now();
        // SAFETY: send(2) reads `len` bytes of `buf`, which holds them.
        let sent = unsafe { libc::send(self.fd.as_raw_fd(), buf.as_ptr().cast(), len, 0) };
        let after = epoch_now();
        assert_eq!(
            sent,
            len as isize,
            "pause not sent: {}",
            std::io::Error::last_os_error()
        );
        Sent { before, after }
    }
}

/// When an injected frame left: at or after `before`, at or before `after` (ns since 1970).
#[derive(Clone, Copy)]
struct Sent {
    before: u128,
    after: u128,
}

/// The wall clock in ns since 1970, the clock of a capture's `frame.time_epoch`.
fn epoch_now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos()
}

/// Quanta for priority `p` alone.
fn only(p: usize, quanta: u16) -> [Option<u16>; PRIORITIES] {
    let mut q = [None; PRIORITIES];
    q[p] = Some(quanta);
    q
}

/// `frame.time_epoch` ("s.fraction") in ns.
fn epoch_ns(text: &str) -> u128 {
    let (s, frac) = text.split_once('.').unwrap_or((text, ""));
    let frac = format!("{frac:0<9}");
    s.parse::<u128>().expect("seconds") * 1_000_000_000 + frac[..9].parse::<u128>().expect("fraction")
}

/// The first of `times` (sorted) at or after `t`.
fn first_from(times: &[u128], t: u128) -> Option<u128> {
    times.get(times.partition_point(|&x| x < t)).copied()
}

/// How many of `times` (sorted) fall in `[from, to)`.
fn count_in(times: &[u128], from: u128, to: u128) -> usize {
    times.partition_point(|&x| x < to) - times.partition_point(|&x| x < from)
}

#[test]
fn a_host_stops_the_paused_priority_for_the_time_the_pause_asks() {
    support::require_root();
    let _serial = support::serial();
    // h1's NIC at 200 Mb/s: a quantum (512 bit times) is 2.56 us, a data frame 44 us.
    const NIC_BPS: u64 = 200_000_000;
    // Priority of h1's data (DSCP 26).
    const DATA: usize = 3;
    let ms = 1_000_000u128;
    let mut lab = Lab::single("ph", Attach::Veth, true, |_| {});
    // From the switch's end of h1's link, as the switch would.
    let inject = PauseInjector::open(lab.sw.as_ref().expect("a veth lab"), &lab.switch_dev[0]);
    let mut c1 = EndpointConfig::new("h1", host(1).1, NIC_BPS, 200_000);
    c1.pfc = true;
    let h1 = Endpoint::start(c1, lab.runtime(), 0, lab.h(1).enter()).expect("h1 starts");
    let c2 = EndpointConfig::new("h2", host(2).1, 1_000_000_000, 200_000);
    let h2 = Endpoint::start(c2, lab.runtime(), 1, lab.h(2).enter()).expect("h2 starts");
    let flow = support::flow(1, 1, 2, 8_000_000, MessageKind::Write);
    let path = support::one_switch_path(200_000);
    h2.expect(flow).expect("h2 runs");
    h1.send(flow, ControllerConfig::LineRate, path).expect("h1 runs");
    std::thread::sleep(Duration::from_millis(30));

    // A pause of another priority, the longest there is: h1 must not stop.
    let other = inject.send(only(1, u16::MAX));
    std::thread::sleep(Duration::from_millis(20));
    // A pause of 10,000 quanta: h1 must stop for 25.6 ms, then go on by itself.
    let quanta = 10_000;
    let pause_ns = u128::from(pause_ps(quanta, NIC_BPS) / 1000);
    let paused = inject.send(only(DATA, quanta));
    std::thread::sleep(Duration::from_millis(50));
    // The longest pause (168 ms), lifted by an XON 15 ms later.
    let held = inject.send(only(DATA, u16::MAX));
    std::thread::sleep(Duration::from_millis(15));
    let lifted = inject.send(only(DATA, 0));

    let t = Instant::now();
    while h1.finished() < 1 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let capture = lab.capture("s1", "p1");
    lab.stop();
    let (r1, r2) = (h1.report().expect("h1 report"), h2.report().expect("h2 report"));
    assert_eq!(r2.received[0].bytes_ok, flow.size, "the flow completed intact");

    // What h1 sent, as the switch's port saw it arrive.
    let times: Vec<u128> = support::tshark_fields(
        &capture,
        &["-Y", "udp.dstport == 4791 && frame.p2p_dir == 1"],
        &["frame.time_epoch"],
    )
    .iter()
    .map(|row| epoch_ns(&row[0]))
    .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "capture in time order");
    // h1 obeys within a millisecond; it resumes within 5 ms of when it may (a wake-up on this
    // machine is usually 20-100 us late, a vCPU taken away costs milliseconds).
    let (react, late) = (ms, 5 * ms);
    let largest_gap = |from: u128, to: u128| {
        let i = times.partition_point(|&x| x < from);
        let j = times.partition_point(|&x| x < to);
        times[i.saturating_sub(1)..j.min(times.len())]
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(u128::MAX)
    };
    for (what, at) in [("other priority", other), ("pause", paused), ("long pause", held)] {
        assert!(
            count_in(&times, at.before - ms, at.before) > 0,
            "h1 was sending when the {what} came"
        );
    }
    let gap = largest_gap(other.after, paused.before);
    eprintln!("after the other priority's pause: largest gap {} us", gap / 1000);
    assert!(
        gap < late,
        "a pause of priority 1 stopped priority {DATA}: gap {} us",
        gap / 1000
    );

    // Early is judged from when the frame left at the latest, late from when it left at the
    // earliest, so a test thread that lost its CPU around send(2) cannot fail either.
    let us = |t: u128, from: u128| (t as i128 - from as i128) / 1000;
    let resumed = first_from(&times, paused.after + react).expect("h1 sent again after the pause");
    let last = times[times.partition_point(|&x| x < paused.after + react) - 1];
    eprintln!(
        "pause of {quanta} quanta ({} us), sent within {} us: last frame {} us after it, resumed {} us after it",
        pause_ns / 1000,
        us(paused.after, paused.before),
        us(last, paused.before),
        us(resumed, paused.before)
    );
    assert!(
        resumed + 200_000 >= paused.before + pause_ns && resumed <= paused.after + pause_ns + late,
        "h1 resumed {} us after a pause of {} us",
        us(resumed, paused.before),
        pause_ns / 1000
    );

    let resumed = first_from(&times, held.after + react).expect("h1 sent again after the XON");
    eprintln!(
        "pause of 65535 quanta lifted after {} us, sent within {} us: resumed {} us after the XON",
        us(lifted.before, held.before),
        us(lifted.after, lifted.before),
        us(resumed, lifted.before)
    );
    assert!(
        resumed + 200_000 >= lifted.before && resumed <= lifted.after + late,
        "h1 resumed {} us after the XON (sent within {} us)",
        us(resumed, lifted.before),
        us(lifted.after, lifted.before)
    );

    assert_eq!(r1.counters.pfc_rx, 4, "every frame read");
    let shortest = pause_ns + (lifted.before - held.after);
    let longest = pause_ns + (lifted.after - held.before);
    let counted = u128::from(r1.counters.pfc_paused_ns);
    eprintln!(
        "h1 counted {} us paused, the frames asked {}-{} us",
        counted / 1000,
        shortest / 1000,
        longest / 1000
    );
    assert!(
        counted + 500_000 > shortest && counted < longest + 500_000,
        "h1 counted {} us paused, the frames asked {}-{} us",
        counted / 1000,
        shortest / 1000,
        longest / 1000
    );
}

/// A NIC whose receiver stopped reading: it pauses its link's priority 3 again and again.
struct PauseStorm {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl PauseStorm {
    /// Starts one from `dev` of `ns`, a pause of 65535 quanta every 2 ms.
    fn start(ns: &Namespace, dev: &str) -> PauseStorm {
        let inject = PauseInjector::open(ns, dev);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut sent = 0;
            while !flag.load(Ordering::Relaxed) {
                inject.send(only(3, u16::MAX));
                sent += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            sent
        });
        PauseStorm {
            stop,
            thread: Some(thread),
        }
    }

    /// Ends it; returns the pauses sent.
    fn stop(&mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().expect("the storm thread"))
    }
}

impl Drop for PauseStorm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the storm run saw.
struct StormRun {
    /// Flow B (h1 to h3) was complete when the storm ended.
    b_done_in_storm: bool,
    /// How long the storm lasted (ns).
    storm_ns: u64,
    /// Flows' completion times (A, B; ns from when h1 was given them).
    fct_ns: [u64; 2],
    /// Both flows arrived intact.
    intact: bool,
    /// The stormed port's (s1 to h2) watchdog trips and drops, and every port's drops.
    trips: u64,
    watchdog_drops: u64,
    drops: u64,
    /// h1's time paused (ns).
    h1_paused_ns: u64,
}

/// h1 sends flow A to h2 and flow B to h3 through one PFC switch with a shared buffer, while
/// h2's NIC storms its link with pauses (its receiver stopped reading): A's frames pile up on
/// the port to h2, their ingress from h1 crosses XOFF, and h1, paused, stops B too. The storm
/// lasts until B is complete or `storm_for` has passed.
fn storm_run(tag: &str, watchdog: Option<PfcWatchdog>, storm_for: Duration) -> StormRun {
    const NIC_BPS: u64 = 200_000_000;
    const SIZE: u64 = 2_000_000;
    let mut lab = Lab::star(tag, 3, Attach::Veth, false, |s| {
        s.mmu = Some(MmuSpec {
            shared: Some(300_000),
            ..MmuSpec::default()
        });
        s.pfc = Some(PfcSpec {
            headroom: Some(64_000),
            watchdog,
            ..PfcSpec::default()
        });
    });
    let mut storm = PauseStorm::start(lab.h(2), &lab.dev[1]);
    let start = |i: u8, bps: u64, pfc: bool, worker: usize| {
        let mut c = EndpointConfig::new(&format!("h{i}"), host(i).1, bps, 200_000);
        c.pfc = pfc;
        Endpoint::start(c, lab.runtime(), worker, lab.h(usize::from(i)).enter()).expect("endpoint starts")
    };
    let (h1, h2, h3) = (
        start(1, NIC_BPS, true, 0),
        start(2, 1_000_000_000, false, 1),
        start(3, 1_000_000_000, false, 1),
    );
    let flow = |id: u32, dst: u8| support::flow(id, 1, dst, SIZE, MessageKind::Write);
    let path = support::one_switch_path(200_000);
    let (a, b) = (flow(1, 2), flow(2, 3));
    h2.expect(a).expect("h2 runs");
    h3.expect(b).expect("h3 runs");
    let began = Clock::get().now_ns();
    h1.send(a, ControllerConfig::LineRate, path).expect("h1 runs");
    h1.send(b, ControllerConfig::LineRate, path).expect("h1 runs");
    let t = Instant::now();
    while h3.finished() < 1 && t.elapsed() < storm_for {
        std::thread::sleep(Duration::from_millis(5));
    }
    let b_done_in_storm = h3.finished() >= 1;
    let storm_ns = Clock::get().now_ns() - began;
    let pauses = storm.stop();
    // With the storm over, the watchdog restores the port and A is sent again.
    let t = Instant::now();
    while (h2.finished() < 1 || h3.finished() < 1) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let sw = lab.stop().remove(0);
    let (r1, r2, r3) = (
        h1.report().expect("h1 report"),
        h2.report().expect("h2 report"),
        h3.report().expect("h3 report"),
    );
    // The flows start as h1 gets them, on the process's clock.
    let fct = |id: u32| {
        r1.sent
            .iter()
            .find(|f| f.id == id)
            .and_then(|f| f.end_ns)
            .map_or(u64::MAX, |end| end.saturating_sub(began))
    };
    let stormed = &sw.ports[1];
    let run = StormRun {
        b_done_in_storm,
        storm_ns,
        fct_ns: [fct(1), fct(2)],
        intact: r2.received.first().is_some_and(|f| f.bytes_ok == SIZE)
            && r3.received.first().is_some_and(|f| f.bytes_ok == SIZE),
        trips: stormed.totals.pfc_watchdog_trips,
        watchdog_drops: stormed.drops_for(DropReason::PfcWatchdog),
        drops: sw.ports.iter().map(|p| p.total_drops()).sum(),
        h1_paused_ns: r1.counters.pfc_paused_ns,
    };
    eprintln!(
        "{tag}: storm of {pauses} pauses over {} ms; B done in it: {}; FCT A {} ms, B {} ms; \
         watchdog {} trips, {} drops; drops {}; h1 paused {} ms; s1 to h2 paused {} ms",
        run.storm_ns / 1_000_000,
        run.b_done_in_storm,
        run.fct_ns[0] / 1_000_000,
        run.fct_ns[1] / 1_000_000,
        run.trips,
        run.watchdog_drops,
        run.drops,
        run.h1_paused_ns / 1_000_000,
        stormed.totals.pfc_paused_ns[3] / 1_000_000
    );
    run
}

#[test]
fn a_pause_storm_freezes_the_senders_other_flow_until_the_watchdog_trips() {
    support::require_root();
    let _serial = support::serial();
    // Without a watchdog, 400 ms of storm: B cannot finish in it (it would take 80 ms at h1's
    // line rate), nothing is dropped, and both flows finish once it ends.
    let frozen = storm_run("pn", None, Duration::from_millis(400));
    assert!(
        !frozen.b_done_in_storm,
        "B finished during the storm without a watchdog"
    );
    assert!(frozen.intact, "both flows complete after the storm");
    assert_eq!((frozen.trips, frozen.drops), (0, 0), "lossless and no watchdog");
    assert!(
        frozen.h1_paused_ns > 300_000_000,
        "h1 held by the pauses spreading to it"
    );

    // With a watchdog of 20 ms / 20 ms, the storm goes on until B is done (5 s at most).
    let watchdog = PfcWatchdog {
        detect_ns: 20_000_000,
        restore_ns: 20_000_000,
    };
    let rescued = storm_run("pw", Some(watchdog), Duration::from_secs(5));
    assert!(rescued.b_done_in_storm, "B finished while the storm went on");
    assert!(
        rescued.fct_ns[1] < frozen.fct_ns[1],
        "B was quicker with the watchdog: {} ms against {} ms",
        rescued.fct_ns[1] / 1_000_000,
        frozen.fct_ns[1] / 1_000_000
    );
    assert_eq!(rescued.trips, 1, "one storm, declared once");
    assert!(rescued.watchdog_drops > 0, "the stormed priority's frames were dropped");
    assert_eq!(rescued.drops, rescued.watchdog_drops, "the watchdog's drops only");
    assert!(
        rescued.intact,
        "A too, resent once the storm ended and the port was restored"
    );
}

#[test]
fn a_switch_s_own_pfc_key_overrides_the_scenario_s() {
    support::require_root();
    let _serial = support::serial();
    let own = |fabric: &str, s1: &str| {
        let text = incast(&format!("dilation: 10\nmmu: {{ shared: 300KB }}{fabric}"))
            .replace("  s1: { kind: switch }", &format!("  s1: {{ kind: switch, {s1} }}"));
        let s = Scenario::from_text(&text, Path::new("own.yaml"), &Overrides::default()).expect("valid");
        support::run_scenario("pfc-own", &s)
    };
    // The scenario turns PFC on, s1 turns it off for itself: the buffer drops, nobody pauses.
    let off = own("\npfc: {}", "pfc: { enabled: false }");
    assert!(off.summary.drops > 0, "s1 without PFC drops");
    assert!(off.summary.pfc.is_none(), "no switch runs PFC: {:?}", off.summary.pfc);
    assert!(off.switches[0].ports.iter().all(|p| p.totals.pfc_tx == 0));
    // The scenario says nothing, s1 turns PFC on for itself: it pauses its senders.
    let on = own("", "pfc: {}");
    let pfc = on.summary.pfc.expect("PFC figures");
    assert!(
        pfc.frames > 0 && pfc.host_paused_ns > 0,
        "s1 with PFC pauses and is heard: {pfc:?}"
    );
}
