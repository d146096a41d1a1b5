//! What the compiled code and the interpreter share at run time: the frame, argument binding,
//! control flow, error wrapping and the database operations (so that both execute a statement
//! through exactly the same engine calls).
//!
//! Every database operation goes through [`Storage`], the executor's storage interface: a
//! [`Transaction`] (Silo OCC) for calls, or a replay context (no OCC, the log record's explicit
//! TID; [`crate::replay`]) when a compiled replay plan runs the same closures during recovery.
//!
//! Null keys: a key or bound containing null matches no row (SQL's `col = null` is never true),
//! so such an operation reports "not found" or an empty scan without touching the index. Its
//! result does not depend on the database, so nothing needs to be validated at commit.

use super::ir::{Procedure, Ty, Var};
use super::limits::{LOOP_ITERATIONS_MAX, SCAN_LIMIT_MAX};
use super::ops::RtResult;
use crate::storage::point::{KeyHash, Prefetch};
use crate::storage::{Direction, KeyRange, ParamValue, Row, TableId, Value, ValueRef, key};
use crate::txn::{Scan, Transaction, TxnError};
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::Arc;

/// A procedure call's variables. Scalars live in `vals`, indexed by variable id; arrays in
/// `arrays`, indexed by variable id too (parameters are the first variables, so an array
/// parameter's slot is its position).
pub struct Frame {
    /// One slot per variable ([`super::ir::VarId`]).
    pub vals: Vec<Value>,
    /// Arrays by variable id (`None` for scalars, and for a local array not yet assigned).
    pub arrays: Vec<Option<Arc<[Value]>>>,
    /// The row an `update` is rewriting, read by its `set` expressions.
    pub row: Option<Row>,
    /// An `update`'s new column values as its `set` expressions compute them (column, value),
    /// kept between statements for its room.
    pub changes: Vec<(usize, Value)>,
    /// Loop iterations so far in this call.
    pub iterations: u64,
}

impl Frame {
    /// Counts one loop iteration, failing past [`LOOP_ITERATIONS_MAX`].
    pub fn tick(&mut self) -> RtResult<()> {
        self.iterations += 1;
        if self.iterations > LOOP_ITERATIONS_MAX {
            return Err(format!("more than {LOOP_ITERATIONS_MAX} loop iterations in one call"));
        }
        Ok(())
    }

    /// The array in slot `slot` (its variable's id): a parameter's, or a local's once assigned.
    pub fn array(&self, slot: usize) -> &[Value] {
        self.arrays.get(slot).and_then(|a| a.as_deref()).unwrap_or(&[])
    }

    /// Sets the local array in slot `slot` (its variable's id) to column `column` of `rows`.
    /// Frames hold slots for the parameters only until a local array is first assigned.
    pub fn set_array_column(&mut self, slot: usize, column: usize, rows: &[Row]) {
        if self.arrays.len() <= slot {
            self.arrays.resize(slot + 1, None);
        }
        let items: Arc<[Value]> = rows.iter().map(|r| r.value(column).unwrap_or(Value::Null)).collect();
        self.arrays[slot] = Some(items);
    }
}

/// How a statement ended.
#[derive(Debug)]
pub enum Flow {
    /// Go on with the next statement.
    Next,
    /// `return`: the procedure's result.
    Return(Vec<Value>),
}

/// A run-time error of procedure `procedure` at a statement's position.
pub fn error_at(procedure: &str, line: u32, col: u32, message: String) -> TxnError {
    TxnError::Procedure { procedure: procedure.to_string(), message: format!("{message} (line {line}, column {col})") }
}

