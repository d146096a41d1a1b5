//! Log replay of physical redo records in two modes (Pan, *Code Generation Recovery Log Replay*,
//! chapters 2–4): **direct**, the thesis's baseline, which applies a record's after-image straight
//! to the table, and **compiled**, which turns each record into a parameterized plan of the
//! procedure language and runs it through the same compiled closures that run stored procedures.
//!
//! # Contract
//!
//! Both modes give identical tables and identical secondary indexes from the same log: the same
//! keys with the same rows and the same TIDs, the same tombstones, and — after
//! [`crate::storage::Table::finish_recovery`] — the same index entries. Replay is SiloR's last
//! writer wins by TID (§5.2): a record takes effect only if its TID is larger than the TID its
//! key holds, in any replay order and from any number of threads. A record for a table that does
//! not exist, or a row that does not fit its table's schema, is a [`ReplayError`]; the caller
//! (`durability::value::replay`) turns it into [`crate::durability::DurabilityError::Corrupt`]
//! naming the file and offset of the record.
//!
//! # Compiled replay (`compiled`)
//!
//! A redo record is (table, key, after-image or delete, TID). [`compiled::Plan`] converts it, as
//! the thesis's Figures 3.10–3.12 do, into a statement of the procedure language — the record's
//! operation is chosen as NoisePage chooses it, by whether the key has been seen:
//!
//! | record | key in the table (row or tombstone) | plan |
//! |---|---|---|
//! | after-image | no | `insert into t (c1, …) values (?, …)` |
//! | after-image | yes | `update t set c1 = ?, … where pk = ?` (non-key columns) |
//! | delete | either | `delete from t where pk = ?` |
//! | column patch (serial and Taurus data logs) | must hold a row | `update t set c_i = ?, … where pk = ?` (the patched columns; the key's parts from the logged key) |
//!
//! (A table whose every column is in its primary key has nothing to `set`; its after-images use
//! the insert plan, which writes the same row.) The statement is written as source text and goes
//! through the language's own pipeline — lexer, parser, checker, IR, closure compiler — into a
//! [`crate::proc::CompiledProcedure`] whose parameters are the `?`s (§3.4.2 "parameterization").
//! Per record, the only work is binding the after-image's values (or the decoded key's) into the
//! plan's frame and running its closures.
//!
//! ## How the plan reaches the storage step
//!
//! Compiled statements call the database only through [`crate::proc::runtime::Storage`], the
//! executor's storage interface. During a call it is the [`crate::txn::Transaction`] (Silo OCC:
//! buffered writes, validation, a TID chosen at commit). During replay it is a
//! [`compiled::ReplayStorage`]: a *replay context* with no OCC and the record's explicit TID,
//! whose insert, update and delete check the row with the schema's own
//! [`crate::storage::TableSchema::check_row`], encode the key with the schema's own encoder, and
//! end in [`crate::storage::Table::install_if_newer`] — the very storage step the direct path
//! calls. So the row checks, the key encoding and the last-writer-wins install exist once; the two
//! modes differ only in how the values get there (decoded row vs. bound parameters run through
//! closures). The alternatives were worse: running replay inside a `Transaction` would need a
//! mode flag in every write path of the OCC engine and a TID override at commit, and a second
//! statement compiler for replay would be the "separate execution engine" the thesis set out to
//! remove. The only executor change is the trait itself (a dyn call per database operation of a
//! procedure) and [`crate::proc::CompiledProcedure::new_frame`] / `run_bound`, which let replay
//! bind parameters into a reused frame instead of building argument vectors per record.
//!
//! The replay context checks one more thing than the direct path: that the key the plan computes
//! from its parameters equals the key logged with the record (a mismatch is corruption).
//!
//! Secondary indexes are not maintained during replay in either mode; they are built after it by
//! [`crate::storage::Table::finish_recovery_range`], as SiloR and PACMAN do, so "index
//! maintenance" is the engine's own code in both modes.
//!
//! ## What is cached, and when it is invalidated
//!
//! [`cache::PlanCache`] holds compiled plans keyed by (table id, operation, column set), and
//! each plan's frame (§3.4.2: compiled-query cache; the thesis's per-record
//! `StorageInterfaceInit` is paid here once per plan). Table metadata (§3.4.1) needs no cache of
//! its own: a table is found by id in the catalog's vector. Every lookup compares the catalog's
//! [`crate::storage::Catalog::version`] with the version the plans were compiled against; any
//! DDL (a new table, a loaded module) bumps it, and the whole cache is dropped and plans are
//! recompiled on demand. Each replay thread owns its cache (no latches, the concern of the
//! thesis's §5.1); a plan is compiled once per thread.
//!
//! ## Limits
//!
//! A procedure has at most [`crate::proc::limits::PARAMS_MAX`] parameters, so a table with more
//! columns than that replays through the direct path even in compiled mode. The cache holds at
//! most [`cache::PLANS_MAX`] plans per thread and drops them all when full.

