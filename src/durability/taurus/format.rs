//! Files and records of the stream schemes (`serial-data`, `serial-cmd`, `taurus-data`,
//! `taurus-cmd`). `docs/FORMAT.md` has the same tables.
//!
//! **Log segment** `<prefix>.<logger>.<generation>.log` (the first segment, base 0) or
//! `<prefix>.<logger>.<generation>.<base>.log` (a later one), `prefix` `serial` or `taurus`, in
//! the log directory `logger % directories`. A logger's log of a generation is one *logical*
//! byte stream cut into segments (a new one at every checkpoint, so whole files can be removed
//! once a checkpoint covers them); a segment holds the stream's bytes from its `base` on: a
//! header block, then one framed block ([`crate::durability::frame`]) per record. A record's
//! *address* is the logical offset just past its block (`base` + file offset): a transaction's id
//! is `logger << 56 | address` (Taurus §4.1.2: "the address of a transaction in a log file
//! concatenated with the logger ID"). A segment's `base` is the logical end of the one before.
//!
//! Header block payload (version 4):
//!
//! ```text
//! 8   magic        "LZSTREAM"
//! u32 version      4 (3: the same layout, but write sets held whole rows only: read; 2 had no
//!                  base and no segments: read as base 0; 1 had sync marks and `.synced`
//!                  files; refused)
//! u8  flavor       1 = serial-data, 2 = serial-cmd, 3 = taurus-data, 4 = taurus-cmd
//! u32 logger       this file's logger
//! u32 loggers      loggers of the generation
//! u64 generation   incremented by every recovery: a file of an older generation is never
//!                  appended to again
//! u64 base         (versions 3 and 4) logical offset of this file's first byte
//! ```
//!
//! Record block payload:
//!
//! ```text
//! u8 kind          1 = transaction, 3 = end of a settled file (2 was version 1's sync mark)
//! kind 3: u64 len_bytes   the file offset of this block: recovery settled the segment to here
//!                         and ended it (the last segment of a settled log must end with this
//!                         block: a cut one does not)
//! kind 1: u8 deps  0 = none (serial), 1 = predecessor lists, 2 = predecessor vectors (§6.6)
//!   deps 1: u32 raw_count, raw_count × u64 RAW predecessor ids,
//!           u32 waw_count, waw_count × u64 WAW predecessor ids,
//!           u8 fresh_writes   1 if a write met no `last_writer` (an insert, or the first write
//!                             of a record since recovery), else 0; informational since
//!                             command replay reads versions (`crate::txn::versions`)
//!   deps 2: u16 n, n × u64 predecessor vector (end addresses), n × u64 WAW vector
//!   then the REDO data: a command-log entry (src/durability/command/mod.rs): kind 1 = procedure
//!   call (commit_seq, TID, procedure id, arguments), kind 2 = write set (commit_seq, value-log
//!   entry). Data flavors log every transaction as a write set, an update as a column patch
//!   (op 3, src/durability/codec.rs) when replay in write order will hold the row it replaced;
//!   command flavors' write sets hold whole rows. `commit_seq` is the global LSN (serial), the
//!   commit timestamp (taurus-cmd) or 0 (taurus-data).
//! ```
//!
//! **Persistent vector file** `<prefix>.persistent_vector` in the first log directory (Taurus's
//! *persistent vector*, the vector of every logger's persistent point; "PLV" in later versions of
//! the paper): the durable logical length of every logger's log of the current generation. Two slots of
//! [`PERSISTENT_VECTOR_SLOT_BYTES`] each, at offsets 0 and 4096, each one framed block:
//!
//! ```text
//! 8   magic              "LZPVECTR"
//! u32 version            4 (3 and 2: the same fields; read)
//! u8  flavor             as in the header
//! u8  slot               0 or 1: the slot this record was written to (a copy misdirected
//!                        into the other slot does not match it)
//! u64 sequence           rounds written; the valid slot with the larger one is current
//! u64 generation         the generation whose log files it describes
//! u32 loggers            1..=64
//! loggers × u64 durable_len_bytes   logger l's log was synced up to this logical offset before
//!                        this record was written (0: nothing of the generation is durable yet)
//! ```
//!
//! Written whole at the start of each generation (temp file, sync, rename, directory sync;
//! slot 0, sequence 0, every length 0) before the generation's log files are created; then, once
//! per group-commit round, overwritten in place in slot `sequence % 2` and synced
//! (`fdatasync`) *before* the lengths it records are published as persistent points, so before
//! any transaction they cover is acknowledged. A write torn by power loss damages only its own
//! slot; the other holds the previous round, which covers everything acknowledged. Recovery
//! requires every log of that generation to be whole up to its recorded length (damage there is
//! an error naming the file and offset); bytes after it may be a torn tail.

