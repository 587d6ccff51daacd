//! PFC on the simulator: a lossless incast, exact. With no lateness anywhere, the headroom the MMU
//! derives from the link (3 × rate × delay + two largest frames) must hold every frame that
//! arrives after an XOFF: an overrun here is a fault of the MMU or of the host's pause
//! handling, never of the machine.

use int_format::ethernet::MacAddress;
use int_format::pfc::{PfcRepr, pause_ps};
use intlab_sim::star::{Outcome, Star, StarFlow};
use intlab_switch::tm::{MmuSpec, PfcSpec};
use intlab_transport::cc::{ControllerConfig, HpccConfig};
use intlab_transport::flow::{FlowSpec, MessageKind, source_port};

/// Four hosts at line rate into one (no congestion control: only PFC stops them), 4 MB each,
/// on a shared buffer of 5 × `buffer`.
fn paused_incast(buffer: u64) -> (Star, Vec<StarFlow>, Outcome) {
    let mut star = Star::new(5);
    star.buffer = buffer;
    star.pfc = Some(PfcSpec {
        response_ns: 0,
        ..PfcSpec::default()
    });
    let flows = star.incast_flows(&ControllerConfig::LineRate, 4_000_000);
    let r = star.run(&flows, 1_000_000_000, |_| {}).expect("every flow completes");
    (star, flows, r)
}

#[test]
fn an_incast_under_pfc_loses_nothing_and_never_overruns_its_headroom() {
    let (star, flows, r) = paused_incast(200_000);
    let drops: u64 = r.ports.iter().map(|p| p.total_drops()).sum();
    let overruns: u64 = r.ports.iter().map(|p| p.totals.pfc_overruns).sum();
    let pauses: u64 = r.ports.iter().map(|p| p.totals.pfc_tx).sum();
    let paused: u64 = r.reports.iter().flatten().map(|h| h.counters.pfc_paused_ns).sum();
    let retx: u64 = r.flows.iter().map(|(f, _)| f.retransmissions).sum();
    eprintln!(
        "pfc: {pauses} PFC frames sent, hosts paused {paused} ns in all, {overruns} overruns, {retx} retransmissions, goodput {:.3}",
        r.goodput(&flows, 5, star.rate_bps)
    );
    assert_eq!(drops, 0, "drops in a lossless fabric");
    assert!(pauses > 0, "no pause was sent: the incast did not test PFC");
    assert!(paused > 0, "no host was paused");
    assert_eq!(overruns, 0, "frames past the headroom with nothing late");
    assert_eq!(retx, 0, "a lossless fabric lost frames");
}

/// A pause frame for `priority` only, of `quanta`.
fn pause_frame(priority: usize, quanta: u16) -> Vec<u8> {
    let mut q = [None; 8];
    q[priority] = Some(quanta);
    let repr = PfcRepr {
        src: MacAddress([2, 0, 0, 0, 0, 0xfe]),
        quanta: q,
    };
    let mut buf = vec![0u8; 64];
    let n = repr.emit(&mut buf).expect("a PFC frame fits");
    buf.truncate(n);
    buf
}

/// The first frame h1 started at or after `t` (ns).
fn first_from(log: &[(u64, usize)], t: u64) -> Option<u64> {
    log.iter().map(|&(at, _)| at).find(|&at| at >= t)
}

/// The last frame h1 started before `t` (ns).
fn last_before(log: &[(u64, usize)], t: u64) -> Option<u64> {
    log.iter().map(|&(at, _)| at).take_while(|&at| at < t).last()
}

