//! Byte layouts of rows and of logged transactions, shared by every scheme that logs data.
//!
//! All integers are little-endian.
//!
//! **Value**: a tag byte, then the body.
//!
//! | tag | value | body |
//! |-----|-------|------|
//! | 0 | null | none |
//! | 1 | bool | 1 byte (0 or 1) |
//! | 2 | int | 8 bytes, two's complement |
//! | 3 | float | 8 bytes, IEEE 754 bits |
//! | 4 | text | u32 length, then UTF-8 bytes |
//! | 5 | bytes | u32 length, then the bytes |
//!
//! **Row**: u16 column count, then each value.
//!
//! **Transaction entry** (value logging: SiloR §3 "a committed transaction's TID plus the table,
//! key, and value information for all records modified"):
//!
//! ```text
//! u64  tid            Silo TID, status bits clear
//! u32  write_count
//! write_count times:
//!   u32  table        table id in the catalog
//!   u8   op           1 = put (after-image follows), 2 = delete, 3 = column patch
//!   u16  key_len      encoded primary key (src/storage/key.rs), at most 4096 bytes
//!   ..   key
//!   ..   row          only for op = 1
//!   ..   patch        only for op = 3
//! ```
//!
//! **Column patch** (op 3): the columns an update changed, for logs replayed in each key's write
//! order (serial and Taurus data logs). u16 `count`, then `count` times: u16 column position
//! (strictly increasing), value. Applied to the key's previous row, which replay must hold; a
//! log replayed in any order (SiloR's value log, a checkpoint window) never holds one.
//!
//! Decoding checks every length against the bytes that remain and reports the offset of the
//! first byte it could not make sense of.

use crate::storage::key::KEY_SIZE_MAX_BYTES;
use crate::storage::row::{InPlaceRow, RowWriter};
use crate::storage::{ColumnType, Columns, FixedShape, Key, Row, TableId, Value, ValueRef};
use crate::txn::Tid;

const TAG_NULL: u8 = 0;
const TAG_BOOL: u8 = 1;
const TAG_INT: u8 = 2;
const TAG_FLOAT: u8 = 3;
const TAG_TEXT: u8 = 4;
const TAG_BYTES: u8 = 5;
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_PATCH: u8 = 3;
/// A logged int or float: its tag and 8 bytes.
const FIXED_VALUE_BYTES: usize = 9;
/// The most writes one logged transaction may hold.
pub const WRITES_MAX: u32 = 1 << 20;

/// A logged write's op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOpCode {
    /// A whole after-image follows.
    Put,
    /// Nothing follows.
    Delete,
    /// A column patch follows.
    Patch,
}

/// Bytes that are not a valid encoding.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("undecodable at byte {offset}: {reason}")]
pub struct DecodeError {
    /// Offset (within the decoded buffer) of the first bad byte.
    pub offset: usize,
    /// What was wrong.
    pub reason: &'static str,
}

/// Appends the encoding of `row`.
pub fn encode_row<C: Columns + ?Sized>(row: &C, out: &mut Vec<u8>) {
    let width = row.width();
    assert!(width <= usize::from(u16::MAX), "row of {width} columns");
    out.extend_from_slice(&(width as u16).to_le_bytes());
    for value in row.columns() {
        encode_value(value, out);
    }
}

fn encode_value(value: ValueRef<'_>, out: &mut Vec<u8>) {
    match value {
        ValueRef::Null => out.push(TAG_NULL),
        ValueRef::Bool(b) => out.extend_from_slice(&[TAG_BOOL, u8::from(b)]),
        ValueRef::Int(i) => {
            out.push(TAG_INT);
            out.extend_from_slice(&i.to_le_bytes());
        }
        ValueRef::Float(f) => {
            out.push(TAG_FLOAT);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        ValueRef::Text(s) => encode_sized(TAG_TEXT, s.as_bytes(), out),
        ValueRef::Bytes(b) => encode_sized(TAG_BYTES, b, out),
    }
}

fn encode_sized(tag: u8, bytes: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(bytes.len()).unwrap_or_else(|_| panic!("value of {} bytes", bytes.len()));
    out.push(tag);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}

/// One write of a logged transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryWrite {
    /// The table.
    pub table: TableId,
    /// The encoded primary key.
    pub key: Key,
    /// What the write left.
    pub image: Image,
}

