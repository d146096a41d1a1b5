//! Scaling figures: a measure per scheme against the number of threads, built from result files
//! (Taurus's Figures 5 and 6: throughput and latency of each logging scheme as worker threads are
//! added; Figure 8: recovery throughput of each scheme as recovery threads are added).
//!
//! A run's place in a figure comes from its label, split at `/` (`lazarus bench`'s default label
//! is `workload/scheme/Nt`): the last part names the thread count and is dropped (the x position
//! is the file's `threads` field), the part before it is the series, and whatever comes before
//! that names the figure (for bench results, the workload when the label has only two parts). So
//! `--label ycsb/taurus-data-4-loggers/2t` puts a run in the `ycsb` figures as series
//! `taurus-data-4-loggers` at 2 threads. Two runs with the same figure, series and thread count:
//! the later file wins, so a figure holds one value per point.

use super::figure::{Figure, MAX_GROUPS, MAX_SERIES};
use super::input::{Inputs, StreamRecoveryRun};
use std::collections::BTreeMap;

/// One run's place in a figure and its value.
struct Point<'a> {
    figure: String,
    series: &'a str,
    threads: usize,
    value: f64,
}

/// The figure a label belongs to (`default` when the label does not say) and its series.
fn split_label<'a>(label: &'a str, default: &str) -> (String, &'a str) {
    let parts: Vec<&str> = label.split('/').collect();
    match parts.len() {
        0 | 1 => (default.to_string(), label),
        2 => (default.to_string(), parts[0]),
        n => (parts[..n - 2].join("/"), parts[n - 2]),
    }
}

/// Every scaling figure the inputs fill: for each workload whose bench results span two or more
/// thread counts, throughput and p99 latency to durability against threads; for the serial and
/// Taurus recovery results, recovery throughput against threads.
pub(super) fn figures(inputs: &Inputs) -> Vec<Figure> {
    let mut figures = Vec::new();
    let throughput = inputs.results.iter().map(|r| {
        let (figure, series) = split_label(&r.summary.label, &r.summary.workload);
        Point { figure, series, threads: r.summary.threads, value: r.summary.throughput_per_s }
    });
    let latency = inputs.results.iter().map(|r| {
        let (figure, series) = split_label(&r.summary.label, &r.summary.workload);
        let value = r.summary.total.durable_latency_us.p99 as f64 / 1e3;
        Point { figure, series, threads: r.summary.threads, value }
    });
    for (name, points) in by_figure(throughput) {
        if thread_counts(&points) >= 2 {
            let title = format!("{name}: throughput against worker threads");
            figures.push(figure(&format!("scaling-throughput-{name}"), &title, "committed txn/s", &points));
        }
    }
    for (name, points) in by_figure(latency) {
        if thread_counts(&points) >= 2 {
            let title = format!("{name}: p99 latency to durability against worker threads");
            figures.push(figure(&format!("scaling-latency-{name}"), &title, "p99 latency to durability, ms", &points));
        }
    }
    let recovery = inputs.stream_recoveries.iter().map(|r: &StreamRecoveryRun| {
        let (figure, series) = split_label(&r.label, "recovery");
        Point { figure, series, threads: r.threads, value: r.txns_per_s() }
    });
    for (name, points) in by_figure(recovery) {
        let title = format!("{name}: recovery throughput against recovery threads");
        figures.push(figure(&format!("scaling-recovery-{name}"), &title, "recovered txn/s", &points));
    }
    figures
}

fn by_figure<'a>(points: impl Iterator<Item = Point<'a>>) -> BTreeMap<String, Vec<Point<'a>>> {
    let mut map: BTreeMap<String, Vec<Point<'a>>> = BTreeMap::new();
    for p in points {
        map.entry(p.figure.clone()).or_default().push(p);
    }
    map
}

/// The thread counts of `points`, ascending, each once.
fn distinct_threads(points: &[Point<'_>]) -> Vec<usize> {
    let mut threads: Vec<usize> = points.iter().map(|p| p.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    threads
}

fn thread_counts(points: &[Point<'_>]) -> usize {
    distinct_threads(points).len()
}

/// Grouped bars: one group per thread count (ascending), one bar per series (in order of first
/// appearance); a series without a run at some thread count gets 0 there. Series and groups past
/// the figure limits are left out (the figure says how many in its note).
fn figure(id: &str, title: &str, y_label: &str, points: &[Point<'_>]) -> Figure {
    let mut series: Vec<&str> = Vec::new();
    for p in points {
        if !series.contains(&p.series) {
            series.push(p.series);
        }
    }
    let mut threads = distinct_threads(points);
    let dropped = series.len().saturating_sub(MAX_SERIES) + threads.len().saturating_sub(MAX_GROUPS);
    series.truncate(MAX_SERIES);
    threads.truncate(MAX_GROUPS);
    let id: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let mut figure = Figure::new(&id, title, "threads", y_label, &series);
    for &t in &threads {
        let mut values = vec![0.0; series.len()];
        for p in points.iter().filter(|p| p.threads == t) {
            if let Some(i) = series.iter().position(|s| *s == p.series) {
                values[i] = if p.value.is_finite() { p.value.max(0.0) } else { 0.0 };
            }
        }
        figure.push(&t.to_string(), values);
    }
    if dropped > 0 {
        figure.note = format!("{dropped} series or thread counts past the figure's limits are not shown");
    }
    figure
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_split_into_figure_and_series() {
        assert_eq!(split_label("ycsb/taurus-data/2t", "w"), ("ycsb".to_string(), "taurus-data"));
        assert_eq!(split_label("a/b/taurus-data 4L/1t", "w"), ("a/b".to_string(), "taurus-data 4L"));
        assert_eq!(split_label("taurus-data/2t", "w"), ("w".to_string(), "taurus-data"));
        assert_eq!(split_label("plain", "w"), ("w".to_string(), "plain"));
    }

    fn point<'a>(series: &'a str, threads: usize, value: f64) -> Point<'a> {
        Point { figure: "f".to_string(), series, threads, value }
    }

    #[test]
    fn a_figure_has_one_group_per_thread_count_and_one_bar_per_series() {
        let points = [point("none", 2, 20.0), point("none", 1, 10.0), point("taurus", 1, 8.0), point("none", 1, 11.0)];
        let f = figure("scaling-x/y", "t", "y", &points);
        assert_eq!(f.id, "scaling-x_y");
        assert_eq!(f.series, ["none", "taurus"]);
        let groups: Vec<(&str, &[f64])> = f.groups.iter().map(|g| (g.label.as_str(), g.values.as_slice())).collect();
        // The later run at a point wins; a missing point is 0.
        assert_eq!(groups, [("1", &[11.0, 8.0][..]), ("2", &[20.0, 0.0][..])]);
        assert_eq!(f.validate(), Ok(()));
        assert_eq!(thread_counts(&points), 2);
    }
}
