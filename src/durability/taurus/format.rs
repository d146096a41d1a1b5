//! Files and records of the stream schemes (`serial-data`, `serial-cmd`, `taurus-data`,
//! `taurus-cmd`). `docs/FORMAT.md` has the same tables.
//!
//! **Log file** `<prefix>.<logger>.<generation>.log` (`prefix` is `serial` or `taurus`), in the
//! log directory `logger % directories`. It starts with a header block and then holds one framed
//! block ([`crate::durability::frame`]) per record. A record's *address* is the file offset just
//! past its block: a transaction's id is `logger << 56 | address` (Taurus §4.1.2: "the address of
//! a transaction in a log file concatenated with the logger ID").
//!
//! Header block payload (version 1):
//!
//! ```text
//! 8   magic        "LZSTREAM"
//! u32 version      1
//! u8  flavor       1 = serial-data, 2 = serial-cmd, 3 = taurus-data, 4 = taurus-cmd
//! u32 logger       this file's logger
//! u32 loggers      loggers of the generation
//! u64 generation   incremented by every recovery: a file of an older generation is never
//!                  appended to again
//! ```
//!
//! **Synced-length file** `<log file name>.synced`, beside each log file: one framed block,
//! rewritten in place (not synced) after every flush of the log:
//!
//! ```text
//! 8   magic              "LZSYNCED"
//! u32 version            1
//! u64 synced_len_bytes   the log file was synced up to here
//! ```
//!
//! It is a lower bound on the log's synced length (a lost or torn rewrite leaves an older
//! value or none): a log shorter than it, or damaged before it, was cut or corrupted after it
//! was synced, and recovery reports that instead of treating it as a torn tail.
//!
//! Record block payload:
//!
//! ```text
//! u8 kind          1 = transaction, 2 = sync mark
//! kind 2: u64 synced_len_bytes   every byte of the file before this offset was synced before
//!                                this mark was written (tells corruption from a torn tail)
//! kind 1: u8 deps  0 = none (serial), 1 = predecessor lists, 2 = predecessor vectors (§6.6)
//!   deps 1: u32 raw_count, raw_count × u64 RAW predecessor ids,
//!           u32 waw_count, waw_count × u64 WAW predecessor ids,
//!           u8 fresh_writes   1 if a write met no `last_writer` (an insert, or the first write
//!                             of a record since recovery), else 0
//!   deps 2: u16 n, n × u64 predecessor vector (end addresses), n × u64 WAW vector
//!   then the REDO data: a command-log entry (src/durability/command/mod.rs): kind 1 = procedure
//!   call (commit_seq, TID, procedure id, arguments), kind 2 = write set (commit_seq, value-log
//!   entry). Data flavors log every transaction as a write set. `commit_seq` is the global LSN
//!   (serial), the commit timestamp (taurus-cmd) or 0 (taurus-data).
//! ```

use crate::durability::codec::{DecodeError, Reader};
use crate::durability::command::{self, CommandEntry};
use crate::durability::frame;
use std::path::Path;

/// Version of the header and record layouts.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"LZSTREAM";
const SYNCED_MAGIC: &[u8; 8] = b"LZSYNCED";
/// Suffix of the synced-length file of a log file.
pub const SYNCED_SUFFIX: &str = ".synced";
/// Bits of a transaction id that hold the address; the logger is above them.
pub const ADDRESS_BITS: u32 = 56;
/// The most loggers a stream scheme may run.
pub const LOGGERS_MAX: usize = 64;
/// The most predecessors of one kind one record may list.
pub const PREDECESSORS_MAX: usize = 1 << 20;

const KIND_TXN: u8 = 1;
const KIND_SYNC_MARK: u8 = 2;
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
}

/// The name of a logger's file of a generation.
pub fn log_name(flavor: Flavor, logger: usize, generation: u64) -> String {
    format!("{}.{logger}.{generation}.log", flavor.prefix())
}

