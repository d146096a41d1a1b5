//! `LogScheme::wait_committed_durable`: after it returns, every transaction whose commit had
//! returned is durable, under every scheme (tools use it to make a bulk load durable without
//! holding each ticket; an empty transaction's ticket names no log position and does not serve).

use lazarus::crash::CrashConfig;
use lazarus::durability::indexed::{IndexMode, IndexedLogging, IndexedOptions};
use lazarus::durability::{DurabilityTicket, LogScheme};
use lazarus::storage::{ParamValue, Value};
use lazarus::{Database, DatabaseConfig};
use std::sync::Arc;

const SOURCE: &str = "
table kv (k int not null, v int not null, primary key (k));
procedure put(k int, v int) {
    select v into old from kv where k = k;
    if found { update kv set v = v where k = k; } else { insert into kv values (k, v); }
}
";

/// Commits on two workers without waiting for durability; returns every ticket.
fn commit_without_waiting(db: &Database, per_worker: i64) -> Vec<DurabilityTicket> {
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut worker = db.worker();
                let args =
                    |i: i64| [ParamValue::Scalar(Value::Int(i % 64)), ParamValue::Scalar(Value::Int(w * 1000 + i))];
                (0..per_worker)
                    .map(|i| worker.call_retrying("put", &args(i), 1000).unwrap().committed.durability)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
}

fn check(scheme: Arc<dyn LogScheme>) {
    let name = scheme.name();
    let db = Database::open(DatabaseConfig { epoch_interval_ms: 20, scheme, ..DatabaseConfig::default() }).unwrap();
    db.load_module("kv.proc", SOURCE).unwrap();
    let tickets = commit_without_waiting(&db, 300);
    db.scheme().wait_committed_durable().unwrap();
    let pending = tickets.iter().filter(|t| !db.scheme().is_durable(t)).count();
    assert_eq!(pending, 0, "{name}: {pending} of {} commits not durable after wait_committed_durable", tickets.len());
    db.close().unwrap();
}

#[test]
fn every_scheme_makes_what_committed_before_the_call_durable() {
    for durability in lazarus::crash::SCHEMES {
        let dir = tempfile::tempdir().unwrap();
        let config =
            CrashConfig { durability: durability.to_string(), checkpoint_interval_ms: 0, ..CrashConfig::default() };
        let (scheme, _) = config.scheme(dir.path()).unwrap();
        check(scheme);
    }
    for mode in [IndexMode::Async, IndexMode::Sync] {
        let dir = tempfile::tempdir().unwrap();
        let options = IndexedOptions::new(vec![dir.path().to_path_buf()], mode);
        check(Arc::new(IndexedLogging::new(options).unwrap()));
    }
    check(Arc::new(lazarus::durability::none::NoLogging));
}
