//! `lazarus crash-test`: real `SIGKILL`s against the value-logging scheme, then recovery and
//! verification.
//!
//! - [`child`]: what the killed process runs (`lazarus crash-child`, a hidden subcommand): it
//!   opens (and so recovers) a database on a log directory, runs a workload on a few threads, and
//!   appends an acknowledgement line to an ack file for every transaction once the scheme says it
//!   is durable.
//! - [`acks`]: the ack file's line format and its parser (a torn last line is tolerated).
//! - [`verify`]: recovery in the parent and the checks: every acknowledged transaction is
//!   present, the workload's consistency conditions hold, and KV versions lie between the last
//!   acknowledged and the number issued.
//! - [`harness`]: the trials: a loaded template directory, a copy per trial, kill/restart rounds
//!   at seeded moments, optional damage of the newest log file, the summary.
//!
//! - [`power_loss`] and [`model`] (`crash-test --power-loss`): power loss at the k-th I/O of a
//!   short history on the simulated disk, recovery, and the acknowledged-prefix oracle; the
//!   reliability sweeps of `tests/` use them too.
//!
//! See `docs/durability.md`, "Crash test", and `docs/RELIABILITY.md`.

pub mod acks;
pub mod child;
#[cfg(feature = "fuse")]
pub mod fuse;
pub mod harness;
pub mod model;
pub mod power_loss;
pub mod verify;

pub use harness::{CrashOptions, CrashSummary, run_crash_test};

use crate::bench::workload::{Workload, WorkloadError};
use crate::db::DbError;
use crate::durability::value::{ValueLogging, ValueOptions};
use crate::durability::{DurabilityError, LogScheme};
use crate::txn::TxnError;
use crate::workload::WorkloadOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The workloads a crash test runs.
pub const WORKLOADS: &[&str] = &["kv", "tpcc", "transfer"];
/// The durability schemes a crash test runs.
pub const SCHEMES: &[&str] = &["value", "command", "serial-data", "serial-cmd", "taurus-data", "taurus-cmd"];
/// Fraction of gets in the crash test's KV workload (more sets than memtier's 1:10, so more
/// versions to verify).
pub const KV_READ_FRACTION: f64 = 0.5;

/// Why a crash test (or its child) could not run. A failed *trial* is not an error: it is
/// reported in [`CrashSummary`].
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    /// A bad option.
    #[error("invalid crash-test option: {0}")]
    Options(String),
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The workload failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A transaction failed in a way retrying cannot fix.
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// The durability scheme failed.
    #[error(transparent)]
    Durability(#[from] DurabilityError),
    /// The ack file has a damaged line that is not the last one.
    #[error("{}: line {line}: {reason}", path.display())]
    AckFile {
        /// The ack file.
        path: PathBuf,
        /// The line number (1-based).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The child process misbehaved (did not start, exited on its own, ...).
    #[error("child process: {0}")]
    Child(String),
}

/// Attaches a path to an I/O error.
pub(crate) fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> CrashError + '_ {
    move |source| CrashError::Io { path: path.to_path_buf(), source }
}

/// A crash test's durability scheme, and the scheme itself, whose recovery report the harness
/// reads.
pub type CrashScheme = (Arc<dyn LogScheme>, SchemeHandle);

/// The concrete scheme behind a crash test's [`LogScheme`].
#[derive(Clone)]
pub enum SchemeHandle {
    /// `value`, `command` and their `-checkpoint` setups.
    Value(Arc<ValueLogging>),
    /// The serial and Taurus schemes.
    Stream(Arc<crate::durability::taurus::StreamLogging>),
}

/// What the parent and the child must agree on: the workload and its size, and the engine
/// settings.
#[derive(Clone, Debug)]
pub struct CrashConfig {
    /// `kv`, `tpcc` or `transfer`.
    pub workload: String,
    /// KV: keys.
    pub records: u64,
    /// TPC-C: warehouses.
    pub warehouses: u32,
    /// Transfer: accounts.
    pub accounts: u32,
    /// Worker threads of the child.
    pub threads: usize,
    /// Epoch interval in milliseconds.
    pub epoch_interval_ms: u64,
    /// Value logging: rotate `data.log` every this many epochs.
    pub rotate_epochs: u64,
    /// Milliseconds between checkpoints (0 = none).
    pub checkpoint_interval_ms: u64,
    /// The durability scheme: `value` or `command`.
    pub durability: String,
}

