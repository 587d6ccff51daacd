//! Every controller on the same datacenter-scale 4-to-1 incast (`topologies/incast-4to1-dc.yaml`,
//! 10 Gb/s run 100 times slower): each completes every flow intact, DCQCN's queue sits between
//! its ECN thresholds, Swift's RTT at its target, HPCC's queue far below DCQCN's, and RL-CC's
//! shipped policy keeps 85 % goodput with less RTT inflation than DCQCN. Then
//! Netscope's experiment (`topologies/two-apps-dc.yaml`): the delay-sensitive application's
//! runtime grows less under Netscope than under DCQCN. Run as root (scripts/test).

mod support;

use std::path::Path;
use std::time::Duration;

use intlab_testbed::results::Results;
use intlab_testbed::scenario::{Overrides, Scenario};

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

fn run(file: &str, cc: &str, only: Option<&str>) -> (Scenario, Results) {
    let s = scenario(file, cc, only);
    let tag = format!("cc-{}{}", cc.replace('+', "p"), only.map_or("", |o| &o[..1]));
    let r = support::run_scenario(&tag, &s);
    (s, r)
}

/// Steady state: from 50 path RTTs after the first start to the first completion (ns).
fn steady(r: &Results) -> (u64, u64) {
    let rtt = r.flows.iter().map(|f| f.path_rtt_ns).max().unwrap_or(0);
    let first = r.flows.iter().map(|f| f.start_ns).min().unwrap_or(0);
    let end = r
        .flows
        .iter()
        .filter_map(|f| f.fct_ns.map(|n| f.start_ns + n))
        .min()
        .unwrap_or(u64::MAX);
    (first + 50 * rtt, end)
}

/// The `q`-quantile of `v` (nearest rank).
fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    assert!(!v.is_empty(), "no samples");
    v.sort_by(f64::total_cmp);
    v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

/// DCQCN's bottleneck queue in steady state stays between its ECN thresholds: its median at
/// least half of Kmin (the marking starts there) and its 90th percentile at most Kmax.
fn assert_queue_between_thresholds(s: &Scenario, r: &Results) {
    let ecn = s.topology.links[0].props.ecn.expect("the scenario marks ECN");
    let bottleneck = r.summary.bottleneck.clone().expect("a bottleneck");
    let (from, to) = steady(r);
    let q: Vec<f64> = r
        .queues
        .iter()
        .filter(|q| format!("{}:{}", q.switch, q.port) == bottleneck)
        .flat_map(|q| &q.points)
        .filter(|(t, _)| (from..to).contains(t))
        .map(|&(_, b)| b as f64)
        .collect();
    let (p50, p90) = (quantile(q.clone(), 0.5), quantile(q, 0.9));
    eprintln!(
        "dcqcn steady queue at {bottleneck}: p50 {p50} B, p90 {p90} B (Kmin {}, Kmax {})",
        ecn.kmin, ecn.kmax
    );
    assert!(
        p50 >= ecn.kmin as f64 / 2.0 && p50 <= ecn.kmax as f64,
        "DCQCN's queue median {p50} B is not between Kmin/2 and Kmax"
    );
    assert!(
        p90 <= ecn.kmax as f64,
        "DCQCN's queue p90 {p90} B is above Kmax {}",
        ecn.kmax
    );
}

/// Swift's RTT in steady state settles near its target delay: the median ratio of the RTT
/// sample to the target within 25 %.
fn assert_rtt_near_target(r: &Results) {
    let (from, to) = steady(r);
    let ratios: Vec<f64> = r
        .series
        .iter()
        .filter(|p| (from..to).contains(&p.t_ns))
        .filter_map(|p| Some(p.rtt_ns? as f64 / p.target_delay_ns? as f64))
        .collect();
    let n = ratios.len();
    let median = quantile(ratios, 0.5);
    eprintln!("swift steady RTT / target: median {median:.3} over {n} samples");
    assert!(
        (0.75..=1.25).contains(&median),
        "Swift's RTT is {median:.2} times its target delay"
    );
}

