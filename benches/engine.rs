//! Engine micro-benchmarks: one-thread latency of a point-get transaction, an update transaction
//! (get + update, and `update_with` in one lookup), and scans through the primary key and a
//! secondary index, through the ad-hoc API and through a compiled stored procedure.
//!
//! Run: `cargo bench --bench engine`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lazarus::storage::{Direction, KeyRange, ParamValue, Row, Value};
use lazarus::txn::Scan;
use lazarus::{Database, DatabaseConfig};
use std::hint::black_box;
use std::ops::Bound;
use std::time::Duration;

const ROWS: i64 = 100_000;
const BRANCHES: i64 = 16;

const SOURCE: &str = "
table account (id int not null, branch int not null, balance int not null, primary key (id));
index account_by_branch on account (branch);
procedure get_balance(id int) {
    select balance into b from account where id = id;
    return b;
}
procedure add(id int, amount int) {
    update account set balance = balance + amount where id = id;
}
procedure scan_branch(branch int, n int) {
    let total = 0;
    for a in select balance from account index account_by_branch where branch = branch limit 100 {
        total = total + a.balance;
    }
    return total;
}
";

fn setup() -> (Database, u32) {
    let db = Database::open(DatabaseConfig::default()).expect("open");
    db.load_module("bench.proc", SOURCE).expect("load");
    let t = db.catalog().table_by_name("account").expect("table").id;
    let mut w = db.worker();
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(1000) {
        w.run(1, |tx| {
            for &id in chunk {
                tx.insert(t, Row::new(vec![Value::Int(id), Value::Int(id % BRANCHES), Value::Int(100)]))?;
            }
            Ok(())
        })
        .expect("load");
    }
    (db, t)
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

fn bench_engine(c: &mut Criterion) {
    let (db, t) = setup();
    let mut w = db.worker();
    let mut g = c.benchmark_group("engine");
    g.sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    let mut id = 0i64;
    let mut next = move || {
        id = (id + 7919) % ROWS;
        id
    };
    g.bench_function("point_get/adhoc", |b| {
        b.iter(|| {
            let k = next();
            black_box(w.run(1, |tx| tx.get(t, &[Value::Int(k)])).expect("get"));
        })
    });
    g.bench_function("point_get/procedure", |b| {
        b.iter(|| black_box(w.call("get_balance", &[int(next())]).expect("call")))
    });
    g.bench_function("update/adhoc", |b| {
        b.iter(|| {
            let k = next();
            w.run(1, |tx| {
                let row = tx.get(t, &[Value::Int(k)])?.expect("row");
                let mut new = row.to_vec();
                new[2] = Value::Int(new[2].as_int().unwrap_or(0) + 1);
                tx.update(t, Row::new(new))
            })
            .expect("update");
        })
    });
    // The same read-modify-write in one lookup (what the procedures' `update` compiles to).
    g.bench_function("update_with/adhoc", |b| {
        b.iter(|| {
            let k = next();
            w.run(1, |tx| {
                tx.update_with(t, &[Value::Int(k)], |row| {
                    let mut new = row.to_vec();
                    new[2] = Value::Int(new[2].as_int().unwrap_or(0) + 1);
                    Ok(Row::new(new))
                })
            })
            .expect("update");
        })
    });
    g.bench_function("update/procedure", |b| b.iter(|| w.call("add", &[int(next()), int(1)]).expect("call")));
    for limit in [10usize, 100] {
        g.bench_with_input(BenchmarkId::new("scan_primary/adhoc", limit), &limit, |b, &limit| {
            b.iter(|| {
                let k = next();
                let range =
                    KeyRange::from_values(&[], Bound::Included(&Value::Int(k)), Bound::Unbounded).expect("range");
                let scan = Scan { table: t, index: None, range, direction: Direction::Forward, limit };
                black_box(w.run(1, |tx| tx.scan(&scan)).expect("scan"));
            })
        });
        g.bench_with_input(BenchmarkId::new("scan_secondary/adhoc", limit), &limit, |b, &limit| {
            b.iter(|| {
                let branch = next() % BRANCHES;
                let range =
                    KeyRange::from_values(&[Value::Int(branch)], Bound::Unbounded, Bound::Unbounded).expect("range");
                let scan = Scan { table: t, index: Some(0), range, direction: Direction::Forward, limit };
                black_box(w.run(1, |tx| tx.scan(&scan)).expect("scan"));
            })
        });
    }
    g.bench_function("scan_secondary/procedure/100", |b| {
        b.iter(|| black_box(w.call("scan_branch", &[int(next() % BRANCHES), int(100)]).expect("call")))
    });
    g.finish();
    db.close().expect("close");
}

criterion_group! {
    name = benches;
    // Criterion's plots need a system font, which a bare machine lacks.
    config = Criterion::default().without_plots();
    targets = bench_engine
}
criterion_main!(benches);
