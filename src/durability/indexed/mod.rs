//! Schemes `indexed` and `indexed-sync`: instant recovery from an indexed log (the paper in
//! `papers/003`, §4: AILIR and SILIR). Design and measurements: `docs/indexed.md`.
//!
//! - The sequential log is the value scheme's, unchanged: the scheme wraps a
//!   [`ValueLogging`] and forwards every worker's commits to it.
//! - The Indexer ([`indexer`]) reads the durable sequential log and keeps each key's newest
//!   committed image (or tombstone) in an on-disk B-tree ([`store`], redb), with the position it
//!   has indexed up to, in one write transaction.
//!   - `indexed` (AILIR): asynchronously to commit. A transaction is acknowledged when its epoch
//!     is persistent in the sequential log, exactly as in `value`.
//!   - `indexed-sync` (SILIR): the paper writes update records "directly to an indexed log
//!     synchronously to the transaction commit". Here the sequential log is still written (it is
//!     what makes an epoch persistent), and a transaction is acknowledged only once the Indexer
//!     has put its epoch into the B-tree: the same logs, with indexing on the commit path.
//! - On open after a crash ([`LogScheme::recover`]): the catalog is rebuilt, the unindexed tail
//!   of the sequential log is read into memory (not indexed: the running Indexer indexes it
//!   later), the directory is settled as value recovery does, and the database opens at once
//!   with every table behind a restore gate; the Restorer ([`restorer`]) walks the B-tree in key
//!   order in the background, merging the tail's newer writes, while transactions fetch the keys
//!   they touch on demand.
//! - Checkpoints: SiloR's fuzzy checkpoints are taken as in `value` (after a restore has ended),
//!   so the sequential log is truncated; a sequential file is removed only once it is older than
//!   the checkpoint and fully indexed. The indexed log needs no truncation: it holds one image
//!   per live key and tombstones that are purged as the indexed epoch passes them, so it is
//!   bounded by the database's size (redb reuses freed pages).
//! - The indexed log missing or damaged while a sequential log exists: it is rebuilt. The
//!   database is recovered the `value` way (checkpoint, then the sequential log; blocking), and
//!   the B-tree is written from memory. The restart is then no longer instant, but correct.

pub mod backend;
pub mod governor;
pub mod indexer;
pub mod restorer;
pub mod store;

use super::checkpoint::{self, CheckpointHost};
use super::value::recovery::{self, RecoveryReport};
use super::value::{ValueLogging, ValueOptions, files};
use super::{DurabilityError, DurabilityTicket, LogScheme, SchemeStart, WorkerLog};
use crate::io::FileSystem;
use indexer::Indexer;
use parking_lot::{Condvar, Mutex};
use restorer::{RestoreProgress, RestoreSettings, Restorer};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use store::{IndexStore, LogPosition, Progress};

/// The default of [`IndexedOptions::walk_defer_max_ms`].
pub const WALK_DEFER_MAX_MS: u64 = 10_000;
/// Most [`IndexedOptions::walk_defer_max_ms`] accepted.
const WALK_DEFER_LIMIT_MS: u64 = 600_000;
/// The default of [`IndexedOptions::tail_in_memory_max_bytes`]: the keys, rows and entries read
/// take about 1.5× the log's bytes of memory until the walk ends (an estimate from their sizes), and the read takes 3–9 ms a MB
/// on this project's VMs (`docs/PERFORMANCE.md`, "Instant recovery", "Session 56") against
/// ≈ 25 ms a MB for indexing.
pub const TAIL_IN_MEMORY_MAX_BYTES: u64 = 1 << 30;
/// Most [`IndexedOptions::tail_in_memory_max_bytes`] accepted.
pub const TAIL_IN_MEMORY_LIMIT_BYTES: u64 = 16 << 30;
/// The default of [`IndexedOptions::unindexed_max_bytes`]: a restart reads a tail this long in
/// about 0.1 s on this project's VMs (3 ms a MB; up to 9 in their slow sittings). Half of it held
/// write-only loads for a second after a restore (`docs/indexed.md`, "The Indexer's lag is
/// bounded").
pub const UNINDEXED_MAX_BYTES: u64 = 32 << 20;
/// Most [`IndexedOptions::unindexed_max_bytes`] accepted.
pub const UNINDEXED_LIMIT_BYTES: u64 = TAIL_IN_MEMORY_LIMIT_BYTES;

/// AILIR or SILIR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexMode {
    /// Indexing is asynchronous to commit (AILIR, scheme `indexed`).
    Async,
    /// A transaction is acknowledged once it is indexed (SILIR, scheme `indexed-sync`).
    Sync,
}

