//! Shared by the reliability sweeps (`tests/reliability_*.rs`): histories and their models, the
//! acknowledged-prefix oracle, and the sweeps themselves (power loss at every I/O of a history and
//! of recovery, damage, injected I/O errors), over a [`Setup`] that says which scheme runs.
//! `docs/RELIABILITY.md` describes them and has the numbers.
//!
//! **The oracle.** A history runs on one thread through two workers (so both loggers log), so its
//! serial order is the order its steps were issued. A model gives the database state after every
//! prefix of the steps. After a crash, the recovered state must equal the state after a prefix P
//! with `acked ≤ P ≤ issued`, where `acked` is one past the last step whose acknowledgement the
//! client saw (`wait_durable` returned Ok, or a module load returned Ok) and `issued` counts the
//! steps attempted. Secondary indexes must agree with their tables.
//!
//! `LAZARUS_RELIABILITY_FULL=1` runs the long sweep (more seeds, every crash point of recovery,
//! every fault point); `LAZARUS_RELIABILITY_SEEDS=n` sets the damage seeds per crash point.
//! Each test prints a `RELIABILITY` line with its counts (`--nocapture` shows them).

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub mod histories;
pub mod schemes;

#[allow(unused_imports)]
pub use histories::*;
#[allow(unused_imports)]
pub use schemes::*;

use lazarus::db::DbError;
use lazarus::durability::checkpoint::format as checkpoint_format;
use lazarus::durability::frame;
use lazarus::durability::value::files;
use lazarus::durability::value::files::EntryFormat;
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::durability::{DurabilityError, DurabilityTicket};
use lazarus::io::sim::{Fault, FaultError, OpKind, SECTOR_SIZE_BYTES, SimDisk};
use lazarus::storage::{Direction, KeyRange, ParamValue, TableId, Value};
use lazarus::txn::Scan;
use lazarus::{Database, DatabaseConfig};
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const LOG_DIRS: [&str; 2] = ["/db/log0", "/db/log1"];
/// The epoch advances after every this many steps, so a history spans many epochs and files.
pub const ADVANCE_EVERY: usize = 2;
/// The client waits for durability after every this many steps.
pub const WAIT_EVERY: usize = 4;
/// Violations listed in full in a failure message.
pub const VIOLATIONS_SHOWN: usize = 10;

pub const KV_DEL_SOURCE: &str = "procedure kv_del(kname text) { delete from kv where k = kname; }";
/// The procedures the histories' modules define (a state lists those the catalog holds).
pub const PROCEDURES: [&str; 8] =
    ["open_account", "transfer", "balance", "branch_total", "kv_load", "kv_get", "kv_set", "kv_del"];

// ---------------------------------------------------------------------------------------------
// Knobs, opening a database on a simulated disk

pub struct Knobs {
    pub full: bool,
    pub seeds: u64,
    pub recovery_crash_stride: u64,
    pub fault_stride: usize,
}

pub fn knobs() -> Knobs {
    let full = std::env::var("LAZARUS_RELIABILITY_FULL").is_ok_and(|v| v == "1");
    let seeds_default = if full { 12 } else { 3 };
    let seeds = std::env::var("LAZARUS_RELIABILITY_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(seeds_default);
    Knobs { full, seeds, recovery_crash_stride: if full { 1 } else { 8 }, fault_stride: if full { 1 } else { 3 } }
}

/// Which scheme a sweep runs, and how.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Prefix of the `RELIABILITY` lines: `value`, `checkpoint`, `command`.
    pub label: &'static str,
    /// After-images (scheme `value`) or procedure calls (scheme `command`).
    pub entry_format: EntryFormat,
    /// 0 = no checkpoints.
    pub checkpoint_interval_ms: u64,
    /// A pause after every step, so that timed checkpoints happen in the middle of a history.
    pub step_pause_ms: u64,
    /// Bytes added to every value `kv_set` writes (larger checkpoint files).
    pub value_pad_bytes: usize,
    /// Outside the full sweep, power is cut at every this many I/Os (1 = every I/O).
    pub ci_crash_stride: usize,
    /// The epoch advancer's interval; the history also advances the epoch every
    /// [`ADVANCE_EVERY`] steps. 10 s: only the history advances it, and runs repeat closely.
    pub epoch_interval_ms: u64,
    /// Which scheme: the value scheme (`entry_format` says value or command) or a stream scheme
    /// ([`schemes`]).
    pub scheme: SchemeKind,
}

/// SiloR value logging without checkpoints (the first sweeps).
pub const VALUE: Setup = Setup {
    label: "value",
    entry_format: EntryFormat::Value,
    checkpoint_interval_ms: 0,
    step_pause_ms: 0,
    value_pad_bytes: 0,
    ci_crash_stride: 1,
    epoch_interval_ms: 10_000,
    scheme: SchemeKind::Value,
};

pub fn options(setup: Setup, disk: &SimDisk) -> ValueOptions {
    let mut o = ValueOptions::new(LOG_DIRS.iter().map(PathBuf::from).collect());
    o.entry_format = setup.entry_format;
    o.checkpoint.interval_ms = setup.checkpoint_interval_ms;
    o.checkpoint.files_per_dir = 2;
    o.checkpoint.block_size_bytes = 4096; // several blocks per file, round-robin over the files
    o.checkpoint.sync_every_bytes = 8192;
    o.fs = Arc::new(disk.clone());
    o.rotate_epochs = 2; // rotate often: recovery sees several files per logger
    o.sync_interval_ms = 1000; // loggers run when an epoch advances (the test advances by hand)
    o.buffer_size_bytes = 4096;
    o.recovery_threads = 2;
    o
}

