//! Log recovery for the value scheme (SiloR §5.2).
//!
//! 1. Rebuild the catalog from the `catalog` file (the modules, in load order).
//! 2. Read `pepoch`: the persistent epoch `p`, each logger's durable position, the void epochs.
//! 3. If a checkpoint is installed (a `checkpoint` manifest), load it with all cores
//!    ([`crate::durability::checkpoint::loader`]); its `e_l` is the first epoch to replay.
//! 4. Sort every logger's files by their sequence number. Files older than the logger's durable
//!    file must be whole (they end with an end block that records their length); the durable file is read up to its durable length; newer files hold
//!    only records of epochs > `p` and are discarded. Rotated files whose name says they hold
//!    only epochs < `e_l` are not read.
//! 5. Replay with all cores, newest file first (SiloR: later files make most older records
//!    obsolete, so fewer overwrites): for each record of an epoch in `[e_l, p]` and not void,
//!    install its after-image (or a tombstone for a delete) if its TID is larger than the key's
//!    current one.
//! 6. Sweep tombstones and build the secondary indexes, one thread per table.
//! 7. Make the directory match what was recovered: truncate the durable file to its durable
//!    length and end it with an end block, delete discarded files and the files of unfinished checkpoints, close `data.log`
//!    under an `old_data` name, and write a `pepoch` whose void ranges cover every epoch above
//!    `p` that a retained file may hold, so those records are never replayed after the epoch
//!    moves past them.
//!
//! Damage inside the durable part of a file stops recovery with
//! [`DurabilityError::Corrupt`] naming the file and offset; nothing is silently skipped.

use super::ValueOptions;
use super::files::{self, DurablePosition, Pepoch};
use super::replay;
use crate::db::Database;
use crate::durability::DurabilityError;
use crate::durability::checkpoint::{format::Manifest, loader, writer};
use crate::io::{FileSystem, OpenMode};
use crate::storage::index::Entry;
use crate::storage::{EntryKeys, KeyRange, Table};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The largest log file recovery reads whole, in bytes.
pub const LOG_FILE_SIZE_MAX_BYTES: u64 = 16 << 30;

/// What recovery found and did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// The persistent epoch recovered to.
    pub pepoch: u64,
    /// The global epoch restarts above this.
    pub restart_after_epoch: u64,
    /// Log files replayed.
    pub files: usize,
    /// Bytes of log replayed.
    pub bytes: u64,
    /// Transaction entries replayed (epoch in `[e_l, pepoch]` and not void).
    pub entries: u64,
    /// Entries skipped (epoch < e_l or > pepoch, or void).
    pub entries_skipped: u64,
    /// Writes that took effect in replay.
    pub writes_installed: u64,
    /// Writes skipped because their key already held a newer TID (newest-first order makes these
    /// common, and they cost no row decoding).
    pub writes_obsolete: u64,
    /// The checkpoint loaded, if one was installed.
    pub checkpoint: Option<loader::CheckpointLoadReport>,
    /// Log files not read because they hold only epochs older than the checkpoint.
    pub files_before_checkpoint: usize,
    /// The id the next checkpoint takes.
    pub next_checkpoint_id: u64,
    /// Each logger's durable position as recorded in the `pepoch` file.
    pub positions: Vec<DurablePosition>,
    /// Milliseconds spent rebuilding the catalog.
    pub catalog_ms: f64,
    /// How the log's writes were applied.
    pub replay_mode: crate::replay::ReplayMode,
    /// Replay plans compiled (compiled mode; summed over the recovery threads).
    pub replay_plans_compiled: u64,
    /// Milliseconds spent replaying the log.
    pub replay_ms: f64,
    /// Milliseconds spent sweeping tombstones and building secondary indexes.
    pub rebuild_ms: f64,
    /// The sequence number each logger's next file starts at.
    pub next_file_seq: Vec<u64>,
    /// Void epoch ranges after this recovery.
    pub holes: Vec<(u64, u64)>,
    /// The pepoch file's [`Pepoch::checkpoint_e_l`], carried on by the recovered scheme.
    pub checkpoint_e_l: u64,
    /// Scheme `command` replayed by `clr-p` or `llr-p`: where the time went.
    pub command_breakdown: Option<crate::durability::command::parallel::ReplayBreakdown>,
}

