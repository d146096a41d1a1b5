//! Compiled replay: a redo record becomes a parameterized statement of the procedure language,
//! compiled once per (table, operation, column set) by the language's own compiler and run by
//! its closures against a [`ReplayStorage`] (no OCC, the record's TID). See the module docs of
//! [`super`] for the design.

use super::cache::{CachedPlan, ColumnSet, PlanCache};
use super::{EncodedRedo, RedoOp, RedoRecord, ReplayError};
use crate::durability::codec::{AdmittedTags, ColumnPatch, FixedValue, Reader, TypedRow};
use crate::proc::runtime::{Frame, Storage};
use crate::proc::{self, CompiledProcedure, runtime};
use crate::storage::{Catalog, FixedShape, Key, Record, Row, SchemaError, Table, TableId, TableSchema, Value, key};
use crate::txn::{Scan, Tid, TxnError};
use std::fmt::Write as _;
use std::sync::Arc;

/// Where a plan parameter's value comes from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// Column `p` of the after-image.
    Column(usize),
    /// Part `i` of the decoded primary key (deletes carry no row).
    KeyPart(usize),
}

/// A compiled, parameterized replay statement.
pub struct Plan {
    op: RedoOp,
    table: TableId,
    text: String,
    procedure: CompiledProcedure,
    /// Per column of the table, the parameter (frame slot) its value binds to, if any.
    slot_of_column: Vec<Option<usize>>,
    /// Per part of the primary key, the parameter its value binds to, if any.
    slot_of_key_part: Vec<Option<usize>>,
    /// Whether column `p` binds to parameter `p` for every column (the insert plan).
    columns_are_params: bool,
    /// Per column of the table, the value tags its parameter admits (the column's type, and
    /// null if nullable): a logged after-image is type-checked as it is bound, like the
    /// arguments of a typed call, so the row the plan builds from it is not checked again.
    admitted: Vec<AdmittedTags>,
    /// The layout of the table's rows when every column is a non-null int or float: a logged
    /// after-image is then bound with one bounds check ([`Reader::row_each_fixed`]), and the
    /// plan's statement builds its row from a copy of the shape's head.
    fixed: Option<FixedShape>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan").field("op", &self.op).field("table", &self.table).field("text", &self.text).finish()
    }
}

