//! Records: a row plus Silo's TID word and Taurus's `last_writer`.
//!
//! Silo keeps key data in the tree and values "in separately-allocated records" (SiloR §2). Here a
//! record is a counted pointer ([`Record`], one allocation with its primary key's bytes) that the
//! primary index and every secondary index entry hold. The row (one allocation, see [`Row`]) is
//! swapped whole through one atomic pointer, so readers never see a torn row and never block; the
//! TID word tells them whether what they read is consistent (see [`Record::stable_read`]).
//!
//! # Memory reclamation
//!
//! The record owns one reference count of its current row, held as a raw pointer. A reader loads
//! the pointer and takes a reference of its own; a writer swaps in the new row and hands the old
//! one to `crossbeam_epoch`, which drops it only once every thread that was pinned when it was
//! swapped out has unpinned. Readers load the pointer while pinned, so the row they take a
//! reference of cannot have been freed: epoch-based reclamation, as Silo's engine does it for the
//! records and tree nodes it unlinks, with the rows' counts deciding when the last holder lets go
//! afterwards.
//!
//! Why not `arc_swap` (used before): its store pays every reader thread's debts (`pay_all`
//! walks a slot list per thread that ever read), 5.5 % of TPC-C time on one worker by `perf`,
//! and its loads are a debt-slot protocol on top of the count increment. A pinned load is a
//! pointer load and the increment; pinning is a thread-local counter and, for the outermost pin
//! only, one fence.
//!
//! Recovery's installs on a thread that declares no reader can reach the rows it replaces
//! ([`super::retire::ReplacedRowsUnread`]: value replay) skip the collector: the old row is
//! dropped a few installs later, while its memory is still cached ([`Record::install_returning_old`]).
//!
//! A record unlinked by a delete is freed when the last index entry and the last transaction
//! holding it let go; it drops its row then, since no reader can be inside a load without holding
//! the record.
//!
//! An absent record (an insert's placeholder, a deletion) holds its thread's empty row
//! ([`Record::empty_row`]) rather than an allocation of its own. When an install replaces this
//! thread's empty row, the record's count of it is dropped at once, not through the collector:
//! the thread's own count keeps the row alive, so a reader about to take a reference of it
//! still finds it. That spares each insert an allocation, a deferred function and a free
//! (about 400 instructions; TPC-C's new-order inserts 12 rows).

use crate::storage::key::{KEY_SIZE_MAX_BYTES, Key};
use crate::storage::row::{InPlaceRow, ROW_BYTES_OFFSET};
use crate::storage::value::Row;
use crate::txn::tid::{LOCK_BIT, Tid, TidWord};
use crossbeam_epoch::Guard;
use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use triomphe::ThinArc;

/// How many spins a reader or locker makes before yielding the CPU. With two cores and more
/// threads than cores, a lock holder may be descheduled; yielding lets it run.
const SPINS_BEFORE_YIELD: u32 = 64;
/// Bytes a row's value takes on average, for guessing where a column lies
/// ([`Record::prefetch_row_columns`]): an int's 8 bytes and its tag and end.
const ROW_BYTES_PER_VALUE_GUESS: usize = 11;
/// Columns between two prefetched lines of a row ([`Record::prefetch_row_columns`]): the most
/// whose guessed bytes stay within a line, so that no line of the row is skipped.
pub(crate) const ROW_VALUES_PER_LINE_GUESS: usize = 64 / ROW_BYTES_PER_VALUE_GUESS;

thread_local! {
    /// The row of the absent records this thread makes ([`Record::empty_row`]). Its own count
    /// outlives every record's count of it that this thread drops at once ([`Record::store_row`]).
    static EMPTY_ROW: Row = Row::empty();
}

/// The fixed fields of a record. The primary key's bytes follow them in the same allocation
/// (`ThinArc`'s trailing slice), so a record is one allocation of its count, its fields, its
/// key's length and its key's bytes, sized to the key.
struct Fields {
    word: AtomicU64,
    /// Taurus: the log position (logger id and LSN, as the scheme encodes it) of the transaction
    /// that last wrote this record; 0 when unknown. Written under the record's lock.
    last_writer: AtomicU64,
    /// The current row: `ThinArc::into_raw` of a row whose count this record holds. Never null.
    row: AtomicPtr<c_void>,
}

