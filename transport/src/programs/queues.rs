//! The fast path between a program and the NIC: work requests taken from the queues a doorbell
//! names, completions written into the program's completion queues, and the events a program
//! waits on (completion channels, asynchronous events) sent on its sockets.
//!
//! A request is taken into the engine only while the engine has room for it; what is left
//! waits in the program's queue and is taken when completions free room (the program is not
//! asked to ring again). Completions that do not fit a full completion queue wait in the engine
//! likewise.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;

use intlab_nic_channel::entry::{Cqe, RECV_WQE_LEN, RecvEntry, SEND_WQE_LEN, SendEntry, SendOp};

use super::context::{Object, ProgramContext, SharedQueue};
use crate::stack::{HostStack, Wire};
use crate::verbs::error::VerbsError;
use crate::verbs::wr::{InlineData, RecvWr, SendOpcode, SendWr, Sge, SgeList, UdDest, WcStatus, WorkCompletion};
use crate::verbs::{AsyncEvent, NicEvent};

/// `IBV_WC_GRH`, `IBV_WC_WITH_IMM`.
const WC_GRH: u32 = 1;
const WC_WITH_IMM: u32 = 2;

/// The engine's send request of a queue entry.
fn send_wr_of(e: &SendEntry) -> Result<SendWr, VerbsError> {
    let opcode = match e.op {
        SendOp::Write => SendOpcode::Write,
        SendOp::WriteImm => SendOpcode::WriteImm,
        SendOp::Send => SendOpcode::Send,
        SendOp::SendImm => SendOpcode::SendImm,
        SendOp::Read => SendOpcode::Read,
        SendOp::CompareSwap => SendOpcode::CompareSwap,
        SendOp::FetchAdd => SendOpcode::FetchAdd,
    };
    let sges: Vec<Sge> = e.sges[..usize::from(e.num_sge)]
        .iter()
        .map(|s| Sge {
            addr: s.addr,
            length: u64::from(s.length),
            lkey: s.lkey,
        })
        .collect();
    let sges = SgeList::new(&sges).ok_or_else(|| VerbsError::invalid("too many entries"))?;
    let inline = match &e.inline {
        Some((bytes, n)) => {
            let n = usize::from(*n).min(bytes.len());
            Some(InlineData::new(&bytes[..n]).ok_or_else(|| VerbsError::invalid("inline data"))?)
        }
        None => None,
    };
    let mut wr = SendWr::new(e.wr_id, opcode, sges);
    wr.signaled = e.signaled;
    wr.fence = e.fence;
    wr.solicited = e.solicited;
    wr.inline = inline;
    wr.imm = e.imm;
    wr.remote_addr = e.remote_addr;
    wr.rkey = e.rkey;
    wr.compare_add = e.compare_add;
    wr.swap = e.swap;
    wr.ud = e.ud.map(|u| UdDest {
        addr: Ipv4Addr::from(u.addr),
        qpn: u.qpn,
        qkey: u.qkey,
    });
    Ok(wr)
}

/// The engine's receive request of a queue entry.
fn recv_wr_of(e: &RecvEntry) -> Result<RecvWr, VerbsError> {
    let sges: Vec<Sge> = e.sges[..usize::from(e.num_sge)]
        .iter()
        .map(|s| Sge {
            addr: s.addr,
            length: u64::from(s.length),
            lkey: s.lkey,
        })
        .collect();
    Ok(RecvWr {
        wr_id: e.wr_id,
        sges: SgeList::new(&sges).ok_or_else(|| VerbsError::invalid("too many entries"))?,
    })
}

/// What became of one entry taken from a queue.
enum Took {
    /// Taken (into the engine, or refused there).
    Done,
    /// The engine had no room: the entry stays in the queue.
    Full,
}

/// Takes the entries waiting in `queue`, `LEN` bytes each, with `take` until one finds the
/// engine full; true when some had to stay.
fn take_entries<const LEN: usize>(queue: &SharedQueue, mut take: impl FnMut(&[u8; LEN]) -> Took) -> bool {
    let start = queue.consumer().load(Ordering::Acquire);
    let waiting = queue.waiting();
    let mut buf = [0u8; LEN];
    let mut taken = 0;
    let mut left = false;
    while taken < waiting {
        queue.read(start.wrapping_add(taken), &mut buf);
        if let Took::Full = take(&buf) {
            left = true;
            break;
        }
        taken += 1;
    }
    queue.consumer().store(start.wrapping_add(taken), Ordering::Release);
    left
}

