//! One checkpointer (SiloR §4): walks its share of every table in key order and writes
//! key/TID/value blocks round-robin into its `m` files, syncing whenever the unsynced bytes
//! exceed a bound, and once more at the end.
//!
//! The walk is fuzzy: transactions keep committing, and the checkpointer coordinates with them
//! only through the records' TID words ([`crate::storage::Record::stable_read_with`]), so it sees
//! only committed rows. It skips records of an epoch ≥ `e_l` (the reduced checkpoint): the log
//! from `e_l` on is replayed over the checkpoint anyway. A scheme whose log holds column patches
//! keeps them ([`super::CheckpointHost::reduced`]): a patch needs the row it applies to.

use super::format::{self, BlockBuilder, DataHeader, ManifestFile};
use crate::durability::appender::PageAppender;
use crate::io::{FileSystem, OpenMode};
use crate::storage::index::{Direction, KeyRange};
use crate::storage::prefetch::prefetch_line;
use crate::storage::record::RawRecord;
use crate::storage::{Key, Record, Table};
use crossbeam_epoch::Guard;
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Entries taken from the index per scan. The rows are read after the scan returns, so that a
/// locked record never makes the checkpointer wait inside the index; they are read under the pin
/// the scan was made under, so the records are borrowed, not counted ([`walk_share`]).
const SCAN_BATCH: usize = 512;

/// How many records ahead of the one being read the walk prefetches the record's line: records
/// and rows lie where they were allocated, not in key order, so each is a cache miss that the
/// walk would otherwise wait for.
const RECORD_PREFETCH_AHEAD: usize = 8;
/// How many records ahead the walk prefetches the row's first line, whose address it reads in
/// the record's line, prefetched [`RECORD_PREFETCH_AHEAD`] records ahead.
const ROW_PREFETCH_AHEAD: usize = 4;

/// What one checkpointer writes.
pub struct CheckpointerPlan {
    /// The checkpoint's id.
    pub checkpoint_id: u64,
    /// The directory to write into, and its index.
    pub dir: PathBuf,
    /// Index of `dir` among the log directories.
    pub dir_index: u32,
    /// Files to spread blocks over (SiloR's `m`: recovery threads for this directory).
    pub files: u32,
    /// Records of this epoch or later are skipped: `e_l` for a reduced checkpoint, `u64::MAX`
    /// for one that keeps every version it sees.
    pub skip_from_epoch: u64,
    /// Each table with the key range that is this checkpointer's share of it.
    pub shares: Vec<(Arc<Table>, KeyRange)>,
    /// Target payload size of a block.
    pub block_size_bytes: usize,
    /// Sync the files whenever this many bytes were written since the last sync (SiloR: 32 MB).
    pub sync_every_bytes: u64,
}

/// What a checkpointer wrote.
#[derive(Clone, Debug, Default)]
pub struct CheckpointerReport {
    /// The files, synced.
    pub files: Vec<ManifestFile>,
    /// Bytes written.
    pub bytes: u64,
    /// Records written.
    pub records: u64,
    /// Records skipped because their epoch is ≥ the plan's `skip_from_epoch`.
    pub skipped: u64,
    /// Records written of each share, in the plan's order.
    pub table_records: Vec<u64>,
}

/// The checkpointer's open files and where the next block goes.
struct Outputs {
    /// Whole pages are written past the page cache (`docs/io.md`, "Direct writes").
    files: Vec<(PageAppender, ManifestFile)>,
    next: usize,
    unsynced_bytes: u64,
    sync_every_bytes: u64,
}

