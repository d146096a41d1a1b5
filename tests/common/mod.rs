//! Shared by the reliability sweeps (`tests/reliability_*.rs`): histories and their models and the
//! acknowledged-prefix oracle (re-exported from `lazarus::crash::{model, power_loss}`, which
//! `lazarus crash-test --power-loss` runs too), and the sweeps themselves (power loss at every I/O of a history and
//! of recovery, damage, injected I/O errors), over a [`Setup`] that says which scheme runs.
//! `docs/RELIABILITY.md` describes them and has the numbers.
//!
//! **The oracle.** A history runs on one thread through two workers (so both loggers log), so its
//! serial order is the order its steps were issued. A model gives the database state after every
//! prefix of the steps. After a crash, the recovered state must equal the state after a prefix P
//! with `acked ≤ P ≤ issued`, where `acked` is one past the last step whose acknowledgement the
//! client saw (`wait_durable` returned Ok, or a module load returned Ok) and `issued` counts the
//! steps attempted. Secondary indexes must agree with their tables.
//!
//! `LAZARUS_RELIABILITY_FULL=1` runs the long sweep (more seeds, every crash point of recovery,
//! every fault point); `LAZARUS_RELIABILITY_SEEDS=n` sets the damage seeds per crash point.
//! Each test prints a `RELIABILITY` line with its counts (`--nocapture` shows them).

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use lazarus::Database;
use lazarus::db::DbError;
use lazarus::durability::DurabilityError;
use lazarus::durability::checkpoint::format as checkpoint_format;
use lazarus::durability::frame;
use lazarus::durability::value::ValueLogging;
use lazarus::durability::value::files;
use lazarus::io::sim::{Fault, FaultError, OpKind, SECTOR_SIZE_BYTES, SimDisk};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use lazarus::crash::model::*;
pub use lazarus::crash::power_loss::*;

pub mod histories;
pub mod schemes;

#[allow(unused_imports)]
pub use histories::*;
#[allow(unused_imports)]
pub use schemes::*;

// ---------------------------------------------------------------------------------------------
// Knobs, opening a database on a simulated disk

pub struct Knobs {
    pub full: bool,
    pub seeds: u64,
    pub recovery_crash_stride: u64,
    pub fault_stride: usize,
}

