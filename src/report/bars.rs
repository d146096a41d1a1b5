//! Bar charts from result files: throughput per run label, and p50/p99 latency to durability per
//! run label (grouped bars, log scale); and a figure file's bars (grouped or stacked, linear).

use super::figure::Figure;
use super::input::{RecoveryRun, ResultFile};
use super::plot::{DrawResult, LOG_LABELS, format_count, format_log_us, log_range, series_color, text};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One bar per result file: committed transactions per second.
pub(super) fn draw_throughput<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, results: &[ResultFile]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let y_max = results.iter().map(|r| r.summary.throughput_per_s).fold(0.0, f64::max);
    let labels: Vec<&str> = results.iter().map(|r| r.summary.label.as_str()).collect();
    let mut chart = count_chart(root, "Throughput per run", &labels, y_max, "committed txn/s")?;
    let n = results.len();
    let pad = segment_px(&chart, n) / 6;
    let bars = results.iter().enumerate().map(|(i, r)| {
        let mut bar =
            Rectangle::new([(edge(i, n), 0.0), (edge(i + 1, n), r.summary.throughput_per_s)], series_color(0).filled());
        bar.set_margin(0, 0, pad, pad);
        bar
    });
    chart.draw_series(bars)?;
    Ok(())
}

/// Two bars per result file, p50 and p99 latency to durability, on a log scale.
pub(super) fn draw_latency<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, results: &[ResultFile]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let values =
        results.iter().flat_map(|r| [r.summary.total.durable_latency_us.p50, r.summary.total.durable_latency_us.p99]);
    let labels: Vec<&str> = results.iter().map(|r| r.summary.label.as_str()).collect();
    let mut chart = ChartBuilder::on(root)
        .caption("Latency to durability per run", text(20.0))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(segments(results.len()), log_range(values).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(results.len())
        .x_label_formatter(&|v| segment_label(&labels, v))
        .y_labels(LOG_LABELS)
        .y_max_light_lines(0)
        .bold_line_style(BLACK.mix(0.12))
        .y_desc("latency (log scale)")
        .y_label_formatter(&|v| format_log_us(*v))
        .label_style(text(12.0))
        .axis_desc_style(text(14.0))
        .draw()?;
    let n = results.len();
    let segment = segment_px(&chart, n);
    let (pad, half) = (segment / 8, segment / 2);
    let base = chart.y_range().start;
    let series = [("p50", series_color(0), (pad, half)), ("p99", series_color(1), (half, pad))];
    for (name, color, (left, right)) in series {
        let bars = results.iter().enumerate().map(move |(i, r)| {
            let p = &r.summary.total.durable_latency_us;
            let value = if name == "p50" { p.p50 } else { p.p99 } as f64;
            let mut bar = Rectangle::new([(edge(i, n), base), (edge(i + 1, n), value)], color.filled());
            bar.set_margin(0, 0, left, right);
            bar
        });
        chart
            .draw_series(bars)?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(text(12.0))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

/// A figure file's chart: per group, its series side by side (or stacked into one bar).
pub(super) fn draw_figure<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, figure: &Figure) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = figure.groups.len();
    let labels: Vec<&str> = figure.groups.iter().map(|g| g.label.as_str()).collect();
    // Room above the tallest bar for the legend, a line per series.
    let headroom = 1.1 + 0.08 * figure.series.len() as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(&figure.title, text(18.0))
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(70)
        .build_cartesian_2d(segments(n), 0.0..(figure.max_bar() * headroom).max(1e-9))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| segment_label(&labels, v))
        .x_desc(figure.x_label.as_str())
        .y_desc(figure.y_label.as_str())
        .y_label_formatter(&|v| format_count(*v))
        .label_style(text(12.0))
        .axis_desc_style(text(14.0))
        .draw()?;
    let series = figure.series.len();
    let segment = segment_px(&chart, n);
    let pad = segment / 8;
    // Side by side: series `s` takes the `s`-th slice of the segment's inner width.
    let slice = segment.saturating_sub(2 * pad) / u32::try_from(series).unwrap_or(u32::MAX).max(1);
    for (s, name) in figure.series.iter().enumerate() {
        let color = series_color(s);
        let bars = figure.groups.iter().enumerate().map(move |(i, g)| {
            let (bottom, top) = if figure.stacked {
                let below: f64 = g.values[..s].iter().sum();
                (below, below + g.values[s])
            } else {
                (0.0, g.values[s])
            };
            let mut bar = Rectangle::new([(edge(i, n), bottom), (edge(i + 1, n), top)], color.filled());
            if figure.stacked {
                bar.set_margin(0, 0, pad, pad);
            } else {
                let left = pad + slice * u32::try_from(s).unwrap_or(0);
                bar.set_margin(0, 0, left, segment.saturating_sub(left + slice));
            }
            bar
        });
        chart
            .draw_series(bars)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(text(12.0))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

/// An x axis of `n` segments (plotters' integer ranges include their end).
fn segments(n: usize) -> plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize> {
    (0..n.saturating_sub(1)).into_segmented()
}

/// The left edge of segment `i` of `n` (the right edge of the last one is plotters' `Last`).
fn edge(i: usize, n: usize) -> SegmentValue<usize> {
    if i >= n { SegmentValue::Last } else { SegmentValue::Exact(i) }
}

/// The label under segment `i` (only at segment centres).
fn segment_label(labels: &[&str], v: &SegmentValue<usize>) -> String {
    match v {
        SegmentValue::CenterOf(i) => labels.get(*i).map_or_else(String::new, |l| (*l).to_string()),
        _ => String::new(),
    }
}

/// Width of one segment of the x axis in pixels.
fn segment_px<DB: DrawingBackend, CT: plotters::coord::CoordTranslate>(
    chart: &ChartContext<'_, DB, CT>,
    segments: usize,
) -> u32 {
    let width = chart.plotting_area().dim_in_pixel().0;
    width / u32::try_from(segments.max(1)).unwrap_or(u32::MAX)
}

/// One bar per command-log replay: its time, stacked by phase (PACMAN Figures 19 and 20); drawn
/// as a stacked figure.
pub(super) fn draw_recovery<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[RecoveryRun]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let phases: Vec<&str> = (0..4).map(RecoveryRun::phase_name).collect();
    let mut figure = Figure::new("recovery", "Command-log replay time by phase", "run", "milliseconds", &phases);
    figure.stacked = true;
    for r in runs {
        figure.push(&r.label, r.phases().iter().map(|p| p.1).collect());
    }
    draw_figure(root, &figure)
}

/// The chart type of [`count_chart`].
type CountChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<
        plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize>,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// A chart with one segment per label on x and counts from 0 to `y_max` (plus headroom) on y.
fn count_chart<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    caption: &str,
    labels: &[&str],
    y_max: f64,
    y_desc: &str,
) -> Result<CountChart<'a, DB>, Box<dyn std::error::Error + Send + Sync>>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(root)
        .caption(caption, text(20.0))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(segments(labels.len()), 0.0..(y_max * 1.15).max(1.0))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(labels.len())
        .x_label_formatter(&|v| segment_label(labels, v))
        .y_desc(y_desc)
        .y_label_formatter(&|v| format_count(*v))
        .label_style(text(12.0))
        .axis_desc_style(text(14.0))
        .draw()?;
    Ok(chart)
}
