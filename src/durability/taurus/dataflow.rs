//! Algorithm 3's worker threads: replay every transaction of a [`ReplayGraph`] once all its
//! predecessors are replayed, on any number of threads.
//!
//! Transactions are replayed in list (log) order as far as the graph allows, as serial replay
//! does: a successor is usually far later in the log, and a ready queue run last-in first-out
//! jumped across the whole decoded log, a cache miss on each record (YCSB's Taurus replay ran at
//! 0.6x the speed of serial replay on one thread). So the threads walk the list with a shared
//! cursor, and being passed by the cursor counts as one more predecessor: whoever takes a
//! transaction's count to zero (the walker, or its last predecessor's replayer) replays it.
//! A thread keeps the successors it made ready on its own stack, and hands half of it to a
//! thread that has nothing to do: once the cursor has passed them, chains of WAW successors
//! (TPC-C's warehouse and district rows) are most of the work.
//!
//! Contract: `apply` is called exactly once for each transaction `i` with `replay[i]`, and only
//! after it returned for every predecessor of `i` in the graph (the successor's count is
//! decremented after `apply` returns, with release ordering, and read with acquire). After an
//! error no new call starts, and the first error is returned. A transaction that never became
//! ready (a predecessor on a cycle, or one not replayed) makes the run fail with
//! [`Failure::Cycle`] once nothing else can run. A panic in `apply` (a bug) is caught and ends
//! the run as an error does ([`Failure::Panicked`]): a thread that died holding work would
//! leave the others waiting for it forever.

use super::graph::ReplayGraph;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

/// Positions a thread claims from the shared cursor at once.
const CURSOR_CHUNK: usize = 256;

/// Most ready transactions a waiting thread takes from the shared queue at once.
const READY_BATCH_MAX: usize = 64;

/// Why a run stopped.
#[derive(Debug)]
pub enum Failure<E> {
    /// `apply` failed (the first error).
    Apply(E),
    /// Transactions that could never become ready.
    Cycle { left: usize },
    /// `apply` panicked on transaction `transaction`.
    Panicked { transaction: usize, message: String },
}

/// What the threads share beyond the cursor: ready transactions handed over to idle threads,
/// and who waits.
struct Shared<E> {
    queue: Vec<u32>,
    /// Threads outside the wait: walking, replaying, or holding ready transactions.
    busy: usize,
    failure: Option<Failure<E>>,
}

/// Runs `apply` for every transaction with `replay[i]` in an order `graph` allows, on
/// `threads` threads, each with its own state `S`.
pub fn run<S, E, F>(graph: &ReplayGraph, replay: &[bool], threads: usize, apply: F) -> Result<(), Failure<E>>
where
    S: Default,
    E: Send,
    F: Fn(&mut S, usize) -> Result<(), E> + Sync,
{
    let threads = threads.max(1);
    let run = Run {
        graph,
        replay,
        threads,
        apply: &apply,
        pending: graph.pending.iter().map(|&p| AtomicU32::new(p.saturating_add(1))).collect(),
        remaining: AtomicUsize::new(replay.iter().filter(|&&r| r).count()),
        cursor: AtomicUsize::new(0),
        waiting: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        shared: Mutex::new(Shared { queue: Vec::new(), busy: threads, failure: None }),
        cv: Condvar::new(),
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| run.thread::<S>());
        }
    });
    match run.shared.into_inner().failure {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}

struct Run<'a, E, F> {
    graph: &'a ReplayGraph,
    replay: &'a [bool],
    threads: usize,
    apply: &'a F,
    /// Predecessors not yet replayed, plus one until the cursor passes.
    pending: Vec<AtomicU32>,
    /// Transactions not yet replayed, as published by the threads.
    remaining: AtomicUsize,
    cursor: AtomicUsize,
    waiting: AtomicUsize,
    failed: AtomicBool,
    shared: Mutex<Shared<E>>,
    cv: Condvar,
}

