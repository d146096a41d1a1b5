//! Log recovery for the value scheme (SiloR §5.2).
//!
//! 1. Rebuild the catalog from the `catalog` file (the modules, in load order).
//! 2. Read `pepoch`: the persistent epoch `p`, each logger's durable position, the void epochs.
//! 3. Sort every logger's files by their sequence number. Files older than the logger's durable
//!    file must be whole (they end with an end block that records their length); the durable
//!    file is read up to its durable length; newer files hold only records of epochs > `p` and
//!    are discarded.
//! 4. Replay with all cores, newest file first (SiloR: later files make most older records
//!    obsolete, so fewer overwrites): for each record of an epoch ≤ `p` and not void, install its
//!    after-image (or a tombstone for a delete) if its TID is larger than the key's current one.
//! 5. Sweep tombstones and build the secondary indexes, one thread per table.
//! 6. Make the directory match what was recovered: truncate the durable file to its durable
//!    length and end it with an end block, delete discarded files, close `data.log` under an
//!    `old_data` name, and write a `pepoch` whose void ranges cover every epoch above `p` that a
//!    retained file may hold, so those records are never replayed after the epoch moves past
//!    them.
//!
//! Damage inside the durable part of a file stops recovery with
//! [`DurabilityError::Corrupt`] naming the file and offset; nothing is silently skipped.

use super::ValueOptions;
use super::files::{self, DurablePosition, Pepoch};
use crate::db::Database;
use crate::durability::DurabilityError;
use crate::durability::codec::Reader;
use crate::durability::frame::{self, HEADER_SIZE_BYTES};
use crate::io::{FileSystem, OpenMode};
use crate::storage::Table;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
    /// Transaction entries replayed (epoch ≤ pepoch and not void).
    pub entries: u64,
    /// Entries skipped (epoch > pepoch, or void).
    pub entries_skipped: u64,
    /// Milliseconds spent rebuilding the catalog.
    pub catalog_ms: f64,
    /// Milliseconds spent replaying the log.
    pub replay_ms: f64,
    /// Milliseconds spent sweeping tombstones and building secondary indexes.
    pub rebuild_ms: f64,
    /// The sequence number each logger's next file starts at.
    pub next_file_seq: Vec<u64>,
    /// Void epoch ranges after this recovery.
    pub holes: Vec<(u64, u64)>,
}

impl RecoveryReport {
    /// Replay rate in bytes per second.
    pub fn replay_bytes_per_s(&self) -> f64 {
        self.bytes as f64 / (self.replay_ms / 1000.0).max(1e-9)
    }
}

/// A log file to replay.
struct LogFile {
    path: PathBuf,
    logger: usize,
    seq: u64,
    /// Bytes to read (the whole file, or its durable length).
    valid_len_bytes: u64,
    /// Whether this is its logger's durable file (to truncate and close after recovery).
    durable: bool,
}

/// Recovers `db` from the directories in `options`.
pub fn recover(
    options: &ValueOptions,
    db: &Database,
    modules: &Mutex<Vec<(String, String)>>,
) -> Result<RecoveryReport, DurabilityError> {
    let fs = options.fs.as_ref();
    let mut report = RecoveryReport::default();
    let start = Instant::now();
    *modules.lock() = rebuild_catalog(fs, &options.log_dirs[0], db)?;
    report.catalog_ms = start.elapsed().as_secs_f64() * 1e3;
    let pepoch = read_pepoch(fs, &options.log_dirs[0])?;
    report.pepoch = pepoch.epoch;
    let (replay, discard, next_seq) = plan(fs, options, &pepoch)?;
    report.next_file_seq = next_seq;
    let start = Instant::now();
    let max_epoch_seen = replay_files(options, db, &replay, &pepoch, &mut report)?;
    report.replay_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    rebuild_indexes(db, options.recovery_threads);
    report.rebuild_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut holes = pepoch.holes.clone();
    if max_epoch_seen > pepoch.epoch {
        holes.push((pepoch.epoch + 1, max_epoch_seen));
    }
    report.holes = holes;
    report.restart_after_epoch =
        max_epoch_seen.max(pepoch.epoch).max(pepoch.holes.iter().map(|h| h.1).max().unwrap_or(0));
    settle_directory(fs, options, &replay, &discard, &pepoch, &report)?;
    Ok(report)
}

fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> DurabilityError {
    DurabilityError::Corrupt { file: file.to_path_buf(), offset, reason: reason.into() }
}

