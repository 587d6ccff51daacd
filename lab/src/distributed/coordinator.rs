//! `intlab run SCENARIO --sites sites.yaml`: drives a lab spread over machines. It connects
//! to every site's server, aligns their lab clocks on its own, has each build its part, checks
//! the data path, starts the workload at one lab time, relays what must cross sites (the
//! completions that release later iterations), stops every site and gathers their reports and
//! captures into one results folder and one summary. A site whose coordinator goes away tears
//! its part down by itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use intlab_keys::LabKeys;
use intlab_runtime::clock::Clock;
use intlab_transport::flow::{FlowEvent, FlowPath};
use serde::Deserialize;

use crate::datapath::Reach;
use crate::lab::LabReport;
use crate::life_cycle::{self, LabPlan, StoppedLab, Watched, WorkloadClock, ending_now, flow_paths};
use crate::results::{self, Ending, Results, WriteError};
use crate::run::{Progress, RunError, RunOptions};
use crate::scenario::Scenario;
use crate::sites::control_connection::{ControlConnection, ReadLimits, Received, dial};
use crate::sites::protocol::{BuildOrder, FlowReach, FromSite, SiteReport, ToSite, VERSION};
use crate::sites::{Exchange, KernelClock, Offset, best_offset};
use crate::sites::{SiteClock, SitesTiming, TunnelTiming};
use crate::workload::Iterations;

/// Clock exchanges per measurement (the one with the shortest round trip counts).
const EXCHANGES: usize = 16;
/// How often the offsets are measured again while the workload runs.
const REMEASURE_EVERY: Duration = Duration::from_secs(1);
/// How long a site may take to answer a step (building a large part takes seconds).
const STEP_LIMIT: Duration = Duration::from_secs(120);
/// How long a begun message or file chunk may take to arrive whole.
const WHOLE: Duration = Duration::from_secs(60);
/// Time between the sites being told to start and the first flow (real ns): every site must
/// have its flows by then.
const START_MARGIN_NS: u64 = 300_000_000;

/// One site's entry in the sites file: its server's address, and the address its tunnels use
/// when not the server's.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum SiteEntry {
    /// `east: 10.0.0.1:7700`
    Control(String),
    /// `east: { control: 10.0.0.1:7700, tunnel: 192.168.1.1 }`
    Both {
        control: String,
        #[serde(default)]
        tunnel: Option<Ipv4Addr>,
    },
}

/// Where each site is.
#[derive(Debug, Clone)]
pub struct SiteAddresses {
    /// Site name → (its server, its tunnels' address).
    pub sites: BTreeMap<String, (SocketAddr, Ipv4Addr)>,
}

impl SiteAddresses {
    /// Reads a sites file: `NAME: HOST:PORT` or `NAME: { control: HOST:PORT, tunnel: ADDR }`.
    pub fn load(path: &Path) -> Result<SiteAddresses, RunError> {
        let err = |message: String| RunError::Site {
            site: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        SiteAddresses::from_text(&text, path, &|control| {
            control
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.find(SocketAddr::is_ipv4))
        })
    }

    /// Reads the text of a sites file; `path` names it in errors, `resolve` turns a
    /// `HOST:PORT` into an IPv4 address (the system's resolver for [`SiteAddresses::load`]).
    pub fn from_text(
        text: &str,
        path: &Path,
        resolve: &dyn Fn(&str) -> Option<SocketAddr>,
    ) -> Result<SiteAddresses, RunError> {
        let err = |message: String| RunError::Site {
            site: path.display().to_string(),
            message,
        };
        let raw: BTreeMap<String, SiteEntry> = serde_saphyr::from_str(text).map_err(|e| err(e.to_string()))?;
        let mut sites = BTreeMap::new();
        for (name, entry) in raw {
            let (control, tunnel) = match entry {
                SiteEntry::Control(c) => (c, None),
                SiteEntry::Both { control, tunnel } => (control, tunnel),
            };
            let no_address = || err(format!("site `{name}`: `{control}` is no HOST:PORT of an IPv4 address"));
            let addr = resolve(&control).ok_or_else(no_address)?;
            let tunnel = match (tunnel, addr.ip()) {
                (Some(t), _) => t,
                (None, std::net::IpAddr::V4(ip)) => ip,
                (None, std::net::IpAddr::V6(_)) => return Err(no_address()),
            };
            sites.insert(name, (addr, tunnel));
        }
        if sites.is_empty() {
            return Err(err("no site".into()));
        }
        Ok(SiteAddresses { sites })
    }
}

