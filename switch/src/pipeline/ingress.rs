//! Parse and match: decide where a received frame goes.

use std::collections::HashMap;
use std::net::Ipv4Addr;

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
    lpm: Lpm,
    macs: MacTable,
    neighbors: HashMap<Ipv4Addr, MacAddress>,
    arp: ArpMode,
    int_port: u16,
    ecmp_seed: u64,
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
            lpm: Lpm::new(&spec.routes),
            macs: MacTable::new(&spec.macs),
            neighbors: spec.neighbors.iter().copied().collect(),
            arp: spec.arp,
            int_port: spec.int_port,
            ecmp_seed: spec.seed ^ u64::from(spec.node_id).rotate_left(32),
        }
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
        let verdict = match self
            .lpm
            .select(&key, self.ecmp_seed)
            .or_else(|| self.macs.lookup(&dst_mac))
        {
            Some(p) => Verdict::Forward(p),
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
