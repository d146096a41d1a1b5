//! The stored-procedure language: lexer, parser, checker, IR, closure compiler and reference
//! interpreter. The language is described in `docs/LANGUAGE.md`.
//!
//! # Paper concepts
//!
//! PACMAN (§3) models a stored procedure as a **parameterized transaction template**: a named,
//! structured flow of database operations `var ← read(tbl, key)` and `write(tbl, key, val)`
//! (insert and delete are special writes), instantiated by a call with argument values. A
//! [`Procedure`] is exactly that, in an IR built for PACMAN's static analysis (§4.1):
//!
//! - every statement has a stable id ([`ir::StmtId`], program pre-order) and lists the variables
//!   it defines and uses ([`ir::Stmt::defs`], [`ir::Stmt::uses`]), giving **define-use flow
//!   dependencies**; nesting ([`ir::Stmt::children`]) and early exits ([`ir::Stmt::may_exit`])
//!   give **control flow dependencies**;
//! - every database operation ([`ir::Stmt::db_op`]) exposes its table, whether it reads or writes
//!   ([`ir::Access`]) and its key expressions ([`ir::KeyShape`]), giving **data dependencies**
//!   (same table, at least one write: [`ir::DbOp::data_dependent`]) and, with argument values at
//!   replay time, the key spaces of PACMAN's dynamic analysis (§4.3);
//! - the implicit `found` flag is an ordinary variable, so `if not found` depends on the lookup
//!   before it.
//!
//! The language is deterministic (no clock, no randomness, scans in index order), which command
//! logging needs: replaying a call with the same arguments on the same state repeats it exactly.
//!
//! # Pipeline
//!
//! [`lexer`] → [`parser`] ([`ast`]) → [`check`] (names, types, access paths) → [`ir`] →
//! [`compile`] (closures) or [`interp`] (reference interpreter). [`ops`] holds the run-time
//! meaning of operators shared by both back ends; [`runtime`] the frame and database calls.

pub mod ast;
mod check;
mod compile;
pub mod interp;
pub mod ir;
pub mod lexer;
pub mod limits;
pub mod ops;
pub mod parser;
pub mod runtime;

pub use ir::Procedure;

use crate::storage::table::Catalog;
use crate::storage::{ParamValue, TableSchema, Value};
use crate::txn::{Transaction, TxnError};
use std::sync::Arc;

/// A parse or type error at a place in a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name as given.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What was wrong and what was expected.
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.message)
    }
}

/// A checked source file: tables to create and procedures (as IR) to compile.
pub struct Module {
    /// Tables declared in the file.
    pub tables: Vec<TableSchema>,
    /// Procedures declared in the file.
    pub procedures: Vec<Procedure>,
}

/// Parses and type-checks a source file against the tables of `catalog` plus its own.
/// Returns every error found (parse errors first; type errors only if parsing succeeded).
pub fn check_source(file: &str, source: &str, catalog: &Catalog) -> Result<Module, Vec<Diagnostic>> {
    let mut diags = check::Diags::new(file);
    let tokens = match lexer::lex(source) {
        Ok(t) => t,
        Err(e) => {
            diags.err(e.span, e.message);
            return Err(diags.into_vec());
        }
    };
    let (ast, parse_errors) = parser::parse(tokens);
    if !parse_errors.is_empty() {
        for (span, message) in parse_errors {
            diags.err(span, message);
        }
        return Err(diags.into_vec());
    }
    let (tables, procedures) = check::check_file(&ast, catalog, &mut diags);
    if diags.is_empty() { Ok(Module { tables, procedures }) } else { Err(diags.into_vec()) }
}

/// Checks a file on its own (against an empty catalog), for `lazarus check FILE`. Returns the
/// errors; empty means the file is valid.
pub fn check_file_report(path: &str, source: &str) -> Vec<Diagnostic> {
    match check_source(path, source, &Catalog::default()) {
        Ok(_) => Vec::new(),
        Err(diags) => diags,
    }
}