/// Takes the send requests waiting in `queue` into QP `qpn`; true when some had to stay
/// (the engine had no room).
fn take_sends<W: Wire>(engine: usize, qpn: u32, queue: &SharedQueue, stack: &mut HostStack<W>, now: u64) -> bool {
    take_entries::<SEND_WQE_LEN>(queue, |buf| {
        let wr = SendEntry::decode(buf)
            .map_err(|e| VerbsError::invalid(e.to_string()))
            .and_then(|e| send_wr_of(&e));
        let posted = match wr {
            Ok(wr) => match stack.post_send(engine, qpn, wr, now) {
                Err(VerbsError::Full(_)) => return Took::Full,
                Err(e) => refuse(engine, qpn, buf, e, stack, now),
                Ok(()) => Ok(()),
            },
            Err(e) => refuse(engine, qpn, buf, e, stack, now),
        };
        if let Err(e) = posted {
            // The QP itself is gone: whatever waits is of no use.
            tracing::debug!(qp = qpn, "send requests of a QP that is gone: {e}");
        }
        Took::Done
    })
}

/// A send request that cannot be carried out completes with a local error and fails its QP.
fn refuse<W: Wire>(
    engine: usize,
    qpn: u32,
    buf: &[u8],
    why: VerbsError,
    stack: &mut HostStack<W>,
    now: u64,
) -> Result<(), VerbsError> {
    tracing::debug!(qp = qpn, "a send request refused: {why}");
    let mut id = [0u8; 8];
    id.copy_from_slice(&buf[..8]);
    let wr = SendWr::new(u64::from_le_bytes(id), SendOpcode::Send, SgeList::default());
    stack.refuse_send(engine, qpn, wr, WcStatus::LocQpOpErr, now)
}

/// Takes the receive requests waiting in `queue` with `post`; true when some had to stay.
fn take_receives(queue: &SharedQueue, mut post: impl FnMut(RecvWr) -> Result<(), VerbsError>) -> bool {
    take_entries::<RECV_WQE_LEN>(queue, |buf| {
        let wr = RecvEntry::decode(buf)
            .map_err(|e| VerbsError::invalid(e.to_string()))
            .and_then(|e| recv_wr_of(&e));
        match wr.and_then(&mut post) {
            Err(VerbsError::Full(_)) => return Took::Full,
            Err(e) => tracing::debug!("a receive request refused: {e}"),
            Ok(()) => {}
        }
        Took::Done
    })
}

/// Takes what the objects the program marked ask: requests into the engine, arming of
/// completion queues.
pub(super) fn attend<W: Wire>(ctx: &mut ProgramContext, stack: &mut HostStack<W>, now: u64) {
    let mut marked = Vec::new();
    ctx.area.take(|i| marked.push(i));
    for i in marked {
        attend_one(ctx, i, stack, now);
    }
}

/// Takes what object `i` asks.
fn attend_one<W: Wire>(ctx: &mut ProgramContext, i: u32, stack: &mut HostStack<W>, now: u64) {
    let engine = ctx.engine;
    let fire = match ctx.object(i) {
        Some(Object::Qp(q)) => {
            let mut left = take_sends(engine, q.qpn, &q.send, stack, now);
            if let Some(recv) = &q.recv {
                let qpn = q.qpn;
                left |= take_receives(recv, |wr| stack.post_recv(engine, qpn, wr));
            }
            if left {
                ctx.backlog.push(i);
            }
            None
        }
        Some(Object::Srq(s)) => {
            let handle = s.handle;
            if take_receives(&s.queue, |wr| stack.post_srq_recv(engine, handle, wr)) {
                ctx.backlog.push(i);
            }
            None
        }
        Some(Object::Cq(c)) => {
            let word = c.queue.arm().load(Ordering::Acquire);
            if word & 1 == 0 || word == c.last_arm {
                None
            } else {
                c.last_arm = word;
                c.armed = Some(word & 2 != 0);
                // Completions added after the program armed, before the arm was taken in here,
                // raise the event at once (for a solicited-only arm too: the ring does not say
                // which were solicited, and an extra event is harmless where a lost one hangs).
                let added =
                    c.queue.producer().load(Ordering::Relaxed) != c.queue.arm_producer().load(Ordering::Acquire);
                added.then(|| {
                    c.armed = None;
                    (c.channel, c.user_handle)
                })
            }
        }
        None => None,
    };
    if let Some((Some(channel), handle)) = fire {
        ctx.send_completion_event(channel, handle);
    }
}

