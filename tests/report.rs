//! `lazarus report` end to end: inputs written by hand and by a real bench run, the number of
//! charts per requested plot, checkpoint shading, PNG output, and errors that name the bad file.
//!
//! Chart count (see `lazarus::report`): throughput gives 1 chart if there is any timeline, latency
//! gives 1 per timeline, bars give 2 if there is any result, figures 1 per figure file; each chart
//! is one `<svg` in the page.

use lazarus::bench::result::RunSummary;
use lazarus::bench::stats::{TIMELINE_HEADER, timeline_csv};
use lazarus::bench::{RunOptions, open_load_run};
use lazarus::report::figure::Figure;
use lazarus::report::{PlotSet, ReportOptions, render_report};
use lazarus::{DatabaseConfig, workload};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A timeline of 10 windows of 0.5 s; the windows whose index is in `checkpoints` have
/// `checkpoint == 1`.
fn timeline(checkpoints: &[usize]) -> String {
    let mut text = format!("{TIMELINE_HEADER}\n");
    for i in 0..10 {
        let committed = if checkpoints.contains(&i) { 4_000 } else { 5_000 };
        let checkpoint = u8::from(checkpoints.contains(&i));
        text += &format!("{:.3},{committed},3,20,90,40000,90000,{checkpoint}\n", (i + 1) as f64 * 0.5);
    }
    text
}

/// A result file's JSON with the given label and latencies to durability.
fn result_json(label: &str, throughput: f64, p50: u64, p99: u64) -> String {
    let counts = format!(
        r#"{{"committed": 1000, "conflicts": 3, "user_aborts": 0, "abort_rate": 0.003,
        "commit_latency_us": {{"p50": 20, "p99": 90, "p999": 200, "mean": 25.0}},
        "durable_latency_us": {{"p50": {p50}, "p99": {p99}, "p999": {p99}, "mean": 1.0}}}}"#
    );
    format!(
        r#"{{"format_version": 1, "label": "{label}", "workload": "transfer", "scheme": "none", "threads": 2,
        "elapsed_s": 5.0, "throughput_per_s": {throughput}, "total": {counts},
        "per_kind": [["transfer", {counts}]], "never_durable": 0}}"#
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write input");
    path
}

/// The inputs of most tests: a timeline with checkpoints in windows 2-3 and 7, one without, and
/// two results.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    vec![
        write(dir, "silor.csv", &timeline(&[2, 3, 7])),
        write(dir, "plain.csv", &timeline(&[])),
        write(dir, "a.json", &result_json("run-a", 50_000.0, 40_000, 90_000)),
        write(dir, "b.json", &result_json("run-b", 80_000.0, 30, 95)),
    ]
}

fn render(inputs: &[PathBuf], out: &Path, plots: &str) -> String {
    let options = ReportOptions { out: out.to_path_buf(), plots: plots.parse().expect("plots"), ..Default::default() };
    let output = render_report(inputs, &options).expect("report");
    assert_eq!(output.index, out.join("index.html"));
    let html = std::fs::read_to_string(&output.index).expect("index.html exists");
    assert_eq!(html.matches("<svg").count(), output.charts, "one <svg per chart");
    html
}

/// The SVG of the figure with id `id`.
fn figure<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html.find(&format!("<figure id=\"{id}\">")).unwrap_or_else(|| panic!("no figure {id}"));
    let end = start + html[start..].find("</figure>").expect("figure closes");
    &html[start..end]
}

#[test]
fn each_requested_plot_gives_its_number_of_svgs() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let cases = [("throughput", 1), ("latency", 2), ("bars", 2), ("throughput,latency", 3), ("all", 5)];
    for (plots, svgs) in cases {
        let html = render(&inputs, &dir.path().join(plots), plots);
        assert_eq!(html.matches("<svg").count(), svgs, "--plots {plots}");
    }
    let html = render(&inputs, &dir.path().join("out"), "throughput,latency,bars");
    for id in ["throughput", "latency-1-silor", "latency-2-plain", "bars-throughput", "bars-latency"] {
        assert_eq!(figure(&html, id).matches("<svg").count(), 1, "{id}");
    }
    for label in ["silor", "plain", "run-a", "run-b"] {
        assert!(html.contains(label), "{label} appears");
    }
    assert!(html.contains("<h2>Run summaries</h2>") && html.contains("<h2>Timelines</h2>"));
}

