//! The NIC's verbs engine: what a RoCE NIC does for the programs (and the lab's own flows) that
//! own its queue pairs. Modelled on SoftRoCE (Linux `drivers/infiniband/sw/rxe`): the requester
//! that turns send requests into packets (`requester.rs`), the completer that turns the answers
//! into completions (`completer.rs`), the responder that carries out what arrives
//! (`responder.rs`), and each object in a file of its own (`qp.rs`, `mr.rs`, `cq.rs`,
//! `srq.rs`). It is sans-IO: packets in, packets, memory accesses and completions out; the
//! memory of a program is reached through the [`memory::Memory`] its host gives it, so the
//! deterministic bed runs the same engine on memory of its own.
//!
//! [`Verbs`] holds the objects QPs work against: contexts (one per program, one for the lab's
//! own flows), protection domains, memory regions, completion queues and shared receive queues.

mod completer;
pub mod cq;
pub mod error;
pub mod memory;
pub mod mr;
pub mod qp;
pub mod srq;
pub mod table;
pub mod wr;

pub use qp::requester::{SenderStats, SenderTiming};
pub use qp::responder::{Arrival, ReceiverPolicy, ReceiverStats, Replies, Reply};

use cq::CompletionQueue;
use error::VerbsError;
use memory::{Backing, Memory, MemoryFault};
use mr::{Access, KeyFault, MemoryRegion, MrTable};
use srq::SharedReceiveQueue;
use table::Table;
use wr::{RecvWr, SgeList, WcStatus, WorkCompletion};

/// Something a NIC tells the owner of a context without being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicEvent {
    /// Completion queue `cq`, which was armed, has a completion.
    Completion {
        /// The owner.
        context: usize,
        /// The queue.
        cq: u32,
    },
    /// An asynchronous event (`ibv_get_async_event`).
    Async {
        /// The owner.
        context: usize,
        /// What happened.
        event: AsyncEvent,
    },
}

/// An asynchronous event, with the number `enum ibv_event_type` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A completion queue overran (IBV_EVENT_CQ_ERR).
    CqError(u32),
    /// A QP went to the error state on its own (IBV_EVENT_QP_FATAL).
    QpFatal(u32),
    /// The far end refused a request (IBV_EVENT_QP_REQ_ERR).
    QpRequestError(u32),
    /// The far end refused access (IBV_EVENT_QP_ACCESS_ERR).
    QpAccessError(u32),
    /// A QP's send queue drained in SQD (IBV_EVENT_SQ_DRAINED).
    SqDrained(u32),
    /// A shared receive queue fell below its limit (IBV_EVENT_SRQ_LIMIT_REACHED).
    SrqLimit(u32),
    /// A QP on an SRQ in error will take no more receive requests (IBV_EVENT_QP_LAST_WQE_REACHED).
    QpLastWqe(u32),
}

impl AsyncEvent {
    /// `enum ibv_event_type` of the event, and the handle or number it is about.
    pub fn code(self) -> (u32, u32) {
        match self {
            AsyncEvent::CqError(h) => (0, h),
            AsyncEvent::QpFatal(q) => (1, q),
            AsyncEvent::QpRequestError(q) => (2, q),
            AsyncEvent::QpAccessError(q) => (3, q),
            AsyncEvent::SqDrained(q) => (5, q),
            AsyncEvent::SrqLimit(h) => (15, h),
            AsyncEvent::QpLastWqe(q) => (16, q),
        }
    }
}

struct Context {
    /// The program's memory (None: the lab's own, whose regions are patterns).
    memory: Option<Box<dyn Memory>>,
}

#[derive(Debug, Clone, Copy)]
struct Pd {
    context: usize,
}

/// How many objects of each kind some contexts hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectCounts {
    /// Contexts (programs attached).
    pub contexts: usize,
    /// Protection domains.
    pub pds: usize,
    /// Memory regions.
    pub mrs: usize,
    /// Completion queues.
    pub cqs: usize,
    /// Shared receive queues.
    pub srqs: usize,
}