/// Checks the arguments against the parameters and builds the initial frame.
pub fn bind_args(p: &Procedure, args: &[ParamValue]) -> Result<Frame, TxnError> {
    let fail = |message: String| TxnError::Procedure { procedure: p.name.clone(), message };
    if args.len() != p.params {
        return Err(fail(format!("expects {} argument(s), got {}", p.params, args.len())));
    }
    let mut frame = Frame {
        vals: vec![Value::Null; p.vars.len()],
        arrays: vec![None; p.params],
        row: None,
        changes: Vec::new(),
        iterations: 0,
    };
    for (i, (var, arg)) in p.param_vars().iter().zip(args).enumerate() {
        match (var.array, arg) {
            (false, ParamValue::Scalar(v)) => frame.vals[i] = fit(v, var).map_err(fail)?,
            (true, ParamValue::Array(items)) => {
                // Share the caller's array when every element already has the element type.
                let as_is = items.iter().all(|v| v.is_null() || v.column_type().map(Ty::from_column) == Some(var.ty));
                frame.arrays[i] = Some(if as_is {
                    Arc::clone(items)
                } else {
                    let fitted: Result<Vec<Value>, String> = items.iter().map(|v| fit(v, var)).collect();
                    Arc::from(fitted.map_err(fail)?)
                });
            }
            _ => {
                let want = if var.array { format!("an array of {}", var.ty) } else { format!("a scalar {}", var.ty) };
                return Err(fail(format!("argument {} ({}) must be {want}", i + 1, var.name)));
            }
        }
    }
    Ok(frame)
}

/// A value for parameter `var`: of its type, null, or an int for a float parameter (widened).
fn fit(v: &Value, var: &Var) -> Result<Value, String> {
    match (v, var.ty) {
        (Value::Int(i), Ty::Float) => Ok(Value::Float(*i as f64)),
        (Value::Null, _) => Ok(Value::Null),
        _ if v.column_type().map(Ty::from_column) == Some(var.ty) => Ok(v.clone()),
        _ => Err(format!("parameter {} is {}, got {v}", var.name, var.ty)),
    }
}

/// The most parts of a key [`Storage::get_row_ints`] takes: as many as a key encodes inline.
pub const INT_KEY_PARTS_MAX: usize = 4;

/// `pk`'s ints as values, for the storages that take a key of values.
fn int_values(pk: &[i64]) -> [Value; INT_KEY_PARTS_MAX] {
    assert!(pk.len() <= INT_KEY_PARTS_MAX, "an int key of {} parts", pk.len());
    let mut values: [Value; INT_KEY_PARTS_MAX] = Default::default();
    for (value, &i) in values.iter_mut().zip(pk) {
        *value = Value::Int(i);
    }
    values
}

