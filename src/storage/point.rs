//! The point index: a concurrent hash map from encoded primary key to record, beside the ordered
//! primary index.
//!
//! Point lookups by primary key dominate OLTP (every TPC-C transaction is mostly `get`s by key),
//! and in a B-tree they cost a root-to-leaf walk of byte-string comparisons — about a third of the
//! time of a simple transfer transaction when profiled (`docs/PERFORMANCE.md`). A hash lookup is
//! one hash and one probe. Scans still use the ordered index.
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
//! # Layout: one word per entry, the key in the record
//!
//! A lookup's cost is its cache misses: the tables of a TPC-C run are far larger than the caches.
//! A map that keeps each key beside its value (the `scc::HashIndex` used before) reads a line of
//! hash tags, then the entry's line (48 bytes of key and pointer, sometimes across two lines),
//! then the record, then the row: `perf` put a fifth of a TPC-C worker's time on the first two.
//! Here an entry is one 64-bit word, the record's pointer with 16 bits of the key's hash above
//! it, and the key is compared in the record ([`Record::key`]), whose line the caller reads next
//! anyway. A hit costs the slot's line and the record's.
//!
//! The map is split into [`SHARDS`] shards by the hash's top bits. Each is an open-addressed
//! array of slots with linear probing, at most three quarters full (empty slots end every probe
//! sequence; a removed entry leaves a tombstone until the shard is rebuilt).
//!
//! # Concurrency
//!
//! - Readers take no lock: they load the shard's array and then slots, each with one atomic load,
//!   so a slot is never seen half-written. They run pinned to the epoch collector
//!   (`crossbeam_epoch`), which is how a record or an array that a writer has just dropped from
//!   the map stays alive until they let go.
//! - Writers take their shard's mutex. An insert writes an empty or tombstone slot; a remove turns
//!   its slot into a tombstone and hands the map's reference of the record to the collector. A
//!   rebuild (to grow, or to clear tombstones) copies the live slots into a new array, publishes
//!   it, and retires the old one to the collector; writers are held off by the mutex meanwhile,
//!   and readers of the old array see exactly what it held when the new one was published.
//! - Linearizable: an insert is visible once its slot store is; a lookup that starts after an
//!   insert returned loads the array (and the slot) the insert wrote.
//!
//! Records are 8-byte aligned and user-space pointers have 48 significant bits on the machines
//! Lazarus runs on (x86-64 and AArch64 Linux); both are asserted where a pointer is packed.

use super::key::Key;
use super::record::{RawRecord, Record};
use crossbeam_epoch::{Atomic, Guard, Owned};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// log2 of [`SHARDS`].
const SHARD_BITS: u32 = 6;
/// Shards per index: enough that writers on many cores rarely meet on one mutex.
pub const SHARDS: usize = 1 << SHARD_BITS;
/// A slot never used: ends a probe sequence.
const EMPTY: u64 = 0;
/// A slot whose entry was removed: probes go past it. Never a record pointer (records are
/// 8-byte aligned).
const TOMBSTONE: u64 = 1;
/// Bits of a slot that hold the record pointer.
const POINTER_BITS: u32 = 48;
const POINTER_MASK: u64 = (1 << POINTER_BITS) - 1;
/// The smallest array a shard allocates.
const SLOTS_MIN: usize = 16;
/// The most entries [`PointIndex::reserve`] makes room for ahead (4 GiB of slots).
const RESERVE_MAX: usize = 1 << 28;
/// Slots below which [`PointIndex::misses_cache`] says no: such an index's slots (2 MiB) and
/// most of its records stay in cache (a 32 MiB last-level cache here), and prefetching its
/// lookups only adds instructions (about a tenth of a value-log write's, by callgrind).
const CACHED_SLOTS_MAX: usize = 1 << 18;
/// The slots [`PointIndex::prefetch`] looks through for the record of a key's tag.
const PREFETCH_PROBE_SLOTS: usize = 8;

/// How many records a rebuild prefetches before it reads the first one's key: enough misses in
/// flight to cover one's latency, a handful of the core's line fill buffers.
const REBUILD_AHEAD: usize = 8;

/// How large a rebuilt array is for the entries it must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Growth {
    /// Half full after the rebuild, so that the next rebuild is as many inserts away: an index
    /// growing by inserts.
    Doubling,
    /// At most three quarters full (the most a shard holds before it is rebuilt): an index
    /// reserved for a count its caller knows ([`PointIndex::reserve_exact`]).
    Exact,
}

impl Growth {
    /// Slots of an array rebuilt to hold `entries`: a power of two (the probe wraps by a mask).
    fn slots_for(self, entries: usize) -> usize {
        let wanted = match self {
            Growth::Doubling => 2 * entries,
            Growth::Exact => (entries * 4).div_ceil(3),
        };
        wanted.next_power_of_two().max(SLOTS_MIN)
    }
}

