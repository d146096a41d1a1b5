//! `clr-p` (PACMAN's parallel command-log replay, §4.2–4.4) and `llr-p` (latch-free parallel
//! replay of write sets, §4.5 and §6.2).
//!
//! # clr-p
//!
//! The sorted entries (a serial order, see [`super`]) are cut into **log batches** of at most
//! [`BATCH_TXNS_MAX`] transactions; a call of a procedure the static analysis could not slice
//! ([`crate::pacman::StaticAnalysis::fallback`]) is a batch of its own that runs whole, serially,
//! after everything before it and before everything after it. A batch's **execution schedule** has
//! one piece-set per block of the global dependency graph: every call contributes one piece per
//! slice to its slice's block, every ad-hoc write set one *data piece* per block whose tables it
//! writes; pieces in a piece-set keep the batch's commit order.
//!
//! - **Static** (`clr-p-static`, §4.2.1): each piece-set runs on one thread, in order; a piece-set
//!   starts once its parent blocks' piece-sets of the batch are done; batches run one after
//!   another (a barrier between them).
//! - **Intra-batch** (`clr-p-intra`, §4.3.1): a piece-set of block `b` is split into `k_b`
//!   partitions by the **key spaces** the logged parameters give ([`crate::pacman::piece`]): a
//!   piece goes to the partitions `hash(v) mod k_b` of its key values `v`; a piece with no key
//!   source (or spanning several partitions) is in each of them, and runs once every partition
//!   has reached it (the last to arrive runs it; the others are suspended and requeued, no thread
//!   blocks). Pieces of a block that no one writes commute and are dealt round-robin. `k_b` is the
//!   block's share of the threads in proportion to its measured load — its number of pieces in the
//!   whole log, counted while loading (§4.4).
//! - **Pipelined** (`clr-p`, §4.3.2): as intra-batch, but a batch's piece-set of block `b` waits
//!   only for its parents in the batch and for block `b`'s piece-set of the previous batch, not for
//!   the whole previous batch.
//!
//! Pieces of different blocks never touch a table one of them writes (blocks hold every slice
//! touching a written table), so the only orders to keep are those above. A piece runs as its own
//! transaction on an unlogged replay worker ([`crate::db::Database::replay_worker`]) and commits
//! **without latches** ([`crate::txn::Transaction::commit_replay`]): the schedule never lets two
//! conflicting pieces run at once, so no record is locked and nothing is validated; the writes go
//! through the engine's own write path (point index, secondary indexes, install). The values a piece needs from an earlier slice of its call are the ones
//! that slice's piece recorded ([`crate::pacman::piece::Recording`]), kept per batch until the
//! batch is done.
//!
//! # llr-p
//!
//! Write sets only (a log written with every transaction logged as data): each write goes to the
//! thread `hash(table, key) mod threads`; each thread installs its writes in commit order with
//! [`crate::storage::Table::install_if_newer`] and the logged TID — no latch, no transaction, as
//! no other thread touches those keys; secondary indexes are built afterwards.

use super::wake_queue::WakeQueue;
use super::{CommandEntry, CommandReplay};
use crate::db::Database;
use crate::durability::DurabilityError;
use crate::durability::codec::Image;
use crate::pacman::piece::{ProcedurePlan, Recording};
use crate::pacman::{self, SliceId};
use crate::storage::Value;
use crate::storage::key::{decode_key, encode_value};
use parking_lot::Mutex;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Most transactions in one log batch.
pub const BATCH_TXNS_MAX: usize = 4096;
/// Most replay threads.
pub const THREADS_MAX: usize = 256;
/// A data piece (an ad-hoc write set's writes to one block), in place of a slice id.
const DATA_PIECE: u32 = u32::MAX;
/// A whole call run serially (a fallback procedure), in place of a slice id.
const SERIAL_PIECE: u32 = u32::MAX - 1;

