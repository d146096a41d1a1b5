//! Running one *piece* of a logged call (PACMAN §4.2): the procedure's own compiled code, with only
//! one slice's operations reaching the database.
//!
//! A piece of slice `s` runs the whole compiled body against a [`PieceStorage`]. Each database
//! statement names itself first ([`Storage::enter_op`]); its role for `s` decides what happens:
//!
//! - **run**: an operation of `s`: performed on the real storage (a replay transaction), and its
//!   result recorded when a later slice of the call needs it;
//! - **feed back**: an operation of an ancestor slice of `s` (one `s` reaches through the slice
//!   edges): not performed again; its result is the one the ancestor's piece recorded, taken in
//!   the order that piece ran them;
//! - **skip**: any other operation: its whole statement is passed over (`enter_op` returns
//!   `false`): no expression of it is evaluated and it assigns nothing, not even `found`, so a
//!   piece pays almost nothing for the other slices' operations. (Before, a skipped operation
//!   evaluated its key and row and reported "no row" or "not found": a call's 6 pieces cost 2.85×
//!   one whole run of it in instructions on TPC-C.)
//!
//! Why this gives the logged execution's effects: an operation's inputs (key, written values,
//! scan bounds) and whether it runs depend only on operations it is flow-dependent on
//! ([`super::flow`]), and those are in its own slice or an ancestor's. So every operation of `s`
//! and of its ancestors is reached exactly as in the logged run, with the same inputs, in the same
//! order; what a skipped statement leaves in its variables (and `found`) — whatever they held
//! before — reaches only statements that depend on skipped operations. Such a statement may fail where the logged run did not (an `abort` guarded by a
//! skipped read, a null range bound); [`Storage::replays_piece`] makes the compiled code skip a
//! failing statement, which changes only values that again flow from skipped operations, and makes
//! `return` end the run without evaluating (its values may be made up). A failure of the real
//! storage is different: it is recorded in [`PieceStorage::failure`] and the piece has diverged.
//!
//! Key spaces (§4.3.1): [`KeySource`] says, per operation, where the first column of the primary
//! key it touches comes from when that is a function of the call's parameters alone — a constant,
//! a parameter never assigned, an element of an array parameter (directly or as the variable of a
//! `for ... in` over it). A piece whose every operation has one touches only rows whose first key
//! column is among the values the sources give for the call's arguments; two pieces with disjoint
//! value sets touch disjoint rows and may run in parallel.

use super::{ProcId, ProcedureSlicing, SliceId};
use crate::proc::CompiledProcedure;
use crate::proc::ir::{ExprKind, KeyShape, Procedure, Stmt, StmtKind, VarId};
use crate::proc::runtime::Storage;
use crate::storage::{Catalog, ParamValue, Row, TableId, Value};
use crate::txn::{Scan, TxnError};
use std::sync::Arc;

/// What a statement is to one piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not a database operation, or one of a slice that is neither this one nor an ancestor.
    Skip,
    /// An operation of this piece's slice.
    Run,
    /// An operation of ancestor slice `n`: its recorded result is fed back.
    FeedBack(u32),
}

/// The result of one operation, as a piece records it for the pieces of later slices.
#[derive(Clone, Debug)]
pub enum OpResult {
    /// A point read.
    Row(Option<Row>),
    /// A scan.
    Rows(Vec<Row>),
    /// An update or delete: whether the row was there.
    Found(bool),
    /// An insert.
    Inserted,
}

/// The results a piece recorded: (statement id, result), in the order it ran them.
pub type Recording = Vec<(u32, OpResult)>;

/// Where the first primary-key column of an operation's rows comes from (module docs).
#[derive(Clone, Debug, PartialEq)]
pub enum KeySource {
    /// A constant.
    Const(Value),
    /// A scalar parameter (its position) that no statement assigns.
    Param(usize),
    /// Any element of an array parameter (its position).
    AnyOf(usize),
}

impl KeySource {
    /// Appends the values this source gives for `args`.
    pub fn values(&self, args: &[ParamValue], out: &mut Vec<Value>) {
        match self {
            KeySource::Const(v) => out.push(v.clone()),
            KeySource::Param(p) => {
                if let Some(ParamValue::Scalar(v)) = args.get(*p) {
                    out.push(v.clone());
                }
            }
            KeySource::AnyOf(p) => {
                if let Some(ParamValue::Array(items)) = args.get(*p) {
                    out.extend(items.iter().cloned());
                }
            }
        }
    }
}

