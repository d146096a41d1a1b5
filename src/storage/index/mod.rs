//! Concurrent ordered indexes behind one small trait.
//!
//! Silo stores each table in one primary tree and each secondary index in another (SiloR §2).
//! Here every tree is an [`OrderedIndex`] from encoded keys (see [`crate::storage::key`]) to
//! `Record`. The engine needs exactly: point get, insert-if-absent, remove-if-it-is-this-record,
//! and a bounded range scan forward or backward. Keeping the trait this small lets the backend be
//! swapped and benchmarked (`benches/index.rs`).
//!
//! Contract every backend keeps:
//! - Operations are linearizable: once `insert_if_absent` returns, every later `get` or `scan`
//!   on any thread sees the entry, until a `remove` of it returns. Phantom protection
//!   (see [`crate::txn`]) relies on this.
//! - `scan` visits keys in strictly increasing (forward) or decreasing (backward) order, each at
//!   most once, and stops after `limit` visits or when the visitor returns `false`. It need not be
//!   a snapshot: entries inserted or removed during the scan may or may not be seen.
//! - No operation blocks indefinitely on another thread's scan. This is stronger than it looks:
//!   the engine's scan visitors call `Record::stable_read`, which spins while a record is locked,
//!   and committing writers hold record locks while they insert into and remove from indexes. A
//!   backend that holds a lock across the visitor (the locked B-tree's read lock, ferntree's leaf
//!   latch) can therefore deadlock a scanner with a committer: the scanner waits for the record,
//!   the committer for the index. `contract_tests::check_scan_does_not_block_writers` shows it;
//!   only the lock-free backends pass.
//! - A visitor must not write to the index it is scanning.
//! - `scan_versioned` is `scan` that may also record the versions of the nodes it read (Silo's
//!   *node set*, §4.6): a backend that records them promises that while none of those versions
//!   has changed ([`OrderedIndex::unchanged_since`]) no entry has been inserted into or removed
//!   from the part of the range the scan covered. Phantom protection then checks the versions
//!   instead of scanning again. A backend without versions records nothing and says so.
//!
//! # Backends, and the choice of the default
//!
//! | backend | reads | writes | scans | notes |
//! |---|---|---|---|---|
//! | [`btree::LockedBTree`] | shared lock | exclusive lock on the whole map | lock held across the visitor | baseline |
//! | [`olc_tree::OlcTree`] (default) | no lock (validated versions) | CAS-lock one node (and its parent to split) | no lock | written for Lazarus |
//! | [`scc_tree::SccTree`] | no lock (epoch) | lock on one leaf | no lock | two crate bugs worked around |
//! | [`skiplist::SkipListIndex`] | lock-free | lock-free | lock-free; backward = one search per step | |
//! | [`fern_tree::FernTree`] | optimistic, no lock | leaf latch + key stripe | shared leaf latch across the visitor | beta crate |
//!
//! Measured with `cargo bench --bench index` at 1M keys on a 2-core machine (numbers and ratios
//! in `docs/PERFORMANCE.md`, "Ordered index backends" and "The OLC tree"): on two cores the
//! locked B-tree is the fastest or tied almost everywhere (an uncontended `BTreeMap` is hard to
//! beat), which does not make it usable (below).
//!
//! The default is [`IndexBackend::OlcTree`], Lazarus's own B+tree with optimistic lock coupling
//! (session 21; `scc` before it):
//! - **Liveness.** Only the lock-free backends keep the "never blocks on a scan" rule with the
//!   engine's visitors (above). With the locked B-tree a scan that meets a record locked by a
//!   committing transaction can deadlock with it. The OLC tree's scans copy a leaf's slots under
//!   a validated version and visit them holding nothing.
//! - **Read scalability.** Silo's design point is many cores with read-mostly trees. An `RwLock`
//!   read acquisition writes the lock word, so every reader on every core bounces one cache line,
//!   and a writer stalls all readers of the table. OLC (like `scc`) readers write nothing shared
//!   and writers lock single nodes. On two cores this cannot show; it is the property the engine
//!   is built for.
//! - **Against `scc`**, measured side by side: TPC-C 1.09× (1 thread) and 1.12× (2 threads),
//!   `taurus-data` TPC-C log replay 1.13×, inserts 0.79× the time; gets about equal; random
//!   50-key scans 1.2-1.4× slower in the benchmark, which reads only keys (a secondary index's
//!   key lives behind a pointer; a primary index points straight at records, which a real scan
//!   reads anyway). And no crate bugs to work around: `scc` 3.8.8 needs two (below).
//!
//! `ferntree` would be another candidate (optimistic reads, competitive gets), but it is labelled
//! beta, its scans hold a leaf latch across the visitor (the liveness problem again, on one leaf),
//! and version 0.7 needed two workarounds of its own (see [`fern_tree`]). The skip list is correct
//! but the slowest everywhere. The locked B-tree stays as the reference implementation and for
//! A/B runs (`IndexBackend::from_name("locked-btree")`), `scc` for A/B runs against the OLC tree.
//!
//! `scc` 3.8.8 needs two workarounds, both in [`scc_tree`] and both covered by tests: a range whose
//! lower bound is below the smallest key (or, backward, whose upper bound is above the largest)
//! takes time superlinear in the tree size inside the crate (4 ms at 10k keys, 0.9 s at 100k, 8 s
//! at 200k; minutes at 1M), so the bound is dropped when it lies outside the keys; and `range`
//! with an unbounded near side returns nothing once removals emptied the edge leaf, so those
//! scans use `iter()` instead.