/// Where the time of a parallel replay went (PACMAN Figure 20), and what was measured to model
/// more threads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayBreakdown {
    /// The engine.
    pub engine: String,
    /// Replay threads.
    pub threads: usize,
    /// Reading and decoding the log files, in milliseconds.
    pub loading_ms: f64,
    /// Static analysis and the dynamic analysis of parameters (key spaces), in milliseconds.
    pub analysis_ms: f64,
    /// Building the execution schedules (batches, piece-sets, partitions), in milliseconds.
    pub scheduling_ms: f64,
    /// Running the schedules, wall clock, in milliseconds.
    pub execution_ms: f64,
    /// Summed over threads: time spent inside pieces (or installs), in milliseconds.
    pub busy_ms: f64,
    /// Batches (`clr-p`).
    pub batches: usize,
    /// Pieces run (`clr-p`) or writes installed (`llr-p`).
    pub pieces: u64,
    /// Per block: (pieces, nanoseconds inside them), summed over threads.
    pub per_block: Vec<(u64, u64)>,
    /// Threads per block (§4.4).
    pub threads_per_block: Vec<usize>,
    /// (threads, modelled execution milliseconds): max(work ÷ threads, the longest chain of
    /// piece-sets), from the measured mean cost per piece of each block.
    pub model: Vec<(usize, f64)>,
}

/// One piece of a piece-set.
#[derive(Clone, Copy, Debug)]
struct Piece {
    /// Index into the sorted entries.
    entry: u32,
    /// Slice id, [`DATA_PIECE`] or [`SERIAL_PIECE`].
    slice: u32,
}

/// Arrivals at a piece several partitions share.
struct Cross {
    arrived: u32,
    waiters: Vec<Task>,
}

struct PieceSet {
    batch: usize,
    block: usize,
    pieces: Vec<Piece>,
    /// Per partition: indices into `pieces`, in commit order.
    parts: Vec<Vec<u32>>,
    /// Per piece: index into `cross` if it is in more than one partition, else `u32::MAX`.
    cross_of: Vec<u32>,
    /// Per shared piece: how many partitions hold it, and who has arrived.
    cross: Vec<(u32, Mutex<Cross>)>,
    /// Dependencies not yet met.
    waiting: AtomicUsize,
    /// Partitions not yet done.
    parts_left: AtomicUsize,
}

struct Batch {
    /// First entry (global index).
    first: usize,
    /// Whether it waits for the whole previous batch.
    barrier: bool,
    /// Per entry of the batch: the offset of its slices in the recordings.
    record_offset: Vec<u32>,
    record_len: usize,
    records: Mutex<Option<Arc<[OnceLock<Recording>]>>>,
    sets_left: AtomicUsize,
}

#[derive(Clone, Copy, Debug)]
struct Task {
    set: usize,
    part: u32,
    pos: u32,
}

/// What the replay needs to know about the procedures and tables.
struct Plans {
    /// By registry id: the plan, or `None` for a procedure replayed whole (fallback).
    procedures: Vec<Option<ProcedurePlan>>,
    /// By registry id, per final slice: its block.
    block_of_slice: Vec<Vec<usize>>,
    /// By table id: the block its ad-hoc writes replay in.
    block_of_table: Vec<usize>,
    /// By block: whether anything in it writes.
    block_writes: Vec<bool>,
    /// By block: its parents.
    parents: Vec<Vec<usize>>,
    /// By block: its children.
    children: Vec<Vec<usize>>,
    blocks: usize,
}

fn failed(message: String) -> DurabilityError {
    DurabilityError::Failed(message)
}

