//! Scalar values and column types.
//!
//! A [`Value`] is what a procedure parameter or local variable holds, what a key is built from,
//! and what is read out of a row ([`Row::value`]) to be kept. A stored row holds its values as
//! bytes ([`super::row`]); [`ValueRef`] borrows one from there (or from a `Value`) for readers
//! that only look, and [`Columns`] lets them read a row and a slice of values alike.
//!
//! Text is a [`CompactString`]: up to 24 bytes live inline in the 24-byte value, so most TPC-C
//! strings (names, addresses, `dist_info`) read out of a row are never allocated. Longer text is
//! copied on clone; long bytes are shared (`Arc<[u8]>`), short ones inline ([`InlineBytes`]).

use compact_str::CompactString;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

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
    /// A clone with ints and nulls copied inline: where a procedure reads a variable, a constant
    /// or an array element, most values are ints (keys, counters, quantities), and `clone` is a
    /// call that matches on every variant (TPC-C: −0.3 % instructions).
    #[inline(always)]
    pub fn clone_inline(&self) -> Value {
        match self {
            Value::Int(x) => Value::Int(*x),
            Value::Null => Value::Null,
            other => other.clone(),
        }
    }

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

    /// The value, borrowed ([`ValueRef`]).
    #[inline]
    pub fn view(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Int(*v),
            Value::Float(v) => ValueRef::Float(*v),
            Value::Text(s) => ValueRef::Text(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
            Value::InlineBytes(b) => ValueRef::Bytes(b.as_slice()),
            Value::Bool(v) => ValueRef::Bool(*v),
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

pub use super::row::{ROW_SCRATCH_KEPT_MAX, Row};

/// A value borrowed from where it lies: a row's bytes ([`Row::get`]) or a [`Value`]
/// ([`Value::view`]). Readers that only look (key encoding, checks, comparisons, the log's
/// encoders) take these, so reading a column of a row copies nothing; [`ValueRef::to_value`]
/// makes an owned value when one must be kept.
#[derive(Clone, Copy)]
pub enum ValueRef<'a> {
    /// The absence of a value.
    Null,
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// UTF-8 text.
    Text(&'a str),
    /// Raw bytes.
    Bytes(&'a [u8]),
    /// A boolean (procedure values only).
    Bool(bool),
}

impl<'a> ValueRef<'a> {
    /// An owned copy: text and bytes are copied (short ones inline, see [`Value::bytes`]).
    #[inline]
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Int(v) => Value::Int(v),
            ValueRef::Float(v) => Value::Float(v),
            ValueRef::Text(s) => Value::text(s),
            ValueRef::Bytes(b) => Value::bytes(b),
            ValueRef::Bool(b) => Value::Bool(b),
        }
    }

    /// The value's type, or `None` for `Null`.
    #[inline]
    pub fn column_type(self) -> Option<ColumnType> {
        match self {
            ValueRef::Null => None,
            ValueRef::Int(_) => Some(ColumnType::Int),
            ValueRef::Float(_) => Some(ColumnType::Float),
            ValueRef::Text(_) => Some(ColumnType::Text),
            ValueRef::Bytes(_) => Some(ColumnType::Bytes),
            ValueRef::Bool(_) => Some(ColumnType::Bool),
        }
    }

    /// Whether this is `Null`.
    #[inline]
    pub fn is_null(self) -> bool {
        matches!(self, ValueRef::Null)
    }

    /// The integer inside, if this is an `Int`.
    #[inline]
    pub fn as_int(self) -> Option<i64> {
        match self {
            ValueRef::Int(v) => Some(v),
            _ => None,
        }
    }

    /// The float inside (integers widen), if numeric.
    pub fn as_float(self) -> Option<f64> {
        match self {
            ValueRef::Float(v) => Some(v),
            ValueRef::Int(v) => Some(v as f64),
            _ => None,
        }
    }

    /// The text inside, if this is `Text`.
    #[inline]
    pub fn as_text(self) -> Option<&'a str> {
        match self {
            ValueRef::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes inside, if this is `Bytes` or `Text`.
    #[inline]
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            ValueRef::Bytes(b) => Some(b),
            ValueRef::Text(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// The boolean inside, if this is `Bool`.
    pub fn as_bool(self) -> Option<bool> {
        match self {
            ValueRef::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// [`Value::total_cmp`]'s order.
    pub fn total_cmp(self, other: ValueRef<'_>) -> Ordering {
        fn rank(v: ValueRef<'_>) -> u8 {
            match v {
                ValueRef::Null => 0,
                ValueRef::Bool(_) => 1,
                ValueRef::Int(_) => 2,
                ValueRef::Float(_) => 3,
                ValueRef::Text(_) => 4,
                ValueRef::Bytes(_) => 5,
            }
        }
        match (self, other) {
            (ValueRef::Int(a), ValueRef::Int(b)) => a.cmp(&b),
            (ValueRef::Float(a), ValueRef::Float(b)) => a.total_cmp(&b),
            (ValueRef::Text(a), ValueRef::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (ValueRef::Bytes(a), ValueRef::Bytes(b)) => a.cmp(b),
            (ValueRef::Bool(a), ValueRef::Bool(b)) => a.cmp(&b),
            _ => rank(self).cmp(&rank(other)),
        }
    }
}

impl PartialEq for ValueRef<'_> {
    /// As [`Value`]'s: floats by `total_cmp`, so `NaN == NaN`.
    fn eq(&self, other: &ValueRef<'_>) -> bool {
        self.total_cmp(*other) == Ordering::Equal
    }
}

impl PartialEq<Value> for ValueRef<'_> {
    fn eq(&self, other: &Value) -> bool {
        self.total_cmp(other.view()) == Ordering::Equal
    }
}

impl PartialEq<ValueRef<'_>> for Value {
    fn eq(&self, other: &ValueRef<'_>) -> bool {
        self.view().total_cmp(*other) == Ordering::Equal
    }
}

impl fmt::Debug for ValueRef<'_> {
    /// As [`Value`]'s, so that a row prints as the values it holds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Null => f.write_str("Null"),
            ValueRef::Int(v) => f.debug_tuple("Int").field(v).finish(),
            ValueRef::Float(v) => f.debug_tuple("Float").field(v).finish(),
            ValueRef::Text(s) => f.debug_tuple("Text").field(s).finish(),
            ValueRef::Bytes(b) => f.debug_tuple("Bytes").field(b).finish(),
            ValueRef::Bool(v) => f.debug_tuple("Bool").field(v).finish(),
        }
    }
}

