//! The initial database of TPC-C clause 4.3.3.1, per warehouse: 1 warehouse row, 10 districts,
//! 100 000 stock rows, 30 000 customers (3 000 per district) with one history row each, 30 000
//! orders (3 000 per district, customers in a random permutation) with 5..=15 order lines each,
//! and 9 000 new orders (the last 900 orders of each district). The 100 000 items are shared.
//!
//! The work is cut into units (item chunks, a warehouse's own rows, stock chunks, one district's
//! customers and orders) that `threads` threads take from a shared counter, each through its own
//! worker, writing with blind `put`s in transactions of [`BATCH_ROWS`] rows. Each unit has its own
//! seeded random source, so the data does not depend on the number of threads.

use super::random::{TpccRng, last_name};
use super::{DISTRICTS_PER_WAREHOUSE, ITEMS, TableIds, Tpcc};
use crate::bench::workload::WorkloadError;
use crate::db::{Database, Worker};
use crate::storage::{Row, TableId, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Rows per loader transaction.
pub const BATCH_ROWS: usize = 2_000;
/// Customers per district (clause 4.3.3.1).
pub const CUSTOMERS_PER_DISTRICT: i64 = 3_000;
/// Orders per district at load time.
pub const ORDERS_PER_DISTRICT: i64 = 3_000;
/// The first order id that is still undelivered (a new order) at load time.
pub const FIRST_NEW_ORDER: i64 = 2_101;
/// Stock rows and items per loader unit.
const CHUNK: i64 = 10_000;

/// One piece of the load.
#[derive(Clone, Copy, Debug)]
enum Unit {
    /// Items `first..first + CHUNK`.
    Items(i64),
    /// The warehouse row and its districts.
    Warehouse(i64),
    /// Stock of warehouse `w` for items `first..first + CHUNK`.
    Stock(i64, i64),
    /// Customers, history, orders, order lines and new orders of district (w, d).
    District(i64, i64),
}

impl Unit {
    fn seed(self, base: u64) -> u64 {
        let (kind, a, b) = match self {
            Unit::Items(i) => (1u64, i as u64, 0u64),
            Unit::Warehouse(w) => (2, w as u64, 0),
            Unit::Stock(w, i) => (3, w as u64, i as u64),
            Unit::District(w, d) => (4, w as u64, d as u64),
        };
        base ^ (kind << 56) ^ (a << 24) ^ b
    }
}

fn units(warehouses: i64) -> Vec<Unit> {
    let mut out: Vec<Unit> = (0..ITEMS / CHUNK).map(|k| Unit::Items(k * CHUNK + 1)).collect();
    for w in 1..=warehouses {
        out.push(Unit::Warehouse(w));
        out.extend((0..ITEMS / CHUNK).map(|k| Unit::Stock(w, k * CHUNK + 1)));
        out.extend((1..=DISTRICTS_PER_WAREHOUSE).map(|d| Unit::District(w, d)));
    }
    out
}

/// Loads the initial database with up to `threads` threads.
pub fn load(tpcc: &Tpcc, db: &Database, threads: usize) -> Result<(), WorkloadError> {
    let ids = TableIds::of(db)?;
    let units = units(i64::from(tpcc.warehouses));
    let next = AtomicUsize::new(0);
    let now = super::now_us();
    let threads = threads.clamp(1, units.len());
    let seed = tpcc.seed;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> Result<(), WorkloadError> {
                    let mut loader = Loader { worker: db.worker(), ids, batch: Vec::new(), now };
                    while let Some(&unit) = units.get(next.fetch_add(1, Ordering::Relaxed)) {
                        loader.unit(unit, &mut TpccRng::new(unit.seed(seed)))?;
                    }
                    loader.flush()
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap_or_else(|_| Err(panicked())))
    })
}

fn panicked() -> WorkloadError {
    WorkloadError::Options("a TPC-C loader thread panicked".into())
}

fn int(v: i64) -> Value {
    Value::Int(v)
}

fn text(s: impl AsRef<str>) -> Value {
    Value::text(s.as_ref())
}

struct Loader {
    worker: Worker,
    ids: TableIds,
    batch: Vec<(TableId, Row)>,
    now: i64,
}