impl Plan {
    /// Writes the statement for (`table`, `op`, `columns`) as source text and compiles it against
    /// `catalog` with the procedure language's pipeline (lexer, parser, checker, IR, closures).
    /// For [`RedoOp::Insert`] `columns` are the columns given (the others are null); for
    /// [`RedoOp::Update`] the columns set (non-key, not empty); for [`RedoOp::Delete`] unused.
    pub fn compile(catalog: &Catalog, table: &Table, op: RedoOp, columns: &ColumnSet) -> Result<Plan, ReplayError> {
        let schema = &table.schema;
        let fail = |message: String| ReplayError::Plan { table: schema.name.clone(), message };
        let (text, sources) = plan_text(schema, op, columns).map_err(fail)?;
        let module = proc::check_source("<replay>", &text, catalog)
            .map_err(|d| fail(d.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
        let ir = module.procedures.into_iter().next().ok_or_else(|| fail("no procedure compiled".into()))?;
        assert_eq!(ir.params, sources.len(), "one source per parameter");
        let procedure = CompiledProcedure::compile(Arc::new(ir), catalog).map_err(|d| fail(d.to_string()))?;
        let mut slot_of_column = vec![None; schema.columns.len()];
        let mut slot_of_key_part = vec![None; schema.primary_key.len()];
        for (slot, source) in sources.iter().enumerate() {
            // A value binds one parameter at most (`plan_text` names each column and key part
            // once), so a slot per column and per part says where every value goes.
            let previous = match *source {
                Source::Column(p) => slot_of_column[p].replace(slot),
                Source::KeyPart(i) => slot_of_key_part[i].replace(slot),
            };
            assert!(previous.is_none(), "a value bound to two parameters of {text}");
        }
        let columns_are_params = slot_of_column.iter().enumerate().all(|(p, slot)| *slot == Some(p));
        let admitted = schema.columns.iter().map(|c| AdmittedTags::of(c.ty, c.nullable)).collect();
        Ok(Plan {
            op,
            table: table.id,
            text,
            procedure,
            slot_of_column,
            slot_of_key_part,
            columns_are_params,
            admitted,
            fixed: schema.fixed_shape(),
        })
    }

    /// The operation.
    pub fn op(&self) -> RedoOp {
        self.op
    }

    /// The statement's source text (a procedure of the language).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// A frame to bind this plan's parameters into.
    pub fn new_frame(&self) -> Frame {
        self.procedure.new_frame()
    }

    /// Binds the parameters from `row`'s values (a delete has none), each decoded from the row's
    /// bytes straight into the slot that binds it in one pass over the row, and from `key_parts`
    /// (moved). Decoding the row into a vector first and moving from it was a fifth of compiled
    /// replay's samples on a Taurus TPC-C log (`docs/PERFORMANCE.md`, "Compiled replay",
    /// "Session 47").
    fn bind(&self, frame: &mut Frame, row: Option<&Row>, key_parts: &mut [Value]) {
        for (value, slot) in row.into_iter().flat_map(Row::iter).zip(&self.slot_of_column) {
            if let Some(slot) = slot.and_then(|slot| frame.vals.get_mut(slot)) {
                set_slot(slot, value.to_value());
            }
        }
        for (part, slot) in key_parts.iter_mut().zip(&self.slot_of_key_part) {
            if let Some(slot) = slot.and_then(|slot| frame.vals.get_mut(slot)) {
                set_slot(slot, std::mem::take(part));
            }
        }
    }
}

/// Parameter names start with this prefix, lengthened until no column name starts with it: in an
/// `update`'s `set`, a bare column name means the current row's column, not a parameter.
fn param_prefix(schema: &TableSchema) -> String {
    let mut prefix = "_p".to_string();
    while schema.columns.iter().any(|c| c.name.to_ascii_lowercase().starts_with(&prefix)) {
        prefix.insert(0, '_');
    }
    prefix
}

/// The statement's text and each parameter's source.
fn plan_text(schema: &TableSchema, op: RedoOp, columns: &ColumnSet) -> Result<(String, Vec<Source>), String> {
    let prefix = param_prefix(schema);
    let mut params = Vec::new();
    let mut sources = Vec::new();
    let mut param = |p: usize, source: Source| {
        params.push(format!("{prefix}{} {}", sources.len(), schema.columns[p].ty.name()));
        sources.push(source);
        format!("{prefix}{}", sources.len() - 1)
    };
    let (name, body) = match op {
        RedoOp::Insert => {
            let cols: Vec<&str> = columns.positions().map(|p| schema.columns[p].name.as_str()).collect();
            let values: Vec<String> = columns.positions().map(|p| param(p, Source::Column(p))).collect();
            let body = format!("insert into {} ({}) values ({});", schema.name, cols.join(", "), values.join(", "));
            ("replay_insert", body)
        }
        RedoOp::Update => {
            if columns.is_empty() || schema.primary_key.iter().any(|&p| columns.contains(p)) {
                return Err("an update plan sets one or more non-key columns".into());
            }
            let conds = key_conds(schema, |i, p| param(p, Source::Column(schema.primary_key[i])));
            let sets: Vec<String> = columns
                .positions()
                .map(|p| format!("{} = {}", schema.columns[p].name, param(p, Source::Column(p))))
                .collect();
            ("replay_update", format!("update {} set {} where {};", schema.name, sets.join(", "), conds))
        }
        RedoOp::Delete => {
            let conds = key_conds(schema, |i, p| param(p, Source::KeyPart(i)));
            ("replay_delete", format!("delete from {} where {};", schema.name, conds))
        }
        RedoOp::Patch => {
            if columns.is_empty() || schema.primary_key.iter().any(|&p| columns.contains(p)) {
                return Err("a patch plan sets one or more non-key columns".into());
            }
            let sets: Vec<String> = columns
                .positions()
                .map(|p| format!("{} = {}", schema.columns[p].name, param(p, Source::Column(p))))
                .collect();
            let conds = key_conds(schema, |i, p| param(p, Source::KeyPart(i)));
            ("replay_patch", format!("update {} set {} where {};", schema.name, sets.join(", "), conds))
        }
    };
    let mut text = String::new();
    let _ = write!(text, "procedure {name}({}) {{ {body} }}", params.join(", "));
    Ok((text, sources))
}

/// `k1 = ? and k2 = ?` over the primary key; `param(i, p)` names key part `i`, column `p`.
fn key_conds(schema: &TableSchema, mut param: impl FnMut(usize, usize) -> String) -> String {
    let conds: Vec<String> = schema
        .primary_key
        .iter()
        .enumerate()
        .map(|(i, &p)| format!("{} = {}", schema.columns[p].name, param(i, p)))
        .collect();
    conds.join(" and ")
}

/// [`choose`]'s operation alone, without building the column set.
fn choose_op(schema: &TableSchema, put: bool, key_seen: bool) -> RedoOp {
    let has_non_key = schema.primary_key.len() < schema.columns.len();
    match (put, key_seen && has_non_key) {
        (false, _) => RedoOp::Delete,
        (true, true) => RedoOp::Update,
        (true, false) => RedoOp::Insert,
    }
}

/// The plan a record takes (module docs of [`super`]): its operation and column set.
fn choose(schema: &TableSchema, put: bool, key_seen: bool) -> (RedoOp, ColumnSet) {
    if !put {
        return (RedoOp::Delete, ColumnSet::empty());
    }
    let set = ColumnSet::non_key(schema);
    if key_seen && !set.is_empty() {
        (RedoOp::Update, set)
    } else {
        (RedoOp::Insert, ColumnSet::all(schema.columns.len()))
    }
}

/// Applies one redo record through its compiled plan; see [`super::Replayer::apply`].
pub fn apply(
    cache: &mut PlanCache,
    catalog: &Catalog,
    table: &Table,
    record: RedoRecord<'_>,
) -> Result<bool, ReplayError> {
    apply_found(cache, catalog, table, record, None)
}

/// [`apply`]; with `found` (`Some(record or None)`), the key's record as the caller's lookup found
/// it, which the install reuses instead of looking the key up again. The after-image's values are
/// decoded from the row's bytes into the plan's frame (a row holds its values as bytes, so
/// there is nothing to move).
pub fn apply_found(
    cache: &mut PlanCache,
    catalog: &Catalog,
    table: &Table,
    record: RedoRecord<'_>,
    found: Option<Option<Record>>,
) -> Result<bool, ReplayError> {
    let schema = &table.schema;
    let (put, key_seen) = (record.row.is_some(), record.key_seen);
    let op = choose_op(schema, put, key_seen);
    let mut key_parts = match op {
        RedoOp::Delete => {
            key::decode_key(record.key).map_err(|source| SchemaError::Key { table: schema.name.clone(), source })?
        }
        _ => Vec::new(),
    };
    let got = record.row.as_ref().map_or(0, |row| row.len());
    if op != RedoOp::Delete && got != schema.columns.len() {
        // The plan takes values by position; the storage step checks the rest of the row.
        return Err(SchemaError::Arity { table: schema.name.clone(), expected: schema.columns.len(), got }.into());
    }
    let cached = cache.whole_row_plan(catalog, table, op, || choose(schema, put, key_seen).1)?;
    cached.plan.bind(&mut cached.frame, record.row.as_ref(), &mut key_parts);
    let storage = ReplayStorage::new(catalog, table, record.key, record.tid);
    run(
        table,
        cached,
        match found {
            Some(found) => storage.with_found(found),
            None => storage,
        },
    )
}

/// [`apply`] for a record still encoded in the log: the after-image's values are decoded straight
/// into the plan's frame, so no row is built before the plan builds the one it installs.
#[inline]
pub fn apply_encoded(
    cache: &mut PlanCache,
    catalog: &Catalog,
    table: &Table,
    redo: &mut EncodedRedo<'_>,
    reader: &mut Reader<'_>,
) -> Result<bool, ReplayError> {
    let schema = &table.schema;
    let key_seen = redo.found.is_some();
    let op = choose_op(schema, redo.put, key_seen);
    let cached = cache.whole_row_plan(catalog, table, op, || choose(schema, redo.put, key_seen).1)?;
    if op == RedoOp::Delete {
        // The delete plan's parameters are the key's parts, in order ([`plan_text`]). A key of one
        // integer (the common case) is bound here, without the general decoder's call.
        match cached.frame.vals.first_mut() {
            Some(slot) if schema.primary_key.len() == 1 && key::is_int_key(redo.key, 1) => {
                set_slot(slot, Value::Int(key::int_key_part(redo.key, 0)));
            }
            _ => bind_key_parts(schema, redo.key, &mut cached.frame.vals, Some)?,
        }
    } else {
        let plan = &cached.plan;
        let (slots, vals) = (&plan.slot_of_column, &mut cached.frame.vals[..schema.columns.len()]);
        // One call, so that its closure is inlined (an outlined one took each value through
        // memory: see `set_slot`); which slot a column binds is a branch predicted per plan.
        let bound_fixed = match &plan.fixed {
            Some(shape) => reader.row_each_fixed(shape, |p, value| {
                let slot = if plan.columns_are_params { Some(p) } else { slots.get(p).copied().flatten() };
                if let Some(slot) = slot.and_then(|slot| vals.get_mut(slot)) {
                    set_fixed_slot(slot, value);
                }
            }),
            None => false,
        };
        let typed = if bound_fixed {
            TypedRow::Fits
        } else if plan.columns_are_params {
            reader.row_each_typed(&plan.admitted, |p, value| {
                if let Some(slot) = vals.get_mut(p) {
                    set_slot(slot, value);
                }
            })?
        } else {
            reader.row_each_typed(&plan.admitted, |p, value| {
                if let Some(&Some(slot)) = slots.get(p) {
                    set_slot(&mut vals[slot], value);
                }
            })?
        };
        match typed {
            TypedRow::Fits => {}
            TypedRow::Arity { got } => {
                let table = schema.name.clone();
                return Err(SchemaError::Arity { table, expected: schema.columns.len(), got }.into());
            }
            TypedRow::Misfit { position, got } => return Err(schema.misfit(position, got).into()),
        }
    }
    // Fields set in place, not through the builders: each builder moved the whole context, a
    // copy per record that callgrind counted.
    let mut storage = ReplayStorage::new(catalog, table, redo.key, redo.tid);
    storage.found = Some(redo.found.take());
    // Every value the plan writes is a bound parameter, checked against its column as it was bound.
    storage.checked_values = op != RedoOp::Delete;
    run(table, cached, storage)
}

/// Applies a column patch through its plan, `update t set <patched columns> where <key>`: the
/// patched values are moved and the logged key's parts decoded straight into the plan's frame,
/// and the plan edits the row the key holds, which must be there, in place when the record
/// holds it alone; see [`super::Replayer::apply_patch`].
pub fn apply_patch(
    cache: &mut PlanCache,
    catalog: &Catalog,
    table: &Table,
    key: &Key,
    tid: Tid,
    patch: ColumnPatch,
    found: Option<Record>,
) -> Result<bool, ReplayError> {
    let schema = &table.schema;
    // Checked as bound, so the plan may edit the row in place ([`ReplayStorage`]'s
    // `update_row_in_place`): nothing can fail after the first column is set.
    super::check_patch(schema, &patch)?;
    let mut columns = ColumnSet::empty();
    for &(p, _) in patch.columns() {
        columns.insert(usize::from(p));
    }
    // The caller's lookup serves the skip test, the plan's read of the row and the install.
    let Some(record) = found else {
        return Err(ReplayError::Patch(super::NO_ROW));
    };
    if record.word().tid() >= tid {
        return Ok(false);
    }
    let cached = cache.plan(catalog, table, RedoOp::Patch, columns)?;
    let (plan, vals) = (&cached.plan, &mut cached.frame.vals);
    bind_key_parts(schema, key.as_bytes(), vals, |part| plan.slot_of_key_part.get(part).copied().flatten())?;
    for (p, value) in patch.into_columns() {
        if let Some(&Some(slot)) = plan.slot_of_column.get(usize::from(p)) {
            set_slot(&mut vals[slot], value);
        }
    }
    let storage = ReplayStorage::new(catalog, table, key.as_bytes(), tid)
        .with_row_required(columns)
        .with_found(Some(record))
        .with_checked_values(true);
    run(table, cached, storage)
}

/// Decodes the logged key's parts into a plan's frame, part `i` into slot `slot_of(i)` (when it
/// has one). Out of line: the insert and update plans' path, which runs for most records, stays
/// small enough to be inlined where it is called.
#[inline(never)]
fn bind_key_parts(
    schema: &TableSchema,
    key: &[u8],
    vals: &mut [Value],
    slot_of: impl Fn(usize) -> Option<usize>,
) -> Result<(), ReplayError> {
    let parts = schema.primary_key.len();
    if key::is_int_key(key, parts) {
        for i in 0..parts {
            if let Some(slot) = slot_of(i).and_then(|slot| vals.get_mut(slot)) {
                set_slot(slot, Value::Int(key::int_key_part(key, i)));
            }
        }
        return Ok(());
    }
    let mut part = 0;
    let put = |value| {
        if let Some(slot) = slot_of(part).and_then(|slot| vals.get_mut(slot)) {
            set_slot(slot, value);
        }
        part += 1;
    };
    let got =
        key::decode_key_each(key, put).map_err(|source| SchemaError::Key { table: schema.name.clone(), source })?;
    if got != parts {
        let message = format!("the logged key has {got} parts, the primary key {parts}");
        return Err(ReplayError::Plan { table: schema.name.clone(), message });
    }
    Ok(())
}

/// Stores `value` in a parameter slot. The slot almost always holds nothing to drop: null, or an
/// int or a float the previous record's plan read where it lay (plans read their parameters in
/// place), and skipping `Value`'s drop glue for it is a tenth of the cost of binding a column.
/// The rare slot that holds a value to drop is cleared out of line first, and `value` is then
/// written in place on both paths: a cold call that took `value` made the compiler build every
/// value on the stack, by narrow stores, and copy it into the slot by wide loads, a failed store
/// forward per column (`perf annotate`; so did an outlined binding closure).
#[inline(always)]
fn set_slot(slot: &mut Value, value: Value) {
    if !matches!(slot, Value::Null | Value::Int(_) | Value::Float(_)) {
        clear_slot(slot);
    }
    // The slot holds nothing to drop.
    std::mem::forget(std::mem::replace(slot, value));
}

/// [`set_slot`] of a fixed-shape row's value. The slot almost always holds the previous
/// record's value of the same column, of the same kind (plans read their parameters in place),
/// and then only its 8 bytes are written. Writing a whole `Value` made the compiler merge the
/// int and float arms into one copy of a stack temporary, written by narrow stores and read
/// back by wide loads: a failed store forward per column (`perf annotate`), which made compiled
/// replay slower by the clock than direct while it executed fewer instructions.
#[inline(always)]
fn set_fixed_slot(slot: &mut Value, value: FixedValue) {
    match (slot, value) {
        (Value::Int(x), FixedValue::Int(v)) => *x = v,
        (Value::Float(x), FixedValue::Float(v)) => *x = v,
        // Passed as plain words: a `FixedValue` argument was stored to the stack on every call.
        (slot, FixedValue::Int(v)) => set_other_slot(slot, v as u64, true),
        (slot, FixedValue::Float(v)) => set_other_slot(slot, v.to_bits(), false),
    }
}

/// [`set_fixed_slot`] of a slot holding another kind of value (a plan's first record): an int
/// of `bits`, or a float of them.
#[cold]
#[inline(never)]
fn set_other_slot(slot: &mut Value, bits: u64, int: bool) {
    *slot = if int { Value::Int(bits as i64) } else { Value::Float(f64::from_bits(bits)) };
}

/// Drops the value a slot holds (the previous record's plan did not move it), leaving null.
#[cold]
#[inline(never)]
fn clear_slot(slot: &mut Value) {
    *slot = Value::Null;
}

/// Runs a bound plan against `storage`.
#[inline(always)]
fn run(table: &Table, cached: &mut CachedPlan, mut storage: ReplayStorage<'_>) -> Result<bool, ReplayError> {
    // The update plan `choose` picks sets every non-key column: the old row is not needed.
    storage.whole_images = cached.plan.op == RedoOp::Update;
    cached.plan.procedure.run_bound(&mut cached.frame, &mut storage)?;
    let wrote_nothing =
        || ReplayError::Plan { table: table.schema.name.clone(), message: "the plan wrote nothing".into() };
    storage.outcome().ok_or_else(wrote_nothing)
}

/// The replay context: the storage interface a replay plan runs against. No OCC: each write is
/// installed at once with the record's TID by [`Table::install_if_newer`], after the schema's own
/// row check and key encoding. Secondary indexes are left to
/// [`Table::finish_recovery_range`]. A plan writes exactly once, the logged key.
pub struct ReplayStorage<'a> {
    catalog: &'a Catalog,
    /// The record's table (the one a replay plan writes), found without the catalog.
    table: &'a Table,
    key: &'a [u8],
    tid: Tid,
    /// Whether the write took effect, once it ran.
    installed: Option<bool>,
    /// The plan's `update` sets every non-key column, so it does not read the old row.
    whole_images: bool,
    /// The key's record as the caller found it, when it looked (`Some(None)`: found absent).
    found: Option<Option<Record>>,
    /// The plan applies a column patch: the key must hold a row to apply the patch to.
    row_required: bool,
    /// Every parameter was checked against its column as it was bound
    /// ([`Reader::row_each_typed`]), so a row built from parameters alone needs no check.
    checked_values: bool,
}

impl<'a> ReplayStorage<'a> {
    /// A context for the record of `key` in `table` (a table of `catalog`) with TID `tid`.
    pub fn new(catalog: &'a Catalog, table: &'a Table, key: &'a [u8], tid: Tid) -> ReplayStorage<'a> {
        ReplayStorage {
            catalog,
            table,
            key,
            tid,
            installed: None,
            whole_images: false,
            found: None,
            row_required: false,
            checked_values: false,
        }
    }

    /// Declares that every parameter of the plan was checked against its column as it was bound.
    pub fn with_checked_values(mut self, checked: bool) -> ReplayStorage<'a> {
        self.checked_values = checked;
        self
    }

