//! The trials of a crash test.
//!
//! Loading is done once: the parent loads the workload into a *template* directory with the
//! value scheme and closes it once the load is durable. Trial `i` (seed `seed + i`) then:
//!
//! 1. copies the template into a fresh directory;
//! 2. runs `rounds` kill/restart rounds on it: it starts `lazarus crash-child`, which recovers
//!    what is there, prints `ready`, and runs the workload; the parent waits for `ready`, sleeps
//!    a seeded time in `min_ms..=max_ms` and sends `SIGKILL`. In a round after the first, one
//!    time in four the kill comes at a seeded moment during the child's recovery instead;
//! 3. with damage: copies the directory and truncates the newest log file of the copy at a
//!    seeded offset, or flips a seeded bit of it;
//! 4. recovers the directory in-process and verifies it against the ack file
//!    ([`super::verify`]); with damage, recovers the copy too and accepts either a state that
//!    passes the same verification or an error that names the damaged file and a byte offset.
//!
//! With `fuse` (`crash-test --fuse`, feature `fuse`), the log directory lives on a mounted
//! [`super::fuse`]'s `PowerCutFs` instead (the template is copied in and synced), and each kill is a
//! power cut: the file system drops (or, with `tear`, tears) everything not fsynced, the child is
//! killed (it may already have stopped on the EIO that follows the cut), and the file system is
//! remounted from what survived. The ack file stays on the real file system: it is the client's
//! record, outside the machine that lost power. A machine that cannot mount FUSE skips with a
//! message ([`CrashSummary::skipped`]).
//!
//! Every choice comes from the trial's seed, so `--trials 1 --seed <seed>` replays a trial's
//! choices (the moment a kill lands in the child's work still depends on timing).

use super::acks::AckLog;
use super::verify;
use super::{CrashConfig, CrashError, io_at};
use crate::db::{Database, DatabaseConfig, DbError};
use crate::durability::DurabilityError;
use crate::durability::value::files;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the parent waits for a child to recover and print `ready`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// A child stops by itself after this long (so that an orphan does not run forever).
pub const CHILD_RUN_MS: u64 = 120_000;
/// The signal number of `SIGKILL`.
const SIGKILL: i32 = 9;

/// Options of a crash test.
#[derive(Clone, Debug)]
pub struct CrashOptions {
    /// Workload and engine settings shared with the child.
    pub config: CrashConfig,
    /// Trials to run.
    pub trials: u64,
    /// Seed of the first trial; trial `i` uses `seed + i`.
    pub seed: u64,
    /// Shortest run before a kill, in milliseconds after the child is ready.
    pub min_ms: u64,
    /// Longest run before a kill.
    pub max_ms: u64,
    /// Kill/restart rounds per trial.
    pub rounds: u32,
    /// Also damage the newest log file of a copy and recover that.
    pub damage: bool,
    /// The `lazarus` binary to run as the child.
    pub exe: PathBuf,
    /// Where trial directories go (default: a new directory under the system's temp dir).
    pub work_dir: Option<PathBuf>,
    /// Keep every trial directory (failed trials' directories are always kept).
    pub keep: bool,
    /// Run a deliberately broken child that acknowledges before durability.
    pub ack_before_durable: bool,
    /// Put the log directory on a FUSE file system that loses un-fsynced data at each kill.
    pub fuse: bool,
    /// With `fuse`: tear un-fsynced writes at 512-byte sectors instead of dropping them.
    pub tear: bool,
}

impl CrashOptions {
    /// Options with defaults for `config`, running the child from `exe`.
    pub fn new(config: CrashConfig, exe: PathBuf) -> CrashOptions {
        CrashOptions {
            config,
            trials: 20,
            seed: 1,
            min_ms: 100,
            max_ms: 400,
            rounds: 1,
            damage: false,
            exe,
            work_dir: None,
            keep: false,
            ack_before_durable: false,
            fuse: false,
            tear: false,
        }
    }

