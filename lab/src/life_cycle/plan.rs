//! A lab's plan: what this machine builds of a scenario, at its dilation, and the workload it
//! will carry. A run and a site's part plan from a whole scenario; a standing lab from a
//! scenario's lab keys alone, with no workload.

use std::path::PathBuf;

use intlab_transport::cc::ControllerConfig;

use crate::dilation::Dilation;
use crate::lab::{self, LabConfig, TransportSettings};
use crate::scenario::{LabScenario, RuntimeSettings, Scenario, ScenarioEvent};
use crate::topology::Topology;
use crate::workload::{Application, PlannedFlow};

/// What a lab is built from and what it then carries: the topology at its dilation, the lab's
/// configuration (its placement on workers and, over sites, on machines: `cfg.site`), the
/// planned flows, and what the workload's flows and events are run with.
#[derive(Debug, Clone)]
pub struct LabPlan {
    /// The topology, dilated.
    pub topology: Topology,
    /// How to build the lab; `cfg.site` names this machine's part of a lab over sites.
    pub cfg: LabConfig,
    /// The workload's flows (none for a standing lab).
    pub flows: Vec<PlannedFlow>,
    /// The base RTT a lab of the topology gives its controllers (ns).
    pub base_rtt: u64,
    /// The time dilation.
    pub dilation: Dilation,
    /// The flows' controller, dilated.
    pub controller: ControllerConfig,
    /// The workload's applications (Netscope tunes each flow's controller to its own).
    pub applications: Vec<Application>,
    /// The link changes the scenario plays while the workload runs.
    pub events: Vec<ScenarioEvent>,
}

/// The lab keys a run's scenario and a standing lab's share.
struct LabKeys<'a> {
    runtime: &'a RuntimeSettings,
    transport: TransportSettings,
    reconverge_ns: u64,
    controller: &'a ControllerConfig,
}

impl LabKeys<'_> {
    /// The configuration of a lab of these keys at dilation `d`, its namespaces tagged `tag`,
    /// captured into `capture`.
    fn config(&self, tag: &str, d: Dilation, capture: Option<PathBuf>) -> LabConfig {
        let mut cfg = LabConfig::new(tag);
        cfg.workers = self.runtime.workers;
        cfg.poll = self.runtime.poll;
        cfg.packet_io = self.runtime.packet_io;
        cfg.dilation = d;
        cfg.capture = capture;
        cfg.transport = self.transport;
        cfg.transport.cnp_interval_ns = d.lab_ns(self.transport.cnp_interval_ns);
        cfg.reconverge_ns = self.reconverge_ns;
        cfg.program_controller = self.controller.clone();
        cfg
    }
}

impl LabPlan {
    /// The lab of run scenario `s` at its dilation, its namespaces tagged `tag`, captured into
    /// `capture`: the whole of it (a site's part sets `cfg.site`).
    pub fn of_run(s: &Scenario, tag: &str, capture: Option<PathBuf>) -> LabPlan {
        let d = Dilation::new(s.dilation);
        let keys = LabKeys {
            runtime: &s.runtime,
            transport: s.transport,
            reconverge_ns: s.reconverge_ns,
            controller: &s.controller,
        };
        let topology = d.topology(&s.topology);
        let mut cfg = keys.config(tag, d, capture);
        cfg.seed = s.seed;
        let flows = s.flows();
        cfg.planned = flows.iter().map(|f| (f.src, f.dst, f.size)).collect();
        let base_rtt = lab::base_rtt_ns(&topology, &cfg);
        cfg.transport.sample_every_ns = base_rtt / 2;
        cfg.queue_trace_every_ns = base_rtt / 2;
        LabPlan {
            topology,
            cfg,
            flows,
            base_rtt,
            dilation: d,
            controller: d.controller(&s.controller),
            applications: s.workload.applications().to_vec(),
            events: s.events.clone(),
        }
    }

    /// A standing lab of `s` (`intlab up`), its namespaces tagged `tag`, captured into
    /// `capture`: at dilation 1, where its scenario's time is the lab's, with no workload.
    pub fn standing(s: &LabScenario, tag: &str, capture: Option<PathBuf>) -> LabPlan {
        let d = Dilation::new(1.0);
        let keys = LabKeys {
            runtime: &s.runtime,
            transport: s.transport,
            reconverge_ns: s.reconverge_ns,
            controller: &s.controller,
        };
        let cfg = keys.config(tag, d, capture);
        let base_rtt = lab::base_rtt_ns(&s.topology, &cfg);
        LabPlan {
            topology: s.topology.clone(),
            cfg,
            flows: Vec::new(),
            base_rtt,
            dilation: d,
            controller: s.controller.clone(),
            applications: Vec::new(),
            events: Vec::new(),
        }
    }
}
