//! Loop-key prefetch: a loop starts loading the rows its later iterations will look up.
//!
//! A compiled `for` loop over a range or an array whose body reads or writes rows by their full
//! primary key spends much of its time in those lookups' cache misses: on a table larger than
//! the cache, a lookup misses on the point index's slot, then on the record the slot points to,
//! then on the row (three dependent misses; TPC-C's new-order reads an item and updates a stock
//! row per order line: `docs/PERFORMANCE.md`, "TPC-C", "Session 25"). When an operation's key is a function
//! of the iteration alone, the loop computes the keys of the next iterations and asks the
//! storage to start loading them, one stage per iteration, so that each miss overlaps the work
//! of the iterations in between: before iteration `i` runs, iteration `i + 6`'s slot lines, the
//! records of iteration `i + 4` and the rows of iteration `i + 2` ([`Storage::prefetch_key`],
//! [`Storage::prefetch_stage`]). This is software-pipelined prefetching (Chen, Ailamaki,
//! Gibbons, Mowry, "Improving hash join performance through prefetching", ICDE 2004), applied
//! by the compiler to any loop of the language.
//!
//! # Which loops
//!
//! Loops over a range or an array. A loop over a scan's rows prefetches nothing: the one such
//! loop of the workloads that reads other rows by key, TPC-C's stock-level (a stock row per
//! item of the district's last 20 orders), reads rows the new-orders of a moment ago wrote, in
//! cache, and its prefetch was pure cost: stock-level's median latency 104–115 µs with it,
//! 82–102 µs without, the whole 1-warehouse mix 4 % faster without (`docs/PERFORMANCE.md`,
//! "TPC-C", "Session 43"). Delivery's scan loop reads only the rows it scans, which the scan
//! has just read.
//!
//! # Which keys
//!
//! A key qualifies ([`loop_keys`]) when every part is an expression of:
//! - the iteration's input, the loop variable, when the body never assigns it;
//! - variables the body never assigns (parameters, locals set before the loop), and elements
//!   and lengths of arrays the body never assigns;
//! - locals the body assigns exactly once, at its top level, before the operation, from such
//!   expressions: their definition is substituted (`let iid = item_ids[i]` makes a key
//!   `iid` into `item_ids[i]`).
//!
//! Operations inside `if`s count (a prefetch for an operation that does not run is only wasted
//! work); operations in nested loops do not (their keys change within an iteration). Each
//! distinct key is prefetched once, at most [`KEYS_MAX`] per loop.
//!
//! # Reading a later iteration's key
//!
//! Most key parts are read where they lie ([`Part`]): a constant, a variable the body leaves
//! alone, the loop's own variable (a range's `a + j`, an array's element `j`), or an array's
//! element at a range loop's variable (`ids[n]`). Only a part that is another expression
//! (`n + 1`) is evaluated by its closure, in the frame with iteration `j`'s loop variable set.
//!
//! # Why it cannot change a result
//!
//! Evaluating a substituted key is evaluating expressions of values the iteration will see,
//! and expressions have no effects. An evaluation that fails (an index out of range, an
//! overflow, a null part) prefetches nothing and reports nothing: the iteration that would fail
//! may never run (an earlier one may abort), and if it runs it fails by itself. A prefetch reads
//! nothing the transaction sees, takes no lock and records no read. The frame's iteration inputs
//! are set to the later iteration's values while its keys are evaluated; the loop sets the
//! current iteration's values right after, before its body runs.

use super::super::ir::{Expr, ExprKind, Stmt, StmtKind, TableRef, VarId};
use super::super::runtime::{Frame, INT_KEY_PARTS_MAX, Storage};
use super::expr::ExprFn;
use crate::storage::point::{KeyHash, Prefetch};
use crate::storage::{TableId, Value};
use std::collections::HashMap;