/// The storage interface compiled statements and the interpreter call: the engine's operations
/// on rows by primary key, and scans. A dyn call per operation; the operation itself (a hash
/// lookup, a row check, a key encoding) costs far more.
pub trait Storage {
    /// The row with primary key `pk` (values in key order).
    fn get_row(&mut self, table: TableId, pk: &[Value]) -> Result<Option<Row>, TxnError>;
    /// [`Storage::get_row`] of a key of ints, none null (a compiled key of typed int
    /// expressions, [`INT_KEY_PARTS_MAX`] parts at most): the same row. By default the ints
    /// become values; the transaction encodes them straight into the key.
    fn get_row_ints(&mut self, table: TableId, pk: &[i64]) -> Result<Option<Row>, TxnError> {
        let values = int_values(pk);
        self.get_row(table, &values[..pk.len()])
    }
    /// A bounded scan.
    fn scan_rows(&mut self, scan: &Scan) -> Result<Vec<Row>, TxnError>;
    /// Inserts a row.
    fn insert_row(&mut self, table: TableId, row: Row) -> Result<(), TxnError>;
    /// [`Storage::insert_row`] of a row whose primary-key columns hold the ints `pk`, in key
    /// order ([`INT_KEY_PARTS_MAX`] parts at most): the same insert. By default the key is read
    /// from the row; the transaction encodes it from the ints.
    fn insert_row_with_key_ints(&mut self, table: TableId, row: Row, pk: &[i64]) -> Result<(), TxnError> {
        let _ = pk;
        self.insert_row(table, row)
    }
    /// Replaces the row with primary key `pk` by `build(old row)`; `false` if there is none.
    fn update_row_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError>;
    /// [`Storage::update_row_with`] for a `build` that changes only the columns `changed`
    /// (increasing, none of them a primary-key column: the checker keeps an `update`'s `set`s
    /// off the key), so that the storage may check the new row at those columns alone
    /// ([`Transaction::update_columns_with`]). By default it checks the whole row.
    fn update_columns_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        changed: &[usize],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        let _ = changed;
        self.update_row_with(table, pk, build)
    }
    /// [`Storage::update_columns_with`] of a key of ints, none null (a compiled key of typed int
    /// expressions, [`INT_KEY_PARTS_MAX`] parts at most). By default the ints become values; the
    /// transaction encodes them straight into the key.
    fn update_columns_with_ints(
        &mut self,
        table: TableId,
        pk: &[i64],
        changed: &[usize],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        let values = int_values(pk);
        self.update_columns_with(table, &values[..pk.len()], changed, build)
    }
    /// Sets columns of the row with primary key `pk` to `changes` (column, value; increasing
    /// columns, each once, none of them a primary-key column), an update that reads nothing of
    /// the old row; `false` if there is none. A storage may set them where the row lies when
    /// nothing else can see it (replay: [`crate::replay::compiled::ReplayStorage`]); by default
    /// it is [`Storage::update_columns_with`] building a copy ([`update_by_copy`]).
    fn update_row_in_place(
        &mut self,
        table: TableId,
        pk: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool, TxnError> {
        update_by_copy(self, table, pk, changes)
    }
    /// [`Storage::update_row_in_place`] of a key of ints, none null (a compiled key of typed int
    /// expressions, [`INT_KEY_PARTS_MAX`] parts at most). By default the ints become values, so
    /// a storage that sets columns where the row lies keeps doing so; the transaction, which
    /// copies the row anyway, encodes the key from the ints.
    fn update_row_in_place_ints(
        &mut self,
        table: TableId,
        pk: &[i64],
        changes: &[(usize, Value)],
    ) -> Result<bool, TxnError> {
        let values = int_values(pk);
        self.update_row_in_place(table, &values[..pk.len()], changes)
    }
    /// Replaces the row whose primary key is the values of `row` at `key_columns` by `row`, a
    /// whole row its `update` built without reading the old one (every non-key column set from a
    /// value moved out of a variable: a replay plan of an after-image); `false` if there is none.
    /// The key has no null ([`replace`] checks). By default it is [`Storage::update_row_with`]
    /// returning `row`.
    fn replace_row(&mut self, table: TableId, key_columns: &[usize], row: Row) -> Result<bool, TxnError> {
        replace_by_update(self, table, key_columns, row)
    }
    /// Deletes the row with primary key `pk`; whether there was one.
    fn delete_row(&mut self, table: TableId, pk: &[Value]) -> Result<bool, TxnError>;

    /// Names the statement whose database operation comes next (PACMAN piece replay,
    /// `crate::pacman::piece`, decides per statement whether to run, feed back or skip it).
    /// `false`: skip the whole statement — its expressions are not evaluated and it assigns
    /// nothing, so a piece pays nothing for the other slices' operations. Only procedures compiled
    /// with [`crate::proc::CompiledProcedure::compile_for_pieces`] call it.
    fn enter_op(&mut self, _stmt: u32) -> bool {
        true
    }

    /// A hint that the row with primary key `pk` of `table` will be read or written soon (a
    /// later iteration of a loop: `proc::compile::prefetch`): starts loading the first line the
    /// lookup will miss, and returns the key's hash for the later stages
    /// ([`Storage::prefetch_stage`]), or `None` when the storage does not prefetch. It reads
    /// nothing the caller sees, takes no lock and records no read; a key that does not encode
    /// (a null part) is no error, only not prefetched. By default nothing is prefetched.
    fn prefetch_key(&mut self, _table: TableId, _pk: &[Value]) -> Option<KeyHash> {
        None
    }

    /// [`Storage::prefetch_key`] of a key of ints ([`INT_KEY_PARTS_MAX`] parts at most). By
    /// default the ints become values; the transaction encodes them straight into the key.
    fn prefetch_key_ints(&mut self, table: TableId, pk: &[i64]) -> Option<KeyHash> {
        let values = int_values(pk);
        self.prefetch_key(table, &values[..pk.len()])
    }

    /// Whether [`Storage::prefetch_key`] does anything: loops skip evaluating the keys of later
    /// iterations for a storage that does not prefetch.
    fn prefetches(&self) -> bool {
        false
    }

    /// The next stage of [`Storage::prefetch_key`]'s hint, once the previous stage's line has
    /// had time to arrive: [`Prefetch::Record`], then [`Prefetch::Row`].
    fn prefetch_stage(&mut self, _table: TableId, _hash: KeyHash, _stage: Prefetch) {}

    /// Whether this storage replays one PACMAN piece: `return` then ends the run at once, and a
    /// statement that fails is skipped instead of failing the run (`crate::pacman::piece` shows
    /// why only statements reached through skipped operations can fail there).
    fn replays_piece(&self) -> bool {
        false
    }
}

