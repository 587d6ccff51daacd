//! Congestion controllers behind one small trait, one file per algorithm, in the spirit of
//! quinn-proto's `congestion` module. The transport feeds events in (ACKs with the echoed INT
//! hops and an RTT sample, CNPs, losses, timer ticks) and reads two decisions out: a pacing rate
//! and, optionally, a window of bytes in flight. It never asks which controller it runs.

mod dcqcn;
mod dctcp;
mod hpcc;
mod hpcc_plus_plus;
mod netscope;
mod rlcc;
mod swift;
mod timely;

use int_format::int::{HopRecord, Instructions};

pub use dcqcn::{Dcqcn, DcqcnConfig};
pub use dctcp::{Dctcp, DctcpConfig};
pub use hpcc::{Hpcc, HpccConfig};
pub use hpcc_plus_plus::{Ablation, HpccPlusPlus, HpccPlusPlusConfig};
pub use netscope::{Netscope, NetscopeConfig};
pub use rlcc::{RlCc, RlCcConfig};
pub use swift::{Swift, SwiftConfig};
pub use timely::{Timely, TimelyConfig};

/// What the transport knows when an ACK arrives.
#[derive(Debug, Clone, Copy)]
pub struct Ack<'a> {
    /// Now, on the endpoint clock (ns).
    pub now_ns: u64,
    /// Bytes of the message acknowledged so far (cumulative).
    pub acked_bytes: u64,
    /// Bytes of the message sent so far (the next byte to send), the "snd_nxt" of ns-3.
    pub sent_bytes: u64,
    /// Bytes newly acknowledged by this ACK.
    pub newly_acked: u64,
    /// Round-trip time of the acknowledged packet, when it was not retransmitted (ns).
    pub rtt_ns: Option<u64>,
    /// INT hops echoed by the receiver, in path order (first switch first); empty without INT.
    pub hops: &'a [HopRecord],
    /// The acknowledged packet was the first its host sent after its thread stalled (woke up
    /// `SenderTiming::stall_ns` late or more): the change in its INT since the previous packet
    /// measures the emulation's hiccup (a link left idle), not the network. Real NICs do not
    /// stall, so controllers take these hops as a new baseline without reacting to them.
    pub after_stall: bool,
}

/// The constant facts of a flow a controller may use; the values a controller's source states
/// relative to the fabric are derived from them (see [`ControllerConfig::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathInfo {
    /// The sender's NIC line rate (b/s): the highest rate a controller may ask for.
    pub line_rate_bps: u64,
    /// Base round-trip time of this flow's path (ns): propagation, serialization of a
    /// full-size packet and its ACK, and the round trip's host overhead, no queueing.
    pub base_rtt_ns: u64,
    /// The largest base RTT among the run's flows (ns): the one T the ns-3 HPCC simulator
    /// gives every flow (GLOBAL_T).
    pub fabric_rtt_ns: u64,
    /// Switches on the path.
    pub hops: u32,
    /// Bytes a full-size packet takes on the wire.
    pub mtu_wire_bytes: u64,
    /// Payload bytes of a full-size packet (the RoCE MTU).
    pub mtu_bytes: u64,
}

impl PathInfo {
    /// Bandwidth-delay product of the path in bytes.
    pub fn bdp_bytes(&self) -> u64 {
        bdp_bytes(self.line_rate_bps, self.base_rtt_ns)
    }
}

/// Bytes a link of `bps` holds over `ns`.
pub(crate) fn bdp_bytes(bps: u64, ns: u64) -> u64 {
    (u128::from(bps) * u128::from(ns) / 8_000_000_000) as u64
}

/// `Ok` when `ok`, else what parameter `name` expected and got.
pub(crate) fn check(ok: bool, name: &str, got: impl std::fmt::Display, expected: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{name}: expected {expected}, got {got}"))
    }
}

/// A share of something: in (0, 1].
pub(crate) fn check_fraction(name: &str, v: f64) -> Result<(), String> {
    check(v > 0.0 && v <= 1.0, name, v, "a fraction in (0, 1]")
}

/// A utilization target (HPCC's η): in (0, 1].
pub(crate) fn check_utilization(name: &str, v: f64) -> Result<(), String> {
    check(v > 0.0 && v <= 1.0, name, v, "a utilization in (0, 1]")
}

/// A time that, when set, is above zero.
pub(crate) fn check_time(name: &str, v: Option<u64>) -> Result<(), String> {
    check(v != Some(0), name, 0, "a time above 0 ns")
}

/// `ns` times `factor`, rounded, at least 1 (for time parameters under dilation or scaling).
pub(crate) fn scale_ns(ns: u64, factor: f64) -> u64 {
    ((ns as f64 * factor).round() as u64).max(1)
}

