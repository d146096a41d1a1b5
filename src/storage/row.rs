//! Rows: a table's values in one allocation of bytes.
//!
//! A row is immutable once shared; an update builds a new row (the after-image) and installs it
//! whole ([`crate::storage::record`]). It is one allocation (`triomphe::ThinArc`: a reference
//! count and a length, then the bytes below), so a record swaps it through one thin pointer.
//!
//! # Layout
//!
//! For a row of `n` values holding `d` bytes of payload:
//!
//! ```text
//! offset         size        field
//! 0              2           n, little-endian
//! 2              1           flags: bit 0 set = the ends below are u32 (d > 65,535), else u16
//! 3              n           one tag per value: 0 null, 1 bool, 2 int, 3 float, 4 text, 5 bytes
//! 3 + n          n × w       where each value's payload ends, from the payload's start
//!                            (w = 2 or 4, little-endian); value i starts where value i − 1 ends
//! 3 + n + n × w  d           the payloads, in order: int and float 8 bytes (little-endian; a
//!                            float's IEEE bits), bool 1 byte, text (UTF-8) and bytes as they
//!                            are, null nothing
//! ```
//!
//! Why bytes and not a slice of [`Value`]s (until session 38): a `Value` takes 24 bytes whatever
//! it holds, and a byte string of more than 22 bytes took an allocation of its own besides. On
//! this VM the first touch of fresh memory is the largest single cost of the workloads that grow
//! or rebuild a database (`docs/storage.md`, "Bytes per row"): a key of the server's keyspace
//! (11-byte key, 32-byte value, an expiry) took 96 bytes of row and a 48-byte value allocation,
//! and takes 80 bytes of row here; a TPC-C order line took 256 and takes 145 (mimalloc's
//! 160-byte class). An update copies each run of unchanged values with one `memcpy`, with no
//! reference count to touch and nothing to drop per value.
//!
//! The encoding is canonical (a value has one encoding), so rows compare by their bytes.
//!
//! Readers take [`ValueRef`]s, borrowed from the bytes ([`Row::get`], [`Columns`]); owned values
//! are made on demand ([`Row::value`]).

use super::key::{KEY_INLINE_BYTES, Key};
use super::value::{ColumnType, Columns, Value, ValueRef};
use std::fmt;
use std::mem::MaybeUninit;
use triomphe::{Arc, HeaderWithLength, ThinArc, UniqueArc};

/// The most values a row holds (its count is a `u16`).
pub const ROW_VALUES_MAX: usize = u16::MAX as usize;
/// The most values of room [`Row::build`]'s per-thread scratch vector keeps between rows.
pub const ROW_SCRATCH_KEPT_MAX: usize = 1024;

/// The tags: the log codec's value tags (`durability::codec`, `docs/FORMAT.md`), so that a logged
/// row's tags are copied into a row as they are (a test checks the two agree).
pub(crate) const TAG_NULL: u8 = 0;
pub(crate) const TAG_BOOL: u8 = 1;
pub(crate) const TAG_INT: u8 = 2;
pub(crate) const TAG_FLOAT: u8 = 3;
pub(crate) const TAG_TEXT: u8 = 4;
pub(crate) const TAG_BYTES: u8 = 5;
/// Each tag's column type (`None`: null), by tag.
const TAG_TYPES: [Option<ColumnType>; 6] = [
    None,
    Some(ColumnType::Bool),
    Some(ColumnType::Int),
    Some(ColumnType::Float),
    Some(ColumnType::Text),
    Some(ColumnType::Bytes),
];
/// The count and the flags.
const HEAD_BYTES: usize = 3;
/// Flag: the ends are `u32`.
const FLAG_WIDE_ENDS: u8 = 1;
/// The most payload bytes whose ends fit a `u16`.
const NARROW_PAYLOAD_MAX_BYTES: usize = u16::MAX as usize;

