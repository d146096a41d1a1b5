//! Schemes `taurus-data` and `taurus-cmd` (Taurus: parallel logging without a global LSN), and
//! the log streams they share with the serial baselines `serial-data` and `serial-cmd`
//! ([`crate::durability::serial`]). Design and contracts: `docs/taurus.md`; formats: [`format`](mod@format).
//!
//! - [`stream`]: one log stream per logger — buffer, group commit, persistent point — and the
//!   persistent vector file, in which the loggers make every logger's synced length durable
//!   before it is published (see there: exactly when a commit is durable).
//! - [`cdt`]: the commit dependency table (§4.1.3).
//! - [`recovery`]: reading the logs in parallel, the recovery dependency graph (§4.4.2,
//!   Algorithms 3–5), and replay, over SiloR's checkpoint when one is installed.
//! - [`host`]: the schemes as a [`super::checkpoint::CheckpointHost`]: SiloR's checkpoints, a new
//!   log segment per checkpoint, and removal of the segments a checkpoint covers
//!   (`docs/taurus.md`, "Checkpoints").
//!
//! # Logging (Algorithms 1 and 2)
//!
//! The engine hands every committing transaction's RAW predecessors (`last_writer` of each record
//! read) and WAW predecessors (`last_writer` of each record written) to
//! [`WorkerLog::log_commit`]. A worker appends the record (REDO data and both predecessor lists)
//! to its logger `worker id % loggers`; the transaction's id is `logger << 56 | address` and is
//! returned as the `last_writer` the engine stores in every record it wrote. Its predecessor
//! vector is its own address, maxed with the vectors of its RAW predecessors still in the commit
//! dependency table; it may be acknowledged once every logger's persistent point is at least its
//! vector's component ([`DurabilityTicket::Vector`]).
//!
//! # Deletes
//!
//! A delete unlinks its record, so a transaction that later finds the key missing (or inserts it
//! again) meets no `last_writer` of the delete: its RAW (or WAW) predecessor would be lost. The
//! scheme closes the gap itself, without an engine change: deletes form a chain (each one that
//! deletes lists the previous deleting transaction as a RAW predecessor; the chain is updated
//! atomically with the append), and every transaction lists the chain's head at its log time as
//! a RAW predecessor (and as a WAW predecessor of each write to a key with no `last_writer`).
//! A transaction that observed a deletion did so after the deleting transaction logged, so the
//! head it lists is that delete or a later one, whose vector covers it. The price is one extra
//! predecessor per record once the workload deletes, and deletes serialized by one mutex.

pub mod cdt;
pub mod dataflow;
pub mod format;
pub mod graph;
pub mod host;
pub mod inspect;
pub mod recovery;
pub mod stream;
pub mod streaming;

use super::appender::PageAppender;
use super::checkpoint::{self, CheckpointOptions, CheckpointStatus};
use super::command::DataWindow;
use super::{
    CommitTicket, CommitView, DurabilityError, DurabilityTicket, LogScheme, LoggedWrite, SchemeStart, WorkerLog,
};
use crate::io::real::RealFs;
use crate::io::{FileSystem, OpenMode};
use cdt::CommitDependencyTable;
use format::{Deps, Flavor, PersistentVector, StreamHeader};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;
use stream::{Durable, PersistentVectorFile, PersistentVectorWriter, SegmentFiles, Stream};

