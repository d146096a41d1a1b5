//! A memtier-like key-value workload (`workloads/kv.proc`), after memtier_benchmark's defaults:
//! one get or one set per transaction, set:get ratio 1:10 (`--ratio 1:10`), 32-byte values
//! (`--data-size 32`), keys drawn uniformly (`--key-pattern R:R`) or Zipfian (`zipf_theta`), keys
//! named `key:<n>` for `n` in `0..records` (memtier's own prefix is `memtier-`).
//!
//! **Versions.** Each stored value starts with the key's version in [`VERSION_DIGITS`] zero-padded
//! decimal digits, followed by data: loading stores version 0 and every set stores the previous
//! version plus one (a read-modify-write in `kv_set`), so a key's version counts the sets that
//! committed on it. The workload also counts the sets it *issues* per key ([`Kv::issued_sets`]).
//! A crash test checks after recovery that no version is below the last one a client saw
//! acknowledged and none is above the number of sets issued; [`versions`] reads every
//! (key, version) pair.
//!
//! The check: every key `key:0 .. key:<records-1>` exists and no other, every value has
//! `value_size_bytes` bytes and starts with a version, and no version exceeds the sets this
//! workload issued on its key.

use super::WorkloadOptions;
use super::ycsb::keys::KeyChooser;
use super::ycsb::{load_parallel, thread_seed};
use crate::bench::workload::{TxnCall, TxnGenerator, TxnRequest, Workload, WorkloadError};
use crate::db::{Database, Worker};
use crate::storage::{Direction, Key, KeyRange, ParamValue, Row, Value, ValueRef};
use crate::txn::Scan;
use rand::distr::Alphanumeric;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The source of the workload's schema and procedures.
pub const SOURCE: &str = include_str!("../../workloads/kv.proc");

/// The key name prefix.
pub const KEY_PREFIX: &str = "key:";
/// Decimal digits of the version at the start of each value.
pub const VERSION_DIGITS: usize = 12;
/// Default number of keys.
pub const RECORDS_DEFAULT: u64 = 1_000_000;
/// Default get fraction: memtier's 1:10 set:get ratio.
pub const READ_FRACTION_DEFAULT: f64 = 10.0 / 11.0;
/// Default value size (memtier's `--data-size`).
pub const VALUE_SIZE_DEFAULT: usize = 32;
/// Largest value size (the procedure language builds text up to 1 MiB).
const VALUE_SIZE_MAX: usize = 1 << 20;
/// Keys per loader transaction.
const LOAD_BATCH: u64 = 1000;
/// Rows per page when reading the whole table.
const SCAN_PAGE: usize = 10_000;
/// Distinct data strings each generator draws set data from (shared, not copied, per set).
const DATA_POOL: usize = 64;

/// The name of key `n`.
pub fn key_name(n: u64) -> String {
    format!("{KEY_PREFIX}{n}")
}

/// Key `n` as a text value, built on the stack (the generator's hot path: no formatting machinery).
fn key_text(n: u64) -> Value {
    let mut buf = [0u8; KEY_PREFIX.len() + 20];
    buf[..KEY_PREFIX.len()].copy_from_slice(KEY_PREFIX.as_bytes());
    let mut digits = [0u8; 20];
    let (mut rest, mut len) = (n, 0);
    loop {
        digits[len] = b'0' + (rest % 10) as u8;
        len += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[KEY_PREFIX.len() + i] = digits[len - 1 - i];
    }
    Value::text(std::str::from_utf8(&buf[..KEY_PREFIX.len() + len]).unwrap_or(KEY_PREFIX))
}

/// The `n` of a key name `key:<n>`.
pub fn key_index(name: &str) -> Option<u64> {
    name.strip_prefix(KEY_PREFIX)?.parse().ok()
}

