//! What the killed process runs (`lazarus crash-child`).
//!
//! It opens a database with the value scheme on its log directory (recovering what an earlier
//! round left), prints `ready` on stdout, and runs the workload on [`CrashConfig::threads`]
//! threads until it is killed (or `run_ms` passes, so that an orphan stops by itself). Each
//! worker keeps its committed transactions in a queue and, once the scheme says one is durable,
//! appends its acknowledgement to the ack file (see [`super::acks`]); a KV set is recorded as
//! issued before it is submitted.

use super::acks::AckWriter;
use super::{CrashConfig, CrashError};
use crate::bench::workload::{TxnCall, TxnRequest, Workload};
use crate::db::{Database, DatabaseConfig, ProcedureRegistry, Worker, retrying};
use crate::durability::DurabilityTicket;
use crate::storage::{ParamValue, Value};
use crate::txn::TxnError;
use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most acknowledgements a worker keeps waiting for durability before it blocks.
const PENDING_MAX: usize = 100_000;

/// Options of one child run.
#[derive(Clone, Debug)]
pub struct ChildOptions {
    /// The workload and engine settings.
    pub config: CrashConfig,
    /// The log directory (already holding a loaded database).
    pub log_dir: PathBuf,
    /// The ack file to append to.
    pub ack_file: PathBuf,
    /// Seed of the workload's generators.
    pub seed: u64,
    /// The round number (written to the ack file).
    pub round: u64,
    /// Stop by itself after this many milliseconds.
    pub run_ms: u64,
    /// A deliberately broken child that acknowledges at commit, before durability (to show that
    /// the harness catches it).
    pub ack_before_durable: bool,
}

/// How to recognise the transactions whose acknowledgement the verifier can check.
#[derive(Clone, Copy, Debug)]
struct Recognizer {
    kv_set: Option<u32>,
    new_order: Option<u32>,
    payment: Option<u32>,
    /// Procedures that only read (no acknowledgement: nothing to find after recovery).
    read_only: [Option<u32>; 4],
}

impl Recognizer {
    fn of(registry: &ProcedureRegistry) -> Recognizer {
        Recognizer {
            kv_set: registry.id_of("kv_set"),
            new_order: registry.id_of("new_order"),
            payment: registry.id_of("payment"),
            read_only: ["kv_get", "order_status", "stock_level", "balance"].map(|name| registry.id_of(name)),
        }
    }

    /// The line to append before the request runs (a KV set: its key as issued).
    fn issue_line(&self, request: &TxnRequest) -> Option<String> {
        match &request.call {
            TxnCall::Procedure { id, args } if Some(*id) == self.kv_set => Some(format!("I {}\n", kv_key(args)?)),
            _ => None,
        }
    }

    /// The line that acknowledges a committed request that returned `values`.
    fn ack_line(&self, request: &TxnRequest, values: &[Value]) -> Option<String> {
        let int = |v: Option<&Value>| v.and_then(Value::as_int);
        let arg = |args: &[ParamValue], i: usize| match args.get(i) {
            Some(ParamValue::Scalar(v)) => v.as_int(),
            _ => None,
        };
        match &request.call {
            TxnCall::Procedure { id, args } if Some(*id) == self.kv_set => {
                Some(format!("K {} {}\n", kv_key(args)?, int(values.first())?))
            }
            TxnCall::Procedure { id, args } if Some(*id) == self.new_order => {
                Some(format!("N {} {} {}\n", arg(args, 0)?, arg(args, 1)?, int(values.first())?))
            }
            TxnCall::Procedure { id, args } if Some(*id) == self.payment => {
                Some(format!("P {} {} {} {}\n", arg(args, 2)?, arg(args, 3)?, int(values.first())?, arg(args, 7)?))
            }
            TxnCall::Procedure { id, .. } if self.read_only.contains(&Some(*id)) => None,
            _ => Some(format!("A {}\n", request.kind)),
        }
    }
}

/// The key number of a KV call's first argument (`key:<n>`).
fn kv_key(args: &[ParamValue]) -> Option<u64> {
    match args.first() {
        Some(ParamValue::Scalar(v)) => crate::workload::kv::key_index(v.as_text()?),
        _ => None,
    }
}

