//! One log stream: an in-memory buffer that workers append framed records to, and a logger
//! thread that flushes it with group commit (Taurus §6.1: "flushed every 5 ms or if the buffer is
//! half full, whichever happens first"; workers keep appending to a second buffer while one is
//! being written). And the scheme's persistent vector file, which makes the loggers' synced
//! lengths durable before anything they cover is acknowledged.
//!
//! # When a commit is durable
//!
//! A logger writes a batch and `fdatasync`s it: its *synced length* grows. That alone does not
//! make the batch's transactions acknowledgeable: a lost or misdirected write of that batch
//! would later look like a torn tail, and recovery would return a shorter prefix without an
//! error. So after its `fdatasync` the logger records every logger's synced length in the
//! persistent vector file ([`super::format`]) with one in-place write and one `fdatasync` (a
//! *round*, [`PersistentVectorWriter::record_round`]), and only then publishes those lengths as
//! the loggers' *persistent points*, which tickets are checked against. Recovery requires every
//! log to be whole up to the length the file records. Cost: one more `fdatasync` per
//! group-commit round for all loggers together: one logger writes a round at a time, and the
//! loggers that sync meanwhile leave theirs to it (it loops until no sync is left unrecorded).
//! The round is written by the logger itself, right after its own sync, not by a separate
//! thread: no hand-over (a wake-up), and on a shared disk the small `fdatasync` does not queue
//! behind the next batch of log data (a first version had a writer thread; on a loaded machine
//! the two could not be told apart, `docs/PERFORMANCE.md`, "The persistent vector file").
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
use crate::durability::appender::PageAppender;
use crate::io::File;
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

struct Buffer {
    data: Vec<u8>,
    /// Logical offset just past `data`.
    end: u64,
    /// Where in `data` a new segment starts (its header block is there), with its base; in order.
    segments: Vec<(usize, u64)>,
}

/// The most segment starts one buffer may hold: a rotation beyond it waits for a flush.
const SEGMENTS_PER_BATCH_MAX: usize = 4;

/// A batch taken for a flush.
struct Batch {
    data: Vec<u8>,
    end: u64,
    segments: Vec<(usize, u64)>,
}