/// The version a stored value starts with.
pub fn parse_version(value: &str) -> Option<u64> {
    let digits = value.get(..VERSION_DIGITS)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Calls `visit` on every row of `table` in primary-key order, a page of `page` rows per
/// transaction (so the whole is not one snapshot: run it when no writer runs). Returns the number
/// of rows.
pub fn scan_table(
    db: &Database,
    table: &str,
    page: usize,
    mut visit: impl FnMut(&Row) -> Result<(), WorkloadError>,
) -> Result<u64, WorkloadError> {
    let catalog = db.catalog();
    let t = catalog.table_by_name(table).ok_or_else(|| WorkloadError::Inconsistent(format!("no table {table}")))?;
    let mut worker = db.try_worker()?;
    let mut start: Bound<Key> = Bound::Unbounded;
    let mut count = 0u64;
    loop {
        let scan = Scan {
            table: t.id,
            index: None,
            range: KeyRange { start: start.clone(), end: Bound::Unbounded },
            direction: Direction::Forward,
            limit: page.max(1),
        };
        let (rows, _) = worker.run(100, |tx| tx.scan(&scan))?;
        for row in &rows {
            visit(row)?;
        }
        count += rows.len() as u64;
        match rows.last() {
            Some(last) if rows.len() >= scan.limit => {
                start = Bound::Excluded(t.schema.primary_key_of(last).map_err(crate::txn::TxnError::from)?);
            }
            _ => return Ok(count),
        }
    }
}

/// Every (key, version) pair of the `kv` table, in key order (text order: `key:10` before
/// `key:2`). A value without a parsable version is an error.
pub fn versions(db: &Database) -> Result<Vec<(String, u64)>, WorkloadError> {
    let mut out = Vec::new();
    scan_table(db, "kv", SCAN_PAGE, |row| {
        let (key, value) = key_value(row)?;
        let version = parse_version(value)
            .ok_or_else(|| WorkloadError::Inconsistent(format!("{key}: no version in {value:?}")))?;
        out.push((key.to_string(), version));
        Ok(())
    })?;
    Ok(out)
}

fn key_value(row: &Row) -> Result<(&str, &str), WorkloadError> {
    match (row.get(0).and_then(ValueRef::as_text), row.get(1).and_then(ValueRef::as_text)) {
        (Some(k), Some(v)) => Ok((k, v)),
        _ => Err(WorkloadError::Inconsistent(format!("kv row is not (text, text): {row:?}"))),
    }
}

/// The KV workload and its options.
#[derive(Debug)]
pub struct Kv {
    /// Number of keys.
    pub records: u64,
    /// Fraction of gets.
    pub read_fraction: f64,
    /// Zipfian skew; `None` is uniform.
    pub zipf_theta: Option<f64>,
    /// Bytes per value, version included (at least [`VERSION_DIGITS`]).
    pub value_size: usize,
    /// Sets issued per key, counted when a generator hands a set out (sized at load).
    issued: OnceLock<Arc<[AtomicU64]>>,
}

impl Default for Kv {
    fn default() -> Kv {
        Kv::new(RECORDS_DEFAULT, READ_FRACTION_DEFAULT, None, VALUE_SIZE_DEFAULT)
    }
}

impl Kv {
    /// A KV workload with these options.
    pub fn new(records: u64, read_fraction: f64, zipf_theta: Option<f64>, value_size: usize) -> Kv {
        Kv { records, read_fraction, zipf_theta, value_size, issued: OnceLock::new() }
    }

    /// The workload with the KV fields of `options` (`records`, `read_fraction`, `zipf_theta`,
    /// `value_size_bytes`) over memtier's defaults.
    pub fn from_options(options: &WorkloadOptions) -> Result<Kv, WorkloadError> {
        let w = Kv::new(
            options.records.unwrap_or(RECORDS_DEFAULT),
            options.read_fraction.unwrap_or(READ_FRACTION_DEFAULT),
            options.zipf_theta,
            options.value_size_bytes.unwrap_or(VALUE_SIZE_DEFAULT),
        );
        w.validate()?;
        Ok(w)
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Options(m));
        if self.records == 0 || self.records > usize::MAX as u64 / 8 {
            return bad(format!("kv needs at least 1 record, got {}", self.records));
        }
        if !(0.0..=1.0).contains(&self.read_fraction) {
            return bad(format!("read fraction must be in 0..=1, got {}", self.read_fraction));
        }
        if !(VERSION_DIGITS..=VALUE_SIZE_MAX).contains(&self.value_size) {
            return bad(format!(
                "kv value size must be {VERSION_DIGITS}..={VALUE_SIZE_MAX} bytes, got {}",
                self.value_size
            ));
        }
        KeyChooser::new(self.records, self.zipf_theta).map(|_| ())
    }

    fn issued(&self) -> &Arc<[AtomicU64]> {
        self.issued.get_or_init(|| (0..self.records).map(|_| AtomicU64::new(0)).collect())
    }

    /// The number of sets issued so far on each key `0..records` (by every generator of this
    /// workload): an upper bound on each key's version.
    pub fn issued_sets(&self) -> Vec<u64> {
        self.issued().iter().map(|c| c.load(Ordering::Acquire)).collect()
    }

    fn initial_value(&self, rng: &mut SmallRng) -> String {
        let data: String =
            rng.sample_iter(Alphanumeric).take(self.value_size - VERSION_DIGITS).map(char::from).collect();
        format!("{:0width$}{data}", 0, width = VERSION_DIGITS)
    }

    fn load_batch(&self, worker: &mut Worker, lo: u64, hi: u64) -> Result<(), WorkloadError> {
        let mut rng = SmallRng::seed_from_u64(lo);
        let keys: Vec<Value> = (lo..hi).map(|n| Value::text(&key_name(n))).collect();
        let vals: Vec<Value> = (lo..hi).map(|_| Value::text(&self.initial_value(&mut rng))).collect();
        worker.call_retrying("kv_load", &[ParamValue::from(keys), ParamValue::from(vals)], 100)?;
        Ok(())
    }

    fn check_row(&self, row: &Row, seen: &mut [bool], issued: &[u64]) -> Result<(), WorkloadError> {
        let (key, value) = key_value(row)?;
        let fail = |m: String| Err(WorkloadError::Inconsistent(format!("{key}: {m}")));
        let Some(n) = key_index(key).filter(|&n| n < self.records) else {
            return fail("not a key of this workload".into());
        };
        seen[n as usize] = true;
        if value.len() != self.value_size {
            return fail(format!("value of {} bytes, expected {}", value.len(), self.value_size));
        }
        let Some(version) = parse_version(value) else {
            return fail(format!("no version in {value:?}"));
        };
        if version > issued[n as usize] {
            return fail(format!("version {version} above the {} sets issued", issued[n as usize]));
        }
        Ok(())
    }
}

