//! `lazarus inspect`: a log directory described file by file, damage named by its offset, and
//! nothing written.

use lazarus::durability::LogScheme;
use lazarus::durability::inspect::{inspect_dir, inspect_log_file};
use lazarus::durability::value::files;
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::io::FileSystem;
use lazarus::io::real::RealFs;
use lazarus::storage::{ParamValue, Value};
use lazarus::{Database, DatabaseConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const SOURCE: &str = "
table kv (k int not null, v int not null, primary key (k));
procedure put(k int, v int) {
    select v into old from kv where k = k;
    if found { update kv set v = v where k = k; } else { insert into kv values (k, v); }
}
procedure remove(k int) { delete from kv where k = k; }
";

/// Writes `puts` puts and one delete, with a rotation every 2 epochs; returns the log files.
fn write_log(dir: &Path, puts: i64) -> Vec<PathBuf> {
    let mut options = ValueOptions::new(vec![dir.to_path_buf()]);
    options.rotate_epochs = 2;
    options.checkpoint.interval_ms = 0;
    let scheme = Arc::new(ValueLogging::new(options).unwrap());
    let config = DatabaseConfig { epoch_interval_ms: 5, scheme: scheme as Arc<dyn LogScheme>, ..Default::default() };
    let db = Database::open(config).unwrap();
    db.load_module("kv.proc", SOURCE).unwrap();
    let mut worker = db.worker();
    let int = |v: i64| ParamValue::Scalar(Value::Int(v));
    for i in 0..puts {
        let out = worker.call("put", &[int(i % 7), int(i)]).unwrap();
        worker.wait_durable(&out.committed.durability).unwrap();
    }
    let out = worker.call("remove", &[int(0)]).unwrap();
    worker.wait_durable(&out.committed.durability).unwrap();
    db.close().unwrap();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| files::is_log_file(Path::new(p.file_name().unwrap())))
        .collect();
    logs.sort();
    logs
}

#[test]
fn every_write_is_counted_and_every_file_described() {
    let dir = tempfile::tempdir().unwrap();
    let logs = write_log(dir.path(), 30);
    assert!(logs.len() >= 2, "rotation should have made several files: {logs:?}");
    let fs = RealFs;
    let summaries: Vec<_> = logs.iter().map(|p| inspect_log_file(&fs, p, true).unwrap()).collect();
    // 30 puts and 1 delete, one write each (the module load writes no entry).
    assert_eq!(summaries.iter().map(|s| s.writes).sum::<u64>(), 31);
    assert_eq!(summaries.iter().map(|s| s.records.len()).sum::<usize>(), 31);
    assert_eq!(summaries.iter().flat_map(|s| &s.records).filter(|r| r.ends_with("delete")).count(), 1);
    for s in &summaries {
        assert!(s.damage.is_none(), "{s:?}");
        let closed = s.path.file_name().unwrap().to_string_lossy().starts_with("old_data");
        assert_eq!(s.ended, closed, "only closed files end with an end block: {s:?}");
    }
    let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
    let text = inspect_dir(&fs, dir.path(), false).unwrap();
    assert!(text.contains("pepoch: persistent epoch"), "{text}");
    assert!(text.contains("catalog: modules [\"kv.proc\"]"), "{text}");
    for log in &logs {
        assert!(text.contains(&log.file_name().unwrap().to_string_lossy().to_string()), "{text}");
    }
}

#[test]
fn a_damaged_block_is_named_by_its_offset_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let logs = write_log(dir.path(), 12);
    let fs = RealFs;
    let (path, whole) = logs
        .iter()
        .map(|p| (p.clone(), inspect_log_file(&fs, p, true).unwrap()))
        .find(|(_, s)| s.blocks >= 1)
        .expect("a file with a block");
    let header_len = files::decode_log_header(&std::fs::read(&path).unwrap()).unwrap().1;
    // The first block starts right after the header; a flipped payload byte fails its checksum.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[header_len + 20] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let damaged = inspect_log_file(&fs, &path, true).unwrap();
    let (offset, reason) = damaged.damage.clone().expect("the damage is reported");
    assert_eq!(offset, header_len as u64, "{reason}");
    assert!(reason.contains("payload"), "{reason}");
    assert_eq!(damaged.blocks, 0);
    assert!(whole.blocks >= 1 && damaged.writes < whole.writes.max(1));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "inspect wrote to the file");
    // A torn tail: the file cut inside its last block.
    let cut = bytes.len() - 3;
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let torn = inspect_log_file(&fs, &path, false).unwrap();
    assert!(torn.damage.is_some(), "{torn:?}");
}

