//! Flow sizes drawn from a CDF with Poisson arrivals at a target load, as the HPCC simulator's
//! `traffic_gen.py` does: each host starts flows with exponential gaps of mean
//! avg_size·8 / (host link rate · load), to a destination drawn uniformly among the others.
//!
//! CDF file format (the HPCC simulator's, so its files work unchanged): one point per line,
//! `size_bytes cdf_percent`, from `0 0` (or any first point) to 100, sizes and percentages
//! increasing; `#` starts a comment. Sizes between points are interpolated linearly; the mean
//! is the trapezoid rule over the points.

use intlab_transport::flow::MessageKind;

use super::PlannedFlow;

/// The web search workload's flow sizes (Alizadeh et al., "Data Center TCP", SIGCOMM 2010,
/// Fig. 4, as the HPCC and pFabric evaluations use it): 12 points up to 30 MB.
pub const WEB_SEARCH: &str = "\
# Web search flow sizes: DCTCP (Alizadeh et al., SIGCOMM 2010), Fig. 4.
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
";

/// The Facebook Hadoop cluster's flow sizes (Roy et al., "Inside the Social Network's
/// (Datacenter) Network", SIGCOMM 2015, Fig. 6), as the HPCC evaluation tabulated them
/// (`traffic_gen/FbHdp_distribution.txt`): mostly small flows, 20 points up to 10 MB.
pub const FB_HADOOP: &str = "\
# Facebook Hadoop flow sizes: Roy et al., SIGCOMM 2015, Fig. 6 (as HPCC, SIGCOMM 2019, uses them).
0 0
100 1
200 2
300 5
350 15
400 20
500 30
600 40
700 50
1000 60
2000 67
7000 70
30000 72
50000 82
80000 87
120000 90
300000 95
1000000 97.5
2000000 99
10000000 100
";

/// The built-in distribution called `name` in a scenario (`websearch`, `fbhadoop`), if any.
pub fn builtin(name: &str) -> Option<&'static str> {
    match name {
        "websearch" => Some(WEB_SEARCH),
        "fbhadoop" => Some(FB_HADOOP),
        _ => None,
    }
}

/// A flow-size distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeCdf {
    /// (size in bytes, cumulative fraction), both increasing, the last fraction 1.
    points: Vec<(f64, f64)>,
}

impl SizeCdf {
    /// Parses the file format above; the error names the 1-based line.
    pub fn parse(text: &str) -> Result<SizeCdf, (usize, String)> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut f = line.split_whitespace();
            let (Some(size), Some(pct), None) = (f.next(), f.next(), f.next()) else {
                return Err((k + 1, format!("expected `size_bytes cdf_percent`, got `{line}`")));
            };
            let size: f64 = size
                .parse()
                .map_err(|_| (k + 1, format!("size `{size}` is not a number")))?;
            let pct: f64 = pct
                .parse()
                .map_err(|_| (k + 1, format!("percentage `{pct}` is not a number")))?;
            if !(0.0..=100.0).contains(&pct) || size < 0.0 || !size.is_finite() {
                return Err((
                    k + 1,
                    format!("expected a size ≥ 0 and a percentage in 0-100, got {size} {pct}"),
                ));
            }
            if let Some(&(s0, p0)) = points.last()
                && (size < s0 || pct < p0 * 100.0)
            {
                return Err((
                    k + 1,
                    format!("expected sizes and percentages not to decrease, got {size} {pct}"),
                ));
            }
            points.push((size, pct / 100.0));
        }
        match points.last() {
            Some(&(_, p)) if (p - 1.0).abs() < 1e-9 => Ok(SizeCdf { points }),
            _ => Err((text.lines().count(), "expected the last point at 100 %".into())),
        }
    }

    /// Mean flow size (bytes), trapezoid rule.
    pub fn mean(&self) -> f64 {
        let first = self.points[0];
        let area: f64 = self
            .points
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0)
            .sum();
        first.0 * first.1 + area
    }

    /// The size at cumulative fraction `u` ∈ [0, 1] (at least one byte).
    pub fn size_at(&self, u: f64) -> u64 {
        let i = self.points.partition_point(|p| p.1 < u);
        let size = match i {
            0 => self.points[0].0,
            i if i >= self.points.len() => self.points[self.points.len() - 1].0,
            i => {
                let (s0, p0) = self.points[i - 1];
                let (s1, p1) = self.points[i];
                if p1 > p0 {
                    s0 + (s1 - s0) * (u - p0) / (p1 - p0)
                } else {
                    s1
                }
            }
        };
        (size.round() as u64).max(1)
    }
}

