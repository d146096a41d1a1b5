//! New-order and payment written directly in Rust against the ad-hoc [`Transaction`] API, making
//! the same engine calls as the procedures in `workloads/tpcc.proc` (a get for every `select`, a
//! get then an update for every `update`, an insert for every `insert`). `benches/tpcc.rs`
//! compares them with the compiled procedures to measure what the language costs.

use super::TableIds;
use crate::storage::{Direction, KeyRange, ParamValue, Row, TableId, Value, ValueRef};
use crate::txn::{Scan, Transaction, TxnError};
use std::ops::Bound;

/// The arguments of new-order (clause 2.4.1).
#[derive(Clone, Debug)]
pub struct NewOrder {
    /// Home warehouse.
    pub w: i64,
    /// District.
    pub d: i64,
    /// Customer.
    pub c: i64,
    /// Item ids.
    pub items: Vec<i64>,
    /// Supply warehouses.
    pub supply: Vec<i64>,
    /// Quantities.
    pub quantities: Vec<i64>,
    /// Entry date.
    pub entry_d: i64,
}

/// The arguments of payment (clause 2.5.1).
#[derive(Clone, Debug)]
pub struct Payment {
    /// Home warehouse.
    pub w: i64,
    /// District.
    pub d: i64,
    /// Customer warehouse.
    pub cw: i64,
    /// Customer district.
    pub cd: i64,
    /// Customer id (when `last` is `None`).
    pub c: i64,
    /// Customer last name.
    pub last: Option<String>,
    /// Amount in cents.
    pub amount: i64,
    /// History date.
    pub h_date: i64,
}

impl NewOrder {
    /// The arguments of the `new_order` procedure.
    pub fn params(&self, inserts: bool) -> Vec<ParamValue> {
        let ints = |v: &[i64]| ParamValue::Array(v.iter().map(|&x| Value::Int(x)).collect());
        vec![
            scalar(self.w),
            scalar(self.d),
            scalar(self.c),
            ints(&self.items),
            ints(&self.supply),
            ints(&self.quantities),
            scalar(self.entry_d),
            ParamValue::Scalar(Value::Bool(inserts)),
        ]
    }
}

impl Payment {
    /// The arguments of the `payment` procedure.
    pub fn params(&self, inserts: bool) -> Vec<ParamValue> {
        let last = ParamValue::Scalar(self.last.as_deref().map_or(Value::Null, Value::text));
        vec![
            scalar(self.w),
            scalar(self.d),
            scalar(self.cw),
            scalar(self.cd),
            scalar(self.c),
            last,
            scalar(self.amount),
            scalar(self.h_date),
            ParamValue::Scalar(Value::Bool(inserts)),
        ]
    }
}