/// A host stops its paused priority at once (a frame in transmission is finished, none is
/// started) for exactly the time the frame asks, goes on by itself when it runs out, resumes at
/// once on an XON, and ignores a pause of another priority. Exact: the simulator has no lateness.
/// (The lab's version, `testbed/tests/pfc.rs`, allows the machine's wake-up lateness.)
#[test]
fn a_host_stops_the_paused_priority_for_exactly_the_time_the_pause_asks() {
    let mut star = Star::new(2);
    star.pfc = Some(PfcSpec::default());
    let (mut bed, _, hosts) = star.build(|_| {}).expect("the simulator");
    let (h1, h2) = (hosts[0], hosts[1]);
    let flow = FlowSpec {
        id: 1,
        src: Star::ip(1),
        dst: Star::ip(2),
        size: 10_000_000,
        start_ns: 0,
        kind: MessageKind::Write,
        src_port: source_port(0),
    };
    bed.expect(h2, flow);
    bed.send(h1, flow, ControllerConfig::LineRate, star.path());
    bed.log_link(h1);
    // A data frame at 10 Gb/s: 1,106 bytes (Ethernet to ICRC, no INT) take 885 ns.
    let frame_ns = 1_200;
    let data = 3; // DSCP 26's priority
    let quanta = 10_000; // 512 us at 10 Gb/s
    let pause_ns = pause_ps(quanta, star.rate_bps) / 1000;
    bed.inject(h1, pause_frame(1, u16::MAX), 100_000);
    bed.inject(h1, pause_frame(data, quanta), 200_000);
    bed.inject(h1, pause_frame(data, u16::MAX), 1_000_000);
    bed.inject(h1, pause_frame(data, 0), 1_300_000);
    assert!(bed.run_until_finished(2, 1_000_000_000), "the flow completes");
    let log = bed.link_log(h1);

    let gap_after_other = first_from(log, 100_001).expect("sending") - last_before(log, 100_001).expect("sent");
    assert!(
        gap_after_other <= frame_ns,
        "another priority's pause stopped h1 for {gap_after_other} ns"
    );

    let stopped = last_before(log, 200_001).expect("sending when paused");
    let resumed = first_from(log, 200_001).expect("sending again");
    eprintln!("pause of {pause_ns} ns at 200000: last frame started {stopped}, next {resumed}");
    assert!(stopped <= 200_000, "a frame started after the pause arrived");
    assert_eq!(resumed, 200_000 + pause_ns, "resumed when the pause ran out");

    let resumed = first_from(log, 1_000_001).expect("sending after the XON");
    eprintln!("XOFF at 1000000, XON at 1300000: next frame {resumed}");
    assert_eq!(resumed, 1_300_000, "resumed on the XON");
    let counters = bed.report(h1).expect("a report").counters;
    assert_eq!(counters.pfc_rx, 4, "every pause read");
    assert_eq!(counters.pfc_paused_ns, pause_ns + 300_000, "paused as long as asked");
}

/// HPCC reacts to the queue before it reaches the XOFF threshold, DCQCN only once ECN marks
/// (from 40 KB) have cut its rate: on the 4-to-1 incast with a 400 KB shared buffer and PFC,
/// HPCC holds its senders in XOFF at most half as long as DCQCN.
#[test]
fn hpcc_pauses_at_most_half_as_long_as_dcqcn_on_the_same_incast() {
    let xoff = |cc: ControllerConfig| {
        let mut star = Star::incast_4to1_dc();
        star.mmu = Some(MmuSpec {
            shared: Some(400_000),
            ..MmuSpec::default()
        });
        star.pfc = Some(PfcSpec::default());
        let flows = star.incast_flows(&cc, 4_000_000);
        let r = star
            .run(&flows, 1_000_000_000, |c| c.cnp_interval_ns = 0)
            .expect("every flow completes");
        assert_eq!(r.ports.iter().map(|p| p.total_drops()).sum::<u64>(), 0, "lossless");
        r.ports
            .iter()
            .map(|p| p.totals.pfc_xoff_ns.iter().sum::<u64>())
            .sum::<u64>()
    };
    let hpcc = xoff(ControllerConfig::Hpcc(HpccConfig {
        max_stage: 5,
        rate_ai_fraction: 0.07,
        ..HpccConfig::default()
    }));
    let dcqcn = xoff(ControllerConfig::Dcqcn(Default::default()));
    eprintln!("upstream held in XOFF: HPCC {hpcc} ns, DCQCN {dcqcn} ns");
    assert!(dcqcn > 0, "DCQCN's incast pauses its senders");
    assert!(hpcc * 2 <= dcqcn, "HPCC paused {hpcc} ns, DCQCN {dcqcn} ns");
}
