//! The NIC's verbs engine between two hosts joined by an in-memory wire with a fixed delay, on
//! a virtual clock: each verb and opcode against what the InfiniBand specification (and
//! SoftRoCE) say it does, the error paths included.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use int_format::ipv4::Ipv4Packet;
use int_format::roce::{Bth, Opcode, ROCEV2_PORT};
use int_format::udp::UdpPacket;
use intlab_transport::endpoint::EndpointConfig;
use intlab_transport::flow::FlowPath;
use intlab_transport::program_qp::ProgramOwner;
use intlab_transport::socket::{RecvMeta, SendBatch};
use intlab_transport::verbs::memory::{Memory, MemoryFault, VecMemory};
use intlab_transport::verbs::mr::Access;
use intlab_transport::verbs::qp::{AttrMask, QpAttr, QpCaps, QpState, QpType};
use intlab_transport::verbs::wr::{
    InlineData, RecvWr, SendOpcode, SendWr, Sge, SgeList, UdDest, WcOpcode, WcStatus, WorkCompletion,
};
use intlab_transport::verbs::{AsyncEvent, NicEvent};
use intlab_transport::{HostStack, QpRequest, Wire};

/// A datagram on the wire: its UDP payload and how it is addressed.
#[derive(Debug, Clone)]
struct Datagram {
    payload: Vec<u8>,
    from: SocketAddrV4,
    to: SocketAddrV4,
    tos: u8,
}

impl Datagram {
    fn opcode(&self) -> Option<Opcode> {
        // Datagrams here carry no INT (the controller is line rate).
        Bth::new_checked(&self.payload[..]).ok().map(|b| b.opcode())
    }
}

struct Loop {
    ip: Ipv4Addr,
    out: Vec<Datagram>,
}

impl Wire for Loop {
    fn send_replies(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        let (ip, out) = (self.ip, &mut self.out);
        Ok(batch.drain(|payload, dst| {
            out.push(Datagram {
                payload: payload.to_vec(),
                from: SocketAddrV4::new(ip, ROCEV2_PORT),
                to: dst,
                tos: 0,
            })
        }))
    }

    fn send_packets(&mut self, batch: &mut SendBatch) -> io::Result<usize> {
        let out = &mut self.out;
        Ok(batch.drain(|packet, _| {
            let ip = Ipv4Packet::new_checked(packet).expect("an IPv4 packet");
            let udp = UdpPacket::new_checked(ip.payload()).expect("a UDP datagram");
            out.push(Datagram {
                payload: udp.payload().to_vec(),
                from: SocketAddrV4::new(ip.src_addr(), udp.src_port()),
                to: SocketAddrV4::new(ip.dst_addr(), udp.dst_port()),
                tos: (ip.dscp() << 2) | ip.ecn().bits(),
            })
        }))
    }
}

/// A program's memory both the test and the NIC reach.
#[derive(Clone)]
struct Shared(Arc<Mutex<VecMemory>>);

impl Memory for Shared {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        self.0.lock().expect("memory").read(addr, buf)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        self.0.lock().expect("memory").write(addr, data)
    }
}

const BASE: u64 = 0x10_0000;
const MEM: usize = 1 << 22;
const ONE_WAY_NS: u64 = 5_000;

/// The program a test's contexts are made for.
fn owner() -> ProgramOwner {
    ProgramOwner {
        pid: std::process::id(),
        command: "verbs-test".into(),
    }
}

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

/// Two hosts, a program on each, and the wire between them.
struct Net {
    hosts: Vec<HostStack<Loop>>,
    mem: Vec<Shared>,
    ctx: Vec<usize>,
    now: u64,
    wire: BinaryHeap<Reverse<(u64, u64, usize)>>,
    parked: Vec<Option<Datagram>>,
    /// Drops what it returns true for.
    drop: Box<dyn FnMut(&Datagram) -> bool>,
    /// How long each datagram takes to arrive (ns).
    one_way: Box<dyn FnMut(&Datagram) -> u64>,
    /// Marks congestion (ECN CE) on what it returns true for, as a switch's queue would.
    mark: Box<dyn FnMut(&Datagram) -> bool>,
    /// Every datagram put on the wire, with its sender.
    log: Vec<(usize, Datagram)>,
    events: Vec<Vec<NicEvent>>,
}

impl Net {
    fn new() -> Net {
        Net::acking_every(1)
    }

    /// Two hosts whose receivers acknowledge every `ack_every` packets.
    fn acking_every(ack_every: u32) -> Net {
        let mut hosts = Vec::new();
        let mut mem = Vec::new();
        let mut ctx = Vec::new();
        for n in 0..2u8 {
            let mut cfg = EndpointConfig::new(&format!("h{}", n + 1), ip(n + 1), 10_000_000_000, 20_000);
            cfg.mtu = 1024;
            cfg.ack_every = ack_every;
            // Program timeouts are the QP's; this only sizes the lab's own flows.
            let route = FlowPath {
                base_rtt_ns: 20_000,
                fabric_rtt_ns: 20_000,
                hops: 1,
            };
            cfg.programs.peers.insert(ip(2 - n), route);
            let wire = Loop {
                ip: ip(n + 1),
                out: Vec::new(),
            };
            let mut h = HostStack::new(cfg, wire, Arc::new(AtomicUsize::new(0))).expect("host");
            let m = Shared(Arc::new(Mutex::new(VecMemory::new(BASE, MEM))));
            ctx.push(h.open_context(Box::new(m.clone()), owner()));
            mem.push(m);
            hosts.push(h);
        }
        Net {
            hosts,
            mem,
            ctx,
            now: 1_000,
            wire: BinaryHeap::new(),
            parked: Vec::new(),
            drop: Box::new(|_| false),
            one_way: Box::new(|_| ONE_WAY_NS),
            mark: Box::new(|_| false),
            log: Vec::new(),
            events: vec![Vec::new(), Vec::new()],
        }
    }

