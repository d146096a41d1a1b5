//! `lazarus bench` options that act on the process before the run.

use std::process::Command;

/// Runs `lazarus bench` on a tiny transfer workload with `extra` options; (success, output).
fn bench(extra: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .args(["bench", "--workload", "transfer", "--threads", "1", "--duration-s", "0.2"])
        .args(extra)
        .output()
        .expect("run lazarus");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn prefault_faults_in_the_heap_it_was_asked_for_before_the_run() {
    let (ok, text) = bench(&["--prefault-mib", "16"]);
    assert!(ok, "{text}");
    assert!(text.contains("prefaulted 16 MiB of heap in"), "{text}");
    assert!(text.contains("throughput"), "{text}");
}

#[test]
fn prefault_of_more_than_the_machine_has_is_a_clear_error() {
    // 2^40 MiB: more than any machine's memory.
    let (ok, text) = bench(&["--prefault-mib", "1099511627776"]);
    assert!(!ok, "a prefault of 1 EiB succeeded:\n{text}");
    assert!(text.contains("the machine has"), "{text}");
}
