//! Figure files: a bar chart of measured values that a benchmark other than `lazarus bench` wrote
//! (the replay bench's Figures 4.1–4.3, a recovery-time comparison, a time breakdown), so that
//! `lazarus report` draws every figure of the papers from files, not by hand.
//!
//! A figure file is a JSON object (format in `docs/FORMAT.md`, "Figure JSON"): an x axis of labelled
//! groups, one bar per series in each group, side by side or stacked. It is told apart from a run
//! summary by its key `figure_format_version`.

use super::ReportError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The version a figure file carries in `figure_format_version`.
pub const FIGURE_FORMAT_VERSION: u32 = 1;

/// The key that marks a JSON file as a figure file.
pub const FIGURE_VERSION_KEY: &str = "figure_format_version";

/// Most groups (bars along the x axis) a figure may have: beyond this labels overlap.
pub const MAX_GROUPS: usize = 64;

/// Most series (bars per group) a figure may have.
pub const MAX_SERIES: usize = 16;

/// Longest identifier, title or label, in bytes.
pub const MAX_TEXT_BYTES: usize = 200;

/// One bar chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Always [`FIGURE_FORMAT_VERSION`].
    pub figure_format_version: u32,
    /// Identifier, unique within a report: letters, digits, `-` and `_` (the chart's file stem).
    pub id: String,
    /// Caption above the chart.
    pub title: String,
    /// What the groups along the x axis are.
    pub x_label: String,
    /// What the bars measure, with units.
    pub y_label: String,
    /// Series names, in legend order; each group has one value per series.
    pub series: Vec<String>,
    /// The groups, in x order.
    pub groups: Vec<Group>,
    /// Stack the series of a group into one bar (a breakdown) instead of placing them side by side.
    #[serde(default)]
    pub stacked: bool,
    /// How the numbers were produced (the command), shown under the chart.
    #[serde(default)]
    pub note: String,
}

/// One group of bars.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// Label under the group.
    pub label: String,
    /// One value per series of the figure, finite and not negative.
    pub values: Vec<f64>,
}

/// A figure file as read.
#[derive(Clone, Debug)]
pub struct FigureFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its content, validated.
    pub figure: Figure,
}

impl Figure {
    /// A figure with no groups yet.
    pub fn new(id: &str, title: &str, x_label: &str, y_label: &str, series: &[&str]) -> Figure {
        Figure {
            figure_format_version: FIGURE_FORMAT_VERSION,
            id: id.to_string(),
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            series: series.iter().map(|s| (*s).to_string()).collect(),
            groups: Vec::new(),
            stacked: false,
            note: String::new(),
        }
    }

    /// Appends a group (checked by [`Figure::validate`], not here).
    pub fn push(&mut self, label: &str, values: Vec<f64>) {
        self.groups.push(Group { label: label.to_string(), values });
    }