/// What came from site `usize`.
type Incoming = (usize, Received<FromSite>);

/// The coordinator's connections.
struct Sites<'a> {
    names: Vec<String>,
    /// Raised by Ctrl-C: a step waiting for the sites gives up.
    stop: &'a AtomicBool,
    connections: Vec<ControlConnection<ToSite>>,
    incoming: Receiver<Incoming>,
    /// Reads and writes every connection (dropped after them).
    _runtime: tokio::runtime::Runtime,
}

impl<'a> Sites<'a> {
    /// Connects to every site in `order` over TLS with `keys`; files they send land in `files`.
    fn connect(
        addresses: &SiteAddresses,
        order: &[String],
        keys: &LabKeys,
        files: Option<PathBuf>,
        stop: &'a AtomicBool,
    ) -> Result<Sites<'a>, RunError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("coordinator-io")
            .enable_all()
            .build()
            .map_err(|e| RunError::Sites(format!("starting the I/O runtime: {e}")))?;
        let (tx, incoming) = crossbeam_channel::unbounded();
        let mut connections = Vec::new();
        for (i, name) in order.iter().enumerate() {
            let (addr, _) = addresses.sites[name];
            let site_err = |message: String| RunError::Site {
                site: name.clone(),
                message,
            };
            let stream = runtime.block_on(dial(addr, keys)).map_err(|e| {
                site_err(format!(
                    "connecting to its server at {addr}: {e} (is `intlab site serve` running there?)"
                ))
            })?;
            let tx = tx.clone();
            connections.push(ControlConnection::start(
                stream,
                runtime.handle(),
                ReadLimits {
                    // A step has its own limit; this only ends a connection gone silent.
                    idle: STEP_LIMIT * 5,
                    whole: WHOLE,
                    files: files.clone(),
                },
                Box::new(|_| None),
                Box::new(move |r| tx.send((i, r)).is_ok()),
            ));
        }
        Ok(Sites {
            names: order.to_vec(),
            stop,
            connections,
            incoming,
            _runtime: runtime,
        })
    }

    fn tell(&mut self, i: usize, m: &ToSite) -> Result<(), RunError> {
        self.connections[i].send(m.clone()).map_err(|e| RunError::Site {
            site: self.names[i].clone(),
            message: format!("sending: {e}"),
        })
    }

    /// Waits for one answer from each site in `from` (the first that `want` accepts), clock
    /// answers and progress aside.
    fn answers<T>(
        &self,
        from: &[usize],
        what: &str,
        mut want: impl FnMut(usize, FromSite, u64) -> Option<Result<T, String>>,
    ) -> Result<Vec<(usize, T)>, RunError> {
        let started = Instant::now();
        let mut out = Vec::new();
        while out.len() < from.len() {
            if self.stop.load(Ordering::Relaxed) {
                return Err(RunError::Sites(format!(
                    "interrupted while {what}: every site tears its part down"
                )));
            }
            let left = STEP_LIMIT.saturating_sub(started.elapsed());
            let (i, received) = match self.incoming.recv_timeout(left.min(crate::run::POLL)) {
                Ok(x) => x,
                Err(_) if !left.is_zero() => continue,
                Err(_) => {
                    let site = from
                        .iter()
                        .find(|i| !out.iter().any(|(j, _)| j == *i))
                        .map_or_else(String::new, |&i| self.names[i].clone());
                    return Err(RunError::Site {
                        site,
                        message: format!("no answer while {what} within {} s", STEP_LIMIT.as_secs()),
                    });
                }
            };
            let site_err = |message: String| RunError::Site {
                site: self.names[i].clone(),
                message,
            };
            let (m, at) = match received {
                Received::Message(m, at) => (m, at),
                // A site that has given its last answer may hang up while others still work.
                Received::Ended(None) if out.iter().any(|(j, _)| *j == i) => continue,
                Received::Ended(why) => {
                    let why = why.map_or_else(String::new, |w| format!(": {w}"));
                    return Err(site_err(format!("its server went away while {what}{why}")));
                }
            };
            if let FromSite::Failed(e) = m {
                return Err(site_err(e));
            }
            if let Some(r) = want(i, m, at) {
                out.push((i, r.map_err(site_err)?));
            }
        }
        Ok(out)
    }

    /// Measures site `i`'s clock offset with [`EXCHANGES`] exchanges.
    fn measure(&mut self, i: usize) -> Result<Offset, RunError> {
        let clock = Clock::get();
        let mut exchanges = Vec::new();
        for _ in 0..EXCHANGES {
            self.tell(
                i,
                &ToSite::Clock {
                    sent_ns: clock.now_ns(),
                },
            )?;
            // Timed when the reader thread took it off the connection, not when this thread
            // got to it.
            let got = self.answers(&[i], "measuring its clock", |_, m, back_ns| match m {
                FromSite::Clock {
                    sent_ns,
                    received_ns,
                    answered_ns,
                    ..
                } => Some(Ok(Exchange {
                    sent_ns,
                    received_ns,
                    answered_ns,
                    back_ns,
                })),
                _ => None,
            })?;
            exchanges.push(got[0].1);
        }
        best_offset(&exchanges).ok_or_else(|| RunError::Site {
            site: self.names[i].clone(),
            message: "no clock exchange".into(),
        })
    }

    /// Says hello to every site (each must speak this version) and aligns each site's lab
    /// clock on this one's; the offsets as measured.
    fn greet_and_align(&mut self, progress: &mut dyn Progress) -> Result<Vec<Offset>, RunError> {
        let all: Vec<usize> = (0..self.names.len()).collect();
        for &i in &all {
            self.tell(i, &ToSite::Hello { version: VERSION })?;
        }
        let kernels = self.answers(&all, "saying hello", |_, m, _| match m {
            FromSite::Hello { version, kernel, .. } if version == VERSION => Some(Ok(kernel)),
            FromSite::Hello { version, .. } => {
                Some(Err(format!("it speaks version {version}, this coordinator {VERSION}")))
            }
            _ => None,
        })?;
        progress.step("aligning the sites' lab clocks");
        let mut aligned = Vec::new();
        let here = KernelClock::here();
        for (i, kernel) in kernels {
            let mut o = self.measure(i)?;
            // On this machine's kernel the true offset is known: the measurement's error with it.
            o.error_ns = here
                .true_offset_of(Clock::get().shift(), &kernel)
                .map(|t| o.offset_ns - t);
            self.tell(i, &ToSite::Align { shift_ns: -o.offset_ns })?;
            aligned.push(o);
        }
        Ok(aligned)
    }

    /// Has every site build its part of `s` (with a capture if `capture`), with one tunnel key
    /// for the run, and waits until all have.
    fn build(&mut self, s: &Scenario, addresses: &SiteAddresses, capture: bool) -> Result<(), RunError> {
        let tunnel_addresses: BTreeMap<String, Ipv4Addr> =
            addresses.sites.iter().map(|(k, (_, t))| (k.clone(), *t)).collect();
        let mut tunnel_key = [0u8; 16];
        getrandom::fill(&mut tunnel_key).map_err(|e| RunError::Sites(format!("making the run's tunnel key: {e}")))?;
        // Absolute, as a site refuses any other (relative paths in the scenario resolve
        // against it on every machine).
        let file = std::path::absolute(&s.file).map_err(|e| RunError::Sites(format!("{}: {e}", s.file.display())))?;
        for i in 0..self.names.len() {
            let order = BuildOrder {
                tunnel_key,
                scenario: s.text.clone(),
                file: file.clone(),
                dilation: s.dilation,
                site: self.names[i].clone(),
                addresses: tunnel_addresses.clone(),
                capture,
            };
            self.tell(i, &ToSite::Build(order))?;
        }
        let all: Vec<usize> = (0..self.names.len()).collect();
        self.answers(&all, "building its part", |_, m, _| match m {
            FromSite::Built { .. } => Some(Ok(())),
            _ => None,
        })?;
        Ok(())
    }

    /// Has each site probe the paths of the flows whose sources it runs (flow `k`'s at site
    /// `site_of_flow[k]`); what each site reached.
    fn probe(&mut self, site_of_flow: &[usize]) -> Result<Vec<(usize, Vec<FlowReach>)>, RunError> {
        let mut probing = Vec::new();
        for i in 0..self.names.len() {
            let flows: Vec<usize> = (0..site_of_flow.len()).filter(|&k| site_of_flow[k] == i).collect();
            if !flows.is_empty() {
                self.tell(i, &ToSite::Probe { flows })?;
                probing.push(i);
            }
        }
        self.answers(&probing, "checking the data path", |_, m, _| match m {
            FromSite::Reached(r) => Some(Ok(r)),
            _ => None,
        })
    }

    /// Stops every site and waits for its report and files; the reports in site order.
    fn stop_and_report(&mut self) -> Result<Vec<SiteReport>, RunError> {
        let n = self.names.len();
        for i in 0..n {
            self.tell(i, &ToSite::Stop)?;
        }
        let mut reports: Vec<Option<SiteReport>> = vec![None; n];
        // One wait for everything a site sends once stopped: report, files (each written whole
        // before it is announced here), done.
        let all: Vec<usize> = (0..n).collect();
        self.answers(&all, "reporting", |i, m, _| match m {
            FromSite::Report(r) => {
                reports[i] = Some(*r);
                None
            }
            FromSite::Done => Some(Ok(())),
            _ => None,
        })?;
        reports
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.ok_or_else(|| RunError::Site {
                    site: self.names[i].clone(),
                    message: "it ended without its report".into(),
                })
            })
            .collect()
    }
}

