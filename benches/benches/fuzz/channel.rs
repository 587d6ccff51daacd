//! The channel between a program and its NIC, as a hostile program drives it: mutated bytes
//! through every decoder (commands, answers, queue entries), and sequences of commands with
//! arbitrary handles, sizes, masks and attributes, and garbage in the work queues and their
//! counters, carried out by a host's NIC (`transport::programs`) for a program that is this
//! very process. Nothing may panic; whatever is refused is refused with an errno.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use intlab_nic_channel::shared::SharedMapping;
use intlab_runtime::sys::pidfd::PidFd;
use intlab_runtime::sys::process_memory::ProcessMemory;
use intlab_transport::HostStack;
use intlab_transport::endpoint::EndpointConfig;
use intlab_transport::flow::FlowPath;
use intlab_transport::programs::{Caller, ProgramRequest, Programs, RequestKind};
use nic_channel::command::{Answer, Caps, Command, NONE, QpAttrs};
use nic_channel::device::{PROTOCOL_VERSION, PortInfo, gid_of};
use nic_channel::entry::{Cqe, RECV_WQE_LEN, RecvEntry, SEND_WQE_LEN, SendEntry, SendOp, Sge};
use nic_channel::queue::{AREA_LEN, Area, Layout, Queue, queue_len};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::mutation::*;
use crate::transport::Nowhere;
use crate::{Report, Tally, finish, runner};

use intlab_nic_channel as nic_channel;

/// Bytes of a valid command, entry or answer, and what damage does to them.
#[derive(Debug, Clone)]
pub struct Damaged {
    which: u8,
    seed: u64,
    mutations: Vec<Mutation>,
}

fn damaged() -> impl Strategy<Value = Damaged> {
    (any::<u8>(), any::<u64>(), proptest::collection::vec(mutation(), 0..4))
        .prop_map(|(which, seed, mutations)| Damaged { which, seed, mutations })
}

/// A command of every kind, its fields drawn from `seed`.
fn sample_command(which: u8, seed: u64) -> Command {
    let s = |k: u32| (seed.rotate_left(k) & 0xffff) as u32;
    let attrs = QpAttrs {
        state: s(1) % 8,
        path_mtu: s(2) % 6,
        dgid: gid_of([198, 18, 0, 2]),
        timeout: (s(3) % 32) as u8,
        ..QpAttrs::default()
    };
    match which % 18 {
        0 => Command::Hello {
            version: PROTOCOL_VERSION,
            doorbell_fd: 3,
            area_fd: 4,
            async_fd: 5,
            spares: vec![(6, 7); (s(4) % 5) as usize],
        },
        1 => Command::AddSpares {
            spares: vec![(8, 9); (s(5) % 3) as usize],
        },
        2 => Command::Goodbye,
        3 => Command::AllocPd,
        4 => Command::DeallocPd { pd: s(6) },
        5 => Command::RegMr {
            pd: s(7),
            addr: seed,
            len: u64::from(s(8)),
            access: s(9),
        },
        6 => Command::DeregMr { key: s(10) },
        7 => Command::CreateCq {
            cqe: s(11),
            ring_fd: 10,
            entries: s(12),
            user_handle: seed,
            channel_fd: NONE,
        },
        8 => Command::DestroyCq { cq: s(13) },
        9 => Command::CreateSrq {
            pd: s(14),
            max_wr: s(15),
            max_sge: s(16) % 9,
            limit: s(17),
            ring_fd: 11,
            entries: s(18),
            user_handle: seed,
        },
        10 => Command::ModifySrq {
            srq: s(19),
            mask: s(20),
            max_wr: s(21),
            limit: s(22),
        },
        11 => Command::QuerySrq { srq: s(23) },
        12 => Command::DestroySrq { srq: s(24) },
        13 => Command::CreateQp {
            qp_type: s(25) % 5,
            pd: s(26),
            send_cq: s(27),
            recv_cq: s(28),
            srq: NONE,
            sig_all: seed & 1 == 1,
            caps: Caps::default(),
            ring_fd: 12,
            sq_entries: s(29),
            rq_entries: s(30),
            user_handle: seed,
        },
        14 => Command::ModifyQp {
            qpn: s(31),
            mask: s(32),
            attr: attrs,
        },
        15 => Command::QueryQp { qpn: s(33) },
        16 => Command::DestroyQp { qpn: s(34) },
        _ => Command::CreateCompChannel,
    }
}

