//! Direct vs compiled log replay, side by side in one run (the thesis's Tables 4.1, 4.4, 4.7 and
//! Figures 4.1, 4.2, 4.3, scaled down). For each experiment a value log is written once; then a
//! copy of it is recovered alternately with `direct` and `compiled` replay, `RUNS` times each, on
//! one recovery thread, the mode that goes first alternating from run to run, after one untimed
//! recovery in each mode. Reported: median log-replay time (`RecoveryReport::replay_ms`) and the
//! median index rebuild (`rebuild_ms`: the same code in both modes but for how a secondary entry's
//! key is made, `docs/replay.md`, "Indexes"), redo records per second, the ratio compiled/direct of
//! replay throughput, and that ratio counting the rebuild (medians of each run's replay + rebuild).
//!
//! Run: `cargo bench --bench replay [experiment name, to run one]` (env `REPLAY_INITIAL_ROWS`, default 10^5;
//! `REPLAY_TXNS` (of 5 statements), default 2·10^4; `REPLAY_RUNS`, default 5; `REPLAY_WARMUP=0`
//! skips the untimed recoveries (`scripts/replay-callgrind.sh` counts one run); `REPLAY_HASH_SEED=N`
//! (not 0) fixes the point index's hash seed, so that both modes probe the same slots;
//! `REPLAY_ONLY=direct`
//! or `compiled` recovers in that mode only, e.g. under
//! `valgrind --tool=callgrind --toggle-collect='*value::replay::apply_chunk*'`);
//! `REPLAY_LOG_DIR=DIR` keeps each experiment's log in `DIR/<experiment>` and replays the one
//! found there instead of writing a new one, so that runs in separate processes replay the same
//! log (a log's split into blocks and epochs depends on timing, and with it the order replay
//! meets the keys: up to 3 % of the instructions between two logs of the same history), and
//! `REPLAY_ONLY=write` only writes the logs;
//! `REPLAY_FIGURES=DIR` also writes the figures as figure files for `lazarus report`:
//! `replay-mixes.json` (Tables 4.1/4.4/4.7), `replay-fig-4-1.json` (indexes),
//! `replay-fig-4-2.json` (columns) and `replay-fig-4-3.json` (columns, 10 indexes).

use lazarus::durability::LogScheme;
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::replay::ReplayMode;
use lazarus::report::figure::Figure;
use lazarus::storage::Row;
use lazarus::storage::{Column, ColumnType, IndexSchema, TableSchema, Value};
use lazarus::{Database, DatabaseConfig};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The allocator of the `lazarus` binary, so that allocation costs are those of `lazarus recover`.
#[global_allocator]
static GLOBAL: lazarus::allocator::Mimalloc = lazarus::allocator::Mimalloc;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn options(dir: &Path, mode: ReplayMode) -> ValueOptions {
    let mut o = ValueOptions::new(vec![dir.join("log0")]);
    o.checkpoint.interval_ms = 0;
    o.recovery_threads = 1;
    o.replay_mode = mode;
    o
}

fn open(dir: &Path, mode: ReplayMode) -> (Database, Arc<ValueLogging>) {
    let scheme = Arc::new(ValueLogging::new(options(dir, mode)).expect("scheme"));
    let config = DatabaseConfig { scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>, ..DatabaseConfig::default() };
    (Database::open(config).expect("open"), scheme)
}

/// One experiment: a table shape and a statement mix.
struct Experiment {
    name: String,
    columns: usize,
    indexes: usize,
    /// Percent of statements (after the initial load) that are inserts; the rest are `other`.
    insert_pct: u32,
    other: Other,
}

#[derive(Clone, Copy)]
enum Other {
    Delete,
    Update,
}

fn schema(e: &Experiment) -> TableSchema {
    let mut columns = vec![Column { name: "k".into(), ty: ColumnType::Int, nullable: false }];
    columns.extend((1..=e.columns).map(|i| Column { name: format!("c{i}"), ty: ColumnType::Int, nullable: false }));
    let indexes =
        (0..e.indexes).map(|i| IndexSchema { name: format!("i{i}"), columns: vec![1 + i % e.columns] }).collect();
    TableSchema { name: "t".into(), columns, primary_key: vec![0], indexes }
}

