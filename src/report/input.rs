//! Reading the report's inputs: timeline CSV files and result JSON files, chosen by extension.
//! Every error names the file, and for a CSV the 1-based line.

use super::ReportError;
use super::figure::{self, FigureFile};
use crate::bench::result::{RESULT_FORMAT_VERSION, RunSummary};
use crate::bench::stats::TIMELINE_HEADER;
use std::path::{Path, PathBuf};

/// One window of a timeline file.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineWindow {
    /// Start of the window in seconds since the run began (the previous window's end, or 0).
    pub start_s: f64,
    /// End of the window in seconds (the CSV's `time_s`).
    pub end_s: f64,
    /// Transactions committed in the window.
    pub committed: u64,
    /// Aborted attempts in the window.
    pub aborts: u64,
    /// Median latency to commit, µs (0 if nothing committed).
    pub commit_p50_us: u64,
    /// 99th percentile latency to commit, µs.
    pub commit_p99_us: u64,
    /// Median latency to durability, µs (0 if nothing became durable).
    pub durable_p50_us: u64,
    /// 99th percentile latency to durability, µs.
    pub durable_p99_us: u64,
    /// Whether a checkpoint ran during the window.
    pub checkpoint: bool,
}

impl TimelineWindow {
    /// Committed transactions per second in this window.
    pub fn throughput_per_s(&self) -> f64 {
        let seconds = self.end_s - self.start_s;
        if seconds > 0.0 { self.committed as f64 / seconds } else { 0.0 }
    }

    /// Middle of the window in seconds.
    pub fn mid_s(&self) -> f64 {
        (self.start_s + self.end_s) / 2.0
    }
}

/// A timeline file.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its label in charts: the file stem.
    pub name: String,
    /// Its windows, in time order (at least one).
    pub windows: Vec<TimelineWindow>,
}

impl Timeline {
    /// Whether any window had a checkpoint running.
    pub fn has_checkpoint(&self) -> bool {
        self.windows.iter().any(|w| w.checkpoint)
    }

    /// End of the last window in seconds.
    pub fn end_s(&self) -> f64 {
        self.windows.last().map_or(0.0, |w| w.end_s)
    }
}

/// A result file.
#[derive(Clone, Debug)]
pub struct ResultFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its content.
    pub summary: RunSummary,
}

/// What `lazarus recover --result-json` writes for a command-log replay (`"kind":
/// "command-recovery"`, `format_version` 1): the replay's time by phase (PACMAN Figure 20).
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct RecoveryRun {
    /// The run's label (default: engine and threads).
    pub label: String,
    /// `clr`, `clr-p`, `clr-p-static`, `clr-p-intra` or `llr-p`.
    pub engine: String,
    /// Replay threads.
    pub threads: usize,
    /// Reading and decoding the log, ms.
    pub loading_ms: f64,
    /// Static and dynamic analysis, ms.
    pub analysis_ms: f64,
    /// Building the schedules, ms.
    pub scheduling_ms: f64,
    /// Running them, ms.
    pub execution_ms: f64,
}

impl RecoveryRun {
    /// The four phases, in order, with their names.
    pub fn phases(&self) -> [(&'static str, f64); 4] {
        [
            ("loading", self.loading_ms),
            ("analysis", self.analysis_ms),
            ("scheduling", self.scheduling_ms),
            ("execution", self.execution_ms),
        ]
    }

    /// The name of phase `i` of [`RecoveryRun::phases`].
    pub fn phase_name(i: usize) -> &'static str {
        ["loading", "analysis", "scheduling", "execution"].get(i).copied().unwrap_or("")
    }

    /// The replay's total, ms.
    pub fn total_ms(&self) -> f64 {
        self.phases().iter().map(|p| p.1).sum()
    }
}

/// The `kind` of a command-recovery result file.
pub const RECOVERY_KIND: &str = "command-recovery";