pub mod btree;
pub mod fern_tree;
pub mod olc_tree;
pub mod scc_tree;
pub mod skiplist;

use crate::storage::key::Key;
use crate::storage::record::Record;
use std::ops::Bound;

/// Direction of a range scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending key order.
    Forward,
    /// Descending key order.
    Backward,
}

/// A range of encoded keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// Lower bound.
    pub start: Bound<Key>,
    /// Upper bound.
    pub end: Bound<Key>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange { start: Bound::Unbounded, end: Bound::Unbounded }
    }

    /// Whether `key` lies inside the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => key >= s.as_ref(),
            Bound::Excluded(s) => key > s.as_ref(),
            Bound::Unbounded => true,
        };
        // A key below the range (a scan's check of the transaction's earlier writes, mostly)
        // needs no second comparison.
        after_start
            && match &self.end {
                Bound::Included(e) => key <= e.as_ref(),
                Bound::Excluded(e) => key < e.as_ref(),
                Bound::Unbounded => true,
            }
    }

    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: &[u8]) -> KeyRange {
        let start = Bound::Included(Key::from(prefix));
        let end = match crate::storage::key::prefix_successor(prefix) {
            Some(succ) => Bound::Excluded(Key::from(succ)),
            None => Bound::Unbounded,
        };
        KeyRange { start, end }
    }
}

/// The visitor a scan calls for each entry; returning `false` stops the scan.
pub type ScanVisitor<'a> = dyn FnMut(&[u8], &Record) -> bool + 'a;

/// A node a versioned scan read, and its version then ([`OrderedIndex::scan_versioned`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeVersion {
    /// The node's address (only compared and, by its own index, read back under an epoch pin).
    pub(crate) node: usize,
    /// Its version word when the scan read it.
    pub(crate) version: u64,
}

/// A concurrent ordered map from encoded keys to records. See the module docs for the contract.
pub trait OrderedIndex: Send + Sync {
    /// The record stored under `key`.
    fn get(&self, key: &[u8]) -> Option<Record>;

    /// Stores `record` under `key` unless an entry exists; returns the existing record if so.
    fn insert_if_absent(&self, key: Key, record: Record) -> Result<(), Record>;

    /// Removes the entry for `key` only if it points to `record` (pointer identity). Returns
    /// whether it removed something.
    fn remove(&self, key: &[u8], record: &Record) -> bool;

