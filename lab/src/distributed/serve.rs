//! `intlab site serve`: a machine's share of labs spread over several. It waits for a
//! coordinator (`intlab run --sites`), builds the part of the lab the coordinator names, runs
//! it on the coordinator's lab clock and reports back; everything it built is torn down when
//! the run ends, when the coordinator goes away and when the server is stopped.
//!
//! Only a coordinator of the same lab gets past the TLS handshake (both sides show a
//! certificate of the lab's own authority, `intlab site init`). One coordinator at a time: a
//! second is told so and dropped while the first is served, and connections are admitted on
//! their own tasks so that one that never speaks holds up nobody.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use intlab_keys::LabKeys;
use intlab_runtime::clock::Clock;
use intlab_switch::port::tunnel::TunnelSeal;
use intlab_transport::flow::FlowEvent;
use tokio::io::AsyncWriteExt;
use tokio_rustls::TlsAcceptor;

use crate::life_cycle::{LabPlan, RunningLab, StoppedLab};
use crate::scenario::{Overrides, Scenario};
use crate::sites::control_connection::{ControlConnection, ReadLimits, Received};
use crate::sites::protocol::{self, BuildOrder, Frame, FromSite, Message, SiteReport, ToSite, Underlay, VERSION};
use crate::sites::{CAPTURE_FOLDER, KernelClock, SitePart, TUNNEL_OVERHEAD, TunnelSpec, underlay_mtu};

/// How often the site looks at its flows and the stop flag while it runs.
const POLL: Duration = Duration::from_millis(20);

/// How long a new connection has for its TLS handshake and its Hello.
const ADMISSION: Duration = Duration::from_secs(10);

/// How long a coordinator may say nothing: it waits at most its step limit (120 s) for the
/// slowest site to build, and sends clock exchanges every second while a run goes.
const IDLE: Duration = Duration::from_secs(300);

/// How long a begun message may take to arrive whole, or to be taken by the coordinator.
const WHOLE: Duration = Duration::from_secs(60);

/// How long the last messages (report, captures, done) may take to leave.
const CLOSING: Duration = Duration::from_secs(600);

/// Largest shift of the lab clock a coordinator may ask for: a year (machines' clocks count
/// from their boots, so they differ by the difference of their uptimes).
const MAX_SHIFT_NS: u64 = 86_400_000_000_000 * 365;

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
    /// The keys could not be read or used.
    #[error("the lab's keys: {0}")]
    Keys(#[from] intlab_keys::KeyError),
    /// The I/O runtime could not start.
    #[error("starting the I/O runtime: {0}")]
    Runtime(std::io::Error),
}

/// Where the server says what it does (accepted, refused with the peer's address, done).
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// A site server bound to its address, ready to serve.
pub struct SiteServer {
    listener: std::net::TcpListener,
    address: SocketAddr,
    tls: TlsAcceptor,
    runtime: tokio::runtime::Runtime,
}

