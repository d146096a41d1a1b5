//! The Indexer (paper §4.1–4.2): reads the durable part of the sequential log (the value scheme's
//! files, up to the positions the `pepoch` file records) and copies each key's newest record into
//! the indexed log ([`super::store`]).
//!
//! # Which records, and when
//!
//! A `pepoch` file says: every record of an epoch ≤ `pepoch` lies before each logger's durable
//! position. Bytes before a position may also hold records of a later epoch (a worker's buffer
//! synced while its epoch was still open); those are durable on disk but not yet persistent, and
//! a crash now would make their epoch void. A round with persistent epoch `P` therefore
//! - indexes every record of an epoch ≤ `P` up to the positions (then, and only then, the indexed
//!   epoch is `P`),
//! - keeps records of a later epoch in memory (`pending`) until a later round's `P` covers them,
//! - skips records of void epochs (a crash left them unacknowledged, see the value scheme),
//! - and records as each logger's resume position the block of its oldest pending record (or the
//!   durable position): after a crash the Indexer re-reads from there. Records re-read that were
//!   indexed already lose against the B-tree's TIDs (tombstones included), so re-reading is
//!   harmless.
//!
//! The files are found by sequence number: `data.log` (its header says its sequence) or
//! `old_data.<max epoch>.<seq>`. A file older than the logger's durable file is closed and ends
//! with an end block; the Indexer then moves to the logger's next file.

use super::store::{Batch, IndexStore, LogPosition, Progress, Resolved};
use crate::durability::DurabilityError;
use crate::durability::codec::Reader;
use crate::durability::frame::{self, HEADER_SIZE_BYTES};
use crate::durability::value::files::{self, DurablePosition, Pepoch};
use crate::durability::value::replay::read_exact_at;
use crate::io::{FileSystem, OpenMode};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// Bytes of pending records held in memory before a round stops reading ahead (it resumes in
/// the next round once the persistent epoch has caught up).
const PENDING_MAX_BYTES: usize = 256 << 20;
/// Bytes of records resolved in memory before they are written to the B-tree mid-round.
const BATCH_MAX_BYTES: usize = 64 << 20;

/// A record read whose epoch is not yet persistent.
struct PendingWrite {
    logger: usize,
    /// The file and offset of the block it came from (where a restart re-reads).
    at: (u64, u64),
    key: Vec<u8>,
    write: Resolved,
}

/// What a round did.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoundStats {
    /// Bytes of sequential log read.
    pub bytes: u64,
    /// Records (writes) read.
    pub writes: u64,
    /// Keys whose indexed state changed.
    pub installed: u64,
    /// The largest epoch of any record read.
    pub max_epoch: u64,
    /// Tombstones purged.
    pub purged: u64,
    /// Every logger was read up to its target (the round did not stop at the pending-bytes
    /// bound): every record of an epoch ≤ the round's persistent epoch is indexed.
    pub complete: bool,
}

/// The Indexer's state: where it has read each logger's log to, and the records waiting for
/// their epoch to become persistent.
pub struct Indexer {
    fs: std::sync::Arc<dyn FileSystem>,
    dirs: Vec<PathBuf>,
    /// Where each logger's next unread block starts.
    cursors: Vec<LogPosition>,
    /// Bytes of log file the cursors have moved over since this Indexer was made, counted as
    /// the loggers count what they made durable (headers and end blocks included):
    /// [`Indexer::passed_bytes`].
    passed_bytes: u64,
    pending: Vec<PendingWrite>,
    pending_bytes: usize,
    /// Void epoch ranges: records of these epochs are never indexed.
    holes: Vec<(u64, u64)>,
    indexed_epoch: u64,
    /// The last closed file read to its end without finding its end block (named if the
    /// round stalls on it).
    unended: Option<PathBuf>,
    /// Reading at a restart ([`Indexer::at_rest`]): nothing else writes the directories, so
    /// nothing is looked for again ([`Indexer::retries`]), and records of epochs above the
    /// round's are void for good, and are skipped instead of kept pending.
    at_rest: bool,
}

