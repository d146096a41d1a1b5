//! Tables and the catalog.
//!
//! A [`Table`] is its schema, one primary index (key → record) and one index per secondary index
//! (index key ++ primary key → the same record). Secondary entries are maintained by the commit
//! protocol in [`crate::txn`], under the record's lock, so that the entries of a record change only
//! while its TID word is locked; a reader that finds an entry re-checks the record's row against
//! the entry's key (an entry can briefly be stale or ahead of the row).
//!
//! The [`Catalog`] is an immutable list of tables. DDL builds a new catalog and swaps it in
//! (`ArcSwap`), so running transactions keep the catalog they started with and never take a lock
//! to find a table. Each catalog has a version, which caches of compiled plans compare.

use super::index::{Entry, IndexBackend, KeyRange, OrderedIndex, Run};
use super::key::Key;
use super::point::PointIndex;
use super::record::Record;
use super::row::InPlaceRow;
use super::schema::{SchemaError, TableId, TableSchema};
use super::value::Row;
use crate::txn::tid::Tid;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The most tables a catalog may hold.
pub const TABLES_MAX: usize = 4096;

/// Why a recovery edit ([`Table::edit_if_newer`]) cannot apply: the key holds no row.
pub const NO_ROW_TO_EDIT: &str = "the key holds no row to apply the write to";

/// A table: schema plus indexes.
pub struct Table {
    /// The table's id in its catalog.
    pub id: TableId,
    /// The schema.
    pub schema: TableSchema,
    /// Ordered primary index: encoded primary key → record, for scans. Holds a subset of
    /// `point` at every moment (see [`crate::storage::point`]); change it only through
    /// [`Table::link`] and [`Table::unlink`]. Empty while `ordered_deferred`.
    pub primary: Box<dyn OrderedIndex>,
    /// Hash primary index: encoded primary key → record, for point lookups.
    pub point: PointIndex,
    /// One index per `schema.indexes` entry: index key ++ primary key → record.
    pub secondary: Vec<Box<dyn OrderedIndex>>,
    /// The largest TID of a delete committed in this table (a `Tid` as u64). A delete unlinks
    /// its record, so a later insert of the same key never meets the deleted record's TID; it
    /// takes a TID above this watermark instead, or value-log replay (largest TID wins) could
    /// let the delete win over the insert that followed it.
    delete_watermark: AtomicU64,
    /// Recovery links records into `point` alone, and [`Table::finish_recovery`] builds `primary`
    /// from them in one go ([`Table::defer_ordered_index`]).
    ordered_deferred: AtomicBool,
    /// Instant recovery's restore gate (see [`RestoreGate`]); idle outside a restore.
    restore: RestoreSlot,
}

/// Instant recovery (the indexed log scheme, [`crate::durability::indexed`]) opens the database
/// before its tables are in memory. While a restore runs, a table consults its gate: a point
/// access first makes sure its key is restored (the paper's Scheduler), and a range access waits
/// until the whole table is. Outside a restore the gate costs one relaxed atomic load.
///
/// A key that has a record in the table's point index is restored, and the table does not ask
/// the gate about it: a record is linked during a restore only by the restore itself
/// ([`Table::restore_row`]) or by a write, which restores its key first (`lock_or_create` calls
/// [`Table::ensure_restored`]). So the gate sees only keys without a record: not restored yet,
/// or restored and absent. The restore links its records locked until every index holds them,
/// so an access that skipped the gate waits for that, as it would for a writer. (Asking it for every access cost a request three passes through it,
/// each a lock and a search of the restored ranges.)
pub trait RestoreGate: Send + Sync {
    /// Returns once `key` of `table` holds its recovered state (restored now if it was not).
    fn restore_key(&self, table: &Table, key: &[u8]);
    /// Whether `key` of `table` holds its recovered state already, without waiting or reading:
    /// true means [`RestoreGate::restore_key`] would return at once.
    fn is_restored(&self, table: &Table, key: &[u8]) -> bool;
    /// Returns once every key of `table` is restored.
    fn wait_table(&self, table: &Table);
    /// A read of `key` of `table` that need not restore it: `None` if the key is restored (read
    /// it from memory), else its recovered row (`Some(None)`: absent), which is its state at some
    /// moment of this call, as nothing writes a key before it is restored. Answering `None`
    /// (the default) is always correct: the caller then restores the key and reads it.
    fn read_ahead(&self, _table: &Table, _key: &[u8]) -> Option<Option<Row>> {
        None
    }
}

/// A table's restore gate: set before transactions run, cleared when its restore ends.
#[derive(Default)]
struct RestoreSlot {
    active: std::sync::atomic::AtomicBool,
    gate: parking_lot::RwLock<Option<Arc<dyn RestoreGate>>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("id", &self.id).field("name", &self.schema.name).finish()
    }
}

impl Table {
    /// An empty table.
    pub fn new(id: TableId, schema: TableSchema, backend: IndexBackend) -> Result<Table, SchemaError> {
        schema.validate()?;
        let secondary = schema.indexes.iter().map(|_| backend.build()).collect();
        Ok(Table {
            id,
            schema,
            primary: backend.build_primary(),
            point: PointIndex::default(),
            secondary,
            delete_watermark: AtomicU64::new(0),
            ordered_deferred: AtomicBool::new(false),
            restore: RestoreSlot::default(),
        })
    }

    /// Loads a row outside any transaction, with the given TID: for bulk loaders and recovery,
    /// which run before transactions start. Fails on a duplicate primary key.
    pub fn load_row(&self, row: Row, tid: Tid) -> Result<(), LoadError> {
        self.schema.check_row(&row)?;
        let key = self.schema.primary_key_of(&row)?;
        let record = Record::present(&key, Row::clone(&row), tid, 0);
        if self.link(&key, &record).is_err() {
            return Err(LoadError::DuplicateKey { table: self.schema.name.clone(), key });
        }
        for (i, index) in self.secondary.iter().enumerate() {
            let entry = self.schema.secondary_key_of(i, &row, &key)?;
            // Unique by construction: the entry key ends with the primary key.
            let _ = index.insert_if_absent(entry, Record::clone(&record));
        }
        Ok(())
    }

