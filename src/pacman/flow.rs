//! Flow dependencies (PACMAN §4.1.1): define-use and control relations between the operations of
//! one procedure, over the structured IR.
//!
//! The analysis tracks, for every variable at every point, the set of operations whose returned
//! values may have reached it (its *taint*), and the set of operations that decide whether the
//! current point runs (the *control* set: the taints of enclosing `if`/loop headers, plus those of
//! conditions guarding an earlier `return`). An operation depends on the taints of the variables it
//! uses and on the control set. Both branches of an `if` are joined; a loop's body is re-run on the
//! joined state until nothing changes, which finds loop-carried dependencies. Taints only grow and
//! are bounded by the number of operations, so the fixed point exists; the number of statement
//! visits is bounded by [`super::limits::FLOW_VISITS_MAX`] all the same, because nested loops
//! multiply it. `abort` is not a control dependency (see the module doc of [`super`]).

use super::{AnalysisError, OpId, Operation, limits};
use crate::proc::Procedure;
use crate::proc::ir::{Stmt, StmtKind, VarId};
use std::collections::HashMap;

/// A set of operations of one procedure, as a bit set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpSet(Vec<u64>);

impl OpSet {
    /// An empty set able to hold `n` operations.
    pub fn with_capacity(n: usize) -> OpSet {
        OpSet(vec![0; n.div_ceil(64)])
    }

    /// Adds `op`.
    pub fn insert(&mut self, op: OpId) {
        let i = op.index();
        if i / 64 >= self.0.len() {
            self.0.resize(i / 64 + 1, 0);
        }
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// Whether `op` is in the set.
    pub fn contains(&self, op: OpId) -> bool {
        let i = op.index();
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Adds every member of `other`; returns whether the set grew.
    pub fn union_with(&mut self, other: &OpSet) -> bool {
        if other.0.len() > self.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        let mut grew = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let merged = *a | b;
            grew |= merged != *a;
            *a = merged;
        }
        grew
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = OpId> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64).filter(move |b| bits & (1 << b) != 0).map(move |b| OpId((w * 64 + b) as u32))
        })
    }
}

/// The flow dependencies of a procedure's operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowDependencies {
    /// `on[q]`: the operations `q` is directly flow-dependent on (through non-database statements
    /// only), in program order, without `q` itself (a loop-carried dependency of an operation on its
    /// own earlier run constrains nothing between slices).
    on: Vec<Vec<OpId>>,
}

impl FlowDependencies {
    /// The operations `q` is directly flow-dependent on, in program order.
    pub fn on(&self, q: OpId) -> &[OpId] {
        self.on.get(q.index()).map_or(&[], Vec::as_slice)
    }

    /// Every dependency as `(p, q)`: `q` is flow-dependent on `p`. Sorted by `q`, then `p`.
    pub fn pairs(&self) -> Vec<(OpId, OpId)> {
        let mut out = Vec::new();
        for (q, ps) in self.on.iter().enumerate() {
            out.extend(ps.iter().map(|&p| (p, OpId(q as u32))));
        }
        out
    }

    /// Builds from explicit lists (for tests and generated graphs).
    pub fn from_lists(on: Vec<Vec<OpId>>) -> FlowDependencies {
        FlowDependencies { on }
    }

    /// Number of operations covered.
    pub fn len(&self) -> usize {
        self.on.len()
    }

    /// Whether no operation is covered.
    pub fn is_empty(&self) -> bool {
        self.on.is_empty()
    }
}

/// Computes the flow dependencies of `procedure`, whose operations (in program order) are `ops`.
pub fn analyze(procedure: &Procedure, ops: &[Operation]) -> Result<FlowDependencies, AnalysisError> {
    let op_of_stmt = ops.iter().enumerate().map(|(i, o)| (o.stmt.0, OpId(i as u32))).collect();
    let mut walker = Walker {
        procedure,
        op_of_stmt,
        deps: vec![OpSet::with_capacity(ops.len()); ops.len()],
        visits: 0,
        ops: ops.len(),
    };
    let mut state = State {
        taint: vec![OpSet::with_capacity(ops.len()); procedure.vars.len()],
        exits: OpSet::with_capacity(ops.len()),
    };
    walker.block(&procedure.body, &mut state, &OpSet::with_capacity(ops.len()))?;
    let on = walker.deps.iter().enumerate().map(|(q, set)| set.iter().filter(|p| p.index() != q).collect()).collect();
    Ok(FlowDependencies { on })
}

/// What is known at one program point.
#[derive(Clone, PartialEq, Eq)]
struct State {
    /// Per variable: the operations whose results may have reached it.
    taint: Vec<OpSet>,
    /// Operations deciding whether an earlier `return` was taken: everything after depends on them.
    exits: OpSet,
}