fn figure_json(id: &str, stacked: bool) -> String {
    let mut f = Figure::new(id, "Insert replay <throughput>", "indexes", "records/s", &["direct", "compiled"]);
    f.push("0", vec![8.0e5, 7.5e5]);
    f.push("10", vec![4.0e5, 4.5e5]);
    f.stacked = stacked;
    f.note = "cargo bench --bench replay".into();
    serde_json::to_string(&f).unwrap()
}

#[test]
fn each_figure_file_gives_one_chart_with_its_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = inputs(dir.path());
    files.push(write(dir.path(), "f1.json", &figure_json("fig-4-1", false)));
    files.push(write(dir.path(), "f2.json", &figure_json("breakdown", true)));
    let html = render(&files, &dir.path().join("all"), "all");
    assert_eq!(html.matches("<svg").count(), 5 + 2);
    for id in ["figure-fig-4-1", "figure-breakdown"] {
        assert_eq!(figure(&html, id).matches("<svg").count(), 1, "{id}");
    }
    assert!(html.contains("Insert replay &lt;throughput&gt;"), "titles are escaped in the table");
    assert!(html.contains("<td>750000.0000</td>"), "values are tabled");
    let html = render(&files, &dir.path().join("figures"), "figures");
    assert_eq!(html.matches("<svg").count(), 2, "only the figures");
    let html = render(&files[..1], &dir.path().join("none"), "figures");
    assert!(html.contains("No figure files given"));
    let bad = figure_json("x", false).replace("750000.0", "-1.0");
    let bad = write(dir.path(), "bad.json", &bad);
    let error = render_report(std::slice::from_ref(&bad), &ReportOptions::default()).unwrap_err().to_string();
    assert!(error.starts_with(&bad.display().to_string()) && error.contains("not negative"), "{error}");
    let version = write(dir.path(), "v.json", r#"{"figure_format_version": 7}"#);
    let error = render_report(&[version], &ReportOptions::default()).unwrap_err().to_string();
    assert!(error.contains("figure_format_version 7, supported: 1"), "{error}");
}

#[test]
fn plots_without_matching_inputs_are_skipped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write(dir.path(), "only.csv", &timeline(&[]));
    let html = render(&[csv], &dir.path().join("out"), "all");
    assert_eq!(html.matches("<svg").count(), 2);
    assert!(html.contains("No result files given"));
}

#[test]
fn checkpoint_windows_are_shaded() {
    let dir = tempfile::tempdir().unwrap();
    let shaded = write(dir.path(), "run.csv", &timeline(&[2, 3, 7]));
    let html = render(&[shaded], &dir.path().join("shaded"), "throughput,latency");
    let unshaded = write(dir.path(), "run.csv", &timeline(&[]));
    let plain = render(&[unshaded], &dir.path().join("plain"), "throughput,latency");
    for id in ["throughput", "latency-1-run"] {
        let (with, without) = (figure(&html, id), figure(&plain, id));
        assert!(with.contains("checkpoint"), "{id}: legend names the shading");
        assert!(!without.contains("checkpoint"), "{id}: no shading without checkpoints");
        // Windows 2-3 merge into one shaded span, window 7 is another, plus the legend swatch.
        assert_eq!(with.matches("<rect").count(), without.matches("<rect").count() + 3, "{id}");
    }
}

#[test]
fn png_output_writes_one_png_per_chart() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let options = ReportOptions { out: out.clone(), png: true, ..Default::default() };
    let output = render_report(&inputs(dir.path()), &options).unwrap();
    assert_eq!(output.charts, 5);
    assert_eq!(output.pngs.len(), 5);
    for png in &output.pngs {
        let bytes = std::fs::read(png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", png.display());
    }
}

