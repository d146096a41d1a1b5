//! Taurus's recovery with the phases merged (§4.4.2, Algorithms 3–6): the recovery dependency
//! graph is built *while* the logs are read, transactions replay as soon as they are ready, and
//! each log's recovered transactions are garbage collected in id order, so that memory holds
//! the transactions between replay and the read frontier, not a whole generation.
//!
//! The paper's names, and where they are here:
//! - *Nodes*, the lookup table of the graph: [`Graph::nodes`], sharded by id.
//! - *Insert()* (Algorithm 4): [`Graph::insert`], called by a log's I/O thread for each record in
//!   log order. A predecessor not yet read gets a placeholder node (lines 11–16); one below its
//!   log's `min_gc_id` was garbage collected, hence recovered, and is ignored (line 10).
//! - *CheckRecoverability()* (Algorithm 5): [`Graph::now_recoverable`]. A node is *Recoverable*
//!   once every RAW predecessor is; *ReadyForRecovery* once, besides, every WAW predecessor is
//!   *Recovered*; then it goes on the *recover_queue* ([`Graph::ready`]).
//! - The worker threads (Algorithm 3): [`Graph::worker`]; a recovered node releases its WAW
//!   successors.
//! - *GarbageCollect()* (Algorithm 6): [`Gc::collect`], run by each I/O thread over its own
//!   log's `gc_queue`. `min_gc_id` here is one past the last collected id (the paper stores the
//!   collected head's own id, which a successor's check `P.id >= min_gc_id` would then take
//!   for a transaction not yet read).
//!
//! What the paper leaves open, and the choices made:
//! - **A predecessor that is never read** (lost at the crash, or in a segment past a log's
//!   valid end) keeps its RAW successors unrecoverable; once every log is read, every node
//!   still not recoverable is dropped, and each dropped node releases its WAW successors (WAW
//!   is not a commit condition: a transaction acknowledged after a lost WAW predecessor must be
//!   recovered, the largest TID deciding between the two). Recoverability only changes while
//!   records are inserted, so after the last insert it is final.
//! - **Bounded memory.** An I/O thread whose log has more than [`INFLIGHT_TXNS_MAX`]
//!   transactions read and not collected waits for replay to catch up. In a log written
//!   correctly every predecessor was logged before its successor, so the transaction logged
//!   first among those not recovered is always ready or about to be: waiting cannot deadlock.
//!   A damaged log can break that order; an I/O thread that has seen no transaction recovered
//!   for [`STALL_MS`] while waiting reads on instead of waiting for ever.
//! - **Compressed records** (§6.6) name no predecessors, only a predecessor vector. Whether it is
//!   within the logs' valid lengths is known when every log is read, so such a node stays
//!   unrecoverable until then, and the bound above is lifted for the generation.
//! - **A predecessor at or below its log's retained start** lies in a segment removed after a
//!   checkpoint, which covers it: it counts as collected.
//! - **Collected ranges.** A predecessor below its log's `min_gc_id` counts as recovered, as in
//!   the paper. In a log written correctly a predecessor id is the address of a record; a
//!   damaged log naming an address inside a collected record would be taken as recovered here,
//!   where the batch graph ([`super::graph`]) finds no such id and drops the reader.
//! - **Errors.** The first error (a reader's, a replay's, or a panic) stops every thread.

use super::format::{self, Deps};
use super::graph;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Most transactions of one log read and not yet garbage collected before its I/O thread waits
/// (the default of [`run`]'s `inflight_max`).
pub const INFLIGHT_TXNS_MAX: usize = 1 << 18;

/// How long an I/O thread waits without any transaction being recovered before it reads on.
pub const STALL_MS: u64 = 200;

/// Shards of the node table.
const SHARDS: usize = 64;

/// One shard of the node table, by id.
type Shard<T> = HashMap<u64, Arc<Node<T>>, foldhash::fast::FixedState>;

/// Why an insert did not take the transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// A transaction with this id was read before (a damaged log: ids are log addresses).
    Duplicate(u64),
    /// Another thread failed; reading stops.
    Stopped,
}