    /// Visits up to `limit` entries of `range` in `direction`.
    fn scan(&self, range: &KeyRange, direction: Direction, limit: usize, visit: &mut ScanVisitor<'_>);

    /// [`OrderedIndex::scan`], appending to `nodes` the version of every node whose entries it
    /// read (the leaves), so that [`OrderedIndex::unchanged_since`] can later tell that no entry
    /// was inserted into or removed from the range it covered. Returns whether it recorded them;
    /// a backend without node versions scans and returns `false` (the caller must scan again to
    /// check). The caller must stay pinned (`crossbeam_epoch`) from this call until it is done
    /// with `nodes`.
    fn scan_versioned(
        &self,
        range: &KeyRange,
        direction: Direction,
        limit: usize,
        visit: &mut ScanVisitor<'_>,
        nodes: &mut Vec<NodeVersion>,
    ) -> bool {
        let _ = nodes;
        self.scan(range, direction, limit, visit);
        false
    }

    /// Whether every node of `nodes`, recorded by this index's
    /// [`OrderedIndex::scan_versioned`], still has the version it had then (`false` also when a
    /// writer holds one locked now). `true` means no entry was inserted into or removed from the
    /// part of the range those scans covered, nor is being.
    ///
    /// # Safety
    ///
    /// The calling thread has stayed pinned to the epoch collector (`crossbeam_epoch::pin`)
    /// without a break since the scans that recorded `nodes`, so none of them has been freed.
    unsafe fn unchanged_since(&self, nodes: &[NodeVersion]) -> bool {
        let _ = nodes;
        false
    }

    /// Number of entries (may be approximate while writers run).
    fn len(&self) -> usize;

    /// Adds the entries of `runs`, none of whose keys is in the index yet: each run in strictly
    /// increasing key order, and every key of a run below every key of the next (both asserted).
    /// Recovery builds a table's indexes this way once its rows are in memory. No other thread may
    /// use the index meanwhile. This default inserts the entries one by one; a backend may build
    /// itself from them directly when it is empty (the runs, one per thread, in parallel).
    fn load_sorted(&self, runs: Vec<Run>) {
        check_sorted_runs(&runs);
        insert_runs(self, runs);
    }

    /// Whether the index has no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores each entry of `run` (keys in strictly increasing order, asserted) whose key has no
    /// entry, as one [`OrderedIndex::insert_if_absent`] each would, while other threads use the
    /// index; returns the positions in `run` of the entries refused, each with the record its key
    /// holds. The instant restore's walk links its images in key order: a backend may insert
    /// neighbouring keys with one descent. This default inserts one by one.
    fn insert_run_if_absent(&self, run: &[Entry]) -> Vec<(usize, Record)> {
        check_run(run);
        insert_run_one_by_one(self, run)
    }
}

/// Asserts what [`OrderedIndex::insert_run_if_absent`] requires of its run.
pub fn check_run(run: &[Entry]) {
    assert!(run.windows(2).all(|w| w[0].0 < w[1].0), "a run's keys are not increasing");
}

/// [`OrderedIndex::insert_run_if_absent`] by one insert per entry, of a run the caller has
/// checked ([`check_run`]).
pub fn insert_run_one_by_one<I: OrderedIndex + ?Sized>(index: &I, run: &[Entry]) -> Vec<(usize, Record)> {
    let inserted = run.iter().map(|(key, record)| index.insert_if_absent(key.clone(), Record::clone(record)));
    inserted.enumerate().filter_map(|(i, result)| result.err().map(|existing| (i, existing))).collect()
}

/// A key and its record, as [`OrderedIndex::load_sorted`] takes them.
pub type Entry = (Key, Record);

/// A run of entries in key order, as [`OrderedIndex::load_sorted`] takes them: a list sorted
/// already, or lists and the order to take their entries in, which spares a sorted copy of
/// them all ([`crate::storage::key::permuted_by_varying_bytes`]).
pub enum Run {
    /// Sorted in place.
    Sorted(Vec<Entry>),
    /// Taken in order from where they lie.
    Permuted(crate::storage::key::Permuted<Entry>),
}

impl From<Vec<Entry>> for Run {
    fn from(entries: Vec<Entry>) -> Run {
        Run::Sorted(entries)
    }
}

impl Run {
    /// Entries in the run.
    pub fn len(&self) -> usize {
        match self {
            Run::Sorted(entries) => entries.len(),
            Run::Permuted(entries) => entries.len(),
        }
    }

    /// Whether the run has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, in order, in place.
    pub fn iter(&self) -> Box<dyn Iterator<Item = &Entry> + '_> {
        match self {
            Run::Sorted(entries) => Box::new(entries.iter()),
            Run::Permuted(entries) => Box::new(entries.iter()),
        }
    }

    /// The entries in place, in no particular order (a permuted run's in its lists' order, read
    /// one after another).
    pub fn iter_unordered(&self) -> Box<dyn Iterator<Item = &Entry> + '_> {
        match self {
            Run::Sorted(entries) => Box::new(entries.iter()),
            Run::Permuted(entries) => Box::new(entries.iter_unordered()),
        }
    }

    /// The entries, in order, moved out.
    pub fn into_entries(self) -> RunEntries {
        match self {
            Run::Sorted(entries) => RunEntries::Sorted(entries.into_iter()),
            Run::Permuted(entries) => RunEntries::Permuted(entries),
        }
    }
}

/// [`Run::into_entries`].
pub enum RunEntries {
    Sorted(std::vec::IntoIter<Entry>),
    Permuted(crate::storage::key::Permuted<Entry>),
}

impl Iterator for RunEntries {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        match self {
            RunEntries::Sorted(entries) => entries.next(),
            RunEntries::Permuted(entries) => entries.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            RunEntries::Sorted(entries) => entries.size_hint(),
            RunEntries::Permuted(entries) => entries.size_hint(),
        }
    }
}

impl ExactSizeIterator for RunEntries {}

/// Asserts what [`OrderedIndex::load_sorted`] requires of its runs, where it costs no more than
/// a pass over a list: each sorted list's order, and the order across runs (first and last
/// entries). A permuted run's order inside it is checked as it is taken ([`check_increasing`]):
/// read out of turn here, its entries were a cache miss each.
pub fn check_sorted_runs(runs: &[Run]) {
    let mut last: Option<&Key> = None;
    for run in runs.iter().filter(|run| !run.is_empty()) {
        let (first, end) = match run {
            Run::Sorted(entries) => {
                assert!(
                    entries.windows(2).all(|w| w[0].0 < w[1].0),
                    "entries to load are not in strictly increasing order"
                );
                (&entries[0].0, &entries[entries.len() - 1].0)
            }
            Run::Permuted(entries) => match (entries.get(0), entries.get(entries.len() - 1)) {
                (Some(first), Some(end)) => (&first.0, &end.0),
                _ => unreachable!("a run that is not empty has a first and a last entry"),
            },
        };
        assert!(last.is_none_or(|last| last < first), "entries to load are not in strictly increasing order");
        last = Some(end);
    }
}

