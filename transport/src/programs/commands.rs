//! Carrying out a program's commands against the host's verbs engine, and writing each answer
//! into the program's memory where the command asked for it. Every value from the program is
//! checked here or by the engine; a refusal is the errno the program's `write` fails with.

use std::net::Ipv4Addr;
use std::sync::Arc;

use intlab_nic_channel::command::{Answer, Caps, Command, Header, NONE, QpAttrs};
use intlab_nic_channel::device::{gid_of, ipv4_of};
use intlab_nic_channel::entry::{CQE_LEN, RECV_WQE_LEN};
use intlab_nic_channel::queue::{AREA_LEN, Area, Layout, Queue, queue_len};
use intlab_nic_channel::shared::SharedMapping;

use super::context::{CqQueue, Object, ProgramContext, ProgramMemory, QpQueues, SrqQueue};
use super::{Caller, DOORBELL, EXITED, Programs};
use crate::program_qp::ProgramOwner;
use crate::stack::verbs::QpRequest;
use crate::stack::{HostStack, Wire};
use crate::verbs::error::VerbsError;
use crate::verbs::mr::Access;
use crate::verbs::qp::{AttrMask, QpAttr, QpCaps, QpState, QpType, mtu_bytes, mtu_code};

const IBV_QPT_RC: u32 = 2;
const IBV_QPT_UD: u32 = 4;
const IBV_SRQ_LIMIT: u32 = 2;

fn invalid(why: &str) -> i32 {
    tracing::debug!("a program's command refused: {why}");
    libc::EINVAL
}

/// [`map`] for a program's queue: the memory its ring is in.
fn queue_memory(caller: &mut Caller, fd: i32, len: usize) -> Result<Arc<SharedMapping>, VerbsError> {
    map(caller, fd, len).map_err(|_| VerbsError::invalid("a shared queue the NIC could not map"))
}

/// Maps the shared memory `fd` the caller gave, `len` bytes.
fn map(caller: &mut Caller, fd: i32, len: usize) -> Result<Arc<SharedMapping>, i32> {
    let owned = caller
        .take(fd)
        .ok_or_else(|| invalid("a descriptor the command names was not taken"))?;
    SharedMapping::map(owned, len).map(Arc::new).map_err(|e| {
        tracing::debug!("mapping a program's queue: {e}");
        libc::EINVAL
    })
}

impl Programs {
    /// Carries out `command` of context `key`; the bytes taken, or the errno.
    pub(super) fn command<W: Wire>(
        &mut self,
        key: u64,
        header: &Header,
        command: Command,
        mut caller: Caller,
        stack: &mut HostStack<W>,
        now: u64,
    ) -> Result<usize, i32> {
        let len = caller.len;
        if let Command::Hello { .. } = command {
            return self.hello(key, header, command, caller, stack);
        }
        let Some(ctx) = self.contexts.get_mut(&key) else {
            return Err(invalid("a command before hello"));
        };
        if caller.pidfd.pid() != ctx.pidfd.pid() {
            // A forked child writing its parent's command file: its memory is not the one the
            // context reaches.
            return Err(libc::EPERM);
        }
        let goodbye = matches!(command, Command::Goodbye);
        let answer = execute(ctx, command, &mut caller, stack, now).map_err(|e| e.errno())?;
        write_answer(&ctx.memory, header, &answer)?;
        if goodbye {
            self.close(key, stack);
        }
        Ok(len)
    }