    /// Checks a row the plan built against `table`'s schema, unless it is a row of the record's
    /// table made of parameters that were checked as they were bound (`from_parameters_alone`);
    /// debug builds check it anyway.
    fn check_row(&self, table: &Table, row: &Row, from_parameters_alone: bool) -> Result<(), TxnError> {
        if self.checked_values && from_parameters_alone && std::ptr::eq(table, self.table) {
            debug_assert!(table.schema.check_row(row).is_ok(), "a typed binding let a misfit through");
            return Ok(());
        }
        Ok(table.schema.check_row(row)?)
    }

    /// Declares what the caller's lookup of the key found, so the write skips its own lookup
    /// ([`Table::install_if_newer_at`]).
    pub fn with_found(mut self, found: Option<Record>) -> ReplayStorage<'a> {
        self.found = Some(found);
        self
    }

    /// Declares that the plan applies a column patch of the columns `patched` (not empty): a key
    /// without a row is an error, not a row of nulls.
    pub fn with_row_required(mut self, patched: ColumnSet) -> ReplayStorage<'a> {
        assert!(!patched.is_empty(), "a column patch patches a column");
        self.row_required = true;
        self
    }

    /// Whether the plan applies a column patch, which needs the key's row.
    fn row_required(&self) -> bool {
        self.row_required
    }

    /// Whether the plan's write changed the key's state (`None`: it wrote nothing).
    pub fn outcome(&self) -> Option<bool> {
        self.installed
    }

    fn table(&self, id: TableId) -> Result<&'a Table, TxnError> {
        if id == self.table.id {
            return Ok(self.table);
        }
        self.catalog.table(id).map(|t| &**t).ok_or_else(|| TxnError::NoSuchTable(format!("#{id}")))
    }

    /// Whether the key the plan computed is the logged one (a mismatch is corruption).
    fn check_key(&self, table: &Table, key: &Key) -> Result<(), TxnError> {
        if key.as_bytes() != self.key {
            return Err(replay_error(format!(
                "the plan's key differs from the key logged for table {}",
                table.schema.name
            )));
        }
        Ok(())
    }

    /// Checks that the key values a plan computed are the logged key's, the key it writes.
    /// Those values come from the logged key (delete) or the logged row's key columns (update),
    /// which the log's checksum binds to the logged key as firmly as it binds the direct path's;
    /// re-encoding them was most of the delete plan's extra work over direct, so only debug
    /// builds (the tests) re-derive the key and compare.
    #[inline(always)]
    fn check_plan_key(&self, table: &Table, pk: &[Value]) -> Result<(), TxnError> {
        if cfg!(debug_assertions) {
            let derived = table.schema.encode_primary_key(pk)?;
            self.check_key(table, &derived)?;
        }
        Ok(())
    }

    /// Installs the plan's write, of the logged key ([`Self::check_plan_key`]). A [`Key`] is
    /// built only to link a new record: building one for every write (and moving it through a
    /// `Result`) was a quarter of a delete plan's extra work over direct (callgrind).
    #[inline(always)]
    fn install(&mut self, table: &Table, row: Option<Row>) -> Result<(), TxnError> {
        if self.installed.is_some() {
            return Err(second_write());
        }
        self.installed = Some(match &self.found {
            Some(found) => table.install_if_newer_at(found.as_ref(), self.key, row, self.tid),
            None => table.install_if_newer(&Key::from(self.key), row, self.tid),
        });
        Ok(())
    }
}