/// Asserts that `key`, taken from a run after `previous`, follows it ([`check_sorted_runs`]).
#[inline]
pub fn check_increasing(previous: &Key, key: &Key) {
    assert!(previous < key, "entries to load are not in strictly increasing order");
}

/// [`OrderedIndex::load_sorted`] by one insert per entry, of runs the caller has checked
/// ([`check_sorted_runs`]; each entry here against the one before).
pub fn insert_runs<I: OrderedIndex + ?Sized>(index: &I, runs: Vec<Run>) {
    let mut previous: Option<Key> = None;
    for (key, record) in runs.into_iter().flat_map(Run::into_entries) {
        if let Some(previous) = &previous {
            check_increasing(previous, &key);
        }
        previous = Some(key.clone());
        let _ = index.insert_if_absent(key, record);
    }
}

/// Which backend to build indexes with. See the module docs, `docs/storage.md` and
/// `benches/index.rs` for the measurements behind the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IndexBackend {
    /// `parking_lot::RwLock<BTreeMap>`: the baseline.
    LockedBTree,
    /// `scc::TreeIndex`: a B+tree with lock-free reads and scans, with two crate bugs worked
    /// around (see [`scc_tree`]). The default until session 21; kept for A/B runs.
    SccTree,
    /// `crossbeam_skiplist::SkipList`: a lock-free skip list (see [`skiplist`]).
    SkipList,
    /// `ferntree::Tree`: an optimistic-lock-coupling B+tree, beta (see [`fern_tree`]).
    FernTree,
    /// Lazarus's own B+tree with optimistic lock coupling (see [`olc_tree`]). The default: see
    /// the module docs for why.
    #[default]
    OlcTree,
}

impl IndexBackend {
    /// Every backend, in the order benchmarks report them.
    pub const ALL: [IndexBackend; 5] = [
        IndexBackend::LockedBTree,
        IndexBackend::SccTree,
        IndexBackend::SkipList,
        IndexBackend::FernTree,
        IndexBackend::OlcTree,
    ];

    /// Builds an empty index of this kind.
    pub fn build(self) -> Box<dyn OrderedIndex> {
        match self {
            IndexBackend::LockedBTree => Box::new(btree::LockedBTree::default()),
            IndexBackend::SccTree => Box::new(scc_tree::SccTree::default()),
            IndexBackend::SkipList => Box::new(skiplist::SkipListIndex::default()),
            IndexBackend::FernTree => Box::new(fern_tree::FernTree::default()),
            IndexBackend::OlcTree => Box::new(olc_tree::OlcTree::default()),
        }
    }

    /// Builds an empty index for a table's primary key, where every entry's key is its record's
    /// own key ([`Record::key`]). The same as [`IndexBackend::build`] except for
    /// [`IndexBackend::OlcTree`], whose leaves then point straight at records
    /// ([`olc_tree::OlcTree::keyed_by_records`]).
    pub fn build_primary(self) -> Box<dyn OrderedIndex> {
        match self {
            IndexBackend::OlcTree => Box::new(olc_tree::OlcTree::keyed_by_records()),
            other => other.build(),
        }
    }

    /// The backend's name for command lines and reports (`locked-btree`, `scc`, `skiplist`,
    /// `ferntree`).
    pub fn name(self) -> &'static str {
        match self {
            IndexBackend::LockedBTree => "locked-btree",
            IndexBackend::SccTree => "scc",
            IndexBackend::SkipList => "skiplist",
            IndexBackend::FernTree => "ferntree",
            IndexBackend::OlcTree => "olc",
        }
    }

    /// The backend called `name` (as [`IndexBackend::name`] spells it, ignoring ASCII case), if
    /// any.
    pub fn from_name(name: &str) -> Option<IndexBackend> {
        IndexBackend::ALL.into_iter().find(|b| b.name().eq_ignore_ascii_case(name))
    }
}

impl std::fmt::Display for IndexBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for IndexBackend {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<IndexBackend, UnknownBackend> {
        IndexBackend::from_name(s).ok_or_else(|| UnknownBackend(s.to_owned()))
    }
}

/// A backend name that [`IndexBackend::from_name`] does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown index backend {0:?}; expected one of locked-btree, scc, skiplist, ferntree, olc")]
pub struct UnknownBackend(pub String);

/// Whether `key` lies below the range's lower bound (a scan moving forward has not reached it yet).
pub(crate) fn below_start(key: &[u8], start: &Bound<Key>) -> bool {
    match start {
        Bound::Included(s) => key < s.as_ref(),
        Bound::Excluded(s) => key <= s.as_ref(),
        Bound::Unbounded => false,
    }
}