/// Why a run stopped.
#[derive(Debug)]
pub enum Failure<E> {
    /// A reader or a replay failed (the first error).
    Failed(E),
    /// Recoverable transactions that could never become ready (a WAW cycle: a damaged log).
    Cycle { left: usize },
    /// A replay panicked.
    Panicked { message: String },
}

/// What a run recovered.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Transactions read.
    pub read: u64,
    /// Transactions replayed (`apply` called).
    pub recovered: u64,
    /// Transactions read and not recoverable.
    pub dropped: u64,
    /// The most transactions read and not yet collected at once, summed over the logs' peaks.
    pub inflight_peak: usize,
}

const PENDING: u8 = 0;
const RECOVERED: u8 = 1;
const DROPPED: u8 = 2;

/// A node of the recovery dependency graph: a transaction read, or a placeholder for a
/// predecessor not read yet.
struct Node<T> {
    id: u64,
    /// RAW predecessors not yet recoverable, plus one until the record is inserted (a
    /// placeholder keeps it: it is never recoverable), plus one for a compressed record until
    /// every log is read.
    raw_pending: AtomicU32,
    /// WAW predecessors not yet recovered, plus one until the node is recoverable, plus one
    /// until the record is inserted.
    waw_pending: AtomicU32,
    /// [`PENDING`], [`RECOVERED`] or [`DROPPED`]; final once not pending.
    state: AtomicU8,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    /// The record, from its insert until its replay.
    txn: Option<T>,
    /// The record was inserted (a placeholder is not).
    read: bool,
    recoverable: bool,
    raw_successors: Vec<Arc<Node<T>>>,
    waw_successors: Vec<Arc<Node<T>>>,
}

impl<T> Node<T> {
    fn placeholder(id: u64) -> Node<T> {
        Node {
            id,
            raw_pending: AtomicU32::new(1),
            waw_pending: AtomicU32::new(2),
            state: AtomicU8::new(PENDING),
            inner: Mutex::new(Inner {
                txn: None,
                read: false,
                recoverable: false,
                raw_successors: Vec::new(),
                waw_successors: Vec::new(),
            }),
        }
    }
}

/// The workers' shared queue and who waits on it.
struct Ready<T> {
    queue: VecDeque<Arc<Node<T>>>,
    /// Workers waiting for work.
    idle: usize,
}

/// The graph and everything the I/O and worker threads share.
pub struct Graph<T, E> {
    nodes: Vec<Mutex<Shard<T>>>,
    /// Per logger: every id below it was garbage collected.
    min_gc_id: Vec<AtomicU64>,
    /// Per logger: addresses at or below it are in segments removed after a checkpoint.
    retained_start: Vec<u64>,
    ready: Mutex<Ready<T>>,
    ready_cv: Condvar,
    /// Transactions inserted and not yet recovered or dropped.
    unfinished: AtomicUsize,
    recovered: AtomicU64,
    /// Every log is read and the unrecoverable nodes are dropped.
    reading_done: AtomicBool,
    /// A compressed record was read: the memory bound is lifted ([module docs](self)).
    unbounded: AtomicBool,
    stop: AtomicBool,
    failure: Mutex<Option<Failure<E>>>,
    /// Worker threads of the run.
    workers: usize,
}

/// The shard of the node table that holds `id`.
fn shard_of(id: u64) -> usize {
    let (logger, address) = format::split_id(id);
    (address as usize).wrapping_mul(31).wrapping_add(logger) % SHARDS
}

