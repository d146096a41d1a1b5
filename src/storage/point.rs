//! The point index: a concurrent hash map from encoded primary key to record, beside the ordered
//! primary index.
//!
//! Point lookups by primary key dominate OLTP (every TPC-C transaction is mostly `get`s by key),
//! and in a B-tree they cost a root-to-leaf walk of byte-string comparisons — about a third of the
//! time of a simple transfer transaction when profiled (`docs/PERFORMANCE.md`). A hash lookup is
//! one hash and one bucket probe. Scans still use the ordered index.
//!
//! # Keeping the two in step
//!
//! The point index is the arbiter of which record owns a key; the ordered index holds a subset:
//! - insert: into the point index first (`insert_if_absent` decides), then into the ordered index;
//! - remove: from the ordered index first, then from the point index;
//!
//! both under the record's lock. So a key is never in the ordered index with a record the point
//! index does not hold, and a concurrent inserter that finds no record in the point index cannot
//! meet a stale entry in the ordered one.
//!
//! Backend: `scc::HashIndex` (lock-free reads, one bucket lock per write, from the crate already
//! used for the ordered index) with `foldhash`'s randomly seeded hasher (fast on short keys,
//! and seeded so a client cannot choose keys that collide).

use super::key::Key;
use super::record::Record;
use std::sync::Arc;

type Map = scc::HashIndex<Key, Arc<Record>, foldhash::fast::RandomState>;

/// Encoded primary key → record.
pub struct PointIndex {
    map: Map,
}

impl Default for PointIndex {
    fn default() -> PointIndex {
        PointIndex { map: Map::with_hasher(foldhash::fast::RandomState::default()) }
    }
}

impl PointIndex {
    /// The record under `key`.
    pub fn get(&self, key: &[u8]) -> Option<Arc<Record>> {
        self.map.peek_with(key, |_, r| Arc::clone(r))
    }

    /// Stores `record` under `key` unless an entry exists; returns the existing record if so.
    pub fn insert_if_absent(&self, key: Key, record: Arc<Record>) -> Result<(), Arc<Record>> {
        // The entry moves in, and comes back on a failed insert: cloning it for each attempt cost
        // an atomic increment and decrement of the record's count per insert (a sixth of
        // `insert_if_absent` while a checkpoint loads, by `perf annotate`).
        let mut entry = (key, record);
        // Bounded: each retry means a remover took the entry between our insert and our read.
        for _ in 0..1000 {
            match self.map.insert_sync(entry.0, entry.1) {
                Ok(()) => return Ok(()),
                Err(back) => {
                    if let Some(existing) = self.get(&back.0) {
                        return Err(existing);
                    }
                    entry = back;
                }
            }
        }
        Err(entry.1)
    }

    /// Removes the entry for `key` only if it is `record`.
    pub fn remove(&self, key: &[u8], record: &Arc<Record>) -> bool {
        self.map.remove_if_sync(key, |current| Arc::ptr_eq(current, record))
    }

    /// Up to `limit` keys in hash order, which is a pseudo-random sample of the keys: the
    /// checkpoint manager splits tables into roughly equal key ranges from it (SiloR §4).
    pub fn sample_keys(&self, limit: usize) -> Vec<Key> {
        let mut keys = Vec::with_capacity(limit.min(1 << 16));
        self.map.iter_sync(|key, _| {
            keys.push(key.clone());
            keys.len() < limit
        });
        keys
    }

    /// Keeps room for `additional` more entries while the guard lives (recovery sizes the
    /// index before loading a checkpoint). `None` if no growth was needed or possible.
    pub fn reserve(
        &self,
        additional: usize,
    ) -> Option<scc::hash_index::Reserve<'_, Key, Arc<Record>, foldhash::fast::RandomState>> {
        self.map.reserve(additional)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::value::Value;
    use crate::txn::tid::Tid;

    fn rec() -> Arc<Record> {
        Arc::new(Record::present(crate::storage::Row::new(vec![Value::Int(1)]), Tid::ZERO, 0))
    }

    #[test]
    fn insert_get_remove_by_identity() {
        let index = PointIndex::default();
        let (a, b) = (rec(), rec());
        let key = Key::from(&b"k"[..]);
        index.insert_if_absent(key.clone(), Arc::clone(&a)).unwrap();
        let existing = index.insert_if_absent(key.clone(), Arc::clone(&b)).unwrap_err();
        assert!(Arc::ptr_eq(&existing, &a));
        assert!(!index.remove(&key, &b), "remove must check identity");
        assert!(index.remove(&key, &a));
        assert!(index.get(&key).is_none());
        assert!(index.is_empty());
    }
}