/// Runs the child until it is killed or `run_ms` passes.
pub fn run_child(options: &ChildOptions) -> Result<(), CrashError> {
    options.config.validate()?;
    let workload = options.config.workload()?;
    let (scheme, _) = options.config.scheme(&options.log_dir)?;
    let db = Database::open(DatabaseConfig {
        epoch_interval_ms: options.config.epoch_interval_ms,
        scheme: Arc::clone(&scheme),
        ..DatabaseConfig::default()
    })?;
    if db.catalog().tables().is_empty() {
        return Err(CrashError::Child(format!(
            "{} holds no database; the crash test copies a loaded one there",
            options.log_dir.display()
        )));
    }
    let acks = Arc::new(AckWriter::open(&options.ack_file)?);
    acks.append(&format!("R {}\n", options.round))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready").and_then(|()| stdout.flush()).map_err(|e| CrashError::Child(e.to_string()))?;
    let deadline = Instant::now() + Duration::from_millis(options.run_ms);
    let recognizer = Recognizer::of(&db.procedures());
    let threads = options.config.threads;
    let results: Vec<Result<(), CrashError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (db, workload, acks) = (&db, &workload, &acks);
                scope.spawn(move || {
                    let mut run = WorkerLoop {
                        db,
                        worker: db.try_worker()?,
                        registry: db.procedures(),
                        recognizer,
                        acks,
                        pending: VecDeque::new(),
                        ack_before_durable: options.ack_before_durable,
                    };
                    run.run(workload, thread, threads, options.seed, deadline)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(CrashError::Child("a worker panicked".into()))))
            .collect()
    });
    for result in results {
        result?;
    }
    db.close()?;
    Ok(())
}

/// One worker of the child.
struct WorkerLoop<'a> {
    db: &'a Database,
    worker: Worker,
    registry: Arc<ProcedureRegistry>,
    recognizer: Recognizer,
    acks: &'a AckWriter,
    pending: VecDeque<(DurabilityTicket, String)>,
    ack_before_durable: bool,
}

impl WorkerLoop<'_> {
    fn run(
        &mut self,
        workload: &Arc<dyn Workload>,
        thread: usize,
        threads: usize,
        seed: u64,
        deadline: Instant,
    ) -> Result<(), CrashError> {
        let mut generator = workload.generator(self.db, thread, threads, seed);
        while Instant::now() < deadline {
            let request = generator.next_request();
            if let Some(line) = self.recognizer.issue_line(&request) {
                self.acks.append(&line)?;
            }
            let (worker, registry) = (&mut self.worker, &self.registry);
            match retrying(u32::MAX, || attempt(worker, registry, &request.call)) {
                Ok((values, ticket)) => {
                    if let Some(line) = self.recognizer.ack_line(&request, &values) {
                        if self.ack_before_durable {
                            self.acks.append(&line)?;
                        } else {
                            self.pending.push_back((ticket, line));
                        }
                    }
                }
                Err(TxnError::UserAbort(_)) => {}
                Err(e) => return Err(e.into()),
            }
            self.acknowledge_durable()?;
        }
        Ok(())
    }

    /// Appends, in one write, the acknowledgements of every queued transaction that is durable
    /// now; blocks on the oldest when the queue is full.
    fn acknowledge_durable(&mut self) -> Result<(), CrashError> {
        if self.pending.len() >= PENDING_MAX
            && let Some((ticket, _)) = self.pending.front()
        {
            self.db.scheme().wait_durable(ticket)?;
        }
        let mut lines = String::new();
        while let Some((ticket, line)) = self.pending.front() {
            if !self.db.scheme().is_durable(ticket) {
                break;
            }
            lines.push_str(line);
            self.pending.pop_front();
        }
        self.acks.append(&lines)
    }
}

/// Runs `call` once: (returned values, durability ticket).
fn attempt(
    worker: &mut Worker,
    registry: &ProcedureRegistry,
    call: &TxnCall,
) -> Result<(Vec<Value>, DurabilityTicket), TxnError> {
    match call {
        TxnCall::Procedure { id, args } => {
            let outcome = worker.call_id(registry, *id, args)?;
            Ok((outcome.values, outcome.committed.durability))
        }
        TxnCall::AdHoc(body) => worker.run(1, |tx| body(tx)).map(|((), c)| (Vec::new(), c.durability)),
    }
}
