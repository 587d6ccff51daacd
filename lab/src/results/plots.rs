//! The run's plots, as SVG (plotters' SVG backend needs no font libraries).

use std::collections::HashMap;
use std::io;
use std::path::Path;

use plotters::prelude::*;

use super::Results;

/// FCT CDF plot file.
pub const FCT_CDF: &str = "fct_cdf.svg";
/// Per-flow rate over time plot file.
pub const RATES: &str = "rates.svg";
/// Bottleneck queue over time plot file.
pub const QUEUE: &str = "queue.svg";

/// Flows drawn at most in the rate plot (the first ones by id), so it stays readable.
const MAX_RATE_LINES: usize = 16;
const SIZE: (u32, u32) = (800, 500);

fn plot_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> io::Error {
    io::Error::other(e.to_string())
}

/// Draws every plot into `dir`.
pub fn draw_all(dir: &Path, r: &Results) -> io::Result<()> {
    fct_cdf(&dir.join(FCT_CDF), r).map_err(plot_error)?;
    rates(&dir.join(RATES), r).map_err(plot_error)?;
    queue(&dir.join(QUEUE), r).map_err(plot_error)
}

/// A range that plotters accepts even when every value is the same.
fn span(max: f64) -> f64 {
    if max > 0.0 { max * 1.05 } else { 1.0 }
}

fn title(r: &Results, what: &str) -> String {
    format!("{}: {} ({})", r.summary.scenario, what, r.summary.controller)
}

type Result<T = ()> = std::result::Result<T, DrawingAreaErrorKind<std::io::Error>>;

/// One labelled line of a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend text (empty: not in the legend).
    pub label: String,
    /// Its points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// A plot of `lines` (colours from a palette; a legend when some are labelled).
pub fn lines(path: &Path, caption: &str, x_desc: &str, y_desc: &str, lines: &[Line]) -> io::Result<()> {
    draw_lines(path, (caption, x_desc, y_desc), lines, &[]).map_err(plot_error)
}

