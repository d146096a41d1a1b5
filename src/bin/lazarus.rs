//! The `lazarus` command line. Errors are reported with `anyhow` here, at the binary's edge only.

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use lazarus::bench::result::RunSummary;
use lazarus::bench::{RunOptions, open_load_run};
use lazarus::durability::LogScheme;
use lazarus::durability::indexed::{IndexMode, IndexedLogging, IndexedOptions};
use lazarus::durability::none::NoLogging;
use lazarus::durability::taurus::format::Flavor;
use lazarus::durability::taurus::{StreamLogging, StreamOptions};
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::workload::WorkloadOptions;
use lazarus::{DatabaseConfig, workload};
use std::process::ExitCode;
use std::sync::Arc;

/// mimalloc instead of the system allocator: profiles of every workload showed glibc malloc and
/// free taking a fifth to a quarter of all instructions; side by side it gave about 1.1x on TPC-C
/// and YCSB (docs/PERFORMANCE.md). Through [`lazarus::allocator::Mimalloc`], which keeps ordinary
/// layouts off mimalloc's aligned path.
#[global_allocator]
static GLOBAL: lazarus::allocator::Mimalloc = lazarus::allocator::Mimalloc;
use std::time::Duration;

/// Lazarus: an in-memory transactional database with fast durability and recovery.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and type-check schema/procedure files; print every error as file:line:col: message.
    Check {
        /// Files to check. Tables declared in earlier files are visible to later ones.
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Run a workload for a duration and report throughput, aborts and latency percentiles.
    Bench(Box<BenchArgs>),
    /// Turn timeline .csv and result .json files of `lazarus bench` into an HTML page of charts.
    Report(ReportArgs),
    /// Recover a database from its log directories (value, command, serial or Taurus logs, told
    /// apart by their headers) and report each phase.
    Recover {
        /// Log directories, in the order the database used them.
        #[arg(long, required = true)]
        log_dir: Vec<std::path::PathBuf>,
        /// Recovery threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
        /// Evict the directories' files from the page cache first (recovery after a reboot).
        #[arg(long)]
        cold: bool,
        /// First read every file of the directories as `cat > /dev/null` would (evicted again
        /// after, with --cold), and report recovery's rate against that I/O limit.
        #[arg(long)]
        compare_read: bool,
        /// How log writes are applied: `direct` (after-images straight to the tables) or
        /// `compiled` (through cached, compiled plans of the procedure language).
        #[arg(long, default_value = "direct")]
        replay: lazarus::replay::ReplayMode,
        /// How a command log is replayed: `clr` (serial re-execution in commit order), `clr-p`
        /// (PACMAN: static analysis + intra-batch key spaces + pipelined batches), `clr-p-static`
        /// (static analysis only), `clr-p-intra` (static + intra-batch, batches one at a time),
        /// `llr-p` (latch-free parallel install of write sets; needs a log written with
        /// `--durability command-data`). See docs/pacman.md.
        #[arg(long, default_value = "clr")]
        command_replay: lazarus::durability::command::CommandReplay,
        /// Command logs: write the replay's phases to this JSON file; serial and Taurus logs: the
        /// transactions recovered and each phase's time (`lazarus report` draws either).
        #[arg(long)]
        result_json: Option<std::path::PathBuf>,
        /// Label of this recovery in reports [default: engine and threads].
        #[arg(long)]
        label: Option<String>,
        /// Serial and Taurus logs: count only generations from this one on in the result file
        /// (e.g. 1 to leave out the load logged in generation 0).
        #[arg(long, default_value_t = 0)]
        from_generation: u64,
        /// `taurus-data` logs: build the recovery dependency graph while reading the logs, replay
        /// as transactions become ready and collect recovered ones (Taurus's Algorithms 4-6;
        /// memory holds what lies between replay and the read frontier) instead of reading each
        /// generation whole and building its graph before replay. See docs/taurus.md.
        #[arg(long)]
        streaming_graph: bool,
        /// Recover in small (4 KiB) pages instead of transparent huge pages: on the VMs this
        /// project is measured on, recovery is shorter (a fresh huge page costs more to fault in
        /// than its small pages) but the transactions after it slower until the kernel collapses
        /// the pages (TPC-C 9–17 %; docs/PERFORMANCE.md, "Taurus", "Session 45").
        #[arg(long)]
        recovery_small_pages: bool,
    },
    /// Describe a log directory file by file without recovering it: the pepoch file, the
    /// catalog, each value or command log file's blocks, entries, epochs and first damage, each
    /// stream segment's (serial-*, taurus-*) transactions, predecessors and first damage, the
    /// persistent vector file, and the indexed log's resume positions. Read-only.
    Inspect {
        /// Log directories.
        #[arg(long, required = true)]
        log_dir: Vec<std::path::PathBuf>,
        /// Also list every write of a value log (block offset, TID, table, key, row) and every
        /// transaction of a stream segment (offset, id, predecessors, call or writes).
        #[arg(long)]
        records: bool,
    },
    /// The first-run job: load a small workload, run it under each available durability scheme,
    /// and write an HTML report (the default when no command is given).
    Demo(DemoArgs),
    /// Kill a workload child process with SIGKILL at seeded moments, recover, and verify that
    /// every acknowledged transaction survived and the state is consistent.
    CrashTest(Box<CrashTestArgs>),
    /// PACMAN's static analysis of a procedure file: per procedure its operations, flow and data
    /// dependencies and slices; then the blocks of the global dependency graph with their edges.
    Analyze {
        /// The procedure file (tables and procedures).
        file: String,
        /// Also write the global dependency graph as Graphviz dot to this file.
        #[arg(long)]
        dot: Option<std::path::PathBuf>,
    },
    /// Serve the Redis protocol (RESP2) over TCP: redis-cli, redis-benchmark and Redis clients work.
    Serve(ServeArgs),
    /// The indexed-log paper's recovery experiments (Figures 4–6): preload a server, SIGKILL it,
    /// restart it under a memtier-like load; SLR, AILIR, SILIR (and Redis with an AOF).
    InstantBench(InstantBenchArgs),
    /// The process a crash test kills (internal).
    #[command(hide = true)]
    CrashChild(Box<CrashChildArgs>),
}

fn main() -> ExitCode {
    // SAFETY: the first statement of `main`: no other thread exists yet.
    unsafe { lazarus::allocator::keep_freed_memory() };
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Check { files }) => check(&files),
        Some(Command::Bench(args)) => bench(&args),
        Some(Command::Report(args)) => report(&args),
        Some(Command::Demo(args)) => demo(&args),
        Some(Command::Recover {
            log_dir,
            threads,
            cold,
            compare_read,
            replay,
            command_replay,
            result_json,
            label,
            from_generation,
            streaming_graph,
            recovery_small_pages,
        }) => {
            let output = RecoveryOutput { result_json, label, from_generation, streaming_graph, recovery_small_pages };
            recover(log_dir, threads, cold, compare_read, replay, command_replay, output)
        }
        Some(Command::CrashTest(args)) => crash_test(&args),
        Some(Command::Analyze { file, dot }) => analyze(&file, dot.as_deref()),
        Some(Command::Inspect { log_dir, records }) => inspect(&log_dir, records),
        Some(Command::CrashChild(args)) => crash_child(&args),
        Some(Command::Serve(args)) => serve(&args),
        Some(Command::InstantBench(args)) => instant_bench(&args),
        None => match Cli::parse_from(["lazarus", "demo"]).command {
            Some(Command::Demo(args)) => demo(&args),
            _ => Ok(ExitCode::FAILURE),
        },
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lazarus: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn check(files: &[String]) -> anyhow::Result<ExitCode> {
    let mut sources = Vec::new();
    for path in files {
        let source = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
        sources.push((path.as_str(), source));
    }
    // Later files see the tables of earlier ones, as `load_module` would in that order.
    let mut catalog = lazarus::storage::Catalog::default();
    let mut diagnostics = Vec::new();
    for (path, source) in &sources {
        match lazarus::proc::check_source(path, source, &catalog) {
            Ok(module) => {
                for schema in module.tables {
                    catalog = catalog.with_table(schema, lazarus::storage::IndexBackend::default())?;
                }
            }
            Err(found) => diagnostics.extend(found),
        }
    }
    for d in &diagnostics {
        println!("{d}");
    }
    if diagnostics.is_empty() {
        eprintln!("{} file(s) checked, no errors", files.len());
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{} error(s)", diagnostics.len());
        Ok(ExitCode::FAILURE)
    }
}

