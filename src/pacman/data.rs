//! Data dependencies (PACMAN §4.1.1): two operations are data-dependent when they access the same
//! table and at least one of them writes it. Unlike a flow dependency this is symmetric and only a
//! *may-happen-before*: which of the two runs first is decided by program order inside a call and
//! by commit order across calls.

use super::{OpId, Operation};

/// The data dependencies among the operations of one procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataDependencies {
    /// Every data-dependent pair `(p, q)` with `p < q`, sorted.
    pairs: Vec<(OpId, OpId)>,
}

impl DataDependencies {
    /// The data dependencies among `ops`.
    pub fn of(ops: &[Operation]) -> DataDependencies {
        let mut pairs = Vec::new();
        for (i, a) in ops.iter().enumerate() {
            for (j, b) in ops.iter().enumerate().skip(i + 1) {
                if data_dependent(a, b) {
                    pairs.push((OpId(i as u32), OpId(j as u32)));
                }
            }
        }
        DataDependencies { pairs }
    }

    /// Every pair `(p, q)`, `p < q`, in order.
    pub fn pairs(&self) -> &[(OpId, OpId)] {
        &self.pairs
    }
}

/// PACMAN's data dependency between two operations (of the same or of different procedures).
pub fn data_dependent(a: &Operation, b: &Operation) -> bool {
    a.table == b.table && (a.writes() || b.writes())
}