fn build_plans(db: &Database) -> Result<Plans, DurabilityError> {
    let registry = db.procedures();
    let catalog = db.catalog();
    let irs: Vec<&crate::proc::Procedure> = registry.all().iter().map(|p| p.ir().as_ref()).collect();
    let tables: Vec<&str> = catalog.tables().iter().map(|t| t.schema.name.as_str()).collect();
    let analysis = pacman::analyze(&irs, &tables).map_err(|e| failed(format!("static analysis: {e}")))?;
    let graph = &analysis.graph;
    let blocks = graph.blocks().len();
    let mut procedures = Vec::with_capacity(irs.len());
    let mut block_of_slice = Vec::with_capacity(irs.len());
    let mut block_writes = vec![false; blocks];
    for compiled in registry.all() {
        match graph.procedure(compiled.name()) {
            Some((id, slicing)) => {
                let plan = ProcedurePlan::new(id, Arc::clone(compiled), slicing, &catalog);
                for (s, b) in slicing.block_of.iter().enumerate() {
                    block_writes[b.index()] |= plan.slices[s].writes;
                }
                block_of_slice.push(slicing.block_of.iter().map(|b| b.index()).collect());
                procedures.push(Some(plan));
            }
            None => {
                block_of_slice.push(Vec::new());
                procedures.push(None);
            }
        }
    }
    let mut block_of_table = vec![usize::MAX; catalog.tables().iter().map(|t| t.id as usize + 1).max().unwrap_or(0)];
    for t in catalog.tables() {
        let name = &t.schema.name;
        let b = graph.block_of_ad_hoc_table(name).ok_or_else(|| failed(format!("table {name} has no block")))?;
        block_of_table[t.id as usize] = b.index();
    }
    let mut parents = vec![Vec::new(); blocks];
    let mut children = vec![Vec::new(); blocks];
    for &(a, b) in graph.edges() {
        parents[b.index()].push(a.index());
        children[a.index()].push(b.index());
    }
    Ok(Plans { procedures, block_of_slice, block_of_table, block_writes, parents, children, blocks })
}

/// The threads each block's piece-sets are split over (§4.4): in proportion to the block's
/// measured load, the heaviest block getting all `threads`, every block at least one. The threads
/// are one pool that takes whatever piece-set partition is ready, so the shares bound each block's
/// parallelism rather than pinning cores; normalizing by the heaviest block (not the sum) keeps
/// intra-batch parallelism when there are fewer threads than blocks.
fn threads_per_block(load: &[u64], threads: usize) -> Vec<usize> {
    let heaviest = load.iter().copied().max().unwrap_or(0).max(1);
    load.iter().map(|&l| ((threads as f64 * l as f64 / heaviest as f64).round() as usize).clamp(1, threads)).collect()
}

/// The partition a key value falls in, out of `k`. Integral floats hash as ints, so a float
/// parameter logged as an int still meets the float column's value.
fn partition_of(v: &Value, k: usize, buf: &mut Vec<u8>) -> usize {
    buf.clear();
    match v {
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => encode_value(&Value::Int(*f as i64), buf),
        _ => encode_value(v, buf),
    }
    (foldhash::fast::FixedState::with_seed(0x5eed).hash_one(&buf[..]) % k as u64) as usize
}

/// The partitions a piece belongs to, out of `k` (dynamic analysis, §4.3.1). `None`: all.
fn piece_partitions(
    plans: &Plans,
    entries: &[&CommandEntry],
    piece: Piece,
    block: usize,
    k: usize,
    round_robin: usize,
    out: &mut Vec<usize>,
) {
    out.clear();
    if k == 1 {
        out.push(0);
        return;
    }
    if !plans.block_writes[block] {
        out.push(round_robin % k);
        return;
    }
    let mut values = Vec::new();
    let known = match entries[piece.entry as usize] {
        CommandEntry::Call { procedure_id, args, .. } => {
            match plans.procedures.get(*procedure_id as usize).and_then(Option::as_ref) {
                Some(plan) if piece.slice != SERIAL_PIECE => match &plan.slices[piece.slice as usize].key {
                    Some(sources) => {
                        sources.iter().for_each(|s| s.values(args, &mut values));
                        true
                    }
                    None => false,
                },
                _ => false,
            }
        }
        CommandEntry::Data { entry, .. } => {
            let mut ok = true;
            for w in entry.writes.iter().filter(|w| plans.block_of_table.get(w.table as usize) == Some(&block)) {
                match decode_key(&w.key).ok().and_then(|k| k.into_iter().next()) {
                    Some(v) => values.push(v),
                    None => ok = false,
                }
            }
            ok
        }
    };
    if !known {
        out.extend(0..k);
        return;
    }
    let mut buf = Vec::new();
    out.extend(values.iter().map(|v| partition_of(v, k, &mut buf)));
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        // No operation ran (an empty array): any one partition keeps it in order there.
        out.push(0);
    }
}

/// The replay variant's switches.
#[derive(Clone, Copy)]
struct Variant {
    intra: bool,
    pipelined: bool,
}

impl Variant {
    fn of(engine: CommandReplay) -> Variant {
        match engine {
            CommandReplay::ClrPStatic => Variant { intra: false, pipelined: false },
            CommandReplay::ClrPIntra => Variant { intra: true, pipelined: false },
            _ => Variant { intra: true, pipelined: true },
        }
    }
}

