//! The run-time meaning of operators and built-in functions on [`Value`]s, shared by the compiler
//! and the interpreter so that both give the same results and the same error messages.
//!
//! Null rules (SQL's): arithmetic, concatenation, comparisons and functions with a null operand
//! give null; `and`/`or` are three-valued (`false and null` is false, `true or null` is true);
//! conditions treat null as false ([`truth`]). Integer arithmetic is checked: overflow and
//! division by zero are errors, never wrap-around. Float division by zero is an error too.

use super::ir::{BinOp, Func, UnOp};
use super::limits::VALUE_BYTES_MAX;
use crate::storage::Value;
use std::cmp::Ordering;

/// A run-time error message (the caller adds the procedure name and position).
pub type RtResult<T> = Result<T, String>;

/// Whether a condition value counts as true: only `true` does; `false` and null do not.
pub fn truth(v: &Value) -> bool {
    matches!(v, Value::Bool(true))
}

/// A unary operator.
pub fn unary(op: UnOp, v: &Value) -> RtResult<Value> {
    Ok(match (op, v) {
        (_, Value::Null) => Value::Null,
        (UnOp::Neg, Value::Int(i)) => Value::Int(i.checked_neg().ok_or("integer overflow in unary -")?),
        (UnOp::Neg, Value::Float(f)) => Value::Float(-f),
        (UnOp::Not, Value::Bool(b)) => Value::Bool(!b),
        (op, v) => return Err(format!("cannot apply {op:?} to {v}")),
    })
}

/// For `and`/`or`: the result if the left operand alone decides it (short circuit).
pub fn logic_short_circuit(op: BinOp, left: &Value) -> Option<Value> {
    match (op, left) {
        (BinOp::And, Value::Bool(false)) => Some(Value::Bool(false)),
        (BinOp::Or, Value::Bool(true)) => Some(Value::Bool(true)),
        _ => None,
    }
}

/// `and`/`or` of two operands when the left did not decide it.
pub fn logic(op: BinOp, left: &Value, right: &Value) -> Value {
    if let Some(v) = logic_short_circuit(op, left) {
        return v;
    }
    match (op, right) {
        (BinOp::And, Value::Bool(false)) => Value::Bool(false),
        (BinOp::Or, Value::Bool(true)) => Value::Bool(true),
        _ if left.is_null() || right.is_null() => Value::Null,
        // Both are bools that did not decide: `true and true` / `false or false`.
        (_, r) => r.clone(),
    }
}

/// A binary operator other than `and`/`or`.
pub fn binary(op: BinOp, a: &Value, b: &Value) -> RtResult<Value> {
    if matches!(op, BinOp::And | BinOp::Or) {
        return Ok(logic(op, a, b));
    }
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => arith(op, a, b),
        BinOp::Concat => concat(a, b),
        _ => Ok(compare(op, a, b)),
    }
}

/// Checked integer arithmetic.
pub fn int_arith(op: BinOp, x: i64, y: i64) -> RtResult<i64> {
    let r = match op {
        BinOp::Add => x.checked_add(y),
        BinOp::Sub => x.checked_sub(y),
        BinOp::Mul => x.checked_mul(y),
        BinOp::Div | BinOp::Rem if y == 0 => return Err("division by zero".into()),
        BinOp::Div => x.checked_div(y),
        BinOp::Rem => x.checked_rem(y),
        _ => return Err(format!("{} is not arithmetic", op.symbol())),
    };
    r.ok_or_else(|| format!("integer overflow in {x} {} {y}", op.symbol()))
}

fn float_arith(op: BinOp, x: f64, y: f64) -> RtResult<f64> {
    Ok(match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div | BinOp::Rem if y == 0.0 => return Err("division by zero".into()),
        BinOp::Div => x / y,
        BinOp::Rem => x % y,
        _ => return Err(format!("{} is not arithmetic", op.symbol())),
    })
}

fn arith(op: BinOp, a: &Value, b: &Value) -> RtResult<Value> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => int_arith(op, *x, *y).map(Value::Int),
        _ => match (a.as_float(), b.as_float()) {
            (Some(x), Some(y)) => float_arith(op, x, y).map(Value::Float),
            _ => Err(format!("cannot apply {} to {a} and {b}", op.symbol())),
        },
    }
}

