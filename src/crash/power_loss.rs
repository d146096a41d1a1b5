//! `lazarus crash-test --power-loss`: power loss at the k-th I/O of a short history on the
//! simulated disk ([`crate::io::sim::SimDisk`]), recovery, and the acknowledged-prefix oracle.
//! The reliability sweeps of `tests/` use the same code (`tests/common/` re-exports it).
//!
//! **The oracle.** A history ([`super::model`]) runs on one thread through two workers (so both
//! loggers of a two-logger scheme log), so its serial order is the order its steps were issued.
//! After a crash, the recovered state must equal the state after a prefix P with
//! `acked ≤ P ≤ issued`, where `acked` is one past the last step whose acknowledgement the client
//! saw (`wait_durable` returned Ok, or a module load returned Ok) and `issued` counts the steps
//! attempted (ARCHITECTURE.md, invariants 1–2). Secondary indexes must agree with their tables.
//! A state equal to a prefix below `acked` is a **lost acknowledged commit**; a state equal to no
//! prefix is a **phantom**; a recovery that fails is a **clear error** when it names a file and
//! an offset (`DurabilityError::Corrupt`), another error otherwise; a recovery of a crashed
//! recovery that differs from one clean recovery is a **silent divergence**.
//!
//! **A case.** A fresh disk frozen after its k-th I/O (every later operation fails and has no
//! effect: the power went out there), the history run on it, then for a damage seed
//! `crash(seed)` (each pending write applied, dropped or torn at 512-byte sectors), recovery, the
//! oracle, one more step on the recovered database that must be acknowledged and survive another
//! crash, and (for the first seed of a crash point) recovery itself crashed at its I/Os. `k` and
//! `seed` reproduce a case exactly, up to the order of the loggers' threads.

use super::model::{Dump, History, Step, dump};
use crate::db::{Database, DatabaseConfig, DbError};
use crate::durability::checkpoint::format as checkpoint_format;
use crate::durability::indexed::{IndexMode, IndexedLogging, IndexedOptions};
use crate::durability::taurus::format::Flavor;
use crate::durability::taurus::{StreamLogging, StreamOptions};
use crate::durability::value::files::EntryFormat;
use crate::durability::value::{ValueLogging, ValueOptions};
use crate::durability::{DurabilityError, DurabilityTicket, LogScheme};
use crate::io::sim::SimDisk;
use crate::storage::Row;
use crate::storage::Value;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The simulated disk's log directories (two loggers).
pub const LOG_DIRS: [&str; 2] = ["/db/log0", "/db/log1"];
/// The epoch advances after every this many steps, so a history spans many epochs and files.
pub const ADVANCE_EVERY: usize = 2;
/// The client waits for durability after every this many steps.
pub const WAIT_EVERY: usize = 4;
/// Violations listed in full in a failure message.
pub const VIOLATIONS_SHOWN: usize = 10;
/// Violations a tally keeps (the counts go on).
pub const VIOLATIONS_KEPT: usize = 1000;

/// Which scheme a sweep runs, and how.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Prefix of the `RELIABILITY` lines: `value`, `checkpoint`, `command`, ...
    pub label: &'static str,
    /// After-images (scheme `value`) or procedure calls (scheme `command`), over SiloR's loggers.
    pub entry_format: EntryFormat,
    /// 0 = no checkpoints.
    pub checkpoint_interval_ms: u64,
    /// A pause after every step, so that timed checkpoints happen in the middle of a history.
    pub step_pause_ms: u64,
    /// Bytes added to every value `kv_set` writes (larger checkpoint files).
    pub value_pad_bytes: usize,
    /// Outside the full sweep, power is cut at every this many I/Os (1 = every I/O).
    pub ci_crash_stride: usize,
    /// The epoch advancer's interval; the history also advances the epoch every
    /// [`ADVANCE_EVERY`] steps. 10 s: only the history advances it, and runs repeat closely.
    pub epoch_interval_ms: u64,
    /// Which scheme: the value scheme (`entry_format` says value or command) or a stream scheme
    /// (`entry_format` and the checkpoint settings are then ignored).
    pub scheme: SchemeKind,
}

/// Which scheme a [`Setup`] opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemeKind {
    /// `ValueLogging`: `value`, or `command` with `EntryFormat::Command`, with checkpoints if asked.
    Value,
    /// A stream scheme: `serial-data`, `serial-cmd`, `taurus-data`, `taurus-cmd`.
    Stream(Flavor),
    /// `indexed` (AILIR) or `indexed-sync` (SILIR): the value scheme's sequential log (with
    /// `entry_format` value) and the redb indexed log, both on the simulated disk.
    Indexed {
        /// AILIR or SILIR.
        mode: IndexMode,
        /// `IndexedOptions::verify_on_open` (redb's integrity check at a restart).
        verify_on_open: bool,
        /// Start the restore's walk paused: recovery crashed at its I/Os opens and closes
        /// without the walk reading a disk that has lost power (a failed read during a restore
        /// stops the process by design).
        restore_paused: bool,
        /// Recovery is crashed at every this many of its I/Os (1 = every one): an indexed
        /// recovery makes a few hundred (redb's reads and the tail's commit), so CI samples them.
        recovery_io_stride: u64,
    },
}

