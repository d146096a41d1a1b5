//! An `if` / `else if` chain that compares one integer variable with distinct integer constants
//! compiles to a table of its arms.
//!
//! `if d = 1 { .. } else if d = 2 { .. } ... else { .. }` (TPC-C's new-order picks the stock row's
//! `s_dist_NN` column by district this way, ten arms an order line) ran one comparison closure,
//! and one `if` closure, per arm it tried: five and a half of each on average for ten arms. Here it
//! reads the variable once and finds its arm by one index (or a binary search, for constants too
//! far apart to index), then runs that arm's block.
//!
//! # Why it cannot change a result
//!
//! A condition `v = k` of an int variable and an int constant has no effect and cannot fail: it is
//! true exactly when `v` holds the int `k`, and null (false) when `v` is null. The constants are
//! distinct, so at most one arm's condition holds, and the chain runs that arm, or its final
//! `else` when none does — what trying them in order runs. A chain with a repeated constant (whose
//! later arm cannot run) is left to the plain `if`.

use super::super::ir::{BinOp, Expr, ExprKind, Stmt, StmtKind, Ty, VarId};
use crate::storage::Value;

/// The fewest arms compiled to a table (below it, the comparisons cost no more than the lookup).
pub(super) const ARMS_MIN: usize = 3;
/// The widest span of constants indexed directly (wider spans search sorted arms).
const DENSE_SPAN_MAX: u64 = 256;

/// An `if` / `else if` chain over one int variable.
pub(super) struct Chain<'a> {
    /// The variable every condition compares.
    pub(super) var: VarId,
    /// Each arm's constant and block, in the chain's order.
    pub(super) arms: Vec<(i64, &'a [Stmt])>,
    /// The final `else` (empty when there is none).
    pub(super) otherwise: &'a [Stmt],
}

/// The chain `s` starts, if it is one of at least [`ARMS_MIN`] arms with distinct constants.
pub(super) fn chain(s: &Stmt) -> Option<Chain<'_>> {
    let StmtKind::If { cond, then, otherwise } = &s.kind else { return None };
    let (var, first) = compares(cond)?;
    let mut arms = vec![(first, then.as_slice())];
    let mut rest = otherwise.as_slice();
    while let [next] = rest
        && let StmtKind::If { cond, then, otherwise } = &next.kind
        && let Some((v, k)) = compares(cond)
        && v == var
    {
        if arms.iter().any(|(seen, _)| *seen == k) {
            return None;
        }
        arms.push((k, then.as_slice()));
        rest = otherwise.as_slice();
    }
    (arms.len() >= ARMS_MIN).then_some(Chain { var, arms, otherwise: rest })
}

/// `(v, k)` when `cond` is `v = k` or `k = v` for an int variable `v` and an int constant `k`.
fn compares(cond: &Expr) -> Option<(VarId, i64)> {
    let ExprKind::Binary(BinOp::Eq, a, b) = &cond.kind else { return None };
    match (&a.kind, &b.kind) {
        (ExprKind::Var(v), ExprKind::Const(Value::Int(k))) | (ExprKind::Const(Value::Int(k)), ExprKind::Var(v))
            if a.ty == Ty::Int && b.ty == Ty::Int =>
        {
            Some((*v, *k))
        }
        _ => None,
    }
}

/// Finds the arm of a constant.
pub(super) enum Arms {
    /// Arm `table[k - min]`, for constants within [`DENSE_SPAN_MAX`] of each other.
    Dense { min: i64, table: Vec<Option<usize>> },
    /// `(constant, arm)` sorted by constant.
    Sorted(Vec<(i64, usize)>),
}

impl Arms {
    /// The lookup for `constants` (distinct), arm `i` for `constants[i]`.
    pub(super) fn new(constants: &[i64]) -> Arms {
        let (Some(&min), Some(&max)) = (constants.iter().min(), constants.iter().max()) else {
            return Arms::Sorted(Vec::new());
        };
        let span = max.abs_diff(min);
        if span < DENSE_SPAN_MAX {
            let mut table = vec![None; span as usize + 1];
            for (arm, &k) in constants.iter().enumerate() {
                let entry = &mut table[k.abs_diff(min) as usize];
                assert!(entry.is_none(), "the chain's constants are distinct");
                *entry = Some(arm);
            }
            return Arms::Dense { min, table };
        }
        let mut sorted: Vec<(i64, usize)> = constants.iter().enumerate().map(|(arm, &k)| (k, arm)).collect();
        sorted.sort_unstable();
        assert!(sorted.windows(2).all(|w| w[0].0 < w[1].0), "the chain's constants are distinct");
        Arms::Sorted(sorted)
    }

    /// The arm whose constant the variable's value `value` is; `None` for none (or null).
    #[inline]
    pub(super) fn find(&self, value: &Value) -> Option<usize> {
        let Value::Int(x) = *value else { return None };
        match self {
            Arms::Dense { min, table } => {
                let offset = x.checked_sub(*min).and_then(|d| usize::try_from(d).ok())?;
                table.get(offset).copied().flatten()
            }
            Arms::Sorted(sorted) => sorted.binary_search_by_key(&x, |&(k, _)| k).ok().map(|i| sorted[i].1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sorted_arms_find_each_constant_and_nothing_else() {
        for constants in [vec![3, 1, 2, 10], vec![-5, 1_000, i64::MAX, i64::MIN, 0]] {
            let arms = Arms::new(&constants);
            assert_eq!(matches!(arms, Arms::Dense { .. }), constants.len() == 4, "{constants:?}");
            for (arm, &k) in constants.iter().enumerate() {
                assert_eq!(arms.find(&Value::Int(k)), Some(arm), "{k}");
            }
            for miss in [4, 9, 11, -1, -4, 999, i64::MAX - 1, i64::MIN + 1] {
                assert_eq!(arms.find(&Value::Int(miss)), None, "{miss}");
            }
            assert_eq!(arms.find(&Value::Null), None);
        }
    }
}
