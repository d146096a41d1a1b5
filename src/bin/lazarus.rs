//! The `lazarus` command line. Errors are reported with `anyhow` here, at the binary's edge only.

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use lazarus::bench::result::RunSummary;
use lazarus::bench::{RunOptions, open_load_run};
use lazarus::durability::LogScheme;
use lazarus::durability::none::NoLogging;
use lazarus::durability::value::{ValueLogging, ValueOptions};
use lazarus::workload::WorkloadOptions;
use lazarus::{DatabaseConfig, workload};
use std::process::ExitCode;
use std::sync::Arc;

/// mimalloc instead of the system allocator: profiles of every workload showed glibc malloc and
/// free taking a fifth to a quarter of all instructions; side by side it gave about 1.1x on TPC-C
/// and YCSB (docs/PERFORMANCE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
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
    /// Recover a database from its value-logging directories and report each phase.
    Recover {
        /// Log directories, in the order the database used them.
        #[arg(long, required = true)]
        log_dir: Vec<std::path::PathBuf>,
        /// Recovery threads [default: all cores].
        #[arg(long)]
        threads: Option<usize>,
    },
    /// The first-run job: load a small workload, run it under each available durability scheme,
    /// and write an HTML report (the default when no command is given).
    Demo(DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Check { files }) => check(&files),
        Some(Command::Bench(args)) => bench(&args),
        Some(Command::Report(args)) => report(&args),
        Some(Command::Demo(args)) => demo(&args),
        Some(Command::Recover { log_dir, threads }) => recover(log_dir, threads),
        None => match Cli::parse_from(["lazarus", "demo"]).command {
            Some(Command::Demo(args)) => demo(&args),
            Some(Command::Recover { log_dir, threads }) => recover(log_dir, threads),
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
    /// Durability scheme: none, value.
    #[arg(long, default_value = "none")]
    durability: String,
    /// Log directory (repeat for several loggers, one per disk).
    #[arg(long)]
    log_dir: Vec<std::path::PathBuf>,
    /// Delete what the log directories hold before the run.
    #[arg(long)]
    fresh: bool,
    /// Value logging: rotate data.log every this many epochs.
    #[arg(long, default_value_t = 100)]
    rotate_epochs: u64,
    /// Epoch interval in milliseconds.
    #[arg(long, default_value_t = 40)]
    epoch_interval_ms: u64,
    /// Seed of the parameter generators (a run is reproducible from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
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

/// Opens, loads, runs and checks one bench; returns its summary and timeline CSV.
fn run_bench(args: &BenchArgs) -> anyhow::Result<(RunSummary, String)> {
    if !(args.duration_s.is_finite() && args.duration_s > 0.0 && args.duration_s <= 86_400.0) {
        bail!("--duration-s must be in (0, 86400], got {}", args.duration_s);
    }
    let scheme = build_scheme(args)?;
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
    };
    let config = DatabaseConfig { epoch_interval_ms: args.epoch_interval_ms, scheme, ..DatabaseConfig::default() };
    eprintln!(
        "lazarus bench: workload {}, {} thread(s), {} s, durability {}, epoch {} ms, seed {}",
        args.workload, args.threads, args.duration_s, args.durability, args.epoch_interval_ms, args.seed
    );
    let result = open_load_run(config, &workload, &run_options)?;
    let summary = RunSummary::new(&result, &args.workload, &args.durability, args.threads, args.label.clone());
    Ok((summary, lazarus::bench::stats::timeline_csv(&result.timeline, args.window_ms)))
}

/// The durability schemes `lazarus bench --durability` accepts today.
const SCHEMES: &[&str] = &["none", "value"];

/// Builds the durability scheme `--durability` names, over fresh log directories.
fn build_scheme(args: &BenchArgs) -> anyhow::Result<Arc<dyn LogScheme>> {
    match args.durability.as_str() {
        "none" => Ok(Arc::new(NoLogging)),
        "value" => {
            if args.log_dir.is_empty() {
                bail!("--durability value needs at least one --log-dir DIR");
            }
            for dir in &args.log_dir {
                prepare_log_dir(dir, args.fresh)?;
            }
            let mut options = ValueOptions::new(args.log_dir.clone());
            options.rotate_epochs = args.rotate_epochs;
            Ok(Arc::new(ValueLogging::new(options)?))
        }
        other => bail!("unknown --durability {other:?}; available: {}", SCHEMES.join(", ")),
    }
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

fn recover(log_dirs: Vec<std::path::PathBuf>, threads: Option<usize>) -> anyhow::Result<ExitCode> {
    for dir in &log_dirs {
        if !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
    }
    let mut options = ValueOptions::new(log_dirs);
    if let Some(threads) = threads {
        options.recovery_threads = threads;
    }
    let scheme = Arc::new(ValueLogging::new(options)?);
    let started = std::time::Instant::now();
    let db = lazarus::Database::open(DatabaseConfig {
        scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
        ..DatabaseConfig::default()
    })?;
    let total_s = started.elapsed().as_secs_f64();
    let report = scheme.recovery.lock().clone().context("recovery did not run")?;
    let rows: usize = db.catalog().tables().iter().map(|t| t.len()).sum();
    println!("recovered to pepoch {} ({} tables, {rows} rows)", report.pepoch, db.catalog().tables().len());
    println!("catalog         {:>10.1} ms", report.catalog_ms);
    println!(
        "log replay      {:>10.1} ms  {} files, {} bytes, {} entries ({} skipped), {:.3} GB/s",
        report.replay_ms,
        report.files,
        report.bytes,
        report.entries,
        report.entries_skipped,
        report.replay_bytes_per_s() / 1e9
    );
    println!("index rebuild   {:>10.1} ms", report.rebuild_ms);
    println!("total           {:>10.1} ms", total_s * 1e3);
    db.close()?;
    Ok(ExitCode::SUCCESS)
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
    /// Input files: `.csv` timelines (`bench --timeline`) and `.json` results (`bench --result`).
    #[arg(required = true)]
    files: Vec<std::path::PathBuf>,
    /// Output directory; `index.html` is written into it.
    #[arg(long, default_value = "report")]
    out: std::path::PathBuf,
    /// Page title.
    #[arg(long, default_value = "Lazarus bench report")]
    title: String,
    /// Plots to draw, comma-separated: throughput, latency, bars, or all.
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
