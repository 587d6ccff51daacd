//! The YAML of one key each (`p4:`, `ecn:`, `mmu:`, `pfc:`, `priorities:`), shared by the
//! switch's own file and the lab's scenarios, with what each resolves to.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::units::{Bytes, Nanos};

use super::spec::{EcnSpec, P4RuntimeKey, P4Spec};

/// `p4:` as written, shared by the switch's own file and the lab's switch nodes: the program
/// and its files (relative to the file that names them), its P4 port numbers by interface (a
/// lab's switch node; the switch's own file numbers each port with its `p4_port`), and its
/// control plane.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P4Yaml {
    /// The P4_16 program.
    pub program: PathBuf,
    /// Include folders for its preprocessor, searched in order (p4c's `-I`).
    #[serde(default)]
    pub include: Vec<PathBuf>,
    /// Macros defined for its preprocessor, `NAME` or `NAME=VALUE` (p4c's `-D`).
    #[serde(default)]
    pub define: Vec<String>,
    /// Macros undefined after those (p4c's `-U`).
    #[serde(default)]
    pub undefine: Vec<String>,
    /// Its runtime file (the tutorials' JSON).
    #[serde(default)]
    pub runtime: Option<PathBuf>,
    /// A `simple_switch_CLI` command file.
    #[serde(default)]
    pub cli: Option<PathBuf>,
    /// Interface name → P4 port number.
    #[serde(default)]
    pub ports: BTreeMap<String, u16>,
    /// Log each packet's way through the program.
    #[serde(default)]
    pub trace: bool,
    /// Where it serves P4Runtime.
    #[serde(default)]
    pub p4runtime: P4RuntimeKey,
    /// The P4 port number of its CPU port.
    #[serde(default)]
    pub cpu_port: Option<Spanned<u16>>,
}

impl P4Yaml {
    /// The spec it resolves to, its files found relative to `file` (the one that names them).
    pub fn spec(&self, file: &Path) -> P4Spec {
        let rel = |p: &Path| super::relative_to(file, p);
        P4Spec {
            program: rel(&self.program),
            preprocessor: intlab_p4::PreprocessorOptions::new(
                self.include.iter().map(|d| rel(d)).collect(),
                &self.define,
                self.undefine.clone(),
            ),
            runtime: self.runtime.as_deref().map(rel),
            cli: self.cli.as_deref().map(rel),
            trace: self.trace,
            p4runtime: super::P4RuntimeKey {
                tls: self.p4runtime.tls.as_ref().map(|t| super::P4RuntimeTls {
                    cert: rel(&t.cert),
                    key: rel(&t.key),
                    client_ca: t.client_ca.as_deref().map(rel),
                }),
                ..self.p4runtime.clone()
            },
            cpu_port: self.cpu_port.as_ref().map(|c| c.value),
        }
    }
}

/// ECN thresholds as written in YAML (`{ kmin: 20KB, kmax: 80KB, pmax: 0.2 }`), shared by the
/// switch configuration and the lab's topologies.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnYaml {
    /// Lower threshold.
    pub kmin: Bytes,
    /// Upper threshold.
    pub kmax: Bytes,
    /// Marking probability at `kmax`.
    pub pmax: f64,
}

impl EcnYaml {
    /// The checked thresholds, or what is wrong with them.
    pub fn resolve(&self) -> Result<EcnSpec, String> {
        if !(0.0..=1.0).contains(&self.pmax) || self.kmin.0 > self.kmax.0 {
            return Err(format!(
                "expected kmin <= kmax and pmax in [0, 1], got kmin {} B, kmax {} B, pmax {}",
                self.kmin.0, self.kmax.0, self.pmax
            ));
        }
        Ok(EcnSpec {
            kmin: self.kmin.0,
            kmax: self.kmax.0,
            pmax: self.pmax,
        })
    }
}

/// A shared buffer as written in YAML (`{ shared: 12MB, alpha: 0.125, reserve: 4KiB }`),
/// shared by the switch configuration and the lab's topologies.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmuYaml {
    /// The whole buffer (default: the sum of the ports' `buffer`).
    #[serde(default)]
    pub shared: Option<Bytes>,
    /// Dynamic threshold factor (default 1/8).
    #[serde(default)]
    pub alpha: Option<f64>,
    /// Reserve per ingress port and priority (default 4 KiB).
    #[serde(default)]
    pub reserve: Option<Bytes>,
}

impl MmuYaml {
    /// The checked settings, or what is wrong with them.
    pub fn resolve(&self) -> Result<crate::tm::MmuSpec, String> {
        let d = crate::tm::MmuSpec::default();
        let alpha = self.alpha.unwrap_or(d.alpha);
        if !(alpha > 0.0 && alpha.is_finite()) {
            return Err(format!("alpha: expected a number above 0, got {alpha}"));
        }
        if self.shared.is_some_and(|b| b.0 == 0) {
            return Err("shared: expected a size above 0".into());
        }
        Ok(crate::tm::MmuSpec {
            shared: self.shared.map(|b| b.0),
            alpha,
            reserve: self.reserve.map_or(d.reserve, |b| b.0),
        })
    }
}