/// The most keys a loop prefetches per iteration.
pub(super) const KEYS_MAX: usize = 4;
/// The most parts a prefetched key has (evaluated on the stack).
const KEY_PARTS_MAX: usize = 4;
/// How many iterations ahead of its use a key's slot line is loaded.
const SLOT_AHEAD: usize = 6;
/// How many iterations ahead its record is loaded (the slot line has had two iterations to
/// arrive: a short body, one lookup that hits, takes less than a miss).
const RECORD_AHEAD: usize = 4;
/// How many iterations ahead its row is loaded (the record has had two iterations to arrive).
const ROW_AHEAD: usize = 2;
/// Iterations whose key hashes are kept: from the slot stage to the row stage.
const IN_FLIGHT: usize = SLOT_AHEAD + 1;

/// A point operation of a loop's body whose key is a function of the iteration.
pub(super) struct LoopKey<'a> {
    /// The operation's statement (for errors resolving its table).
    pub(super) stmt: &'a Stmt,
    /// Its table.
    pub(super) table: &'a TableRef,
    /// Its key's parts, rewritten in the iteration's inputs and the loop's invariants.
    pub(super) parts: Vec<Expr>,
}

/// The point operations of `body` (reads, updates, deletes, and the absence check of inserts)
/// whose keys qualify (module docs), rewritten; `found` is the procedure's `found`, which every
/// operation sets. The variables the loop sets before each iteration need no mention: the body
/// does not assign them (or they do not qualify), so they are read as they are, and the loop
/// puts each later iteration's values in them while its keys are evaluated.
pub(super) fn loop_keys(found: VarId, body: &[Stmt]) -> Vec<LoopKey<'_>> {
    let mut writes = HashMap::new();
    count_writes(body, &mut writes);
    writes.insert(found, u32::MAX);
    let mut rewrite = Rewrite { writes, defs: HashMap::new() };
    let mut keys: Vec<LoopKey<'_>> = Vec::new();
    for s in body {
        for (stmt, table, key) in point_ops(s) {
            if keys.len() == KEYS_MAX || key.len() > KEY_PARTS_MAX {
                continue;
            }
            let Some(parts) = key.into_iter().map(|e| rewrite.expr(e)).collect::<Option<Vec<_>>>() else {
                continue;
            };
            // The same key read then written (a select then an update of one row) loads once.
            let same = |k: &LoopKey<'_>| k.table.name == table.name && format!("{:?}", k.parts) == format!("{parts:?}");
            if !keys.iter().any(same) {
                keys.push(LoopKey { stmt, table, parts });
            }
        }
        if let StmtKind::Assign { var, value } = &s.kind
            && rewrite.writes.get(var) == Some(&1)
            && let Some(def) = rewrite.expr(value)
        {
            rewrite.defs.insert(*var, def);
        }
    }
    keys
}

/// Counts, per variable, the statements of `block` (nested ones included) that assign it.
fn count_writes(block: &[Stmt], writes: &mut HashMap<VarId, u32>) {
    for s in block {
        let mut add = |v: VarId| *writes.entry(v).or_insert(0) += 1;
        match &s.kind {
            StmtKind::Assign { var, .. } | StmtKind::ForRange { var, .. } | StmtKind::ForArray { var, .. } => add(*var),
            StmtKind::Get(g) => g.into.iter().copied().for_each(&mut add),
            StmtKind::ForScan { scan, .. } | StmtKind::ScanFirst(scan) | StmtKind::ScanAll(scan) => {
                scan.into.iter().copied().for_each(&mut add);
            }
            _ => {}
        }
        for child in s.children() {
            count_writes(child, writes);
        }
    }
}

/// The point operations of `s` and of the `if`s in it, not of nested loops: (statement, table,
/// key parts).
fn point_ops(s: &Stmt) -> Vec<(&Stmt, &TableRef, Vec<&Expr>)> {
    let mut out = Vec::new();
    match &s.kind {
        StmtKind::Get(g) => out.push((s, &g.table, g.key.iter().collect())),
        StmtKind::Update(u) => out.push((s, &u.table, u.key.iter().collect())),
        StmtKind::Delete(d) => out.push((s, &d.table, d.key.iter().collect())),
        StmtKind::Insert(i) => {
            let key = i.table.primary_key.iter().filter_map(|&p| i.values.get(p)).collect();
            out.push((s, &i.table, key));
        }
        StmtKind::If { then, otherwise, .. } => {
            for nested in then.iter().chain(otherwise) {
                out.extend(point_ops(nested));
            }
        }
        _ => {}
    }
    out
}

