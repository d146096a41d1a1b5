//! `crossbeam_skiplist::base::SkipList`: a lock-free skip list.
//!
//! Every operation is lock-free and runs under one `crossbeam_epoch` pin. The guard-based `base`
//! API is used rather than `SkipMap`, because `SkipMap` pins the epoch and takes a reference count
//! on every entry a range iterator yields; with one pin per scan, entries are plain borrows.
//!
//! Linearizable point operations:
//! - `insert_if_absent` is `get_or_insert_with`: it returns the existing node or links a new one
//!   with one compare-and-swap at the bottom level. Our node is recognised by two facts together:
//!   the value closure ran (no node was found by the first search) and the returned node holds our
//!   record. Re-inserting a record that is already present (the engine does this for secondary
//!   entries) finds the node without running the closure and so reports `Err`, as it must. The one
//!   ambiguous case, two threads racing to insert the *same* record under one key, cannot happen in
//!   the engine: index entries of a record are added under the record's lock.
//! - `remove` looks the key up and calls `Entry::remove` on that node. A node's value never
//!   changes after linking, so checking `Record::ptr_eq` on the node and then marking that node
//!   removes exactly the given record, or nothing if a concurrent remover marked it first.
//!
//! Backward scans: the list has forward links only, so each backward step is a new search from
//! the top of the list for the predecessor (`O(log n)` per visited key, not `O(1)`); that is the
//! crate's `DoubleEndedIterator` for ranges and is what this backend uses. It never collects the
//! range, but a long backward scan costs a search per key: see `docs/PERFORMANCE.md`.

use super::{Direction, KeyRange, OrderedIndex, RangeWalk, ScanVisitor, slice_bound, visit_in_range};
use crate::storage::key::Key;
use crate::storage::record::Record;
use crossbeam_skiplist::base::SkipList;

/// `crossbeam_skiplist::base::SkipList<Key, Record>` on the default epoch collector.
pub struct SkipListIndex {
    list: SkipList<Key, Record>,
}

impl Default for SkipListIndex {
    fn default() -> Self {
        SkipListIndex { list: SkipList::new(crossbeam_epoch::default_collector().clone()) }
    }
}

impl OrderedIndex for SkipListIndex {
    fn get(&self, key: &[u8]) -> Option<Record> {
        let guard = crossbeam_epoch::pin();
        self.list.get(key, &guard).map(|e| Record::clone(e.value()))
    }

    fn insert_if_absent(&self, key: Key, record: Record) -> Result<(), Record> {
        let guard = crossbeam_epoch::pin();
        let mine = Record::clone(&record);
        let mut created = false;
        let entry = self.list.get_or_insert_with(
            key,
            || {
                created = true;
                record
            },
            &guard,
        );
        // `created` alone is not enough: the value is made before the linking CAS, and a lost race
        // returns the winner's node. Pointer identity alone is not enough either: the engine
        // re-inserts a record that is already present and must be told so.
        let inserted = created && Record::ptr_eq(entry.value(), &mine);
        let result = if inserted { Ok(()) } else { Err(Record::clone(entry.value())) };
        entry.release(&guard);
        result
    }

    fn remove(&self, key: &[u8], record: &Record) -> bool {
        let guard = crossbeam_epoch::pin();
        match self.list.get(key, &guard) {
            Some(entry) if Record::ptr_eq(entry.value(), record) => entry.remove(),
            _ => false,
        }
    }

    fn scan(&self, range: &KeyRange, direction: Direction, limit: usize, visit: &mut ScanVisitor<'_>) {
        if limit == 0 {
            return;
        }
        let guard = crossbeam_epoch::pin();
        let bounds = (slice_bound(&range.start), slice_bound(&range.end));
        let iter = self.list.range::<[u8], _>(bounds, &guard);
        let walk = RangeWalk::new(range, direction, limit).far_bound_enforced();
        match direction {
            Direction::Forward => {
                visit_in_range(iter.map(|e| (e.key(), e.value())), walk, visit);
            }
            Direction::Backward => {
                visit_in_range(iter.rev().map(|e| (e.key(), e.value())), walk, visit);
            }
        }
    }

    fn len(&self) -> usize {
        self.list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::contract_tests;
    use std::sync::Arc;

    #[test]
    fn keeps_the_contract() {
        contract_tests::check_contract(&SkipListIndex::default());
        contract_tests::check_edges(&SkipListIndex::default());
        contract_tests::check_scans_after_removals(&SkipListIndex::default());
    }

    #[test]
    fn is_safe_with_many_threads() {
        contract_tests::check_concurrent(Arc::new(SkipListIndex::default()));
        contract_tests::check_concurrent_scans(Arc::new(SkipListIndex::default()));
    }

    #[test]
    fn scan_visitor_does_not_block_writers() {
        contract_tests::check_scan_does_not_block_writers(
            Arc::new(SkipListIndex::default()),
            std::time::Duration::from_secs(10),
        );
    }
}
