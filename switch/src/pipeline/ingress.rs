//! Parse and match: decide where a received frame goes.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use int_format::ethernet::{EthernetFrame, MacAddress, ethertype};
use int_format::frame::FrameLayout;
use int_format::ipv4::{Ipv4Packet, PROTOCOL_UDP};
use int_format::{Error, Layer};

use crate::config::{ArpMode, SwitchSpec};
use crate::counters::DropReason;
use crate::frame::FrameBuf;

use super::arp;
use super::tables::{FlowKey, Lpm, MacTable};

/// What ingress decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send out of this port.
    Forward(usize),
    /// Send a copy out of every other port.
    Flood,
    /// The frame was rewritten into a reply (ARP); send it back out of the ingress port.
    Reply,
    /// Drop it, counting why on the ingress port.
    Drop(DropReason),
}

/// The parser and tables of one switch, shared read-only by its workers.
#[derive(Debug)]
pub struct Pipeline {
    /// Replaced whole when routes are recomputed (a fabric reconverging after a link event).
    lpm: ArcSwap<Lpm>,
    /// Routes to take over at a lab time (ns), earliest first: frames arriving from then on
    /// are routed by them.
    pending_routes: Mutex<VecDeque<(u64, Arc<Lpm>)>>,
    /// When the first of them is due (`u64::MAX`: none), looked at per frame.
    next_routes_ns: AtomicU64,
    /// Per port: when its link is up (an ECMP group skips the members whose link is down).
    links: Vec<LinkState>,
    macs: MacTable,
    neighbors: HashMap<Ipv4Addr, MacAddress>,
    arp: ArpMode,
    int_port: u16,
    ecmp_seed: u64,
}

/// When a port's link is up: down from `down_from`, unless it came up again at `up_from`,
/// later (each `u64::MAX` or 0 until set).
#[derive(Debug)]
struct LinkState {
    down_from: AtomicU64,
    up_from: AtomicU64,
}

impl Default for LinkState {
    fn default() -> Self {
        LinkState {
            down_from: AtomicU64::new(u64::MAX),
            up_from: AtomicU64::new(0),
        }
    }
}

impl LinkState {
    /// Whether the link is up for a frame that arrives at `t_ns`.
    fn is_up(&self, t_ns: u64) -> bool {
        let down = self.down_from.load(Ordering::Acquire);
        if down > t_ns {
            return true;
        }
        let up = self.up_from.load(Ordering::Acquire);
        up > down && up <= t_ns
    }
}

/// What ingress learned besides the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IngressNotes {
    /// The frame is UDP to the INT port but its INT is malformed: forwarded untouched.
    pub malformed_int: bool,
}

impl Pipeline {
    /// Builds the tables of `spec`.
    pub fn new(spec: &SwitchSpec) -> Pipeline {
        Pipeline {
            lpm: ArcSwap::from_pointee(Lpm::new(&spec.routes)),
            pending_routes: Mutex::new(VecDeque::new()),
            next_routes_ns: AtomicU64::new(u64::MAX),
            links: spec.ports.iter().map(|_| LinkState::default()).collect(),
            macs: MacTable::new(&spec.macs),
            neighbors: spec.neighbors.iter().copied().collect(),
            arp: spec.arp,
            int_port: spec.int_port,
            ecmp_seed: spec.seed ^ u64::from(spec.node_id).rotate_left(32),
        }
    }

    /// Routes frames that arrive from lab time `at_ns` on by `routes`, in place of the ones it
    /// had.
    pub fn set_routes_at(&self, routes: &[crate::config::Route], at_ns: u64) {
        let mut pending = self.pending_routes.lock().unwrap_or_else(PoisonError::into_inner);
        let k = pending.partition_point(|(t, _)| *t <= at_ns);
        pending.insert(k, (at_ns, Arc::new(Lpm::new(routes))));
        self.next_routes_ns.store(pending[0].0, Ordering::Release);
    }

    /// Port `port`'s link is up (or down) for frames that arrive from lab time `at_ns` on: ECMP
    /// groups use it (or skip it) from then.
    pub fn set_port_up_at(&self, port: usize, up: bool, at_ns: u64) {
        if let Some(l) = self.links.get(port) {
            match up {
                true => l.up_from.store(at_ns, Ordering::Release),
                false => l.down_from.store(at_ns, Ordering::Release),
            }
        }
    }

    /// The routes for a frame that arrived at `t_ns`.
    fn routes_at(&self, t_ns: u64) -> arc_swap::Guard<Arc<Lpm>> {
        if t_ns >= self.next_routes_ns.load(Ordering::Acquire) {
            let mut pending = self.pending_routes.lock().unwrap_or_else(PoisonError::into_inner);
            while pending.front().is_some_and(|(t, _)| *t <= t_ns) {
                if let Some((_, lpm)) = pending.pop_front() {
                    self.lpm.store(lpm);
                }
            }
            let next = pending.front().map_or(u64::MAX, |(t, _)| *t);
            self.next_routes_ns.store(next, Ordering::Release);
        }
        self.lpm.load()
    }