fn inspect(dirs: &[std::path::PathBuf], records: bool) -> anyhow::Result<ExitCode> {
    let fs: Arc<dyn lazarus::io::FileSystem> = Arc::new(lazarus::io::real::RealFs);
    for dir in dirs {
        let dir = std::path::absolute(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
        let text = lazarus::durability::inspect::inspect_dir(&fs, &dir, records)
            .with_context(|| format!("cannot inspect {}", dir.display()))?;
        // `--records` output is long and often piped into `head`: a reader that stops early is
        // not an error (`print!` would panic on the closed pipe).
        match std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            other => other.context("cannot write to standard output")?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn analyze(path: &str, dot: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let source = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let module = match lazarus::proc::check_source(path, &source, &lazarus::storage::Catalog::default()) {
        Ok(m) => m,
        Err(diagnostics) => {
            diagnostics.iter().for_each(|d| println!("{d}"));
            bail!("{path}: {} error(s)", diagnostics.len());
        }
    };
    let procedures: Vec<&lazarus::proc::Procedure> = module.procedures.iter().collect();
    let analysis = lazarus::pacman::analyze(&procedures, &[])?;
    print!("{}", lazarus::pacman::text::describe(&analysis));
    if let Some(out) = dot {
        std::fs::write(out, lazarus::pacman::dot::to_dot(&analysis.graph))
            .with_context(|| format!("cannot write {}", out.display()))?;
        eprintln!("wrote {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Options of `lazarus bench`.
#[derive(clap::Args)]
struct BenchArgs {
    /// Workload: transfer, tpcc, smallbank, ycsb, kv.
    #[arg(long, default_value = "transfer")]
    workload: String,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds to run (after loading).
    #[arg(long, default_value_t = 5.0)]
    duration_s: f64,
    /// Durability scheme: none, value, command, serial-data, serial-cmd, taurus-data, taurus-cmd.
    #[arg(long, default_value = "none")]
    durability: String,
    /// Log directory (repeat for several loggers, one per disk).
    #[arg(long)]
    log_dir: Vec<std::path::PathBuf>,
    /// Taurus: loggers (one log file each), spread over the log directories [default: one per
    /// directory].
    #[arg(long)]
    loggers: Option<usize>,
    /// Serial and Taurus: group commit interval in milliseconds.
    #[arg(long, default_value_t = 5)]
    flush_interval_ms: u64,
    /// Serial and Taurus: log buffer size per logger in bytes (flushed when half full).
    #[arg(long, default_value_t = 16 << 20)]
    log_buffer_bytes: usize,
    /// Taurus: log predecessor vectors instead of predecessor lists (Taurus §6.6).
    #[arg(long)]
    compress_predecessors: bool,
    /// serial-data and taurus-data: log every update's whole after-image instead of the columns
    /// it changed (to measure what column patches save).
    #[arg(long)]
    whole_rows: bool,
    /// Delete what the log directories hold before the run.
    #[arg(long)]
    fresh: bool,
    /// Recover the database the log directories hold (loaded by an earlier run of the same
    /// workload and options) and run on it, without loading.
    #[arg(long, conflicts_with = "fresh")]
    resume: bool,
    /// Value logging: rotate data.log every this many epochs.
    #[arg(long, default_value_t = 100)]
    rotate_epochs: u64,
    /// Seconds from the end of one checkpoint to the start of the next (0 = no checkpoints);
    /// default 10 for value and command logging, 0 for the serial and Taurus schemes (their
    /// measured figures are without checkpoints, docs/taurus.md "Checkpoints").
    #[arg(long)]
    checkpoint_interval_s: Option<f64>,
    /// Epoch interval in milliseconds.
    #[arg(long, default_value_t = 40)]
    epoch_interval_ms: u64,
    /// Recover in small (4 KiB) pages instead of transparent huge pages: on the VMs this
    /// project is measured on, recovery is shorter (a fresh huge page costs more to fault in than
    /// its small pages) but the transactions after it slower until the kernel collapses the
    /// pages (TPC-C 9–17 %; docs/PERFORMANCE.md, "Taurus", "Session 45").
    #[arg(long)]
    recovery_small_pages: bool,
    /// Seed of the parameter generators (a run is reproducible from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fault in this many MiB of heap before loading (as Silo's `--numa-memory` does), so that the
    /// database's growth during the run does not pay the kernel's (and a VM host's) first touch
    /// of fresh pages; the time it takes is printed and not part of the run.
    #[arg(long, default_value_t = 0)]
    prefault_mib: usize,
    /// Stop each worker after this many transactions (committed or aborted by the procedure), or
    /// at --duration-s, whichever comes first: fixed work, so that an instruction count
    /// (`valgrind --tool=callgrind`) repeats from run to run with the same --seed.
    #[arg(long)]
    requests_per_thread: Option<u64>,
    /// Fix the point index's hash seed (not 0) instead of drawing one per process, so that
    /// two runs probe the same slots (for instruction counts; the default draws one).
    #[arg(long)]
    hash_seed: Option<u64>,
    /// Write the timeline (0.5 s windows) to this CSV file.
    #[arg(long)]
    timeline: Option<std::path::PathBuf>,
    /// Write the run's summary to this JSON file (for `lazarus report`).
    #[arg(long)]
    result: Option<std::path::PathBuf>,
    /// Label of this run in reports.
    #[arg(long)]
    label: Option<String>,
    /// Timeline window in milliseconds.
    #[arg(long, default_value_t = 500)]
    window_ms: u64,
    /// TPC-C: warehouses.
    #[arg(long)]
    warehouses: Option<u32>,
    /// TPC-C: transaction mix, e.g. `new-order,payment` (50/50, as Taurus runs it).
    #[arg(long)]
    mix: Option<String>,
    /// TPC-C: run without inserts (PACMAN's fixed-size database).
    #[arg(long)]
    no_inserts: bool,
    /// Transfer, Smallbank: number of accounts.
    #[arg(long)]
    accounts: Option<u32>,
    /// Smallbank: fraction of transactions on the hotspot (0..1).
    #[arg(long)]
    hotspot_fraction: Option<f64>,
    /// Smallbank: number of hotspot accounts.
    #[arg(long)]
    hotspot_accounts: Option<u32>,
    /// YCSB, KV: number of records.
    #[arg(long)]
    records: Option<u64>,
    /// YCSB: variant `silor` or `taurus`.
    #[arg(long)]
    variant: Option<String>,
    /// YCSB, KV: Zipfian theta (uniform when absent).
    #[arg(long)]
    zipf_theta: Option<f64>,
    /// YCSB, KV: fraction of reads.
    #[arg(long)]
    read_fraction: Option<f64>,
    /// YCSB, KV: value size in bytes.
    #[arg(long)]
    value_size_bytes: Option<usize>,
}

fn bench(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let (summary, timeline_csv) = run_bench(args)?;
    print!("{}", summary.render());
    println!("consistency     checked, holds");
    if let Some(path) = &args.timeline {
        std::fs::write(path, timeline_csv).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("timeline written to {}", path.display());
    }
    if let Some(path) = &args.result {
        let json = serde_json::to_string_pretty(&summary)?;
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("result written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--prefault-mib`: faults in that much heap and says how long it took.
fn prefault_heap(size_mib: usize) -> anyhow::Result<()> {
    if size_mib == 0 {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let size_bytes = size_mib.checked_mul(1 << 20).context("--prefault-mib is too large")?;
    let faulted_bytes = lazarus::allocator::prefault(size_bytes)?;
    eprintln!("prefaulted {} MiB of heap in {} ms", faulted_bytes >> 20, started.elapsed().as_millis());
    Ok(())
}

/// Opens, loads, runs and checks one bench; returns its summary and timeline CSV.
fn run_bench(args: &BenchArgs) -> anyhow::Result<(RunSummary, String)> {
    if !(args.duration_s.is_finite() && args.duration_s > 0.0 && args.duration_s <= 86_400.0) {
        bail!("--duration-s must be in (0, 86400], got {}", args.duration_s);
    }
    prefault_heap(args.prefault_mib)?;
    match args.hash_seed {
        Some(0) => bail!("--hash-seed must not be 0 (leave it out to draw a seed)"),
        Some(seed) => lazarus::storage::point::fix_hash_seed(seed),
        None => {}
    }
    if args.requests_per_thread == Some(0) {
        bail!("--requests-per-thread must be at least 1");
    }
    let (scheme, stream) = build_scheme(args)?;
    let options = WorkloadOptions {
        warehouses: args.warehouses,
        mix: args.mix.clone(),
        no_inserts: args.no_inserts,
        accounts: args.accounts,
        hotspot_fraction: args.hotspot_fraction,
        hotspot_accounts: args.hotspot_accounts,
        records: args.records,
        variant: args.variant.clone(),
        zipf_theta: args.zipf_theta,
        read_fraction: args.read_fraction,
        value_size_bytes: args.value_size_bytes,
    };
    let workload = workload::build(&args.workload, &options)?;
    let run_options = RunOptions {
        threads: args.threads,
        duration: Duration::from_secs_f64(args.duration_s),
        seed: args.seed,
        window_ms: args.window_ms,
        progress: true,
        requests_per_thread: args.requests_per_thread,
    };
    let config = DatabaseConfig {
        epoch_interval_ms: args.epoch_interval_ms,
        scheme,
        recovery_small_pages: args.recovery_small_pages,
        ..DatabaseConfig::default()
    };
    eprintln!(
        "lazarus bench: workload {}, {} thread(s), {} s, durability {}, epoch {} ms, seed {}",
        args.workload, args.threads, args.duration_s, args.durability, args.epoch_interval_ms, args.seed
    );
    let (result, volume) = if args.resume {
        if args.durability == "none" {
            bail!("--resume needs a durability scheme with log directories to recover from");
        }
        // Recovery logs nothing: whatever the scheme logged, the run logged.
        let result = lazarus::bench::open_run(config, &workload, &run_options)?;
        (result, stream.map(|s| s.volume()))
    } else if let Some(stream) = stream {
        let (result, volume) = open_load_run_volume(config, &workload, &run_options, &stream)?;
        (result, Some(volume))
    } else {
        (open_load_run(config, &workload, &run_options)?, None)
    };
    if let Some(volume) = volume {
        let records = volume.records.max(1) as f64;
        println!(
            "log records     {} during the run: REDO {:.1} bytes/record, dependency info {:.1} bytes/record (Taurus Table 1)",
            volume.records,
            volume.redo_bytes as f64 / records,
            volume.dependency_bytes as f64 / records
        );
    }
    let summary = RunSummary::new(&result, &args.workload, &args.durability, args.threads, args.label.clone());
    Ok((summary, lazarus::bench::stats::timeline_csv(&result.timeline, args.window_ms)))
}

/// [`open_load_run`] under a serial or Taurus scheme, also returning the log volume of the run
/// alone (the load's records excluded), split into REDO data and dependency information.
fn open_load_run_volume(
    config: DatabaseConfig,
    workload: &Arc<dyn lazarus::bench::Workload>,
    options: &RunOptions,
    stream: &StreamLogging,
) -> anyhow::Result<(lazarus::bench::RunResult, lazarus::durability::taurus::LogVolume)> {
    let db = lazarus::Database::open(config)?;
    for (name, source) in workload.sources() {
        db.load_module(&name, &source)?;
    }
    workload.load(&db, options.threads)?;
    let before = stream.volume();
    let result = lazarus::bench::run(&db, workload, options)?;
    let after = stream.volume();
    workload.check(&db)?;
    db.close()?;
    let volume = lazarus::durability::taurus::LogVolume {
        records: after.records - before.records,
        redo_bytes: after.redo_bytes - before.redo_bytes,
        dependency_bytes: after.dependency_bytes - before.dependency_bytes,
    };
    Ok((result, volume))
}

/// A bench's durability scheme, and the serial or Taurus scheme itself when it is one.
type BenchScheme = (Arc<dyn LogScheme>, Option<Arc<StreamLogging>>);

/// The durability schemes `lazarus bench --durability` accepts today.
const SCHEMES: &[&str] =
    &["none", "value", "command", "command-data", "serial-data", "serial-cmd", "taurus-data", "taurus-cmd"];

/// Builds the durability scheme `--durability` names, over fresh log directories; a serial or
/// Taurus scheme is also returned as itself (the bench reports its log volume).
fn build_scheme(args: &BenchArgs) -> anyhow::Result<BenchScheme> {
    match args.durability.as_str() {
        "none" => Ok((Arc::new(NoLogging), None)),
        "value" | "command" | "command-data" => {
            if args.log_dir.is_empty() {
                bail!("--durability {} needs at least one --log-dir DIR", args.durability);
            }
            if !args.resume {
                for dir in &args.log_dir {
                    prepare_log_dir(dir, args.fresh)?;
                }
            }
            let mut options = ValueOptions::new(args.log_dir.clone());
            options.rotate_epochs = args.rotate_epochs;
            options.checkpoint.interval_ms = checkpoint_interval_ms(args.checkpoint_interval_s.unwrap_or(10.0))?;
            if args.durability.starts_with("command") {
                options.command.log_calls_as_data = args.durability == "command-data";
                options.entry_format = lazarus::durability::value::files::EntryFormat::Command;
            }
            Ok((Arc::new(ValueLogging::new(options)?), None))
        }
        name if Flavor::from_name(name).is_some() => {
            if args.log_dir.is_empty() {
                bail!("--durability {name} needs at least one --log-dir DIR");
            }
            if !args.resume {
                for dir in &args.log_dir {
                    prepare_log_dir(dir, args.fresh)?;
                }
            }
            let flavor = Flavor::from_name(name).context("checked above")?;
            let mut options = StreamOptions::new(flavor, args.log_dir.clone());
            if let Some(loggers) = args.loggers {
                if !flavor.is_taurus() && loggers != 1 {
                    bail!("--durability {name} has one logger");
                }
                options.loggers = loggers;
            }
            options.flush_interval_ms = args.flush_interval_ms;
            options.buffer_size_bytes = args.log_buffer_bytes;
            options.compress_predecessors = args.compress_predecessors;
            options.whole_rows = args.whole_rows;
            options.checkpoint.interval_ms = checkpoint_interval_ms(args.checkpoint_interval_s.unwrap_or(0.0))?;
            let scheme = Arc::new(StreamLogging::new(options)?);
            Ok((Arc::clone(&scheme) as Arc<dyn LogScheme>, Some(scheme)))
        }
        other => bail!("unknown --durability {other:?}; available: {}", SCHEMES.join(", ")),
    }
}

/// `--checkpoint-interval-s` in milliseconds, checked.
fn checkpoint_interval_ms(seconds: f64) -> anyhow::Result<u64> {
    if !(seconds.is_finite() && (0.0..=86_400.0).contains(&seconds)) {
        bail!("--checkpoint-interval-s must be in [0, 86400], got {seconds}");
    }
    Ok((seconds * 1e3).round() as u64)
}

/// A bench loads its workload into an empty database, so its log directory must hold no log:
/// refuse a used one unless `--fresh` says to delete what is there.
fn prepare_log_dir(dir: &std::path::Path, fresh: bool) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let used = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?.next().is_some();
    if !used {
        return Ok(());
    }
    if !fresh {
        bail!("log directory {} is not empty; pass --fresh to delete its contents before the run", dir.display());
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot empty {}", dir.display()))?;
    Ok(())
}

/// Every regular file in `dirs`.
fn files_in(dirs: &[std::path::PathBuf]) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The entry format (value or command) of the logs in `dir`, from the first log file's header;
/// value when there is no log file yet.
fn log_format(dir: &std::path::Path) -> anyhow::Result<lazarus::durability::value::files::EntryFormat> {
    use lazarus::durability::value::files;
    use std::io::Read;
    for name in files_in(std::slice::from_ref(&dir.to_path_buf()))? {
        if !name.file_name().is_some_and(|n| files::is_log_file(std::path::Path::new(n))) {
            continue;
        }
        let mut head = Vec::new();
        std::fs::File::open(&name)
            .and_then(|f| f.take(256).read_to_end(&mut head))
            .with_context(|| format!("cannot read {}", name.display()))?;
        if let Ok((header, _)) = files::decode_log_header(&head) {
            return Ok(header.format);
        }
    }
    Ok(files::EntryFormat::Value)
}

/// Where `lazarus recover` writes its result, if anywhere.
struct RecoveryOutput {
    result_json: Option<std::path::PathBuf>,
    label: Option<String>,
    /// Serial and Taurus logs: the first generation the result counts.
    from_generation: u64,
    /// `taurus-data`: the streaming recovery graph (kept with the output options so that
    /// `recover`'s arguments stay few).
    streaming_graph: bool,
    /// `DatabaseConfig::recovery_small_pages`.
    recovery_small_pages: bool,
}

/// Writes a command-log replay's phases for `lazarus report` (`report::input::RecoveryRun`).
fn write_recovery_result(
    path: &std::path::Path,
    label: Option<&str>,
    b: &lazarus::durability::command::parallel::ReplayBreakdown,
) -> anyhow::Result<()> {
    let run = lazarus::report::input::RecoveryRun {
        label: label.map_or_else(|| format!("{} {}t", b.engine, b.threads), str::to_string),
        engine: b.engine.clone(),
        threads: b.threads,
        loading_ms: b.loading_ms,
        analysis_ms: b.analysis_ms,
        scheduling_ms: b.scheduling_ms,
        execution_ms: b.execution_ms,
    };
    write_result_kind(path, &run, lazarus::report::input::RECOVERY_KIND)
}

/// Writes a recovery result for `lazarus report`: `run`'s fields with its `kind` and
/// `format_version` 1.
fn write_result_kind(path: &std::path::Path, run: &impl serde::Serialize, kind: &str) -> anyhow::Result<()> {
    let mut value = serde_json::to_value(run)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("kind".into(), kind.into());
        object.insert("format_version".into(), 1.into());
    }
    std::fs::write(path, serde_json::to_string_pretty(&value)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Prints where a command-log replay's time went (PACMAN Figure 20) and the thread model.
fn print_command_breakdown(b: &lazarus::durability::command::parallel::ReplayBreakdown) {
    println!(
        "  {} on {} thread(s): loading {:.1} ms, analysis {:.1} ms, scheduling {:.1} ms, execution {:.1} ms \
         ({:.1} ms inside pieces, {} pieces, {} batches)",
        b.engine,
        b.threads,
        b.loading_ms,
        b.analysis_ms,
        b.scheduling_ms,
        b.execution_ms,
        b.busy_ms,
        b.pieces,
        b.batches
    );
    if !b.per_block.is_empty() {
        let blocks: Vec<String> = b
            .per_block
            .iter()
            .enumerate()
            .map(|(i, (n, ns))| {
                let k = b.threads_per_block.get(i).copied().unwrap_or(1);
                format!("B{i} {n}x{:.2}us/{k}t", *ns as f64 / (*n).max(1) as f64 / 1e3)
            })
            .collect();
        println!("  per block (pieces x mean cost / threads): {}", blocks.join(", "));
    }
    for (n, ms) in &b.model {
        println!("  model: {n:>3} threads -> execution {ms:.1} ms");
    }
}

/// Opens (recovers) a database over `scheme`; returns it and the seconds recovery took.
fn open_recovering(scheme: Arc<dyn LogScheme>, small_pages: bool) -> anyhow::Result<(lazarus::Database, f64)> {
    let started = std::time::Instant::now();
    let config = DatabaseConfig { scheme, recovery_small_pages: small_pages, ..DatabaseConfig::default() };
    let db = lazarus::Database::open(config)?;
    Ok((db, started.elapsed().as_secs_f64()))
}

/// The header of the first serial or Taurus log file in `dirs`, if they hold such logs.
fn stream_log_header(
    dirs: &[std::path::PathBuf],
) -> anyhow::Result<Option<lazarus::durability::taurus::format::StreamHeader>> {
    use lazarus::durability::taurus::format;
    for path in files_in(dirs)? {
        if path.file_name().and_then(|n| format::parse_log_name(std::path::Path::new(n))).is_none() {
            continue;
        }
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        if let Ok((header, _)) = format::decode_header(&bytes) {
            return Ok(Some(header));
        }
    }
    Ok(None)
}

/// The `checkpoint` line of `lazarus recover`, the same for every scheme that loads SiloR's.
fn checkpoint_line(c: Option<&lazarus::durability::checkpoint::loader::CheckpointLoadReport>) -> String {
    match c {
        Some(c) => format!(
            "checkpoint      {:>10.1} ms  id {}, epochs [{}, {}], {} files, {} bytes, {} records, {:.3} GB/s",
            c.load_ms,
            c.checkpoint_id,
            c.e_l,
            c.e_h,
            c.files,
            c.bytes,
            c.records,
            c.bytes as f64 / (c.load_ms / 1e3).max(1e-9) / 1e9
        ),
        None => "checkpoint               -   none installed".to_string(),
    }
}

/// Ends `lazarus recover`: shuts the recovered database's scheme down, then exits without freeing
/// it. Everything is reported by then, and freeing millions of records one by one would only
/// delay the exit by seconds.
fn close_without_freeing(db: lazarus::Database) -> anyhow::Result<ExitCode> {
    db.close()?;
    std::mem::forget(db);
    Ok(ExitCode::SUCCESS)
}

/// `lazarus recover` on serial or Taurus logs.
fn recover_stream(
    log_dirs: Vec<std::path::PathBuf>,
    threads: Option<usize>,
    header: lazarus::durability::taurus::format::StreamHeader,
    replay: lazarus::replay::ReplayMode,
    output: RecoveryOutput,
) -> anyhow::Result<ExitCode> {
    let mut options = StreamOptions::new(header.flavor, log_dirs);
    options.loggers = header.loggers as usize;
    if let Some(threads) = threads {
        options.recovery_threads = threads;
    }
    options.replay_mode = replay;
    options.streaming_graph = output.streaming_graph;
    let how = if header.flavor.is_command() { "commands re-executed".to_string() } else { format!("{replay} replay") };
    println!(
        "log format      {} ({} logger(s), from the first log file's header), {how}",
        header.flavor.name(),
        header.loggers
    );
    let scheme = Arc::new(StreamLogging::new(options)?);
    let (db, total_s) = open_recovering(Arc::clone(&scheme) as Arc<dyn LogScheme>, output.recovery_small_pages)?;
    let r = scheme.recovery.lock().clone().context("recovery did not run")?;
    let rows: usize = db.catalog().tables().iter().map(|t| t.len()).sum();
    println!("recovered       {} tables, {rows} rows", db.catalog().tables().len());
    println!("{}", checkpoint_line(r.checkpoint.as_ref()));
    if r.checkpoint.is_some() {
        println!(
            "  over it       {} logged transactions left to it, {} window write sets installed",
            r.before_checkpoint, r.window_installed
        );
    }
    println!(
        "read            {:>10.1} ms  {} generation(s), {} files, {} bytes, {} records, {} torn bytes cut",
        r.read_ms, r.generations, r.files, r.bytes, r.records, r.torn_bytes
    );
    println!("graph           {:>10.1} ms  {} recoverable, {} dropped", r.graph_ms, r.recovered, r.dropped);
    if output.streaming_graph && header.flavor == lazarus::durability::taurus::format::Flavor::TaurusData {
        println!("                streaming graph: read and graph are merged into replay's time (Algorithms 4-6)");
    }
    for g in &r.per_generation {
        println!(
            "  generation {:<4} {} bytes from {:?}, {} recovered, {} dropped, read {:.1} ms, graph {:.1} ms, replay {:.1} ms, \
             {:.0} txn/s ({:.0} with reading)",
            g.generation,
            g.bytes,
            g.retained_start,
            g.recovered,
            g.dropped,
            g.read_ms,
            g.graph_ms,
            g.replay_ms,
            g.txns_per_s(),
            g.txns_per_s_with_read()
        );
        if g.versions_left.0 > 0 {
            let (records, versions) = g.versions_left;
            println!("    versions left when replay ended: {versions} of {records} records");
        }
    }
    println!("replay          {:>10.1} ms  on {} thread(s)", r.replay_ms, r.threads);
    println!("index rebuild   {:>10.1} ms", r.rebuild_ms);
    println!("total           {:>10.1} ms", total_s * 1e3);
    println!("recovery        {:.0} txn/s (graph and replay)", r.txns_per_s());
    // The rebuild builds the ordered primary indexes of a data flavor's recovery (deferred while
    // it replays), so a rate without it would flatter replay.
    let with_rebuild_s = (r.graph_ms + r.replay_ms + r.rebuild_ms) / 1e3;
    println!(
        "                {:.0} txn/s (graph, replay and index rebuild)",
        r.recovered as f64 / with_rebuild_s.max(1e-9)
    );
    let counted = r.per_generation.iter().filter(|g| g.generation >= output.from_generation);
    let mut sum = lazarus::durability::taurus::recovery::GenerationReport::default();
    for g in counted {
        sum.recovered += g.recovered;
        sum.read_ms += g.read_ms;
        sum.graph_ms += g.graph_ms;
        sum.replay_ms += g.replay_ms;
    }
    let run = lazarus::report::StreamRecoveryRun {
        label: output.label.unwrap_or_else(|| format!("{}/{}t", header.flavor.name(), r.threads)),
        scheme: header.flavor.name().to_string(),
        threads: r.threads,
        from_generation: output.from_generation,
        recovered: sum.recovered,
        graph_ms: sum.graph_ms,
        replay_ms: sum.replay_ms,
    };
    if output.from_generation > 0 {
        println!(
            "                {:.0} txn/s from generation {} on ({} transactions; {:.0} with reading)",
            run.txns_per_s(),
            output.from_generation,
            sum.recovered,
            sum.txns_per_s_with_read()
        );
    }
    if let Some(path) = &output.result_json {
        let kind = lazarus::report::input::STREAM_RECOVERY_KIND;
        write_result_kind(path, &run, kind)?;
    }
    close_without_freeing(db)
}

fn evict_all(files: &[std::path::PathBuf]) -> anyhow::Result<()> {
    for file in files {
        lazarus::io::cache::evict(file)
            .with_context(|| format!("cannot evict {} from the page cache", file.display()))?;
    }
    Ok(())
}

fn recover(
    log_dirs: Vec<std::path::PathBuf>,
    threads: Option<usize>,
    cold: bool,
    compare_read: bool,
    replay: lazarus::replay::ReplayMode,
    command_replay: lazarus::durability::command::CommandReplay,
    output: RecoveryOutput,
) -> anyhow::Result<ExitCode> {
    for dir in &log_dirs {
        if !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
    }
    let files = files_in(&log_dirs)?;
    let mut read_rate = None;
    if compare_read {
        if cold {
            evict_all(&files)?;
        }
        let (bytes, secs) = lazarus::io::cache::read_like_cat(&files)?;
        println!(
            "read like cat   {:>10.1} ms  {} files, {bytes} bytes, {:.3} GB/s ({})",
            secs * 1e3,
            files.len(),
            bytes as f64 / secs.max(1e-9) / 1e9,
            if cold { "page cache evicted first" } else { "page cache as found" }
        );
        read_rate = Some(bytes as f64 / secs.max(1e-9));
    }
    if cold {
        evict_all(&files)?;
    }
    if let Some(header) = stream_log_header(&log_dirs)? {
        return recover_stream(log_dirs, threads, header, replay, output);
    }
    let format = log_format(&log_dirs[0])?;
    let mut options = ValueOptions::new(log_dirs);
    if let Some(threads) = threads {
        options.recovery_threads = threads;
    }
    options.replay_mode = replay;
    options.command.replay = command_replay;
    options.entry_format = format;
    // Recovery only: no checkpoint is started while the report is printed.
    options.checkpoint.interval_ms = 0;
    println!("log format      {format:?} (from the first log file's header)");
    let scheme = Arc::new(ValueLogging::new(options)?);
    let (db, total_s) = open_recovering(Arc::clone(&scheme) as Arc<dyn LogScheme>, output.recovery_small_pages)?;
    let report = scheme.recovery.lock().clone().context("recovery did not run")?;
    let rows: usize = db.catalog().tables().iter().map(|t| t.len()).sum();
    println!("recovered to pepoch {} ({} tables, {rows} rows)", report.pepoch, db.catalog().tables().len());
    println!("catalog         {:>10.1} ms", report.catalog_ms);
    println!("{}", checkpoint_line(report.checkpoint.as_ref()));
    let how = match format {
        lazarus::durability::value::files::EntryFormat::Value => format!("{replay} replay"),
        lazarus::durability::value::files::EntryFormat::Command => match command_replay {
            lazarus::durability::command::CommandReplay::Clr => "serial re-execution (clr)".to_string(),
            other => format!("command replay {other}"),
        },
    };
    println!(
        "log replay      {:>10.1} ms  {} files, {} bytes, {} entries ({} skipped), {:.3} GB/s, {how}",
        report.replay_ms,
        report.files,
        report.bytes,
        report.entries,
        report.entries_skipped,
        report.replay_bytes_per_s() / 1e9
    );
    if format == lazarus::durability::value::files::EntryFormat::Value {
        println!(
            "                            {} writes installed, {} skipped unread (the key held a newer TID)",
            report.writes_installed, report.writes_obsolete
        );
    }
    if report.replay_plans_compiled > 0 {
        println!("                            {} replay plans compiled", report.replay_plans_compiled);
    }
    if let Some(b) = &report.command_breakdown {
        print_command_breakdown(b);
        if let Some(path) = &output.result_json {
            write_recovery_result(path, output.label.as_deref(), b)?;
        }
    }
    println!("index rebuild   {:>10.1} ms", report.rebuild_ms);
    println!("total           {:>10.1} ms", total_s * 1e3);
    let (ckpt_bytes, ckpt_ms) = report.checkpoint.as_ref().map_or((0, 0.0), |c| (c.bytes, c.load_ms));
    let recovered_bytes = ckpt_bytes + report.bytes;
    let rate = recovered_bytes as f64 / ((ckpt_ms + report.replay_ms) / 1e3).max(1e-9);
    println!(
        "checkpoint + log {} bytes at {:.3} GB/s (loading and replay; {:.3} GB/s over the whole recovery)",
        recovered_bytes,
        rate / 1e9,
        recovered_bytes as f64 / total_s.max(1e-9) / 1e9
    );
    if let Some(read) = read_rate {
        println!("ratio to the read rate: {:.2} (loading and replay), {:.2} (whole recovery)", rate / read, {
            recovered_bytes as f64 / total_s.max(1e-9) / read
        });
    }
    close_without_freeing(db)
}

/// Options of `lazarus demo`.
#[derive(clap::Args)]
struct DemoArgs {
    /// Workload to run [default: tpcc with one warehouse per thread].
    #[arg(long)]
    workload: Option<String>,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds per scheme.
    #[arg(long, default_value_t = 3.0)]
    duration_s: f64,
    /// Where the report goes.
    #[arg(long, default_value = "report")]
    out: std::path::PathBuf,
}

fn demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    // A small TPC-C when it is built in, else the transfer workload.
    let default = if workload::NAMES.contains(&"tpcc") { "tpcc" } else { "transfer" };
    let workload_name = args.workload.clone().unwrap_or_else(|| default.to_string());
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut inputs = Vec::new();
    for scheme in SCHEMES {
        let mut bench_args = Cli::parse_from(["lazarus", "bench"]);
        let Some(Command::Bench(bench)) = bench_args.command.as_mut() else { bail!("internal: no bench defaults") };
        bench.workload = workload_name.clone();
        bench.threads = args.threads;
        bench.duration_s = args.duration_s;
        bench.durability = scheme.to_string();
        bench.log_dir = vec![args.out.join("logs").join(scheme)];
        bench.fresh = true;
        bench.warehouses = Some(args.threads.max(1) as u32);
        eprintln!("demo: {workload_name} under durability {scheme} for {} s", args.duration_s);
        let (summary, timeline) = run_bench(bench)?;
        print!("{}", summary.render());
        let csv = args.out.join(format!("{scheme}.csv"));
        let json = args.out.join(format!("{scheme}.json"));
        std::fs::write(&csv, timeline).with_context(|| format!("cannot write {}", csv.display()))?;
        std::fs::write(&json, serde_json::to_string_pretty(&summary)?)
            .with_context(|| format!("cannot write {}", json.display()))?;
        inputs.extend([csv, json]);
    }
    let options = lazarus::report::ReportOptions {
        out: args.out.clone(),
        title: format!("Lazarus demo: {workload_name}"),
        ..lazarus::report::ReportOptions::default()
    };
    let output = lazarus::report::render_report(&inputs, &options)?;
    println!("report written to {}", output.index.display());
    Ok(ExitCode::SUCCESS)
}

/// Options of `lazarus report`.
#[derive(clap::Args)]
struct ReportArgs {
    /// Input files: `.csv` timelines (`bench --timeline`), `.json` results (`bench --result`) and
    /// `.json` figure files (e.g. `REPLAY_FIGURES=DIR cargo bench --bench replay`).
    #[arg(required = true)]
    files: Vec<std::path::PathBuf>,
    /// Output directory; `index.html` is written into it.
    #[arg(long, default_value = "report")]
    out: std::path::PathBuf,
    /// Page title.
    #[arg(long, default_value = "Lazarus bench report")]
    title: String,
    /// Plots to draw, comma-separated: throughput, latency, bars, figures, or all.
    #[arg(long, default_value = "all")]
    plots: lazarus::report::PlotSet,
    /// Also write one PNG per chart into the output directory.
    #[arg(long)]
    png: bool,
}

fn report(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let options = lazarus::report::ReportOptions {
        out: args.out.clone(),
        title: args.title.clone(),
        plots: args.plots,
        png: args.png,
    };
    let output = lazarus::report::render_report(&args.files, &options)?;
    println!("report written to {} ({} charts)", output.index.display(), output.charts);
    for png in &output.pngs {
        println!("  {}", png.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What `crash-test` and `crash-child` share: the workload and engine settings.
#[derive(clap::Args)]
struct CrashConfigArgs {
    /// Workload: kv, tpcc, transfer.
    #[arg(long, default_value = "kv")]
    workload: String,
    /// KV: number of keys.
    #[arg(long, default_value_t = 10_000)]
    records: u64,
    /// TPC-C: warehouses.
    #[arg(long, default_value_t = 1)]
    warehouses: u32,
    /// Transfer: accounts.
    #[arg(long, default_value_t = 1_000)]
    accounts: u32,
    /// Worker threads of the child.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Epoch interval in milliseconds.
    #[arg(long, default_value_t = 10)]
    epoch_interval_ms: u64,
    /// Value logging: rotate data.log every this many epochs.
    #[arg(long, default_value_t = 10)]
    rotate_epochs: u64,
    /// Milliseconds between checkpoints of the child (0 = none); short, so that kills land
    /// before, during and after checkpoints.
    #[arg(long, default_value_t = 150)]
    checkpoint_interval_ms: u64,
    /// Durability scheme of the child: value, command.
    #[arg(long, default_value = "value")]
    durability: String,
}

impl CrashConfigArgs {
    fn config(&self) -> lazarus::crash::CrashConfig {
        lazarus::crash::CrashConfig {
            workload: self.workload.clone(),
            records: self.records,
            warehouses: self.warehouses,
            accounts: self.accounts,
            threads: self.threads,
            epoch_interval_ms: self.epoch_interval_ms,
            rotate_epochs: self.rotate_epochs,
            checkpoint_interval_ms: self.checkpoint_interval_ms,
            durability: self.durability.clone(),
        }
    }
}

/// Options of `lazarus crash-test`.
#[derive(clap::Args)]
struct CrashTestArgs {
    #[command(flatten)]
    config: CrashConfigArgs,
    /// Trials; trial i uses seed + i [default: 20; with --power-loss: every crash point].
    #[arg(long)]
    trials: Option<u64>,
    /// Seed of the first trial.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Shortest run before a kill, in milliseconds after the child has recovered.
    #[arg(long, default_value_t = 100)]
    min_ms: u64,
    /// Longest run before a kill.
    #[arg(long, default_value_t = 400)]
    max_ms: u64,
    /// Kill/restart rounds per trial (later rounds sometimes kill during recovery).
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// Also truncate or flip a bit of the newest log file of a copy, and recover that.
    #[arg(long)]
    damage: bool,
    /// Directory for the trials [default: a new one under the temp dir].
    #[arg(long)]
    work_dir: Option<std::path::PathBuf>,
    /// Keep every trial directory (failed ones are always kept).
    #[arg(long)]
    keep: bool,
    /// Test the harness: the child acknowledges at commit, before durability.
    #[arg(long, hide = true)]
    ack_before_durable: bool,
    /// Power loss on the simulated disk at the k-th I/O of a short history (workloads kv,
    /// transfer; schemes value, command, value-checkpoint, command-checkpoint, serial-*, taurus-*,
    /// taurus-*-checkpoint, indexed, indexed-sync), in process.
    #[arg(long)]
    power_loss: bool,
    /// --power-loss: steps of the history.
    #[arg(long, default_value_t = 24)]
    steps: usize,
    /// --power-loss: damage seeds per crash point.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// --power-loss: only this crash point (reproduces a failure).
    #[arg(long)]
    k: Option<u64>,
    /// --power-loss: with --k, only this damage seed.
    #[arg(long)]
    crash_seed: Option<u64>,
    /// --power-loss: crash recovery at each of its I/Os for every this many crash points (0 = never).
    #[arg(long, default_value_t = 8)]
    recovery_crash_stride: u64,
    /// Run the child's log directory on a FUSE file system that loses un-fsynced data at each
    /// kill (needs the `fuse` feature, /dev/fuse and fusermount3).
    #[arg(long)]
    fuse: bool,
    /// --fuse: also tear un-fsynced writes (each 512-byte sector old, new or garbage) instead of
    /// only discarding them.
    #[arg(long)]
    tear: bool,
}

fn crash_test(args: &CrashTestArgs) -> anyhow::Result<ExitCode> {
    if args.power_loss {
        return crash_test_power_loss(args);
    }
    let exe = std::env::current_exe().context("cannot find the lazarus binary")?;
    let mut options = lazarus::crash::CrashOptions::new(args.config.config(), exe);
    options.trials = args.trials.unwrap_or(20);
    options.fuse = args.fuse;
    options.tear = args.tear;
    options.seed = args.seed;
    options.min_ms = args.min_ms;
    options.max_ms = args.max_ms;
    options.rounds = args.rounds;
    options.damage = args.damage;
    options.work_dir = args.work_dir.clone();
    options.keep = args.keep;
    options.ack_before_durable = args.ack_before_durable;
    let summary = lazarus::crash::run_crash_test(&options, &mut |line| println!("{line}"))?;
    println!(
        "crash-test {}: {} trials, {} kills, {} acknowledged transactions verified, {} failures",
        args.config.workload,
        summary.trials,
        summary.kills,
        summary.acked,
        summary.failures.len()
    );
    println!("recoveries from a checkpoint: {} of {}", summary.from_checkpoint, summary.trials);
    if let Some(skipped) = &summary.skipped {
        println!("SKIPPED: {skipped}");
    }
    if args.fuse && summary.skipped.is_none() {
        println!(
            "power cuts on FUSE: {} (un-fsynced data {})",
            summary.kills,
            if args.tear { "torn" } else { "discarded" }
        );
    }
    if args.damage {
        println!(
            "damaged logs: {} clear errors, {} verified recoveries",
            summary.damage_errors,
            summary.trials - summary.damage_errors
        );
    }
    for failure in &summary.failures {
        println!("FAILED seed {}: {}", failure.seed, failure.reason);
        println!("  kept {}", failure.dir.display());
        println!("  reproduce with: {}", options.reproduce_command(failure.seed));
    }
    Ok(if summary.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `lazarus crash-test --power-loss`: the simulated-disk crash loop, in process.
fn crash_test_power_loss(args: &CrashTestArgs) -> anyhow::Result<ExitCode> {
    use lazarus::crash::power_loss::{PowerLossOptions, run_power_loss};
    let options = PowerLossOptions {
        workload: args.config.workload.clone(),
        durability: args.config.durability.clone(),
        steps: args.steps,
        trials: args.trials,
        seeds: args.seeds,
        seed: args.seed,
        k: args.k,
        crash_seed: args.crash_seed,
        recovery_crash_stride: args.recovery_crash_stride,
    };
    let started = std::time::Instant::now();
    let summary = run_power_loss(&options, &mut |line| println!("{line}"))?;
    let t = &summary.tally;
    println!(
        "crash-test --power-loss {} {}: {} crash points, {} cases run ({} recoveries, {} continuations, {} \
         crashed recoveries), lost acknowledged commits {}, phantoms {}, clear errors {}, other errors {}, \
         silent divergences {}, dependency-closed Taurus states {} ({:.1} s)",
        options.workload,
        options.durability,
        t.crash_points,
        t.cases + t.continuation_cases + t.recovery_crash_cases,
        t.cases,
        t.continuation_cases,
        t.recovery_crash_cases,
        t.lost_acked,
        t.phantoms,
        t.clear_errors,
        t.other_errors,
        t.silent_divergences,
        t.reordered,
        started.elapsed().as_secs_f64()
    );
    for violation in t.violations.iter().take(lazarus::crash::power_loss::VIOLATIONS_SHOWN) {
        println!("VIOLATION {violation}");
    }
    let mut shown = std::collections::BTreeSet::new();
    for &(k, seed) in &t.failed_cases {
        if shown.insert((k, seed)) && shown.len() <= lazarus::crash::power_loss::VIOLATIONS_SHOWN {
            println!("  reproduce with: {}", options.reproduce_command(k, seed));
        }
    }
    Ok(if t.violations_total == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Options of the hidden `lazarus crash-child`.
#[derive(clap::Args)]
struct CrashChildArgs {
    #[command(flatten)]
    config: CrashConfigArgs,
    /// The log directory (holding a loaded database).
    #[arg(long)]
    log_dir: std::path::PathBuf,
    /// The file acknowledgements are appended to.
    #[arg(long)]
    ack_file: std::path::PathBuf,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Round number, written to the ack file.
    #[arg(long, default_value_t = 0)]
    round: u64,
    /// Stop by itself after this many milliseconds.
    #[arg(long, default_value_t = 120_000)]
    run_ms: u64,
    /// Acknowledge at commit, before durability (a broken child, to test the harness).
    #[arg(long)]
    ack_before_durable: bool,
}

fn crash_child(args: &CrashChildArgs) -> anyhow::Result<ExitCode> {
    let options = lazarus::crash::child::ChildOptions {
        config: args.config.config(),
        log_dir: args.log_dir.clone(),
        ack_file: args.ack_file.clone(),
        seed: args.seed,
        round: args.round,
        run_ms: args.run_ms,
        ack_before_durable: args.ack_before_durable,
    };
    lazarus::crash::child::run_child(&options)?;
    Ok(ExitCode::SUCCESS)
}

/// Options of `lazarus serve`.
#[derive(clap::Args)]
struct ServeArgs {
    /// TCP port.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Log directory: the database is recovered from it and logged into it.
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Durability scheme: none, value (SLR: blocking recovery), indexed (AILIR: instant
    /// recovery, indexing asynchronous to commit), indexed-sync (SILIR), or serial-data,
    /// serial-cmd, taurus-data, taurus-cmd (one logger) [default: value with --dir, else none].
    #[arg(long)]
    durability: Option<String>,
    /// Workers transactions run on [default: twice the cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Event loops serving the connections (each runs its connections' requests) [default: the cores].
    #[arg(long)]
    io_threads: Option<usize>,
    /// Most connections at once.
    #[arg(long, default_value_t = 1024)]
    max_clients: usize,
    /// Epoch interval in milliseconds: the group-commit period, and so the latency of a durable
    /// acknowledgement (2 ms: redis-benchmark SET -P 1 at 50 clients ran at 2.9k/s with 10 ms,
    /// 6.5k/s with 2 ms, no better with 1 ms; docs/PERFORMANCE.md).
    #[arg(long, default_value_t = 2)]
    epoch_interval_ms: u64,
    /// Recover in small (4 KiB) pages instead of transparent huge pages: on the VMs this
    /// project is measured on, recovery is shorter (a fresh huge page costs more to fault in than
    /// its small pages) but the requests after it slower until the kernel collapses the pages
    /// (docs/PERFORMANCE.md, "Taurus", "Session 45"). `indexed`: the restore's walk, which runs
    /// after the server opens, keeps huge pages (small ones measured no faster under load).
    #[arg(long)]
    recovery_small_pages: bool,
    /// `indexed`, `indexed-sync`: threads that walk the indexed log to restore the database after
    /// a restart, 1 to 16. Fewer leave more CPU to the requests served meanwhile and make the
    /// restore slower under load (on 2 cores, 200 clients: 1 walker served 0.46-0.53 of the
    /// steady-state rate during a 12-16 s restore, 4 walkers 0.31-0.33 during 8 s;
    /// docs/indexed.md) [default: twice the cores, at least 2].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=16))]
    restore_walkers: Option<u16>,
    /// `indexed`, `indexed-sync`: the most of the machine's CPU the restore's walk takes while
    /// clients are served, in (0, 1]; 1 leaves it to the kernel. Smaller serves more requests
    /// during a restore under load and makes it slower; unloaded, the walk runs at full speed
    /// whatever this says (docs/indexed.md, "The walk's share of the CPU"). It is the share's
    /// mean over the restore: the share starts above it and ends below it (--restore-front-load).
    /// On top of it the walk takes CPU time the machine leaves idle, where Linux counts it
    /// (cpuidle) [default: 0.28].
    #[arg(long)]
    restore_cpu_share: Option<f64>,
    /// `indexed`, `indexed-sync`: how far the walk's share falls from the restore's start to its
    /// end, in [0, 0.9]: it starts above --restore-cpu-share, while most requests miss and each
    /// miss costs about a request, and ends at --restore-cpu-share × (1 − this), with the restore
    /// as long as at the constant share (docs/indexed.md, "A share that falls as the restore goes
    /// on") [default: 0.6; 0 holds the share constant].
    #[arg(long)]
    restore_front_load: Option<f64>,
    /// `indexed`, `indexed-sync`: milliseconds between the server's start of serving and the
    /// restore's walk, 0 to 10,000. Until the walk starts the process is in small (4 KiB) pages
    /// and the first requests have the machine: their misses are fetched one by one
    /// (docs/indexed.md, "The first replies") [default: 50].
    #[arg(long)]
    restore_start_delay_ms: Option<u64>,
    /// `indexed`: the most sequential log, in MiB, written since the server's restore and not
    /// yet copied into the indexed log before write replies wait for the Indexer, 0 to 16,384
    /// (0: no bound). A crash leaves about this much for the restart to read before it listens
    /// (about 3-9 ms a MiB on this project's VMs), plus what a restore running at the crash had
    /// not yet indexed; a write load faster than the Indexer runs at the Indexer's pace
    /// (docs/indexed.md, "The Indexer's lag is bounded") [default: 32].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=16_384))]
    unindexed_max_mib: Option<u64>,
}

fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let durability =
        args.durability.clone().unwrap_or_else(|| if args.dir.is_some() { "value" } else { "none" }.into());
    let mut indexed: Option<Arc<IndexedLogging>> = None;
    let scheme: Arc<dyn LogScheme> = match (durability.as_str(), &args.dir) {
        ("none", _) => Arc::new(NoLogging),
        ("value", Some(dir)) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            Arc::new(ValueLogging::new(ValueOptions::new(vec![dir.clone()]))?)
        }
        // Instant recovery from an indexed log: AILIR (`indexed`) and SILIR (`indexed-sync`).
        (name @ ("indexed" | "indexed-sync"), Some(dir)) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let mode = if name == "indexed" { IndexMode::Async } else { IndexMode::Sync };
            let mut options = IndexedOptions::new(vec![dir.clone()], mode);
            // The server says when it serves (`RecoveryStatus::serving`).
            options.restore_awaits_serving = true;
            options.restore_walkers = args.restore_walkers.map(usize::from);
            if let Some(share) = args.restore_cpu_share {
                options.restore_cpu_share = share;
            }
            if let Some(front_load) = args.restore_front_load {
                options.restore_front_load = front_load;
            }
            if let Some(delay_ms) = args.restore_start_delay_ms {
                options.restore_start_delay_ms = delay_ms;
            }
            if let Some(max_mib) = args.unindexed_max_mib {
                options.unindexed_max_bytes = max_mib << 20;
            }
            // The server's threads start and its first requests are answered in small pages
            // (`docs/indexed.md`, "The first replies").
            options.small_pages_until_walk = true;
            let scheme = Arc::new(IndexedLogging::new(options)?);
            indexed = Some(Arc::clone(&scheme));
            scheme
        }
        // Serial and Taurus logging (one logger: the server's log directory is one directory).
        (name, Some(dir)) if Flavor::from_name(name).is_some() => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let flavor = Flavor::from_name(name).context("a stream scheme")?;
            Arc::new(StreamLogging::new(StreamOptions::new(flavor, vec![dir.clone()]))?)
        }
        (name, None) if matches!(name, "value" | "indexed" | "indexed-sync") || Flavor::from_name(name).is_some() => {
            bail!("--durability {name} needs --dir DIR")
        }
        (other, _) => bail!(
            "unknown --durability {other:?}; available: none, value, indexed, indexed-sync, serial-data, serial-cmd, \
             taurus-data, taurus-cmd"
        ),
    };
    let started = std::time::Instant::now();
    let config = DatabaseConfig {
        epoch_interval_ms: args.epoch_interval_ms,
        scheme,
        recovery_small_pages: args.recovery_small_pages,
        ..DatabaseConfig::default()
    };
    let db = lazarus::Database::open(config)?;
    let keys_restored = db.catalog().table_by_name(lazarus::server::keyspace::TABLE).map_or(0, |t| t.len() as u64);
    let recovery = lazarus::server::RecoveryInfo {
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        keys_restored,
        ..lazarus::server::RecoveryInfo::default()
    };
    let mut config = lazarus::server::ServerConfig {
        bind: format!("{}:{}", args.bind, args.port),
        clients_max: args.max_clients,
        started,
        ..lazarus::server::ServerConfig::default()
    };
    if let Some(threads) = args.threads {
        config.workers = threads;
    }
    if let Some(io_threads) = args.io_threads {
        config.io_threads = io_threads;
    }
    let status: Arc<dyn lazarus::server::RecoveryStatus> = match indexed {
        Some(scheme) => {
            let r = scheme.report.lock().clone();
            eprintln!(
                "lazarus serve: indexed log {}: opened in {:.1} ms, {} bytes of unindexed tail read in {:.1} ms",
                r.kind, r.store_open_ms, r.tail_bytes, r.tail_ms
            );
            scheme
        }
        None => Arc::new(recovery),
    };
    let server = lazarus::server::Server::bind(db.clone(), config, status)?;
    eprintln!(
        "lazarus serve: listening on {} (durability {durability}, {keys_restored} keys recovered in {:.1} ms)",
        server.local_addr(),
        started.elapsed().as_secs_f64() * 1e3
    );
    server.run()?;
    db.close()?;
    eprintln!("lazarus serve: shut down");
    Ok(ExitCode::SUCCESS)
}

/// Options of `lazarus instant-bench`.
#[derive(clap::Args)]
struct InstantBenchArgs {
    /// Keys preloaded before the crash.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Servers, in order: slr, ailir, silir, redis-always, redis-everysec.
    #[arg(long, value_delimiter = ',', default_value = "slr,ailir,silir")]
    targets: Vec<String>,
    /// Workloads: read-only, read-write (50:50), write-only.
    #[arg(long, value_delimiter = ',', default_value = "read-only,read-write,write-only")]
    workloads: Vec<String>,
    /// Connections of the load (memtier's default: 4 threads × 50 clients).
    #[arg(long, default_value_t = 200)]
    clients: usize,
    /// Threads the connections are spread over, each one epoll (memtier's `--threads`).
    #[arg(long, default_value_t = 4)]
    driver_threads: usize,
    /// Seconds of load after each restart.
    #[arg(long, default_value_t = 10.0)]
    duration_s: f64,
    /// Timeline window in milliseconds.
    #[arg(long, default_value_t = 500)]
    window_ms: u64,
    /// Output directory: timelines `<workload>-<target>.csv`, `summary.csv`, crash images.
    #[arg(long, default_value = "instant-bench")]
    out: std::path::PathBuf,
    /// First TCP port (each server takes the next).
    #[arg(long, default_value_t = 17000)]
    first_port: u16,
    /// Seconds between the end of the preload and the SIGKILL (0: the largest unindexed tail).
    #[arg(long, default_value_t = 2.0)]
    settle_s: f64,
    /// `lazarus serve --restore-walkers` for the Lazarus targets [default: the server's].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=16))]
    restore_walkers: Option<u16>,
    /// `lazarus serve --restore-cpu-share` for the Lazarus targets [default: the server's].
    #[arg(long)]
    restore_cpu_share: Option<f64>,
    /// `lazarus serve --restore-front-load` for the Lazarus targets [default: the server's].
    #[arg(long)]
    restore_front_load: Option<f64>,
    /// `lazarus serve --restore-start-delay-ms` for the Lazarus targets [default: the server's].
    #[arg(long)]
    restore_start_delay_ms: Option<u64>,
    /// `lazarus serve --unindexed-max-mib` for the Lazarus targets [default: the server's].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=16_384))]
    unindexed_max_mib: Option<u64>,
    /// Restart each crashed server at once on its own directory, as after a real crash, instead
    /// of on a synced copy of one crash image per workload (each workload then preloads its own;
    /// docs/indexed.md, "The walk's share of the CPU").
    #[arg(long)]
    in_place: bool,
    /// The `lazarus` executable to run as the server (default: this one), e.g. an older build
    /// compared under the same driver.
    #[arg(long)]
    server_exe: Option<std::path::PathBuf>,
}

fn instant_bench(args: &InstantBenchArgs) -> anyhow::Result<ExitCode> {
    use lazarus::server::instant_bench::{self, InstantBenchOptions, Target};
    let targets = args.targets.iter().map(|t| Target::parse(t)).collect::<Result<Vec<_>, _>>()?;
    let workloads = args
        .workloads
        .iter()
        .map(|w| match w.as_str() {
            "read-only" => Ok((w.clone(), 1.0)),
            "read-write" => Ok((w.clone(), 0.5)),
            "write-only" => Ok((w.clone(), 0.0)),
            other => Err(anyhow::anyhow!("unknown workload {other:?}; expected read-only, read-write, write-only")),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let options = InstantBenchOptions {
        lazarus_exe: match &args.server_exe {
            Some(exe) => exe.clone(),
            None => std::env::current_exe().context("cannot find the lazarus executable")?,
        },
        keys: args.keys,
        targets,
        workloads,
        clients: args.clients,
        driver_threads: args.driver_threads,
        duration_s: args.duration_s,
        window_ms: args.window_ms,
        out_dir: args.out.clone(),
        first_port: args.first_port,
        settle_s: args.settle_s,
        restore_walkers: args.restore_walkers,
        restore_cpu_share: args.restore_cpu_share,
        restore_front_load: args.restore_front_load,
        restore_start_delay_ms: args.restore_start_delay_ms,
        unindexed_max_mib: args.unindexed_max_mib,
        in_place: args.in_place,
    };
    let results = instant_bench::run(&options)?;
    let mut summary = String::from(
        "target,workload,keys,preload_s,first_reply_ms,recovered_ms,during_recovery_per_s,after_recovery_per_s,restored_on_demand,walk_cpu_ms,restoring_cpu_ms,fetch_cpu_ms,server_listening_ms,server_first_fetch_ms\n",
    );
    println!(
        "{:<16} {:<11} {:>12} {:>13} {:>16} {:>15}",
        "target", "workload", "first reply", "recovered", "during (req/s)", "after (req/s)"
    );
    for r in &results {
        println!(
            "{:<16} {:<11} {:>9.1} ms {:>10.1} ms {:>16.0} {:>15.0}",
            r.target, r.workload, r.first_reply_ms, r.recovered_ms, r.during_recovery_per_s, r.after_recovery_per_s
        );
        summary.push_str(&format!(
            "{},{},{},{:.2},{:.1},{:.1},{:.0},{:.0},{},{},{},{},{},{}\n",
            r.target,
            r.workload,
            args.keys,
            r.preload_s,
            r.first_reply_ms,
            r.recovered_ms,
            r.during_recovery_per_s,
            r.after_recovery_per_s,
            r.restored_on_demand.map(|n| n.to_string()).unwrap_or_default(),
            r.restore_cpu_ms.map(|(walk, _)| format!("{walk:.0}")).unwrap_or_default(),
            r.restore_cpu_ms.map(|(_, process)| format!("{process:.0}")).unwrap_or_default(),
            r.fetch_cpu_ms.map(|fetch| format!("{fetch:.0}")).unwrap_or_default(),
            r.server_startup_ms.map(|(listening, _)| format!("{listening:.1}")).unwrap_or_default(),
            r.server_startup_ms.and_then(|(_, fetch)| fetch).map(|f| format!("{f:.1}")).unwrap_or_default()
        ));
    }
    std::fs::write(args.out.join("summary.csv"), summary).context("cannot write summary.csv")?;
    eprintln!(
        "instant-bench: timelines in {}; plot them with `lazarus report {}/<workload>-*.csv`",
        args.out.display(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
