//! A Silo OCC transaction: execution with read, write, absence and scan sets, then the commit
//! protocol of SiloR §2. See the module docs of [`crate::txn`] for the protocol and its proof.

use super::error::{ConflictReason, TxnError};
use super::tid::{Tid, TidWord};
use super::versions::Snapshot;
use super::write_slots::{SlotHash, SlotKey, WriteSlots};
use super::{TxnContext, WorkerState};
use crate::durability::{CommitTicket, CommitView, DurabilityTicket, Invocation, LoggedWrite, WorkerLog};
use crate::storage::index::{Direction, Entry, KeyRange, NodeVersion, OrderedIndex};
use crate::storage::key::{self, Key};
use crate::storage::point::{KeyHash, Prefetch};
use crate::storage::prefetch::prefetch_line;
use crate::storage::record::{RawRecord, Record};
use crate::storage::table::{Catalog, Table};
use crate::storage::{Row, TableId, Value};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

/// What a write does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteOp {
    /// The key must be absent; it becomes present.
    Insert,
    /// The key must be present; its row is replaced.
    Update,
    /// Present or absent, the key gets this row (upsert; a blind write).
    Put,
    /// The key must be present; it is removed.
    Delete,
    /// Cancelled within the transaction (insert then delete): nothing to do.
    Nothing,
}

struct WriteEntry {
    table: TableId,
    key: Key,
    op: WriteOp,
    /// The after-image; `None` for deletes.
    row: Option<Row>,
    /// The record, once known (found at execution, or resolved in the lock phase).
    record: Option<Record>,
    /// The after-image holds the read row's values in every secondary index's columns (a
    /// compiled `update` that set none of them), so the lock phase adds no secondary entry and
    /// the install removes none, without comparing the rows: 1.2 % of TPC-C's instructions
    /// (`docs/PERFORMANCE.md`, "TPC-C", "Session 62"). A commit proves the row read is the
    /// row locked (validation), and a later write of the key in this transaction clears it.
    secondary_kept: bool,
    /// The record's word when this transaction locked it.
    locked_word: Option<TidWord>,
}

impl SlotKey for WriteEntry {
    fn table(&self) -> TableId {
        self.table
    }
    fn key(&self) -> &[u8] {
        self.key.as_bytes()
    }
}

struct ReadEntry {
    record: Record,
    observed: TidWord,
}

/// A key looked up and found missing: it must still be missing at validation.
struct Absence {
    table: TableId,
    key: Key,
    /// The key's hash in the write set's index, when the read took it (a lookup before a write).
    slot_hash: Option<SlotHash>,
}

/// A scan whose result must still hold at validation (phantom protection).
struct ScanCheck {
    table: TableId,
    /// `None` for the primary index, else the secondary index position.
    index: Option<usize>,
    /// The part of the range the scan covered (up to the last key visited when it stopped early).
    covered: KeyRange,
    /// Every entry the scan visited (key → record address); their records are in the read set.
    /// A key whose record is now a different one counts as unseen. Sorted by key ascending
    /// (a scan visits keys in order), so validation merges it with its re-scan.
    seen: Vec<(Key, usize)>,
    /// The index's nodes the scan read, with their versions (Silo's node set, §4.6), when the
    /// index keeps versions (`None`: it does not). Unchanged, they show that no entry came into
    /// or left the covered range, and validation need not scan it again.
    nodes: Option<Vec<NodeVersion>>,
}

/// What a committed transaction returns.
#[derive(Clone, Debug)]
pub struct Committed {
    /// The transaction's TID (for a read-only transaction, the TID it would have had).
    pub tid: Tid,
    /// When the result may be released to the client; see [`crate::durability`].
    pub durability: DurabilityTicket,
}

/// Most index entries a scan collects per batch before reading their records.
const SCAN_BATCH_MAX: usize = 256;

/// Limits that bound a transaction's memory.
#[derive(Clone, Debug)]
pub struct TxnLimits {
    /// Most read-set entries.
    pub reads_max: usize,
    /// Most write-set entries.
    pub writes_max: usize,
    /// Most rows one scan may return.
    pub scan_rows_max: usize,
}

impl Default for TxnLimits {
    fn default() -> TxnLimits {
        TxnLimits { reads_max: 1 << 20, writes_max: 1 << 18, scan_rows_max: 1 << 16 }
    }
}

/// An open transaction. Dropping it without committing aborts it (nothing was locked or written).
pub struct Transaction<'w> {
    ctx: &'w TxnContext,
    /// The worker's last committed TID (Silo's rule b), advanced by this transaction's commit.
    last_tid: &'w mut Tid,
    /// The worker's durability state.
    log: &'w mut dyn WorkerLog,
    /// Held by the worker ([`WorkerState`]'s `catalog`) for at least this transaction's life, so
    /// that a table is borrowed for `'w` without borrowing the transaction ([`Self::table_ref`]).
    catalog: &'w Arc<Catalog>,
    reads: Vec<ReadEntry>,
    writes: Vec<WriteEntry>,
    /// (table, key) → index into `writes`.
    write_slots: WriteSlots,
    absences: Vec<Absence>,
    scans: Vec<ScanCheck>,
    commit_scratch: CommitScratch,
    invocation: Option<Invocation>,
    /// Pinned for the transaction's life: the rows it reads are loaded under this one pin
    /// (`Record::stable_read_pinned`) instead of a pin per read.
    pin: crossbeam_epoch::Guard,
    /// Versioned command replay (Taurus §5.2): reads see the versions below this timestamp, and
    /// the commit adds versions instead of replacing what earlier readers need
    /// ([`super::versions`]).
    snapshot: Option<Snapshot>,
}

/// The sets of a finished transaction, emptied, kept per thread for the next one: growing them
/// from empty again (a `realloc` chain per set, a rehash of the write-slot map) showed in TPC-C
/// profiles. Sets that grew past [`SPARE_CAPACITY_MAX`] entries are freed instead of kept.
#[derive(Default)]
struct SpareSets {
    reads: Vec<ReadEntry>,
    writes: Vec<WriteEntry>,
    write_slots: WriteSlots,
    absences: Vec<Absence>,
    scans: Vec<ScanCheck>,
    commit_scratch: CommitScratch,
}

/// Buffers a commit fills and empties, kept with the sets ([`SpareSets`]) so that no commit grows
/// them from empty: their growth (eleven `realloc`s a TPC-C new-order) and a stable sort's
/// scratch were 2 % of a new-order's instructions (`docs/PERFORMANCE.md`, "TPC-C", "Session 63").
#[derive(Default)]
struct CommitScratch {
    /// The lock order: positions in the write set ([`lock_order`]).
    order: Vec<usize>,
    /// The lock order's sort keys, each a write's table and position in one word.
    sort_keys: Vec<u64>,
    undo: Undo,
    /// The placeholders [`Transaction::link_insert_run`] linked ahead: (write, record).
    linked: Vec<(usize, Record)>,
    /// The addresses of the records this commit locked, sorted ([`Transaction::validate`]).
    mine: Vec<usize>,
}

impl CommitScratch {
    /// Empties every buffer for reuse, or frees one that grew large.
    fn recycle(&mut self) -> CommitScratch {
        CommitScratch {
            order: recycle(&mut self.order),
            sort_keys: recycle(&mut self.sort_keys),
            undo: Undo {
                locked: recycle(&mut self.undo.locked),
                placeholders: recycle(&mut self.undo.placeholders),
                secondary_added: recycle(&mut self.undo.secondary_added),
            },
            linked: recycle(&mut self.linked),
            mine: recycle(&mut self.mine),
        }
    }
}

/// The largest set (in entries) a thread keeps for reuse.
const SPARE_CAPACITY_MAX: usize = 4096;

/// The largest write-slot map (in entries) a thread keeps for reuse; see `Drop for Transaction`.
const SPARE_SLOTS_MAX: usize = 256;

/// Rows a thread retires between two collections it runs itself; a collection frees up to 8 bags
/// of 64 (crossbeam-epoch's `COLLECT_STEPS`), so this keeps the collector ahead of the writers.
const RETIRED_ROWS_PER_COLLECT: usize = 64;

thread_local! {
    static RETIRED_SINCE_COLLECT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    static SPARE_SETS: std::cell::RefCell<Option<SpareSets>> = const { std::cell::RefCell::new(None) };
}

/// Empties `v` for reuse, or frees it if it grew large.
fn recycle<T>(v: &mut Vec<T>) -> Vec<T> {
    let mut v = std::mem::take(v);
    if v.capacity() > SPARE_CAPACITY_MAX {
        return Vec::new();
    }
    v.clear();
    v
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        // Clearing a hash map writes its whole control array whatever its length, so only small
        // maps are kept (a 1000-insert load transaction's map made every later clear a 2 KB
        // memset), and an untouched one is not cleared.
        let mut write_slots = std::mem::take(&mut self.write_slots);
        if write_slots.capacity() > SPARE_SLOTS_MAX {
            write_slots = WriteSlots::default();
        } else if !write_slots.is_empty() {
            write_slots.clear();
        }
        let sets = SpareSets {
            reads: recycle(&mut self.reads),
            writes: recycle(&mut self.writes),
            write_slots,
            absences: recycle(&mut self.absences),
            scans: recycle(&mut self.scans),
            commit_scratch: self.commit_scratch.recycle(),
        };
        // A thread running two transactions at once keeps the sets of the last one dropped.
        let _ = SPARE_SETS.try_with(|spare| *spare.borrow_mut() = Some(sets));
    }
}

