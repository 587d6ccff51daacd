//! How well the sites of a lab kept one clock and one schedule: their clocks' offsets to the
//! coordinator's and how sure those are, and the frames that crossed a tunnel later than the
//! lab time they were due at the far switch.

use std::fmt::Write as _;

use serde::Serialize;

/// One site's clock, as the coordinator measured it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteClock {
    /// The site.
    pub site: String,
    /// How far its lab clock may be from the coordinator's after aligning (ns, real time):
    /// half the round trip of the best exchange, plus the most the offset moved during the run.
    pub uncertainty_ns: u64,
    /// The round trip to it over the control connection (ns, real time, best exchange).
    pub round_trip_ns: u64,
    /// The most its lab clock was off the coordinator's during the run beyond what the
    /// measurements can tell (ns): a clock that drifted, or a site that runs with another
    /// shift than the one it was told.
    pub drift_ns: u64,
    /// The aligning measurement's error against the true offset (ns), known when the site
    /// runs on the coordinator's kernel (sites in namespaces of one machine); None elsewhere.
    pub alignment_error_ns: Option<i64>,
}

/// The frames one cut link carried.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunnelTiming {
    /// The link.
    pub link: String,
    /// Its delay in the lab (ns, real time: the dilated delay): the time the machines'
    /// network has to carry a frame.
    pub delay_ns: u64,
    /// Frames received over it, both ways.
    pub frames: u64,
    /// Of those, frames that arrived after their due time.
    pub late: u64,
    /// The latest (ns, real time).
    pub late_max_ns: u64,
}

impl TunnelTiming {
    /// Over [`LATE_SHARE_LIMIT`] of its frames came late.
    fn is_late(&self) -> bool {
        self.late as f64 > LATE_SHARE_LIMIT * self.frames.max(1) as f64
    }
}

/// The sites' timing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SitesTiming {
    /// Per site.
    pub clocks: Vec<SiteClock>,
    /// Per cut link.
    pub tunnels: Vec<TunnelTiming>,
    /// The machines' one-way latency plus the clocks' uncertainty (ns, real time): what a
    /// cut link's delay must exceed for frames to arrive on time.
    pub needed_ns: u64,
    /// True when a cut link's delay is shorter than that, or over 1 % of the frames a tunnel
    /// carried came late: the run then did not keep the schedule across machines.
    pub warning: bool,
}

/// Late frames over this share of a tunnel's make a warning.
const LATE_SHARE_LIMIT: f64 = 0.01;

impl SitesTiming {
    /// The figures, judged: `one_way_ns` is the machines' one-way latency as measured.
    pub fn new(clocks: Vec<SiteClock>, tunnels: Vec<TunnelTiming>, one_way_ns: u64) -> SitesTiming {
        let uncertainty = clocks.iter().map(|c| c.uncertainty_ns).max().unwrap_or(0);
        let needed_ns = one_way_ns + uncertainty;
        let short = tunnels.iter().any(|t| t.delay_ns < needed_ns);
        let late = tunnels.iter().any(TunnelTiming::is_late);
        SitesTiming {
            clocks,
            tunnels,
            needed_ns,
            warning: short || late,
        }
    }

    /// The lines of the summary table.
    pub fn report(&self) -> String {
        let us = |ns: u64| ns as f64 / 1000.0;
        let mut out = String::from("  sites (real time):");
        for c in &self.clocks {
            let _ = write!(
                out,
                " {} clock within {:.0} us (round trip {:.0} us, drift {:.0} us",
                c.site,
                us(c.uncertainty_ns),
                us(c.round_trip_ns),
                us(c.drift_ns)
            );
            if let Some(e) = c.alignment_error_ns {
                let _ = write!(out, ", aligned {:.1} us off on this machine's clock", e as f64 / 1000.0);
            }
            out.push_str(");");
        }
        out.pop();
        out.push('\n');
        for t in &self.tunnels {
            let _ = writeln!(
                out,
                "  tunnel {}: delay {:.0} us, {} frames, {} late (latest {:.0} us)",
                t.link,
                us(t.delay_ns),
                t.frames,
                t.late,
                us(t.late_max_ns)
            );
        }
        let shortest = self.tunnels.iter().map(|t| t.delay_ns).min().unwrap_or(u64::MAX);
        if shortest < self.needed_ns {
            let _ = writeln!(
                out,
                "  WARNING: the machines' network does not keep the lab's schedule across sites: a frame needs {:.0} us \
                 (one way plus the clocks' uncertainty) but the shortest cut link's delay is {:.0} us; raise `dilation` \
                 or cut links of longer delay (intlab plan).",
                us(self.needed_ns),
                us(shortest)
            );
        }
        for t in self.tunnels.iter().filter(|t| t.is_late()) {
            let _ = writeln!(
                out,
                "  WARNING: the machines' network does not keep the lab's schedule across sites: {} of the {} frames \
                 over {} came after their due time (the latest {:.0} us), the link's delay being {:.0} us; raise \
                 `dilation` or give the machines a faster network.",
                t.late,
                t.frames,
                t.link,
                us(t.late_max_ns),
                us(t.delay_ns)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(u: u64) -> SiteClock {
        SiteClock {
            site: "a".into(),
            uncertainty_ns: u,
            round_trip_ns: 2 * u,
            drift_ns: 0,
            alignment_error_ns: None,
        }
    }

    fn tunnel(delay_ns: u64, frames: u64, late: u64) -> TunnelTiming {
        TunnelTiming {
            link: "s1-s2".into(),
            delay_ns,
            frames,
            late,
            late_max_ns: 0,
        }
    }

    #[test]
    fn a_delay_that_covers_the_network_and_the_clocks_keeps_time() {
        let t = SitesTiming::new(vec![clock(20_000)], vec![tunnel(200_000, 1000, 3)], 50_000);
        assert_eq!(t.needed_ns, 70_000);
        assert!(!t.warning);
    }

    #[test]
    fn a_shorter_delay_or_late_frames_warn() {
        assert!(SitesTiming::new(vec![clock(20_000)], vec![tunnel(60_000, 1000, 0)], 50_000).warning);
        assert!(SitesTiming::new(vec![clock(1_000)], vec![tunnel(200_000, 1000, 11)], 5_000).warning);
        assert!(
            SitesTiming::new(vec![clock(1_000)], vec![tunnel(200_000, 1000, 11)], 5_000)
                .report()
                .contains("WARNING")
        );
    }
}
