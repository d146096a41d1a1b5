//! Reliability of the indexed schemes (`indexed` = AILIR, `indexed-sync` = SILIR,
//! `src/durability/indexed/`) on the simulated disk: the sequential log and the redb indexed log
//! (`indexed.redb`, through `lazarus::io::FileSystem` by `durability::indexed::backend`) both on
//! it. Power loss at every I/O of a history and of recovery, injected I/O errors (SILIR stops
//! acknowledging; AILIR stops on a sequential-log failure and keeps acknowledging from the
//! sequential log when only the indexed log fails), and a damage sweep of the sequential log and
//! of the indexed log, with the transfer and kv histories and the oracle of `tests/common/`.
//! `docs/RELIABILITY.md` has the numbers; `LAZARUS_RELIABILITY_FULL=1` runs every point.

mod common;

use common::*;
use lazarus::db::DbError;
use lazarus::durability::DurabilityError;
use lazarus::durability::indexed::IndexMode;
use lazarus::durability::indexed::store::{INDEX_FILE, IndexStore};
use lazarus::durability::value::files;
use lazarus::io::FileSystem;
use lazarus::io::sim::{Fault, FaultError, OpKind, SECTOR_SIZE_BYTES, SimDisk};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MODES: [IndexMode; 2] = [IndexMode::Async, IndexMode::Sync];

/// Outside the full sweep, power is cut at every this many I/Os, and recovery is crashed at
/// every this many of its I/Os: redb's two-phase commit per Indexer round makes a history's I/Os
/// several times the value scheme's, and an indexed recovery makes a few hundred.
const CI_CRASH_STRIDE: usize = 24;

fn setup(mode: IndexMode) -> Setup {
    let recovery_io_stride = if knobs().full { 1 } else { CI_CRASH_STRIDE as u64 };
    let scheme = SchemeKind::Indexed { mode, verify_on_open: false, restore_paused: false, recovery_io_stride };
    // `ci_crash_stride` samples the I/O-error sweep's fault points (the power-loss sweep has its
    // own knobs below): every 6th in CI.
    Setup { ci_crash_stride: 2, scheme, ..indexed_setup(mode) }
}

fn verifying(mode: IndexMode) -> Setup {
    let scheme = SchemeKind::Indexed { mode, verify_on_open: true, restore_paused: false, recovery_io_stride: 1 };
    Setup { scheme, ..setup(mode) }
}

fn histories(mode: IndexMode) -> [History; 2] {
    [transfer_history(setup(mode), 24), kv_history(setup(mode), 24, 0)]
}

fn index_path() -> PathBuf {
    Path::new(LOG_DIRS[0]).join(INDEX_FILE)
}

#[test]
fn the_indexed_log_is_written_on_the_simulated_disk_and_recovers_the_history() {
    for mode in MODES {
        let history = kv_history(setup(mode), 12, 0);
        let disk = SimDisk::new();
        let (db, scheme) = open_indexed(history.setup, &disk).expect("open");
        let run = run_history(&db, &disk, &history, 0..12, false);
        assert_eq!(run.acked, 12, "{:?}", run.first_error);
        assert!(scheme.index_now().expect("index") > 0);
        db.close().expect("close");
        let bytes = disk.contents(&index_path()).expect("indexed.redb on the simulated disk");
        assert_eq!(&bytes[..4], b"redb", "a redb file");
        // Power loss after a clean close: the restart is instant, from the indexed log.
        let (db, scheme) = open_indexed(history.setup, &disk.crash(1)).expect("recover");
        assert_eq!(scheme.report.lock().kind, "instant");
        assert_eq!(dump(&db).expect("dump"), history.states[12]);
        db.close().expect("close");
    }
}

/// One power-loss sweep per scheme and history (four tests, so that the full sweep, hours on two
/// cores, runs two at once under `--test-threads 2`).
fn power_loss_at_every_io(mode: IndexMode, history: History) {
    // CI: 2 seeds, recovery crashed only after the completed run (the full sweep: the knobs of
    // every other scheme, recovery crashed at every I/O of every crash point).
    let knobs = knobs();
    let sweep = match knobs.full {
        true => SweepKnobs { seeds: knobs.seeds, crash_stride: 1, recovery_crash_stride: 1, trace: false },
        false => SweepKnobs { seeds: 2, crash_stride: CI_CRASH_STRIDE as u64, recovery_crash_stride: 0, trace: false },
    };
    assert_eq!(history.setup.scheme, setup(mode).scheme, "the history runs the scheme named");
    let what = format!("{}/{} power loss", history.setup.label, history.name);
    power_loss_sweep_with(&history, sweep).assert_clean(&what);
}