thread_local! {
    static ROW_SCRATCH: std::cell::RefCell<Vec<Value>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A row: one value per column of its table, in schema order, encoded as the module docs say.
#[derive(Clone, PartialEq, Eq)]
#[repr(transparent)]
pub struct Row(ThinArc<(), u8>);

/// Where a row's bytes start in its allocation, past `ThinArc`'s count and length words (a test
/// checks it against a real row).
pub(crate) const ROW_BYTES_OFFSET: usize = 16;

impl Row {
    /// A row holding `values`.
    pub fn new(values: Vec<Value>) -> Row {
        Row::from_slice(&values)
    }

    /// A row of the values an iterator of known length yields.
    pub fn from_exact_iter<I: ExactSizeIterator<Item = Value>>(values: I) -> Row {
        Row::build::<std::convert::Infallible>(|scratch| {
            scratch.extend(values);
            Ok(())
        })
        .unwrap_or_else(|never| match never {})
    }

    /// A row of the values `fill` pushes: they are gathered in a per-thread scratch vector, so a
    /// fallible build (evaluating a procedure's values, decoding a log record) allocates the row
    /// alone. A `fill` that fails builds nothing. At most [`ROW_SCRATCH_KEPT_MAX`] values' room
    /// is kept between calls.
    pub fn build<E>(fill: impl FnOnce(&mut Vec<Value>) -> Result<(), E>) -> Result<Row, E> {
        ROW_SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut values) => {
                values.clear();
                let built = fill(&mut values).map(|()| Row::from_slice(&values));
                values.clear();
                if values.capacity() > ROW_SCRATCH_KEPT_MAX {
                    *values = Vec::new();
                }
                built
            }
            // A `fill` that builds a row itself: it gets a vector of its own.
            Err(_) => {
                let mut values = Vec::new();
                fill(&mut values)?;
                Ok(Row::from_slice(&values))
            }
        })
    }

    /// A row of `values`.
    pub fn from_slice(values: &[Value]) -> Row {
        // Matched on the values themselves, not through `ValueRef`s: compiled replay builds
        // every row it installs here, from its plan's frame.
        let payload_bytes = values.iter().map(value_payload_bytes).sum();
        let mut writer = RowWriter::new(values.len(), payload_bytes);
        for v in values {
            // SAFETY: each tag is the value's, and text is a `CompactString`'s bytes (UTF-8).
            unsafe {
                match v {
                    Value::Null => writer.push_raw(TAG_NULL, &[]),
                    Value::Int(x) => writer.push_raw(TAG_INT, &x.to_le_bytes()),
                    Value::Float(x) => writer.push_raw(TAG_FLOAT, &x.to_bits().to_le_bytes()),
                    Value::Bool(b) => writer.push_raw(TAG_BOOL, &[u8::from(*b)]),
                    Value::Text(t) => writer.push_raw(TAG_TEXT, t.as_bytes()),
                    Value::Bytes(b) => writer.push_raw(TAG_BYTES, b),
                    Value::InlineBytes(b) => writer.push_raw(TAG_BYTES, b.as_slice()),
                }
            }
        }
        writer.finish()
    }

    /// A row of the values `values` yields (borrowed from anywhere, e.g. another row).
    pub fn from_refs<'a>(values: impl ExactSizeIterator<Item = ValueRef<'a>> + Clone) -> Row {
        Row::encode(values)
    }

    /// The row with no values (the placeholder of an absent record).
    pub fn empty() -> Row {
        Row::encode(std::iter::empty())
    }

    /// This row with the values of `changes` (column, value), in increasing column order, each
    /// column once: an update's after-image. The unchanged values between two changes are copied
    /// as one run of bytes. A change past the row's end is ignored (callers check positions
    /// against the schema first).
    pub fn with_changes<'v>(&self, changes: impl Iterator<Item = (usize, ValueRef<'v>)> + Clone) -> Row {
        let spans = RowSpans::of(self);
        let changes = changes.filter(|(i, _)| *i < spans.n);
        debug_assert!(
            changes.clone().zip(changes.clone().skip(1)).all(|(a, b)| a.0 < b.0),
            "changes in increasing column order"
        );
        let same_shape = changes.clone().all(|(i, v)| {
            let (tag, start, end) = spans.span(i);
            tag == tag_of(v) && end - start == payload_bytes(v)
        });
        if same_shape {
            return self.with_payloads_overwritten(&spans, changes);
        }
        let mut payload = spans.end_of_all();
        for (i, v) in changes.clone() {
            let (_, start, end) = spans.span(i);
            payload = payload - (end - start) + payload_bytes(v);
        }
        if !spans.wide && payload <= NARROW_PAYLOAD_MAX_BYTES {
            return self.with_payloads_moved(&spans, payload, changes);
        }
        let mut writer = RowWriter::new(spans.n, payload);
        let mut from = 0;
        for (i, v) in changes {
            writer.copy_run(&spans, from, i);
            writer.push(v);
            from = i + 1;
        }
        writer.copy_run(&spans, from, spans.n);
        writer.finish()
    }

    /// [`Row::with_changes`] when a change has another tag or size than the value it replaces
    /// (delivery's `ol_delivery_d`, a null set to an int) and both rows have narrow ends, the
    /// common case: the count, flags and tags are copied as one run and each changed tag
    /// written over; each end is the old one moved by what the changes before it added; the
    /// unchanged payloads are copied a run at a time. Built value-run by value-run through
    /// [`RowWriter`] it cost about 740 instructions an order line (`docs/PERFORMANCE.md`,
    /// "TPC-C", "Session 65"). `payload` is the new row's payload size, at most
    /// [`NARROW_PAYLOAD_MAX_BYTES`].
    fn with_payloads_moved<'v>(
        &self,
        spans: &RowSpans<'_>,
        payload: usize,
        changes: impl Iterator<Item = (usize, ValueRef<'v>)>,
    ) -> Row {
        assert!(!spans.wide && payload <= NARROW_PAYLOAD_MAX_BYTES, "narrow ends before and after");
        let n = spans.n;
        let (ends_at, data_at) = (HEAD_BYTES + n, HEAD_BYTES + 3 * n);
        let mut arc = uninit_row(data_at + payload);
        let out = &mut arc.slice;
        // The head and the tags, as they are: the flags stay narrow.
        put_bytes(out, 0, &self.bytes()[..ends_at]);
        // The next value to write, and the payload bytes written so far.
        let (mut from, mut written) = (0, 0);
        let mut scratch = [0u8; 8];
        for (i, v) in changes {
            // Out of order, a later run would write over an earlier change's end: the ends
            // would no longer increase, which readers rely on without checking.
            assert!(i >= from, "changes in increasing column order, each column once");
            written = copy_moved_run(out, spans, from, i, written, data_at);
            let bytes = payload_of(v, &mut scratch);
            assert!(written + bytes.len() <= payload, "a change past the new row's payload size");
            out[HEAD_BYTES + i].write(tag_of(v));
            put_bytes(out, data_at + written, bytes);
            written += bytes.len();
            put_bytes(out, ends_at + 2 * i, &(written as u16).to_le_bytes());
            from = i + 1;
        }
        written = copy_moved_run(out, spans, from, n, written, data_at);
        assert_eq!(written, payload, "the changes did not add up to the new row's size");
        // SAFETY: every byte is written: the head and tags by the first copy; the ends and
        // payloads of the unchanged values by `copy_moved_run`, which covers `from..i` between
        // the changes (strictly increasing, asserted above) and `from..n` after the last; each changed value's end and payload above;
        // and the payloads fill `data_at..data_at + payload` end to end (`written == payload`).
        // The tags are the values' and the ends narrow, increasing and within the payloads, as
        // in the old row: a row's encoding.
        unsafe { init_row(arc) }
    }

    /// [`Row::with_changes`] when every change has the tag and payload size of the value it
    /// replaces (an int for an int, text for text of the same length): the head and the ends
    /// stay as they are, so the new row is a copy of this row's bytes with the changed payloads
    /// written over. TPC-C's updates are mostly such (counters and balances), and re-encoding
    /// every tag and end of a wide row (stock's 17 columns) was most of an update's row work.
    fn with_payloads_overwritten<'v>(
        &self,
        spans: &RowSpans<'_>,
        changes: impl Iterator<Item = (usize, ValueRef<'v>)>,
    ) -> Row {
        let bytes = self.bytes();
        let total = bytes.len();
        let data_at = total - spans.end_of_all();
        let mut arc = uninit_row(total);
        let base = arc.slice.as_mut_ptr().cast::<u8>();
        // SAFETY: the allocation is `total` bytes long, as is `bytes`; nothing else can reach it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base, total) };
        for (i, v) in changes {
            let (_, start, end) = spans.span(i);
            debug_assert_eq!(end - start, payload_bytes(v), "a change of another size");
            // SAFETY: `start..end` is value `i`'s payload within this row's payloads, which lie at
            // `data_at..total` of the copy (`RowSpans`' invariant); every byte was written by the
            // copy above, so overwriting them leaves every byte written.
            let out = unsafe { std::slice::from_raw_parts_mut(base.add(data_at + start), end - start) };
            write_payload(v, out);
        }
        // SAFETY: every byte is written (the copy of a row's encoding), and each overwritten
        // payload keeps its value's tag and size, so the bytes are still a row's encoding.
        unsafe { init_row(arc) }
    }

    /// [`Row::with_changes`] of owned values.
    pub fn with_values(&self, changes: &[(usize, Value)]) -> Row {
        self.with_changes(changes.iter().map(|(i, v)| (*i, v.view())))
    }

    /// How many values.
    #[inline]
    pub fn len(&self) -> usize {
        let b = self.bytes();
        usize::from(u16::from_le_bytes([b[0], b[1]]))
    }

    /// Whether it holds no values.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`, borrowed, or `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<ValueRef<'_>> {
        let spans = RowSpans::of(self);
        (i < spans.n).then(|| spans.value(i))
    }

    /// Value `i`, borrowed; panics past the end, as indexing a slice does.
    #[inline]
    pub fn at(&self, i: usize) -> ValueRef<'_> {
        let spans = RowSpans::of(self);
        assert!(i < spans.n, "value {i} of a row of {}", spans.n);
        spans.value(i)
    }

    /// Value `i`, owned, or `None` past the end.
    #[inline]
    pub fn value(&self, i: usize) -> Option<Value> {
        self.get(i).map(ValueRef::to_value)
    }

    /// Sets `out[slot]` to an owned copy of value `column` (null past the end) for each
    /// `(slot, column)` of `targets`, reading the row's head once: a `select ... into`.
    pub fn values_into(&self, targets: &[(usize, usize)], out: &mut [Value]) {
        let spans = RowSpans::of(self);
        for &(slot, column) in targets {
            out[slot] = if column < spans.n { spans.value(column).to_value() } else { Value::Null };
        }
    }

    /// The values, borrowed, in order.
    pub fn iter(&self) -> RowIter<'_> {
        RowIter { spans: RowSpans::of(self), next: 0, start: 0 }
    }

    /// The values, owned.
    pub fn to_vec(&self) -> Vec<Value> {
        self.iter().map(ValueRef::to_value).collect()
    }

    /// Sets value `i` where it lies if the new value's encoding has the old one's tag and size
    /// (an int for an int, bytes for bytes of the same length) and this is the row's only
    /// reference; `false` (nothing changed) otherwise. Recovery's in-place edits.
    pub fn set_in_place(&mut self, i: usize, value: ValueRef<'_>) -> bool {
        let (tag, size) = (tag_of(value), payload_bytes(value));
        let spans = RowSpans::of(self);
        if i >= spans.n {
            return false;
        }
        let (at_tag, start, end) = spans.span(i);
        if tag != at_tag || end - start != size {
            return false;
        }
        let data_at = self.bytes().len() - spans.end_of_all();
        self.0.with_arc_mut(|arc| match Arc::get_mut(arc) {
            Some(inner) => {
                let bytes = inner.slice_mut();
                write_payload(value, &mut bytes[data_at + start..data_at + end]);
                true
            }
            None => false,
        })
    }

    /// The bytes of the encoding.
    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.0.slice
    }

    /// The row's encoding (the module docs' layout), which [`Row::from_encoding`] takes back: the
    /// indexed log stores rows so, and a restore allocates and copies them instead of building
    /// them value by value (`docs/FORMAT.md`, "`indexed.redb`").
    pub fn encoding(&self) -> &[u8] {
        self.bytes()
    }

    /// The row whose encoding is `bytes`, checked whole before anything is allocated: the head,
    /// each tag, each end in order and within the payloads, each payload's size against its tag
    /// (and a bool's byte 0 or 1, a text's bytes UTF-8), the ends' width against the payloads'
    /// size, and no byte past the last value, so that the row is canonical (rows compare by
    /// their bytes) and its readers' unchecked reads stay in bounds.
    pub fn from_encoding(bytes: &[u8]) -> Result<Row, RowEncodingError> {
        check_encoding(bytes)?;
        let mut arc = uninit_row(bytes.len());
        // SAFETY: the allocation is `bytes.len()` bytes of `MaybeUninit<u8>`, which has `u8`'s
        // layout; the copy writes every one of them, and `check_encoding` found them a row's
        // encoding.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), arc.slice.as_mut_ptr().cast::<u8>(), bytes.len());
            Ok(init_row(arc))
        }
    }

    /// Encodes a row. The iterator is run twice (sizes, then bytes) and must yield the same
    /// values both times; the writer checks it does.
    fn encode<'a>(values: impl ExactSizeIterator<Item = ValueRef<'a>> + Clone) -> Row {
        let payload: usize = values.clone().map(payload_bytes).sum();
        let mut writer = RowWriter::new(values.len(), payload);
        for v in values {
            writer.push(v);
        }
        writer.finish()
    }

    /// How many references the row has (tests of who holds a row).
    pub fn strong_count(&self) -> usize {
        self.0.with_arc(Arc::count)
    }

    /// The thin pointer a record holds.
    pub(crate) fn into_thin(self) -> ThinArc<(), u8> {
        self.0
    }

    /// A row from a record's thin pointer.
    pub(crate) fn from_thin(thin: ThinArc<(), u8>) -> Row {
        Row(thin)
    }

    /// A record's thin pointer seen as a row, without taking a count.
    pub(crate) fn from_thin_ref(thin: &ThinArc<(), u8>) -> &Row {
        // SAFETY: `Row` is `repr(transparent)` over `ThinArc<(), u8>`.
        unsafe { &*std::ptr::from_ref(thin).cast::<Row>() }
    }

    /// The address of the row's allocation (its count, then its bytes): for a prefetch, and for
    /// telling whether a row was edited where it lies.
    pub fn as_ptr(&self) -> *const u8 {
        self.0.heap_ptr().cast::<u8>()
    }
}

