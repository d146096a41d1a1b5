//! Durability schemes plug into the engine through one trait, [`LogScheme`].
//!
//! The engine never knows which scheme runs. It calls a scheme's per-worker [`WorkerLog`] at two
//! points of Silo's commit protocol (see [`crate::txn`]):
//!
//! 1. [`WorkerLog::serialization_point`], right after the write set is locked and the global epoch
//!    is read, before validation. A command-logging scheme takes its commit sequence number here
//!    (PACMAN); the value is handed back in [`CommitView::commit_seq`].
//! 2. [`WorkerLog::log_commit`], after validation succeeded, while the write set is still locked.
//!    The scheme sees the transaction's TID, its write set (table, key, after-image or delete),
//!    the procedure call when there was one, and the `last_writer` of every record read or
//!    written (Taurus's RAW and WAW predecessors). It serializes what it logs and returns a
//!    [`CommitTicket`]: the `last_writer` value to store in every written record, and a
//!    [`DurabilityTicket`] that says when the transaction may be acknowledged.
//!
//! If validation fails after step 1, [`WorkerLog::abandon`] is called instead of step 2.
//!
//! ## The acknowledgement contract
//!
//! A transaction's effects are visible to other transactions as soon as it installs them (Silo
//! does not wait for the log), but its result must not be released to its client until
//! [`LogScheme::is_durable`] returns true for its ticket. From that moment the scheme guarantees
//! that recovery after a crash (including power loss) reproduces the transaction
//! (ARCHITECTURE.md, invariant 1). [`LogScheme::wait_durable`] blocks until then, or returns an
//! error if the scheme has failed (after a failed fsync a scheme acknowledges nothing more).
//! Read-only transactions get a ticket too: they may have read data that is not yet durable.

pub mod appender;
pub mod blocks;
pub mod checkpoint;
pub mod codec;
pub mod command;
pub mod frame;
pub mod indexed;
pub mod inspect;
pub mod none;
pub mod serial;
pub mod taurus;
pub mod value;

use crate::storage::{Key, ParamValue, Row, TableId};
use crate::txn::tid::Tid;
use std::sync::Arc;

/// The message of a caught panic (a recovery thread's bug), for the error that replaces it: a
/// replay thread that panicked must not leave the others waiting for it forever.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|m| m.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// One write of a committing transaction, as a scheme logs it.
#[derive(Debug)]
pub struct LoggedWrite<'a> {
    /// The table written.
    pub table: TableId,
    /// The encoded primary key.
    pub key: &'a Key,
    /// The after-image, or `None` for a delete.
    pub after: Option<&'a Row>,
    /// The row this write replaced (read under the commit's lock), or `None` when the key was
    /// absent: what a log replayed in write order may encode the after-image against
    /// ([`codec::RedoImage::Patch`]).
    pub before: Option<Row>,
    /// `last_writer` of the record before this write (Taurus's WAW predecessor); 0 for a new key.
    pub previous_writer: u64,
}

/// The procedure call a transaction ran, for command logging.
#[derive(Clone, Debug)]
pub struct Invocation {
    /// The procedure's id in the registry.
    pub procedure_id: u32,
    /// The arguments it was called with.
    pub args: Arc<[ParamValue]>,
    /// PACMAN's static analysis could not slice the procedure (its `fallback`, e.g. more than
    /// `pacman::limits::OPS_PER_PROCEDURE_MAX` operations): command logging logs this call as its
    /// write set, which `clr-p` replays as a data piece, instead of as a call it could only re-run
    /// whole and serially.
    pub log_as_data: bool,
}

/// What a scheme sees of a committing transaction.
pub struct CommitView<'a> {
    /// The transaction's TID (its epoch is `tid.epoch()`).
    pub tid: Tid,
    /// What [`WorkerLog::serialization_point`] returned.
    pub commit_seq: u64,
    /// The writes, in the order the transaction made them (one per key).
    pub writes: &'a [LoggedWrite<'a>],
    /// `last_writer` of every record in the read set (Taurus's RAW predecessors), deduplicated.
    pub read_last_writers: &'a [u64],
    /// The procedure call, when the transaction was one; `None` for ad-hoc transactions, which a
    /// command-logging scheme must log as data (PACMAN §4.5).
    pub invocation: Option<&'a Invocation>,
}

impl CommitView<'_> {
    /// Whether the transaction wrote nothing.
    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty()
    }
}

/// What a scheme reads of a [`CommitView`]: a commit builds only that. Building everything
/// under `none` (the write list, a count taken on every overwritten row for its before-image,
/// the read set's writers sorted) was 3 % of a TPC-C new-order's instructions
/// (`docs/PERFORMANCE.md`, "TPC-C", "Session 63").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewNeeds {
    /// [`CommitView::writes`]; without it the list is empty (the view then says nothing of
    /// whether the transaction wrote).
    pub writes: bool,
    /// [`LoggedWrite::before`]; without it every one is `None`.
    pub before_images: bool,
    /// The last writers, of the records read ([`CommitView::read_last_writers`]) and of those
    /// written ([`LoggedWrite::previous_writer`]): Taurus's RAW and WAW predecessors. Without
    /// it the list is empty and every `previous_writer` 0.
    pub dependencies: bool,
}

impl ViewNeeds {
    /// The whole view: what a scheme that does not say gets.
    pub const ALL: ViewNeeds = ViewNeeds { writes: true, before_images: true, dependencies: true };
    /// The write list's keys and after-images alone.
    pub const AFTER_IMAGES: ViewNeeds = ViewNeeds { writes: true, before_images: false, dependencies: false };
    /// Nothing but the TID, the sequence number and the invocation.
    pub const NOTHING: ViewNeeds = ViewNeeds { writes: false, before_images: false, dependencies: false };
}

