//! The embedded database: catalog, epoch thread, durability scheme and stored procedures, and the
//! per-thread [`Worker`] through which transactions run.
//!
//! ```
//! use lazarus::{Database, DatabaseConfig};
//! use lazarus::storage::{ParamValue, Value};
//!
//! let db = Database::open(DatabaseConfig::default()).unwrap();
//! db.load_module("bank.proc", "
//!     table account (id int not null, balance int not null, primary key (id));
//!     procedure deposit(id int, amount int) {
//!         select balance into b from account where id = id;
//!         if not found { insert into account values (id, amount); return amount; }
//!         update account set balance = b + amount where id = id;
//!         return b + amount;
//!     }
//! ").unwrap();
//! let mut worker = db.worker();
//! let out = worker.call("deposit", &[ParamValue::Scalar(Value::Int(7)), ParamValue::Scalar(Value::Int(5))]).unwrap();
//! assert_eq!(out.values, vec![Value::Int(5)]);
//! ```

use crate::durability::none::NoLogging;
use crate::durability::{DurabilityError, DurabilityTicket, Invocation, LogScheme, SchemeStart};
use crate::proc::{self, CompiledProcedure, Diagnostic};
use crate::storage::table::{Catalog, CatalogError};
use crate::storage::{IndexBackend, ParamValue, TableSchema, Value};
use crate::txn::epoch::{EPOCH_INTERVAL_DEFAULT_MS, EPOCH_INTERVAL_MAX_MS, EPOCH_INTERVAL_MIN_MS, EpochManager};
use crate::txn::versions::Snapshot;
use crate::txn::{Committed, Transaction, TxnContext, TxnError, TxnLimits, WorkerState};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

/// The most workers a database hands out.
pub const WORKERS_MAX: usize = 1024;

/// How to open a database.
pub struct DatabaseConfig {
    /// Interval of the epoch advancer, in milliseconds (Silo: 40).
    pub epoch_interval_ms: u64,
    /// The durability scheme.
    pub scheme: Arc<dyn LogScheme>,
    /// Which ordered index implementation tables use.
    pub index_backend: IndexBackend,
    /// Transaction size limits.
    pub limits: TxnLimits,
    /// Whether recovery (in [`Database::open`]) takes the memory it fills in small pages
    /// ([`crate::allocator::SmallPages`]). Off by default: on the VMs this project is measured
    /// on it makes recovery shorter (a fresh huge page costs more to fault in than its small
    /// pages) but the transactions after it slower, since the recovered data then lies in small
    /// pages until the kernel collapses them (TPC-C 9–17 % slower, docs/PERFORMANCE.md, "Taurus",
    /// "Session 45"). For a standby that must take over fast.
    pub recovery_small_pages: bool,
}

impl Default for DatabaseConfig {
    fn default() -> DatabaseConfig {
        DatabaseConfig {
            epoch_interval_ms: EPOCH_INTERVAL_DEFAULT_MS,
            scheme: Arc::new(NoLogging),
            index_backend: IndexBackend::default(),
            limits: TxnLimits::default(),
            recovery_small_pages: false,
        }
    }
}

/// Why a database could not be opened or changed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// DDL failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A procedure file has errors; each is `file:line:col: message`.
    #[error("{}", .0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))]
    Source(Vec<Diagnostic>),
    /// A procedure with this name is registered already.
    #[error("procedure {0} is already registered")]
    ProcedureExists(String),
    /// Too many workers.
    #[error("a database hands out at most {WORKERS_MAX} workers")]
    TooManyWorkers,
    /// An I/O error (e.g. starting a thread).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The durability scheme failed.
    #[error(transparent)]
    Durability(#[from] DurabilityError),
}

/// The registered stored procedures. Ids are dense and never reused, so a command log can name a
/// procedure by id.
#[derive(Default)]
pub struct ProcedureRegistry {
    procedures: Vec<Arc<CompiledProcedure>>,
    by_name: HashMap<String, u32>,
    /// By id: PACMAN's static analysis rejected the procedure ([`crate::pacman::StaticAnalysis`]'s
    /// `fallback`), so command logging logs its calls as write sets ([`Invocation::log_as_data`]).
    /// Decided once, at registration.
    log_as_data: Vec<bool>,
}

impl ProcedureRegistry {
    /// The procedure with this id.
    pub fn get(&self, id: u32) -> Option<&Arc<CompiledProcedure>> {
        self.procedures.get(id as usize)
    }

    /// The id of the procedure called `name` (case-insensitive).
    pub fn id_of(&self, name: &str) -> Option<u32> {
        self.by_name.get(&name.to_ascii_lowercase()).copied()
    }

