//! A switch in memory that runs a program as BMv2's simple_switch does, frame by frame to
//! completion: ingress (with resubmissions), ingress clones, multicast replication, a queue in
//! front of egress (a frame's priority is its `qid` there), egress, egress clones,
//! recirculation. `intlab p4 test` and
//! `intlab p4 run` run programs on it; frames of any length go through it.

use std::collections::VecDeque;

use crate::exec::{Arrival, Carry, Datapath, Decision, Departure, INSTANCE_REPLICATION, PacketState, Session};

/// Room a frame's buffer keeps for headers a program adds.
const HEADROOM: usize = 4096;

/// Passes through ingress one frame may make by recirculation before the switch drops it.
const MAX_RECIRCULATIONS: usize = 64;

/// A frame waiting for egress.
struct Queued {
    port: u16,
    frame: Vec<u8>,
    state: PacketState,
    priority: u8,
    arrival_ns: u64,
    recirculations: usize,
}

/// simple_switch in memory.
pub struct SimSwitch<'d> {
    dp: &'d Datapath,
    now_ns: u64,
    queue: VecDeque<Queued>,
}

impl<'d> SimSwitch<'d> {
    /// A switch running `dp`'s program, its clock at 0.
    pub fn new(dp: &'d Datapath) -> SimSwitch<'d> {
        SimSwitch {
            dp,
            now_ns: 0,
            queue: VecDeque::new(),
        }
    }

    /// Sets the switch's clock (ns); it moves on by itself by a microsecond a frame.
    pub fn set_time(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
    }

    /// Sends `frame` in on P4 port `port` and runs the switch until nothing is left to do;
    /// returns the frames sent out, in order, with their ports.
    pub fn send(&mut self, port: u16, frame: &[u8]) -> Vec<(u16, Vec<u8>)> {
        self.now_ns += 1_000;
        let mut out = Vec::new();
        self.ingress(port, frame.to_vec(), None, 0);
        while let Some(q) = self.queue.pop_front() {
            self.egress(q, &mut out);
        }
        out
    }

    fn ingress(&mut self, port: u16, frame: Vec<u8>, carry: Option<&Carry>, recirculations: usize) {
        let dp = self.dp;
        let mut st = dp.packet_state();
        let mut len = frame.len();
        let mut buf = frame;
        buf.resize(len + HEADROOM, 0);
        let arrival = Arrival {
            port,
            now_ns: self.now_ns,
        };
        let r = dp.ingress_as(&mut st, &mut buf, &mut len, arrival, carry);
        // An ingress clone is queued before the original, as simple_switch queues it.
        if let Some(session) = r.clone_session {
            let mut cst = dp.packet_state();
            let mut cbuf = vec![0; buf.len()];
            let mut clen = 0;
            if dp.ingress_clone(&st, &mut cst, &mut cbuf, &mut clen) {
                cbuf.truncate(clen);
                self.send_to_session(session, cbuf, cst, r.priority, recirculations);
            }
        }
        buf.truncate(len);
        match r.decision {
            Decision::Drop => {}
            Decision::Unicast(p) => self.enqueue(p, buf, st, r.priority, recirculations),
            Decision::Multicast(g) => self.replicate(g, &buf, &st, r.priority, recirculations),
        }
    }

    fn send_to_session(
        &mut self,
        session: Session,
        frame: Vec<u8>,
        state: PacketState,
        priority: u8,
        recirculations: usize,
    ) {
        if let Some(g) = session.group {
            self.replicate_keeping(g, &frame, &state, priority, recirculations);
        }
        if let Some(p) = session.port {
            self.enqueue(p, frame, state, priority, recirculations);
        }
    }

    /// A copy for each port of group `g`, as replicas (`instance_type` 5).
    fn replicate(&mut self, g: u16, frame: &[u8], st: &PacketState, priority: u8, recirculations: usize) {
        let copies = self.dp.control().groups.get(&g).cloned().unwrap_or_default();
        for (port, rid) in copies {
            let mut s = st.clone();
            s.mark_copy(rid, INSTANCE_REPLICATION);
            self.enqueue(port, frame.to_vec(), s, priority, recirculations);
        }
    }

    /// A copy for each port of group `g` that keeps its kind (a clone's copies stay clones).
    fn replicate_keeping(&mut self, g: u16, frame: &[u8], st: &PacketState, priority: u8, recirculations: usize) {
        let copies = self.dp.control().groups.get(&g).cloned().unwrap_or_default();
        for (port, rid) in copies {
            let mut s = st.clone();
            s.set_rid(rid);
            self.enqueue(port, frame.to_vec(), s, priority, recirculations);
        }
    }

    fn enqueue(&mut self, port: u16, frame: Vec<u8>, state: PacketState, priority: u8, recirculations: usize) {
        self.queue.push_back(Queued {
            port,
            frame,
            state,
            priority,
            arrival_ns: self.now_ns,
            recirculations,
        });
    }

    fn egress(&mut self, q: Queued, out: &mut Vec<(u16, Vec<u8>)>) {
        let dp = self.dp;
        let Queued {
            port,
            frame,
            mut state,
            priority,
            arrival_ns,
            recirculations,
        } = q;
        let d = Departure {
            port,
            arrival_ns,
            enqueued_ns: arrival_ns,
            departure_ns: self.now_ns,
            qid: priority,
            ..Departure::default()
        };
        let e = dp.egress_control(&mut state, &frame, d);
        let deparsed_clone = e.clone.filter(|_| e.clone_deparsed);
        if let Some(session) = e.clone.filter(|_| !e.clone_deparsed) {
            let mut cst = dp.packet_state();
            dp.egress_clone(&state, &mut cst);
            self.send_to_session(session, frame.clone(), cst, priority, recirculations);
        }
        if !e.sent && deparsed_clone.is_none() {
            return;
        }
        let mut len = frame.len();
        let mut buf = frame;
        buf.resize(len + HEADROOM, 0);
        if !dp.egress_finish(&mut state, &mut buf, &mut len, d) {
            return;
        }
        buf.truncate(len);
        if let Some(session) = deparsed_clone {
            let mut cst = dp.packet_state();
            dp.egress_clone(&state, &mut cst);
            self.send_to_session(session, buf.clone(), cst, priority, recirculations);
        }
        if !e.sent {
            return;
        }
        if e.recirculate {
            if recirculations >= MAX_RECIRCULATIONS {
                tracing::warn!(target: "p4", "a frame recirculated {MAX_RECIRCULATIONS} times: dropped");
                return;
            }
            let carry = dp.recirculation(&state);
            self.ingress(0, buf, Some(&carry), recirculations + 1);
            return;
        }
        out.push((port, buf));
    }
}