/// Every object of a NIC that QPs work against.
#[derive(Default)]
pub struct Verbs {
    contexts: Table<Context>,
    pds: Table<Pd>,
    /// Memory regions.
    pub mrs: MrTable,
    cqs: Table<CompletionQueue>,
    srqs: Table<SharedReceiveQueue>,
    events: Vec<NicEvent>,
    /// Completion queues that got completions since last asked: (context, handle).
    touched: Vec<(usize, u32)>,
}

impl std::fmt::Debug for Verbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Verbs({} contexts, {} MRs, {} CQs)",
            self.contexts.len(),
            self.mrs.len(),
            self.cqs.len()
        )
    }
}

/// CQs, SRQs and PDs a context may hold at most: bounds against a program that creates
/// objects in a loop (the device's `max_cq`, `max_srq`, `max_pd`).
pub const MAX_OBJECTS: usize = 1 << 16;

impl Verbs {
    /// A new context whose memory is `memory` (None: the lab's own, for pattern regions).
    pub fn create_context(&mut self, memory: Option<Box<dyn Memory>>) -> usize {
        self.contexts.insert(Context { memory }) as usize
    }

    /// Removes a context and every PD, MR, CQ and SRQ it created (its QPs are the host's to
    /// remove first).
    pub fn destroy_context(&mut self, context: usize) {
        self.mrs.remove_context(context);
        for h in self.cqs.handles_where(|c| c.context == context) {
            self.cqs.remove(h);
        }
        for h in self.srqs.handles_where(|s| s.context == context) {
            self.srqs.remove(h);
        }
        for h in self.pds.handles_where(|p| p.context == context) {
            self.pds.remove(h);
        }
        self.events.retain(|e| match e {
            NicEvent::Completion { context: c, .. } | NicEvent::Async { context: c, .. } => *c != context,
        });
        self.touched.retain(|(c, _)| *c != context);
        self.contexts.remove(context as u32);
    }

    /// True when context `context` exists.
    pub fn has_context(&self, context: usize) -> bool {
        self.contexts.get(context as u32).is_some()
    }

    /// A protection domain for `context`.
    pub fn alloc_pd(&mut self, context: usize) -> Result<u32, VerbsError> {
        if self.pds.len() >= MAX_OBJECTS {
            return Err(VerbsError::Full("protection domains".into()));
        }
        Ok(self.pds.insert(Pd { context }))
    }

    /// Checks that `pd` is `context`'s.
    pub fn pd(&self, context: usize, pd: u32) -> Result<(), VerbsError> {
        match self.pds.get(pd) {
            Some(p) if p.context == context => Ok(()),
            _ => Err(VerbsError::NoObject { kind: "PD", handle: pd }),
        }
    }

    /// Frees `pd` (refused while a region uses it; the caller checks its QPs and SRQs).
    pub fn dealloc_pd(&mut self, context: usize, pd: u32) -> Result<(), VerbsError> {
        self.pd(context, pd)?;
        if self.mrs.uses_pd(pd) || self.srqs.iter().any(|(_, s)| s.pd == pd) {
            return Err(VerbsError::Busy("the PD still has memory regions or SRQs".into()));
        }
        self.pds.remove(pd);
        Ok(())
    }

    /// Registers `len` bytes at `addr` of `context`'s memory in `pd` with `access`; returns the
    /// key.
    pub fn reg_mr(&mut self, context: usize, pd: u32, addr: u64, len: u64, access: u32) -> Result<u32, VerbsError> {
        self.pd(context, pd)?;
        if access & !Access::SUPPORTED != 0 {
            return Err(VerbsError::NotSupported(format!(
                "access flags {:#x}",
                access & !Access::SUPPORTED
            )));
        }
        // Remote write and atomic need local write, as the verbs require.
        if access & (Access::REMOTE_WRITE | Access::REMOTE_ATOMIC) != 0 && access & Access::LOCAL_WRITE == 0 {
            return Err(VerbsError::invalid("remote write or atomic access needs local write"));
        }
        if addr.checked_add(len).is_none() {
            return Err(VerbsError::invalid("the region wraps around the address space"));
        }
        if self.mrs.len() >= MAX_OBJECTS * 4 {
            return Err(VerbsError::Full("memory regions".into()));
        }
        Ok(self.mrs.register(MemoryRegion {
            context,
            pd,
            addr,
            len,
            access: Access(access),
            key: 0,
            backing: Backing::Context(context),
        }))
    }

