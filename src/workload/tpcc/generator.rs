//! The terminals' input data (TPC-C clauses 2.4.1, 2.5.1, 2.6.1, 2.7.1, 2.8.1) and the mix.
//!
//! Each worker thread is a terminal of its home warehouse `thread % warehouses + 1`, as in Silo's
//! harness; the district is chosen uniformly per transaction. No keying or think time.

use super::native::{NewOrder, Payment};
use super::random::TpccRng;
use super::{DISTRICTS_PER_WAREHOUSE, ITEMS, Kind, ProcIds};
use crate::bench::workload::{TxnCall, TxnGenerator, TxnRequest};
use crate::storage::{ParamValue, Value};

/// Produces one worker's transactions.
pub struct Generator {
    pub(super) rng: TpccRng,
    pub(super) procs: ProcIds,
    /// Cumulative weights per [`Kind`], in [`Kind::ALL`] order.
    pub(super) cumulative: [u32; 5],
    pub(super) warehouses: i64,
    pub(super) home: i64,
    pub(super) thread: i64,
    pub(super) inserts: bool,
    /// The last h_date handed out (unique and increasing per generator).
    pub(super) last_stamp: i64,
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

fn bool_(b: bool) -> ParamValue {
    ParamValue::Scalar(Value::Bool(b))
}

fn text_or_null(s: Option<String>) -> ParamValue {
    ParamValue::Scalar(s.map_or(Value::Null, |s| Value::text(&s)))
}

impl Generator {
    fn district(&mut self) -> i64 {
        self.rng.uniform(1, DISTRICTS_PER_WAREHOUSE)
    }

    /// A warehouse other than the home one (the home one if it is the only one).
    fn remote_warehouse(&mut self) -> i64 {
        if self.warehouses == 1 {
            return self.home;
        }
        let other = self.rng.uniform(1, self.warehouses - 1);
        if other >= self.home { other + 1 } else { other }
    }

    /// A unique, increasing date: microseconds * 1024 + the thread (history's key needs it).
    fn stamp(&mut self) -> i64 {
        let now = super::now_us().saturating_mul(1024) + self.thread % 1024;
        self.last_stamp = now.max(self.last_stamp + 1024);
        self.last_stamp
    }

    /// 60% by last name, else by id (clauses 2.5.1.2, 2.6.1.2): (id, last name).
    fn customer(&mut self) -> (i64, Option<String>) {
        if self.rng.uniform(1, 100) <= 60 {
            (0, Some(self.rng.last_name_run()))
        } else {
            (self.rng.customer_id(), None)
        }
    }

    /// The kind for a uniform draw in `0..total weight`.
    fn kind(&mut self) -> Kind {
        let total = self.cumulative[4];
        let x = self.rng.uniform(0, i64::from(total) - 1) as u32;
        let i = self.cumulative.iter().position(|&c| x < c).unwrap_or(0);
        Kind::ALL[i]
    }

    /// Clause 2.4.1: 5..=15 lines, NURand items, 1% remote supply warehouses, 1% rollbacks.
    pub fn new_order(&mut self) -> NewOrder {
        let d = self.district();
        let c = self.rng.customer_id();
        let lines = self.rng.uniform(5, 15) as usize;
        let rollback = self.rng.uniform(1, 100) == 1;
        let mut a = NewOrder {
            w: self.home,
            d,
            c,
            items: Vec::with_capacity(lines),
            supply: Vec::with_capacity(lines),
            quantities: Vec::with_capacity(lines),
            entry_d: super::now_us(),
        };
        for n in 0..lines {
            let unused = rollback && n + 1 == lines;
            a.items.push(if unused { ITEMS + 1 } else { self.rng.item_id() });
            let remote = self.warehouses > 1 && self.rng.uniform(1, 100) == 1;
            a.supply.push(if remote { self.remote_warehouse() } else { self.home });
            a.quantities.push(self.rng.uniform(1, 10));
        }
        a
    }

    /// Clause 2.5.1: 85% home customer, 15% a remote warehouse's; amount 1.00..=5000.00.
    pub fn payment(&mut self) -> Payment {
        let d = self.district();
        let (cw, cd) = if self.warehouses > 1 && self.rng.uniform(1, 100) > 85 {
            (self.remote_warehouse(), self.district())
        } else {
            (self.home, d)
        };
        let (c, last) = self.customer();
        let amount = self.rng.uniform(100, 500_000);
        Payment { w: self.home, d, cw, cd, c, last, amount, h_date: self.stamp() }
    }

    /// Clause 2.6.1.
    pub fn order_status_args(&mut self) -> Vec<ParamValue> {
        let d = self.district();
        let (c, last) = self.customer();
        vec![int(self.home), int(d), int(c), text_or_null(last)]
    }

    /// Clause 2.7.1: a carrier 1..=10.
    pub fn delivery_args(&mut self) -> Vec<ParamValue> {
        let carrier = self.rng.uniform(1, 10);
        vec![int(self.home), int(carrier), int(super::now_us()), bool_(self.inserts)]
    }

    /// Clause 2.8.1: threshold 10..=20.
    pub fn stock_level_args(&mut self) -> Vec<ParamValue> {
        let d = self.district();
        vec![int(self.home), int(d), int(self.rng.uniform(10, 20))]
    }

    /// The request for a transaction of kind `kind`.
    pub fn request(&mut self, kind: Kind) -> TxnRequest {
        let (id, args) = match kind {
            Kind::NewOrder => (self.procs.new_order, self.new_order().params(self.inserts)),
            Kind::Payment => (self.procs.payment, self.payment().params(self.inserts)),
            Kind::OrderStatus => (self.procs.order_status, self.order_status_args()),
            Kind::Delivery => (self.procs.delivery, self.delivery_args()),
            Kind::StockLevel => (self.procs.stock_level, self.stock_level_args()),
        };
        TxnRequest { kind: kind as usize, call: TxnCall::Procedure { id, args } }
    }
}

impl TxnGenerator for Generator {
    fn next_request(&mut self) -> TxnRequest {
        let kind = self.kind();
        self.request(kind)
    }
}
