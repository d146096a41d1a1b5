//! Smallbank (`workloads/smallbank.proc`): the banking benchmark PACMAN §6 evaluates (with TPC-C),
//! as H-Store and OLTP-Bench define it.
//!
//! Three tables keyed by customer id — `accounts(custid, name)`, `savings(custid, bal)` and
//! `checking(custid, bal)` — and six transactions, with OLTP-Bench's default weights and
//! parameters (`SmallBankConstants`, `sample_smallbank_config.xml`):
//!
//! | transaction | weight | accounts | parameter |
//! |---|---|---|---|
//! | Amalgamate | 15 | 2 (by id) | — |
//! | Balance | 15 | 1 (by name) | — |
//! | DepositChecking | 15 | 1 (by name) | 1.3 |
//! | SendPayment | 25 | 2 (by id) | 5.0 |
//! | TransactSavings | 15 | 1 (by name) | 20.20 |
//! | WriteCheck | 15 | 1 (by name) | 5.0 |
//!
//! Initial balances are integers in `[10_000, 50_000]` (OLTP-Bench's `MIN_BALANCE`,
//! `MAX_BALANCE`), derived from the customer id by a hash, so the initial total is known without
//! reading the database. Names are the id in 16 zero-padded digits (OLTP-Bench pads to the name
//! column's width).
//!
//! **Hotspot.** A fraction [`Smallbank::hotspot_fraction`] of the transactions draws all its
//! customers uniformly from the first [`Smallbank::hotspot_accounts`] ids; the rest draw uniformly
//! from all accounts. The defaults, 90 % of transactions on 100 accounts, are H-Store's SmallBank
//! client constants (`PROB_ACCOUNT_HOTSPOT = 90`, `HOTSPOT_FIXED_SIZE = 100`). OLTP-Bench's
//! worker ignores its hotspot constants and draws uniformly: set `hotspot_fraction` to 0 for that.
//!
//! **Mixes.** `WorkloadOptions::mix` selects the transaction kinds: `None`, `standard` or `all`
//! run the six above; `transfers` runs only Amalgamate and SendPayment (weights 15:25), which move
//! money between customers without creating or destroying any; a comma-separated list of kind
//! names (`balance,send-payment`) runs those kinds with their standard relative weights.
//!
//! **Checks.** Always: every table has exactly one row per customer `0..accounts` and the sum of
//! all balances is finite. When the mix only has money-conserving kinds (Amalgamate, SendPayment,
//! Balance): the total of savings plus checking equals the initial total *exactly* — every
//! initial balance and every amount those kinds move is an integer-valued float far below 2^53,
//! so no rounding happens in the transactions or in the check's sums.

use super::WorkloadOptions;
use super::ycsb::{load_parallel, thread_seed};
use crate::bench::workload::{TxnCall, TxnGenerator, TxnRequest, Workload, WorkloadError};
use crate::db::Database;
use crate::storage::{ParamValue, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The source of the workload's schema and procedures.
pub const SOURCE: &str = include_str!("../../workloads/smallbank.proc");

/// Default number of customers (sized for a 2-core machine; OLTP-Bench's scale 1 is 1 000 000).
pub const ACCOUNTS_DEFAULT: u32 = 100_000;
/// Default fraction of transactions on the hotspot (H-Store's `PROB_ACCOUNT_HOTSPOT`).
pub const HOTSPOT_FRACTION_DEFAULT: f64 = 0.9;
/// Default hotspot size (H-Store's and OLTP-Bench's `HOTSPOT_FIXED_SIZE`).
pub const HOTSPOT_ACCOUNTS_DEFAULT: u32 = 100;
/// Smallest initial balance (OLTP-Bench's `MIN_BALANCE`).
pub const BALANCE_MIN: u64 = 10_000;
/// Largest initial balance (OLTP-Bench's `MAX_BALANCE`).
pub const BALANCE_MAX: u64 = 50_000;
/// SendPayment's amount (OLTP-Bench's `PARAM_SEND_PAYMENT_AMOUNT`).
pub const SEND_PAYMENT_AMOUNT: f64 = 5.0;
/// DepositChecking's amount (OLTP-Bench's `PARAM_DEPOSIT_CHECKING_AMOUNT`).
pub const DEPOSIT_CHECKING_AMOUNT: f64 = 1.3;
/// TransactSavings's amount (OLTP-Bench's `PARAM_TRANSACT_SAVINGS_AMOUNT`).
pub const TRANSACT_SAVINGS_AMOUNT: f64 = 20.20;
/// WriteCheck's amount (OLTP-Bench's `PARAM_WRITE_CHECK_AMOUNT`).
pub const WRITE_CHECK_AMOUNT: f64 = 5.0;

/// Customers per loader transaction.
const LOAD_BATCH: u64 = 500;
/// Customers per call of the check's `sb_totals` (below the 65 536-row scan limit).
const CHECK_CHUNK: u32 = 50_000;

/// The six Smallbank transactions, in OLTP-Bench's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnKind {
    /// Moves all of one customer's funds into another's checking.
    Amalgamate,
    /// Reads a customer's total balance.
    Balance,
    /// Deposits into checking.
    DepositChecking,
    /// Moves money between two checking accounts.
    SendPayment,
    /// Withdraws from savings.
    TransactSavings,
    /// Writes a check against checking (with an overdraft penalty).
    WriteCheck,
}

