//! Reliability of the stream schemes (`serial-data`, `serial-cmd`, `taurus-data`, `taurus-cmd`,
//! `src/durability/taurus/`) on the simulated disk: power loss at every I/O of a history (and of
//! recovery), injected I/O errors, and a damage sweep of their logs and persistent vector files, with
//! the transfer and kv histories and the oracle of `tests/common/`. In CI every 4th crash point
//! and fault point and every 8th damage are tried (`LAZARUS_RELIABILITY_FULL=1`: all of them).
//! `docs/RELIABILITY.md` has the numbers.

mod common;

use common::*;
use lazarus::db::DbError;
use lazarus::durability::DurabilityError;
use lazarus::durability::taurus::format::Flavor;
use lazarus::io::sim::SimDisk;

const FLAVORS: [Flavor; 4] = [Flavor::SerialData, Flavor::SerialCmd, Flavor::TaurusData, Flavor::TaurusCmd];

fn setup(flavor: Flavor) -> Setup {
    Setup { label: flavor.name(), ci_crash_stride: 4, scheme: SchemeKind::Stream(flavor), ..VALUE }
}

/// Every 5th set of the kv history is an ad-hoc transaction (a write set in every flavor).
fn histories(flavor: Flavor) -> [History; 2] {
    [transfer_history(setup(flavor), 20), kv_history(setup(flavor), 20, 5)]
}

#[test]
fn stream_histories_match_their_models_and_recover() {
    for flavor in FLAVORS {
        for history in histories(flavor) {
            assert_history_matches_step_by_step(&history, 3);
        }
    }
}

#[test]
fn power_loss_at_every_io_stream_schemes_recover_a_prefix_with_every_acknowledged_step() {
    for flavor in FLAVORS {
        for history in histories(flavor) {
            power_loss_sweep(&history).assert_clean(&format!("{}/{} power loss", flavor.name(), history.name));
        }
    }
}

#[test]
fn io_errors_stream_schemes_stop_acknowledging_and_recover_every_acknowledged_step() {
    for flavor in FLAVORS {
        for history in histories(flavor) {
            io_error_sweep(&history).assert_clean(&format!("{}/{} io errors", flavor.name(), history.name));
        }
    }
}

/// Every step on worker 0, so on one Taurus logger: a log that loses a suffix of its records
/// loses a suffix of the history.
fn on_one_worker(mut history: History) -> History {
    for step in &mut history.steps {
        if let Step::Call { worker, .. } | Step::Put { worker, .. } = step {
            *worker = 0;
        }
    }
    history
}

#[test]
fn stream_log_damage_sweep_names_the_file_or_keeps_the_acknowledged_state() {
    let stride = if knobs().full { 1 } else { 8 };
    for flavor in FLAVORS {
        // With two loggers Taurus keeps the other logger's independent transactions when one log
        // loses its tail; the power-loss sweep covers that.
        for history in histories(flavor).map(on_one_worker) {
            let (tally, offsets) = stream_damage_sweep(&history, stride);
            let what = format!("{}/{} damage", flavor.name(), history.name);
            println!("RELIABILITY {what}: {offsets} damaged images, {} lost acknowledged commits", tally.lost_acked);
            tally.assert_clean(&what);
            assert!(tally.clear_errors > 0, "{what}: no damage was detected");
        }
    }
}

/// The offsets of the framed blocks of a stream log that hold a transaction record (payload
/// kind 1), in file order.
fn transaction_block_starts(bytes: &[u8]) -> Vec<usize> {
    use lazarus::durability::frame;
    let Ok((_, mut at)) = frame::decode_block(bytes) else { return Vec::new() };
    let mut starts = Vec::new();
    while let Ok((payload, size)) = frame::decode_block(&bytes[at..]) {
        if payload.first() == Some(&1) {
            starts.push(at);
        }
        at += size;
    }
    starts
}

