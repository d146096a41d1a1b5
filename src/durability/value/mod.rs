//! Scheme `value`: SiloR's value logging with epoch group commit (SiloR §3), and its log
//! recovery (§5).
//!
//! - [`worker`]: per-worker log buffers in on-disk format; backpressure through a bounded pool.
//! - [`logger`]: one logger per log directory writing `data.log`, rotating it every
//!   `rotate_epochs` epochs, syncing and publishing its durable epoch; the distinguished thread
//!   that writes `pepoch` and publishes it.
//! - [`files`]: names and layouts of the log files, `pepoch` and `catalog`.
//! - [`recovery`]: loading the checkpoint, then replay of the log, newest file first, largest TID
//!   wins.
//! - [`host`]: what the checkpoint manager ([`crate::durability::checkpoint`]) needs from this
//!   scheme: the persistent epoch, and removal of log files older than a checkpoint.
//!
//! # Durability contract
//!
//! A transaction of epoch `e` is acknowledged ([`LogScheme::is_durable`]) once `e ≤ pepoch`, and
//! `pepoch` is published only after the `pepoch` file that records it is synced. Every record
//! of an epoch ≤ `pepoch` lies before the durable position recorded in that file, so recovery
//! reads exactly the synced bytes; damage there is an error naming the file and offset, while
//! bytes after it (a torn tail) are never read.
//!
//! # Choices where the paper leaves one
//!
//! - The `pepoch` file also records each logger's durable position (file sequence, synced
//!   length). SiloR records only the epoch; with the positions, recovery can tell a torn tail
//!   (after the position, ignored) from corruption of acknowledged data (before it, an error).
//! - Rotated files are named `old_data.<max epoch>.<file seq>`: the sequence keeps names unique
//!   when recovery closes a `data.log` whose max epoch equals an older file's.
//! - A module load ([`LogScheme::record_module`]) takes its place in the serial order: it waits
//!   until everything committed before it is durable, then writes `catalog`; any I/O error on the
//!   way is fatal to the scheme, like a log write's.
//! - Closed log files end with an end block that records their length, so recovery can tell a
//!   closed file cut at a block boundary from a whole one (`docs/FORMAT.md`).
//! - Deleted keys are kept as tombstones (absent records with their TID) during replay so that an
//!   older insert from another file cannot resurrect them; they are swept, and secondary indexes
//!   built, after replay (PACMAN §2.3: indexes may be rebuilt at the end of replay).

pub mod files;
pub mod host;
pub mod logger;
pub mod recovery;
pub mod replay;
pub mod worker;

use super::checkpoint::{self, CheckpointOptions, CheckpointStatus};
use super::{DurabilityError, DurabilityTicket, LogScheme, SchemeStart, WorkerLog};
use crate::io::FileSystem;
use crate::io::real::RealFs;
use crate::txn::epoch::EpochManager;
use files::{DurablePosition, Pepoch};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use worker::{ValueWorkerLog, WorkerSlot};

/// Options of the value scheme.
#[derive(Clone)]
pub struct ValueOptions {
    /// Log directories, one logger each (SiloR: one per disk).
    pub log_dirs: Vec<PathBuf>,
    /// Rotate `data.log` after this many epochs (SiloR: 100).
    pub rotate_epochs: u64,
    /// A logger takes its workers' buffers at least this often, in milliseconds; it syncs when
    /// the epoch has advanced since its last sync (the epoch manager also wakes it then).
    pub sync_interval_ms: u64,
    /// Size of one worker log buffer (SiloR: 512 KB).
    pub buffer_size_bytes: usize,
    /// Buffers per worker (the backpressure bound).
    pub buffers_per_worker: usize,
    /// Recovery threads (default: available parallelism).
    pub recovery_threads: usize,
    /// The file system (the real one, or a simulated disk in tests).
    pub fs: Arc<dyn FileSystem>,
    /// Checkpoints (SiloR §4); `interval_ms = 0` turns them off.
    pub checkpoint: CheckpointOptions,
    /// What the entries are: after-images (scheme `value`) or procedure calls (scheme
    /// `command`, see [`crate::durability::command`]).
    pub entry_format: files::EntryFormat,
    /// How recovery applies the log's writes: directly (the default) or through compiled plans
    /// ([`crate::replay`]); both give the same tables and indexes.
    pub replay_mode: crate::replay::ReplayMode,
    /// Scheme `command` only: its replay engine and whether calls are logged as write sets.
    pub command: crate::durability::command::CommandOptions,
    /// How long a clean close waits for every committed epoch to become persistent before it
    /// reports that some did not (default [`SHUTDOWN_FLUSH_LIMIT_MS`]).
    pub shutdown_flush_limit_ms: u64,
}