fn concat(a: &Value, b: &Value) -> RtResult<Value> {
    let (Some(x), Some(y)) = (a.as_bytes(), b.as_bytes()) else {
        return Err(format!("cannot concatenate {a} and {b}"));
    };
    if x.len() + y.len() > VALUE_BYTES_MAX {
        return Err(format!("concatenation would be {} bytes; the limit is {VALUE_BYTES_MAX}", x.len() + y.len()));
    }
    Ok(match (a, b) {
        // Sized once and copied: `format_compact!` went through the formatter, ≈ 500
        // instructions a concatenation (`docs/PERFORMANCE.md`, "TPC-C", "Session 63").
        (Value::Text(x), Value::Text(y)) => {
            let mut joined = compact_str::CompactString::with_capacity(x.len() + y.len());
            joined.push_str(x);
            joined.push_str(y);
            Value::Text(joined)
        }
        _ => Value::bytes(&[x, y].concat()),
    })
}

/// A comparison of two non-null values of one type. Floats compare as IEEE numbers (a NaN is
/// unequal to everything, itself included); int against float promotes the int.
pub fn compare(op: BinOp, a: &Value, b: &Value) -> Value {
    let ord = match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
            a.as_float().zip(b.as_float()).and_then(|(x, y)| x.partial_cmp(&y))
        }
        (Value::Null, _) | (_, Value::Null) => return Value::Null,
        _ => Some(a.total_cmp(b)),
    };
    Value::Bool(cmp_result(op, ord))
}

/// Whether an ordering satisfies a comparison operator (`None`: unordered, i.e. NaN).
pub fn cmp_result(op: BinOp, ord: Option<Ordering>) -> bool {
    match ord {
        None => op == BinOp::Ne,
        Some(o) => match op {
            BinOp::Eq => o == Ordering::Equal,
            BinOp::Ne => o != Ordering::Equal,
            BinOp::Lt => o == Ordering::Less,
            BinOp::Le => o != Ordering::Greater,
            BinOp::Gt => o == Ordering::Greater,
            BinOp::Ge => o != Ordering::Less,
            _ => false,
        },
    }
}

/// A built-in function. Any null argument gives null.
pub fn call(func: Func, args: &[Value]) -> RtResult<Value> {
    if args.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    match (func, args) {
        (Func::Len, [Value::Text(s)]) => Ok(Value::Int(s.chars().count() as i64)),
        (Func::Len, [b @ (Value::Bytes(_) | Value::InlineBytes(_))]) => {
            Ok(Value::Int(b.as_bytes().map_or(0, <[u8]>::len) as i64))
        }
        (Func::Abs, [Value::Int(i)]) => {
            i.checked_abs().map(Value::Int).ok_or_else(|| format!("integer overflow in abs({i})"))
        }
        (Func::Abs, [Value::Float(f)]) => Ok(Value::Float(f.abs())),
        (Func::Min | Func::Max, [first, rest @ ..]) => Ok(min_max(func, first, rest)),
        (Func::ToInt, [v]) => to_int(v),
        (Func::ToFloat, [v]) => to_float(v),
        (Func::ToText, [v]) => to_text(v),
        (Func::Substr, [Value::Text(s), Value::Int(start), Value::Int(len)]) => substr(s, *start, *len),
        _ => Err(format!("{} cannot take these arguments", func.name())),
    }
}

fn min_max(func: Func, first: &Value, rest: &[Value]) -> Value {
    let want = if func == Func::Min { BinOp::Lt } else { BinOp::Gt };
    let mut best = first;
    for v in rest {
        if truth(&compare(want, v, best)) {
            best = v;
        }
    }
    best.clone()
}

fn to_int(v: &Value) -> RtResult<Value> {
    let bad = || format!("cannot convert {v} to int");
    match v {
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Bool(b) => Ok(Value::Int(i64::from(*b))),
        // The range check keeps `as` from saturating silently.
        Value::Float(f) if f.is_finite() && *f >= -9.223_372_036_854_776e18 && *f < 9.223_372_036_854_776e18 => {
            Ok(Value::Int(f.trunc() as i64))
        }
        Value::Text(s) => s.trim().parse::<i64>().map(Value::Int).map_err(|_| bad()),
        _ => Err(bad()),
    }
}

fn to_float(v: &Value) -> RtResult<Value> {
    match v {
        Value::Int(i) => Ok(Value::Float(*i as f64)),
        Value::Float(f) => Ok(Value::Float(*f)),
        Value::Text(s) => s.trim().parse::<f64>().map(Value::Float).map_err(|_| format!("cannot convert {v} to float")),
        _ => Err(format!("cannot convert {v} to float")),
    }
}

