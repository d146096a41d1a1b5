//! `lazarus crash-test --power-loss`'s loop (`lazarus::crash::power_loss`) over the stream
//! schemes (serial-data, serial-cmd, taurus-data, taurus-cmd): power loss at sampled I/Os of the
//! kv and transfer histories on the simulated disk, recovery (and recovery crashed at its I/Os),
//! and the acknowledged-prefix oracle (for Taurus, a dependency-closed subset of the
//! unacknowledged steps). Also: the oracle catches a wrong state, and the regression tests of
//! what these sweeps found. `docs/RELIABILITY.md` has the numbers.

use lazarus::crash::model::{kv_history, transfer_history};
use lazarus::crash::power_loss::{
    LOG_DIRS, PowerLossOptions, SweepKnobs, Tally, crash_point, open, power_loss_sweep_with, run_history, setup_of,
};
use lazarus::io::sim::SimDisk;
use lazarus::io::{FileSystem, OpenMode};
use std::path::Path;

fn sweep(durability: &str, crash_stride: u64) {
    let setup = setup_of(durability).expect("a power-loss scheme");
    // LAZARUS_RELIABILITY_FULL=1 (scripts/reliability-full.sh): every crash point, 12 seeds,
    // recovery crashed at every crash point.
    let full = std::env::var("LAZARUS_RELIABILITY_FULL").is_ok_and(|v| v == "1");
    let knobs = if full {
        SweepKnobs { seeds: 12, crash_stride: 1, recovery_crash_stride: 1, trace: false }
    } else {
        SweepKnobs { seeds: 2, crash_stride, recovery_crash_stride: 6, trace: false }
    };
    for history in [transfer_history(setup, 24), kv_history(setup, 24, 0)] {
        let tally = power_loss_sweep_with(&history, knobs);
        assert!(tally.crash_points > 5 && tally.cases > 10, "{tally:?}");
        tally.assert_clean(&format!("power-loss {durability} {}", history.name));
    }
}

#[test]
fn power_loss_at_every_other_io_of_serial_data() {
    sweep("serial-data", 2);
}

#[test]
fn power_loss_at_every_other_io_of_serial_cmd() {
    sweep("serial-cmd", 2);
}

#[test]
fn power_loss_at_every_other_io_of_taurus_data() {
    sweep("taurus-data", 2);
}

#[test]
fn power_loss_at_every_other_io_of_taurus_cmd() {
    sweep("taurus-cmd", 2);
}

#[test]
fn the_oracle_reports_a_state_that_is_no_prefix() {
    // A model whose final state is wrong: the unharmed run must be reported, with its crash point.
    let mut history = kv_history(setup_of("value").unwrap(), 12, 0);
    let last = history.states.len() - 2; // the state after the steps run before recovery
    history.states[last].push("kv \"no such row\"".into());
    let mut tally = Tally::default();
    let completed = crash_point(&history, u64::MAX, [0], 0, false, &mut tally);
    assert!(completed);
    // The recovered state is no longer the model's last state: a lost commit or a phantom.
    assert_eq!(tally.lost_acked + tally.phantoms, 1, "{tally:?}");
    assert_eq!(tally.failed_cases, vec![(u64::MAX, Some(0))]);
    assert!(tally.violations[0].contains("seed=0"), "{:?}", tally.violations);
}

#[test]
fn the_power_loss_options_refuse_what_they_cannot_run() {
    let bad = [
        PowerLossOptions { workload: "tpcc".into(), ..PowerLossOptions::default() },
        PowerLossOptions { durability: "none".into(), ..PowerLossOptions::default() },
        PowerLossOptions { steps: 2, ..PowerLossOptions::default() },
        PowerLossOptions { crash_seed: Some(1), ..PowerLossOptions::default() },
    ];
    for options in bad {
        assert!(options.history().is_err(), "{options:?}");
    }
    let command = PowerLossOptions::default().reproduce_command(7, Some(9));
    assert!(command.ends_with("--k 7 --crash-seed 9"), "{command}");
}

/// Found by `crash-test --power-loss` (serial-data, transfer, k=11): a stream log is created and
/// synced and its synced-length file created, but at power loss the log's directory entry is
/// lost and the synced-length file's is not; the next start created the same generation's log
/// again and failed with `serial.0.0.log.synced: exists`.
#[test]
fn a_synced_length_file_left_without_its_log_does_not_block_restart() {
    for durability in ["serial-data", "taurus-data"] {
        let setup = setup_of(durability).unwrap();
        let disk = SimDisk::new();
        let prefix = if durability.starts_with("taurus") { "taurus" } else { "serial" };
        for dir in LOG_DIRS {
            disk.create_dir_all(Path::new(dir)).unwrap();
        }
        let debris = Path::new(LOG_DIRS[0]).join(format!("{prefix}.0.0.log.synced"));
        let mut file = disk.open(&debris, OpenMode::CreateNew).unwrap();
        file.append(b"debris of a start whose log was lost").unwrap();
        file.sync_data().unwrap();
        drop(file);
        disk.sync_dir(Path::new(LOG_DIRS[0])).unwrap();
        let history = transfer_history(setup, 8);
        let db = open(setup, &disk).expect("a start over a stale synced-length file");
        let run = run_history(&db, &disk, &history, 0..8, false);
        assert_eq!(run.acked, 8, "{:?}", run.first_error);
        db.close().unwrap();
        let again = open(setup, &disk.crash(1)).expect("recovery");
        assert_eq!(lazarus::crash::model::dump(&again).unwrap(), history.states[8]);
        again.close().unwrap();
    }
}
