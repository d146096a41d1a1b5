//! Schemes `serial-data`, `serial-cmd`, `taurus-data`, `taurus-cmd` (Taurus §4–6): recovery
//! gives exactly the committable set (Figure 1, every subset of logged transactions; generated
//! histories against a model, with and without a checkpoint), a torn tail gives the prefix,
//! damage before a synced point is an error, SIGKILL crash tests pass under each scheme, and
//! checkpoints truncate the logs.

mod crash_cli;

use lazarus::durability::taurus::format::{self, Flavor};
use lazarus::durability::taurus::{StreamLogging, StreamOptions};
use lazarus::durability::{DurabilityError, DurabilityTicket, LogScheme};
use lazarus::io::real::RealFs;
use lazarus::storage::Row;
use lazarus::storage::Value;
use lazarus::{Database, DatabaseConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const TABLE: &str = "table t (k int not null, v int not null, primary key (k));";

fn options(dir: &Path, flavor: Flavor, loggers: usize) -> StreamOptions {
    let mut o = StreamOptions::new(flavor, vec![dir.to_path_buf()]);
    o.loggers = loggers;
    o.recovery_threads = 2;
    o
}

fn open(o: StreamOptions) -> Result<(Database, Arc<StreamLogging>), lazarus::db::DbError> {
    let scheme = Arc::new(StreamLogging::new(o)?);
    let config = DatabaseConfig {
        epoch_interval_ms: 5,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..Default::default()
    };
    Ok((Database::open(config)?, scheme))
}

/// Every row of `t` as key → value.
fn rows(db: &Database) -> BTreeMap<i64, i64> {
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id("t").unwrap();
    let mut out = BTreeMap::new();
    for k in 0..64 {
        if let Some(row) = txn.get(t, &[Value::Int(k)]).unwrap() {
            out.insert(k, row.at(1).as_int().unwrap());
        }
    }
    out
}

/// The log file of `logger` in generation 0.
fn log_file(dir: &Path, flavor: Flavor, logger: usize) -> PathBuf {
    dir.join(format::log_name(flavor, logger, 0))
}

fn header_len(path: &Path) -> u64 {
    format::decode_header(&std::fs::read(path).unwrap()).unwrap().1 as u64
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Cuts a log segment to `len` bytes as a crash would that lost its unsynced tail: the durable
/// length the persistent vector file records for its logger is set back to at most `durable` (a
/// cut below a recorded durable length is damage, not a crash).
fn lose_tail(path: &Path, len: u64, durable: u64) {
    let (_, logger, _) = format::parse_log_name(Path::new(path.file_name().unwrap())).unwrap();
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
    let pv_path = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".persistent_vector"))
        .expect("a persistent vector file");
    let (flavor, mut pv) = format::decode_persistent_vector_file(&std::fs::read(&pv_path).unwrap()).unwrap();
    pv.durable_len_bytes[logger] = pv.durable_len_bytes[logger].min(durable);
    pv.sequence = 0;
    std::fs::write(&pv_path, format::encode_persistent_vector_file(flavor, &pv)).unwrap();
}

/// The logger a write transaction logged to: its own address is the only component of its
/// predecessor vector when it has no predecessor that is still uncommitted elsewhere.
fn own_end(ticket: &DurabilityTicket, logger: usize) -> u64 {
    match ticket {
        DurabilityTicket::Vector(pv) => pv[logger],
        DurabilityTicket::Sequence(end) => *end,
        other => panic!("unexpected ticket {other:?}"),
    }
}

/// Runs Figure 1's transactions, each on its own logger (T1..T4 on loggers 0..3; the initial
/// rows on logger 4): T3 reads Y and writes X; T1 writes Y; T2 reads Y (RAW on T1) and writes Z;
/// T4 writes X (WAW on T3).
fn figure_1(dir: &Path, flavor: Flavor, compress: bool) {
    let mut o = options(dir, flavor, 5);
    o.compress_predecessors = compress;
    // Compressed records carry the vector the transaction committed with; keep every
    // transaction uncommitted while the next logs, as in the figure, by flushing only at close.
    o.flush_interval_ms = if compress { 1000 } else { 5 };
    let (db, _) = open(o).unwrap();
    db.load_module("t.proc", TABLE).unwrap();
    let mut workers: Vec<_> = (0..5).map(|_| db.worker()).collect();
    let (x, y, z) = (1i64, 2i64, 3i64);
    let put = |txn: &mut lazarus::txn::Transaction<'_>, k: i64, v: i64| {
        let t = txn.table_id("t").unwrap();
        txn.put(t, Row::new(vec![Value::Int(k), Value::Int(v)])).unwrap();
    };
    let get = |txn: &mut lazarus::txn::Transaction<'_>, k: i64| {
        let t = txn.table_id("t").unwrap();
        txn.get(t, &[Value::Int(k)]).unwrap().unwrap().at(1).as_int().unwrap()
    };
    let mut load = workers[4].begin();
    put(&mut load, x, 0);
    put(&mut load, y, 0);
    load.commit().unwrap();
    let mut t3 = workers[2].begin();
    assert_eq!(get(&mut t3, y), 0);
    put(&mut t3, x, 3);
    t3.commit().unwrap();
    let mut t1 = workers[0].begin();
    put(&mut t1, y, 1);
    let c1 = t1.commit().unwrap();
    let mut t2 = workers[1].begin();
    assert_eq!(get(&mut t2, y), 1);
    put(&mut t2, z, 2);
    let c2 = t2.commit().unwrap();
    if !compress {
        // T2's vector covers T1's record on logger 0 (unless T1 committed first).
        let DurabilityTicket::Vector(pv) = &c2.durability else { panic!("not a vector ticket") };
        assert!(pv[1] > 0 && (pv[0] == 0 || pv[0] == own_end(&c1.durability, 0)));
    }
    let mut t4 = workers[3].begin();
    put(&mut t4, x, 4);
    t4.commit().unwrap();
    drop(workers);
    db.close().unwrap();
}