impl Default for CrashConfig {
    fn default() -> CrashConfig {
        CrashConfig {
            workload: "kv".into(),
            records: 10_000,
            warehouses: 1,
            accounts: 1_000,
            threads: 2,
            epoch_interval_ms: 10,
            rotate_epochs: 10,
            checkpoint_interval_ms: 150,
            durability: "value".into(),
        }
    }
}

impl CrashConfig {
    /// Checks the options.
    pub fn validate(&self) -> Result<(), CrashError> {
        if !WORKLOADS.contains(&self.workload.as_str()) {
            return Err(CrashError::Options(format!(
                "unknown workload {:?}; a crash test runs {}",
                self.workload,
                WORKLOADS.join(", ")
            )));
        }
        if !SCHEMES.contains(&self.durability.as_str()) {
            return Err(CrashError::Options(format!(
                "unknown durability {:?}; a crash test runs {}",
                self.durability,
                SCHEMES.join(", ")
            )));
        }
        if !(1..=64).contains(&self.threads) {
            return Err(CrashError::Options(format!("threads must be 1..=64, got {}", self.threads)));
        }
        Ok(())
    }

    /// The workload, built as the bench builds it.
    pub fn workload(&self) -> Result<Arc<dyn Workload>, CrashError> {
        let options = WorkloadOptions {
            warehouses: Some(self.warehouses),
            accounts: Some(self.accounts),
            records: Some(self.records),
            read_fraction: Some(KV_READ_FRACTION),
            ..WorkloadOptions::default()
        };
        Ok(crate::workload::build(&self.workload, &options)?)
    }

    /// The durability scheme over `log_dir`, and its handle (its recovery report names the
    /// checkpoint, the files and, for value logs, the pepoch).
    pub fn scheme(&self, log_dir: &Path) -> Result<CrashScheme, CrashError> {
        if let Some(flavor) = crate::durability::taurus::format::Flavor::from_name(&self.durability) {
            let mut options = crate::durability::taurus::StreamOptions::new(flavor, vec![log_dir.to_path_buf()]);
            // Two loggers in one directory, so that the Taurus trials have dependencies across logs.
            options.loggers = if flavor.is_taurus() { 2 } else { 1 };
            options.recovery_threads = options.recovery_threads.clamp(1, 4);
            options.checkpoint.interval_ms = self.checkpoint_interval_ms;
            let scheme = Arc::new(crate::durability::taurus::StreamLogging::new(options)?);
            return Ok((Arc::clone(&scheme) as Arc<dyn LogScheme>, SchemeHandle::Stream(scheme)));
        }
        let mut options = ValueOptions::new(vec![log_dir.to_path_buf()]);
        options.rotate_epochs = self.rotate_epochs;
        options.checkpoint.interval_ms = self.checkpoint_interval_ms;
        if self.durability == "command" {
            // Checkpoints as under `value`: the command scheme's checkpoint is made transactionally
            // consistent by its data window (src/durability/command/mod.rs).
            options.entry_format = crate::durability::value::files::EntryFormat::Command;
        }
        options.recovery_threads = options.recovery_threads.clamp(1, 4);
        let scheme = Arc::new(ValueLogging::new(options)?);
        Ok((Arc::clone(&scheme) as Arc<dyn LogScheme>, SchemeHandle::Value(scheme)))
    }

    /// The arguments that pass this configuration to `lazarus crash-child`.
    pub fn child_args(&self) -> Vec<String> {
        vec![
            "--workload".into(),
            self.workload.clone(),
            "--records".into(),
            self.records.to_string(),
            "--warehouses".into(),
            self.warehouses.to_string(),
            "--accounts".into(),
            self.accounts.to_string(),
            "--threads".into(),
            self.threads.to_string(),
            "--epoch-interval-ms".into(),
            self.epoch_interval_ms.to_string(),
            "--rotate-epochs".into(),
            self.rotate_epochs.to_string(),
            "--checkpoint-interval-ms".into(),
            self.checkpoint_interval_ms.to_string(),
            "--durability".into(),
            self.durability.clone(),
        ]
    }
}
