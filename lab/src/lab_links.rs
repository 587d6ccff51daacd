//! The links of a running lab as a user names and changes them (`intlab link`, a scenario's
//! `events:`): `h1-s1` in either order, set, taken down and brought up on the switches'
//! ports, and the fabric's routes recomputed a `reconverge` delay after a link goes down or
//! comes up. What each link is now, and every change made, are kept for `intlab link show` and
//! the results.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use intlab_runtime::clock::Clock;
use intlab_switch::config::{NextHop, Route};
use intlab_switch::{Fabric, LinkChange};

use crate::dilation::Dilation;
use crate::topology::{LinkKeys, LinkProps, Routes, Topology, routes_without};

/// How long after a link goes down or comes up the fabric's routes follow, in the
/// scenario's time: RFC 7938 (section 7) finds sub-second convergence achievable in a BGP
/// fabric whose switches drop a peering when its link goes down; 100 ms is within it. An ECMP
/// group drops a dead member at once, without waiting for this.
pub const DEFAULT_RECONVERGE_NS: u64 = 100_000_000;

/// Why a link could not be found or changed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// No link (or switch) of that name, or one that is not one link.
    #[error("{0}")]
    Unknown(String),
    /// A key or value that does not fit.
    #[error("link {link}: {message}")]
    Keys {
        /// The link.
        link: String,
        /// What is wrong.
        message: String,
    },
    /// The switch refused it.
    #[error("link {link}: {cause}")]
    Switch {
        /// The link.
        link: String,
        /// Why.
        cause: intlab_switch::LinkChangeError,
    },
}

/// A change made to the lab's links, when it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkEvent {
    /// When (lab clock, ns).
    pub at_ns: u64,
    /// What: `down leaf1-spine1`, `set h1-s1 delay=50us`, `routes recomputed (1 link down)`.
    pub what: String,
}

/// What changes as the lab runs.
#[derive(Debug)]
struct State {
    /// Each link's properties now, in the scenario's units.
    props: Vec<LinkProps>,
    /// Links that are down.
    down: BTreeSet<usize>,
    log: Vec<LinkEvent>,
}

/// The links of a running lab.
#[derive(Debug)]
pub struct LabLinks {
    fabric: Fabric,
    topology: Topology,
    /// Per link, per end: the (switch index in the fabric, port index) of a switch's end.
    ports: Vec<[Option<(usize, usize)>; 2]>,
    /// Node → its index in the fabric, for switches running the built-in pipeline.
    built_in: HashMap<usize, usize>,
    dilation: Dilation,
    reconverge_ns: u64,
    state: Mutex<State>,
}

