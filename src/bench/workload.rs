//! The interface between the bench driver and a workload.
//!
//! A workload supplies its schema and procedures (procedure-language source), loads its initial
//! data, hands each worker thread a [`TxnGenerator`] that produces transaction requests with their
//! parameters, and checks its consistency conditions after a run. The driver
//! ([`crate::bench::driver`]) runs the requests with retries, timing and durability tracking.

use crate::db::Database;
use crate::storage::ParamValue;
use crate::txn::{Transaction, TxnError};
use std::sync::Arc;

/// A failure of a workload's loader or consistency check.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A workload option is invalid.
    #[error("invalid workload option: {0}")]
    Options(String),
    /// Loading or checking ran a transaction that failed.
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// The workload's source failed to load.
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
    /// A consistency condition does not hold.
    #[error("consistency check failed: {0}")]
    Inconsistent(String),
}

/// An ad-hoc transaction body (not a stored-procedure call). It may run several times (retries).
pub type AdHocBody = Arc<dyn Fn(&mut Transaction<'_>) -> Result<(), TxnError> + Send + Sync>;

/// What one transaction does.
#[derive(Clone)]
pub enum TxnCall {
    /// Call a registered stored procedure by id.
    Procedure {
        /// The procedure id (from `Database::procedures().id_of`).
        id: u32,
        /// Its arguments.
        args: Vec<ParamValue>,
    },
    /// Run an ad-hoc transaction.
    AdHoc(AdHocBody),
}

/// One transaction to run.
#[derive(Clone)]
pub struct TxnRequest {
    /// Index into [`Workload::txn_kinds`], for per-kind statistics.
    pub kind: usize,
    /// What to run.
    pub call: TxnCall,
}

/// Produces the transactions of one worker thread. Owns its random state, so a run is
/// reproducible from its seed.
pub trait TxnGenerator: Send {
    /// The next transaction to run.
    fn next_request(&mut self) -> TxnRequest;
}

/// A benchmark workload.
pub trait Workload: Send + Sync {
    /// The workload's name as the command line spells it (`tpcc`, `smallbank`, `ycsb`, ...).
    fn name(&self) -> &str;

    /// The names of the transaction kinds, indexed by [`TxnRequest::kind`].
    fn txn_kinds(&self) -> Vec<String>;

    /// Procedure-language sources to load, as (file name, source).
    fn sources(&self) -> Vec<(String, String)>;

    /// Loads the initial data into a database that has the sources loaded, using up to
    /// `threads` threads.
    fn load(&self, db: &Database, threads: usize) -> Result<(), WorkloadError>;

    /// The generator for worker `thread` of `threads`, seeded by `seed`.
    fn generator(&self, db: &Database, thread: usize, threads: usize, seed: u64) -> Box<dyn TxnGenerator>;

    /// Checks the workload's consistency conditions (e.g. TPC-C §3.3.2 conditions 1–4). Runs
    /// when no transaction is running.
    fn check(&self, db: &Database) -> Result<(), WorkloadError>;
}