    fn validate(&self) -> Result<(), CrashError> {
        self.config.validate()?;
        if self.trials == 0 {
            return Err(CrashError::Options("at least one trial is needed".into()));
        }
        if self.min_ms > self.max_ms || self.max_ms > 600_000 {
            return Err(CrashError::Options(format!(
                "need min-ms <= max-ms <= 600000, got {}..{}",
                self.min_ms, self.max_ms
            )));
        }
        if !(1..=20).contains(&self.rounds) {
            return Err(CrashError::Options(format!("rounds must be 1..=20, got {}", self.rounds)));
        }
        Ok(())
    }

    /// The command that reruns the trial of `seed` alone.
    pub fn reproduce_command(&self, seed: u64) -> String {
        let c = &self.config;
        let mut command = format!(
            "lazarus crash-test --workload {} --trials 1 --seed {seed} --min-ms {} --max-ms {} --rounds {}",
            c.workload, self.min_ms, self.max_ms, self.rounds
        );
        match c.workload.as_str() {
            "kv" => command.push_str(&format!(" --records {}", c.records)),
            "tpcc" => command.push_str(&format!(" --warehouses {}", c.warehouses)),
            _ => command.push_str(&format!(" --accounts {}", c.accounts)),
        }
        if c.durability != "value" {
            command.push_str(&format!(" --durability {}", c.durability));
        }
        if self.damage {
            command.push_str(" --damage");
        }
        if self.ack_before_durable {
            command.push_str(" --ack-before-durable");
        }
        if self.fuse {
            command.push_str(" --fuse");
        }
        if self.tear {
            command.push_str(" --tear");
        }
        command
    }
}

/// A failed trial.
#[derive(Clone, Debug)]
pub struct TrialFailure {
    /// The trial's seed.
    pub seed: u64,
    /// What went wrong.
    pub reason: String,
    /// The trial's directory, kept for inspection.
    pub dir: PathBuf,
}

/// The outcome of a crash test.
#[derive(Clone, Debug, Default)]
pub struct CrashSummary {
    /// Trials run.
    pub trials: u64,
    /// Kills sent.
    pub kills: u64,
    /// Acknowledged transactions verified, over all trials.
    pub acked: u64,
    /// Damaged recoveries that ended in a clear error (the others recovered a verified state).
    pub damage_errors: u64,
    /// Recoveries that loaded a checkpoint before replaying the log.
    pub from_checkpoint: u64,
    /// The failed trials.
    pub failures: Vec<TrialFailure>,
    /// Why nothing ran (`fuse` on a machine that cannot mount FUSE).
    pub skipped: Option<String>,
}

#[cfg(feature = "fuse")]
type Power = super::fuse::PowerCut;

/// Without the `fuse` feature there is no power to cut.
#[cfg(not(feature = "fuse"))]
enum Power {}

#[cfg(not(feature = "fuse"))]
impl Power {
    fn mount_point(&self) -> &Path {
        match *self {}
    }
    fn sync_all(&self) {
        match *self {}
    }
    fn cut(&self, _seed: u64, _tear: bool) {
        match *self {}
    }
    fn remount(&mut self) -> std::io::Result<()> {
        match *self {}
    }
    fn unmount(self) -> std::io::Result<()> {
        match self {}
    }
}

/// Mounts the power-cut file system under `work`, or says why it cannot.
fn mount_power(options: &CrashOptions, work: &Path) -> Result<Result<Option<Power>, String>, CrashError> {
    if !options.fuse {
        return Ok(Ok(None));
    }
    #[cfg(feature = "fuse")]
    {
        if let Err(why) = super::fuse::available(&work.join("fuse-probe")) {
            return Ok(Err(why));
        }
        let mount_point = work.join("mnt");
        std::fs::create_dir_all(&mount_point).map_err(io_at(&mount_point))?;
        let power = super::fuse::PowerCut::mount(&mount_point).map_err(io_at(&mount_point))?;
        Ok(Ok(Some(power)))
    }
    #[cfg(not(feature = "fuse"))]
    {
        let _ = work;
        Ok(Err("this lazarus was built without the `fuse` feature".into()))
    }
}