    fn write_mem(&self, h: usize, addr: u64, data: &[u8]) {
        assert!(self.mem[h].0.lock().expect("memory").set(addr, data));
    }

    fn read_mem(&self, h: usize, addr: u64, len: usize) -> Vec<u8> {
        self.mem[h]
            .0
            .lock()
            .expect("memory")
            .get(addr, len)
            .expect("in memory")
            .to_vec()
    }

    /// Runs until `until` (virtual ns) passes.
    fn run_for(&mut self, ns: u64) {
        let end = self.now + ns;
        loop {
            let mut next = u64::MAX;
            for h in 0..2 {
                if let Some(t) = self.hosts[h].step(self.now) {
                    next = next.min(t);
                }
                let out = std::mem::take(&mut self.hosts[h].wire_mut().out);
                for mut d in out {
                    self.log.push((h, d.clone()));
                    if (self.drop)(&d) {
                        continue;
                    }
                    if (self.mark)(&d) {
                        d.tos |= 3;
                    }
                    let to = usize::from(d.to.ip().octets()[3]) - 1;
                    let arrives = self.now + (self.one_way)(&d);
                    self.parked.push(Some(d));
                    let id = (self.parked.len() - 1) as u64;
                    self.wire.push(Reverse((arrives, id, to)));
                }
                let ev = self.hosts[h].take_events();
                self.events[h].extend(ev);
            }
            if let Some(Reverse((t, _, _))) = self.wire.peek() {
                next = next.min(*t);
            }
            if next > end || next == u64::MAX {
                self.now = end;
                return;
            }
            self.now = next.max(self.now);
            while let Some(&Reverse((t, id, to))) = self.wire.peek() {
                if t > self.now {
                    break;
                }
                self.wire.pop();
                let d = self.parked[id as usize].take().expect("each datagram delivered once");
                let meta = RecvMeta {
                    len: d.payload.len(),
                    truncated: false,
                    from: d.from,
                    tos: Some(d.tos),
                    realtime_ns: None,
                    vlan: None,
                };
                let via_int = d.to.port() != ROCEV2_PORT;
                self.hosts[to].datagram(&d.payload, meta, via_int, self.now);
            }
        }
    }

    fn poll(&mut self, h: usize, cq: u32) -> Vec<WorkCompletion> {
        let mut out = Vec::new();
        while let Some(wc) = self.hosts[h].poll_cq(self.ctx[h], cq).expect("the CQ") {
            out.push(wc);
        }
        out
    }
}

/// The objects of one side: a PD, a CQ, a region over all its memory, a QP.
#[derive(Debug, Clone, Copy)]
struct Side {
    pd: u32,
    cq: u32,
    key: u32,
    qp: u32,
}

const ALL_ACCESS: u32 = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;

fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 64,
        max_recv_wr: 64,
        max_send_sge: 4,
        max_recv_sge: 4,
        max_inline_data: 64,
    }
}

fn side(net: &mut Net, h: usize, kind: QpType, access: u32, srq: Option<u32>) -> Side {
    let c = net.ctx[h];
    let host = &mut net.hosts[h];
    let pd = host.verbs().alloc_pd(c).expect("pd");
    let cq = host.create_cq(c, 256).expect("cq");
    let key = host.verbs().reg_mr(c, pd, BASE, MEM as u64, access).expect("mr");
    let qp = host
        .create_qp(
            c,
            QpRequest {
                kind,
                pd,
                send_cq: cq,
                recv_cq: cq,
                srq,
                sig_all: false,
                caps: caps(),
            },
        )
        .expect("qp");
    Side { pd, cq, key, qp }
}