impl RecoveryReport {
    /// Replay rate in bytes per second.
    pub fn replay_bytes_per_s(&self) -> f64 {
        self.bytes as f64 / (self.replay_ms / 1000.0).max(1e-9)
    }
}

/// A log file to replay.
pub struct LogFile {
    /// Its path.
    pub path: PathBuf,
    /// The logger (directory index) that wrote it.
    pub logger: usize,
    /// Its sequence number within the logger.
    pub seq: u64,
    /// Bytes to read (the whole file, or its durable length).
    pub valid_len_bytes: u64,
    /// Whether this is its logger's durable file (read up to its durable length, then truncated
    /// and closed); every other file is closed and ends with an end block.
    pub durable: bool,
}

/// Recovers `db` from the directories in `options`.
pub fn recover(
    options: &ValueOptions,
    db: &Database,
    modules: &Mutex<Vec<(String, String)>>,
) -> Result<RecoveryReport, DurabilityError> {
    let fs = options.fs.as_ref();
    let (mut report, pepoch) = begin(options, db, modules)?;
    // The ordered indexes are not deferred here, unlike the stream data logs' recovery: a
    // checkpoint's records arrive in key order (appends to the tree), a value log mostly
    // overwrites keys the checkpoint linked, and building each table's index from its records
    // afterwards measured slower (`docs/PERFORMANCE.md`, "Taurus", "Session 26").
    let manifest = load_checkpoint(options, db, &pepoch, &mut report)?;
    let e_l = manifest.as_ref().map_or(0, |m| m.e_l);
    let (replay, mut discard, next_seq) = plan(fs, options, &pepoch)?;
    let (replay, skipped) = skip_before_checkpoint(replay, e_l);
    report.files_before_checkpoint = skipped.len();
    discard.extend(skipped.into_iter().filter(|f| !f.durable).map(|f| f.path));
    report.next_file_seq = next_seq;
    let start = Instant::now();
    let max_epoch_seen = replay_files(options, db, &replay, &Window { pepoch: &pepoch, e_l }, &mut report)?;
    report.replay_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    rebuild_indexes(db, options.recovery_threads, options.replay_mode.entry_keys());
    report.rebuild_ms = start.elapsed().as_secs_f64() * 1e3;
    record_void_epochs(&mut report, &pepoch, max_epoch_seen);
    settle_directory(fs, options, &replay, &discard, &pepoch, &report)?;
    for dir in &options.log_dirs {
        writer::remove_other_checkpoints(fs, dir, manifest.as_ref().map(|m| m.checkpoint_id))?;
    }
    Ok(report)
}

/// The first steps of every recovery over these loggers: rebuild the catalog, read `pepoch`.
pub(crate) fn begin(
    options: &ValueOptions,
    db: &Database,
    modules: &Mutex<Vec<(String, String)>>,
) -> Result<(RecoveryReport, Pepoch), DurabilityError> {
    let fs = options.fs.as_ref();
    let mut report = RecoveryReport::default();
    let start = Instant::now();
    *modules.lock() = rebuild_catalog(fs, &options.log_dirs[0], db)?;
    report.catalog_ms = start.elapsed().as_secs_f64() * 1e3;
    let pepoch = read_pepoch(fs, &options.log_dirs[0])?;
    report.pepoch = pepoch.epoch;
    report.positions = pepoch.positions.clone();
    report.checkpoint_e_l = pepoch.checkpoint_e_l;
    Ok((report, pepoch))
}

