//! The commit dependency table (Taurus §4.1.3): the predecessor vector of every transaction
//! that has logged but may not be committable yet, keyed by transaction id.
//!
//! Algorithm 2 removes an entry when its transaction commits. Here the engine does not report
//! commits back, so each logger's entries are kept in a FIFO in the order they were inserted
//! and dropped from the front once their vector is dominated by the persistent vector. An entry
//! that outlives its commit is harmless: a successor that takes the maximum with it gets
//! components that are persistent already, so its committability is unchanged — the table gives
//! the same answers as the paper's.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Shards of the table (a power of two).
const SHARDS: usize = 64;

/// A predecessor vector: one end address per logger.
pub type PredecessorVector = Arc<[u64]>;

/// The commit dependency table.
pub struct CommitDependencyTable {
    shards: Vec<Mutex<HashMap<u64, PredecessorVector, foldhash::fast::RandomState>>>,
    /// Per logger: entries in insertion order, for garbage collection.
    order: Vec<Mutex<VecDeque<(u64, PredecessorVector)>>>,
}

impl CommitDependencyTable {
    /// An empty table for `loggers` loggers.
    pub fn new(loggers: usize) -> CommitDependencyTable {
        CommitDependencyTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
            order: (0..loggers).map(|_| Mutex::new(VecDeque::new())).collect(),
        }
    }

    fn shard(&self, id: u64) -> &Mutex<HashMap<u64, PredecessorVector, foldhash::fast::RandomState>> {
        // Ids of one logger differ in their low bits (addresses); mix so shards fill evenly.
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        &self.shards[h as usize & (SHARDS - 1)]
    }

    /// The vector of `id`, if it is still in the table.
    pub fn get(&self, id: u64) -> Option<PredecessorVector> {
        self.shard(id).lock().get(&id).cloned()
    }

    /// Inserts the vector of a transaction of `logger`.
    pub fn insert(&self, logger: usize, id: u64, pv: PredecessorVector) {
        self.shard(id).lock().insert(id, Arc::clone(&pv));
        self.order[logger].lock().push_back((id, pv));
    }

    /// Removes, from the front of each logger's FIFO, the entries dominated by `persistent`.
    pub fn collect(&self, persistent: &[u64]) {
        for order in &self.order {
            let mut order = order.lock();
            while let Some((id, pv)) = order.front() {
                if !dominates(persistent, pv) {
                    break;
                }
                self.shard(*id).lock().remove(id);
                order.pop_front();
            }
        }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `persistent` dominates `pv` component-wise.
pub fn dominates(persistent: &[u64], pv: &[u64]) -> bool {
    pv.iter().enumerate().all(|(l, &a)| persistent.get(l).is_some_and(|&p| p >= a))
}

/// `into = max(into, other)` component-wise.
pub fn max_into(into: &mut [u64], other: &[u64]) {
    into.iter_mut().zip(other).for_each(|(a, &b)| *a = (*a).max(b));
}
