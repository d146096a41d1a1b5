//! The global dependency graph (PACMAN §4.1.2, Algorithm 2): blocks of slices from every logged
//! procedure, and the edges between blocks.
//!
//! As for slices ([`super::slice`]), each step of Algorithm 2 is done at once: the slices (and
//! ad-hoc tables) touching a table that something writes are united, slice edges become block
//! edges, strongly connected blocks are merged; then the slices of one procedure inside one block
//! are merged into one, which gives each procedure its final slices. Merging slices that already
//! share a block changes no block edge, so the block graph stays acyclic.

use super::slice::{LocalDependencyGraph, Slice, SliceId, groups_by_table, partition, topological_order_by};
use super::{GraphError, ProcedureAnalysis, limits};

/// A procedure's index in [`GlobalDependencyGraph::procedures`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcId(pub u32);

/// A block's index in [`GlobalDependencyGraph::blocks`]; blocks are numbered in topological order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u32);

impl BlockId {
    /// The index as a `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One (final) slice of one procedure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SliceRef {
    /// The procedure.
    pub procedure: ProcId,
    /// The slice, in [`ProcedureSlicing::slices`].
    pub slice: SliceId,
}

/// The template of a block's piece-set: the (procedure, slice) pairs whose pieces a log batch's
/// piece-set for this block holds (§4.2). At most one slice per procedure (Algorithm 2's last step).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PieceSet(pub Vec<SliceRef>);

impl PieceSet {
    /// The slice of `procedure` in this block, if it has one.
    pub fn slice_of(&self, procedure: ProcId) -> Option<SliceId> {
        self.0.iter().find(|r| r.procedure == procedure).map(|r| r.slice)
    }
}

/// A node of the global dependency graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Its id (its position in the topological order).
    pub id: BlockId,
    /// Its slices, sorted by procedure.
    pub pieces: PieceSet,
    /// Tables whose ad-hoc writes are replayed in this block, sorted.
    pub ad_hoc_tables: Vec<String>,
}

/// A logged procedure's part of the graph: its analysis and its final slices.
#[derive(Clone, Debug)]
pub struct ProcedureSlicing {
    /// The intra-procedure analysis (Algorithm 1's slices are in `analysis.local`).
    pub analysis: ProcedureAnalysis,
    /// The slices after Algorithm 2 merged those sharing a block, with their edges.
    pub slicing: LocalDependencyGraph,
    /// `block_of[slice]`: the block of each final slice.
    pub block_of: Vec<BlockId>,
}

impl ProcedureSlicing {
    /// The procedure's name.
    pub fn name(&self) -> &str {
        &self.analysis.name
    }

    /// The final slices, each with its operations in program order.
    pub fn slices(&self) -> &[Slice] {
        &self.slicing.slices
    }
}

/// PACMAN's global dependency graph.
#[derive(Clone, Debug)]
pub struct GlobalDependencyGraph {
    procedures: Vec<ProcedureSlicing>,
    blocks: Vec<Block>,
    edges: Vec<(BlockId, BlockId)>,
}

impl GlobalDependencyGraph {
    /// Algorithm 2 over the analyses of the logged procedures. `ad_hoc_tables` count as written by
    /// one more procedure with a single slice per table.
    pub fn build(
        analyses: Vec<ProcedureAnalysis>,
        ad_hoc_tables: &[&str],
    ) -> Result<GlobalDependencyGraph, GraphError> {
        check_input(&analyses, ad_hoc_tables)?;
        let nodes = Nodes::new(&analyses, ad_hoc_tables);
        let edges = slice_edges(&analyses, &nodes.offsets);
        let class = partition(nodes.total(), &merge_pairs(&analyses, &nodes), &edges);
        let (block_of_node, block_edges) = number_blocks(&analyses, &nodes, &class, &edges);
        Ok(assemble(analyses, &nodes, &block_of_node, block_edges))
    }

    /// The logged procedures, in the order given.
    pub fn procedures(&self) -> &[ProcedureSlicing] {
        &self.procedures
    }

    /// A logged procedure by name.
    pub fn procedure(&self, name: &str) -> Option<(ProcId, &ProcedureSlicing)> {
        self.procedures.iter().enumerate().find(|(_, p)| p.name() == name).map(|(i, p)| (ProcId(i as u32), p))
    }

    /// The blocks, indexed by [`BlockId`].
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// `(b_i, b_j)`: `b_j` depends on `b_i`. Sorted; every edge goes from a smaller to a larger id.
    pub fn edges(&self) -> &[(BlockId, BlockId)] {
        &self.edges
    }

