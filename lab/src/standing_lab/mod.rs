//! Labs left up for interactive use (`intlab up`, `exec`, `down`), as Mininet and containerlab
//! users work: the process that holds a lab records it in a small file under [`STATE_DIR`],
//! and the other commands find the lab, its namespaces and its process from that record.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::lab::Lab;
use crate::netns;
use crate::topology::Topology;

mod hold;

pub use hold::{HoldError, Served, hold};

/// Where the records of labs that are up are kept (root's run-time folder: gone at reboot,
/// as the namespaces are).
pub const STATE_DIR: &str = "/run/intlab/labs";

/// The record of a lab that is up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandingLab {
    /// The lab's name (`intlab up --name`, default the scenario's).
    pub name: String,
    /// The process holding it.
    pub pid: u32,
    /// The scenario it was built from.
    pub scenario: PathBuf,
    /// The prefix of its namespaces (see [`netns::run_prefix`]).
    pub prefix: String,
    /// Each host's namespace and address.
    pub hosts: BTreeMap<String, HostRecord>,
    /// Where its P4 switches serve P4Runtime.
    #[serde(default)]
    pub p4runtime: Vec<crate::p4runtime_endpoints::P4RuntimeRecord>,
    /// Where it serves Prometheus metrics (`--metrics`), if it does.
    #[serde(default)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Where it serves its live page (`--web`), if it does.
    #[serde(default)]
    pub web: Option<std::net::SocketAddr>,
}

/// Where a host of a standing lab lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// Its network namespace.
    pub namespace: String,
    /// Its address.
    pub address: std::net::Ipv4Addr,
    /// Its RDMA device, which programs started in it see.
    #[serde(default)]
    pub device: Option<crate::nic_device::HostDevice>,
}

/// Why a standing lab could not be found, recorded or stopped.
#[derive(Debug, thiserror::Error)]
pub enum StandingLabError {
    /// No lab is up.
    #[error("no lab is up (start one with `intlab up SCENARIO`)")]
    NoneUp,
    /// No lab of that name is up.
    #[error("no lab named `{name}` is up (up: {up})")]
    NotUp {
        /// The name asked for.
        name: String,
        /// The names that are up.
        up: String,
    },
    /// Several are up and none was named.
    #[error("several labs are up ({0}): name one with --lab")]
    Ambiguous(String),
    /// The name is taken by a lab that is up.
    #[error("a lab named `{name}` is already up (process {pid}): `intlab down {name}` first, or pick another --name")]
    Taken {
        /// The name.
        name: String,
        /// Its process.
        pid: u32,
    },
    /// A node that is not one of the lab's hosts.
    #[error("lab `{lab}` has no host `{node}` (hosts: {hosts})")]
    NoHost {
        /// The lab.
        lab: String,
        /// The name given.
        node: String,
        /// Its hosts.
        hosts: String,
    },
    /// The process holding the lab did not stop.
    #[error("lab `{name}`: process {pid} did not stop within {secs} s of SIGTERM")]
    StillRunning {
        /// The lab.
        name: String,
        /// Its process.
        pid: u32,
        /// How long we waited.
        secs: u64,
    },
    /// Namespaces left behind could not be removed.
    #[error("lab `{name}`: {detail}")]
    Leftovers {
        /// The lab.
        name: String,
        /// What failed.
        detail: String,
    },
    /// A record could not be read or written.
    #[error("{}: {cause}", path.display())]
    Record {
        /// The record's file.
        path: PathBuf,
        /// Why.
        cause: String,
    },
}

impl StandingLab {
    /// The record of `lab`, built from `topology`, under `name`: each host's namespace, address
    /// and RDMA device; no servers yet.
    pub fn of(lab: &Lab, topology: &Topology, name: &str, scenario: PathBuf, prefix: &str) -> StandingLab {
        StandingLab {
            name: name.to_owned(),
            pid: std::process::id(),
            scenario,
            prefix: prefix.to_owned(),
            hosts: topology
                .hosts()
                .map(|h| {
                    let node = &topology.nodes[h];
                    let record = HostRecord {
                        namespace: lab.namespace(h).name().to_owned(),
                        address: node.address.expect("hosts have addresses"),
                        device: lab.device(h).cloned(),
                    };
                    (node.name.clone(), record)
                })
                .collect(),
            p4runtime: Vec::new(),
            metrics: None,
            web: None,
        }
    }

    /// The file recording lab `name`.
    pub fn path(name: &str) -> PathBuf {
        Path::new(STATE_DIR).join(format!("{name}.json"))
    }

    /// The log of the background process holding lab `name`.
    pub fn log_path(name: &str) -> PathBuf {
        Path::new(STATE_DIR).join(format!("{name}.log"))
    }

    /// The control socket of lab `name`'s P4 switches (`intlab p4 cli`).
    pub fn socket_path(name: &str) -> PathBuf {
        Path::new(STATE_DIR).join(format!("{name}.sock"))
    }

    /// True while the process holding the lab runs.
    pub fn is_live(&self) -> bool {
        netns::process_runs(self.pid)
    }

