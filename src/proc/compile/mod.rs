//! The compiler: IR to a tree of Rust closures.
//!
//! Everything that can be decided before a call is decided here: variables become frame slot
//! indices, tables become table ids (checked against the catalog once), column names become
//! positions, and operators on statically-int operands get specialized closures. Running a
//! compiled procedure walks no AST and looks up no names.

mod expr;
mod moves;
mod prefetch;
mod stmt;
mod switch;
mod typed;

pub(crate) use stmt::{StmtFn, run_block};

use super::Diagnostic;
use super::ir::Procedure;
use crate::storage::table::Catalog;
use std::sync::Arc;

/// Whether the compiled database operations announce themselves to the storage first
/// ([`crate::proc::runtime::Storage::enter_op`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpHooks {
    /// They do not: a transaction or a replay context runs every operation it meets, and the
    /// announcement would be a dynamic call per operation for nothing.
    Off,
    /// They do: a PACMAN piece (`crate::pacman::piece`) learns each operation's role and may skip it.
    Pieces,
}

/// Compiles a procedure's body against `catalog`.
pub(crate) fn compile_body(proc: &Procedure, catalog: &Catalog, hooks: OpHooks) -> Result<Vec<StmtFn>, Diagnostic> {
    let movable = moves::movable_vars(proc);
    let ctx = stmt::Ctx { proc, catalog, name: Arc::from(proc.name.as_str()), movable, hooks };
    ctx.block(&proc.body)
}
