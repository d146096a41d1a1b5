//! TPC-C new-order and payment, one thread, one warehouse: the compiled procedures of
//! `workloads/tpcc.proc` side by side with the same transactions written in Rust against the
//! ad-hoc `Transaction` API (`lazarus::workload::tpcc::native`). After the criterion groups it
//! prints the procedure/Rust time ratio from interleaved rounds (median of 11, the order of the two
//! routes alternating).
//!
//! Run: `cargo bench --bench tpcc`

use criterion::{Criterion, criterion_group, criterion_main};
use lazarus::bench::Workload;
use lazarus::db::Worker;
use lazarus::storage::{ParamValue, Value};
use lazarus::workload::tpcc::native::{self, NewOrder, Payment};
use lazarus::workload::tpcc::{TableIds, Tpcc};
use lazarus::{Database, DatabaseConfig};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// The allocator of the `lazarus` binary, tuned as it tunes it (`lazarus::allocator`), so that
/// both routes pay the allocation costs the product has (glibc's malloc made the procedure
/// route's extra allocations look dearer than they are).
#[global_allocator]
static GLOBAL: lazarus::allocator::Mimalloc = lazarus::allocator::Mimalloc;

/// Pre-generated argument sets per transaction kind (cycled through).
const POOL: usize = 4_096;

struct Setup {
    db: Database,
    ids: TableIds,
    new_orders: Vec<NewOrder>,
    payments: Vec<Payment>,
}

fn setup() -> Setup {
    // SAFETY: called first by the bench function, before the database (or anything else here)
    // starts a thread.
    unsafe { lazarus::allocator::keep_freed_memory() };
    let db = Database::open(DatabaseConfig::default()).expect("open");
    let tpcc = Tpcc::default();
    for (name, source) in tpcc.sources() {
        db.load_module(&name, &source).expect("load module");
    }
    tpcc.load(&db, 2).expect("load");
    let mut generator = tpcc.generator_for(&db, 0, 42);
    let new_orders = (0..POOL).map(|_| generator.new_order()).collect();
    let payments = (0..POOL).map(|_| generator.payment()).collect();
    Setup { ids: TableIds::of(&db).expect("tables"), db, new_orders, payments }
}

/// One transaction by one of the two routes. User aborts (new-order's 1% invalid items) count as
/// done; conflicts cannot happen on one thread.
fn procedure(worker: &mut Worker, db: &Database, id: u32, args: &[ParamValue]) {
    let registry = db.procedures();
    let _ = worker.call_id(&registry, id, args);
}

fn rust_new_order(worker: &mut Worker, ids: &TableIds, a: &NewOrder) {
    let _ = worker.run(1, |tx| native::new_order(tx, ids, a));
}

