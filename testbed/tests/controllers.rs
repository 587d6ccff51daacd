//! Every controller through the whole lab on the datacenter-scale 4-to-1 incast
//! (`topologies/incast-4to1-dc.yaml`, 10 Gb/s run 100 times slower): each completes every flow
//! intact, and carries what the simulator computes for the same incast. How each
//! controller behaves (its source's claims, HPCC against DCQCN, Swift on the default scenario)
//! is tested exactly on the simulator (`sim/tests/controllers.rs`); here, what needs the real lab:
//! that it keeps time and that real sockets, threads and the kernel carry the model's result.
//! Then Netscope's experiment (`topologies/two-apps-dc.yaml`, application runtimes, which only
//! the lab's workload runner measures). Run as root (scripts/test).

mod support;

use std::path::Path;
use std::time::Duration;

use intlab_lab::results::Results;
use intlab_lab::scenario::{Overrides, Scenario};
use intlab_sim::star::Star;

/// The shipped scenario `file` with controller `cc`, only application `only` if given.
fn scenario(file: &str, cc: &str, only: Option<&str>) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(file);
    let overrides = Overrides {
        controller: Some(cc.into()),
        only: only.map(str::to_owned),
        ..Overrides::default()
    };
    Scenario::load(&path, &overrides).expect("the shipped scenario loads")
}

/// Every run must deliver every flow intact.
fn assert_intact(cc: &str, r: &Results, flows: usize) {
    assert_eq!(r.summary.completed, flows, "{cc}: every flow completes");
    for f in &r.flows {
        assert_eq!(f.bytes_received, f.size, "{cc}: flow {} intact", f.id);
    }
}

/// Dilations of each controller's attempts: 100, where the lab's host jitter (about a microsecond of real
/// time) is a hundredth of a microsecond of the scenario's, then once more at 100, then at twice
/// it. At 50 (what `auto` picks here) TIMELY, whose gradient reads that jitter, measured 59 %
/// goodput against the bed's 73 %, and 72.5 % at 100. Higher is not better for TIMELY: the
/// machine's hiccups are real time, so each lab RTT holds more of them as the dilation grows,
/// and TIMELY carried 0.591-0.682 at 400 (three runs the machine kept up with, 2026-11-28)
/// against the bed's 0.710.
const INCAST_DILATIONS: [f64; 3] = [100.0, 100.0, 200.0];
/// Share of the CPU time the hypervisor may take during a run that is compared.
const MAX_STEAL: f64 = support::MAX_STEAL;
/// Seeds of the simulator's runs: RED's draws decide which flow DCQCN, DCTCP or Netscope cuts, and
/// the lab's order of events draws differently from any one of them. DCQCN's goodput on this
/// incast spans 0.80-0.90 over 20 seeds (0.86-0.88 over 5, which a lab run of 0.831 fell
/// outside in one suite).
const BED_SEEDS: u64 = 20;
/// How far (goodput, points) the lab may be from the range of the simulator's runs, at least: at
/// dilation 100 every controller whose goodput does not turn on RED's draws came within 1
/// point of it in five suites. Where it does (DCQCN: 0.78-0.89 over the simulator's 20 seeds), one
/// lab run is one more draw, and 20 samples do not reach the tails (a 21st falls outside
/// their range one time in ten): the lab may then be half the simulator's range outside it (DCQCN
/// measured 0.749-0.886 in seven lab runs).
const GOODPUT_TOLERANCE: f64 = 0.03;

/// The simulator's range of goodput over [`BED_SEEDS`] seeds for the incast under the controller the
/// lab's hosts ran in `r` (its parameters resolved on the lab's measured paths).
fn bed_goodput(r: &Results) -> (f64, f64) {
    let ran: intlab_transport::cc::ControllerConfig =
        serde_json::from_value(r.summary.controller_params.clone()).expect("the parameters the hosts ran");
    let runs: Vec<f64> = (1..=BED_SEEDS)
        .map(|seed| {
            let star = Star {
                seed,
                ..Star::incast_4to1_dc()
            };
            let flows = star.incast_flows(&ran, 4_000_000);
            let r = star
                .run(&flows, 2_000_000_000, |c| c.cnp_interval_ns = 0)
                .expect("the simulator completes the incast");
            r.goodput(&flows, 5, star.rate_bps)
        })
        .collect();
    (
        runs.iter().copied().fold(f64::MAX, f64::min),
        runs.iter().copied().fold(0.0, f64::max),
    )
}

