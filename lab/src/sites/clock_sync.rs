//! The offset between a site's lab clock and its coordinator's, measured as NTP does (RFC
//! 5905, section 8) over their control connection: each exchange gives an offset and a round
//! trip, and the exchange with the shortest round trip bounds the offset best (its error is
//! at most half that round trip).

use serde::{Deserialize, Serialize};

/// The kernel clock a process's lab clock counts from. Two processes on one kernel (sites in
/// namespaces of one machine, as the tests run them) read one CLOCK_MONOTONIC, so the true
/// offset of their lab clocks is known exactly, and with it the error of a measured one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelClock {
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): equal only on one kernel
    /// since one boot. Empty where it cannot be read (never equal then).
    pub boot_id: String,
    /// CLOCK_MONOTONIC when the process's lab clock read 0 unshifted (ns).
    pub monotonic_origin_ns: u64,
}

impl KernelClock {
    /// This process's.
    pub fn here() -> KernelClock {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|id| id.trim().to_owned())
            .unwrap_or_default();
        KernelClock {
            boot_id,
            monotonic_origin_ns: intlab_runtime::clock::Clock::get().monotonic_origin_ns(),
        }
    }

    /// The true offset (ns) of `site`'s unshifted lab clock from the lab clock of a process
    /// on `self`'s kernel that runs with shift `shift_ns`, when both are on one kernel.
    pub fn true_offset_of(&self, shift_ns: i64, site: &KernelClock) -> Option<i64> {
        if self.boot_id.is_empty() || self.boot_id != site.boot_id {
            return None;
        }
        // Both read CLOCK_MONOTONIC m: the site m - site.origin, this process m - origin + shift.
        let offset = i128::from(self.monotonic_origin_ns) - i128::from(site.monotonic_origin_ns) - i128::from(shift_ns);
        i64::try_from(offset).ok()
    }
}

/// One exchange: the coordinator's send time, the site's receive and answer times (its
/// clock), the coordinator's receive time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// t1: sent (coordinator clock, ns).
    pub sent_ns: u64,
    /// t2: received (site clock, ns).
    pub received_ns: u64,
    /// t3: answered (site clock, ns).
    pub answered_ns: u64,
    /// t4: answer received (coordinator clock, ns).
    pub back_ns: u64,
}

/// What a set of exchanges says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    /// Site clock minus coordinator clock (ns).
    pub offset_ns: i64,
    /// How far the true offset may be from it (ns): half the round trip it was measured on.
    pub uncertainty_ns: u64,
    /// That round trip, without the site's own time between receiving and answering (ns).
    pub round_trip_ns: u64,
    /// The measured offset less the true one, where the true one is known (both clocks on
    /// one kernel, [`KernelClock::true_offset_of`]); None elsewhere.
    pub error_ns: Option<i64>,
}

impl Exchange {
    /// The offset it measures and its round trip.
    fn offset(&self) -> (i64, u64) {
        let (t1, t2, t3, t4) = (
            i128::from(self.sent_ns),
            i128::from(self.received_ns),
            i128::from(self.answered_ns),
            i128::from(self.back_ns),
        );
        let offset = ((t2 - t1) + (t3 - t4)) / 2;
        let round_trip = ((t4 - t1) - (t3 - t2)).max(0);
        (offset as i64, round_trip as u64)
    }
}

/// The best estimate from `exchanges`: the one with the shortest round trip. None for none.
pub fn best(exchanges: &[Exchange]) -> Option<Offset> {
    exchanges
        .iter()
        .map(Exchange::offset)
        .min_by_key(|&(_, rtt)| rtt)
        .map(|(offset_ns, round_trip_ns)| Offset {
            offset_ns,
            uncertainty_ns: round_trip_ns.div_ceil(2),
            round_trip_ns,
            error_ns: None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_kernel_gives_the_true_offset_and_two_give_none() {
        let here = KernelClock {
            boot_id: "b".into(),
            monotonic_origin_ns: 5_000,
        };
        let site = KernelClock {
            boot_id: "b".into(),
            monotonic_origin_ns: 2_000,
        };
        // At m = 10,000 the site reads 8,000 and this process 5,000 + 300.
        assert_eq!(here.true_offset_of(300, &site), Some(2_700));
        let elsewhere = KernelClock {
            boot_id: "c".into(),
            ..site.clone()
        };
        assert_eq!(here.true_offset_of(0, &elsewhere), None);
        let unknown = KernelClock {
            boot_id: String::new(),
            ..site
        };
        assert_eq!(unknown.true_offset_of(0, &unknown.clone()), None);
    }

    #[test]
    fn a_symmetric_exchange_finds_the_offset_exactly() {
        // The site reads 1 s ahead; 100 us each way, 20 us to answer.
        let e = Exchange {
            sent_ns: 5_000_000,
            received_ns: 1_005_100_000,
            answered_ns: 1_005_120_000,
            back_ns: 5_220_000,
        };
        let o = best(&[e]).unwrap();
        assert_eq!(o.offset_ns, 1_000_000_000);
        assert_eq!(o.round_trip_ns, 200_000);
        assert_eq!(o.uncertainty_ns, 100_000);
    }

    #[test]
    fn the_shortest_round_trip_wins_and_bounds_the_error() {
        // The site reads 500 us behind. A slow exchange: 2 ms out, 100 us back (off by
        // 950 us); a quick one, 50 us out and 70 us back (off by 10 us).
        let slow = Exchange {
            sent_ns: 10_000_000,
            received_ns: 11_500_000,
            answered_ns: 11_500_000,
            back_ns: 12_100_000,
        };
        let quick = Exchange {
            sent_ns: 20_000_000,
            received_ns: 19_550_000,
            answered_ns: 19_550_000,
            back_ns: 20_120_000,
        };
        let o = best(&[slow, quick]).unwrap();
        assert_eq!(o.round_trip_ns, 120_000);
        assert_eq!(o.offset_ns, -510_000);
        assert!((o.offset_ns + 500_000).unsigned_abs() <= o.uncertainty_ns);
        assert_eq!(best(&[]), None, "no exchange, no offset");
    }
}
