//! One switch on a runtime of its own, for `intlab switch` and for tests that wire their own
//! namespaces: its ports spread over `workers` workers, counters written to a file if asked.

use std::time::Duration;

use intlab_runtime::{Runtime, RuntimeConfig};

use crate::config::{PortIo, SwitchSpec};
use crate::counters::SwitchSnapshot;
use crate::fabric::{Fabric, StartError, frame_capacity};
use crate::frame::FramePool;

/// A switch whose workers are running. Dropping it stops it.
pub struct Switch {
    runtime: Option<Runtime>,
    fabric: Fabric,
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Switch({})", self.spec().name)
    }
}

impl Switch {
    /// Opens every port and starts `spec.workers` workers (at most one per port), port `i` on
    /// worker `i mod workers`.
    pub fn start(spec: SwitchSpec) -> Result<Switch, StartError> {
        let workers = spec.workers.clamp(1, spec.ports.len().max(1));
        let cfg = RuntimeConfig {
            workers,
            poll: spec.poll,
            name: spec.name.clone(),
        };
        let runtime = Runtime::start(&cfg).map_err(|cause| StartError::Runtime { cause })?;
        let pool = FramePool::new(frame_capacity(&spec), 1 << 16);
        let fabric = Fabric::start(&runtime, vec![spec], pool, &|_, p| p)?;
        Ok(Switch {
            runtime: Some(runtime),
            fabric,
        })
    }

    /// The configuration it runs.
    pub fn spec(&self) -> &SwitchSpec {
        &self.fabric.specs()[0]
    }

    /// The datapath of the P4 program it runs, if any: its control plane.
    pub fn p4_datapath(&self) -> Option<std::sync::Arc<intlab_p4::Datapath>> {
        self.fabric.p4_datapaths().pop().map(|(_, dp)| dp)
    }

    /// The controller's end of its CPU port, if its P4 program has one (`p4.cpu_port`).
    pub fn cpu_port(&self) -> Option<crate::port::CpuPortEnd> {
        self.fabric.cpu_ports().pop()
    }

    /// The counters as last published by the workers (at most about a second old).
    pub fn counters(&self) -> SwitchSnapshot {
        self.fabric.counters(0)
    }

    /// The counters as they are now (None when a worker did not answer within `limit`).
    pub fn counters_now(&self, limit: Duration) -> Option<SwitchSnapshot> {
        self.fabric.counters_now(limit).and_then(|mut v| v.pop())
    }

    /// Stops the workers and returns the final counters (the counters file, if any, gets them
    /// as the switch is dropped).
    pub fn stop(mut self) -> SwitchSnapshot {
        self.shutdown();
        self.counters()
    }

    fn shutdown(&mut self) {
        if let Some(rt) = self.runtime.take()
            && let Err(failed) = rt.stop()
        {
            tracing::error!("switch workers {failed:?} panicked");
            self.fabric.note_failed_workers(failed.len());
        }
    }

    /// Names of the TAP devices this switch created.
    pub fn tap_devices(&self) -> Vec<&str> {
        self.spec()
            .ports
            .iter()
            .filter_map(|p| match &p.io {
                PortIo::Tap { device } => Some(device.as_str()),
                _ => None,
            })
            .collect()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.shutdown();
    }
}