    /// Deregisters the region of `key`.
    pub fn dereg_mr(&mut self, context: usize, key: u32) -> Result<(), VerbsError> {
        match self.mrs.get(key) {
            Some(mr) if mr.context == context => {
                self.mrs.deregister(key);
                Ok(())
            }
            _ => Err(VerbsError::NoObject {
                kind: "MR",
                handle: key,
            }),
        }
    }

    /// A completion queue of `capacity` entries for `context`.
    pub fn create_cq(&mut self, context: usize, capacity: usize) -> Result<u32, VerbsError> {
        if self.cqs.len() >= MAX_OBJECTS {
            return Err(VerbsError::Full("completion queues".into()));
        }
        Ok(self.cqs.insert(CompletionQueue::new(context, capacity)))
    }

    /// Completion queue `cq` of `context`.
    pub fn cq_mut(&mut self, context: usize, cq: u32) -> Result<&mut CompletionQueue, VerbsError> {
        match self.cqs.get_mut(cq) {
            Some(c) if c.context == context => Ok(c),
            _ => Err(VerbsError::NoObject { kind: "CQ", handle: cq }),
        }
    }

    /// Destroys `cq` (the caller checks no QP uses it).
    pub fn destroy_cq(&mut self, context: usize, cq: u32) -> Result<(), VerbsError> {
        self.cq_mut(context, cq)?;
        self.cqs.remove(cq);
        self.events
            .retain(|e| !matches!(e, NicEvent::Completion { context: c, cq: q } if *c == context && *q == cq));
        self.touched.retain(|&(c, q)| !(c == context && q == cq));
        Ok(())
    }

    /// A shared receive queue for `context` in `pd`.
    pub fn create_srq(&mut self, context: usize, pd: u32, max_wr: usize, max_sge: usize) -> Result<u32, VerbsError> {
        self.pd(context, pd)?;
        if self.srqs.len() >= MAX_OBJECTS {
            return Err(VerbsError::Full("shared receive queues".into()));
        }
        Ok(self.srqs.insert(SharedReceiveQueue::new(context, pd, max_wr, max_sge)))
    }

    /// Shared receive queue `srq` of `context`.
    pub fn srq_mut(&mut self, context: usize, srq: u32) -> Result<&mut SharedReceiveQueue, VerbsError> {
        match self.srqs.get_mut(srq) {
            Some(s) if s.context == context => Ok(s),
            _ => Err(VerbsError::NoObject {
                kind: "SRQ",
                handle: srq,
            }),
        }
    }

    /// Destroys `srq` (the caller checks no QP uses it).
    pub fn destroy_srq(&mut self, context: usize, srq: u32) -> Result<(), VerbsError> {
        self.srq_mut(context, srq)?;
        self.srqs.remove(srq);
        Ok(())
    }

    /// Takes the oldest request of shared receive queue `srq` (raising its limit event when
    /// that crosses it).
    pub(crate) fn take_srq(&mut self, srq: u32) -> Option<RecvWr> {
        let s = self.srqs.get_mut(srq)?;
        let context = s.context;
        let (wr, crossed) = s.take()?;
        if crossed {
            self.events.push(NicEvent::Async {
                context,
                event: AsyncEvent::SrqLimit(srq),
            });
        }
        Some(wr)
    }

