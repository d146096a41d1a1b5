//! SiloR value logging: acknowledgement only after pepoch, recovery to the acknowledged state,
//! torn tails, damage in the durable part, and replay order.

use lazarus::durability::value::files::{self, Pepoch};
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::durability::{DurabilityError, LogScheme};
use lazarus::storage::Row;
use lazarus::storage::{Direction, KeyRange, ParamValue, Value};
use lazarus::{Database, DatabaseConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const SOURCE: &str = "
table kv (k int not null, v int not null, tag text, primary key (k));
index kv_by_v on kv (v);
procedure put(k int, v int) {
    select v into old from kv where k = k;
    if found { update kv set v = v, tag = 'updated' where k = k; }
    else { insert into kv values (k, v, 'new'); }
}
procedure remove(k int) { delete from kv where k = k; }
";

fn options(dir: &Path) -> ValueOptions {
    let mut o = ValueOptions::new(vec![dir.join("log0"), dir.join("log1")]);
    o.rotate_epochs = 3; // rotate often, so recovery sees several files
    o
}

fn open(opts: ValueOptions) -> Result<(Database, Arc<ValueLogging>), lazarus::db::DbError> {
    let scheme = Arc::new(ValueLogging::new(opts)?);
    let db = Database::open(DatabaseConfig {
        epoch_interval_ms: 5,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..DatabaseConfig::default()
    })?;
    Ok((db, scheme))
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

/// Every row of `kv`, in key order, plus the secondary index's view.
fn dump(db: &Database) -> (Vec<Vec<Value>>, Vec<i64>) {
    let catalog = db.catalog();
    let t = catalog.table_by_name("kv").expect("table kv");
    let mut rows = Vec::new();
    t.primary.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |_, r| {
        rows.push(r.row_unchecked().to_vec());
        true
    });
    let mut by_v = Vec::new();
    t.secondary[0].scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |_, r| {
        by_v.push(r.row_unchecked().at(1).as_int().unwrap_or(-1));
        true
    });
    (rows, by_v)
}

/// Runs a deterministic history on 2 workers; returns the state after it (all acknowledged).
fn history(db: &Database, n: i64) {
    db.load_module("kv.proc", SOURCE).unwrap();
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut worker = db.worker();
                let mut last = None;
                for i in 0..n {
                    let k = (i * 7 + w) % 50;
                    let out = if i % 5 == 4 {
                        worker.call_retrying("remove", &[int(k)], 1000).unwrap()
                    } else {
                        worker.call_retrying("put", &[int(k), int(i)], 1000).unwrap()
                    };
                    last = Some(out.committed.durability);
                }
                worker.wait_durable(&last.unwrap()).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn recovery_restores_the_acknowledged_state_with_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path())).unwrap();
    history(&db, 400);
    let before = dump(&db);
    assert!(!before.0.is_empty());
    db.close().unwrap();
    drop(db);
    let (db, scheme) = open(options(dir.path())).unwrap();
    let report = scheme.recovery.lock().clone().unwrap();
    assert!(report.files >= 2, "rotation should have produced several files: {report:?}");
    assert_eq!(dump(&db), before);
    // The recovered database keeps working and recovers again.
    let mut w = db.worker();
    w.call("put", &[int(1000), int(1)]).unwrap();
    let after = dump(&db);
    db.close().unwrap();
    drop(db);
    let (db, _) = open(options(dir.path())).unwrap();
    assert_eq!(dump(&db), after);
    db.close().unwrap();
}

#[test]
fn nothing_is_acknowledged_before_pepoch_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, scheme) = open(options(dir.path())).unwrap();
    db.load_module("kv.proc", SOURCE).unwrap();
    let mut w = db.worker();
    for i in 0..50 {
        let out = w.call("put", &[int(i), int(i)]).unwrap();
        let lazarus::durability::DurabilityTicket::Epoch(e) = out.committed.durability else { panic!("epoch ticket") };
        assert_eq!(scheme.is_durable(&out.committed.durability), e <= scheme.pepoch());
        w.wait_durable(&out.committed.durability).unwrap();
        let on_disk = read_pepoch(&dir.path().join("log0"));
        assert!(on_disk.epoch >= e, "acknowledged epoch {e} but the pepoch file says {}", on_disk.epoch);
    }
    db.close().unwrap();
}

fn read_pepoch(dir: &Path) -> Pepoch {
    files::decode_pepoch(&std::fs::read(dir.join(files::PEPOCH_FILE)).unwrap()).unwrap()
}

