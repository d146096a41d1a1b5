//! YCSB (Cooper et al., "Benchmarking cloud serving systems with YCSB", SoCC 2010) in the two
//! variants the papers evaluate (`workloads/ycsb.proc`).
//!
//! - **`silor`** — SiloR §6: "a variant of YCSB workload mix A ... a read/write (get/put) ratio of
//!   70/30 (not 50/50), and a record size of 100 bytes (not 1000) ... Our read and write
//!   transactions sample keys uniformly." One table `ycsb_kv(ycsb_key int, val bytes)`; every
//!   transaction is one get or one put of an existing key. `read_fraction` changes the 70/30 split
//!   (0.8 matches the Silo paper's YCSB figure), `value_size_bytes` the record size.
//! - **`taurus`** — Taurus §6.1: "Each data tuple in YCSB has 10 fields, each of which is 100 bytes
//!   in size. In our evaluation, each transaction reads and writes to two random tuples and each
//!   query touches a single field of that tuple. All tuples are accessed with uniformly random
//!   distribution ... the value written to a tuple is an input parameter." Table
//!   `ycsb_usertable(ycsb_key, field0..field9)`; each transaction reads one random field of each of
//!   two tuples and overwrites one random field of each of two *other* tuples (four distinct keys)
//!   with a fresh 100-byte value passed as an argument. (The text leaves open whether the written
//!   tuples are the read ones; distinct tuples give the 2-read + 2-write footprint it describes.)
//!
//! Both take `zipf_theta` (Zipfian keys, [`keys::KeyChooser`]; uniform when absent, as both papers
//! run) and `records`. Loading is parallel over the loader threads, in batches of bulk-insert
//! procedure calls. The check: the table has exactly `records` rows with keys `0..records`, and
//! every value (every field) has `value_size_bytes` bytes.

pub mod keys;

use super::WorkloadOptions;
use crate::bench::workload::{TxnCall, TxnGenerator, TxnRequest, Workload, WorkloadError};
use crate::db::{Database, Worker};
use crate::storage::{ParamValue, Value};
use keys::KeyChooser;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

/// The source of the workload's schema and procedures.
pub const SOURCE: &str = include_str!("../../workloads/ycsb.proc");

/// Default record count (SiloR runs 400 M; sized for a 24 GiB, 2-core machine).
pub const RECORDS_DEFAULT: u64 = 1_000_000;
/// Default record count of the Taurus variant (1 KiB rows; Taurus runs 10 M).
pub const RECORDS_DEFAULT_TAURUS: u64 = 1_000_000;
/// SiloR's read fraction (70 % gets).
pub const READ_FRACTION_DEFAULT: f64 = 0.7;
/// Value (field) size in bytes in both variants.
pub const VALUE_SIZE_DEFAULT: usize = 100;
/// Fields per tuple in the Taurus variant.
pub const FIELDS: usize = 10;
/// Keys per check call (below the 65 536-row scan limit).
const CHECK_CHUNK: u64 = 50_000;
/// Largest value accepted (the engine limits text and bytes built in procedures to 1 MiB).
const VALUE_SIZE_MAX: usize = 1 << 20;

/// Which YCSB variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// SiloR's: one 100-byte value per key, one get or put per transaction.
    SiloR,
    /// Taurus's: 10 fields of 100 bytes, 2 reads + 2 writes of one field per transaction.
    Taurus,
}

impl Variant {
    /// The variant called `name` (`silor` or `taurus`).
    pub fn from_name(name: &str) -> Result<Variant, WorkloadError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "silor" | "silo" => Ok(Variant::SiloR),
            "taurus" => Ok(Variant::Taurus),
            other => Err(WorkloadError::Options(format!("unknown YCSB variant {other:?}; known: silor, taurus"))),
        }
    }

    fn table(self) -> &'static str {
        match self {
            Variant::SiloR => "ycsb_kv",
            Variant::Taurus => "ycsb_usertable",
        }
    }
}