/// Rewrites expressions in the iteration's inputs and the loop's invariants.
struct Rewrite {
    /// Per variable, how many statements of the body assign it (absent: none).
    writes: HashMap<VarId, u32>,
    /// Locals assigned once at the body's top level so far, by their rewritten definitions.
    defs: HashMap<VarId, Expr>,
}

impl Rewrite {
    /// Whether the body leaves `v` alone.
    fn invariant(&self, v: VarId) -> bool {
        !self.writes.contains_key(&v)
    }

    /// `e` in the iteration's inputs and invariants, or `None` if it reads anything else.
    fn expr(&self, e: &Expr) -> Option<Expr> {
        let kind = match &e.kind {
            ExprKind::Const(v) => ExprKind::Const(v.clone()),
            ExprKind::Var(v) if self.invariant(*v) => ExprKind::Var(*v),
            ExprKind::Var(v) => return self.defs.get(v).cloned(),
            ExprKind::Column(_) => return None,
            ExprKind::ArrayLen(a) if self.invariant(*a) => ExprKind::ArrayLen(*a),
            ExprKind::ArrayGet(a, i) if self.invariant(*a) => ExprKind::ArrayGet(*a, Box::new(self.expr(i)?)),
            ExprKind::ArrayLen(_) | ExprKind::ArrayGet(..) => return None,
            ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(self.expr(x)?)),
            ExprKind::Binary(op, a, b) => ExprKind::Binary(*op, Box::new(self.expr(a)?), Box::new(self.expr(b)?)),
            ExprKind::IsNull { expr, negated } => {
                ExprKind::IsNull { expr: Box::new(self.expr(expr)?), negated: *negated }
            }
            ExprKind::Call(func, args) => {
                ExprKind::Call(*func, args.iter().map(|a| self.expr(a)).collect::<Option<Vec<_>>>()?)
            }
        };
        Some(Expr { ty: e.ty, kind })
    }
}

/// A loop's prefetched keys, compiled.
pub(crate) struct LoopPrefetch {
    keys: Vec<CompiledKey>,
    /// Whether a part is evaluated in the frame ([`Part::Eval`]), which then needs the later
    /// iteration's inputs set in it.
    needs_inputs: bool,
}

/// One prefetched key: its table (and column count, for the row stage) and its parts.
pub(super) struct CompiledKey {
    pub(super) table: TableId,
    pub(super) columns: usize,
    pub(super) parts: Vec<Part>,
}

/// What a loop gives each iteration: the values its own variables take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LoopVars {
    /// `for v in a .. b`: `v` is `a + j` in iteration `j`.
    Range(VarId),
    /// `for v in array`: `v` is element `j`.
    Array(VarId),
}

/// Where a prefetched key's part comes from in a later iteration. The common parts are read
/// where they lie, with no closure to call and no frame to set for that iteration first.
pub(super) enum Part {
    /// A constant.
    Const(Value),
    /// A variable the body leaves alone (`Rewrite` keeps only those).
    Slot(usize),
    /// The loop's own variable (a range's or an array's).
    LoopVar,
    /// Element `v` of an array the body leaves alone, `v` a range loop's variable (`a[i]`).
    ElementAtLoopVar(usize),
    /// Anything else, evaluated in the frame with the iteration's inputs set.
    Eval(ExprFn),
}

impl Part {
    /// How the loop whose own variables are `vars` gets part `e` (rewritten by [`loop_keys`]).
    pub(super) fn of(e: &Expr, vars: &LoopVars, compile: impl Fn(&Expr) -> ExprFn) -> Part {
        let own = |v: VarId| match vars {
            LoopVars::Range(var) | LoopVars::Array(var) => *var == v,
        };
        match &e.kind {
            ExprKind::Const(v) => Part::Const(v.clone()),
            ExprKind::Var(v) if own(*v) => Part::LoopVar,
            ExprKind::Var(v) => Part::Slot(v.index()),
            ExprKind::ArrayGet(a, i)
                if matches!(vars, LoopVars::Range(_)) && matches!(i.kind, ExprKind::Var(v) if own(v)) =>
            {
                Part::ElementAtLoopVar(a.index())
            }
            _ => Part::Eval(compile(e)),
        }
    }
}

