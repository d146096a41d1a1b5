//! Log file names and headers, the `pepoch` file and the `catalog` file of the value scheme.
//! Byte layouts are in `docs/FORMAT.md`; every file starts with (or is) one framed block
//! ([`crate::durability::frame`]) whose payload begins with an 8-byte magic and a u32 version.

use crate::durability::codec::{DecodeError, Reader};
use crate::durability::frame;
use std::path::Path;

/// The current log file of a logger.
pub const CURRENT_LOG: &str = "data.log";
/// Prefix of rotated log files: `old_data.<max epoch>.<file seq>`.
pub const OLD_LOG_PREFIX: &str = "old_data.";
/// The persistent-epoch marker (in the first log directory).
pub const PEPOCH_FILE: &str = "pepoch";
/// The DDL and procedures to rebuild before replay (in the first log directory).
pub const CATALOG_FILE: &str = "catalog";

const LOG_MAGIC: &[u8; 8] = b"LZVALLOG";
const COMMAND_LOG_MAGIC: &[u8; 8] = b"LZCMDLOG";
const PEPOCH_MAGIC: &[u8; 8] = b"LZPEPOCH";
const CATALOG_MAGIC: &[u8; 8] = b"LZCATLOG";
const END_MAGIC: &[u8; 8] = b"LZVALEND";
/// Version of the log file, pepoch and catalog layouts (2: closed log files end with an end
/// block; 3: the pepoch file names the checkpoint that log truncation made necessary).
pub const FORMAT_VERSION: u32 = 3;
/// The most loggers (log directories) a database may use.
pub const LOGGERS_MAX: usize = 64;
/// The largest pepoch or catalog file read, in bytes.
pub const MARKER_SIZE_MAX_BYTES: u64 = 64 << 20;

/// A malformed marker or header, with the reason.
#[derive(Debug, thiserror::Error)]
pub enum FileFormatError {
    /// The framing failed.
    #[error("{0}")]
    Frame(#[from] frame::FrameError),
    /// The payload failed to decode.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// Wrong magic: not this kind of file.
    #[error("not a {expected} file (wrong magic)")]
    Magic {
        /// The kind of file expected.
        expected: &'static str,
    },
    /// A version this build cannot read.
    #[error("format version {found}, this build reads version {FORMAT_VERSION}")]
    Version {
        /// The version found.
        found: u32,
    },
    /// Trailing bytes or a value out of range.
    #[error("{0}")]
    Invalid(&'static str),
}

/// The header block of a log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// What the file's entries are (the magic says it).
    pub format: EntryFormat,
    /// The logger that wrote the file.
    pub logger: u32,
    /// The file's sequence number within its logger (increases with each new file).
    pub file_seq: u64,
}

/// What the entries of a log file are: SiloR's after-images (`value`), or PACMAN's procedure
/// calls with ad-hoc transactions as after-images (`command`). The loggers, epochs, pepoch and
/// framing are the same; the magic of the header tells the two apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EntryFormat {
    /// Value log entries ([`crate::durability::codec`]).
    #[default]
    Value,
    /// Command log entries ([`crate::durability::command`]).
    Command,
}

impl EntryFormat {
    fn magic(self) -> &'static [u8; 8] {
        match self {
            EntryFormat::Value => LOG_MAGIC,
            EntryFormat::Command => COMMAND_LOG_MAGIC,
        }
    }
}

