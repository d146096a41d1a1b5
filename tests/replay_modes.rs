//! Direct and compiled log replay (`lazarus::replay`) give identical tables and secondary
//! indexes; the compiled-plan cache follows the catalog's version; replay errors name the file and
//! offset of the record.

use lazarus::durability::value::files::{self, CATALOG_FILE};
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::durability::{DurabilityError, LogScheme};
use lazarus::replay::cache::{ColumnSet, PlanCache};
use lazarus::replay::{RedoOp, ReplayMode};
use lazarus::storage::Row;
use lazarus::storage::{Column, ColumnType, Direction, IndexSchema, KeyRange, TableSchema, Value};
use lazarus::{Database, DatabaseConfig};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn options(dir: &Path, mode: ReplayMode) -> ValueOptions {
    let mut o = ValueOptions::new(vec![dir.join("log0"), dir.join("log1")]);
    o.rotate_epochs = 2; // several files, replayed by several threads
    o.recovery_threads = 2;
    o.checkpoint.interval_ms = 0; // everything comes from the log
    o.replay_mode = mode;
    o
}

fn open(dir: &Path, mode: ReplayMode) -> Result<(Database, Arc<ValueLogging>), lazarus::db::DbError> {
    let scheme = Arc::new(ValueLogging::new(options(dir, mode))?);
    let db = Database::open(DatabaseConfig {
        epoch_interval_ms: 2,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..DatabaseConfig::default()
    })?;
    Ok((db, scheme))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// A random table: 1–50 columns (the first one or two form the primary key, ints), 0–10
/// secondary indexes of one or two columns. One table in four has only non-null int and float
/// columns, whose rows compiled plans bind and build by a fixed shape
/// (`lazarus::storage::FixedShape`); the others mix in text, bytes and nulls.
fn schema_strategy() -> impl Strategy<Value = TableSchema> {
    let types = proptest::collection::vec((0u8..4, any::<bool>()), 50);
    (1usize..=50, 1usize..=2, types, 0usize..=10, 0u8..4)
        .prop_flat_map(|(columns, key_len, types, indexes, shape)| {
            let key_len = key_len.min(columns);
            let index_cols = proptest::collection::vec(proptest::collection::vec(0..columns, 1..=2), indexes);
            (Just((columns, key_len, types, shape == 0)), index_cols)
        })
        .prop_map(|((count, key_len, types, fixed), index_cols)| {
            let columns = (0..count)
                .map(|i| {
                    let (ty, nullable) = types[i];
                    let (ty, nullable) = if fixed { (ty % 2, false) } else { (ty, nullable) };
                    let ty = match ty {
                        _ if i < key_len => ColumnType::Int,
                        0 => ColumnType::Int,
                        1 => ColumnType::Float,
                        2 => ColumnType::Text,
                        _ => ColumnType::Bytes,
                    };
                    Column { name: format!("c{i}"), ty, nullable: nullable && i >= key_len }
                })
                .collect();
            let indexes = index_cols
                .into_iter()
                .enumerate()
                .map(|(i, mut cols)| {
                    cols.dedup();
                    IndexSchema { name: format!("i{i}"), columns: cols }
                })
                .collect();
            TableSchema { name: "t".into(), columns, primary_key: (0..key_len).collect(), indexes }
        })
}

/// One write of a history: a put (insert or update) of a row built from `seed`, or a delete.
#[derive(Clone, Debug)]
struct Op {
    delete: bool,
    key: i64,
    seed: u64,
}

fn history_strategy() -> impl Strategy<Value = Vec<Vec<Op>>> {
    let op = (0u8..4, 0i64..16, any::<u64>()).prop_map(|(kind, key, seed)| Op { delete: kind == 0, key, seed });
    proptest::collection::vec(proptest::collection::vec(op, 1..=5), 1..40)
}

fn row_of(schema: &TableSchema, op: &Op) -> Vec<Value> {
    let mut x = op.seed;
    let mut next = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 33
    };
    let key_len = schema.primary_key.len();
    schema
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let r = next();
            match c.ty {
                _ if i < key_len => Value::Int(op.key * (i as i64 + 1)),
                _ if c.nullable && r % 5 == 0 => Value::Null,
                ColumnType::Int => Value::Int(r as i64 % 7),
                ColumnType::Float => Value::Float((r % 5) as f64 / 4.0),
                ColumnType::Text => Value::text(&format!("v{}", r % 6)),
                _ => Value::Bytes(Arc::from(vec![(r % 3) as u8; (r % 4) as usize])),
            }
        })
        .collect()
}

