//! Completion queues: completions the NIC writes into a queue this process maps, polled here
//! without a system call; arming for a completion channel writes the arm word and rings.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use intlab_nic_channel::command::{Answer, Command, NONE};
use intlab_nic_channel::entry::{CQE_LEN, Cqe};
use intlab_nic_channel::queue::{Queue, queue_len};

use crate::abi::{IbvCompChannel, IbvContext, IbvCq, IbvWc};
use crate::context::Context;
use crate::memory::Shared;

/// A completion queue: libibverbs' part first.
#[repr(C)]
pub(crate) struct Cq {
    pub(crate) ibv: IbvCq,
    queue: Queue<Arc<Shared>>,
    handle: u32,
    doorbell: u32,
    /// The consumer's counter, advanced under the lock (pollers may be several threads).
    consumer: Mutex<u64>,
    arm_seq: AtomicU64,
}

/// The provider's completion queue behind `cq`, and its context.
unsafe fn parts<'a>(cq: *mut IbvCq) -> Option<(&'a Cq, &'a Context)> {
    // Every CQ of this provider is a `Cq` whose first field this points at.
    let c = unsafe { (cq as *const Cq).as_ref() }?;
    let ctx = unsafe { Context::from_ibv(c.ibv.context) }?;
    Some((c, ctx))
}

fn null_with(e: i32) -> *mut IbvCq {
    crate::set_errno(e);
    std::ptr::null_mut()
}

/// `ibv_create_cq`.
pub(crate) unsafe extern "C" fn create_cq(
    context: *mut IbvContext,
    cqe: c_int,
    channel: *mut IbvCompChannel,
    _comp_vector: c_int,
) -> *mut IbvCq {
    let Some(ctx) = (unsafe { Context::from_ibv(context) }) else {
        return null_with(libc::EINVAL);
    };
    if cqe < 1 || cqe as u32 > intlab_nic_channel::device::MAX_CQE {
        return null_with(libc::EINVAL);
    }
    let entries = (cqe as u32 + 1).next_power_of_two();
    let Some(len) = queue_len(entries, CQE_LEN) else {
        return null_with(libc::EINVAL);
    };
    let memory = match Shared::new(c"intlab-cq", len) {
        Ok(m) => Arc::new(m),
        Err(e) => return null_with(e),
    };
    let ring_fd = memory.fd();
    let Some(queue) = Queue::new(memory, 0, entries, CQE_LEN) else {
        return null_with(libc::EINVAL);
    };
    let cq = Box::new(Cq {
        // libibverbs initialises the rest (verbs_init_cq).
        ibv: unsafe { std::mem::zeroed() },
        queue,
        handle: 0,
        doorbell: 0,
        consumer: Mutex::new(0),
        arm_seq: AtomicU64::new(0),
    });
    let raw = Box::into_raw(cq);
    let channel_fd = unsafe { channel.as_ref() }.map_or(NONE, |c| c.fd as u32);
    let c = Command::CreateCq {
        cqe: cqe as u32,
        ring_fd,
        entries,
        user_handle: raw as u64,
        channel_fd,
    };
    match ctx.command(&c) {
        Ok(Answer::Queue { handle, doorbell }) => {
            if channel_fd != NONE {
                ctx.claim_spare(channel_fd as i32);
            }
            // Ours, just made.
            let cq = unsafe { &mut *raw };
            cq.handle = handle;
            cq.doorbell = doorbell;
            cq.ibv.handle = handle;
            cq.ibv.cqe = (entries - 1) as c_int;
            &mut cq.ibv
        }
        other => {
            drop(unsafe { Box::from_raw(raw) });
            null_with(other.err().unwrap_or(libc::EIO))
        }
    }
}

/// `ibv_destroy_cq`.
pub(crate) unsafe extern "C" fn destroy_cq(cq: *mut IbvCq) -> c_int {
    let Some((c, ctx)) = (unsafe { parts(cq) }) else {
        return libc::EINVAL;
    };
    match ctx.command(&Command::DestroyCq { cq: c.handle }) {
        Ok(_) => {
            // Made by create_cq.
            drop(unsafe { Box::from_raw(cq as *mut Cq) });
            0
        }
        Err(e) => e,
    }
}

/// `ibv_poll_cq`: up to `n` completions, copied out of the queue.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    let Some((c, _)) = (unsafe { parts(cq) }) else {
        return -libc::EINVAL;
    };
    if n <= 0 || wc.is_null() {
        return 0;
    }
    let mut consumer = c.consumer.lock().unwrap_or_else(|p| p.into_inner());
    let producer = c.queue.producer().load(Ordering::Acquire);
    let waiting = producer.wrapping_sub(*consumer).min(u64::from(c.queue.entries()));
    let take = waiting.min(n as u64);
    let mut buf = [0u8; CQE_LEN];
    for i in 0..take {
        c.queue.read(consumer.wrapping_add(i), &mut buf);
        let Ok(e) = Cqe::decode(&buf) else {
            return -libc::EIO;
        };
        let w = IbvWc {
            wr_id: e.wr_id,
            status: e.status,
            opcode: e.opcode,
            vendor_err: e.vendor_err,
            byte_len: e.byte_len,
            imm_data: e.imm_data,
            qp_num: e.qp_num,
            src_qp: e.src_qp,
            wc_flags: e.wc_flags,
            pkey_index: e.pkey_index,
            slid: e.slid,
            sl: e.sl,
            dlid_path_bits: e.dlid_path_bits,
        };
        // The caller gave room for `n` completions; `i < take <= n`.
        unsafe { wc.add(i as usize).write(w) };
    }
    *consumer = consumer.wrapping_add(take);
    c.queue.consumer().store(*consumer, Ordering::Release);
    take as c_int
}

/// `ibv_req_notify_cq`: the next completion added (a solicited one when `solicited_only`)
/// raises an event on the queue's channel; those already in the queue do not (as the
/// specification and SoftRoCE have it: programs poll after arming for those).
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    let Some((c, ctx)) = (unsafe { parts(cq) }) else {
        return libc::EINVAL;
    };
    let seq = c.arm_seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    let seen = c.queue.producer().load(Ordering::Acquire);
    c.queue.arm_producer().store(seen, Ordering::Relaxed);
    let word = (seq << 2) | (u64::from(solicited_only != 0) << 1) | 1;
    c.queue.arm().store(word, Ordering::Release);
    ctx.ring(c.doorbell);
    0
}

/// An event of this queue was read from its channel: nothing to do (libibverbs counts it).
pub(crate) unsafe extern "C" fn cq_event(_cq: *mut IbvCq) {}