pub fn open(setup: Setup, disk: &SimDisk) -> Result<Database, DbError> {
    match setup.scheme {
        SchemeKind::Value => open_scheme(setup, disk).map(|(db, _)| db),
        SchemeKind::Stream(flavor) => schemes::open_stream(flavor, disk),
    }
}

/// Opens (recovers) a database on `disk`; also returns the scheme, for its checkpoint status.
pub fn open_scheme(setup: Setup, disk: &SimDisk) -> Result<(Database, Arc<ValueLogging>), DbError> {
    let scheme = Arc::new(ValueLogging::new(options(setup, disk))?);
    let as_scheme: Arc<dyn lazarus::durability::LogScheme> = scheme.clone();
    let config =
        DatabaseConfig { epoch_interval_ms: setup.epoch_interval_ms, scheme: as_scheme, ..DatabaseConfig::default() };
    Ok((Database::open(config)?, scheme))
}

pub fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

pub fn text(s: &str) -> ParamValue {
    ParamValue::Scalar(Value::text(s))
}

// ---------------------------------------------------------------------------------------------
// Histories and their models

#[derive(Clone, Debug)]
pub enum Step {
    Module {
        name: &'static str,
        source: &'static str,
    },
    Call {
        worker: usize,
        procedure: &'static str,
        args: Vec<ParamValue>,
    },
    /// An ad-hoc transaction (no procedure) that puts one row.
    Put {
        worker: usize,
        table: &'static str,
        row: Vec<Value>,
    },
}

/// A deterministic history and the state after each of its prefixes (`states[p]` is the state
/// after steps `0..p`).
pub struct History {
    pub name: &'static str,
    pub steps: Vec<Step>,
    pub states: Vec<Dump>,
    pub setup: Setup,
}

/// A database state: one line per table and per row, sorted.
pub type Dump = Vec<String>;

pub fn row_line(table: &str, row: &[Value]) -> String {
    format!("{table} {row:?}")
}

/// Money moves between 6 accounts; the total is invariant and each step is checkable.
pub fn transfer_history(setup: Setup, steps_total: usize) -> History {
    const ACCOUNTS: usize = 6;
    const INITIAL: i64 = 100;
    let source = lazarus::workload::transfer::SOURCE;
    let mut steps = vec![Step::Module { name: "transfer.proc", source }];
    let mut balances: Vec<Option<i64>> = vec![None; ACCOUNTS];
    let dump = |balances: &[Option<i64>]| -> Dump {
        let mut out = vec!["table account".to_string()];
        out.extend(PROCEDURES[..4].iter().map(|p| format!("procedure {p}")));
        for (id, b) in balances.iter().enumerate() {
            if let Some(b) = b {
                let row = [Value::Int(id as i64), Value::Int((id % 2) as i64), Value::Int(*b)];
                out.push(row_line("account", &row));
            }
        }
        out.sort();
        out
    };
    let mut states = vec![Vec::new(), dump(&balances)];
    for id in 0..ACCOUNTS {
        let args = vec![int(id as i64), int((id % 2) as i64), int(INITIAL)];
        steps.push(Step::Call { worker: id % 2, procedure: "open_account", args });
        balances[id] = Some(INITIAL);
        states.push(dump(&balances));
    }
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    while steps.len() < steps_total {
        let r = next_random(&mut rng);
        let src = (r % ACCOUNTS as u64) as usize;
        let dst = (src + 1 + ((r >> 8) % (ACCOUNTS as u64 - 1)) as usize) % ACCOUNTS;
        let amount = 1 + ((r >> 16) % 40) as i64;
        if balances[src].unwrap_or(0) < amount {
            continue; // the procedure would abort: not a step of the serial order
        }
        balances[src] = balances[src].map(|b| b - amount);
        balances[dst] = balances[dst].map(|b| b + amount);
        let args = vec![int(src as i64), int(dst as i64), int(amount)];
        steps.push(Step::Call { worker: steps.len() % 2, procedure: "transfer", args });
        states.push(dump(&balances));
    }
    History { name: "transfer", steps, states, setup }
}

