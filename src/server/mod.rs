//! `lazarus serve`: a server that speaks the Redis protocol (RESP2), so that redis-cli,
//! redis-benchmark and Redis client libraries work against Lazarus unchanged.
//!
//! - [`resp`]: the request parser (bounded: nothing is allocated from a length a client claims)
//!   and the reply encoder.
//! - [`keyspace`]: how Redis keys map onto the table `redis_kv` (key, value, absolute expiry).
//! - [`command`]: the command table (name, arity, flags, handler) and the transaction scope data
//!   commands run in; [`commands`]: the handlers, one file per family.
//! - [`conn`]: one connection's state: MULTI/EXEC/WATCH, the tickets its replies wait for.
//! - [`event_loop`]: the loops that serve the connections: reading, pipelining, the durability
//!   wait, writing.
//!
//! # Threads
//!
//! One thread accepts (at most [`ServerConfig::clients_max`] connections) and hands each
//! connection to one of [`ServerConfig::io_threads`] event loops, round robin. A loop serves its
//! connections with `epoll`: it runs their requests itself, in order, and lets one *durability
//! waiter* thread per loop block for the group commits, so a loop never sleeps on a commit and
//! wakes once for every reply a group commit releases ([`event_loop`]). Transactions take a
//! [`crate::Worker`] from a pool of [`ServerConfig::workers`] for one command (or one EXEC) and
//! give it back before their replies wait for durability, so the number of log buffers is that of
//! the pool. The engine stays synchronous: a loop's thread runs a transaction to its commit, which
//! is in memory; only the durability wait, which is long, is handed off.
//!
//! # Durability contract
//!
//! A reply is sent only after the durability scheme says every transaction the connection ran
//! since its last flush is durable (`LogScheme::wait_durable`): a SET is acknowledged only once a
//! crash can no longer lose it, and a GET only once the value it returns cannot be rolled back by
//! a crash. A pipelined batch waits once, for the last ticket, before its replies are written
//! (see [`conn`]). With `--durability none` tickets are immediate and nothing survives a restart.
//!
//! # Expiry
//!
//! As in Redis, lazy and active. Lazy: an expired key is absent to every command at once; its row
//! is replaced or removed by the next write of the key. Active: a sweep thread deletes the expired
//! rows of [`SWEEP_PAGE_ROWS`] rows every [`SWEEP_INTERVAL_MS`], walking the table round and
//! round, so the memory of keys never touched again is reclaimed (a delete that races with a
//! client's write of the key is an OCC conflict and is retried on the new row). The expiry is
//! stored as an absolute Unix time, so it means the same after recovery.

pub mod command;
pub mod commands;
pub mod conn;
pub mod event_loop;
pub mod instant_bench;
pub mod keyspace;
pub mod resp;
pub mod restore_pool;

use crate::db::{Database, DbError, Worker};
use keyspace::Keyspace;
use parking_lot::{Condvar, Mutex};
use resp::ProtoLimits;
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How to run the server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to listen on, e.g. `127.0.0.1:6379` (port 0: any free port).
    pub bind: String,
    /// Workers in the pool transactions run on.
    pub workers: usize,
    /// Event loops serving connections (threads that run requests).
    pub io_threads: usize,
    /// Most connections at once (Redis's `maxclients`).
    pub clients_max: usize,
    /// Request limits.
    pub limits: ProtoLimits,
    /// When starting the server began, recovery included: INFO's uptime and its restart
    /// timeline (`recovery_listening_ms`, `recovery_first_fetch_ms`) count from it. Default:
    /// when the configuration was made.
    pub started: Instant,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        ServerConfig {
            bind: "127.0.0.1:6379".to_string(),
            workers: cores * 2,
            io_threads: cores,
            clients_max: 1024,
            limits: ProtoLimits::default(),
            started: Instant::now(),
        }
    }
}

/// Rows the expiry sweep looks at per step.
pub const SWEEP_PAGE_ROWS: usize = 500;
/// Pause between two steps of the expiry sweep, in milliseconds.
pub const SWEEP_INTERVAL_MS: u64 = 100;

/// The most workers a server pool may have.
pub const WORKERS_MAX: usize = 256;
/// The most event loops a server may run.
pub const IO_THREADS_MAX: usize = 64;
/// The most connections a server accepts at once.
pub const CLIENTS_MAX: usize = 10_000;

