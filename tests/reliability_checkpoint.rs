//! Reliability of SiloR's checkpoints (`src/durability/checkpoint/`, taken by the value scheme)
//! on the simulated disk: power loss at every I/O of a history during which checkpoints are taken
//! every few milliseconds (and of the recovery that loads them and removes debris), a damage sweep
//! of installed checkpoints and of debris, and ENOSPC/EIO at each I/O of the checkpointer.
//! The oracle and the sweeps are in `tests/common/`; `docs/RELIABILITY.md` has the numbers.

mod common;

use common::*;
use lazarus::durability::checkpoint::format as checkpoint_format;
use lazarus::durability::value::ValueLogging;
use lazarus::durability::value::files::EntryFormat;
use lazarus::io::sim::{Fault, FaultError, OpKind, SimDisk};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Checkpoints every 5 ms, and a 2 ms pause after every step: a 24-step history sees several.
const CHECKPOINTS: Setup = Setup {
    label: "checkpoint",
    entry_format: EntryFormat::Value,
    checkpoint_interval_ms: 5,
    step_pause_ms: 2,
    value_pad_bytes: 0,
    ci_crash_stride: 3,
    epoch_interval_ms: 10_000,
    scheme: SchemeKind::Value,
};

/// Also an epoch advancer ticking every 5 ms, racing the history's own advances and the
/// checkpoint manager's wait for `e_h ≤ pepoch`.
const TIMED_EPOCHS: Setup = Setup { epoch_interval_ms: 5, ..CHECKPOINTS };

/// Larger values, so that checkpoint data files span several sectors and blocks.
const PADDED: Setup = Setup { value_pad_bytes: 700, ..CHECKPOINTS };

/// The longest a test waits for the checkpoint manager.
const MANAGER_WAIT: Duration = Duration::from_secs(20);

