//! Key-space commands: DEL, EXISTS, TTL/PTTL, EXPIRE/PEXPIRE, PERSIST, TYPE, KEYS, SCAN, DBSIZE,
//! FLUSHDB.
//!
//! KEYS, DBSIZE and FLUSHDB walk the table in pages of [`PAGE_ROWS`]; outside MULTI each page is
//! its own transaction, so a walk over millions of keys never builds a read set of millions of
//! entries (each key present for the whole walk is seen exactly once; keys written during it may
//! or may not be). Inside EXEC they run in EXEC's transaction and are atomic with it.

use crate::server::command::{Ctx, not_an_integer, syntax_error};
use crate::server::keyspace::{glob_match, now_ms};
use crate::server::resp::{Reply, parse_strict_i64};
use crate::txn::TxnError;
use std::sync::Arc;

type Result = std::result::Result<Reply, TxnError>;

/// Rows per page of a table walk.
pub const PAGE_ROWS: usize = 1000;
/// Largest COUNT of one SCAN call.
pub const SCAN_COUNT_MAX: usize = 1 << 16;

/// DEL key [key ...]
pub fn del(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.run(|tx| {
        let mut deleted = 0;
        for key in &args[1..] {
            deleted += i64::from(ks.delete(tx, key, now)?);
        }
        Ok(Reply::Int(deleted))
    })
}

/// EXISTS key [key ...] (a key named twice counts twice, as in Redis)
pub fn exists(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.run(|tx| {
        let mut found = 0;
        for key in &args[1..] {
            found += i64::from(ks.get(tx, key, now)?.is_some());
        }
        Ok(Reply::Int(found))
    })
}

