//! `lazarus crash-test` through the real binary: a child process running a workload under value
//! logging is killed with SIGKILL at seeded moments, recovered and verified (every acknowledged
//! transaction present, the state consistent; with damage, a verified state or a clear error).

use std::process::Command;

/// Runs `lazarus crash-test` with `args`; returns (success, stdout + stderr).
fn crash_test(args: &[&str]) -> (bool, String) {
    let work = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .arg("crash-test")
        .args(args)
        .arg("--work-dir")
        .arg(work.path())
        .output()
        .expect("run lazarus crash-test");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Asserts that the crash test passed with `trials` trials and no failure; returns its output.
fn assert_passes(args: &[&str], trials: u64) -> String {
    let (ok, text) = crash_test(args);
    println!("{text}");
    assert!(ok, "crash-test {args:?} failed:\n{text}");
    assert!(text.contains(&format!(": {trials} trials,")), "expected {trials} trials:\n{text}");
    assert!(text.contains(" 0 failures"), "expected no failures:\n{text}");
    text
}

#[test]
fn twenty_sigkill_trials_on_tpcc_lose_no_acknowledged_transaction() {
    assert_passes(&["--workload", "tpcc", "--warehouses", "1", "--trials", "20", "--seed", "100"], 20);
}

#[test]
fn twenty_sigkill_trials_on_kv_with_restarts_keep_versions_between_acked_and_issued() {
    let args = ["--workload", "kv", "--records", "10000", "--trials", "20", "--rounds", "2", "--seed", "200"];
    let text = assert_passes(&args, 20);
    // Checkpoints run every 150 ms in the child: some kills must land after one was installed,
    // so that recovery from checkpoint + log is what these trials verify.
    let line = text.lines().find(|l| l.starts_with("recoveries from a checkpoint: ")).expect("checkpoint line");
    let count: u64 = line["recoveries from a checkpoint: ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(count > 0, "no trial recovered from a checkpoint:\n{text}");
}

#[test]
fn damaged_newest_log_files_give_the_acknowledged_state_or_a_clear_error() {
    assert_passes(&["--workload", "kv", "--records", "10000", "--trials", "8", "--damage", "--seed", "300"], 8);
    assert_passes(&["--workload", "transfer", "--trials", "3", "--rounds", "2", "--damage", "--seed", "400"], 3);
    assert_passes(&["--workload", "tpcc", "--trials", "2", "--damage", "--seed", "500"], 2);
}

#[test]
fn sigkill_trials_under_command_logging_lose_no_acknowledged_transaction() {
    assert_passes(
        &[
            "--workload",
            "kv",
            "--records",
            "5000",
            "--trials",
            "8",
            "--rounds",
            "2",
            "--seed",
            "700",
            "--durability",
            "command",
        ],
        8,
    );
    assert_passes(&["--workload", "tpcc", "--trials", "3", "--seed", "800", "--durability", "command", "--damage"], 3);
}

/// The harness must be able to fail: a child that acknowledges at commit, before its epoch is
/// durable, loses acknowledged sets at a kill, and the verifier says which and how to reproduce.
#[test]
fn a_child_that_acknowledges_before_durability_is_caught() {
    let (ok, text) = crash_test(&["--workload", "kv", "--trials", "3", "--seed", "600", "--ack-before-durable"]);
    println!("{text}");
    assert!(!ok, "a broken child passed:\n{text}");
    assert!(text.contains("but version") && text.contains("was acknowledged"), "{text}");
    assert!(text.contains("reproduce with: lazarus crash-test --workload kv --trials 1 --seed 60"), "{text}");
}
