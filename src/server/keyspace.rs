//! How Redis keys map onto a Lazarus table.
//!
//! Database 0 is the table [`TABLE`]:
//!
//! ```text
//! table redis_kv (k bytes not null, v bytes not null, expire_at_ms int not null, primary key (k));
//! ```
//!
//! - `k`: the key's bytes (Redis keys are binary); the table's primary key, so KEYS and SCAN walk
//!   keys in byte order.
//! - `v`: the string value's bytes.
//! - `expire_at_ms`: the absolute expiry in Unix milliseconds, or 0 for none. It is absolute so
//!   that it means the same after recovery as before the crash.
//!
//! The table is created through the procedure language like any other (so the durability scheme
//! records it and recovery rebuilds it), and stored procedures loaded with `FUNCTION LOAD` may
//! read and write it. A key whose expiry has passed is treated as absent by every command (lazy
//! expiry, as Redis does on access); its row is removed by the next write of the key, or by the
//! server's expiry sweep ([`crate::server`]), whichever comes first.

use crate::db::{Database, DbError};
use crate::storage::key::encode_key;
use crate::storage::{Direction, KeyRange, Row, Table, TableId, Value, ValueRef};
use crate::txn::{Scan, Transaction, TxnError};
use std::ops::Bound;
use std::sync::Arc;

/// The table holding database 0.
pub const TABLE: &str = "redis_kv";

/// Its declaration.
pub const DDL: &str =
    "table redis_kv (k bytes not null, v bytes not null, expire_at_ms int not null, primary key (k));\n";

/// A live key's contents: its stored row, whose value is read where it lies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The key's row.
    row: Row,
    /// Absolute expiry in Unix milliseconds; 0 for none.
    pub expire_at_ms: i64,
}

impl Entry {
    /// The value.
    pub fn value(&self) -> &[u8] {
        self.row.get(VALUE_COLUMN).and_then(ValueRef::as_bytes).unwrap_or_default()
    }

    /// The value as a bulk reply, written from the row (no copy before the reply's own).
    pub fn into_reply(self) -> crate::server::resp::Reply {
        crate::server::resp::Reply::Column(self.row, VALUE_COLUMN)
    }
}

/// The value's column.
const VALUE_COLUMN: usize = 1;

/// One page of a table walk: the live keys with their entries, and the key the next page starts
/// after (`None`: no more rows).
pub type Page = (Vec<(Arc<[u8]>, Entry)>, Option<Vec<u8>>);

/// The keyspace of one server: database 0's table.
#[derive(Clone, Debug)]
pub struct Keyspace {
    table: TableId,
}

/// The current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

impl Keyspace {
    /// The keyspace of `db`, creating its table if recovery did not bring it back.
    pub fn open(db: &Database) -> Result<Keyspace, DbError> {
        if db.catalog().table_by_name(TABLE).is_none() {
            db.load_module("redis_keyspace", DDL)?;
        }
        let table = db.catalog().table_by_name(TABLE).map(|t| t.id);
        let table = table.ok_or_else(|| DbError::Config(format!("table {TABLE} was not created")))?;
        Ok(Keyspace { table })
    }

    /// The table's id.
    pub fn table(&self) -> TableId {
        self.table
    }

