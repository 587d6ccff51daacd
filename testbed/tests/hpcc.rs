//! HPCC's acceptance figures through the whole lab (`intlab run`'s path): one long flow keeps
//! the bottleneck busy with a short queue, and a 4-to-1 incast is fair with a short queue.
//! Queue and fairness are judged in steady state: after the first 50 RTTs, and away from the
//! times a host stalled (the run reports them; see `SETTLE_RTTS`). Run as root (scripts/test).

mod support;

use std::path::Path;

use intlab_lab::results::{Results, windowed};
use intlab_lab::scenario::{Overrides, Scenario};

/// Time dilation of each attempt. A run in which the switches released frames more than a
/// tenth of an RTT late (p99) had its schedule broken by the machine (a busy hypervisor: right
/// after a build, steal time reached 15 % here) and says nothing about the controller; the next
/// attempt waits a little and runs again, each twice as slow as the one before: the VM's
/// pauses of a few hundred microseconds weigh half as much at each doubling, and on 2026-11-28
/// they voided most runs at the first dilation for minutes on end (a slowdown of the lab itself
/// shows as the first attempts' void runs in the output). The first attempt already runs at 8: this VM pauses a vCPU for
/// 0.4-4 ms about every 512 ms whatever runs, and a pause the lab does not see as a stall (the
/// worker was running, not sleeping, or the frame sat in the kernel) reads to HPCC as an idle
/// link. At dilation 2 each pause was a third of an RTT: HPCC answered the utilization dip by
/// speeding up and the one-flow queue p99 reached 11-24 KB in 3 runs of 5; at 8 a pause is a
/// twelfth of an RTT. (At dilation 1 one such pause cost the incast one window of Jain 0.93.)
const DILATIONS: [f64; 3] = [8.0, 16.0, 32.0];

/// See [`support::MAX_STEAL`].
const MAX_STEAL: f64 = support::MAX_STEAL;

/// Runs `s` until the machine keeps up with it (see [`DILATIONS`] and [`MAX_STEAL`]).
fn run_kept_up(tag: &str, s: &Scenario) -> Results {
    support::run_kept_up(tag, s, &DILATIONS, MAX_STEAL, std::time::Duration::from_secs(5))
}

/// Steady windows (see [`SETTLE_RTTS`]) the incast test judges at least.
const STEADY_WINDOWS: usize = 30;

/// Whether run `r` of the incast left at least [`STEADY_WINDOWS`] steady windows with every flow
/// in them.
fn enough_steady_windows(r: &Results) -> bool {
    windowed(&r.flows, &r.series, 10 * RTT_NS, 50 * RTT_NS, &disturbed(r))
        .is_some_and(|f| f.windows >= STEADY_WINDOWS && f.empty_windows == 0)
}

/// Host stalls leave a link idle or hold ACKs back, and the flows take some RTTs to settle
/// again: the times from each stall to [`SETTLE_RTTS`] RTTs after it are not steady state.
const SETTLE_RTTS: u64 = 20;

/// The shortest stall, in the lab's time, that disturbs the flows: a tenth of an RTT, the
/// lateness the lab itself tolerates before it calls a run not kept up. The VM's pauses come
/// at a rate in wall-clock time (several a second here, each 0.3-1.5 ms): counting every one
/// for [`SETTLE_RTTS`] RTTs left no steady window at dilation 8 (92 stalls over a 1.4 s run in
/// one CI run), and more of them per emulated second at each higher dilation, whereas each
/// weighs less in the lab's time the slower the lab runs.
const DISTURBING_STALL_NS: u64 = RTT_NS / 10;

/// The intervals disturbed by host stalls (see [`SETTLE_RTTS`] and [`DISTURBING_STALL_NS`]).
fn disturbed(r: &Results) -> Vec<(u64, u64)> {
    r.stalls
        .iter()
        .filter(|s| s.late_ns >= DISTURBING_STALL_NS)
        .map(|s| (s.at_ns, s.at_ns + s.late_ns + SETTLE_RTTS * RTT_NS))
        .collect()
}

/// The p99 of the queue the INT of the ACKs reported after `after_ns`, outside disturbed times.
fn int_queue_p99(r: &Results, after_ns: u64) -> u64 {
    let avoid = disturbed(r);
    let mut q: Vec<u64> = r
        .series
        .iter()
        .filter(|p| p.t_ns >= after_ns && !avoid.iter().any(|&(a, b)| (a..b).contains(&p.t_ns)))
        .filter_map(|p| p.int_qlen_bytes)
        .collect();
    assert!(q.len() > 100, "{} INT samples", q.len());
    q.sort_unstable();
    q[(q.len() - 1) * 99 / 100]
}

