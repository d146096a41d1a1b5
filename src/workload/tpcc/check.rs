//! The consistency conditions of TPC-C clause 3.3.2.1–3.3.2.4, checked per warehouse and district:
//!
//! 1. `W_YTD = sum(D_YTD)` over the warehouse's districts;
//! 2. `D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)` (the `NO_O_ID` part when the district has new
//!    orders);
//! 3. `max(NO_O_ID) - min(NO_O_ID) + 1` = the number of new-order rows of the district;
//! 4. `sum(O_OL_CNT)` = the number of order-line rows of the district.
//!
//! The tables are read through ad-hoc transactions of [`PAGE_ROWS`] rows each (so a grown database
//! stays within the engine's scan and read-set limits); the check runs while no transaction runs.

use super::{DISTRICTS_PER_WAREHOUSE, TableIds};
use crate::bench::workload::WorkloadError;
use crate::db::{Database, Worker};
use crate::storage::{Direction, KeyRange, Row, TableId, Value, ValueRef};
use crate::txn::Scan;
use std::ops::Bound;

/// Rows per checking transaction.
pub const PAGE_ROWS: usize = 4_096;

/// Checks conditions 1–4 for warehouses `1..=warehouses`.
pub fn check(db: &Database, warehouses: u32) -> Result<(), WorkloadError> {
    let ids = TableIds::of(db)?;
    let mut worker = db.worker();
    for w in 1..=i64::from(warehouses) {
        let mut d_ytd_sum = 0;
        for d in 1..=DISTRICTS_PER_WAREHOUSE {
            let district = get(&mut worker, ids.district, &[Value::Int(w), Value::Int(d)])?;
            d_ytd_sum += int_at(&district, 9);
            check_district(&mut worker, &ids, w, d, int_at(&district, 10))?;
        }
        let w_ytd = int_at(&get(&mut worker, ids.warehouse, &[Value::Int(w)])?, 8);
        if w_ytd != d_ytd_sum {
            return Err(inconsistent(1, w, None, format!("W_YTD is {w_ytd} but the sum of D_YTD is {d_ytd_sum}")));
        }
    }
    Ok(())
}

fn inconsistent(condition: u32, w: i64, d: Option<i64>, detail: String) -> WorkloadError {
    let at = d.map_or(format!("warehouse {w}"), |d| format!("warehouse {w}, district {d}"));
    WorkloadError::Inconsistent(format!("TPC-C consistency condition {condition} fails at {at}: {detail}"))
}

fn int_at(row: &Row, i: usize) -> i64 {
    row.get(i).and_then(ValueRef::as_int).unwrap_or(0)
}

fn get(worker: &mut Worker, table: TableId, key: &[Value]) -> Result<Row, WorkloadError> {
    let (row, _) = worker.run(100, |tx| tx.get(table, key))?;
    row.ok_or_else(|| WorkloadError::Inconsistent(format!("missing row {key:?} of table #{table}")))
}

/// Conditions 2–4 for district (w, d).
fn check_district(worker: &mut Worker, ids: &TableIds, w: i64, d: i64, next_o_id: i64) -> Result<(), WorkloadError> {
    let prefix = [Value::Int(w), Value::Int(d)];
    let (mut max_o, mut ol_cnt_sum) = (0, 0);
    for_each_row(worker, ids.orders, &prefix, |row| {
        max_o = max_o.max(int_at(row, 2));
        ol_cnt_sum += int_at(row, 6);
    })?;
    let (mut min_no, mut max_no, mut new_orders) = (i64::MAX, 0, 0);
    for_each_row(worker, ids.new_order, &prefix, |row| {
        let o = int_at(row, 2);
        (min_no, max_no, new_orders) = (min_no.min(o), max_no.max(o), new_orders + 1);
    })?;
    let mut lines = 0;
    for_each_row(worker, ids.order_line, &prefix, |_| lines += 1)?;
    if next_o_id - 1 != max_o || (new_orders > 0 && max_no != max_o) {
        let detail = format!("D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {max_no}", next_o_id - 1);
        return Err(inconsistent(2, w, Some(d), detail));
    }
    if new_orders > 0 && max_no - min_no + 1 != new_orders {
        let detail =
            format!("max(NO_O_ID) - min(NO_O_ID) + 1 = {} but there are {new_orders} new orders", max_no - min_no + 1);
        return Err(inconsistent(3, w, Some(d), detail));
    }
    if ol_cnt_sum != lines {
        return Err(inconsistent(
            4,
            w,
            Some(d),
            format!("sum(O_OL_CNT) = {ol_cnt_sum} but there are {lines} order lines"),
        ));
    }
    Ok(())
}

/// Calls `f` on every row of `table` whose primary key starts with `prefix`, in key order, a page
/// per transaction.
pub fn for_each_row(
    worker: &mut Worker,
    table: TableId,
    prefix: &[Value],
    mut f: impl FnMut(&Row),
) -> Result<(), WorkloadError> {
    let mut range =
        KeyRange::from_values(prefix, Bound::Unbounded, Bound::Unbounded).map_err(crate::txn::TxnError::from)?;
    loop {
        let scan = Scan { table, index: None, range: range.clone(), direction: Direction::Forward, limit: PAGE_ROWS };
        let (page, _) = worker.run(100, |tx| {
            let rows = tx.scan(&scan)?;
            let last = match rows.last() {
                Some(row) => Some(tx.table(table)?.schema.primary_key_of(row)?),
                None => None,
            };
            Ok((rows, last))
        })?;
        let (rows, last) = page;
        rows.iter().for_each(&mut f);
        match last {
            Some(last) if rows.len() == PAGE_ROWS => range.start = Bound::Excluded(last),
            _ => return Ok(()),
        }
    }
}

/// The number of rows of `table` whose primary key starts with `prefix`.
pub fn count_rows(worker: &mut Worker, table: TableId, prefix: &[Value]) -> Result<u64, WorkloadError> {
    let mut n = 0;
    for_each_row(worker, table, prefix, |_| n += 1)?;
    Ok(n)
}