/// Versioned values on 5 keys (kv.proc's `kv_set`), with deletes from a second module loaded
/// mid-history (so the catalog is rewritten while data is being logged). With `adhoc_every` > 0,
/// every so many steps the set is an ad-hoc transaction (a put of the row `kv_set` would write).
pub fn kv_history(setup: Setup, steps_total: usize, adhoc_every: usize) -> History {
    const KEYS: u64 = 5;
    const DEL_MODULE_AT: usize = 5;
    let mut steps = vec![Step::Module { name: "kv.proc", source: lazarus::workload::kv::SOURCE }];
    let mut model: std::collections::BTreeMap<String, (u64, String)> = Default::default();
    let dump = |model: &std::collections::BTreeMap<String, (u64, String)>, deletes: bool| -> Dump {
        let mut out = vec!["table kv".to_string()];
        let procedures = if deletes { &PROCEDURES[4..] } else { &PROCEDURES[4..7] };
        out.extend(procedures.iter().map(|p| format!("procedure {p}")));
        out.extend(model.iter().map(|(k, (_, v))| row_line("kv", &[Value::text(k), Value::text(v)])));
        out.sort();
        out
    };
    let mut states = vec![Vec::new(), dump(&model, false)];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    while steps.len() < steps_total {
        let i = steps.len();
        if i == DEL_MODULE_AT {
            steps.push(Step::Module { name: "kv_del.proc", source: KV_DEL_SOURCE });
            states.push(dump(&model, true));
            continue;
        }
        let r = next_random(&mut rng);
        let key = lazarus::workload::kv::key_name(r % KEYS);
        if i > DEL_MODULE_AT && (r >> 8).is_multiple_of(4) {
            model.remove(&key);
            steps.push(Step::Call { worker: i % 2, procedure: "kv_del", args: vec![text(&key)] });
        } else {
            let data = format!("d{i}{}", "x".repeat(setup.value_pad_bytes));
            let version = model.get(&key).map_or(1, |(v, _)| v + 1);
            let value = format!("{version:012}{data}");
            model.insert(key.clone(), (version, value.clone()));
            if adhoc_every > 0 && i % adhoc_every == 0 {
                let row = vec![Value::text(&key), Value::text(&value)];
                steps.push(Step::Put { worker: i % 2, table: "kv", row });
            } else {
                steps.push(Step::Call { worker: i % 2, procedure: "kv_set", args: vec![text(&key), text(&data)] });
            }
        }
        states.push(dump(&model, i > DEL_MODULE_AT));
    }
    History { name: "kv", steps, states, setup }
}

pub fn next_random(state: &mut u64) -> u64 {
    // xorshift64*: deterministic, no dependency on the rand crate's stream stability.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

// ---------------------------------------------------------------------------------------------
// Running a history and reading a state

/// What the client saw of a run.
#[derive(Default, Debug)]
pub struct Run {
    /// One past the last acknowledged step.
    pub acked: usize,
    /// Steps attempted.
    pub issued: usize,
    /// The step about to be issued when the client first saw that an injected fault had fired.
    pub fault_seen_at: Option<usize>,
    /// Steps acknowledged although issued after the fault had fired.
    pub acked_after_fault: Vec<usize>,
    /// Errors the client saw after the fault had fired.
    pub errors_after_fault: Vec<String>,
    /// The first error the client saw.
    pub first_error: Option<String>,
}

impl Run {
    pub fn ack(&mut self, step: usize) {
        self.acked = self.acked.max(step + 1);
        if self.fault_seen_at.is_some_and(|f| step >= f) {
            self.acked_after_fault.push(step);
        }
    }

    /// Records an error; `fault_fired` says whether an injected fault had fired by then.
    pub fn error(&mut self, e: impl std::fmt::Display, fault_fired: bool) {
        let message = e.to_string();
        if fault_fired {
            self.errors_after_fault.push(message.clone());
        }
        self.first_error.get_or_insert(message);
    }
}

/// Runs `steps[range]` on `db`: advances the epoch every [`ADVANCE_EVERY`] steps and waits for
/// durability every [`WAIT_EVERY`] steps and at the end. Stops at the
/// first error unless `keep_going`.
pub fn run_history(db: &Database, disk: &SimDisk, history: &History, range: Range<usize>, keep_going: bool) -> Run {
    let steps = &history.steps;
    let mut run = Run { acked: range.start, ..Run::default() };
    let Ok(mut workers) = (0..2).map(|_| db.try_worker()).collect::<Result<Vec<_>, _>>() else {
        run.error("no workers", disk.faults_fired() > 0);
        return run;
    };
    let mut pending: Option<(usize, DurabilityTicket)> = None;
    // The client waits for every step's ticket, so that `acked` counts only steps it saw
    // acknowledged: a read-only transaction is acknowledged once what it read is durable, and a
    // Taurus transaction once it and its predecessors are, neither once everything before it is.
    let mut earlier: Vec<(usize, DurabilityTicket)> = Vec::new();
    let end = range.end;
    for i in range {
        if run.fault_seen_at.is_none() && disk.faults_fired() > 0 {
            run.fault_seen_at = Some(i);
        }
        run.issued = i + 1;
        let ok = match &steps[i] {
            // A module load is acknowledged when it returns, and takes its place in the serial
            // order: every step before it must be durable by then.
            Step::Module { name, source } => match db.load_module(name, source) {
                Ok(_) => {
                    pending = None;
                    earlier.clear();
                    run.ack(i);
                    true
                }
                Err(e) => {
                    run.error(e, disk.faults_fired() > 0);
                    false
                }
            },
            Step::Call { worker, procedure, args } => match workers[*worker].call(procedure, args) {
                Ok(out) => {
                    if let Some(p) = pending.take() {
                        earlier.push(p);
                    }
                    pending = Some((i, out.committed.durability));
                    true
                }
                Err(e) => {
                    run.error(e, disk.faults_fired() > 0);
                    false
                }
            },
            Step::Put { worker, table, row } => match put(&mut workers[*worker], table, row) {
                Ok(ticket) => {
                    if let Some(p) = pending.take() {
                        earlier.push(p);
                    }
                    pending = Some((i, ticket));
                    true
                }
                Err(e) => {
                    run.error(e, disk.faults_fired() > 0);
                    false
                }
            },
        };
        if history.setup.step_pause_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(history.setup.step_pause_ms));
        }
        if (i + 1) % ADVANCE_EVERY == 0 {
            db.epochs().advance();
        }
        let waited = if (i + 1) % WAIT_EVERY == 0 || i + 1 == end {
            let tickets: Vec<(usize, DurabilityTicket)> = earlier.drain(..).chain(pending.take()).collect();
            wait_all(db, disk, &workers[0], tickets, &mut run)
        } else {
            true
        };
        let stopped = !(ok && waited);
        if stopped && !keep_going {
            break;
        }
    }
    run
}

