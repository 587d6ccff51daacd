//! The verbs a host's NIC offers programs: contexts, protection domains, memory regions,
//! completion queues, shared receive queues and QPs, created, changed and destroyed; work
//! requests posted. Whatever a program gives is checked here or in the engine: another
//! context's handle, a capacity beyond the device's, a QP towards an address that is not one of
//! the lab's hosts, all are refused with the errno a program expects.

use std::net::Ipv4Addr;

use int_format::roce::ROCEV2_PORT;
use int_format::roles::source;

use super::{CLOSED_QPS_KEPT, HostStack, Slot, Wire};
use crate::cc::LineRate;
use crate::endpoint_config::{IntMode, PROBE_QP};
use crate::packet::Addressing;
use crate::program_qp::{ProgramOwner, ProgramQp};
use crate::verbs::error::VerbsError;
use crate::verbs::memory::Memory;
use crate::verbs::qp::{AttrMask, Qp, QpAttr, QpCaps, QpInit, QpState, QpType, RetryPolicy};
use crate::verbs::wr::{MAX_INLINE, MAX_SGE, RecvWr, SendWr, WcStatus, WorkCompletion};
use crate::verbs::{NicEvent, ObjectCounts, Verbs};

/// Requests a QP's queue (or an SRQ) may hold at most (the device's `max_qp_wr`).
pub const MAX_QP_WR: u32 = 16_384;
/// Entries a completion queue may hold at most (the device's `max_cqe`).
pub const MAX_CQE: u32 = 1 << 20;
/// QPs a NIC holds at most (the device's `max_qp`).
pub const MAX_QP: usize = 1 << 16;
/// Program QPs are numbered from here up (the lab's own flows use their ids, below).
pub const PROGRAM_QPN_BASE: u32 = 0x80_0000;

/// What a program asks a new QP to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpRequest {
    /// Its service.
    pub kind: QpType,
    /// Its protection domain.
    pub pd: u32,
    /// Where its send requests complete.
    pub send_cq: u32,
    /// Where its receive requests complete.
    pub recv_cq: u32,
    /// Its shared receive queue, if any.
    pub srq: Option<u32>,
    /// Every send request completes.
    pub sig_all: bool,
    /// Its queues' sizes.
    pub caps: QpCaps,
}

/// A QP as a program queries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpView {
    /// Its attributes.
    pub attr: QpAttr,
    /// Its queues' sizes.
    pub caps: QpCaps,
    /// Every send request completes.
    pub sig_all: bool,
}

impl<W: Wire> HostStack<W> {
    /// The NIC's objects (PDs, memory regions, CQs, SRQs), for the verbs that need no QP.
    pub fn verbs(&mut self) -> &mut Verbs {
        &mut self.verbs
    }

    /// A context for program `owner`, whose memory the NIC reaches through `memory`.
    pub fn open_context(&mut self, memory: Box<dyn Memory>, owner: ProgramOwner) -> usize {
        let context = self.verbs.create_context(Some(memory));
        self.owners.insert(context, owner);
        context
    }

    /// The objects programs hold on the NIC now (QPs counted apart).
    pub fn program_objects(&self) -> (ObjectCounts, usize) {
        let lab = self.lab.context;
        let qps = self.slots.iter().flatten().filter(|s| s.qp.context != lab).count();
        (self.verbs.count_where(|c| c != lab), qps)
    }

    /// Every program QP, those destroyed first (oldest first), then those alive.
    pub fn program_qps_now(&self) -> Vec<ProgramQp> {
        let alive = self
            .slots
            .iter()
            .flatten()
            .filter(|s| s.qp.context != self.lab.context)
            .map(|s| self.program_qp(&s.qp));
        self.closed_qps.iter().cloned().chain(alive).collect()
    }