use crate::durability::codec::{DecodeError, Reader};
use crate::durability::command::{self, CommandEntry};
use crate::durability::frame;
use std::path::Path;

/// Version of the header, record and persistent vector layouts.
pub const FORMAT_VERSION: u32 = 4;
/// The previous version, still read: the same layouts, write sets of whole rows only.
pub const FORMAT_VERSION_WHOLE_ROWS: u32 = 3;
/// The previous version, still read: one segment per log, so every base is 0.
pub const FORMAT_VERSION_UNSEGMENTED: u32 = 2;
const MAGIC: &[u8; 8] = b"LZSTREAM";
const PERSISTENT_VECTOR_MAGIC: &[u8; 8] = b"LZPVECTR";
/// Bytes of each slot of the persistent vector file: a write to one slot never shares a sector
/// (512 B or 4 KiB) with the other, so tearing one leaves the other whole.
pub const PERSISTENT_VECTOR_SLOT_BYTES: u64 = 4096;
/// The largest persistent vector file recovery reads.
pub const PERSISTENT_VECTOR_FILE_MAX_BYTES: u64 = 2 * PERSISTENT_VECTOR_SLOT_BYTES;
/// Bits of a transaction id that hold the address; the logger is above them.
pub const ADDRESS_BITS: u32 = 56;
/// The most loggers a stream scheme may run.
pub const LOGGERS_MAX: usize = 64;
/// The most predecessors of one kind one record may list.
pub const PREDECESSORS_MAX: usize = 1 << 20;

const KIND_TXN: u8 = 1;
const KIND_END: u8 = 3;
const DEPS_NONE: u8 = 0;
const DEPS_LISTS: u8 = 1;
const DEPS_VECTORS: u8 = 2;

/// Which of the four schemes wrote a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// One stream, global LSN, after-images (Taurus §6.1 "Serial Data").
    SerialData,
    /// One stream, global LSN, procedure calls (§6.1 "Serial Cmd").
    SerialCmd,
    /// Taurus data logging (§4).
    TaurusData,
    /// Taurus command logging (§5).
    TaurusCmd,
}

impl Flavor {
    /// Every flavor.
    pub const ALL: [Flavor; 4] = [Flavor::SerialData, Flavor::SerialCmd, Flavor::TaurusData, Flavor::TaurusCmd];

    /// The scheme's name as `--durability` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::SerialData => "serial-data",
            Flavor::SerialCmd => "serial-cmd",
            Flavor::TaurusData => "taurus-data",
            Flavor::TaurusCmd => "taurus-cmd",
        }
    }

    /// The flavor `--durability` names, if it is one of these.
    pub fn from_name(name: &str) -> Option<Flavor> {
        [Flavor::SerialData, Flavor::SerialCmd, Flavor::TaurusData, Flavor::TaurusCmd]
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// Whether procedure calls are logged as commands.
    pub fn is_command(self) -> bool {
        matches!(self, Flavor::SerialCmd | Flavor::TaurusCmd)
    }

    /// Whether dependencies are tracked (Taurus) rather than a global LSN (serial).
    pub fn is_taurus(self) -> bool {
        matches!(self, Flavor::TaurusData | Flavor::TaurusCmd)
    }

    fn code(self) -> u8 {
        match self {
            Flavor::SerialData => 1,
            Flavor::SerialCmd => 2,
            Flavor::TaurusData => 3,
            Flavor::TaurusCmd => 4,
        }
    }

    fn from_code(code: u8) -> Option<Flavor> {
        [Flavor::SerialData, Flavor::SerialCmd, Flavor::TaurusData, Flavor::TaurusCmd]
            .into_iter()
            .find(|f| f.code() == code)
    }

    fn prefix(self) -> &'static str {
        if self.is_taurus() { "taurus" } else { "serial" }
    }
}

