//! The 4-to-1 incast of `topologies/incast-4to1-dc.yaml` on the simulator (10 Gb/s, 2 us links, RED at
//! 40-160 KB, 4 MB per sender, a CNP for every mark): exact, the same on every run.

use intlab_sim::star::{Outcome, Star};
use intlab_transport::cc::{ControllerConfig, HpccConfig};

/// Long enough for any controller to finish 16 MB at 10 Gb/s.
const LIMIT_NS: u64 = 1_000_000_000;

/// The packet-level reference (htsim's HPCC: η 0.95, maxStage 5, W_AI one MSS) on this incast:
/// goodput 93 %, FCT p50 13.7 ms (issue 34; its 16-to-1 figures are in
/// `../shared/reference/anchors-measured.md`).
const REFERENCE_GOODPUT: f64 = 0.93;
const REFERENCE_FCT_P50_NS: f64 = 13.7e6;

/// The scenario's star: 5 hosts, 10 Gb/s and 2 us links, 2 MB buffers, RED at 40-160 KB.
fn star() -> Star {
    Star::incast_4to1_dc()
}

/// The incast under `cc`, with its goodput and its bottleneck's busy fraction.
fn four_to_one(cc: &ControllerConfig) -> (Outcome, f64, f64) {
    let star = star();
    let flows = star.incast_flows(cc, 4_000_000);
    let r = star
        .run(&flows, LIMIT_NS, |c| c.cnp_interval_ns = 0)
        .expect("every flow completes");
    let (goodput, busy) = (r.goodput(&flows, 5, star.rate_bps), r.busy(4, star.rate_bps));
    (r, goodput, busy)
}

/// The reference's parameters: W_AI of one MSS per T is 1,098 wire bytes per 12.5 us, 7 % of
/// the line rate (as `topologies/incast-16to1.yaml` runs them).
fn reference_hpcc() -> ControllerConfig {
    ControllerConfig::Hpcc(HpccConfig {
        max_stage: 5,
        rate_ai_fraction: 0.07,
        ..HpccConfig::default()
    })
}

#[test]
fn hpcc_with_the_references_parameters_matches_the_reference() {
    let (r, goodput, busy) = four_to_one(&reference_hpcc());
    let p50 = r.fct_p50_ns() as f64;
    eprintln!(
        "FCTs {:?} ns, p50 {p50} ns, goodput {goodput:.3}, bottleneck busy {busy:.3}",
        r.fct_ns
    );
    assert!(
        (goodput - REFERENCE_GOODPUT).abs() <= 0.03,
        "goodput {goodput:.3}, the reference {REFERENCE_GOODPUT}"
    );
    assert!(
        (p50 - REFERENCE_FCT_P50_NS).abs() <= 0.1 * REFERENCE_FCT_P50_NS,
        "FCT p50 {p50} ns, the reference {REFERENCE_FCT_P50_NS}"
    );
}

/// With ns-3's `run.py` defaults (maxStage 0, R_AI a 2,500th of the line rate) HPCC holds the
/// bottleneck at its target utilization η = 0.95, as designed, and no higher: what the lab
/// measured on this scenario (goodput 85 %) is this, not the machine.
#[test]
fn hpcc_with_ns3_defaults_holds_the_bottleneck_at_its_target() {
    let (r, goodput, busy) = four_to_one(&ControllerConfig::Hpcc(HpccConfig::default()));
    eprintln!(
        "FCTs {:?} ns, goodput {goodput:.3}, bottleneck busy {busy:.3}",
        r.fct_ns
    );
    assert!((busy - 0.95).abs() < 0.01, "bottleneck busy {busy:.3}");
    assert!(goodput < REFERENCE_GOODPUT - 0.05, "goodput {goodput:.3}");
}

#[test]
fn a_run_gives_the_same_numbers_every_time() {
    let ((a, _, _), (b, _, _)) = (four_to_one(&reference_hpcc()), four_to_one(&reference_hpcc()));
    assert_eq!(a.fct_ns, b.fct_ns);
    assert_eq!(a.ports, b.ports);
    assert_eq!(a.flows, b.flows, "every ACK's sample");
}

/// A host reports each flow's controller as it ran, resolved on the flow's path (what the
/// lab's summary prints as "as run"), not the file's unresolved parameters.
#[test]
fn a_host_reports_the_controller_each_flow_ran() {
    let star = star();
    let cc = ControllerConfig::Swift(Default::default());
    let (r, _, _) = four_to_one(&cc);
    let report = r.reports[1].as_ref().expect("h1 sent");
    let path = star.host_config(1).path_info(star.path());
    assert_eq!(report.controllers, [(1, cc.resolve(&path))]);
    assert_ne!(report.controllers[0].1, cc, "resolved: the target follows the path");
}
