//! Which machine (site) runs which part of a lab (`sites:`, `intlab plan --sites N`): every
//! switch with its hosts on one site (a host's link never crosses machines), the switches dealt
//! so that each site carries about the same planned traffic while as few links as can be join
//! two sites, since each such link becomes a tunnel between machines.

use std::collections::BTreeMap;

use crate::placement::{PlannedLoad, link_packets};
use crate::topology::{NodeKind, Topology};

/// How far above an even share a site's load may go while the cut is made smaller.
const BALANCE_SLACK: f64 = 0.10;

/// The site of every node of a topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitePlan {
    /// Site names, in order.
    pub names: Vec<String>,
    /// Node index → its site (index into `names`).
    pub site_of: Vec<usize>,
    /// Planned packets each site handles (every packet counted at each node it crosses).
    pub load: Vec<u64>,
}

/// Why a `sites:` assignment cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SitesError {
    /// A node in no site.
    #[error("node `{0}` is in no site: every node must be in one")]
    Missing(String),
    /// A node in two sites, or twice.
    #[error("node `{node}` is in site `{first}` and again in `{second}`")]
    Twice {
        /// The node.
        node: String,
        /// One site.
        first: String,
        /// The other.
        second: String,
    },
    /// A name that is no node.
    #[error("site `{site}` names `{node}`, which is no node of the topology")]
    Unknown {
        /// The site.
        site: String,
        /// The name.
        node: String,
    },
    /// A host away from its switch.
    #[error(
        "host `{host}` is on site `{host_site}` but its switch `{switch}` on `{switch_site}`: a host's link cannot cross machines"
    )]
    HostAway {
        /// The host.
        host: String,
        /// Its site.
        host_site: String,
        /// Its switch.
        switch: String,
        /// The switch's site.
        switch_site: String,
    },
}

impl SitesError {
    /// The site it is about, if one.
    pub fn site(&self) -> Option<&str> {
        match self {
            SitesError::Missing(_) => None,
            SitesError::Twice { second, .. } => Some(second),
            SitesError::Unknown { site, .. } => Some(site),
            SitesError::HostAway { host_site, .. } => Some(host_site),
        }
    }
}

impl SitePlan {
    /// The plan a user wrote: site name → its nodes' names, checked against `t`.
    pub fn from_names(t: &Topology, sites: &BTreeMap<String, Vec<String>>) -> Result<SitePlan, SitesError> {
        let names: Vec<String> = sites.keys().cloned().collect();
        let mut site_of: Vec<Option<usize>> = vec![None; t.nodes.len()];
        for (k, (site, nodes)) in sites.iter().enumerate() {
            for n in nodes {
                let i = t.node(n).ok_or_else(|| SitesError::Unknown {
                    site: site.clone(),
                    node: n.clone(),
                })?;
                if let Some(first) = site_of[i] {
                    return Err(SitesError::Twice {
                        node: n.clone(),
                        first: names[first].clone(),
                        second: site.clone(),
                    });
                }
                site_of[i] = Some(k);
            }
        }
        let site_of: Vec<usize> = site_of
            .iter()
            .enumerate()
            .map(|(i, s)| s.ok_or_else(|| SitesError::Missing(t.nodes[i].name.clone())))
            .collect::<Result<_, _>>()?;
        for h in t.hosts() {
            if let Some(s) = t.switch_of(h)
                && site_of[s] != site_of[h]
            {
                return Err(SitesError::HostAway {
                    host: t.nodes[h].name.clone(),
                    host_site: names[site_of[h]].clone(),
                    switch: t.nodes[s].name.clone(),
                    switch_site: names[site_of[s]].clone(),
                });
            }
        }
        let load = site_loads(&node_weights(t, &[], 1), &site_of, names.len());
        Ok(SitePlan { names, site_of, load })
    }

