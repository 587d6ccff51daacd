//! A fabric: the switches of one lab (or one `intlab switch`) on a runtime's workers. Every port
//! gets a number across the fabric and an owning worker; each worker that owns ports runs one
//! [`Shard`] of them, whichever switches they belong to. Frames for a port of another worker,
//! and frames crossing an in-process link to one, go to that worker's shard in batches.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use intlab_runtime::Runtime;

use crate::capture::PortCapture;
use crate::config::{PortIo, SwitchSpec};
use crate::counters::{PortCounters, PortSnapshot, SwitchSnapshot};
use crate::counters_file::CountersWriter;
use crate::egress::EgressPort;
use crate::fabric_state::{FabricShared, HANDOFF_CAPACITY, SwitchShared};
pub use crate::fabric_state::{GlobalPort, Handoff};
use crate::frame::{FramePool, INT_TAILROOM};
use crate::link_change::LinkChange;
use crate::pipeline::{P4Pipeline, Pipeline};
use crate::port::{ControllerSocket, CpuPortEnd, Port};
use crate::shard::{PortSlot, Shard, ShardDirectory, ShardTask, SharedShard};
use crate::tm::{EgressQueue, Mmu, MmuSpec, mmu_port};

/// Why a fabric could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A port could not be opened.
    #[error("switch {switch}: port {port}: {cause}")]
    Port {
        /// Switch name.
        switch: String,
        /// Port name.
        port: String,
        /// What the system said.
        cause: std::io::Error,
    },
    /// A capture file could not be created.
    #[error("switch {switch}: capture {path}: {cause}")]
    Capture {
        /// Switch name.
        switch: String,
        /// File.
        path: PathBuf,
        /// What the system said.
        cause: std::io::Error,
    },
    /// The counters file cannot be written.
    #[error("switch {switch}: counters file {path}: {cause}")]
    Counters {
        /// Switch name.
        switch: String,
        /// File.
        path: PathBuf,
        /// What the system said.
        cause: std::io::Error,
    },
    /// An in-process link has one end only.
    #[error("switch {switch}: port {port}: its link's other end is on no port")]
    Unlinked {
        /// Switch name.
        switch: String,
        /// Port name.
        port: String,
    },
    /// A switch's P4 program could not be loaded.
    #[error("switch {switch}: P4 program: {cause}")]
    P4 {
        /// Switch name.
        switch: String,
        /// Why.
        cause: crate::pipeline::P4LoadError,
    },
    /// The runtime could not be started.
    #[error("starting the runtime: {cause}")]
    Runtime {
        /// What the system said.
        cause: std::io::Error,
    },
}

/// The shared buffer of switch `spec`, if it has one: its MMU spec, or the defaults when only
/// PFC is on.
pub fn shared_buffer(spec: &SwitchSpec) -> Option<Mmu> {
    let mmu = spec.mmu.or_else(|| spec.pfc.map(|_| MmuSpec::default()))?;
    let buffer = mmu
        .shared
        .unwrap_or_else(|| spec.ports.iter().map(|p| p.buffer.0).sum());
    let ports = spec
        .ports
        .iter()
        .map(|p| {
            mmu_port(
                p.rate.bps(),
                p.delay.0,
                u64::from(p.mtu) + MAX_ETHERNET_HEADER,
                spec.pfc.as_ref(),
            )
        })
        .collect();
    Some(Mmu::new(buffer, &mmu, spec.pfc, ports))
}