    /// All procedures, in id order.
    pub fn all(&self) -> &[Arc<CompiledProcedure>] {
        &self.procedures
    }

    /// Whether command logging logs the calls of procedure `id` as write sets (PACMAN's analysis
    /// cannot slice it; see [`Invocation::log_as_data`]).
    pub fn logs_calls_as_data(&self, id: u32) -> bool {
        self.log_as_data.get(id as usize).copied().unwrap_or(false)
    }
}

struct Inner {
    ctx: TxnContext,
    procedures: ArcSwap<ProcedureRegistry>,
    /// Serializes DDL and procedure registration (rare; transactions never take it).
    ddl: Mutex<()>,
    index_backend: IndexBackend,
    next_worker: AtomicUsize,
    epoch_thread: Mutex<Option<JoinHandle<()>>>,
}

/// An open database. Cheap to clone; the epoch thread stops when [`Database::close`] is called or
/// the last clone is dropped.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

impl Database {
    /// Opens an empty in-memory database and starts its epoch thread.
    pub fn open(config: DatabaseConfig) -> Result<Database, DbError> {
        if !(EPOCH_INTERVAL_MIN_MS..=EPOCH_INTERVAL_MAX_MS).contains(&config.epoch_interval_ms) {
            return Err(DbError::Config(format!(
                "epoch interval must be {EPOCH_INTERVAL_MIN_MS}..={EPOCH_INTERVAL_MAX_MS} ms, got {}",
                config.epoch_interval_ms
            )));
        }
        let epochs = EpochManager::new(1);
        let inner = Inner {
            ctx: TxnContext {
                catalog: Arc::new(ArcSwap::from_pointee(Catalog::default())),
                epochs,
                scheme: config.scheme,
                limits: config.limits,
            },
            procedures: ArcSwap::from_pointee(ProcedureRegistry::default()),
            ddl: Mutex::new(()),
            index_backend: config.index_backend,
            next_worker: AtomicUsize::new(0),
            epoch_thread: Mutex::new(None),
        };
        let db = Database { inner: Arc::new(inner) };
        // Recovery runs before any transaction; the epoch restarts above everything it restored.
        let small_pages = config.recovery_small_pages.then(crate::allocator::SmallPages::hold);
        let recovered_epoch = db.inner.ctx.scheme.recover(&db)?;
        drop(small_pages);
        db.inner.ctx.epochs.advance_to(recovered_epoch + 1);
        let start =
            SchemeStart { epochs: Arc::clone(&db.inner.ctx.epochs), catalog: Arc::clone(&db.inner.ctx.catalog) };
        db.inner.ctx.scheme.start(start)?;
        let handle = db.inner.ctx.epochs.start_advancer(config.epoch_interval_ms)?;
        *db.inner.epoch_thread.lock() = Some(handle);
        Ok(db)
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.inner.ctx.catalog.load_full()
    }

    /// The epoch manager (tests and durability schemes use it).
    pub fn epochs(&self) -> &Arc<EpochManager> {
        &self.inner.ctx.epochs
    }

    /// The durability scheme.
    pub fn scheme(&self) -> &Arc<dyn LogScheme> {
        &self.inner.ctx.scheme
    }

    /// The registered procedures.
    pub fn procedures(&self) -> Arc<ProcedureRegistry> {
        self.inner.procedures.load_full()
    }

    /// Creates a table. Returns its id.
    ///
    /// The table goes through the procedure language's DDL (`table ...; index ...;`), so that it
    /// is validated once and recorded like any module; its names must therefore be identifiers
    /// of the language.
    pub fn create_table(&self, schema: TableSchema) -> Result<u32, DbError> {
        schema.validate().map_err(|e| DbError::Catalog(e.into()))?;
        let ddl = table_ddl(&schema);
        self.load_module(&format!("create_table({})", schema.name), &ddl)?;
        self.catalog()
            .table_by_name(&schema.name)
            .map(|t| t.id)
            .ok_or_else(|| DbError::Config(format!("table {} was not created", schema.name)))
    }

    /// Parses, type-checks and compiles a source file of tables and procedures, then creates its
    /// tables and registers its procedures. Nothing is changed if any error is found. The
    /// durability scheme records the module first, so that recovery can rebuild the catalog.
    pub fn load_module(&self, file_name: &str, source: &str) -> Result<Vec<u32>, DbError> {
        self.load_module_inner(file_name, source, true)
    }

    /// Loads a module that recovery found in the scheme's catalog (it is not recorded again).
    pub fn load_module_recovered(&self, file_name: &str, source: &str) -> Result<Vec<u32>, DbError> {
        self.load_module_inner(file_name, source, false)
    }

