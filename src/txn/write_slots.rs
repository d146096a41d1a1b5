//! The write set's index: which entry of a transaction's write set holds a (table, key).
//!
//! Every point operation of a transaction that has written asks it first (a transaction reads
//! its own writes), so it is on TPC-C's hot path. It stores only the entry's position: the key
//! lives once, in the write entry, and a lookup compares against it there. A map keyed by
//! (table, key) stored a second copy of every key and needed an owned key to look one up, a
//! 40-byte copy per lookup (a heap allocation for a key longer than [`crate::storage::Key`]'s
//! inline bytes). A mask of the tables written answers most lookups of a table the transaction
//! has not written without hashing the key: a scan checks every entry it returns against the
//! write set (TPC-C's payment scans customers by last name after writing the warehouse and the
//! district; 140 lookups a TPC-C transaction, most of them such).

use crate::storage::TableId;
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// What a write entry is known by: its table and its encoded primary key.
pub(super) trait SlotKey {
    /// The entry's table.
    fn table(&self) -> TableId;
    /// The entry's encoded primary key.
    fn key(&self) -> &[u8];
}

/// A (table, key)'s hash in the index ([`WriteSlots::hash`]): an operation that looks a key up
/// and then writes it, or reads it as absent and validates that later, hashes it once. An insert
/// hashed its key three times (its lookup, the read of the key's absence, its write) and the
/// commit's absence check a fourth (`docs/PERFORMANCE.md`, "TPC-C", "Session 63").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SlotHash(u64);

/// (table, key) → position in the write set. The positions index the write set the caller
/// passes to each call, which must be the one the positions were inserted for.
#[derive(Default)]
pub(super) struct WriteSlots {
    slots: HashTable<usize>,
    /// Bit `table % 64` is set for every table with an indexed write.
    tables: u64,
    /// foldhash: the std SipHash showed in profiles.
    hasher: foldhash::fast::RandomState,
}

impl WriteSlots {
    fn table_bit(table: TableId) -> u64 {
        1 << (table % 64)
    }

    /// The hash of `key` in `table`, for [`WriteSlots::get_hashed`] and
    /// [`WriteSlots::insert_hashed`].
    pub(super) fn hash(&self, table: TableId, key: &[u8]) -> SlotHash {
        SlotHash(self.hasher.hash_one((table, key)))
    }

    /// Whether no write is indexed.
    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many entries the index holds without growing.
    pub(super) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Forgets every write, keeping the memory.
    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.tables = 0;
    }

    /// Whether `table` may have an indexed write (`false`: it has none), without a key: a
    /// caller that must build the key to look it up asks this first.
    pub(super) fn may_hold(&self, table: TableId) -> bool {
        self.tables & Self::table_bit(table) != 0
    }

    /// The position in `writes` of the write of `key` in `table`, if there is one.
    pub(super) fn get<W: SlotKey>(&self, writes: &[W], table: TableId, key: &[u8]) -> Option<usize> {
        if !self.may_hold(table) {
            return None;
        }
        self.get_hashed(writes, table, key, self.hash(table, key))
    }

    /// [`WriteSlots::get`] of a key whose hash the caller took ([`WriteSlots::hash`]).
    pub(super) fn get_hashed<W: SlotKey>(
        &self,
        writes: &[W],
        table: TableId,
        key: &[u8],
        hash: SlotHash,
    ) -> Option<usize> {
        debug_assert_eq!(hash, self.hash(table, key), "the hash of another key");
        if !self.may_hold(table) {
            return None;
        }
        let found = self.slots.find(hash.0, |&slot| {
            let write = &writes[slot];
            write.table() == table && write.key() == key
        });
        found.copied()
    }

    /// Indexes `writes[slot]`, which must not be indexed yet (its key has no write in `writes`),
    /// under its key's `hash` ([`WriteSlots::hash`]).
    pub(super) fn insert_hashed<W: SlotKey>(&mut self, writes: &[W], slot: usize, hash: SlotHash) {
        let write = &writes[slot];
        debug_assert_eq!(hash, self.hash(write.table(), write.key()), "the hash of another key");
        debug_assert!(self.get(writes, write.table(), write.key()).is_none(), "a key indexed twice");
        self.tables |= Self::table_bit(write.table());
        let hasher = &self.hasher;
        // Growing rehashes every indexed write from its entry.
        self.slots.insert_unique(hash.0, slot, |&slot| {
            let write = &writes[slot];
            hasher.hash_one((write.table(), write.key()))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Write(TableId, Vec<u8>);

    impl SlotKey for Write {
        fn table(&self) -> TableId {
            self.0
        }
        fn key(&self) -> &[u8] {
            &self.1
        }
    }

    #[test]
    fn every_write_is_found_by_its_table_and_key_and_nothing_else_is() {
        let mut writes = Vec::new();
        let mut slots = WriteSlots::default();
        // Enough to grow the table several times; the same keys in two tables.
        for i in 0..2000u32 {
            writes.push(Write(i % 2, (i / 2).to_be_bytes().to_vec()));
            let hash = slots.hash(i % 2, &writes[writes.len() - 1].1);
            slots.insert_hashed(&writes, writes.len() - 1, hash);
        }
        for (at, w) in writes.iter().enumerate() {
            assert_eq!(slots.get(&writes, w.0, &w.1), Some(at));
        }
        assert_eq!(slots.get(&writes, 2, &0u32.to_be_bytes()), None, "a table not written");
        assert_eq!(slots.get(&writes, 64, &0u32.to_be_bytes()), None, "a table whose bit is table 0's");
        assert_eq!(slots.get(&writes, 0, &5000u32.to_be_bytes()), None, "another key");
        assert_eq!(slots.get(&writes, 0, &[]), None, "a prefix of a key");
        let hash = slots.hash(1, &writes[3].1);
        assert_eq!(slots.get_hashed(&writes, 1, &writes[3].1, hash), Some(3), "by a hash taken apart");
        writes.push(Write(5, vec![7]));
        let hash = slots.hash(5, &[7]);
        assert_eq!(slots.get_hashed(&writes, 5, &[7], hash), None, "not indexed yet");
        slots.insert_hashed(&writes, writes.len() - 1, hash);
        assert_eq!(slots.get(&writes, 5, &[7]), Some(writes.len() - 1), "found by a hash it takes");
        slots.clear();
        assert!(slots.is_empty());
        assert_eq!(slots.get(&writes, 0, &0u32.to_be_bytes()), None, "cleared");
    }
}