/// Runs `s` over the sites at `addresses`, as [`crate::run::run`] runs it on one machine. With
/// `dilation: auto` it starts where this machine would keep time and steps up while a run
/// warns, the sites' own warning (a machines' network slower than a cut link) included.
pub fn run_on_sites(
    s: &Scenario,
    addresses: &SiteAddresses,
    keys: &LabKeys,
    opts: &RunOptions,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<Results, RunError> {
    if let Some(p) = s.programs.first() {
        return Err(RunError::Sites(format!(
            "`programs:` ({} and others) run in a lab on one machine: not yet over sites",
            p.name
        )));
    }
    crate::run::stepping_up(s, opts, stop, progress, &mut |s, opts, stop, progress, warned| {
        run_once_on_sites(s, addresses, keys, opts, stop, progress, warned)
    })
}

/// One run of `s` over the sites at its dilation; `warned` are the dilations tried before.
fn run_once_on_sites(
    s: &Scenario,
    addresses: &SiteAddresses,
    keys: &LabKeys,
    opts: &RunOptions,
    stop: &AtomicBool,
    progress: &mut dyn Progress,
    warned: &[f64],
) -> Result<Results, RunError> {
    let plan_sites = site_plan_of(s, addresses)?;
    results::prepare(&opts.out, opts.force)?;
    results::write_scenario(&opts.out, &s.text)?;
    // Planned here as each site plans its part (`cfg.site` aside): the flows, their paths and
    // the report are the whole lab's.
    let lab_plan = LabPlan::of_run(s, &opts.tag, None);
    let (topology, plan, d) = (&lab_plan.topology, &lab_plan.flows, lab_plan.dilation);
    let n = plan_sites.names.len();
    let capture = s.capture || opts.capture;
    let capture_dir = opts.out.join("capture");
    if capture {
        std::fs::create_dir_all(&capture_dir).map_err(|cause| WriteError {
            file: capture_dir.display().to_string(),
            cause,
        })?;
    }
    progress.step(&format!("connecting to {n} sites"));
    let mut sites = Sites::connect(addresses, &plan_sites.names, keys, capture.then_some(capture_dir), stop)?;
    let aligned = sites.greet_and_align(progress)?;
    progress.step(&format!(
        "building {} over {n} sites ({} hosts, {} switches)",
        s.topology.name,
        topology.hosts().count(),
        topology.switches().count()
    ));
    sites.build(s, addresses, capture)?;
    progress.step("checking the data path");
    let site_of_flow: Vec<usize> = plan.iter().map(|f| plan_sites.site_of[f.src]).collect();
    let reached = match sites.probe(&site_of_flow) {
        Ok(r) => r,
        Err(e) => {
            results::write_text(&opts.out, results::DATAPATH, &e.to_string())?;
            return Err(e);
        }
    };
    let reach = reach_of_flows(reached, plan.len(), |k| &plan_sites.names[site_of_flow[k]])?;
    let (paths, overheads) = flow_paths(&lab_plan, &reach);
    let clock = WorkloadClock::start_in(START_MARGIN_NS, d);
    for i in 0..n {
        let sends = clock
            .first_sends(plan, &paths)
            .filter(|&(k, ..)| site_of_flow[k] == i)
            .collect();
        sites.tell(
            i,
            &ToSite::Start {
                t0_ns: clock.t0_ns(),
                sends,
            },
        )?;
    }
    let mut watch = Watch::new(
        Iterations::new(&lab_plan.applications, plan, d),
        &site_of_flow,
        &paths,
        &aligned,
    );
    progress.begin(plan.len() as u64);
    // This machine's steal: on one machine, every site's; else the coordinator's alone.
    let ending = watch.run(&mut sites, &clock, s.duration.0, stop, progress)?;
    let ended = clock.end(ending);
    progress.end();
    progress.step("stopping every site and gathering results");
    let reports = sites.stop_and_report()?;
    let timing = sites_timing(topology, plan_sites, &reports, &aligned, &watch.drift, &sites.names);
    let (report, network_events) = merge(topology, reports);
    let failed_host = report.failed_hosts.first().cloned();
    let stopped = StoppedLab {
        plan: lab_plan,
        report,
        network_events,
    };
    let watched = Watched {
        paths: &paths,
        host_overhead_ns: &overheads,
        diagnosis: watch.diagnosis.take(),
        dilation_warned: warned,
    };
    let mut results = life_cycle::report(s, stopped, ended, watched);
    results.summary.timing_warning |= timing.warning;
    results.summary.sites = Some(timing);
    progress.step("writing results");
    results::write_all(&opts.out, &results)?;
    if let Some((host, error)) = failed_host {
        return Err(RunError::Host { host, error });
    }
    Ok(results)
}

/// What the coordinator follows while the workload runs: the iterations it releases across
/// sites, each site's count of finished flows and the drift of each site's lab clock.
struct Watch<'p> {
    iterations: Iterations,
    site_of_flow: &'p [usize],
    paths: &'p [FlowPath],
    /// The sites' clocks as aligned before the start.
    aligned: &'p [Offset],
    finished: Vec<usize>,
    /// Why a flow made no progress, as the first site to see one said.
    diagnosis: Option<String>,
    /// How far each site's lab clock moved from this one beyond what measuring can tell (ns).
    drift: Vec<u64>,
    /// A clock exchange sent and not answered yet, per site.
    pending: Vec<bool>,
    next_measure: Instant,
    exchanges: Vec<Vec<Exchange>>,
    /// The shift each site's lab clock runs with, as it last said.
    shifts: Vec<i64>,
}

