//! One emulated host's transport, as its owner sees it: how it is configured, what it counts
//! and reports, and the [`Endpoint`] handle that gives it flows. The host itself
//! ([`crate::host::Host`]) is a task on a runtime worker; its sockets are opened wherever the
//! caller's `enter` puts a thread first (a host's network namespace, say), so the transport
//! knows nothing of namespaces.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::{Receiver, Sender};
use intlab_runtime::{Runtime, Waker};

use crate::cc::ControllerConfig;
pub use crate::endpoint_config::{EndpointConfig, IntMode, PROBE_QP, ProgramSettings};
pub use crate::endpoint_report::{EndpointCounters, EndpointReport, HostNow, Probe, ProbeReply, Stall};
use crate::flow::{FlowPath, FlowSpec};
use crate::host::Command;
use crate::host::Host;
pub use crate::host::ProgramPort;
pub use crate::verbs::SenderTiming;

/// A host's transport running on a runtime worker: what its owner gives it flows through.
pub struct Endpoint {
    name: String,
    commands: Sender<Command>,
    waker: Waker,
    finished: Arc<AtomicUsize>,
    report: Receiver<io::Result<EndpointReport>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({})", self.name)
    }
}

impl Endpoint {
    /// Opens the host's sockets on a thread that first calls `enter` (to join the host's
    /// namespace, say; they stay there), then starts the host on worker `worker` of `rt`.
    pub fn start(
        config: EndpointConfig,
        rt: &Runtime,
        worker: usize,
        enter: impl FnOnce() -> io::Result<()> + Send + 'static,
    ) -> io::Result<Endpoint> {
        let name = config.name.clone();
        let ip = config.ip;
        let (int_port, dscp, pfc) = (config.int_port, config.dscp, config.pfc);
        let sockets = std::thread::Builder::new()
            .name(format!("open-{name}"))
            .spawn(move || {
                enter()?;
                crate::host::Sockets::open(ip, int_port, dscp, pfc)
            })?
            .join()
            .map_err(|_| io::Error::other(format!("endpoint {name}: opening its sockets panicked")))?
            .map_err(|e| io::Error::new(e.kind(), format!("endpoint {name}: {e}")))?;
        let (commands, rx) = crossbeam_channel::unbounded();
        let (report_tx, report) = crossbeam_channel::bounded(1);
        let finished = Arc::new(AtomicUsize::new(0));
        let place = rt.reserve(worker);
        let waker = place.waker();
        let host = Host::new(config, sockets, rx, finished.clone(), report_tx)?;
        rt.install(place, Box::new(host));
        Ok(Endpoint {
            name,
            commands,
            waker,
            finished,
            report,
        })
    }

    /// Sends `flow`'s message (starting at its start time) under the controller `cc`, which
    /// takes what it derives from `path`. Fails when the host has stopped.
    pub fn send(&self, flow: FlowSpec, cc: ControllerConfig, path: FlowPath) -> io::Result<()> {
        self.command(Command::Send(flow, cc, path))
    }

    /// Prepares to receive `flow` (data for an unknown QP is dropped and counted).
    pub fn expect(&self, flow: FlowSpec) -> io::Result<()> {
        self.command(Command::Expect(flow))
    }

    /// Sends a reachability probe (see [`PROBE_QP`]); its reply, if any, comes on
    /// `probe.reply`.
    pub fn probe(&self, probe: Probe) -> io::Result<()> {
        self.command(Command::Probe(probe))
    }

    /// Counts wake-up lateness and stalls only from lab time `t_ns` on (a run's start, so that
    /// setting up and checking the data path do not count).
    pub fn measure_from(&self, t_ns: u64) -> io::Result<()> {
        self.command(Command::MeasureFrom(t_ns))
    }

    fn command(&self, c: Command) -> io::Result<()> {
        self.commands
            .send(c)
            .map_err(|_| io::Error::other(format!("endpoint {}: the host has stopped", self.name)))?;
        self.waker.wake();
        Ok(())
    }

    /// Where the host's programs' requests go (for the command file).
    pub fn program_port(&self) -> ProgramPort {
        ProgramPort {
            name: self.name.clone(),
            commands: self.commands.clone(),
            waker: self.waker.clone(),
        }
    }

    /// A handle that asks the host for its flows while it runs, from any thread.
    pub fn watcher(&self) -> EndpointWatcher {
        EndpointWatcher {
            name: self.name.clone(),
            commands: self.commands.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Flows completed so far here: sent flows fully acknowledged plus received flows complete.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }

    /// The host's report, once its runtime has stopped (the first error it met, if one stopped
    /// it).
    pub fn report(self) -> io::Result<EndpointReport> {
        self.report.recv().unwrap_or_else(|_| {
            Err(io::Error::other(format!(
                "endpoint {}: its worker ended without a report",
                self.name
            )))
        })
    }
}

/// Asks a running host how its sent flows stand (see [`Endpoint::watcher`]).
#[derive(Clone)]
pub struct EndpointWatcher {
    name: String,
    commands: Sender<Command>,
    waker: Waker,
}

impl std::fmt::Debug for EndpointWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EndpointWatcher({})", self.name)
    }
}

impl EndpointWatcher {
    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Asks for every flow the host was given to send and every QP of its programs, as they
    /// stand now: the answer comes on the receiver at the host's next run. Asking every host
    /// before waiting on any costs one wake-up in all, not one per host. Fails when the host
    /// has stopped.
    pub fn ask_now(&self) -> io::Result<Receiver<HostNow>> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.commands
            .send(Command::Now(tx))
            .map_err(|_| io::Error::other(format!("endpoint {}: the host has stopped", self.name)))?;
        self.waker.wake();
        Ok(rx)
    }
}