impl Indexer {
    /// An Indexer resuming at `progress`.
    pub fn new(
        fs: std::sync::Arc<dyn FileSystem>,
        dirs: Vec<PathBuf>,
        progress: &Progress,
        holes: Vec<(u64, u64)>,
    ) -> Indexer {
        let cursors = (0..dirs.len())
            .map(|logger| {
                let found = progress.positions.iter().find(|p| p.logger as usize == logger).copied();
                found.unwrap_or(LogPosition { logger: logger as u32, file_seq: 1, offset: 0 })
            })
            .collect();
        Indexer {
            fs,
            dirs,
            cursors,
            passed_bytes: 0,
            pending: Vec::new(),
            pending_bytes: 0,
            holes,
            indexed_epoch: progress.indexed_epoch,
            unended: None,
            at_rest: false,
        }
    }

    /// This Indexer reads directories nothing else writes (recovery, before the loggers start):
    /// a file not found is missing and a read without progress is stuck, at once. Retrying
    /// there cost every such recovery at least 200 ms of sleeping (one lookup of a file a
    /// crashed recovery had discarded), which made the crashed-recovery loops of the power-loss
    /// sweeps take hours. Records of epochs above a round's persistent epoch are void for good
    /// there and are skipped (a running Indexer keeps them until their epoch is persistent).
    pub fn at_rest(mut self) -> Indexer {
        self.at_rest = true;
        self
    }

    /// How many times a lookup that finds nothing, or a read that makes no progress, is tried
    /// again (1 ms apart) before the file counts as missing or the round as stuck: a logger may
    /// be between renaming `data.log` and creating the next one. None at rest.
    fn retries(&self) -> usize {
        if self.at_rest { 0 } else { LOOKUP_ATTEMPTS }
    }

    /// Every record of an epoch ≤ this is in the B-tree.
    pub fn indexed_epoch(&self) -> u64 {
        self.indexed_epoch
    }

    /// Sets the indexed epoch (recovery: everything persistent was indexed before opening).
    pub fn set_indexed_epoch(&mut self, epoch: u64) {
        self.indexed_epoch = epoch;
    }

    /// Bytes of log file read since this Indexer was made, headers and end blocks included
    /// (the loggers' count: [`crate::durability::value::ValueLogging::durable_log_bytes`]).
    pub fn passed_bytes(&self) -> u64 {
        self.passed_bytes
    }

    /// Records read but not yet persistent.
    pub fn pending_writes(&self) -> usize {
        self.pending.len()
    }

    /// The resume position of each logger: its oldest pending block, or its cursor.
    pub fn progress(&self) -> Progress {
        let positions = self
            .cursors
            .iter()
            .enumerate()
            .map(|(logger, cursor)| {
                let oldest = self.pending.iter().filter(|p| p.logger == logger).map(|p| p.at).min();
                match oldest {
                    Some((file_seq, offset)) => LogPosition { logger: logger as u32, file_seq, offset },
                    None => *cursor,
                }
            })
            .collect();
        Progress { indexed_epoch: self.indexed_epoch, positions }
    }

    /// The sequence of the file each logger reads next (files before it are fully indexed).
    pub fn resume_file_seqs(&self) -> Vec<u64> {
        self.progress().positions.iter().map(|p| p.file_seq).collect()
    }

    fn is_void(&self, epoch: u64) -> bool {
        self.holes.iter().any(|&(a, b)| (a..=b).contains(&epoch))
    }

    /// One round against the `pepoch` file's contents: see the module docs.
    pub fn round(&mut self, store: &IndexStore, pepoch: &Pepoch) -> Result<RoundStats, DurabilityError> {
        let mut batch = Batch::default();
        let flush = |indexer: &Indexer, batch: &mut Batch, stats: &mut RoundStats| {
            indexer.flush(store, batch, stats, None).map(|()| ControlFlow::Continue(()))
        };
        let mut stats = self.read_round(pepoch, &mut batch, flush)?;
        if stats.complete {
            self.indexed_epoch = self.indexed_epoch.max(pepoch.epoch);
        }
        // With nothing pending every later record has an epoch > the indexed epoch, so the
        // tombstones up to it can never be needed again.
        let purge = self.pending.is_empty().then_some(self.indexed_epoch);
        self.flush(store, &mut batch, &mut stats, purge)?;
        Ok(stats)
    }