impl Drop for Fields {
    fn drop(&mut self) {
        // SAFETY: the record's own count of its current row. No reader can be inside `load_row`
        // (it would hold the record), and rows swapped out earlier were retired by `store_row`.
        drop(unsafe { ThinArc::<(), u8>::from_raw(*self.row.get_mut()) });
    }
}

/// A record of a table: a counted pointer, held by the primary index, every secondary index
/// entry and the transactions that read or write it. Cloning takes a count; the record and its
/// row are freed when the last holder lets go.
///
/// The primary key it is linked under is fixed for its life and stored after its fields, on
/// the line a lookup reads anyway: the point index compares a probed key with it there, instead
/// of keeping a copy of every key in its own entries ([`super::point`]). As a trailing slice
/// rather than a [`Key`] (40 bytes whatever the key's length), a record is 40 bytes plus its
/// key, rounded up to 8: 56 bytes for a server key such as `key:1234567` and 64 for a TPC-C
/// stock row's, where a `std::sync::Arc` of the fields and a `Key` took 80 for any key.
#[derive(Clone)]
pub struct Record(ThinArc<Fields, u8>);

/// The address of a record's allocation, as [`Record::into_raw`] gives it and indexes store it.
pub type RawRecord = *const c_void;

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("key", &Key::from(self.key()))
            .field("word", &self.word())
            .field("row", &self.row_unchecked())
            .finish()
    }
}

/// The record's raw pointer to `row`, which carries the row's count.
fn row_pointer(row: Row) -> AtomicPtr<c_void> {
    AtomicPtr::new(ThinArc::into_raw(row.into_thin()).cast_mut())
}

impl Record {
    /// A record of primary key `key` (at most [`KEY_SIZE_MAX_BYTES`]) with these fields.
    fn with_fields(key: &[u8], word: TidWord, last_writer: u64, row: Row) -> Record {
        assert!(key.len() <= KEY_SIZE_MAX_BYTES, "a record's key of {} bytes is over the limit", key.len());
        let fields =
            Fields { word: AtomicU64::new(word.0), last_writer: AtomicU64::new(last_writer), row: row_pointer(row) };
        Record(ThinArc::from_header_and_slice(fields, key))
    }

    /// A present, unlocked, latest record of primary key `key` (used by loading and recovery).
    pub fn present(key: &[u8], row: Row, tid: Tid, last_writer: u64) -> Record {
        Record::with_fields(key, TidWord::new(tid, true, false), last_writer, row)
    }

    /// A present, latest record that is already locked: a row an instant restore links, locked
    /// until every index holds it ([`super::table::Table::restore_row`]).
    pub fn present_locked(key: &[u8], row: Row, tid: Tid) -> Record {
        Record::with_fields(key, TidWord::new(tid, true, false).locked(), 0, row)
    }

    /// An absent, latest, unlocked record with a TID: a deletion replayed by recovery.
    pub fn tombstone(key: &[u8], tid: Tid) -> Record {
        Record::with_fields(key, TidWord::new(tid, true, true), 0, Row::empty())
    }

    /// An absent, latest record that is already locked: the placeholder an insert links into the
    /// primary index during its lock phase.
    pub fn locked_placeholder(key: &[u8]) -> Record {
        Record::with_fields(key, TidWord::new(Tid::ZERO, true, true).locked(), 0, Record::empty_row())
    }

    /// An empty row (no values) for an absent record: this thread's shared one (a count taken,
    /// nothing allocated), or a fresh one while the thread's locals are being destroyed.
    pub(crate) fn empty_row() -> Row {
        EMPTY_ROW.try_with(Row::clone).unwrap_or_else(|_| Row::empty())
    }

    /// The record's fixed fields.
    #[inline(always)]
    fn fields(&self) -> &Fields {
        &self.0.header.header
    }

