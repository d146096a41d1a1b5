//! PACMAN replay: `clr`, every `clr-p` variant and `llr-p` recover exactly the state before the
//! crash, on TPC-C, Smallbank and generated procedures (including ones where every transaction
//! conflicts with every other).

mod pacman_gen;

use lazarus::bench::{self, RunOptions, Workload};
use lazarus::durability::LogScheme;
use lazarus::durability::command::CommandReplay;
use lazarus::durability::command::parallel::ReplayBreakdown;
use lazarus::durability::value::files::EntryFormat;
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::storage::Row;
use lazarus::storage::{Direction, KeyRange, ParamValue, Value};
use lazarus::workload::{self, WorkloadOptions};
use lazarus::{Database, DatabaseConfig};
use pacman_gen::Gen;
use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const CLR_P_VARIANTS: [CommandReplay; 3] = [CommandReplay::ClrPStatic, CommandReplay::ClrPIntra, CommandReplay::ClrP];

/// Log batches of this many transactions, so that even a short run has many (pipelining is
/// exercised).
const BATCH_TXNS: usize = 64;

fn options(dir: &Path, replay: CommandReplay, as_data: bool, threads: usize) -> ValueOptions {
    let mut o = ValueOptions::new(vec![dir.join("log0"), dir.join("log1")]);
    o.rotate_epochs = 5;
    o.checkpoint.interval_ms = 0;
    o.entry_format = EntryFormat::Command;
    o.command.replay = replay;
    o.command.log_calls_as_data = as_data;
    o.recovery_threads = threads;
    o.command.batch_txns = BATCH_TXNS;
    o
}

fn open(opts: ValueOptions) -> (Database, Arc<ValueLogging>) {
    let scheme = Arc::new(ValueLogging::new(opts).unwrap());
    let config = DatabaseConfig {
        epoch_interval_ms: 5,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..Default::default()
    };
    (Database::open(config).unwrap(), scheme)
}

type Dump = Vec<(String, Vec<Vec<Value>>, Vec<usize>)>;

