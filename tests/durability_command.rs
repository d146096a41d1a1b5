//! Scheme `command` (PACMAN's command logging over SiloR's loggers): serial replay (`clr`) of
//! every workload gives the state before, the log is smaller than the value log, commit order is
//! a serial order, and logs of the two schemes are not mistaken for each other.

use lazarus::bench::{self, RunOptions, Workload};
use lazarus::durability::LogScheme;
use lazarus::durability::value::files::EntryFormat;
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::storage::Row;
use lazarus::storage::{Direction, KeyRange, ParamValue, Value};
use lazarus::workload::{self, WorkloadOptions};
use lazarus::{Database, DatabaseConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn options(dir: &Path, format: EntryFormat) -> ValueOptions {
    let mut o = ValueOptions::new(vec![dir.join("log0"), dir.join("log1")]);
    o.rotate_epochs = 5;
    o.checkpoint.interval_ms = 0;
    o.entry_format = format;
    o
}

fn open(opts: ValueOptions) -> Result<(Database, Arc<ValueLogging>), lazarus::db::DbError> {
    let scheme = Arc::new(ValueLogging::new(opts)?);
    let config = DatabaseConfig {
        epoch_interval_ms: 5,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..Default::default()
    };
    Ok((Database::open(config)?, scheme))
}

type Dump = Vec<(String, Vec<Vec<Value>>, Vec<usize>)>;

/// Every table's rows in key order and each secondary index's size.
fn dump(db: &Database) -> Dump {
    let catalog = db.catalog();
    let mut out = Vec::new();
    for t in catalog.tables() {
        let mut rows = Vec::new();
        t.primary.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |_, r| {
            rows.push(r.row_unchecked().to_vec());
            true
        });
        let sizes = t.secondary.iter().map(|i| i.len()).collect();
        out.push((t.schema.name.clone(), rows, sizes));
    }
    out
}

fn small(name: &str) -> Arc<dyn Workload> {
    let options = WorkloadOptions {
        warehouses: Some(1),
        accounts: Some(1_000),
        records: Some(2_000),
        value_size_bytes: Some(40),
        ..WorkloadOptions::default()
    };
    workload::build(name, &options).unwrap()
}

fn log_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for sub in ["log0", "log1"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "data.log" || name.starts_with("old_data.") {
                total += entry.metadata().unwrap().len();
            }
        }
    }
    total
}

/// Loads and runs `name` under `format`, closes, recovers; returns (committed, log bytes).
fn run_and_recover(name: &str, format: EntryFormat) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let workload = small(name);
    let (db, _) = open(options(dir.path(), format)).unwrap();
    for (file, source) in workload.sources() {
        db.load_module(&file, &source).unwrap();
    }
    workload.load(&db, 2).unwrap();
    settle(&db);
    let loaded_bytes = log_bytes(dir.path());
    let run = RunOptions { threads: 2, duration: Duration::from_millis(600), progress: false, ..Default::default() };
    let result = bench::run(&db, &workload, &run).unwrap();
    assert!(result.total.committed > 0, "{name}: nothing committed");
    settle(&db);
    let before = dump(&db);
    let run_bytes = log_bytes(dir.path()) - loaded_bytes;
    db.close().unwrap();
    drop(db);
    let (db, scheme) = open(options(dir.path(), format)).unwrap();
    let report = scheme.recovery.lock().clone().unwrap();
    assert!(report.entries > 0, "{name}: nothing replayed");
    assert!(dump(&db) == before, "{name} under {format:?}: the recovered state differs from the state before");
    workload.check(&db).unwrap();
    // The recovered database logs on, and recovers again.
    bench::run(&db, &workload, &RunOptions { duration: Duration::from_millis(200), ..run }).unwrap();
    settle(&db);
    let again = dump(&db);
    db.close().unwrap();
    drop(db);
    let (db, _) = open(options(dir.path(), format)).unwrap();
    assert!(dump(&db) == again, "{name}: second recovery differs");
    db.close().unwrap();
    (result.total.committed, run_bytes)
}

/// Waits until everything committed so far is on disk: a later transaction's durability implies
/// that of every earlier epoch.
fn settle(db: &Database) {
    db.load_module(
        &format!("marker{}.proc", db.catalog().tables().len()),
        &format!("table marker{} (k int not null, primary key (k));", db.catalog().tables().len()),
    )
    .unwrap();
    let name = format!("marker{}", db.catalog().tables().len() - 1);
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id(&name).unwrap();
    txn.insert(t, Row::new(vec![Value::Int(1)])).unwrap();
    let c = txn.commit().unwrap();
    w.wait_durable(&c.durability).unwrap();
}

#[test]
fn clr_recovers_transfer() {
    run_and_recover("transfer", EntryFormat::Command);
}

#[test]
fn clr_recovers_tpcc() {
    run_and_recover("tpcc", EntryFormat::Command);
}