    /// Parses `frame` (recording its layout) and decides where it goes.
    pub fn ingress(&self, frame: &mut FrameBuf) -> (Verdict, IngressNotes) {
        let mut notes = IngressNotes::default();
        let len = frame.len;
        let Ok(eth) = EthernetFrame::new_checked(frame.bytes()) else {
            return (Verdict::Drop(DropReason::Runt), notes);
        };
        let (dst_mac, kind) = (eth.dst_addr(), eth.ethertype());
        if dst_mac.is_multicast() {
            return (self.broadcast(frame, kind, len), notes);
        }
        if kind != ethertype::IPV4 {
            return match self.macs.lookup(&dst_mac) {
                Some(p) => (Verdict::Forward(p), notes),
                None => (Verdict::Drop(DropReason::NonIpv4), notes),
            };
        }
        let key = match FrameLayout::parse(frame.bytes(), self.int_port) {
            Ok(layout) => {
                frame.layout = Some(layout);
                udp_key(frame.bytes(), &layout)
            }
            Err(Error::Truncated { layer, .. } | Error::Malformed { layer, .. })
                if matches!(layer, Layer::Ethernet | Layer::Ipv4 | Layer::Udp) =>
            {
                return (Verdict::Drop(DropReason::Malformed), notes);
            }
            Err(e) => {
                // Non-UDP IPv4, fragments, or UDP whose INT is broken: forward by address,
                // untouched.
                notes.malformed_int = matches!(
                    e,
                    Error::Truncated {
                        layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                        ..
                    } | Error::Malformed {
                        layer: Layer::IntShim | Layer::IntMd | Layer::IntStack,
                        ..
                    }
                );
                match ip_key(frame.bytes()) {
                    Some(k) => k,
                    None => return (Verdict::Drop(DropReason::Malformed), notes),
                }
            }
        };
        let t = frame.arrival_ns;
        let up = |p: usize| self.links.get(p).is_none_or(|l| l.is_up(t));
        let verdict = match self
            .routes_at(t)
            .select(&key, self.ecmp_seed, up)
            .or_else(|| self.macs.lookup(&dst_mac))
        {
            Some(p) if hop(frame.bytes_mut()) => Verdict::Forward(p),
            Some(_) => Verdict::Drop(DropReason::TtlExpired),
            None => Verdict::Drop(DropReason::NoRoute),
        };
        (verdict, notes)
    }

    fn broadcast(&self, frame: &mut FrameBuf, kind: u16, len: usize) -> Verdict {
        match self.arp {
            ArpMode::Flood => Verdict::Flood,
            ArpMode::Answer if kind == ethertype::ARP => match arp::answer(frame.buffer_mut(), len, &self.neighbors) {
                Some(n) => {
                    frame.len = n;
                    Verdict::Reply
                }
                None => Verdict::Drop(DropReason::Broadcast),
            },
            ArpMode::Answer => Verdict::Drop(DropReason::Broadcast),
        }
    }
}

/// Counts one router hop on the IPv4 packet of Ethernet frame `b`: the TTL goes down by one and
/// the header checksum follows (the UDP checksum and RoCE's ICRC do not cover the TTL). False
/// when the TTL was 1 or 0: the packet dies here, as a router drops it, so that a forwarding
/// loop cannot keep frames alive.
fn hop(b: &mut [u8]) -> bool {
    let Ok(mut ip) = Ipv4Packet::new_checked(&mut b[EthernetFrame::<&[u8]>::HEADER_LEN..]) else {
        return false;
    };
    let ttl = ip.ttl();
    if ttl <= 1 {
        return false;
    }
    ip.set_ttl(ttl - 1);
    ip.fill_checksum();
    true
}

fn udp_key(b: &[u8], l: &FrameLayout) -> FlowKey {
    let ip = Ipv4Packet::new_unchecked(&b[l.ip..]);
    FlowKey {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        protocol: PROTOCOL_UDP,
        src_port: u16::from_be_bytes([b[l.udp], b[l.udp + 1]]),
        dst_port: u16::from_be_bytes([b[l.udp + 2], b[l.udp + 3]]),
    }
}

