//! The simulator: hosts and switches joined by in-memory links, run on a virtual clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use intlab_switch::SwitchSpec;
use intlab_switch::counters::PortCounters;
use intlab_switch::frame::FrameBuf;
use intlab_transport::HostStack;
use intlab_transport::cc::ControllerConfig;
use intlab_transport::endpoint::{EndpointConfig, EndpointReport};
use intlab_transport::flow::{FlowPath, FlowSpec};

use crate::agenda::Agenda;
use crate::host::BedHost;
use crate::switch::{BedSwitch, Peer};

/// A host of the simulator (its index, in the order added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostId(pub usize);

/// A switch of the simulator (its index, in the order added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchId(pub usize);

/// What the simulator refuses.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The switch runs a P4 program: the simulator runs the built-in pipeline only.
    #[error("switch {0}: the simulator runs the built-in pipeline, not P4 programs")]
    P4(String),
    /// A port named that does not exist.
    #[error("switch {switch} has no port {port}")]
    NoPort {
        /// The switch.
        switch: String,
        /// The port index.
        port: usize,
    },
    /// A port or host linked twice.
    #[error("{0} is linked already")]
    Linked(String),
    /// A host's transport could not start.
    #[error("host {host}: {cause}")]
    Host {
        /// The host.
        host: String,
        /// Why.
        cause: std::io::Error,
    },
}

enum Event {
    /// Run host `.0`.
    Host(usize),
    /// Run port `.1` of switch `.0`.
    Port(usize, usize),
    /// Refresh switch `.0`'s pauses.
    Refresh(usize),
    /// A frame arrives on port `.1` of switch `.0`.
    Arrive(usize, usize, FrameBuf),
    /// A frame reaches host `.0`.
    Deliver(usize, Vec<u8>),
    /// Host `.0` starts sending a flow.
    Start(usize, FlowSpec, ControllerConfig, FlowPath),
}

/// Hosts and switches on a virtual clock.
pub struct Simulator {
    now: u64,
    hosts: Vec<BedHost>,
    switches: Vec<BedSwitch>,
    agenda: Agenda<Event>,
    finished: Arc<AtomicUsize>,
    released: Vec<intlab_switch::tm::Released>,
}

impl Default for Simulator {
    fn default() -> Self {
        Simulator::new()
    }
}

impl Simulator {
    /// An empty bed at time 0.
    pub fn new() -> Simulator {
        Simulator {
            now: 0,
            hosts: Vec::new(),
            switches: Vec::new(),
            agenda: Agenda::default(),
            finished: Arc::new(AtomicUsize::new(0)),
            released: Vec::new(),
        }
    }

    /// The virtual time (ns).
    pub fn now_ns(&self) -> u64 {
        self.now
    }

    /// Adds a switch (its ports' `io` is not used).
    pub fn switch(&mut self, spec: SwitchSpec) -> Result<SwitchId, SimError> {
        if spec.p4.is_some() {
            return Err(SimError::P4(spec.name));
        }
        self.switches.push(BedSwitch::new(spec));
        Ok(SwitchId(self.switches.len() - 1))
    }

    /// Adds a host running the lab's transport with `cfg`.
    pub fn host(&mut self, cfg: EndpointConfig) -> Result<HostId, SimError> {
        let wire = BedHost::wire(cfg.ip, cfg.dscp);
        let name = cfg.name.clone();
        let stack =
            HostStack::new(cfg, wire, self.finished.clone()).map_err(|cause| SimError::Host { host: name, cause })?;
        self.hosts.push(BedHost::new(stack));
        Ok(HostId(self.hosts.len() - 1))
    }

    /// Links host `h` to port `port` of switch `s`: the port's rate and delay apply both ways.
    pub fn link_host(&mut self, h: HostId, s: SwitchId, port: usize) -> Result<(), SimError> {
        self.check_port(s, port)?;
        let host = &mut self.hosts[h.0];
        if host.attached.is_some() {
            return Err(SimError::Linked(host.stack.config().name.clone()));
        }
        host.attached = Some((s.0, port));
        self.set_peer(s, port, Peer::Host(h.0))
    }