#[test]
fn power_loss_at_every_io_indexed_schemes_async_transfer_recovers_a_prefix_with_every_acknowledged_step() {
    power_loss_at_every_io(IndexMode::Async, transfer_history(setup(IndexMode::Async), 24));
}

#[test]
fn power_loss_at_every_io_indexed_schemes_async_kv_recovers_a_prefix_with_every_acknowledged_step() {
    power_loss_at_every_io(IndexMode::Async, kv_history(setup(IndexMode::Async), 24, 0));
}

#[test]
fn power_loss_at_every_io_indexed_schemes_sync_transfer_recovers_a_prefix_with_every_acknowledged_step() {
    power_loss_at_every_io(IndexMode::Sync, transfer_history(setup(IndexMode::Sync), 24));
}

#[test]
fn power_loss_at_every_io_indexed_schemes_sync_kv_recovers_a_prefix_with_every_acknowledged_step() {
    power_loss_at_every_io(IndexMode::Sync, kv_history(setup(IndexMode::Sync), 24, 0));
}

/// The operations on the sequential log that only its writers (loggers, `pepoch`, `catalog`)
/// make. The Indexer also opens, lists and reads the sequential log; under AILIR a failure there
/// stops indexing, not acknowledgement, so those kinds (and "any operation") are not a
/// fail-stop check for AILIR: the value scheme's and SILIR's sweeps cover them.
const AILIR_SEQUENTIAL_FAULT_KINDS: [Option<OpKind>; 5] = [
    Some(OpKind::Append),
    Some(OpKind::SyncData),
    Some(OpKind::SyncDir),
    Some(OpKind::Rename),
    Some(OpKind::CreateDir),
];

/// The fault kinds of the value scheme's sweep without `sync_dir`, which has its own test below
/// (`a_failed_sync_dir_leaves_a_closed_file_the_indexer_stalls_on`, with an Indexer round forced
/// after each failure).
const FAULT_KINDS_WITHOUT_SYNC_DIR: [Option<OpKind>; 7] = [
    Some(OpKind::Append),
    Some(OpKind::SyncData),
    Some(OpKind::Rename),
    Some(OpKind::Open),
    Some(OpKind::Exists),
    Some(OpKind::CreateDir),
    None,
];

/// SILIR: a fault anywhere (sequential log or indexed log) stops acknowledgement. AILIR: a fault
/// on a write of the sequential log does (the indexed log's faults are the next test's).
#[test]
fn io_errors_indexed_schemes_stop_acknowledging_and_recover_every_acknowledged_step() {
    io_errors_indexed(&FAULT_KINDS_WITHOUT_SYNC_DIR);
}