/// Why bytes given to [`Row::from_encoding`] are not a row's encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a row's encoding: {0}")]
pub struct RowEncodingError(pub &'static str);

/// Checks that `bytes` are a row's canonical encoding ([`Row::from_encoding`]).
fn check_encoding(bytes: &[u8]) -> Result<(), RowEncodingError> {
    let fail = |reason| Err(RowEncodingError(reason));
    let Some((&[count_low, count_high, flags], rest)) = bytes.split_first_chunk::<HEAD_BYTES>() else {
        return fail("shorter than a row's head");
    };
    let n = usize::from(u16::from_le_bytes([count_low, count_high]));
    let wide = match flags {
        0 => false,
        FLAG_WIDE_ENDS => true,
        _ => return fail("unknown flags in the head"),
    };
    let Some((tags, rest)) = rest.split_at_checked(n) else { return fail("cut short in its tags") };
    let width = if wide { 4 } else { 2 };
    let Some((ends, data)) = rest.split_at_checked(n * width) else { return fail("cut short in its ends") };
    if wide != (data.len() > NARROW_PAYLOAD_MAX_BYTES) || u32::try_from(data.len()).is_err() {
        return fail("ends of the wrong width for the payloads' size");
    }
    let mut start = 0;
    for (&tag, end) in tags.iter().zip(ends.chunks_exact(width)) {
        let end = match *end {
            [low, high] => usize::from(u16::from_le_bytes([low, high])),
            [b0, b1, b2, b3] => u32::from_le_bytes([b0, b1, b2, b3]) as usize,
            _ => unreachable!("`chunks_exact` of 2 or 4"),
        };
        let Some(payload) = data.get(start..end) else {
            return fail("a value ends before the one before it or past the payloads");
        };
        let fits = match tag {
            TAG_NULL => payload.is_empty(),
            TAG_BOOL => matches!(payload, [0] | [1]),
            TAG_INT | TAG_FLOAT => payload.len() == 8,
            TAG_TEXT => std::str::from_utf8(payload).is_ok(),
            TAG_BYTES => true,
            _ => return fail("an unknown value tag"),
        };
        if !fits {
            return fail("a value's payload does not fit its tag");
        }
        start = end;
    }
    if start != data.len() {
        return fail("payload bytes past the last value");
    }
    Ok(())
}

/// Writes `bytes` into `out` at `at` (bounds checked).
#[inline]
fn put_bytes(out: &mut [MaybeUninit<u8>], at: usize, bytes: &[u8]) {
    let dst = &mut out[at..at + bytes.len()];
    // SAFETY: `MaybeUninit<u8>` has `u8`'s layout, and `dst` is exactly `bytes.len()` long.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.as_mut_ptr().cast::<u8>(), bytes.len()) };
}

/// `v`'s payload as it lies in a row: borrowed for text and bytes, else written into `scratch`.
#[inline]
fn payload_of<'a>(v: ValueRef<'a>, scratch: &'a mut [u8; 8]) -> &'a [u8] {
    match v {
        ValueRef::Null => &[],
        ValueRef::Int(x) => {
            *scratch = x.to_le_bytes();
            scratch
        }
        ValueRef::Float(x) => {
            *scratch = x.to_bits().to_le_bytes();
            scratch
        }
        ValueRef::Bool(b) => {
            scratch[0] = u8::from(b);
            &scratch[..1]
        }
        ValueRef::Text(t) => t.as_bytes(),
        ValueRef::Bytes(b) => b,
    }
}

/// [`Row::with_payloads_moved`]'s copy of the unchanged values `from..to` of the narrow row
/// `spans` reads into the narrow row `out`, whose payloads start at `data_at` and have
/// `written` bytes so far: their payloads as one run, their ends moved by where the run now
/// starts (the tags were copied whole). Returns the payload bytes written after it.
#[inline]
fn copy_moved_run(
    out: &mut [MaybeUninit<u8>],
    spans: &RowSpans<'_>,
    from: usize,
    to: usize,
    written: usize,
    data_at: usize,
) -> usize {
    if from >= to {
        return written;
    }
    let run_start = if from == 0 { 0 } else { spans.end(from - 1) };
    let run_end = spans.end(to - 1);
    put_bytes(out, data_at + written, spans.payload(run_start, run_end));
    // Ends are u16s that never wrap in a row of narrow ends: a moved end is at most the new
    // payload size.
    let shift = written.wrapping_sub(run_start);
    let ends_at = HEAD_BYTES + spans.n;
    let dst = &mut out[ends_at + 2 * from..ends_at + 2 * to];
    for (d, s) in dst.chunks_exact_mut(2).zip(spans.ends[2 * from..2 * to].chunks_exact(2)) {
        let moved = (usize::from(u16::from_le_bytes([s[0], s[1]])).wrapping_add(shift) as u16).to_le_bytes();
        d[0].write(moved[0]);
        d[1].write(moved[1]);
    }
    written + (run_end - run_start)
}

/// A row's allocation, its bytes not written yet ([`RowWriter`], [`FixedShape::build`]).
type UninitRow = UniqueArc<triomphe::HeaderSlice<HeaderWithLength<()>, [MaybeUninit<u8>]>>;

/// The allocation of a row of `total` bytes.
fn uninit_row(total: usize) -> UninitRow {
    UninitRow::from_header_and_uninit_slice(HeaderWithLength::new((), total), total)
}

/// The row whose bytes `arc` holds.
///
/// # Safety
///
/// Every byte of `arc` is written, and they are a row's encoding (the module docs).
unsafe fn init_row(arc: UninitRow) -> Row {
    // SAFETY: the caller's.
    let arc = unsafe { arc.assume_init_slice_with_header() }.shareable();
    Row(Arc::into_thin(arc))
}

/// Writes a row of `n` values and `payload` bytes of payload into its allocation, value by value
/// or a run of another row's values at a time. Every write is checked against the sizes given up
/// front before it is made, and [`RowWriter::finish`] checks they were met exactly, which is
/// when every byte of the allocation has been written once: the head by `new`, a tag and an end
/// per value, and the payloads end to end.
pub(crate) struct RowWriter {
    arc: UninitRow,
    n: usize,
    payload: usize,
    wide: bool,
    /// Where the ends start.
    ends_at: usize,
    /// Where the payloads start.
    data_at: usize,
    /// Values written.
    i: usize,
    /// Payload bytes written.
    end: usize,
}

impl RowWriter {
    pub(crate) fn new(n: usize, payload: usize) -> RowWriter {
        assert!(n <= ROW_VALUES_MAX, "a row holds at most {ROW_VALUES_MAX} values, not {n}");
        // A wide end is a `u32`; the log's values are at most that long too (`codec`).
        assert!(u32::try_from(payload).is_ok(), "a row of {payload} payload bytes");
        let wide = payload > NARROW_PAYLOAD_MAX_BYTES;
        let ends_at = HEAD_BYTES + n;
        let data_at = ends_at + n * if wide { 4 } else { 2 };
        let total = data_at + payload;
        let mut arc = uninit_row(total);
        let head = &mut arc.slice[..HEAD_BYTES];
        let [count_low, count_high] = (n as u16).to_le_bytes();
        head[0].write(count_low);
        head[1].write(count_high);
        head[2].write(if wide { FLAG_WIDE_ENDS } else { 0 });
        RowWriter { arc, n, payload, wide, ends_at, data_at, i: 0, end: 0 }
    }

    /// Writes `bytes` at `at`, which must lie within the allocation.
    #[inline]
    fn put(&mut self, at: usize, bytes: &[u8]) {
        let dst = &mut self.arc.slice[at..at + bytes.len()];
        // SAFETY: `MaybeUninit<u8>` has `u8`'s layout, and `dst` is exactly `bytes.len()` long.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.as_mut_ptr().cast::<u8>(), bytes.len()) };
    }

    /// Records value `i`'s tag and where its payload ends (`end`).
    #[inline]
    fn head(&mut self, i: usize, tag: u8, end: usize) {
        self.arc.slice[HEAD_BYTES + i].write(tag);
        if self.wide {
            self.put(self.ends_at + 4 * i, &(end as u32).to_le_bytes());
        } else {
            self.put(self.ends_at + 2 * i, &(end as u16).to_le_bytes());
        }
    }

    /// Writes the next value: its tag and its payload as it lies in a row. Checked once against
    /// the sizes given to `new`, then written without a check per byte: it runs for every value
    /// of every row built (a replayed log's rows, a restore's images).
    ///
    /// # Safety
    ///
    /// `tag` is one of the row's tags, and a [`TAG_TEXT`] payload is UTF-8: readers hand text
    /// out as `&str` without checking it again ([`decode`]).
    #[inline]
    pub(crate) unsafe fn push_raw(&mut self, tag: u8, payload: &[u8]) {
        let (i, start, size) = (self.i, self.end, payload.len());
        assert!(i < self.n && size <= self.payload - start, "a row's values changed while it was encoded");
        let end = start + size;
        let base = self.arc.slice.as_mut_ptr().cast::<u8>();
        // SAFETY: the allocation is `data_at + payload` bytes long (`new`). `i < n`, so the tag
        // lies in `HEAD_BYTES..ends_at` and the end in `ends_at..data_at`; `end <= payload`, so
        // the payload lies in `data_at..data_at + payload`. `payload` is not part of this
        // allocation, which nothing else can reach while it is written.
        unsafe {
            base.add(HEAD_BYTES + i).write(tag);
            if self.wide {
                base.add(self.ends_at + 4 * i).cast::<[u8; 4]>().write_unaligned((end as u32).to_le_bytes());
            } else {
                base.add(self.ends_at + 2 * i).cast::<[u8; 2]>().write_unaligned((end as u16).to_le_bytes());
            }
            std::ptr::copy_nonoverlapping(payload.as_ptr(), base.add(self.data_at + start), size);
        }
        self.i += 1;
        self.end = end;
    }

    #[inline]
    fn push(&mut self, v: ValueRef<'_>) {
        // SAFETY: each tag is the value's, and text is a `&str`'s bytes.
        unsafe {
            match v {
                ValueRef::Null => self.push_raw(TAG_NULL, &[]),
                ValueRef::Int(x) => self.push_raw(TAG_INT, &x.to_le_bytes()),
                ValueRef::Float(x) => self.push_raw(TAG_FLOAT, &x.to_bits().to_le_bytes()),
                ValueRef::Bool(b) => self.push_raw(TAG_BOOL, &[u8::from(b)]),
                ValueRef::Text(t) => self.push_raw(TAG_TEXT, t.as_bytes()),
                ValueRef::Bytes(b) => self.push_raw(TAG_BYTES, b),
            }
        }
    }

    /// Copies values `from..to` of the row `spans` reads, as they are: their tags and payloads
    /// as one run each, their ends moved by where the run starts here.
    fn copy_run(&mut self, spans: &RowSpans<'_>, from: usize, to: usize) {
        if from >= to {
            return;
        }
        let run_start = if from == 0 { 0 } else { spans.end(from - 1) };
        let run_end = spans.end(to - 1);
        let (i, start, count, size) = (self.i, self.end, to - from, run_end - run_start);
        assert!(i + count <= self.n && start + size <= self.payload, "a run past the row's sizes");
        self.put(self.data_at + start, spans.payload(run_start, run_end));
        self.put(HEAD_BYTES + i, &spans.tags[from..to]);
        if !self.wide && !spans.wide {
            // The common case, both narrow: one pass over the two arrays of `u16` ends.
            let shift = start.wrapping_sub(run_start);
            let src = &spans.ends[2 * from..2 * to];
            let at = self.ends_at + 2 * i;
            let dst = &mut self.arc.slice[at..at + 2 * count];
            for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
                let moved = (usize::from(u16::from_le_bytes([s[0], s[1]])).wrapping_add(shift) as u16).to_le_bytes();
                d[0].write(moved[0]);
                d[1].write(moved[1]);
            }
        } else {
            for k in 0..count {
                let end = spans.end(from + k) - run_start + start;
                let tag = spans.tags[from + k];
                self.head(i + k, tag, end);
            }
        }
        self.i += count;
        self.end += size;
    }

    pub(crate) fn finish(self) -> Row {
        assert!(self.i == self.n && self.end == self.payload, "a row's values changed while it was encoded");
        // SAFETY: `i == n` and `end == payload`: every tag, end and payload byte was written,
        // and `new` wrote the head (see the struct's docs).
        unsafe { init_row(self.arc) }
    }
}