/// Marks the epochs above `pepoch` that retained files may hold as void, and where the global
/// epoch restarts (above every epoch seen, persistent or void).
pub(crate) fn record_void_epochs(report: &mut RecoveryReport, pepoch: &Pepoch, max_epoch_seen: u64) {
    let mut holes = pepoch.holes.clone();
    if max_epoch_seen > pepoch.epoch {
        holes.push((pepoch.epoch + 1, max_epoch_seen));
    }
    report.holes = holes;
    report.restart_after_epoch =
        max_epoch_seen.max(pepoch.epoch).max(pepoch.holes.iter().map(|h| h.1).max().unwrap_or(0));
}

/// The epochs whose records are replayed: `[e_l, pepoch]` minus the void ranges.
pub(crate) struct Window<'a> {
    pub(crate) pepoch: &'a Pepoch,
    pub(crate) e_l: u64,
}

impl replay::EpochWindow for Window<'_> {
    fn admits(&self, epoch: u64) -> bool {
        epoch >= self.e_l
            && epoch <= self.pepoch.epoch
            && !self.pepoch.holes.iter().any(|&(a, b)| (a..=b).contains(&epoch))
    }
}

/// Loads the installed checkpoint, if any; returns its manifest.
pub(crate) fn load_checkpoint(
    options: &ValueOptions,
    db: &Database,
    pepoch: &Pepoch,
    report: &mut RecoveryReport,
) -> Result<Option<Manifest>, DurabilityError> {
    let fs = options.fs.as_ref();
    let manifest = loader::read_manifest(fs, &options.log_dirs[0])?;
    let installed_e_l = manifest.as_ref().map_or(0, |m| m.e_l);
    if installed_e_l < pepoch.checkpoint_e_l {
        // Log files older than that checkpoint were removed: without it the log has a hole.
        let path = options.log_dirs[0].join(crate::durability::checkpoint::format::MANIFEST_FILE);
        let reason = format!(
            "the pepoch file says log files before epoch {} were removed for a checkpoint, but {}",
            pepoch.checkpoint_e_l,
            match &manifest {
                None => "no checkpoint manifest is installed".to_string(),
                Some(m) => format!("the installed checkpoint starts at e_l {}", m.e_l),
            }
        );
        return Err(corrupt(&path, 0, reason));
    }
    let Some(manifest) = manifest else {
        report.next_checkpoint_id = 1;
        return Ok(None);
    };
    if manifest.e_h > pepoch.epoch {
        // Installed only once e_h ≤ pepoch, and pepoch never goes back: the pepoch file is stale.
        let path = options.log_dirs[0].join(files::PEPOCH_FILE);
        let reason = format!("pepoch {} is below the installed checkpoint's e_h {}", pepoch.epoch, manifest.e_h);
        return Err(corrupt(&path, 0, reason));
    }
    let loaded = loader::load(fs, &options.log_dirs, &manifest, &db.catalog(), options.recovery_threads)?;
    report.checkpoint = Some(loaded);
    report.next_checkpoint_id = manifest.checkpoint_id + 1;
    Ok(Some(manifest))
}

/// Splits off the rotated files whose names say they hold only epochs < `e_l`.
pub(crate) fn skip_before_checkpoint(replay: Vec<LogFile>, e_l: u64) -> (Vec<LogFile>, Vec<LogFile>) {
    replay.into_iter().partition(|f| {
        let name = f.path.file_name().map(Path::new);
        name.and_then(files::parse_old_log_name).is_none_or(|(max_epoch, _)| max_epoch >= e_l)
    })
}

pub(crate) fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> DurabilityError {
    DurabilityError::Corrupt { file: file.to_path_buf(), offset, reason: reason.into() }
}