/// Whether `key` lies above the range's upper bound (a scan moving backward has not reached it
/// yet).
pub(crate) fn above_end(key: &[u8], end: &Bound<Key>) -> bool {
    match end {
        Bound::Included(e) => key > e.as_ref(),
        Bound::Excluded(e) => key >= e.as_ref(),
        Bound::Unbounded => false,
    }
}

/// What a backend's scan loop does with each entry it meets; see [`RangeWalk::offer`].
pub(crate) struct RangeWalk<'r> {
    range: &'r KeyRange,
    direction: Direction,
    limit: usize,
    visited: usize,
    /// Whether an entry inside the near bound was met; later entries in scan order are too.
    near_passed: bool,
    /// Whether the walk must check the far bound itself (the backend's iterator does not).
    check_far: bool,
}

impl<'r> RangeWalk<'r> {
    /// A walk over `range` in `direction` that visits at most `limit` entries and checks both
    /// bounds itself.
    pub(crate) fn new(range: &'r KeyRange, direction: Direction, limit: usize) -> RangeWalk<'r> {
        RangeWalk { range, direction, limit, visited: 0, near_passed: false, check_far: true }
    }

    /// The same walk for an iterator that already stops at the far bound, which spares a key
    /// comparison (and often a cache miss on the key bytes) per entry.
    pub(crate) fn far_bound_enforced(mut self) -> RangeWalk<'r> {
        self.check_far = false;
        self
    }

    /// Whether `key` lies beyond the far end of the range (in the walk's direction).
    pub(crate) fn past_far(&self, key: &[u8]) -> bool {
        match self.direction {
            Direction::Forward => above_end(key, &self.range.end),
            Direction::Backward => below_start(key, &self.range.start),
        }
    }

    /// [`RangeWalk::offer`] for an entry the caller knows lies inside the range (a backend that
    /// checked the last entry of a sorted batch against the far bound): no bound is compared.
    pub(crate) fn offer_inside(&mut self, key: &[u8], record: &Record, visit: &mut ScanVisitor<'_>) -> bool {
        debug_assert!(self.range.contains(key), "offer_inside given a key outside the range");
        self.near_passed = true;
        self.visited += 1;
        visit(key, record) && self.visited < self.limit
    }

    /// Whether the walk is already over (a zero limit).
    pub(crate) fn is_done(&self) -> bool {
        self.visited >= self.limit
    }

    /// Offers the next entry in scan order. Entries before the near bound are skipped (a backend
    /// may start early, see [`scc_tree`]); an entry past the far bound ends the walk; entries
    /// inside are passed to `visit`. Returns whether the scan should continue.
    pub(crate) fn offer(&mut self, key: &[u8], record: &Record, visit: &mut ScanVisitor<'_>) -> bool {
        let (start, end) = (&self.range.start, &self.range.end);
        if !self.near_passed {
            let before_near = match self.direction {
                Direction::Forward => below_start(key, start),
                Direction::Backward => above_end(key, end),
            };
            if before_near {
                return true;
            }
            self.near_passed = true;
        }
        if self.check_far {
            if self.past_far(key) {
                return false;
            }
        } else {
            debug_assert!(!self.past_far(key), "backend iterator went past the far bound");
        }
        self.visited += 1;
        visit(key, record) && self.visited < self.limit
    }
}

/// Runs `walk` over `iter`, which yields entries in the walk's direction starting at or before the
/// near end of its range.
pub(crate) fn visit_in_range<'g, I>(iter: I, mut walk: RangeWalk<'_>, visit: &mut ScanVisitor<'_>)
where
    I: Iterator<Item = (&'g Key, &'g Record)>,
{
    if walk.is_done() {
        return;
    }
    for (k, r) in iter {
        if !walk.offer(k, r, visit) {
            return;
        }
    }
}

