//! PACMAN's static analysis (Wu et al., SIGMOD 2017, §4.1 and Appendix B): what can be replayed in
//! parallel, decided once per set of registered procedures, before any log is read.
//!
//! # The analysis in the paper's vocabulary
//!
//! A stored procedure is a *parameterized transaction template* whose **operations** are its
//! database accesses: `var ← read(tbl, key)` (a point `select`, the first row of a scan, a scan
//! into an array, a `for ... in select` scan) and `write(tbl, key, val)` (`update`, `insert`,
//! `delete`; insert and delete are special writes). Each operation is one IR statement ([`crate::proc::ir::Stmt::db_op`]);
//! everything else in a procedure (`let`, assignments, conditions, loops, `return`) is the glue
//! through which values and control flow from one operation to another.
//!
//! 1. **Flow dependencies** ([`flow`]): operation `q` is flow-dependent on operation `p` when
//!    - *define-use*: a value `p` returns reaches an expression `q` evaluates (its key, the values it
//!      writes, a scan's bounds or limit), directly or through assignments; or
//!    - *control*: a value `p` returns decides whether `q` runs — `q` is nested in an `if` or loop
//!      whose header uses it, or follows a `return` that such a condition guards.
//!
//!    The analysis is a may-analysis over the structured IR: both branches of an `if` are joined,
//!    loops are iterated to a fixed point (so loop-carried dependencies are found, and an operation
//!    may depend on one after it in the text), and a value assigned under a condition depends on
//!    that condition (implicit flow). `abort` is *not* a control dependency: only committed calls are
//!    logged, and a committed call took no `abort`; replayed on the state it committed on, it takes
//!    none either. A replay piece therefore treats `abort` as unreachable.
//! 2. **Data dependencies** ([`data`]): two operations are data-dependent when they access the same
//!    table and at least one of them writes it (`DbOp::data_dependent`).
//! 3. **Slices** ([`mod@slice`], §4.1.1, Algorithm 1): a procedure's operations are partitioned into
//!    slices: start with one slice per operation, merge data-dependent ones, draw an edge
//!    `s_i → s_j` when an operation of `s_j` is flow-dependent on one of `s_i`, and merge slices
//!    that reach each other (strongly connected components). The result — the **local dependency
//!    graph** ([`LocalDependencyGraph`]) — is acyclic, and a slice is closed under flow
//!    dependencies: when `x` and `y` are in one slice and `y` depends (transitively) on `x`, every
//!    operation on a flow path from `x` to `y` is in that slice too (the paper's "any operation
//!    between x and y"; we read "between" along flow dependencies, not along the program text).
//! 4. **Blocks** ([`graph`], §4.1.2, Algorithm 2): the slices of every procedure are partitioned
//!    into blocks: merge blocks holding data-dependent slices, draw an edge `b_i → b_j` when a slice
//!    of `b_j` depends on a slice of `b_i` of the same procedure, merge blocks that reach each other,
//!    and finally merge the slices of one procedure that ended up in one block. The result is the
//!    **global dependency graph** ([`GlobalDependencyGraph`]): an acyclic graph of [`Block`]s, each
//!    a [`PieceSet`] template of (procedure, slice) pairs. Blocks are numbered in a topological
//!    order (ties broken by procedure, then program order), so `B0` never depends on a later block.
//!
//! Procedures that write nothing are left out of the global graph, as in the paper (Appendix C:
//! "read-only transactions are ignored as these transactions do not generate any logs"); including
//! them would only merge blocks of the writers.
//!
//! # The API the replay engine uses
//!
//! [`analyze`] runs all of it over the procedures of a database and returns a [`StaticAnalysis`]:
//!
//! - [`GlobalDependencyGraph::procedure`]`(name)` gives a logged procedure's [`ProcedureSlicing`]:
//!   its slices after Algorithm 2 ([`ProcedureSlicing::slices`], each a [`Slice`] whose
//!   [`Slice::stmts`] are the IR statements of its operations in program order), the slice of each
//!   operation, the block of each slice, and the edges between its slices. A transaction of this
//!   procedure is replayed as one *piece* per slice; piece `s` of a call may run once the pieces of
//!   the slices with an edge into `s` have run for that call.
//! - [`GlobalDependencyGraph::blocks`], [`GlobalDependencyGraph::edges`] and
//!   [`GlobalDependencyGraph::topological_order`]: a log batch becomes one piece-set per block;
//!   piece-set `b` may start once the piece-sets of every block with an edge into `b` are done; the
//!   pieces inside one piece-set run in the batch's commit order (§4.2).
//! - [`GlobalDependencyGraph::block_of_ad_hoc_table`]: where the write-only entries of ad-hoc
//!   transactions on a table are replayed (§4.5). Tables named in `ad_hoc_tables` are treated as
//!   written by one more procedure, so every slice that touches them shares their block.
//!
//! To replay one slice of a call the engine runs the procedure's compiled code with only that
//! slice's operations enabled; the values that operations of ancestor slices returned are fed in
//! from what those pieces recorded, and operations of other slices are skipped. This is sound
//! because an operation's key, written values and whether it runs depend only on operations it is
//! flow-dependent on, and those are in its own slice or an ancestor slice.
//!
//! # The fallback contract
//!
//! [`ProcedureAnalysis::of`] returns a typed [`AnalysisError`] for a procedure it cannot analyze
//! (one whose analysis would exceed the limits in [`limits`]: too many operations, or loops whose
//! fixed point takes too many rounds over too many statements). [`analyze`] does not fail for such a procedure:
//! it lists it in [`StaticAnalysis::fallback`], and the command-logging scheme must then log that
//! procedure's calls as data (their write sets, like ad-hoc transactions) — and name the tables they
//! may write in `ad_hoc_tables`, so that the graph orders those writes with every slice that
//! touches the same tables. [`analyze`] itself fails only when the set of procedures as a whole is
//! malformed (a duplicate name, too many procedures).