    /// The record of program QP `qp`.
    fn program_qp(&self, qp: &Qp) -> ProgramQp {
        let sent = qp.sender_stats();
        let received = qp.receiver_stats();
        let connected = qp.kind == QpType::Rc && qp.attr.state != QpState::Reset && qp.attr.state != QpState::Init;
        ProgramQp {
            owner: self.owners.get(&qp.context).cloned().unwrap_or(ProgramOwner {
                pid: 0,
                command: String::new(),
            }),
            qpn: qp.qpn,
            transport: match qp.kind {
                QpType::Rc => "RC",
                QpType::Ud => "UD",
            }
            .into(),
            state: qp.attr.state.name().into(),
            peer: qp.attr.dest.filter(|_| connected),
            peer_qpn: connected.then_some(qp.attr.dest_qpn),
            controller: qp.cc.name().into(),
            rate_bps: qp.cc.rate_bps(),
            window_bytes: qp.cc.window_bytes(),
            messages_sent: sent.messages,
            bytes_sent: sent.message_bytes,
            messages_received: received.messages,
            bytes_received: received.bytes_ok,
            packets_sent: sent.packets_sent,
            wire_bytes: sent.wire_bytes,
            retransmissions: sent.retransmissions,
            timeouts: sent.timeouts,
            naks: sent.naks + sent.rnr_naks,
            cnps: sent.cnps,
            rtt_min_ns: sent.rtt_min_ns,
            rtt_mean_ns: sent.rtt_mean_ns,
            first_sent_ns: sent.first_sent_ns,
            last_progress_ns: sent.last_progress_ns,
            first_received_ns: received.first_packet_ns,
            last_received_ns: received.last_message_ns,
        }
    }

    /// Removes context `context` and everything it made, its QPs first: they vanish without a
    /// word, as a program's QPs do when it dies (its peers' requests then time out).
    pub fn close_context(&mut self, context: usize) {
        if context == self.lab.context {
            return;
        }
        let qpns: Vec<u32> = self
            .slots
            .iter()
            .flatten()
            .filter(|s| s.qp.context == context)
            .map(|s| s.qp.qpn)
            .collect();
        for qpn in qpns {
            self.remove_qp(qpn);
        }
        self.verbs.destroy_context(context);
        self.owners.remove(&context);
    }

    /// True when `context` is a program's.
    fn program(&self, context: usize) -> Result<(), VerbsError> {
        if context == self.lab.context || !self.verbs.has_context(context) {
            return Err(VerbsError::NoObject {
                kind: "context",
                handle: context as u32,
            });
        }
        Ok(())
    }

    /// The slot of QP `qpn` of `context`.
    fn program_slot(&mut self, context: usize, qpn: u32) -> Result<usize, VerbsError> {
        let missing = VerbsError::NoObject {
            kind: "QP",
            handle: qpn,
        };
        let i = *self.slot_of.get(&qpn).ok_or(missing.clone())?;
        match self.slots.get(i) {
            Some(Some(s)) if s.qp.context == context && !s.is_lab() => Ok(i),
            _ => Err(missing),
        }
    }

    fn remove_qp(&mut self, qpn: u32) {
        if let Some(i) = self.slot_of.remove(&qpn) {
            if let Some(s) = &self.slots[i]
                && s.qp.context != self.lab.context
            {
                let mut record = self.program_qp(&s.qp);
                record.state = "DESTROYED".into();
                if self.closed_qps.len() == CLOSED_QPS_KEPT {
                    self.closed_qps.pop_front();
                }
                self.closed_qps.push_back(record);
            }
            self.slots[i] = None;
            self.free_slots.push(i);
        }
    }

    /// A completion queue of `cqe` entries.
    pub fn create_cq(&mut self, context: usize, cqe: u32) -> Result<u32, VerbsError> {
        self.program(context)?;
        if cqe == 0 || cqe > MAX_CQE {
            return Err(VerbsError::invalid(format!("{cqe} CQ entries (1 to {MAX_CQE})")));
        }
        self.verbs.create_cq(context, cqe as usize)
    }