    /// The unindexed tail at a restart, read into memory instead of the B-tree: each key's
    /// newest write of a persistent, non-void epoch between the resume positions and the
    /// durable positions of `pepoch` (what [`Indexer::round`] would index), in key order.
    /// Records of later epochs are void for good at a restart and are skipped, so the read is
    /// always complete. Nothing is written: the indexed log still says the tail is to be
    /// indexed, and the running Indexer indexes it in a later round (`docs/indexed.md`,
    /// "Instant restart").
    ///
    /// `None` once more than `max_bytes` of log are read: the rows would take too much memory,
    /// and the caller indexes the tail instead.
    pub fn read_tail(
        &mut self,
        pepoch: &Pepoch,
        max_bytes: u64,
    ) -> Result<Option<(TailWrites, RoundStats)>, DurabilityError> {
        assert!(self.at_rest, "the tail is read at rest");
        let mut writes = Vec::new();
        // Checked whenever `BATCH_MAX_BYTES` of records were read.
        let within = |_: &Indexer, _: &mut TailWrites, stats: &mut RoundStats| match stats.bytes > max_bytes {
            true => Ok(ControlFlow::Break(())),
            false => Ok(ControlFlow::Continue(())),
        };
        let stats = self.read_round(pepoch, &mut writes, within)?;
        if stats.bytes > max_bytes {
            return Ok(None);
        }
        assert!(stats.complete && self.pending.is_empty(), "a tail read at rest keeps nothing pending");
        // Sorted and then deduplicated, not resolved in a hash map as a round's batch is: the
        // restore needs them in key order anyway, and a tail of 1.7 M writes spent a third of
        // its reading in the map's probes and hashing.
        newest_per_key(&mut writes);
        Ok(Some((writes, stats)))
    }

