//! Recovery of the stream schemes.
//!
//! 1. Rebuild the catalog from the `catalog` file (shared with the value scheme).
//! 2. Read the persistent vector file ([`format`](mod@format)): the current generation and every logger's
//!    durable (logical) length in it. Group the log segments by generation and logger. If a
//!    checkpoint is installed (SiloR's manifest), load it with all cores
//!    ([`crate::durability::checkpoint::loader`]).
//! 3. Per generation, one I/O thread per segment reads and decodes it (Algorithm 3's I/O
//!    threads); each logger's segments are chained from the first present one (the ones before
//!    were removed after a checkpoint: its *retained start*). Every generation before the
//!    current one was settled by an earlier recovery: its logs must be whole, each segment ending
//!    where the next begins, the last with its end record (a segment cut at a record boundary
//!    lacks it or leaves a gap). A current log must be whole up to its durable length — every
//!    acknowledged transaction lies before it, so damage or a cut there is corruption, reported
//!    with the file and offset, never a shorter prefix; after it the log may end in a torn tail
//!    (never acknowledged), which is cut off. Log files without a persistent vector file (a
//!    directory of format version 1, or a removed file) are refused; segments removed without
//!    an installed checkpoint are refused.
//! 4. Serial: replay the records sorted by LSN on one thread. Taurus: build the recovery
//!    dependency graph. A transaction is recoverable iff all its RAW predecessors are found and
//!    recoverable, or lie before their logger's retained start (then a checkpoint covers them)
//!    (§4.4.1 phase 2; with compressed records: iff its predecessor vector is within the logs'
//!    valid lengths, which is the committability test of §4.2 against the persistent vector at
//!    the crash). Unrecoverable transactions and their RAW successors are dropped. `taurus-data`
//!    replays the recoverable ones on `recovery_threads` threads, each once its recoverable WAW
//!    predecessors are replayed (Algorithms 3 and 5); `taurus-cmd` re-executes them after their
//!    RAW and WAW predecessors, each reading the versions below its commit timestamp (§5.2,
//!    [`crate::txn::versions`]; see `docs/taurus.md`).
//! 5. Over a checkpoint of `[e_l, e_h]`: transactions of epochs < `e_l` are in it and are not
//!    replayed; command flavors install the write sets of epochs `[e_l, e_h]` (their data window)
//!    with the largest TID winning, which makes it the state as of the end of `e_h`, rebuild the
//!    indexes, and re-execute the later transactions.
//! 6. Data flavors install after-images with the largest-TID-wins rule of SiloR
//!    ([`crate::storage::Table::install_if_newer`]) and sweep tombstones and build secondary
//!    indexes at the end; command flavors run transactions through a replay worker.
//! 7. Settle the current generation's logs: cut each to its valid length and end it with an
//!    end record, synced; the scheme then starts the next generation, so a dropped transaction
//!    can never become recoverable later. Remove the files of unfinished checkpoints.
//!
//! By default the whole graph of a generation is built before replay (a segment is bounded by
//! [`LOG_FILE_SIZE_MAX_BYTES`]). With [`StreamOptions::streaming_graph`], `taurus-data` merges
//! the phases as §4.4.2 does ([`super::streaming`], Algorithms 4–6): memory then holds the
//! transactions between replay and the read frontier (`stream_generation`).

use super::StreamOptions;
use super::dataflow;
use super::format::{self, Deps, Flavor, PersistentVector, Record};
use super::graph;
use super::streaming;
use crate::db::Database;
use crate::durability::DurabilityError;
use crate::durability::blocks::{self, BlockReader, Next};
use crate::durability::checkpoint::format::Manifest;
use crate::durability::checkpoint::{loader, writer};
use crate::durability::codec::{EntryWrite, Image};
use crate::durability::command::CommandEntry;
use crate::durability::frame;
use crate::durability::value::recovery::{corrupt, rebuild_catalog};
use crate::io::OpenMode;
use crate::replay::{RedoRecord, ReplayError, ReplayMode};
use crate::storage::point::{KeyHash, Prefetch};
use crate::txn::versions::{Snapshot, VersionStore};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// The largest log segment recovery reads, in bytes.
pub const LOG_FILE_SIZE_MAX_BYTES: u64 = crate::durability::value::recovery::LOG_FILE_SIZE_MAX_BYTES;
/// Command replay advances the (not yet running) epoch every so many transactions, so that TIDs
/// never run out of sequence numbers within one epoch.
const TXNS_PER_EPOCH: u64 = 1 << 20;

/// What recovery found and did.
#[derive(Clone, Debug, Default)]
pub struct StreamRecoveryReport {
    /// The checkpoint loaded, if one was installed.
    pub checkpoint: Option<loader::CheckpointLoadReport>,
    /// The id the next checkpoint takes.
    pub next_checkpoint_id: u64,
    /// Generations read.
    pub generations: usize,
    /// Log segments read.
    pub files: usize,
    /// Bytes of log read (valid parts).
    pub bytes: u64,
    /// Bytes cut off as torn tails.
    pub torn_bytes: u64,
    /// Transaction records read.
    pub records: u64,
    /// Transactions replayed.
    pub recovered: u64,
    /// Transactions dropped as unrecoverable (a RAW predecessor missing from every log).
    pub dropped: u64,
    /// Recoverable transactions not replayed because the checkpoint holds them (epoch < `e_l`).
    pub before_checkpoint: u64,
    /// Write sets of a command flavor's checkpoint window installed over the checkpoint.
    pub window_installed: u64,
    /// Milliseconds reading and decoding the files.
    pub read_ms: f64,
    /// Milliseconds deciding recoverability (the graph).
    pub graph_ms: f64,
    /// Milliseconds replaying.
    pub replay_ms: f64,
    /// Milliseconds sweeping tombstones and building secondary indexes.
    pub rebuild_ms: f64,
    /// Replay threads.
    pub threads: usize,
    /// The global epoch restarts above this.
    pub restart_after_epoch: u64,
    /// The generation the scheme writes next.
    pub next_generation: u64,
    /// The next LSN or commit timestamp.
    pub next_lsn: u64,
    /// Per generation, oldest first.
    pub per_generation: Vec<GenerationReport>,
}

/// What recovery did with one generation.
#[derive(Clone, Debug, Default)]
pub struct GenerationReport {
    /// The generation.
    pub generation: u64,
    /// Bytes read (valid parts).
    pub bytes: u64,
    /// Transactions replayed.
    pub recovered: u64,
    /// Transactions dropped.
    pub dropped: u64,
    /// Per logger, the logical offset its log starts at (> 0 once a checkpoint removed segments).
    pub retained_start: Vec<u64>,
    /// Milliseconds reading and decoding its files.
    pub read_ms: f64,
    /// Milliseconds deciding recoverability.
    pub graph_ms: f64,
    /// Milliseconds replaying.
    pub replay_ms: f64,
    /// Versioned command replay: records that still had versions, and the versions they held,
    /// when replay ended (what garbage collection left; dropped then).
    pub versions_left: (usize, usize),
}