    /// Destroys completion queue `cq` (refused while a QP uses it).
    pub fn destroy_cq(&mut self, context: usize, cq: u32) -> Result<(), VerbsError> {
        self.verbs.cq_mut(context, cq)?;
        let used = self
            .slots
            .iter()
            .flatten()
            .any(|s| s.qp.context == context && (s.qp.send_cq == cq || s.qp.recv_cq == cq));
        if used {
            return Err(VerbsError::Busy("a QP still uses the CQ".into()));
        }
        self.verbs.destroy_cq(context, cq)
    }

    /// Frees protection domain `pd` (refused while a QP, SRQ or memory region uses it).
    pub fn dealloc_pd(&mut self, context: usize, pd: u32) -> Result<(), VerbsError> {
        self.verbs.pd(context, pd)?;
        if self
            .slots
            .iter()
            .flatten()
            .any(|s| s.qp.context == context && s.qp.pd == pd)
        {
            return Err(VerbsError::Busy("a QP still uses the PD".into()));
        }
        self.verbs.dealloc_pd(context, pd)
    }

    /// A shared receive queue of `max_wr` requests of `max_sge` entries in `pd`.
    pub fn create_srq(&mut self, context: usize, pd: u32, max_wr: u32, max_sge: u32) -> Result<u32, VerbsError> {
        self.program(context)?;
        if max_wr == 0 || max_wr > MAX_QP_WR || max_sge as usize > MAX_SGE {
            return Err(VerbsError::invalid(format!(
                "an SRQ of {max_wr} requests of {max_sge} entries (at most {MAX_QP_WR} of {MAX_SGE})"
            )));
        }
        self.verbs.create_srq(context, pd, max_wr as usize, max_sge as usize)
    }

    /// Destroys shared receive queue `srq` (refused while a QP uses it).
    pub fn destroy_srq(&mut self, context: usize, srq: u32) -> Result<(), VerbsError> {
        self.verbs.srq_mut(context, srq)?;
        if self
            .slots
            .iter()
            .flatten()
            .any(|s| s.qp.context == context && s.qp.srq == Some(srq))
        {
            return Err(VerbsError::Busy("a QP still uses the SRQ".into()));
        }
        self.verbs.destroy_srq(context, srq)
    }

    /// Adds a receive request to shared receive queue `srq`.
    pub fn post_srq_recv(&mut self, context: usize, srq: u32, wr: RecvWr) -> Result<(), VerbsError> {
        let s = self.verbs.srq_mut(context, srq)?;
        if wr.sges.as_slice().len() > s.max_sge {
            return Err(VerbsError::invalid(format!(
                "{} entries, the SRQ takes {}",
                wr.sges.as_slice().len(),
                s.max_sge
            )));
        }
        if !s.post(wr) {
            return Err(VerbsError::Full(format!("SRQ of {} requests", s.max_wr)));
        }
        Ok(())
    }

    /// A new QP in RESET; returns its number.
    pub fn create_qp(&mut self, context: usize, req: QpRequest) -> Result<u32, VerbsError> {
        self.program(context)?;
        self.verbs.pd(context, req.pd)?;
        self.verbs.cq_mut(context, req.send_cq)?;
        self.verbs.cq_mut(context, req.recv_cq)?;
        if let Some(srq) = req.srq {
            self.verbs.srq_mut(context, srq)?;
        }
        let c = req.caps;
        if c.max_send_wr > MAX_QP_WR
            || c.max_recv_wr > MAX_QP_WR
            || c.max_send_sge as usize > MAX_SGE
            || c.max_recv_sge as usize > MAX_SGE
            || c.max_inline_data as usize > MAX_INLINE
        {
            return Err(VerbsError::invalid(format!(
                "QP capacities {c:?} beyond the device's ({MAX_QP_WR} requests, {MAX_SGE} entries, {MAX_INLINE} inline bytes)"
            )));
        }
        if self.slot_of.len() >= MAX_QP {
            return Err(VerbsError::Full(format!("{MAX_QP} QPs")));
        }
        let qpn = self.free_qpn();
        let init = QpInit {
            qpn,
            kind: req.kind,
            context,
            pd: req.pd,
            send_cq: req.send_cq,
            recv_cq: req.recv_cq,
            srq: req.srq,
            sig_all: req.sig_all,
            caps: c,
            retry: RetryPolicy::Counted,
            timing: self.cfg.timing,
            mtu: self.cfg.mtu as u32,
            local: Addressing {
                src: self.cfg.ip,
                dst: Ipv4Addr::UNSPECIFIED,
                // RoCE NICs draw the UDP source port from the QP: ECMP entropy per QP.
                src_port: crate::flow::source_port(qpn as usize),
            },
        };
        let qp = crate::verbs::qp::Qp::new(init, Box::new(LineRate(self.cfg.line_rate_bps)));
        self.install(Slot {
            qp,
            generation: 0,
            queued: false,
            stuck_reported: false,
            sends: None,
            receives: None,
        });
        Ok(qpn)
    }