/// A key's hash in one point index ([`PointIndex::hash_of`]): hashes are seeded per index.
#[derive(Clone, Copy, Debug)]
pub struct KeyHash(u64);

/// What [`PointIndex::prefetch`] loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetch {
    /// The line of the slot a lookup's probe starts at.
    Slot,
    /// The record the key's slot points to (the slot's line should be in cache by now).
    Record,
    /// The lines of the current row of that record, up to `columns` values (the record's line
    /// should be in cache by now): what a read or an update of the row touches next.
    Row {
        /// How many of the row's values to cover (its table's column count).
        columns: usize,
    },
}

/// Prefetching every this many values of a row touches each of its lines once. (It was the
/// values of a `Value` array per line, 2, from before rows were bytes, which prefetched each
/// line of a row about three times.)
const VALUES_PER_LINE: usize = super::record::ROW_VALUES_PER_LINE_GUESS;

/// Encoded primary key → record. Every record is linked under its own key ([`Record::key`]).
pub struct PointIndex {
    hasher: foldhash::fast::SeedableRandomState,
    shards: Box<[Shard]>,
    /// The hash bits a slot's tag keeps: all 16 of them, except in tests that make every tag
    /// collide so that each probe must compare keys.
    tag_mask: u64,
}

/// One shard: its current array, and the writers' mutex.
struct Shard {
    /// Read by every lookup, written only when the array is replaced: on lines of its own, so
    /// that an insert's writes to `writer` and `live` (as often as not from another core) do not
    /// take the line from the cores that look keys up. Beside them it was a miss on 15–17 % of
    /// a replay thread's samples of `taurus-data` TPC-C recovery (`docs/PERFORMANCE.md`,
    /// "Taurus", "Session 44").
    slots: CachePadded<Atomic<Slots>>,
    writer: Mutex<Counts>,
    /// `Counts::live`, readable without the mutex (for [`PointIndex::len`]).
    live: AtomicUsize,
}

/// A shard's entry counts, kept under its mutex.
#[derive(Default)]
struct Counts {
    live: usize,
    tombstones: usize,
}

/// An open-addressed array of slots; its length is a power of two.
struct Slots {
    slots: Box<[AtomicU64]>,
}

impl Default for PointIndex {
    fn default() -> PointIndex {
        let shards = (0..SHARDS)
            .map(|_| Shard {
                slots: CachePadded::new(Atomic::null()),
                writer: Mutex::new(Counts::default()),
                live: AtomicUsize::new(0),
            })
            .collect();
        PointIndex { hasher: hasher(), shards, tag_mask: 0xffff }
    }
}

/// The seed every point index created from now on hashes with, instead of a random one
/// ([`fix_hash_seed`]); 0: random.
static FIXED_HASH_SEED: AtomicU64 = AtomicU64::new(0);

/// Makes every point index created from now on in this process hash with `seed` (not 0), so that
/// two runs of the same work probe the same slots. For measurement only (an instruction count
/// that compares two replay modes varies by a few percent with the random seed): a fixed seed
/// lets whoever knows it choose keys that collide.
pub fn fix_hash_seed(seed: u64) {
    assert!(seed != 0, "0 means a random seed");
    FIXED_HASH_SEED.store(seed, Ordering::Relaxed);
}

fn hasher() -> foldhash::fast::SeedableRandomState {
    hasher_seeded(FIXED_HASH_SEED.load(Ordering::Relaxed))
}

/// The hasher of seed `seed` (0: a random one).
fn hasher_seeded(seed: u64) -> foldhash::fast::SeedableRandomState {
    match seed {
        0 => foldhash::fast::SeedableRandomState::random(),
        seed => foldhash::fast::SeedableRandomState::with_seed(seed, foldhash::SharedSeed::global_fixed()),
    }
}

/// The hash's bits a slot keeps beside the pointer (above the bits that pick a slot in any shard
/// smaller than 2^32 slots, and below the bits that pick the shard), as `hash` carries them:
/// [`PointIndex::hash`] masks the rest.
#[inline]
fn tag_of(hash: u64) -> u64 {
    (hash >> 32) & 0xffff
}

#[inline]
fn pack(hash: u64, record: RawRecord) -> u64 {
    let pointer = record as u64;
    assert!(pointer & !POINTER_MASK == 0 && pointer & 7 == 0, "a record pointer needs more than 48 bits");
    tag_of(hash) << POINTER_BITS | pointer
}

#[inline]
fn pointer_of(slot: u64) -> RawRecord {
    (slot & POINTER_MASK) as RawRecord
}

impl Slots {
    fn with_len(len: usize) -> Slots {
        assert!(len.is_power_of_two() && len >= SLOTS_MIN);
        Slots { slots: (0..len).map(|_| AtomicU64::new(EMPTY)).collect() }
    }

