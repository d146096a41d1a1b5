//! `lazarus inspect` for the stream schemes' files (`serial-*`, `taurus-*`): what a log segment
//! holds, read-only and without recovering it, and the persistent vector file decoded.
//!
//! Per segment (`<taurus|serial>.<logger>.<generation>[.<base>].log`): its header, the
//! transaction records and what they carry (calls or data writes; RAW and WAW predecessors,
//! or compressed vectors), whether it ends with its end record, and the first damage (the
//! offset and what is wrong there), where reading stops, as recovery's reader would stop.
//! Whether a stop is a torn tail or lost data is the log chain's and the persistent vector's
//! question, which recovery answers; inspecting only reports.

use super::format::{self, Deps, Record, StreamHeader};
use crate::durability::DurabilityError;
use crate::durability::command::CommandEntry;
use crate::durability::frame;
use crate::durability::inspect::{LOG_FILE_SIZE_MAX_BYTES, write_file_head, write_file_tail};
use crate::io::FileSystem;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What one stream log segment holds.
#[derive(Clone, Debug, Default)]
pub struct SegmentSummary {
    /// The file.
    pub path: PathBuf,
    /// Its length.
    pub len_bytes: u64,
    /// Its header, if it decodes.
    pub header: Option<StreamHeader>,
    /// Transaction records.
    pub txns: u64,
    /// Of those, procedure calls (command flavors).
    pub calls: u64,
    /// Writes of the data records.
    pub writes: u64,
    /// RAW and WAW predecessors named by predecessor lists.
    pub raw_predecessors: u64,
    /// See `raw_predecessors`.
    pub waw_predecessors: u64,
    /// Records with compressed predecessors (vectors, §6.6).
    pub compressed: u64,
    /// Whether the segment ends with its end record (a settled file).
    pub ended: bool,
    /// Where reading stopped before the end, and why.
    pub damage: Option<(u64, String)>,
    /// With `records`: one line per transaction (offset, id, commit sequence, predecessors, REDO).
    pub records: Vec<String>,
}

/// Reads the segment at `path`; `records` also lists every transaction.
pub fn inspect_segment(fs: &dyn FileSystem, path: &Path, records: bool) -> Result<SegmentSummary, DurabilityError> {
    let bytes = fs.read_all(path, LOG_FILE_SIZE_MAX_BYTES)?;
    let mut summary = SegmentSummary { path: path.to_path_buf(), len_bytes: bytes.len() as u64, ..Default::default() };
    let (header, mut at) = match format::decode_header(&bytes) {
        Ok(decoded) => decoded,
        Err(e) => {
            summary.damage = Some((0, format!("header: {e}")));
            return Ok(summary);
        }
    };
    summary.header = Some(header);
    while at < bytes.len() {
        let (payload, size) = match frame::decode_block(&bytes[at..]) {
            Ok(block) => block,
            Err(e) => {
                summary.damage = Some((at as u64, e.to_string()));
                return Ok(summary);
            }
        };
        match format::decode_record(payload) {
            Ok(Record::End(len)) if len != at as u64 => {
                summary.damage = Some((at as u64, format!("an end record for length {len} at another offset")));
                return Ok(summary);
            }
            Ok(Record::End(_)) => {
                summary.ended = true;
                if at + size < bytes.len() {
                    summary.damage = Some(((at + size) as u64, "bytes after the end record".into()));
                }
                return Ok(summary);
            }
            Ok(Record::Txn { deps, entry }) => {
                // A transaction's id is its logger and the logical address just past its record.
                let address = header.base.checked_add((at + size) as u64).filter(|&a| a < 1 << format::ADDRESS_BITS);
                let Some(address) = address else {
                    summary.damage =
                        Some((at as u64, format!("base {} puts the record beyond the id space", header.base)));
                    return Ok(summary);
                };
                count(&mut summary, at, format::txn_id(header.logger as usize, address), &deps, &entry, records);
            }
            Err(e) => {
                summary.damage = Some((at as u64, format!("record: {e}")));
                return Ok(summary);
            }
        }
        at += size;
    }
    Ok(summary)
}

fn count(summary: &mut SegmentSummary, at: usize, id: u64, deps: &Deps, entry: &CommandEntry, records: bool) {
    summary.txns += 1;
    let deps_text = match deps {
        Deps::None => String::new(),
        Deps::Lists { raw, waw, .. } => {
            summary.raw_predecessors += raw.len() as u64;
            summary.waw_predecessors += waw.len() as u64;
            format!(" raw {} waw {}", ids(raw), ids(waw))
        }
        Deps::Vectors { pv, waw } => {
            summary.compressed += 1;
            format!(" pv {pv:?} waw {waw:?}")
        }
    };
    let redo = match entry {
        CommandEntry::Call { procedure_id, args, .. } => {
            summary.calls += 1;
            format!("call procedure #{procedure_id} with {} argument(s)", args.len())
        }
        CommandEntry::Data { entry, .. } => {
            summary.writes += entry.writes.len() as u64;
            format!("{:?}, {} write(s)", entry.tid, entry.writes.len())
        }
    };
    if records {
        let (logger, address) = format::split_id(id);
        summary.records.push(format!("@{at} id {logger}:{address} seq {}{deps_text}: {redo}", entry.seq()));
    }
}

/// Predecessor ids as `logger:address`.
fn ids(list: &[u64]) -> String {
    let parts: Vec<String> = list.iter().map(|&id| format::split_id(id)).map(|(l, a)| format!("{l}:{a}")).collect();
    format!("[{}]", parts.join(", "))
}

/// One line (and one per record, and the damage) describing `s`, appended to `out`.
pub fn write_segment_summary(out: &mut String, s: &SegmentSummary) {
    let header = s.header.map(|h| {
        let (flavor, logger, loggers) = (h.flavor.name(), h.logger, h.loggers);
        format!("{flavor} log, logger {logger} of {loggers}, generation {}, base {}", h.generation, h.base)
    });
    write_file_head(out, &s.path, s.len_bytes, header);
    let _ = write!(out, ", {} transactions", s.txns);
    if s.calls > 0 {
        let _ = write!(out, " ({} calls)", s.calls);
    }
    let _ = write!(out, ", {} writes", s.writes);
    if s.raw_predecessors + s.waw_predecessors > 0 {
        let _ = write!(out, ", {} RAW and {} WAW predecessors", s.raw_predecessors, s.waw_predecessors);
    }
    if s.compressed > 0 {
        let _ = write!(out, ", {} with compressed predecessors", s.compressed);
    }
    write_file_tail(out, s.ended.then_some("record"), &s.damage, &s.records);
}

/// The persistent vector file decoded: the current round's generation and durable lengths.
pub fn describe_persistent_vector(bytes: &[u8]) -> String {
    match format::decode_persistent_vector_file(bytes) {
        Ok((flavor, pv)) => format!(
            "{} persistent vector, round {}, generation {}, durable lengths {:?}",
            flavor.name(),
            pv.sequence,
            pv.generation,
            pv.durable_len_bytes
        ),
        Err(e) => format!("damaged: {e}"),
    }
}
