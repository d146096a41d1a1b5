//! The log-replay pipeline of value recovery (SiloR §5.2): one reader thread streams the files,
//! newest first, in chunks of whole blocks into recycled buffers, while every recovery thread
//! checks and applies the blocks of the chunks it takes. Reading overlaps replay, and no chunk
//! is allocated twice (fresh memory costs a page fault per 4 KiB).
//!
//! Applying a write costs a hash lookup when the key already holds a newer TID, which in newest-
//! first order is the common case for hot keys: the row is then skipped without being built.
//! Only a write that wins decodes its row and installs it ([`crate::storage::Table::install_if_newer`]
//! re-checks the TID under the record's lock, so two threads replaying writes of one key agree).
//!
//! Each write goes through the thread's [`Replayer`] in the chosen [`ReplayMode`] (direct, or
//! compiled plans: [`crate::replay`]).
//!
//! Damage: the reader checks every block header inside a file's valid part, the appliers every
//! payload checksum and every entry; either stops recovery with the file and offset.

use super::recovery::LogFile;
use crate::durability::DurabilityError;
use crate::durability::codec::Reader;
use crate::durability::frame::{self, HEADER_SIZE_BYTES};
use crate::io::{FileSystem, OpenMode};
use crate::replay::{EncodedRedo, ReplayMode, Replayer};
use crate::storage::point::{KeyHash, Prefetch};
use crate::storage::{Catalog, Table};
use crate::txn::Tid;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;

/// Target bytes per chunk handed to an applier.
const CHUNK_BYTES: usize = 4 << 20;

/// Which epochs replay admits: `[e_l, pepoch]` minus the void ranges.
pub trait EpochWindow: Sync {
    /// Whether records of `epoch` are replayed.
    fn admits(&self, epoch: u64) -> bool;
}

/// Totals of a replay.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplayStats {
    /// Bytes of log read.
    pub bytes: u64,
    /// Entries in the window.
    pub entries: u64,
    /// Entries outside it.
    pub skipped: u64,
    /// Writes installed (the key took the write's state).
    pub installed: u64,
    /// Writes skipped because the key already held a newer TID.
    pub obsolete: u64,
    /// The largest epoch of any entry read.
    pub max_epoch: u64,
    /// Replay plans compiled, summed over the threads (0 in direct mode).
    pub plans_compiled: u64,
}

/// Whole blocks of one file, read in one go.
struct Chunk {
    file: usize,
    /// File offset of `data[0]`.
    offset: u64,
    data: Vec<u8>,
    /// Each block: start in `data` and its header.
    blocks: Vec<(usize, frame::BlockHeader)>,
}

/// What one applier thread keeps from chunk to chunk.
struct ApplierState<'c> {
    replayer: Replayer,
    stats: ReplayStats,
    /// The current block's admitted writes (reused: a block is parsed before it is applied).
    pending: Vec<Pending<'c>>,
    /// Per table id, whether its lookups are prefetched ([`crate::storage::point::PointIndex::misses_cache`]),
    /// as of the current chunk.
    prefetched_tables: Vec<bool>,
}

fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> DurabilityError {
    DurabilityError::Corrupt { file: file.to_path_buf(), offset, reason: reason.into() }
}

/// Replays `files` (newest first) into the tables of `catalog` with `threads` appliers.
pub fn replay(
    fs: &dyn FileSystem,
    catalog: &Catalog,
    files: &[LogFile],
    window: &dyn EpochWindow,
    threads: usize,
    mode: ReplayMode,
) -> Result<ReplayStats, DurabilityError> {
    let threads = threads.max(1);
    let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Chunk>(threads * 2);
    let chunk_rx = Mutex::new(chunk_rx);
    let (recycle_tx, recycle_rx) = mpsc::channel::<Vec<u8>>();
    let failure: Mutex<Option<DurabilityError>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let totals = Mutex::new(ReplayStats::default());
    let bytes = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let recycle_tx = recycle_tx.clone();
            let (chunk_rx, failure, failed, totals) = (&chunk_rx, &failure, &failed, &totals);
            scope.spawn(move || {
                // Value replay only installs: no thread reads a row it replaces.
                let _unread = crate::storage::retire::ReplacedRowsUnread::enter();
                let mut state = ApplierState {
                    replayer: Replayer::new(mode),
                    stats: ReplayStats::default(),
                    pending: Vec::new(),
                    prefetched_tables: Vec::new(),
                };
                loop {
                    let next = chunk_rx.lock().recv();
                    let Ok(chunk) = next else { break };
                    // A panic (a bug) becomes an error: the thread must go on draining chunks, or
                    // the reader would wait forever to hand it the next one.
                    let apply = || apply_chunk(catalog, files, &chunk, window, &mut state);
                    if !failed.load(Ordering::Relaxed)
                        && let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(apply))
                            .unwrap_or_else(|panic| Err(replay_panicked(files, &chunk, panic.as_ref())))
                    {
                        failure.lock().get_or_insert(e);
                        failed.store(true, Ordering::Relaxed);
                    }
                    let _ = recycle_tx.send(chunk.data);
                }
                state.stats.plans_compiled = state.replayer.cache().compiled();
                merge(&mut totals.lock(), &state.stats);
            });
        }
        drop(recycle_tx);
        let read = read_files(fs, files, &chunk_tx, &recycle_rx, &failed, &bytes);
        drop(chunk_tx);
        if let Err(e) = read {
            failure.lock().get_or_insert(e);
        }
    });
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    let mut stats = totals.into_inner();
    stats.bytes = bytes.into_inner();
    Ok(stats)
}

