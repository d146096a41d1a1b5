//! The summary of a run, as printed and as written to a result file (`--result FILE.json`) that
//! `lazarus report` reads. The JSON layout is documented in `docs/FORMAT.md`.

use super::driver::RunResult;
use super::stats::{Counts, Latency};
use serde::{Deserialize, Serialize};

/// Version of the result-file layout.
pub const RESULT_FORMAT_VERSION: u32 = 1;

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    fn of(latency: &Latency) -> Percentiles {
        Percentiles {
            p50: latency.quantile_us(0.5),
            p99: latency.quantile_us(0.99),
            p999: latency.quantile_us(0.999),
            mean: latency.mean_us(),
        }
    }
}

/// Counts and latencies of one transaction kind or of the whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CountsSummary {
    /// Committed transactions.
    pub committed: u64,
    /// Conflict aborts (retried).
    pub conflicts: u64,
    /// User aborts.
    pub user_aborts: u64,
    /// (conflicts + user aborts) / attempts.
    pub abort_rate: f64,
    /// Latency to commit.
    pub commit_latency_us: Percentiles,
    /// Latency to durability.
    pub durable_latency_us: Percentiles,
}

impl CountsSummary {
    fn of(c: &Counts) -> CountsSummary {
        CountsSummary {
            committed: c.committed,
            conflicts: c.conflicts,
            user_aborts: c.user_aborts,
            abort_rate: c.abort_rate(),
            commit_latency_us: Percentiles::of(&c.commit_latency),
            durable_latency_us: Percentiles::of(&c.durable_latency),
        }
    }
}

/// A run's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// [`RESULT_FORMAT_VERSION`].
    pub format_version: u32,
    /// A label for plots (defaults to `workload/scheme/threads`).
    pub label: String,
    /// Workload name.
    pub workload: String,
    /// Durability scheme name.
    pub scheme: String,
    /// Worker threads.
    pub threads: usize,
    /// Measured seconds.
    pub elapsed_s: f64,
    /// Committed transactions per second.
    pub throughput_per_s: f64,
    /// Totals.
    pub total: CountsSummary,
    /// Per transaction kind: (name, counts).
    pub per_kind: Vec<(String, CountsSummary)>,
    /// Transactions never reported durable before the drain timed out.
    pub never_durable: u64,
    /// Log bytes written per committed transaction during the run (0 without a log). Absent
    /// from files written before it existed.
    #[serde(default)]
    pub log_bytes_per_txn: f64,
}

impl RunSummary {
    /// Summarizes a run.
    pub fn new(result: &RunResult, workload: &str, scheme: &str, threads: usize, label: Option<String>) -> RunSummary {
        RunSummary {
            format_version: RESULT_FORMAT_VERSION,
            label: label.unwrap_or_else(|| format!("{workload}/{scheme}/{threads}t")),
            workload: workload.to_string(),
            scheme: scheme.to_string(),
            threads,
            elapsed_s: result.elapsed.as_secs_f64(),
            throughput_per_s: result.throughput_per_s(),
            total: CountsSummary::of(&result.total),
            per_kind: result.per_kind.iter().map(|(n, c)| (n.clone(), CountsSummary::of(c))).collect(),
            never_durable: result.never_durable,
            log_bytes_per_txn: result.log_bytes as f64 / result.total.committed.max(1) as f64,
        }
    }

    /// A human-readable multi-line rendering.
    pub fn render(&self) -> String {
        let t = &self.total;
        let mut out = format!(
            "workload {}  scheme {}  threads {}  {:.1} s\n\
             throughput      {:.0} txn/s ({} committed)\n\
             aborts          {:.4} of attempts ({} conflicts retried, {} user aborts)\n\
             to commit       p50 {} us  p99 {} us  p999 {} us\n\
             to durability   p50 {} us  p99 {} us  p999 {} us\n",
            self.workload,
            self.scheme,
            self.threads,
            self.elapsed_s,
            self.throughput_per_s,
            t.committed,
            t.abort_rate,
            t.conflicts,
            t.user_aborts,
            t.commit_latency_us.p50,
            t.commit_latency_us.p99,
            t.commit_latency_us.p999,
            t.durable_latency_us.p50,
            t.durable_latency_us.p99,
            t.durable_latency_us.p999,
        );
        if self.log_bytes_per_txn > 0.0 {
            out.push_str(&format!("log             {:.0} bytes per committed transaction\n", self.log_bytes_per_txn));
        }
        if self.per_kind.len() > 1 {
            for (name, c) in &self.per_kind {
                out.push_str(&format!(
                    "  {name:<14} {:>10} committed  {:>8} user aborts  abort rate {:.4}  p50 {} us\n",
                    c.committed, c.user_aborts, c.abort_rate, c.commit_latency_us.p50
                ));
            }
        }
        if self.never_durable > 0 {
            out.push_str(&format!("WARNING: {} transactions never became durable\n", self.never_durable));
        }
        out
    }
}
