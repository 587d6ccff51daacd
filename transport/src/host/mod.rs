//! One host's transport as a runtime task: its [`HostStack`] fed from the host's sockets. It
//! receives in batches, reads PFC frames as a NIC obeys them, takes the endpoint's commands and
//! reports at the end.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use crossbeam_channel::{Receiver, Sender};
use int_format::roce::ROCEV2_PORT;
use intlab_runtime::clock::Clock;
use intlab_runtime::{Context, Task};

use crate::cc::ControllerConfig;
use crate::endpoint_config::EndpointConfig;
use crate::endpoint_report::{EndpointReport, HostNow, Probe};
use crate::flow::{FlowPath, FlowSpec};
use crate::pause::PauseListener;
use crate::programs::Programs;
use crate::socket::{BATCH, RawSender, RecvBatch, SendBatch, Socket};
use crate::stack::{HostStack, Wire};
use intlab_runtime::Waker;

/// Batches read per socket per run, so sending is never starved.
const RX_BATCHES_PER_RUN: usize = 4;
/// A run this long (ns) after the worker's last poll reads the PFC socket itself before it
/// sends: past the usual wake-up lateness, so a worker that keeps up never pays the syscall.
const PAUSE_RECHECK_NS: u64 = 50_000;
/// Tokens of the host's descriptors.
const ROCE: u32 = 0;
const INT: u32 = 1;
const PAUSE: u32 = 2;
const PROGRAMS: u32 = 3;

/// A host's sockets, opened in its namespace.
pub(crate) struct Sockets {
    roce: Socket,
    int: Socket,
    raw: RawSender,
    /// PFC frames, when the host honours them.
    pause: Option<PauseListener>,
}

impl Sockets {
    /// Opens them in the calling thread's namespace.
    pub(crate) fn open(ip: Ipv4Addr, int_port: u16, dscp: u8, pfc: bool) -> io::Result<Sockets> {
        Ok(Sockets {
            roce: Socket::bind(SocketAddrV4::new(ip, ROCEV2_PORT), dscp)?,
            int: Socket::bind(SocketAddrV4::new(ip, int_port), dscp)?,
            raw: RawSender::open()?,
            pause: if pfc {
                Some(PauseListener::open().map_err(|e| io::Error::new(e.kind(), format!("PFC socket: {e}")))?)
            } else {
                None
            },
        })
    }
}

impl Wire for Sockets {
    fn send_replies(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        self.roce.send_batch(batch)
    }

    fn send_packets(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        self.raw.send_batch(batch)
    }
}

/// The host task.
pub(crate) struct Host {
    stack: HostStack<Sockets>,
    /// The programs using the host's NIC through its verbs.
    programs: Programs,
    commands: Receiver<Command>,
    report: Sender<io::Result<EndpointReport>>,
    clock: &'static Clock,
    rx: RecvBatch,
}

impl Host {
    pub(crate) fn new(
        cfg: EndpointConfig,
        sockets: Sockets,
        commands: Receiver<Command>,
        finished: Arc<AtomicUsize>,
        report: Sender<io::Result<EndpointReport>>,
    ) -> io::Result<Host> {
        let port = intlab_nic_channel::device::PortInfo {
            mtu: cfg.mtu as u32,
            rate_bps: cfg.line_rate_bps,
            gid: intlab_nic_channel::device::gid_of(cfg.ip.octets()),
        };
        Ok(Host {
            programs: Programs::new(port)?,
            stack: HostStack::new(cfg, sockets, finished)?,
            commands,
            report,
            clock: Clock::get(),
            rx: RecvBatch::default(),
        })
    }

    /// Reads the PFC frames that arrived; one for the host's data priority pauses (or resumes)
    /// its NIC from when it arrived.
    fn receive_pauses(&mut self) {
        let priority = usize::from(self.stack.config().priority);
        let rate = self.stack.config().line_rate_bps;
        let Some(listener) = &mut self.stack.wire_mut().pause else {
            return;
        };
        match listener.read(priority, rate, self.clock) {
            Ok((frames, last)) => self.stack.pauses(frames, last, self.clock.now_ns()),
            Err(e) => self
                .stack
                .fail(io::Error::new(e.kind(), format!("reading PFC frames: {e}"))),
        }
    }