/// What INFO's `recovery` section reports.
#[derive(Clone, Debug)]
pub struct RecoveryInfo {
    /// `done` once the whole database is in memory (always, after a blocking recovery);
    /// `restoring` while an instant restore runs (`--durability indexed`).
    pub state: &'static str,
    /// Percent of the keys restored.
    pub percent: f64,
    /// Keys in memory so far, each counted once (an instant restore's images, walked or fetched).
    pub keys_restored: u64,
    /// Keys a client's request restored ahead of the background walk (instant recovery).
    pub keys_restored_on_demand: u64,
    /// GETs of keys not restored yet answered from the indexed log without restoring the key
    /// (instant recovery; `docs/indexed.md`, "Reads ahead of the restore").
    pub keys_read_ahead: u64,
    /// How long recovery took, in milliseconds.
    pub elapsed_ms: f64,
    /// CPU milliseconds the restore's walk took (instant recovery, once the walk has ended).
    pub walk_cpu_ms: f64,
    /// CPU milliseconds the whole server took while the walk ran, serving included (instant
    /// recovery, once the walk has ended).
    pub process_cpu_ms: f64,
    /// The share of the machine the restore's walk may take now while requests are served
    /// (instant recovery; 1: not held back, and after a blocking recovery).
    pub walk_share: f64,
    /// Milliseconds the walk's threads slept to keep to their share while requests were served,
    /// summed over the threads (instant recovery; `docs/indexed.md`, "The walk's share of the
    /// CPU").
    pub walk_held_ms: f64,
    /// CPU milliseconds the walk's share was raised by because the machine left as much idle
    /// (instant recovery; allowed, not necessarily taken).
    pub walk_spare_ms: f64,
    /// Bytes of durable sequential log not yet in the indexed log: what a restart now would read
    /// before it listens (`--durability indexed`, `indexed-sync`; 0 for the other schemes).
    pub unindexed_log_bytes: u64,
}

impl Default for RecoveryInfo {
    fn default() -> RecoveryInfo {
        RecoveryInfo {
            state: "done",
            percent: 100.0,
            keys_restored: 0,
            keys_restored_on_demand: 0,
            keys_read_ahead: 0,
            elapsed_ms: 0.0,
            walk_cpu_ms: 0.0,
            process_cpu_ms: 0.0,
            walk_share: 1.0,
            walk_held_ms: 0.0,
            walk_spare_ms: 0.0,
            unindexed_log_bytes: 0,
        }
    }
}

/// Where INFO's `recovery` section comes from: a fixed report after a blocking recovery
/// ([`RecoveryInfo`] itself), or a scheme that restores in the background (instant recovery) and
/// reports its progress each time INFO asks.
pub trait RecoveryStatus: Send + Sync {
    /// The progress now.
    fn status(&self) -> RecoveryInfo;

    /// Called once, when the server's event loops run and it accepts connections: a restore
    /// held until then may begin (`IndexedOptions::restore_awaits_serving`).
    fn serving(&self) {}
}

impl RecoveryStatus for RecoveryInfo {
    fn status(&self) -> RecoveryInfo {
        self.clone()
    }
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A configuration value is out of range.
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// Binding or accepting failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The database refused (e.g. creating the keyspace table).
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A pool of workers; a connection holds one only while it runs a transaction.
pub struct WorkerPool {
    idle: Mutex<Vec<Worker>>,
    returned: Condvar,
}

impl WorkerPool {
    fn new(db: &Database, workers: usize) -> Result<WorkerPool, DbError> {
        let idle = (0..workers).map(|_| db.try_worker()).collect::<Result<Vec<_>, _>>()?;
        Ok(WorkerPool { idle: Mutex::new(idle), returned: Condvar::new() })
    }

    /// Takes a worker, waiting for one to be returned if all are busy.
    pub fn take(&self) -> PooledWorker<'_> {
        let mut idle = self.idle.lock();
        loop {
            if let Some(worker) = idle.pop() {
                return PooledWorker { pool: self, worker: Some(worker) };
            }
            self.returned.wait(&mut idle);
        }
    }
}

/// A worker taken from the pool; dropping it gives it back.
pub struct PooledWorker<'a> {
    pool: &'a WorkerPool,
    worker: Option<Worker>,
}

impl std::ops::Deref for PooledWorker<'_> {
    type Target = Worker;
    fn deref(&self) -> &Worker {
        self.worker.as_ref().expect("a pooled worker is present until dropped")
    }
}

impl std::ops::DerefMut for PooledWorker<'_> {
    fn deref_mut(&mut self) -> &mut Worker {
        self.worker.as_mut().expect("a pooled worker is present until dropped")
    }
}

impl Drop for PooledWorker<'_> {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            self.pool.idle.lock().push(worker);
            self.pool.returned.notify_one();
        }
    }
}

/// SCAN cursors: a number for each key a SCAN stopped at. Bounded; the oldest are forgotten
/// (a forgotten cursor gets `ERR invalid cursor`).
#[derive(Default)]
pub struct CursorTable {
    keys: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
    next: u64,
}

/// The most SCAN cursors remembered.
pub const CURSORS_MAX: usize = 4096;

