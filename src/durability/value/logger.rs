//! SiloR's loggers (§3.4–3.5) and the distinguished thread that maintains `pepoch`.
//!
//! A logger owns one log directory and a disjoint group of workers. Each round (when a worker
//! parks a full buffer, or every `sync_interval_ms`) it:
//! 1. reads the global epoch `E`;
//! 2. for each of its workers, takes every filled buffer and the current one, and computes the
//!    worker's bound `e_w`: `E` if the worker is not committing, the epoch of its commit if it is
//!    (see [`super::worker`]);
//! 3. appends the buffers to `data.log` as framed blocks and hands them back to their workers;
//! 4. syncs the file, then publishes `e_l = min(e_w)` with the file's sequence number and synced
//!    length: every record of an epoch < `e_l` from this logger's workers is durable;
//! 5. every `rotate_epochs` epochs, closes `data.log` with an end block (its length), syncs it,
//!    renames it to `old_data.<max epoch>.<seq>` and starts a new one.
//!
//! The distinguished thread computes `pepoch = min(e_l) − 1`, writes it (with each logger's
//! durable position) to the `pepoch` file atomically and durably, and only then publishes it;
//! a transaction of epoch `e` is acknowledged once `e ≤ pepoch`. It skips a file that would
//! admit no record the last one does not, unless someone waits for more
//! ([`super::SchemeShared::want`]): an idle database syncs nothing.
//!
//! Any I/O error is fatal to the scheme (fsyncgate): the failure is recorded, `pepoch` stops
//! advancing, and every later commit fails with the recorded message.

use super::files::{self, DurablePosition, LogHeader, Pepoch};
use super::worker::{Buffer, READING, WorkerSlot};
use super::{LoggerShared, SchemeShared};
use crate::durability::appender::PageAppender;
use crate::durability::frame;
use crate::io::OpenMode;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A logger's open current file.
struct CurrentFile {
    /// Whole pages go to the disk directly, partial ones through the page cache.
    file: PageAppender,
    seq: u64,
    /// Largest epoch written to this file.
    max_epoch: u64,
    /// Epoch at which the file was started, for rotation.
    first_epoch: u64,
}

/// Runs a logger until the scheme stops or fails.
pub fn run_logger(scheme: Arc<SchemeShared>, logger: Arc<LoggerShared>, first_seq: u64) {
    if let Err(e) = logger_loop(&scheme, &logger, first_seq) {
        scheme.fail(format!("logger {} ({}): {e}", logger.id, logger.dir.display()));
    }
}

fn logger_loop(scheme: &SchemeShared, logger: &LoggerShared, first_seq: u64) -> std::io::Result<()> {
    let mut current = create_file(scheme, logger, first_seq, scheme.epochs().current())?;
    let mut synced_epoch = 0u64;
    // Bytes appended since the last sync: an idle logger publishes its advancing bound without
    // syncing a file that has nothing new.
    let mut unsynced = false;
    // The largest epoch of a record this logger has written, in any of its files.
    let mut max_record_epoch = 0u64;
    // Bytes of the files this logger closed since the scheme started (their whole lengths, end
    // blocks included): with the current file's durable length, what it has made durable.
    let mut closed_bytes = 0u64;
    loop {
        let stopping = logger.wait_for_work(Duration::from_millis(scheme.options.sync_interval_ms));
        if scheme.has_failed() {
            return Ok(());
        }
        let epoch_now = scheme.epochs().current();
        let (taken, bound) = collect(logger, epoch_now);
        let written = write_buffers(&mut current, &taken)?;
        scheme.log_bytes.fetch_add(written, Ordering::Relaxed);
        give_back(taken);
        unsynced |= written > 0;
        max_record_epoch = max_record_epoch.max(current.max_epoch);
        // `pepoch` can only move when an epoch ends, so a sync is worth its cost once per epoch
        // (the epoch manager wakes the loggers at each advance); full buffers in between are
        // written but not synced.
        let synced = epoch_now > synced_epoch || stopping;
        if synced {
            if unsynced {
                current.file.sync_data()?;
                unsynced = false;
            }
            synced_epoch = epoch_now;
            logger.publish(bound, current.seq, current.file.len_bytes(), max_record_epoch);
            logger.publish_durable_bytes(closed_bytes + current.file.len_bytes());
            scheme.wake_pepoch();
        }
        if current.max_epoch >= current.first_epoch + scheme.options.rotate_epochs {
            // A rotated file must be whole on disk: recovery reads every file older than the
            // durable position in full, so the new position below covers the old file.
            if unsynced {
                current.file.sync_data()?;
                unsynced = false;
            }
            let closed_len_bytes;
            (current, closed_len_bytes) = rotate(scheme, logger, current, epoch_now)?;
            closed_bytes += closed_len_bytes;
            logger.publish(bound, current.seq, current.file.len_bytes(), max_record_epoch);
            logger.publish_durable_bytes(closed_bytes + current.file.len_bytes());
        }
        if stopping {
            return Ok(());
        }
    }
}

