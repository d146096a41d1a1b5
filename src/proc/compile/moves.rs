//! Which variable reads may move the value out of the frame instead of copying it.
//!
//! A compiled `insert` builds its row from its value expressions; when a value is a plain
//! variable, the closure would clone it out of the frame. If that read is the variable's only
//! read in the whole procedure and it is not inside a loop, nothing can read the variable after
//! it, so the closure may take the value and leave null behind. Replay plans (`src/replay/`) are
//! exactly this shape — every parameter read once, no loops — and moving is what lets compiled
//! replay build a row with no copy per column (issue 8; docs/replay.md). An `update` whose key
//! parts and `set` values all move, and which sets every non-key column (a replay plan of an
//! after-image), builds its whole new row the same way and replaces the old row without reading
//! it (`Storage::replace_row`).
//!
//! Soundness: a read outside every loop runs at most once per call, and a variable with one read
//! is never read again in that call. A later call starts from freshly bound parameters, and a
//! local cannot be read before its `let` (the checker's scoping), so the null left behind is never
//! observed.

use super::super::ir::{Procedure, Stmt, StmtKind};

/// One flag per variable of `proc`: whether its only read may move the value.
pub(crate) fn movable_vars(proc: &Procedure) -> Vec<bool> {
    let mut reads = vec![0u32; proc.vars.len()];
    let mut pinned = vec![false; proc.vars.len()];
    count_reads(&proc.body, false, &mut reads, &mut pinned);
    reads.iter().zip(&pinned).map(|(&n, &pin)| n == 1 && !pin).collect()
}

fn count_reads(block: &[Stmt], in_loop: bool, reads: &mut [u32], pinned: &mut [bool]) {
    for s in block {
        let mut vars = Vec::new();
        s.kind.header_exprs(&mut |e| e.collect_vars(&mut vars));
        if let StmtKind::ForArray { array, .. } = &s.kind {
            vars.push(*array);
        }
        for v in vars {
            reads[v.index()] += 1;
            pinned[v.index()] |= in_loop;
        }
        let body_loops = in_loop
            || matches!(s.kind, StmtKind::ForRange { .. } | StmtKind::ForArray { .. } | StmtKind::ForScan { .. });
        for child in s.children() {
            count_reads(child, body_loops, reads, pinned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::table::Catalog;

    fn movable(src: &str) -> Vec<(String, bool)> {
        let catalog = Catalog::default();
        let module = crate::proc::check_source("<test>", src, &catalog).expect("checks");
        let proc = &module.procedures[0];
        let flags = movable_vars(proc);
        proc.vars.iter().zip(flags).map(|(v, m)| (v.name.clone(), m)).collect()
    }

    fn flag(vars: &[(String, bool)], name: &str) -> bool {
        vars.iter().find(|(n, _)| n == name).map(|(_, m)| *m).expect("variable exists")
    }

    #[test]
    fn a_single_read_outside_loops_moves_and_others_copy() {
        let vars = movable(
            "procedure p(a int, b int, c int, n int) {
                let x = a + 1;
                let y = b;
                let z = b;
                for i in 0 .. n { let w = c; }
                return x, y, z;
            }",
        );
        assert!(flag(&vars, "a"), "a is read once, outside loops");
        assert!(!flag(&vars, "b"), "b is read twice");
        assert!(!flag(&vars, "c"), "c is read inside a loop");
        assert!(flag(&vars, "n"), "a loop bound is read once, before the loop runs");
        assert!(flag(&vars, "x") && flag(&vars, "y") && flag(&vars, "z"));
    }
}