/// Options of the indexed schemes.
#[derive(Clone)]
pub struct IndexedOptions {
    /// The sequential log's options (the value scheme's); its checkpoint options apply to the
    /// checkpoints this scheme runs.
    pub value: ValueOptions,
    /// AILIR or SILIR.
    pub mode: IndexMode,
    /// How often the asynchronous Indexer looks for newly persistent epochs, in milliseconds
    /// (the synchronous one looks every millisecond: it is on the commit path).
    pub index_interval_ms: u64,
    /// Start the Restorer's walk paused (tests; see [`IndexedLogging::set_restore_paused`]).
    pub restore_paused: bool,
    /// Run redb's integrity check when the indexed log is opened at a restart: damage anywhere in
    /// the live B-tree is then found before the database opens (and the indexed log rebuilt),
    /// at the price of reading the whole file first. Off by default: the restart would no longer
    /// be instant (`docs/indexed.md`, "Damage to the indexed log").
    pub verify_on_open: bool,
    /// Walker threads of the restore after a restart (1..=16; `None`: twice the cores, at least
    /// 2). Fewer walkers leave more of a small machine to the requests served during the
    /// restore and make the restore itself slower under load (`docs/indexed.md`, "Walkers").
    pub restore_walkers: Option<usize>,
    /// Longest the asynchronous Indexer defers its rounds while a restore walks, in
    /// milliseconds (0: it never defers; at most 600,000). A crash during the restore leaves at
    /// most this long of the clients' writes, beside what was unindexed before, for the next
    /// start to read before it opens (`docs/indexed.md`, "The Indexer waits for the walk").
    pub walk_defer_max_ms: u64,
    /// Longest unindexed tail, in bytes of sequential log, that a restart reads into memory
    /// (`docs/indexed.md`, "The tail in memory, not in the B-tree"); a longer one (an Indexer
    /// that failed or fell far behind before the crash) is indexed into the B-tree before the
    /// database opens, as the paper does, in bounded batches. At most
    /// [`TAIL_IN_MEMORY_LIMIT_BYTES`].
    pub tail_in_memory_max_bytes: u64,
    /// AILIR: the most sequential log, in bytes, written since the open and not yet indexed,
    /// before acknowledgements wait for the Indexer (0: no bound). It bounds the tail a crash
    /// leaves for the restart to read before it listens: a write load faster than the Indexer
    /// is held to the Indexer's pace instead. The tail a restart read and the writes made while
    /// its restore walks are not counted; the Indexer indexes them after the walk, or after
    /// `walk_defer_max_ms` (`docs/indexed.md`, "The Indexer's lag is bounded"). At most
    /// [`UNINDEXED_LIMIT_BYTES`]; SILIR's acknowledgements wait for the Indexer anyway.
    pub unindexed_max_bytes: u64,
    /// The most of the machine's CPU the restore's walk takes while the database serves
    /// requests, in (0, 1] (1: as much as the kernel gives it). Unloaded, the walk runs at full
    /// speed whatever this says (`docs/indexed.md`, "The walk's share of the CPU").
    pub restore_cpu_share: f64,
    /// How far the walk's share falls from the restore's start to its end, in [0, 0.9]: it
    /// starts above `restore_cpu_share` and ends at `restore_cpu_share × (1 − restore_front_load)`,
    /// the restore as long as at the constant share (`docs/indexed.md`, "A share that falls as
    /// the restore goes on"). 0: the constant share.
    pub restore_front_load: f64,
    /// Hold the walk (and the sizing of the hash index before it) until a server says it serves
    /// ([`crate::server::RecoveryStatus::serving`]), at most
    /// [`restorer::AWAIT_SERVING_MAX_MS`]: the walk's threads would otherwise take the CPU from
    /// the server's own start (`docs/indexed.md`, "The walk waits for the server"). Off by
    /// default (an embedded database restores from its open on); `lazarus serve` sets it.
    pub restore_awaits_serving: bool,
    /// With `restore_awaits_serving`: how long after the server serves the walk starts, in
    /// milliseconds (at most [`restorer::RESTORE_START_DELAY_MAX_MS`]), so that the first
    /// requests have the machine (`docs/indexed.md`, "The first replies").
    pub restore_start_delay_ms: u64,
    /// Put the process in small (4 KiB) pages from [`IndexedLogging::new`] until the restore's
    /// walk starts, or until the open ends when there is nothing to restore: the server's
    /// threads start and its first requests are answered meanwhile, and on this project's VMs
    /// the huge pages they would fault in are slow to get after a restart
    /// ([`crate::allocator::SmallPages`]; `docs/indexed.md`, "The first replies"). Process-wide:
    /// `lazarus serve` sets it; an embedding program that cares about its pages should not.
    pub small_pages_until_walk: bool,
}

impl IndexedOptions {
    /// Defaults over `log_dirs`.
    pub fn new(log_dirs: Vec<PathBuf>, mode: IndexMode) -> IndexedOptions {
        IndexedOptions {
            value: ValueOptions::new(log_dirs),
            mode,
            index_interval_ms: 20,
            restore_paused: false,
            verify_on_open: false,
            restore_walkers: None,
            walk_defer_max_ms: WALK_DEFER_MAX_MS,
            tail_in_memory_max_bytes: TAIL_IN_MEMORY_MAX_BYTES,
            unindexed_max_bytes: UNINDEXED_MAX_BYTES,
            restore_cpu_share: restorer::RESTORE_CPU_SHARE,
            restore_front_load: restorer::RESTORE_FRONT_LOAD,
            restore_awaits_serving: false,
            restore_start_delay_ms: restorer::RESTORE_START_DELAY_MS,
            small_pages_until_walk: false,
        }
    }
}

/// How the last open recovered.
#[derive(Clone, Debug, Default)]
pub struct IndexedRecoveryReport {
    /// `fresh` (nothing to recover), `instant` (tail read, restore in the background) or
    /// `rebuilt` (the indexed log was missing, damaged or ahead of the durable `pepoch`: blocking
    /// value recovery, B-tree rebuilt).
    pub kind: &'static str,
    /// Why the indexed log was rebuilt, when it was.
    pub rebuild_reason: Option<String>,
    /// Bytes of sequential log read into memory before opening (the unindexed tail).
    pub tail_bytes: u64,
    /// Records of that tail.
    pub tail_writes: u64,
    /// Milliseconds opening the indexed log (redb's open after a crash).
    pub store_open_ms: f64,
    /// Milliseconds reading the unindexed tail (or indexing it).
    pub tail_ms: f64,
    /// The tail was longer than [`IndexedOptions::tail_in_memory_max_bytes`] and was indexed
    /// into the B-tree before opening.
    pub tail_indexed: bool,
    /// Milliseconds from the start of recovery until the database could open.
    pub open_ms: f64,
}

