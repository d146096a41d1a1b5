//! SiloR's parallel fuzzy checkpoints (§4) and their parallel recovery (§5.1), for every scheme
//! that logs data (value logging today; Taurus's data logging and the indexed log reuse them).
//!
//! - [`format`](mod@format): data files and the manifest, byte by byte.
//! - [`writer`]: one checkpointer: its share of every table, in key order, blocks round-robin
//!   over `m` files, a sync every 32 MB.
//! - [`loader`]: recovery of an installed checkpoint with all cores.
//! - this module: the checkpoint manager thread.
//!
//! # The protocol
//!
//! Every `interval_ms` after the previous checkpoint ended, the manager
//! 1. records `e_l`, the current epoch, and splits every table into `n` key ranges (one per log
//!    directory) from a sample of its keys;
//! 2. runs `n` checkpointers in parallel, each writing `m` files into its directory; each reads
//!    the epoch when it is done, and `e_h` is the largest of those;
//! 3. waits until `e_h ≤ pepoch`: the checkpoint may reflect updates of epochs up to `e_h`, and
//!    the deletes and overwrites it missed are in the log only up to `pepoch`;
//! 4. installs it by writing the manifest atomically (temp file, sync, rename, directory sync);
//! 5. removes the previous checkpoint's files, and asks the scheme to remove log files that hold
//!    only epochs < `e_l` ([`CheckpointHost::truncate_log`]).
//!
//! Recovery loads the checkpoint named by the manifest and replays the log's records of epochs
//! in `[e_l, pepoch]` over it (largest TID wins). Records of epochs < `e_l` are skipped: the log
//! files that held some of them may be gone, so replaying the others could resurrect a key whose
//! later delete was in a removed file.
//!
//! # Failure
//!
//! A checkpoint that fails to write (e.g. ENOSPC) is abandoned: its files are removed, the error
//! is kept in [`CheckpointStatus`], and nothing else changes — the previous checkpoint and the
//! logs stay as they were, since nothing is removed before a new manifest is durable. The scheme
//! keeps logging; the manager tries again after the interval.

pub mod format;
pub mod loader;
pub mod writer;

use crate::durability::SchemeStart;
use crate::io::FileSystem;
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use writer::{CheckpointerPlan, CheckpointerReport};

/// Checkpoint options.
#[derive(Clone, Debug)]
pub struct CheckpointOptions {
    /// Milliseconds from the end of one checkpoint to the start of the next; 0 = no checkpoints.
    pub interval_ms: u64,
    /// Files per checkpointer (SiloR's `m`: the recovery threads that will read one directory).
    pub files_per_dir: usize,
    /// Target payload size of a block.
    pub block_size_bytes: usize,
    /// Sync a checkpointer's files whenever this many bytes were written since the last sync.
    pub sync_every_bytes: u64,
}

impl CheckpointOptions {
    /// SiloR's choices: a checkpoint 10 s after the previous one, 32 MB between syncs; files per
    /// directory = the cores recovery will have.
    pub fn new(dirs: usize) -> CheckpointOptions {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        CheckpointOptions {
            interval_ms: 10_000,
            files_per_dir: (cores / dirs.max(1)).max(1),
            block_size_bytes: 1 << 20,
            sync_every_bytes: 32 << 20,
        }
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), String> {
        if self.interval_ms > 86_400_000 {
            return Err(format!("checkpoint interval {} ms is above one day", self.interval_ms));
        }
        if !(1..=256).contains(&self.files_per_dir) {
            return Err(format!("checkpoint files per directory must be 1..=256, got {}", self.files_per_dir));
        }
        if !(4096..=(32 << 20)).contains(&self.block_size_bytes) {
            return Err(format!("checkpoint block size must be 4 KiB..=32 MiB, got {}", self.block_size_bytes));
        }
        if self.sync_every_bytes < self.block_size_bytes as u64 {
            return Err("checkpoint sync interval must be at least one block".into());
        }
        Ok(())
    }
}

/// What the manager needs from the scheme it serves.
pub trait CheckpointHost: Send + Sync {
    /// The file system.
    fn fs(&self) -> &dyn FileSystem;

