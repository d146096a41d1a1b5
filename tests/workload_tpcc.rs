//! TPC-C: loader cardinalities (clause 4.3.3.1), consistency conditions 1–4 (clause 3.3.2) after
//! loading and after concurrent runs of the standard mix, the 50/50 mix and the fixed-size
//! (`no_inserts`) variant, a broken database failing the check, and new-order's 1% rollback.

use lazarus::bench::{RunOptions, Workload, WorkloadError, run};
use lazarus::db::Worker;
use lazarus::storage::{ParamValue, Row, Value};
use lazarus::txn::TxnError;
use lazarus::workload::tpcc::check::count_rows;
use lazarus::workload::tpcc::native::NewOrder;
use lazarus::workload::tpcc::{ITEMS, Kind, TableIds, Tpcc};
use lazarus::{Database, DatabaseConfig};
use std::sync::Arc;
use std::time::Duration;

fn loaded(tpcc: &Tpcc) -> Database {
    let db = Database::open(DatabaseConfig { epoch_interval_ms: 10, ..DatabaseConfig::default() }).unwrap();
    for (name, source) in tpcc.sources() {
        db.load_module(&name, &source).unwrap();
    }
    tpcc.load(&db, 2).unwrap();
    db
}

fn counts(db: &Database, worker: &mut Worker) -> Vec<(&'static str, u64)> {
    let ids = TableIds::of(db).unwrap();
    ids.all().iter().map(|&(name, t)| (name, count_rows(worker, t, &[]).unwrap())).collect()
}

fn get(worker: &mut Worker, table: u32, key: &[Value]) -> Row {
    worker.run(1, |tx| tx.get(table, key)).unwrap().0.unwrap()
}

fn int(v: i64) -> Value {
    Value::Int(v)
}

fn run_for(db: &Database, tpcc: Tpcc, threads: usize, seed: u64) -> lazarus::bench::RunResult {
    let workload: Arc<dyn Workload> = Arc::new(tpcc);
    let options =
        RunOptions { threads, duration: Duration::from_millis(1500), seed, progress: false, ..RunOptions::default() };
    let result = run(db, &workload, &options).unwrap();
    workload.check(db).unwrap();
    result
}

/// One warehouse: exact cardinalities, the check after load, the 1% rollback, and a broken
/// D_YTD failing condition 1 (last, since it breaks the database).
#[test]
fn one_warehouse_loads_to_spec_rolls_back_cleanly_and_a_broken_ytd_fails_the_check() {
    let tpcc = Tpcc::default();
    let db = loaded(&tpcc);
    let mut worker = db.worker();
    let ids = TableIds::of(&db).unwrap();
    let n = counts(&db, &mut worker);
    let lines = n[6].1;
    let expected = [
        ("warehouse", 1),
        ("district", 10),
        ("customer", 30_000),
        ("history", 30_000),
        ("new_order", 9_000),
        ("orders", 30_000),
        ("order_line", lines),
        ("item", 100_000),
        ("stock", 100_000),
    ];
    assert_eq!(n, expected);
    // 5..=15 lines per order, about 10 on average.
    assert!((270_000..=330_000).contains(&lines), "{lines} order lines");
    tpcc.check(&db).unwrap();

    // Customers 1..=1000 of each district carry the 1000 last names in order.
    let c = get(&mut worker, ids.customer, &[int(1), int(4), int(372)]);
    assert_eq!(c.at(5), Value::text("PRICALLYOUGHT"));

    // New-order's rollback: an unused item id (the last line) aborts, and nothing changes.
    let before = counts(&db, &mut worker);
    let district = get(&mut worker, ids.district, &[int(1), int(3)]);
    let stock = get(&mut worker, ids.stock, &[int(1), int(77)]);
    let args = NewOrder {
        w: 1,
        d: 3,
        c: 42,
        items: vec![77, 78, ITEMS + 1],
        supply: vec![1, 1, 1],
        quantities: vec![5, 5, 5],
        entry_d: 1,
    };
    let err = worker.call("new_order", &args.params(true)).unwrap_err();
    assert!(matches!(err, TxnError::UserAbort(ref m) if m.contains("not valid")), "{err}");
    assert_eq!(counts(&db, &mut worker), before);
    assert_eq!(get(&mut worker, ids.district, &[int(1), int(3)]), district);
    assert_eq!(get(&mut worker, ids.stock, &[int(1), int(77)]), stock);
    // The same order with valid items commits and takes the district's next order id.
    let ok = NewOrder { items: vec![77, 78, 79], ..args };
    let out = worker.call("new_order", &ok.params(true)).unwrap();
    assert_eq!(out.values[0], district.at(10).to_value());
    tpcc.check(&db).unwrap();

    // About 1% of generated new-orders carry the unused item.
    let mut generator = tpcc.generator_for(&db, 0, 5);
    let rollbacks = (0..20_000).filter(|_| generator.new_order().items.contains(&(ITEMS + 1))).count();
    assert!((100..=300).contains(&rollbacks), "{rollbacks} rollbacks in 20000");

    // Break condition 1: D_YTD of district 7 no longer adds up to W_YTD.
    worker
        .run(1, |tx| {
            let mut row = tx.get(ids.district, &[int(1), int(7)])?.unwrap().to_vec();
            row[9] = int(row[9].as_int().unwrap() + 1);
            tx.update(ids.district, row.into())
        })
        .unwrap();
    match tpcc.check(&db) {
        Err(WorkloadError::Inconsistent(m)) => {
            assert!(m.contains("condition 1") && m.contains("warehouse 1"), "{m}")
        }
        other => panic!("expected condition 1 to fail, got {other:?}"),
    }
}