impl<T: graph::Node + Send, E: Send> Graph<T, E> {
    fn new(retained_start: &[u64], workers: usize) -> Graph<T, E> {
        Graph {
            nodes: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_hasher(foldhash::fast::FixedState::default())))
                .collect(),
            min_gc_id: retained_start.iter().enumerate().map(|(l, &r)| AtomicU64::new(first_id(l, r))).collect(),
            retained_start: retained_start.to_vec(),
            ready: Mutex::new(Ready { queue: VecDeque::new(), idle: 0 }),
            ready_cv: Condvar::new(),
            unfinished: AtomicUsize::new(0),
            recovered: AtomicU64::new(0),
            reading_done: AtomicBool::new(false),
            unbounded: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            workers,
        }
    }

    /// The node of `id`, made a placeholder if absent; `None` if `id` was garbage collected.
    fn node(&self, id: u64) -> Option<Arc<Node<T>>> {
        let (logger, _) = format::split_id(id);
        let mut shard = self.nodes[shard_of(id)].lock();
        if let Some(node) = shard.get(&id) {
            return Some(Arc::clone(node));
        }
        // Read under the shard's lock: a collector stores `min_gc_id` before it removes the
        // node under this lock, so a node found absent here was either never created or is
        // known collected now.
        if self.min_gc_id.get(logger).is_some_and(|m| id < m.load(Ordering::Acquire)) {
            return None;
        }
        let node = Arc::new(Node::placeholder(id));
        shard.insert(id, Arc::clone(&node));
        Some(node)
    }

    /// Whether predecessor `id` is covered without a node: collected, or removed with its
    /// segment after a checkpoint.
    fn covered(&self, id: u64) -> bool {
        let (logger, address) = format::split_id(id);
        self.retained_start.get(logger).is_some_and(|&r| address <= r)
            || self.min_gc_id.get(logger).is_some_and(|m| id < m.load(Ordering::Acquire))
    }

    /// Algorithm 4: inserts a transaction read from its log, in log order.
    fn insert(&self, txn: T) -> Result<Arc<Node<T>>, Interrupt> {
        if self.stop.load(Ordering::Acquire) {
            return Err(Interrupt::Stopped);
        }
        let id = txn.id();
        let node = self.node(id).ok_or(Interrupt::Duplicate(id))?;
        if std::mem::replace(&mut node.inner.lock().read, true) {
            return Err(Interrupt::Duplicate(id));
        }
        self.unfinished.fetch_add(1, Ordering::AcqRel);
        match txn.deps() {
            Deps::None => {}
            Deps::Lists { raw, waw, .. } => {
                for &p in raw {
                    self.add_raw(&node, p);
                }
                for &p in waw {
                    self.add_waw(&node, p);
                }
            }
            Deps::Vectors { .. } => {
                // Decided once every log is read ([`Self::finish_reading`]).
                node.raw_pending.fetch_add(1, Ordering::AcqRel);
                self.unbounded.store(true, Ordering::Release);
            }
        }
        node.inner.lock().txn = Some(txn);
        if node.raw_pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.now_recoverable(Arc::clone(&node));
        }
        self.release_waw(&node);
        Ok(node)
    }

    fn add_raw(&self, node: &Arc<Node<T>>, p: u64) {
        if self.covered(p) {
            return;
        }
        let Some(pred) = self.node(p) else { return };
        let mut inner = pred.inner.lock();
        if !inner.recoverable {
            node.raw_pending.fetch_add(1, Ordering::AcqRel);
            inner.raw_successors.push(Arc::clone(node));
        }
    }

    fn add_waw(&self, node: &Arc<Node<T>>, p: u64) {
        if self.covered(p) {
            return;
        }
        let Some(pred) = self.node(p) else { return };
        let mut inner = pred.inner.lock();
        if pred.state.load(Ordering::Acquire) == PENDING {
            node.waw_pending.fetch_add(1, Ordering::AcqRel);
            inner.waw_successors.push(Arc::clone(node));
        }
    }

    /// Algorithm 5: `node` and, transitively, the RAW successors it completes are recoverable.
    fn now_recoverable(&self, node: Arc<Node<T>>) {
        let mut work = vec![node];
        while let Some(node) = work.pop() {
            let successors = {
                let mut inner = node.inner.lock();
                inner.recoverable = true;
                std::mem::take(&mut inner.raw_successors)
            };
            self.release_waw(&node);
            for s in successors {
                if s.raw_pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                    work.push(s);
                }
            }
        }
    }

    /// One of `node`'s WAW counts is released; at zero it is ready for recovery.
    fn release_waw(&self, node: &Arc<Node<T>>) {
        if node.waw_pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut ready = self.ready.lock();
            ready.queue.push_back(Arc::clone(node));
            if ready.idle > 0 {
                self.ready_cv.notify_one();
            }
        }
    }

    /// `node` reached a final state: its WAW successors no longer wait for it.
    fn finish(&self, node: &Node<T>, state: u8) {
        let successors = {
            let mut inner = node.inner.lock();
            node.state.store(state, Ordering::Release);
            inner.txn = None;
            std::mem::take(&mut inner.waw_successors)
        };
        for s in successors {
            self.release_waw(&s);
        }
    }

    /// Every log is read: nodes not recoverable now never will be, and are dropped; a compressed
    /// record is recoverable iff its predecessor vector is within `valid_end`. Returns the
    /// transactions dropped.
    fn finish_reading(&self, valid_end: &[u64]) -> u64 {
        let vectors: Vec<Arc<Node<T>>> =
            self.all_nodes(|inner| matches!(inner.txn.as_ref().map(|t| t.deps()), Some(Deps::Vectors { .. })));
        for node in vectors {
            let within = match node.inner.lock().txn.as_ref().map(|t| t.deps()) {
                Some(Deps::Vectors { pv, .. }) => pv.len() == valid_end.len() && super::cdt::dominates(valid_end, pv),
                _ => false,
            };
            if within && node.raw_pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.now_recoverable(node);
            }
        }
        let mut dropped = 0;
        for node in self.all_nodes(|inner| !inner.recoverable) {
            if node.inner.lock().read {
                dropped += 1;
                self.unfinished.fetch_sub(1, Ordering::AcqRel);
            }
            self.finish(&node, DROPPED);
        }
        let _ready = self.ready.lock();
        self.reading_done.store(true, Ordering::Release);
        self.ready_cv.notify_all();
        dropped
    }

    /// The nodes in the table whose state `keep` accepts.
    fn all_nodes(&self, keep: impl Fn(&Inner<T>) -> bool) -> Vec<Arc<Node<T>>> {
        let mut out = Vec::new();
        for shard in &self.nodes {
            out.extend(shard.lock().values().filter(|n| keep(&n.inner.lock())).cloned());
        }
        out
    }

    /// Records the first failure and stops every thread.
    fn fail(&self, failure: Failure<E>) {
        self.failure.lock().get_or_insert(failure);
        self.stop.store(true, Ordering::Release);
        let _ready = self.ready.lock();
        self.ready_cv.notify_all();
    }

    /// Algorithm 3's worker: replays ready transactions until every one is recovered or dropped.
    fn worker<S: Default>(&self, apply: &(impl Fn(&mut S, &T) -> Result<(), E> + Sync)) {
        let mut state = S::default();
        while let Some(node) = self.next_ready() {
            let txn = node.inner.lock().txn.take();
            if let Some(txn) = txn {
                let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(&mut state, &txn)));
                match applied {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return self.fail(Failure::Failed(e)),
                    Err(panic) => {
                        let message = crate::durability::panic_message(panic.as_ref());
                        return self.fail(Failure::Panicked { message });
                    }
                }
            }
            self.finish(&node, RECOVERED);
            self.recovered.fetch_add(1, Ordering::AcqRel);
            self.unfinished.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The next ready node; `None` when the run is over (done, failed, or stuck on a cycle).
    fn next_ready(&self) -> Option<Arc<Node<T>>> {
        let mut ready = self.ready.lock();
        loop {
            if self.stop.load(Ordering::Acquire) {
                return None;
            }
            if let Some(node) = ready.queue.pop_front() {
                return Some(node);
            }
            if self.reading_done.load(Ordering::Acquire) {
                let left = self.unfinished.load(Ordering::Acquire);
                if left == 0 {
                    self.ready_cv.notify_all();
                    return None;
                }
                // Every other worker waits too, with nothing queued: nothing can run again.
                if ready.idle + 1 == self.workers {
                    drop(ready);
                    self.fail(Failure::Cycle { left });
                    return None;
                }
            }
            ready.idle += 1;
            self.ready_cv.wait(&mut ready);
            ready.idle -= 1;
        }
    }
}

