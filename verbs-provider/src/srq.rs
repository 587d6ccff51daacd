//! Shared receive queues: created and changed by command, their receive requests written into a
//! queue this process shares with the NIC.

use std::ffi::c_int;
use std::sync::{Arc, Mutex};

use intlab_nic_channel::command::{Answer, Command};
use intlab_nic_channel::entry::RECV_WQE_LEN;
use intlab_nic_channel::queue::{Queue, queue_len};

use crate::abi::{IbvPd, IbvRecvWr, IbvSrq, IbvSrqAttr, IbvSrqInitAttr, VerbsSrq};
use crate::context::Context;
use crate::memory::Shared;
use crate::resources::context_of;

/// A shared receive queue: libibverbs' part first.
#[repr(C)]
pub(crate) struct Srq {
    pub(crate) vsrq: VerbsSrq,
    queue: Mutex<Queue<Arc<Shared>>>,
    doorbell: u32,
}

impl Srq {
    /// The NIC's handle.
    pub(crate) fn handle(&self) -> u32 {
        self.vsrq.srq.handle
    }
}

const IBV_SRQ_MAX_WR: c_int = 1;
const IBV_SRQ_LIMIT: c_int = 2;

unsafe fn parts<'a>(srq: *mut IbvSrq) -> Option<(&'a Srq, &'a Context)> {
    // Every SRQ of this provider is an `Srq` whose first field this points at.
    let s = unsafe { (srq as *const Srq).as_ref() }?;
    let ctx = unsafe { Context::from_ibv(s.vsrq.srq.context) }?;
    Some((s, ctx))
}

fn null_with(e: i32) -> *mut IbvSrq {
    crate::set_errno(e);
    std::ptr::null_mut()
}

/// `ibv_create_srq`.
pub(crate) unsafe extern "C" fn create_srq(pd: *mut IbvPd, attr: *mut IbvSrqInitAttr) -> *mut IbvSrq {
    let (Some(ctx), Some(a)) = (unsafe { context_of(pd) }, unsafe { attr.as_mut() }) else {
        return null_with(libc::EINVAL);
    };
    let entries = a.attr.max_wr.max(1).checked_next_power_of_two().unwrap_or(0);
    let Some(len) = queue_len(entries, RECV_WQE_LEN) else {
        return null_with(libc::EINVAL);
    };
    let memory = match Shared::new(c"intlab-srq", len) {
        Ok(m) => Arc::new(m),
        Err(e) => return null_with(e),
    };
    let ring_fd = memory.fd();
    let Some(queue) = Queue::new(memory, 0, entries, RECV_WQE_LEN) else {
        return null_with(libc::EINVAL);
    };
    let srq = Box::new(Srq {
        vsrq: unsafe { std::mem::zeroed() },
        queue: Mutex::new(queue),
        doorbell: 0,
    });
    let raw = Box::into_raw(srq);
    let c = Command::CreateSrq {
        pd: unsafe { (*pd).handle },
        max_wr: a.attr.max_wr,
        max_sge: a.attr.max_sge,
        limit: a.attr.srq_limit,
        ring_fd,
        entries,
        user_handle: raw as u64,
    };
    match ctx.command(&c) {
        Ok(Answer::Queue { handle, doorbell }) => {
            // Ours, just made; libibverbs fills the rest of its part.
            let s = unsafe { &mut *raw };
            s.doorbell = doorbell;
            s.vsrq.srq.handle = handle;
            &mut s.vsrq.srq
        }
        other => {
            drop(unsafe { Box::from_raw(raw) });
            null_with(other.err().unwrap_or(libc::EIO))
        }
    }
}

/// `ibv_modify_srq`: the limit; resizing is refused.
pub(crate) unsafe extern "C" fn modify_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr, mask: c_int) -> c_int {
    let (Some((s, ctx)), Some(a)) = (unsafe { parts(srq) }, unsafe { attr.as_ref() }) else {
        return libc::EINVAL;
    };
    if mask & IBV_SRQ_MAX_WR != 0 {
        return libc::EOPNOTSUPP;
    }
    let c = Command::ModifySrq {
        srq: s.handle(),
        mask: (mask & IBV_SRQ_LIMIT) as u32,
        max_wr: a.max_wr,
        limit: a.srq_limit,
    };
    match ctx.command(&c) {
        Ok(_) => 0,
        Err(e) => e,
    }
}

/// `ibv_query_srq`.
pub(crate) unsafe extern "C" fn query_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
    let (Some((s, ctx)), Some(out)) = (unsafe { parts(srq) }, unsafe { attr.as_mut() }) else {
        return libc::EINVAL;
    };
    match ctx.command(&Command::QuerySrq { srq: s.handle() }) {
        Ok(Answer::SrqAttr { max_wr, max_sge, limit }) => {
            *out = IbvSrqAttr {
                max_wr,
                max_sge,
                srq_limit: limit,
            };
            0
        }
        Ok(_) => libc::EIO,
        Err(e) => e,
    }
}

/// `ibv_destroy_srq`.
pub(crate) unsafe extern "C" fn destroy_srq(srq: *mut IbvSrq) -> c_int {
    let Some((s, ctx)) = (unsafe { parts(srq) }) else {
        return libc::EINVAL;
    };
    match ctx.command(&Command::DestroySrq { srq: s.handle() }) {
        Ok(_) => {
            // Made by create_srq.
            drop(unsafe { Box::from_raw(srq as *mut Srq) });
            0
        }
        Err(e) => e,
    }
}

/// `ibv_post_srq_recv`.
pub(crate) unsafe extern "C" fn post_srq_recv(srq: *mut IbvSrq, wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int {
    let Some((s, ctx)) = (unsafe { parts(srq) }) else {
        return libc::EINVAL;
    };
    let queue = s.queue.lock().unwrap_or_else(|p| p.into_inner());
    let (err, posted) = unsafe { crate::work_queue::post_receives(&queue, wr, bad) };
    drop(queue);
    if posted > 0 {
        ctx.ring(s.doorbell);
    }
    err
}