impl ValueOptions {
    /// Defaults for the given directories.
    pub fn new(log_dirs: Vec<PathBuf>) -> ValueOptions {
        ValueOptions {
            rotate_epochs: 100,
            sync_interval_ms: 10,
            buffer_size_bytes: 512 << 10,
            buffers_per_worker: 8,
            recovery_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            fs: Arc::new(RealFs),
            checkpoint: CheckpointOptions::new(log_dirs.len()),
            entry_format: files::EntryFormat::Value,
            replay_mode: crate::replay::ReplayMode::Direct,
            command: Default::default(),
            shutdown_flush_limit_ms: SHUTDOWN_FLUSH_LIMIT_MS,
            log_dirs,
        }
    }

    fn validate(&self) -> Result<(), DurabilityError> {
        let bad = |m: String| Err(DurabilityError::Failed(format!("invalid value-logging option: {m}")));
        if self.log_dirs.is_empty() || self.log_dirs.len() > files::LOGGERS_MAX {
            return bad(format!("1..={} log directories are needed, got {}", files::LOGGERS_MAX, self.log_dirs.len()));
        }
        if self.rotate_epochs == 0 || !(1..=1000).contains(&self.sync_interval_ms) {
            return bad("rotate_epochs must be ≥ 1 and sync_interval_ms in 1..=1000".into());
        }
        if !(4096..=(64 << 20)).contains(&self.buffer_size_bytes) || !(2..=1024).contains(&self.buffers_per_worker) {
            return bad("buffer size must be 4 KiB..=64 MiB and buffers per worker 2..=1024".into());
        }
        if self.recovery_threads == 0 || self.recovery_threads > 1024 {
            return bad("recovery threads must be 1..=1024".into());
        }
        if !(1..=SHUTDOWN_FLUSH_LIMIT_MAX_MS).contains(&self.shutdown_flush_limit_ms) {
            return bad(format!("shutdown_flush_limit_ms must be 1..={SHUTDOWN_FLUSH_LIMIT_MAX_MS}"));
        }
        self.checkpoint.validate().or_else(bad)
    }
}

/// A logger's state shared with its workers and the pepoch thread.
pub struct LoggerShared {
    /// Logger id (index of its directory).
    pub id: usize,
    /// Its directory.
    pub dir: PathBuf,
    /// The slots of its workers.
    pub slots: Mutex<Vec<Arc<WorkerSlot>>>,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    stop: AtomicBool,
    /// The last published `e_l`, the durable position that covers it, and the largest epoch of
    /// a record in the log up to that position.
    durable: Mutex<(u64, DurablePosition, u64)>,
    /// Bytes this logger has made durable since the scheme started, in its files' whole lengths
    /// (headers and end blocks included): [`ValueLogging::durable_log_bytes`].
    durable_total_bytes: AtomicU64,
    failed: Arc<OnceLock<String>>,
}

impl LoggerShared {
    fn new(id: usize, dir: PathBuf, failed: Arc<OnceLock<String>>) -> LoggerShared {
        let position = DurablePosition { logger: id as u32, file_seq: 0, durable_len_bytes: 0 };
        LoggerShared {
            id,
            dir,
            slots: Mutex::new(Vec::new()),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            durable: Mutex::new((0, position, 0)),
            durable_total_bytes: AtomicU64::new(0),
            failed,
        }
    }

    /// Asks the logger to run a round now.
    pub fn wake(&self) {
        *self.wake.lock() = true;
        self.wake_cv.notify_one();
    }

    /// Waits for a wake-up or the interval; returns whether the logger should stop after this
    /// round.
    fn wait_for_work(&self, interval: Duration) -> bool {
        let mut woken = self.wake.lock();
        if !*woken {
            self.wake_cv.wait_for(&mut woken, interval);
        }
        *woken = false;
        self.stop.load(Ordering::SeqCst)
    }