/// State shared with the Indexer thread.
struct Shared {
    inner: ValueLogging,
    options: IndexedOptions,
    /// The indexed log; released at shutdown (redb locks its file while it is open).
    store: parking_lot::RwLock<Option<Arc<IndexStore>>>,
    indexer: Mutex<Option<Indexer>>,
    /// Every record of an epoch ≤ this is in the indexed log.
    indexed_epoch: AtomicU64,
    /// Bytes of sequential log between the Indexer's resume positions and the durable positions
    /// at the open (the tail read into memory, which the running Indexer reads again). The
    /// durable log since those positions is this plus the loggers' count
    /// ([`Shared::durable_bytes`]), in which the Indexer's count is its position.
    unindexed_at_open_bytes: AtomicU64,
    /// Where, in [`Shared::durable_bytes`]'s count, the log that
    /// [`IndexedOptions::unindexed_max_bytes`] bounds begins: the tail a restart read and the
    /// writes made while the restore walked are left out.
    bounded_from_bytes: AtomicU64,
    /// [`Indexer::passed_bytes`] after its last round.
    indexer_passed_bytes: AtomicU64,
    indexed_lock: Mutex<()>,
    indexed_cv: Condvar,
    stop: AtomicBool,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    failed: OnceLock<String>,
    /// The resume file sequence of each logger: older sequential files are fully indexed.
    resume_seqs: Mutex<Vec<u64>>,
    /// The global epoch, once the scheme runs (SILIR's module loads advance it).
    epochs: OnceLock<Arc<crate::txn::epoch::EpochManager>>,
    /// The restore of this open, while it is wanted (progress, pausing, waiting; the
    /// asynchronous Indexer waits while it walks). It holds the indexed log open: shutdown
    /// drops it once the walk has ended.
    restorer: Mutex<Option<Arc<Restorer>>>,
}

impl Shared {
    fn fail(&self, message: String) {
        // Say why where an operator looks. SILIR acknowledges only indexed epochs, so nothing
        // more is acknowledged; AILIR acknowledges from the sequential log, which is unharmed.
        let consequence = match self.options.mode {
            IndexMode::Sync => "nothing more is acknowledged",
            IndexMode::Async => {
                "indexing stops (commits are still acknowledged from the sequential log, which is kept from the \
                 last indexed position on; the next start indexes it or rebuilds the indexed log)"
            }
        };
        eprintln!("lazarus: the indexed log failed, {consequence}: {message}");
        if self.options.mode == IndexMode::Sync {
            // Fail-stop for the sequential log too: commits made after this are never
            // acknowledged, so they must not become persistent either (a module load refused now
            // would otherwise leave later commits without it in the recovered history).
            self.inner.fail_stop(format!("the indexed log failed: {message}"));
        }
        let _ = self.failed.set(message);
        let _guard = self.indexed_lock.lock();
        self.indexed_cv.notify_all();
    }

    fn check_failed(&self) -> Result<(), DurabilityError> {
        match self.failed.get() {
            Some(m) => Err(DurabilityError::Failed(m.clone())),
            None => Ok(()),
        }
    }

    /// One Indexer round against the `pepoch` file as it is now. A failed round is recorded as
    /// the Indexer's failure before the Indexer is released, and every round after it is refused.
    fn index_round(&self) -> Result<(), DurabilityError> {
        let Some(store) = self.store.read().clone() else { return Ok(()) };
        // Not the `pepoch` file on disk: it is renamed into place before its directory is
        // synced, and after a failed (or not yet done) sync a crash takes it back. Indexing from
        // it put records of epochs that then became void into the indexed log, with a resume
        // position past the durable length of a file that recovery then closed shorter (the
        // Indexer stalled on it, looking for the end block behind its cursor).
        let pepoch = self.inner.durable_pepoch();
        let mut guard = self.indexer.lock();
        // Checked under the Indexer's lock: a failed round leaves the Indexer's memory ahead of
        // the indexed log (the batch it read and the pending records it took out to index are
        // gone, but its cursors moved past them). A round that waited for the lock meanwhile
        // would commit those cursors as the resume position, and a restart would never re-read
        // what the failed round lost. Only a restart (from the last committed position) indexes
        // again.
        self.check_failed()?;
        let Some(indexer) = guard.as_mut() else { return Ok(()) };
        if pepoch.epoch <= indexer.indexed_epoch() && indexer.pending_writes() == 0 {
            return Ok(());
        }
        if let Err(e) = indexer.round(&store, &pepoch) {
            // Recorded before the lock is released (see above).
            self.fail(format!("the indexer failed: {e}"));
            return Err(e);
        }
        *self.resume_seqs.lock() = indexer.resume_file_seqs();
        let epoch = indexer.indexed_epoch();
        self.indexer_passed_bytes.store(indexer.passed_bytes(), Ordering::SeqCst);
        drop(guard);
        let _guard = self.indexed_lock.lock();
        self.indexed_epoch.fetch_max(epoch, Ordering::SeqCst);
        self.indexed_cv.notify_all();
        Ok(())
    }