impl fmt::Display for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Text(s) => write!(f, "'{}'", s.replace('\'', "''")),
            ValueRef::Bytes(b) => {
                f.write_str("x'")?;
                for byte in b.iter() {
                    write!(f, "{byte:02x}")?;
                }
                f.write_str("'")
            }
            other => fmt::Display::fmt(&other.to_value(), f),
        }
    }
}

/// Values by position: a row ([`Row`]) or a slice of values (a procedure's frame, a decoded
/// log record). What reads a row's columns without keeping them (key encoding, schema checks,
/// the log's encoders) takes this, so it reads a stored row where it lies.
pub trait Columns {
    /// How many values.
    fn width(&self) -> usize;
    /// Value `i`; panics past [`Columns::width`], as slice indexing does.
    fn column(&self, i: usize) -> ValueRef<'_>;
    /// The values in order.
    fn columns(&self) -> impl ExactSizeIterator<Item = ValueRef<'_>> + Clone {
        (0..self.width()).map(move |i| self.column(i))
    }
    /// The values at `positions`, in their order.
    fn columns_at(&self, positions: &[usize]) -> impl Iterator<Item = ValueRef<'_>> + Clone {
        positions.iter().map(move |&p| self.column(p))
    }
    /// The values' types in order (`None`: null), for checks that need no value.
    fn column_types(&self) -> impl Iterator<Item = Option<ColumnType>> {
        self.columns().map(ValueRef::column_type)
    }
    /// The types of the values at `positions`, in their order (`None`: null); panics past
    /// [`Columns::width`]. A compiled update's check of the columns it set.
    fn column_types_at(&self, positions: &[usize]) -> impl Iterator<Item = Option<ColumnType>> {
        self.columns_at(positions).map(ValueRef::column_type)
    }
}

/// A slice, an array or a vector of values.
impl<T: AsRef<[Value]> + ?Sized> Columns for T {
    #[inline]
    fn width(&self) -> usize {
        self.as_ref().len()
    }
    #[inline]
    fn column(&self, i: usize) -> ValueRef<'_> {
        self.as_ref()[i].view()
    }
    fn columns(&self) -> impl ExactSizeIterator<Item = ValueRef<'_>> + Clone {
        self.as_ref().iter().map(Value::view)
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