    /// Publishes `e_l` with the durable position that covers it and the largest epoch of a
    /// record before that position.
    fn publish(&self, epoch: u64, file_seq: u64, durable_len_bytes: u64, max_record_epoch: u64) {
        let position = DurablePosition { logger: self.id as u32, file_seq, durable_len_bytes };
        *self.durable.lock() = (epoch, position, max_record_epoch);
    }

    /// Publishes how many bytes this logger has made durable since the scheme started.
    fn publish_durable_bytes(&self, total_bytes: u64) {
        let before = self.durable_total_bytes.swap(total_bytes, Ordering::Relaxed);
        debug_assert!(before <= total_bytes, "a logger's durable bytes never fall");
    }

    /// The last published `e_l`, position and largest record epoch.
    fn durable(&self) -> (u64, DurablePosition, u64) {
        *self.durable.lock()
    }

    /// The recorded failure, as an error.
    pub fn check_failed(&self) -> Result<(), DurabilityError> {
        match self.failed.get() {
            Some(message) => Err(DurabilityError::Failed(message.clone())),
            None => Ok(()),
        }
    }
}

/// State shared by the scheme's threads.
pub struct SchemeShared {
    options: ValueOptions,
    loggers: Vec<Arc<LoggerShared>>,
    epochs: OnceLock<Arc<EpochManager>>,
    pepoch: AtomicU64,
    pepoch_lock: Mutex<()>,
    pepoch_cv: Condvar,
    pepoch_wake: Mutex<bool>,
    pepoch_wake_cv: Condvar,
    pepoch_stop: AtomicBool,
    /// The largest epoch someone waits to see persistent ([`SchemeShared::want`]). While no
    /// record is past `pepoch` and nobody wants more, the pepoch writer leaves the file alone: an
    /// idle database does not sync a file every epoch.
    wanted_epoch: AtomicU64,
    failed: Arc<OnceLock<String>>,
    modules: Mutex<Vec<(String, String)>>,
    /// Void epoch ranges carried in every `pepoch` file (see [`files::Pepoch::holes`]).
    holes: Mutex<Vec<(u64, u64)>>,
    /// The last `pepoch` file known durable (written by the pepoch writer, whose write ends with
    /// a directory sync, or settled by recovery). A log file may be removed only if it is older
    /// than the durable file it names, and the indexed schemes' Indexer reads only up to its
    /// positions: the `pepoch` file on disk may be newer than this and not durable (renamed
    /// into place, its directory sync not done yet or failed), and a crash can take it back.
    written_pepoch: Mutex<Pepoch>,
    /// The `e_l` the next `pepoch` file carries as [`files::Pepoch::checkpoint_e_l`]: raised by
    /// log truncation before it removes anything.
    checkpoint_e_l: AtomicU64,
    /// The [`files::Pepoch::checkpoint_e_l`] of the last `pepoch` file written: log files older
    /// than a checkpoint may be removed only once a durable `pepoch` names that checkpoint.
    written_checkpoint_e_l: AtomicU64,
    /// The checkpoint manager's state.
    checkpoint: Arc<CheckpointStatus>,
    /// Command logging: the next commit sequence number (PACMAN's global order).
    pub(crate) commit_seq: Arc<AtomicU64>,
    /// Command logging: the epochs whose calls are logged as write sets (checkpoints).
    pub(crate) data_window: Arc<crate::durability::command::DataWindow>,
    /// Bytes the loggers appended to log files.
    pub(crate) log_bytes: AtomicU64,
}

impl SchemeShared {
    fn epochs(&self) -> &EpochManager {
        self.epochs.get().unwrap_or_else(|| unreachable!("threads start after the epoch manager is set"))
    }

    fn pepoch(&self) -> u64 {
        self.pepoch.load(Ordering::SeqCst)
    }

    fn pepoch_dir(&self) -> &Path {
        &self.options.log_dirs[0]
    }

    fn publish_pepoch(&self, epoch: u64) {
        let _guard = self.pepoch_lock.lock();
        self.pepoch.store(epoch, Ordering::SeqCst);
        self.pepoch_cv.notify_all();
    }