/// Advances epochs (the manager waits for `e_h ≤ pepoch`) until `done`.
fn wait_for(db: &lazarus::Database, scheme: &ValueLogging, what: &str, done: impl Fn(&ValueLogging) -> bool) {
    let deadline = Instant::now() + MANAGER_WAIT;
    while !done(scheme) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        db.epochs().advance();
        std::thread::sleep(Duration::from_millis(2));
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Power loss at every I/O, checkpoints taken all along

#[test]
fn power_loss_at_every_io_with_checkpoints_transfer_recovers_a_prefix_with_every_acknowledged_step() {
    assert_power_loss_clean_with_checkpoints(
        &transfer_history(TIMED_EPOCHS, 24),
        "checkpoint/transfer power loss, 5 ms epochs",
    );
}

#[test]
fn power_loss_at_every_io_with_checkpoints_kv_recovers_a_prefix_with_every_acknowledged_step() {
    assert_power_loss_clean_with_checkpoints(&kv_history(CHECKPOINTS, 24, 0), "checkpoint/kv power loss");
}

/// The histories do take checkpoints, and recovery loads them.
#[test]
fn histories_take_checkpoints_and_recovery_loads_them() {
    for history in [transfer_history(CHECKPOINTS, 24), kv_history(CHECKPOINTS, 24, 0)] {
        let disk = SimDisk::new();
        let (db, scheme) = open_scheme(CHECKPOINTS, &disk).expect("open");
        let steps = history.steps.len();
        let run = run_history(&db, &disk, &history, 0..steps, false);
        assert_eq!(run.acked, steps, "{:?}", run.first_error);
        wait_for(&db, &scheme, "a checkpoint", |s| s.checkpoints().installed() >= 2);
        assert_eq!(scheme.checkpoints().last_error(), None);
        db.close().expect("close");
        let (again, scheme) = open_scheme(VALUE, &disk.crash(1)).expect("recover");
        let report = scheme.recovery.lock().clone().expect("a recovery report");
        assert!(report.checkpoint.is_some(), "{}: no checkpoint loaded: {report:?}", history.name);
        assert_eq!(dump(&again).expect("dump"), history.states[steps]);
        let _ = again.close();
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Damage to installed checkpoints and to debris

/// An image with an installed checkpoint, all of the history acknowledged, and debris of later
/// checkpoints whose manifest could not be installed; the state recovery must give.
fn checkpointed_base(history: &History) -> (SimDisk, Dump) {
    let disk = SimDisk::new();
    let (db, scheme) = open_scheme(history.setup, &disk).expect("open");
    let steps = history.steps.len();
    let run = run_history(&db, &disk, history, 0..steps, false);
    assert_eq!(run.acked, steps, "{:?}", run.first_error);
    wait_for(&db, &scheme, "a checkpoint", |s| s.checkpoints().installed() >= 1 && !s.checkpoints().is_active());
    // Later checkpoints write (and sync) their data files but cannot install a manifest.
    let fault = Fault { kind: Some(OpKind::Rename), nth: 1, error: FaultError::Eio, sticky: true };
    disk.inject_on_path(&format!("{}.tmp", checkpoint_format::MANIFEST_FILE), fault);
    wait_for(&db, &scheme, "a failed checkpoint", |s| s.checkpoints().last_error().is_some());
    db.close().expect("close");
    (disk.crash(0), history.states[steps].clone())
}

fn checkpoint_damage_sweep(history: &History, what: &str) {
    let knobs = knobs();
    let (image, expected) = checkpointed_base(history);
    let clean = open(history.setup, &image.fork()).expect("the undamaged image recovers");
    assert_eq!(dump(&clean).expect("dump"), expected);
    let _ = clean.close();
    let is_checkpoint_file = |p: &PathBuf| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name == checkpoint_format::MANIFEST_FILE || checkpoint_format::data_file_checkpoint_id(name).is_some()
    };
    let limits: Vec<(PathBuf, u64)> =
        durable_limits(&image).into_iter().filter(|(p, _)| is_checkpoint_file(p)).collect();
    let installed = limits.iter().filter(|(_, limit)| *limit > 0).count();
    let debris = limits.len() - installed;
    assert!(installed >= 3 && debris >= 1, "{what}: needs a manifest, installed data files and debris: {limits:?}");
    let stride = if knobs.full { 1 } else { 4 };
    let (tally, offsets) = damage_files(history, &image, &limits, &expected, false, stride);
    println!(
        "RELIABILITY {what}: {offsets} damaged images of {installed} installed checkpoint files and {debris} debris files"
    );
    tally.assert_clean(what);
    assert!(tally.clear_errors > 0, "{what}: no damage was detected");
}

#[test]
fn checkpoint_damage_sweep_kv_names_the_damaged_file_and_ignores_debris() {
    checkpoint_damage_sweep(&kv_history(PADDED, 24, 0), "checkpoint/kv damage");
}

#[test]
fn checkpoint_damage_sweep_transfer_names_the_damaged_file_and_ignores_debris() {
    checkpoint_damage_sweep(&transfer_history(PADDED, 24), "checkpoint/transfer damage");
}

// ---------------------------------------------------------------------------------------------
// 3. ENOSPC and EIO on checkpoint writes

/// The kinds of operation a checkpointer makes on its files and the manifest.
const CHECKPOINT_FAULT_KINDS: [Option<OpKind>; 7] = [
    Some(OpKind::Open),
    Some(OpKind::Append),
    Some(OpKind::SyncData),
    Some(OpKind::Rename),
    Some(OpKind::Remove),
    Some(OpKind::Exists),
    None,
];

/// Runs `history` with `fault` on operations on paths containing `path_part`; returns whether it
/// fired. With `must_ack`, every step must be acknowledged and the checkpoint status must name
/// the failure; either way the crashed image must recover the acknowledged prefix.
fn checkpoint_fault_case(history: &History, path_part: &str, fault: Fault, must_ack: bool, tally: &mut Tally) -> bool {
    let case = format!("{} {path_part} {fault:?}", history.name);
    let steps = history.steps.len() - 1;
    let disk = SimDisk::new();
    let (db, scheme) = open_scheme(history.setup, &disk).expect("open on an empty disk");
    // Counted from here: the faults are for the checkpointer, not for recovery.
    disk.inject_on_path(path_part, fault);
    let run = run_history(&db, &disk, history, 0..steps, !must_ack);
    if disk.faults_fired() == 0 {
        // The fault may be due in the next checkpoint: give the manager a moment.
        wait_some(&db, &scheme);
    }
    let _ = db.close();
    // Read after close: the fault may have fired in a checkpoint that close interrupted.
    let last_error = scheme.checkpoints().last_error();
    if disk.faults_fired() == 0 {
        return false;
    }
    tally.fault_points += 1;
    tally.faults_fired += 1;
    if must_ack {
        if run.acked != steps {
            tally.violation(format!("{case}: commits stopped being acknowledged: {:?}", run.first_error));
        }
        let errno_text = ["Input/output error", "No space left on device"];
        match &last_error {
            Some(m) if errno_text.iter().any(|t| m.contains(t)) && m.contains("/db/log") => {}
            other => {
                tally.unclear_messages += 1;
                tally.violation(format!("{case}: the checkpoint status does not name the failure: {other:?}"));
            }
        }
    }
    for seed in 0..2 {
        let image = disk.crash(fault.nth * 10 + seed);
        check_recovery(history, &image, &run, seed, tally, &format!("{case} seed={seed}"));
    }
    true
}

/// Lets the checkpoint manager run a few more intervals.
fn wait_some(db: &lazarus::Database, scheme: &ValueLogging) {
    let until = Instant::now() + Duration::from_millis(40);
    wait_for(db, scheme, "40 ms", |_| Instant::now() >= until);
}

fn checkpoint_io_error_sweep(history: &History, what: &str) {
    let knobs = knobs();
    let mut tally = Tally::default();
    for kind in CHECKPOINT_FAULT_KINDS {
        // Every run sleeps through its steps: in CI, every 6th fault point (every 24th for "any").
        let base = if knobs.full { 1 } else { 6 };
        let stride = if kind.is_none() { base * 4 } else { base };
        for (error, sticky) in [(FaultError::Eio, false), (FaultError::Enospc, true)] {
            // Counted on checkpoint paths only; up to the first n that no run reaches.
            for nth in (1..=400).step_by(stride) {
                let fault = Fault { kind, nth, error, sticky };
                if !checkpoint_fault_case(history, checkpoint_format::MANIFEST_FILE, fault, true, &mut tally) {
                    break;
                }
            }
        }
    }
    println!("RELIABILITY {what}: {} checkpoint fault points fired", tally.faults_fired);
    tally.assert_clean(what);
    assert!(tally.faults_fired > 0, "{what}: no fault fired");
}

#[test]
fn checkpoint_io_errors_kv_keep_acknowledging_and_leave_the_previous_checkpoint_usable() {
    checkpoint_io_error_sweep(&kv_history(CHECKPOINTS, 24, 0), "checkpoint/kv io errors");
}

#[test]
fn checkpoint_io_errors_transfer_keep_acknowledging_and_leave_the_previous_checkpoint_usable() {
    checkpoint_io_error_sweep(&transfer_history(CHECKPOINTS, 24), "checkpoint/transfer io errors");
}

/// A failed sync of the manifest: of its temporary file (the checkpoint is abandoned, the scheme
/// keeps acknowledging: nothing was removed yet), and of the directory after the rename (shared
/// with logger 0's files, whose failure stops the scheme). Whatever happens, recovery gives the
/// acknowledged prefix.
#[test]
fn a_failed_sync_of_the_manifest_keeps_the_acknowledged_prefix() {
    let history = kv_history(CHECKPOINTS, 24, 0);
    let mut tally = Tally::default();
    for (error, sticky) in [(FaultError::Eio, false), (FaultError::Enospc, true)] {
        for nth in 1..=12 {
            let fault = Fault { kind: Some(OpKind::SyncData), nth, error, sticky };
            if !checkpoint_fault_case(&history, "checkpoint.tmp", fault, true, &mut tally) {
                break;
            }
        }
        for nth in 1..=40 {
            let fault = Fault { kind: Some(OpKind::SyncDir), nth, error, sticky };
            if !checkpoint_fault_case(&history, LOG_DIRS[0], fault, false, &mut tally) {
                break;
            }
        }
    }
    tally.assert_clean("checkpoint/manifest sync");
    assert!(tally.faults_fired > 0);
}

/// A vanished manifest (its name lost, or the file deleted) after the log files it made
/// redundant were removed: recovery finds no checkpoint, replays what is left of the log as if it
/// were all of it, and recovers a state that is no prefix of the history, without an error.
/// Log truncation removes files only once a durable `pepoch` names the checkpoint they were
/// removed for, so a lost manifest is corruption recovery names, not a log with a silent hole.
#[test]
fn a_missing_manifest_after_log_truncation_is_named() {
    use lazarus::io::FileSystem;
    let history = kv_history(CHECKPOINTS, 24, 0);
    let (image, expected) = checkpointed_base(&history);
    let manifest = std::path::Path::new(LOG_DIRS[0]).join(checkpoint_format::MANIFEST_FILE);
    image.remove(&manifest).expect("remove the manifest");
    match open(CHECKPOINTS, &image) {
        Err(lazarus::db::DbError::Durability(lazarus::durability::DurabilityError::Corrupt { .. })) => {}
        Err(e) => panic!("recovery failed without naming the damage: {e}"),
        Ok(db) => {
            let state = dump(&db).expect("dump");
            assert_eq!(state, expected, "a missing manifest gave a silently different state");
            let _ = db.close();
        }
    }
}