    /// Recovery: links a checkpointed row under `key` with its TID, in the primary indexes only
    /// ([`Table::finish_recovery`] builds the secondary ones once the log is replayed too).
    /// Fails on a duplicate key: a checkpoint holds each key once.
    pub fn load_checkpointed(&self, key: Key, row: Row, tid: Tid) -> Result<(), LoadError> {
        self.schema.check_row(&row)?;
        let record = Record::present(&key, row, tid, 0);
        self.link(&key, &record).map_err(|_| LoadError::DuplicateKey { table: self.schema.name.clone(), key })
    }

    /// Recovery that installs rows only (a checkpoint's, a data log's) and finishes with
    /// [`Table::finish_recovery`] before anything reads the table: from now until then, records
    /// are linked into the point index alone, and the finish builds the ordered primary index from
    /// them, sorted, in one pass ([`OrderedIndex::load_sorted`]), instead of a search from the root
    /// per install. No scan may run meanwhile (it would miss rows), which is why command replay,
    /// whose procedures scan, does not defer.
    pub fn defer_ordered_index(&self) {
        self.ordered_deferred.store(true, Ordering::SeqCst);
    }

    /// Whether links go to the point index alone until [`Table::finish_recovery`].
    pub fn is_ordered_index_deferred(&self) -> bool {
        self.ordered_deferred.load(Ordering::SeqCst)
    }

    /// Records a committing delete's TID; called under the record's lock, before it is unlinked,
    /// so that an insert which finds the key absent afterwards sees it.
    pub fn note_delete(&self, tid: Tid) {
        self.delete_watermark.fetch_max(tid.to_u64(), Ordering::SeqCst);
    }

    /// The largest TID of a delete committed in this table: an insert's TID must exceed it.
    pub fn delete_watermark(&self) -> Tid {
        Tid::from_u64(self.delete_watermark.load(Ordering::SeqCst))
    }