impl State {
    fn join(&mut self, other: &State) {
        for (a, b) in self.taint.iter_mut().zip(&other.taint) {
            a.union_with(b);
        }
        self.exits.union_with(&other.exits);
    }
}

struct Walker<'a> {
    procedure: &'a Procedure,
    op_of_stmt: HashMap<u32, OpId>,
    /// Per operation: what it depends on so far.
    deps: Vec<OpSet>,
    visits: usize,
    ops: usize,
}

impl Walker<'_> {
    fn block(&mut self, stmts: &[Stmt], st: &mut State, ctrl: &OpSet) -> Result<(), AnalysisError> {
        stmts.iter().try_for_each(|s| self.stmt(s, st, ctrl))
    }

    fn stmt(&mut self, s: &Stmt, st: &mut State, ctrl: &OpSet) -> Result<(), AnalysisError> {
        self.visits += 1;
        if self.visits > limits::FLOW_VISITS_MAX {
            return Err(AnalysisError::TooComplex {
                procedure: self.procedure.name.clone(),
                limit: limits::FLOW_VISITS_MAX,
            });
        }
        let mut ctrl = ctrl.clone();
        ctrl.union_with(&st.exits);
        let header = self.header_taint(s, st)?;
        let op = self.op_of_stmt.get(&s.id.0).copied();
        if let Some(q) = op {
            self.deps[q.index()].union_with(&header);
            self.deps[q.index()].union_with(&ctrl);
        }
        match &s.kind {
            StmtKind::If { then, otherwise, .. } => {
                ctrl.union_with(&header);
                let mut taken = st.clone();
                self.block(then, &mut taken, &ctrl)?;
                self.block(otherwise, st, &ctrl)?;
                st.join(&taken);
            }
            StmtKind::ForRange { body, .. } | StmtKind::ForArray { body, .. } | StmtKind::ForScan { body, .. } => {
                // A scan decides how often its body runs; bounds and arrays by their header's taint.
                match op {
                    Some(q) => ctrl.insert(q),
                    None => {
                        ctrl.union_with(&header);
                    }
                }
                // The header defines its variables once, before the first iteration: `found` after
                // a scan that read no row is the scan's, and inside the body it may be the body's
                // from an earlier iteration. Loop and row variables are read-only, so their taint
                // stays what the header gave them.
                let defined = self.defined_taint(op, &header, &ctrl);
                self.define(s, st, &defined)?;
                self.loop_fixpoint(body, st, &ctrl)?;
            }
            StmtKind::Return(_) => {
                st.exits.union_with(&ctrl);
            }
            StmtKind::Abort(_) => {}
            _ => {
                let defined = self.defined_taint(op, &header, &ctrl);
                self.define(s, st, &defined)?;
            }
        }
        Ok(())
    }

    /// What a statement's own definitions carry: an operation's result is its own (everything it
    /// depends on follows from its dependencies); an assignment's carries its inputs and control.
    fn defined_taint(&self, op: Option<OpId>, header: &OpSet, ctrl: &OpSet) -> OpSet {
        let mut out = OpSet::with_capacity(self.ops);
        match op {
            Some(q) => out.insert(q),
            None => {
                out.union_with(header);
                out.union_with(ctrl);
            }
        }
        out
    }

    fn loop_fixpoint(&mut self, body: &[Stmt], st: &mut State, ctrl: &OpSet) -> Result<(), AnalysisError> {
        loop {
            let before = st.clone();
            self.block(body, st, ctrl)?;
            // Zero further iterations leave `before` unchanged: join it back.
            st.join(&before);
            if *st == before {
                return Ok(());
            }
        }
    }

    fn define(&self, s: &Stmt, st: &mut State, taint: &OpSet) -> Result<(), AnalysisError> {
        for &v in &s.defs {
            let slot = self.var_slot(s, v, st.taint.len())?;
            st.taint[slot] = taint.clone();
        }
        Ok(())
    }

    fn header_taint(&self, s: &Stmt, st: &State) -> Result<OpSet, AnalysisError> {
        let mut out = OpSet::with_capacity(self.ops);
        for &v in &s.uses {
            let slot = self.var_slot(s, v, st.taint.len())?;
            out.union_with(&st.taint[slot]);
        }
        Ok(out)
    }

    fn var_slot(&self, s: &Stmt, v: VarId, vars: usize) -> Result<usize, AnalysisError> {
        if v.index() < vars {
            Ok(v.index())
        } else {
            Err(AnalysisError::MalformedIr { procedure: self.procedure.name.clone(), stmt: s.id.0, var: v.0 })
        }
    }
}