/// What `lazarus recover --result-json` writes for serial and Taurus logs (`"kind":
/// "stream-recovery"`, `format_version` 1): transactions recovered and the time of each phase, for
/// Taurus's Figure 8 (recovery throughput per scheme and thread count).
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct StreamRecoveryRun {
    /// The run's label (default: scheme and threads).
    pub label: String,
    /// `serial-data`, `serial-cmd`, `taurus-data` or `taurus-cmd`.
    pub scheme: String,
    /// Recovery threads.
    pub threads: usize,
    /// The first generation counted (`lazarus recover --from-generation`; 0 = all).
    #[serde(default)]
    pub from_generation: u64,
    /// Transactions recovered (replayed) in the generations counted.
    pub recovered: u64,
    /// Deciding recoverability (building the recovery graph) of those generations, ms.
    pub graph_ms: f64,
    /// Replaying them, ms.
    pub replay_ms: f64,
}

impl StreamRecoveryRun {
    /// Transactions recovered per second of graph building and replay (what `lazarus recover`
    /// prints as the recovery rate; reading the logs runs in parallel I/O threads and is reported
    /// apart).
    pub fn txns_per_s(&self) -> f64 {
        self.recovered as f64 / ((self.graph_ms + self.replay_ms) / 1e3).max(1e-9)
    }
}

/// The `kind` of a stream-recovery result file.
pub const STREAM_RECOVERY_KIND: &str = "stream-recovery";

/// All inputs of a report, each kind in the order given.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Timeline files.
    pub timelines: Vec<Timeline>,
    /// Result files.
    pub results: Vec<ResultFile>,
    /// Figure files (JSON with `figure_format_version`).
    pub figures: Vec<FigureFile>,
    /// Command-recovery result files.
    pub recoveries: Vec<RecoveryRun>,
    /// Stream-recovery (serial and Taurus) result files.
    pub stream_recoveries: Vec<StreamRecoveryRun>,
}

/// Reads every file: `.csv` as a timeline, `.json` as a figure file if it has
/// `figure_format_version`, else as a result.
pub fn read_inputs(paths: &[PathBuf]) -> Result<Inputs, ReportError> {
    if paths.is_empty() {
        return Err(ReportError::NoInputs);
    }
    let mut inputs = Inputs::default();
    for path in paths {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("csv") => inputs.timelines.push(parse_timeline(path, &read(path)?)?),
            Some("json") => {
                let text = read(path)?;
                let value = parse_json(path, &text)?;
                if figure::is_figure(&value) {
                    inputs.figures.push(FigureFile { path: path.clone(), figure: figure::parse_figure(path, value)? });
                } else if value.get("kind").and_then(serde_json::Value::as_str) == Some(RECOVERY_KIND) {
                    inputs.recoveries.push(parse_kind(path, value, RECOVERY_KIND)?);
                } else if value.get("kind").and_then(serde_json::Value::as_str) == Some(STREAM_RECOVERY_KIND) {
                    inputs.stream_recoveries.push(parse_kind(path, value, STREAM_RECOVERY_KIND)?);
                } else {
                    inputs.results.push(ResultFile { path: path.clone(), summary: result_from_json(path, value)? });
                }
            }
            _ => return Err(ReportError::UnknownExtension { path: path.clone() }),
        }
    }
    Ok(inputs)
}

fn read(path: &Path) -> Result<String, ReportError> {
    std::fs::read_to_string(path).map_err(|source| ReportError::Read { path: path.to_path_buf(), source })
}

/// Parses a timeline CSV whose first line must be exactly [`TIMELINE_HEADER`].
pub fn parse_timeline(path: &Path, text: &str) -> Result<Timeline, ReportError> {
    let error = |line: usize, message: String| ReportError::Parse { path: path.to_path_buf(), line, message };
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("").trim_end();
    if header != TIMELINE_HEADER {
        return Err(error(1, format!("not a timeline: header is {header:?}, expected {TIMELINE_HEADER:?}")));
    }
    let mut windows: Vec<TimelineWindow> = Vec::new();
    for (index, line) in lines.enumerate() {
        let number = index + 2;
        if line.trim().is_empty() {
            continue;
        }
        let start_s = windows.last().map_or(0.0, |w| w.end_s);
        windows.push(parse_window(line, start_s).map_err(|m| error(number, m))?);
    }
    if windows.is_empty() {
        return Err(error(1, "timeline has no windows".to_string()));
    }
    Ok(Timeline { path: path.to_path_buf(), name: file_stem(path), windows })
}