/// Encodes a log file's header block.
pub fn encode_log_header(header: LogHeader) -> Vec<u8> {
    let mut payload = Vec::with_capacity(28);
    payload.extend_from_slice(header.format.magic());
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.extend_from_slice(&header.logger.to_le_bytes());
    payload.extend_from_slice(&header.file_seq.to_le_bytes());
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// Decodes the header block at the start of a log file; returns it and its size in bytes.
pub fn decode_log_header(bytes: &[u8]) -> Result<(LogHeader, usize), FileFormatError> {
    let (payload, size) = frame::decode_block(bytes)?;
    let mut r = Reader::new(payload);
    let format = match r.take(8).map_err(FileFormatError::Decode)? {
        m if m == LOG_MAGIC => EntryFormat::Value,
        m if m == COMMAND_LOG_MAGIC => EntryFormat::Command,
        _ => return Err(FileFormatError::Magic { expected: "log" }),
    };
    let found = r.u32()?;
    if found != FORMAT_VERSION {
        return Err(FileFormatError::Version { found });
    }
    let header = LogHeader { format, logger: r.u32()?, file_seq: r.u64()? };
    if !r.is_empty() {
        return Err(FileFormatError::Invalid("trailing bytes in the log header"));
    }
    Ok((header, size))
}

/// Encodes the end block of a closed log file: it records the file's length before it, so that
/// recovery can tell a closed file cut at a block boundary from a whole one.
pub fn encode_end_block(body_len_bytes: u64) -> Vec<u8> {
    let mut payload = Vec::with_capacity(20);
    payload.extend_from_slice(END_MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.extend_from_slice(&body_len_bytes.to_le_bytes());
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// The length an end block's payload records, or `None` if the payload is not an end block.
pub fn decode_end_block(payload: &[u8]) -> Option<u64> {
    let mut r = Reader::new(payload);
    check_magic(&mut r, END_MAGIC, "end block").ok()?;
    let body_len_bytes = r.u64().ok()?;
    r.is_empty().then_some(body_len_bytes)
}

fn check_magic(r: &mut Reader<'_>, magic: &[u8; 8], expected: &'static str) -> Result<(), FileFormatError> {
    if r.take(8).map_err(FileFormatError::Decode)? != magic {
        return Err(FileFormatError::Magic { expected });
    }
    let found = r.u32()?;
    if found != FORMAT_VERSION {
        return Err(FileFormatError::Version { found });
    }
    Ok(())
}

/// A logger's durable position as of a pepoch: every record of epoch ≤ pepoch that this logger
/// wrote lies in files with a smaller `file_seq`, or in file `file_seq` before `durable_len_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurablePosition {
    /// The logger.
    pub logger: u32,
    /// The file being written at the time.
    pub file_seq: u64,
    /// Bytes of that file that were synced.
    pub durable_len_bytes: u64,
}

/// The contents of the `pepoch` file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pepoch {
    /// The persistent epoch: every transaction of an epoch ≤ this is durable.
    pub epoch: u64,
    /// Each logger's durable position.
    pub positions: Vec<DurablePosition>,
    /// Void epoch ranges (inclusive): records of these epochs were logged but never became
    /// persistent before a crash; recovery restarted above them, so they must never be replayed,
    /// even once `epoch` passes them.
    pub holes: Vec<(u64, u64)>,
    /// 0, or the `e_l` of a checkpoint for which log files were removed: recovery then needs an
    /// installed checkpoint manifest with an `e_l` at least this (the files it replaces are
    /// gone), and names the manifest when it is missing instead of replaying a log with a hole.
    pub checkpoint_e_l: u64,
}

/// The most void epoch ranges a `pepoch` file may hold (one is added per crash recovery).
pub const HOLES_MAX: usize = 4096;

/// Encodes the `pepoch` file.
pub fn encode_pepoch(pepoch: &Pepoch) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(PEPOCH_MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.extend_from_slice(&pepoch.epoch.to_le_bytes());
    payload.extend_from_slice(&(pepoch.positions.len() as u32).to_le_bytes());
    for p in &pepoch.positions {
        payload.extend_from_slice(&p.logger.to_le_bytes());
        payload.extend_from_slice(&p.file_seq.to_le_bytes());
        payload.extend_from_slice(&p.durable_len_bytes.to_le_bytes());
    }
    payload.extend_from_slice(&(pepoch.holes.len() as u32).to_le_bytes());
    for (first, last) in &pepoch.holes {
        payload.extend_from_slice(&first.to_le_bytes());
        payload.extend_from_slice(&last.to_le_bytes());
    }
    payload.extend_from_slice(&pepoch.checkpoint_e_l.to_le_bytes());
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// Decodes the `pepoch` file.
pub fn decode_pepoch(bytes: &[u8]) -> Result<Pepoch, FileFormatError> {
    let (payload, size) = frame::decode_block(bytes)?;
    if size != bytes.len() {
        return Err(FileFormatError::Invalid("trailing bytes after the pepoch block"));
    }
    let mut r = Reader::new(payload);
    check_magic(&mut r, PEPOCH_MAGIC, "pepoch")?;
    let epoch = r.u64()?;
    let count = r.u32()? as usize;
    if count > LOGGERS_MAX {
        return Err(FileFormatError::Invalid("more loggers than the limit"));
    }
    let mut positions = Vec::with_capacity(count);
    for _ in 0..count {
        positions.push(DurablePosition { logger: r.u32()?, file_seq: r.u64()?, durable_len_bytes: r.u64()? });
    }
    let hole_count = r.u32()? as usize;
    if hole_count > HOLES_MAX {
        return Err(FileFormatError::Invalid("more void epoch ranges than the limit"));
    }
    let mut holes = Vec::with_capacity(hole_count);
    for _ in 0..hole_count {
        holes.push((r.u64()?, r.u64()?));
    }
    let checkpoint_e_l = r.u64()?;
    if !r.is_empty() {
        return Err(FileFormatError::Invalid("trailing bytes in the pepoch payload"));
    }
    Ok(Pepoch { epoch, positions, holes, checkpoint_e_l })
}

/// Encodes the `catalog` file: the modules (file name, source), in the order they were loaded.
pub fn encode_catalog(modules: &[(String, String)]) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(CATALOG_MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.extend_from_slice(&(modules.len() as u32).to_le_bytes());
    for (name, source) in modules {
        for text in [name, source] {
            payload.extend_from_slice(&(text.len() as u32).to_le_bytes());
            payload.extend_from_slice(text.as_bytes());
        }
    }
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// Decodes the `catalog` file.
pub fn decode_catalog(bytes: &[u8]) -> Result<Vec<(String, String)>, FileFormatError> {
    let (payload, size) = frame::decode_block(bytes)?;
    if size != bytes.len() {
        return Err(FileFormatError::Invalid("trailing bytes after the catalog block"));
    }
    let mut r = Reader::new(payload);
    check_magic(&mut r, CATALOG_MAGIC, "catalog")?;
    let count = r.u32()?;
    let mut modules = Vec::new();
    for _ in 0..count {
        let mut text = || -> Result<String, FileFormatError> {
            let len = r.u32()? as usize;
            String::from_utf8(r.take(len)?.to_vec()).map_err(|_| FileFormatError::Invalid("module text is not UTF-8"))
        };
        let name = text()?;
        let source = text()?;
        modules.push((name, source));
    }
    if !r.is_empty() {
        return Err(FileFormatError::Invalid("trailing bytes in the catalog payload"));
    }
    Ok(modules)
}

/// The name of a rotated log file.
pub fn old_log_name(max_epoch: u64, file_seq: u64) -> String {
    format!("{OLD_LOG_PREFIX}{max_epoch}.{file_seq}")
}

/// The (max epoch, file seq) of a rotated log file's name, or `None` if it is not one.
pub fn parse_old_log_name(name: &Path) -> Option<(u64, u64)> {
    let rest = name.to_str()?.strip_prefix(OLD_LOG_PREFIX)?;
    let (max_epoch, seq) = rest.split_once('.')?;
    Some((max_epoch.parse().ok()?, seq.parse().ok()?))
}

/// Whether a directory entry is a log file of this scheme.
pub fn is_log_file(name: &Path) -> bool {
    name.to_str().is_some_and(|n| n == CURRENT_LOG || n.starts_with(OLD_LOG_PREFIX) && !n.ends_with(".tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_reject_damage() {
        let p = Pepoch {
            epoch: 42,
            positions: vec![DurablePosition { logger: 0, file_seq: 3, durable_len_bytes: 4096 }],
            holes: vec![(10, 12)],
            checkpoint_e_l: 7,
        };
        let bytes = encode_pepoch(&p);
        assert_eq!(decode_pepoch(&bytes).unwrap(), p);
        for cut in 0..bytes.len() {
            assert!(decode_pepoch(&bytes[..cut]).is_err());
        }
        let modules = vec![("a.proc".to_string(), "table t (a int not null, primary key (a));".to_string())];
        assert_eq!(decode_catalog(&encode_catalog(&modules)).unwrap(), modules);
        let h = LogHeader { format: EntryFormat::Command, logger: 1, file_seq: 9 };
        let bytes = encode_log_header(h);
        assert_eq!(decode_log_header(&bytes).unwrap(), (h, bytes.len()));
        assert!(matches!(decode_pepoch(&bytes), Err(FileFormatError::Magic { .. })));
        assert_eq!(parse_old_log_name(Path::new(&old_log_name(17, 4))), Some((17, 4)));
        assert_eq!(parse_old_log_name(Path::new("data.log")), None);
        assert_eq!(parse_old_log_name(Path::new("old_data.17.4.tmp")), None);
        let end = encode_end_block(4096);
        let (payload, size) = frame::decode_block(&end).unwrap();
        assert_eq!((decode_end_block(payload), size), (Some(4096), end.len()));
        assert_eq!(decode_end_block(&payload[..payload.len() - 1]), None);
        assert_eq!(decode_end_block(b"LZVALLOG and more bytes"), None);
    }
}