    fn hello<W: Wire>(
        &mut self,
        key: u64,
        header: &Header,
        command: Command,
        mut caller: Caller,
        stack: &mut HostStack<W>,
    ) -> Result<usize, i32> {
        let Command::Hello {
            version,
            doorbell_fd,
            area_fd,
            async_fd,
            spares,
        } = command
        else {
            return Err(libc::EINVAL);
        };
        if version != intlab_nic_channel::device::PROTOCOL_VERSION {
            return Err(invalid("another protocol version"));
        }
        if self.contexts.contains_key(&key) {
            return Err(invalid("a second hello on one command file"));
        }
        let memory = caller
            .memory
            .take()
            .ok_or_else(|| invalid("hello without the caller's memory"))?;
        let doorbell = caller.take(doorbell_fd).ok_or_else(|| invalid("no doorbell"))?;
        let area_memory = map(&mut caller, area_fd, AREA_LEN)?;
        let area = Area::new(area_memory).ok_or_else(|| invalid("a short attention area"))?;
        let async_socket = caller.take(async_fd).ok_or_else(|| invalid("no event socket"))?;
        let mut taken = Vec::new();
        for (nic, program) in spares {
            taken.push((program, caller.take(nic).ok_or_else(|| invalid("a spare not taken"))?));
        }
        let pid = caller.pidfd.pid();
        // The name only labels the program's QPs in results: a program gone already has none.
        let command = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let owner = ProgramOwner {
            pid,
            command: command.trim_end().to_owned(),
        };
        let engine = stack.open_context(Box::new(ProgramMemory(memory.clone())), owner);
        let mut ctx = ProgramContext::new(engine, caller.pidfd.clone(), memory, doorbell, area, async_socket);
        if let Err(e) = ctx.add_spares(taken) {
            stack.close_context(engine);
            return Err(e.errno());
        }
        let answer = Answer::Hello { port: self.port };
        let watched = self
            .epoll
            .add(ctx.doorbell_fd(), key << 1 | DOORBELL)
            .and_then(|()| self.epoll.add(ctx.pidfd_fd(), key << 1 | EXITED));
        if let Err(e) = watched {
            tracing::warn!("watching a program's doorbell: {e}");
            stack.close_context(engine);
            return Err(libc::ENOMEM);
        }
        if let Err(e) = write_answer(&ctx.memory, header, &answer) {
            for fd in [ctx.doorbell_fd(), ctx.pidfd_fd()] {
                if let Err(err) = self.epoll.remove(fd) {
                    tracing::warn!("unwatching a program that went away: {err}");
                }
            }
            stack.close_context(engine);
            return Err(e);
        }
        self.contexts.insert(key, ctx);
        Ok(caller.len)
    }
}

/// Writes `answer` at the address `header` gave, if it fits the room the caller said it has.
fn write_answer(
    memory: &intlab_runtime::sys::process_memory::ProcessMemory,
    header: &Header,
    answer: &Answer,
) -> Result<(), i32> {
    let mut buf = Vec::with_capacity(128);
    answer.encode(&mut buf);
    if buf.is_empty() {
        return Ok(());
    }
    if buf.len() > usize::from(header.out_words) * 4 {
        return Err(invalid("no room for the answer"));
    }
    memory.write(header.response, &buf).map_err(|_| libc::EFAULT)
}

/// The engine's attributes of what a modify carries.
fn attr_of(a: &QpAttrs, mask: AttrMask) -> Result<QpAttr, VerbsError> {
    let state = QpState::from_u32(a.state);
    if mask.has(AttrMask::STATE) && state.is_none() {
        return Err(VerbsError::invalid(format!("qp_state {}", a.state)));
    }
    let path_mtu = if mask.has(AttrMask::PATH_MTU) {
        mtu_bytes(a.path_mtu).ok_or_else(|| VerbsError::invalid(format!("path_mtu {}", a.path_mtu)))?
    } else {
        1024
    };
    let dest = ipv4_of(&a.dgid).map(Ipv4Addr::from);
    Ok(QpAttr {
        state: state.unwrap_or(QpState::Reset),
        path_mtu,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qpn: a.dest_qpn,
        access: Access(a.access),
        pkey_index: a.pkey_index,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        min_rnr_timer: a.min_rnr_timer,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        dest: if a.is_global != 0 { dest } else { None },
        hop_limit: a.hop_limit,
        traffic_class: a.traffic_class,
        sgid_index: a.sgid_index,
    })
}

