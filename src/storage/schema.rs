//! Table schemas: typed, nullable columns, a primary key of one or more columns, and secondary
//! indexes (non-unique allowed).
//!
//! A secondary index entry's key is `encode(index columns) ++ encode(primary key)`, so entries of a
//! non-unique index never collide and a scan of an index-column prefix yields the matching rows
//! in index order, ties broken by primary key.

use super::key::{self, Key, KeyError};
use super::row::FixedShape;
use super::value::{ColumnType, Columns, Row, Value};
use std::collections::HashSet;

/// Identifies a table within a database. Stable for the life of the catalog.
pub type TableId = u32;

/// The most columns a table may have.
pub const COLUMNS_MAX: usize = 256;
/// The most secondary indexes a table may have.
pub const SECONDARY_INDEXES_MAX: usize = 32;

/// One column of a table.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Column name, unique within the table (compared case-insensitively).
    pub name: String,
    /// The column's type.
    pub ty: ColumnType,
    /// Whether the column accepts `Null`.
    pub nullable: bool,
}

impl Column {
    /// Whether the column admits a value of type `got` (`None`: null): its type, or null if
    /// nullable. Takes the value's type, read once, rather than the value: the one test both
    /// [`TableSchema::check_row`] and [`TableSchema::check_value`] make.
    #[inline]
    fn admits(&self, got: Option<ColumnType>) -> bool {
        match got {
            None => self.nullable,
            Some(ty) => ty == self.ty,
        }
    }
}

/// A secondary index over some columns of a table.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexSchema {
    /// Index name, unique within the table.
    pub name: String,
    /// Positions of the indexed columns, in index order.
    pub columns: Vec<usize>,
}

/// A table's schema.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSchema {
    /// Table name, unique within the database.
    pub name: String,
    /// Columns in row order.
    pub columns: Vec<Column>,
    /// Positions of the primary-key columns, in key order.
    pub primary_key: Vec<usize>,
    /// Secondary indexes.
    pub indexes: Vec<IndexSchema>,
}

/// A schema or row that breaks the rules of its table.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SchemaError {
    /// The schema itself is invalid.
    #[error("table {table}: {reason}")]
    Invalid {
        /// The table.
        table: String,
        /// What is wrong.
        reason: String,
    },
    /// A row has the wrong number of values.
    #[error("table {table}: row has {got} values, the table has {expected} columns")]
    Arity {
        /// The table.
        table: String,
        /// Columns in the table.
        expected: usize,
        /// Values in the row.
        got: usize,
    },
    /// A value does not fit its column.
    #[error("table {table}: column {column} is {expected}, got {got}")]
    Type {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// The column's type, with nullability.
        expected: String,
        /// What the value was.
        got: String,
    },
    /// A key could not be encoded.
    #[error("table {table}: {source}")]
    Key {
        /// The table.
        table: String,
        /// The encoding error.
        source: KeyError,
    },
}