fn parse_window(line: &str, start_s: f64) -> Result<TimelineWindow, String> {
    let fields: Vec<&str> = line.trim_end().split(',').collect();
    if fields.len() != 8 {
        return Err(format!("expected 8 fields, found {}", fields.len()));
    }
    let end_s: f64 = fields[0].parse().map_err(|_| format!("time_s {:?} is not a number", fields[0]))?;
    if !(end_s.is_finite() && end_s > start_s) {
        return Err(format!("time_s {end_s} must be greater than the previous window's {start_s}"));
    }
    let int = |i: usize, name: &str| -> Result<u64, String> {
        fields[i].parse().map_err(|_| format!("{name} {:?} is not a non-negative integer", fields[i]))
    };
    let checkpoint = match fields[7] {
        "0" => false,
        "1" => true,
        other => return Err(format!("checkpoint {other:?} must be 0 or 1")),
    };
    Ok(TimelineWindow {
        start_s,
        end_s,
        committed: int(1, "committed")?,
        aborts: int(2, "aborts")?,
        commit_p50_us: int(3, "commit_p50_us")?,
        commit_p99_us: int(4, "commit_p99_us")?,
        durable_p50_us: int(5, "durable_p50_us")?,
        durable_p99_us: int(6, "durable_p99_us")?,
        checkpoint,
    })
}

/// Parses a result JSON, refusing any `format_version` but [`RESULT_FORMAT_VERSION`].
pub fn parse_result(path: &Path, text: &str) -> Result<RunSummary, ReportError> {
    result_from_json(path, parse_json(path, text)?)
}

fn parse_json(path: &Path, text: &str) -> Result<serde_json::Value, ReportError> {
    serde_json::from_str(text).map_err(|e| ReportError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        message: e.to_string(),
    })
}

fn result_from_json(path: &Path, value: serde_json::Value) -> Result<RunSummary, ReportError> {
    let version = value.get("format_version");
    if version.and_then(serde_json::Value::as_u64) != Some(u64::from(RESULT_FORMAT_VERSION)) {
        let found = version.map_or_else(|| "missing".to_string(), |v| v.to_string());
        return Err(ReportError::Version { path: path.to_path_buf(), found, supported: RESULT_FORMAT_VERSION });
    }
    serde_json::from_value(value).map_err(|e| ReportError::Parse {
        path: path.to_path_buf(),
        line: 1,
        message: format!("not a run summary: {e}"),
    })
}

/// Parses a command-recovery result (see [`RecoveryRun`]).
pub fn parse_recovery(path: &Path, text: &str) -> Result<RecoveryRun, ReportError> {
    let error = |message: String| ReportError::Parse { path: path.to_path_buf(), line: 1, message };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| error(e.to_string()))?;
    parse_kind(path, value, RECOVERY_KIND)
}

/// Parses a result file of `kind` and `format_version` 1 (a recovery result of some scheme).
fn parse_kind<T: serde::de::DeserializeOwned>(
    path: &Path,
    value: serde_json::Value,
    kind: &str,
) -> Result<T, ReportError> {
    let error = |message: String| ReportError::Parse { path: path.to_path_buf(), line: 1, message };
    if value.get("kind").and_then(serde_json::Value::as_str) != Some(kind)
        || value.get("format_version").and_then(serde_json::Value::as_u64) != Some(1)
    {
        return Err(error(format!("not a {kind} result of format_version 1")));
    }
    serde_json::from_value(value).map_err(|e| error(format!("not a {kind} result: {e}")))
}