/// What broke (found by the I/O-error sweep at ~1 of 180 fault points, fixed in session 6): the
/// Indexer read the `pepoch` file on disk. After a failed `sync_dir` that file is renamed into
/// place but not durable, and a crash can take it back; an Indexer round that read it put
/// records of epochs that became void into the indexed log, with a resume position past the
/// durable length that recovery then cut the file back to (and closed with an end block). The
/// running Indexer then stalled on that closed file, looking for its end block behind its cursor
/// (`old_data.20.5: at byte 115: no progress reading logger 0's file 5: it ends without its end
/// block`): SILIR acknowledged nothing more, AILIR stopped indexing, a later recovery failed.
/// Now the Indexer reads only what the last durable `pepoch` names
/// (`ValueLogging::durable_pepoch`), and an indexed log found ahead of it is rebuilt.
///
/// Every `sync_dir` of the history fails in turn (ENOSPC, sticky); one Indexer round is made
/// right after the run (the running Indexer made one in that window only now and then), and the
/// disk is crashed with seeds that keep or drop the renames the failed syncs left pending.
#[test]
fn a_failed_sync_dir_leaves_a_closed_file_the_indexer_stalls_on() {
    let knobs = knobs();
    let (stride, seeds) = if knobs.full { (1, 8) } else { (2, 3) };
    for mode in MODES {
        for history in histories(mode) {
            let what = format!("{}/{} failed sync_dir", history.setup.label, history.name);
            let steps = history.steps.len() - 1;
            let mut tally = Tally::default();
            let mut renames_pending = 0;
            for nth in (1..=SYNC_DIRS_MAX).step_by(stride) {
                let fault = Fault { kind: Some(OpKind::SyncDir), nth, error: FaultError::Enospc, sticky: true };
                let disk = SimDisk::new();
                disk.inject(fault);
                let run = match open_indexed(history.setup, &disk) {
                    Ok((db, scheme)) => {
                        let run = run_history(&db, &disk, &history, 0..steps, true);
                        // The round the running Indexer may make at any moment after the failure.
                        let _ = scheme.index_now();
                        let _ = db.close();
                        run
                    }
                    Err(_) => Run::default(),
                };
                if disk.faults_fired() == 0 {
                    break;
                }
                tally.fault_points += 1;
                tally.faults_fired += 1;
                renames_pending += usize::from(disk.pending_dir_ops() > 0);
                let case = format!("{} {fault:?}", history.name);
                if !run.acked_after_fault.is_empty() {
                    tally.violation(format!("{case}: steps {:?} acknowledged after the fault", run.acked_after_fault));
                }
                for seed in 0..seeds {
                    check_recovery(&history, &disk.crash(seed), &run, seed, &mut tally, &case);
                }
            }
            println!(
                "RELIABILITY {what}: {} sync_dir fault points, {} with renames pending, {} recoveries",
                tally.faults_fired, renames_pending, tally.cases
            );
            tally.assert_clean(&what);
            assert!(renames_pending > 0, "{what}: no failed sync_dir left a rename pending");
        }
    }
}

/// The other half of that fix: an indexed log written ahead of the durable `pepoch` (by a build
/// with the failure above, or any other way) holds records of epochs that are void now; resumed,
/// it would restore them (and the Indexer would stall behind the closed file). Recovery must
/// rebuild it from the sequential log. Here the `pepoch` file is put back to an older durable
/// one after the indexed log has passed it.
#[test]
fn an_indexed_log_ahead_of_the_durable_pepoch_is_rebuilt_not_resumed() {
    for mode in MODES {
        let history = kv_history(setup(mode), 12, 0);
        let disk = SimDisk::new();
        let (db, scheme) = open_indexed(history.setup, &disk).expect("open");
        let pepoch_path = Path::new(LOG_DIRS[0]).join(files::PEPOCH_FILE);
        let run = run_history(&db, &disk, &history, 0..6, false);
        assert_eq!(run.acked, 6, "{:?}", run.first_error);
        let older = disk.contents(&pepoch_path).expect("a pepoch file");
        let run = run_history(&db, &disk, &history, 6..12, false);
        assert_eq!(run.acked, 12, "{:?}", run.first_error);
        assert!(scheme.index_now().expect("index") > files::decode_pepoch(&older).expect("pepoch").epoch);
        db.close().expect("close");
        assert!(disk.replace_contents(&pepoch_path, &older));
        let (db, scheme) = open_indexed(history.setup, &disk.crash(1)).expect("recover");
        let report = scheme.report.lock().clone();
        assert_eq!(report.kind, "rebuilt", "{}: {report:?}", history.setup.label);
        let reason = report.rebuild_reason.unwrap_or_default();
        assert!(reason.contains(INDEX_FILE) && reason.contains("above the persistent epoch"), "{reason}");
        assert_eq!(dump(&db).expect("dump"), history.states[6], "{}", history.setup.label);
        db.close().expect("close");
    }
}

/// More `sync_dir` calls than a history makes (the sweep stops at the first that never fires).
const SYNC_DIRS_MAX: u64 = 10_000;

fn io_errors_indexed(kinds: &[Option<OpKind>]) {
    let ailir_kinds: Vec<Option<OpKind>> =
        AILIR_SEQUENTIAL_FAULT_KINDS.iter().copied().filter(|k| kinds.contains(k)).collect();
    for mode in MODES {
        for history in histories(mode) {
            let what = format!("{}/{} io errors", history.setup.label, history.name);
            let tally = match mode {
                IndexMode::Sync => io_error_sweep_with(&history, kinds, |disk, fault| disk.inject(fault)),
                IndexMode::Async => {
                    let arm = |disk: &SimDisk, fault| disk.inject_off_path(INDEX_FILE, fault);
                    io_error_sweep_with(&history, &ailir_kinds, arm)
                }
            };
            tally.assert_clean(&what);
            assert!(tally.faults_fired > 0, "{what}: no fault fired");
        }
    }
}