impl TableSchema {
    /// Checks the schema's own rules: names unique, storable types, a non-empty primary key over
    /// non-nullable columns, indexes over existing columns, and the size limits.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let invalid = |reason: String| SchemaError::Invalid { table: self.name.clone(), reason };
        if self.columns.is_empty() || self.columns.len() > COLUMNS_MAX {
            return Err(invalid(format!("a table needs 1 to {COLUMNS_MAX} columns, has {}", self.columns.len())));
        }
        let mut names = HashSet::new();
        for c in &self.columns {
            if !names.insert(c.name.to_ascii_lowercase()) {
                return Err(invalid(format!("column {} is declared twice", c.name)));
            }
            if !c.ty.is_storable() {
                return Err(invalid(format!("column {} has type {}, which a table cannot store", c.name, c.ty)));
            }
        }
        if self.primary_key.is_empty() {
            return Err(invalid("a primary key is required".into()));
        }
        self.check_positions("primary key", &self.primary_key)?;
        for &p in &self.primary_key {
            if self.columns[p].nullable {
                return Err(invalid(format!("primary-key column {} must be not null", self.columns[p].name)));
            }
        }
        if self.indexes.len() > SECONDARY_INDEXES_MAX {
            return Err(invalid(format!("at most {SECONDARY_INDEXES_MAX} secondary indexes")));
        }
        let mut index_names = HashSet::new();
        for index in &self.indexes {
            if !index_names.insert(index.name.to_ascii_lowercase()) {
                return Err(invalid(format!("index {} is declared twice", index.name)));
            }
            if index.columns.is_empty() {
                return Err(invalid(format!("index {} has no columns", index.name)));
            }
            self.check_positions(&format!("index {}", index.name), &index.columns)?;
        }
        Ok(())
    }

    fn check_positions(&self, what: &str, positions: &[usize]) -> Result<(), SchemaError> {
        let mut seen = HashSet::new();
        for &p in positions {
            if p >= self.columns.len() || !seen.insert(p) {
                return Err(SchemaError::Invalid {
                    table: self.name.clone(),
                    reason: format!("{what} names a column that does not exist or names one twice"),
                });
            }
        }
        Ok(())
    }

    /// Position of the column called `name` (case-insensitive).
    pub fn column_position(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// Position of the secondary index called `name` (case-insensitive).
    pub fn index_position(&self, name: &str) -> Option<usize> {
        self.indexes.iter().position(|i| i.name.eq_ignore_ascii_case(name))
    }

    /// The layout every row of the table shares when every column is a non-null int or float
    /// ([`FixedShape`]); `None` otherwise. Computed when a plan is compiled, not per row.
    pub fn fixed_shape(&self) -> Option<FixedShape> {
        FixedShape::of(self.columns.iter().map(|c| (c.ty, c.nullable)))
    }

    /// Checks a row against the schema: arity, types and nullability.
    pub fn check_row<C: Columns + ?Sized>(&self, row: &C) -> Result<(), SchemaError> {
        if row.width() != self.columns.len() {
            return Err(SchemaError::Arity {
                table: self.name.clone(),
                expected: self.columns.len(),
                got: row.width(),
            });
        }
        // The columns zipped, not looked up by position: recovery checks every row it installs.
        for (position, (got, column)) in row.column_types().zip(&self.columns).enumerate() {
            if !column.admits(got) {
                return Err(self.misfit(position, got));
            }
        }
        Ok(())
    }

    /// [`TableSchema::check_row`] of a row that differs from a checked row of this table only
    /// at `positions` (in range, increasing): its width, and the values at `positions`. An
    /// `update` whose `set`s name those columns checks its new row so, in the time of the
    /// columns it set rather than of the whole row; debug builds check the whole row too.
    pub fn check_changed_columns<C: Columns + ?Sized>(&self, row: &C, positions: &[usize]) -> Result<(), SchemaError> {
        if row.width() != self.columns.len() {
            return self.check_row(row);
        }
        debug_assert!(positions.windows(2).all(|w| w[0] < w[1]), "changed columns in increasing order");
        for (&position, got) in positions.iter().zip(row.column_types_at(positions)) {
            if !self.columns[position].admits(got) {
                return Err(self.misfit(position, got));
            }
        }
        debug_assert!(self.check_row(row).is_ok(), "a column outside {positions:?} does not fit");
        Ok(())
    }

    /// Checks that column `position` admits `value` (its type, or null if nullable).
    #[inline]
    pub fn check_value(&self, position: usize, value: &Value) -> Result<(), SchemaError> {
        let Some(column) = self.columns.get(position) else {
            return Err(SchemaError::Arity {
                table: self.name.clone(),
                expected: self.columns.len(),
                got: position + 1,
            });
        };
        let got = value.column_type();
        if !column.admits(got) {
            return Err(self.misfit(position, got));
        }
        Ok(())
    }

    /// The error for a value of type `got` (`None`: null) that column `position` does not admit.
    #[cold]
    pub fn misfit(&self, position: usize, got: Option<ColumnType>) -> SchemaError {
        let column = &self.columns[position];
        SchemaError::Type {
            table: self.name.clone(),
            column: column.name.clone(),
            expected: format!("{}{}", column.ty, if column.nullable { "" } else { " not null" }),
            got: got.map_or("null".to_string(), |t| t.to_string()),
        }
    }

    /// Encodes the primary key of `row`.
    pub fn primary_key_of<C: Columns + ?Sized>(&self, row: &C) -> Result<Key, SchemaError> {
        // Most keys are a few integers, written straight into the key ([`key::encode_int_key_refs`]).
        if let Some(key) = key::encode_int_key_refs(row.columns_at(&self.primary_key), self.primary_key.len()) {
            return Ok(key);
        }
        key::with_scratch(|buf| {
            self.encode_columns(row, &self.primary_key, buf)?;
            Ok(Key::from(buf.as_slice()))
        })
    }

    /// Encodes primary-key values given in key order (not a whole row).
    pub fn encode_primary_key(&self, values: &[Value]) -> Result<Key, SchemaError> {
        if values.len() != self.primary_key.len() {
            return Err(SchemaError::Invalid {
                table: self.name.clone(),
                reason: format!("primary key has {} columns, got {} values", self.primary_key.len(), values.len()),
            });
        }
        key::encode_key(values).map_err(|source| SchemaError::Key { table: self.name.clone(), source })
    }

    /// [`TableSchema::encode_primary_key`] of a key given as ints (a compiled key of typed int
    /// expressions), to the same bytes, with the same error for a wrong number of parts.
    pub fn encode_primary_key_ints(&self, ints: &[i64]) -> Result<Key, SchemaError> {
        match key::encode_int_parts(ints) {
            Some(key) if ints.len() == self.primary_key.len() => Ok(key),
            _ => self.encode_primary_key(&ints.iter().map(|&i| Value::Int(i)).collect::<Vec<_>>()),
        }
    }

    /// Encodes the secondary-index entry key of `row` for index `index`: index columns, then the
    /// primary key.
    pub fn secondary_key_of<C: Columns + ?Sized>(
        &self,
        index: usize,
        row: &C,
        primary: &[u8],
    ) -> Result<Key, SchemaError> {
        key::encode_with_suffix(row.columns_at(&self.indexes[index].columns), primary)
            .map_err(|source| SchemaError::Key { table: self.name.clone(), source })
    }

    /// Whether `entry` is the entry of index `index` for `row` under primary key `primary`:
    /// [`TableSchema::secondary_key_of`]'s bytes, compared without building a key (a TPC-C
    /// customer-by-name entry is longer than a key's inline bytes). A row whose entry would be
    /// too long to encode has no entry, so none is its.
    pub fn is_secondary_entry_of<C: Columns + ?Sized>(
        &self,
        index: usize,
        row: &C,
        primary: &[u8],
        entry: &[u8],
    ) -> bool {
        let Some(prefix_len) = entry.len().checked_sub(primary.len()) else { return false };
        let (prefix, suffix) = entry.split_at(prefix_len);
        suffix == primary
            && key::with_scratch(|buf| {
                key::encode_into(row.columns_at(&self.indexes[index].columns), buf).is_ok() && buf.as_slice() == prefix
            })
    }

    fn encode_columns<C: Columns + ?Sized>(
        &self,
        row: &C,
        positions: &[usize],
        buf: &mut Vec<u8>,
    ) -> Result<(), SchemaError> {
        key::encode_into(row.columns_at(positions), buf)
            .map_err(|source| SchemaError::Key { table: self.name.clone(), source })
    }

    /// Whether a secondary index has a column among `positions`: an update that sets only
    /// columns outside every index leaves each of its row's entries as it is.
    pub fn indexes_any_of(&self, positions: &[usize]) -> bool {
        self.indexes.iter().any(|index| index.columns.iter().any(|c| positions.contains(c)))
    }

    /// Whether two rows agree on the columns of secondary index `index`.
    pub fn same_index_columns<A: Columns + ?Sized, B: Columns + ?Sized>(&self, index: usize, a: &A, b: &B) -> bool {
        // Each row's head is read once, not once per column.
        let columns = &self.indexes[index].columns;
        a.columns_at(columns).eq(b.columns_at(columns))
    }
}

