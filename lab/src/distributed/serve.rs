//! `intlab site serve`: a machine's share of labs spread over several. It waits for a
//! coordinator (`intlab run --sites`), builds the part of the lab the coordinator names, runs
//! it on the coordinator's lab clock and reports back; everything it built is torn down when
//! the run ends, when the coordinator goes away and when the server is stopped. One coordinator
//! at a time.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use intlab_runtime::clock::Clock;
use intlab_transport::cc::ControllerConfig;
use intlab_transport::flow::{FlowEvent, FlowPath};

use crate::datapath::{self, ProbeTarget};
use crate::dilation::Dilation;
use crate::event_player::EventPlayer;
use crate::lab::Lab;
use crate::run::{LabPlan, flow_spec, no_progress_report};
use crate::scenario::{Overrides, Scenario};
use crate::sites::protocol::{self, BuildOrder, FromSite, SiteReport, ToSite, Underlay, VERSION};
use crate::sites::{CAPTURE_FOLDER, SitePart, TUNNEL_OVERHEAD, TunnelSpec, underlay_mtu};
use crate::topology::Topology;
use crate::workload::PlannedFlow;

/// How long a data path check waits at least (real time), as a run on one machine does.
const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// How often the site looks at its flows and the stop flag while it runs.
const POLL: Duration = Duration::from_millis(20);

/// Why a site server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be listened on.
    #[error("listening on {address}: {cause}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// What the system said.
        cause: std::io::Error,
    },
}

/// Serves coordinators on `address` until `stop` is raised; says what it does on `log`.
pub fn serve(address: SocketAddr, stop: &AtomicBool, log: &mut dyn FnMut(&str)) -> Result<(), ServeError> {
    let listener = TcpListener::bind(address).map_err(|cause| ServeError::Listen { address, cause })?;
    listener
        .set_nonblocking(true)
        .map_err(|cause| ServeError::Listen { address, cause })?;
    log(&format!("intlab site: waiting for a coordinator on {address}"));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                log(&format!("coordinator {peer} connected"));
                match Session::run(stream, stop) {
                    Ok(()) => log(&format!("coordinator {peer}: done, everything torn down")),
                    Err(e) => log(&format!("coordinator {peer}: {e} (everything torn down)")),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => log(&format!("accepting a connection: {e}")),
        }
    }
    Ok(())
}

/// The connection's writing half, shared with the thread that answers clock exchanges.
type Writer = Arc<Mutex<TcpStream>>;

fn say(w: &Writer, m: &FromSite) -> std::io::Result<()> {
    let mut s = w.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    protocol::send(&mut *s, m)
}

/// What a site runs of one lab.
struct Built {
    lab: Lab,
    scenario: Scenario,
    topology: Topology,
    plan: Vec<PlannedFlow>,
    src_ports: Vec<u16>,
    controller: ControllerConfig,
    base_rtt: u64,
    /// Where its switches write their captures until they are sent (removed then).
    capture: Option<PathBuf>,
    player: Option<EventPlayer>,
    finished: usize,
}

/// One coordinator's connection.
struct Session {
    writer: Writer,
    messages: Receiver<ToSite>,
    built: Option<Built>,
}