/// A completion as the program's queue holds it.
fn cqe_of(wc: &WorkCompletion) -> Cqe {
    Cqe {
        wr_id: wc.wr_id,
        status: wc.status as u32,
        opcode: wc.opcode as u32,
        vendor_err: 0,
        byte_len: wc.byte_len,
        // `imm_data` is in network byte order in the program's memory.
        imm_data: wc.imm.map_or(0, u32::to_be),
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        wc_flags: (u32::from(wc.grh) * WC_GRH) | (u32::from(wc.imm.is_some()) * WC_WITH_IMM),
        pkey_index: 0,
        slid: 0,
        sl: if wc.grh { SL_ROCE_V2_IPV4 } else { 0 },
        dlid_path_bits: 0,
    }
}

/// What a RoCE NIC reports in `sl` of a completion that came with a GRH: the packet's network
/// header type, IPv4 (NVIDIA's NICs give it so; UCX's UD reads it to know that the GRH's last 4
/// bytes are the destination address, and drops the datagram as not its own otherwise).
const SL_ROCE_V2_IPV4: u8 = 0x2;

/// Moves the engine's completions of the programs' completion queues into them, raises the
/// events armed queues and the engine ask for, and takes the requests that waited for room.
pub(super) fn deliver<W: Wire>(contexts: &mut HashMap<u64, ProgramContext>, stack: &mut HostStack<W>, now: u64) {
    let mut touched = Vec::new();
    stack.verbs().take_touched(&mut touched);
    let events = stack.take_events();
    if touched.is_empty() && events.is_empty() && contexts.values().all(|c| c.backlog.is_empty()) {
        return;
    }
    let mut buf = Vec::with_capacity(64);
    for ctx in contexts.values_mut() {
        let engine = ctx.engine;
        for &(c, handle) in touched.iter().filter(|(c, _)| *c == engine) {
            let Some(i) = ctx.cqs.get(&handle).copied() else {
                continue;
            };
            let Some(Object::Cq(cq)) = ctx.object(i) else { continue };
            let mut qualifies = false;
            let mut left = false;
            loop {
                let p = cq.queue.producer().load(Ordering::Relaxed);
                let room = u64::from(cq.queue.entries()) > p.wrapping_sub(cq.queue.consumer().load(Ordering::Acquire));
                if !room {
                    left = true;
                    break;
                }
                let Ok(Some(wc)) = stack.poll_cq(c, handle) else { break };
                cqe_of(&wc).encode(&mut buf);
                cq.queue.write(p, &buf);
                cq.queue.producer().store(p.wrapping_add(1), Ordering::Release);
                qualifies |= match cq.armed {
                    Some(true) => wc.solicited || wc.status != WcStatus::Success,
                    _ => true,
                };
            }
            let fire = (qualifies && cq.armed.is_some()).then(|| {
                cq.armed = None;
                (cq.channel, cq.user_handle)
            });
            if left {
                stack.verbs().touch(c, handle);
            }
            if let Some((Some(channel), user)) = fire
                && !ctx.send_completion_event(channel, user)
            {
                tracing::debug!("a completion event found its channel closed or full");
            }
        }
        for e in events.iter() {
            let NicEvent::Async { context, event } = *e else {
                continue;
            };
            if context != engine {
                continue;
            }
            let (code, id) = event.code();
            let index = match event {
                AsyncEvent::CqError(h) => ctx.cqs.get(&h),
                AsyncEvent::SrqLimit(h) => ctx.srqs.get(&h),
                _ => ctx.qps.get(&id),
            }
            .copied();
            let element = match index.and_then(|i| ctx.object(i)) {
                Some(Object::Qp(q)) => q.user_handle,
                Some(Object::Cq(c)) => c.user_handle,
                Some(Object::Srq(s)) => s.user_handle,
                None => continue,
            };
            if !ctx.send_async_event(element, code) {
                tracing::debug!("an asynchronous event found its socket closed or full");
            }
        }
        let backlog = std::mem::take(&mut ctx.backlog);
        for i in backlog {
            attend_one(ctx, i, stack, now);
        }
    }
}