/// What a logged write left of its key.
#[derive(Clone, Debug, PartialEq)]
pub enum Image {
    /// The whole after-image.
    Put(Row),
    /// The columns an update changed; the rest are the key's previous row's.
    Patch(ColumnPatch),
    /// The key was deleted.
    Delete,
}

impl Image {
    /// The whole after-image, if the write logged one.
    pub fn row(&self) -> Option<&Row> {
        match self {
            Image::Put(row) => Some(row),
            Image::Patch(_) | Image::Delete => None,
        }
    }
}

/// The changed columns of an update, by position, in increasing order.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnPatch {
    columns: Vec<(u16, Value)>,
}

impl ColumnPatch {
    /// The changed columns.
    pub fn columns(&self) -> &[(u16, Value)] {
        &self.columns
    }

    /// The changed columns, by value (compiled replay moves them into its plan's frame).
    pub fn into_columns(self) -> Vec<(u16, Value)> {
        self.columns
    }

    /// Applies the patch to `row`: where it lies when every patched value fits there
    /// ([`InPlaceRow::apply`]; `None`), else to a copy (`Some`). An error, and `row` unchanged, if
    /// a position is past its end.
    pub fn apply_in_place(&self, row: &mut InPlaceRow) -> Result<Option<Row>, &'static str> {
        self.check_width(row.row().len())?;
        Ok(row.apply(self.columns.iter().map(|(p, v)| (usize::from(*p), v.view()))))
    }

    /// The row `base` becomes with this patch applied; an error if a position is past its end.
    pub fn apply(&self, base: &Row) -> Result<Row, &'static str> {
        self.check_width(base.len())?;
        Ok(base.with_changes(self.columns.iter().map(|(p, v)| (usize::from(*p), v.view()))))
    }

    fn check_width(&self, width: usize) -> Result<(), &'static str> {
        if self.columns.last().is_some_and(|&(position, _)| usize::from(position) >= width) {
            return Err("a column patch names a column past the row's end");
        }
        Ok(())
    }
}

impl<'a> RedoImage<'a> {
    /// The after-image whole (`Some`), or a delete (`None`).
    pub fn whole(after: Option<&'a Row>) -> RedoImage<'a> {
        after.map_or(RedoImage::Delete, RedoImage::Put)
    }
}

/// What [`encode_entry`] logs of one write.
#[derive(Clone, Copy, Debug)]
pub enum RedoImage<'a> {
    /// The after-image, whole.
    Put(&'a Row),
    /// An update whose replay will hold `before`: only the columns that differ are logged (whole,
    /// when every column differs or the row changed width).
    Patch {
        /// The row the update replaced.
        before: &'a Row,
        /// The row it installed.
        after: &'a Row,
    },
    /// A delete.
    Delete,
}

/// A logged transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Its TID.
    pub tid: Tid,
    /// Its writes.
    pub writes: Vec<EntryWrite>,
}

/// Appends a transaction entry.
pub fn encode_entry<'a>(
    tid: Tid,
    writes: impl ExactSizeIterator<Item = (TableId, &'a [u8], RedoImage<'a>)>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&tid.to_u64().to_le_bytes());
    let count = u32::try_from(writes.len()).unwrap_or(u32::MAX);
    assert!(count <= WRITES_MAX, "transaction of {} writes", writes.len());
    out.extend_from_slice(&count.to_le_bytes());
    for (table, key, image) in writes {
        assert!(key.len() <= KEY_SIZE_MAX_BYTES);
        let head = |op: u8, out: &mut Vec<u8>| {
            out.extend_from_slice(&table.to_le_bytes());
            out.push(op);
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key);
        };
        match image {
            RedoImage::Put(row) => {
                head(OP_PUT, out);
                encode_row(row, out);
            }
            RedoImage::Delete => head(OP_DELETE, out),
            RedoImage::Patch { before, after } => {
                let start = out.len();
                head(OP_PATCH, out);
                if !encode_patch(before, after, out) {
                    out.truncate(start);
                    head(OP_PUT, out);
                    encode_row(after, out);
                }
            }
        }
    }
}