impl GenerationReport {
    /// Transactions replayed per second of graph and replay.
    pub fn txns_per_s(&self) -> f64 {
        self.recovered as f64 / ((self.graph_ms + self.replay_ms) / 1e3).max(1e-9)
    }

    /// Transactions replayed per second of reading, graph and replay.
    pub fn txns_per_s_with_read(&self) -> f64 {
        self.recovered as f64 / ((self.read_ms + self.graph_ms + self.replay_ms) / 1e3).max(1e-9)
    }
}

impl StreamRecoveryReport {
    /// Transactions replayed per second of replay (graph and replay).
    pub fn txns_per_s(&self) -> f64 {
        self.recovered as f64 / ((self.graph_ms + self.replay_ms) / 1e3).max(1e-9)
    }
}

impl graph::Node for Txn {
    fn id(&self) -> u64 {
        self.id
    }
    fn deps(&self) -> &Deps {
        &self.deps
    }
    fn seq(&self) -> u64 {
        self.entry.seq()
    }
    fn raw_order(&self) -> u64 {
        match &self.entry {
            CommandEntry::Call { seq, .. } => *seq,
            // taurus-cmd's write sets carry its commit timestamp; taurus-data's records carry
            // none (0), and their TID orders them.
            CommandEntry::Data { seq, .. } if *seq > 0 => *seq,
            CommandEntry::Data { entry, .. } => entry.tid.to_u64(),
        }
    }
}

/// A logged transaction.
struct Txn {
    /// `logger << 56 | logical address past the record`.
    id: u64,
    /// The record's block offset in its file, for errors.
    offset: u64,
    /// Index of its segment in the generation.
    file: usize,
    deps: Deps,
    /// Its REDO data. Data flavors: the write set is moved to `writes` (`entry`'s is empty).
    entry: CommandEntry,
    /// Data flavors: the write set, handed to the transaction's one replay ([`WriteSet`]).
    writes: Mutex<WriteSet>,
}

/// A data transaction's write set as its replay finds it. Replay takes each column patch (its
/// values are moved into the row or the plan's frame, not cloned). Compiled replay takes each
/// after-image too, decodes its values into the plan's frame and drops it; direct replay installs a shared
/// reference of it and leaves the decoded entry holding the row until recovery ends, so the rows
/// a later write replaces are freed after replay, all at once, instead of one by one through the
/// epoch collector (measured: handing them over made direct replay of whole-row logs 0–29 %
/// slower; `docs/PERFORMANCE.md`, "Compiled replay", "Session 15").
#[derive(Default)]
struct WriteSet {
    writes: Vec<EntryWrite>,
    /// Whether the transaction was replayed (a second replay would be a bug).
    replayed: bool,
}

/// A segment file found in a log directory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SegmentPath {
    logger: usize,
    base: u64,
    path: PathBuf,
}

/// One segment after reading: decoded as far as its blocks decode.
struct ParsedSegment {
    path: PathBuf,
    logger: usize,
    base: u64,
    loggers: Option<usize>,
    header_ok: bool,
    /// File offset up to which the file decodes (through the end record, if any).
    valid_len: u64,
    file_len: u64,
    /// Whether it ends with its end record (settled by a recovery).
    ended: bool,
    /// Why decoding stopped before the file's end, if it did.
    stop: Option<String>,
    txns: Vec<Txn>,
}

impl ParsedSegment {
    fn valid_end(&self) -> u64 {
        self.base + self.valid_len
    }
}

/// A logger's log of a generation: its segments (indexes into the generation's), chained.
struct LoggerLog {
    logger: usize,
    /// The segments that make up the log, in order.
    chain: Vec<usize>,
    /// Segments after the log's valid end (the current generation's torn tail): removed.
    discarded: Vec<usize>,
    /// Logical offset where the log starts: segments before it were removed after a checkpoint.
    retained_start: u64,
    /// Logical offset up to which it is valid.
    valid_end: u64,
}

/// A generation after reading.
struct Generation {
    segments: Vec<ParsedSegment>,
    logs: Vec<LoggerLog>,
    loggers: usize,
}

/// How recovery treats a transaction over a checkpoint of `[e_l, e_h]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Epoch < `e_l`: the checkpoint holds it.
    Covered,
    /// Command flavors, epoch in `[e_l, e_h]`: a write set installed over the checkpoint.
    Window,
    /// Replayed.
    Replay,
}

impl StreamRecoveryReport {
    /// Counts a generation recovered with the streaming graph, whose read and graph ran inside
    /// its `total_ms` of replay.
    fn add_streamed(&mut self, generation: u64, read: &Generation, streamed: &Streamed, total_ms: f64) {
        self.generations += 1;
        self.files += read.segments.len();
        self.records += streamed.records;
        self.restart_after_epoch = self.restart_after_epoch.max(streamed.max_epoch);
        self.next_lsn = self.next_lsn.max(streamed.next_lsn);
        self.before_checkpoint += streamed.covered;
        self.recovered += streamed.recovered;
        self.dropped += streamed.dropped;
        self.replay_ms += total_ms;
        let bytes: u64 = read.segments.iter().map(|s| s.valid_len).sum();
        self.bytes += bytes;
        self.torn_bytes += read.segments.iter().map(|s| s.file_len - s.valid_len).sum::<u64>();
        self.per_generation.push(GenerationReport {
            generation,
            bytes,
            retained_start: read.logs.iter().map(|l| l.retained_start).collect(),
            recovered: streamed.recovered,
            dropped: streamed.dropped,
            replay_ms: total_ms,
            ..Default::default()
        });
        self.next_generation = generation + 1;
    }
}

