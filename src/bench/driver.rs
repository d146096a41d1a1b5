//! The bench driver: N worker threads run a workload's transactions for a duration.
//!
//! Each worker pulls requests from its own [`TxnGenerator`](super::workload::TxnGenerator), runs each to completion (conflicts
//! retry with exponential backoff, as in Silo's harness; user aborts finish the transaction), and
//! measures two latencies from the first attempt: to commit, and to durability. Workers never
//! block on durability: a committed transaction's ticket waits in a per-worker queue, and the
//! worker records its durability latency when the scheme reports it durable — this is how
//! SiloR measures latency "to the time SiloR learns the transaction's effects are persistent".
//!
//! Statistics are kept per worker and merged at the end; the timeline is kept per window of
//! `window_ms` (default 500), each worker filing its window when it moves into the next one.

use super::stats::{Counts, Window};
use super::workload::{TxnCall, TxnRequest, Workload};
use crate::db::{Database, ProcedureRegistry, Worker, retrying};
use crate::durability::DurabilityTicket;
use crate::txn::{Committed, TxnError};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The most worker threads a run may use.
pub const THREADS_MAX: usize = 256;
/// The most committed-but-not-yet-durable transactions a worker tracks; past this the worker
/// waits for the oldest to become durable (bounded memory, and realistic backpressure).
pub const PENDING_DURABLE_MAX: usize = 1 << 20;
/// How long the driver waits at the end of a run for outstanding transactions to become durable.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of a run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Worker threads.
    pub threads: usize,
    /// Measured duration.
    pub duration: Duration,
    /// Seed of the generators.
    pub seed: u64,
    /// Timeline window length in milliseconds.
    pub window_ms: u64,
    /// Show a progress bar (only if stderr is a terminal).
    pub progress: bool,
    /// Each worker stops after this many requests (committed or aborted by the procedure), or
    /// at `duration`, whichever comes first: a run of fixed work, whose instruction count
    /// (callgrind) repeats from run to run with the same seed. `None`: `duration` alone.
    pub requests_per_thread: Option<u64>,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            threads: 2,
            duration: Duration::from_secs(5),
            seed: 1,
            window_ms: 500,
            progress: true,
            requests_per_thread: None,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// Totals over all transaction kinds.
    pub total: Counts,
    /// Per transaction kind, indexed like [`Workload::txn_kinds`].
    pub per_kind: Vec<(String, Counts)>,
    /// The timeline windows.
    pub timeline: Vec<Window>,
    /// Wall time of the measured phase.
    pub elapsed: Duration,
    /// Transactions still not durable when the drain timed out.
    pub never_durable: u64,
    /// Bytes the durability scheme appended to its logs during the run.
    pub log_bytes: u64,
}