/// Options of the stream schemes.
#[derive(Clone)]
pub struct StreamOptions {
    /// Which scheme.
    pub flavor: Flavor,
    /// Log directories; logger `l` writes in directory `l % len`.
    pub log_dirs: Vec<PathBuf>,
    /// Loggers (one file each); serial schemes have exactly one.
    pub loggers: usize,
    /// A logger flushes at least this often (Taurus §6.1: 5 ms).
    pub flush_interval_ms: u64,
    /// Size of a logger's buffer; it flushes when half full (§6.1: 16 MB).
    pub buffer_size_bytes: usize,
    /// Log predecessor vectors instead of predecessor lists (§6.6).
    pub compress_predecessors: bool,
    /// Data flavors: log every update's whole after-image, not the columns it changed
    /// (`docs/taurus.md`, "Column patches"); for measuring what patches save.
    pub whole_rows: bool,
    /// Recovery threads.
    pub recovery_threads: usize,
    /// `taurus-data` recovery builds the dependency graph while it reads the logs and collects
    /// recovered transactions (Algorithms 4–6, [`streaming`]), instead of reading a whole
    /// generation and building its graph before replay (the default, [`graph`]).
    pub streaming_graph: bool,
    /// How data flavors replay write sets: direct, or through compiled plans (`crate::replay`).
    pub replay_mode: crate::replay::ReplayMode,
    /// SiloR's checkpoints over these logs (`docs/taurus.md`, "Checkpoints"); off by default
    /// (`interval_ms` 0), so the measured figures of `docs/PERFORMANCE.md` keep their meaning.
    pub checkpoint: CheckpointOptions,
    /// The file system.
    pub fs: Arc<dyn FileSystem>,
}

impl StreamOptions {
    /// Defaults for `flavor` over `log_dirs`, one logger per directory (serial: one logger).
    pub fn new(flavor: Flavor, log_dirs: Vec<PathBuf>) -> StreamOptions {
        let loggers = if flavor.is_taurus() { log_dirs.len().max(1) } else { 1 };
        let dirs = log_dirs.len();
        StreamOptions {
            flavor,
            log_dirs,
            loggers,
            flush_interval_ms: 5,
            buffer_size_bytes: 16 << 20,
            compress_predecessors: false,
            whole_rows: false,
            streaming_graph: false,
            recovery_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            replay_mode: crate::replay::ReplayMode::Direct,
            checkpoint: CheckpointOptions { interval_ms: 0, ..CheckpointOptions::new(dirs) },
            fs: Arc::new(RealFs),
        }
    }

    fn validate(&self) -> Result<(), DurabilityError> {
        let bad = |m: String| Err(DurabilityError::Failed(format!("invalid {} option: {m}", self.flavor.name())));
        if self.log_dirs.is_empty() {
            return bad("at least one log directory is needed".into());
        }
        if !(1..=format::LOGGERS_MAX).contains(&self.loggers) || (!self.flavor.is_taurus() && self.loggers != 1) {
            return bad(format!("loggers must be 1..={} (serial: 1), got {}", format::LOGGERS_MAX, self.loggers));
        }
        if !(1..=1000).contains(&self.flush_interval_ms) || !(4096..=(1 << 30)).contains(&self.buffer_size_bytes) {
            return bad("flush interval must be 1..=1000 ms and the buffer 4 KiB..=1 GiB".into());
        }
        if !(1..=1024).contains(&self.recovery_threads) {
            return bad("recovery threads must be 1..=1024".into());
        }
        self.checkpoint.validate().or_else(bad)
    }

    /// The directory of logger `l`.
    pub fn dir_of(&self, logger: usize) -> &std::path::Path {
        &self.log_dirs[logger % self.log_dirs.len()]
    }
}

/// Log volume split as Taurus Table 1 does.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogVolume {
    /// Transaction records logged.
    pub records: u64,
    /// Bytes of REDO data.
    pub redo_bytes: u64,
    /// Bytes of dependency information.
    pub dependency_bytes: u64,
}

/// State shared by a scheme's workers and threads.
pub struct Shared {
    pub(crate) options: StreamOptions,
    /// The loggers' streams, set once when the scheme starts.
    pub(crate) streams: OnceLock<Vec<Arc<Stream>>>,
    pub(crate) durable: Arc<Durable>,
    /// The persistent vector file, written by the loggers after their syncs.
    writer: PersistentVectorWriter,
    pub(crate) cdt: CommitDependencyTable,
    /// The global LSN (serial) or commit timestamp (taurus-cmd).
    pub(crate) lsn: AtomicU64,
    /// The head of the delete chain (see the module docs), and a copy readable without the lock.
    delete_chain: Mutex<u64>,
    delete_head: AtomicU64,
    modules: Mutex<Vec<(String, String)>>,
    /// The epochs whose transactions log write sets (command flavors) or whole rows (data
    /// flavors) because a checkpoint is being taken (`docs/taurus.md`, "Checkpoints").
    pub(crate) window: Arc<DataWindow>,
    /// The checkpoint manager's state.
    pub(crate) checkpoint: Arc<CheckpointStatus>,
    records: AtomicU64,
    redo_bytes: AtomicU64,
    dependency_bytes: AtomicU64,
}