impl ReplayStorage<'_> {
    /// Installs under the logged key a row of `t` that a plan built from its parameters alone:
    /// an insert plan's, or a whole after-image's update plan's ([`Storage::replace_row`]).
    #[inline(always)]
    fn install_parameter_row(&mut self, t: &Table, row: Row) -> Result<(), TxnError> {
        self.check_row(t, &row, true)?;
        // The row is the logged after-image, whose key columns the log's checksum binds to the
        // logged key as firmly as it binds the direct path's; re-encoding them was a fifth of
        // compiled replay's extra work on narrow rows, so only debug builds (the tests)
        // re-derive the key and compare.
        if cfg!(debug_assertions) {
            let derived = t.schema.primary_key_of(&row)?;
            self.check_key(t, &derived)?;
        }
        self.install(t, Some(row))
    }
}

#[cold]
fn second_write() -> TxnError {
    replay_error("a replay plan writes one row".into())
}

fn replay_error(message: String) -> TxnError {
    TxnError::Procedure { procedure: "replay".into(), message }
}

/// The row of `key` before the update: the present row, or — when the plan sets every non-key
/// column (`whole`), or for a key whose record is a tombstone — a row of nulls with the key's
/// values. (A partial update of a tombstone then fails the schema check of a not-null column, or
/// leaves nulls; value logs carry whole rows, so they never meet this.)
/// `None` when `row_required` (a column patch) and the key holds no row. `found` is the key's
/// record when the caller has looked it up.
fn old_row(
    table: &Table,
    key: &[u8],
    pk: &[Value],
    whole: bool,
    row_required: bool,
    found: Option<&Record>,
) -> Option<Row> {
    let record = || found.cloned().or_else(|| table.get(key));
    if !whole && let Some(record) = record() {
        let (word, row) = record.stable_read();
        if !word.is_absent() {
            return Some(row);
        }
    }
    if row_required {
        return None;
    }
    // One allocation of the row's final size (the plan then fills it in place).
    let key_part = |p: usize| table.schema.primary_key.iter().position(|&k| k == p).and_then(|i| pk.get(i));
    Some(Row::from_exact_iter((0..table.schema.columns.len()).map(|p| key_part(p).cloned().unwrap_or(Value::Null))))
}

