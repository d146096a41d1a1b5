//! The Smallbank, YCSB and KV workloads end to end: loader cardinalities, consistency checks after
//! concurrent 2-thread runs (and that a corrupted database fails them), Zipfian skew, and KV
//! versions that only grow.

use lazarus::bench::workload::{Workload, WorkloadError};
use lazarus::bench::{RunOptions, RunResult, run};
use lazarus::storage::Row;
use lazarus::storage::{ParamValue, Value};
use lazarus::workload::kv::{self, Kv};
use lazarus::workload::smallbank::{self, Smallbank};
use lazarus::workload::ycsb::keys::{KeyChooser, zipf_probability};
use lazarus::workload::ycsb::{Variant, Ycsb};
use lazarus::workload::{WorkloadOptions, build};
use lazarus::{Database, DatabaseConfig};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::sync::Arc;
use std::time::Duration;

fn loaded(workload: &Arc<dyn Workload>) -> Database {
    let db = Database::open(DatabaseConfig { epoch_interval_ms: 5, ..DatabaseConfig::default() }).expect("open");
    for (name, source) in workload.sources() {
        db.load_module(&name, &source).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    workload.load(&db, 2).expect("load");
    db
}

fn run_for(db: &Database, workload: &Arc<dyn Workload>, millis: u64, seed: u64) -> RunResult {
    let options = RunOptions {
        threads: 2,
        duration: Duration::from_millis(millis),
        seed,
        window_ms: 100,
        progress: false,
        ..RunOptions::default()
    };
    run(db, workload, &options).expect("run")
}

fn table_len(db: &Database, table: &str) -> usize {
    db.catalog().table_by_name(table).map_or(usize::MAX, |t| t.len())
}

fn committed(result: &RunResult, kind: &str) -> u64 {
    result.per_kind.iter().find(|(k, _)| k == kind).map_or(0, |(_, c)| c.committed)
}

/// Sets column `column` of the row with integer key `key` of `table` to `value`, outside any
/// workload transaction: a deliberate corruption.
fn corrupt(db: &Database, table: &str, key: i64, column: usize, value: Value) {
    let mut w = db.worker();
    w.run(10, |tx| {
        let id = tx.table_id(table)?;
        let mut row = tx.get(id, &[Value::Int(key)])?.expect("row exists").to_vec();
        row[column] = value.clone();
        tx.update(id, Row::new(row))
    })
    .expect("corrupt");
}

fn assert_inconsistent(workload: &Arc<dyn Workload>, db: &Database) {
    match workload.check(db) {
        Err(WorkloadError::Inconsistent(_)) => {}
        other => panic!("the check should fail as inconsistent, got {other:?}"),
    }
}

fn smallbank(accounts: u32, mix: Option<&str>) -> Arc<dyn Workload> {
    let options =
        WorkloadOptions { accounts: Some(accounts), mix: mix.map(String::from), ..WorkloadOptions::default() };
    Arc::new(Smallbank::from_options(&options).expect("options"))
}

#[test]
fn loaders_create_the_expected_rows() {
    let sb = smallbank(1_000, None);
    let db = loaded(&sb);
    for table in ["accounts", "savings", "checking"] {
        assert_eq!(table_len(&db, table), 1_000, "{table}");
    }
    let out = db.worker().call("sb_balance", &[ParamValue::Scalar(Value::text(&smallbank::customer_name(7)))]);
    let total = smallbank::initial_balance(7, false) + smallbank::initial_balance(7, true);
    assert_eq!(out.expect("balance").values, vec![Value::Float(total)]);
    sb.check(&db).expect("fresh smallbank is consistent");

    for (variant, table, other) in [("silor", "ycsb_kv", "ycsb_usertable"), ("taurus", "ycsb_usertable", "ycsb_kv")] {
        let options = WorkloadOptions { variant: Some(variant.into()), records: Some(777), ..Default::default() };
        let w = build("ycsb", &options).expect("build");
        let db = loaded(&w);
        assert_eq!((table_len(&db, table), table_len(&db, other)), (777, 0), "{variant}");
        w.check(&db).expect("fresh ycsb is consistent");
    }

    let kv = Arc::new(Kv::new(1_234, 0.9, None, 32));
    let w: Arc<dyn Workload> = kv.clone();
    let db = loaded(&w);
    let versions = kv::versions(&db).expect("versions");
    assert_eq!(versions.len(), 1_234);
    assert!(versions.iter().all(|(_, v)| *v == 0));
    w.check(&db).expect("fresh kv is consistent");
}

#[test]
fn smallbank_transfers_conserve_money_and_a_corrupted_balance_is_caught() {
    let w = smallbank(500, Some("transfers"));
    let db = loaded(&w);
    let result = run_for(&db, &w, 700, 11);
    assert!(committed(&result, "amalgamate") > 100 && committed(&result, "send-payment") > 100);
    assert_eq!(committed(&result, "balance") + committed(&result, "write-check"), 0, "only transfers ran");
    w.check(&db).expect("transfers conserve money");

    // One unit of money appears from nowhere: rows are intact, but the total is off.
    let sb = Smallbank::from_options(&WorkloadOptions { accounts: Some(500), ..Default::default() }).expect("options");
    let before = sb.totals(&db).expect("totals");
    let mut worker = db.worker();
    let args = [ParamValue::Scalar(Value::text(&smallbank::customer_name(3))), ParamValue::Scalar(Value::Float(1.0))];
    worker.call("sb_deposit_checking", &args).expect("deposit");
    assert_eq!(sb.totals(&db).expect("totals").money(), before.money() + 1.0);
    assert_inconsistent(&w, &db);
}

#[test]
fn smallbank_full_mix_stays_consistent_and_a_nan_balance_is_caught() {
    let w = smallbank(2_000, None);
    let db = loaded(&w);
    let result = run_for(&db, &w, 700, 12);
    for kind in smallbank::TxnKind::ALL {
        assert!(committed(&result, kind.name()) > 0, "{} never committed", kind.name());
    }
    w.check(&db).expect("full mix consistent");
    corrupt(&db, "savings", 17, 1, Value::Float(f64::NAN));
    assert_inconsistent(&w, &db);
}

#[test]
fn smallbank_check_catches_a_missing_row() {
    let w = smallbank(100, Some("transfers"));
    let db = loaded(&w);
    db.worker().run(10, |tx| tx.delete(tx.table_id("checking")?, &[Value::Int(42)])).expect("delete");
    assert_inconsistent(&w, &db);
}

#[test]
fn ycsb_variants_run_concurrently_and_stay_consistent() {
    for (variant, theta) in [(Variant::SiloR, None), (Variant::SiloR, Some(0.99)), (Variant::Taurus, Some(0.9))] {
        let ycsb = Ycsb { variant, records: 5_000, zipf_theta: theta, ..Ycsb::default() };
        let w: Arc<dyn Workload> = Arc::new(ycsb);
        let db = loaded(&w);
        let result = run_for(&db, &w, 500, 13);
        assert!(result.total.committed > 1_000, "{variant:?}: {} committed", result.total.committed);
        assert_eq!(result.total.user_aborts, 0, "{variant:?}");
        if variant == Variant::SiloR {
            let (gets, puts) = (committed(&result, "get") as f64, committed(&result, "put") as f64);
            let reads = gets / (gets + puts);
            assert!((reads - 0.7).abs() < 0.05, "{variant:?}: read fraction {reads}");
        }
        w.check(&db).unwrap_or_else(|e| panic!("{variant:?} {theta:?}: {e}"));
        let (table, column) = if variant == Variant::Taurus { ("ycsb_usertable", 4) } else { ("ycsb_kv", 1) };
        corrupt(&db, table, 1234, column, Value::bytes(&[7; 99]));
        assert_inconsistent(&w, &db);
    }
}

#[test]
fn zipfian_ranks_follow_the_theoretical_frequencies() {
    let (n, theta, draws) = (1_000u64, 0.99, 400_000usize);
    let chooser = KeyChooser::new(n, Some(theta)).expect("chooser");
    let mut rng = SmallRng::seed_from_u64(2024);
    let mut counts = vec![0u64; n as usize];
    for _ in 0..draws {
        counts[chooser.rank(&mut rng) as usize] += 1;
    }
    for rank in [0u64, 1, 9] {
        let expected = zipf_probability(n, theta, rank);
        let observed = counts[rank as usize] as f64 / draws as f64;
        assert!((observed - expected).abs() < 0.03 * expected, "rank {rank}: observed {observed}, expected {expected}");
    }
    // Rank 1 (0-based 0) is about 13 % of draws for n = 1000, theta = 0.99; uniform would be 0.1 %.
    assert!(counts[0] as f64 / draws as f64 > 0.12);
    let top10: u64 = counts[..10].iter().sum();
    let expected10: f64 = (0..10).map(|r| zipf_probability(n, theta, r)).sum();
    assert!((top10 as f64 / draws as f64 - expected10).abs() < 0.02 * expected10);
    // Uniform draws are flat.
    let uniform = KeyChooser::new(n, None).expect("uniform");
    let mut hits = 0u64;
    for _ in 0..draws {
        hits += u64::from(uniform.rank(&mut rng) == 0);
    }
    assert!((hits as f64 / draws as f64 - 1.0 / n as f64).abs() < 0.3 / n as f64);
}

#[test]
fn kv_versions_only_grow_and_count_the_committed_sets() {
    let kv = Arc::new(Kv::new(300, 0.5, Some(0.8), 32));
    let w: Arc<dyn Workload> = kv.clone();
    let db = loaded(&w);
    let mut previous = kv::versions(&db).expect("versions");
    let mut sets = 0;
    for round in 0..2 {
        let result = run_for(&db, &w, 400, 20 + round);
        sets += committed(&result, "set");
        let now = kv::versions(&db).expect("versions");
        assert_eq!(now.len(), previous.len());
        for ((k0, v0), (k1, v1)) in previous.iter().zip(&now) {
            assert_eq!(k0, k1);
            assert!(v1 >= v0, "{k0}: version went from {v0} to {v1}");
        }
        assert_eq!(now.iter().map(|(_, v)| v).sum::<u64>(), sets, "each committed set adds one version");
        let issued = kv.issued_sets();
        for (key, version) in &now {
            let n = kv::key_index(key).expect("key name") as usize;
            assert!(*version <= issued[n], "{key}: version {version} above {} issued", issued[n]);
        }
        w.check(&db).expect("kv consistent");
        previous = now;
    }
    assert!(sets > 100, "{sets} sets");

    // A set outside the workload bumps the version by one, past what the workload issued.
    let key = kv::key_name(5);
    let before = previous.iter().find(|(k, _)| *k == key).map(|(_, v)| *v).expect("key 5");
    let args = [ParamValue::Scalar(Value::text(&key)), ParamValue::Scalar(Value::text("0123456789abcdefghij"))];
    let out = db.worker().call("kv_set", &args).expect("set");
    assert_eq!(out.values, vec![Value::Int(before as i64 + 1)]);
    assert_inconsistent(&w, &db);
}
