//! `lazarus report`: turns bench output files into one self-contained HTML page of charts.
//!
//! Inputs are the files `lazarus bench` writes (their formats are in `docs/FORMAT.md`, section
//! "Bench output files"):
//! - `.csv`: a timeline ([`crate::bench::stats::TIMELINE_HEADER`]), one line per window;
//! - `.json`: a run summary ([`crate::bench::result::RunSummary`]).
//!
//! The output directory gets an `index.html` with every chart inlined as SVG (and, on request, one
//! PNG per chart next to it). The charts, each drawn with plotters, are:
//! - [`PlotKind::Throughput`]: one chart, committed transactions per second over time, one line per
//!   timeline file (labelled by file stem), checkpoint windows shaded in the line's colour;
//! - [`PlotKind::Latency`]: one chart per timeline file, p50 and p99 latency to durability over time
//!   on a log scale, checkpoint windows shaded grey (SiloR's Figure 1 is these two together);
//! - [`PlotKind::Bars`]: two charts side by side, throughput per run label and p50/p99 latency to
//!   durability per run label, plus a table of the summaries.
//!
//!   With results of two or more thread counts for a workload, or serial/Taurus recovery results,
//!   it also draws scaling charts (`scaling`): throughput and p99 latency to durability against
//!   worker threads per scheme (Taurus Figures 5 and 6), recovery throughput against recovery
//!   threads per scheme (Taurus Figure 8).
//!
//! - [`PlotKind::Figures`]: one chart per figure file (`.json` with `figure_format_version`, see
//!   [`figure`]): grouped or stacked bars that another benchmark measured, e.g. the replay bench's
//!   Figures 4.1–4.3.
//!
//! So a report has `T + L·n + 2·B` charts, where `n` is the number of timeline files, `T` is 1 if
//! throughput is requested and `n > 0`, `L` is 1 if latency is requested, and `B` is 1 if bars are
//! requested and at least one result file was given, plus one per figure file when figures are
//! requested, plus the scaling charts with bars. Each chart is exactly one `<svg` element in
//! the page. A requested plot with no matching input is skipped with a note on the page.

mod bars;
pub mod figure;
mod html;
pub mod input;
mod plot;
mod scaling;
mod timeline;

pub use input::{Inputs, ResultFile, StreamRecoveryRun, Timeline, TimelineWindow, read_inputs};

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Why a report could not be made. Every input error names the file (and line, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No input files were given.
    #[error("no input files: give one or more timeline .csv or result .json files")]
    NoInputs,
    /// A file's extension is neither `.csv` nor `.json`.
    #[error("{}: unknown extension; expected .csv (timeline) or .json (result)", path.display())]
    UnknownExtension {
        /// The file.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("{}: cannot read", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file's content is malformed.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A result file has a format version this reader does not know.
    #[error("{}: result format_version {found}, supported: {supported}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found (`missing` if absent).
        found: String,
        /// The version supported.
        supported: u32,
    },
    /// A figure file has a `figure_format_version` this reader does not know.
    #[error("{}: figure_format_version {found}, supported: {supported}", path.display())]
    FigureVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: String,
        /// The version supported.
        supported: u32,
    },
    /// `--plots` named an unknown plot.
    #[error("unknown plot {0:?}; known: throughput, latency, bars, figures, all")]
    UnknownPlot(String),
    /// An output file or directory could not be written.
    #[error("{}: cannot write", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// plotters failed to draw a chart.
    #[error("cannot draw chart {chart}: {message}")]
    Draw {
        /// The chart's id.
        chart: String,
        /// plotters' error.
        message: String,
    },
    /// The embedded font could not be registered.
    #[error("the embedded font is not a valid TrueType font")]
    Font,
}

/// One kind of plot a report can contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotKind {
    /// Throughput over time, all timelines overlaid.
    Throughput,
    /// Latency to durability over time, one chart per timeline.
    Latency,
    /// Bar charts of the result files.
    Bars,
    /// One chart per figure file.
    Figures,
}

/// Which plots to draw (parsed from e.g. `throughput,latency,bars` or `all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlotSet {
    /// Draw [`PlotKind::Throughput`].
    pub throughput: bool,
    /// Draw [`PlotKind::Latency`].
    pub latency: bool,
    /// Draw [`PlotKind::Bars`].
    pub bars: bool,
    /// Draw [`PlotKind::Figures`].
    pub figures: bool,
}