/// The pieces of each block of each batch, in commit order. Returns the batches (first, len,
/// serial) and per batch per block the pieces.
fn cut_batches(
    plans: &Plans,
    entries: &[&CommandEntry],
    batch_txns: usize,
) -> Vec<(usize, usize, bool, Vec<Vec<Piece>>)> {
    let mut out = Vec::new();
    let mut first = 0;
    let mut sets: Vec<Vec<Piece>> = vec![Vec::new(); plans.blocks];
    let flush = |out: &mut Vec<_>, first: &mut usize, end: usize, sets: &mut Vec<Vec<Piece>>| {
        if end > *first {
            out.push((*first, end - *first, false, std::mem::replace(sets, vec![Vec::new(); plans.blocks])));
        }
        *first = end;
    };
    for (i, e) in entries.iter().enumerate() {
        let serial = match e {
            CommandEntry::Call { procedure_id, .. } => {
                plans.procedures.get(*procedure_id as usize).and_then(Option::as_ref).is_none()
            }
            CommandEntry::Data { .. } => false,
        };
        if serial {
            flush(&mut out, &mut first, i, &mut sets);
            let mut alone = vec![Vec::new(); plans.blocks];
            if let Some(s) = alone.first_mut() {
                s.push(Piece { entry: i as u32, slice: SERIAL_PIECE });
            }
            out.push((i, 1, true, alone));
            first = i + 1;
            continue;
        }
        match e {
            CommandEntry::Call { procedure_id, .. } => {
                for (s, &b) in plans.block_of_slice[*procedure_id as usize].iter().enumerate() {
                    sets[b].push(Piece { entry: i as u32, slice: s as u32 });
                }
            }
            CommandEntry::Data { entry, .. } => {
                let mut blocks: Vec<usize> =
                    entry.writes.iter().filter_map(|w| plans.block_of_table.get(w.table as usize).copied()).collect();
                blocks.sort_unstable();
                blocks.dedup();
                for b in blocks {
                    sets[b].push(Piece { entry: i as u32, slice: DATA_PIECE });
                }
            }
        }
        if i + 1 - first >= batch_txns {
            flush(&mut out, &mut first, i + 1, &mut sets);
        }
    }
    flush(&mut out, &mut first, entries.len(), &mut sets);
    out
}

/// Splits a piece-set's pieces into `k` partitions.
#[allow(clippy::type_complexity)]
fn partition_set(
    plans: &Plans,
    entries: &[&CommandEntry],
    pieces: &[Piece],
    block: usize,
    k: usize,
) -> (Vec<Vec<u32>>, Vec<u32>, Vec<u32>) {
    let mut parts = vec![Vec::new(); k];
    let mut cross_of = vec![u32::MAX; pieces.len()];
    let mut spans = Vec::new();
    let mut scratch = Vec::new();
    for (i, &piece) in pieces.iter().enumerate() {
        piece_partitions(plans, entries, piece, block, k, i, &mut scratch);
        if scratch.len() > 1 {
            cross_of[i] = spans.len() as u32;
            spans.push(scratch.len() as u32);
        }
        for &p in &scratch {
            parts[p].push(i as u32);
        }
    }
    (parts, cross_of, spans)
}

struct Shared<'a> {
    db: &'a Database,
    plans: &'a Plans,
    entries: &'a [&'a CommandEntry],
    sets: Vec<PieceSet>,
    batches: Vec<Batch>,
    variant: Variant,
    /// Partitions ready to run; stopped when every set is done or one failed.
    tasks: WakeQueue<Task>,
    sets_left: AtomicUsize,
    error: Mutex<Option<String>>,
}

/// Per-thread measurements.
#[derive(Default)]
struct ThreadStats {
    per_block: Vec<(u64, u64)>,
    busy_ns: u64,
}

