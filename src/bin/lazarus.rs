//! The `lazarus` command line. Errors are reported with `anyhow` here, at the binary's edge only.

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use lazarus::bench::{TransferOptions, run_transfer};
use std::process::ExitCode;
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
    /// Run the transfer workload and report throughput and abort rate.
    Bench {
        /// Worker threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 5.0)]
        duration_s: f64,
        /// Number of accounts (fewer means more conflicts).
        #[arg(long, default_value_t = 10_000)]
        accounts: u32,
        /// Epoch interval in milliseconds.
        #[arg(long, default_value_t = 40)]
        epoch_interval_ms: u64,
        /// Seed of the parameter generators.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Check { files }) => check(&files),
        Some(Command::Bench { threads, duration_s, accounts, epoch_interval_ms, seed }) => {
            bench(threads, duration_s, accounts, epoch_interval_ms, seed)
        }
        None => bench(2, 5.0, 10_000, 40, 1),
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

fn bench(
    threads: usize,
    duration_s: f64,
    accounts: u32,
    epoch_interval_ms: u64,
    seed: u64,
) -> anyhow::Result<ExitCode> {
    if !(duration_s.is_finite() && duration_s > 0.0 && duration_s <= 86_400.0) {
        bail!("--duration-s must be in (0, 86400], got {duration_s}");
    }
    let options = TransferOptions {
        threads,
        duration: Duration::from_secs_f64(duration_s),
        accounts,
        epoch_interval_ms,
        seed,
        ..TransferOptions::default()
    };
    eprintln!(
        "running transfer: {threads} thread(s), {accounts} accounts, {duration_s} s, durability none, epoch {epoch_interval_ms} ms"
    );
    let report = run_transfer(&options)?;
    println!("committed      {}", report.committed);
    println!("throughput     {:.0} txn/s", report.throughput_per_s());
    println!("conflict rate  {:.4}", report.conflict_rate());
    println!("user aborts    {}", report.user_aborts);
    println!("total balance  {} (invariant holds)", report.total_balance);
    Ok(ExitCode::SUCCESS)
}