/// The loop's iterations, as [`LoopPrefetch::before`] reads a later one's values.
#[derive(Clone, Copy)]
pub(crate) enum Iterations<'a> {
    /// `len` values of a range from `start`.
    Range { start: i64, len: usize },
    /// An array's elements.
    Array(&'a [Value]),
}

impl Iterations<'_> {
    /// How many iterations the loop runs.
    fn len(&self) -> usize {
        match self {
            Iterations::Range { len, .. } => *len,
            Iterations::Array(items) => items.len(),
        }
    }

    /// Part `part`'s value in iteration `j` if it is an int (every TPC-C key part), read where
    /// it lies, no `Value` built; `None` for any other value or none. It repeats [`Self::part`]'s
    /// match because going through `part` and its `Value` cost 1% more TPC-C instructions a request
    /// (140,468 against 139,115, session 63).
    #[inline]
    fn int_part(&self, part: &Part, j: usize, f: &Frame) -> Option<i64> {
        let int = |v: &Value| if let Value::Int(i) = v { Some(*i) } else { None };
        match (part, self) {
            (Part::Const(v), _) => int(v),
            (Part::Slot(slot), _) => int(&f.vals[*slot]),
            (Part::LoopVar, Iterations::Range { start, .. }) => Some(start.saturating_add(j as i64)),
            (Part::LoopVar, Iterations::Array(items)) => items.get(j).and_then(int),
            (Part::ElementAtLoopVar(array), Iterations::Range { start, .. }) => {
                let index = usize::try_from(start.saturating_add(j as i64)).ok()?;
                f.array(*array).get(index).and_then(int)
            }
            (Part::Eval(e), _) => e(f).ok().as_ref().and_then(int),
            (Part::ElementAtLoopVar(_), Iterations::Array(_)) => None,
        }
    }

    /// Part `part`'s value in iteration `j`; `None` when it has none (an element past the
    /// array's end, a failed evaluation): the key is then not prefetched.
    #[inline]
    fn part(&self, part: &Part, j: usize, f: &Frame) -> Option<Value> {
        match (part, self) {
            (Part::Const(v), _) => Some(v.clone_inline()),
            (Part::Slot(slot), _) => Some(f.vals[*slot].clone_inline()),
            (Part::LoopVar, Iterations::Range { start, .. }) => Some(Value::Int(start.saturating_add(j as i64))),
            (Part::LoopVar, Iterations::Array(items)) => items.get(j).map(Value::clone_inline),
            (Part::ElementAtLoopVar(array), Iterations::Range { start, .. }) => {
                let index = usize::try_from(start.saturating_add(j as i64)).ok()?;
                f.array(*array).get(index).map(Value::clone_inline)
            }
            (Part::Eval(e), _) => e(f).ok(),
            // `Part::of` gives this part only to range loops.
            (Part::ElementAtLoopVar(_), Iterations::Array(_)) => None,
        }
    }
}

/// Iteration `j`'s value of `key` as ints, when every part is one: the storage encodes them
/// without a `Value` a part ([`Storage::prefetch_key_ints`]). A part of another value (text, a
/// null) leaves the key to the values path.
#[inline]
fn int_key(
    key: &CompiledKey,
    j: usize,
    f: &Frame,
    iterations: Iterations<'_>,
) -> Option<([i64; INT_KEY_PARTS_MAX], usize)> {
    let mut ints = [0; INT_KEY_PARTS_MAX];
    if key.parts.len() > INT_KEY_PARTS_MAX {
        return None;
    }
    for (int, part) in ints.iter_mut().zip(&key.parts) {
        *int = iterations.int_part(part, j, f)?;
    }
    Some((ints, key.parts.len()))
}

/// The key hashes of the iterations whose prefetches are under way, by iteration modulo
/// [`IN_FLIGHT`]; one per loop run, on the stack.
#[derive(Default)]
pub(crate) struct InFlight {
    hashes: [[Option<KeyHash>; KEYS_MAX]; IN_FLIGHT],
}

