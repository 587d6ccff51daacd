//! Link impairments through the whole lab (issue 35): the built-in default incast with every
//! link losing frames in bursts (tc-netem's Gilbert-Elliott model, set as a user sets it),
//! under every controller. Run as root (scripts/test).

mod support;

use std::path::Path;

use intlab_testbed::scenario::{Overrides, Scenario};

const CONTROLLERS: [&str; 8] = [
    "hpcc", "hpcc++", "dcqcn", "swift", "timely", "dctcp", "netscope", "rlcc",
];

/// Gilbert-Elliott with bursts of 1/r = 2 frames at a long-run loss of 1 % (p / (p + r)).
const BURST_LOSS: &str = "defaults.link.loss=gemodel 0.505% 50%";

#[test]
fn every_controller_completes_the_default_incast_under_one_percent_burst_loss() {
    support::require_root();
    let _serial = support::serial();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/incast-4to1.yaml");
    let mut failures = Vec::new();
    for cc in CONTROLLERS {
        let overrides = Overrides {
            controller: Some(cc.into()),
            set: vec![
                BURST_LOSS.into(),
                "workload.incast.size=300KB".into(),
                "dilation=1".into(),
            ],
            ..Overrides::default()
        };
        let s = Scenario::load(&file, &overrides).unwrap_or_else(|e| panic!("{e}"));
        let tag = format!("gel-{}", cc.replace('+', "p"));
        let r = support::run_scenario_in(&support::scratch_dir(&tag), &tag, &s);
        let intact = r.flows.iter().all(|f| f.bytes_received == f.size && f.fct_ns.is_some());
        // s1's port to the receiver carries only data: what it lost, go-back-N sent again.
        let to_receiver = r
            .switches
            .iter()
            .flat_map(|s| &s.ports)
            .find(|p| p.name == "eth5")
            .expect("s1:eth5");
        let lost = to_receiver.drops.get("injected_loss").copied().unwrap_or(0);
        let sent = to_receiver.totals.tx_frames + lost;
        let retransmitted: u64 = r.flows.iter().map(|f| f.retransmissions).sum();
        eprintln!(
            "{cc}: intact {intact}, {lost} of {sent} data frames lost ({:.2} %), {retransmitted} retransmitted",
            lost as f64 / sent as f64 * 100.0
        );
        if !intact || lost == 0 || retransmitted < lost {
            failures.push(format!(
                "{cc}: intact {intact}, lost {lost}, retransmitted {retransmitted}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn a_corrupted_frame_is_caught_by_the_receiver_and_sent_again() {
    support::require_root();
    let _serial = support::serial();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/incast-4to1.yaml");
    let overrides = Overrides {
        controller: Some("dcqcn".into()),
        set: vec![
            "defaults.link.corrupt=1%".into(),
            "workload.incast.size=300KB".into(),
            "dilation=1".into(),
        ],
        ..Overrides::default()
    };
    let s = Scenario::load(&file, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let r = support::run_scenario_in(&support::scratch_dir("corrupt"), "corrupt", &s);
    let corrupted = |name: &str| {
        r.switches
            .iter()
            .flat_map(|s| &s.ports)
            .filter(|p| p.name == name)
            .map(|p| p.totals.link_corrupted)
            .sum::<u64>()
    };
    // s1:eth5 carries the data to the receiver; the other ports carry ACKs back.
    let data = corrupted("eth5");
    let acks: u64 = ["eth1", "eth2", "eth3", "eth4"].into_iter().map(corrupted).sum();
    let caught = r
        .hosts
        .iter()
        .filter(|h| h.host == "h5")
        .map(|h| h.counters.bad_icrc)
        .sum::<u64>();
    eprintln!(
        "corrupted on the links: {data} data frames, {acks} ACKs; {caught} caught by the receiver's ICRC; {} retransmitted",
        r.flows.iter().map(|f| f.retransmissions).sum::<u64>()
    );
    for f in &r.flows {
        assert_eq!(f.bytes_received, f.size, "flow {} intact", f.id);
    }
    assert!(data > 0 && acks > 0, "nothing corrupted");
    // A data frame goes out with UDP checksum 0, as RoCEv2 sends it: a flip in its payload
    // reaches the receiver, whose ICRC check refuses it; one in the IP header (20 of about
    // 1,100 bytes, 1.8 %) the kernel drops on its checksum first. Of some 15 flips, 4 or more
    // in the header come once in 7,000 runs. (Most corrupted ACKs the kernel drops on their
    // UDP checksum before the sender sees them; the next ACK makes up for one.)
    assert!(
        caught <= data && data - caught <= 3,
        "{caught} of {data} corrupted data frames caught by the receiver"
    );
}

/// Frames and their capture times (ns) in `pcap`, those recorded in direction `direction`
/// (1 inbound, 2 outbound).
fn captured(pcap: &Path, direction: u32) -> Vec<(Vec<u8>, u64)> {
    support::captured_packets(pcap)
        .into_iter()
        .filter(|p| p.2 == direction)
        .map(|(data, t, _)| (data, t))
        .collect()
}

#[test]
fn jitter_on_a_link_between_two_switches_has_its_distribution_on_the_captures() {
    support::require_root();
    let _serial = support::serial();
    let text = "\
name: jitter
defaults:
  link: { rate: 100Mbps, delay: 200us, buffer: 1MB }
nodes:
  s1: { kind: switch }
  s2: { kind: switch }
  h1: { kind: host }
  h2: { kind: host }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
  - endpoints: [\"s1:eth2\", \"s2:eth1\"]
    jitter: 50us
    distribution: normal
  - endpoints: [\"s2:eth2\", \"h2:eth0\"]
controller: { name: dcqcn }
workload:
  flows:
    - { src: h1, dst: h2, size: 1MB }
capture: true
dilation: 1
";
    let s = Scenario::from_text(text, Path::new("jitter.yaml"), &Overrides::default()).expect("valid");
    let out = support::scratch_dir("jitter");
    let r = support::run_scenario_in(&out, "jitter", &s);
    for f in &r.flows {
        assert_eq!(f.bytes_received, f.size, "flow {} intact", f.id);
    }
    // The capture times are the switch's schedule, exact whatever the machine did: a switch
    // records a frame when its transmission starts, the far one when it arrives. Their
    // difference is the frame's serialization, the link's 200 us, and the jitter drawn for it.
    // Measured on the ACKs (s2 to s1, the link jitters both ways): each is sent once, where
    // go-back-N answers the data's reordering by sending most data frames again. An ACK is
    // known by its last 16 bytes (its echo's end and the ICRC over its PSN).
    let tail = |b: &[u8]| b[b.len().saturating_sub(16)..].to_vec();
    let mut copies: std::collections::HashMap<Vec<u8>, Vec<u64>> = std::collections::HashMap::new();
    for (b, t) in captured(&out.join("capture/s2-eth1.pcapng"), 2) {
        copies.entry(tail(&b)).or_default().push(t);
    }
    let arrived: Vec<(Vec<u8>, u64, usize)> = captured(&out.join("capture/s1-eth2.pcapng"), 1)
        .into_iter()
        .map(|(b, t)| (tail(&b), t, b.len()))
        .collect();
    let mut lengths = std::collections::HashMap::new();
    for (_, _, len) in &arrived {
        *lengths.entry(*len).or_insert(0usize) += 1;
    }
    let ack = lengths
        .into_iter()
        .max_by_key(|&(_, n)| n)
        .map(|(len, _)| len)
        .expect("frames arrived");
    let sent = |k: &Vec<u8>| copies.get(k).filter(|c| c.len() == 1).map(|c| c[0]);
    let d: Vec<f64> = arrived
        .iter()
        .filter(|(_, _, len)| *len == ack)
        .filter_map(|(k, t, _)| sent(k).map(|s| (*t as f64 - s as f64) / 1e3))
        .collect();
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let within = d.iter().filter(|x| (*x - mean).abs() <= 50.0).count() as f64 / n;
    let reordered = arrived
        .windows(2)
        .filter(|w| sent(&w[0].0).zip(sent(&w[1].0)).is_some_and(|(a, b)| a > b))
        .count();
    eprintln!(
        "{n} ACKs: delay mean {mean:.1} us, sd {sd:.1} us, {:.1} % within 50 us of the mean; {reordered} arrived ahead of one sent before them",
        within * 100.0
    );
    assert!(n > 500.0, "{n} ACKs matched");
    // Normal with sd 50 us: the sample sd's standard error is 50/sqrt(2n) (about 1.4 us here),
    // the share within one sd 68.3 % with a standard error sqrt(0.683 · 0.317 / n) (1.9
    // points): four of each (a false alarm once in 16,000 runs). The mean is 200 us plus an
    // ACK's serialization at 100 Mb/s plus the jitter's mean, 0: within four standard errors
    // of it (50/sqrt(n) us), and 2 us for the Ethernet framing the capture does not hold.
    assert!((sd - 50.0).abs() < 4.0 * 50.0 / (2.0 * n).sqrt(), "sd {sd:.1} us");
    assert!(
        (within - 0.683).abs() < 4.0 * (0.683 * 0.317 / n).sqrt(),
        "{within:.3} within one sd"
    );
    let expected = 200.0 + ack as f64 * 8.0 / 100.0;
    assert!(
        (mean - expected).abs() < 4.0 * 50.0 / n.sqrt() + 2.0,
        "mean {mean:.1} us, {expected:.1} expected"
    );
    // Jitter of 50 us on ACKs a few us apart overtakes often, as netem's does.
    assert!(reordered > 0, "no frame overtook another");
}
