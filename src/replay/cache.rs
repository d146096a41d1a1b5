//! The compiled-plan cache (thesis §3.4.2): plans keyed by (table, operation, column set), each
//! with its frame, valid for one catalog version.
//!
//! A lookup is an index by table id and operation, then a comparison of column sets among the
//! few plans of that slot (one, for value logs, which always carry whole rows): no hashing per
//! record. The cache is per replay thread, so it takes no lock.

use super::compiled::Plan;
use super::{RedoOp, ReplayError};
use crate::proc::runtime::Frame;
use crate::storage::schema::COLUMNS_MAX;
use crate::storage::table::TABLES_MAX;
use crate::storage::{Catalog, Table, TableSchema};

/// The most plans one cache holds; past it, the cache is dropped and refilled on demand.
pub const PLANS_MAX: usize = 16_384;

const WORDS: usize = COLUMNS_MAX.div_ceil(64);

/// A set of column positions (a plan's parameters other than the key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ColumnSet {
    bits: [u64; WORDS],
}

impl ColumnSet {
    /// No columns.
    pub fn empty() -> ColumnSet {
        ColumnSet::default()
    }

    /// Columns `0..count`.
    pub fn all(count: usize) -> ColumnSet {
        assert!(count <= COLUMNS_MAX, "a table has at most {COLUMNS_MAX} columns");
        let mut set = ColumnSet::empty();
        for (w, word) in set.bits.iter_mut().enumerate() {
            let below = count.saturating_sub(w * 64).min(64);
            *word = if below == 64 { u64::MAX } else { (1u64 << below) - 1 };
        }
        set
    }

    /// Every column of `schema` that is not in its primary key.
    pub fn non_key(schema: &TableSchema) -> ColumnSet {
        let mut set = ColumnSet::all(schema.columns.len());
        for &p in &schema.primary_key {
            set.bits[p / 64] &= !(1u64 << (p % 64));
        }
        set
    }

    /// Adds column `position`.
    pub fn insert(&mut self, position: usize) {
        assert!(position < COLUMNS_MAX);
        self.bits[position / 64] |= 1u64 << (position % 64);
    }

    /// Whether column `position` is in the set.
    pub fn contains(&self, position: usize) -> bool {
        position < COLUMNS_MAX && self.bits[position / 64] & (1u64 << (position % 64)) != 0
    }

    /// The positions, ascending. Walks the set bits, not every possible column: a compiled
    /// column patch takes its replaced values out by these positions, once per record.
    pub fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                let bit = (rest != 0).then(|| rest.trailing_zeros() as usize)?;
                rest &= rest - 1;
                Some(w * 64 + bit)
            })
        })
    }

    /// How many columns.
    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }
}

/// A compiled plan and the frame its parameters are bound into.
pub struct CachedPlan {
    /// The plan.
    pub plan: Plan,
    /// Its frame, reused by every record.
    pub frame: Frame,
}

/// One replay thread's compiled plans.
#[derive(Default)]
pub struct PlanCache {
    /// The catalog version the plans were compiled against (`None`: nothing cached yet).
    version: Option<u64>,
    /// By table id, then by [`RedoOp::index`]: the plans of each column set.
    by_table: Vec<[Vec<(ColumnSet, CachedPlan)>; RedoOp::COUNT]>,
    /// By table id, then by [`RedoOp::index`]: where the plan of the whole-row column set is (value
    /// logs carry whole rows, so this is the plan of every record), found without a comparison.
    whole_row: Vec<[Option<usize>; RedoOp::COUNT]>,
    plans: usize,
    compiled: u64,
    invalidations: u64,
}

impl PlanCache {
    /// The plan for (`table`, `op`, `columns`) against `catalog`, compiled if not cached. A
    /// catalog whose version differs from the cached plans' drops them all first.
    pub fn plan(
        &mut self,
        catalog: &Catalog,
        table: &Table,
        op: RedoOp,
        columns: ColumnSet,
    ) -> Result<&mut CachedPlan, ReplayError> {
        let slot = self.slot(catalog, table);
        let found = self.by_table[slot][op.index()].iter().position(|(c, _)| *c == columns);
        let at = match found {
            Some(at) => at,
            None => self.compile(catalog, table, op, columns)?,
        };
        Ok(&mut self.by_table[slot][op.index()][at].1)
    }