impl Session {
    /// Serves the coordinator on `stream` until it stops the run or goes away.
    fn run(stream: TcpStream, stop: &AtomicBool) -> std::io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        let writer: Writer = Arc::new(Mutex::new(stream.try_clone()?));
        let (tx, messages) = crossbeam_channel::unbounded();
        let answer = writer.clone();
        let mut reader = stream;
        // Clock exchanges are answered on the reading thread, at once, whatever the session
        // is busy with: a late answer would read as a long way back.
        std::thread::Builder::new().name("site-reader".into()).spawn(move || {
            loop {
                let m = match protocol::receive::<ToSite>(&mut reader) {
                    Ok(Some(protocol::Frame::Message(m))) => m,
                    Ok(None) => return,
                    Ok(Some(protocol::Frame::Bytes(_))) | Err(_) => return,
                };
                if let ToSite::Clock { sent_ns } = m {
                    let received_ns = Clock::get().unshifted_ns();
                    let reply = FromSite::Clock {
                        sent_ns,
                        received_ns,
                        answered_ns: Clock::get().unshifted_ns(),
                    };
                    if say(&answer, &reply).is_err() {
                        return;
                    }
                    continue;
                }
                if tx.send(m).is_err() {
                    return;
                }
            }
        })?;
        let mut s = Session {
            writer,
            messages,
            built: None,
        };
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(std::io::Error::other("stopped by a signal"));
            }
            match s.messages.recv_timeout(POLL) {
                Ok(ToSite::Stop) => return s.finish(),
                Ok(m) => {
                    if let Err(e) = s.handle(m) {
                        say(&s.writer, &FromSite::Failed(e.clone()))?;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(std::io::Error::other("the coordinator went away"));
                }
            }
            s.forward_flow_events()?;
        }
    }

    /// Does what `m` asks; an error is what to tell the coordinator.
    fn handle(&mut self, m: ToSite) -> Result<(), String> {
        match m {
            ToSite::Hello { version } => {
                if version != VERSION {
                    return Err(format!(
                        "this site speaks version {VERSION} of the protocol, the coordinator {version}: run the same intlab on every machine"
                    ));
                }
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                self.reply(FromSite::Hello {
                    version: VERSION,
                    host: host.trim().to_owned(),
                })
            }
            ToSite::Align { shift_ns } => {
                if self.built.is_some() {
                    return Err("the lab clock cannot move under a lab".into());
                }
                Clock::get().align(shift_ns);
                Ok(())
            }
            ToSite::Build(order) => {
                if self.built.is_some() {
                    return Err("this site has built its part already".into());
                }
                let (built, underlay) = build(&order)?;
                self.built = Some(built);
                self.reply(FromSite::Built { underlay })
            }
            ToSite::Probe { flows } => {
                let b = self.built.as_ref().ok_or("nothing is built")?;
                let reached = probe(b, &flows)?;
                self.reply(FromSite::Reached(reached))
            }
            ToSite::Start { t0_ns, sends } => {
                let b = self.built.as_mut().ok_or("nothing is built")?;
                start(b, t0_ns, &sends)?;
                Ok(())
            }
            ToSite::Send { flow, start_ns, path } => {
                let b = self.built.as_ref().ok_or("nothing is built")?;
                send(b, flow, start_ns, path)
            }
            ToSite::Clock { .. } | ToSite::Stop => Ok(()),
        }
    }

    fn reply(&self, m: FromSite) -> Result<(), String> {
        say(&self.writer, &m).map_err(|e| format!("answering the coordinator: {e}"))
    }

    /// Tells the coordinator of flows sent from here that completed or stuck, and how many
    /// flows finished here.
    fn forward_flow_events(&mut self) -> std::io::Result<()> {
        let Some(b) = self.built.as_mut() else {
            return Ok(());
        };
        for event in b.lab.events().try_iter() {
            let diagnosis = match event {
                FlowEvent::Stuck(x) => b.plan.iter().find(|f| f.id == x.id).map(|f| {
                    let name = |n: usize| b.topology.nodes[n].name.as_str();
                    no_progress_report(&b.lab, &x, name(f.src), name(f.dst))
                }),
                FlowEvent::Completed(_) => None,
            };
            say(&self.writer, &FromSite::Event { event, diagnosis })?;
        }
        let finished = b.lab.finished();
        if finished != b.finished {
            b.finished = finished;
            say(&self.writer, &FromSite::Finished(finished))?;
        }
        Ok(())
    }

    /// Stops the lab, reports, sends the captures and tears everything down.
    fn finish(mut self) -> std::io::Result<()> {
        self.forward_flow_events()?;
        let Some(mut b) = self.built.take() else {
            return say(&self.writer, &FromSite::Done);
        };
        drop(b.player.take());
        let events = b.lab.links().events().into_iter().map(|e| (e.at_ns, e.what)).collect();
        let r = b.lab.stop();
        let report = SiteReport {
            hosts: r.hosts,
            switches: r.switches,
            failed_hosts: r.failed_hosts,
            workers: r.workers,
            host_worker: r.host_worker.into_iter().collect(),
            port_worker: r.port_worker.into_iter().map(|((s, p), w)| (s, p, w)).collect(),
            events,
        };
        say(&self.writer, &FromSite::Report(Box::new(report)))?;
        if let Some(dir) = &b.capture {
            for entry in std::fs::read_dir(dir)? {
                let path = entry?.path();
                let bytes = std::fs::read(&path)?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let mut w = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                protocol::send(&mut *w, &FromSite::File { name })?;
                protocol::send_bytes(&mut *w, &bytes)?;
                w.flush()?;
            }
            std::fs::remove_dir_all(dir)?;
        }
        say(&self.writer, &FromSite::Done)
    }
}

