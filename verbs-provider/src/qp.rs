//! Queue pairs: created, changed, queried and destroyed by command; their work requests written
//! into the send and receive queues this process shares with the NIC, then the doorbell rung.

use std::ffi::c_int;
use std::sync::{Arc, Mutex};

use intlab_nic_channel::command::{Answer, Caps, Command, NONE, QpAttrs};
use intlab_nic_channel::entry::{self, MAX_INLINE, RECV_WQE_LEN, SEND_WQE_LEN, SendEntry, SendOp, UdAddr};
use intlab_nic_channel::queue::{Layout, Queue};

use crate::abi::{
    IbvAhAttr, IbvGid, IbvGlobalRoute, IbvPd, IbvQp, IbvQpAttr, IbvQpCap, IbvQpInitAttr, IbvRecvWr, IbvSendWr, VerbsQp,
};
use crate::context::Context;
use crate::cq::Cq;
use crate::memory::Shared;
use crate::resources::{Ah, context_of};
use crate::srq::Srq;
use crate::work_queue::{post_receives, publish, room, sges};

/// A QP: libibverbs' part first.
#[repr(C)]
pub(crate) struct Qp {
    pub(crate) vqp: VerbsQp,
    send: Mutex<Queue<Arc<Shared>>>,
    recv: Option<Mutex<Queue<Arc<Shared>>>>,
    doorbell: u32,
    caps: IbvQpCap,
}

const IBV_QPT_RC: u32 = 2;
const IBV_QPT_UD: u32 = 4;
const IBV_SEND_FENCE: u32 = 1;
const IBV_SEND_SIGNALED: u32 = 2;
const IBV_SEND_SOLICITED: u32 = 4;
const IBV_SEND_INLINE: u32 = 8;

/// The provider's QP behind `qp`, and its context.
unsafe fn parts<'a>(qp: *mut IbvQp) -> Option<(&'a Qp, &'a Context)> {
    // Every QP of this provider is a `Qp` whose first field this points at.
    let q = unsafe { (qp as *const Qp).as_ref() }?;
    let ctx = unsafe { Context::from_ibv(q.vqp.qp.context) }?;
    Some((q, ctx))
}

fn null_with(e: i32) -> *mut IbvQp {
    crate::set_errno(e);
    std::ptr::null_mut()
}

/// Entries of a queue holding `n` requests: a power of two.
fn entries_for(n: u32) -> u32 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 31)
}