fn merge(into: &mut ReplayStats, from: &ReplayStats) {
    into.entries += from.entries;
    into.skipped += from.skipped;
    into.installed += from.installed;
    into.obsolete += from.obsolete;
    into.max_epoch = into.max_epoch.max(from.max_epoch);
    into.plans_compiled += from.plans_compiled;
}

/// The reader: streams each file's valid part as chunks of whole blocks.
fn read_files(
    fs: &dyn FileSystem,
    files: &[LogFile],
    chunks: &mpsc::SyncSender<Chunk>,
    recycled: &mpsc::Receiver<Vec<u8>>,
    failed: &AtomicBool,
    bytes: &AtomicU64,
) -> Result<(), DurabilityError> {
    for (index, file) in files.iter().enumerate() {
        let mut handle = fs.open(&file.path, OpenMode::Read)?;
        let valid = file.valid_len_bytes;
        let mut head = vec![0u8; (valid as usize).min(256)];
        read_exact_at(handle.as_mut(), 0, &mut head, &file.path)?;
        let (header, header_len) =
            super::files::decode_log_header(&head).map_err(|e| corrupt(&file.path, 0, e.to_string()))?;
        if header.format != super::files::EntryFormat::Value {
            return Err(corrupt(&file.path, 0, "a command log: open it with the command scheme"));
        }
        let mut at = header_len as u64;
        if !file.durable && at == valid {
            return Err(corrupt(&file.path, at, "a closed log file does not end with its end block (cut short?)"));
        }
        while at < valid {
            if failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let data = recycled.try_recv().unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES));
            let chunk = read_chunk(handle.as_mut(), file, index, at, data)?;
            at += chunk.data.len() as u64;
            bytes.fetch_add(chunk.data.len() as u64, Ordering::Relaxed);
            if chunks.send(chunk).is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Reads whole blocks from `at` up to about [`CHUNK_BYTES`] (at least one block), checking
/// each block header.
fn read_chunk(
    handle: &mut dyn crate::io::File,
    file: &LogFile,
    index: usize,
    at: u64,
    mut data: Vec<u8>,
) -> Result<Chunk, DurabilityError> {
    let valid = file.valid_len_bytes;
    let want = (valid - at).min(CHUNK_BYTES as u64) as usize;
    data.clear();
    data.resize(want, 0);
    read_exact_at(handle, at, &mut data, &file.path)?;
    let mut blocks = Vec::new();
    let mut pos = 0usize;
    loop {
        let header = match frame::decode_header(&data[pos..]) {
            Ok(h) => h,
            Err(frame::FrameError::TruncatedHeader { .. }) if pos > 0 => break,
            Err(frame::FrameError::TruncatedHeader { .. }) if at + (data.len() as u64) < valid => {
                grow(handle, &mut data, at, HEADER_SIZE_BYTES, &file.path)?;
                continue;
            }
            Err(e) => return Err(corrupt(&file.path, at + pos as u64, e.to_string())),
        };
        let end = pos + header.size_bytes();
        if at + end as u64 > valid {
            let reason = format!("block of {} bytes crosses the durable length {valid}", header.size_bytes());
            return Err(corrupt(&file.path, at + pos as u64, reason));
        }
        if end > data.len() {
            if pos > 0 {
                break;
            }
            // The first block is larger than a chunk: read all of it.
            grow(handle, &mut data, at, end, &file.path)?;
        }
        if file.durable || at + (end as u64) < valid {
            blocks.push((pos, header));
        } else {
            // The last block of a closed file: its end block, checked here and never applied.
            check_end_block(file, &data[pos + HEADER_SIZE_BYTES..end], header, at + pos as u64)?;
        }
        pos = end;
        if pos == data.len() {
            break;
        }
    }
    data.truncate(pos);
    Ok(Chunk { file: index, offset: at, data, blocks })
}

/// A closed file (older than its logger's durable file) must end with an end block recording
/// its own offset: without it, a file cut at a block boundary would look whole.
fn check_end_block(
    file: &LogFile,
    payload: &[u8],
    header: frame::BlockHeader,
    offset: u64,
) -> Result<(), DurabilityError> {
    header.check_payload(payload).map_err(|e| corrupt(&file.path, offset, e.to_string()))?;
    if super::files::decode_end_block(payload) != Some(offset) {
        return Err(corrupt(
            &file.path,
            file.valid_len_bytes,
            "a closed log file does not end with its end block (cut short?)",
        ));
    }
    Ok(())
}

/// Extends `data` (read from file offset `at`) to `len` bytes.
fn grow(
    handle: &mut dyn crate::io::File,
    data: &mut Vec<u8>,
    at: u64,
    len: usize,
    path: &Path,
) -> Result<(), DurabilityError> {
    let old = data.len();
    if len <= old {
        return Ok(());
    }
    data.resize(len, 0);
    read_exact_at(handle, at + old as u64, &mut data[old..], path)
}

pub(crate) fn read_exact_at(
    handle: &mut dyn crate::io::File,
    at: u64,
    buf: &mut [u8],
    path: &Path,
) -> Result<(), DurabilityError> {
    let mut done = 0;
    while done < buf.len() {
        let n = handle.read_at(at + done as u64, &mut buf[done..])?;
        if n == 0 {
            let reason = format!("file ends before its durable length (needed {} more bytes)", buf.len() - done);
            return Err(corrupt(path, at + done as u64, reason));
        }
        done += n;
    }
    Ok(())
}

/// The error for a panic (a bug) while applying `chunk`, naming its file and offset.
fn replay_panicked(files: &[LogFile], chunk: &Chunk, panic: &(dyn std::any::Any + Send)) -> DurabilityError {
    let message = crate::durability::panic_message(panic);
    let file = files[chunk.file].path.display();
    DurabilityError::Failed(format!("replay of {file} from byte {} panicked: {message}", chunk.offset))
}

/// Checks and applies every block of a chunk. Never inlined: one call per chunk costs nothing,
/// and `scripts/replay-callgrind.sh` counts the instructions under this symbol.
#[inline(never)]
fn apply_chunk<'c>(
    catalog: &'c Catalog,
    files: &[LogFile],
    chunk: &Chunk,
    window: &dyn EpochWindow,
    state: &mut ApplierState<'c>,
) -> Result<(), DurabilityError> {
    let path = &files[chunk.file].path;
    let tables = catalog.tables().iter().map(|t| t.point.misses_cache());
    state.prefetched_tables.clear();
    state.prefetched_tables.extend(tables);
    for &(start, header) in &chunk.blocks {
        let payload = &chunk.data[start + HEADER_SIZE_BYTES..start + header.size_bytes()];
        let block_offset = chunk.offset + start as u64;
        header.check_payload(payload).map_err(|e| corrupt(path, block_offset, e.to_string()))?;
        let block = BlockAt { path, payload, offset: block_offset + HEADER_SIZE_BYTES as u64 };
        apply_block(catalog, &block, window, state)?;
    }
    Ok(())
}

