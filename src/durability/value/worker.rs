//! The worker side of SiloR logging: per-worker log buffers in on-disk format (SiloR §3.1–3.4).
//!
//! A worker serializes each committed transaction into its current buffer. The buffer lives in a
//! [`WorkerSlot`] behind a mutex that only the worker and its logger touch: the worker to append
//! (uncontended), the logger to take the buffer at each of its rounds. When a buffer fills, the
//! worker parks it in the slot's `full` list for the logger and takes an empty buffer from the
//! slot's free list, or makes one while the slot has made fewer than its bound; if none is free
//! and none is left to make, the worker waits — SiloR's backpressure through a bounded pool of
//! buffers. The logger returns each buffer to the free list right after writing it, not after the
//! fsync (SiloR §3.3).
//!
//! `e_w`, the lower bound on the epochs of this worker's future records, is what the logger
//! needs to compute its durable epoch. The worker publishes it through `active`:
//! - `IDLE`: not inside a commit; every record it will produce has an epoch ≥ the global epoch
//!   the logger reads *before* it looks at `active` (sequential consistency: the worker sets
//!   `active` before it reads the epoch);
//! - `READING`: between setting `active` and learning its epoch — the logger waits;
//! - `e + 2`: committing in epoch `e`; its record will carry `e`.

use super::LoggerShared;
use crate::durability::codec;
use crate::durability::{CommitTicket, CommitView, DurabilityError, DurabilityTicket, ViewNeeds, WorkerLog};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// `active` value: not committing.
pub const IDLE: u64 = 0;
/// `active` value: about to read the epoch.
pub const READING: u64 = 1;

/// A log buffer: serialized transaction entries and the range of epochs they carry.
#[derive(Default)]
pub struct Buffer {
    /// Serialized entries (the payload of one block).
    pub bytes: Vec<u8>,
    /// Smallest epoch in the buffer (`u64::MAX` when empty).
    pub min_epoch: u64,
    /// Largest epoch in the buffer (0 when empty).
    pub max_epoch: u64,
}

impl Buffer {
    fn with_capacity(capacity_bytes: usize) -> Buffer {
        Buffer { bytes: Vec::with_capacity(capacity_bytes), min_epoch: u64::MAX, max_epoch: 0 }
    }

    /// Empties the buffer for reuse.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.min_epoch = u64::MAX;
        self.max_epoch = 0;
    }
}

/// What a worker and its logger share.
pub struct WorkerSlot {
    /// `IDLE`, `READING`, or the commit's epoch + 2.
    pub active: AtomicU64,
    /// Buffers: current, full ones waiting for the logger, free ones.
    pub buffers: Mutex<SlotBuffers>,
    /// Signalled when the logger returns a free buffer.
    pub freed: Condvar,
}

/// The buffers of a slot.
pub struct SlotBuffers {
    /// The buffer the worker appends to (without memory until the worker's first entry).
    pub current: Buffer,
    /// Filled buffers waiting for the logger, oldest first.
    pub full: Vec<Buffer>,
    /// Empty buffers.
    pub free: Vec<Buffer>,
    /// Buffers of the slot's bound not allocated yet: a worker that never logs (a server's
    /// worker under a read-only load) never takes the memory, and a starting database does not
    /// touch megabytes it may not need (fresh pages are slow to fault in on a VM:
    /// `docs/PERFORMANCE.md`, "Instant recovery", "Session 37").
    unmade: usize,
    /// The capacity of each buffer.
    capacity_bytes: usize,
}

impl SlotBuffers {
    /// An empty buffer for the worker's next entries: a free one, or a new one while the slot
    /// has made fewer than its bound. `None`: every buffer is full or with the logger.
    pub fn take_free(&mut self) -> Option<Buffer> {
        if let Some(buffer) = self.free.pop() {
            return Some(buffer);
        }
        if self.unmade == 0 {
            return None;
        }
        self.unmade -= 1;
        Some(Buffer::with_capacity(self.capacity_bytes))
    }
}

impl WorkerSlot {
    /// A slot of at most `buffers` buffers (at least 2) of `capacity_bytes` each, made as the
    /// worker needs them.
    pub fn new(buffers: usize, capacity_bytes: usize) -> WorkerSlot {
        let slot_buffers = SlotBuffers {
            current: Buffer::with_capacity(0),
            full: Vec::new(),
            free: Vec::new(),
            unmade: buffers.max(2) - 1,
            capacity_bytes,
        };
        WorkerSlot { active: AtomicU64::new(IDLE), buffers: Mutex::new(slot_buffers), freed: Condvar::new() }
    }
}