/// Appends the columns of `after` that differ from `before`; `false` (and `out` partly written)
/// when a patch would not be smaller than the row: every column changed, or the width did.
fn encode_patch(before: &Row, after: &Row, out: &mut Vec<u8>) -> bool {
    if before.len() != after.len() || after.is_empty() {
        return false;
    }
    let count_at = out.len();
    out.extend_from_slice(&0u16.to_le_bytes());
    let mut count: u16 = 0;
    for (position, (old, new)) in before.iter().zip(after.iter()).enumerate() {
        if old != new {
            out.extend_from_slice(&(position as u16).to_le_bytes());
            encode_value(new, out);
            count += 1;
        }
    }
    if usize::from(count) == after.len() {
        return false;
    }
    out[count_at..count_at + 2].copy_from_slice(&count.to_le_bytes());
    true
}

/// Which value tags a column admits: its type's, and null's when it is nullable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmittedTags(u8);

impl AdmittedTags {
    /// The tags a column of type `ty` admits.
    pub fn of(ty: ColumnType, nullable: bool) -> AdmittedTags {
        let tag = match ty {
            ColumnType::Bool => TAG_BOOL,
            ColumnType::Int => TAG_INT,
            ColumnType::Float => TAG_FLOAT,
            ColumnType::Text => TAG_TEXT,
            ColumnType::Bytes => TAG_BYTES,
        };
        AdmittedTags(1 << tag | if nullable { 1 << TAG_NULL } else { 0 })
    }

    fn admits(self, tag: u8) -> bool {
        tag < 8 && self.0 & (1 << tag) != 0
    }
}

/// How a row decoded by [`Reader::row_each_typed`] fits its columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypedRow {
    /// Every value is of its column's type, or null where the column admits null.
    Fits,
    /// The row has `got` columns, not the table's count; nothing was decoded.
    Arity {
        /// The logged row's column count.
        got: usize,
    },
    /// Column `position` holds a value of type `got` (`None`: null) that it does not admit.
    Misfit {
        /// The column.
        position: usize,
        /// The value's type (`None`: null).
        got: Option<ColumnType>,
    },
}

/// The first value of `logged`, which [`Reader::row`] has checked: its tag, its body as a row
/// holds it (without a text's or bytes' length), and the bytes after it. A value that does not
/// split as checked is a bug, and panics.
#[inline]
fn split_checked_value(logged: &[u8]) -> (u8, &[u8], &[u8]) {
    let (&tag, rest) = logged.split_first().expect("a checked row holds its values");
    let (body, rest) = match tag {
        TAG_NULL => rest.split_at(0),
        TAG_BOOL => rest.split_at(1),
        TAG_INT | TAG_FLOAT => rest.split_at(8),
        TAG_TEXT | TAG_BYTES => {
            let (len, rest) = rest.split_at(4);
            rest.split_at(u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize)
        }
        other => unreachable!("tag {other} passed `Reader::row`'s check"),
    };
    (tag, body, rest)
}

/// A value of a row of a [`FixedShape`], as [`Reader::row_each_fixed`] hands it over: not a
/// [`Value`], so that the caller writes a value of one known kind per arm (a `Value` merged
/// from the two kinds went through a stack copy, written by narrow stores and read back by wide
/// loads, a failed store forward per value: `perf annotate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FixedValue {
    /// An int.
    Int(i64),
    /// A float.
    Float(f64),
}

impl From<FixedValue> for Value {
    fn from(value: FixedValue) -> Value {
        match value {
            FixedValue::Int(x) => Value::Int(x),
            FixedValue::Float(x) => Value::Float(x),
        }
    }
}