    /// Asks the pepoch writer to name the checkpoint of `e_l` and waits, bounded, until a
    /// `pepoch` file that does is durable.
    pub(crate) fn pepoch_names_checkpoint(&self, e_l: u64) -> bool {
        let scheme = self;
        scheme.checkpoint_e_l.fetch_max(e_l, Ordering::SeqCst);
        let wait_ms = 20 * scheme.options.sync_interval_ms.max(1);
        let deadline = std::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut guard = scheme.pepoch_lock.lock();
        loop {
            if scheme.written_checkpoint_e_l.load(Ordering::SeqCst) >= e_l {
                return true;
            }
            if scheme.has_failed() || scheme.pepoch_stop.load(Ordering::SeqCst) {
                return false;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            scheme.wake_pepoch();
            scheme.pepoch_cv.wait_for(&mut guard, (deadline - now).min(Duration::from_millis(10)));
        }
    }

    /// Declares that a caller waits for `pepoch ≥ epoch`, so that the pepoch writer advances the
    /// file even when no record needs it (see [`SchemeShared::wanted_epoch`]).
    pub(crate) fn want(&self, epoch: u64) {
        if self.wanted_epoch.fetch_max(epoch, Ordering::SeqCst) < epoch {
            self.wake_pepoch();
        }
    }

    pub(crate) fn wake_pepoch(&self) {
        *self.pepoch_wake.lock() = true;
        self.pepoch_wake_cv.notify_one();
    }

    fn wait_pepoch_work(&self, interval: Duration) -> bool {
        let mut woken = self.pepoch_wake.lock();
        if !*woken {
            self.pepoch_wake_cv.wait_for(&mut woken, interval);
        }
        *woken = false;
        self.pepoch_stop.load(Ordering::SeqCst)
    }

    fn has_failed(&self) -> bool {
        self.failed.get().is_some()
    }

    /// Records a fatal failure: nothing more is acknowledged.
    fn fail(&self, message: String) {
        if self.failed.set(message).is_ok() {
            let _guard = self.pepoch_lock.lock();
            self.pepoch_cv.notify_all();
        }
        for logger in &self.loggers {
            for slot in logger.slots.lock().iter() {
                slot.freed.notify_all();
            }
        }
    }
}

/// How long a clean close waits for the loggers to make every committed epoch persistent. A
/// limit, so that a stuck disk cannot hang a close forever; generous, because a loaded machine
/// (a CI runner running tests in parallel) can take seconds per epoch.
pub const SHUTDOWN_FLUSH_LIMIT_MS: u64 = 60_000;
/// The largest shutdown flush limit accepted: an hour.
pub const SHUTDOWN_FLUSH_LIMIT_MAX_MS: u64 = 3_600_000;

/// The value-logging scheme.
pub struct ValueLogging {
    shared: Arc<SchemeShared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// File sequence numbers the loggers start at (set by recovery).
    first_seq: Mutex<Vec<u64>>,
    /// What recovery found and did.
    pub recovery: Mutex<Option<recovery::RecoveryReport>>,
    shut_down: AtomicBool,
}

impl ValueLogging {
    /// A scheme over `options.log_dirs` (created if missing). Nothing is written until the
    /// database opens it ([`LogScheme::recover`], then [`LogScheme::start`]).
    pub fn new(options: ValueOptions) -> Result<ValueLogging, DurabilityError> {
        options.validate()?;
        for dir in &options.log_dirs {
            options.fs.create_dir_all(dir)?;
        }
        let failed = Arc::new(OnceLock::new());
        let loggers = (0..options.log_dirs.len())
            .map(|i| Arc::new(LoggerShared::new(i, options.log_dirs[i].clone(), Arc::clone(&failed))))
            .collect();
        let count = options.log_dirs.len();
        let shared = SchemeShared {
            options,
            loggers,
            epochs: OnceLock::new(),
            pepoch: AtomicU64::new(0),
            pepoch_lock: Mutex::new(()),
            pepoch_cv: Condvar::new(),
            pepoch_wake: Mutex::new(false),
            pepoch_wake_cv: Condvar::new(),
            pepoch_stop: AtomicBool::new(false),
            wanted_epoch: AtomicU64::new(0),
            failed,
            modules: Mutex::new(Vec::new()),
            holes: Mutex::new(Vec::new()),
            written_pepoch: Mutex::new(Pepoch::default()),
            checkpoint_e_l: AtomicU64::new(0),
            written_checkpoint_e_l: AtomicU64::new(0),
            checkpoint: Arc::new(CheckpointStatus::default()),
            commit_seq: Arc::new(AtomicU64::new(1)),
            data_window: Arc::default(),
            log_bytes: AtomicU64::new(0),
        };
        Ok(ValueLogging {
            shared: Arc::new(shared),
            threads: Mutex::new(Vec::new()),
            first_seq: Mutex::new(vec![1; count]),
            recovery: Mutex::new(None),
            shut_down: AtomicBool::new(false),
        })
    }

