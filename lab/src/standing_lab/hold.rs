//! Holding a lab up (`intlab up`): built from its scenario, served to the other commands (its
//! control socket, P4Runtime on its P4 switches, the live view if asked) and recorded, until
//! told to stop; then its hosts' programs ended, everything taken down and the record removed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{StandingLab, StandingLabError};
use crate::lab::LabError;
use crate::life_cycle::{LabPlan, RunningLab};
use crate::live::{LiveServer, ServeError, serve_where_asked};
use crate::scenario::{DEFAULT_SCENARIO_NAME, LabScenario};

/// What a held lab serves besides its control socket: addresses to listen on, if asked.
#[derive(Debug, Clone, Copy, Default)]
pub struct Served {
    /// Prometheus metrics (`--metrics`).
    pub metrics: Option<SocketAddr>,
    /// The live page (`--web`).
    pub web: Option<SocketAddr>,
}

/// Why a lab could not be held up.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// Building it failed.
    #[error(transparent)]
    Build(#[from] LabError),
    /// Its metrics or live page could not be served.
    #[error(transparent)]
    Live(#[from] ServeError),
    /// Its control socket could not be served.
    #[error("serving the P4 control plane on {path}: {cause}")]
    ControlSocket {
        /// The socket's path.
        path: PathBuf,
        /// What the system said.
        cause: std::io::Error,
    },
    /// P4Runtime could not be served on its P4 switches.
    #[error("P4Runtime: {0}")]
    P4Runtime(String),
    /// Its record could not be written, or its hosts' programs ended.
    #[error(transparent)]
    Record(#[from] StandingLabError),
}

/// Builds lab `name` from `s` (read from `scenario`, the built-in one when None), serves it,
/// records it, and holds it until `stop` is raised; `say` hears what a user is told.
pub fn hold(
    scenario: Option<&Path>,
    s: &LabScenario,
    name: &str,
    served: Served,
    capture: Option<PathBuf>,
    stop: &AtomicBool,
    say: &mut dyn FnMut(&str),
) -> Result<(), HoldError> {
    let tag: String = name.chars().filter(char::is_ascii_alphanumeric).collect();
    let running = RunningLab::build(LabPlan::standing(s, &format!("up{tag}"), capture))?;
    let (lab, topology, prefix) = (running.lab(), &s.topology, &running.plan().cfg.prefix);
    // A standing lab is built at dilation 1: its scenario's time is the lab's.
    let live = serve_where_asked(served.metrics, served.web)?;
    for server in &live {
        server.show(lab.view(1.0));
    }
    // Where each was asked for: one server may serve both.
    let serving = |asked: Option<SocketAddr>| {
        let asked = asked?;
        live.iter().find(|s| s.asked() == asked).map(LiveServer::address)
    };
    let socket = StandingLab::socket_path(name);
    let datapaths = lab.p4_datapaths();
    crate::control_socket::serve(&socket, datapaths.clone(), Some(lab.links().clone())).map_err(|cause| {
        HoldError::ControlSocket {
            path: socket.clone(),
            cause,
        }
    })?;
    let endpoints =
        crate::p4runtime_endpoints::endpoints(topology, datapaths, lab.cpu_ports()).map_err(HoldError::P4Runtime)?;
    let p4runtime = intlab_p4runtime::server::start(endpoints).map_err(|e| HoldError::P4Runtime(e.to_string()))?;
    let scenario = match scenario {
        Some(file) => file.canonicalize().unwrap_or_else(|_| file.to_owned()),
        None => PathBuf::from(DEFAULT_SCENARIO_NAME),
    };
    let mut record = StandingLab::of(lab, topology, name, scenario, prefix);
    record.p4runtime = p4runtime
        .endpoints
        .iter()
        .map(
            |(switch, address, device_id)| crate::p4runtime_endpoints::P4RuntimeRecord {
                switch: switch.clone(),
                address: *address,
                device_id: *device_id,
            },
        )
        .collect();
    record.metrics = serving(served.metrics);
    record.web = serving(served.web);
    record.write()?;
    say(&format!("lab {name} is up; Ctrl-C (or `intlab down {name}`) stops it"));
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let ended = record.end_host_processes()?;
    if ended > 0 {
        say(&format!("ended {ended} process(es) still running in the hosts"));
    }
    drop(p4runtime);
    drop(live);
    let stopped = running.stop();
    for (host, error) in &stopped.report.failed_hosts {
        say(&format!("host {host}'s transport had failed: {error}"));
    }
    StandingLab::forget(name)?;
    say(&format!("lab {name} is down"));
    Ok(())
}