/// The table's rows (key, row, TID) and each secondary index's entries (entry key, row), in
/// index order.
type State = (Vec<(Vec<u8>, Vec<Value>, u64)>, Vec<Vec<(Vec<u8>, Vec<Value>)>>);

fn state(db: &Database) -> State {
    let catalog = db.catalog();
    let t = catalog.table_by_name("t").expect("table t");
    let mut rows = Vec::new();
    t.primary.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, r| {
        rows.push((k.to_vec(), r.row_unchecked().to_vec(), r.word().tid().to_u64()));
        true
    });
    let indexes = t
        .secondary
        .iter()
        .map(|index| {
            let mut entries = Vec::new();
            index.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, r| {
                entries.push((k.to_vec(), r.row_unchecked().to_vec()));
                true
            });
            entries
        })
        .collect();
    (rows, indexes)
}

/// Runs `history` against a fresh database in `dir`; returns the state after it.
fn run_history(dir: &Path, schema: &TableSchema, history: &[Vec<Op>]) -> State {
    let (db, _) = open(dir, ReplayMode::Direct).expect("open");
    let table = db.create_table(schema.clone()).expect("create table");
    let mut worker = db.worker();
    let mut last = None;
    for txn in history {
        let ((), committed) = worker
            .run(3, |tx| {
                for op in txn {
                    if op.delete {
                        let key: Vec<Value> =
                            (0..schema.primary_key.len()).map(|i| Value::Int(op.key * (i as i64 + 1))).collect();
                        tx.delete(table, &key)?;
                    } else {
                        tx.put(table, Row::new(row_of(schema, op)))?;
                    }
                }
                Ok(())
            })
            .expect("transaction");
        last = Some(committed.durability);
    }
    // Epochs only grow on one worker: the last transaction durable makes them all durable.
    if let Some(ticket) = last {
        worker.wait_durable(&ticket).expect("durable");
    }
    let before = state(&db);
    db.close().expect("close");
    before
}

/// Recovers a copy of `dir` in `mode`; returns the state, the plans compiled and the log entries
/// replayed (none when every operation deleted a missing key: nothing was logged).
fn recover_copy(dir: &Path, copy: PathBuf, mode: ReplayMode) -> (State, u64, u64) {
    copy_dir(dir, &copy);
    let (db, scheme) = open(&copy, mode).expect("recover");
    let report = scheme.recovery.lock().clone().expect("recovery report");
    assert_eq!(report.replay_mode, mode);
    let recovered = state(&db);
    db.close().expect("close");
    (recovered, report.replay_plans_compiled, report.entries)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn direct_and_compiled_replay_agree(schema in schema_strategy(), history in history_strategy()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let origin = dir.path().join("origin");
        let before = run_history(&origin, &schema, &history);
        let (direct, direct_plans, _) = recover_copy(&origin, dir.path().join("direct"), ReplayMode::Direct);
        let (compiled, compiled_plans, entries) =
            recover_copy(&origin, dir.path().join("compiled"), ReplayMode::Compiled);
        prop_assert_eq!(direct_plans, 0);
        prop_assert!(compiled_plans >= 1 || entries == 0, "compiled replay compiled no plan for {} entries", entries);
        prop_assert_eq!(&direct, &compiled, "direct and compiled replay differ");
        // Both equal the state before the crash (rows, TIDs and index entries).
        prop_assert_eq!(&direct, &before);
    }
}

fn kv_schema(name: &str) -> TableSchema {
    TableSchema {
        name: name.into(),
        columns: vec![
            Column { name: "k".into(), ty: ColumnType::Int, nullable: false },
            Column { name: "v".into(), ty: ColumnType::Int, nullable: true },
            Column { name: "w".into(), ty: ColumnType::Text, nullable: true },
        ],
        primary_key: vec![0],
        indexes: vec![IndexSchema { name: format!("{name}_by_v"), columns: vec![1] }],
    }
}

