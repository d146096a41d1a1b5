//! Histories of the benchmark workloads for the sweeps: Smallbank, YCSB and a tiny TPC-C, each
//! the workload's own module (`workloads/*.proc`) loaded and run through its procedures.
//!
//! **Their model is a reference run.** Writing an independent model of TPC-C's five procedures
//! would duplicate the procedures; what the sweeps check is durability, so the state after each
//! prefix is taken from the same steps run on an in-memory database (`DatabaseConfig::default()`,
//! scheme `none`) that never crashes. A step the reference run aborts (e.g. Smallbank's
//! insufficient funds) is dropped from the history, so every step commits, as in
//! [`super::transfer_history`]. The procedures are deterministic (no clock: dates are
//! parameters), so a recovery that is a prefix of the history gives one of these states exactly.

use super::{Dump, History, Setup, Step, dump, int, text};
use lazarus::storage::{ColumnType, ParamValue, Value};
use lazarus::{Database, DatabaseConfig};

/// Runs `candidates` on a database that never crashes, keeps the steps that commit, and records
/// the state after each prefix.
pub fn reference_history(name: &'static str, setup: Setup, candidates: Vec<Step>) -> History {
    let db = Database::open(DatabaseConfig::default()).expect("in-memory database");
    let mut workers = [db.worker(), db.worker()];
    let mut steps = Vec::new();
    let mut states: Vec<Dump> = vec![dump(&db).expect("dump")];
    let mut aborted = 0;
    for step in candidates {
        let committed = match &step {
            Step::Module { name, source } => db.load_module(name, source).map(drop).map_err(|e| e.to_string()),
            Step::Call { worker, procedure, args } => {
                workers[*worker].call(procedure, args).map(drop).map_err(|e| e.to_string())
            }
            Step::Put { .. } => panic!("reference histories use procedures only"),
        };
        match committed {
            Ok(()) => {
                steps.push(step);
                states.push(dump(&db).expect("dump"));
            }
            Err(e) => {
                assert!(!matches!(step, Step::Module { .. }), "{name}: {e}");
                aborted += 1;
            }
        }
    }
    // A few aborts are the workload's own (insufficient funds); many would be a broken history.
    assert!(aborted * 4 <= steps.len(), "{name}: {aborted} of the candidate steps aborted");
    drop(workers);
    db.close().expect("close");
    History { name, steps, states, setup }
}

fn call(worker: usize, procedure: &'static str, args: Vec<ParamValue>) -> Step {
    Step::Call { worker, procedure, args }
}

fn array(values: Vec<Value>) -> ParamValue {
    ParamValue::Array(values.into())
}

fn float(v: f64) -> ParamValue {
    ParamValue::Scalar(Value::Float(v))
}

/// Smallbank (`smallbank.proc`) on 6 customers: a bulk load, then the six transactions with
/// Smallbank's amounts and a fixed pseudo-random choice of customers.
pub fn smallbank_history(setup: Setup, steps_total: usize) -> History {
    use lazarus::workload::smallbank::{self, TxnKind};
    const CUSTOMERS: u32 = 6;
    let mut candidates = vec![Step::Module { name: "smallbank.proc", source: smallbank::SOURCE }];
    let ids: Vec<u32> = (0..CUSTOMERS).collect();
    let load = vec![
        array(ids.iter().map(|&i| Value::Int(i64::from(i))).collect()),
        array(ids.iter().map(|&i| Value::text(&smallbank::customer_name(i))).collect()),
        array(ids.iter().map(|&i| Value::Float(smallbank::initial_balance(i, false))).collect()),
        array(ids.iter().map(|&i| Value::Float(smallbank::initial_balance(i, true))).collect()),
    ];
    candidates.push(call(0, "sb_load", load));
    let mut rng = 0xD1B5_4A32_D192_ED03u64;
    while candidates.len() < steps_total + 8 {
        let r = super::next_random(&mut rng);
        let a = (r % u64::from(CUSTOMERS)) as u32;
        let b = (a + 1 + ((r >> 8) % u64::from(CUSTOMERS - 1)) as u32) % CUSTOMERS;
        let name = text(&smallbank::customer_name(a));
        let kind = TxnKind::ALL[((r >> 16) % TxnKind::ALL.len() as u64) as usize];
        let args = match kind {
            TxnKind::Amalgamate => vec![int(i64::from(a)), int(i64::from(b))],
            TxnKind::Balance => vec![name],
            TxnKind::DepositChecking => vec![name, float(smallbank::DEPOSIT_CHECKING_AMOUNT)],
            TxnKind::SendPayment => vec![int(i64::from(a)), int(i64::from(b)), float(smallbank::SEND_PAYMENT_AMOUNT)],
            TxnKind::TransactSavings => vec![name, float(smallbank::TRANSACT_SAVINGS_AMOUNT)],
            TxnKind::WriteCheck => vec![name, float(smallbank::WRITE_CHECK_AMOUNT)],
        };
        candidates.push(call(candidates.len() % 2, kind.procedure(), args));
    }
    truncate(reference_history("smallbank", setup, candidates), steps_total)
}