/// A bounded scan request.
#[derive(Clone, Debug)]
pub struct Scan {
    /// The table.
    pub table: TableId,
    /// `None` scans the primary key; `Some(i)` the table's `i`-th secondary index.
    pub index: Option<usize>,
    /// The range of index keys.
    pub range: KeyRange,
    /// Order of the rows.
    pub direction: Direction,
    /// Most rows to return.
    pub limit: usize,
}

impl<'w> Transaction<'w> {
    pub(crate) fn new(ctx: &'w TxnContext, worker: &'w mut WorkerState) -> Transaction<'w> {
        let sets = SPARE_SETS.with(|spare| spare.borrow_mut().take()).unwrap_or_default();
        let WorkerState { last_tid, log, catalog, .. } = worker;
        Transaction {
            ctx,
            last_tid,
            log: log.as_mut(),
            catalog: catalog.insert(ctx.catalog.load_full()),
            reads: sets.reads,
            writes: sets.writes,
            write_slots: sets.write_slots,
            absences: sets.absences,
            scans: sets.scans,
            commit_scratch: sets.commit_scratch,
            invocation: None,
            pin: crossbeam_epoch::pin(),
            snapshot: None,
        }
    }

    /// Makes this a transaction of versioned command replay at `snapshot.ts`: it reads the
    /// versions of that timestamp and commits like [`Transaction::commit_replay`], adding its
    /// versions to the store ([`super::versions`]). Only for re-executing logged transactions in
    /// an order that respects their RAW and WAW dependencies.
    pub(crate) fn set_snapshot(&mut self, snapshot: Snapshot) {
        self.snapshot = Some(snapshot);
    }

    /// `record`'s row as this transaction sees it (`None`: absent), with the word read with it.
    /// Under a snapshot the record is read first and the store second (`super::versions`).
    fn read_record(&self, record: &Record) -> (TidWord, Option<Row>) {
        let (word, row) = record.stable_read_pinned(&self.pin);
        if let Some(s) = &self.snapshot
            && let Some(version) = s.store.visible(record, s.ts)
        {
            return (word, version);
        }
        (word, (!word.is_absent()).then_some(row))
    }

    /// The size limits this transaction runs under.
    pub fn limits(&self) -> &TxnLimits {
        &self.ctx.limits
    }

    /// The catalog this transaction runs against.
    pub fn catalog(&self) -> &Arc<Catalog> {
        self.catalog
    }

    /// Records that this transaction runs a procedure, for command logging.
    pub fn set_invocation(&mut self, invocation: Invocation) {
        self.invocation = Some(invocation);
    }

    /// The table with id `table`, borrowed for the transaction's lifetime without borrowing the
    /// transaction: the operations use this, not [`Transaction::table`], whose `Arc` clone writes
    /// the table's shared reference count, a line every worker writes on every operation (at 2
    /// workers on TPC-C, `perf annotate` put 46 % of `get`'s samples and 59 % of `insert`'s on
    /// that `lock incq`).
    fn table_ref(&self, table: TableId) -> Result<&'w Table, TxnError> {
        table_in(self.catalog, table)
    }

    /// The table with id `table`.
    pub fn table(&self, table: TableId) -> Result<Arc<Table>, TxnError> {
        self.catalog.table(table).cloned().ok_or_else(|| TxnError::NoSuchTable(format!("#{table}")))
    }

    /// The id of the table called `name`.
    pub fn table_id(&self, name: &str) -> Result<TableId, TxnError> {
        self.catalog.table_by_name(name).map(|t| t.id).ok_or_else(|| TxnError::NoSuchTable(name.to_string()))
    }

    /// Starts loading the point-index slot a lookup of `pk` in `table` will probe, and returns
    /// the key's hash for the later stages ([`Transaction::prefetch_stage`]); `None` for a table
    /// that does not exist or a key that does not encode (a null part). A hint for a key a
    /// procedure's loop reaches a few iterations later (`proc::compile::prefetch`): it reads
    /// nothing, records no read and takes no lock, so it changes nothing the transaction sees.
    pub fn prefetch_key(&self, table: TableId, pk: &[Value]) -> Option<KeyHash> {
        let t = self.table_ref(table).ok()?;
        let key = t.schema.encode_primary_key(pk).ok()?;
        Some(self.prefetch_slot(t, &key))
    }

    /// [`Transaction::prefetch_key`] of a key given as ints (a loop's key whose parts are all
    /// ints), encoded without a `Value` a part.
    pub fn prefetch_key_ints(&self, table: TableId, pk: &[i64]) -> Option<KeyHash> {
        let t = self.table_ref(table).ok()?;
        let key = t.schema.encode_primary_key_ints(pk).ok()?;
        Some(self.prefetch_slot(t, &key))
    }

    /// Starts loading the point-index slot line of `key` in `t`; its hash, for the later stages.
    fn prefetch_slot(&self, t: &Table, key: &Key) -> KeyHash {
        let hash = t.point.hash_of(key.as_bytes());
        t.point.prefetch_pinned(hash, Prefetch::Slot, &self.pin);
        hash
    }

    /// The next stage of [`Transaction::prefetch_key`]'s hint: the key's record, then its row.
    pub fn prefetch_stage(&self, table: TableId, hash: KeyHash, stage: Prefetch) {
        if let Ok(t) = self.table_ref(table) {
            t.point.prefetch_pinned(hash, stage, &self.pin);
        }
    }

    /// Reads the row with primary key `pk` (values in key order).
    pub fn get(&mut self, table: TableId, pk: &[Value]) -> Result<Option<Row>, TxnError> {
        let t = self.table_ref(table)?;
        let key = t.schema.encode_primary_key(pk)?;
        self.get_by_key(t, &key)
    }

    /// [`Transaction::get`] of a key given as ints (a compiled key of typed int expressions):
    /// the key is encoded from them, no `Value` a part.
    pub fn get_ints(&mut self, table: TableId, pk: &[i64]) -> Result<Option<Row>, TxnError> {
        let t = self.table_ref(table)?;
        let key = t.schema.encode_primary_key_ints(pk)?;
        self.get_by_key(t, &key)
    }

    /// Reads the row with encoded primary key `key`.
    pub fn get_by_key(&mut self, table: &Table, key: &Key) -> Result<Option<Row>, TxnError> {
        // Hashed for the write set only when the table has a write: most reads' tables have none.
        let hash = self.write_slots.may_hold(table.id).then(|| self.write_slots.hash(table.id, key.as_bytes()));
        if let Some(hash) = hash
            && let Some(slot) = self.write_slots.get_hashed(&self.writes, table.id, key.as_bytes(), hash)
        {
            return Ok(self.writes[slot].row.clone());
        }
        self.read_unwritten(table, key, hash)
    }

    /// Reads the row of `key`, which this transaction has not written (`slot_hash`: the key's
    /// hash in the write set's index, if the caller took it).
    fn read_unwritten(
        &mut self,
        table: &Table,
        key: &Key,
        slot_hash: Option<SlotHash>,
    ) -> Result<Option<Row>, TxnError> {
        let absence = |key: &Key| Absence { table: table.id, key: key.clone(), slot_hash };
        match table.get(key) {
            Some(record) => {
                let (word, row) = self.read_record(&record);
                self.push_read(record, word)?;
                if row.is_none() {
                    // The record may be unlinked already, with a new record now under the key;
                    // the absence check at validation catches that.
                    self.absences.push(absence(key));
                }
                Ok(row)
            }
            None => {
                self.absences.push(absence(key));
                Ok(None)
            }
        }
    }

    /// Inserts `row`; fails with [`TxnError::DuplicateKey`] if its primary key exists.
    pub fn insert(&mut self, table: TableId, row: Row) -> Result<(), TxnError> {
        let t = self.table_ref(table)?;
        t.schema.check_row(&row)?;
        let key = t.schema.primary_key_of(&row)?;
        self.insert_keyed(t, key, row)
    }

    /// [`Transaction::insert`] of a row whose primary-key columns hold the ints `pk` (a compiled
    /// insert's key values): the key is encoded from them, not read back from the row, which
    /// was a third of an insert's instructions (`docs/PERFORMANCE.md`, "TPC-C", "Session 63").
    pub fn insert_with_key_ints(&mut self, table: TableId, row: Row, pk: &[i64]) -> Result<(), TxnError> {
        let t = self.table_ref(table)?;
        t.schema.check_row(&row)?;
        let key = t.schema.encode_primary_key_ints(pk)?;
        debug_assert!(t.schema.primary_key_of(&row).is_ok_and(|k| k == key), "ints that are not the row's key");
        self.insert_keyed(t, key, row)
    }

    /// Inserts `row`, checked, under its primary key `key`.
    fn insert_keyed(&mut self, t: &'w Table, key: Key, row: Row) -> Result<(), TxnError> {
        let table = t.id;
        let hash = self.write_slots.hash(table, key.as_bytes());
        if let Some(slot) = self.write_slots.get_hashed(&self.writes, table, key.as_bytes(), hash) {
            let entry = &mut self.writes[slot];
            if entry.row.is_some() {
                return Err(TxnError::DuplicateKey { table: t.schema.name.clone() });
            }
            // Deleted earlier in this transaction: the key is reused.
            entry.op = if entry.op == WriteOp::Nothing { WriteOp::Insert } else { WriteOp::Put };
            entry.secondary_kept = false;
            entry.row = Some(row);
            return Ok(());
        }
        if self.read_unwritten(t, &key, Some(hash))?.is_some() {
            return Err(TxnError::DuplicateKey { table: t.schema.name.clone() });
        }
        self.push_write(table, key, hash, WriteOp::Insert, Some(row), None)
    }

    /// Replaces the row with the same primary key as `row`. Returns `false` (and writes nothing)
    /// if there is no such row.
    pub fn update(&mut self, table: TableId, row: Row) -> Result<bool, TxnError> {
        let t = self.table_ref(table)?;
        t.schema.check_row(&row)?;
        let key = t.schema.primary_key_of(&row)?;
        self.modify(t, key, Some(row))
    }

    /// Read-modify-write of the row with primary key `pk` in one lookup: `build` gets the current
    /// row (as [`Transaction::get`] would return it) and returns its replacement. Returns `false`
    /// (and calls nothing) if there is no such row.
    ///
    /// This is exactly `get` followed by [`Transaction::update`], minus the second index lookup,
    /// stable read and read-set entry for the record `get` has just read: that entry already
    /// makes validation fail if the record changes before commit, and the record is locked from
    /// the write entry. If `build` changes the primary key, the new key is updated as `update`
    /// would.
    pub fn update_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        build: impl FnOnce(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        self.update_checked(table, pk, build, None)
    }

    /// [`Transaction::update_with`] for a `build` that changes only the columns `changed` of the
    /// row (increasing), none of them a primary-key column: a compiled `update`, whose `set`s the
    /// checker keeps off the key. The new row is checked at those columns alone and its key is
    /// not derived again ([`crate::storage::TableSchema::check_changed_columns`]); debug builds check the whole
    /// row and compare the key. A `build` that changes another column breaks this contract,
    /// which is why only the crate (the procedure compiler's `update`) may call it.
    pub(crate) fn update_columns_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        changed: &[usize],
        build: impl FnOnce(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        self.update_checked(table, pk, build, Some(changed))
    }

    /// [`Transaction::update_columns_with`] of a key given as ints (a compiled key of typed int
    /// expressions): the key is encoded from them, no `Value` a part.
    pub(crate) fn update_columns_with_ints(
        &mut self,
        table: TableId,
        pk: &[i64],
        changed: &[usize],
        build: impl FnOnce(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        let t = self.table_ref(table)?;
        let key = t.schema.encode_primary_key_ints(pk)?;
        self.update_key(t, key, build, Some(changed))
    }

    /// [`Transaction::update_with`], checking the new row whole (`changed` is `None`) or at the
    /// changed columns only.
    fn update_checked(
        &mut self,
        table: TableId,
        pk: &[Value],
        build: impl FnOnce(Row) -> Result<Row, TxnError>,
        changed: Option<&[usize]>,
    ) -> Result<bool, TxnError> {
        let t = self.table_ref(table)?;
        let key = t.schema.encode_primary_key(pk)?;
        self.update_key(t, key, build, changed)
    }

    /// [`Transaction::update_checked`] of the row with encoded primary key `key` in `t`.
    fn update_key(
        &mut self,
        t: &'w Table,
        key: Key,
        build: impl FnOnce(Row) -> Result<Row, TxnError>,
        changed: Option<&[usize]>,
    ) -> Result<bool, TxnError> {
        let table = t.id;
        let hash = self.write_slots.hash(table, key.as_bytes());
        if self.write_slots.get_hashed(&self.writes, table, key.as_bytes(), hash).is_some() {
            // Our own write: no record to reuse; the write-set path of `update` applies.
            let Some(old) = self.get_by_key(t, &key)? else { return Ok(false) };
            let new = build(old)?;
            let new_key = moved_key(t, &new, &key, changed)?.unwrap_or(key);
            return self.modify(t, new_key, Some(new));
        }
        let Some(record) = t.get(&key) else {
            self.absences.push(Absence { table, key, slot_hash: Some(hash) });
            return Ok(false);
        };
        let (word, old) = self.read_record(&record);
        self.push_read(Record::clone(&record), word)?;
        let Some(old) = old else {
            self.absences.push(Absence { table, key, slot_hash: Some(hash) });
            return Ok(false);
        };
        let new = build(old)?;
        if let Some(new_key) = moved_key(t, &new, &key, changed)? {
            return self.modify(t, new_key, Some(new));
        }
        self.push_write(table, key, hash, WriteOp::Update, Some(new), Some(record))?;
        if let Some(changed) = changed
            && let Some(w) = self.writes.last_mut()
        {
            w.secondary_kept = t.secondary.is_empty() || !t.schema.indexes_any_of(changed);
        }
        Ok(true)
    }

    /// Writes `row` whether or not its key exists (upsert). The previous row is not read, so this
    /// adds nothing to the read set: a blind write.
    pub fn put(&mut self, table: TableId, row: Row) -> Result<(), TxnError> {
        let t = self.table_ref(table)?;
        t.schema.check_row(&row)?;
        let key = t.schema.primary_key_of(&row)?;
        let hash = self.write_slots.hash(table, key.as_bytes());
        if let Some(slot) = self.write_slots.get_hashed(&self.writes, table, key.as_bytes(), hash) {
            let entry = &mut self.writes[slot];
            entry.op = match entry.op {
                WriteOp::Delete => WriteOp::Put,
                WriteOp::Nothing => WriteOp::Insert,
                op => op,
            };
            entry.secondary_kept = false;
            entry.row = Some(row);
            return Ok(());
        }
        self.push_write(table, key, hash, WriteOp::Put, Some(row), None)
    }

    /// Deletes the row with primary key `pk`. Returns `false` if there is no such row.
    pub fn delete(&mut self, table: TableId, pk: &[Value]) -> Result<bool, TxnError> {
        let t = self.table_ref(table)?;
        let key = t.schema.encode_primary_key(pk)?;
        self.modify(t, key, None)
    }

    /// Update (`Some(row)`) or delete (`None`) of an existing key.
    fn modify(&mut self, t: &Table, key: Key, row: Option<Row>) -> Result<bool, TxnError> {
        let hash = self.write_slots.hash(t.id, key.as_bytes());
        if let Some(slot) = self.write_slots.get_hashed(&self.writes, t.id, key.as_bytes(), hash) {
            let entry = &mut self.writes[slot];
            if entry.row.is_none() {
                return Ok(false);
            }
            entry.op = match (entry.op, row.is_some()) {
                (WriteOp::Insert, false) => WriteOp::Nothing,
                (op, true) => op,
                (_, false) => WriteOp::Delete,
            };
            entry.secondary_kept = false;
            entry.row = row;
            return Ok(true);
        }
        let Some(record) = t.get(&key) else {
            self.absences.push(Absence { table: t.id, key, slot_hash: Some(hash) });
            return Ok(false);
        };
        let (word, old) = self.read_record(&record);
        self.push_read(Record::clone(&record), word)?;
        if old.is_none() {
            self.absences.push(Absence { table: t.id, key, slot_hash: Some(hash) });
            return Ok(false);
        }
        let op = if row.is_some() { WriteOp::Update } else { WriteOp::Delete };
        self.push_write(t.id, key, hash, op, row, Some(record))?;
        Ok(true)
    }

    /// Scans up to `scan.limit` rows of a key range of the primary key or a secondary index, in
    /// either direction, seeing this transaction's own writes. The scan is protected against
    /// phantoms: if another transaction adds a row to the part of the range this scan covered and
    /// commits before this one validates, this one aborts.
    pub fn scan(&mut self, scan: &Scan) -> Result<Vec<Row>, TxnError> {
        let t = self.table_ref(scan.table)?;
        if let Some(i) = scan.index
            && i >= t.secondary.len()
        {
            return Err(TxnError::NoSuchIndex { table: t.schema.name.clone(), index: format!("#{i}") });
        }
        if scan.limit > self.ctx.limits.scan_rows_max {
            return Err(TxnError::TooLarge { what: "scan limit", limit: self.ctx.limits.scan_rows_max });
        }
        // Instant recovery: a range is read only once the table is whole in memory.
        t.wait_restored();
        let own = self.own_rows_in_range(t, scan)?;
        let index: &dyn OrderedIndex = match scan.index {
            None => t.primary.as_ref(),
            Some(i) => t.secondary[i].as_ref(),
        };
        let mut out: Vec<Row> = Vec::new();
        if scan.limit == 0 {
            return Ok(out);
        }
        let mut own_iter = own.into_iter().peekable();
        let mut seen = Vec::new();
        let mut last_key: Option<Key> = None;
        let mut reads = Vec::new();
        // Entries are collected in batches and read after the index scan returns: reading a
        // record may wait for its lock, and a committer holding that lock may need the index, so
        // a visitor must never wait (see the index contract).
        let batch = (scan.limit + 1).min(SCAN_BATCH_MAX);
        let mut range = scan.range.clone();
        let mut full = false;
        let mut nodes = Vec::new();
        let mut versioned = true;
        'batches: loop {
            let mut entries: Vec<(Key, RawRecord)> = Vec::with_capacity(batch);
            // Under the transaction's pin, which `validate_scan` needs to read the nodes back.
            versioned &= index.scan_versioned(
                &range,
                scan.direction,
                batch,
                &mut |k, r| {
                    // No count yet: taking one is a locked instruction on the record's line,
                    // which would wait for each entry's miss in turn. The prefetches let the
                    // batch's misses overlap; the counts are taken below, once the lines are in.
                    prefetch_line(Record::as_ptr(r));
                    entries.push((Key::from(k), Record::as_ptr(r)));
                    true
                },
                &mut nodes,
            );
            let index_exhausted = entries.len() < batch;
            seen.reserve(entries.len());
            reads.reserve(entries.len());
            // Each row's line, once its record's has come: independent loads, so they overlap
            // too.
            for &(_, raw) in &entries {
                // SAFETY: as for the count below.
                unsafe { Record::borrow_raw(raw) }.prefetch_row();
            }
            for (entry_key, raw) in entries {
                // SAFETY: the point index held a count of the record while the scan read its
                // entry (no ordered index holds a record the point index does not: inserts link
                // it there first, deletes unlink it there last), and drops that count only
                // through the epoch collector; the transaction has been pinned since before the
                // scan began, so the record is alive.
                let record = unsafe { Record::clone_raw(raw) };
                while out.len() < scan.limit
                    && own_iter.peek().is_some_and(|(k, _)| comes_before(k, &entry_key, scan.direction))
                {
                    if let Some((k, row)) = own_iter.next() {
                        last_key = Some(k);
                        out.push(row);
                    }
                }
                if out.len() >= scan.limit {
                    full = true;
                    break 'batches;
                }
                seen.push((entry_key.clone(), Record::as_ptr(&record) as usize));
                if let Some(row) = self.visible_entry(t, scan.index, &entry_key, record, &mut reads)? {
                    out.push(row);
                }
                last_key = Some(entry_key);
                if out.len() >= scan.limit {
                    full = true;
                    break 'batches;
                }
            }
            match (&last_key, index_exhausted) {
                (Some(last), false) => range = range_after(&scan.range, last.clone(), scan.direction),
                _ => break,
            }
        }
        for (record, word) in reads {
            self.push_read(record, word)?;
        }
        let exhausted = !full;
        for (_, row) in own_iter {
            if out.len() >= scan.limit {
                break;
            }
            out.push(row);
        }
        let covered = match (exhausted, last_key) {
            (false, Some(last)) => covered_range(&scan.range, last, scan.direction),
            _ => scan.range.clone(),
        };
        if scan.direction == Direction::Backward {
            seen.reverse();
        }
        let nodes = versioned.then_some(nodes);
        self.scans.push(ScanCheck { table: t.id, index: scan.index, covered, seen, nodes });
        Ok(out)
    }

    /// The row an index entry stands for, as this transaction sees it, or `None` if the entry
    /// is stale, absent, or shadowed by this transaction's own write of the same primary key.
    /// The entry's count of `record` moves into `reads` (a clone would be a locked instruction
    /// on the record's line, and the entry's drop another).
    fn visible_entry(
        &self,
        t: &Table,
        index: Option<usize>,
        entry_key: &Key,
        record: Record,
        reads: &mut Vec<(Record, TidWord)>,
    ) -> Result<Option<Row>, TxnError> {
        if self.write_slots.may_hold(t.id)
            && self.write_slots.get(&self.writes, t.id, primary_part(t, index, entry_key)?).is_some()
        {
            return Ok(None); // own rows come from the write set
        }
        let (word, row) = self.read_record(&record);
        // The entry may be stale (the row moved to another index key); skipping it is safe
        // because the record is in the read set. A record's rows all have its key.
        let current = match (row, index) {
            (Some(row), Some(i)) => {
                let current = t.schema.is_secondary_entry_of(i, &row, record.key(), entry_key);
                debug_assert_eq!(
                    current,
                    t.schema
                        .primary_key_of(&row)
                        .and_then(|pk| t.schema.secondary_key_of(i, &row, &pk))
                        .is_ok_and(|k| &k == entry_key),
                    "the entry check and the built key differ"
                );
                current.then_some(row)
            }
            (row, _) => row,
        };
        reads.push((record, word));
        Ok(current)
    }

    /// This transaction's written rows whose index key lies in the scan's range, in scan order.
    fn own_rows_in_range(&self, t: &Table, scan: &Scan) -> Result<Vec<(Key, Row)>, TxnError> {
        let mut own = Vec::new();
        for w in self.writes.iter().filter(|w| w.table == t.id) {
            let Some(row) = &w.row else { continue };
            // Most of a transaction's writes to the table lie outside the range (delivery's
            // earlier districts' order lines): a primary key is compared where it lies and
            // copied only when it is in.
            let entry_key = match scan.index {
                None if scan.range.contains(&w.key) => w.key.clone(),
                None => continue,
                Some(i) => t.schema.secondary_key_of(i, row, &w.key)?,
            };
            if scan.index.is_none() || scan.range.contains(&entry_key) {
                own.push((entry_key, Row::clone(row)));
            }
        }
        own.sort_by(|a, b| a.0.cmp(&b.0));
        if scan.direction == Direction::Backward {
            own.reverse();
        }
        Ok(own)
    }

    fn push_read(&mut self, record: Record, observed: TidWord) -> Result<(), TxnError> {
        if self.reads.len() >= self.ctx.limits.reads_max {
            return Err(TxnError::TooLarge { what: "read set", limit: self.ctx.limits.reads_max });
        }
        self.reads.push(ReadEntry { record, observed });
        Ok(())
    }

    fn push_write(
        &mut self,
        table: TableId,
        key: Key,
        hash: SlotHash,
        op: WriteOp,
        row: Option<Row>,
        record: Option<Record>,
    ) -> Result<(), TxnError> {
        if self.writes.len() >= self.ctx.limits.writes_max {
            return Err(TxnError::TooLarge { what: "write set", limit: self.ctx.limits.writes_max });
        }
        self.writes.push(WriteEntry { table, key, op, row, record, secondary_kept: false, locked_word: None });
        self.write_slots.insert_hashed(&self.writes, self.writes.len() - 1, hash);
        Ok(())
    }

    /// Aborts the transaction. Nothing was written; this only drops the sets.
    pub fn abort(self) {}

    /// Turns an error raised during execution into the error the caller should see. OCC lets a
    /// transaction run on a view that a concurrent commit has already invalidated; a decision
    /// made on such a view (a duplicate key, a user abort, a failed lookup) is not a real
    /// outcome. If the reads no longer validate, the error becomes a retryable conflict.
    pub fn settle_error(self, error: TxnError) -> TxnError {
        if error.is_retryable() {
            return error;
        }
        match self.validate(&[], &mut Vec::new()) {
            Ok(()) => error,
            Err(conflict) => conflict,
        }
    }

    /// Runs Silo's commit protocol. On success the writes are installed and visible; the result
    /// may be released to the client once `durability` says so. On a conflict nothing was written.
    pub fn commit(mut self) -> Result<Committed, TxnError> {
        if self.snapshot.is_some() {
            return self.commit_replay();
        }
        let mut scratch = std::mem::take(&mut self.commit_scratch);
        let committed = self.commit_with(&mut scratch);
        // Dropping the transaction empties the buffers and keeps them for the thread's next one.
        self.commit_scratch = scratch;
        committed
    }

    /// [`Transaction::commit`] with the commit's buffers.
    fn commit_with(&mut self, scratch: &mut CommitScratch) -> Result<Committed, TxnError> {
        // Phase 1: lock the write set in the global order (table id, then key): deadlock-free.
        lock_order(&self.writes, &mut scratch.sort_keys, &mut scratch.order);
        let CommitScratch { order, undo, linked, mine, .. } = scratch;
        if let Err(e) = self.lock_phase(order, undo, linked) {
            self.release(undo);
            return Err(e);
        }
        // Phase 2: the serialization point. The fence keeps the epoch read after the locks.
        self.log.before_serialization_point();
        fence(Ordering::SeqCst);
        let epoch = self.ctx.epochs.current();
        let commit_seq = self.log.serialization_point(epoch);
        let tid = match self.validate(order, mine).and_then(|()| self.choose_tid(epoch)) {
            Ok(tid) => tid,
            Err(e) => {
                self.log.abandon(commit_seq);
                self.release(undo);
                return Err(e);
            }
        };
        // Phase 3: log (locks still held), then install and release.
        let ticket = match self.log(tid, commit_seq, order) {
            Ok(ticket) => ticket,
            Err(e) => {
                self.release(undo);
                return Err(e);
            }
        };
        self.install(tid, order, &ticket, Latched::Yes);
        *self.last_tid = tid;
        let durability = match ticket.durability {
            DurabilityTicket::Epoch(e) if order.is_empty() => DurabilityTicket::Epoch(self.observed_epoch().min(e)),
            other => other,
        };
        Ok(Committed { tid, durability })
    }

    /// Commits a PACMAN replay piece (`crate::durability::command::parallel`) **without latches**:
    /// no record is locked and nothing is validated, because the piece's execution schedule lets
    /// no other thread read or write a record this piece writes while it runs (pieces of one
    /// piece-set run in commit order; blocks that share a written table are one block), and the
    /// replay worker logs nothing. What stays is the engine's own write path: records found or
    /// linked in the point index, secondary entries added and removed, the row and a TID (above
    /// every TID read or overwritten) installed, deletes unlinked.
    pub(crate) fn commit_replay(mut self) -> Result<Committed, TxnError> {
        let order: Vec<usize> = (0..self.writes.len()).filter(|&i| self.writes[i].op != WriteOp::Nothing).collect();
        let mut undo = Undo::default();
        for &i in &order {
            let t = self.table_ref(self.writes[i].table)?;
            let w = &mut self.writes[i];
            let record = match (w.op, &w.record) {
                (WriteOp::Update | WriteOp::Delete, Some(record)) => Record::clone(record),
                _ => find_or_link(t, &w.key)?,
            };
            let word = record.word();
            debug_assert!(!word.is_locked(), "a replay piece met a locked record");
            if w.op == WriteOp::Insert && !word.is_absent() {
                return Err(TxnError::Conflict(ConflictReason::InsertRace));
            }
            if let Some(row) = &w.row {
                add_secondary_entries(t, &w.key, row, &record, word, &mut undo)?;
            }
            w.record = Some(record);
            w.locked_word = Some(word);
        }
        let epoch = self.ctx.epochs.current();
        let tid = self.choose_tid(epoch)?;
        let ticket = CommitTicket { last_writer: 0, durability: DurabilityTicket::Epoch(epoch) };
        self.install(tid, &order, &ticket, Latched::No);
        *self.last_tid = tid;
        Ok(Committed { tid, durability: ticket.durability })
    }

    /// A read-only transaction changed nothing, so it may be acknowledged once what it observed
    /// is durable: the rows it read (their TIDs' epochs) and the deletes behind keys it found
    /// absent or scanned past (its tables' delete watermarks). A `GET` of durable data is then
    /// answered at once instead of waiting for the current epoch's group commit. Anything that
    /// overwrote what it read after its validation is ordered after it, so the recovered prefix
    /// agrees with what it returned.
    fn observed_epoch(&self) -> u64 {
        let rows = self.reads.iter().map(|r| r.observed.tid().epoch()).max().unwrap_or(0);
        let tables = self.absences.iter().map(|a| a.table).chain(self.scans.iter().map(|s| s.table));
        let deletes =
            tables.filter_map(|t| self.catalog.table(t)).map(|t| t.delete_watermark().epoch()).max().unwrap_or(0);
        rows.max(deletes)
    }

    /// Locks the writes in `order`; `linked` (empty) receives the placeholders linked ahead, by
    /// write, in `order`'s order.
    fn lock_phase(
        &mut self,
        order: &[usize],
        undo: &mut Undo,
        linked: &mut Vec<(usize, Record)>,
    ) -> Result<(), TxnError> {
        debug_assert!(linked.is_empty(), "placeholders of another commit");
        let (mut next_linked, mut run_end) = (0, 0);
        for (n, &i) in order.iter().enumerate() {
            if n >= run_end {
                run_end = self.link_insert_run(order, n, undo, linked)?;
            }
            // Borrowed from the transaction's catalog, not cloned: an `Arc<Table>` clone writes the
            // table's shared refcount, a line every worker writes on every operation.
            let t = self.table_ref(self.writes[i].table)?;
            let w = &mut self.writes[i];
            // Updates and deletes of a row read during execution lock that record where the write
            // holds it (no count taken: each is a locked instruction on the record's line);
            // everything else (inserts, upserts, a delete after an upsert) finds or creates the
            // record now.
            let known = matches!(w.op, WriteOp::Update | WriteOp::Delete) && w.record.is_some();
            let word = match (&w.record, linked.get(next_linked)) {
                (Some(record), _) if known => record.lock(),
                (_, Some((j, placeholder))) if *j == i => {
                    next_linked += 1;
                    w.record = Some(Record::clone(placeholder));
                    placeholder.word().unlocked()
                }
                _ => {
                    let (record, word) = lock_or_create(t, &w.key, w.op == WriteOp::Insert, undo)?;
                    w.record = Some(record);
                    word
                }
            };
            w.locked_word = Some(word);
            undo.locked.push(i);
            if !word.is_latest() || (known && word.is_absent()) {
                return Err(TxnError::Conflict(ConflictReason::RecordGone));
            }
            if w.op == WriteOp::Insert && !word.is_absent() {
                return Err(TxnError::Conflict(ConflictReason::InsertRace));
            }
            if let (Some(row), Some(record)) = (&w.row, &w.record)
                && !w.secondary_kept
            {
                add_secondary_entries(t, &w.key, row, record, word, undo)?;
            }
        }
        Ok(())
    }

    /// From `order[from]`: if it starts a run of at least [`INSERT_RUN_MIN`] inserts into one
    /// table, links their placeholders, locked, in one go ([`Table::link_run`]: one descent of
    /// the ordered index per leaf, where one [`lock_or_create`] each descends once per key; a
    /// new-order's ten order lines are neighbours) and appends them to `linked`; a key that
    /// already has a record is left to `lock_or_create`. Returns where the run ends. Placeholders
    /// are in `undo` from the moment they are linked, so an abort later in the lock phase
    /// unlinks them all.
    fn link_insert_run(
        &self,
        order: &[usize],
        from: usize,
        undo: &mut Undo,
        linked: &mut Vec<(usize, Record)>,
    ) -> Result<usize, TxnError> {
        let first = &self.writes[order[from]];
        let len = order[from..]
            .iter()
            .take_while(|&&i| self.writes[i].op == WriteOp::Insert && self.writes[i].table == first.table)
            .count();
        if len < INSERT_RUN_MIN {
            return Ok(from + 1);
        }
        let t = self.table_ref(first.table)?;
        let writes = &order[from..from + len];
        let run: Vec<Entry> = writes
            .iter()
            .map(|&i| {
                let key = &self.writes[i].key;
                // Instant recovery: a key not yet restored is restored before a placeholder hides it.
                t.ensure_restored(key);
                (key.clone(), Record::locked_placeholder(key))
            })
            .collect();
        let refused = t.link_run(&run);
        for (position, (key, placeholder)) in run.into_iter().enumerate() {
            if !refused.iter().any(|(r, _)| *r == position) {
                undo.placeholders.push((t.id, key, Record::clone(&placeholder)));
                linked.push((writes[position], placeholder));
            }
        }
        Ok(from + len)
    }

    fn locked_by_me(&self, record: &Record, undo_ptrs: &[usize]) -> bool {
        undo_ptrs.binary_search(&(Record::as_ptr(record) as usize)).is_ok()
    }

    /// Silo's validation of the read set, the absences and the scans; `mine` (empty) receives
    /// the addresses of the records `order` locked.
    fn validate(&self, order: &[usize], mine: &mut Vec<usize>) -> Result<(), TxnError> {
        debug_assert!(mine.is_empty(), "records of another commit");
        mine.extend(order.iter().filter_map(|&i| self.writes[i].record.as_ref().map(|r| Record::as_ptr(r) as usize)));
        mine.sort_unstable();
        let mine = &mine[..];
        for r in &self.reads {
            let now = r.record.word();
            if now.unlocked() != r.observed.unlocked() || (now.is_locked() && !self.locked_by_me(&r.record, mine)) {
                return Err(TxnError::Conflict(ConflictReason::ReadChanged));
            }
        }
        for a in &self.absences {
            match self.absence_under_lock(a) {
                Some(true) => continue,
                Some(false) => return Err(TxnError::Conflict(ConflictReason::PhantomKey)),
                None => {}
            }
            let t = self.table_ref(a.table)?;
            if let Some(record) = t.get(&a.key)
                && !self.locked_by_me(&record, mine)
            {
                let w = record.word();
                if w.is_locked() || !w.is_absent() {
                    return Err(TxnError::Conflict(ConflictReason::PhantomKey));
                }
            }
        }
        for s in &self.scans {
            self.validate_scan(s, mine)?;
        }
        Ok(())
    }

    /// For a key this transaction read as missing and also writes (insert or blind upsert):
    /// whether it was still missing when the lock phase locked its record (`Some(true)`), or had
    /// been inserted by another transaction since the read (`Some(false)`: a conflict). Nobody
    /// can change the record while we hold its lock, so the word seen when locking decides, and
    /// the absence needs no index lookup. An upsert must be checked like an insert: it finds and
    /// locks the other transaction's new record, and skipping it as "locked by me" lost an
    /// increment of two concurrent first INCRs of a key (read absent, both write 1). `None`:
    /// the key is not locked by this transaction (before the lock phase nothing is).
    fn absence_under_lock(&self, a: &Absence) -> Option<bool> {
        let slot = match a.slot_hash {
            Some(hash) => self.write_slots.get_hashed(&self.writes, a.table, a.key.as_bytes(), hash),
            None => self.write_slots.get(&self.writes, a.table, a.key.as_bytes()),
        }?;
        self.writes[slot].locked_word.map(|word| word.is_absent())
    }

    /// Re-scans the covered range: an entry not seen before whose record is locked by another
    /// transaction, or present and matching the entry, is a phantom.
    fn validate_scan(&self, s: &ScanCheck, mine: &[usize]) -> Result<(), TxnError> {
        let t = self.table_ref(s.table)?;
        let index: &dyn OrderedIndex = match s.index {
            None => t.primary.as_ref(),
            Some(i) => t.secondary[i].as_ref(),
        };
        // SAFETY: `self.pin` has been held since the transaction began, so since the scan.
        if let Some(nodes) = &s.nodes
            && unsafe { index.unchanged_since(nodes) }
        {
            // No entry came into or left the covered range: a re-scan would meet only the
            // entries seen, whose records the read set checks. A changed node (this
            // transaction's own inserts change them too) falls back to the re-scan.
            return Ok(());
        }
        let mut next_seen = 0usize;
        let mut phantom = false;
        index.scan(&s.covered, Direction::Forward, usize::MAX, &mut |entry_key, record| {
            while next_seen < s.seen.len() && s.seen[next_seen].0.as_bytes() < entry_key {
                next_seen += 1;
            }
            let was_seen =
                s.seen.get(next_seen).is_some_and(|(k, p)| k == entry_key && *p == Record::as_ptr(record) as usize);
            if was_seen || self.locked_by_me(record, mine) {
                return true;
            }
            let w = record.word();
            phantom = w.is_locked() || (!w.is_absent() && entry_matches(t, s.index, entry_key, record));
            !phantom
        });
        if phantom { Err(TxnError::Conflict(ConflictReason::PhantomRange)) } else { Ok(()) }
    }

    /// Silo's three rules: larger than every TID read or written, larger than this worker's last
    /// TID, and in the epoch read at the serialization point. An insert (a write to an absent
    /// record) also exceeds its table's delete watermark: the key may have been deleted by a
    /// transaction whose record this one never saw (see [`Table::note_delete`]).
    fn choose_tid(&self, epoch: u64) -> Result<Tid, TxnError> {
        let read_max = self.reads.iter().map(|r| r.observed.tid()).max().unwrap_or(Tid::ZERO);
        let write_max = self.writes.iter().filter_map(|w| w.locked_word.map(|x| x.tid())).max().unwrap_or(Tid::ZERO);
        let insert_max = self
            .writes
            .iter()
            .filter(|w| w.locked_word.is_some_and(|x| x.is_absent()))
            .filter_map(|w| self.catalog.table(w.table).map(|t| t.delete_watermark()))
            .max()
            .unwrap_or(Tid::ZERO);
        let floor = read_max.max(write_max).max(insert_max).max(*self.last_tid);
        match floor.epoch().cmp(&epoch) {
            std::cmp::Ordering::Less => Ok(Tid::new(epoch, 0)),
            std::cmp::Ordering::Equal => {
                floor.next_in_epoch().ok_or(TxnError::Conflict(ConflictReason::SequenceExhausted))
            }
            // A TID from a later epoch than the global one cannot have been read: the epoch only
            // grows and was read after every read. Treat it as a conflict rather than break rule (c).
            std::cmp::Ordering::Greater => Err(TxnError::Conflict(ConflictReason::ReadChanged)),
        }
    }

    /// Hands the scheme the commit's view, built as far as it reads it ([`WorkerLog::view_needs`]).
    fn log(&mut self, tid: Tid, commit_seq: u64, order: &[usize]) -> Result<CommitTicket, TxnError> {
        let needs = self.log.view_needs();
        let write = |i: &usize| {
            let w = &self.writes[*i];
            let before = match (&w.record, w.locked_word) {
                (Some(record), Some(word)) if needs.before_images && !word.is_absent() => {
                    Some(record.locked_row(&self.pin))
                }
                _ => None,
            };
            let previous_writer = match &w.record {
                Some(record) if needs.dependencies => record.last_writer(),
                _ => 0,
            };
            LoggedWrite { table: w.table, key: &w.key, after: w.row.as_ref(), before, previous_writer }
        };
        let writes: Vec<LoggedWrite<'_>> = if needs.writes { order.iter().map(write).collect() } else { Vec::new() };
        let mut read_last_writers: Vec<u64> = Vec::new();
        if needs.dependencies {
            read_last_writers.extend(self.reads.iter().map(|r| r.record.last_writer()));
            read_last_writers.sort_unstable();
            read_last_writers.dedup();
        }
        let view = CommitView {
            tid,
            commit_seq,
            writes: &writes,
            read_last_writers: &read_last_writers,
            invocation: self.invocation.as_ref(),
        };
        Ok(self.log.log_commit(&view)?)
    }

    fn install(&mut self, tid: Tid, order: &[usize], ticket: &CommitTicket, latched: Latched) {
        self.install_writes(tid, order, ticket, latched);
        self.collect_retired_rows(order.len());
    }

    /// Every row an install replaces is retired to the epoch collector, which runs a bounded
    /// collection only on a thread's first pin of every 128: with one pin per transaction that is
    /// one collection per 128 transactions, fewer than TPC-C's ≈ 17 retired rows a transaction
    /// need, and garbage grew. So a thread collects itself (`flush`) each time it has retired
    /// [`RETIRED_ROWS_PER_COLLECT`] rows.
    fn collect_retired_rows(&self, retired: usize) {
        let due = RETIRED_SINCE_COLLECT.with(|count| {
            let total = count.get() + retired;
            let due = total >= RETIRED_ROWS_PER_COLLECT;
            count.set(if due { 0 } else { total });
            due
        });
        if due {
            self.pin.flush();
        }
    }

    /// Installs each write's row, moved out of the write set (the commit's last use of it): a
    /// clone would be a locked instruction on the row's line, and its drop another. The row
    /// replaced is counted only where a secondary index needs its values.
    fn install_writes(&mut self, tid: Tid, order: &[usize], ticket: &CommitTicket, latched: Latched) {
        let put = |record: &Record, row: Row, word: TidWord| match latched {
            Latched::Yes => record.install(row, word, ticket.last_writer),
            Latched::No => record.install_unlatched(row, word, ticket.last_writer),
        };
        let (catalog, snapshot) = (self.catalog, &self.snapshot);
        for &i in order {
            let w = &mut self.writes[i];
            let (Some(record), Ok(t)) = (&w.record, table_in(catalog, w.table)) else {
                unreachable!("lock phase resolved every record of a known table");
            };
            let old_present = w.locked_word.is_some_and(|x| !x.is_absent());
            if let Some(s) = snapshot {
                install_version(s, t, w, record, old_present.then(|| record.row_unchecked()), tid, put);
                continue;
            }
            let old = (old_present && !t.secondary.is_empty() && !w.secondary_kept).then(|| record.row_unchecked());
            match w.row.take() {
                Some(row) => {
                    debug_assert!(
                        !w.secondary_kept
                            || !old_present
                            || (0..t.secondary.len()).all(|i| t.schema.same_index_columns(
                                i,
                                &record.row_unchecked(),
                                &row
                            )),
                        "an update that kept its secondary entries changed an indexed column"
                    );
                    if let Some(old) = &old {
                        remove_stale_secondary(t, &w.key, old, Some(&row), record);
                    }
                    put(record, row, TidWord::new(tid, true, false));
                }
                None => {
                    if let Some(old) = &old {
                        remove_stale_secondary(t, &w.key, old, None, record);
                    }
                    t.note_delete(tid);
                    t.unlink(&w.key, record);
                    put(record, Record::empty_row(), TidWord::new(tid, false, true));
                }
            }
        }
    }

    /// Undoes the lock phase after an abort: removes secondary entries and insert placeholders
    /// this transaction added, then unlocks.
    fn release(&self, undo: &Undo) {
        for (table, index, entry_key, record) in &undo.secondary_added {
            if let Some(index) = self.catalog.table(*table).and_then(|t| t.secondary.get(*index)) {
                index.remove(entry_key, record);
            }
        }
        for (table, key, record) in &undo.placeholders {
            if let Some(t) = self.catalog.table(*table) {
                t.unlink(key, record);
            }
            // Unlinked: anyone still holding it sees `latest` cleared and retries.
            record.unlock_with(TidWord::new(record.word().tid(), false, true));
        }
        for record in undo.locked.iter().filter_map(|&i| self.writes[i].record.as_ref()) {
            if !undo.placeholders.iter().any(|(_, _, p)| Record::ptr_eq(p, record)) {
                record.unlock();
            }
        }
    }
}