/// One slice of a procedure, ready to run as pieces.
#[derive(Debug)]
pub struct SlicePlan {
    /// Per statement id.
    pub roles: Vec<Role>,
    /// Whether a later slice of the call feeds back this slice's results (so pieces record them).
    pub records: bool,
    /// The ancestor slices, in increasing order.
    pub ancestors: Vec<SliceId>,
    /// The key sources of its operations; `None` when one has none (the piece may touch any row).
    pub key: Option<Vec<KeySource>>,
    /// Whether one of its operations writes.
    pub writes: bool,
    /// The body its pieces run: the procedure sliced for it ([`super::sliced`]), compiled.
    pub body: Arc<CompiledProcedure>,
}

/// A logged procedure, ready to run as pieces.
#[derive(Debug)]
pub struct ProcedurePlan {
    /// The procedure's id in the global dependency graph.
    pub graph_id: ProcId,
    /// The compiled procedure (the code calls run through).
    pub compiled: Arc<CompiledProcedure>,
    /// Per final slice.
    pub slices: Vec<SlicePlan>,
}

impl ProcedurePlan {
    /// The plan of `compiled` from its slicing; `catalog` tells which secondary indexes start
    /// with the primary key's first column.
    pub fn new(
        graph_id: ProcId,
        compiled: Arc<CompiledProcedure>,
        slicing: &ProcedureSlicing,
        catalog: &Catalog,
    ) -> ProcedurePlan {
        let ir = Arc::clone(compiled.ir());
        let sources = key_sources(&ir, catalog);
        let ops = &slicing.analysis.ops;
        let slices = slicing.slices();
        let mut plans = Vec::with_capacity(slices.len());
        for (s, slice) in slices.iter().enumerate() {
            let ancestors = ancestors(slicing, SliceId(s as u32));
            let mut roles = vec![Role::Skip; ir.stmt_count as usize];
            for &a in &ancestors {
                for stmt in &slices[a.index()].stmts {
                    roles[stmt.0 as usize] = Role::FeedBack(a.0);
                }
            }
            for stmt in &slice.stmts {
                roles[stmt.0 as usize] = Role::Run;
            }
            let records = slicing.slicing.edges.iter().any(|e| e.0.index() == s);
            let key = slice.stmts.iter().map(|st| sources.get(&st.0).cloned().flatten()).collect();
            let writes = slice.ops.iter().any(|o| ops[o.index()].writes());
            let body = sliced_compiled(&compiled, &roles, catalog);
            plans.push(SlicePlan { roles, records, ancestors, key, writes, body });
        }
        ProcedurePlan { graph_id, compiled, slices: plans }
    }

    /// Runs piece `slice` of a call with `args` on `storage`. `inputs[a]` is the recording of
    /// ancestor slice `a`'s piece (other entries are unused). Returns this piece's recording (empty
    /// unless a later slice needs it).
    pub fn run_piece(
        &self,
        slice: SliceId,
        args: &[ParamValue],
        inputs: &[Option<&Recording>],
        storage: &mut dyn Storage,
    ) -> Result<Recording, PieceError> {
        let plan = &self.slices[slice.index()];
        let mut frame =
            crate::proc::runtime::bind_args(self.compiled.ir(), args).map_err(|e| PieceError(e.to_string()))?;
        let mut piece = PieceStorage {
            inner: storage,
            roles: &plan.roles,
            current: Role::Skip,
            current_stmt: 0,
            inputs,
            cursors: vec![0; inputs.len()],
            recording: Vec::new(),
            records: plan.records,
            failure: None,
        };
        let outcome = plan.body.run_bound(&mut frame, &mut piece);
        if let Some(failure) = piece.failure {
            return Err(PieceError(failure));
        }
        outcome.map_err(|e| PieceError(e.to_string()))?;
        Ok(piece.recording)
    }
}

