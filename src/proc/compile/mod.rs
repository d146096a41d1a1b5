//! The compiler: IR to a tree of Rust closures.
//!
//! Everything that can be decided before a call is decided here: variables become frame slot
//! indices, tables become table ids (checked against the catalog once), column names become
//! positions, and operators on statically-int operands get specialized closures. Running a
//! compiled procedure walks no AST and looks up no names.

mod expr;
mod moves;
mod stmt;

pub(crate) use stmt::{StmtFn, run_block};

use super::Diagnostic;
use super::ir::Procedure;
use crate::storage::table::Catalog;
use std::sync::Arc;

/// Compiles a procedure's body against `catalog`.
pub(crate) fn compile_body(proc: &Procedure, catalog: &Catalog) -> Result<Vec<StmtFn>, Diagnostic> {
    let movable = moves::movable_vars(proc);
    let ctx = stmt::Ctx { proc, catalog, name: Arc::from(proc.name.as_str()), movable };
    ctx.block(&proc.body)
}
