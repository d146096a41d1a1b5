//! Transaction errors.

use crate::durability::DurabilityError;
use crate::storage::SchemaError;
use crate::storage::key::KeyError;

/// Why a transaction did not commit.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// OCC validation failed or a lock-phase check failed; retrying may succeed.
    #[error("transaction aborted by a conflict: {0}")]
    Conflict(ConflictReason),
    /// The transaction (or its procedure) chose to abort, e.g. TPC-C's invalid item.
    #[error("transaction aborted by the user: {0}")]
    UserAbort(String),
    /// An insert found a row with the same primary key.
    #[error("duplicate primary key in table {table}")]
    DuplicateKey {
        /// The table.
        table: String,
    },
    /// No table has this id or name.
    #[error("no such table: {0}")]
    NoSuchTable(String),
    /// No secondary index has this position or name.
    #[error("table {table} has no index {index}")]
    NoSuchIndex {
        /// The table.
        table: String,
        /// The index asked for.
        index: String,
    },
    /// A row or key broke the schema.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A key could not be encoded.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The transaction exceeded a size limit.
    #[error("transaction too large: {what} exceeds {limit}")]
    TooLarge {
        /// Which set.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The durability scheme failed; the transaction is not committed.
    #[error(transparent)]
    Durability(#[from] DurabilityError),
    /// A procedure failed at run time (e.g. division by zero, an array index out of range).
    #[error("procedure {procedure} failed: {message}")]
    Procedure {
        /// The procedure.
        procedure: String,
        /// What went wrong.
        message: String,
    },
    /// No procedure has this name or id.
    #[error("no such procedure: {0}")]
    NoSuchProcedure(String),
}

impl TxnError {
    /// Whether the transaction may succeed if retried unchanged.
    pub fn is_retryable(&self) -> bool {
        matches!(self, TxnError::Conflict(_))
    }
}

/// Why OCC aborted a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictReason {
    /// A record read changed or was locked by another transaction (read-set validation).
    ReadChanged,
    /// A key read as absent now exists (point phantom).
    PhantomKey,
    /// A range scanned has a new entry (range phantom).
    PhantomRange,
    /// A record to update or delete was deleted concurrently.
    RecordGone,
    /// A key to insert was inserted concurrently.
    InsertRace,
    /// The epoch's TID sequence was exhausted; retry in the next epoch.
    SequenceExhausted,
}

impl std::fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConflictReason::ReadChanged => "a record read was changed by another transaction",
            ConflictReason::PhantomKey => "a key read as absent was inserted",
            ConflictReason::PhantomRange => "a range scanned gained a row",
            ConflictReason::RecordGone => "a record written was deleted concurrently",
            ConflictReason::InsertRace => "a key inserted was inserted concurrently",
            ConflictReason::SequenceExhausted => "the epoch's TID sequence is exhausted",
        })
    }
}
