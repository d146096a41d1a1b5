//! Rows that recovery's installs replace, dropped a few installs later, their first lines
//! prefetched when they are replaced.
//!
//! A row replaced by an install ([`crate::storage::Table::install_if_newer`]) was written long
//! before, so its block is cold: its drop reads the count at its head and frees it. Through the
//! epoch collector that happens hundreds of installs later; on a thread that holds
//! [`ReplacedRowsUnread`] (value replay) its first lines are prefetched as it is replaced, and
//! it is dropped from a ring [`RING_VALUES`] installs later, when the lines have arrived, so the
//! miss overlaps the installs in between. (Until session 38 a column patch's replaced values
//! went through the ring too: a `Bytes` value's count was a fifth of the samples of a YCSB
//! `taurus-data` replay. Rows hold their values as bytes now, so an edit in place drops nothing.)
//!
//! Only for recovery, before transactions run: the rows are dropped outright (not through the
//! epoch collector), which is safe only because no reader can be between loading a row and
//! taking its count. The ring is per thread and holds at most [`RING_VALUES`] rows; they are
//! dropped when the thread exits, or by [`drop_retired`].

use super::value::Row;
use std::cell::RefCell;
use std::collections::VecDeque;

/// Rows a thread holds before dropping the oldest: enough installs to cover a memory access
/// (each install itself misses once or twice on the index and the record), few enough that the
/// prefetched lines are still in cache.
pub const RING_VALUES: usize = 16;

/// Lines of a retired row that are prefetched: its count and first values (a row of a few
/// columns fits; a wide row's later values are read by its drop in order, which the hardware
/// prefetcher follows).
const ROW_PREFETCH_LINES: usize = 2;
/// Bytes of a cache line (x86-64, most AArch64).
const LINE_BYTES: usize = 64;

/// What the ring holds: each is kept only to be dropped when it leaves the ring.
struct Retired(#[expect(dead_code, reason = "held to be dropped later")] Row);

thread_local! {
    static RING: RefCell<VecDeque<Retired>> = RefCell::new(VecDeque::with_capacity(RING_VALUES));
}

thread_local! {
    static REPLACED_ROWS_UNREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While alive, declares that no thread reads the rows this thread's recovery installs replace
/// ([`crate::storage::Table::install_if_newer`]), so they go to the ring instead of the epoch
/// collector. Value replay's threads hold one: they only install. Taurus's data replay does not:
/// a column patch reads its key's row, and a later delete (or an insert after it) of that key is
/// not ordered after the patch by a WAW edge, so it may replace the row while the patch reads it.
/// Dropping it drops what the thread retired.
pub struct ReplacedRowsUnread {
    previous: bool,
}

impl ReplacedRowsUnread {
    /// Declares it for this thread.
    pub fn enter() -> ReplacedRowsUnread {
        ReplacedRowsUnread { previous: REPLACED_ROWS_UNREAD.replace(true) }
    }
}

impl Drop for ReplacedRowsUnread {
    fn drop(&mut self) {
        REPLACED_ROWS_UNREAD.set(self.previous);
        drop_retired();
    }
}

/// Whether this thread holds a [`ReplacedRowsUnread`].
pub fn replaced_rows_unread() -> bool {
    REPLACED_ROWS_UNREAD.get()
}

/// Drops `row` after the next [`RING_VALUES`] retired on this thread, prefetching its first
/// lines now. For rows no other thread can reach (see the module docs).
pub fn retire_row(row: Row) {
    let start = row.as_ptr();
    for line in 0..ROW_PREFETCH_LINES {
        super::prefetch::prefetch_line(start.wrapping_add(line * LINE_BYTES));
    }
    push(Retired(row));
}

fn push(retired: Retired) {
    RING.with_borrow_mut(|ring| {
        if ring.len() >= RING_VALUES {
            drop(ring.pop_front());
        }
        ring.push_back(retired);
    });
}

/// Drops every value this thread retired.
pub fn drop_retired() {
    RING.with_borrow_mut(VecDeque::clear);
}

/// How many values this thread holds (tests).
pub fn retired_len() -> usize {
    RING.with_borrow(VecDeque::len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::value::Value;

    #[test]
    fn a_row_is_dropped_after_the_ring_fills_and_the_ring_stays_bounded() {
        drop_retired();
        let first = Row::new(vec![Value::Int(1), Value::bytes(b"in a replaced row")]);
        retire_row(first.clone());
        for i in 0..RING_VALUES - 1 {
            retire_row(Row::new(vec![Value::Int(i as i64)]));
        }
        assert_eq!(first.strong_count(), 2, "the row is still held");
        retire_row(Row::empty());
        assert_eq!(first.strong_count(), 1, "the row was dropped once RING_VALUES more were retired");
        for i in 0..3 * RING_VALUES {
            retire_row(Row::new(vec![Value::Int(i as i64)]));
        }
        assert_eq!(retired_len(), RING_VALUES);
        drop_retired();
        assert_eq!(retired_len(), 0);
    }

    #[test]
    fn the_unread_rows_scope_nests_and_empties_the_ring_when_it_ends() {
        assert!(!replaced_rows_unread(), "off by default");
        let outer = ReplacedRowsUnread::enter();
        let inner = ReplacedRowsUnread::enter();
        retire_row(Row::empty());
        drop(inner);
        assert!(replaced_rows_unread(), "the outer scope still holds");
        assert_eq!(retired_len(), 0, "the inner scope's end dropped what was retired");
        drop(outer);
        assert!(!replaced_rows_unread());
    }

    #[test]
    fn rows_left_in_a_ring_are_dropped_when_its_thread_ends() {
        let row = Row::new(vec![Value::bytes(b"left behind")]);
        let held = row.clone();
        std::thread::spawn(move || retire_row(held)).join().unwrap();
        assert_eq!(row.strong_count(), 1);
    }
}
