//! TPC-C (TPC Benchmark C, revision 5.11) as a [`Workload`]: the nine tables of clause 1.3 and the
//! five transactions of clause 2 written as stored procedures in `workloads/tpcc.proc`, the
//! initial database of clause 4.3.3.1 ([`loader`]), the terminals' input data and the mix of
//! clause 5.2.3 ([`generator`], [`random`]), and the consistency conditions 1–4 of clause 3.3.2
//! ([`check`]).
//!
//! # Variants
//!
//! - **Mix.** The standard mix is 45% new-order, 43% payment, 4% each of order-status, delivery
//!   and stock-level (the minimums of clause 5.2.3, with new-order taking the rest, as Silo runs
//!   it). `mix = "new-order,payment"` runs only those kinds with equal weights (Taurus §6.1: 50/50);
//!   a kind may carry a weight, e.g. `new-order:45,payment:43,delivery:12`.
//! - **`no_inserts`** (PACMAN §6: "we disabled the insert operations ... so that the database size
//!   will not grow"): the procedures get `inserts = false`, and then new-order does not insert its
//!   order, new-order and order-line rows and does not advance `d_next_o_id` (it still reads the
//!   warehouse, district, customer and items and updates stock); payment does not insert its
//!   history row (it still updates warehouse, district and customer); delivery does not delete
//!   the new-order row it delivers (it still updates the order, its lines and the customer, so the
//!   same oldest order of each district is delivered again and again). Every table keeps its size
//!   and consistency conditions 1–4 still hold.
//!
//! # Deviations from the specification
//!
//! - Money is int cents (so condition 1 is exact); tax and discount rates are floats.
//! - Dates are ints (microseconds since the Unix epoch), passed in as parameters (the procedure
//!   language is deterministic and has no clock).
//! - History, which has no primary key in the spec, is keyed (h_c_w_id, h_c_d_id, h_c_id,
//!   h_date); the generator makes h_date unique: microseconds * 1024 + the worker thread.
//! - Each worker is a terminal of home warehouse `thread % warehouses + 1` (Silo's harness); the
//!   district is uniform per transaction; no keying or think times; delivery runs in one
//!   transaction instead of being queued (clause 2.7.2 allows deferred execution).
//! - new-order does not compute the brand-generic flag (clause 2.4.2.2; output only).
//! - Payment and order-status by last name scan the customer-name index twice (count, then
//!   walk to position ceil(n/2)), since a procedure cannot buffer rows.

pub mod check;
pub mod generator;
pub mod loader;
pub mod native;
pub mod random;

use crate::bench::workload::{TxnGenerator, Workload, WorkloadError};
use crate::db::Database;
use crate::storage::TableId;
use crate::txn::TxnError;

/// The source of the schema and the procedures.
pub const SOURCE: &str = include_str!("../../../workloads/tpcc.proc");
/// Items (clause 4.3.3.1); also the stock rows per warehouse.
pub const ITEMS: i64 = 100_000;
/// Districts per warehouse.
pub const DISTRICTS_PER_WAREHOUSE: i64 = 10;

/// The transaction kinds, in [`Workload::txn_kinds`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Clause 2.4.
    NewOrder = 0,
    /// Clause 2.5.
    Payment = 1,
    /// Clause 2.6.
    OrderStatus = 2,
    /// Clause 2.7.
    Delivery = 3,
    /// Clause 2.8.
    StockLevel = 4,
}

impl Kind {
    /// Every kind, in index order.
    pub const ALL: [Kind; 5] = [Kind::NewOrder, Kind::Payment, Kind::OrderStatus, Kind::Delivery, Kind::StockLevel];

    /// The kind's name (as the mix option and the statistics spell it).
    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new-order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order-status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock-level",
        }
    }

    fn from_name(name: &str) -> Option<Kind> {
        let norm = name.trim().to_ascii_lowercase().replace('_', "-");
        Kind::ALL.into_iter().find(|k| k.name() == norm)
    }
}

/// The standard mix (clause 5.2.3), in [`Kind::ALL`] order.
pub const STANDARD_MIX: [u32; 5] = [45, 43, 4, 4, 4];

/// The TPC-C workload and its options.
#[derive(Clone, Debug)]
pub struct Tpcc {
    /// Warehouses (the scale factor); at least 1.
    pub warehouses: u32,
    /// Weights per kind, in [`Kind::ALL`] order.
    pub mix: [u32; 5],
    /// `false`: PACMAN's fixed-size variant (see the module docs).
    pub inserts: bool,
    /// Seed of the loader's random data.
    pub seed: u64,
}

impl Default for Tpcc {
    fn default() -> Tpcc {
        Tpcc { warehouses: 1, mix: STANDARD_MIX, inserts: true, seed: 0x7C0C }
    }
}

impl Tpcc {
    /// A workload of `warehouses` warehouses with the mix spelled as in the module docs (`None`:
    /// standard) and, if `no_inserts`, the fixed-size variant.
    pub fn new(warehouses: u32, mix: Option<&str>, no_inserts: bool) -> Result<Tpcc, WorkloadError> {
        if warehouses == 0 {
            return Err(WorkloadError::Options("TPC-C needs at least 1 warehouse".into()));
        }
        let mix = match mix {
            None => STANDARD_MIX,
            Some(spec) => parse_mix(spec)?,
        };
        Ok(Tpcc { warehouses, mix, inserts: !no_inserts, ..Tpcc::default() })
    }
}