/// What a query answers of the engine's attributes.
fn attrs_of(a: &QpAttr) -> QpAttrs {
    QpAttrs {
        state: a.state as u32,
        path_mtu: mtu_code(a.path_mtu),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qpn: a.dest_qpn,
        access: a.access.0,
        dgid: a.dest.map_or([0; 16], |d| gid_of(d.octets())),
        flow_label: 0,
        pkey_index: a.pkey_index,
        sgid_index: a.sgid_index,
        hop_limit: a.hop_limit,
        traffic_class: a.traffic_class,
        is_global: u8::from(a.dest.is_some()),
        sl: 0,
        port_num: a.port_num,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        en_sqd_async_notify: 0,
        sq_draining: u8::from(a.state == QpState::Sqd),
    }
}

/// Creates a QP on the queues the program mapped, and its doorbell.
fn create_qp<W: Wire>(
    ctx: &mut ProgramContext,
    command: Command,
    caller: &mut Caller,
    stack: &mut HostStack<W>,
) -> Result<Answer, VerbsError> {
    let c = ctx.engine;
    // Called for this command only (see `execute`).
    let Command::CreateQp {
        qp_type,
        pd,
        send_cq,
        recv_cq,
        srq,
        sig_all,
        caps,
        ring_fd,
        sq_entries,
        rq_entries,
        user_handle,
    } = command
    else {
        return Err(VerbsError::invalid("not a CreateQp"));
    };
    let kind = match qp_type {
        IBV_QPT_RC => QpType::Rc,
        IBV_QPT_UD => QpType::Ud,
        other => return Err(VerbsError::NotSupported(format!("QP type {other}"))),
    };
    let srq = (srq != NONE).then_some(srq);
    if sq_entries < caps.max_send_wr || (srq.is_none() && rq_entries < caps.max_recv_wr) {
        return Err(VerbsError::invalid("queues smaller than the capacities asked"));
    }
    let layout = Layout::qp(sq_entries, if srq.is_some() { 0 } else { rq_entries })
        .ok_or_else(|| VerbsError::invalid("QP queue sizes"))?;
    let memory = queue_memory(caller, ring_fd, layout.total())?;
    let send = Queue::new(memory.clone(), 0, sq_entries, intlab_nic_channel::entry::SEND_WQE_LEN)
        .ok_or_else(|| VerbsError::invalid("send queue"))?;
    let recv = match srq {
        Some(_) => None,
        None => Some(
            Queue::new(memory, layout.send_len, rq_entries, RECV_WQE_LEN)
                .ok_or_else(|| VerbsError::invalid("receive queue"))?,
        ),
    };
    // The engine holds what the program's queues held once taken out of them.
    let engine_caps = QpCaps {
        max_send_wr: sq_entries,
        max_recv_wr: if srq.is_some() { 0 } else { rq_entries },
        max_send_sge: caps.max_send_sge,
        max_recv_sge: caps.max_recv_sge,
        max_inline_data: caps.max_inline_data,
    };
    if caps.max_send_wr > crate::stack::verbs::MAX_QP_WR || caps.max_recv_wr > crate::stack::verbs::MAX_QP_WR {
        return Err(VerbsError::invalid(format!(
            "{} send and {} receive requests, the device takes {}",
            caps.max_send_wr,
            caps.max_recv_wr,
            crate::stack::verbs::MAX_QP_WR
        )));
    }
    let qpn = stack.create_qp(
        c,
        QpRequest {
            kind,
            pd,
            send_cq,
            recv_cq,
            srq,
            sig_all,
            caps: engine_caps,
        },
    )?;
    match ctx.insert(Object::Qp(QpQueues {
        qpn,
        send,
        recv,
        user_handle,
        caps,
    })) {
        Ok(doorbell) => Ok(Answer::Queue { handle: qpn, doorbell }),
        Err(e) => {
            stack.destroy_qp(c, qpn)?;
            Err(e)
        }
    }
}