#[test]
fn plan_cache_follows_catalog_version() {
    let db = Database::open(DatabaseConfig::default()).expect("open");
    db.create_table(kv_schema("t")).expect("create t");
    let catalog = db.catalog();
    let t = Arc::clone(catalog.table_by_name("t").expect("t"));
    let mut cache = PlanCache::default();
    let insert = cache.plan(&catalog, &t, RedoOp::Insert, ColumnSet::all(3)).expect("insert plan");
    assert!(insert.plan.text().contains("insert into t (k, v, w) values"), "{}", insert.plan.text());
    let update = cache.plan(&catalog, &t, RedoOp::Update, ColumnSet::non_key(&t.schema)).expect("update plan");
    assert!(update.plan.text().contains("update t set v = "), "{}", update.plan.text());
    let delete = cache.plan(&catalog, &t, RedoOp::Delete, ColumnSet::empty()).expect("delete plan");
    assert!(delete.plan.text().contains("delete from t where k = "), "{}", delete.plan.text());
    assert_eq!((cache.compiled(), cache.len(), cache.invalidations()), (3, 3, 0));
    // Hits compile nothing.
    cache.plan(&catalog, &t, RedoOp::Insert, ColumnSet::all(3)).expect("cached");
    cache.plan(&catalog, &t, RedoOp::Delete, ColumnSet::empty()).expect("cached");
    assert_eq!((cache.compiled(), cache.len()), (3, 3));
    // A different column set is a different plan.
    let mut some = ColumnSet::empty();
    some.insert(0);
    some.insert(2);
    cache.plan(&catalog, &t, RedoOp::Insert, some).expect("partial insert");
    assert_eq!((cache.compiled(), cache.len()), (4, 4));

    // A new table changes the catalog: every plan is dropped and recompiled on demand.
    db.create_table(kv_schema("u")).expect("create u");
    let after_table = db.catalog();
    assert_ne!(after_table.version(), catalog.version());
    let t2 = Arc::clone(after_table.table_by_name("t").expect("t"));
    cache.plan(&after_table, &t2, RedoOp::Insert, ColumnSet::all(3)).expect("recompiled");
    assert_eq!((cache.compiled(), cache.len(), cache.invalidations()), (5, 1, 1));

    // So does a module that declares a table.
    db.load_module(
        "more.proc",
        "table x (a int not null, primary key (a));\nprocedure touch(a int) { insert into x values (a); }",
    )
    .expect("module");
    let after_module = db.catalog();
    assert_ne!(after_module.version(), after_table.version());
    let t3 = Arc::clone(after_module.table_by_name("t").expect("t"));
    cache.plan(&after_module, &t3, RedoOp::Insert, ColumnSet::all(3)).expect("recompiled");
    assert_eq!((cache.compiled(), cache.len(), cache.invalidations()), (6, 1, 2));
}

/// Writes a few rows of `t` (k, v, w) to a value log in `dir` and closes the database.
fn write_kv_log(dir: &Path) {
    let (db, _) = open(dir, ReplayMode::Direct).expect("open");
    let table = db.create_table(kv_schema("t")).expect("create");
    let mut worker = db.worker();
    for k in 0..20 {
        let ((), committed) = worker
            .run(3, |tx| tx.put(table, Row::new(vec![Value::Int(k), Value::Int(k % 3), Value::text("w")])))
            .expect("put");
        worker.wait_durable(&committed.durability).expect("durable");
    }
    db.close().expect("close");
}

/// Recovery of `dir` in `mode` fails with `Corrupt` naming a log file and an offset inside it;
/// returns the reason.
fn corrupt_reason(dir: &Path, mode: ReplayMode) -> String {
    let error = match open(dir, mode) {
        Ok(_) => panic!("{mode} recovery succeeded"),
        Err(lazarus::db::DbError::Durability(e)) => e,
        Err(e) => panic!("unexpected error {e}"),
    };
    let DurabilityError::Corrupt { file, offset, reason } = error else { panic!("not Corrupt: {error}") };
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    assert!(name == "data.log" || name.starts_with("old_data"), "names a log file: {}", file.display());
    let len = std::fs::metadata(&file).expect("log file").len();
    assert!(offset > 0 && offset < len, "offset {offset} inside the file of {len} bytes");
    reason
}

