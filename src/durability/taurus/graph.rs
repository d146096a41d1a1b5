//! The recovery dependency graph of one generation (§4.4.1): which logged transactions are
//! recoverable (Algorithm 5), and the order replay must respect among them (Algorithm 3's WAW
//! edges for data; RAW and WAW edges for commands, whose WAR dependencies versions take care of).
//!
//! Built for speed, since its time counts in recovery's: a predecessor is found by its id in
//! the generation's list, which is in (logger, address) order, so no hash map is built; the
//! per-transaction work (finding predecessors) runs on all recovery threads; the edges are
//! stored as one compressed adjacency array (CSR), not a vector per transaction.

use super::cdt;
use super::format::{self, Deps};

/// The most transactions one generation's graph holds: positions are `u32`.
pub const GRAPH_TXNS_MAX: usize = u32::MAX as usize;

/// What the graph needs of a logged transaction.
pub trait Node: Sync {
    /// `logger << 56 | logical address past the record`.
    fn id(&self) -> u64;
    /// Its predecessors as logged.
    fn deps(&self) -> &Deps;
    /// Its commit timestamp (command flavors) or LSN.
    fn seq(&self) -> u64;
    /// A number every RAW predecessor's is smaller than in a log written correctly: the commit
    /// timestamp (command flavors), or the TID (data flavors log no timestamp; a Silo TID is
    /// larger than the TID of every version its transaction read).
    fn raw_order(&self) -> u64;
}

/// Transaction id → position in the generation's list. Ids are `logger << 56 | address`, and
/// each logger's addresses grow through its log: the index keeps, per logger, the position of
/// the first id in each bucket of addresses, sized to about [`IDS_PER_BUCKET`] ids. A lookup is
/// one read of the bucket's start (a table a sixteenth the size of the ids) and a scan of its
/// ids (one or two cache lines). Records differ in size, but a bucket spans a fixed number of
/// bytes, so a run of small records fills a bucket with at most its bytes over the smallest
/// record's. It replaced a binary search over every sixteenth id, whose dozen dependent probes
/// were half of the graph phase of a YCSB `taurus-data` recovery (`docs/PERFORMANCE.md`,
/// "Taurus", "Session 18").
pub struct IdIndex {
    /// Ids in ascending order.
    ids: Vec<u64>,
    /// `positions[k]` is the list position of `ids[k]`; empty when the list is in id order
    /// (always, when the segments are in (logger, base) order as recovery reads them).
    positions: Vec<u32>,
    /// One entry per logger that has ids, in id order.
    loggers: Vec<LoggerBuckets>,
}

/// Ids per address bucket, on average: eight `u64`s are one cache line.
const IDS_PER_BUCKET: u64 = 8;

/// One logger's ids: `ids[starts[b]..starts[b + 1]]` have addresses in
/// `first + (b << shift)..first + ((b + 1) << shift)`.
struct LoggerBuckets {
    logger: u64,
    first: u64,
    shift: u32,
    starts: Vec<u32>,
}

impl LoggerBuckets {
    /// The buckets of one logger's ids, `ids[range]` (sorted, all of `logger`).
    fn new(ids: &[u64], range: std::ops::Range<usize>, logger: u64) -> LoggerBuckets {
        let address = |id: u64| format::split_id(id).1;
        let first = address(ids[range.start]);
        let span = address(ids[range.end - 1]) - first + 1;
        let buckets_wanted = (range.len() as u64).div_ceil(IDS_PER_BUCKET).max(1);
        // The smallest power-of-two bucket width that makes at most `buckets_wanted` buckets.
        let shift = (span.div_ceil(buckets_wanted)).next_power_of_two().trailing_zeros();
        let buckets = ((span - 1) >> shift) as usize + 1;
        let mut starts = Vec::with_capacity(buckets + 1);
        let mut k = range.start;
        for b in 0..buckets as u64 {
            while k < range.end && (address(ids[k]) - first) >> shift < b {
                k += 1;
            }
            starts.push(k as u32);
        }
        starts.push(range.end as u32);
        LoggerBuckets { logger, first, shift, starts }
    }