/// How many writes ahead of its apply a write's point-index slot is prefetched; its record is
/// prefetched half as far ahead, once the slot's line has had time to arrive. Each lookup is two
/// misses on a table larger than the cache (`docs/PERFORMANCE.md`, "SiloR", "Session 22"), and
/// one write's apply is about one miss's time, so a few in flight cover both.
const PREFETCH_SLOT_AHEAD: usize = 16;
const PREFETCH_RECORD_AHEAD: usize = PREFETCH_SLOT_AHEAD / 2;

/// A block's payload, and where it lies (for errors).
struct BlockAt<'a> {
    path: &'a Path,
    payload: &'a [u8],
    /// The payload's file offset.
    offset: u64,
}

impl BlockAt<'_> {
    /// The error for damage at `at` bytes into the payload.
    fn corrupt(&self, at: usize, reason: impl Into<String>) -> DurabilityError {
        corrupt(self.path, self.offset + at as u64, reason)
    }
}

/// An admitted write of a block, parsed ahead of its apply: its table (checked to exist) and
/// offsets into the block's payload.
#[derive(Clone, Copy)]
struct Pending<'c> {
    tid: Tid,
    table: &'c Table,
    put: bool,
    /// The key's hash, when its table's lookups are prefetched.
    hash: Option<KeyHash>,
    key_at: usize,
    key_len: usize,
    /// The write's row (a put), or its end (a delete).
    row_at: usize,
    /// The offset of its entry in the payload, for errors.
    entry_at: usize,
}