    /// The blocks in a topological order (by construction, `B0, B1, ...`).
    pub fn topological_order(&self) -> Vec<BlockId> {
        (0..self.blocks.len()).map(|i| BlockId(i as u32)).collect()
    }

    /// The blocks that `block` depends on directly.
    pub fn parents(&self, block: BlockId) -> impl Iterator<Item = BlockId> + '_ {
        self.edges.iter().filter(move |e| e.1 == block).map(|e| e.0)
    }

    /// The block where ad-hoc writes to `table` are replayed, if it was named as an ad-hoc table.
    pub fn block_of_ad_hoc_table(&self, table: &str) -> Option<BlockId> {
        self.blocks.iter().find(|b| b.ad_hoc_tables.iter().any(|t| t == table)).map(|b| b.id)
    }

    /// The block of a procedure's final slice.
    pub fn block_of(&self, slice: SliceRef) -> Option<BlockId> {
        self.procedures.get(slice.procedure.0 as usize)?.block_of.get(slice.slice.index()).copied()
    }
}

fn check_input(analyses: &[ProcedureAnalysis], ad_hoc_tables: &[&str]) -> Result<(), GraphError> {
    if analyses.len() > limits::PROCEDURES_MAX {
        return Err(GraphError::TooManyProcedures { count: analyses.len(), limit: limits::PROCEDURES_MAX });
    }
    if ad_hoc_tables.len() > limits::AD_HOC_TABLES_MAX {
        return Err(GraphError::TooManyAdHocTables { count: ad_hoc_tables.len(), limit: limits::AD_HOC_TABLES_MAX });
    }
    let mut names: Vec<&str> = analyses.iter().map(|a| a.name.as_str()).collect();
    names.sort_unstable();
    match names.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(GraphError::DuplicateProcedure(w[0].to_string())),
        None => Ok(()),
    }
}

/// The nodes Algorithm 2 starts from: every slice of every procedure, then one per ad-hoc table.
struct Nodes<'t> {
    /// The first node of each procedure's slices.
    offsets: Vec<usize>,
    /// How many slice nodes there are; ad-hoc table `t` is node `slices + t`.
    slices: usize,
    /// The ad-hoc tables, sorted, without repeats.
    ad_hoc: Vec<&'t str>,
}

