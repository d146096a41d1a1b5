//! One log stream: an in-memory buffer that workers append framed records to, and a logger
//! thread that flushes it with group commit (Taurus §6.1: "flushed every 5 ms or if the buffer is
//! half full, whichever happens first"; workers keep appending to a second buffer while one is
//! being written). The stream's *persistent point* is the file offset up to which everything is
//! synced; it only grows.
//!
//! At each flush the logger first appends a sync mark recording the previous persistent point,
//! so that recovery can tell damage before a synced point (corruption: an error) from a torn
//! tail (cut off).

use super::format;
use crate::durability::{DurabilityError, frame};
use crate::io::File;
use parking_lot::{Condvar, Mutex};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Notified after every flush.
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

    /// Takes the buffer for a flush, ended by a sync mark that records the persistent point
    /// before this flush; `None` if there is nothing to write. Returns the batch and the
    /// address just past it.
    fn take(&self, spare: Vec<u8>) -> Option<(Vec<u8>, u64)> {
        let mut mark = Vec::with_capacity(9);
        format::encode_sync_mark(self.persistent(), &mut mark);
        let mut framed = Vec::with_capacity(frame::HEADER_SIZE_BYTES + mark.len());
        frame::encode_block(&mark, &mut framed);
        let mut buffer = self.buffer.lock();
        if buffer.data.is_empty() {
            return None;
        }
        buffer.data.extend_from_slice(&framed);
        buffer.end += framed.len() as u64;
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
/// calls `after_flush` after each flush. After each flush it rewrites the log's synced-length
/// file (see [`format`]). Any
/// write or sync error is fatal to the whole scheme (fsyncgate: nothing more is acknowledged).
pub fn run_logger(
    stream: &Stream,
    mut file: Box<dyn File>,
    mut synced: Box<dyn File>,
    interval: Duration,
    durable: &Durable,
    after_flush: &dyn Fn(),
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
            if let Err(e) = flush(&mut file, &batch, end, stream, durable)
                .and_then(|()| synced.write_at(0, &format::encode_synced(end)))
            {
                durable.fail(format!("log stream {}: {e}", stream.id));
                stream.space.notify_all();
                return;
            }
            spare = batch;
            after_flush();
        }
        if stop {
            return;
        }
    }
}

fn flush(file: &mut Box<dyn File>, batch: &[u8], end: u64, stream: &Stream, durable: &Durable) -> std::io::Result<()> {
    file.append(batch)?;
    file.sync_data()?;
    durable.bytes_written.fetch_add(batch.len() as u64, Ordering::Relaxed);
    let _guard = durable.lock.lock();
    stream.persistent.store(end, Ordering::Release);
    durable.cv.notify_all();
    Ok(())
}