/// Every table's rows in key order and each secondary index's size.
fn dump(db: &Database) -> Dump {
    let catalog = db.catalog();
    let mut out = Vec::new();
    for t in catalog.tables() {
        let mut rows = Vec::new();
        t.primary.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |_, r| {
            if !r.word().is_absent() {
                rows.push(r.row_unchecked().to_vec());
            }
            true
        });
        let sizes = t.secondary.iter().map(|i| i.len()).collect();
        out.push((t.schema.name.clone(), rows, sizes));
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Recovers a copy of the logs in `dir` with `replay` on `threads` threads; returns the state
/// and the replay's breakdown.
fn recover_copy(dir: &Path, replay: CommandReplay, threads: usize) -> (Dump, ReplayBreakdown) {
    let copy = tempfile::tempdir().unwrap();
    copy_dir(dir, copy.path());
    let (db, scheme) = open(options(copy.path(), replay, false, threads));
    let report = scheme.recovery.lock().clone().unwrap();
    let state = dump(&db);
    db.close().unwrap();
    (state, report.command_breakdown.unwrap())
}

/// Every engine that can replay the log (`llr-p` only for a log of write sets) on each of
/// `threads` must give `before`.
fn check_engines(dir: &Path, before: &Dump, as_data: bool, threads: &[usize], what: &str) -> Vec<Run> {
    let mut runs = Vec::new();
    let (clr, _) = recover_copy(dir, CommandReplay::Clr, 1);
    assert!(clr == *before, "{what}: clr differs from the state before the crash");
    let mut engines: Vec<CommandReplay> = CLR_P_VARIANTS.to_vec();
    if as_data {
        engines.push(CommandReplay::LlrP);
    }
    for engine in engines {
        for &n in threads {
            let (state, breakdown) = recover_copy(dir, engine, n);
            assert!(state == *before, "{what}: {engine} on {n} thread(s) differs from the state before");
            assert!(breakdown.pieces > 0, "{what}: {engine} ran nothing");
            runs.push((engine, n, breakdown));
        }
    }
    runs
}

/// An engine, its threads and its breakdown.
type Run = (CommandReplay, usize, ReplayBreakdown);

/// Thread counts for the TPC-C runs: replaying TPC-C's load dominates each recovery, so CI checks two
/// threads (the machine's cores) and `PACMAN_FULL=1` adds one and three.
fn tpcc_threads() -> Vec<usize> {
    if std::env::var_os("PACMAN_FULL").is_some() { vec![1, 2, 3] } else { vec![2] }
}

fn small(name: &str) -> Arc<dyn Workload> {
    let options = WorkloadOptions {
        warehouses: Some(2),
        accounts: Some(200),
        value_size_bytes: Some(40),
        ..WorkloadOptions::default()
    };
    workload::build(name, &options).unwrap()
}

/// Waits until everything committed so far is durable.
fn settle(db: &Database) {
    let name = format!("marker{}", db.catalog().tables().len());
    db.load_module(&format!("{name}.proc"), &format!("table {name} (k int not null, primary key (k));")).unwrap();
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id(&name).unwrap();
    txn.insert(t, Row::new(vec![Value::Int(1)])).unwrap();
    let c = txn.commit().unwrap();
    w.wait_durable(&c.durability).unwrap();
}

/// Returns the calls committed by the run, per kind, and every recovery's breakdown.
fn run_workload(name: &str, as_data: bool, threads: &[usize]) -> (Vec<(String, u64)>, Vec<Run>) {
    let dir = tempfile::tempdir().unwrap();
    let workload = small(name);
    let (db, _) = open(options(dir.path(), CommandReplay::Clr, as_data, 2));
    for (file, source) in workload.sources() {
        db.load_module(&file, &source).unwrap();
    }
    workload.load(&db, 2).unwrap();
    let run = RunOptions { threads: 2, duration: Duration::from_millis(400), progress: false, ..Default::default() };
    let result = bench::run(&db, &workload, &run).unwrap();
    assert!(result.total.committed > 0, "{name}: nothing committed");
    settle(&db);
    let before = dump(&db);
    db.close().unwrap();
    drop(db);
    let per_kind = result.per_kind.iter().map(|(kind, counts)| (kind.clone(), counts.committed)).collect();
    (per_kind, check_engines(dir.path(), &before, as_data, threads, name))
}

/// TPC-C's slices have key spaces (the warehouse id), so clr-p splits its piece-sets over both
/// threads; a call becomes several pieces that feed each other; batches are pipelined.
#[test]
fn every_engine_recovers_tpcc() {
    let (per_kind, runs) = run_workload("tpcc", false, &tpcc_threads());
    // Read-only calls (order-status, stock-level, a delivery that found nothing) are not logged,
    // so count the calls that always write: every one of them was replayed.
    let writers: u64 =
        per_kind.iter().filter(|(kind, _)| kind == "new-order" || kind == "payment").map(|(_, n)| n).sum();
    assert!(writers > 0, "no new-order or payment committed: {per_kind:?}");
    let (_, _, b) = runs.iter().find(|(e, n, _)| *e == CommandReplay::ClrP && *n == 2).unwrap();
    assert!(b.pieces > 2 * writers, "{} pieces for {writers} writing calls", b.pieces);
    assert!(
        b.batches * BATCH_TXNS >= writers as usize && b.batches >= 2,
        "{} batches of at most {BATCH_TXNS} for {writers} writing calls",
        b.batches
    );
    assert!(b.threads_per_block.contains(&2), "no block got both threads: {:?}", b.threads_per_block);
    assert_eq!(b.model.len(), 4);
}

#[test]
fn every_engine_recovers_smallbank() {
    run_workload("smallbank", false, &[1, 2, 3]);
}

#[test]
fn every_engine_and_llr_p_recover_smallbank_logged_as_write_sets() {
    run_workload("smallbank", true, &[1, 2, 3]);
}

/// TPC-C logged as write sets: `PACMAN_FULL=1 cargo test --test pacman_replay -- --ignored`.
#[test]
#[ignore]
fn every_engine_and_llr_p_recover_tpcc_logged_as_write_sets() {
    run_workload("tpcc", true, &tpcc_threads());
}

/// Runs the generated procedures `source` with random arguments on two threads under command
/// logging (or write-set logging), then checks every engine against the state before.
fn run_generated(source: &str, seed: u64, hot: bool, as_data: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path(), CommandReplay::Clr, as_data, 2));
    db.load_module("gen.proc", source).unwrap();
    let procedures: Vec<String> = db.procedures().all().iter().map(|p| p.name().to_string()).collect();
    let handles: Vec<_> = (0..2u64)
        .map(|thread| {
            let (db, procedures) = (db.clone(), procedures.clone());
            std::thread::spawn(move || {
                let mut rng = seed ^ (thread + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let mut next = move |n: u64| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng % n
                };
                let mut w = db.worker();
                for _ in 0..60 {
                    let p = &procedures[next(procedures.len() as u64) as usize];
                    // Hot: every call on the same two keys, so every transaction conflicts.
                    let range = if hot { 2 } else { 6 };
                    let args = [ParamValue::Scalar(Value::Int(next(range) as i64)), {
                        ParamValue::Scalar(Value::Int(next(range) as i64))
                    }];
                    // Aborts, duplicate keys and run-time errors are not logged; only commits count.
                    let _ = w.call_retrying(p, &args, 1000);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    settle(&db);
    let before = dump(&db);
    db.close().unwrap();
    drop(db);
    let what = format!("generated (seed {seed}, hot {hot}):\n{source}");
    check_engines(dir.path(), &before, as_data, &[1, 2, 3], &what);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn every_engine_recovers_generated_procedures(
        bytes in prop::collection::vec(any::<u8>(), 8..160),
        seed in 1u64..,
        hot in any::<bool>(),
        as_data in any::<bool>(),
    ) {
        run_generated(&Gen::procedures(bytes), seed, hot, as_data);
    }
}

/// A procedure whose pieces meet everything the piece runner must survive: an abort guarded by a
/// read of another slice, a loop bounded by such a read, a return in the middle, and a write
/// keyed by a value read in an ancestor slice; all calls on one key.
#[test]
fn pieces_survive_aborts_loops_and_returns_fed_by_other_slices() {
    let source = "table t0 (k int not null, v int, primary key (k));
        table t1 (k int not null, v int, primary key (k));
        table t2 (k int not null, v int, primary key (k));
        procedure p(a int, b int) {
            select v into x from t0 where k = a;
            if not found { insert into t0 values (a, b); return; }
            update t0 set v = v + 1 where k = a;
            select v into y from t1 where k = b;
            if y > 1000000 { abort 'never'; }
            for i in 0 .. y % 3 { update t2 set v = v + i where k = a; }
            if not found { insert into t1 values (b, x); }
            update t1 set v = v + x where k = b;
            select v into z from t2 where k = x % 3;
            if not found { insert into t2 values (x % 3, 1); }
        }";
    for seed in 1..4 {
        run_generated(source, seed, true, false);
    }
}

/// Scheme `command` with checkpoints (module docs of `durability::command`, "Checkpoints"):
/// checkpoints taken while transactions run are made consistent by the write sets logged in their
/// window, the log is truncated, and every engine replays the commands after the checkpoint to
/// exactly the state before.
#[test]
fn command_checkpoints_truncate_the_log_and_every_engine_recovers_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let workload = small("smallbank");
    let mut opts = options(dir.path(), CommandReplay::Clr, false, 2);
    opts.checkpoint.interval_ms = 30;
    opts.checkpoint.block_size_bytes = 4096;
    opts.checkpoint.files_per_dir = 2;
    opts.rotate_epochs = 2;
    let (db, scheme) = open(opts);
    for (file, source) in workload.sources() {
        db.load_module(&file, &source).unwrap();
    }
    workload.load(&db, 2).unwrap();
    let run = RunOptions { threads: 2, duration: Duration::from_millis(600), progress: false, ..Default::default() };
    let result = bench::run(&db, &workload, &run).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let target = scheme.checkpoints().installed() + 1;
    while scheme.checkpoints().installed() < target {
        assert!(std::time::Instant::now() < deadline, "no checkpoint: {:?}", scheme.checkpoints().last_error());
        std::thread::sleep(Duration::from_millis(5));
    }
    // Calls after the checkpoint, logged as calls once its window closed.
    let after = bench::run(&db, &workload, &RunOptions { duration: Duration::from_millis(200), ..run }).unwrap();
    settle(&db);
    let before = dump(&db);
    db.close().unwrap();
    drop(db);
    let committed = result.total.committed + after.total.committed;
    for (engine, threads) in [(CommandReplay::Clr, 1), (CommandReplay::ClrP, 2), (CommandReplay::ClrPStatic, 2)] {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), copy.path());
        eprintln!("recovering with {engine} on {threads} thread(s)");
        let (db, scheme) = open(options(copy.path(), engine, false, threads));
        let report = scheme.recovery.lock().clone().unwrap();
        assert!(report.checkpoint.as_ref().is_some_and(|c| c.records > 0), "{engine}: no checkpoint loaded");
        assert!(report.entries < committed, "{engine}: replayed {} of {committed} entries", report.entries);
        assert!(dump(&db) == before, "{engine}: the state recovered on the checkpoint differs from the state before");
        db.close().unwrap();
    }
}

/// A procedure PACMAN's static analysis cannot slice (more operations than
/// `pacman::limits::OPS_PER_PROCEDURE_MAX`) is the analysis's `fallback`: command logging logs its
/// calls as write sets, which `clr-p` replays as data pieces inside ordinary log batches. Logged as
/// calls instead, each would be a batch of its own, run whole and serially (and the 100 of them
/// would cut the log into ~200 batches).
#[test]
fn calls_of_a_procedure_the_analysis_cannot_slice_are_logged_as_write_sets() {
    let ops = lazarus::pacman::limits::OPS_PER_PROCEDURE_MAX + 1;
    let big_body = "update t set v = v + x where k = 1;\n".repeat(ops);
    let source = format!(
        "table t (k int not null, v int, primary key (k));
         procedure big(x int) {{ {big_body} }}
         procedure small(k0 int, x int) {{
             update t set v = v + x where k = k0;
             if not found {{ insert into t values (k0, x); }}
         }}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path(), CommandReplay::Clr, false, 2));
    db.load_module("fallback.proc", &source).unwrap();
    let (calls_big, calls_small) = (100, 200);
    let mut w = db.worker();
    for i in 0..calls_small {
        w.call("small", &[ParamValue::Scalar(Value::Int(i % 10)), ParamValue::Scalar(Value::Int(i))]).unwrap();
        if i % 2 == 0 {
            w.call("big", &[ParamValue::Scalar(Value::Int(i))]).unwrap();
        }
    }
    drop(w);
    settle(&db);
    let before = dump(&db);
    db.close().unwrap();
    drop(db);
    let runs = check_engines(dir.path(), &before, false, &[1, 2], "fallback");
    // Every transaction (the calls, the marker table's insert) fits in the ordinary batches.
    let txns = (calls_big + calls_small + 1) as usize;
    let batches_max = txns.div_ceil(BATCH_TXNS);
    for (engine, threads, breakdown) in runs {
        assert!(
            breakdown.batches <= batches_max,
            "{engine} on {threads}: {} batches for {txns} transactions: the fallback calls were logged as calls",
            breakdown.batches,
        );
    }
}