/// The key of a valid IPv4 packet that is not plain UDP (ports from TCP/UDP when present).
fn ip_key(b: &[u8]) -> Option<FlowKey> {
    let ip = Ipv4Packet::new_checked(&b[EthernetFrame::<&[u8]>::HEADER_LEN..]).ok()?;
    if !ip.verify_checksum() {
        return None;
    }
    let payload = ip.payload();
    let ports = matches!(ip.protocol(), 6 | 17) && payload.len() >= 4 && ip.frag_offset() == 0;
    Some(FlowKey {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        protocol: ip.protocol(),
        src_port: if ports {
            u16::from_be_bytes([payload[0], payload[1]])
        } else {
            0
        },
        dst_port: if ports {
            u16::from_be_bytes([payload[2], payload[3]])
        } else {
            0
        },
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::frame::FramePool;

    const CONFIG: &str = "\
node_id: 1
ports:
  - { name: p1, kind: tap, rate: 1Gbps }
  - { name: p2, kind: tap, rate: 1Gbps }
routes:
  - { prefix: 198.18.0.2/32, port: p2 }
macs:
  - { mac: \"02:00:00:00:00:09\", port: p1 }
";

    fn verdict(bytes: &[u8]) -> (Verdict, IngressNotes) {
        let spec = SwitchSpec::from_yaml(CONFIG, Path::new("t.yaml")).expect("config");
        let p = Pipeline::new(&spec);
        let pool = FramePool::new(2048, 4);
        let mut f = pool.get();
        f.buffer_mut()[..bytes.len()].copy_from_slice(bytes);
        f.len = bytes.len();
        p.ingress(&mut f)
    }

    fn eth(dst: [u8; 6], ethertype: u16, body: &[u8]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(body);
        f
    }

    fn udp_to(port: u16, payload: &[u8]) -> Vec<u8> {
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2];
        ip[2..4].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
        let c = int_format::checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip.extend_from_slice(&[0x9c, 0x40]);
        ip.extend_from_slice(&port.to_be_bytes());
        ip.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0]);
        ip.extend_from_slice(payload);
        ip
    }

    const H2: [u8; 6] = [2, 0, 0, 0, 0, 2];

    #[test]
    fn bad_frames_get_a_reason_never_a_panic() {
        assert_eq!(verdict(&[1, 2, 3]).0, Verdict::Drop(DropReason::Runt));
        assert_eq!(verdict(&[]).0, Verdict::Drop(DropReason::Runt));
        assert_eq!(
            verdict(&eth(H2, 0x0800, &[0x45, 0])).0,
            Verdict::Drop(DropReason::Malformed)
        );
        let mut bad_sum = udp_to(9, &[0; 8]);
        bad_sum[10] ^= 1;
        assert_eq!(
            verdict(&eth(H2, 0x0800, &bad_sum)).0,
            Verdict::Drop(DropReason::Malformed)
        );
        assert_eq!(
            verdict(&eth(H2, 0x86dd, &[0; 40])).0,
            Verdict::Drop(DropReason::NonIpv4)
        );
        assert_eq!(
            verdict(&eth([2, 0, 0, 0, 0, 9], 0x86dd, &[0; 40])).0,
            Verdict::Forward(0),
            "MAC table"
        );
        assert_eq!(
            verdict(&eth([0xff; 6], 0x0800, &[0; 40])).0,
            Verdict::Drop(DropReason::Broadcast)
        );
        let mut no_route = udp_to(9, &[0; 8]);
        no_route[19] = 77;
        no_route[10..12].fill(0);
        let c = int_format::checksum::checksum(&no_route[..20]);
        no_route[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            verdict(&eth(H2, 0x0800, &no_route)).0,
            Verdict::Drop(DropReason::NoRoute)
        );
        let mut last_hop = udp_to(9, &[0; 8]);
        last_hop[8] = 1;
        last_hop[10..12].fill(0);
        let c = int_format::checksum::checksum(&last_hop[..20]);
        last_hop[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            verdict(&eth(H2, 0x0800, &last_hop)).0,
            Verdict::Drop(DropReason::TtlExpired)
        );
    }

    #[test]
    fn forwarding_takes_one_off_the_ttl_and_keeps_the_checksum_right() {
        let spec = SwitchSpec::from_yaml(CONFIG, Path::new("t.yaml")).expect("config");
        let p = Pipeline::new(&spec);
        let pool = FramePool::new(2048, 4);
        let mut f = pool.get();
        let bytes = eth(H2, 0x0800, &udp_to(9, &[0; 8]));
        f.buffer_mut()[..bytes.len()].copy_from_slice(&bytes);
        f.len = bytes.len();
        assert_eq!(p.ingress(&mut f).0, Verdict::Forward(1));
        let ip = Ipv4Packet::new_checked(&f.bytes()[14..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn malformed_int_is_forwarded_untouched_and_noted() {
        let (v, notes) = verdict(&eth(
            H2,
            0x0800,
            &udp_to(int_format::int::DEFAULT_INT_PORT, &[0x70; 20]),
        ));
        assert_eq!(v, Verdict::Forward(1));
        assert!(notes.malformed_int);
        let (v, notes) = verdict(&eth(H2, 0x0800, &udp_to(4791, &[0; 20])));
        assert_eq!(v, Verdict::Forward(1));
        assert!(!notes.malformed_int);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let spec = SwitchSpec::from_yaml(CONFIG, Path::new("t.yaml")).expect("config");
        let p = Pipeline::new(&spec);
        let pool = FramePool::new(2048, 4);
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let len = rng.usize(0..200);
            let mut f = pool.get();
            for b in &mut f.buffer_mut()[..len] {
                *b = rng.u8(..);
            }
            // Make most frames IPv4 to H2 so the deeper parsers are reached.
            if len >= 14 && rng.bool() {
                f.buffer_mut()[..6].copy_from_slice(&H2);
                f.buffer_mut()[12..14].copy_from_slice(&[8, 0]);
            }
            f.len = len;
            let _ = p.ingress(&mut f);
            pool.put(f);
        }
    }
}