/// YCSB (`ycsb.proc`): 6 keys of SiloR's table and 3 tuples of Taurus's, loaded in bulk, then
/// gets and puts (70/30) and Taurus's read-two-write-two, with 16-byte values.
pub fn ycsb_history(setup: Setup, steps_total: usize) -> History {
    const KEYS: u64 = 6;
    const TUPLES: u64 = 3;
    let bytes = |seed: u64| Value::Bytes(format!("{seed:016x}").into_bytes().into());
    let mut candidates = vec![Step::Module { name: "ycsb.proc", source: lazarus::workload::ycsb::SOURCE }];
    candidates.push(call(0, "ycsb_load_kv", vec![int(0), array((0..KEYS).map(bytes).collect())]));
    let fields = (0..TUPLES * lazarus::workload::ycsb::FIELDS as u64).map(|i| bytes(1000 + i)).collect();
    candidates.push(call(1, "ycsb_load_usertable", vec![int(0), array(fields)]));
    let mut rng = 0x94D0_49BB_1331_11EBu64;
    while candidates.len() < steps_total {
        let r = super::next_random(&mut rng);
        let worker = candidates.len() % 2;
        let k = (r % KEYS) as i64;
        let step = match (r >> 8) % 10 {
            0..=3 => call(worker, "ycsb_get", vec![int(k)]),
            4..=6 => call(worker, "ycsb_put", vec![int(k), ParamValue::Scalar(bytes(r >> 20))]),
            _ => {
                let t = |shift: u64| int(((r >> shift) % TUPLES) as i64);
                let f = |shift: u64| int(((r >> shift) % 10) as i64);
                let v = |shift: u64| ParamValue::Scalar(bytes(r >> shift));
                call(
                    worker,
                    "ycsb_read2_write2",
                    vec![t(12), f(14), t(16), f(18), t(20), f(22), v(24), t(26), f(28), v(30)],
                )
            }
        };
        candidates.push(step);
    }
    reference_history("ycsb", setup, candidates)
}

/// A tiny TPC-C (`tpcc.proc`): 1 warehouse, 2 districts, 2 customers per district, 4 items and
/// their stock, loaded by one procedure of a second module (`tpcc_tiny_load`, generated from the
/// schema), then New-Order (with inserts), Payment (by customer id), Delivery, Order-Status and
/// Stock-Level, with dates from the step number.
pub fn tpcc_history(setup: Setup, steps_total: usize) -> History {
    const DISTRICTS: i64 = 2;
    const CUSTOMERS: i64 = 2;
    const ITEMS: i64 = 4;
    let mut candidates = vec![
        Step::Module { name: "tpcc.proc", source: lazarus::workload::tpcc::SOURCE },
        Step::Module { name: "tpcc_tiny_load.proc", source: tpcc_tiny_load_source(DISTRICTS, CUSTOMERS, ITEMS) },
        call(0, "tpcc_tiny_load", vec![]),
    ];
    let mut rng = 0xBF58_476D_1CE4_E5B9u64;
    while candidates.len() < steps_total {
        let r = super::next_random(&mut rng);
        let i = candidates.len() as i64;
        let worker = candidates.len() % 2;
        let d = int(1 + (r % DISTRICTS as u64) as i64);
        let c = int(1 + ((r >> 4) % CUSTOMERS as u64) as i64);
        let step = match (r >> 8) % 10 {
            0..=3 => {
                let lines = 1 + ((r >> 12) % 3) as usize;
                let items = (0..lines).map(|l| Value::Int(1 + ((r >> (16 + 2 * l)) % ITEMS as u64) as i64)).collect();
                let supply = (0..lines).map(|_| Value::Int(1)).collect();
                let quantities = (0..lines).map(|l| Value::Int(1 + ((r >> (24 + 3 * l)) % 8) as i64)).collect();
                let args = vec![int(1), d, c, array(items), array(supply), array(quantities), int(i), bool_(true)];
                call(worker, "new_order", args)
            }
            4..=6 => {
                let amount = int(100 + ((r >> 16) % 5000) as i64);
                let args =
                    vec![int(1), d.clone(), int(1), d, c, ParamValue::Scalar(Value::Null), amount, int(i), bool_(true)];
                call(worker, "payment", args)
            }
            7 => call(worker, "delivery", vec![int(1), int(1 + (r % 10) as i64), int(i), bool_(true)]),
            8 => call(worker, "order_status", vec![int(1), d, c, ParamValue::Scalar(Value::Null)]),
            _ => call(worker, "stock_level", vec![int(1), d, int(15)]),
        };
        candidates.push(step);
    }
    reference_history("tpcc", setup, candidates)
}

