//! The run's plots, as SVG (plotters' SVG backend needs no font libraries).

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

fn fct_cdf(path: &Path, r: &Results) -> Result {
    let mut fct_ms: Vec<f64> = r
        .flows
        .iter()
        .filter_map(|f| f.fct_ns)
        .map(|n| n as f64 / 1e6)
        .collect();
    fct_ms.sort_by(f64::total_cmp);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title(r, "FCT CDF"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..span(fct_ms.last().copied().unwrap_or(0.0)), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("flow completion time (ms)")
        .y_desc("fraction of flows")
        .draw()?;
    let n = fct_ms.len() as f64;
    // A step per flow: the CDF jumps at each completion time.
    let steps = fct_ms
        .iter()
        .enumerate()
        .flat_map(|(i, &x)| [(x, i as f64 / n), (x, (i + 1) as f64 / n)]);
    chart.draw_series(LineSeries::new(steps, BLUE.stroke_width(2)))?;
    root.present()
}

fn rates(path: &Path, r: &Results) -> Result {
    let mut ids: Vec<u32> = r.series.iter().map(|p| p.flow).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.truncate(MAX_RATE_LINES);
    let t_max = r.series.iter().map(|p| p.t_ns).max().unwrap_or(0) as f64 / 1e6;
    let r_max = r.series.iter().map(|p| p.rate_bps).max().unwrap_or(0) as f64 / 1e6;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title(r, "pacing rate per flow"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..span(t_max), 0.0..span(r_max))?;
    chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("rate (Mb/s)")
        .draw()?;
    for (k, id) in ids.iter().enumerate() {
        let colour = Palette99::pick(k).to_rgba();
        let points = r
            .series
            .iter()
            .filter(|p| p.flow == *id)
            .map(|p| (p.t_ns as f64 / 1e6, p.rate_bps as f64 / 1e6));
        let series = chart.draw_series(LineSeries::new(points, colour.stroke_width(1)))?;
        if ids.len() <= 8 {
            series
                .label(format!("flow {id}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        }
    }
    if ids.len() <= 8 && !ids.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()
}

fn queue(path: &Path, r: &Results) -> Result {
    let bottleneck = r.summary.bottleneck.as_deref().unwrap_or("");
    let q = r
        .queues
        .iter()
        .find(|q| format!("{}:{}", q.switch, q.port) == bottleneck);
    let points: Vec<(f64, f64)> = q
        .map(|q| {
            q.points
                .iter()
                .map(|&(t, b)| (t as f64 / 1e6, b as f64 / 1e3))
                .collect()
        })
        .unwrap_or_default();
    let t_max = points.iter().map(|p| p.0).fold(0.0, f64::max);
    let q_max = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let what = if bottleneck.is_empty() {
        "queue".to_owned()
    } else {
        format!("queue at {bottleneck}")
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title(r, &what), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..span(t_max), 0.0..span(q_max))?;
    chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("largest queue per interval (KB)")
        .draw()?;
    chart.draw_series(LineSeries::new(points, RED.stroke_width(1)))?;
    root.present()
}