/// The YCSB workload and its options.
#[derive(Clone, Debug)]
pub struct Ycsb {
    /// The variant.
    pub variant: Variant,
    /// Number of records (keys `0..records`).
    pub records: u64,
    /// Fraction of gets (SiloR variant only).
    pub read_fraction: f64,
    /// Zipfian skew; `None` is uniform.
    pub zipf_theta: Option<f64>,
    /// Bytes per value (per field in the Taurus variant).
    pub value_size: usize,
}

impl Default for Ycsb {
    fn default() -> Ycsb {
        Ycsb {
            variant: Variant::SiloR,
            records: RECORDS_DEFAULT,
            read_fraction: READ_FRACTION_DEFAULT,
            zipf_theta: None,
            value_size: VALUE_SIZE_DEFAULT,
        }
    }
}

/// A per-thread seed derived from the run's seed.
pub fn thread_seed(seed: u64, thread: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(thread as u64)
}

/// Splits `0..count` into up to `threads` contiguous ranges and runs `load_batch(worker, lo, hi)`
/// over consecutive batches of at most `batch` keys of each range, one thread (and worker) per
/// range. Shared by the YCSB, Smallbank and KV loaders.
pub fn load_parallel<F>(
    db: &Database,
    threads: usize,
    count: u64,
    batch: u64,
    load_batch: F,
) -> Result<(), WorkloadError>
where
    F: Fn(&mut Worker, u64, u64) -> Result<(), WorkloadError> + Sync,
{
    let threads = threads.clamp(1, 64) as u64;
    let per_thread = count.div_ceil(threads).max(1);
    let batch = batch.max(1);
    let load_range = |lo: u64, hi: u64| -> Result<(), WorkloadError> {
        let mut worker = db.try_worker()?;
        let mut at = lo;
        while at < hi {
            let end = at.saturating_add(batch).min(hi);
            load_batch(&mut worker, at, end)?;
            at = end;
        }
        Ok(())
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| (t * per_thread, ((t + 1) * per_thread).min(count)))
            .filter(|(lo, hi)| lo < hi)
            .map(|(lo, hi)| s.spawn(move || load_range(lo, hi)))
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

fn key_arg(k: u64) -> ParamValue {
    int(k as i64)
}

/// `size` random bytes, drawn into `scratch` and copied into one allocation.
fn random_value(rng: &mut SmallRng, scratch: &mut Vec<u8>, size: usize) -> Value {
    scratch.resize(size, 0);
    rng.fill_bytes(scratch);
    Value::bytes(scratch)
}

impl Ycsb {
    /// The workload with the YCSB fields of `options` (`variant`, `records`, `read_fraction`,
    /// `zipf_theta`, `value_size_bytes`) over the variant's defaults.
    pub fn from_options(options: &WorkloadOptions) -> Result<Ycsb, WorkloadError> {
        let variant = options.variant.as_deref().map_or(Ok(Variant::SiloR), Variant::from_name)?;
        if variant == Variant::Taurus && options.read_fraction.is_some() {
            return Err(WorkloadError::Options(
                "the taurus YCSB variant always reads 2 tuples and writes 2; --read-fraction is for silor".into(),
            ));
        }
        let records_default = if variant == Variant::Taurus { RECORDS_DEFAULT_TAURUS } else { RECORDS_DEFAULT };
        let w = Ycsb {
            variant,
            records: options.records.unwrap_or(records_default),
            read_fraction: options.read_fraction.unwrap_or(READ_FRACTION_DEFAULT),
            zipf_theta: options.zipf_theta,
            value_size: options.value_size_bytes.unwrap_or(VALUE_SIZE_DEFAULT),
        };
        w.validate()?;
        Ok(w)
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let min_records = if self.variant == Variant::Taurus { 4 } else { 1 };
        if self.records < min_records || self.records > i64::MAX as u64 {
            return Err(WorkloadError::Options(format!(
                "YCSB {:?} needs at least {min_records} records, got {}",
                self.variant, self.records
            )));
        }
        if !(0.0..=1.0).contains(&self.read_fraction) {
            return Err(WorkloadError::Options(format!("read fraction must be in 0..=1, got {}", self.read_fraction)));
        }
        if self.value_size > VALUE_SIZE_MAX {
            return Err(WorkloadError::Options(format!(
                "value size at most {VALUE_SIZE_MAX}, got {}",
                self.value_size
            )));
        }
        KeyChooser::new(self.records, self.zipf_theta).map(|_| ())
    }

    fn load_batch(&self, worker: &mut Worker, lo: u64, hi: u64) -> Result<(), WorkloadError> {
        let mut rng = SmallRng::seed_from_u64(lo);
        let fields = if self.variant == Variant::Taurus { FIELDS } else { 1 };
        let mut scratch = Vec::new();
        let count = (hi - lo) as usize * fields;
        let vals: Vec<Value> = (0..count).map(|_| random_value(&mut rng, &mut scratch, self.value_size)).collect();
        let procedure = if self.variant == Variant::Taurus { "ycsb_load_usertable" } else { "ycsb_load_kv" };
        worker.call_retrying(procedure, &[key_arg(lo), ParamValue::from(vals)], 100)?;
        Ok(())
    }

    fn check_chunk(&self, worker: &mut Worker, lo: u64, hi: u64) -> Result<(), WorkloadError> {
        let procedure = if self.variant == Variant::Taurus { "ycsb_check_usertable" } else { "ycsb_check_kv" };
        let args = [key_arg(lo), key_arg(hi), int(self.value_size as i64)];
        let out = worker.call_retrying(procedure, &args, 100)?;
        let n = out.values.first().and_then(Value::as_int).unwrap_or(-1);
        let bad = out.values.get(1).and_then(Value::as_int).unwrap_or(-1);
        if n != (hi - lo) as i64 {
            return Err(WorkloadError::Inconsistent(format!("keys {lo}..{hi}: {n} rows, expected {}", hi - lo)));
        }
        if bad != 0 {
            return Err(WorkloadError::Inconsistent(format!(
                "keys {lo}..{hi}: {bad} rows with a value of other than {} bytes",
                self.value_size
            )));
        }
        Ok(())
    }
}

impl Workload for Ycsb {
    fn name(&self) -> &str {
        "ycsb"
    }

    fn txn_kinds(&self) -> Vec<String> {
        match self.variant {
            Variant::SiloR => vec!["get".into(), "put".into()],
            Variant::Taurus => vec!["read2-write2".into()],
        }
    }

    fn sources(&self) -> Vec<(String, String)> {
        vec![("ycsb.proc".into(), SOURCE.into())]
    }

    fn load(&self, db: &Database, threads: usize) -> Result<(), WorkloadError> {
        self.validate()?;
        let batch = if self.variant == Variant::Taurus { 100 } else { 1000 };
        load_parallel(db, threads, self.records, batch, |w, lo, hi| self.load_batch(w, lo, hi))
    }

    fn generator(&self, db: &Database, thread: usize, _threads: usize, seed: u64) -> Box<dyn TxnGenerator> {
        let registry = db.procedures();
        let id = |name: &str| registry.id_of(name).unwrap_or(u32::MAX);
        let records = self.records.max(1);
        let keys = KeyChooser::new(records, self.zipf_theta).unwrap_or_else(|_| KeyChooser::uniform(records));
        Box::new(YcsbGenerator {
            rng: SmallRng::seed_from_u64(thread_seed(seed, thread)),
            keys,
            variant: self.variant,
            read_fraction: if self.read_fraction.is_nan() { 0.0 } else { self.read_fraction.clamp(0.0, 1.0) },
            value_size: self.value_size,
            scratch: Vec::new(),
            ids: [id("ycsb_get"), id("ycsb_put"), id("ycsb_read2_write2")],
        })
    }

    fn check(&self, db: &Database) -> Result<(), WorkloadError> {
        let table = self.variant.table();
        let len = db.catalog().table_by_name(table).map_or(0, |t| t.len()) as u64;
        if len != self.records {
            return Err(WorkloadError::Inconsistent(format!("{table} has {len} rows, expected {}", self.records)));
        }
        let mut worker = db.try_worker()?;
        let mut lo = 0;
        while lo < self.records {
            let hi = (lo + CHECK_CHUNK).min(self.records);
            self.check_chunk(&mut worker, lo, hi)?;
            lo = hi;
        }
        Ok(())
    }
}

/// One worker's YCSB transactions.
struct YcsbGenerator {
    rng: SmallRng,
    keys: KeyChooser,
    variant: Variant,
    read_fraction: f64,
    value_size: usize,
    /// Buffer for drawing values.
    scratch: Vec<u8>,
    /// Procedure ids of get, put, read2-write2.
    ids: [u32; 3],
}

impl YcsbGenerator {
    fn silor(&mut self) -> TxnRequest {
        let key = key_arg(self.keys.sample(&mut self.rng));
        if self.rng.random_bool(self.read_fraction) {
            TxnRequest { kind: 0, call: TxnCall::Procedure { id: self.ids[0], args: vec![key] } }
        } else {
            let value = ParamValue::Scalar(random_value(&mut self.rng, &mut self.scratch, self.value_size));
            TxnRequest { kind: 1, call: TxnCall::Procedure { id: self.ids[1], args: vec![key, value] } }
        }
    }

    fn taurus(&mut self) -> TxnRequest {
        let [r0, r1, w0, w1]: [u64; 4] = self.keys.distinct(&mut self.rng);
        let mut field = || int(self.rng.random_range(0..FIELDS as i64));
        let (rf0, rf1, wf0, wf1) = (field(), field(), field(), field());
        let v0 = ParamValue::Scalar(random_value(&mut self.rng, &mut self.scratch, self.value_size));
        let v1 = ParamValue::Scalar(random_value(&mut self.rng, &mut self.scratch, self.value_size));
        let args = vec![key_arg(r0), rf0, key_arg(r1), rf1, key_arg(w0), wf0, v0, key_arg(w1), wf1, v1];
        TxnRequest { kind: 0, call: TxnCall::Procedure { id: self.ids[2], args } }
    }
}

impl TxnGenerator for YcsbGenerator {
    fn next_request(&mut self) -> TxnRequest {
        match self.variant {
            Variant::SiloR => self.silor(),
            Variant::Taurus => self.taurus(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_map_and_bad_ones_are_refused() {
        let mut o = WorkloadOptions { variant: Some("taurus".into()), ..WorkloadOptions::default() };
        let w = Ycsb::from_options(&o).unwrap();
        assert_eq!((w.variant, w.records, w.value_size), (Variant::Taurus, RECORDS_DEFAULT_TAURUS, 100));
        o.read_fraction = Some(0.5);
        assert!(Ycsb::from_options(&o).is_err());
        let o = WorkloadOptions { variant: Some("nope".into()), ..WorkloadOptions::default() };
        assert!(Ycsb::from_options(&o).is_err());
        let o = WorkloadOptions { read_fraction: Some(1.5), ..WorkloadOptions::default() };
        assert!(Ycsb::from_options(&o).is_err());
        let o = WorkloadOptions { records: Some(0), ..WorkloadOptions::default() };
        assert!(Ycsb::from_options(&o).is_err());
        let o = WorkloadOptions { read_fraction: Some(0.8), zipf_theta: Some(0.99), ..WorkloadOptions::default() };
        assert!(Ycsb::from_options(&o).is_ok_and(|w| w.read_fraction == 0.8 && w.zipf_theta == Some(0.99)));
    }
}