pub fn knobs() -> Knobs {
    let full = std::env::var("LAZARUS_RELIABILITY_FULL").is_ok_and(|v| v == "1");
    let seeds_default = if full { 12 } else { 3 };
    let seeds = std::env::var("LAZARUS_RELIABILITY_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(seeds_default);
    Knobs { full, seeds, recovery_crash_stride: if full { 1 } else { 8 }, fault_stride: if full { 1 } else { 3 } }
}

/// Opens (recovers) a value-scheme database on `disk`; also returns the scheme, for its
/// checkpoint status.
pub fn open_scheme(setup: Setup, disk: &SimDisk) -> Result<(Database, Arc<ValueLogging>), DbError> {
    let (db, scheme) = lazarus::crash::power_loss::open_scheme(setup, disk)?;
    Ok((db, scheme.expect("a value-scheme setup")))
}

// ---------------------------------------------------------------------------------------------
// 1. Power loss at every I/O (the oracle, histories and sweep live in `lazarus::crash`)

/// [`power_loss_sweep`] of a history that takes checkpoints: clean, and some crashed image held
/// an installed checkpoint (so recovery from checkpoint + log is what the sweep checked).
pub fn assert_power_loss_clean_with_checkpoints(history: &History, what: &str) {
    let tally = power_loss_sweep(history);
    tally.assert_clean(what);
    assert!(tally.checkpointed_images > 0, "{what}: no crashed image held an installed checkpoint");
}

pub fn power_loss_sweep(history: &History) -> Tally {
    let knobs = knobs();
    let crash_stride = if knobs.full { 1 } else { history.setup.ci_crash_stride as u64 };
    let trace = std::env::var("LAZARUS_RELIABILITY_TRACE").is_ok();
    let sweep =
        SweepKnobs { seeds: knobs.seeds, crash_stride, recovery_crash_stride: knobs.recovery_crash_stride, trace };
    power_loss_sweep_with(history, sweep)
}

// ---------------------------------------------------------------------------------------------
// 2. Log damage

/// A disk image whose logs hold `acked` acknowledged steps, then a synced tail that `pepoch`
/// does not cover (the pepoch rename failed), and the state recovery must give.
pub fn damaged_base(history: &History) -> (SimDisk, Dump) {
    let disk = SimDisk::new();
    let db = open(history.setup, &disk).expect("open");
    let acked = history.steps.len() - 3;
    let run = run_history(&db, &disk, history, 0..acked, false);
    assert_eq!(run.acked, acked, "{:?}", run.first_error);
    disk.inject(Fault {
        kind: Some(OpKind::Rename),
        nth: disk.ops_of(OpKind::Rename) + 1,
        error: FaultError::Eio,
        sticky: true,
    });
    let mut workers = [db.worker(), db.worker()];
    let mut last = None;
    for step in &history.steps[acked..] {
        last = Some(match step {
            Step::Call { worker, procedure, args } => {
                workers[*worker].call(procedure, args).expect("call").committed.durability
            }
            Step::Put { worker, table, row } => put(&mut workers[*worker], table, row).expect("put"),
            Step::Module { .. } => panic!("the tail must be transactions"),
        });
    }
    db.epochs().advance();
    let err = workers[0].wait_durable(&last.expect("a tail")).expect_err("the pepoch rename fails");
    assert!(err.to_string().contains("Input/output error"), "{err}");
    drop(workers);
    let _ = db.close();
    let image = disk.crash(0);
    (image, history.states[acked].clone())
}

/// The header of a log file of a crash image; `None` for an empty one, created by a rotation
/// whose header had not been written when the image was taken. Any other header error in an
/// undamaged image is a bug.
pub fn log_header(bytes: &[u8]) -> Option<files::LogHeader> {
    (!bytes.is_empty()).then(|| files::decode_log_header(bytes).expect("log header").0)
}

/// Where the durable part of each file of the image ends.
pub fn durable_limits(image: &SimDisk) -> Vec<(PathBuf, u64)> {
    let pepoch_path = Path::new(LOG_DIRS[0]).join(files::PEPOCH_FILE);
    let pepoch = files::decode_pepoch(&image.contents(&pepoch_path).expect("pepoch")).expect("pepoch decodes");
    let mut out = Vec::new();
    for path in image.file_paths() {
        let bytes = image.contents(&path).unwrap_or_default();
        let name = Path::new(path.file_name().unwrap_or_default());
        let len = bytes.len() as u64;
        let limit = if name == Path::new(files::PEPOCH_FILE)
            || name == Path::new(files::CATALOG_FILE)
            || name == Path::new(checkpoint_format::MANIFEST_FILE)
        {
            len
        } else if let Some(id) = name.to_str().and_then(checkpoint_format::data_file_checkpoint_id) {
            // The installed checkpoint's files were synced before its manifest; others are debris.
            if installed_checkpoint(image) == Some(id) { len } else { 0 }
        } else if files::is_log_file(name) {
            match log_header(&bytes) {
                // Nothing in a file without a header can be durable.
                None => 0,
                Some(header) => {
                    let position = pepoch.positions.iter().find(|p| p.logger == header.logger).expect("position");
                    match header.file_seq.cmp(&position.file_seq) {
                        std::cmp::Ordering::Less => len,
                        std::cmp::Ordering::Equal => position.durable_len_bytes,
                        std::cmp::Ordering::Greater => 0,
                    }
                }
            }
        } else {
            0 // e.g. pepoch.tmp: never read
        };
        out.push((path, limit));
    }
    out
}

/// Block start offsets of a log file (after its header), as far as they decode.
pub fn block_starts(bytes: &[u8]) -> Vec<usize> {
    let Ok((_, mut at)) = files::decode_log_header(bytes) else { return vec![0] };
    let mut starts = vec![0, at];
    while let Ok((_, size)) = frame::decode_block(&bytes[at..]) {
        at += size;
        starts.push(at);
    }
    starts
}

/// The byte offsets swept in a file: the last blocks before the durable limit and everything
/// after it ("tail"), and a window in the middle.
pub fn windows(path: &Path, bytes: &[u8], limit: u64) -> (Range<usize>, Range<usize>) {
    let len = bytes.len();
    let name = Path::new(path.file_name().unwrap_or_default());
    if !files::is_log_file(name) {
        return (0..len, 0..0);
    }
    let starts = block_starts(bytes);
    let before_limit: Vec<usize> = starts.iter().copied().filter(|&s| s < limit as usize).collect();
    let tail_start = before_limit.iter().rev().nth(2).copied().unwrap_or(0);
    let middle = len / 2;
    (tail_start..len, middle.saturating_sub(32)..(middle + 32).min(tail_start))
}

/// One damaged image and the bytes [start, end) it touched.
pub struct Damage {
    pub what: String,
    pub start: usize,
    pub bytes: Vec<u8>,
    /// For a truncation, where the file was cut.
    pub cut: Option<usize>,
}

pub fn damages(path: &Path, bytes: &[u8], limit: u64) -> Vec<Damage> {
    let (tail, middle) = windows(path, bytes, limit);
    let mut out = Vec::new();
    for cut in tail.clone() {
        out.push(Damage {
            what: format!("truncated to {cut}"),
            start: cut,
            bytes: bytes[..cut].to_vec(),
            cut: Some(cut),
        });
    }
    for at in tail.chain(middle) {
        let mut b = bytes.to_vec();
        b[at] ^= 1 << (at % 8);
        out.push(Damage { what: format!("bit {} flipped at {at}", at % 8), start: at, bytes: b, cut: None });
    }
    let sector = SECTOR_SIZE_BYTES as usize;
    for s in (0..bytes.len()).step_by(sector) {
        sector_damages(bytes, s, &mut out);
    }
    out
}

/// The damages of the sector of `bytes` that starts at `s`: zeroed, and — when a whole sector
/// follows — duplicated onto the next sector (a misdirected write: its data also landed there).
pub fn sector_damages(bytes: &[u8], s: usize, out: &mut Vec<Damage>) {
    let sector = SECTOR_SIZE_BYTES as usize;
    let end = (s + sector).min(bytes.len());
    let mut zeroed = bytes.to_vec();
    zeroed[s..end].fill(0);
    out.push(Damage { what: format!("sector at {s} zeroed"), start: s, bytes: zeroed, cut: None });
    if end + sector <= bytes.len() {
        let mut dup = bytes.to_vec();
        dup.copy_within(s..end, end);
        out.push(Damage { what: format!("sector at {s} duplicated onto {end}"), start: end, bytes: dup, cut: None });
    }
}

/// Whether `damage` cuts a wholly durable log file at a block boundary, where every block before
/// the cut is intact (only the end block, or the durable length in `pepoch`, can tell).
pub fn is_rotated_block_cut(path: &Path, original: &[u8], limit: u64, damage: &Damage) -> bool {
    let name = Path::new(path.file_name().unwrap_or_default());
    files::is_log_file(name)
        && limit == original.len() as u64
        && damage.cut.is_some_and(|cut| cut < original.len() && block_starts(original).contains(&cut))
}

/// Sweeps every damage of every file of a damaged base image: only the block-boundary cuts of
/// wholly durable log files when `block_cuts`, everything else otherwise.
pub fn damage_sweep(history: &History, block_cuts: bool) -> (Tally, u64) {
    let (image, expected) = damaged_base(history);
    let clean = open(history.setup, &image.fork()).expect("the undamaged image recovers");
    assert_eq!(dump(&clean).expect("dump"), expected);
    let _ = clean.close();
    let limits = durable_limits(&image);
    assert!(
        limits.iter().any(|(p, limit)| files::is_log_file(Path::new(p.file_name().unwrap_or_default()))
            && image.contents(p).is_some_and(|b| b.len() as u64 > *limit && *limit > 0)),
        "the base image needs a durable file with a tail: {limits:?}"
    );
    damage_files(history, &image, &limits, &expected, block_cuts, 1)
}

/// Damages each of `limits`' files of `image` in every way of [`damages`] (only the block-boundary
/// cuts of wholly durable log files when `block_cuts`, everything else otherwise), recovers each
/// damaged image and checks it: damage from a file's durable limit on must give `expected`,
/// damage before it a `Corrupt` error naming the file. Tries every `stride`-th damage of a file.
/// Returns the tally and the images tried.
pub fn damage_files(
    history: &History,
    image: &SimDisk,
    limits: &[(PathBuf, u64)],
    expected: &Dump,
    block_cuts: bool,
    stride: usize,
) -> (Tally, u64) {
    let mut tally = Tally::default();
    let mut offsets = 0u64;
    for (path, limit) in limits {
        let original = image.contents(path).unwrap_or_default();
        for damage in damages(path, &original, *limit).into_iter().step_by(stride) {
            if is_rotated_block_cut(path, &original, *limit, &damage) != block_cuts {
                continue;
            }
            offsets += 1;
            let case = format!("{} {}: {}", history.name, path.display(), damage.what);
            let changed = damage.bytes != original;
            let must_fail = changed && (damage.start as u64) < *limit;
            let disk = image.fork();
            assert!(disk.replace_contents(path, &damage.bytes));
            check_damaged(history.setup, &disk, path, must_fail, expected, &mut tally, &case);
        }
    }
    (tally, offsets)
}

pub fn check_damaged(
    setup: Setup,
    disk: &SimDisk,
    path: &Path,
    must_fail: bool,
    expected: &Dump,
    tally: &mut Tally,
    case: &str,
) {
    tally.cases += 1;
    match open(setup, disk) {
        Err(DbError::Durability(DurabilityError::Corrupt { file, offset, reason })) => {
            tally.clear_errors += 1;
            if !must_fail {
                tally.violation(format!("{case}: damage outside the durable part failed recovery: {reason}"));
            } else if file != path {
                tally
                    .violation(format!("{case}: the error names {} at {offset}, not the damaged file", file.display()));
            }
        }
        Err(e) => {
            tally.other_errors += 1;
            tally.violation(format!("{case}: recovery failed without naming file and offset: {e}"));
        }
        Ok(db) => {
            match dump(&db) {
                Ok(state) if state == *expected => {
                    if must_fail {
                        tally.undetected_damage += 1;
                        tally.violation(format!("{case}: damage in the durable part went undetected"));
                    }
                }
                Ok(state) => {
                    tally.silent_divergences += 1;
                    tally.violation(format!("{case}: SILENT DIVERGENCE: {state:?}, expected {expected:?}"));
                }
                Err(e) => {
                    tally.silent_divergences += 1;
                    tally.violation(format!("{case}: {e}"));
                }
            }
            let _ = db.close();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. I/O errors

pub const FAULT_KINDS: [Option<OpKind>; 8] = [
    Some(OpKind::Append),
    Some(OpKind::SyncData),
    Some(OpKind::SyncDir),
    Some(OpKind::Rename),
    Some(OpKind::Open),
    Some(OpKind::Exists),
    Some(OpKind::CreateDir),
    None,
];

pub fn io_error_sweep(history: &History) -> Tally {
    io_error_sweep_with(history, &FAULT_KINDS, |disk, fault| disk.inject(fault))
}

/// [`io_error_sweep`] over fault kinds `kinds`, each fault armed on the fresh disk by `arm` (e.g.
/// counted only on some paths). The fault points go up to each kind's count in an unharmed run.
pub fn io_error_sweep_with(history: &History, kinds: &[Option<OpKind>], arm: impl Fn(&SimDisk, Fault)) -> Tally {
    let knobs = knobs();
    let steps = history.steps.len() - 1;
    let probe = SimDisk::new();
    let db = open(history.setup, &probe).expect("open");
    let run = run_history(&db, &probe, history, 0..steps, false);
    assert_eq!(run.acked, steps, "{:?}", run.first_error);
    db.close().expect("close");
    let mut tally = Tally::default();
    for &kind in kinds {
        let total = kind.map_or(probe.ops(), |k| probe.ops_of(k));
        // Setups sampled in CI (`ci_crash_stride` > 1) sample their fault points as sparsely.
        let sampled = if knobs.full { 1 } else { history.setup.ci_crash_stride };
        let stride = sampled * if kind.is_none() { knobs.fault_stride * 4 } else { knobs.fault_stride };
        for nth in (1..=total).step_by(stride) {
            for (error, sticky) in [(FaultError::Eio, false), (FaultError::Enospc, true)] {
                let fault = Fault { kind, nth, error, sticky };
                let case = format!("{} {fault:?}", history.name);
                fault_case_armed(history, &case, fault.nth, steps, &mut tally, |disk| arm(disk, fault));
            }
        }
    }
    tally
}

pub fn fault_case(history: &History, fault: Fault, steps: usize, tally: &mut Tally) {
    let case = format!("{} {fault:?}", history.name);
    fault_case_armed(history, &case, fault.nth, steps, tally, |disk| disk.inject(fault));
}

/// [`fault_case`] with the fault armed by `arm` on the fresh disk (e.g. counted on some paths
/// only); `seed` is the damage seed of the crash after the run.
pub fn fault_case_armed(
    history: &History,
    case: &str,
    seed: u64,
    steps: usize,
    tally: &mut Tally,
    arm: impl FnOnce(&SimDisk),
) {
    tally.fault_points += 1;
    let disk = SimDisk::new();
    arm(&disk);
    let run = match open(history.setup, &disk) {
        Ok(db) => {
            let run = run_history(&db, &disk, history, 0..steps, true);
            let _ = db.close();
            run
        }
        Err(e) => {
            let mut run = Run { fault_seen_at: Some(0), ..Run::default() };
            run.error(e, disk.faults_fired() > 0);
            run
        }
    };
    if disk.faults_fired() == 0 {
        return;
    }
    tally.faults_fired += 1;
    if !run.acked_after_fault.is_empty() {
        tally.acked_after_fault += run.acked_after_fault.len() as u64;
        tally.violation(format!("{case}: steps {:?} acknowledged after the fault", run.acked_after_fault));
    }
    let errno_text = ["Input/output error", "No space left on device"];
    if let Some(message) = run.errors_after_fault.first()
        && !(errno_text.iter().any(|t| message.contains(t)) && message.contains("/db"))
    {
        tally.unclear_messages += 1;
        tally.violation(format!("{case}: the error does not say what failed where: {message}"));
    }
    if run.fault_seen_at.is_some() && run.errors_after_fault.is_empty() && run.issued > run.fault_seen_at.unwrap_or(0) {
        tally.violation(format!("{case}: steps issued after the fault saw no error"));
    }
    let image = disk.crash(seed);
    check_recovery(history, &image, &run, seed, tally, case);
}
