//! A flow's base RTT as its controller is told it: propagation and serialization on the links
//! it takes (from the topology), plus the round trip's host overhead, which no topology knows
//! and the lab measures with its probes (the data path check): the smallest probe round trip
//! minus what the probe's own propagation and serialization account for.

use int_format::roce::{Aeth, Bth, icrc};
use intlab_transport::cc::ControllerConfig;
use intlab_transport::endpoint::IntMode;
use intlab_transport::packet::WIRE_OVERHEAD;

use crate::topology::Topology;

/// Bytes of INT's shim and metadata header.
const INT_HEADER: u64 = 12;
/// Bytes one hop adds to a probe (the FULL instruction set).
const PROBE_HOP: u64 = 36;

/// Round trip over `links` and back with `there` bytes a frame one way and `back` bytes the
/// other, on an empty network (ns): twice each link's delay plus both frames' serialization
/// at each link's rate (every link stores and forwards).
pub fn unloaded_rtt_ns(t: &Topology, links: &[usize], there: u64, back: u64) -> u64 {
    links
        .iter()
        .map(|&l| {
            let p = &t.links[l].props;
            2 * p.delay.0 + p.rate.serialization_ns(there) + p.rate.serialization_ns(back)
        })
        .sum()
}

/// The round trip a probe and its answer take on `links` when nothing else costs time (ns).
pub fn probe_rtt_ns(t: &Topology, links: &[usize]) -> u64 {
    let switches = links.len().saturating_sub(1) as u64;
    let roce = (Bth::<&[u8]>::LEN + icrc::ICRC_LEN) as u64;
    let int = INT_HEADER + PROBE_HOP * switches;
    let probe = WIRE_OVERHEAD + roce + int;
    let answer = WIRE_OVERHEAD + roce + Aeth::<&[u8]>::LEN as u64 + int;
    unloaded_rtt_ns(t, links, probe, answer)
}

/// The round trip of a full-size data packet of `mtu` payload bytes and its ACK on `links`,
/// with `int_hop_bytes` of INT per switch when data carries INT (ns).
pub fn data_rtt_ns(t: &Topology, links: &[usize], mtu: u64, int_hop_bytes: Option<u64>) -> u64 {
    let switches = links.len().saturating_sub(1) as u64;
    let roce = (Bth::<&[u8]>::LEN + icrc::ICRC_LEN) as u64;
    let int = int_hop_bytes.map_or(0, |h| INT_HEADER + h * switches);
    let data = WIRE_OVERHEAD + roce + mtu + int;
    let ack = WIRE_OVERHEAD + roce + Aeth::<&[u8]>::LEN as u64 + int;
    unloaded_rtt_ns(t, links, data, ack)
}

/// The INT bytes per hop data carries under `mode` when its QP runs `controller`, if any.
pub fn int_hop_bytes(mode: IntMode, controller: &ControllerConfig) -> Option<u64> {
    let instructions = match mode {
        IntMode::Off => None,
        IntMode::Auto => controller.int_instructions(),
        IntMode::On => Some(
            controller
                .int_instructions()
                .unwrap_or(int_format::int::Instructions::HPCC),
        ),
    }?;
    instructions.hop_words().ok().map(|w| 4 * u64::from(w))
}

/// The host overhead a measured probe round trip shows on `links` (ns).
pub fn host_overhead_ns(t: &Topology, links: &[usize], probe_rtt_min_ns: u64) -> u64 {
    probe_rtt_min_ns.saturating_sub(probe_rtt_ns(t, links))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_round_trip_is_propagation_plus_both_frames_at_every_link() {
        let t = crate::topology::two_hosts_on_a_switch();
        // 1024 B + 42 + 12 + 4 = 1082 B there (8656 ns at 1 Gb/s), 62 B back (496 ns), twice.
        assert_eq!(data_rtt_ns(&t, &[0, 1], 1024, None), 2 * (20_000 + 8_656 + 496));
        // INT adds 12 + 24 B each way with one switch.
        assert_eq!(
            data_rtt_ns(&t, &[0, 1], 1024, Some(24)),
            2 * (20_000 + (1082 + 36) * 8 + (62 + 36) * 8)
        );
    }

    #[test]
    fn the_overhead_is_what_the_probe_took_beyond_its_path() {
        let t = crate::topology::two_hosts_on_a_switch();
        let ideal = probe_rtt_ns(&t, &[0, 1]);
        // Probe 42 + 16 + 48 = 106 B, answer 110 B.
        assert_eq!(ideal, 2 * (20_000 + 106 * 8 + 110 * 8));
        assert_eq!(host_overhead_ns(&t, &[0, 1], ideal + 123_000), 123_000);
        assert_eq!(host_overhead_ns(&t, &[0, 1], ideal - 1), 0, "never negative");
    }
}