/// Brings both QPs of an RC pair to RTS, each allowing the far end `access`.
fn connect(net: &mut Net, s: [Side; 2], access: u32) {
    for h in 0..2 {
        let now = net.now;
        let c = net.ctx[h];
        let init = QpAttr {
            state: QpState::Init,
            access: Access(access),
            ..QpAttr::default()
        };
        let m = AttrMask(AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS);
        net.hosts[h].modify_qp(c, s[h].qp, m, &init, now).expect("INIT");
        let rtr = QpAttr {
            state: QpState::Rtr,
            path_mtu: 1024,
            dest_qpn: s[1 - h].qp,
            rq_psn: 100 + h as u32,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 1,
            dest: Some(ip(2 - h as u8)),
            ..QpAttr::default()
        };
        let m = AttrMask(
            AttrMask::STATE
                | AttrMask::AV
                | AttrMask::PATH_MTU
                | AttrMask::DEST_QPN
                | AttrMask::RQ_PSN
                | AttrMask::MAX_DEST_RD_ATOMIC
                | AttrMask::MIN_RNR_TIMER,
        );
        net.hosts[h].modify_qp(c, s[h].qp, m, &rtr, now).expect("RTR");
        let rts = QpAttr {
            state: QpState::Rts,
            sq_psn: 101 - h as u32,
            timeout: 10,
            retry_cnt: 3,
            rnr_retry: 2,
            max_rd_atomic: 4,
            ..QpAttr::default()
        };
        let m = AttrMask(
            AttrMask::STATE
                | AttrMask::SQ_PSN
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC,
        );
        net.hosts[h].modify_qp(c, s[h].qp, m, &rts, now).expect("RTS");
    }
}

fn rc_pair(access: u32) -> (Net, [Side; 2]) {
    rc_pair_on(Net::new(), access)
}

fn rc_pair_on(mut net: Net, access: u32) -> (Net, [Side; 2]) {
    let s = [
        side(&mut net, 0, QpType::Rc, ALL_ACCESS, None),
        side(&mut net, 1, QpType::Rc, ALL_ACCESS, None),
    ];
    connect(&mut net, s, access);
    (net, s)
}

fn sge(s: &Side, addr: u64, len: u64) -> SgeList {
    SgeList::one(Sge {
        addr,
        length: len,
        lkey: s.key,
    })
}

fn post(net: &mut Net, h: usize, s: &Side, wr: SendWr) {
    let now = net.now;
    let c = net.ctx[h];
    net.hosts[h].post_send(c, s.qp, wr, now).expect("post_send");
}

fn post_recv(net: &mut Net, h: usize, s: &Side, id: u64, addr: u64, len: u64) {
    let c = net.ctx[h];
    net.hosts[h]
        .post_recv(
            c,
            s.qp,
            RecvWr {
                wr_id: id,
                sges: sge(s, addr, len),
            },
        )
        .expect("post_recv");
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn a_write_lands_byte_for_byte_and_completes_once_acknowledged() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let data = pattern(10_000, 7);
    net.write_mem(0, BASE, &data);
    let mut wr = SendWr::new(42, SendOpcode::Write, sge(&s[0], BASE, data.len() as u64));
    wr.remote_addr = BASE + 0x1000;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    net.run_for(1_000_000);
    assert_eq!(net.read_mem(1, BASE + 0x1000, data.len()), data);
    let wcs = net.poll(0, s[0].cq);
    assert_eq!(wcs.len(), 1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status, wcs[0].opcode),
        (42, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(wcs[0].byte_len, 10_000);
    assert!(
        net.poll(1, s[1].cq).is_empty(),
        "a plain WRITE completes nothing at the far end"
    );
    // 10 packets of the path MTU, with the PSNs the QP was given from 101.
    let ops: Vec<_> = net
        .log
        .iter()
        .filter(|(h, _)| *h == 0)
        .filter_map(|(_, d)| d.opcode())
        .collect();
    assert_eq!(ops.first(), Some(&Opcode::WriteFirst));
    assert_eq!(ops.iter().filter(|o| **o == Opcode::WriteMiddle).count(), 8);
    assert!(ops.contains(&Opcode::WriteLast));
}

#[test]
fn sends_with_immediate_fill_receive_requests_in_order() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    post_recv(&mut net, 1, &s[1], 1, BASE, 3000);
    post_recv(&mut net, 1, &s[1], 2, BASE + 0x2000, 64);
    let big = pattern(2500, 1);
    net.write_mem(0, BASE, &big);
    let mut a = SendWr::new(10, SendOpcode::SendImm, sge(&s[0], BASE, 2500));
    a.imm = 0xdead_beef;
    a.signaled = false;
    post(&mut net, 0, &s[0], a);
    let mut b = SendWr::new(11, SendOpcode::Send, SgeList::default());
    b.signaled = false;
    b.inline = InlineData::new(b"hello, inline");
    post(&mut net, 0, &s[0], b);
    net.run_for(1_000_000);
    let wcs = net.poll(1, s[1].cq);
    assert_eq!(wcs.len(), 2);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].opcode, wcs[0].byte_len, wcs[0].imm),
        (1, WcOpcode::Recv, 2500, Some(0xdead_beef))
    );
    assert_eq!((wcs[1].wr_id, wcs[1].byte_len, wcs[1].imm), (2, 13, None));
    assert_eq!(net.read_mem(1, BASE, 2500), big);
    assert_eq!(net.read_mem(1, BASE + 0x2000, 13), b"hello, inline");
    assert!(
        net.poll(0, s[0].cq).is_empty(),
        "unsignaled sends complete nothing on success"
    );
}

