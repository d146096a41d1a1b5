//! Checkpoints under the stream schemes (`docs/taurus.md`, "Checkpoints"): SiloR's checkpoint
//! taken while transactions run truncates the logs (whole segments removed), recovery loads it
//! and replays the retained segments to the model's state, and a predecessor in a removed
//! segment counts as recovered.

use lazarus::durability::taurus::format::{self, Flavor};
use lazarus::durability::taurus::{StreamLogging, StreamOptions};
use lazarus::durability::{DurabilityTicket, LogScheme};
use lazarus::storage::{Row, Value};
use lazarus::{Database, DatabaseConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROCEDURES: &str = "table t (k int not null, v int not null, primary key (k));
procedure init(k int, v int) { insert into t values (k, v); }
procedure copy(src int, dst int) {
    select v into x from t where k = src;
    if not found { abort 'no source'; }
    update t set v = x + 1 where k = dst;
}
procedure bump(a int) { update t set v = v * 2 + 1 where k = a; }
procedure drop_key(a int) { delete from t where k = a; }";

const KEYS: i64 = 12;

/// Two log directories; Taurus with two loggers (one per directory), serial with one. A day
/// between checkpoints: the tests request each one.
fn options(dir: &Path, flavor: Flavor) -> StreamOptions {
    let mut o = StreamOptions::new(flavor, vec![dir.join("a"), dir.join("b")]);
    o.recovery_threads = 2;
    o.flush_interval_ms = 2;
    o.checkpoint.interval_ms = 86_400_000;
    o.checkpoint.files_per_dir = 2;
    o.checkpoint.block_size_bytes = 4096;
    o.checkpoint.sync_every_bytes = 8192;
    o
}

fn open(o: StreamOptions) -> (Database, Arc<StreamLogging>) {
    let scheme = Arc::new(StreamLogging::new(o).unwrap());
    let config = DatabaseConfig {
        epoch_interval_ms: 5,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..Default::default()
    };
    (Database::open(config).unwrap(), scheme)
}

/// Requests a checkpoint and waits until it is installed.
fn checkpoint(scheme: &StreamLogging) {
    let before = scheme.checkpoints().installed();
    scheme.checkpoints().request_checkpoint();
    let deadline = Instant::now() + Duration::from_secs(30);
    while scheme.checkpoints().installed() == before {
        assert!(Instant::now() < deadline, "no checkpoint installed: {:?}", scheme.checkpoints().last_error());
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn rows(db: &Database) -> BTreeMap<i64, i64> {
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id("t").unwrap();
    let mut out = BTreeMap::new();
    for k in 0..KEYS {
        if let Some(row) = txn.get(t, &[Value::Int(k)]).unwrap() {
            out.insert(k, row[1].as_int().unwrap());
        }
    }
    out
}

/// Every stream log segment under `dir`: (path, bytes).
fn segments(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for sub in ["a", "b"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let entry = entry.unwrap();
            if format::parse_segment_name(Path::new(&entry.file_name())).is_some() {
                out.push((entry.path(), entry.metadata().unwrap().len()));
            }
        }
    }
    out.sort();
    out
}

/// The model of the procedures, and a deterministic stream of calls on it.
struct Model {
    rows: BTreeMap<i64, i64>,
    seed: u64,
}

impl Model {
    fn next(&mut self) -> u64 {
        self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.seed >> 33
    }

    /// Runs one call on `worker` and applies it to the model.
    fn step(&mut self, worker: &mut lazarus::db::Worker) -> DurabilityTicket {
        let (a, b, kind) = ((self.next() % KEYS as u64) as i64, (self.next() % KEYS as u64) as i64, self.next() % 8);
        let int = |v: i64| Value::Int(v).into();
        let present = |k: i64| self.rows.get(&k).copied();
        let out = match (present(a), present(b)) {
            (None, _) => {
                self.rows.insert(a, a);
                worker.call("init", &[int(a), int(a)])
            }
            // Deletes, and values kept far from overflow by the doubling of `bump`.
            (Some(v), _) if kind == 0 || v > 1 << 40 => {
                self.rows.remove(&a);
                worker.call("drop_key", &[int(a)])
            }
            (Some(v), _) if a == b => {
                self.rows.insert(a, v * 2 + 1);
                worker.call("bump", &[int(a)])
            }
            (Some(v), Some(_)) => {
                self.rows.insert(b, v + 1);
                worker.call("copy", &[int(a), int(b)])
            }
            (Some(_), None) => {
                self.rows.insert(b, b);
                worker.call("init", &[int(b), int(b)])
            }
        };
        out.unwrap().committed.durability
    }
}

/// Runs calls under `flavor` with two checkpoints taken while they run (and the first log
/// generation written without any), closes, and checks: the segments the checkpoints covered
/// were removed, fewer bytes remain than were logged, recovery loads the checkpoint, drops
/// nothing and equals the model; and once more after a reopen.
fn checkpoints_truncate_and_recover(flavor: Flavor) {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path();
    let mut model = Model { rows: BTreeMap::new(), seed: 7 };
    // Generation 0: no checkpoint yet.
    let (db, scheme) = open(options(dir, flavor));
    db.load_module("p.proc", PROCEDURES).unwrap();
    let mut workers: Vec<_> = (0..2).map(|_| db.worker()).collect();
    for i in 0..200 {
        let ticket = model.step(&mut workers[i % 2]);
        if i % 50 == 0 {
            scheme.wait_durable(&ticket).unwrap();
        }
    }
    drop(workers);
    db.close().unwrap();
    let before = segments(dir);
    let bytes_before: u64 = before.iter().map(|s| s.1).sum();
    assert!(!before.is_empty());
    // Generation 1: calls, a checkpoint, calls, a checkpoint, calls.
    let (db, scheme) = open(options(dir, flavor));
    assert_eq!(rows(&db), model.rows, "{}: recovery without a checkpoint", flavor.name());
    let mut workers: Vec<_> = (0..2).map(|_| db.worker()).collect();
    for round in 0..3 {
        for i in 0..150 {
            model.step(&mut workers[i % 2]);
        }
        if round < 2 {
            // Ad-hoc writes run on another thread (on keys the model does not read) while the
            // checkpoint is taken.
            let done = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let mut busy = db.worker();
                    let mut n = 0i64;
                    while !done.load(std::sync::atomic::Ordering::SeqCst) {
                        let mut txn = busy.begin();
                        let t = txn.table_id("t").unwrap();
                        txn.put(t, Row::new(vec![Value::Int(KEYS + n % 4), Value::Int(n)])).unwrap();
                        txn.commit().unwrap();
                        n += 1;
                        std::thread::sleep(Duration::from_micros(200));
                    }
                });
                checkpoint(&scheme);
                done.store(true, std::sync::atomic::Ordering::SeqCst);
            });
        }
    }
    let last = scheme.checkpoints().last().expect("a checkpoint");
    assert!(last.log_files_removed > 0, "{}: {last:?}", flavor.name());
    drop(workers);
    db.close().unwrap();
    // After the close: its last flush counts too.
    let written = scheme.log_bytes_written();
    let after = segments(dir);
    let bytes_after: u64 = after.iter().map(|s| s.1).sum();
    // Every file of generation 0 and the first segment of generation 1 are gone.
    for (path, _) in &before {
        assert!(!path.exists(), "{}: {} was not removed", flavor.name(), path.display());
    }
    for logger in 0..if flavor.is_taurus() { 2 } else { 1 } {
        let first = dir.join(["a", "b"][logger]).join(format::log_name(flavor, logger, 1));
        assert!(!first.exists(), "{}: {} was not removed", flavor.name(), first.display());
    }
    assert!(
        bytes_after < bytes_before + written,
        "{}: {bytes_after} bytes remain of {bytes_before} + {written}",
        flavor.name()
    );
    for _ in 0..2 {
        let (db, scheme) = open(options(dir, flavor));
        let report = scheme.recovery.lock().clone().unwrap();
        let loaded = report.checkpoint.as_ref().expect("the checkpoint was loaded");
        assert_eq!(loaded.checkpoint_id, last.checkpoint_id, "{}", flavor.name());
        assert!(loaded.records > 0);
        assert_eq!(report.dropped, 0, "{}: {report:?}", flavor.name());
        assert!(report.recovered > 0, "{}: {report:?}", flavor.name());
        assert_eq!(rows(&db), model.rows, "{}", flavor.name());
        db.close().unwrap();
    }
}