/// Creates a CQ on the ring the program mapped, and its doorbell.
fn create_cq<W: Wire>(
    ctx: &mut ProgramContext,
    command: Command,
    caller: &mut Caller,
    stack: &mut HostStack<W>,
) -> Result<Answer, VerbsError> {
    let c = ctx.engine;
    // Called for this command only (see `execute`).
    let Command::CreateCq {
        cqe,
        ring_fd,
        entries,
        user_handle,
        channel_fd,
    } = command
    else {
        return Err(VerbsError::invalid("not a CreateCq"));
    };
    if entries < cqe {
        return Err(VerbsError::invalid(format!(
            "a queue of {entries} for {cqe} completions"
        )));
    }
    let channel = (channel_fd != NONE).then_some(channel_fd as i32);
    if let Some(ch) = channel
        && !ctx.channels.contains_key(&ch)
    {
        return Err(VerbsError::invalid(format!(
            "descriptor {ch} is not a completion channel"
        )));
    }
    let len = queue_len(entries, CQE_LEN).ok_or_else(|| VerbsError::invalid("CQ entries"))?;
    let memory = queue_memory(caller, ring_fd, len)?;
    let queue = Queue::new(memory, 0, entries, CQE_LEN).ok_or_else(|| VerbsError::invalid("CQ queue"))?;
    let handle = stack.create_cq(c, cqe)?;
    let object = Object::Cq(CqQueue {
        handle,
        queue,
        user_handle,
        channel,
        armed: None,
        last_arm: 0,
    });
    match ctx.insert(object) {
        Ok(doorbell) => Ok(Answer::Queue { handle, doorbell }),
        Err(e) => {
            stack.destroy_cq(c, handle)?;
            Err(e)
        }
    }
}

