//! The human-readable report of `lazarus analyze`.

use super::graph::GlobalDependencyGraph;
use super::slice::LocalDependencyGraph;
use super::{OpId, ProcedureAnalysis, StaticAnalysis};
use std::fmt::Write;

/// The whole analysis as text: per procedure its operations, dependencies and slices, then the
/// blocks of the global dependency graph with their edges.
pub fn describe(analysis: &StaticAnalysis) -> String {
    let mut out = String::new();
    for p in analysis.graph.procedures() {
        procedure(&mut out, &p.analysis, "logged");
        if p.slicing.slices != p.analysis.local.slices {
            out.push_str("  slices after Algorithm 2 (slices sharing a block merged):\n");
            slices(&mut out, &p.slicing);
        }
    }
    for a in &analysis.read_only {
        procedure(&mut out, a, "read-only: not logged, left out of the global graph");
    }
    for (name, e) in &analysis.fallback {
        let _ = writeln!(out, "procedure {name}: cannot be analyzed, its calls fall back to data logging: {e}\n");
    }
    blocks(&mut out, &analysis.graph);
    out
}

fn procedure(out: &mut String, a: &ProcedureAnalysis, status: &str) {
    let _ = writeln!(out, "procedure {} ({} operations, {status})", a.name, a.ops.len());
    out.push_str("  operations:\n");
    for (i, o) in a.ops.iter().enumerate() {
        let _ = writeln!(out, "    o{i:<3} line {:<4} {:<6} {}", o.line, o.kind_name(), o.table);
    }
    out.push_str("  flow dependencies (q <- p: q is flow-dependent on p):\n");
    for q in 0..a.ops.len() {
        let on = a.flow.on(OpId(q as u32));
        if !on.is_empty() {
            let _ = writeln!(out, "    o{q} <- {}", ops(on));
        }
    }
    out.push_str("  data dependencies (same table, at least one write):\n");
    for (p, q) in a.data.pairs() {
        let _ = writeln!(out, "    o{} -- o{} ({})", p.0, q.0, a.ops[p.index()].table);
    }
    out.push_str("  slices (Algorithm 1):\n");
    slices(out, &a.local);
}

fn slices(out: &mut String, g: &LocalDependencyGraph) {
    for (i, s) in g.slices.iter().enumerate() {
        let _ = writeln!(out, "    S{i} = {{{}}}", ops(&s.ops));
    }
    let edges: Vec<String> = g.edges.iter().map(|(a, b)| format!("S{} -> S{}", a.0, b.0)).collect();
    let _ = writeln!(out, "    edges: {}\n", if edges.is_empty() { "none".to_string() } else { edges.join(", ") });
}

fn ops(list: &[OpId]) -> String {
    list.iter().map(|o| format!("o{}", o.0)).collect::<Vec<_>>().join(" ")
}

fn blocks(out: &mut String, g: &GlobalDependencyGraph) {
    let _ = writeln!(out, "global dependency graph (Algorithm 2): {} blocks", g.blocks().len());
    for b in g.blocks() {
        let mut members: Vec<String> = b
            .pieces
            .0
            .iter()
            .map(|r| {
                let p = &g.procedures()[r.procedure.0 as usize];
                let tables: std::collections::BTreeSet<&str> =
                    p.slices()[r.slice.index()].ops.iter().map(|o| p.analysis.ops[o.index()].table.as_str()).collect();
                format!("{}.S{} [{}]", p.name(), r.slice.0, tables.into_iter().collect::<Vec<_>>().join(" "))
            })
            .collect();
        members.extend(b.ad_hoc_tables.iter().map(|t| format!("ad-hoc writes to {t}")));
        let _ = writeln!(out, "  B{} = {{{}}}", b.id.0, members.join(", "));
    }
    let edges: Vec<String> = g.edges().iter().map(|(a, b)| format!("B{} -> B{}", a.0, b.0)).collect();
    let _ = writeln!(out, "  edges: {}", if edges.is_empty() { "none".to_string() } else { edges.join(", ") });
    let order: Vec<String> = g.topological_order().iter().map(|b| format!("B{}", b.0)).collect();
    let _ = writeln!(out, "  topological order: {}", order.join(" "));
}