#[test]
fn taurus_data_checkpoints_truncate_the_logs_and_recovery_equals_the_model() {
    checkpoints_truncate_and_recover(Flavor::TaurusData);
}

#[test]
fn taurus_cmd_checkpoints_truncate_the_logs_and_recovery_equals_the_model() {
    checkpoints_truncate_and_recover(Flavor::TaurusCmd);
}

#[test]
fn serial_checkpoints_truncate_the_logs_and_recovery_equals_the_model() {
    checkpoints_truncate_and_recover(Flavor::SerialData);
    checkpoints_truncate_and_recover(Flavor::SerialCmd);
}

/// T1 writes a key on logger 0; a checkpoint removes T1's segment; T2 (logger 1) reads the key
/// (RAW on T1) and writes another. T2 must be recovered although T1 is in no log.
#[test]
fn a_predecessor_in_a_removed_segment_does_not_make_its_successors_unrecoverable() {
    for flavor in [Flavor::TaurusData, Flavor::TaurusCmd] {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path();
        let (db, scheme) = open(options(dir, flavor));
        db.load_module("p.proc", PROCEDURES).unwrap();
        let (mut w0, mut w1) = (db.worker(), db.worker());
        let int = |v: i64| Value::Int(v).into();
        let t1 = w0.call("init", &[int(1), int(10)]).unwrap();
        scheme.wait_durable(&t1.committed.durability).unwrap();
        checkpoint(&scheme);
        let first = dir.join("a").join(format::log_name(flavor, 0, 0));
        assert!(!first.exists(), "{}: T1's segment was not removed", flavor.name());
        // Ad-hoc under taurus-data (after-images), a call under taurus-cmd.
        let t2 = if flavor == Flavor::TaurusData {
            let mut txn = w1.begin();
            let t = txn.table_id("t").unwrap();
            let x = txn.get(t, &[Value::Int(1)]).unwrap().unwrap()[1].as_int().unwrap();
            txn.put(t, Row::new(vec![Value::Int(2), Value::Int(x + 1)])).unwrap();
            txn.commit().unwrap()
        } else {
            w1.call("init", &[int(2), int(0)]).unwrap();
            w1.call("copy", &[int(1), int(2)]).unwrap().committed
        };
        scheme.wait_durable(&t2.durability).unwrap();
        drop((w0, w1));
        db.close().unwrap();
        let (db, scheme) = open(options(dir, flavor));
        let report = scheme.recovery.lock().clone().unwrap();
        assert_eq!(report.dropped, 0, "{}: {report:?}", flavor.name());
        let expected: BTreeMap<i64, i64> = [(1, 10), (2, 11)].into_iter().collect();
        assert_eq!(rows(&db), expected, "{}", flavor.name());
        db.close().unwrap();
    }
}