fn figure_1_every_subset(flavor: Flavor, compress: bool) {
    let base = tempfile::tempdir().unwrap();
    let logged = base.path().join("logged");
    figure_1(&logged, flavor, compress);
    for subset in 0u32..16 {
        let has = |t: usize| subset & (1 << (t - 1)) != 0;
        let dir = base.path().join(format!("subset-{subset}"));
        copy_dir(&logged, &dir);
        for t in 1..=4 {
            if !has(t) {
                let path = log_file(&dir, flavor, t - 1);
                let header = header_len(&path);
                lose_tail(&path, header, header);
            }
        }
        let (db, scheme) = open(options(&dir, flavor, 5)).unwrap();
        let mut expected = BTreeMap::new();
        expected.insert(
            1,
            if has(4) {
                4
            } else if has(3) {
                3
            } else {
                0
            },
        );
        expected.insert(2, if has(1) { 1 } else { 0 });
        if has(1) && has(2) {
            expected.insert(3, 2);
        }
        assert_eq!(
            rows(&db),
            expected,
            "{} compress={compress}: logged T{:?}",
            flavor.name(),
            (1..=4).filter(|&t| has(t)).collect::<Vec<_>>()
        );
        let report = scheme.recovery.lock().clone().unwrap();
        assert_eq!(
            report.dropped,
            u64::from(has(2) && !has(1)),
            "subset {subset}: T2 is dropped exactly when T1 is missing"
        );
        db.close().unwrap();
    }
}

#[test]
fn figure_1_every_subset_of_logged_transactions_recovers_exactly_the_committable_set() {
    figure_1_every_subset(Flavor::TaurusData, false);
    figure_1_every_subset(Flavor::TaurusCmd, false);
}

#[test]
fn figure_1_with_compressed_predecessors_recovers_the_committable_set() {
    figure_1_every_subset(Flavor::TaurusData, true);
}

/// One generated transaction: reads, then puts and deletes, on distinct keys.
#[derive(Clone, Debug)]
struct GenTxn {
    worker: usize,
    reads: Vec<i64>,
    puts: Vec<i64>,
    deletes: Vec<i64>,
    /// Read-modify-writes: logged as column patches.
    updates: Vec<i64>,
}

fn gen_txn(keys: i64) -> impl Strategy<Value = GenTxn> {
    (0..3usize, proptest::collection::vec((0..keys, 0..6u8), 1..5)).prop_map(move |(worker, ops)| {
        let mut seen = std::collections::BTreeSet::new();
        let (mut reads, mut puts, mut deletes, mut updates) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (k, op) in ops {
            if !seen.insert(k) {
                continue;
            }
            match op {
                0 | 1 => reads.push(k),
                2 => puts.push(k),
                3 => deletes.push(k),
                _ => updates.push(k),
            }
        }
        if puts.is_empty() {
            puts.push(keys);
        }
        GenTxn { worker, reads, puts, deletes, updates }
    })
}

/// Copies the three logs of `logged` and cuts each at its fraction of `cuts` of what lies after
/// `floor[logger]` (a crash that lost the unsynced tails; the persistent vector set back to the
/// floor); returns the copy and each log's remaining (logical) length. Without a floor, the header:
/// nothing was durable. With a checkpoint, the durable lengths when it was installed: a crash after
/// it cannot lose less, and the cut falls in the logger's last segment.
fn cut_logs(logged: &Path, base: &Path, cuts: &[f64; 3], floor: Option<&[u64]>) -> (PathBuf, [u64; 3]) {
    let dir = base.join("cut");
    copy_dir(logged, &dir);
    let mut valid = [0u64; 3];
    for (logger, cut) in cuts.iter().enumerate() {
        let (path, segment_base) = last_segment(&dir, logger);
        let end = segment_base + std::fs::metadata(&path).unwrap().len();
        let start = floor.map_or_else(|| header_len(&path), |f| f[logger]);
        assert!(start >= segment_base, "the checkpoint's segment is durable");
        valid[logger] = start + ((end - start) as f64 * cut) as u64;
        lose_tail(&path, valid[logger] - segment_base, start);
    }
    (dir, valid)
}

/// The last segment of `logger` in generation 0, and its base.
fn last_segment(dir: &Path, logger: usize) -> (PathBuf, u64) {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name();
            let (_, l, g, base) = format::parse_segment_name(Path::new(&name))?;
            (l == logger && g == 0).then(|| (dir.join(&name), base))
        })
        .max_by_key(|s| s.1)
        .unwrap()
}

/// Recovers `dir` and compares the rows and the number of transactions recovered.
fn check_recovery(
    dir: &Path,
    flavor: Flavor,
    expected: &BTreeMap<i64, i64>,
    committable: &[bool],
    checkpointed: bool,
) -> Result<(), TestCaseError> {
    // taurus-data: the streaming graph (Algorithms 4-6) recovers a copy of the same logs.
    if flavor == Flavor::TaurusData {
        let copy = dir.with_extension("streamed");
        copy_dir(dir, &copy);
        let mut o = options(&copy, flavor, 3);
        o.streaming_graph = true;
        let (db, scheme) = open(o).unwrap();
        prop_assert_eq!(&rows(&db), expected, "streaming graph");
        let report = scheme.recovery.lock().clone().unwrap();
        let committable = committable.iter().filter(|&&c| c).count() as u64;
        prop_assert!(report.recovered + report.before_checkpoint <= committable);
        if !checkpointed {
            prop_assert_eq!(report.recovered, committable, "streaming graph");
        }
        db.close().unwrap();
    }
    let (db, scheme) = open(options(dir, flavor, 3)).unwrap();
    prop_assert_eq!(&rows(&db), expected);
    let report = scheme.recovery.lock().clone().unwrap();
    if checkpointed {
        // Transactions in removed segments or left to the checkpoint are not replayed.
        prop_assert!(report.checkpoint.is_some());
        prop_assert!(report.recovered + report.before_checkpoint <= committable.iter().filter(|&&c| c).count() as u64);
    } else {
        prop_assert_eq!(report.recovered, committable.iter().filter(|&&c| c).count() as u64);
    }
    db.close().unwrap();
    Ok(())
}