    /// The primary key the record is linked under.
    #[inline]
    pub fn key(&self) -> &[u8] {
        &self.0.slice
    }

    /// Whether `a` and `b` are handles of the same record.
    #[inline]
    pub fn ptr_eq(a: &Record, b: &Record) -> bool {
        a.as_ptr() == b.as_ptr()
    }

    /// The address of the record's allocation (no count taken).
    #[inline]
    pub fn as_ptr(&self) -> RawRecord {
        self.0.as_ptr()
    }

    /// The address of the record's allocation, carrying this handle's count, for an index to
    /// store; [`Record::from_raw`] takes the count back.
    #[inline]
    pub fn into_raw(self) -> RawRecord {
        ThinArc::into_raw(self.0)
    }

    /// The handle whose count `raw` carries.
    ///
    /// # Safety
    ///
    /// `raw` came from [`Record::into_raw`], and its count is taken back only once.
    #[inline]
    pub unsafe fn from_raw(raw: RawRecord) -> Record {
        // SAFETY: the caller's contract.
        Record(unsafe { ThinArc::from_raw(raw) })
    }

    /// The record at `raw`, lent without a count: dropping the result does nothing.
    ///
    /// # Safety
    ///
    /// `raw` came from [`Record::into_raw`] or [`Record::as_ptr`], and a count of the record is
    /// held (by the caller or by a structure it keeps from freeing it) while the result is used.
    #[inline]
    pub unsafe fn borrow_raw(raw: RawRecord) -> ManuallyDrop<Record> {
        // SAFETY: the caller's contract; `ManuallyDrop` leaves the count untouched.
        ManuallyDrop::new(unsafe { Record::from_raw(raw) })
    }

    /// A handle of the record at `raw` with a count of its own.
    ///
    /// # Safety
    ///
    /// As for [`Record::borrow_raw`].
    #[inline]
    pub unsafe fn clone_raw(raw: RawRecord) -> Record {
        // SAFETY: the caller's contract.
        Record::clone(&*unsafe { Record::borrow_raw(raw) })
    }

    /// The key of the record at `raw`.
    ///
    /// # Safety
    ///
    /// As for [`Record::borrow_raw`], for as long as the result is used.
    #[inline]
    pub unsafe fn key_of_raw<'a>(raw: RawRecord) -> &'a [u8] {
        // SAFETY: the caller's contract keeps the allocation, and so its key, alive.
        let record = unsafe { Record::borrow_raw(raw) };
        let key = record.key();
        // SAFETY: the key's bytes lie in the record's allocation, not in the lent handle.
        unsafe { std::slice::from_raw_parts(key.as_ptr(), key.len()) }
    }

    /// How many handles of the record there are (index entries included).
    pub fn count(&self) -> usize {
        ThinArc::strong_count(&self.0)
    }

    /// The current TID word.
    pub fn word(&self) -> TidWord {
        TidWord(self.fields().word.load(Ordering::Acquire))
    }

    /// Taurus's last writer of the record.
    pub fn last_writer(&self) -> u64 {
        self.fields().last_writer.load(Ordering::Acquire)
    }

    /// Reads the row consistently with its TID word, as Silo's readers do: wait while locked, read
    /// the word, read the row, re-read the word, retry if it changed. Never blocks on a writer that
    /// is not committing.
    pub fn stable_read(&self) -> (TidWord, Row) {
        self.stable_read_pinned(&crossbeam_epoch::pin())
    }

    /// [`Record::stable_read`] under a pin the caller holds: a transaction pins once for all its
    /// reads (each pin of its own cost a thread-local lookup, and every 128th a collection).
    pub fn stable_read_pinned(&self, guard: &Guard) -> (TidWord, Row) {
        self.stable_read_lent(guard, |word, row| (word, Row::from_thin(ThinArc::clone(row))))
    }