/// The egress queue of port `i` of switch `spec` (`has_mmu`: the switch has a shared buffer).
pub fn egress_queue(spec: &SwitchSpec, i: usize, has_mmu: bool) -> EgressQueue {
    let p = &spec.ports[i];
    // A shared buffer admits frames itself, and frees space as they start.
    let mut queue = EgressQueue::new(p.rate, p.delay, if has_mmu { u64::MAX } else { p.buffer.0 });
    if has_mmu {
        queue.wake_at_starts();
    }
    if let Some(w) = spec.pfc.and_then(|p| p.watchdog) {
        queue.watch_for_storms(w);
    }
    queue.schedule(spec.priorities.scheduler, crate::frame_capacity(spec) as u64);
    // Each link direction draws from its own stream, so that which frames it impairs depends
    // on the seed and the port alone, not on which worker runs it.
    let stream = (u64::from(spec.node_id) << 16 | i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    queue.impair(p.impair, spec.seed ^ stream);
    queue
}

/// The model of what port `i` of switch `spec` receives from a host: its link's rate, delay
/// and impairments, drawn from a stream of its own.
fn inbound_link(spec: &SwitchSpec, i: usize) -> crate::port::InboundLink {
    let p = &spec.ports[i];
    let mut link = crate::port::InboundLink::new(p.rate, p.delay);
    let stream = (u64::from(spec.node_id) << 16 | i as u64 | 1 << 15).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    link.impair(p.impair_inbound, spec.seed ^ stream);
    link
}

/// An Ethernet header with a VLAN tag.
const MAX_ETHERNET_HEADER: u64 = 18;

/// Why a link change was refused.
#[derive(Debug, thiserror::Error)]
pub enum LinkChangeError {
    /// No such switch or port.
    #[error("the fabric has no port {port} on switch {switch}")]
    NoPort {
        /// Switch index.
        switch: usize,
        /// Port index.
        port: usize,
    },
    /// A buffer for a port of a switch whose ports share one buffer.
    #[error("switch {switch}: its ports share one buffer (`mmu:`), so a port's buffer cannot be set")]
    SharedBuffer {
        /// Switch name.
        switch: String,
    },
}

/// Writes every switch's counters file, empty, before it starts (a reader finds it at once).
fn write_empty_counters(specs: &[SwitchSpec]) -> Result<(), StartError> {
    for spec in specs {
        if let Some(path) = &spec.counters_file {
            let empty = SwitchSnapshot {
                switch: spec.name.clone(),
                node_id: spec.node_id,
                ..SwitchSnapshot::default()
            };
            empty.write(path).map_err(|cause| StartError::Counters {
                switch: spec.name.clone(),
                path: path.clone(),
                cause,
            })?;
        }
    }
    Ok(())
}

/// The capture of port `i` of switch `spec`, when its capture takes that port.
fn port_capture(spec: &SwitchSpec, i: usize) -> Result<Option<PortCapture>, StartError> {
    let p = &spec.ports[i];
    match &spec.capture {
        Some(c) if c.ports.is_empty() || c.ports.contains(&i) => {
            let path = c.dir.join(format!("{}-{}.pcapng", spec.name, p.name));
            let desc = format!(
                "intlab switch {} port {} ({}, {} us, {} B buffer)",
                spec.name,
                p.name,
                p.rate,
                p.delay.0 / 1000,
                p.buffer.0
            );
            let capture =
                PortCapture::create(&path, &p.name, &desc, p.rate.bps()).map_err(|cause| StartError::Capture {
                    switch: spec.name.clone(),
                    path,
                    cause,
                })?;
            Ok(Some(capture))
        }
        _ => Ok(None),
    }
}

/// Each of `ports` ports' far end across its in-process link (global ports; switch s's first
/// is `base[s]`), from where each link end was opened (`ends`).
fn link_peers(
    specs: &[SwitchSpec],
    base: &[GlobalPort],
    ends: &HashMap<crate::port::LinkEnd, GlobalPort>,
    ports: usize,
) -> Result<Vec<Option<GlobalPort>>, StartError> {
    let mut peer = vec![None; ports];
    for (si, spec) in specs.iter().enumerate() {
        for (i, p) in spec.ports.iter().enumerate() {
            if let PortIo::Link(end) = &p.io {
                let far = ends.get(&end.peer()).copied().ok_or_else(|| StartError::Unlinked {
                    switch: spec.name.clone(),
                    port: p.name.clone(),
                })?;
                peer[base[si] + i] = Some(far);
            }
        }
    }
    Ok(peer)
}

/// What every shard reads of each switch of `specs`: its pipeline, its P4 program loaded, its
/// shared buffer (`mmus`, one per switch), its counters as last published (none yet).
fn switches_shared(specs: &[SwitchSpec], mmus: Vec<Option<Mmu>>) -> Result<Vec<SwitchShared>, StartError> {
    specs
        .iter()
        .zip(mmus)
        .map(|(spec, mmu)| {
            let p4 = match &spec.p4 {
                Some(p) => {
                    let err = |cause| StartError::P4 {
                        switch: spec.name.clone(),
                        cause,
                    };
                    let dp = crate::pipeline::load_datapath(p, &spec.name).map_err(err)?;
                    Some(P4Pipeline::new(dp, &spec.ports).map_err(err)?)
                }
                None => None,
            };
            Ok(SwitchShared {
                name: spec.name.clone(),
                node_id: spec.node_id,
                pipeline: Pipeline::new(spec),
                p4,
                mmu,
                pfc: spec.pfc.is_some(),
                published: Mutex::new(
                    spec.ports
                        .iter()
                        .map(|p| PortSnapshot {
                            name: p.name.clone(),
                            ..PortSnapshot::default()
                        })
                        .collect(),
                ),
            })
        })
        .collect()
}

/// The buffer size that holds any frame of `spec`'s ports plus INT growth.
pub fn frame_capacity(spec: &SwitchSpec) -> usize {
    let mtu = spec.ports.iter().map(|p| usize::from(p.mtu)).max().unwrap_or(1500);
    (mtu + 14 + 4 + INT_TAILROOM).next_multiple_of(64)
}

/// Switches running on a runtime (a handle: clones share them).
#[derive(Clone)]
pub struct Fabric {
    shared: Arc<FabricShared>,
    specs: Vec<SwitchSpec>,
    /// Rewrites the counters files while any handle lives, and a last time after.
    _writer: Option<Arc<CountersWriter>>,
    /// The controller's end of each CPU port.
    cpu_ports: Vec<CpuPortEnd>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fabric({} switches)", self.specs.len())
    }
}

