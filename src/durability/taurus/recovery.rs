//! Recovery of the stream schemes.
//!
//! 1. Rebuild the catalog from the `catalog` file (shared with the value scheme).
//! 2. Read the persistent vector file ([`format`]): the current generation and every logger's
//!    durable length in it. Group the log files by generation. Every generation before the
//!    current one was settled by an earlier recovery: its files must be whole and end with
//!    their end record (a file cut at a record boundary lacks it). A current file must be whole
//!    up to its durable length — every acknowledged transaction lies before it, so damage or a
//!    cut there is corruption, reported with the file and offset, never a shorter prefix; after
//!    it the file may end in a torn tail (never acknowledged), which is cut off. Log files
//!    without a persistent vector file (a directory of format version 1, or a removed file) are
//!    refused.
//! 3. Per generation, one I/O thread per file reads and decodes it (Algorithm 3's I/O threads).
//! 4. Serial: replay the records sorted by LSN on one thread. Taurus: build the recovery
//!    dependency graph. A transaction is recoverable iff all its RAW predecessors are found and
//!    recoverable (§4.4.1 phase 2; with compressed records: iff its predecessor vector is
//!    within the files' valid lengths, which is the committability test of §4.2 against the
//!    persistent vector at the crash). Unrecoverable transactions and their RAW successors are
//!    dropped. `taurus-data` replays the recoverable ones on `recovery_threads` threads, each
//!    once its recoverable WAW predecessors are replayed (Algorithms 3 and 5); `taurus-cmd`
//!    re-executes them in commit-timestamp order (see `docs/taurus.md`: without multi-version
//!    records, WAR dependencies forbid running RAW/WAW-independent commands at once).
//! 5. Data flavors install after-images with the largest-TID-wins rule of SiloR
//!    ([`crate::storage::Table::install_if_newer`]) and sweep tombstones and build secondary
//!    indexes at the end; command flavors run transactions through a replay worker.
//! 6. Settle the current generation's files: cut each to its valid length and end it with an
//!    end record, synced; the scheme then starts the next generation, so a dropped transaction
//!    can never become recoverable later.
//!
//! The whole graph of a generation is built before replay (phases merged as in §4.4.2 would
//! bound its memory; a generation's files are bounded by [`LOG_FILE_SIZE_MAX_BYTES`]).

use super::StreamOptions;
use super::cdt;
use super::format::{self, Deps, Flavor, PersistentVector, Record};
use crate::db::Database;
use crate::durability::DurabilityError;
use crate::durability::command::CommandEntry;
use crate::durability::frame;
use crate::durability::value::recovery::{corrupt, rebuild_catalog};
use crate::io::OpenMode;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// The largest log file recovery reads, in bytes.
pub const LOG_FILE_SIZE_MAX_BYTES: u64 = crate::durability::value::recovery::LOG_FILE_SIZE_MAX_BYTES;
/// Command replay advances the (not yet running) epoch every so many transactions, so that TIDs
/// never run out of sequence numbers within one epoch.
const TXNS_PER_EPOCH: u64 = 1 << 20;

/// What recovery found and did.
#[derive(Clone, Debug, Default)]
pub struct StreamRecoveryReport {
    /// Generations read.
    pub generations: usize,
    /// Log files read.
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
    /// Milliseconds deciding recoverability.
    pub graph_ms: f64,
    /// Milliseconds replaying.
    pub replay_ms: f64,
}

impl GenerationReport {
    /// Transactions replayed per second of graph and replay.
    pub fn txns_per_s(&self) -> f64 {
        self.recovered as f64 / ((self.graph_ms + self.replay_ms) / 1e3).max(1e-9)
    }
}

impl StreamRecoveryReport {
    /// Transactions replayed per second of replay (graph and replay).
    pub fn txns_per_s(&self) -> f64 {
        self.recovered as f64 / ((self.graph_ms + self.replay_ms) / 1e3).max(1e-9)
    }
}