/// Installs a write of versioned replay: adds its version to the store, and installs it in
/// the record only if it is the record's newest version. A delete leaves its record linked
/// and an update the secondary entries of the row it replaced, for readers with smaller
/// timestamps; a write installed late, not at all, leaves the entries its row got. The store
/// removes them when replay ends.
fn install_version(
    s: &Snapshot,
    t: &Table,
    w: &WriteEntry,
    record: &Record,
    before: Option<Row>,
    tid: Tid,
    put: impl Fn(&Record, Row, TidWord),
) {
    s.store.add_version(record, before, s.ts, w.row.clone(), |newest| {
        let word = record.word();
        let old = if word.is_absent() { None } else { Some(record.row_unchecked()) };
        match (&w.row, newest) {
            (Some(row), false) => s.store.note_stale(t.id, &w.key, record, Row::clone(row)),
            (None, false) => t.note_delete(tid),
            (Some(row), true) => {
                let moved = |old: &Row| (0..t.secondary.len()).any(|i| !t.schema.same_index_columns(i, old, row));
                if let Some(old) = old.filter(moved) {
                    s.store.note_stale(t.id, &w.key, record, old);
                }
                put(record, Row::clone(row), TidWord::new(tid, true, false));
            }
            (None, true) => {
                t.note_delete(tid);
                s.store.note_stale(t.id, &w.key, record, old.unwrap_or_else(Row::empty));
                put(record, Row::empty(), TidWord::new(tid, false, true));
            }
        }
    });
}