fn scalar(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

fn int(row: &Row, i: usize) -> i64 {
    row.get(i).and_then(ValueRef::as_int).unwrap_or(0)
}

fn float(row: &Row, i: usize) -> f64 {
    row.get(i).and_then(ValueRef::as_float).unwrap_or(0.0)
}

fn must(row: Option<Row>, what: &str) -> Result<Row, TxnError> {
    row.ok_or_else(|| TxnError::UserAbort(format!("no {what}")))
}

/// Reads the row at `key`, applies `change` to a copy and writes it back in one lookup (the
/// procedures' `update`: `Transaction::update_with`). Returns the new row.
fn update(
    tx: &mut Transaction<'_>,
    table: TableId,
    key: &[Value],
    change: impl FnOnce(&mut Vec<Value>),
) -> Result<Option<Row>, TxnError> {
    let mut written = None;
    tx.update_with(table, key, |old| {
        let mut new = old.to_vec();
        change(&mut new);
        let new: Row = Row::from(new);
        written = Some(Row::clone(&new));
        Ok(new)
    })?;
    Ok(written)
}

fn add(row: &mut [Value], i: usize, delta: i64) {
    if let Some(Value::Int(v)) = row.get_mut(i) {
        *v += delta;
    }
}

/// New-order with inserts; returns (order id, total in cents).
pub fn new_order(tx: &mut Transaction<'_>, t: &TableIds, a: &NewOrder) -> Result<(i64, i64), TxnError> {
    let (w, d) = (Value::Int(a.w), Value::Int(a.d));
    let w_tax = float(&must(tx.get(t.warehouse, std::slice::from_ref(&w))?, "warehouse")?, 7);
    let customer = must(tx.get(t.customer, &[w.clone(), d.clone(), Value::Int(a.c)])?, "customer")?;
    let c_discount = float(&customer, 15);
    let district = update(tx, t.district, &[w.clone(), d.clone()], |r| add(r, 10, 1))?;
    let district = must(district, "district")?;
    let (d_tax, o_id) = (float(&district, 8), int(&district, 10) - 1);
    let all_local = i64::from(a.supply.iter().all(|&s| s == a.w));
    let lines = a.items.len() as i64;
    let order = vec![w.clone(), d.clone(), Value::Int(o_id), Value::Int(a.c), Value::Int(a.entry_d), Value::Null];
    let mut order = order;
    order.extend([Value::Int(lines), Value::Int(all_local)]);
    tx.insert(t.orders, Row::from(order))?;
    tx.insert(t.new_order, Row::from(vec![w.clone(), d.clone(), Value::Int(o_id)]))?;
    let mut total = 0;
    for (i, ((&iid, &sw), &qty)) in a.items.iter().zip(&a.supply).zip(&a.quantities).enumerate() {
        let Some(item) = tx.get(t.item, &[Value::Int(iid)])? else {
            return Err(TxnError::UserAbort("item number is not valid".into()));
        };
        let price = int(&item, 3);
        let key = [Value::Int(sw), Value::Int(iid)];
        let stock = must(tx.get(t.stock, &key)?, "stock")?;
        let s_quantity = int(&stock, 2);
        let new_q = if s_quantity < qty + 10 { s_quantity - qty + 91 } else { s_quantity - qty };
        let dist = stock.value(2 + a.d as usize).unwrap_or(Value::Null);
        let remote = i64::from(sw != a.w);
        update(tx, t.stock, &key, |r| {
            r[2] = Value::Int(new_q);
            add(r, 13, qty);
            add(r, 14, 1);
            add(r, 15, remote);
        })?;
        let amount = qty * price;
        total += amount;
        let line = vec![
            w.clone(),
            d.clone(),
            Value::Int(o_id),
            Value::Int(i as i64 + 1),
            Value::Int(iid),
            Value::Int(sw),
            Value::Null,
            Value::Int(qty),
            Value::Int(amount),
            dist,
        ];
        tx.insert(t.order_line, Row::from(line))?;
    }
    Ok((o_id, (total as f64 * (1.0 - c_discount) * (1.0 + w_tax + d_tax)) as i64))
}

/// The customer at position ceil(n/2) of those called `last`, ordered by first name.
fn customer_by_name(tx: &mut Transaction<'_>, t: &TableIds, cw: i64, cd: i64, last: &str) -> Result<i64, TxnError> {
    let prefix = [Value::Int(cw), Value::Int(cd), Value::text(last)];
    let range = KeyRange::from_values(&prefix, Bound::Unbounded, Bound::Unbounded)?;
    let scan = Scan { table: t.customer, index: Some(0), range, direction: Direction::Forward, limit: 1000 };
    let rows = tx.scan(&scan)?;
    if rows.is_empty() {
        return Err(TxnError::UserAbort(format!("no customer named {last}")));
    }
    Ok(int(&rows[rows.len().div_ceil(2) - 1], 2))
}

/// Payment with inserts; returns (customer id, balance).
pub fn payment(tx: &mut Transaction<'_>, t: &TableIds, a: &Payment) -> Result<(i64, i64), TxnError> {
    let (w, d) = (Value::Int(a.w), Value::Int(a.d));
    let warehouse = update(tx, t.warehouse, std::slice::from_ref(&w), |r| add(r, 8, a.amount))?;
    let w_name = must(warehouse, "warehouse")?.value(1).unwrap_or(Value::Null);
    let district = update(tx, t.district, &[w.clone(), d.clone()], |r| add(r, 9, a.amount))?;
    let d_name = must(district, "district")?.value(2).unwrap_or(Value::Null);
    let c = match &a.last {
        Some(last) => customer_by_name(tx, t, a.cw, a.cd, last)?,
        None => a.c,
    };
    let key = [Value::Int(a.cw), Value::Int(a.cd), Value::Int(c)];
    let customer = update(tx, t.customer, &key, |r| {
        add(r, 16, -a.amount);
        add(r, 17, a.amount);
        add(r, 18, 1);
    })?;
    let customer = must(customer, "customer")?;
    if customer.get(13).and_then(ValueRef::as_text) == Some("BC") {
        let old = customer.get(20).and_then(ValueRef::as_text).unwrap_or("");
        let data = format!("{c} {} {} {} {} {} | {old}", a.cd, a.cw, a.d, a.w, a.amount);
        let data: String = data.chars().take(500).collect();
        update(tx, t.customer, &key, |r| r[20] = Value::text(&data))?;
    }
    let h_data = match (w_name.as_text(), d_name.as_text()) {
        (Some(wn), Some(dn)) => Value::text(&format!("{wn}    {dn}")),
        _ => Value::Null,
    };
    let history = vec![
        Value::Int(c),
        Value::Int(a.cd),
        Value::Int(a.cw),
        d,
        w,
        Value::Int(a.h_date),
        Value::Int(a.amount),
        h_data,
    ];
    tx.insert(t.history, Row::from(history))?;
    Ok((c, int(&customer, 16)))
}