/// History's key includes h_date, so a replayed payment needs a fresh one.
fn fresh_date() -> i64 {
    static NEXT: AtomicI64 = AtomicI64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn proc_payment(worker: &mut Worker, db: &Database, id: u32, args: &mut [ParamValue]) {
    args[7] = ParamValue::Scalar(Value::Int(fresh_date()));
    procedure(worker, db, id, args);
}

fn rust_payment(worker: &mut Worker, ids: &TableIds, a: &mut Payment) {
    a.h_date = fresh_date();
    let _ = worker.run(1, |tx| native::payment(tx, ids, a));
}

fn bench_tpcc(c: &mut Criterion) {
    let mut s = setup();
    let mut worker = s.db.worker();
    let registry = s.db.procedures();
    let (no_id, pay_id) = (registry.id_of("new_order").expect("proc"), registry.id_of("payment").expect("proc"));
    let no_args: Vec<Vec<ParamValue>> = s.new_orders.iter().map(|a| a.params(true)).collect();
    let mut pay_args: Vec<Vec<ParamValue>> = s.payments.iter().map(|a| a.params(true)).collect();

    let mut g = c.benchmark_group("tpcc_new_order");
    g.measurement_time(Duration::from_secs(5));
    let mut i = 0;
    g.bench_function("procedure", |b| {
        b.iter(|| {
            i += 1;
            procedure(&mut worker, &s.db, no_id, &no_args[i % POOL]);
        })
    });
    g.bench_function("rust", |b| {
        b.iter(|| {
            i += 1;
            rust_new_order(&mut worker, &s.ids, &s.new_orders[i % POOL]);
        })
    });
    g.finish();

    let mut g = c.benchmark_group("tpcc_payment");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("procedure", |b| {
        b.iter(|| {
            i += 1;
            proc_payment(&mut worker, &s.db, pay_id, &mut pay_args[i % POOL]);
        })
    });
    g.bench_function("rust", |b| {
        b.iter(|| {
            i += 1;
            rust_payment(&mut worker, &s.ids, &mut s.payments[i % POOL]);
        })
    });
    g.finish();

    // What the engine's operations cost on TPC-C's tables (for the profile in docs/PERFORMANCE.md):
    // ten random stock rows read, read and updated, and ten new history rows inserted.
    let mut g = c.benchmark_group("tpcc_engine_x10");
    g.measurement_time(Duration::from_secs(3));
    let stock_keys: Vec<[Value; 2]> = s
        .new_orders
        .iter()
        .flat_map(|a| a.items.clone())
        .map(|i| [Value::Int(1), Value::Int(i.min(100_000))])
        .collect();
    let mut k = 0;
    g.bench_function("get_stock", |b| {
        b.iter(|| {
            let _ = worker.run(1, |tx| {
                for j in 0..10 {
                    tx.get(s.ids.stock, &stock_keys[(k + j) % stock_keys.len()])?;
                }
                Ok(())
            });
            k += 10;
        })
    });
    g.bench_function("update_stock", |b| {
        b.iter(|| {
            let _ = worker.run(1, |tx| {
                for j in 0..10 {
                    let key = &stock_keys[(k + j) % stock_keys.len()];
                    if let Some(row) = tx.get(s.ids.stock, key)? {
                        let mut row = row.to_vec();
                        row[13] = Value::Int(row[13].as_int().unwrap_or(0) + 1);
                        tx.update(s.ids.stock, row.into())?;
                    }
                }
                Ok(())
            });
            k += 10;
        })
    });
    g.bench_function("insert_history", |b| {
        b.iter(|| {
            let _ = worker.run(1, |tx| {
                for c in 1..=10 {
                    let row = vec![c, 1, 1, 1, 1, fresh_date(), 100].into_iter().map(Value::Int);
                    let mut row: Vec<Value> = row.collect();
                    row.push(Value::Null);
                    tx.insert(s.ids.history, row.into())?;
                }
                Ok(())
            });
        })
    });
    g.finish();

    // Interleaved rounds: the same argument sets through both routes, alternating, so that the
    // database grows alike under both.
    const ROUNDS: usize = 11;
    let round = |f: &mut dyn FnMut(usize)| {
        let start = Instant::now();
        for k in 0..2_000 {
            f(k);
        }
        start.elapsed().as_secs_f64() / 2_000.0
    };
    let ratios = |name: &str, proc_f: &mut dyn FnMut(usize), rust_f: &mut dyn FnMut(usize)| {
        // The route run second in a pair meets the memory the first one's inserts left behind,
        // so the order alternates from round to round.
        let mut samples: Vec<(f64, f64)> = (0..ROUNDS)
            .map(|i| {
                if i % 2 == 0 {
                    let p = round(proc_f);
                    (p, round(rust_f))
                } else {
                    let r = round(rust_f);
                    (round(proc_f), r)
                }
            })
            .collect();
        samples.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
        let (p, r) = samples[ROUNDS / 2];
        println!("{name}: procedure {:.1} us, rust {:.1} us, procedure/rust {:.3}", p * 1e6, r * 1e6, p / r);
    };
    let Setup { db, ids, new_orders, mut payments } = s;
    let mut w2 = db.worker();
    let mut w3 = db.worker();
    ratios("new_order", &mut |k| procedure(&mut w2, &db, no_id, &no_args[k % POOL]), &mut |k| {
        rust_new_order(&mut w3, &ids, &new_orders[k % POOL])
    });
    ratios("payment", &mut |k| proc_payment(&mut w2, &db, pay_id, &mut pay_args[k % POOL]), &mut |k| {
        rust_payment(&mut w3, &ids, &mut payments[k % POOL])
    });
}

criterion_group! {
    name = benches;
    // No plots: criterion's plotters backend needs fonts the machine may not have.
    config = Criterion::default().without_plots();
    targets = bench_tpcc
}
criterion_main!(benches);