pub mod data;
pub mod dot;
pub mod flow;
pub mod graph;
pub mod piece;
pub mod slice;
pub mod sliced;
pub mod text;

pub use graph::{Block, BlockId, GlobalDependencyGraph, PieceSet, ProcId, ProcedureSlicing, SliceRef};
pub use slice::{LocalDependencyGraph, Slice, SliceId};

use crate::proc::Procedure;
use crate::proc::ir::{Access, StmtId, WriteKind};
use data::DataDependencies;
use flow::FlowDependencies;

/// Bounds on the work and memory of the analysis.
pub mod limits {
    /// Most database operations in one procedure.
    pub const OPS_PER_PROCEDURE_MAX: usize = 1024;
    /// Most statement visits of the flow analysis for one procedure (loops are re-visited until
    /// their fixed point; deeply nested loops multiply the visits).
    pub const FLOW_VISITS_MAX: usize = 1_000_000;
    /// Most procedures in one global dependency graph.
    pub const PROCEDURES_MAX: usize = 4096;
    /// Most tables named as written by ad-hoc transactions.
    pub const AD_HOC_TABLES_MAX: usize = 4096;
}

/// Why a procedure cannot be analyzed: its calls are then logged as data (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnalysisError {
    /// More operations than [`limits::OPS_PER_PROCEDURE_MAX`].
    #[error("procedure {procedure}: {ops} database operations, more than the {limit} the analysis handles")]
    TooManyOperations {
        /// The procedure.
        procedure: String,
        /// How many it has.
        ops: usize,
        /// The limit.
        limit: usize,
    },
    /// The flow analysis did not reach its fixed point within [`limits::FLOW_VISITS_MAX`] visits.
    #[error(
        "procedure {procedure}: flow analysis needs more than {limit} statement visits (loops re-run to a fixed point too often)"
    )]
    TooComplex {
        /// The procedure.
        procedure: String,
        /// The limit.
        limit: usize,
    },
    /// The IR names a variable that does not exist (a checker bug; never for checked IR).
    #[error("procedure {procedure}: statement {stmt} uses variable #{var}, which does not exist")]
    MalformedIr {
        /// The procedure.
        procedure: String,
        /// The statement id.
        stmt: u32,
        /// The variable index.
        var: u32,
    },
}

/// Why a set of procedures cannot form a global dependency graph.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// Two procedures share a name.
    #[error("procedure {0} is given twice")]
    DuplicateProcedure(String),
    /// More procedures than [`limits::PROCEDURES_MAX`].
    #[error("{count} procedures, more than the {limit} one graph holds")]
    TooManyProcedures {
        /// How many.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// More ad-hoc tables than [`limits::AD_HOC_TABLES_MAX`].
    #[error("{count} ad-hoc tables, more than {limit}")]
    TooManyAdHocTables {
        /// How many.
        count: usize,
        /// The limit.
        limit: usize,
    },
}

