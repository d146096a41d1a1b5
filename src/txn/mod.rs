//! Transactions: Silo's optimistic concurrency control with epochs (SiloR §2, "Silo").
//!
//! A transaction runs in two parts. **Execution** reads records without locking, remembering each
//! record's TID word in the *read set*, buffers writes in the *write set*, and remembers keys it
//! found missing (*absence set*) and ranges it scanned (*scan set*). **Commit** runs Silo's
//! protocol ([`Transaction::commit`]):
//!
//! 1. **Lock** the write set in one global order, (table id, key): deadlock-free. An insert or
//!    upsert whose key has no record links a locked, absent placeholder into the primary index.
//!    Secondary-index entries that the new rows need are added now, under the record lock.
//! 2. **Serialization point**: a full fence, then read the global epoch `E`
//!    ([`epoch::EpochManager`]). The durability scheme is told ([`crate::durability::WorkerLog`]).
//! 3. **Validate**: every read record's word is unchanged and not locked by another transaction;
//!    every absent key is still absent (no present or locked record); every scanned range has no
//!    new entry whose record is present (or locked by another transaction).
//! 4. **Choose the TID** by Silo's three rules ([`tid`]): larger than every TID read or written,
//!    larger than this worker's last TID, and in epoch `E`.
//! 5. **Log** through the durability scheme, with the locks held (Taurus needs this: a record's
//!    `last_writer` must name the log record that wrote it).
//! 6. **Install** each new row with the new TID, which also releases the lock; remove secondary
//!    entries the new rows no longer need; a delete unlinks the record (clears `latest`).
//!
//! # Why this is serializable
//!
//! This is Silo's argument. Order committed transactions by their serialization points. Take a
//! read by `T` of a record that `U` writes. If `U` installed before `T` read, `T` saw `U`'s TID,
//! so `T`'s TID exceeds `U`'s (rule a) and `T` follows `U`. If `U` installed after `T` read, then
//! either `U` locked before `T` validated, and `T` sees the lock or the new word and aborts, or `U`
//! locked after `T` validated, so `U`'s serialization point follows `T`'s. Writes are installed
//! under locks in TID order per record.
//!
//! # Phantoms
//!
//! Silo detects phantoms with the versions of the B-tree nodes a scan visited. Here that is the
//! first step, for an index that keeps versions, and a re-scan, correct for any linearizable
//! index, is the second: every insert links its record (an absent placeholder) and every new
//! secondary entry into the index **before** its serialization point, under the record's lock.
//! A scan remembers the keys it visited, the part of the range it covered and, when the index
//! keeps them ([`crate::storage::index::OrderedIndex::scan_versioned`]), the leaves it read with
//! their versions. Validation runs **after** the scanner's serialization point. If no recorded
//! leaf changed, no entry was linked into or removed from the covered range since the scan (a
//! link changes its leaf's version, or holds it locked), and the scan stands. Otherwise
//! validation re-scans that part. A transaction that serializes before the scanner has already
//! linked its entries, so a recorded leaf has changed, the re-scan finds a new key that is locked
//! or present, and the scanner aborts; one that links later serializes later, and not seeing its
//! row is correct. Point lookups that find nothing are the one-key case. Deleted rows need
//! nothing extra: the deleted record was in the read set and its word changes.
//!
//! The cost is a push per leaf a scan reads, and a second pass over a scanned range at commit
//! only when one of its leaves changed; `benches/engine.rs` measures scans.
//!
//! # What is recorded for the durability schemes
//!
//! Each record carries `last_writer` (Taurus). At commit the scheme sees the `last_writer` of every
//! record read (RAW predecessors) and written (WAW predecessors) and returns the value to store.

pub mod epoch;
pub mod error;
pub mod tid;
pub mod transaction;
pub mod versions;
mod write_slots;

pub use error::{ConflictReason, TxnError};
pub use tid::Tid;
pub use transaction::{Committed, Scan, Transaction, TxnLimits};

use crate::durability::{LogScheme, WorkerLog};
use crate::storage::Catalog;
use arc_swap::ArcSwap;
use std::sync::Arc;

/// What every transaction shares: the catalog, the epoch, the durability scheme and the limits.
pub struct TxnContext {
    /// The current catalog; DDL swaps it. Shared with the durability scheme, whose checkpointer
    /// walks the tables of the current catalog.
    pub catalog: Arc<ArcSwap<Catalog>>,
    /// The global epoch.
    pub epochs: Arc<epoch::EpochManager>,
    /// The durability scheme.
    pub scheme: Arc<dyn LogScheme>,
    /// Size limits.
    pub limits: TxnLimits,
}

/// A worker's private state: its id, the last TID it committed (Silo's rule b) and its log state.
pub struct WorkerState {
    /// The worker's id (0-based, dense).
    pub id: usize,
    /// The TID of this worker's last commit.
    pub last_tid: Tid,
    /// The durability scheme's per-worker state.
    pub log: Box<dyn WorkerLog>,
    /// The catalog of the worker's current transaction (or, between transactions, its last
    /// one's). The transaction borrows its tables from it rather than cloning an `Arc<Table>`
    /// per operation ([`Transaction::table_ref`]).
    pub(crate) catalog: Option<Arc<Catalog>>,
}

impl WorkerState {
    /// A worker's state before its first transaction.
    pub fn new(id: usize, log: Box<dyn WorkerLog>) -> WorkerState {
        WorkerState { id, last_tid: Tid::ZERO, log, catalog: None }
    }
}

impl TxnContext {
    /// Begins a transaction on behalf of `worker`.
    pub fn begin<'w>(&'w self, worker: &'w mut WorkerState) -> Transaction<'w> {
        Transaction::new(self, worker)
    }
}