pub(crate) fn rebuild_catalog(
    fs: &dyn FileSystem,
    dir: &Path,
    db: &Database,
) -> Result<Vec<(String, String)>, DurabilityError> {
    let path = dir.join(files::CATALOG_FILE);
    if !fs.exists(&path)? {
        return Ok(Vec::new());
    }
    let bytes = fs.read_all(&path, files::MARKER_SIZE_MAX_BYTES)?;
    let modules = files::decode_catalog(&bytes).map_err(|e| corrupt(&path, 0, e.to_string()))?;
    for (name, source) in &modules {
        db.load_module_recovered(name, source)
            .map_err(|e| corrupt(&path, 0, format!("module {name} no longer loads: {e}")))?;
    }
    Ok(modules)
}

pub(crate) fn read_pepoch(fs: &dyn FileSystem, dir: &Path) -> Result<Pepoch, DurabilityError> {
    let path = dir.join(files::PEPOCH_FILE);
    if !fs.exists(&path)? {
        return Ok(Pepoch { epoch: 0, positions: Vec::new(), holes: Vec::new(), checkpoint_e_l: 0 });
    }
    let bytes = fs.read_all(&path, files::MARKER_SIZE_MAX_BYTES)?;
    files::decode_pepoch(&bytes).map_err(|e| corrupt(&path, 0, e.to_string()))
}

/// Decides which files to replay (and how much of each) and which to discard; returns also each
/// logger's next file sequence number.
#[allow(clippy::type_complexity)]
pub(crate) fn plan(
    fs: &dyn FileSystem,
    options: &ValueOptions,
    pepoch: &Pepoch,
) -> Result<(Vec<LogFile>, Vec<PathBuf>, Vec<u64>), DurabilityError> {
    let (mut replay, mut discard, mut next_seq) = (Vec::new(), Vec::new(), Vec::new());
    for (logger, dir) in options.log_dirs.iter().enumerate() {
        let position = pepoch.positions.iter().find(|p| p.logger as usize == logger).copied();
        let mut max_seq = 0u64;
        let mut found_durable = false;
        let mut damaged_current = None;
        for name in fs.list(dir)? {
            if !files::is_log_file(&name) {
                continue;
            }
            let path = dir.join(&name);
            let header = read_header(fs, &path)?;
            let Some((seq, len)) = header else {
                // A torn header can only be a data.log created after the last pepoch.
                if name.as_os_str() == files::CURRENT_LOG {
                    damaged_current = Some(path.clone());
                    discard.push(path);
                    continue;
                }
                return Err(corrupt(&path, 0, "damaged log header in a rotated (fully synced) file"));
            };
            max_seq = max_seq.max(seq);
            match classify(position, seq, len) {
                Some((valid, durable)) => {
                    found_durable |= durable;
                    if valid > len {
                        return Err(corrupt(&path, len, format!("file is {len} bytes, its durable length is {valid}")));
                    }
                    replay.push(LogFile { path, logger, seq, valid_len_bytes: valid, durable });
                }
                None => discard.push(path),
            }
        }
        if let Some(p) = position
            && !found_durable
            && p.file_seq > 0
        {
            // A data.log whose header does not decode is then the durable file itself, damaged.
            if let Some(path) = damaged_current {
                let reason = format!("damaged header of the durable log file (sequence {})", p.file_seq);
                return Err(corrupt(&path, 0, reason));
            }
            return Err(corrupt(
                dir,
                0,
                format!("the durable log file (sequence {}) of logger {logger} is missing", p.file_seq),
            ));
        }
        next_seq.push(max_seq + 1);
    }
    replay.sort_by(|a, b| b.seq.cmp(&a.seq).then(a.logger.cmp(&b.logger)));
    Ok((replay, discard, next_seq))
}

/// (bytes to replay, is the durable file) for a file of sequence `seq`, or `None` to discard.
fn classify(position: Option<DurablePosition>, seq: u64, len: u64) -> Option<(u64, bool)> {
    let p = position?;
    match seq.cmp(&p.file_seq) {
        std::cmp::Ordering::Less => Some((len, false)),
        std::cmp::Ordering::Equal => Some((p.durable_len_bytes, true)),
        std::cmp::Ordering::Greater => None,
    }
}

