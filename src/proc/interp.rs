//! The reference interpreter: executes the IR by walking it directly, looking tables up by name
//! at every operation. It is slow and obviously faithful to the IR; the property test checks that
//! the closure compiler ([`super::compile`]) agrees with it on random programs.

use super::ir::{Expr, ExprKind, Procedure, ScanOp, Stmt, StmtKind};
use super::ops::{self, RtResult};
use super::runtime::{self, Flow, Frame, ScanArgs, error_at};
use crate::storage::{ParamValue, Row, TableId, Value};
use crate::txn::{Transaction, TxnError};

/// Runs `p` inside `tx` with `args`.
pub fn run(p: &Procedure, tx: &mut Transaction<'_>, args: &[ParamValue]) -> Result<Vec<Value>, TxnError> {
    let mut frame = runtime::bind_args(p, args)?;
    let mut it = Interp { p, tx };
    match it.block(&p.body, &mut frame)? {
        Flow::Return(values) => Ok(values),
        Flow::Next => Ok(Vec::new()),
    }
}

struct Interp<'p, 't, 'w> {
    p: &'p Procedure,
    tx: &'t mut Transaction<'w>,
}

impl Interp<'_, '_, '_> {
    fn block(&mut self, stmts: &[Stmt], f: &mut Frame) -> Result<Flow, TxnError> {
        for s in stmts {
            if let Flow::Return(v) = self.stmt(s, f)? {
                return Ok(Flow::Return(v));
            }
        }
        Ok(Flow::Next)
    }

    /// Runs `body` once per item, after `bind` puts the item in the frame; counts iterations.
    fn repeat<T>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        f: &mut Frame,
        body: &[Stmt],
        at: &dyn Fn(String) -> TxnError,
        bind: impl Fn(&mut Frame, T),
    ) -> Result<Flow, TxnError> {
        for item in items {
            f.tick().map_err(at)?;
            bind(f, item);
            if let Flow::Return(v) = self.block(body, f)? {
                return Ok(Flow::Return(v));
            }
        }
        Ok(Flow::Next)
    }

    fn table_id(&self, name: &str) -> Result<TableId, TxnError> {
        self.tx.table_id(name)
    }

    fn stmt(&mut self, s: &Stmt, f: &mut Frame) -> Result<Flow, TxnError> {
        let at = |m: String| error_at(&self.p.name, s.line, s.col, m);
        let eval = |e: &Expr, f: &Frame| eval(e, f).map_err(at);
        match &s.kind {
            StmtKind::Assign { var, value } => f.vals[var.index()] = eval(value, f)?,
            StmtKind::If { cond, then, otherwise } => {
                let branch = if ops::truth(&eval(cond, f)?) { then } else { otherwise };
                return self.block(branch, f);
            }
            StmtKind::ForRange { var, start, end, body } => {
                let (Value::Int(a), Value::Int(b)) = (eval(start, f)?, eval(end, f)?) else {
                    return Err(at("a range bound is null".into()));
                };
                let items = (a..b).map(Value::Int);
                return self.repeat(items, f, body, &at, |f, i| f.vals[var.index()] = i);
            }
            StmtKind::ForArray { var, array, body } => {
                let items: Vec<Value> = f.array(array.index()).to_vec();
                return self.repeat(items, f, body, &at, |f, x| f.vals[var.index()] = x);
            }
            StmtKind::ForScan { scan, body } => {
                let rows = self.scan(scan, f, usize::MAX).map_err(|e| e.map_rt(at))?;
                f.vals[self.p.found.index()] = Value::Bool(!rows.is_empty());
                return self.repeat(rows, f, body, &at, |f, row| set_columns(f, scan, Some(&row)));
            }
            StmtKind::Get(g) => {
                let key = g.key.iter().map(|e| eval(e, f)).collect::<Result<Vec<_>, _>>()?;
                let table = self.table_id(&g.table.name)?;
                let row = runtime::get(self.tx, table, &key)?;
                f.vals[self.p.found.index()] = Value::Bool(row.is_some());
                for (&v, x) in g.into.iter().zip(runtime::columns_of(row.as_ref(), &g.columns)) {
                    f.vals[v.index()] = x;
                }
            }
            StmtKind::ScanAll(scan) => {
                let rows = self.scan(scan, f, usize::MAX).map_err(|e| e.map_rt(at))?;
                f.vals[self.p.found.index()] = Value::Bool(!rows.is_empty());
                f.set_array_column(scan.into[0].index(), scan.columns[0], &rows);
            }
            StmtKind::ScanFirst(scan) => {
                let rows = self.scan(scan, f, 1).map_err(|e| e.map_rt(at))?;
                f.vals[self.p.found.index()] = Value::Bool(!rows.is_empty());
                set_columns(f, scan, rows.first());
            }
            StmtKind::Insert(i) => {
                let row = i.values.iter().map(|e| eval(e, f)).collect::<Result<Vec<_>, _>>()?;
                let table = self.table_id(&i.table.name)?;
                runtime::insert(self.tx, table, Row::new(row))?;
            }
            StmtKind::Update(u) => {
                let table = self.table_id(&u.table.name)?;
                let key = u.key.iter().map(|e| eval(e, f)).collect::<Result<Vec<_>, _>>()?;
                let updated = runtime::update(self.tx, table, &key, |old| {
                    f.row = Some(old.clone());
                    let mut new = old.to_vec();
                    let values = u.sets.iter().map(|(_, e)| eval(e, f)).collect::<Result<Vec<_>, _>>();
                    f.row = None;
                    for ((p, _), v) in u.sets.iter().zip(values?) {
                        new[*p] = v;
                    }
                    Ok(Row::new(new))
                })?;
                f.vals[self.p.found.index()] = Value::Bool(updated);
            }
            StmtKind::Delete(d) => {
                let key = d.key.iter().map(|e| eval(e, f)).collect::<Result<Vec<_>, _>>()?;
                let table = self.table_id(&d.table.name)?;
                let deleted = runtime::delete(self.tx, table, &key)?;
                f.vals[self.p.found.index()] = Value::Bool(deleted);
            }
            StmtKind::Return(values) => {
                return Ok(Flow::Return(values.iter().map(|e| eval(e, f)).collect::<Result<_, _>>()?));
            }
            StmtKind::Abort(msg) => {
                let m = eval(msg, f)?;
                return Err(TxnError::UserAbort(m.as_text().map_or_else(|| m.to_string(), str::to_string)));
            }
        }
        Ok(Flow::Next)
    }

    fn scan(&mut self, s: &ScanOp, f: &Frame, cap: usize) -> Result<Vec<Row>, ScanError> {
        let prefix = s.prefix.iter().map(|e| eval(e, f)).collect::<RtResult<Vec<_>>>().map_err(ScanError::Rt)?;
        let bound = |b: &Option<super::ir::RangeBound>| -> RtResult<Option<(Value, bool)>> {
            b.as_ref().map(|b| eval(&b.value, f).map(|v| (v, b.inclusive))).transpose()
        };
        let lower = bound(&s.lower).map_err(ScanError::Rt)?;
        let upper = bound(&s.upper).map_err(ScanError::Rt)?;
        let limit = eval(&s.limit, f).map_err(ScanError::Rt)?;
        let table = self.table_id(&s.table.name).map_err(ScanError::Txn)?;
        let args =
            ScanArgs { table, index: s.index, prefix: &prefix, lower, upper, direction: s.direction, limit, cap };
        match runtime::scan(self.tx, args) {
            Ok(Ok(rows)) if s.distinct => Ok(runtime::distinct_rows(rows, &s.columns)),
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(m)) => Err(ScanError::Rt(m)),
            Err(e) => Err(ScanError::Txn(e)),
        }
    }
}