/// The Indexer's interval under `indexed` here: short, so that a history's records are indexed
/// while it runs (SILIR polls every millisecond anyway).
pub const INDEX_INTERVAL_MS: u64 = 2;

/// A stream scheme's group-commit interval here: short, so that a history's waits are short.
pub const STREAM_FLUSH_INTERVAL_MS: u64 = 2;

/// SiloR value logging without checkpoints (the first sweeps).
pub const VALUE: Setup = Setup {
    label: "value",
    entry_format: EntryFormat::Value,
    checkpoint_interval_ms: 0,
    step_pause_ms: 0,
    value_pad_bytes: 0,
    ci_crash_stride: 1,
    epoch_interval_ms: 10_000,
    scheme: SchemeKind::Value,
};

/// An indexed scheme's setup (`indexed` or `indexed-sync`).
pub fn indexed_setup(mode: IndexMode) -> Setup {
    let label = match mode {
        IndexMode::Async => "indexed",
        IndexMode::Sync => "indexed-sync",
    };
    let scheme = SchemeKind::Indexed { mode, verify_on_open: false, restore_paused: false, recovery_io_stride: 1 };
    Setup { label, scheme, ..VALUE }
}

/// The schemes `crash-test --power-loss` runs, and their setups.
pub fn setup_of(durability: &str) -> Option<Setup> {
    match durability {
        "indexed" => Some(indexed_setup(IndexMode::Async)),
        "indexed-sync" => Some(indexed_setup(IndexMode::Sync)),
        "value" => Some(VALUE),
        "command" => Some(Setup { label: "command", entry_format: EntryFormat::Command, ..VALUE }),
        "value-checkpoint" => {
            Some(Setup { label: "value-checkpoint", checkpoint_interval_ms: 5, step_pause_ms: 2, ..VALUE })
        }
        "command-checkpoint" => Some(Setup {
            label: "command-checkpoint",
            entry_format: EntryFormat::Command,
            checkpoint_interval_ms: 5,
            step_pause_ms: 2,
            ..VALUE
        }),
        "taurus-data-checkpoint" => Some(stream_checkpoint_setup(Flavor::TaurusData)),
        "taurus-cmd-checkpoint" => Some(stream_checkpoint_setup(Flavor::TaurusCmd)),
        name => Flavor::from_name(name).map(|flavor| Setup {
            label: flavor.name(),
            scheme: SchemeKind::Stream(flavor),
            ..VALUE
        }),
    }
}

/// A stream scheme with a checkpoint every 5 ms and a 2 ms pause after every step, so that a
/// short history sees several checkpoints, segment rotations and truncations.
pub fn stream_checkpoint_setup(flavor: Flavor) -> Setup {
    let label = match flavor {
        Flavor::TaurusData => "taurus-data-checkpoint",
        Flavor::TaurusCmd => "taurus-cmd-checkpoint",
        Flavor::SerialData => "serial-data-checkpoint",
        Flavor::SerialCmd => "serial-cmd-checkpoint",
    };
    Setup { label, checkpoint_interval_ms: 5, step_pause_ms: 2, scheme: SchemeKind::Stream(flavor), ..VALUE }
}

/// The value scheme's options for `setup` on `disk`: small buffers and frequent rotation, so a
/// short history spans several files per logger.
pub fn options(setup: Setup, disk: &SimDisk) -> ValueOptions {
    let mut o = ValueOptions::new(LOG_DIRS.iter().map(PathBuf::from).collect());
    o.entry_format = setup.entry_format;
    o.checkpoint.interval_ms = setup.checkpoint_interval_ms;
    o.checkpoint.files_per_dir = 2;
    o.checkpoint.block_size_bytes = 4096; // several blocks per file, round-robin over the files
    o.checkpoint.sync_every_bytes = 8192;
    o.fs = Arc::new(disk.clone());
    o.rotate_epochs = 2; // rotate often: recovery sees several files per logger
    o.sync_interval_ms = 1000; // loggers run when an epoch advances (the test advances by hand)
    o.buffer_size_bytes = 4096;
    o.recovery_threads = 2;
    o
}

/// Opens (recovers) a database on `disk`.
pub fn open(setup: Setup, disk: &SimDisk) -> Result<Database, DbError> {
    open_scheme(setup, disk).map(|(db, _)| db)
}

/// Opens (recovers) a database on `disk`; also returns the value scheme, when it is one, for its
/// checkpoint status.
pub fn open_scheme(setup: Setup, disk: &SimDisk) -> Result<(Database, Option<Arc<ValueLogging>>), DbError> {
    match setup.scheme {
        SchemeKind::Stream(flavor) => Ok((open_stream_with(setup, flavor, disk)?, None)),
        SchemeKind::Indexed { .. } => Ok((open_indexed(setup, disk)?.0, None)),
        SchemeKind::Value => {
            let scheme = Arc::new(ValueLogging::new(options(setup, disk))?);
            let as_scheme: Arc<dyn LogScheme> = scheme.clone();
            let config = DatabaseConfig {
                epoch_interval_ms: setup.epoch_interval_ms,
                scheme: as_scheme,
                ..DatabaseConfig::default()
            };
            Ok((Database::open(config)?, Some(scheme)))
        }
    }
}