#[test]
fn the_command_line_prints_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 5);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .args(["inspect", "--records", "--log-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Value log, logger 0, sequence 1") && text.contains("put [Int("), "{text}");
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .args(["inspect", "--log-dir", "/nonexistent/lazarus-inspect"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/lazarus-inspect"));
}

/// A `taurus-cmd` log of `calls` puts on two loggers in one directory: returns its segments.
fn write_stream_log(dir: &Path, calls: i64) -> Vec<PathBuf> {
    use lazarus::durability::taurus::{StreamLogging, StreamOptions, format::Flavor};
    let mut options = StreamOptions::new(Flavor::TaurusCmd, vec![dir.to_path_buf()]);
    options.loggers = 2;
    let scheme = Arc::new(StreamLogging::new(options).unwrap());
    let config = DatabaseConfig { epoch_interval_ms: 5, scheme: scheme as Arc<dyn LogScheme>, ..Default::default() };
    let db = Database::open(config).unwrap();
    db.load_module("kv.proc", SOURCE).unwrap();
    let mut worker = db.worker();
    let int = |v: i64| ParamValue::Scalar(Value::Int(v));
    for i in 0..calls {
        let out = worker.call("put", &[int(i % 3), int(i)]).unwrap();
        worker.wait_durable(&out.committed.durability).unwrap();
    }
    db.close().unwrap();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

/// The stream schemes' segments: every logged call counted with its predecessors, the
/// persistent vector decoded, and damage named by its offset without touching the file.
#[test]
fn stream_segments_count_every_call_and_name_damage_by_offset() {
    use lazarus::durability::taurus::inspect::inspect_segment;
    let dir = tempfile::tempdir().unwrap();
    let logs = write_stream_log(dir.path(), 12);
    let fs = RealFs;
    let summaries: Vec<_> = logs.iter().map(|p| inspect_segment(&fs, p, true).unwrap()).collect();
    assert_eq!(summaries.iter().map(|s| s.calls).sum::<u64>(), 12, "{summaries:?}");
    assert_eq!(summaries.iter().map(|s| s.txns).sum::<u64>(), 12);
    assert_eq!(summaries.iter().map(|s| s.records.len()).sum::<usize>(), 12);
    // Puts of 3 keys: every call after the first three read and overwrote an earlier one's write.
    assert!(summaries.iter().map(|s| s.raw_predecessors).sum::<u64>() >= 9, "{summaries:?}");
    for s in &summaries {
        assert!(s.damage.is_none(), "{s:?}");
        assert!(s.records.iter().all(|r| r.contains("call procedure #")), "{s:?}");
    }
    let fs_dyn: Arc<dyn FileSystem> = Arc::new(RealFs);
    let text = inspect_dir(&fs_dyn, dir.path(), false).unwrap();
    assert!(text.contains("taurus.persistent_vector: taurus-cmd persistent vector, round"), "{text}");
    assert!(text.contains("taurus-cmd log, logger 1 of 2"), "{text}");

    // Flip a byte of the first record of a segment that has one.
    let (path, whole) = logs.iter().zip(&summaries).find(|(_, s)| s.txns > 0).expect("a segment with a record");
    let header_len = lazarus::durability::taurus::format::decode_header(&std::fs::read(path).unwrap()).unwrap().1;
    let mut bytes = std::fs::read(path).unwrap();
    bytes[header_len + 20] ^= 0x5a;
    std::fs::write(path, &bytes).unwrap();
    let damaged = inspect_segment(&fs, path, false).unwrap();
    let (offset, reason) = damaged.damage.clone().expect("the damage is reported");
    assert_eq!(offset, header_len as u64, "{reason}");
    assert_eq!(damaged.txns, 0, "nothing is counted past the damage (whole: {})", whole.txns);
    assert_eq!(std::fs::read(path).unwrap(), bytes, "inspect wrote to the file");
}