#[test]
fn a_write_with_immediate_consumes_a_receive_request() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    post_recv(&mut net, 1, &s[1], 77, BASE, 0);
    let mut wr = SendWr::new(5, SendOpcode::WriteImm, sge(&s[0], BASE, 3000));
    wr.remote_addr = BASE + 0x8000;
    wr.rkey = s[1].key;
    wr.imm = 9;
    wr.signaled = true;
    post(&mut net, 0, &s[0], wr);
    net.run_for(1_000_000);
    let wcs = net.poll(1, s[1].cq);
    assert_eq!(wcs.len(), 1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].opcode, wcs[0].byte_len, wcs[0].imm),
        (77, WcOpcode::RecvRdmaWithImm, 3000, Some(9))
    );
    assert_eq!(net.poll(0, s[0].cq)[0].status, WcStatus::Success);
}

#[test]
fn a_read_brings_the_far_memory_back() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let far = pattern(5000, 3);
    net.write_mem(1, BASE + 0x4000, &far);
    let mut wr = SendWr::new(8, SendOpcode::Read, sge(&s[0], BASE, 5000));
    wr.remote_addr = BASE + 0x4000;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    net.run_for(1_000_000);
    assert_eq!(net.read_mem(0, BASE, 5000), far);
    let wcs = net.poll(0, s[0].cq);
    assert_eq!(
        (wcs.len(), wcs[0].opcode, wcs[0].byte_len),
        (1, WcOpcode::RdmaRead, 5000)
    );
    let responses: Vec<_> = net
        .log
        .iter()
        .filter(|(h, _)| *h == 1)
        .filter_map(|(_, d)| d.opcode())
        .collect();
    assert_eq!(
        responses,
        vec![
            Opcode::ReadResponseFirst,
            Opcode::ReadResponseMiddle,
            Opcode::ReadResponseMiddle,
            Opcode::ReadResponseMiddle,
            Opcode::ReadResponseLast
        ]
    );
}

#[test]
fn atomics_return_the_old_value_and_change_the_far_word() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    net.write_mem(1, BASE + 64, &100u64.to_ne_bytes());
    let mut add = SendWr::new(1, SendOpcode::FetchAdd, sge(&s[0], BASE, 8));
    add.remote_addr = BASE + 64;
    add.rkey = s[1].key;
    add.compare_add = 5;
    post(&mut net, 0, &s[0], add);
    let mut cas = SendWr::new(2, SendOpcode::CompareSwap, sge(&s[0], BASE + 8, 8));
    cas.remote_addr = BASE + 64;
    cas.rkey = s[1].key;
    cas.compare_add = 105;
    cas.swap = 7;
    post(&mut net, 0, &s[0], cas);
    let mut miss = SendWr::new(3, SendOpcode::CompareSwap, sge(&s[0], BASE + 16, 8));
    miss.remote_addr = BASE + 64;
    miss.rkey = s[1].key;
    miss.compare_add = 1;
    miss.swap = 99;
    post(&mut net, 0, &s[0], miss);
    net.run_for(1_000_000);
    let old = |o: u64| u64::from_ne_bytes(net.read_mem(0, BASE + o, 8).try_into().expect("8 bytes"));
    assert_eq!((old(0), old(8), old(16)), (100, 105, 7));
    assert_eq!(
        u64::from_ne_bytes(net.read_mem(1, BASE + 64, 8).try_into().expect("8")),
        7
    );
    let ops: Vec<_> = net.poll(0, s[0].cq).iter().map(|w| (w.opcode, w.status)).collect();
    assert_eq!(
        ops,
        vec![
            (WcOpcode::FetchAdd, WcStatus::Success),
            (WcOpcode::CompSwap, WcStatus::Success),
            (WcOpcode::CompSwap, WcStatus::Success)
        ]
    );
}

#[test]
fn lost_packets_are_sent_again_and_everything_still_lands() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    // One datagram in ten is lost, both ways, drawn from a fixed seed (a period would line
    // up with a READ's retries and lose the same response every time).
    let mut x = 0x2545_f491_u32;
    net.drop = Box::new(move |_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x.is_multiple_of(10)
    });
    let data = pattern(64 * 1024, 9);
    net.write_mem(0, BASE, &data);
    for k in 0..4u64 {
        let mut wr = SendWr::new(k, SendOpcode::Write, sge(&s[0], BASE + k * 16384, 16384));
        wr.remote_addr = BASE + 0x10_0000 + k * 16384;
        wr.rkey = s[1].key;
        wr.signaled = true;
        post(&mut net, 0, &s[0], wr);
    }
    let far = pattern(20_000, 4);
    net.write_mem(1, BASE + 0x20_0000, &far);
    let mut rd = SendWr::new(9, SendOpcode::Read, sge(&s[0], BASE + 0x30_0000, 20_000));
    rd.remote_addr = BASE + 0x20_0000;
    rd.rkey = s[1].key;
    post(&mut net, 0, &s[0], rd);
    net.run_for(2_000_000_000);
    let wcs = net.poll(0, s[0].cq);
    assert!(
        net.read_mem(1, BASE + 0x10_0000, data.len()) == data,
        "the WRITEs landed"
    );
    assert!(net.read_mem(0, BASE + 0x30_0000, 20_000) == far, "the READ came back");
    let ids: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        ids,
        (0..4).chain([9]).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(),
        "in posting order"
    );
}

