//! Statements to closures. Tables are resolved to ids here, once; a block is a slice of closures
//! run in order.

use super::super::Diagnostic;
use super::super::ir::{
    Expr, ExprKind, GetOp, Procedure, RangeBound, ScanOp, Stmt, StmtKind, TableRef, UpdateOp, VarId,
};
use super::super::ops::{self, RtResult};
use super::super::runtime::{self, Flow, Frame, INT_KEY_PARTS_MAX, ScanArgs, Storage, error_at};
use super::expr::{ExprFn, expr};
use super::prefetch::{self, InFlight, Iterations, LoopPrefetch, LoopVars, Part};
use super::switch;
use super::typed::{IntKey, IntKeyValue};
use crate::storage::table::Catalog;
use crate::storage::{Direction, FixedShape, Row, TableId, Value};
use crate::txn::TxnError;
use std::sync::Arc;

/// A compiled statement.
/// It runs against any [`Storage`]: a transaction, or a replay context during recovery.
pub(crate) type StmtFn = Box<dyn Fn(&mut Frame, &mut dyn Storage) -> Result<Flow, TxnError> + Send + Sync>;

/// Compilation context: the procedure and the catalog tables resolve against.
pub(crate) struct Ctx<'a> {
    pub(crate) proc: &'a Procedure,
    pub(crate) catalog: &'a Catalog,
    pub(crate) name: Arc<str>,
    /// Per variable: whether its one read may move the value ([`super::moves`]).
    pub(crate) movable: Vec<bool>,
    /// Whether database operations call [`Storage::enter_op`] first.
    pub(crate) hooks: super::OpHooks,
}

/// A value a statement stores (an inserted column, an updated one): moved out of a variable
/// read nowhere else ([`super::moves`]), or computed.
enum Operand {
    Take(usize),
    Eval(ExprFn),
}

/// The slots `s..s + n` when the operands move, in order, out of consecutive slots.
fn take_run(operands: &[Operand]) -> Option<std::ops::Range<usize>> {
    let Some(Operand::Take(start)) = operands.first() else {
        return None;
    };
    let consecutive = operands.iter().enumerate().all(|(i, o)| matches!(o, Operand::Take(s) if *s == start + i));
    consecutive.then(|| *start..start + operands.len())
}

impl Operand {
    fn eval(&self, f: &mut Frame) -> RtResult<Value> {
        match self {
            Operand::Take(slot) => Ok(std::mem::take(&mut f.vals[*slot])),
            Operand::Eval(e) => e(f),
        }
    }
}

/// Where a statement is, for run-time errors.
#[derive(Clone)]
struct Loc {
    name: Arc<str>,
    line: u32,
    col: u32,
}

impl Loc {
    fn err(&self, message: String) -> TxnError {
        error_at(&self.name, self.line, self.col, message)
    }
}