#[test]
fn bad_inputs_give_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.csv", &timeline(&[]));
    let cases = [
        (write(dir.path(), "notes.txt", "hello"), "unknown extension"),
        (write(dir.path(), "header.csv", "time,committed\n1.0,5\n"), ":1: not a timeline"),
        (write(dir.path(), "row.csv", &format!("{TIMELINE_HEADER}\n0.5,1,0,1,1,1,1\n")), ":2: expected 8 fields"),
        (write(dir.path(), "version.json", r#"{"format_version": 2}"#), "result format_version 2, supported: 1"),
        (write(dir.path(), "broken.json", "{\n\"format_version\": 1,\n"), ":3:"),
        (dir.path().join("missing.json"), "cannot read"),
    ];
    for (bad, expected) in cases {
        let out = dir.path().join("out");
        let options = ReportOptions { out: out.clone(), ..Default::default() };
        let error = render_report(&[good.clone(), bad.clone()], &options).unwrap_err().to_string();
        assert!(error.starts_with(&bad.display().to_string()), "{error:?} names {}", bad.display());
        assert!(error.contains(expected), "{error:?} contains {expected:?}");
        assert!(!out.exists(), "nothing is written on bad input");
    }
    assert!(render_report(&[], &ReportOptions::default()).is_err());
    assert!("throughput,bogus".parse::<PlotSet>().is_err());
}

#[test]
fn a_real_bench_run_reports() {
    let dir = tempfile::tempdir().unwrap();
    let workload = workload::build("transfer", &Default::default()).unwrap();
    let options = RunOptions {
        threads: 2,
        duration: Duration::from_millis(600),
        window_ms: 200,
        progress: false,
        ..RunOptions::default()
    };
    let result = open_load_run(DatabaseConfig::default(), &workload, &options).unwrap();
    let summary = RunSummary::new(&result, "transfer", "none", 2, Some("real".to_string()));
    let csv = write(dir.path(), "real.csv", &timeline_csv(&result.timeline, options.window_ms));
    let json = write(dir.path(), "real.json", &serde_json::to_string_pretty(&summary).unwrap());
    let html = render(&[csv, json], &dir.path().join("out"), "all");
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(figure(&html, "latency-1-real").contains("p99 to durability"));
    assert!(html.contains("<td>real</td>"));
}

/// A result of `label` (`workload/scheme/Nt`) run on `threads` threads.
fn threaded_result(label: &str, threads: usize, throughput: f64) -> String {
    result_json(label, throughput, 1_000, 9_000).replace("\"threads\": 2", &format!("\"threads\": {threads}"))
}

fn stream_recovery_json(label: &str, scheme: &str, threads: usize, recovered: u64) -> String {
    format!(
        r#"{{"kind": "stream-recovery", "format_version": 1, "label": "{label}", "scheme": "{scheme}",
        "threads": {threads}, "recovered": {recovered}, "graph_ms": 400.0, "replay_ms": 500.0}}"#
    )
}

/// Taurus Figures 5/6 (throughput and latency against worker threads, per scheme) and 8
/// (recovery throughput against recovery threads): drawn from result files with thread counts.
#[test]
fn results_over_thread_counts_give_scaling_charts() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (scheme, base) in [("none", 100_000.0), ("taurus-data", 80_000.0)] {
        for threads in [1, 2, 4] {
            let label = format!("ycsb/{scheme}/{threads}t");
            let name = format!("{scheme}-{threads}.json");
            files.push(write(dir.path(), &name, &threaded_result(&label, threads, base * threads as f64)));
        }
    }
    let html = render(&files, &dir.path().join("bench"), "bars");
    assert_eq!(html.matches("<svg").count(), 2 + 2, "per-run bars, then throughput and latency against threads");
    let chart = figure(&html, "bars-scaling-throughput-ycsb");
    assert!(chart.contains("taurus-data") && chart.contains("none"), "one series per scheme");
    assert_eq!(figure(&html, "bars-scaling-latency-ycsb").matches("<svg").count(), 1);

    // One thread count: nothing to scale over.
    let html = render(&files[..1], &dir.path().join("one"), "bars");
    assert!(!html.contains("bars-scaling-"), "no scaling chart from one thread count");

    let recoveries = [
        write(dir.path(), "r1.json", &stream_recovery_json("tpcc/taurus-cmd/1t", "taurus-cmd", 1, 10_000)),
        write(dir.path(), "r2.json", &stream_recovery_json("tpcc/taurus-cmd/2t", "taurus-cmd", 2, 10_000)),
        write(dir.path(), "r3.json", &stream_recovery_json("tpcc/serial-cmd/1t", "serial-cmd", 1, 10_000)),
    ];
    let html = render(&recoveries, &dir.path().join("recovery"), "bars");
    assert_eq!(html.matches("<svg").count(), 1, "one recovery figure for the tpcc runs");
    let chart = figure(&html, "bars-scaling-recovery-tpcc");
    assert!(chart.contains("taurus-cmd") && chart.contains("serial-cmd"));
    let bad = write(dir.path(), "bad.json", &stream_recovery_json("x", "y", 1, 1).replace("\"recovered\": 1,", ""));
    let error = render_report(&[bad], &ReportOptions::default()).unwrap_err().to_string();
    assert!(error.contains("not a stream-recovery result") && error.contains("recovered"), "{error}");
}