/// Runs an ad-hoc transaction that puts `row` into `table`.
fn put(worker: &mut lazarus::Worker, table: &str, row: &[Value]) -> Result<DurabilityTicket, String> {
    let mut txn = worker.begin();
    let id = txn.table_id(table).map_err(|e| e.to_string())?;
    txn.put(id, Arc::new(row.to_vec())).map_err(|e| e.to_string())?;
    txn.commit().map(|c| c.durability).map_err(|e| e.to_string())
}

/// Advances the epoch and waits for each of `tickets` in order; returns whether all were
/// acknowledged.
pub fn wait_all(
    db: &Database,
    disk: &SimDisk,
    worker: &lazarus::Worker,
    tickets: Vec<(usize, DurabilityTicket)>,
    run: &mut Run,
) -> bool {
    if tickets.is_empty() {
        return true;
    }
    db.epochs().advance();
    for (step, ticket) in tickets {
        if let Err(e) = worker.wait_durable(&ticket) {
            run.error(e, disk.faults_fired() > 0);
            return false;
        }
        run.ack(step);
    }
    true
}

/// Advances the epoch and waits for the last pending step; returns whether it was acknowledged.
pub fn wait(
    db: &Database,
    disk: &SimDisk,
    worker: &lazarus::Worker,
    pending: &mut Option<(usize, DurabilityTicket)>,
    run: &mut Run,
) -> bool {
    let Some((step, ticket)) = pending.take() else {
        return true;
    };
    db.epochs().advance();
    match worker.wait_durable(&ticket) {
        Ok(()) => {
            run.ack(step);
            true
        }
        Err(e) => {
            run.error(e, disk.faults_fired() > 0);
            false
        }
    }
}

pub fn scan_rows(
    worker: &mut lazarus::Worker,
    table: TableId,
    index: Option<usize>,
) -> Result<Vec<Vec<Value>>, String> {
    let scan = Scan { table, index, range: KeyRange::all(), direction: Direction::Forward, limit: 10_000 };
    let (rows, _) = worker.run(100, |tx| tx.scan(&scan)).map_err(|e| e.to_string())?;
    Ok(rows.iter().map(|r| r.to_vec()).collect())
}