/// Builds this site's part of the lab `order` describes; the devices its tunnels leave by.
fn build(order: &BuildOrder) -> Result<(Built, Vec<Underlay>), String> {
    let s = Scenario::from_text(&order.scenario, &order.file, &Overrides::default()).map_err(|e| e.to_string())?;
    let s = Scenario {
        dilation: order.dilation,
        dilation_auto: false,
        ..s
    };
    let sites = s.sites.as_ref().ok_or("the scenario has no `sites:`")?;
    let me = sites
        .names
        .iter()
        .position(|n| *n == order.site)
        .ok_or_else(|| format!("the scenario's `sites:` has no site `{}`", order.site))?;
    let address = |site: usize| {
        let name = &sites.names[site];
        order
            .addresses
            .get(name)
            .copied()
            .ok_or_else(|| format!("no address for site `{name}`"))
    };
    let capture = if order.capture || s.capture {
        let dir = std::env::temp_dir().join(format!("{CAPTURE_FOLDER}{}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Some(dir)
    } else {
        None
    };
    let mut lab_plan = LabPlan::new(&s, "s", capture.clone());
    let t = &lab_plan.topology;
    let link_mtu = lab_plan.cfg.transport.link_mtu();
    let mut tunnels = Vec::new();
    let mut underlay = Vec::new();
    for li in sites.cut_links(t) {
        let [a, b] = t.links[li].ends.each_ref().map(|e| sites.site_of[e.node]);
        if a != me && b != me {
            continue;
        }
        let far = if a == me { b } else { a };
        let spec = TunnelSpec {
            vni: li as u32 + 1,
            local: address(me)?,
            remote: address(far)?,
        };
        let (dev, mtu) = underlay_mtu(spec.remote).map_err(|e| e.to_string())?;
        let need = u32::from(link_mtu) + u32::from(TUNNEL_OVERHEAD);
        if mtu < need {
            return Err(format!(
                "site {}: the machines' network carries IP packets of up to {mtu} B on {dev}, but a tunnel needs {need} B (the lab's IP MTU of {link_mtu} plus {TUNNEL_OVERHEAD} B of VXLAN headers and lab-time stamp): raise it (ip link set dev {dev} mtu {need}) or run the lab with a smaller RoCE MTU",
                order.site
            ));
        }
        underlay.push(Underlay {
            link: t.link_name(li),
            device: dev,
            mtu,
        });
        tunnels.push((li, spec));
    }
    lab_plan.cfg.site = Some(SitePart {
        name: order.site.clone(),
        here: sites.site_of.iter().map(|&x| x == me).collect(),
        tunnels,
    });
    let lab = Lab::build(t, &lab_plan.cfg).map_err(|e| format!("site {}: building its part: {e}", order.site))?;
    let d = Dilation::new(s.dilation);
    let built = Built {
        lab,
        controller: d.controller(&s.controller),
        src_ports: crate::workload::source_ports(&lab_plan.plan),
        topology: lab_plan.topology,
        plan: lab_plan.plan,
        base_rtt: lab_plan.base_rtt,
        scenario: s,
        capture,
        player: None,
        finished: 0,
    };
    Ok((built, underlay))
}

/// Probes flows `flows` (their sources here): (plan index, smallest RTT, links taken).
fn probe(b: &Built, flows: &[usize]) -> Result<Vec<(usize, u64, Vec<usize>)>, String> {
    let targets: Vec<ProbeTarget> = flows
        .iter()
        .map(|&k| ProbeTarget {
            flow: b.plan[k].id,
            src: b.plan[k].src,
            dst: b.plan[k].dst,
            src_port: b.src_ports[k],
        })
        .collect();
    let limit = PROBE_LIMIT.max(Duration::from_nanos(20 * b.base_rtt));
    let reach = datapath::check(&b.lab, &targets, limit).map_err(|e| e.report)?;
    Ok(flows
        .iter()
        .zip(reach)
        .map(|(&k, r)| (k, r.rtt_min_ns, r.links))
        .collect())
}

/// Starts the run at `t0_ns`: receivers here expect their flows, `sends` are sent, the
/// scenario's events play on this site's links.
fn start(b: &mut Built, t0_ns: u64, sends: &[(usize, u64, FlowPath)]) -> Result<(), String> {
    let host_failed = |n: usize, e: std::io::Error| format!("host {}: {e}", b.topology.nodes[n].name);
    b.lab.measure_from(t0_ns).map_err(|(n, e)| host_failed(n, e))?;
    for (k, f) in b.plan.iter().enumerate() {
        if let Some(ep) = b.lab.host_namespace(f.dst).map(|_| b.lab.endpoint(f.dst)) {
            ep.expect(flow_spec(&b.topology, &b.plan, &b.src_ports, k, 0))
                .map_err(|e| host_failed(f.dst, e))?;
        }
    }
    for &(k, start_ns, path) in sends {
        send(b, k, start_ns, path)?;
    }
    let d = Dilation::new(b.scenario.dilation);
    let player = EventPlayer::start(b.lab.links().clone(), b.scenario.events.clone(), t0_ns, d)
        .map_err(|e| format!("starting the scenario's events: {e}"))?;
    b.player = Some(player);
    Ok(())
}

/// Sends flow `k` (its source here) from lab time `start_ns`.
fn send(b: &Built, k: usize, start_ns: u64, path: FlowPath) -> Result<(), String> {
    let f = b.plan.get(k).ok_or_else(|| format!("no flow {k}"))?;
    if b.lab.host_namespace(f.src).is_none() {
        return Err(format!(
            "flow {k}'s source {} is not on this site",
            b.topology.nodes[f.src].name
        ));
    }
    let cc = crate::run::flow_controller(&b.controller, b.scenario.workload.applications(), f);
    b.lab
        .endpoint(f.src)
        .send(flow_spec(&b.topology, &b.plan, &b.src_ports, k, start_ns), cc, path)
        .map_err(|e| format!("host {}: {e}", b.topology.nodes[f.src].name))
}