#[test]
fn a_write_outside_the_region_is_a_remote_access_error_and_both_qps_fail() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let mut wr = SendWr::new(1, SendOpcode::Write, sge(&s[0], BASE, 64));
    wr.remote_addr = BASE + MEM as u64 - 32;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    let after = SendWr::new(2, SendOpcode::Send, sge(&s[0], BASE, 8));
    post(&mut net, 0, &s[0], after);
    post_recv(&mut net, 1, &s[1], 50, BASE, 64);
    net.run_for(1_000_000);
    let wcs = net.poll(0, s[0].cq);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]);
    let far = net.poll(1, s[1].cq);
    assert_eq!(
        far.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(50, WcStatus::WrFlushErr)]
    );
    for (h, side) in s.iter().enumerate() {
        let c = net.ctx[h];
        assert_eq!(net.hosts[h].query_qp(c, side.qp).expect("qp").attr.state, QpState::Err);
    }
    assert!(net.events[0].contains(&NicEvent::Async {
        context: net.ctx[0],
        event: AsyncEvent::QpAccessError(s[0].qp)
    }));
}

#[test]
fn a_read_from_a_qp_without_remote_read_is_an_invalid_request() {
    let (mut net, s) = rc_pair(Access::REMOTE_WRITE);
    let mut wr = SendWr::new(1, SendOpcode::Read, sge(&s[0], BASE, 64));
    wr.remote_addr = BASE;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    net.run_for(1_000_000);
    assert_eq!(net.poll(0, s[0].cq)[0].status, WcStatus::RemInvReqErr);
}

#[test]
fn a_far_end_that_is_gone_exhausts_the_retries() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let c1 = net.ctx[1];
    net.hosts[1].close_context(c1);
    let wr = SendWr::new(1, SendOpcode::Write, sge(&s[0], BASE, 64));
    post(&mut net, 0, &s[0], wr);
    // timeout 10: 4.2 ms per try, retry_cnt 3: four tries.
    net.run_for(15_000_000);
    assert!(net.poll(0, s[0].cq).is_empty(), "still retrying after 15 ms");
    net.run_for(10_000_000);
    let wcs = net.poll(0, s[0].cq);
    assert_eq!(
        wcs.iter().map(|w| w.status).collect::<Vec<_>>(),
        vec![WcStatus::RetryExcErr]
    );
    let sent = net
        .log
        .iter()
        .filter(|(h, d)| *h == 0 && d.opcode() == Some(Opcode::WriteOnly))
        .count();
    assert_eq!(sent, 4, "the first try and three retries");
}

#[test]
fn a_send_without_a_receive_request_waits_on_rnr_naks_then_fails() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let wr = SendWr::new(1, SendOpcode::Send, sge(&s[0], BASE, 16));
    post(&mut net, 0, &s[0], wr);
    net.run_for(200_000);
    // rnr_retry 2: the first try and two retries, each answered by an RNR NAK.
    let wcs = net.poll(0, s[0].cq);
    assert_eq!(
        wcs.iter().map(|w| w.status).collect::<Vec<_>>(),
        vec![WcStatus::RnrRetryExcErr]
    );
    let rnr = net
        .log
        .iter()
        .filter(|(h, d)| *h == 1 && d.opcode() == Some(Opcode::Acknowledge))
        .count();
    assert_eq!(rnr, 3);
}

#[test]
fn a_receive_request_posted_in_time_ends_the_rnr_wait() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let mut wr = SendWr::new(1, SendOpcode::Send, sge(&s[0], BASE, 16));
    wr.signaled = true;
    post(&mut net, 0, &s[0], wr);
    net.run_for(12_000);
    post_recv(&mut net, 1, &s[1], 3, BASE, 16);
    net.run_for(500_000);
    assert_eq!(net.poll(0, s[0].cq)[0].status, WcStatus::Success);
    assert_eq!(net.poll(1, s[1].cq)[0].wr_id, 3);
}

#[test]
fn a_qp_moved_to_error_flushes_what_was_posted() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    net.drop = Box::new(|_| true);
    for k in 0..3 {
        post(
            &mut net,
            0,
            &s[0],
            SendWr::new(k, SendOpcode::Write, sge(&s[0], BASE, 8)),
        );
    }
    post_recv(&mut net, 0, &s[0], 9, BASE, 8);
    net.run_for(10_000);
    let c = net.ctx[0];
    let now = net.now;
    let err = QpAttr {
        state: QpState::Err,
        ..QpAttr::default()
    };
    net.hosts[0]
        .modify_qp(c, s[0].qp, AttrMask(AttrMask::STATE), &err, now)
        .expect("to ERR");
    let got: Vec<_> = net.poll(0, s[0].cq).iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|(_, st)| *st == WcStatus::WrFlushErr));
    // Posting to a QP in error completes at once, flushed.
    post(
        &mut net,
        0,
        &s[0],
        SendWr::new(7, SendOpcode::Send, sge(&s[0], BASE, 8)),
    );
    assert_eq!(net.poll(0, s[0].cq)[0].status, WcStatus::WrFlushErr);
}

