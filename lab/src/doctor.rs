//! `intlab doctor`: how well this machine can emulate, and the smallest time dilation at which
//! a scenario stays faithful. Two measurements:
//!
//! - wake-up lateness: how late a thread sleeping 50 µs wakes (timer slack 1 ns, as the
//!   switch's and the endpoints' threads run), p50 and p99;
//! - packet rate: 1 KB datagrams a thread moves through loopback UDP with the transport's
//!   batched sockets (sendmmsg, recvmmsg), per second.
//!
//! A run is faithful when frames leave within a tenth of the shortest path RTT of their
//! schedule (the run's own timing warning) and the machine can carry the packets. So the
//! dilation must be at least 10·(lateness p99)/(shortest RTT), and at least what keeps the
//! lab's workers half busy: the data packets the workload can ask for per second (the senders'
//! or the receivers' line rates, whichever sum is smaller), each costing
//! [`LOOPBACK_DATAGRAMS_PER_HOP`] loopback datagrams per switch on its path and one more for
//! its two hosts (ACK included), over what this machine moves on its cores.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use intlab_transport::socket::{RecvBatch, SendBatch, Socket};

use crate::results::Quantiles;
use crate::scenario::Scenario;
use crate::topology::routes;

/// What the machine measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurements {
    /// How late a 50 µs sleep wakes (ns).
    pub wakeup_late_ns: Quantiles,
    /// 1 KB datagrams per second one thread moved through loopback UDP (sent and received).
    pub packets_per_s: f64,
}

/// The dilation a scenario needs here, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Suggestion {
    /// Its shortest path RTT (ns, scenario time).
    pub rtt_min_ns: u64,
    /// Dilation the wake-up lateness calls for.
    pub for_timing: f64,
    /// Data packets per second the workload could ask of the machine, undilated.
    pub packets_per_s: f64,
    /// Dilation the packet rate calls for.
    pub for_rate: f64,
    /// The suggestion: the larger, rounded up to 1, 2, 5 × 10^k.
    pub dilation: f64,
}

/// What one data packet costs the lab per switch it crosses (and once more for its sender and
/// receiver), in loopback datagrams of [`loopback_rate`]. Measured on the reference machine with
/// the one-loop-per-core runtime: 47 us of worker time per data packet on incast-16to1 (one
/// switch), 144 us on fat-tree k=8 (five), with a loopback datagram at 4.1 us: about 6 each.
pub const LOOPBACK_DATAGRAMS_PER_HOP: f64 = 6.0;

/// The share of the workers' time a run may take and still keep time: above it, a burst finds
/// the worker busy and frames leave late.
pub const TARGET_BUSY: f64 = 0.5;

/// Sleeps 50 µs `n` times and records how late each wake-up was.
pub fn wakeup_lateness(n: usize) -> std::io::Result<Quantiles> {
    intlab_runtime::sys::thread::precise_timers()?;
    let want = Duration::from_micros(50);
    let late: Vec<f64> = (0..n.max(1))
        .map(|_| {
            let t = Instant::now();
            std::thread::sleep(want);
            t.elapsed().saturating_sub(want).as_nanos() as f64
        })
        .collect();
    Ok(Quantiles::of(late).unwrap_or_default())
}

/// Moves 1 KB datagrams from one loopback socket to another in batches for `how_long`;
/// returns datagrams per second (each sent and received once).
pub fn loopback_rate(how_long: Duration) -> std::io::Result<f64> {
    let rx = Socket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), 0)?;
    let tx = Socket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), 0)?;
    let dst = match rx.local_addr()? {
        std::net::SocketAddr::V4(a) => a,
        std::net::SocketAddr::V6(_) => return Err(std::io::Error::other("loopback socket is not IPv4")),
    };
    let mut send = SendBatch::default();
    let mut recv = RecvBatch::default();
    let start = Instant::now();
    let mut moved = 0u64;
    while start.elapsed() < how_long {
        while !send.is_full() {
            send.slot()[..1024].fill(0xab);
            send.commit(1024, dst);
        }
        tx.send_batch(&mut send)?;
        // Drain what arrived; a full receive buffer drops, and those do not count.
        loop {
            let n = rx.recv_batch(&mut recv)?;
            moved += n as u64;
            if n == 0 {
                break;
            }
        }
    }
    Ok(moved as f64 / start.elapsed().as_secs_f64())
}

