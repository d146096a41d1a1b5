//! SiloR checkpoints under the value scheme: recovery from checkpoint + log equals the state
//! before, for every workload; old checkpoints and logs are removed; damage to an installed
//! checkpoint is named; a checkpoint that cannot be written leaves the previous one usable.

use lazarus::bench::{self, RunOptions, Workload};
use lazarus::durability::LogScheme;
use lazarus::durability::checkpoint::format;
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::durability::{DurabilityError, checkpoint};
use lazarus::io::hook::OpenHook;
use lazarus::io::real::RealFs;
use lazarus::io::{FileSystem, OpenMode};
use lazarus::storage::Row;
use lazarus::storage::{Direction, KeyRange, Value};
use lazarus::workload::{self, WorkloadOptions};
use lazarus::{Database, DatabaseConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn options(dirs: Vec<PathBuf>, interval_ms: u64) -> ValueOptions {
    let mut o = ValueOptions::new(dirs);
    o.rotate_epochs = 4;
    o.checkpoint.interval_ms = interval_ms;
    o.checkpoint.block_size_bytes = 4096; // many blocks, so round-robin spreads them over files
    o.checkpoint.sync_every_bytes = 64 << 10;
    o.checkpoint.files_per_dir = 2;
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

/// Every table's rows in key order, and every secondary index's entry keys.
type Dump = Vec<(String, Vec<Vec<Value>>, Vec<Vec<Vec<u8>>>)>;

fn dump(db: &Database) -> Dump {
    let catalog = db.catalog();
    let mut out = Vec::new();
    for t in catalog.tables() {
        let mut rows = Vec::new();
        t.primary.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |_, r| {
            rows.push(r.row_unchecked().to_vec());
            true
        });
        let mut indexes = Vec::new();
        for index in &t.secondary {
            let mut keys = Vec::new();
            index.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, _| {
                keys.push(k.to_vec());
                true
            });
            indexes.push(keys);
        }
        out.push((t.schema.name.clone(), rows, indexes));
    }
    out
}

fn wait_for_checkpoints(scheme: &ValueLogging, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while scheme.checkpoints().installed() < count {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s: {:?}", scheme.checkpoints().last_error());
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn small(name: &str) -> Arc<dyn Workload> {
    let options = WorkloadOptions {
        warehouses: Some(1),
        accounts: Some(2_000),
        records: Some(5_000),
        value_size_bytes: Some(40),
        ..WorkloadOptions::default()
    };
    workload::build(name, &options).unwrap()
}

/// Loads and runs `name` while checkpoints are taken, closes, recovers, and compares.
fn run_and_recover(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().join("log0"), dir.path().join("log1")];
    let workload = small(name);
    let (db, scheme) = open(options(dirs.clone(), 40)).unwrap();
    for (file, source) in workload.sources() {
        db.load_module(&file, &source).unwrap();
    }
    workload.load(&db, 2).unwrap();
    let run = RunOptions { threads: 2, duration: Duration::from_millis(700), progress: false, ..Default::default() };
    let result = bench::run(&db, &workload, &run).unwrap();
    assert!(result.total.committed > 0, "{name}: nothing committed");
    // Two more: the second starts after the run ended, so it holds every row (records of an
    // epoch ≥ e_l are left to the log, and during the run that can be all of them).
    wait_for_checkpoints(&scheme, scheme.checkpoints().installed() + 2);
    let last = scheme.checkpoints().last().unwrap();
    let before = dump(&db);
    db.close().unwrap();
    drop(db);

    let (db, scheme) = open(options(dirs, 0)).unwrap();
    let report = scheme.recovery.lock().clone().unwrap();
    let loaded = report.checkpoint.clone().unwrap_or_else(|| panic!("{name}: no checkpoint loaded: {report:?}"));
    assert!(loaded.checkpoint_id >= last.checkpoint_id && loaded.records > 0, "{name}: {loaded:?}");
    // The checkpoint replaced the log: far fewer entries were replayed than were committed.
    let committed = result.total.committed;
    assert!(report.entries < committed / 2, "{name}: replayed {} of {committed} entries", report.entries);
    assert!(dump(&db) == before, "{name}: recovered state differs from the state before");
    workload.check(&db).unwrap();
    db.close().unwrap();
}

#[test]
fn checkpoint_and_log_recover_transfer() {
    run_and_recover("transfer");
}

#[test]
fn checkpoint_and_log_recover_tpcc() {
    run_and_recover("tpcc");
}

#[test]
fn checkpoint_and_log_recover_smallbank() {
    run_and_recover("smallbank");
}

#[test]
fn checkpoint_and_log_recover_ycsb() {
    run_and_recover("ycsb");
}

#[test]
fn checkpoint_and_log_recover_kv() {
    run_and_recover("kv");
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A database with a table of `rows` rows, checkpointed at least twice, then closed.
fn checkpointed_database(dirs: &[PathBuf], rows: i64) -> Dump {
    let (db, scheme) = open(options(dirs.to_vec(), 20)).unwrap();
    db.load_module("t.proc", "table t (k int not null, v text, primary key (k));\nindex t_by_v on t (v);").unwrap();
    let mut w = db.worker();
    for chunk in 0..rows / 100 {
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        for k in chunk * 100..(chunk + 1) * 100 {
            txn.insert(t, Row::new(vec![Value::Int(k), Value::text(&format!("value {k:06}"))])).unwrap();
        }
        let committed = txn.commit().unwrap();
        w.wait_durable(&committed.durability).unwrap();
    }
    wait_for_checkpoints(&scheme, 2);
    let before = dump(&db);
    db.close().unwrap();
    before
}

#[test]
fn old_checkpoints_and_logs_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().join("log0")];
    let (db, scheme) = open(options(dirs.clone(), 10)).unwrap();
    db.load_module("t.proc", "table t (k int not null, v int not null, primary key (k));").unwrap();
    let mut w = db.worker();
    let started = Instant::now();
    let mut i = 0i64;
    // Long enough for many rotations and checkpoints.
    while started.elapsed() < Duration::from_millis(1500) || scheme.checkpoints().installed() < 3 {
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        txn.put(t, Row::new(vec![Value::Int(i % 500), Value::Int(i)])).unwrap();
        txn.commit().unwrap();
        i += 1;
        assert!(started.elapsed() < Duration::from_secs(60), "too slow");
    }
    let listing = names(&dirs[0]);
    let ids: std::collections::BTreeSet<u64> =
        listing.iter().filter_map(|n| format::data_file_checkpoint_id(n)).collect();
    // At most the installed checkpoint and one being written.
    assert!(ids.len() <= 2, "old checkpoint files remain: {listing:?}");
    let removed: usize = scheme.checkpoints().last().map_or(0, |c| c.log_files_removed);
    let old_logs = listing.iter().filter(|n| n.starts_with("old_data.")).count();
    assert!(old_logs < 40, "logs are not truncated ({old_logs} rotated files; last removal {removed}): {listing:?}");
    db.close().unwrap();
    drop(db);
    let (db, scheme) = open(options(dirs, 0)).unwrap();
    assert!(scheme.recovery.lock().as_ref().unwrap().checkpoint.is_some());
    assert_eq!(db.catalog().table_by_name("t").unwrap().len(), 500);
    db.close().unwrap();
}