    fn run_indexer(&self) {
        let interval = match self.options.mode {
            IndexMode::Async => Duration::from_millis(self.options.index_interval_ms),
            IndexMode::Sync => Duration::from_millis(1),
        };
        let mut seen = 0;
        let mut last_round = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            let pepoch = self.inner.pepoch();
            // Asked once a look: the restorer's lock is the walkers' and INFO's too.
            let walking = self.options.mode == IndexMode::Async && self.walking();
            if walking {
                // The bound leaves out what is written while the walk runs (below).
                self.bounded_from_bytes.fetch_max(self.durable_bytes(), Ordering::SeqCst);
            }
            if pepoch > seen && !self.yields_to_walk(walking, last_round.elapsed()) {
                // A failed round has recorded the failure (`index_round`).
                if self.index_round().is_err() {
                    return;
                }
                seen = pepoch;
                last_round = Instant::now();
            }
            let mut woken = self.wake.lock();
            if !*woken {
                self.wake_cv.wait_for(&mut woken, interval);
            }
            *woken = false;
        }
    }

    /// Whether this round is skipped because a restore walks: on two cores the Indexer's rounds
    /// (B-tree writes of the clients' new records) take CPU from the walk and the requests, and
    /// an asynchronous Indexer's position is no one's durability (SILIR's commits wait for it,
    /// so it never yields). At most [`IndexedOptions::walk_defer_max_ms`] since the last round,
    /// which bounds the tail a crash during a long restore leaves to index before the next start.
    /// `walking`: an AILIR restore walks now.
    fn yields_to_walk(&self, walking: bool, since_last_round: Duration) -> bool {
        walking && since_last_round < Duration::from_millis(self.options.walk_defer_max_ms)
    }

    /// Whether a restore of this open is walking.
    fn walking(&self) -> bool {
        self.restorer.lock().as_ref().is_some_and(|r| r.walking())
    }

    /// Bytes of durable sequential log from the Indexer's resume positions at the open: the tail
    /// read then and what the loggers made durable since. The Indexer's count of the bytes it
    /// passed ([`Indexer::passed_bytes`]) is its position in the same count: both are of whole
    /// file bytes, so they agree up to the end blocks recovery appends to the files it closes.
    fn durable_bytes(&self) -> u64 {
        self.unindexed_at_open_bytes.load(Ordering::SeqCst) + self.inner.durable_log_bytes()
    }

    /// Bytes of durable sequential log not yet indexed: what a restart now would read before
    /// it listens (less the records of epochs a crash would void).
    fn unindexed_bytes(&self) -> u64 {
        self.durable_bytes().saturating_sub(self.indexer_passed_bytes.load(Ordering::SeqCst))
    }

    /// The part of [`Shared::unindexed_bytes`] that the acknowledgements' bound counts: not the
    /// tail this start read nor what was written while its restore walked (`bounded_from_bytes`).
    /// A restart's first writes must not wait for the round that indexes the tail, and the
    /// Indexer leaves the CPU to the walk (`yields_to_walk`), so writes during it would each
    /// wait for the walk's end.
    fn unindexed_bounded_bytes(&self) -> u64 {
        let from = self.bounded_from_bytes.load(Ordering::SeqCst).max(self.indexer_passed_bytes.load(Ordering::SeqCst));
        self.durable_bytes().saturating_sub(from)
    }

    /// Whether an AILIR acknowledgement of `epoch` may go out as far as the Indexer's lag is
    /// concerned: its records are indexed, or the lag is within
    /// [`IndexedOptions::unindexed_max_bytes`]. Once the Indexer has failed, or is stopping,
    /// the sequential log alone decides (it holds every acknowledged write either way).
    fn within_lag(&self, epoch: u64) -> bool {
        let max_bytes = self.options.unindexed_max_bytes;
        self.options.mode != IndexMode::Async
            || max_bytes == 0
            || epoch <= self.indexed_epoch.load(Ordering::SeqCst)
            || self.unindexed_bounded_bytes() <= max_bytes
            || self.failed.get().is_some()
            || self.stop.load(Ordering::SeqCst)
    }

    fn stop_indexer(&self) {
        self.stop.store(true, Ordering::SeqCst);
        *self.wake.lock() = true;
        self.wake_cv.notify_all();
    }
}

/// The indexed-log scheme.
pub struct IndexedLogging {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    checkpoint_status: Arc<checkpoint::CheckpointStatus>,
    next_checkpoint_id: AtomicU64,
    /// What the last open did.
    pub report: Mutex<IndexedRecoveryReport>,
    shut_down: AtomicBool,
    /// [`IndexedOptions::small_pages_until_walk`]: held from `new` until the open hands it to
    /// the restore ([`Restorer::new`]) or ends.
    small_pages: Mutex<Option<crate::allocator::SmallPages>>,
}

impl IndexedLogging {
    /// A scheme over `options.value.log_dirs` (created if missing).
    pub fn new(options: IndexedOptions) -> Result<IndexedLogging, DurabilityError> {
        if !(1..=10_000).contains(&options.index_interval_ms) {
            return Err(DurabilityError::Failed("index interval must be 1..=10000 ms".into()));
        }
        if options.tail_in_memory_max_bytes > TAIL_IN_MEMORY_LIMIT_BYTES {
            return Err(DurabilityError::Failed(format!(
                "the unindexed tail read into memory must be at most {TAIL_IN_MEMORY_LIMIT_BYTES} bytes, not {}",
                options.tail_in_memory_max_bytes
            )));
        }
        if options.unindexed_max_bytes > UNINDEXED_LIMIT_BYTES {
            return Err(DurabilityError::Failed(format!(
                "the unindexed log's bound must be at most {UNINDEXED_LIMIT_BYTES} bytes (0: none), not {}",
                options.unindexed_max_bytes
            )));
        }
        if options.walk_defer_max_ms > WALK_DEFER_LIMIT_MS {
            return Err(DurabilityError::Failed(format!(
                "the Indexer's deferral during a restore must be 0..={WALK_DEFER_LIMIT_MS} ms, not {}",
                options.walk_defer_max_ms
            )));
        }
        if !(options.restore_cpu_share > 0.0 && options.restore_cpu_share <= 1.0) {
            return Err(DurabilityError::Failed(format!(
                "the restore's share of the CPU must be in (0, 1], not {}",
                options.restore_cpu_share
            )));
        }
        if !(0.0..=governor::FRONT_LOAD_MAX).contains(&options.restore_front_load) {
            return Err(DurabilityError::Failed(format!(
                "the restore's front load must be in [0, {}], not {}",
                governor::FRONT_LOAD_MAX,
                options.restore_front_load
            )));
        }
        if options.restore_start_delay_ms > restorer::RESTORE_START_DELAY_MAX_MS {
            return Err(DurabilityError::Failed(format!(
                "the restore's start delay must be 0..={} ms, not {}",
                restorer::RESTORE_START_DELAY_MAX_MS,
                options.restore_start_delay_ms
            )));
        }
        if options.restore_walkers.is_some_and(|w| !(1..=restorer::WALKERS_MAX).contains(&w)) {
            return Err(DurabilityError::Failed(format!(
                "restore walkers must be 1..={}, not {}",
                restorer::WALKERS_MAX,
                options.restore_walkers.unwrap_or_default()
            )));
        }
        // The value scheme must not truncate its log on its own: this scheme's checkpoints
        // remove only files the Indexer is done with.
        let mut value = options.value.clone();
        value.checkpoint.interval_ms = 0;
        let inner = ValueLogging::new(value)?;
        let count = options.value.log_dirs.len();
        let small_pages = options.small_pages_until_walk.then(crate::allocator::SmallPages::hold);
        let shared = Shared {
            inner,
            options,
            store: parking_lot::RwLock::new(None),
            indexer: Mutex::new(None),
            indexed_epoch: AtomicU64::new(0),
            unindexed_at_open_bytes: AtomicU64::new(0),
            bounded_from_bytes: AtomicU64::new(0),
            indexer_passed_bytes: AtomicU64::new(0),
            indexed_lock: Mutex::new(()),
            indexed_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            failed: OnceLock::new(),
            resume_seqs: Mutex::new(vec![0; count]),
            epochs: OnceLock::new(),
            restorer: Mutex::new(None),
        };
        Ok(IndexedLogging {
            shared: Arc::new(shared),
            threads: Mutex::new(Vec::new()),
            checkpoint_status: Arc::new(checkpoint::CheckpointStatus::default()),
            next_checkpoint_id: AtomicU64::new(1),
            report: Mutex::new(IndexedRecoveryReport::default()),
            shut_down: AtomicBool::new(false),
            small_pages: Mutex::new(small_pages),
        })
    }