/// A transaction id: its logger and the address just past its record.
pub fn txn_id(logger: usize, address: u64) -> u64 {
    debug_assert!(logger < LOGGERS_MAX && address < 1 << ADDRESS_BITS && address > 0);
    ((logger as u64) << ADDRESS_BITS) | address
}

/// The logger and address of a transaction id.
pub fn split_id(id: u64) -> (usize, u64) {
    ((id >> ADDRESS_BITS) as usize, id & ((1 << ADDRESS_BITS) - 1))
}

/// The header of a log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamHeader {
    /// The scheme that wrote it.
    pub flavor: Flavor,
    /// Its logger.
    pub logger: u32,
    /// The loggers of its generation.
    pub loggers: u32,
    /// Its generation.
    pub generation: u64,
    /// The logical offset of the file's first byte (0 for a log's first segment).
    pub base: u64,
}

/// The name of a logger's first segment of a generation.
pub fn log_name(flavor: Flavor, logger: usize, generation: u64) -> String {
    segment_name(flavor, logger, generation, 0)
}

/// The name of a logger's segment of a generation starting at logical offset `base`.
pub fn segment_name(flavor: Flavor, logger: usize, generation: u64, base: u64) -> String {
    if base == 0 {
        format!("{}.{logger}.{generation}.log", flavor.prefix())
    } else {
        format!("{}.{logger}.{generation}.{base}.log", flavor.prefix())
    }
}

/// `(is_taurus, logger, generation)` of a stream log segment name.
pub fn parse_log_name(name: &Path) -> Option<(bool, usize, u64)> {
    parse_segment_name(name).map(|(taurus, logger, generation, _)| (taurus, logger, generation))
}

/// `(is_taurus, logger, generation, base)` of a stream log segment name.
pub fn parse_segment_name(name: &Path) -> Option<(bool, usize, u64, u64)> {
    let name = name.to_str()?;
    let rest = name.strip_suffix(".log")?;
    let (taurus, rest) = match rest.split_once('.')? {
        ("taurus", rest) => (true, rest),
        ("serial", rest) => (false, rest),
        _ => return None,
    };
    let (logger, rest) = rest.split_once('.')?;
    let (generation, base) = match rest.split_once('.') {
        // A later segment's base is never 0 (the header comes first), and is spelled one way.
        Some((generation, base)) => (generation, base.parse().ok().filter(|&b: &u64| b > 0 && b.to_string() == base)?),
        None => (rest, 0),
    };
    Some((taurus, logger.parse().ok()?, generation.parse().ok()?, base))
}

