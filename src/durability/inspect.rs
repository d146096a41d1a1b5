//! `lazarus inspect`: what a log directory holds, file by file, read-only and without recovering
//! it. For an operator looking at a directory that will not recover, and for a developer reading
//! a crash image a reliability sweep kept (`docs/RELIABILITY.md`).
//!
//! Per log file (`data.log`, `old_data.<max epoch>.<seq>`): its header, how many blocks are
//! whole, the entries and writes of a value log and their epoch range, whether the file ends
//! with its end block, and the first damage (the offset and what is wrong there), where reading
//! stops. The `pepoch` file and the catalog are decoded; a copy in memory of the indexed log
//! (`indexed.redb`) is opened for its resume positions and its counts. The stream schemes'
//! segments and persistent vector file are described by [`super::taurus::inspect`]. Nothing is
//! written: a damaged file is reported, never repaired.

use super::DurabilityError;
use super::codec::Reader;
use super::frame::{self, HEADER_SIZE_BYTES};
use super::indexed::store::{INDEX_FILE, IndexStore};
use super::taurus::{self, format::Flavor};
use super::value::files::{self, EntryFormat, LogHeader};
use crate::io::FileSystem;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest log file read whole (larger ones are reported and skipped).
pub const LOG_FILE_SIZE_MAX_BYTES: u64 = 16 << 30;

/// What one log file holds.
#[derive(Clone, Debug, Default)]
pub struct LogFileSummary {
    /// The file.
    pub path: PathBuf,
    /// Its length.
    pub len_bytes: u64,
    /// Its header, if it decodes.
    pub header: Option<LogHeader>,
    /// Whole blocks after the header (the end block not counted).
    pub blocks: u64,
    /// Transaction entries (value logs only).
    pub entries: u64,
    /// Writes in those entries (value logs only).
    pub writes: u64,
    /// Smallest and largest epoch of an entry (value logs only).
    pub epochs: Option<(u64, u64)>,
    /// Whether the file ends with its end block (a closed file).
    pub ended: bool,
    /// Where reading stopped before the end, and why.
    pub damage: Option<(u64, String)>,
    /// With `records`: one line per write (offset of its block, TID, table, key, put or delete).
    pub records: Vec<String>,
}

/// Reads the log file at `path`; `records` also lists every write.
pub fn inspect_log_file(fs: &dyn FileSystem, path: &Path, records: bool) -> Result<LogFileSummary, DurabilityError> {
    let bytes = fs.read_all(path, LOG_FILE_SIZE_MAX_BYTES)?;
    let mut summary = LogFileSummary { path: path.to_path_buf(), len_bytes: bytes.len() as u64, ..Default::default() };
    let (header, mut at) = match files::decode_log_header(&bytes) {
        Ok(decoded) => decoded,
        Err(e) => {
            summary.damage = Some((0, format!("header: {e}")));
            return Ok(summary);
        }
    };
    summary.header = Some(header);
    while at < bytes.len() {
        match frame::decode_block(&bytes[at..]) {
            Ok((payload, size)) => {
                let end = at + size;
                if end == bytes.len() && files::decode_end_block(payload) == Some(at as u64) {
                    summary.ended = true;
                } else {
                    summary.blocks += 1;
                    if header.format == EntryFormat::Value
                        && let Err(reason) = summarize_entries(&mut summary, at, payload, records)
                    {
                        summary.damage = Some(((at + HEADER_SIZE_BYTES) as u64, reason));
                        return Ok(summary);
                    }
                }
                at = end;
            }
            Err(e) => {
                summary.damage = Some((at as u64, e.to_string()));
                return Ok(summary);
            }
        }
    }
    Ok(summary)
}