    /// Stops the scheme as a failed write would: nothing more is acknowledged and no later
    /// `pepoch` is written. For a scheme layered on this one whose own part failed (the
    /// `indexed-sync` Indexer: what it acknowledges must stop becoming durable too).
    pub fn fail_stop(&self, message: String) {
        self.shared.fail(message);
    }

    /// The published persistent epoch.
    pub fn pepoch(&self) -> u64 {
        self.shared.pepoch()
    }

    /// The last `pepoch` file known durable: at least the published persistent epoch, with the
    /// logger positions that make it so. A reader of the log that must not get ahead of what a
    /// crash keeps (the indexed schemes' Indexer) uses this, not the `pepoch` file on disk.
    pub(crate) fn durable_pepoch(&self) -> Pepoch {
        self.shared.written_pepoch.lock().clone()
    }

    /// Bytes of log file the loggers have synced since the scheme started (every file's whole
    /// length up to its durable position: headers and end blocks included), summed over the
    /// loggers. A reader that counts the file bytes it has passed the same way (the Indexer)
    /// knows from the difference how much durable log it has still to read.
    pub fn durable_log_bytes(&self) -> u64 {
        self.shared.loggers.iter().map(|l| l.durable_total_bytes.load(Ordering::Relaxed)).sum()
    }

    /// The checkpoint manager's state: the last checkpoint installed, the last error.
    pub fn checkpoints(&self) -> &CheckpointStatus {
        &self.shared.checkpoint
    }

    /// Runs `recover` (a recovery of these log directories: the scheme's own, or one that shares
    /// the sequential log, like the indexed scheme's) and takes over the state it leaves: the
    /// persistent epoch, file sequences, void epochs and the catalog's modules. Returns the epoch
    /// the global epoch restarts above.
    pub(crate) fn recover_with(
        &self,
        recover: impl FnOnce(
            &ValueOptions,
            &Mutex<Vec<(String, String)>>,
        ) -> Result<recovery::RecoveryReport, DurabilityError>,
    ) -> Result<u64, DurabilityError> {
        let report = recover(&self.shared.options, &self.shared.modules)?;
        self.shared.pepoch.store(report.pepoch, Ordering::SeqCst);
        *self.first_seq.lock() = report.next_file_seq.clone();
        *self.shared.holes.lock() = report.holes.clone();
        *self.shared.written_pepoch.lock() = Pepoch {
            epoch: report.pepoch,
            positions: report.positions.clone(),
            holes: report.holes.clone(),
            checkpoint_e_l: report.checkpoint_e_l,
        };
        self.shared.checkpoint_e_l.store(report.checkpoint_e_l, Ordering::SeqCst);
        self.shared.written_checkpoint_e_l.store(report.checkpoint_e_l, Ordering::SeqCst);
        let max_epoch = report.restart_after_epoch;
        *self.recovery.lock() = Some(report);
        Ok(max_epoch)
    }

    /// Has the pepoch writer name the checkpoint of `e_l` in a durable `pepoch` file before any
    /// log file is removed for it ([`files::Pepoch::checkpoint_e_l`]); `false` if that did not
    /// happen within a bounded wait (then nothing may be removed this time).
    pub(crate) fn pepoch_names_checkpoint(&self, e_l: u64) -> bool {
        self.shared.pepoch_names_checkpoint(e_l)
    }