    /// Calls `each` with every live slot in array order, each record prefetched
    /// [`REBUILD_AHEAD`] live slots before: a caller that reads the records takes their misses
    /// overlapped instead of one after another.
    fn each_live_prefetched(&self, mut each: impl FnMut(u64)) {
        let mut ahead = [EMPTY; REBUILD_AHEAD];
        let (mut oldest, mut queued) = (0, 0);
        for slot in self.slots.iter().map(|s| s.load(Ordering::Acquire)) {
            if slot == EMPTY || slot == TOMBSTONE {
                continue;
            }
            super::prefetch::prefetch_line(pointer_of(slot));
            if queued < REBUILD_AHEAD {
                ahead[(oldest + queued) % REBUILD_AHEAD] = slot;
                queued += 1;
                continue;
            }
            each(std::mem::replace(&mut ahead[oldest], slot));
            oldest = (oldest + 1) % REBUILD_AHEAD;
        }
        for n in 0..queued {
            each(ahead[(oldest + n) % REBUILD_AHEAD]);
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The record under `key` (hash `hash`), if any. The caller is pinned.
    #[inline]
    fn find(&self, hash: u64, key: &[u8]) -> Option<RawRecord> {
        let (mask, tag) = (self.mask(), tag_of(hash));
        let mut at = hash as usize & mask;
        // Bounded by the array: at most three quarters of it is ever in use, so an empty slot
        // ends every probe sequence well before this.
        for _ in 0..=mask {
            let slot = self.slots[at].load(Ordering::Acquire);
            if slot == EMPTY {
                return None;
            }
            if slot != TOMBSTONE && slot >> POINTER_BITS == tag {
                let record = pointer_of(slot);
                // SAFETY: the slot held a reference of the record when it was loaded; a remover
                // drops that reference only through the epoch collector, and the caller is pinned.
                if unsafe { Record::key_of_raw(record) } == key {
                    return Some(record);
                }
            }
            at = (at + 1) & mask;
        }
        None
    }

    /// The record of the first slot with `hash`'s tag among the first few of its probe sequence:
    /// most likely the key's, but unchecked (no key is read), so only a hint to prefetch. With
    /// `Ordering::Acquire` the record's fields may be read (under a pin): the slot's store
    /// published them.
    #[inline]
    fn record_hint(&self, hash: u64, order: Ordering) -> Option<RawRecord> {
        let (mask, tag) = (self.mask(), tag_of(hash));
        let start = hash as usize & mask;
        // A line's worth of slots: a longer probe sequence is rare at three quarters full.
        for step in 0..PREFETCH_PROBE_SLOTS {
            let slot = self.slots[(start + step) & mask].load(order);
            if slot == EMPTY {
                return None;
            }
            if slot != TOMBSTONE && slot >> POINTER_BITS == tag {
                return Some(pointer_of(slot));
            }
        }
        None
    }

    /// Where an entry of `key` (hash `hash`) is, or else where it would go: `Ok(index)` of the
    /// entry, or `Err(index)` of the first tombstone or empty slot of its probe sequence.
    /// The caller holds the shard's mutex.
    fn position(&self, hash: u64, key: &[u8]) -> Result<usize, usize> {
        let (mask, tag) = (self.mask(), tag_of(hash));
        let mut at = hash as usize & mask;
        let mut free = None;
        for _ in 0..=mask {
            let slot = self.slots[at].load(Ordering::Relaxed);
            if slot == EMPTY {
                return Err(free.unwrap_or(at));
            }
            if slot == TOMBSTONE {
                free.get_or_insert(at);
            } else if slot >> POINTER_BITS == tag {
                // SAFETY: the slot holds a reference of the record, and only the mutex holder
                // (the caller) can drop it.
                if unsafe { Record::key_of_raw(pointer_of(slot)) } == key {
                    return Ok(at);
                }
            }
            at = (at + 1) & mask;
        }
        unreachable!("a shard's array is never full")
    }
}

impl PointIndex {
    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key) & !((0xffff & !self.tag_mask) << 32)
    }

    #[inline]
    fn shard(&self, hash: u64) -> &Shard {
        &self.shards[(hash >> (64 - SHARD_BITS)) as usize]
    }

    /// The record under `key`.
    pub fn get(&self, key: &[u8]) -> Option<Record> {
        self.get_hashed(self.hash_of(key), key)
    }

    /// The record under `key`, whose hash the caller took with [`PointIndex::hash_of`] (to
    /// [`PointIndex::prefetch`] it first).
    #[inline]
    pub fn get_hashed(&self, hash: KeyHash, key: &[u8]) -> Option<Record> {
        debug_assert_eq!(hash.0, self.hash(key), "a hash of another key or index");
        let guard = crossbeam_epoch::pin();
        let record = self.find_pinned(hash.0, key, &guard)?;
        // SAFETY: `record` is alive while we are pinned (see `Slots::find`); the count we add
        // is ours.
        unsafe { Some(Record::clone_raw(record)) }
    }