impl SiteServer {
    /// Listens on `address`, admitting only coordinators that `keys` (a site's) trust.
    pub fn bind(address: SocketAddr, keys: &LabKeys) -> Result<SiteServer, ServeError> {
        let listen = |cause| ServeError::Listen { address, cause };
        let listener = std::net::TcpListener::bind(address).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        let address = listener.local_addr().map_err(listen)?;
        let tls = TlsAcceptor::from(keys.site_config()?);
        // One I/O thread: the lab's own threads keep the cores.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("site-io")
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        Ok(SiteServer {
            listener,
            address,
            tls,
            runtime,
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves coordinators until `stop` is raised; a session under way is then torn down.
    pub fn serve(self, stop: Arc<AtomicBool>, log: Log) -> Result<(), ServeError> {
        let address = self.address;
        log(&format!("intlab site: waiting for a coordinator on {address}"));
        let busy: Busy = Arc::new(Mutex::new(None));
        let handle = self.runtime.handle().clone();
        let tls = self.tls;
        let std_listener = self.listener;
        let sessions = self.runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener)
                .map_err(|cause| ServeError::Listen { address, cause })?;
            let sessions: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>> = Arc::default();
            while !stop.load(Ordering::Relaxed) {
                let (tcp, peer) = match tokio::time::timeout(Duration::from_millis(100), listener.accept()).await {
                    Err(_) => continue,
                    Ok(Err(e)) => {
                        log(&format!("accepting a connection: {e}"));
                        continue;
                    }
                    Ok(Ok(x)) => x,
                };
                let admission = Admission {
                    tls: tls.clone(),
                    busy: busy.clone(),
                    stop: stop.clone(),
                    log: log.clone(),
                    runtime: handle.clone(),
                    sessions: sessions.clone(),
                };
                tokio::spawn(admission.admit(tcp, peer));
            }
            Ok::<_, ServeError>(sessions)
        })?;
        let running = std::mem::take(&mut *sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for s in running {
            // A session that panicked said so when it did.
            s.join().ok();
        }
        Ok(())
    }
}

/// The coordinator served now, if any.
type Busy = Arc<Mutex<Option<SocketAddr>>>;

/// What admitting a connection needs.
struct Admission {
    tls: TlsAcceptor,
    busy: Busy,
    stop: Arc<AtomicBool>,
    log: Log,
    runtime: tokio::runtime::Handle,
    sessions: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>>,
}

impl Admission {
    /// Lets `peer` in when it shows the lab's certificate, says Hello in time, speaks this
    /// version and finds the site free; tells it why not otherwise.
    async fn admit(self, tcp: tokio::net::TcpStream, peer: SocketAddr) {
        let log = &self.log;
        if let Err(e) = tcp.set_nodelay(true) {
            log(&format!("refused {peer}: {e}"));
            return;
        }
        let tls = match tokio::time::timeout(ADMISSION, self.tls.accept(tcp)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return log(&format!("refused {peer}: no TLS handshake of this lab ({e})")),
            Err(_) => {
                return log(&format!(
                    "refused {peer}: no TLS handshake within {} s",
                    ADMISSION.as_secs()
                ));
            }
        };
        let (mut r, mut w) = tokio::io::split(tls);
        let version = match protocol::read_frame::<ToSite>(&mut r, ADMISSION, ADMISSION).await {
            Ok(Some(Frame::Message(ToSite::Hello { version }))) => version,
            Ok(Some(Frame::Message(m))) => {
                return log(&format!("refused {peer}: a {} before its Hello", m.kind_name()));
            }
            Ok(Some(Frame::Chunk(_))) => return log(&format!("refused {peer}: bytes before its Hello")),
            Ok(None) => return log(&format!("{peer} left before its Hello")),
            Err(e) => return log(&format!("refused {peer}: {e}")),
        };
        let refuse = |why: String| FromSite::Failed(why);
        let answer = if version != VERSION {
            Err(refuse(format!(
                "this site speaks version {VERSION} of the protocol, the coordinator {version}: run the same intlab on every machine"
            )))
        } else {
            let mut busy = self.busy.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match *busy {
                Some(other) => Err(refuse(format!(
                    "this site serves coordinator {other} now: one coordinator at a time"
                ))),
                None => {
                    *busy = Some(peer);
                    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                    Ok(FromSite::Hello {
                        version: VERSION,
                        host: host.trim().to_owned(),
                        kernel: KernelClock::here(),
                    })
                }
            }
        };
        let (reply, admitted) = match answer {
            Ok(hello) => (hello, true),
            Err(failed) => (failed, false),
        };
        let said = protocol::write_message(&mut w, &reply).await;
        if !admitted {
            if let FromSite::Failed(why) = &reply {
                log(&format!("refused {peer}: {why}"));
            }
            w.shutdown().await.ok();
            return;
        }
        let free = |busy: &Busy| *busy.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        if let Err(e) = said {
            free(&self.busy);
            return log(&format!("coordinator {peer}: {e}"));
        }
        log(&format!("coordinator {peer} connected"));
        let (tx, messages) = crossbeam_channel::unbounded();
        let connection = ControlConnection::start(
            r.unsplit(w),
            &self.runtime,
            ReadLimits {
                idle: IDLE,
                whole: WHOLE,
                files: None,
            },
            Box::new(answer_clock),
            Box::new(move |m| tx.send(m).is_ok()),
        );
        let (busy, stop, session_log) = (self.busy.clone(), self.stop.clone(), self.log.clone());
        let session = std::thread::Builder::new().name("site-session".into()).spawn(move || {
            let log = session_log;
            let s = Session {
                connection,
                messages,
                built: None,
            };
            // A panic here is a bug; it must not take the server down with it (the lab it
            // built is torn down as it unwinds).
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.run(&stop)));
            match ended {
                Ok(Ok(())) => log(&format!("coordinator {peer}: done, everything torn down")),
                Ok(Err(e)) => log(&format!("coordinator {peer}: {e} (everything torn down)")),
                Err(_) => log(&format!(
                    "coordinator {peer}: the session failed (a bug); everything torn down"
                )),
            }
            free(&busy);
        });
        match session {
            Ok(h) => self
                .sessions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(h),
            Err(e) => {
                free(&self.busy);
                log(&format!("coordinator {peer}: starting its session: {e}"));
            }
        }
    }
}

