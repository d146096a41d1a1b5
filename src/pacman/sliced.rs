//! The body a piece of slice `s` runs: the procedure's IR with what cannot matter to `s` removed,
//! compiled by the language's own compiler ([`crate::proc::CompiledProcedure::compile`]), once per
//! slice when the replay plans are built.
//!
//! A piece needs, of the whole body, the operations of `s` and of its ancestors (roles
//! [`Role::Run`] and [`Role::FeedBack`]) and what they depend on. Removed:
//!
//! - database operations of other slices ([`Role::Skip`]), with a `for ... in select` loop's body;
//! - assignments to variables that no kept statement reads (a fixed point: keeping an assignment
//!   makes the variables it reads needed);
//! - `if` and `for` statements left with nothing to run.
//!
//! Kept whatever they read: `return` and `abort` (they end a run early, as in the logged
//! execution). Statement ids are unchanged, so [`Role`]s still index by them.
//!
//! Why the piece still replays exactly (the argument of [`super::piece`]): a kept operation's
//! inputs and whether it runs flow from operations of its own slice or an ancestor's, through
//! assignments and conditions that read variables those operations define; such an assignment
//! defines a variable a kept statement reads, so it is kept, and so is the `if`/`for` around a
//! kept statement. What is removed computes only values that no kept statement reads. Before this,
//! every piece ran the whole body with the other slices' operations skipped one by one at run time:
//! on TPC-C a call's six pieces cost 2.85× one whole run of it in instructions (callgrind).

use super::piece::Role;
use crate::proc::ir::{Procedure, Stmt, StmtKind};

/// `ir` with what cannot matter to a piece whose statements have `roles` removed (module docs).
pub fn sliced_body(ir: &Procedure, roles: &[Role]) -> Procedure {
    let mut needed = vec![false; ir.vars.len()];
    // Each round marks at least one more variable or ends; bounded by the variable count.
    for _ in 0..=ir.vars.len() {
        if !mark(&ir.body, roles, &mut needed) {
            break;
        }
    }
    Procedure { body: prune(&ir.body, roles, &needed), ..ir.clone() }
}

fn role(roles: &[Role], s: &Stmt) -> Role {
    roles.get(s.id.0 as usize).copied().unwrap_or(Role::Skip)
}

/// Whether `s` stays, given the variables `needed` so far.
fn kept(s: &Stmt, roles: &[Role], needed: &[bool]) -> bool {
    match &s.kind {
        StmtKind::Assign { var, .. } => needed.get(var.index()).copied().unwrap_or(true),
        StmtKind::If { then, otherwise, .. } => then.iter().chain(otherwise).any(|t| kept(t, roles, needed)),
        StmtKind::ForRange { body, .. } | StmtKind::ForArray { body, .. } => {
            body.iter().any(|t| kept(t, roles, needed))
        }
        StmtKind::Return(_) | StmtKind::Abort(_) => true,
        StmtKind::ForScan { .. }
        | StmtKind::Get(_)
        | StmtKind::ScanFirst(_)
        | StmtKind::ScanAll(_)
        | StmtKind::Insert(_)
        | StmtKind::Update(_)
        | StmtKind::Delete(_) => role(roles, s) != Role::Skip,
    }
}

/// Marks the variables kept statements of `block` read; whether any was new.
fn mark(block: &[Stmt], roles: &[Role], needed: &mut [bool]) -> bool {
    let mut changed = false;
    for s in block {
        if !kept(s, roles, needed) {
            continue;
        }
        for u in &s.uses {
            if let Some(n) = needed.get_mut(u.index())
                && !*n
            {
                *n = true;
                changed = true;
            }
        }
        changed |= match &s.kind {
            StmtKind::If { then, otherwise, .. } => mark(then, roles, needed) | mark(otherwise, roles, needed),
            StmtKind::ForRange { body, .. } | StmtKind::ForArray { body, .. } | StmtKind::ForScan { body, .. } => {
                mark(body, roles, needed)
            }
            _ => false,
        };
    }
    changed
}