/// A logged transaction.
struct Txn {
    /// `logger << 56 | address past the record`.
    id: u64,
    /// The record's block offset in its file, for errors.
    offset: u64,
    /// Index of its file in the generation.
    file: usize,
    deps: Deps,
    entry: CommandEntry,
}

/// One file of a generation after reading.
struct ParsedLog {
    path: PathBuf,
    logger: usize,
    loggers: Option<usize>,
    valid_len: u64,
    file_len: u64,
    header_ok: bool,
    /// Whether it ends with its end record (settled by a recovery).
    ended: bool,
    txns: Vec<Txn>,
}

/// Recovers `db` from the stream logs in `options.log_dirs`.
pub fn recover(
    options: &StreamOptions,
    db: &Database,
    modules: &Mutex<Vec<(String, String)>>,
) -> Result<StreamRecoveryReport, DurabilityError> {
    let fs = options.fs.as_ref();
    *modules.lock() = rebuild_catalog(fs, &options.log_dirs[0], db)?;
    let generations = list_generations(options)?;
    let pv_path = options.log_dirs[0].join(format::persistent_vector_name(options.flavor));
    let current = current_generation(options, &pv_path, &generations)?;
    let mut report = StreamRecoveryReport { threads: options.recovery_threads, next_lsn: 1, ..Default::default() };
    let mut current_logs = Vec::new();
    for (generation, paths) in generations {
        let durable_len = current.as_ref().filter(|pv| pv.generation == generation).map(|pv| &pv.durable_len_bytes[..]);
        let start = Instant::now();
        let logs = read_generation(options, generation, &paths, durable_len, &pv_path)?;
        report.read_ms += start.elapsed().as_secs_f64() * 1e3;
        report.generations += 1;
        report.files += logs.len();
        for log in &logs {
            report.bytes += log.valid_len;
            report.torn_bytes += log.file_len - log.valid_len;
            report.records += log.txns.len() as u64;
            for txn in &log.txns {
                report.restart_after_epoch = report.restart_after_epoch.max(txn.entry.epoch());
                report.next_lsn = report.next_lsn.max(txn.entry.seq() + 1);
            }
        }
        let mut one =
            GenerationReport { generation, bytes: logs.iter().map(|l| l.valid_len).sum(), ..Default::default() };
        replay_generation(options, db, &logs, &mut one)?;
        report.recovered += one.recovered;
        report.dropped += one.dropped;
        report.graph_ms += one.graph_ms;
        report.replay_ms += one.replay_ms;
        report.per_generation.push(one);
        report.next_generation = generation + 1;
        if durable_len.is_some() {
            current_logs = logs;
        }
    }
    // A current generation whose log files were never created (a crash right after its
    // persistent vector file was written) is started again.
    if let Some(pv) = &current {
        report.next_generation = report.next_generation.max(pv.generation);
    }
    if !options.flavor.is_command() {
        let start = Instant::now();
        for table in db.catalog().tables() {
            table.finish_recovery();
        }
        report.rebuild_ms = start.elapsed().as_secs_f64() * 1e3;
    }
    report.restart_after_epoch = report.restart_after_epoch.max(db.epochs().current());
    settle(options, &current_logs)?;
    Ok(report)
}

/// The persistent vector of the current generation, checked against the log files found;
/// `None` for a directory without logs or persistent vector (a new database).
fn current_generation(
    options: &StreamOptions,
    pv_path: &Path,
    generations: &BTreeMap<u64, Vec<(usize, PathBuf)>>,
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
                    format::FORMAT_VERSION
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
    // Every logger with durable data must have its file (it is read, and its length checked).
    let found = generations.get(&pv.generation).map_or(&[][..], Vec::as_slice);
    for (logger, &len) in pv.durable_len_bytes.iter().enumerate() {
        if len > 0 && !found.iter().any(|(l, _)| *l == logger) {
            let log = options.dir_of(logger).join(format::log_name(options.flavor, logger, pv.generation));
            let reason = format!("missing, but {} records {len} durable bytes of it", pv_path.display());
            return Err(corrupt(&log, 0, reason));
        }
    }
    Ok(Some(pv))
}

