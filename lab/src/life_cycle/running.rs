//! A lab built from its plan, through the rest of its life: its flows' paths probed, its
//! workload started (receivers ready, flows sent, the scenario's link changes played), watched
//! through its flow events, and stopped into a report. A run drives all of it on one machine;
//! a site drives its part as its coordinator says; a standing lab only builds and stops.

use std::time::Duration;

use intlab_transport::flow::{FlowPath, FlowSpec, Stuck};

use super::plan::LabPlan;
use crate::base_rtt;
use crate::datapath::{self, DataPathError, ProbeTarget, Reach};
use crate::event_player::EventPlayer;
use crate::lab::{Lab, LabError, LabReport};
use crate::workload::PlannedFlow;

/// How long the data path check waits for every flow's probes at least (real time).
const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// Why a started lab could not go on.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A host's transport refused a flow or stopped working.
    #[error("host {host}: {error}")]
    Host {
        /// Host name.
        host: String,
        /// What the host said.
        error: std::io::Error,
    },
    /// The thread that plays the scenario's `events:` did not start.
    #[error("starting the thread of the scenario's events: {0}")]
    Events(std::io::Error),
    /// A flow asked for that this machine does not send.
    #[error("{0}")]
    NotHere(String),
}

/// A built lab and the plan it carries out.
#[derive(Debug)]
pub struct RunningLab {
    lab: Lab,
    plan: LabPlan,
    /// Each planned flow's UDP source port (its ECMP hash).
    src_ports: Vec<u16>,
    /// Plays the scenario's link changes once started.
    player: Option<EventPlayer>,
}

/// What a stopped lab leaves: its plan, its report and the changes made to its links.
#[derive(Debug)]
pub struct StoppedLab {
    /// What it was built from and carried.
    pub plan: LabPlan,
    /// What the lab reported as it stopped.
    pub report: LabReport,
    /// Changes made to the network while it ran: (lab ns, what).
    pub network_events: Vec<(u64, String)>,
}

impl RunningLab {
    /// Builds what `plan` says this machine builds.
    pub fn build(plan: LabPlan) -> Result<RunningLab, LabError> {
        let lab = Lab::build(&plan.topology, &plan.cfg)?;
        Ok(RunningLab {
            lab,
            src_ports: crate::workload::source_ports(&plan.flows),
            plan,
            player: None,
        })
    }

    /// The lab itself (to watch, serve and change).
    pub fn lab(&self) -> &Lab {
        &self.lab
    }

    /// Its plan.
    pub fn plan(&self) -> &LabPlan {
        &self.plan
    }

    /// Probes flows `flows` (plan indices, their sources here) until each is answered: what
    /// each reached, in `flows`' order.
    pub fn probe(&self, flows: &[usize]) -> Result<Vec<Reach>, DataPathError> {
        let targets: Vec<ProbeTarget> = flows
            .iter()
            .map(|&k| {
                let f = &self.plan.flows[k];
                ProbeTarget {
                    flow: f.id,
                    src: f.src,
                    dst: f.dst,
                    src_port: self.src_ports[k],
                }
            })
            .collect();
        let limit = PROBE_LIMIT.max(Duration::from_nanos(20 * self.plan.base_rtt));
        datapath::check(&self.lab, &targets, limit)
    }

    /// Starts the workload at lab time `t0_ns`: the lab measures from then on, every receiver
    /// here expects its flows (so that a flow released late finds its QP), `sends` (plan index,
    /// start in lab ns, path) are sent and the scenario's link changes play.
    pub fn start(&mut self, t0_ns: u64, sends: &[(usize, u64, FlowPath)]) -> Result<(), StartError> {
        self.lab
            .measure_from(t0_ns)
            .map_err(|(n, error)| self.host_failed(n, error))?;
        for (k, f) in self.plan.flows.iter().enumerate() {
            if self.lab.host_namespace(f.dst).is_some() {
                self.lab
                    .endpoint(f.dst)
                    .expect(self.spec(k, 0))
                    .map_err(|e| self.host_failed(f.dst, e))?;
            }
        }
        for &(k, start_ns, path) in sends {
            self.send(k, start_ns, path)?;
        }
        let player = EventPlayer::start(
            self.lab.links().clone(),
            self.plan.events.clone(),
            t0_ns,
            self.plan.dilation,
        )
        .map_err(StartError::Events)?;
        self.player = Some(player);
        Ok(())
    }

    /// Sends flow `k` of the plan (its source here) from lab time `start_ns` over `path`.
    pub fn send(&self, k: usize, start_ns: u64, path: FlowPath) -> Result<(), StartError> {
        let f = self.local_flow(k)?;
        let step = f
            .step
            .and_then(|st| self.plan.applications[usize::from(st.app)].delay_sensitivity);
        let cc = self.plan.controller.for_application(step);
        self.lab
            .endpoint(f.src)
            .send(self.spec(k, start_ns), cc, path)
            .map_err(|e| self.host_failed(f.src, e))
    }