/// Recovers `db` from the stream logs in `options.log_dirs`.
pub fn recover(
    options: &StreamOptions,
    db: &Database,
    modules: &Mutex<Vec<(String, String)>>,
) -> Result<StreamRecoveryReport, DurabilityError> {
    let fs = options.fs.as_ref();
    *modules.lock() = rebuild_catalog(fs, &options.log_dirs[0], db)?;
    if !options.flavor.is_command() {
        // Data flavors install rows and read none until they rebuild the indexes at the end.
        crate::durability::value::recovery::defer_ordered_indexes(db);
    }
    let generations = list_generations(options)?;
    let pv_path = options.log_dirs[0].join(format::persistent_vector_name(options.flavor));
    let current = current_generation(options, &pv_path, &generations)?;
    let mut report = StreamRecoveryReport {
        threads: options.recovery_threads,
        next_lsn: 1,
        next_checkpoint_id: 1,
        ..Default::default()
    };
    let manifest = loader::read_manifest(fs, &options.log_dirs[0])?;
    if let Some(manifest) = &manifest {
        let loaded = loader::load(fs, &options.log_dirs, manifest, &db.catalog(), options.recovery_threads)?;
        report.checkpoint = Some(loaded);
        report.next_checkpoint_id = manifest.checkpoint_id + 1;
        report.restart_after_epoch = manifest.e_h;
    }
    // Command flavors over a checkpoint: indexes are rebuilt and the epoch raised once, before
    // the first command re-executes.
    let mut state_ready = manifest.is_none() || !options.flavor.is_command();
    let mut current_logs = None;
    for (generation, paths) in generations {
        let durable_len = current.as_ref().filter(|pv| pv.generation == generation).map(|pv| &pv.durable_len_bytes[..]);
        let start = Instant::now();
        if options.streaming_graph && options.flavor == Flavor::TaurusData {
            let (read, streamed) =
                stream_generation(options, db, generation, &paths, durable_len, &pv_path, manifest.as_ref())?;
            report.add_streamed(generation, &read, &streamed, start.elapsed().as_secs_f64() * 1e3);
            if durable_len.is_some() {
                current_logs = Some(read);
            }
            continue;
        }
        let read = read_generation(options, generation, &paths, durable_len, &pv_path)?;
        let read_ms = start.elapsed().as_secs_f64() * 1e3;
        report.read_ms += read_ms;
        if manifest.is_none()
            && let Some(log) = read.logs.iter().find(|l| l.retained_start > 0)
        {
            let first = &read.segments[log.chain.first().or(log.discarded.first()).copied().unwrap_or(0)];
            let reason = format!(
                "the log of logger {} starts at logical offset {}: its segments before were removed for a \
                 checkpoint, but no checkpoint manifest is installed",
                log.logger, log.retained_start
            );
            return Err(corrupt(&first.path, 0, reason));
        }
        report.generations += 1;
        report.files += read.segments.len();
        for segment in &read.segments {
            report.bytes += segment.valid_len;
            report.torn_bytes += segment.file_len - segment.valid_len;
            report.records += segment.txns.len() as u64;
            for txn in &segment.txns {
                report.restart_after_epoch = report.restart_after_epoch.max(txn.entry.epoch());
                report.next_lsn = report.next_lsn.max(txn.entry.seq() + 1);
            }
        }
        let mut one = GenerationReport {
            generation,
            bytes: read.segments.iter().map(|s| s.valid_len).sum(),
            retained_start: read.logs.iter().map(|l| l.retained_start).collect(),
            read_ms,
            ..Default::default()
        };
        let over = Over { manifest: manifest.as_ref(), restart_after_epoch: report.restart_after_epoch };
        let counts = replay_generation(options, db, &read, over, &mut state_ready, &mut one)?;
        report.before_checkpoint += counts.0;
        report.window_installed += counts.1;
        report.recovered += one.recovered;
        report.dropped += one.dropped;
        report.graph_ms += one.graph_ms;
        report.replay_ms += one.replay_ms;
        report.per_generation.push(one);
        report.next_generation = generation + 1;
        if durable_len.is_some() {
            current_logs = Some(read);
        }
    }
    // A current generation whose log files were never created (a crash right after its
    // persistent vector file was written) is started again.
    if let Some(pv) = &current {
        report.next_generation = report.next_generation.max(pv.generation);
    }
    let start = Instant::now();
    // Data flavors sweep tombstones and build secondary indexes now, on every recovery thread;
    // command flavors did before their first re-execution, unless nothing ran.
    if !options.flavor.is_command() || !state_ready {
        crate::durability::value::recovery::rebuild_indexes(
            db,
            options.recovery_threads,
            options.replay_mode.entry_keys(),
        );
    }
    report.rebuild_ms = start.elapsed().as_secs_f64() * 1e3;
    report.restart_after_epoch = report.restart_after_epoch.max(db.epochs().current());
    if let Some(read) = &current_logs {
        settle(options, read)?;
    }
    for dir in dedup_dirs(options) {
        writer::remove_other_checkpoints(fs, &dir, manifest.as_ref().map(|m| m.checkpoint_id))?;
    }
    Ok(report)
}