fn to_text(v: &Value) -> RtResult<Value> {
    Ok(match v {
        Value::Int(i) => Value::text(&i.to_string()),
        Value::Float(f) => Value::text(&format!("{f:?}")),
        Value::Bool(b) => Value::text(if *b { "true" } else { "false" }),
        Value::Text(s) => Value::Text(s.clone()),
        _ => return Err(format!("cannot convert {v} to text")),
    })
}

fn substr(s: &str, start: i64, len: i64) -> RtResult<Value> {
    if start < 0 || len < 0 {
        return Err(format!("substr start and length must not be negative, got {start} and {len}"));
    }
    // The characters' byte range, sliced once: no `String` built a character at a time.
    let byte_at = |text: &str, chars: i64| {
        let chars = usize::try_from(chars).unwrap_or(usize::MAX);
        text.char_indices().nth(chars).map_or(text.len(), |(i, _)| i)
    };
    let begin = byte_at(s, start);
    let end = begin + byte_at(&s[begin..], len);
    Ok(Value::text(&s[begin..end]))
}

/// `array[index]`: 0-based; null index gives null; out of range is an error.
pub fn array_get(array: &[Value], index: &Value) -> RtResult<Value> {
    match index {
        Value::Null => Ok(Value::Null),
        Value::Int(i) => usize::try_from(*i)
            .ok()
            .and_then(|i| array.get(i))
            .map(Value::clone_inline)
            .ok_or_else(|| format!("array index {i} out of range (length {})", array.len())),
        v => Err(format!("array index must be an int, got {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `substr` counts characters, not bytes, and `||` joins texts of any length: both against
    /// the character-by-character definitions, on ASCII and multi-byte text, at and past the ends.
    #[test]
    fn substr_and_concat_agree_with_their_definitions() {
        let texts = ["", "abc", "héllo wörld", "日本語のテキスト", &"x".repeat(40)];
        for s in texts {
            for start in [0, 1, 2, 5, 39, 40, 100, i64::MAX] {
                for len in [0, 1, 3, 24, 500, i64::MAX] {
                    let expected: String = s.chars().skip(start as usize).take(len as usize).collect();
                    assert_eq!(substr(s, start, len), Ok(Value::text(&expected)), "substr({s:?}, {start}, {len})");
                }
            }
            for t in texts {
                let joined = concat(&Value::text(s), &Value::text(t));
                assert_eq!(joined, Ok(Value::text(&format!("{s}{t}"))), "{s:?} || {t:?}");
            }
        }
        assert!(substr("abc", -1, 1).is_err());
        assert!(substr("abc", 0, -1).is_err());
    }

    #[test]
    fn null_and_three_valued_logic() {
        assert_eq!(binary(BinOp::Add, &Value::Int(1), &Value::Null), Ok(Value::Null));
        assert_eq!(logic(BinOp::And, &Value::Null, &Value::Bool(false)), Value::Bool(false));
        assert_eq!(logic(BinOp::Or, &Value::Null, &Value::Bool(true)), Value::Bool(true));
        assert_eq!(logic(BinOp::And, &Value::Null, &Value::Bool(true)), Value::Null);
        assert_eq!(logic(BinOp::And, &Value::Bool(true), &Value::Bool(true)), Value::Bool(true));
        assert!(!truth(&Value::Null));
    }

    #[test]
    fn checked_arithmetic() {
        assert!(binary(BinOp::Add, &Value::Int(i64::MAX), &Value::Int(1)).unwrap_err().contains("overflow"));
        assert_eq!(binary(BinOp::Div, &Value::Int(1), &Value::Int(0)), Err("division by zero".into()));
        assert!(binary(BinOp::Div, &Value::Int(i64::MIN), &Value::Int(-1)).is_err());
        assert_eq!(binary(BinOp::Rem, &Value::Int(-7), &Value::Int(3)), Ok(Value::Int(-1)));
    }

    #[test]
    fn functions() {
        assert_eq!(call(Func::Substr, &[Value::text("hello"), Value::Int(1), Value::Int(3)]), Ok(Value::text("ell")));
        assert_eq!(call(Func::ToInt, &[Value::Float(-2.7)]), Ok(Value::Int(-2)));
        assert!(call(Func::ToInt, &[Value::Float(1e300)]).is_err());
        assert_eq!(call(Func::ToText, &[Value::Float(1.0)]), Ok(Value::text("1.0")));
        assert_eq!(call(Func::Max, &[Value::Int(3), Value::Int(9), Value::Int(4)]), Ok(Value::Int(9)));
        assert_eq!(array_get(&[Value::Int(1)], &Value::Int(1)), Err("array index 1 out of range (length 1)".into()));
    }
}
