//! Benchmark workloads, each written in the procedure language (`workloads/*.proc`) with a loader,
//! a parameter generator and consistency checks. See [`crate::bench::workload::Workload`].

pub mod kv;
pub mod smallbank;
pub mod tpcc;
pub mod transfer;
pub mod ycsb;

use crate::bench::workload::{Workload, WorkloadError};
use std::sync::Arc;

/// The names `lazarus bench --workload` accepts.
pub const NAMES: &[&str] = &["transfer", "tpcc", "smallbank", "ycsb", "kv"];

/// Options that select a workload's variant and size. Each workload reads the fields it knows
/// and ignores the rest; `None` means that workload's default.
#[derive(Clone, Debug, Default)]
pub struct WorkloadOptions {
    /// TPC-C: number of warehouses (scale).
    pub warehouses: Option<u32>,
    /// TPC-C: transaction mix, e.g. `new-order,payment` for Taurus's 50/50 mix; `None` = standard.
    pub mix: Option<String>,
    /// TPC-C: no inserts (PACMAN's fixed-size database).
    pub no_inserts: bool,
    /// Transfer, Smallbank: number of accounts.
    pub accounts: Option<u32>,
    /// Smallbank: fraction of transactions that touch the hotspot (0..=1).
    pub hotspot_fraction: Option<f64>,
    /// Smallbank: number of hotspot accounts.
    pub hotspot_accounts: Option<u32>,
    /// YCSB, KV: number of records / keys.
    pub records: Option<u64>,
    /// YCSB: `silor` (70/30 get/put, 100-byte values) or `taurus` (10 fields, 2 reads + 2 writes).
    pub variant: Option<String>,
    /// YCSB, KV: Zipfian skew theta; `None` = uniform.
    pub zipf_theta: Option<f64>,
    /// YCSB, KV: fraction of reads (0..=1).
    pub read_fraction: Option<f64>,
    /// KV, YCSB: value size in bytes.
    pub value_size_bytes: Option<usize>,
}

/// Builds a workload by name.
pub fn build(name: &str, options: &WorkloadOptions) -> Result<Arc<dyn Workload>, WorkloadError> {
    match name {
        "transfer" => {
            let mut w = transfer::Transfer::default();
            if let Some(accounts) = options.accounts {
                w.accounts = accounts;
            }
            Ok(Arc::new(w))
        }
        "tpcc" => {
            let w = tpcc::Tpcc::new(options.warehouses.unwrap_or(1), options.mix.as_deref(), options.no_inserts)?;
            Ok(Arc::new(w))
        }
        "smallbank" => Ok(Arc::new(smallbank::Smallbank::from_options(options)?)),
        "ycsb" => Ok(Arc::new(ycsb::Ycsb::from_options(options)?)),
        "kv" => Ok(Arc::new(kv::Kv::from_options(options)?)),
        _ => Err(WorkloadError::Options(format!("unknown workload {name:?}; known: {}", NAMES.join(", ")))),
    }
}
