//! Byte layouts of checkpoint data files and the checkpoint manifest. Every block is framed
//! ([`crate::durability::frame`]); integers are little-endian. `docs/FORMAT.md` has the same
//! tables.
//!
//! **Data file** `checkpoint.<id>.<dir>.<file>` (in log directory `<dir>`):
//!
//! ```text
//! block 0 (header):  [8] "LZCKPTDF"  u32 version  u64 checkpoint_id  u32 dir  u32 file
//! block 1.. (data):  u32 table_id  u32 record_count
//!                    record_count times: u16 key_len, key, u64 tid, row (codec.rs)
//! ```
//!
//! A data block holds a contiguous key range of one table (SiloR §4: "each block contains a
//! contiguous range of records"); consecutive blocks go to the checkpointer's files round-robin.
//!
//! **Manifest** `checkpoint` (in the first log directory, written atomically):
//!
//! ```text
//! one block:  [8] "LZCKPTMF"  u32 version  u64 checkpoint_id  u64 e_l  u64 e_h
//!             u32 table_count, table_count times: u32 table_id, u16 name_len, name, u64 records
//!             u32 file_count,  file_count times:  u32 dir, u32 file, u64 len_bytes, u64 records
//! ```
//!
//! The manifest is what installs a checkpoint: files without a manifest naming them are debris of
//! an unfinished checkpoint. Every file it names was synced before it was written, so recovery
//! treats any damage in them, and any length other than `len_bytes`, as corruption.

use crate::durability::codec::{DecodeError, Reader, encode_row};
use crate::durability::frame;
use crate::storage::key::KEY_SIZE_MAX_BYTES;
use crate::storage::{Columns, Key, Row, TableId};
use crate::txn::Tid;

/// Name of the manifest (in the first log directory).
pub const MANIFEST_FILE: &str = "checkpoint";
/// Prefix of data file names: `checkpoint.<id>.<dir>.<file>`.
pub const DATA_PREFIX: &str = "checkpoint.";
/// Version of the checkpoint layouts.
pub const FORMAT_VERSION: u32 = 1;
/// The most files one checkpoint may have.
pub const FILES_MAX: usize = 4096;
/// The largest manifest read, in bytes.
pub const MANIFEST_SIZE_MAX_BYTES: u64 = 16 << 20;
/// The most records one data block may claim (a block is at most 64 MiB, a record ≥ 12 bytes).
pub const BLOCK_RECORDS_MAX: u32 = 8 << 20;

const DATA_MAGIC: &[u8; 8] = b"LZCKPTDF";
const MANIFEST_MAGIC: &[u8; 8] = b"LZCKPTMF";

/// A malformed checkpoint file, with the reason.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointFormatError {
    /// The framing failed.
    #[error("{0}")]
    Frame(#[from] frame::FrameError),
    /// The payload failed to decode.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// Wrong magic or version, or a value out of range.
    #[error("{0}")]
    Invalid(String),
}

/// The header of a data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// The checkpoint the file belongs to.
    pub checkpoint_id: u64,
    /// Index of the log directory (checkpointer) that wrote it.
    pub dir: u32,
    /// Index of the file among the checkpointer's files.
    pub file: u32,
}

/// One file named by a manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestFile {
    /// Index of the log directory holding it.
    pub dir: u32,
    /// Index among that directory's files.
    pub file: u32,
    /// Its length when synced.
    pub len_bytes: u64,
    /// Records it holds.
    pub records: u64,
}

/// The manifest of an installed checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Increases with each checkpoint.
    pub checkpoint_id: u64,
    /// The epoch the checkpoint started in: it holds no record of an epoch ≥ `e_l`, and the log
    /// from `e_l` on must be replayed over it.
    pub e_l: u64,
    /// The largest epoch whose updates the checkpoint may reflect; installed once `e_h ≤ pepoch`.
    pub e_h: u64,
    /// The tables the checkpoint covers: id, name, and records it holds of each (recovery sizes
    /// the hash indexes from it before loading).
    pub tables: Vec<(TableId, String, u64)>,
    /// The data files.
    pub files: Vec<ManifestFile>,
}

