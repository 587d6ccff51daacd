//! A program attached to a host's NIC: its process and memory, its doorbell and attention area,
//! the sockets its events go on, and the queues of each object it made, by doorbell index.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use intlab_nic_channel::command::Caps;
use intlab_nic_channel::queue::{AREA_BITS, Area, Queue};
use intlab_nic_channel::shared::SharedMapping;
use intlab_runtime::sys::pidfd::PidFd;
use intlab_runtime::sys::process_memory::ProcessMemory;

use crate::verbs::error::VerbsError;
use crate::verbs::memory::{Memory, MemoryFault};

/// A queue in memory shared with a program.
pub(crate) type SharedQueue = Queue<Arc<SharedMapping>>;

/// A program's memory, reached in place: the NIC's DMA. A region a NIC was given stays its
/// own until deregistered, pinned, whatever the program does to its mappings or however it
/// dies (the kernel unmaps a dying process's memory before it closes its device, and so
/// before its QPs go): bytes that find no mapping any more land nowhere, and bytes read from
/// none are zeros, without an error, as DMA to and from pinned pages that no one maps.
pub(crate) struct ProgramMemory(pub(crate) Arc<ProcessMemory>);

impl Memory for ProgramMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        if let Err(e) = self.0.read(addr, buf) {
            tracing::debug!("{} bytes at {addr:#x} of a program are mapped no more: {e}", buf.len());
            buf.fill(0);
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        if let Err(e) = self.0.write(addr, data) {
            tracing::debug!("{} bytes at {addr:#x} of a program are mapped no more: {e}", data.len());
        }
        Ok(())
    }
}

/// The queues of a QP.
pub(crate) struct QpQueues {
    pub(crate) qpn: u32,
    pub(crate) send: SharedQueue,
    pub(crate) recv: Option<SharedQueue>,
    /// The program's `struct ibv_qp *`.
    pub(crate) user_handle: u64,
    /// The capacities the program asked for (what a query answers).
    pub(crate) caps: Caps,
}

/// The queue of a completion queue.
pub(crate) struct CqQueue {
    pub(crate) handle: u32,
    pub(crate) queue: SharedQueue,
    /// The program's `struct ibv_cq *`, sent on its channel with each event.
    pub(crate) user_handle: u64,
    /// Its completion channel: the program's descriptor number.
    pub(crate) channel: Option<RawFd>,
    /// Armed: the next completion (a solicited one when true) raises an event.
    pub(crate) armed: Option<bool>,
    /// The arm word last taken.
    pub(crate) last_arm: u64,
}

/// The queue of a shared receive queue.
pub(crate) struct SrqQueue {
    pub(crate) handle: u32,
    pub(crate) queue: SharedQueue,
    /// The program's `struct ibv_srq *`.
    pub(crate) user_handle: u64,
}

/// An object with queues, at its doorbell index.
pub(crate) enum Object {
    Qp(QpQueues),
    Cq(CqQueue),
    Srq(SrqQueue),
}

/// A program attached to the NIC.
pub(crate) struct ProgramContext {
    /// Its context in the verbs engine.
    pub(crate) engine: usize,
    pub(crate) pidfd: Arc<PidFd>,
    pub(crate) memory: Arc<ProcessMemory>,
    doorbell: OwnedFd,
    pub(crate) area: Area<Arc<SharedMapping>>,
    async_socket: OwnedFd,
    /// Spare channels not handed out: the program's descriptor and the NIC's end.
    pub(crate) spares: Vec<(RawFd, OwnedFd)>,
    /// Spares handed out as completion channels, by the program's descriptor.
    pub(crate) channels: HashMap<RawFd, OwnedFd>,
    objects: Vec<Option<Object>>,
    free: Vec<u32>,
    pub(crate) qps: HashMap<u32, u32>,
    pub(crate) cqs: HashMap<u32, u32>,
    pub(crate) srqs: HashMap<u32, u32>,
    /// Objects whose queues still hold requests the engine had no room for.
    pub(crate) backlog: Vec<u32>,
}

/// Spare channels a context may hold (a bound against a program that offers them in a loop).
const MAX_SPARES: usize = 64;