/// The table with id `id` in `catalog`, borrowed (see `lock_phase` for why not an `Arc` clone).
fn table_in(catalog: &Catalog, id: TableId) -> Result<&Table, TxnError> {
    catalog.table(id).map(|t| &**t).ok_or_else(|| TxnError::NoSuchTable(format!("#{id}")))
}

/// Whether a commit holds the locks of the records it installs.
#[derive(Clone, Copy)]
enum Latched {
    /// Silo's commit: locked in the lock phase, released by the install.
    Yes,
    /// A replay piece ([`Transaction::commit_replay`]): owned by the schedule, never locked.
    No,
}

/// The record of `key` in `t`, or a new absent one linked for it (a replay piece's insert or
/// upsert; no lock, see [`Transaction::commit_replay`]).
fn find_or_link(t: &Table, key: &Key) -> Result<Record, TxnError> {
    if let Some(record) = t.get(key) {
        return Ok(record);
    }
    let fresh = Record::tombstone(key, Tid::ZERO);
    match t.link(key, &fresh) {
        Ok(()) => Ok(fresh),
        Err(existing) => Ok(existing),
    }
}

/// The fewest inserts into one table, neighbours in the lock order, that the lock phase links
/// as one run ([`Transaction::link_insert_run`]).
const INSERT_RUN_MIN: usize = 2;

