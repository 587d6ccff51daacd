//! An in-process link between two switch ports in the same process. Frames move as buffers
//! (no copy) and carry their exact arrival time at the far end, so multi-switch paths keep
//! virtual-time accuracy however late a worker wakes.

use std::sync::{Arc, OnceLock};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::frame::{FrameBuf, FramePool};
use crate::worker::Doorbell;

/// One end of a link: what is sent here is received at the other end.
#[derive(Debug, Clone)]
pub struct LinkEnd {
    tx: Sender<FrameBuf>,
    rx: Receiver<FrameBuf>,
    /// The doorbell of the worker that owns this end (set when it starts).
    own_bell: Arc<OnceLock<Doorbell>>,
    /// The doorbell of the worker owning the other end.
    peer_bell: Arc<OnceLock<Doorbell>>,
}

impl PartialEq for LinkEnd {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.own_bell, &other.own_bell)
    }
}

impl Eq for LinkEnd {}

/// Two connected ends; `capacity` frames may be in flight each way.
pub fn link_pair(capacity: usize) -> (LinkEnd, LinkEnd) {
    let (a_tx, b_rx) = crossbeam_channel::bounded(capacity);
    let (b_tx, a_rx) = crossbeam_channel::bounded(capacity);
    let (a_bell, b_bell) = (Arc::new(OnceLock::new()), Arc::new(OnceLock::new()));
    (
        LinkEnd {
            tx: a_tx,
            rx: a_rx,
            own_bell: a_bell.clone(),
            peer_bell: b_bell.clone(),
        },
        LinkEnd {
            tx: b_tx,
            rx: b_rx,
            own_bell: b_bell,
            peer_bell: a_bell,
        },
    )
}

impl LinkEnd {
    /// Registers the doorbell of the worker that owns this end.
    pub fn attach(&self, bell: Doorbell) {
        let _ = self.own_bell.set(bell);
    }

    /// Takes waiting frames into `bufs[..n]`; the buffers they replace go back to `pool`.
    pub fn recv_batch(&mut self, bufs: &mut [FrameBuf], pool: &FramePool) -> usize {
        let mut n = 0;
        while n < bufs.len() {
            match self.rx.try_recv() {
                Ok(mut f) => {
                    f.arrival_known = true;
                    pool.put(std::mem::replace(&mut bufs[n], f));
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }

    /// Moves the frames to the other end (their `arrival_ns` must already be the arrival time
    /// there) and wakes its worker. Frames the link had no room for stay in `frames`.
    pub fn send_batch(&mut self, frames: &mut Vec<FrameBuf>) {
        let mut sent = 0;
        let mut unsent = Vec::new();
        let mut queue = frames.drain(..);
        for f in queue.by_ref() {
            match self.tx.try_send(f) {
                Ok(()) => sent += 1,
                Err(TrySendError::Full(f) | TrySendError::Disconnected(f)) => {
                    unsent.push(f);
                    break;
                }
            }
        }
        unsent.extend(queue);
        frames.append(&mut unsent);
        if sent > 0
            && let Some(bell) = self.peer_bell.get()
        {
            bell.ring();
        }
    }
}