/// Runs a compiled block.
pub(crate) fn run_block(stmts: &[StmtFn], f: &mut Frame, tx: &mut dyn Storage) -> Result<Flow, TxnError> {
    for s in stmts {
        match s(f, tx) {
            Ok(Flow::Return(v)) => return Ok(Flow::Return(v)),
            Ok(Flow::Next) => {}
            // A piece replay skips a statement that fails (see `Storage::replays_piece`).
            Err(_) if tx.replays_piece() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Flow::Next)
}

fn exprs(es: &[Expr]) -> Vec<ExprFn> {
    es.iter().map(expr).collect()
}

/// Evaluates `fs` into a vector allocated once at its final size (collecting an iterator of
/// `Result`s has no size hint and grows the vector by reallocation).
fn eval_all(fs: &[ExprFn], f: &Frame) -> RtResult<Vec<Value>> {
    let mut out = Vec::with_capacity(fs.len());
    for e in fs {
        out.push(e(f)?);
    }
    Ok(out)
}

/// Primary keys of up to this many columns are evaluated on the stack.
const KEY_INLINE: usize = 4;

/// Evaluates a primary key and passes it to `use_key`, without a heap allocation for short keys.
fn with_key<T>(
    fs: &[ExprFn],
    f: &Frame,
    loc: &Loc,
    use_key: impl FnOnce(&[Value]) -> Result<T, TxnError>,
) -> Result<T, TxnError> {
    if fs.len() > KEY_INLINE {
        return use_key(&eval_all(fs, f).map_err(|m| loc.err(m))?);
    }
    let mut buf: [Value; KEY_INLINE] = Default::default();
    for (slot, e) in buf.iter_mut().zip(fs) {
        *slot = e(f).map_err(|m| loc.err(m))?;
    }
    use_key(&buf[..fs.len()])
}

/// An inserted row's primary key as ints, read from its `values` at the key's column
/// `positions`, when every part is an int: the storage encodes the key from them instead of
/// reading it back from the row ([`Storage::insert_row_with_key_ints`]).
fn key_ints(values: &[Value], positions: &[usize]) -> Option<([i64; INT_KEY_PARTS_MAX], usize)> {
    if positions.is_empty() || positions.len() > INT_KEY_PARTS_MAX {
        return None;
    }
    let mut ints = [0; INT_KEY_PARTS_MAX];
    for (int, &p) in ints.iter_mut().zip(positions) {
        let Some(Value::Int(i)) = values.get(p) else { return None };
        *int = *i;
    }
    Some((ints, positions.len()))
}

/// Evaluates an update's `set` expressions (in column order) into `changes`.
fn eval_sets(sets: &[(usize, Operand)], f: &mut Frame, changes: &mut Vec<(usize, Value)>) -> RtResult<()> {
    for (p, e) in sets {
        let value = e.eval(f)?;
        changes.push((*p, value));
    }
    Ok(())
}

/// For an `update` whose key parts and `set` values all move out of variables
/// ([`Operand::Take`]) and which sets every non-key column once, the frame slot each column of
/// the new row moves from, in column order; `None` otherwise. (A replay plan of an after-image is
/// such an update.) Moving cannot fail, so building the row in column order rather than key
/// first, then sets, changes nothing observable; the moved variables are read nowhere else.
fn whole_row_moves(table: &TableRef, key: &[Operand], sets: &[(usize, Operand)]) -> Option<Vec<usize>> {
    let mut slots: Vec<Option<usize>> = vec![None; table.columns];
    let parts = table.primary_key.iter().zip(key);
    for (&p, operand) in parts.chain(sets.iter().map(|(p, o)| (p, o))) {
        let Operand::Take(slot) = operand else { return None };
        if slots.get_mut(p)?.replace(*slot).is_some() {
            return None;
        }
    }
    slots.into_iter().collect()
}

/// How a statement that only reads a primary key (`select ... where`, `delete`) gets it.
enum KeyRead {
    /// Every part is a variable and the variables sit in consecutive frame slots (a replay
    /// plan's key parameters, any one-variable key): the key is lent from the frame, neither
    /// cloned nor moved. Cloning it was a tenth of a compiled replay delete's cost.
    Slots(std::ops::Range<usize>),
    /// Computed part by part.
    Eval(Vec<ExprFn>),
}

impl KeyRead {
    fn of(key: &[Expr]) -> KeyRead {
        let slot = |e: &Expr| match &e.kind {
            ExprKind::Var(v) => Some(v.index()),
            _ => None,
        };
        let start = key.first().and_then(slot);
        let consecutive = |start: usize| key.iter().enumerate().all(|(i, e)| slot(e) == Some(start + i));
        match start {
            Some(start) if consecutive(start) => KeyRead::Slots(start..start + key.len()),
            _ => KeyRead::Eval(exprs(key)),
        }
    }

    /// Passes the key to `use_key`.
    fn with<T>(
        &self,
        f: &Frame,
        loc: &Loc,
        use_key: impl FnOnce(&[Value]) -> Result<T, TxnError>,
    ) -> Result<T, TxnError> {
        match self {
            KeyRead::Slots(slots) => use_key(&f.vals[slots.clone()]),
            KeyRead::Eval(fs) => with_key(fs, f, loc, use_key),
        }
    }
}

/// An evaluated primary key that owns its values, on the stack for short keys: for statements
/// that need the frame mutably after evaluating the key. A part read from a variable read
/// nowhere else is moved out of the frame, not cloned.
enum KeyValues {
    Inline([Value; KEY_INLINE], usize),
    Heap(Vec<Value>),
}

impl KeyValues {
    fn eval(parts: &[Operand], f: &mut Frame, loc: &Loc) -> Result<KeyValues, TxnError> {
        if parts.len() > KEY_INLINE {
            let mut out = Vec::with_capacity(parts.len());
            for part in parts {
                out.push(part.eval(f).map_err(|m| loc.err(m))?);
            }
            return Ok(KeyValues::Heap(out));
        }
        let mut buf: [Value; KEY_INLINE] = Default::default();
        for (slot, part) in buf.iter_mut().zip(parts) {
            *slot = part.eval(f).map_err(|m| loc.err(m))?;
        }
        Ok(KeyValues::Inline(buf, parts.len()))
    }

    fn as_slice(&self) -> &[Value] {
        match self {
            KeyValues::Inline(buf, n) => &buf[..*n],
            KeyValues::Heap(v) => v,
        }
    }
}

impl Ctx<'_> {
    /// Compiles a block.
    pub(crate) fn block(&self, stmts: &[Stmt]) -> Result<Vec<StmtFn>, Diagnostic> {
        stmts.iter().map(|s| self.stmt(s)).collect()
    }

    /// The layout every row of table `id` shares, if it has one ([`FixedShape`]): statements that
    /// build whole rows copy its head instead of encoding each value's tag and end.
    fn fixed_shape(&self, id: TableId) -> Option<FixedShape> {
        self.catalog.table(id).and_then(|t| t.schema.fixed_shape())
    }

    /// Resolves a table to its id, checking that it still has the shape the IR was checked against.
    fn table(&self, t: &TableRef, s: &Stmt) -> Result<TableId, Diagnostic> {
        let found = self.catalog.table_by_name(&t.name);
        match found {
            Some(table) if table.schema.columns.len() == t.columns && table.schema.primary_key == t.primary_key => {
                Ok(table.id)
            }
            _ => Err(Diagnostic {
                file: self.proc.file.clone(),
                line: s.line,
                col: s.col,
                message: format!(
                    "table {} is missing or differs from the schema procedure {} was checked against",
                    t.name, self.proc.name
                ),
            }),
        }
    }

    fn operand(&self, e: &Expr) -> Operand {
        match &e.kind {
            ExprKind::Var(v) if self.movable[v.index()] => Operand::Take(v.index()),
            _ => Operand::Eval(expr(e)),
        }
    }

    fn stmt(&self, s: &Stmt) -> Result<StmtFn, Diagnostic> {
        let compiled = self.stmt_inner(s)?;
        if s.db_op().is_none() || self.hooks == super::OpHooks::Off {
            return Ok(compiled);
        }
        // A database operation names itself to the storage first (PACMAN piece replay), which
        // may skip it whole: an operation of another slice, whose results (and `found`) reach
        // only statements of other slices, or statements that fail harmlessly
        // (`crate::pacman::piece`).
        let id = s.id.0;
        Ok(Box::new(move |f, tx| if tx.enter_op(id) { compiled(f, tx) } else { Ok(Flow::Next) }))
    }

    fn stmt_inner(&self, s: &Stmt) -> Result<StmtFn, Diagnostic> {
        let loc = Loc { name: Arc::clone(&self.name), line: s.line, col: s.col };
        match &s.kind {
            StmtKind::Assign { var, value } => {
                let (slot, value) = (var.index(), expr(value));
                Ok(Box::new(move |f, _| {
                    f.vals[slot] = value(f).map_err(|m| loc.err(m))?;
                    Ok(Flow::Next)
                }))
            }
            StmtKind::If { .. } if let Some(chain) = switch::chain(s) => self.switch(chain),
            StmtKind::If { cond, then, otherwise } => {
                let (cond, then, otherwise) = (expr(cond), self.block(then)?, self.block(otherwise)?);
                Ok(Box::new(move |f, tx| {
                    let c = cond(f).map_err(|m| loc.err(m))?;
                    run_block(if ops::truth(&c) { &then } else { &otherwise }, f, tx)
                }))
            }
            StmtKind::ForRange { var, start, end, body } => self.for_range(*var, start, end, body, loc),
            StmtKind::ForArray { var, array, body } => self.for_array(*var, array.index(), body, loc),
            StmtKind::ForScan { scan, body } => self.for_scan(scan, body, s, loc),
            StmtKind::Get(g) => self.get(g, s, loc),
            StmtKind::ScanFirst(scan) => self.scan_first(scan, s, loc),
            StmtKind::ScanAll(scan) => self.scan_all(scan, s, loc),
            StmtKind::Insert(i) => {
                let table = self.table(&i.table, s)?;
                let values: Vec<Operand> = i.values.iter().map(|e| self.operand(e)).collect();
                let moved_slots = take_run(&values);
                let shape = self.fixed_shape(table);
                let key_columns = i.table.primary_key.clone();
                Ok(Box::new(move |f, tx| {
                    let mut ints = None;
                    let row = match &moved_slots {
                        // Every value is read where it lies in consecutive slots (a replay plan's
                        // parameters), encoded into the row without a copy of its own; from a
                        // copy of the table's fixed head when it has one.
                        Some(slots) => {
                            let values = &f.vals[slots.clone()];
                            ints = key_ints(values, &key_columns);
                            shape
                                .as_ref()
                                .and_then(|s| s.build(values.iter()))
                                .unwrap_or_else(|| Row::from_slice(values))
                        }
                        None => Row::build(|row| {
                            for v in &values {
                                row.push(v.eval(f).map_err(|m| loc.err(m))?);
                            }
                            ints = key_ints(row, &key_columns);
                            Ok::<(), TxnError>(())
                        })?,
                    };
                    match ints {
                        Some((ints, n)) => tx.insert_row_with_key_ints(table, row, &ints[..n])?,
                        None => runtime::insert(tx, table, row)?,
                    }
                    Ok(Flow::Next)
                }))
            }
            StmtKind::Update(u) => self.update(u, s, loc),
            StmtKind::Delete(d) => {
                let (table, key, found) = (self.table(&d.table, s)?, KeyRead::of(&d.key), self.proc.found.index());
                Ok(Box::new(move |f, tx| {
                    let deleted = key.with(f, &loc, |key| runtime::delete(tx, table, key))?;
                    f.vals[found] = Value::Bool(deleted);
                    Ok(Flow::Next)
                }))
            }
            StmtKind::Return(values) => {
                let values = exprs(values);
                Ok(Box::new(move |f, tx| {
                    if tx.replays_piece() {
                        // A piece's result is its writes; the values may come from skipped operations.
                        return Ok(Flow::Return(Vec::new()));
                    }
                    Ok(Flow::Return(eval_all(&values, f).map_err(|m| loc.err(m))?))
                }))
            }
            StmtKind::Abort(msg) => {
                let msg = expr(msg);
                Ok(Box::new(move |f, _| {
                    let m = msg(f).map_err(|m| loc.err(m))?;
                    Err(TxnError::UserAbort(m.as_text().map_or_else(|| m.to_string(), str::to_string)))
                }))
            }
        }
    }

    /// The loop-key prefetch of a range or array loop's body ([`prefetch`]); `vars`: what the
    /// loop sets before each iteration.
    fn loop_prefetch(&self, body: &[Stmt], vars: LoopVars) -> Option<LoopPrefetch> {
        let keys = prefetch::loop_keys(self.proc.found, body)
            .into_iter()
            .filter_map(|k| {
                let table = self.table(k.table, k.stmt).ok()?;
                let parts = k.parts.iter().map(|e| Part::of(e, &vars, expr)).collect();
                Some(prefetch::CompiledKey { table, columns: k.table.columns, parts })
            })
            .collect();
        LoopPrefetch::new(keys)
    }

    /// An `if` / `else if` chain over one int variable, by a table of its arms ([`switch`]).
    fn switch(&self, chain: switch::Chain<'_>) -> Result<StmtFn, Diagnostic> {
        let constants: Vec<i64> = chain.arms.iter().map(|(k, _)| *k).collect();
        let arms = switch::Arms::new(&constants);
        let blocks = chain.arms.iter().map(|(_, block)| self.block(block)).collect::<Result<Vec<_>, _>>()?;
        let (slot, otherwise) = (chain.var.index(), self.block(chain.otherwise)?);
        Ok(Box::new(move |f, tx| {
            let block = arms.find(&f.vals[slot]).and_then(|arm| blocks.get(arm)).unwrap_or(&otherwise);
            run_block(block, f, tx)
        }))
    }

    fn for_range(&self, var: VarId, start: &Expr, end: &Expr, body: &[Stmt], loc: Loc) -> Result<StmtFn, Diagnostic> {
        let (slot, prefetch) = (var.index(), self.loop_prefetch(body, LoopVars::Range(var)));
        let (start, end, body) = (expr(start), expr(end), self.block(body)?);
        Ok(Box::new(move |f, tx| {
            let (a, b) = (start(f).map_err(|m| loc.err(m))?, end(f).map_err(|m| loc.err(m))?);
            let (Value::Int(a), Value::Int(b)) = (a, b) else {
                return Err(loc.err("a range bound is null".into()));
            };
            let prefetch = prefetch.as_ref().filter(|_| tx.prefetches());
            let (n, mut flight) = (usize::try_from(b.saturating_sub(a)).unwrap_or(0), InFlight::default());
            for (i, x) in (a..b).enumerate() {
                f.tick().map_err(|m| loc.err(m))?;
                if let Some(prefetch) = prefetch {
                    let mut inputs = |f: &mut Frame, j: usize| f.vals[slot] = Value::Int(a.saturating_add(j as i64));
                    prefetch.before(i, &mut flight, f, tx, Iterations::Range { start: a, len: n }, &mut inputs);
                }
                f.vals[slot] = Value::Int(x);
                if let Flow::Return(v) = run_block(&body, f, tx)? {
                    return Ok(Flow::Return(v));
                }
            }
            Ok(Flow::Next)
        }))
    }

    fn for_array(&self, var: VarId, array: usize, body: &[Stmt], loc: Loc) -> Result<StmtFn, Diagnostic> {
        let (slot, prefetch) = (var.index(), self.loop_prefetch(body, LoopVars::Array(var)));
        let body = self.block(body)?;
        Ok(Box::new(move |f, tx| {
            // A cheap clone of the Arc, so the body may write the frame while we iterate.
            let items = f.arrays.get(array).cloned().flatten();
            let items: &[Value] = items.as_deref().unwrap_or(&[]);
            let prefetch = prefetch.as_ref().filter(|_| tx.prefetches());
            let mut flight = InFlight::default();
            for (i, item) in items.iter().enumerate() {
                f.tick().map_err(|m| loc.err(m))?;
                if let Some(prefetch) = prefetch {
                    let mut inputs = |f: &mut Frame, j: usize| f.vals[slot] = items[j].clone();
                    prefetch.before(i, &mut flight, f, tx, Iterations::Array(items), &mut inputs);
                }
                f.vals[slot] = item.clone();
                if let Flow::Return(v) = run_block(&body, f, tx)? {
                    return Ok(Flow::Return(v));
                }
            }
            Ok(Flow::Next)
        }))
    }

    /// A loop over a scan's rows. It prefetches no keys ahead ([`prefetch`], "Which loops").
    fn for_scan(&self, scan: &ScanOp, body: &[Stmt], s: &Stmt, loc: Loc) -> Result<StmtFn, Diagnostic> {
        let (scan, body, found) = (self.scan(scan, s, usize::MAX)?, self.block(body)?, self.proc.found.index());
        Ok(Box::new(move |f, tx| {
            let rows = scan.run(f, tx, &loc)?;
            f.vals[found] = Value::Bool(!rows.is_empty());
            for row in &rows {
                f.tick().map_err(|m| loc.err(m))?;
                scan.set_columns(f, Some(row));
                if let Flow::Return(v) = run_block(&body, f, tx)? {
                    return Ok(Flow::Return(v));
                }
            }
            Ok(Flow::Next)
        }))
    }

    fn scan_first(&self, scan: &ScanOp, s: &Stmt, loc: Loc) -> Result<StmtFn, Diagnostic> {
        let (scan, found) = (self.scan(scan, s, 1)?, self.proc.found.index());
        Ok(Box::new(move |f, tx| {
            let rows = scan.run(f, tx, &loc)?;
            f.vals[found] = Value::Bool(!rows.is_empty());
            scan.set_columns(f, rows.first());
            Ok(Flow::Next)
        }))
    }

    fn scan_all(&self, scan: &ScanOp, s: &Stmt, loc: Loc) -> Result<StmtFn, Diagnostic> {
        let (slot, column) = (scan.into[0].index(), scan.columns[0]);
        let (scan, found) = (self.scan(scan, s, usize::MAX)?, self.proc.found.index());
        Ok(Box::new(move |f, tx| {
            let rows = scan.run(f, tx, &loc)?;
            f.vals[found] = Value::Bool(!rows.is_empty());
            f.set_array_column(slot, column, &rows);
            Ok(Flow::Next)
        }))
    }

    fn get(&self, g: &GetOp, s: &Stmt, loc: Loc) -> Result<StmtFn, Diagnostic> {
        let (table, key, found) = (self.table(&g.table, s)?, KeyRead::of(&g.key), self.proc.found.index());
        let int_key = IntKey::of(&g.key);
        let targets: Vec<(usize, usize)> = g.into.iter().map(|v| v.index()).zip(g.columns.iter().copied()).collect();
        Ok(Box::new(move |f, tx| {
            let row = match int_key.as_ref().map(|k| k.eval(f)) {
                Some(IntKeyValue::Ints(ints, n)) => tx.get_row_ints(table, &ints[..n])?,
                Some(IntKeyValue::Null) => None,
                Some(IntKeyValue::Error(message)) => return Err(loc.err(message)),
                Some(IntKeyValue::Untyped) | None => key.with(f, &loc, |key| runtime::get(tx, table, key))?,
            };
            f.vals[found] = Value::Bool(row.is_some());
            match &row {
                Some(row) => row.values_into(&targets, &mut f.vals),
                None => targets.iter().for_each(|&(slot, _)| f.vals[slot] = Value::Null),
            }
            Ok(Flow::Next)
        }))
    }

    fn update(&self, u: &UpdateOp, s: &Stmt, loc: Loc) -> Result<StmtFn, Diagnostic> {
        let (table, found) = (self.table(&u.table, s)?, self.proc.found.index());
        let key: Vec<Operand> = u.key.iter().map(|e| self.operand(e)).collect();
        let sets: Vec<(usize, Operand)> = u.sets.iter().map(|(p, e)| (*p, self.operand(e))).collect();
        if let Some(slots) = whole_row_moves(&u.table, &key, &sets) {
            // Every column of the new row moves out of a variable: build it as an insert does,
            // without the old row, a key evaluated apart, or a callback per column.
            let key_columns = u.table.primary_key.clone();
            let shape = self.fixed_shape(table);
            return Ok(Box::new(move |f, tx| {
                let values = slots.iter().map(|&slot| &f.vals[slot]);
                let fixed = shape.as_ref().and_then(|s| s.build(values));
                let row = fixed.unwrap_or_else(|| Row::from_refs(slots.iter().map(|&slot| f.vals[slot].view())));
                let updated = runtime::replace(tx, table, &key_columns, row)?;
                f.vals[found] = Value::Bool(updated);
                Ok(Flow::Next)
            }));
        }
        let reads_row = u.sets.iter().any(|(_, e)| e.reads_row());
        let int_key = IntKey::of(&u.key);
        // The new row is built from the changes in column order ([`Row::with_values`]); every
        // set expression reads the old row, never the new one, so their order is free. The
        // checker rejects a column set twice (`check::query`), which `with_values` relies on.
        let mut sets = sets;
        sets.sort_by_key(|(p, _)| *p);
        assert!(sets.windows(2).all(|w| w[0].0 < w[1].0), "an update sets a column twice");
        // The checker keeps `set`s off the primary key, so the storage checks only these.
        let changed: Vec<usize> = sets.iter().map(|(p, _)| *p).collect();
        assert!(changed.iter().all(|p| !u.table.primary_key.contains(p)), "an update sets a key column");
        Ok(Box::new(move |f, tx| {
            // The key is evaluated before the frame is lent to the set expressions.
            let ints = match int_key.as_ref().map(|k| k.eval(f)) {
                Some(IntKeyValue::Ints(ints, n)) => Some((ints, n)),
                Some(IntKeyValue::Error(message)) => return Err(loc.err(message)),
                // A null part (no row, nothing evaluated) is the generic path's to decide.
                Some(IntKeyValue::Null | IntKeyValue::Untyped) | None => None,
            };
            let key = match ints {
                Some(_) => None,
                None => Some(KeyValues::eval(&key, f, &loc)?),
            };
            let key = key.as_ref().map_or(&[][..], KeyValues::as_slice);
            let mut changes = std::mem::take(&mut f.changes);
            changes.clear();
            let updated = if reads_row {
                let mut build = |old: Row| -> Result<Row, TxnError> {
                    f.row = Some(old);
                    let evaluated = eval_sets(&sets, f, &mut changes);
                    let new = f.row.take().map(|old| old.with_values(&changes));
                    evaluated.map_err(|m| loc.err(m))?;
                    new.ok_or_else(|| loc.err("update lost its row".into()))
                };
                match ints {
                    Some((ints, n)) => tx.update_columns_with_ints(table, &ints[..n], &changed, &mut build),
                    None => runtime::update_columns(tx, table, key, &changed, build),
                }
            } else {
                // Nothing reads the old row: the storage sets the columns where the row lies
                // when no one else can see it (replay), else in a copy.
                match (eval_sets(&sets, f, &mut changes), ints) {
                    (Ok(()), Some((ints, n))) => tx.update_row_in_place_ints(table, &ints[..n], &changes),
                    (Ok(()), None) => runtime::update_in_place(tx, table, key, &changes),
                    (Err(m), _) => Err(loc.err(m)),
                }
            };
            changes.clear();
            f.changes = changes;
            f.vals[found] = Value::Bool(updated?);
            Ok(Flow::Next)
        }))
    }

    fn scan(&self, op: &ScanOp, s: &Stmt, cap: usize) -> Result<CompiledScan, Diagnostic> {
        let bound = |b: &Option<RangeBound>| b.as_ref().map(|b| (expr(&b.value), b.inclusive));
        Ok(CompiledScan {
            table: self.table(&op.table, s)?,
            index: op.index,
            prefix: exprs(&op.prefix),
            lower: bound(&op.lower),
            upper: bound(&op.upper),
            direction: op.direction,
            limit: expr(&op.limit),
            cap,
            distinct: op.distinct.then(|| op.columns.clone()),
            targets: op.into.iter().map(|v| v.index()).zip(op.columns.iter().copied()).collect(),
        })
    }
}