fn row(k: i64, columns: usize, rng: &mut impl Rng) -> Row {
    let mut row = vec![Value::Int(k)];
    row.extend((0..columns).map(|_| Value::Int(rng.random_range(0..1_000_000))));
    Row::new(row)
}

/// Writes the experiment's log into `dir`: the initial rows, then the transactions.
fn write_log(dir: &Path, e: &Experiment, initial: i64, txns: usize) {
    let (db, _) = open(dir, ReplayMode::Direct);
    let t = db.create_table(schema(e)).expect("table");
    let mut w = db.worker();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for start in (0..initial).step_by(1000) {
        w.run(1, |tx| (start..(start + 1000).min(initial)).try_for_each(|k| tx.insert(t, row(k, e.columns, &mut rng))))
            .expect("load");
    }
    let mut live: Vec<i64> = (0..initial).collect();
    let mut next = initial;
    for _ in 0..txns {
        w.run(1, |tx| {
            for _ in 0..5 {
                if rng.random_range(0..100) < e.insert_pct || live.is_empty() {
                    tx.insert(t, row(next, e.columns, &mut rng))?;
                    live.push(next);
                    next += 1;
                    continue;
                }
                let at = rng.random_range(0..live.len());
                match e.other {
                    Other::Delete => {
                        tx.delete(t, &[Value::Int(live.swap_remove(at))])?;
                    }
                    Other::Update => {
                        tx.update(t, row(live[at], e.columns, &mut rng))?;
                    }
                }
            }
            Ok(())
        })
        .expect("txn");
    }
    db.close().expect("close");
}