    /// The range of `ids` that may hold `address`.
    fn bucket(&self, address: u64) -> Option<std::ops::Range<usize>> {
        let b = (address.checked_sub(self.first)? >> self.shift) as usize;
        let (&from, &to) = (self.starts.get(b)?, self.starts.get(b + 1)?);
        Some(from as usize..to as usize)
    }
}

impl IdIndex {
    /// Indexes `nodes`, which must hold at most [`GRAPH_TXNS_MAX`] transactions; `Err(id)` if
    /// two hold the same id (a damaged log: ids are log addresses).
    pub fn new<N: Node>(nodes: &[&N]) -> Result<IdIndex, u64> {
        assert!(nodes.len() <= GRAPH_TXNS_MAX, "a generation's graph holds at most {GRAPH_TXNS_MAX} transactions");
        let mut ids: Vec<u64> = nodes.iter().map(|t| t.id()).collect();
        let mut positions = Vec::new();
        if !ids.windows(2).all(|w| w[0] < w[1]) {
            let mut pairs: Vec<(u64, u32)> = ids.iter().enumerate().map(|(i, &id)| (id, i as u32)).collect();
            pairs.sort_unstable();
            ids = pairs.iter().map(|p| p.0).collect();
            positions = pairs.iter().map(|p| p.1).collect();
            if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
                return Err(w[0]);
            }
        }
        let mut loggers = Vec::new();
        let mut at = 0;
        while at < ids.len() {
            let logger = format::split_id(ids[at]).0 as u64;
            let end = at + ids[at..].partition_point(|&id| format::split_id(id).0 as u64 == logger);
            loggers.push(LoggerBuckets::new(&ids, at..end, logger));
            at = end;
        }
        Ok(IdIndex { ids, positions, loggers })
    }

    /// The list position of the transaction `id`, if it was read.
    pub fn get(&self, id: u64) -> Option<usize> {
        let (logger, address) = format::split_id(id);
        let buckets = self.loggers.iter().find(|l| l.logger == logger as u64)?;
        let range = buckets.bucket(address)?;
        let k = range.start + self.ids[range].iter().position(|&i| i == id)?;
        Some(self.positions.get(k).map_or(k, |&p| p as usize))
    }
}

/// Edges in compressed form: the successors of `i` are `targets[starts[i]..starts[i + 1]]`, and
/// `pending[i]` counts the edges into `i`.
pub struct ReplayGraph {
    starts: Vec<usize>,
    targets: Vec<u32>,
    pub pending: Vec<u32>,
}

impl ReplayGraph {
    /// The graph of `n` transactions with `edges` (from, to), given in any number of parts.
    pub fn from_edges(n: usize, parts: &[Vec<(u32, u32)>]) -> ReplayGraph {
        let mut starts = vec![0usize; n + 1];
        let mut pending = vec![0u32; n];
        // A self-loop (a record naming itself, read from a damaged log) is kept: its node never
        // becomes ready, which recoverability and replay report as such.
        for &(from, to) in parts.iter().flatten() {
            starts[from as usize] += 1;
            pending[to as usize] += 1;
        }
        // `starts[i]` becomes the end of `i`'s successors; placing the edges from the last one
        // back moves it to their start, with no second array of cursors, and keeps their order.
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        let mut targets = vec![0u32; starts[n]];
        for &(from, to) in parts.iter().flatten().rev() {
            starts[from as usize] -= 1;
            targets[starts[from as usize]] = to;
        }
        ReplayGraph { starts, targets, pending }
    }

    /// The transactions that wait for `i`.
    pub fn successors(&self, i: usize) -> &[u32] {
        &self.targets[self.starts[i]..self.starts[i + 1]]
    }

    /// Number of edges.
    pub fn edges(&self) -> usize {
        self.targets.len()
    }
}

/// Edges (predecessor, successor) by list position.
type Edges = Vec<(u32, u32)>;

