//! Concurrent ordered indexes behind one small trait.
//!
//! Silo stores each table in one primary tree and each secondary index in another (SiloR §2).
//! Here every tree is an [`OrderedIndex`] from encoded keys (see [`crate::storage::key`]) to
//! `Arc<Record>`. The engine needs exactly: point get, insert-if-absent, remove-if-it-is-this-record,
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
//! - No operation blocks indefinitely on another thread's scan.

pub mod btree;

use crate::storage::key::Key;
use crate::storage::record::Record;
use std::ops::Bound;
use std::sync::Arc;

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
        let before_end = match &self.end {
            Bound::Included(e) => key <= e.as_ref(),
            Bound::Excluded(e) => key < e.as_ref(),
            Bound::Unbounded => true,
        };
        after_start && before_end
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
pub type ScanVisitor<'a> = dyn FnMut(&Key, &Arc<Record>) -> bool + 'a;

/// A concurrent ordered map from encoded keys to records. See the module docs for the contract.
pub trait OrderedIndex: Send + Sync {
    /// The record stored under `key`.
    fn get(&self, key: &[u8]) -> Option<Arc<Record>>;

    /// Stores `record` under `key` unless an entry exists; returns the existing record if so.
    fn insert_if_absent(&self, key: Key, record: Arc<Record>) -> Result<(), Arc<Record>>;

    /// Removes the entry for `key` only if it points to `record` (pointer identity). Returns
    /// whether it removed something.
    fn remove(&self, key: &[u8], record: &Arc<Record>) -> bool;

    /// Visits up to `limit` entries of `range` in `direction`.
    fn scan(&self, range: &KeyRange, direction: Direction, limit: usize, visit: &mut ScanVisitor<'_>);

    /// Number of entries (may be approximate while writers run).
    fn len(&self) -> usize;

    /// Whether the index has no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which backend to build indexes with. See `docs/storage.md` and `benches/index.rs` for the
/// measurements behind the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexBackend {
    /// `parking_lot::RwLock<BTreeMap>`: the baseline.
    #[default]
    LockedBTree,
}

impl IndexBackend {
    /// Builds an empty index of this kind.
    pub fn build(self) -> Box<dyn OrderedIndex> {
        match self {
            IndexBackend::LockedBTree => Box::new(btree::LockedBTree::default()),
        }
    }
}

#[cfg(test)]
pub(crate) mod contract_tests {
    //! Tests every backend must pass; each backend's module calls [`check_contract`].
    use super::*;
    use crate::storage::value::Value;
    use crate::txn::tid::Tid;

    fn rec(v: i64) -> Arc<Record> {
        Arc::new(Record::present(Arc::from(vec![Value::Int(v)]), Tid::ZERO, 0))
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
                        index.insert_if_absent(key.clone(), Arc::clone(&r)).unwrap();
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
            assert!(prev.as_ref().is_none_or(|p| p < key));
            prev = Some(key.clone());
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
        encode_into(prefix.iter(), &mut base)?;
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
        let ge_lt = KeyRange::from_values(&p, Bound::Included(&Value::Int(2)), Bound::Excluded(&Value::Int(4))).unwrap();
        assert!(ge_lt.contains(&key(1, 2, 0)) && ge_lt.contains(&key(1, 3, 7)));
        assert!(!ge_lt.contains(&key(1, 4, 0)) && !ge_lt.contains(&key(1, 1, 9)));
        assert!(!KeyRange::empty().contains(&[]));
    }
}