const INDEX_FAULT_KINDS: [Option<OpKind>; 6] = [
    Some(OpKind::WriteAt),
    Some(OpKind::SyncData),
    Some(OpKind::Truncate),
    Some(OpKind::Read),
    Some(OpKind::Length),
    None,
];

/// AILIR with a fault on the indexed log only (armed after open): every step is still
/// acknowledged (from the sequential log), the failure is reported naming the file and the
/// errno, and two crashes of the disk recover the acknowledged history (the sequential log was
/// kept from the last indexed position on).
#[test]
fn indexed_log_io_errors_ailir_keep_acknowledging_and_recover_every_acknowledged_step() {
    let knobs = knobs();
    for history in histories(IndexMode::Async) {
        let what = format!("indexed/{} indexed-log io errors", history.name);
        let mut tally = Tally::default();
        let steps = history.steps.len() - 1;
        for kind in INDEX_FAULT_KINDS {
            let stride = if knobs.full { 1 } else { 4 };
            for (error, sticky) in [(FaultError::Eio, false), (FaultError::Enospc, true)] {
                for nth in (1..=2000).step_by(stride) {
                    let fault = Fault { kind, nth, error, sticky };
                    if !index_fault_case(&history, fault, steps, &mut tally) {
                        break;
                    }
                }
            }
        }
        println!("RELIABILITY {what}: {} indexed-log fault points fired", tally.faults_fired);
        tally.assert_clean(&what);
        assert!(tally.faults_fired > 0, "{what}: no fault fired");
    }
}