impl Shared {
    pub(crate) fn stream(&self, logger: usize) -> Arc<Stream> {
        Arc::clone(&self.streams()[logger])
    }

    /// The streams; empty before the scheme starts.
    pub(crate) fn streams(&self) -> &[Arc<Stream>] {
        self.streams.get().map_or(&[], |v| v.as_slice())
    }

    fn persistent_vector(&self) -> Vec<u64> {
        self.streams().iter().map(|s| s.persistent()).collect()
    }

    pub(crate) fn count(&self, redo_bytes: usize, dependency_bytes: usize) {
        self.records.fetch_add(1, Ordering::Relaxed);
        self.redo_bytes.fetch_add(redo_bytes as u64, Ordering::Relaxed);
        self.dependency_bytes.fetch_add(dependency_bytes as u64, Ordering::Relaxed);
    }

    fn is_durable(&self, ticket: &DurabilityTicket) -> bool {
        if self.durable.failed.get().is_some() {
            return false;
        }
        match ticket {
            DurabilityTicket::Immediate => true,
            DurabilityTicket::Sequence(end) => self.streams().first().is_some_and(|s| s.persistent() >= *end),
            DurabilityTicket::Vector(pv) => {
                let streams = self.streams();
                pv.iter().enumerate().all(|(l, &a)| a == 0 || streams.get(l).is_some_and(|s| s.persistent() >= a))
            }
            DurabilityTicket::Epoch(_) => false,
        }
    }
}

/// A stream scheme: `serial-data`, `serial-cmd`, `taurus-data` or `taurus-cmd`.
pub struct StreamLogging {
    shared: Arc<Shared>,
    /// The loggers.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The checkpoint manager.
    manager: Mutex<Option<JoinHandle<()>>>,
    generation: AtomicU64,
    /// What recovery found and did.
    pub recovery: Mutex<Option<recovery::StreamRecoveryReport>>,
    shut_down: AtomicBool,
    /// Every thread has stopped after a shutdown.
    stopped: AtomicBool,
}

impl StreamLogging {
    /// A scheme over `options.log_dirs` (created if missing). Nothing is written before the
    /// database opens it.
    pub fn new(options: StreamOptions) -> Result<StreamLogging, DurabilityError> {
        options.validate()?;
        for dir in &options.log_dirs {
            options.fs.create_dir_all(dir)?;
        }
        let shared = Shared {
            cdt: CommitDependencyTable::new(options.loggers),
            options,
            streams: OnceLock::new(),
            durable: Arc::new(Durable::default()),
            writer: PersistentVectorWriter::default(),
            lsn: AtomicU64::new(1),
            delete_chain: Mutex::new(0),
            delete_head: AtomicU64::new(0),
            modules: Mutex::new(Vec::new()),
            window: Arc::default(),
            checkpoint: Arc::default(),
            records: AtomicU64::new(0),
            redo_bytes: AtomicU64::new(0),
            dependency_bytes: AtomicU64::new(0),
        };
        Ok(StreamLogging {
            shared: Arc::new(shared),
            threads: Mutex::new(Vec::new()),
            manager: Mutex::new(None),
            generation: AtomicU64::new(0),
            recovery: Mutex::new(None),
            shut_down: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        })
    }

    /// The log volume so far.
    pub fn volume(&self) -> LogVolume {
        LogVolume {
            records: self.shared.records.load(Ordering::Relaxed),
            redo_bytes: self.shared.redo_bytes.load(Ordering::Relaxed),
            dependency_bytes: self.shared.dependency_bytes.load(Ordering::Relaxed),
        }
    }