    /// Waits, at most [`ValueOptions::shutdown_flush_limit_ms`], for the persistent epoch to
    /// cover every epoch a commit may have read. Short of that, the commits of the later epochs
    /// are lost to the next recovery (void epochs): an error the closer must see, not a clean
    /// close.
    fn flush_for_shutdown(&self) -> Result<(), DurabilityError> {
        // Not started: nothing was committed.
        let Some(epochs) = self.shared.epochs.get() else { return Ok(()) };
        epochs.advance();
        let target = epochs.current().saturating_sub(1);
        self.shared.want(target);
        let limit_ms = self.shared.options.shutdown_flush_limit_ms;
        let deadline = std::time::Instant::now() + Duration::from_millis(limit_ms);
        while self.shared.pepoch() < target && !self.shared.has_failed() {
            if std::time::Instant::now() >= deadline {
                return Err(DurabilityError::Failed(format!(
                    "close: the persistent epoch reached {} of {target} within {limit_ms} ms; \
                     transactions committed in later epochs are not durable",
                    self.shared.pepoch()
                )));
            }
            self.shared.loggers.iter().for_each(|l| l.wake());
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    fn spawn(&self, name: String, body: impl FnOnce() + Send + 'static) -> Result<(), DurabilityError> {
        let handle = std::thread::Builder::new().name(name).spawn(body)?;
        self.threads.lock().push(handle);
        Ok(())
    }
}

impl LogScheme for ValueLogging {
    fn name(&self) -> &'static str {
        match self.shared.options.entry_format {
            files::EntryFormat::Value => "value",
            files::EntryFormat::Command => "command",
        }
    }

    fn worker(&self, worker_id: usize) -> Box<dyn WorkerLog> {
        let options = &self.shared.options;
        let logger = Arc::clone(&self.shared.loggers[worker_id % self.shared.loggers.len()]);
        let slot = Arc::new(WorkerSlot::new(options.buffers_per_worker, options.buffer_size_bytes));
        logger.slots.lock().push(Arc::clone(&slot));
        let log = ValueWorkerLog::new(slot, logger, options.buffer_size_bytes);
        match options.entry_format {
            files::EntryFormat::Value => Box::new(log),
            files::EntryFormat::Command => {
                let log = super::command::CommandWorkerLog::new(log, Arc::clone(&self.shared.commit_seq));
                let log = log.with_window(Arc::clone(&self.shared.data_window));
                Box::new(log.with_calls_as_data(options.command.log_calls_as_data))
            }
        }
    }

    fn is_durable(&self, ticket: &DurabilityTicket) -> bool {
        match ticket {
            DurabilityTicket::Epoch(e) => *e <= self.shared.pepoch() && !self.shared.has_failed(),
            DurabilityTicket::Immediate => true,
            _ => false,
        }
    }

    fn wait_durable(&self, ticket: &DurabilityTicket) -> Result<(), DurabilityError> {
        let DurabilityTicket::Epoch(epoch) = ticket else {
            return if self.is_durable(ticket) {
                Ok(())
            } else {
                Err(DurabilityError::Failed(format!("scheme value cannot make {ticket:?} durable")))
            };
        };
        if *epoch > self.shared.pepoch() {
            self.shared.want(*epoch);
        }
        let mut guard = self.shared.pepoch_lock.lock();
        loop {
            if let Some(message) = self.shared.failed.get() {
                return Err(DurabilityError::Failed(message.clone()));
            }
            if *epoch <= self.shared.pepoch() {
                return Ok(());
            }
            if self.shared.pepoch_stop.load(Ordering::SeqCst) {
                return Err(DurabilityError::ShutDown);
            }
            self.shared.pepoch_cv.wait_for(&mut guard, Duration::from_millis(50));
        }
    }

    fn wait_committed_durable(&self) -> Result<(), DurabilityError> {
        // Before `start` no transaction has committed (recovery writes no log).
        let Some(epochs) = self.shared.epochs.get() else { return Ok(()) };
        // A commit that returned read an epoch no later than the current one; advancing lets
        // the loggers close that epoch now instead of at the next tick.
        let committed_before = epochs.current();
        epochs.advance();
        self.wait_durable(&DurabilityTicket::Epoch(committed_before))
    }

    fn shutdown(&self) -> Result<(), DurabilityError> {
        // Idempotent: `Database::close` and the database's drop both call it.
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return match self.shared.failed.get() {
                Some(message) => Err(DurabilityError::Failed(message.clone())),
                None => Ok(()),
            };
        }
        // A checkpoint in progress is abandoned; its files are debris the next recovery removes.
        self.shared.checkpoint.request_stop();
        // Let the loggers write what workers logged, so a clean close loses nothing.
        let flushed = self.flush_for_shutdown();
        for logger in &self.shared.loggers {
            logger.stop.store(true, Ordering::SeqCst);
            logger.wake();
        }
        self.shared.pepoch_stop.store(true, Ordering::SeqCst);
        self.shared.wake_pepoch();
        for handle in self.threads.lock().drain(..) {
            let _ = handle.join();
        }
        match self.shared.failed.get() {
            Some(message) => Err(DurabilityError::Failed(message.clone())),
            None => flushed,
        }
    }