/// The name of a data file.
pub fn data_file_name(checkpoint_id: u64, dir: u32, file: u32) -> String {
    format!("{DATA_PREFIX}{checkpoint_id}.{dir}.{file}")
}

/// The checkpoint id of a data file name, or `None` if the name is not one.
pub fn data_file_checkpoint_id(name: &str) -> Option<u64> {
    let rest = name.strip_prefix(DATA_PREFIX)?;
    let mut parts = rest.split('.');
    let id = parts.next()?.parse().ok()?;
    let (_dir, _file): (u32, u32) = (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    parts.next().is_none().then_some(id)
}

fn check_magic(r: &mut Reader<'_>, magic: &[u8; 8], what: &str) -> Result<(), CheckpointFormatError> {
    if r.take(8)? != magic {
        return Err(CheckpointFormatError::Invalid(format!("not a checkpoint {what} (wrong magic)")));
    }
    let version = r.u32()?;
    if version != FORMAT_VERSION {
        let reason = format!("checkpoint {what} format version {version}, this build reads {FORMAT_VERSION}");
        return Err(CheckpointFormatError::Invalid(reason));
    }
    Ok(())
}

/// Encodes a data file's header block.
pub fn encode_data_header(header: DataHeader) -> Vec<u8> {
    let mut payload = Vec::with_capacity(32);
    payload.extend_from_slice(DATA_MAGIC);
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    payload.extend_from_slice(&header.checkpoint_id.to_le_bytes());
    payload.extend_from_slice(&header.dir.to_le_bytes());
    payload.extend_from_slice(&header.file.to_le_bytes());
    let mut out = Vec::new();
    frame::encode_block(&payload, &mut out);
    out
}

/// Decodes the header block at the start of a data file; returns it and its size in bytes.
pub fn decode_data_header(bytes: &[u8]) -> Result<(DataHeader, usize), CheckpointFormatError> {
    let (payload, size) = frame::decode_block(bytes)?;
    let mut r = Reader::new(payload);
    check_magic(&mut r, DATA_MAGIC, "data file")?;
    let header = DataHeader { checkpoint_id: r.u64()?, dir: r.u32()?, file: r.u32()? };
    if !r.is_empty() {
        return Err(CheckpointFormatError::Invalid("trailing bytes in the checkpoint file header".into()));
    }
    Ok((header, size))
}

/// A position in a [`BlockBuilder`] ([`BlockBuilder::mark`]).
#[derive(Clone, Copy, Debug)]
pub struct BlockMark {
    len_bytes: usize,
    records: u32,
}

/// Builds the payload of one data block: records of one table, in key order.
pub struct BlockBuilder {
    payload: Vec<u8>,
    table: TableId,
    records: u32,
}

impl BlockBuilder {
    /// An empty block for `table`, with room for `capacity_bytes`.
    pub fn new(table: TableId, capacity_bytes: usize) -> BlockBuilder {
        let mut payload = Vec::with_capacity(capacity_bytes + 4096);
        payload.extend_from_slice(&table.to_le_bytes());
        payload.extend_from_slice(&0u32.to_le_bytes());
        BlockBuilder { payload, table, records: 0 }
    }

    /// Appends one record.
    pub fn push<C: Columns + ?Sized>(&mut self, key: &[u8], tid: Tid, row: &C) {
        assert!(key.len() <= KEY_SIZE_MAX_BYTES, "key of {} bytes", key.len());
        assert!(self.records < BLOCK_RECORDS_MAX, "block record limit");
        self.payload.extend_from_slice(&(key.len() as u16).to_le_bytes());
        self.payload.extend_from_slice(key);
        self.payload.extend_from_slice(&tid.to_u64().to_le_bytes());
        encode_row(row, &mut self.payload);
        self.records += 1;
    }

    /// Where the block ends now, for [`BlockBuilder::rewind`].
    pub fn mark(&self) -> BlockMark {
        BlockMark { len_bytes: self.payload.len(), records: self.records }
    }

    /// Drops every record pushed after `mark` was taken (a record read again because a writer
    /// changed it while it was being pushed).
    pub fn rewind(&mut self, mark: BlockMark) {
        assert!(mark.len_bytes >= 8 && mark.len_bytes <= self.payload.len() && mark.records <= self.records);
        self.payload.truncate(mark.len_bytes);
        self.records = mark.records;
    }

    /// Payload bytes so far.
    pub fn size_bytes(&self) -> usize {
        self.payload.len()
    }

    /// Records so far.
    pub fn records(&self) -> u32 {
        self.records
    }

    /// Frames the block into `out` and empties the builder for the same table.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        self.payload[4..8].copy_from_slice(&self.records.to_le_bytes());
        frame::encode_block(&self.payload, out);
        self.payload.truncate(8);
        self.records = 0;
        self.payload[0..4].copy_from_slice(&self.table.to_le_bytes());
    }
}