/// Opens (recovers) an indexed scheme on `disk` with the value scheme's options of [`options`];
/// also returns the scheme. Panics on a setup of another scheme.
pub fn open_indexed(setup: Setup, disk: &SimDisk) -> Result<(Database, Arc<IndexedLogging>), DbError> {
    let SchemeKind::Indexed { mode, verify_on_open, restore_paused, .. } = setup.scheme else {
        panic!("open_indexed needs an indexed setup, got {:?}", setup.scheme);
    };
    let mut o = IndexedOptions::new(LOG_DIRS.iter().map(PathBuf::from).collect(), mode);
    o.value = options(setup, disk);
    o.index_interval_ms = INDEX_INTERVAL_MS;
    o.verify_on_open = verify_on_open;
    o.restore_paused = restore_paused;
    let scheme = Arc::new(IndexedLogging::new(o)?);
    let as_scheme: Arc<dyn LogScheme> = scheme.clone();
    let config =
        DatabaseConfig { epoch_interval_ms: setup.epoch_interval_ms, scheme: as_scheme, ..DatabaseConfig::default() };
    Ok((Database::open(config)?, scheme))
}

/// `setup` for an open on a disk that loses power during recovery: an indexed scheme's restore
/// walk starts paused (see [`SchemeKind::Indexed`]); other setups unchanged.
pub fn setup_for_frozen_recovery(setup: Setup) -> Setup {
    match setup.scheme {
        SchemeKind::Indexed { mode, verify_on_open, recovery_io_stride, .. } => {
            let scheme = SchemeKind::Indexed { mode, verify_on_open, restore_paused: true, recovery_io_stride };
            Setup { scheme, ..setup }
        }
        _ => setup,
    }
}

/// Opens (recovers) a stream scheme on `disk`: serial with one logger, Taurus with one logger per
/// log directory (two), 4 KiB buffers.
pub fn open_stream(flavor: Flavor, disk: &SimDisk) -> Result<Database, DbError> {
    open_stream_with(Setup { scheme: SchemeKind::Stream(flavor), ..VALUE }, flavor, disk)
}

/// [`open_stream`] with the checkpoint settings of `setup` (the value scheme's of [`options`]).
fn open_stream_with(setup: Setup, flavor: Flavor, disk: &SimDisk) -> Result<Database, DbError> {
    let mut o = StreamOptions::new(flavor, LOG_DIRS.iter().map(PathBuf::from).collect());
    o.flush_interval_ms = STREAM_FLUSH_INTERVAL_MS;
    o.buffer_size_bytes = 4096;
    o.recovery_threads = 2;
    o.checkpoint = options(setup, disk).checkpoint;
    o.fs = Arc::new(disk.clone());
    let scheme: Arc<dyn LogScheme> = Arc::new(StreamLogging::new(o)?);
    // The epoch matters to stream schemes only for TIDs; the history advances it by hand.
    Database::open(DatabaseConfig { epoch_interval_ms: 10_000, scheme, ..DatabaseConfig::default() })
}

/// The id of the checkpoint the image's manifest installs, if any.
pub fn installed_checkpoint(image: &SimDisk) -> Option<u64> {
    let bytes = image.contents(&Path::new(LOG_DIRS[0]).join(checkpoint_format::MANIFEST_FILE))?;
    checkpoint_format::decode_manifest(&bytes).ok().map(|m| m.checkpoint_id)
}

// ---------------------------------------------------------------------------------------------
// Running a history and reading a state

/// What the client saw of a run.
#[derive(Default, Debug)]
pub struct Run {
    /// One past the last acknowledged step.
    pub acked: usize,
    /// Steps attempted.
    pub issued: usize,
    /// The step about to be issued when the client first saw that an injected fault had fired.
    pub fault_seen_at: Option<usize>,
    /// Steps acknowledged although issued after the fault had fired.
    pub acked_after_fault: Vec<usize>,
    /// Errors the client saw after the fault had fired.
    pub errors_after_fault: Vec<String>,
    /// The first error the client saw.
    pub first_error: Option<String>,
}

impl Run {
    pub fn ack(&mut self, step: usize) {
        self.acked = self.acked.max(step + 1);
        if self.fault_seen_at.is_some_and(|f| step >= f) {
            self.acked_after_fault.push(step);
        }
    }

    /// Records an error; `fault_fired` says whether an injected fault had fired by then.
    pub fn error(&mut self, e: impl std::fmt::Display, fault_fired: bool) {
        let message = e.to_string();
        if fault_fired {
            self.errors_after_fault.push(message.clone());
        }
        self.first_error.get_or_insert(message);
    }
}