/// Applies one block's entries. The block is parsed first (heads only, rows skipped), so that
/// each write's point-index lookup can be prefetched some writes before it is applied.
fn apply_block<'c>(
    catalog: &'c Catalog,
    block: &BlockAt<'_>,
    window: &dyn EpochWindow,
    state: &mut ApplierState<'c>,
) -> Result<(), DurabilityError> {
    parse_block(catalog, block, window, state)?;
    let pending = &state.pending;
    let prefetch = |at: usize, stage: Prefetch| {
        if let Some(write) = pending.get(at)
            && let Some(hash) = write.hash
        {
            write.table.point.prefetch(hash, stage);
        }
    };
    for at in 0..PREFETCH_SLOT_AHEAD.min(pending.len()) {
        prefetch(at, Prefetch::Slot);
        if at < PREFETCH_RECORD_AHEAD {
            prefetch(at, Prefetch::Record);
        }
    }
    for (at, write) in pending.iter().enumerate() {
        prefetch(at + PREFETCH_SLOT_AHEAD, Prefetch::Slot);
        prefetch(at + PREFETCH_RECORD_AHEAD, Prefetch::Record);
        let key = &block.payload[write.key_at..write.key_at + write.key_len];
        let mut reader = Reader::new(&block.payload[write.row_at..]);
        apply_write(catalog, &mut reader, write, key, &mut state.replayer, &mut state.stats)
            .map_err(|reason| block.corrupt(write.entry_at, reason))?;
    }
    Ok(())
}

/// Parses a block's entries into the state's `pending` (its admitted writes, with their hash
/// when their table is prefetched), counting entries in its `stats`.
fn parse_block<'c>(
    catalog: &'c Catalog,
    block: &BlockAt<'_>,
    window: &dyn EpochWindow,
    state: &mut ApplierState<'c>,
) -> Result<(), DurabilityError> {
    let ApplierState { pending, prefetched_tables: prefetched, stats, .. } = state;
    pending.clear();
    let mut reader = Reader::new(block.payload);
    while !reader.is_empty() {
        let entry_at = reader.offset();
        let bad = |reason: String| block.corrupt(entry_at, reason);
        let (tid, writes) = reader.entry_head().map_err(|e| bad(e.to_string()))?;
        let epoch = tid.epoch();
        stats.max_epoch = stats.max_epoch.max(epoch);
        let admitted = window.admits(epoch);
        if admitted {
            stats.entries += 1;
        } else {
            stats.skipped += 1;
        }
        for _ in 0..writes {
            let (table_id, put, key) = reader.write_head().map_err(|e| bad(e.to_string()))?;
            let row_at = reader.offset();
            if put {
                reader.skip_row().map_err(|e| bad(e.to_string()))?;
            }
            if !admitted {
                continue;
            }
            let table = catalog
                .table(table_id)
                .ok_or_else(|| bad(format!("record for table id {table_id} which does not exist")))?;
            let key_at = key.as_ptr() as usize - block.payload.as_ptr() as usize;
            let prefetch = prefetched.get(table_id as usize).copied().unwrap_or(false);
            let hash = prefetch.then(|| table.point.hash_of(key));
            pending.push(Pending { tid, table, put, hash, key_at, key_len: key.len(), row_at, entry_at });
        }
    }
    Ok(())
}

/// Applies one admitted write: skipped unread if the key holds a newer TID already.
fn apply_write(
    catalog: &Catalog,
    reader: &mut Reader<'_>,
    write: &Pending<'_>,
    key: &[u8],
    replayer: &mut Replayer,
    stats: &mut ReplayStats,
) -> Result<(), String> {
    let Pending { tid, table, put, .. } = *write;
    let existing = table.get(key);
    if existing.as_ref().is_some_and(|r| r.word().tid() >= tid) {
        stats.obsolete += 1;
        return if put { reader.skip_row().map_err(|e| e.to_string()) } else { Ok(()) };
    }
    let redo = EncodedRedo { key, put, tid, found: existing };
    if replayer.apply_encoded(catalog, table, redo, reader).map_err(|e| e.to_string())? {
        stats.installed += 1;
    } else {
        stats.obsolete += 1;
    }
    Ok(())
}