/// Copies a log directory tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if let Err(e) = std::fs::copy(entry.path(), target) {
            // A marker's temporary file can be renamed away while the tree is copied.
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "copying {}: {e}", entry.path().display());
        }
    }
}

/// The durable log file of logger 0 and its durable length.
fn durable_file(dir: &Path) -> (PathBuf, u64) {
    let pepoch = read_pepoch(&dir.join("log0"));
    let pos = pepoch.positions.iter().find(|p| p.logger == 0).unwrap();
    for entry in std::fs::read_dir(dir.join("log0")).unwrap() {
        let path = entry.unwrap().path();
        if !files::is_log_file(Path::new(path.file_name().unwrap())) {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        if let Ok((h, _)) = files::decode_log_header(&bytes)
            && h.file_seq == pos.file_seq
        {
            return (path, pos.durable_len_bytes);
        }
    }
    panic!("no durable file");
}

#[test]
fn a_torn_tail_after_the_durable_length_is_ignored_at_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path())).unwrap();
    history(&db, 200);
    let expected = dump(&db);
    db.close().unwrap();
    drop(db);
    let (path, durable_len) = durable_file(dir.path());
    // Append a block the pepoch does not cover (as if written after the last pepoch), then cut
    // it at every offset: recovery must give the acknowledged state each time.
    let mut tail = Vec::new();
    lazarus::durability::frame::encode_block(&[0xAB; 100], &mut tail);
    let mut original = std::fs::read(&path).unwrap();
    original.truncate(durable_len as usize);
    for cut in 0..=tail.len() {
        let case = tempfile::tempdir().unwrap();
        copy_tree(dir.path(), case.path());
        let case_file = case.path().join(path.strip_prefix(dir.path()).unwrap());
        let mut bytes = original.clone();
        bytes.extend_from_slice(&tail[..cut]);
        std::fs::write(&case_file, bytes).unwrap();
        let (db, _) = open(options(case.path())).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        assert_eq!(dump(&db), expected, "cut at {cut}");
        db.close().unwrap();
    }
}

#[test]
fn damage_inside_the_durable_part_names_the_file_and_offset() {
    // No rotation: a rotation in the last round would leave a header-only durable file.
    let options = |dir: &Path| ValueOptions { rotate_epochs: 1000, ..options(dir) };
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path())).unwrap();
    history(&db, 200);
    db.close().unwrap();
    drop(db);
    let (path, durable_len) = durable_file(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    assert!(durable_len as usize > 200, "need some durable bytes");
    // Truncation inside the durable part.
    let case = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), case.path());
    let case_file = case.path().join(path.strip_prefix(dir.path()).unwrap());
    std::fs::write(&case_file, &bytes[..durable_len as usize - 1]).unwrap();
    let err = open(options(case.path())).err().expect("a short durable file must be an error");
    assert!(err.to_string().contains(&case_file.display().to_string()), "{err}");
    // A flipped bit inside the durable part.
    let case = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), case.path());
    let mut damaged = bytes.clone();
    let at = durable_len as usize - 10;
    damaged[at] ^= 0x10;
    std::fs::write(case_file_in(case.path(), dir.path(), &path), damaged).unwrap();
    let err = open(options(case.path())).err().expect("a damaged durable block must be an error");
    let text = err.to_string();
    assert!(text.contains("at byte"), "{text}");
    assert!(matches!(err, lazarus::db::DbError::Durability(DurabilityError::Corrupt { .. })), "{err:?}");
}

fn case_file_in(case: &Path, original_root: &Path, original: &Path) -> PathBuf {
    case.join(original.strip_prefix(original_root).unwrap())
}

#[test]
fn replay_order_does_not_change_the_result() {
    // Recovery replays newest file first with several threads; one thread replaying in any
    // order must give the same state (largest TID wins).
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path())).unwrap();
    history(&db, 300);
    // Overwrite the same keys across many epochs, so that several files hold versions of them.
    let mut w = db.worker();
    for round in 0..12 {
        for k in 0..50 {
            w.call_retrying("put", &[int(k), int(1000 * round + k)], 100).unwrap();
        }
        db.epochs().advance();
    }
    let last = w.call("put", &[int(0), int(-1)]).unwrap();
    w.wait_durable(&last.committed.durability).unwrap();
    let expected = dump(&db);
    db.close().unwrap();
    drop(db);
    for threads in [1, 4] {
        let case = tempfile::tempdir().unwrap();
        copy_tree(dir.path(), case.path());
        let mut o = options(case.path());
        o.recovery_threads = threads;
        let (db, scheme) = open(o).unwrap();
        let files = scheme.recovery.lock().as_ref().map_or(0, |r| r.files);
        assert!(files >= 3, "the history should span several files, got {files}");
        assert_eq!(dump(&db), expected, "{threads} recovery threads");
        db.close().unwrap();
    }
}

