//! One log stream: an in-memory buffer that workers append framed records to, and a logger
//! thread that flushes it with group commit (Taurus §6.1: "flushed every 5 ms or if the buffer is
//! half full, whichever happens first"; workers keep appending to a second buffer while one is
//! being written). And the scheme's persistent vector writer, which makes the loggers' synced
//! lengths durable before anything they cover is acknowledged.
//!
//! # When a commit is durable
//!
//! A logger writes a batch and `fdatasync`s it: its *synced length* grows. That alone does not
//! make the batch's transactions acknowledgeable: a lost or misdirected write of that batch
//! would later look like a torn tail, and recovery would return a shorter prefix without an
//! error. So the persistent vector writer (one thread per scheme) records every logger's synced
//! length in the persistent vector file ([`super::format`]) with one in-place write and one
//! `fdatasync`, and only then publishes those lengths as the loggers' *persistent points*,
//! which tickets are checked against. Recovery requires every log to be whole up to the length
//! the file records. Cost: one more `fdatasync` per group-commit round for all loggers
//! together; the writer runs while the loggers flush their next batches.
//!
//! Why not cheaper: acknowledging only what a later flush's sync mark covers would add no
//! `fdatasync` under load, but the mark lies in the same file after the data it vouches for, so
//! a log cut at a record boundary loses the data and the mark together; only a record outside
//! the log can tell a cut from a torn tail. Why in place rather than temp file + rename: a
//! rename costs a second `fdatasync` (the directory) and file creation per round; two slots,
//! each in its own 4 KiB, written alternately, keep the previous round whole when a write is
//! torn.

use super::format::{self, Flavor, PersistentVector};
use crate::durability::DurabilityError;
use crate::io::File;
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

struct Buffer {
    data: Vec<u8>,
    /// File offset just past `data`.
    end: u64,
}

/// A log stream shared by its workers and its logger thread.
pub struct Stream {
    /// The logger id.
    pub id: usize,
    buffer: Mutex<Buffer>,
    space: Condvar,
    capacity_bytes: usize,
    /// The file offset up to which the logger has synced the file (not yet acknowledgeable).
    synced: AtomicU64,
    /// The persistent point: synced, and recorded in the durable persistent vector file.
    persistent: AtomicU64,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    stop: AtomicBool,
}

/// What every stream of a scheme shares: the failure, and where waiters for durability sleep.
#[derive(Default)]
pub struct Durable {
    /// The first fatal failure; nothing is acknowledged after it.
    pub failed: OnceLock<String>,
    /// Held while a persistent point is published (waiters re-check under it).
    pub lock: Mutex<()>,
    /// Notified whenever persistent points are published, and on failure.
    pub cv: Condvar,
    /// Bytes written to log files.
    pub bytes_written: AtomicU64,
}

impl Durable {
    /// Records a fatal failure and wakes every waiter.
    pub fn fail(&self, message: String) {
        let _ = self.failed.set(message);
        let _guard = self.lock.lock();
        self.cv.notify_all();
    }

    /// The failure as an error.
    pub fn check(&self) -> Result<(), DurabilityError> {
        match self.failed.get() {
            Some(message) => Err(DurabilityError::Failed(message.clone())),
            None => Ok(()),
        }
    }
}

