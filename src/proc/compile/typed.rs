//! Typed integer expressions: an expression of ints and int comparisons evaluated as `i64`s and
//! `bool`s, without a [`Value`] per node.
//!
//! The generic closures of [`super::expr`] return a `Value` from every node and match its tag at
//! the next one: TPC-C's stock update `s_quantity - qty + 91 * int(s_quantity < qty + 10)` made
//! eight closures, each returning a `Result<Value, String>` through memory (a set expression
//! cost ≈ 350 instructions, `docs/PERFORMANCE.md`, "TPC-C", "Session 43"). Here an operator's
//! operands that are leaves (a constant, a variable, an updated row's column) are read in place,
//! an inner operator is one closure, and every node returns a 16-byte `Result<Option<i64>, _>`
//! (null is `None`) in registers.
//!
//! # Same results as the generic closures
//!
//! Each node computes what the generic one does on ints: [`ops::int_arith`] for arithmetic (its
//! error messages too), [`ops::cmp_result`] for comparisons, null from any null operand, both
//! operands evaluated (left first) before either is looked at, so the first error is the same
//! one. The checker gives every expression a static type that its value has at run time, or
//! null; a leaf that meets another type anyway stops the typed evaluation ([`Halt::Untyped`])
//! and the caller evaluates the generic closure instead, which expressions, having no effects,
//! allow.

use super::super::ir::{BinOp, Expr, ExprKind, Func, Ty, UnOp};
use super::super::ops::{self, RtResult};
use super::super::runtime::{Frame, INT_KEY_PARTS_MAX};
use super::expr::{ExprFn, is_arith, is_compare};
use crate::storage::{Value, ValueRef};

/// Why a typed evaluation gave no value.
enum Halt {
    /// A value not of the static type: the caller evaluates the generic closure.
    Untyped,
    /// A runtime error, with the generic closure's message.
    Error(String),
}

/// A typed node's outcome: a value, null (`None`), or a halt (boxed, so that the whole is two
/// words and returns in registers; only errors allocate).
type Typed<T> = Result<Option<T>, Box<Halt>>;

type TypedFn<T> = Box<dyn Fn(&Frame) -> Typed<T> + Send + Sync>;
type IntFn = TypedFn<i64>;
type BoolFn = TypedFn<bool>;

/// An int operand, read in place when it is a leaf.
enum IntArg {
    Const(i64),
    Var(usize),
    Column(usize),
    Expr(IntFn),
}

impl IntArg {
    #[inline]
    fn eval(&self, f: &Frame) -> Typed<i64> {
        match self {
            IntArg::Const(c) => Ok(Some(*c)),
            IntArg::Var(slot) => match &f.vals[*slot] {
                Value::Int(i) => Ok(Some(*i)),
                Value::Null => Ok(None),
                _ => Err(Box::new(Halt::Untyped)),
            },
            // As the generic `column`: null without a row, or past its end.
            IntArg::Column(p) => match f.row.as_ref().and_then(|r| r.get(*p)) {
                Some(ValueRef::Int(i)) => Ok(Some(i)),
                None | Some(ValueRef::Null) => Ok(None),
                Some(_) => Err(Box::new(Halt::Untyped)),
            },
            IntArg::Expr(g) => g(f),
        }
    }
}

fn error(message: String) -> Box<Halt> {
    Box::new(Halt::Error(message))
}

/// The typed closure of `e` wrapped to return a `Value`, for an int or bool expression with at
/// least one operator whose operand is itself an operator (a single operator on leaves has its
/// own closures in [`super::expr`]); `generic` builds the fallback. `None`: not such an
/// expression, or not all of it is typed.
pub(super) fn compile(e: &Expr, generic: impl FnOnce() -> ExprFn) -> Option<ExprFn> {
    if !has_inner_operator(e) {
        return None;
    }
    match e.ty {
        Ty::Int => match int_arg(e)? {
            IntArg::Expr(typed) => Some(wrap(typed, generic(), Value::Int)),
            _ => None,
        },
        Ty::Bool => Some(wrap(compare(e)?, generic(), Value::Bool)),
        _ => None,
    }
}

/// `typed` returning a [`Value`] (`to_value`, or null), and `generic`'s value where it halts
/// on an untyped value.
fn wrap<T: 'static>(typed: TypedFn<T>, generic: ExprFn, to_value: fn(T) -> Value) -> ExprFn {
    Box::new(move |f| match typed(f) {
        Ok(v) => Ok(v.map_or(Value::Null, to_value)),
        Err(halt) => resume(*halt, &generic, f),
    })
}

fn resume(halt: Halt, generic: &ExprFn, f: &Frame) -> RtResult<Value> {
    match halt {
        Halt::Error(message) => Err(message),
        Halt::Untyped => generic(f),
    }
}

/// Whether some operand of `e`'s operator (or function) is itself an operator or call.
fn has_inner_operator(e: &Expr) -> bool {
    let inner = |x: &Expr| matches!(x.kind, ExprKind::Binary(..) | ExprKind::Unary(..) | ExprKind::Call(..));
    match &e.kind {
        ExprKind::Binary(_, a, b) => inner(a) || inner(b),
        ExprKind::Unary(_, x) => inner(x),
        ExprKind::Call(_, args) => args.iter().any(inner),
        _ => false,
    }
}

