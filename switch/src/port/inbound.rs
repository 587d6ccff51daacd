//! A host's link towards the switch, as the switch models it. The host emulates nothing, so a
//! burst its stack sent at once must arrive spread out at the link's rate, as through a real
//! NIC (store and forward: a frame counts from its last bit), and the link's delay later.

use crate::units::{Nanos, Rate};

/// The switch's model of what a host's link delivers.
#[derive(Debug, Clone)]
pub struct InboundLink {
    rate: Rate,
    delay_ns: u64,
    /// When the previous frame finished arriving (ps): the next cannot finish sooner than one
    /// serialization time later.
    free_ps: u64,
}

impl InboundLink {
    /// A link of `rate` and one-way `delay`, idle.
    pub fn new(rate: Rate, delay: Nanos) -> InboundLink {
        InboundLink {
            rate,
            delay_ns: delay.0,
            free_ps: 0,
        }
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