/// The file's sequence number and length, or `None` if its header block is damaged.
pub(crate) fn read_header(fs: &dyn FileSystem, path: &Path) -> Result<Option<(u64, u64)>, DurabilityError> {
    let mut file = fs.open(path, OpenMode::Read)?;
    let len = file.len_bytes()?;
    let mut buf = vec![0u8; (len as usize).min(256)];
    let mut at = 0;
    while at < buf.len() {
        let n = file.read_at(at as u64, &mut buf[at..])?;
        if n == 0 {
            break;
        }
        at += n;
    }
    Ok(files::decode_log_header(&buf[..at]).ok().map(|(h, _)| (h.file_seq, len)))
}

fn replay_files(
    options: &ValueOptions,
    db: &Database,
    replay: &[LogFile],
    window: &Window<'_>,
    report: &mut RecoveryReport,
) -> Result<u64, DurabilityError> {
    let catalog = db.catalog();
    let threads = options.recovery_threads;
    let stats = replay::replay(options.fs.as_ref(), &catalog, replay, window, threads, options.replay_mode)?;
    report.files = replay.len();
    report.bytes = stats.bytes;
    report.entries = stats.entries;
    report.entries_skipped = stats.skipped;
    report.writes_installed = stats.installed;
    report.writes_obsolete = stats.obsolete;
    report.replay_mode = options.replay_mode;
    report.replay_plans_compiled = stats.plans_compiled;
    Ok(stats.max_epoch)
}

/// Makes every table of `db` link recovered records into its point index alone until
/// [`rebuild_indexes`] builds its ordered index from them ([`Table::defer_ordered_index`]): for
/// recovery that installs rows and reads none before it rebuilds the indexes (the stream data
/// logs', `durability::taurus::recovery`).
pub(crate) fn defer_ordered_indexes(db: &Database) {
    for table in db.catalog().tables() {
        table.defer_ordered_index();
    }
}

/// Sweeps tombstones and builds every table's secondary indexes (and first its ordered primary
/// index, where recovery deferred it), on `threads` threads, largest tables first ([`Sweep`]).
/// A large table whose ordered index is there is swept in one key range per thread (one large
/// table still uses every core), and then each of its secondary indexes is loaded from the
/// ranges' live records by a task of its own: an index is an empty tree that one thread builds
/// bottom-up, where key ranges on several threads had to insert into it one entry at a time
/// (`docs/PERFORMANCE.md`, "Compiled replay", "Session 44").
pub(crate) fn rebuild_indexes(db: &Database, threads: usize, keys: EntryKeys) {
    let catalog = db.catalog();
    let mut sweeps: Vec<(&Arc<Table>, Sweep)> = catalog
        .tables()
        .iter()
        .flat_map(|t| {
            let sweeps = if t.is_ordered_index_deferred() {
                vec![Sweep::Deferred]
            } else if t.len() >= RANGE_SPLIT_MIN_ROWS && threads > 1 {
                t.split_key_space(threads).into_iter().map(Sweep::Part).collect()
            } else {
                vec![Sweep::Whole]
            };
            sweeps.into_iter().map(move |s| (t, s))
        })
        .collect();
    sweeps.sort_by_key(|(t, sweep)| std::cmp::Reverse(if matches!(sweep, Sweep::Part(_)) { 0 } else { t.len() }));
    let swept: Vec<Option<Vec<Entry>>> = on_queue(threads, &sweeps, |(table, sweep)| match sweep {
        Sweep::Part(range) => Some(table.sweep_recovery_range(range)),
        Sweep::Whole => {
            // The task has the whole table: it loads the indexes itself, with no wait for the
            // other tables' sweeps.
            let live = [table.sweep_recovery_range(&KeyRange::all())];
            table.load_secondary_indexes(0..table.secondary.len(), &live, keys);
            None
        }
        Sweep::Deferred => {
            table.finish_recovery_on(threads, keys);
            None
        }
    });
    // The live records of each table swept in parts, by range, and one load per secondary index.
    let mut live: Vec<(&Arc<Table>, Vec<Vec<Entry>>)> = Vec::new();
    for ((table, _), records) in sweeps.iter().zip(swept) {
        let Some(records) = records else { continue };
        match live.iter_mut().find(|(t, _)| Arc::ptr_eq(t, table)) {
            Some((_, ranges)) => ranges.push(records),
            None => live.push((table, vec![records])),
        }
    }
    let mut loads: Vec<(&Arc<Table>, usize, &LiveByRange)> = live
        .iter()
        .flat_map(|(table, ranges)| (0..table.secondary.len()).map(move |i| (*table, i, ranges.as_slice())))
        .collect();
    loads.sort_by_key(|(table, _, _)| std::cmp::Reverse(table.len()));
    on_queue(threads, &loads, |&(table, i, ranges)| table.load_secondary_indexes(i..i + 1, ranges, keys));
}