/// One record decoded from a data block.
pub struct CheckpointRecord {
    /// The encoded primary key.
    pub key: Key,
    /// The TID it had when checkpointed.
    pub tid: Tid,
    /// The row.
    pub row: Row,
}

/// Decodes a data block's payload: its table and a reader positioned at its records, with their
/// count.
pub fn decode_block_head(payload: &[u8]) -> Result<(TableId, u32, Reader<'_>), CheckpointFormatError> {
    let mut r = Reader::new(payload);
    let table = r.u32()?;
    let count = r.u32()?;
    if count > BLOCK_RECORDS_MAX {
        return Err(CheckpointFormatError::Invalid(format!("block claims {count} records, above the limit")));
    }
    Ok((table, count, r))
}

/// Decodes the next record of a data block.
pub fn decode_record(r: &mut Reader<'_>) -> Result<CheckpointRecord, CheckpointFormatError> {
    let key_len = usize::from(r.u16()?);
    if key_len > KEY_SIZE_MAX_BYTES {
        return Err(CheckpointFormatError::Invalid(format!("key of {key_len} bytes, above the limit")));
    }
    let key = Key::from(r.take(key_len)?);
    let tid = Tid::from_u64(r.u64()?);
    let row = r.row()?;
    Ok(CheckpointRecord { key, tid, row })
}

/// Encodes the manifest.
pub fn encode_manifest(m: &Manifest) -> Vec<u8> {
    assert!(m.files.len() <= FILES_MAX && m.e_l <= m.e_h, "manifest out of range");
    let mut p = Vec::new();
    p.extend_from_slice(MANIFEST_MAGIC);
    p.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    for v in [m.checkpoint_id, m.e_l, m.e_h] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p.extend_from_slice(&(m.tables.len() as u32).to_le_bytes());
    for (id, name, records) in &m.tables {
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&(name.len() as u16).to_le_bytes());
        p.extend_from_slice(name.as_bytes());
        p.extend_from_slice(&records.to_le_bytes());
    }
    p.extend_from_slice(&(m.files.len() as u32).to_le_bytes());
    for f in &m.files {
        p.extend_from_slice(&f.dir.to_le_bytes());
        p.extend_from_slice(&f.file.to_le_bytes());
        p.extend_from_slice(&f.len_bytes.to_le_bytes());
        p.extend_from_slice(&f.records.to_le_bytes());
    }
    let mut out = Vec::new();
    frame::encode_block(&p, &mut out);
    out
}