    /// [`Record::stable_read_pinned`] without taking a count of the row: `read` sees the word and
    /// the row's values where they lie, and its result is returned once the word is seen
    /// unchanged around it. After a writer's change `read` runs again, so whatever a discarded run
    /// did, its caller must be able to undo (the checkpointer rewinds its block).
    ///
    /// For the checkpointer: a walk over every row that took counts would write two lines per
    /// record that the workers read (the record's count, the row's count), taking each line from
    /// the worker's cache, and pay four atomic operations. Borrowing is safe for the reason
    /// [`Record::load_row`]'s clone is: the row is freed only through the collector, and the
    /// caller is pinned. Rows do not change in place while transactions run (writers swap in a
    /// new row); the in-place edits of [`Record::edit_unshared_row`] are recovery's, which ends
    /// before the first checkpoint starts.
    pub fn stable_read_with<R>(&self, guard: &Guard, mut read: impl FnMut(TidWord, &Row) -> R) -> R {
        self.stable_read_lent(guard, |word, row| read(word, Row::from_thin_ref(row)))
    }

    /// The read both of those make: wait while the record is locked, read the word, lend `read`
    /// the current row (the record's own reference, no count taken), read the word again, and
    /// run again if it changed.
    #[inline(always)]
    fn stable_read_lent<R>(&self, _pinned: &Guard, mut read: impl FnMut(TidWord, &ThinArc<(), u8>) -> R) -> R {
        let mut spins = 0u32;
        loop {
            let before = self.word();
            if before.is_locked() {
                backoff(&mut spins);
                continue;
            }
            // An acquire load, so the re-read of the word below cannot move above it.
            let raw = self.fields().row.load(Ordering::Acquire);
            // SAFETY: as in `load_row`: the row is freed only through the collector and the
            // caller is pinned; `ManuallyDrop` leaves the record's count untouched, and the lent
            // reference ends before `_pinned` does.
            let row = ManuallyDrop::new(unsafe { ThinArc::<(), u8>::from_raw(raw) });
            let result = read(before, &row);
            if self.word() == before {
                return result;
            }
            backoff(&mut spins);
        }
    }