    /// The plan for (`table`, `op`) and the column set of a whole row for `op` (`columns`, computed
    /// only when the plan is not cached yet): a record of a value log finds its plan by two
    /// indexes.
    #[inline]
    pub fn whole_row_plan(
        &mut self,
        catalog: &Catalog,
        table: &Table,
        op: RedoOp,
        columns: impl FnOnce() -> ColumnSet,
    ) -> Result<&mut CachedPlan, ReplayError> {
        let slot = self.slot(catalog, table);
        let at = match self.whole_row[slot][op.index()] {
            Some(at) => at,
            None => {
                let columns = columns();
                let found = self.by_table[slot][op.index()].iter().position(|(c, _)| *c == columns);
                let at = match found {
                    Some(at) => at,
                    None => self.compile(catalog, table, op, columns)?,
                };
                self.whole_row[slot][op.index()] = Some(at);
                at
            }
        };
        Ok(&mut self.by_table[slot][op.index()][at].1)
    }

    /// `table`'s slot, after dropping every plan if the catalog's version changed.
    #[inline]
    fn slot(&mut self, catalog: &Catalog, table: &Table) -> usize {
        let slot = table.id as usize;
        if self.version == Some(catalog.version()) && slot < self.by_table.len() {
            return slot;
        }
        self.slot_after_change(catalog, slot)
    }

    /// [`Self::slot`] when the catalog's version changed or the table has no slot yet.
    #[cold]
    fn slot_after_change(&mut self, catalog: &Catalog, slot: usize) -> usize {
        if self.version != Some(catalog.version()) {
            if self.version.is_some() {
                self.invalidations += 1;
            }
            self.clear();
            self.version = Some(catalog.version());
        }
        assert!(slot < TABLES_MAX, "table ids are below {TABLES_MAX}");
        if slot >= self.by_table.len() {
            self.by_table.resize_with(slot + 1, Default::default);
            self.whole_row.resize(slot + 1, [None; RedoOp::COUNT]);
        }
        slot
    }

    /// Compiles and caches a plan; returns its position in its slot.
    fn compile(
        &mut self,
        catalog: &Catalog,
        table: &Table,
        op: RedoOp,
        columns: ColumnSet,
    ) -> Result<usize, ReplayError> {
        if self.plans >= PLANS_MAX {
            self.clear();
        }
        let plan = Plan::compile(catalog, table, op, &columns)?;
        let frame = plan.new_frame();
        let list = &mut self.by_table[table.id as usize][op.index()];
        list.push((columns, CachedPlan { plan, frame }));
        self.plans += 1;
        self.compiled += 1;
        Ok(list.len() - 1)
    }

    fn clear(&mut self) {
        self.by_table.iter_mut().flatten().for_each(Vec::clear);
        self.whole_row.iter_mut().for_each(|w| *w = [None; RedoOp::COUNT]);
        self.plans = 0;
    }

    /// Plans compiled so far (a cache hit compiles nothing).
    pub fn compiled(&self) -> u64 {
        self.compiled
    }

    /// Times the cache was dropped because the catalog's version changed.
    pub fn invalidations(&self) -> u64 {
        self.invalidations
    }

    /// Plans cached now.
    pub fn len(&self) -> usize {
        self.plans
    }

    /// Whether no plan is cached.
    pub fn is_empty(&self) -> bool {
        self.plans == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_the_members_in_ascending_order_across_words() {
        let members = [0, 1, 63, 64, 65, 127, 128, 200, COLUMNS_MAX - 1];
        let mut set = ColumnSet::empty();
        for &p in members.iter().rev() {
            set.insert(p);
        }
        assert_eq!(set.positions().collect::<Vec<_>>(), members);
        assert_eq!(set.len(), members.len());
        let reference: Vec<usize> = (0..COLUMNS_MAX).filter(|&p| set.contains(p)).collect();
        assert_eq!(set.positions().collect::<Vec<_>>(), reference);
        assert_eq!(ColumnSet::empty().positions().count(), 0);
        assert_eq!(ColumnSet::all(130).positions().collect::<Vec<_>>(), (0..130).collect::<Vec<_>>());
    }
}