/// One AILIR run with `fault` counted on the indexed log's paths; returns whether it fired.
fn index_fault_case(history: &History, fault: Fault, steps: usize, tally: &mut Tally) -> bool {
    let case = format!("{} {fault:?} on {INDEX_FILE}", history.name);
    let disk = SimDisk::new();
    let (db, scheme) = open_indexed(history.setup, &disk).expect("open on an empty disk");
    disk.inject_on_path(INDEX_FILE, fault);
    let run = run_history(&db, &disk, history, 0..steps, false);
    let closed = db.close();
    if disk.faults_fired() == 0 {
        return false;
    }
    tally.fault_points += 1;
    tally.faults_fired += 1;
    if run.acked != steps {
        tally.violation(format!("{case}: commits stopped being acknowledged: {:?}", run.first_error));
    }
    // The Indexer's failure, or the last round's at close.
    let reported = scheme.indexer_error().or_else(|| closed.err().map(|e| e.to_string()));
    let errno_text = ["Input/output error", "No space left on device"];
    match &reported {
        Some(m) if errno_text.iter().any(|t| m.contains(t)) && m.contains(INDEX_FILE) => {}
        other => {
            tally.unclear_messages += 1;
            tally.violation(format!("{case}: the failure is not reported with file and errno: {other:?}"));
        }
    }
    for seed in 0..2 {
        let image = disk.crash(fault.nth * 10 + seed);
        check_recovery(history, &image, &run, seed, tally, &format!("{case} seed={seed}"));
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Damage

/// A crash image after the whole history was acknowledged; under AILIR the Indexer is held for
/// the last 6 steps, so recovery must index a tail of the sequential log. Returns the image and
/// the acknowledged state.
fn indexed_base(history: &History, mode: IndexMode) -> (SimDisk, Dump) {
    let steps = history.steps.len();
    let disk = SimDisk::new();
    let (db, scheme) = open_indexed(history.setup, &disk).expect("open");
    let held_from = steps - 6;
    let run = run_history(&db, &disk, history, 0..held_from, false);
    assert_eq!(run.acked, held_from, "{:?}", run.first_error);
    let guard = (mode == IndexMode::Async).then(|| scheme.hold_indexer());
    let run = run_history(&db, &disk, history, held_from..steps, false);
    assert_eq!(run.acked, steps, "{:?}", run.first_error);
    let image = disk.crash(0);
    drop(guard);
    let _ = db.close();
    (image, history.states[steps].clone())
}

/// How far each logger's sequential log is indexed in `image` (its resume positions).
fn indexed_positions(image: &SimDisk) -> Vec<(u32, u64, u64)> {
    let fs: Arc<dyn FileSystem> = Arc::new(image.fork());
    let store = IndexStore::open(fs, &index_path(), true).expect("the base image's indexed log opens");
    let progress = store.progress().expect("progress");
    progress.positions.iter().map(|p| (p.logger, p.file_seq, p.offset)).collect()
}

/// Damage to each file of the sequential log (logs, `pepoch`, `catalog`): before the indexed
/// position, recovery need not read it (the indexed log has those records), so the acknowledged
/// state or a `Corrupt` error naming the file; between the indexed and the durable position, a
/// `Corrupt` error naming the file; after the durable position, the acknowledged state.
fn sequential_damage_sweep(history: &History, mode: IndexMode, stride: usize) -> (Tally, u64, u64) {
    let (image, expected) = indexed_base(history, mode);
    let clean = open(history.setup, &image.fork()).expect("the undamaged image recovers");
    assert_eq!(dump(&clean).expect("dump"), expected);
    let _ = clean.close();
    let indexed = indexed_positions(&image);
    let mut tally = Tally::default();
    let (mut offsets, mut unread) = (0u64, 0u64);
    for (path, limit) in durable_limits(&image) {
        let name = Path::new(path.file_name().unwrap_or_default()).to_path_buf();
        if name.to_string_lossy().starts_with(INDEX_FILE) {
            continue;
        }
        let original = image.contents(&path).unwrap_or_default();
        // A log file the crash left without a header (`log_header`) holds nothing indexed.
        let indexed_to = match files::is_log_file(&name).then(|| log_header(&original)).flatten() {
            Some(header) => match indexed.iter().find(|p| p.0 == header.logger) {
                Some(&(_, seq, _)) if header.file_seq < seq => original.len() as u64,
                Some(&(_, seq, offset)) if header.file_seq == seq => offset,
                _ => 0,
            },
            None => 0,
        };
        for damage in damages(&path, &original, limit).into_iter().step_by(stride) {
            if damage.bytes == original {
                continue;
            }
            offsets += 1;
            let case = format!("{} {}: {}", history.name, path.display(), damage.what);
            let disk = image.fork();
            assert!(disk.replace_contents(&path, &damage.bytes));
            let start = damage.start as u64;
            if start < indexed_to.min(limit) {
                unread += 1;
                check_damaged_or_named(history.setup, &disk, &path, &expected, &mut tally, &case);
            } else {
                check_damaged(history.setup, &disk, &path, start < limit, &expected, &mut tally, &case);
            }
        }
    }
    (tally, offsets, unread)
}

/// Damage recovery need not read: the acknowledged state, or a `Corrupt` error naming the file.
fn check_damaged_or_named(setup: Setup, disk: &SimDisk, path: &Path, expected: &Dump, tally: &mut Tally, case: &str) {
    tally.cases += 1;
    match open(setup, disk) {
        Err(DbError::Durability(DurabilityError::Corrupt { file, offset, .. })) => {
            tally.clear_errors += 1;
            if file != path {
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
                Ok(state) if state == *expected => {}
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

#[test]
fn sequential_log_damage_sweep_indexed_schemes_name_the_file_or_keep_the_acknowledged_state() {
    let stride = if knobs().full { 1 } else { 6 };
    for mode in MODES {
        for history in histories(mode) {
            let (tally, offsets, unread) = sequential_damage_sweep(&history, mode, stride);
            let what = format!("{}/{} sequential-log damage", history.setup.label, history.name);
            println!("RELIABILITY {what}: {offsets} damaged images, {unread} before the indexed position");
            tally.assert_clean(&what);
            assert!(tally.clear_errors > 0, "{what}: no damage was detected");
        }
    }
}

/// The damages of the indexed log: cuts at sector boundaries (below); in every sector that holds
/// data, a flipped bit (at its first non-zero byte and in its middle), the sector zeroed, and the
/// sector duplicated onto the next (a misdirected write); and a flipped bit at every byte of the
/// super-header's sector (magic, god byte, commit slots).
fn index_damages(bytes: &[u8]) -> Vec<Damage> {
    let sector = SECTOR_SIZE_BYTES as usize;
    let mut out = Vec::new();
    let flip = |at: usize| {
        let mut b = bytes.to_vec();
        b[at] ^= 1 << (at % 8);
        Damage { what: format!("bit {} flipped at {at}", at % 8), start: at, bytes: b, cut: None }
    };
    // Cuts: every sector of the first page (the super-header's), every sector that holds data,
    // and every 64 KiB of the free space redb preallocates (any cut there is alike).
    let holds_data = |s: usize| bytes[s..(s + sector).min(bytes.len())].iter().any(|&b| b != 0);
    for cut in (0..bytes.len()).step_by(sector).filter(|&s| s < 4096 || s % 65536 == 0 || holds_data(s)) {
        out.push(Damage {
            what: format!("truncated to {cut}"),
            start: cut,
            bytes: bytes[..cut].to_vec(),
            cut: Some(cut),
        });
    }
    out.extend((0..sector.min(bytes.len())).map(flip));
    for s in (sector..bytes.len()).step_by(sector) {
        let end = (s + sector).min(bytes.len());
        let Some(first) = bytes[s..end].iter().position(|&b| b != 0) else { continue };
        out.push(flip(s + first));
        out.push(flip(s + (end - s) / 2));
        sector_damages(bytes, s, &mut out);
    }
    out
}

/// Damage to the indexed log, recovered with redb's integrity check on (`verify_on_open`): every
/// damaged image must recover exactly the acknowledged state (the damage was in bytes the live
/// B-tree does not use, or it was found and the indexed log rebuilt from the sequential log), or
/// fail with a `Corrupt` error naming the indexed log. Returns the tally, the images tried and
/// the rebuilds.
fn index_damage_sweep(history: &History, mode: IndexMode, stride: usize) -> (Tally, u64, u64) {
    let setup = verifying(mode);
    let (image, expected) = indexed_base(history, mode);
    let path = index_path();
    let original = image.contents(&path).expect("indexed.redb");
    let mut tally = Tally::default();
    let (mut offsets, mut rebuilt) = (0u64, 0u64);
    for damage in index_damages(&original).into_iter().step_by(stride) {
        if damage.bytes == original {
            continue;
        }
        offsets += 1;
        tally.cases += 1;
        let case = format!("{} {}: {}", history.name, path.display(), damage.what);
        let disk = image.fork();
        assert!(disk.replace_contents(&path, &damage.bytes));
        match open_indexed(setup, &disk) {
            Err(DbError::Durability(DurabilityError::Corrupt { file, .. })) => {
                tally.clear_errors += 1;
                if file != path {
                    tally.violation(format!("{case}: the error names {}", file.display()));
                }
            }
            Err(e) => {
                tally.other_errors += 1;
                tally.violation(format!("{case}: recovery failed without naming the file: {e}"));
            }
            Ok((db, scheme)) => {
                if scheme.report.lock().kind == "rebuilt" {
                    rebuilt += 1;
                }
                match dump(&db) {
                    Ok(state) if state == expected => {}
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
    (tally, offsets, rebuilt)
}

#[test]
fn indexed_log_damage_sweep_rebuilds_or_keeps_the_acknowledged_state() {
    let stride = if knobs().full { 1 } else { 7 };
    for mode in MODES {
        for history in histories(mode) {
            let (tally, offsets, rebuilt) = index_damage_sweep(&history, mode, stride);
            let what = format!("{}/{} indexed-log damage", history.setup.label, history.name);
            println!("RELIABILITY {what}: {offsets} damaged images, {rebuilt} rebuilt from the sequential log");
            tally.assert_clean(&what);
            assert!(rebuilt > 0, "{what}: no damage was found");
        }
    }
}

/// Regression: a rebuild wrote the new indexed log in place, with the final progress record in
/// each batch it committed, so a crash in the middle of a rebuild left a file under the indexed
/// log's name that looked whole (its progress said everything was indexed) while keys were
/// missing. Now the rebuild is written as `indexed.redb.tmp` and renamed when whole: at every
/// crash point of a rebuild, an `indexed.redb` that survives holds every live key.
#[test]
fn a_crash_during_a_rebuild_never_leaves_a_partial_indexed_log() {
    let mode = IndexMode::Async;
    let history = kv_history(setup(mode), 24, 0);
    let (image, expected) = indexed_base(&history, mode);
    image.remove(&index_path()).expect("remove the indexed log");
    image.sync_dir(Path::new(LOG_DIRS[0])).expect("sync");
    let rows = expected.iter().filter(|l| l.starts_with("kv ")).count() as u64;
    let mut without_index = 0;
    let j_stride = if knobs().full { 1 } else { 5 };
    for j in (0u64..).step_by(j_stride) {
        let disk = image.fork();
        disk.freeze_after(j);
        if let Ok((db, _)) = open_indexed(setup_for_frozen_recovery(history.setup), &disk) {
            let _ = db.close();
        }
        let completed = disk.refused_ops() == 0;
        for seed in 0..3 {
            let after = disk.crash(j * 3 + seed);
            // A surviving indexed log that opens holds every key (one whose super-header a torn
            // write garbled does not open, and is rebuilt).
            let fs: Arc<dyn FileSystem> = Arc::new(after.fork());
            match IndexStore::open(fs, &index_path(), true) {
                Ok(store) => {
                    assert_eq!(store.image_count().expect("count"), rows, "j={j} seed={seed}: a partial indexed log")
                }
                Err(_) => without_index += 1,
            }
            let (db, scheme) = open_indexed(history.setup, &after).expect("recover");
            assert_eq!(dump(&db).expect("dump"), expected, "j={j} seed={seed} ({})", scheme.report.lock().kind);
            let _ = db.close();
        }
        if completed {
            break;
        }
    }
    assert!(without_index > 0, "some crash points must fall inside the rebuild");
}

/// Regression: a crash during the very first start, while the indexed log's first commits were
/// being written (no `pepoch` yet), could leave it with a garbled super-header; the next start
/// refused it ("Not a redb database: magic number mismatch") instead of creating it again, so the
/// database never opened (found by `crash-test --power-loss`, k = 19..46 of a history).
#[test]
fn a_crash_while_the_indexed_log_is_first_written_does_not_block_the_next_start() {
    for mode in MODES {
        let setup = setup(mode);
        for j in 0u64.. {
            let disk = SimDisk::new();
            disk.freeze_after(j);
            if let Ok((db, _)) = open_indexed(setup, &disk) {
                let _ = db.close();
            }
            let completed = disk.refused_ops() == 0;
            for seed in 0..3 {
                let (db, _) = open_indexed(setup, &disk.crash(j * 3 + seed))
                    .unwrap_or_else(|e| panic!("{} j={j} seed={seed}: {e}", setup.label));
                let _ = db.close();
            }
            if completed {
                break;
            }
        }
    }
}

/// Regression: a failed Indexer round leaves the Indexer's memory ahead of the indexed log (the
/// records it read into its lost batch, and pending ones it took out to index, are gone, but its
/// cursors moved past them). A later round on that Indexer (`index_now`, which tools and tests
/// call after a failure) committed those cursors as the resume position, so the next restart never
/// re-read the records the failed round had lost: acknowledged writes missing after recovery.
/// Here logger 0's records are read, then a read of logger 1's log fails (once), then a round is
/// asked for; after a crash the recovered state must still be the acknowledged one.
#[test]
fn a_round_after_a_failed_indexer_round_never_commits_past_what_it_lost() {
    let history = kv_history(setup(IndexMode::Async), 12, 0);
    let disk = SimDisk::new();
    let (db, scheme) = open_indexed(history.setup, &disk).expect("open");
    let guard = scheme.hold_indexer();
    let run = run_history(&db, &disk, &history, 0..12, false);
    assert_eq!(run.acked, 12, "{:?}", run.first_error);
    // Only the Indexer reads the sequential log while the database runs.
    let logger1 = format!("{}/", LOG_DIRS[1]);
    disk.inject_on_path(&logger1, Fault { kind: Some(OpKind::Read), nth: 1, error: FaultError::Eio, sticky: false });
    drop(guard);
    // The running Indexer or this call makes the failing round (whichever takes the Indexer
    // first); the other round must not index from where the failed one left off.
    let first = scheme.index_now();
    let second = scheme.index_now();
    assert_eq!(disk.faults_fired(), 1, "the read of logger 1's log must have failed once");
    let error = scheme.indexer_error().or(first.err().map(|e| e.to_string()));
    assert!(error.as_deref().is_some_and(|e| e.contains("Input/output error")), "{error:?}");
    let _ = db.close();
    let (db, recovered) = open_indexed(history.setup, &disk.crash(1)).expect("recover");
    assert_eq!(recovered.report.lock().kind, "instant");
    assert_eq!(dump(&db).expect("dump"), history.states[12], "acknowledged writes lost");
    db.close().expect("close");
    assert!(second.is_err(), "a round after a failed one must be refused");
}