fn dedup_dirs(options: &StreamOptions) -> Vec<PathBuf> {
    let mut dirs = options.log_dirs.clone();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The persistent vector of the current generation, checked against the log files found;
/// `None` for a directory without logs or persistent vector (a new database).
fn current_generation(
    options: &StreamOptions,
    pv_path: &Path,
    generations: &BTreeMap<u64, Vec<SegmentPath>>,
) -> Result<Option<PersistentVector>, DurabilityError> {
    let fs = options.fs.as_ref();
    let newest_logs = generations.keys().next_back().copied();
    if !fs.exists(pv_path)? {
        return match newest_logs {
            None => Ok(None),
            Some(_) => Err(corrupt(
                pv_path,
                0,
                format!(
                    "missing, but {} log files exist: a directory written before stream format version {} (which \
                     this build does not read), or the file was removed",
                    options.flavor.name(),
                    format::FORMAT_VERSION_UNSEGMENTED
                ),
            )),
        };
    }
    let bytes = fs.read_all(pv_path, format::PERSISTENT_VECTOR_FILE_MAX_BYTES)?;
    let (flavor, pv) = format::decode_persistent_vector_file(&bytes).map_err(|e| corrupt(pv_path, 0, e))?;
    if flavor != options.flavor {
        return Err(corrupt(pv_path, 0, format!("written by {}, opened as {}", flavor.name(), options.flavor.name())));
    }
    if let Some(newest) = newest_logs.filter(|&g| g > pv.generation) {
        let reason = format!("records generation {}, but log files of generation {newest} exist", pv.generation);
        return Err(corrupt(pv_path, 0, reason));
    }
    // Every logger with durable data must have its log (it is read, and its length checked).
    let found = generations.get(&pv.generation).map_or(&[][..], Vec::as_slice);
    for (logger, &len) in pv.durable_len_bytes.iter().enumerate() {
        if len > 0 && !found.iter().any(|s| s.logger == logger) {
            let log = options.dir_of(logger).join(format::log_name(options.flavor, logger, pv.generation));
            let reason = format!("missing, but {} records {len} durable bytes of it", pv_path.display());
            return Err(corrupt(&log, 0, reason));
        }
    }
    Ok(Some(pv))
}

/// The stream log segments of every directory, by generation, sorted by logger and base.
fn list_generations(options: &StreamOptions) -> Result<BTreeMap<u64, Vec<SegmentPath>>, DurabilityError> {
    let mut generations: BTreeMap<u64, Vec<SegmentPath>> = BTreeMap::new();
    for dir in &dedup_dirs(options) {
        for name in options.fs.list(dir)? {
            let Some((taurus, logger, generation, base)) = format::parse_segment_name(&name) else {
                continue;
            };
            let path = dir.join(name);
            if taurus != options.flavor.is_taurus() {
                let reason = format!(
                    "a log of another scheme; open it with a {} scheme",
                    if taurus { "taurus" } else { "serial" }
                );
                return Err(corrupt(&path, 0, reason));
            }
            generations.entry(generation).or_default().push(SegmentPath { logger, base, path });
        }
    }
    for files in generations.values_mut() {
        files.sort();
    }
    Ok(generations)
}

/// Reads a generation's segments, one I/O thread each, and chains each logger's. `durable_len`
/// is the persistent vector's durable length per logger for the current generation, `None` for
/// a settled one.
fn read_generation(
    options: &StreamOptions,
    generation: u64,
    paths: &[SegmentPath],
    durable_len: Option<&[u64]>,
    pv_path: &Path,
) -> Result<Generation, DurabilityError> {
    let results: Vec<Result<ParsedSegment, DurabilityError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .iter()
            .enumerate()
            .map(|(index, segment)| {
                scope.spawn(move || {
                    let mut txns = Vec::new();
                    let mut parsed = read_segment(options, generation, index, segment, &mut |txn| {
                        txns.push(txn);
                        Ok(())
                    })?;
                    parsed.txns = txns;
                    Ok(parsed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(DurabilityError::Failed("reader panicked".into()))))
            .collect()
    });
    let segments = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    assemble_generation(segments, generation, durable_len, pv_path)
}

/// Checks a generation's segments, read, against each other and the persistent vector, and
/// chains each logger's.
fn assemble_generation(
    segments: Vec<ParsedSegment>,
    generation: u64,
    durable_len: Option<&[u64]>,
    pv_path: &Path,
) -> Result<Generation, DurabilityError> {
    let loggers: Vec<usize> = segments.iter().filter_map(|s| s.loggers).collect();
    if let Some(&n) = loggers.first()
        && (loggers.iter().any(|&m| m != n) || segments.iter().any(|s| s.logger >= n))
    {
        return Err(corrupt(&segments[0].path, 0, "the files of one generation disagree on the number of loggers"));
    }
    if let (Some(&n), Some(durable_len)) = (loggers.first(), durable_len)
        && n != durable_len.len()
    {
        let reason = format!("records {} loggers for generation {generation}, its log files {n}", durable_len.len());
        return Err(corrupt(pv_path, 0, reason));
    }
    let loggers = loggers.first().copied().or(durable_len.map(<[u64]>::len)).unwrap_or(0);
    let mut logs = Vec::new();
    let mut at = 0;
    while at < segments.len() {
        let logger = segments[at].logger;
        let end = at + segments[at..].iter().take_while(|s| s.logger == logger).count();
        let durable = durable_len.map(|d| d.get(logger).copied().unwrap_or(0));
        logs.push(chain_log(&segments, at..end, durable, pv_path)?);
        at = end;
    }
    Ok(Generation { segments, logs, loggers })
}

/// Chains the segments `range` (one logger's, sorted by base) into its log, and checks it
/// against `durable` (the current generation's durable length; `None`: settled, must be whole).
fn chain_log(
    segments: &[ParsedSegment],
    range: std::ops::Range<usize>,
    durable: Option<u64>,
    pv_path: &Path,
) -> Result<LoggerLog, DurabilityError> {
    let first = &segments[range.start];
    let mut log = LoggerLog {
        logger: first.logger,
        chain: Vec::new(),
        discarded: Vec::new(),
        retained_start: first.base,
        valid_end: first.base,
    };
    // Why the log ends where it does: the file and file offset to name, and the reason.
    let mut ended_at: Option<(usize, u64, String)> = None;
    for k in range.clone() {
        let segment = &segments[k];
        if ended_at.is_some() {
            log.discarded.push(k);
            continue;
        }
        if let Some(&previous) = log.chain.last() {
            let prev = &segments[previous];
            let reason = match &prev.stop {
                Some(stop) => Some(stop.clone()),
                None if prev.ended => Some("a segment follows the end record".to_string()),
                None if prev.valid_end() != segment.base => Some(format!(
                    "ends at logical offset {}, but the next segment starts at {} (cut short)",
                    prev.valid_end(),
                    segment.base
                )),
                None => None,
            };
            if let Some(reason) = reason {
                ended_at = Some((previous, prev.valid_len, reason));
                log.discarded.push(k);
                continue;
            }
        }
        if !segment.header_ok {
            let reason = segment.stop.clone().unwrap_or_else(|| "no header".into());
            ended_at = Some((k, 0, reason));
            log.discarded.push(k);
            continue;
        }
        log.chain.push(k);
        log.valid_end = segment.valid_end();
    }
    if ended_at.is_none()
        && let Some(&last) = log.chain.last()
    {
        let last_segment = &segments[last];
        match &last_segment.stop {
            Some(stop) => ended_at = Some((last, last_segment.valid_len, stop.clone())),
            None if durable.is_none() && !last_segment.ended => {
                let reason = "a log of a settled generation ends without its end record (cut short)".to_string();
                ended_at = Some((last, last_segment.valid_len, reason));
            }
            None => {}
        }
    }
    match durable {
        None => {
            if let Some((k, offset, reason)) = ended_at {
                return Err(corrupt(&segments[k].path, offset, format!("{reason} in a settled generation")));
            }
        }
        Some(durable) if log.valid_end < durable => {
            let (k, offset, reason) = ended_at.unwrap_or_else(|| {
                let last = log.chain.last().copied().unwrap_or(range.start);
                (last, segments[last].valid_len, "the log ends".to_string())
            });
            let reason = format!(
                "{reason}, before the log's durable length {durable} (logical), which {} records: acknowledged \
                 transactions are missing (damage, a lost or misdirected write, or a cut)",
                pv_path.display()
            );
            return Err(corrupt(&segments[k].path, offset, reason));
        }
        Some(_) => {}
    }
    Ok(log)
}

/// Reads one segment, decoding blocks until one does not decode, and hands each transaction to
/// `sink` in log order. A header that names another scheme, generation, logger or base than the
/// file's name is an error.
fn read_segment(
    options: &StreamOptions,
    generation: u64,
    index: usize,
    segment: &SegmentPath,
    sink: &mut dyn FnMut(Txn) -> Result<(), DurabilityError>,
) -> Result<ParsedSegment, DurabilityError> {
    let SegmentPath { logger, base, ref path } = *segment;
    let (mut file, file_len) = blocks::open_bounded(options.fs.as_ref(), path, LOG_FILE_SIZE_MAX_BYTES)?;
    let mut parsed = ParsedSegment {
        path: path.clone(),
        logger,
        base,
        loggers: None,
        header_ok: false,
        valid_len: 0,
        file_len,
        ended: false,
        stop: None,
        txns: Vec::new(),
    };
    let mut blocks = BlockReader::new(file.as_mut(), file_len);
    let header = match blocks.required_block()? {
        Ok(block) => format::decode_header(block.framed).map(|(header, _)| header),
        Err(e) => Err(e.to_string()),
    };
    let header = match header {
        Ok(h) => h,
        // A segment created just before the crash whose header never reached the disk, if
        // nothing of it is durable (the log's chain decides).
        Err(e) => {
            parsed.stop = Some(format!("header: {e}"));
            return Ok(parsed);
        }
    };
    if header.flavor != options.flavor
        || header.generation != generation
        || header.logger as usize != logger
        || header.base != base
    {
        let reason = format!(
            "header says {} logger {} generation {} base {}",
            header.flavor.name(),
            header.logger,
            header.generation,
            header.base
        );
        return Err(corrupt(path, 0, format!("{reason}; the name or the scheme says otherwise")));
    }
    parsed.header_ok = true;
    parsed.loggers = Some(header.loggers as usize);
    loop {
        let block = match blocks.next_block()? {
            Next::Block(block) => block,
            Next::End => break,
            Next::Damaged(e) => {
                parsed.stop = Some(e.to_string());
                break;
            }
        };
        let at = block.offset;
        match format::decode_record(block.payload()).map_err(|e| corrupt(path, at, e.to_string()))? {
            Record::End(len) if len != at => {
                return Err(corrupt(path, at, format!("an end record for length {len} at another offset")));
            }
            Record::End(_) => {
                // Nothing is appended after it; bytes after it (in the current generation, a
                // truncation lost at a crash during settling) are cut off.
                parsed.ended = true;
                if block.end() < file_len {
                    parsed.stop = Some("bytes after the end record".into());
                }
                parsed.valid_len = block.end();
                return Ok(parsed);
            }
            Record::Txn { deps, mut entry } => {
                let id = format::txn_id(logger, base + block.end());
                let writes = match &mut entry {
                    CommandEntry::Data { entry, .. } if !options.flavor.is_command() => {
                        WriteSet { writes: std::mem::take(&mut entry.writes), replayed: false }
                    }
                    _ => WriteSet::default(),
                };
                let writes = Mutex::new(writes);
                sink(Txn { id, offset: at, file: index, deps, entry, writes })?;
            }
        }
    }
    parsed.valid_len = blocks.offset();
    Ok(parsed)
}

/// What a generation recovered with the streaming graph reports.
#[derive(Default)]
struct Streamed {
    records: u64,
    max_epoch: u64,
    next_lsn: u64,
    recovered: u64,
    covered: u64,
    dropped: u64,
    inflight_peak: usize,
}

/// `taurus-data` with the phases merged (§4.4.2, [`super::streaming`]): one I/O thread per
/// logger reads its segments in order and inserts each transaction into the graph while the
/// recovery threads replay those that are ready; each log's recovered prefix is collected. The
/// segments a log's chain ends before (after a damaged or cut one) are read but not inserted,
/// as the batch path leaves them out; the generation's checks against the persistent vector
/// run when every log is read, and fail recovery as they do on the batch path.
fn stream_generation(
    options: &StreamOptions,
    db: &Database,
    generation: u64,
    paths: &[SegmentPath],
    durable_len: Option<&[u64]>,
    pv_path: &Path,
    manifest: Option<&Manifest>,
) -> Result<(Generation, Streamed), DurabilityError> {
    let loggers = paths.iter().map(|p| p.logger + 1).max().unwrap_or(0).max(durable_len.map_or(0, <[u64]>::len));
    let mut retained_start = vec![0u64; loggers];
    for path in paths.iter().rev() {
        retained_start[path.logger] = path.base;
    }
    if manifest.is_none()
        && let Some(path) = paths.iter().find(|p| p.base > 0 && p.base == retained_start[p.logger])
    {
        let reason = format!(
            "the log of logger {} starts at logical offset {}: its segments before were removed for a \
             checkpoint, but no checkpoint manifest is installed",
            path.logger, path.base
        );
        return Err(corrupt(&path.path, 0, reason));
    }
    let parsed: Mutex<Vec<(usize, ParsedSegment)>> = Mutex::new(Vec::new());
    let stats = Mutex::new(Streamed::default());
    let read = |logger: usize, gc: &mut streaming::Gc<'_, Txn, DurabilityError>| -> Result<u64, DurabilityError> {
        let (mut chained, mut end, mut local) = (true, retained_start[logger], Streamed::default());
        let mut previous: Option<(u64, bool)> = None; // (valid end, whether the chain may go on)
        for (index, segment) in paths.iter().enumerate().filter(|(_, p)| p.logger == logger) {
            if let Some((prev_end, goes_on)) = previous {
                chained &= goes_on && prev_end == segment.base;
            }
            let mut sink = |txn: Txn| -> Result<(), DurabilityError> {
                // Counted as the batch path counts them: every record read, chained or not.
                local.records += 1;
                local.max_epoch = local.max_epoch.max(txn.entry.epoch());
                local.next_lsn = local.next_lsn.max(txn.entry.seq() + 1);
                if !chained {
                    return Ok(());
                }
                let at = (txn.file, txn.offset);
                gc.insert(txn).map_err(|e| match e {
                    streaming::Interrupt::Stopped => DurabilityError::Failed("recovery stopped".into()),
                    streaming::Interrupt::Duplicate(id) => {
                        let (logger, address) = format::split_id(id);
                        corrupt(
                            &paths[at.0].path,
                            at.1,
                            format!("two transactions at logger {logger}'s address {address}"),
                        )
                    }
                })
            };
            let one = read_segment(options, generation, index, segment, &mut sink)?;
            chained &= one.header_ok;
            if chained {
                end = one.valid_end();
            }
            previous = Some((one.valid_end(), one.stop.is_none() && !one.ended));
            parsed.lock().push((index, one));
        }
        let mut all = stats.lock();
        all.records += local.records;
        all.max_epoch = all.max_epoch.max(local.max_epoch);
        all.next_lsn = all.next_lsn.max(local.next_lsn);
        Ok(end)
    };
    let seg_paths: Vec<&Path> = paths.iter().map(|p| p.path.as_path()).collect();
    let replayer = Replayer::new(db, &seg_paths, &[], options);
    let e_l = manifest.map(|m| m.e_l);
    let covered = AtomicU64::new(0);
    let apply = |state: &mut ThreadState, txn: &Txn| -> Result<(), DurabilityError> {
        if e_l.is_some_and(|e_l| txn.entry.epoch() < e_l) {
            covered.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        replayer.apply_data(state, txn, seg_paths[txn.file])
    };
    let threads = options.recovery_threads;
    let outcome =
        streaming::run(&retained_start, threads, streaming::INFLIGHT_TXNS_MAX, read, apply).map_err(|f| match f {
            streaming::Failure::Failed(e) => e,
            streaming::Failure::Cycle { left } => {
                let reason = format!("the recovery dependency graph has a cycle ({left} transactions never ready)");
                corrupt(paths.first().map_or(pv_path, |p| p.path.as_path()), 0, reason)
            }
            streaming::Failure::Panicked { message } => {
                DurabilityError::Failed(format!("a transaction's replay panicked: {message}"))
            }
        })?;
    let mut segments = parsed.into_inner();
    segments.sort_by_key(|(index, _)| *index);
    let read = assemble_generation(segments.into_iter().map(|(_, s)| s).collect(), generation, durable_len, pv_path)?;
    let mut streamed = stats.into_inner();
    streamed.covered = covered.into_inner();
    streamed.recovered = outcome.recovered - streamed.covered;
    streamed.dropped = outcome.dropped;
    streamed.inflight_peak = outcome.inflight_peak;
    Ok((read, streamed))
}

/// What the generations are replayed over.
#[derive(Clone, Copy)]
struct Over<'a> {
    /// The checkpoint loaded, if any.
    manifest: Option<&'a Manifest>,
    /// The largest epoch seen so far: command replay runs above it.
    restart_after_epoch: u64,
}

/// Decides which transactions of a generation are recoverable and replays them. Returns the
/// recoverable transactions left to the checkpoint and the window's write sets installed.
fn replay_generation(
    options: &StreamOptions,
    db: &Database,
    read: &Generation,
    over: Over<'_>,
    state_ready: &mut bool,
    report: &mut GenerationReport,
) -> Result<(u64, u64), DurabilityError> {
    let start = Instant::now();
    // The logs' chained segments only: a segment after a log's valid end (a torn tail's) is
    // removed when the generation is settled, so nothing in it may be replayed.
    let chained = read.logs.iter().flat_map(|log| log.chain.iter().map(|&k| &read.segments[k]));
    let txns: Vec<&Txn> = chained.flat_map(|s| s.txns.iter()).collect();
    if txns.len() > graph::GRAPH_TXNS_MAX {
        let reason = format!("more than {} transactions in generation", graph::GRAPH_TXNS_MAX);
        return Err(corrupt(&read.segments[0].path, 0, reason));
    }
    // Serial flavors replay in LSN order and need no graph.
    let index = match options.flavor.is_taurus() {
        true => Some(graph::IdIndex::new(&txns).map_err(|id| duplicate_id(read, &txns, id))?),
        false => None,
    };
    let raw = if options.flavor.is_command() { graph::RawEdges::All } else { graph::RawEdges::WhenNeeded };
    let resolved = index.as_ref().map(|index| resolve(read, &txns, index, options.recovery_threads, raw));
    let recoverable = resolved.as_ref().map_or_else(|| vec![true; txns.len()], graph::recoverable_set);
    let (e_l, e_h) = over.manifest.map_or((0, 0), |m| (m.e_l, m.e_h));
    let class = |t: &Txn| match t.entry.epoch() {
        epoch if over.manifest.is_some() && epoch < e_l => Class::Covered,
        epoch if over.manifest.is_some() && options.flavor.is_command() && epoch <= e_h => Class::Window,
        _ => Class::Replay,
    };
    let classes: Vec<Class> = txns.iter().map(|t| class(t)).collect();
    let replay: Vec<bool> = recoverable.iter().zip(&classes).map(|(&r, &c)| r && c == Class::Replay).collect();
    let count = |c: Class| recoverable.iter().zip(&classes).filter(|&(&r, &k)| r && k == c).count() as u64;
    let (covered, window) = (count(Class::Covered), count(Class::Window));
    let kept = recoverable.iter().filter(|&&r| r).count();
    report.recovered += kept as u64 - covered;
    report.dropped += (txns.len() - kept) as u64;
    let graph = match (options.flavor, &resolved, &index) {
        (Flavor::TaurusData, Some(resolved), _) => Some(graph::data_graph(resolved, &replay)),
        (Flavor::TaurusCmd, Some(resolved), _) => graph::command_graph(&txns, resolved, &replay),
        _ => None,
    };
    report.graph_ms += start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let paths: Vec<&Path> = read.segments.iter().map(|s| s.path.as_path()).collect();
    if window > 0 {
        install_window(db, &paths, &txns, &recoverable, &classes, options.recovery_threads)?;
    }
    if !*state_ready && replay.iter().any(|&r| r) {
        // The checkpoint and the window are the state as of the end of e_h: indexes are built
        // over it, and re-executed transactions run in epochs above everything installed.
        crate::durability::value::recovery::rebuild_indexes(
            db,
            options.recovery_threads,
            options.replay_mode.entry_keys(),
        );
        db.epochs().advance_to(over.restart_after_epoch + 1);
        *state_ready = true;
    }
    if !options.flavor.is_command() {
        reserve_for_puts(db, &txns, &replay);
    }
    let mut replayer = Replayer::new(db, &paths, &txns, options);
    match graph {
        Some(graph) => {
            if options.flavor.is_command() {
                replayer.versioned = Some(Versioned::new(&txns, &replay));
            }
            let apply = |state: &mut ThreadState, i: usize| replayer.apply(state, i);
            dataflow::run(&graph, &replay, options.recovery_threads, apply).map_err(|e| match e {
                dataflow::Failure::Apply(e) => e,
                dataflow::Failure::Cycle { left } => {
                    let reason = format!("the recovery dependency graph has a cycle ({left} transactions never ready)");
                    corrupt(&read.segments[0].path, 0, reason)
                }
                dataflow::Failure::Panicked { transaction, message } => {
                    let txn = txns[transaction];
                    let at = format!("{} at byte {}", paths[txn.file].display(), txn.offset);
                    DurabilityError::Failed(format!("replay of the transaction of {at} panicked: {message}"))
                }
            })?;
            if let Some(versioned) = &replayer.versioned {
                let (records, versions) = versioned.store.sizes();
                report.versions_left = (records, versions);
                versioned.store.finish(&replayer.catalog);
            }
        }
        None => {
            // Serial flavors: LSN order; compressed taurus-cmd records: commit-timestamp order.
            let mut order: Vec<usize> = (0..txns.len()).filter(|&i| replay[i]).collect();
            order.sort_unstable_by_key(|&i| txns[i].entry.seq());
            let mut state = ThreadState::default();
            for i in order {
                replayer.apply(&mut state, i)?;
            }
            // This thread goes on to serve: it lets go of the values its edits replaced.
            crate::storage::retire::drop_retired();
        }
    }
    report.replay_ms += start.elapsed().as_secs_f64() * 1e3;
    Ok((covered, window))
}

/// Makes room in each table's point index for a row per whole-row image the replayed
/// transactions hold, so that replay does not rebuild the indexes' arrays on the way (each
/// rebuild reads every record's key again). An image of a key already present only makes an
/// array larger than needed, so the room is capped by the table's size (or
/// [`RESERVE_PUTS_MIN`]): a log of overwrites grows an index at most as one doubling would.
fn reserve_for_puts(db: &Database, txns: &[&Txn], replay: &[bool]) {
    let catalog = db.catalog();
    let mut puts = vec![0usize; catalog.tables().len()];
    for (txn, _) in txns.iter().zip(replay).filter(|&(_, &r)| r) {
        for write in &txn.writes.lock().writes {
            if let (Image::Put(_), Some(count)) = (&write.image, puts.get_mut(write.table as usize)) {
                *count += 1;
            }
        }
    }
    for (table, &count) in catalog.tables().iter().zip(&puts).filter(|&(_, &c)| c > 0) {
        table.point.reserve(count.min(table.point.len().max(RESERVE_PUTS_MIN)));
    }
}

/// Rows [`reserve_for_puts`] may reserve for a table however small it is.
const RESERVE_PUTS_MIN: usize = 1 << 20;

/// Two transactions of a generation at one address: the file and offset of the first.
fn duplicate_id(read: &Generation, txns: &[&Txn], id: u64) -> DurabilityError {
    let (file, offset) = txns.iter().find(|t| t.id == id).map_or((0, 0), |t| (t.file, t.offset));
    let (logger, address) = format::split_id(id);
    corrupt(&read.segments[file].path, offset, format!("two transactions at logger {logger}'s address {address}"))
}

/// Every transaction's predecessors found in the generation (§4.4.1), on all recovery threads.
fn resolve(
    read: &Generation,
    txns: &[&Txn],
    index: &graph::IdIndex,
    threads: usize,
    raw: graph::RawEdges,
) -> graph::Resolved {
    let mut valid_end = vec![0u64; read.loggers];
    let mut retained_start = vec![0u64; read.loggers];
    for log in &read.logs {
        if let (Some(v), Some(r)) = (valid_end.get_mut(log.logger), retained_start.get_mut(log.logger)) {
            (*v, *r) = (log.valid_end, log.retained_start);
        }
    }
    let extent = graph::Extent { valid_end: &valid_end, retained_start: &retained_start };
    graph::resolve(txns, index, &extent, threads, raw)
}

/// Installs the recoverable write sets of a command flavor's checkpoint window over the
/// checkpoint, the largest TID winning (`crate::durability::command`, "Checkpoints").
fn install_window(
    db: &Database,
    paths: &[&Path],
    txns: &[&Txn],
    recoverable: &[bool],
    classes: &[Class],
    threads: usize,
) -> Result<(), DurabilityError> {
    let mut window = Vec::new();
    for (i, txn) in txns.iter().enumerate().filter(|&(i, _)| recoverable[i] && classes[i] == Class::Window) {
        if matches!(txn.entry, CommandEntry::Call { .. }) {
            let reason = format!(
                "commit {} of epoch {} in the checkpoint's window is a procedure call, not a write set",
                txn.entry.seq(),
                txn.entry.epoch()
            );
            return Err(corrupt(paths[txns[i].file], txn.offset, reason));
        }
        window.push(&txn.entry);
    }
    crate::durability::command::parallel::install_shuffled(db, &window, threads)?;
    Ok(())
}

/// Applies one logged transaction: a data record by installing its after-images (largest TID
/// wins, so concurrent replayers agree), a command record by re-running it through the calling
/// thread's replay worker.
struct Replayer<'a> {
    db: &'a Database,
    catalog: Arc<crate::storage::Catalog>,
    registry: Arc<crate::db::ProcedureRegistry>,
    paths: &'a [&'a Path],
    txns: &'a [&'a Txn],
    command: bool,
    mode: ReplayMode,
    replayed: AtomicU64,
    /// Command replay on the graph: the versions (§5.2) and the watermark's progress (§5.3).
    versioned: Option<Versioned>,
}