/// The id of a log's first transaction that is not covered by its retained start.
fn first_id(logger: usize, retained_start: u64) -> u64 {
    format::txn_id(logger, retained_start + 1)
}

/// A log's garbage collection (Algorithm 6), run by its I/O thread.
pub struct Gc<'g, T, E> {
    graph: &'g Graph<T, E>,
    logger: usize,
    gc_queue: VecDeque<Arc<Node<T>>>,
    peak: usize,
    inflight_max: usize,
    /// Waiting stalled (no transaction was recovered for [`STALL_MS`]): the log reads on
    /// without waiting until its queue is down to half the bound.
    stalled: bool,
}

impl<T: graph::Node + Send, E: Send> Gc<'_, T, E> {
    /// Collects the recovered head of the queue, in id order.
    fn collect(&mut self) {
        while let Some(head) = self.gc_queue.front() {
            if head.state.load(Ordering::Acquire) != RECOVERED {
                break;
            }
            let id = head.id;
            let mut shard = self.graph.nodes[shard_of(id)].lock();
            self.graph.min_gc_id[self.logger].store(id + 1, Ordering::Release);
            shard.remove(&id);
            drop(shard);
            self.gc_queue.pop_front();
        }
    }

    /// Inserts `txn` (Algorithm 4), collects (Algorithm 6), and waits while this log has too
    /// many transactions not yet collected.
    pub fn insert(&mut self, txn: T) -> Result<(), Interrupt> {
        let node = self.graph.insert(txn)?;
        self.gc_queue.push_back(node);
        self.peak = self.peak.max(self.gc_queue.len());
        self.collect();
        if self.stalled && self.gc_queue.len() <= self.inflight_max / 2 {
            self.stalled = false;
        }
        if self.stalled || self.gc_queue.len() < self.inflight_max || self.graph.unbounded.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut seen = self.graph.recovered.load(Ordering::Acquire);
        let mut since = Instant::now();
        while self.gc_queue.len() >= self.inflight_max && !self.graph.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_micros(200));
            self.collect();
            let now = self.graph.recovered.load(Ordering::Acquire);
            if now != seen {
                (seen, since) = (now, Instant::now());
            } else if since.elapsed() >= Duration::from_millis(STALL_MS) {
                self.stalled = true;
                break;
            }
        }
        Ok(())
    }
}