    fn load_module_inner(&self, file_name: &str, source: &str, record: bool) -> Result<Vec<u32>, DbError> {
        let _ddl = self.inner.ddl.lock();
        let mut catalog = Catalog::clone(&self.inner.ctx.catalog.load_full());
        let module = proc::check_source(file_name, source, &catalog).map_err(DbError::Source)?;
        let registry = self.inner.procedures.load_full();
        for p in &module.procedures {
            if registry.id_of(&p.name).is_some() {
                return Err(DbError::ProcedureExists(p.name.clone()));
            }
        }
        for schema in module.tables {
            catalog = catalog.with_table(schema, self.inner.index_backend)?;
        }
        let mut compiled = Vec::new();
        for p in module.procedures {
            compiled.push(CompiledProcedure::compile(Arc::new(p), &catalog).map_err(|d| DbError::Source(vec![d]))?);
        }
        if record {
            self.inner.ctx.scheme.record_module(file_name, source)?;
        }
        let mut procedures = registry.procedures.clone();
        let mut by_name = registry.by_name.clone();
        let mut log_as_data = registry.log_as_data.clone();
        let mut ids = Vec::new();
        for c in compiled {
            let id = procedures.len() as u32;
            by_name.insert(c.name().to_ascii_lowercase(), id);
            log_as_data.push(crate::pacman::ProcedureAnalysis::of(c.ir()).is_err());
            procedures.push(Arc::new(c));
            ids.push(id);
        }
        self.inner.ctx.catalog.store(Arc::new(catalog));
        self.inner.procedures.store(Arc::new(ProcedureRegistry { procedures, by_name, log_as_data }));
        Ok(ids)
    }