impl Fabric {
    /// Opens every port of `specs` (counters files and captures first, so a bad one stops the
    /// start before anything runs), places port `p` of switch `s` on worker `place(s, p)` and
    /// starts one shard per worker that owns ports. In-process links join the ports that hold
    /// their two ends.
    pub fn start(
        rt: &Runtime,
        mut specs: Vec<SwitchSpec>,
        pool: FramePool,
        place: &dyn Fn(usize, usize) -> usize,
    ) -> Result<Fabric, StartError> {
        let workers = rt.workers();
        // A CPU port is added after the ports given, and placed with the switch's first port.
        let given: Vec<usize> = specs.iter().map(|s| s.ports.len()).collect();
        let place = |s: usize, p: usize| if p < given[s] { place(s, p) } else { place(s, 0) };
        for spec in &mut specs {
            if let Some(cpu) = spec
                .p4
                .as_ref()
                .and_then(|p4| crate::pipeline::cpu_port_spec(p4, &spec.ports))
            {
                spec.ports.push(cpu);
            }
        }
        let mut cpu_ports = Vec::new();
        write_empty_counters(&specs)?;
        // Built once: whether a switch has one also decides its ports' own buffers.
        let mmus: Vec<Option<Mmu>> = specs.iter().map(shared_buffer).collect();
        let mut base = Vec::new();
        let mut owner = Vec::new();
        let mut slots: Vec<Vec<PortSlot>> = (0..workers).map(|_| Vec::new()).collect();
        let mut ends: HashMap<crate::port::LinkEnd, GlobalPort> = HashMap::new();
        for (si, spec) in specs.iter().enumerate() {
            base.push(owner.len());
            let has_mmu = mmus[si].is_some();
            for (i, p) in spec.ports.iter().enumerate() {
                let global = owner.len();
                let w = place(si, i) % workers;
                owner.push(w);
                if let PortIo::Link(end) = &p.io {
                    ends.insert(end.clone(), global);
                }
                let port_error = |cause| StartError::Port {
                    switch: spec.name.clone(),
                    port: p.name.clone(),
                    cause,
                };
                let port = match &p.io {
                    PortIo::Controller => {
                        let (port, controller) = ControllerSocket::pair().map_err(port_error)?;
                        cpu_ports.push(CpuPortEnd {
                            switch: spec.name.clone(),
                            socket: Arc::new(controller),
                            max_frame: frame_capacity(spec),
                        });
                        Port::Controller(port)
                    }
                    io => Port::open(io, spec.packet_io, frame_capacity(spec)).map_err(port_error)?,
                };
                let capture = port_capture(spec, i)?;
                let mut queue = egress_queue(spec, i, has_mmu);
                if matches!(p.io, PortIo::Tunnel { .. }) {
                    queue.release_when_serialized();
                }
                slots[w].push(PortSlot {
                    global,
                    switch: si,
                    index: i,
                    name: p.name.clone(),
                    port,
                    queue,
                    egress: EgressPort::new(i, spec.node_id, p, spec.priorities.map),
                    counters: PortCounters::with_queue_trace(spec.queue_trace_every.0),
                    capture,
                    inbound: inbound_link(spec, i),
                    link_up: true,
                });
            }
        }
        let peer = link_peers(&specs, &base, &ends, owner.len())?;
        let places: Vec<_> = (0..workers).map(|w| rt.reserve(w)).collect();
        let mut receivers = Vec::new();
        let mut inboxes = Vec::new();
        for place in &places {
            let (tx, rx) = crossbeam_channel::bounded(HANDOFF_CAPACITY);
            inboxes.push((tx, place.waker()));
            receivers.push(rx);
        }
        let shared = Arc::new(FabricShared {
            switches: switches_shared(&specs, mmus)?,
            base,
            owner,
            peer,
            pool,
            inboxes,
            capture_drops: specs.iter().any(|s| s.capture.as_ref().is_some_and(|c| c.drops)),
            publish_request: AtomicU64::new(0),
            publish_acks: AtomicU64::new(0),
            measure_from: AtomicU64::new(0),
            failed_workers: AtomicUsize::new(0),
            borrowed_runs: AtomicU64::new(0),
            link_changes: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
            link_changes_posted: AtomicU64::new(0),
            shards: slots.iter().filter(|s| !s.is_empty()).count(),
        });
        let directory = Arc::new(ShardDirectory::new(workers));
        let seed = specs.first().map_or(0, |s| s.seed);
        for ((place, rx), mine) in places.into_iter().zip(receivers).zip(slots) {
            if mine.is_empty() {
                continue;
            }
            let w = place.worker();
            let shard = SharedShard::new(Shard::new(w, shared.clone(), directory.clone(), mine, rx, seed));
            directory.register(w, &shard);
            rt.install(place, Box::new(ShardTask(shard)));
        }
        let files: Vec<(usize, PathBuf)> = specs
            .iter()
            .enumerate()
            .filter_map(|(s, spec)| Some((s, spec.counters_file.clone()?)))
            .collect();
        let writer = CountersWriter::start(shared.clone(), files).map_err(|cause| StartError::Runtime { cause })?;
        for spec in &specs {
            tracing::info!(switch = %spec.name, ports = spec.ports.len(), "switch started");
        }
        Ok(Fabric {
            shared,
            specs,
            _writer: writer.map(Arc::new),
            cpu_ports,
        })
    }

