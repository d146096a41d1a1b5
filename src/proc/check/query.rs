//! Database statements: `select ... into`, `for ... in select`, `insert`, `update`, `delete`,
//! and the planning of where clauses into point gets and bounded index-range scans.
//!
//! A where clause is a conjunction of `column op expr`. The left side is always a column of the
//! table; the right side is an expression over variables and parameters (so `where id = id`
//! compares column `id` with parameter `id`). For a scan the conjuncts must be `=` on a prefix of
//! the index's columns (the primary key, or the named secondary index) plus at most a lower and an
//! upper bound on the next column; anything else is rejected with an explanation, because every
//! access must be an index range (bounded work, and a key shape PACMAN's analysis can read).

use super::super::ast::{self, CmpOp};
use super::super::ir::{
    DeleteOp, Expr, ExprKind, GetOp, InsertOp, RangeBound, ScanOp, StmtKind, TableRef, Ty, UpdateOp, VarId, VarKind,
};
use super::super::limits::SCAN_LIMIT_MAX;
use super::ProcChecker;
use super::expr::{convert, error_expr};
use super::scope::Binding;
use crate::storage::{Direction, TableSchema, Value};

/// How a select reads its rows.
enum Plan {
    /// By the full primary key (values in key order).
    Get(Vec<Expr>),
    /// A range of an index.
    Scan {
        index: Option<usize>,
        prefix: Vec<Expr>,
        lower: Option<RangeBound>,
        upper: Option<RangeBound>,
        direction: Direction,
    },
}

/// The where clause sorted by column: equalities and bounds.
#[derive(Default)]
struct Conds {
    eq: Vec<(usize, Expr)>,
    lower: Vec<(usize, RangeBound)>,
    upper: Vec<(usize, RangeBound)>,
}

fn table_ref(schema: &TableSchema) -> TableRef {
    TableRef {
        name: schema.name.to_ascii_lowercase(),
        primary_key: schema.primary_key.clone(),
        columns: schema.columns.len(),
    }
}

fn col_ty(schema: &TableSchema, pos: usize) -> Ty {
    Ty::from_column(schema.columns[pos].ty)
}