    /// The sequential log's scheme.
    pub fn sequential(&self) -> &ValueLogging {
        &self.shared.inner
    }

    /// Every record of an epoch ≤ this is in the indexed log.
    pub fn indexed_epoch(&self) -> u64 {
        self.shared.indexed_epoch.load(Ordering::SeqCst)
    }

    /// Indexes everything persistent now and returns the indexed epoch (tests, tools).
    pub fn index_now(&self) -> Result<u64, DurabilityError> {
        self.shared.index_round()?;
        Ok(self.indexed_epoch())
    }

    /// Bytes of durable sequential log not yet indexed: about what a restart now would read
    /// before it opens ([`IndexedOptions::unindexed_max_bytes`] bounds the part written since
    /// this open's restore).
    pub fn unindexed_bytes(&self) -> u64 {
        self.shared.unindexed_bytes()
    }

    /// Why the Indexer stopped, if it failed (an I/O error on the indexed log or the sequential
    /// log). Under `indexed-sync` nothing is acknowledged after it; under `indexed` commits go
    /// on being acknowledged from the sequential log.
    pub fn indexer_error(&self) -> Option<String> {
        self.shared.failed.get().cloned()
    }

    /// Holds the Indexer between rounds until the guard is dropped (tests copy the directory as
    /// a crash would leave it, without a round writing the indexed log meanwhile).
    pub fn hold_indexer(&self) -> impl Drop + '_ {
        self.shared.indexer.lock()
    }

    /// The restore's progress; `None` when this open restored nothing in the background.
    pub fn restore_progress(&self) -> Option<RestoreProgress> {
        self.shared.restorer.lock().as_ref().map(|r| r.progress())
    }

    /// Holds or releases the Restorer's walk.
    pub fn set_restore_paused(&self, paused: bool) {
        if let Some(r) = self.shared.restorer.lock().as_ref() {
            r.set_paused(paused);
        }
    }

    /// Blocks until the restore has ended (at once if there is none).
    pub fn wait_restored(&self) {
        let restorer = self.shared.restorer.lock().clone();
        if let Some(r) = restorer {
            r.wait_done();
        }
    }

    /// The checkpoint manager's state.
    pub fn checkpoints(&self) -> &checkpoint::CheckpointStatus {
        &self.checkpoint_status
    }

    /// Blocks until an AILIR acknowledgement of `epoch` is within the Indexer's lag
    /// ([`Shared::within_lag`]); each round's end wakes it.
    fn wait_within_lag(&self, epoch: u64) {
        let mut guard = self.shared.indexed_lock.lock();
        while !self.shared.within_lag(epoch) {
            self.shared.indexed_cv.wait_for(&mut guard, Duration::from_millis(20));
        }
    }

    /// Blocks until every record of an epoch ≤ `epoch` is indexed; fails once the Indexer has.
    fn wait_indexed(&self, epoch: u64) -> Result<(), DurabilityError> {
        let mut guard = self.shared.indexed_lock.lock();
        loop {
            self.shared.check_failed()?;
            if epoch <= self.indexed_epoch() {
                return Ok(());
            }
            if self.shared.stop.load(Ordering::SeqCst) {
                return Err(DurabilityError::ShutDown);
            }
            self.shared.indexed_cv.wait_for(&mut guard, Duration::from_millis(20));
        }
    }

    fn spawn(&self, name: &str, body: impl FnOnce() + Send + 'static) -> Result<(), DurabilityError> {
        let handle = std::thread::Builder::new().name(name.into()).spawn(body)?;
        self.threads.lock().push(handle);
        Ok(())
    }

    fn index_path(&self) -> PathBuf {
        self.shared.options.value.log_dirs[0].join(store::INDEX_FILE)
    }

    /// Recovery of the sequential-log files through the indexed log (module docs).
    fn recover_instant(
        &self,
        db: &crate::db::Database,
        options: &ValueOptions,
        modules: &Mutex<Vec<(String, String)>>,
        started: Instant,
    ) -> Result<RecoveryReport, DurabilityError> {
        let fs = options.fs.as_ref();
        let path = self.index_path();
        let has_log = fs.exists(&options.log_dirs[0].join(files::PEPOCH_FILE))?;
        let store_started = Instant::now();
        let verify = self.shared.options.verify_on_open;
        let opened = if fs.exists(&path)? {
            IndexStore::open(options.fs.clone(), &path, verify).and_then(|store| Ok((store.progress()?, store)))
        } else if has_log {
            return self.rebuild(db, options, modules, "the indexed log is missing".into());
        } else {
            IndexStore::create(options.fs.clone(), &path, |_| Ok(())).map(|store| (Progress::default(), store))
        };
        // Damage is rebuilt from the sequential log (the indexed log is derived data); an I/O
        // error is not damage and stops recovery, naming the file.
        let (progress, store) = match opened {
            Ok(opened) => opened,
            Err(e @ DurabilityError::Corrupt { .. }) if has_log => {
                return self.rebuild(db, options, modules, e.to_string());
            }
            // No `pepoch` yet: nothing was ever indexed (the Indexer reads only what a `pepoch`
            // made persistent), so an indexed log a crash damaged while it was being written
            // holds nothing; it is created anew.
            Err(DurabilityError::Corrupt { .. }) => {
                (Progress::default(), IndexStore::create(options.fs.clone(), &path, |_| Ok(()))?)
            }
            Err(e) => return Err(e),
        };
        // An indexed log ahead of the durable `pepoch` holds records of epochs that are void
        // now (an older build indexed from a `pepoch` file whose directory sync failed): it
        // cannot be resumed, and it is rebuilt like a damaged one.
        let durable = recovery::read_pepoch(fs, &options.log_dirs[0])?;
        if let Some(reason) = ahead_of_the_log(&progress, &durable) {
            store.close()?;
            return self.rebuild(db, options, modules, format!("{}: {reason}", path.display()));
        }
        let store_open_ms = store_started.elapsed().as_secs_f64() * 1e3;
        let (mut report, pepoch) = recovery::begin(options, db, modules)?;
        let tail_started = Instant::now();
        let (replay, discard, next_seq) = recovery::plan(fs, options, &pepoch)?;
        // Read the tail into memory: each key's newest write of a persistent, non-void epoch
        // after the resume positions (later records are void; record_void_epochs below makes
        // them so for good). It is not indexed here: the restore compares each write with its
        // key's image, and the running Indexer indexes the tail from the resume positions,
        // which stay as they are (`docs/indexed.md`, "Instant restart").
        let at_rest =
            || Indexer::new(options.fs.clone(), options.log_dirs.clone(), &progress, pepoch.holes.clone()).at_rest();
        let max_bytes = self.shared.options.tail_in_memory_max_bytes;
        let mut reader = at_rest();
        let (tail, stats, resume) = match reader.read_tail(&pepoch, max_bytes)? {
            Some((tail, stats)) => {
                // The running Indexer reads it again from the same positions.
                self.shared.unindexed_at_open_bytes.store(reader.passed_bytes(), Ordering::SeqCst);
                self.shared.bounded_from_bytes.store(reader.passed_bytes(), Ordering::SeqCst);
                (tail, stats, progress.clone())
            }
            None => {
                // Too long to hold in memory: indexed first (at rest, so complete: every later
                // record is void), and the running Indexer resumes at each logger's next file.
                // Not at the durable positions: the files recovery discards lie between, and the
                // running Indexer would wait for each one it looked up (200 ms, for a rotation
                // in flight).
                let stats = at_rest().round(&store, &pepoch)?;
                let positions = (next_seq.iter().enumerate())
                    .map(|(logger, &seq)| LogPosition { logger: logger as u32, file_seq: seq, offset: 0 })
                    .collect();
                (Vec::new(), stats, Progress { indexed_epoch: pepoch.epoch, positions })
            }
        };
        let max_epoch_seen = stats.max_epoch.max(max_epoch_in_names(fs, options)?);
        let tail_ms = tail_started.elapsed().as_secs_f64() * 1e3;
        report.next_file_seq = next_seq;
        report.bytes = stats.bytes;
        recovery::record_void_epochs(&mut report, &pepoch, max_epoch_seen);
        recovery::settle_directory(fs, options, &replay, &discard, &pepoch, &report)?;
        let tail_indexed = resume != progress;
        if tail_indexed {
            store.apply(&Default::default(), &resume, Some(pepoch.epoch))?;
        }
        let manifest = checkpoint::loader::read_manifest(fs, &options.log_dirs[0])?;
        self.next_checkpoint_id.store(manifest.as_ref().map_or(1, |m| m.checkpoint_id + 1), Ordering::SeqCst);
        report.next_checkpoint_id = self.next_checkpoint_id.load(Ordering::SeqCst);
        let store = Arc::new(store);
        let keys = store.image_count()?;
        if keys > 0 || !tail.is_empty() {
            // The walk's reads would otherwise each pay for the write buffer the last commit's
            // epilogue left behind (`IndexStore::clear_write_buffer`).
            store.clear_write_buffer()?;
            let o = &self.shared.options;
            let defaults = RestoreSettings::new();
            let settings = RestoreSettings {
                paused: o.restore_paused,
                walkers: o.restore_walkers.unwrap_or(defaults.walkers),
                cpu_share: o.restore_cpu_share,
                front_load: o.restore_front_load,
                awaits_serving: o.restore_awaits_serving,
                start_delay_ms: o.restore_start_delay_ms,
            };
            // Small pages go on until the walk starts.
            let small_pages = self.small_pages.lock().take();
            let restorer = Arc::new(Restorer::new(Arc::clone(&store), tail, started, settings, small_pages)?);
            for table in db.catalog().tables() {
                table.begin_restore(restorer.clone());
            }
            *self.shared.restorer.lock() = Some(restorer);
        }
        // Resumes where the indexed log says: a tail read into memory is still to index.
        let indexer = Indexer::new(options.fs.clone(), options.log_dirs.clone(), &resume, report.holes.clone());
        *self.shared.resume_seqs.lock() = indexer.resume_file_seqs();
        *self.shared.indexer.lock() = Some(indexer);
        self.shared.indexed_epoch.store(resume.indexed_epoch, Ordering::SeqCst);
        *self.shared.store.write() = Some(store);
        let mut r = self.report.lock();
        r.kind = if has_log { "instant" } else { "fresh" };
        r.tail_indexed = tail_indexed;
        r.tail_bytes = stats.bytes;
        r.tail_writes = stats.writes;
        r.store_open_ms = store_open_ms;
        r.tail_ms = tail_ms;
        Ok(report)
    }

    /// The indexed log is missing or damaged: recover the value way, then write the B-tree from
    /// memory, positioned at the start of each logger's next file.
    fn rebuild(
        &self,
        db: &crate::db::Database,
        options: &ValueOptions,
        modules: &Mutex<Vec<(String, String)>>,
        reason: String,
    ) -> Result<RecoveryReport, DurabilityError> {
        eprintln!("lazarus: {reason}; recovering from the sequential log and rebuilding it");
        let report = recovery::recover(options, db, modules)?;
        let path = self.index_path();
        let positions = report
            .next_file_seq
            .iter()
            .enumerate()
            .map(|(logger, &seq)| LogPosition { logger: logger as u32, file_seq: seq, offset: 0 })
            .collect();
        let progress = Progress { indexed_epoch: report.pepoch, positions };
        // Written under a temporary name and renamed when whole (`IndexStore::create`): a crash
        // in the middle leaves no indexed log, and the next start rebuilds again.
        let store = IndexStore::create(options.fs.clone(), &path, |store| {
            let mut batch = store::Batch::default();
            for table in db.catalog().tables() {
                table.primary.scan(
                    &crate::storage::KeyRange::all(),
                    crate::storage::Direction::Forward,
                    usize::MAX,
                    &mut |k, r| {
                        let word = r.word();
                        if !word.is_absent() {
                            let row = Some(r.row_unchecked());
                            batch.insert(store::full_key(table.id, k), store::Resolved { tid: word.tid(), row });
                        }
                        true
                    },
                );
                if batch.len() >= 100_000 {
                    store.apply(&batch, &progress, None)?;
                    batch.clear();
                }
            }
            store.apply(&batch, &progress, None)?;
            Ok(())
        })?;
        let mut indexer = Indexer::new(options.fs.clone(), options.log_dirs.clone(), &progress, report.holes.clone());
        indexer.set_indexed_epoch(report.pepoch);
        *self.shared.resume_seqs.lock() = indexer.resume_file_seqs();
        *self.shared.indexer.lock() = Some(indexer);
        self.shared.indexed_epoch.store(report.pepoch, Ordering::SeqCst);
        *self.shared.store.write() = Some(Arc::new(store));
        self.next_checkpoint_id.store(report.next_checkpoint_id, Ordering::SeqCst);
        let mut r = self.report.lock();
        r.kind = "rebuilt";
        r.rebuild_reason = Some(reason);
        Ok(report)
    }
}