/// The stream log files of every directory, by generation: `(logger, path)`.
fn list_generations(options: &StreamOptions) -> Result<BTreeMap<u64, Vec<(usize, PathBuf)>>, DurabilityError> {
    let mut generations: BTreeMap<u64, Vec<(usize, PathBuf)>> = BTreeMap::new();
    let mut dirs = options.log_dirs.clone();
    dirs.sort();
    dirs.dedup();
    for dir in &dirs {
        for name in options.fs.list(dir)? {
            let Some((taurus, logger, generation)) = format::parse_log_name(&name) else {
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
            generations.entry(generation).or_default().push((logger, path));
        }
    }
    for files in generations.values_mut() {
        files.sort();
    }
    Ok(generations)
}

/// Reads a generation's files, one I/O thread each. `durable_len` is the persistent vector's
/// durable length per logger for the current generation, `None` for a settled one.
fn read_generation(
    options: &StreamOptions,
    generation: u64,
    paths: &[(usize, PathBuf)],
    durable_len: Option<&[u64]>,
    pv_path: &Path,
) -> Result<Vec<ParsedLog>, DurabilityError> {
    let results: Vec<Result<ParsedLog, DurabilityError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .iter()
            .enumerate()
            .map(|(index, (logger, path))| {
                // A logger beyond the vector's is caught below (the headers disagree with it).
                let durable_len = durable_len.map(|d| d.get(*logger).copied().unwrap_or(0));
                let file = LogToRead { generation, index, logger: *logger, path, durable_len, pv_path };
                scope.spawn(move || read_log(options, &file))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(DurabilityError::Failed("reader panicked".into()))))
            .collect()
    });
    let logs = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let loggers: Vec<usize> = logs.iter().filter_map(|l| l.loggers).collect();
    if let Some(&n) = loggers.first()
        && (loggers.iter().any(|&m| m != n) || logs.iter().any(|l| l.logger >= n))
    {
        return Err(corrupt(&logs[0].path, 0, "the files of one generation disagree on the number of loggers"));
    }
    if let (Some(&n), Some(durable_len)) = (loggers.first(), durable_len)
        && n != durable_len.len()
    {
        let reason = format!("records {} loggers for generation {generation}, its log files {n}", durable_len.len());
        return Err(corrupt(pv_path, 0, reason));
    }
    Ok(logs)
}

/// A log file to read, and where it stands.
struct LogToRead<'a> {
    generation: u64,
    /// Its index in the generation.
    index: usize,
    logger: usize,
    path: &'a Path,
    /// In the current generation, the length the persistent vector file records as durable;
    /// `None` in a settled generation (the file must be whole and end with its end record).
    durable_len: Option<u64>,
    /// The persistent vector file, for errors.
    pv_path: &'a Path,
}

fn read_log(options: &StreamOptions, file: &LogToRead<'_>) -> Result<ParsedLog, DurabilityError> {
    let path = file.path;
    let bytes = options.fs.read_all(path, LOG_FILE_SIZE_MAX_BYTES)?;
    let log = read_records(options, file, &bytes)?;
    if let Some(durable) = file.durable_len
        && log.valid_len < durable
    {
        let reason = format!(
            "the log ends before its durable length {durable}, which {} records: acknowledged transactions are \
             missing (a lost or misdirected write, or a cut)",
            file.pv_path.display()
        );
        return Err(corrupt(path, log.valid_len, reason));
    }
    Ok(log)
}