/// What an aborting commit must undo.
#[derive(Default)]
struct Undo {
    /// The writes (positions in the write set) whose records the lock phase locked.
    locked: Vec<usize>,
    placeholders: Vec<(TableId, Key, Record)>,
    /// (table, secondary index position, entry key, record).
    secondary_added: Vec<(TableId, usize, Key, Record)>,
}

/// Finds the record for `key`, creating a locked placeholder if there is none, and locks it.
/// `expect_absent` (an insert, whose key was missing at execution) links the placeholder first,
/// which finds an existing record too, so the usual case costs one index operation, not two.
fn lock_or_create(t: &Table, key: &Key, expect_absent: bool, undo: &mut Undo) -> Result<(Record, TidWord), TxnError> {
    // Instant recovery: a key not yet restored is restored before a placeholder can hide it.
    t.ensure_restored(key);
    // Bounded: each retry means another transaction unlinked the record we found, which it
    // does at most once per record.
    let mut link_first = expect_absent;
    for _ in 0..1000 {
        let found = if link_first {
            let placeholder = Record::locked_placeholder(key);
            match t.link(key, &placeholder) {
                Ok(()) => {
                    undo.placeholders.push((t.id, key.clone(), Record::clone(&placeholder)));
                    let word = placeholder.word().unlocked();
                    return Ok((placeholder, word));
                }
                Err(existing) => Some(existing),
            }
        } else {
            t.get(key)
        };
        link_first = true;
        if let Some(existing) = found {
            let word = existing.lock();
            if word.is_latest() {
                return Ok((existing, word));
            }
            existing.unlock();
            link_first = false;
        }
    }
    Err(TxnError::Conflict(ConflictReason::InsertRace))
}

