//! Schemes `indexed` (AILIR) and `indexed-sync` (SILIR): instant recovery equals the state before
//! the crash; transactions during the restore see restored, not-yet-restored and absent keys
//! correctly; a torn tail of the sequential log is ignored; a missing or damaged indexed log is
//! rebuilt from the sequential log; SILIR acknowledges only what is indexed; checkpoints truncate
//! the sequential log only behind the Indexer.
//!
//! A crash is a copy of the log directories taken while the database is quiescent (every
//! transaction acknowledged) and its Indexer idle: the copy is what a kill at that moment leaves,
//! with a tail of the sequential log not yet indexed.

use lazarus::durability::indexed::restorer::{RESTORE_START_DELAY_MAX_MS, WALKERS_MAX};
use lazarus::durability::indexed::store::INDEX_FILE;
use lazarus::durability::indexed::{
    IndexMode, IndexedLogging, IndexedOptions, TAIL_IN_MEMORY_LIMIT_BYTES, UNINDEXED_LIMIT_BYTES,
};
use lazarus::durability::{DurabilityTicket, LogScheme};
use lazarus::storage::{Direction, KeyRange, ParamValue, Value};
use lazarus::{Database, DatabaseConfig};
use std::path::Path;
use std::sync::Arc;

const SOURCE: &str = "
table kv (k int not null, v int not null, tag text, primary key (k));
index kv_by_v on kv (v);
procedure put(k int, nv int) {
    select v into old from kv where k = k;
    if found { update kv set v = nv, tag = 'updated' where k = k; }
    else { insert into kv values (k, nv, 'new'); }
}
procedure remove(k int) { delete from kv where k = k; }
procedure get(k int) { select v into x from kv where k = k; if not found { return -1; } return x; }
procedure count_all() { let n = 0; for r in select k from kv where k >= 0 limit 1000 { n = n + 1; } return n; }
";

/// Two loggers (records of one key land in both), frequent rotation, no checkpoints; the Indexer
/// runs only when asked (`index_now`), so what the history writes after that stays unindexed.
fn options(dir: &Path, mode: IndexMode) -> IndexedOptions {
    let mut o = IndexedOptions::new(vec![dir.join("log0"), dir.join("log1")], mode);
    o.value.rotate_epochs = 3;
    o.value.checkpoint.interval_ms = 0;
    o.index_interval_ms = 10_000;
    o
}