fn bool_(b: bool) -> ParamValue {
    ParamValue::Scalar(Value::Bool(b))
}

/// Keeps the first `steps` steps (and their states).
fn truncate(mut history: History, steps: usize) -> History {
    history.steps.truncate(steps);
    history.states.truncate(steps + 1);
    history
}

/// A procedure that inserts the tiny TPC-C's rows: every column of every table from the
/// schema in `tpcc.proc`, ids in the key columns and small fixed values elsewhere.
fn tpcc_tiny_load_source(districts: i64, customers: i64, items: i64) -> &'static str {
    let db = Database::open(DatabaseConfig::default()).expect("in-memory database");
    db.load_module("tpcc.proc", lazarus::workload::tpcc::SOURCE).expect("tpcc.proc");
    let catalog = db.catalog();
    let mut keys: Vec<(&str, Vec<i64>)> = vec![("warehouse", vec![1])];
    keys.extend((1..=districts).map(|d| ("district", vec![1, d])));
    for d in 1..=districts {
        keys.extend((1..=customers).map(|c| ("customer", vec![1, d, c])));
    }
    keys.extend((1..=items).map(|i| ("item", vec![i])));
    keys.extend((1..=items).map(|i| ("stock", vec![1, i])));
    let mut body = String::new();
    for (table, key) in keys {
        let schema = &catalog.table_by_name(table).expect("tpcc table").schema;
        let values: Vec<String> = schema
            .columns
            .iter()
            .enumerate()
            .map(|(c, column)| match schema.primary_key.iter().position(|&k| k == c) {
                Some(k) => key[k].to_string(),
                None => match column.ty {
                    // Counters and next order ids start at 1; prices, quantities, balances at 20.
                    ColumnType::Int if column.name.ends_with("next_o_id") => "1".into(),
                    ColumnType::Int => "20".into(),
                    ColumnType::Float => "0.05".into(),
                    _ => format!("'{}{}'", column.name, key.iter().map(i64::to_string).collect::<String>()),
                },
            })
            .collect();
        body.push_str(&format!("    insert into {table} values ({});\n", values.join(", ")));
    }
    db.close().expect("close");
    Box::leak(format!("procedure tpcc_tiny_load() {{\n{body}}}\n").into_boxed_str())
}

/// Runs all of `history` on a fresh simulated disk, every step acknowledged, and closes it.
pub fn run_to_end(history: &History) -> lazarus::io::sim::SimDisk {
    let disk = lazarus::io::sim::SimDisk::new();
    let db = super::open(history.setup, &disk).expect("open");
    let steps = history.steps.len();
    let run = super::run_history(&db, &disk, history, 0..steps, false);
    assert_eq!(run.acked, steps, "{}: {:?}", history.name, run.first_error);
    db.close().expect("close");
    disk
}

/// Runs `history` one step at a time under its setup, checking the state after each against the
/// model, then crashes the disk (`seed`) without closing and requires recovery to give the last
/// state.
pub fn assert_history_matches_step_by_step(history: &History, seed: u64) {
    let disk = lazarus::io::sim::SimDisk::new();
    let db = super::open(history.setup, &disk).expect("open");
    for p in 0..history.steps.len() {
        let run = super::run_history(&db, &disk, history, p..p + 1, false);
        let what = format!("{}/{}", history.setup.label, history.name);
        assert_eq!(run.acked, p + 1, "{what}: step {p}: {:?}", run.first_error);
        assert_eq!(dump(&db).expect("dump"), history.states[p + 1], "{what} after {} steps", p + 1);
    }
    drop(db);
    let recovered = super::open(history.setup, &disk.crash(seed)).expect("recover");
    assert_eq!(dump(&recovered).expect("dump"), history.states[history.steps.len()], "{}", history.name);
    let _ = recovered.close();
}