/// Parses `kind[:weight],...` (weight 1 if omitted).
pub fn parse_mix(spec: &str) -> Result<[u32; 5], WorkloadError> {
    let mut mix = [0u32; 5];
    for part in spec.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, weight) = match part.split_once(':') {
            Some((n, w)) => {
                let w = w.trim().parse::<u32>().map_err(|_| bad_mix(spec, &format!("bad weight {w:?}")))?;
                (n, w)
            }
            None => (part, 1),
        };
        let kind = Kind::from_name(name).ok_or_else(|| bad_mix(spec, &format!("unknown kind {:?}", name.trim())))?;
        mix[kind as usize] = mix[kind as usize].saturating_add(weight).min(1_000_000);
    }
    if mix.iter().all(|&w| w == 0) {
        return Err(bad_mix(spec, "no kind has a positive weight"));
    }
    Ok(mix)
}

fn bad_mix(spec: &str, why: &str) -> WorkloadError {
    let kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    WorkloadError::Options(format!("TPC-C mix {spec:?}: {why} (kinds: {})", kinds.join(", ")))
}

/// Microseconds since the Unix epoch.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// The ids of the nine tables.
#[derive(Clone, Copy, Debug)]
pub struct TableIds {
    /// `warehouse`.
    pub warehouse: TableId,
    /// `district`.
    pub district: TableId,
    /// `customer`.
    pub customer: TableId,
    /// `history`.
    pub history: TableId,
    /// `new_order`.
    pub new_order: TableId,
    /// `orders`.
    pub orders: TableId,
    /// `order_line`.
    pub order_line: TableId,
    /// `item`.
    pub item: TableId,
    /// `stock`.
    pub stock: TableId,
}

impl TableIds {
    /// Looks the tables up in `db`'s catalog.
    pub fn of(db: &Database) -> Result<TableIds, WorkloadError> {
        let catalog = db.catalog();
        let id = |name: &str| {
            catalog
                .table_by_name(name)
                .map(|t| t.id)
                .ok_or_else(|| WorkloadError::Txn(TxnError::NoSuchTable(name.into())))
        };
        Ok(TableIds {
            warehouse: id("warehouse")?,
            district: id("district")?,
            customer: id("customer")?,
            history: id("history")?,
            new_order: id("new_order")?,
            orders: id("orders")?,
            order_line: id("order_line")?,
            item: id("item")?,
            stock: id("stock")?,
        })
    }

    /// Every table as (name, id).
    pub fn all(&self) -> [(&'static str, TableId); 9] {
        [
            ("warehouse", self.warehouse),
            ("district", self.district),
            ("customer", self.customer),
            ("history", self.history),
            ("new_order", self.new_order),
            ("orders", self.orders),
            ("order_line", self.order_line),
            ("item", self.item),
            ("stock", self.stock),
        ]
    }
}

/// The procedure ids of the five transactions.
#[derive(Clone, Copy, Debug)]
pub struct ProcIds {
    /// `new_order`.
    pub new_order: u32,
    /// `payment`.
    pub payment: u32,
    /// `order_status`.
    pub order_status: u32,
    /// `delivery`.
    pub delivery: u32,
    /// `stock_level`.
    pub stock_level: u32,
}

impl ProcIds {
    /// Looks the procedures up (`u32::MAX` for a missing one, which fails when called).
    pub fn of(db: &Database) -> ProcIds {
        let registry = db.procedures();
        let id = |name: &str| registry.id_of(name).unwrap_or(u32::MAX);
        ProcIds {
            new_order: id("new_order"),
            payment: id("payment"),
            order_status: id("order_status"),
            delivery: id("delivery"),
            stock_level: id("stock_level"),
        }
    }
}

impl Tpcc {
    /// The generator of worker `thread`, as [`Workload::generator`] returns it but concrete.
    pub fn generator_for(&self, db: &Database, thread: usize, seed: u64) -> generator::Generator {
        let mut cumulative = [0u32; 5];
        let mut sum = 0;
        for (c, w) in cumulative.iter_mut().zip(self.mix) {
            sum += w;
            *c = sum;
        }
        let warehouses = i64::from(self.warehouses.max(1));
        let rng_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(thread as u64);
        generator::Generator {
            rng: random::TpccRng::new(rng_seed),
            procs: ProcIds::of(db),
            cumulative,
            warehouses,
            home: thread as i64 % warehouses + 1,
            thread: thread as i64,
            inserts: self.inserts,
            last_stamp: 0,
        }
    }
}

impl Workload for Tpcc {
    fn name(&self) -> &str {
        "tpcc"
    }

    fn txn_kinds(&self) -> Vec<String> {
        Kind::ALL.iter().map(|k| k.name().to_string()).collect()
    }

    fn sources(&self) -> Vec<(String, String)> {
        vec![("tpcc.proc".into(), SOURCE.into())]
    }

    fn load(&self, db: &Database, threads: usize) -> Result<(), WorkloadError> {
        loader::load(self, db, threads)
    }

    fn generator(&self, db: &Database, thread: usize, _threads: usize, seed: u64) -> Box<dyn TxnGenerator> {
        Box::new(self.generator_for(db, thread, seed))
    }

    fn check(&self, db: &Database) -> Result<(), WorkloadError> {
        check::check(db, self.warehouses)
    }
}