/// Replays `entries` (sorted in commit order) with clr-p's `engine` variant on `threads` threads.
pub fn replay_clr_p(
    db: &Database,
    entries: &[&CommandEntry],
    engine: CommandReplay,
    threads: usize,
    batch_txns: usize,
    breakdown: &mut ReplayBreakdown,
) -> Result<(), DurabilityError> {
    let threads = threads.clamp(1, THREADS_MAX);
    let variant = Variant::of(engine);
    let analysis_start = Instant::now();
    let mut plans = build_plans(db)?;
    breakdown.analysis_ms += analysis_start.elapsed().as_secs_f64() * 1e3;

    let schedule_start = Instant::now();
    let batch_txns = if batch_txns == 0 { BATCH_TXNS_MAX } else { batch_txns.min(BATCH_TXNS_MAX) };
    let cut = cut_batches(&plans, entries, batch_txns);
    let mut load = vec![0u64; plans.blocks];
    for (_, _, _, sets) in &cut {
        for (b, s) in sets.iter().enumerate() {
            load[b] += s.len() as u64;
            // Ad-hoc writes make a block written, whatever its slices do.
            plans.block_writes[b] |= s.iter().any(|p| p.slice == DATA_PIECE);
        }
    }
    let plans = plans;
    let k_of = if variant.intra { threads_per_block(&load, threads) } else { vec![1; plans.blocks] };
    breakdown.scheduling_ms += schedule_start.elapsed().as_secs_f64() * 1e3;

    // The dynamic analysis: key spaces of every piece, partitions.
    let dynamic_start = Instant::now();
    let mut sets = Vec::with_capacity(cut.len() * plans.blocks);
    let mut batches = Vec::with_capacity(cut.len());
    let mut previous_serial = false;
    for (b, (first, len, serial, pieces_by_block)) in cut.into_iter().enumerate() {
        let barrier = b > 0 && (!variant.pipelined || serial || previous_serial);
        previous_serial = serial;
        let batch_entries = &entries[first..first + len];
        let mut record_offset = Vec::with_capacity(len);
        let mut offset = 0u32;
        for e in batch_entries {
            record_offset.push(offset);
            if let CommandEntry::Call { procedure_id, .. } = e {
                offset += plans.block_of_slice.get(*procedure_id as usize).map_or(0, |s| s.len() as u32);
            }
        }
        for (block, pieces) in pieces_by_block.into_iter().enumerate() {
            let k = if pieces.is_empty() { 0 } else { k_of[block] };
            let (parts, cross_of, spans) = if k == 0 {
                (Vec::new(), Vec::new(), Vec::new())
            } else {
                partition_set(&plans, entries, &pieces, block, k)
            };
            let waiting = plans.parents[block].len() + usize::from(b > 0);
            sets.push(PieceSet {
                batch: b,
                block,
                parts_left: AtomicUsize::new(parts.len()),
                cross: spans.into_iter().map(|n| (n, Mutex::new(Cross { arrived: 0, waiters: Vec::new() }))).collect(),
                pieces,
                parts,
                cross_of,
                waiting: AtomicUsize::new(waiting),
            });
        }
        batches.push(Batch {
            first,
            barrier,
            record_offset,
            record_len: offset as usize,
            records: Mutex::new(None),
            sets_left: AtomicUsize::new(plans.blocks),
        });
    }
    breakdown.analysis_ms += dynamic_start.elapsed().as_secs_f64() * 1e3;
    breakdown.batches = batches.len();
    breakdown.threads_per_block = k_of.clone();

    let execution_start = Instant::now();
    let total_sets = sets.len();
    let shared = Shared {
        db,
        plans: &plans,
        entries,
        sets,
        batches,
        variant,
        tasks: WakeQueue::new(total_sets == 0),
        sets_left: AtomicUsize::new(total_sets),
        error: Mutex::new(None),
    };
    // The first batch's roots are ready.
    let roots: Vec<usize> = (0..plans.blocks.min(total_sets)).filter(|&i| plans.parents[i].is_empty()).collect();
    for set in roots {
        shared.sets[set].waiting.store(0, Ordering::SeqCst);
        shared.start_set(set);
    }
    let stats: Vec<ThreadStats> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(|| shared.work())).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    breakdown.execution_ms += execution_start.elapsed().as_secs_f64() * 1e3;
    if let Some(e) = shared.error.lock().take() {
        return Err(failed(e));
    }
    if shared.sets_left.load(Ordering::SeqCst) != 0 {
        return Err(failed("clr-p stopped with piece-sets left (a replay thread panicked?)".into()));
    }
    breakdown.threads = threads;
    breakdown.per_block = vec![(0, 0); plans.blocks];
    for s in &stats {
        breakdown.busy_ms += s.busy_ns as f64 / 1e6;
        for (b, (n, ns)) in s.per_block.iter().enumerate() {
            breakdown.per_block[b].0 += n;
            breakdown.per_block[b].1 += ns;
        }
    }
    breakdown.pieces = breakdown.per_block.iter().map(|p| p.0).sum();
    breakdown.model = [1, 2, 16, 40].iter().map(|&n| (n, model(&shared, &load, &breakdown.per_block, n))).collect();
    Ok(())
}