fn read_records(options: &StreamOptions, file: &LogToRead<'_>, bytes: &[u8]) -> Result<ParsedLog, DurabilityError> {
    let LogToRead { generation, index, logger, path, durable_len, .. } = *file;
    let mut log = ParsedLog {
        path: path.to_path_buf(),
        logger,
        loggers: None,
        valid_len: 0,
        file_len: bytes.len() as u64,
        header_ok: false,
        ended: false,
        txns: Vec::new(),
    };
    let (header, mut at) = match format::decode_header(bytes) {
        Ok(h) => h,
        // A file created just before the crash whose header never reached the disk.
        Err(_) if durable_len == Some(0) => return Ok(log),
        Err(e) => return Err(corrupt(path, 0, e)),
    };
    if header.flavor != options.flavor || header.generation != generation || header.logger as usize != logger {
        let reason =
            format!("header says {} logger {} generation {}", header.flavor.name(), header.logger, header.generation);
        return Err(corrupt(path, 0, format!("{reason}; the name or the scheme says otherwise")));
    }
    log.header_ok = true;
    log.loggers = Some(header.loggers as usize);
    while at < bytes.len() {
        let (payload, size) = match frame::decode_block(&bytes[at..]) {
            Ok(block) => block,
            Err(e) => match durable_len {
                None => return Err(corrupt(path, at as u64, format!("{e} in a settled generation"))),
                Some(durable) if (at as u64) < durable => {
                    let reason = format!("{e} before the durable length {durable} (not a torn tail)");
                    return Err(corrupt(path, at as u64, reason));
                }
                Some(_) => break,
            },
        };
        let end = (at + size) as u64;
        match format::decode_record(payload).map_err(|e| corrupt(path, at as u64, e.to_string()))? {
            Record::End(len) if len != at as u64 => {
                return Err(corrupt(path, at as u64, format!("an end record for length {len} at another offset")));
            }
            Record::End(_) => {
                // Nothing is appended after it; bytes after it (in the current generation, a
                // truncation lost at a crash during settling) are cut off.
                log.ended = true;
                at += size;
                break;
            }
            Record::Txn { deps, entry } => {
                log.txns.push(Txn { id: format::txn_id(logger, end), offset: at as u64, file: index, deps, entry });
            }
        }
        at += size;
    }
    if durable_len.is_none() && !log.ended {
        return Err(corrupt(path, at as u64, "a file of a settled generation ends without its end record (cut short)"));
    }
    if durable_len.is_none() && at < bytes.len() {
        return Err(corrupt(path, at as u64, "bytes after the end record of a file of a settled generation"));
    }
    log.valid_len = at as u64;
    Ok(log)
}

/// Decides which transactions of a generation are recoverable and replays them.
fn replay_generation(
    options: &StreamOptions,
    db: &Database,
    logs: &[ParsedLog],
    report: &mut GenerationReport,
) -> Result<(), DurabilityError> {
    let start = Instant::now();
    let txns: Vec<&Txn> = logs.iter().flat_map(|l| l.txns.iter()).collect();
    let recoverable = if options.flavor.is_taurus() { recoverable_set(logs, &txns) } else { vec![true; txns.len()] };
    let kept = recoverable.iter().filter(|&&r| r).count();
    report.recovered += kept as u64;
    report.dropped += (txns.len() - kept) as u64;
    let graph = match options.flavor {
        Flavor::TaurusData => Some(data_graph(&txns, &recoverable)),
        Flavor::TaurusCmd => command_graph(&txns, &recoverable),
        Flavor::SerialData | Flavor::SerialCmd => None,
    };
    report.graph_ms += start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let paths: Vec<&Path> = logs.iter().map(|l| l.path.as_path()).collect();
    let replayer = Replayer::new(db, &paths, &txns, options.flavor.is_command());
    match graph {
        Some(graph) => run_dataflow(&graph, &recoverable, options.recovery_threads, &replayer)?,
        None => {
            // Serial flavors: LSN order; compressed taurus-cmd records: commit-timestamp order.
            let mut order: Vec<usize> = (0..txns.len()).filter(|&i| recoverable[i]).collect();
            order.sort_unstable_by_key(|&i| txns[i].entry.seq());
            let mut worker = None;
            for i in order {
                replayer.apply(&mut worker, i)?;
            }
        }
    }
    report.replay_ms += start.elapsed().as_secs_f64() * 1e3;
    Ok(())
}