impl<'t> Nodes<'t> {
    fn new(analyses: &[ProcedureAnalysis], ad_hoc_tables: &[&'t str]) -> Nodes<'t> {
        let mut offsets = Vec::with_capacity(analyses.len());
        let mut slices = 0;
        for a in analyses {
            offsets.push(slices);
            slices += a.local.slices.len();
        }
        let mut ad_hoc = ad_hoc_tables.to_vec();
        ad_hoc.sort_unstable();
        ad_hoc.dedup();
        Nodes { offsets, slices, ad_hoc }
    }

    fn total(&self) -> usize {
        self.slices + self.ad_hoc.len()
    }
}

/// Numbers the classes of `class` (the blocks) in a topological order of the edges they induce,
/// ties broken by (procedure, program order) so that a figure's order holds. Returns each node's
/// block and the block edges.
fn number_blocks(
    analyses: &[ProcedureAnalysis],
    nodes: &Nodes<'_>,
    class: &[usize],
    edges: &[(usize, usize)],
) -> (Vec<BlockId>, Vec<(BlockId, BlockId)>) {
    let classes = class.iter().map(|&c| c + 1).max().unwrap_or(0);
    let mut key = vec![(usize::MAX, usize::MAX); classes];
    for (p, a) in analyses.iter().enumerate() {
        for (s, slice) in a.local.slices.iter().enumerate() {
            let first = slice.ops.first().map_or(usize::MAX, |o| o.index());
            let k = &mut key[class[nodes.offsets[p] + s]];
            *k = (*k).min((p, first));
        }
    }
    for t in 0..nodes.ad_hoc.len() {
        let k = &mut key[class[nodes.slices + t]];
        *k = (*k).min((usize::MAX, t));
    }
    let class_edges = dedup_edges(edges.iter().map(|&(a, b)| (class[a], class[b])).filter(|(a, b)| a != b));
    let order = topological_order_by(classes, class_edges.iter().copied(), |c| key[c])
        .expect("the condensation of a graph is acyclic");
    let mut position = vec![0; classes];
    for (i, &c) in order.iter().enumerate() {
        position[c] = i;
    }
    let block_of_node = class.iter().map(|&c| BlockId(position[c] as u32)).collect();
    let block_edges = dedup_edges(class_edges.iter().map(|&(a, b)| (position[a], position[b])))
        .into_iter()
        .map(|(a, b)| (BlockId(a as u32), BlockId(b as u32)))
        .collect();
    (block_of_node, block_edges)
}

/// Pairs of nodes holding data-dependent slices (or a slice and an ad-hoc table it touches).
fn merge_pairs(analyses: &[ProcedureAnalysis], nodes: &Nodes<'_>) -> Vec<(usize, usize)> {
    let mut accesses: Vec<(&str, bool, usize)> = Vec::new();
    for (p, a) in analyses.iter().enumerate() {
        for (o, op) in a.ops.iter().enumerate() {
            accesses.push((op.table.as_str(), op.writes(), nodes.offsets[p] + a.local.slice_of[o].index()));
        }
    }
    accesses.extend(nodes.ad_hoc.iter().enumerate().map(|(t, table)| (*table, true, nodes.slices + t)));
    let mut pairs = Vec::new();
    for group in groups_by_table(accesses.iter().map(|&(t, w, _)| (t, w))) {
        pairs.extend(group.windows(2).map(|w| (accesses[w[0]].2, accesses[w[1]].2)));
    }
    pairs
}

fn slice_edges(analyses: &[ProcedureAnalysis], offsets: &[usize]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (p, a) in analyses.iter().enumerate() {
        out.extend(a.local.edges.iter().map(|&(s, t)| (offsets[p] + s.index(), offsets[p] + t.index())));
    }
    out
}

fn dedup_edges(edges: impl Iterator<Item = (usize, usize)>) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = edges.collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Algorithm 2's last step (one slice per procedure and block) and the final structures.
fn assemble(
    analyses: Vec<ProcedureAnalysis>,
    nodes: &Nodes<'_>,
    block_of_node: &[BlockId],
    edges: Vec<(BlockId, BlockId)>,
) -> GlobalDependencyGraph {
    let block_count = block_of_node.iter().map(|b| b.index() + 1).max().unwrap_or(0);
    let mut blocks: Vec<Block> = (0..block_count)
        .map(|i| Block { id: BlockId(i as u32), pieces: PieceSet::default(), ad_hoc_tables: Vec::new() })
        .collect();
    let mut procedures = Vec::with_capacity(analyses.len());
    for (p, analysis) in analyses.into_iter().enumerate() {
        let slicing = merge_slices_per_block(analysis, &block_of_node[nodes.offsets[p]..]);
        for (s, b) in slicing.block_of.iter().enumerate() {
            blocks[b.index()].pieces.0.push(SliceRef { procedure: ProcId(p as u32), slice: SliceId(s as u32) });
        }
        procedures.push(slicing);
    }
    for (t, table) in nodes.ad_hoc.iter().enumerate() {
        blocks[block_of_node[nodes.slices + t].index()].ad_hoc_tables.push(table.to_string());
    }
    for b in &mut blocks {
        b.pieces.0.sort_unstable();
        b.ad_hoc_tables.sort_unstable();
    }
    assert!(edges.iter().all(|(a, b)| a < b), "blocks are numbered in topological order");
    GlobalDependencyGraph { procedures, blocks, edges }
}

/// Algorithm 2's last step for one procedure: its slices that share a block become one.
/// `block_of_local[s]` is the block of its local slice `s`.
fn merge_slices_per_block(analysis: ProcedureAnalysis, block_of_local: &[BlockId]) -> ProcedureSlicing {
    let op_blocks: Vec<BlockId> = analysis.local.slice_of.iter().map(|s| block_of_local[s.index()]).collect();
    let comp = first_seen_numbering(&op_blocks.iter().map(|b| b.index()).collect::<Vec<_>>());
    let slicing = LocalDependencyGraph::from_partition(&analysis.ops, &analysis.flow, &comp);
    let block_of = slicing.slices.iter().map(|s| op_blocks[s.ops[0].index()]).collect();
    ProcedureSlicing { analysis, slicing, block_of }
}

/// Renames values to 0, 1, ... in the order they first appear.
fn first_seen_numbering(values: &[usize]) -> Vec<usize> {
    let mut names = std::collections::HashMap::new();
    values
        .iter()
        .map(|v| {
            let next = names.len();
            *names.entry(*v).or_insert(next)
        })
        .collect()
}