/// A congestion controller of one flow.
pub trait Controller: Send + std::fmt::Debug {
    /// Short name, as in results files ("hpcc").
    fn name(&self) -> &'static str;

    /// INT the controller needs on data packets (None: it does not use INT).
    fn int_instructions(&self) -> Option<Instructions> {
        None
    }

    /// An ACK arrived.
    fn on_ack(&mut self, ack: &Ack<'_>);

    /// A CNP arrived for this flow.
    fn on_cnp(&mut self, _now_ns: u64) {}

    /// The receiver reported a gap (NAK) and the sender goes back.
    fn on_loss(&mut self, _now_ns: u64) {}

    /// The retransmission timer fired.
    fn on_timeout(&mut self, _now_ns: u64) {}

    /// When the controller next wants [`Controller::on_timer`] called (ns), if ever.
    fn next_timer_ns(&self) -> Option<u64> {
        None
    }

    /// Its timer is due.
    fn on_timer(&mut self, _now_ns: u64) {}

    /// Pacing rate now (b/s).
    fn rate_bps(&self) -> u64;

    /// Cap on bytes in flight now, if the controller uses a window.
    fn window_bytes(&self) -> Option<u64> {
        None
    }

    /// The controller's own utilization estimate, for time series (HPCC's U), if it has one.
    fn utilization(&self) -> Option<f64> {
        None
    }

    /// The delay the controller aims the RTT at (ns), for time series (Swift's target), if
    /// it has one.
    fn target_delay_ns(&self) -> Option<u64> {
        None
    }
}

/// Which controller to build, with its parameters; what a scenario file names.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum ControllerConfig {
    /// HPCC (ns-3 algorithm).
    Hpcc(#[serde(default)] HpccConfig),
    /// HPCC++ PD law.
    #[serde(rename = "hpcc++", alias = "hpcc_plus_plus")]
    HpccPlusPlus(#[serde(default)] HpccPlusPlusConfig),
    /// DCQCN (reaction point; the receiver is the notification point).
    Dcqcn(#[serde(default)] DcqcnConfig),
    /// Swift (delay-based window).
    Swift(#[serde(default)] SwiftConfig),
    /// TIMELY (RTT gradient).
    Timely(#[serde(default)] TimelyConfig),
    /// DCTCP-style rate control on echoed ECN marks.
    Dctcp(#[serde(default)] DctcpConfig),
    /// Netscope: AIMD with the decrease weighted by the application's delay sensitivity.
    Netscope(#[serde(default)] NetscopeConfig),
    /// RL-CC: a learned policy (MLP or distilled trees).
    Rlcc(#[serde(default)] RlCcConfig),
    /// No congestion control: send at line rate.
    LineRate,
}

impl ControllerConfig {
    /// The name a scenario file uses for it.
    pub fn name(&self) -> &'static str {
        match self {
            ControllerConfig::Hpcc(_) => "hpcc",
            ControllerConfig::HpccPlusPlus(_) => "hpcc++",
            ControllerConfig::Dcqcn(_) => "dcqcn",
            ControllerConfig::Swift(_) => "swift",
            ControllerConfig::Timely(_) => "timely",
            ControllerConfig::Dctcp(_) => "dctcp",
            ControllerConfig::Netscope(_) => "netscope",
            ControllerConfig::Rlcc(_) => "rlcc",
            ControllerConfig::LineRate => "line_rate",
        }
    }

    /// The same controller with every time parameter `factor` times longer (time dilation;
    /// rates are fractions of the line rate, which the lab dilates itself).
    pub fn dilated(&self, factor: f64) -> ControllerConfig {
        match self {
            ControllerConfig::Hpcc(c) => ControllerConfig::Hpcc(c.dilated(factor)),
            ControllerConfig::HpccPlusPlus(c) => ControllerConfig::HpccPlusPlus(c.dilated(factor)),
            ControllerConfig::Dcqcn(c) => ControllerConfig::Dcqcn(c.dilated(factor)),
            ControllerConfig::Swift(c) => ControllerConfig::Swift(c.dilated(factor)),
            ControllerConfig::Timely(c) => ControllerConfig::Timely(c.dilated(factor)),
            ControllerConfig::Netscope(c) => ControllerConfig::Netscope(c.dilated(factor)),
            other => other.clone(),
        }
    }

    /// The controller of a flow of an application with delay sensitivity `c_a`: Netscope's
    /// with c_a set; every other controller ignores it.
    pub fn for_application(&self, c_a: Option<f64>) -> ControllerConfig {
        match (self, c_a) {
            (ControllerConfig::Netscope(c), Some(c_a)) => ControllerConfig::Netscope(NetscopeConfig {
                delay_sensitivity: c_a,
                ..c.clone()
            }),
            (other, _) => other.clone(),
        }
    }

    /// The parameters a flow on `path` runs with: every value the scenario left unset and the
    /// controller's source states relative to the fabric (base RTT, hop count, line rate)
    /// derived from `path`; values set explicitly are kept.
    pub fn resolve(&self, path: &PathInfo) -> ControllerConfig {
        match self {
            ControllerConfig::Hpcc(c) => ControllerConfig::Hpcc(c.resolved(path)),
            ControllerConfig::HpccPlusPlus(c) => ControllerConfig::HpccPlusPlus(c.resolved(path)),
            ControllerConfig::Dcqcn(c) => ControllerConfig::Dcqcn(c.resolved(path)),
            ControllerConfig::Swift(c) => ControllerConfig::Swift(c.resolved(path)),
            ControllerConfig::Timely(c) => ControllerConfig::Timely(c.resolved(path)),
            ControllerConfig::Netscope(c) => ControllerConfig::Netscope(c.resolved(path)),
            other => other.clone(),
        }
    }

    /// Refuses parameters no run can use, naming the parameter and what it expects.
    pub fn check(&self) -> Result<(), String> {
        match self {
            ControllerConfig::Hpcc(c) => c.check(),
            ControllerConfig::HpccPlusPlus(c) => c.check(),
            ControllerConfig::Dcqcn(c) => c.check(),
            ControllerConfig::Swift(c) => c.check(),
            ControllerConfig::Timely(c) => c.check(),
            ControllerConfig::Dctcp(c) => c.check(),
            ControllerConfig::Netscope(c) => c.check(),
            ControllerConfig::Rlcc(c) => c.check(),
            ControllerConfig::LineRate => Ok(()),
        }
    }

    /// INT the controller asks of data packets, without building it.
    pub fn int_instructions(&self) -> Option<Instructions> {
        match self {
            ControllerConfig::Hpcc(_) | ControllerConfig::HpccPlusPlus(_) => Some(Instructions::HPCC),
            _ => None,
        }
    }

    /// A controller for one flow on `path`, with [`ControllerConfig::resolve`]'s parameters.
    /// Fails only for RL-CC, when its policy file cannot be read or is broken.
    pub fn build(&self, path: PathInfo) -> Result<Box<dyn Controller>, intlab_rlcc::PolicyError> {
        Ok(match self {
            ControllerConfig::Hpcc(c) => Box::new(Hpcc::new(c.clone(), path)),
            ControllerConfig::HpccPlusPlus(c) => Box::new(HpccPlusPlus::new(c.clone(), path)),
            ControllerConfig::Dcqcn(c) => Box::new(Dcqcn::new(c.clone(), path)),
            ControllerConfig::Swift(c) => Box::new(Swift::new(c.clone(), path)),
            ControllerConfig::Timely(c) => Box::new(Timely::new(c.clone(), path)),
            ControllerConfig::Dctcp(c) => Box::new(Dctcp::new(c.clone(), path)),
            ControllerConfig::Netscope(c) => Box::new(Netscope::new(c.clone(), path)),
            ControllerConfig::Rlcc(c) => Box::new(RlCc::new(c, path)?),
            ControllerConfig::LineRate => Box::new(LineRate(path.line_rate_bps)),
        })
    }
}

/// Sends at line rate and ignores feedback: the baseline with no congestion control.
#[derive(Debug, Clone, Copy)]
pub struct LineRate(pub u64);

impl Controller for LineRate {
    fn name(&self) -> &'static str {
        "line_rate"
    }

    fn on_ack(&mut self, _ack: &Ack<'_>) {}

    fn rate_bps(&self) -> u64 {
        self.0
    }
}

/// Per-hop telemetry reduced to what utilization needs, with wrapping deltas.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct HopSample {
    pub ts_ns: u64,
    pub tx_bytes: u64,
    pub qlen: u64,
    pub rate_bps: u64,
}

impl HopSample {
    /// From an INT hop; None when a field HPCC needs is missing.
    pub fn from_hop(h: &HopRecord) -> Option<HopSample> {
        Some(HopSample {
            ts_ns: h.egress_ts?,
            tx_bytes: h.tx_bytes?,
            qlen: u64::from(h.queue_occupancy?),
            rate_bps: u64::from(h.rate_kbps?) * 1000,
        })
    }

    /// This hop's utilization against the previous sample of the same hop, as ns-3 HPCC
    /// computes it: txRate/B + min(qlen, prev qlen)/(B·T), with τ = Δts. Returns (u, τ); None
    /// when no time has passed. Deltas wrap, as the fields do on the wire.
    pub fn utilization(&self, prev: &HopSample, base_rtt_ns: u64) -> Option<(f64, u64)> {
        let tau = self.ts_ns.wrapping_sub(prev.ts_ns);
        if tau == 0 || tau > u64::MAX / 2 || self.rate_bps == 0 {
            return None;
        }
        let bytes = self.tx_bytes.wrapping_sub(prev.tx_bytes);
        let tx_rate = bytes as f64 * 8.0 / (tau as f64 * 1e-9);
        let q = self.qlen.min(prev.qlen) as f64;
        let u = tx_rate / self.rate_bps as f64 + q * 8.0 / (self.rate_bps as f64 * base_rtt_ns as f64 * 1e-9);
        Some((u, tau))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn useless_parameters_are_refused_with_their_name() {
        let bad = [
            (
                ControllerConfig::Hpcc(HpccConfig {
                    eta: -5.0,
                    ..HpccConfig::default()
                }),
                "eta: expected a utilization in (0, 1], got -5",
            ),
            (
                ControllerConfig::Dcqcn(DcqcnConfig {
                    alpha_interval_ns: Some(0),
                    ..DcqcnConfig::default()
                }),
                "alpha_interval_ns: expected a time above 0 ns",
            ),
            (
                ControllerConfig::Swift(SwiftConfig {
                    max_mdf: 1.0,
                    ..SwiftConfig::default()
                }),
                "max_mdf: expected a factor in (0, 1), got 1",
            ),
            (
                ControllerConfig::Timely(TimelyConfig {
                    t_low_ns: Some(10),
                    t_high_ns: Some(5),
                    ..TimelyConfig::default()
                }),
                "t_low_ns: expected less than t_high_ns, got 10",
            ),
            (
                ControllerConfig::Netscope(NetscopeConfig {
                    delay_sensitivity: f64::NAN,
                    ..NetscopeConfig::default()
                }),
                "delay_sensitivity",
            ),
        ];
        for (c, want) in bad {
            let e = c.check().expect_err(want);
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn every_default_passes_its_check() {
        for c in [
            ControllerConfig::Hpcc(HpccConfig::paper()),
            ControllerConfig::HpccPlusPlus(HpccPlusPlusConfig::default()),
            ControllerConfig::Dcqcn(DcqcnConfig::paper()),
            ControllerConfig::Swift(SwiftConfig::default()),
            ControllerConfig::Timely(TimelyConfig::default()),
            ControllerConfig::Dctcp(DctcpConfig::default()),
            ControllerConfig::Netscope(NetscopeConfig::default()),
            ControllerConfig::Rlcc(RlCcConfig::default()),
        ] {
            assert_eq!(c.check(), Ok(()), "{}", c.name());
        }
    }

    #[test]
    fn the_config_names_the_int_its_controller_asks_for() {
        let all = [
            ControllerConfig::Hpcc(HpccConfig::default()),
            ControllerConfig::HpccPlusPlus(HpccPlusPlusConfig::default()),
            ControllerConfig::Dcqcn(DcqcnConfig::default()),
            ControllerConfig::Swift(SwiftConfig::default()),
            ControllerConfig::Timely(TimelyConfig::default()),
            ControllerConfig::Dctcp(DctcpConfig::default()),
            ControllerConfig::Netscope(NetscopeConfig::default()),
            ControllerConfig::Rlcc(RlCcConfig::default()),
            ControllerConfig::LineRate,
        ];
        for c in all {
            let built = c.build(fixtures::path(1000)).expect("builds");
            assert_eq!(c.int_instructions(), built.int_instructions(), "{}", c.name());
        }
    }
}

/// Fixtures the controllers' unit tests share.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Ack, HopRecord, PathInfo};

    /// A 10 Gb/s path with T = 10 us (BDP 12,500 B) carrying `mtu_bytes` of payload a packet.
    pub fn path(mtu_bytes: u64) -> PathInfo {
        PathInfo {
            line_rate_bps: 10_000_000_000,
            base_rtt_ns: 10_000,
            fabric_rtt_ns: 10_000,
            hops: 1,
            mtu_wire_bytes: 1100,
            mtu_bytes,
        }
    }

    /// An ACK at `now_ns` of 1,000 new bytes, cumulative to `acked_bytes` of `sent_bytes` sent.
    pub fn ack(now_ns: u64, acked_bytes: u64, sent_bytes: u64, rtt_ns: Option<u64>, hops: &[HopRecord]) -> Ack<'_> {
        Ack {
            now_ns,
            acked_bytes,
            sent_bytes,
            newly_acked: 1000,
            rtt_ns,
            hops,
            after_stall: false,
        }
    }
}