    /// Adds `wc` to completion queue `cq` (from a packet with the solicited bit when
    /// `solicited`); an armed queue raises its event, a full one its error.
    pub(crate) fn complete(&mut self, cq: u32, wc: WorkCompletion, solicited: bool) {
        let Some(q) = self.cqs.get_mut(cq) else {
            return;
        };
        let context = q.context;
        let overruns = q.overruns;
        if !q.touched {
            q.touched = true;
            self.touched.push((context, cq));
        }
        if q.push(wc, solicited) {
            self.events.push(NicEvent::Completion { context, cq });
        } else if q.overruns > overruns && overruns == 0 {
            self.events.push(NicEvent::Async {
                context,
                event: AsyncEvent::CqError(cq),
            });
        }
    }

    /// Raises an asynchronous event for `context`.
    pub(crate) fn raise(&mut self, context: usize, event: AsyncEvent) {
        self.events.push(NicEvent::Async { context, event });
    }

    /// The events raised since last asked.
    pub fn take_events(&mut self) -> Vec<NicEvent> {
        std::mem::take(&mut self.events)
    }

    /// The completion queues that got completions since last asked, as (context, handle);
    /// `out` is cleared first.
    pub fn take_touched(&mut self, out: &mut Vec<(usize, u32)>) {
        out.clear();
        std::mem::swap(out, &mut self.touched);
        for &(_, cq) in out.iter() {
            if let Some(q) = self.cqs.get_mut(cq) {
                q.touched = false;
            }
        }
    }

    /// Marks completion queue `cq` as having completions to move (some were left behind).
    pub fn touch(&mut self, context: usize, cq: u32) {
        if let Some(q) = self.cqs.get_mut(cq)
            && !q.touched
            && q.context == context
        {
            q.touched = true;
            self.touched.push((context, cq));
        }
    }

    /// The objects of the contexts `f` accepts.
    pub fn count_where(&self, f: impl Fn(usize) -> bool) -> ObjectCounts {
        ObjectCounts {
            contexts: self.contexts.iter().filter(|(h, _)| f(*h as usize)).count(),
            pds: self.pds.iter().filter(|(_, p)| f(p.context)).count(),
            mrs: self.mrs.count_where(&f),
            cqs: self.cqs.iter().filter(|(_, c)| f(c.context)).count(),
            srqs: self.srqs.iter().filter(|(_, s)| f(s.context)).count(),
        }
    }

    /// Reads `buf.len()` bytes at `addr` of what `backing` refers to.
    pub(crate) fn read_backing(&mut self, backing: Backing, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        match backing {
            Backing::Pattern { flow } => {
                memory::pattern_read(flow, addr, buf);
                Ok(())
            }
            Backing::Context(c) => match self.contexts.get_mut(c as u32).and_then(|c| c.memory.as_mut()) {
                Some(m) => m.read(addr, buf),
                None => Err(MemoryFault::Unmapped { addr, len: buf.len() }),
            },
        }
    }

    /// Writes `data` at `addr` of what `backing` refers to.
    pub(crate) fn write_backing(&mut self, backing: Backing, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        match backing {
            Backing::Pattern { flow } => memory::pattern_write(flow, addr, data),
            Backing::Context(c) => match self.contexts.get_mut(c as u32).and_then(|c| c.memory.as_mut()) {
                Some(m) => m.write(addr, data),
                None => Err(MemoryFault::Unmapped { addr, len: data.len() }),
            },
        }
    }

    /// Reads `buf.len()` bytes from byte `offset` of the memory `sges` lists, for a QP of `pd`
    /// (the status a failure completes with).
    pub(crate) fn gather(&mut self, pd: u32, sges: &SgeList, offset: u64, buf: &mut [u8]) -> Result<(), WcStatus> {
        self.walk(pd, sges, offset, buf.len(), false, |v, backing, addr, range| {
            v.read_backing(backing, addr, &mut buf[range])
        })
    }

    /// Writes `data` from byte `offset` of the memory `sges` lists, for a QP of `pd`.
    pub(crate) fn scatter(&mut self, pd: u32, sges: &SgeList, offset: u64, data: &[u8]) -> Result<(), WcStatus> {
        self.walk(pd, sges, offset, data.len(), true, |v, backing, addr, range| {
            v.write_backing(backing, addr, &data[range])
        })
    }

