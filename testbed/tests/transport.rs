//! The transport on real sockets through the switch: a large WRITE intact (also under loss),
//! valid ICRCs on the wire, bad datagrams counted. HPCC's behaviour is in hpcc.rs. Run as root
//! (scripts/test).

mod support;

use std::time::{Duration, Instant};

use intlab_switch::impair::LossModel;
use intlab_switch::units::{Bytes, Nanos, Rate};
use intlab_transport::cc::{ControllerConfig, HpccConfig};
use intlab_transport::endpoint::{Endpoint, EndpointConfig, EndpointReport};
use intlab_transport::flow::MessageKind;
use support::{Attach, TwoHosts, flow, host, one_switch_path};

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

/// h1 and h2's endpoints, on the lab's runtime (h1 on worker 0, h2 on worker 1): their
/// reports come once `lab.stop()` has stopped it.
fn endpoints(lab: &TwoHosts, line_rate: u64, base_rtt_ns: u64) -> (Endpoint, Endpoint) {
    let mk = |i: u8, ns: &intlab_lab::netns::Namespace| {
        let mut c = EndpointConfig::new(&format!("h{i}"), host(i).1, line_rate, base_rtt_ns);
        c.timing.sample_every_ns = 20_000;
        Endpoint::start(c, lab.runtime(), usize::from(i - 1), ns.enter()).expect("endpoint starts")
    };
    (mk(1, lab.h(1)), mk(2, lab.h(2)))
}

/// Bottleneck: the switch port to h2, 500 Mb/s (100 Mb/s for the controller tests), 200 us
/// each way; h1's NIC runs at 1 Gb/s unless a test says otherwise.
/// The delays are long enough that the machine's wake-up noise (100-300 us a round trip here)
/// does not dominate the RTT, as time dilation would arrange in the lab.
const BOTTLENECK_BPS: f64 = 500e6;
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
        s.ports[1].impair.loss = Some(LossModel::Random {
            p: loss,
            correlation: 0.0,
        });
        s.ports[0].delay = Nanos(200_000);
    });
    let (h1, h2) = endpoints(&lab, 1_000_000_000, base_rtt_ns);
    let flow = flow(1, 1, 2, size, MessageKind::Write);
    h2.expect(flow).expect("h2 runs");
    h1.send(flow, cc, one_switch_path(base_rtt_ns)).expect("h1 runs");
    let ok = wait(&h1, 1, Duration::from_secs(60)) && wait(&h2, 1, Duration::from_secs(5));
    let bottleneck = lab.stop().remove(0).ports.remove(1);
    let (sender, receiver) = (h1.report().expect("h1 report"), h2.report().expect("h2 report"));
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
    o.bottleneck.totals.tx_bytes as f64 * 8.0 / fct / bps
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
        o.bottleneck.totals.int_pushed, o.receiver.counters.rx_datagrams,
        "HPCC's data carries INT"
    );
    eprintln!(
        "HPCC, one flow: bottleneck {:.1} % busy",
        busy(&o, BOTTLENECK_BPS) * 100.0
    );
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
    let (h1, h2) = endpoints(&lab, 1_000_000_000, BASE_RTT_NS);
    let flow = flow(7, 1, 2, 1_000_000, MessageKind::Send);
    h2.expect(flow).expect("h2 runs");
    h1.send(
        flow,
        ControllerConfig::Hpcc(HpccConfig::paper()),
        one_switch_path(BASE_RTT_NS),
    )
    .expect("h1 runs");
    let completed = wait(&h1, 1, Duration::from_secs(20));
    lab.stop();
    let (r1, r2) = (h1.report().expect("h1 report"), h2.report().expect("h2 report"));
    assert!(
        completed,
        "flow completes: sender {:?} {:?}; receiver {:?} {:?}",
        r1.sent, r1.counters, r2.received, r2.counters
    );
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
    // Wireshark's own RoCE dissector reads the MSN: the messages completed, 0 until the ACK of
    // the last packet (PSN 976), 1 from then on.
    let rows = support::tshark_fields(
        &lab.capture("s1", "p1"),
        &["-Y", "infiniband.aeth && udp.dstport == 4791 && ip.dst == 198.18.0.1"],
        &["infiniband.bth.psn", "infiniband.aeth.msn"],
    );
    assert!(rows.len() >= 977, "{} ACKs decoded", rows.len());
    for r in &rows {
        let (psn, msn): (u32, u32) = (r[0].parse().expect("psn"), r[1].parse().expect("msn"));
        assert_eq!(msn, u32::from(psn == 976), "ACK of PSN {psn} carries MSN {msn}");
    }
}

#[test]
fn bad_datagrams_are_counted_and_dropped() {
    use int_format::roce::{BthRepr, Opcode};
    use intlab_transport::packet::{self, Addressing, Extensions};
    let _serial = support::serial();
    let mut lab = TwoHosts::single("tb", Attach::Veth, false, |_| {});
    let (h1, h2) = endpoints(&lab, 1_000_000_000, BASE_RTT_NS);
    let flow = flow(5, 1, 2, 10_000, MessageKind::Write);
    h2.expect(flow).expect("h2 runs");
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
            Extensions::NONE,
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
    lab.stop();
    let r = h2.report().expect("h2 keeps running and reports");
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
    let cfg = int_format::roles::source::SourceConfig {
        int_port: int_format::int::DEFAULT_INT_PORT,
        instructions: int_format::int::Instructions::HPCC,
        hop_limit: 8,
    };
    int_format::roles::source::write_header(&mut p, &cfg, 4791).expect("header");
    p
}