impl LabLinks {
    /// The links of `topology` (as the lab runs it, dilated by `dilation`) on `fabric` (which
    /// holds its switches, or a site's share of them), whose ports are `ports`; routes follow
    /// `reconverge_ns` (scenario time) after a link goes down or up.
    pub fn new(
        fabric: Fabric,
        topology: &Topology,
        ports: Vec<[Option<(usize, usize)>; 2]>,
        dilation: Dilation,
        reconverge_ns: u64,
    ) -> LabLinks {
        // A lab spread over sites runs some of the switches here: found by name.
        let built_in = topology
            .switches()
            .filter(|&s| topology.nodes[s].p4.is_none())
            .filter_map(|s| {
                let k = fabric
                    .specs()
                    .iter()
                    .position(|spec| spec.name == topology.nodes[s].name)?;
                Some((s, k))
            })
            .collect();
        let props = topology
            .links
            .iter()
            .map(|l| {
                let mut p = l.props;
                p.rate = intlab_switch::units::Rate(dilation.scenario_bps(p.rate.bps()));
                p.delay = intlab_switch::units::Nanos(dilation.scenario_ns(p.delay.0));
                p.impair.jitter_ns = dilation.scenario_ns(p.impair.jitter_ns);
                p
            })
            .collect();
        LabLinks {
            fabric,
            topology: topology.clone(),
            ports,
            built_in,
            dilation,
            reconverge_ns,
            state: Mutex::new(State {
                props,
                down: BTreeSet::new(),
                log: Vec::new(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The name of link `li`: its two ends' nodes.
    pub fn name(&self, li: usize) -> String {
        self.topology.link_name(li)
    }

    /// The links `name` means (see [`Topology::links_named`]).
    fn resolve(&self, name: &str, switches: bool) -> Result<Vec<usize>, LinkError> {
        self.topology.links_named(name, switches).map_err(LinkError::Unknown)
    }

    /// Changes every switch end of link `li` as `change` (scenario units) says, at lab time
    /// `at_ns`; `props` are the link's new properties, whose impairments each end applies to
    /// what it sends, and a host's link also to what its host sends.
    fn change(&self, li: usize, change: LinkChange, props: &LinkProps, at_ns: u64) -> Result<(), LinkError> {
        let ends = &self.topology.links[li].ends;
        for (e, &(switch, port)) in self.ports[li]
            .iter()
            .enumerate()
            .filter_map(|(e, p)| Some((e, p.as_ref()?)))
        {
            let (me, far) = (ends[e].node, ends[1 - e].node);
            let mut mine = change;
            if change.impair.is_some() {
                mine.impair = Some(props.impair_towards(far));
                mine.impair_inbound = Some(match self.topology.nodes[far].kind {
                    crate::topology::NodeKind::Host => props.impair_towards(me),
                    crate::topology::NodeKind::Switch => intlab_switch::impair::ImpairmentSpec::default(),
                });
            }
            self.fabric
                .change_link(switch, port, self.dilation.link_change(mine), at_ns)
                .map_err(|cause| LinkError::Switch {
                    link: self.name(li),
                    cause,
                })?;
        }
        Ok(())
    }

    /// Sets `keys` on link `link` at lab time `at_ns` (now when `None`); returns what it did.
    pub fn set(&self, link: &str, keys: &LinkKeys, at_ns: Option<u64>) -> Result<String, LinkError> {
        let at_ns = at_ns.unwrap_or_else(|| Clock::get().now_ns());
        let li = self.resolve(link, false)?[0];
        let mut state = self.state();
        let (props, change) = keys
            .apply(&state.props[li], self.topology.link_ends(li))
            .map_err(|message| LinkError::Keys {
                link: self.name(li),
                message,
            })?;
        self.change(li, change, &props, at_ns)?;
        let what = format!("set {}: {}", self.name(li), crate::topology::graph::props_label(&props));
        state.props[li] = props;
        state.log.push(LinkEvent {
            at_ns,
            what: what.clone(),
        });
        Ok(what)
    }

    /// Takes `target` (a link, or every link of a switch) down or brings it up at lab time
    /// `at_ns` (now when `None`); the routes follow the reconverge delay later. Returns what it
    /// did.
    pub fn set_up(&self, target: &str, up: bool, at_ns: Option<u64>) -> Result<String, LinkError> {
        let at_ns = at_ns.unwrap_or_else(|| Clock::get().now_ns());
        let links = self.resolve(target, true)?;
        let mut state = self.state();
        let change = if up { LinkChange::up() } else { LinkChange::down() };
        for &li in &links {
            let props = state.props[li];
            self.change(li, change, &props, at_ns)?;
            if up {
                state.down.remove(&li);
            } else {
                state.down.insert(li);
            }
        }
        let what = format!("{} {target}", if up { "up" } else { "down" });
        state.log.push(LinkEvent {
            at_ns,
            what: what.clone(),
        });
        // The fabric converges to the links up once the delay has passed, on the switches'
        // own schedule: exact whatever this thread does meanwhile.
        let converged = at_ns + self.dilation.lab_ns(self.reconverge_ns);
        let routes = routes_without(&self.topology, &state.down);
        for (&s, &k) in &self.built_in {
            self.fabric.set_routes_at(k, &self.switch_routes(&routes, s), converged);
        }
        let what_routes = format!("routes recomputed ({} link(s) down)", state.down.len());
        state.log.push(LinkEvent {
            at_ns: converged,
            what: what_routes,
        });
        Ok(what)
    }

    /// Switch node `s`'s routing table from `routes`.
    fn switch_routes(&self, routes: &Routes, s: usize) -> Vec<Route> {
        let port_of = |li: usize| {
            self.ports[li]
                .iter()
                .flatten()
                .zip(&self.topology.links[li].ends)
                .find(|(_, e)| e.node == s)
                .map(|(&(_, p), _)| p)
        };
        switch_routes(&self.topology, routes, s, port_of)
    }

    /// Every link: name, state and properties (scenario units), one per line.
    pub fn show(&self) -> String {
        let state = self.state();
        let mut out = String::new();
        for (li, p) in state.props.iter().enumerate() {
            let up = if state.down.contains(&li) { "down" } else { "up" };
            let ecn = p
                .ecn
                .map(|e| format!(", ECN {}-{} B", e.kmin, e.kmax))
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<24} {up:<4} {}, buffer {} B{ecn}\n",
                self.name(li),
                crate::topology::graph::props_label(p),
                p.buffer.0
            ));
        }
        out
    }

    /// The topology with each link as it is now, in the scenario's units.
    pub fn scenario_topology(&self) -> Topology {
        let state = self.state();
        let mut t = self.topology.clone();
        for (l, p) in t.links.iter_mut().zip(&state.props) {
            l.props = *p;
        }
        t
    }

    /// The links that are down now (or scheduled to go down), by index.
    pub fn down(&self) -> BTreeSet<usize> {
        self.state().down.clone()
    }

    /// Every change made or scheduled so far, in time order.
    pub fn events(&self) -> Vec<LinkEvent> {
        let mut log = self.state().log.clone();
        log.sort_by_key(|e| e.at_ns);
        log
    }
}

/// Switch node `s`'s routing table from `routes`: a /32 per host it reaches, through the port
/// (`port_of` a link) or the ECMP group of ports that lead there.
pub fn switch_routes(t: &Topology, routes: &Routes, s: usize, port_of: impl Fn(usize) -> Option<usize>) -> Vec<Route> {
    t.hosts()
        .filter_map(|h| {
            let next: Vec<usize> = routes.next[s][h].iter().filter_map(|&li| port_of(li)).collect();
            let prefix = t.nodes[h].address?;
            let next = match next.len() {
                0 => return None,
                1 => NextHop::Port(next[0]),
                _ => NextHop::Ecmp(next),
            };
            Some(Route { prefix, len: 32, next })
        })
        .collect()
}
