//! Link impairments through the whole lab (issue 35): the built-in default incast with every
//! link losing frames in bursts (tc-netem's Gilbert-Elliott model, set as a user sets it),
//! under every controller. Run as root (scripts/test).

mod support;

use std::path::Path;

use intlab_lab::scenario::{Overrides, Scenario};

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
        // Data goes out of s1's port to the receiver and in at the senders' ports; ACKs the
        // other way. What the links lost of the data, go-back-N sent again.
        let port = |name: &str| {
            r.switches
                .iter()
                .flat_map(|s| &s.ports)
                .find(|p| p.name == name)
                .unwrap_or_else(|| panic!("s1:{name}"))
        };
        let to_receiver = port("eth5");
        let out = to_receiver.drops.get("injected_loss").copied().unwrap_or(0) - to_receiver.totals.rx_link_lost;
        let senders = ["eth1", "eth2", "eth3", "eth4"].map(port);
        let lost = out + senders.iter().map(|p| p.totals.rx_link_lost).sum::<u64>();
        let sent = to_receiver.totals.tx_frames + out;
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
    let corrupted = |name: &str, inbound: bool| {
        r.switches
            .iter()
            .flat_map(|s| &s.ports)
            .filter(|p| p.name == name)
            .map(|p| {
                if inbound {
                    p.totals.rx_link_corrupted
                } else {
                    p.totals.link_corrupted
                }
            })
            .sum::<u64>()
    };
    // Data: in from the senders at s1:eth1-4, out to the receiver at s1:eth5; ACKs the other
    // way.
    let senders = ["eth1", "eth2", "eth3", "eth4"];
    let data = corrupted("eth5", false) + senders.into_iter().map(|p| corrupted(p, true)).sum::<u64>();
    let acks = corrupted("eth5", true) + senders.into_iter().map(|p| corrupted(p, false)).sum::<u64>();
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

