//! Reliability of the `command` scheme (PACMAN's command logging over SiloR's loggers,
//! `src/durability/command/`) on the simulated disk: power loss at every I/O of a history of
//! procedure calls and ad-hoc transactions (and of recovery, which re-executes the procedures),
//! a damage sweep of the command logs, and injected I/O errors. The oracle and the sweeps are in
//! `tests/common/`; `docs/RELIABILITY.md` has the numbers.

mod common;

use common::*;
use lazarus::durability::value::files::EntryFormat;

const COMMAND: Setup = Setup { label: "command", entry_format: EntryFormat::Command, ..VALUE };

/// Every 5th set of the kv history is an ad-hoc transaction (logged as its write set).
const ADHOC_EVERY: usize = 5;

fn kv() -> History {
    kv_history(COMMAND, 24, ADHOC_EVERY)
}

fn transfer() -> History {
    transfer_history(COMMAND, 24)
}

#[test]
fn power_loss_at_every_io_command_transfer_recovers_a_prefix_with_every_acknowledged_step() {
    power_loss_sweep(&transfer()).assert_clean("command/transfer power loss");
}

#[test]
fn power_loss_at_every_io_command_kv_recovers_a_prefix_with_every_acknowledged_step() {
    power_loss_sweep(&kv()).assert_clean("command/kv power loss");
}

#[test]
fn command_log_damage_sweep_kv_cuts_the_tail_and_names_damage_in_the_durable_part() {
    let (tally, offsets) = damage_sweep(&kv(), false);
    println!("RELIABILITY command/kv damage sweep: {offsets} damaged images");
    tally.assert_clean("command/kv damage");
    assert!(tally.clear_errors > 0, "no damage was detected");
}

#[test]
fn command_log_damage_sweep_transfer_cuts_the_tail_and_names_damage_in_the_durable_part() {
    let (tally, offsets) = damage_sweep(&transfer(), false);
    println!("RELIABILITY command/transfer damage sweep: {offsets} damaged images");
    tally.assert_clean("command/transfer damage");
    assert!(tally.clear_errors > 0, "no damage was detected");
}

#[test]
fn a_rotated_command_log_cut_at_a_block_boundary_is_named() {
    for history in [kv(), transfer()] {
        let (tally, offsets) = damage_sweep(&history, true);
        println!("RELIABILITY command/{} rotated-file block cuts: {offsets} damaged images", history.name);
        assert!(offsets > 0, "the sweep must include such cuts");
        tally.assert_clean("command/rotated-file block cuts");
    }
}

#[test]
fn io_errors_command_kv_stop_acknowledging_and_recover_every_acknowledged_step() {
    io_error_sweep(&kv()).assert_clean("command/kv io errors");
}

#[test]
fn io_errors_command_transfer_stop_acknowledging_and_recover_every_acknowledged_step() {
    io_error_sweep(&transfer()).assert_clean("command/transfer io errors");
}

/// The histories are what the models say under command logging, ad-hoc puts included, and a
/// recovery that replays them gives the last state.
#[test]
fn command_histories_match_their_models_and_replay() {
    for history in [transfer(), kv()] {
        assert!(history.steps.iter().any(|s| matches!(s, Step::Put { .. })) || history.name == "transfer");
        assert_history_matches_step_by_step(&history, 3);
    }
}

// ---------------------------------------------------------------------------------------------
// Command logging with checkpoints: the checkpoint is transactionally consistent through the data
// window (write sets logged from before `e_l` until the checkpoint is installed), and the command
// log before `e_l` is truncated, so recovery = checkpoint + re-execution of the later calls.

/// A checkpoint every 5 ms and a 2 ms pause after every step: a 24-step history sees several.
const COMMAND_CHECKPOINTS: Setup =
    Setup { label: "command-checkpoint", checkpoint_interval_ms: 5, step_pause_ms: 2, ci_crash_stride: 3, ..COMMAND };

#[test]
fn power_loss_at_every_io_command_with_checkpoints_transfer_recovers_a_prefix_with_every_acknowledged_step() {
    assert_power_loss_clean_with_checkpoints(
        &transfer_history(COMMAND_CHECKPOINTS, 24),
        "command-checkpoint/transfer power loss",
    );
}

#[test]
fn power_loss_at_every_io_command_with_checkpoints_kv_recovers_a_prefix_with_every_acknowledged_step() {
    assert_power_loss_clean_with_checkpoints(
        &kv_history(COMMAND_CHECKPOINTS, 24, ADHOC_EVERY),
        "command-checkpoint/kv power loss",
    );
}
