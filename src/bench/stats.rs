//! Run statistics: counters, HDR latency histograms (to commit and to durability), and the
//! timeline of fixed windows.
//!
//! Latencies are recorded in microseconds in histograms with 3 significant digits and a range of
//! 1 µs to 1 hour; a value outside that is clamped, never dropped.

use hdrhistogram::Histogram;

/// Largest latency a histogram records, in microseconds (one hour).
pub const LATENCY_MAX_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds.
#[derive(Clone, Debug)]
pub struct Latency {
    histogram: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency::new()
    }
}

impl Latency {
    /// An empty histogram.
    pub fn new() -> Latency {
        // The bounds are constants that hdrhistogram accepts; failure would be a programming error.
        let histogram = Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("valid histogram bounds");
        Latency { histogram }
    }

    /// Records one latency.
    pub fn record_us(&mut self, latency_us: u64) {
        self.histogram.saturating_record(latency_us.clamp(1, LATENCY_MAX_US));
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so `add` cannot fail; saturate anyway rather than panic.
        let _ = self.histogram.add(&other.histogram);
    }

    /// The value at quantile `q` (0..=1), in microseconds; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.histogram.is_empty() { 0 } else { self.histogram.value_at_quantile(q) }
    }

    /// The mean in microseconds; 0 when empty.
    pub fn mean_us(&self) -> f64 {
        if self.histogram.is_empty() { 0.0 } else { self.histogram.mean() }
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }
}

/// Counters and histograms of one transaction kind, or of a whole run.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// Transactions committed.
    pub committed: u64,
    /// Attempts aborted by conflict (each was retried).
    pub conflicts: u64,
    /// Transactions aborted by their own logic (counted as finished, not retried).
    pub user_aborts: u64,
    /// Latency from first attempt to commit.
    pub commit_latency: Latency,
    /// Latency from first attempt to durability (equal to commit latency under `none`).
    pub durable_latency: Latency,
}

impl Counts {
    /// Adds another set of counts.
    pub fn merge(&mut self, other: &Counts) {
        self.committed += other.committed;
        self.conflicts += other.conflicts;
        self.user_aborts += other.user_aborts;
        self.commit_latency.merge(&other.commit_latency);
        self.durable_latency.merge(&other.durable_latency);
    }

    /// Fraction of attempts that aborted (by conflict or by the transaction itself).
    pub fn abort_rate(&self) -> f64 {
        let attempts = self.committed + self.conflicts + self.user_aborts;
        if attempts == 0 { 0.0 } else { (self.conflicts + self.user_aborts) as f64 / attempts as f64 }
    }
}

/// One window of the timeline.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// Counts of transactions that finished in this window.
    pub counts: Counts,
    /// Whether a checkpoint was running at any sample in this window.
    pub checkpoint: bool,
}

/// The header of a timeline CSV file. See `docs/FORMAT.md`.
pub const TIMELINE_HEADER: &str =
    "time_s,committed,aborts,commit_p50_us,commit_p99_us,durable_p50_us,durable_p99_us,checkpoint";

/// Renders timeline windows of `window_ms` each as CSV (with header).
pub fn timeline_csv(windows: &[Window], window_ms: u64) -> String {
    let mut out = String::from(TIMELINE_HEADER);
    out.push('\n');
    for (i, w) in windows.iter().enumerate() {
        let end_s = (i as f64 + 1.0) * window_ms as f64 / 1000.0;
        let c = &w.counts;
        out.push_str(&format!(
            "{end_s:.3},{},{},{},{},{},{},{}\n",
            c.committed,
            c.conflicts + c.user_aborts,
            c.commit_latency.quantile_us(0.5),
            c.commit_latency.quantile_us(0.99),
            c.durable_latency.quantile_us(0.5),
            c.durable_latency.quantile_us(0.99),
            u8::from(w.checkpoint)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_merge() {
        let mut a = Latency::new();
        for v in 1..=100 {
            a.record_us(v);
        }
        let mut b = Latency::new();
        b.record_us(10_000);
        a.merge(&b);
        assert_eq!(a.count(), 101);
        assert_eq!(a.quantile_us(0.5), 51);
        assert!(a.quantile_us(1.0) >= 10_000);
        a.record_us(u64::MAX);
        assert!(a.quantile_us(1.0) >= LATENCY_MAX_US);
    }

    #[test]
    fn csv_has_one_line_per_window() {
        let mut w = Window::default();
        w.counts.committed = 5;
        w.counts.commit_latency.record_us(7);
        w.checkpoint = true;
        let csv = timeline_csv(&[w, Window::default()], 500);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], TIMELINE_HEADER);
        assert_eq!(lines[1], "0.500,5,0,7,7,0,0,1");
        assert_eq!(lines[2], "1.000,0,0,0,0,0,0,0");
    }
}