pub mod cache;
pub mod compiled;
pub mod direct;

use crate::durability::codec::{ColumnPatch, DecodeError, Reader};
use crate::proc::limits::PARAMS_MAX;
use crate::storage::{Catalog, EntryKeys, Key, Record, Row, SchemaError, Table, TableSchema};
use crate::txn::{Tid, TxnError};

/// How redo records are applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReplayMode {
    /// The after-image straight to the table ([`direct`]); the baseline.
    #[default]
    Direct,
    /// Through cached, parameterized, compiled plans of the procedure language ([`compiled`]).
    Compiled,
}

impl ReplayMode {
    /// How the index rebuild after this mode's replay makes secondary entries' keys: compiled
    /// replay specializes them to the table as its plans specialize rows
    /// ([`crate::storage::FixedEntryKey`]); direct replay, the baseline, encodes them the general
    /// way.
    pub fn entry_keys(self) -> EntryKeys {
        match self {
            ReplayMode::Direct => EntryKeys::Generic,
            ReplayMode::Compiled => EntryKeys::Specialized,
        }
    }
}

impl std::str::FromStr for ReplayMode {
    type Err = String;

    fn from_str(s: &str) -> Result<ReplayMode, String> {
        match s {
            "direct" => Ok(ReplayMode::Direct),
            "compiled" => Ok(ReplayMode::Compiled),
            _ => Err(format!("replay mode must be direct or compiled, got {s:?}")),
        }
    }
}

impl std::fmt::Display for ReplayMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReplayMode::Direct => "direct",
            ReplayMode::Compiled => "compiled",
        })
    }
}

/// The operation a redo record becomes (the thesis's insert, update and delete replay).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedoOp {
    /// An after-image of a key not seen yet.
    Insert,
    /// An after-image of a key that has a record (row or tombstone).
    Update,
    /// A delete.
    Delete,
    /// A column patch (serial and Taurus data logs): the columns an update changed, applied to
    /// the row the key holds, which must be there; the key comes from the logged key.
    Patch,
}

impl RedoOp {
    /// How many operations there are.
    pub const COUNT: usize = 4;

    /// Dense index, for tables of plans.
    pub fn index(self) -> usize {
        match self {
            RedoOp::Insert => 0,
            RedoOp::Update => 1,
            RedoOp::Delete => 2,
            RedoOp::Patch => 3,
        }
    }
}

/// One physical redo record: a write of a data log, decoded.
pub struct RedoRecord<'a> {
    /// The encoded primary key.
    pub key: &'a [u8],
    /// The after-image, or `None` for a delete.
    pub row: Option<Row>,
    /// The writing transaction's TID.
    pub tid: Tid,
    /// Whether the key has a record already (a row or a tombstone): the caller has looked it up
    /// to skip obsolete records, and compiled replay picks the update plan over the insert plan.
    pub key_seen: bool,
}

/// A redo record whose after-image is still encoded in the log (`Reader` positioned at it):
/// compiled replay decodes it straight into its plan's frame, direct replay into a row.
pub struct EncodedRedo<'a> {
    /// The encoded primary key.
    pub key: &'a [u8],
    /// Whether an after-image follows (`false`: a delete).
    pub put: bool,
    /// The writing transaction's TID.
    pub tid: Tid,
    /// The key's record, as the caller's lookup found it (see [`RedoRecord::key_seen`]). Both modes
    /// write to it (or link a new one) without looking the key up again.
    pub found: Option<Record>,
}