/// Modelled execution milliseconds on `n` threads (module docs of [`ReplayBreakdown::model`]).
fn model(shared: &Shared<'_>, load: &[u64], per_block: &[(u64, u64)], n: usize) -> f64 {
    let plans = shared.plans;
    let mean: Vec<f64> = per_block.iter().map(|&(c, ns)| if c == 0 { 0.0 } else { ns as f64 / c as f64 }).collect();
    let work: f64 = per_block.iter().map(|p| p.1 as f64).sum();
    let k_of = if shared.variant.intra { threads_per_block(load, n) } else { vec![1; plans.blocks] };
    // The longest chain: per batch, the longest path through the blocks (each piece-set costs its
    // largest partition); batches follow one another per block (pipelined) or as a whole.
    let mut finish_prev = vec![0.0f64; plans.blocks];
    let mut batch_end = 0.0f64;
    let mut cursor = 0;
    for batch in &shared.batches {
        let mut finish = vec![0.0f64; plans.blocks];
        for block in 0..plans.blocks {
            let set = &shared.sets[cursor + block];
            let cost = if set.pieces.is_empty() {
                0.0
            } else {
                let (parts, _, _) = partition_set(plans, shared.entries, &set.pieces, block, k_of[block]);
                parts.iter().map(|p| p.len() as f64 * mean[block]).fold(0.0, f64::max)
            };
            let mut start = plans.parents[block].iter().map(|&p| finish[p]).fold(0.0, f64::max);
            start = start.max(if batch.barrier || !shared.variant.pipelined { batch_end } else { finish_prev[block] });
            finish[block] = start + cost;
        }
        batch_end = finish.iter().copied().fold(batch_end, f64::max);
        finish_prev = finish;
        cursor += plans.blocks;
    }
    (work / n as f64).max(batch_end) / 1e6
}