/// Recovers `disk` and requires a `Corrupt` error naming `file`.
fn assert_corrupt_names(history: &History, disk: &SimDisk, file: &std::path::Path, what: &str) {
    match open(history.setup, disk) {
        Err(DbError::Durability(DurabilityError::Corrupt { file: named, offset, reason })) => {
            assert_eq!(named, file, "{what}: the error names another file ({reason} at {offset})");
        }
        Err(e) => panic!("{what}: recovery failed without naming the file and offset: {e}"),
        Ok(db) => {
            let state = dump(&db).expect("dump");
            let prefix = history.states.iter().position(|s| *s == state);
            panic!("{what}: recovered without an error, the state after step {prefix:?} of {}", history.steps.len());
        }
    }
}

/// Regression: the stream schemes recorded how far a log was synced only in a `.synced` file
/// rewritten without a sync and in sync marks that the next flush writes, so a lost or
/// misdirected write of a log's last flush (here: the log cut at its last transaction record, or
/// zeroed from there, after every step was acknowledged and the database closed) recovered a
/// shorter prefix without an error: acknowledged commits lost silently (the damage sweep's
/// "tail cuts", hundreds per scheme). Now the persistent vector file records every log's durable
/// length and is synced before anything it covers is acknowledged: the damage is an error
/// naming the log.
#[test]
fn lost_last_flush_of_a_stream_log_is_an_error_not_a_shorter_prefix() {
    for flavor in FLAVORS {
        let history = on_one_worker(transfer_history(setup(flavor), 20));
        let image = run_to_end(&history).crash(0);
        let mut checked = 0;
        for log in image.file_paths().into_iter().filter(|p| p.extension().is_some_and(|e| e == "log")) {
            let bytes = image.contents(&log).expect("log");
            let Some(&last) = transaction_block_starts(&bytes).last() else { continue };
            let mut zeroed = bytes.clone();
            zeroed[last..].fill(0);
            for (how, damaged) in [("cut", bytes[..last].to_vec()), ("zeroed", zeroed)] {
                let disk = image.fork();
                assert!(disk.replace_contents(&log, &damaged));
                let what = format!("{}: last flush of {} {how} at {last}", flavor.name(), log.display());
                assert_corrupt_names(&history, &disk, &log, &what);
                checked += 1;
            }
        }
        assert!(checked >= 2, "{}: no log with transactions", flavor.name());
    }
}

/// Regression: a file of a settled generation (cut and closed by an earlier recovery) that lost
/// its last records at a record boundary still decoded to its end, so its acknowledged
/// transactions vanished without an error. Recovery now ends every settled file with an end
/// record and requires it.
#[test]
fn a_settled_generation_cut_at_a_record_boundary_is_an_error() {
    use lazarus::durability::taurus::format;
    for flavor in FLAVORS {
        let history = on_one_worker(transfer_history(setup(flavor), 8));
        let disk = SimDisk::new();
        let db = open(history.setup, &disk).expect("open");
        assert_eq!(run_history(&db, &disk, &history, 0..4, false).acked, 4);
        db.close().expect("close");
        // Recovery settles generation 0; the next steps go to generation 1.
        let db = open(history.setup, &disk).expect("reopen");
        assert_eq!(run_history(&db, &disk, &history, 4..8, false).acked, 8);
        db.close().expect("close");
        let image = disk.crash(0);
        let log = std::path::Path::new(LOG_DIRS[0]).join(format::log_name(flavor, 0, 0));
        let bytes = image.contents(&log).expect("generation 0");
        let last = *transaction_block_starts(&bytes).last().expect("a transaction in generation 0");
        assert!(image.replace_contents(&log, &bytes[..last]));
        assert_corrupt_names(&history, &image, &log, &format!("{}: generation 0 cut at {last}", flavor.name()));
    }
}

