//! Graphviz output of a global dependency graph, drawn as the paper draws Figures 5c and 21: each
//! slice a solid box listing its operations, the slices of one block inside a dashed cluster, and
//! one arrow per block edge (cluster to cluster). The file is plain Graphviz `dot` text; render it
//! with `dot -Tsvg FILE.dot`.

use super::graph::GlobalDependencyGraph;
use std::fmt::Write;

/// The first line of every file: names the format and its version (docs/FORMAT.md).
pub const HEADER: &str = "// lazarus global dependency graph, format 1\n";

/// The graph as Graphviz `dot` text.
pub fn to_dot(graph: &GlobalDependencyGraph) -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    out.push_str("digraph global_dependency_graph {\n  compound=true;\n  rankdir=TB;\n");
    out.push_str("  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
    let mut anchor = Vec::with_capacity(graph.blocks().len());
    for block in graph.blocks() {
        let b = block.id.0;
        let _ = writeln!(out, "  subgraph cluster_b{b} {{\n    style=dashed;\n    label=\"B{b}\";");
        let mut first = None;
        for piece in &block.pieces.0 {
            let proc = &graph.procedures()[piece.procedure.0 as usize];
            let node = format!("p{}_s{}", piece.procedure.0, piece.slice.0);
            let mut label = format!("{} S{}", proc.name(), piece.slice.0);
            for &op in &proc.slices()[piece.slice.index()].ops {
                let o = &proc.analysis.ops[op.index()];
                let _ = write!(label, "\\l{}: {} {}", o.line, o.kind_name(), o.table);
            }
            let _ = writeln!(out, "    {node} [label=\"{}\\l\"];", escape(&label));
            first.get_or_insert(node);
        }
        for (t, table) in block.ad_hoc_tables.iter().enumerate() {
            let node = format!("adhoc_b{b}_{t}");
            let _ = writeln!(out, "    {node} [label=\"ad-hoc writes: {}\", style=dotted];", escape(table));
            first.get_or_insert(node);
        }
        out.push_str("  }\n");
        anchor.push(first.unwrap_or_else(|| format!("empty_b{b}")));
    }
    for &(from, to) in graph.edges() {
        let _ = writeln!(
            out,
            "  {} -> {} [ltail=cluster_b{}, lhead=cluster_b{}];",
            anchor[from.index()],
            anchor[to.index()],
            from.0,
            to.0
        );
    }
    out.push_str("}\n");
    out
}

/// Escapes a label for a double-quoted dot string (keeping the `\l` line breaks we put in).
fn escape(s: &str) -> String {
    s.replace('"', "\\\"")
}