/// Fills `order` with the positions of the writes that write something, in the global lock
/// order: table id, then key (`sort_keys` is its scratch). The tables are ordered first, each
/// write's table and position packed in a word whose plain sort is the stable sort by table
/// (a stable sort of the positions was 1 % of a new-order: session 63), then each table's writes by key, only
/// where they are not in order already: a transaction's writes to one table mostly come in key
/// order (delivery's order lines and districts, new-order's inserts), and comparing keys was most
/// of a sort of the whole set by (table, key), 2.1 % of TPC-C's instructions
/// (`docs/PERFORMANCE.md`, "TPC-C", "Session 62"). Both sorts are stable: the order is the one
/// sorting by (table, key) at once gives.
fn lock_order(writes: &[WriteEntry], sort_keys: &mut Vec<u64>, order: &mut Vec<usize>) {
    assert!(u32::try_from(writes.len()).is_ok(), "a write set of {} writes", writes.len());
    // A word of (table, position) sorts as the stable sort by table, without its merge.
    sort_keys.clear();
    let written = writes.iter().enumerate().filter(|(_, w)| w.op != WriteOp::Nothing);
    sort_keys.extend(written.map(|(i, w)| (u64::from(w.table) << 32) | i as u64));
    sort_keys.sort_unstable();
    order.clear();
    order.extend(sort_keys.iter().map(|&k| (k & u64::from(u32::MAX)) as usize));
    for run in order.chunk_by_mut(|&a, &b| writes[a].table == writes[b].table) {
        if !run.is_sorted_by(|&a, &b| writes[a].key <= writes[b].key) {
            run.sort_by(|&a, &b| writes[a].key.cmp(&writes[b].key));
        }
    }
}