impl Storage for Transaction<'_> {
    fn get_row(&mut self, table: TableId, pk: &[Value]) -> Result<Option<Row>, TxnError> {
        self.get(table, pk)
    }

    fn get_row_ints(&mut self, table: TableId, pk: &[i64]) -> Result<Option<Row>, TxnError> {
        self.get_ints(table, pk)
    }

    fn scan_rows(&mut self, scan: &Scan) -> Result<Vec<Row>, TxnError> {
        self.scan(scan)
    }

    fn insert_row(&mut self, table: TableId, row: Row) -> Result<(), TxnError> {
        self.insert(table, row)
    }

    fn insert_row_with_key_ints(&mut self, table: TableId, row: Row, pk: &[i64]) -> Result<(), TxnError> {
        self.insert_with_key_ints(table, row, pk)
    }

    fn update_row_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        self.update_with(table, pk, build)
    }

    fn update_columns_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        changed: &[usize],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        Transaction::update_columns_with(self, table, pk, changed, build)
    }

    fn update_columns_with_ints(
        &mut self,
        table: TableId,
        pk: &[i64],
        changed: &[usize],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        Transaction::update_columns_with_ints(self, table, pk, changed, build)
    }

    fn update_row_in_place_ints(
        &mut self,
        table: TableId,
        pk: &[i64],
        changes: &[(usize, Value)],
    ) -> Result<bool, TxnError> {
        let Some(changed) = ChangedColumns::of(changes) else {
            let values = int_values(pk);
            return update_by_copy(self, table, &values[..pk.len()], changes);
        };
        let copy = |old: Row| Ok(old.with_values(changes));
        Transaction::update_columns_with_ints(self, table, pk, changed.positions(), copy)
    }

    fn delete_row(&mut self, table: TableId, pk: &[Value]) -> Result<bool, TxnError> {
        self.delete(table, pk)
    }

    fn prefetch_key(&mut self, table: TableId, pk: &[Value]) -> Option<KeyHash> {
        Transaction::prefetch_key(self, table, pk)
    }

    fn prefetch_key_ints(&mut self, table: TableId, pk: &[i64]) -> Option<KeyHash> {
        Transaction::prefetch_key_ints(self, table, pk)
    }

    fn prefetches(&self) -> bool {
        true
    }

    fn prefetch_stage(&mut self, table: TableId, hash: KeyHash, stage: Prefetch) {
        Transaction::prefetch_stage(self, table, hash, stage);
    }
}

/// A point read. `None` if there is no row or the key has a null.
pub fn get(tx: &mut dyn Storage, table: TableId, key: &[Value]) -> Result<Option<Row>, TxnError> {
    if key.iter().any(Value::is_null) {
        return Ok(None);
    }
    tx.get_row(table, key)
}

/// The parts of a scan, evaluated.
pub struct ScanArgs<'a> {
    /// The table.
    pub table: TableId,
    /// `None`: primary key; else the secondary index position.
    pub index: Option<usize>,
    /// Values of the equality prefix.
    pub prefix: &'a [Value],
    /// (value, inclusive) of the lower bound.
    pub lower: Option<(Value, bool)>,
    /// (value, inclusive) of the upper bound.
    pub upper: Option<(Value, bool)>,
    /// Order of the rows.
    pub direction: Direction,
    /// The evaluated limit.
    pub limit: Value,
    /// At most this many rows whatever `limit` says (1 for `select ... into`).
    pub cap: usize,
}

/// The scan's limit as a count, or a run-time error.
pub fn scan_limit(limit: &Value, cap: usize) -> RtResult<usize> {
    match limit {
        Value::Int(n) if (0..=SCAN_LIMIT_MAX).contains(n) => Ok((*n as usize).min(cap)),
        v => Err(format!("limit must be an int between 0 and {SCAN_LIMIT_MAX}, got {v}")),
    }
}