#[test]
fn record_for_missing_table_names_file_and_offset() {
    for mode in [ReplayMode::Direct, ReplayMode::Compiled] {
        let dir = tempfile::tempdir().expect("tempdir");
        write_kv_log(dir.path());
        // Without the catalog file, recovery knows no table: the log's records name table id 0.
        std::fs::remove_file(dir.path().join("log0").join(CATALOG_FILE)).expect("remove catalog");
        let reason = corrupt_reason(dir.path(), mode);
        assert!(reason.contains("table id 0 which does not exist"), "{mode}: {reason}");
    }
}

#[test]
fn row_that_does_not_fit_names_file_and_offset() {
    // The same table with `v` now text (the logged ints do not fit), or with a fourth column (the
    // logged rows have three). Compiled replay checks each value as it binds it, direct replay
    // the decoded row: both report the same record with the same words.
    let misfits = [
        ("table t (k int not null, v text, w text, primary key (k));", vec!["column v is text", "got int"]),
        ("table t (k int not null, v int, w text, x int, primary key (k));", vec!["row has 3 values", "4 columns"]),
        // Tables of non-null ints and floats alone, whose compiled plans bind a logged row by
        // their fixed shape: a row not of that shape falls back to the typed binding, which
        // names the misfit.
        ("table t (k int not null, v int not null, w float not null, primary key (k));", vec!["column w", "got text"]),
        ("table t (k int not null, v float not null, w int not null, primary key (k));", vec!["column v", "got int"]),
        ("table t (k int not null, v int not null, primary key (k));", vec!["row has 3 values", "2 columns"]),
    ];
    for (module, words) in misfits {
        let reasons = [ReplayMode::Direct, ReplayMode::Compiled].map(|mode| {
            let dir = tempfile::tempdir().expect("tempdir");
            write_kv_log(dir.path());
            let bytes = files::encode_catalog(&[("t.proc".to_string(), module.to_string())]);
            std::fs::write(dir.path().join("log0").join(CATALOG_FILE), bytes).expect("write catalog");
            corrupt_reason(dir.path(), mode)
        });
        for word in words {
            assert!(reasons[0].contains(word), "{module}: {:?} lacks {word:?}", reasons[0]);
        }
        assert_eq!(reasons[0], reasons[1], "{module}: direct and compiled replay report the same error");
    }
}

/// A column patch of `v` (serial and Taurus data logs), decoded as recovery decodes it.
fn v_patch(v: i64) -> lazarus::durability::codec::ColumnPatch {
    v_patch_of(Value::Int(v))
}

/// A column patch of `v` with the value `value` (any type), decoded as recovery decodes it.
fn v_patch_of(value: Value) -> lazarus::durability::codec::ColumnPatch {
    use lazarus::durability::codec::{Image, Reader, RedoImage, encode_entry};
    let before = lazarus::storage::Row::new(vec![Value::Int(1), Value::Int(10), Value::text("x")]);
    let after = lazarus::storage::Row::new(vec![Value::Int(1), value, Value::text("x")]);
    let mut out = Vec::new();
    let image = RedoImage::Patch { before: &before, after: &after };
    encode_entry(lazarus::txn::Tid::new(1, 1), std::iter::once((0u32, &b"k"[..], image)), &mut out);
    match Reader::new(&out).entry().expect("decodes").writes.into_iter().next().map(|w| w.image) {
        Some(Image::Patch(patch)) => patch,
        other => panic!("not a patch: {other:?}"),
    }
}

/// A database with table `t` (`kv_schema`) holding row `(1, 10, "x")` at TID 2.1: its catalog,
/// the table and the row's key.
fn table_with_row_1() -> (Database, Arc<lazarus::storage::Catalog>, Arc<lazarus::storage::Table>, lazarus::storage::Key)
{
    let db = Database::open(DatabaseConfig::default()).expect("open");
    db.create_table(kv_schema("t")).expect("create t");
    let catalog = db.catalog();
    let t = Arc::clone(catalog.table_by_name("t").expect("t"));
    let key = t.schema.encode_primary_key(&[Value::Int(1)]).expect("key");
    let row = Row::new(vec![Value::Int(1), Value::Int(10), Value::text("x")]);
    assert!(t.install_if_newer(&key, Some(row), lazarus::txn::Tid::new(2, 1)));
    (db, catalog, t, key)
}