/// Versioned command replay's shared state: the store, and which transactions are replayed, so
/// that the watermark (the smallest commit timestamp not yet replayed) can advance.
struct Versioned {
    store: Arc<VersionStore>,
    /// The transactions to replay (commit timestamp, position), by commit timestamp.
    by_ts: Vec<(u64, u32)>,
    /// Per transaction of the generation: replayed.
    done: Vec<AtomicBool>,
    /// The first position of `by_ts` not yet replayed.
    cursor: Mutex<usize>,
}

/// Replayed transactions between two collections of a shard of versions, per replay.
const TXNS_PER_VERSION_COLLECT: u64 = 64;

impl Versioned {
    fn new(txns: &[&Txn], replay: &[bool]) -> Versioned {
        let mut by_ts: Vec<(u64, u32)> =
            (0..txns.len() as u32).filter(|&i| replay[i as usize]).map(|i| (txns[i as usize].entry.seq(), i)).collect();
        by_ts.sort_unstable();
        let done = txns.iter().map(|_| AtomicBool::new(false)).collect();
        Versioned { store: Arc::new(VersionStore::new()), by_ts, done, cursor: Mutex::new(0) }
    }

    /// Transaction `i` is replayed: advances the watermark past every replayed prefix of the
    /// timestamp order (whichever thread holds the cursor does it; the others go on).
    fn replayed(&self, i: usize, replayed: u64) {
        self.done[i].store(true, Ordering::Release);
        if let Some(mut cursor) = self.cursor.try_lock() {
            let start = *cursor;
            while self.by_ts.get(*cursor).is_some_and(|&(_, j)| self.done[j as usize].load(Ordering::Acquire)) {
                *cursor += 1;
            }
            if *cursor > start {
                self.store.set_watermark(self.by_ts.get(*cursor).map_or(u64::MAX, |&(ts, _)| ts));
            }
        }
        if replayed.is_multiple_of(TXNS_PER_VERSION_COLLECT) {
            self.store.collect();
        }
    }
}