/// A cursor over bytes being decoded.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// The offset of the next byte.
    pub fn offset(&self) -> usize {
        self.at
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn fail<T>(&self, reason: &'static str) -> Result<T, DecodeError> {
        Err(DecodeError { offset: self.at, reason })
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let Some(slice) = self.bytes.get(self.at..self.at.saturating_add(n)) else {
            return self.fail("truncated");
        };
        self.at += n;
        Ok(slice)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A u8.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A row: its values checked (tags, lengths, UTF-8) in one pass over the bytes, then copied
    /// into a row in a second ([`RowWriter`]): a row's tags are the log's, and its payloads the
    /// log's bodies without their lengths, so no [`Value`] is made.
    pub fn row(&mut self) -> Result<Row, DecodeError> {
        let columns = usize::from(self.u16()?);
        let start = self.at;
        let mut payload_bytes = 0;
        for _ in 0..columns {
            let tag = self.u8()?;
            payload_bytes += self.check_body(tag)?;
        }
        let mut writer = RowWriter::new(columns, payload_bytes);
        let mut logged = &self.bytes[start..self.at];
        for _ in 0..columns {
            let (tag, payload, rest) = split_checked_value(logged);
            // SAFETY: the log's tags are the row's (`the_row_tags_are_the_logs`), and the check
            // pass above found every text UTF-8.
            unsafe { writer.push_raw(tag, payload) };
            logged = rest;
        }
        Ok(writer.finish())
    }

    /// Checks the body of a value whose tag, `tag`, has been read, moves past it, and returns
    /// the size of the value's payload in a row ([`Row`]'s layout: the body less its length).
    fn check_body(&mut self, tag: u8) -> Result<usize, DecodeError> {
        Ok(match tag {
            TAG_NULL => 0,
            TAG_BOOL => self.take(1)?.len(),
            TAG_INT | TAG_FLOAT => self.take(8)?.len(),
            TAG_TEXT => {
                let len = self.u32()? as usize;
                let start = self.at;
                std::str::from_utf8(self.take(len)?)
                    .map_err(|_| DecodeError { offset: start, reason: "text is not UTF-8" })?;
                len
            }
            TAG_BYTES => {
                let len = self.u32()? as usize;
                self.take(len)?.len()
            }
            _ => return self.fail("unknown value tag"),
        })
    }

    /// Decodes a row value by value, handing each to `put(position, value)` instead of collecting
    /// them, for a caller that knows the row's columns (compiled replay's typed binding decodes
    /// straight into its plan's frame): each value's tag is checked against what its column
    /// admits *before* the value is decoded, so a row that [`TypedRow::Fits`] needs no check of
    /// its types and nullability afterwards (the check a generic decoder leaves to
    /// `TableSchema::check_row`). A row of another column count is not decoded; a value its
    /// column does not admit stops decoding there. Always inlined: it runs once per replayed
    /// record, and its two callers' closures are a slot store each.
    #[inline(always)]
    pub fn row_each_typed(
        &mut self,
        admitted: &[AdmittedTags],
        mut put: impl FnMut(usize, Value),
    ) -> Result<TypedRow, DecodeError> {
        let columns = usize::from(self.u16()?);
        if columns != admitted.len() {
            return Ok(TypedRow::Arity { got: columns });
        }
        for (position, &admits) in admitted.iter().enumerate() {
            let tag = self.u8()?;
            if !admits.admits(tag) {
                let got = self.tag_type(tag)?;
                return Ok(TypedRow::Misfit { position, got });
            }
            self.body_to(tag, |value| put(position, value))?;
        }
        Ok(TypedRow::Fits)
    }

    /// [`Reader::row_each_typed`] for a row of `shape` (every column an int or a float, none
    /// null), decoded with one bounds check for the whole row: such a row is logged as its count
    /// and then 9 bytes per value (tag, body). Returns `false`,
    /// with the reader not moved, when the logged row is not of the shape (another count, a
    /// null, a value of another type, too few bytes); the caller then decodes it with
    /// [`Reader::row_each_typed`], which says what was wrong. Values already handed to `put`
    /// before a mismatch is found are handed again by that decode.
    #[inline(always)]
    pub fn row_each_fixed(&mut self, shape: &FixedShape, mut put: impl FnMut(usize, FixedValue)) -> bool {
        let tags = shape.tags();
        let logged_bytes = 2 + FIXED_VALUE_BYTES * tags.len();
        let Some(logged) = self.bytes.get(self.at..self.at.saturating_add(logged_bytes)) else {
            return false;
        };
        let (count, values) = logged.split_at(2);
        if usize::from(u16::from_le_bytes([count[0], count[1]])) != tags.len() {
            return false;
        }
        let (values, _) = values.as_chunks::<FIXED_VALUE_BYTES>();
        for (position, (value, &tag)) in values.iter().zip(tags).enumerate() {
            let [logged_tag, body @ ..] = *value;
            if logged_tag != tag {
                return false;
            }
            let bits = u64::from_le_bytes(body);
            // One call, so that `put` is inlined here; it writes a `Value` of one kind per arm.
            put(
                position,
                if tag == TAG_INT { FixedValue::Int(bits as i64) } else { FixedValue::Float(f64::from_bits(bits)) },
            );
        }
        self.at += logged_bytes;
        true
    }

    /// The type a value tag stands for (`None`: null).
    fn tag_type(&self, tag: u8) -> Result<Option<ColumnType>, DecodeError> {
        Ok(Some(match tag {
            TAG_NULL => return Ok(None),
            TAG_BOOL => ColumnType::Bool,
            TAG_INT => ColumnType::Int,
            TAG_FLOAT => ColumnType::Float,
            TAG_TEXT => ColumnType::Text,
            TAG_BYTES => ColumnType::Bytes,
            _ => return self.fail("unknown value tag"),
        }))
    }

    /// Decodes the body of a value whose tag, `tag`, has been read, and hands the value to `put`.
    /// Integers, most columns of most tables, are decoded inline: the call to
    /// [`Reader::value_of`] was a third of decoding an int row. `put` is called in two places, not
    /// once with the value of either path: merging the paths made each value pass through a stack
    /// slot written by narrow stores (the tag is one byte) and read back by wide loads, a
    /// store-forwarding stall per column (`perf annotate`: the largest cost of replaying
    /// 50-column rows, in both replay modes).
    #[inline(always)]
    fn body_to(&mut self, tag: u8, put: impl FnOnce(Value)) -> Result<(), DecodeError> {
        if tag == TAG_INT {
            put(Value::Int(i64::from_le_bytes(self.array()?)));
        } else {
            put(self.value_of(tag)?);
        }
        Ok(())
    }

    /// The body of a value whose tag, `tag`, has been read.
    fn value_of(&mut self, tag: u8) -> Result<Value, DecodeError> {
        Ok(match tag {
            TAG_NULL => Value::Null,
            TAG_BOOL => Value::Bool(self.u8()? != 0),
            TAG_INT => Value::Int(i64::from_le_bytes(self.array()?)),
            TAG_FLOAT => Value::Float(f64::from_bits(u64::from_le_bytes(self.array()?))),
            TAG_TEXT => {
                let len = self.u32()? as usize;
                let start = self.at;
                let text = std::str::from_utf8(self.take(len)?)
                    .map_err(|_| DecodeError { offset: start, reason: "text is not UTF-8" })?;
                Value::Text(compact_str::CompactString::from(text))
            }
            TAG_BYTES => {
                let len = self.u32()? as usize;
                Value::bytes(self.take(len)?)
            }
            _ => return self.fail("unknown value tag"),
        })
    }

    /// Skips a row without building it (replay skips rows a newer TID has made obsolete).
    pub fn skip_row(&mut self) -> Result<(), DecodeError> {
        let columns = self.u16()?;
        for _ in 0..columns {
            match self.u8()? {
                TAG_NULL => {}
                TAG_BOOL => {
                    self.take(1)?;
                }
                TAG_INT | TAG_FLOAT => {
                    self.take(8)?;
                }
                TAG_TEXT | TAG_BYTES => {
                    let len = self.u32()? as usize;
                    self.take(len)?;
                }
                _ => return self.fail("unknown value tag"),
            }
        }
        Ok(())
    }

    /// The head of a transaction entry: its TID and its number of writes.
    pub fn entry_head(&mut self) -> Result<(Tid, u32), DecodeError> {
        let tid = Tid::from_u64(self.u64()?);
        let count = self.u32()?;
        if count > WRITES_MAX {
            return self.fail("write count exceeds the limit");
        }
        Ok((tid, count))
    }

    /// The head of an entry's next write in a log of whole rows (SiloR's value log, replayed in
    /// any order): its table, whether a row follows (put) or not (delete), and the encoded key.
    /// The caller reads or skips the row. A column patch is an error here.
    pub fn write_head(&mut self) -> Result<(TableId, bool, &'a [u8]), DecodeError> {
        let at = self.at;
        let (table, op, key) = self.write_head_op()?;
        match op {
            WriteOpCode::Put => Ok((table, true, key)),
            WriteOpCode::Delete => Ok((table, false, key)),
            WriteOpCode::Patch => Err(DecodeError { offset: at + 4, reason: "a column patch in a log of whole rows" }),
        }
    }

    /// The head of an entry's next write: its table, its op and the encoded key.
    pub fn write_head_op(&mut self) -> Result<(TableId, WriteOpCode, &'a [u8]), DecodeError> {
        let table = self.u32()?;
        let op = match self.u8()? {
            OP_PUT => WriteOpCode::Put,
            OP_DELETE => WriteOpCode::Delete,
            OP_PATCH => WriteOpCode::Patch,
            _ => return self.fail("unknown write op"),
        };
        let key_len = usize::from(self.u16()?);
        if key_len > KEY_SIZE_MAX_BYTES {
            return self.fail("key longer than the limit");
        }
        Ok((table, op, self.take(key_len)?))
    }

    /// A column patch: positions strictly increasing.
    pub fn patch(&mut self) -> Result<ColumnPatch, DecodeError> {
        let count = self.u16()?;
        let mut columns: Vec<(u16, Value)> = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let position = self.u16()?;
            if columns.last().is_some_and(|&(previous, _)| previous >= position) {
                return self.fail("column patch positions not increasing");
            }
            let tag = self.u8()?;
            self.body_to(tag, |value| columns.push((position, value)))?;
        }
        Ok(ColumnPatch { columns })
    }

    /// A transaction entry.
    pub fn entry(&mut self) -> Result<Entry, DecodeError> {
        let (tid, count) = self.entry_head()?;
        let mut writes = Vec::with_capacity(count.min(1024) as usize);
        for _ in 0..count {
            let (table, op, key) = self.write_head_op()?;
            let key = Key::from(key);
            let image = match op {
                WriteOpCode::Put => Image::Put(self.row()?),
                WriteOpCode::Patch => Image::Patch(self.patch()?),
                WriteOpCode::Delete => Image::Delete,
            };
            writes.push(EntryWrite { table, key, image });
        }
        Ok(Entry { tid, writes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_row() -> Vec<Value> {
        vec![
            Value::Null,
            Value::Bool(true),
            Value::Int(-5),
            Value::Float(2.5),
            Value::text("héllo"),
            Value::bytes(&[0, 1, 255]),
        ]
    }

    /// A row's tags are the log's, so a logged row's tags are copied into a row as they are.
    #[test]
    fn the_row_tags_are_the_logs() {
        use crate::storage::row;
        assert_eq!(
            [row::TAG_NULL, row::TAG_BOOL, row::TAG_INT, row::TAG_FLOAT, row::TAG_TEXT, row::TAG_BYTES],
            [TAG_NULL, TAG_BOOL, TAG_INT, TAG_FLOAT, TAG_TEXT, TAG_BYTES]
        );
        let values = sample_row();
        let mut out = Vec::new();
        encode_row(&values[..], &mut out);
        assert_eq!(Reader::new(&out).row().unwrap(), Row::from_slice(&values));
    }

    #[test]
    fn entries_round_trip() {
        let row = sample_row();
        let mut out = Vec::new();
        let stored = Row::from_slice(&row);
        let writes = vec![(3u32, &b"key1"[..], RedoImage::Put(&stored)), (4u32, &b"k2"[..], RedoImage::Delete)];
        encode_entry(Tid::new(9, 4), writes.into_iter(), &mut out);
        let mut r = Reader::new(&out);
        let entry = r.entry().unwrap();
        assert!(r.is_empty());
        let mut skipping = Reader::new(&out);
        let (_, count) = skipping.entry_head().unwrap();
        for _ in 0..count {
            if skipping.write_head().unwrap().1 {
                skipping.skip_row().unwrap();
            }
        }
        assert!(skipping.is_empty(), "skip_row must consume exactly the row");
        assert_eq!(entry.tid, Tid::new(9, 4));
        assert_eq!(entry.writes.len(), 2);
        assert_eq!(entry.writes[0].image.row(), Some(&stored));
        assert_eq!(entry.writes[1], EntryWrite { table: 4, key: Key::from(&b"k2"[..]), image: Image::Delete });
    }

    #[test]
    fn a_typed_row_is_checked_value_by_value_as_it_is_decoded() {
        use ColumnType::{Bool, Bytes, Float, Int, Text};
        let row = sample_row();
        let mut out = Vec::new();
        encode_row(&row, &mut out);
        let decode = |admitted: &[AdmittedTags]| {
            let mut got = Vec::new();
            let typed = Reader::new(&out).row_each_typed(admitted, |p, v| got.push((p, v))).unwrap();
            (typed, got)
        };
        let types = [Int, Bool, Int, Float, Text, Bytes];
        let fits: Vec<AdmittedTags> = types.iter().enumerate().map(|(p, &t)| AdmittedTags::of(t, p == 0)).collect();
        let (typed, got) = decode(&fits);
        assert_eq!(typed, TypedRow::Fits);
        assert_eq!(got, row.iter().cloned().enumerate().collect::<Vec<_>>());
        // A null where the column admits none; a float where an int belongs: decoding stops there.
        let mut not_null = fits.clone();
        not_null[0] = AdmittedTags::of(Int, false);
        assert_eq!(decode(&not_null), (TypedRow::Misfit { position: 0, got: None }, vec![]));
        let mut float_as_int = fits.clone();
        float_as_int[3] = AdmittedTags::of(Int, true);
        let (typed, got) = decode(&float_as_int);
        assert_eq!(typed, TypedRow::Misfit { position: 3, got: Some(Float) });
        assert_eq!(got.len(), 3, "the values before the misfit were decoded");
        assert_eq!(decode(&fits[..5]), (TypedRow::Arity { got: 6 }, vec![]));
        for cut in 0..out.len() {
            let typed = Reader::new(&out[..cut]).row_each_typed(&fits, |_, _| {});
            assert!(typed.is_err(), "cut at {cut}: {typed:?}");
        }
    }

    #[test]
    fn a_fixed_row_is_decoded_whole_or_not_at_all() {
        let types = [(ColumnType::Int, false), (ColumnType::Float, false)];
        let shape = FixedShape::of(types.into_iter()).expect("shape");
        let decode = |bytes: &[u8]| {
            let mut reader = Reader::new(bytes);
            let mut got = vec![Value::Null; 2];
            let fixed = reader.row_each_fixed(&shape, |p, v| got[p] = v.into());
            (fixed, reader.offset(), got)
        };
        let mut logged = Vec::new();
        encode_row(&[Value::Int(-3), Value::Float(0.5)][..], &mut logged);
        logged.push(0xAA); // the next record's first byte
        let (fixed, at, got) = decode(&logged);
        assert_eq!((fixed, at, got), (true, logged.len() - 1, vec![Value::Int(-3), Value::Float(0.5)]));
        // Not of the shape: the reader is not moved, for the typed decoder to say what is wrong.
        let misfits: [&[Value]; 4] = [
            &[Value::Int(-3), Value::Null],
            &[Value::Float(1.0), Value::Float(0.5)],
            &[Value::Int(-3), Value::Float(0.5), Value::Int(1)],
            &[Value::Int(-3)],
        ];
        for values in misfits {
            let mut logged = Vec::new();
            encode_row(values, &mut logged);
            logged.extend([0u8; 16]); // bytes enough for the shape after a shorter row
            let (fixed, at, _) = decode(&logged);
            assert_eq!((fixed, at), (false, 0), "{values:?}");
        }
        // Cut anywhere: not decoded, not moved.
        for cut in 0..logged.len() - 1 {
            assert!(!decode(&logged[..cut]).0, "cut at {cut}");
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let row = sample_row();
        let mut out = Vec::new();
        let row = Row::from_slice(&row);
        encode_entry(Tid::new(1, 1), vec![(0u32, &b"k"[..], RedoImage::Put(&row))].into_iter(), &mut out);
        for cut in 0..out.len() {
            assert!(Reader::new(&out[..cut]).entry().is_err(), "cut at {cut}");
        }
        let mut bad = out.clone();
        bad[8 + 4 + 4] = 9; // the op byte
        assert_eq!(Reader::new(&bad).entry().unwrap_err().reason, "unknown write op");
    }

    fn encode_one(image: RedoImage<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        encode_entry(Tid::new(2, 1), std::iter::once((7u32, &b"k"[..], image)), &mut out);
        out
    }

    #[test]
    fn a_patch_logs_only_the_changed_columns_and_applies_to_the_previous_row() {
        let before = sample_row();
        let mut after = before.clone();
        after[2] = Value::Int(77);
        after[5] = Value::bytes(&[9; 100]);
        let (before, after) = (Row::from_slice(&before), Row::from_slice(&after));
        let patched = encode_one(RedoImage::Patch { before: &before, after: &after });
        let whole = encode_one(RedoImage::Put(&after));
        assert!(patched.len() < whole.len(), "patch {} bytes, row {} bytes", patched.len(), whole.len());
        let entry = Reader::new(&patched).entry().unwrap();
        let Image::Patch(patch) = &entry.writes[0].image else { panic!("not a patch: {:?}", entry.writes[0]) };
        assert_eq!(patch.columns().iter().map(|c| c.0).collect::<Vec<_>>(), vec![2, 5]);
        assert_eq!(patch.apply(&before).unwrap(), after);
        let narrow = Row::from_refs(before.iter().take(3));
        assert!(patch.apply(&narrow).is_err(), "a base too narrow for the patch is an error");
        // Logs replayed in any order hold whole rows only.
        let mut r = Reader::new(&patched);
        r.entry_head().unwrap();
        assert_eq!(r.write_head().unwrap_err().reason, "a column patch in a log of whole rows");
    }

    #[test]
    fn a_patch_that_would_change_every_column_or_the_width_is_logged_whole() {
        let before = sample_row();
        let all: Vec<Value> = (0..before.len() as i64).map(Value::Int).collect();
        let wider: Vec<Value> = before.iter().cloned().chain([Value::Null]).collect();
        let before = Row::from_slice(&before);
        for after in [Row::from_slice(&all), Row::from_slice(&wider)] {
            let out = encode_one(RedoImage::Patch { before: &before, after: &after });
            let entry = Reader::new(&out).entry().unwrap();
            assert_eq!(entry.writes[0].image.row(), Some(&after));
        }
        let same = encode_one(RedoImage::Patch { before: &before, after: &before });
        let entry = Reader::new(&same).entry().unwrap();
        let Image::Patch(patch) = &entry.writes[0].image else { panic!("an unchanged row is an empty patch") };
        assert!(patch.columns().is_empty());
    }

    #[test]
    fn a_patch_with_positions_out_of_order_or_cut_anywhere_is_an_error() {
        let before = sample_row();
        let mut after = before.clone();
        after[1] = Value::Bool(false);
        after[3] = Value::Float(0.5);
        let (before, after) = (Row::from_slice(&before), Row::from_slice(&after));
        let out = encode_one(RedoImage::Patch { before: &before, after: &after });
        for cut in 0..out.len() {
            assert!(Reader::new(&out[..cut]).entry().is_err(), "cut at {cut}");
        }
        // The second position (3) is after the first column's value (tag + 1 byte).
        let head = 8 + 4 + 4 + 1 + 2 + 1;
        let mut bad = out.clone();
        bad[head + 2 + 2 + 2..head + 2 + 2 + 2 + 2].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(Reader::new(&bad).entry().unwrap_err().reason, "column patch positions not increasing");
    }
}