/// `compiled` sliced for a piece with `roles` and compiled against `catalog`, with the operation
/// hooks a piece needs ([`CompiledProcedure::compile_for_pieces`]). The sliced body is a subset of a
/// body that compiled, so it compiles too; were it not to, the piece runs the whole body, skipping
/// the other slices' operations one by one (slower, as exact).
fn sliced_compiled(compiled: &Arc<CompiledProcedure>, roles: &[Role], catalog: &Catalog) -> Arc<CompiledProcedure> {
    let sliced = super::sliced::sliced_body(compiled.ir(), roles);
    let whole = || CompiledProcedure::compile_for_pieces(Arc::clone(compiled.ir()), catalog);
    match CompiledProcedure::compile_for_pieces(Arc::new(sliced), catalog) {
        Ok(body) => Arc::new(body),
        Err(e) => {
            debug_assert!(false, "a sliced body of {} does not compile: {e}", compiled.name());
            // The whole body compiled against this catalog when it was registered; the same
            // compiler gives the same answer, so this cannot fail.
            match whole() {
                Ok(body) => Arc::new(body),
                Err(e) => panic!("{} compiled once and no longer does: {e}", compiled.name()),
            }
        }
    }
}

/// A piece that did not replay as it ran: the replayed state diverged from the logged one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("piece diverged: {0}")]
pub struct PieceError(pub String);

/// The slices `s` reaches backwards through the slice edges, in increasing order.
pub fn ancestors(slicing: &ProcedureSlicing, s: SliceId) -> Vec<SliceId> {
    let edges = &slicing.slicing.edges;
    let mut seen = vec![false; slicing.slices().len()];
    let mut stack = vec![s];
    while let Some(t) = stack.pop() {
        for p in edges.iter().filter(|e| e.1 == t).map(|e| e.0) {
            if !seen[p.index()] {
                seen[p.index()] = true;
                stack.push(p);
            }
        }
    }
    (0..seen.len()).filter(|&i| seen[i]).map(|i| SliceId(i as u32)).collect()
}

/// The storage a piece runs against (module docs).
pub struct PieceStorage<'a> {
    inner: &'a mut dyn Storage,
    roles: &'a [Role],
    current: Role,
    current_stmt: u32,
    inputs: &'a [Option<&'a Recording>],
    cursors: Vec<usize>,
    recording: Recording,
    records: bool,
    /// The first failure of the real storage or of a fed-back result (the piece diverged).
    pub failure: Option<String>,
}

impl PieceStorage<'_> {
    /// The next recorded result of the current (fed-back) statement.
    fn fed_back(&mut self, ancestor: u32) -> Option<OpResult> {
        let a = ancestor as usize;
        let recording = self.inputs.get(a).copied().flatten();
        let next = recording.and_then(|r| r.get(self.cursors[a]));
        match next {
            Some((stmt, result)) if *stmt == self.current_stmt => {
                self.cursors[a] += 1;
                Some(result.clone())
            }
            _ => {
                self.fail(format!("no recorded result for statement {} of slice {a}", self.current_stmt));
                None
            }
        }
    }

    fn fail(&mut self, message: String) {
        self.failure.get_or_insert(message);
    }

    fn record(&mut self, result: OpResult) {
        if self.records {
            self.recording.push((self.current_stmt, result));
        }
    }

    fn real<T>(&mut self, result: Result<T, TxnError>) -> Result<T, TxnError> {
        if let Err(e) = &result {
            self.fail(e.to_string());
        }
        result
    }
}

fn mismatch() -> TxnError {
    TxnError::Procedure { procedure: "piece".into(), message: "a fed-back result of another kind".into() }
}