    /// Links whose two ends are on different sites: each becomes a tunnel between machines.
    pub fn cut_links(&self, t: &Topology) -> Vec<usize> {
        (0..t.links.len())
            .filter(|&li| {
                let [a, b] = &t.links[li].ends;
                self.site_of[a.node] != self.site_of[b.node]
            })
            .collect()
    }

    /// The plan as a scenario's `sites:` key.
    pub fn yaml(&self, t: &Topology) -> String {
        let mut out = String::from("sites:\n");
        for (k, name) in self.names.iter().enumerate() {
            let nodes: Vec<&str> = (0..t.nodes.len())
                .filter(|&i| self.site_of[i] == k)
                .map(|i| t.nodes[i].name.as_str())
                .collect();
            out.push_str(&format!("  {name}: [{}]\n", nodes.join(", ")));
        }
        out
    }
}

/// Planned packets each node handles: each packet of each of its links once (with no traffic
/// planned, one per host and per switch port, so that sites get about as many of each).
fn node_weights(t: &Topology, planned: &[PlannedLoad], mtu: u64) -> Vec<u64> {
    let packets = link_packets(t, planned, mtu.max(1));
    let none = packets.iter().all(|&p| p == 0);
    (0..t.nodes.len())
        .map(|n| t.links_of(n).map(|(li, _)| if none { 1 } else { packets[li] }).sum())
        .collect()
}

fn site_loads(weight: &[u64], site_of: &[usize], sites: usize) -> Vec<u64> {
    let mut load = vec![0u64; sites];
    for (n, &s) in site_of.iter().enumerate() {
        load[s] += weight[n];
    }
    load
}

/// Cuts `t` into `sites` sites (named `site1`, `site2`, ...) balancing the traffic `planned`
/// puts through each node (payload of `mtu` bytes per packet) and cutting as few links as it
/// can: switches grown into regions breadth first to an even share, then single switches
/// moved between sites while that cuts fewer links without a site exceeding its share by
/// more than 10 %, or evens the loads without cutting more.
pub fn plan(t: &Topology, planned: &[PlannedLoad], mtu: u64, sites: usize) -> SitePlan {
    let sites = sites.max(1);
    let weight = node_weights(t, planned, mtu);
    // Units: a switch with its hosts.
    let switches: Vec<usize> = t.switches().collect();
    let mut unit_weight: BTreeMap<usize, u64> = switches.iter().map(|&s| (s, weight[s])).collect();
    for h in t.hosts() {
        if let Some(s) = t.switch_of(h) {
            *unit_weight.entry(s).or_default() += weight[h];
        }
    }
    let total: u64 = unit_weight.values().sum();
    let share = total as f64 / sites as f64;
    let mut site_of_switch: BTreeMap<usize, usize> = BTreeMap::new();
    // Breadth first from the first switch not yet placed, filling one site to its share.
    let neighbours = |s: usize| -> Vec<usize> {
        t.links_of(s)
            .map(|(li, end)| t.links[li].ends[1 - end].node)
            .filter(|&n| t.nodes[n].kind == NodeKind::Switch)
            .collect()
    };
    let mut filled = 0u64;
    let mut site = 0;
    while site_of_switch.len() < switches.len() {
        let start = *switches
            .iter()
            .find(|s| !site_of_switch.contains_key(s))
            .expect("a switch left");
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            if site_of_switch.contains_key(&s) {
                continue;
            }
            let target = share * (site + 1) as f64;
            if site + 1 < sites && filled as f64 >= target {
                site += 1;
            }
            site_of_switch.insert(s, site);
            filled += unit_weight[&s];
            queue.extend(neighbours(s).into_iter().filter(|n| !site_of_switch.contains_key(n)));
        }
    }
    refine(t, &unit_weight, &mut site_of_switch, sites, share);
    let mut site_of = vec![0; t.nodes.len()];
    for (&s, &k) in &site_of_switch {
        site_of[s] = k;
    }
    for h in t.hosts() {
        site_of[h] = t.switch_of(h).map_or(0, |s| site_of_switch[&s]);
    }
    SitePlan {
        names: (1..=sites).map(|k| format!("site{k}")).collect(),
        load: site_loads(&weight, &site_of, sites),
        site_of,
    }
}