/// One generated ad-hoc transaction: reads, then puts and deletes, on distinct keys.
#[derive(Clone, Debug)]
struct GenTxn {
    worker: usize,
    reads: Vec<i64>,
    puts: Vec<i64>,
    deletes: Vec<i64>,
}

fn gen_txn(keys: i64) -> impl Strategy<Value = GenTxn> {
    (0..2usize, proptest::collection::vec((0..keys, 0..4u8), 1..5)).prop_map(move |(worker, ops)| {
        let mut seen = std::collections::BTreeSet::new();
        let (mut reads, mut puts, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
        for (k, op) in ops {
            if !seen.insert(k) {
                continue;
            }
            match op {
                0 | 1 => reads.push(k),
                2 => puts.push(k),
                _ => deletes.push(k),
            }
        }
        if puts.is_empty() {
            puts.push(keys);
        }
        GenTxn { worker, reads, puts, deletes }
    })
}

/// The last segment of `logger` in generation 0 and its base.
fn last_segment(dir: &Path, logger: usize) -> (PathBuf, u64) {
    let sub = dir.join(["a", "b"][logger]);
    std::fs::read_dir(&sub)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name();
            let (_, l, g, base) = format::parse_segment_name(Path::new(&name))?;
            (l == logger && g == 0).then(|| (sub.join(&name), base))
        })
        .max_by_key(|s| s.1)
        .unwrap()
}