    /// The checkpoint manager's state: the last checkpoint installed, the last error.
    pub fn checkpoints(&self) -> &CheckpointStatus {
        &self.shared.checkpoint
    }

    /// Entries now in the commit dependency table.
    pub fn cdt_len(&self) -> usize {
        self.shared.cdt.len()
    }

    fn started(&self) -> bool {
        self.shared.streams.get().is_some()
    }

    /// Blocks until everything appended so far is persistent.
    fn wait_all_appended(&self) -> Result<(), DurabilityError> {
        let targets: Vec<u64> = self.shared.streams().iter().map(|s| s.appended_end()).collect();
        self.wait_durable(&DurabilityTicket::Vector(targets.into()))
    }
}

impl LogScheme for StreamLogging {
    fn name(&self) -> &'static str {
        self.shared.options.flavor.name()
    }

    fn worker(&self, worker_id: usize) -> Box<dyn WorkerLog> {
        let logger = worker_id % self.shared.options.loggers;
        if self.shared.options.flavor.is_taurus() {
            Box::new(TaurusWorkerLog::new(Arc::clone(&self.shared), logger))
        } else {
            Box::new(super::serial::SerialWorkerLog::new(Arc::clone(&self.shared)))
        }
    }

    fn is_durable(&self, ticket: &DurabilityTicket) -> bool {
        self.shared.is_durable(ticket)
    }

    fn wait_durable(&self, ticket: &DurabilityTicket) -> Result<(), DurabilityError> {
        if matches!(ticket, DurabilityTicket::Epoch(_)) {
            return Err(DurabilityError::Failed(format!("scheme {} cannot make {ticket:?} durable", self.name())));
        }
        let durable = &self.shared.durable;
        let mut guard = durable.lock.lock();
        loop {
            durable.check()?;
            if self.shared.is_durable(ticket) {
                return Ok(());
            }
            if self.stopped.load(Ordering::SeqCst) {
                return Err(DurabilityError::ShutDown);
            }
            durable.cv.wait_for(&mut guard, Duration::from_millis(20));
        }
    }

    fn wait_committed_durable(&self) -> Result<(), DurabilityError> {
        if !self.started() {
            return self.shared.durable.check();
        }
        self.wait_all_appended()
    }

    fn shutdown(&self) -> Result<(), DurabilityError> {
        if !self.shut_down.swap(true, Ordering::SeqCst) {
            // A checkpoint in progress is abandoned (its files are debris the next recovery
            // removes); the manager waits on the loggers, so it stops first.
            self.shared.checkpoint.request_stop();
            if let Some(handle) = self.manager.lock().take() {
                let _ = handle.join();
            }
            // The loggers flush what they hold before they stop, so a clean close loses nothing.
            for stream in self.shared.streams() {
                stream.request_stop();
            }
            for handle in self.threads.lock().drain(..) {
                let _ = handle.join();
            }
            self.stopped.store(true, Ordering::SeqCst);
            let _guard = self.shared.durable.lock.lock();
            self.shared.durable.cv.notify_all();
        }
        self.shared.durable.check()
    }

    fn record_module(&self, file_name: &str, source: &str) -> Result<(), DurabilityError> {
        self.shared.durable.check()?;
        // DDL takes its place in the serial order: what committed before it is durable first.
        if self.started() {
            self.wait_all_appended()?;
        }
        let mut modules = self.shared.modules.lock();
        modules.push((file_name.to_string(), source.to_string()));
        let path = self.shared.options.log_dirs[0].join(crate::durability::value::files::CATALOG_FILE);
        let bytes = crate::durability::value::files::encode_catalog(&modules);
        if let Err(e) = self.shared.options.fs.write_atomic(&path, &bytes) {
            modules.pop();
            let message = format!("cannot record the catalog in {}: {e}", path.display());
            self.shared.durable.fail(message.clone());
            return Err(DurabilityError::Failed(message));
        }
        Ok(())
    }

    fn recover(&self, db: &crate::db::Database) -> Result<u64, DurabilityError> {
        let report = recovery::recover(&self.shared.options, db, &self.shared.modules)?;
        self.generation.store(report.next_generation, Ordering::SeqCst);
        self.shared.lsn.store(report.next_lsn, Ordering::SeqCst);
        let restart = report.restart_after_epoch;
        *self.recovery.lock() = Some(report);
        Ok(restart)
    }

    fn start(&self, start: SchemeStart) -> Result<(), DurabilityError> {
        let options = &self.shared.options;
        let generation = self.generation.load(Ordering::SeqCst);
        // The persistent vector file of the generation is durable before its log files exist:
        // recovery then knows which generation is current, and that none of it is durable yet.
        let pv_path = options.log_dirs[0].join(format::persistent_vector_name(options.flavor));
        let pv = PersistentVector { sequence: 0, generation, durable_len_bytes: vec![0; options.loggers] };
        options.fs.write_atomic(&pv_path, &format::encode_persistent_vector_file(options.flavor, &pv))?;
        let mut pv_file = PersistentVectorFile {
            file: options.fs.open(&pv_path, OpenMode::ReadWrite)?,
            path: pv_path,
            flavor: options.flavor,
            generation,
            sequence: 0,
            published: Vec::new(),
        };
        let mut streams = Vec::new();
        let mut files = Vec::new();
        for logger in 0..options.loggers {
            let header = StreamHeader {
                flavor: options.flavor,
                logger: logger as u32,
                loggers: options.loggers as u32,
                generation,
                base: 0,
            };
            let dir = options.dir_of(logger).to_path_buf();
            let path = dir.join(format::log_name(options.flavor, logger, generation));
            let mut file = options.fs.open(&path, OpenMode::CreateNew)?;
            let bytes = format::encode_header(&header);
            file.append(&bytes)?;
            file.sync_data()?;
            let file = PageAppender::new(options.fs.as_ref(), &path, file, bytes.len() as u64)?;
            streams.push(Arc::new(Stream::new(header, bytes.len() as u64, options.buffer_size_bytes)));
            let (fs, flavor) = (Arc::clone(&options.fs), options.flavor);
            let (fs_dir, sync_path) = (Arc::clone(&options.fs), dir.clone());
            files.push(SegmentFiles {
                file,
                open: Box::new(move |base| {
                    let path = dir.join(format::segment_name(flavor, logger, generation, base));
                    let created = fs.open(&path, OpenMode::CreateNew)?;
                    PageAppender::new(fs.as_ref(), &path, created, 0)
                }),
                sync_dir: Box::new(move || fs_dir.sync_dir(&sync_path)),
            });
        }
        for dir in &options.log_dirs {
            options.fs.sync_dir(dir)?;
        }
        pv_file.published = streams.iter().map(|s| s.persistent()).collect();
        self.shared.writer.set_file(pv_file);
        if self.shared.streams.set(streams.clone()).is_err() {
            return Err(DurabilityError::Failed(format!("scheme {} was started twice", options.flavor.name())));
        }
        let interval = Duration::from_millis(options.flush_interval_ms);
        for (stream, file) in streams.into_iter().zip(files) {
            let shared = Arc::clone(&self.shared);
            let name = format!("lazarus-{}-logger-{}", options.flavor.name(), stream.id);
            let handle = std::thread::Builder::new().name(name).spawn(move || {
                let collect = || shared.cdt.collect(&shared.persistent_vector());
                let round = || shared.writer.record_round(shared.streams(), &shared.durable, &collect);
                stream::run_logger(&stream, file, interval, &shared.durable, &round);
            })?;
            self.threads.lock().push(handle);
        }
        if options.checkpoint.interval_ms > 0 {
            let host: Arc<dyn checkpoint::CheckpointHost> =
                Arc::new(host::StreamHost::new(Arc::clone(&self.shared), Arc::clone(&start.epochs), generation));
            let (checkpoint_options, status) = (options.checkpoint.clone(), Arc::clone(&self.shared.checkpoint));
            let first_id = self.recovery.lock().as_ref().map_or(1, |r| r.next_checkpoint_id);
            let name = format!("lazarus-{}-checkpoint", options.flavor.name());
            let handle = std::thread::Builder::new()
                .name(name)
                .spawn(move || checkpoint::run_manager(host, start, checkpoint_options, status, first_id))?;
            *self.manager.lock() = Some(handle);
        }
        Ok(())
    }

    fn checkpoint_active(&self) -> bool {
        self.shared.checkpoint.is_active()
    }

    fn log_bytes_written(&self) -> u64 {
        self.shared.durable.bytes_written.load(Ordering::Relaxed)
    }
}