/// The state of `db`; an error if a secondary index disagrees with its table.
pub fn dump(db: &Database) -> Result<Dump, String> {
    let catalog = db.catalog();
    let mut worker = db.try_worker().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for table in catalog.tables() {
        let name = &table.schema.name;
        out.push(format!("table {name}"));
        let rows = scan_rows(&mut worker, table.id, None)?;
        let mut primary: Vec<String> = rows.iter().map(|r| row_line(name, r)).collect();
        primary.sort();
        for i in 0..table.schema.indexes.len() {
            let mut by_index: Vec<String> =
                scan_rows(&mut worker, table.id, Some(i))?.iter().map(|r| row_line(name, r)).collect();
            by_index.sort();
            if by_index != primary {
                return Err(format!("index {i} of {name} disagrees with its table: {by_index:?} vs {primary:?}"));
            }
        }
        out.extend(primary);
    }
    let procedures = db.procedures();
    let listed = PROCEDURES.iter().chain(histories::PROCEDURES_MORE.iter());
    out.extend(listed.filter(|p| procedures.id_of(p).is_some()).map(|p| format!("procedure {p}")));
    out.sort();
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Tallies

/// Counts over many cases; the columns of docs/RELIABILITY.md.
#[derive(Default, Debug)]
pub struct Tally {
    pub cases: u64,
    pub crash_points: u64,
    pub lost_acked: u64,
    pub phantoms: u64,
    pub clear_errors: u64,
    pub other_errors: u64,
    pub silent_divergences: u64,
    pub undetected_damage: u64,
    pub recovery_crash_cases: u64,
    /// Crashed images with an installed checkpoint (recovery loaded it).
    pub checkpointed_images: u64,
    pub continuation_cases: u64,
    pub fault_points: u64,
    pub faults_fired: u64,
    pub acked_after_fault: u64,
    pub unclear_messages: u64,
    /// Taurus: recovered states that are a dependency-closed set of steps, not an issue-order prefix.
    pub reordered: u64,
    pub violations: Vec<String>,
}

impl Tally {
    pub fn violation(&mut self, message: String) {
        self.violations.push(message);
    }

    pub fn report(&self, what: &str) {
        let mut line = format!(
            "RELIABILITY {what}: cases {} (crash points {}, recovery-crash cases {}, continuations {}), \
             lost acked {}, phantoms {}, clear errors {}, other errors {}, silent divergences {}, undetected damage {}",
            self.cases,
            self.crash_points,
            self.recovery_crash_cases,
            self.continuation_cases,
            self.lost_acked,
            self.phantoms,
            self.clear_errors,
            self.other_errors,
            self.silent_divergences,
            self.undetected_damage
        );
        if self.reordered > 0 {
            let _ = write!(line, ", dependency-closed (not issue-order) states {}", self.reordered);
        }
        if self.checkpointed_images > 0 {
            let _ = write!(line, ", images with a checkpoint {}", self.checkpointed_images);
        }
        if self.fault_points > 0 {
            let _ = write!(
                line,
                ", fault points {}, faults fired {}, acked after fault {}, unclear messages {}",
                self.fault_points, self.faults_fired, self.acked_after_fault, self.unclear_messages
            );
        }
        println!("{line}");
    }

    pub fn assert_clean(&self, what: &str) {
        self.report(what);
        let shown: Vec<&String> = self.violations.iter().take(VIOLATIONS_SHOWN).collect();
        assert!(self.violations.is_empty(), "{what}: {} violations, the first: {shown:#?}", self.violations.len());
    }
}

/// How a recovered state compares with the history: `Ok(p)` when it is the state after prefix
/// `p` with `acked ≤ p ≤ issued`.
pub fn classify(
    history: &History,
    state: &Dump,
    acked: usize,
    issued: usize,
    tally: &mut Tally,
    case: &str,
) -> Option<usize> {
    let matches: Vec<usize> = (0..=issued.min(history.steps.len())).filter(|&p| history.states[p] == *state).collect();
    if let Some(&p) = matches.iter().rev().find(|&&p| p >= acked) {
        return Some(p);
    }
    if let SchemeKind::Stream(flavor) = history.setup.scheme
        && flavor.is_taurus()
        && let Some(dropped) = histories::dependency_closed_match(history, state, acked, issued)
    {
        // Taurus: a serial order that differs from the issue order only between independent
        // transactions (see `dependency_closed_match`).
        // No continuation is checked from such a state (the history's next step assumes a
        // prefix): returning the history's length skips it.
        tally.reordered += 1;
        let _ = dropped;
        return Some(history.steps.len());
    }
    if let Some(&p) = matches.last() {
        tally.lost_acked += 1;
        tally.violation(format!("{case}: recovered the state after {p} steps, but {acked} were acknowledged"));
    } else {
        tally.phantoms += 1;
        tally.violation(format!("{case}: recovered a state after no prefix of 0..={issued} steps: {state:?}"));
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Recovery checks

/// Recovers a copy of `image`, checks it against the history, then runs the next step on the
/// recovered database, crashes it and checks that recovery gives exactly the state after that
/// step too. Returns the recovered state.
pub fn check_recovery(
    history: &History,
    image: &SimDisk,
    run: &Run,
    seed: u64,
    tally: &mut Tally,
    case: &str,
) -> Option<Dump> {
    tally.cases += 1;
    let disk = image.fork();
    let db = match open(history.setup, &disk) {
        Ok(db) => db,
        Err(e) => {
            if matches!(e, DbError::Durability(DurabilityError::Corrupt { .. })) {
                tally.clear_errors += 1;
            } else {
                tally.other_errors += 1;
            }
            tally.violation(format!("{case}: recovery after power loss failed: {e}"));
            return None;
        }
    };
    let state = match dump(&db) {
        Ok(state) => state,
        Err(e) => {
            tally.phantoms += 1;
            tally.violation(format!("{case}: {e}"));
            return None;
        }
    };
    let prefix = classify(history, &state, run.acked, run.issued, tally, case)?;
    if prefix < history.steps.len() {
        continue_after_recovery(history, &db, &disk, prefix, seed, tally, case);
    }
    let _ = db.close();
    Some(state)
}

/// The recovered database must work: step `prefix` is acknowledged, and a crash right after it
/// recovers to exactly the state after `prefix + 1` steps (void epochs stay void).
pub fn continue_after_recovery(
    history: &History,
    db: &Database,
    disk: &SimDisk,
    prefix: usize,
    seed: u64,
    tally: &mut Tally,
    case: &str,
) {
    tally.continuation_cases += 1;
    let run = run_history(db, disk, history, prefix..prefix + 1, false);
    if run.acked != prefix + 1 {
        tally.other_errors += 1;
        tally.violation(format!("{case}: step {prefix} after recovery was not acknowledged: {:?}", run.first_error));
        return;
    }
    let image = disk.crash(seed.wrapping_mul(31).wrapping_add(7));
    match open(history.setup, &image) {
        Ok(again) => {
            match dump(&again) {
                Ok(state) if state == history.states[prefix + 1] => {}
                Ok(state) => {
                    tally.lost_acked += 1;
                    tally.violation(format!(
                        "{case}: after recovery to {prefix} steps, step {prefix} was acknowledged, then a crash \
                         recovered {state:?}, not {:?}",
                        history.states[prefix + 1]
                    ));
                }
                Err(e) => {
                    tally.phantoms += 1;
                    tally.violation(format!("{case}: second recovery: {e}"));
                }
            }
            let _ = again.close();
        }
        Err(e) => {
            tally.other_errors += 1;
            tally.violation(format!("{case}: second recovery failed: {e}"));
        }
    }
}

/// Crashes recovery of `image` at each of its I/Os, recovers again, and requires the state of
/// one clean recovery.
pub fn recovery_crash_sweep(setup: Setup, image: &SimDisk, expected: &Dump, tally: &mut Tally, case: &str) {
    for j in 0u64.. {
        let disk = image.fork();
        disk.freeze_after(j);
        if let Ok(db) = open(setup, &disk) {
            let _ = db.close();
        }
        let completed = disk.refused_ops() == 0;
        for s in 0..2u64 {
            tally.recovery_crash_cases += 1;
            let again = disk.crash(j * 2 + s);
            let case = format!("{case} recovery-crash j={j} seed={}", j * 2 + s);
            match open(setup, &again) {
                Ok(db) => {
                    match dump(&db) {
                        Ok(state) if state == *expected => {}
                        Ok(state) => {
                            tally.silent_divergences += 1;
                            tally.violation(format!(
                                "{case}: recovered {state:?}, one clean recovery gave {expected:?}"
                            ));
                        }
                        Err(e) => {
                            tally.phantoms += 1;
                            tally.violation(format!("{case}: {e}"));
                        }
                    }
                    let _ = db.close();
                }
                Err(e) => {
                    tally.other_errors += 1;
                    tally.violation(format!("{case}: recovery after a crashed recovery failed: {e}"));
                }
            }
        }
        if completed {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Power loss at every I/O

pub fn power_loss_sweep(history: &History) -> Tally {
    let knobs = knobs();
    let steps = history.steps.len() - 1; // the last step is kept for the check after recovery
    let mut tally = Tally::default();
    let stride = if knobs.full { 1 } else { history.setup.ci_crash_stride };
    for k in (0u64..).step_by(stride) {
        let disk = SimDisk::new();
        disk.freeze_after(k);
        let run = match open(history.setup, &disk) {
            Ok(db) => {
                let run = run_history(&db, &disk, history, 0..steps, false);
                let _ = db.close();
                run
            }
            Err(_) => Run::default(),
        };
        let completed = disk.refused_ops() == 0;
        if std::env::var("LAZARUS_RELIABILITY_TRACE").is_ok() {
            eprintln!(
                "{} k={k} acked {} issued {} ops {} {:?}",
                history.name,
                run.acked,
                run.issued,
                disk.ops(),
                run.first_error
            );
        }
        if completed {
            assert_eq!(run.acked, steps, "an unharmed run acknowledges every step: {:?}", run.first_error);
        }
        tally.crash_points += 1;
        for s in 0..knobs.seeds {
            let seed = k * 1000 + s;
            let case = format!("{} k={k} seed={seed} (acked {}, issued {})", history.name, run.acked, run.issued);
            let image = disk.crash(seed);
            if installed_checkpoint(&image).is_some() {
                tally.checkpointed_images += 1;
            }
            let clean = check_recovery(history, &image, &run, seed, &mut tally, &case);
            if let Some(expected) = clean
                && s == 0
                && (k % knobs.recovery_crash_stride == 0 || completed)
            {
                recovery_crash_sweep(history.setup, &image, &expected, &mut tally, &case);
            }
        }
        if completed {
            break;
        }
    }
    tally
}

// ---------------------------------------------------------------------------------------------
// 2. Log damage

/// A disk image whose logs hold `acked` acknowledged steps, then a synced tail that `pepoch`
/// does not cover (the pepoch rename failed), and the state recovery must give.
pub fn damaged_base(history: &History) -> (SimDisk, Dump) {
    let disk = SimDisk::new();
    let db = open(history.setup, &disk).expect("open");
    let acked = history.steps.len() - 3;
    let run = run_history(&db, &disk, history, 0..acked, false);
    assert_eq!(run.acked, acked, "{:?}", run.first_error);
    disk.inject(Fault {
        kind: Some(OpKind::Rename),
        nth: disk.ops_of(OpKind::Rename) + 1,
        error: FaultError::Eio,
        sticky: true,
    });
    let mut workers = [db.worker(), db.worker()];
    let mut last = None;
    for step in &history.steps[acked..] {
        last = Some(match step {
            Step::Call { worker, procedure, args } => {
                workers[*worker].call(procedure, args).expect("call").committed.durability
            }
            Step::Put { worker, table, row } => put(&mut workers[*worker], table, row).expect("put"),
            Step::Module { .. } => panic!("the tail must be transactions"),
        });
    }
    db.epochs().advance();
    let err = workers[0].wait_durable(&last.expect("a tail")).expect_err("the pepoch rename fails");
    assert!(err.to_string().contains("Input/output error"), "{err}");
    drop(workers);
    let _ = db.close();
    let image = disk.crash(0);
    (image, history.states[acked].clone())
}

/// Where the durable part of each file of the image ends.
pub fn durable_limits(image: &SimDisk) -> Vec<(PathBuf, u64)> {
    let pepoch_path = Path::new(LOG_DIRS[0]).join(files::PEPOCH_FILE);
    let pepoch = files::decode_pepoch(&image.contents(&pepoch_path).expect("pepoch")).expect("pepoch decodes");
    let mut out = Vec::new();
    for path in image.file_paths() {
        let bytes = image.contents(&path).unwrap_or_default();
        let name = Path::new(path.file_name().unwrap_or_default());
        let len = bytes.len() as u64;
        let limit = if name == Path::new(files::PEPOCH_FILE)
            || name == Path::new(files::CATALOG_FILE)
            || name == Path::new(checkpoint_format::MANIFEST_FILE)
        {
            len
        } else if let Some(id) = name.to_str().and_then(checkpoint_format::data_file_checkpoint_id) {
            // The installed checkpoint's files were synced before its manifest; others are debris.
            if installed_checkpoint(image) == Some(id) { len } else { 0 }
        } else if files::is_log_file(name) {
            let header = files::decode_log_header(&bytes).expect("log header").0;
            let position = pepoch.positions.iter().find(|p| p.logger == header.logger).expect("position");
            match header.file_seq.cmp(&position.file_seq) {
                std::cmp::Ordering::Less => len,
                std::cmp::Ordering::Equal => position.durable_len_bytes,
                std::cmp::Ordering::Greater => 0,
            }
        } else {
            0 // e.g. pepoch.tmp: never read
        };
        out.push((path, limit));
    }
    out
}

/// The id of the checkpoint the image's manifest installs, if any.
pub fn installed_checkpoint(image: &SimDisk) -> Option<u64> {
    let bytes = image.contents(&Path::new(LOG_DIRS[0]).join(checkpoint_format::MANIFEST_FILE))?;
    checkpoint_format::decode_manifest(&bytes).ok().map(|m| m.checkpoint_id)
}

/// Block start offsets of a log file (after its header), as far as they decode.
pub fn block_starts(bytes: &[u8]) -> Vec<usize> {
    let Ok((_, mut at)) = files::decode_log_header(bytes) else { return vec![0] };
    let mut starts = vec![0, at];
    while let Ok((_, size)) = frame::decode_block(&bytes[at..]) {
        at += size;
        starts.push(at);
    }
    starts
}

/// The byte offsets swept in a file: the last blocks before the durable limit and everything
/// after it ("tail"), and a window in the middle.
pub fn windows(path: &Path, bytes: &[u8], limit: u64) -> (Range<usize>, Range<usize>) {
    let len = bytes.len();
    let name = Path::new(path.file_name().unwrap_or_default());
    if !files::is_log_file(name) {
        return (0..len, 0..0);
    }
    let starts = block_starts(bytes);
    let before_limit: Vec<usize> = starts.iter().copied().filter(|&s| s < limit as usize).collect();
    let tail_start = before_limit.iter().rev().nth(2).copied().unwrap_or(0);
    let middle = len / 2;
    (tail_start..len, middle.saturating_sub(32)..(middle + 32).min(tail_start))
}

/// One damaged image and the bytes [start, end) it touched.
pub struct Damage {
    pub what: String,
    pub start: usize,
    pub bytes: Vec<u8>,
    /// For a truncation, where the file was cut.
    pub cut: Option<usize>,
}

pub fn damages(path: &Path, bytes: &[u8], limit: u64) -> Vec<Damage> {
    let (tail, middle) = windows(path, bytes, limit);
    let mut out = Vec::new();
    for cut in tail.clone() {
        out.push(Damage {
            what: format!("truncated to {cut}"),
            start: cut,
            bytes: bytes[..cut].to_vec(),
            cut: Some(cut),
        });
    }
    for at in tail.chain(middle) {
        let mut b = bytes.to_vec();
        b[at] ^= 1 << (at % 8);
        out.push(Damage { what: format!("bit {} flipped at {at}", at % 8), start: at, bytes: b, cut: None });
    }
    let sector = SECTOR_SIZE_BYTES as usize;
    for s in (0..bytes.len()).step_by(sector) {
        let end = (s + sector).min(bytes.len());
        let mut zeroed = bytes.to_vec();
        zeroed[s..end].fill(0);
        out.push(Damage { what: format!("sector at {s} zeroed"), start: s, bytes: zeroed, cut: None });
        if end + sector <= bytes.len() {
            // A misdirected write: the sector's data also landed on the next sector.
            let mut dup = bytes.to_vec();
            dup.copy_within(s..end, end);
            out.push(Damage {
                what: format!("sector at {s} duplicated onto {end}"),
                start: end,
                bytes: dup,
                cut: None,
            });
        }
    }
    out
}

/// Whether `damage` cuts a wholly durable log file at a block boundary, where every block before
/// the cut is intact (only the end block, or the durable length in `pepoch`, can tell).
pub fn is_rotated_block_cut(path: &Path, original: &[u8], limit: u64, damage: &Damage) -> bool {
    let name = Path::new(path.file_name().unwrap_or_default());
    files::is_log_file(name)
        && limit == original.len() as u64
        && damage.cut.is_some_and(|cut| cut < original.len() && block_starts(original).contains(&cut))
}

/// Sweeps every damage of every file of a damaged base image: only the block-boundary cuts of
/// wholly durable log files when `block_cuts`, everything else otherwise.
pub fn damage_sweep(history: &History, block_cuts: bool) -> (Tally, u64) {
    let (image, expected) = damaged_base(history);
    let clean = open(history.setup, &image.fork()).expect("the undamaged image recovers");
    assert_eq!(dump(&clean).expect("dump"), expected);
    let _ = clean.close();
    let limits = durable_limits(&image);
    assert!(
        limits.iter().any(|(p, limit)| files::is_log_file(Path::new(p.file_name().unwrap_or_default()))
            && image.contents(p).is_some_and(|b| b.len() as u64 > *limit && *limit > 0)),
        "the base image needs a durable file with a tail: {limits:?}"
    );
    damage_files(history, &image, &limits, &expected, block_cuts, 1)
}

/// Damages each of `limits`' files of `image` in every way of [`damages`] (only the block-boundary
/// cuts of wholly durable log files when `block_cuts`, everything else otherwise), recovers each
/// damaged image and checks it: damage from a file's durable limit on must give `expected`,
/// damage before it a `Corrupt` error naming the file. Tries every `stride`-th damage of a file.
/// Returns the tally and the images tried.
pub fn damage_files(
    history: &History,
    image: &SimDisk,
    limits: &[(PathBuf, u64)],
    expected: &Dump,
    block_cuts: bool,
    stride: usize,
) -> (Tally, u64) {
    let mut tally = Tally::default();
    let mut offsets = 0u64;
    for (path, limit) in limits {
        let original = image.contents(path).unwrap_or_default();
        for damage in damages(path, &original, *limit).into_iter().step_by(stride) {
            if is_rotated_block_cut(path, &original, *limit, &damage) != block_cuts {
                continue;
            }
            offsets += 1;
            let case = format!("{} {}: {}", history.name, path.display(), damage.what);
            let changed = damage.bytes != original;
            let must_fail = changed && (damage.start as u64) < *limit;
            let disk = image.fork();
            assert!(disk.replace_contents(path, &damage.bytes));
            check_damaged(history.setup, &disk, path, must_fail, expected, &mut tally, &case);
        }
    }
    (tally, offsets)
}

pub fn check_damaged(
    setup: Setup,
    disk: &SimDisk,
    path: &Path,
    must_fail: bool,
    expected: &Dump,
    tally: &mut Tally,
    case: &str,
) {
    tally.cases += 1;
    match open(setup, disk) {
        Err(DbError::Durability(DurabilityError::Corrupt { file, offset, reason })) => {
            tally.clear_errors += 1;
            if !must_fail {
                tally.violation(format!("{case}: damage outside the durable part failed recovery: {reason}"));
            } else if file != path {
                tally
                    .violation(format!("{case}: the error names {} at {offset}, not the damaged file", file.display()));
            }
        }
        Err(e) => {
            tally.other_errors += 1;
            tally.violation(format!("{case}: recovery failed without naming file and offset: {e}"));
        }
        Ok(db) => {
            match dump(&db) {
                Ok(state) if state == *expected => {
                    if must_fail {
                        tally.undetected_damage += 1;
                        tally.violation(format!("{case}: damage in the durable part went undetected"));
                    }
                }
                Ok(state) => {
                    tally.silent_divergences += 1;
                    tally.violation(format!("{case}: SILENT DIVERGENCE: {state:?}, expected {expected:?}"));
                }
                Err(e) => {
                    tally.silent_divergences += 1;
                    tally.violation(format!("{case}: {e}"));
                }
            }
            let _ = db.close();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. I/O errors

pub const FAULT_KINDS: [Option<OpKind>; 8] = [
    Some(OpKind::Append),
    Some(OpKind::SyncData),
    Some(OpKind::SyncDir),
    Some(OpKind::Rename),
    Some(OpKind::Open),
    Some(OpKind::Exists),
    Some(OpKind::CreateDir),
    None,
];

pub fn io_error_sweep(history: &History) -> Tally {
    let knobs = knobs();
    let steps = history.steps.len() - 1;
    let probe = SimDisk::new();
    let db = open(history.setup, &probe).expect("open");
    let run = run_history(&db, &probe, history, 0..steps, false);
    assert_eq!(run.acked, steps, "{:?}", run.first_error);
    db.close().expect("close");
    let mut tally = Tally::default();
    for kind in FAULT_KINDS {
        let total = kind.map_or(probe.ops(), |k| probe.ops_of(k));
        // Setups sampled in CI (`ci_crash_stride` > 1) sample their fault points as sparsely.
        let sampled = if knobs.full { 1 } else { history.setup.ci_crash_stride };
        let stride = sampled * if kind.is_none() { knobs.fault_stride * 4 } else { knobs.fault_stride };
        for nth in (1..=total).step_by(stride) {
            for (error, sticky) in [(FaultError::Eio, false), (FaultError::Enospc, true)] {
                let fault = Fault { kind, nth, error, sticky };
                fault_case(history, fault, steps, &mut tally);
            }
        }
    }
    tally
}

pub fn fault_case(history: &History, fault: Fault, steps: usize, tally: &mut Tally) {
    tally.fault_points += 1;
    let case = format!("{} {fault:?}", history.name);
    let disk = SimDisk::new();
    disk.inject(fault);
    let run = match open(history.setup, &disk) {
        Ok(db) => {
            let run = run_history(&db, &disk, history, 0..steps, true);
            let _ = db.close();
            run
        }
        Err(e) => {
            let mut run = Run { fault_seen_at: Some(0), ..Run::default() };
            run.error(e, disk.faults_fired() > 0);
            run
        }
    };
    if disk.faults_fired() == 0 {
        return;
    }
    tally.faults_fired += 1;
    if !run.acked_after_fault.is_empty() {
        tally.acked_after_fault += run.acked_after_fault.len() as u64;
        tally.violation(format!("{case}: steps {:?} acknowledged after the fault", run.acked_after_fault));
    }
    let errno_text = ["Input/output error", "No space left on device"];
    if let Some(message) = run.errors_after_fault.first()
        && !(errno_text.iter().any(|t| message.contains(t)) && message.contains("/db"))
    {
        tally.unclear_messages += 1;
        tally.violation(format!("{case}: the error does not say what failed where: {message}"));
    }
    if run.fault_seen_at.is_some() && run.errors_after_fault.is_empty() && run.issued > run.fault_seen_at.unwrap_or(0) {
        tally.violation(format!("{case}: steps issued after the fault saw no error"));
    }
    let image = disk.crash(fault.nth);
    check_recovery(history, &image, &run, fault.nth, tally, &case);
}