/// A log stream shared by its workers and its logger thread.
pub struct Stream {
    /// The logger id.
    pub id: usize,
    /// The header of its segments (the base is set per segment).
    header: format::StreamHeader,
    buffer: Mutex<Buffer>,
    space: Condvar,
    capacity_bytes: usize,
    /// The logical offset up to which the logger has synced its log (not yet acknowledgeable).
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
    /// A stream whose first segment already holds `start` bytes (its header), all synced.
    pub fn new(header: format::StreamHeader, start: u64, capacity_bytes: usize) -> Stream {
        Stream {
            id: header.logger as usize,
            header,
            buffer: Mutex::new(Buffer { data: Vec::with_capacity(capacity_bytes), end: start, segments: Vec::new() }),
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

    /// Starts a new segment after everything appended so far: records appended from now on go
    /// to a new file (its header block is appended to the buffer here, so the logger writes it
    /// in order). Returns the new segment's base, the logical end of the one before.
    pub fn rotate(&self, durable: &Durable) -> Result<u64, DurabilityError> {
        let mut buffer = self.buffer.lock();
        while buffer.segments.len() >= SEGMENTS_PER_BATCH_MAX {
            durable.check()?;
            self.wake();
            self.space.wait_for(&mut buffer, Duration::from_millis(10));
        }
        durable.check()?;
        let base = buffer.end;
        let header = format::encode_header(&format::StreamHeader { base, ..self.header });
        let at = buffer.data.len();
        buffer.segments.push((at, base));
        buffer.data.extend_from_slice(&header);
        buffer.end += header.len() as u64;
        drop(buffer);
        self.wake();
        Ok(base)
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

    /// Takes the buffer for a flush; `None` if there is nothing to write.
    fn take(&self, spare: Vec<u8>) -> Option<Batch> {
        let mut buffer = self.buffer.lock();
        if buffer.data.is_empty() {
            return None;
        }
        let mut data = spare;
        data.clear();
        std::mem::swap(&mut data, &mut buffer.data);
        let batch = Batch { data, end: buffer.end, segments: std::mem::take(&mut buffer.segments) };
        drop(buffer);
        self.space.notify_all();
        Some(batch)
    }
}

/// Where a logger's segments go: it writes to `file` and opens the next segment with `open`.
/// Whole pages go to the disk directly, past the page cache, as the value logger's do
/// ([`crate::durability::appender`], where the kernel's copy into fresh page-cache pages had been
/// most of the logger thread's CPU); the bytes in the files are the same.
pub struct SegmentFiles {
    /// The open segment.
    pub file: PageAppender,
    /// Creates the segment file of a base (`CreateNew`), empty.
    pub open: Box<dyn Fn(u64) -> std::io::Result<PageAppender> + Send>,
    /// Syncs the directory the segments are in.
    pub sync_dir: Box<dyn Fn() -> std::io::Result<()> + Send>,
}

impl SegmentFiles {
    /// Writes a batch: each segment's part to its file, a segment synced whole before the next
    /// one is created, the last one synced, and the directory synced if a file was created. So
    /// once the batch's end is recorded as synced, every segment before it is whole on disk.
    fn write(&mut self, batch: &Batch) -> std::io::Result<()> {
        let mut at = 0;
        for &(start, _) in &batch.segments {
            if start > at {
                self.append(&batch.data[at..start])?;
            }
            self.file.sync_data()?;
            let base = batch.end - (batch.data.len() - start) as u64;
            self.file = (self.open)(base)?;
            at = start;
        }
        self.append(&batch.data[at..])?;
        self.file.sync_data()?;
        if !batch.segments.is_empty() {
            (self.sync_dir)()?;
        }
        Ok(())
    }

    /// Appends `bytes` to the open segment (copied once into the appender's aligned staging
    /// buffer, which is what lets its whole pages skip the kernel's copy).
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.stage(|out| out.extend_from_slice(bytes));
        let appended = self.file.append_staged()?;
        debug_assert_eq!(appended, bytes.len() as u64);
        Ok(())
    }
}

/// The logger thread of `stream`: flushes every `interval` or when woken, until stopped, and
/// calls `after_sync` (the persistent vector round) after each flush. Any write or sync error is
/// fatal to the whole scheme (fsyncgate: nothing more is acknowledged).
pub fn run_logger(
    stream: &Stream,
    mut files: SegmentFiles,
    interval: Duration,
    durable: &Durable,
    after_sync: &dyn Fn(),
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
        if let Some(batch) = stream.take(std::mem::take(&mut spare)) {
            debug_assert!(
                batch.segments.iter().all(|&(start, base)| base == batch.end - (batch.data.len() - start) as u64)
            );
            if let Err(e) = files.write(&batch) {
                durable.fail(format!("log stream {}: {e}", stream.id));
                stream.space.notify_all();
                return;
            }
            durable.bytes_written.fetch_add(batch.data.len() as u64, Ordering::Relaxed);
            stream.synced.store(batch.end, Ordering::Release);
            after_sync();
            spare = batch.data;
        }
        if stop {
            return;
        }
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
    /// The lengths published as persistent points so far.
    pub published: Vec<u64>,
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

/// The scheme's persistent vector file and the rounds written to it, shared by the loggers.
#[derive(Default)]
pub struct PersistentVectorWriter {
    /// Held by the logger writing a round; `None` before the scheme starts.
    file: Mutex<Option<PersistentVectorFile>>,
    /// A logger synced more since the last round read the synced lengths.
    pending: AtomicBool,
}

impl PersistentVectorWriter {
    /// Gives the writer the file of the generation that starts.
    pub fn set_file(&self, file: PersistentVectorFile) {
        *self.file.lock() = Some(file);
    }

    /// Called by a logger after it synced its log: records every logger's synced length in the
    /// file, syncs it, then publishes them as persistent points and calls `after_publish`. If
    /// another logger is writing a round, leaves this sync to it (that logger writes rounds until
    /// none is pending). An error writing or syncing the file is fatal to the scheme, like a
    /// log's.
    pub fn record_round(&self, streams: &[Arc<Stream>], durable: &Durable, after_publish: &dyn Fn()) {
        self.pending.store(true, Ordering::SeqCst);
        loop {
            let Some(mut guard) = self.file.try_lock() else { return };
            while self.pending.swap(false, Ordering::SeqCst) {
                let Some(file) = guard.as_mut() else { return };
                if durable.failed.get().is_some() {
                    return;
                }
                let synced: Vec<u64> = streams.iter().map(|s| s.synced()).collect();
                if synced == file.published {
                    continue;
                }
                if let Err(e) = file.write_round(&synced) {
                    durable.fail(format!("cannot make the persistent vector durable in {}: {e}", file.path.display()));
                    for stream in streams {
                        stream.space.notify_all();
                    }
                    return;
                }
                let published = durable.lock.lock();
                for (stream, &len) in streams.iter().zip(&synced) {
                    debug_assert!(len >= stream.persistent(), "a persistent point went back");
                    stream.persistent.store(len, Ordering::Release);
                }
                durable.cv.notify_all();
                drop(published);
                file.published = synced;
                after_publish();
            }
            drop(guard);
            // A logger that synced after the last swap but found the file locked left its round
            // to this one: look again now that the lock is free.
            if !self.pending.load(Ordering::SeqCst) {
                return;
            }
        }
    }
}