    /// Whether `key` has a record (present or not), without taking a count of it.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.find_pinned(self.hash(key), key, &crossbeam_epoch::pin()).is_some()
    }

    /// The record under `key` (hash `hash`), alive while `guard` is held. Always inlined: as a
    /// call, `get` cost 28 more instructions per replayed record (callgrind, value replay).
    #[inline(always)]
    fn find_pinned(&self, hash: u64, key: &[u8], guard: &crossbeam_epoch::Guard) -> Option<RawRecord> {
        // SAFETY: an array is retired through the collector only, and the caller is pinned.
        let slots = unsafe { self.shard(hash).slots.load(Ordering::Acquire, guard).as_ref() }?;
        slots.find(hash, key)
    }

    /// The hash a lookup of `key` probes by, for [`PointIndex::prefetch`].
    #[inline]
    pub fn hash_of(&self, key: &[u8]) -> KeyHash {
        KeyHash(self.hash(key))
    }

    /// Starts loading what a lookup of the key of `hash` will read, so that a caller who knows
    /// its next keys overlaps their misses (a lookup's slot, then its record, are each a miss on
    /// a table larger than the cache). [`Prefetch::Slot`] loads the line its probe starts at;
    /// [`Prefetch::Record`], issued some steps later, once that line has arrived, the record
    /// its first slot of the key's tag points to. A hint: it reads no key, writes nothing, and a
    /// stale pointer is harmless (a prefetch does not fault).
    #[inline]
    pub fn prefetch(&self, hash: KeyHash, stage: Prefetch) {
        self.prefetch_pinned(hash, stage, &crossbeam_epoch::pin());
    }

    /// [`PointIndex::prefetch`] under the caller's pin: a caller that prefetches many keys at
    /// once pins once for all of them.
    #[inline]
    pub fn prefetch_pinned(&self, hash: KeyHash, stage: Prefetch, guard: &crossbeam_epoch::Guard) {
        // SAFETY: an array is retired through the collector only, and we are pinned.
        let Some(slots) = (unsafe { self.shard(hash.0).slots.load(Ordering::Acquire, guard).as_ref() }) else {
            return;
        };
        match stage {
            Prefetch::Slot => super::prefetch::prefetch_line(&slots.slots[hash.0 as usize & slots.mask()]),
            Prefetch::Record => {
                if let Some(record) = slots.record_hint(hash.0, Ordering::Relaxed) {
                    super::prefetch::prefetch_line(record);
                }
            }
            Prefetch::Row { columns } => {
                if let Some(record) = slots.record_hint(hash.0, Ordering::Acquire) {
                    // SAFETY: a record is freed through the collector only, and we are pinned;
                    // the acquire load saw it published. One of another key (a tag collision)
                    // is as alive, and harmless to prefetch.
                    let record = unsafe { Record::borrow_raw(record) };
                    record.prefetch_row_columns((0..columns).step_by(VALUES_PER_LINE));
                }
            }
        }
    }

    /// Links `record` under its key unless an entry exists; returns the existing record if so.
    pub fn insert_if_absent(&self, record: Record) -> Result<(), Record> {
        self.insert_if_absent_pinned(record, &crossbeam_epoch::pin())
    }

    /// [`PointIndex::insert_if_absent`] under the caller's pin: a caller that links many records
    /// at once (the instant restore's walk) pins once for all of them.
    pub fn insert_if_absent_pinned(&self, record: Record, guard: &Guard) -> Result<(), Record> {
        let hash = self.hash(record.key());
        let shard = self.shard(hash);
        let mut counts = shard.writer.lock();
        let slots = self.room_for(shard, &mut counts, 1, Growth::Doubling, guard);
        match slots.position(hash, record.key()) {
            Ok(at) => {
                let existing = pointer_of(slots.slots[at].load(Ordering::Relaxed));
                // SAFETY: the slot holds a reference of `existing`, which only we (holding the
                // mutex) could drop; the count we add is the caller's.
                unsafe { Err(Record::clone_raw(existing)) }
            }
            Err(at) => {
                if slots.slots[at].load(Ordering::Relaxed) == TOMBSTONE {
                    counts.tombstones -= 1;
                }
                // Release: a reader that loads the slot sees the record fully built.
                slots.slots[at].store(pack(hash, Record::into_raw(record)), Ordering::Release);
                counts.live += 1;
                shard.live.store(counts.live, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// Removes the entry for `key` only if it is `record`.
    pub fn remove(&self, key: &[u8], record: &Record) -> bool {
        let hash = self.hash(key);
        let shard = self.shard(hash);
        let mut counts = shard.writer.lock();
        let guard = crossbeam_epoch::pin();
        // SAFETY: arrays are replaced only under the mutex, which we hold.
        let Some(slots) = (unsafe { shard.slots.load(Ordering::Acquire, &guard).as_ref() }) else {
            return false;
        };
        let Ok(at) = slots.position(hash, key) else { return false };
        let slot = slots.slots[at].load(Ordering::Relaxed);
        if pointer_of(slot) != Record::as_ptr(record) {
            return false;
        }
        slots.slots[at].store(TOMBSTONE, Ordering::Release);
        counts.live -= 1;
        counts.tombstones += 1;
        shard.live.store(counts.live, Ordering::Relaxed);
        // SAFETY: the map's reference of the record, which the slot held until now. Readers
        // pinned before the store may still be about to take a count of the record.
        let held = unsafe { Record::from_raw(pointer_of(slot)) };
        guard.defer(move || drop(held));
        true
    }

    /// The shard's array with room for `more` entries beyond those it holds, rebuilt (grown, or
    /// cleared of tombstones) first if it has not. The caller holds the shard's mutex.
    fn room_for<'g>(
        &self,
        shard: &Shard,
        counts: &mut Counts,
        more: usize,
        growth: Growth,
        guard: &'g Guard,
    ) -> &'g Slots {
        // SAFETY (both dereferences): arrays are replaced only under the mutex, which the caller
        // holds, and retired through the collector; the caller is pinned.
        let current = shard.slots.load(Ordering::Acquire, guard);
        if let Some(slots) = unsafe { current.as_ref() }
            && (counts.live + counts.tombstones + more) * 4 <= slots.slots.len() * 3
        {
            return slots;
        }
        let len = growth.slots_for(counts.live + more);
        let rebuilt = Owned::new(self.rebuilt(current, len)).into_shared(guard);
        let old = shard.slots.swap(rebuilt, Ordering::AcqRel, guard);
        counts.tombstones = 0;
        if !old.is_null() {
            // SAFETY: unlinked just now; readers pinned before the swap may still read it.
            // Its slots' references moved to the new array, and `Slots` drops none.
            unsafe { guard.defer_destroy(old) };
        }
        match unsafe { rebuilt.as_ref() } {
            Some(slots) => slots,
            None => unreachable!("a rebuild makes an array"),
        }
    }

    /// A new array of `len` slots holding the live entries of `current` (which may be null).
    /// The caller holds the shard's mutex and is pinned.
    fn rebuilt(&self, current: crossbeam_epoch::Shared<'_, Slots>, len: usize) -> Slots {
        let fresh = Slots::with_len(len);
        // SAFETY: see `room_for`.
        let Some(current) = (unsafe { current.as_ref() }) else { return fresh };
        // Rehashing reads every record's key, a miss each on a large shard (`docs/PERFORMANCE.md`,
        // "Taurus", "Session 24"), hence the prefetching walk.
        current.each_live_prefetched(|slot| self.place(&fresh, slot));
        fresh
    }

    /// Calls `visit` with every record in shards `shards` (of [`SHARDS`]), in no particular order:
    /// for recovery, which builds the ordered index from them once replay has linked them here
    /// ([`crate::storage::Table::finish_recovery`]). Each record is in one shard, so threads that
    /// take disjoint ranges visit disjoint records. Records linked or removed meanwhile may or may
    /// not be visited.
    pub fn for_each_record_in(&self, shards: std::ops::Range<usize>, mut visit: impl FnMut(&Record)) {
        let guard = crossbeam_epoch::pin();
        for shard in &self.shards[shards] {
            // SAFETY: as in `get`.
            let Some(slots) = (unsafe { shard.slots.load(Ordering::Acquire, &guard).as_ref() }) else { continue };
            slots.each_live_prefetched(|slot| {
                // SAFETY: the slot held a reference of the record (see `Slots::find`), which the
                // collector drops no earlier than we unpin; `ManuallyDrop` keeps this copy from
                // releasing a count it does not own.
                let record = unsafe { Record::borrow_raw(pointer_of(slot)) };
                visit(&record);
            });
        }
    }

    /// Puts `slot` (a live entry of another array) in the first free slot of its probe sequence
    /// in `fresh`, which the caller is building and no reader sees yet.
    #[inline]
    fn place(&self, fresh: &Slots, slot: u64) {
        debug_assert!(slot != EMPTY && slot != TOMBSTONE);
        // SAFETY: the slot holds a reference of the record (see `Slots::position`).
        let hash = self.hash(unsafe { Record::key_of_raw(pointer_of(slot)) });
        let mask = fresh.mask();
        let mut at = hash as usize & mask;
        while fresh.slots[at].load(Ordering::Relaxed) != EMPTY {
            at = (at + 1) & mask;
        }
        fresh.slots[at].store(slot, Ordering::Relaxed);
    }

    /// Up to `limit` keys in hash order, which is a pseudo-random sample of the keys: the
    /// checkpoint manager splits tables into roughly equal key ranges from it (SiloR §4).
    pub fn sample_keys(&self, limit: usize) -> Vec<Key> {
        let mut keys = Vec::with_capacity(limit.min(1 << 16));
        let guard = crossbeam_epoch::pin();
        for shard in self.shards.iter() {
            // SAFETY: as in `get`.
            let Some(slots) = (unsafe { shard.slots.load(Ordering::Acquire, &guard).as_ref() }) else { continue };
            for slot in slots.slots.iter().map(|s| s.load(Ordering::Acquire)) {
                if keys.len() >= limit {
                    return keys;
                }
                if slot != EMPTY && slot != TOMBSTONE {
                    // SAFETY: as in `Slots::find`.
                    keys.push(unsafe { Key::from(Record::key_of_raw(pointer_of(slot))) });
                }
            }
        }
        keys
    }

    /// Makes room for `additional` more entries, spread over the shards as hashes spread them,
    /// so that loading them does not rebuild arrays on the way (recovery sizes the index before
    /// loading a checkpoint).
    pub fn reserve(&self, additional: usize) {
        self.reserve_growing(additional, Growth::Doubling);
    }

    /// [`PointIndex::reserve`] for a caller that knows how many entries the index will hold (the
    /// instant restore's walk): each shard's array is sized for its share and no more, so that
    /// it is at most three quarters full once they are in, where `reserve` leaves room for as
    /// many again. Those are slots nothing fills, on pages that must still be faulted in (8 bytes
    /// a slot: 13 bytes a key at 5 M keys). An index that grows past its reservation is rebuilt
    /// as any other (twice the size).
    pub fn reserve_exact(&self, additional: usize) {
        self.reserve_growing(additional, Growth::Exact);
    }

    fn reserve_growing(&self, additional: usize, growth: Growth) {
        // A hint from a file's count: capped, so that a wrong count cannot take all memory.
        let per_shard = additional.min(RESERVE_MAX).div_ceil(SHARDS);
        // A shard gets about `per_shard` of them; the slack covers the spread of a random split.
        let more = per_shard + per_shard / 8 + 16;
        let guard = crossbeam_epoch::pin();
        for shard in self.shards.iter() {
            let mut counts = shard.writer.lock();
            self.room_for(shard, &mut counts, more, growth, &guard);
        }
    }

    /// Number of entries (exact when no writer runs).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.live.load(Ordering::Relaxed)).sum()
    }

    /// Whether lookups are likely to miss the cache, so that a caller who knows its next keys
    /// should [`PointIndex::prefetch`] them: by the slots in the shards' arrays, used or not, which
    /// is how far apart lookups land (an index sized ahead by [`PointIndex::reserve`] has many
    /// more slots than entries).
    pub fn misses_cache(&self) -> bool {
        self.slot_count() >= CACHED_SLOTS_MAX
    }

    /// Slots in the shards' arrays, used or not: how many entries fit before arrays are rebuilt
    /// is three quarters of it.
    pub fn slot_count(&self) -> usize {
        let guard = crossbeam_epoch::pin();
        // SAFETY: as in `get`.
        self.shards
            .iter()
            .filter_map(|s| unsafe { s.slots.load(Ordering::Acquire, &guard).as_ref() })
            .map(|s| s.slots.len())
            .sum()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for PointIndex {
    fn drop(&mut self) {
        for shard in self.shards.iter_mut() {
            // SAFETY: `&mut self`: no reader or writer is left; retired arrays and records are
            // the collector's, and each live slot holds one reference of its record.
            unsafe {
                let guard = crossbeam_epoch::unprotected();
                let current = shard.slots.swap(crossbeam_epoch::Shared::null(), Ordering::Relaxed, guard);
                if current.is_null() {
                    continue;
                }
                let slots = current.into_owned();
                for slot in slots.slots.iter().map(|s| s.load(Ordering::Relaxed)) {
                    if slot != EMPTY && slot != TOMBSTONE {
                        drop(Record::from_raw(pointer_of(slot)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::value::Value;
    use crate::txn::tid::Tid;
    use std::sync::Arc;

    /// A fixed seed (`fix_hash_seed`, for measurements) hashes alike in every index made with it
    /// and unlike another seed; without one, each index draws its own.
    #[test]
    fn a_fixed_seed_hashes_alike_and_a_random_one_does_not() {
        let keys: Vec<Vec<u8>> = (0u32..64).map(|i| i.to_be_bytes().to_vec()).collect();
        let hashes = |h: &foldhash::fast::SeedableRandomState| keys.iter().map(|k| h.hash_one(k)).collect::<Vec<_>>();
        assert_eq!(hashes(&hasher_seeded(11)), hashes(&hasher_seeded(11)));
        assert_ne!(hashes(&hasher_seeded(11)), hashes(&hasher_seeded(12)));
        assert_ne!(hashes(&hasher_seeded(0)), hashes(&hasher_seeded(0)));
    }

    /// An index whose slots all carry the same tag, so that every probe compares keys.
    fn colliding() -> PointIndex {
        let mut index = PointIndex::default();
        index.tag_mask = 0;
        index
    }

    /// Every shard's counts match its array.
    fn check_counts(index: &PointIndex) {
        let guard = crossbeam_epoch::pin();
        for shard in index.shards.iter() {
            let counts = shard.writer.lock();
            let slots = unsafe { shard.slots.load(Ordering::Acquire, &guard).as_ref() };
            let words: Vec<u64> =
                slots.map_or(Vec::new(), |s| s.slots.iter().map(|w| w.load(Ordering::Relaxed)).collect());
            let tombstones = words.iter().filter(|&&w| w == TOMBSTONE).count();
            let live = words.iter().filter(|&&w| w != TOMBSTONE && w != EMPTY).count();
            assert_eq!((counts.live, counts.tombstones), (live, tombstones));
            assert_eq!(shard.live.load(Ordering::Relaxed), live);
            assert!((live + tombstones) * 4 <= words.len() * 3, "a shard is more than three quarters full");
        }
    }

    fn rec(key: &[u8]) -> Record {
        Record::present(key, crate::storage::Row::new(vec![Value::Int(1)]), Tid::ZERO, 0)
    }

    #[test]
    fn insert_get_remove_by_identity() {
        let index = PointIndex::default();
        let (a, b) = (rec(b"k"), rec(b"k"));
        index.insert_if_absent(Record::clone(&a)).unwrap();
        let existing = index.insert_if_absent(Record::clone(&b)).unwrap_err();
        assert!(Record::ptr_eq(&existing, &a));
        assert!(!index.remove(b"k", &b), "remove must check identity");
        assert!(index.remove(b"k", &a));
        assert!(index.get(b"k").is_none());
        assert!(index.is_empty());
    }

    /// Many keys through growth, removals (tombstones) and reinserts, against a `HashMap`; long
    /// keys (stored out of line in the record's key) included.
    #[test]
    fn matches_a_map_through_growth_and_tombstones() {
        matches_a_map(PointIndex::default());
    }

    #[test]
    fn matches_a_map_when_every_tag_collides() {
        matches_a_map(colliding());
    }

    fn matches_a_map(index: PointIndex) {
        use rand::{Rng, SeedableRng};
        let mut model: std::collections::HashMap<Vec<u8>, Record> = Default::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for step in 0..60_000u32 {
            let n: u32 = rng.random_range(0..5_000);
            let key = if n.is_multiple_of(7) { format!("{n:0>60}").into_bytes() } else { n.to_be_bytes().to_vec() };
            if rng.random_bool(0.6) {
                let record = rec(&key);
                match (index.insert_if_absent(Record::clone(&record)), model.get(&key)) {
                    (Ok(()), None) => {
                        model.insert(key, record);
                    }
                    (Err(existing), Some(expected)) => assert!(Record::ptr_eq(&existing, expected), "step {step}"),
                    (got, expected) => {
                        panic!("step {step}: insert {:?} with model {:?}", got.is_ok(), expected.is_some())
                    }
                }
            } else if let Some(expected) = model.remove(&key) {
                assert!(index.remove(&key, &expected), "step {step}");
            } else {
                assert!(!index.remove(&key, &rec(&key)), "step {step}");
            }
            if step.is_multiple_of(997) {
                check_counts(&index);
                assert_eq!(index.len(), model.len());
                for (key, expected) in &model {
                    assert!(index.get(key).is_some_and(|got| Record::ptr_eq(&got, expected)), "step {step}");
                }
            }
        }
        for n in 0..5_000u32 {
            let key = n.to_be_bytes();
            assert_eq!(index.get(&key).is_some(), model.contains_key(&key[..]));
        }
        let mut sample = index.sample_keys(usize::MAX);
        sample.sort();
        let mut expected: Vec<Key> = model.keys().map(|k| Key::from(&k[..])).collect();
        expected.sort();
        assert_eq!(sample, expected);
    }

    /// The record a prefetch would load is the key's own for most keys, and none once the keys
    /// are removed; prefetching present and absent keys changes nothing.
    #[test]
    fn the_prefetch_hint_is_the_keys_record() {
        let index = PointIndex::default();
        let hint = |key: &[u8]| {
            let hash = index.hash_of(key);
            let guard = crossbeam_epoch::pin();
            let slots = unsafe { index.shard(hash.0).slots.load(Ordering::Acquire, &guard).as_ref() };
            slots.and_then(|slots| slots.record_hint(hash.0, Ordering::Acquire))
        };
        assert_eq!(hint(b"absent"), None, "an empty index");
        let records: Vec<Record> = (0..5_000u32).map(|n| rec(&n.to_be_bytes())).collect();
        for record in &records {
            index.insert_if_absent(Record::clone(record)).unwrap();
            // Every stage, on keys present and absent: a hint changes nothing.
            for stage in [Prefetch::Slot, Prefetch::Record, Prefetch::Row { columns: 3 }] {
                index.prefetch(index.hash_of(record.key()), stage);
                index.prefetch(index.hash_of(b"absent"), stage);
            }
        }
        // A key further than a line of slots from where its probe starts (at three quarters
        // full, a few in a hundred), or behind an earlier key of the same 16-bit tag, gets no or
        // a wrong hint; the rest get their own record (97-98 % in runs).
        let own = records.iter().filter(|r| hint(r.key()) == Some(Record::as_ptr(r))).count();
        assert!(own >= records.len() * 9 / 10, "{own} of {} hints were the key's record", records.len());
        for record in &records {
            assert!(index.remove(record.key(), record));
        }
        let stale = records.iter().filter(|r| hint(r.key()).is_some()).count();
        assert_eq!(stale, 0, "removed keys leave tombstones, which no hint follows");
        for record in &records {
            assert!(index.get(record.key()).is_none());
        }
    }

    /// Readers on other threads always find the keys that stay, while a writer grows the shards
    /// and removes and reinserts other keys; every record dropped by the map stays readable.
    #[test]
    fn concurrent_readers_see_stable_keys_through_rebuilds() {
        let index = Arc::new(PointIndex::default());
        let stable: Vec<Record> = (0..2_000u32).map(|n| rec(&n.to_be_bytes())).collect();
        for record in &stable {
            index.insert_if_absent(Record::clone(record)).unwrap();
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (index, stop) = (Arc::clone(&index), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut rounds = 0u64;
                    while !stop.load(Ordering::Relaxed) || rounds == 0 {
                        for n in 0..2_000u32 {
                            let got = index.get(&n.to_be_bytes());
                            assert!(got.is_some_and(|r| r.key() == n.to_be_bytes()), "key {n} lost");
                        }
                        rounds += 1;
                    }
                    rounds
                })
            })
            .collect();
        for round in 0..20u32 {
            let churn: Vec<Record> =
                (0..5_000u32).map(|n| rec(&(1_000_000 + round * 10_000 + n).to_be_bytes())).collect();
            for record in &churn {
                index.insert_if_absent(Record::clone(record)).unwrap();
            }
            for record in &churn {
                assert!(index.remove(record.key(), record));
            }
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().expect("reader panicked") > 0);
        }
        assert_eq!(index.len(), stable.len());
    }

    /// Each shard's array length.
    fn slot_lens(index: &PointIndex) -> Vec<usize> {
        let guard = crossbeam_epoch::pin();
        index
            .shards
            .iter()
            .map(|s| unsafe { s.slots.load(Ordering::Acquire, &guard).as_ref() }.map_or(0, |x| x.slots.len()))
            .collect()
    }

    /// Inserts keys `0..n` and checks that no shard's array was rebuilt on the way.
    fn load_without_rebuilds(index: &PointIndex, n: u32) {
        let before = slot_lens(index);
        for k in 0..n {
            index.insert_if_absent(rec(&k.to_be_bytes())).unwrap();
        }
        assert_eq!(before, slot_lens(index), "a reserved index rebuilt an array while loading");
        assert_eq!(index.len(), n as usize);
    }

    #[test]
    fn reserve_grows_every_shard_at_once() {
        let index = PointIndex::default();
        index.reserve(100_000);
        load_without_rebuilds(&index, 100_000);
    }

    #[test]
    fn reserve_exact_leaves_no_room_for_doubling() {
        // 1,000 keys a shard: room for 1,141 with the slack, which 2,048 slots hold three
        // quarters full at most; `reserve` makes room for twice that, 4,096.
        let (exact, doubling) = (PointIndex::default(), PointIndex::default());
        exact.reserve_exact(64_000);
        doubling.reserve(64_000);
        assert_eq!(slot_lens(&exact), vec![2_048; SHARDS]);
        assert_eq!(slot_lens(&doubling), vec![4_096; SHARDS]);
        load_without_rebuilds(&exact, 64_000);
        for k in 0..64_000u32 {
            assert!(exact.get(&k.to_be_bytes()).is_some(), "key {k} lost");
        }
    }
}