impl RunResult {
    /// Committed transactions per second (user aborts excluded).
    pub fn throughput_per_s(&self) -> f64 {
        self.total.committed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad options.
    #[error("invalid option: {0}")]
    Options(String),
    /// A transaction failed in a way retrying cannot fix.
    #[error("worker {worker}: {source}")]
    Txn {
        /// The worker.
        worker: usize,
        /// The error.
        source: TxnError,
    },
    /// A worker thread panicked.
    #[error("worker {0} panicked")]
    Panicked(usize),
    /// Could not start a thread.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// State shared by the workers and the main thread.
struct Shared {
    stop: AtomicBool,
    /// Workers that ran their `requests_per_thread` and returned.
    workers_done: AtomicUsize,
    start: Instant,
    committed: Vec<CachePadded<AtomicU64>>,
    windows: Mutex<Vec<Window>>,
    window_ms: u64,
}

impl Shared {
    fn window_of(&self, at: Instant) -> usize {
        (at.duration_since(self.start).as_millis() / u128::from(self.window_ms)) as usize
    }

    fn file_window(&self, index: usize, counts: &Counts) {
        let mut windows = self.windows.lock();
        if windows.len() <= index {
            windows.resize_with(index + 1, Window::default);
        }
        windows[index].counts.merge(counts);
    }
}

/// Runs `workload` (already loaded into `db`) for `options.duration`.
pub fn run(db: &Database, workload: &Arc<dyn Workload>, options: &RunOptions) -> Result<RunResult, RunError> {
    if options.threads == 0 || options.threads > THREADS_MAX {
        return Err(RunError::Options(format!("threads must be 1..={THREADS_MAX}, got {}", options.threads)));
    }
    if options.window_ms == 0 {
        return Err(RunError::Options("the timeline window must be at least 1 ms".into()));
    }
    let kinds = workload.txn_kinds();
    let log_bytes_before = db.scheme().log_bytes_written();
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        workers_done: AtomicUsize::new(0),
        start: Instant::now(),
        committed: (0..options.threads).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
        windows: Mutex::new(Vec::new()),
        window_ms: options.window_ms,
    });
    let mut handles = Vec::new();
    for thread in 0..options.threads {
        let generator = workload.generator(db, thread, options.threads, options.seed);
        let mut runner = WorkerRun::new(db, thread, kinds.len(), Arc::clone(&shared), generator);
        runner.requests_max = options.requests_per_thread.unwrap_or(u64::MAX);
        let handle = std::thread::Builder::new()
            .name(format!("lazarus-bench-{thread}"))
            .spawn(move || runner.run().map(|()| runner))?;
        handles.push(handle);
    }
    watch(db, &shared, options);
    let elapsed = shared.start.elapsed();
    let mut total = Counts::default();
    let mut per_kind: Vec<(String, Counts)> = kinds.iter().map(|k| (k.clone(), Counts::default())).collect();
    let mut never_durable = 0u64;
    let mut first_error = None;
    for (thread, handle) in handles.into_iter().enumerate() {
        match handle.join() {
            Ok(Ok(runner)) => {
                for (i, c) in runner.per_kind.iter().enumerate() {
                    per_kind[i].1.merge(c);
                    total.merge(c);
                }
                never_durable += runner.never_durable;
            }
            Ok(Err(source)) => first_error = first_error.or(Some(RunError::Txn { worker: thread, source })),
            Err(_) => first_error = first_error.or(Some(RunError::Panicked(thread))),
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    // Windows after the deadline hold only the stragglers of the stop; the timeline covers the
    // measured duration exactly (the elapsed time, when the workers ran their requests sooner).
    let mut timeline = std::mem::take(&mut *shared.windows.lock());
    let measured = options.duration.min(elapsed);
    let measured_windows = measured.as_millis().div_ceil(u128::from(options.window_ms)).max(1) as usize;
    timeline.resize_with(measured_windows, Window::default);
    // Every worker drained its durability queue before it returned: what it logged is written.
    let log_bytes = db.scheme().log_bytes_written() - log_bytes_before;
    Ok(RunResult { total, per_kind, timeline, elapsed, never_durable, log_bytes })
}

/// The main thread's loop during a run: sleeps, samples checkpoint activity, drives the progress
/// bar, and stops the workers at the deadline.
fn watch(db: &Database, shared: &Shared, options: &RunOptions) {
    let bar = (options.progress && std::io::stderr().is_terminal()).then(|| progress_bar(options.duration));
    let deadline = shared.start + options.duration;
    let mut last_total = 0u64;
    let mut last_at = Instant::now();
    loop {
        let now = Instant::now();
        if now >= deadline || shared.workers_done.load(Ordering::Relaxed) == options.threads {
            break;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
        if db.scheme().checkpoint_active() {
            let index = shared.window_of(Instant::now());
            let mut windows = shared.windows.lock();
            if windows.len() <= index {
                windows.resize_with(index + 1, Window::default);
            }
            windows[index].checkpoint = true;
        }
        if let Some(bar) = &bar {
            let total: u64 = shared.committed.iter().map(|c| c.load(Ordering::Relaxed)).sum();
            let rate = (total - last_total) as f64 / last_at.elapsed().as_secs_f64().max(1e-6);
            (last_total, last_at) = (total, Instant::now());
            bar.set_position(shared.start.elapsed().as_millis() as u64);
            bar.set_message(format!("{total} committed, {rate:.0} txn/s"));
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

fn progress_bar(duration: Duration) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(duration.as_millis() as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// One worker's run: its generator, its statistics, its durability queue.
struct WorkerRun {
    worker: Worker,
    registry: Arc<ProcedureRegistry>,
    db: Database,
    thread: usize,
    shared: Arc<Shared>,
    generator: Box<dyn super::workload::TxnGenerator>,
    per_kind: Vec<Counts>,
    window: Counts,
    window_index: usize,
    pending: VecDeque<(DurabilityTicket, Instant, usize)>,
    never_durable: u64,
    /// Requests to run before stopping ([`RunOptions::requests_per_thread`]).
    requests_max: u64,
}

impl WorkerRun {
    fn new(
        db: &Database,
        thread: usize,
        kinds: usize,
        shared: Arc<Shared>,
        generator: Box<dyn super::workload::TxnGenerator>,
    ) -> WorkerRun {
        WorkerRun {
            worker: db.worker(),
            registry: db.procedures(),
            db: db.clone(),
            thread,
            shared,
            generator,
            per_kind: vec![Counts::default(); kinds.max(1)],
            window: Counts::default(),
            window_index: 0,
            pending: VecDeque::new(),
            never_durable: 0,
            requests_max: u64::MAX,
        }
    }

    fn run(&mut self) -> Result<(), TxnError> {
        let mut requests = 0u64;
        while !self.shared.stop.load(Ordering::Relaxed) && requests < self.requests_max {
            let request = self.generator.next_request();
            self.run_one(&request)?;
            requests += 1;
            self.drain_durable(false);
        }
        self.drain_durable(true);
        if requests == self.requests_max {
            self.shared.workers_done.fetch_add(1, Ordering::Relaxed);
        }
        let index = self.window_index;
        let window = std::mem::take(&mut self.window);
        self.shared.file_window(index, &window);
        Ok(())
    }

    fn run_one(&mut self, request: &TxnRequest) -> Result<(), TxnError> {
        let kind = request.kind.min(self.per_kind.len() - 1);
        let start = Instant::now();
        let mut conflicts = 0u64;
        let (worker, registry) = (&mut self.worker, &self.registry);
        let outcome = retrying(u32::MAX, || {
            let r = attempt(worker, registry, &request.call);
            if matches!(r, Err(ref e) if e.is_retryable()) {
                conflicts += 1;
            }
            r
        });
        let done = Instant::now();
        self.roll_window(done);
        let latency_us = done.duration_since(start).as_micros() as u64;
        for counts in [&mut self.per_kind[kind], &mut self.window] {
            counts.conflicts += conflicts;
        }
        match outcome {
            Ok(committed) => {
                for counts in [&mut self.per_kind[kind], &mut self.window] {
                    counts.committed += 1;
                    counts.commit_latency.record_us(latency_us);
                }
                self.shared.committed[self.thread].fetch_add(1, Ordering::Relaxed);
                self.track_durability(committed, start, kind);
                Ok(())
            }
            Err(TxnError::UserAbort(_)) => {
                for counts in [&mut self.per_kind[kind], &mut self.window] {
                    counts.user_aborts += 1;
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn track_durability(&mut self, committed: Committed, start: Instant, kind: usize) {
        if self.db.scheme().is_durable(&committed.durability) {
            let latency_us = start.elapsed().as_micros() as u64;
            self.per_kind[kind].durable_latency.record_us(latency_us);
            self.window.durable_latency.record_us(latency_us);
            return;
        }
        if self.pending.len() >= PENDING_DURABLE_MAX {
            self.drain_oldest_blocking();
        }
        self.pending.push_back((committed.durability, start, kind));
    }

    /// Records the durability latency of every queued transaction that is now durable. With
    /// `finish`, waits (up to [`DRAIN_TIMEOUT`]) for all of them.
    fn drain_durable(&mut self, finish: bool) {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while let Some((ticket, start, kind)) = self.pending.front() {
            if !self.db.scheme().is_durable(ticket) {
                if !finish {
                    return;
                }
                if Instant::now() >= deadline {
                    self.never_durable += self.pending.len() as u64;
                    self.pending.clear();
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let latency_us = start.elapsed().as_micros() as u64;
            let kind = *kind;
            self.per_kind[kind].durable_latency.record_us(latency_us);
            self.window.durable_latency.record_us(latency_us);
            self.pending.pop_front();
        }
    }

    fn drain_oldest_blocking(&mut self) {
        if let Some((ticket, start, kind)) = self.pending.pop_front() {
            if self.db.scheme().wait_durable(&ticket).is_ok() {
                let latency_us = start.elapsed().as_micros() as u64;
                self.per_kind[kind].durable_latency.record_us(latency_us);
                self.window.durable_latency.record_us(latency_us);
            } else {
                self.never_durable += 1;
            }
        }
    }

    /// Files the current window when `now` belongs to a later one.
    fn roll_window(&mut self, now: Instant) {
        let index = self.shared.window_of(now);
        if index != self.window_index {
            let window = std::mem::take(&mut self.window);
            self.shared.file_window(self.window_index, &window);
            self.window_index = index;
        }
    }
}

/// Never inlined: `scripts/bench-instructions.sh` counts the instructions under this symbol
/// (whole-program LTO would otherwise fold it into its caller), and one call a request costs nothing.
#[inline(never)]
fn attempt(worker: &mut Worker, registry: &ProcedureRegistry, call: &TxnCall) -> Result<Committed, TxnError> {
    match call {
        TxnCall::Procedure { id, args } => worker.call_id(registry, *id, args).map(|o| o.committed),
        TxnCall::AdHoc(body) => worker.run(1, |tx| body(tx)).map(|((), c)| c),
    }
}