    /// The log directories; the manifest goes into the first.
    fn dirs(&self) -> &[PathBuf];

    /// Blocks until every transaction of an epoch ≤ `epoch` is persistent. Returns `false` if
    /// the scheme is stopping or has failed first.
    fn wait_persistent(&self, epoch: u64) -> bool;

    /// Removes the log files that hold only records of epochs < `e_l`; returns how many. Called
    /// after a checkpoint started at `e_l` is installed.
    fn truncate_log(&self, e_l: u64) -> std::io::Result<usize>;

    /// Called before a checkpoint reads its `e_l`; `false` abandons this checkpoint. Command
    /// logging uses it to log write sets from `e_l` on (see `crate::durability::command`).
    fn before_checkpoint(&self) -> bool {
        true
    }

    /// Whether the checkpoint is SiloR's reduced one, skipping versions of epochs ≥ `e_l` (the
    /// log from `e_l` on holds them). A scheme whose log replays a column patch over the row it
    /// replaced needs every version the walk sees: the skipped key's full row may be in a log of
    /// an epoch < `e_l`, which is not replayed.
    fn reduced(&self) -> bool {
        true
    }
}

/// One installed checkpoint, for reports.
#[derive(Clone, Debug, Default)]
pub struct CheckpointSummary {
    /// Its id.
    pub checkpoint_id: u64,
    /// Its epoch range.
    pub e_l: u64,
    /// See [`format::Manifest::e_h`].
    pub e_h: u64,
    /// Bytes and records written.
    pub bytes: u64,
    /// Records written.
    pub records: u64,
    /// Records skipped (epoch ≥ `e_l`).
    pub skipped: u64,
    /// Milliseconds writing, and waiting for `e_h ≤ pepoch`.
    pub write_ms: f64,
    /// See `write_ms`.
    pub wait_ms: f64,
    /// Log files removed after it was installed.
    pub log_files_removed: usize,
}

/// The manager's state, shared with the scheme.
#[derive(Default)]
pub struct CheckpointStatus {
    active: AtomicBool,
    installed: AtomicU64,
    last: Mutex<Option<CheckpointSummary>>,
    last_error: Mutex<Option<String>>,
    stop: Mutex<bool>,
    stop_cv: Condvar,
    /// Set to interrupt checkpointers in the middle of a walk.
    stopping: AtomicBool,
    /// Set to start the next checkpoint now rather than after the interval.
    now: AtomicBool,
}

impl CheckpointStatus {
    /// Whether a checkpoint is being taken now.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Checkpoints installed since the database opened.
    pub fn installed(&self) -> u64 {
        self.installed.load(Ordering::Relaxed)
    }

    /// The last installed checkpoint.
    pub fn last(&self) -> Option<CheckpointSummary> {
        self.last.lock().clone()
    }

    /// The error of the last checkpoint that was abandoned, if any.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// Whether a stop was requested.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Asks the manager to stop (a checkpoint in progress is abandoned).
    pub fn request_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        *self.stop.lock() = true;
        self.stop_cv.notify_all();
    }

    /// Asks the manager to start the next checkpoint now (tests place a checkpoint at a chosen
    /// point of a history this way).
    pub fn request_checkpoint(&self) {
        self.now.store(true, Ordering::SeqCst);
        let _guard = self.stop.lock();
        self.stop_cv.notify_all();
    }

    /// Sleeps up to `duration`, or until a checkpoint is requested; returns whether a stop was
    /// requested.
    fn sleep(&self, duration: Duration) -> bool {
        let mut stop = self.stop.lock();
        if !*stop && !self.now.swap(false, Ordering::SeqCst) {
            self.stop_cv.wait_for(&mut stop, duration);
            self.now.store(false, Ordering::SeqCst);
        }
        *stop
    }
}

