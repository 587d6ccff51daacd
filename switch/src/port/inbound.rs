//! A host's link towards the switch, as the switch models it. The host emulates nothing, so a
//! burst its stack sent at once must arrive spread out at the link's rate, as through a real
//! NIC (store and forward: a frame counts from its last bit), and the link's delay later; what
//! the link does to the frames (netem's impairments) is done here too, as the switch's egress
//! queue does it the other way.

use crate::impair::{ImpairmentSpec, LinkImpairment, Verdict};
use crate::units::{Nanos, Rate};

/// The switch's model of what a host's link delivers.
#[derive(Debug, Clone)]
pub struct InboundLink {
    rate: Rate,
    delay_ns: u64,
    /// When the previous frame finished arriving (ps): the next cannot finish sooner than one
    /// serialization time later.
    free_ps: u64,
    /// What the link does to the frames it carries.
    impairment: LinkImpairment,
}

/// What the link did to one frame (see [`InboundLink::carry`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Carried {
    /// The link's judgement: lost, duplicated, corrupted, reordered, its delay.
    pub verdict: Verdict,
    /// When the frame's last bit left the host's end (ns): it arrives its delay later.
    pub sent_ns: u64,
}

impl InboundLink {
    /// A link of `rate` and one-way `delay`, idle.
    pub fn new(rate: Rate, delay: Nanos) -> InboundLink {
        InboundLink {
            rate,
            delay_ns: delay.0,
            free_ps: 0,
            impairment: LinkImpairment::default(),
        }
    }

    /// The link impairs the frames it carries as `spec` says (replacing what it did), its draws
    /// seeded by `seed`.
    pub fn impair(&mut self, spec: ImpairmentSpec, seed: u64) {
        self.impairment.set(spec, seed);
    }

    /// The link impairs as `spec` says from now on, with draws of a stream of their own.
    pub fn change_impairment(&mut self, spec: ImpairmentSpec) {
        self.impairment.change(spec);
    }

    /// Its one-way delay (ns).
    pub fn delay_ns(&self) -> u64 {
        self.delay_ns
    }

    /// Whether it impairs the frames it carries at all.
    pub fn is_impaired(&self) -> bool {
        self.impairment.spec().is_some()
    }

    /// Whether a frame's delay may be shorter than one sent before it (jitter, reordering): its
    /// frames must then be held until they arrive, to reach ingress in arrival order.
    pub fn reorders(&self) -> bool {
        self.impairment.spec().is_some_and(ImpairmentSpec::reorders)
    }

    /// An Ethernet frame of `len` bytes the host handed to the link at `sent_ns`, through an
    /// impaired link: when it left, and what the link does to it (its arrival is `sent_ns`
    /// plus the verdict's delay).
    pub fn carry(&mut self, sent_ns: u64, len: usize) -> Carried {
        let arrival = self.arrival_ns(sent_ns, len as u64);
        let verdict = self.impairment.judge(len, self.delay_ns);
        Carried {
            verdict,
            sent_ns: arrival - self.delay_ns,
        }
    }

    /// The fate of the second copy of a frame of `len` bytes the link duplicated.
    pub fn carry_copy(&mut self, len: usize) -> Verdict {
        self.impairment.judge_duplicate(len, self.delay_ns)
    }

    /// The link runs at `rate` for frames sent from now on.
    pub fn set_rate(&mut self, rate: Rate) {
        self.rate = rate;
    }

    /// The link's one-way delay is `delay` for frames sent from now on.
    pub fn set_delay(&mut self, delay: Nanos) {
        self.delay_ns = delay.0;
    }

    /// When a frame of `len` bytes the host handed to the link at `sent_ns` has arrived at the
    /// switch (ns).
    pub fn arrival_ns(&mut self, sent_ns: u64, len: u64) -> u64 {
        let ser = self.rate.serialization_ns(len) * 1000;
        let done = (sent_ns * 1000).max(self.free_ps) + ser;
        self.free_ps = done;
        done / 1000 + self.delay_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_arrives_spread_at_the_line_rate_and_the_delay_later() {
        // 1,000 bytes at 1 Gb/s: 8 us each.
        let mut l = InboundLink::new(Rate(1_000_000_000), Nanos(2_000));
        assert_eq!(l.arrival_ns(0, 1_000), 10_000);
        assert_eq!(l.arrival_ns(0, 1_000), 18_000, "behind the first");
        assert_eq!(l.arrival_ns(100_000, 1_000), 110_000, "an idle link banks nothing");
    }
}