/// Mean over flows of their mean RTT over their path's propagation RTT; a flow without an RTT
/// sample is no data, and fails the test.
fn mean_rtt_inflation(r: &Results) -> f64 {
    let v: Vec<f64> = r
        .flows
        .iter()
        .map(|f| {
            let rtt = f
                .rtt_mean_ns
                .unwrap_or_else(|| panic!("flow {} has no RTT sample", f.id));
            rtt as f64 / f.path_rtt_ns.max(1) as f64
        })
        .collect();
    assert!(!v.is_empty(), "no flows");
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn every_controller_completes_the_incast_and_each_behaves_as_its_source() {
    support::require_root();
    let _serial = support::serial();
    let mut p99 = Vec::new();
    let mut inflation = Vec::new();
    // RL-CC runs below, where a run the machine did not keep up with is void.
    for cc in ["hpcc", "hpcc++", "dcqcn", "swift", "dctcp", "timely", "netscope"] {
        let (s, r) = run("incast-4to1-dc.yaml", cc, None);
        assert_eq!(r.summary.completed, 4, "{cc}: every flow completes");
        for f in &r.flows {
            assert_eq!(f.bytes_received, f.size, "{cc}: flow {} intact", f.id);
        }
        match cc {
            "dcqcn" => assert_queue_between_thresholds(&s, &r),
            "swift" => assert_rtt_near_target(&r),
            _ => {}
        }
        p99.push((cc, r.summary.bottleneck_queue.expect("a bottleneck").p99));
        inflation.push((cc, mean_rtt_inflation(&r), r.summary.normalized_goodput));
    }
    eprintln!("bottleneck queue p99 (bytes): {p99:?}");
    eprintln!("mean RTT inflation, normalized goodput: {inflation:?}");
    let dcqcn = inflation.iter().find(|x| x.0 == "dcqcn").map_or(f64::NAN, |x| x.1);
    let (rlcc_inflation, rlcc_goodput) = rlcc_kept_up();
    // Issue 7: the shipped policy on this incast. Measured: 89.1-89.3 % goodput, RTT inflation
    // 5.3-5.4 against DCQCN's 7.1-7.6.
    assert!(rlcc_goodput >= 0.85, "RL-CC's normalized goodput {rlcc_goodput:.3}");
    assert!(
        rlcc_inflation < dcqcn,
        "RL-CC's mean RTT inflation {rlcc_inflation:.2} is not below DCQCN's {dcqcn:.2}"
    );
    let of = |name: &str| p99.iter().find(|(c, _)| *c == name).map(|x| x.1).unwrap_or(0.0);
    assert!(
        of("hpcc") * 5.0 <= of("dcqcn"),
        "HPCC's queue p99 {} is not 5x below DCQCN's {}",
        of("hpcc"),
        of("dcqcn")
    );
}

/// RL-CC's (mean RTT inflation, normalized goodput) on the incast, from a run the machine
/// kept up with: a run with the lab's timing warning (frames or wake-ups late by a tenth of
/// an RTT) is void and runs again twice as slow, up to three times; every attempt must still
/// deliver every flow intact.
fn rlcc_kept_up() -> (f64, f64) {
    let s = scenario("incast-4to1-dc.yaml", "rlcc", None);
    let d = s.dilation;
    let runs = support::run_kept_up("rl", &s, &[d, 2.0 * d, 2.0 * d], f64::INFINITY, Duration::ZERO);
    for r in &runs {
        assert_eq!(r.summary.completed, 4, "rlcc: every flow completes");
        for f in &r.flows {
            assert_eq!(f.bytes_received, f.size, "rlcc: flow {} intact", f.id);
        }
    }
    let r = runs.last().expect("at least one attempt");
    let figures = (mean_rtt_inflation(r), r.summary.normalized_goodput);
    eprintln!("rlcc at dilation {}: {figures:?}", r.summary.dilation);
    figures
}

/// The built-in default scenario (100 Mb/s, 200 us links: a millisecond RTT) with `cc`, whose
/// parameters follow the scenario's path.
fn default_with(cc: &str) -> Results {
    let o = Overrides {
        controller: Some(cc.into()),
        ..Overrides::default()
    };
    let s = Scenario::builtin(&o).expect("the default scenario");
    support::run_scenario(&format!("d-{cc}"), &s)
}

#[test]
fn on_the_default_scenario_swift_meets_its_target_and_dcqcn_fits_its_buffer() {
    support::require_root();
    let _serial = support::serial();
    let r = default_with("swift");
    assert_eq!(r.summary.completed, 4, "swift: every flow completes");
    let (from, to) = steady(&r);
    let ratios: Vec<f64> = r
        .series
        .iter()
        .filter(|p| (from..to).contains(&p.t_ns))
        .filter_map(|p| Some(p.rtt_ns? as f64 / p.target_delay_ns? as f64))
        .collect();
    assert!(
        ratios.len() > 100,
        "too few RTT samples in steady state: {}",
        ratios.len()
    );
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    eprintln!(
        "default scenario, swift: mean RTT / target {mean:.3} over {} samples",
        ratios.len()
    );
    assert!(
        (0.8..=1.2).contains(&mean),
        "Swift's mean RTT is {mean:.2} times its target"
    );

    let r = default_with("dcqcn");
    assert_eq!(r.summary.completed, 4, "dcqcn: every flow completes");
    let q = r.summary.bottleneck_queue.expect("a bottleneck");
    eprintln!(
        "default scenario, dcqcn: queue p99 {} B, drops {}",
        q.p99, r.summary.drops
    );
    assert_eq!(r.summary.drops, 0, "DCQCN overflowed the buffer");
    assert!(q.p99 < 1e6, "DCQCN's queue p99 {} B reaches the 1 MB buffer", q.p99);
}

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
    let mut increase = Vec::new();
    for cc in ["dcqcn", "netscope"] {
        let (_, together) = run(file, cc, None);
        for app in ["sensitive", "bulk"] {
            let (_, alone) = run(file, cc, Some(app));
            let (t, a) = (runtime(&together, app), runtime(&alone, app));
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