/// Each transaction's found predecessors, as edges (predecessor → transaction).
pub struct Resolved {
    /// RAW predecessors found in the generation; `None` when [`RawEdges::WhenNeeded`] found
    /// them not needed.
    raw: Option<Vec<Edges>>,
    /// WAW predecessors found in the generation.
    waw: Vec<Edges>,
    /// Transactions that cannot be recovered whatever their predecessors' fate: a RAW
    /// predecessor missing from every log, or a compressed predecessor vector beyond the logs.
    doomed: Vec<bool>,
    /// Whether every RAW edge goes from a smaller [`Node::raw_order`] to a larger one, which
    /// rules out a RAW cycle.
    raw_forward: bool,
}

/// Where the logs of a generation end, as recoverability needs it.
pub struct Extent<'a> {
    /// Each logger's valid end (logical offset).
    pub valid_end: &'a [u64],
    /// Each logger's retained start: a predecessor at or below it was in a segment removed
    /// after a checkpoint, which covers it.
    pub retained_start: &'a [u64],
}

/// Which RAW edges [`resolve`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawEdges {
    /// Every one: command replay orders its transactions by them.
    All,
    /// Only when recoverability needs them: a transaction is doomed, or an edge goes backward
    /// in [`Node::raw_order`]. Data replay orders by WAW edges alone, so in a log that lost no
    /// predecessor its RAW edges (1.7 M pairs in a TPC-C generation of 238 K transactions) would
    /// be written to fresh memory and never read. Finding them needed costs a second pass.
    WhenNeeded,
}

impl Resolved {
    /// Whether recoverability needs the RAW edges (see [`recoverable_set`]).
    fn needs_raw(&self) -> bool {
        !self.raw_forward || self.doomed.contains(&true)
    }

    /// The RAW edges, which [`resolve`] keeps whenever they are asked for or needed.
    fn raw_edges(&self) -> &[Edges] {
        match &self.raw {
            Some(raw) => raw,
            None => {
                assert!(!self.needs_raw(), "resolve keeps the RAW edges whenever recoverability needs them");
                &[]
            }
        }
    }
}

/// Finds every transaction's predecessors, on `threads` threads.
pub fn resolve<N: Node>(nodes: &[&N], index: &IdIndex, extent: &Extent<'_>, threads: usize, raw: RawEdges) -> Resolved {
    let resolved = resolve_pass(nodes, index, extent, threads, raw == RawEdges::All);
    if resolved.raw.is_some() || !resolved.needs_raw() {
        return resolved;
    }
    resolve_pass(nodes, index, extent, threads, true)
}

