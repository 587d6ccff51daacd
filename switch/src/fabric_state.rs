//! What every shard of a fabric shares: the switches' pipelines and shared buffers, which
//! worker owns each port, the frame pool, the hand-off channels between workers, and the
//! counters the shards publish.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_channel::Sender;
use intlab_runtime::Waker;
use intlab_runtime::clock::Clock;

use crate::counters::{PortSnapshot, SwitchSnapshot};
use crate::frame::{FrameBuf, FramePool};
use crate::link_change::LinkChange;
use crate::pipeline::{P4Pipeline, Pipeline};
use crate::tm::Mmu;

/// A port's number across the fabric.
pub type GlobalPort = usize;

/// Frames that may wait in one shard's hand-off channel.
pub(crate) const HANDOFF_CAPACITY: usize = 16384;

/// A frame for a port of another worker.
#[derive(Debug)]
pub enum Handoff {
    /// To queue on egress port `port`.
    Egress {
        /// The port.
        port: GlobalPort,
        /// The frame.
        frame: FrameBuf,
    },
    /// Arriving on port `port` from the far end of its in-process link.
    Arrive {
        /// The port.
        port: GlobalPort,
        /// The frame, its arrival time set.
        frame: FrameBuf,
    },
}

impl Handoff {
    /// The frame it carries.
    pub fn into_frame(self) -> FrameBuf {
        match self {
            Handoff::Egress { frame, .. } | Handoff::Arrive { frame, .. } => frame,
        }
    }
}

/// What every shard reads of one switch.
pub(crate) struct SwitchShared {
    pub(crate) name: String,
    pub(crate) node_id: u32,
    pub(crate) pipeline: Pipeline,
    /// The P4 program that replaces `pipeline`, if the switch runs one.
    pub(crate) p4: Option<P4Pipeline>,
    /// The shared buffer, when the switch has one (its shards count frames in and out of it
    /// without a lock).
    pub(crate) mmu: Option<Mmu>,
    /// PFC is on: its shards refresh the pauses it sends.
    pub(crate) pfc: bool,
    pub(crate) published: Mutex<Vec<PortSnapshot>>,
}

impl SwitchShared {
    /// Its shared buffer; `None` when its ports have buffers of their own.
    pub(crate) fn mmu(&self) -> Option<&Mmu> {
        self.mmu.as_ref()
    }
}

/// What the shards of a fabric share.
pub(crate) struct FabricShared {
    pub(crate) switches: Vec<SwitchShared>,
    /// Switch s's first global port.
    pub(crate) base: Vec<GlobalPort>,
    /// Global port → the worker that owns it.
    pub(crate) owner: Vec<usize>,
    /// Global port → the far end of its in-process link, for link ports.
    pub(crate) peer: Vec<Option<GlobalPort>>,
    pub(crate) pool: FramePool,
    /// Per worker: its shard's hand-off channel and waker (workers without ports have none).
    pub(crate) inboxes: Vec<(Sender<Handoff>, Waker)>,
    pub(crate) capture_drops: bool,
    /// Raised by whoever wants counters now rather than at the next regular publication.
    pub(crate) publish_request: AtomicU64,
    /// Publications made on request, summed over shards.
    pub(crate) publish_acks: AtomicU64,
    /// Frames due before this lab time (ns) do not count in the release lateness.
    pub(crate) measure_from: AtomicU64,
    /// Workers that panicked, as the runtime reported on stopping.
    pub(crate) failed_workers: AtomicUsize,
    /// Runs of a shard on another worker's thread (a worker idle long enough has its shard run by another).
    pub(crate) borrowed_runs: AtomicU64,
    /// Per worker: link changes for its ports (port, lab time to make it at), not yet taken.
    pub(crate) link_changes: Vec<Mutex<Vec<(GlobalPort, u64, LinkChange)>>>,
    /// Link changes posted so far, to any worker (a shard looks at its own list only when
    /// this moved).
    pub(crate) link_changes_posted: AtomicU64,
    pub(crate) shards: usize,
}

impl FabricShared {
    pub(crate) fn ports(&self) -> usize {
        self.owner.len()
    }

    pub(crate) fn workers(&self) -> usize {
        self.inboxes.len()
    }

    pub(crate) fn switch_ports(&self, s: usize) -> usize {
        let end = self.base.get(s + 1).copied().unwrap_or(self.owner.len());
        end - self.base[s]
    }

    /// Switch `s`'s counters as its shards last published them.
    pub(crate) fn snapshot(&self, s: usize) -> SwitchSnapshot {
        let sw = &self.switches[s];
        SwitchSnapshot {
            switch: sw.name.clone(),
            node_id: sw.node_id,
            time_ns: Clock::get().now_ns(),
            // A worker that panicked while publishing leaves the lock poisoned, not the counters
            // wrong: each port's snapshot is written whole. `failed_workers` says it happened.
            ports: sw
                .published
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            failed_workers: self.failed_workers.load(Ordering::Relaxed),
            borrowed_runs: self.borrowed_runs.load(Ordering::Relaxed),
        }
    }
}
