//! The checker: name resolution and type checking of a parsed file, producing table schemas and
//! procedure IR.
//!
//! Errors are collected rather than returned at the first one: every table, every procedure and
//! every statement is checked even after an error elsewhere. An expression with an error gets the
//! type [`Ty::Error`], which every later check accepts silently, so one mistake is reported once.

mod expr;
mod query;
mod scope;
mod stmt;
mod tables;

use super::Diagnostic;
use super::ast;
use super::ir::{Procedure, Ty, Var, VarId, VarKind};
use super::lexer::Span;
use super::limits::{DIAGNOSTICS_MAX, STATEMENTS_MAX, VARS_MAX};
use crate::storage::TableSchema;
use crate::storage::table::Catalog;
use scope::Scopes;
use std::collections::HashMap;

/// Collects diagnostics for one file.
pub(crate) struct Diags {
    file: String,
    list: Vec<Diagnostic>,
}

impl Diags {
    pub(crate) fn new(file: &str) -> Diags {
        Diags { file: file.to_string(), list: Vec::new() }
    }

    /// Records an error at `span` (dropped beyond [`DIAGNOSTICS_MAX`]).
    pub(crate) fn err(&mut self, span: Span, message: impl Into<String>) {
        if self.list.len() < DIAGNOSTICS_MAX {
            self.list.push(Diagnostic {
                file: self.file.clone(),
                line: span.line,
                col: span.col,
                message: message.into(),
            });
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn into_vec(self) -> Vec<Diagnostic> {
        self.list
    }
}

/// The tables a file may use: the catalog's and its own, by lower-case name.
pub(crate) struct TableEnv {
    tables: HashMap<String, TableSchema>,
}

impl TableEnv {
    fn get(&self, name: &str) -> Option<&TableSchema> {
        self.tables.get(name)
    }
}

/// Checks a parsed file. Returns the new tables and the procedures, or every error found.
pub(crate) fn check_file(file: &ast::File, catalog: &Catalog, diags: &mut Diags) -> (Vec<TableSchema>, Vec<Procedure>) {
    let (schemas, env) = tables::check_tables(file, catalog, diags);
    let mut procedures = Vec::new();
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for decl in &file.procedures {
        if let Some(first) = seen.insert(&decl.name.text, decl.name.span) {
            diags.err(
                decl.name.span,
                format!("procedure '{}' is already declared at line {}", decl.name.text, first.line),
            );
        }
        procedures.push(ProcChecker::check(decl, &env, diags));
    }
    (schemas, procedures)
}

/// Checks one procedure.
pub(crate) struct ProcChecker<'a> {
    tables: &'a TableEnv,
    diags: &'a mut Diags,
    vars: Vec<Var>,
    scopes: Scopes,
    found: VarId,
    next_stmt: u32,
    /// Set while checking the `set` expressions of an update: bare names that are columns of
    /// this table mean the current row's column.
    update_row: Option<TableSchema>,
}

impl<'a> ProcChecker<'a> {
    fn check(decl: &ast::ProcDecl, tables: &'a TableEnv, diags: &'a mut Diags) -> Procedure {
        let mut c = ProcChecker {
            tables,
            diags,
            vars: Vec::new(),
            scopes: Scopes::default(),
            found: VarId(0),
            next_stmt: 0,
            update_row: None,
        };
        c.scopes.push();
        for (name, ty) in &decl.params {
            c.declare_param(name, ty);
        }
        let params = c.vars.len();
        c.found = c.new_var("found", Ty::Bool, false, VarKind::Found);
        let body = c.block(&decl.body);
        if c.next_stmt as usize > STATEMENTS_MAX {
            c.diags.err(decl.name.span, format!("procedure has more than {STATEMENTS_MAX} statements"));
        }
        if c.vars.len() > VARS_MAX {
            c.diags.err(decl.name.span, format!("procedure has more than {VARS_MAX} variables"));
        }
        Procedure {
            name: decl.name.text.clone(),
            file: c.diags.file.clone(),
            params,
            vars: c.vars,
            found: c.found,
            body,
            stmt_count: c.next_stmt,
            line: decl.name.span.line,
            col: decl.name.span.col,
        }
    }

    fn declare_param(&mut self, name: &ast::Name, ty: &ast::TypeName) {
        let scalar = self.scalar_type(&ty.name, true);
        if name.text == "found" {
            self.diags.err(name.span, "'found' is reserved and cannot name a parameter");
        }
        if self.scopes.lookup(&name.text).is_some() {
            self.diags.err(name.span, format!("duplicate parameter '{}'", name.text));
            return;
        }
        let id = self.new_var(&name.text, scalar, ty.array, VarKind::Param);
        self.scopes.bind_var(&name.text, id, name.span);
    }

    /// The scalar type named `name`; `bool` only where `bool_ok`.
    fn scalar_type(&mut self, name: &ast::Name, bool_ok: bool) -> Ty {
        match crate::storage::ColumnType::from_name(&name.text) {
            Some(crate::storage::ColumnType::Bool) if !bool_ok => {
                self.diags.err(name.span, "type bool cannot be stored in a table");
                Ty::Error
            }
            Some(t) => Ty::from_column(t),
            None => {
                self.diags
                    .err(name.span, format!("unknown type '{}' (expected int, float, text, bytes or bool)", name.text));
                Ty::Error
            }
        }
    }

    fn new_var(&mut self, name: &str, ty: Ty, array: bool, kind: VarKind) -> VarId {
        let id = VarId(self.vars.len() as u32);
        self.vars.push(Var { name: name.to_string(), ty, array, kind });
        id
    }

    fn var(&self, id: VarId) -> &Var {
        &self.vars[id.index()]
    }
}