/// Runs the checkpoint manager until [`CheckpointStatus::request_stop`]. `first_id` is the id
/// of the first checkpoint it takes (one above the installed one).
pub fn run_manager(
    host: Arc<dyn CheckpointHost>,
    start: SchemeStart,
    options: CheckpointOptions,
    status: Arc<CheckpointStatus>,
    first_id: u64,
) {
    if options.interval_ms == 0 {
        return;
    }
    let mut id = first_id;
    while !status.sleep(Duration::from_millis(options.interval_ms)) {
        status.active.store(true, Ordering::Relaxed);
        let outcome = take_checkpoint(host.as_ref(), &start, &options, &status, id);
        status.active.store(false, Ordering::Relaxed);
        match outcome {
            Ok(Some(summary)) => {
                *status.last.lock() = Some(summary);
                status.installed.fetch_add(1, Ordering::Relaxed);
            }
            Ok(None) => {}
            Err(message) => *status.last_error.lock() = Some(message),
        }
        // A failed attempt leaves files under this id that the next attempt replaces; a new id
        // keeps names distinct from the installed checkpoint's either way.
        id += 1;
    }
}

/// Takes and installs one checkpoint. `Ok(None)` if the scheme stopped first.
fn take_checkpoint(
    host: &dyn CheckpointHost,
    start: &SchemeStart,
    options: &CheckpointOptions,
    status: &CheckpointStatus,
    id: u64,
) -> Result<Option<CheckpointSummary>, String> {
    let began = Instant::now();
    if !host.before_checkpoint() {
        return Ok(None);
    }
    let e_l = start.epochs.current();
    // One catalog for the walk and the manifest: a table created meanwhile is all in the log.
    let catalog = start.catalog.load_full();
    let Some((reports, e_h)) = write_files(host, start, &catalog, options, status, id, e_l)? else {
        return Ok(None);
    };
    let write_ms = began.elapsed().as_secs_f64() * 1e3;
    if !host.wait_persistent(e_h) {
        return Ok(None);
    }
    let wait_ms = began.elapsed().as_secs_f64() * 1e3 - write_ms;
    let manifest = format::Manifest {
        checkpoint_id: id,
        e_l,
        e_h,
        tables: catalog
            .tables()
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id, t.schema.name.clone(), reports.iter().map(|r| r.table_records[i]).sum()))
            .collect(),
        files: reports.iter().flat_map(|r| r.files.iter().copied()).collect(),
    };
    let fs = host.fs();
    let manifest_path = host.dirs()[0].join(format::MANIFEST_FILE);
    fs.write_atomic(&manifest_path, &format::encode_manifest(&manifest)).map_err(|e| {
        format!("checkpoint {id} abandoned: cannot install the manifest {}: {e}", manifest_path.display())
    })?;
    // Installed: from here on, recovery needs only this checkpoint and the log from e_l on.
    // What cannot be removed now is removed by the next checkpoint or by recovery.
    for dir in host.dirs() {
        if let Err(e) = writer::remove_other_checkpoints(fs, dir, Some(id)) {
            let message =
                format!("checkpoint {id} installed, but older checkpoint files in {} remain: {e}", dir.display());
            *status.last_error.lock() = Some(message);
        }
    }
    let log_files_removed = host.truncate_log(e_l).unwrap_or_else(|e| {
        *status.last_error.lock() = Some(format!("checkpoint {id} installed, but old log files remain: {e}"));
        0
    });
    Ok(Some(CheckpointSummary {
        checkpoint_id: id,
        e_l,
        e_h,
        bytes: reports.iter().map(|r| r.bytes).sum(),
        records: reports.iter().map(|r| r.records).sum(),
        skipped: reports.iter().map(|r| r.skipped).sum(),
        write_ms,
        wait_ms,
        log_files_removed,
    }))
}