/// Decodes the manifest.
pub fn decode_manifest(bytes: &[u8]) -> Result<Manifest, CheckpointFormatError> {
    let (payload, size) = frame::decode_block(bytes)?;
    if size != bytes.len() {
        return Err(CheckpointFormatError::Invalid("trailing bytes after the manifest block".into()));
    }
    let mut r = Reader::new(payload);
    check_magic(&mut r, MANIFEST_MAGIC, "manifest")?;
    let (checkpoint_id, e_l, e_h) = (r.u64()?, r.u64()?, r.u64()?);
    if e_l > e_h {
        return Err(CheckpointFormatError::Invalid(format!("e_l {e_l} above e_h {e_h}")));
    }
    let table_count = r.u32()? as usize;
    if table_count > crate::storage::table::TABLES_MAX {
        return Err(CheckpointFormatError::Invalid(format!("{table_count} tables, above the limit")));
    }
    let mut tables = Vec::with_capacity(table_count);
    for _ in 0..table_count {
        let id = r.u32()?;
        let len = usize::from(r.u16()?);
        let name = std::str::from_utf8(r.take(len)?)
            .map_err(|_| CheckpointFormatError::Invalid("table name is not UTF-8".into()))?;
        let records = r.u64()?;
        tables.push((id, name.to_string(), records));
    }
    let file_count = r.u32()? as usize;
    if file_count > FILES_MAX {
        return Err(CheckpointFormatError::Invalid(format!("{file_count} files, above the limit")));
    }
    let mut files = Vec::with_capacity(file_count);
    for _ in 0..file_count {
        files.push(ManifestFile { dir: r.u32()?, file: r.u32()?, len_bytes: r.u64()?, records: r.u64()? });
    }
    if !r.is_empty() {
        return Err(CheckpointFormatError::Invalid("trailing bytes in the manifest payload".into()));
    }
    Ok(Manifest { checkpoint_id, e_l, e_h, tables, files })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Value;

    #[test]
    fn manifest_round_trips_and_every_cut_is_an_error() {
        let m = Manifest {
            checkpoint_id: 7,
            e_l: 10,
            e_h: 14,
            tables: vec![(0, "warehouse".into(), 1), (3, "order_line".into(), 300_000)],
            files: vec![ManifestFile { dir: 0, file: 1, len_bytes: 4096, records: 12 }],
        };
        let bytes = encode_manifest(&m);
        assert_eq!(decode_manifest(&bytes).unwrap(), m);
        for cut in 0..bytes.len() {
            assert!(decode_manifest(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn blocks_round_trip() {
        let mut b = BlockBuilder::new(5, 1024);
        let row = vec![Value::Int(1), Value::text("x")];
        b.push(b"k1", Tid::new(3, 1), &row);
        b.push(b"k2", Tid::new(4, 2), &row);
        let mut out = Vec::new();
        b.finish_into(&mut out);
        assert_eq!(b.records(), 0);
        let (payload, size) = frame::decode_block(&out).unwrap();
        assert_eq!(size, out.len());
        let (table, count, mut r) = decode_block_head(payload).unwrap();
        assert_eq!((table, count), (5, 2));
        let first = decode_record(&mut r).unwrap();
        assert_eq!((first.key.as_bytes(), first.tid), (&b"k1"[..], Tid::new(3, 1)));
        let second = decode_record(&mut r).unwrap();
        assert_eq!(second.row, row[..]);
        assert!(r.is_empty());
    }

    #[test]
    fn a_rewound_block_holds_only_the_records_before_the_mark() {
        let mut b = BlockBuilder::new(5, 1024);
        let row = vec![Value::Int(1), Value::text("x")];
        b.push(b"k1", Tid::new(3, 1), &row);
        let mark = b.mark();
        let size_bytes = b.size_bytes();
        b.push(b"k2", Tid::new(4, 2), &row);
        b.push(b"k3", Tid::new(4, 3), &row);
        b.rewind(mark);
        assert_eq!((b.records(), b.size_bytes()), (1, size_bytes));
        b.push(b"k4", Tid::new(5, 4), &row);
        let mut out = Vec::new();
        b.finish_into(&mut out);
        let (payload, _) = frame::decode_block(&out).unwrap();
        let (_, count, mut r) = decode_block_head(payload).unwrap();
        assert_eq!(count, 2);
        let keys: Vec<Vec<u8>> = (0..2).map(|_| decode_record(&mut r).unwrap().key.as_bytes().to_vec()).collect();
        assert_eq!(keys, [b"k1".to_vec(), b"k4".to_vec()]);
        assert!(r.is_empty());
    }

    #[test]
    fn data_file_names_parse() {
        let name = data_file_name(12, 1, 3);
        assert_eq!(data_file_checkpoint_id(&name), Some(12));
        assert_eq!(data_file_checkpoint_id("checkpoint"), None);
        assert_eq!(data_file_checkpoint_id("checkpoint.12.1.3.tmp"), None);
        assert_eq!(data_file_checkpoint_id("old_data.3.1"), None);
    }
}