/// Encodes a file's header block.
pub fn encode_header(header: &StreamHeader) -> Vec<u8> {
    let mut payload = Vec::with_capacity(37);
    payload.extend_from_slice(MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.push(header.flavor.code());
    payload.extend_from_slice(&header.logger.to_le_bytes());
    payload.extend_from_slice(&header.loggers.to_le_bytes());
    payload.extend_from_slice(&header.generation.to_le_bytes());
    payload.extend_from_slice(&header.base.to_le_bytes());
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// The payload of the block at the start of `bytes`, past its `magic` and version (checked),
/// the version, and the block's size; `what` names the block in errors.
fn versioned_block<'a>(bytes: &'a [u8], magic: &[u8; 8], what: &str) -> Result<(Reader<'a>, u32, usize), String> {
    let (payload, size) = frame::decode_block(bytes).map_err(|e| e.to_string())?;
    let mut r = Reader::new(payload);
    if r.take(8).map_err(|e| e.to_string())? != magic {
        return Err(format!("not a {what} (wrong magic)"));
    }
    let version = r.u32().map_err(|e| e.to_string())?;
    if ![FORMAT_VERSION, FORMAT_VERSION_WHOLE_ROWS, FORMAT_VERSION_UNSEGMENTED].contains(&version) {
        return Err(format!(
            "format version {version}, this build reads versions {FORMAT_VERSION_UNSEGMENTED} to {FORMAT_VERSION}"
        ));
    }
    Ok((r, version, size))
}

/// Decodes the header block at the start of a file; returns it and its size.
pub fn decode_header(bytes: &[u8]) -> Result<(StreamHeader, usize), String> {
    let (mut r, version, size) = versioned_block(bytes, MAGIC, "stream log file")?;
    let bad = |e: DecodeError| e.to_string();
    let flavor = Flavor::from_code(r.u8().map_err(bad)?).ok_or("unknown flavor")?;
    let header = StreamHeader {
        flavor,
        logger: r.u32().map_err(bad)?,
        loggers: r.u32().map_err(bad)?,
        generation: r.u64().map_err(bad)?,
        base: if version == FORMAT_VERSION_UNSEGMENTED { 0 } else { r.u64().map_err(bad)? },
    };
    if !r.is_empty() || header.loggers == 0 || header.loggers as usize > LOGGERS_MAX || header.logger >= header.loggers
    {
        return Err("invalid header fields".into());
    }
    Ok((header, size))
}

/// The name of a scheme's persistent vector file (in the first log directory).
pub fn persistent_vector_name(flavor: Flavor) -> String {
    format!("{}.persistent_vector", flavor.prefix())
}

/// One record of the persistent vector file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistentVector {
    /// Rounds written; the valid slot with the larger one is current.
    pub sequence: u64,
    /// The generation whose log files it describes.
    pub generation: u64,
    /// Per logger, the length of its log file that was synced before this record was written.
    pub durable_len_bytes: Vec<u64>,
}

impl PersistentVector {
    /// The slot this record is written to.
    pub fn slot(&self) -> u64 {
        self.sequence % 2
    }
}