/// Measures this machine.
pub fn measure() -> std::io::Result<Measurements> {
    Ok(Measurements {
        wakeup_late_ns: wakeup_lateness(2000)?,
        packets_per_s: loopback_rate(Duration::from_millis(500))?,
    })
}

/// How far the line-rate load term may overestimate a workload: finite flows of a fabric never
/// all run at line rate at once (measured on the reference machine: fat-tree k=4 and leaf-spine
/// all-to-all keep time at 5 where the term asks 13-19, parking-lot at 1 where it asks 4).
pub const RATE_OVERESTIMATE: f64 = 4.0;

/// The largest dilation `dilation: auto` tries.
pub const AUTO_MAX: f64 = 1000.0;

/// Where `dilation: auto` starts for suggestion `g`: the timing term as it is (a thread wakes
/// no sooner under load than idle, so no smaller dilation can keep time), the rate term
/// divided by [`RATE_OVERESTIMATE`]; a run that then warns is repeated one step up
/// ([`auto_next`]).
pub fn auto_start(g: &Suggestion) -> f64 {
    round_up(g.for_timing.max(g.for_rate / RATE_OVERESTIMATE)).min(AUTO_MAX)
}

/// The dilation `dilation: auto` runs at after a run at `d`: one step of 1, 2, 5 × 10^k up when
/// that run did not keep time (`warned`), none when it did or `d` is [`AUTO_MAX`] already.
pub fn auto_next(d: f64, warned: bool) -> Option<f64> {
    (warned && d < AUTO_MAX).then(|| round_up(d * 1.001).min(AUTO_MAX))
}

/// 1, 2, 5 × 10^k at or above `x` (at least 1).
fn round_up(x: f64) -> f64 {
    if x <= 1.0 {
        return 1.0;
    }
    let decade = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|&v| v >= x * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade)
}

