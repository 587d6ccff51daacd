//! Routes by shortest paths with ECMP: at every switch, each host is reached through every
//! neighbour that lies on some shortest path to it.

use std::collections::VecDeque;

use super::{NodeKind, Topology};

/// For every switch and host: the links (indices) a switch may forward that host's traffic on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    /// `next[switch][host]`: link indices, empty when unreachable or not a switch/host pair.
    pub next: Vec<Vec<Vec<usize>>>,
}

/// Links between `host` and every node (usize::MAX when unreachable), by breadth-first search;
/// hosts do not forward.
pub fn distances(t: &Topology, host: usize) -> Vec<usize> {
    let mut dist = vec![usize::MAX; t.nodes.len()];
    dist[host] = 0;
    let mut queue = VecDeque::from([host]);
    while let Some(u) = queue.pop_front() {
        if u != host && t.nodes[u].kind == NodeKind::Host {
            continue;
        }
        for (li, end) in t.links_of(u) {
            let v = t.links[li].ends[1 - end].node;
            if dist[v] == usize::MAX {
                dist[v] = dist[u] + 1;
                queue.push_back(v);
            }
        }
    }
    dist
}

/// Shortest-path routes with every equal-cost next hop kept (ECMP).
pub fn shortest_paths(t: &Topology) -> Routes {
    let n = t.nodes.len();
    let mut next = vec![vec![Vec::new(); n]; n];
    for host in t.hosts() {
        let dist = distances(t, host);
        for s in t.switches() {
            if dist[s] == usize::MAX {
                continue;
            }
            next[s][host] = t
                .links_of(s)
                .filter(|&(li, end)| {
                    let v = t.links[li].ends[1 - end].node;
                    dist[v] != usize::MAX
                        && dist[v] + 1 == dist[s]
                        && (v == host || t.nodes[v].kind == NodeKind::Switch)
                })
                .map(|(li, _)| li)
                .collect();
        }
    }
    Routes { next }
}