/// Answers a clock exchange at once, in the site's unshifted lab clock with the shift it runs
/// with: a late answer would read as a long way back.
fn answer_clock(m: &ToSite) -> Option<FromSite> {
    let ToSite::Clock { sent_ns } = *m else {
        return None;
    };
    let clock = Clock::get();
    let received_ns = clock.unshifted_ns();
    Some(FromSite::Clock {
        sent_ns,
        received_ns,
        answered_ns: clock.unshifted_ns(),
        shift_ns: clock.shift(),
    })
}

/// A test hook: a site server started with this variable set (ns of lab time, signed) runs
/// every lab it builds on a clock that far off the one its coordinator aligned it to, so the
/// tests can check that a wrong clock is caught. Never set it otherwise.
pub const CLOCK_ERROR_HOOK: &str = "INTLAB_TEST_SITE_CLOCK_ERROR_LAB_NS";

/// Moves this site's clock by the hook's error ([`CLOCK_ERROR_HOOK`]) at `dilation`, if set.
fn apply_clock_error_hook(dilation: f64) -> Result<(), String> {
    let Ok(text) = std::env::var(CLOCK_ERROR_HOOK) else {
        return Ok(());
    };
    let lab_ns: i64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{CLOCK_ERROR_HOOK}={text}: not a whole number of ns"))?;
    let real_ns = (lab_ns as f64 * dilation) as i64;
    if real_ns.unsigned_abs() > MAX_SHIFT_NS {
        return Err(format!("{CLOCK_ERROR_HOOK}={text}: more than a year"));
    }
    tracing::warn!("test hook {CLOCK_ERROR_HOOK}: this site's lab clock runs {real_ns} ns off its coordinator's");
    let clock = Clock::get();
    clock.align(clock.shift() + real_ns);
    Ok(())
}

/// What a site runs of one lab.
struct Built {
    running: RunningLab,
    /// Where its switches write their captures until they are sent (removed then).
    capture: Option<PathBuf>,
    /// Flows finished here, as last told to the coordinator.
    finished: usize,
}

/// One coordinator's connection.
struct Session {
    connection: ControlConnection<FromSite>,
    messages: Receiver<Received<ToSite>>,
    built: Option<Built>,
}

