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
    distances_over(t, host, &|_| true)
}

/// [`distances`] over the links `alive` keeps.
fn distances_over(t: &Topology, host: usize, alive: &dyn Fn(usize) -> bool) -> Vec<usize> {
    let mut dist = vec![usize::MAX; t.nodes.len()];
    dist[host] = 0;
    let mut queue = VecDeque::from([host]);
    while let Some(u) = queue.pop_front() {
        if u != host && t.nodes[u].kind == NodeKind::Host {
            continue;
        }
        for (li, end) in t.links_of(u).filter(|&(li, _)| alive(li)) {
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
    shortest_paths_over(t, &|_| true)
}

/// [`shortest_paths`] over the links `alive` keeps.
fn shortest_paths_over(t: &Topology, alive: &dyn Fn(usize) -> bool) -> Routes {
    let n = t.nodes.len();
    let mut next = vec![vec![Vec::new(); n]; n];
    for host in t.hosts() {
        let dist = distances_over(t, host, alive);
        for s in t.switches() {
            if dist[s] == usize::MAX {
                continue;
            }
            next[s][host] = t
                .links_of(s)
                .filter(|&(li, _)| alive(li))
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

/// The routes a lab uses: shortest paths with ECMP, then the file's own routes in their place.
pub fn routes(t: &Topology) -> Routes {
    let mut r = shortest_paths(t);
    for o in &t.routes {
        r.next[o.switch][o.host] = o.via.clone();
    }
    r
}

/// The routes a fabric converges to once links `down` (indices) are gone: shortest paths over
/// the others, and the file's own routes where they keep a link that is up.
pub fn routes_without(t: &Topology, down: &std::collections::BTreeSet<usize>) -> Routes {
    let alive = |li: usize| !down.contains(&li);
    let mut r = shortest_paths_over(t, &alive);
    for o in &t.routes {
        let via: Vec<usize> = o.via.iter().copied().filter(|&li| alive(li)).collect();
        if !via.is_empty() {
            r.next[o.switch][o.host] = via;
        }
    }
    r
}

/// The first forwarding loop the file's routes make: the index of a route override on it and
/// the switches around it (the first repeated at the end). Computed routes never loop; an
/// override can send frames back the way they came.
pub fn first_loop(t: &Topology) -> Option<(usize, Vec<usize>)> {
    let r = routes(t);
    for host in t.hosts() {
        // Depth-first over switch -> next switch towards `host`: 0 unseen, 1 on the path, 2 done.
        let mut state = vec![0u8; t.nodes.len()];
        for start in t.switches() {
            let mut path = Vec::new();
            if let Some(cycle) = visit(t, &r, host, start, &mut state, &mut path) {
                let k = t
                    .routes
                    .iter()
                    .position(|o| o.host == host && cycle.contains(&o.switch))
                    .unwrap_or(0);
                return Some((k, cycle));
            }
        }
    }
    None
}

fn visit(
    t: &Topology,
    r: &Routes,
    host: usize,
    at: usize,
    state: &mut [u8],
    path: &mut Vec<usize>,
) -> Option<Vec<usize>> {
    match state[at] {
        2 => return None,
        1 => {
            let from = path.iter().position(|&n| n == at).unwrap_or(0);
            let mut cycle = path[from..].to_vec();
            cycle.push(at);
            return Some(cycle);
        }
        _ => {}
    }
    state[at] = 1;
    path.push(at);
    for &li in &r.next[at][host] {
        let l = &t.links[li];
        let next = if l.ends[0].node == at {
            l.ends[1].node
        } else {
            l.ends[0].node
        };
        if t.nodes[next].kind == NodeKind::Switch
            && let Some(c) = visit(t, r, host, next, state, path)
        {
            return Some(c);
        }
    }
    path.pop();
    state[at] = 2;
    None
}

impl Routes {
    /// The links from host `src` to host `dst`, taking the first next hop at every switch (with
    /// ECMP every choice has the same length); None when unreachable.
    pub fn path(&self, t: &Topology, src: usize, dst: usize) -> Option<Vec<usize>> {
        let (first, end) = t.links_of(src).next()?;
        let mut links = vec![first];
        let mut at = t.links[first].ends[1 - end].node;
        while at != dst {
            if t.nodes[at].kind != NodeKind::Switch || links.len() > t.links.len() {
                return None;
            }
            let &li = self.next[at][dst].first()?;
            let l = &t.links[li];
            at = if l.ends[0].node == at {
                l.ends[1].node
            } else {
                l.ends[0].node
            };
            links.push(li);
        }
        Some(links)
    }
}