/// Runs `steps[range]` on `db`: advances the epoch every [`ADVANCE_EVERY`] steps and waits for
/// durability every [`WAIT_EVERY`] steps and at the end. Stops at the
/// first error unless `keep_going`.
pub fn run_history(db: &Database, disk: &SimDisk, history: &History, range: Range<usize>, keep_going: bool) -> Run {
    let steps = &history.steps;
    let mut run = Run { acked: range.start, ..Run::default() };
    let Ok(mut workers) = (0..2).map(|_| db.try_worker()).collect::<Result<Vec<_>, _>>() else {
        run.error("no workers", disk.faults_fired() > 0);
        return run;
    };
    // Every committed step since the last wait: Taurus acknowledges a transaction only with its
    // predecessors, not with every transaction that committed before it, so each is waited for.
    let mut pending: Vec<(usize, DurabilityTicket)> = Vec::new();
    let end = range.end;
    for i in range {
        if run.fault_seen_at.is_none() && disk.faults_fired() > 0 {
            run.fault_seen_at = Some(i);
        }
        run.issued = i + 1;
        let ok = match &steps[i] {
            // A module load is acknowledged when it returns, and takes its place in the serial
            // order: every step before it must be durable by then.
            Step::Module { name, source } => match db.load_module(name, source) {
                Ok(_) => {
                    pending.clear();
                    run.ack(i);
                    true
                }
                Err(e) => {
                    run.error(e, disk.faults_fired() > 0);
                    false
                }
            },
            Step::Call { worker, procedure, args } => match workers[*worker].call(procedure, args) {
                Ok(out) => {
                    pending.push((i, out.committed.durability));
                    true
                }
                Err(e) => {
                    run.error(e, disk.faults_fired() > 0);
                    false
                }
            },
            Step::Put { worker, table, row } => match put(&mut workers[*worker], table, row) {
                Ok(ticket) => {
                    pending.push((i, ticket));
                    true
                }
                Err(e) => {
                    run.error(e, disk.faults_fired() > 0);
                    false
                }
            },
        };
        if history.setup.step_pause_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(history.setup.step_pause_ms));
        }
        if (i + 1) % ADVANCE_EVERY == 0 {
            db.epochs().advance();
        }
        let waited = if (i + 1) % WAIT_EVERY == 0 || i + 1 == end {
            wait_all(db, disk, &workers[0], std::mem::take(&mut pending), &mut run)
        } else {
            true
        };
        let stopped = !(ok && waited);
        if stopped && !keep_going {
            break;
        }
    }
    run
}

/// Runs an ad-hoc transaction that puts `row` into `table`.
pub fn put(worker: &mut crate::Worker, table: &str, row: &[Value]) -> Result<DurabilityTicket, String> {
    let mut txn = worker.begin();
    let id = txn.table_id(table).map_err(|e| e.to_string())?;
    txn.put(id, Row::from_slice(row)).map_err(|e| e.to_string())?;
    txn.commit().map(|c| c.durability).map_err(|e| e.to_string())
}