/// Encodes `pv` as the framed block of its slot.
pub fn encode_persistent_vector(flavor: Flavor, pv: &PersistentVector) -> Vec<u8> {
    assert!((1..=LOGGERS_MAX).contains(&pv.durable_len_bytes.len()), "{} loggers", pv.durable_len_bytes.len());
    let mut payload = Vec::with_capacity(34 + 8 * pv.durable_len_bytes.len());
    payload.extend_from_slice(PERSISTENT_VECTOR_MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.push(flavor.code());
    payload.push(pv.slot() as u8);
    payload.extend_from_slice(&pv.sequence.to_le_bytes());
    payload.extend_from_slice(&pv.generation.to_le_bytes());
    payload.extend_from_slice(&(pv.durable_len_bytes.len() as u32).to_le_bytes());
    pv.durable_len_bytes.iter().for_each(|l| payload.extend_from_slice(&l.to_le_bytes()));
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    debug_assert!(out.len() as u64 <= PERSISTENT_VECTOR_SLOT_BYTES);
    out
}

/// The whole file a generation starts with: `pv` (sequence 0) in slot 0, the rest of the slot
/// zeros, slot 1 empty.
pub fn encode_persistent_vector_file(flavor: Flavor, pv: &PersistentVector) -> Vec<u8> {
    assert_eq!(pv.slot(), 0, "a new persistent vector file starts in slot 0");
    let mut out = encode_persistent_vector(flavor, pv);
    out.resize(PERSISTENT_VECTOR_SLOT_BYTES as usize, 0);
    out
}

/// Decodes the record of slot `slot` (its bytes start at the slot's offset).
fn decode_persistent_vector_slot(slot: u64, bytes: &[u8]) -> Result<(Flavor, PersistentVector), String> {
    let (mut r, _, _) = versioned_block(bytes, PERSISTENT_VECTOR_MAGIC, "persistent vector record")?;
    let bad = |e: DecodeError| e.to_string();
    let flavor = Flavor::from_code(r.u8().map_err(bad)?).ok_or("unknown flavor")?;
    if u64::from(r.u8().map_err(bad)?) != slot {
        return Err(format!("a record of the other slot in slot {slot} (a misdirected write)"));
    }
    let sequence = r.u64().map_err(bad)?;
    let generation = r.u64().map_err(bad)?;
    let loggers = r.u32().map_err(bad)? as usize;
    if !(1..=LOGGERS_MAX).contains(&loggers) {
        return Err(format!("{loggers} loggers"));
    }
    let durable_len_bytes = (0..loggers).map(|_| r.u64()).collect::<Result<Vec<_>, _>>().map_err(bad)?;
    if !r.is_empty() || sequence % 2 != slot {
        return Err("invalid persistent vector fields".into());
    }
    Ok((flavor, PersistentVector { sequence, generation, durable_len_bytes }))
}

/// The current record of a persistent vector file: the valid slot with the larger sequence. A
/// slot that does not decode is a write torn by power loss (or damage); the file is an error
/// only when neither slot is valid.
pub fn decode_persistent_vector_file(bytes: &[u8]) -> Result<(Flavor, PersistentVector), String> {
    let slot_bytes = PERSISTENT_VECTOR_SLOT_BYTES as usize;
    let first = decode_persistent_vector_slot(0, bytes);
    let second = match bytes.get(slot_bytes..) {
        Some(rest) if !rest.is_empty() => decode_persistent_vector_slot(1, rest),
        _ => Err("slot 1 was never written".into()),
    };
    match (first, second) {
        (Ok(a), Ok(b)) => Ok(if b.1.sequence > a.1.sequence { b } else { a }),
        (Ok(a), Err(_)) => Ok(a),
        (Err(_), Ok(b)) => Ok(b),
        (Err(a), Err(b)) => Err(format!("no valid slot (slot 0: {a}; slot 1: {b})")),
    }
}

/// The dependency information of a logged transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deps {
    /// Serial logging: the LSN order is the recovery order.
    None,
    /// Taurus's predecessor lists (§4.1.2).
    Lists {
        /// RAW predecessor ids.
        raw: Vec<u64>,
        /// WAW predecessor ids.
        waw: Vec<u64>,
        /// Whether a write met no `last_writer` (command replay orders such a transaction after
        /// every earlier one: it may fill a key another one found missing).
        fresh_writes: bool,
    },
    /// Compressed (§6.6): the predecessor vector the transaction committed with (its RAW
    /// predecessors' vectors and its own address), and the largest WAW predecessor address per
    /// logger.
    Vectors {
        /// Predecessor vector.
        pv: Vec<u64>,
        /// WAW vector.
        waw: Vec<u64>,
    },
}

/// Appends the payload of a transaction record: `deps`, then the REDO data `redo` already
/// encoded as a command-log entry. Returns the bytes of dependency information.
pub fn encode_txn(deps: &Deps, redo: &[u8], out: &mut Vec<u8>) -> usize {
    out.push(KIND_TXN);
    let start = out.len();
    match deps {
        Deps::None => out.push(DEPS_NONE),
        Deps::Lists { raw, waw, fresh_writes } => {
            out.push(DEPS_LISTS);
            for list in [raw, waw] {
                assert!(list.len() <= PREDECESSORS_MAX, "{} predecessors", list.len());
                out.extend_from_slice(&(list.len() as u32).to_le_bytes());
                list.iter().for_each(|id| out.extend_from_slice(&id.to_le_bytes()));
            }
            out.push(u8::from(*fresh_writes));
        }
        Deps::Vectors { pv, waw } => {
            assert!(pv.len() == waw.len() && pv.len() <= LOGGERS_MAX);
            out.push(DEPS_VECTORS);
            out.extend_from_slice(&(pv.len() as u16).to_le_bytes());
            pv.iter().chain(waw.iter()).for_each(|a| out.extend_from_slice(&a.to_le_bytes()));
        }
    }
    let deps_len = out.len() - start;
    out.extend_from_slice(redo);
    deps_len
}

