//! Checkpoint recovery (SiloR §5.1): read the manifest, then load every data file with all
//! cores, each thread taking the next file. Files hold disjoint key ranges, so threads build
//! the primary indexes side by side with little interference.
//!
//! Every file the manifest names was synced before the manifest was written, so a missing file,
//! a length other than the recorded one, a damaged block or a record count that does not match
//! is corruption, reported with the file and offset.

use super::format::{self, Manifest, ManifestFile};
use crate::durability::DurabilityError;
use crate::durability::blocks::{BlockReader, Next};
use crate::durability::frame::HEADER_SIZE_BYTES;
use crate::io::{FileSystem, OpenMode};
use crate::storage::Catalog;
use crate::storage::point::Prefetch;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// How many records ahead of its link a record's point-index slot is prefetched.
const PREFETCH_AHEAD: usize = 16;
/// The most records of a block room is made for before they are decoded: a block's count is
/// read from the file, so it is not trusted with an allocation of its size.
const RECORDS_RESERVED_MAX: usize = 4096;

/// What loading the checkpoint found and did.
#[derive(Clone, Debug, Default)]
pub struct CheckpointLoadReport {
    /// The checkpoint loaded.
    pub checkpoint_id: u64,
    /// Its `e_l`: log records of earlier epochs are not replayed over it.
    pub e_l: u64,
    /// Its `e_h`.
    pub e_h: u64,
    /// Files read.
    pub files: usize,
    /// Bytes read.
    pub bytes: u64,
    /// Records loaded.
    pub records: u64,
    /// Milliseconds spent.
    pub load_ms: f64,
}

fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> DurabilityError {
    DurabilityError::Corrupt { file: file.to_path_buf(), offset, reason: reason.into() }
}

/// Reads the manifest in `dir`, if a checkpoint was ever installed.
pub fn read_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Manifest>, DurabilityError> {
    let path = dir.join(format::MANIFEST_FILE);
    if !fs.exists(&path)? {
        return Ok(None);
    }
    let bytes = fs.read_all(&path, format::MANIFEST_SIZE_MAX_BYTES)?;
    format::decode_manifest(&bytes).map(Some).map_err(|e| corrupt(&path, 0, e.to_string()))
}