/// Builds a row from values, checking it against the schema.
pub fn make_row(schema: &TableSchema, values: Vec<Value>) -> Result<Row, SchemaError> {
    schema.check_row(&values[..])?;
    Ok(Row::from(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn accounts() -> TableSchema {
        TableSchema {
            name: "accounts".into(),
            columns: vec![
                Column { name: "id".into(), ty: ColumnType::Int, nullable: false },
                Column { name: "owner".into(), ty: ColumnType::Text, nullable: true },
                Column { name: "balance".into(), ty: ColumnType::Float, nullable: false },
            ],
            primary_key: vec![0],
            indexes: vec![IndexSchema { name: "by_owner".into(), columns: vec![1] }],
        }
    }

    /// `is_secondary_entry_of` says yes to exactly the entry `secondary_key_of` builds for the
    /// row and its key: owners with zero bytes, a null and long text; not another owner's, another
    /// key's, a cut or an extended entry.
    #[test]
    fn an_entry_is_the_rows_exactly_when_it_is_the_built_key() {
        let s = accounts();
        let owners =
            [Value::Null, Value::text(""), Value::text("a\0b"), Value::text("\0"), Value::text(&"z".repeat(60))];
        for (id, owner) in owners.iter().enumerate() {
            let row = Row::new(vec![Value::Int(id as i64), owner.clone(), Value::Float(1.0)]);
            let pk = s.primary_key_of(&row).unwrap();
            let entry = s.secondary_key_of(0, &row, &pk).unwrap();
            assert!(s.is_secondary_entry_of(0, &row, &pk, &entry), "{owner:?}");
            for (other_id, other) in owners.iter().enumerate() {
                let other_row = Row::new(vec![Value::Int(other_id as i64), other.clone(), Value::Float(1.0)]);
                let other_pk = s.primary_key_of(&other_row).unwrap();
                let other_entry = s.secondary_key_of(0, &other_row, &other_pk).unwrap();
                assert_eq!(
                    s.is_secondary_entry_of(0, &row, &pk, &other_entry),
                    other_entry == entry,
                    "{owner:?} / {other:?}"
                );
                let moved = s.secondary_key_of(0, &other_row, &pk).unwrap();
                assert_eq!(
                    s.is_secondary_entry_of(0, &row, &pk, &moved),
                    other == owner,
                    "{owner:?} moved to {other:?}"
                );
            }
            for cut in 0..entry.len() {
                assert!(!s.is_secondary_entry_of(0, &row, &pk, &entry[..cut]), "{owner:?} cut at {cut}");
            }
            let longer = [entry.as_bytes(), &[0]].concat();
            assert!(!s.is_secondary_entry_of(0, &row, &pk, &longer), "{owner:?} extended");
        }
    }

    #[test]
    fn valid_schema_passes_and_rows_are_checked() {
        let s = accounts();
        s.validate().unwrap();
        s.check_row(&[Value::Int(1), Value::Null, Value::Float(0.0)]).unwrap();
        let err = s.check_row(&[Value::Int(1), Value::Null, Value::Null]).unwrap_err();
        assert!(err.to_string().contains("balance is float not null, got null"), "{err}");
        let err = s.check_row(&[Value::Int(1)]).unwrap_err();
        assert!(matches!(err, SchemaError::Arity { expected: 3, got: 1, .. }));
        s.check_row(&[Value::Int(1), Value::text("ann"), Value::Float(0.0)]).unwrap();
        let err = s.check_row(&[Value::Int(1), Value::Int(5), Value::Float(0.0)]).unwrap_err();
        assert!(err.to_string().contains("owner is text, got int"), "{err}");
        let err = s.check_row(&[Value::Float(1.0), Value::Null, Value::Float(0.0)]).unwrap_err();
        assert!(err.to_string().contains("id is int not null, got float"), "{err}");
    }

    #[test]
    fn invalid_schemas_are_refused() {
        let mut s = accounts();
        s.primary_key = vec![1];
        assert!(s.validate().unwrap_err().to_string().contains("must be not null"));
        let mut s = accounts();
        s.columns.push(Column { name: "ID".into(), ty: ColumnType::Int, nullable: false });
        assert!(s.validate().unwrap_err().to_string().contains("declared twice"));
        let mut s = accounts();
        s.indexes[0].columns = vec![7];
        assert!(s.validate().is_err());
        let mut s = accounts();
        s.primary_key.clear();
        assert!(s.validate().is_err());
    }

    #[test]
    fn secondary_keys_of_equal_columns_differ_by_primary_key() {
        let s = accounts();
        let a = [Value::Int(1), Value::text("ann"), Value::Float(0.0)];
        let b = [Value::Int(2), Value::text("ann"), Value::Float(0.0)];
        let ka = s.secondary_key_of(0, &a, &s.primary_key_of(&a).unwrap()).unwrap();
        let kb = s.secondary_key_of(0, &b, &s.primary_key_of(&b).unwrap()).unwrap();
        assert!(ka < kb);
    }
}