/// The experiment's log kept under `kept` (`REPLAY_LOG_DIR`), written first if it is not there:
/// into a fresh directory renamed into place, so that a process never replays a half-written log.
fn kept_log(kept: &Path, e: &Experiment, initial: i64, txns: usize) -> std::path::PathBuf {
    let name: String = e.name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let origin = kept.join(format!("{name}-{initial}-{txns}"));
    if !origin.exists() {
        let fresh = kept.join(format!(".{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&fresh);
        write_log(&fresh, e, initial, txns);
        // Another process may have renamed its copy into place first: either copy is whole.
        if std::fs::rename(&fresh, &origin).is_err() {
            let _ = std::fs::remove_dir_all(&fresh);
        }
    }
    origin
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

/// Recovers a copy of `origin`; returns (replay ms, rebuild ms, writes replayed).
fn recover(origin: &Path, scratch: &Path, mode: ReplayMode) -> (f64, f64, u64) {
    let _ = std::fs::remove_dir_all(scratch);
    copy_dir(origin, scratch);
    let (db, scheme) = open(scratch, mode);
    let r = scheme.recovery.lock().clone().expect("report");
    db.close().expect("close");
    (r.replay_ms, r.rebuild_ms, r.writes_installed + r.writes_obsolete)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn experiments() -> Vec<Experiment> {
    let mix =
        |name: &str, insert_pct, other| Experiment { name: name.into(), columns: 1, indexes: 0, insert_pct, other };
    let mut list = vec![
        mix("100 insert", 100, Other::Delete),
        mix("90 insert / 10 delete", 90, Other::Delete),
        mix("75 insert / 25 delete", 75, Other::Delete),
        mix("50 insert / 50 delete", 50, Other::Delete),
        mix("90 insert / 10 update", 90, Other::Update),
        mix("75 insert / 25 update", 75, Other::Update),
        mix("50 insert / 50 update", 50, Other::Update),
    ];
    for indexes in [2, 5, 10] {
        list.push(Experiment {
            name: format!("100 insert, {indexes} indexes"),
            indexes,
            ..mix("", 100, Other::Delete)
        });
    }
    for columns in [10, 25, 50] {
        list.push(Experiment {
            name: format!("100 insert, {columns} columns"),
            columns,
            ..mix("", 100, Other::Delete)
        });
        let name = format!("100 insert, {columns} columns, 10 indexes");
        list.push(Experiment { name, columns, indexes: 10, ..mix("", 100, Other::Delete) });
    }
    list
}

/// A figure of the thesis this bench repeats: (file id, title, x label, [(group label, experiment)]).
type FigureSpec = (&'static str, &'static str, &'static str, Vec<(&'static str, String)>);

fn figure_specs() -> Vec<FigureSpec> {
    let named = |pairs: &[(&'static str, &str)]| pairs.iter().map(|(l, e)| (*l, (*e).to_string())).collect();
    let mixes = ["100 insert", "90 insert / 10 delete", "75 insert / 25 delete", "50 insert / 50 delete"];
    let mixes = mixes.into_iter().chain(["90 insert / 10 update", "75 insert / 25 update", "50 insert / 50 update"]);
    let columns = |suffix: &str| -> Vec<(&'static str, String)> {
        let one = if suffix.is_empty() { "100 insert".to_string() } else { "100 insert, 10 indexes".to_string() };
        let mut groups = vec![("1", one)];
        groups
            .extend([("10", 10), ("25", 25), ("50", 50)].map(|(l, c)| (l, format!("100 insert, {c} columns{suffix}"))));
        groups
    };
    vec![
        (
            "replay-mixes",
            "Replay throughput per statement mix (Tables 4.1, 4.4, 4.7)",
            "mix",
            mixes.map(|m| (m, m.to_string())).collect(),
        ),
        (
            "replay-fig-4-1",
            "Insert replay with secondary indexes (Figure 4.1)",
            "secondary indexes",
            named(&[
                ("0", "100 insert"),
                ("2", "100 insert, 2 indexes"),
                ("5", "100 insert, 5 indexes"),
                ("10", "100 insert, 10 indexes"),
            ]),
        ),
        ("replay-fig-4-2", "Insert replay by columns (Figure 4.2)", "integer columns besides the key", columns("")),
        (
            "replay-fig-4-3",
            "Insert replay by columns, 10 indexes (Figure 4.3)",
            "integer columns besides the key",
            columns(", 10 indexes"),
        ),
    ]
}

/// Writes each figure whose experiments all ran; `rates` maps an experiment to records/s of
/// (direct, compiled) replay, then of (direct, compiled) replay and index rebuild.
fn write_figures(dir: &Path, rates: &HashMap<String, [f64; 4]>, note: &str) {
    std::fs::create_dir_all(dir).expect("figure dir");
    let series = ["direct", "compiled", "direct, with index rebuild", "compiled, with index rebuild"];
    for (id, title, x_label, groups) in figure_specs() {
        let mut figure = Figure::new(id, title, x_label, "redo records replayed per second", &series);
        figure.note = note.to_string();
        for (label, experiment) in &groups {
            if let Some(rates) = rates.get(experiment) {
                figure.push(label, rates.to_vec());
            }
        }
        if figure.groups.len() == groups.len() {
            let path = dir.join(format!("{id}.json"));
            figure.write(&path).expect("write figure");
            println!("wrote {}", path.display());
        }
    }
}

fn main() {
    // SAFETY: first thing in `main`, before any other thread exists (the condition of
    // `keep_freed_memory`). Tuned as the `lazarus` binary tunes it, so that a recovery here meets
    // the memory the product's does: without it mimalloc returns freed pages to the kernel after
    // 10 ms and the next recovery faults them in again, which moved one mode's time by up to 2x
    // between runs of the same log.
    unsafe { lazarus::allocator::keep_freed_memory() };
    let runs = env("REPLAY_RUNS", 5).max(1);
    if let seed @ 1.. = env("REPLAY_HASH_SEED", 0) {
        lazarus::storage::point::fix_hash_seed(seed as u64);
    }
    let (initial, txns) = (env("REPLAY_INITIAL_ROWS", 100_000) as i64, env("REPLAY_TXNS", 20_000));
    let only_var = std::env::var("REPLAY_ONLY").ok();
    let write_only = only_var.as_deref() == Some("write");
    let only: Option<ReplayMode> = only_var.and_then(|m| m.parse().ok());
    let kept_logs = std::env::var_os("REPLAY_LOG_DIR").map(std::path::PathBuf::from);
    let warm_up = env("REPLAY_WARMUP", 1) != 0;
    let wanted = |mode: ReplayMode| only.is_none_or(|o| o == mode);
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let dir = tempfile::tempdir().expect("tempdir");
    let note =
        format!("{initial} initial rows, {txns} transactions of 5 statements, {runs} runs per mode, 1 recovery thread");
    println!("{note}");
    let mut rates = HashMap::new();
    println!(
        "| experiment | records | direct replay ms | compiled replay ms | direct rec/s | compiled rec/s | compiled/direct | rebuild ms (d / c) | with rebuild, compiled/direct |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for e in experiments() {
        if filter.as_ref().is_some_and(|f| e.name != *f) {
            continue;
        }
        let origin = match &kept_logs {
            Some(kept) => kept_log(kept, &e, initial, txns),
            None => {
                let origin = dir.path().join("origin");
                let _ = std::fs::remove_dir_all(&origin);
                write_log(&origin, &e, initial, txns);
                origin
            }
        };
        if write_only {
            println!("| {} | log in {} |", e.name, origin.display());
            continue;
        }
        let scratch = dir.path().join("scratch");
        let (mut direct, mut compiled, mut rebuild_d, mut rebuild_c) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut total_d, mut total_c) = (Vec::new(), Vec::new());
        let mut records = 0;
        // One untimed recovery in each mode first: the first recoveries after writing the log met
        // memory the process had not touched yet, which made the first experiment's first mode
        // 10-15 % slower.
        for mode in [ReplayMode::Direct, ReplayMode::Compiled].into_iter().filter(|&m| wanted(m) && warm_up) {
            recover(&origin, &scratch, mode);
        }
        for run in 0..runs {
            // The mode that goes first alternates, so that neither always meets the memory the
            // other's recovery just freed.
            let order = if run % 2 == 0 {
                [ReplayMode::Direct, ReplayMode::Compiled]
            } else {
                [ReplayMode::Compiled, ReplayMode::Direct]
            };
            for mode in order.into_iter().filter(|&m| wanted(m)) {
                let (ms, rebuild, n) = recover(&origin, &scratch, mode);
                assert!(records == 0 || n == records, "both modes replay the same records");
                records = n;
                let (times, rebuilds, totals) = match mode {
                    ReplayMode::Direct => (&mut direct, &mut rebuild_d, &mut total_d),
                    ReplayMode::Compiled => (&mut compiled, &mut rebuild_c, &mut total_c),
                };
                times.push(ms);
                rebuilds.push(rebuild);
                totals.push(ms + rebuild);
            }
        }
        let (d, c) = (median(direct), median(compiled));
        let (total_d, total_c) = (median(total_d), median(total_c));
        let rate = |ms: f64| records as f64 / (ms / 1e3).max(1e-9);
        rates.insert(e.name.clone(), [rate(d), rate(c), rate(total_d), rate(total_c)]);
        println!(
            "| {} | {records} | {d:.1} | {c:.1} | {:.3e} | {:.3e} | {:.2} | {:.1} / {:.1} | {:.2} |",
            e.name,
            rate(d),
            rate(c),
            d / c,
            median(rebuild_d),
            median(rebuild_c),
            total_d / total_c
        );
    }
    if let Ok(dir) = std::env::var("REPLAY_FIGURES") {
        let command = format!(
            "cargo bench --bench replay (median throughput of replay, and of replay and index rebuild; {note})"
        );
        write_figures(Path::new(&dir), &rates, &command);
    }
}