impl Stream {
    /// A stream whose file already holds `start` bytes (its header), all synced.
    pub fn new(id: usize, start: u64, capacity_bytes: usize) -> Stream {
        Stream {
            id,
            buffer: Mutex::new(Buffer { data: Vec::with_capacity(capacity_bytes), end: start }),
            space: Condvar::new(),
            capacity_bytes,
            synced: AtomicU64::new(start),
            persistent: AtomicU64::new(start),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    /// Appends one framed record; returns the address just past it. Waits while the buffer is
    /// full (backpressure) unless it is empty.
    pub fn append(&self, framed: &[u8], durable: &Durable) -> Result<u64, DurabilityError> {
        let mut buffer = self.buffer.lock();
        while !buffer.data.is_empty() && buffer.data.len() + framed.len() > self.capacity_bytes {
            durable.check()?;
            self.wake();
            self.space.wait_for(&mut buffer, Duration::from_millis(10));
        }
        durable.check()?;
        buffer.data.extend_from_slice(framed);
        buffer.end += framed.len() as u64;
        assert!(buffer.end < 1 << format::ADDRESS_BITS, "log stream {} exceeds its address space", self.id);
        let (end, half_full) = (buffer.end, buffer.data.len() >= self.capacity_bytes / 2);
        drop(buffer);
        if half_full {
            self.wake();
        }
        Ok(end)
    }

    /// The address just past the last record appended.
    pub fn appended_end(&self) -> u64 {
        self.buffer.lock().end
    }

    /// The persistent point.
    pub fn persistent(&self) -> u64 {
        self.persistent.load(Ordering::Acquire)
    }

    /// The length of the file the logger has synced.
    pub fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }

    /// Asks the logger to flush now.
    pub fn wake(&self) {
        *self.wake.lock() = true;
        self.wake_cv.notify_one();
    }

    /// Asks the logger to flush what it has and stop.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Takes the buffer for a flush; `None` if there is nothing to write. Returns the batch and
    /// the address just past it.
    fn take(&self, spare: Vec<u8>) -> Option<(Vec<u8>, u64)> {
        let mut buffer = self.buffer.lock();
        if buffer.data.is_empty() {
            return None;
        }
        let mut batch = spare;
        batch.clear();
        std::mem::swap(&mut batch, &mut buffer.data);
        let end = buffer.end;
        drop(buffer);
        self.space.notify_all();
        Some((batch, end))
    }
}

/// The logger thread of `stream`: flushes every `interval` or when woken, until stopped, and
/// tells `writer` after each flush. Any write or sync error is fatal to the whole scheme
/// (fsyncgate: nothing more is acknowledged).
pub fn run_logger(
    stream: &Stream,
    mut file: Box<dyn File>,
    interval: Duration,
    durable: &Durable,
    writer: &PersistentVectorWriter,
) {
    let mut spare = Vec::new();
    loop {
        let stop = {
            let mut woken = stream.wake.lock();
            if !*woken {
                stream.wake_cv.wait_for(&mut woken, interval);
            }
            *woken = false;
            stream.stop.load(Ordering::SeqCst)
        };
        if durable.failed.get().is_some() {
            return;
        }
        if let Some((batch, end)) = stream.take(std::mem::take(&mut spare)) {
            if let Err(e) = file.append(&batch).and_then(|()| file.sync_data()) {
                durable.fail(format!("log stream {}: {e}", stream.id));
                stream.space.notify_all();
                return;
            }
            durable.bytes_written.fetch_add(batch.len() as u64, Ordering::Relaxed);
            stream.synced.store(end, Ordering::Release);
            writer.notify_synced();
            spare = batch;
        }
        if stop {
            return;
        }
    }
}

/// Wakes the persistent vector writer when a logger synced more, or to stop it.
#[derive(Default)]
pub struct PersistentVectorWriter {
    round: Mutex<Round>,
    cv: Condvar,
}

#[derive(Default)]
struct Round {
    /// A logger synced since the writer last looked.
    pending: bool,
    stop: bool,
}

impl PersistentVectorWriter {
    /// A logger's synced length grew.
    pub fn notify_synced(&self) {
        self.round.lock().pending = true;
        self.cv.notify_one();
    }

    /// Asks the writer to record what the loggers synced and stop; call it after the loggers
    /// stopped, so that their last flushes are recorded.
    pub fn request_stop(&self) {
        self.round.lock().stop = true;
        self.cv.notify_one();
    }
}

/// The persistent vector file of a generation, open for in-place rounds.
pub struct PersistentVectorFile {
    /// Its path, for errors.
    pub path: PathBuf,
    /// The open file (its slot 0 written and synced by the generation's start).
    pub file: Box<dyn File>,
    /// The scheme.
    pub flavor: Flavor,
    /// The generation.
    pub generation: u64,
    /// The sequence of the last record written (0: the start's).
    pub sequence: u64,
}

impl PersistentVectorFile {
    /// Writes `durable_len_bytes` as the next round, in place in its slot, and syncs it.
    fn write_round(&mut self, durable_len_bytes: &[u64]) -> std::io::Result<()> {
        let pv = PersistentVector {
            sequence: self.sequence + 1,
            generation: self.generation,
            durable_len_bytes: durable_len_bytes.to_vec(),
        };
        let bytes = format::encode_persistent_vector(self.flavor, &pv);
        self.file.write_at(pv.slot() * format::PERSISTENT_VECTOR_SLOT_BYTES, &bytes)?;
        self.file.sync_data()?;
        self.sequence = pv.sequence;
        Ok(())
    }
}

/// The persistent vector writer thread: once per group-commit round (woken by the loggers, or
/// every `interval`), records every logger's synced length in `file`, syncs it, then publishes
/// them as persistent points and calls `after_publish`. An error writing or syncing the file is
/// fatal to the scheme, like a log's.
pub fn run_persistent_vector_writer(
    writer: &PersistentVectorWriter,
    streams: &[Arc<Stream>],
    mut file: PersistentVectorFile,
    interval: Duration,
    durable: &Durable,
    after_publish: &dyn Fn(),
) {
    let mut published: Vec<u64> = streams.iter().map(|s| s.persistent()).collect();
    loop {
        let stop = {
            let mut round = writer.round.lock();
            if !round.pending && !round.stop {
                writer.cv.wait_for(&mut round, interval);
            }
            round.pending = false;
            round.stop
        };
        if durable.failed.get().is_some() {
            return;
        }
        let synced: Vec<u64> = streams.iter().map(|s| s.synced()).collect();
        if synced != published {
            if let Err(e) = file.write_round(&synced) {
                durable.fail(format!("cannot make the persistent vector durable in {}: {e}", file.path.display()));
                for stream in streams {
                    stream.space.notify_all();
                }
                return;
            }
            let guard = durable.lock.lock();
            for (stream, &len) in streams.iter().zip(&synced) {
                debug_assert!(len >= stream.persistent(), "a persistent point went back");
                stream.persistent.store(len, Ordering::Release);
            }
            durable.cv.notify_all();
            drop(guard);
            published = synced;
            after_publish();
        }
        if stop {
            return;
        }
    }
}
