//! Replays the fuzz corpus (`fuzz/corpus/<target>/`) through the entry functions the fuzz targets
//! call (`lazarus::fuzzing`), on stable: what CI runs of the fuzzing (the targets themselves need
//! nightly and `cargo fuzz`; `scripts/fuzz.sh` runs them). Every input must decode or fail with a
//! reason, never panic; the seeds taken from real files must still decode.
//!
//! `cargo test --test fuzz_corpus -- --ignored write_seed_corpus` rewrites the seeds
//! (`seed-*` files) from files a short history writes on the simulated disk; inputs the fuzzer
//! found (`crash-*` regressions, minimized corpus entries) are kept.

mod common;

use common::*;
use lazarus::durability::frame;
use lazarus::durability::taurus::format::Flavor;
use lazarus::durability::value::files::{self, EntryFormat};
use lazarus::fuzzing::{self, Decoded, TARGETS};
use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(target))
        .unwrap_or_else(|e| panic!("{}: {e}", corpus_dir(target).display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
}

#[test]
fn every_corpus_file_decodes_or_fails_with_a_reason_without_panicking() {
    let mut total = 0;
    for (target, entry) in TARGETS {
        let files = corpus(target);
        assert!(files.len() >= 5, "{target}: only {} corpus files", files.len());
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fuzz/fuzz_targets/{target}.rs")).exists(),
            "{target}: no fuzz target"
        );
        let mut whole = 0;
        for (path, bytes) in &files {
            let decoded = std::panic::catch_unwind(|| entry(bytes))
                .unwrap_or_else(|_| panic!("{target}: {} panicked", path.display()));
            if let Some(reason) = &decoded.error {
                assert!(!reason.is_empty(), "{target}: {}: an error without a reason", path.display());
            }
            let seed = path.file_name().unwrap().to_string_lossy().starts_with("seed-");
            if seed && decoded.error.is_none() && decoded.items > 0 {
                whole += 1;
            }
        }
        assert!(whole > 0, "{target}: no seed decodes whole any more");
        println!("FUZZ corpus {target}: {} files, {whole} seeds decode whole", files.len());
        total += files.len();
    }
    println!("FUZZ corpus: {total} files replayed");
}

/// The entries reject what they must: the corpus test would pass on an entry that accepts
/// everything, so check a few inputs by hand.
#[test]
fn the_entries_reject_damaged_input_with_a_reason() {
    for (target, entry) in TARGETS {
        let empty = entry(&[]);
        let garbage = entry(&[0xff; 64]);
        // Any bytes are a RESP inline request, and any 4 bytes an indexed key.
        if target != "resp" && target != "indexed_records" {
            assert!(garbage.error.is_some(), "{target} accepted 64 bytes of 0xff: {garbage:?}");
        }
        assert_eq!(entry(&[]), empty, "{target}: not deterministic");
    }
    // RESP: an unterminated bulk length is incomplete, a negative one is an error.
    assert_eq!(fuzzing::parse_resp(b"\x05*1\r\n$3\r\nget\r\n"), Decoded { items: 1, error: None });
    assert!(fuzzing::parse_resp(b"\x05*1\r\n$-5\r\n").error.is_some());
}

// ---------------------------------------------------------------------------------------------
// Seeds

/// Largest seed file: the fuzzer mutates small inputs faster.
const SEED_SIZE_MAX_BYTES: usize = 8 << 10;

/// Most seed files per target.
const SEEDS_PER_TARGET_MAX: usize = 40;

struct Seeds {
    written: usize,
    per_target: std::collections::HashMap<String, usize>,
}

impl Seeds {
    fn put(&mut self, target: &str, name: &str, bytes: &[u8]) {
        let count = self.per_target.entry(target.to_string()).or_default();
        if *count >= SEEDS_PER_TARGET_MAX {
            return;
        }
        *count += 1;
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = &bytes[..bytes.len().min(SEED_SIZE_MAX_BYTES)];
        let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect();
        std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
        self.written += 1;
    }