    /// Records the lab, replacing the file in one step so a reader never sees half of it.
    pub fn write(&self) -> Result<(), StandingLabError> {
        let path = Self::path(&self.name);
        let fail = |cause: String| StandingLabError::Record {
            path: path.clone(),
            cause,
        };
        std::fs::create_dir_all(STATE_DIR).map_err(|e| fail(e.to_string()))?;
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| fail(e.to_string()))?;
        std::fs::write(&tmp, text).map_err(|e| fail(e.to_string()))?;
        std::fs::rename(&tmp, &path).map_err(|e| fail(e.to_string()))
    }

    /// Removes the record, the log and the control socket (the lab is down).
    pub fn forget(name: &str) -> Result<(), StandingLabError> {
        for path in [Self::path(name), Self::log_path(name), Self::socket_path(name)] {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(StandingLabError::Record {
                        path,
                        cause: e.to_string(),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads the record of lab `name`, if there is one.
    pub fn read(name: &str) -> Result<Option<StandingLab>, StandingLabError> {
        let path = Self::path(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(StandingLabError::Record {
                    path,
                    cause: e.to_string(),
                });
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StandingLabError::Record {
                path,
                cause: format!("not a lab record: {e}"),
            })
    }

    /// Every recorded lab, live or not, by name.
    pub fn all() -> Result<Vec<StandingLab>, StandingLabError> {
        let entries = match std::fs::read_dir(STATE_DIR) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(StandingLabError::Record {
                    path: STATE_DIR.into(),
                    cause: e.to_string(),
                });
            }
        };
        let mut labs = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".json")
                && let Some(lab) = Self::read(stem)?
            {
                labs.push(lab);
            }
        }
        labs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(labs)
    }

    /// The lab called `name`, or the only one up when no name is given.
    pub fn find(name: Option<&str>) -> Result<StandingLab, StandingLabError> {
        let up: Vec<StandingLab> = Self::all()?.into_iter().filter(StandingLab::is_live).collect();
        let names = || up.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", ");
        match name {
            Some(n) => up
                .iter()
                .find(|l| l.name == n)
                .cloned()
                .ok_or_else(|| StandingLabError::NotUp {
                    name: n.to_owned(),
                    up: if up.is_empty() { "none".into() } else { names() },
                }),
            None => match up.len() {
                0 => Err(StandingLabError::NoneUp),
                1 => Ok(up[0].clone()),
                _ => Err(StandingLabError::Ambiguous(names())),
            },
        }
    }

    /// Refuses `name` when a live lab holds it; a record left by a killed process is removed.
    pub fn claim(name: &str) -> Result<(), StandingLabError> {
        match Self::read(name)? {
            Some(l) if l.is_live() => Err(StandingLabError::Taken {
                name: name.to_owned(),
                pid: l.pid,
            }),
            Some(l) => l.remove_leftovers(),
            None => Ok(()),
        }
    }

    /// The record of host `node` (its name or its address).
    pub fn host(&self, node: &str) -> Result<&HostRecord, StandingLabError> {
        // By name, or by address, as MPI's launcher names the hosts it was given.
        let by_address = || self.hosts.values().find(|h| h.address.to_string() == node);
        self.hosts
            .get(node)
            .or_else(by_address)
            .ok_or_else(|| StandingLabError::NoHost {
                lab: self.name.clone(),
                node: node.to_owned(),
                hosts: self.hosts.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// Stops the lab: SIGTERM to its process, which tears the lab down and removes the
    /// record; waits up to `limit` for it, then removes whatever a dead holder left.
    pub fn stop(&self, limit: Duration) -> Result<(), StandingLabError> {
        if self.is_live() {
            netns::signal(self.pid, libc::SIGTERM).map_err(|e| StandingLabError::Leftovers {
                name: self.name.clone(),
                detail: format!("signalling process {}: {e}", self.pid),
            })?;
            let started = Instant::now();
            while self.is_live() {
                if started.elapsed() > limit {
                    return Err(StandingLabError::StillRunning {
                        name: self.name.clone(),
                        pid: self.pid,
                        secs: limit.as_secs(),
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.remove_leftovers()
    }

    /// Ends the processes started in the lab's hosts (an `iperf3 -s -D`, say), which would
    /// otherwise outlive the lab and keep its namespaces alive.
    pub fn end_host_processes(&self) -> Result<usize, StandingLabError> {
        let mut ended = 0;
        for h in self.hosts.values() {
            match netns::end_processes_in(&h.namespace, Duration::from_secs(2)) {
                Ok(n) => ended += n,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StandingLabError::Leftovers {
                        name: self.name.clone(),
                        detail: format!("ending the processes in {}: {e}", h.namespace),
                    });
                }
            }
        }
        Ok(ended)
    }

    /// Removes the processes, namespaces and record a holder that is no longer running left
    /// behind.
    fn remove_leftovers(&self) -> Result<(), StandingLabError> {
        self.end_host_processes()?;
        let cleaned = netns::clean(&format!("{}-", self.prefix), false);
        if let Some(e) = cleaned.failed.first() {
            return Err(StandingLabError::Leftovers {
                name: self.name.clone(),
                detail: e.to_string(),
            });
        }
        let (_, failed) = crate::nic_device::clean(&self.prefix, false);
        if let Some(e) = failed.first() {
            return Err(StandingLabError::Leftovers {
                name: self.name.clone(),
                detail: e.clone(),
            });
        }
        Self::forget(&self.name)
    }
}

/// Removes the records of labs whose process no longer runs (for `intlab clean`); returns
/// their names.
pub fn forget_dead() -> Result<Vec<String>, StandingLabError> {
    let mut gone = Vec::new();
    for lab in StandingLab::all()? {
        if !lab.is_live() {
            StandingLab::forget(&lab.name)?;
            gone.push(lab.name);
        }
    }
    Ok(gone)
}
