//! The run's results in the files the ns-3 HPCC simulator writes (`simulation/scratch/third.cc`
//! of alibaba-edu/High-Precision-Congestion-Control), so that its analysis scripts run on a
//! lab's results: `ns3/fct.txt`, `ns3/qlen.txt` and `ns3/pfc.txt`.

use std::fmt::Write as _;
use std::path::Path;

use intlab_switch::SwitchSnapshot;

use super::write_error::{WriteError, at};
use super::{FlowResult, QueueSeries, Results};

/// The folder inside a run's results.
pub const DIR: &str = "ns3";
/// One line per completed flow.
pub const FCT: &str = "fct.txt";
/// Queue-length distributions per switch port.
pub const QLEN: &str = "qlen.txt";
/// Every PFC frame a port or a host's NIC received.
pub const PFC: &str = "pfc.txt";

/// The destination port ns-3's traffic generator gives every flow (its `fct_analysis.py` keeps
/// flows of port 100): the lab's own is RoCEv2's 4791 for all.
const NS3_FLOW_PORT: u16 = 100;

/// Writes `ns3/fct.txt` and `ns3/qlen.txt` into `dir`.
pub fn write(dir: &Path, r: &Results) -> Result<(), WriteError> {
    let dir = dir.join(DIR);
    std::fs::create_dir_all(&dir).map_err(at(&dir, ""))?;
    std::fs::write(dir.join(FCT), fct(&r.flows)).map_err(at(&dir, FCT))?;
    std::fs::write(dir.join(QLEN), qlen(&r.switches, &r.queues)).map_err(at(&dir, QLEN))?;
    std::fs::write(dir.join(PFC), pfc(&r.switches, &r.hosts)).map_err(at(&dir, PFC))
}

/// ns-3's `get_pfc` line for each PFC frame a device received, in time order: time (ns),
/// node id, node type (0 host, 1 switch), device index, 1 for a pause or 0 for a resume. A
/// switch is its INT node id and its port's index from 1, as in `qlen.txt`; a host is its
/// index among the hosts from 0 (ns-3 numbers hosts first) and device 1. A host's NIC reads PFC
/// frames in batches and keeps the last of each: one line per batch.
fn pfc(switches: &[SwitchSnapshot], hosts: &[super::HostCounters]) -> String {
    let mut lines: Vec<(u64, u32, u8, usize, u8)> = Vec::new();
    for sw in switches {
        for (j, port) in sw.ports.iter().enumerate() {
            lines.extend(
                port.pfc_received
                    .iter()
                    .map(|&(t, pause)| (t, sw.node_id, 1, j + 1, u8::from(pause))),
            );
        }
    }
    for (k, h) in hosts.iter().enumerate() {
        let id = u32::try_from(k).unwrap_or(u32::MAX);
        lines.extend(h.pfc_received.iter().map(|&(t, pause)| (t, id, 0, 1, u8::from(pause))));
    }
    lines.sort_unstable();
    let mut out = String::new();
    for (t, node, kind, device, pause) in lines {
        let _infallible = writeln!(out, "{t} {node} {kind} {device} {pause}");
    }
    out
}

/// ns-3's `qp_finish` line for each completed flow, in completion order: source and destination
/// address (8 hex digits), source and destination port, size (B), start (ns), FCT (ns), and the
/// FCT the flow would have alone (ns; here the lab's ideal FCT, docs/results.md).
fn fct(flows: &[FlowResult]) -> String {
    let mut done: Vec<_> = flows.iter().filter_map(|f| f.fct_ns.map(|fct| (f, fct))).collect();
    done.sort_by_key(|(f, fct)| (f.start_ns + fct, f.id));
    let mut out = String::new();
    for (f, fct) in done {
        let _infallible = writeln!(
            out,
            "{:08x} {:08x} {} {} {} {} {} {}",
            u32::from(f.src_ip),
            u32::from(f.dst_ip),
            f.src_port,
            NS3_FLOW_PORT,
            f.size,
            f.start_ns,
            fct,
            f.ideal_fct_ns
        );
    }
    out
}

/// ns-3's `monitor_buffer` output, once at the end of the run: `time: T`, then per switch port
/// `NODE PORT` and how many samples found its queue at 0, 1, 2, ... KB (10^3 B). NODE is the
/// switch's node id (its INT node id), PORT its port's index from 1 (ns-3's device 0 is the
/// loopback); the samples are the lab's queue trace (the largest queue in each interval).
fn qlen(switches: &[SwitchSnapshot], queues: &[QueueSeries]) -> String {
    let end = queues
        .iter()
        .flat_map(|q| q.points.iter().map(|p| p.0))
        .max()
        .unwrap_or(0);
    let mut out = format!("time: {end}\n");
    for sw in switches {
        for (j, port) in sw.ports.iter().enumerate() {
            let Some(q) = queues.iter().find(|q| q.switch == sw.switch && q.port == port.name) else {
                continue;
            };
            let mut counts: Vec<u64> = Vec::new();
            for &(_, bytes) in &q.points {
                let kb = (bytes / 1000) as usize;
                if counts.len() <= kb {
                    counts.resize(kb + 1, 0);
                }
                counts[kb] += 1;
            }
            let _infallible = write!(out, "{} {}", sw.node_id, j + 1);
            for c in counts {
                let _infallible = write!(out, " {c}");
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use intlab_switch::counters::PortSnapshot;

    #[test]
    fn fct_lines_have_ns3_s_columns() {
        let flows = [
            FlowResult {
                size: 1_000_000,
                ideal_fct_ns: 90_000,
                ..FlowResult::fixture(1, 5_000, Some(120_000))
            },
            FlowResult::fixture(2, 0, None),
        ];
        // ns-3's own `%08x %08x %u %u %lu %lu %lu %lu`; the unfinished flow has no line.
        assert_eq!(fct(&flows), "0a000001 0a000002 49152 100 1000000 5000 120000 90000\n");
    }

    #[test]
    fn qlen_counts_samples_per_kilobyte() {
        let port = |name: &str| PortSnapshot {
            name: name.into(),
            ..PortSnapshot::default()
        };
        let switches = [SwitchSnapshot {
            switch: "s1".into(),
            node_id: 7,
            ports: vec![port("eth1"), port("eth2")],
            ..SwitchSnapshot::default()
        }];
        let queues = [QueueSeries {
            switch: "s1".into(),
            port: "eth2".into(),
            points: vec![(1_000, 0), (2_000, 999), (3_000, 2_500), (4_000, 1_000)],
        }];
        // eth1 carried nothing (no trace): no line; eth2 is device 2.
        assert_eq!(qlen(&switches, &queues), "time: 4000\n7 2 2 1 1\n");
    }

    #[test]
    fn pfc_lines_have_ns3_s_columns_in_time_order() {
        let switches = [SwitchSnapshot {
            switch: "s1".into(),
            node_id: 3,
            ports: vec![
                PortSnapshot {
                    name: "eth1".into(),
                    pfc_received: vec![(5_000, true), (9_000, false)],
                    ..PortSnapshot::default()
                },
                PortSnapshot::default(),
            ],
            ..SwitchSnapshot::default()
        }];
        let hosts = [super::super::HostCounters {
            host: "h1".into(),
            counters: Default::default(),
            pfc_received: vec![(7_000, true)],
            xoffs_read: Vec::new(),
        }];
        // ns-3's `%lu %u %u %u %u`: time, node, node type, device, pause (1) or resume (0).
        assert_eq!(pfc(&switches, &hosts), "5000 3 1 1 1\n7000 0 0 1 1\n9000 3 1 1 0\n");
    }
}