/// Runs the crash test; `out` receives one line per trial and progress messages.
pub fn run_crash_test(options: &CrashOptions, out: &mut dyn FnMut(&str)) -> Result<CrashSummary, CrashError> {
    options.validate()?;
    let work = match &options.work_dir {
        Some(dir) => dir.clone(),
        None => {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            std::env::temp_dir().join(format!("lazarus-crash-{}-{nanos}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&work).map_err(io_at(&work))?;
    let template = work.join("template");
    if template.exists() {
        std::fs::remove_dir_all(&template).map_err(io_at(&template))?;
    }
    let mut power = match mount_power(options, &work)? {
        Ok(power) => power,
        Err(why) => {
            out(&format!("crash-test --fuse: SKIPPED: {why}"));
            if options.work_dir.is_none() {
                let _ = std::fs::remove_dir_all(&work);
            }
            return Ok(CrashSummary { skipped: Some(why), ..CrashSummary::default() });
        }
    };
    let started = Instant::now();
    build_template(&options.config, &template)?;
    out(&format!(
        "crash-test {}: template loaded in {:.1} s ({})",
        options.config.workload,
        started.elapsed().as_secs_f64(),
        work.display()
    ));
    let mut summary = CrashSummary::default();
    let mut releasing: Option<std::thread::JoinHandle<()>> = None;
    for i in 0..options.trials {
        let seed = options.seed.wrapping_add(i);
        let dir = work.join(format!("trial-{seed}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io_at(&dir))?;
        }
        let started = Instant::now();
        let mut trial = run_trial(options, &template, &dir, seed, power.as_mut());
        // At most one trial's databases are being freed while the next trial runs.
        if let Some(handle) = releasing.take() {
            let _ = handle.join();
        }
        let release = std::mem::take(&mut trial.release);
        releasing = Some(std::thread::spawn(move || drop(release)));
        summary.trials += 1;
        summary.kills += trial.kills;
        summary.acked += trial.acked;
        summary.from_checkpoint += u64::from(trial.from_checkpoint);
        summary.damage_errors += u64::from(trial.damage_error);
        let elapsed = started.elapsed().as_secs_f64();
        let head = format!("trial {}/{} seed {seed}", i + 1, options.trials);
        match trial.failure {
            None => {
                out(&format!("{head}: ok    {} ({elapsed:.1} s)", trial.notes.join("; ")));
                if !options.keep {
                    std::fs::remove_dir_all(&dir).map_err(io_at(&dir))?;
                }
            }
            Some(reason) => {
                out(&format!("{head}: FAILED {} ({elapsed:.1} s)\n    {reason}", trial.notes.join("; ")));
                summary.failures.push(TrialFailure { seed, reason, dir });
            }
        }
    }
    if let Some(handle) = releasing.take() {
        let _ = handle.join();
    }
    if let Some(power) = power {
        let mount_point = power.mount_point().to_path_buf();
        power.unmount().map_err(io_at(&mount_point))?;
        std::fs::remove_dir(&mount_point).map_err(io_at(&mount_point))?;
    }
    if summary.failures.is_empty() && !options.keep {
        // Only what this run created: the template and the (already removed) trial directories.
        std::fs::remove_dir_all(&template).map_err(io_at(&template))?;
        if options.work_dir.is_none() {
            std::fs::remove_dir(&work).map_err(io_at(&work))?;
        }
    }
    Ok(summary)
}

/// Loads the workload into `dir` and closes the database once the load is durable.
fn build_template(config: &CrashConfig, dir: &Path) -> Result<(), CrashError> {
    let workload = config.workload()?;
    let (scheme, _) = config.scheme(dir)?;
    let db = Database::open(DatabaseConfig {
        epoch_interval_ms: config.epoch_interval_ms,
        scheme: Arc::clone(&scheme),
        ..DatabaseConfig::default()
    })?;
    for (name, source) in workload.sources() {
        db.load_module(&name, &source)?;
    }
    workload.load(&db, config.threads)?;
    // The trials start from this image, so the whole load must be in it: `close` flushes too,
    // but an explicit wait makes a load the scheme cannot make durable an error here.
    db.scheme().wait_committed_durable()?;
    db.close()?;
    Ok(())
}

/// What one trial did.
#[derive(Default)]
struct Trial {
    notes: Vec<String>,
    kills: u64,
    acked: u64,
    from_checkpoint: bool,
    damage_error: bool,
    failure: Option<String>,
    /// Closed databases to free (in the background: freeing a recovered TPC-C takes a while).
    release: Vec<Database>,
}

fn run_trial(options: &CrashOptions, template: &Path, dir: &Path, seed: u64, mut power: Option<&mut Power>) -> Trial {
    let mut trial = Trial::default();
    let log = match &power {
        Some(p) => p.mount_point().join(format!("trial-{seed}")),
        None => dir.join("log"),
    };
    if let Err(e) = run_trial_inner(options, template, dir, &log, seed, power.as_deref_mut(), &mut trial) {
        trial.failure.get_or_insert_with(|| e.to_string());
    }
    if power.is_some() {
        // The power-cut file system is in memory: keep a failed trial's log on disk, then free it.
        if trial.failure.is_some() || options.keep {
            let kept = dir.join("log");
            if let Err(e) = copy_dir(&log, &kept) {
                trial.notes.push(format!("could not keep the log: {e}"));
            }
        }
        let _ = std::fs::remove_dir_all(&log);
    }
    trial
}

fn run_trial_inner(
    options: &CrashOptions,
    template: &Path,
    dir: &Path,
    log: &Path,
    seed: u64,
    mut power: Option<&mut Power>,
    trial: &mut Trial,
) -> Result<(), CrashError> {
    let config = &options.config;
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let ack_file = dir.join("acks");
    copy_dir(template, log)?;
    if let Some(p) = &power {
        p.sync_all();
    }
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5EED_C4A5_11AB_0000);
    let mut ready_ms = 1_000u64;
    let mut kills = Vec::new();
    for round in 0..u64::from(options.rounds) {
        let in_recovery = round > 0 && rng.random_ratio(1, 4);
        let delay_ms = if in_recovery {
            rng.random_range(0..=ready_ms)
        } else {
            rng.random_range(options.min_ms..=options.max_ms)
        };
        let child_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(round);
        let stderr_path = dir.join(format!("child-{round}.stderr"));
        let mut child = spawn_child(options, log, &ack_file, child_seed, round, &stderr_path)?;
        let started = Instant::now();
        if !in_recovery && let Err(e) = wait_ready(&mut child, &stderr_path) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        ready_ms = if in_recovery { ready_ms } else { started.elapsed().as_millis() as u64 };
        std::thread::sleep(Duration::from_millis(delay_ms));
        match power.as_deref_mut() {
            Some(p) => {
                p.cut(child_seed, options.tear);
                // After the cut the child may stop by itself on EIO (fail-stop): any exit will do.
                let _ = child.kill();
                child.wait().map_err(|e| CrashError::Child(e.to_string()))?;
                p.remount().map_err(io_at(log))?;
            }
            None => kill(&mut child, &stderr_path)?,
        }
        trial.kills += 1;
        kills.push(if in_recovery { format!("{delay_ms} ms into recovery") } else { format!("{delay_ms} ms") });
    }
    trial.notes.push(format!("ready after {ready_ms} ms, killed at {}", kills.join(", ")));
    let acks = AckLog::read(&ack_file)?;
    trial.acked = acks.acked;
    let damaged = if options.damage {
        let copy = dir.join("log-damaged");
        copy_dir(log, &copy)?;
        Some((damage_newest(&copy, &mut rng)?, copy))
    } else {
        None
    };
    let started = Instant::now();
    match verify::recover(config, log) {
        Ok((db, report)) => {
            let recovered_ms = started.elapsed().as_millis();
            trial.from_checkpoint = report.checkpoint.is_some();
            let checkpoint = match &report.checkpoint {
                Some(c) => format!("checkpoint {} ({} records, e_l {})", c.checkpoint_id, c.records, c.e_l),
                None => "no checkpoint".to_string(),
            };
            let pepoch = report.pepoch.map_or(String::new(), |p| format!("pepoch {p}, "));
            trial.notes.push(format!(
                "{} acked, {pepoch}{checkpoint}, {} files replayed{}",
                acks.acked,
                report.files,
                if acks.torn_tail { ", torn ack tail" } else { "" }
            ));
            let problems = verify::verify(config, &db, &acks);
            let verified_ms = started.elapsed().as_millis() - recovered_ms;
            db.close()?;
            trial.release.push(db);
            trial.notes.push(format!("recovered in {recovered_ms} ms, verified in {verified_ms} ms"));
            let problems = problems?;
            if !problems.is_empty() {
                trial.failure = Some(format!("after recovery: {}", problems.join("; ")));
                return Ok(());
            }
        }
        Err(e) => {
            trial.failure = Some(format!("recovery failed: {e}"));
            return Ok(());
        }
    }
    if let Some((damage, copy)) = damaged {
        check_damaged(config, &copy, &damage, &acks, trial)?;
    }
    Ok(())
}

/// Recovers the damaged copy: a verified state or a clear error pass, anything else fails.
fn check_damaged(
    config: &CrashConfig,
    copy: &Path,
    damage: &Damage,
    acks: &AckLog,
    trial: &mut Trial,
) -> Result<(), CrashError> {
    let Some(file) = &damage.file else {
        trial.notes.push("damage: no log file to damage".into());
        return Ok(());
    };
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match verify::recover(config, copy) {
        Ok((db, _)) => {
            let problems = verify::verify(config, &db, acks);
            db.close()?;
            trial.release.push(db);
            let problems = problems?;
            if problems.is_empty() {
                trial.notes.push(format!("damage ({}): recovered, verified", damage.what));
            } else {
                trial.failure = Some(format!(
                    "after damage ({}) recovery succeeded with a wrong state: {}",
                    damage.what,
                    problems.join("; ")
                ));
            }
        }
        Err(DbError::Durability(e @ DurabilityError::Corrupt { .. })) => {
            let message = e.to_string();
            if message.contains(&name) && message.contains("at byte") {
                trial.damage_error = true;
                trial.notes.push(format!("damage ({}): error \"{message}\"", damage.what));
            } else {
                trial.failure = Some(format!(
                    "after damage ({}) the error does not name {name} and an offset: {message}",
                    damage.what
                ));
            }
        }
        Err(e) => {
            trial.failure = Some(format!("after damage ({}) recovery failed with an unclear error: {e}", damage.what));
        }
    }
    Ok(())
}

fn spawn_child(
    options: &CrashOptions,
    log: &Path,
    ack_file: &Path,
    seed: u64,
    round: u64,
    stderr_path: &Path,
) -> Result<Child, CrashError> {
    let stderr = std::fs::File::create(stderr_path).map_err(io_at(stderr_path))?;
    let mut command = Command::new(&options.exe);
    command
        .arg("crash-child")
        .args(options.config.child_args())
        .arg("--log-dir")
        .arg(log)
        .arg("--ack-file")
        .arg(ack_file)
        .args(["--seed", &seed.to_string(), "--round", &round.to_string(), "--run-ms", &CHILD_RUN_MS.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr));
    if options.ack_before_durable {
        command.arg("--ack-before-durable");
    }
    command.spawn().map_err(|e| CrashError::Child(format!("cannot start {}: {e}", options.exe.display())))
}

/// Waits until the child prints `ready` (it has recovered and starts the workload).
fn wait_ready(child: &mut Child, stderr_path: &Path) -> Result<(), CrashError> {
    let stdout = child.stdout.take().ok_or_else(|| CrashError::Child("no stdout pipe".into()))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let ready = lines.any(|l| l.is_ok_and(|l| l.trim() == "ready"));
        let _ = tx.send(ready);
        // Keep reading so that the child never blocks on a full pipe.
        for _ in lines {}
    });
    match rx.recv_timeout(READY_TIMEOUT) {
        Ok(true) => Ok(()),
        Ok(false) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            let status = child.wait().map_err(|e| CrashError::Child(e.to_string()))?;
            Err(CrashError::Child(format!("exited before it was ready ({status}): {}", tail(stderr_path))))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(CrashError::Child(format!("not ready after {} s", READY_TIMEOUT.as_secs())))
        }
    }
}

/// Sends `SIGKILL` (what [`Child::kill`] sends on Unix) and reaps the child; an exit before the
/// kill is a failure.
fn kill(child: &mut Child, stderr_path: &Path) -> Result<(), CrashError> {
    let _ = child.kill();
    let status = child.wait().map_err(|e| CrashError::Child(e.to_string()))?;
    if status.signal() == Some(SIGKILL) {
        return Ok(());
    }
    Err(CrashError::Child(format!("exited on its own before the kill ({status}): {}", tail(stderr_path))))
}

/// The last lines of a child's stderr.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let text = lines[lines.len().saturating_sub(5)..].join(" | ");
    if text.is_empty() { "no stderr output".into() } else { text }
}