/// Runs `history` on three loggers, cuts each log file at the given fraction of its length, and
/// checks that recovery equals serial replay, in history order, of the committable transactions:
/// those whose record survived the cut and whose RAW predecessors (the last writer of each key
/// read or deleted, and the last deleting transaction before it) are committable.
///
/// With `checkpoint_at`, a checkpoint is taken before that step (or after the last) and the cuts
/// fall after the durable lengths it left (`docs/taurus.md`, "Checkpoints"): segments before it
/// are removed, so predecessors in them count as recovered.
fn check_history(history: &[GenTxn], cuts: &[f64; 3], checkpoint_at: Option<usize>) -> Result<(), TestCaseError> {
    let base = tempfile::tempdir().unwrap();
    let logged = base.path().join("logged");
    let mut o = options(&logged, Flavor::TaurusData, 3);
    if checkpoint_at.is_some() {
        o.checkpoint = checkpoint_options();
    }
    let (db, scheme) = open(o).unwrap();
    db.load_module("t.proc", TABLE).unwrap();
    let mut workers: Vec<_> = (0..3).map(|_| db.worker()).collect();
    // Model: per key, (value, last writing transaction); transactions' (logger, end, preds).
    let mut state: BTreeMap<i64, (i64, Option<usize>)> = BTreeMap::new();
    let mut logged_txns = Vec::new();
    let mut delete_head: Option<usize> = None;
    let mut floor = None;
    for (i, g) in history.iter().chain(std::iter::once(&history[0])).enumerate() {
        if checkpoint_at.is_some_and(|at| at.min(history.len()) == i) {
            checkpoint(&scheme);
            let pv_path = logged.join(format::persistent_vector_name(Flavor::TaurusData));
            floor = Some(format::decode_persistent_vector_file(&std::fs::read(&pv_path).unwrap()).unwrap().1);
        }
        if i == history.len() {
            break;
        }
        let mut txn = workers[g.worker].begin();
        let t = txn.table_id("t").unwrap();
        let mut preds: Vec<usize> = delete_head.into_iter().collect();
        for &k in &g.reads {
            let row = txn.get(t, &[Value::Int(k)]).unwrap();
            prop_assert_eq!(row.map(|r| r.at(1).as_int().unwrap()), state.get(&k).map(|s| s.0));
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
        // An update reads the version it overwrites: its writer is a RAW predecessor.
        let updated: Vec<i64> = g.updates.iter().copied().filter(|k| state.contains_key(k)).collect();
        for &k in &g.updates {
            preds.extend(state.get(&k).and_then(|s| s.1));
            let found = txn.update(t, Row::new(vec![Value::Int(k), Value::Int(i as i64)])).unwrap();
            prop_assert_eq!(found, updated.contains(&k));
        }
        let committed = txn.commit().unwrap();
        let logger = g.worker;
        logged_txns.push((logger, own_end(&committed.durability, logger), preds));
        for &k in &g.deletes {
            state.remove(&k);
        }
        for &k in g.puts.iter().chain(&updated) {
            state.insert(k, (i as i64, Some(i)));
        }
        if deleted {
            delete_head = Some(i);
        }
    }
    drop(workers);
    db.close().unwrap();
    let floor = floor.map(|pv| pv.durable_len_bytes);
    let (dir, valid) = cut_logs(&logged, base.path(), cuts, floor.as_deref());
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
            // An update found its key exactly when the key's last writer, a committable RAW
            // predecessor, left it present.
            for &k in &history[i].updates {
                if let Some(v) = expected.get_mut(&k) {
                    *v = i as i64;
                }
            }
        }
    }
    check_recovery(&dir, Flavor::TaurusData, &expected, &committable, floor.is_some())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn taurus_recovery_of_a_generated_history_equals_serial_replay_of_the_committable_set(
        history in proptest::collection::vec(gen_txn(8), 1..40),
        cuts in [0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64],
    ) {
        check_history(&history, &cuts, None)?;
    }

    #[test]
    fn taurus_recovery_over_a_checkpoint_at_a_random_point_equals_serial_replay_of_the_committable_set(
        history in proptest::collection::vec(gen_txn(8), 1..30),
        checkpoint_at in 0..32usize,
        cuts in [0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64],
    ) {
        check_history(&history, &cuts, Some(checkpoint_at))?;
    }
}

/// Logs 30 ad-hoc puts (transaction `i` sets key `i % 7` to `i`) on one logger of `flavor` in
/// `dir`, waiting for durability after every `durable_every`th, and closes: each transaction's
/// logical end in the log.
fn log_puts(dir: &Path, flavor: Flavor, durable_every: i64) -> Vec<u64> {
    let (db, scheme) = open(options(dir, flavor, 1)).unwrap();
    db.load_module("t.proc", TABLE).unwrap();
    let mut w = db.worker();
    let mut ends = Vec::new();
    for i in 0..30i64 {
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        txn.put(t, Row::new(vec![Value::Int(i % 7), Value::Int(i)])).unwrap();
        let committed = txn.commit().unwrap();
        if i % durable_every == 0 {
            scheme.wait_durable(&committed.durability).unwrap();
        }
        ends.push(own_end(&committed.durability, 0));
    }
    drop(w);
    db.close().unwrap();
    ends
}

/// Serial logging: every cut of the log gives the transactions whose records are whole before
/// it, and damage before a synced point is an error naming the file.
#[test]
fn a_torn_serial_log_gives_its_prefix_and_damage_before_a_sync_is_an_error() {
    for flavor in [Flavor::SerialData, Flavor::SerialCmd] {
        let base = tempfile::tempdir().unwrap();
        let logged = base.path().join("logged");
        // A flush between records every 10.
        let ends = log_puts(&logged, flavor, 10);
        let path = log_file(&logged, flavor, 0);
        let len = std::fs::metadata(&path).unwrap().len();
        let start = header_len(&path);
        for step in 0..=16u64 {
            let cut = start + (len - start) * step / 16;
            let dir = base.path().join(format!("cut-{step}"));
            copy_dir(&logged, &dir);
            lose_tail(&log_file(&dir, flavor, 0), cut, start.min(cut));
            let (db, _) = open(options(&dir, flavor, 1)).unwrap();
            let mut expected = BTreeMap::new();
            for (i, _) in ends.iter().enumerate().filter(|(_, e)| **e <= cut) {
                expected.insert(i as i64 % 7, i as i64);
            }
            assert_eq!(rows(&db), expected, "{}: cut at {cut}", flavor.name());
            db.close().unwrap();
            // Recovery cut the torn tail and a new generation started: reopening changes nothing.
            let (db, _) = open(options(&dir, flavor, 1)).unwrap();
            assert_eq!(rows(&db), expected, "{}: reopened after the cut at {cut}", flavor.name());
            db.close().unwrap();
        }
        // Cut below the durable length the persistent vector file records: acknowledged data is
        // gone.
        let dir = base.path().join("cut-synced");
        copy_dir(&logged, &dir);
        let cut_file = log_file(&dir, flavor, 0);
        std::fs::OpenOptions::new().write(true).open(&cut_file).unwrap().set_len(len - 1).unwrap();
        match open(options(&dir, flavor, 1)) {
            Err(lazarus::db::DbError::Durability(DurabilityError::Corrupt { file, .. })) => assert_eq!(file, cut_file),
            Err(other) => panic!("{}: expected corruption, got {other}", flavor.name()),
            Ok(_) => panic!("{}: a log cut below its durable length was not detected", flavor.name()),
        }
        // A bit flipped in the first transaction's record, below the durable length.
        let dir = base.path().join("flipped");
        copy_dir(&logged, &dir);
        let damaged = log_file(&dir, flavor, 0);
        let mut bytes = std::fs::read(&damaged).unwrap();
        bytes[start as usize + 20] ^= 0x10;
        std::fs::write(&damaged, &bytes).unwrap();
        match open(options(&dir, flavor, 1)) {
            Err(lazarus::db::DbError::Durability(DurabilityError::Corrupt { file, offset, .. })) => {
                assert_eq!((file, offset), (damaged.clone(), start));
            }
            Err(other) => panic!("{}: expected corruption, got {other}", flavor.name()),
            Ok(_) => panic!("{}: damage below the durable length was not detected", flavor.name()),
        }
    }
}

