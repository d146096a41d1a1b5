//! Multi-version records for Taurus command replay (Taurus §5.2, garbage collection §5.3).
//!
//! Command replay re-executes logged transactions on many threads, each once its RAW and WAW
//! predecessors are replayed. Without more, a transaction `W` that overwrites a record could run
//! before an earlier transaction `R` (smaller commit timestamp) that read the version `W`
//! replaces (a WAR dependency, which the log does not record). Instead of ordering `R` before
//! `W`, replay keeps the versions: `W` adds its version, and `R` reads *the version with the
//! largest commit timestamp smaller than its own* (§5.2's timestamp rule; Lazarus logs a commit
//! timestamp taken at the serialization point).
//!
//! # Why that version is the one `R` read when it ran
//!
//! The timestamp is taken after the lock phase and before validation
//! (`Transaction::commit`). If `W` wrote a record `R` read and `ts(W) < ts(R)`, `W` locked the
//! record before `ts(W)`, so `R` validated after `W` locked it: `R` either saw `W`'s version or
//! aborted. If `ts(W) > ts(R)`, `R` validated the version before `W`'s. So the version `R` read
//! is the one of the largest timestamp below `ts(R)`, and its writer is `R`'s RAW predecessor,
//! replayed before `R`. A key `R` found missing is the same case with an absent version: an
//! insert by a later transaction adds a version `R` does not see; a delete by an earlier one is
//! ordered before `R` by the delete chain (`crate::durability::taurus`).
//!
//! # What the store holds
//!
//! Versions live beside the records, not in them: a record that no replayed transaction wrote
//! has none, and readers take its current row. The first write of a record adds the row it held
//! before (visible to every reader) and then its own. Readers look at the record first and the
//! store second, and writers add a version and install the row in the record under the shard's
//! mutex, so a reader that saw the new row also finds its version.
//!
//! Versions are kept in timestamp order whatever order they come in, and only the newest is
//! installed in the record: a lost WAW predecessor (WAW is not a commit condition) leaves two
//! writers of a record unordered by the graph, and the larger timestamp must win, as the largest
//! TID wins in data replay.
//!
//! During versioned replay deletes leave their records linked (absent) and updates leave the
//! secondary entries of the rows they replace, so that an earlier reader still finds the
//! version by key or by index; [`VersionStore::finish`] removes them when replay ends.
//!
//! # Garbage collection (§5.3)
//!
//! The paper logs a *sync timestamp* (the smallest commit timestamp of the transactions then
//! running) for this; recovery here knows every logged transaction's timestamp, so it computes
//! the bound directly. The *watermark* is the smallest commit timestamp not yet replayed: every
//! later reader reads at or above it, so in each record only the newest version visible at the
//! watermark and the ones after it can still be read. Adding a version prunes the older ones;
//! [`VersionStore::collect`] prunes a shard and drops records left with one version older than
//! the watermark (that version is the record's current row). Without collection the store
//! would hold at most one version per write of the generation plus one per record written,
//! and a generation is bounded (`GRAPH_TXNS_MAX` transactions of at most `writes_max` writes);
//! `lazarus recover` prints what was left when replay ended.

use crate::storage::key::Key;
use crate::storage::record::Record;
use crate::storage::table::{Catalog, Table};
use crate::storage::{Row, TableId};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shards of the version map: writers and readers of different records rarely share a mutex.
const SHARDS: usize = 64;

/// A replayed transaction's view: the store and its commit timestamp.
#[derive(Clone)]
pub struct Snapshot {
    /// The versions of the records replay wrote.
    pub store: Arc<VersionStore>,
    /// The transaction's commit timestamp.
    pub ts: u64,
}

/// One version: visible to readers whose timestamp is at least `visible_from` (the writer's
/// timestamp plus one; 0 for the row a record held before replay wrote it).
struct Version {
    visible_from: u64,
    /// `None`: the record was absent in this version.
    row: Option<Row>,
}

/// The versions of one record, oldest first.
struct Chain {
    /// Held so that the record, whose address keys the chain, outlives it.
    _record: Record,
    versions: Vec<Version>,
}

impl Chain {
    /// Drops the versions no reader at or above `watermark` can see.
    fn prune(&mut self, watermark: u64) {
        let visible = self.versions.iter().rposition(|v| v.visible_from <= watermark).unwrap_or(0);
        if visible > 0 {
            self.versions.drain(..visible);
        }
    }
}

type Shard = HashMap<usize, Chain, foldhash::fast::RandomState>;

/// A secondary entry or a deleted record left in place during replay, removed by
/// [`VersionStore::finish`] unless the record's final row still needs it.
struct Stale {
    table: TableId,
    key: Key,
    record: Record,
    /// The row the write replaced.
    old: Row,
}

