//! The bench driver behind `lazarus bench`: runs a workload ([`crate::workload`]) for a duration
//! on N worker threads under a durability scheme, and reports throughput, abort rate, latency
//! percentiles to commit and to durability (HDR histograms), and a timeline of fixed windows.

pub mod driver;
pub mod result;
pub mod stats;
pub mod workload;

pub use driver::{RunError, RunOptions, RunResult, run};
pub use workload::{TxnCall, TxnGenerator, TxnRequest, Workload, WorkloadError};

use crate::db::{Database, DatabaseConfig, DbError};
use std::sync::Arc;

/// Why a whole bench (open, load, run, check) failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The workload failed to load or its check failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The run failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Opens (recovers) a database that already holds the workload — loaded by an earlier run into
/// the same log directories — runs the workload on it, and checks it.
pub fn open_run(
    config: DatabaseConfig,
    workload: &Arc<dyn Workload>,
    options: &RunOptions,
) -> Result<RunResult, BenchError> {
    let db = Database::open(config)?;
    workload.check(&db)?;
    let result = run(&db, workload, options)?;
    workload.check(&db)?;
    db.close()?;
    Ok(result)
}

/// Opens a database with `config`, loads the workload's sources and data, runs it, and checks its
/// consistency conditions afterwards.
pub fn open_load_run(
    config: DatabaseConfig,
    workload: &Arc<dyn Workload>,
    options: &RunOptions,
) -> Result<RunResult, BenchError> {
    let db = Database::open(config)?;
    for (name, source) in workload.sources() {
        db.load_module(&name, &source)?;
    }
    workload.load(&db, options.threads)?;
    let result = run(&db, workload, options)?;
    workload.check(&db)?;
    db.close()?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::transfer::Transfer;
    use std::time::Duration;

    #[test]
    fn a_short_contended_transfer_run_keeps_the_invariant_and_fills_the_timeline() {
        let workload: Arc<dyn Workload> = Arc::new(Transfer { accounts: 8, initial_balance: 1_000 });
        let config = DatabaseConfig { epoch_interval_ms: 5, ..DatabaseConfig::default() };
        let options =
            RunOptions { threads: 3, duration: Duration::from_millis(600), window_ms: 200, ..RunOptions::default() };
        let result = open_load_run(config, &workload, &options).unwrap();
        assert!(result.total.committed > 0);
        assert_eq!(result.timeline.len(), 3);
        let in_windows: u64 = result.timeline.iter().map(|w| w.counts.committed).sum();
        assert!(in_windows <= result.total.committed && in_windows > 0);
        assert_eq!(result.total.durable_latency.count(), result.total.committed, "none: all durable");
        assert_eq!(result.per_kind[0].1.committed, result.total.committed);
    }

    #[test]
    fn a_run_of_fixed_work_runs_exactly_its_requests_and_ends_without_waiting_for_the_deadline() {
        let workload: Arc<dyn Workload> = Arc::new(Transfer { accounts: 64, initial_balance: 1_000 });
        let duration = Duration::from_secs(600);
        let options = RunOptions { threads: 2, duration, requests_per_thread: Some(250), ..RunOptions::default() };
        let result = open_load_run(DatabaseConfig::default(), &workload, &options).unwrap();
        assert_eq!(result.total.committed + result.total.user_aborts, 2 * 250, "every request ran once");
        assert!(result.elapsed < duration, "the run ended when its work did, not at the deadline");
        let in_windows: u64 = result.timeline.iter().map(|w| w.counts.committed).sum();
        assert_eq!(in_windows, result.total.committed, "the timeline covers the run, not the whole duration");
    }

    #[test]
    fn bad_options_are_refused() {
        let workload: Arc<dyn Workload> = Arc::new(Transfer::default());
        let db = Database::open(DatabaseConfig::default()).unwrap();
        let options = RunOptions { threads: 0, ..RunOptions::default() };
        assert!(matches!(run(&db, &workload, &options), Err(RunError::Options(_))));
        let bad = Transfer { accounts: 1, initial_balance: 0 };
        assert!(matches!(bad.load(&db, 1), Err(WorkloadError::Options(_))));
    }
}