    /// The switches' configurations, in order.
    pub fn specs(&self) -> &[SwitchSpec] {
        &self.specs
    }

    /// The datapaths of the switches that run a P4 program, by switch name, for the control
    /// plane (`intlab p4 cli`): their tables can be edited while frames flow.
    pub fn p4_datapaths(&self) -> Vec<(String, Arc<intlab_p4::Datapath>)> {
        let switches = self.shared.switches.iter();
        switches
            .filter_map(|s| Some((s.name.clone(), Arc::clone(s.p4.as_ref()?.datapath()))))
            .collect()
    }

    /// The controller's end of each P4 switch's CPU port: what the program sends to its CPU
    /// port is read there, what is written there arrives on the CPU port.
    pub fn cpu_ports(&self) -> Vec<CpuPortEnd> {
        self.cpu_ports.clone()
    }

    /// Release lateness counts only frames due from lab time `t_ns` on (a run's start).
    pub fn measure_from(&self, t_ns: u64) {
        self.shared.measure_from.store(t_ns, Ordering::Relaxed);
    }

    /// Switch `s`'s counters as its shards last published them (at most about a second old;
    /// final once the runtime has stopped).
    pub fn counters(&self, s: usize) -> SwitchSnapshot {
        self.shared.snapshot(s)
    }