/// 100 Mb/s, 800 us of propagation a round trip: one BDP.
const BDP: u64 = 100_000_000 * 800_000 / 8_000_000_000;
const RTT_NS: u64 = 800_000;

/// One flow from a 1 Gb/s NIC into a 100 Mb/s bottleneck: HPCC, not the NIC, finds the rate.
/// Issue 4: at least 90 % busy (wire bytes over line rate), INT queue p99 below one BDP after 50
/// RTTs. Measured on a quiet machine: 94-95 % busy, INT queue p99 1.1-5.6 KB, also with a busy
/// loop on one core. The two failures seen (queue p99 15-25 KB) came from runs under 4-8 %
/// hypervisor steal right after a CI build, which the attempts now void.
#[test]
fn hpcc_keeps_the_bottleneck_busy_with_a_short_queue() {
    support::require_root();
    let _serial = support::serial();
    let text = "\
name: one-flow
defaults:
  link: { rate: 100Mbps, delay: 200us, buffer: 1MB }
nodes:
  s1: { kind: switch }
  h1: { kind: host }
  h2: { kind: host }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
    rate: 1Gbps
  - endpoints: [\"s1:eth2\", \"h2:eth0\"]
controller: { name: hpcc }
workload:
  flows:
    - { src: h1, dst: h2, size: 20MB }
";
    let s = Scenario::from_text(text, Path::new("one-flow.yaml"), &Overrides::default()).expect("valid");
    let r = run_kept_up("hb", &s);
    let fct = r.flows[0].fct_ns.expect("the flow completes");
    assert_eq!(r.flows[0].bytes_received, 20_000_000);
    let port = r
        .switches
        .iter()
        .flat_map(|s| &s.ports)
        .find(|p| p.name == "eth2")
        .expect("bottleneck port");
    let busy = port.totals.tx_bytes as f64 * 8.0 / (fct as f64 * 1e-9) / 100e6;
    let q99 = int_queue_p99(&r, 50 * RTT_NS);
    eprintln!(
        "one flow: bottleneck {:.1} % busy, INT queue p99 {q99} B (BDP {BDP} B)",
        busy * 100.0
    );
    assert!(busy >= 0.90, "bottleneck {:.1} % busy", busy * 100.0);
    assert!(q99 < BDP, "INT queue p99 {q99} B is not below one BDP ({BDP} B)");
}

/// The built-in default: 4-to-1 incast at 100 Mb/s under the paper's HPCC values for 4 flows.
/// Issue 4: Jain's index at least 0.95 in every window of 10 base RTTs after the first 50, INT
/// queue p99 below one BDP. Measured: Jain min 0.968-0.981 (mean 0.995), INT queue p99 2-3 KB.
/// The default scenario, and the same with its switch running the shipped `int_transit.p4`
/// (issue 14): both fair with a short queue, and both carrying what the simulator computes for the
/// incast (the program writes the hop records the built-in pipeline writes).
#[test]
fn hpcc_incast_4_to_1_is_fair_with_a_short_queue_with_either_pipeline() {
    support::require_root();
    let _serial = support::serial();
    let native = Scenario::builtin(&Overrides::default()).expect("the default loads");
    let p4_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/p4/incast-4to1.yaml");
    let p4 = Scenario::load(&p4_file, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    // A run the machine kept up with can still have stalled hosts often enough that few steady
    // windows are left (11 of the 30 judged in one suite under 10-47 % steal): it is made again.
    let runs: Vec<Results> = support::run_all_counting_in_dirs(
        "hi",
        &[native, p4],
        &DILATIONS,
        MAX_STEAL,
        std::time::Duration::from_secs(5),
        support::Need::KeptUpWith(enough_steady_windows),
    )
    .into_iter()
    .map(|(_, r)| r)
    .collect();
    for (r, pipeline) in runs.iter().zip(["built-in", "int_transit.p4"]) {
        for f in &r.flows {
            assert_eq!(f.bytes_received, f.size, "{pipeline}: flow {} intact", f.id);
        }
        let steady = windowed(&r.flows, &r.series, 10 * RTT_NS, 50 * RTT_NS, &disturbed(r));
        let fairness = steady.expect("steady windows with all four flows");
        let q99 = int_queue_p99(r, 50 * RTT_NS);
        eprintln!("incast, {pipeline}: {fairness:?}, INT queue p99 {q99} B (BDP {BDP} B)");
        assert_eq!(fairness.window_ns, 10 * RTT_NS);
        assert!(
            fairness.windows >= STEADY_WINDOWS,
            "{pipeline}: {} windows",
            fairness.windows
        );
        assert_eq!(
            fairness.empty_windows, 0,
            "{pipeline}: windows where every flow stalled: no data"
        );
        assert!(
            fairness.min >= 0.95,
            "{pipeline}: Jain's index fell to {:.3}",
            fairness.min
        );
        assert!(
            q99 < BDP,
            "{pipeline}: INT queue p99 {q99} B is not below one BDP ({BDP} B)"
        );
    }
    // Either pipeline carries what the simulator computes for this incast, within the bar of the
    // shipped 4-to-1 (see `bed_agrees`).
    let star = intlab_sim::star::Star::incast_4to1();
    for (r, pipeline) in runs.iter().zip(["built-in", "int_transit.p4"]) {
        if let Err(e) = bed_agrees(r, &star) {
            panic!("{pipeline}: {e}");
        }
    }
}

/// How far the lab may be from the range of the simulator's runs on the same incast (goodput,
/// points; FCT p50, share): the lab's own error on it, the largest of five runs of the
/// shipped 4-to-1 within 1 point and 1.3 % of the simulator (2026-11-26), with room for the
/// hypervisor.
const BED_GOODPUT_POINTS: f64 = 0.02;
const BED_FCT_SHARE: f64 = 0.03;

/// Whether run `r` of an incast on `star` carries what the simulator computes for it; says what each
/// gave. The simulator runs the controller with the parameters the lab's hosts ran, T included (the
/// path's base RTT with the host overhead the lab measured, which the simulator's hosts do not
/// have). The lab measured a T for each flow a few us apart, and a few us of T decide which
/// flow finishes first: on the default incast the simulator's FCT p50 spans 1.358-1.410 s as T
/// goes from 926 to 958 us (its goodput 0.903-0.907). So the simulator runs once with each flow's
/// own T, and once with every flow at each of those, and the lab is judged against the range.
fn bed_agrees(r: &Results, star: &intlab_sim::star::Star) -> Result<(), String> {
    let ran = &r.summary.controller_params;
    let with_t = |t: Option<u64>| -> intlab_transport::cc::ControllerConfig {
        let mut c = ran.clone();
        if let (Some(t), Some(field)) = (t, c.get_mut("base_rtt_ns")) {
            *field = t.into();
        }
        serde_json::from_value(c).expect("the parameters the hosts ran")
    };
    let size = r.flows.first().expect("flows").size;
    let each_own = {
        let mut flows = star.incast_flows(&with_t(None), size);
        for (f, lab) in flows.iter_mut().zip(&r.flows) {
            f.cc = with_t(lab.base_rtt_ns);
        }
        flows
    };
    let sets = std::iter::once(each_own).chain(r.flows.iter().map(|f| star.incast_flows(&with_t(f.base_rtt_ns), size)));
    let (mut p50s, mut goodputs) = (Vec::new(), Vec::new());
    for flows in sets {
        let bed = star
            .run(&flows, 10_000_000_000, |c| c.cnp_interval_ns = 0)
            .expect("the simulator completes the incast");
        p50s.push(bed.fct_p50_ns() as f64);
        goodputs.push(bed.goodput(&flows, 5, star.rate_bps));
    }
    let range = |v: &[f64]| {
        (
            v.iter().copied().fold(f64::MAX, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        )
    };
    let ((p_lo, p_hi), (g_lo, g_hi)) = (range(&p50s), range(&goodputs));
    let p50 = r.summary.fct_ns.as_ref().expect("FCTs").p50;
    let goodput = r.summary.normalized_goodput;
    let said =
        format!("lab goodput {goodput:.3}, FCT p50 {p50:.0} ns; bed {g_lo:.3}-{g_hi:.3}, {p_lo:.0}-{p_hi:.0} ns");
    eprintln!("{said}");
    let goodput_off = goodput < g_lo - BED_GOODPUT_POINTS || goodput > g_hi + BED_GOODPUT_POINTS;
    let p50_off = p50 < p_lo * (1.0 - BED_FCT_SHARE) || p50 > p_hi * (1.0 + BED_FCT_SHARE);
    if goodput_off || p50_off {
        return Err(said);
    }
    Ok(())
}

/// The packet-level reference (htsim's HPCC: η 0.95, maxStage 5, W_AI one MSS) on
/// `topologies/incast-4to1-dc.yaml` (issue 34): goodput 93 %, FCT p50 13.7 ms.
const REFERENCE_GOODPUT: f64 = 0.93;
const REFERENCE_FCT_P50_NS: f64 = 13.7e6;

/// The longest a host or worker may have stalled, in RTTs of the path, for a run to be the
/// simulator's incast: the VM pauses for up to a few milliseconds, tens of microseconds of this
/// lab's time at dilation 100, and HPCC then takes many RTTs to fill the link again. On
/// 2026-11-29, 54 runs at dilation 100 and 200: those where a host or a worker stalled 4.5-15
/// RTTs carried 0.897-0.901, the others 0.901-0.910; two such runs (0.888, 0.891, a host
/// stalled 4 RTTs) fell past the bed's 2 points. Such a run is made again (at twice the
/// dilation, a pause weighs half as much).
const MAX_STALL_RTTS: u64 = 3;

/// Whether no host or worker of run `r` stalled longer than [`MAX_STALL_RTTS`].
fn no_long_stall(r: &Results) -> bool {
    support::longest_stall_ns(r) <= MAX_STALL_RTTS * r.summary.path_rtt_min_ns
}

/// The shipped 4-to-1 under `--cc hpcc` (the file's HPCC parameters, the reference's): goodput
/// within 3 points and FCT p50 within 10 % of the reference (issue 34), and what the
/// deterministic bed computes for the same incast (see `bed_agrees`). Measured in five runs on
/// 2026-11-26: goodput 90.9-91.1 %, FCT p50 14.00-14.05 ms; the simulator, with the T the lab's
/// hosts ran, 91.1-91.2 %, 13.74-14.03 ms.
/// The reference carries no INT on the wire; here INT costs 3.2 % of a full packet, which the
/// reference's goodput is reduced by before the comparison: judged against the bare 0.93, the
/// lab's 0.899-0.909 (2026-11-29) spent the whole 3 points on INT and failed on the noise. Runs at dilation 100, doubled at each attempt: at 50 (what `auto`
/// picks here on a calm machine) the reference VM's wake-ups, 40-55 us late at p99, voided
/// every run of the last CI (release late p99 10.1-11.8 % of the RTT at 0-2 % steal).
#[test]
fn the_shipped_4_to_1_incast_under_hpcc_matches_the_reference_and_the_bed() {
    support::require_root();
    let _serial = support::serial();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/incast-4to1-dc.yaml");
    let overrides = Overrides {
        controller: Some("hpcc".into()),
        ..Overrides::default()
    };
    let s = Scenario::load(&file, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let (_, r) = support::run_all_counting_in_dirs(
        "h41",
        std::slice::from_ref(&s),
        &[100.0, 200.0, 400.0],
        MAX_STEAL,
        std::time::Duration::from_secs(5),
        support::Need::KeptUpWith(no_long_stall),
    )
    .pop()
    .expect("one run");
    for f in &r.flows {
        assert_eq!(f.bytes_received, f.size, "flow {} intact", f.id);
    }
    let p50 = r.summary.fct_ns.as_ref().expect("FCTs").p50;
    let goodput = r.summary.normalized_goodput;
    let int = r.summary.int_overhead.expect("HPCC's data carries INT");
    let reference = REFERENCE_GOODPUT * (1.0 - int);
    eprintln!(
        "lab: goodput {goodput:.3}, FCT p50 {p50:.0} ns; reference {reference:.3} ({REFERENCE_GOODPUT} less INT's {:.1} %), {REFERENCE_FCT_P50_NS} ns",
        100.0 * int
    );
    assert!(
        (goodput - reference).abs() <= 0.03,
        "goodput {goodput:.3}, the reference {reference:.3} ({REFERENCE_GOODPUT} less INT's {:.1} %)",
        100.0 * int
    );
    assert!(
        (p50 - REFERENCE_FCT_P50_NS).abs() <= 0.1 * REFERENCE_FCT_P50_NS,
        "FCT p50 {p50:.0} ns, the reference {REFERENCE_FCT_P50_NS} ns"
    );
    if let Err(e) = bed_agrees(&r, &intlab_sim::star::Star::incast_4to1_dc()) {
        panic!("{e}");
    }
}