/// The layout shared by every row of a table whose columns are all non-null 8-byte values (int
/// or float): such rows differ in their payloads alone, so their count, flags, tags and ends
/// (the head) are computed once, and a row is built by copying the head and writing each value's
/// 8 bytes at a fixed offset, with no dispatch on a value's kind or size beyond one comparison.
/// Compiled plans take it from their table's schema when they are compiled
/// ([`crate::storage::TableSchema::fixed_shape`]); it is the row-building half of specializing a
/// plan to its table (`docs/replay.md`, "Fixed-shape rows").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedShape {
    /// The bytes every row of the shape starts with: count, flags, tags and ends.
    head: Box<[u8]>,
    /// Each value's tag, [`TAG_INT`] or [`TAG_FLOAT`].
    tags: Box<[u8]>,
}

impl FixedShape {
    /// The shape of rows of `columns` (type, nullable), if every column is a non-null int or
    /// float. A table of no columns has no shape.
    pub fn of(columns: impl ExactSizeIterator<Item = (ColumnType, bool)>) -> Option<FixedShape> {
        let zeros = columns
            .map(|(ty, nullable)| match (ty, nullable) {
                (ColumnType::Int, false) => Some(Value::Int(0)),
                (ColumnType::Float, false) => Some(Value::Float(0.0)),
                _ => None,
            })
            .collect::<Option<Vec<Value>>>()?;
        if zeros.is_empty() || zeros.len() > ROW_VALUES_MAX {
            return None;
        }
        // The head of a row of zeros is every row's: the encoding is canonical, and a value's
        // payload size depends on its kind alone.
        let template = Row::from_slice(&zeros);
        let bytes = template.bytes();
        let head_bytes = bytes.len() - 8 * zeros.len();
        let tags = bytes[HEAD_BYTES..HEAD_BYTES + zeros.len()].into();
        Some(FixedShape { head: bytes[..head_bytes].into(), tags })
    }