/// The kept statements of `block`, their bodies pruned the same way.
fn prune(block: &[Stmt], roles: &[Role], needed: &[bool]) -> Vec<Stmt> {
    block
        .iter()
        .filter(|s| kept(s, roles, needed))
        .map(|s| {
            let kind = match &s.kind {
                StmtKind::If { cond, then, otherwise } => StmtKind::If {
                    cond: cond.clone(),
                    then: prune(then, roles, needed),
                    otherwise: prune(otherwise, roles, needed),
                },
                StmtKind::ForRange { var, start, end, body } => StmtKind::ForRange {
                    var: *var,
                    start: start.clone(),
                    end: end.clone(),
                    body: prune(body, roles, needed),
                },
                StmtKind::ForArray { var, array, body } => {
                    StmtKind::ForArray { var: *var, array: *array, body: prune(body, roles, needed) }
                }
                StmtKind::ForScan { scan, body } => {
                    StmtKind::ForScan { scan: scan.clone(), body: prune(body, roles, needed) }
                }
                other => other.clone(),
            };
            // Field by field: `..s.clone()` would deep-clone the old body only to drop it.
            Stmt { id: s.id, line: s.line, col: s.col, kind, defs: s.defs.clone(), uses: s.uses.clone() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::check_source;
    use crate::storage::Catalog;

    const SOURCE: &str = "table a (k int not null, v int, primary key (k));
        table b (k int not null, v int, primary key (k));
        procedure p(k0 int) {
            select v into x from a where k = k0;
            let y = x + 1;
            update a set v = y where k = k0;
            let z = k0 * 2;
            let unused = z + y;
            for i in 0 .. 3 { let w = i; }
            if z > 100 {
                update b set v = z where k = k0;
            }
            if y > 7 { return; }
        }";

    /// The ids of the statements `body` keeps, in pre-order.
    fn ids(body: &[Stmt], out: &mut Vec<u32>) {
        for s in body {
            out.push(s.id.0);
            match &s.kind {
                StmtKind::If { then, otherwise, .. } => {
                    ids(then, out);
                    ids(otherwise, out);
                }
                StmtKind::ForRange { body, .. } | StmtKind::ForArray { body, .. } | StmtKind::ForScan { body, .. } => {
                    ids(body, out)
                }
                _ => {}
            }
        }
    }

    /// The statement whose source text starts with `text`, by id.
    fn id_of(ir: &Procedure, text: &str) -> u32 {
        let mut found = None;
        ir.walk(&mut |s: &Stmt, _| {
            let line = SOURCE.lines().nth(s.line as usize - 1).unwrap_or("").trim();
            if line.starts_with(text) && found.is_none() {
                found = Some(s.id.0);
            }
        });
        found.unwrap_or_else(|| panic!("no statement {text:?}"))
    }

    fn sliced_ids(run: &[&str]) -> (Procedure, Vec<u32>) {
        let module = check_source("t.proc", SOURCE, &Catalog::default()).expect("checks");
        let ir = module.procedures.into_iter().next().expect("one procedure");
        let mut roles = vec![Role::Skip; ir.stmt_count as usize];
        for text in run {
            roles[id_of(&ir, text) as usize] = Role::Run;
        }
        let mut out = Vec::new();
        ids(&sliced_body(&ir, &roles).body, &mut out);
        (ir, out)
    }

    #[test]
    fn a_slice_keeps_its_operations_what_they_read_and_every_return() {
        // The slice of table b: its update, the `if` around it, `z`; `y` and the read of `a`
        // only because the `return` guarded by `y` is kept.
        let (ir, kept) = sliced_ids(&["update b"]);
        let id = |t| id_of(&ir, t);
        let mut expected =
            vec![id("let y"), id("let z"), id("if z > 100"), id("update b"), id("if y > 7"), id("if y > 7") + 1];
        expected.sort_unstable();
        let mut got = kept.clone();
        got.sort_unstable();
        assert_eq!(got, expected, "kept {kept:?}");
        // The skipped read of `a` is gone even though `y` reads `x`: a piece of this slice leaves `x` null.
        assert!(!kept.contains(&id("select v into x")));
        assert!(!kept.contains(&id("let unused")) && !kept.contains(&id("for i in")));
    }

    #[test]
    fn the_slice_of_a_keeps_the_read_the_write_and_their_inputs_only() {
        let (ir, kept) = sliced_ids(&["select v into x", "update a"]);
        let id = |t| id_of(&ir, t);
        for text in ["select v into x", "let y", "update a", "if y > 7"] {
            assert!(kept.contains(&id(text)), "{text} missing from {kept:?}");
        }
        for text in ["let unused", "for i in", "if z > 100"] {
            assert!(!kept.contains(&id(text)), "{text} kept in {kept:?}");
        }
    }
}