/// Loads the checkpoint `manifest` (read from `dirs[0]`) into the tables of `catalog` with up to
/// `threads` threads.
pub fn load(
    fs: &dyn FileSystem,
    dirs: &[PathBuf],
    manifest: &Manifest,
    catalog: &Catalog,
    threads: usize,
) -> Result<CheckpointLoadReport, DurabilityError> {
    let start = Instant::now();
    check_tables(&dirs[0].join(format::MANIFEST_FILE), manifest, catalog)?;
    let mut paths = Vec::with_capacity(manifest.files.len());
    for entry in &manifest.files {
        let Some(dir) = dirs.get(entry.dir as usize) else {
            let reason = format!("names a file in log directory #{} of {}", entry.dir, dirs.len());
            return Err(corrupt(&dirs[0].join(format::MANIFEST_FILE), 0, reason));
        };
        paths.push(dir.join(format::data_file_name(manifest.checkpoint_id, entry.dir, entry.file)));
    }
    // Sized once up front: growing a hash index while millions of keys arrive rehashes them all
    // several times over.
    for (id, _, records) in &manifest.tables {
        if let (Some(table), Ok(records)) = (catalog.table(*id), usize::try_from(*records)) {
            table.point.reserve(records);
        }
    }
    let next = AtomicUsize::new(0);
    let (bytes, records) = (AtomicU64::new(0), AtomicU64::new(0));
    let failure: Mutex<Option<DurabilityError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, paths.len().max(1)) {
            scope.spawn(|| {
                while let Some(i) = Some(next.fetch_add(1, Ordering::Relaxed)).filter(|&i| i < paths.len()) {
                    if failure.lock().is_some() {
                        return;
                    }
                    match load_file(fs, &paths[i], &manifest.files[i], manifest, catalog) {
                        Ok(()) => {
                            bytes.fetch_add(manifest.files[i].len_bytes, Ordering::Relaxed);
                            records.fetch_add(manifest.files[i].records, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failure.lock().get_or_insert(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    Ok(CheckpointLoadReport {
        checkpoint_id: manifest.checkpoint_id,
        e_l: manifest.e_l,
        e_h: manifest.e_h,
        files: paths.len(),
        bytes: bytes.into_inner(),
        records: records.into_inner(),
        load_ms: start.elapsed().as_secs_f64() * 1e3,
    })
}

/// Every table the checkpoint covers must exist under the same id and name: the catalog file
/// was rebuilt before, from the same DDL.
fn check_tables(path: &Path, manifest: &Manifest, catalog: &Catalog) -> Result<(), DurabilityError> {
    for (id, name, _) in &manifest.tables {
        match catalog.table(*id) {
            Some(t) if t.schema.name == *name => {}
            Some(t) => {
                let reason = format!("table #{id} is {name} in the checkpoint but {} in the catalog", t.schema.name);
                return Err(corrupt(path, 0, reason));
            }
            None => return Err(corrupt(path, 0, format!("table #{id} ({name}) is not in the catalog"))),
        }
    }
    Ok(())
}

/// Streams one data file, block by block, into the tables.
fn load_file(
    fs: &dyn FileSystem,
    path: &Path,
    entry: &ManifestFile,
    manifest: &Manifest,
    catalog: &Catalog,
) -> Result<(), DurabilityError> {
    let mut file = fs.open(path, OpenMode::Read).map_err(|e| corrupt(path, 0, format!("cannot open: {e}")))?;
    let len = file.len_bytes()?;
    if len != entry.len_bytes {
        return Err(corrupt(
            path,
            len.min(entry.len_bytes),
            format!("{len} bytes, the manifest says {}", entry.len_bytes),
        ));
    }
    let mut blocks = BlockReader::new(file.as_mut(), len);
    let head = match blocks.next_block()? {
        Next::Block(block) => block,
        Next::End => return Err(corrupt(path, 0, "no header block")),
        Next::Damaged(e) => return Err(corrupt(path, 0, e.to_string())),
    };
    let (header, _) = format::decode_data_header(head.framed).map_err(|e| corrupt(path, 0, e.to_string()))?;
    if (header.checkpoint_id, header.dir, header.file) != (manifest.checkpoint_id, entry.dir, entry.file) {
        return Err(corrupt(path, 0, format!("header names {header:?}, the manifest expects this file")));
    }
    let mut records = 0u64;
    loop {
        match blocks.next_block()? {
            Next::Block(block) => records += load_block(path, block.offset, block.payload(), manifest, catalog)?,
            Next::End => break,
            Next::Damaged(e) => return Err(corrupt(path, blocks.offset(), e.to_string())),
        }
    }
    if records != entry.records {
        return Err(corrupt(path, len, format!("{records} records, the manifest says {}", entry.records)));
    }
    Ok(())
}

/// Loads one data block's records; returns how many.
fn load_block(
    path: &Path,
    offset: u64,
    payload: &[u8],
    manifest: &Manifest,
    catalog: &Catalog,
) -> Result<u64, DurabilityError> {
    let bad = |at: usize, reason: String| corrupt(path, offset + (HEADER_SIZE_BYTES + at) as u64, reason);
    let (table_id, count, mut reader) = format::decode_block_head(payload).map_err(|e| bad(0, e.to_string()))?;
    if !manifest.tables.iter().any(|(id, _, _)| *id == table_id) {
        return Err(bad(0, format!("block of table #{table_id}, which the manifest does not list")));
    }
    let table = catalog.table(table_id).ok_or_else(|| bad(0, format!("table #{table_id} does not exist")))?;
    // Decoded whole first, so that each record's point-index slot (a miss: the slots of a large
    // table are spread over far more than the cache) is prefetched some records before it is
    // linked, as value replay does its lookups.
    let large = table.point.misses_cache();
    let capacity = (count as usize).min(RECORDS_RESERVED_MAX);
    let (mut records, mut hashes) = (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
    for _ in 0..count {
        let at = reader.offset();
        let record = format::decode_record(&mut reader).map_err(|e| bad(at, e.to_string()))?;
        if large {
            hashes.push(table.point.hash_of(record.key.as_bytes()));
        }
        records.push((at, record));
    }
    if !reader.is_empty() {
        return Err(bad(reader.offset(), "bytes after the block's last record".into()));
    }
    let prefetch = |i: usize| {
        if let Some(&hash) = hashes.get(i) {
            table.point.prefetch(hash, Prefetch::Slot);
        }
    };
    (0..PREFETCH_AHEAD).for_each(prefetch);
    for (i, (at, record)) in records.into_iter().enumerate() {
        prefetch(i + PREFETCH_AHEAD);
        table.load_checkpointed(record.key, record.row, record.tid).map_err(|e| bad(at, e.to_string()))?;
    }
    Ok(u64::from(count))
}