impl Loader {
    fn put(&mut self, table: TableId, row: Vec<Value>) -> Result<(), WorkloadError> {
        self.batch.push((table, Row::from(row)));
        if self.batch.len() >= BATCH_ROWS { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<(), WorkloadError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.worker.run(100, |tx| batch.iter().try_for_each(|(t, row)| tx.put(*t, Row::clone(row))))?;
        Ok(())
    }

    fn unit(&mut self, unit: Unit, r: &mut TpccRng) -> Result<(), WorkloadError> {
        match unit {
            Unit::Items(first) => (first..first + CHUNK).try_for_each(|i| self.item(i, r)),
            Unit::Warehouse(w) => self.warehouse(w, r),
            Unit::Stock(w, first) => (first..first + CHUNK).try_for_each(|i| self.stock(w, i, r)),
            Unit::District(w, d) => self.district_contents(w, d, r),
        }
    }

    fn item(&mut self, i: i64, r: &mut TpccRng) -> Result<(), WorkloadError> {
        let row = vec![
            int(i),
            int(r.uniform(1, 10_000)),
            text(r.astring(14, 24)),
            int(r.uniform(100, 10_000)),
            text(r.data_with_original()),
        ];
        self.put(self.ids.item, row)
    }

    /// Name, street 1, street 2, city, state, zip.
    fn address(r: &mut TpccRng, name_len: (i64, i64)) -> Vec<Value> {
        vec![
            text(r.astring(name_len.0, name_len.1)),
            text(r.astring(10, 20)),
            text(r.astring(10, 20)),
            text(r.astring(10, 20)),
            text(r.astring(2, 2).to_uppercase()),
            text(r.zip()),
        ]
    }

    fn warehouse(&mut self, w: i64, r: &mut TpccRng) -> Result<(), WorkloadError> {
        let mut row = vec![int(w)];
        row.extend(Self::address(r, (6, 10)));
        row.extend([Value::Float(tax(r)), int(30_000_000)]);
        self.put(self.ids.warehouse, row)?;
        for d in 1..=DISTRICTS_PER_WAREHOUSE {
            let mut row = vec![int(w), int(d)];
            row.extend(Self::address(r, (6, 10)));
            row.extend([Value::Float(tax(r)), int(3_000_000), int(ORDERS_PER_DISTRICT + 1)]);
            self.put(self.ids.district, row)?;
        }
        Ok(())
    }

    fn stock(&mut self, w: i64, i: i64, r: &mut TpccRng) -> Result<(), WorkloadError> {
        let mut row = vec![int(w), int(i), int(r.uniform(10, 100))];
        row.extend((0..10).map(|_| text(r.astring(24, 24))));
        row.extend([int(0), int(0), int(0), text(r.data_with_original())]);
        self.put(self.ids.stock, row)
    }

    fn district_contents(&mut self, w: i64, d: i64, r: &mut TpccRng) -> Result<(), WorkloadError> {
        for c in 1..=CUSTOMERS_PER_DISTRICT {
            self.customer(w, d, c, r)?;
        }
        let customers = r.permutation(CUSTOMERS_PER_DISTRICT);
        for (o, &c) in (1..=ORDERS_PER_DISTRICT).zip(&customers) {
            self.order(w, d, o, c, r)?;
        }
        Ok(())
    }

    fn customer(&mut self, w: i64, d: i64, c: i64, r: &mut TpccRng) -> Result<(), WorkloadError> {
        let last = if c <= 1000 { last_name(c - 1) } else { r.last_name_load() };
        let credit = if r.uniform(1, 10) == 1 { "BC" } else { "GC" };
        let mut row = vec![int(w), int(d), int(c), text(r.astring(8, 16)), text("OE"), text(last)];
        row.extend(Self::address(r, (10, 20)).into_iter().skip(1));
        row.extend([
            text(r.nstring(16)),
            int(self.now),
            text(credit),
            int(5_000_000),
            Value::Float((r.uniform(0, 5_000) as f64) / 10_000.0),
            int(-1_000),
            int(1_000),
            int(1),
            int(0),
            text(r.astring(300, 500)),
        ]);
        self.put(self.ids.customer, row)?;
        let history = vec![int(c), int(d), int(w), int(d), int(w), int(self.now), int(1_000), text(r.astring(12, 24))];
        self.put(self.ids.history, history)
    }

    fn order(&mut self, w: i64, d: i64, o: i64, c: i64, r: &mut TpccRng) -> Result<(), WorkloadError> {
        let delivered = o < FIRST_NEW_ORDER;
        let carrier = if delivered { int(r.uniform(1, 10)) } else { Value::Null };
        let lines = r.uniform(5, 15);
        self.put(self.ids.orders, vec![int(w), int(d), int(o), int(c), int(self.now), carrier, int(lines), int(1)])?;
        for n in 1..=lines {
            let (delivery, amount) = if delivered { (int(self.now), 0) } else { (Value::Null, r.uniform(1, 999_999)) };
            let row = vec![
                int(w),
                int(d),
                int(o),
                int(n),
                int(r.uniform(1, ITEMS)),
                int(w),
                delivery,
                int(5),
                int(amount),
                text(r.astring(24, 24)),
            ];
            self.put(self.ids.order_line, row)?;
        }
        if !delivered {
            self.put(self.ids.new_order, vec![int(w), int(d), int(o)])?;
        }
        Ok(())
    }
}

/// A tax rate, uniform in 0.0000..=0.2000.
fn tax(r: &mut TpccRng) -> f64 {
    (r.uniform(0, 2_000) as f64) / 10_000.0
}
