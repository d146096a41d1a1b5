//! Short deterministic histories and their models, for the power-loss oracle
//! ([`super::power_loss`]) and the reliability sweeps of `tests/`.
//!
//! A history is a list of steps (module loads, procedure calls, ad-hoc puts) run on one thread,
//! so its serial order is the order of issue. Its model is the database state after every prefix
//! of the steps ([`History::states`]), as a sorted list of lines ([`Dump`]): one per table, per
//! row and per procedure the catalog holds. [`dump`] reads the same lines from a database and
//! checks that every secondary index holds exactly its table's rows.

use super::power_loss::Setup;
use crate::db::Database;
use crate::storage::{Direction, KeyRange, ParamValue, TableId, Value};
use crate::txn::Scan;

pub const KV_DEL_SOURCE: &str = "procedure kv_del(kname text) { delete from kv where k = kname; }";
/// The procedures the histories' modules define (a state lists those the catalog holds).
pub const PROCEDURES: [&str; 8] =
    ["open_account", "transfer", "balance", "branch_total", "kv_load", "kv_get", "kv_set", "kv_del"];

pub fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

pub fn text(s: &str) -> ParamValue {
    ParamValue::Scalar(Value::text(s))
}

#[derive(Clone, Debug)]
pub enum Step {
    Module {
        name: &'static str,
        source: &'static str,
    },
    Call {
        worker: usize,
        procedure: &'static str,
        args: Vec<ParamValue>,
    },
    /// An ad-hoc transaction (no procedure) that puts one row.
    Put {
        worker: usize,
        table: &'static str,
        row: Vec<Value>,
    },
}

/// A deterministic history and the state after each of its prefixes (`states[p]` is the state
/// after steps `0..p`).
pub struct History {
    pub name: &'static str,
    pub steps: Vec<Step>,
    pub states: Vec<Dump>,
    pub setup: Setup,
}

/// A database state: one line per table and per row, sorted.
pub type Dump = Vec<String>;

pub fn row_line(table: &str, row: &[Value]) -> String {
    format!("{table} {row:?}")
}

/// Money moves between 6 accounts; the total is invariant and each step is checkable.
pub fn transfer_history(setup: Setup, steps_total: usize) -> History {
    const ACCOUNTS: usize = 6;
    const INITIAL: i64 = 100;
    let source = crate::workload::transfer::SOURCE;
    let mut steps = vec![Step::Module { name: "transfer.proc", source }];
    let mut balances: Vec<Option<i64>> = vec![None; ACCOUNTS];
    let dump = |balances: &[Option<i64>]| -> Dump {
        let mut out = vec!["table account".to_string()];
        out.extend(PROCEDURES[..4].iter().map(|p| format!("procedure {p}")));
        for (id, b) in balances.iter().enumerate() {
            if let Some(b) = b {
                let row = [Value::Int(id as i64), Value::Int((id % 2) as i64), Value::Int(*b)];
                out.push(row_line("account", &row));
            }
        }
        out.sort();
        out
    };
    let mut states = vec![Vec::new(), dump(&balances)];
    for id in 0..ACCOUNTS {
        let args = vec![int(id as i64), int((id % 2) as i64), int(INITIAL)];
        steps.push(Step::Call { worker: id % 2, procedure: "open_account", args });
        balances[id] = Some(INITIAL);
        states.push(dump(&balances));
    }
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    while steps.len() < steps_total {
        let r = next_random(&mut rng);
        let src = (r % ACCOUNTS as u64) as usize;
        let dst = (src + 1 + ((r >> 8) % (ACCOUNTS as u64 - 1)) as usize) % ACCOUNTS;
        let amount = 1 + ((r >> 16) % 40) as i64;
        if balances[src].unwrap_or(0) < amount {
            continue; // the procedure would abort: not a step of the serial order
        }
        balances[src] = balances[src].map(|b| b - amount);
        balances[dst] = balances[dst].map(|b| b + amount);
        let args = vec![int(src as i64), int(dst as i64), int(amount)];
        steps.push(Step::Call { worker: steps.len() % 2, procedure: "transfer", args });
        states.push(dump(&balances));
    }
    History { name: "transfer", steps, states, setup }
}

/// Versioned values on 5 keys (kv.proc's `kv_set`), with deletes from a second module loaded
/// mid-history (so the catalog is rewritten while data is being logged). With `adhoc_every` > 0,
/// every so many steps the set is an ad-hoc transaction (a put of the row `kv_set` would write).
pub fn kv_history(setup: Setup, steps_total: usize, adhoc_every: usize) -> History {
    const KEYS: u64 = 5;
    const DEL_MODULE_AT: usize = 5;
    let mut steps = vec![Step::Module { name: "kv.proc", source: crate::workload::kv::SOURCE }];
    let mut model: std::collections::BTreeMap<String, (u64, String)> = Default::default();
    let dump = |model: &std::collections::BTreeMap<String, (u64, String)>, deletes: bool| -> Dump {
        let mut out = vec!["table kv".to_string()];
        let procedures = if deletes { &PROCEDURES[4..] } else { &PROCEDURES[4..7] };
        out.extend(procedures.iter().map(|p| format!("procedure {p}")));
        out.extend(model.iter().map(|(k, (_, v))| row_line("kv", &[Value::text(k), Value::text(v)])));
        out.sort();
        out
    };
    let mut states = vec![Vec::new(), dump(&model, false)];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    while steps.len() < steps_total {
        let i = steps.len();
        if i == DEL_MODULE_AT {
            steps.push(Step::Module { name: "kv_del.proc", source: KV_DEL_SOURCE });
            states.push(dump(&model, true));
            continue;
        }
        let r = next_random(&mut rng);
        let key = crate::workload::kv::key_name(r % KEYS);
        if i > DEL_MODULE_AT && (r >> 8).is_multiple_of(4) {
            model.remove(&key);
            steps.push(Step::Call { worker: i % 2, procedure: "kv_del", args: vec![text(&key)] });
        } else {
            let data = format!("d{i}{}", "x".repeat(setup.value_pad_bytes));
            let version = model.get(&key).map_or(1, |(v, _)| v + 1);
            let value = format!("{version:012}{data}");
            model.insert(key.clone(), (version, value.clone()));
            if adhoc_every > 0 && i % adhoc_every == 0 {
                let row = vec![Value::text(&key), Value::text(&value)];
                steps.push(Step::Put { worker: i % 2, table: "kv", row });
            } else {
                steps.push(Step::Call { worker: i % 2, procedure: "kv_set", args: vec![text(&key), text(&data)] });
            }
        }
        states.push(dump(&model, i > DEL_MODULE_AT));
    }
    History { name: "kv", steps, states, setup }
}