    /// A new worker: the handle one thread uses to run transactions. Each worker has its own id,
    /// its own last TID and its own log buffers.
    pub fn worker(&self) -> Worker {
        self.try_worker().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Database::worker`], failing instead of panicking past [`WORKERS_MAX`].
    pub fn try_worker(&self) -> Result<Worker, DbError> {
        let id = self.inner.next_worker.fetch_add(1, Ordering::Relaxed);
        if id >= WORKERS_MAX {
            return Err(DbError::TooManyWorkers);
        }
        let log = self.inner.ctx.scheme.worker(id);
        Ok(Worker { inner: Arc::clone(&self.inner), state: WorkerState::new(id, log) })
    }

    /// A worker whose commits are not logged: recovery re-executes logged transactions through
    /// it (command replay), and they are in the log already.
    pub fn replay_worker(&self) -> Worker {
        let log = NoLogging.worker(usize::MAX);
        Worker { inner: Arc::clone(&self.inner), state: WorkerState::new(usize::MAX, log) }
    }

    /// Stops the epoch thread and shuts the durability scheme down.
    pub fn close(&self) -> Result<(), DbError> {
        Ok(self.inner.shut_down()?)
    }
}

impl Drop for Inner {
    /// The last handle is gone: stop the epoch thread and the scheme's threads (a scheme's
    /// shutdown is idempotent, so an explicit `close` before is fine). Errors cannot be returned
    /// from a drop; `close` is the way to see them.
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

impl Inner {
    /// Stops the epoch thread, then the scheme (which advances the epoch itself to flush what was
    /// logged). Both steps are idempotent.
    fn shut_down(&self) -> Result<(), DurabilityError> {
        self.ctx.epochs.stop();
        if let Some(handle) = self.epoch_thread.lock().take() {
            let _ = handle.join();
        }
        self.ctx.scheme.shutdown()
    }
}

/// The procedure-language DDL that declares `schema`.
fn table_ddl(schema: &TableSchema) -> String {
    let names =
        |positions: &[usize]| positions.iter().map(|&p| schema.columns[p].name.as_str()).collect::<Vec<_>>().join(", ");
    let columns: Vec<String> = schema
        .columns
        .iter()
        .map(|c| format!("{} {}{}", c.name, c.ty.name(), if c.nullable { "" } else { " not null" }))
        .collect();
    let mut ddl =
        format!("table {} ({}, primary key ({}));\n", schema.name, columns.join(", "), names(&schema.primary_key));
    for index in &schema.indexes {
        ddl.push_str(&format!("index {} on {} ({});\n", index.name, schema.name, names(&index.columns)));
    }
    ddl
}

/// What a procedure call returns.
#[derive(Clone, Debug)]
pub struct CallOutcome {
    /// The values the procedure returned.
    pub values: Vec<Value>,
    /// The commit: TID and durability ticket.
    pub committed: Committed,
}

/// A thread's handle on the database.
pub struct Worker {
    inner: Arc<Inner>,
    state: WorkerState,
}

impl Worker {
    /// This worker's id.
    pub fn id(&self) -> usize {
        self.state.id
    }

    /// Begins an ad-hoc transaction.
    pub fn begin(&mut self) -> Transaction<'_> {
        self.inner.ctx.begin(&mut self.state)
    }

    /// Calls a stored procedure once: runs it and commits. A conflict is returned as
    /// [`TxnError::Conflict`]; see [`Worker::call_retrying`].
    pub fn call(&mut self, name: &str, args: &[ParamValue]) -> Result<CallOutcome, TxnError> {
        let registry = self.inner.procedures.load_full();
        let id = registry.id_of(name).ok_or_else(|| TxnError::NoSuchProcedure(name.to_string()))?;
        self.call_id(&registry, id, args)
    }

    /// Calls procedure `id` of `registry` once.
    pub fn call_id(
        &mut self,
        registry: &ProcedureRegistry,
        id: u32,
        args: &[ParamValue],
    ) -> Result<CallOutcome, TxnError> {
        self.call_in(registry, id, args, None)
    }

    /// Re-executes procedure `id` as a transaction of versioned command replay at
    /// `snapshot.ts` ([`crate::txn::versions`]); only for a replay worker.
    pub(crate) fn replay_call_at(
        &mut self,
        registry: &ProcedureRegistry,
        id: u32,
        args: &[ParamValue],
        snapshot: Snapshot,
    ) -> Result<CallOutcome, TxnError> {
        self.call_in(registry, id, args, Some(snapshot))
    }

    fn call_in(
        &mut self,
        registry: &ProcedureRegistry,
        id: u32,
        args: &[ParamValue],
        snapshot: Option<Snapshot>,
    ) -> Result<CallOutcome, TxnError> {
        let procedure = Arc::clone(registry.get(id).ok_or_else(|| TxnError::NoSuchProcedure(format!("#{id}")))?);
        let mut tx = self.inner.ctx.begin(&mut self.state);
        if let Some(snapshot) = snapshot {
            tx.set_snapshot(snapshot);
        }
        let log_as_data = registry.logs_calls_as_data(id);
        tx.set_invocation(Invocation { procedure_id: id, args: Arc::from(args), log_as_data });
        let values = match procedure.run(&mut tx, args) {
            Ok(values) => values,
            Err(e) => return Err(tx.settle_error(e)),
        };
        let committed = tx.commit()?;
        Ok(CallOutcome { values, committed })
    }

    /// Calls a procedure, retrying conflicts up to `attempts_max` times with exponential backoff.
    pub fn call_retrying(
        &mut self,
        name: &str,
        args: &[ParamValue],
        attempts_max: u32,
    ) -> Result<CallOutcome, TxnError> {
        let registry = self.inner.procedures.load_full();
        let id = registry.id_of(name).ok_or_else(|| TxnError::NoSuchProcedure(name.to_string()))?;
        retrying(attempts_max, || self.call_id(&registry, id, args))
    }

    /// Runs an ad-hoc transaction body and commits it, retrying conflicts up to `attempts_max`
    /// times with backoff. The body may run several times.
    pub fn run<T>(
        &mut self,
        attempts_max: u32,
        mut body: impl FnMut(&mut Transaction<'_>) -> Result<T, TxnError>,
    ) -> Result<(T, Committed), TxnError> {
        retrying(attempts_max, || {
            let mut tx = self.inner.ctx.begin(&mut self.state);
            let out = match body(&mut tx) {
                Ok(out) => out,
                Err(e) => return Err(tx.settle_error(e)),
            };
            let committed = tx.commit()?;
            Ok((out, committed))
        })
    }

    /// Blocks until a committed transaction may be acknowledged.
    pub fn wait_durable(&self, ticket: &DurabilityTicket) -> Result<(), DurabilityError> {
        self.inner.ctx.scheme.wait_durable(ticket)
    }
}

/// Runs `attempt` until it succeeds, fails with a non-retryable error, or has failed
/// `attempts_max` times; sleeps with exponential backoff (capped at 1 ms) between conflicts.
pub fn retrying<T>(attempts_max: u32, mut attempt: impl FnMut() -> Result<T, TxnError>) -> Result<T, TxnError> {
    let mut backoff_us = 1u64;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        match attempt() {
            Err(e) if e.is_retryable() && attempts < attempts_max => {
                let jitter = rand::random::<u64>() % backoff_us.max(1);
                std::thread::sleep(std::time::Duration::from_micros(backoff_us + jitter));
                backoff_us = (backoff_us * 2).min(1000);
            }
            other => return other,
        }
    }
}