/// The dilation `s` needs on a machine that measured `m`, with `cores` workers.
pub fn suggest(s: &Scenario, m: &Measurements, cores: usize) -> Suggestion {
    let t = &s.topology;
    let r = routes(t);
    let hosts: Vec<usize> = t.hosts().collect();
    let mut rtt_min = u64::MAX;
    let mut switches_max = 0usize;
    for &a in &hosts {
        for &b in hosts.iter().filter(|&&b| b != a) {
            if let Some(path) = r.path(t, a, b) {
                rtt_min = rtt_min.min(2 * path.iter().map(|&l| t.links[l].props.delay.0).sum::<u64>());
                switches_max = switches_max.max(path.len().saturating_sub(1));
            }
        }
    }
    let rtt_min = if rtt_min == u64::MAX { 0 } else { rtt_min };
    let for_timing = if rtt_min > 0 {
        10.0 * m.wakeup_late_ns.p99 / rtt_min as f64
    } else {
        1.0
    };
    let line_bps = |h: usize| {
        t.links_of(h)
            .next()
            .map_or(0.0, |(l, _)| t.links[l].props.rate.bps() as f64)
    };
    let flows = s.flows();
    let mut senders: Vec<usize> = flows.iter().map(|f| f.src).collect();
    let mut receivers: Vec<usize> = flows.iter().map(|f| f.dst).collect();
    senders.sort_unstable();
    senders.dedup();
    receivers.sort_unstable();
    receivers.dedup();
    let send_bps: f64 = senders.iter().map(|&h| line_bps(h)).sum();
    let recv_bps: f64 = receivers.iter().map(|&h| line_bps(h)).sum();
    // A full data packet on the wire (Ethernet to ICRC, with INT on the longest path): the
    // packet rate a run at line rate makes.
    let (mtu, hop_bytes) = (s.transport.mtu, crate::results::int_hop_bytes(s));
    let wire_bits = crate::results::data_packet_bytes(mtu, hop_bytes, switches_max as u64) as f64 * 8.0;
    let packets_per_s = send_bps.min(recv_bps) / wire_bits;
    let cost_s = LOOPBACK_DATAGRAMS_PER_HOP * (switches_max + 1) as f64 / m.packets_per_s.max(1.0);
    let for_rate = packets_per_s * cost_s / (cores.max(1) as f64 * TARGET_BUSY);
    Suggestion {
        rtt_min_ns: rtt_min,
        for_timing,
        packets_per_s,
        for_rate,
        dilation: round_up(for_timing.max(for_rate)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Overrides;

    #[test]
    fn dilation_follows_the_slower_of_timing_and_rate() {
        let s = Scenario::builtin(&Overrides::default()).expect("default");
        let m = Measurements {
            wakeup_late_ns: Quantiles {
                p50: 30_000.0,
                p99: 70_000.0,
                max: 200_000.0,
            },
            packets_per_s: 1e6,
        };
        let g = suggest(&s, &m, 2);
        // Default: 5 hosts at 100 Mb/s, 200 us links: RTT 800 us; 10 × 70 us / 800 us < 1.
        assert_eq!(g.rtt_min_ns, 800_000);
        assert!((g.for_timing - 0.875).abs() < 1e-9);
        // 4 senders into 1 receiver: the receiver's 100 Mb/s in data packets of 1,024 payload
        // bytes + 58 of Ethernet to ICRC + 36 of INT (HPCC's: 12 of headers, 24 for the one
        // hop) = 1,118 bytes, 11.2 kpps, each 12 loopback datagrams (one switch): 134 k
        // datagrams/s of 1 M on half of 2 cores.
        let bits = 1118.0 * 8.0;
        assert!((g.packets_per_s - 1e8 / bits).abs() < 1.0, "{}", g.packets_per_s);
        assert!((g.for_rate - 1e8 / bits * 12.0 / 1e6).abs() < 1e-9);
        assert_eq!(g.dilation, 1.0);
        let slow = Measurements {
            packets_per_s: 20_000.0,
            ..m
        };
        assert_eq!(
            suggest(&s, &slow, 2).dilation,
            10.0,
            "133k / 20k = 6.7, rounded up to 10"
        );
        assert_eq!(suggest(&s, &slow, 1).dilation, 20.0, "one core: 13.3, rounded up to 20");
        assert_eq!(
            (round_up(0.3), round_up(1.5), round_up(2.0), round_up(51.0)),
            (1.0, 2.0, 2.0, 100.0)
        );
        let next = |d| auto_next(d, true);
        assert_eq!(
            (next(1.0), next(2.0), next(5.0), next(200.0)),
            (Some(2.0), Some(5.0), Some(10.0), Some(500.0))
        );
        assert_eq!(auto_next(50.0, false), None, "a run that kept time is kept");
        assert_eq!(next(AUTO_MAX), None, "no higher than the cap");
    }

    #[test]
    fn auto_starts_at_the_timing_term_or_a_quarter_of_the_rate_term() {
        let g = |for_timing, for_rate| Suggestion {
            rtt_min_ns: 8_000,
            for_timing,
            packets_per_s: 1e6,
            for_rate,
            dilation: round_up(f64::max(for_timing, for_rate)),
        };
        // incast-16to1 on the reference machine: timing 54, rate 41.
        assert_eq!(auto_start(&g(53.8, 41.2)), 100.0);
        // fat-tree k=4: timing 0.6, rate 19.4 (it keeps time at 5).
        assert_eq!(auto_start(&g(0.6, 19.4)), 5.0);
        assert_eq!(auto_start(&g(0.5, 0.4)), 1.0);
        assert_eq!(auto_start(&g(5e3, 1.0)), AUTO_MAX);
    }
}