/// A failed sync of the persistent vector file stops the scheme like a failed log sync
/// (fsyncgate): nothing issued after it is acknowledged, the error names the file, and the
/// acknowledged steps survive power loss.
#[test]
fn a_failed_sync_of_the_persistent_vector_stops_acknowledging() {
    use lazarus::io::sim::{Fault, FaultError, OpKind};
    for flavor in FLAVORS {
        // One logger's transactions: the recovered state is an issue-order prefix.
        let history = on_one_worker(transfer_history(setup(flavor), 12));
        let disk = SimDisk::new();
        let db = open(history.setup, &disk).expect("open");
        let fault = Fault { kind: Some(OpKind::SyncData), nth: 2, error: FaultError::Eio, sticky: false };
        disk.inject_on_path("persistent_vector", fault);
        let run = run_history(&db, &disk, &history, 0..12, true);
        let name = flavor.name();
        assert_eq!(disk.faults_fired(), 1, "{name}: the fault did not fire");
        assert!(run.acked < 12 && run.acked_after_fault.is_empty(), "{name}: {run:?}");
        let error = run.errors_after_fault.first().expect("an error after the fault");
        assert!(error.contains("persistent_vector") && error.contains("Input/output error"), "{name}: {error}");
        assert!(db.close().is_err(), "{name}: a failed scheme closed cleanly");
        let recovered = open(history.setup, &disk.crash(1)).expect("recover");
        let state = dump(&recovered).expect("dump");
        let prefix = history.states.iter().rposition(|s| *s == state);
        assert!(prefix.is_some_and(|p| p >= run.acked && p <= run.issued), "{name}: prefix {prefix:?} of {run:?}");
        recovered.close().expect("close");
    }
}

/// Regression, in the form the persistent vector file gives it: a crash could keep a new
/// generation's synced-length file and lose its log (two names made durable by one directory
/// sync), and the next start failed on the orphan ("exists"). Synced-length files are gone; the
/// like case now is a crash right after a start made its generation's persistent vector file
/// durable (before the generation's logs exist): a vector of a generation without logs, which
/// records nothing durable in it. The next start must run.
#[test]
fn a_persistent_vector_of_a_generation_whose_logs_were_lost_does_not_block_the_next_start() {
    use lazarus::durability::taurus::format;
    use lazarus::io::FileSystem;
    for flavor in FLAVORS {
        let disk = SimDisk::new();
        open(setup(flavor), &disk).expect("open").close().expect("close");
        // Generation 1 starts and closes without a flush: its vector records nothing durable.
        open(setup(flavor), &disk).expect("reopen").close().expect("close");
        let mut removed = 0;
        for logger in 0..LOG_DIRS.len() {
            let dir = std::path::Path::new(LOG_DIRS[logger % LOG_DIRS.len()]);
            let log = dir.join(format::log_name(flavor, logger, 1));
            if disk.exists(&log).expect("exists") {
                disk.remove(&log).expect("remove");
                disk.sync_dir(dir).expect("sync dir");
                removed += 1;
            }
        }
        assert!(removed > 0, "{}: no log of generation 1", flavor.name());
        let db = open(setup(flavor), &disk).unwrap_or_else(|e| panic!("{}: {e}", flavor.name()));
        let history = transfer_history(setup(flavor), 4);
        let run = run_history(&db, &disk, &history, 0..4, false);
        assert_eq!(run.acked, 4, "{}: {:?}", flavor.name(), run.first_error);
        db.close().expect("close");
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints (`docs/taurus.md`, "Checkpoints"): a checkpoint every 5 ms and a 2 ms pause after
// every step, so the history sees several rotations, installs and truncations, and crash points
// fall in each of them.

fn checkpoint_setup(flavor: Flavor) -> Setup {
    Setup { ci_crash_stride: 3, ..stream_checkpoint_setup(flavor) }
}

#[test]
fn power_loss_at_every_io_taurus_data_with_checkpoints_recovers_a_prefix_with_every_acknowledged_step() {
    let setup = checkpoint_setup(Flavor::TaurusData);
    assert_power_loss_clean_with_checkpoints(
        &transfer_history(setup, 24),
        "taurus-data-checkpoint/transfer power loss",
    );
    assert_power_loss_clean_with_checkpoints(&kv_history(setup, 24, 5), "taurus-data-checkpoint/kv power loss");
}

#[test]
fn power_loss_at_every_io_taurus_cmd_with_checkpoints_recovers_a_prefix_with_every_acknowledged_step() {
    let setup = checkpoint_setup(Flavor::TaurusCmd);
    assert_power_loss_clean_with_checkpoints(&transfer_history(setup, 24), "taurus-cmd-checkpoint/transfer power loss");
    assert_power_loss_clean_with_checkpoints(&kv_history(setup, 24, 5), "taurus-cmd-checkpoint/kv power loss");
}
