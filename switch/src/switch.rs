//! A running switch: opens the ports, starts the workers, publishes counters, stops cleanly.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::capture::PortCapture;
use crate::clock::Clock;
use crate::config::{PortIo, SwitchSpec};
use crate::counters::{PortCounters, PortSnapshot, SwitchSnapshot};
use crate::egress::EgressPort;
use crate::frame::{FramePool, INT_TAILROOM};
use crate::pipeline::Pipeline;
use crate::port::Port;
use crate::tm::EgressQueue;
use crate::worker::{Doorbell, Handoff, PortSlot, Shared, Worker};

/// Frames that may wait in one worker's hand-off channel.
const HANDOFF_CAPACITY: usize = 8192;

/// Why a switch could not start.
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
    /// A thread or eventfd could not be created.
    #[error("switch {switch}: {cause}")]
    System {
        /// Switch name.
        switch: String,
        /// What the system said.
        cause: std::io::Error,
    },
}

/// A switch whose workers are running. Dropping it stops it.
pub struct Switch {
    spec: SwitchSpec,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    bells: Vec<Doorbell>,
    published: Arc<Mutex<Vec<PortSnapshot>>>,
    publish_request: Arc<AtomicU64>,
    publish_acks: Arc<AtomicU64>,
    reporter: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Switch({})", self.spec.name)
    }
}

/// The buffer size that holds any frame of `spec`'s ports plus INT growth.
pub fn frame_capacity(spec: &SwitchSpec) -> usize {
    let mtu = spec.ports.iter().map(|p| usize::from(p.mtu)).max().unwrap_or(1500);
    (mtu + 14 + 4 + INT_TAILROOM).next_multiple_of(64)
}

impl Switch {
    /// Opens every port and starts the workers, with a pool of its own.
    pub fn start(spec: SwitchSpec) -> Result<Switch, StartError> {
        let pool = FramePool::new(frame_capacity(&spec), 1 << 16);
        Self::start_with_pool(spec, pool)
    }