    /// The record that owns primary key `key`.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Record> {
        if self.restore.active.load(Ordering::Relaxed) {
            return self.get_restoring(key);
        }
        self.point.get(key)
    }

    /// [`Table::get`] during a restore: a key that has a record is restored (see
    /// [`RestoreGate`]), so only a miss asks the gate, and a hit costs one lookup.
    #[inline(never)]
    fn get_restoring(&self, key: &[u8]) -> Option<Record> {
        if let Some(record) = self.point.get(key) {
            return Some(record);
        }
        self.gate_slow(|gate| gate.restore_key(self, key));
        self.point.get(key)
    }

    /// Installs a restore gate: until [`Table::end_restore`], accesses go through it.
    pub fn begin_restore(&self, gate: Arc<dyn RestoreGate>) {
        *self.restore.gate.write() = Some(gate);
        self.restore.active.store(true, Ordering::SeqCst);
    }

    /// Ends the restore: the table is whole in memory.
    pub fn end_restore(&self) {
        self.restore.active.store(false, Ordering::SeqCst);
        *self.restore.gate.write() = None;
    }

    /// Whether a restore of this table is running.
    pub fn is_restoring(&self) -> bool {
        self.restore.active.load(Ordering::Relaxed)
    }

    /// During a restore, makes sure `key` is in memory before it is accessed (point reads, and
    /// writes that lock or link a record).
    #[inline]
    pub fn ensure_restored(&self, key: &[u8]) {
        if self.restore.active.load(Ordering::Relaxed) && !self.point.contains(key) {
            self.gate_slow(|gate| gate.restore_key(self, key));
        }
    }

    /// Whether `key` may be read without waiting for the restore (always, outside a restore).
    #[inline]
    pub fn is_restored(&self, key: &[u8]) -> bool {
        !self.restore.active.load(Ordering::Relaxed)
            || self.point.contains(key)
            || self.gate_slow(|gate| gate.is_restored(self, key)).unwrap_or(true)
    }

    /// During a restore, a read of `key` that does not restore it ([`RestoreGate::read_ahead`]):
    /// `None` outside a restore and for a key in memory (read it there), else its recovered row.
    pub fn read_ahead(&self, key: &[u8]) -> Option<Option<Row>> {
        if !self.restore.active.load(Ordering::Relaxed) || self.point.contains(key) {
            return None;
        }
        self.gate_slow(|gate| gate.read_ahead(self, key)).flatten()
    }

    /// During a restore, waits until the whole table is in memory (range reads).
    #[inline]
    pub fn wait_restored(&self) {
        if self.restore.active.load(Ordering::Relaxed) {
            self.gate_slow(|gate| gate.wait_table(self));
        }
    }

    /// Calls the restore gate, if one is still set (`None` once the restore has ended).
    #[cold]
    fn gate_slow<T>(&self, call: impl FnOnce(&dyn RestoreGate) -> T) -> Option<T> {
        let gate = self.restore.gate.read().clone();
        gate.map(|gate| call(gate.as_ref()))
    }

    /// Restore: links a recovered row under `key` (primary and secondary indexes) unless the key
    /// already has a record, which is then newer (written after the restart). Returns whether it
    /// was linked. Does not go through the gate: the gate itself calls it.
    ///
    /// The record is linked locked and unlocked once every index holds it: a request that finds
    /// it in the point index takes the key as restored without asking the gate
    /// ([`RestoreGate`]), and a write between the link and the secondary inserts would change the
    /// row (and its own entries) before the restore inserted the entries of the image's values,
    /// leaving an entry under a value the row no longer has. Locked, such a write waits.
    pub fn restore_row(&self, key: &Key, row: Row, tid: Tid) -> bool {
        self.restore_records(std::iter::once(Record::present_locked(key, row, tid))) == 1
    }

    /// [`Table::restore_row`] for records in strictly increasing key order (the restore walk's
    /// batches), each made by [`Record::present_locked`]; returns how many it linked. Each record
    /// is linked locked in the point index, then the linked ones go into the ordered index as one
    /// run (one descent per leaf, [`OrderedIndex::insert_run_if_absent`]), then into the
    /// secondary indexes, and only then are they unlocked: until then a write of one of these
    /// keys waits, as in [`Table::restore_row`]. A record not linked (its key has one) is dropped.
    pub fn restore_records(&self, records: impl Iterator<Item = Record>) -> usize {
        // A run of unknown length is a walk's batch, a few dozen records.
        let (lower, upper) = records.size_hint();
        let mut linked: Vec<Entry> = Vec::with_capacity(upper.unwrap_or(lower.max(32)));
        let guard = crossbeam_epoch::pin();
        for record in records {
            assert!(record.word().is_locked(), "a restored record is linked locked");
            if self.point.insert_if_absent_pinned(Record::clone(&record), &guard).is_ok() {
                linked.push((Key::from(record.key()), record));
            }
        }
        if !self.ordered_deferred.load(Ordering::Relaxed) {
            self.link_ordered_run(&linked);
        }
        for (key, record) in &linked {
            if !self.secondary.is_empty() {
                // Locked by this restore, so its row is the one it was made with.
                let row = record.row_unchecked();
                for (i, index) in self.secondary.iter().enumerate() {
                    if let Ok(entry) = self.schema.secondary_key_of(i, &row, key) {
                        let _ = index.insert_if_absent(entry, Record::clone(record));
                    }
                }
            }
            record.unlock();
        }
        linked.len()
    }

    /// Links `record` under primary key `key` in both primary indexes (the point index alone while
    /// the ordered one is deferred: [`Table::defer_ordered_index`]), unless the key has a record;
    /// returns that record if so. The point index decides, then the ordered index follows, so the
    /// ordered index never holds a record the point index lacks.
    pub fn link(&self, key: &Key, record: &Record) -> Result<(), Record> {
        debug_assert_eq!(record.key(), key, "a record is linked under its own key");
        self.point.insert_if_absent(Record::clone(record))?;
        if self.ordered_deferred.load(Ordering::Relaxed) {
            return Ok(());
        }
        if let Err(stale) = self.primary.insert_if_absent(key.clone(), Record::clone(record)) {
            self.replace_stale_ordered(key, record, &stale);
        }
        Ok(())
    }

    /// [`Table::link`] for a run of records in strictly increasing key order (a commit's inserts
    /// into one table, sorted by its lock phase): each goes into the point index as `link` puts
    /// it, then the ones linked go into the ordered index as one run, one descent per leaf
    /// ([`OrderedIndex::insert_run_if_absent`]) where `link` descends once per key. Returns the
    /// positions in `run` of the records not linked, each with the record its key already had.
    pub fn link_run(&self, run: &[Entry]) -> Vec<(usize, Record)> {
        let guard = crossbeam_epoch::pin();
        let mut refused = Vec::new();
        for (i, (key, record)) in run.iter().enumerate() {
            debug_assert_eq!(record.key(), key, "a record is linked under its own key");
            if let Err(existing) = self.point.insert_if_absent_pinned(Record::clone(record), &guard) {
                refused.push((i, existing));
            }
        }
        if self.ordered_deferred.load(Ordering::Relaxed) {
            return refused;
        }
        if refused.is_empty() {
            self.link_ordered_run(run);
        } else {
            let linked: Vec<Entry> = run
                .iter()
                .enumerate()
                .filter(|(i, _)| !refused.iter().any(|(r, _)| r == i))
                .map(|(_, e)| e.clone())
                .collect();
            self.link_ordered_run(&linked);
        }
        refused
    }

    /// The ordered index's half of [`Table::link_run`], for records the point index took.
    fn link_ordered_run(&self, linked: &[Entry]) {
        for (i, stale) in self.primary.insert_run_if_absent(linked) {
            let (key, record) = &linked[i];
            self.replace_stale_ordered(key, record, &stale);
        }
    }

    /// The ordered index held `stale` under `key`, whose record the point index just took as
    /// `record`. Unreachable while both are changed only by links and `unlink`, under record
    /// locks; repaired rather than left out of step.
    fn replace_stale_ordered(&self, key: &Key, record: &Record, stale: &Record) {
        self.primary.remove(key, stale);
        let _ = self.primary.insert_if_absent(key.clone(), Record::clone(record));
    }

    /// Unlinks `record` from primary key `key`: ordered index first, then the point index.
    pub fn unlink(&self, key: &[u8], record: &Record) {
        self.primary.remove(key, record);
        self.point.remove(key, record);
    }

    /// Recovery: makes `row` (or, for `None`, a deletion) the key's state if `tid` is larger than
    /// the TID the key holds (SiloR §5.2: the largest TID wins, in any replay order). A deletion
    /// leaves a tombstone — an absent record with its TID — so that an older write replayed later
    /// cannot resurrect the key; [`Table::finish_recovery`] sweeps them. Secondary indexes are not
    /// maintained here. Safe to call from many recovery threads; not while transactions run. On a
    /// thread that holds [`super::retire::ReplacedRowsUnread`] the replaced row is dropped a few
    /// installs later, not through the epoch collector.
    /// Returns whether the key's state changed.
    pub fn install_if_newer(&self, key: &Key, row: Option<Row>, tid: Tid) -> bool {
        loop {
            // The point index itself, not `get`: recovery must not go through the restore gate.
            if let Some(record) = self.point.get(key) {
                return install_on(&record, row, tid);
            }
            if self.link_new(key, &row, tid) {
                return true;
            }
        }
    }

    /// Recovery in each key's write order (serial and Taurus data logs): runs `edit` on the row
    /// the key holds if `tid` is larger than its TID, and gives the key `tid`. `Ok(false)` if it
    /// is not (the row already reflects the write: a checkpoint took a later version). An error,
    /// and nothing changed, if the key holds no row or `edit` fails (it must check before it
    /// changes anything): the write's previous row is missing, which replay in write order rules
    /// out. `edit` sets values in the row where it lies when nothing else holds it and the new
    /// values fit ([`InPlaceRow`]), and returns `None`; or it returns the new row, which is
    /// installed. Like every recovery install, not while transactions run.
    pub fn edit_if_newer(
        &self,
        key: &Key,
        tid: Tid,
        edit: impl FnOnce(&mut InPlaceRow) -> Result<Option<Row>, &'static str>,
    ) -> Result<bool, &'static str> {
        let Some(record) = self.point.get(key) else { return Err(NO_ROW_TO_EDIT) };
        Self::edit_record_if_newer(&record, tid, || NO_ROW_TO_EDIT, edit)
    }

    /// [`Table::edit_if_newer`] of a record the caller has looked up (records are never unlinked
    /// during replay), with the caller's error type; `no_row` makes the error for a record that
    /// holds no row.
    pub fn edit_record_if_newer<E>(
        record: &Record,
        tid: Tid,
        no_row: impl FnOnce() -> E,
        edit: impl FnOnce(&mut InPlaceRow) -> Result<Option<Row>, E>,
    ) -> Result<bool, E> {
        let word = record.lock();
        if tid <= word.tid() {
            record.unlock();
            return Ok(false);
        }
        if word.is_absent() {
            record.unlock();
            return Err(no_row());
        }
        let new_word = crate::txn::tid::TidWord::new(tid, true, false);
        match record.edit_unshared_row(edit) {
            Err(e) => {
                record.unlock();
                Err(e)
            }
            Ok(Some(row)) => {
                record.install(row, new_word, 0);
                Ok(true)
            }
            Ok(None) => {
                // `last_writer` stays 0: recovery installs every row with 0.
                record.unlock_with(new_word);
                Ok(true)
            }
        }
    }

    /// [`Table::install_if_newer`] for a caller that has just looked the key up and found
    /// `found`: a compiled replay plan chosen by that lookup (insert for an absent key, update
    /// for a present one) skips the second lookup. Records are never unlinked during replay, so
    /// a found record is still the key's; if another recovery thread linked the key since it was
    /// found absent, this falls back to the full path. The key is taken as its bytes, and a
    /// [`Key`] is built only to link a new record: a write to a found record (every update and
    /// most deletes) needs none.
    pub fn install_if_newer_at(&self, found: Option<&Record>, key: &[u8], row: Option<Row>, tid: Tid) -> bool {
        match found {
            Some(record) => install_on(record, row, tid),
            None => {
                let key = Key::from(key);
                self.link_new(&key, &row, tid) || self.install_if_newer(&key, row, tid)
            }
        }
    }

    /// Links a new record holding `row` (a tombstone for `None`) under `key`; `false` if the key
    /// has a record already.
    fn link_new(&self, key: &Key, row: &Option<Row>, tid: Tid) -> bool {
        let record = match row {
            Some(row) => Record::present(key, Row::clone(row), tid, 0),
            None => Record::tombstone(key, tid),
        };
        self.link(key, &record).is_ok()
    }

    /// Splits the table's keys into `parts` contiguous ranges of roughly equal size, from a
    /// sample of its keys (checkpointers and recovery threads each take one).
    pub fn split_key_space(&self, parts: usize) -> Vec<KeyRange> {
        assert!(parts >= 1);
        if parts == 1 {
            return vec![KeyRange::all()];
        }
        let bounds = self.split_keys(parts);
        let mut ranges = Vec::with_capacity(parts);
        let mut start = Bound::Unbounded;
        for bound in bounds {
            ranges.push(KeyRange { start, end: Bound::Excluded(bound.clone()) });
            start = Bound::Included(bound);
        }
        ranges.push(KeyRange { start, end: Bound::Unbounded });
        // Fewer distinct sample keys than parts: the remaining ranges are empty.
        while ranges.len() < parts {
            ranges.push(KeyRange::empty());
        }
        ranges
    }

    /// Up to `parts - 1` distinct keys, increasing, that split the table's keys into `parts`
    /// ranges of roughly equal size, from a sample of its keys ([`Table::split_key_space`]).
    fn split_keys(&self, parts: usize) -> Vec<Key> {
        if parts <= 1 {
            return Vec::new();
        }
        let mut sample = self.point.sample_keys(256 * parts);
        sample.sort_unstable();
        sample.dedup();
        let mut bounds: Vec<Key> = (1..parts).filter_map(|i| sample.get(i * sample.len() / parts).cloned()).collect();
        bounds.dedup();
        bounds
    }

    /// Recovery: removes tombstones and builds every secondary index from the primary index, and
    /// first the ordered primary index itself if it was deferred ([`Table::defer_ordered_index`]).
    pub fn finish_recovery(&self) {
        self.finish_recovery_on(1, EntryKeys::Generic);
    }

    /// [`Table::finish_recovery`] with up to `threads` threads for a deferred ordered index's
    /// build (one otherwise; [`Table::finish_recovery_range`] splits that work), its secondary
    /// entries' keys made as `keys` says.
    pub fn finish_recovery_on(&self, threads: usize, keys: EntryKeys) {
        if self.is_ordered_index_deferred() {
            self.finish_deferred_recovery(threads, keys);
        } else {
            self.finish_recovery_range(&KeyRange::all(), keys);
        }
    }

    /// [`Table::finish_recovery`] of a table whose ordered index was deferred: every record the
    /// point index holds, tombstones unlinked, the rest sorted by key and loaded into the ordered
    /// index at once, and the secondary indexes built from them as
    /// [`Table::finish_recovery_range`] builds them, but loaded too. A large table's work is split
    /// over threads twice: each gathers the records of a range of the point index's shards into
    /// one bucket per key range (ranges from a sample of the keys), then each sorts one key range's
    /// buckets, and the tree builds each range's leaves on a thread of its own.
    fn finish_deferred_recovery(&self, threads: usize, keys: EntryKeys) {
        let rows = self.point.len();
        let parts = if rows >= DEFERRED_SPLIT_MIN_ROWS { threads.clamp(1, super::point::SHARDS) } else { 1 };
        let bounds = self.split_keys(parts);
        let gathered = on_threads((0..parts).collect(), |part| self.gather_live_records(part, parts, rows, &bounds));
        // Range `r`'s buckets, from every gathering thread.
        let mut per_range: Vec<Vec<Vec<Entry>>> = (0..=bounds.len()).map(|_| Vec::new()).collect();
        for buckets in gathered {
            for (r, bucket) in buckets.into_iter().enumerate() {
                per_range[r].push(bucket);
            }
        }
        let runs: Vec<Run> = on_threads(per_range, |buckets| {
            match super::key::permuted_by_varying_bytes(buckets, |(key, _)| key.as_bytes()) {
                Ok(permuted) => Run::Permuted(permuted),
                Err(buckets) => {
                    let mut run = Vec::with_capacity(buckets.iter().map(Vec::len).sum());
                    for bucket in buckets {
                        run.extend(bucket);
                    }
                    run.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    Run::Sorted(run)
                }
            }
        });
        // This task is the only one to touch the table's indexes: they may be loaded, not inserted.
        self.build_secondary_indexes(runs.iter().flat_map(Run::iter_unordered).map(|(k, r)| (k, r)), true, keys);
        self.primary.load_sorted(runs);
        self.ordered_deferred.store(false, Ordering::SeqCst);
    }

    /// Part `part` of `parts` of [`Table::finish_deferred_recovery`]'s gathering of the table's
    /// `rows` records: the live records of that part of the point index's shards, in one bucket
    /// per key range that `bounds` (sorted) delimit; its tombstones are unlinked from the point
    /// index (the ordered one never had them).
    fn gather_live_records(&self, part: usize, parts: usize, rows: usize, bounds: &[Key]) -> Vec<Vec<Entry>> {
        let shards = part * super::point::SHARDS / parts..(part + 1) * super::point::SHARDS / parts;
        // A part's share of each range, and slack for an uneven split (a bucket that outgrows
        // it is copied once, onto fresh pages).
        let capacity = rows / parts / (bounds.len() + 1) + rows / 16;
        let mut buckets: Vec<Vec<Entry>> = (0..=bounds.len()).map(|_| Vec::with_capacity(capacity)).collect();
        let mut dead = Vec::new();
        self.point.for_each_record_in(shards, |record| {
            if record.word().is_absent() {
                dead.push(Record::clone(record));
            } else {
                let key = record.key();
                buckets[bounds.partition_point(|b| b.as_bytes() <= key)].push((Key::from(key), Record::clone(record)));
            }
        });
        for record in dead {
            self.point.remove(record.key(), &record);
        }
        buckets
    }

    /// [`Table::finish_recovery`] for the keys of `range` only; ranges that do not overlap can be
    /// finished by different threads at once. Not for a table whose ordered index is deferred
    /// (asserted): its ranges cannot be found before the index is built.
    pub fn finish_recovery_range(&self, range: &KeyRange, keys: EntryKeys) {
        let live = self.sweep_recovery_range(range);
        self.build_secondary_indexes(live.iter().map(|(k, r)| (k, r)), false, keys);
    }

    /// The first half of [`Table::finish_recovery_range`]: unlinks the tombstones of `range` and
    /// returns its live records in key order, or none if the table has no secondary index (they
    /// are what [`Table::load_secondary_indexes`] builds from). Ranges that do not overlap can be
    /// swept by different threads at once. Not for a table whose ordered index is deferred.
    pub fn sweep_recovery_range(&self, range: &KeyRange) -> Vec<Entry> {
        assert!(!self.is_ordered_index_deferred(), "a deferred ordered index is built by finish_recovery");
        let mut dead = Vec::new();
        let mut live = Vec::new();
        let indexed = !self.secondary.is_empty();
        self.primary.scan(range, super::index::Direction::Forward, usize::MAX, &mut |k, r| {
            if r.word().is_absent() {
                dead.push((Key::from(k), Record::clone(r)));
            } else if indexed {
                live.push((Key::from(k), Record::clone(r)));
            }
            true
        });
        for (key, record) in dead {
            self.unlink(&key, &record);
        }
        live
    }

    /// The second half: loads the secondary indexes `indexes` (positions) from the live records
    /// of every range, `live` (as [`Table::sweep_recovery_range`] returned them, tombstones
    /// swept), each in one go if it is empty ([`OrderedIndex::load_sorted`]; an index that has
    /// entries already, as after command replay re-executed procedures, gets the missing ones
    /// inserted). No other thread may use those indexes meanwhile; other indexes of the table
    /// may be loaded at once, by other threads.
    pub fn load_secondary_indexes(&self, indexes: std::ops::Range<usize>, live: &[Vec<Entry>], keys: EntryKeys) {
        assert!(
            indexes.end <= self.secondary.len(),
            "table {} has no secondary index #{}",
            self.schema.name,
            indexes.end - 1
        );
        let live: Vec<(&Key, &Record)> = live.iter().flatten().map(|(k, r)| (k, r)).collect();
        for i in indexes {
            self.secondary[i].load_sorted(vec![self.secondary_entries(i, &live, keys)]);
        }
    }

    /// Inserts into every secondary index the entries of `live`, the table's present rows, or,
    /// if `alone` (no other thread uses the table's indexes meanwhile), loads them in one go
    /// ([`OrderedIndex::load_sorted`]).
    fn build_secondary_indexes<'a>(
        &self,
        live: impl Iterator<Item = (&'a Key, &'a Record)>,
        alone: bool,
        keys: EntryKeys,
    ) {
        if self.secondary.is_empty() {
            return;
        }
        let live: Vec<(&Key, &Record)> = live.collect();
        for (i, index) in self.secondary.iter().enumerate() {
            let entries = self.secondary_entries(i, &live, keys);
            if alone {
                index.load_sorted(vec![entries]);
            } else {
                for (entry, record) in entries.into_entries() {
                    let _ = index.insert_if_absent(entry, record);
                }
            }
        }
    }

    /// Secondary index `index`'s entries for the present rows `live`, in order. Entries go into an
    /// index in key order: every insert then lands next to the previous one, in cache, instead
    /// of at a random leaf (the rows arrive in primary-key order, which is a random order for a
    /// secondary key). Each entry's count of its record is taken as the entries are made, in
    /// `live`'s order ([`gather_entries`]): taken after the sort, in secondary-key order, it was a
    /// miss per entry, 41–47 % of the samples of a 10-index rebuild (`docs/PERFORMANCE.md`,
    /// "Compiled replay", "Session 44"). Keys are made as `keys` says.
    fn secondary_entries(&self, index: usize, live: &[(&Key, &Record)], keys: EntryKeys) -> Run {
        let columns = &self.schema.indexes[index].columns;
        let fixed = match keys {
            EntryKeys::Specialized => self.schema.fixed_shape().and_then(|shape| shape.entry_key(columns)),
            EntryKeys::Generic => None,
        };
        let general = |row: &Row, primary: &Key| self.schema.secondary_key_of(index, row, primary).ok();
        // One loop per way of making a key, each compiled for its own: the general encoder's
        // loop is the one the rebuild had before entry keys were specialized.
        let entries = match fixed {
            Some(fixed) => gather_entries(live, columns, |row, primary| {
                let specialized = fixed.entry(row, primary.as_bytes());
                debug_assert!(
                    specialized.is_none() || specialized == general(row, primary),
                    "a specialized entry key differs"
                );
                specialized.or_else(|| general(row, primary))
            }),
            None => gather_entries(live, columns, general),
        };
        match super::key::permuted_by_varying_bytes(vec![entries], |(entry, _)| entry.as_bytes()) {
            Ok(permuted) => Run::Permuted(permuted),
            Err(mut lists) => {
                let mut entries = lists.pop().unwrap_or_default();
                super::key::sort_by_head_words(&mut entries, |(entry, _)| entry.as_bytes());
                Run::Sorted(entries)
            }
        }
    }

    /// Number of present rows (counts index entries, so exact only when no writer runs).
    pub fn len(&self) -> usize {
        self.point.len()
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How many entries ahead a secondary index's build prefetches a row (and twice that, its
/// record): a handful of the core's line fill buffers, as the point index's rebuild does.
const SECONDARY_PREFETCH_AHEAD: usize = 8;

/// A secondary index's entries for the present rows `live`, in their order, each key made by
/// `entry` from the row and its primary key (`None`: a row the index cannot hold, a key over the
/// size limit, which recovery leaves out as inserting would have refused it). Each entry's count
/// of its record is taken here, in `live`'s order, where the record was prefetched.
#[inline(always)]
fn gather_entries(
    live: &[(&Key, &Record)],
    columns: &[usize],
    entry: impl Fn(&Row, &Key) -> Option<Key>,
) -> Vec<Entry> {
    let mut entries = Vec::with_capacity(live.len());
    for (j, &(key, record)) in live.iter().enumerate() {
        // Each entry reads its record and then its row, a miss each: both are prefetched some
        // entries ahead, the record first, so that the misses overlap.
        if let Some((_, ahead)) = live.get(j + 2 * SECONDARY_PREFETCH_AHEAD) {
            super::prefetch::prefetch_line(Record::as_ptr(ahead));
        }
        if let Some((_, ahead)) = live.get(j + SECONDARY_PREFETCH_AHEAD) {
            ahead.prefetch_row_columns(columns.iter().copied());
        }
        if let Some(entry) = entry(&record.row_unchecked(), key) {
            entries.push((entry, Record::clone(record)));
        }
    }
    entries
}

/// How a secondary index's rebuild makes its entries' keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EntryKeys {
    /// The schema's general encoder ([`TableSchema::secondary_key_of`]): each indexed value read
    /// from the row and encoded by its kind. Direct replay's, the thesis's baseline.
    #[default]
    Generic,
    /// Specialized to the table where its rows have one shape ([`super::row::FixedEntryKey`]: the indexed
    /// payloads read at fixed offsets and written into the key in place), the general encoder
    /// elsewhere. Compiled replay's (`docs/replay.md`, "Indexes").
    Specialized,
}

