//! Time dilation: the lab runs a scenario D times slower than its datacenter values, so that a
//! machine can keep its schedule. Every conversion between the scenario's quantities and the
//! lab's goes through [`Dilation`]: rates divided by D, times multiplied by D, and back again
//! for results. The machine's own time constants (host overhead, wake-up lateness, burst
//! credit) are real time and never dilated.

use intlab_switch::units::{Nanos, Rate};
use intlab_transport::cc::ControllerConfig;

use crate::topology::Topology;

/// A time dilation factor D (at least 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dilation(f64);

impl Dilation {
    /// Dilation `factor` (values below 1 count as 1: the lab never runs faster than real time).
    pub fn new(factor: f64) -> Dilation {
        Dilation(if factor.is_finite() { factor.max(1.0) } else { 1.0 })
    }

    /// D.
    pub fn factor(self) -> f64 {
        self.0
    }

    /// A scenario time or duration (ns) as the lab's: D times longer.
    pub fn lab_ns(self, scenario_ns: u64) -> u64 {
        (scenario_ns as f64 * self.0).round() as u64
    }

    /// A scenario rate (b/s) as the lab's: D times slower, at least 1 b/s.
    pub fn lab_bps(self, scenario_bps: u64) -> u64 {
        ((scenario_bps as f64 / self.0).round() as u64).max(1)
    }

    /// A lab time or duration (ns) as the scenario's.
    pub fn scenario_ns(self, lab_ns: u64) -> u64 {
        (lab_ns as f64 / self.0).round() as u64
    }

    /// A lab rate (b/s) as the scenario's.
    pub fn scenario_bps(self, lab_bps: u64) -> u64 {
        (lab_bps as f64 * self.0).round() as u64
    }

    /// The topology as the lab runs it: rates slower, delays and the PFC watchdog's times
    /// longer.
    pub fn topology(self, t: &Topology) -> Topology {
        let mut t = t.clone();
        for l in &mut t.links {
            l.props.rate = Rate(self.lab_bps(l.props.rate.bps()));
            l.props.delay = Nanos(self.lab_ns(l.props.delay.0));
            l.props.impair.jitter_ns = self.lab_ns(l.props.impair.jitter_ns);
        }
        let own = t
            .nodes
            .iter_mut()
            .filter_map(|n| n.tm.pfc.as_mut().and_then(Option::as_mut));
        for p in t.pfc.iter_mut().chain(own) {
            if let Some(w) = p.watchdog.as_mut() {
                w.detect_ns = self.lab_ns(w.detect_ns);
                w.restore_ns = self.lab_ns(w.restore_ns);
            }
        }
        t
    }

    /// A link change given in the scenario's units as the lab makes it.
    pub fn link_change(self, c: intlab_switch::LinkChange) -> intlab_switch::LinkChange {
        intlab_switch::LinkChange {
            rate: c.rate.map(|r| Rate(self.lab_bps(r.bps()))),
            delay: c.delay.map(|d| Nanos(self.lab_ns(d.0))),
            impair: c.impair.map(|i| self.impairment(i)),
            impair_inbound: c.impair_inbound.map(|i| self.impairment(i)),
            ..c
        }
    }

    /// Impairments given in the scenario's units as the lab applies them (jitter dilated).
    fn impairment(self, i: intlab_switch::impair::ImpairmentSpec) -> intlab_switch::impair::ImpairmentSpec {
        intlab_switch::impair::ImpairmentSpec {
            jitter_ns: self.lab_ns(i.jitter_ns),
            ..i
        }
    }

    /// A controller's parameters as the lab runs them (its times D times longer).
    pub fn controller(self, c: &ControllerConfig) -> ControllerConfig {
        c.dilated(self.0)
    }

    /// A controller's parameters as the lab ran them, back in the scenario's time.
    pub fn scenario_controller(self, c: &ControllerConfig) -> ControllerConfig {
        c.dilated(1.0 / self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dilation_slows_the_links_and_stretches_delays_and_the_watchdog() {
        let text = "\
name: d
pfc: { watchdog: { detect: 2ms, restore: 3ms } }
nodes:
  s1: { kind: switch }
  s2: { kind: switch, pfc: { watchdog: { detect: 5ms } } }
  h1: { kind: host }
links:
  - endpoints: [\"s1:eth1\", \"h1:eth0\"]
    rate: 10Gbps
    delay: 2us
  - endpoints: [\"s1:eth2\", \"s2:eth1\"]
    rate: 10Gbps
    delay: 2us
";
        let t = crate::topology::load_str(text, std::path::Path::new("d.yaml")).expect("valid");
        let d = Dilation::new(10.0).topology(&t);
        assert_eq!(d.links[0].props.rate, Rate(1_000_000_000));
        assert_eq!(d.links[0].props.delay, Nanos(20_000));
        let w = d.pfc.and_then(|p| p.watchdog).expect("the watchdog");
        assert_eq!((w.detect_ns, w.restore_ns), (20_000_000, 30_000_000));
        let own = d.pfc_of(1).and_then(|p| p.watchdog).expect("s2's own watchdog");
        assert_eq!(own.detect_ns, 50_000_000, "a switch's own watchdog dilates too");
    }

    #[test]
    fn every_conversion_is_undone_by_its_inverse() {
        let d = Dilation::new(100.0);
        assert_eq!(d.scenario_ns(d.lab_ns(2_000)), 2_000);
        assert_eq!(d.scenario_bps(d.lab_bps(10_000_000_000)), 10_000_000_000);
        assert_eq!(d.lab_bps(50), 1, "never a zero rate");
        assert_eq!(Dilation::new(0.5).factor(), 1.0, "never faster than real time");
    }
}