impl Storage for ReplayStorage<'_> {
    fn get_row(&mut self, _table: TableId, _pk: &[Value]) -> Result<Option<Row>, TxnError> {
        Err(replay_error("replay plans do not read".into()))
    }

    fn scan_rows(&mut self, _scan: &Scan) -> Result<Vec<Row>, TxnError> {
        Err(replay_error("replay plans do not scan".into()))
    }

    fn insert_row(&mut self, table: TableId, row: Row) -> Result<(), TxnError> {
        let t = self.table(table)?;
        self.install_parameter_row(t, row)
    }

    fn update_row_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        let t = self.table(table)?;
        self.check_plan_key(t, pk)?;
        let found = self.found.as_ref().and_then(Option::as_ref);
        let Some(old) = old_row(t, self.key, pk, self.whole_images, self.row_required(), found) else {
            // A key deleted by a later transaction already replayed (Taurus orders a delete
            // after earlier deletes only through RAW, not WAW, edges): the patch is obsolete, as
            // any write older than the key's TID is.
            if t.get(self.key).is_some_and(|r| r.word().tid() >= self.tid) {
                self.installed = Some(false);
                return Ok(false);
            }
            return Err(replay_error("a column patch of a key that holds no row".into()));
        };
        let new = build(old)?;
        // With whole images the update sets every non-key column from a parameter and starts
        // from a row of the key's parameters ([`old_row`]).
        self.check_row(t, &new, self.whole_images)?;
        // The checker forbids setting key columns, so `new` is still the row of the logged key.
        self.install(t, Some(new))?;
        Ok(true)
    }

    /// A column patch's plan (`row_required`, every parameter checked as it was bound) edits the
    /// key's row where it lies when nothing else holds it, as direct replay does
    /// ([`Table::edit_record_if_newer`]; patches are replayed by stream recovery alone, before
    /// transactions start, as that requires); other updates build a new row. The edit cannot
    /// fail half-way: it only assigns checked parameters. Returns whether the patch took effect.
    fn update_row_in_place(
        &mut self,
        table: TableId,
        pk: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool, TxnError> {
        let t = self.table(table)?;
        if !self.row_required() || !self.checked_values || !std::ptr::eq(t, self.table) {
            return runtime::update_by_copy(self, table, pk, changes);
        }
        // Checks (debug builds) that the plan's key is the logged one, which is what it writes.
        self.check_plan_key(t, pk)?;
        if self.installed.is_some() {
            return Err(second_write());
        }
        let no_row = || replay_error("a column patch of a key that holds no row".into());
        let looked_up;
        let record = match self.found.as_ref().and_then(Option::as_ref) {
            Some(found) => found,
            None => {
                looked_up = t.get(self.key).ok_or_else(no_row)?;
                &looked_up
            }
        };
        let installed = Table::edit_record_if_newer(record, self.tid, no_row, |row| {
            let copy = row.apply(changes.iter().map(|(p, v)| (*p, v.view())));
            debug_assert!(
                t.schema.check_row(copy.as_ref().unwrap_or(row.row())).is_ok(),
                "a checked patch made a misfit row"
            );
            Ok(copy)
        })?;
        self.installed = Some(installed);
        Ok(installed)
    }

    /// The update plan of a whole after-image (`whole_images`), whose row the compiler builds
    /// by moving the bound parameters ([`runtime::replace`]): installed as an insert plan's row is.
    fn replace_row(&mut self, table: TableId, key_columns: &[usize], row: Row) -> Result<bool, TxnError> {
        let t = self.table(table)?;
        if !self.whole_images || self.row_required() || !std::ptr::eq(t, self.table) {
            return runtime::replace_by_update(self, table, key_columns, row);
        }
        self.install_parameter_row(t, row)?;
        Ok(true)
    }

    fn delete_row(&mut self, table: TableId, pk: &[Value]) -> Result<bool, TxnError> {
        let t = self.table(table)?;
        self.check_plan_key(t, pk)?;
        self.install(t, None)?;
        Ok(true)
    }
}
