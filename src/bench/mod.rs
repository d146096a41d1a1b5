//! The bench driver: runs a workload for a duration on N worker threads and reports throughput and
//! abort rate. Aborted transactions retry with exponential backoff, as in Silo's evaluation.
//!
//! The built-in workload is `transfer` (`workloads/transfer.proc`): money moves between random
//! accounts, so the total balance is an invariant the driver checks after every run. The full
//! workload set (TPC-C, Smallbank, YCSB, KV), latency histograms and timelines build on this.

use crate::db::{Database, DatabaseConfig, DbError};
use crate::storage::{ParamValue, Value};
use crate::txn::TxnError;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The source of the built-in transfer workload.
pub const TRANSFER_SOURCE: &str = include_str!("../../workloads/transfer.proc");

/// The most worker threads a run may use.
pub const THREADS_MAX: usize = 256;

/// Options of a transfer run.
#[derive(Clone, Debug)]
pub struct TransferOptions {
    /// Worker threads.
    pub threads: usize,
    /// How long to run.
    pub duration: Duration,
    /// Number of accounts (fewer means more conflicts).
    pub accounts: u32,
    /// Initial balance of each account.
    pub initial_balance: i64,
    /// Epoch interval in milliseconds.
    pub epoch_interval_ms: u64,
    /// Seed of the parameter generators.
    pub seed: u64,
}

impl Default for TransferOptions {
    fn default() -> TransferOptions {
        TransferOptions {
            threads: 2,
            duration: Duration::from_secs(5),
            accounts: 10_000,
            initial_balance: 1_000,
            epoch_interval_ms: 40,
            seed: 1,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Committed transactions.
    pub committed: u64,
    /// Attempts that aborted by conflict (each was retried).
    pub conflicts: u64,
    /// Transactions that aborted by their own logic (e.g. insufficient funds).
    pub user_aborts: u64,
    /// Wall time of the measured phase.
    pub elapsed: Duration,
    /// Sum of balances after the run (must equal accounts × initial balance).
    pub total_balance: i64,
}

impl RunReport {
    /// Committed transactions per second.
    pub fn throughput_per_s(&self) -> f64 {
        self.committed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Fraction of attempts that aborted by conflict.
    pub fn conflict_rate(&self) -> f64 {
        let attempts = self.committed + self.conflicts + self.user_aborts;
        if attempts == 0 { 0.0 } else { self.conflicts as f64 / attempts as f64 }
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad options.
    #[error("invalid option: {0}")]
    Options(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A transaction failed in a way retrying cannot fix.
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// The invariant did not hold: a serializability bug.
    #[error("total balance is {got}, expected {expected}: the run lost or created money")]
    Invariant {
        /// The expected total.
        expected: i64,
        /// The measured total.
        got: i64,
    },
}

/// Runs the transfer workload with the `none` durability scheme.
pub fn run_transfer(options: &TransferOptions) -> Result<RunReport, BenchError> {
    if options.threads == 0 || options.threads > THREADS_MAX {
        return Err(BenchError::Options(format!("threads must be 1..={THREADS_MAX}, got {}", options.threads)));
    }
    if options.accounts < 2 {
        return Err(BenchError::Options("at least 2 accounts are needed".into()));
    }
    let db =
        Database::open(DatabaseConfig { epoch_interval_ms: options.epoch_interval_ms, ..DatabaseConfig::default() })?;
    db.load_module("transfer.proc", TRANSFER_SOURCE)?;
    load_accounts(&db, options)?;
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let start = Instant::now();
    let handles: Vec<_> = (0..options.threads)
        .map(|i| {
            let (db, stop, counters, options) = (db.clone(), Arc::clone(&stop), Arc::clone(&counters), options.clone());
            std::thread::spawn(move || transfer_worker(&db, &options, i as u64, &stop, &counters))
        })
        .collect();
    std::thread::sleep(options.duration);
    stop.store(true, Ordering::Relaxed);
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => first_error = first_error.or(Some(e)),
            Err(_) => first_error = first_error.or(Some(TxnError::UserAbort("a worker thread panicked".into()))),
        }
    }
    let elapsed = start.elapsed();
    if let Some(e) = first_error {
        return Err(e.into());
    }
    let total_balance = total_balance(&db, options.accounts)?;
    let expected = i64::from(options.accounts) * options.initial_balance;
    db.close()?;
    if total_balance != expected {
        return Err(BenchError::Invariant { expected, got: total_balance });
    }
    Ok(RunReport {
        committed: counters[0].load(Ordering::Relaxed),
        conflicts: counters[1].load(Ordering::Relaxed),
        user_aborts: counters[2].load(Ordering::Relaxed),
        elapsed,
        total_balance,
    })
}

fn load_accounts(db: &Database, options: &TransferOptions) -> Result<(), BenchError> {
    let mut w = db.worker();
    for id in 0..options.accounts {
        let args = [int(i64::from(id)), int(i64::from(id % 16)), int(options.initial_balance)];
        w.call_retrying("open_account", &args, 100)?;
    }
    Ok(())
}

fn transfer_worker(
    db: &Database,
    options: &TransferOptions,
    index: u64,
    stop: &AtomicBool,
    counters: &[AtomicU64; 3],
) -> Result<(), TxnError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed.wrapping_mul(1000).wrapping_add(index));
    let mut w = db.worker();
    let registry = db.procedures();
    let transfer = registry.id_of("transfer").ok_or_else(|| TxnError::NoSuchProcedure("transfer".into()))?;
    let (mut committed, mut conflicts, mut user_aborts) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let src = rng.random_range(0..options.accounts);
        let dst = (src + rng.random_range(1..options.accounts)) % options.accounts;
        let args = [int(i64::from(src)), int(i64::from(dst)), int(rng.random_range(1..100))];
        let mut attempt_conflicts = 0u64;
        let outcome = crate::db::retrying(u32::MAX, || {
            let r = w.call_id(&registry, transfer, &args);
            if matches!(r, Err(ref e) if e.is_retryable()) {
                attempt_conflicts += 1;
            }
            r
        });
        conflicts += attempt_conflicts;
        match outcome {
            Ok(_) => committed += 1,
            Err(TxnError::UserAbort(_)) => user_aborts += 1,
            Err(e) => return Err(e),
        }
    }
    counters[0].fetch_add(committed, Ordering::Relaxed);
    counters[1].fetch_add(conflicts, Ordering::Relaxed);
    counters[2].fetch_add(user_aborts, Ordering::Relaxed);
    Ok(())
}

fn total_balance(db: &Database, accounts: u32) -> Result<i64, TxnError> {
    let mut w = db.worker();
    let mut total = 0i64;
    for id in 0..accounts {
        let out = w.call_retrying("balance", &[int(i64::from(id))], 100)?;
        total += out.values.first().and_then(Value::as_int).unwrap_or(0);
    }
    Ok(total)
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_contended_run_keeps_the_invariant() {
        let options = TransferOptions {
            threads: 3,
            duration: Duration::from_millis(300),
            accounts: 8,
            epoch_interval_ms: 5,
            ..TransferOptions::default()
        };
        let report = run_transfer(&options).unwrap();
        assert!(report.committed > 0);
        assert_eq!(report.total_balance, 8 * 1_000);
    }

    #[test]
    fn bad_options_are_refused() {
        let options = TransferOptions { threads: 0, ..TransferOptions::default() };
        assert!(matches!(run_transfer(&options), Err(BenchError::Options(_))));
    }
}