fn file_stem(path: &Path) -> String {
    path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recovery_result_parses_and_other_json_is_refused() {
        let text = r#"{"kind": "command-recovery", "format_version": 1, "label": "clr-p 2t", "engine": "clr-p",
            "threads": 2, "loading_ms": 1.5, "analysis_ms": 2.0, "scheduling_ms": 0.5, "execution_ms": 10.0}"#;
        let run = parse_recovery(Path::new("r.json"), text).unwrap();
        assert_eq!((run.threads, run.total_ms()), (2, 14.0));
        assert_eq!(RecoveryRun::phase_name(3), "execution");
        let wrong = text.replace("\"format_version\": 1", "\"format_version\": 2");
        assert!(parse_recovery(Path::new("r.json"), &wrong).is_err());
        assert!(parse_recovery(Path::new("r.json"), "{\"kind\": \"command-recovery\"}").is_err());
    }

    #[test]
    fn a_stream_recovery_result_parses_and_its_rate_counts_every_phase() {
        let text = r#"{"kind": "stream-recovery", "format_version": 1, "label": "taurus-data 2t",
            "scheme": "taurus-data", "threads": 2, "recovered": 3000, "graph_ms": 500.0,
            "replay_ms": 500.0}"#;
        let path = Path::new("s.json");
        let run: StreamRecoveryRun =
            parse_kind(path, serde_json::from_str(text).unwrap(), STREAM_RECOVERY_KIND).unwrap();
        assert_eq!((run.scheme.as_str(), run.threads), ("taurus-data", 2));
        assert_eq!(run.txns_per_s(), 3000.0);
        let wrong: serde_json::Value = serde_json::from_str(&text.replace("stream-recovery", "x")).unwrap();
        assert!(parse_kind::<StreamRecoveryRun>(path, wrong, STREAM_RECOVERY_KIND).is_err());
        let missing = serde_json::json!({"kind": "stream-recovery", "format_version": 1, "label": "l"});
        let e = parse_kind::<StreamRecoveryRun>(path, missing, STREAM_RECOVERY_KIND).unwrap_err().to_string();
        assert!(e.starts_with("s.json:1: not a stream-recovery result"), "{e}");
    }

    fn csv(rows: &[&str]) -> String {
        let mut text = format!("{TIMELINE_HEADER}\n");
        for row in rows {
            text.push_str(row);
            text.push('\n');
        }
        text
    }

    #[test]
    fn a_timeline_parses_with_window_bounds_and_throughput() {
        let text = csv(&["0.500,100,1,10,20,30,40,0", "1.000,50,0,10,20,30,40,1"]);
        let t = parse_timeline(Path::new("dir/run-a.csv"), &text).unwrap();
        assert_eq!(t.name, "run-a");
        assert_eq!(t.windows.len(), 2);
        assert_eq!(t.windows[1].start_s, 0.5);
        assert_eq!(t.windows[0].throughput_per_s(), 200.0);
        assert_eq!(t.windows[1].throughput_per_s(), 100.0);
        assert!(t.has_checkpoint());
        assert_eq!(t.end_s(), 1.0);
    }

    #[test]
    fn timeline_errors_name_file_and_line() {
        let bad = csv(&["0.500,100,1,10,20,30,40,0", "1.000,x,0,10,20,30,40,0"]);
        let e = parse_timeline(Path::new("t.csv"), &bad).unwrap_err().to_string();
        assert!(e.starts_with("t.csv:3: committed \"x\""), "{e}");
        let e = parse_timeline(Path::new("t.csv"), "a,b\n").unwrap_err().to_string();
        assert!(e.starts_with("t.csv:1: not a timeline"), "{e}");
        let e = parse_timeline(Path::new("t.csv"), &csv(&["1.0,1,1,1,1,1,1,2"])).unwrap_err().to_string();
        assert!(e.contains("checkpoint \"2\""), "{e}");
        let e = parse_timeline(Path::new("t.csv"), &csv(&["1.0,1,1,1,1,1,1,0", "1.0,1,1,1,1,1,1,0"]));
        assert!(e.unwrap_err().to_string().starts_with("t.csv:3: time_s"));
        let e = parse_timeline(Path::new("t.csv"), &csv(&[])).unwrap_err().to_string();
        assert!(e.contains("no windows"), "{e}");
    }

    #[test]
    fn result_version_is_checked() {
        let e = parse_result(Path::new("r.json"), r#"{"format_version": 99}"#).unwrap_err().to_string();
        assert_eq!(e, "r.json: result format_version 99, supported: 1");
        let e = parse_result(Path::new("r.json"), "{}").unwrap_err().to_string();
        assert!(e.contains("format_version missing"), "{e}");
        let e = parse_result(Path::new("r.json"), "{\n  nope").unwrap_err().to_string();
        assert!(e.starts_with("r.json:2:"), "{e}");
        let e = parse_result(Path::new("r.json"), r#"{"format_version": 1}"#).unwrap_err().to_string();
        assert!(e.contains("not a run summary"), "{e}");
    }
}