/// `ibv_create_qp`: RC and UD; the capacities asked for are checked by the NIC and given back.
pub(crate) unsafe extern "C" fn create_qp(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> *mut IbvQp {
    let (Some(ctx), Some(a)) = (unsafe { context_of(pd) }, unsafe { attr.as_mut() }) else {
        return null_with(libc::EINVAL);
    };
    if a.qp_type != IBV_QPT_RC && a.qp_type != IBV_QPT_UD {
        return null_with(libc::EOPNOTSUPP);
    }
    // The CQs and SRQ a program passes are this provider's.
    let (Some(scq), Some(rcq)) = (unsafe { (a.send_cq as *const Cq).as_ref() }, unsafe {
        (a.recv_cq as *const Cq).as_ref()
    }) else {
        return null_with(libc::EINVAL);
    };
    let srq = unsafe { (a.srq as *const Srq).as_ref() };
    let sq = entries_for(a.cap.max_send_wr);
    let rq = if srq.is_some() {
        0
    } else {
        entries_for(a.cap.max_recv_wr)
    };
    let Some(layout) = Layout::qp(sq, rq) else {
        return null_with(libc::EINVAL);
    };
    let memory = match Shared::new(c"intlab-qp", layout.total()) {
        Ok(m) => Arc::new(m),
        Err(e) => return null_with(e),
    };
    let ring_fd = memory.fd();
    let Some(send) = Queue::new(memory.clone(), 0, sq, SEND_WQE_LEN) else {
        return null_with(libc::EINVAL);
    };
    let recv = if rq > 0 {
        match Queue::new(memory, layout.send_len, rq, RECV_WQE_LEN) {
            Some(q) => Some(q),
            None => return null_with(libc::EINVAL),
        }
    } else {
        None
    };
    let qp = Box::new(Qp {
        vqp: unsafe { std::mem::zeroed() },
        send: Mutex::new(send),
        recv: recv.map(Mutex::new),
        doorbell: 0,
        caps: a.cap,
    });
    let raw = Box::into_raw(qp);
    let c = Command::CreateQp {
        qp_type: a.qp_type,
        pd: unsafe { (*pd).handle },
        send_cq: scq.ibv.handle,
        recv_cq: rcq.ibv.handle,
        srq: srq.map_or(NONE, |s| s.handle()),
        sig_all: a.sq_sig_all != 0,
        caps: Caps {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline_data: a.cap.max_inline_data,
        },
        ring_fd,
        sq_entries: sq,
        rq_entries: rq,
        user_handle: raw as u64,
    };
    match ctx.command(&c) {
        Ok(Answer::Queue { handle, doorbell }) => {
            // Ours, just made.
            let q = unsafe { &mut *raw };
            q.doorbell = doorbell;
            let ibv = &mut q.vqp.qp;
            ibv.context = unsafe { (*pd).context };
            ibv.qp_context = a.qp_context;
            ibv.pd = pd;
            ibv.send_cq = a.send_cq;
            ibv.recv_cq = a.recv_cq;
            ibv.srq = a.srq;
            ibv.handle = handle;
            ibv.qp_num = handle;
            ibv.state = 0;
            ibv.qp_type = a.qp_type;
            ibv.events_completed = 0;
            unsafe {
                libc::pthread_mutex_init(&mut ibv.mutex as *mut _ as *mut libc::pthread_mutex_t, std::ptr::null());
                libc::pthread_cond_init(&mut ibv.cond as *mut _ as *mut libc::pthread_cond_t, std::ptr::null());
            }
            ibv
        }
        other => {
            drop(unsafe { Box::from_raw(raw) });
            null_with(other.err().unwrap_or(libc::EIO))
        }
    }
}

/// `ibv_destroy_qp`.
pub(crate) unsafe extern "C" fn destroy_qp(qp: *mut IbvQp) -> c_int {
    let Some((q, ctx)) = (unsafe { parts(qp) }) else {
        return libc::EINVAL;
    };
    match ctx.command(&Command::DestroyQp { qpn: q.vqp.qp.qp_num }) {
        Ok(_) => {
            // Made by create_qp.
            drop(unsafe { Box::from_raw(qp as *mut Qp) });
            0
        }
        Err(e) => e,
    }
}

/// The attributes of `a` as a command carries them.
fn attrs_of(a: &IbvQpAttr) -> QpAttrs {
    let g = &a.ah_attr.grh;
    QpAttrs {
        state: a.qp_state,
        path_mtu: a.path_mtu,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qpn: a.dest_qp_num,
        access: a.qp_access_flags as u32,
        dgid: g.dgid.raw,
        flow_label: g.flow_label,
        pkey_index: a.pkey_index,
        sgid_index: g.sgid_index,
        hop_limit: g.hop_limit,
        traffic_class: g.traffic_class,
        is_global: a.ah_attr.is_global,
        sl: a.ah_attr.sl,
        port_num: a.port_num,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: 0,
    }
}

/// `ibv_modify_qp`: the NIC checks the transition and every value.
pub(crate) unsafe extern "C" fn modify_qp(qp: *mut IbvQp, attr: *mut IbvQpAttr, mask: c_int) -> c_int {
    let (Some((q, ctx)), Some(a)) = (unsafe { parts(qp) }, unsafe { attr.as_ref() }) else {
        return libc::EINVAL;
    };
    let c = Command::ModifyQp {
        qpn: q.vqp.qp.qp_num,
        mask: mask as u32,
        attr: attrs_of(a),
    };
    match ctx.command(&c) {
        Ok(_) => 0,
        Err(e) => e,
    }
}

/// `ibv_query_qp`.
pub(crate) unsafe extern "C" fn query_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    _mask: c_int,
    init: *mut IbvQpInitAttr,
) -> c_int {
    let Some((q, ctx)) = (unsafe { parts(qp) }) else {
        return libc::EINVAL;
    };
    let (a, caps, sig_all) = match ctx.command(&Command::QueryQp { qpn: q.vqp.qp.qp_num }) {
        Ok(Answer::QpAttr { attr, caps, sig_all }) => (attr, caps, sig_all),
        Ok(_) => return libc::EIO,
        Err(e) => return e,
    };
    let cap = IbvQpCap {
        max_send_wr: caps.max_send_wr,
        max_recv_wr: caps.max_recv_wr,
        max_send_sge: caps.max_send_sge,
        max_recv_sge: caps.max_recv_sge,
        max_inline_data: caps.max_inline_data,
    };
    if let Some(out) = unsafe { attr.as_mut() } {
        // Every field written; the caller's struct may hold anything before.
        *out = IbvQpAttr {
            qp_state: a.state,
            cur_qp_state: a.state,
            path_mtu: a.path_mtu,
            path_mig_state: 0,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qpn,
            qp_access_flags: a.access as c_int,
            cap,
            ah_attr: IbvAhAttr {
                grh: IbvGlobalRoute {
                    dgid: IbvGid { raw: a.dgid },
                    flow_label: a.flow_label,
                    sgid_index: a.sgid_index,
                    hop_limit: a.hop_limit,
                    traffic_class: a.traffic_class,
                },
                dlid: 0,
                sl: a.sl,
                src_path_bits: 0,
                static_rate: 0,
                is_global: a.is_global,
                port_num: a.port_num,
            },
            alt_ah_attr: unsafe { std::mem::zeroed() },
            pkey_index: a.pkey_index,
            alt_pkey_index: 0,
            en_sqd_async_notify: a.en_sqd_async_notify,
            sq_draining: a.sq_draining,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            alt_port_num: 0,
            alt_timeout: 0,
            rate_limit: 0,
        };
    }
    if let Some(i) = unsafe { init.as_mut() } {
        let ibv = &q.vqp.qp;
        i.qp_context = ibv.qp_context;
        i.send_cq = ibv.send_cq;
        i.recv_cq = ibv.recv_cq;
        i.srq = ibv.srq;
        i.cap = cap;
        i.qp_type = ibv.qp_type;
        i.sq_sig_all = c_int::from(sig_all);
    }
    0
}