fn rebuild_catalog(fs: &dyn FileSystem, dir: &Path, db: &Database) -> Result<Vec<(String, String)>, DurabilityError> {
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

fn read_pepoch(fs: &dyn FileSystem, dir: &Path) -> Result<Pepoch, DurabilityError> {
    let path = dir.join(files::PEPOCH_FILE);
    if !fs.exists(&path)? {
        return Ok(Pepoch { epoch: 0, positions: Vec::new(), holes: Vec::new() });
    }
    let bytes = fs.read_all(&path, files::MARKER_SIZE_MAX_BYTES)?;
    files::decode_pepoch(&bytes).map_err(|e| corrupt(&path, 0, e.to_string()))
}

/// Decides which files to replay (and how much of each) and which to discard; returns also each
/// logger's next file sequence number.
#[allow(clippy::type_complexity)]
fn plan(
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
fn read_header(fs: &dyn FileSystem, path: &Path) -> Result<Option<(u64, u64)>, DurabilityError> {
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
    pepoch: &Pepoch,
    report: &mut RecoveryReport,
) -> Result<u64, DurabilityError> {
    let catalog = db.catalog();
    let mut total = FileStats::default();
    // Files one after another, newest first; the blocks of each file spread over every thread,
    // so one large file uses all cores (blocks are independent: largest TID wins).
    for file in replay {
        let bytes = options.fs.read_all(&file.path, LOG_FILE_SIZE_MAX_BYTES)?;
        let valid = &bytes[..(file.valid_len_bytes as usize).min(bytes.len())];
        let blocks = frame_blocks(&file.path, valid, !file.durable)?;
        total.bytes += valid.len() as u64;
        let stats = apply_blocks(options.recovery_threads, &catalog, file, valid, &blocks, pepoch)?;
        total.entries += stats.entries;
        total.skipped += stats.skipped;
        total.max_epoch = total.max_epoch.max(stats.max_epoch);
    }
    report.files = replay.len();
    report.bytes = total.bytes;
    report.entries = total.entries;
    report.entries_skipped = total.skipped;
    Ok(total.max_epoch)
}

#[derive(Default)]
struct FileStats {
    bytes: u64,
    entries: u64,
    skipped: u64,
    max_epoch: u64,
}

/// Checks the framing of every block of a file's valid part; returns each block's payload range.
/// A closed file (older than its logger's durable file) must end with an end block recording
/// its length: without it, a file cut at a block boundary would look whole.
fn frame_blocks(path: &Path, valid: &[u8], closed: bool) -> Result<Vec<(usize, usize)>, DurabilityError> {
    let (_, mut at) = files::decode_log_header(valid).map_err(|e| corrupt(path, 0, e.to_string()))?;
    let mut blocks = Vec::new();
    let mut end_block = None;
    while at < valid.len() {
        let (payload, size) = frame::decode_block(&valid[at..]).map_err(|e| corrupt(path, at as u64, e.to_string()))?;
        if at + size == valid.len() && files::decode_end_block(payload) == Some(at as u64) {
            end_block = Some(at);
        } else {
            blocks.push((at + HEADER_SIZE_BYTES, at + HEADER_SIZE_BYTES + payload.len()));
        }
        at += size;
    }
    if closed && end_block.is_none() {
        return Err(corrupt(
            path,
            valid.len() as u64,
            "a closed log file does not end with its end block (cut short?)",
        ));
    }
    Ok(blocks)
}

/// Applies the entries of `blocks` with up to `threads` threads, each taking the next block.
fn apply_blocks(
    threads: usize,
    catalog: &crate::storage::Catalog,
    file: &LogFile,
    valid: &[u8],
    blocks: &[(usize, usize)],
    pepoch: &Pepoch,
) -> Result<FileStats, DurabilityError> {
    let next = AtomicUsize::new(0);
    let (entries, skipped, max_epoch) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let failure: Mutex<Option<DurabilityError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(blocks.len()).max(1) {
            scope.spawn(|| {
                let mut stats = FileStats::default();
                while let Some(&(start, end)) = blocks.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Err(e) = apply_block(catalog, file, &valid[start..end], start, pepoch, &mut stats) {
                        failure.lock().get_or_insert(e);
                        return;
                    }
                }
                entries.fetch_add(stats.entries, Ordering::Relaxed);
                skipped.fetch_add(stats.skipped, Ordering::Relaxed);
                max_epoch.fetch_max(stats.max_epoch, Ordering::Relaxed);
            });
        }
    });
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    Ok(FileStats {
        bytes: 0,
        entries: entries.into_inner(),
        skipped: skipped.into_inner(),
        max_epoch: max_epoch.into_inner(),
    })
}

/// Applies one block's entries; `offset` is the payload's offset in the file, for errors.
fn apply_block(
    catalog: &crate::storage::Catalog,
    file: &LogFile,
    payload: &[u8],
    offset: usize,
    pepoch: &Pepoch,
    stats: &mut FileStats,
) -> Result<(), DurabilityError> {
    let mut reader = Reader::new(payload);
    while !reader.is_empty() {
        let entry_offset = (offset + reader.offset()) as u64;
        let entry = reader.entry().map_err(|e| corrupt(&file.path, entry_offset, e.to_string()))?;
        let epoch = entry.tid.epoch();
        stats.max_epoch = stats.max_epoch.max(epoch);
        if epoch > pepoch.epoch || pepoch.holes.iter().any(|&(a, b)| (a..=b).contains(&epoch)) {
            stats.skipped += 1;
            continue;
        }
        stats.entries += 1;
        for write in entry.writes {
            let table = catalog.table(write.table).ok_or_else(|| {
                corrupt(&file.path, entry_offset, format!("record for table id {} which does not exist", write.table))
            })?;
            if let Some(row) = &write.row {
                table.schema.check_row(row).map_err(|e| corrupt(&file.path, entry_offset, e.to_string()))?;
            }
            table.install_if_newer(&write.key, write.row, entry.tid);
        }
    }
    Ok(())
}

/// Sweeps tombstones and builds every table's secondary indexes, tables in parallel.
fn rebuild_indexes(db: &Database, threads: usize) {
    let catalog = db.catalog();
    let tables: Vec<&Arc<Table>> = catalog.tables().iter().collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(tables.len()).max(1) {
            scope.spawn(|| {
                while let Some(table) = tables.get(next.fetch_add(1, Ordering::Relaxed)) {
                    table.finish_recovery();
                }
            });
        }
    });
}

/// Makes the log directories match the recovered state (step 6 of the module docs).
fn settle_directory(
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
    let settled = Pepoch { epoch: pepoch.epoch, positions, holes: report.holes.clone() };
    fs.write_atomic(&options.log_dirs[0].join(files::PEPOCH_FILE), &files::encode_pepoch(&settled))?;
    Ok(())
}