impl ProgramContext {
    /// A context of engine context `engine` over what the program's hello gave.
    pub(crate) fn new(
        engine: usize,
        pidfd: Arc<PidFd>,
        memory: Arc<ProcessMemory>,
        doorbell: OwnedFd,
        area: Area<Arc<SharedMapping>>,
        async_socket: OwnedFd,
    ) -> ProgramContext {
        ProgramContext {
            engine,
            pidfd,
            memory,
            doorbell,
            area,
            async_socket,
            spares: Vec::new(),
            channels: HashMap::new(),
            objects: Vec::new(),
            free: Vec::new(),
            qps: HashMap::new(),
            cqs: HashMap::new(),
            srqs: HashMap::new(),
            backlog: Vec::new(),
        }
    }

    /// The doorbell's descriptor.
    pub(crate) fn doorbell_fd(&self) -> RawFd {
        self.doorbell.as_raw_fd()
    }

    /// The pidfd's descriptor.
    pub(crate) fn pidfd_fd(&self) -> RawFd {
        self.pidfd.fd()
    }

    /// Clears the doorbell (an eventfd the program made non-blocking).
    pub(crate) fn take_doorbell(&self) {
        let mut v = [0u8; 8];
        // Nothing to read is as good as having read it: the flag in the area is what counts.
        let _clear = intlab_runtime::sys::socket::read_now(self.doorbell.as_raw_fd(), &mut v);
    }

    /// Adds spare channels, as many as the bound allows.
    pub(crate) fn add_spares(&mut self, spares: impl IntoIterator<Item = (RawFd, OwnedFd)>) -> Result<(), VerbsError> {
        for s in spares {
            if self.spares.len() + self.channels.len() >= MAX_SPARES {
                return Err(VerbsError::Full(format!("{MAX_SPARES} completion channels")));
            }
            self.spares.push(s);
        }
        Ok(())
    }

    /// Stores `object` at a free doorbell index.
    pub(crate) fn insert(&mut self, object: Object) -> Result<u32, VerbsError> {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                if self.objects.len() >= AREA_BITS {
                    return Err(VerbsError::Full(format!("{AREA_BITS} queues")));
                }
                self.objects.push(None);
                (self.objects.len() - 1) as u32
            }
        };
        match &object {
            Object::Qp(q) => self.qps.insert(q.qpn, i),
            Object::Cq(c) => self.cqs.insert(c.handle, i),
            Object::Srq(s) => self.srqs.insert(s.handle, i),
        };
        self.objects[i as usize] = Some(object);
        Ok(i)
    }

    /// Removes the object at doorbell index `i`.
    pub(crate) fn remove(&mut self, i: u32) -> Option<Object> {
        let o = self.objects.get_mut(i as usize)?.take()?;
        match &o {
            Object::Qp(q) => self.qps.remove(&q.qpn),
            Object::Cq(c) => self.cqs.remove(&c.handle),
            Object::Srq(s) => self.srqs.remove(&s.handle),
        };
        self.free.push(i);
        Some(o)
    }

    /// The object at doorbell index `i`.
    pub(crate) fn object(&mut self, i: u32) -> Option<&mut Object> {
        self.objects.get_mut(i as usize)?.as_mut()
    }

    /// Sends a completion channel event for the CQ `user_handle` on channel `channel` (the
    /// program's descriptor); false when the channel is gone or full.
    pub(crate) fn send_completion_event(&self, channel: RawFd, user_handle: u64) -> bool {
        match self.channels.get(&channel) {
            Some(s) => send_record(s, &user_handle.to_ne_bytes()),
            None => false,
        }
    }

    /// Sends an asynchronous event: `element` (the program's object pointer) and its type.
    pub(crate) fn send_async_event(&self, element: u64, event_type: u32) -> bool {
        let mut rec = [0u8; 16];
        rec[..8].copy_from_slice(&element.to_ne_bytes());
        rec[8..12].copy_from_slice(&event_type.to_ne_bytes());
        send_record(&self.async_socket, &rec)
    }
}

/// Sends one record on a sequenced-packet socket without waiting; false when it was not sent
/// (the program closed its end, or does not read).
fn send_record(s: &OwnedFd, rec: &[u8]) -> bool {
    intlab_runtime::sys::socket::send_record(s.as_raw_fd(), rec).is_ok()
}