/// Borrows a `Bound<Key>` as a `Bound<&[u8]>`.
pub(crate) fn slice_bound(b: &Bound<Key>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
pub(crate) mod contract_tests {
    //! Tests every backend must pass; each backend's module calls [`check_contract`].
    use super::*;
    use crate::storage::value::Value;
    use crate::txn::tid::Tid;
    use std::sync::Arc;

    pub(crate) fn rec(v: i64) -> Record {
        Record::present(&b"k"[..], crate::storage::Row::new(vec![Value::Int(v)]), Tid::ZERO, 0)
    }

    fn k(v: u8) -> Key {
        Key::from(vec![v])
    }

    fn collect(index: &dyn OrderedIndex, range: &KeyRange, dir: Direction, limit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        index.scan(range, dir, limit, &mut |key, _| {
            out.push(key[0]);
            true
        });
        out
    }

    /// Runs the contract checks against an empty index.
    pub(crate) fn check_contract(index: &dyn OrderedIndex) {
        assert!(index.is_empty());
        for v in [5u8, 1, 9, 3, 7] {
            index.insert_if_absent(k(v), rec(i64::from(v))).unwrap();
        }
        assert!(index.insert_if_absent(k(5), rec(0)).is_err(), "duplicate insert must fail");
        assert_eq!(index.len(), 5);
        let all = KeyRange::all();
        assert_eq!(collect(index, &all, Direction::Forward, 100), vec![1, 3, 5, 7, 9]);
        assert_eq!(collect(index, &all, Direction::Backward, 2), vec![9, 7]);
        let mid = KeyRange { start: Bound::Excluded(k(3)), end: Bound::Included(k(9)) };
        assert_eq!(collect(index, &mid, Direction::Forward, 100), vec![5, 7, 9]);
        assert_eq!(collect(index, &mid, Direction::Backward, 100), vec![9, 7, 5]);
        // A lower bound below the smallest key (the pathological case of one crate) still works.
        let low = KeyRange { start: Bound::Included(k(0)), end: Bound::Excluded(k(4)) };
        assert_eq!(collect(index, &low, Direction::Forward, 100), vec![1, 3]);
        let stale = rec(0);
        assert!(!index.remove(&[5], &stale), "remove must check record identity");
        let five = index.get(&[5]).unwrap();
        assert!(index.remove(&[5], &five));
        assert!(index.get(&[5]).is_none());
        let mut seen = 0;
        index.scan(&all, Direction::Forward, 100, &mut |_, _| {
            seen += 1;
            seen < 2
        });
        assert_eq!(seen, 2, "visitor returning false must stop the scan");
        // A run: the keys present (1, 3) are refused with their records, the others go in.
        let run: Vec<Entry> = [0u8, 1, 2, 3, 4].iter().map(|&v| (k(v), rec(i64::from(v)))).collect();
        let refused = index.insert_run_if_absent(&run);
        let refused: Vec<(usize, bool)> = refused
            .iter()
            .map(|(i, existing)| (*i, index.get(&[run[*i].0[0]]).is_some_and(|r| Record::ptr_eq(&r, existing))))
            .collect();
        assert_eq!(refused, vec![(1, true), (3, true)], "a run's refusals and the records they name");
        assert_eq!(collect(index, &all, Direction::Forward, 100), vec![0, 1, 2, 3, 4, 7, 9]);
        assert_eq!(index.len(), 7);
    }

    /// Corner cases beyond [`check_contract`]: empty and inverted ranges, zero limits, bounds
    /// outside the keys on both sides in both directions, re-inserting the record that is
    /// already present, longer keys sharing prefixes.
    pub(crate) fn check_edges(index: &dyn OrderedIndex) {
        let all = KeyRange::all();
        assert!(collect(index, &all, Direction::Forward, 10).is_empty());
        assert!(collect(index, &all, Direction::Backward, 10).is_empty());
        for v in [10u8, 20, 30, 40] {
            index.insert_if_absent(k(v), rec(i64::from(v))).unwrap();
        }
        // Re-inserting the very record that is present must report it, not succeed.
        let twenty = index.get(&[20]).unwrap();
        let again = index.insert_if_absent(k(20), Record::clone(&twenty));
        assert!(again.is_err_and(|e| Record::ptr_eq(&e, &twenty)), "re-insert of a present record must fail");
        assert_eq!(index.len(), 4);
        assert!(collect(index, &all, Direction::Forward, 0).is_empty());
        assert!(collect(index, &all, Direction::Backward, 0).is_empty());
        let range = |s: Bound<u8>, e: Bound<u8>| KeyRange { start: s.map(k), end: e.map(k) };
        use Bound::{Excluded as Ex, Included as In, Unbounded as Un};
        let cases: [(KeyRange, Vec<u8>); 10] = [
            (range(In(0), In(255)), vec![10, 20, 30, 40]),
            (range(In(0), Ex(25)), vec![10, 20]),
            (range(In(25), In(255)), vec![30, 40]),
            (range(Ex(10), Ex(40)), vec![20, 30]),
            (range(In(10), In(40)), vec![10, 20, 30, 40]),
            (range(In(41), Un), vec![]),
            (range(Un, Ex(10)), vec![]),
            (range(In(30), In(20)), vec![]),
            (range(Ex(20), Ex(20)), vec![]),
            (KeyRange::empty(), vec![]),
        ];
        for (r, want) in cases {
            assert_eq!(collect(index, &r, Direction::Forward, 100), want, "forward {r:?}");
            let back: Vec<u8> = want.iter().rev().copied().collect();
            assert_eq!(collect(index, &r, Direction::Backward, 100), back, "backward {r:?}");
            assert_eq!(collect(index, &r, Direction::Backward, 1), back.into_iter().take(1).collect::<Vec<_>>());
        }
        // Keys that extend one another: a prefix range covers exactly its extensions.
        for key in [&[20u8, 0][..], &[20, 1, 7], &[21]] {
            index.insert_if_absent(Key::from(key), rec(0)).unwrap();
        }
        let mut seen = Vec::new();
        index.scan(&KeyRange::prefix(&[20]), Direction::Backward, 100, &mut |key, _| {
            seen.push(key.to_vec());
            true
        });
        assert_eq!(seen, vec![vec![20, 1, 7], vec![20, 0], vec![20]]);
    }

    /// Scans after removals emptied the edges of the key space: inserts 100 keys on each side of
    /// 1000 stable ones, removes them again, then scans from both ends with unbounded and
    /// out-of-range bounds.
    pub(crate) fn check_scans_after_removals(index: &dyn OrderedIndex) {
        let key = |i: u32| Key::from(i.to_be_bytes().to_vec());
        for i in 1000..2000u32 {
            index.insert_if_absent(key(i), rec(i64::from(i))).unwrap();
        }
        let extra: Vec<_> = (900..1000u32).chain(2000..2100).map(|i| (key(i), rec(0))).collect();
        for (k, r) in &extra {
            index.insert_if_absent(k.clone(), Record::clone(r)).unwrap();
        }
        for (k, r) in &extra {
            assert!(index.remove(k, r));
        }
        let first = |range: &KeyRange, dir: Direction| {
            let mut got = Vec::new();
            index.scan(range, dir, 3, &mut |k, _| {
                got.push(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
                true
            });
            got
        };
        let wide = KeyRange { start: Bound::Included(key(0)), end: Bound::Excluded(key(5000)) };
        for range in [KeyRange::all(), wide] {
            assert_eq!(first(&range, Direction::Forward), vec![1000, 1001, 1002], "{range:?}");
            assert_eq!(first(&range, Direction::Backward), vec![1999, 1998, 1997], "{range:?}");
        }
        // A hole in the middle: scans starting in it, or crossing it, continue past it.
        for i in 1200..1600u32 {
            let r = index.get(&key(i)).unwrap();
            assert!(index.remove(&key(i), &r));
        }
        let from = |i: u32| KeyRange { start: Bound::Included(key(i)), end: Bound::Unbounded };
        let down_to = |i: u32| KeyRange { start: Bound::Unbounded, end: Bound::Included(key(i)) };
        assert_eq!(first(&from(1250), Direction::Forward), vec![1600, 1601, 1602]);
        assert_eq!(first(&down_to(1550), Direction::Backward), vec![1199, 1198, 1197]);
        let mut n = 0;
        index.scan(&from(1100), Direction::Forward, 200, &mut |_, _| {
            n += 1;
            true
        });
        assert_eq!(n, 200);
        assert_eq!(index.len(), 600);
    }

    /// Writers insert and remove while readers scan forward and backward: every scan must see
    /// strictly ordered keys inside its range, and keys that were present throughout must be seen.
    pub(crate) fn check_concurrent_scans(index: Arc<dyn OrderedIndex>) {
        // Even keys stay for the whole test; odd keys come and go.
        let key = |i: u32| Key::from(i.to_be_bytes().to_vec());
        for i in (0..4000u32).step_by(2) {
            index.insert_if_absent(key(i), rec(i64::from(i))).unwrap();
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..2u32)
            .map(|t| {
                let index = Arc::clone(&index);
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut round = 0u32;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) && round < 50 {
                        for i in (1 + 2 * t..4000).step_by(4) {
                            let r = rec(i64::from(i));
                            index.insert_if_absent(key(i), Record::clone(&r)).unwrap();
                            assert!(index.remove(&key(i), &r));
                        }
                        round += 1;
                    }
                })
            })
            .collect();
        for round in 0..200u32 {
            let lo = (round * 37) % 3000;
            let range = KeyRange { start: Bound::Included(key(lo)), end: Bound::Excluded(key(lo + 500)) };
            for dir in [Direction::Forward, Direction::Backward] {
                let mut keys = Vec::new();
                index.scan(&range, dir, usize::MAX, &mut |k, _| {
                    keys.push(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
                    true
                });
                if dir == Direction::Backward {
                    keys.reverse();
                }
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "scan out of order: {dir:?}");
                assert!(keys.iter().all(|&x| (lo..lo + 500).contains(&x)), "scan left its range");
                let evens = keys.iter().filter(|&&x| x % 2 == 0).count();
                assert_eq!(evens, 250, "{dir:?} scan of [{lo}, {}) missed a stable key", lo + 500);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(index.len(), 2000);
    }

    /// A scan whose visitor waits for another thread's write to the same index must not
    /// deadlock: the engine's visitors spin on record locks (`Record::stable_read`) held by
    /// committing writers that may be inserting into this index. Backends that hold a lock
    /// across the visitor (the locked B-tree, ferntree's leaf latch) fail this.
    pub(crate) fn check_scan_does_not_block_writers(index: Arc<dyn OrderedIndex>, patience: std::time::Duration) {
        for v in 1..=200u8 {
            index.insert_if_absent(k(v), rec(i64::from(v))).unwrap();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let writer_index = Arc::clone(&index);
        let mut waited = false;
        index.scan(&KeyRange::all(), Direction::Forward, 1, &mut |_, _| {
            let writer_index = Arc::clone(&writer_index);
            let tx = tx.clone();
            std::thread::spawn(move || {
                // Same leaf as the scan's position in every B-tree.
                writer_index.insert_if_absent(Key::from(vec![1u8, 5]), rec(0)).unwrap();
                let _ = tx.send(());
            });
            waited = rx.recv_timeout(patience).is_ok();
            true
        });
        assert!(waited, "a writer blocked behind a scan's visitor");
    }

    /// Many threads insert and remove disjoint keys; the final contents must be exact.
    pub(crate) fn check_concurrent(index: Arc<dyn OrderedIndex>) {
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let index = Arc::clone(&index);
                std::thread::spawn(move || {
                    for i in 0..500u32 {
                        let key = Key::from([&[t][..], &i.to_be_bytes()].concat());
                        let r = rec(i64::from(i));
                        index.insert_if_absent(key.clone(), Record::clone(&r)).unwrap();
                        if i % 2 == 0 {
                            assert!(index.remove(&key, &r));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(index.len(), 4 * 250);
        let mut prev: Option<Key> = None;
        index.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |key, _| {
            assert!(prev.as_ref().is_none_or(|p| p.as_bytes() < key));
            prev = Some(Key::from(key));
            true
        });
    }
}

impl KeyRange {
    /// The range of keys whose first columns equal `prefix` and whose next column lies between
    /// `lower` and `upper`, for keys encoded by [`crate::storage::key`]. Keys may have more columns
    /// after these (a secondary entry ends with the primary key), so bounds on the last given
    /// column are turned into bounds on every key that extends it:
    ///
    /// | condition | bound |
    /// |-----------|-------|
    /// | `c >= v`  | start `Included(p ++ v)` |
    /// | `c > v`   | start `Included(successor(p ++ v))` |
    /// | `c < v`   | end `Excluded(p ++ v)` |
    /// | `c <= v`  | end `Excluded(successor(p ++ v))` |
    pub fn from_values(
        prefix: &[crate::storage::value::Value],
        lower: Bound<&crate::storage::value::Value>,
        upper: Bound<&crate::storage::value::Value>,
    ) -> Result<KeyRange, crate::storage::key::KeyError> {
        use crate::storage::key::{encode_into, encode_value, prefix_successor};
        let mut base = Vec::new();
        encode_into(prefix.iter().map(crate::storage::value::Value::view), &mut base)?;
        let with = |v: &crate::storage::value::Value| {
            let mut k = base.clone();
            encode_value(v, &mut k);
            k
        };
        let whole = KeyRange::prefix(&base);
        let start = match lower {
            Bound::Unbounded => whole.start,
            Bound::Included(v) => Bound::Included(Key::from(with(v))),
            Bound::Excluded(v) => match prefix_successor(&with(v)) {
                Some(s) => Bound::Included(Key::from(s)),
                None => return Ok(KeyRange::empty()),
            },
        };
        let end = match upper {
            Bound::Unbounded => whole.end,
            Bound::Excluded(v) => Bound::Excluded(Key::from(with(v))),
            Bound::Included(v) => match prefix_successor(&with(v)) {
                Some(s) => Bound::Excluded(Key::from(s)),
                None => whole.end,
            },
        };
        Ok(KeyRange { start, end })
    }

    /// A range that contains no key.
    pub fn empty() -> KeyRange {
        KeyRange { start: Bound::Excluded(Key::from(&[][..])), end: Bound::Excluded(Key::from(&[][..])) }
    }
}

#[cfg(test)]
mod range_tests {
    use super::*;
    use crate::storage::key::encode_key;
    use crate::storage::value::Value;

    #[test]
    fn column_bounds_cover_longer_keys() {
        let key = |a: i64, b: i64, c: i64| encode_key(&[Value::Int(a), Value::Int(b), Value::Int(c)]).unwrap();
        let p = [Value::Int(1)];
        let gt = KeyRange::from_values(&p, Bound::Excluded(&Value::Int(5)), Bound::Unbounded).unwrap();
        assert!(!gt.contains(&key(1, 5, 99)));
        assert!(gt.contains(&key(1, 6, -99)));
        assert!(!gt.contains(&key(2, 6, 0)));
        let le = KeyRange::from_values(&p, Bound::Unbounded, Bound::Included(&Value::Int(5))).unwrap();
        assert!(le.contains(&key(1, 5, 99)));
        assert!(!le.contains(&key(1, 6, 0)));
        assert!(le.contains(&key(1, i64::MIN, 0)));
        assert!(!le.contains(&key(0, 0, 0)));
        let ge_lt =
            KeyRange::from_values(&p, Bound::Included(&Value::Int(2)), Bound::Excluded(&Value::Int(4))).unwrap();
        assert!(ge_lt.contains(&key(1, 2, 0)) && ge_lt.contains(&key(1, 3, 7)));
        assert!(!ge_lt.contains(&key(1, 4, 0)) && !ge_lt.contains(&key(1, 1, 9)));
        assert!(!KeyRange::empty().contains(&[]));
    }
}
