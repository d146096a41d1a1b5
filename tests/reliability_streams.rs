//! Reliability of the stream schemes (`serial-data`, `serial-cmd`, `taurus-data`, `taurus-cmd`,
//! `src/durability/taurus/`) on the simulated disk: power loss at every I/O of a history (and of
//! recovery), injected I/O errors, and a damage sweep of their logs and synced-length files, with
//! the transfer and kv histories and the oracle of `tests/common/`. In CI every 4th crash point
//! and fault point and every 8th damage are tried (`LAZARUS_RELIABILITY_FULL=1`: all of them).
//! `docs/RELIABILITY.md` has the numbers.

mod common;

use common::*;
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

#[test]
fn stream_log_damage_sweep_names_the_file_or_keeps_the_acknowledged_state() {
    let stride = if knobs().full { 1 } else { 8 };
    for flavor in FLAVORS {
        // Every step on one worker, so on one logger: a torn or cut log then loses a suffix of
        // the history, and the oracle is the issue-order prefix. (With two loggers Taurus keeps
        // the other logger's independent transactions; the power-loss sweep covers that.)
        for mut history in histories(flavor) {
            for step in &mut history.steps {
                if let Step::Call { worker, .. } | Step::Put { worker, .. } = step {
                    *worker = 0;
                }
            }
            let (tally, offsets, tail_cuts) = stream_damage_sweep(&history, stride);
            let what = format!("{}/{} damage", flavor.name(), history.name);
            println!("RELIABILITY {what}: {offsets} damaged images, {tail_cuts} tail cuts after the synced point");
            tally.assert_clean(&what);
            assert!(tally.clear_errors > 0, "{what}: no damage was detected");
        }
    }
}

/// Regression: a crash could keep a new generation's synced-length file and lose its log file
/// (two names made durable by one directory sync); the next start created the log again and
/// failed on the synced-length file ("exists"), so the database could not open again.
#[test]
fn an_orphan_synced_file_of_a_lost_log_does_not_block_the_next_start() {
    use lazarus::durability::taurus::format;
    use lazarus::io::{FileSystem, OpenMode};
    for flavor in FLAVORS {
        let disk = SimDisk::new();
        open(setup(flavor), &disk).expect("open").close().expect("close");
        // The next start writes generation 1: leave its synced-length file behind, without a log.
        let log = std::path::Path::new(LOG_DIRS[0]).join(format::log_name(flavor, 0, 1));
        let orphan = std::path::PathBuf::from(format!("{}{}", log.display(), format::SYNCED_SUFFIX));
        disk.open(&orphan, OpenMode::CreateNew).expect("create").sync_data().expect("sync");
        disk.sync_dir(std::path::Path::new(LOG_DIRS[0])).expect("sync dir");
        let db = open(setup(flavor), &disk).unwrap_or_else(|e| panic!("{}: {e}", flavor.name()));
        let history = transfer_history(setup(flavor), 4);
        let run = run_history(&db, &disk, &history, 0..4, false);
        assert_eq!(run.acked, 4, "{}: {:?}", flavor.name(), run.first_error);
        db.close().expect("close");
    }
}