/// Why an indexed log at `progress` is ahead of the sequential log's durable `pepoch`, if it is:
/// its indexed epoch is above the persistent epoch, or it has read a logger's durable file past
/// the durable length.
fn ahead_of_the_log(progress: &Progress, pepoch: &files::Pepoch) -> Option<String> {
    if progress.indexed_epoch > pepoch.epoch {
        return Some(format!(
            "indexed to epoch {}, above the persistent epoch {} of the pepoch file",
            progress.indexed_epoch, pepoch.epoch
        ));
    }
    progress.positions.iter().find_map(|at| {
        let durable = pepoch.positions.iter().find(|p| p.logger == at.logger)?;
        (at.file_seq == durable.file_seq && at.offset > durable.durable_len_bytes).then(|| {
            format!(
                "indexed logger {}'s file {} to byte {}, past its durable length {}",
                at.logger, at.file_seq, at.offset, durable.durable_len_bytes
            )
        })
    })
}

/// The largest epoch the names of rotated files give (a file's name records its max epoch).
fn max_epoch_in_names(fs: &dyn FileSystem, options: &ValueOptions) -> Result<u64, DurabilityError> {
    let mut max = 0;
    for dir in &options.log_dirs {
        for name in fs.list(dir)? {
            if let Some((epoch, _)) = files::parse_old_log_name(&name) {
                max = max.max(epoch);
            }
        }
    }
    Ok(max)
}

