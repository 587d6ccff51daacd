//! The egress stage at dequeue: ECN marking from the queue the frame saw, then the INT transit
//! hop. Everything it writes comes from the exact departure schedule. (What the link then does
//! to the frame, the egress queue's impairments decide: `tm::EgressQueue::judge`.)

use int_format::ethernet::ethertype;
use int_format::int::HopRecord;
use int_format::ipv4::{Ecn, Ipv4Packet};
use int_format::roles::transit;

use crate::config::PortSpec;
use crate::counters::PortCounters;
use crate::frame::FrameBuf;
use crate::tm::{Dequeued, Red};

/// What egress needs to know about its port.
#[derive(Debug, Clone)]
pub struct EgressPort {
    /// Port index (the INT egress port ID).
    pub index: u16,
    /// The switch's INT node ID.
    pub node_id: u32,
    /// Line rate in kb/s, as INT reports it.
    pub rate_kbps: u32,
    /// Largest IP packet the link takes.
    pub mtu: usize,
    /// Push INT hops.
    pub int: bool,
    /// ECN marking.
    pub red: Option<Red>,
    /// Which of the port's queues a frame joins.
    pub priorities: crate::tm::PriorityMap,
}

impl EgressPort {
    /// The egress settings of port `index` of a switch with INT node ID `node_id`.
    pub fn new(index: usize, node_id: u32, spec: &PortSpec, priorities: crate::tm::PriorityMap) -> EgressPort {
        EgressPort {
            index: index as u16,
            node_id,
            rate_kbps: u32::try_from(spec.rate.bps() / 1000).unwrap_or(u32::MAX),
            mtu: usize::from(spec.mtu),
            int: spec.int,
            red: spec.ecn.map(Red::new),
            priorities,
        }
    }
}

/// Marks and stamps a frame leaving `port` of the built-in pipeline. (On a switch that runs a
/// P4 program, its egress replaces ECN marking and the INT hop, then [`p4_sent`].)
pub fn process(d: &mut Dequeued, port: &EgressPort, counters: &mut PortCounters, rng: &mut fastrand::Rng) {
    counters.record_queue(d.start_ns, d.qlen);
    // On the frame's own queue, as the ns-3 HPCC switch marks (per port and priority).
    if let Some(red) = &port.red {
        mark_ecn(&mut d.frame, red, d.priority_qlen, rng, counters);
    }
    if port.int {
        stamp_int(d, port, counters);
    }
}

/// Counts a frame a P4 program's egress sent (its queue, as [`process`] counts it).
pub fn p4_sent(d: &Dequeued, counters: &mut PortCounters) {
    counters.record_queue(d.start_ns, d.qlen);
}

fn mark_ecn(frame: &mut FrameBuf, red: &Red, qlen: u64, rng: &mut fastrand::Rng, counters: &mut PortCounters) {
    let b = frame.bytes_mut();
    if b.len() < 34 || u16::from_be_bytes([b[12], b[13]]) != ethertype::IPV4 {
        return;
    }
    let Ok(mut ip) = Ipv4Packet::new_checked(&mut b[14..]) else {
        return;
    };
    if !ip.ecn().is_ect() || ip.ecn() == Ecn::Ce {
        return;
    }
    let u = if qlen > 0 { rng.f64() } else { 1.0 };
    if red.should_mark(qlen, u) {
        ip.set_ecn(Ecn::Ce);
        ip.fill_checksum();
        counters.totals.ecn_marks += 1;
    }
}

fn stamp_int(d: &mut Dequeued, port: &EgressPort, counters: &mut PortCounters) {
    let Some(layout) = d.frame.layout.filter(|l| l.has_int()) else {
        return;
    };
    let hop = HopRecord {
        node_id: Some(port.node_id),
        ingress_port: Some(d.frame.ingress),
        egress_port: Some(port.index),
        hop_latency: Some(u32::try_from(d.start_ns.saturating_sub(d.frame.arrival_ns)).unwrap_or(u32::MAX)),
        queue_id: Some(0),
        queue_occupancy: Some(u32::try_from(d.qlen).unwrap_or(u32::MAX)),
        ingress_ts: Some(d.frame.arrival_ns),
        egress_ts: Some(d.start_ns),
        tx_bytes: Some(d.tx_bytes_before),
        rate_kbps: Some(port.rate_kbps),
        ..HopRecord::default()
    };
    match transit::push_hop(d.frame.buffer_mut(), &layout, &hop, port.mtu) {
        Ok(push) => {
            d.frame.len = push.len;
            match push.outcome {
                transit::PushOutcome::Pushed => counters.totals.int_pushed += 1,
                transit::PushOutcome::HopLimitExceeded => counters.totals.int_hop_limit += 1,
                transit::PushOutcome::MtuExceeded => counters.totals.int_mtu_exceeded += 1,
            }
        }
        Err(_) => counters.totals.int_malformed += 1,
    }
    d.frame.layout = None; // offsets changed
}