/// Poisson flows among `hosts` at `load` of `link_bps` over `window_ns`, sizes from `cdf`;
/// numbered from `first_id`, in start order.
pub(super) fn plan(
    cdf: &SizeCdf,
    hosts: &[usize],
    link_bps: u64,
    load: f64,
    window_ns: u64,
    seed: u64,
    first_id: u32,
) -> Vec<PlannedFlow> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let gap_ns = cdf.mean() * 8.0 / (link_bps as f64 * load.max(1e-9)) * 1e9;
    let mut out: Vec<PlannedFlow> = Vec::new();
    if hosts.len() < 2 {
        return out;
    }
    for &src in hosts {
        let mut t = 0.0f64;
        loop {
            // Exponential gap: −ln(1 − U) × mean.
            t += -(1.0 - rng.f64()).ln() * gap_ns;
            if t >= window_ns as f64 {
                break;
            }
            let mut dst = hosts[rng.usize(..hosts.len() - 1)];
            if dst == src {
                dst = hosts[hosts.len() - 1];
            }
            out.push(PlannedFlow {
                id: 0,
                src,
                dst,
                size: cdf.size_at(rng.f64()),
                start_ns: t as u64,
                kind: MessageKind::Write,
                step: None,
            });
        }
    }
    out.sort_by_key(|f| f.start_ns);
    for (k, f) in out.iter_mut().enumerate() {
        f.id = first_id + k as u32;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_search_has_its_published_shape() {
        let c = SizeCdf::parse(WEB_SEARCH).expect("valid");
        // Trapezoid mean of the 12 points: about 1.6 MB.
        let m = c.mean();
        assert!((1.5e6..1.8e6).contains(&m), "{m}");
        assert_eq!(c.size_at(0.15), 10_000);
        assert_eq!(c.size_at(0.25), 25_000);
        assert_eq!(c.size_at(1.0), 30_000_000);
    }

    #[test]
    fn fb_hadoop_is_mostly_small_flows() {
        let c = SizeCdf::parse(builtin("fbhadoop").expect("built in")).expect("valid");
        // Half the flows are at most 700 B, yet the mean is tens of KB (the 10 MB tail).
        assert_eq!(c.size_at(0.5), 700);
        let m = c.mean();
        assert!((50e3..300e3).contains(&m), "{m}");
        assert_eq!(c.size_at(1.0), 10_000_000);
        assert!(builtin("websearch").is_some() && builtin("datamining").is_none());
    }

    #[test]
    fn bad_cdf_files_name_the_line() {
        assert_eq!(SizeCdf::parse("0 0\n100 50\n50 60\n").unwrap_err().0, 3);
        assert_eq!(SizeCdf::parse("0 0\nx 50\n").unwrap_err().0, 2);
        assert!(SizeCdf::parse("0 0\n100 90\n").unwrap_err().1.contains("100 %"));
        assert_eq!(SizeCdf::parse("0 0\n10 10 10\n").unwrap_err().0, 2);
    }

    #[test]
    fn arrivals_offer_the_target_load() {
        let c = SizeCdf::parse(WEB_SEARCH).expect("valid");
        let hosts = [1, 2, 3, 4];
        // 4000 s at 100 Mb/s: about 60,000 flows, so the heavy tail averages out and the load
        // offered is the target's within 2 % (a 20 s window could be off by 30 %).
        let window = 4_000_000_000_000;
        for seed in [1, 7] {
            let flows = plan(&c, &hosts, 100_000_000, 0.5, window, seed, 1);
            let bytes: u64 = flows.iter().map(|f| f.size).sum();
            let offered = bytes as f64 * 8.0 / (window as f64 * 1e-9) / (4.0 * 100e6);
            eprintln!("seed {seed}: {} flows, offered load {offered:.4}", flows.len());
            assert!((offered - 0.5).abs() < 0.01, "offered load {offered}");
        }
        let flows = plan(&c, &hosts, 100_000_000, 0.5, 20_000_000_000, 7, 1);
        assert!(flows.iter().all(|f| f.src != f.dst));
        assert!(
            flows
                .windows(2)
                .all(|w| w[0].start_ns <= w[1].start_ns && w[1].id == w[0].id + 1)
        );
    }
}