#[test]
fn every_controller_completes_the_incast_and_carries_what_the_bed_predicts() {
    support::require_root();
    let _serial = support::serial();
    let names = [
        "hpcc", "hpcc++", "dcqcn", "swift", "timely", "dctcp", "netscope", "rlcc",
    ];
    let set: Vec<Scenario> = names
        .iter()
        .map(|cc| scenario("incast-4to1-dc.yaml", cc, None))
        .collect();
    // Each controller is compared with the simulator, not with the others, so each runs at the
    // first dilation the machine kept up with for it: as one set, a controller the machine
    // could not keep up with at 100 moved every other to 200, where TIMELY's gradient reads
    // twice the machine's hiccups per RTT (CI on 2026-11-30: DCTCP's senders late in seven runs
    // at 100, then TIMELY 0.686 at 200 against the simulator's 0.722).
    let runs: Vec<Results> = set
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let tag = format!("c{i}");
            let one = std::slice::from_ref(s);
            let mut r = support::run_all_kept_up(&tag, one, &INCAST_DILATIONS, MAX_STEAL, Duration::from_secs(2));
            r.pop().expect("a run of the one scenario")
        })
        .collect();
    let mut off = Vec::new();
    for (cc, r) in names.iter().zip(&runs) {
        assert_intact(cc, r, 4);
        let (lo, hi) = bed_goodput(r);
        let goodput = r.summary.normalized_goodput;
        eprintln!(
            "{cc}: lab goodput {goodput:.3} at dilation {}, bed {lo:.3}-{hi:.3}",
            r.summary.dilation
        );
        let tolerance = GOODPUT_TOLERANCE.max((hi - lo) / 2.0);
        if goodput < lo - tolerance || goodput > hi + tolerance {
            off.push(format!("{cc}: {goodput:.3} against the simulator's {lo:.3}-{hi:.3}"));
        }
    }
    assert!(off.is_empty(), "the lab strays from the simulator: {off:?}");
}

/// Where the Netscope experiment runs: the smallest dilation the reference machine keeps time
/// at with its 40 flows (100 warned in one run of two); retried once there, then at twice it.
const TWO_APPS_BASE: f64 = 200.0;

/// Runtime of application `name` in `r` (ns).
fn runtime(r: &Results, name: &str) -> f64 {
    let a = r
        .summary
        .applications
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("no application {name}"));
    a.runtime_ns.unwrap_or_else(|| panic!("{name} did not finish: {a:?}")) as f64
}

#[test]
fn netscope_spares_the_delay_sensitive_application() {
    support::require_root();
    let _serial = support::serial();
    let file = "two-apps-dc.yaml";
    // Each controller with both applications, then each application alone, all under the same
    // conditions.
    let cases: Vec<(&str, Option<&str>)> = ["dcqcn", "netscope"]
        .into_iter()
        .flat_map(|cc| [(cc, None), (cc, Some("sensitive")), (cc, Some("bulk"))])
        .collect();
    let set: Vec<Scenario> = cases.iter().map(|&(cc, only)| scenario(file, cc, only)).collect();
    let dilations: Vec<f64> = [1.0, 1.0, 2.0].iter().map(|k| k * TWO_APPS_BASE).collect();
    let runs = support::run_all_kept_up("ns", &set, &dilations, MAX_STEAL, Duration::from_secs(2));
    let result = |cc: &str, only: Option<&str>| {
        let k = cases.iter().position(|&c| c == (cc, only)).expect("a case");
        &runs[k]
    };
    let mut increase = Vec::new();
    for cc in ["dcqcn", "netscope"] {
        for app in ["sensitive", "bulk"] {
            let (t, a) = (runtime(result(cc, None), app), runtime(result(cc, Some(app)), app));
            increase.push((cc, app, t / a - 1.0));
            eprintln!(
                "{cc}: {app} isolated {:.2} ms, shared {:.2} ms: +{:.0} %",
                a / 1e6,
                t / 1e6,
                (t / a - 1.0) * 100.0
            );
        }
    }
    let of = |cc: &str, app: &str| {
        increase
            .iter()
            .find(|x| x.0 == cc && x.1 == app)
            .map(|x| x.2)
            .unwrap_or(f64::NAN)
    };
    assert!(
        of("netscope", "sensitive") < of("dcqcn", "sensitive"),
        "the sensitive application's runtime increase under Netscope ({:.2}) is not below DCQCN's ({:.2})",
        of("netscope", "sensitive"),
        of("dcqcn", "sensitive")
    );
}