/// A send request of every kind, its fields drawn from `seed`.
fn sample_send(seed: u64) -> SendEntry {
    let ops = [
        SendOp::Write,
        SendOp::WriteImm,
        SendOp::Send,
        SendOp::SendImm,
        SendOp::Read,
        SendOp::CompareSwap,
        SendOp::FetchAdd,
    ];
    let mut sges = [Sge::default(); nic_channel::entry::MAX_SGE];
    sges[0] = Sge {
        addr: seed,
        length: (seed >> 40) as u32 & 0xffff,
        lkey: (seed >> 8) as u32,
    };
    SendEntry {
        wr_id: seed,
        op: ops[(seed % 7) as usize],
        signaled: seed & 2 != 0,
        fence: seed & 4 != 0,
        solicited: seed & 8 != 0,
        sges,
        num_sge: (seed % 3) as u8,
        inline: (seed & 16 != 0).then_some(([seed as u8; nic_channel::entry::MAX_INLINE], (seed % 300) as u16)),
        imm: seed as u32,
        remote_addr: seed.rotate_left(7),
        rkey: (seed >> 16) as u32,
        compare_add: seed,
        swap: !seed,
        ud: (seed & 32 != 0).then_some(nic_channel::entry::UdAddr {
            addr: [198, 18, 0, (seed % 4) as u8],
            qpn: seed as u32 & 0xff_ffff,
            qkey: 7,
        }),
    }
}

/// Decodes damaged bytes of every kind: a decoder may refuse, never panic, and what it takes
/// must be what it writes back (decode, encode and decode again gives the same).
fn decoders(d: &Damaged, tally: &Tally) -> Result<(), TestCaseError> {
    let mut buf = Vec::new();
    match d.which % 4 {
        0 => {
            let c = sample_command(d.which / 4, d.seed);
            c.encode(0x1000, Answer::room_for(&c), &mut buf);
            let bytes = apply(buf, &d.mutations);
            match Command::decode(&bytes) {
                Ok((h, c)) => {
                    tally.count("command decoded");
                    let mut again = Vec::new();
                    c.encode(h.response, usize::from(h.out_words) * 4, &mut again);
                    let (h2, c2) =
                        Command::decode(&again).map_err(|e| TestCaseError::fail(format!("re-decoding: {e}")))?;
                    prop_assert_eq!(c2, c);
                    prop_assert_eq!(h2.response, h.response);
                }
                Err(_) => tally.count("command refused"),
            }
            // An answer read back for any command from the same damaged bytes.
            if Answer::decode(&sample_command(d.which, d.seed), &bytes).is_ok() {
                tally.count("answer decoded");
            }
        }
        1 => {
            sample_send(d.seed).encode(&mut buf);
            let bytes = apply(buf, &d.mutations);
            match SendEntry::decode(&bytes) {
                Ok(e) => {
                    tally.count("send request decoded");
                    let mut again = Vec::new();
                    e.encode(&mut again);
                    prop_assert_eq!(SendEntry::decode(&again).ok(), Some(e));
                }
                Err(_) => tally.count("send request refused"),
            }
        }
        2 => {
            let mut sges = [Sge::default(); nic_channel::entry::MAX_SGE];
            sges[1].addr = d.seed;
            RecvEntry {
                wr_id: d.seed,
                sges,
                num_sge: (d.seed % 9) as u8,
            }
            .encode(&mut buf);
            let bytes = apply(buf, &d.mutations);
            match RecvEntry::decode(&bytes) {
                Ok(e) => {
                    tally.count("receive request decoded");
                    let mut again = Vec::new();
                    e.encode(&mut again);
                    prop_assert_eq!(RecvEntry::decode(&again).ok(), Some(e));
                }
                Err(_) => tally.count("receive request refused"),
            }
        }
        _ => {
            Cqe {
                wr_id: d.seed,
                status: 5,
                opcode: 128,
                ..Cqe::default()
            }
            .encode(&mut buf);
            let bytes = apply(buf, &d.mutations);
            match Cqe::decode(&bytes) {
                Ok(_) => tally.count("completion decoded"),
                Err(_) => tally.count("completion refused"),
            }
        }
    }
    Ok(())
}