/// A bounded range scan. A run-time error (bad limit) is returned as `Ok(Err(message))` so that
/// the caller can add its position.
pub fn scan(tx: &mut dyn Storage, a: ScanArgs<'_>) -> Result<RtResult<Vec<Row>>, TxnError> {
    let limit = match scan_limit(&a.limit, a.cap) {
        Ok(n) => n,
        Err(e) => return Ok(Err(e)),
    };
    let bounds = [&a.lower, &a.upper];
    if a.prefix.iter().any(Value::is_null) || bounds.iter().any(|b| b.as_ref().is_some_and(|(v, _)| v.is_null())) {
        return Ok(Ok(Vec::new()));
    }
    let bound = |b: &Option<(Value, bool)>| -> Bound<Value> {
        match b {
            None => Bound::Unbounded,
            Some((v, true)) => Bound::Included(v.clone()),
            Some((v, false)) => Bound::Excluded(v.clone()),
        }
    };
    let (lower, upper) = (bound(&a.lower), bound(&a.upper));
    let range = KeyRange::from_values(a.prefix, lower.as_ref(), upper.as_ref())?;
    let rows = tx.scan_rows(&Scan { table: a.table, index: a.index, range, direction: a.direction, limit })?;
    Ok(Ok(rows))
}

/// `select distinct`: keeps the first of the rows that are equal in every column at `positions`
/// (equal as [`Value`]'s `==`: nulls equal each other, as SQL's `distinct` treats them), in order.
pub fn distinct_rows(rows: Vec<Row>, positions: &[usize]) -> Vec<Row> {
    // foldhash, not SipHash: stock-level hashes ~200 short encodings per call, and SipHash showed
    // in its profile. The inputs are rows this procedure read, hashed with a random seed. Every
    // row's encoding goes into one buffer and the table holds its range there: each row is
    // hashed once, and a new one costs no allocation (a set of `Vec<u8>` hashed each row twice,
    // to look it up and to insert it, and allocated a copy of each new encoding).
    let hasher = foldhash::fast::RandomState::default();
    if let &[position] = positions
        && let Some(ints) = rows.iter().map(|row| row.get(position)?.as_int()).collect::<Option<Vec<i64>>>()
    {
        return distinct_ints(rows, &ints, &hasher);
    }
    let mut seen: HashTable<(usize, usize)> = HashTable::with_capacity(rows.len());
    let mut encodings = Vec::new();
    rows.into_iter()
        .filter(|row| {
            let start = encodings.len();
            for &p in positions {
                key::encode_value_ref(row.get(p).unwrap_or(ValueRef::Null), &mut encodings);
            }
            let (earlier, this) = encodings.split_at(start);
            let hash = hasher.hash_one(this);
            if seen.find(hash, |&(s, e)| &earlier[s..e] == this).is_some() {
                encodings.truncate(start);
                return false;
            }
            seen.insert_unique(hash, (start, encodings.len()), |&(s, e)| hasher.hash_one(&encodings[s..e]));
            true
        })
        .collect()
}

/// [`distinct_rows`] on one column that holds an int in every row (`ints`, in row order): the
/// ints hashed and compared as they are, not encoded (stock-level's `select distinct ol_i_id`
/// of ≈ 200 order lines; `docs/PERFORMANCE.md`, "TPC-C", "Session 63").
fn distinct_ints(rows: Vec<Row>, ints: &[i64], hasher: &foldhash::fast::RandomState) -> Vec<Row> {
    debug_assert_eq!(rows.len(), ints.len(), "an int per row");
    let mut seen: HashTable<i64> = HashTable::with_capacity(rows.len());
    rows.into_iter()
        .zip(ints)
        .filter(|&(_, &i)| {
            let hash = hasher.hash_one(i);
            if seen.find(hash, |&s| s == i).is_some() {
                return false;
            }
            seen.insert_unique(hash, i, |&s| hasher.hash_one(s));
            true
        })
        .map(|(row, _)| row)
        .collect()
}

/// Inserts a row.
pub fn insert(tx: &mut dyn Storage, table: TableId, row: Row) -> Result<(), TxnError> {
    tx.insert_row(table, row)
}