/// Takes the buffers of every worker of the group and computes `e_l`.
fn collect(logger: &LoggerShared, epoch_now: u64) -> (Vec<(Arc<WorkerSlot>, Buffer)>, u64) {
    let slots = logger.slots.lock().clone();
    let mut taken = Vec::new();
    let mut bound = epoch_now;
    for slot in slots {
        let active = wait_not_reading(&slot);
        if active >= 2 {
            bound = bound.min(active - 2);
        }
        let mut buffers = slot.buffers.lock();
        let full = std::mem::take(&mut buffers.full);
        if !buffers.current.bytes.is_empty() {
            match buffers.take_free() {
                Some(fresh) => {
                    let current = std::mem::replace(&mut buffers.current, fresh);
                    drop(buffers);
                    taken.push((Arc::clone(&slot), current));
                }
                None => bound = bound.min(buffers.current.min_epoch),
            }
        }
        taken.extend(full.into_iter().map(|b| (Arc::clone(&slot), b)));
    }
    (taken, bound)
}

/// Waits while the worker is between announcing a commit and learning its epoch (a few
/// instructions on the worker's side).
fn wait_not_reading(slot: &WorkerSlot) -> u64 {
    let mut spins = 0u32;
    loop {
        let active = slot.active.load(Ordering::SeqCst);
        if active != READING {
            return active;
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Appends the taken buffers as framed blocks; returns the bytes written.
fn write_buffers(current: &mut CurrentFile, taken: &[(Arc<WorkerSlot>, Buffer)]) -> std::io::Result<u64> {
    for (_, buffer) in taken {
        current.file.stage(|out| frame::encode_block(&buffer.bytes, out));
        current.max_epoch = current.max_epoch.max(buffer.max_epoch);
    }
    current.file.append_staged()
}

/// Returns written buffers to their workers right after the write (SiloR §3.3).
fn give_back(taken: Vec<(Arc<WorkerSlot>, Buffer)>) {
    for (slot, mut buffer) in taken {
        buffer.clear();
        slot.buffers.lock().free.push(buffer);
        slot.freed.notify_all();
    }
}

fn create_file(scheme: &SchemeShared, logger: &LoggerShared, seq: u64, epoch: u64) -> std::io::Result<CurrentFile> {
    let path = logger.dir.join(files::CURRENT_LOG);
    let fs = &scheme.options.fs;
    let created = fs.open(&path, OpenMode::CreateNew)?;
    let mut file = PageAppender::new(fs.as_ref(), &path, created, 0)?;
    let header = files::encode_log_header(LogHeader {
        format: scheme.options.entry_format,
        logger: logger.id as u32,
        file_seq: seq,
    });
    file.stage(|out| out.extend_from_slice(&header));
    file.append_staged()?;
    file.sync_data()?;
    fs.sync_dir(&logger.dir)?;
    Ok(CurrentFile { file, seq, max_epoch: 0, first_epoch: epoch })
}

/// Closes the current file and starts the next; returns the new file and the closed file's
/// length, end block included.
fn rotate(
    scheme: &SchemeShared,
    logger: &LoggerShared,
    current: CurrentFile,
    epoch: u64,
) -> std::io::Result<(CurrentFile, u64)> {
    let fs = &scheme.options.fs;
    let old: PathBuf = logger.dir.join(files::old_log_name(current.max_epoch, current.seq));
    // Recovery reads a closed file whole; its end block is how it knows the file is whole.
    let mut file = current.file;
    let end = files::encode_end_block(file.len_bytes());
    file.stage(|out| out.extend_from_slice(&end));
    file.append_staged()?;
    file.sync_data()?;
    let closed_len_bytes = file.len_bytes();
    drop(file);
    fs.rename(&logger.dir.join(files::CURRENT_LOG), &old)?;
    fs.sync_dir(&logger.dir)?;
    Ok((create_file(scheme, logger, current.seq + 1, epoch)?, closed_len_bytes))
}

/// Runs the distinguished pepoch thread until the scheme stops or fails.
pub fn run_pepoch(scheme: Arc<SchemeShared>) {
    if let Err(e) = pepoch_loop(&scheme) {
        scheme.fail(format!("pepoch writer ({}): {e}", scheme.pepoch_dir().display()));
    }
}

fn pepoch_loop(scheme: &SchemeShared) -> std::io::Result<()> {
    loop {
        let stopping = scheme.wait_pepoch_work(Duration::from_millis(scheme.options.sync_interval_ms));
        if scheme.has_failed() {
            return Ok(());
        }
        let durable: Vec<(u64, DurablePosition, u64)> = scheme.loggers.iter().map(|l| l.durable()).collect();
        let min_logger_epoch = durable.iter().map(|(e, _, _)| *e).min().unwrap_or(0);
        let epoch = min_logger_epoch.saturating_sub(1);
        let checkpoint_e_l = scheme.checkpoint_e_l.load(Ordering::SeqCst);
        let checkpoint_news = checkpoint_e_l > scheme.written_checkpoint_e_l.load(Ordering::SeqCst);
        let positions: Vec<DurablePosition> = durable.iter().map(|(_, p, _)| *p).collect();
        let holes = scheme.holes.lock().clone();
        // With nothing to cover, the write is skipped, and so is the publish: it never gets
        // ahead of the file.
        let advance = epoch > scheme.pepoch() && needs_write(scheme, &durable, &positions, &holes);
        if advance || checkpoint_news {
            // Never below the published pepoch: a write for the checkpoint alone keeps the epoch.
            let epoch = epoch.max(scheme.pepoch());
            let pepoch = Pepoch { epoch, positions, holes, checkpoint_e_l };
            write_pepoch(scheme, &pepoch)?;
            *scheme.written_pepoch.lock() = pepoch;
            scheme.written_checkpoint_e_l.store(checkpoint_e_l, Ordering::SeqCst);
            scheme.publish_pepoch(epoch);
        }
        if stopping {
            return Ok(());
        }
    }
}

/// Whether advancing `pepoch` needs a new file: some durable record lies past the current
/// `pepoch` (a transaction waits for it), the durable positions or the holes changed since the
/// last file, or someone waits for a larger `pepoch` ([`SchemeShared::want`]). Otherwise the
/// new file would admit no record the old one does not (every durable record is of an epoch ≤
/// `pepoch`), so an idle database keeps its file instead of syncing one every epoch. Leaving
/// `pepoch` where it is is what a slow writer does; it is never published ahead of the file.
fn needs_write(
    scheme: &SchemeShared,
    durable: &[(u64, DurablePosition, u64)],
    positions: &[DurablePosition],
    holes: &[(u64, u64)],
) -> bool {
    let pepoch = scheme.pepoch();
    let record_past = durable.iter().any(|(_, _, max_record_epoch)| *max_record_epoch > pepoch);
    let wanted = scheme.wanted_epoch.load(Ordering::SeqCst) > pepoch;
    let written = scheme.written_pepoch.lock();
    record_past || wanted || written.positions != positions || written.holes != holes
}

fn write_pepoch(scheme: &SchemeShared, pepoch: &Pepoch) -> std::io::Result<()> {
    let path: &Path = &scheme.pepoch_dir().join(files::PEPOCH_FILE);
    scheme.options.fs.write_atomic(path, &files::encode_pepoch(pepoch))
}