/// Advances the epoch and waits for each of `tickets` in order; returns whether all were
/// acknowledged (it stops at the first error).
pub fn wait_all(
    db: &Database,
    disk: &SimDisk,
    worker: &crate::Worker,
    tickets: Vec<(usize, DurabilityTicket)>,
    run: &mut Run,
) -> bool {
    if tickets.is_empty() {
        return true;
    }
    db.epochs().advance();
    for (step, ticket) in tickets {
        if let Err(e) = worker.wait_durable(&ticket) {
            run.error(e, disk.faults_fired() > 0);
            return false;
        }
        run.ack(step);
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Tallies

/// Counts over many cases; the columns of docs/RELIABILITY.md.
#[derive(Default, Debug)]
pub struct Tally {
    pub cases: u64,
    pub crash_points: u64,
    pub lost_acked: u64,
    pub phantoms: u64,
    pub clear_errors: u64,
    pub other_errors: u64,
    pub silent_divergences: u64,
    pub undetected_damage: u64,
    pub recovery_crash_cases: u64,
    /// Crashed images with an installed checkpoint (recovery loaded it).
    pub checkpointed_images: u64,
    /// Taurus: recovered states that are a dependency-closed set of steps, not an issue-order
    /// prefix (correct for Taurus; no continuation is run from them).
    pub reordered: u64,
    pub continuation_cases: u64,
    pub fault_points: u64,
    pub faults_fired: u64,
    pub acked_after_fault: u64,
    pub unclear_messages: u64,
    /// The first [`VIOLATIONS_KEPT`] violations.
    pub violations: Vec<String>,
    /// Every violation, counted.
    pub violations_total: u64,
    /// The crash point and damage seed of each failed power-loss case (the first
    /// [`VIOLATIONS_KEPT`]); the seed is `None` when the unharmed run itself failed.
    pub failed_cases: Vec<(u64, Option<u64>)>,
}

impl Tally {
    /// Records a violation (a failed case, with what reproduces it).
    pub fn violation(&mut self, message: String) {
        self.violations_total += 1;
        if self.violations.len() < VIOLATIONS_KEPT {
            self.violations.push(message);
        }
    }

    /// One `RELIABILITY` line with the counts.
    pub fn line(&self, what: &str) -> String {
        let mut line = format!(
            "RELIABILITY {what}: cases {} (crash points {}, recovery-crash cases {}, continuations {}), \
             lost acked {}, phantoms {}, clear errors {}, other errors {}, silent divergences {}, undetected damage {}",
            self.cases,
            self.crash_points,
            self.recovery_crash_cases,
            self.continuation_cases,
            self.lost_acked,
            self.phantoms,
            self.clear_errors,
            self.other_errors,
            self.silent_divergences,
            self.undetected_damage
        );
        if self.reordered > 0 {
            let _ = write!(line, ", dependency-closed (not issue-order) states {}", self.reordered);
        }
        if self.checkpointed_images > 0 {
            let _ = write!(line, ", images with a checkpoint {}", self.checkpointed_images);
        }
        if self.fault_points > 0 {
            let _ = write!(
                line,
                ", fault points {}, faults fired {}, acked after fault {}, unclear messages {}",
                self.fault_points, self.faults_fired, self.acked_after_fault, self.unclear_messages
            );
        }
        line
    }

    /// Prints [`Tally::line`].
    pub fn report(&self, what: &str) {
        println!("{}", self.line(what));
    }

    /// For tests: prints the counts and panics on any violation, showing the first few.
    pub fn assert_clean(&self, what: &str) {
        self.report(what);
        let shown: Vec<&String> = self.violations.iter().take(VIOLATIONS_SHOWN).collect();
        assert!(self.violations.is_empty(), "{what}: {} violations, the first: {shown:#?}", self.violations.len());
    }
}

/// How a recovered state compares with the history: `Ok(p)` when it is the state after prefix
/// `p` with `acked ≤ p ≤ issued`.
pub fn classify(
    history: &History,
    state: &Dump,
    acked: usize,
    issued: usize,
    tally: &mut Tally,
    case: &str,
) -> Option<usize> {
    let matches: Vec<usize> = (0..=issued.min(history.steps.len())).filter(|&p| history.states[p] == *state).collect();
    if let Some(&p) = matches.iter().rev().find(|&&p| p >= acked) {
        return Some(p);
    }
    if let SchemeKind::Stream(flavor) = history.setup.scheme
        && flavor.is_taurus()
        && super::model::dependency_closed_match(history, state, acked, issued).is_some()
    {
        // Taurus recovers the transactions whose predecessors are recoverable: independent
        // unacknowledged transactions may survive without earlier ones (docs/taurus.md).
        tally.reordered += 1;
        return None;
    }
    if let Some(&p) = matches.last() {
        tally.lost_acked += 1;
        tally.violation(format!("{case}: recovered the state after {p} steps, but {acked} were acknowledged"));
    } else {
        tally.phantoms += 1;
        let expected = &history.states[acked.min(history.steps.len())];
        let missing: Vec<&String> = expected.iter().filter(|l| !state.contains(l)).collect();
        let extra: Vec<&String> = state.iter().filter(|l| !expected.contains(l)).collect();
        tally.violation(format!(
            "{case}: recovered a state after no prefix of 0..={issued} steps: {state:?}; against the state after \
             {acked} steps it lacks {missing:?} and has {extra:?}"
        ));
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Recovery checks

/// Recovers a copy of `image`, checks it against the history, then runs the next step on the
/// recovered database, crashes it and checks that recovery gives exactly the state after that
/// step too. Returns the recovered state.
pub fn check_recovery(
    history: &History,
    image: &SimDisk,
    run: &Run,
    seed: u64,
    tally: &mut Tally,
    case: &str,
) -> Option<Dump> {
    tally.cases += 1;
    let violations_at_start = tally.violations_total;
    let state = check_recovery_inner(history, image, run, seed, tally, case);
    if tally.violations_total > violations_at_start {
        keep_failed_image(image, case);
    }
    state
}

/// Environment variable naming a directory where [`check_recovery`] writes the crash image of
/// every case that failed (one directory per case, the image's files under their paths), to be
/// opened with `lazarus recover` or read byte by byte. Unset: nothing is written.
pub const KEEP_FAILED_IMAGES_ENV: &str = "LAZARUS_KEEP_FAILED_IMAGES";

fn keep_failed_image(image: &SimDisk, case: &str) {
    if let Some(root) = std::env::var_os(KEEP_FAILED_IMAGES_ENV) {
        keep_image_in(std::path::Path::new(&root), image, case);
    }
}

/// Writes `image`'s files to `root/<case, as a file name>/`; returns that directory.
fn keep_image_in(root: &std::path::Path, image: &SimDisk, case: &str) -> std::path::PathBuf {
    let name: String =
        case.chars().take(200).map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let dir = root.join(name);
    for path in image.file_paths() {
        let Some(bytes) = image.contents(&path) else { continue };
        let to = dir.join(path.strip_prefix("/").unwrap_or(&path));
        let written = to.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&to, bytes));
        if let Err(e) = written {
            eprintln!("could not keep {} of failed case {case}: {e}", to.display());
        }
    }
    eprintln!("kept the crash image of failed case {case} in {}", dir.display());
    dir
}

fn check_recovery_inner(
    history: &History,
    image: &SimDisk,
    run: &Run,
    seed: u64,
    tally: &mut Tally,
    case: &str,
) -> Option<Dump> {
    let disk = image.fork();
    let db = match open(history.setup, &disk) {
        Ok(db) => db,
        Err(e) => {
            if matches!(e, DbError::Durability(DurabilityError::Corrupt { .. })) {
                tally.clear_errors += 1;
            } else {
                tally.other_errors += 1;
            }
            tally.violation(format!("{case}: recovery after power loss failed: {e}"));
            return None;
        }
    };
    let state = match dump(&db) {
        Ok(state) => state,
        Err(e) => {
            tally.phantoms += 1;
            tally.violation(format!("{case}: {e}"));
            return None;
        }
    };
    let violations_before = tally.violations_total;
    let Some(prefix) = classify(history, &state, run.acked, run.issued, tally, case) else {
        // A Taurus state that is a dependency-closed subset, not a prefix: nothing to continue
        // from in the issue order, but recovery must still reproduce it.
        let _ = db.close();
        return (tally.violations_total == violations_before).then_some(state);
    };
    if prefix < history.steps.len() {
        continue_after_recovery(history, &db, &disk, prefix, seed, tally, case);
    }
    let _ = db.close();
    Some(state)
}

/// The recovered database must work: step `prefix` is acknowledged, and a crash right after it
/// recovers to exactly the state after `prefix + 1` steps (void epochs stay void).
pub fn continue_after_recovery(
    history: &History,
    db: &Database,
    disk: &SimDisk,
    prefix: usize,
    seed: u64,
    tally: &mut Tally,
    case: &str,
) {
    tally.continuation_cases += 1;
    let run = run_history(db, disk, history, prefix..prefix + 1, false);
    if run.acked != prefix + 1 {
        tally.other_errors += 1;
        tally.violation(format!("{case}: step {prefix} after recovery was not acknowledged: {:?}", run.first_error));
        return;
    }
    let image = disk.crash(seed.wrapping_mul(31).wrapping_add(7));
    match open(history.setup, &image) {
        Ok(again) => {
            match dump(&again) {
                Ok(state) if state == history.states[prefix + 1] => {}
                Ok(state) => {
                    tally.lost_acked += 1;
                    tally.violation(format!(
                        "{case}: after recovery to {prefix} steps, step {prefix} was acknowledged, then a crash \
                         recovered {state:?}, not {:?}",
                        history.states[prefix + 1]
                    ));
                }
                Err(e) => {
                    tally.phantoms += 1;
                    tally.violation(format!("{case}: second recovery: {e}"));
                }
            }
            let _ = again.close();
        }
        Err(e) => {
            tally.other_errors += 1;
            tally.violation(format!("{case}: second recovery failed: {e}"));
        }
    }
}

/// Crashes recovery of `image` at each of its I/Os, recovers again, and requires the state of
/// one clean recovery.
pub fn recovery_crash_sweep(setup: Setup, image: &SimDisk, expected: &Dump, tally: &mut Tally, case: &str) {
    let j_stride = match setup.scheme {
        SchemeKind::Indexed { recovery_io_stride, .. } => recovery_io_stride.max(1),
        _ => 1,
    };
    for j in (0u64..).step_by(j_stride as usize) {
        let disk = image.fork();
        disk.freeze_after(j);
        if let Ok(db) = open(setup_for_frozen_recovery(setup), &disk) {
            let _ = db.close();
        }
        let completed = disk.refused_ops() == 0;
        for s in 0..2u64 {
            tally.recovery_crash_cases += 1;
            let again = disk.crash(j * 2 + s);
            let case = format!("{case} recovery-crash j={j} seed={}", j * 2 + s);
            match open(setup, &again) {
                Ok(db) => {
                    match dump(&db) {
                        Ok(state) if state == *expected => {}
                        Ok(state) => {
                            tally.silent_divergences += 1;
                            tally.violation(format!(
                                "{case}: recovered {state:?}, one clean recovery gave {expected:?}"
                            ));
                        }
                        Err(e) => {
                            tally.phantoms += 1;
                            tally.violation(format!("{case}: {e}"));
                        }
                    }
                    let _ = db.close();
                }
                Err(e) => {
                    tally.other_errors += 1;
                    tally.violation(format!("{case}: recovery after a crashed recovery failed: {e}"));
                }
            }
        }
        if completed {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Power loss at the k-th I/O

/// How densely a power-loss sweep samples.
#[derive(Clone, Copy, Debug)]
pub struct SweepKnobs {
    /// Damage seeds per crash point.
    pub seeds: u64,
    /// Power is cut at every this many I/Os.
    pub crash_stride: u64,
    /// Recovery is crashed at its I/Os for every this many crash points (and the last).
    pub recovery_crash_stride: u64,
    /// Print each crash point's run to stderr.
    pub trace: bool,
}

/// The damage seed of seed number `s` at crash point `k` (what a failure prints).
pub fn damage_seed(k: u64, s: u64) -> u64 {
    k * 1000 + s
}

/// The history run on a disk frozen after its `k`-th I/O (everything but the last step, which is
/// kept for the check after recovery); returns the disk and what the client saw.
pub fn run_frozen(history: &History, k: u64) -> (SimDisk, Run) {
    let steps = history.steps.len().saturating_sub(1);
    let disk = SimDisk::new();
    disk.freeze_after(k);
    let run = match open(history.setup, &disk) {
        Ok(db) => {
            let run = run_history(&db, &disk, history, 0..steps, false);
            let _ = db.close();
            run
        }
        Err(_) => Run::default(),
    };
    (disk, run)
}

/// One crash point: the history frozen after `k` I/Os, then each damage seed of `seeds` crashed,
/// recovered and checked. For the first seed, recovery is also crashed at each of its I/Os when
/// `k` is a multiple of `recovery_crash_stride` (0 = never) or the run completed. Returns whether
/// the run completed uncrashed (k is past its last I/O).
pub fn crash_point(
    history: &History,
    k: u64,
    seeds: impl IntoIterator<Item = u64>,
    recovery_crash_stride: u64,
    trace: bool,
    tally: &mut Tally,
) -> bool {
    let steps = history.steps.len().saturating_sub(1);
    let (disk, run) = run_frozen(history, k);
    let completed = disk.refused_ops() == 0;
    if trace {
        eprintln!(
            "{} k={k} acked {} issued {} ops {} {:?}",
            history.name,
            run.acked,
            run.issued,
            disk.ops(),
            run.first_error
        );
    }
    if completed && run.acked != steps {
        tally.other_errors += 1;
        tally.failed_cases.push((k, None));
        tally.violation(format!(
            "{} k={k}: an unharmed run acknowledged {} of {steps} steps: {:?}",
            history.name, run.acked, run.first_error
        ));
    }
    tally.crash_points += 1;
    let crash_recovery = completed || (recovery_crash_stride > 0 && k.is_multiple_of(recovery_crash_stride));
    for (i, seed) in seeds.into_iter().enumerate() {
        let violations_before = tally.violations_total;
        let case = format!("{} k={k} seed={seed} (acked {}, issued {})", history.name, run.acked, run.issued);
        let image = disk.crash(seed);
        if installed_checkpoint(&image).is_some() {
            tally.checkpointed_images += 1;
        }
        let clean = check_recovery(history, &image, &run, seed, tally, &case);
        if let Some(expected) = clean
            && i == 0
            && crash_recovery
        {
            recovery_crash_sweep(history.setup, &image, &expected, tally, &case);
        }
        if tally.violations_total > violations_before && tally.failed_cases.len() < VIOLATIONS_KEPT {
            tally.failed_cases.push((k, Some(seed)));
        }
    }
    completed
}

/// Power loss at every `crash_stride`-th I/O k = 0, 1, 2, … until the run completes uncrashed.
pub fn power_loss_sweep_with(history: &History, knobs: SweepKnobs) -> Tally {
    let mut tally = Tally::default();
    for k in (0u64..).step_by(knobs.crash_stride.max(1) as usize) {
        let seeds = (0..knobs.seeds).map(|s| damage_seed(k, s));
        if crash_point(history, k, seeds, knobs.recovery_crash_stride, knobs.trace, &mut tally) {
            break;
        }
    }
    tally
}

// ---------------------------------------------------------------------------------------------
// `lazarus crash-test --power-loss`

/// The histories `crash-test --power-loss` runs.
pub const POWER_LOSS_WORKLOADS: &[&str] = &["kv", "transfer"];
/// The schemes `crash-test --power-loss` runs (see [`setup_of`]).
pub const POWER_LOSS_SCHEMES: &[&str] = &[
    "value",
    "command",
    "value-checkpoint",
    "command-checkpoint",
    "serial-data",
    "serial-cmd",
    "taurus-data",
    "taurus-cmd",
    "taurus-data-checkpoint",
    "taurus-cmd-checkpoint",
    "indexed",
    "indexed-sync",
];
/// The longest history `crash-test --power-loss` runs (its model holds a state per prefix).
pub const POWER_LOSS_STEPS_MAX: usize = 1000;

/// Options of `lazarus crash-test --power-loss`.
#[derive(Clone, Debug)]
pub struct PowerLossOptions {
    /// `kv` or `transfer`.
    pub workload: String,
    /// One of [`POWER_LOSS_SCHEMES`].
    pub durability: String,
    /// Steps of the history (the last one is run after recovery).
    pub steps: usize,
    /// `None`: every crash point k = 0, 1, … until the run completes; `Some(n)`: n crash points
    /// sampled from the I/Os of an unharmed run.
    pub trials: Option<u64>,
    /// Damage seeds per crash point.
    pub seeds: u64,
    /// Seed of the sampling of crash points and damage seeds (`trials`).
    pub seed: u64,
    /// Only this crash point (reproduces a failure).
    pub k: Option<u64>,
    /// With `k`: only this damage seed.
    pub crash_seed: Option<u64>,
    /// Crash recovery at its I/Os for every this many crash points (0 = never).
    pub recovery_crash_stride: u64,
}

impl Default for PowerLossOptions {
    fn default() -> PowerLossOptions {
        PowerLossOptions {
            workload: "kv".into(),
            durability: "value".into(),
            steps: 24,
            trials: None,
            seeds: 3,
            seed: 1,
            k: None,
            crash_seed: None,
            recovery_crash_stride: 8,
        }
    }
}

impl PowerLossOptions {
    /// The history the options name.
    pub fn history(&self) -> Result<History, super::CrashError> {
        let bad = |m: String| Err(super::CrashError::Options(m));
        let Some(setup) = setup_of(&self.durability) else {
            return bad(format!(
                "unknown durability {:?} for --power-loss; it runs {}",
                self.durability,
                POWER_LOSS_SCHEMES.join(", ")
            ));
        };
        if !(4..=POWER_LOSS_STEPS_MAX).contains(&self.steps) {
            return bad(format!("steps must be 4..={POWER_LOSS_STEPS_MAX}, got {}", self.steps));
        }
        if !(1..=10_000).contains(&self.seeds) {
            return bad(format!("seeds must be 1..=10000, got {}", self.seeds));
        }
        if self.crash_seed.is_some() && self.k.is_none() {
            return bad("--crash-seed needs --k".into());
        }
        match self.workload.as_str() {
            "kv" => Ok(super::model::kv_history(setup, self.steps, 0)),
            "transfer" => Ok(super::model::transfer_history(setup, self.steps)),
            other => bad(format!(
                "no power-loss history for workload {other:?}; --power-loss runs {}",
                POWER_LOSS_WORKLOADS.join(", ")
            )),
        }
    }

    /// The command that reruns one failed case.
    pub fn reproduce_command(&self, k: u64, crash_seed: Option<u64>) -> String {
        let mut command = format!(
            "lazarus crash-test --power-loss --workload {} --durability {} --steps {} --k {k}",
            self.workload, self.durability, self.steps
        );
        if let Some(seed) = crash_seed {
            let _ = write!(command, " --crash-seed {seed}");
        }
        command
    }
}

/// The outcome of `crash-test --power-loss`.
#[derive(Debug, Default)]
pub struct PowerLossSummary {
    /// I/Os of an unharmed run of the history.
    pub unharmed_ios: u64,
    /// The counts and violations.
    pub tally: Tally,
}

/// Runs `crash-test --power-loss`; `out` receives progress lines.
pub fn run_power_loss(
    options: &PowerLossOptions,
    out: &mut dyn FnMut(&str),
) -> Result<PowerLossSummary, super::CrashError> {
    use rand::{Rng, SeedableRng};
    let history = options.history()?;
    let mut summary = PowerLossSummary::default();
    let (probe, _) = run_frozen(&history, u64::MAX);
    summary.unharmed_ios = probe.ops();
    out(&format!(
        "crash-test --power-loss {} {}: {} steps, {} I/Os in an unharmed run",
        options.workload,
        options.durability,
        history.steps.len(),
        summary.unharmed_ios
    ));
    let tally = &mut summary.tally;
    let started = std::time::Instant::now();
    let mut last_progress = started;
    let mut progress = |done: u64, total: Option<u64>, tally: &Tally| {
        if last_progress.elapsed().as_secs() >= 10 {
            last_progress = std::time::Instant::now();
            let of = total.map_or(String::new(), |t| format!(" of {t}"));
            out(&format!(
                "  {done}{of} crash points, {} cases, {} violations ({:.0} s)",
                tally.cases,
                tally.violations_total,
                started.elapsed().as_secs_f64()
            ));
        }
    };
    match (options.k, options.trials) {
        (Some(k), _) => {
            let seeds: Vec<u64> = match options.crash_seed {
                Some(seed) => vec![seed],
                None => (0..options.seeds).map(|s| damage_seed(k, s)).collect(),
            };
            crash_point(&history, k, seeds, 1, false, tally);
        }
        (None, None) => {
            for k in 0u64.. {
                let seeds = (0..options.seeds).map(|s| damage_seed(k, s));
                if crash_point(&history, k, seeds, options.recovery_crash_stride, false, tally) {
                    break;
                }
                progress(k + 1, None, tally);
            }
        }
        (None, Some(trials)) => {
            for i in 0..trials {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(options.seed.wrapping_add(i));
                // k up to one past the unharmed run's I/Os: the last point is the completed run.
                let k = rng.random_range(0..=summary.unharmed_ios);
                let seeds: Vec<u64> = (0..options.seeds).map(|_| u64::from(rng.random::<u32>())).collect();
                let stride = if options.recovery_crash_stride > 0 && i.is_multiple_of(options.recovery_crash_stride) {
                    1
                } else {
                    0
                };
                crash_point(&history, k, seeds, stride, false, tally);
                progress(i + 1, Some(trials), tally);
            }
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileSystem, OpenMode};
    use std::path::Path;

    #[test]
    fn a_kept_image_holds_the_crash_images_files_under_their_paths() {
        let disk = SimDisk::new();
        disk.create_dir_all(Path::new("/log0")).unwrap();
        let mut file = disk.open(Path::new("/log0/data.log"), OpenMode::CreateNew).unwrap();
        file.append(b"synced").unwrap();
        file.sync_data().unwrap();
        drop(file);
        disk.sync_dir(Path::new("/log0")).unwrap();
        let root = tempfile::tempdir().unwrap();
        let dir = keep_image_in(root.path(), &disk.crash(1), "kv Fault { nth: 3 } seed=1");
        assert_eq!(dir, root.path().join("kv_Fault___nth__3___seed_1"));
        assert_eq!(std::fs::read(dir.join("log0/data.log")).unwrap(), b"synced");
    }
}