/// Phase 2 of §4.4.1: which transactions are recoverable. The I/O threads have read everything,
/// so a predecessor not found is missing from every log.
fn recoverable_set(logs: &[ParsedLog], txns: &[&Txn]) -> Vec<bool> {
    let loggers = logs.iter().filter_map(|l| l.loggers).next().unwrap_or(0);
    let mut valid = vec![0u64; loggers];
    for log in logs {
        if let Some(v) = valid.get_mut(log.logger) {
            *v = log.valid_len;
        }
    }
    let index: HashMap<u64, usize, foldhash::fast::RandomState> =
        txns.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
    let mut pending = vec![0usize; txns.len()];
    let mut doomed = vec![false; txns.len()];
    let mut raw_successors: Vec<Vec<usize>> = vec![Vec::new(); txns.len()];
    for (i, txn) in txns.iter().enumerate() {
        match &txn.deps {
            Deps::None => {}
            Deps::Lists { raw, .. } => {
                for id in raw {
                    match index.get(id) {
                        Some(&j) => {
                            raw_successors[j].push(i);
                            pending[i] += 1;
                        }
                        None => doomed[i] = true,
                    }
                }
            }
            Deps::Vectors { pv, .. } => doomed[i] = pv.len() != loggers || !cdt::dominates(&valid, pv),
        }
    }
    // Algorithm 5: a node whose RAW predecessors are all recoverable is recoverable, and tells
    // its RAW successors.
    let mut recoverable = vec![false; txns.len()];
    let mut queue: Vec<usize> = (0..txns.len()).filter(|&i| pending[i] == 0 && !doomed[i]).collect();
    while let Some(i) = queue.pop() {
        recoverable[i] = true;
        for &s in &raw_successors[i] {
            pending[s] -= 1;
            if pending[s] == 0 && !doomed[s] {
                queue.push(s);
            }
        }
    }
    recoverable
}

/// The order replay must respect among the recoverable transactions: `successors[j]` run after
/// `j`, and `pending[i]` counts the edges into `i`.
struct ReplayGraph {
    successors: Vec<Vec<usize>>,
    pending: Vec<usize>,
}

impl ReplayGraph {
    fn new(n: usize) -> ReplayGraph {
        ReplayGraph { successors: vec![Vec::new(); n], pending: vec![0; n] }
    }

    fn edge(&mut self, from: usize, to: usize) {
        debug_assert_ne!(from, to);
        self.successors[from].push(to);
        self.pending[to] += 1;
    }
}

fn recoverable_index(txns: &[&Txn], recoverable: &[bool]) -> HashMap<u64, usize, foldhash::fast::RandomState> {
    txns.iter().enumerate().filter(|(i, _)| recoverable[*i]).map(|(i, t)| (t.id, i)).collect()
}

/// Data replay (Algorithm 3): a transaction waits for its recoverable WAW predecessors.
/// Compressed records name no single WAW predecessor; they need none, since the largest TID
/// wins whatever the order.
fn data_graph(txns: &[&Txn], recoverable: &[bool]) -> ReplayGraph {
    let index = recoverable_index(txns, recoverable);
    let mut graph = ReplayGraph::new(txns.len());
    for (i, txn) in txns.iter().enumerate().filter(|(i, _)| recoverable[*i]) {
        if let Deps::Lists { waw, .. } = &txn.deps {
            for &j in waw.iter().filter_map(|id| index.get(id)) {
                graph.edge(j, i);
            }
        }
    }
    graph
}

/// The most edges the command replay graph may hold; beyond it replay is serial.
const COMMAND_EDGES_MAX: usize = 1 << 26;