/// A scan failed in an expression (needs a position) or in the engine.
enum ScanError {
    Rt(String),
    Txn(TxnError),
}

impl ScanError {
    fn map_rt(self, at: impl FnOnce(String) -> TxnError) -> TxnError {
        match self {
            ScanError::Rt(m) => at(m),
            ScanError::Txn(e) => e,
        }
    }
}

fn set_columns(f: &mut Frame, scan: &ScanOp, row: Option<&Row>) {
    for (&v, x) in scan.into.iter().zip(runtime::columns_of(row, &scan.columns)) {
        f.vals[v.index()] = x;
    }
}

/// Evaluates an expression.
pub fn eval(e: &Expr, f: &Frame) -> RtResult<Value> {
    match &e.kind {
        ExprKind::Const(v) => Ok(v.clone()),
        ExprKind::Var(v) => Ok(f.vals[v.index()].clone()),
        ExprKind::Column(p) => Ok(f.row.as_ref().and_then(|r| r.value(*p)).unwrap_or(Value::Null)),
        ExprKind::ArrayLen(a) => Ok(Value::Int(f.array(a.index()).len() as i64)),
        ExprKind::ArrayGet(a, i) => ops::array_get(f.array(a.index()), &eval(i, f)?),
        ExprKind::Unary(op, x) => ops::unary(*op, &eval(x, f)?),
        ExprKind::Binary(op, a, b) => {
            let x = eval(a, f)?;
            if let Some(v) = ops::logic_short_circuit(*op, &x) {
                return Ok(v);
            }
            ops::binary(*op, &x, &eval(b, f)?)
        }
        ExprKind::IsNull { expr, negated } => Ok(Value::Bool(eval(expr, f)?.is_null() != *negated)),
        ExprKind::Call(func, args) => {
            let vals = args.iter().map(|a| eval(a, f)).collect::<RtResult<Vec<_>>>()?;
            ops::call(*func, &vals)
        }
    }
}
