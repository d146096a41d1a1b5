//! Procedure slices and the local dependency graph (PACMAN §4.1.1, Algorithm 1).
//!
//! Algorithm 1 in three steps, each done at once rather than pair by pair: merge the operations of
//! every table some operation writes (a union-find over data dependencies), draw the edges that
//! flow dependencies induce between the merged groups, and merge every strongly connected component
//! ("break cycles": two slices that reach each other). The condensation of a graph is acyclic, so
//! one pass suffices. The same machinery (`partition`) builds blocks in [`super::graph`].

use super::flow::FlowDependencies;
use super::{OpId, Operation};

/// A slice's index in its procedure's list of slices. Slices are numbered in the program order of
/// their first operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SliceId(pub u32);

impl SliceId {
    /// The index as a `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A procedure slice: a set of the procedure's operations, in program order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Its operations (indexes into the procedure's operations), in program order.
    pub ops: Vec<OpId>,
    /// The IR statements of those operations, in program order.
    pub stmts: Vec<crate::proc::ir::StmtId>,
}

/// The local dependency graph of one procedure: its slices and the flow edges between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalDependencyGraph {
    /// The slices.
    pub slices: Vec<Slice>,
    /// `slice_of[op]`: the slice holding each operation.
    pub slice_of: Vec<SliceId>,
    /// `(s_i, s_j)`: an operation of `s_j` is flow-dependent on one of `s_i`. Sorted, no duplicates,
    /// no self-edges; acyclic.
    pub edges: Vec<(SliceId, SliceId)>,
}

impl LocalDependencyGraph {
    /// Algorithm 1 over a procedure's operations and their flow dependencies.
    pub fn build(ops: &[Operation], flow: &FlowDependencies) -> LocalDependencyGraph {
        let mut merge = Vec::new();
        for table_ops in groups_by_table(ops.iter().map(|o| (o.table.as_str(), o.writes()))) {
            merge.extend(table_ops.windows(2).map(|w| (w[0], w[1])));
        }
        let edges: Vec<(usize, usize)> = flow.pairs().iter().map(|&(p, q)| (p.index(), q.index())).collect();
        let comp = partition(ops.len(), &merge, &edges);
        Self::from_partition(ops, flow, &comp)
    }

    /// The graph whose slices are the classes of `comp` (a class per operation, numbered in the
    /// program order of first members). The classes must induce an acyclic graph.
    pub fn from_partition(ops: &[Operation], flow: &FlowDependencies, comp: &[usize]) -> LocalDependencyGraph {
        let count = comp.iter().map(|&c| c + 1).max().unwrap_or(0);
        let mut slices = vec![Slice { ops: Vec::new(), stmts: Vec::new() }; count];
        for (i, &c) in comp.iter().enumerate() {
            slices[c].ops.push(OpId(i as u32));
            slices[c].stmts.push(ops[i].stmt);
        }
        let mut edges: Vec<(SliceId, SliceId)> = flow
            .pairs()
            .iter()
            .map(|&(p, q)| (SliceId(comp[p.index()] as u32), SliceId(comp[q.index()] as u32)))
            .filter(|(a, b)| a != b)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        assert!(slices.iter().all(|s| !s.ops.is_empty()), "classes are numbered densely");
        let slice_of = comp.iter().map(|&c| SliceId(c as u32)).collect();
        let graph = LocalDependencyGraph { slices, slice_of, edges };
        assert!(
            topological_order(count, graph.edges.iter().map(|&(a, b)| (a.index(), b.index()))).is_some(),
            "a local dependency graph is acyclic"
        );
        graph
    }

    /// The slices with an edge into `s`.
    pub fn parents(&self, s: SliceId) -> impl Iterator<Item = SliceId> + '_ {
        self.edges.iter().filter(move |e| e.1 == s).map(|e| e.0)
    }
}

