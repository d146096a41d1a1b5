//! The charts of a report and their rendering with plotters, to an SVG string or a PNG file.
//!
//! Text is measured (and, in PNGs, drawn) with DejaVu Sans, embedded in the binary and registered
//! with plotters' `ab_glyph` font table as `sans-serif`, so nothing depends on system fonts.

use super::figure::{Figure, FigureFile};
use super::input::{Inputs, RecoveryRun, ResultFile, Timeline};
use super::{PlotSet, ReportError, bars, scaling, timeline};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::Path;
use std::sync::OnceLock;

/// DejaVu Sans (Bitstream Vera license, see `assets/fonts/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The font family every chart uses (the one [`FONT`] is registered under).
pub(super) const FAMILY: &str = "sans-serif";

/// What drawing a chart returns; plotters' errors are turned into [`ReportError::Draw`] at the edge.
pub(super) type DrawResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// One chart of a report.
pub(super) enum Chart<'a> {
    /// Throughput over time of all timelines.
    Throughput(&'a [Timeline]),
    /// Latency to durability over time of one timeline (with its 1-based position).
    Latency(usize, &'a Timeline),
    /// Throughput per result label.
    ThroughputBars(&'a [ResultFile]),
    /// Latency to durability p50/p99 per result label.
    LatencyBars(&'a [ResultFile]),
    /// A figure file's bars.
    Figure(&'a FigureFile),
    /// Command-log replay time per run, stacked by phase.
    RecoveryBars(&'a [RecoveryRun]),
    /// A measure per scheme against threads, built from result files ([`scaling`]).
    Scaling(Figure),
}

impl Chart<'_> {
    /// A short identifier, unique within a report (PNG file stem, HTML id).
    pub(super) fn id(&self) -> String {
        match self {
            Chart::Throughput(_) => "throughput".to_string(),
            Chart::Latency(n, t) => format!("latency-{n}-{}", sanitize(&t.name)),
            Chart::ThroughputBars(_) => "bars-throughput".to_string(),
            Chart::LatencyBars(_) => "bars-latency".to_string(),
            Chart::Figure(f) => format!("figure-{}", f.figure.id),
            Chart::RecoveryBars(_) => "bars-recovery".to_string(),
            Chart::Scaling(f) => format!("bars-{}", f.id),
        }
    }

    fn size(&self) -> (u32, u32) {
        match self {
            Chart::Throughput(_) => (900, 400),
            Chart::Latency(..) => (900, 340),
            Chart::ThroughputBars(_) | Chart::LatencyBars(_) => (520, 400),
            Chart::Figure(f) => (figure_width(&f.figure), 420),
            Chart::RecoveryBars(r) => (180 + 90 * r.len() as u32, 420),
            Chart::Scaling(f) => (figure_width(f), 420),
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        match self {
            Chart::Throughput(t) => timeline::draw_throughput(root, t),
            Chart::Latency(_, t) => timeline::draw_latency(root, t),
            Chart::ThroughputBars(r) => bars::draw_throughput(root, r),
            Chart::LatencyBars(r) => bars::draw_latency(root, r),
            Chart::Figure(f) => bars::draw_figure(root, &f.figure),
            Chart::RecoveryBars(r) => bars::draw_recovery(root, r),
            Chart::Scaling(f) => bars::draw_figure(root, f),
        }?;
        root.present()?;
        Ok(())
    }
}

/// The charts `plots` asks for that `inputs` can fill, in page order.
pub(super) fn charts(inputs: &Inputs, plots: PlotSet) -> Vec<Chart<'_>> {
    let mut charts = Vec::new();
    if plots.throughput && !inputs.timelines.is_empty() {
        charts.push(Chart::Throughput(&inputs.timelines));
    }
    if plots.latency {
        charts.extend(inputs.timelines.iter().enumerate().map(|(i, t)| Chart::Latency(i + 1, t)));
    }
    if plots.bars && !inputs.results.is_empty() {
        charts.push(Chart::ThroughputBars(&inputs.results));
        charts.push(Chart::LatencyBars(&inputs.results));
    }
    if plots.bars && !inputs.recoveries.is_empty() {
        charts.push(Chart::RecoveryBars(&inputs.recoveries));
    }
    if plots.bars {
        charts.extend(scaling::figures(inputs).into_iter().map(Chart::Scaling));
    }
    if plots.figures {
        charts.extend(inputs.figures.iter().map(Chart::Figure));
    }
    charts
}

/// Width of a figure's chart: wide enough for its bars and group labels (about 7 pixels a
/// character at 12 points), between 520 and 1600 pixels.
fn figure_width(figure: &super::figure::Figure) -> u32 {
    let label_chars = figure.groups.iter().map(|g| g.label.chars().count()).max().unwrap_or(0);
    let group_px = (figure.series.len() * 28).max(label_chars * 7 + 12);
    let px = figure.groups.len().saturating_mul(group_px).saturating_add(160);
    u32::try_from(px).unwrap_or(u32::MAX).clamp(520, 1600)
}

/// Renders a chart as an SVG document.
pub(super) fn render_svg(chart: &Chart<'_>) -> Result<String, ReportError> {
    register_embedded_font()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, chart.size()).into_drawing_area();
        chart.draw(&root).map_err(|e| draw_error(chart, &*e))?;
    }
    Ok(svg)
}

/// Renders a chart as a PNG file.
pub(super) fn render_png(chart: &Chart<'_>, path: &Path) -> Result<(), ReportError> {
    register_embedded_font()?;
    let root = BitMapBackend::new(path, chart.size()).into_drawing_area();
    chart.draw(&root).map_err(|e| draw_error(chart, &*e))
}

fn draw_error(chart: &Chart<'_>, e: &(dyn std::error::Error + Send + Sync)) -> ReportError {
    ReportError::Draw { chart: chart.id(), message: e.to_string() }
}

fn register_embedded_font() -> Result<(), ReportError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok { Ok(()) } else { Err(ReportError::Font) }
}

/// The colour of the `index`-th series.
pub(super) fn series_color(index: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
    ];
    COLORS[index % COLORS.len()]
}

