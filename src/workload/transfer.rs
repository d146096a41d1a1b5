//! The transfer workload (`workloads/transfer.proc`): money moves between random accounts, so the
//! total balance is invariant. Small and quick; the smoke test of every scheme.

use crate::bench::workload::{TxnCall, TxnGenerator, TxnRequest, Workload, WorkloadError};
use crate::db::Database;
use crate::storage::{ParamValue, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The source of the workload's schema and procedures.
pub const SOURCE: &str = include_str!("../../workloads/transfer.proc");

/// Options of the transfer workload.
#[derive(Clone, Debug)]
pub struct Transfer {
    /// Number of accounts (fewer means more conflicts). At least 2.
    pub accounts: u32,
    /// Initial balance of each account.
    pub initial_balance: i64,
}

impl Default for Transfer {
    fn default() -> Transfer {
        Transfer { accounts: 10_000, initial_balance: 1_000 }
    }
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

impl Workload for Transfer {
    fn name(&self) -> &str {
        "transfer"
    }

    fn txn_kinds(&self) -> Vec<String> {
        vec!["transfer".into()]
    }

    fn sources(&self) -> Vec<(String, String)> {
        vec![("transfer.proc".into(), SOURCE.into())]
    }

    fn load(&self, db: &Database, _threads: usize) -> Result<(), WorkloadError> {
        if self.accounts < 2 {
            return Err(WorkloadError::Options(format!("transfer needs at least 2 accounts, got {}", self.accounts)));
        }
        let mut w = db.worker();
        for id in 0..self.accounts {
            let args = [int(i64::from(id)), int(i64::from(id % 16)), int(self.initial_balance)];
            w.call_retrying("open_account", &args, 100)?;
        }
        Ok(())
    }

    fn generator(&self, db: &Database, thread: usize, _threads: usize, seed: u64) -> Box<dyn TxnGenerator> {
        let id = db.procedures().id_of("transfer").unwrap_or(u32::MAX);
        let rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(thread as u64));
        Box::new(TransferGenerator { rng, id, accounts: self.accounts.max(2) })
    }

    fn check(&self, db: &Database) -> Result<(), WorkloadError> {
        let mut w = db.worker();
        let mut total = 0i64;
        for id in 0..self.accounts {
            let out = w.call_retrying("balance", &[int(i64::from(id))], 100)?;
            total += out.values.first().and_then(Value::as_int).unwrap_or(0);
        }
        let expected = i64::from(self.accounts) * self.initial_balance;
        if total != expected {
            return Err(WorkloadError::Inconsistent(format!("total balance {total}, expected {expected}")));
        }
        Ok(())
    }
}

struct TransferGenerator {
    rng: StdRng,
    id: u32,
    accounts: u32,
}

impl TxnGenerator for TransferGenerator {
    fn next_request(&mut self) -> TxnRequest {
        let src = self.rng.random_range(0..self.accounts);
        let dst = (src + self.rng.random_range(1..self.accounts)) % self.accounts;
        let args = vec![int(i64::from(src)), int(i64::from(dst)), int(self.rng.random_range(1..100))];
        TxnRequest { kind: 0, call: TxnCall::Procedure { id: self.id, args } }
    }
}
