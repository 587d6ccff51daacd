//! How each runtime worker kept time: the fidelity report split by the worker that ran the
//! ports and hosts, so that an overloaded worker shows as such (and a placement that loads one
//! worker more than the others can be seen).

use std::collections::HashMap;

use intlab_runtime::WorkerStats;
use intlab_switch::{PortSnapshot, SwitchSnapshot};
use serde::Serialize;

use super::{HostCounters, Timebase};

/// One worker's share of the run and how late it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkerFidelity {
    /// The worker's index.
    pub worker: usize,
    /// Hosts it ran.
    pub hosts: usize,
    /// Switch ports it ran.
    pub ports: usize,
    /// Share of the run it spent working (the rest it waited or polled).
    pub busy: f64,
    /// 99th percentile of how late its timers ran (ns, scenario time).
    pub timer_late_p99_ns: u64,
    /// 99th percentile of frame release lateness over every frame its ports sent (ns, scenario
    /// time).
    pub release_late_p99_ns: u64,
    /// Worst 99th percentile of host wake-up lateness over its hosts (ns, scenario time).
    pub host_wake_late_p99_ns: u64,
    /// Stalls of its hosts.
    pub host_stalls: u64,
}

/// Per worker, from what the workers, switches and hosts measured and where each ran.
pub fn per_worker(
    workers: &[WorkerStats],
    switches: &[SwitchSnapshot],
    hosts: &[HostCounters],
    host_worker: &HashMap<String, usize>,
    port_worker: &HashMap<(String, String), usize>,
    time: Timebase,
) -> Vec<WorkerFidelity> {
    let mut out: Vec<WorkerFidelity> = workers
        .iter()
        .map(|w| WorkerFidelity {
            worker: w.worker,
            busy: w.busy,
            timer_late_p99_ns: time.span(w.timer_late_p99_ns),
            ..WorkerFidelity::default()
        })
        .collect();
    let mut ports_of: Vec<Vec<&PortSnapshot>> = vec![Vec::new(); out.len()];
    for sw in switches {
        for p in &sw.ports {
            if let Some(i) = port_worker
                .get(&(sw.switch.clone(), p.name.clone()))
                .and_then(|&w| out.iter().position(|f| f.worker == w))
            {
                let f = &mut out[i];
                f.ports += 1;
                if p.totals.tx_frames > 0 {
                    f.release_late_p99_ns = f.release_late_p99_ns.max(time.span(p.release_late_p99_ns));
                    ports_of[i].push(p);
                }
            }
        }
    }
    // Pooled where the ports kept their distributions (the worst port's p99 stays otherwise).
    for (f, ports) in out.iter_mut().zip(ports_of) {
        if let Some(ns) = PortSnapshot::pooled_lateness(ports.into_iter(), 0.99) {
            f.release_late_p99_ns = time.span(ns);
        }
    }
    for h in hosts {
        if let Some(f) = host_worker
            .get(&h.host)
            .and_then(|&w| out.iter_mut().find(|f| f.worker == w))
        {
            f.hosts += 1;
            f.host_wake_late_p99_ns = f.host_wake_late_p99_ns.max(time.span(h.counters.wake_late_p99_ns));
            f.host_stalls += h.counters.stalls;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use intlab_switch::PortTotals;
    use intlab_transport::endpoint::EndpointCounters;

    #[test]
    fn ports_and_hosts_count_on_their_worker_in_scenario_time() {
        let workers: Vec<WorkerStats> = (0..2)
            .map(|w| WorkerStats {
                worker: w,
                busy: 0.5,
                timer_late_p99_ns: 10_000,
                ..WorkerStats::default()
            })
            .collect();
        let port = |name: &str, late: u64, tx: u64| PortSnapshot {
            name: name.into(),
            release_late_p99_ns: late,
            totals: PortTotals {
                tx_frames: tx,
                ..PortTotals::default()
            },
            ..PortSnapshot::default()
        };
        let switches = vec![SwitchSnapshot {
            switch: "s1".into(),
            ports: vec![port("a", 4_000, 1), port("b", 90_000, 0), port("c", 8_000, 5)],
            ..SwitchSnapshot::default()
        }];
        let host = |name: &str, late: u64, stalls: u64| HostCounters {
            host: name.into(),
            counters: EndpointCounters {
                wake_late_p99_ns: late,
                stalls,
                ..EndpointCounters::default()
            },
            pfc_received: Vec::new(),
            xoffs_read: Vec::new(),
        };
        let hosts = vec![host("h1", 2_000, 1), host("h2", 6_000, 2), host("h3", 1_000, 0)];
        let hw: HashMap<String, usize> = [("h1", 0), ("h2", 1), ("h3", 1)].map(|(h, w)| (h.to_owned(), w)).into();
        let pw: HashMap<(String, String), usize> = [("a", 0), ("b", 1), ("c", 1)]
            .map(|(p, w)| (("s1".to_owned(), p.to_owned()), w))
            .into();
        let time = Timebase {
            t0_ns: 0,
            end_ns: 0,
            dilation: crate::dilation::Dilation::new(2.0),
        };
        let f = per_worker(&workers, &switches, &hosts, &hw, &pw, time);
        assert_eq!((f[0].hosts, f[0].ports, f[1].hosts, f[1].ports), (1, 1, 2, 2));
        assert_eq!(f[0].release_late_p99_ns, 2_000, "scenario time");
        // Port b sent nothing: its lateness is no measurement.
        assert_eq!(f[1].release_late_p99_ns, 4_000);
        assert_eq!(f[1].host_wake_late_p99_ns, 3_000);
        assert_eq!((f[0].host_stalls, f[1].host_stalls), (1, 2));
        assert_eq!(f[0].timer_late_p99_ns, 5_000);
    }

    #[test]
    fn a_worker_s_lateness_pools_the_frames_of_its_ports() {
        let workers = vec![WorkerStats::default()];
        // 98 frames on time on a busy port, one very late on each of two quiet ones: each quiet
        // port's own p99 is its late frame; of all 100 frames, 2 % are late.
        let port = |name: &str, late: Vec<(u64, u64)>| PortSnapshot {
            name: name.into(),
            release_late_p99_ns: late.iter().map(|&(v, _)| v).max().unwrap_or(0),
            release_late: late,
            totals: PortTotals {
                tx_frames: 1,
                ..PortTotals::default()
            },
            ..PortSnapshot::default()
        };
        let ports = vec![
            port("busy", vec![(100, 98)]),
            port("q1", vec![(50_000, 1)]),
            port("q2", vec![(60_000, 1)]),
        ];
        assert_eq!(PortSnapshot::pooled_lateness(ports.iter(), 0.98), Some(100));
        assert_eq!(PortSnapshot::pooled_lateness(ports.iter(), 0.99), Some(50_000));
        assert_eq!(PortSnapshot::pooled_lateness(ports.iter(), 1.0), Some(60_000));
        assert_eq!(
            PortSnapshot::pooled_lateness(ports[..0].iter(), 0.99),
            None,
            "no frames"
        );
        let switches = vec![SwitchSnapshot {
            switch: "s1".into(),
            ports,
            ..SwitchSnapshot::default()
        }];
        let pw: HashMap<(String, String), usize> = ["busy", "q1", "q2"]
            .map(|p| (("s1".to_owned(), p.to_owned()), 0))
            .into();
        let time = Timebase {
            t0_ns: 0,
            end_ns: 0,
            dilation: crate::dilation::Dilation::new(1.0),
        };
        let f = per_worker(&workers, &switches, &[], &HashMap::new(), &pw, time);
        assert_eq!(f[0].release_late_p99_ns, 50_000, "pooled, not the worst port's 60,000");
    }
}