impl PlotSet {
    /// Every plot.
    pub const ALL: PlotSet = PlotSet { throughput: true, latency: true, bars: true, figures: true };

    /// Whether `kind` is in the set.
    pub fn contains(&self, kind: PlotKind) -> bool {
        match kind {
            PlotKind::Throughput => self.throughput,
            PlotKind::Latency => self.latency,
            PlotKind::Bars => self.bars,
            PlotKind::Figures => self.figures,
        }
    }
}

impl Default for PlotSet {
    fn default() -> PlotSet {
        PlotSet::ALL
    }
}

impl FromStr for PlotSet {
    type Err = ReportError;

    fn from_str(s: &str) -> Result<PlotSet, ReportError> {
        const NONE: PlotSet = PlotSet { throughput: false, latency: false, bars: false, figures: false };
        let mut set = NONE;
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "throughput" => set.throughput = true,
                "latency" => set.latency = true,
                "bars" => set.bars = true,
                "figures" => set.figures = true,
                "all" => set = PlotSet::ALL,
                other => return Err(ReportError::UnknownPlot(other.to_string())),
            }
        }
        if set == NONE {
            return Err(ReportError::UnknownPlot(s.to_string()));
        }
        Ok(set)
    }
}

impl fmt::Display for PlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (self.throughput, "throughput"),
            (self.latency, "latency"),
            (self.bars, "bars"),
            (self.figures, "figures"),
        ];
        let chosen: Vec<&str> = names.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect();
        f.write_str(&chosen.join(","))
    }
}

/// Options of a report.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Output directory (created if missing).
    pub out: PathBuf,
    /// Page title.
    pub title: String,
    /// Which plots to draw.
    pub plots: PlotSet,
    /// Also write one PNG per chart into the output directory.
    pub png: bool,
}

impl Default for ReportOptions {
    fn default() -> ReportOptions {
        ReportOptions {
            out: PathBuf::from("report"),
            title: "Lazarus bench report".to_string(),
            plots: PlotSet::ALL,
            png: false,
        }
    }
}

/// What a report wrote.
#[derive(Clone, Debug)]
pub struct ReportOutput {
    /// The page.
    pub index: PathBuf,
    /// Number of charts (= `<svg` elements) on the page.
    pub charts: usize,
    /// PNG files written (empty unless [`ReportOptions::png`]).
    pub pngs: Vec<PathBuf>,
}

/// Reads `inputs` and writes the report into `options.out`.
pub fn render_report(inputs: &[PathBuf], options: &ReportOptions) -> Result<ReportOutput, ReportError> {
    let data = read_inputs(inputs)?;
    let charts = plot::charts(&data, options.plots);
    let mut figures = Vec::with_capacity(charts.len());
    for chart in &charts {
        figures.push(html::Figure { chart: chart.id(), svg: plot::render_svg(chart)? });
    }
    create_dir(&options.out)?;
    let mut pngs = Vec::new();
    if options.png {
        for chart in &charts {
            let path = options.out.join(format!("{}.png", chart.id()));
            plot::render_png(chart, &path)?;
            pngs.push(path);
        }
    }
    let page = html::page(&options.title, &data, options.plots, &figures);
    let index = options.out.join("index.html");
    std::fs::write(&index, page).map_err(|source| ReportError::Write { path: index.clone(), source })?;
    Ok(ReportOutput { index, charts: figures.len(), pngs })
}

fn create_dir(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write { path: dir.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_sets_parse_and_reject_unknown_names() {
        let set: PlotSet = "throughput, bars".parse().unwrap();
        assert_eq!(set, PlotSet { throughput: true, latency: false, bars: true, figures: false });
        assert_eq!(set.to_string(), "throughput,bars");
        assert_eq!("all".parse::<PlotSet>().unwrap(), PlotSet::ALL);
        assert!(matches!("latncy".parse::<PlotSet>(), Err(ReportError::UnknownPlot(n)) if n == "latncy"));
        assert!("".parse::<PlotSet>().is_err());
    }
}