/// Tables with fewer rows than this build a deferred ordered index on one thread
/// ([`Table::finish_recovery_on`]): below it, starting threads costs more than it saves.
const DEFERRED_SPLIT_MIN_ROWS: usize = 100_000;

/// Runs `work` on each of `inputs`, each on a thread of its own (the first on the caller's), and
/// returns the results in order.
fn on_threads<I: Send, T: Send>(inputs: Vec<I>, work: impl Fn(I) -> T + Sync) -> Vec<T> {
    let mut inputs = inputs.into_iter();
    let Some(first) = inputs.next() else { return Vec::new() };
    std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = inputs.map(|input| scope.spawn(move || work(input))).collect();
        let mut results = vec![work(first)];
        results.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))));
        results
    })
}

/// An error while loading rows outside a transaction.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The row breaks the schema.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A row with this key exists.
    #[error("table {table}: duplicate primary key {key:?}")]
    DuplicateKey {
        /// The table.
        table: String,
        /// The encoded key.
        key: Key,
    },
}

/// The set of tables, immutable once built.
#[derive(Clone, Default)]
pub struct Catalog {
    version: u64,
    tables: Vec<Arc<Table>>,
    by_name: HashMap<String, TableId>,
}

/// A DDL statement that cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The name is taken.
    #[error("table {0} already exists")]
    TableExists(String),
    /// Too many tables.
    #[error("a database holds at most {TABLES_MAX} tables")]
    TooManyTables,
    /// The schema is invalid.
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