    /// Each value's tag (the log codec's, [`TAG_INT`] or [`TAG_FLOAT`]), in column order.
    pub fn tags(&self) -> &[u8] {
        &self.tags
    }

    /// The row of `values`, or `None` if they are not exactly one value of each column's kind
    /// (a null, a value of another type, too few or too many): the caller then builds the row
    /// the general way ([`Row::from_slice`]), and the schema's check reports what was wrong.
    #[inline]
    pub fn build<'v>(&self, values: impl ExactSizeIterator<Item = &'v Value>) -> Option<Row> {
        let n = self.tags.len();
        if values.len() != n {
            return None;
        }
        let head = self.head.len();
        let total = head + 8 * n;
        let mut arc = uninit_row(total);
        let base = arc.slice.as_mut_ptr().cast::<u8>();
        // SAFETY: the allocation is `total` bytes long and `head` of them are the head; nothing
        // else can reach it while it is written.
        unsafe { std::ptr::copy_nonoverlapping(self.head.as_ptr(), base, head) };
        let mut written = 0;
        for (i, (value, &tag)) in values.zip(self.tags.iter()).enumerate() {
            let bits = match (value, tag) {
                (Value::Int(x), TAG_INT) => x.to_le_bytes(),
                (Value::Float(x), TAG_FLOAT) => x.to_bits().to_le_bytes(),
                _ => return None,
            };
            // SAFETY: `i < n` (zipped with the tags), so the 8 bytes lie in `head..total`.
            unsafe { base.add(head + 8 * i).cast::<[u8; 8]>().write_unaligned(bits) };
            written += 1;
        }
        // An iterator may yield fewer values than its length said.
        if written != n {
            return None;
        }
        // SAFETY: every byte is written: the head, then one payload per value (`written == n`).
        Some(unsafe { init_row(arc) })
    }
}

/// A secondary index's entry key (its columns' key encoding, then the primary key, as
/// [`crate::storage::TableSchema::secondary_key_of`] makes it) over the rows of one
/// [`FixedShape`], specialized once per index: each indexed value lies at a fixed offset in every
/// row of the shape, so an entry is its 8-byte payloads read at those offsets and written into the
/// key in place, with no value decoded, no dispatch on its kind and no scratch buffer. It is the
/// index half of specializing to a table what [`FixedShape`] is the row half of; compiled replay's
/// index rebuild takes it (`docs/replay.md`, "Indexes").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedEntryKey {
    /// Each indexed column's payload offset in a row's bytes and whether it is a float, in the
    /// index's column order.
    parts: Box<[(usize, bool)]>,
    /// The length of every row of the shape.
    row_bytes: usize,
}

impl FixedShape {
    /// The entry key of a secondary index over `columns` (positions) of rows of this shape, or
    /// `None` if a position is not a column or the index's values alone would not fit an inline
    /// key (4 columns at most).
    pub fn entry_key(&self, columns: &[usize]) -> Option<FixedEntryKey> {
        let n = self.tags.len();
        if columns.is_empty() || 9 * columns.len() >= KEY_INLINE_BYTES {
            return None;
        }
        let head = self.head.len();
        let parts = columns
            .iter()
            .map(|&c| (c < n).then(|| (head + 8 * c, self.tags[c] == TAG_FLOAT)))
            .collect::<Option<Box<[(usize, bool)]>>>()?;
        Some(FixedEntryKey { parts, row_bytes: head + 8 * n })
    }
}

impl FixedEntryKey {
    /// The entry of `row` under `primary` (its encoded primary key), or `None` if `row` is not of
    /// the shape (only a row of another table can fail that: a table's rows are checked against
    /// its schema) or the entry would not fit inline; the caller then encodes it the general way.
    #[inline]
    pub fn entry(&self, row: &Row, primary: &[u8]) -> Option<Key> {
        let bytes = row.bytes();
        if bytes.len() != self.row_bytes {
            return None;
        }
        let payloads = self.parts.iter().map(|&(at, float)| {
            let mut word = [0u8; 8];
            // `at + 8 <= row_bytes == bytes.len()` by `FixedShape::entry_key`.
            word.copy_from_slice(&bytes[at..at + 8]);
            (u64::from_le_bytes(word), float)
        });
        super::key::fixed_parts_key(payloads, primary)
    }
}

#[inline]
fn tag_of(v: ValueRef<'_>) -> u8 {
    match v {
        ValueRef::Null => TAG_NULL,
        ValueRef::Int(_) => TAG_INT,
        ValueRef::Float(_) => TAG_FLOAT,
        ValueRef::Text(_) => TAG_TEXT,
        ValueRef::Bytes(_) => TAG_BYTES,
        ValueRef::Bool(_) => TAG_BOOL,
    }
}

/// The payload a value takes in a row.
#[inline]
fn value_payload_bytes(v: &Value) -> usize {
    match v {
        Value::Null => 0,
        Value::Int(_) | Value::Float(_) => 8,
        Value::Bool(_) => 1,
        Value::Text(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::InlineBytes(b) => b.as_slice().len(),
    }
}

#[inline]
fn payload_bytes(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Null => 0,
        ValueRef::Int(_) | ValueRef::Float(_) => 8,
        ValueRef::Bool(_) => 1,
        ValueRef::Text(s) => s.len(),
        ValueRef::Bytes(b) => b.len(),
    }
}

/// Writes `v`'s payload into `out`, which is exactly [`payload_bytes`] long.
#[inline]
fn write_payload(v: ValueRef<'_>, out: &mut [u8]) {
    match v {
        ValueRef::Null => {}
        ValueRef::Int(i) => out.copy_from_slice(&i.to_le_bytes()),
        ValueRef::Float(f) => out.copy_from_slice(&f.to_bits().to_le_bytes()),
        ValueRef::Bool(b) => out[0] = u8::from(b),
        ValueRef::Text(s) => out.copy_from_slice(s.as_bytes()),
        ValueRef::Bytes(b) => out.copy_from_slice(b),
    }
}

/// A row's parts, read once from its head: the tags, the ends and the payloads, each its own
/// slice. `ends` holds exactly `n` ends of `w` bytes, and every end is at most `data.len()` and
/// at least the one before it: [`RowWriter`], the only writer, checks both, so the reads below
/// need no bounds checks of their own.
#[derive(Clone, Copy)]
struct RowSpans<'a> {
    tags: &'a [u8],
    ends: &'a [u8],
    data: &'a [u8],
    n: usize,
    wide: bool,
}

impl<'a> RowSpans<'a> {
    #[inline]
    fn of(row: &'a Row) -> RowSpans<'a> {
        let bytes = row.bytes();
        let n = usize::from(u16::from_le_bytes([bytes[0], bytes[1]]));
        let wide = bytes[2] & FLAG_WIDE_ENDS != 0;
        let (tags, rest) = bytes[HEAD_BYTES..].split_at(n);
        let (ends, data) = rest.split_at(n * if wide { 4 } else { 2 });
        RowSpans { tags, ends, data, n, wide }
    }

    /// Where value `i` (`i < n`) ends within the payloads.
    #[inline]
    fn end(&self, i: usize) -> usize {
        assert!(i < self.n);
        // SAFETY: `ends` holds `n` ends of 4 (wide) or 2 bytes (`of` split it so), and `i < n`.
        unsafe {
            if self.wide {
                u32::from_le_bytes(*self.ends.as_ptr().add(4 * i).cast::<[u8; 4]>()) as usize
            } else {
                usize::from(u16::from_le_bytes(*self.ends.as_ptr().add(2 * i).cast::<[u8; 2]>()))
            }
        }
    }

    /// The payloads' size.
    #[inline]
    fn end_of_all(&self) -> usize {
        self.data.len()
    }

    /// Value `i`'s tag and payload range within the payloads.
    #[inline]
    fn span(&self, i: usize) -> (u8, usize, usize) {
        let start = if i == 0 { 0 } else { self.end(i - 1) };
        (self.tags[i], start, self.end(i))
    }

    /// Value `i`'s payload.
    #[inline]
    fn payload(&self, start: usize, end: usize) -> &'a [u8] {
        debug_assert!(start <= end && end <= self.data.len());
        // SAFETY: `start` and `end` are ends of this row (or 0), which the writer kept in
        // order and within the payloads (see the struct's docs).
        unsafe { self.data.get_unchecked(start..end) }
    }