impl Outputs {
    fn create(fs: &dyn FileSystem, plan: &CheckpointerPlan) -> io::Result<Outputs> {
        assert!(plan.files >= 1 && plan.files as usize <= format::FILES_MAX);
        let mut files = Vec::with_capacity(plan.files as usize);
        for file in 0..plan.files {
            let path = plan.dir.join(format::data_file_name(plan.checkpoint_id, plan.dir_index, file));
            if fs.exists(&path)? {
                // Debris of an earlier attempt under the same id: never installed, so never needed.
                fs.remove(&path)?;
            }
            let created = fs.open(&path, OpenMode::CreateNew)?;
            let mut handle = PageAppender::new(fs, &path, created, 0)?;
            let header =
                format::encode_data_header(DataHeader { checkpoint_id: plan.checkpoint_id, dir: plan.dir_index, file });
            handle.stage(|out| out.extend_from_slice(&header));
            handle.append_staged()?;
            let entry = ManifestFile { dir: plan.dir_index, file, len_bytes: header.len() as u64, records: 0 };
            files.push((handle, entry));
        }
        Ok(Outputs { files, next: 0, unsynced_bytes: 0, sync_every_bytes: plan.sync_every_bytes })
    }

    /// Writes a block to the next file in round-robin order.
    fn write_block(&mut self, block: &mut BlockBuilder) -> io::Result<()> {
        let records = u64::from(block.records());
        let (handle, entry) = &mut self.files[self.next];
        handle.stage(|out| block.finish_into(out));
        let written = handle.append_staged()?;
        entry.len_bytes += written;
        debug_assert_eq!(entry.len_bytes, handle.len_bytes());
        entry.records += records;
        self.next = (self.next + 1) % self.files.len();
        self.unsynced_bytes += written;
        if self.unsynced_bytes >= self.sync_every_bytes {
            // SiloR §6.2: intermediate syncs keep the page cache from building up a burst of
            // writeback that stalls the loggers' fsyncs.
            self.sync_all()?;
        }
        Ok(())
    }

    fn sync_all(&mut self) -> io::Result<()> {
        for (handle, _) in &mut self.files {
            handle.sync_data()?;
        }
        self.unsynced_bytes = 0;
        Ok(())
    }
}

/// Runs one checkpointer. Returns `Ok(None)` if `stop` was raised before it finished (the files
/// it made are then debris, removed by the next checkpoint or recovery).
pub fn run_checkpointer(
    fs: &dyn FileSystem,
    plan: &CheckpointerPlan,
    stop: &AtomicBool,
) -> io::Result<Option<CheckpointerReport>> {
    let mut outputs = Outputs::create(fs, plan)?;
    let mut report = CheckpointerReport::default();
    for (table, range) in &plan.shares {
        let mut block = BlockBuilder::new(table.id, plan.block_size_bytes);
        let walk =
            Walk { table, range, skip_from_epoch: plan.skip_from_epoch, block_size_bytes: plan.block_size_bytes };
        let Some(records) =
            walk_share(&walk, stop, &mut block, &mut report.skipped, |block| outputs.write_block(block))?
        else {
            return Ok(None);
        };
        if block.records() > 0 {
            outputs.write_block(&mut block)?;
        }
        report.records += records;
        report.table_records.push(records);
    }
    outputs.sync_all()?;
    fs.sync_dir(&plan.dir)?;
    report.files = outputs.files.into_iter().map(|(_, entry)| entry).collect();
    report.bytes = report.files.iter().map(|f| f.len_bytes).sum();
    Ok(Some(report))
}

/// One table's share of a checkpoint: what [`walk_share`] walks.
struct Walk<'a> {
    table: &'a Table,
    range: &'a KeyRange,
    /// Records of this epoch or later are skipped ([`CheckpointerPlan::skip_from_epoch`]).
    skip_from_epoch: u64,
    /// A block this large is handed to the writer.
    block_size_bytes: usize,
}

/// What [`push_stable`] did with a record.
enum Pushed {
    /// Its row went into the block.
    Row,
    /// Skipped: its epoch is `e_l` or later.
    Skipped,
    /// Nothing: the record is absent (deleted, or inserted and not committed).
    Absent,
}