impl LoopPrefetch {
    /// The prefetch of `keys` (at most [`KEYS_MAX`]); `None` for none.
    pub(super) fn new(keys: Vec<CompiledKey>) -> Option<LoopPrefetch> {
        assert!(keys.len() <= KEYS_MAX, "at most {KEYS_MAX} keys per loop");
        let needs_inputs = keys.iter().flat_map(|k| &k.parts).any(|p| matches!(p, Part::Eval(_)));
        (!keys.is_empty()).then_some(LoopPrefetch { keys, needs_inputs })
    }

    /// Before iteration `i` (0-based) of the loop's `iterations` runs: starts each stage of the
    /// iterations ahead. `iterations` gives a later iteration's values; `inputs(f, j)` sets
    /// iteration `j`'s inputs in the frame, for parts evaluated there (the loop sets iteration
    /// `i`'s after this, before its body).
    pub(crate) fn before(
        &self,
        i: usize,
        flight: &mut InFlight,
        f: &mut Frame,
        tx: &mut dyn Storage,
        iterations: Iterations<'_>,
        inputs: &mut dyn FnMut(&mut Frame, usize),
    ) {
        let n = iterations.len();
        if i == 0 {
            for j in 0..SLOT_AHEAD.min(n) {
                self.start(j, flight, f, tx, iterations, inputs);
            }
        }
        if i + SLOT_AHEAD < n {
            self.start(i + SLOT_AHEAD, flight, f, tx, iterations, inputs);
        }
        if i + RECORD_AHEAD < n {
            self.stage(i + RECORD_AHEAD, flight, tx, |_| Prefetch::Record);
        }
        if i + ROW_AHEAD < n {
            self.stage(i + ROW_AHEAD, flight, tx, |key| Prefetch::Row { columns: key.columns });
        }
    }

    /// Evaluates iteration `j`'s keys and starts loading their slot lines.
    fn start(
        &self,
        j: usize,
        flight: &mut InFlight,
        f: &mut Frame,
        tx: &mut dyn Storage,
        iterations: Iterations<'_>,
        inputs: &mut dyn FnMut(&mut Frame, usize),
    ) {
        if self.needs_inputs {
            inputs(f, j);
        }
        let hashes = &mut flight.hashes[j % IN_FLIGHT];
        for (hash, key) in hashes.iter_mut().zip(&self.keys) {
            if let Some((ints, n)) = int_key(key, j, f, iterations) {
                *hash = tx.prefetch_key_ints(key.table, &ints[..n]);
                continue;
            }
            let mut parts: [Value; KEY_PARTS_MAX] = Default::default();
            let evaluated = parts.iter_mut().zip(&key.parts).try_for_each(|(value, part)| {
                *value = iterations.part(part, j, f)?;
                Some(())
            });
            *hash = evaluated.and_then(|()| tx.prefetch_key(key.table, &parts[..key.parts.len()]));
        }
    }

