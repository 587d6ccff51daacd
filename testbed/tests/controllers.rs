//! Every controller on the same datacenter-scale 4-to-1 incast (`topologies/incast-4to1-dc.yaml`,
//! 10 Gb/s run 100 times slower): each completes every flow intact and Swift's RTT sits at its
//! target; from runs made under the same conditions, DCQCN's queue sits between its ECN
//! thresholds, HPCC's queue far below DCQCN's, and RL-CC's shipped policy keeps 85 % goodput
//! with less RTT inflation than DCQCN. On the built-in default (millisecond RTTs), Swift meets
//! its derived target and DCQCN fits its buffer. Then
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

/// Each RTT sample over the target delay in force then, in steady state (Swift's series).
fn rtt_over_target(r: &Results) -> Vec<f64> {
    let (from, to) = steady(r);
    r.series
        .iter()
        .filter(|p| (from..to).contains(&p.t_ns))
        .filter_map(|p| Some(p.rtt_ns? as f64 / p.target_delay_ns? as f64))
        .collect()
}

/// Swift's RTT in steady state settles near its target delay: the median ratio of the RTT
/// sample to the target within 25 %.
fn assert_rtt_near_target(r: &Results) {
    let ratios = rtt_over_target(r);
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

/// Every run must deliver every flow intact.
fn assert_intact(cc: &str, r: &Results, flows: usize) {
    assert_eq!(r.summary.completed, flows, "{cc}: every flow completes");
    for f in &r.flows {
        assert_eq!(f.bytes_received, f.size, "{cc}: flow {} intact", f.id);
    }
}

#[test]
fn every_controller_completes_the_incast_and_each_behaves_as_its_source() {
    support::require_root();
    let _serial = support::serial();
    for cc in ["hpcc++", "swift", "dctcp", "timely", "netscope"] {
        let (_, r) = run("incast-4to1-dc.yaml", cc, None);
        assert_intact(cc, &r, 4);
        if cc == "swift" {
            assert_rtt_near_target(&r);
        }
    }
}

/// Time dilation of each attempt of the comparison: the scenario's, twice it (twice), four times
/// it (twice). All runs of an attempt share it, and every run of the attempt must keep up. On
/// this VM a run misses the bar about one time in five whatever the dilation (it pauses a vCPU
/// for 0.4-4 ms every ~512 ms, and the kernel's softirq for a veth waits for a core the workers
/// hold): with three runs per attempt, three attempts failed together in one suite run of four,
/// so there are five. The two-apps run at 10 Gb/s with 40 flows is the heaviest: at twice its
/// dilation it warned in one run of six.
const COMPARISON_DILATIONS: [f64; 5] = [1.0, 2.0, 2.0, 4.0, 4.0];
/// Where the comparison on incast-4to1-dc starts: the smallest dilation the reference machine
/// keeps time at there (the shipped file says `auto`, which runs at fixed dilations do not use).
const INCAST_BASE: f64 = 100.0;
/// The same for two-apps-dc, whose 40 flows warned at 100 in one run of two.
const TWO_APPS_BASE: f64 = 200.0;
/// Share of the CPU time the hypervisor may take during a run that is compared.
const MAX_STEAL: f64 = 0.03;

/// HPCC, DCQCN and RL-CC compared on the incast from runs under the same conditions: all at
/// the same dilation in one attempt, each kept up with by the machine (a run with the lab's
/// timing warning or over 3 % steal voids the attempt: machine overhead in the RTT shrinks with
/// dilation, so a retry of one controller alone would favour it).
#[test]
fn hpcc_and_rlcc_against_dcqcn_on_the_incast() {
    support::require_root();
    let _serial = support::serial();
    let set: Vec<Scenario> = ["hpcc", "dcqcn", "rlcc"]
        .iter()
        .map(|cc| scenario("incast-4to1-dc.yaml", cc, None))
        .collect();
    let dilations: Vec<f64> = COMPARISON_DILATIONS.iter().map(|k| k * INCAST_BASE).collect();
    let runs = support::run_all_kept_up("cmp", &set, &dilations, MAX_STEAL, Duration::from_secs(2));
    let [hpcc, dcqcn, rlcc] = [&runs[0], &runs[1], &runs[2]];
    for (cc, r) in [("hpcc", hpcc), ("dcqcn", dcqcn), ("rlcc", rlcc)] {
        assert_intact(cc, r, 4);
    }
    assert_queue_between_thresholds(&set[1], dcqcn);
    let p99 = |r: &Results| r.summary.bottleneck_queue.expect("a bottleneck").p99;
    eprintln!(
        "queue p99: hpcc {} B, dcqcn {} B, rlcc {} B",
        p99(hpcc),
        p99(dcqcn),
        p99(rlcc)
    );
    assert!(
        p99(hpcc) * 5.0 <= p99(dcqcn),
        "HPCC's queue p99 {} is not 5x below DCQCN's {}",
        p99(hpcc),
        p99(dcqcn)
    );
    let (rl_inflation, dc_inflation) = (mean_rtt_inflation(rlcc), mean_rtt_inflation(dcqcn));
    let rl_goodput = rlcc.summary.normalized_goodput;
    eprintln!(
        "at dilation {}: RL-CC goodput {rl_goodput:.3}, RTT inflation {rl_inflation:.2}; DCQCN {dc_inflation:.2}",
        rlcc.summary.dilation
    );
    // Issue 7: the shipped policy on this incast. Measured: 89.1-89.3 % goodput, RTT inflation
    // 5.3-5.4 against DCQCN's 7.1-7.6.
    assert!(rl_goodput >= 0.85, "RL-CC's normalized goodput {rl_goodput:.3}");
    assert!(
        rl_inflation < dc_inflation,
        "RL-CC's mean RTT inflation {rl_inflation:.2} is not below DCQCN's {dc_inflation:.2}"
    );
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
    let ratios = rtt_over_target(&r);
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
    // Each controller with both applications, then each application alone, all under the same
    // conditions.
    let cases: Vec<(&str, Option<&str>)> = ["dcqcn", "netscope"]
        .into_iter()
        .flat_map(|cc| [(cc, None), (cc, Some("sensitive")), (cc, Some("bulk"))])
        .collect();
    let set: Vec<Scenario> = cases.iter().map(|&(cc, only)| scenario(file, cc, only)).collect();
    let dilations: Vec<f64> = COMPARISON_DILATIONS.iter().map(|k| k * TWO_APPS_BASE).collect();
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