    /// Links port `a.1` of switch `a.0` with port `b.1` of switch `b.0`.
    pub fn link_switches(&mut self, a: (SwitchId, usize), b: (SwitchId, usize)) -> Result<(), SimError> {
        self.check_port(a.0, a.1)?;
        self.check_port(b.0, b.1)?;
        self.set_peer(a.0, a.1, Peer::Switch(b.0.0, b.1))?;
        self.set_peer(b.0, b.1, Peer::Switch(a.0.0, a.1))
    }

    fn check_port(&self, s: SwitchId, port: usize) -> Result<(), SimError> {
        let sw = &self.switches[s.0];
        if port >= sw.ports.len() {
            return Err(SimError::NoPort {
                switch: sw.spec.name.clone(),
                port,
            });
        }
        Ok(())
    }

    fn set_peer(&mut self, s: SwitchId, port: usize, peer: Peer) -> Result<(), SimError> {
        let sw = &mut self.switches[s.0];
        if sw.ports[port].peer != Peer::None {
            return Err(SimError::Linked(format!("{} port {port}", sw.spec.name)));
        }
        sw.ports[port].peer = peer;
        Ok(())
    }

    /// Host `h` expects `flow` (its receiver).
    pub fn expect(&mut self, h: HostId, flow: FlowSpec) {
        self.hosts[h.0].stack.expect(flow);
    }

    /// Host `h` sends `flow` from its `start_ns` under `cc` along `path`.
    pub fn send(&mut self, h: HostId, flow: FlowSpec, cc: ControllerConfig, path: FlowPath) {
        self.agenda
            .add(flow.start_ns.max(self.now), Event::Start(h.0, flow, cc, path));
    }

    /// Hands `frame` to host `h` at `at_ns`, as if it came off its link (a test's PFC frame).
    pub fn inject(&mut self, h: HostId, frame: Vec<u8>, at_ns: u64) {
        self.agenda.add(at_ns.max(self.now), Event::Deliver(h.0, frame));
    }

    /// Keeps, from now on, when host `h` put each frame on its link and its length.
    pub fn log_link(&mut self, h: HostId) {
        self.hosts[h.0].link_log.get_or_insert_with(Vec::new);
    }

    /// What host `h` put on its link since [`Simulator::log_link`]: (when, bytes) per frame.
    pub fn link_log(&self, h: HostId) -> &[(u64, usize)] {
        self.hosts[h.0].link_log.as_deref().unwrap_or(&[])
    }

    /// Flows completed so far (sent and acknowledged, or received whole), counted by the hosts.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }

    /// Runs until `t_ns` or until nothing is left to do.
    pub fn run_until(&mut self, t_ns: u64) {
        self.run_while(t_ns, |_| true);
    }

    /// Runs until `flows` flows have finished (counted at both ends) or `t_ns`; true if they did.
    pub fn run_until_finished(&mut self, flows: usize, t_ns: u64) -> bool {
        self.run_while(t_ns, |bed| bed.finished() < flows);
        self.finished() >= flows
    }

    fn run_while(&mut self, t_ns: u64, go_on: impl Fn(&Simulator) -> bool) {
        self.arm_refreshes();
        while go_on(self) {
            match self.agenda.next_ns() {
                Some(t) if t <= t_ns => {}
                _ => break,
            }
            let Some((t, event)) = self.agenda.pop() else { break };
            self.now = t;
            self.handle(event);
        }
        if go_on(self) {
            self.now = self.now.max(t_ns);
        }
    }

    fn handle(&mut self, event: Event) {
        let now = self.now;
        match event {
            Event::Host(h) => {
                if self.hosts[h].armed == Some(now) {
                    self.hosts[h].armed = None;
                    self.step_host(h);
                }
            }
            Event::Start(h, flow, cc, path) => {
                if let Err(e) = self.hosts[h].stack.add_sender(flow, &cc, path, now) {
                    self.hosts[h].stack.fail(e);
                }
                self.step_host(h);
            }
            Event::Deliver(h, frame) => {
                self.hosts[h].receive(&frame, now);
                self.step_host(h);
            }
            Event::Arrive(s, port, frame) => {
                self.switches[s].arrive(port, frame);
                self.rearm_switch(s);
            }
            Event::Port(s, port) => {
                if self.switches[s].ports[port].armed == Some(now) {
                    self.switches[s].ports[port].armed = None;
                    self.run_port(s, port);
                }
            }
            Event::Refresh(s) => {
                if self.switches[s].refresh_armed == Some(now) {
                    self.switches[s].refresh_armed = None;
                    let next = self.switches[s].refresh_pauses(now);
                    self.rearm_switch(s);
                    self.arm_refresh(s, next);
                }
            }
        }
    }