    /// The payloads of a file's framed blocks from `at` on (at most `max`).
    fn payloads(&mut self, target: &str, name: &str, bytes: &[u8], mut at: usize, max: usize) {
        let mut i = 0;
        while let Ok((payload, size)) = frame::decode_block(&bytes[at..]) {
            if i < max && !payload.is_empty() {
                self.put(target, &format!("{name}.block{i}"), payload);
            }
            i += 1;
            at += size;
        }
    }
}

fn file_label(prefix: &str, path: &Path) -> String {
    format!("{prefix}.{}", path.strip_prefix("/db").unwrap_or(path).display())
}

#[test]
#[ignore = "rewrites fuzz/corpus/*/seed-*: run by hand"]
fn write_seed_corpus() {
    for (target, _) in TARGETS {
        for (path, _) in corpus(target) {
            if path.file_name().unwrap().to_string_lossy().starts_with("seed-") {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
    let mut seeds = Seeds { written: 0, per_target: Default::default() };
    let command = Setup { label: "command", entry_format: EntryFormat::Command, ..VALUE };
    let checkpoints = Setup { label: "checkpoint", checkpoint_interval_ms: 5, step_pause_ms: 2, ..VALUE };
    for (prefix, history) in [
        ("value-kv", kv_history(VALUE, 24, 0)),
        ("value-transfer", transfer_history(VALUE, 24)),
        ("command-kv", kv_history(command, 24, 5)),
        ("command-transfer", transfer_history(command, 24)),
        ("checkpoint-kv", kv_history(checkpoints, 24, 0)),
    ] {
        let disk = run_to_end(&history);
        for path in disk.file_paths() {
            let bytes = disk.contents(&path).unwrap();
            let name = Path::new(path.file_name().unwrap());
            let label = file_label(prefix, &path);
            let file = name.to_string_lossy().to_string();
            if files::is_log_file(name) {
                seeds.put("value_log", &label, &bytes);
                let at = files::decode_log_header(&bytes).map_or(0, |(_, at)| at);
                let target = if prefix.starts_with("command") { "command_log_block" } else { "value_log_block" };
                seeds.payloads(target, &label, &bytes, at, 4);
                seeds.put("frame", &label, &bytes[at..]);
            } else if file == files::PEPOCH_FILE {
                seeds.put("pepoch", &label, &bytes);
            } else if file == files::CATALOG_FILE {
                seeds.put("catalog", &label, &bytes);
            } else if file == "checkpoint" {
                seeds.put("checkpoint_manifest", &label, &bytes);
            } else if file.starts_with("checkpoint.") && !file.ends_with(".tmp") {
                seeds.put("checkpoint_data", &label, &bytes);
                let at = lazarus::durability::checkpoint::format::decode_data_header(&bytes).map_or(0, |(_, at)| at);
                seeds.payloads("checkpoint_block", &label, &bytes, at, 3);
            }
        }
    }
    for flavor in [Flavor::SerialData, Flavor::SerialCmd, Flavor::TaurusData, Flavor::TaurusCmd] {
        let setup = Setup { label: flavor.name(), scheme: SchemeKind::Stream(flavor), ..VALUE };
        for history in [kv_history(setup, 16, 4), transfer_history(setup, 16)] {
            let disk = run_to_end(&history);
            for path in disk.file_paths() {
                let bytes = disk.contents(&path).unwrap();
                let label = file_label(&format!("{}-{}", flavor.name(), history.name), &path);
                let file = path.file_name().unwrap().to_string_lossy().to_string();
                if file.ends_with(".persistent_vector") {
                    seeds.put("stream_persistent_vector", &label, &bytes);
                } else if file.ends_with(".log") {
                    seeds.put("stream_log", &label, &bytes);
                    if let Ok((_, at)) = lazarus::durability::taurus::format::decode_header(&bytes) {
                        seeds.payloads("stream_record", &label, &bytes, at, 3);
                    }
                } else if file == files::CATALOG_FILE {
                    seeds.put("catalog", &label, &bytes);
                }
            }
        }
    }
    indexed_seeds(&mut seeds);
    for (name, source) in [
        ("kv.proc", lazarus::workload::kv::SOURCE),
        ("transfer.proc", lazarus::workload::transfer::SOURCE),
        ("smallbank.proc", lazarus::workload::smallbank::SOURCE),
        ("ycsb.proc", lazarus::workload::ycsb::SOURCE),
        ("tpcc.proc", lazarus::workload::tpcc::SOURCE),
        ("kv_del.proc", KV_DEL_SOURCE),
    ] {
        seeds.put("procedure", name, source.as_bytes());
        // Each procedure on its own, so that the fuzzer starts from small inputs too.
        for (i, part) in source.split("\nprocedure ").enumerate().skip(1).take(4) {
            let tables: String = source.split("\nprocedure ").next().unwrap_or("").to_string();
            seeds.put("procedure", &format!("{name}.{i}"), format!("{tables}\nprocedure {part}").as_bytes());
        }
    }
    for (i, request) in [
        &b"\x00*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"[..],
        b"\x07*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n",
        b"\x01PING\r\nSET a b\r\n",
        b"\x03*0\r\n\r\n*-1\r\n",
        b"\x3f*4\r\n$5\r\nMULTI\r\n$4\r\nEXEC\r\n$3\r\nDEL\r\n$0\r\n\r\n",
        b"\x02INCR counter\n",
        b"\x05*2\r\n$4\r\nECHO\r\n$12\r\nhello\r\nworld\r\n",
    ]
    .into_iter()
    .enumerate()
    {
        seeds.put("resp", &format!("request{i}"), request);
    }
    // Few real files of some kinds: damaged variants of them (cut in half, a byte flipped).
    for (target, _) in TARGETS {
        let originals = corpus(target);
        if originals.len() >= 8 {
            continue;
        }
        for (path, bytes) in originals.iter().filter(|(p, _)| p.to_string_lossy().contains("seed-")) {
            let name = path.file_name().unwrap().to_string_lossy().replace("seed-", "");
            for quarter in 1..4 {
                seeds.put(target, &format!("{name}.cut{quarter}"), &bytes[..bytes.len() * quarter / 4]);
                let mut flipped = bytes.clone();
                if let Some(b) = flipped.get_mut(bytes.len() * quarter / 5) {
                    *b ^= 0x10;
                }
                seeds.put(target, &format!("{name}.flip{quarter}"), &flipped);
            }
        }
    }
    println!("wrote {} seeds", seeds.written);
}

/// The indexed store's values are written by redb on the real disk; its records are made here
/// with the store's own encoding (TID, then the row as the value log encodes it).
fn indexed_seeds(seeds: &mut Seeds) {
    use lazarus::durability::codec;
    use lazarus::storage::Value;
    let rows: [Vec<Value>; 3] = [
        vec![Value::Int(7), Value::text("seven")],
        vec![Value::text("key:1"), Value::text("000000000001d5")],
        vec![Value::Int(1), Value::Int(0), Value::Int(100)],
    ];
    for (i, row) in rows.iter().enumerate() {
        let mut image = (1u64 << 32 | i as u64).to_le_bytes().to_vec();
        codec::encode_row(row, &mut image);
        seeds.put("indexed_records", &format!("image{i}"), &image);
    }
    for loggers in 0..3u32 {
        let mut progress = 9u64.to_le_bytes().to_vec();
        progress.extend_from_slice(&loggers.to_le_bytes());
        for l in 0..loggers {
            progress.extend_from_slice(&l.to_le_bytes());
            progress.extend_from_slice(&3u64.to_le_bytes());
            progress.extend_from_slice(&4096u64.to_le_bytes());
        }
        seeds.put("indexed_records", &format!("progress{loggers}"), &progress);
    }
    seeds.put("indexed_records", "key", &lazarus::durability::indexed::store::full_key(2, b"\x80\x00\x01"));
}
