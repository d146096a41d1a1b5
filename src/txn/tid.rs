//! Silo's TID word (SiloR §2, "Silo").
//!
//! Every record carries one 64-bit word that is at once its version and its lock:
//!
//! ```text
//!  63                              32 31                          3   2        1        0
//! +----------------------------------+-----------------------------+--------+--------+------+
//! |           epoch (32 bits)        |     sequence (29 bits)      | absent | latest | lock |
//! +----------------------------------+-----------------------------+--------+--------+------+
//! ```
//!
//! - **epoch, sequence**: the TID of the transaction that last wrote the record. Because the epoch
//!   is in the high bits, comparing the words (status bits masked) compares TIDs in
//!   (epoch, sequence) order, which is the order SiloR's last-writer-wins recovery uses.
//! - **lock**: held by a committing transaction from its lock phase until it installs its writes.
//! - **latest**: the record is the one the primary index maps its key to. A deleted record that
//!   was unlinked from the index has `latest = 0`, so a transaction still holding a pointer to it
//!   sees a changed word and aborts instead of writing into an orphan.
//! - **absent**: the record holds no row: a placeholder for an insert in progress, or a deleted row.
//!
//! With 32 bits of epoch at the default 40 ms interval a database can run for five years before
//! the epoch wraps; [`Tid::new`] asserts it does not.

use std::fmt;

/// Bit 0: the record is locked by a committing transaction.
pub const LOCK_BIT: u64 = 1 << 0;
/// Bit 1: the record is the latest version for its key (linked into the primary index).
pub const LATEST_BIT: u64 = 1 << 1;
/// Bit 2: the record has no row (insert placeholder or deleted).
pub const ABSENT_BIT: u64 = 1 << 2;
/// The status bits.
pub const STATUS_MASK: u64 = LOCK_BIT | LATEST_BIT | ABSENT_BIT;
const SEQUENCE_SHIFT: u32 = 3;
const SEQUENCE_BITS: u32 = 29;
const EPOCH_SHIFT: u32 = 32;
/// The largest sequence number within one epoch.
pub const SEQUENCE_MAX: u64 = (1 << SEQUENCE_BITS) - 1;
/// The largest epoch a TID can carry.
pub const EPOCH_MAX: u64 = u32::MAX as u64;

/// A transaction ID: (epoch, sequence). Ordered as Silo orders TIDs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tid(u64);

impl Tid {
    /// The TID below every real one; records loaded without history carry it.
    pub const ZERO: Tid = Tid(0);

    /// Builds a TID. Panics if either part is out of range: that is a bug, not bad input.
    pub fn new(epoch: u64, sequence: u64) -> Tid {
        assert!(epoch <= EPOCH_MAX, "epoch {epoch} overflows the TID word");
        assert!(sequence <= SEQUENCE_MAX, "sequence {sequence} overflows the TID word");
        Tid((epoch << EPOCH_SHIFT) | (sequence << SEQUENCE_SHIFT))
    }

    /// The epoch in which the transaction committed.
    pub fn epoch(self) -> u64 {
        self.0 >> EPOCH_SHIFT
    }

    /// The sequence number within the epoch.
    pub fn sequence(self) -> u64 {
        (self.0 >> SEQUENCE_SHIFT) & SEQUENCE_MAX
    }

    /// The raw 64-bit value with status bits clear (what logs store).
    pub fn to_u64(self) -> u64 {
        self.0
    }

    /// Rebuilds a TID from [`Tid::to_u64`]; status bits, if any, are dropped.
    pub fn from_u64(raw: u64) -> Tid {
        Tid(raw & !STATUS_MASK)
    }

    /// The smallest TID that is greater than `self`, or `None` if the sequence is exhausted.
    pub fn next_in_epoch(self) -> Option<Tid> {
        (self.sequence() < SEQUENCE_MAX).then(|| Tid(self.0 + (1 << SEQUENCE_SHIFT)))
    }
}

impl fmt::Debug for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tid({}.{})", self.epoch(), self.sequence())
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.epoch(), self.sequence())
    }
}

/// A snapshot of a record's whole TID word: TID plus status bits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TidWord(pub u64);

impl TidWord {
    /// A word for a record with TID `tid` and the given status.
    pub fn new(tid: Tid, latest: bool, absent: bool) -> TidWord {
        let mut w = tid.0;
        if latest {
            w |= LATEST_BIT;
        }
        if absent {
            w |= ABSENT_BIT;
        }
        TidWord(w)
    }

    /// The TID part.
    pub fn tid(self) -> Tid {
        Tid(self.0 & !STATUS_MASK)
    }

    /// Whether the lock bit is set.
    pub fn is_locked(self) -> bool {
        self.0 & LOCK_BIT != 0
    }

    /// Whether the record is linked into the primary index.
    pub fn is_latest(self) -> bool {
        self.0 & LATEST_BIT != 0
    }

    /// Whether the record has no row.
    pub fn is_absent(self) -> bool {
        self.0 & ABSENT_BIT != 0
    }

    /// The word without the lock bit: what read-set validation compares.
    pub fn unlocked(self) -> TidWord {
        TidWord(self.0 & !LOCK_BIT)
    }

    /// The word with the lock bit set.
    pub fn locked(self) -> TidWord {
        TidWord(self.0 | LOCK_BIT)
    }
}

impl fmt::Debug for TidWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TidWord({:?}{}{}{})",
            self.tid(),
            if self.is_locked() { " locked" } else { "" },
            if self.is_latest() { " latest" } else { "" },
            if self.is_absent() { " absent" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tids_order_by_epoch_then_sequence() {
        assert!(Tid::new(1, SEQUENCE_MAX) < Tid::new(2, 0));
        assert!(Tid::new(2, 3) < Tid::new(2, 4));
        let t = Tid::new(7, 9);
        assert_eq!((t.epoch(), t.sequence()), (7, 9));
        assert_eq!(Tid::from_u64(t.to_u64() | LOCK_BIT), t);
    }

    #[test]
    fn status_bits_do_not_disturb_the_tid() {
        let t = Tid::new(5, 6);
        let w = TidWord::new(t, true, true).locked();
        assert!(w.is_locked() && w.is_latest() && w.is_absent());
        assert_eq!(w.tid(), t);
        assert!(!w.unlocked().is_locked());
    }

    #[test]
    fn sequence_exhaustion_is_reported() {
        assert_eq!(Tid::new(1, SEQUENCE_MAX).next_in_epoch(), None);
        assert_eq!(Tid::new(1, 0).next_in_epoch(), Some(Tid::new(1, 1)));
    }
}