/// A procedure compiled to closures.
pub struct CompiledProcedure {
    ir: Arc<Procedure>,
    body: Vec<compile::StmtFn>,
}

impl CompiledProcedure {
    /// Compiles a procedure against a catalog that contains every table it names, to run in a
    /// transaction or a replay context (every database operation it reaches runs).
    pub fn compile(ir: Arc<Procedure>, catalog: &Catalog) -> Result<CompiledProcedure, Diagnostic> {
        let body = compile::compile_body(&ir, catalog, compile::OpHooks::Off)?;
        Ok(CompiledProcedure { ir, body })
    }

    /// [`CompiledProcedure::compile`] for a PACMAN piece: each database operation first calls
    /// [`runtime::Storage::enter_op`], which may skip it.
    pub fn compile_for_pieces(ir: Arc<Procedure>, catalog: &Catalog) -> Result<CompiledProcedure, Diagnostic> {
        let body = compile::compile_body(&ir, catalog, compile::OpHooks::Pieces)?;
        Ok(CompiledProcedure { ir, body })
    }

    /// The procedure's name.
    pub fn name(&self) -> &str {
        &self.ir.name
    }

    /// The parameters (name, type, whether an array), in order.
    pub fn params(&self) -> &[ir::Var] {
        self.ir.param_vars()
    }

    /// The IR the procedure was compiled from (for static analysis and the interpreter).
    pub fn ir(&self) -> &Arc<Procedure> {
        &self.ir
    }

    /// Runs the procedure inside `tx`. Returns the values of its `return` (none if it ends
    /// without one). `abort` gives [`TxnError::UserAbort`]; run-time errors give
    /// [`TxnError::Procedure`]; engine errors (e.g. a duplicate key) pass through.
    pub fn run(&self, tx: &mut Transaction<'_>, args: &[ParamValue]) -> Result<Vec<Value>, TxnError> {
        let mut frame = runtime::bind_args(&self.ir, args)?;
        match compile::run_block(&self.body, &mut frame, tx)? {
            runtime::Flow::Return(values) => Ok(values),
            runtime::Flow::Next => Ok(Vec::new()),
        }
    }
}

impl CompiledProcedure {
    /// A frame for this procedure with every slot null. A caller that runs the procedure many
    /// times (compiled log replay) writes the parameters into `vals[0..params]` itself and
    /// reuses the frame, instead of [`CompiledProcedure::run`]'s argument binding per call.
    pub fn new_frame(&self) -> runtime::Frame {
        let ir = &self.ir;
        runtime::Frame {
            vals: vec![Value::Null; ir.vars.len()],
            arrays: vec![None; ir.params],
            row: None,
            changes: Vec::new(),
            iterations: 0,
        }
    }

    /// Runs the procedure on `storage` with the parameters already in `frame` (see
    /// [`CompiledProcedure::new_frame`]). Their types are not checked here: the caller binds
    /// values of the parameters' types or null, and the storage step checks every row it writes
    /// against the table's schema (or trusts a caller that checked each value as it bound it:
    /// compiled replay's typed binding, `crate::replay::compiled`). It runs for its writes: the
    /// values of a `return` are dropped (its callers, replay plans and PACMAN's pieces, have no
    /// use for them, and handing back an empty vector cost every replayed record its drop).
    #[inline(always)]
    pub fn run_bound(&self, frame: &mut runtime::Frame, storage: &mut dyn runtime::Storage) -> Result<(), TxnError> {
        debug_assert_eq!(frame.vals.len(), self.ir.vars.len());
        frame.iterations = 0;
        frame.row = None;
        compile::run_block(&self.body, frame, storage)?;
        Ok(())
    }
}

impl std::fmt::Debug for CompiledProcedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledProcedure").field("name", &self.ir.name).finish()
    }
}
