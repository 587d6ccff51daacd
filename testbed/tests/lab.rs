//! A whole shipped scenario through the library's run: fat-tree k=4, every host sending to
//! every other host (240 flows); every flow accounted for, nothing left behind. Run as root
//! (scripts/test).

mod support;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use intlab_lab::netns;
use intlab_lab::results::Ending;
use intlab_lab::run::{Progress, RunOptions, run};
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_lab::workload::Workload;

/// Notes when the lab was being built and when the flows started.
#[derive(Default)]
struct Timings {
    building: Option<Instant>,
    setup: Option<Duration>,
}

impl Progress for Timings {
    fn step(&mut self, what: &str) {
        if what.starts_with("building") {
            self.building = Some(Instant::now());
        }
    }

    fn begin(&mut self, _flows: u64) {
        self.setup = self.building.map(|b| b.elapsed());
    }

    fn advance(&mut self, _done: u64) {}

    fn end(&mut self) {}
}

#[test]
fn fat_tree_all_to_all_accounts_for_every_byte_and_leaves_nothing() {
    support::require_root();
    let _serial = support::serial();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/fat-tree-k4.yaml");
    let s = Scenario::load(&path, &Overrides::default()).expect("the shipped scenario loads");
    assert!(matches!(s.workload, Workload::AllToAll { .. }));
    let opts = RunOptions {
        out: support::scratch_dir("fat-tree"),
        capture: false,
        tag: "ft".into(),
        force: false,
        live: Vec::new(),
    };
    let prefix = format!("{}-", netns::run_prefix(std::process::id(), "ft"));
    let mut timings = Timings::default();
    let r = run(&s, &opts, &AtomicBool::new(false), &mut timings).expect("the run completes");
    let setup = timings.setup.expect("flows started");
    eprintln!(
        "fat-tree k=4: setup {setup:?}\n{}",
        intlab_lab::results::summary_table(&r.summary)
    );
    assert_eq!(r.flows.len(), 16 * 15);
    for f in &r.flows {
        assert_eq!(
            f.bytes_received, f.size,
            "flow {} ({} -> {}): bytes received",
            f.id, f.src, f.dst
        );
        assert!(f.fct_ns.is_some(), "flow {} acknowledged", f.id);
    }
    assert_eq!(r.summary.ending, Ending::Completed);
    assert_eq!((r.summary.content_errors, r.summary.bad_icrc), (0, 0));
    assert!(setup < Duration::from_secs(30), "setup took {setup:?}");
    let left: Vec<String> = netns::lab_namespaces()
        .expect("the lab namespaces listed")
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

/// Runs scenario `text` through the lab.
fn run_text(tag: &str, text: &str) -> intlab_lab::results::Results {
    let s = Scenario::from_text(text, Path::new(&format!("{tag}.yaml")), &Overrides::default()).expect("valid");
    support::run_scenario(tag, &s)
}

const TWO_TO_ONE: &str = "\
name: two-to-one
defaults:
  link: { rate: 100Mbps, delay: 50us, buffer: 1MB }
nodes:
  s1: { kind: switch }
  h1: { kind: host }
  h2: { kind: host }
  h3: { kind: host }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
  - endpoints: [\"s1:eth2\", \"h2:eth0\"]
  - endpoints: [\"s1:eth3\", \"h3:eth0\"]
";

#[test]
fn roce_mtus_2048_and_4096_carry_messages_intact() {
    support::require_root();
    let _serial = support::serial();
    for mtu in [2048u64, 4096] {
        let text = format!(
            "{TWO_TO_ONE}workload:\n  flows:\n    - {{ src: h1, dst: h3, size: 3000000 }}\n    - {{ src: h2, dst: h3, size: 1000000, kind: send }}\ntransport: {{ mtu: {mtu} }}\n"
        );
        let r = run_text(&format!("mtu{mtu}"), &text);
        for f in &r.flows {
            assert_eq!(f.bytes_received, f.size, "MTU {mtu}, flow {}", f.id);
            assert!(
                f.packets_sent >= f.size.div_ceil(mtu),
                "MTU {mtu}, flow {}: {} packets",
                f.id,
                f.packets_sent
            );
            // Full-size packets, not 1024-byte ones: at most a few retransmissions more.
            assert!(
                f.packets_sent < 2 * f.size.div_ceil(mtu),
                "MTU {mtu}, flow {}: {} packets",
                f.id,
                f.packets_sent
            );
        }
        assert_eq!((r.summary.content_errors, r.summary.bad_icrc), (0, 0));
    }
}

/// Without congestion control two senders overflow the receiver's port; RED marks CE there,
/// the receiver answers with CNPs at most one per QP per `cnp_interval`, in their own class
/// (DSCP 48) on the wire, and the senders count them.
#[test]
fn ce_marks_come_back_as_rate_limited_cnps() {
    support::require_root();
    let _serial = support::serial();
    let text = format!(
        "{TWO_TO_ONE}controller: {{ name: line_rate }}\nworkload:\n  incast: {{ receiver: h3, size: 2MB }}\ntransport: {{ cnp_interval: 1ms }}\ncapture: true\n"
    )
    .replace("buffer: 1MB }", "buffer: 1MB, ecn: { kmin: 5KB, kmax: 10KB, pmax: 1.0 } }");
    let s = Scenario::from_text(&text, Path::new("cnp.yaml"), &Overrides::default()).expect("valid");
    let out = support::scratch_dir("cnp");
    let r = support::run_scenario_in(&out, "cnp", &s);
    let receiver = r.hosts.iter().find(|h| h.host == "h3").expect("receiver counters");
    let marks = r.summary.ecn_marks;
    let cnps_sent = receiver.counters.cnps_sent;
    let cnps_received = r.summary.cnps;
    eprintln!(
        "ECN marks {marks}, CE received {}, CNPs sent {cnps_sent}, received {cnps_received}",
        receiver.counters.ce_received
    );
    assert!(marks > 100, "the queue passed kmax: {marks} marks");
    // A marked frame can still be lost in the receiving kernel under this overload.
    let ce = receiver.counters.ce_received;
    assert!(
        ce <= marks && ce * 100 >= marks * 99,
        "{ce} of {marks} marks reached the receiver"
    );
    assert!(cnps_sent > 0 && cnps_received > 0);
    assert!(cnps_received <= cnps_sent, "no CNP from nowhere");
    // At most one CNP per QP per millisecond while the flow's packets were in the network: its
    // FCT, plus the time a go-back-N duplicate can still sit in the full 1 MB buffer (80 ms at
    // 100 Mb/s) and cross the two 50 us links after the last ACK. (CI caught 476 CNPs in a
    // 468 ms FCT: duplicates marked after completion.)
    const DRAIN_NS: u64 = 1_000_000 * 8 * 1_000_000_000 / 100_000_000 + 100_000;
    for f in &r.flows {
        let ms = (f.fct_ns.expect("completed") + DRAIN_NS) / 1_000_000 + 1;
        assert!(f.cnps <= ms, "flow {}: {} CNPs in {ms} ms", f.id, f.cnps);
    }
    assert!(cnps_sent < marks, "CNPs are rate limited, not one per mark");
    // On the wire, as h3's switch port received them: RoCE CNPs (opcode 0x81) at DSCP 48.
    let cnps = support::tshark_fields(
        &out.join("capture").join("s1-eth3.pcapng"),
        &["-Y", "infiniband.bth.opcode == 129 && frame.p2p_dir == 1"],
        &["ip.dsfield.dscp"],
    );
    assert!(
        !cnps.is_empty() && cnps.len() as u64 <= cnps_sent,
        "{} CNPs captured",
        cnps.len()
    );
    let dscps: std::collections::BTreeSet<&str> = cnps.iter().map(|row| row[0].as_str()).collect();
    assert_eq!(dscps, ["48"].into(), "the CNPs' DSCPs");
}

/// DCQCN against no congestion control on the same 2-to-1 with RED marking: DCQCN's CNP-driven
/// decreases keep the queue below the buffer (no drops) where line-rate senders overflow it.
#[test]
fn dcqcn_keeps_the_queue_below_what_line_rate_senders_build() {
    support::require_root();
    let _serial = support::serial();
    let text = |cc: &str| {
        format!("{TWO_TO_ONE}controller: {{ name: {cc} }}\nworkload:\n  incast: {{ receiver: h3, size: 3MB }}\n")
            .replace(
                "buffer: 1MB }",
                "buffer: 1MB, ecn: { kmin: 20KB, kmax: 80KB, pmax: 0.2 } }",
            )
    };
    let dcqcn = run_text("dcqcn", &text("dcqcn"));
    let line = run_text("linerate", &text("line_rate"));
    for f in &dcqcn.flows {
        assert_eq!(f.bytes_received, f.size, "flow {} intact", f.id);
    }
    let queue = |r: &intlab_lab::results::Results| r.summary.bottleneck_queue.expect("a bottleneck").p99;
    eprintln!(
        "queue p99: DCQCN {} B, line rate {} B; drops {} vs {}; CNPs {}",
        queue(&dcqcn),
        queue(&line),
        dcqcn.summary.drops,
        line.summary.drops,
        dcqcn.summary.cnps
    );
    assert!(dcqcn.summary.cnps > 0, "DCQCN heard CNPs");
    assert!(line.summary.drops > 0, "line-rate senders overflow the 1 MB buffer");
    assert_eq!(dcqcn.summary.drops, 0, "DCQCN never fills it");
    assert!(queue(&dcqcn) < queue(&line));
}

/// A scenario whose RTT is far below what this machine's thread wake-ups can hold (links of
/// 1 us at dilation 1: every wake-up is tens of microseconds late): the run's report gives the
/// switches' and senders' lateness against the RTT and warns.
#[test]
fn a_run_the_machine_cannot_keep_up_with_says_so() {
    support::require_root();
    let _serial = support::serial();
    let text = TWO_TO_ONE.replace("delay: 50us", "delay: 1us")
        + "workload:\n  flows:\n    - { src: h1, dst: h3, size: 2000000 }\ncontroller: { name: line_rate }\n";
    let r = run_text("late", &text);
    let s = &r.summary;
    let table = intlab_lab::results::summary_table(s);
    eprintln!("{table}");
    // The summary's figures are every frame's, pooled, and the worst host's (dilation 1: same
    // units); the worst port's p99 is kept too.
    let ports = || r.switches.iter().flat_map(|sw| &sw.ports);
    let pooled = intlab_switch::PortSnapshot::pooled_lateness(ports(), 0.99).expect("ports that sent");
    let worst_port = ports()
        .filter(|p| p.totals.tx_frames > 0)
        .map(|p| p.release_late_p99_ns)
        .max()
        .expect("ports that sent");
    assert_eq!(s.release_late_worst_port_p99_ns, worst_port);
    assert!(
        pooled <= worst_port,
        "pooled {pooled} over the worst port's {worst_port}"
    );
    let worst_host = r
        .hosts
        .iter()
        .map(|h| h.counters.wake_late_p99_ns)
        .max()
        .expect("hosts");
    assert_eq!((s.release_late_p99_ns, s.host_wake_late_p99_ns), (pooled, worst_host));
    assert!(
        pooled > 0 && worst_host > 0,
        "no lateness measured: {pooled}, {worst_host}"
    );
    assert!(
        s.host_wake_late_p99_ns.max(s.release_late_p99_ns) * 10 > s.path_rtt_min_ns,
        "a {} ns RTT is held to a tenth?",
        s.path_rtt_min_ns
    );
    assert!(s.timing_warning);
    assert!(table.contains("senders wake") && table.contains("WARNING"), "{table}");
}
