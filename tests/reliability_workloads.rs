//! Reliability of the value and command schemes under the benchmark workloads: Smallbank, YCSB
//! and a tiny TPC-C (`tests/common/histories.rs`, whose model is a reference run that never
//! crashes): power loss at every I/O of a history (and of recovery) and injected I/O errors, with
//! the oracle of `tests/common/`. In CI every 8th crash point and fault point is tried
//! (`LAZARUS_RELIABILITY_FULL=1`: all of them). `docs/RELIABILITY.md` has the numbers.

mod common;

use common::*;
use lazarus::durability::value::files::EntryFormat;

const VALUE_SAMPLED: Setup = Setup { ci_crash_stride: 8, ..VALUE };
const COMMAND_SAMPLED: Setup = Setup { label: "command", entry_format: EntryFormat::Command, ..VALUE_SAMPLED };

fn histories(setup: Setup) -> [History; 3] {
    [smallbank_history(setup, 20), ycsb_history(setup, 20), tpcc_history(setup, 16)]
}

/// The reference run's states are what the database shows step by step under each scheme, and
/// the histories exercise what they claim (aborted steps dropped, every procedure used).
#[test]
fn workload_histories_match_their_reference_runs() {
    for setup in [VALUE_SAMPLED, COMMAND_SAMPLED] {
        for history in histories(setup) {
            assert!(history.steps.len() >= 14, "{}: {} steps", history.name, history.steps.len());
            assert_history_matches_step_by_step(&history, 5);
            let distinct = history.states.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(distinct * 2 >= history.steps.len(), "{}: most steps change nothing", history.name);
        }
    }
}

#[test]
fn power_loss_at_every_io_workloads_value_recover_a_prefix_with_every_acknowledged_step() {
    for history in histories(VALUE_SAMPLED) {
        power_loss_sweep(&history).assert_clean(&format!("value/{} power loss", history.name));
    }
}

#[test]
fn power_loss_at_every_io_workloads_command_recover_a_prefix_with_every_acknowledged_step() {
    for history in histories(COMMAND_SAMPLED) {
        power_loss_sweep(&history).assert_clean(&format!("command/{} power loss", history.name));
    }
}

#[test]
fn io_errors_workloads_value_stop_acknowledging_and_recover_every_acknowledged_step() {
    for history in histories(VALUE_SAMPLED) {
        io_error_sweep(&history).assert_clean(&format!("value/{} io errors", history.name));
    }
}

#[test]
fn io_errors_workloads_command_stop_acknowledging_and_recover_every_acknowledged_step() {
    for history in histories(COMMAND_SAMPLED) {
        io_error_sweep(&history).assert_clean(&format!("command/{} io errors", history.name));
    }
}
