//! Jain's fairness index of the flows' throughput, window by window.

use serde::Serialize;

use super::{FlowResult, SeriesPoint};

/// Jain's index over consecutive windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fairness {
    /// Window length (ns).
    pub window_ns: u64,
    /// Windows with at least two flows active throughout and some bytes acknowledged.
    pub windows: usize,
    /// Windows with at least two flows active throughout in which no flow had a byte
    /// acknowledged: no data, so no index (all flows stalled); not in the mean or the minimum.
    pub empty_windows: usize,
    /// Mean index over the windows.
    pub mean: f64,
    /// Smallest index of any window.
    pub min: f64,
}

/// Jain's index (Σx)² / (n·Σx²) of `x`; 1 when all are equal, 1/n when one has everything.
/// None when there is nothing to share (no values, or all zero): no data is not fairness.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// A flow's start, end, and (time, bytes acknowledged) points.
type Track = (u64, u64, Vec<(u64, u64)>);

/// Bytes acknowledged at `t`, interpolated between the samples around it.
fn acked_at(points: &[(u64, u64)], t: u64) -> f64 {
    let i = points.partition_point(|p| p.0 <= t);
    match (i.checked_sub(1).map(|k| points[k]), points.get(i)) {
        (Some((t0, a0)), Some(&(t1, a1))) if t1 > t0 => {
            a0 as f64 + (a1 - a0) as f64 * (t - t0) as f64 / (t1 - t0) as f64
        }
        (Some((_, a0)), _) => a0 as f64,
        (None, _) => 0.0,
    }
}