impl<E, F> Run<'_, E, F> {
    fn thread<S: Default>(&self)
    where
        F: Fn(&mut S, usize) -> Result<(), E>,
    {
        let (mut state, mut stack, mut done) = (S::default(), Vec::<u32>::new(), 0usize);
        loop {
            if self.failed.load(Ordering::Acquire) {
                stack.clear();
            } else if let Some(i) = stack.pop() {
                done += self.replay_one(&mut state, i, &mut stack);
                if stack.len() > 1 && self.waiting.load(Ordering::Acquire) > 0 {
                    let mut shared = self.shared.lock();
                    shared.queue.extend(stack.drain(..stack.len() / 2));
                    self.cv.notify_all();
                }
                continue;
            } else if self.cursor.load(Ordering::Acquire) < self.replay.len() {
                let from = self.cursor.fetch_add(CURSOR_CHUNK, Ordering::AcqRel);
                for i in from..(from + CURSOR_CHUNK).min(self.replay.len()) {
                    if self.failed.load(Ordering::Acquire) {
                        break;
                    }
                    if self.replay[i] && self.pending[i].fetch_sub(1, Ordering::AcqRel) == 1 {
                        done += self.replay_one(&mut state, i as u32, &mut stack);
                    }
                }
                continue;
            }
            // Nothing of its own: publish what it replayed (a shared counter decremented per
            // transaction bounced its cache line between the threads), then wait for handed-over
            // work or the end.
            self.remaining.fetch_sub(std::mem::take(&mut done), Ordering::AcqRel);
            if !self.wait_for_work(&mut stack) {
                return;
            }
        }
    }

    /// Replays `i` and stacks the successors it made ready; 1 if it was replayed.
    fn replay_one<S>(&self, state: &mut S, i: u32, stack: &mut Vec<u32>) -> usize
    where
        F: Fn(&mut S, usize) -> Result<(), E>,
    {
        let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.apply)(state, i as usize)));
        let failure = match applied {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(Failure::Apply(e)),
            Err(panic) => {
                let message = crate::durability::panic_message(panic.as_ref());
                Some(Failure::Panicked { transaction: i as usize, message })
            }
        };
        if let Some(failure) = failure {
            self.failed.store(true, Ordering::Release);
            self.shared.lock().failure.get_or_insert(failure);
            self.cv.notify_all();
            return 0;
        }
        for &s in self.graph.successors(i as usize) {
            if self.pending[s as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                stack.push(s);
            }
        }
        1
    }

    /// Waits until handed-over transactions are on `stack` (true) or the run is over (false).
    fn wait_for_work(&self, stack: &mut Vec<u32>) -> bool {
        let mut shared = self.shared.lock();
        shared.busy -= 1;
        loop {
            let left = self.remaining.load(Ordering::Acquire);
            if left == 0 || shared.failure.is_some() {
                self.cv.notify_all();
                return false;
            }
            if !shared.queue.is_empty() {
                let take = shared.queue.len().div_ceil(self.threads).min(READY_BATCH_MAX);
                let from = shared.queue.len() - take;
                stack.extend(shared.queue.drain(from..));
                shared.busy += 1;
                return true;
            }
            if shared.busy == 0 {
                // Every thread waits, so every count is published: `left` never became ready.
                shared.failure = Some(Failure::Cycle { left });
                continue;
            }
            self.waiting.fetch_add(1, Ordering::AcqRel);
            self.cv.wait(&mut shared);
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A random DAG over `n` nodes (edges from lower to higher, or, with `backwards`, some from a
    /// later position to an earlier one, as another logger's predecessor is), by a seeded LCG.
    fn dag(n: usize, seed: u64, backwards: bool) -> (ReplayGraph, Vec<Vec<usize>>) {
        let mut x = seed;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as usize
        };
        // A permutation decides the topological order; list positions are its image.
        let mut order: Vec<usize> = (0..n).collect();
        if backwards {
            for i in (1..n).rev() {
                order.swap(i, next() % (i + 1));
            }
        }
        let mut edges = Vec::new();
        let mut predecessors = vec![Vec::new(); n];
        for to in 1..n {
            for _ in 0..next() % 4 {
                let from = next() % to;
                // Chains (TPC-C's hot rows): the previous node, often.
                let from = if next() % 3 == 0 { to - 1 } else { from };
                let (f, t) = (order[from], order[to]);
                if !predecessors[t].contains(&f) {
                    edges.push((f as u32, t as u32));
                    predecessors[t].push(f);
                }
            }
        }
        (ReplayGraph::from_edges(n, &[edges]), predecessors)
    }

    #[test]
    fn every_transaction_runs_once_after_all_its_predecessors_on_any_number_of_threads() {
        for (seed, threads, backwards) in [(1, 1, false), (2, 2, false), (3, 2, true), (4, 4, true), (5, 3, true)] {
            let n = 5000;
            let (graph, predecessors) = dag(n, seed, backwards);
            let mut replay = vec![true; n];
            // Transactions not replayed (over a checkpoint) neither run nor hold anyone back
            // when they have no predecessor edges kept; here: the graph keeps none into them.
            for (i, r) in replay.iter_mut().enumerate() {
                *r = !(predecessors[i].is_empty() && i % 7 == 0 && graph.successors(i).is_empty());
            }
            let clock = AtomicU64::new(1);
            let finished: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
            let started: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
            let apply = |_: &mut (), i: usize| -> Result<(), ()> {
                let t = clock.fetch_add(1, Ordering::SeqCst);
                assert_eq!(started[i].swap(t, Ordering::SeqCst), 0, "transaction {i} ran twice");
                for &p in &predecessors[i] {
                    let done = finished[p].load(Ordering::SeqCst);
                    assert!(done != 0 && done < t, "{i} started before its predecessor {p} finished");
                }
                finished[i].store(clock.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
                Ok(())
            };
            run(&graph, &replay, threads, apply).unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            for i in 0..n {
                assert_eq!(finished[i].load(Ordering::SeqCst) != 0, replay[i], "seed {seed}: transaction {i}");
            }
        }
    }

    #[test]
    fn a_cycle_is_reported_with_the_transactions_it_held_back() {
        // 0 → 1 → 2 → 1, and 3 free: 0 and 3 run, 1 and 2 never become ready.
        let graph = ReplayGraph::from_edges(4, &[vec![(0, 1), (1, 2), (2, 1)]]);
        for threads in [1, 2] {
            let ran = AtomicUsize::new(0);
            let result = run(&graph, &[true; 4], threads, |_: &mut (), _| -> Result<(), ()> {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
            assert!(matches!(result, Err(Failure::Cycle { left: 2 })), "{threads} threads: {result:?}");
            assert_eq!(ran.load(Ordering::SeqCst), 2);
        }
    }

    #[test]
    fn no_call_starts_after_an_error_even_within_a_walked_chunk() {
        // No edges: every transaction is ready when the cursor passes it.
        let n = 10_000;
        let graph = ReplayGraph::from_edges(n, &[]);
        let ran = AtomicUsize::new(0);
        let result = run(&graph, &vec![true; n], 1, |_: &mut (), i| {
            ran.fetch_add(1, Ordering::SeqCst);
            if i == 0 { Err("transaction 0 failed") } else { Ok(()) }
        });
        assert!(matches!(result, Err(Failure::Apply("transaction 0 failed"))), "{result:?}");
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_panic_in_apply_ends_the_run_with_an_error_instead_of_stranding_the_other_threads() {
        // A chain: while the panicking thread holds 100, the other thread has nothing to do but
        // wait for what 100 would release. Run on a thread of its own so that a hang fails the
        // test instead of stopping it.
        let n = 5_000;
        let graph = ReplayGraph::from_edges(n, &[(1..n as u32).map(|i| (i - 1, i)).collect()]);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let result = run(&graph, &vec![true; n], 2, |_: &mut (), i| -> Result<(), String> {
                assert!(i != 100, "replay bug on {i}");
                Ok(())
            });
            let _ = done_tx.send(result);
        });
        let result = done_rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the run ended");
        match result {
            Err(Failure::Panicked { transaction: 100, message }) => assert!(message.contains("replay bug on 100")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ready_transactions_are_handed_to_idle_threads_and_still_run_once_in_order() {
        // Transaction 0 precedes everything else: the cursor passes all the others first, so
        // every one becomes ready on the stack of the thread that replays 0, and the other
        // threads get work only by the hand-over. Chains among the rest keep an order to check.
        let n = 4000;
        let mut edges: Vec<(u32, u32)> = (1..n as u32).map(|i| (0, i)).collect();
        edges.extend((1..n as u32 - 1).filter(|i| i % 4 != 0).map(|i| (i, i + 1)));
        let graph = ReplayGraph::from_edges(n, &[edges.clone()]);
        for threads in [2, 3, 6] {
            let clock = AtomicU64::new(1);
            let finished: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
            let runner: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
            let result = run(&graph, &vec![true; n], threads, |state: &mut u64, i| -> Result<(), ()> {
                if *state == 0 {
                    *state = clock.fetch_add(1, Ordering::SeqCst);
                }
                runner[i].store(*state, Ordering::SeqCst);
                if i == 0 {
                    // Slow, so that the other threads reach the wait before 0 releases anyone.
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                let t = clock.fetch_add(1, Ordering::SeqCst);
                for &(p, s) in &edges {
                    if s as usize == i {
                        let done = finished[p as usize].load(Ordering::SeqCst);
                        assert!(done != 0 && done < t, "{i} ran before its predecessor {p} finished");
                    }
                }
                assert_eq!(finished[i].swap(clock.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst), 0, "{i} twice");
                Ok(())
            });
            assert!(result.is_ok(), "{threads} threads: {result:?}");
            assert!(finished.iter().all(|f| f.load(Ordering::SeqCst) != 0));
            let first = runner[0].load(Ordering::SeqCst);
            let handed = runner.iter().filter(|r| r.load(Ordering::SeqCst) != first).count();
            assert!(handed > 0, "{threads} threads: no transaction was handed to another thread");
        }
    }

    #[test]
    fn the_first_error_stops_the_run_and_is_returned() {
        let n = 10_000;
        let graph = ReplayGraph::from_edges(n, &[(1..n as u32).map(|i| (i - 1, i)).collect()]);
        let ran = AtomicUsize::new(0);
        let result = run(&graph, &vec![true; n], 2, |_: &mut (), i| {
            ran.fetch_add(1, Ordering::SeqCst);
            if i == 100 { Err(format!("transaction {i} failed")) } else { Ok(()) }
        });
        match result {
            Err(Failure::Apply(e)) => assert_eq!(e, "transaction 100 failed"),
            other => panic!("{other:?}"),
        }
        assert_eq!(ran.load(Ordering::SeqCst), 101, "a chain stops at its failed link");
    }
}