/// One pass of [`resolve`], keeping the RAW edges if `keep_raw`.
fn resolve_pass<N: Node>(
    nodes: &[&N],
    index: &IdIndex,
    extent: &Extent<'_>,
    threads: usize,
    keep_raw: bool,
) -> Resolved {
    let removed = |id: u64| {
        let (logger, address) = format::split_id(id);
        extent.retained_start.get(logger).is_some_and(|&r| address <= r)
    };
    let mut doomed = vec![false; nodes.len()];
    let chunk = nodes.len().div_ceil(threads.max(1)).max(1);
    // Read first, on all threads (a cache miss per transaction): every edge compares two. The
    // same pass counts each chunk's listed predecessors, so that its edge lists are allocated
    // once at their size: grown by doubling, they wrote about twice their size of fresh memory,
    // which this VM's first touch makes slow (`docs/PERFORMANCE.md`, "Taurus", "Session 24").
    let mut seqs = vec![0u64; nodes.len()];
    let listed: Vec<(usize, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = seqs
            .chunks_mut(chunk)
            .enumerate()
            .map(|(c, part)| {
                scope.spawn(move || {
                    let mut listed = (0, 0);
                    for (k, seq) in part.iter_mut().enumerate() {
                        if let Some(ahead) = nodes.get(c * chunk + k + NODE_PREFETCH_AHEAD) {
                            prefetch_node(*ahead);
                        }
                        let node = nodes[c * chunk + k];
                        *seq = node.raw_order();
                        if let Deps::Lists { raw, waw, .. } = node.deps() {
                            (listed.0, listed.1) = (listed.0 + raw.len(), listed.1 + waw.len());
                        }
                    }
                    listed
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let parts: Vec<(Edges, Edges, bool)> = std::thread::scope(|scope| {
        let handles: Vec<_> = doomed
            .chunks_mut(chunk)
            .zip(listed)
            .enumerate()
            .map(|(c, (doomed, (raw_listed, waw_listed)))| {
                let (removed, seqs) = (&removed, &seqs);
                scope.spawn(move || {
                    let mut found: Vec<(u64, Option<usize>)> = Vec::with_capacity(REUSED_LOOKUPS_MAX);
                    let mut raw = Vec::with_capacity(if keep_raw { raw_listed } else { 0 });
                    let mut waw = Vec::with_capacity(waw_listed);
                    let mut forward = true;
                    for (k, doomed) in doomed.iter_mut().enumerate() {
                        let i = c * chunk + k;
                        if let Some(ahead) = nodes.get(i + 2 * NODE_PREFETCH_AHEAD) {
                            prefetch_node(*ahead);
                        }
                        if let Some(ahead) = nodes.get(i + NODE_PREFETCH_AHEAD) {
                            prefetch_lists(*ahead);
                        }
                        match nodes[i].deps() {
                            Deps::None => {}
                            Deps::Lists { raw: raw_ids, waw: waw_ids, .. } => {
                                found.clear();
                                for &id in raw_ids {
                                    let position = index.get(id);
                                    if raw_ids.len() <= REUSED_LOOKUPS_MAX {
                                        found.push((id, position));
                                    }
                                    match position {
                                        Some(j) => {
                                            forward &= seqs[j] < seqs[i];
                                            if keep_raw {
                                                raw.push((j as u32, i as u32));
                                            }
                                        }
                                        None if removed(id) => {}
                                        None => *doomed = true,
                                    }
                                }
                                // A record read and then written names its writer in both
                                // lists: the RAW lookup's answer serves the WAW edge.
                                let position = |id: u64| match found.iter().find(|f| f.0 == id) {
                                    Some(&(_, position)) => position,
                                    None => index.get(id),
                                };
                                waw.extend(waw_ids.iter().filter_map(|&id| position(id)).map(|j| (j as u32, i as u32)));
                            }
                            Deps::Vectors { pv, .. } => {
                                *doomed = pv.len() != extent.valid_end.len() || !cdt::dominates(extent.valid_end, pv);
                            }
                        }
                    }
                    (raw, waw, forward)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let raw_forward = parts.iter().all(|p| p.2);
    let (raw, waw): (Vec<Edges>, Vec<Edges>) = parts.into_iter().map(|(r, w, _)| (r, w)).unzip();
    Resolved { raw: keep_raw.then_some(raw), waw, doomed, raw_forward }
}

/// How many transactions ahead [`resolve`] prefetches one (and twice that, in its second pass;
/// the lists of the one this far ahead). The list is in log order, but the generation's decoded
/// transactions are tens of megabytes, written by the reading threads, and each one's lists are
/// allocations of their own: the second pass took 54–57 ms without, 43–53 ms with
/// (`docs/PERFORMANCE.md`, "Taurus", "Session 44").
const NODE_PREFETCH_AHEAD: usize = 8;

/// The most RAW predecessors of one transaction whose lookups [`resolve`] keeps for its WAW
/// predecessors (most are the same ids): each WAW id is compared with every kept one, so a
/// longer list is looked up afresh rather than searched.
const REUSED_LOOKUPS_MAX: usize = 32;

/// Prefetches the first two cache lines of `node` (its id, order and list headers).
fn prefetch_node<N>(node: &N) {
    let at = (node as *const N).cast::<u8>();
    crate::storage::prefetch::prefetch_line(at);
    if std::mem::size_of::<N>() > 64 {
        crate::storage::prefetch::prefetch_line(at.wrapping_add(64));
    }
}

/// Prefetches the first line of each of `node`'s predecessor lists.
fn prefetch_lists<N: Node>(node: &N) {
    if let Deps::Lists { raw, waw, .. } = node.deps() {
        crate::storage::prefetch::prefetch_line(raw.as_ptr());
        crate::storage::prefetch::prefetch_line(waw.as_ptr());
    }
}

/// Phase 2 of §4.4.1 (Algorithm 5): a transaction is recoverable iff it is not doomed and all
/// its RAW predecessors found in the generation are recoverable, marked from the roots as the
/// algorithm does, so that transactions on a RAW cycle (which only a damaged log can hold: a
/// predecessor committed before its reader read it) or after one are not recoverable either.
///
/// When every RAW edge goes forward in [`Node::raw_order`] there is no cycle, and the same set is
/// what the doomed transactions do not reach: that walk touches nothing when nothing is doomed
/// (a clean stop), where the pass from the roots cost 110 ms of a 700 K-transaction graph.
pub fn recoverable_set(resolved: &Resolved) -> Vec<bool> {
    let n = resolved.doomed.len();
    if resolved.raw_forward {
        let mut recoverable: Vec<bool> = resolved.doomed.iter().map(|&d| !d).collect();
        if recoverable.iter().all(|&r| r) {
            return recoverable;
        }
        let raw = ReplayGraph::from_edges(n, resolved.raw_edges());
        let mut unrecoverable: Vec<usize> = (0..n).filter(|&i| resolved.doomed[i]).collect();
        while let Some(i) = unrecoverable.pop() {
            for &s in raw.successors(i) {
                if std::mem::replace(&mut recoverable[s as usize], false) {
                    unrecoverable.push(s as usize);
                }
            }
        }
        return recoverable;
    }
    let raw = ReplayGraph::from_edges(n, resolved.raw_edges());
    let mut pending = raw.pending.clone();
    let mut recoverable = vec![false; n];
    let mut queue: Vec<usize> = (0..n).filter(|&i| pending[i] == 0 && !resolved.doomed[i]).collect();
    while let Some(i) = queue.pop() {
        recoverable[i] = true;
        for &s in raw.successors(i) {
            let s = s as usize;
            pending[s] -= 1;
            if pending[s] == 0 && !resolved.doomed[s] {
                queue.push(s);
            }
        }
    }
    recoverable
}

/// Data replay (Algorithm 3): a replayed transaction waits for its replayed WAW predecessors.
/// Compressed records name no single WAW predecessor; they need none, since the largest TID
/// wins whatever the order.
pub fn data_graph(resolved: &Resolved, replay: &[bool]) -> ReplayGraph {
    // Usually every transaction is replayed: then the edges need no filtered copy (1.5 M pairs
    // in a TPC-C generation of 238 K transactions, written to fresh memory).
    if replay.iter().all(|&r| r) {
        return ReplayGraph::from_edges(replay.len(), &resolved.waw);
    }
    graph_of(&resolved.waw, replay, |_, _| true)
}

/// The graph of the edges of `parts` between replayed transactions that `keep` accepts.
fn graph_of<'a>(
    parts: impl IntoIterator<Item = &'a Edges>,
    replay: &[bool],
    keep: impl Fn(u32, u32) -> bool,
) -> ReplayGraph {
    let kept: Vec<Edges> = parts
        .into_iter()
        .map(|part| {
            let kept = |&(j, i): &(u32, u32)| replay[j as usize] && replay[i as usize] && keep(j, i);
            part.iter().copied().filter(kept).collect()
        })
        .collect();
    ReplayGraph::from_edges(replay.len(), &kept)
}

/// Command replay: a transaction re-executes after its recoverable RAW and WAW predecessors
/// (§5.1, §5.2). WAR dependencies need no edge: replay keeps the versions a later writer
/// replaces, and each transaction reads the ones below its commit timestamp
/// ([`crate::txn::versions`]); a key a transaction found missing is the same case. An edge
/// backward in commit-timestamp order (a delete chain's head, listed conservatively) decides
/// recoverability only. Every edge goes from a smaller timestamp to a larger one, so the graph
/// has no cycle. `None` (replay in timestamp order) when a record is compressed.
pub fn command_graph<N: Node>(nodes: &[&N], resolved: &Resolved, replay: &[bool]) -> Option<ReplayGraph> {
    if nodes.iter().any(|n| matches!(n.deps(), Deps::Vectors { .. })) {
        return None;
    }
    let ts = |i: u32| nodes[i as usize].seq();
    assert!(resolved.raw.is_some(), "command replay resolves every RAW edge (RawEdges::All)");
    Some(graph_of(resolved.raw_edges().iter().chain(&resolved.waw), replay, |j, i| ts(j) < ts(i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A logged transaction whose id is also its sequence number.
    struct S(u64, Deps);

    impl Node for S {
        fn id(&self) -> u64 {
            self.0
        }
        fn deps(&self) -> &Deps {
            &self.1
        }
        fn seq(&self) -> u64 {
            self.0
        }
        fn raw_order(&self) -> u64 {
            self.0
        }
    }

    fn id(logger: u64, address: u64) -> u64 {
        logger << 56 | address
    }

    #[test]
    fn the_id_index_finds_every_id_and_no_other_in_order_or_not() {
        // Uneven record sizes, several loggers, ids at every place in a stride.
        let mut ids = Vec::new();
        for logger in [0u64, 1, 3] {
            let mut address = 0;
            for k in 0..2000u64 {
                address += if k % 97 == 0 { 5000 } else { 17 + k % 13 };
                ids.push(id(logger, address));
            }
        }
        ids.push(id(5, 1 << 40)); // a logger with one transaction, far into its log
        for shuffled in [false, true] {
            let mut list = ids.clone();
            if shuffled {
                list.reverse();
                list.swap(10, 4000);
            }
            let nodes: Vec<S> = list.iter().map(|&i| S(i, Deps::None)).collect();
            let refs: Vec<&S> = nodes.iter().collect();
            let index = IdIndex::new(&refs).expect("distinct ids");
            for (position, &i) in list.iter().enumerate() {
                assert_eq!(index.get(i), Some(position), "id {i:#x}");
                assert_eq!(index.get(i + 1), None, "id {:#x} was never logged", i + 1);
            }
            assert_eq!(index.get(id(2, 100)), None, "logger 2 logged nothing");
            assert_eq!(index.get(id(9, 100)), None, "logger 9 does not exist");
            assert_eq!(index.get(id(0, 1)), None, "before logger 0's first");
        }
        let twins = [S(id(1, 40), Deps::None), S(id(0, 7), Deps::None), S(id(1, 40), Deps::None)];
        let refs: Vec<&S> = twins.iter().collect();
        assert_eq!(IdIndex::new(&refs).err(), Some(id(1, 40)), "two transactions at one address");
    }

    #[test]
    fn a_graph_lists_each_nodes_successors_and_counts_its_predecessors() {
        let graph = ReplayGraph::from_edges(4, &[vec![(0, 2), (1, 2)], vec![(0, 3), (2, 3)]]);
        assert_eq!(graph.successors(0), &[2, 3]);
        assert_eq!(graph.successors(1), &[2]);
        assert_eq!(graph.successors(2), &[3]);
        assert!(graph.successors(3).is_empty());
        assert_eq!(graph.pending, vec![0, 0, 2, 2]);
        assert_eq!(graph.edges(), 4);
    }

    /// Algorithm 5 by both passes (from the roots, and from the doomed side when the edges are
    /// known to go forward), which must agree on a graph without a cycle.
    fn recoverable(raw: Vec<Edges>, doomed: Vec<bool>) -> Vec<bool> {
        let from_roots = recoverable_set(&Resolved {
            raw: Some(raw.clone()),
            waw: vec![],
            doomed: doomed.clone(),
            raw_forward: false,
        });
        let from_doomed = recoverable_set(&Resolved { raw: Some(raw), waw: vec![], doomed, raw_forward: true });
        assert_eq!(from_roots, from_doomed, "the two passes disagree");
        from_roots
    }

    #[test]
    fn a_doomed_transaction_takes_its_raw_successors_with_it_and_only_them() {
        // 0 → 1 → 2 by RAW, 3 alone, 4 reads 3; 1 is doomed, so 2 goes too.
        let raw = vec![vec![(0, 1), (1, 2)], vec![(3, 4)]];
        assert_eq!(recoverable(raw, vec![false, true, false, false, false]), vec![true, false, false, true, true]);
        // A successor listed before its predecessor (another logger's) goes too, transitively.
        let raw = vec![vec![(3, 0), (0, 2)], vec![(2, 1)]];
        assert_eq!(recoverable(raw, vec![false, false, false, true]), vec![false; 4]);
        assert_eq!(recoverable(vec![vec![(0, 1), (1, 2)]], vec![false; 3]), vec![true; 3]);
        // A RAW cycle (0 <-> 1), its successor 2, and a self-reference 3, from a damaged log:
        // never recoverable, though nothing is doomed; 4 is independent. Such edges do not go
        // forward in sequence order, so `resolve` leaves `raw_forward` false.
        let raw = vec![vec![(0, 1), (1, 0), (1, 2), (3, 3)]];
        let cycle = Resolved { raw: Some(raw), waw: vec![], doomed: vec![false; 5], raw_forward: false };
        assert_eq!(recoverable_set(&cycle), vec![false, false, false, false, true]);
    }

    #[test]
    fn resolve_finds_predecessors_dooms_the_missing_and_spares_the_removed() {
        let lists =
            |raw: &[u64], waw: &[u64]| Deps::Lists { raw: raw.to_vec(), waw: waw.to_vec(), fresh_writes: false };
        let nodes = [
            S(id(0, 10), lists(&[id(0, 5)], &[])), // 5 is at or below logger 0's retained start 6
            S(id(0, 20), lists(&[id(0, 10)], &[id(0, 10)])), // found
            S(id(1, 30), lists(&[id(1, 25)], &[])), // missing from logger 1's log: doomed
            S(id(1, 40), lists(&[id(1, 30)], &[id(0, 20)])), // reads a doomed one
            S(id(1, 50), Deps::Vectors { pv: vec![20, 60], waw: vec![0, 0] }), // beyond logger 1's end
        ];
        let refs: Vec<&S> = nodes.iter().collect();
        let index = IdIndex::new(&refs).expect("distinct ids");
        let extent = Extent { valid_end: &[20, 55], retained_start: &[6, 20] };
        for threads in [1, 2, 3, 8] {
            let resolved = resolve(&refs, &index, &extent, threads, RawEdges::All);
            assert_eq!(resolved.doomed, vec![false, false, true, false, true], "{threads} threads");
            assert!(resolved.raw_forward, "every predecessor has a smaller id, here the sequence");
            let mut raw: Vec<(u32, u32)> = resolved.raw_edges().iter().flatten().copied().collect();
            raw.sort_unstable();
            assert_eq!(raw, vec![(0, 1), (2, 3)]);
            let mut waw: Vec<(u32, u32)> = resolved.waw.iter().flatten().copied().collect();
            waw.sort_unstable();
            assert_eq!(waw, vec![(0, 1), (1, 3)]);
            assert_eq!(recoverable_set(&resolved), vec![true, true, false, false, false]);
        }
        // A predecessor later in `raw_order` turns the pass from the roots on.
        let back = [S(id(0, 10), lists(&[id(0, 20)], &[])), S(id(0, 20), lists(&[], &[]))];
        let refs: Vec<&S> = back.iter().collect();
        let index = IdIndex::new(&refs).expect("distinct ids");
        let resolved = resolve(&refs, &index, &Extent { valid_end: &[30], retained_start: &[0] }, 2, RawEdges::All);
        assert!(!resolved.raw_forward);
        assert_eq!(recoverable_set(&resolved), vec![true, true]);
    }

    #[test]
    fn raw_edges_when_needed_are_kept_only_for_a_doomed_or_backward_log_and_decide_alike() {
        let lists =
            |raw: &[u64], waw: &[u64]| Deps::Lists { raw: raw.to_vec(), waw: waw.to_vec(), fresh_writes: false };
        // Whole: every predecessor found, every edge forward. Lost: 0's predecessor at 5 is
        // missing (nothing is retained). Backward: 1 reads 2, later in `raw_order`.
        let whole = vec![
            S(id(0, 10), lists(&[], &[])),
            S(id(0, 20), lists(&[id(0, 10)], &[id(0, 10)])),
            S(id(0, 30), lists(&[id(0, 20)], &[])),
        ];
        let lost = vec![
            S(id(0, 10), lists(&[id(0, 5)], &[])),
            S(id(0, 20), lists(&[id(0, 10)], &[])),
            S(id(0, 30), lists(&[], &[id(0, 20)])),
        ];
        let backward =
            vec![S(id(0, 10), lists(&[], &[])), S(id(0, 20), lists(&[id(0, 30)], &[])), S(id(0, 30), lists(&[], &[]))];
        let extent = Extent { valid_end: &[40], retained_start: &[0] };
        for (name, nodes, kept, expected) in [
            ("whole", whole, false, vec![true; 3]),
            ("lost", lost, true, vec![false, false, true]),
            ("backward", backward, true, vec![true; 3]),
        ] {
            let refs: Vec<&S> = nodes.iter().collect();
            let index = IdIndex::new(&refs).expect("distinct ids");
            let needed = resolve(&refs, &index, &extent, 2, RawEdges::WhenNeeded);
            let all = resolve(&refs, &index, &extent, 2, RawEdges::All);
            assert_eq!(needed.raw.is_some(), kept, "{name}: RAW edges kept");
            assert_eq!(recoverable_set(&needed), expected, "{name}");
            assert_eq!(recoverable_set(&all), expected, "{name}, every RAW edge kept");
            let replay = recoverable_set(&all);
            let (from_needed, from_all) = (data_graph(&needed, &replay), data_graph(&all, &replay));
            for i in 0..replay.len() {
                assert_eq!(from_needed.successors(i), from_all.successors(i), "{name}: successors of {i}");
            }
            assert_eq!(from_needed.pending, from_all.pending, "{name}");
        }
    }

    /// WAW predecessors are found whether or not their ids were looked up as RAW ones, for
    /// short RAW lists (whose lookups are reused) and long ones (looked up afresh).
    #[test]
    fn waw_predecessors_are_found_beside_raw_lists_short_and_long() {
        for reads in [3, REUSED_LOOKUPS_MAX, REUSED_LOOKUPS_MAX + 8] {
            let mut nodes: Vec<S> = (1..=reads as u64 + 2).map(|a| S(id(0, a * 10), Deps::None)).collect();
            let raw: Vec<u64> = (1..=reads as u64).map(|a| id(0, a * 10)).collect();
            // Two writers it read and one it did not, and one never logged.
            let waw = vec![id(0, 10), id(0, reads as u64 * 10), id(0, (reads as u64 + 1) * 10), id(0, 5)];
            nodes.push(S(id(0, 10_000), Deps::Lists { raw, waw, fresh_writes: false }));
            let refs: Vec<&S> = nodes.iter().collect();
            let index = IdIndex::new(&refs).expect("distinct ids");
            let extent = Extent { valid_end: &[20_000], retained_start: &[0] };
            let resolved = resolve(&refs, &index, &extent, 1, RawEdges::All);
            let last = (nodes.len() - 1) as u32;
            let waw: Vec<(u32, u32)> = resolved.waw.iter().flatten().copied().collect();
            assert_eq!(waw, vec![(0, last), (reads as u32 - 1, last), (reads as u32, last)], "{reads} reads");
            assert_eq!(resolved.raw_edges().iter().flatten().count(), reads, "{reads} reads");
        }
    }

    #[test]
    fn a_data_graph_keeps_only_edges_between_replayed_transactions() {
        let waw = vec![vec![(0, 1), (0, 2)], vec![(1, 3), (2, 3)]];
        let resolved = Resolved { raw: None, waw, doomed: vec![false; 4], raw_forward: true };
        let every = data_graph(&resolved, &[true; 4]);
        assert_eq!((every.successors(0), every.successors(1), every.successors(2)), (&[1, 2][..], &[3][..], &[3][..]));
        assert_eq!(every.pending, vec![0, 1, 1, 2]);
        let without_2 = data_graph(&resolved, &[true, true, false, true]);
        assert_eq!((without_2.successors(0), without_2.successors(2)), (&[1][..], &[][..]));
        assert_eq!(without_2.pending, vec![0, 1, 0, 1]);
    }
}