/// Jain's index of per-flow throughput in consecutive windows of `window_ns` over the flows
/// active throughout each window. Windows begin `skip_ns` after the set of active flows last
/// changed (a flow started or finished), so they measure the steady state of each set, not its
/// convergence. Windows overlapping an interval of `avoid` (such as the time around a host
/// stall) are left out. None when no window has two flows.
pub fn windowed(
    flows: &[FlowResult],
    series: &[SeriesPoint],
    window_ns: u64,
    skip_ns: u64,
    avoid: &[(u64, u64)],
) -> Option<Fairness> {
    if window_ns == 0 {
        return None;
    }
    let tracks: Vec<Track> = flows
        .iter()
        .map(|f| {
            let mut points: Vec<(u64, u64)> = series
                .iter()
                .filter(|p| p.flow == f.id)
                .map(|p| (p.t_ns, p.acked_bytes))
                .collect();
            points.sort_unstable();
            let end = f
                .fct_ns
                .map_or(points.last().map_or(f.start_ns, |p| p.0), |n| f.start_ns + n);
            (f.start_ns, end, points)
        })
        .collect();
    let first = tracks.iter().map(|t| t.0).min()?;
    let last = tracks.iter().map(|t| t.1).max()?;
    let mut changes: Vec<u64> = tracks.iter().flat_map(|t| [t.0, t.1]).collect();
    changes.sort_unstable();
    let mut indices = Vec::new();
    let mut empty_windows = 0;
    let mut at = first + skip_ns;
    while at + window_ns <= last {
        let end = at + window_ns;
        // A change inside the window, or less than `skip_ns` before it: start again after it.
        if let Some(&c) = changes.iter().find(|&&c| c + skip_ns > at && c < end) {
            at = c + skip_ns;
            continue;
        }
        if let Some(&(_, until)) = avoid.iter().find(|&&(from, until)| from < end && until > at) {
            at = until;
            continue;
        }
        let rates: Vec<f64> = tracks
            .iter()
            .filter(|(s, e, _)| *s <= at && *e >= end)
            .map(|(_, _, p)| acked_at(p, end) - acked_at(p, at))
            .collect();
        if rates.len() >= 2 {
            match jain(&rates) {
                Some(j) => indices.push(j),
                None => empty_windows += 1,
            }
        }
        at = end;
    }
    if indices.is_empty() && empty_windows == 0 {
        return None;
    }
    Some(Fairness {
        window_ns,
        windows: indices.len(),
        empty_windows,
        mean: indices.iter().sum::<f64>() / indices.len().max(1) as f64,
        min: indices.iter().copied().fold(f64::INFINITY, f64::min),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_when_equal_and_one_over_n_when_one_takes_all() {
        assert_eq!(jain(&[3.0, 3.0, 3.0]), Some(1.0));
        assert_eq!(jain(&[5.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert!((jain(&[1.0, 2.0]).unwrap() - 0.9).abs() < 1e-12);
        assert_eq!(jain(&[0.0, 0.0]), None, "flows that all sent nothing are no data");
        assert_eq!(jain(&[]), None);
    }

    fn flow(id: u32, start_ns: u64, fct_ns: u64) -> FlowResult {
        FlowResult::fixture(id, start_ns, Some(fct_ns))
    }

    fn point(flow: u32, t_ns: u64, acked_bytes: u64) -> SeriesPoint {
        SeriesPoint {
            flow,
            t_ns,
            rate_bps: 0,
            acked_bytes,
            window_bytes: None,
            utilization: None,
            int_qlen_bytes: None,
            rtt_ns: None,
            target_delay_ns: None,
        }
    }

    #[test]
    fn windows_interpolate_and_restart_after_the_flow_set_changes() {
        // Flow 1 at 2 B/ns, flow 2 at 1 B/ns, sampled every 15 ns: every window has 40 B and
        // 20 B (interpolated between samples), Jain 0.9.
        let flows = [flow(1, 0, 60), flow(2, 0, 60)];
        let mut series = Vec::new();
        for t in (0..=60).step_by(15) {
            series.push(point(1, t, 2 * t));
            series.push(point(2, t, t));
        }
        let f = windowed(&flows, &series, 20, 0, &[]).unwrap();
        assert_eq!(f.windows, 3);
        assert!((f.min - 0.9).abs() < 1e-9 && (f.mean - 0.9).abs() < 1e-9, "{f:?}");
        // Flow 3 joins at 25 with as much as flow 2. With a skip of 5: [5, 25] has flows 1
        // and 2 (0.9); [25, 45] would hold the change, so the next window is [30, 50] with all
        // three (40, 20, 20 B: 6400/7200); [50, 70] would end after the flows.
        let mut with_third = flows.to_vec();
        with_third.push(flow(3, 25, 35));
        series.push(point(3, 25, 0));
        series.push(point(3, 60, 35));
        let f = windowed(&with_third, &series, 20, 5, &[]).unwrap();
        assert_eq!(f.windows, 2, "{f:?}");
        assert!((f.min - 6400.0 / 7200.0).abs() < 1e-9, "{f:?}");
        assert!((f.mean - (0.9 + 6400.0 / 7200.0) / 2.0).abs() < 1e-9, "{f:?}");
        assert!(
            windowed(&flows[..1], &series, 20, 0, &[]).is_none(),
            "one flow is no comparison"
        );
        // Both flows stalled from 60 on (their last samples repeat): those windows are empty,
        // counted as such, and not fair.
        let mut stalled = series.clone();
        for t in [75, 90, 105] {
            stalled.push(point(1, t, 120));
            stalled.push(point(2, t, 60));
        }
        let long = [flow(1, 0, 105), flow(2, 0, 105)];
        let f = windowed(&long, &stalled, 20, 0, &[]).unwrap();
        assert_eq!((f.windows, f.empty_windows), (3, 2), "{f:?}");
        assert!((f.min - 0.9).abs() < 1e-9, "{f:?}");
        // Avoiding [8, 12]: [0, 20] is skipped, the next window starts at 12.
        let f = windowed(&flows, &series, 20, 0, &[(8, 12)]).unwrap();
        assert_eq!(f.windows, 2, "{f:?}");
    }
}