/// One step of a hostile program.
#[derive(Debug, Clone)]
pub enum Step {
    /// A command, with handles drawn from the small numbers the NIC gives out.
    Command(u8, u64),
    /// Damaged send request bytes into QP `qp`'s send queue, its producer moved by `jump`.
    Send(u8, u64, Vec<Mutation>, u64),
    /// Damaged receive request bytes into QP `qp`'s receive queue.
    Recv(u8, u64, Vec<Mutation>),
    /// A CQ's consumer counter set to anything, and an arm word.
    Counters(u8, u64, u64),
    /// Time passes and the host runs.
    Run(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (any::<u8>(), any::<u64>()).prop_map(|(w, s)| Step::Command(w, s)),
        4 => (any::<u8>(), any::<u64>(), proptest::collection::vec(mutation(), 0..3), prop_oneof![4 => Just(1u64), 1 => any::<u64>()])
            .prop_map(|(q, s, m, j)| Step::Send(q, s, m, j)),
        2 => (any::<u8>(), any::<u64>(), proptest::collection::vec(mutation(), 0..3)).prop_map(|(q, s, m)| Step::Recv(q, s, m)),
        1 => (any::<u8>(), any::<u64>(), any::<u64>()).prop_map(|(c, v, a)| Step::Counters(c, v, a)),
        2 => (1u32..2_000_000).prop_map(Step::Run),
    ]
}

/// A command's name, for findings.
fn kind(c: &Command) -> String {
    format!("{c:?}").split([' ', '{']).next().unwrap_or("").to_owned()
}