/// Command replay: a transaction re-executes after its recoverable RAW and WAW predecessors
/// (§5.1), after every reader of a version it overwrites (WAR, inferred as §5.1 suggests: if `R`
/// RAW-depends on `P` and `W` WAW-depends on `P` and `R` committed first, `R` precedes `W`), and
/// in commit-timestamp order around a transaction with fresh writes (it may fill a key another
/// one found missing, a dependency no `last_writer` records). Every edge goes from a smaller
/// commit timestamp to a larger one, so the graph has no cycle (the timestamp is taken at the
/// serialization point, a serial order: `crate::durability::command`). `None` (replay in timestamp
/// order) when a record is compressed or the graph would be too large.
fn command_graph(txns: &[&Txn], recoverable: &[bool]) -> Option<ReplayGraph> {
    let index = recoverable_index(txns, recoverable);
    let ts = |i: usize| txns[i].entry.seq();
    let mut graph = ReplayGraph::new(txns.len());
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); txns.len()];
    let mut writers: Vec<Vec<usize>> = vec![Vec::new(); txns.len()];
    let mut order: Vec<usize> = Vec::new();
    let mut fresh = vec![false; txns.len()];
    for (i, txn) in txns.iter().enumerate().filter(|(i, _)| recoverable[*i]) {
        let Deps::Lists { raw, waw, fresh_writes } = &txn.deps else { return None };
        fresh[i] = *fresh_writes;
        order.push(i);
        // A predecessor with a larger commit timestamp is the delete chain's head, listed
        // conservatively (a transaction that observed a delete took its timestamp after it);
        // it decides recoverability but not the order.
        for &j in raw.iter().filter_map(|id| index.get(id)).filter(|&&j| ts(j) < ts(i)) {
            graph.edge(j, i);
            readers[j].push(i);
        }
        for &j in waw.iter().filter_map(|id| index.get(id)).filter(|&&j| ts(j) < ts(i)) {
            graph.edge(j, i);
            writers[j].push(i);
        }
    }
    let mut edges: usize = graph.pending.iter().sum();
    for p in 0..txns.len() {
        for &r in &readers[p] {
            for &w in writers[p].iter().filter(|&&w| w != r && ts(r) < ts(w)) {
                graph.edge(r, w);
                edges += 1;
            }
        }
        if edges > COMMAND_EDGES_MAX {
            return None;
        }
    }
    order.sort_unstable_by_key(|&i| ts(i));
    let (mut barrier, mut since_barrier) = (None, Vec::new());
    for i in order {
        if fresh[i] {
            for &j in since_barrier.iter().chain(barrier.iter()) {
                graph.edge(j, i);
            }
            since_barrier.clear();
            barrier = Some(i);
        } else {
            if let Some(b) = barrier {
                graph.edge(b, i);
            }
            since_barrier.push(i);
        }
    }
    Some(graph)
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
    replayed: AtomicU64,
}