#[test]
fn ud_datagrams_arrive_behind_a_grh_with_the_senders_qp() {
    let mut net = Net::new();
    let s = [
        side(&mut net, 0, QpType::Ud, ALL_ACCESS, None),
        side(&mut net, 1, QpType::Ud, ALL_ACCESS, None),
    ];
    for (h, side) in s.iter().enumerate() {
        let qpn = side.qp;
        let c = net.ctx[h];
        let now = net.now;
        let init = QpAttr {
            state: QpState::Init,
            qkey: 0x1111,
            ..QpAttr::default()
        };
        let m = AttrMask(AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY);
        net.hosts[h].modify_qp(c, qpn, m, &init, now).expect("INIT");
        let rtr = QpAttr {
            state: QpState::Rtr,
            ..QpAttr::default()
        };
        net.hosts[h]
            .modify_qp(c, qpn, AttrMask(AttrMask::STATE), &rtr, now)
            .expect("RTR");
        let rts = QpAttr {
            state: QpState::Rts,
            sq_psn: 5,
            ..QpAttr::default()
        };
        net.hosts[h]
            .modify_qp(c, qpn, AttrMask(AttrMask::STATE | AttrMask::SQ_PSN), &rts, now)
            .expect("RTS");
    }
    post_recv(&mut net, 1, &s[1], 1, BASE, 40 + 100);
    net.write_mem(0, BASE, &pattern(100, 2));
    let mut wr = SendWr::new(4, SendOpcode::Send, sge(&s[0], BASE, 100));
    wr.signaled = true;
    wr.ud = Some(UdDest {
        addr: ip(2),
        qpn: s[1].qp,
        qkey: 0x1111,
    });
    post(&mut net, 0, &s[0], wr);
    // Another to a queue key the far QP does not have: dropped.
    let mut bad = SendWr::new(5, SendOpcode::Send, sge(&s[0], BASE, 100));
    bad.ud = Some(UdDest {
        addr: ip(2),
        qpn: s[1].qp,
        qkey: 0x2222,
    });
    post(&mut net, 0, &s[0], bad);
    net.run_for(1_000_000);
    let wcs = net.poll(1, s[1].cq);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].byte_len, wcs[0].src_qp, wcs[0].grh), (140, s[0].qp, true));
    let grh = net.read_mem(1, BASE, 40);
    assert_eq!(&grh[..20], &[0; 20]);
    assert_eq!(grh[20] >> 4, 4, "an IPv4 header in the GRH's last 20 bytes");
    assert_eq!(&grh[32..36], &ip(1).octets(), "its source address");
    assert_eq!(net.read_mem(1, BASE + 40, 100), pattern(100, 2));
    let sent: Vec<_> = net.poll(0, s[0].cq).iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        sent,
        vec![(4, WcStatus::Success), (5, WcStatus::Success)],
        "a datagram completes once sent"
    );
}

#[test]
fn a_shared_receive_queue_feeds_every_qp_on_it_and_says_when_it_runs_low() {
    let mut net = Net::new();
    let c1 = net.ctx[1];
    let pd = net.hosts[1].verbs().alloc_pd(c1).expect("pd");
    let srq = net.hosts[1].create_srq(c1, pd, 8, 1).expect("srq");
    let key = net.hosts[1]
        .verbs()
        .reg_mr(c1, pd, BASE, MEM as u64, ALL_ACCESS)
        .expect("mr");
    let cq = net.hosts[1].create_cq(c1, 64).expect("cq");
    let qp = net.hosts[1]
        .create_qp(
            c1,
            QpRequest {
                kind: QpType::Rc,
                pd,
                send_cq: cq,
                recv_cq: cq,
                srq: Some(srq),
                sig_all: false,
                caps: caps(),
            },
        )
        .expect("qp");
    let far = Side { pd, cq, key, qp };
    let near = side(&mut net, 0, QpType::Rc, ALL_ACCESS, None);
    connect(&mut net, [near, far], ALL_ACCESS);
    for k in 0..3 {
        let wr = RecvWr {
            wr_id: k,
            sges: sge(&far, BASE + k * 0x100, 0x100),
        };
        net.hosts[1].post_srq_recv(c1, srq, wr).expect("srq recv");
    }
    net.hosts[1].verbs().srq_mut(c1, srq).expect("srq").set_limit(2);
    assert!(
        net.hosts[1]
            .post_recv(
                c1,
                qp,
                RecvWr {
                    wr_id: 9,
                    sges: SgeList::default()
                }
            )
            .is_err(),
        "a QP on an SRQ takes no receive request of its own"
    );
    for k in 0..2 {
        post(
            &mut net,
            0,
            &near,
            SendWr::new(k, SendOpcode::Send, sge(&near, BASE, 10)),
        );
    }
    net.run_for(1_000_000);
    assert_eq!(net.poll(1, cq).iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![0, 1]);
    assert!(net.events[1].contains(&NicEvent::Async {
        context: c1,
        event: AsyncEvent::SrqLimit(srq)
    }));
    assert!(net.hosts[1].destroy_srq(c1, srq).is_err(), "in use");
}

