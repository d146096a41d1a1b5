//! Recovery in the parent and the checks of a trial:
//!
//! (a) every acknowledged transaction is present: KV keys at least at their acknowledged version,
//!     TPC-C orders of acknowledged new-orders and history rows of acknowledged payments;
//! (b) the state is consistent: TPC-C conditions 1–4, the transfer total, and for KV every key
//!     present with a version no larger than the sets issued on it.

use super::acks::AckLog;
use super::{CrashConfig, CrashError, SchemeHandle};
use crate::db::{Database, DatabaseConfig, DbError};
use crate::storage::{TableId, Value};
use crate::workload::kv;
use std::path::Path;

/// Point reads per verifying transaction.
const GETS_PER_TXN: usize = 256;
/// Problems listed in full; the rest are counted.
const PROBLEMS_SHOWN: usize = 5;

/// Opens (recovers) the database on `log_dir`. The error is the database's own, so that a
/// caller can tell [`crate::durability::DurabilityError::Corrupt`] from other failures.
pub fn recover(config: &CrashConfig, log_dir: &Path) -> Result<(Database, RecoverySummary), DbError> {
    let scheme = config.scheme(log_dir).map_err(|e| match e {
        CrashError::Durability(d) => DbError::Durability(d),
        other => DbError::Config(other.to_string()),
    })?;
    let (scheme, handle) = scheme;
    let db = Database::open(DatabaseConfig {
        epoch_interval_ms: config.epoch_interval_ms,
        scheme,
        ..DatabaseConfig::default()
    })?;
    let summary = match handle {
        SchemeHandle::Value(v) => v.recovery.lock().clone().map(|r| RecoverySummary {
            pepoch: Some(r.pepoch),
            files: r.files,
            checkpoint: r.checkpoint,
        }),
        SchemeHandle::Stream(s) => s.recovery.lock().clone().map(|r| RecoverySummary {
            pepoch: None,
            files: r.files,
            checkpoint: r.checkpoint,
        }),
    };
    Ok((db, summary.unwrap_or_default()))
}

/// What a trial reports of a recovery, whichever scheme ran it.
#[derive(Clone, Debug, Default)]
pub struct RecoverySummary {
    /// The persistent epoch recovered to (value logs; stream logs have none).
    pub pepoch: Option<u64>,
    /// Log files read.
    pub files: usize,
    /// The checkpoint loaded, if any.
    pub checkpoint: Option<crate::durability::checkpoint::loader::CheckpointLoadReport>,
}

/// The problems found in a recovered database, empty when it passes.
pub fn verify(config: &CrashConfig, db: &Database, acks: &AckLog) -> Result<Vec<String>, CrashError> {
    let mut problems = Vec::new();
    match config.workload.as_str() {
        "kv" => verify_kv(config, db, acks, &mut problems)?,
        "tpcc" => {
            verify_tpcc_acks(db, acks, &mut problems)?;
            check_workload(config, db, &mut problems)?;
        }
        _ => check_workload(config, db, &mut problems)?,
    }
    if problems.len() > PROBLEMS_SHOWN {
        let more = problems.len() - PROBLEMS_SHOWN;
        problems.truncate(PROBLEMS_SHOWN);
        problems.push(format!("... and {more} more"));
    }
    Ok(problems)
}

/// The workload's own consistency check; an inconsistency is a problem, not an error.
fn check_workload(config: &CrashConfig, db: &Database, problems: &mut Vec<String>) -> Result<(), CrashError> {
    match config.workload()?.check(db) {
        Ok(()) => Ok(()),
        Err(crate::bench::workload::WorkloadError::Inconsistent(m)) => {
            problems.push(m);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

fn verify_kv(config: &CrashConfig, db: &Database, acks: &AckLog, problems: &mut Vec<String>) -> Result<(), CrashError> {
    let records = usize::try_from(config.records).map_err(|_| CrashError::Options("too many records".into()))?;
    let mut seen = vec![false; records];
    for (key, version) in kv::versions(db)? {
        let Some(n) = kv::key_index(&key).filter(|&n| n < config.records) else {
            problems.push(format!("{key}: not a key of this workload"));
            continue;
        };
        seen[n as usize] = true;
        let acked = acks.kv_acked.get(&n).copied().unwrap_or(0);
        let issued = acks.issued.get(&n).copied().unwrap_or(0);
        if version < acked {
            problems.push(format!("{key} recovered at version {version}, but version {acked} was acknowledged"));
        }
        if version > issued {
            problems.push(format!("{key} recovered at version {version}, above the {issued} sets issued on it"));
        }
    }
    if let Some(missing) = seen.iter().position(|&s| !s) {
        let count = seen.iter().filter(|&&s| !s).count();
        problems.push(format!("{count} keys are missing, the first is {}", kv::key_name(missing as u64)));
    }
    Ok(())
}

fn verify_tpcc_acks(db: &Database, acks: &AckLog, problems: &mut Vec<String>) -> Result<(), CrashError> {
    let ids = crate::workload::tpcc::TableIds::of(db)?;
    let orders: Vec<[Value; 3]> = acks.orders.iter().map(|&(w, d, o)| [w, d, o].map(Value::Int)).collect();
    for (i, found) in present(db, ids.orders, &orders)?.into_iter().enumerate() {
        if !found {
            let (w, d, o) = acks.orders[i];
            problems.push(format!("order (w {w}, d {d}, o {o}) of an acknowledged new-order is missing"));
        }
    }
    let history: Vec<[Value; 4]> = acks.payments.iter().map(|&(cw, cd, c, h)| [cw, cd, c, h].map(Value::Int)).collect();
    for (i, found) in present(db, ids.history, &history)?.into_iter().enumerate() {
        if !found {
            let (cw, cd, c, h) = acks.payments[i];
            problems
                .push(format!("history row (w {cw}, d {cd}, c {c}, date {h}) of an acknowledged payment is missing"));
        }
    }
    Ok(())
}

/// Whether each primary key of `keys` is in `table`.
fn present<const N: usize>(db: &Database, table: TableId, keys: &[[Value; N]]) -> Result<Vec<bool>, CrashError> {
    let mut worker = db.try_worker()?;
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(GETS_PER_TXN) {
        let (found, _) = worker.run(100, |tx| {
            chunk.iter().map(|key| tx.get(table, key).map(|row| row.is_some())).collect::<Result<Vec<_>, _>>()
        })?;
        out.extend(found);
    }
    Ok(out)
}