/// For every table written by one of `accesses` (table, writes), the indexes of all accesses to it:
/// each group is mutually data-dependent as a whole (a write is data-dependent with every access).
pub(super) fn groups_by_table<'a>(accesses: impl Iterator<Item = (&'a str, bool)>) -> Vec<Vec<usize>> {
    let mut by_table: std::collections::BTreeMap<&str, (bool, Vec<usize>)> = Default::default();
    for (i, (table, writes)) in accesses.enumerate() {
        let entry = by_table.entry(table).or_default();
        entry.0 |= writes;
        entry.1.push(i);
    }
    by_table.into_values().filter(|(written, _)| *written).map(|(_, members)| members).collect()
}

/// Partitions nodes `0..n`: unites each pair in `merge`, then every strongly connected component of
/// the graph that `edges` induce between the unions. Returns each node's class; classes are
/// numbered in the order of their smallest node.
pub(super) fn partition(n: usize, merge: &[(usize, usize)], edges: &[(usize, usize)]) -> Vec<usize> {
    let mut uf = UnionFind::new(n);
    for &(a, b) in merge {
        uf.union(a, b);
    }
    let group: Vec<usize> = (0..n).map(|i| uf.find(i)).collect();
    let group_edges: Vec<(usize, usize)> =
        edges.iter().map(|&(a, b)| (group[a], group[b])).filter(|(a, b)| a != b).collect();
    let scc = strongly_connected(n, &group_edges);
    renumber(&(0..n).map(|i| scc[group[i]]).collect::<Vec<_>>())
}

/// Renames classes so that they are numbered in the order of their smallest member.
fn renumber(class: &[usize]) -> Vec<usize> {
    let mut names = std::collections::HashMap::new();
    class
        .iter()
        .map(|c| {
            let next = names.len();
            *names.entry(*c).or_insert(next)
        })
        .collect()
}

struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind { parent: (0..n).collect() }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        // The smaller root wins, so a class is named by its first member.
        if ra < rb {
            self.parent[rb] = ra;
        } else {
            self.parent[ra] = rb;
        }
    }
}

/// Kosaraju's algorithm, iterative: the component of each node of `0..n`.
fn strongly_connected(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut out_adj = vec![Vec::new(); n];
    let mut in_adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        out_adj[a].push(b);
        in_adj[b].push(a);
    }
    let mut finished = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    for root in 0..n {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some((node, next)) = stack.pop() {
            if let Some(&child) = out_adj[node].get(next) {
                stack.push((node, next + 1));
                if !seen[child] {
                    seen[child] = true;
                    stack.push((child, 0));
                }
            } else {
                finished.push(node);
            }
        }
    }
    let mut comp = vec![usize::MAX; n];
    for &root in finished.iter().rev() {
        if comp[root] != usize::MAX {
            continue;
        }
        comp[root] = root;
        let mut stack = vec![root];
        while let Some(node) = stack.pop() {
            for &parent in &in_adj[node] {
                if comp[parent] == usize::MAX {
                    comp[parent] = root;
                    stack.push(parent);
                }
            }
        }
    }
    comp
}

/// A topological order of nodes `0..n` (Kahn's algorithm, smallest ready node first), or `None`
/// if the graph has a cycle.
pub fn topological_order(n: usize, edges: impl Iterator<Item = (usize, usize)>) -> Option<Vec<usize>> {
    topological_order_by(n, edges, |i| i)
}

/// As [`topological_order`], taking the ready node with the smallest `key` first.
pub(super) fn topological_order_by<K: Ord>(
    n: usize,
    edges: impl Iterator<Item = (usize, usize)>,
    key: impl Fn(usize) -> K,
) -> Option<Vec<usize>> {
    let mut out_adj = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for (a, b) in edges {
        out_adj[a].push(b);
        indegree[b] += 1;
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<(K, usize)>> =
        (0..n).filter(|&i| indegree[i] == 0).map(|i| std::cmp::Reverse((key(i), i))).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse((_, node))) = ready.pop() {
        order.push(node);
        for &child in &out_adj[node] {
            indegree[child] -= 1;
            if indegree[child] == 0 {
                ready.push(std::cmp::Reverse((key(child), child)));
            }
        }
    }
    (order.len() == n).then_some(order)
}