#[test]
fn verbs_refuse_what_is_not_the_callers_or_beyond_the_device() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let c0 = net.ctx[0];
    let now = net.now;
    // Another context's QP, a QP to an address outside the lab, a bad MTU.
    let other = net.hosts[0].open_context(Box::new(VecMemory::new(0, 16)), owner());
    assert!(net.hosts[0].query_qp(other, s[0].qp).is_err());
    let q = net.hosts[0]
        .create_qp(
            c0,
            QpRequest {
                kind: QpType::Rc,
                pd: s[0].pd,
                send_cq: s[0].cq,
                recv_cq: s[0].cq,
                srq: None,
                sig_all: true,
                caps: caps(),
            },
        )
        .expect("qp");
    let init = QpAttr {
        state: QpState::Init,
        ..QpAttr::default()
    };
    let m = AttrMask(AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS);
    net.hosts[0].modify_qp(c0, q, m, &init, now).expect("INIT");
    let rtr = QpAttr {
        state: QpState::Rtr,
        path_mtu: 1024,
        dest: Some(Ipv4Addr::new(8, 8, 8, 8)),
        ..QpAttr::default()
    };
    let m = AttrMask(
        AttrMask::STATE
            | AttrMask::AV
            | AttrMask::PATH_MTU
            | AttrMask::DEST_QPN
            | AttrMask::RQ_PSN
            | AttrMask::MAX_DEST_RD_ATOMIC
            | AttrMask::MIN_RNR_TIMER,
    );
    let e = net.hosts[0].modify_qp(c0, q, m, &rtr, now).expect_err("not a lab host");
    assert_eq!(e.errno(), libc::EINVAL);
    let big = QpAttr {
        dest: Some(ip(2)),
        path_mtu: 4096,
        ..rtr
    };
    assert!(
        net.hosts[0].modify_qp(c0, q, m, &big, now).is_err(),
        "above the port's MTU"
    );
    assert!(net.hosts[0].create_cq(c0, 0).is_err());
    assert_eq!(
        net.hosts[0].destroy_cq(c0, s[0].cq).map_err(|e| e.errno()),
        Err(libc::EBUSY)
    );
    let mut many = caps();
    many.max_send_sge = 99;
    let r = net.hosts[0].create_qp(
        c0,
        QpRequest {
            kind: QpType::Rc,
            pd: s[0].pd,
            send_cq: s[0].cq,
            recv_cq: s[0].cq,
            srq: None,
            sig_all: false,
            caps: many,
        },
    );
    assert!(r.is_err());
    let mut wr = SendWr::new(1, SendOpcode::Send, SgeList::default());
    wr.inline = InlineData::new(&[0; 200]);
    assert!(
        net.hosts[0].post_send(c0, s[0].qp, wr, now).is_err(),
        "more inline than the QP takes"
    );
    assert!(net.hosts[0].destroy_qp(c0, q).is_ok());
    assert!(net.hosts[0].destroy_qp(c0, q).is_err(), "gone");
}

/// The opcodes host `h` sent, in order.
fn opcodes_of(net: &Net, h: usize) -> Vec<Opcode> {
    net.log
        .iter()
        .filter(|(from, _)| *from == h)
        .filter_map(|(_, d)| d.opcode())
        .collect()
}

#[test]
fn messages_are_cut_into_the_opcodes_the_specification_names() {
    use Opcode::*;
    let cases: [(SendOpcode, u64, &[Opcode]); 6] = [
        (SendOpcode::Write, 2500, &[WriteFirst, WriteMiddle, WriteLast]),
        (SendOpcode::Write, 1024, &[WriteOnly]),
        (SendOpcode::WriteImm, 2500, &[WriteFirst, WriteMiddle, WriteLastImm]),
        (SendOpcode::Send, 2049, &[SendFirst, SendMiddle, SendLast]),
        (SendOpcode::Send, 10, &[SendOnly]),
        (SendOpcode::SendImm, 10, &[SendOnlyImm]),
    ];
    for (op, len, want) in cases {
        let (mut net, s) = rc_pair(ALL_ACCESS);
        post_recv(&mut net, 1, &s[1], 1, BASE, 4096);
        let mut wr = SendWr::new(1, op, sge(&s[0], BASE, len));
        wr.remote_addr = BASE;
        wr.rkey = s[1].key;
        post(&mut net, 0, &s[0], wr);
        net.run_for(1_000_000);
        assert_eq!(opcodes_of(&net, 0), want, "{op:?} of {len} B");
        assert_eq!(net.poll(0, s[0].cq).len(), 1, "{op:?} of {len} B completes");
    }
}