/// Appends the payload of an end record for a file settled to `len_bytes` (the end record's
/// own offset).
pub fn encode_end(len_bytes: u64, out: &mut Vec<u8>) {
    out.push(KIND_END);
    out.extend_from_slice(&len_bytes.to_le_bytes());
}

/// A decoded record payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// A transaction.
    Txn {
        /// Its dependencies.
        deps: Deps,
        /// Its REDO data.
        entry: CommandEntry,
    },
    /// The end of a settled file, at this offset.
    End(u64),
}

/// Decodes a record payload (the whole payload must be one record).
pub fn decode_record(payload: &[u8]) -> Result<Record, DecodeError> {
    let mut r = Reader::new(payload);
    let record = match r.u8()? {
        KIND_END => Record::End(r.u64()?),
        KIND_TXN => {
            let deps = match r.u8()? {
                DEPS_NONE => Deps::None,
                DEPS_LISTS => {
                    let raw = id_list(&mut r)?;
                    let waw = id_list(&mut r)?;
                    let fresh_writes = match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return Err(DecodeError { offset: r.offset(), reason: "fresh-writes flag is not 0 or 1" }),
                    };
                    Deps::Lists { raw, waw, fresh_writes }
                }
                DEPS_VECTORS => {
                    let n = usize::from(r.u16()?);
                    if n > LOGGERS_MAX {
                        return Err(DecodeError { offset: r.offset(), reason: "vector longer than the logger limit" });
                    }
                    let pv = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
                    let waw = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
                    Deps::Vectors { pv, waw }
                }
                _ => return Err(DecodeError { offset: r.offset(), reason: "unknown dependency form" }),
            };
            Record::Txn { deps, entry: command::decode(&mut r)? }
        }
        _ => return Err(DecodeError { offset: 0, reason: "unknown record kind" }),
    };
    if !r.is_empty() {
        return Err(DecodeError { offset: r.offset(), reason: "trailing bytes after the record" });
    }
    Ok(record)
}