    fn record_module(&self, file_name: &str, source: &str) -> Result<(), DurabilityError> {
        // A failed scheme records nothing more: a module loaded now would be acknowledged
        // after the failure.
        if let Some(message) = self.shared.failed.get() {
            return Err(DurabilityError::Failed(message.clone()));
        }
        // A module takes its place in the serial order: what was committed before it must be
        // durable before the catalog that holds it is, or a crash could keep the module and lose
        // those commits (a state that is no prefix of the history).
        self.wait_committed_durable()?;
        let mut modules = self.shared.modules.lock();
        modules.push((file_name.to_string(), source.to_string()));
        let path = self.shared.pepoch_dir().join(files::CATALOG_FILE);
        if let Err(e) = self.shared.options.fs.write_atomic(&path, &files::encode_catalog(&modules)) {
            modules.pop();
            // Fatal like any other I/O error of the scheme (fsyncgate): after a failed sync the
            // directory or the file may hold anything, so nothing more is acknowledged.
            let message = format!("cannot record the catalog in {}: {e}", path.display());
            self.shared.fail(message.clone());
            return Err(DurabilityError::Failed(message));
        }
        Ok(())
    }

    fn recover(&self, db: &crate::db::Database) -> Result<u64, DurabilityError> {
        self.recover_with(|options, modules| match options.entry_format {
            files::EntryFormat::Value => recovery::recover(options, db, modules),
            files::EntryFormat::Command => {
                let (report, next_seq) = super::command::recovery::recover(options, db, modules)?;
                self.shared.commit_seq.store(next_seq, Ordering::SeqCst);
                Ok(report)
            }
        })
    }

    fn start(&self, start: SchemeStart) -> Result<(), DurabilityError> {
        let epochs = Arc::clone(&start.epochs);
        if self.shared.epochs.set(Arc::clone(&epochs)).is_err() {
            return Err(DurabilityError::Failed("the value scheme was started twice".into()));
        }
        let loggers = self.shared.loggers.clone();
        epochs.observe(Box::new(move |_| loggers.iter().for_each(|l| l.wake())));
        let first_seq = self.first_seq.lock().clone();
        for (i, logger) in self.shared.loggers.iter().enumerate() {
            let (scheme, logger, seq) = (Arc::clone(&self.shared), Arc::clone(logger), first_seq[i]);
            self.spawn(format!("lazarus-logger-{i}"), move || logger::run_logger(scheme, logger, seq))?;
        }
        let scheme = Arc::clone(&self.shared);
        self.spawn("lazarus-pepoch".into(), move || logger::run_pepoch(scheme))?;
        let options = self.shared.options.checkpoint.clone();
        if options.interval_ms > 0 {
            let value_host = host::ValueHost::new(Arc::clone(&self.shared));
            let host: Arc<dyn checkpoint::CheckpointHost> = match self.shared.options.entry_format {
                files::EntryFormat::Value => Arc::new(value_host),
                // A fuzzy checkpoint made transactionally consistent by write sets logged while
                // it runs (PACMAN §2.2; see `durability::command`).
                files::EntryFormat::Command => Arc::new(crate::durability::command::CommandHost::new(
                    value_host,
                    Arc::clone(&self.shared.data_window),
                    Arc::clone(&epochs),
                )),
            };
            let status = Arc::clone(&self.shared.checkpoint);
            let first_id = self.recovery.lock().as_ref().map_or(1, |r| r.next_checkpoint_id);
            self.spawn("lazarus-checkpoint".into(), move || {
                checkpoint::run_manager(host, start, options, status, first_id)
            })?;
        }
        Ok(())
    }

    fn checkpoint_active(&self) -> bool {
        self.shared.checkpoint.is_active()
    }

    fn log_bytes_written(&self) -> u64 {
        self.shared.log_bytes.load(Ordering::Relaxed)
    }
}