/// Recovers the transactions of `loggers` logs: `read(logger, gc)` reads one log in order,
/// passing each transaction to `gc.insert`, and returns its valid end (logical offset); `apply`
/// replays one transaction on one of `threads` workers. `retained_start[l]` is log `l`'s
/// retained start. A log's I/O thread waits while `inflight_max` of its transactions are read
/// and not collected ([`INFLIGHT_TXNS_MAX`] unless a test wants it small).
pub fn run<T, S, E, R, A>(
    retained_start: &[u64],
    threads: usize,
    inflight_max: usize,
    read: R,
    apply: A,
) -> Result<Outcome, Failure<E>>
where
    T: graph::Node + Send,
    S: Default,
    E: Send,
    R: Fn(usize, &mut Gc<'_, T, E>) -> Result<u64, E> + Sync,
    A: Fn(&mut S, &T) -> Result<(), E> + Sync,
{
    let loggers = retained_start.len();
    let threads = threads.max(1);
    let graph: Graph<T, E> = Graph::new(retained_start, threads);
    let readers_left = AtomicUsize::new(loggers);
    let valid_end: Vec<AtomicU64> = retained_start.iter().map(|&r| AtomicU64::new(r)).collect();
    let dropped = AtomicU64::new(0);
    let peaks = AtomicUsize::new(0);
    let finish = || {
        if readers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let ends: Vec<u64> = valid_end.iter().map(|v| v.load(Ordering::Acquire)).collect();
            dropped.store(graph.finish_reading(&ends), Ordering::Release);
        }
    };
    std::thread::scope(|scope| {
        for logger in 0..loggers {
            let (graph, read, finish, valid_end, peaks) = (&graph, &read, &finish, &valid_end, &peaks);
            scope.spawn(move || {
                let mut gc = Gc {
                    graph,
                    logger,
                    gc_queue: VecDeque::new(),
                    peak: 0,
                    inflight_max: inflight_max.max(1),
                    stalled: false,
                };
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(logger, &mut gc)));
                match result {
                    Ok(Ok(end)) => valid_end[logger].store(end, Ordering::Release),
                    Ok(Err(e)) => graph.fail(Failure::Failed(e)),
                    Err(panic) => {
                        let message = crate::durability::panic_message(panic.as_ref());
                        graph.fail(Failure::Panicked { message });
                    }
                }
                peaks.fetch_add(gc.peak, Ordering::AcqRel);
                finish();
            });
        }
        if loggers == 0 {
            finish_empty(&graph);
        }
        for _ in 0..threads {
            let (graph, apply) = (&graph, &apply);
            scope.spawn(move || graph.worker(apply));
        }
    });
    if let Some(failure) = graph.failure.lock().take() {
        return Err(failure);
    }
    let recovered = graph.recovered.load(Ordering::Acquire);
    let dropped = dropped.load(Ordering::Acquire);
    Ok(Outcome { read: recovered + dropped, recovered, dropped, inflight_peak: peaks.load(Ordering::Acquire) })
}