/// Why a redo record could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The after-image could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The record names a table the catalog does not have.
    #[error("record for table id {0} which does not exist")]
    NoSuchTable(u32),
    /// The row does not fit the table's schema.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A replay plan could not be compiled.
    #[error("replay plan for table {table}: {message}")]
    Plan {
        /// The table.
        table: String,
        /// The compiler's diagnostics.
        message: String,
    },
    /// Running a replay plan failed (a row that does not fit, a key that is not the logged one).
    #[error("compiled replay: {0}")]
    Execute(#[from] TxnError),
    /// A column patch could not be applied: the key holds no row, or the patch does not fit it.
    #[error("column patch: {0}")]
    Patch(&'static str),
}

/// Why a column patch cannot be applied to a key without a row.
const NO_ROW: &str = crate::storage::table::NO_ROW_TO_EDIT;

/// Checks a column patch against `schema` before any row is touched: every column it names is
/// in the row and admits its value. Both modes call it, so they refuse the same patches with the
/// same errors, and an edit in place cannot fail half-way.
fn check_patch(schema: &TableSchema, patch: &ColumnPatch) -> Result<(), ReplayError> {
    for (p, value) in patch.columns() {
        let position = usize::from(*p);
        if position >= schema.columns.len() {
            return Err(ReplayError::Patch("a column patch names a column past the row's end"));
        }
        schema.check_value(position, value)?;
    }
    Ok(())
}

/// A replay thread's applier: the mode and, for compiled replay, the thread's plan cache.
#[derive(Default)]
pub struct Replayer {
    mode: ReplayMode,
    cache: cache::PlanCache,
}

impl Replayer {
    /// An applier with an empty plan cache.
    pub fn new(mode: ReplayMode) -> Replayer {
        Replayer { mode, cache: cache::PlanCache::default() }
    }

    /// The mode.
    pub fn mode(&self) -> ReplayMode {
        self.mode
    }

    /// The plan cache (empty in direct mode).
    pub fn cache(&self) -> &cache::PlanCache {
        &self.cache
    }

    /// Applies one redo record of `table` (a table of `catalog`). Returns whether the key took
    /// the record's state (`false`: it held a newer TID).
    pub fn apply(&mut self, catalog: &Catalog, table: &Table, record: RedoRecord<'_>) -> Result<bool, ReplayError> {
        match self.mode {
            ReplayMode::Compiled if table.schema.columns.len() <= PARAMS_MAX => {
                compiled::apply(&mut self.cache, catalog, table, record)
            }
            _ => direct::apply(table, record),
        }
    }

    /// [`Replayer::apply`] for a caller that has looked the key up and found `found` (serial and
    /// Taurus replay, which has no skip test of its own): both modes install into that record, or
    /// link a new one, without a second lookup.
    pub fn apply_found(
        &mut self,
        catalog: &Catalog,
        table: &Table,
        record: RedoRecord<'_>,
        found: Option<Record>,
    ) -> Result<bool, ReplayError> {
        match self.mode {
            ReplayMode::Compiled if table.schema.columns.len() <= PARAMS_MAX => {
                compiled::apply_found(&mut self.cache, catalog, table, record, Some(found))
            }
            _ => direct::apply_at(table, found.as_ref(), record),
        }
    }

    /// Applies a column patch of `key` with TID `tid` to the row the key holds (serial and Taurus
    /// data logs, replayed in each key's write order). Returns whether the key took it (`false`:
    /// it held a newer TID). Direct replay edits the row ([`Table::edit_if_newer`]); compiled
    /// replay runs `update t set <patched columns> = ? where <key> = ?`, cached per column set
    /// (the thesis's §3.4 parameterization), which edits the row in place too when its record
    /// holds it alone (`Storage::update_row_in_place`). Both check the patched values against
    /// their columns before the row is touched. A patch of no column or of a key column has no
    /// update plan and is applied directly.
    pub fn apply_patch(
        &mut self,
        catalog: &Catalog,
        table: &Table,
        key: &Key,
        tid: Tid,
        patch: ColumnPatch,
    ) -> Result<bool, ReplayError> {
        let found = table.point.get(key.as_bytes());
        self.apply_patch_found(catalog, table, key, tid, patch, found)
    }

    /// [`Replayer::apply_patch`] for a caller that has looked the key up and found `found`
    /// (Taurus replay looks up every key of a transaction first, so that the misses overlap).
    pub fn apply_patch_found(
        &mut self,
        catalog: &Catalog,
        table: &Table,
        key: &Key,
        tid: Tid,
        patch: ColumnPatch,
        found: Option<Record>,
    ) -> Result<bool, ReplayError> {
        let plannable = !patch.columns().is_empty()
            && patch.columns().iter().all(|&(p, _)| !table.schema.primary_key.contains(&usize::from(p)));
        match self.mode {
            ReplayMode::Compiled if plannable && table.schema.columns.len() <= PARAMS_MAX => {
                compiled::apply_patch(&mut self.cache, catalog, table, key, tid, patch, found)
            }
            _ => {
                // Checked before the row is touched, as compiled replay binds them.
                check_patch(&table.schema, &patch)?;
                let record = found.ok_or(ReplayError::Patch(NO_ROW))?;
                Table::edit_record_if_newer(&record, tid, || NO_ROW, |row| patch.apply_in_place(row))
                    .map_err(ReplayError::Patch)
            }
        }
    }

    /// [`Replayer::apply`] for a record still encoded in the log; `reader` is positioned at its
    /// after-image (when `redo.put`) and is left after it.
    pub fn apply_encoded(
        &mut self,
        catalog: &Catalog,
        table: &Table,
        mut redo: EncodedRedo<'_>,
        reader: &mut Reader<'_>,
    ) -> Result<bool, ReplayError> {
        match self.mode {
            // Lent, not moved: moving `redo` copied it by wide loads over the caller's narrow
            // stores (its `put` flag), a failed store forward per record (`perf annotate`).
            ReplayMode::Compiled if table.schema.columns.len() <= PARAMS_MAX => {
                compiled::apply_encoded(&mut self.cache, catalog, table, &mut redo, reader)
            }
            _ => {
                let row = if redo.put { Some(reader.row()?) } else { None };
                let record = RedoRecord { key: redo.key, row, tid: redo.tid, key_seen: redo.found.is_some() };
                direct::apply_at(table, redo.found.as_ref(), record)
            }
        }
    }
}