/// PFC as written in YAML (`{ enabled: true, priorities: [3], xoff: 100KB, xon: 3KiB,
/// headroom: 20KB }`; every key optional), shared by the switch configuration and the lab's
/// topologies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcYaml {
    /// On (default) or off.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Lossless priorities (default [3]).
    #[serde(default)]
    pub priorities: Option<Vec<u8>>,
    /// Static XOFF threshold (default: dynamic).
    #[serde(default)]
    pub xoff: Option<Bytes>,
    /// XON offset below the XOFF threshold (default 3 KiB).
    #[serde(default)]
    pub xon: Option<Bytes>,
    /// Headroom per ingress port (default: from the link).
    #[serde(default)]
    pub headroom: Option<Bytes>,
    /// The PFC watchdog (default: on, 200 ms / 200 ms).
    #[serde(default)]
    pub watchdog: Option<WatchdogYaml>,
}

/// The PFC watchdog as written in YAML (`{ enabled: true, detect: 200ms, restore: 200ms }`;
/// every key optional).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchdogYaml {
    /// On (default) or off.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// How long a frame waits under an unbroken pause before the watchdog trips.
    #[serde(default)]
    pub detect: Option<Nanos>,
    /// How long after the last pause the priority is restored.
    #[serde(default)]
    pub restore: Option<Nanos>,
}

impl WatchdogYaml {
    /// The checked settings (`None` when disabled), or what is wrong with them.
    pub fn resolve(&self) -> Result<Option<crate::tm::PfcWatchdog>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let d = crate::tm::PfcWatchdog::default();
        let detect = self.detect.map_or(d.detect_ns, |t| t.0);
        if detect == 0 {
            return Err("watchdog: detect: expected a time above 0".into());
        }
        Ok(Some(crate::tm::PfcWatchdog {
            detect_ns: detect,
            restore_ns: self.restore.map_or(d.restore_ns, |t| t.0),
        }))
    }
}

impl PfcYaml {
    /// The checked settings (`None` when disabled), or what is wrong with them.
    pub fn resolve(&self) -> Result<Option<crate::tm::PfcSpec>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let d = crate::tm::PfcSpec::default();
        let priorities = match &self.priorities {
            None => d.priorities,
            Some(list) => {
                let mut mask = 0u8;
                for &p in list {
                    if usize::from(p) >= crate::tm::PRIORITIES {
                        return Err(format!("priorities: {p} is not a priority 0-7"));
                    }
                    mask |= 1 << p;
                }
                mask
            }
        };
        Ok(Some(crate::tm::PfcSpec {
            priorities,
            xoff: self.xoff.map(|b| b.0),
            xon_offset: self.xon.map_or(d.xon_offset, |b| b.0),
            headroom: self.headroom.map(|b| b.0),
            response_ns: d.response_ns,
            watchdog: match &self.watchdog {
                Some(w) => w.resolve()?,
                None => d.watchdog,
            },
        }))
    }
}

/// A switch's classes as written in YAML (`{ dscp: { 26: 3, 48: 6 }, scheduler: dwrr,
/// weights: [1, 1, 1, 4, 1, 1, 1, 1] }`; every key optional), shared by the switch
/// configuration and the lab's topologies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrioritiesYaml {
    /// DSCP → priority for the DSCPs given; the others keep DSCP / 8.
    #[serde(default)]
    pub dscp: Option<std::collections::BTreeMap<u8, u8>>,
    /// `strict` (default) or `dwrr`.
    #[serde(default)]
    pub scheduler: Option<SchedulerYaml>,
    /// DWRR weight of each priority, eight of them (default: all 1).
    #[serde(default)]
    pub weights: Option<Vec<u32>>,
}

/// How a port chooses between priorities, as written in YAML.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerYaml {
    /// Strict priority.
    Strict,
    /// Deficit weighted round robin.
    Dwrr,
}

impl PrioritiesYaml {
    /// The checked settings, or what is wrong with them.
    pub fn resolve(&self) -> Result<crate::tm::PrioritySpec, String> {
        let n = crate::tm::PRIORITIES;
        let mut map = crate::tm::PriorityMap::default();
        for (&dscp, &priority) in self.dscp.iter().flatten() {
            if dscp > 63 {
                return Err(format!("dscp: {dscp} is not a DSCP 0-63"));
            }
            if usize::from(priority) >= n {
                return Err(format!("dscp: {dscp} maps to {priority}, not a priority 0-7"));
            }
            map.set(dscp, priority);
        }
        let weights = match &self.weights {
            None => [1; crate::tm::PRIORITIES],
            Some(w) if w.len() != n || w.contains(&0) => {
                return Err(format!("weights: expected {n} weights of 1 or more, got {w:?}"));
            }
            Some(w) => std::array::from_fn(|p| w[p]),
        };
        let scheduler = match self.scheduler.unwrap_or(SchedulerYaml::Strict) {
            SchedulerYaml::Strict if self.weights.is_some() => {
                return Err("weights: only for `scheduler: dwrr`".into());
            }
            SchedulerYaml::Strict => crate::tm::Scheduler::Strict,
            SchedulerYaml::Dwrr => crate::tm::Scheduler::Dwrr { weights },
        };
        Ok(crate::tm::PrioritySpec { map, scheduler })
    }
}

/// serde's default for switches that are on unless turned off.
pub(super) fn yes() -> bool {
    true
}