impl<'a> Replayer<'a> {
    fn new(db: &'a Database, paths: &'a [&'a Path], txns: &'a [&'a Txn], command: bool) -> Replayer<'a> {
        Replayer {
            db,
            catalog: db.catalog(),
            registry: db.procedures(),
            paths,
            txns,
            command,
            replayed: AtomicU64::new(0),
        }
    }

    fn apply(&self, worker: &mut Option<crate::db::Worker>, i: usize) -> Result<(), DurabilityError> {
        let txn = self.txns[i];
        let path = self.paths[txn.file];
        if !self.command {
            let CommandEntry::Data { entry, .. } = &txn.entry else {
                return Err(corrupt(path, txn.offset, "a procedure call in a data log"));
            };
            for write in &entry.writes {
                let table = self
                    .catalog
                    .table(write.table)
                    .ok_or_else(|| corrupt(path, txn.offset, format!("write to unknown table #{}", write.table)))?;
                table.install_if_newer(&write.key, write.row.clone(), entry.tid);
            }
            return Ok(());
        }
        if self.replayed.fetch_add(1, Ordering::Relaxed) % TXNS_PER_EPOCH == TXNS_PER_EPOCH - 1 {
            self.db.epochs().advance();
        }
        let worker = worker.get_or_insert_with(|| self.db.replay_worker());
        let diverged =
            |what: String| corrupt(path, txn.offset, format!("replay of {} diverged: {what}", txn.entry.seq()));
        match &txn.entry {
            CommandEntry::Call { procedure_id, args, .. } => {
                worker.call_id(&self.registry, *procedure_id, args).map_err(|e| diverged(e.to_string()))?;
            }
            CommandEntry::Data { entry, .. } => {
                crate::durability::command::recovery::apply_writes(worker, path, entry).map_err(diverged)?;
            }
        }
        Ok(())
    }
}

struct Ready {
    queue: Vec<usize>,
    busy: usize,
    remaining: usize,
    failure: Option<DurabilityError>,
}

/// Algorithm 3's worker threads: each takes a transaction whose predecessors in `graph` are
/// replayed, replays it, and makes its successors ready when it was their last predecessor.
fn run_dataflow(
    graph: &ReplayGraph,
    recoverable: &[bool],
    threads: usize,
    replayer: &Replayer<'_>,
) -> Result<(), DurabilityError> {
    let queue: Vec<usize> = (0..recoverable.len()).filter(|&i| recoverable[i] && graph.pending[i] == 0).collect();
    let remaining = recoverable.iter().filter(|&&r| r).count();
    let state = Mutex::new(Ready { queue, busy: 0, remaining, failure: None });
    let pending: Vec<AtomicUsize> = graph.pending.iter().map(|&p| AtomicUsize::new(p)).collect();
    let cv = Condvar::new();
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let (mut worker, mut next, mut ready) = (None, None, Vec::new());
                loop {
                    let i = match next.take() {
                        Some(i) => i,
                        None => {
                            let mut guard = state.lock();
                            loop {
                                if guard.remaining == 0 || guard.failure.is_some() {
                                    cv.notify_all();
                                    return;
                                }
                                if let Some(i) = guard.queue.pop() {
                                    guard.busy += 1;
                                    break i;
                                }
                                if guard.busy == 0 {
                                    let reason = "the recovery dependency graph has a cycle";
                                    guard.failure = Some(corrupt(replayer.paths[0], 0, reason));
                                    continue;
                                }
                                cv.wait(&mut guard);
                            }
                        }
                    };
                    let result = replayer.apply(&mut worker, i);
                    ready.clear();
                    ready.extend(
                        graph.successors[i].iter().copied().filter(|&s| pending[s].fetch_sub(1, Ordering::AcqRel) == 1),
                    );
                    // Go on with one successor at once: a chain of dependent transactions stays
                    // on one thread instead of being handed from one thread to the other.
                    next = ready.pop();
                    let mut guard = state.lock();
                    guard.remaining -= 1;
                    if let Err(e) = result {
                        guard.failure.get_or_insert(e);
                    }
                    if !ready.is_empty() {
                        guard.queue.append(&mut ready);
                        cv.notify_all();
                    }
                    if next.is_none() || guard.failure.is_some() {
                        guard.busy -= 1;
                        next = None;
                    }
                    if guard.remaining == 0 {
                        cv.notify_all();
                    }
                }
            });
        }
    });
    match state.into_inner().failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Settles the current generation's files: cuts each to its valid length and ends it with an
/// end record (a file without a whole header is removed), synced, so that what was recovered is
/// exactly what any later recovery reads, and a later cut of the file is seen.
fn settle(options: &StreamOptions, logs: &[ParsedLog]) -> Result<(), DurabilityError> {
    let fs = options.fs.as_ref();
    for log in logs {
        if !log.header_ok {
            fs.remove(&log.path)?;
        } else if log.file_len > log.valid_len || !log.ended {
            let mut file = fs.open(&log.path, OpenMode::ReadWrite)?;
            if log.file_len > log.valid_len {
                file.truncate(log.valid_len)?;
            }
            if !log.ended {
                let mut payload = Vec::with_capacity(9);
                format::encode_end(log.valid_len, &mut payload);
                let mut block = Vec::with_capacity(frame::HEADER_SIZE_BYTES + payload.len());
                frame::encode_block(&payload, &mut block);
                file.write_at(log.valid_len, &block)?;
            }
            file.sync_data()?;
        }
    }
    let mut dirs = options.log_dirs.clone();
    dirs.dedup();
    for dir in &dirs {
        fs.sync_dir(dir)?;
    }
    Ok(())
}