    #[inline]
    fn value(&self, i: usize) -> ValueRef<'a> {
        let (tag, start, end) = self.span(i);
        decode(tag, self.payload(start, end))
    }
}

/// The value a tag and payload encode (written by [`Row::encode`] alone).
#[inline]
fn decode(tag: u8, payload: &[u8]) -> ValueRef<'_> {
    let word = || {
        let mut w = [0u8; 8];
        w.copy_from_slice(&payload[..8]);
        w
    };
    match tag {
        TAG_NULL => ValueRef::Null,
        TAG_INT => ValueRef::Int(i64::from_le_bytes(word())),
        TAG_FLOAT => ValueRef::Float(f64::from_bits(u64::from_le_bytes(word()))),
        // SAFETY: a text payload is UTF-8: `RowWriter::push_raw`'s contract (its callers write
        // the bytes of a `&str`, or text the log's reader checked), and `Row::set_in_place`
        // writes the bytes of a `&str`.
        TAG_TEXT => ValueRef::Text(unsafe { std::str::from_utf8_unchecked(payload) }),
        TAG_BYTES => ValueRef::Bytes(payload),
        TAG_BOOL => ValueRef::Bool(payload[0] != 0),
        other => unreachable!("a row holds tag {other}, which no encoder writes"),
    }
}

/// The values of a row, borrowed, in order.
#[derive(Clone)]
pub struct RowIter<'a> {
    spans: RowSpans<'a>,
    next: usize,
    start: usize,
}

impl<'a> Iterator for RowIter<'a> {
    type Item = ValueRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<ValueRef<'a>> {
        if self.next >= self.spans.n {
            return None;
        }
        let i = self.next;
        let end = self.spans.end(i);
        let tag = self.spans.tags[i];
        let payload = self.spans.payload(self.start, end);
        self.next += 1;
        self.start = end;
        Some(decode(tag, payload))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.spans.n - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RowIter<'_> {}

impl Columns for Row {
    #[inline]
    fn width(&self) -> usize {
        self.len()
    }
    #[inline]
    fn column(&self, i: usize) -> ValueRef<'_> {
        self.at(i)
    }
    fn columns(&self) -> impl ExactSizeIterator<Item = ValueRef<'_>> + Clone {
        self.iter()
    }
    /// The row's head read once for all of them.
    fn columns_at(&self, positions: &[usize]) -> impl Iterator<Item = ValueRef<'_>> + Clone {
        let spans = RowSpans::of(self);
        positions.iter().map(move |&p| spans.value(p))
    }
    /// Read from the tags alone.
    fn column_types(&self) -> impl Iterator<Item = Option<ColumnType>> {
        RowSpans::of(self).tags.iter().map(|&tag| TAG_TYPES[usize::from(tag)])
    }
    /// Read from the tags alone, the row's head read once: decoding each value to learn its
    /// type was 1.2 % of TPC-C's instructions (`docs/PERFORMANCE.md`, "TPC-C", "Session 62").
    fn column_types_at(&self, positions: &[usize]) -> impl Iterator<Item = Option<ColumnType>> {
        let tags = RowSpans::of(self).tags;
        positions.iter().map(move |&p| TAG_TYPES[usize::from(tags[p])])
    }
}

/// A record's current row lent for an edit where it lies (recovery's column patches,
/// [`crate::storage::Record::edit_unshared_row`]): it can be read, and its values set in place
/// when the edit allows it, but not replaced (the record keeps the pointer).
#[repr(transparent)]
pub struct InPlaceRow(Row);

impl InPlaceRow {
    /// `row` lent for an edit.
    pub(crate) fn lend(row: &mut Row) -> &mut InPlaceRow {
        // SAFETY: `InPlaceRow` is `repr(transparent)` over `Row`.
        unsafe { &mut *std::ptr::from_mut(row).cast::<InPlaceRow>() }
    }

    /// The row.
    pub fn row(&self) -> &Row {
        &self.0
    }

    /// Whether [`InPlaceRow::set`] of value `i` to `value` would succeed: the row is held by
    /// this reference alone and the new value's encoding has the old one's tag and size.
    pub fn fits(&mut self, i: usize, value: ValueRef<'_>) -> bool {
        let Some(old) = self.0.get(i) else { return false };
        tag_of(old) == tag_of(value)
            && payload_bytes(old) == payload_bytes(value)
            && self.0.0.with_arc_mut(|arc| arc.is_unique())
    }

    /// Applies `changes` (column, value; increasing columns, each once): where the row lies if
    /// every new value fits there (`None`), else to a copy, which is returned. All or nothing:
    /// nothing is set unless everything fits.
    pub fn apply<'v>(&mut self, changes: impl Iterator<Item = (usize, ValueRef<'v>)> + Clone) -> Option<Row> {
        if !changes.clone().all(|(i, v)| self.fits(i, v)) {
            return Some(self.0.with_changes(changes));
        }
        for (i, v) in changes {
            let set = self.set(i, v);
            debug_assert!(set, "a value that fits is set");
        }
        None
    }

    /// Sets value `i` where it lies, if [`InPlaceRow::fits`]; `false` (nothing changed) if not.
    pub fn set(&mut self, i: usize, value: ValueRef<'_>) -> bool {
        self.0.set_in_place(i, value)
    }
}