/// What one replay thread keeps between transactions: a replay worker (command flavors) or a
/// redo applier with its plan cache (data flavors).
#[derive(Default)]
struct ThreadState {
    worker: Option<crate::db::Worker>,
    redo: Option<crate::replay::Replayer>,
    /// The records of the transaction's written keys, looked up before any is written.
    found: Vec<Option<crate::storage::Record>>,
    /// The hashes of the transaction's written keys, taken to prefetch their lookups.
    hashes: Vec<KeyHash>,
}

impl<'a> Replayer<'a> {
    fn new(db: &'a Database, paths: &'a [&'a Path], txns: &'a [&'a Txn], options: &StreamOptions) -> Replayer<'a> {
        Replayer {
            db,
            catalog: db.catalog(),
            registry: db.procedures(),
            paths,
            txns,
            command: options.flavor.is_command(),
            mode: options.replay_mode,
            replayed: AtomicU64::new(0),
            versioned: None,
        }
    }

    /// A data record's writes, through the thread's applier in the chosen mode
    /// ([`crate::replay`]): whole rows and deletes by the largest TID, column patches to the row
    /// the key holds.
    fn apply_data(&self, state: &mut ThreadState, txn: &Txn, path: &Path) -> Result<(), DurabilityError> {
        let CommandEntry::Data { entry, .. } = &txn.entry else {
            return Err(corrupt(path, txn.offset, "a procedure call in a data log"));
        };
        let mut set = txn.writes.lock();
        if std::mem::replace(&mut set.replayed, true) {
            let at = format!("{} at byte {}", path.display(), txn.offset);
            return Err(DurabilityError::Failed(format!("the transaction of {at} was replayed twice")));
        }
        let redo = state.redo.get_or_insert_with(|| crate::replay::Replayer::new(self.mode));
        let compiled = self.mode == ReplayMode::Compiled;
        // Every written key is looked up, and its row prefetched, before the first write: each
        // lookup and each row is a cache miss, and issued together they overlap instead of
        // following one another (`docs/PERFORMANCE.md`, "Taurus", "Session 18"). Keys are
        // distinct within a write set, and a key's other writers are ordered by WAW edges, so
        // what was found is still the key's record when its write comes (a key found absent
        // that another thread links meanwhile is handled by the install).
        // Each lookup is two misses on a large table, its slot and then the record the slot
        // points to: all slots are prefetched first, then all records, then the lookups run.
        let (found, hashes) = (&mut state.found, &mut state.hashes);
        found.clear();
        hashes.clear();
        let guard = crossbeam_epoch::pin();
        for write in &set.writes {
            let point = &self.table_of(write, path, txn)?.point;
            let hash = point.hash_of(write.key.as_bytes());
            point.prefetch_pinned(hash, Prefetch::Slot, &guard);
            hashes.push(hash);
        }
        for (write, &hash) in set.writes.iter().zip(hashes.iter()) {
            self.table_of(write, path, txn)?.point.prefetch_pinned(hash, Prefetch::Record, &guard);
        }
        drop(guard);
        for (write, &hash) in set.writes.iter().zip(hashes.iter()) {
            let record = self.table_of(write, path, txn)?.point.get_hashed(hash, write.key.as_bytes());
            match (&record, &write.image) {
                (Some(record), Image::Patch(patch)) => {
                    record.prefetch_row();
                    record.prefetch_row_columns(patch.columns().iter().map(|&(column, _)| usize::from(column)));
                }
                (Some(record), _) => record.prefetch_row(),
                (None, _) => {}
            }
            found.push(record);
        }
        for (n, (write, found)) in set.writes.iter_mut().zip(found.drain(..)).enumerate() {
            let table = self.table_of(write, path, txn)?;
            let (key, tid) = (write.key.as_bytes(), entry.tid);
            let image = match &mut write.image {
                Image::Put(row) if !compiled => Image::Put(row.clone()),
                image => std::mem::replace(image, Image::Delete),
            };
            let row = match image {
                Image::Put(row) => Some(row),
                Image::Delete => None,
                Image::Patch(patch) => {
                    let applied = redo.apply_patch_found(&self.catalog, table, &write.key, tid, patch, found);
                    applied.map_err(|e| write_error(path, txn, n, table, e))?;
                    continue;
                }
            };
            // Compiled replay picks the update plan for a key it has seen, the insert plan for
            // one it has not; both modes install into the record found, or link a new one.
            let record = RedoRecord { key, row, tid, key_seen: found.is_some() };
            let applied = redo.apply_found(&self.catalog, table, record, found);
            applied.map_err(|e| write_error(path, txn, n, table, e))?;
        }
        Ok(())
    }

    /// The table `write` is to (an index into the catalog's list).
    fn table_of(&self, write: &EntryWrite, path: &Path, txn: &Txn) -> Result<&crate::storage::Table, DurabilityError> {
        let table = self.catalog.table(write.table);
        table.map(|t| &**t).ok_or_else(|| corrupt(path, txn.offset, format!("write to unknown table #{}", write.table)))
    }

    fn apply(&self, state: &mut ThreadState, i: usize) -> Result<(), DurabilityError> {
        let txn = self.txns[i];
        let path = self.paths[txn.file];
        if !self.command {
            return self.apply_data(state, txn, path);
        }
        let replayed = self.replayed.fetch_add(1, Ordering::Relaxed);
        if replayed % TXNS_PER_EPOCH == TXNS_PER_EPOCH - 1 {
            self.db.epochs().advance();
        }
        let worker = state.worker.get_or_insert_with(|| self.db.replay_worker());
        let diverged =
            |what: String| corrupt(path, txn.offset, format!("replay of {} diverged: {what}", txn.entry.seq()));
        let snapshot = self.versioned.as_ref().map(|v| Snapshot { store: Arc::clone(&v.store), ts: txn.entry.seq() });
        match (&txn.entry, snapshot) {
            (CommandEntry::Call { procedure_id, args, .. }, Some(snapshot)) => {
                let called = worker.replay_call_at(&self.registry, *procedure_id, args, snapshot);
                called.map_err(|e| diverged(e.to_string()))?;
            }
            (CommandEntry::Call { procedure_id, args, .. }, None) => {
                worker.call_id(&self.registry, *procedure_id, args).map_err(|e| diverged(e.to_string()))?;
            }
            (CommandEntry::Data { entry, .. }, snapshot) => {
                crate::durability::command::recovery::apply_writes(worker, path, entry, snapshot).map_err(diverged)?;
            }
        }
        if let Some(versioned) = &self.versioned {
            versioned.replayed(i, replayed);
        }
        Ok(())
    }
}

/// The error for write `n` of `txn` that could not be replayed.
fn write_error(path: &Path, txn: &Txn, n: usize, table: &crate::storage::Table, e: ReplayError) -> DurabilityError {
    corrupt(path, txn.offset, format!("write {n} of commit {} ({}): {e}", txn.entry.seq(), table.schema.name))
}

/// Settles the current generation's logs: cuts the last segment of each to its valid length and
/// ends it with an end record, and removes the segments after its valid end (a torn tail, or a
/// file without a whole header), synced, so that what was recovered is exactly what any later
/// recovery reads, and a later cut is seen.
fn settle(options: &StreamOptions, read: &Generation) -> Result<(), DurabilityError> {
    let fs = options.fs.as_ref();
    for log in &read.logs {
        for &k in log.discarded.iter().rev() {
            fs.remove(&read.segments[k].path)?;
        }
        let Some(&last) = log.chain.last() else { continue };
        let segment = &read.segments[last];
        if segment.file_len > segment.valid_len || !segment.ended {
            let mut file = fs.open(&segment.path, OpenMode::ReadWrite)?;
            if segment.file_len > segment.valid_len {
                file.truncate(segment.valid_len)?;
            }
            if !segment.ended {
                let mut payload = Vec::with_capacity(9);
                format::encode_end(segment.valid_len, &mut payload);
                let mut block = Vec::with_capacity(frame::HEADER_SIZE_BYTES + payload.len());
                frame::encode_block(&payload, &mut block);
                file.write_at(segment.valid_len, &block)?;
            }
            file.sync_data()?;
        }
    }
    for dir in &dedup_dirs(options) {
        fs.sync_dir(dir)?;
    }
    Ok(())
}