fn recover_err(dirs: &[PathBuf]) -> DurabilityError {
    match open(options(dirs.to_vec(), 0)) {
        Ok(_) => panic!("recovery succeeded over a damaged checkpoint"),
        Err(lazarus::db::DbError::Durability(e)) => e,
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// The data files of the installed checkpoint (a later one may have been under way at close).
fn checkpoint_files(dir: &Path) -> Vec<PathBuf> {
    let manifest = checkpoint::loader::read_manifest(&RealFs, dir).unwrap().expect("an installed checkpoint");
    let installed = |n: &String| format::data_file_checkpoint_id(n) == Some(manifest.checkpoint_id);
    names(dir).into_iter().filter(installed).map(|n| dir.join(n)).collect()
}

#[test]
fn damage_to_an_installed_checkpoint_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().join("log0")];
    checkpointed_database(&dirs, 3_000);
    let files = checkpoint_files(&dirs[0]);
    assert!(!files.is_empty());
    let victim = files.iter().max_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap().clone();
    let original = std::fs::read(&victim).unwrap();
    // A flipped byte in the middle of a block.
    let mut flipped = original.clone();
    let at = original.len() / 2;
    flipped[at] ^= 0x40;
    std::fs::write(&victim, &flipped).unwrap();
    match recover_err(&dirs) {
        DurabilityError::Corrupt { file, .. } => assert_eq!(file, victim),
        e => panic!("expected a corruption error naming {}, got {e}", victim.display()),
    }
    // A truncated file.
    std::fs::write(&victim, &original[..original.len() - 10]).unwrap();
    match recover_err(&dirs) {
        DurabilityError::Corrupt { file, reason, .. } => {
            assert_eq!(file, victim);
            assert!(reason.contains("manifest says"), "{reason}");
        }
        e => panic!("expected a corruption error naming {}, got {e}", victim.display()),
    }
    // A missing file.
    std::fs::remove_file(&victim).unwrap();
    match recover_err(&dirs) {
        DurabilityError::Corrupt { file, .. } => assert_eq!(file, victim),
        e => panic!("expected a corruption error naming {}, got {e}", victim.display()),
    }
    // Restored, it recovers again.
    std::fs::write(&victim, &original).unwrap();
    let (db, _) = open(options(dirs, 0)).unwrap();
    assert_eq!(db.catalog().table_by_name("t").unwrap().len(), 3_000);
    db.close().unwrap();
}