    /// Tries once to take the lock. Returns the word as it was (unlocked) on success.
    pub fn try_lock(&self) -> Option<TidWord> {
        let current = self.fields().word.load(Ordering::Relaxed);
        if current & LOCK_BIT != 0 {
            return None;
        }
        self.fields()
            .word
            .compare_exchange_weak(current, current | LOCK_BIT, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(TidWord)
    }

    /// Takes the lock, spinning then yielding while another transaction holds it. Deadlock is
    /// impossible because committers lock in one global order (table id, then key).
    pub fn lock(&self) -> TidWord {
        let mut spins = 0u32;
        loop {
            if let Some(word) = self.try_lock() {
                return word;
            }
            backoff(&mut spins);
        }
    }

    /// Installs a new row and releases the lock with the new word in one store, so a reader sees
    /// either the old (word, row) pair or the new one. The caller must hold the lock.
    pub fn install(&self, row: Row, word: TidWord, last_writer: u64) {
        debug_assert!(self.word().is_locked(), "install without the lock");
        self.fields().last_writer.store(last_writer, Ordering::Release);
        self.store_row(row);
        self.unlock_with(word);
    }

    /// [`Record::install`] for recovery, before transactions run: the replaced row is handed back
    /// instead of to the epoch collector, so the caller can drop it while its memory is still
    /// cached ([`super::retire::retire_row`]). The collector would drop it hundreds of installs
    /// later, a cache miss per row replaced.
    ///
    /// The caller guarantees that no thread is between loading this record's row pointer and
    /// taking its count (recovery's writers install; they do not read the rows they replace).
    pub(crate) fn install_returning_old(&self, row: Row, word: TidWord) -> Row {
        debug_assert!(self.word().is_locked(), "install without the lock");
        self.fields().last_writer.store(0, Ordering::Release);
        let old = self.fields().row.swap(row_pointer(row).into_inner(), Ordering::AcqRel);
        self.unlock_with(word);
        // SAFETY: `old` is `ThinArc::into_raw` of the row the record held a count of until the
        // swap; that count is now ours, and nothing else will convert `old` back.
        Row::from_thin(unsafe { ThinArc::<(), u8>::from_raw(old) })
    }

    /// [`Record::install`] for a writer that owns the record without its lock: a PACMAN replay
    /// piece, whose schedule lets no other thread touch the records it writes
    /// ([`crate::txn::Transaction::commit_replay`]). The row goes first, then the word, as in
    /// `install`.
    pub(crate) fn install_unlatched(&self, row: Row, word: TidWord, last_writer: u64) {
        debug_assert!(!word.is_locked());
        debug_assert!(!self.word().is_locked(), "a replay piece writes a record someone has locked");
        self.fields().last_writer.store(last_writer, Ordering::Release);
        self.store_row(row);
        self.fields().word.store(word.0, Ordering::Release);
    }

    /// Releases the lock, setting the word to `word` (which must not have the lock bit).
    pub fn unlock_with(&self, word: TidWord) {
        debug_assert!(!word.is_locked());
        debug_assert!(self.word().is_locked(), "unlock without the lock");
        self.fields().word.store(word.0, Ordering::Release);
    }

    /// Releases the lock without changing the word (an aborted commit).
    pub fn unlock(&self) {
        let word = self.word().unlocked();
        self.unlock_with(word);
    }

    /// The current row of a record the caller has locked: no writer can change it.
    pub fn locked_row(&self, guard: &Guard) -> Row {
        debug_assert!(self.word().is_locked(), "locked_row without the lock");
        self.load_row(guard)
    }

    /// Recovery's update in place: lends `edit` the current row, whose values it may set where
    /// they lie when this record holds the only reference of it ([`InPlaceRow::set`]). The caller
    /// must hold the lock and run while no reader can load the row (recovery, before
    /// transactions start): a transaction's reader takes a reference of its own, but the
    /// checkpointer's ([`Record::stable_read_with`]) takes none, so the count alone would not
    /// keep an edit from a checkpoint's eyes; that no reader runs does. Then the row is changed
    /// where it lies instead of being copied, swapped and retired.
    pub(crate) fn edit_unshared_row<R>(&self, edit: impl FnOnce(&mut InPlaceRow) -> R) -> R {
        debug_assert!(self.word().is_locked(), "edit_unshared_row without the lock");
        let raw = self.fields().row.load(Ordering::Acquire);
        // SAFETY: `raw` is `ThinArc::into_raw` of the row this record holds a count of; only a
        // locked writer swaps it, and the caller is that writer. `ManuallyDrop` leaves the count
        // as it is; `InPlaceRow` cannot replace the row, only set values in it, and only when
        // that count is the only one, so no counted holder can observe the edit, and no lent
        // reader (the checkpointer's) runs (this function's contract).
        let mut current = ManuallyDrop::new(Row::from_thin(unsafe { ThinArc::<(), u8>::from_raw(raw) }));
        let out = edit(InPlaceRow::lend(&mut current));
        debug_assert_eq!(current.as_ptr().cast::<std::ffi::c_void>(), raw.cast_const());
        out
    }

    /// The current row, without consistency checks (for tools and single-threaded recovery).
    pub fn row_unchecked(&self) -> Row {
        self.load_row(&crossbeam_epoch::pin())
    }

    /// Prefetches the first cache line of the current row (its count and first values): for a
    /// writer that will lock the record and edit or replace the row a few steps later.
    #[inline]
    pub fn prefetch_row(&self) {
        super::prefetch::prefetch_line(self.fields().row.load(Ordering::Relaxed).cast_const());
    }

    /// Prefetches the lines of the current row that hold the values of `columns` (positions
    /// past the row's end prefetch memory after it, which is harmless): for an edit of those
    /// columns a few steps later, in a row of many columns, whose edited columns are often
    /// several lines past its first.
    #[inline]
    pub fn prefetch_row_columns(&self, columns: impl Iterator<Item = usize>) {
        let raw = self.fields().row.load(Ordering::Relaxed).cast::<u8>().cast_const();
        for column in columns {
            let offset_bytes = ROW_BYTES_OFFSET + column * ROW_BYTES_PER_VALUE_GUESS;
            // A prefetch does not fault, so an address past the allocation costs nothing.
            super::prefetch::prefetch_line(raw.wrapping_add(offset_bytes));
        }
    }

    /// A reference of the current row (see the module docs, "Memory reclamation").
    fn load_row(&self, _pinned: &Guard) -> Row {
        let raw = self.fields().row.load(Ordering::Acquire);
        // SAFETY: `raw` is `ThinArc::into_raw` of a row this record held a count of when the load
        // read it. If a writer has swapped it out since, it dropped that count only through
        // `defer` under a pin taken after our load's pin began, so the allocation is alive while
        // `_pinned` lives; `ManuallyDrop` keeps the record's count untouched, and the clone
        // takes our own.
        let current = ManuallyDrop::new(unsafe { ThinArc::<(), u8>::from_raw(raw) });
        Row::from_thin(ThinArc::clone(&current))
    }

    /// Makes `row` the current row and retires the one it replaces. The caller is the record's
    /// only writer (it holds the lock, or owns the record as recovery and replay pieces do).
    fn store_row(&self, row: Row) {
        let old = self.fields().row.swap(row_pointer(row).into_inner(), Ordering::AcqRel);
        // SAFETY: `old` is `ThinArc::into_raw` of the row the record held a count of until the
        // swap; that count is now ours, and nothing else will convert `old` back.
        let old = unsafe { ThinArc::<(), u8>::from_raw(old) };
        if EMPTY_ROW.try_with(|empty| empty.as_ptr().cast::<c_void>() == old.ptr()).unwrap_or(false) {
            // This thread's empty row, which its own count keeps alive: a reader about to take a
            // reference of it finds it whatever we drop.
            debug_assert!(old.with_arc(triomphe::Arc::count) >= 2);
            drop(old);
            return;
        }
        // Readers pinned before the swap may still be about to take a reference of `old`.
        crossbeam_epoch::pin().defer(move || drop(old));
    }
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < SPINS_BEFORE_YIELD {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::value::Value;

    fn row(v: i64) -> Row {
        Row::new(vec![Value::Int(v)])
    }

    #[test]
    fn the_record_points_at_the_rows_allocation() {
        let r = Record::present(b"k", Row::new(vec![Value::Int(1), Value::Int(2)]), Tid::new(1, 1), 0);
        let raw = r.fields().row.load(Ordering::Relaxed) as usize;
        let (_, got) = r.stable_read();
        assert_eq!(got.as_ptr() as usize, raw);
        r.stable_read_with(&crossbeam_epoch::pin(), |_, lent| assert_eq!(lent.as_ptr() as usize, raw));
    }

    /// Where the key lies in the allocation: after the count (8), the fields (24) and the key's
    /// length (8). The allocation is that and the key, rounded up to 8.
    const KEY_OFFSET_BYTES: usize = 40;

    #[test]
    fn a_record_is_its_fields_then_its_key_in_one_allocation() {
        let key = crate::storage::key::encode_key(&[Value::bytes(b"key:4999999")]).unwrap();
        let r = Record::present(&key, row(1), Tid::new(1, 1), 0);
        assert_eq!(r.key(), key.as_bytes());
        assert_eq!(r.key().as_ptr() as usize - r.as_ptr() as usize, KEY_OFFSET_BYTES);
        // A server key: its 11 bytes, a tag and a terminator of two, in a 56-byte allocation.
        assert_eq!((KEY_OFFSET_BYTES + r.key().len()).next_multiple_of(8), 56);
        // A TPC-C stock key (two integer columns, 9 bytes each) makes a 64-byte record.
        let stock = crate::storage::key::encode_key(&[Value::Int(1), Value::Int(100_000)]).unwrap();
        assert_eq!(KEY_OFFSET_BYTES + Record::tombstone(&stock, Tid::ZERO).key().len(), 58);
        let long = vec![7u8; crate::storage::key::KEY_SIZE_MAX_BYTES];
        assert_eq!(Record::locked_placeholder(&long).key(), &long[..]);
    }

    #[test]
    #[should_panic(expected = "over the limit")]
    fn a_key_over_the_limit_is_refused() {
        Record::tombstone(&vec![0u8; crate::storage::key::KEY_SIZE_MAX_BYTES + 1], Tid::ZERO);
    }

    #[test]
    fn handles_share_one_count_and_raw_pointers_carry_it() {
        let r = Record::present(b"k", row(1), Tid::new(1, 1), 0);
        let other = r.clone();
        assert!(Record::ptr_eq(&r, &other));
        assert!(!Record::ptr_eq(&r, &Record::present(b"k", row(1), Tid::new(1, 1), 0)));
        assert_eq!(r.count(), 2);
        let raw = other.into_raw();
        assert_eq!(raw, r.as_ptr());
        assert_eq!(r.count(), 2, "the raw pointer carries its count");
        // SAFETY: `raw` came from `into_raw` and `r` holds a count meanwhile.
        assert_eq!(unsafe { Record::key_of_raw(raw) }, b"k");
        let lent = unsafe { Record::borrow_raw(raw) };
        assert_eq!(lent.count(), 2, "a lent record takes no count");
        // SAFETY: as above.
        let cloned = unsafe { Record::clone_raw(raw) };
        assert_eq!(r.count(), 3);
        drop(cloned);
        // SAFETY: the count `into_raw` gave, taken back once.
        drop(unsafe { Record::from_raw(raw) });
        assert_eq!(r.count(), 1);
    }

    #[test]
    fn placeholders_share_their_threads_empty_row_and_an_install_gives_its_count_back() {
        let own = Record::empty_row();
        let base = own.strong_count();
        let a = Record::locked_placeholder(b"a");
        let b = Record::locked_placeholder(b"b");
        assert_eq!(a.row_unchecked().as_ptr(), own.as_ptr(), "no allocation of its own");
        assert_eq!(b.row_unchecked().as_ptr(), own.as_ptr());
        assert_eq!(own.strong_count(), base + 2);
        // A reader on another thread holds the empty row across the install.
        let held = a.row_unchecked();
        a.install(row(1), TidWord::new(Tid::new(1, 1), true, false), 0);
        assert_eq!(own.strong_count(), base + 2, "a's count was dropped at once; the reader's stays");
        std::thread::spawn(move || assert_eq!(held.len(), 0)).join().unwrap();
        assert_eq!(own.strong_count(), base + 1);
        // Another thread's install over this thread's empty row goes through the collector.
        let other = b.clone();
        std::thread::spawn(move || other.install(row(2), TidWord::new(Tid::new(1, 2), true, false), 0)).join().unwrap();
        assert_eq!(b.row_unchecked().at(0), Value::Int(2));
        drop(own);
    }

    #[test]
    fn install_publishes_row_and_word_together() {
        let r = Record::present(b"k", row(1), Tid::new(1, 1), 0);
        let w = r.lock();
        assert!(r.try_lock().is_none(), "lock must be exclusive");
        r.install(row(2), TidWord::new(Tid::new(1, 2), w.is_latest(), false), 7);
        let (word, got) = r.stable_read();
        assert_eq!(word.tid(), Tid::new(1, 2));
        assert_eq!(got.at(0), Value::Int(2));
        assert_eq!(r.last_writer(), 7);
    }

    #[test]
    fn readers_never_see_a_row_with_a_mismatched_word() {
        let r = Record::present(b"k", row(0), Tid::new(1, 0), 0);
        let writer = {
            let r = r.clone();
            std::thread::spawn(move || {
                for i in 1..2000u64 {
                    r.lock();
                    r.install(row(i as i64), TidWord::new(Tid::new(1, i), true, false), 0);
                }
            })
        };
        for _ in 0..2000 {
            let (word, got) = r.stable_read();
            assert_eq!(got.at(0), Value::Int(word.tid().sequence() as i64));
        }
        writer.join().unwrap();
    }
}
