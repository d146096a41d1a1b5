//! Storage: typed rows, order-preserving keys, records with Silo's TID word, concurrent ordered
//! indexes, tables and the catalog.
//!
//! Paper concepts implemented here (SiloR §2, "Silo"): tables of typed records kept in concurrent
//! ordered trees, one primary tree per table plus one tree per secondary index; key data in the
//! tree and values in separately allocated records; each record carrying the TID of its last
//! writer with lock, latest and absent status bits ([`record::Record`], [`crate::txn::tid`]); and,
//! for Taurus, the `last_writer` field of every record.
//!
//! See `docs/storage.md` for the design and the index benchmark behind the backend choice.

pub mod index;
pub mod key;
pub mod point;
pub mod prefetch;
pub mod record;
pub mod retire;
pub mod row;
pub mod schema;
pub mod table;
pub mod value;

pub use index::{Direction, IndexBackend, KeyRange, OrderedIndex};
pub use key::Key;
pub use record::Record;
pub use row::{FixedEntryKey, FixedShape, RowEncodingError};
pub use schema::{Column, IndexSchema, SchemaError, TableId, TableSchema};
pub use table::{Catalog, EntryKeys, Table};
pub use value::{ColumnType, Columns, ParamValue, Row, Value, ValueRef};