/// Checks an updated row of `t` whose key was `key` (whole, or at the `changed` columns alone:
/// [`Transaction::update_columns_with`]) and returns its new key if the update moved it.
fn moved_key(t: &Table, new: &Row, key: &Key, changed: Option<&[usize]>) -> Result<Option<Key>, TxnError> {
    if let Some(changed) = changed {
        debug_assert!(changed.iter().all(|p| !t.schema.primary_key.contains(p)), "a key column changed");
        t.schema.check_changed_columns(new, changed)?;
        debug_assert!(t.schema.primary_key_of(new).is_ok_and(|k| &k == key), "the key moved");
        return Ok(None);
    }
    t.schema.check_row(new)?;
    let new_key = t.schema.primary_key_of(new)?;
    Ok((&new_key != key).then_some(new_key))
}

/// Adds the secondary entries the new row needs and the old row lacks. Runs under the record's
/// lock and before the serialization point, so a scan that validates after this transaction's
/// serialization point sees them.
fn add_secondary_entries(
    t: &Table,
    key: &Key,
    row: &Row,
    record: &Record,
    word: TidWord,
    undo: &mut Undo,
) -> Result<(), TxnError> {
    if t.secondary.is_empty() {
        // Nor the old row's count taken below, a locked instruction on its line.
        return Ok(());
    }
    let old = (!word.is_absent()).then(|| record.row_unchecked());
    for (i, index) in t.secondary.iter().enumerate() {
        if old.as_ref().is_some_and(|old| t.schema.same_index_columns(i, old, row)) {
            continue;
        }
        let entry = t.schema.secondary_key_of(i, row, key)?;
        // Deletes remove a record's entries before unlinking it, so an entry of another record
        // with this primary key should not exist; if one does, replace it, a bounded number of times.
        let mut added = false;
        for _ in 0..16 {
            match index.insert_if_absent(entry.clone(), Record::clone(record)) {
                Ok(()) => {
                    undo.secondary_added.push((t.id, i, entry.clone(), Record::clone(record)));
                    added = true;
                    break;
                }
                Err(existing) if Record::ptr_eq(&existing, record) => {
                    added = true;
                    break;
                }
                Err(existing) => {
                    index.remove(&entry, &existing);
                }
            }
        }
        if !added {
            return Err(TxnError::Conflict(ConflictReason::InsertRace));
        }
    }
    Ok(())
}

/// Removes the entries of `old` that `new` (or a delete, `None`) no longer has. Under the lock.
fn remove_stale_secondary(t: &Table, key: &Key, old: &Row, new: Option<&Row>, record: &Record) {
    for (i, index) in t.secondary.iter().enumerate() {
        if new.is_some_and(|new| t.schema.same_index_columns(i, old, new)) {
            continue;
        }
        if let Ok(entry) = t.schema.secondary_key_of(i, old, key) {
            index.remove(&entry, record);
        }
    }
}

/// Whether an index entry's record currently holds a row that belongs under that entry.
fn entry_matches(t: &Table, index: Option<usize>, entry_key: &[u8], record: &Record) -> bool {
    let Some(i) = index else { return true };
    let row = record.row_unchecked();
    if row.len() != t.schema.columns.len() {
        return false;
    }
    t.schema
        .primary_key_of(&row)
        .and_then(|pk| t.schema.secondary_key_of(i, &row, &pk))
        .is_ok_and(|k| k.as_bytes() == entry_key)
}

/// The primary key inside an index entry key.
fn primary_part<'k>(t: &Table, index: Option<usize>, entry_key: &'k Key) -> Result<&'k [u8], TxnError> {
    let Some(i) = index else { return Ok(entry_key.as_bytes()) };
    let columns = t.schema.indexes[i].columns.len();
    let start = key::encoded_prefix_len(entry_key, columns).ok_or(TxnError::Key(key::KeyError::Malformed {
        offset: 0,
        reason: "secondary entry shorter than its columns",
    }))?;
    Ok(&entry_key[start..])
}

/// Whether `a` is visited before `b` in `direction`.
fn comes_before(a: &Key, b: &Key, direction: Direction) -> bool {
    match direction {
        Direction::Forward => a < b,
        Direction::Backward => a > b,
    }
}