#[test]
fn tables_created_through_the_rust_api_are_recovered() {
    use lazarus::storage::{Column, ColumnType, TableSchema};
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path())).unwrap();
    let t = db
        .create_table(TableSchema {
            name: "pairs".into(),
            columns: vec![
                Column { name: "a".into(), ty: ColumnType::Int, nullable: false },
                Column { name: "b".into(), ty: ColumnType::Text, nullable: true },
            ],
            primary_key: vec![0],
            indexes: vec![],
        })
        .unwrap();
    let mut w = db.worker();
    let (_, c) = w.run(1, |tx| tx.insert(t, Row::new(vec![Value::Int(1), Value::text("x")]))).unwrap();
    w.wait_durable(&c.durability).unwrap();
    db.close().unwrap();
    drop(db);
    let (db, _) = open(options(dir.path())).unwrap();
    let mut w = db.worker();
    let row = w.run(1, |tx| tx.get(tx.table_id("pairs")?, &[Value::Int(1)])).unwrap().0.unwrap();
    assert_eq!(row.at(1), Value::text("x"));
    db.close().unwrap();
}

#[test]
fn a_damaged_header_of_the_durable_file_is_named() {
    // No rotation: the test needs data.log to still be the durable file when it copies the
    // directory (with 5 ms epochs, a module load's epoch wait could otherwise rotate it first).
    let options = |dir: &Path| ValueOptions { rotate_epochs: 1000, ..options(dir) };
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = open(options(dir.path())).unwrap();
    db.load_module("kv.proc", SOURCE).unwrap();
    let mut w = db.worker();
    let out = w.call("put", &[int(1), int(1)]).unwrap();
    w.wait_durable(&out.committed.durability).unwrap();
    // Crash now: copy the directory while data.log is still the durable file.
    let case = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), case.path());
    db.close().unwrap();
    let (path, _) = durable_file(case.path());
    assert!(path.ends_with("data.log"), "{}", path.display());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[5] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    let err = open(options(case.path())).err().expect("a damaged durable header must be an error");
    assert!(err.to_string().contains("data.log"), "{err}");
    assert!(err.to_string().contains("damaged header"), "{err}");
}

/// A close that cannot make every committed epoch persistent within its limit says so: the
/// commits of those epochs are lost to the next recovery, so `Ok` would be a lie.
#[test]
fn a_close_whose_pepoch_falls_short_of_the_committed_epochs_is_an_error() {
    use lazarus::io::hook::OpenHook;
    use lazarus::io::real::RealFs;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let stalled = Arc::new(AtomicBool::new(false));
    let hold = Arc::clone(&stalled);
    // Holds each write of the pepoch file for 2 s while stalled: the persistent epoch stops.
    let fs = OpenHook::new(Arc::new(RealFs), move |path: &Path, _| {
        if hold.load(Ordering::SeqCst) && path.to_string_lossy().contains("pepoch") {
            std::thread::sleep(Duration::from_millis(2000));
        }
        Ok(())
    });
    let stalling = ValueOptions { fs: Arc::new(fs), shutdown_flush_limit_ms: 200, ..options(dir.path()) };
    let (db, scheme) = open(stalling).unwrap();
    history(&db, 100);
    let acknowledged = dump(&db);
    stalled.store(true, Ordering::SeqCst);
    let out = db.worker().call("put", &[int(5000), int(1)]).unwrap();
    assert!(!scheme.is_durable(&out.committed.durability));
    let err = db.close().expect_err("a close that left a commit non-durable must fail").to_string();
    assert!(err.contains("persistent epoch reached") && err.contains("not durable"), "{err}");
    drop(db);
    // Everything acknowledged is there; the unacknowledged commit may be too (the held pepoch
    // write finishes after the close gave up on it).
    let (db, _) = open(options(dir.path())).unwrap();
    let (mut rows, _) = dump(&db);
    rows.retain(|row| row[0] != Value::Int(5000));
    assert_eq!(rows, acknowledged.0);
    db.close().unwrap();
}
