//! Scalar values and column types.
//!
//! A [`Value`] is what a column of a row holds, what a procedure parameter or local variable holds,
//! and what a key is built from. Copying a value out of a shared row into a procedure's frame must
//! be cheap, and so must copying a whole row.
//!
//! Text is a [`CompactString`]: up to 24 bytes live inline in the 24-byte value, so copying a row
//! (every update builds a new after-image from the old row) is a `memcpy` with no reference count
//! to touch on another cache line, and most TPC-C strings (names, addresses, `dist_info`) are
//! never allocated at all. Longer text is copied on clone; bytes stay shared (`Arc<[u8]>`) since
//! the key-value and YCSB values they hold are long.

use compact_str::CompactString;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;
use triomphe::ThinArc;

/// The type of a table column or of a procedure value.
///
/// `Bool` exists for procedure conditions and locals; it is not a column type (the schema
/// model has int, float, text and bytes), and the schema checker rejects it in tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// 64-bit signed integer.
    Int,
    /// 64-bit IEEE float.
    Float,
    /// UTF-8 text.
    Text,
    /// Uninterpreted bytes.
    Bytes,
    /// Boolean (procedure values only).
    Bool,
}

impl ColumnType {
    /// The name used in the procedure language and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Int => "int",
            ColumnType::Float => "float",
            ColumnType::Text => "text",
            ColumnType::Bytes => "bytes",
            ColumnType::Bool => "bool",
        }
    }

    /// Parses a type name as written in the language (`int`, `bigint`, `float`, `double`, `text`,
    /// `varchar`, `bytes`, `bool`).
    pub fn from_name(name: &str) -> Option<ColumnType> {
        match name.to_ascii_lowercase().as_str() {
            "int" | "integer" | "bigint" | "int64" => Some(ColumnType::Int),
            "float" | "double" | "real" | "float64" => Some(ColumnType::Float),
            "text" | "varchar" | "string" => Some(ColumnType::Text),
            "bytes" | "blob" | "bytea" => Some(ColumnType::Bytes),
            "bool" | "boolean" => Some(ColumnType::Bool),
            _ => None,
        }
    }

    /// Whether a column of this type may appear in a table schema.
    pub fn is_storable(self) -> bool {
        !matches!(self, ColumnType::Bool)
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The longest byte string a [`Value`] holds inline ([`Value::InlineBytes`]): what fits beside
/// its length in the 24 bytes a value takes, clear of the byte where `Text` keeps its tag.
pub const INLINE_BYTES_MAX: usize = 22;

/// Bytes short enough to live inside a [`Value`] (at most [`INLINE_BYTES_MAX`]). A short key
/// column of the server's keyspace (`key:1234567`) was a 32-byte allocation of its own per row.
#[derive(Clone, Copy)]
pub struct InlineBytes {
    len: u8,
    bytes: [u8; INLINE_BYTES_MAX],
}

impl InlineBytes {
    /// `b` held inline, or `None` if it is longer than [`INLINE_BYTES_MAX`].
    #[inline]
    pub fn new(b: &[u8]) -> Option<InlineBytes> {
        let len = u8::try_from(b.len()).ok().filter(|&len| usize::from(len) <= INLINE_BYTES_MAX)?;
        let mut bytes = [0u8; INLINE_BYTES_MAX];
        bytes[..b.len()].copy_from_slice(b);
        Some(InlineBytes { len, bytes })
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for InlineBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

/// One scalar value. `Null` is the SQL null: it is a member of every nullable type.
#[derive(Clone, Default)]
pub enum Value {
    /// The absence of a value.
    #[default]
    Null,
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// UTF-8 text.
    Text(CompactString),
    /// Raw bytes, shared: a clone is a reference count, whatever their length.
    Bytes(Arc<[u8]>),
    /// Raw bytes of at most [`INLINE_BYTES_MAX`], held in the value itself: no allocation, no
    /// count. The same column type as `Bytes`, and equal to a `Bytes` of the same bytes; which
    /// one holds a value is a matter of size, not of meaning ([`Value::bytes`] chooses).
    InlineBytes(InlineBytes),
    /// A boolean (procedure values only).
    Bool(bool),
}

impl Value {
    /// Builds a text value.
    pub fn text(s: &str) -> Value {
        Value::Text(CompactString::from(s))
    }

    /// Builds a bytes value: inline when short enough, shared otherwise.
    #[inline]
    pub fn bytes(b: &[u8]) -> Value {
        match InlineBytes::new(b) {
            Some(inline) => Value::InlineBytes(inline),
            None => Value::Bytes(Arc::from(b)),
        }
    }

    /// The bytes of a `Bytes` or `InlineBytes` value, shared: a count for `Bytes`, a copy for
    /// inline ones.
    pub fn shared_bytes(&self) -> Option<Arc<[u8]>> {
        match self {
            Value::Bytes(b) => Some(Arc::clone(b)),
            Value::InlineBytes(b) => Some(Arc::from(b.as_slice())),
            _ => None,
        }
    }

    /// The value's type, or `None` for `Null`.
    pub fn column_type(&self) -> Option<ColumnType> {
        match self {
            Value::Null => None,
            Value::Int(_) => Some(ColumnType::Int),
            Value::Float(_) => Some(ColumnType::Float),
            Value::Text(_) => Some(ColumnType::Text),
            Value::Bytes(_) | Value::InlineBytes(_) => Some(ColumnType::Bytes),
            Value::Bool(_) => Some(ColumnType::Bool),
        }
    }

    /// Whether this is `Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer inside, if this is an `Int`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The float inside (integers widen), if numeric.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            Value::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    /// The text inside, if this is `Text`.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes inside, if this is `Bytes` or `Text`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            Value::InlineBytes(b) => Some(b.as_slice()),
            Value::Text(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// The boolean inside, if this is `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Total order used by keys and by `ORDER BY`: null first, then by type, then by value; floats
    /// by IEEE total order so that NaN sorts consistently.
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        fn rank(v: &Value) -> u8 {
            match v {
                Value::Null => 0,
                Value::Bool(_) => 1,
                Value::Int(_) => 2,
                Value::Float(_) => 3,
                Value::Text(_) => 4,
                Value::Bytes(_) | Value::InlineBytes(_) => 5,
            }
        }
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            // A row copied for an update shares its unchanged byte values with the old row, and
            // finding an update's changed columns (the column patches of `serial-data` and
            // `taurus-data`) compares every pair: equal pointers decide without reading the bytes,
            // which was 7 % of a YCSB worker's time under `taurus-data` (`perf`).
            (Value::Bytes(a), Value::Bytes(b)) if Arc::ptr_eq(a, b) => Ordering::Equal,
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            // Bytes by content, whichever way each is held (`as_bytes` is `Some` for both).
            (Value::Bytes(_) | Value::InlineBytes(_), Value::Bytes(_) | Value::InlineBytes(_)) => {
                self.as_bytes().cmp(&other.as_bytes())
            }
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            _ => rank(self).cmp(&rank(other)),
        }
    }
}

impl fmt::Debug for Value {
    /// As derived, except that inline bytes print as `Bytes`: how bytes are held is not part of
    /// the value (the crash tests compare states by these strings).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("Null"),
            Value::Int(v) => f.debug_tuple("Int").field(v).finish(),
            Value::Float(v) => f.debug_tuple("Float").field(v).finish(),
            Value::Text(s) => f.debug_tuple("Text").field(s).finish(),
            Value::Bytes(b) => f.debug_tuple("Bytes").field(&&b[..]).finish(),
            Value::InlineBytes(b) => f.debug_tuple("Bytes").field(&b.as_slice()).finish(),
            Value::Bool(v) => f.debug_tuple("Bool").field(v).finish(),
        }
    }
}