    /// Records how many of the runtime's workers panicked (their ports' counters stop where
    /// they were last published); the snapshots say so from then on.
    pub fn note_failed_workers(&self, n: usize) {
        self.shared.failed_workers.store(n, Ordering::Relaxed);
    }

    /// Changes the link of port `port` of switch `switch` as `change` says, at lab time `at_ns`
    /// (now, if that has passed): the worker that owns the port makes it on its schedule, as
    /// of that time; an ECMP group of the switch skips the port for frames that arrive from the
    /// moment it is down. Each end of a link is a port of its own: a link between two switches
    /// is changed by changing both.
    pub fn change_link(
        &self,
        switch: usize,
        port: usize,
        change: LinkChange,
        at_ns: u64,
    ) -> Result<(), LinkChangeError> {
        let sw = self.shared.switches.get(switch);
        let Some(sw) = sw.filter(|_| port < self.shared.switch_ports(switch)) else {
            return Err(LinkChangeError::NoPort { switch, port });
        };
        if change.buffer.is_some() && sw.mmu.is_some() {
            return Err(LinkChangeError::SharedBuffer {
                switch: sw.name.clone(),
            });
        }
        if let Some(up) = change.up {
            sw.pipeline.set_port_up_at(port, up, at_ns);
        }
        let global = self.shared.base[switch] + port;
        let owner = self.shared.owner[global];
        self.shared.link_changes[owner]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((global, at_ns, change));
        self.shared.link_changes_posted.fetch_add(1, Ordering::AcqRel);
        self.shared.inboxes[owner].1.wake();
        Ok(())
    }

    /// Switch `switch` (built-in pipeline) routes the frames that arrive from lab time
    /// `at_ns` on by `routes`.
    pub fn set_routes_at(&self, switch: usize, routes: &[crate::config::Route], at_ns: u64) {
        if let Some(sw) = self.shared.switches.get(switch) {
            sw.pipeline.set_routes_at(routes, at_ns);
        }
    }

    /// Every switch's counters as they are now: every shard publishes on request. None when a
    /// shard did not answer within `limit`.
    pub fn counters_now(&self, limit: Duration) -> Option<Vec<SwitchSnapshot>> {
        let before = self.shared.publish_acks.load(Ordering::Acquire);
        self.shared.publish_request.fetch_add(1, Ordering::AcqRel);
        for (_, waker) in &self.shared.inboxes {
            waker.wake();
        }
        let started = std::time::Instant::now();
        while self.shared.publish_acks.load(Ordering::Acquire) < before + self.shared.shards as u64 {
            if started.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Some((0..self.specs.len()).map(|s| self.counters(s)).collect())
    }
}