impl Drop for StreamLogging {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Encodes the REDO data of `view`: a procedure call for command flavors (outside a checkpoint's
/// data window), otherwise its write set. Data flavors log an update as the columns it changed
/// when `based` says replay will hold the row it replaced: they replay each key's writes in order
/// (serial: LSN order; Taurus: WAW order), over a checkpoint that keeps every version it sees
/// ([`CheckpointHost::reduced`]). Inside a checkpoint's window (epochs from `e_l` until it is
/// installed) they log whole rows: the walk may find such an update's key deleted by a later
/// transaction, so the checkpoint holds no row a patch could apply to (`docs/taurus.md`,
/// "Checkpoints"). A command flavor's write sets stay whole: its checkpoint window installs them
/// in any order, the largest TID winning.
///
/// [`CheckpointHost::reduced`]: checkpoint::CheckpointHost::reduced
pub(crate) fn encode_redo(
    shared: &Shared,
    view: &CommitView<'_>,
    based: impl Fn(&LoggedWrite<'_>) -> bool,
    out: &mut Vec<u8>,
) {
    if !shared.options.flavor.is_command() {
        let data = CommitView { invocation: None, ..*view };
        // The transaction read its epoch after the window opened if that epoch is >= e_l.
        let in_window = shared.window.covers(view.tid.epoch());
        crate::durability::command::encode_patching(&data, |w| !in_window && based(w), out);
    } else if !shared.window.covers(view.tid.epoch()) {
        crate::durability::command::encode(view, out);
    } else {
        let data = CommitView { invocation: None, ..*view };
        crate::durability::command::encode(&data, out);
    }
}

/// Whether Taurus data replay of a transaction is sure to hold the row its write `w` replaced:
/// its writer is a RAW predecessor too (the transaction read the version it overwrote), so the
/// transaction is recoverable only if that writer is, and WAW order replays the writer first. A
/// writer of 0 is a version from before this generation (restored by recovery), which recovery
/// restores again before this generation's log. Compressed records carry no WAW list, and their
/// replay does not follow WAW order: whole rows only.
fn taurus_based(shared: &Shared, view: &CommitView<'_>, w: &LoggedWrite<'_>) -> bool {
    !shared.options.compress_predecessors
        && !shared.options.whole_rows
        && (w.previous_writer == 0 || view.read_last_writers.binary_search(&w.previous_writer).is_ok())
}

/// Frames `payload` and appends it to `stream`; returns the address past it.
pub(crate) fn append_record(
    shared: &Shared,
    stream: &Stream,
    payload: &[u8],
    framed: &mut Vec<u8>,
) -> Result<u64, DurabilityError> {
    framed.clear();
    crate::durability::frame::encode_block(payload, framed);
    stream.append(framed, &shared.durable)
}

/// A worker's log under `taurus-data` or `taurus-cmd`.
pub struct TaurusWorkerLog {
    shared: Arc<Shared>,
    logger: usize,
    stream: Option<Arc<Stream>>,
    redo: Vec<u8>,
    payload: Vec<u8>,
    framed: Vec<u8>,
    raw: Vec<u64>,
    waw: Vec<u64>,
}

impl TaurusWorkerLog {
    fn new(shared: Arc<Shared>, logger: usize) -> TaurusWorkerLog {
        let (redo, payload, framed, raw, waw) = Default::default();
        TaurusWorkerLog { shared, logger, stream: None, redo, payload, framed, raw, waw }
    }
}

impl WorkerLog for TaurusWorkerLog {
    fn serialization_point(&mut self, _epoch: u64) -> u64 {
        // taurus-cmd logs a commit timestamp (§5.2, Table 1's "Dep. Info." of Taurus Cmd): the
        // versions command replay reads (`crate::txn::versions`), since WAR is not tracked.
        if self.shared.options.flavor.is_command() { self.shared.lsn.fetch_add(1, Ordering::SeqCst) } else { 0 }
    }

    fn abandon(&mut self, _commit_seq: u64) {}

    fn log_commit(&mut self, view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError> {
        let shared = Arc::clone(&self.shared);
        shared.durable.check()?;
        let loggers = shared.options.loggers;
        let deletes = view.writes.iter().any(|w| w.after.is_none());
        let mut chain = if deletes { Some(shared.delete_chain.lock()) } else { None };
        let head = chain.as_deref().copied().unwrap_or_else(|| shared.delete_head.load(Ordering::Acquire));
        // Algorithm 1: RAW predecessors from the reads, WAW from the writes.
        let (mut raw, mut waw) = (std::mem::take(&mut self.raw), std::mem::take(&mut self.waw));
        raw.clear();
        raw.extend(view.read_last_writers.iter().copied().filter(|&id| id != 0));
        waw.clear();
        waw.extend(view.writes.iter().map(|w| w.previous_writer).filter(|&id| id != 0));
        let fresh_writes = view.writes.iter().any(|w| w.previous_writer == 0);
        if head != 0 {
            raw.push(head);
            if fresh_writes {
                waw.push(head);
            }
        }
        raw.sort_unstable();
        raw.dedup();
        waw.sort_unstable();
        waw.dedup();
        // Algorithm 2, lines 6-12: the RAW predecessors' vectors still in the table.
        let mut pv = vec![0u64; loggers];
        for &id in &raw {
            if let Some(theirs) = shared.cdt.get(id) {
                cdt::max_into(&mut pv, &theirs);
            }
        }
        if view.is_read_only() {
            (self.raw, self.waw) = (raw, waw);
            return Ok(CommitTicket { last_writer: 0, durability: DurabilityTicket::Vector(pv.into()) });
        }
        let deps = if shared.options.compress_predecessors {
            let mut waw_vec = vec![0u64; loggers];
            for &id in &waw {
                let (l, a) = format::split_id(id);
                if let Some(slot) = waw_vec.get_mut(l) {
                    *slot = (*slot).max(a);
                }
            }
            Deps::Vectors { pv: pv.clone(), waw: waw_vec }
        } else {
            Deps::Lists { raw: std::mem::take(&mut raw), waw: std::mem::take(&mut waw), fresh_writes }
        };
        self.redo.clear();
        encode_redo(&shared, view, |w| taurus_based(&shared, view, w), &mut self.redo);
        self.payload.clear();
        let dependency_bytes = format::encode_txn(&deps, &self.redo, &mut self.payload);
        // Keep the lists' allocations for the next transaction.
        (self.raw, self.waw) = match deps {
            Deps::Lists { raw, waw, .. } => (raw, waw),
            _ => (raw, waw),
        };
        let stream = self.stream.get_or_insert_with(|| shared.stream(self.logger));
        let end = append_record(&shared, stream, &self.payload, &mut self.framed)?;
        let id = format::txn_id(self.logger, end);
        pv[self.logger] = pv[self.logger].max(end);
        let pv: cdt::PredecessorVector = pv.into();
        shared.cdt.insert(self.logger, id, Arc::clone(&pv));
        if let Some(chain) = chain.as_mut() {
            **chain = id;
            shared.delete_head.store(id, Ordering::Release);
        }
        drop(chain);
        shared.count(self.redo.len(), dependency_bytes);
        Ok(CommitTicket { last_writer: id, durability: DurabilityTicket::Vector(pv) })
    }
}