impl PartialEq for Value {
    /// Structural equality; floats compare by bit pattern class (`total_cmp`), so `NaN == NaN`,
    /// which is what tests comparing table contents want.
    fn eq(&self, other: &Value) -> bool {
        self.total_cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v:?}"),
            Value::Text(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Value::Bytes(_) | Value::InlineBytes(_) => {
                f.write_str("x'")?;
                for byte in self.as_bytes().unwrap_or_default() {
                    write!(f, "{byte:02x}")?;
                }
                f.write_str("'")
            }
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::text(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

/// The most values of room [`Row::build`]'s per-thread scratch vector keeps between rows.
pub const ROW_SCRATCH_KEPT_MAX: usize = 1024;

thread_local! {
    static ROW_SCRATCH: std::cell::RefCell<Vec<Value>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A row: one value per column of its table, in schema order. Rows are immutable once shared;
/// an update builds a new row (the after-image) and installs it whole.
///
/// A row is one allocation: a reference count, the number of values, then the values
/// (`triomphe::ThinArc`). An `Arc<Vec<Value>>` was two (the `Arc` around the vector, and the
/// vector's buffer), so every row read chased one more pointer and every row built or loaded by
/// recovery paid one more allocation; the pointer is thin, so a record can still swap its row
/// atomically (see [`crate::storage::record`]).
#[derive(Clone, PartialEq)]
pub struct Row(ThinArc<(), Value>);

impl Row {
    /// A row holding `values`, in one allocation of exactly their size.
    pub fn new(values: Vec<Value>) -> Row {
        Row(ThinArc::from_header_and_iter((), values.into_iter()))
    }

    /// A row of the values an iterator of known length yields, allocated once.
    pub fn from_exact_iter<I: ExactSizeIterator<Item = Value>>(values: I) -> Row {
        Row(ThinArc::from_header_and_iter((), values))
    }

    /// A row of the values `fill` pushes, in one allocation of their number: they are gathered
    /// in a per-thread scratch vector first, so a fallible build (evaluating a procedure's values,
    /// decoding a log record) allocates the row alone, not a vector too. A `fill` that fails
    /// builds nothing. At most [`ROW_SCRATCH_KEPT_MAX`] values' room is kept between calls.
    pub fn build<E>(fill: impl FnOnce(&mut Vec<Value>) -> Result<(), E>) -> Result<Row, E> {
        ROW_SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut values) => {
                values.clear();
                let built = fill(&mut values).map(|()| Row::from_scratch(&mut values));
                // Empty already after a row; drops a failed fill's values.
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
                Ok(Row::new(values))
            }
        })
    }

    /// The row of the values in `scratch`, which it leaves empty. The values are moved out one by
    /// one, leaving nulls, not drained: whether `Drain`'s drop was inlined depended on which
    /// codegen unit a caller landed in, and out of line it cost 24 instructions a row (a change
    /// elsewhere in the crate once moved direct replay's cost per record by 1 % that way).
    fn from_scratch(scratch: &mut Vec<Value>) -> Row {
        let row = Row::from_exact_iter(scratch.iter_mut().map(std::mem::take));
        // SAFETY: a length of 0 exposes no uninitialized value. The values it forgets are the
        // nulls `take` left, which own nothing, so nothing leaks. (Should the row's allocation
        // panic first, the values stay, and the next `build`'s `clear` drops them.)
        unsafe { scratch.set_len(0) };
        row
    }

    /// A row of clones of `values`.
    pub fn from_slice(values: &[Value]) -> Row {
        Row(ThinArc::from_header_and_iter((), values.iter().cloned()))
    }

    /// The row with no values (the placeholder of an absent record).
    pub fn empty() -> Row {
        Row::from_exact_iter(std::iter::empty())
    }

    /// Changes the values through `f`: in place when this is the only reference to the row, else
    /// in a copy that replaces it (copy on write, as `Arc::make_mut`).
    pub fn update_values<R>(&mut self, f: impl FnOnce(&mut [Value]) -> R) -> R {
        let in_place = self.0.with_arc_mut(move |arc| match triomphe::Arc::get_mut(arc) {
            Some(inner) => Ok(f(inner.slice_mut())),
            None => Err(f),
        });
        match in_place {
            Ok(result) => result,
            Err(f) => {
                // Shared (with the record, or a reader): copy once, then change the copy, which
                // nothing else can have cloned yet.
                *self = Row::from_slice(self);
                self.update_values(f)
            }
        }
    }

    /// The thin pointer a record holds.
    pub(crate) fn into_thin(self) -> ThinArc<(), Value> {
        self.0
    }

    /// The address of the row's allocation (its count, then its values), for a prefetch.
    pub(crate) fn as_ptr_for_prefetch(&self) -> *const u8 {
        self.0.heap_ptr().cast::<u8>()
    }

    /// A row from a record's thin pointer.
    pub(crate) fn from_thin(thin: ThinArc<(), Value>) -> Row {
        Row(thin)
    }
}

impl std::ops::Deref for Row {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.0.slice
    }
}