impl Default for Row {
    fn default() -> Row {
        Row::empty()
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<Value>> for Row {
    fn from(values: Vec<Value>) -> Row {
        Row::new(values)
    }
}

impl FromIterator<Value> for Row {
    fn from_iter<I: IntoIterator<Item = Value>>(values: I) -> Row {
        Row::new(values.into_iter().collect())
    }
}

impl From<&[Value]> for Row {
    fn from(values: &[Value]) -> Row {
        Row::from_slice(values)
    }
}

impl PartialEq<[Value]> for Row {
    fn eq(&self, other: &[Value]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == *b)
    }
}

impl PartialEq<Vec<Value>> for Row {
    fn eq(&self, other: &Vec<Value>) -> bool {
        *self == other[..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc as StdArc;

    fn sample() -> Vec<Value> {
        vec![
            Value::Int(-7),
            Value::Null,
            Value::Float(2.5),
            Value::text("a text longer than twenty-four bytes"),
            Value::bytes(b"key:1"),
            Value::Bytes(StdArc::from(&[9u8; 40][..])),
            Value::Bool(true),
            Value::text(""),
        ]
    }

    #[test]
    fn a_row_gives_back_its_values() {
        let values = sample();
        let row = Row::from_slice(&values);
        assert_eq!(row.len(), values.len());
        assert_eq!(row.to_vec(), values);
        for (i, v) in values.iter().enumerate() {
            assert_eq!(row.at(i), *v);
            assert_eq!(row.value(i).as_ref(), Some(v));
        }
        assert!(row.get(values.len()).is_none());
        assert_eq!(row.iter().len(), values.len());
        assert_eq!(Row::empty().len(), 0);
        assert!(Row::empty().iter().next().is_none());
        assert_eq!(format!("{row:?}"), format!("{values:?}"));
    }

    #[test]
    fn the_keyspace_row_takes_eighty_bytes() {
        let row = Row::new(vec![Value::bytes(b"key:4999999"), Value::bytes(&[7u8; 32]), Value::Int(0)]);
        // 16 bytes of count and length, 3 of head, 3 tags, 6 ends, 51 of payload.
        assert_eq!(ROW_BYTES_OFFSET + row.bytes().len(), 79);
        assert_eq!(row.as_ptr().wrapping_add(ROW_BYTES_OFFSET), row.bytes().as_ptr());
    }

    #[test]
    fn an_encoding_gives_back_its_row_and_every_prefix_is_refused() {
        let rows =
            [Row::from_slice(&sample()), Row::empty(), Row::new(vec![Value::bytes(&[0xABu8; 70_000]), Value::Null])];
        for row in &rows {
            let bytes = row.encoding();
            let back = Row::from_encoding(bytes).expect("a row's own encoding");
            assert_eq!(back, *row);
            assert_eq!(back.to_vec(), row.to_vec());
            for cut in 0..bytes.len() {
                assert!(Row::from_encoding(&bytes[..cut]).is_err(), "a row cut at {cut} of {}", bytes.len());
            }
            let mut longer = bytes.to_vec();
            longer.push(0);
            assert!(Row::from_encoding(&longer).is_err(), "a byte past the last value");
        }
    }

    /// The encoding of `values` with byte `at` set to `byte`, handed to `from_encoding`.
    fn damaged(values: Vec<Value>, at: usize, byte: u8) -> Result<Row, RowEncodingError> {
        let mut bytes = Row::new(values).encoding().to_vec();
        bytes[at] = byte;
        Row::from_encoding(&bytes)
    }

    #[test]
    fn an_encoding_that_is_not_canonical_or_not_in_bounds_is_refused() {
        let error = |values: Vec<Value>, at, byte| damaged(values, at, byte).map(|_| ()).unwrap_err().0;
        let ints = || vec![Value::Int(1), Value::Int(2)];
        // Head 3 bytes, tags at 3..5, ends at 5..9, payloads from 9.
        assert_eq!(error(ints(), 2, 2), "unknown flags in the head");
        assert_eq!(error(ints(), 2, FLAG_WIDE_ENDS), "ends of the wrong width for the payloads' size");
        assert_eq!(error(ints(), 0, 8), "cut short in its ends");
        assert_eq!(error(ints(), 0, 200), "cut short in its tags");
        assert_eq!(error(ints(), 0, 3), "a value ends before the one before it or past the payloads");
        assert_eq!(error(ints(), 3, 9), "an unknown value tag");
        assert_eq!(error(ints(), 3, TAG_NULL), "a value's payload does not fit its tag");
        assert_eq!(error(ints(), 5, 9), "a value's payload does not fit its tag");
        assert_eq!(error(ints(), 6, 1), "a value ends before the one before it or past the payloads");
        assert_eq!(error(ints(), 7, 7), "a value ends before the one before it or past the payloads");
        assert_eq!(error(vec![Value::Bool(true)], 6, 2), "a value's payload does not fit its tag");
        assert_eq!(error(vec![Value::text("ab")], 6, 0xFF), "a value's payload does not fit its tag");
        // Wide ends around a payload that narrow ones would hold: not the writer's encoding.
        let mut wide = vec![1, 0, FLAG_WIDE_ENDS, TAG_BYTES, 2, 0, 0, 0];
        wide.extend_from_slice(b"ab");
        assert_eq!(
            Row::from_encoding(&wide).map(|_| ()).unwrap_err().0,
            "ends of the wrong width for the payloads' size"
        );
        // A value may end where the one before it ends (null, empty text), not before.
        assert!(Row::from_encoding(Row::new(vec![Value::Null, Value::text(""), Value::Null]).encoding()).is_ok());
    }

    #[test]
    fn a_large_payload_takes_wide_ends() {
        let big = vec![0xABu8; 70_000];
        let row = Row::new(vec![Value::Int(1), Value::bytes(&big), Value::text("after")]);
        assert_eq!(row.bytes()[2] & FLAG_WIDE_ENDS, FLAG_WIDE_ENDS);
        assert_eq!(row.at(1).as_bytes(), Some(&big[..]));
        assert_eq!(row.at(2), Value::text("after"));
        let narrow = Row::new(vec![Value::bytes(&big[..65_535])]);
        assert_eq!(narrow.bytes()[2] & FLAG_WIDE_ENDS, 0);
        assert_eq!(narrow.at(0).as_bytes().map(<[u8]>::len), Some(65_535));
    }

    #[test]
    fn rows_compare_by_their_values() {
        let a = Row::from_slice(&sample());
        let b = Row::from_slice(&sample());
        assert_eq!(a, b);
        // Inline and shared bytes are one value, hence one encoding.
        let inline = Row::new(vec![Value::bytes(b"short")]);
        let shared = Row::new(vec![Value::Bytes(StdArc::from(&b"short"[..]))]);
        assert_eq!(inline, shared);
        assert_ne!(a, Row::new(vec![Value::Int(-7)]));
        assert_ne!(Row::new(vec![Value::Int(1)]), Row::new(vec![Value::Float(f64::from_bits(1))]));
    }

    #[test]
    fn a_fixed_shape_builds_the_rows_from_slice_builds() {
        let columns = [(ColumnType::Int, false), (ColumnType::Float, false), (ColumnType::Int, false)];
        let shape = FixedShape::of(columns.into_iter()).expect("ints and floats, not null");
        assert_eq!(shape.tags(), &[TAG_INT, TAG_FLOAT, TAG_INT][..]);
        for (a, b, c) in [(0, 0.0, 0), (-1, -2.5, i64::MAX), (i64::MIN, f64::NAN, 7)] {
            let values = [Value::Int(a), Value::Float(b), Value::Int(c)];
            let built = shape.build(values.iter()).expect("values of the shape");
            assert_eq!(built, Row::from_slice(&values), "byte for byte the general encoding");
            assert_eq!(built.to_vec().len(), 3);
        }
        // Not of the shape: a null, another type, too few or too many values.
        let misfits: [&[Value]; 4] = [
            &[Value::Int(1), Value::Null, Value::Int(2)],
            &[Value::Int(1), Value::Int(2), Value::Int(3)],
            &[Value::Int(1), Value::Float(2.0)],
            &[Value::Int(1), Value::Float(2.0), Value::Int(3), Value::Int(4)],
        ];
        for values in misfits {
            assert_eq!(shape.build(values.iter()), None, "{values:?}");
        }
        // Only tables of non-null ints and floats have a shape.
        for other in [(ColumnType::Int, true), (ColumnType::Text, false), (ColumnType::Bool, false)] {
            assert_eq!(FixedShape::of([(ColumnType::Int, false), other].into_iter()), None, "{other:?}");
        }
        assert_eq!(FixedShape::of(std::iter::empty()), None);
    }

    #[test]
    fn a_wide_fixed_shape_takes_wide_ends() {
        // 8,192 values of 8 bytes: 65,536 bytes of payload, past what u16 ends address.
        let n = NARROW_PAYLOAD_MAX_BYTES / 8 + 1;
        let shape = FixedShape::of(std::iter::repeat_n((ColumnType::Int, false), n)).expect("shape");
        let values: Vec<Value> = (0..n as i64).map(Value::Int).collect();
        let built = shape.build(values.iter()).expect("built");
        assert_eq!(built, Row::from_slice(&values));
        assert_eq!(built.get(n - 1), Some(ValueRef::Int(n as i64 - 1)));
        let entry = shape.entry_key(&[n - 1, 0]).expect("two columns").entry(&built, b"pk").expect("fits");
        assert_eq!(entry, general_entry(&built, &[n - 1, 0], b"pk"));
    }

    /// The key `TableSchema::secondary_key_of` makes: the values' general encoding, then `primary`.
    fn general_entry(row: &Row, columns: &[usize], primary: &[u8]) -> Key {
        let mut bytes = Vec::new();
        crate::storage::key::encode_into(row.columns_at(columns), &mut bytes).expect("encodable");
        bytes.extend_from_slice(primary);
        Key::from(bytes)
    }

    proptest::proptest! {
        /// A specialized entry key is the general one, for any ints and floats (negative, zero,
        /// NaN), any indexed columns and primary key, or declines: when the entry would not fit
        /// inline, the index has more than 4 columns, or the row is not of the shape.
        #[test]
        fn a_fixed_entry_key_is_the_general_one_or_declines(
            columns in proptest::collection::vec((proptest::bool::ANY, proptest::num::i64::ANY, proptest::num::f64::ANY), 1..8),
            indexed in proptest::collection::vec(0usize..8, 1..6),
            primary in proptest::collection::vec(proptest::num::u8::ANY, 0..30),
        ) {
            let shape = FixedShape::of(columns.iter().map(|&(float, _, _)| {
                (if float { ColumnType::Float } else { ColumnType::Int }, false)
            })).expect("ints and floats");
            let values: Vec<Value> =
                columns.iter().map(|&(float, i, f)| if float { Value::Float(f) } else { Value::Int(i) }).collect();
            let row = shape.build(values.iter()).expect("of the shape");
            let indexed: Vec<usize> = indexed.iter().map(|c| c % columns.len()).collect();
            match shape.entry_key(&indexed) {
                None => proptest::prop_assert!(indexed.len() > 4),
                Some(key) => {
                    let fits = 9 * indexed.len() + primary.len() <= KEY_INLINE_BYTES;
                    let entry = key.entry(&row, &primary);
                    proptest::prop_assert_eq!(entry.is_some(), fits);
                    if let Some(entry) = entry {
                        proptest::prop_assert_eq!(entry, general_entry(&row, &indexed, &primary));
                    }
                    // A row of another shape (one column more) is declined.
                    let longer: Vec<Value> = values.iter().cloned().chain([Value::Int(0)]).collect();
                    proptest::prop_assert!(key.entry(&Row::from_slice(&longer), &primary).is_none());
                }
            }
        }
    }

    #[test]
    fn with_changes_replaces_only_the_changed_values() {
        let values = sample();
        let row = Row::from_slice(&values);
        let new_text = Value::text("short");
        let changed = row.with_changes([(0, ValueRef::Int(99)), (3, new_text.view()), (7, ValueRef::Null)].into_iter());
        let mut expected = values.clone();
        expected[0] = Value::Int(99);
        expected[3] = new_text.clone();
        expected[7] = Value::Null;
        assert_eq!(changed.to_vec(), expected);
        assert_eq!(row.to_vec(), values, "the old row is unchanged");
        // Every value changed; a change past the end ignored.
        let wide: Vec<Value> = (0..20).map(Value::Int).collect();
        let all = Row::from_slice(&wide).with_changes((0..21).map(|i| (i, ValueRef::Int(100 + i as i64))));
        assert_eq!(all.to_vec(), (100..120).map(Value::Int).collect::<Vec<_>>());
    }

    /// Changes that keep every value's tag and size take the copy-and-overwrite path; its rows
    /// are byte for byte the rows encoding the changed values afresh gives, for every kind of
    /// value, in a row with wide ends too, and the old row keeps its values.
    #[test]
    fn changes_of_the_same_shape_give_the_freshly_encoded_row() {
        let values = sample();
        let same: Vec<(usize, Value)> = vec![
            (0, Value::Int(i64::MIN)),
            (1, Value::Null),
            (2, Value::Float(-0.5)),
            (3, Value::text("A TEXT LONGER THAN TWENTY-FOUR BYTES")),
            (4, Value::bytes(b"key:2")),
            (5, Value::Bytes(StdArc::from(&[7u8; 40][..]))),
            (6, Value::Bool(false)),
            (7, Value::text("")),
        ];
        let wide: Vec<Value> = (0..4).map(|i| Value::Bytes(StdArc::from(vec![i; 30_000]))).collect();
        let wide_changes = vec![(1, Value::Bytes(StdArc::from(vec![9; 30_000])))];
        for (values, changes) in [(values.clone(), same.clone()), (values, same[2..5].to_vec()), (wide, wide_changes)] {
            let row = Row::from_slice(&values);
            let changed = row.with_values(&changes);
            let mut expected = values.clone();
            for (i, v) in &changes {
                expected[*i] = v.clone();
            }
            assert_eq!(changed.bytes(), Row::from_slice(&expected).bytes());
            assert_eq!(changed.to_vec(), expected);
            assert_eq!(row.to_vec(), values, "the old row is unchanged");
        }
        // One change of another size among same-sized ones: re-encoded, same result.
        let mut mixed = same;
        mixed[3].1 = Value::text("shorter");
        let row = Row::from_slice(&sample());
        let mut expected = sample();
        for (i, v) in &mixed {
            expected[*i] = v.clone();
        }
        assert_eq!(row.with_values(&mixed).bytes(), Row::from_slice(&expected).bytes());
    }

    /// A value of any kind and size, wide payloads now and then.
    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Int),
            any::<bool>().prop_map(Value::Bool),
            any::<f64>().prop_map(Value::Float),
            "[a-z]{0,40}".prop_map(|t| Value::text(&t)),
            proptest::collection::vec(any::<u8>(), 0..48).prop_map(|b| Value::bytes(&b)),
            (0usize..3).prop_map(|k| Value::Bytes(StdArc::from(vec![7u8; 30_000 + k]))),
        ]
    }