impl Storage for PieceStorage<'_> {
    fn get_row(&mut self, table: TableId, pk: &[Value]) -> Result<Option<Row>, TxnError> {
        match self.current {
            Role::Skip => Ok(None),
            Role::Run => {
                let r = self.inner.get_row(table, pk);
                let row = self.real(r)?;
                self.record(OpResult::Row(row.clone()));
                Ok(row)
            }
            Role::FeedBack(a) => match self.fed_back(a) {
                Some(OpResult::Row(row)) => Ok(row),
                _ => Err(mismatch()),
            },
        }
    }

    fn scan_rows(&mut self, scan: &Scan) -> Result<Vec<Row>, TxnError> {
        match self.current {
            Role::Skip => Ok(Vec::new()),
            Role::Run => {
                let r = self.inner.scan_rows(scan);
                let rows = self.real(r)?;
                self.record(OpResult::Rows(rows.clone()));
                Ok(rows)
            }
            Role::FeedBack(a) => match self.fed_back(a) {
                Some(OpResult::Rows(rows)) => Ok(rows),
                _ => Err(mismatch()),
            },
        }
    }

    fn insert_row(&mut self, table: TableId, row: Row) -> Result<(), TxnError> {
        match self.current {
            Role::Skip => Ok(()),
            Role::Run => {
                let r = self.inner.insert_row(table, row);
                self.real(r)?;
                self.record(OpResult::Inserted);
                Ok(())
            }
            Role::FeedBack(a) => match self.fed_back(a) {
                Some(OpResult::Inserted) => Ok(()),
                _ => Err(mismatch()),
            },
        }
    }

    fn update_row_with(
        &mut self,
        table: TableId,
        pk: &[Value],
        build: &mut dyn FnMut(Row) -> Result<Row, TxnError>,
    ) -> Result<bool, TxnError> {
        match self.current {
            Role::Skip => Ok(false),
            Role::Run => {
                let r = self.inner.update_row_with(table, pk, build);
                let found = self.real(r)?;
                self.record(OpResult::Found(found));
                Ok(found)
            }
            Role::FeedBack(a) => match self.fed_back(a) {
                Some(OpResult::Found(found)) => Ok(found),
                _ => Err(mismatch()),
            },
        }
    }

    fn delete_row(&mut self, table: TableId, pk: &[Value]) -> Result<bool, TxnError> {
        match self.current {
            Role::Skip => Ok(false),
            Role::Run => {
                let r = self.inner.delete_row(table, pk);
                let found = self.real(r)?;
                self.record(OpResult::Found(found));
                Ok(found)
            }
            Role::FeedBack(a) => match self.fed_back(a) {
                Some(OpResult::Found(found)) => Ok(found),
                _ => Err(mismatch()),
            },
        }
    }

    fn enter_op(&mut self, stmt: u32) -> bool {
        self.current_stmt = stmt;
        self.current = self.roles.get(stmt as usize).copied().unwrap_or(Role::Skip);
        self.current != Role::Skip
    }

    fn replays_piece(&self) -> bool {
        true
    }
}

/// Per database statement of `ir` (by id), its [`KeySource`] if it has one.
fn key_sources(ir: &Procedure, catalog: &Catalog) -> std::collections::HashMap<u32, Option<KeySource>> {
    let mut assigned = vec![0usize; ir.vars.len()];
    let mut loop_over: std::collections::HashMap<u32, VarId> = Default::default();
    ir.walk(&mut |s: &Stmt, _| {
        for v in &s.defs {
            if let Some(n) = assigned.get_mut(v.index()) {
                *n += 1;
            }
        }
        if let StmtKind::ForArray { var, array, .. } = &s.kind {
            loop_over.insert(var.0, *array);
        }
    });
    let stable_param = |v: VarId| v.index() < ir.params && assigned[v.index()] == 0;
    let source = |e: &crate::proc::ir::Expr| -> Option<KeySource> {
        match &e.kind {
            ExprKind::Const(v) => Some(KeySource::Const(v.clone())),
            ExprKind::Var(v) if stable_param(*v) && !ir.vars[v.index()].array => Some(KeySource::Param(v.index())),
            ExprKind::Var(v) => {
                // The variable of a `for ... in` over an array parameter, assigned nowhere else.
                let array = loop_over.get(&v.0)?;
                (assigned[v.index()] == 1 && stable_param(*array)).then_some(KeySource::AnyOf(array.index()))
            }
            ExprKind::ArrayGet(a, _) if stable_param(*a) => Some(KeySource::AnyOf(a.index())),
            _ => None,
        }
    };
    let mut out = std::collections::HashMap::new();
    ir.walk(&mut |s: &Stmt, _| {
        let Some(op) = s.db_op() else { return };
        let first = match &op.key {
            KeyShape::Point(key) => key.first().copied(),
            KeyShape::Range { index, prefix, .. } => {
                let leads_with_pk = match index {
                    None => true,
                    Some(i) => catalog.table_by_name(&op.table.name).is_some_and(|t| {
                        let schema = &t.schema;
                        schema.indexes.get(*i).and_then(|x| x.columns.first()) == schema.primary_key.first()
                    }),
                };
                if leads_with_pk { prefix.first().copied() } else { None }
            }
        };
        out.insert(s.id.0, first.and_then(source));
    });
    out
}