/// Two switches joined by a link that impairs as `keys` say, a host on each, one flow of 3 MB
/// from h1 to h2 across it; captured, seeded with `seed`.
fn across_an_impaired_link(keys: &str, seed: u64) -> String {
    format!(
        "\
name: rates
defaults:
  link: {{ rate: 100Mbps, delay: 200us, buffer: 2MB }}
nodes:
  s1: {{ kind: switch }}
  s2: {{ kind: switch }}
  h1: {{ kind: host }}
  h2: {{ kind: host }}
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
  - endpoints: [\"s1:eth2\", \"s2:eth1\"]
{keys}
  - endpoints: [\"s2:eth2\", \"h2:eth0\"]
controller: {{ name: dcqcn }}
workload:
  flows:
    - {{ src: h1, dst: h2, size: 3MB }}
capture: true
dilation: 1
seed: {seed}
"
    )
}

/// The rate of the link s1 to s2.
const RATE_BPS: u64 = 100_000_000;
/// What a frame takes on the wire beyond what a capture holds (preamble, FCS, gap), with room
/// for rounding: 24 bytes at 100 Mb/s are 1.9 us.
const FRAMING_NS: u64 = 3_000;

/// What the link s1 to s2 did to one frame, as the captures tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// s1 marks it dropped.
    Lost,
    /// Arrived once, after the link's delay.
    OnTime,
    /// Arrived once, ahead of the link's delay.
    Early,
    /// Arrived twice.
    Twice,
    /// Not known: no arrival, or more than two, could be put down to it.
    Unknown,
}

/// Each frame s1 started sending on the link, in order, with its fate. Go-back-N sends the
/// same bytes again (a frame that arrived ahead of others is answered with a NAK and sent
/// again): each arrival of those bytes is put down to the copy whose send it follows by the
/// time the link takes.
fn link_fates(out: &Path, delay_ns: u64) -> Vec<Fate> {
    let started: Vec<_> = support::captured_frames(&out.join("capture/s1-eth2.pcapng"))
        .into_iter()
        .filter(|f| f.direction == 2)
        .collect();
    let arrived = support::captured_frames(&out.join("capture/s2-eth1.pcapng"));
    let mut arrivals: std::collections::HashMap<&[u8], Vec<u64>> = std::collections::HashMap::new();
    for f in arrived.iter().filter(|f| f.direction == 1 && f.comment.is_none()) {
        arrivals.entry(&f.bytes).or_default().push(f.t_ns);
    }
    let mut fates = vec![Fate::Unknown; started.len()];
    let mut sends: std::collections::HashMap<&[u8], Vec<usize>> = std::collections::HashMap::new();
    for (i, f) in started.iter().enumerate() {
        match f.comment.as_deref() {
            Some("dropped: injected_loss") => fates[i] = Fate::Lost,
            _ => sends.entry(&f.bytes).or_default().push(i),
        }
    }
    for (bytes, copies) in sends {
        // An arrival is a copy's whose send it follows by the frame's serialization (the link
        // sent it without its delay: reordered) or by that and the delay, within the Ethernet
        // framing the capture does not hold: go-back-N may send a frame again before its first
        // copy has arrived, so the latest copy sent before an arrival need not be its own.
        let serialization_ns = bytes.len() as u64 * 8 * 1_000_000_000 / RATE_BPS;
        let near = |a: u64, b: u64| a.abs_diff(b) <= FRAMING_NS;
        let mut got: Vec<Vec<bool>> = vec![Vec::new(); copies.len()];
        for &t in arrivals.get(bytes).map(Vec::as_slice).unwrap_or_default() {
            let after = |j: usize| t.saturating_sub(started[copies[j]].t_ns);
            let on_time = (0..copies.len()).find(|&j| near(after(j), delay_ns + serialization_ns));
            let early = (0..copies.len()).find(|&j| near(after(j), serialization_ns));
            match (on_time, early) {
                (Some(j), _) => got[j].push(false),
                (None, Some(j)) => got[j].push(true),
                (None, None) => {}
            }
        }
        for (&i, arrivals) in copies.iter().zip(&got) {
            fates[i] = match arrivals.as_slice() {
                [true] => Fate::Early,
                [false] => Fate::OnTime,
                [_, _] => Fate::Twice,
                _ => Fate::Unknown,
            };
        }
    }
    fates
}

/// `share` of `n` draws is within four standard errors of `p` (a false alarm once in 16,000).
fn binomial_agrees(what: &str, share: f64, p: f64, n: usize) {
    let se = (p * (1.0 - p) / n as f64).sqrt();
    eprintln!("{what}: {share:.4} of {n}, {p:.4} expected (standard error {se:.4})");
    assert!(
        (share - p).abs() < 4.0 * se,
        "{what}: {share:.4} of {n}, {p:.4} expected within {:.4}",
        4.0 * se
    );
}

#[test]
fn loss_duplication_and_reordering_on_the_captures_have_their_rates_and_follow_the_seed() {
    support::require_root();
    let _serial = support::serial();
    let keys = "    loss: 2%\n    duplicate: 3%\n    reorder: 10%";
    let mut fates = Vec::new();
    for (tag, seed) in [("rates-a", 1), ("rates-b", 1), ("rates-c", 2)] {
        let text = across_an_impaired_link(keys, seed);
        let s = Scenario::from_text(&text, Path::new("rates.yaml"), &Overrides::default()).expect("valid");
        let out = support::scratch_dir(tag);
        let r = support::run_scenario_in(&out, tag, &s);
        for f in &r.flows {
            assert_eq!(f.bytes_received, f.size, "flow {} intact", f.id);
        }
        fates.push(link_fates(&out, 200_000));
    }
    let a = &fates[0];
    let count = |f: &[Fate], which: &[Fate]| f.iter().filter(|x| which.contains(x)).count();
    let (sent, lost) = (a.len(), count(a, &[Fate::Lost]));
    let (twice, early) = (count(a, &[Fate::Twice]), count(a, &[Fate::Early]));
    let known = count(a, &[Fate::OnTime, Fate::Early, Fate::Twice]);
    eprintln!("s1 to s2: {sent} frames sent, {lost} lost, {twice} twice, {early} early of {known} known");
    assert!(sent > 2_500, "{sent} frames sent");
    // netem's order: a frame is duplicated (3 %), then lost (2 %), but a duplicated frame that
    // is lost still arrives once; the copy is judged again, never duplicated. Frames sent more
    // than once cannot be told apart and are left out of the shares below.
    let (pl, pd, pr) = (0.02, 0.03, 0.10);
    binomial_agrees("lost", lost as f64 / sent as f64, pl * (1.0 - pd), sent);
    binomial_agrees(
        "arrived twice",
        twice as f64 / known as f64,
        pd * (1.0 - pl) * (1.0 - pl) / (1.0 - pl * (1.0 - pd)),
        known,
    );
    // A reordered frame goes without the link's delay: it arrives within its serialization.
    let once = count(a, &[Fate::OnTime, Fate::Early]);
    binomial_agrees("ahead of the delay", early as f64 / once as f64, pr, once);
    // The same seed draws the same fates for the same frames in order; another seed others.
    let compared = |x: &[Fate], y: &[Fate]| {
        let both: Vec<(Fate, Fate)> = x
            .iter()
            .zip(y)
            .map(|(p, q)| (*p, *q))
            .filter(|&(p, q)| p != Fate::Unknown && q != Fate::Unknown)
            .collect();
        let differ = both.iter().filter(|(p, q)| p != q).count();
        (both.len(), differ)
    };
    let (same_n, same_differ) = compared(a, &fates[1]);
    let (other_n, other_differ) = compared(a, &fates[2]);
    eprintln!(
        "same seed: {same_differ} of {same_n} frames known in both runs differ; another seed: {other_differ} of {other_n}"
    );
    assert!(same_n > 2_000, "only {same_n} frames known in both runs");
    assert_eq!(same_differ, 0, "the same seed gave {same_differ} frames another fate");
    assert!(
        other_differ > 100,
        "another seed gave only {other_differ} frames another fate"
    );
}

#[test]
fn a_hosts_link_impairs_what_the_host_sends_or_only_one_way_with_towards() {
    support::require_root();
    let _serial = support::serial();
    // 5 % loss on h1's link: both ways, then only towards s1 (what h1 sends), then only towards
    // h1 (what s1 sends it).
    let mut seen = Vec::new();
    for (tag, towards) in [
        ("both", ""),
        ("to-s1", "    towards: s1\n"),
        ("to-h1", "    towards: h1\n"),
    ] {
        let text = format!(
            "\
name: towards
defaults:
  link: {{ rate: 100Mbps, delay: 50us, buffer: 2MB }}
nodes:
  s1: {{ kind: switch }}
  h1: {{ kind: host }}
  h2: {{ kind: host }}
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
    loss: 5%
{towards}  - endpoints: [\"s1:eth2\", \"h2:eth0\"]
controller: {{ name: dcqcn }}
workload:
  flows:
    - {{ src: h1, dst: h2, size: 2MB }}
capture: true
dilation: 1
"
        );
        let s = Scenario::from_text(&text, Path::new("towards.yaml"), &Overrides::default()).expect("valid");
        let out = support::scratch_dir(&format!("towards-{tag}"));
        let r = support::run_scenario_in(&out, tag, &s);
        assert_eq!(r.flows[0].bytes_received, r.flows[0].size, "{tag}: the flow intact");
        let eth1 = r.switches[0].ports.iter().find(|p| p.name == "eth1").expect("s1:eth1");
        let lost = eth1.drops.get("injected_loss").copied().unwrap_or(0);
        let (inbound, outbound) = (eth1.totals.rx_link_lost, lost - eth1.totals.rx_link_lost);
        // On the capture, a frame lost on its way in is recorded inbound, one on its way out
        // outbound, each with the drop as its comment.
        let marked = |direction: u32| {
            support::captured_frames(&out.join("capture/s1-eth1.pcapng"))
                .iter()
                .filter(|f| f.direction == direction && f.comment.as_deref() == Some("dropped: injected_loss"))
                .count() as u64
        };
        assert_eq!(
            (marked(1), marked(2)),
            (inbound, outbound),
            "{tag}: the capture and the counters"
        );
        // h1 sends data (about 2,000 frames), s1 sends h1 the ACKs (as many): 5 % of each.
        let data_in = eth1.totals.rx_frames + inbound;
        let acks_out = eth1.totals.tx_frames + outbound;
        eprintln!("{tag}: lost {inbound} of {data_in} frames from h1, {outbound} of {acks_out} to h1");
        seen.push((
            inbound as f64 / data_in as f64,
            outbound as f64 / acks_out as f64,
            data_in,
            acks_out,
        ));
    }
    let agrees = |share: f64, n: u64| (share - 0.05).abs() < 4.0 * (0.05 * 0.95 / n as f64).sqrt();
    let (both, to_s1, to_h1) = (seen[0], seen[1], seen[2]);
    assert!(agrees(both.0, both.2) && agrees(both.1, both.3), "both ways: {both:?}");
    assert!(agrees(to_s1.0, to_s1.2) && to_s1.1 == 0.0, "towards s1: {to_s1:?}");
    assert!(to_h1.0 == 0.0 && agrees(to_h1.1, to_h1.3), "towards h1: {to_h1:?}");
}
