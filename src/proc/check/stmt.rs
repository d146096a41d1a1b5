//! Statements: declarations, assignments, control flow, `return` and `abort`. Database statements
//! are in [`super::query`].

use super::super::ast::{self, StmtKind as A};
use super::super::ir::{Stmt, StmtId, StmtKind, Ty, VarId, VarKind};
use super::super::lexer::Span;
use super::super::limits::RETURN_VALUES_MAX;
use super::ProcChecker;
use super::expr::{assignable, convert, error_expr};
use super::scope::Binding;

impl ProcChecker<'_> {
    /// Checks a block in a new scope.
    pub(super) fn block(&mut self, stmts: &[ast::Stmt]) -> Vec<Stmt> {
        self.scopes.push();
        let out = stmts.iter().map(|s| self.statement(s)).collect();
        self.scopes.pop();
        out
    }

    fn statement(&mut self, s: &ast::Stmt) -> Stmt {
        // Ids are taken before nested statements are checked: pre-order.
        let id = StmtId(self.next_stmt);
        self.next_stmt += 1;
        let (kind, defs) = match &s.kind {
            A::Let { name, ty, value } => self.let_stmt(name, ty.as_ref(), value),
            A::Assign { name, value } => self.assign(name, value),
            A::If { cond, then, otherwise } => {
                let c = self.expr(cond);
                let c = self.want(c, Ty::Bool, cond.span, "an if condition must be bool");
                (StmtKind::If { cond: c, then: self.block(then), otherwise: self.block(otherwise) }, Vec::new())
            }
            A::ForRange { var, start, end, body } => self.for_range(var, start, end, body),
            A::ForArray { var, array, body } => self.for_array(var, array, body),
            A::ForSelect { var, select, body } => self.for_select(var, select, body),
            A::SelectInto { select, targets, into_array } => self.select_into(select, targets, *into_array),
            A::Insert { table, columns, values } => (self.insert(table, columns.as_deref(), values), Vec::new()),
            A::Update { table, sets, conds } => (self.update(table, sets, conds), vec![self.found]),
            A::Delete { table, conds } => (self.delete(table, conds), vec![self.found]),
            A::Return(values) => (self.return_stmt(values, s.span), Vec::new()),
            A::Abort(msg) => {
                let m = self.expr(msg);
                (StmtKind::Abort(self.want(m, Ty::Text, msg.span, "abort needs a text message")), Vec::new())
            }
        };
        let mut uses = Vec::new();
        kind.header_exprs(&mut |e| e.collect_vars(&mut uses));
        if let StmtKind::ForArray { array, .. } = &kind {
            uses.push(*array);
        }
        uses.sort();
        uses.dedup();
        Stmt { id, line: s.span.line, col: s.span.col, kind, defs, uses }
    }

    /// Declares a new local; reports a name that is already visible.
    pub(super) fn declare(&mut self, name: &ast::Name, ty: Ty, kind: VarKind) -> VarId {
        if name.text == "found" {
            self.diags.err(name.span, "'found' is reserved and cannot be declared");
        } else if let Some((_, first)) = self.scopes.lookup(&name.text) {
            self.diags.err(
                name.span,
                format!("variable '{}' is already declared (line {}, column {})", name.text, first.line, first.col),
            );
        }
        let id = self.new_var(&name.text, ty, false, kind);
        self.scopes.bind_var(&name.text, id, name.span);
        id
    }

    fn let_stmt(&mut self, name: &ast::Name, ty: Option<&ast::TypeName>, value: &ast::Expr) -> (StmtKind, Vec<VarId>) {
        let v = self.expr(value);
        let ty = match ty {
            Some(t) if t.array => {
                self.diags
                    .err(t.name.span, "'let' declares scalars; a local array is set by 'select c into name[] ...'");
                Ty::Error
            }
            Some(t) => self.scalar_type(&t.name, true),
            None if v.ty == Ty::Null => {
                self.diags.err(
                    value.span,
                    format!(
                        "cannot infer the type of '{}' from null; write 'let {} <type> = null'",
                        name.text, name.text
                    ),
                );
                Ty::Error
            }
            None => v.ty,
        };
        let v = self.want(v, ty, value.span, &format!("cannot initialize {ty} variable '{}'", name.text));
        let var = self.declare(name, ty, VarKind::Local);
        (StmtKind::Assign { var, value: v }, vec![var])
    }

    /// The local variable `name` may be assigned, or an error.
    pub(super) fn assignable_var(&mut self, name: &ast::Name) -> Option<VarId> {
        let problem = match self.scopes.lookup(&name.text) {
            _ if name.text == "found" => "cannot assign to 'found'".to_string(),
            Some((Binding::Var(id), _)) => match self.var(*id).kind {
                VarKind::Local if self.var(*id).array => {
                    format!(
                        "cannot assign a scalar to array '{}' (only 'select ... into {}[]' sets it)",
                        name.text, name.text
                    )
                }
                VarKind::Local => return Some(*id),
                VarKind::Param => format!("cannot assign to parameter '{}'", name.text),
                _ => format!("cannot assign to loop variable '{}'", name.text),
            },
            Some((Binding::Row { .. }, _)) => format!("cannot assign to row variable '{}'", name.text),
            None => format!("unknown variable '{}'", name.text),
        };
        self.diags.err(name.span, problem);
        None
    }

    fn assign(&mut self, name: &ast::Name, value: &ast::Expr) -> (StmtKind, Vec<VarId>) {
        let v = self.expr(value);
        let Some(var) = self.assignable_var(name) else {
            return (StmtKind::Return(Vec::new()), Vec::new());
        };
        let ty = self.var(var).ty;
        let v = if assignable(v.ty, ty) {
            convert(v, ty)
        } else {
            let hint = if v.ty == Ty::Float && ty == Ty::Int { " (use int())" } else { "" };
            self.diags.err(
                value.span,
                format!("type mismatch: cannot assign {} to {ty} variable '{}'{hint}", v.ty, name.text),
            );
            error_expr()
        };
        (StmtKind::Assign { var, value: v }, vec![var])
    }

    fn for_range(
        &mut self,
        var: &ast::Name,
        start: &ast::Expr,
        end: &ast::Expr,
        body: &[ast::Stmt],
    ) -> (StmtKind, Vec<VarId>) {
        let s = self.expr(start);
        let s = self.want(s, Ty::Int, start.span, "range bounds must be int");
        let e = self.expr(end);
        let e = self.want(e, Ty::Int, end.span, "range bounds must be int");
        self.scopes.push();
        let id = self.declare(var, Ty::Int, VarKind::LoopVar);
        let body = self.block(body);
        self.scopes.pop();
        (StmtKind::ForRange { var: id, start: s, end: e, body }, vec![id])
    }

    fn for_array(&mut self, var: &ast::Name, array: &ast::Name, body: &[ast::Stmt]) -> (StmtKind, Vec<VarId>) {
        let arr = match self.scopes.lookup(&array.text) {
            Some((Binding::Var(id), _)) if self.var(*id).array => Some(*id),
            _ => {
                self.diags.err(array.span, format!("'{}' is not an array", array.text));
                None
            }
        };
        let elem = arr.map_or(Ty::Error, |a| self.var(a).ty);
        self.scopes.push();
        let id = self.declare(var, elem, VarKind::LoopVar);
        let body = self.block(body);
        self.scopes.pop();
        match arr {
            Some(array) => (StmtKind::ForArray { var: id, array, body }, vec![id]),
            None => (StmtKind::Return(Vec::new()), Vec::new()),
        }
    }

    fn for_select(&mut self, var: &ast::Name, select: &ast::Select, body: &[ast::Stmt]) -> (StmtKind, Vec<VarId>) {
        if let Some((_, first)) = self.scopes.lookup(&var.text) {
            self.diags.err(var.span, format!("variable '{}' is already declared (line {})", var.text, first.line));
        }
        let Some((mut scan, names)) = self.scan_for_loop(select) else {
            self.block(body);
            return (StmtKind::Return(Vec::new()), Vec::new());
        };
        self.scopes.push();
        let mut columns = Vec::new();
        for (&pos, name) in scan.columns.iter().zip(&names) {
            let ty = self.tables.get(&scan.table.name).map_or(Ty::Error, |s| Ty::from_column(s.columns[pos].ty));
            let id = self.new_var(&format!("{}.{name}", var.text), ty, false, VarKind::RowColumn { column: pos });
            columns.push((name.clone(), id));
        }
        scan.into = columns.iter().map(|(_, id)| *id).collect();
        let mut defs = scan.into.clone();
        defs.push(self.found);
        self.scopes.bind(&var.text, Binding::Row { table: scan.table.name.clone(), columns }, var.span);
        let body = self.block(body);
        self.scopes.pop();
        (StmtKind::ForScan { scan, body }, defs)
    }

    fn return_stmt(&mut self, values: &[ast::Expr], span: Span) -> StmtKind {
        if values.len() > RETURN_VALUES_MAX {
            self.diags.err(span, format!("a return has at most {RETURN_VALUES_MAX} values"));
        }
        StmtKind::Return(values.iter().map(|v| self.expr(v)).collect())
    }
}