/// A primary key whose parts are all typed int expressions (every TPC-C key), evaluated into
/// `i64`s for [`Storage::get_row_ints`](super::super::runtime::Storage::get_row_ints): no `Value` a part through a generic closure, no buffer
/// of values to drop, and the key encoded from the ints. The parts are evaluated in order, as
/// the generic closures are, so the first error is theirs.
pub(super) struct IntKey(Vec<IntArg>);

/// What evaluating an [`IntKey`] gave.
pub(super) enum IntKeyValue {
    /// Every part: the first `n` of the array.
    Ints([i64; INT_KEY_PARTS_MAX], usize),
    /// Some part is null: no row has the key.
    Null,
    /// A part met a value not of its static type: evaluate the generic closures instead.
    Untyped,
    /// A runtime error, with the generic closures' message.
    Error(String),
}

impl IntKey {
    /// `key`'s parts as typed ints; `None` if one is not all typed or there are more than
    /// [`INT_KEY_PARTS_MAX`].
    pub(super) fn of(key: &[Expr]) -> Option<IntKey> {
        if key.is_empty() || key.len() > INT_KEY_PARTS_MAX {
            return None;
        }
        key.iter().map(int_arg).collect::<Option<Vec<_>>>().map(IntKey)
    }

    #[inline]
    pub(super) fn eval(&self, f: &Frame) -> IntKeyValue {
        let mut ints = [0; INT_KEY_PARTS_MAX];
        let mut null = false;
        for (out, part) in ints.iter_mut().zip(&self.0) {
            match part.eval(f) {
                Ok(Some(i)) => *out = i,
                Ok(None) => null = true,
                Err(halt) => {
                    return match *halt {
                        Halt::Untyped => IntKeyValue::Untyped,
                        Halt::Error(message) => IntKeyValue::Error(message),
                    };
                }
            }
        }
        if null { IntKeyValue::Null } else { IntKeyValue::Ints(ints, self.0.len()) }
    }
}

/// `e` as a typed int operand, if all of it is typed.
fn int_arg(e: &Expr) -> Option<IntArg> {
    if e.ty != Ty::Int {
        return None;
    }
    Some(match &e.kind {
        ExprKind::Const(Value::Int(c)) => IntArg::Const(*c),
        ExprKind::Var(v) => IntArg::Var(v.index()),
        ExprKind::Column(p) => IntArg::Column(*p),
        ExprKind::Unary(UnOp::Neg, x) => {
            let x = int_arg(x)?;
            IntArg::Expr(Box::new(move |f| match x.eval(f)? {
                Some(i) => i.checked_neg().map(Some).ok_or_else(|| error("integer overflow in unary -".into())),
                None => Ok(None),
            }))
        }
        ExprKind::Binary(op, a, b) if is_arith(*op) => arith(*op, int_arg(a)?, int_arg(b)?),
        ExprKind::Call(Func::ToInt, args) => match args.as_slice() {
            [x] if x.ty == Ty::Int => int_arg(x)?,
            [x] if x.ty == Ty::Bool => {
                let c = compare(x)?;
                IntArg::Expr(Box::new(move |f| Ok(c(f)?.map(i64::from))))
            }
            _ => return None,
        },
        ExprKind::Call(Func::Abs, args) => match args.as_slice() {
            [x] => {
                let x = int_arg(x)?;
                IntArg::Expr(Box::new(move |f| match x.eval(f)? {
                    Some(i) => i.checked_abs().map(Some).ok_or_else(|| error(format!("integer overflow in abs({i})"))),
                    None => Ok(None),
                }))
            }
            _ => return None,
        },
        _ => return None,
    })
}

/// An arithmetic operator on two int operands (a constant right operand, `x + 1`, read as it
/// was captured).
fn arith(op: BinOp, x: IntArg, y: IntArg) -> IntArg {
    let combine = move |l: Option<i64>, r: Option<i64>| match (l, r) {
        (Some(l), Some(r)) => ops::int_arith(op, l, r).map(Some).map_err(error),
        _ => Ok(None),
    };
    IntArg::Expr(match y {
        IntArg::Const(c) => Box::new(move |f| combine(x.eval(f)?, Some(c))),
        y => Box::new(move |f| {
            let l = x.eval(f)?;
            combine(l, y.eval(f)?)
        }),
    })
}

/// A comparison of two typed int operands, if `e` is one.
fn compare(e: &Expr) -> Option<BoolFn> {
    let ExprKind::Binary(op, a, b) = &e.kind else { return None };
    if !is_compare(*op) || a.ty != Ty::Int || b.ty != Ty::Int {
        return None;
    }
    let (op, x, y) = (*op, int_arg(a)?, int_arg(b)?);
    Some(Box::new(move |f| {
        let l = x.eval(f)?;
        Ok(match (l, y.eval(f)?) {
            (Some(l), Some(r)) => Some(ops::cmp_result(op, Some(l.cmp(&r)))),
            _ => None,
        })
    }))
}

// Two words: returned in registers (the point of boxing the halt).
const _: () = assert!(std::mem::size_of::<Typed<i64>>() == 16);