#[test]
fn clr_recovers_smallbank() {
    run_and_recover("smallbank", EntryFormat::Command);
}

#[test]
fn clr_recovers_ycsb() {
    run_and_recover("ycsb", EntryFormat::Command);
}

#[test]
fn clr_recovers_kv() {
    run_and_recover("kv", EntryFormat::Command);
}

/// Commit order is a serial order even when every transaction conflicts: concurrent updates of
/// one counter that do not commute (`n = (n * 31 + x) mod p`, each thread its own `x`), replayed
/// in (epoch, commit_seq) order, must end at the same value; any other order would (almost
/// surely) not.
#[test]
fn commit_sequence_order_replays_conflicting_transactions_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path(), EntryFormat::Command)).unwrap();
    db.load_module(
        "counter.proc",
        "table counter (id int not null, n int not null, primary key (id));
         procedure mix(id int, x int) {
             select n into n from counter where id = id;
             if not found { insert into counter values (id, x); return x; }
             update counter set n = (n * 31 + x) % 1000003 where id = id;
             return (n * 31 + x) % 1000003;
         }",
    )
    .unwrap();
    let handles: Vec<_> = (0..3)
        .map(|thread| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut w = db.worker();
                for i in 0..300 {
                    let args = [ParamValue::Scalar(Value::Int(1)), ParamValue::Scalar(Value::Int(thread * 1000 + i))];
                    w.call_retrying("mix", &args, 10_000).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let before = dump(&db);
    db.close().unwrap();
    drop(db);
    let (db, _) = open(options(dir.path(), EntryFormat::Command)).unwrap();
    assert!(dump(&db) == before, "replay in commit order gave {:?}, the run ended at {before:?}", dump(&db));
    db.close().unwrap();
}

/// PACMAN Table 1: a command log is much smaller than a value log of the same work.
#[test]
fn the_command_log_of_tpcc_is_smaller_than_its_value_log() {
    let (value_txns, value_bytes) = run_and_recover("tpcc", EntryFormat::Value);
    let (command_txns, command_bytes) = run_and_recover("tpcc", EntryFormat::Command);
    // Bytes written during the run only (the load is ad hoc: after-images in both schemes).
    let per_txn = |bytes: u64, txns: u64| bytes as f64 / txns.max(1) as f64;
    println!("value {value_bytes} bytes for {value_txns} txns, command {command_bytes} bytes for {command_txns} txns");
    assert!(
        per_txn(command_bytes, command_txns) < per_txn(value_bytes, value_txns),
        "command log {command_bytes} B / {command_txns} txns is not smaller than value log {value_bytes} B / {value_txns}"
    );
}

fn log_dirs(dir: &Path) -> Vec<PathBuf> {
    vec![dir.join("log0"), dir.join("log1")]
}

#[test]
fn a_command_log_opened_as_a_value_log_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path(), EntryFormat::Command)).unwrap();
    db.load_module("t.proc", "table t (k int not null, primary key (k));").unwrap();
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id("t").unwrap();
    txn.insert(t, Row::new(vec![Value::Int(1)])).unwrap();
    let c = txn.commit().unwrap();
    w.wait_durable(&c.durability).unwrap();
    db.close().unwrap();
    drop(db);
    let mut value = ValueOptions::new(log_dirs(dir.path()));
    value.checkpoint.interval_ms = 0;
    let err = open(value).err().expect("a value scheme must refuse a command log");
    assert!(err.to_string().contains("command log"), "{err}");
}

/// `lazarus recover` recognizes a command log by its header and replays it.
#[test]
fn lazarus_recover_detects_and_replays_a_command_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_lazarus")).args(args).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "lazarus {args:?} failed:\n{text}");
        text
    };
    let log_arg = log.to_str().unwrap();
    run(&[
        "bench",
        "--workload",
        "kv",
        "--records",
        "500",
        "--duration-s",
        "0.5",
        "--durability",
        "command",
        "--log-dir",
        log_arg,
    ]);
    let text = run(&["recover", "--log-dir", log_arg]);
    assert!(text.contains("log format      Command"), "{text}");
    assert!(text.contains("serial re-execution (clr)"), "{text}");
    assert!(text.contains("(1 tables, 500 rows)"), "{text}");
    // PACMAN's engine on the same log, its phases written for `lazarus report`.
    let result = dir.path().join("clr-p.json");
    let result_arg = result.to_str().unwrap();
    let args = ["recover", "--log-dir", log_arg, "--command-replay", "clr-p", "--threads", "2", "--result-json"];
    let text = run(&[&args[..], &[result_arg]].concat());
    assert!(text.contains("command replay clr-p") && text.contains("(1 tables, 500 rows)"), "{text}");
    assert!(text.contains("clr-p on 2 thread(s): loading"), "{text}");
    let out = dir.path().join("report");
    run(&["report", result_arg, "--out", out.to_str().unwrap()]);
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("Command-log replay time by phase"), "no recovery chart in the report");
}