    /// Reads every logger up to `pepoch`'s positions into `batch`, calling `flush` whenever
    /// [`BATCH_MAX_BYTES`] of records are in it; a `Break` from it ends the round there (not
    /// complete).
    fn read_round<S: Sink>(
        &mut self,
        pepoch: &Pepoch,
        batch: &mut S,
        mut flush: impl FnMut(&Indexer, &mut S, &mut RoundStats) -> Result<ControlFlow<()>, DurabilityError>,
    ) -> Result<RoundStats, DurabilityError> {
        let p = pepoch.epoch;
        let mut stats = RoundStats::default();
        let mut batch_bytes = 0usize;
        // Pending records whose epoch is persistent now.
        let (ready, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|w| w.write.tid.epoch() <= p);
        self.pending = waiting;
        self.pending_bytes = self.pending.iter().map(pending_size).sum();
        for w in ready {
            batch_bytes += pending_size(&w);
            batch.put(w.key, w.write);
        }
        let mut complete = true;
        for logger in 0..self.dirs.len() {
            let Some(target) = pepoch.positions.iter().find(|t| t.logger as usize == logger).copied() else {
                continue;
            };
            let mut stalled = 0;
            loop {
                let before = self.cursors[logger];
                let reached = self.read_logger(logger, target, p, batch, &mut batch_bytes, &mut stats)?;
                stalled = if self.cursors[logger] == before { stalled + 1 } else { 0 };
                if !reached && stalled > self.retries() {
                    let reason = format!("no progress reading logger {logger}'s file {}", before.file_seq);
                    return match self.unended.take() {
                        Some(file) => {
                            Err(corrupt(&file, before.offset, format!("{reason}: it ends without its end block")))
                        }
                        None => Err(corrupt(&self.dirs[logger], before.offset, reason)),
                    };
                }
                if stalled > 0 && !reached {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                if batch_bytes >= BATCH_MAX_BYTES {
                    batch_bytes = 0;
                    if flush(self, batch, &mut stats)?.is_break() {
                        return Ok(stats);
                    }
                }
                if reached {
                    break;
                }
                if self.pending_bytes >= PENDING_MAX_BYTES {
                    complete = false;
                    break;
                }
            }
        }
        stats.complete = complete;
        Ok(stats)
    }

    fn flush(
        &self,
        store: &IndexStore,
        batch: &mut Batch,
        stats: &mut RoundStats,
        purge: Option<u64>,
    ) -> Result<(), DurabilityError> {
        let applied = store.apply(batch, &self.progress(), purge)?;
        stats.installed += applied.installed;
        stats.purged += applied.purged;
        batch.clear();
        Ok(())
    }

    /// Reads logger `logger` from its cursor towards `target`, a bounded amount; returns whether
    /// the target was reached.
    fn read_logger<S: Sink>(
        &mut self,
        logger: usize,
        target: DurablePosition,
        p: u64,
        batch: &mut S,
        batch_bytes: &mut usize,
        stats: &mut RoundStats,
    ) -> Result<bool, DurabilityError> {
        let dir = self.dirs[logger].clone();
        let cursor = self.cursors[logger];
        if cursor.file_seq > target.file_seq
            || (cursor.file_seq == target.file_seq && cursor.offset >= target.durable_len_bytes)
        {
            return Ok(true);
        }
        let retries = self.retries();
        let Some(path) = settled(retries, || find_file(self.fs.as_ref(), &dir, cursor.file_seq))? else {
            if cursor.file_seq == target.file_seq {
                return Err(corrupt(
                    &dir,
                    0,
                    format!("the durable log file (sequence {}) is missing", target.file_seq),
                ));
            }
            // Sequences may skip (recovery discards files above the durable one).
            match settled(retries, || next_file_seq(self.fs.as_ref(), &dir, cursor.file_seq))? {
                Some(seq) if seq <= target.file_seq => {
                    self.cursors[logger] = LogPosition { logger: logger as u32, file_seq: seq, offset: 0 };
                    return Ok(false);
                }
                _ => {
                    let reason = format!("log file sequence {} is missing before the indexer read it", cursor.file_seq);
                    return Err(corrupt(&dir, 0, reason));
                }
            }
        };
        let mut file = match self.fs.open(&path, OpenMode::Read) {
            Ok(file) => file,
            // Renamed by a rotation since the lookup: look again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let closed = cursor.file_seq < target.file_seq;
        // The header is checked on every open: `data.log` found under this sequence may have
        // been rotated away and replaced by the next file between the lookup and the open.
        let mut head = vec![0u8; (file.len_bytes()? as usize).min(256)];
        read_exact_at(file.as_mut(), 0, &mut head, &path)?;
        let Ok((header, header_len)) = files::decode_log_header(&head) else {
            return if path.ends_with(files::CURRENT_LOG) {
                Ok(false)
            } else {
                Err(corrupt(&path, 0, "damaged log header"))
            };
        };
        if header.file_seq != cursor.file_seq {
            return if path.ends_with(files::CURRENT_LOG) {
                Ok(false)
            } else {
                Err(corrupt(&path, 0, "a log file whose header names another sequence"))
            };
        }
        if header.format != files::EntryFormat::Value {
            return Err(corrupt(&path, 0, "not a value log file"));
        }
        let limit = if closed { file.len_bytes()? } else { target.durable_len_bytes };
        let mut at = cursor.offset.max(header_len as u64);
        let mut read_bytes = 0usize;
        let mut ended = false;
        while at < limit && read_bytes < BATCH_MAX_BYTES && self.pending_bytes < PENDING_MAX_BYTES {
            let mut head = [0u8; HEADER_SIZE_BYTES];
            read_exact_at(file.as_mut(), at, &mut head, &path)?;
            let header = frame::decode_header(&head).map_err(|e| corrupt(&path, at, e.to_string()))?;
            let end = at + header.size_bytes() as u64;
            if end > limit {
                return Err(corrupt(&path, at, format!("block crosses the indexed limit {limit}")));
            }
            let mut payload = vec![0u8; header.size_bytes() - HEADER_SIZE_BYTES];
            read_exact_at(file.as_mut(), at + HEADER_SIZE_BYTES as u64, &mut payload, &path)?;
            header.check_payload(&payload).map_err(|e| corrupt(&path, at, e.to_string()))?;
            if closed && end == limit {
                if files::decode_end_block(&payload) != Some(at) {
                    return Err(corrupt(&path, at, "a closed log file does not end with its end block"));
                }
                ended = true;
            } else {
                let block = (cursor.file_seq, at);
                self.index_block(logger, block, &payload, p, batch, batch_bytes, stats)
                    .map_err(|reason| corrupt(&path, at + HEADER_SIZE_BYTES as u64, reason))?;
            }
            stats.bytes += header.size_bytes() as u64;
            read_bytes += header.size_bytes();
            at = end;
        }
        assert!(at >= cursor.offset, "a cursor never moves back in its file");
        self.passed_bytes += at - cursor.offset;
        self.cursors[logger].offset = at;
        if closed && !ended && at >= limit {
            // No end block (yet): the round retries, and names this file if it never comes.
            self.unended = Some(path.clone());
        }
        if closed && ended {
            match settled(retries, || next_file_seq(self.fs.as_ref(), &dir, cursor.file_seq))? {
                Some(seq) => self.cursors[logger] = LogPosition { logger: logger as u32, file_seq: seq, offset: 0 },
                None => return Err(corrupt(&dir, 0, "no log file after a closed one")),
            }
            return Ok(false);
        }
        Ok(!closed && at >= limit)
    }

    #[allow(clippy::too_many_arguments)]
    fn index_block<S: Sink>(
        &mut self,
        logger: usize,
        block: (u64, u64),
        payload: &[u8],
        p: u64,
        batch: &mut S,
        batch_bytes: &mut usize,
        stats: &mut RoundStats,
    ) -> Result<(), String> {
        let mut r = Reader::new(payload);
        while !r.is_empty() {
            let (tid, writes) = r.entry_head().map_err(|e| e.to_string())?;
            let epoch = tid.epoch();
            stats.max_epoch = stats.max_epoch.max(epoch);
            let void = self.is_void(epoch);
            for _ in 0..writes {
                let (table, put, key) = r.write_head().map_err(|e| e.to_string())?;
                // The indexed log holds rows in their in-memory encoding (`store`'s docs): built
                // here, off the restore's path, so that a restore only copies them.
                let row = if put { Some(r.row().map_err(|e| e.to_string())?) } else { None };
                stats.writes += 1;
                if void {
                    continue;
                }
                let full = super::store::full_key(table, key);
                let write = Resolved { tid, row };
                if epoch <= p {
                    *batch_bytes += full.len() + write.row.as_ref().map_or(0, |row| row.encoding().len());
                    batch.put(full, write);
                } else if !self.at_rest {
                    let pending = PendingWrite { logger, at: block, key: full, write };
                    self.pending_bytes += pending_size(&pending);
                    self.pending.push(pending);
                }
            }
        }
        Ok(())
    }
}

fn pending_size(w: &PendingWrite) -> usize {
    w.key.len() + w.write.row.as_ref().map_or(0, |row| row.encoding().len()) + 48
}

/// A write of the unindexed tail, read into memory at a restart instead of into the B-tree
/// (`docs/indexed.md`, "The tail in memory, not in the B-tree").
#[derive(Debug)]
pub struct TailWrite {
    /// The full key (table id ++ primary key).
    pub full: Vec<u8>,
    /// Its TID.
    pub tid: crate::txn::Tid,
    /// The row, or `None` for a delete.
    pub row: Option<crate::storage::Row>,
}

/// The unindexed tail read into memory ([`Indexer::read_tail`]): each key's newest write, in
/// key order.
pub type TailWrites = Vec<TailWrite>;

/// Where a round puts the writes it reads.
trait Sink {
    fn put(&mut self, key: Vec<u8>, write: Resolved);
}

/// A round's batch keeps the write with the largest TID per key.
impl Sink for Batch {
    fn put(&mut self, key: Vec<u8>, write: Resolved) {
        match self.get_mut(&key) {
            Some(held) if held.tid >= write.tid => {}
            Some(held) => *held = write,
            None => {
                self.insert(key, write);
            }
        }
    }
}

/// The tail keeps every write, to be sorted and deduplicated at the end.
impl Sink for TailWrites {
    fn put(&mut self, full: Vec<u8>, write: Resolved) {
        self.push(TailWrite { full, tid: write.tid, row: write.row });
    }
}

/// Leaves in `writes` each key's write with the largest TID, in key order.
fn newest_per_key(writes: &mut TailWrites) {
    // With words of the keys copied beside them: a write's key lives behind a pointer.
    crate::storage::key::sort_by_head_words(writes, |w| w.full.as_slice());
    writes.dedup_by(|later, kept| {
        if later.full != kept.full {
            return false;
        }
        if later.tid > kept.tid {
            std::mem::swap(later, kept);
        }
        true
    });
}

/// Runs a directory lookup until it finds something, `1 + retries` times at most: a logger
/// rotating its file renames `data.log` and then creates the next one, and a listing taken in
/// between sees neither under the sequence it looks for.
fn settled<T>(
    retries: usize,
    mut lookup: impl FnMut() -> Result<Option<T>, DurabilityError>,
) -> Result<Option<T>, DurabilityError> {
    for _ in 0..retries {
        if let Some(found) = lookup()? {
            return Ok(Some(found));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    lookup()
}

/// Directory lookups tried before a file counts as missing.
const LOOKUP_ATTEMPTS: usize = 200;

/// The path of logger directory `dir`'s file of sequence `seq`, if it exists.
fn find_file(fs: &dyn FileSystem, dir: &Path, seq: u64) -> Result<Option<PathBuf>, DurabilityError> {
    stable_listing(fs, dir, |names| {
        for name in names {
            if file_seq(fs, dir, name)? == Some(seq) {
                return Ok(Some(dir.join(name)));
            }
        }
        Ok(None)
    })
}

/// The smallest file sequence above `seq` in `dir`.
fn next_file_seq(fs: &dyn FileSystem, dir: &Path, seq: u64) -> Result<Option<u64>, DurabilityError> {
    stable_listing(fs, dir, |names| {
        let mut best: Option<u64> = None;
        for name in names {
            if let Some(s) = file_seq(fs, dir, name)?.filter(|&s| s > seq) {
                best = Some(best.map_or(s, |b| b.min(s)));
            }
        }
        Ok(best)
    })
}

/// Listings of a changing directory tried before a lookup gives up.
const LISTING_ATTEMPTS: usize = 1000;

/// Runs `lookup` over a listing of `dir` and returns its answer once a listing taken after it is
/// the same. The listing and the header read of `data.log` are two steps, and a logger may
/// rotate between them: it renames the `data.log` the listing saw (sequence `s`) to
/// `old_data.*.s`, which the listing lacks, and creates the next `data.log`, whose header then
/// says `s + 1`. Sequence `s` looked absent: the Indexer skipped a whole closed file, and its
/// records never reached the indexed log (an acknowledged write lost at the next recovery, the
/// AILIR failures of `docs/RELIABILITY.md`). A rotation always adds a name, so an unchanged
/// listing means no rotation fell between.
fn stable_listing<T>(
    fs: &dyn FileSystem,
    dir: &Path,
    mut lookup: impl FnMut(&[PathBuf]) -> Result<T, DurabilityError>,
) -> Result<T, DurabilityError> {
    let mut names = fs.list(dir)?;
    for _ in 0..LISTING_ATTEMPTS {
        let answer = lookup(&names)?;
        let again = fs.list(dir)?;
        if again == names {
            return Ok(answer);
        }
        names = again;
    }
    Err(corrupt(dir, 0, format!("the directory changed during each of {LISTING_ATTEMPTS} listings")))
}

/// The sequence of the log file `name` of `dir` (`None`: not a log file, or a `data.log` without
/// its header yet).
fn file_seq(fs: &dyn FileSystem, dir: &Path, name: &Path) -> Result<Option<u64>, DurabilityError> {
    match files::parse_old_log_name(name) {
        Some((_, s)) => Ok(Some(s)),
        None if name.as_os_str() == files::CURRENT_LOG => current_seq(fs, &dir.join(name)),
        None => Ok(None),
    }
}

/// The sequence in `data.log`'s header; `None` while the header is not written yet (or gone:
/// the logger renamed the file meanwhile).
fn current_seq(fs: &dyn FileSystem, path: &Path) -> Result<Option<u64>, DurabilityError> {
    match crate::durability::value::recovery::read_header(fs, path) {
        Ok(header) => Ok(header.map(|(seq, _)| seq)),
        Err(DurabilityError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> DurabilityError {
    DurabilityError::Corrupt { file: file.to_path_buf(), offset, reason: reason.into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::File;

    proptest::proptest! {
        /// The tail keeps each key's newest write, in key order: against a map of every key's
        /// largest TID, for keys of 0-11 bytes from a small alphabet (so they share prefixes,
        /// tie in their first word and end inside it) in any order, repeated.
        #[test]
        fn the_tail_keeps_each_keys_newest_write_in_key_order(
            writes in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..12), 1u64..6, 0u64..4),
                0..200,
            ),
            prefix in proptest::collection::vec(proptest::num::u8::ANY, 0..6),
        ) {
            let mut model = std::collections::BTreeMap::new();
            let mut tail: TailWrites = Vec::new();
            for (key, epoch, seq) in writes {
                let full: Vec<u8> = prefix.iter().chain(&key).copied().collect();
                let tid = crate::txn::Tid::new(epoch, seq);
                let held = model.entry(full.clone()).or_insert(tid);
                *held = (*held).max(tid);
                tail.push(TailWrite { full, tid, row: None });
            }
            newest_per_key(&mut tail);
            let got: Vec<(Vec<u8>, crate::txn::Tid)> = tail.into_iter().map(|w| (w.full, w.tid)).collect();
            let want: Vec<(Vec<u8>, crate::txn::Tid)> = model.into_iter().collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
    use crate::io::sim::SimDisk;
    use std::sync::atomic::{AtomicBool, Ordering};

    const DIR: &str = "/log0";

    fn write_log_header(disk: &SimDisk, seq: u64) {
        let header = files::LogHeader { format: files::EntryFormat::Value, logger: 0, file_seq: seq };
        let mut file = disk.open(&Path::new(DIR).join(files::CURRENT_LOG), OpenMode::CreateNew).unwrap();
        file.append(&files::encode_log_header(header)).unwrap();
    }

    /// A logger directory on the simulated disk that rotates its `data.log` (sequence 3 becomes
    /// `old_data.17.3`, a new `data.log` of sequence 4) once, right after the first listing: a
    /// logger rotating between the Indexer's listing and its read of `data.log`'s header.
    struct RotatesAfterListing {
        disk: SimDisk,
        armed: AtomicBool,
    }

    impl RotatesAfterListing {
        fn new() -> RotatesAfterListing {
            let disk = SimDisk::new();
            disk.create_dir_all(Path::new(DIR)).unwrap();
            disk.open(&Path::new(DIR).join(files::old_log_name(12, 2)), OpenMode::CreateNew).unwrap();
            write_log_header(&disk, 3);
            RotatesAfterListing { disk, armed: AtomicBool::new(true) }
        }
    }

    impl FileSystem for RotatesAfterListing {
        fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Box<dyn File>> {
            self.disk.open(path, mode)
        }
        fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
            self.disk.create_dir_all(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
            self.disk.rename(from, to)
        }
        fn remove(&self, path: &Path) -> std::io::Result<()> {
            self.disk.remove(path)
        }
        fn list(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
            let names = self.disk.list(dir)?;
            if self.armed.swap(false, Ordering::SeqCst) {
                let dir = Path::new(DIR);
                self.disk.rename(&dir.join(files::CURRENT_LOG), &dir.join(files::old_log_name(17, 3)))?;
                write_log_header(&self.disk, 4);
            }
            Ok(names)
        }
        fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
            self.disk.sync_dir(dir)
        }
        fn exists(&self, path: &Path) -> std::io::Result<bool> {
            self.disk.exists(path)
        }
    }

    #[test]
    fn a_rotation_between_the_listing_and_the_header_read_does_not_hide_the_rotated_file() {
        let fs = RotatesAfterListing::new();
        assert_eq!(next_file_seq(&fs, Path::new(DIR), 2).unwrap(), Some(3), "the file after 2 is 3, not 4");
        let fs = RotatesAfterListing::new();
        let found = find_file(&fs, Path::new(DIR), 3).unwrap();
        assert_eq!(found, Some(Path::new(DIR).join(files::old_log_name(17, 3))));
    }
}