    /// Starts the next stage of iteration `j`'s keys.
    fn stage(&self, j: usize, flight: &InFlight, tx: &mut dyn Storage, stage: impl Fn(&CompiledKey) -> Prefetch) {
        for (hash, key) in flight.hashes[j % IN_FLIGHT].iter().zip(&self.keys) {
            if let Some(hash) = *hash {
                tx.prefetch_stage(key.table, hash, stage(key));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::runtime::{self, Flow};
    use crate::proc::{CompiledProcedure, check_source};
    use crate::storage::point::PointIndex;
    use crate::storage::{Catalog, IndexBackend, ParamValue, Row};
    use crate::txn::{Scan, TxnError};
    use std::sync::Arc;

    const TABLES: &str = "
        table t (id int not null, v int not null, primary key (id));
        table s (w int not null, i int not null, q int not null, primary key (w, i));
        table line (o int not null, n int not null, i int not null, primary key (o, n));";

    /// The keys `loop_keys` finds in the first loop of procedure `body`, as text.
    fn keys_of(body: &str) -> Vec<String> {
        let module = check_source("<test>", &format!("{TABLES}\n{body}"), &Catalog::default()).expect("checks");
        let p = &module.procedures[0];
        let loop_body = p
            .body
            .iter()
            .find_map(|s| match &s.kind {
                StmtKind::ForRange { body, .. } | StmtKind::ForArray { body, .. } | StmtKind::ForScan { body, .. } => {
                    Some(body)
                }
                _ => None,
            })
            .expect("a loop");
        let name = |e: &Expr| match &e.kind {
            ExprKind::Var(v) => p.vars[v.index()].name.clone(),
            ExprKind::ArrayGet(a, i) => match &i.kind {
                ExprKind::Var(v) => format!("{}[{}]", p.vars[a.index()].name, p.vars[v.index()].name),
                _ => format!("{}[..]", p.vars[a.index()].name),
            },
            ExprKind::Const(c) => c.to_string(),
            _ => "expr".to_string(),
        };
        loop_keys(p.found, loop_body)
            .iter()
            .map(|k| format!("{}({})", k.table.name, k.parts.iter().map(name).collect::<Vec<_>>().join(", ")))
            .collect()
    }

    #[test]
    fn keys_of_the_iteration_are_found_through_the_locals_that_name_them() {
        let keys = keys_of(
            "procedure p(w int, o int, ids int[], ws int[]) {
                for n in 0 .. len(ids) {
                    let iid = ids[n];
                    let sw = ws[n];
                    select v into price from t where id = iid;
                    if not found { abort 'no item'; }
                    update s set q = q - 1 where w = sw and i = iid;
                    select q into left from s where w = sw and i = iid;
                    if o > 0 { insert into line values (o, n, iid); }
                }
            }",
        );
        // The select of the row the update wrote is the same key: loaded once.
        assert_eq!(keys, ["t(ids[n])", "s(ws[n], ids[n])", "line(o, n)"]);
    }

    #[test]
    fn keys_of_anything_the_body_changes_are_left_out() {
        let keys = keys_of(
            "procedure p(ids int[]) {
                let k = 0;
                for x in ids {
                    select v into a from t where id = k;
                    k = x;
                    let j = x;
                    j = j + 1;
                    select v into b from t where id = j;
                    select v into c from t where id = a;
                    select v into d from t where id = int(found);
                    for y in ids { select v into e from t where id = y; }
                    select v into f from t where id = x + 1;
                }
            }",
        );
        // `k` and `j` change in the body, `a` is read from the database, `found` is set by every
        // operation, `y` belongs to a nested loop: only `x + 1` is a key of the iteration.
        assert_eq!(keys, ["t(expr)"]);
    }

    #[test]
    fn at_most_keys_max_keys_per_loop() {
        let selects: String =
            (0..KEYS_MAX + 2).map(|c| format!("select v into a{c} from t where id = x + {c};")).collect();
        let keys = keys_of(&format!("procedure p(ids int[]) {{ for x in ids {{ {selects} }} }}"));
        assert_eq!(keys.len(), KEYS_MAX);
    }

    /// A storage of one table's rows by key text, which records the keys it is asked to prefetch.
    struct Recording {
        rows: HashMap<String, Row>,
        prefetching: bool,
        hasher: PointIndex,
        prefetched: Vec<Vec<Value>>,
        stages: Vec<(String, Prefetch)>,
        /// The keys read, in order.
        read: Vec<Vec<Value>>,
        /// The rows every scan returns.
        scanned: Vec<Row>,
    }

    impl Recording {
        fn new(rows: HashMap<String, Row>, prefetching: bool) -> Recording {
            Recording {
                rows,
                prefetching,
                hasher: PointIndex::default(),
                prefetched: Vec::new(),
                stages: Vec::new(),
                read: Vec::new(),
                scanned: Vec::new(),
            }
        }

        fn key(table: TableId, pk: &[Value]) -> String {
            format!("{table}:{pk:?}")
        }
    }

    impl Storage for Recording {
        fn get_row(&mut self, table: TableId, pk: &[Value]) -> Result<Option<Row>, TxnError> {
            self.read.push(pk.to_vec());
            Ok(self.rows.get(&Self::key(table, pk)).cloned())
        }
        fn scan_rows(&mut self, _scan: &Scan) -> Result<Vec<Row>, TxnError> {
            Ok(self.scanned.clone())
        }
        fn insert_row(&mut self, _table: TableId, _row: Row) -> Result<(), TxnError> {
            Ok(())
        }
        fn update_row_with(
            &mut self,
            _table: TableId,
            _pk: &[Value],
            _build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
        ) -> Result<bool, TxnError> {
            Ok(false)
        }
        fn delete_row(&mut self, _table: TableId, _pk: &[Value]) -> Result<bool, TxnError> {
            Ok(false)
        }
        fn prefetch_key(&mut self, table: TableId, pk: &[Value]) -> Option<KeyHash> {
            self.prefetched.push(pk.to_vec());
            Some(self.hasher.hash_of(Self::key(table, pk).as_bytes()))
        }
        fn prefetches(&self) -> bool {
            self.prefetching
        }
        fn prefetch_stage(&mut self, _table: TableId, hash: KeyHash, stage: Prefetch) {
            self.stages.push((format!("{hash:?}"), stage));
        }
    }

    /// Runs `sum` over `ids` (stopping at `stop`) on a table of ids 0..20 with v = 10 id.
    fn run_sum(ids: &[i64], stop: i64, prefetching: bool) -> (Result<Vec<Value>, TxnError>, Recording) {
        let source = format!(
            "{TABLES}
            procedure sum(ids int[], stop int) {{
                let total = 0;
                for n in 0 .. len(ids) {{
                    let k = ids[n];
                    if k = stop {{ return total, 1; }}
                    select v into x from t where id = k;
                    select v into y from t where id = 100 / (k - stop);
                    total = total + x;
                }}
                return total, 0;
            }}"
        );
        let module = check_source("<test>", &source, &Catalog::default()).expect("checks");
        let mut catalog = Catalog::default();
        for schema in module.tables {
            catalog = catalog.with_table(schema, IndexBackend::default()).expect("table");
        }
        let ir = Arc::new(module.procedures.into_iter().next().expect("sum"));
        let compiled = CompiledProcedure::compile(Arc::clone(&ir), &catalog).expect("compiles");
        let t = catalog.table_by_name("t").expect("t").id;
        let rows = (0..20)
            .map(|id| (Recording::key(t, &[Value::Int(id)]), Row::new(vec![Value::Int(id), Value::Int(10 * id)])));
        let mut storage = Recording::new(rows.collect(), prefetching);
        let args =
            [ParamValue::from(ids.iter().map(|&id| Value::Int(id)).collect::<Vec<_>>()), Value::Int(stop).into()];
        let result = runtime::bind_args(&ir, &args).and_then(|mut frame| {
            match super::super::run_block(&compiled.body, &mut frame, &mut storage)? {
                Flow::Return(values) => Ok(values),
                Flow::Next => Ok(Vec::new()),
            }
        });
        (result, storage)
    }

    #[test]
    fn a_loop_prefetches_every_iterations_keys_ahead_and_returns_the_same() {
        let ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3];
        let (with, storage) = run_sum(&ids, -1, true);
        let (without, quiet) = run_sum(&ids, -1, false);
        let total: i64 = ids.iter().map(|id| 10 * id).sum();
        assert_eq!(with.expect("runs"), [Value::Int(total), Value::Int(0)]);
        assert_eq!(without.expect("runs"), [Value::Int(total), Value::Int(0)]);
        assert!(quiet.prefetched.is_empty() && quiet.stages.is_empty(), "no prefetch where the storage does not");
        // Both keys of every iteration, in iteration order: `id = k` and `id = 100 / (k + 1)`.
        let expected: Vec<Vec<Value>> =
            ids.iter().flat_map(|&k| [vec![Value::Int(k)], vec![Value::Int(100 / (k + 1))]]).collect();
        assert_eq!(storage.prefetched, expected);
        // Each key's record and row stages follow, for the iterations past the first ones.
        let records = storage.stages.iter().filter(|(_, s)| *s == Prefetch::Record).count();
        let rows = storage.stages.iter().filter(|(_, s)| matches!(s, Prefetch::Row { columns: 2 })).count();
        assert_eq!((records, rows), (2 * (ids.len() - RECORD_AHEAD), 2 * (ids.len() - ROW_AHEAD)));
    }