    /// During an instant restore (`docs/indexed.md`), restores `keys` now, so that the command's
    /// transaction finds them in memory: the fetch from the indexed log then runs before the
    /// command takes a worker from the pool, not while it holds one of the few there are.
    pub fn restore_ahead<'a>(&self, db: &Database, keys: impl Iterator<Item = &'a [u8]>) {
        self.for_each_restoring_key(db, keys, |table, _, encoded| table.ensure_restored(encoded));
    }

    /// Calls `each` with the table, the key and its encoding for each of `keys`, if an instant
    /// restore of the table is running (not at all otherwise). A key too long to encode is
    /// skipped: it fails in the command itself, with its error.
    fn for_each_restoring_key<'a>(
        &self,
        db: &Database,
        keys: impl Iterator<Item = &'a [u8]>,
        mut each: impl FnMut(&Table, &'a [u8], &[u8]),
    ) {
        let catalog = db.catalog();
        let Some(table) = catalog.table(self.table).filter(|table| table.is_restoring()) else { return };
        for key in keys {
            if let Ok(encoded) = encode_key(&[Value::bytes(key)]) {
                each(table, key, encoded.as_bytes());
            }
        }
    }

    /// The keys among `keys` that an instant restore has not brought into memory yet (empty
    /// outside a restore): [`Keyspace::restore_ahead`] would wait for them.
    pub fn unrestored<'a>(&self, db: &Database, keys: impl Iterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
        let mut unrestored = Vec::new();
        self.for_each_restoring_key(db, keys, |table, key, encoded| {
            if !table.is_restored(encoded) {
                unrestored.push(key.to_vec());
            }
        });
        unrestored
    }

    /// During an instant restore, GET's entry for `key` read from the indexed log without
    /// restoring the key (`docs/indexed.md`, "Reads ahead of the restore"): `None` outside a
    /// restore, for a key in memory, and for one the restore restored instead (a repeated read):
    /// the command then runs as usual. `Some(None)`: the key is absent or expired at `now_ms`.
    pub fn read_ahead(&self, db: &Database, key: &[u8], now_ms: i64) -> Option<Option<Entry>> {
        let mut read = None;
        self.for_each_restoring_key(db, std::iter::once(key), |table, _, encoded| read = table.read_ahead(encoded));
        read.map(|row| row.and_then(|row| live_entry(&row, now_ms)))
    }

    /// Whether an instant restore is still bringing the table into memory.
    pub fn is_restoring(&self, db: &Database) -> bool {
        db.catalog().table(self.table).is_some_and(|table| table.is_restoring())
    }

    /// During an instant restore, waits until the whole table is in memory.
    pub fn wait_restored(&self, db: &Database) {
        if let Some(table) = db.catalog().table(self.table) {
            table.wait_restored();
        }
    }

    /// The key's entry if it exists and has not expired at `now_ms`.
    pub fn get(&self, tx: &mut Transaction<'_>, key: &[u8], now_ms: i64) -> Result<Option<Entry>, TxnError> {
        let row = tx.get(self.table, &[Value::bytes(key)])?;
        Ok(row.and_then(|row| live_entry(&row, now_ms)))
    }

    /// Stores `value` under `key` (a blind write).
    pub fn put(&self, tx: &mut Transaction<'_>, key: &[u8], value: &[u8], expire_at_ms: i64) -> Result<(), TxnError> {
        debug_assert!(expire_at_ms >= 0);
        let row = [ValueRef::Bytes(key), ValueRef::Bytes(value), ValueRef::Int(expire_at_ms)];
        tx.put(self.table, Row::from_refs(row.into_iter()))
    }

    /// Deletes `key`. Returns whether a live (unexpired) key was deleted; an expired row is
    /// removed too but does not count.
    pub fn delete(&self, tx: &mut Transaction<'_>, key: &[u8], now_ms: i64) -> Result<bool, TxnError> {
        let live = self.get(tx, key, now_ms)?.is_some();
        let existed = tx.delete(self.table, &[Value::bytes(key)])?;
        Ok(live && existed)
    }

    /// Up to `limit` live keys after `after` (from the first when `None`), in key order, and the
    /// last key visited (live or not), which is where the next page starts; `None` when the
    /// table has no more rows.
    pub fn scan_page(
        &self,
        tx: &mut Transaction<'_>,
        after: Option<&[u8]>,
        limit: usize,
        now_ms: i64,
    ) -> Result<Page, TxnError> {
        let (rows, last) = self.scan_rows(tx, after, limit)?;
        let live = rows.iter().filter_map(|row| Some((key_arc(row)?, live_entry(row, now_ms)?))).collect::<Vec<_>>();
        Ok((live, last))
    }

    /// Deletes the expired rows among the `limit` rows after `after`; returns how many it deleted
    /// and where the next page starts (`None`: the end of the table).
    pub fn delete_expired_page(
        &self,
        tx: &mut Transaction<'_>,
        after: Option<&[u8]>,
        limit: usize,
        now_ms: i64,
    ) -> Result<(usize, Option<Vec<u8>>), TxnError> {
        let (rows, last) = self.scan_rows(tx, after, limit)?;
        let mut deleted = 0;
        for row in rows.iter().filter(|row| live_entry(row, now_ms).is_none()) {
            if let Some(key) = key_of(row) {
                deleted += usize::from(tx.delete(self.table, &[Value::bytes(key)])?);
            }
        }
        Ok((deleted, last))
    }

    /// Up to `limit` rows after `after`, and the key the next page starts after.
    fn scan_rows(
        &self,
        tx: &mut Transaction<'_>,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<Row>, Option<Vec<u8>>), TxnError> {
        let start = match after {
            Some(key) => Bound::Excluded(encode_key(&[Value::bytes(key)])?),
            None => Bound::Unbounded,
        };
        let scan = Scan {
            table: self.table,
            index: None,
            range: KeyRange { start, end: Bound::Unbounded },
            direction: Direction::Forward,
            limit,
        };
        let rows = tx.scan(&scan)?;
        let last = if rows.len() < limit { None } else { rows.last().and_then(|r| key_of(r)).map(|k| k.to_vec()) };
        Ok((rows, last))
    }
}