/// Copies the bytes the entries point at (in this process) for an inline send.
unsafe fn gather_inline(list: &[entry::Sge]) -> Result<([u8; MAX_INLINE], u16), i32> {
    let mut out = [0u8; MAX_INLINE];
    let mut at = 0usize;
    for s in list {
        let len = s.length as usize;
        if at + len > MAX_INLINE {
            return Err(libc::EINVAL);
        }
        if len > 0 {
            // The program says `len` bytes of its own are at `addr`, as the verbs require.
            unsafe { std::ptr::copy_nonoverlapping(s.addr as *const u8, out.as_mut_ptr().add(at), len) };
        }
        at += len;
    }
    Ok((out, at as u16))
}

/// The request `w` as a queue entry.
unsafe fn send_entry(w: &IbvSendWr, qp_type: u32, max_inline: u32) -> Result<SendEntry, i32> {
    let op = match w.opcode {
        0 => SendOp::Write,
        1 => SendOp::WriteImm,
        2 => SendOp::Send,
        3 => SendOp::SendImm,
        4 => SendOp::Read,
        5 => SendOp::CompareSwap,
        6 => SendOp::FetchAdd,
        _ => return Err(libc::EINVAL),
    };
    let (sges, num_sge) = unsafe { sges(w.sg_list, w.num_sge) }?;
    let inline = if w.send_flags & IBV_SEND_INLINE != 0 {
        let data = unsafe { gather_inline(&sges[..usize::from(num_sge)]) }?;
        if u32::from(data.1) > max_inline {
            return Err(libc::EINVAL);
        }
        Some(data)
    } else {
        None
    };
    let ud = if qp_type == IBV_QPT_UD {
        // For UD, the `wr` union holds `ud`: the address handle, then the QP and its key.
        let ah = unsafe { (w.wr.remote_addr as *const Ah).as_ref() }.ok_or(libc::EINVAL)?;
        Some(UdAddr {
            addr: ah.addr,
            qpn: w.wr.compare_add as u32,
            qkey: (w.wr.compare_add >> 32) as u32,
        })
    } else {
        None
    };
    let (rkey, compare_add, swap) = match op {
        // `atomic`: remote_addr, compare_add, swap, rkey.
        SendOp::CompareSwap | SendOp::FetchAdd => (w.wr.rkey, w.wr.compare_add, w.wr.swap),
        // `rdma`: remote_addr, then rkey.
        _ => (w.wr.compare_add as u32, 0, 0),
    };
    Ok(SendEntry {
        wr_id: w.wr_id,
        op,
        signaled: w.send_flags & IBV_SEND_SIGNALED != 0,
        fence: w.send_flags & IBV_SEND_FENCE != 0,
        solicited: w.send_flags & IBV_SEND_SOLICITED != 0,
        sges,
        num_sge,
        inline,
        imm: u32::from_be(w.imm_data),
        remote_addr: if ud.is_some() { 0 } else { w.wr.remote_addr },
        rkey,
        compare_add,
        swap,
        ud,
    })
}