    /// Like [`Switch::start`], sharing `pool` (switches joined by in-process links should share
    /// one, since buffers cross between them).
    pub fn start_with_pool(spec: SwitchSpec, pool: FramePool) -> Result<Switch, StartError> {
        let sys = |cause| StartError::System {
            switch: spec.name.clone(),
            cause,
        };
        // A counters file that cannot be written fails now, not silently once a second.
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
        let mut slots = Vec::new();
        for (i, p) in spec.ports.iter().enumerate() {
            let port = Port::open(&p.io).map_err(|cause| StartError::Port {
                switch: spec.name.clone(),
                port: p.name.clone(),
                cause,
            })?;
            let capture = match &spec.capture {
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
                    Some(
                        PortCapture::create(&path, &p.name, &desc, p.rate.bps()).map_err(|cause| {
                            StartError::Capture {
                                switch: spec.name.clone(),
                                path,
                                cause,
                            }
                        })?,
                    )
                }
                _ => None,
            };
            slots.push(PortSlot {
                index: i,
                name: p.name.clone(),
                port,
                queue: EgressQueue::new(p.rate, p.delay, p.buffer.0),
                egress: EgressPort::new(i, spec.node_id, p),
                counters: PortCounters::with_queue_trace(spec.queue_trace_every.0),
                capture,
                link_rate: p.rate,
                ingress_free_ps: 0,
                link_delay_ns: p.delay.0,
            });
        }
        let n_workers = spec.workers.clamp(1, spec.ports.len().max(1));
        let owner: Vec<usize> = (0..spec.ports.len()).map(|i| i % n_workers).collect();
        let mut inboxes = Vec::new();
        let mut receivers = Vec::new();
        let mut bells = Vec::new();
        for _ in 0..n_workers {
            let (tx, rx) = crossbeam_channel::bounded::<Handoff>(HANDOFF_CAPACITY);
            let bell = Doorbell::new().map_err(sys)?;
            inboxes.push((tx, bell.clone()));
            receivers.push(rx);
            bells.push(bell);
        }
        let published = Arc::new(Mutex::new(
            spec.ports
                .iter()
                .map(|p| PortSnapshot {
                    name: p.name.clone(),
                    ..PortSnapshot::default()
                })
                .collect(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let publish_request = Arc::new(AtomicU64::new(0));
        let publish_acks = Arc::new(AtomicU64::new(0));
        let shared = Shared {
            pipeline: Arc::new(Pipeline::new(&spec)),
            pool,
            owner: Arc::new(owner.clone()),
            inboxes: Arc::new(inboxes),
            stop: stop.clone(),
            published: published.clone(),
            publish_request: publish_request.clone(),
            publish_acks: publish_acks.clone(),
            capture_drops: spec.capture.as_ref().is_some_and(|c| c.drops),
            idle_poll_ns: spec.idle_poll.0.max(1_000),
        };
        let mut per_worker: Vec<Vec<PortSlot>> = (0..n_workers).map(|_| Vec::new()).collect();
        for slot in slots {
            per_worker[owner[slot.index]].push(slot);
        }
        let mut workers = Vec::new();
        for (id, (slots, rx)) in per_worker.into_iter().zip(receivers).enumerate() {
            let worker = Worker::new(id, slots, rx, bells[id].clone(), shared.clone(), spec.seed);
            let handle = std::thread::Builder::new()
                .name(format!("{}-w{id}", spec.name))
                .spawn(move || worker.run())
                .map_err(sys)?;
            workers.push(handle);
        }
        let reporter = match &spec.counters_file {
            Some(path) => {
                let (path, stop, published, name, node_id) = (
                    path.clone(),
                    stop.clone(),
                    published.clone(),
                    spec.name.clone(),
                    spec.node_id,
                );
                Some(
                    std::thread::Builder::new()
                        .name(format!("{}-counters", spec.name))
                        .spawn(move || {
                            while !stop.load(Ordering::Relaxed) {
                                std::thread::sleep(Duration::from_millis(200));
                                let snap = snapshot(&published, &name, node_id);
                                if let Err(e) = snap.write(&path) {
                                    tracing::warn!("counters file {}: {e}", path.display());
                                }
                            }
                        })
                        .map_err(sys)?,
                )
            }
            None => None,
        };
        tracing::info!(switch = %spec.name, ports = spec.ports.len(), workers = n_workers, "switch started");
        Ok(Switch {
            spec,
            stop,
            workers,
            bells,
            published,
            publish_request,
            publish_acks,
            reporter,
        })
    }

    /// The configuration it runs.
    pub fn spec(&self) -> &SwitchSpec {
        &self.spec
    }

    /// The counters as last published by the workers (at most about a second old).
    pub fn counters(&self) -> SwitchSnapshot {
        snapshot(&self.published, &self.spec.name, self.spec.node_id)
    }

    /// The counters as they are now: every worker publishes on request. None when a worker
    /// did not answer within `limit`.
    pub fn counters_now(&self, limit: Duration) -> Option<SwitchSnapshot> {
        let before = self.publish_acks.load(Ordering::Acquire);
        self.publish_request.fetch_add(1, Ordering::AcqRel);
        for b in &self.bells {
            b.ring();
        }
        let started = std::time::Instant::now();
        while self.publish_acks.load(Ordering::Acquire) < before + self.workers.len() as u64 {
            if started.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Some(self.counters())
    }

    /// Stops the workers, writes the counters file, and returns the final counters.
    pub fn stop(mut self) -> SwitchSnapshot {
        self.shutdown()
    }

    fn shutdown(&mut self) -> SwitchSnapshot {
        self.stop.store(true, Ordering::Relaxed);
        for b in &self.bells {
            b.ring();
        }
        let mut failed = 0;
        for w in self.workers.drain(..) {
            if w.join().is_err() {
                failed += 1;
            }
        }
        if let Some(r) = self.reporter.take() {
            let _ = r.join();
        }
        let snap = SwitchSnapshot {
            failed_workers: failed,
            ..self.counters()
        };
        if let Some(path) = &self.spec.counters_file
            && let Err(e) = snap.write(path)
        {
            tracing::warn!("counters file {}: {e}", path.display());
        }
        snap
    }

    /// Names of the TAP devices this switch created.
    pub fn tap_devices(&self) -> Vec<&str> {
        self.spec
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
        if !self.workers.is_empty() {
            self.shutdown();
        }
    }
}

fn snapshot(published: &Mutex<Vec<PortSnapshot>>, name: &str, node_id: u32) -> SwitchSnapshot {
    let ports = published.lock().map(|p| p.clone()).unwrap_or_default();
    SwitchSnapshot {
        switch: name.to_owned(),
        node_id,
        time_ns: Clock::get().now_ns(),
        ports,
        failed_workers: 0,
    }
}