fn key_of(row: &Row) -> Option<&[u8]> {
    row.get(0).and_then(ValueRef::as_bytes)
}

fn key_arc(row: &Row) -> Option<Arc<[u8]>> {
    row.get(0).and_then(ValueRef::as_bytes).map(Arc::from)
}

/// The entry a row holds, if it has not expired at `now_ms`.
fn live_entry(row: &Row, now_ms: i64) -> Option<Entry> {
    row.get(VALUE_COLUMN).and_then(ValueRef::as_bytes)?;
    let expire_at_ms = row.get(2).and_then(ValueRef::as_int).unwrap_or(0);
    if expire_at_ms != 0 && expire_at_ms <= now_ms {
        return None;
    }
    Some(Entry { row: row.clone(), expire_at_ms })
}

/// Redis's glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\\` escapes.
///
/// Iterative, backtracking only to the last `*` (a later star subsumes earlier ones), so a
/// hostile pattern costs at most O(pattern × text) steps and no stack.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            p += 1;
            star = Some((p, t));
            continue;
        }
        if let Some(next) = match_one(&pattern[p..], text[t]) {
            p += next;
            t += 1;
            continue;
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    trim_stars(&pattern[p.min(pattern.len())..]).is_empty()
}

/// Whether the pattern's first token (not `*`) matches `c`; returns the token's length.
fn match_one(pattern: &[u8], c: u8) -> Option<usize> {
    match pattern {
        [] => None,
        [b'?', ..] => Some(1),
        [b'[', rest @ ..] => {
            let (matched, after) = class_match(rest, c);
            matched.then_some(pattern.len() - after.len())
        }
        [b'\\', e, ..] => (*e == c).then_some(2),
        [x, ..] => (*x == c).then_some(1),
    }
}

fn trim_stars(mut pattern: &[u8]) -> &[u8] {
    while let Some((b'*', rest)) = pattern.split_first() {
        pattern = rest;
    }
    pattern
}

/// Matches `c` against a class whose `[` is consumed; returns the result and the pattern after
/// the closing `]` (an unclosed class runs to the end, as in Redis).
fn class_match(mut pattern: &[u8], c: u8) -> (bool, &[u8]) {
    let negate = pattern.first() == Some(&b'^');
    if negate {
        pattern = &pattern[1..];
    }
    let mut matched = false;
    loop {
        match pattern {
            [] => break,
            [b']', rest @ ..] => {
                pattern = rest;
                break;
            }
            [b'\\', e, rest @ ..] => {
                matched |= *e == c;
                pattern = rest;
            }
            [lo, b'-', hi, rest @ ..] if *hi != b']' => {
                let (lo, hi) = if lo <= hi { (*lo, *hi) } else { (*hi, *lo) };
                matched |= (lo..=hi).contains(&c);
                pattern = rest;
            }
            [x, rest @ ..] => {
                matched |= *x == c;
                pattern = rest;
            }
        }
    }
    (matched != negate, pattern)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_match_like_redis() {
        let yes: [(&str, &str); 8] = [
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("key:\\*", "key:*"),
            ("*:*:x", "a:b:c:x"),
        ];
        for (p, t) in yes {
            assert!(glob_match(p.as_bytes(), t.as_bytes()), "{p} should match {t}");
        }
        let no: [(&str, &str); 5] =
            [("h?llo", "hllo"), ("h[ae]llo", "hillo"), ("h[^e]llo", "hello"), ("key:\\*", "key:a"), ("a*b", "ac")];
        for (p, t) in no {
            assert!(!glob_match(p.as_bytes(), t.as_bytes()), "{p} should not match {t}");
        }
    }
}