    #[test]
    fn a_key_that_fails_ahead_of_its_iteration_is_skipped_not_raised() {
        // Iteration 3 has k = stop: its second key divides by zero, and the loop returns
        // before that iteration evaluates it. The prefetch ran into it earlier and let it be.
        let ids = [3, 1, 4, 7, 5, 9];
        let (result, storage) = run_sum(&ids, 7, true);
        assert_eq!(result.expect("runs"), [Value::Int(80), Value::Int(1)]);
        assert!(storage.prefetched.contains(&vec![Value::Int(7)]), "the first key of iteration 3 is prefetched");
        // Every key but iteration 3's second, which does not evaluate.
        let expected: Vec<Vec<Value>> = ids
            .iter()
            .flat_map(|&k| [Some(vec![Value::Int(k)]), (k != 7).then(|| vec![Value::Int(100 / (k - 7))])])
            .flatten()
            .collect();
        assert_eq!(storage.prefetched, expected);
    }

    /// Runs the first procedure of `body` (over [`TABLES`]) with `args` against a storage whose
    /// scans return `scanned`.
    fn run_recorded(body: &str, args: &[ParamValue], scanned: Vec<Row>) -> Recording {
        let module = check_source("<test>", &format!("{TABLES}\n{body}"), &Catalog::default()).expect("checks");
        let mut catalog = Catalog::default();
        for schema in module.tables {
            catalog = catalog.with_table(schema, IndexBackend::default()).expect("table");
        }
        let ir = Arc::new(module.procedures.into_iter().next().expect("a procedure"));
        let compiled = CompiledProcedure::compile(Arc::clone(&ir), &catalog).expect("compiles");
        let mut storage = Recording::new(HashMap::new(), true);
        storage.scanned = scanned;
        let mut frame = runtime::bind_args(&ir, args).expect("binds");
        super::super::run_block(&compiled.body, &mut frame, &mut storage).expect("runs");
        storage
    }