impl ProcChecker<'_> {
    fn table(&mut self, name: &ast::Name) -> Option<TableSchema> {
        let t = self.tables.get(&name.text).cloned();
        if t.is_none() {
            self.diags.err(name.span, format!("unknown table '{}'", name.text));
        }
        t
    }

    fn column(&mut self, schema: &TableSchema, name: &ast::Name) -> Option<usize> {
        let p = schema.column_position(&name.text);
        if p.is_none() {
            self.diags.err(name.span, format!("unknown column '{}' in table {}", name.text, schema.name));
        }
        p
    }

    /// A value for column `pos`, converted to its type. When `storing` (insert, update), a
    /// literal null for a not-null column is an error here rather than at run time; in a where
    /// clause `col = null` is allowed and matches no row.
    fn column_value(&mut self, schema: &TableSchema, pos: usize, e: &ast::Expr, storing: bool) -> Expr {
        let v = self.expr(e);
        let c = &schema.columns[pos];
        if storing && v.ty == Ty::Null && !c.nullable && matches!(v.kind, ExprKind::Const(_)) {
            self.diags.err(e.span, format!("column {} of {} is not null", c.name, schema.name));
            return error_expr();
        }
        let ty = col_ty(schema, pos);
        let msg = format!("column {} of {} is {ty}", c.name, schema.name);
        self.want(v, ty, e.span, &msg)
    }

    /// Sorts a where clause by column, checking each conjunct's column and value.
    fn conds(&mut self, schema: &TableSchema, conds: &[ast::Cond]) -> Option<Conds> {
        let mut out = Conds::default();
        let mut ok = true;
        for c in conds {
            let Some(pos) = self.column(schema, &c.column) else {
                ok = false;
                continue;
            };
            let value = self.column_value(schema, pos, &c.value, false);
            let bound = |inclusive| RangeBound { value: value.clone(), inclusive };
            match c.op {
                CmpOp::Eq => out.eq.push((pos, value)),
                CmpOp::Gt | CmpOp::Ge => out.lower.push((pos, bound(c.op == CmpOp::Ge))),
                CmpOp::Lt | CmpOp::Le => out.upper.push((pos, bound(c.op == CmpOp::Le))),
                CmpOp::Ne => {
                    self.diags.err(c.column.span, "'<>' cannot be used in a where clause; test it with 'if' instead");
                    ok = false;
                }
            }
        }
        // A column may have one '=', or up to one lower and one upper bound, not more.
        let eq_cols: Vec<usize> = out.eq.iter().map(|(p, _)| *p).collect();
        let bound_cols = out.lower.iter().chain(&out.upper).map(|(p, _)| *p);
        let twice = (1..eq_cols.len()).find(|&i| eq_cols[..i].contains(&eq_cols[i])).map(|i| eq_cols[i]);
        if let Some(pos) = twice.or(bound_cols.into_iter().find(|p| eq_cols.contains(p)))
            && ok
        {
            let span =
                conds.iter().find(|c| schema.column_position(&c.column.text) == Some(pos)).map(|c| c.column.span);
            self.diags
                .err(span.unwrap_or_default(), format!("column {} is constrained twice", schema.columns[pos].name));
            ok = false;
        }
        if out.upper.len() > 1 || out.lower.len() > 1 {
            let span = conds.last().map(|c| c.column.span).unwrap_or_default();
            self.diags.err(span, "a where clause may have at most one lower and one upper bound");
            ok = false;
        }
        ok.then_some(out)
    }

    /// The primary-key values of an update or delete (or a get), in key order.
    fn point_key(
        &mut self,
        schema: &TableSchema,
        conds: &[ast::Cond],
        table: &ast::Name,
        what: &str,
    ) -> Option<Vec<Expr>> {
        let c = self.conds(schema, conds)?;
        if let Some((pos, _)) = c.lower.first().or(c.upper.first()) {
            self.diags.err(
                table.span,
                format!(
                    "{what} finds its row by primary key: only '=' is allowed, not a range on {}",
                    schema.columns[*pos].name
                ),
            );
            return None;
        }
        if let Some((pos, _)) = c.eq.iter().find(|(p, _)| !schema.primary_key.contains(p)) {
            self.diags.err(
                table.span,
                format!(
                    "{what} finds its row by primary key, and {} is not a primary-key column of {}",
                    schema.columns[*pos].name, schema.name
                ),
            );
            return None;
        }
        let mut key = Vec::new();
        let mut missing = Vec::new();
        for &p in &schema.primary_key {
            match c.eq.iter().find(|(q, _)| *q == p) {
                Some((_, e)) => key.push(e.clone()),
                None => missing.push(schema.columns[p].name.clone()),
            }
        }
        if !missing.is_empty() {
            self.diags.err(
                table.span,
                format!(
                    "where clause must name every primary-key column of {} (missing: {})",
                    schema.name,
                    missing.join(", ")
                ),
            );
            return None;
        }
        Some(key)
    }

    /// Plans a select: a get when allowed and the full primary key is given, else a scan.
    fn plan(&mut self, schema: &TableSchema, sel: &ast::Select, get_ok: bool) -> Option<Plan> {
        let (index, cols, what) = match &sel.index {
            None => (None, schema.primary_key.clone(), format!("the primary key of {}", schema.name)),
            Some(n) => match schema.index_position(&n.text) {
                Some(i) => (Some(i), schema.indexes[i].columns.clone(), format!("index {}", n.text)),
                None => {
                    self.diags.err(n.span, format!("unknown index '{}' on table {}", n.text, schema.name));
                    return None;
                }
            },
        };
        let c = self.conds(schema, &sel.conds)?;
        let name = |p: usize| schema.columns[p].name.clone();
        // The equality prefix: leading index columns with '='.
        let k = cols.iter().take_while(|p| c.eq.iter().any(|(q, _)| q == *p)).count();
        let span = sel.table.span;
        if let Some((p, _)) = c.eq.iter().find(|(p, _)| !cols[..k].contains(p)) {
            let msg = match cols.iter().position(|q| q == p) {
                None => format!("column {} is not in {what}; a where clause can only use its columns", name(*p)),
                Some(_) => format!(
                    "'=' on {} needs '=' on {} first ({what} is ({}))",
                    name(*p),
                    name(cols[k]),
                    cols.iter().map(|&q| name(q)).collect::<Vec<_>>().join(", ")
                ),
            };
            self.diags.err(span, msg);
            return None;
        }
        for (p, _) in c.lower.iter().chain(&c.upper) {
            if cols.get(k) != Some(p) {
                let next = cols.get(k).map_or("no column (the prefix is complete)".to_string(), |&q| name(q));
                self.diags.err(span, format!("a range condition on {} is not allowed: after the '=' prefix of {what}, only {next} may have a range", name(*p)));
                return None;
            }
        }
        let ranged = !c.lower.is_empty() || !c.upper.is_empty();
        if get_ok && index.is_none() && k == cols.len() && !ranged {
            let key = cols.iter().filter_map(|p| c.eq.iter().find(|(q, _)| q == p).map(|(_, e)| e.clone())).collect();
            return Some(Plan::Get(key));
        }
        let direction = self.direction(schema, sel, &cols, k, &what)?;
        let prefix =
            cols[..k].iter().filter_map(|p| c.eq.iter().find(|(q, _)| q == p).map(|(_, e)| e.clone())).collect();
        let lower = c.lower.into_iter().next().map(|(_, b)| b);
        let upper = c.upper.into_iter().next().map(|(_, b)| b);
        Some(Plan::Scan { index, prefix, lower, upper, direction })
    }

    /// `order by`: only a column the index already orders the result by.
    fn direction(
        &mut self,
        schema: &TableSchema,
        sel: &ast::Select,
        cols: &[usize],
        k: usize,
        what: &str,
    ) -> Option<Direction> {
        let Some((col, desc)) = &sel.order else { return Some(Direction::Forward) };
        let pos = self.column(schema, col)?;
        let allowed = &cols[..(k + 1).min(cols.len())];
        if !allowed.contains(&pos) {
            let next = cols.get(k).or(cols.last()).map_or(String::new(), |&p| schema.columns[p].name.clone());
            self.diags.err(
                col.span,
                format!("order by {} does not follow {what}; order by {next} (asc or desc) instead", col.text),
            );
            return None;
        }
        Some(if *desc { Direction::Backward } else { Direction::Forward })
    }

    /// The selected columns' positions and names (`*`: all).
    fn selected(&mut self, schema: &TableSchema, sel: &ast::Select) -> Option<(Vec<usize>, Vec<String>)> {
        let Some(cols) = &sel.columns else {
            return Some((
                (0..schema.columns.len()).collect(),
                schema.columns.iter().map(|c| c.name.clone()).collect(),
            ));
        };
        let mut out = (Vec::new(), Vec::new());
        for c in cols {
            let p = self.column(schema, c)?;
            out.0.push(p);
            out.1.push(c.text.clone());
        }
        Some(out)
    }

    /// The scan's limit; `required` names the construct that must give one (else 1).
    fn limit(&mut self, sel: &ast::Select, required: Option<&str>) -> Expr {
        let Some(e) = &sel.limit else {
            if let Some(what) = required {
                self.diags.err(sel.table.span, format!("{what} needs a limit (at most {SCAN_LIMIT_MAX})"));
            }
            return Expr { ty: Ty::Int, kind: ExprKind::Const(Value::Int(1)) };
        };
        let x = self.expr(e);
        let x = self.want(x, Ty::Int, e.span, "a limit must be int");
        if let ExprKind::Const(Value::Int(n)) = x.kind
            && !(0..=SCAN_LIMIT_MAX).contains(&n)
        {
            self.diags.err(e.span, format!("limit must be between 0 and {SCAN_LIMIT_MAX}, got {n}"));
        }
        x
    }

    fn scan_op(&mut self, schema: &TableSchema, plan: Plan, limit: Expr, columns: Vec<usize>) -> ScanOp {
        let (index, prefix, lower, upper, direction) = match plan {
            Plan::Scan { index, prefix, lower, upper, direction } => (index, prefix, lower, upper, direction),
            Plan::Get(key) => (None, key, None, None, Direction::Forward),
        };
        ScanOp {
            table: table_ref(schema),
            index,
            prefix,
            lower,
            upper,
            direction,
            limit,
            distinct: false,
            columns,
            into: Vec::new(),
        }
    }

    /// The scan of `for r in select ...` and the selected column names.
    pub(super) fn scan_for_loop(&mut self, sel: &ast::Select) -> Option<(ScanOp, Vec<String>)> {
        let schema = self.table(&sel.table)?;
        let selected = self.selected(&schema, sel);
        let plan = self.plan(&schema, sel, false);
        let limit = self.limit(sel, Some("a 'for' scan"));
        let (positions, names) = selected?;
        let mut scan = self.scan_op(&schema, plan?, limit, positions);
        scan.distinct = sel.distinct;
        Some((scan, names))
    }

    /// `select cols into vars from ...`: a get or the first row of a scan.
    pub(super) fn select_into(
        &mut self,
        sel: &ast::Select,
        targets: &[ast::Name],
        into_array: bool,
    ) -> (StmtKind, Vec<VarId>) {
        let nothing = (StmtKind::Return(Vec::new()), Vec::new());
        let Some(schema) = self.table(&sel.table) else { return nothing };
        if sel.columns.is_none() {
            self.diags.err(sel.table.span, "select ... into needs a column list, not '*'");
            return nothing;
        }
        if sel.distinct {
            self.diags.err(sel.table.span, "'distinct' is only allowed in a 'for' loop's select");
            return nothing;
        }
        let selected = self.selected(&schema, sel);
        let plan = self.plan(&schema, sel, true);
        let limit = self.limit(sel, into_array.then_some("a select into an array"));
        let (Some((positions, _)), Some(plan)) = (selected, plan) else { return nothing };
        if positions.len() != targets.len() {
            self.diags.err(
                targets[0].span,
                format!("select names {} column(s) but 'into' names {} variable(s)", positions.len(), targets.len()),
            );
            return nothing;
        }
        if into_array {
            let into = vec![self.array_target(&schema, positions[0], &targets[0])];
            let defs = vec![into[0], self.found];
            let mut scan = self.scan_op(&schema, plan, limit, positions);
            scan.into = into;
            return (StmtKind::ScanAll(scan), defs);
        }
        let into: Vec<VarId> = positions.iter().zip(targets).map(|(&p, t)| self.select_target(&schema, p, t)).collect();
        let mut defs = into.clone();
        defs.push(self.found);
        let kind = match plan {
            Plan::Get(key) => StmtKind::Get(GetOp { table: table_ref(&schema), key, columns: positions, into }),
            plan => {
                let mut scan = self.scan_op(&schema, plan, limit, positions);
                scan.into = into;
                StmtKind::ScanFirst(scan)
            }
        };
        (kind, defs)
    }

    /// An `into x[]` target: an existing local array of the column's type, or a new one.
    fn array_target(&mut self, schema: &TableSchema, pos: usize, target: &ast::Name) -> VarId {
        let ty = col_ty(schema, pos);
        let existing = match self.scopes.lookup(&target.text) {
            Some((Binding::Var(id), _)) => Some(*id),
            Some(_) => {
                self.diags.err(target.span, format!("'{}' is not a variable", target.text));
                return self.found;
            }
            None => None,
        };
        let Some(id) = existing else {
            if target.text == "found" {
                self.diags.err(target.span, "'found' is reserved and cannot be declared");
                return self.found;
            }
            let id = self.new_var(&target.text, ty, true, VarKind::Local);
            self.scopes.bind_var(&target.text, id, target.span);
            return id;
        };
        let var = self.var(id);
        if var.kind != VarKind::Local || !var.array {
            let what = if var.array { "an array parameter (read-only)" } else { "not an array" };
            self.diags
                .err(target.span, format!("'{}' is {what}; 'into {}[]' needs a local array", target.text, target.text));
        } else if var.ty != ty && var.ty != Ty::Error {
            let v = var.ty;
            self.diags.err(
                target.span,
                format!(
                    "type mismatch: column {} is {ty} but array '{}' is {v}[]",
                    schema.columns[pos].name, target.text
                ),
            );
        }
        id
    }

    /// An `into` target: an existing local of the column's type, or a new local.
    fn select_target(&mut self, schema: &TableSchema, pos: usize, target: &ast::Name) -> VarId {
        let ty = col_ty(schema, pos);
        if let Some((Binding::Var(id), _)) = self.scopes.lookup(&target.text) {
            let id = *id;
            if self.var(id).kind == VarKind::Local && self.var(id).ty != ty && self.var(id).ty != Ty::Error {
                let v = self.var(id).ty;
                self.diags.err(
                    target.span,
                    format!(
                        "type mismatch: column {} is {ty} but variable '{}' is {v}",
                        schema.columns[pos].name, target.text
                    ),
                );
            }
            return self.assignable_var(target).unwrap_or(id);
        }
        if self.scopes.lookup(&target.text).is_some() || target.text == "found" {
            return self.assignable_var(target).unwrap_or(self.found);
        }
        self.declare(target, ty, VarKind::Local)
    }

    pub(super) fn insert(
        &mut self,
        table: &ast::Name,
        columns: Option<&[ast::Name]>,
        values: &[ast::Expr],
    ) -> StmtKind {
        let nothing = StmtKind::Return(Vec::new());
        let Some(schema) = self.table(table) else { return nothing };
        let positions: Vec<usize> = match columns {
            None => (0..schema.columns.len()).collect(),
            Some(names) => {
                let ps: Vec<Option<usize>> = names.iter().map(|n| self.column(&schema, n)).collect();
                let Some(ps) = ps.into_iter().collect::<Option<Vec<usize>>>() else { return nothing };
                if let Some(i) = (1..ps.len()).find(|&i| ps[..i].contains(&ps[i])) {
                    self.diags.err(names[i].span, format!("column {} is named twice", names[i].text));
                    return nothing;
                }
                ps
            }
        };
        if positions.len() != values.len() {
            self.diags.err(
                table.span,
                format!(
                    "insert into {} names {} column(s) but gives {} value(s)",
                    schema.name,
                    positions.len(),
                    values.len()
                ),
            );
            return nothing;
        }
        let mut row: Vec<Option<Expr>> = vec![None; schema.columns.len()];
        for (&p, v) in positions.iter().zip(values) {
            row[p] = Some(self.column_value(&schema, p, v, true));
        }
        let mut full = Vec::new();
        for (p, v) in row.into_iter().enumerate() {
            let c = &schema.columns[p];
            full.push(v.unwrap_or_else(|| {
                if !c.nullable {
                    self.diags
                        .err(table.span, format!("column {} of {} is not null and needs a value", c.name, schema.name));
                }
                convert(Expr { ty: Ty::Null, kind: ExprKind::Const(Value::Null) }, col_ty(&schema, p))
            }));
        }
        StmtKind::Insert(InsertOp { table: table_ref(&schema), values: full })
    }

    pub(super) fn update(
        &mut self,
        table: &ast::Name,
        sets: &[(ast::Name, ast::Expr)],
        conds: &[ast::Cond],
    ) -> StmtKind {
        let nothing = StmtKind::Return(Vec::new());
        let Some(schema) = self.table(table) else { return nothing };
        let key = self.point_key(&schema, conds, table, "update");
        let mut out: Vec<(usize, Expr)> = Vec::new();
        for (col, e) in sets {
            let Some(p) = self.column(&schema, col) else { continue };
            if schema.primary_key.contains(&p) {
                self.diags.err(col.span, format!("cannot update primary-key column {} of {}", col.text, schema.name));
            } else if out.iter().any(|(q, _)| *q == p) {
                self.diags.err(col.span, format!("column {} is set twice", col.text));
            }
            self.update_row = Some(schema.clone());
            let v = self.column_value(&schema, p, e, true);
            self.update_row = None;
            out.push((p, v));
        }
        match key {
            Some(key) => StmtKind::Update(UpdateOp { table: table_ref(&schema), key, sets: out }),
            None => nothing,
        }
    }

    pub(super) fn delete(&mut self, table: &ast::Name, conds: &[ast::Cond]) -> StmtKind {
        let Some(schema) = self.table(table) else { return StmtKind::Return(Vec::new()) };
        match self.point_key(&schema, conds, table, "delete") {
            Some(key) => StmtKind::Delete(DeleteOp { table: table_ref(&schema), key }),
            None => StmtKind::Return(Vec::new()),
        }
    }
}