    proptest::proptest! {
        /// Every path of `with_changes` (same shape, moved payloads in narrow rows, the writer
        /// for wide ones or a narrow row that grows wide) gives the bytes that encoding the
        /// changed values afresh gives, and leaves the old row as it was.
        #[test]
        fn any_changes_give_the_freshly_encoded_row(
            values in proptest::collection::vec(any_value(), 0..12),
            changes in proptest::collection::btree_map(0usize..14, any_value(), 0..6),
        ) {
            let row = Row::from_slice(&values);
            let changes: Vec<(usize, Value)> = changes.into_iter().collect();
            let changed = row.with_values(&changes);
            let mut expected = values.clone();
            for (i, v) in &changes {
                if let Some(slot) = expected.get_mut(*i) {
                    *slot = v.clone();
                }
            }
            let fresh = Row::from_slice(&expected);
            proptest::prop_assert_eq!(changed.bytes(), fresh.bytes());
            proptest::prop_assert_eq!(row.to_vec(), values);
        }
    }

    #[test]
    fn set_in_place_needs_the_same_size_and_the_only_reference() {
        let mut row = Row::new(vec![Value::Int(1), Value::bytes(b"abc"), Value::text("x")]);
        assert!(row.set_in_place(0, ValueRef::Int(5)));
        assert!(row.set_in_place(1, ValueRef::Bytes(b"xyz")));
        assert!(!row.set_in_place(1, ValueRef::Bytes(b"longer")), "another size");
        assert!(!row.set_in_place(2, ValueRef::Bytes(b"y")), "another type");
        assert!(!row.set_in_place(3, ValueRef::Int(1)), "past the end");
        assert_eq!(row.to_vec(), vec![Value::Int(5), Value::bytes(b"xyz"), Value::text("x")]);
        let shared = row.clone();
        assert!(!row.set_in_place(0, ValueRef::Int(6)), "shared");
        assert_eq!(shared.at(0), Value::Int(5));
    }

    fn scratch_len_and_capacity() -> (usize, usize) {
        ROW_SCRATCH.with(|s| {
            let s = s.borrow();
            (s.len(), s.capacity())
        })
    }

    /// `Row::build` leaves the scratch empty after a row and after a failed fill, so no value of
    /// one build reaches the next, and drops a failed fill's values at once.
    #[test]
    fn build_leaves_nothing_behind() {
        let bytes: StdArc<[u8]> = StdArc::from(&[1u8; 64][..]);
        let row = Row::build::<()>(|values| {
            values.extend([Value::Int(7), Value::Bytes(StdArc::clone(&bytes))]);
            Ok(())
        })
        .expect("fill succeeds");
        assert_eq!(row.to_vec(), vec![Value::Int(7), Value::Bytes(StdArc::clone(&bytes))]);
        assert_eq!(StdArc::strong_count(&bytes), 1, "the row holds a copy, the scratch nothing");
        assert_eq!(scratch_len_and_capacity().0, 0);
        let failed = Row::build(|values| {
            values.push(Value::Bytes(StdArc::clone(&bytes)));
            Err("bad value")
        });
        assert_eq!(failed.err(), Some("bad value"));
        assert_eq!(StdArc::strong_count(&bytes), 1, "a failed fill's values are dropped at once");
    }

    /// The scratch vector keeps at most `ROW_SCRATCH_KEPT_MAX` values' room after a wide row, and
    /// after a wide fill that failed.
    #[test]
    fn build_keeps_bounded_scratch_room() {
        let wide = ROW_SCRATCH_KEPT_MAX + 1;
        let row = Row::build::<()>(|values| {
            values.extend((0..wide).map(|i| Value::Int(i as i64)));
            Ok(())
        })
        .expect("fill succeeds");
        assert_eq!(row.len(), wide);
        assert_eq!(row.at(wide - 1), Value::Int(wide as i64 - 1));
        let (len, capacity) = scratch_len_and_capacity();
        assert_eq!(len, 0);
        assert!(capacity <= ROW_SCRATCH_KEPT_MAX, "kept {capacity} values' room");

        let failed = Row::build(|values| {
            values.extend((0..wide).map(|i| Value::Int(i as i64)));
            Err("too wide")
        });
        assert_eq!(failed.err(), Some("too wide"));
        let (len, capacity) = scratch_len_and_capacity();
        assert_eq!(len, 0);
        assert!(capacity <= ROW_SCRATCH_KEPT_MAX, "kept {capacity} values' room after a failed fill");
    }
}