/// An operation's index in [`ProcedureAnalysis::ops`] (program order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u32);

impl OpId {
    /// The index as a `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One database operation of a procedure, as the analysis sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// The IR statement that performs it.
    pub stmt: StmtId,
    /// Its source line.
    pub line: u32,
    /// The table it accesses.
    pub table: String,
    /// Read or write.
    pub access: Access,
}

impl Operation {
    /// Whether it modifies its table.
    pub fn writes(&self) -> bool {
        matches!(self.access, Access::Write(_))
    }

    /// `read`, `insert`, `update` or `delete`.
    pub fn kind_name(&self) -> &'static str {
        match self.access {
            Access::Read => "read",
            Access::Write(WriteKind::Insert) => "insert",
            Access::Write(WriteKind::Update) => "update",
            Access::Write(WriteKind::Delete) => "delete",
        }
    }
}

/// The intra-procedure analysis of one procedure (§4.1.1): operations, their flow and data
/// dependencies, and the local dependency graph of slices.
#[derive(Clone, Debug)]
pub struct ProcedureAnalysis {
    /// The procedure's name.
    pub name: String,
    /// Its operations in program order.
    pub ops: Vec<Operation>,
    /// Flow dependencies between operations.
    pub flow: FlowDependencies,
    /// Data dependencies between operations.
    pub data: DataDependencies,
    /// The slices of Algorithm 1 and the edges between them.
    pub local: LocalDependencyGraph,
}

impl ProcedureAnalysis {
    /// Analyzes one procedure.
    pub fn of(procedure: &Procedure) -> Result<ProcedureAnalysis, AnalysisError> {
        let ops = collect_ops(procedure)?;
        let flow = flow::analyze(procedure, &ops)?;
        let data = DataDependencies::of(&ops);
        let local = LocalDependencyGraph::build(&ops, &flow);
        Ok(ProcedureAnalysis { name: procedure.name.clone(), ops, flow, data, local })
    }

    /// Whether any operation writes (a procedure that writes nothing is not logged).
    pub fn writes(&self) -> bool {
        self.ops.iter().any(Operation::writes)
    }
}

fn collect_ops(procedure: &Procedure) -> Result<Vec<Operation>, AnalysisError> {
    let mut ops = Vec::new();
    procedure.walk(&mut |s, _| {
        if let Some(op) = s.db_op() {
            ops.push(Operation { stmt: s.id, line: s.line, table: op.table.name.clone(), access: op.access });
        }
    });
    if ops.len() > limits::OPS_PER_PROCEDURE_MAX {
        return Err(AnalysisError::TooManyOperations {
            procedure: procedure.name.clone(),
            ops: ops.len(),
            limit: limits::OPS_PER_PROCEDURE_MAX,
        });
    }
    Ok(ops)
}

/// The static analysis of a set of procedures.
#[derive(Clone, Debug)]
pub struct StaticAnalysis {
    /// The global dependency graph of the procedures that write.
    pub graph: GlobalDependencyGraph,
    /// Procedures that write nothing: analyzed, but not in the graph (they are not logged).
    pub read_only: Vec<ProcedureAnalysis>,
    /// Procedures the analysis cannot handle: their calls must be logged as data.
    pub fallback: Vec<(String, AnalysisError)>,
}

/// Analyzes `procedures` and builds their global dependency graph. `ad_hoc_tables` are the tables
/// that ad-hoc transactions (or fallback procedures) may write; see the module doc.
pub fn analyze(procedures: &[&Procedure], ad_hoc_tables: &[&str]) -> Result<StaticAnalysis, GraphError> {
    if procedures.len() > limits::PROCEDURES_MAX {
        return Err(GraphError::TooManyProcedures { count: procedures.len(), limit: limits::PROCEDURES_MAX });
    }
    let mut writers = Vec::new();
    let mut read_only = Vec::new();
    let mut fallback = Vec::new();
    for p in procedures {
        match ProcedureAnalysis::of(p) {
            Ok(a) if a.writes() => writers.push(a),
            Ok(a) => read_only.push(a),
            Err(e) => fallback.push((p.name.clone(), e)),
        }
    }
    let mut names: Vec<&str> = procedures.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(GraphError::DuplicateProcedure(w[0].to_string()));
    }
    let graph = GlobalDependencyGraph::build(writers, ad_hoc_tables)?;
    Ok(StaticAnalysis { graph, read_only, fallback })
}