/// Both modes apply a column patch to the row where it lies when the record holds it alone (as
/// direct replay always did; compiled replay's update plan edits in place through
/// `Storage::update_row_in_place`), to a copy when something else holds it, and refuse a patch
/// whose value does not fit its column before touching the row.
#[test]
fn a_column_patch_edits_an_unshared_row_in_place_and_a_misfit_changes_nothing() {
    use lazarus::txn::Tid;
    for mode in [ReplayMode::Direct, ReplayMode::Compiled] {
        let (_db, catalog, t, key) = table_with_row_1();
        let address = || t.get(key.as_bytes()).expect("record").stable_read().1.as_ptr() as usize;
        let current = || t.get(key.as_bytes()).expect("record").stable_read();
        let mut replayer = lazarus::replay::Replayer::new(mode);
        let before = address();
        assert!(replayer.apply_patch(&catalog, &t, &key, Tid::new(2, 2), v_patch_of(Value::Int(20))).expect("applies"));
        assert_eq!(address(), before, "{mode}: an unshared row is edited where it lies");
        let held = current().1;
        assert!(replayer.apply_patch(&catalog, &t, &key, Tid::new(2, 3), v_patch_of(Value::Int(30))).expect("applies"));
        assert_eq!(held.at(1), Value::Int(20), "{mode}: a row someone holds is not changed under them");
        assert_ne!(address(), held.as_ptr() as usize, "{mode}: a held row is replaced by an edited copy");
        let misfit = replayer.apply_patch(&catalog, &t, &key, Tid::new(2, 4), v_patch_of(Value::text("no")));
        let err = misfit.expect_err("a text value in an int column");
        assert!(err.to_string().contains("int"), "{mode}: {err}");
        let (word, now) = current();
        assert_eq!((word.tid(), now.to_vec()), (Tid::new(2, 3), vec![Value::Int(1), Value::Int(30), Value::text("x")]));
    }
}

/// Issue 8 for the stream schemes' column patches: compiled replay runs them through a cached
/// `update t set <columns> where <key>` plan, with the same result as direct replay; an older
/// patch is skipped and a patch of a key without a row is an error, in both modes.
#[test]
fn a_column_patch_replays_through_a_cached_update_plan_as_directly() {
    use lazarus::txn::Tid;
    for mode in [ReplayMode::Direct, ReplayMode::Compiled] {
        let (_db, catalog, t, key) = table_with_row_1();
        let mut replayer = lazarus::replay::Replayer::new(mode);
        assert!(replayer.apply_patch(&catalog, &t, &key, Tid::new(2, 2), v_patch(20)).expect("applies"));
        assert!(!replayer.apply_patch(&catalog, &t, &key, Tid::new(2, 1), v_patch(30)).expect("older: skipped"));
        let (word, now) = t.get(key.as_bytes()).expect("record").stable_read();
        assert_eq!((word.tid(), now.to_vec()), (Tid::new(2, 2), vec![Value::Int(1), Value::Int(20), Value::text("x")]));
        let missing = t.schema.encode_primary_key(&[Value::Int(2)]).expect("key");
        let err = replayer.apply_patch(&catalog, &t, &missing, Tid::new(3, 1), v_patch(40)).expect_err("no row");
        assert!(err.to_string().contains("holds no row"), "{mode}: {err}");
        if mode == ReplayMode::Compiled {
            let mut v = ColumnSet::empty();
            v.insert(1);
            let cached = replayer.cache().compiled();
            assert_eq!(cached, 1, "one plan, compiled once for both patches");
            let mut cache = PlanCache::default();
            let plan = cache.plan(&catalog, &t, RedoOp::Patch, v).expect("patch plan");
            assert!(plan.plan.text().contains("update t set v = ") && plan.plan.text().contains("where k = "));
        }
    }
}
