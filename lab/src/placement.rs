//! Where each part of a lab runs: every host with the switch port it is attached to (frames
//! between them then wake no other worker), every link between switches with both its ends,
//! and these units dealt over the workers by the traffic the workload plans through them,
//! heaviest first onto the least loaded worker. A port and a host cost their worker about the
//! same per packet (each sends through the kernel what the other receives), so a 16-to-1
//! incast puts the receiver and its port on one worker and the sixteen senders on the other.

use std::collections::HashMap;

use crate::topology::{NodeKind, Topology, routes};

/// Traffic the workload plans: (source host node, destination host node, bytes).
pub type PlannedLoad = (usize, usize, u64);

/// The worker of every host and link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Host node index → worker.
    pub host: HashMap<usize, usize>,
    /// Link index → the worker of its switch ends.
    pub link: HashMap<usize, usize>,
    /// Planned packets per worker (data and ACKs, counted at every host and port).
    pub load: Vec<u64>,
}

impl Placement {
    /// Deals `t` over `workers` workers by the traffic `planned` puts through each part
    /// (payload of `mtu` bytes per packet, one ACK per packet); with no traffic, round robin.
    pub fn new(t: &Topology, workers: usize, planned: &[PlannedLoad], mtu: u64) -> Placement {
        let workers = workers.max(1);
        let per_link = link_packets(t, planned, mtu.max(1));
        // Units: a host with its links (usually one), and each link between switches.
        let mut units: Vec<(u64, Vec<usize>, Vec<usize>)> = Vec::new();
        let mut unit_of_link = vec![None; t.links.len()];
        for h in t.hosts() {
            let links: Vec<usize> = t.links_of(h).map(|(li, _)| li).collect();
            // Host and port each handle every packet of the link once.
            let weight = links.iter().map(|&li| 2 * per_link[li]).sum();
            for &li in &links {
                unit_of_link[li] = Some(units.len());
            }
            units.push((weight, vec![h], links));
        }
        for (li, l) in t.links.iter().enumerate() {
            if unit_of_link[li].is_none() && l.ends.iter().all(|e| t.nodes[e.node].kind == NodeKind::Switch) {
                units.push((2 * per_link[li], vec![], vec![li]));
            }
        }
        // Heaviest first (ties in file order), each onto the least loaded worker; with no
        // traffic at all every unit weighs one, which deals them round robin.
        let none = units.iter().all(|u| u.0 == 0);
        let mut order: Vec<usize> = (0..units.len()).collect();
        order.sort_by_key(|&u| std::cmp::Reverse(units[u].0));
        let mut load = vec![0u64; workers];
        let mut count = vec![0usize; workers];
        let mut placement = Placement {
            host: HashMap::new(),
            link: HashMap::new(),
            load: Vec::new(),
        };
        for u in order {
            let (weight, hosts, links) = &units[u];
            let w = (0..workers)
                .min_by_key(|&w| (load[w], count[w]))
                .expect("at least one worker");
            load[w] += if none { 1 } else { *weight };
            count[w] += 1;
            placement.host.extend(hosts.iter().map(|&h| (h, w)));
            placement.link.extend(links.iter().map(|&li| (li, w)));
        }
        placement.load = if none { vec![0; workers] } else { load };
        placement
    }
}

/// Packets (data and ACKs) each link carries for `planned`, equal-cost paths sharing a
/// flow's packets equally.
pub(crate) fn link_packets(t: &Topology, planned: &[PlannedLoad], mtu: u64) -> Vec<u64> {
    let r = routes(t);
    let mut packets = vec![0f64; t.links.len()];
    for &(src, dst, bytes) in planned {
        let both_ways = 2.0 * bytes.div_ceil(mtu) as f64;
        let Some((first, end)) = t.links_of(src).next() else {
            continue;
        };
        packets[first] += both_ways;
        // (node, share of the flow) still on its way to dst.
        let mut frontier = vec![(t.links[first].ends[1 - end].node, 1.0f64)];
        let mut steps = 0;
        while let Some((at, share)) = frontier.pop() {
            steps += 1;
            if at == dst || t.nodes[at].kind != NodeKind::Switch || steps > 64 * t.links.len() {
                continue;
            }
            let next = &r.next[at][dst];
            for &li in next {
                let s = share / next.len() as f64;
                packets[li] += both_ways * s;
                let l = &t.links[li];
                let far = if l.ends[0].node == at {
                    l.ends[1].node
                } else {
                    l.ends[0].node
                };
                frontier.push((far, s));
            }
        }
    }
    packets.iter().map(|&p| p.round() as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn star(hosts: usize) -> Topology {
        let mut yaml = String::from(
            "name: star\ndefaults:\n  link: { rate: 10Gbps, delay: 1us, buffer: 1MB }\nnodes:\n  s1: { kind: switch }\n",
        );
        for h in 1..=hosts {
            yaml += &format!("  h{h}: {{ kind: host }}\n");
        }
        yaml += "links:\n";
        for h in 1..=hosts {
            yaml += &format!("  - endpoints: [\"s1:eth{h}\", \"h{h}:eth0\"]\n");
        }
        crate::topology::load_str(&yaml, std::path::Path::new("star.yaml")).expect("valid topology")
    }

    fn node(t: &Topology, name: &str) -> usize {
        t.nodes.iter().position(|n| n.name == name).expect("node")
    }

    #[test]
    fn an_incast_puts_the_receiver_alone_against_the_senders() {
        let t = star(17);
        let dst = node(&t, "h17");
        let planned: Vec<PlannedLoad> = (1..=16).map(|i| (node(&t, &format!("h{i}")), dst, 1_000_000)).collect();
        let p = Placement::new(&t, 2, &planned, 1000);
        let receiver = p.host[&dst];
        assert!(
            (1..=16).all(|i| p.host[&node(&t, &format!("h{i}"))] != receiver),
            "{p:?}"
        );
        // Its link goes with it.
        let (li, _) = t.links_of(dst).next().expect("a link");
        assert_eq!(p.link[&li], receiver);
        assert_eq!(p.load[0], p.load[1], "16 x 1 MB each way: {:?}", p.load);
    }

    #[test]
    fn without_traffic_units_go_round_robin() {
        let t = star(5);
        let p = Placement::new(&t, 2, &[], 1000);
        let on_zero = t.hosts().filter(|h| p.host[h] == 0).count();
        assert_eq!(on_zero, 3, "{p:?}");
        assert_eq!(p.host.len(), 5);
        assert_eq!(p.link.len(), 5);
    }

    #[test]
    fn equal_cost_paths_share_a_flow() {
        let yaml = "name: diamond\ndefaults:\n  link: { rate: 10Gbps, delay: 1us, buffer: 1MB }\nnodes:\n  a: { kind: switch }\n  b: { kind: switch }\n  c: { kind: switch }\n  d: { kind: switch }\n  h1: { kind: host }\n  h2: { kind: host }\nlinks:\n  - endpoints: [\"a:e1\", \"h1:eth0\"]\n  - endpoints: [\"a:e2\", \"b:e1\"]\n  - endpoints: [\"a:e3\", \"c:e1\"]\n  - endpoints: [\"b:e2\", \"d:e1\"]\n  - endpoints: [\"c:e2\", \"d:e2\"]\n  - endpoints: [\"d:e3\", \"h2:eth0\"]\n";
        let t = crate::topology::load_str(yaml, std::path::Path::new("diamond.yaml")).expect("valid");
        let packets = link_packets(&t, &[(node(&t, "h1"), node(&t, "h2"), 10_000)], 1000);
        assert_eq!(packets, vec![20, 10, 10, 10, 10, 20]);
    }
}