/// The rest of `range` after `last`, in scan direction.
fn range_after(range: &KeyRange, last: Key, direction: Direction) -> KeyRange {
    match direction {
        Direction::Forward => KeyRange { start: Bound::Excluded(last), end: range.end.clone() },
        Direction::Backward => KeyRange { start: range.start.clone(), end: Bound::Excluded(last) },
    }
}

/// The part of `range` a scan covered when it stopped at `last`.
fn covered_range(range: &KeyRange, last: Key, direction: Direction) -> KeyRange {
    match direction {
        Direction::Forward => KeyRange { start: range.start.clone(), end: Bound::Included(last) },
        Direction::Backward => KeyRange { start: Bound::Included(last), end: range.end.clone() },
    }
}

#[cfg(test)]
mod tests {
    use crate::storage::{Row, Value};
    use crate::txn::TxnError;
    use crate::txn::versions::tests::{accounts, ints};

    /// `update_columns_with` checks the columns it is told changed: a value such a column does
    /// not admit is the schema error, and nothing is written; a fitting change commits; a missing
    /// key is `false`.
    #[test]
    fn update_columns_with_checks_the_changed_columns() {
        let (db, t) = accounts();
        let mut w = db.worker();
        let set = |position: usize, value: Value| {
            move |old: Row| -> Result<Row, TxnError> { Ok(old.with_values(&[(position, value)])) }
        };
        let one = [Value::Int(1)];
        let wrong_type = w.run(1, |tx| tx.update_columns_with(t, &one, &[2], set(2, Value::Float(1.5))));
        assert!(matches!(wrong_type, Err(TxnError::Schema(_))), "{wrong_type:?}");
        let null = w.run(1, |tx| tx.update_columns_with(t, &one, &[1], set(1, Value::Null)));
        assert!(matches!(null, Err(TxnError::Schema(_))), "{null:?}");
        let read = |w: &mut crate::Worker| w.run(1, |tx| tx.get(t, &one)).unwrap().0.expect("row 1");
        assert_eq!(read(&mut w), ints(&[1, 1, 100]));
        assert!(w.run(1, |tx| tx.update_columns_with(t, &one, &[2], set(2, Value::Int(5)))).unwrap().0);
        assert_eq!(read(&mut w), ints(&[1, 1, 5]));
        let absent = [Value::Int(9)];
        assert!(!w.run(1, |tx| tx.update_columns_with(t, &absent, &[2], set(2, Value::Int(5)))).unwrap().0);
    }

    /// The owners the `by_owner` index holds, each checked against the row it points at, in
    /// index order.
    fn indexed_owners(db: &crate::Database, t: super::TableId) -> Vec<i64> {
        let catalog = db.catalog();
        let table = catalog.table(t).expect("table");
        let mut owners = Vec::new();
        let all = crate::storage::KeyRange::all();
        table.secondary[0].scan(&all, crate::storage::Direction::Forward, usize::MAX, &mut |key, record| {
            let (word, row) = record.stable_read();
            assert!(!word.is_absent(), "an entry points at an absent record");
            let pk = table.schema.primary_key_of(&row).expect("primary key");
            let expected = table.schema.secondary_key_of(0, &row, &pk).expect("secondary key");
            assert_eq!(expected.as_bytes(), key, "a stale secondary entry");
            owners.push(row.at(1).as_int().expect("owner"));
            true
        });
        owners
    }

    /// A column update outside every index keeps the row's secondary entries as they are
    /// (`WriteEntry::secondary_kept`); a later write of the same key in the transaction, to the
    /// indexed column, a put or a delete, moves or removes them as usual.
    #[test]
    fn an_update_outside_the_indexes_keeps_the_secondary_entries() {
        let (db, t) = accounts();
        let mut w = db.worker();
        let set = |position: usize, value: i64| {
            move |old: Row| -> Result<Row, TxnError> { Ok(old.with_values(&[(position, Value::Int(value))])) }
        };
        let key = |id: i64| [Value::Int(id)];
        assert!(w.run(1, |tx| tx.update_columns_with(t, &key(1), &[2], set(2, 7))).unwrap().0);
        assert_eq!(indexed_owners(&db, t), [0, 1, 2, 3]);
        w.run(1, |tx| {
            tx.update_columns_with(t, &key(2), &[2], set(2, 8))?;
            tx.update_columns_with(t, &key(2), &[1], set(1, 9))
        })
        .unwrap();
        assert_eq!(indexed_owners(&db, t), [0, 1, 3, 9]);
        w.run(1, |tx| {
            tx.update_columns_with(t, &key(3), &[2], set(2, 8))?;
            tx.delete(t, &key(3))
        })
        .unwrap();
        assert_eq!(indexed_owners(&db, t), [0, 1, 9]);
        w.run(1, |tx| {
            tx.update_columns_with(t, &key(0), &[2], set(2, 8))?;
            tx.put(t, ints(&[0, 5, 8]))
        })
        .unwrap();
        assert_eq!(indexed_owners(&db, t), [1, 5, 9]);
        assert_eq!(w.run(1, |tx| tx.get(t, &key(1))).unwrap().0, Some(ints(&[1, 1, 7])));
    }

    /// A commit that fails in its lock phase, after linking a run of inserts and adding their
    /// secondary entries, undoes all of it, and the thread's next commits, which reuse its
    /// emptied buffers (`CommitScratch`), lock, validate and install only their own writes.
    #[test]
    fn a_failed_commit_leaves_nothing_in_the_next_commits_buffers() {
        let (db, t) = accounts();
        let (mut w, mut other) = (db.worker(), db.worker());
        // Keys 10 and 11 make a run; 12 is taken by the other worker before the commit.
        let mut tx = w.begin();
        for id in [10, 11, 12] {
            tx.insert(t, ints(&[id, 20 + id, 1])).unwrap();
        }
        other.run(1, |tx| tx.insert(t, ints(&[12, 5, 5]))).unwrap();
        let failed = tx.commit();
        assert!(matches!(failed, Err(TxnError::Conflict(_))), "{failed:?}");
        assert_eq!(indexed_owners(&db, t), [0, 1, 2, 3, 5], "the run's entries were removed");
        for round in 0..3 {
            let ids = [13 + 2 * round, 14 + 2 * round];
            w.run(1, |tx| {
                tx.update_columns_with(t, &[Value::Int(1)], &[2], |old: Row| {
                    Ok(old.with_values(&[(2, Value::Int(round))]))
                })?;
                ids.iter().try_for_each(|&id| tx.insert(t, ints(&[id, id, 1])))
            })
            .unwrap();
        }
        let mut expected = vec![0, 1, 2, 3, 5];
        expected.extend(13..19);
        assert_eq!(indexed_owners(&db, t), expected);
        for id in [10, 11] {
            assert_eq!(w.run(1, |tx| tx.get(t, &[Value::Int(id)])).unwrap().0, None, "key {id}");
        }
        assert_eq!(w.run(1, |tx| tx.get(t, &[Value::Int(1)])).unwrap().0, Some(ints(&[1, 1, 2])));
    }

    /// A key given as ints reads, and prefetches under, what the same key given as values does;
    /// a wrong number of parts is the same schema error.
    #[test]
    fn an_int_key_reads_and_prefetches_as_its_values_do() {
        let (db, t) = accounts();
        let mut w = db.worker();
        let mut tx = w.begin();
        for id in [2, 9] {
            let values = [Value::Int(id)];
            assert_eq!(
                tx.prefetch_key_ints(t, &[id]).map(|h| format!("{h:?}")),
                tx.prefetch_key(t, &values).map(|h| format!("{h:?}"))
            );
            assert_eq!(tx.get_ints(t, &[id]).unwrap(), tx.get(t, &values).unwrap());
        }
        assert_eq!(tx.get_ints(t, &[2]).unwrap(), Some(ints(&[2, 2, 100])));
        let wrong = tx.get_ints(t, &[1, 2]).unwrap_err().to_string();
        assert_eq!(wrong, tx.get(t, &[Value::Int(1), Value::Int(2)]).unwrap_err().to_string());
        assert!(tx.prefetch_key_ints(t, &[1, 2]).is_none());
    }

    /// `lock_order` is the order a stable sort of the whole write set by (table, key) gives, and
    /// leaves out the cancelled writes.
    #[test]
    fn lock_order_sorts_by_table_then_key() {
        let entry = |table: super::TableId, key: u8, op: super::WriteOp| super::WriteEntry {
            table,
            key: crate::storage::Key::from(&[key][..]),
            op,
            row: None,
            record: None,
            secondary_kept: false,
            locked_word: None,
        };
        use super::WriteOp::{Delete, Nothing};
        let specs = [(2, 5, Delete), (1, 9, Delete), (2, 1, Delete), (1, 3, Nothing), (1, 2, Delete), (2, 7, Delete)];
        let writes: Vec<_> = specs.iter().map(|&(table, key, op)| entry(table, key, op)).collect();
        let mut expected: Vec<usize> = (0..writes.len()).filter(|&i| writes[i].op != Nothing).collect();
        expected.sort_by(|&a, &b| (writes[a].table, &writes[a].key).cmp(&(writes[b].table, &writes[b].key)));
        let mut order = vec![7];
        super::lock_order(&writes, &mut vec![1, 2], &mut order);
        assert_eq!(order, expected);
        assert_eq!(expected, [4, 1, 2, 0, 5]);
    }
}
