//! Controllers on links that impair frames (tc-netem's models, `switch/src/impair/`), exactly
//! on the simulator: the same seed gives the same run.

use intlab_sim::star::{Outcome, Star};
use intlab_switch::impair::{ImpairmentSpec, LossModel};
use intlab_transport::cc::ControllerConfig;

/// Gilbert-Elliott with every frame lost in the bad state and bursts of 1/r = 2 frames on
/// average, at a long-run loss of 1 %: p / (p + r) = 0.01.
fn burst_loss() -> ImpairmentSpec {
    let r = 0.5;
    ImpairmentSpec {
        loss: Some(LossModel::gilbert_elliott(0.01 * r / 0.99, Some(r), None, None)),
        ..ImpairmentSpec::default()
    }
}

/// The default scenario's incast (`topologies/incast-4to1.yaml`, 4 x 1 MB) under `cc` with
/// every link of the switch impaired as `impair` says.
fn incast(cc: &str, impair: ImpairmentSpec, seed: u64) -> Outcome {
    let star = Star {
        impair,
        seed,
        ..Star::incast_4to1()
    };
    let cc: ControllerConfig = serde_json::from_str(&format!(r#"{{"name":"{cc}"}}"#)).expect("a controller");
    let flows = star.incast_flows(&cc, 1_000_000);
    star.run(&flows, 60_000_000_000, |c| c.cnp_interval_ns = 0)
        .unwrap_or_else(|e| panic!("the incast under {cc:?} does not complete: {e}"))
}

/// Frames the switch's port `p` lost on its link.
fn lost(r: &Outcome, p: usize) -> u64 {
    r.ports[p].drops.get("injected_loss").copied().unwrap_or(0)
}

#[test]
fn every_controller_completes_the_default_incast_under_burst_loss() {
    for cc in [
        "hpcc", "hpcc++", "dcqcn", "swift", "timely", "dctcp", "netscope", "rlcc",
    ] {
        let r = incast(cc, burst_loss(), 1);
        assert_eq!(r.fct_ns.len(), 4, "{cc}: every flow completes");
        // Port 4 leads to the receiver: every frame it loses is a data frame, which go-back-N
        // must send again (at least once; it resends what followed a loss too).
        let data_lost = lost(&r, 4);
        let sent = r.ports[4].totals.tx_frames + data_lost;
        let share = data_lost as f64 / sent as f64;
        let retransmitted: u64 = r.flows.iter().map(|(f, _)| f.retransmissions).sum();
        eprintln!(
            "{cc}: {data_lost} of {sent} data frames lost ({:.2} %), {retransmitted} retransmitted",
            share * 100.0
        );
        assert!(data_lost > 0, "{cc}: no frame lost");
        assert!(
            retransmitted >= data_lost,
            "{cc}: {retransmitted} retransmissions for {data_lost} lost frames"
        );
        // About 4,000 data frames in bursts of 2: the share's standard error is about
        // sqrt(0.01 · 2 / 4,000) = 0.22 points; 0.8 points is over three of them.
        assert!((share - 0.01).abs() < 0.008, "{cc}: {:.2} % lost", share * 100.0);
    }
}

#[test]
fn the_same_seed_loses_the_same_frames_and_another_seed_others() {
    let run = |seed| {
        let r = incast("dcqcn", burst_loss(), seed);
        (lost(&r, 4), r.fct_ns.clone())
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}