/// Deletes by primary key; whether a row was deleted.
pub fn delete(tx: &mut dyn Storage, table: TableId, key: &[Value]) -> Result<bool, TxnError> {
    if key.iter().any(Value::is_null) {
        return Ok(false);
    }
    tx.delete_row(table, key)
}

/// `update`: replaces the row with primary key `key` by `build(old row)`, with one lookup
/// ([`Transaction::update_with`]). `false` if there is no row or the key has a null (then `build`
/// is not called).
pub fn update<S: Storage + ?Sized>(
    tx: &mut S,
    table: TableId,
    key: &[Value],
    build: impl FnOnce(Row) -> Result<Row, TxnError>,
) -> Result<bool, TxnError> {
    if key.iter().any(Value::is_null) {
        return Ok(false);
    }
    tx.update_row_with(table, key, &mut once(build))
}

/// `build` as the `FnMut` the storage interface takes (object safety); the storage calls it at
/// most once.
fn once(build: impl FnOnce(Row) -> Result<Row, TxnError>) -> impl FnMut(Row) -> Result<Row, TxnError> {
    let mut build = Some(build);
    move |old| match build.take() {
        Some(build) => build(old),
        None => Err(TxnError::Procedure { procedure: String::new(), message: "update built twice".into() }),
    }
}

/// [`update`] of a `build` that changes only the columns `changed` (increasing, none of the
/// key): [`Storage::update_columns_with`].
pub fn update_columns(
    tx: &mut dyn Storage,
    table: TableId,
    key: &[Value],
    changed: &[usize],
    build: impl FnOnce(Row) -> Result<Row, TxnError>,
) -> Result<bool, TxnError> {
    if key.iter().any(Value::is_null) {
        return Ok(false);
    }
    tx.update_columns_with(table, key, changed, &mut once(build))
}

/// `update` that builds the whole new row without the old one: [`Storage::replace_row`]. `false`
/// if there is no row or the key has a null.
pub fn replace(tx: &mut dyn Storage, table: TableId, key_columns: &[usize], row: Row) -> Result<bool, TxnError> {
    if key_columns.iter().any(|&p| row.get(p).is_none_or(ValueRef::is_null)) {
        return Ok(false);
    }
    tx.replace_row(table, key_columns, row)
}

/// [`Storage::replace_row`] through [`Storage::update_row_with`], which looks the key up.
pub fn replace_by_update<S: Storage + ?Sized>(
    storage: &mut S,
    table: TableId,
    key_columns: &[usize],
    row: Row,
) -> Result<bool, TxnError> {
    let pk: Vec<Value> = key_columns.iter().map(|&p| row.value(p).unwrap_or(Value::Null)).collect();
    update(storage, table, &pk, |_old| Ok(row))
}

/// [`Storage::update_row_in_place`] through [`Storage::update_columns_with`]: the old row with
/// `changes` set ([`Row::with_values`]).
pub fn update_by_copy<S: Storage + ?Sized>(
    storage: &mut S,
    table: TableId,
    pk: &[Value],
    changes: &[(usize, Value)],
) -> Result<bool, TxnError> {
    let Some(changed) = ChangedColumns::of(changes) else {
        return storage.update_row_with(table, pk, &mut |old| Ok(old.with_values(changes)));
    };
    storage.update_columns_with(table, pk, changed.positions(), &mut |old| Ok(old.with_values(changes)))
}

/// The columns an update by copy changes, named to the storage from the stack.
struct ChangedColumns {
    positions: [usize; CHANGED_ON_STACK_MAX],
    len: usize,
}

impl ChangedColumns {
    /// The columns of `changes`; `None` for more than [`CHANGED_ON_STACK_MAX`] (checked with
    /// the whole row).
    fn of(changes: &[(usize, Value)]) -> Option<ChangedColumns> {
        let mut positions = [0; CHANGED_ON_STACK_MAX];
        for (slot, (p, _)) in positions.get_mut(..changes.len())?.iter_mut().zip(changes) {
            *slot = *p;
        }
        Some(ChangedColumns { positions, len: changes.len() })
    }