/// Moves single switches between sites while a move cuts fewer links within the balance
/// allowed, or evens the loads without cutting more; stops when no move helps.
fn refine(
    t: &Topology,
    unit_weight: &BTreeMap<usize, u64>,
    site_of: &mut BTreeMap<usize, usize>,
    sites: usize,
    share: f64,
) {
    let limit = share * (1.0 + BALANCE_SLACK);
    let cut = |site_of: &BTreeMap<usize, usize>| -> usize {
        t.links
            .iter()
            .filter(|l| {
                let [a, b] = l.ends.each_ref().map(|e| site_of.get(&e.node).copied());
                matches!((a, b), (Some(x), Some(y)) if x != y)
            })
            .count()
    };
    let loads = |site_of: &BTreeMap<usize, usize>| -> Vec<u64> {
        let mut load = vec![0u64; sites];
        for (s, &k) in site_of {
            load[k] += unit_weight[s];
        }
        load
    };
    // Bounded: each accepted move lowers (cut links, load spread) in lexicographic order.
    for _ in 0..(4 * site_of.len() * sites) {
        let (now_cut, now_load) = (cut(site_of), loads(site_of));
        let spread = |l: &[u64]| l.iter().max().copied().unwrap_or(0) - l.iter().min().copied().unwrap_or(0);
        let mut best: Option<(usize, usize, usize, u64)> = None;
        for (&s, &from) in site_of.iter() {
            for to in (0..sites).filter(|&k| k != from) {
                let mut trial = site_of.clone();
                trial.insert(s, to);
                let load = loads(&trial);
                if load[from] == 0 || load[to] as f64 > limit.max(now_load[to] as f64) {
                    continue;
                }
                let (c, sp) = (cut(&trial), spread(&load));
                if (c, sp) < (now_cut, spread(&now_load)) && best.is_none_or(|b| (c, sp) < (b.2, b.3)) {
                    best = Some((s, to, c, sp));
                }
            }
        }
        match best {
            Some((s, to, _, _)) => {
                site_of.insert(s, to);
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(name: &str) -> crate::scenario::Scenario {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../topologies/{name}.yaml"));
        crate::scenario::Scenario::load(&path, &crate::scenario::Overrides::default()).expect("a shipped scenario")
    }

    fn planned(s: &crate::scenario::Scenario) -> Vec<PlannedLoad> {
        s.flows().iter().map(|f| (f.src, f.dst, f.size)).collect()
    }

    #[test]
    fn a_dumbbell_in_two_is_cut_at_its_bottleneck() {
        let s = shipped("dumbbell");
        let p = plan(&s.topology, &planned(&s), 1024, 2);
        let cut = p.cut_links(&s.topology);
        assert_eq!(cut.len(), 1, "{}", p.yaml(&s.topology));
        let [a, b] = &s.topology.links[cut[0]].ends;
        assert!(
            [a, b].iter().all(|e| s.topology.nodes[e.node].kind == NodeKind::Switch),
            "the cut is between the switches"
        );
    }

    #[test]
    fn a_leaf_spine_in_two_keeps_each_leaf_with_its_hosts_and_the_loads_even() {
        let s = shipped("leaf-spine");
        let t = &s.topology;
        let p = plan(t, &planned(&s), 1024, 2);
        for h in t.hosts() {
            let sw = t.switch_of(h).expect("a switch");
            assert_eq!(p.site_of[h], p.site_of[sw], "{} away from its leaf", t.nodes[h].name);
        }
        let hosts_on = |k: usize| t.hosts().filter(|&h| p.site_of[h] == k).count();
        assert_eq!((hosts_on(0), hosts_on(1)), (8, 8), "{}", p.yaml(t));
        // Each leaf reaches both spines: a spine and two leaves a site cut 4 links, as few as
        // any even split can.
        assert_eq!(p.cut_links(t).len(), 4, "{}", p.yaml(t));
        let (lo, hi) = (p.load[0].min(p.load[1]), p.load[0].max(p.load[1]));
        assert!(hi as f64 <= lo as f64 * 1.25, "loads {:?}", p.load);
    }

    #[test]
    fn a_fat_tree_in_two_splits_its_pods() {
        let s = shipped("fat-tree-k4");
        let t = &s.topology;
        let p = plan(t, &planned(&s), 1024, 2);
        let hosts_on = |k: usize| t.hosts().filter(|&h| p.site_of[h] == k).count();
        assert_eq!((hosts_on(0), hosts_on(1)), (8, 8), "{}", p.yaml(t));
        // Two pods and two cores a site: each core reaches the other site's two pods once.
        assert!(
            p.cut_links(t).len() <= 8,
            "{} links cut:\n{}",
            p.cut_links(t).len(),
            p.yaml(t)
        );
    }

    #[test]
    fn a_written_plan_is_checked_node_by_node() {
        let s = shipped("dumbbell");
        let t = &s.topology;
        let mut sites: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let all: Vec<String> = t.nodes.iter().map(|n| n.name.clone()).collect();
        sites.insert("a".into(), all[..all.len() - 1].to_vec());
        assert_eq!(
            SitePlan::from_names(t, &sites),
            Err(SitesError::Missing(all[all.len() - 1].clone()))
        );
        sites.insert("b".into(), vec![all[all.len() - 1].clone(), "nowhere".into()]);
        assert!(matches!(
            SitePlan::from_names(t, &sites),
            Err(SitesError::Unknown { .. })
        ));
        let planned = plan(t, &[], 1024, 2);
        let back: BTreeMap<String, Vec<String>> = planned
            .names
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let nodes = (0..t.nodes.len()).filter(|&i| planned.site_of[i] == k);
                (name.clone(), nodes.map(|i| t.nodes[i].name.clone()).collect())
            })
            .collect();
        let again = SitePlan::from_names(t, &back).expect("a plan reads back");
        assert_eq!(again.site_of, planned.site_of);
        // A host moved away from its switch.
        let h = t.hosts().next().expect("a host");
        let mut moved = back.clone();
        let name = t.nodes[h].name.clone();
        for nodes in moved.values_mut() {
            nodes.retain(|n| *n != name);
        }
        let other = planned.names[1 - planned.site_of[h]].clone();
        moved.get_mut(&other).expect("the other site").push(name);
        assert!(matches!(
            SitePlan::from_names(t, &moved),
            Err(SitesError::HostAway { .. })
        ));
    }

    #[test]
    fn a_scenarios_sites_key_is_read_and_a_bad_one_refused_where_written() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/dumbbell.yaml");
        let text = std::fs::read_to_string(&path).expect("the shipped dumbbell");
        let t = shipped("dumbbell").topology;
        let good = plan(&t, &[], 1024, 2).yaml(&t);
        let load = |extra: &str| {
            crate::scenario::Scenario::from_text(
                &format!("{text}\n{extra}"),
                std::path::Path::new("d.yaml"),
                &crate::scenario::Overrides::default(),
            )
        };
        let s = load(&good).expect("the plan's own `sites:` reads back");
        assert_eq!(s.sites.map(|p| p.site_of), Some(plan(&t, &[], 1024, 2).site_of));
        let bad = good.replacen("site2: [", "site2: [ghost, ", 1);
        let e = load(&bad).expect_err("a node that does not exist");
        assert!(e.message.contains("sites: site `site2` names `ghost`"), "{e}");
        let line = bad.lines().position(|l| l.contains("ghost")).expect("the line") + text.lines().count() + 2;
        assert_eq!(e.line, line, "{e}");
    }
}