impl TxnKind {
    /// All kinds; a kind's position here is its [`TxnRequest::kind`].
    pub const ALL: [TxnKind; 6] = [
        TxnKind::Amalgamate,
        TxnKind::Balance,
        TxnKind::DepositChecking,
        TxnKind::SendPayment,
        TxnKind::TransactSavings,
        TxnKind::WriteCheck,
    ];

    /// The kind's name in mixes and statistics.
    pub fn name(self) -> &'static str {
        match self {
            TxnKind::Amalgamate => "amalgamate",
            TxnKind::Balance => "balance",
            TxnKind::DepositChecking => "deposit-checking",
            TxnKind::SendPayment => "send-payment",
            TxnKind::TransactSavings => "transact-savings",
            TxnKind::WriteCheck => "write-check",
        }
    }

    /// The stored procedure that runs it.
    pub fn procedure(self) -> &'static str {
        match self {
            TxnKind::Amalgamate => "sb_amalgamate",
            TxnKind::Balance => "sb_balance",
            TxnKind::DepositChecking => "sb_deposit_checking",
            TxnKind::SendPayment => "sb_send_payment",
            TxnKind::TransactSavings => "sb_transact_savings",
            TxnKind::WriteCheck => "sb_write_check",
        }
    }

    /// Its weight in the standard mix (percent).
    pub fn weight(self) -> u32 {
        match self {
            TxnKind::SendPayment => 25,
            _ => 15,
        }
    }

    /// Whether it leaves the total of all balances unchanged.
    pub fn conserves_money(self) -> bool {
        matches!(self, TxnKind::Amalgamate | TxnKind::SendPayment | TxnKind::Balance)
    }

    /// The kind called `name` (`_` may stand for `-`).
    pub fn from_name(name: &str) -> Option<TxnKind> {
        let name = name.trim().to_ascii_lowercase().replace('_', "-");
        TxnKind::ALL.into_iter().find(|k| k.name() == name)
    }

    fn index(self) -> usize {
        TxnKind::ALL.iter().position(|&k| k == self).unwrap_or(0)
    }
}