    /// Flow `k` of the plan, when it is one and its source is built here.
    pub fn local_flow(&self, k: usize) -> Result<&PlannedFlow, StartError> {
        let flows = &self.plan.flows;
        let f = flows
            .get(k)
            .ok_or_else(|| StartError::NotHere(format!("no flow {k}: the plan has {}", flows.len())))?;
        if self.lab.host_namespace(f.src).is_none() {
            return Err(StartError::NotHere(format!(
                "flow {k}'s source {} is not on this site",
                self.plan.topology.nodes[f.src].name
            )));
        }
        Ok(f)
    }

    /// Flow `k` of the plan as its hosts are told it, starting at lab time `start_ns`.
    fn spec(&self, k: usize, start_ns: u64) -> FlowSpec {
        let f = &self.plan.flows[k];
        let nodes = &self.plan.topology.nodes;
        FlowSpec {
            id: f.id,
            src: nodes[f.src].address.expect("hosts have addresses"),
            dst: nodes[f.dst].address.expect("hosts have addresses"),
            size: f.size,
            start_ns,
            kind: f.kind,
            src_port: self.src_ports[k],
        }
    }

    /// Host node `n` failed with `error`.
    fn host_failed(&self, n: usize, error: std::io::Error) -> StartError {
        StartError::Host {
            host: self.plan.topology.nodes[n].name.clone(),
            error,
        }
    }

    /// Why the workload stopped at flow `x`: where it was, and what every switch port here
    /// dropped so far.
    pub fn no_progress_report(&self, x: &Stuck) -> String {
        let name = |n: usize| self.plan.topology.nodes[n].name.as_str();
        let (src, dst) = match self.plan.flows.iter().find(|f| f.id == x.id) {
            Some(f) => (name(f.src), name(f.dst)),
            None => ("?", "?"),
        };
        let mut out = format!(
            "flow {} ({src} -> {dst}) made no progress through {} retransmission timeouts in a row: {} of {} packets acknowledged",
            x.id,
            intlab_transport::flow::STUCK_AFTER_TIMEOUTS,
            x.packets_acked,
            x.packets
        );
        if x.packets_acked > 0 {
            out.push_str(&format!(
                " (last PSN acknowledged {})",
                (x.packets_acked - 1) & 0xff_ffff
            ));
        }
        let drops: Vec<String> = self
            .lab
            .switch_counters()
            .iter()
            .flat_map(|sw| {
                sw.ports.iter().flat_map(move |p| {
                    p.drops
                        .iter()
                        .map(move |(why, n)| format!("switch {} port {} dropped {n} ({why})", sw.switch, p.name))
                })
            })
            .collect();
        if drops.is_empty() {
            out.push_str("; no switch dropped anything");
        } else {
            out.push_str("; ");
            out.push_str(&drops.join(", "));
        }
        out
    }

    /// Stops the scenario's link changes, then the lab: its report and the changes it made.
    pub fn stop(mut self) -> StoppedLab {
        drop(self.player.take());
        let network_events = self
            .lab
            .links()
            .events()
            .into_iter()
            .map(|e| (e.at_ns, e.what))
            .collect();
        StoppedLab {
            report: self.lab.stop(),
            plan: self.plan,
            network_events,
        }
    }
}

/// What each planned flow's controller is told of its path, from what its probes found
/// (`reach`), and each flow's host overhead (ns): a host probing many flows at once queues its
/// own probes behind each other, so a flow's probe RTT overstates what the hosts add; the least
/// any flow between the same two hosts measured is the hosts' overhead.
pub fn flow_paths(plan: &LabPlan, reach: &[Reach]) -> (Vec<FlowPath>, Vec<u64>) {
    let topology = &plan.topology;
    let transport = &plan.cfg.transport;
    let hop_bytes = base_rtt::int_hop_bytes(transport.int_mode, &plan.controller);
    let mut least: std::collections::HashMap<(usize, usize), u64> = std::collections::HashMap::new();
    for (f, r) in plan.flows.iter().zip(reach) {
        let o = base_rtt::host_overhead_ns(topology, &r.links, r.rtt_min_ns);
        least
            .entry((f.src, f.dst))
            .and_modify(|m| *m = (*m).min(o))
            .or_insert(o);
    }
    let overheads: Vec<u64> = plan.flows.iter().map(|f| least[&(f.src, f.dst)]).collect();
    let mut paths: Vec<FlowPath> = reach
        .iter()
        .zip(&overheads)
        .map(|(r, &overhead)| FlowPath {
            base_rtt_ns: base_rtt::data_rtt_ns(topology, &r.links, transport.mtu, hop_bytes) + overhead,
            fabric_rtt_ns: 0,
            hops: r.links.len().saturating_sub(1) as u32,
        })
        .collect();
    let fabric_rtt_ns = paths.iter().map(|p| p.base_rtt_ns).max().unwrap_or(0);
    for p in &mut paths {
        p.fabric_rtt_ns = fabric_rtt_ns;
    }
    (paths, overheads)
}