pub fn next_random(state: &mut u64) -> u64 {
    // xorshift64*: deterministic, no dependency on the rand crate's stream stability.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

pub fn scan_rows(worker: &mut crate::Worker, table: TableId, index: Option<usize>) -> Result<Vec<Vec<Value>>, String> {
    let scan = Scan { table, index, range: KeyRange::all(), direction: Direction::Forward, limit: 10_000 };
    let (rows, _) = worker.run(100, |tx| tx.scan(&scan)).map_err(|e| e.to_string())?;
    Ok(rows.iter().map(|r| r.to_vec()).collect())
}

/// The state of `db`; an error if a secondary index disagrees with its table.
pub fn dump(db: &Database) -> Result<Dump, String> {
    let catalog = db.catalog();
    let mut worker = db.try_worker().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for table in catalog.tables() {
        let name = &table.schema.name;
        out.push(format!("table {name}"));
        let rows = scan_rows(&mut worker, table.id, None)?;
        let mut primary: Vec<String> = rows.iter().map(|r| row_line(name, r)).collect();
        primary.sort();
        for i in 0..table.schema.indexes.len() {
            let mut by_index: Vec<String> =
                scan_rows(&mut worker, table.id, Some(i))?.iter().map(|r| row_line(name, r)).collect();
            by_index.sort();
            if by_index != primary {
                return Err(format!("index {i} of {name} disagrees with its table: {by_index:?} vs {primary:?}"));
            }
        }
        out.extend(primary);
    }
    // Every registered procedure, whatever the history: a recovered catalog must hold exactly the
    // acknowledged modules.
    out.extend(db.procedures().all().iter().map(|p| format!("procedure {}", p.name().to_ascii_lowercase())));
    out.sort();
    Ok(out)
}

/// The state after running the steps `indices` (in order) of `history` on an in-memory database
/// that never crashes; `None` if one of them fails there.
pub fn state_of(history: &History, indices: &[usize]) -> Option<Dump> {
    let db = Database::open(crate::db::DatabaseConfig::default()).ok()?;
    let mut workers = [db.try_worker().ok()?, db.try_worker().ok()?];
    for &i in indices {
        let ok = match &history.steps[i] {
            Step::Module { name, source } => db.load_module(name, source).is_ok(),
            Step::Call { worker, procedure, args } => workers[*worker].call(procedure, args).is_ok(),
            Step::Put { worker, table, row } => super::power_loss::put(&mut workers[*worker], table, row).is_ok(),
        };
        if !ok {
            return None;
        }
    }
    let state = dump(&db).ok();
    drop(workers);
    let _ = db.close();
    state
}

/// Candidate sets tried by [`dependency_closed_match`] at most (each is a reference run).
pub const CLOSED_SETS_MAX: usize = 5000;

/// Taurus recovers every logged transaction whose predecessors are recovered, so when a logger
/// loses its tail, later independent transactions of the other logger survive: the state is the
/// serial history of a dependency-closed set of steps, a prefix of a serial order that differs
/// from the issue order only between transactions that do not conflict. This looks for such a
/// set: every step before `acked`, and of the steps in `acked..issued` all but at most three
/// (most states of this kind drop one or two steps). Returns the steps dropped.
pub fn dependency_closed_match(history: &History, state: &Dump, acked: usize, issued: usize) -> Option<Vec<usize>> {
    let issued = issued.min(history.steps.len());
    let mut tried = 0;
    for end in (acked + 1..=issued).rev() {
        // Dropping the last steps gives a prefix, which the caller tried already: the step
        // before `end` is kept.
        let open: Vec<usize> = (acked..end - 1).collect();
        for dropped_count in 1..=3usize.min(open.len()) {
            for dropped in combinations(&open, dropped_count) {
                tried += 1;
                if tried > CLOSED_SETS_MAX {
                    return None;
                }
                let kept: Vec<usize> = (0..end).filter(|i| !dropped.contains(i)).collect();
                if state_of(history, &kept).as_ref() == Some(state) {
                    return Some(dropped);
                }
            }
        }
    }
    None
}

fn combinations(items: &[usize], k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, &first) in items.iter().enumerate() {
        for mut rest in combinations(&items[i + 1..], k - 1) {
            rest.insert(0, first);
            out.push(rest);
        }
    }
    out
}