/// The remaining time to live in milliseconds: -2 for a missing key, -1 for no expiry.
fn ttl_ms(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> std::result::Result<i64, TxnError> {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.run(|tx| {
        Ok(match ks.get(tx, key, now)? {
            None => -2,
            Some(e) if e.expire_at_ms == 0 => -1,
            Some(e) => e.expire_at_ms - now,
        })
    })
}

/// TTL key
pub fn ttl(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let ms = ttl_ms(ctx, &args[1])?;
    Ok(Reply::Int(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

/// PTTL key
pub fn pttl(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    Ok(Reply::Int(ttl_ms(ctx, &args[1])?))
}

/// Sets the expiry of an existing key to `amount` units from now; a time not in the future
/// deletes the key, as Redis does.
fn expire_in(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>], unit_ms: i64, command: &str) -> Result {
    let Some(amount) = parse_strict_i64(&args[2]) else { return Ok(not_an_integer()) };
    let now = now_ms();
    let Some(at) = amount.checked_mul(unit_ms).and_then(|ms| ms.checked_add(now)) else {
        return Ok(Reply::Error(format!("ERR invalid expire time in '{command}' command").into()));
    };
    let ks = ctx.keyspace().clone();
    ctx.run(|tx| {
        let Some(entry) = ks.get(tx, &args[1], now)? else { return Ok(Reply::Int(0)) };
        if at <= now {
            ks.delete(tx, &args[1], now)?;
        } else {
            ks.put(tx, &args[1], entry.value(), at)?;
        }
        Ok(Reply::Int(1))
    })
}

/// EXPIRE key seconds
pub fn expire(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    expire_in(ctx, args, 1000, "expire")
}

/// PEXPIRE key milliseconds
pub fn pexpire(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    expire_in(ctx, args, 1, "pexpire")
}

/// PERSIST key
pub fn persist(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.run(|tx| match ks.get(tx, &args[1], now)? {
        Some(e) if e.expire_at_ms != 0 => {
            ks.put(tx, &args[1], e.value(), 0)?;
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    })
}

/// TYPE key
pub fn type_of(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    let found = ctx.run(|tx| Ok(ks.get(tx, &args[1], now)?.is_some()))?;
    Ok(Reply::Status(if found { "string" } else { "none" }.into()))
}

/// Walks every live key in pages, calling `visit` with each page's keys.
fn walk(
    ctx: &mut Ctx<'_, '_>,
    mut visit: impl FnMut(&[Arc<[u8]>]) -> std::result::Result<(), TxnError>,
) -> std::result::Result<(), TxnError> {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    let mut after: Option<Vec<u8>> = None;
    loop {
        let (page, last) = ctx.run(|tx| ks.scan_page(tx, after.as_deref(), PAGE_ROWS, now))?;
        let keys: Vec<Arc<[u8]>> = page.into_iter().map(|(k, _)| k).collect();
        visit(&keys)?;
        match last {
            Some(last) => after = Some(last),
            None => return Ok(()),
        }
    }
}

/// KEYS pattern
pub fn keys(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let pattern = args[1].clone();
    let mut out = Vec::new();
    walk(ctx, |page| {
        out.extend(page.iter().filter(|k| glob_match(&pattern, k)).map(|k| Reply::Shared(Arc::clone(k))));
        Ok(())
    })?;
    Ok(Reply::Array(out))
}

/// DBSIZE
pub fn dbsize(ctx: &mut Ctx<'_, '_>, _args: &[Vec<u8>]) -> Result {
    let mut count = 0i64;
    walk(ctx, |page| {
        count += page.len() as i64;
        Ok(())
    })?;
    Ok(Reply::Int(count))
}

/// FLUSHDB [ASYNC | SYNC] (both are synchronous here)
pub fn flushdb(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    match args.get(1).map(|a| a.to_ascii_uppercase()) {
        None => {}
        Some(mode) if args.len() == 2 && (mode == b"ASYNC" || mode == b"SYNC") => {}
        Some(_) => return Ok(syntax_error()),
    }
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    let mut after: Option<Vec<u8>> = None;
    loop {
        // Rows, not only live keys: expired rows are removed too.
        let last = ctx.run(|tx| {
            let (page, last) = ks.scan_page(tx, after.as_deref(), PAGE_ROWS, i64::MIN)?;
            for (key, _) in &page {
                ks.delete(tx, key, now)?;
            }
            Ok(last)
        })?;
        match last {
            Some(last) => after = Some(last),
            None => return Ok(Reply::ok()),
        }
    }
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
///
/// A cursor names the last key a call visited; the server keeps the names (a bounded table, see
/// [`crate::server::CursorTable`]) so that a cursor stays a number, as clients expect.
pub fn scan(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let Some(cursor) = std::str::from_utf8(&args[1]).ok().and_then(|c| c.parse::<u64>().ok()) else {
        return Ok(Reply::err("ERR invalid cursor"));
    };
    let (mut pattern, mut count, mut strings_only) = (None, 10usize, true);
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else { return Ok(syntax_error()) };
        match args[i].to_ascii_uppercase().as_slice() {
            b"MATCH" => pattern = Some(value.clone()),
            b"COUNT" => match parse_strict_i64(value) {
                Some(n) if n >= 1 => count = (n as usize).min(SCAN_COUNT_MAX),
                Some(_) => return Ok(syntax_error()),
                None => return Ok(not_an_integer()),
            },
            b"TYPE" => strings_only = value.eq_ignore_ascii_case(b"string"),
            _ => return Ok(syntax_error()),
        }
        i += 2;
    }
    let after = match cursor {
        0 => None,
        c => match ctx.shared.cursors.lock().get(c) {
            Some(key) => Some(key),
            None => return Ok(Reply::err("ERR invalid cursor")),
        },
    };
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    let (page, last) = ctx.run(|tx| ks.scan_page(tx, after.as_deref(), count, now))?;
    let next = match last {
        Some(last) => ctx.shared.cursors.lock().insert(last),
        None => 0,
    };
    let keys = page
        .into_iter()
        .filter(|(k, _)| strings_only && pattern.as_ref().is_none_or(|p| glob_match(p, k)))
        .map(|(k, _)| Reply::Shared(k))
        .collect();
    Ok(Reply::Array(vec![Reply::text(next.to_string()), Reply::Array(keys)]))
}