#[test]
fn a_gap_is_nakked_once_and_what_comes_again_is_acknowledged() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    // The second packet of a six-packet WRITE is lost once.
    let mut seen = 0;
    net.drop = Box::new(move |d| {
        let data = d.opcode().is_some_and(|o| o.carries_payload());
        if data {
            seen += 1;
        }
        data && seen == 2
    });
    let data = pattern(6 * 1024, 3);
    net.write_mem(0, BASE, &data);
    let mut wr = SendWr::new(1, SendOpcode::Write, sge(&s[0], BASE, data.len() as u64));
    wr.remote_addr = BASE + 0x10_000;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    net.run_for(10_000_000);
    assert_eq!(net.read_mem(1, BASE + 0x10_000, data.len()), data);
    let answers: Vec<(u8, u32)> = net
        .log
        .iter()
        .filter(|(h, _)| *h == 1)
        .filter_map(|(_, d)| {
            let b = Bth::new_checked(&d.payload[..]).ok()?;
            let aeth = int_format::roce::Aeth::new_checked(&d.payload[12..]).ok()?;
            Some((aeth.syndrome_byte(), b.psn()))
        })
        .collect();
    // Packets 3 to 6 arrive after the gap: one NAK (PSN sequence error) for the missing 102.
    let naks: Vec<_> = answers.iter().filter(|(syn, _)| syn >> 5 == 3).collect();
    assert_eq!(naks, [&(0x60, 102)], "one NAK for the gap: {answers:?}");
    // The last answer acknowledges the last packet.
    assert_eq!(answers.last().map(|a| a.1), Some(106), "{answers:?}");
    assert_eq!(net.poll(0, s[0].cq).len(), 1);
    let q = &net.hosts[0].program_qps_now()[0];
    assert!(
        q.retransmissions >= 5,
        "go back to the gap: {} sent again",
        q.retransmissions
    );
}

#[test]
fn congestion_marks_bring_cnps_at_most_once_per_interval() {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    net.mark = Box::new(|d| d.opcode().is_some_and(|o| o.carries_payload()));
    // Twenty packets at 10 Gb/s: about 17 us of them, less than the 50 us between CNPs.
    let mut wr = SendWr::new(1, SendOpcode::Write, sge(&s[0], BASE, 20 * 1024));
    wr.remote_addr = BASE;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    net.run_for(1_000_000);
    let cnps = opcodes_of(&net, 1).iter().filter(|o| **o == Opcode::Cnp).count();
    assert_eq!(cnps, 1, "one CNP for a burst shorter than the CNP interval");
    // Another burst 100 us later: one more.
    net.run_for(100_000);
    let mut wr = SendWr::new(2, SendOpcode::Write, sge(&s[0], BASE, 20 * 1024));
    wr.remote_addr = BASE;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    net.run_for(1_000_000);
    let cnps = opcodes_of(&net, 1).iter().filter(|o| **o == Opcode::Cnp).count();
    assert_eq!(cnps, 2);
    assert_eq!(net.hosts[0].program_qps_now()[0].cnps, 2, "the sender heard both");
}

#[test]
fn coalesced_acks_still_acknowledge_the_last_packet() {
    let (mut net, s) = rc_pair_on(Net::acking_every(4), ALL_ACCESS);
    let mut wr = SendWr::new(1, SendOpcode::Write, sge(&s[0], BASE, 6 * 1024));
    wr.remote_addr = BASE;
    wr.rkey = s[1].key;
    post(&mut net, 0, &s[0], wr);
    net.run_for(1_000_000);
    let acks: Vec<u32> = net
        .log
        .iter()
        .filter(|(h, d)| *h == 1 && d.opcode() == Some(Opcode::Acknowledge))
        .filter_map(|(_, d)| Bth::new_checked(&d.payload[..]).ok().map(|b| b.psn()))
        .collect();
    assert_eq!(acks, [104, 106], "the fourth packet and the last");
    assert_eq!(net.poll(0, s[0].cq).len(), 1);
}

/// Three one-packet WRITEs, the second answered 500 us late across a hiccup of `hiccup_ns`;
/// the QP's mean RTT afterwards.
fn mean_rtt_with_a_hiccup_over_the_second(hiccup_ns: u64) -> Option<u64> {
    let (mut net, s) = rc_pair(ALL_ACCESS);
    let mut acks = 0;
    net.one_way = Box::new(move |d| {
        if d.opcode() == Some(Opcode::Acknowledge) {
            acks += 1;
            if acks == 2 {
                return 500_000;
            }
        }
        ONE_WAY_NS
    });
    for id in 1..=3u64 {
        let mut wr = SendWr::new(id, SendOpcode::Write, sge(&s[0], BASE, 64));
        wr.remote_addr = BASE;
        wr.rkey = s[1].key;
        post(&mut net, 0, &s[0], wr);
        if id == 2 {
            let now = net.now;
            net.hosts[0].note_hiccup(intlab_runtime::Hiccup {
                start_ns: now + 100_000,
                end_ns: now + 100_000 + hiccup_ns,
            });
        }
        net.run_for(1_000_000);
    }
    assert_eq!(net.poll(0, s[0].cq).len(), 3);
    let q = &net.hosts[0].program_qps_now()[0];
    assert_eq!(q.rtt_min_ns, Some(2 * ONE_WAY_NS));
    q.rtt_mean_ns
}

#[test]
fn a_packet_in_flight_while_the_lab_froze_gives_no_rtt_sample() {
    assert_eq!(
        mean_rtt_with_a_hiccup_over_the_second(100_000),
        Some(2 * ONE_WAY_NS),
        "the late answer across a hiccup of a fifth of its flight is no sample"
    );
}

#[test]
fn a_hiccup_of_a_hundredth_of_a_flight_or_less_leaves_its_sample() {
    let mean = mean_rtt_with_a_hiccup_over_the_second(5_000).expect("samples");
    assert!(
        mean > 2 * ONE_WAY_NS + 100_000,
        "the late answer is a sample: mean {mean} ns"
    );
}