/// A transaction is acknowledged only once the persistent vector dominates its predecessor
/// vector, and a scheme that was shut down acknowledges nothing more.
#[test]
fn taurus_acknowledges_once_its_predecessors_are_persistent() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), Flavor::TaurusCmd, 2);
    o.flush_interval_ms = 1000;
    let (db, scheme) = open(o).unwrap();
    db.load_module("t.proc", TABLE).unwrap();
    let (mut w0, mut w1) = (db.worker(), db.worker());
    let mut t1 = w0.begin();
    let t = t1.table_id("t").unwrap();
    t1.put(t, Row::new(vec![Value::Int(1), Value::Int(1)])).unwrap();
    let c1 = t1.commit().unwrap();
    let mut t2 = w1.begin();
    assert!(t2.get(t, &[Value::Int(1)]).unwrap().is_some());
    t2.put(t, Row::new(vec![Value::Int(2), Value::Int(2)])).unwrap();
    let c2 = t2.commit().unwrap();
    let DurabilityTicket::Vector(pv) = &c2.durability else { panic!("not a vector ticket") };
    assert_eq!(pv[0], own_end(&c1.durability, 0), "T2's vector includes T1's address (RAW)");
    assert!(!scheme.is_durable(&c2.durability), "nothing is flushed yet");
    scheme.wait_durable(&c2.durability).unwrap_or_else(|e| panic!("{e}"));
    assert!(scheme.is_durable(&c1.durability));
    let volume = scheme.volume();
    assert_eq!(volume.records, 2);
    assert!(volume.dependency_bytes > 0 && volume.redo_bytes > volume.dependency_bytes);
    drop((w0, w1));
    db.close().unwrap();
}

fn crash_test(args: &[&str]) -> String {
    crash_cli::assert_clean(args)
}

#[test]
fn sigkill_trials_under_each_stream_scheme_lose_no_acknowledged_transaction() {
    for scheme in ["serial-data", "serial-cmd", "taurus-data", "taurus-cmd"] {
        let text = crash_test(&[
            "--workload",
            "kv",
            "--records",
            "2000",
            "--trials",
            "3",
            "--rounds",
            "2",
            "--seed",
            "900",
            "--durability",
            scheme,
            "--damage",
        ]);
        assert!(text.contains("3 trials"), "{text}");
    }
    // TPC-C deletes (delivery): the delete chain's dependencies across the two loggers.
    crash_test(&["--workload", "tpcc", "--trials", "1", "--seed", "910", "--durability", "taurus-data"]);
    // The child checkpoints every 150 ms: some kills land after one was installed, and the
    // summary counts those recoveries (it read only value logs' reports before).
    let args =
        ["--workload", "kv", "--records", "10000", "--trials", "8", "--seed", "920", "--durability", "taurus-data"];
    let text = crash_test(&args);
    assert!(crash_cli::recoveries_from_a_checkpoint(&text) > 0, "no trial recovered from a checkpoint:\n{text}");
}

const PROCEDURES: &str = "table t (k int not null, v int not null, primary key (k));
procedure init(k int, v int) { insert into t values (k, v); }
procedure copy(src int, dst int) {
    select v into x from t where k = src;
    if not found { abort 'no source'; }
    update t set v = x + 1 where k = dst;
}
procedure bump(a int) { update t set v = v * 2 + 1 where k = a; }
procedure drop_key(a int) { delete from t where k = a; }";

/// `(worker, src, dst, flip)`: `flip(src, dst)` when `flip`, else `copy(src, dst)` when they
/// differ, else `bump(src)`.
type Call = (usize, i64, i64, bool);

/// Procedures that read a key that may be missing and insert or delete it: replay must give a
/// reader the version below its commit timestamp, absent ones included (Taurus §5.2).
const FLIP: &str = "procedure flip(a int, b int) {
    select v into x from t where k = a;
    if not found { insert into t values (a, b); } else { delete from t where k = a; }
}";

/// One call's effect on the model (`Some(v)`: the key holds `v`), and the keys it writes.
fn apply_call(state: &mut [Option<i64>], &(_, src, dst, flip): &Call) -> Result<Vec<usize>, ()> {
    let (s, d) = (src as usize, dst as usize);
    if flip {
        state[s] = if state[s].is_some() { None } else { Some(dst) };
        return Ok(vec![s]);
    }
    if src == dst {
        let Some(v) = state[s] else { return Ok(Vec::new()) };
        state[s] = Some(v * 2 + 1);
        return Ok(vec![s]);
    }
    let Some(x) = state[s] else { return Err(()) }; // copy aborts: 'no source'
    if state[d].is_none() {
        return Ok(Vec::new());
    }
    state[d] = Some(x + 1);
    Ok(vec![d])
}