impl LogScheme for IndexedLogging {
    fn name(&self) -> &'static str {
        match self.shared.options.mode {
            IndexMode::Async => "indexed",
            IndexMode::Sync => "indexed-sync",
        }
    }

    fn worker(&self, worker_id: usize) -> Box<dyn WorkerLog> {
        self.shared.inner.worker(worker_id)
    }

    fn is_durable(&self, ticket: &DurabilityTicket) -> bool {
        let sequential = self.shared.inner.is_durable(ticket);
        match (self.shared.options.mode, ticket) {
            (IndexMode::Sync, DurabilityTicket::Epoch(e)) => {
                sequential && *e <= self.indexed_epoch() && self.shared.failed.get().is_none()
            }
            (IndexMode::Async, DurabilityTicket::Epoch(e)) => sequential && self.shared.within_lag(*e),
            _ => sequential,
        }
    }

    fn wait_durable(&self, ticket: &DurabilityTicket) -> Result<(), DurabilityError> {
        self.shared.inner.wait_durable(ticket)?;
        match (self.shared.options.mode, ticket) {
            (IndexMode::Sync, DurabilityTicket::Epoch(epoch)) => self.wait_indexed(*epoch),
            (IndexMode::Async, DurabilityTicket::Epoch(epoch)) => {
                self.wait_within_lag(*epoch);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn wait_committed_durable(&self) -> Result<(), DurabilityError> {
        let Some(epochs) = self.shared.epochs.get() else { return Ok(()) };
        let committed_before = epochs.current();
        epochs.advance();
        self.wait_durable(&DurabilityTicket::Epoch(committed_before))
    }

    fn shutdown(&self) -> Result<(), DurabilityError> {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return self.shared.check_failed();
        }
        self.checkpoint_status.request_stop();
        if let Some(r) = self.shared.restorer.lock().as_ref() {
            r.stop();
        }
        let sequential = self.shared.inner.shutdown();
        self.shared.stop_indexer();
        for handle in self.threads.lock().drain(..) {
            let _ = handle.join();
        }
        // A clean close leaves nothing to index at the next open.
        let last_round = match (&sequential, self.shared.failed.get()) {
            (Ok(()), None) => self.shared.index_round(),
            _ => Ok(()),
        };
        {
            let mut restorer = self.shared.restorer.lock();
            if restorer.as_ref().is_some_and(|r| r.progress().done) {
                *restorer = None;
            }
        }
        // Closing redb writes (it marks the file shut down cleanly): its error is reported, not
        // dropped. A restore still running holds the store; it closes when the restore ends.
        let store = self.shared.store.write().take();
        let closed = match store.map(Arc::try_unwrap) {
            Some(Ok(store)) => store.close(),
            _ => Ok(()),
        };
        sequential?;
        last_round?;
        closed?;
        self.shared.check_failed()
    }

    fn record_module(&self, file_name: &str, source: &str) -> Result<(), DurabilityError> {
        // SILIR acknowledges what is indexed: a module takes its place after every commit before
        // it, so those must be indexed before the catalog records it (the value scheme then
        // waits for them to be persistent, which they are). Waiting after the catalog write
        // instead would let a failed Indexer reject a module the catalog already holds, while
        // the sequential log goes on recording commits made without it: no prefix.
        if self.shared.options.mode == IndexMode::Sync {
            self.wait_committed_durable()?;
        }
        self.shared.inner.record_module(file_name, source)
    }

    fn recover(&self, db: &crate::db::Database) -> Result<u64, DurabilityError> {
        let started = Instant::now();
        let recovered =
            self.shared.inner.recover_with(|options, modules| self.recover_instant(db, options, modules, started));
        // A restore took the small pages to its walk; with none (or a failed open) they end here.
        drop(self.small_pages.lock().take());
        let max_epoch = recovered?;
        self.report.lock().open_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(max_epoch)
    }

    fn start(&self, start: SchemeStart) -> Result<(), DurabilityError> {
        let _ = self.shared.epochs.set(Arc::clone(&start.epochs));
        self.shared.inner.start(start.clone())?;
        let shared = Arc::clone(&self.shared);
        self.spawn("lazarus-indexer", move || shared.run_indexer())?;
        let restorer = self.shared.restorer.lock().clone();
        let options = self.shared.options.value.checkpoint.clone();
        let host: Arc<dyn CheckpointHost> = Arc::new(IndexedHost { shared: Arc::clone(&self.shared) });
        let status = Arc::clone(&self.checkpoint_status);
        let first_id = self.next_checkpoint_id.load(Ordering::SeqCst);
        self.spawn("lazarus-restorer", move || {
            // A checkpoint walks the tables: it starts once they are whole in memory.
            if let Some(restorer) = restorer {
                restorer.run(&start.catalog);
                if !restorer.progress().done {
                    return;
                }
            }
            if options.interval_ms > 0 {
                checkpoint::run_manager(host, start, options, status, first_id);
            }
        })?;
        Ok(())
    }

    fn checkpoint_active(&self) -> bool {
        self.checkpoint_status.is_active()
    }

    fn log_bytes_written(&self) -> u64 {
        self.shared.inner.log_bytes_written()
    }
}

/// The indexed scheme as a checkpoint host: persistence is the sequential log's, and a log file
/// is removed only when the checkpoint covers it, the Indexer is done with it, and a newer file
/// is the durable one the `pepoch` file names.
struct IndexedHost {
    shared: Arc<Shared>,
}

impl CheckpointHost for IndexedHost {
    fn fs(&self) -> &dyn FileSystem {
        self.shared.options.value.fs.as_ref()
    }

    fn dirs(&self) -> &[PathBuf] {
        &self.shared.options.value.log_dirs
    }

    fn wait_persistent(&self, epoch: u64) -> bool {
        !self.shared.stop.load(Ordering::SeqCst)
            && self.shared.inner.wait_durable(&DurabilityTicket::Epoch(epoch)).is_ok()
    }

    fn truncate_log(&self, e_l: u64) -> std::io::Result<usize> {
        // As the value scheme does: nothing is removed before a durable pepoch names the
        // checkpoint, so a lost manifest is named by recovery, not replayed around.
        if !self.shared.inner.pepoch_names_checkpoint(e_l) {
            return Ok(0);
        }
        let pepoch = recovery::read_pepoch(self.fs(), &self.dirs()[0]).map_err(std::io::Error::other)?;
        let resume = self.shared.resume_seqs.lock().clone();
        let keep_from = |logger: usize| {
            let durable = pepoch.positions.iter().find(|p| p.logger as usize == logger)?.file_seq;
            Some(durable.min(resume.get(logger).copied().unwrap_or(0)))
        };
        super::value::host::remove_logs_before(self.fs(), self.dirs(), e_l, &keep_from)
    }
}

impl crate::server::RecoveryStatus for IndexedLogging {
    fn serving(&self) {
        if let Some(r) = self.shared.restorer.lock().as_ref() {
            r.set_serving();
        }
    }

    fn status(&self) -> crate::server::RecoveryInfo {
        let report = self.report.lock().clone();
        let unindexed_log_bytes = self.unindexed_bytes();
        match self.restore_progress() {
            Some(p) => crate::server::RecoveryInfo {
                state: if p.done { "done" } else { "restoring" },
                percent: p.percent(),
                keys_restored: p.images_restored,
                keys_restored_on_demand: p.on_demand_keys,
                keys_read_ahead: p.read_ahead_keys,
                elapsed_ms: p.elapsed_ms,
                walk_cpu_ms: p.walk_cpu_ms,
                process_cpu_ms: p.process_cpu_ms.unwrap_or(0.0),
                walk_share: p.walk_share,
                walk_held_ms: p.held_ms,
                walk_spare_ms: p.spare_ms,
                unindexed_log_bytes,
            },
            None => crate::server::RecoveryInfo {
                elapsed_ms: report.open_ms,
                unindexed_log_bytes,
                ..crate::server::RecoveryInfo::default()
            },
        }
    }
}