impl<'p> Watch<'p> {
    fn new(iterations: Iterations, site_of_flow: &'p [usize], paths: &'p [FlowPath], aligned: &'p [Offset]) -> Self {
        let n = aligned.len();
        Watch {
            iterations,
            site_of_flow,
            paths,
            aligned,
            finished: vec![0; n],
            diagnosis: None,
            drift: vec![0; n],
            pending: vec![false; n],
            next_measure: Instant::now() + REMEASURE_EVERY,
            exchanges: vec![Vec::new(); n],
            shifts: aligned.iter().map(|o| -o.offset_ns).collect(),
        }
    }

    /// Follows the sites until every flow finished (each flow counts at both ends), one made
    /// no progress, `stop` is raised or the scenario's `duration_ns` on `clock` passed.
    fn run(
        &mut self,
        sites: &mut Sites,
        clock: &WorkloadClock,
        duration_ns: u64,
        stop: &AtomicBool,
        progress: &mut dyn Progress,
    ) -> Result<Ending, RunError> {
        let flows = self.site_of_flow.len();
        loop {
            match sites.incoming.recv_timeout(crate::run::POLL) {
                Ok((i, Received::Ended(why))) => {
                    let why = why.map_or_else(String::new, |w| format!(": {w}"));
                    return Err(RunError::Site {
                        site: sites.names[i].clone(),
                        message: format!("its server went away while the workload ran{why}"),
                    });
                }
                Ok((i, Received::Message(m, at))) => self.received(sites, i, m, at)?,
                Err(RecvTimeoutError::Timeout) => {}
                // Every reader ended (each says so first, which returns above).
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(RunError::Sites(
                        "every site's connection ended while the workload ran".into(),
                    ));
                }
            }
            if Instant::now() >= self.next_measure {
                self.next_measure = Instant::now() + REMEASURE_EVERY;
                self.remeasure(sites)?;
            }
            let done: usize = self.finished.iter().sum();
            progress.advance((done / 2) as u64);
            let over = clock.past(duration_ns);
            if let Some(e) = ending_now(done >= 2 * flows, self.diagnosis.is_some(), stop, over) {
                return Ok(e);
            }
        }
    }

    /// Takes in message `m` from site `i`, which arrived at `at`.
    fn received(&mut self, sites: &mut Sites, i: usize, m: FromSite, at: u64) -> Result<(), RunError> {
        match m {
            FromSite::Event {
                event: FlowEvent::Completed(c),
                ..
            } => {
                if let Some(r) = self.iterations.complete(c.id, c.end_ns) {
                    for &k in &r.flows {
                        let send = ToSite::Send {
                            flow: k,
                            start_ns: r.start_ns,
                            path: self.paths[k],
                        };
                        sites.tell(self.site_of_flow[k], &send)?;
                    }
                }
            }
            // The first flow found stuck says why the run ends.
            FromSite::Event {
                event: FlowEvent::Stuck(x),
                diagnosis: why,
            } if self.diagnosis.is_none() => {
                self.diagnosis = Some(why.unwrap_or_else(|| format!("flow {} made no progress", x.id)));
            }
            FromSite::Finished(k) => self.finished[i] = k,
            FromSite::Clock {
                sent_ns,
                received_ns,
                answered_ns,
                shift_ns,
            } => {
                self.pending[i] = false;
                self.shifts[i] = shift_ns;
                self.exchanges[i].push(Exchange {
                    sent_ns,
                    received_ns,
                    answered_ns,
                    back_ns: at,
                });
            }
            FromSite::Failed(e) => {
                return Err(RunError::Site {
                    site: sites.names[i].clone(),
                    message: e,
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The offsets of the sites' lab clocks, measured again (sites answer in their unshifted
    /// clock and say the shift they run with): how far each is from this one, beyond what the
    /// two measurements cannot tell apart. A site that runs with another shift than it was
    /// told shows here, as a clock that drifted.
    fn remeasure(&mut self, sites: &mut Sites) -> Result<(), RunError> {
        for i in 0..self.aligned.len() {
            if let Some(o) = best_offset(&self.exchanges[i]) {
                let off = (i128::from(o.offset_ns) + i128::from(self.shifts[i])).unsigned_abs();
                let unsure = u128::from(o.uncertainty_ns + self.aligned[i].uncertainty_ns);
                let moved = u64::try_from(off.saturating_sub(unsure)).unwrap_or(u64::MAX);
                self.drift[i] = self.drift[i].max(moved);
                self.exchanges[i].clear();
            }
            if !self.pending[i] {
                self.pending[i] = true;
                let sent_ns = Clock::get().now_ns();
                sites.tell(i, &ToSite::Clock { sent_ns })?;
            }
        }
        Ok(())
    }
}

/// Which site runs which node of `s`, checked against the sites `addresses` names.
fn site_plan_of<'a>(s: &'a Scenario, addresses: &SiteAddresses) -> Result<&'a crate::sites::plan::SitePlan, RunError> {
    let file = s.file.display();
    let plan_sites = s.sites.as_ref().ok_or_else(|| {
        RunError::Sites(format!(
            "{file}: no `sites:` says which machine runs which node (intlab plan --sites N writes one)"
        ))
    })?;
    if let Some(name) = plan_sites.names.iter().find(|n| !addresses.sites.contains_key(*n)) {
        return Err(RunError::Sites(format!(
            "{file} names site `{name}`, for which the sites file gives no address"
        )));
    }
    Ok(plan_sites)
}

/// Each of `flows` flows' reach as the sites reported their probes (flow, smallest RTT, links);
/// a flow no site reported is an error of the site that runs its source, `site_of(k)`.
fn reach_of_flows<'a>(
    reached: Vec<(usize, Vec<FlowReach>)>,
    flows: usize,
    site_of: impl Fn(usize) -> &'a String,
) -> Result<Vec<Reach>, RunError> {
    let mut reach: Vec<Option<Reach>> = vec![None; flows];
    for (_, r) in reached {
        for (k, rtt_min_ns, links) in r {
            if let Some(slot) = reach.get_mut(k) {
                *slot = Some(Reach { rtt_min_ns, links });
            }
        }
    }
    reach
        .into_iter()
        .enumerate()
        .map(|(k, r)| {
            r.ok_or_else(|| RunError::Site {
                site: site_of(k).clone(),
                message: format!("it did not report flow {k}'s probes"),
            })
        })
        .collect()
}

/// The sites' timing: their clocks as aligned and re-measured, each cut link's frames as its
/// two tunnel ports received them.
fn sites_timing(
    t: &crate::topology::Topology,
    plan: &crate::sites::plan::SitePlan,
    reports: &[SiteReport],
    aligned: &[Offset],
    drift: &[u64],
    names: &[String],
) -> SitesTiming {
    let clocks: Vec<SiteClock> = names
        .iter()
        .enumerate()
        .map(|(i, site)| SiteClock {
            site: site.clone(),
            uncertainty_ns: aligned[i].uncertainty_ns + drift[i],
            round_trip_ns: aligned[i].round_trip_ns,
            drift_ns: drift[i],
            alignment_error_ns: aligned[i].error_ns,
        })
        .collect();
    let port_of: HashMap<(&str, &str), &intlab_switch::PortSnapshot> = reports
        .iter()
        .flat_map(|r| &r.switches)
        .flat_map(|sw| sw.ports.iter().map(move |p| ((sw.switch.as_str(), p.name.as_str()), p)))
        .collect();
    let tunnels = plan
        .cut_links(t)
        .into_iter()
        .map(|li| {
            let link = &t.links[li];
            let ends: Vec<&intlab_switch::PortSnapshot> = link
                .ends
                .iter()
                .filter_map(|e| {
                    port_of
                        .get(&(t.nodes[e.node].name.as_str(), e.interface.as_str()))
                        .copied()
                })
                .collect();
            TunnelTiming {
                link: t.link_name(li),
                delay_ns: link.props.delay.0,
                frames: ends.iter().map(|p| p.totals.rx_frames).sum(),
                late: ends.iter().map(|p| p.totals.tunnel_late).sum(),
                late_max_ns: ends.iter().map(|p| p.totals.tunnel_late_max_ns).max().unwrap_or(0),
            }
        })
        .collect();
    // The coordinator runs next to one site or apart from all: the longest way to a site is
    // the machines' network one way and back, or more.
    let one_way = aligned.iter().map(|o| o.round_trip_ns / 2).max().unwrap_or(0);
    SitesTiming::new(clocks, tunnels, one_way)
}

/// One report of the sites' reports: hosts and switches in the topology's order, each site's
/// workers numbered after the previous site's; and the link changes they made (one per
/// change, the two ends of a cut link logging it alike).
fn merge(t: &crate::topology::Topology, reports: Vec<SiteReport>) -> (LabReport, Vec<(u64, String)>) {
    let order: HashMap<&str, usize> = t.nodes.iter().enumerate().map(|(k, n)| (n.name.as_str(), k)).collect();
    let mut out = LabReport {
        hosts: Vec::new(),
        switches: Vec::new(),
        failed_hosts: Vec::new(),
        workers: Vec::new(),
        host_worker: HashMap::new(),
        port_worker: HashMap::new(),
    };
    let mut events = BTreeSet::new();
    let mut base = 0;
    for r in reports {
        let workers = r.workers.iter().map(|w| w.worker + 1).max().unwrap_or(0);
        out.workers.extend(r.workers.into_iter().map(|mut w| {
            w.worker += base;
            w
        }));
        out.host_worker
            .extend(r.host_worker.into_iter().map(|(h, w)| (h, w + base)));
        out.port_worker
            .extend(r.port_worker.into_iter().map(|(s, p, w)| ((s, p), w + base)));
        out.hosts.extend(r.hosts);
        out.switches.extend(r.switches);
        out.failed_hosts.extend(r.failed_hosts);
        events.extend(r.events);
        base += workers;
    }
    let rank = |name: &str| order.get(name).copied().unwrap_or(usize::MAX);
    out.hosts.sort_by_key(|h| rank(&h.name));
    out.switches.sort_by_key(|s| rank(&s.switch));
    (out, events.into_iter().collect())
}