fn open(o: IndexedOptions) -> (Database, Arc<IndexedLogging>) {
    let scheme = Arc::new(IndexedLogging::new(o).unwrap());
    let config = DatabaseConfig {
        epoch_interval_ms: 5,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..DatabaseConfig::default()
    };
    (Database::open(config).unwrap(), scheme)
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

/// Every row of `kv` in key order, and the secondary index's view (read without the gate: call
/// it once the restore has ended).
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

/// Puts and removes over keys 0..50 on two workers, every commit acknowledged.
fn history(db: &Database, n: i64, salt: i64) {
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut worker = db.worker();
                // The largest ticket: a read-only call (a remove of an absent key) gets an older
                // one than the writes before it.
                let mut newest = 0;
                for i in 0..n {
                    let k = (i * 7 + w + salt) % 50;
                    let out = if i % 5 == 4 {
                        worker.call_retrying("remove", &[int(k)], 1000).unwrap()
                    } else {
                        worker.call_retrying("put", &[int(k), int(i * 100 + salt)], 1000).unwrap()
                    };
                    let DurabilityTicket::Epoch(e) = out.committed.durability else { panic!("an epoch ticket") };
                    newest = newest.max(e);
                }
                worker.wait_durable(&DurabilityTicket::Epoch(newest)).unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Stops the epoch advancer and waits until the loggers have nothing left to write (the files
/// under `root` stay the same over a pause), so that a copy is one moment's crash image.
fn quiesce(db: &Database, root: &Path) {
    db.epochs().stop();
    let snapshot = || {
        let mut files = Vec::new();
        for dir in ["log0", "log1"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let entry = entry.unwrap();
                files.push((entry.file_name(), entry.metadata().map(|m| m.len()).unwrap_or(0)));
            }
        }
        files.sort();
        files
    };
    let mut last = snapshot();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = snapshot();
        if now == last {
            return;
        }
        last = now;
    }
}

fn copy_tree(from: &Path, to: &Path) {
    // A logger may still rotate its last file after the final acknowledgement: a copy that
    // raced with a rename is taken again.
    for _ in 0..100 {
        let _ = std::fs::remove_dir_all(to);
        if try_copy_tree(from, to).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("cannot copy {}", from.display());
}

fn try_copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            try_copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A crash image: a history, part of it indexed and part not; returns the image's directory and
/// the state every recovery of it must reach.
fn crash_image(root: &Path) -> (std::path::PathBuf, (Vec<Vec<Value>>, Vec<i64>)) {
    let (image, _, before) = crash_image_and_indexed_state(root);
    (image, before)
}

/// A table's rows and its secondary index's view ([`dump`]).
type State = (Vec<Vec<Value>>, Vec<i64>);

/// [`crash_image`], and the state the indexed part of the history left.
fn crash_image_and_indexed_state(root: &Path) -> (std::path::PathBuf, State, State) {
    let live = root.join("live");
    let (db, scheme) = open(options(&live, IndexMode::Async));
    db.load_module("kv.proc", SOURCE).unwrap();
    history(&db, 300, 0);
    let indexed = scheme.index_now().unwrap();
    assert!(indexed > 0, "the Indexer indexed nothing");
    let indexed_state = dump(&db);
    history(&db, 200, 3);
    let before = dump(&db);
    assert!(before.0.len() > 10, "the history left too few rows: {}", before.0.len());
    let image = root.join("crash");
    {
        let _held = scheme.hold_indexer();
        quiesce(&db, &live);
        copy_tree(&live, &image);
    }
    db.close().unwrap();
    (image, indexed_state, before)
}

#[test]
fn instant_recovery_restores_the_state_before_the_crash() {
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    let (db, scheme) = open(options(&image, IndexMode::Async));
    let report = scheme.report.lock().clone();
    assert_eq!(report.kind, "instant");
    assert!(report.tail_writes > 0, "the open read no unindexed tail: {report:?}");
    scheme.wait_restored();
    let progress = scheme.restore_progress().expect("a restore ran");
    assert!(progress.done && progress.percent() == 100.0, "{progress:?}");
    assert_eq!(progress.walked_keys, before.0.len() as u64);
    assert_eq!(dump(&db), before, "{report:?}");
    // It keeps working, and recovers again (now with nothing left to index).
    let mut w = db.worker();
    w.call("put", &[int(1000), int(1)]).unwrap();
    let out = w.call("remove", &[int(before.0[0][0].as_int().unwrap())]).unwrap();
    w.wait_durable(&out.committed.durability).unwrap();
    let after = dump(&db);
    db.close().unwrap();
    drop(db);
    let (db, scheme) = open(options(&image, IndexMode::Async));
    scheme.wait_restored();
    assert_eq!(scheme.report.lock().tail_writes, 0, "a clean close leaves nothing to index");
    assert_eq!(dump(&db), after);
    db.close().unwrap();
}

#[test]
fn a_walk_held_for_the_server_begins_when_it_serves() {
    use lazarus::server::RecoveryStatus;
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_awaits_serving = true;
    let (db, scheme) = open(o);
    // Long enough for a walk of these few keys, far below the hold's limit.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let progress = scheme.restore_progress().expect("a restore is running");
    assert!(progress.walked_keys == 0 && !progress.done, "the walk began before the server served: {progress:?}");
    // Requests are served meanwhile: a key not yet restored is fetched on demand.
    let (k, v) = (before.0[0][0].as_int().unwrap(), before.0[0][1].as_int().unwrap());
    assert_eq!(db.worker().call("get", &[int(k)]).unwrap().values[0].as_int(), Some(v));
    scheme.serving();
    scheme.wait_restored();
    assert!(scheme.restore_progress().unwrap().done);
    assert_eq!(dump(&db), before);
    db.close().unwrap();
}

/// `lazarus serve`'s start: small pages until the walk begins, and the walk its delay after the
/// server serves. One test, since the pages are the process's.
#[test]
fn a_server_starts_in_small_pages_and_walks_its_delay_after_it_serves() {
    use lazarus::allocator::SmallPages;
    use lazarus::server::RecoveryStatus;
    use std::time::{Duration, Instant};
    const DELAY_MS: u64 = 400;
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    assert!(!SmallPages::held(), "nothing holds small pages before the server starts");
    let mut o = options(&image, IndexMode::Async);
    o.restore_awaits_serving = true;
    o.restore_start_delay_ms = DELAY_MS;
    o.small_pages_until_walk = true;
    let (db, scheme) = open(o);
    assert!(SmallPages::held(), "the restore's open gave up small pages before its walk");
    let served = Instant::now();
    scheme.serving();
    // Long enough for a walk of these few keys, well inside the delay.
    std::thread::sleep(Duration::from_millis(DELAY_MS / 4));
    let progress = scheme.restore_progress().expect("a restore is running");
    assert!(progress.walked_keys == 0 && !progress.done, "the walk began before its delay: {progress:?}");
    assert!(SmallPages::held(), "small pages ended before the walk began");
    scheme.wait_restored();
    assert!(served.elapsed() >= Duration::from_millis(DELAY_MS), "the walk ended before its delay had passed");
    assert!(!SmallPages::held(), "small pages outlived the walk's start");
    assert_eq!(dump(&db), before);
    db.close().unwrap();
    drop(db);
    // With nothing to restore, the open ends them.
    let mut o = options(&root.path().join("fresh"), IndexMode::Async);
    o.small_pages_until_walk = true;
    let (db, scheme) = open(o);
    assert!(scheme.restore_progress().is_none(), "a fresh directory has nothing to restore");
    assert!(!SmallPages::held(), "small pages outlived an open with nothing to restore");
    db.close().unwrap();
}

#[test]
fn a_walk_held_for_a_server_that_never_serves_begins_at_the_limit() {
    use lazarus::durability::indexed::restorer::AWAIT_SERVING_MAX_MS;
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_awaits_serving = true;
    let (db, scheme) = open(o);
    scheme.wait_restored();
    let progress = scheme.restore_progress().unwrap();
    assert!(progress.done, "{progress:?}");
    // Held until the limit: no restore of these few keys ends sooner.
    assert!(progress.elapsed_ms >= AWAIT_SERVING_MAX_MS as f64, "{progress:?}");
    assert_eq!(dump(&db), before);
    db.close().unwrap();
}

#[test]
fn the_restored_percent_counts_each_image_once() {
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    let existing: Vec<i64> = before.0.iter().map(|r| r[0].as_int().unwrap()).collect();
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    let mut w = db.worker();
    // Five images fetched, twice each, and keys that were never there.
    for _ in 0..2 {
        for &k in &existing[..5] {
            w.call("get", &[int(k)]).unwrap();
        }
    }
    for k in (0..60).filter(|k| !existing.contains(k)) {
        w.call("get", &[int(k)]).unwrap();
    }
    let progress = scheme.restore_progress().unwrap();
    assert_eq!(progress.images_restored, 5, "{progress:?}");
    assert!(progress.on_demand_keys > 5, "absent keys count as restored on demand: {progress:?}");
    let total = progress.total_keys as f64;
    assert!((progress.percent() - 500.0 / total).abs() < 1e-9, "{} % for 5 of {total}", progress.percent());
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    let progress = scheme.restore_progress().unwrap();
    // The walk passed every image and linked those not fetched: each image is in memory once.
    assert_eq!(progress.walked_keys, progress.total_keys, "{progress:?}");
    assert_eq!(progress.images_restored, progress.total_keys, "{progress:?}");
    assert_eq!(dump(&db), before);
    db.close().unwrap();
}

/// The unindexed tail is read into memory at the open, not indexed: a request's fetch and the
/// walk restore, of a key's image and its write in the tail, the newer one. Every key is read
/// during a paused walk (each fetched), and again after the walk; then the tail is indexed by the
/// running Indexer, and a second crash image restores the same from the B-tree alone.
#[test]
fn the_unindexed_tail_is_restored_from_memory_by_fetches_and_by_the_walk() {
    let root = tempfile::tempdir().unwrap();
    let (image, indexed, before) = crash_image_and_indexed_state(root.path());
    let (old, new) = (values_of(&indexed.0), values_of(&before.0));
    // The tail updates, deletes and creates keys, against the images.
    assert!(old.iter().any(|(k, v)| new.get(k).is_some_and(|n| n != v)), "no key updated in the tail");
    assert!(old.keys().any(|k| !new.contains_key(k)), "no key deleted in the tail");
    assert!(new.keys().any(|k| !old.contains_key(k)), "no key created in the tail");
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    let report = scheme.report.lock().clone();
    assert!(report.tail_writes > 0, "{report:?}");
    // Not indexed at the open: the indexed log's epoch is the one before the tail.
    let progress = scheme.restore_progress().expect("a restore is running");
    let images = progress.total_keys;
    let mut w = db.worker();
    let get = |w: &mut lazarus::db::Worker, k: i64| w.call("get", &[int(k)]).unwrap().values[0].as_int().unwrap();
    for k in 0..60 {
        assert_eq!(get(&mut w, k), new.get(&k).copied().unwrap_or(-1), "key {k} fetched during the restore");
    }
    let progress = scheme.restore_progress().unwrap();
    assert_eq!(progress.walked_keys, 0, "the walk moved while paused");
    assert_eq!(progress.images_restored, new.len() as u64, "{progress:?}");
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    assert_eq!(dump(&db), before, "after the walk");
    let progress = scheme.restore_progress().unwrap();
    assert!(progress.total_keys <= images && progress.total_keys == new.len() as u64, "{progress:?}");
    // The running Indexer indexes the tail (here when asked: its interval is long).
    let indexed_epoch = scheme.indexed_epoch();
    assert!(scheme.index_now().unwrap() > indexed_epoch, "the tail was indexed at the open");
    let second = root.path().join("second");
    {
        let _held = scheme.hold_indexer();
        quiesce(&db, &image);
        copy_tree(&image, &second);
    }
    db.close().unwrap();
    drop(db);
    let (db, scheme) = open(options(&second, IndexMode::Async));
    let report = scheme.report.lock().clone();
    assert_eq!(report.tail_writes, 0, "the tail was indexed before the second crash: {report:?}");
    scheme.wait_restored();
    assert_eq!(dump(&db), before, "from the B-tree alone");
    db.close().unwrap();
}

/// A read ahead of the restore (`Table::read_ahead`, the server's GET) answers a key not yet
/// restored with its recovered state, the newer of its image and its write in the unindexed
/// tail, without restoring it; a second read of the key restores it; a key in memory is read
/// there. The walk then restores every key as if none had been read.
#[test]
fn a_read_ahead_of_the_restore_answers_the_recovered_state_and_restores_nothing() {
    let root = tempfile::tempdir().unwrap();
    let (image, indexed, before) = crash_image_and_indexed_state(root.path());
    let (values, images) = (values_of(&before.0), values_of(&indexed.0));
    let keys = 0..60;
    // Among the keys read: some whose tail write (an update, a delete, a create) is newer than
    // their image, and some the tail left alone.
    let from_tail = keys.clone().filter(|k| values.get(k) != images.get(k)).count();
    assert!(from_tail > 0 && from_tail < keys.clone().count(), "{from_tail} of the keys read changed in the tail");
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    assert!(scheme.report.lock().tail_writes > 0, "no unindexed tail to read ahead of");
    let table = db.catalog().table_by_name("kv").expect("table kv").clone();
    let key = |k: i64| lazarus::storage::key::encode_key(&[Value::Int(k)]).unwrap();
    let read =
        |k: i64| table.read_ahead(key(k).as_bytes()).map(|row| row.map(|row| row.get(1).unwrap().as_int().unwrap()));
    for k in keys.clone() {
        assert_eq!(read(k), Some(values.get(&k).copied()), "key {k} read ahead");
        assert!(!table.is_restored(key(k).as_bytes()), "key {k} was restored by its read");
    }
    let progress = scheme.restore_progress().unwrap();
    assert_eq!((progress.images_restored, progress.on_demand_keys), (0, 0), "{progress:?}");
    assert_eq!(progress.read_ahead_keys, keys.clone().count() as u64, "{progress:?}");
    // Read again: restored now, and read from memory by the caller.
    for k in 0..10 {
        assert_eq!(read(k), None, "key {k}, read a second time, was read ahead again");
        assert!(table.is_restored(key(k).as_bytes()), "key {k}, read a second time, is not restored");
    }
    let progress = scheme.restore_progress().unwrap();
    assert_eq!(progress.on_demand_keys, 10, "{progress:?}");
    assert_eq!(progress.images_restored, (0..10).filter(|k| values.contains_key(k)).count() as u64);
    // A write restores its key first; a read ahead of it then reads memory.
    let mut w = db.worker();
    w.call("put", &[int(20), int(-20)]).unwrap();
    assert_eq!(read(20), None, "a written key was read ahead of the restore");
    let get = |w: &mut lazarus::db::Worker, k: i64| w.call("get", &[int(k)]).unwrap().values[0].as_int().unwrap();
    assert_eq!(get(&mut w, 20), -20);
    assert_eq!(get(&mut w, 30), values.get(&30).copied().unwrap_or(-1));
    drop(w);
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    assert_eq!(read(31), None, "a read ahead after the restore ended");
    let mut want = before;
    let mut rows: Vec<Vec<Value>> = want.0.into_iter().filter(|r| r[0].as_int() != Some(20)).collect();
    rows.push(vec![
        Value::Int(20),
        Value::Int(-20),
        Value::text(if values.contains_key(&20) { "updated" } else { "new" }),
    ]);
    rows.sort_by_key(|r| r[0].as_int());
    want.0 = rows;
    want.1 = want.0.iter().map(|r| r[1].as_int().unwrap()).collect::<Vec<_>>();
    want.1.sort_unstable();
    assert_eq!(dump(&db), want, "after the walk");
    db.close().unwrap();
}

/// A tail longer than the memory bound is indexed into the B-tree before the open, as the paper
/// does, and the restore reads the B-tree alone.
#[test]
fn a_tail_longer_than_the_memory_bound_is_indexed_before_the_open() {
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.tail_in_memory_max_bytes = 1;
    let (db, scheme) = open(o);
    let report = scheme.report.lock().clone();
    assert!(report.tail_writes > 0 && report.tail_indexed, "{report:?}");
    // Indexed already: the running Indexer has nothing to add.
    let indexed_epoch = scheme.indexed_epoch();
    assert_eq!(scheme.index_now().unwrap(), indexed_epoch, "the tail was left to the running Indexer");
    scheme.wait_restored();
    assert_eq!(dump(&db), before);
    let progress = scheme.restore_progress().unwrap();
    assert_eq!(progress.total_keys, before.0.len() as u64, "only images to restore: {progress:?}");
    db.close().unwrap();
    drop(db);
    // And under the default bound the same image reads it into memory.
    let (db, scheme) = open(options(&image, IndexMode::Async));
    let report = scheme.report.lock().clone();
    assert!(!report.tail_indexed && report.tail_writes == 0, "nothing left unindexed: {report:?}");
    scheme.wait_restored();
    assert_eq!(dump(&db), before);
    db.close().unwrap();
}

#[test]
fn requests_during_the_restore_see_restored_unrestored_and_absent_keys() {
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    let expected = values_of(&before.0);
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    let progress = scheme.restore_progress().expect("a restore is running");
    assert!(!progress.done && progress.walked_keys == 0, "{progress:?}");
    let mut w = db.worker();
    let get = |w: &mut lazarus::db::Worker, k: i64| w.call("get", &[int(k)]).unwrap().values[0].as_int().unwrap();
    // Not yet restored: fetched on demand. Never existed: absent, and not "not yet restored".
    for (&k, &v) in expected.iter().take(5) {
        assert_eq!(get(&mut w, k), v, "key {k} read during the restore");
    }
    // Each miss restored its own key and nothing else.
    let progress = scheme.restore_progress().unwrap();
    assert_eq!(progress.on_demand_keys, 5, "{progress:?}");
    let absent: Vec<i64> = (0..60).filter(|k| !expected.contains_key(k)).collect();
    assert!(!absent.is_empty());
    for &k in &absent {
        assert_eq!(get(&mut w, k), -1, "key {k} never existed");
    }
    // Writes during the restore: the walk must not undo them.
    let (&deleted, _) = expected.iter().nth(1).unwrap();
    let (&updated, _) = expected.iter().last().unwrap();
    w.call("remove", &[int(deleted)]).unwrap();
    w.call("put", &[int(updated), int(-7)]).unwrap();
    w.call("put", &[int(absent[0]), int(42)]).unwrap();
    assert_eq!(get(&mut w, updated), -7, "key {updated} right after its update");
    let progress = scheme.restore_progress().unwrap();
    assert_eq!(progress.walked_keys, 0, "the walk moved while paused");
    // The five read, and at least one more for the absent keys (an absent key restores the
    // interval up to the next image, which may cover the absent keys after it).
    assert!(progress.on_demand_keys > 5, "{progress:?}");
    // A range read waits for the table: started now, it must see the whole table.
    let counter = {
        let db = db.clone();
        std::thread::spawn(move || db.worker().call("count_all", &[]).unwrap().values[0].as_int().unwrap())
    };
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    let mut want = expected.clone();
    want.remove(&deleted);
    want.insert(updated, -7);
    want.insert(absent[0], 42);
    assert_eq!(counter.join().unwrap(), want.len() as i64, "a count during the restore saw a partial table");
    let (rows, by_v) = dump(&db);
    let got = values_of(&rows);
    assert_eq!(got, want);
    let mut want_v: Vec<i64> = want.values().copied().collect();
    want_v.sort_unstable();
    assert_eq!(by_v, want_v, "the secondary index disagrees with the table");
    db.close().unwrap();
}

/// Keys of the larger image: 0..BIG_KEYS, of which the multiples of 7 are deleted before the crash
/// and the multiples of 5 (not of 7) are written after the Indexer's last round (an unindexed tail).
const BIG_KEYS: i64 = 3000;

/// A crash image of `BIG_KEYS` keys, large enough for many shards and walk batches; returns the
/// image and the state (key → v) every recovery of it must reach.
fn big_crash_image(root: &Path) -> (std::path::PathBuf, std::collections::BTreeMap<i64, i64>) {
    let live = root.join("live");
    let (db, scheme) = open(options(&live, IndexMode::Async));
    db.load_module("kv.proc", SOURCE).unwrap();
    let mut w = db.worker();
    let mut state = std::collections::BTreeMap::new();
    let mut last = DurabilityTicket::Epoch(0);
    for k in 0..BIG_KEYS {
        last = w.call_retrying("put", &[int(k), int(k * 10)], 1000).unwrap().committed.durability;
        state.insert(k, k * 10);
    }
    for k in (0..BIG_KEYS).step_by(7) {
        last = w.call_retrying("remove", &[int(k)], 1000).unwrap().committed.durability;
        state.remove(&k);
    }
    w.wait_durable(&last).unwrap();
    assert!(scheme.index_now().unwrap() > 0);
    for k in (0..BIG_KEYS).filter(|k| k % 5 == 0 && k % 7 != 0) {
        last = w.call_retrying("put", &[int(k), int(-k)], 1000).unwrap().committed.durability;
        state.insert(k, -k);
    }
    w.wait_durable(&last).unwrap();
    let image = root.join("crash");
    {
        let _held = scheme.hold_indexer();
        quiesce(&db, &live);
        copy_tree(&live, &image);
    }
    drop(w);
    db.close().unwrap();
    (image, state)
}

fn rows_of(db: &Database) -> std::collections::BTreeMap<i64, i64> {
    values_of(&dump(db).0)
}

/// Rows of `kv` ([`dump`]'s) as key → value.
fn values_of(rows: &[Vec<Value>]) -> std::collections::BTreeMap<i64, i64> {
    rows.iter().map(|r| (r[0].as_int().unwrap(), r[1].as_int().unwrap())).collect()
}

/// Four clients, each owning the keys ≡ its number mod 4 in 0..BIG_KEYS + 200 (the last 200
/// never existed), read, update, delete and insert while several walkers restore the table; every
/// read must return the client's own model of its keys, and the end state must be the models.
#[test]
fn requests_racing_several_walkers_see_correct_values_and_writes_survive() {
    let root = tempfile::tempdir().unwrap();
    let (image, state) = big_crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    let progress = scheme.restore_progress().expect("a restore is running");
    assert!(progress.walkers >= 2, "one walker: {progress:?}");
    assert!(progress.shards > 100, "too few shards to race on: {progress:?}");
    let released = std::sync::atomic::AtomicBool::new(false);
    let models: Vec<std::collections::BTreeMap<i64, i64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4i64)
            .map(|client| {
                let (db, scheme, state, released) = (&db, &scheme, &state, &released);
                s.spawn(move || {
                    let mut model: std::collections::BTreeMap<i64, i64> =
                        state.iter().filter(|(k, _)| *k % 4 == client).map(|(k, v)| (*k, *v)).collect();
                    let mut w = db.worker();
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(client as u64 + 1) | 1;
                    let mut ops = 0u64;
                    // Until the walk is over, and a while after.
                    let mut after_done = 0;
                    while after_done < 200 {
                        assert!(ops < 1_000_000, "client {client}: the restore never ended");
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let k = ((rng >> 8) % ((BIG_KEYS as u64 + 200) / 4)) as i64 * 4 + client;
                        match rng % 10 {
                            0..=5 => {
                                let got = w.call_retrying("get", &[int(k)], 1000).unwrap().values[0].as_int().unwrap();
                                assert_eq!(got, model.get(&k).copied().unwrap_or(-1), "client {client}: key {k}");
                            }
                            6..=7 => {
                                let v = (ops as i64) * 1000 + client;
                                w.call_retrying("put", &[int(k), int(v)], 1000).unwrap();
                                model.insert(k, v);
                            }
                            _ => {
                                w.call_retrying("remove", &[int(k)], 1000).unwrap();
                                model.remove(&k);
                            }
                        }
                        ops += 1;
                        if client == 0 && ops == 300 {
                            // Half the clients' work runs against a paused walk (only on-demand
                            // restores), the rest against the walkers.
                            released.store(true, std::sync::atomic::Ordering::SeqCst);
                            scheme.set_restore_paused(false);
                        }
                        if released.load(std::sync::atomic::Ordering::SeqCst)
                            && scheme.restore_progress().is_some_and(|p| p.done)
                        {
                            after_done += 1;
                        }
                    }
                    model
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    scheme.wait_restored();
    let progress = scheme.restore_progress().unwrap();
    assert!(progress.done && progress.on_demand_keys > 0, "{progress:?}");
    let want: std::collections::BTreeMap<i64, i64> = models.into_iter().flatten().collect();
    let got = rows_of(&db);
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want, "the end state differs from the clients' writes");
    let (rows, by_v) = dump(&db);
    let mut want_v: Vec<i64> = rows.iter().map(|r| r[1].as_int().unwrap()).collect();
    want_v.sort_unstable();
    assert_eq!(by_v, want_v, "the secondary index disagrees with the table");
    db.close().unwrap();
}

/// `restore_walkers` sets the walk's threads; one walker restores the whole table, and requests
/// made meanwhile see the right values.
#[test]
fn one_walker_restores_everything() {
    let root = tempfile::tempdir().unwrap();
    let (image, state) = big_crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_walkers = Some(1);
    let (db, scheme) = open(o);
    assert_eq!(scheme.restore_progress().expect("a restore is running").walkers, 1);
    let mut w = db.worker();
    for k in (0..BIG_KEYS + 50).step_by(97) {
        let got = w.call_retrying("get", &[int(k)], 1000).unwrap().values[0].as_int().unwrap();
        assert_eq!(got, state.get(&k).copied().unwrap_or(-1), "key {k}");
    }
    drop(w);
    scheme.wait_restored();
    assert_eq!(rows_of(&db), state);
    db.close().unwrap();
}

/// The restore of an indexed log holding one table makes room in that table's point index for
/// all its images before the walk (the walk then rebuilds none of its arrays).
#[test]
fn a_one_table_restore_sizes_the_point_index_first() {
    let root = tempfile::tempdir().unwrap();
    let (image, state) = big_crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    let images = scheme.restore_progress().expect("a restore is running").total_keys as usize;
    let table = db.catalog().table_by_name("kv").expect("table kv").clone();
    // The walk is paused; the sizing runs first on the restore's thread.
    let room = || table.point.slot_count() * 3 / 4;
    assert!(eventually(std::time::Duration::from_secs(10), || room() >= images), "room for {} of {images}", room());
    let before = table.point.slot_count();
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    assert_eq!(table.point.slot_count(), before, "the walk rebuilt the point index's arrays");
    assert_eq!(rows_of(&db), state);
    db.close().unwrap();
}

/// With a small share of the CPU, constant or falling as the restore goes on, a restore while the
/// process is busy (a thread spinning here stands for the serving threads) is held back at times,
/// and still restores everything.
#[test]
fn a_restore_while_serving_keeps_to_its_share_of_the_cpu() {
    let root = tempfile::tempdir().unwrap();
    let (image, state) = big_crash_image(root.path());
    for front_load in [0.0, 0.8] {
        let copy = root.path().join(format!("copy-{front_load}"));
        copy_tree(&image, &copy);
        let mut o = options(&copy, IndexMode::Async);
        o.restore_cpu_share = 0.05;
        o.restore_front_load = front_load;
        o.restore_paused = true;
        let (db, scheme) = open(o);
        let spinning = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let spinner = {
            let spinning = Arc::clone(&spinning);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while spinning.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        };
        // A first period of the governor with the spinner busy, so the walk starts in a serving one.
        std::thread::sleep(std::time::Duration::from_millis(30));
        scheme.set_restore_paused(false);
        scheme.wait_restored();
        spinning.store(false, std::sync::atomic::Ordering::Relaxed);
        spinner.join().unwrap();
        let progress = scheme.restore_progress().expect("a restore ran");
        assert!(progress.held_ms > 0.0, "front load {front_load}: the walk was never held: {progress:?}");
        assert_eq!(rows_of(&db), state, "front load {front_load}");
        db.close().unwrap();
    }
}

/// The restore's settings out of range are refused with what was wrong.
#[test]
fn restore_settings_out_of_range_are_refused() {
    let root = tempfile::tempdir().unwrap();
    for share in [0.0, -0.5, 1.5, f64::NAN] {
        let mut o = options(root.path(), IndexMode::Async);
        o.restore_cpu_share = share;
        let Err(e) = IndexedLogging::new(o) else { panic!("a CPU share of {share} was accepted") };
        assert!(e.to_string().contains("share of the CPU must be in (0, 1]"), "{e}");
    }
    for front_load in [-0.1, 0.95, 1.0, f64::NAN] {
        let mut o = options(root.path(), IndexMode::Async);
        o.restore_front_load = front_load;
        let Err(e) = IndexedLogging::new(o) else { panic!("a front load of {front_load} was accepted") };
        assert!(e.to_string().contains(&format!("front load must be in [0, 0.9], not {front_load}")), "{e}");
    }
    let mut o = options(root.path(), IndexMode::Async);
    o.restore_start_delay_ms = RESTORE_START_DELAY_MAX_MS + 1;
    let Err(e) = IndexedLogging::new(o) else { panic!("a start delay over the limit was accepted") };
    let expected =
        format!("start delay must be 0..={RESTORE_START_DELAY_MAX_MS} ms, not {}", RESTORE_START_DELAY_MAX_MS + 1);
    assert!(e.to_string().contains(&expected), "{e}");
    let mut o = options(root.path(), IndexMode::Async);
    o.tail_in_memory_max_bytes = TAIL_IN_MEMORY_LIMIT_BYTES + 1;
    let Err(e) = IndexedLogging::new(o) else { panic!("a tail bound over the limit was accepted") };
    assert!(e.to_string().contains(&format!("must be at most {TAIL_IN_MEMORY_LIMIT_BYTES} bytes")), "{e}");
    let mut o = options(root.path(), IndexMode::Async);
    o.unindexed_max_bytes = UNINDEXED_LIMIT_BYTES + 1;
    let Err(e) = IndexedLogging::new(o) else { panic!("an unindexed bound over the limit was accepted") };
    let expected = format!("unindexed log's bound must be at most {UNINDEXED_LIMIT_BYTES} bytes (0: none), not");
    assert!(e.to_string().contains(&expected), "{e}");
    for walkers in [0, WALKERS_MAX + 1] {
        let mut o = options(root.path(), IndexMode::Async);
        o.restore_walkers = Some(walkers);
        let Err(e) = IndexedLogging::new(o) else { panic!("{walkers} walkers were accepted") };
        assert!(e.to_string().contains(&format!("restore walkers must be 1..={WALKERS_MAX}, not {walkers}")), "{e}");
    }
    let dir = root.path().join("serve");
    let stderr = serve_refuses(&["--restore-cpu-share", "0", "--dir", dir.to_str().unwrap()]);
    assert!(stderr.contains("share of the CPU must be in (0, 1], not 0"), "{stderr}");
    let stderr = serve_refuses(&["--restore-front-load", "2", "--dir", dir.to_str().unwrap()]);
    assert!(stderr.contains("front load must be in [0, 0.9], not 2"), "{stderr}");
    let stderr = serve_refuses(&["--restore-start-delay-ms", "10001", "--dir", dir.to_str().unwrap()]);
    assert!(stderr.contains("start delay must be 0..=10000 ms, not 10001"), "{stderr}");
    let stderr = serve_refuses(&["--unindexed-max-mib", "16385", "--dir", dir.to_str().unwrap()]);
    assert!(stderr.contains("--unindexed-max-mib") && stderr.contains("0..=16384"), "{stderr}");
}

/// Runs `lazarus serve --durability indexed <args>`, asserts that it refused to start, and
/// returns what it wrote to stderr.
fn serve_refuses(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .args(["serve", "--durability", "indexed"])
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "serve {args:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn serve_refuses_a_walker_count_out_of_range() {
    for walkers in ["0", "17"] {
        let stderr = serve_refuses(&["--restore-walkers", walkers]);
        assert!(stderr.contains("--restore-walkers") && stderr.contains("1..=16"), "{stderr}");
    }
}

/// A crash in the middle of a restore (requests had restored and changed part of the table, the
/// walk had not finished) recovers again, with those changes.
#[test]
fn a_crash_during_the_restore_recovers_again() {
    let root = tempfile::tempdir().unwrap();
    let (image, mut state) = big_crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    let mut w = db.worker();
    let mut last = DurabilityTicket::Epoch(0);
    for k in (1..BIG_KEYS + 100).step_by(11) {
        let got = w.call("get", &[int(k)]).unwrap().values[0].as_int().unwrap();
        assert_eq!(got, state.get(&k).copied().unwrap_or(-1), "key {k} during the first restore");
        last = if k % 2 == 0 {
            state.remove(&k);
            w.call_retrying("remove", &[int(k)], 1000).unwrap().committed.durability
        } else {
            state.insert(k, k + 7);
            w.call_retrying("put", &[int(k), int(k + 7)], 1000).unwrap().committed.durability
        };
    }
    w.wait_durable(&last).unwrap();
    scheme.index_now().unwrap();
    // And an unindexed tail written during the restore.
    for k in (3..BIG_KEYS).step_by(97) {
        state.insert(k, -1000 - k);
        last = w.call_retrying("put", &[int(k), int(-1000 - k)], 1000).unwrap().committed.durability;
    }
    w.wait_durable(&last).unwrap();
    assert!(!scheme.restore_progress().unwrap().done, "the restore ended before the crash");
    let second = root.path().join("crash2");
    {
        let _held = scheme.hold_indexer();
        quiesce(&db, &image);
        copy_tree(&image, &second);
    }
    drop(w);
    db.close().unwrap();
    drop((db, scheme));
    let (db, scheme) = open(options(&second, IndexMode::Async));
    assert_eq!(scheme.report.lock().kind, "instant");
    scheme.wait_restored();
    assert_eq!(rows_of(&db), state);
    db.close().unwrap();
}

/// The current `data.log` of a logger directory.
fn data_log(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("data.log");
    assert!(path.exists(), "no data.log in {}", dir.display());
    path
}

#[test]
fn a_torn_tail_of_the_sequential_log_is_ignored() {
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    for logger in ["log0", "log1"] {
        let path = data_log(&image.join(logger));
        let mut bytes = std::fs::read(&path).unwrap();
        // Half a block header and garbage: what a crash in the middle of a write leaves.
        bytes.extend_from_slice(b"LZBK\x07\x00\x00garbage after the durable length");
        std::fs::write(&path, bytes).unwrap();
    }
    let (db, scheme) = open(options(&image, IndexMode::Async));
    scheme.wait_restored();
    assert_eq!(dump(&db), before);
    db.close().unwrap();
}

#[test]
fn a_missing_or_damaged_indexed_log_is_rebuilt_from_the_sequential_log() {
    let root = tempfile::tempdir().unwrap();
    let (image, before) = crash_image(root.path());
    let damaged = root.path().join("damaged");
    copy_tree(&image, &damaged);
    let index = damaged.join("log0").join(INDEX_FILE);
    let mut bytes = std::fs::read(&index).unwrap();
    for b in bytes.iter_mut().step_by(509) {
        *b ^= 0x5a;
    }
    std::fs::write(&index, bytes).unwrap();
    // An indexed log of the previous format version (its rows in the log's layout): rebuilt, not
    // read as this version's.
    let older = root.path().join("older");
    copy_tree(&image, &older);
    set_format_version(&older.join("log0").join(INDEX_FILE), 1);
    std::fs::remove_file(image.join("log0").join(INDEX_FILE)).unwrap();
    for dir in [&image, &damaged, &older] {
        let (db, scheme) = open(options(dir, IndexMode::Async));
        let report = scheme.report.lock().clone();
        assert_eq!(report.kind, "rebuilt", "{}: {report:?}", dir.display());
        assert_eq!(dump(&db), before, "{}", dir.display());
        db.close().unwrap();
        drop((db, scheme));
        // The rebuilt indexed log serves the next restart instantly.
        let (db, scheme) = open(options(dir, IndexMode::Async));
        let report = scheme.report.lock().clone();
        assert_eq!(report.kind, "instant", "{report:?}");
        scheme.wait_restored();
        assert_eq!(dump(&db), before, "{} after the rebuild", dir.display());
        db.close().unwrap();
    }
}

/// Rewrites the format version in the indexed log's header (`docs/FORMAT.md`, "`indexed.redb`").
fn set_format_version(index: &Path, version: u32) {
    use redb::ReadableTable;
    const META: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("meta");
    let db = redb::Database::open(index).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut meta = txn.open_table(META).unwrap();
        let mut header = meta.get("header").unwrap().unwrap().value().to_vec();
        assert_eq!(&header[..8], b"LZIDXLOG");
        header[8..12].copy_from_slice(&version.to_le_bytes());
        meta.insert("header", header.as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

#[test]
fn silir_acknowledges_only_what_is_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let (db, scheme) = open(options(dir.path(), IndexMode::Sync));
    db.load_module("kv.proc", SOURCE).unwrap();
    let mut w = db.worker();
    for i in 0..30 {
        let out = w.call("put", &[int(i), int(i)]).unwrap();
        let DurabilityTicket::Epoch(e) = out.committed.durability else { panic!("epoch ticket") };
        assert_eq!(
            scheme.is_durable(&out.committed.durability),
            e <= scheme.indexed_epoch() && e <= scheme.sequential().pepoch()
        );
        w.wait_durable(&out.committed.durability).unwrap();
        assert!(scheme.indexed_epoch() >= e, "acknowledged epoch {e}, indexed only {}", scheme.indexed_epoch());
    }
    let before = dump(&db);
    // A crash now: SILIR's acknowledged writes are all in the indexed log, no tail to index.
    let image = dir.path().join("crash");
    {
        let _held = scheme.hold_indexer();
        quiesce(&db, dir.path());
        copy_tree(&dir.path().join("log0"), &image.join("log0"));
        copy_tree(&dir.path().join("log1"), &image.join("log1"));
    }
    db.close().unwrap();
    let (db, scheme) = open(options(&image, IndexMode::Sync));
    scheme.wait_restored();
    assert_eq!(dump(&db), before);
    db.close().unwrap();
}

/// Waits up to `timeout` for `ready`, polling.
fn eventually(timeout: std::time::Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    ready()
}

#[test]
fn the_asynchronous_indexer_waits_for_the_walk_and_catches_up_after_it() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    o.index_interval_ms = 5;
    // The longest deferral, so that a slow machine cannot reach the bound inside the test.
    o.walk_defer_max_ms = 600_000;
    let (db, scheme) = open(o);
    let at_open = scheme.indexed_epoch();
    let mut w = db.worker();
    let mut last = 0;
    for k in 1000..1020 {
        let out = w.call("put", &[int(k), int(k)]).unwrap();
        w.wait_durable(&out.committed.durability).unwrap();
        let DurabilityTicket::Epoch(e) = out.committed.durability else { panic!("epoch ticket") };
        last = e;
    }
    // Durable in the sequential log, and 40 Indexer intervals later still not indexed: the
    // Indexer leaves the CPU to the walk (and the requests) while a restore runs.
    assert!(last > at_open, "the writes' epoch {last} is not after the restart's {at_open}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(scheme.indexed_epoch(), at_open, "the Indexer ran a round during the walk");
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    assert!(
        eventually(std::time::Duration::from_secs(10), || scheme.indexed_epoch() >= last),
        "indexed {} after the walk, want {last}",
        scheme.indexed_epoch()
    );
    db.close().unwrap();
}

#[test]
fn the_indexer_defers_its_rounds_during_the_walk_only_so_long() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.restore_paused = true;
    o.index_interval_ms = 5;
    o.walk_defer_max_ms = 300;
    let (db, scheme) = open(o);
    let mut w = db.worker();
    let out = w.call("put", &[int(1000), int(1)]).unwrap();
    w.wait_durable(&out.committed.durability).unwrap();
    let DurabilityTicket::Epoch(e) = out.committed.durability else { panic!("epoch ticket") };
    // The walk stays paused throughout: the write is indexed once the deferral's bound passes.
    assert!(
        eventually(std::time::Duration::from_secs(3), || scheme.indexed_epoch() >= e),
        "epoch {e} not indexed 3 s into a paused walk"
    );
    assert!(scheme.restore_progress().is_some_and(|p| !p.done), "the walk ended");
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    db.close().unwrap();
    let mut o = options(&root.path().join("other"), IndexMode::Async);
    o.walk_defer_max_ms = 600_001;
    let Err(e) = IndexedLogging::new(o) else { panic!("a deferral of 600,001 ms was accepted") };
    assert!(e.to_string().contains("must be 0..=600000 ms, not 600001"), "{e}");
}

#[test]
fn silir_indexes_and_acknowledges_during_the_walk() {
    let root = tempfile::tempdir().unwrap();
    let (image, _) = crash_image(root.path());
    let mut o = options(&image, IndexMode::Sync);
    o.restore_paused = true;
    let (db, scheme) = open(o);
    assert!(scheme.restore_progress().is_some_and(|p| !p.done), "a restore is running");
    // SILIR acknowledges a commit only once it is indexed, so its Indexer never waits for the
    // walk: a write during a paused walk is acknowledged.
    let acknowledged = {
        let (db, (tx, rx)) = (db.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            let mut w = db.worker();
            let out = w.call("put", &[int(2000), int(1)]).unwrap();
            let _ = tx.send(w.wait_durable(&out.committed.durability).map(|()| out.committed.durability));
        });
        rx.recv_timeout(std::time::Duration::from_secs(20))
    };
    let Ok(Ok(DurabilityTicket::Epoch(e))) = acknowledged else { panic!("no acknowledgement: {acknowledged:?}") };
    assert!(scheme.indexed_epoch() >= e, "acknowledged epoch {e}, indexed only {}", scheme.indexed_epoch());
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    db.close().unwrap();
}

#[test]
fn checkpoints_truncate_the_sequential_log_only_behind_the_indexer() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), IndexMode::Async);
    o.value.rotate_epochs = 1;
    o.value.checkpoint.interval_ms = 50;
    o.index_interval_ms = 5;
    let (db, scheme) = open(o.clone());
    db.load_module("kv.proc", SOURCE).unwrap();
    let mut removed = false;
    for round in 0..300 {
        history(&db, 100, round);
        removed |= scheme.checkpoints().last().is_some_and(|c| c.log_files_removed > 0);
        if removed {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(removed, "no checkpoint removed a log file; last: {:?}", scheme.checkpoints().last());
    let before = dump(&db);
    db.close().unwrap();
    drop(db);
    let mut o = options(dir.path(), IndexMode::Async);
    o.value.checkpoint.interval_ms = 0;
    let (db, scheme) = open(o);
    scheme.wait_restored();
    assert_eq!(dump(&db), before);
    db.close().unwrap();
}

/// Commits puts of keys `from..` one at a time until more than `bound_bytes` of sequential log
/// are durable and unindexed (the Indexer idle: `options` runs it only when asked), checking at
/// each that the acknowledgement is held exactly when the lag is past `bound_bytes` (never, for a
/// scheme without a bound). Returns the ticket of the first commit past it.
fn put_past_the_bound(
    db: &Database,
    scheme: &IndexedLogging,
    from: i64,
    bound_bytes: u64,
    held: bool,
) -> DurabilityTicket {
    let mut w = db.worker();
    for k in from..from + 100_000 {
        let ticket = w.call("put", &[int(k), int(k)]).unwrap().committed.durability;
        scheme.sequential().wait_durable(&ticket).unwrap();
        let lag_bytes = scheme.unindexed_bytes();
        let acknowledged = scheme.is_durable(&ticket);
        if lag_bytes != scheme.unindexed_bytes() {
            continue; // a logger synced in between: no verdict on this one
        }
        assert_eq!(acknowledged, !(held && lag_bytes > bound_bytes), "key {k}, {lag_bytes} bytes unindexed");
        if lag_bytes > bound_bytes {
            return ticket;
        }
    }
    panic!("100,000 puts did not leave {bound_bytes} bytes unindexed");
}

#[test]
fn ailir_acknowledgements_wait_for_an_indexer_past_the_unindexed_bound() {
    const BOUND_BYTES: u64 = 4096;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), IndexMode::Async);
    o.unindexed_max_bytes = BOUND_BYTES;
    let (db, scheme) = open(o);
    db.load_module("kv.proc", SOURCE).unwrap();
    let ticket = put_past_the_bound(&db, &scheme, 0, BOUND_BYTES, true);
    // Its acknowledgement waits for an Indexer round, and comes with it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| tx.send(scheme.wait_durable(&ticket)).unwrap());
        let waited = rx.recv_timeout(std::time::Duration::from_millis(300));
        assert!(waited.is_err(), "acknowledged past the bound without a round: {waited:?}");
        scheme.index_now().unwrap();
        let acknowledged = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert!(matches!(acknowledged, Ok(Ok(()))), "not acknowledged after the round: {acknowledged:?}");
    });
    // The loggers' and the Indexer's counts of file bytes agree: nothing is left once indexed.
    assert!(
        eventually(std::time::Duration::from_secs(10), || {
            scheme.index_now().unwrap();
            scheme.unindexed_bytes() == 0
        }),
        "{} bytes unindexed after a round of a quiet log",
        scheme.unindexed_bytes()
    );
    db.close().unwrap();
    // Without a bound the same lag holds nothing back.
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), IndexMode::Async);
    o.unindexed_max_bytes = 0;
    let (db, scheme) = open(o);
    db.load_module("kv.proc", SOURCE).unwrap();
    let ticket = put_past_the_bound(&db, &scheme, 0, BOUND_BYTES, false);
    assert!(scheme.is_durable(&ticket), "held back with no bound");
    db.close().unwrap();
}

