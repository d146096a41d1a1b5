//! Table and index declarations to [`TableSchema`]s.

use super::super::ast;
use super::{Diags, TableEnv};
use crate::storage::table::Catalog;
use crate::storage::{Column, ColumnType, IndexSchema, TableSchema};
use std::collections::HashMap;

/// Checks the file's tables and indexes. Returns the valid new schemas and the environment of
/// every table (catalog and file) that procedures may name.
pub(super) fn check_tables(file: &ast::File, catalog: &Catalog, diags: &mut Diags) -> (Vec<TableSchema>, TableEnv) {
    let mut env: HashMap<String, TableSchema> =
        catalog.tables().iter().map(|t| (t.schema.name.to_ascii_lowercase(), t.schema.clone())).collect();
    let mut declared: Vec<String> = Vec::new();
    for decl in &file.tables {
        let name = &decl.name.text;
        if declared.contains(name) {
            diags.err(decl.name.span, format!("table '{name}' is already declared in this file"));
            continue;
        }
        if env.contains_key(name) {
            diags.err(decl.name.span, format!("table '{name}' already exists in the database"));
            continue;
        }
        if let Some(schema) = table_schema(decl, diags) {
            declared.push(name.clone());
            env.insert(name.clone(), schema);
        }
    }
    for decl in &file.indexes {
        add_index(decl, &declared, &mut env, diags);
    }
    let mut schemas = Vec::new();
    for name in &declared {
        let Some(schema) = env.get(name) else { continue };
        match schema.validate() {
            Ok(()) => schemas.push(schema.clone()),
            Err(e) => {
                let span = file.tables.iter().find(|t| &t.name.text == name).map(|t| t.name.span).unwrap_or_default();
                diags.err(span, e.to_string());
            }
        }
    }
    (schemas, TableEnv { tables: env })
}

fn table_schema(decl: &ast::TableDecl, diags: &mut Diags) -> Option<TableSchema> {
    let table = &decl.name.text;
    let mut columns: Vec<Column> = Vec::new();
    let mut ok = true;
    for c in &decl.columns {
        let ty = match ColumnType::from_name(&c.ty.text) {
            Some(ColumnType::Bool) => {
                diags.err(c.ty.span, format!("column '{}' has type bool, which a table cannot store", c.name.text));
                None
            }
            Some(t) => Some(t),
            None => {
                diags.err(
                    c.ty.span,
                    format!("unknown column type '{}' (expected int, float, text or bytes)", c.ty.text),
                );
                None
            }
        };
        if columns.iter().any(|x| x.name == c.name.text) {
            diags.err(c.name.span, format!("column '{}' is declared twice in table {table}", c.name.text));
            ok = false;
        }
        match ty {
            Some(ty) => columns.push(Column { name: c.name.text.clone(), ty, nullable: c.nullable }),
            None => ok = false,
        }
    }
    if decl.primary_key.is_empty() {
        diags.err(decl.name.span, format!("table {table} needs a primary key: add 'primary key (column, ...)'"));
        return None;
    }
    let primary_key = positions(table, &columns, &decl.primary_key, diags)?;
    // Primary-key columns are implicitly not null, as in SQL.
    for &p in &primary_key {
        columns[p].nullable = false;
    }
    ok.then(|| TableSchema { name: decl.name.text.clone(), columns, primary_key, indexes: Vec::new() })
}

/// Positions of `names` among `columns`, reporting unknown and repeated names.
fn positions(table: &str, columns: &[Column], names: &[ast::Name], diags: &mut Diags) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    let mut ok = true;
    for n in names {
        match columns.iter().position(|c| c.name == n.text) {
            Some(p) if out.contains(&p) => {
                diags.err(n.span, format!("column '{}' is named twice", n.text));
                ok = false;
            }
            Some(p) => out.push(p),
            None => {
                diags.err(n.span, format!("unknown column '{}' in table {table}", n.text));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn add_index(decl: &ast::IndexDecl, declared: &[String], env: &mut HashMap<String, TableSchema>, diags: &mut Diags) {
    let table = &decl.table.text;
    let Some(schema) = env.get_mut(table) else {
        diags.err(decl.table.span, format!("unknown table '{table}'"));
        return;
    };
    if !declared.contains(table) {
        diags.err(
            decl.table.span,
            format!("index on table {table} must be declared in the file that declares the table"),
        );
        return;
    }
    if schema.index_position(&decl.name.text).is_some() {
        diags.err(decl.name.span, format!("index '{}' is already declared on table {table}", decl.name.text));
        return;
    }
    if let Some(columns) = positions(table, &schema.columns, &decl.columns, diags) {
        schema.indexes.push(IndexSchema { name: decl.name.text.clone(), columns });
    }
}