    /// Checks the limits and the shape; the error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.figure_format_version != FIGURE_FORMAT_VERSION {
            return Err(format!(
                "{FIGURE_VERSION_KEY} {}, supported: {FIGURE_FORMAT_VERSION}",
                self.figure_format_version
            ));
        }
        let id_ok = !self.id.is_empty() && self.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !id_ok {
            return Err(format!("id {:?} must be non-empty letters, digits, '-' or '_'", self.id));
        }
        let texts = [&self.id, &self.title, &self.x_label, &self.y_label].into_iter();
        let labels = self.series.iter().chain(self.groups.iter().map(|g| &g.label));
        if let Some(t) = texts.chain(labels).find(|t| t.len() > MAX_TEXT_BYTES) {
            return Err(format!("text {:?}... is longer than {MAX_TEXT_BYTES} bytes", &t[..t.floor_char_boundary(20)]));
        }
        if self.series.is_empty() || self.series.len() > MAX_SERIES {
            return Err(format!("{} series; a figure has 1 to {MAX_SERIES}", self.series.len()));
        }
        if self.groups.is_empty() || self.groups.len() > MAX_GROUPS {
            return Err(format!("{} groups; a figure has 1 to {MAX_GROUPS}", self.groups.len()));
        }
        for g in &self.groups {
            if g.values.len() != self.series.len() {
                return Err(format!(
                    "group {:?} has {} values for {} series",
                    g.label,
                    g.values.len(),
                    self.series.len()
                ));
            }
            if let Some(v) = g.values.iter().find(|v| !v.is_finite() || **v < 0.0) {
                return Err(format!("group {:?} has value {v}; values are finite and not negative", g.label));
            }
        }
        Ok(())
    }

    /// The largest bar: a group's sum when stacked, else its largest value.
    pub fn max_bar(&self) -> f64 {
        let bar =
            |g: &Group| if self.stacked { g.values.iter().sum() } else { g.values.iter().copied().fold(0.0, f64::max) };
        self.groups.iter().map(bar).fold(0.0, f64::max)
    }

    /// Validates and writes the figure as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        let invalid = |message: String| ReportError::Parse { path: path.to_path_buf(), line: 0, message };
        self.validate().map_err(invalid)?;
        let text = serde_json::to_string_pretty(self).map_err(|e| invalid(e.to_string()))?;
        std::fs::write(path, text + "\n").map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
    }
}

/// Whether a parsed JSON document is a figure file (it has [`FIGURE_VERSION_KEY`]).
pub fn is_figure(value: &serde_json::Value) -> bool {
    value.get(FIGURE_VERSION_KEY).is_some()
}

/// Parses and validates a figure file's JSON.
pub fn parse_figure(path: &Path, value: serde_json::Value) -> Result<Figure, ReportError> {
    let version = value.get(FIGURE_VERSION_KEY);
    if version.and_then(serde_json::Value::as_u64) != Some(u64::from(FIGURE_FORMAT_VERSION)) {
        let found = version.map_or_else(|| "missing".to_string(), ToString::to_string);
        return Err(ReportError::FigureVersion { path: path.to_path_buf(), found, supported: FIGURE_FORMAT_VERSION });
    }
    let parse_error = |message: String| ReportError::Parse { path: path.to_path_buf(), line: 1, message };
    let figure: Figure = serde_json::from_value(value).map_err(|e| parse_error(format!("not a figure file: {e}")))?;
    figure.validate().map_err(parse_error)?;
    Ok(figure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure() -> Figure {
        let mut f = Figure::new("fig-4-1", "Insert replay", "secondary indexes", "records/s", &["direct", "compiled"]);
        f.push("0", vec![2.0, 3.0]);
        f.push("10", vec![1.0, 1.5]);
        f
    }

    #[test]
    fn a_figure_round_trips_through_json_and_validates() {
        let f = figure();
        let value = serde_json::to_value(&f).unwrap();
        assert!(is_figure(&value));
        assert_eq!(parse_figure(Path::new("f.json"), value).unwrap(), f);
        assert_eq!(f.max_bar(), 3.0);
        let stacked = Figure { stacked: true, ..figure() };
        assert_eq!(stacked.max_bar(), 5.0);
    }

    #[test]
    fn a_malformed_figure_says_what_is_wrong() {
        let mut f = figure();
        f.groups[1].values.pop();
        assert!(f.validate().unwrap_err().contains("group \"10\" has 1 values for 2 series"));
        let mut f = figure();
        f.groups[0].values[0] = f64::NAN;
        assert!(f.validate().unwrap_err().contains("finite"));
        let f = Figure { id: "a b".into(), ..figure() };
        assert!(f.validate().unwrap_err().contains("id"));
        let f = Figure { groups: Vec::new(), ..figure() };
        assert!(f.validate().unwrap_err().contains("0 groups"));
        let mut value = serde_json::to_value(figure()).unwrap();
        value[FIGURE_VERSION_KEY] = serde_json::json!(9);
        assert!(
            matches!(parse_figure(Path::new("f.json"), value), Err(ReportError::FigureVersion { found, .. }) if found == "9")
        );
    }
}