impl Catalog {
    /// The catalog's version: bumped by every DDL change.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// A new catalog with `schema` added as a new, empty table.
    pub fn with_table(&self, schema: TableSchema, backend: IndexBackend) -> Result<Catalog, CatalogError> {
        let name = schema.name.to_ascii_lowercase();
        if self.by_name.contains_key(&name) {
            return Err(CatalogError::TableExists(schema.name));
        }
        if self.tables.len() >= TABLES_MAX {
            return Err(CatalogError::TooManyTables);
        }
        let id = self.tables.len() as TableId;
        let table = Table::new(id, schema, backend)?;
        let mut tables = self.tables.clone();
        tables.push(Arc::new(table));
        let mut by_name = self.by_name.clone();
        by_name.insert(name, id);
        Ok(Catalog { version: self.version + 1, tables, by_name })
    }

    /// The table with id `id`.
    pub fn table(&self, id: TableId) -> Option<&Arc<Table>> {
        self.tables.get(id as usize)
    }

    /// The table called `name` (case-insensitive).
    pub fn table_by_name(&self, name: &str) -> Option<&Arc<Table>> {
        self.by_name.get(&name.to_ascii_lowercase()).and_then(|&id| self.table(id))
    }

    /// All tables, in id order.
    pub fn tables(&self) -> &[Arc<Table>] {
        &self.tables
    }
}