#[test]
fn files_of_an_unfinished_checkpoint_are_removed_by_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().join("log0")];
    let before = checkpointed_database(&dirs, 1_000);
    let debris = dirs[0].join(format::data_file_name(999, 0, 0));
    std::fs::write(&debris, b"half a checkpoint").unwrap();
    let (db, _) = open(options(dirs, 0)).unwrap();
    assert!(!debris.exists(), "debris of an uninstalled checkpoint was left behind");
    assert!(dump(&db) == before);
    db.close().unwrap();
}

#[test]
fn a_checkpoint_that_cannot_be_written_leaves_the_previous_one_and_the_log_usable() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().join("log0")];
    // The real file system, except that creating a checkpoint data file fails with ENOSPC while
    // `full` is set.
    let full = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&full);
    let fs = OpenHook::new(Arc::new(RealFs), move |path: &Path, mode| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let data_file = format::data_file_checkpoint_id(name).is_some();
        if flag.load(Ordering::SeqCst) && mode == OpenMode::CreateNew && data_file {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        Ok(())
    });
    let mut opts = options(dirs.clone(), 10);
    opts.fs = Arc::new(fs) as Arc<dyn FileSystem>;
    let (db, scheme) = open(opts).unwrap();
    db.load_module("t.proc", "table t (k int not null, v int not null, primary key (k));").unwrap();
    let mut w = db.worker();
    let mut put = |k: i64, v: i64| {
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        txn.put(t, Row::new(vec![Value::Int(k), Value::Int(v)])).unwrap();
        let c = txn.commit().unwrap();
        w.wait_durable(&c.durability).unwrap();
    };
    for k in 0..200 {
        put(k, 1);
    }
    wait_for_checkpoints(&scheme, 1);
    let installed = scheme.checkpoints().installed();
    full.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(30);
    while scheme.checkpoints().last_error().is_none() {
        assert!(Instant::now() < deadline, "no checkpoint attempt failed");
        std::thread::sleep(Duration::from_millis(5));
    }
    let error = scheme.checkpoints().last_error().unwrap();
    assert!(error.contains("abandoned"), "{error}");
    // Commits are still acknowledged; the previous checkpoint stays installed.
    for k in 0..200 {
        put(k, 2);
    }
    assert!(scheme.checkpoints().installed() <= installed + 1);
    db.close().unwrap();
    drop(db);
    let (db, scheme) = open(options(dirs, 0)).unwrap();
    assert!(scheme.recovery.lock().as_ref().unwrap().checkpoint.is_some());
    let t = db.catalog().table_by_name("t").unwrap().clone();
    assert_eq!(t.len(), 200);
    t.primary.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |_, r| {
        assert_eq!(r.row_unchecked().at(1), Value::Int(2));
        true
    });
    db.close().unwrap();
}

/// An idle database leaves its `pepoch` file alone (it used to rewrite and sync it every epoch),
/// yet everything that waits for `pepoch` still gets it: a new commit is acknowledged, a
/// checkpoint taken while nothing is written is installed (it waits for `pepoch ≥ e_h`), and
/// recovery finds everything.
#[test]
fn an_idle_database_does_not_rewrite_its_pepoch_file_and_waits_still_end() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().join("log0")];
    let pepoch_writes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = Arc::clone(&pepoch_writes);
    let fs = OpenHook::new(Arc::new(RealFs), move |path: &Path, _| {
        if path.file_name().and_then(|n| n.to_str()) == Some("pepoch.tmp") {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    let fs: Arc<dyn FileSystem> = Arc::new(fs);
    let mut opts = options(dirs.clone(), 0);
    opts.fs = Arc::clone(&fs);
    let (db, scheme) = open(opts).unwrap();
    db.load_module("t.proc", "table t (k int not null, v int not null, primary key (k));").unwrap();
    let mut w = db.worker();
    let mut put = |k: i64| {
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        txn.put(t, Row::new(vec![Value::Int(k), Value::Int(k)])).unwrap();
        let c = txn.commit().unwrap();
        w.wait_durable(&c.durability).unwrap();
    };
    for k in 0..50 {
        put(k);
    }
    // Let the epoch of the last write settle, then stay idle for 60 epochs of 5 ms.
    std::thread::sleep(Duration::from_millis(50));
    let before = pepoch_writes.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    let idle_writes = pepoch_writes.load(Ordering::SeqCst) - before;
    assert!(idle_writes <= 2, "{idle_writes} pepoch files written in 60 idle epochs");
    put(50);
    db.close().unwrap();
    drop(db);
    drop(scheme);

    // Checkpoints every 20 ms of a database nobody writes to: each waits for `pepoch ≥ e_h`.
    let mut opts = options(dirs.clone(), 20);
    opts.fs = fs;
    let (db, scheme) = open(opts).unwrap();
    wait_for_checkpoints(&scheme, 2);
    db.close().unwrap();
    drop(db);
    let (db, scheme) = open(options(dirs, 0)).unwrap();
    assert!(scheme.recovery.lock().as_ref().unwrap().checkpoint.is_some());
    assert_eq!(db.catalog().table_by_name("t").unwrap().len(), 51);
    db.close().unwrap();
}