    /// A QP number no QP has.
    fn free_qpn(&mut self) -> u32 {
        loop {
            let qpn = self.next_qpn.max(PROGRAM_QPN_BASE);
            self.next_qpn = if qpn >= PROBE_QP - 1 { PROGRAM_QPN_BASE } else { qpn + 1 };
            if !self.slot_of.contains_key(&qpn) {
                return qpn;
            }
        }
    }

    /// Applies a modify to QP `qpn`; a QP that learns its far end gets its controller and INT
    /// then, on the path the lab knows to that host.
    pub fn modify_qp(
        &mut self,
        context: usize,
        qpn: u32,
        mask: AttrMask,
        attr: &QpAttr,
        now: u64,
    ) -> Result<(), VerbsError> {
        let i = self.program_slot(context, qpn)?;
        if mask.has(AttrMask::AV) {
            match attr.dest {
                Some(d) if self.cfg.programs.peers.contains_key(&d) => {}
                Some(d) => {
                    return Err(VerbsError::invalid(format!(
                        "{d} is not a host of this lab: a QP reaches the lab's hosts only"
                    )));
                }
                None => return Err(VerbsError::invalid("the address vector's GID is not an IPv4 address")),
            }
        }
        if mask.has(AttrMask::PATH_MTU) && u64::from(attr.path_mtu) > self.cfg.mtu {
            return Err(VerbsError::invalid(format!(
                "path MTU {} above the port's active MTU {}",
                attr.path_mtu, self.cfg.mtu
            )));
        }
        let Some(Some(slot)) = self.slots.get_mut(i) else {
            return Err(VerbsError::NoObject {
                kind: "QP",
                handle: qpn,
            });
        };
        let before = slot.qp.attr.state;
        slot.qp.modify(mask, attr, &mut self.verbs)?;
        let after = slot.qp.attr.state;
        if before != QpState::Rtr && after == QpState::Rtr || before == QpState::Init && after == QpState::Rts {
            self.connect(i);
        }
        self.schedule(i, now);
        Ok(())
    }

    /// Gives QP slot `i` the controller and INT of its path: an RC QP towards its far end, a
    /// UD QP at line rate (datagrams go anywhere in the lab).
    fn connect(&mut self, i: usize) {
        let Some(Some(slot)) = self.slots.get_mut(i) else {
            return;
        };
        let qp = &mut slot.qp;
        let cc = match (qp.kind, qp.attr.dest) {
            (QpType::Rc, Some(dest)) => {
                let route = self.cfg.programs.peers.get(&dest).copied();
                route.and_then(|route| {
                    let path = self.cfg.path_info(route);
                    let cfg = &self.cfg.programs.controller;
                    match cfg.build(path) {
                        Ok(cc) => {
                            self.controllers.push((qp.qpn, cfg.resolve(&path)));
                            Some(cc)
                        }
                        Err(e) => {
                            tracing::warn!(
                                qp = qp.qpn,
                                "its controller could not be built, it runs at line rate: {e}"
                            );
                            None
                        }
                    }
                })
            }
            _ => None,
        };
        if let Some(cc) = cc {
            qp.cc = cc;
        }
        let instructions = match self.cfg.int_mode {
            IntMode::Auto => qp.cc.int_instructions(),
            IntMode::On => Some(qp.cc.int_instructions().unwrap_or(int_format::int::Instructions::HPCC)),
            IntMode::Off => None,
        };
        qp.int = instructions.map(|instructions| source::SourceConfig {
            int_port: self.cfg.int_port,
            instructions,
            hop_limit: self.cfg.hop_limit,
        });
        qp.dst_port = if qp.int.is_some() {
            self.cfg.int_port
        } else {
            ROCEV2_PORT
        };
    }