/// Parses a mix: `standard`/`all`, `transfers`, or a comma-separated list of kind names.
pub fn parse_mix(mix: &str) -> Result<Vec<TxnKind>, WorkloadError> {
    match mix.trim().to_ascii_lowercase().as_str() {
        "" | "standard" | "all" => return Ok(TxnKind::ALL.to_vec()),
        "transfers" => return Ok(vec![TxnKind::Amalgamate, TxnKind::SendPayment]),
        _ => {}
    }
    let mut kinds = Vec::new();
    for name in mix.split(',') {
        let kind = TxnKind::from_name(name).ok_or_else(|| {
            let known: Vec<_> = TxnKind::ALL.iter().map(|k| k.name()).collect();
            WorkloadError::Options(format!(
                "unknown smallbank transaction {name:?}; known: standard, transfers, {}",
                known.join(", ")
            ))
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// The Smallbank workload and its options.
#[derive(Clone, Debug)]
pub struct Smallbank {
    /// Number of customers (ids `0..accounts`). At least 2.
    pub accounts: u32,
    /// Fraction of transactions whose customers come from the hotspot (0..=1).
    pub hotspot_fraction: f64,
    /// Size of the hotspot: customers `0..hotspot_accounts` (capped at `accounts`).
    pub hotspot_accounts: u32,
    /// The transaction kinds to run, with their standard relative weights.
    pub mix: Vec<TxnKind>,
}

impl Default for Smallbank {
    fn default() -> Smallbank {
        Smallbank {
            accounts: ACCOUNTS_DEFAULT,
            hotspot_fraction: HOTSPOT_FRACTION_DEFAULT,
            hotspot_accounts: HOTSPOT_ACCOUNTS_DEFAULT,
            mix: TxnKind::ALL.to_vec(),
        }
    }
}

/// What the check's scan found.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    /// Rows of `accounts`.
    pub accounts: u64,
    /// Rows of `savings`.
    pub savings: u64,
    /// Rows of `checking`.
    pub checking: u64,
    /// Sum of savings balances.
    pub savings_total: f64,
    /// Sum of checking balances.
    pub checking_total: f64,
}

impl Totals {
    /// Savings plus checking.
    pub fn money(&self) -> f64 {
        self.savings_total + self.checking_total
    }
}

/// The customer name of id `id`.
pub fn customer_name(id: u32) -> String {
    format!("{id:016}")
}

/// The initial balance of customer `id` in `savings` (`checking == false`) or `checking`.
pub fn initial_balance(id: u32, checking: bool) -> f64 {
    let h = splitmix64((u64::from(id) << 1) | u64::from(checking));
    (BALANCE_MIN + h % (BALANCE_MAX - BALANCE_MIN + 1)) as f64
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

fn float(v: f64) -> ParamValue {
    ParamValue::Scalar(Value::Float(v))
}

fn text(s: &str) -> ParamValue {
    ParamValue::Scalar(Value::text(s))
}

impl Smallbank {
    /// The workload with the Smallbank fields of `options` (`accounts`, `hotspot_fraction`,
    /// `hotspot_accounts`, `mix`) over the defaults.
    pub fn from_options(options: &WorkloadOptions) -> Result<Smallbank, WorkloadError> {
        let defaults = Smallbank::default();
        let w = Smallbank {
            accounts: options.accounts.unwrap_or(defaults.accounts),
            hotspot_fraction: options.hotspot_fraction.unwrap_or(defaults.hotspot_fraction),
            hotspot_accounts: options.hotspot_accounts.unwrap_or(defaults.hotspot_accounts),
            mix: options.mix.as_deref().map_or(Ok(defaults.mix), parse_mix)?,
        };
        w.validate()?;
        Ok(w)
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Options(m));
        if self.accounts < 2 {
            return bad(format!("smallbank needs at least 2 accounts, got {}", self.accounts));
        }
        if !(0.0..=1.0).contains(&self.hotspot_fraction) {
            return bad(format!("hotspot fraction must be in 0..=1, got {}", self.hotspot_fraction));
        }
        if self.hotspot_fraction > 0.0 && self.hotspot_accounts < 2 {
            return bad(format!("the hotspot needs at least 2 accounts, got {}", self.hotspot_accounts));
        }
        if self.mix.is_empty() {
            return bad("the smallbank mix is empty".into());
        }
        Ok(())
    }

    /// Whether every kind of the mix conserves the total balance (so the check verifies it).
    pub fn conserves_money(&self) -> bool {
        self.mix.iter().all(|k| k.conserves_money())
    }

    /// The total of all balances right after loading.
    pub fn initial_money(&self) -> f64 {
        (0..self.accounts).map(|id| initial_balance(id, false) + initial_balance(id, true)).sum()
    }

    /// Counts and sums every table, in chunks of customers.
    pub fn totals(&self, db: &Database) -> Result<Totals, WorkloadError> {
        let mut w = db.try_worker()?;
        let mut t = Totals::default();
        let mut lo = 0u32;
        while lo < self.accounts {
            let hi = lo.saturating_add(CHECK_CHUNK).min(self.accounts);
            let out = w.call_retrying("sb_totals", &[int(i64::from(lo)), int(i64::from(hi))], 100)?;
            let v = &out.values;
            let count = |i: usize| v.get(i).and_then(Value::as_int).unwrap_or(-1);
            let sum = |i: usize| v.get(i).and_then(Value::as_float).unwrap_or(f64::NAN);
            let expected = i64::from(hi - lo);
            for (i, table) in ["accounts", "savings", "checking"].into_iter().enumerate() {
                if count(i) != expected {
                    return Err(WorkloadError::Inconsistent(format!(
                        "{table} has {} rows for customers {lo}..{hi}, expected {expected}",
                        count(i)
                    )));
                }
            }
            t.accounts += expected as u64;
            t.savings += expected as u64;
            t.checking += expected as u64;
            t.savings_total += sum(3);
            t.checking_total += sum(4);
            lo = hi;
        }
        Ok(t)
    }

    fn check_row_counts(&self, db: &Database) -> Result<(), WorkloadError> {
        let catalog = db.catalog();
        for table in ["accounts", "savings", "checking"] {
            let len = catalog.table_by_name(table).map_or(0, |t| t.len());
            if len != self.accounts as usize {
                return Err(WorkloadError::Inconsistent(format!("{table} has {len} rows, expected {}", self.accounts)));
            }
        }
        Ok(())
    }

    fn load_batch(worker: &mut crate::db::Worker, lo: u64, hi: u64) -> Result<(), WorkloadError> {
        let ids: Vec<u32> = (lo..hi).filter_map(|id| u32::try_from(id).ok()).collect();
        let args = [
            ParamValue::from(ids.iter().map(|&id| Value::Int(i64::from(id))).collect::<Vec<_>>()),
            ParamValue::from(ids.iter().map(|&id| Value::text(&customer_name(id))).collect::<Vec<_>>()),
            ParamValue::from(ids.iter().map(|&id| Value::Float(initial_balance(id, false))).collect::<Vec<_>>()),
            ParamValue::from(ids.iter().map(|&id| Value::Float(initial_balance(id, true))).collect::<Vec<_>>()),
        ];
        worker.call_retrying("sb_load", &args, 100)?;
        Ok(())
    }
}

impl Workload for Smallbank {
    fn name(&self) -> &str {
        "smallbank"
    }

    fn txn_kinds(&self) -> Vec<String> {
        TxnKind::ALL.iter().map(|k| k.name().to_string()).collect()
    }

    fn sources(&self) -> Vec<(String, String)> {
        vec![("smallbank.proc".into(), SOURCE.into())]
    }

    fn load(&self, db: &Database, threads: usize) -> Result<(), WorkloadError> {
        self.validate()?;
        load_parallel(db, threads, u64::from(self.accounts), LOAD_BATCH, Smallbank::load_batch)
    }

    fn generator(&self, db: &Database, thread: usize, _threads: usize, seed: u64) -> Box<dyn TxnGenerator> {
        let registry = db.procedures();
        let mut cumulative = Vec::new();
        let mut total = 0u32;
        for &kind in &self.mix {
            total += kind.weight();
            cumulative.push((total, kind, registry.id_of(kind.procedure()).unwrap_or(u32::MAX)));
        }
        Box::new(SmallbankGenerator {
            rng: SmallRng::seed_from_u64(thread_seed(seed, thread)),
            cumulative,
            total_weight: total.max(1),
            accounts: self.accounts.max(2),
            hotspot_fraction: self.hotspot_fraction,
            hotspot: self.hotspot_accounts.clamp(2, self.accounts.max(2)),
        })
    }

    fn check(&self, db: &Database) -> Result<(), WorkloadError> {
        self.check_row_counts(db)?;
        let t = self.totals(db)?;
        if !t.money().is_finite() {
            return Err(WorkloadError::Inconsistent(format!(
                "balances are not finite: savings total {}, checking total {}",
                t.savings_total, t.checking_total
            )));
        }
        if self.conserves_money() {
            let expected = self.initial_money();
            if t.money() != expected {
                return Err(WorkloadError::Inconsistent(format!(
                    "total money {} (savings {} + checking {}), expected {expected}",
                    t.money(),
                    t.savings_total,
                    t.checking_total
                )));
            }
        }
        Ok(())
    }
}

/// One worker's Smallbank transactions.
struct SmallbankGenerator {
    rng: SmallRng,
    /// (cumulative weight, kind, procedure id) per kind of the mix.
    cumulative: Vec<(u32, TxnKind, u32)>,
    total_weight: u32,
    accounts: u32,
    hotspot_fraction: f64,
    hotspot: u32,
}

impl SmallbankGenerator {
    /// One or two distinct customers, all from the hotspot or all from every account.
    fn customers(&mut self) -> (u32, u32) {
        let n = if self.rng.random_bool(self.hotspot_fraction) { self.hotspot } else { self.accounts };
        let a = self.rng.random_range(0..n);
        let b = (a + self.rng.random_range(1..n)) % n;
        (a, b)
    }
}

impl TxnGenerator for SmallbankGenerator {
    fn next_request(&mut self) -> TxnRequest {
        let pick = self.rng.random_range(0..self.total_weight);
        let (_, kind, id) = self.cumulative.iter().copied().find(|&(c, _, _)| pick < c).unwrap_or(self.cumulative[0]);
        let (a, b) = self.customers();
        let args = match kind {
            TxnKind::Amalgamate => vec![int(i64::from(a)), int(i64::from(b))],
            TxnKind::SendPayment => vec![int(i64::from(a)), int(i64::from(b)), float(SEND_PAYMENT_AMOUNT)],
            TxnKind::Balance => vec![text(&customer_name(a))],
            TxnKind::DepositChecking => vec![text(&customer_name(a)), float(DEPOSIT_CHECKING_AMOUNT)],
            TxnKind::TransactSavings => vec![text(&customer_name(a)), float(TRANSACT_SAVINGS_AMOUNT)],
            TxnKind::WriteCheck => vec![text(&customer_name(a)), float(WRITE_CHECK_AMOUNT)],
        };
        TxnRequest { kind: kind.index(), call: TxnCall::Procedure { id, args } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse() {
        assert_eq!(parse_mix("standard").unwrap().len(), 6);
        assert_eq!(parse_mix("transfers").unwrap(), vec![TxnKind::Amalgamate, TxnKind::SendPayment]);
        assert_eq!(parse_mix("balance, send_payment").unwrap(), vec![TxnKind::Balance, TxnKind::SendPayment]);
        assert!(parse_mix("balance,nope").is_err());
        assert_eq!(TxnKind::ALL.iter().map(|k| k.weight()).sum::<u32>(), 100);
    }

    #[test]
    fn initial_balances_are_integers_in_range() {
        for id in 0..1000 {
            for checking in [false, true] {
                let b = initial_balance(id, checking);
                assert!(b.fract() == 0.0 && (BALANCE_MIN as f64..=BALANCE_MAX as f64).contains(&b));
            }
        }
    }

    #[test]
    fn bad_options_are_refused() {
        let opts = |f: fn(&mut WorkloadOptions)| {
            let mut o = WorkloadOptions::default();
            f(&mut o);
            Smallbank::from_options(&o)
        };
        assert!(opts(|o| o.accounts = Some(1)).is_err());
        assert!(opts(|o| o.hotspot_fraction = Some(1.5)).is_err());
        assert!(opts(|o| o.hotspot_accounts = Some(1)).is_err());
        assert!(opts(|o| o.mix = Some("transfers".into())).is_ok_and(|w| w.conserves_money()));
        assert!(opts(|_| {}).is_ok_and(|w| !w.conserves_money()));
    }
}