/// A run without logs: reading is done at once.
fn finish_empty<T: graph::Node + Send, E: Send>(graph: &Graph<T, E>) {
    graph.finish_reading(&[]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A logged transaction; `time` is its place in the order it committed in.
    #[derive(Clone, Debug)]
    struct T {
        id: u64,
        time: u64,
        deps: Deps,
    }

    impl graph::Node for T {
        fn id(&self) -> u64 {
            self.id
        }
        fn deps(&self) -> &Deps {
            &self.deps
        }
        fn seq(&self) -> u64 {
            self.time
        }
        fn raw_order(&self) -> u64 {
            self.time
        }
    }

    fn lists(raw: &[u64], waw: &[u64]) -> Deps {
        Deps::Lists { raw: raw.to_vec(), waw: waw.to_vec(), fresh_writes: false }
    }

    /// Runs the streaming recovery over `logs` (each in log order); returns the ids applied, in
    /// the order they were, and the outcome.
    fn recover(
        logs: &[Vec<T>],
        retained_start: &[u64],
        threads: usize,
        inflight_max: usize,
    ) -> Result<(Vec<u64>, Outcome), Failure<String>> {
        let applied = Mutex::new(Vec::new());
        let read = |logger: usize, gc: &mut Gc<'_, T, String>| -> Result<u64, String> {
            let mut end = retained_start[logger];
            for txn in &logs[logger] {
                end = format::split_id(txn.id).1;
                match gc.insert(txn.clone()) {
                    Ok(()) => {}
                    Err(Interrupt::Stopped) => return Err("stopped".into()),
                    Err(Interrupt::Duplicate(id)) => return Err(format!("duplicate {id:#x}")),
                }
            }
            Ok(end)
        };
        let apply = |_: &mut (), txn: &T| -> Result<(), String> {
            applied.lock().push(txn.id);
            Ok(())
        };
        let outcome = run(retained_start, threads, inflight_max, read, apply)?;
        Ok((applied.into_inner(), outcome))
    }

    fn id(logger: usize, address: u64) -> u64 {
        format::txn_id(logger, address)
    }

    /// The recoverable set by the batch graph (`graph.rs`), the reference.
    fn batch_recoverable(logs: &[Vec<T>], retained_start: &[u64], valid_end: &[u64]) -> Vec<u64> {
        let all: Vec<&T> = logs.iter().flatten().collect();
        let index = graph::IdIndex::new(&all).expect("distinct ids");
        let extent = graph::Extent { valid_end, retained_start };
        let resolved = graph::resolve(&all, &index, &extent, 2, graph::RawEdges::WhenNeeded);
        let recoverable = graph::recoverable_set(&resolved);
        let mut ids: Vec<u64> = all.iter().zip(&recoverable).filter(|&(_, &r)| r).map(|(t, _)| t.id).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn figure_1_a_lost_raw_predecessor_drops_its_reader_and_a_lost_waw_predecessor_does_not() {
        // Logger 0: T1 at 10, T3 at 20. Logger 1: T2 at 10 reads T1, T4 at 20 overwrites T2.
        let (t1, t2, t3, t4) = (id(0, 10), id(1, 10), id(0, 20), id(1, 20));
        let full = [
            vec![T { id: t1, time: 1, deps: lists(&[], &[]) }, T { id: t3, time: 3, deps: lists(&[], &[t1]) }],
            vec![T { id: t2, time: 2, deps: lists(&[t1], &[]) }, T { id: t4, time: 4, deps: lists(&[], &[t2]) }],
        ];
        for threads in [1, 2, 3] {
            for inflight in [1, 2, 64] {
                let (mut applied, outcome) = recover(&full, &[0, 0], threads, inflight).expect("recovers");
                let order = applied.clone();
                applied.sort_unstable();
                assert_eq!(applied, {
                    let mut all = vec![t1, t2, t3, t4];
                    all.sort_unstable();
                    all
                });
                let at = |id| order.iter().position(|&x| x == id);
                assert!(at(t1) < at(t3) && at(t2) < at(t4), "WAW order kept: {order:?}");
                assert_eq!(outcome.dropped, 0);
                // Only T2 and T4 logged: T2 read T1, which is in no log, so T2 is dropped; T4
                // only overwrote T2 and is recovered.
                let partial = [vec![], full[1].clone()];
                let (applied, outcome) = recover(&partial, &[0, 0], threads, inflight).expect("recovers");
                assert_eq!(applied, vec![t4], "{threads} threads, bound {inflight}");
                assert_eq!((outcome.read, outcome.recovered, outcome.dropped), (2, 1, 1));
            }
        }
    }

    #[test]
    fn the_streaming_graph_recovers_what_the_batch_graph_does_and_keeps_waw_order() {
        for seed in 0..60u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let loggers = rng.random_range(1..=3usize);
            let mut logs: Vec<Vec<T>> = vec![Vec::new(); loggers];
            let mut next_address = vec![0u64; loggers];
            let mut all: Vec<u64> = Vec::new();
            let txns = rng.random_range(1..200u64);
            for time in 1..=txns {
                let logger = rng.random_range(0..loggers);
                next_address[logger] += rng.random_range(1..40);
                let me = id(logger, next_address[logger]);
                let pick = |rng: &mut rand::rngs::StdRng| {
                    let n = rng.random_range(0..3usize).min(all.len());
                    let mut ids: Vec<u64> = (0..n).map(|_| all[rng.random_range(0..all.len())]).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    ids
                };
                let (raw, waw) = (pick(&mut rng), pick(&mut rng));
                logs[logger].push(T { id: me, time, deps: lists(&raw, &waw) });
                all.push(me);
            }
            // The crash: each log keeps a prefix.
            for log in &mut logs {
                let keep = rng.random_range(0..=log.len());
                log.truncate(keep);
            }
            let valid_end: Vec<u64> = logs.iter().map(|l| l.last().map_or(0, |t| format::split_id(t.id).1)).collect();
            let expected = batch_recoverable(&logs, &vec![0; loggers], &valid_end);
            let threads = rng.random_range(1..=3);
            let inflight = [1usize, 3, 1 << 20][rng.random_range(0..3)];
            let (order, outcome) = recover(&logs, &vec![0; loggers], threads, inflight).expect("recovers");
            let mut got = order.clone();
            got.sort_unstable();
            assert_eq!(got, expected, "seed {seed}");
            let read = logs.iter().map(Vec::len).sum::<usize>() as u64;
            assert_eq!((outcome.read, outcome.dropped), (read, read - expected.len() as u64), "seed {seed}");
            let at: HashMap<u64, usize> = order.iter().enumerate().map(|(k, &i)| (i, k)).collect();
            for txn in logs.iter().flatten() {
                let (Some(&mine), Deps::Lists { waw, .. }) = (at.get(&txn.id), &txn.deps) else { continue };
                for p in waw {
                    if let Some(&theirs) = at.get(p) {
                        assert!(theirs < mine, "seed {seed}: {:#x} replayed before its WAW predecessor {p:#x}", txn.id);
                    }
                }
            }
        }
    }

    #[test]
    fn recovered_transactions_are_collected_so_a_log_holds_at_most_its_bound() {
        // One log, each transaction overwriting the one before: replay follows reading closely.
        let log: Vec<T> = (1..=5000u64)
            .map(|k| {
                let waw = if k > 1 { vec![id(0, (k - 1) * 8)] } else { vec![] };
                T { id: id(0, k * 8), time: k, deps: lists(&[], &waw) }
            })
            .collect();
        let (applied, outcome) = recover(std::slice::from_ref(&log), &[0], 2, 16).expect("recovers");
        assert_eq!(applied.len(), 5000);
        assert!(applied.windows(2).all(|w| w[0] < w[1]), "a WAW chain replays in order");
        assert!(outcome.inflight_peak <= 17, "peak {} over the bound", outcome.inflight_peak);
        let (_, unbounded) = recover(&[log], &[0], 2, 1 << 20).expect("recovers");
        assert!(unbounded.inflight_peak >= 16, "the measure of the peak works: {}", unbounded.inflight_peak);
    }

    #[test]
    fn retained_and_collected_predecessors_count_as_recovered() {
        // Logger 0's log starts at 100 (a checkpoint removed what was before): a predecessor at
        // or below it is covered; a collected one (110, with a bound of 1) is recovered; one in
        // logger 1's log, which is never read, is missing.
        let log = vec![
            T { id: id(0, 110), time: 1, deps: lists(&[id(0, 100)], &[id(0, 90)]) },
            T { id: id(0, 120), time: 2, deps: lists(&[id(1, 50)], &[]) },
            T { id: id(0, 130), time: 3, deps: lists(&[id(0, 110)], &[id(0, 110)]) },
        ];
        for threads in [1, 2] {
            let (applied, outcome) = recover(&[log.clone(), vec![]], &[100, 0], threads, 1).expect("recovers");
            assert_eq!(applied, vec![id(0, 110), id(0, 130)]);
            assert_eq!(outcome.dropped, 1);
        }
    }

    #[test]
    fn a_damaged_log_fails_with_a_duplicate_or_a_cycle_instead_of_hanging() {
        let twice = vec![T { id: id(0, 8), time: 1, deps: lists(&[], &[]) }; 2];
        match recover(&[twice], &[0], 2, 64) {
            Err(Failure::Failed(e)) => assert!(e.contains("duplicate"), "{e}"),
            other => panic!("expected a duplicate: {other:?}"),
        }
        // Two transactions each overwriting the other: recoverable, never ready.
        let cycle = vec![
            T { id: id(0, 8), time: 1, deps: lists(&[], &[id(0, 16)]) },
            T { id: id(0, 16), time: 2, deps: lists(&[], &[id(0, 8)]) },
        ];
        for threads in [1, 2] {
            match recover(std::slice::from_ref(&cycle), &[0], threads, 64) {
                Err(Failure::Cycle { left }) => assert_eq!(left, 2),
                other => panic!("expected a cycle: {other:?}"),
            }
        }
        // A bound of one with the cycle's head waiting: the reader reads on after the stall.
        match recover(&[cycle], &[0], 1, 1) {
            Err(Failure::Cycle { left }) => assert_eq!(left, 2),
            other => panic!("expected a cycle: {other:?}"),
        }
    }

    #[test]
    fn compressed_records_are_decided_by_the_logs_valid_ends() {
        let vectors = |pv: &[u64]| Deps::Vectors { pv: pv.to_vec(), waw: vec![0; pv.len()] };
        let logs = [
            vec![T { id: id(0, 10), time: 1, deps: vectors(&[10, 5]) }],
            vec![
                T { id: id(1, 5), time: 2, deps: vectors(&[10, 5]) },
                T { id: id(1, 9), time: 3, deps: vectors(&[20, 9]) },
            ],
        ];
        let (mut applied, outcome) = recover(&logs, &[0, 0], 2, 1).expect("recovers");
        applied.sort_unstable();
        assert_eq!(applied, vec![id(0, 10), id(1, 5)], "the third needs logger 0 up to 20; it ends at 10");
        assert_eq!(outcome.dropped, 1);
    }
}
