//! The stored-procedure language: parser, type checker, IR, compiler and reference interpreter.
//! (Being written; this is the interface the engine uses.)

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

/// A procedure's IR.
pub struct Procedure {
    /// Its name.
    pub name: String,
}

/// Parses and type-checks a source file against the tables of `catalog` plus its own.
pub fn check_source(file: &str, source: &str, catalog: &Catalog) -> Result<Module, Vec<Diagnostic>> {
    let _ = (file, source, catalog);
    Ok(Module { tables: Vec::new(), procedures: Vec::new() })
}

/// A procedure compiled to closures.
pub struct CompiledProcedure {
    ir: Arc<Procedure>,
}

impl CompiledProcedure {
    /// Compiles a procedure against a catalog that contains every table it names.
    pub fn compile(ir: Arc<Procedure>, catalog: &Catalog) -> Result<CompiledProcedure, Diagnostic> {
        let _ = catalog;
        Ok(CompiledProcedure { ir })
    }

    /// The procedure's name.
    pub fn name(&self) -> &str {
        &self.ir.name
    }

    /// Runs the procedure inside `tx`.
    pub fn run(&self, tx: &mut Transaction<'_>, args: &[ParamValue]) -> Result<Vec<Value>, TxnError> {
        let _ = (tx, args);
        Ok(Vec::new())
    }
}