#[test]
fn the_tail_a_restart_reads_and_writes_during_its_walk_count_as_unindexed_but_hold_back_nothing() {
    const BOUND_BYTES: u64 = 4096;
    let root = tempfile::tempdir().unwrap();
    let (image, _) = crash_image(root.path());
    let mut o = options(&image, IndexMode::Async);
    o.unindexed_max_bytes = BOUND_BYTES;
    o.restore_paused = true;
    o.index_interval_ms = 5;
    o.walk_defer_max_ms = 600_000;
    let (db, scheme) = open(o);
    let tail_bytes = scheme.report.lock().tail_bytes;
    assert!(tail_bytes > BOUND_BYTES, "the crash image's tail is only {tail_bytes} bytes");
    let at_open = scheme.unindexed_bytes();
    assert!(at_open >= tail_bytes, "{at_open} bytes unindexed at the open, the tail read was {tail_bytes}");
    let indexed_at_open = scheme.indexed_epoch();
    // The Indexer defers to the held walk, and four bounds' worth of writes are acknowledged
    // meanwhile, each at once.
    let mut w = db.worker();
    for k in 2000.. {
        if scheme.unindexed_bytes() > at_open + 4 * BOUND_BYTES {
            break;
        }
        let ticket = w.call("put", &[int(k), int(k)]).unwrap().committed.durability;
        scheme.sequential().wait_durable(&ticket).unwrap();
        let acknowledged = eventually(std::time::Duration::from_secs(2), || scheme.is_durable(&ticket));
        assert!(acknowledged, "key {k} held back during the walk, {} bytes unindexed", scheme.unindexed_bytes());
    }
    assert_eq!(scheme.indexed_epoch(), indexed_at_open, "the Indexer ran a round during the walk");
    // After the walk the Indexer indexes all of it.
    scheme.set_restore_paused(false);
    scheme.wait_restored();
    assert!(
        eventually(std::time::Duration::from_secs(10), || scheme.unindexed_bytes() == 0),
        "{} bytes unindexed after the walk",
        scheme.unindexed_bytes()
    );
    db.close().unwrap();
}
