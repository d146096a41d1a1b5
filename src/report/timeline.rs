//! Charts over time from timeline files: throughput (all files overlaid) and latency to durability
//! (one file), with the windows where a checkpoint ran shaded, as in SiloR's Figure 1.

use super::input::Timeline;
use super::plot::{DrawResult, LOG_LABELS, format_count, format_log_us, log_range, series_color, text};
use plotters::coord::Shift;
use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Opacity of the checkpoint shading.
const SHADE_OPACITY: f64 = 0.18;

/// Committed transactions per second over time, one line per timeline, each plotted at the middle
/// of its windows; each file's checkpoint windows are shaded in its line's colour.
pub(super) fn draw_throughput<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, timelines: &[Timeline]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let x_max = timelines.iter().map(Timeline::end_s).fold(0.0, f64::max);
    let y_max = timelines.iter().flat_map(|t| &t.windows).map(|w| w.throughput_per_s()).fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(root)
        .caption("Throughput over time", text(20.0))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..(y_max * 1.1).max(1.0))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("committed txn/s")
        .y_label_formatter(&|v| format_count(*v))
        .label_style(text(12.0))
        .axis_desc_style(text(14.0))
        .draw()?;
    for (i, t) in timelines.iter().enumerate() {
        let color = series_color(i);
        let label = if timelines.len() == 1 { "checkpoint".to_string() } else { format!("{}: checkpoint", t.name) };
        shade_checkpoints(&mut chart, t, color.mix(SHADE_OPACITY), &label)?;
        let points = t.windows.iter().map(|w| (w.mid_s(), w.throughput_per_s()));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(&t.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    draw_legend(&mut chart)
}

/// p50 and p99 latency to durability over time of one timeline, on a log scale; windows where
/// nothing became durable (percentile 0) are left out of the lines.
pub(super) fn draw_latency<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, timeline: &Timeline) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let values = timeline.windows.iter().flat_map(|w| [w.durable_p50_us, w.durable_p99_us]);
    let mut chart = ChartBuilder::on(root)
        .caption(format!("Latency to durability: {}", timeline.name), text(20.0))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..timeline.end_s(), log_range(values).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_labels(LOG_LABELS)
        .y_max_light_lines(0)
        .bold_line_style(BLACK.mix(0.12))
        .y_desc("latency (log scale)")
        .y_label_formatter(&|v| format_log_us(*v))
        .label_style(text(12.0))
        .axis_desc_style(text(14.0))
        .draw()?;
    shade_checkpoints(&mut chart, timeline, BLACK.mix(SHADE_OPACITY / 1.5), "checkpoint")?;
    let series = [("p50 to durability", series_color(0), 0), ("p99 to durability", series_color(1), 1)];
    for (label, color, which) in series {
        let points = timeline.windows.iter().map(|w| (w.mid_s(), [w.durable_p50_us, w.durable_p99_us][which]));
        let points = points.filter(|(_, v)| *v > 0).map(|(x, v)| (x, v as f64));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    draw_legend(&mut chart)
}

/// Shades each run of consecutive checkpoint windows as one rectangle over the whole y range, and
/// adds a legend entry `label` if there is any.
fn shade_checkpoints<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    timeline: &Timeline,
    color: RGBAColor,
    label: &str,
) -> DrawResult
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64>,
{
    let spans = checkpoint_spans(timeline);
    if spans.is_empty() {
        return Ok(());
    }
    let y = chart.y_range();
    let rects = spans.into_iter().map(|(start, end)| Rectangle::new([(start, y.start), (end, y.end)], color.filled()));
    chart
        .draw_series(rects)?
        .label(label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], color.filled()));
    Ok(())
}

/// The time spans (start, end) of consecutive checkpoint windows.
fn checkpoint_spans(timeline: &Timeline) -> Vec<(f64, f64)> {
    let mut spans: Vec<(f64, f64)> = Vec::new();
    for w in timeline.windows.iter().filter(|w| w.checkpoint) {
        match spans.last_mut() {
            Some(last) if last.1 == w.start_s => last.1 = w.end_s,
            _ => spans.push((w.start_s, w.end_s)),
        }
    }
    spans
}

fn draw_legend<'a, DB, Y>(chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>) -> DrawResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(text(12.0))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::input::parse_timeline;
    use std::path::Path;

    #[test]
    fn consecutive_checkpoint_windows_merge_into_one_span() {
        let text = format!(
            "{}\n0.5,1,0,1,1,1,1,1\n1.0,1,0,1,1,1,1,1\n1.5,1,0,1,1,1,1,0\n2.0,1,0,1,1,1,1,1\n",
            crate::bench::stats::TIMELINE_HEADER
        );
        let t = parse_timeline(Path::new("t.csv"), &text).unwrap();
        assert_eq!(checkpoint_spans(&t), vec![(0.0, 1.0), (1.5, 2.0)]);
    }
}