    /// Every loop shape reads its key parts where they lie (`Part`): the loop's variable, an
    /// array's element at it, variables the body leaves alone and constants. The keys prefetched
    /// are the keys the iterations then read, in order.
    #[test]
    fn each_part_is_read_where_it_lies_and_the_prefetched_keys_are_the_read_ones() {
        let ids = ParamValue::from((0..9).map(|k| Value::Int(3 * k + 1)).collect::<Vec<_>>());
        let w0 = ParamValue::from(Value::Int(7));
        let cases = [
            "for n in 0 .. 9 { select q into x from s where w = w0 and i = n; }",
            "for n in 0 .. len(ids) { select v into x from t where id = ids[n]; }",
            "for k in ids { select q into x from s where w = 1 and i = k; }",
            // A part evaluated in the frame beside parts read in place.
            "for n in 0 .. len(ids) { select q into x from s where w = n + w0 and i = ids[n]; }",
        ];
        for body in cases {
            let source = format!("procedure p(w0 int, ids int[]) {{ {body} }}");
            let storage = run_recorded(&source, &[w0.clone(), ids.clone()], Vec::new());
            assert_eq!(storage.read.len(), 9, "{body}");
            assert_eq!(storage.prefetched, storage.read, "{body}");
        }
    }

    /// A loop over a scan's rows prefetches nothing (the module docs say why), whatever its
    /// body reads.
    #[test]
    fn a_loop_over_a_scan_prefetches_nothing() {
        let lines: Vec<Row> =
            (0..9).map(|n| Row::new(vec![Value::Int(7), Value::Int(n), Value::Int(100 + n)])).collect();
        let body = "procedure p(w0 int) {
            for r in select n, i from line where o = w0 limit 20 { select q into x from s where w = r.n and i = r.i; }
        }";
        let storage = run_recorded(body, &[ParamValue::from(Value::Int(7))], lines);
        assert_eq!(storage.read.len(), 9, "every row's key is read");
        assert!(storage.prefetched.is_empty() && storage.stages.is_empty());
    }
}
