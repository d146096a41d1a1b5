//! Expressions to closures. Variables are frame slots and constants are captured, so evaluating
//! a compiled expression does no lookups. The common integer cases (`x + 1`, `i < n`) get
//! closures that skip the generic operator dispatch; everything else calls [`ops`], the same
//! code the interpreter uses.

use super::super::ir::{BinOp, Expr, ExprKind, Ty};
use super::super::ops::{self, RtResult};
use super::super::runtime::Frame;
use crate::storage::Value;

/// A compiled expression.
pub(crate) type ExprFn = Box<dyn Fn(&Frame) -> RtResult<Value> + Send + Sync>;

/// Compiles an expression: typed ([`super::typed`]) where all of it is ints and comparisons of
/// ints with an operator inside an operator, else generic.
pub(crate) fn expr(e: &Expr) -> ExprFn {
    super::typed::compile(e, || generic(e)).unwrap_or_else(|| generic(e))
}

/// Compiles an expression to closures that pass [`Value`]s.
fn generic(e: &Expr) -> ExprFn {
    match &e.kind {
        ExprKind::Const(v) => {
            let v = v.clone();
            Box::new(move |_| Ok(v.clone_inline()))
        }
        ExprKind::Var(v) => {
            let slot = v.index();
            Box::new(move |f| Ok(f.vals[slot].clone_inline()))
        }
        ExprKind::Column(p) => {
            let p = *p;
            Box::new(move |f| Ok(column(f, p)))
        }
        ExprKind::ArrayLen(a) => {
            let slot = a.index();
            Box::new(move |f| Ok(Value::Int(f.array(slot).len() as i64)))
        }
        ExprKind::ArrayGet(a, i) => {
            let (slot, i) = (a.index(), expr(i));
            Box::new(move |f| ops::array_get(f.array(slot), &i(f)?))
        }
        ExprKind::Unary(op, x) => {
            let (op, x) = (*op, expr(x));
            Box::new(move |f| ops::unary(op, &x(f)?))
        }
        ExprKind::Binary(op, a, b) => binary(*op, a, b),
        ExprKind::IsNull { expr: x, negated } => {
            let (x, negated) = (expr(x), *negated);
            Box::new(move |f| Ok(Value::Bool(x(f)?.is_null() != negated)))
        }
        ExprKind::Call(func, args) => {
            let func = *func;
            let mut args: Vec<ExprFn> = args.iter().map(expr).collect();
            // One argument (`int(..)`, `float(..)`, `abs(..)`, `len(..)`: nearly every call) is
            // passed on the stack; a vector of the arguments was an allocation per call.
            if args.len() == 1
                && let Some(arg) = args.pop()
            {
                return Box::new(move |f| ops::call(func, std::slice::from_ref(&arg(f)?)));
            }
            Box::new(move |f| {
                let vals = args.iter().map(|a| a(f)).collect::<RtResult<Vec<_>>>()?;
                ops::call(func, &vals)
            })
        }
    }
}

/// Column `p` of the row an `update`'s `set` reads (null without one, or past its end).
#[inline]
fn column(f: &Frame, p: usize) -> Value {
    f.row.as_ref().and_then(|r| r.value(p)).unwrap_or(Value::Null)
}

pub(super) fn is_arith(op: BinOp) -> bool {
    matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem)
}

pub(super) fn is_compare(op: BinOp) -> bool {
    matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
}

/// The integer fast path, falling back to the generic operator for nulls.
fn int_op(op: BinOp, x: &Value, y: &Value) -> RtResult<Value> {
    match (x, y) {
        (Value::Int(a), Value::Int(b)) if is_arith(op) => ops::int_arith(op, *a, *b).map(Value::Int),
        (Value::Int(a), Value::Int(b)) => Ok(Value::Bool(ops::cmp_result(op, Some(a.cmp(b))))),
        _ => ops::binary(op, x, y),
    }
}

fn binary(op: BinOp, a: &Expr, b: &Expr) -> ExprFn {
    if matches!(op, BinOp::And | BinOp::Or) {
        let (x, y) = (expr(a), expr(b));
        return Box::new(move |f| {
            let l = x(f)?;
            match ops::logic_short_circuit(op, &l) {
                Some(v) => Ok(v),
                None => Ok(ops::logic(op, &l, &y(f)?)),
            }
        });
    }
    let ints = a.ty == Ty::Int && b.ty == Ty::Int && (is_arith(op) || is_compare(op));
    if ints {
        // `var op const`: read the slot in place, no clone of the operand.
        if let (ExprKind::Var(v), ExprKind::Const(c)) = (&a.kind, &b.kind) {
            let (slot, c) = (v.index(), c.clone());
            return Box::new(move |f| int_op(op, &f.vals[slot], &c));
        }
        // `var op var`, and an update's `column op var` / `column op const` (`s_ytd + qty`,
        // `s_order_cnt + 1`): operands read where they lie, no closure per operand.
        match (&a.kind, &b.kind) {
            (ExprKind::Var(x), ExprKind::Var(y)) => {
                let (x, y) = (x.index(), y.index());
                return Box::new(move |f| int_op(op, &f.vals[x], &f.vals[y]));
            }
            (ExprKind::Column(p), ExprKind::Var(v)) => {
                let (p, slot) = (*p, v.index());
                return Box::new(move |f| int_op(op, &column(f, p), &f.vals[slot]));
            }
            (ExprKind::Column(p), ExprKind::Const(c)) => {
                let (p, c) = (*p, c.clone());
                return Box::new(move |f| int_op(op, &column(f, p), &c));
            }
            _ => {}
        }
        let (x, y) = (expr(a), expr(b));
        return Box::new(move |f| int_op(op, &x(f)?, &y(f)?));
    }
    let (x, y) = (expr(a), expr(b));
    Box::new(move |f| ops::binary(op, &x(f)?, &y(f)?))
}