/// A scan with its table resolved and its expressions compiled.
struct CompiledScan {
    table: TableId,
    index: Option<usize>,
    prefix: Vec<ExprFn>,
    lower: Option<(ExprFn, bool)>,
    upper: Option<(ExprFn, bool)>,
    direction: Direction,
    limit: ExprFn,
    cap: usize,
    /// `select distinct`: the selected column positions rows are compared on.
    distinct: Option<Vec<usize>>,
    /// (frame slot, column position) pairs filled from each row.
    targets: Vec<(usize, usize)>,
}

impl CompiledScan {
    fn run(&self, f: &Frame, tx: &mut dyn Storage, loc: &Loc) -> Result<Vec<Row>, TxnError> {
        let ev = |e: &ExprFn| e(f).map_err(|m| loc.err(m));
        let prefix = self.prefix.iter().map(ev).collect::<Result<Vec<_>, _>>()?;
        let bound = |b: &Option<(ExprFn, bool)>| b.as_ref().map(|(e, inc)| ev(e).map(|v| (v, *inc))).transpose();
        let (lower, upper) = (bound(&self.lower)?, bound(&self.upper)?);
        let limit = ev(&self.limit)?;
        let args = ScanArgs {
            table: self.table,
            index: self.index,
            prefix: &prefix,
            lower,
            upper,
            direction: self.direction,
            limit,
            cap: self.cap,
        };
        let rows = runtime::scan(tx, args)?.map_err(|m| loc.err(m))?;
        Ok(match &self.distinct {
            Some(positions) => runtime::distinct_rows(rows, positions),
            None => rows,
        })
    }

    fn set_columns(&self, f: &mut Frame, row: Option<&Row>) {
        match row {
            Some(row) => row.values_into(&self.targets, &mut f.vals),
            None => self.targets.iter().for_each(|&(slot, _)| f.vals[slot] = Value::Null),
        }
    }
}