/// The versions of the records written during one versioned replay.
pub struct VersionStore {
    shards: Box<[Mutex<Shard>]>,
    watermark: AtomicU64,
    stale: Mutex<Vec<Stale>>,
    next_shard: AtomicUsize,
}

impl Default for VersionStore {
    fn default() -> VersionStore {
        VersionStore::new()
    }
}

impl VersionStore {
    /// An empty store whose watermark is 0 (nothing replayed).
    pub fn new() -> VersionStore {
        VersionStore {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            watermark: AtomicU64::new(0),
            stale: Mutex::new(Vec::new()),
            next_shard: AtomicUsize::new(0),
        }
    }

    fn shard(&self, address: usize) -> &Mutex<Shard> {
        // Records are 8-byte aligned and allocated close together: mix the address.
        let mixed = (address as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        &self.shards[mixed as usize % SHARDS]
    }

    /// The row a reader at `ts` sees in `record`: `None` if replay has not written the record
    /// (the record's current row is the answer), else the version (`Some(None)`: absent).
    /// The caller must have read the record before calling (see the module docs).
    pub fn visible(&self, record: &Record, ts: u64) -> Option<Option<Row>> {
        let address = Record::as_ptr(record) as usize;
        let shard = self.shard(address).lock();
        let chain = shard.get(&address)?;
        let version = chain.versions.iter().rev().find(|v| v.visible_from <= ts);
        Some(version.and_then(|v| v.row.clone()))
    }

    /// Adds the version `row` written by the transaction at `ts` to `record`, whose row before
    /// replay first wrote it is `current` (`None`: absent), and calls `install(newest)` while no
    /// other version can be added to the record: `newest` says whether this is the record's
    /// newest version, which the caller then installs in the record. Versions are kept in
    /// timestamp order whatever order they come in: a WAW predecessor that was lost leaves
    /// two writers of a record unordered, and the larger timestamp must win, as the largest TID
    /// wins in data replay.
    pub fn add_version(
        &self,
        record: &Record,
        current: Option<Row>,
        ts: u64,
        row: Option<Row>,
        install: impl FnOnce(bool),
    ) {
        let address = Record::as_ptr(record) as usize;
        let watermark = self.watermark.load(Ordering::Acquire);
        let mut shard = self.shard(address).lock();
        let chain = shard.entry(address).or_insert_with(|| {
            // Most records get one version in replay before collection drops them: room for it
            // and the row before saves a reallocation per record.
            let mut versions = Vec::with_capacity(2);
            versions.push(Version { visible_from: 0, row: current });
            Chain { _record: Record::clone(record), versions }
        });
        chain.prune(watermark);
        let at = chain.versions.partition_point(|v| v.visible_from <= ts);
        chain.versions.insert(at, Version { visible_from: ts + 1, row });
        install(at + 1 == chain.versions.len());
    }

    /// Remembers a replaced row whose secondary entries (or, for a delete, whose record) stay in
    /// the indexes until [`VersionStore::finish`].
    pub fn note_stale(&self, table: TableId, key: &Key, record: &Record, old: Row) {
        self.stale.lock().push(Stale { table, key: key.clone(), record: Record::clone(record), old });
    }

    /// Every commit timestamp below `ts` is replayed.
    pub fn set_watermark(&self, ts: u64) {
        self.watermark.fetch_max(ts, Ordering::AcqRel);
    }

    /// The current watermark.
    pub fn watermark(&self) -> u64 {
        self.watermark.load(Ordering::Acquire)
    }

    /// Prunes the next shard (round robin) by the watermark and drops the records left with a
    /// single version below it.
    pub fn collect(&self) {
        let watermark = self.watermark();
        let n = self.next_shard.fetch_add(1, Ordering::Relaxed) % SHARDS;
        self.shards[n].lock().retain(|_, chain| {
            chain.prune(watermark);
            // A single version visible at the watermark is the record's current row: its
            // writer is replayed, and a later writer would have added a version.
            !(chain.versions.len() == 1 && chain.versions[0].visible_from <= watermark)
        });
    }

    /// Records with versions, and versions held (for tests and reports).
    pub fn sizes(&self) -> (usize, usize) {
        let mut sizes = (0, 0);
        for shard in self.shards.iter() {
            let shard = shard.lock();
            sizes.0 += shard.len();
            sizes.1 += shard.values().map(|c| c.versions.len()).sum::<usize>();
        }
        sizes
    }

    /// Replay is over: drops every version and removes from the indexes what replay left for
    /// earlier readers: the records deletes left absent and the secondary entries of replaced
    /// rows that the record's final row does not have.
    pub fn finish(&self, catalog: &Catalog) {
        for shard in self.shards.iter() {
            shard.lock().clear();
        }
        let stale = std::mem::take(&mut *self.stale.lock());
        for s in stale {
            let Some(t) = catalog.table(s.table) else { continue };
            remove_stale(t, &s);
        }
    }
}

/// Removes the secondary entries of `s.old` that the record's final row lacks, and the record
/// itself from the primary index if it ends absent.
fn remove_stale(t: &Table, s: &Stale) {
    let word = s.record.word();
    let current = (!word.is_absent()).then(|| s.record.row_unchecked());
    for (i, index) in t.secondary.iter().enumerate() {
        if current.as_ref().is_some_and(|new| t.schema.same_index_columns(i, &s.old, new)) {
            continue;
        }
        if let Ok(entry) = t.schema.secondary_key_of(i, &s.old, &s.key) {
            index.remove(&entry, &s.record);
        }
    }
    if current.is_none() {
        t.unlink(&s.key, &s.record);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::storage::{Value, ValueRef};
    use crate::txn::Tid;

    fn row(v: i64) -> Row {
        Row::new(vec![Value::Int(v)])
    }

    fn value(r: Option<Option<Row>>) -> Option<Option<i64>> {
        r.map(|r| {
            r.map(|r| match r.get(0) {
                Some(ValueRef::Int(v)) => v,
                other => panic!("unexpected {other:?}"),
            })
        })
    }

    /// account(id, owner, balance) with a secondary index on owner, loaded with ids 0..4
    /// (owner = id, balance 100) before replay.
    pub(crate) fn accounts() -> (crate::Database, TableId) {
        use crate::storage::{Column, ColumnType, IndexSchema, TableSchema};
        let db = crate::Database::open(crate::DatabaseConfig::default()).unwrap();
        let col = |name: &str| Column { name: name.into(), ty: ColumnType::Int, nullable: false };
        let schema = TableSchema {
            name: "account".into(),
            columns: vec![col("id"), col("owner"), col("balance")],
            primary_key: vec![0],
            indexes: vec![IndexSchema { name: "by_owner".into(), columns: vec![1] }],
        };
        let t = db.create_table(schema).unwrap();
        let mut w = db.worker();
        let mut tx = w.begin();
        for id in 0..4 {
            tx.insert(t, ints(&[id, id, 100])).unwrap();
        }
        tx.commit().unwrap();
        (db, t)
    }

    fn begin_at(w: &mut crate::db::Worker, snapshot: Snapshot) -> crate::txn::Transaction<'_> {
        let mut tx = w.begin();
        tx.set_snapshot(snapshot);
        tx
    }

    pub(crate) fn ints(values: &[i64]) -> Row {
        Row::new(values.iter().map(|&v| Value::Int(v)).collect())
    }

    fn owners(rows: Vec<Row>) -> Vec<(i64, i64)> {
        rows.iter().map(|r| (r.at(0).as_int().unwrap(), r.at(1).as_int().unwrap())).collect()
    }

    /// Each writer below replays *before* a reader with a smaller timestamp, which a replay
    /// without versions would let read the writer's row (a WAR dependency without an edge).
    #[test]
    fn a_replayed_reader_sees_the_versions_below_its_timestamp_whatever_ran_first() {
        use crate::storage::{Direction, KeyRange};
        let (db, t) = accounts();
        let store = Arc::new(VersionStore::new());
        let at = |ts: u64| Snapshot { store: Arc::clone(&store), ts };
        let mut w = db.replay_worker();
        let by_owner = |owner: i64| crate::txn::Scan {
            table: t,
            index: Some(0),
            range: KeyRange::from_values(&[Value::Int(owner)], std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                .unwrap(),
            direction: Direction::Forward,
            limit: 10,
        };
        // ts 20: account 1 moves to owner 9, account 2 is deleted, account 7 is inserted;
        // ts 25 and 21: two blind writes of account 3, the later one first.
        let mut tx = begin_at(&mut w, at(20));
        assert!(tx.update(t, ints(&[1, 9, 100])).unwrap());
        assert!(tx.delete(t, &[Value::Int(2)]).unwrap());
        tx.insert(t, ints(&[7, 7, 700])).unwrap();
        tx.commit().unwrap();
        for (ts, balance) in [(25, 325), (21, 321)] {
            let mut tx = begin_at(&mut w, at(ts));
            tx.put(t, ints(&[3, 3, balance])).unwrap();
            tx.commit().unwrap();
        }
        // ts 10 sees the state before all of it, by key and by index.
        let mut tx = begin_at(&mut w, at(10));
        assert_eq!(owners(tx.scan(&by_owner(1)).unwrap()), [(1, 1)], "the entry the move left");
        assert!(tx.scan(&by_owner(9)).unwrap().is_empty(), "the entry the move added");
        assert!(tx.get(t, &[Value::Int(2)]).unwrap().is_some(), "deleted at 20");
        assert!(tx.get(t, &[Value::Int(7)]).unwrap().is_none(), "inserted at 20");
        assert_eq!(tx.get(t, &[Value::Int(3)]).unwrap().unwrap().at(2).as_int(), Some(100));
        tx.commit().unwrap();
        // ts 22 sees ts 20 and 21.
        let mut tx = begin_at(&mut w, at(22));
        assert_eq!(owners(tx.scan(&by_owner(9)).unwrap()), [(1, 9)]);
        assert!(tx.scan(&by_owner(1)).unwrap().is_empty());
        assert!(tx.get(t, &[Value::Int(2)]).unwrap().is_none());
        assert_eq!(tx.get(t, &[Value::Int(3)]).unwrap().unwrap().at(2).as_int(), Some(321));
        tx.commit().unwrap();
        // After replay: the newest versions, and no entry or record left for earlier readers.
        store.finish(&db.catalog());
        let mut w = db.worker();
        let mut tx = w.begin();
        assert!(tx.scan(&by_owner(1)).unwrap().is_empty());
        assert_eq!(owners(tx.scan(&by_owner(9)).unwrap()), [(1, 9)]);
        assert_eq!(
            tx.get(t, &[Value::Int(3)]).unwrap().unwrap().at(2).as_int(),
            Some(325),
            "the larger timestamp wins"
        );
        let all = tx.scan(&crate::txn::Scan { index: None, range: KeyRange::all(), ..by_owner(0) }).unwrap();
        assert_eq!(owners(all), [(0, 0), (1, 9), (3, 3), (7, 7)]);
        tx.commit().unwrap();
        let catalog = db.catalog();
        let table = catalog.table(t).unwrap();
        assert!(table.get(&table.schema.encode_primary_key(&[Value::Int(2)]).unwrap()).is_none(), "unlinked");
        let mut entries = 0;
        table.secondary[0].scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |_, _| {
            entries += 1;
            true
        });
        assert_eq!(entries, 4, "one entry per present row");
    }

    #[test]
    fn a_reader_sees_the_newest_version_below_its_timestamp() {
        let store = VersionStore::new();
        let record = Record::present(&b"k"[..], row(0), Tid::ZERO, 0);
        assert_eq!(value(store.visible(&record, 5)), None, "no version before a write");
        // Out of order: 30 comes first, then 10 and 20 (not the newest: not installed).
        let mut newest = Vec::new();
        store.add_version(&record, Some(row(0)), 30, Some(row(30)), |n| newest.push(n));
        store.add_version(&record, Some(row(30)), 10, Some(row(10)), |n| newest.push(n));
        store.add_version(&record, Some(row(30)), 20, None, |n| newest.push(n));
        assert_eq!(newest, [true, false, false]);
        assert_eq!(value(store.visible(&record, 0)), Some(Some(0)));
        assert_eq!(value(store.visible(&record, 10)), Some(Some(0)), "its own timestamp is not below it");
        assert_eq!(value(store.visible(&record, 11)), Some(Some(10)));
        assert_eq!(value(store.visible(&record, 25)), Some(None), "deleted at 20");
        assert_eq!(value(store.visible(&record, 31)), Some(Some(30)));
    }

    #[test]
    fn versions_below_the_watermark_are_pruned_except_the_one_it_sees() {
        let store = VersionStore::new();
        let record = Record::present(&b"k"[..], row(0), Tid::ZERO, 0);
        store.add_version(&record, Some(row(0)), 10, Some(row(10)), |_| ());
        store.add_version(&record, Some(row(10)), 20, Some(row(20)), |_| ());
        assert_eq!(store.sizes(), (1, 3));
        store.set_watermark(15);
        store.add_version(&record, Some(row(20)), 30, Some(row(30)), |_| ());
        // Readers at 15 and above never see the first version.
        assert_eq!(store.sizes(), (1, 3));
        assert_eq!(value(store.visible(&record, 15)), Some(Some(10)));
        for _ in 0..SHARDS {
            store.collect();
        }
        assert_eq!(store.sizes(), (1, 3), "versions newer than the watermark stay");
        store.set_watermark(31);
        for _ in 0..SHARDS {
            store.collect();
        }
        assert_eq!(store.sizes(), (0, 0), "one version below the watermark is the record's row");
        assert_eq!(value(store.visible(&record, 40)), None);
    }
}