/// How [`rebuild_indexes`] takes a table's tombstones and live records.
enum Sweep {
    /// Its ordered index was deferred: the table is finished in one task, which builds that
    /// index first ([`Table::finish_recovery_on`]).
    Deferred,
    /// In one task, which loads its secondary indexes too.
    Whole,
    /// One key range of a large table, by a task of its own; the secondary indexes are loaded
    /// once every range is swept, each by a task of its own.
    Part(KeyRange),
}

/// A table's live records, one list per key range its sweep was split into.
type LiveByRange = [Vec<Entry>];

/// Runs `work` on every task of `tasks` on up to `threads` threads, each taking the next task
/// not yet taken, and returns the results in the tasks' order.
fn on_queue<T: Sync, R: Send>(threads: usize, tasks: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(tasks.len()).max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(task) = tasks.get(i) else { break };
                        done.push((i, work(task)));
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut done = done;
    assert_eq!(done.len(), tasks.len(), "every task is taken once");
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Tables smaller than this are finished by one thread (splitting costs a key sample).
const RANGE_SPLIT_MIN_ROWS: usize = 100_000;

/// Makes the log directories match the recovered state (step 6 of the module docs).
pub(crate) fn settle_directory(
    fs: &dyn FileSystem,
    options: &ValueOptions,
    replay: &[LogFile],
    discard: &[PathBuf],
    pepoch: &Pepoch,
    report: &RecoveryReport,
) -> Result<(), DurabilityError> {
    for path in discard {
        fs.remove(path)?;
    }
    for file in replay.iter().filter(|f| f.durable) {
        // Closed here: cut to the durable length and end it, so that once a newer file is
        // durable, this one is read whole and known to be whole.
        let mut handle = fs.open(&file.path, OpenMode::ReadWrite)?;
        if handle.len_bytes()? > file.valid_len_bytes {
            handle.truncate(file.valid_len_bytes)?;
        }
        handle.append(&files::encode_end_block(file.valid_len_bytes))?;
        handle.sync_data()?;
        drop(handle);
        if file.path.file_name().is_some_and(|n| n == files::CURRENT_LOG) {
            let dir = &options.log_dirs[file.logger];
            fs.rename(&file.path, &dir.join(files::old_log_name(report.restart_after_epoch, file.seq)))?;
        }
    }
    for dir in &options.log_dirs {
        fs.sync_dir(dir)?;
    }
    // Positions now point at files that no longer grow; the next data.log of each logger starts
    // a new sequence. Record the void epochs before anything new is logged.
    let positions = pepoch.positions.clone();
    let settled =
        Pepoch { epoch: pepoch.epoch, positions, holes: report.holes.clone(), checkpoint_e_l: pepoch.checkpoint_e_l };
    fs.write_atomic(&options.log_dirs[0].join(files::PEPOCH_FILE), &files::encode_pepoch(&settled))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Column, ColumnType, Direction, IndexSchema, Row, TableSchema, Value};
    use crate::txn::Tid;

    /// A table `name` of `(k int, v int, w text)` (or `w float`: rows of one shape, whose entry
    /// keys compiled replay's rebuild specializes) with indexes on `v` and on `(w, v)`.
    fn schema(name: &str, w: ColumnType) -> TableSchema {
        let column = |name: &str, ty| Column { name: name.into(), ty, nullable: false };
        TableSchema {
            name: name.into(),
            columns: vec![column("k", ColumnType::Int), column("v", ColumnType::Int), column("w", w)],
            primary_key: vec![0],
            indexes: vec![
                IndexSchema { name: "by_v".into(), columns: vec![1] },
                IndexSchema { name: "by_w_v".into(), columns: vec![2, 1] },
            ],
        }
    }

    /// Every secondary index of every table holds exactly one entry per live row, the entry
    /// `secondary_key_of` gives, after the rebuild: for a small table (swept whole), a large one
    /// split into key ranges (each index loaded by a task of its own) and a deferred one, with
    /// tombstones among the rows of each; with entry keys made the general way and specialized,
    /// over rows of text and rows of one shape (negative and positive ints and floats).
    #[test]
    fn the_rebuild_gives_every_secondary_index_one_entry_per_live_row_however_a_table_is_swept() {
        for keys in [EntryKeys::Generic, EntryKeys::Specialized] {
            for w in [ColumnType::Text, ColumnType::Float] {
                check_rebuild(keys, w);
            }
        }
    }

    fn check_rebuild(keys: EntryKeys, w: ColumnType) {
        let db = Database::open(crate::DatabaseConfig::default()).expect("open");
        let sizes = [("small", 3_000), ("large", RANGE_SPLIT_MIN_ROWS + 20_000), ("deferred", 5_000)];
        for (name, _) in sizes {
            db.create_table(schema(name, w)).expect("create");
        }
        let catalog = db.catalog();
        for (t, (name, rows)) in sizes.into_iter().enumerate() {
            let table = catalog.table(t as u32).expect("table");
            assert_eq!(table.schema.name, name);
            if name == "deferred" {
                table.defer_ordered_index();
            }
            for n in 0..rows as i64 + rows as i64 / 10 {
                let k = if n < rows as i64 { n } else { (n * 7919) % rows as i64 };
                let key = table.schema.encode_primary_key(&[Value::Int(k)]).expect("key");
                // The rewrites (a tenth of the rows) delete the odd keys they meet.
                let w = match w {
                    ColumnType::Text => Value::text(if k % 3 == 0 { "a" } else { "b" }),
                    _ => Value::Float((k % 7 - 3) as f64 * 0.5),
                };
                let row =
                    (n < rows as i64 || k % 2 == 0).then(|| Row::new(vec![Value::Int(k), Value::Int(k % 101 - 50), w]));
                table.install_if_newer(&key, row, Tid::new(1, 1 + n as u64));
            }
        }
        rebuild_indexes(&db, 2, keys);
        for table in catalog.tables() {
            let mut expected: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 2];
            table.primary.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |key, record| {
                assert!(!record.word().is_absent(), "{}: a tombstone left in the primary index", table.schema.name);
                for (i, entries) in expected.iter_mut().enumerate() {
                    let entry = table.schema.secondary_key_of(i, &record.stable_read().1, key).expect("entry");
                    entries.push(entry.as_bytes().to_vec());
                }
                true
            });
            assert_eq!(expected[0].len(), table.len(), "{}: live rows", table.schema.name);
            for (i, mut expected) in expected.into_iter().enumerate() {
                expected.sort();
                let mut found = Vec::new();
                table.secondary[i].scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |key, _| {
                    found.push(key.to_vec());
                    true
                });
                assert_eq!(found, expected, "{} ({keys:?}, w {w:?}): index {i}", table.schema.name);
            }
        }
    }
}