    /// Runs host `h` now and puts what it sent on its link.
    fn step_host(&mut self, h: usize) {
        let now = self.now;
        let next = self.hosts[h].stack.step(now);
        let frames = self.hosts[h].take_frames();
        if let Some(log) = &mut self.hosts[h].link_log {
            log.extend(frames.iter().map(|f| (now, f.len())));
        }
        if let Some((s, port)) = self.hosts[h].attached {
            let sw = &mut self.switches[s];
            for bytes in frames {
                let at = sw.ports[port].inbound.arrival_ns(now, bytes.len() as u64);
                let frame = sw.frame(&bytes, port, at);
                self.agenda.add(at, Event::Arrive(s, port, frame));
            }
        }
        if let Some(t) = next {
            // A deadline already past is run at once, never twice at one instant.
            let t = t.max(now + 1);
            let host = &mut self.hosts[h];
            if host.armed.is_none_or(|a| t < a) {
                host.armed = Some(t);
                self.agenda.add(t, Event::Host(h));
            }
        }
    }

    /// Runs port `port` of switch `s` now; what reached the far end goes there.
    fn run_port(&mut self, s: usize, port: usize) {
        let mut released = std::mem::take(&mut self.released);
        self.switches[s].run_port(port, self.now, &mut released);
        let peer = self.switches[s].ports[port].peer;
        for r in released.drain(..) {
            match peer {
                Peer::Host(h) => {
                    self.agenda
                        .add(r.release_ns, Event::Deliver(h, r.frame.bytes().to_vec()));
                    self.switches[s].free(r.frame);
                }
                Peer::Switch(far, far_port) => {
                    let mut frame = r.frame;
                    frame.arrival_ns = r.release_ns;
                    frame.arrival_known = true;
                    self.agenda.add(r.release_ns, Event::Arrive(far, far_port, frame));
                }
                Peer::None => self.switches[s].free(r.frame),
            }
        }
        self.released = released;
        self.rearm_switch(s);
    }

    /// Puts every port of switch `s` whose next event changed on the agenda.
    fn rearm_switch(&mut self, s: usize) {
        for (i, p) in self.switches[s].ports.iter_mut().enumerate() {
            let Some(t) = p.queue.next_event_ns() else { continue };
            let t = t.max(self.now);
            if p.armed.is_none_or(|a| t < a) {
                p.armed = Some(t);
                self.agenda.add(t, Event::Port(s, i));
            }
        }
    }

    fn arm_refreshes(&mut self) {
        for s in 0..self.switches.len() {
            if self.switches[s].has_pfc() && self.switches[s].refresh_armed.is_none() {
                self.arm_refresh(s, Some(self.now));
            }
        }
    }

    fn arm_refresh(&mut self, s: usize, at: Option<u64>) {
        if let Some(t) = at.filter(|_| self.switches[s].has_pfc()) {
            let t = t.max(self.now + 1);
            self.switches[s].refresh_armed = Some(t);
            self.agenda.add(t, Event::Refresh(s));
        }
    }

    /// Host `h`'s report so far (its flows' records and samples, its counters), or the first
    /// error that stopped part of its work.
    pub fn report(&mut self, h: HostId) -> std::io::Result<EndpointReport> {
        let now = self.now;
        let stack = &mut self.hosts[h.0].stack;
        match stack.take_error() {
            Some(e) => Err(e),
            None => Ok(stack.report(now)),
        }
    }

    /// The counters of port `port` of switch `s`.
    pub fn port_counters(&self, s: SwitchId, port: usize) -> &PortCounters {
        &self.switches[s.0].ports[port].counters
    }
}