impl AsRef<[Value]> for Row {
    fn as_ref(&self) -> &[Value] {
        self
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

/// Collects through a vector (an iterator's length is not known in advance): hot paths use
/// [`Row::from_exact_iter`] or [`Row::new`].
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_bytes_are_inline_and_equal_to_shared_ones() {
        let short = [7u8; INLINE_BYTES_MAX];
        let long = [7u8; INLINE_BYTES_MAX + 1];
        assert!(matches!(Value::bytes(&short), Value::InlineBytes(_)));
        assert!(matches!(Value::bytes(&[]), Value::InlineBytes(_)));
        assert!(matches!(Value::bytes(&long), Value::Bytes(_)));
        for b in [&short[..], &long[..], &[][..], b"key:1"] {
            let (value, shared) = (Value::bytes(b), Value::Bytes(Arc::from(b)));
            assert_eq!(value.as_bytes(), Some(b));
            assert_eq!(value.column_type(), Some(ColumnType::Bytes));
            assert_eq!(value, shared);
            assert_eq!(value.to_string(), shared.to_string());
            assert_eq!(format!("{value:?}"), format!("{shared:?}"));
            assert_eq!(value.shared_bytes().as_deref(), Some(b));
        }
        // Ordered by content whichever way each is held: a shorter prefix first.
        let (a, b) = (Value::bytes(b"ab"), Value::Bytes(Arc::from(&b"abc"[..])));
        assert_eq!(a.total_cmp(&b), Ordering::Less);
        assert_eq!(b.total_cmp(&a), Ordering::Greater);
        assert_eq!(Value::bytes(&long).total_cmp(&Value::bytes(&short)), Ordering::Greater);
    }

    #[test]
    fn total_order_puts_null_first_and_orders_floats() {
        let mut vals = [Value::Float(2.5), Value::Null, Value::Float(-1.0), Value::Float(f64::NAN)];
        vals.sort_by(|a, b| a.total_cmp(b));
        assert!(vals[0].is_null());
        assert_eq!(vals[1], Value::Float(-1.0));
        assert_eq!(vals[2], Value::Float(2.5));
    }

    #[test]
    fn type_names_round_trip() {
        for ty in [ColumnType::Int, ColumnType::Float, ColumnType::Text, ColumnType::Bytes, ColumnType::Bool] {
            assert_eq!(ColumnType::from_name(ty.name()), Some(ty));
        }
        assert_eq!(ColumnType::from_name("decimal"), None);
    }

    fn scratch_len_and_capacity() -> (usize, usize) {
        ROW_SCRATCH.with(|s| {
            let s = s.borrow();
            (s.len(), s.capacity())
        })
    }

    /// `Row::build` moves the values into the row (a shared value's count shows neither a copy
    /// in the scratch vector nor a leak), and leaves the scratch empty after a row and after a
    /// failed fill, so no value of one build reaches the next.
    #[test]
    fn build_moves_the_values_and_leaves_nothing_behind() {
        let bytes: Arc<[u8]> = Arc::from(&b"payload"[..]);
        let row = Row::build::<()>(|values| {
            values.extend([Value::Int(7), Value::Bytes(Arc::clone(&bytes)), Value::text("a longer text than inline")]);
            Ok(())
        })
        .expect("fill succeeds");
        assert_eq!(
            &row[..],
            &[Value::Int(7), Value::Bytes(Arc::clone(&bytes)), Value::text("a longer text than inline")]
        );
        assert_eq!(Arc::strong_count(&bytes), 2, "the row holds the value, the scratch does not");
        assert_eq!(scratch_len_and_capacity().0, 0);
        drop(row);
        assert_eq!(Arc::strong_count(&bytes), 1, "dropping the row drops the value");

        let failed = Row::build(|values| {
            values.push(Value::Bytes(Arc::clone(&bytes)));
            Err("bad value")
        });
        assert_eq!(failed.err(), Some("bad value"));
        assert_eq!(Arc::strong_count(&bytes), 1, "a failed fill's values are dropped at once");
        let next = Row::build::<()>(|values| {
            values.push(Value::Int(1));
            Ok(())
        })
        .expect("fill succeeds");
        assert_eq!(&next[..], &[Value::Int(1)]);
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
        assert_eq!(row[wide - 1], Value::Int(wide as i64 - 1));
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

/// A procedure argument: a scalar, or an array of scalars (TPC-C new-order's item lists).
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// One value.
    Scalar(Value),
    /// An array of values, all of the parameter's element type (or null).
    Array(Arc<[Value]>),
}

impl From<Value> for ParamValue {
    fn from(v: Value) -> ParamValue {
        ParamValue::Scalar(v)
    }
}

impl From<Vec<Value>> for ParamValue {
    fn from(v: Vec<Value>) -> ParamValue {
        ParamValue::Array(Arc::from(v))
    }
}

// A row is a vector of values: their size is what an update copies per column.
const _: () = assert!(std::mem::size_of::<Value>() == 24);