impl Session {
    /// Serves the coordinator until it stops the run or goes away.
    fn run(mut self, stop: &AtomicBool) -> std::io::Result<()> {
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(std::io::Error::other("stopped by a signal"));
            }
            match self.messages.recv_timeout(POLL) {
                Ok(Received::Message(ToSite::Stop, _)) => return self.finish(),
                Ok(Received::Message(m, _)) => {
                    if let Err(e) = self.handle(m) {
                        self.connection.send(FromSite::Failed(e))?;
                    }
                }
                Ok(Received::Ended(why)) => {
                    let why = why.map_or_else(String::new, |w| format!(" ({w})"));
                    return Err(std::io::Error::other(format!("the coordinator went away{why}")));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(std::io::Error::other("the coordinator went away"));
                }
            }
            self.forward_flow_events()?;
        }
    }

    /// Does what `m` asks; an error is what to tell the coordinator.
    fn handle(&mut self, m: ToSite) -> Result<(), String> {
        match m {
            ToSite::Hello { .. } => Err("hello again: this coordinator is connected already".into()),
            ToSite::Align { shift_ns } => {
                if self.built.is_some() {
                    return Err("the lab clock cannot move under a lab".into());
                }
                if shift_ns.unsigned_abs() > MAX_SHIFT_NS {
                    return Err(format!("a clock shift of {shift_ns} ns: more than a year"));
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
                b.running.start(t0_ns, &sends).map_err(|e| e.to_string())
            }
            ToSite::Send { flow, start_ns, path } => {
                let b = self.built.as_ref().ok_or("nothing is built")?;
                b.running.send(flow, start_ns, path).map_err(|e| e.to_string())
            }
            ToSite::Clock { .. } | ToSite::Stop => Ok(()),
        }
    }

    fn reply(&self, m: FromSite) -> Result<(), String> {
        self.connection
            .send(m)
            .map_err(|e| format!("answering the coordinator: {e}"))
    }

    /// Tells the coordinator of flows sent from here that completed or stuck, and how many
    /// flows finished here.
    fn forward_flow_events(&mut self) -> std::io::Result<()> {
        let Some(b) = self.built.as_mut() else {
            return Ok(());
        };
        for event in b.running.lab().events().try_iter() {
            let diagnosis = match &event {
                FlowEvent::Stuck(x) => Some(b.running.no_progress_report(x)),
                FlowEvent::Completed(_) => None,
            };
            self.connection.send(FromSite::Event { event, diagnosis })?;
        }
        let finished = b.running.lab().finished();
        if finished != b.finished {
            b.finished = finished;
            self.connection.send(FromSite::Finished(finished))?;
        }
        Ok(())
    }

    /// Stops the lab, reports, sends the captures and tears everything down.
    fn finish(mut self) -> std::io::Result<()> {
        self.forward_flow_events()?;
        let Some(b) = self.built.take() else {
            self.connection.send(FromSite::Done)?;
            self.connection.close(CLOSING);
            return Ok(());
        };
        let StoppedLab {
            report: r,
            network_events: events,
            ..
        } = b.running.stop();
        let report = SiteReport {
            hosts: r.hosts,
            switches: r.switches,
            failed_hosts: r.failed_hosts,
            workers: r.workers,
            host_worker: r.host_worker.into_iter().collect(),
            port_worker: r.port_worker.into_iter().map(|((s, p), w)| (s, p, w)).collect(),
            events,
        };
        self.connection.send(FromSite::Report(Box::new(report)))?;
        if let Some(dir) = &b.capture {
            for entry in std::fs::read_dir(dir)? {
                let path = entry?.path();
                let size = std::fs::metadata(&path)?.len();
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                self.connection.send_file(FromSite::File { name, size }, &path)?;
            }
            std::fs::remove_dir_all(dir)?;
        }
        self.connection.send(FromSite::Done)?;
        self.connection.close(CLOSING);
        Ok(())
    }
}

/// Builds this site's part of the lab `order` describes; the devices its tunnels leave by.
fn build(order: &BuildOrder) -> Result<(Built, Vec<Underlay>), String> {
    check_order(order)?;
    let s = Scenario::from_text(&order.scenario, &order.file, &Overrides::default()).map_err(|e| e.to_string())?;
    let s = Scenario {
        dilation: order.dilation,
        dilation_auto: false,
        ..s
    };
    apply_clock_error_hook(s.dilation)?;
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
    let mut lab_plan = LabPlan::of_run(&s, "s", capture.clone());
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
        let vni = li as u32 + 1;
        let spec = TunnelSpec {
            vni,
            seal: TunnelSeal::new(order.tunnel_key, vni),
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
    let running = RunningLab::build(lab_plan).map_err(|e| format!("site {}: building its part: {e}", order.site))?;
    let built = Built {
        running,
        capture,
        finished: 0,
    };
    Ok((built, underlay))
}

/// What in a build order is checked before anything is read or built: the file is a plain
/// absolute path (relative paths in the scenario resolve against it), the dilation one a lab
/// can run at, and every tunnel address one a tunnel can go to.
fn check_order(order: &BuildOrder) -> Result<(), String> {
    use std::path::Component;
    let file = &order.file;
    if !file.is_absolute() || file.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "the scenario file {} is no absolute path without `..`",
            file.display()
        ));
    }
    if !(order.dilation.is_finite() && (1.0..=1e6).contains(&order.dilation)) {
        return Err(format!("a dilation of {}: a lab runs at 1 to 10^6", order.dilation));
    }
    for (site, a) in &order.addresses {
        if a.is_unspecified() || a.is_multicast() || a.is_broadcast() {
            return Err(format!("site `{site}`: {a} is no address of a machine"));
        }
    }
    Ok(())
}

/// Probes flows `flows` (their sources here): (plan index, smallest RTT, links taken).
fn probe(b: &Built, flows: &[usize]) -> Result<Vec<(usize, u64, Vec<usize>)>, String> {
    for &k in flows {
        b.running.local_flow(k).map_err(|e| e.to_string())?;
    }
    let reach = b.running.probe(flows).map_err(|e| e.report)?;
    Ok(flows
        .iter()
        .zip(reach)
        .map(|(&k, r)| (k, r.rtt_min_ns, r.links))
        .collect())
}