/// When a transaction may be acknowledged. Interpreted only by the scheme that issued it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurabilityTicket {
    /// Durable at once (no logging).
    Immediate,
    /// Durable once the persistent epoch reaches this epoch (SiloR).
    Epoch(u64),
    /// Durable once the log is flushed past this sequence number (serial logging).
    Sequence(u64),
    /// Durable once the persistent vector dominates this predecessor vector (Taurus).
    Vector(Arc<[u64]>),
}

/// What [`WorkerLog::log_commit`] returns.
#[derive(Clone, Debug)]
pub struct CommitTicket {
    /// Stored in the `last_writer` of every record the transaction wrote.
    pub last_writer: u64,
    /// When the transaction may be acknowledged.
    pub durability: DurabilityTicket,
}

/// A scheme could not log or cannot guarantee durability any more.
#[derive(Debug, thiserror::Error)]
pub enum DurabilityError {
    /// The log failed (a failed write or fsync); nothing more will be acknowledged.
    #[error("durability failed, nothing more is acknowledged: {0}")]
    Failed(String),
    /// The scheme was shut down.
    #[error("the durability scheme is shut down")]
    ShutDown,
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Recovery found damage in the durable part of a file, or a file it cannot use.
    #[error("{}: at byte {offset}: {reason}", file.display())]
    Corrupt {
        /// The file.
        file: std::path::PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// What a scheme's threads may use of the database once it runs. It holds no handle on the
/// database itself: the database owns the scheme, and a scheme thread that kept the database
/// alive could end up joining itself at shutdown.
#[derive(Clone)]
pub struct SchemeStart {
    /// The global epoch.
    pub epochs: Arc<crate::txn::epoch::EpochManager>,
    /// The current catalog (DDL swaps it): what a checkpointer walks.
    pub catalog: Arc<arc_swap::ArcSwap<crate::storage::Catalog>>,
}

/// A durability scheme. See the module docs for the contract.
pub trait LogScheme: Send + Sync {
    /// The scheme's name as the command line spells it (`none`, `value`, ...).
    fn name(&self) -> &'static str;

    /// The per-worker logging state for worker `worker_id`. Called once per worker.
    fn worker(&self, worker_id: usize) -> Box<dyn WorkerLog>;

    /// Whether a transaction with this ticket may be acknowledged now.
    fn is_durable(&self, ticket: &DurabilityTicket) -> bool;

    /// Blocks until a transaction with this ticket may be acknowledged, or the scheme fails.
    fn wait_durable(&self, ticket: &DurabilityTicket) -> Result<(), DurabilityError>;

    /// Blocks until every transaction whose commit returned before this call may be
    /// acknowledged, or the scheme fails. For callers that hold no ticket (a bulk load; a tool
    /// that must know the whole history so far is durable before it closes). An empty
    /// transaction's ticket does not serve: it names no position in the log.
    fn wait_committed_durable(&self) -> Result<(), DurabilityError>;

    /// Flushes and stops the scheme's threads. Tickets not yet durable stay not durable.
    fn shutdown(&self) -> Result<(), DurabilityError>;

    /// Records a module of DDL and procedures (procedure-language source) so that recovery can
    /// rebuild the catalog before it replays the log. Called before the module takes effect.
    fn record_module(&self, file_name: &str, source: &str) -> Result<(), DurabilityError> {
        let _ = (file_name, source);
        Ok(())
    }

    /// Rebuilds the database from what the scheme wrote before (called once, on open, before
    /// any transaction runs). Returns the largest epoch the recovered state may contain; the
    /// global epoch restarts above it.
    fn recover(&self, db: &crate::db::Database) -> Result<u64, DurabilityError> {
        let _ = db;
        Ok(0)
    }

    /// Starts the scheme's threads (called once, after recovery).
    fn start(&self, start: SchemeStart) -> Result<(), DurabilityError> {
        let _ = start;
        Ok(())
    }

    /// Whether a checkpoint is being taken now (the bench timeline marks these intervals).
    fn checkpoint_active(&self) -> bool {
        false
    }

    /// Bytes appended to log files since the scheme started (checkpoints not included): the
    /// bench reports log bytes per transaction from it (PACMAN Table 1, Taurus Table 1).
    fn log_bytes_written(&self) -> u64 {
        0
    }
}

/// A worker's logging state: per-worker buffers live here, so the commit path takes no lock.
pub trait WorkerLog: Send {
    /// Called after the lock phase, just before the global epoch is read. A scheme that computes
    /// a lower bound on the epochs of its workers' future log records (SiloR's `e_w`) marks the
    /// worker as "reading the epoch" here, so the bound can never exceed the epoch this commit
    /// is about to read.
    fn before_serialization_point(&mut self) {}

    /// Called at the serialization point (write set locked, epoch read), before validation.
    fn serialization_point(&mut self, epoch: u64) -> u64;

    /// Called when validation failed after [`WorkerLog::serialization_point`].
    fn abandon(&mut self, commit_seq: u64);

    /// Logs a transaction that passed validation. The write set is still locked. The view
    /// holds what [`WorkerLog::view_needs`] asked for.
    fn log_commit(&mut self, view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError>;

    /// What [`WorkerLog::log_commit`] reads of its view. Asked at every commit; the answer must
    /// not change over the worker's life.
    fn view_needs(&self) -> ViewNeeds {
        ViewNeeds::ALL
    }
}