/// `IBV_QPS_RESET` and `IBV_QPS_RTS`, as libibverbs keeps them in `ibv_qp.state`.
const STATE_RESET: u32 = 0;
const STATE_RTS: u32 = 3;

/// `ibv_post_send`: the requests go into the send queue, then one doorbell.
pub(crate) unsafe extern "C" fn post_send(qp: *mut IbvQp, wr: *mut IbvSendWr, bad: *mut *mut IbvSendWr) -> c_int {
    let Some((q, ctx)) = (unsafe { parts(qp) }) else {
        return libc::EINVAL;
    };
    // Sends are taken from RTS on (in ERR they complete flushed), as SoftRoCE has it.
    if q.vqp.qp.state < STATE_RTS {
        if !bad.is_null() {
            unsafe { *bad = wr };
        }
        return libc::EINVAL;
    }
    let queue = q.send.lock().unwrap_or_else(|p| p.into_inner());
    let mut buf = Vec::with_capacity(SEND_WQE_LEN);
    let mut cur = wr;
    let mut posted = 0;
    let mut err = 0;
    while let Some(w) = unsafe { cur.as_ref() } {
        if room(&queue) == 0 {
            err = libc::ENOMEM;
            break;
        }
        match unsafe { send_entry(w, q.vqp.qp.qp_type, q.caps.max_inline_data) } {
            Ok(e) => {
                e.encode(&mut buf);
                publish(&queue, &buf);
                posted += 1;
            }
            Err(e) => {
                err = e;
                break;
            }
        }
        cur = w.next;
    }
    drop(queue);
    if err != 0 && !bad.is_null() {
        unsafe { *bad = cur };
    }
    if posted > 0 {
        ctx.ring(q.doorbell);
    }
    err
}

/// `ibv_post_recv`.
pub(crate) unsafe extern "C" fn post_recv(qp: *mut IbvQp, wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int {
    let Some((q, ctx)) = (unsafe { parts(qp) }) else {
        return libc::EINVAL;
    };
    if q.vqp.qp.state == STATE_RESET {
        if !bad.is_null() {
            unsafe { *bad = wr };
        }
        return libc::EINVAL;
    }
    let Some(recv) = &q.recv else {
        // Its receive requests come from its SRQ.
        if !bad.is_null() {
            unsafe { *bad = wr };
        }
        return libc::EINVAL;
    };
    let queue = recv.lock().unwrap_or_else(|p| p.into_inner());
    let (err, posted) = unsafe { post_receives(&queue, wr, bad) };
    drop(queue);
    if posted > 0 {
        ctx.ring(q.doorbell);
    }
    err
}