/// `(is_taurus, logger, generation)` of a stream log file name.
pub fn parse_log_name(name: &Path) -> Option<(bool, usize, u64)> {
    let name = name.to_str()?;
    let rest = name.strip_suffix(".log")?;
    let (taurus, rest) = match rest.split_once('.')? {
        ("taurus", rest) => (true, rest),
        ("serial", rest) => (false, rest),
        _ => return None,
    };
    let (logger, generation) = rest.split_once('.')?;
    Some((taurus, logger.parse().ok()?, generation.parse().ok()?))
}

/// Encodes a file's header block.
pub fn encode_header(header: &StreamHeader) -> Vec<u8> {
    let mut payload = Vec::with_capacity(29);
    payload.extend_from_slice(MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.push(header.flavor.code());
    payload.extend_from_slice(&header.logger.to_le_bytes());
    payload.extend_from_slice(&header.loggers.to_le_bytes());
    payload.extend_from_slice(&header.generation.to_le_bytes());
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// Decodes the header block at the start of a file; returns it and its size.
pub fn decode_header(bytes: &[u8]) -> Result<(StreamHeader, usize), String> {
    let (payload, size) = frame::decode_block(bytes).map_err(|e| e.to_string())?;
    let mut r = Reader::new(payload);
    let bad = |e: DecodeError| e.to_string();
    if r.take(8).map_err(bad)? != MAGIC {
        return Err("not a stream log file (wrong magic)".into());
    }
    let version = r.u32().map_err(bad)?;
    if version != FORMAT_VERSION {
        return Err(format!("format version {version}, this build reads version {FORMAT_VERSION}"));
    }
    let flavor = Flavor::from_code(r.u8().map_err(bad)?).ok_or("unknown flavor")?;
    let header = StreamHeader {
        flavor,
        logger: r.u32().map_err(bad)?,
        loggers: r.u32().map_err(bad)?,
        generation: r.u64().map_err(bad)?,
    };
    if !r.is_empty() || header.loggers == 0 || header.loggers as usize > LOGGERS_MAX || header.logger >= header.loggers
    {
        return Err("invalid header fields".into());
    }
    Ok((header, size))
}

/// Encodes a synced-length file.
pub fn encode_synced(synced_len_bytes: u64) -> Vec<u8> {
    let mut payload = Vec::with_capacity(20);
    payload.extend_from_slice(SYNCED_MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.extend_from_slice(&synced_len_bytes.to_le_bytes());
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// The synced length a synced-length file records, `None` if it is not a whole, valid one.
pub fn decode_synced(bytes: &[u8]) -> Option<u64> {
    let (payload, _) = frame::decode_block(bytes).ok()?;
    let mut r = Reader::new(payload);
    (r.take(8).ok()? == SYNCED_MAGIC && r.u32().ok()? == FORMAT_VERSION).then_some(())?;
    let len = r.u64().ok()?;
    r.is_empty().then_some(len)
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

/// Appends the payload of a sync mark.
pub fn encode_sync_mark(synced_len_bytes: u64, out: &mut Vec<u8>) {
    out.push(KIND_SYNC_MARK);
    out.extend_from_slice(&synced_len_bytes.to_le_bytes());
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
    /// A sync mark.
    SyncMark(u64),
}

/// Decodes a record payload (the whole payload must be one record).
pub fn decode_record(payload: &[u8]) -> Result<Record, DecodeError> {
    let mut r = Reader::new(payload);
    let record = match r.u8()? {
        KIND_SYNC_MARK => Record::SyncMark(r.u64()?),
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
        let header = StreamHeader { flavor: Flavor::TaurusCmd, logger: 2, loggers: 3, generation: 7 };
        let bytes = encode_header(&header);
        assert_eq!(decode_header(&bytes).unwrap(), (header, bytes.len()));
        assert!(decode_header(&bytes[..bytes.len() - 1]).is_err());
        let name = log_name(Flavor::TaurusCmd, 2, 7);
        assert_eq!(parse_log_name(Path::new(&name)), Some((true, 2, 7)));
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
    }
}