/// Runs one checkpointer per directory; returns their reports and `e_h`, or `None` if stopped.
/// On an error, removes the files written under `id` and returns the message.
#[allow(clippy::type_complexity)]
fn write_files(
    host: &dyn CheckpointHost,
    start: &SchemeStart,
    catalog: &crate::storage::Catalog,
    options: &CheckpointOptions,
    status: &CheckpointStatus,
    id: u64,
    e_l: u64,
) -> Result<Option<(Vec<CheckpointerReport>, u64)>, String> {
    let dirs = host.dirs();
    let parts: Vec<Vec<_>> = catalog.tables().iter().map(|t| t.split_key_space(dirs.len())).collect();
    let plans: Vec<CheckpointerPlan> = (0..dirs.len())
        .map(|d| CheckpointerPlan {
            checkpoint_id: id,
            dir: dirs[d].clone(),
            dir_index: d as u32,
            files: options.files_per_dir as u32,
            skip_from_epoch: if host.reduced() { e_l } else { u64::MAX },
            shares: catalog.tables().iter().zip(&parts).map(|(t, p)| (Arc::clone(t), p[d].clone())).collect(),
            block_size_bytes: options.block_size_bytes,
            sync_every_bytes: options.sync_every_bytes,
        })
        .collect();
    let fs = host.fs();
    let results: Vec<std::io::Result<Option<(CheckpointerReport, u64)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plans
            .iter()
            .map(|plan| {
                scope.spawn(move || {
                    let report = writer::run_checkpointer(fs, plan, &status.stopping)?;
                    // SiloR: each checkpointer reads the epoch once its files are synced.
                    Ok(report.map(|r| (r, start.epochs.current())))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(std::io::Error::other("a checkpointer panicked"))))
            .collect()
    });
    combine_results(results, e_l).map_err(|(d, e)| {
        abandon(host, id);
        format!("checkpoint {id} abandoned: writing into {}: {e}", dirs[d].display())
    })
}

/// The checkpointers' reports and `e_h`, `None` if one stopped, or the first error with the index
/// of its directory. An error wins over a stop: it must reach [`CheckpointStatus::last_error`]
/// and its files must be removed, even when another checkpointer saw the stop first.
#[allow(clippy::type_complexity)]
fn combine_results(
    results: Vec<std::io::Result<Option<(CheckpointerReport, u64)>>>,
    e_l: u64,
) -> Result<Option<(Vec<CheckpointerReport>, u64)>, (usize, std::io::Error)> {
    let mut reports = Vec::with_capacity(results.len());
    let mut stopped = false;
    let mut e_h = e_l;
    for (d, result) in results.into_iter().enumerate() {
        match result {
            Ok(Some((report, epoch))) => {
                e_h = e_h.max(epoch);
                reports.push(report);
            }
            Ok(None) => stopped = true,
            Err(e) => return Err((d, e)),
        }
    }
    Ok(if stopped { None } else { Some((reports, e_h)) })
}

/// Removes the files of an abandoned checkpoint, as far as the disk lets us (what remains is
/// removed by the next checkpoint or recovery).
fn abandon(host: &dyn CheckpointHost, id: u64) {
    for dir in host.dirs() {
        let Ok(names) = host.fs().list(dir) else { continue };
        for name in names {
            if name.to_str().and_then(format::data_file_checkpoint_id) == Some(id) {
                let _ = host.fs().remove(&dir.join(&name));
            }
        }
        let _ = host.fs().sync_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: when one checkpointer stopped (the database was closing) and another failed,
    /// the failure was dropped: `last_error` stayed empty and the failed checkpoint's files were
    /// not removed (found by the checkpoint I/O-error sweep: an EIO on a data file's sync left no
    /// trace in the status).
    #[test]
    fn a_checkpointer_error_is_kept_when_another_checkpointer_stopped() {
        let eio = || std::io::Error::from_raw_os_error(5);
        let combined = combine_results(vec![Ok(None), Err(eio())], 3);
        assert!(matches!(combined, Err((1, ref e)) if e.raw_os_error() == Some(5)), "{combined:?}");
        let combined = combine_results(vec![Err(eio()), Ok(None)], 3);
        assert!(matches!(combined, Err((0, _))), "{combined:?}");
        let report = || CheckpointerReport::default();
        assert!(matches!(combine_results(vec![Ok(Some((report(), 7))), Ok(None)], 3), Ok(None)));
        let all = combine_results(vec![Ok(Some((report(), 7))), Ok(Some((report(), 9)))], 3);
        assert!(matches!(all, Ok(Some((ref r, 9))) if r.len() == 2), "{all:?}");
    }
}