fn id_list(r: &mut Reader<'_>) -> Result<Vec<u64>, DecodeError> {
    let count = r.u32()? as usize;
    if count > PREDECESSORS_MAX {
        return Err(DecodeError { offset: r.offset(), reason: "more predecessors than the limit" });
    }
    (0..count).map(|_| r.u64()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::CommitView;
    use crate::txn::Tid;

    #[test]
    fn headers_names_and_records_round_trip() {
        let header = StreamHeader { flavor: Flavor::TaurusCmd, logger: 2, loggers: 3, generation: 7, base: 9000 };
        let bytes = encode_header(&header);
        assert_eq!(decode_header(&bytes).unwrap(), (header, bytes.len()));
        assert!(decode_header(&bytes[..bytes.len() - 1]).is_err());
        let name = log_name(Flavor::TaurusCmd, 2, 7);
        assert_eq!(parse_log_name(Path::new(&name)), Some((true, 2, 7)));
        let name = segment_name(Flavor::TaurusCmd, 2, 7, 9000);
        assert_eq!(parse_segment_name(Path::new(&name)), Some((true, 2, 7, 9000)));
        assert_eq!(parse_segment_name(Path::new("taurus.2.7.0.log")), None);
        assert_eq!(parse_segment_name(Path::new("taurus.2.7.09.log")), None);
        // A version 2 header (no base) reads as base 0.
        let mut v2 = Vec::new();
        v2.extend_from_slice(MAGIC);
        v2.extend_from_slice(&FORMAT_VERSION_UNSEGMENTED.to_le_bytes());
        v2.push(Flavor::TaurusData.code());
        [1u32, 2].iter().for_each(|v| v2.extend_from_slice(&v.to_le_bytes()));
        v2.extend_from_slice(&5u64.to_le_bytes());
        let mut block = Vec::new();
        frame::encode_block(&v2, &mut block);
        let old = StreamHeader { flavor: Flavor::TaurusData, logger: 1, loggers: 2, generation: 5, base: 0 };
        assert_eq!(decode_header(&block).unwrap().0, old);
        assert_eq!(parse_log_name(Path::new("serial.0.3.log")), Some((false, 0, 3)));
        assert_eq!(parse_log_name(Path::new("data.log")), None);
        let view =
            CommitView { tid: Tid::new(3, 1), commit_seq: 9, writes: &[], read_last_writers: &[], invocation: None };
        let mut redo = Vec::new();
        command::encode(&view, &mut redo);
        for deps in [
            Deps::None,
            Deps::Lists { raw: vec![txn_id(1, 40), txn_id(0, 90)], waw: vec![txn_id(2, 17)], fresh_writes: true },
            Deps::Vectors { pv: vec![4, 5], waw: vec![0, 5] },
        ] {
            let mut out = Vec::new();
            encode_txn(&deps, &redo, &mut out);
            let Record::Txn { deps: back, entry } = decode_record(&out).unwrap() else { panic!("not a txn") };
            assert_eq!((back, entry.seq(), entry.epoch()), (deps, 9, 3));
            for cut in 0..out.len() {
                assert!(decode_record(&out[..cut]).is_err(), "cut at {cut}");
            }
        }
        assert_eq!(split_id(txn_id(5, 1234)), (5, 1234));
        let mut end = Vec::new();
        encode_end(4242, &mut end);
        assert_eq!(decode_record(&end).unwrap(), Record::End(4242));
    }

    #[test]
    fn the_persistent_vector_file_keeps_the_newest_valid_slot() {
        let slot = PERSISTENT_VECTOR_SLOT_BYTES as usize;
        let pv =
            |sequence, lens: &[u64]| PersistentVector { sequence, generation: 3, durable_len_bytes: lens.to_vec() };
        let mut file = encode_persistent_vector_file(Flavor::TaurusData, &pv(0, &[0, 0]));
        assert_eq!(file.len(), slot);
        assert_eq!(decode_persistent_vector_file(&file).unwrap(), (Flavor::TaurusData, pv(0, &[0, 0])));
        // Round 1 goes to slot 1, round 2 back to slot 0.
        file.extend_from_slice(&encode_persistent_vector(Flavor::TaurusData, &pv(1, &[100, 200])));
        assert_eq!(decode_persistent_vector_file(&file).unwrap().1, pv(1, &[100, 200]));
        let round_2 = encode_persistent_vector(Flavor::TaurusData, &pv(2, &[150, 200]));
        file[..round_2.len()].copy_from_slice(&round_2);
        assert_eq!(decode_persistent_vector_file(&file).unwrap().1, pv(2, &[150, 200]));
        // A torn slot leaves the other one.
        let mut torn = file.clone();
        torn[20] ^= 1;
        assert_eq!(decode_persistent_vector_file(&torn).unwrap().1, pv(1, &[100, 200]));
        // A copy of slot 0 misdirected into slot 1 does not count as slot 1.
        let mut misdirected = file.clone();
        misdirected.copy_within(0..round_2.len(), slot);
        assert!(decode_persistent_vector_slot(1, &misdirected[slot..]).is_err());
        assert_eq!(decode_persistent_vector_file(&misdirected).unwrap().1, pv(2, &[150, 200]));
        // Neither slot valid: an error.
        torn[slot + 20] ^= 1;
        assert!(decode_persistent_vector_file(&torn).is_err());
        assert!(decode_persistent_vector_file(&[]).is_err());
    }
}