/// A text style of the embedded font.
pub(super) fn text(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().into()
}

/// `12345.0` → `12.3k`: axis labels for counts and rates.
pub(super) fn format_count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        format!("{v:.0}")
    }
}

/// A latency in µs with a readable unit: `1500.0` → `1.5 ms`.
pub(super) fn format_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", trim(us / 1e6))
    } else if us >= 1e3 {
        format!("{} ms", trim(us / 1e3))
    } else {
        format!("{} µs", trim(us))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map_or(s.clone(), str::to_string)
}

/// How many key points to ask of a log axis: plotters then puts grid lines at 1..9 × 10^k when the
/// range spans few decades, and [`format_log_us`] labels only 1, 2 and 5 × 10^k of them.
pub(super) const LOG_LABELS: usize = 40;

/// A log-scale range from the power of ten at or below the smallest positive value to the one
/// above the largest (plotters labels a log axis only from its first power of ten on).
pub(super) fn log_range(values: impl Iterator<Item = u64>) -> std::ops::Range<f64> {
    let (lo, hi) = values.filter(|v| *v > 0).fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi == 0 {
        return 1.0..10.0;
    }
    let lo = 10f64.powf((lo as f64).log10().floor());
    let hi = 10f64.powf((hi as f64 * 1.01).log10().ceil());
    lo..hi
}

/// A log-axis label: the latency if its mantissa is 1, 2 or 5, else nothing.
pub(super) fn format_log_us(us: f64) -> String {
    let mantissa = us / 10f64.powf(us.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6) { format_us(us) } else { String::new() }
}

fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_ranges() {
        assert_eq!(format_count(12_345.0), "12.3k");
        assert_eq!(format_count(2_500_000.0), "2.5M");
        assert_eq!(format_count(12.0), "12");
        assert_eq!(format_us(1_500.0), "1.5 ms");
        assert_eq!(format_us(40_000.0), "40 ms");
        assert_eq!(format_us(7.0), "7 µs");
        assert_eq!(format_us(2e6), "2 s");
        assert_eq!(log_range([0, 30, 1000].into_iter()), 10.0..10_000.0);
        assert_eq!(log_range([45_000, 140_000].into_iter()), 10_000.0..1_000_000.0);
        assert_eq!(format_log_us(20_000.0), "20 ms");
        assert_eq!(format_log_us(30_000.0), "");
        assert_eq!(log_range([0].into_iter()), 1.0..10.0);
        assert_eq!(sanitize("a b/c-d"), "a_b_c-d");
    }
}
