//! A read-only transaction is acknowledged once what it observed is durable, not the whole
//! current epoch: the epochs of the rows it read, and of deletes behind keys it found absent.

use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::durability::{DurabilityTicket, LogScheme};
use lazarus::storage::Row;
use lazarus::storage::Value;
use lazarus::{Database, DatabaseConfig};
use std::sync::Arc;

fn open(dir: &std::path::Path) -> (Database, Arc<ValueLogging>) {
    let mut options = ValueOptions::new(vec![dir.to_path_buf()]);
    options.checkpoint.interval_ms = 0;
    let scheme = Arc::new(ValueLogging::new(options).unwrap());
    let config = DatabaseConfig {
        epoch_interval_ms: 5,
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..Default::default()
    };
    (Database::open(config).unwrap(), scheme)
}

fn epoch_of(ticket: &DurabilityTicket) -> u64 {
    match ticket {
        DurabilityTicket::Epoch(e) => *e,
        other => panic!("expected an epoch ticket, got {other:?}"),
    }
}

#[test]
fn a_read_only_transaction_waits_only_for_what_it_observed() {
    let dir = tempfile::tempdir().unwrap();
    let (db, scheme) = open(dir.path());
    db.load_module("t.proc", "table t (k int not null, v int not null, primary key (k));").unwrap();
    let mut w = db.worker();
    let put = |w: &mut lazarus::db::Worker, k: i64, v: i64| {
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        txn.put(t, Row::new(vec![Value::Int(k), Value::Int(v)])).unwrap();
        txn.commit().unwrap()
    };
    let old = put(&mut w, 1, 10);
    w.wait_durable(&old.durability).unwrap();
    // Let the epoch move well past the durable row.
    let later = put(&mut w, 99, 0);
    w.wait_durable(&later.durability).unwrap();
    let get = |w: &mut lazarus::db::Worker, k: i64| {
        let mut txn = w.begin();
        let t = txn.table_id("t").unwrap();
        let row = txn.get(t, &[Value::Int(k)]).unwrap();
        (row, txn.commit().unwrap())
    };
    // Reading the durable row: the ticket is that row's epoch, durable at once.
    let (row, read) = get(&mut w, 1);
    assert_eq!(row.unwrap().at(1), Value::Int(10));
    assert_eq!(epoch_of(&read.durability), old.tid.epoch());
    assert!(read.tid.epoch() > old.tid.epoch(), "the reader ran in a later epoch");
    assert!(scheme.is_durable(&read.durability), "a read of durable data waits for nothing");
    // Reading a row just written (maybe not durable yet): the ticket is the writer's epoch.
    let fresh = put(&mut w, 2, 20);
    let (_, read) = get(&mut w, 2);
    assert_eq!(epoch_of(&read.durability), fresh.tid.epoch());
    // Finding a key absent after a delete: the ticket covers the delete's epoch.
    let mut txn = w.begin();
    let t = txn.table_id("t").unwrap();
    assert!(txn.delete(t, &[Value::Int(1)]).unwrap());
    let deleted = txn.commit().unwrap();
    let (row, read) = get(&mut w, 1);
    assert!(row.is_none());
    assert!(epoch_of(&read.durability) >= deleted.tid.epoch(), "absence after a delete must wait for the delete");
    w.wait_durable(&read.durability).unwrap();
    db.close().unwrap();
}
