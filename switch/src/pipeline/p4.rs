//! A switch that runs a P4_16 v1model program instead of the native pipeline: ingress when a
//! frame arrives, egress when it starts transmission on the exact schedule (so `enq_qdepth`,
//! `deq_timedelta` and the timestamps are the schedule's own).

use std::sync::Arc;

use intlab_p4::exec::{Carry, Session};
use intlab_p4::{Arrival, CarriedState, Datapath, Decision, Departure, PacketState};

use crate::config::{P4Spec, PortSpec};
use crate::egress::EgressPort;
use crate::frame::FrameBuf;
use crate::tm::Dequeued;

/// What a P4 program decided for an arriving frame, in the switch's port indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum P4Verdict {
    /// To this port.
    Forward(usize),
    /// To the ports of this multicast group.
    Multicast(u16),
    /// Dropped by the program.
    Drop,
    /// Sent to a P4 port number that no port has.
    NoPort(u16),
}

/// A program that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum P4LoadError {
    /// The program does not compile.
    #[error("{0}")]
    Program(#[from] intlab_p4::P4Errors),
    /// Its runtime file does not apply.
    #[error("{0}")]
    Runtime(#[from] intlab_p4::runtime_json::RuntimeError),
    /// Its command file does not apply.
    #[error("{0}")]
    Commands(#[from] intlab_p4::cli_commands::CommandError),
    /// Two ports have one P4 port number.
    #[error("P4 port {number} is given to both `{first}` and `{second}`")]
    DuplicatePort {
        /// The number.
        number: u16,
        /// One port.
        first: String,
        /// The other.
        second: String,
    },
}

/// The program of one switch, its tables, and its port numbering.
#[derive(Debug)]
pub struct P4Pipeline {
    /// Shared with the control plane, which edits its tables while frames run.
    datapath: Arc<Datapath>,
    /// P4 port number → port index.
    to_index: Vec<Option<usize>>,
    /// Port index → P4 port number.
    to_p4: Vec<u16>,
}

/// A worker's own packet states for one P4 switch. The program runs on these, which stay in the
/// worker's cache; a frame carries only what egress needs ([`CarriedState`]).
#[derive(Debug)]
pub struct P4Scratch {
    /// The frame in hand, from its arrival to the end of ingress, or through egress.
    packet: PacketState,
    /// A clone being made.
    clone: PacketState,
}

/// What a P4 program's ingress decided for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct P4Ingress {
    /// Where the frame goes.
    pub verdict: P4Verdict,
    /// A clone session the program asked for (make the clone with [`P4Pipeline::clone_of`]).
    pub clone: Option<Session>,
    /// The queue (priority) it goes to.
    pub priority: u8,
}

/// What a P4 program's egress decided for a frame that starts transmission.
#[derive(Debug, Clone)]
pub enum P4Egress {
    /// It goes out on the port.
    Send,
    /// The program dropped it.
    Drop,
    /// It goes back to the switch's ingress (`recirculate`), as the deparser left it, keeping
    /// this.
    Recirculate(Carry),
}

/// The CPU port a switch with `ports` gets for `spec.cpu_port`, if any: as fast and as deep as
/// its fastest and deepest port, with no delay, since it stands for the switch's own path to
/// its CPU rather than a link.
pub fn cpu_port_spec(spec: &P4Spec, ports: &[PortSpec]) -> Option<PortSpec> {
    let p4_port = spec.cpu_port?;
    let first = ports.first()?;
    Some(PortSpec {
        name: CPU_PORT_NAME.into(),
        io: crate::config::PortIo::Controller,
        rate: ports.iter().map(|p| p.rate).max().unwrap_or(first.rate),
        delay: crate::units::Nanos(0),
        buffer: ports.iter().map(|p| p.buffer).max().unwrap_or(first.buffer),
        mtu: ports.iter().map(|p| p.mtu).max().unwrap_or(first.mtu),
        ecn: None,
        int: false,
        impair: crate::impair::ImpairmentSpec::default(),
        impair_inbound: crate::impair::ImpairmentSpec::default(),
        p4_port,
    })
}

/// The name of a switch's CPU port among its ports (counters, captures).
pub const CPU_PORT_NAME: &str = "cpu";

/// Loads `spec`'s program, runtime file and command file for switch `name`.
pub fn load_datapath(spec: &P4Spec, name: &str) -> Result<Datapath, P4LoadError> {
    let loaded = intlab_p4::load_with(&spec.program, &spec.preprocessor)?;
    let mut dp = Datapath::new(loaded.ir, name);
    dp.trace = spec.trace;
    if let Some(r) = &spec.runtime {
        intlab_p4::runtime_json::apply_file(&dp, r)?;
    }
    if let Some(c) = &spec.cli {
        for line in intlab_p4::cli_commands::apply_file(&dp, c)? {
            tracing::info!(switch = name, "{line}");
        }
    }
    Ok(dp)
}

impl P4Pipeline {
    /// The pipeline of a switch with `ports`, running `datapath`.
    pub fn new(datapath: Datapath, ports: &[PortSpec]) -> Result<P4Pipeline, P4LoadError> {
        let mut to_index: Vec<Option<usize>> = vec![None; usize::from(intlab_p4::exec::DROP_PORT)];
        let mut to_p4 = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let n = p.p4_port;
            if let Some(Some(first)) = to_index.get(usize::from(n)) {
                return Err(P4LoadError::DuplicatePort {
                    number: n,
                    first: ports[*first].name.clone(),
                    second: p.name.clone(),
                });
            }
            if let Some(slot) = to_index.get_mut(usize::from(n)) {
                *slot = Some(i);
            }
            to_p4.push(n);
        }
        Ok(P4Pipeline {
            datapath: Arc::new(datapath),
            to_index,
            to_p4,
        })
    }

    /// The program's datapath (tables, registers, counters), for the control plane.
    pub fn datapath(&self) -> &Arc<Datapath> {
        &self.datapath
    }

    fn port(&self, n: u16) -> Option<usize> {
        self.to_index.get(usize::from(n)).copied().flatten()
    }

    /// The packet states a worker runs this program's frames on.
    pub fn scratch(&self) -> P4Scratch {
        P4Scratch {
            packet: self.datapath.packet_state(),
            clone: self.datapath.packet_state(),
        }
    }

    /// Runs the parser and ingress on `frame`, which arrived on port `index`, in `work` (with
    /// what a recirculated frame kept, `carry`). A clone the program asked for comes back as its
    /// session (make it with [`P4Pipeline::clone_of`] before `work` runs another frame).
    pub fn ingress(
        &self,
        frame: &mut FrameBuf,
        index: usize,
        work: &mut P4Scratch,
        carry: Option<&Carry>,
    ) -> P4Ingress {
        let st = &mut work.packet;
        let arrival = Arrival {
            port: self.to_p4[index],
            now_ns: frame.arrival_ns,
        };
        let mut len = frame.len;
        let r = self
            .datapath
            .ingress_as(st, frame.buffer_mut(), &mut len, arrival, carry);
        frame.len = len;
        frame.layout = None;
        frame.p4_priority = Some(r.priority);
        st.save(frame.p4.get_or_insert_with(Box::default));
        let verdict = match r.decision {
            Decision::Drop => P4Verdict::Drop,
            Decision::Multicast(g) => P4Verdict::Multicast(g),
            Decision::Unicast(p) => match self.port(p) {
                Some(i) => P4Verdict::Forward(i),
                None => P4Verdict::NoPort(p),
            },
        };
        P4Ingress {
            verdict,
            clone: r.clone_session,
            priority: r.priority,
        }
    }

    /// Runs egress and the deparser on a frame sent to P4 port `port`, which no interface has
    /// (PSA's `PSA_PORT_RECIRCULATE`, or any number simple_switch would queue for a port it
    /// lacks): no queue, no wire time. What egress decided; an egress clone it asked for goes
    /// into `clone`.
    pub fn portless_pass(
        &self,
        frame: &mut FrameBuf,
        port: u16,
        work: &mut P4Scratch,
        spare: &mut dyn FnMut() -> FrameBuf,
        clone: &mut Option<(Session, FrameBuf)>,
    ) -> P4Egress {
        let d = Departure {
            port,
            arrival_ns: frame.arrival_ns,
            enqueued_ns: frame.arrival_ns,
            departure_ns: frame.arrival_ns,
            qid: frame.p4_priority.unwrap_or(0),
            ..Departure::default()
        };
        self.egress_frame(frame, d, work, spare, clone)
    }

    /// The P4 port number of the switch's port `index`.
    pub fn p4_port(&self, index: usize) -> u16 {
        self.to_p4[index]
    }

    /// The port index of P4 port `p`, if the switch has it.
    pub fn port_index(&self, p: u16) -> Option<usize> {
        self.port(p)
    }

    /// The ports (and replication ids) of multicast group `g`, into `out` (emptied first).
    pub fn group(&self, g: u16, out: &mut Vec<(usize, u16)>) {
        out.clear();
        let control = self.datapath.control();
        let replicas = control.groups.get(&g).into_iter().flatten();
        out.extend(replicas.filter_map(|&(p, rid)| Some((self.port(p)?, rid))));
    }

    /// Runs egress and the deparser, in `work`, on a frame that starts transmission on `port`.
    /// An egress-to-egress clone the program asked for is made into a frame from `spare` (and
    /// comes back with its session).
    pub fn egress(
        &self,
        d: &mut Dequeued,
        port: &EgressPort,
        work: &mut P4Scratch,
        spare: &mut dyn FnMut() -> FrameBuf,
        clone: &mut Option<(Session, FrameBuf)>,
    ) -> P4Egress {
        let departure = Departure {
            port: self.to_p4[usize::from(port.index)],
            arrival_ns: d.frame.arrival_ns,
            enqueued_ns: d.enqueued_ns,
            departure_ns: d.start_ns,
            enq_packets: d.enq_packets,
            deq_packets: d.deq_packets,
            queue_bytes: d.qlen,
            tx_bytes: d.tx_bytes_before,
            rate_kbps: port.rate_kbps,
            node_id: port.node_id,
            mtu: u32::try_from(port.mtu).unwrap_or(u32::MAX),
            qid: d.priority,
        };
        self.egress_frame(&mut d.frame, departure, work, spare, clone)
    }

    /// [`P4Pipeline::egress`] on `frame` as it departs as `departure` says. The egress clone is
    /// made when the architecture makes it: v1model's of the frame before the deparser, PSA's
    /// of the frame the deparser wrote, whether or not egress dropped it.
    fn egress_frame(
        &self,
        frame: &mut FrameBuf,
        departure: Departure,
        work: &mut P4Scratch,
        spare: &mut dyn FnMut() -> FrameBuf,
        clone: &mut Option<(Session, FrameBuf)>,
    ) -> P4Egress {
        match &frame.p4 {
            Some(carried) if work.packet.restore(carried) => {}
            _ => return P4Egress::Drop,
        }
        let e = self.datapath.egress_control(&mut work.packet, frame.bytes(), departure);
        let deparsed_clone = e.clone.filter(|_| e.clone_deparsed);
        if let Some(s) = e.clone.filter(|_| !e.clone_deparsed) {
            *clone = Some(self.egress_clone(s, frame, work, spare));
        }
        // A PSA clone is of the deparsed frame: the deparser runs for it even when dropped.
        if !e.sent && deparsed_clone.is_none() {
            return P4Egress::Drop;
        }
        let mut len = frame.len;
        let written = self
            .datapath
            .egress_finish(&mut work.packet, frame.buffer_mut(), &mut len, departure);
        frame.len = len;
        if !written {
            return P4Egress::Drop;
        }
        if let Some(s) = deparsed_clone {
            *clone = Some(self.egress_clone(s, frame, work, spare));
        }
        if !e.sent {
            return P4Egress::Drop;
        }
        if e.recirculate {
            return P4Egress::Recirculate(self.datapath.recirculation(&work.packet));
        }
        P4Egress::Send
    }

    /// The egress-to-egress clone of `frame` (state in `work.packet`) for `session`, in a frame
    /// from `spare`.
    fn egress_clone(
        &self,
        session: Session,
        frame: &FrameBuf,
        work: &mut P4Scratch,
        spare: &mut dyn FnMut() -> FrameBuf,
    ) -> (Session, FrameBuf) {
        let mut copy = spare();
        copy.copy_from(frame);
        self.datapath.egress_clone(&work.packet, &mut work.clone);
        work.clone.save(copy.p4.get_or_insert_with(Box::default));
        (session, copy)
    }

    /// Makes `copy` the ingress-to-egress clone of `frame`, whose ingress in `work` (just run)
    /// asked for one: the frame as it arrived, parsed again, as BMv2 does; false if it does not
    /// fit `copy`.
    pub fn clone_of(&self, frame: &FrameBuf, copy: &mut FrameBuf, work: &mut P4Scratch) -> bool {
        copy.copy_from(frame);
        let mut len = 0;
        let made = self
            .datapath
            .ingress_clone(&work.packet, &mut work.clone, copy.buffer_mut(), &mut len);
        copy.len = len;
        copy.layout = None;
        work.clone.save(copy.p4.get_or_insert_with(Box::default));
        made
    }
}

/// A copy of a frame's P4 state for its multicast replica `rid`: of `instance_type`, or of the
/// frame's own (a clone's copies stay clones) when 0.
pub fn replica_state(from: &FrameBuf, to: &mut FrameBuf, rid: u16, instance_type: u32) {
    if let Some(src) = &from.p4 {
        let st: &mut CarriedState = to.p4.get_or_insert_with(Box::default);
        st.clone_from(src);
        st.mark_copy(rid, instance_type);
    }
}
