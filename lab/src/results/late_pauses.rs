//! Pauses that took effect late: a switch asks for an XOFF when an ingress crosses its
//! threshold, and its headroom holds what the upstream sends until the pause is obeyed, for
//! the link's round trip plus an allowance for the lab's own lateness. When the switch's worker
//! released the pause late, or the host's worker read it late, the upstream sent on past that
//! and the headroom overran: the lab's timing, not its MMU. Each XOFF's due time at the host
//! (the switch's counters) is paired with the time the host read it (the host's).

use intlab_switch::counters::SwitchSnapshot;

use super::{HostCounters, HostStall};
use crate::topology::{NodeKind, Topology};

/// The XOFFs the hosts obeyed more than `allowance_ns` after they were due (scenario ns): one
/// record per such pause, at the time the switch asked for it, late by how long after its due
/// time the host read it. Times in `switches` (the XOFFs sent) and `hosts` (the XOFFs read)
/// are scenario ns from the start.
pub(super) fn late_pauses(
    t: &Topology,
    switches: &[SwitchSnapshot],
    hosts: &[HostCounters],
    allowance_ns: u64,
) -> Vec<HostStall> {
    let mut late = Vec::new();
    for sw in switches {
        let Some(node) = t.node(&sw.switch) else { continue };
        for port in sw.ports.iter().filter(|p| !p.xoffs_sent.is_empty()) {
            let Some((l, end)) = t.link_at(node, &port.name) else {
                continue;
            };
            let peer = &t.nodes[t.links[l].ends[1 - end].node];
            if peer.kind != NodeKind::Host {
                continue;
            }
            let Some(host) = hosts.iter().find(|h| h.host == peer.name) else {
                continue;
            };
            let read = &host.xoffs_read;
            for (k, &(asked, due)) in port.xoffs_sent.iter().enumerate() {
                // The host's first XOFF to arrive after the switch asked for this one, if it
                // arrived before the switch asked for the next (a later one's reading says
                // nothing of this one).
                let next = port.xoffs_sent.get(k + 1).map_or(u64::MAX, |&(a, _)| a);
                let i = read.partition_point(|&(arrived, _)| arrived < asked);
                let Some(&(arrived, read_at)) = read.get(i) else {
                    continue;
                };
                if arrived >= next {
                    continue;
                }
                let late_ns = read_at.saturating_sub(due);
                if late_ns > allowance_ns {
                    late.push(HostStall {
                        host: host.host.clone(),
                        at_ns: asked,
                        late_ns,
                    });
                }
            }
        }
    }
    late.sort_by_key(|s| s.at_ns);
    late
}

#[cfg(test)]
mod tests {
    use super::*;
    use intlab_switch::counters::PortSnapshot;

    fn switch(port: &str, xoffs_sent: Vec<(u64, u64)>) -> SwitchSnapshot {
        SwitchSnapshot {
            switch: "s".into(),
            ports: vec![PortSnapshot {
                name: port.into(),
                xoffs_sent,
                ..PortSnapshot::default()
            }],
            ..SwitchSnapshot::default()
        }
    }

    fn host(name: &str, xoffs_read: Vec<(u64, u64)>) -> HostCounters {
        HostCounters {
            host: name.into(),
            counters: Default::default(),
            pfc_received: Vec::new(),
            xoffs_read,
        }
    }

    #[test]
    fn a_pause_read_later_than_the_allowance_after_its_due_time_is_late() {
        let t = crate::topology::two_hosts_on_a_switch();
        let port = &t.links[0].ends[0].interface;
        // Asked at 1,000, due at the host at 11,000; read 11,500 (on time), 40,000 (late by
        // 29,000) and one never read.
        let sw = [switch(port, vec![(1_000, 11_000), (20_000, 30_000), (50_000, 60_000)])];
        let hosts = [
            host("a", vec![(11_200, 11_500), (30_100, 59_000)]),
            host("b", vec![(0, 90_000)]),
        ];
        let late = late_pauses(&t, &sw, &hosts, 10_000);
        assert_eq!(late.len(), 1, "{late:?}");
        assert_eq!(
            (late[0].host.as_str(), late[0].at_ns, late[0].late_ns),
            ("a", 20_000, 29_000)
        );
        // The same readings are on time under a larger allowance.
        assert!(late_pauses(&t, &sw, &hosts, 30_000).is_empty());
    }

    #[test]
    fn a_reading_is_not_paired_with_an_earlier_pause_it_arrived_after_the_next() {
        let t = crate::topology::two_hosts_on_a_switch();
        let port = &t.links[0].ends[0].interface;
        // The first XOFF never reached the host; the reading belongs to the second.
        let sw = [switch(port, vec![(1_000, 11_000), (20_000, 30_000)])];
        let late = late_pauses(&t, &sw, &[host("a", vec![(30_000, 30_500)])], 1_000);
        assert!(late.is_empty(), "{late:?}");
    }
}