/// taurus-cmd: parallel re-execution of a generated history of procedure calls, cut at random
/// points of each log, equals the model's serial execution of the committable calls (RAW
/// predecessors: the last writers of the keys a call reads, which are all the keys it touches,
/// and the last delete before it: the delete chain).
fn check_command_history(calls: &[Call], cuts: &[f64; 3]) -> Result<(), TestCaseError> {
    const KEYS: i64 = 6;
    let base = tempfile::tempdir().unwrap();
    let logged = base.path().join("logged");
    let (db, _) = open(options(&logged, Flavor::TaurusCmd, 3)).unwrap();
    db.load_module("p.proc", PROCEDURES).unwrap();
    db.load_module("flip.proc", FLIP).unwrap();
    let mut workers: Vec<_> = (0..3).map(|_| db.worker()).collect();
    let mut state: Vec<Option<i64>> = vec![None; KEYS as usize];
    let mut last_writer: Vec<Option<usize>> = vec![None; KEYS as usize];
    let mut last_delete: Option<usize> = None;
    // (logger, end, predecessors, the call); the initial inserts are calls of their own.
    let mut txns: Vec<(usize, u64, Vec<usize>, Call)> = Vec::new();
    for k in 0..KEYS {
        let worker = k as usize % 3;
        let out = workers[worker].call("init", &[Value::Int(k).into(), Value::Int(k).into()]).unwrap();
        txns.push((worker, own_end(&out.committed.durability, worker), Vec::new(), (worker, k, k, true)));
        state[k as usize] = Some(k);
        last_writer[k as usize] = Some(txns.len() - 1);
    }
    for &(worker, src, dst, flip) in calls {
        let call = (worker, src % KEYS, dst % KEYS, flip);
        let (src, dst) = (call.1, call.2);
        let out = if flip {
            workers[worker].call("flip", &[Value::Int(src).into(), Value::Int(dst).into()])
        } else if src == dst {
            workers[worker].call("bump", &[Value::Int(src).into()])
        } else {
            workers[worker].call("copy", &[Value::Int(src).into(), Value::Int(dst).into()])
        };
        let written = apply_call(&mut state, &call);
        prop_assert_eq!(out.is_ok(), written.is_ok(), "call {:?}: {:?}", call, out.as_ref().err());
        let (Ok(out), Ok(written)) = (out, written) else { continue };
        if written.is_empty() {
            continue; // read-only: nothing logged
        }
        // flip reads only its own key; copy and bump read both.
        let mut preds: Vec<usize> = last_writer[src as usize].into_iter().collect();
        if !flip {
            preds.extend(last_writer[dst as usize]);
        }
        preds.extend(last_delete);
        txns.push((worker, own_end(&out.committed.durability, worker), preds, call));
        let i = txns.len() - 1;
        for &k in &written {
            last_writer[k] = Some(i);
        }
        if written.iter().any(|&k| state[k].is_none()) {
            last_delete = Some(i);
        }
    }
    drop(workers);
    db.close().unwrap();
    let (dir, valid) = cut_logs(&logged, base.path(), cuts, None);
    let mut committable = vec![false; txns.len()];
    let mut model: Vec<Option<i64>> = vec![None; KEYS as usize];
    for (i, (logger, end, preds, call)) in txns.iter().enumerate() {
        committable[i] = *end <= valid[*logger] && preds.iter().all(|&p| committable[p]);
        if committable[i] {
            let _ = apply_call(&mut model, call);
        }
    }
    let expected: BTreeMap<i64, i64> = model.iter().enumerate().filter_map(|(k, v)| v.map(|v| (k as i64, v))).collect();
    check_recovery(&dir, Flavor::TaurusCmd, &expected, &committable, false)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn taurus_cmd_parallel_replay_equals_serial_execution_of_the_committable_calls(
        calls in proptest::collection::vec((0..3usize, 0..6i64, 0..6i64, proptest::bool::weighted(0.25)), 1..40),
        cuts in [0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64],
    ) {
        check_command_history(&calls, &cuts)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints (`docs/taurus.md`, "Checkpoints"): SiloR's checkpoint taken while transactions run
// truncates the logs (whole segments removed), recovery loads it and replays the retained
// segments to the model's state, and a predecessor in a removed segment counts as recovered.

/// Checkpoint options for the tests: small files and blocks, and a day between checkpoints: the
/// tests request each one ([`checkpoint`]).
fn checkpoint_options() -> lazarus::durability::checkpoint::CheckpointOptions {
    let mut o = lazarus::durability::checkpoint::CheckpointOptions::new(2);
    o.interval_ms = 86_400_000;
    o.files_per_dir = 2;
    o.block_size_bytes = 4096;
    o.sync_every_bytes = 8192;
    o
}

/// Two log directories `a` and `b`; Taurus with two loggers (one per directory), serial with one.
fn two_dir_options(dir: &Path, flavor: Flavor) -> StreamOptions {
    let mut o = StreamOptions::new(flavor, vec![dir.join("a"), dir.join("b")]);
    o.recovery_threads = 2;
    o.flush_interval_ms = 2;
    o.checkpoint = checkpoint_options();
    o
}

/// Requests a checkpoint and waits until it is installed.
fn checkpoint(scheme: &StreamLogging) {
    let before = scheme.checkpoints().installed();
    scheme.checkpoints().request_checkpoint();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while scheme.checkpoints().installed() == before {
        assert!(std::time::Instant::now() < deadline, "no checkpoint: {:?}", scheme.checkpoints().last_error());
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Every stream log segment under `dir`'s `a` and `b`: (path, bytes).
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

/// Keys the model's calls use.
const KEYS: i64 = 12;

/// The model of [`PROCEDURES`], and a deterministic stream of calls on it.
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
    // Generation 0: no checkpoint.
    let (db, scheme) = open(two_dir_options(dir, flavor)).unwrap();
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
    let (db, scheme) = open(two_dir_options(dir, flavor)).unwrap();
    assert_eq!(rows(&db), model.rows, "{}: recovery without a checkpoint", flavor.name());
    let adhoc_written: std::sync::Mutex<BTreeMap<i64, i64>> = Default::default();
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id("t").unwrap();
    for key in 100..104 {
        txn.put(t, Row::new(vec![Value::Int(key), Value::Int(-1)])).unwrap();
        adhoc_written.lock().unwrap().insert(key, -1);
    }
    txn.commit().unwrap();
    drop(w);
    let mut workers: Vec<_> = (0..2).map(|_| db.worker()).collect();
    for round in 0..3 {
        for i in 0..150 {
            model.step(&mut workers[i % 2]);
        }
        if round < 2 {
            // Ad-hoc writes run on another thread (on keys `rows` does not read) while the
            // checkpoint is taken: updates, which data flavors log as column patches (a reduced
            // checkpoint, skipping the versions of epochs ≥ e_l, would lose their rows).
            let done = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|scope| {
                let writer = scope.spawn(|| {
                    let mut busy = db.worker();
                    let mut n = 0i64;
                    while !done.load(std::sync::atomic::Ordering::SeqCst) || n < 8 {
                        let (key, value) = (100 + n % 4, (round as i64) << 32 | n);
                        let mut txn = busy.begin();
                        let t = txn.table_id("t").unwrap();
                        assert!(txn.update(t, Row::new(vec![Value::Int(key), Value::Int(value)])).unwrap());
                        txn.commit().unwrap();
                        adhoc_written.lock().unwrap().insert(key, value);
                        n += 1;
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                });
                checkpoint(&scheme);
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                writer.join().unwrap();
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
        let (db, scheme) = open(two_dir_options(dir, flavor)).unwrap();
        let report = scheme.recovery.lock().clone().unwrap();
        let loaded = report.checkpoint.as_ref().expect("the checkpoint was loaded");
        assert_eq!(loaded.checkpoint_id, last.checkpoint_id, "{}", flavor.name());
        assert!(loaded.records > 0);
        assert_eq!(report.dropped, 0, "{}: {report:?}", flavor.name());
        assert!(report.recovered > 0, "{}: {report:?}", flavor.name());
        assert_eq!(rows(&db), model.rows, "{}", flavor.name());
        let mut w = db.worker();
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        for (&key, &value) in adhoc_written.lock().unwrap().iter() {
            let row = txn.get(t, &[Value::Int(key)]).unwrap();
            assert_eq!(row.map(|r| r.at(1).as_int().unwrap()), Some(value), "{}: key {key}", flavor.name());
        }
        drop(txn);
        drop(w);
        db.close().unwrap();
    }
}

/// A checkpoint that can be held between reading `e_l` and starting its walk.
struct PausedWalk {
    armed: Arc<std::sync::atomic::AtomicBool>,
    reached: std::sync::mpsc::Receiver<()>,
    release: std::sync::mpsc::Sender<()>,
}

/// [`two_dir_options`] on the real file system, except that the checkpointer's first data file,
/// once armed by [`PausedWalk::checkpoint_with`], is created only after the test has said so: the
/// checkpoint has read `e_l` and its walk has not begun.
fn paused_walk_options(dir: &Path, flavor: Flavor) -> (StreamOptions, PausedWalk) {
    let (reached_tx, reached) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (arm, reached_tx, release_rx) =
        (Arc::clone(&armed), std::sync::Mutex::new(reached_tx), std::sync::Mutex::new(release_rx));
    let fs = lazarus::io::hook::OpenHook::new(Arc::new(RealFs), move |path: &Path, _| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let data_file = lazarus::durability::checkpoint::format::data_file_checkpoint_id(name).is_some();
        if data_file && arm.swap(false, std::sync::atomic::Ordering::SeqCst) {
            reached_tx.lock().unwrap().send(()).unwrap();
            release_rx.lock().unwrap().recv_timeout(std::time::Duration::from_secs(60)).unwrap();
        }
        Ok(())
    });
    let mut o = two_dir_options(dir, flavor);
    o.fs = Arc::new(fs) as Arc<dyn lazarus::io::FileSystem>;
    (o, PausedWalk { armed, reached, release })
}

impl PausedWalk {
    /// Takes a checkpoint, runs `between` after it has read `e_l` and before its walk, and waits
    /// until it is installed and has removed the segments before it.
    fn checkpoint_with(&self, scheme: &StreamLogging, between: impl FnOnce()) {
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
        let before = scheme.checkpoints().installed();
        scheme.checkpoints().request_checkpoint();
        self.reached.recv_timeout(std::time::Duration::from_secs(60)).expect("the checkpointer opens a data file");
        between();
        self.release.send(()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while scheme.checkpoints().installed() == before {
            assert!(std::time::Instant::now() < deadline, "no checkpoint: {:?}", scheme.checkpoints().last_error());
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(scheme.checkpoints().last().unwrap().log_files_removed > 0, "the inserts' segments are removed");
    }
}

/// Data flavors log an update as the columns it changed, which replay applies to the row the
/// key holds. Rows inserted before a checkpoint and updated after it read `e_l` but before its
/// walk reached them have their full images only in the segments the checkpoint removes: the
/// checkpoint must keep the versions it sees (a reduced one skips versions of epochs >= `e_l`),
/// or recovery has no row to apply the patches to.
fn a_patch_made_between_e_l_and_the_walk_replays_over_the_walks_version(flavor: Flavor) {
    let base = tempfile::tempdir().unwrap();
    let (o, paused) = paused_walk_options(base.path(), flavor);
    let (db, scheme) = open(o.clone()).unwrap();
    db.load_module("t.proc", "table t (k int not null, v int not null, w text not null, primary key (k));").unwrap();
    let mut worker = db.worker();
    let mut write = |keys: std::ops::Range<i64>, v: i64, insert: bool| {
        let mut txn = worker.begin();
        let t = txn.table_id("t").unwrap();
        for k in keys {
            let row = Row::new(vec![Value::Int(k), Value::Int(v), Value::text("a column the updates keep")]);
            if insert { txn.insert(t, row).unwrap() } else { assert!(txn.update(t, row).unwrap()) }
        }
        let committed = txn.commit().unwrap();
        scheme.wait_durable(&committed.durability).unwrap();
    };
    write(0..4, 0, true);
    paused.checkpoint_with(&scheme, || write(0..4, 1, false));
    write(0..2, 2, false);
    drop(worker);
    db.close().unwrap();
    let (db, scheme) = open(o).unwrap();
    let report = scheme.recovery.lock().clone().unwrap();
    assert!(report.checkpoint.is_some(), "{}: {report:?}", flavor.name());
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id("t").unwrap();
    for (k, v) in [(0, 2), (1, 2), (2, 1), (3, 1)] {
        let row = txn.get(t, &[Value::Int(k)]).unwrap().unwrap_or_else(|| panic!("{}: key {k} lost", flavor.name()));
        assert_eq!((row.at(1).as_int(), row.at(2).as_text()), (Some(v), Some("a column the updates keep")));
    }
    drop(txn);
    drop(w);
    db.close().unwrap();
}

/// The same window, and then the key is deleted before the walk reaches it: the walk sees no row
/// (a deleted record is unlinked), so the checkpoint holds none, while the update, of an epoch at
/// or above `e_l`, is retained and replayed before the delete (WAW order; serial: LSN order).
/// Logged as a column patch, it found no row to apply to and recovery stopped with an error ("the
/// key holds no row to apply the write to"): the failure the `taurus-data-checkpoint` power-loss
/// sweep saw in segments' first records (session 10). Key 1 is inserted again after its delete, key 2
/// updated again after the checkpoint, key 3 only updated.
fn a_patch_before_a_delete_the_walk_saw_replays(flavor: Flavor) {
    let base = tempfile::tempdir().unwrap();
    let (o, paused) = paused_walk_options(base.path(), flavor);
    let (db, scheme) = open(o.clone()).unwrap();
    db.load_module("t.proc", "table t (k int not null, v int not null, w text not null, primary key (k));").unwrap();
    let (mut w0, mut w1) = (db.worker(), db.worker());
    let row = |k: i64, v: i64| Row::new(vec![Value::Int(k), Value::Int(v), Value::text("a column the updates keep")]);
    // One transaction per call, alternating workers (two loggers under Taurus).
    let mut step = 0usize;
    let mut run = |op: &dyn Fn(&mut lazarus::txn::Transaction<'_>, lazarus::storage::TableId)| {
        step += 1;
        let worker = if step.is_multiple_of(2) { &mut w0 } else { &mut w1 };
        let mut txn = worker.begin();
        let t = txn.table_id("t").unwrap();
        op(&mut txn, t);
        let committed = txn.commit().unwrap();
        scheme.wait_durable(&committed.durability).unwrap();
    };
    for k in 0..4 {
        run(&|txn, t| txn.insert(t, row(k, 0)).unwrap());
    }
    // After e_l, before the walk: updates (column patches), then deletes of keys 0 and 1.
    paused.checkpoint_with(&scheme, || {
        for k in 0..4 {
            run(&|txn, t| assert!(txn.update(t, row(k, 1)).unwrap()));
        }
        for k in 0..2 {
            run(&|txn, t| assert!(txn.delete(t, &[Value::Int(k)]).unwrap()));
        }
        run(&|txn, t| txn.insert(t, row(1, 5)).unwrap());
    });
    run(&|txn, t| assert!(txn.update(t, row(2, 2)).unwrap()));
    drop((w0, w1));
    db.close().unwrap();
    let expected: BTreeMap<i64, i64> = [(1, 5), (2, 2), (3, 1)].into_iter().collect();
    for attempt in ["recovery", "a second recovery"] {
        let (db, scheme) = open(o.clone()).unwrap_or_else(|e| panic!("{}: {attempt} failed: {e}", flavor.name()));
        let report = scheme.recovery.lock().clone().unwrap();
        assert!(report.checkpoint.is_some(), "{}: {report:?}", flavor.name());
        assert_eq!(report.dropped, 0, "{}: {report:?}", flavor.name());
        assert_eq!(rows(&db), expected, "{}: {attempt}", flavor.name());
        let mut w = db.worker();
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        for k in [1, 2, 3] {
            let row = txn.get(t, &[Value::Int(k)]).unwrap().unwrap();
            assert_eq!(row.at(2).as_text(), Some("a column the updates keep"), "{}: key {k}", flavor.name());
        }
        drop(txn);
        drop(w);
        db.close().unwrap();
    }
}

#[test]
fn a_serial_data_patch_before_a_delete_the_walk_saw_replays() {
    a_patch_before_a_delete_the_walk_saw_replays(Flavor::SerialData);
}

#[test]
fn a_taurus_data_patch_before_a_delete_the_walk_saw_replays() {
    a_patch_before_a_delete_the_walk_saw_replays(Flavor::TaurusData);
}

/// An update of one column of a row of ten 100-byte columns: the REDO bytes it logs under each
/// flavor, and the row after recovery.
fn redo_bytes_of_a_one_column_update(flavor: Flavor, whole_rows: bool) -> u64 {
    let base = tempfile::tempdir().unwrap();
    let mut o = options(base.path(), flavor, if flavor.is_taurus() { 2 } else { 1 });
    o.whole_rows = whole_rows;
    let (db, scheme) = open(o.clone()).unwrap();
    let columns: Vec<String> = (0..10).map(|c| format!("f{c} text not null")).collect();
    db.load_module("w.proc", &format!("table w (k int not null, {}, primary key (k));", columns.join(", "))).unwrap();
    let row = |changed: &str| {
        let mut values = vec![Value::Int(1)];
        let same = "x".repeat(100);
        values.extend((0..10).map(|c| Value::text(if c == 3 { changed } else { same.as_str() })));
        Row::new(values)
    };
    let mut worker = db.worker();
    let mut run = |insert: bool| {
        let mut txn = worker.begin();
        let t = txn.table_id("w").unwrap();
        if insert {
            txn.insert(t, row(&"o".repeat(100))).unwrap()
        } else {
            assert!(txn.update(t, row(&"n".repeat(100))).unwrap())
        }
        let committed = txn.commit().unwrap();
        scheme.wait_durable(&committed.durability).unwrap();
        scheme.volume().redo_bytes
    };
    let inserted = run(true);
    let updated = run(false) - inserted;
    assert!(inserted > 1_000, "{}: an insert logs its whole row ({inserted} bytes)", flavor.name());
    drop(worker);
    db.close().unwrap();
    let (db, _scheme) = open(o).unwrap();
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id("w").unwrap();
    let recovered = txn.get(t, &[Value::Int(1)]).unwrap().expect("the row is recovered");
    assert_eq!(recovered, row(&"n".repeat(100)), "{}", flavor.name());
    drop(txn);
    drop(w);
    db.close().unwrap();
    updated
}

#[test]
fn data_flavors_log_an_update_as_the_columns_it_changed() {
    for flavor in [Flavor::SerialData, Flavor::TaurusData] {
        let bytes = redo_bytes_of_a_one_column_update(flavor, false);
        assert!(bytes < 250, "{}: a one-column update logged {bytes} REDO bytes", flavor.name());
        let whole = redo_bytes_of_a_one_column_update(flavor, true);
        assert!(whole > 1_000, "{} --whole-rows: a one-column update logged {whole} REDO bytes", flavor.name());
    }
    // An ad-hoc transaction under a command flavor logs its write set whole: a checkpoint window
    // installs write sets in any order.
    let bytes = redo_bytes_of_a_one_column_update(Flavor::TaurusCmd, false);
    assert!(bytes > 1_000, "taurus-cmd: a one-column update logged {bytes} REDO bytes");
}

/// Every row of the wide table `w` (keys 0..KEYS_WIDE), as recovery left it.
fn dump_wide(db: &Database) -> Vec<Option<Vec<Value>>> {
    let mut w = db.worker();
    let mut txn = w.begin();
    let t = txn.table_id("w").unwrap();
    (0..KEYS_WIDE).map(|k| txn.get(t, &[Value::Int(k)]).unwrap().map(|r| r.to_vec())).collect()
}

const KEYS_WIDE: i64 = 40;

/// Issue 8: direct and compiled replay of the same serial-data and taurus-data logs (whole rows,
/// column patches of 1–3 of 12 columns, deletes, over a secondary index) give identical tables,
/// equal to the state before the close; a patch of a missing row stops both with the same
/// error naming the file.
#[test]
fn direct_and_compiled_replay_of_a_stream_log_give_identical_tables() {
    for flavor in [Flavor::SerialData, Flavor::TaurusData] {
        let base = tempfile::tempdir().unwrap();
        let logged = base.path().join("logged");
        let o = options(&logged, flavor, if flavor.is_taurus() { 2 } else { 1 });
        let (db, _scheme) = open(o.clone()).unwrap();
        let columns: Vec<String> = (0..11usize)
            .map(|c| format!("c{c} {} not null", if c.is_multiple_of(2) { "int" } else { "text" }))
            .collect();
        db.load_module(
            "w.proc",
            &format!("table w (k int not null, {}, primary key (k)); index by_c0 on w (c0);", columns.join(", ")),
        )
        .unwrap();
        let mut workers: Vec<_> = (0..2).map(|_| db.worker()).collect();
        let mut seed = 11u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for step in 0..600i64 {
            let worker = &mut workers[(step % 2) as usize];
            let mut txn = worker.begin();
            let t = txn.table_id("w").unwrap();
            let k = next(KEYS_WIDE as u64) as i64;
            let value = |c: usize| {
                if c.is_multiple_of(2) {
                    Value::Int(step * 100 + c as i64)
                } else {
                    Value::text(&format!("s{step}c{c}"))
                }
            };
            match (txn.get(t, &[Value::Int(k)]).unwrap(), next(10)) {
                (None, _) => {
                    let row: Vec<Value> = std::iter::once(Value::Int(k)).chain((0..11).map(value)).collect();
                    txn.insert(t, Row::new(row)).unwrap();
                }
                (Some(_), 0) => assert!(txn.delete(t, &[Value::Int(k)]).unwrap()),
                (Some(old), _) => {
                    let mut row = old.to_vec();
                    for _ in 0..1 + next(3) {
                        let c = next(11) as usize;
                        row[1 + c] = value(c);
                    }
                    assert!(txn.update(t, Row::new(row)).unwrap());
                }
            }
            txn.commit().unwrap();
        }
        drop(workers);
        let before = dump_wide(&db);
        db.close().unwrap();
        let mut recovered = Vec::new();
        for mode in [lazarus::replay::ReplayMode::Direct, lazarus::replay::ReplayMode::Compiled] {
            let dir = base.path().join(format!("{mode}"));
            copy_dir(&logged, &dir);
            let mut o = options(&dir, flavor, if flavor.is_taurus() { 2 } else { 1 });
            o.replay_mode = mode;
            let (db, _scheme) = open(o).unwrap();
            recovered.push(dump_wide(&db));
            // The secondary index was rebuilt over what replay left.
            let mut w = db.worker();
            let mut txn = w.begin();
            let t = txn.table_id("w").unwrap();
            let scan = lazarus::txn::Scan {
                table: t,
                index: Some(0),
                range: lazarus::storage::KeyRange::all(),
                direction: lazarus::storage::Direction::Forward,
                limit: 10_000,
            };
            let mut by_index: Vec<Vec<Value>> = txn.scan(&scan).unwrap().iter().map(|r| r.to_vec()).collect();
            by_index.sort_by_key(|r| r[0].as_int());
            let present: Vec<Vec<Value>> = before.iter().flatten().cloned().collect();
            assert_eq!(by_index, present, "{} {mode}: the secondary index", flavor.name());
            drop(txn);
            drop(w);
            db.close().unwrap();
        }
        assert_eq!(recovered[0], before, "{}: direct replay", flavor.name());
        assert_eq!(recovered[1], before, "{}: compiled replay", flavor.name());
    }
}

#[test]
fn a_serial_data_patch_made_between_e_l_and_the_walk_replays_over_the_walks_version() {
    a_patch_made_between_e_l_and_the_walk_replays_over_the_walks_version(Flavor::SerialData);
}

#[test]
fn a_taurus_data_patch_made_between_e_l_and_the_walk_replays_over_the_walks_version() {
    a_patch_made_between_e_l_and_the_walk_replays_over_the_walks_version(Flavor::TaurusData);
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

/// T1 writes a key; a checkpoint removes T1's segment; T2 reads the key (RAW on T1) and writes
/// another. T2 must be recovered although T1 is in no log.
#[test]
fn a_predecessor_in_a_removed_segment_does_not_make_its_successors_unrecoverable() {
    for flavor in [Flavor::TaurusData, Flavor::TaurusCmd] {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path();
        let (db, scheme) = open(two_dir_options(dir, flavor)).unwrap();
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
            let x = txn.get(t, &[Value::Int(1)]).unwrap().unwrap().at(1).as_int().unwrap();
            txn.put(t, Row::new(vec![Value::Int(2), Value::Int(x + 1)])).unwrap();
            txn.commit().unwrap()
        } else {
            w1.call("init", &[int(2), int(0)]).unwrap();
            w1.call("copy", &[int(1), int(2)]).unwrap().committed
        };
        scheme.wait_durable(&t2.durability).unwrap();
        drop((w0, w1));
        db.close().unwrap();
        let (db, scheme) = open(two_dir_options(dir, flavor)).unwrap();
        let report = scheme.recovery.lock().clone().unwrap();
        assert_eq!(report.dropped, 0, "{}: {report:?}", flavor.name());
        let expected: BTreeMap<i64, i64> = [(1, 10), (2, 11)].into_iter().collect();
        assert_eq!(rows(&db), expected, "{}", flavor.name());
        db.close().unwrap();
    }
}

/// A segment after a torn tail (a later segment of the log reached the disk, the end of the
/// previous one did not) lies past the log's valid end: none of its transactions is replayed,
/// though they are whole and their predecessors are found, and settling removes it. Recovery
/// used to replay every segment's transactions and then delete the segment, so a later recovery
/// would have missed writes the running database had seen.
#[test]
fn transactions_in_a_segment_past_a_torn_tail_are_not_replayed() {
    let flavor = Flavor::TaurusData;
    let base = tempfile::tempdir().unwrap();
    let logged = base.path().join("logged");
    let ends = log_puts(&logged, flavor, 1);
    let first = log_file(&logged, flavor, 0);
    let bytes = std::fs::read(&first).unwrap();
    // The later segment: a header at a base past a gap, then the records of transactions 10..30
    // (ad-hoc puts: no RAW predecessor, so nothing but their place makes them unrecoverable).
    let later_base = bytes.len() as u64 + 4096;
    let header = format::StreamHeader { flavor, logger: 0, loggers: 1, generation: 0, base: later_base };
    let mut later = format::encode_header(&header);
    later.extend_from_slice(&bytes[ends[9] as usize..ends[29] as usize]);
    for streaming_graph in [false, true] {
        let dir = base.path().join(format!("torn-{streaming_graph}"));
        copy_dir(&logged, &dir);
        std::fs::write(dir.join(format::segment_name(flavor, 0, 0, later_base)), &later).unwrap();
        // The first segment torn inside transaction 10's record, after the durable length.
        lose_tail(&log_file(&dir, flavor, 0), ends[9] + 5, ends[9]);
        let expected: BTreeMap<i64, i64> = (0..10i64).map(|i| (i % 7, i)).collect();
        let mut o = options(&dir, flavor, 1);
        o.streaming_graph = streaming_graph;
        let (db, _) = open(o).unwrap();
        assert_eq!(rows(&db), expected, "only the chained segment's prefix (streaming graph: {streaming_graph})");
        db.close().unwrap();
        assert!(!dir.join(format::segment_name(flavor, 0, 0, later_base)).exists(), "the later segment was removed");
        let (db, _) = open(options(&dir, flavor, 1)).unwrap();
        assert_eq!(rows(&db), expected, "reopened");
        db.close().unwrap();
    }
}