/// Pushes the committed rows of the walk's range into `block` in key order, skipping absent
/// records and records of an epoch ≥ `skip_from_epoch`, and hands the block to `write` whenever
/// it reaches `block_size_bytes`. Returns the rows pushed, or `None` if `stop` was raised.
///
/// The walk writes nothing the workers read: it takes no count of a record or a row (each count
/// would be a write into a line a worker reads next, and an atomic operation). It reads each
/// batch of records under the pin that its scan was made under, and writes blocks out only
/// after letting the pin go, so that a slow disk does not hold back the collector.
fn walk_share(
    walk: &Walk<'_>,
    stop: &AtomicBool,
    block: &mut BlockBuilder,
    skipped: &mut u64,
    mut write: impl FnMut(&mut BlockBuilder) -> io::Result<()>,
) -> io::Result<Option<u64>> {
    let mut rows = 0u64;
    let mut batch: Vec<RawRecord> = Vec::with_capacity(SCAN_BATCH);
    let mut from = walk.range.start.clone();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        // Pinned from before the scan until the batch is read: a tree drops its reference of a
        // record it unlinks only through the collector, so every record the scan lends stays
        // allocated while `guard` lives.
        let guard = crossbeam_epoch::pin();
        batch.clear();
        let window = KeyRange { start: from.clone(), end: walk.range.end.clone() };
        walk.table.primary.scan(&window, Direction::Forward, SCAN_BATCH, &mut |_, record| {
            batch.push(Record::as_ptr(record));
            true
        });
        let mut read = 0;
        for (i, &record) in batch.iter().enumerate() {
            if let Some(&ahead) = batch.get(i + RECORD_PREFETCH_AHEAD) {
                prefetch_line(ahead);
            }
            if let Some(&ahead) = batch.get(i + ROW_PREFETCH_AHEAD) {
                // SAFETY: lent by the scan, and `guard` is held (above).
                unsafe { Record::borrow_raw(ahead) }.prefetch_row();
            }
            // SAFETY: as above.
            let record = unsafe { Record::borrow_raw(record) };
            match push_stable(&record, &guard, block, walk.skip_from_epoch) {
                Pushed::Row => rows += 1,
                Pushed::Skipped => *skipped += 1,
                Pushed::Absent => {}
            }
            read = i + 1;
            if block.size_bytes() >= walk.block_size_bytes {
                break;
            }
        }
        let done = read == batch.len() && batch.len() < SCAN_BATCH;
        // SAFETY: as above; the key is cloned before the pin is let go.
        let last = batch[..read].last().map(|&record| Key::from(unsafe { Record::key_of_raw(record) }));
        drop(guard);
        if block.size_bytes() >= walk.block_size_bytes {
            write(block)?;
        }
        match last {
            Some(last) if !done => from = Bound::Excluded(last),
            _ => return Ok(Some(rows)),
        }
    }
}

/// Pushes `record`'s committed row into `block` unless the record is absent or of an epoch ≥
/// `skip_from_epoch`. A read that a writer raced is rewound and made again.
fn push_stable(record: &Record, guard: &Guard, block: &mut BlockBuilder, skip_from_epoch: u64) -> Pushed {
    let mark = block.mark();
    record.stable_read_with(guard, |word, values| {
        block.rewind(mark);
        if word.is_absent() {
            return Pushed::Absent;
        }
        if word.tid().epoch() >= skip_from_epoch {
            return Pushed::Skipped;
        }
        block.push(record.key(), word.tid(), values);
        Pushed::Row
    })
}

/// Removes every checkpoint data file in `dir` whose checkpoint id is not `keep`.
pub fn remove_other_checkpoints(fs: &dyn FileSystem, dir: &Path, keep: Option<u64>) -> io::Result<usize> {
    let mut removed = 0;
    for name in fs.list(dir)? {
        let Some(id) = name.to_str().and_then(format::data_file_checkpoint_id) else {
            continue;
        };
        if Some(id) != keep {
            fs.remove(&dir.join(&name))?;
            removed += 1;
        }
    }
    if removed > 0 {
        fs.sync_dir(dir)?;
    }
    Ok(removed)
}