    fn receive(&mut self, via_int: bool) {
        for _ in 0..RX_BATCHES_PER_RUN {
            let sockets = self.stack.wire();
            let sock = if via_int { &sockets.int } else { &sockets.roce };
            let n = match sock.recv_batch(&mut self.rx) {
                Ok(n) => n,
                Err(e) => {
                    self.stack.fail(io::Error::new(e.kind(), format!("receive: {e}")));
                    return;
                }
            };
            if n == 0 {
                break;
            }
            let now = self.clock.now_ns();
            let map = self.clock.realtime_map();
            // The kernel's receive stamp, as a NIC's: a host thread that lost its core for
            // 2 ms (25 us of the scenario's time at dilation 100) would otherwise read every
            // ACK it then finds as 25 us late, which TIMELY's RTT gradient answers with a cut
            // to its minimum rate (63.6 % goodput against the simulator's 72 % in one CI run).
            if let Some(t) = self.rx.get(0).1.realtime_ns {
                let first = map.lab_ns(t);
                self.stack.note_lateness(first, now.saturating_sub(first));
            }
            for i in 0..n {
                let (bytes, meta) = self.rx.get(i);
                let arrived = meta.realtime_ns.map_or(now, |t| map.lab_ns(t));
                self.stack.datagram(bytes, meta, via_int, arrived);
            }
            if n < BATCH {
                break;
            }
        }
    }
}

impl Task for Host {
    fn name(&self) -> &str {
        &self.stack.config().name
    }

    fn sources(&self) -> Vec<(RawFd, u32)> {
        let sockets = self.stack.wire();
        let mut fds = vec![
            (sockets.roce.fd(), ROCE),
            (sockets.int.fd(), INT),
            (self.programs.fd(), PROGRAMS),
        ];
        if let Some(p) = &sockets.pause {
            fds.push((p.fd(), PAUSE));
        }
        fds
    }

    fn run(&mut self, cx: &mut Context<'_>) -> Option<u64> {
        if let Some(d) = cx.deadline {
            let late = cx.now().saturating_sub(d);
            self.stack.note_lateness(d, late);
        }
        if let Some(h) = cx.latest_hiccup() {
            self.stack.note_hiccup(h);
        }
        while let Ok(cmd) = self.commands.try_recv() {
            let now = self.clock.now_ns();
            match cmd {
                Command::Send(flow, cc, path) => {
                    if let Err(e) = self.stack.add_sender(flow, &cc, path, now) {
                        self.stack.fail(e);
                    }
                }
                Command::Expect(flow) => self.stack.expect(flow),
                Command::Probe(p) => self.stack.send_probe(p, now),
                Command::MeasureFrom(t) => self.stack.measure_from(t),
                // Whoever asked may have given up waiting: nothing to tell then.
                Command::Now(reply) => drop(reply.send(HostNow {
                    flows: self.stack.flows_now(),
                    qps: self.stack.program_qps_now(),
                    objects: self.stack.program_objects(),
                })),
                Command::Program(req) => self.programs.request(req, &mut self.stack, now),
            }
        }
        for &token in cx.ready {
            match token {
                PAUSE => self.receive_pauses(),
                PROGRAMS => self.programs.service(&mut self.stack, cx.now()),
                _ => self.receive(token == INT),
            }
        }
        // A pause that came since the worker last polled (it lost its core, or other tasks
        // ran long) must stop the frames this run is about to send, as a NIC obeys a pause
        // when it arrives, not when its driver gets round to it.
        if cx.now().saturating_sub(cx.polled_ns) > PAUSE_RECHECK_NS && !cx.ready.contains(&PAUSE) {
            self.receive_pauses();
        }
        let next = self.stack.step(cx.now());
        self.programs.deliver(&mut self.stack, cx.now());
        next
    }

    fn stop(&mut self) {
        self.programs.close_all(&mut self.stack);
        let report = match self.stack.take_error() {
            Some(e) => Err(e),
            None => Ok(self.stack.report(self.clock.now_ns())),
        };
        // The owner may have gone; then nobody needs the report.
        let _unheard = self.report.send(report);
    }
}

/// What an endpoint sends its host task.
pub(crate) enum Command {
    Send(FlowSpec, ControllerConfig, FlowPath),
    Expect(FlowSpec),
    Probe(Probe),
    MeasureFrom(u64),
    Now(Sender<HostNow>),
    Program(crate::programs::ProgramRequest),
}

/// Where a host takes its programs' requests from (the command file hands them over).
#[derive(Clone)]
pub struct ProgramPort {
    pub(crate) name: String,
    pub(crate) commands: Sender<Command>,
    pub(crate) waker: Waker,
}

impl std::fmt::Debug for ProgramPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgramPort({})", self.name)
    }
}

impl ProgramPort {
    /// The host's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Hands `req` to the host; when the host has stopped, answers it with `EIO` and says so.
    pub fn send(&self, req: crate::programs::ProgramRequest) -> io::Result<()> {
        match self.commands.send(Command::Program(req)) {
            Ok(()) => {
                self.waker.wake();
                Ok(())
            }
            Err(e) => {
                if let Command::Program(req) = e.into_inner() {
                    (req.reply)(Err(libc::EIO));
                }
                Err(io::Error::other(format!("host {} has stopped", self.name)))
            }
        }
    }
}