impl Workload for Kv {
    fn name(&self) -> &str {
        "kv"
    }

    fn txn_kinds(&self) -> Vec<String> {
        vec!["get".into(), "set".into()]
    }

    fn sources(&self) -> Vec<(String, String)> {
        vec![("kv.proc".into(), SOURCE.into())]
    }

    fn load(&self, db: &Database, threads: usize) -> Result<(), WorkloadError> {
        self.validate()?;
        self.issued();
        load_parallel(db, threads, self.records, LOAD_BATCH, |w, lo, hi| self.load_batch(w, lo, hi))
    }

    fn generator(&self, db: &Database, thread: usize, _threads: usize, seed: u64) -> Box<dyn TxnGenerator> {
        let registry = db.procedures();
        let records = self.records.max(1);
        let mut rng = SmallRng::seed_from_u64(thread_seed(seed, thread));
        let data_len = self.value_size.saturating_sub(VERSION_DIGITS);
        let pool = (0..DATA_POOL)
            .map(|_| {
                let data: String = (&mut rng).sample_iter(Alphanumeric).take(data_len).map(char::from).collect();
                ParamValue::Scalar(Value::text(&data))
            })
            .collect();
        Box::new(KvGenerator {
            keys: KeyChooser::new(records, self.zipf_theta).unwrap_or_else(|_| KeyChooser::uniform(records)),
            rng,
            read_fraction: if self.read_fraction.is_nan() { 0.0 } else { self.read_fraction.clamp(0.0, 1.0) },
            pool,
            issued: Arc::clone(self.issued()),
            get_id: registry.id_of("kv_get").unwrap_or(u32::MAX),
            set_id: registry.id_of("kv_set").unwrap_or(u32::MAX),
        })
    }

    fn check(&self, db: &Database) -> Result<(), WorkloadError> {
        let issued = self.issued_sets();
        let mut seen = vec![false; self.records as usize];
        let rows = scan_table(db, "kv", SCAN_PAGE, |row| self.check_row(row, &mut seen, &issued))?;
        if let Some(missing) = seen.iter().position(|&s| !s) {
            return Err(WorkloadError::Inconsistent(format!("{} is missing", key_name(missing as u64))));
        }
        if rows != self.records {
            return Err(WorkloadError::Inconsistent(format!("kv has {rows} rows, expected {}", self.records)));
        }
        Ok(())
    }
}

/// One worker's gets and sets.
struct KvGenerator {
    keys: KeyChooser,
    rng: SmallRng,
    read_fraction: f64,
    /// Random alphanumeric data values; a set sends one of them.
    pool: Vec<ParamValue>,
    issued: Arc<[AtomicU64]>,
    get_id: u32,
    set_id: u32,
}

impl TxnGenerator for KvGenerator {
    fn next_request(&mut self) -> TxnRequest {
        let n = self.keys.sample(&mut self.rng);
        let key = ParamValue::Scalar(key_text(n));
        if self.rng.random_bool(self.read_fraction) {
            return TxnRequest { kind: 0, call: TxnCall::Procedure { id: self.get_id, args: vec![key] } };
        }
        if let Some(count) = self.issued.get(n as usize) {
            count.fetch_add(1, Ordering::AcqRel);
        }
        let data = self.pool[self.rng.random_range(0..self.pool.len())].clone();
        TxnRequest { kind: 1, call: TxnCall::Procedure { id: self.set_id, args: vec![key, data] } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_versions_parse() {
        assert_eq!(key_index(&key_name(42)), Some(42));
        for n in [0, 7, 10, 99, 12_345, u64::MAX] {
            assert_eq!(key_text(n), Value::text(&key_name(n)));
        }
        assert_eq!(key_index("memtier-1"), None);
        assert_eq!(parse_version("000000000017abcdef"), Some(17));
        assert_eq!(parse_version("00000000001x"), None);
        assert_eq!(parse_version("0001"), None);
    }

    #[test]
    fn bad_options_are_refused() {
        let o = |f: fn(&mut WorkloadOptions)| {
            let mut o = WorkloadOptions::default();
            f(&mut o);
            Kv::from_options(&o)
        };
        assert!(o(|_| {}).is_ok_and(|w| w.value_size == 32 && (w.read_fraction - 10.0 / 11.0).abs() < 1e-12));
        assert!(o(|o| o.value_size_bytes = Some(4)).is_err());
        assert!(o(|o| o.records = Some(0)).is_err());
        assert!(o(|o| o.read_fraction = Some(-0.1)).is_err());
        assert!(o(|o| o.zipf_theta = Some(-1.0)).is_err());
    }
}
