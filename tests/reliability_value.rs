//! Reliability of the value scheme (SiloR) on the simulated disk (`lazarus::io::sim`): power loss
//! at every I/O of a short history and of recovery itself, a log-damage sweep, and injected I/O
//! errors. The oracle and the sweeps are in `tests/common/`; `docs/RELIABILITY.md` has the numbers
//! and the commands that produce them.

mod common;

use common::*;
use lazarus::io::sim::{Fault, FaultError, OpKind, SimDisk};
use lazarus::io::{FileSystem, OpenMode};
use std::path::Path;

#[test]
fn power_loss_at_every_io_transfer_recovers_a_prefix_with_every_acknowledged_step() {
    let history = transfer_history(VALUE, 24);
    power_loss_sweep(&history).assert_clean("value/transfer power loss");
}

#[test]
fn power_loss_at_every_io_kv_recovers_a_prefix_with_every_acknowledged_step() {
    let history = kv_history(VALUE, 24, 0);
    power_loss_sweep(&history).assert_clean("value/kv power loss");
}

#[test]
fn log_damage_sweep_kv_cuts_the_tail_and_names_damage_in_the_durable_part() {
    let (tally, offsets) = damage_sweep(&kv_history(VALUE, 24, 0), false);
    println!("RELIABILITY value/kv damage sweep: {offsets} damaged images");
    tally.assert_clean("value/kv damage");
}

#[test]
fn log_damage_sweep_transfer_cuts_the_tail_and_names_damage_in_the_durable_part() {
    let (tally, offsets) = damage_sweep(&transfer_history(VALUE, 24), false);
    println!("RELIABILITY value/transfer damage sweep: {offsets} damaged images");
    tally.assert_clean("value/transfer damage");
}

/// Regression: a rotated log file cut at a block boundary (e.g. its size lost with file-system
/// metadata) looked whole, so its last blocks vanished without an error and older versions of
/// their keys came back (a silent divergence). Closed files now end with an end block that
/// records their length.
#[test]
fn a_rotated_log_file_cut_at_a_block_boundary_is_named() {
    for history in [kv_history(VALUE, 24, 0), transfer_history(VALUE, 24)] {
        let (tally, offsets) = damage_sweep(&history, true);
        println!("RELIABILITY value/{} rotated-file block cuts: {offsets} damaged images", history.name);
        assert!(offsets > 0, "the sweep must include such cuts");
        tally.assert_clean("value/rotated-file block cuts");
    }
}

#[test]
fn io_errors_kv_stop_acknowledging_and_recover_every_acknowledged_step() {
    io_error_sweep(&kv_history(VALUE, 24, 0)).assert_clean("value/kv io errors");
}

#[test]
fn io_errors_transfer_stop_acknowledging_and_recover_every_acknowledged_step() {
    io_error_sweep(&transfer_history(VALUE, 24)).assert_clean("value/transfer io errors");
}

/// The knobs are read (so that the long sweep is reachable) and the histories are what the
/// models say: an unharmed run on a real-looking disk reproduces every state.
#[test]
fn histories_match_their_models_without_faults() {
    let _ = knobs().full;
    for history in [transfer_history(VALUE, 24), kv_history(VALUE, 24, 0)] {
        let disk = SimDisk::new();
        let db = open(VALUE, &disk).expect("open");
        for p in 0..history.steps.len() {
            let run = run_history(&db, &disk, &history, p..p + 1, false);
            assert_eq!(run.acked, p + 1, "{}: step {p}: {:?}", history.name, run.first_error);
            assert_eq!(dump(&db).expect("dump"), history.states[p + 1], "{} after {} steps", history.name, p + 1);
        }
        db.close().expect("close");
        assert!(disk.fork().exists(Path::new(LOG_DIRS[1])).expect("exists"));
        let _ = disk.open(Path::new("/db/log0/pepoch"), OpenMode::Read).expect("pepoch written");
    }
}

/// Regression: the epoch advancer missed a stop that came before it first waited, so closing a
/// database right after opening it blocked for a whole epoch interval (10 s here).
#[test]
fn closing_right_after_open_does_not_wait_for_the_epoch_interval() {
    for _ in 0..20 {
        let disk = SimDisk::new();
        let db = open(VALUE, &disk).expect("open");
        let start = std::time::Instant::now();
        db.close().expect("close");
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "close took {:?}", start.elapsed());
    }
}

/// Regression: a failed sync while recording a module (the `catalog` file) returned an error to
/// `load_module` but left the scheme running, so later commits were still acknowledged, and a
/// module could be recorded after the scheme had failed.
#[test]
fn a_failed_catalog_sync_stops_acknowledging() {
    let history = kv_history(VALUE, 12, 0);
    let disk = SimDisk::new();
    let db = open(VALUE, &disk).expect("open");
    let run = run_history(&db, &disk, &history, 0..5, false);
    assert_eq!(run.acked, 5, "{:?}", run.first_error);
    let fault = Fault { kind: Some(OpKind::SyncData), nth: 1, error: FaultError::Eio, sticky: false };
    disk.inject_on_path("catalog", fault);
    let err = db.load_module("kv_del.proc", KV_DEL_SOURCE).expect_err("the catalog sync fails");
    assert!(err.to_string().contains("catalog") && err.to_string().contains("Input/output error"), "{err}");
    assert_eq!(disk.faults_fired(), 1);
    let mut worker = db.worker();
    let acknowledged =
        worker.call("kv_set", &[text("key:1"), text("after")]).map_err(|e| e.to_string()).and_then(|out| {
            db.epochs().advance();
            worker.wait_durable(&out.committed.durability).map_err(|e| e.to_string())
        });
    let message = acknowledged.expect_err("nothing is acknowledged after a failed sync");
    assert!(message.contains("durability failed") && message.contains("/db/log0/catalog"), "{message}");
    let again =
        db.load_module("other.proc", "procedure nop() { return 1; }").expect_err("a failed scheme records nothing");
    assert!(again.to_string().contains("durability failed"), "{again}");
    let _ = db.close();
}

/// Regression: a module's catalog was made durable at once, even when transactions committed
/// before it were not, so a crash could keep the module and lose them: a state that is no prefix
/// of the history.
#[test]
fn a_module_load_is_durable_only_after_what_was_committed_before_it() {
    let history = kv_history(VALUE, 8, 0);
    let disk = SimDisk::new();
    let db = open(VALUE, &disk).expect("open");
    let run = run_history(&db, &disk, &history, 0..1, false);
    assert_eq!(run.acked, 1, "{:?}", run.first_error);
    let mut worker = db.worker();
    worker.call("kv_set", &[text("key:1"), text("before")]).expect("kv_set");
    db.load_module("kv_del.proc", KV_DEL_SOURCE).expect("load");
    for seed in 0..50 {
        let image = disk.crash(seed);
        let recovered = open(VALUE, &image).expect("recover");
        let state = dump(&recovered).expect("dump");
        assert!(state.contains(&"procedure kv_del".to_string()), "seed {seed}: the module was acknowledged");
        assert!(
            state.iter().any(|line| line.contains("before")),
            "seed {seed}: the module survived but the commit before it did not: {state:?}"
        );
        let _ = recovered.close();
    }
    let _ = db.close();
}