    fn positions(&self) -> &[usize] {
        &self.positions[..self.len]
    }
}

/// The most changed columns [`update_by_copy`] names to the storage from the stack (more are
/// checked with the whole row).
const CHANGED_ON_STACK_MAX: usize = 16;

/// `update` whose set expressions read nothing of the old row: [`Storage::update_row_in_place`].
/// `false` if there is no row or the key has a null.
pub fn update_in_place(
    tx: &mut dyn Storage,
    table: TableId,
    key: &[Value],
    changes: &[(usize, Value)],
) -> Result<bool, TxnError> {
    if key.iter().any(Value::is_null) {
        return Ok(false);
    }
    tx.update_row_in_place(table, key, changes)
}

/// The column values of `row` at `positions`, or nulls when there is no row.
pub fn columns_of(row: Option<&Row>, positions: &[usize]) -> impl Iterator<Item = Value> {
    positions.iter().map(move |&p| row.and_then(|r| r.value(p)).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows `(a, b, c)` where `distinct` looks at `a` and `b`.
    fn rows(pairs: &[(Value, Value)]) -> Vec<Row> {
        pairs
            .iter()
            .enumerate()
            .map(|(i, (a, b))| Row::from_slice(&[a.clone(), b.clone(), Value::Int(i as i64)]))
            .collect()
    }

    #[test]
    fn distinct_keeps_the_first_row_of_each_combination_in_order() {
        // Texts whose concatenations agree ("ab" + "c" and "a" + "bc") are different pairs.
        let pairs = [
            (Value::text("ab"), Value::text("c")),
            (Value::text("a"), Value::text("bc")),
            (Value::text("ab"), Value::text("c")),
            (Value::Null, Value::Int(1)),
            (Value::Null, Value::Int(1)),
            (Value::Int(1), Value::Null),
        ];
        let kept = distinct_rows(rows(&pairs), &[0, 1]);
        let ids: Vec<Value> = kept.iter().map(|r| r.get(2).map_or(Value::Null, ValueRef::to_value)).collect();
        assert_eq!(ids, [Value::Int(0), Value::Int(1), Value::Int(3), Value::Int(5)]);
    }

    /// One column of ints takes the ints' own path; one that also holds a null or a float takes
    /// the encodings' path; both keep the first row of each value, and an int and a float of one
    /// number stay apart on either.
    #[test]
    fn distinct_on_one_column_is_the_same_with_and_without_non_ints() {
        let kept_ids = |firsts: &[Value]| -> Vec<Value> {
            let pairs: Vec<(Value, Value)> = firsts.iter().map(|v| (v.clone(), Value::Int(0))).collect();
            let kept = distinct_rows(rows(&pairs), &[0]);
            kept.iter().map(|r| r.get(2).map_or(Value::Null, ValueRef::to_value)).collect()
        };
        let ints = [Value::Int(4), Value::Int(-1), Value::Int(4), Value::Int(i64::MIN), Value::Int(-1)];
        assert_eq!(kept_ids(&ints), [Value::Int(0), Value::Int(1), Value::Int(3)]);
        let mixed = [Value::Int(1), Value::Float(1.0), Value::Int(1), Value::Null, Value::Null, Value::Float(1.0)];
        assert_eq!(kept_ids(&mixed), [Value::Int(0), Value::Int(1), Value::Int(3)]);
        assert_eq!(kept_ids(&[]), Vec::<Value>::new());
    }

    #[test]
    fn distinct_over_many_rows_keeps_exactly_the_first_of_each_value() {
        // 5,000 rows over 700 values: the table grows (and rehashes) several times.
        let pairs: Vec<(Value, Value)> = (0..5000).map(|i| (Value::Int((i * 7919) % 700), Value::Int(0))).collect();
        let kept = distinct_rows(rows(&pairs), &[0]);
        let mut first_seen = std::collections::HashSet::new();
        let expected: Vec<i64> = (0..5000).filter(|i| first_seen.insert((i * 7919) % 700)).collect();
        let ids: Vec<Value> = kept.iter().map(|r| r.get(2).map_or(Value::Null, ValueRef::to_value)).collect();
        assert_eq!(ids, expected.into_iter().map(Value::Int).collect::<Vec<_>>());
    }
}