    /// QP `qpn` as its program sees it.
    pub fn query_qp(&mut self, context: usize, qpn: u32) -> Result<QpView, VerbsError> {
        let i = self.program_slot(context, qpn)?;
        let Some(Some(s)) = self.slots.get(i) else {
            return Err(VerbsError::NoObject {
                kind: "QP",
                handle: qpn,
            });
        };
        Ok(QpView {
            attr: s.qp.attr,
            caps: s.qp.caps,
            sig_all: s.qp.sig_all,
        })
    }

    /// Destroys QP `qpn`: it vanishes, whatever was posted to it with it.
    pub fn destroy_qp(&mut self, context: usize, qpn: u32) -> Result<(), VerbsError> {
        self.program_slot(context, qpn)?;
        self.remove_qp(qpn);
        Ok(())
    }

    /// Posts a send request to QP `qpn` at `now`.
    pub fn post_send(&mut self, context: usize, qpn: u32, wr: SendWr, now: u64) -> Result<(), VerbsError> {
        let i = self.program_slot(context, qpn)?;
        if let Some(ud) = wr.ud
            && !self.cfg.programs.peers.contains_key(&ud.addr)
        {
            return Err(VerbsError::invalid(format!(
                "{} is not a host of this lab: a datagram reaches the lab's hosts only",
                ud.addr
            )));
        }
        let Some(Some(slot)) = self.slots.get_mut(i) else {
            return Err(VerbsError::NoObject {
                kind: "QP",
                handle: qpn,
            });
        };
        slot.qp.post_send(&mut self.verbs, wr)?;
        self.schedule(i, now);
        Ok(())
    }

    /// Takes send request `wr` for QP `qpn` that cannot be carried out: it completes with
    /// `status` and the QP goes to the error state.
    pub fn refuse_send(
        &mut self,
        context: usize,
        qpn: u32,
        wr: SendWr,
        status: WcStatus,
        now: u64,
    ) -> Result<(), VerbsError> {
        let i = self.program_slot(context, qpn)?;
        let Some(Some(slot)) = self.slots.get_mut(i) else {
            return Err(VerbsError::NoObject {
                kind: "QP",
                handle: qpn,
            });
        };
        slot.qp.refuse_send(&mut self.verbs, wr, status);
        self.schedule(i, now);
        Ok(())
    }

    /// Posts a receive request to QP `qpn`.
    pub fn post_recv(&mut self, context: usize, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        let i = self.program_slot(context, qpn)?;
        let Some(Some(slot)) = self.slots.get_mut(i) else {
            return Err(VerbsError::NoObject {
                kind: "QP",
                handle: qpn,
            });
        };
        slot.qp.post_recv(&mut self.verbs, wr)
    }

    /// Takes the oldest completion of completion queue `cq`.
    pub fn poll_cq(&mut self, context: usize, cq: u32) -> Result<Option<WorkCompletion>, VerbsError> {
        Ok(self.verbs.cq_mut(context, cq)?.pop())
    }

    /// The events (armed completion queues, asynchronous events) raised since last asked.
    pub fn take_events(&mut self) -> Vec<NicEvent> {
        self.verbs.take_events()
    }
}