/// `taurus-data`: a generated history with a checkpoint at step `checkpoint_at`, both logs cut at
/// a fraction of what was written after the durable length the persistent vector file recorded
/// when the checkpoint was installed (a crash after it cannot lose less), recovers to serial
/// replay of the committable transactions (as in `tests/durability_taurus.rs`).
fn check_history_with_checkpoint(
    history: &[GenTxn],
    checkpoint_at: usize,
    cuts: &[f64; 2],
) -> Result<(), TestCaseError> {
    let base = tempfile::tempdir().unwrap();
    let logged = base.path().join("logged");
    let (db, scheme) = open(options(&logged, Flavor::TaurusData));
    db.load_module("p.proc", PROCEDURES).unwrap();
    let mut workers: Vec<_> = (0..2).map(|_| db.worker()).collect();
    let mut state: BTreeMap<i64, (i64, Option<usize>)> = BTreeMap::new();
    let mut logged_txns: Vec<(usize, u64, Vec<usize>)> = Vec::new();
    let mut delete_head: Option<usize> = None;
    let mut durable_at_checkpoint = None;
    for (i, g) in history.iter().enumerate() {
        if i == checkpoint_at {
            checkpoint(&scheme);
            let pv_path = logged.join("a").join(format::persistent_vector_name(Flavor::TaurusData));
            let (_, pv) = format::decode_persistent_vector_file(&std::fs::read(&pv_path).unwrap()).unwrap();
            durable_at_checkpoint = Some(pv);
        }
        let mut txn = workers[g.worker].begin();
        let t = txn.table_id("t").unwrap();
        let mut preds: Vec<usize> = delete_head.into_iter().collect();
        for &k in &g.reads {
            let row = txn.get(t, &[Value::Int(k)]).unwrap();
            prop_assert_eq!(row.map(|r| r[1].as_int().unwrap()), state.get(&k).map(|s| s.0));
            preds.extend(state.get(&k).and_then(|s| s.1));
        }
        let mut deleted = false;
        for &k in &g.deletes {
            if let Some(&(_, writer)) = state.get(&k) {
                preds.extend(writer);
                deleted |= txn.delete(t, &[Value::Int(k)]).unwrap();
            }
        }
        for &k in &g.puts {
            txn.put(t, Row::new(vec![Value::Int(k), Value::Int(i as i64)])).unwrap();
        }
        let committed = txn.commit().unwrap();
        let DurabilityTicket::Vector(pv) = &committed.durability else { panic!("not a Taurus ticket") };
        logged_txns.push((g.worker, pv[g.worker], preds));
        for &k in &g.deletes {
            state.remove(&k);
        }
        for &k in &g.puts {
            state.insert(k, (i as i64, Some(i)));
        }
        if deleted {
            delete_head = Some(i);
        }
    }
    if checkpoint_at >= history.len() {
        checkpoint(&scheme);
        let pv_path = logged.join("a").join(format::persistent_vector_name(Flavor::TaurusData));
        durable_at_checkpoint =
            Some(format::decode_persistent_vector_file(&std::fs::read(&pv_path).unwrap()).unwrap().1);
    }
    drop(workers);
    db.close().unwrap();
    let durable = durable_at_checkpoint.expect("a checkpoint").durable_len_bytes;
    // A crash image: each log cut between its durable length at the checkpoint and its end, the
    // persistent vector set back to the checkpoint's.
    let dir = base.path().join("cut");
    for sub in ["a", "b"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for entry in std::fs::read_dir(logged.join(sub)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(sub).join(entry.file_name())).unwrap();
        }
    }
    let mut valid = [0u64; 2];
    for (logger, cut) in cuts.iter().enumerate() {
        let (path, seg_base) = last_segment(&dir, logger);
        let end = seg_base + std::fs::metadata(&path).unwrap().len();
        prop_assert!(durable[logger] >= seg_base, "the checkpoint's segment is durable");
        valid[logger] = durable[logger] + ((end - durable[logger]) as f64 * cut) as u64;
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(valid[logger] - seg_base).unwrap();
    }
    let pv_path = dir.join("a").join(format::persistent_vector_name(Flavor::TaurusData));
    let (flavor, mut pv) = format::decode_persistent_vector_file(&std::fs::read(&pv_path).unwrap()).unwrap();
    pv.durable_len_bytes = durable.clone();
    pv.sequence = 0;
    std::fs::write(&pv_path, format::encode_persistent_vector_file(flavor, &pv)).unwrap();
    let mut committable = vec![false; history.len()];
    let mut expected: BTreeMap<i64, i64> = BTreeMap::new();
    for (i, (logger, end, preds)) in logged_txns.iter().enumerate() {
        committable[i] = *end <= valid[*logger] && preds.iter().all(|&p| committable[p]);
        if committable[i] {
            for &k in &history[i].deletes {
                expected.remove(&k);
            }
            for &k in &history[i].puts {
                expected.insert(k, i as i64);
            }
        }
    }
    let (db, scheme) = open(options(&dir, Flavor::TaurusData));
    let report = scheme.recovery.lock().clone().unwrap();
    prop_assert!(report.checkpoint.is_some());
    prop_assert_eq!(rows(&db), expected);
    db.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn taurus_recovery_over_a_checkpoint_at_a_random_point_equals_serial_replay_of_the_committable_set(
        history in proptest::collection::vec(gen_txn(8), 1..30),
        checkpoint_at in 0..32usize,
        cuts in [0.0..=1.0f64, 0.0..=1.0f64],
    ) {
        check_history_with_checkpoint(&history, checkpoint_at, &cuts)?;
    }
}