fn summarize_entries(summary: &mut LogFileSummary, at: usize, payload: &[u8], records: bool) -> Result<(), String> {
    let mut r = Reader::new(payload);
    while !r.is_empty() {
        let (tid, writes) = r.entry_head().map_err(|e| format!("entry: {e}"))?;
        let epoch = tid.epoch();
        summary.entries += 1;
        summary.epochs = Some(summary.epochs.map_or((epoch, epoch), |(lo, hi)| (lo.min(epoch), hi.max(epoch))));
        for _ in 0..writes {
            let (table, put, key) = r.write_head().map_err(|e| format!("write: {e}"))?;
            let key = key.to_vec();
            let row = if put { Some(r.row().map_err(|e| format!("row: {e}"))?) } else { None };
            summary.writes += 1;
            if records {
                let what = row.map_or_else(|| "delete".to_string(), |row| format!("put {:?}", row.to_vec()));
                summary.records.push(format!("@{at} {tid:?} table {table} key {} {what}", hex(&key)));
            }
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Describes every file of log directory `dir` that Lazarus knows, in name order.
pub fn inspect_dir(fs: &Arc<dyn FileSystem>, dir: &Path, records: bool) -> Result<String, DurabilityError> {
    let mut out = String::new();
    let _ = writeln!(out, "{}", dir.display());
    for name in fs.list(dir)? {
        let path = dir.join(&name);
        if name.as_os_str() == files::PEPOCH_FILE {
            let described = match files::decode_pepoch(&fs.read_all(&path, 1 << 20)?) {
                Ok(p) => format!(
                    "persistent epoch {}, durable positions {:?}, void epochs {:?}, checkpoint e_l {}",
                    p.epoch,
                    p.positions.iter().map(|d| (d.logger, d.file_seq, d.durable_len_bytes)).collect::<Vec<_>>(),
                    p.holes,
                    p.checkpoint_e_l
                ),
                Err(e) => format!("damaged: {e}"),
            };
            let _ = writeln!(out, "  {}: {described}", name.display());
        } else if name.as_os_str() == files::CATALOG_FILE {
            let described = match files::decode_catalog(&fs.read_all(&path, 64 << 20)?) {
                Ok(modules) => format!("modules {:?}", modules.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()),
                Err(e) => format!("damaged: {e}"),
            };
            let _ = writeln!(out, "  {}: {described}", name.display());
        } else if name.as_os_str() == INDEX_FILE {
            let _ = writeln!(out, "  {}: {}", name.display(), describe_index(fs, &path));
        } else if files::is_log_file(&name) {
            write_log_summary(&mut out, &inspect_log_file(fs.as_ref(), &path, records)?);
        } else if taurus::format::parse_segment_name(&name).is_some() {
            let summary = taurus::inspect::inspect_segment(fs.as_ref(), &path, records)?;
            taurus::inspect::write_segment_summary(&mut out, &summary);
        } else if Flavor::ALL.iter().any(|&f| name.as_os_str() == taurus::format::persistent_vector_name(f).as_str()) {
            // A file past its size limit is damage to report, like a bad slot, not a reason to stop.
            let described = match fs.read_all(&path, taurus::format::PERSISTENT_VECTOR_FILE_MAX_BYTES) {
                Ok(bytes) => taurus::inspect::describe_persistent_vector(&bytes),
                Err(e) => format!("cannot be read: {e}"),
            };
            let _ = writeln!(out, "  {}: {described}", name.display());
        }
    }
    Ok(out)
}

/// The largest indexed log inspected (it is copied into memory first).
pub const INDEX_FILE_SIZE_MAX_BYTES: u64 = crate::io::sim::FILE_SIZE_MAX_BYTES;

/// Opens a copy in memory: redb repairs a file that was not closed cleanly as it opens it, and
/// inspecting must not write.
fn describe_index(fs: &Arc<dyn FileSystem>, path: &Path) -> String {
    let copy = match copy_into_memory(fs.as_ref(), path) {
        Ok(copy) => copy,
        Err(e) => return format!("cannot be read: {e}"),
    };
    let store = match IndexStore::open(Arc::new(copy.0), &copy.1, false) {
        Ok(store) => store,
        Err(e) => return format!("cannot be opened: {e}"),
    };
    let described = match (store.progress(), store.image_count(), store.tombstone_count()) {
        (Ok(p), Ok(images), Ok(tombstones)) => format!(
            "indexed epoch {}, resume positions {:?}, {images} images, {tombstones} tombstones",
            p.indexed_epoch,
            p.positions.iter().map(|l| (l.logger, l.file_seq, l.offset)).collect::<Vec<_>>()
        ),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => format!("cannot be read: {e}"),
    };
    match store.close() {
        Ok(()) => described,
        Err(e) => format!("{described} (closing it failed: {e})"),
    }
}

fn copy_into_memory(fs: &dyn FileSystem, path: &Path) -> std::io::Result<(crate::io::sim::SimDisk, PathBuf)> {
    let bytes = fs.read_all(path, INDEX_FILE_SIZE_MAX_BYTES)?;
    let disk = crate::io::sim::SimDisk::new();
    let copy = Path::new("/").join(INDEX_FILE);
    let mut file = disk.open(&copy, crate::io::OpenMode::CreateNew)?;
    file.append(&bytes)?;
    file.sync_data()?;
    disk.sync_dir(Path::new("/"))?;
    Ok((disk, copy))
}

fn write_log_summary(out: &mut String, s: &LogFileSummary) {
    let header = s.header.map(|h| format!("{:?} log, logger {}, sequence {}", h.format, h.logger, h.file_seq));
    write_file_head(out, &s.path, s.len_bytes, header);
    let _ = write!(out, ", {} blocks", s.blocks);
    if s.header.is_some_and(|h| h.format == EntryFormat::Value) {
        let _ = write!(out, ", {} entries, {} writes", s.entries, s.writes);
        if let Some((lo, hi)) = s.epochs {
            let _ = write!(out, ", epochs {lo}..={hi}");
        }
    }
    write_file_tail(out, s.ended.then_some("block"), &s.damage, &s.records);
}

/// The start of a file's line in the listing: its name, length and decoded header (`None`: the
/// header did not decode).
pub(crate) fn write_file_head(out: &mut String, path: &Path, len_bytes: u64, header: Option<String>) {
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let header = header.unwrap_or_else(|| "no header".to_string());
    let _ = write!(out, "  {name}: {len_bytes} bytes, {header}");
}

/// The end of a file's description: whether it ends with its end marker (`Some` names the
/// marker), then where reading stopped and why, then one line per listed record.
pub(crate) fn write_file_tail(out: &mut String, end: Option<&str>, damage: &Option<(u64, String)>, records: &[String]) {
    let _ = writeln!(out, "{}", end.map_or_else(String::new, |marker| format!(", ends with its end {marker}")));
    if let Some((offset, reason)) = damage {
        let _ = writeln!(out, "    stops at byte {offset}: {reason}");
    }
    for line in records {
        let _ = writeln!(out, "    {line}");
    }
}