/// A worker's `WorkerLog` for the value scheme.
pub struct ValueWorkerLog {
    slot: Arc<WorkerSlot>,
    logger: Arc<LoggerShared>,
    buffer_size_bytes: usize,
    scratch: Vec<u8>,
}

impl ValueWorkerLog {
    /// The log state of a worker whose slot is `slot`, in the group of `logger`.
    pub fn new(slot: Arc<WorkerSlot>, logger: Arc<LoggerShared>, buffer_size_bytes: usize) -> ValueWorkerLog {
        ValueWorkerLog { slot, logger, buffer_size_bytes, scratch: Vec::new() }
    }

    /// Encodes one entry of epoch `epoch` with `encode` and appends it: for a scheme that logs
    /// other entries through the same buffers and loggers (command logging).
    pub(crate) fn append_with(&mut self, epoch: u64, encode: impl FnOnce(&mut Vec<u8>)) -> Result<(), DurabilityError> {
        self.scratch.clear();
        encode(&mut self.scratch);
        self.append(epoch)
    }

    /// Marks the worker as not committing.
    pub(crate) fn set_idle(&self) {
        self.slot.active.store(IDLE, Ordering::SeqCst);
    }

    /// The scheme's failure, if it failed.
    pub(crate) fn check_failed(&self) -> Result<(), DurabilityError> {
        self.logger.check_failed()
    }

    /// Appends one serialized entry of epoch `epoch` to the current buffer, parking the buffer for
    /// the logger first if the entry would overflow it.
    fn append(&mut self, epoch: u64) -> Result<(), DurabilityError> {
        let mut buffers = self.slot.buffers.lock();
        if !buffers.current.bytes.is_empty()
            && buffers.current.bytes.len() + self.scratch.len() > self.buffer_size_bytes
        {
            let fresh = loop {
                if let Some(b) = buffers.take_free() {
                    break b;
                }
                self.logger.check_failed()?;
                self.logger.wake();
                self.slot.freed.wait_for(&mut buffers, std::time::Duration::from_millis(10));
            };
            let full = std::mem::replace(&mut buffers.current, fresh);
            buffers.full.push(full);
            self.logger.wake();
        }
        let current = &mut buffers.current;
        if current.bytes.capacity() == 0 {
            current.bytes.reserve(self.buffer_size_bytes.max(self.scratch.len()));
        }
        current.bytes.extend_from_slice(&self.scratch);
        current.min_epoch = current.min_epoch.min(epoch);
        current.max_epoch = current.max_epoch.max(epoch);
        Ok(())
    }
}

impl WorkerLog for ValueWorkerLog {
    fn view_needs(&self) -> ViewNeeds {
        ViewNeeds::AFTER_IMAGES
    }

    fn before_serialization_point(&mut self) {
        self.slot.active.store(READING, Ordering::SeqCst);
    }

    fn serialization_point(&mut self, epoch: u64) -> u64 {
        self.slot.active.store(epoch + 2, Ordering::SeqCst);
        0
    }

    fn abandon(&mut self, _commit_seq: u64) {
        self.slot.active.store(IDLE, Ordering::SeqCst);
    }

    fn log_commit(&mut self, view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError> {
        let epoch = view.tid.epoch();
        let result = if view.writes.is_empty() {
            self.logger.check_failed()
        } else {
            self.scratch.clear();
            let writes = view.writes.iter().map(|w| (w.table, w.key.as_ref(), codec::RedoImage::whole(w.after)));
            codec::encode_entry(view.tid, writes, &mut self.scratch);
            self.append(epoch)
        };
        self.slot.active.store(IDLE, Ordering::SeqCst);
        result?;
        Ok(CommitTicket { last_writer: 0, durability: DurabilityTicket::Epoch(epoch) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_makes_its_buffers_as_they_are_needed_and_no_more_than_its_bound() {
        let slot = WorkerSlot::new(3, 1024);
        let mut buffers = slot.buffers.lock();
        assert_eq!(buffers.current.bytes.capacity(), 0, "the current buffer takes no memory before an entry");
        let first = buffers.take_free().expect("a second buffer is made on need");
        let second = buffers.take_free().expect("a third buffer is made on need");
        assert!(first.bytes.capacity() >= 1024 && second.bytes.capacity() >= 1024);
        assert!(buffers.take_free().is_none(), "a slot of 3 made a fourth buffer");
        // A buffer the logger gives back is taken again; still no new one.
        buffers.free.push(first);
        assert!(buffers.take_free().is_some());
        assert!(buffers.take_free().is_none());
    }

    #[test]
    fn a_slot_of_fewer_than_two_buffers_still_has_two() {
        let slot = WorkerSlot::new(1, 64);
        let mut buffers = slot.buffers.lock();
        assert!(buffers.take_free().is_some());
        assert!(buffers.take_free().is_none());
    }
}