/// A descriptor of this process the NIC takes a copy of.
fn memfd(len: usize) -> OwnedFd {
    // SAFETY: a fresh anonymous file, its descriptor owned at once.
    let fd = unsafe { libc::memfd_create(c"intlab-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: resizing the file just made.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len as i64) }, 0);
    fd
}

fn socket_pair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills both on success.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "socketpair");
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn dup(fd: &OwnedFd) -> OwnedFd {
    fd.try_clone().expect("dup")
}

/// A queue in memory both sides map.
type Ring = Queue<Arc<SharedMapping>>;

/// The program's side of what it made: its queues, mapped here as the provider maps them.
struct Made {
    qps: Vec<(u32, Ring, Option<Ring>, u32)>,
    cqs: Vec<(u32, Ring, u32)>,
    area: Area<Arc<SharedMapping>>,
    doorbell: OwnedFd,
}

/// A NIC and its program, the program being this process.
struct Bench {
    stack: HostStack<Nowhere>,
    programs: Programs,
    pidfd: Arc<PidFd>,
    memory: Arc<ProcessMemory>,
    key: u64,
    made: Made,
    now: u64,
    /// Memory the program registers.
    buffer: Vec<u8>,
    /// Its key.
    mr_key: u32,
    /// The program said goodbye: its context is gone.
    gone: bool,
    _keep: Vec<OwnedFd>,
}

impl Bench {
    /// Sends `command` with the descriptors it names, and returns the NIC's answer or errno.
    fn command(&mut self, command: Command, fds: Vec<(RawFd, OwnedFd)>) -> Result<Option<Answer>, i32> {
        let mut answer = vec![0u8; Answer::room_for(&command)];
        let mut bytes = Vec::new();
        command.encode(answer.as_mut_ptr() as u64, answer.len(), &mut bytes);
        let (header, decoded) = Command::decode(&bytes).map_err(|_| libc::EINVAL)?;
        let got = Arc::new(Mutex::new(None));
        let g = got.clone();
        let hello = matches!(decoded, Command::Hello { .. });
        let req = ProgramRequest {
            key: self.key,
            kind: RequestKind::Command {
                header,
                command: decoded,
                caller: Caller {
                    pidfd: self.pidfd.clone(),
                    memory: hello.then(|| self.memory.clone()),
                    fds,
                    len: bytes.len(),
                },
            },
            reply: Box::new(move |r| *g.lock().unwrap_or_else(|p| p.into_inner()) = Some(r)),
        };
        self.programs.request(req, &mut self.stack, self.now);
        let r = got.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or(libc::EIO)?;
        r?;
        Ok(Answer::decode(&command, &answer).ok())
    }

    fn new() -> Result<Bench, TestCaseError> {
        let mut cfg = EndpointConfig::new("h1", Ipv4Addr::new(198, 18, 0, 1), 10_000_000_000, 10_000);
        cfg.programs.peers.insert(
            Ipv4Addr::new(198, 18, 0, 2),
            FlowPath {
                base_rtt_ns: 10_000,
                fabric_rtt_ns: 10_000,
                hops: 1,
            },
        );
        let stack = HostStack::new(cfg, Nowhere, Arc::new(std::sync::atomic::AtomicUsize::new(0)))
            .map_err(|e| TestCaseError::fail(format!("host: {e}")))?;
        let port = PortInfo {
            mtu: 1024,
            rate_bps: 10_000_000_000,
            gid: gid_of([198, 18, 0, 1]),
        };
        let programs = Programs::new(port).map_err(|e| TestCaseError::fail(format!("programs: {e}")))?;
        let pid = std::process::id();
        let pidfd = Arc::new(PidFd::open(pid).map_err(|e| TestCaseError::fail(format!("pidfd: {e}")))?);
        let memory = Arc::new(ProcessMemory::open(pid).map_err(|e| TestCaseError::fail(format!("memory: {e}")))?);
        // SAFETY: a fresh eventfd, owned at once.
        let doorbell = unsafe { OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)) };
        let area_fd = memfd(AREA_LEN);
        let area = Area::new(Arc::new(
            SharedMapping::map(dup(&area_fd), AREA_LEN).map_err(|e| TestCaseError::fail(e.to_string()))?,
        ))
        .ok_or_else(|| TestCaseError::fail("area"))?;
        let (program_async, nic_async) = socket_pair();
        let (program_spare, nic_spare) = socket_pair();
        let mut b = Bench {
            stack,
            programs,
            pidfd,
            memory,
            key: 1,
            made: Made {
                qps: Vec::new(),
                cqs: Vec::new(),
                area,
                doorbell: dup(&doorbell),
            },
            now: 0,
            buffer: vec![0; 1 << 16],
            mr_key: 0,
            gone: false,
            _keep: vec![program_async, program_spare],
        };
        let hello = Command::Hello {
            version: PROTOCOL_VERSION,
            doorbell_fd: doorbell.as_raw_fd(),
            area_fd: area_fd.as_raw_fd(),
            async_fd: nic_async.as_raw_fd(),
            spares: vec![(nic_spare.as_raw_fd(), 900)],
        };
        let fds = vec![
            (doorbell.as_raw_fd(), dup(&doorbell)),
            (area_fd.as_raw_fd(), dup(&area_fd)),
            (nic_async.as_raw_fd(), dup(&nic_async)),
            (nic_spare.as_raw_fd(), dup(&nic_spare)),
        ];
        b.command(hello, fds)
            .map_err(|e| TestCaseError::fail(format!("hello: errno {e}")))?;
        // What a program makes first, so that the steps find objects to work on: a PD, a CQ,
        // an RC QP on them.
        let tally = Tally::default();
        let pd = match b.command(Command::AllocPd, Vec::new()) {
            Ok(Some(Answer::Handle(pd))) => pd,
            other => return Err(TestCaseError::fail(format!("alloc pd: {other:?}"))),
        };
        let region = Command::RegMr {
            pd,
            addr: b.buffer.as_ptr() as u64,
            len: b.buffer.len() as u64,
            access: 0xf,
        };
        b.mr_key = match b.command(region, Vec::new()) {
            Ok(Some(Answer::Key(k))) => k,
            other => return Err(TestCaseError::fail(format!("reg mr: {other:?}"))),
        };
        let entries = 64;
        let fd = memfd(queue_len(entries, nic_channel::entry::CQE_LEN).unwrap_or(0));
        let cq = Command::CreateCq {
            cqe: 32,
            ring_fd: fd.as_raw_fd(),
            entries,
            user_handle: 0,
            channel_fd: NONE,
        };
        b.issue(cq, fd, &tally)?;
        let cq = b.made.cqs.first().map(|c| c.2).unwrap_or(NONE);
        let (sq, rq) = (16, 16);
        let fd = memfd(Layout::qp(sq, rq).map_or(0, |l| l.total()));
        let qp = Command::CreateQp {
            qp_type: 2,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: NONE,
            sig_all: false,
            caps: Caps {
                max_send_wr: sq,
                max_recv_wr: rq,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 64,
            },
            ring_fd: fd.as_raw_fd(),
            sq_entries: sq,
            rq_entries: rq,
            user_handle: 0,
        };
        b.issue(qp, fd, &tally)?;
        // Connected to the other host and ready to send, as perftest leaves its QP.
        if let Some(&(qpn, ..)) = b.made.qps.first() {
            let base = QpAttrs {
                port_num: 1,
                access: 0xf,
                path_mtu: 3,
                dest_qpn: 0x80_0001,
                dgid: gid_of([198, 18, 0, 2]),
                is_global: 1,
                hop_limit: 64,
                max_dest_rd_atomic: 4,
                max_rd_atomic: 4,
                min_rnr_timer: 1,
                timeout: 8,
                retry_cnt: 7,
                rnr_retry: 7,
                ..QpAttrs::default()
            };
            const STATE: u32 = 1;
            let steps = [
                (1, STATE | 8 | 16 | 32),
                (2, STATE | 128 | 256 | (1 << 20) | (1 << 12) | (1 << 17) | (1 << 15)),
                (3, STATE | 512 | 1024 | 2048 | (1 << 16) | (1 << 13)),
            ];
            for (state, mask) in steps {
                let attr = QpAttrs { state, ..base };
                b.command(Command::ModifyQp { qpn, mask, attr }, Vec::new())
                    .map_err(|e| TestCaseError::fail(format!("to state {state}: errno {e}")))?;
            }
        }
        prop_assert!(
            b.made.qps.len() == 1 && b.made.cqs.len() == 1,
            "the first objects: {:?}",
            tally.0.borrow()
        );
        Ok(b)
    }

    /// Rings the doorbell for object `index` and lets the NIC take what was posted.
    fn ring(&mut self, index: u32) -> Result<(), TestCaseError> {
        if self.made.area.mark(index) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: an 8-byte write to an eventfd this bench owns.
            let n = unsafe { libc::write(self.made.doorbell.as_raw_fd(), one.as_ptr().cast(), 8) };
            prop_assert_eq!(n, 8, "ringing: {}", std::io::Error::last_os_error());
        }
        // As the host task runs: what rang, then a step, then completions out.
        self.programs.service(&mut self.stack, self.now);
        self.stack.step(self.now);
        self.programs.deliver(&mut self.stack, self.now);
        Ok(())
    }

    fn step(&mut self, s: &Step, tally: &Tally) -> Result<(), TestCaseError> {
        match s {
            Step::Command(which, seed) => {
                let mut c = sample_command(*which, *seed);
                let mut fds = Vec::new();
                // Handles near those given out, so that many commands find their object.
                let small = |v: &mut u32| *v %= 8;
                match &mut c {
                    Command::Hello { .. } => tally.count("hello again"),
                    Command::DeallocPd { pd } => small(pd),
                    Command::RegMr { pd, addr, len, .. } => {
                        small(pd);
                        if seed & 1 == 0 {
                            // Memory of this process it may reach.
                            *addr = self.buffer.as_ptr() as u64;
                            *len %= self.buffer.len() as u64 + 1;
                        }
                    }
                    Command::DestroyCq { cq } => small(cq),
                    Command::CreateCq {
                        cqe, entries, ring_fd, ..
                    } => {
                        *cqe %= 64;
                        *entries = if seed & 1 == 0 { 64 } else { *entries };
                        let len = queue_len(*entries, nic_channel::entry::CQE_LEN).unwrap_or(4096);
                        let fd = memfd(len.min(1 << 24));
                        *ring_fd = fd.as_raw_fd();
                        fds.push((fd.as_raw_fd(), fd));
                    }
                    Command::CreateQp {
                        pd,
                        send_cq,
                        recv_cq,
                        caps,
                        ring_fd,
                        sq_entries,
                        rq_entries,
                        qp_type,
                        ..
                    } => {
                        small(pd);
                        small(send_cq);
                        small(recv_cq);
                        if seed & 2 == 0 {
                            *qp_type = 2;
                            *sq_entries = 16;
                            *rq_entries = 16;
                            *caps = Caps {
                                max_send_wr: 16,
                                max_recv_wr: 16,
                                max_send_sge: 2,
                                max_recv_sge: 2,
                                max_inline_data: 64,
                            };
                        }
                        let len = Layout::qp(*sq_entries, *rq_entries).map_or(4096, |l| l.total());
                        let fd = memfd(len.min(1 << 24));
                        *ring_fd = fd.as_raw_fd();
                        fds.push((fd.as_raw_fd(), fd));
                    }
                    Command::ModifyQp { qpn, .. } | Command::QueryQp { qpn } | Command::DestroyQp { qpn } => {
                        if let Some(q) = self.made.qps.get((*seed % 4) as usize) {
                            *qpn = q.0;
                        }
                    }
                    _ => {}
                }
                match fds.pop() {
                    Some((_, fd)) => self.issue(c, fd, tally)?,
                    None => self.issue_plain(c, tally)?,
                }
            }
            Step::Send(q, seed, mutations, jump) => {
                let Some(i) = (!self.made.qps.is_empty()).then(|| usize::from(*q) % self.made.qps.len()) else {
                    return Ok(());
                };
                let mut buf = Vec::with_capacity(SEND_WQE_LEN);
                let mut e = sample_send(*seed);
                if seed & 64 == 0 {
                    // Most requests name the program's own region, as programs do.
                    let len = (*seed >> 20) as u32 % 4096;
                    e.sges[0] = Sge {
                        addr: self.buffer.as_ptr() as u64 + (*seed % 4096),
                        length: len,
                        lkey: self.mr_key,
                    };
                    e.num_sge = 1;
                }
                e.encode(&mut buf);
                let mut bytes = apply(buf, mutations);
                bytes.resize(SEND_WQE_LEN, 0);
                let (_, send, _, doorbell) = &self.made.qps[i];
                let p = send.producer().load(Ordering::Relaxed);
                send.write(p, &bytes);
                send.producer().store(p.wrapping_add(*jump), Ordering::Release);
                let d = *doorbell;
                tally.count("send request posted");
                self.ring(d)?;
            }
            Step::Recv(q, seed, mutations) => {
                let Some(i) = (!self.made.qps.is_empty()).then(|| usize::from(*q) % self.made.qps.len()) else {
                    return Ok(());
                };
                let mut buf = Vec::with_capacity(RECV_WQE_LEN);
                let mut sges = [Sge::default(); nic_channel::entry::MAX_SGE];
                sges[0] = Sge {
                    addr: *seed,
                    length: (*seed >> 48) as u32,
                    lkey: (*seed >> 16) as u32,
                };
                RecvEntry {
                    wr_id: *seed,
                    sges,
                    num_sge: (*seed % 3) as u8,
                }
                .encode(&mut buf);
                let mut bytes = apply(buf, mutations);
                bytes.resize(RECV_WQE_LEN, 0);
                let (_, _, recv, doorbell) = &self.made.qps[i];
                if let Some(recv) = recv {
                    let p = recv.producer().load(Ordering::Relaxed);
                    recv.write(p, &bytes);
                    recv.producer().store(p + 1, Ordering::Release);
                }
                let d = *doorbell;
                tally.count("receive request posted");
                self.ring(d)?;
            }
            Step::Counters(c, value, arm) => {
                let Some(i) = (!self.made.cqs.is_empty()).then(|| usize::from(*c) % self.made.cqs.len()) else {
                    return Ok(());
                };
                let (doorbell, cq, _) = &self.made.cqs[i];
                cq.consumer().store(*value, Ordering::Release);
                cq.arm_producer().store(value.rotate_left(3), Ordering::Relaxed);
                cq.arm().store(*arm, Ordering::Release);
                let d = *doorbell;
                tally.count("counters overwritten");
                self.ring(d)?;
            }
            Step::Run(ns) => {
                self.now += u64::from(*ns);
                self.stack.step(self.now);
                self.programs.deliver(&mut self.stack, self.now);
                tally.count("host ran");
            }
        }
        Ok(())
    }

    /// Sends `c`, which names the shared memory `fd` for its queues, and maps them as the
    /// provider does when the NIC accepts it.
    fn issue(&mut self, c: Command, fd: OwnedFd, tally: &Tally) -> Result<(), TestCaseError> {
        let (is_qp, a, b) = match &c {
            Command::CreateQp {
                sq_entries, rq_entries, ..
            } => (true, *sq_entries, *rq_entries),
            Command::CreateCq { entries, .. } => (false, *entries, 0),
            _ => return self.issue_plain(c, tally),
        };
        let kind = kind(&c);
        match self.command(c, vec![(fd.as_raw_fd(), dup(&fd))]) {
            Ok(Some(Answer::Queue { handle, doorbell })) => {
                tally.count("command carried out");
                self.map_queues(is_qp, handle, doorbell, fd, a, b);
            }
            Ok(other) => return Err(TestCaseError::fail(format!("{kind} answered {other:?}"))),
            Err(errno) => {
                prop_assert!(errno > 0 && errno < 4096, "{kind}: errno {errno}");
                tally.count("command refused with an errno");
            }
        }
        Ok(())
    }

    /// Sends `c`, which names no shared memory.
    fn issue_plain(&mut self, c: Command, tally: &Tally) -> Result<(), TestCaseError> {
        let kind = kind(&c);
        let goodbye = matches!(c, Command::Goodbye);
        match self.command(c, Vec::new()) {
            Ok(_) => {
                tally.count("command carried out");
                self.gone |= goodbye;
            }
            Err(errno) => {
                prop_assert!(errno > 0 && errno < 4096, "{kind}: errno {errno}");
                tally.count("command refused with an errno");
            }
        }
        Ok(())
    }

    fn map_queues(&mut self, is_qp: bool, handle: u32, doorbell: u32, fd: OwnedFd, a: u32, b: u32) {
        let len = if is_qp {
            Layout::qp(a, b).map(|l| l.total())
        } else {
            queue_len(a, nic_channel::entry::CQE_LEN)
        };
        let Some(len) = len else { return };
        let Ok(m) = SharedMapping::map(fd, len).map(Arc::new) else {
            return;
        };
        if is_qp {
            let Some(layout) = Layout::qp(a, b) else { return };
            let send = Queue::new(m.clone(), 0, a, SEND_WQE_LEN);
            let recv = Queue::new(m, layout.send_len, b, RECV_WQE_LEN);
            if let Some(send) = send {
                self.made.qps.push((handle, send, recv, doorbell));
            }
        } else if let Some(q) = Queue::new(m, 0, a, nic_channel::entry::CQE_LEN) {
            self.made.cqs.push((doorbell, q, handle));
        }
    }
}

/// Damaged bytes through the decoders, then a hostile program's steps through a NIC.
pub fn fuzz_channel(cases: u32) -> Report {
    let started = Instant::now();
    let tally = Tally::default();
    let mut runner = runner(cases);
    let strategy = (damaged(), proptest::collection::vec(step(), 0..24));
    let result = runner.run(&strategy, |(d, steps)| {
        decoders(&d, &tally)?;
        let mut b = Bench::new()?;
        for s in &steps {
            b.step(s, &tally)?;
        }
        if b.stack.program_qps_now().iter().any(|q| q.packets_sent > 0) {
            tally.count("cases whose QP sent packets");
        }
        if !b.gone {
            let goodbye = b.command(Command::Goodbye, Vec::new());
            prop_assert!(goodbye.is_ok(), "goodbye refused: {goodbye:?}");
        }
        let (objects, qps) = b.stack.program_objects();
        prop_assert_eq!(objects, Default::default(), "objects left after goodbye");
        prop_assert_eq!(qps, 0, "QPs left after goodbye");
        Ok(())
    });
    finish("channel", cases, started, tally, result)
}
