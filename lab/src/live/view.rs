//! A running lab as a live view sees it: every switch port's counters and every host's sent
//! flows, asked for on demand from the threads that keep them.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use intlab_switch::{Fabric, SwitchSnapshot};
use intlab_transport::endpoint::EndpointWatcher;
use intlab_transport::flow::FlowNow;
use intlab_transport::program_qp::ProgramQp;
use intlab_transport::verbs::ObjectCounts;

use crate::lab_links::{LabLinks, LinkEvent};
use crate::topology::Topology;

/// How long a view waits for the lab's workers to answer: a worker that keeps up answers in
/// a wake-up (tens of us); one that does not is shown as it last published.
const ANSWER_LIMIT: Duration = Duration::from_millis(500);

/// A handle on a running lab for live views (cheap to clone, usable from any thread).
#[derive(Clone, Debug)]
pub struct LabView {
    name: String,
    dilation: f64,
    fabric: Fabric,
    hosts: Vec<EndpointWatcher>,
    host_of: HashMap<Ipv4Addr, String>,
    links: Arc<LabLinks>,
}

/// The lab at one moment.
#[derive(Debug, Clone)]
pub struct LabNow {
    /// The lab's name (its topology's).
    pub name: String,
    /// Its time dilation: the scenario's time is the lab's divided by it.
    pub dilation: f64,
    /// When it was looked at (lab clock, ns).
    pub time_ns: u64,
    /// Every switch's counters.
    pub switches: Vec<SwitchSnapshot>,
    /// Every sent flow, with its source and destination host's names.
    pub flows: Vec<(FlowNow, String, String)>,
    /// Every QP of the programs in the hosts, with its host's name and its peer's.
    pub qps: Vec<(ProgramQp, String, Option<String>)>,
    /// What the programs in each host hold on its NIC now (host, objects, QPs).
    pub nic_objects: Vec<(String, ObjectCounts, usize)>,
    /// Hosts that did not answer (stopped, or their worker is behind).
    pub silent_hosts: Vec<String>,
    /// The topology with each link as it is now (scenario units).
    pub topology: Topology,
    /// Links that are down, by index.
    pub down: BTreeSet<usize>,
    /// The changes made to the links so far (lab clock).
    pub events: Vec<LinkEvent>,
}

impl LabView {
    /// A view of `fabric`, its `links` and the hosts `hosts` (`host_of`: each host's address
    /// → name).
    pub fn new(
        name: &str,
        dilation: f64,
        fabric: Fabric,
        (hosts, host_of): (Vec<EndpointWatcher>, HashMap<Ipv4Addr, String>),
        links: Arc<LabLinks>,
    ) -> LabView {
        LabView {
            name: name.to_owned(),
            dilation,
            fabric,
            hosts,
            host_of,
            links,
        }
    }

    /// The topology drawn as `intlab graph --format svg` draws it, each link as it is now.
    pub fn topology_svg(&self) -> String {
        crate::topology::graph::svg(&self.links.scenario_topology())
    }

    /// The lab now: every host is asked at once, then each answer awaited.
    pub fn now(&self) -> LabNow {
        let started = Instant::now();
        let asked: Vec<_> = self.hosts.iter().map(|h| (h.name(), h.ask_now())).collect();
        let switches = self.fabric.counters_now(ANSWER_LIMIT).unwrap_or_else(|| {
            tracing::debug!("live view: switch workers did not answer; showing their last publication");
            (0..self.fabric.specs().len())
                .map(|s| self.fabric.counters(s))
                .collect()
        });
        let mut flows = Vec::new();
        let mut qps = Vec::new();
        let mut nic_objects = Vec::new();
        let mut silent_hosts = Vec::new();
        for (host, answer) in asked {
            let left = ANSWER_LIMIT.saturating_sub(started.elapsed());
            match answer.map(|rx| rx.recv_timeout(left)) {
                Ok(Ok(mine)) => {
                    flows.extend(
                        mine.flows
                            .into_iter()
                            .map(|f| (f, self.name_of(f.src), self.name_of(f.dst))),
                    );
                    nic_objects.push((host.to_owned(), mine.objects.0, mine.objects.1));
                    qps.extend(mine.qps.into_iter().map(|q| {
                        let peer = q.peer.map(|p| self.name_of(p));
                        (q, host.to_owned(), peer)
                    }));
                }
                _ => silent_hosts.push(host.to_owned()),
            }
        }
        flows.sort_by_key(|(f, _, _)| f.id);
        LabNow {
            name: self.name.clone(),
            dilation: self.dilation,
            time_ns: intlab_runtime::clock::Clock::get().now_ns(),
            switches,
            flows,
            qps,
            nic_objects,
            silent_hosts,
            topology: self.links.scenario_topology(),
            down: self.links.down(),
            events: self.links.events(),
        }
    }

    fn name_of(&self, ip: Ipv4Addr) -> String {
        self.host_of.get(&ip).cloned().unwrap_or_else(|| ip.to_string())
    }
}