/// A plot of `lines` with a dashed vertical line and its label at each of `marks` (x, label):
/// the network's events.
fn draw_lines(
    path: &Path,
    (caption, x_desc, y_desc): (&str, &str, &str),
    lines: &[Line],
    marks: &[(f64, String)],
) -> Result {
    let all = lines.iter().flat_map(|l| &l.points);
    let (x_max, y_max) = all.fold((0.0f64, 0.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let x_max = marks.iter().fold(x_max, |x, m| x.max(m.0));
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..span(x_max), 0.0..span(y_max))?;
    chart.configure_mesh().x_desc(x_desc).y_desc(y_desc).draw()?;
    let top = span(y_max);
    for (k, (x, label)) in marks.iter().enumerate() {
        let grey = BLACK.mix(0.45);
        // Dashes of a twentieth of the height: plotters draws no dashed style in SVG.
        let dashes = (0..20).step_by(2).map(|i| {
            let y = top * f64::from(i) / 20.0;
            PathElement::new(vec![(*x, y), (*x, y + top / 20.0)], grey.stroke_width(1))
        });
        chart.draw_series(dashes)?;
        // Labels stagger down so that close events stay readable.
        let y = top * (0.97 - 0.05 * (k % 4) as f64);
        chart.draw_series(std::iter::once(Text::new(label.clone(), (*x, y), ("sans-serif", 12))))?;
    }
    let single = lines.len() == 1;
    for (k, line) in lines.iter().enumerate() {
        let colour = if single {
            BLUE.to_rgba()
        } else {
            Palette99::pick(k).to_rgba()
        };
        let series = chart.draw_series(LineSeries::new(line.points.iter().copied(), colour.stroke_width(2)))?;
        if !line.label.is_empty() {
            series
                .label(line.label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        }
    }
    if lines.iter().any(|l| !l.label.is_empty()) {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()
}

/// The FCT CDF of `r` as steps (ms, fraction of flows).
pub fn fct_cdf_points(r: &Results) -> Vec<(f64, f64)> {
    let mut fct_ms: Vec<f64> = r
        .flows
        .iter()
        .filter_map(|f| f.fct_ns)
        .map(|n| n as f64 / 1e6)
        .collect();
    fct_ms.sort_by(f64::total_cmp);
    let n = fct_ms.len() as f64;
    // A step per flow: the CDF jumps at each completion time.
    fct_ms
        .iter()
        .enumerate()
        .flat_map(|(i, &x)| [(x, i as f64 / n), (x, (i + 1) as f64 / n)])
        .collect()
}

/// The bottleneck's queue over time (ms, KB).
pub fn queue_points(r: &Results) -> Vec<(f64, f64)> {
    let bottleneck = r.summary.bottleneck.as_deref().unwrap_or("");
    r.queues
        .iter()
        .find(|q| format!("{}:{}", q.switch, q.port) == bottleneck)
        .map(|q| {
            q.points
                .iter()
                .map(|&(t, b)| (t as f64 / 1e6, b as f64 / 1e3))
                .collect()
        })
        .unwrap_or_default()
}

/// Bins of the aggregate-throughput plot.
const THROUGHPUT_BINS: u64 = 100;

/// Every flow's acknowledged bytes summed, as throughput over time (ms, Gb/s), in
/// [`THROUGHPUT_BINS`] bins from the series.
pub fn throughput_points(r: &Results) -> Vec<(f64, f64)> {
    let t_max = r.series.iter().map(|p| p.t_ns).max().unwrap_or(0);
    let bin = (t_max / THROUGHPUT_BINS).max(1);
    let mut bytes = vec![0u64; THROUGHPUT_BINS as usize + 1];
    let mut last: HashMap<u32, u64> = HashMap::new();
    for p in &r.series {
        let before = last.insert(p.flow, p.acked_bytes).unwrap_or(0);
        let k = ((p.t_ns / bin) as usize).min(bytes.len() - 1);
        bytes[k] += p.acked_bytes.saturating_sub(before);
    }
    bytes
        .iter()
        .enumerate()
        .map(|(k, &b)| ((k as u64 * bin) as f64 / 1e6, b as f64 * 8.0 / bin as f64))
        .collect()
}

fn fct_cdf(path: &Path, r: &Results) -> Result {
    let line = Line {
        label: String::new(),
        points: fct_cdf_points(r),
    };
    draw_lines(
        path,
        (&title(r, "FCT CDF"), "flow completion time (ms)", "fraction of flows"),
        &[line],
        &[],
    )
}

fn rates(path: &Path, r: &Results) -> Result {
    let mut ids: Vec<u32> = r.series.iter().map(|p| p.flow).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.truncate(MAX_RATE_LINES);
    let labelled = ids.len() <= 8;
    let per_flow: Vec<Line> = ids
        .iter()
        .map(|id| Line {
            label: if labelled { format!("flow {id}") } else { String::new() },
            points: r
                .series
                .iter()
                .filter(|p| p.flow == *id)
                .map(|p| (p.t_ns as f64 / 1e6, p.rate_bps as f64 / 1e6))
                .collect(),
        })
        .collect();
    draw_lines(
        path,
        (&title(r, "pacing rate per flow"), "time (ms)", "rate (Mb/s)"),
        &per_flow,
        &event_marks(r),
    )
}

fn queue(path: &Path, r: &Results) -> Result {
    let what = match r.summary.bottleneck.as_deref() {
        Some(b) => format!("queue at {b}"),
        None => "queue".to_owned(),
    };
    let line = Line {
        label: String::new(),
        points: queue_points(r),
    };
    draw_lines(
        path,
        (&title(r, &what), "time (ms)", "largest queue per interval (KB)"),
        &[line],
        &event_marks(r),
    )
}

/// The network's events as plot marks (ms, what).
fn event_marks(r: &Results) -> Vec<(f64, String)> {
    r.events.iter().map(|e| (e.t_ns as f64 / 1e6, e.what.clone())).collect()
}
