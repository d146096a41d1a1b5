//! Running `lazarus crash-test` from a test and reading its summary (shared by the test files
//! that drive the crash harness through the binary).

use std::process::Command;

/// Runs `lazarus crash-test ARGS` in a fresh work directory: whether it exited successfully,
/// and everything it printed.
pub fn run(args: &[&str]) -> (bool, String) {
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

/// Asserts that the crash test passed with no failure; returns its output.
pub fn assert_clean(args: &[&str]) -> String {
    let (ok, text) = run(args);
    println!("{text}");
    assert!(ok, "crash-test {args:?} failed:\n{text}");
    assert!(text.contains(" 0 failures"), "expected no failures:\n{text}");
    text
}

/// The number of trials the summary says recovered from a checkpoint.
pub fn recoveries_from_a_checkpoint(text: &str) -> u64 {
    const PREFIX: &str = "recoveries from a checkpoint: ";
    let line = text.lines().find(|l| l.starts_with(PREFIX)).unwrap_or_else(|| panic!("no checkpoint line:\n{text}"));
    let count = line[PREFIX.len()..].split(' ').next().unwrap_or_default();
    count.parse().unwrap_or_else(|e| panic!("checkpoint line {line:?}: {e}"))
}