/// Copies the files of `from` (a flat log directory) into a new directory `to`.
fn copy_dir(from: &Path, to: &Path) -> Result<(), CrashError> {
    std::fs::create_dir_all(to).map_err(io_at(to))?;
    for entry in std::fs::read_dir(from).map_err(io_at(from))? {
        let entry = entry.map_err(io_at(from))?;
        if entry.file_type().map_err(io_at(&entry.path()))?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).map_err(io_at(&entry.path()))?;
        }
    }
    Ok(())
}

/// What was done to a log file.
struct Damage {
    /// The damaged file (`None` when there was no non-empty log file).
    file: Option<PathBuf>,
    /// A description for the trial line.
    what: String,
}

/// Truncates the newest log file of `dir` at a seeded offset or flips a seeded bit of it.
fn damage_newest(dir: &Path, rng: &mut SmallRng) -> Result<Damage, CrashError> {
    let Some(path) = newest_log_file(dir)? else {
        return Ok(Damage { file: None, what: "nothing".into() });
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut file = std::fs::OpenOptions::new().read(true).write(true).open(&path).map_err(io_at(&path))?;
    let len = file.metadata().map_err(io_at(&path))?.len();
    if len == 0 {
        return Ok(Damage { file: None, what: format!("{name} is empty") });
    }
    let at = rng.random_range(0..len);
    let what = if rng.random_bool(0.5) {
        file.set_len(at).map_err(io_at(&path))?;
        format!("{name} truncated to {at} of {len} bytes")
    } else {
        let bit = rng.random_range(0..8u8);
        let mut byte = [0u8];
        file.seek(SeekFrom::Start(at)).and_then(|_| file.read_exact(&mut byte)).map_err(io_at(&path))?;
        byte[0] ^= 1 << bit;
        file.seek(SeekFrom::Start(at)).and_then(|_| file.write_all(&byte)).map_err(io_at(&path))?;
        format!("bit {bit} of byte {at} of {name} ({len} bytes) flipped")
    };
    file.sync_all().map_err(io_at(&path))?;
    Ok(Damage { file: Some(path), what })
}

/// The log file with the largest sequence number (a `data.log` whose header is unreadable counts
/// as the newest).
fn newest_log_file(dir: &Path) -> Result<Option<PathBuf>, CrashError> {
    let mut newest: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).map_err(io_at(dir))? {
        let entry = entry.map_err(io_at(dir))?;
        let name = PathBuf::from(entry.file_name());
        if let Some((_, logger, generation)) = crate::durability::taurus::format::parse_log_name(&name) {
            // Serial and Taurus logs: the newest generation's (its files are the ones written).
            let seq = generation.saturating_mul(1 << 16) + logger as u64;
            if newest.as_ref().is_none_or(|(s, _)| seq > *s) {
                newest = Some((seq, entry.path()));
            }
            continue;
        }
        if !files::is_log_file(&name) {
            continue;
        }
        let path = entry.path();
        let mut head = Vec::new();
        std::fs::File::open(&path).and_then(|f| f.take(256).read_to_end(&mut head)).map_err(io_at(&path))?;
        let seq = match files::decode_log_header(&head) {
            Ok((header, _)) => header.file_seq,
            Err(_) if name.as_os_str() == files::CURRENT_LOG => u64::MAX,
            Err(_) => 0,
        };
        if newest.as_ref().is_none_or(|(s, _)| seq > *s) {
            newest = Some((seq, path));
        }
    }
    Ok(newest.map(|(_, path)| path))
}