    /// Visits the pieces of `len` bytes from byte `offset` of `sges`, each checked against its
    /// region: `f(verbs, backing, address, range of the caller's buffer)`.
    fn walk(
        &mut self,
        pd: u32,
        sges: &SgeList,
        offset: u64,
        len: usize,
        write: bool,
        mut f: impl FnMut(&mut Verbs, Backing, u64, std::ops::Range<usize>) -> Result<(), MemoryFault>,
    ) -> Result<(), WcStatus> {
        let mut skip = offset;
        let mut done = 0usize;
        for sge in sges.as_slice() {
            if done == len {
                break;
            }
            if skip >= sge.length {
                skip -= sge.length;
                continue;
            }
            let take = ((sge.length - skip) as usize).min(len - done);
            let addr = sge.addr + skip;
            let mr = self
                .mrs
                .local(sge.lkey, pd, addr, take as u64, write)
                .map_err(|e| match e {
                    KeyFault::NoRegion | KeyFault::Range => WcStatus::LocProtErr,
                    KeyFault::Rights => WcStatus::LocAccessErr,
                })?;
            let backing = mr.backing;
            f(self, backing, addr, done..done + take).map_err(|e| match e {
                MemoryFault::ContentMismatch { .. } => WcStatus::LocAccessErr,
                MemoryFault::Unmapped { .. } => WcStatus::LocAccessErr,
            })?;
            done += take;
            skip = 0;
        }
        if done < len {
            return Err(WcStatus::LocLenErr);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::memory::VecMemory;
    use super::wr::{Sge, WcOpcode};
    use super::*;

    #[test]
    fn gather_and_scatter_cross_entries_and_check_keys() {
        let mut v = Verbs::default();
        let c = v.create_context(Some(Box::new(VecMemory::new(0x1000, 64))));
        let pd = v.alloc_pd(c).unwrap();
        let k = v.reg_mr(c, pd, 0x1000, 64, Access::LOCAL_WRITE).unwrap();
        let sges = SgeList::new(&[
            Sge {
                addr: 0x1000,
                length: 4,
                lkey: k,
            },
            Sge {
                addr: 0x1010,
                length: 8,
                lkey: k,
            },
        ])
        .unwrap();
        v.scatter(pd, &sges, 2, &[1, 2, 3, 4, 5]).unwrap();
        let mut b = [0u8; 12];
        v.gather(pd, &sges, 0, &mut b).unwrap();
        assert_eq!(b, [0, 0, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0]);
        assert_eq!(
            v.scatter(pd, &sges, 10, &[0; 3]),
            Err(WcStatus::LocLenErr),
            "past the list"
        );
        let other = v.alloc_pd(c).unwrap();
        assert_eq!(
            v.gather(other, &sges, 0, &mut b),
            Err(WcStatus::LocProtErr),
            "another PD"
        );
        let ro = v.reg_mr(c, pd, 0x1000, 64, 0).unwrap();
        let sge = SgeList::one(Sge {
            addr: 0x1000,
            length: 4,
            lkey: ro,
        });
        assert_eq!(
            v.scatter(pd, &sge, 0, &[1]),
            Err(WcStatus::LocAccessErr),
            "no local write"
        );
        assert!(v.dealloc_pd(c, pd).is_err(), "regions use it");
    }

    #[test]
    fn a_context_goes_with_everything_it_made() {
        let mut v = Verbs::default();
        let c = v.create_context(None);
        let pd = v.alloc_pd(c).unwrap();
        let cq = v.create_cq(c, 4).unwrap();
        v.cq_mut(c, cq).unwrap().arm(false);
        v.complete(cq, WorkCompletion::new(1, WcStatus::Success, WcOpcode::Send, 5), false);
        assert_eq!(v.take_events(), vec![NicEvent::Completion { context: c, cq }]);
        let other = v.create_context(None);
        assert!(v.cq_mut(other, cq).is_err(), "another context's CQ");
        v.destroy_context(c);
        assert!(v.pd(c, pd).is_err() && !v.has_context(c));
    }
}
