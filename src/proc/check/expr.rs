//! Expressions: name resolution, typing, and the explicit int-to-float conversions the IR needs
//! (so that at run time every operator sees operands of one type).

use super::super::ast::{self, ArithOp, CmpOp, ExprKind as A};
use super::super::ir::{BinOp, Expr, ExprKind, Func, Ty, UnOp, VarId};
use super::super::lexer::Span;
use super::ProcChecker;
use super::scope::Binding;
use crate::storage::Value;

/// The placeholder for an expression that had an error.
pub(super) fn error_expr() -> Expr {
    Expr { ty: Ty::Error, kind: ExprKind::Const(Value::Null) }
}

fn konst(ty: Ty, v: Value) -> Expr {
    Expr { ty, kind: ExprKind::Const(v) }
}

fn is_numeric(t: Ty) -> bool {
    matches!(t, Ty::Int | Ty::Float | Ty::Null | Ty::Error)
}

/// Whether a value of type `from` may be used where `to` is wanted (possibly after int→float).
pub(super) fn assignable(from: Ty, to: Ty) -> bool {
    from == to || matches!(from, Ty::Null | Ty::Error) || to == Ty::Error || (from == Ty::Int && to == Ty::Float)
}

impl ProcChecker<'_> {
    /// Checks an expression.
    pub(super) fn expr(&mut self, e: &ast::Expr) -> Expr {
        match &e.kind {
            A::Int(v) => konst(Ty::Int, Value::Int(*v)),
            A::Float(v) => konst(Ty::Float, Value::Float(*v)),
            A::Str(s) => konst(Ty::Text, Value::text(s)),
            A::Bytes(b) => konst(Ty::Bytes, Value::bytes(b)),
            A::Bool(b) => konst(Ty::Bool, Value::Bool(*b)),
            A::Null => konst(Ty::Null, Value::Null),
            A::Name(n) => self.name_expr(n),
            A::Field(base, col) => self.field(base, col),
            A::Index(base, index) => self.index(base, index, e.span),
            A::Neg(inner) => self.negate(inner),
            A::Not(inner) => {
                let x = self.expr(inner);
                let x = self.want(x, Ty::Bool, inner.span, "'not' needs a bool operand");
                Expr { ty: Ty::Bool, kind: ExprKind::Unary(UnOp::Not, Box::new(x)) }
            }
            A::Binary(op, a, b) => self.binary(*op, a, b, e.span),
            A::Compare(op, a, b) => self.compare(*op, a, b, e.span),
            A::IsNull(inner, negated) => {
                let x = self.expr(inner);
                Expr { ty: Ty::Bool, kind: ExprKind::IsNull { expr: Box::new(x), negated: *negated } }
            }
            A::Call(name, args) => self.call(name, args),
        }
    }

    /// Converts `e` to type `target`, reporting `message` (plus the found type) if it cannot be.
    pub(super) fn want(&mut self, e: Expr, target: Ty, span: Span, message: &str) -> Expr {
        if !assignable(e.ty, target) {
            self.diags.err(span, format!("type mismatch: {message}, found {}", e.ty));
            return error_expr();
        }
        convert(e, target)
    }

    fn name_expr(&mut self, n: &ast::Name) -> Expr {
        if let Some(schema) = &self.update_row
            && let Some(pos) = schema.column_position(&n.text)
        {
            return Expr { ty: Ty::from_column(schema.columns[pos].ty), kind: ExprKind::Column(pos) };
        }
        if n.text == "found" {
            return Expr { ty: Ty::Bool, kind: ExprKind::Var(self.found) };
        }
        match self.scopes.lookup(&n.text) {
            Some((Binding::Var(id), _)) => {
                let id = *id;
                let v = self.var(id);
                if v.array {
                    self.diags
                        .err(n.span, format!("array '{}' can only be indexed, looped over or passed to len()", n.text));
                    return error_expr();
                }
                Expr { ty: v.ty, kind: ExprKind::Var(id) }
            }
            Some((Binding::Row { .. }, _)) => {
                self.diags.err(n.span, format!("row variable '{}' must be used as {}.column", n.text, n.text));
                error_expr()
            }
            None if self.scopes.is_retired_row(&n.text) => {
                self.diags.err(n.span, format!("row variable '{}' is used outside its loop", n.text));
                error_expr()
            }
            None => {
                self.diags.err(n.span, format!("unknown variable '{}'", n.text));
                error_expr()
            }
        }
    }

    fn field(&mut self, base: &ast::Name, col: &ast::Name) -> Expr {
        let found = match self.scopes.lookup(&base.text) {
            Some((Binding::Row { table, columns }, _)) => {
                let hit = columns.iter().find(|(c, _)| *c == col.text).map(|(_, id)| *id);
                Ok(hit.ok_or_else(|| self.missing_field(table, col)))
            }
            Some((Binding::Var(_), _)) => Err(format!("'{}' is not a row variable", base.text)),
            None if self.scopes.is_retired_row(&base.text) => {
                Err(format!("row variable '{}' is used outside its loop", base.text))
            }
            None => Err(format!("unknown row variable '{}'", base.text)),
        };
        match found {
            Ok(Ok(id)) => Expr { ty: self.var(id).ty, kind: ExprKind::Var(id) },
            Ok(Err(msg)) => {
                self.diags.err(col.span, msg);
                error_expr()
            }
            Err(msg) => {
                self.diags.err(base.span, msg);
                error_expr()
            }
        }
    }

    fn missing_field(&self, table: &str, col: &ast::Name) -> String {
        let exists = self.tables.get(table).is_some_and(|s| s.column_position(&col.text).is_some());
        if exists {
            format!("column '{}' is not selected by the loop's select", col.text)
        } else {
            format!("unknown column '{}' in table {table}", col.text)
        }
    }

    /// The array variable a name refers to, reporting if it is not one.
    fn array_var(&mut self, e: &ast::Expr) -> Option<VarId> {
        if let A::Name(n) = &e.kind
            && let Some((Binding::Var(id), _)) = self.scopes.lookup(&n.text)
            && self.var(*id).array
        {
            return Some(*id);
        }
        None
    }

    fn index(&mut self, base: &ast::Expr, index: &ast::Expr, span: Span) -> Expr {
        let Some(array) = self.array_var(base) else {
            self.diags.err(span, "only an array can be indexed");
            return error_expr();
        };
        let i = self.expr(index);
        let i = self.want(i, Ty::Int, index.span, "an array index must be int");
        Expr { ty: self.var(array).ty, kind: ExprKind::ArrayGet(array, Box::new(i)) }
    }

    fn negate(&mut self, inner: &ast::Expr) -> Expr {
        let x = self.expr(inner);
        if !is_numeric(x.ty) {
            self.diags.err(inner.span, format!("type mismatch: cannot negate {}", x.ty));
            return error_expr();
        }
        Expr { ty: x.ty, kind: ExprKind::Unary(UnOp::Neg, Box::new(x)) }
    }

    fn binary(&mut self, op: ArithOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> Expr {
        let (x, y) = (self.expr(a), self.expr(b));
        let (bin, verb) = match op {
            ArithOp::Add => (BinOp::Add, "add"),
            ArithOp::Sub => (BinOp::Sub, "subtract"),
            ArithOp::Mul => (BinOp::Mul, "multiply"),
            ArithOp::Div => (BinOp::Div, "divide"),
            ArithOp::Rem => (BinOp::Rem, "take the remainder of"),
            ArithOp::Concat => (BinOp::Concat, "concatenate"),
            ArithOp::And => (BinOp::And, "'and'"),
            ArithOp::Or => (BinOp::Or, "'or'"),
        };
        let ty = match op {
            ArithOp::And | ArithOp::Or => {
                let ok = [x.ty, y.ty].iter().all(|t| matches!(t, Ty::Bool | Ty::Null | Ty::Error));
                ok.then_some(Ty::Bool)
            }
            ArithOp::Concat => common(x.ty, y.ty).filter(|t| matches!(t, Ty::Text | Ty::Bytes | Ty::Null | Ty::Error)),
            _ => common(x.ty, y.ty).filter(|t| is_numeric(*t)),
        };
        let Some(ty) = ty else {
            let msg = match op {
                ArithOp::And | ArithOp::Or => {
                    format!("type mismatch: {verb} needs bool operands, found {} and {}", x.ty, y.ty)
                }
                _ => format!("type mismatch: cannot {verb} {} and {}", x.ty, y.ty),
            };
            self.diags.err(span, msg);
            return error_expr();
        };
        Expr { ty, kind: ExprKind::Binary(bin, Box::new(convert(x, ty)), Box::new(convert(y, ty))) }
    }

    fn compare(&mut self, op: CmpOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> Expr {
        let (x, y) = (self.expr(a), self.expr(b));
        let Some(ty) = common(x.ty, y.ty) else {
            self.diags.err(span, format!("type mismatch: cannot compare {} and {}", x.ty, y.ty));
            return error_expr();
        };
        let bin = match op {
            CmpOp::Eq => BinOp::Eq,
            CmpOp::Ne => BinOp::Ne,
            CmpOp::Lt => BinOp::Lt,
            CmpOp::Le => BinOp::Le,
            CmpOp::Gt => BinOp::Gt,
            CmpOp::Ge => BinOp::Ge,
        };
        Expr { ty: Ty::Bool, kind: ExprKind::Binary(bin, Box::new(convert(x, ty)), Box::new(convert(y, ty))) }
    }

    fn call(&mut self, name: &ast::Name, args: &[ast::Expr]) -> Expr {
        let (func, arity): (Func, &[usize]) = match name.text.as_str() {
            "len" => (Func::Len, &[1]),
            "abs" => (Func::Abs, &[1]),
            "min" => (Func::Min, &[]),
            "max" => (Func::Max, &[]),
            "int" => (Func::ToInt, &[1]),
            "float" => (Func::ToFloat, &[1]),
            "text" => (Func::ToText, &[1]),
            "substr" => (Func::Substr, &[3]),
            other => {
                self.diags.err(name.span, format!("unknown function '{other}'"));
                return error_expr();
            }
        };
        let arity_ok = if arity.is_empty() { args.len() >= 2 } else { arity.contains(&args.len()) };
        if !arity_ok {
            let wanted =
                if arity.is_empty() { "at least 2 arguments".to_string() } else { format!("{} argument(s)", arity[0]) };
            self.diags.err(name.span, format!("function {} takes {wanted}, got {}", name.text, args.len()));
            return error_expr();
        }
        if func == Func::Len
            && let Some(array) = self.array_var(&args[0])
        {
            return Expr { ty: Ty::Int, kind: ExprKind::ArrayLen(array) };
        }
        let checked: Vec<Expr> = args.iter().map(|a| self.expr(a)).collect();
        self.typed_call(func, name, checked, args)
    }

    /// Types a call whose arguments are checked: the allowed argument types and the result type.
    fn typed_call(&mut self, func: Func, name: &ast::Name, mut xs: Vec<Expr>, args: &[ast::Expr]) -> Expr {
        let t0 = xs[0].ty;
        let result = match func {
            Func::Len => matches!(t0, Ty::Text | Ty::Bytes | Ty::Null | Ty::Error).then_some(Ty::Int),
            Func::Abs => is_numeric(t0).then_some(t0),
            Func::ToInt => {
                matches!(t0, Ty::Int | Ty::Float | Ty::Text | Ty::Bool | Ty::Null | Ty::Error).then_some(Ty::Int)
            }
            Func::ToFloat => matches!(t0, Ty::Int | Ty::Float | Ty::Text | Ty::Null | Ty::Error).then_some(Ty::Float),
            Func::ToText => {
                matches!(t0, Ty::Int | Ty::Float | Ty::Text | Ty::Bool | Ty::Null | Ty::Error).then_some(Ty::Text)
            }
            Func::Min | Func::Max => {
                let ty = xs.iter().try_fold(Ty::Null, |acc, x| common(acc, x.ty));
                ty.filter(|t| *t != Ty::Bool)
            }
            Func::Substr => {
                let spans: Vec<Span> = args.iter().map(|a| a.span).collect();
                let s = std::mem::replace(&mut xs[0], error_expr());
                xs[0] = self.want(s, Ty::Text, spans[0], "substr needs text as its first argument");
                for i in 1..3 {
                    let x = std::mem::replace(&mut xs[i], error_expr());
                    xs[i] = self.want(x, Ty::Int, spans[i], "substr needs int start and length");
                }
                Some(Ty::Text)
            }
        };
        let Some(ty) = result else {
            let types: Vec<&str> = xs.iter().map(|x| x.ty.name()).collect();
            self.diags.err(name.span, format!("type mismatch: {} cannot take ({})", name.text, types.join(", ")));
            return error_expr();
        };
        if matches!(func, Func::Min | Func::Max) {
            xs = xs.into_iter().map(|x| convert(x, ty)).collect();
        }
        Expr { ty, kind: ExprKind::Call(func, xs) }
    }
}

/// The type two operands share: equal types, int with float (float), or anything with null.
fn common(a: Ty, b: Ty) -> Option<Ty> {
    match (a, b) {
        (Ty::Error, _) | (_, Ty::Error) => Some(Ty::Error),
        (Ty::Null, t) | (t, Ty::Null) => Some(t),
        (Ty::Int, Ty::Float) | (Ty::Float, Ty::Int) => Some(Ty::Float),
        (x, y) if x == y => Some(x),
        _ => None,
    }
}

/// Converts an expression already known to be assignable to `target`.
pub(super) fn convert(e: Expr, target: Ty) -> Expr {
    match (e.ty, target) {
        (Ty::Int, Ty::Float) => Expr { ty: Ty::Float, kind: ExprKind::Call(Func::ToFloat, vec![e]) },
        (Ty::Null, t) => Expr { ty: t, kind: e.kind },
        _ => e,
    }
}