/// Two warehouses, two threads: the standard mix, then Taurus's 50/50 mix, then PACMAN's fixed
/// size, each followed by the check; the fixed-size run changes no table's cardinality.
#[test]
fn concurrent_runs_of_every_variant_stay_consistent() {
    let tpcc = Tpcc::new(2, None, false).unwrap();
    let db = loaded(&tpcc);
    tpcc.check(&db).unwrap();

    let full = run_for(&db, tpcc.clone(), 2, 1);
    for (name, counts) in &full.per_kind {
        assert!(counts.committed > 0, "{name} never committed");
    }
    let new_order = &full.per_kind[Kind::NewOrder as usize].1;
    assert!(full.total.committed > 100, "{} committed", full.total.committed);
    let share = new_order.committed as f64 / full.total.committed as f64;
    assert!((0.35..0.55).contains(&share), "new-order share {share}");

    let half = run_for(&db, Tpcc::new(2, Some("new-order,payment"), false).unwrap(), 2, 2);
    for kind in [Kind::OrderStatus, Kind::Delivery, Kind::StockLevel] {
        assert_eq!(half.per_kind[kind as usize].1.committed, 0, "{kind:?} ran in the 50/50 mix");
    }
    let no = half.per_kind[Kind::NewOrder as usize].1.committed as f64;
    let pay = half.per_kind[Kind::Payment as usize].1.committed as f64;
    assert!((0.8..1.25).contains(&(no / pay)), "new-order/payment {no}/{pay}");

    let mut worker = db.worker();
    let before = counts(&db, &mut worker);
    let fixed = run_for(&db, Tpcc::new(2, None, true).unwrap(), 2, 3);
    assert!(fixed.per_kind[Kind::Delivery as usize].1.committed > 0);
    assert!(fixed.per_kind[Kind::NewOrder as usize].1.committed > 0);
    assert_eq!(counts(&db, &mut worker), before, "the fixed-size variant changed a table's size");
}

#[test]
fn bad_options_are_refused() {
    assert!(matches!(Tpcc::new(0, None, false), Err(WorkloadError::Options(_))));
    assert!(matches!(Tpcc::new(1, Some("new-order,checkout"), false), Err(WorkloadError::Options(_))));
    assert!(matches!(Tpcc::new(1, Some("payment:x"), false), Err(WorkloadError::Options(_))));
    let mix = Tpcc::new(1, Some("new_order:3, payment"), false).unwrap().mix;
    assert_eq!(mix, [3, 1, 0, 0, 0]);
}

/// Payment and order-status by last name take the customer at position ceil(n / 2) of the n
/// customers of that name in the district, sorted by first name (clauses 2.5.2.2 and 2.6.2.2),
/// for odd and even n. The expected customer comes from a scan of the name index here.
#[test]
fn payment_and_order_status_by_last_name_take_the_middle_customer_by_first_name() {
    use lazarus::storage::{Direction, KeyRange};
    use lazarus::txn::Scan;
    use std::ops::Bound;
    let tpcc = Tpcc::default();
    let db = loaded(&tpcc);
    let mut worker = db.worker();
    let ids = TableIds::of(&db).unwrap();
    // Customer ids of (warehouse 1, district 2, `last`) in name-index order (last, first).
    let mut matches = |last: &Value| -> Vec<i64> {
        let prefix = [int(1), int(2), last.clone()];
        let range = KeyRange::from_values(&prefix, Bound::Unbounded, Bound::Unbounded).unwrap();
        let scan = Scan { table: ids.customer, index: Some(0), range, direction: Direction::Forward, limit: 1000 };
        let rows = worker.run(1, |tx| tx.scan(&scan)).unwrap().0;
        rows.iter().map(|r| r.at(2).as_int().unwrap()).collect()
    };
    // Names of customers 1..=1000 are the 1000 names in order; later customers repeat them.
    let mut odd = None;
    let mut even = None;
    for c in 1..=1000 {
        let last = get(&mut db.worker(), ids.customer, &[int(1), int(2), int(c)]).at(5).to_value();
        let found = matches(&last);
        match found.len() {
            n if n >= 3 && n % 2 == 1 && odd.is_none() => odd = Some((last, found)),
            n if n >= 2 && n % 2 == 0 && even.is_none() => even = Some((last, found)),
            _ => {}
        }
        if odd.is_some() && even.is_some() {
            break;
        }
    }
    for (last, found) in [odd.expect("a name with an odd count"), even.expect("a name with an even count")] {
        let middle = found[found.len().div_ceil(2) - 1];
        let name = ParamValue::Scalar(last.clone());
        let (i, null) = (|v| ParamValue::Scalar(int(v)), ParamValue::Scalar(Value::Null));
        let payment =
            [i(1), i(2), i(1), i(2), null.clone(), name.clone(), i(100), i(1), ParamValue::Scalar(Value::Bool(true))];
        let paid = db.worker().call("payment", &payment).unwrap().values;
        assert_eq!(paid[0], int(middle), "payment by {last}: matches {found:?}");
        let status = db.worker().call("order_status", &[i(1), i(2), null, name]).unwrap().values;
        assert_eq!(status[0], int(middle), "order-status by {last}: matches {found:?}");
    }
    tpcc.check(&db).unwrap();
}