/// Installs `row` (a deletion for `None`) on `record` if `tid` is larger than its TID; whether it
/// did ([`Table::install_if_newer`]).
fn install_on(record: &Record, row: Option<Row>, tid: Tid) -> bool {
    let word = record.lock();
    if tid <= word.tid() {
        record.unlock();
        return false;
    }
    let absent = row.is_none();
    let row = row.unwrap_or_else(Row::empty);
    let word = crate::txn::tid::TidWord::new(tid, true, absent);
    if super::retire::replaced_rows_unread() {
        // No reader can reach the replaced row: it is dropped soon, its memory prefetched now.
        super::retire::retire_row(record.install_returning_old(row, word));
    } else {
        record.install(row, word, 0);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::schema::Column;
    use crate::storage::value::{ColumnType, Value, ValueRef};

    fn table() -> Table {
        let column = |name: &str, ty| Column { name: name.into(), ty, nullable: false };
        let schema = TableSchema {
            name: "t".into(),
            columns: vec![column("k", ColumnType::Int), column("v", ColumnType::Int), column("w", ColumnType::Text)],
            primary_key: vec![0],
            indexes: Vec::new(),
        };
        Table::new(0, schema, IndexBackend::default()).unwrap()
    }

    /// `table()` with a secondary index on `v`.
    fn indexed_table() -> Table {
        let mut t = table();
        t.schema.indexes = vec![crate::storage::schema::IndexSchema { name: "by_v".into(), columns: vec![1] }];
        Table::new(0, t.schema, IndexBackend::default()).unwrap()
    }

    /// Every entry of `index`, in order, with its record's row.
    fn scan_all(index: &dyn OrderedIndex) -> Vec<(Key, Row)> {
        let mut out = Vec::new();
        index.scan(&KeyRange::all(), super::super::index::Direction::Forward, usize::MAX, &mut |k, r| {
            out.push((Key::from(k), r.stable_read().1));
            true
        });
        out
    }

    /// A restore gate that counts what it is asked and restores nothing.
    #[derive(Default)]
    struct CountingGate {
        asked: std::sync::atomic::AtomicUsize,
    }

    impl RestoreGate for CountingGate {
        fn restore_key(&self, _: &Table, _: &[u8]) {
            self.asked.fetch_add(1, Ordering::SeqCst);
        }
        fn is_restored(&self, _: &Table, _: &[u8]) -> bool {
            self.asked.fetch_add(1, Ordering::SeqCst);
            false
        }
        fn wait_table(&self, _: &Table) {}
    }

    /// During a restore a key with a record is served without asking the gate (a record is only
    /// linked once its key is restored); a key without one asks it once per access.
    #[test]
    fn during_a_restore_only_keys_without_a_record_ask_the_gate() {
        let t = table();
        let key = crate::storage::key::encode_key(&[Value::Int(1)]).unwrap();
        let absent = crate::storage::key::encode_key(&[Value::Int(2)]).unwrap();
        let row = Row::new(vec![Value::Int(1), Value::Int(10), Value::text("w")]);
        assert!(t.restore_row(&key, row, Tid::new(1, 1)));
        let gate = Arc::new(CountingGate::default());
        t.begin_restore(Arc::clone(&gate) as Arc<dyn RestoreGate>);
        let asked = || gate.asked.load(Ordering::SeqCst);
        assert!(t.get(key.as_bytes()).is_some());
        assert!(t.is_restored(key.as_bytes()));
        t.ensure_restored(key.as_bytes());
        assert_eq!(asked(), 0, "a key with a record asked the gate");
        assert!(t.get(absent.as_bytes()).is_none());
        assert_eq!(asked(), 1, "a get of a key without a record asks the gate once");
        assert!(!t.is_restored(absent.as_bytes()), "the gate's answer is the table's");
        t.ensure_restored(absent.as_bytes());
        assert_eq!(asked(), 3);
        t.end_restore();
        assert!(t.is_restored(absent.as_bytes()) && t.get(absent.as_bytes()).is_none());
        assert_eq!(asked(), 3, "no gate after the restore");
    }

    /// Recovery with the ordered index deferred ends with the same primary and secondary indexes
    /// as recovery that links as it goes: the same keys in order, the same rows, tombstones
    /// swept; on one thread and split over threads (a table past `DEFERRED_SPLIT_MIN_ROWS`).
    #[test]
    fn a_deferred_ordered_index_is_built_at_the_finish_as_linking_builds_it() {
        use rand::{Rng, SeedableRng};
        for (rows, threads) in [(2_000, 1), (2 * DEFERRED_SPLIT_MIN_ROWS + 5_000, 3)] {
            let (deferred, linked) = (indexed_table(), indexed_table());
            deferred.defer_ordered_index();
            let mut rng = rand::rngs::StdRng::seed_from_u64(rows as u64);
            for n in 0..rows + rows / 4 {
                // Every key once, then random ones again (overwrites and deletes).
                let k = if n < rows { n as i64 } else { rng.random_range(0..rows as i64) };
                let key = deferred.schema.encode_primary_key(&[Value::Int(k)]).unwrap();
                let row =
                    rng.random_bool(0.8).then(|| Row::new(vec![Value::Int(k), Value::Int(k % 97), Value::text("w")]));
                let tid = Tid::new(1 + n as u64 / 1000, 1 + (n % 1000) as u64);
                assert_eq!(deferred.install_if_newer(&key, row.clone(), tid), linked.install_if_newer(&key, row, tid));
            }
            assert!(deferred.primary.is_empty(), "rows linked into the ordered index while it was deferred");
            deferred.finish_recovery_on(threads, EntryKeys::Specialized);
            linked.finish_recovery();
            assert!(!deferred.is_ordered_index_deferred());
            assert_eq!(deferred.len(), linked.len(), "{rows} rows: tombstones not swept alike");
            assert_eq!(scan_all(deferred.primary.as_ref()), scan_all(linked.primary.as_ref()));
            assert_eq!(scan_all(deferred.secondary[0].as_ref()), scan_all(linked.secondary[0].as_ref()));
            assert_eq!(scan_all(deferred.primary.as_ref()).len(), deferred.len());
        }
    }

    /// Recovery's two rounds (tombstones swept by key range, then each secondary index loaded
    /// from every range's live records) end with the indexes that sweeping and inserting range
    /// by range gives, for every secondary index and however the key space is split.
    #[test]
    fn secondary_indexes_loaded_from_swept_ranges_hold_what_inserting_gives() {
        use rand::{Rng, SeedableRng};
        let two_indexes = || {
            let mut t = table();
            t.schema.indexes = vec![
                crate::storage::schema::IndexSchema { name: "by_v".into(), columns: vec![1] },
                crate::storage::schema::IndexSchema { name: "by_w_v".into(), columns: vec![2, 1] },
            ];
            Table::new(0, t.schema, IndexBackend::default()).unwrap()
        };
        for parts in [1, 3] {
            let (loaded, inserted) = (two_indexes(), two_indexes());
            let mut rng = rand::rngs::StdRng::seed_from_u64(parts as u64);
            for n in 0..5_000u64 {
                let k = if n < 4_000 { n as i64 } else { rng.random_range(0..4_000) };
                let key = loaded.schema.encode_primary_key(&[Value::Int(k)]).unwrap();
                let w = if k % 3 == 0 { "a" } else { "b" };
                let row =
                    rng.random_bool(0.8).then(|| Row::new(vec![Value::Int(k), Value::Int(k % 97), Value::text(w)]));
                let tid = Tid::new(1, 1 + n);
                assert_eq!(loaded.install_if_newer(&key, row.clone(), tid), inserted.install_if_newer(&key, row, tid));
            }
            let ranges = loaded.split_key_space(parts);
            let live: Vec<Vec<Entry>> = ranges.iter().map(|r| loaded.sweep_recovery_range(r)).collect();
            assert_eq!(live.iter().map(Vec::len).sum::<usize>(), loaded.len(), "tombstones swept, the rest gathered");
            for i in 0..loaded.secondary.len() {
                assert!(loaded.secondary[i].is_empty(), "index {i} filled before its load");
                loaded.load_secondary_indexes(i..i + 1, &live, EntryKeys::Specialized);
            }
            for range in inserted.split_key_space(parts) {
                inserted.finish_recovery_range(&range, EntryKeys::Generic);
            }
            assert_eq!(loaded.len(), inserted.len());
            assert_eq!(scan_all(loaded.primary.as_ref()), scan_all(inserted.primary.as_ref()));
            for i in 0..2 {
                let (l, r) = (scan_all(loaded.secondary[i].as_ref()), scan_all(inserted.secondary[i].as_ref()));
                assert_eq!(l.len(), loaded.len(), "{parts} parts: index {i} has an entry per live row");
                assert_eq!(l, r, "{parts} parts: index {i}");
            }
        }
    }

    fn set_v(v: i64) -> impl Fn(&mut InPlaceRow) -> Result<Option<Row>, &'static str> {
        move |row| {
            if row.set(1, ValueRef::Int(v)) {
                return Ok(None);
            }
            Ok(Some(row.row().with_changes(std::iter::once((1, ValueRef::Int(v))))))
        }
    }

    #[test]
    fn a_replaced_row_goes_to_the_ring_only_on_a_thread_that_declares_it_unread() {
        let t = table();
        let key = Key::from(&b"k1"[..]);
        let row = |v: i64| Some(Row::new(vec![Value::Int(1), Value::Int(v), Value::text("w")]));
        super::super::retire::drop_retired();
        assert!(t.install_if_newer(&key, row(1), Tid::new(1, 1)));
        assert!(t.install_if_newer(&key, row(2), Tid::new(2, 1)));
        assert_eq!(super::super::retire::retired_len(), 0, "to the epoch collector");
        let unread = super::super::retire::ReplacedRowsUnread::enter();
        assert!(t.install_if_newer(&key, row(3), Tid::new(3, 1)));
        assert!(!t.install_if_newer(&key, row(9), Tid::new(2, 5)), "an older TID replaces nothing");
        assert_eq!(super::super::retire::retired_len(), 1, "to the ring");
        drop(unread);
        assert_eq!(super::super::retire::retired_len(), 0);
        assert_eq!(t.get(&key).unwrap().stable_read().1.at(1), Value::Int(3));
    }

    #[test]
    fn edit_if_newer_applies_newer_edits_in_place_or_on_a_copy_and_refuses_a_missing_row() {
        let t = table();
        let key = Key::from(&b"k1"[..]);
        let row = Row::new(vec![Value::Int(1), Value::Int(10), Value::text("kept")]);
        assert!(t.install_if_newer(&key, Some(row.clone()), Tid::new(2, 1)));
        let address = |t: &Table| t.get(&key).map(|r| r.row_unchecked().as_ptr() as usize);
        // `row` is still held here: the edit goes to a copy and `row` is unchanged.
        assert_eq!(t.edit_if_newer(&key, Tid::new(2, 2), set_v(11)), Ok(true));
        assert_eq!(row.at(1), Value::Int(10));
        assert_ne!(address(&t), Some(row.as_ptr() as usize));
        drop(row);
        // Now the record holds its row alone: edited in place.
        let before = address(&t);
        assert_eq!(t.edit_if_newer(&key, Tid::new(3, 1), set_v(12)), Ok(true));
        assert_eq!(address(&t), before, "edited where it lies");
        // An older or equal TID leaves the row as it is.
        assert_eq!(t.edit_if_newer(&key, Tid::new(3, 1), set_v(99)), Ok(false));
        assert_eq!(t.edit_if_newer(&key, Tid::new(2, 5), set_v(99)), Ok(false));
        let record = t.get(&key).unwrap();
        let (word, now) = record.stable_read();
        assert_eq!(
            (word.tid(), now.to_vec()),
            (Tid::new(3, 1), vec![Value::Int(1), Value::Int(12), Value::text("kept")])
        );
        // A failing edit changes nothing.
        let fail = |_: &mut InPlaceRow| Err("refused");
        assert_eq!(t.edit_if_newer(&key, Tid::new(4, 1), fail), Err("refused"));
        assert_eq!(record.stable_read().0.tid(), Tid::new(3, 1));
        // No row: a key never written, or a deleted one.
        assert!(t.edit_if_newer(&Key::from(&b"k2"[..]), Tid::new(5, 1), set_v(1)).is_err());
        assert!(t.install_if_newer(&key, None, Tid::new(5, 1)));
        assert!(t.edit_if_newer(&key, Tid::new(6, 1), set_v(1)).is_err());
    }
}