impl CursorTable {
    /// The key cursor `id` stopped at.
    pub fn get(&self, id: u64) -> Option<Vec<u8>> {
        self.keys.get(&id).cloned()
    }

    /// A new cursor for `key` (never 0, which means "start" and "done").
    pub fn insert(&mut self, key: Vec<u8>) -> u64 {
        self.next = self.next.wrapping_add(1).max(1);
        if self.order.len() >= CURSORS_MAX
            && let Some(oldest) = self.order.pop_front()
        {
            self.keys.remove(&oldest);
        }
        self.keys.insert(self.next, key);
        self.order.push_back(self.next);
        self.next
    }
}

/// CONFIG SET values kept for CONFIG GET.
#[derive(Default)]
pub struct Settable {
    /// `save` (there are no snapshots; kept only so that clients read back what they set).
    pub save: String,
}

/// What every connection shares.
pub struct Shared {
    /// The database.
    pub db: Database,
    /// Database 0.
    pub keyspace: Keyspace,
    /// Workers transactions run on.
    pub pool: WorkerPool,
    /// The configuration.
    pub config: ServerConfig,
    /// The address the server listens on.
    pub addr: SocketAddr,
    /// Microseconds from [`ServerConfig::started`] until the server listened.
    pub listening_us: u64,
    /// Microseconds from [`ServerConfig::started`] until the first fetch from the indexed log on
    /// demand ended ([`restore_pool`]), `u64::MAX` before: where a restart's first replies
    /// waited, for INFO.
    pub first_fetch_us: AtomicU64,
    /// INFO's recovery section.
    pub recovery: Arc<dyn RecoveryStatus>,
    /// SCAN cursors.
    pub cursors: Mutex<CursorTable>,
    /// CONFIG SET values.
    pub settable: Mutex<Settable>,
    /// Connections open now.
    pub connected: AtomicUsize,
    /// Connections accepted since start.
    pub connections_received: AtomicU64,
    /// Requests run since start.
    pub commands_processed: AtomicU64,
    /// CPU nanoseconds the threads fetching keys on demand have taken ([`restore_pool`]; they
    /// work only while an instant restore runs), for INFO's `recovery_fetch_cpu_ms`.
    pub restore_fetch_cpu_ns: AtomicU64,
    next_client_id: AtomicU64,
    shutdown: AtomicBool,
}

/// Microseconds since `since`, saturated.
fn micros_since(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX - 1)
}

impl Shared {
    /// Notes that a fetch on demand ended: the first one's time is kept for INFO.
    pub fn note_fetch_ended(&self) {
        // A load, not a read-modify-write, once the first is noted: fetching threads do not
        // contend for the line.
        if self.first_fetch_us.load(Ordering::Relaxed) == u64::MAX {
            self.first_fetch_us.fetch_min(micros_since(self.config.started), Ordering::Relaxed);
        }
    }

    /// Asks the accept loop to stop (SHUTDOWN); it closes every connection.
    pub fn request_shutdown(&self) {
        if self.shutdown.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the blocking accept with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
    }

    /// Rows in the keyspace table (expired keys not yet removed included).
    pub fn stored_rows(&self) -> usize {
        self.db.catalog().table(self.keyspace.table()).map_or(0, |t| t.len())
    }
}

/// A handle that stops a running server from another thread.
#[derive(Clone)]
pub struct ShutdownHandle(Arc<Shared>);

impl ShutdownHandle {
    /// Stops the server: `Server::run` returns once every event loop has closed its connections.
    pub fn shutdown(&self) {
        self.0.request_shutdown();
    }
}

/// A bound server, ready to run.
pub struct Server {
    shared: Arc<Shared>,
    listener: TcpListener,
}