impl Shared<'_> {
    fn fail(&self, message: String) {
        self.error.lock().get_or_insert(message);
        self.stop_workers();
    }

    /// Tells every worker to return (without a lost wake-up: [`WakeQueue`]).
    fn stop_workers(&self) {
        self.tasks.stop();
    }

    /// A piece-set whose dependencies are met: queue its partitions (or finish it if empty).
    fn start_set(&self, set: usize) {
        let parts = self.sets[set].parts.len();
        if parts == 0 {
            self.finish_set(set);
            return;
        }
        self.tasks.push_all((0..parts).map(|p| Task { set, part: p as u32, pos: 0 }));
    }

    fn release(&self, set: usize) {
        if self.sets[set].waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.start_set(set);
        }
    }

    fn finish_set(&self, set: usize) {
        let blocks = self.plans.blocks;
        let (batch, block) = (self.sets[set].batch, self.sets[set].block);
        for &child in &self.plans.children[block] {
            self.release(batch * blocks + child);
        }
        let next = batch + 1;
        if next < self.batches.len() && !self.batches[next].barrier {
            self.release(next * blocks + block);
        }
        if self.batches[batch].sets_left.fetch_sub(1, Ordering::SeqCst) == 1 {
            // The batch is done: its recordings go, the epoch moves on (TIDs stay unexhausted).
            *self.batches[batch].records.lock() = None;
            self.db.epochs().advance();
            if next < self.batches.len() && self.batches[next].barrier {
                for b in 0..blocks {
                    self.release(next * blocks + b);
                }
            }
        }
        if self.sets_left.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.stop_workers();
        }
    }

    fn work(&self) -> ThreadStats {
        let mut stats = ThreadStats { per_block: vec![(0, 0); self.plans.blocks], busy_ns: 0 };
        let mut worker = self.db.replay_worker();
        loop {
            let Some(task) = self.tasks.pop_or_wait() else { return stats };
            if let Err(e) = self.run_task(task, &mut worker, &mut stats) {
                self.fail(e);
                return stats;
            }
        }
    }

    /// Runs a partition from `task.pos` until its end or a shared piece others have not reached.
    fn run_task(&self, task: Task, worker: &mut crate::db::Worker, stats: &mut ThreadStats) -> Result<(), String> {
        let set = &self.sets[task.set];
        let part = &set.parts[task.part as usize];
        let batch = &self.batches[set.batch];
        let records = batch
            .records
            .lock()
            .get_or_insert_with(|| (0..batch.record_len).map(|_| OnceLock::new()).collect())
            .clone();
        let mut pos = task.pos as usize;
        while pos < part.len() {
            if self.tasks.is_stopped() {
                return Ok(());
            }
            let index = part[pos] as usize;
            let cross = set.cross_of[index];
            if cross != u32::MAX {
                let (spans, state) = &set.cross[cross as usize];
                let mut state = state.lock();
                state.arrived += 1;
                if state.arrived < *spans {
                    state.waiters.push(Task { pos: pos as u32 + 1, ..task });
                    return Ok(());
                }
            }
            let started = Instant::now();
            self.run_piece(set.pieces[index], set.block, batch, &records, worker)?;
            let ns = started.elapsed().as_nanos() as u64;
            stats.busy_ns += ns;
            stats.per_block[set.block].0 += 1;
            stats.per_block[set.block].1 += ns;
            if cross != u32::MAX {
                let waiters = std::mem::take(&mut set.cross[cross as usize].1.lock().waiters);
                if !waiters.is_empty() {
                    self.tasks.push_all(waiters);
                }
            }
            pos += 1;
        }
        if set.parts_left.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.finish_set(task.set);
        }
        Ok(())
    }

    fn run_piece(
        &self,
        piece: Piece,
        block: usize,
        batch: &Batch,
        records: &[OnceLock<Recording>],
        worker: &mut crate::db::Worker,
    ) -> Result<(), String> {
        let entry = self.entries[piece.entry as usize];
        let seq = entry.seq();
        let diverged = |what: String| format!("replay of commit {seq} diverged: {what}");
        match (entry, piece.slice) {
            (CommandEntry::Call { procedure_id, args, .. }, SERIAL_PIECE) => {
                let registry = self.db.procedures();
                worker.call_id(&registry, *procedure_id, args).map_err(|e| diverged(e.to_string()))?;
            }
            (CommandEntry::Call { procedure_id, args, .. }, slice) => {
                let plan = self.plans.procedures[*procedure_id as usize]
                    .as_ref()
                    .ok_or_else(|| diverged("no piece plan".into()))?;
                let local = piece.entry as usize - batch.first;
                let offset = batch.record_offset[local] as usize;
                let slice_plan = &plan.slices[slice as usize];
                let mut inputs: Vec<Option<&Recording>> = vec![None; plan.slices.len()];
                for &a in &slice_plan.ancestors {
                    inputs[a.index()] = records[offset + a.index()].get();
                }
                let mut tx = worker.begin();
                let recording = plan
                    .run_piece(SliceId(slice), args, &inputs, &mut tx)
                    .map_err(|e| diverged(format!("slice {slice}: {e}")))?;
                tx.commit_replay().map_err(|e| diverged(format!("slice {slice}: {e}")))?;
                if slice_plan.records {
                    let _ = records[offset + slice as usize].set(recording);
                }
            }
            (CommandEntry::Data { entry, .. }, _) => self.apply_data(entry, block, worker).map_err(diverged)?,
        }
        Ok(())
    }

    /// An ad-hoc write set's writes to the tables of `block`, as one transaction.
    fn apply_data(
        &self,
        entry: &crate::durability::codec::Entry,
        block: usize,
        worker: &mut crate::db::Worker,
    ) -> Result<(), String> {
        let mut txn = worker.begin();
        for write in entry.writes.iter().filter(|w| self.plans.block_of_table.get(w.table as usize) == Some(&block)) {
            super::recovery::apply_write(&mut txn, write)?;
        }
        txn.commit_replay().map(|_| ()).map_err(|e| e.to_string())
    }
}