/// Carries out one command (not hello) of context `ctx`.
fn execute<W: Wire>(
    ctx: &mut ProgramContext,
    command: Command,
    caller: &mut Caller,
    stack: &mut HostStack<W>,
    now: u64,
) -> Result<Answer, VerbsError> {
    let c = ctx.engine;
    Ok(match command {
        Command::Hello { .. } => return Err(VerbsError::invalid("hello twice")),
        Command::AddSpares { spares } => {
            let mut taken = Vec::new();
            for (nic, program) in spares {
                let fd = caller
                    .take(nic)
                    .ok_or_else(|| VerbsError::invalid("a spare not taken"))?;
                taken.push((program, fd));
            }
            ctx.add_spares(taken)?;
            Answer::Done
        }
        Command::Goodbye => Answer::Goodbye {
            used: ctx.channels.keys().copied().collect(),
        },
        Command::AllocPd => Answer::Handle(stack.verbs().alloc_pd(c)?),
        Command::DeallocPd { pd } => {
            stack.dealloc_pd(c, pd)?;
            Answer::Done
        }
        Command::RegMr { pd, addr, len, access } => Answer::Key(stack.verbs().reg_mr(c, pd, addr, len, access)?),
        Command::DeregMr { key } => {
            stack.verbs().dereg_mr(c, key)?;
            Answer::Done
        }
        command @ Command::CreateCq { .. } => create_cq(ctx, command, caller, stack)?,
        Command::DestroyCq { cq } => {
            stack.destroy_cq(c, cq)?;
            if let Some(i) = ctx.cqs.get(&cq).copied() {
                ctx.remove(i);
            }
            Answer::Done
        }
        Command::CreateSrq {
            pd,
            max_wr,
            max_sge,
            limit,
            ring_fd,
            entries,
            user_handle,
        } => {
            if entries < max_wr {
                return Err(VerbsError::invalid("an SRQ queue smaller than its requests"));
            }
            let len = queue_len(entries, RECV_WQE_LEN).ok_or_else(|| VerbsError::invalid("SRQ entries"))?;
            let memory = queue_memory(caller, ring_fd, len)?;
            let queue = Queue::new(memory, 0, entries, RECV_WQE_LEN).ok_or_else(|| VerbsError::invalid("SRQ queue"))?;
            let handle = stack.create_srq(c, pd, max_wr, max_sge)?;
            stack.verbs().srq_mut(c, handle)?.set_limit(limit);
            match ctx.insert(Object::Srq(SrqQueue {
                handle,
                queue,
                user_handle,
            })) {
                Ok(doorbell) => Answer::Queue { handle, doorbell },
                Err(e) => {
                    stack.destroy_srq(c, handle)?;
                    return Err(e);
                }
            }
        }
        Command::ModifySrq { srq, mask, limit, .. } => {
            let s = stack.verbs().srq_mut(c, srq)?;
            if mask & IBV_SRQ_LIMIT != 0 {
                if limit as usize > s.max_wr {
                    return Err(VerbsError::invalid("an SRQ limit above its size"));
                }
                s.set_limit(limit);
            }
            Answer::Done
        }
        Command::QuerySrq { srq } => {
            let s = stack.verbs().srq_mut(c, srq)?;
            Answer::SrqAttr {
                max_wr: s.max_wr as u32,
                max_sge: s.max_sge as u32,
                limit: s.limit(),
            }
        }
        Command::DestroySrq { srq } => {
            stack.destroy_srq(c, srq)?;
            if let Some(i) = ctx.srqs.get(&srq).copied() {
                ctx.remove(i);
            }
            Answer::Done
        }
        command @ Command::CreateQp { .. } => create_qp(ctx, command, caller, stack)?,
        Command::ModifyQp { qpn, mask, attr } => {
            let mask = AttrMask(mask);
            let a = attr_of(&attr, mask)?;
            stack.modify_qp(c, qpn, mask, &a, now)?;
            Answer::Done
        }
        Command::QueryQp { qpn } => {
            let v = stack.query_qp(c, qpn)?;
            let caps = ctx
                .qps
                .get(&qpn)
                .copied()
                .and_then(|i| match ctx.object(i) {
                    Some(Object::Qp(q)) => Some(q.caps),
                    _ => None,
                })
                .unwrap_or(Caps::default());
            Answer::QpAttr {
                attr: attrs_of(&v.attr),
                caps,
                sig_all: v.sig_all,
            }
        }
        Command::DestroyQp { qpn } => {
            stack.destroy_qp(c, qpn)?;
            if let Some(i) = ctx.qps.get(&qpn).copied() {
                ctx.remove(i);
            }
            Answer::Done
        }
        Command::CreateCompChannel => {
            let Some((program, nic)) = ctx.spares.pop() else {
                return Err(VerbsError::Full("no spare completion channel left".into()));
            };
            ctx.channels.insert(program, nic);
            Answer::CompChannel { fd: program as u32 }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_cross_the_channel_and_back() {
        let wire = QpAttrs {
            state: 2,
            path_mtu: 3,
            dest_qpn: 9,
            dgid: gid_of([198, 18, 0, 2]),
            is_global: 1,
            retry_cnt: 7,
            timeout: 14,
            ..QpAttrs::default()
        };
        let mask = AttrMask(AttrMask::STATE | AttrMask::PATH_MTU | AttrMask::AV);
        let a = attr_of(&wire, mask).expect("valid");
        assert_eq!(
            (a.state, a.path_mtu, a.dest),
            (QpState::Rtr, 1024, Some(Ipv4Addr::new(198, 18, 0, 2)))
        );
        let back = attrs_of(&a);
        assert_eq!(
            (back.state, back.path_mtu, back.dgid, back.retry_cnt),
            (2, 3, wire.dgid, 7)
        );
        let bad = QpAttrs { path_mtu: 9, ..wire };
        assert!(attr_of(&bad, mask).is_err());
        let bad_state = QpAttrs { state: 7, ..wire };
        assert!(attr_of(&bad_state, mask).is_err());
    }
}