impl Server {
    /// Binds `config.bind` and prepares the keyspace of `db`.
    pub fn bind(db: Database, config: ServerConfig, recovery: Arc<dyn RecoveryStatus>) -> Result<Server, ServerError> {
        if !(1..=WORKERS_MAX).contains(&config.workers) {
            return Err(ServerError::Config(format!("workers must be 1..={WORKERS_MAX}, got {}", config.workers)));
        }
        if !(1..=IO_THREADS_MAX).contains(&config.io_threads) {
            return Err(ServerError::Config(format!(
                "io threads must be 1..={IO_THREADS_MAX}, got {}",
                config.io_threads
            )));
        }
        if !(1..=CLIENTS_MAX).contains(&config.clients_max) {
            return Err(ServerError::Config(format!("clients must be 1..={CLIENTS_MAX}, got {}", config.clients_max)));
        }
        let addr = config
            .bind
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| ServerError::Config(format!("cannot resolve {}", config.bind)))?;
        let listener = TcpListener::bind(addr)?;
        // Connections queue from here on, answered once `run` starts the loops.
        let listening_us = micros_since(config.started);
        let keyspace = Keyspace::open(&db)?;
        let pool = WorkerPool::new(&db, config.workers)?;
        let shared = Shared {
            addr: listener.local_addr()?,
            db,
            keyspace,
            pool,
            config,
            listening_us,
            first_fetch_us: AtomicU64::new(u64::MAX),
            recovery,
            cursors: Mutex::new(CursorTable::default()),
            settable: Mutex::new(Settable::default()),
            connected: AtomicUsize::new(0),
            connections_received: AtomicU64::new(0),
            commands_processed: AtomicU64::new(0),
            restore_fetch_cpu_ns: AtomicU64::new(0),
            next_client_id: AtomicU64::new(1),
            shutdown: AtomicBool::new(false),
        };
        Ok(Server { shared: Arc::new(shared), listener })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// A handle to stop the server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(Arc::clone(&self.shared))
    }

    /// Accepts and serves connections until SHUTDOWN (or a [`ShutdownHandle`]); then closes every
    /// connection and waits for the event loops.
    pub fn run(self) -> Result<(), ServerError> {
        let sweeper_shared = Arc::clone(&self.shared);
        let sweeper = std::thread::Builder::new().name("resp-expiry".into()).spawn(move || sweep(&sweeper_shared))?;
        // Fetching threads only if this start restores in the background (instant recovery).
        let restoring = self.shared.db.catalog().table(self.shared.keyspace.table()).is_some_and(|t| t.is_restoring());
        let restore = match restoring {
            true => Some(restore_pool::RestorePool::start(&self.shared)?),
            false => None,
        };
        let mut loops = Vec::with_capacity(self.shared.config.io_threads);
        for index in 0..self.shared.config.io_threads {
            match event_loop::LoopHandle::start(&self.shared, index, restore.clone()) {
                Ok(handle) => loops.push(handle),
                Err(e) => {
                    self.shared.shutdown.store(true, Ordering::SeqCst);
                    stop_loops(loops);
                    stop_restorers(restore);
                    let _ = sweeper.join();
                    return Err(e.into());
                }
            }
        }
        self.shared.recovery.serving();
        if let Some(pool) = &restore {
            pool.start_the_rest(&self.shared);
        }
        let mut next_loop = 0usize;
        for stream in self.listener.incoming() {
            if self.shared.shutdown.load(Ordering::SeqCst) {
                break;
            }
            let Ok(stream) = stream else { continue };
            if let Some(id) = self.admit(&stream) {
                let target = &loops[next_loop % loops.len()];
                next_loop = next_loop.wrapping_add(1);
                if target.hand_over(stream, id).is_err() {
                    self.shared.connected.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
        drop(self.listener);
        stop_loops(loops);
        stop_restorers(restore);
        let _ = sweeper.join();
        Ok(())
    }

    /// Counts a new connection and gives it a CLIENT ID, or refuses it past `clients_max`.
    fn admit(&self, mut stream: &TcpStream) -> Option<u64> {
        use std::io::Write;
        let shared = &self.shared;
        shared.connections_received.fetch_add(1, Ordering::Relaxed);
        if shared.connected.load(Ordering::SeqCst) >= shared.config.clients_max {
            let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
            return None;
        }
        shared.connected.fetch_add(1, Ordering::SeqCst);
        Some(shared.next_client_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// Lets the fetching threads end and waits for them.
fn stop_restorers(pool: Option<Arc<restore_pool::RestorePool>>) {
    if let Some(pool) = pool {
        pool.stop_and_join();
    }
}

/// Stops every loop (closing its connections), then waits for them.
fn stop_loops(loops: Vec<event_loop::LoopHandle>) {
    for handle in &loops {
        handle.stop();
    }
    for handle in loops {
        handle.join();
    }
}

/// The active expiry sweep: until shutdown, deletes the expired rows of one page per step.
fn sweep(shared: &Shared) {
    let mut after: Option<Vec<u8>> = None;
    while !shared.shutdown.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(SWEEP_INTERVAL_MS));
        if shared.keyspace.is_restoring(&shared.db) {
            // A sweep step reads a range, which waits for the whole restore: it would hold a
            // pooled worker the event loops need for that long.
            continue;
        }
        let now = keyspace::now_ms();
        let mut worker = shared.pool.take();
        let step = worker.run(command::CONFLICT_ATTEMPTS_MAX, |tx| {
            shared.keyspace.delete_expired_page(tx, after.as_deref(), SWEEP_PAGE_ROWS, now)
        });
        // Nobody waits for these deletes: no client was told anything about them.
        after = match step {
            Ok(((_, next), _)) => next,
            Err(_) => None,
        };
    }
}