/// Replays write sets only (`llr-p`): shuffled by (table, key) over `threads` threads, each
/// installing its writes in commit order without latches; then builds secondary indexes.
pub fn replay_llr_p(
    db: &Database,
    entries: &[&CommandEntry],
    threads: usize,
    breakdown: &mut ReplayBreakdown,
) -> Result<(), DurabilityError> {
    let threads = threads.clamp(1, THREADS_MAX);
    if let Some(call) = entries.iter().find(|e| matches!(e, CommandEntry::Call { .. })) {
        return Err(failed(format!(
            "llr-p replays write sets only, and commit {} is a procedure call: use clr or clr-p",
            call.seq()
        )));
    }
    let execution_start = Instant::now();
    let (installed, busy_ns, shuffle_ms) = install_shuffled(db, entries, threads)?;
    breakdown.scheduling_ms += shuffle_ms;
    breakdown.pieces += installed;
    breakdown.busy_ms += busy_ns as f64 / 1e6;
    for table in db.catalog().tables() {
        table.finish_recovery();
    }
    breakdown.execution_ms += execution_start.elapsed().as_secs_f64() * 1e3 - shuffle_ms;
    breakdown.threads = threads;
    Ok(())
}

/// Installs the writes of the write-set entries among `entries` with their logged TIDs (largest
/// TID wins, SiloR §5.2), shuffled by (table, key) over `threads` threads: no two threads touch
/// one key, so no latch is needed. Secondary indexes and tombstones are left to the caller.
/// Returns (writes, nanoseconds inside installs summed over threads, shuffle milliseconds).
pub fn install_shuffled(
    db: &Database,
    entries: &[&CommandEntry],
    threads: usize,
) -> Result<(u64, u64, f64), DurabilityError> {
    let threads = threads.clamp(1, THREADS_MAX);
    let catalog = db.catalog();
    let shuffle_start = Instant::now();
    let mut shards: Vec<Vec<(u32, u32)>> = vec![Vec::new(); threads];
    for (i, e) in entries.iter().enumerate() {
        let CommandEntry::Data { entry, .. } = e else { continue };
        for (w, write) in entry.writes.iter().enumerate() {
            let mut h = foldhash::fast::FixedState::with_seed(0x5eed).build_hasher();
            std::hash::Hasher::write_u32(&mut h, write.table);
            std::hash::Hasher::write(&mut h, write.key.as_bytes());
            let shard = (std::hash::Hasher::finish(&h) % threads as u64) as usize;
            shards[shard].push((i as u32, w as u32));
        }
    }
    let shuffle_ms = shuffle_start.elapsed().as_secs_f64() * 1e3;
    let results: Vec<Result<(u64, u64), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shards
            .iter()
            .map(|shard| {
                let catalog = &catalog;
                scope.spawn(move || {
                    // These threads only install: no thread reads a row they replace.
                    let _unread = crate::storage::retire::ReplacedRowsUnread::enter();
                    let started = Instant::now();
                    for &(i, w) in shard {
                        let CommandEntry::Data { entry, .. } = entries[i as usize] else { continue };
                        let write = &entry.writes[w as usize];
                        let table = catalog.table(write.table).ok_or_else(|| format!("no table #{}", write.table))?;
                        // Shuffled, the largest TID winning: only whole rows replay in any order.
                        let row = match &write.image {
                            Image::Put(row) => {
                                table.schema.check_row(row).map_err(|e| e.to_string())?;
                                Some(row.clone())
                            }
                            Image::Delete => None,
                            Image::Patch(_) => return Err("a column patch in a write set replayed in any order".into()),
                        };
                        table.install_if_newer(&write.key, row, entry.tid);
                    }
                    Ok((shard.len() as u64, started.elapsed().as_nanos() as u64))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("an install thread panicked".into()))).collect()
    });
    let (mut installed, mut busy_ns) = (0, 0);
    for r in results {
        let (n, ns) = r.map_err(failed)?;
        installed += n;
        busy_ns += ns;
    }
    Ok((installed, busy_ns, shuffle_ms))
}
