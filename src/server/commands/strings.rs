//! String commands: GET, SET, SETNX, GETSET, INCR/DECR(BY), APPEND, STRLEN, MGET, MSET.
//!
//! Every handler decides a Redis error (a non-integer, a syntax error) before it writes, so a
//! command that replies with an error has written nothing.

use crate::server::command::{Ctx, STRING_BYTES_MAX, not_an_integer, syntax_error, wrong_arity};
use crate::server::keyspace::{Entry, now_ms};
use crate::server::resp::{Reply, parse_strict_i64};
use crate::txn::TxnError;

type Result = std::result::Result<Reply, TxnError>;

/// GET key
pub fn get(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.run(|tx| Ok(ks.get(tx, &args[1], now)?.map_or(Reply::Nil, Entry::into_reply)))
}

/// When a SET's key expires.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expiry {
    /// No expiry (the default: SET clears any TTL).
    Clear,
    /// KEEPTTL.
    Keep,
    /// At this Unix time in milliseconds.
    At(i64),
}

/// SET's options.
#[derive(Debug)]
struct SetOptions {
    expiry: Expiry,
    nx: bool,
    xx: bool,
    get: bool,
}

/// Parses SET's options (after key and value).
fn set_options(options: &[Vec<u8>], now: i64) -> std::result::Result<SetOptions, Reply> {
    let mut parsed = SetOptions { expiry: Expiry::Clear, nx: false, xx: false, get: false };
    let mut i = 0;
    while i < options.len() {
        let word = options[i].to_ascii_uppercase();
        match word.as_slice() {
            b"NX" if !parsed.xx => parsed.nx = true,
            b"XX" if !parsed.nx => parsed.xx = true,
            b"GET" => parsed.get = true,
            b"KEEPTTL" if parsed.expiry == Expiry::Clear => parsed.expiry = Expiry::Keep,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if parsed.expiry == Expiry::Clear && i + 1 < options.len() => {
                i += 1;
                parsed.expiry = Expiry::At(expiry_at(&word, &options[i], now, "set")?);
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok(parsed)
}

/// The absolute expiry in milliseconds that `EX|PX|EXAT|PXAT amount` asks for.
pub fn expiry_at(unit: &[u8], amount: &[u8], now: i64, command: &str) -> std::result::Result<i64, Reply> {
    let amount = parse_strict_i64(amount).ok_or_else(not_an_integer)?;
    let invalid = || Reply::Error(format!("ERR invalid expire time in '{command}' command").into());
    if amount <= 0 {
        return Err(invalid());
    }
    let at = match unit {
        b"EX" => amount.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
        b"PX" => amount.checked_add(now),
        b"EXAT" => amount.checked_mul(1000),
        _ => Some(amount),
    };
    at.ok_or_else(invalid)
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]`
pub fn set(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let now = now_ms();
    let options = match set_options(&args[3..], now) {
        Ok(options) => options,
        Err(reply) => return Ok(reply),
    };
    ctx.charge(args[2].len())?;
    let (ks, value) = (ctx.keyspace().clone(), args[2].as_slice());
    let key = &args[1];
    ctx.run(|tx| {
        let blind = !options.nx && !options.xx && !options.get && options.expiry != Expiry::Keep;
        let old = if blind { None } else { ks.get(tx, key, now)? };
        let refused = (options.nx && old.is_some()) || (options.xx && old.is_none());
        if !refused {
            let expire_at_ms = match options.expiry {
                Expiry::Clear => 0,
                Expiry::Keep => old.as_ref().map_or(0, |e| e.expire_at_ms),
                Expiry::At(at) => at,
            };
            ks.put(tx, key, value, expire_at_ms)?;
        }
        Ok(match (options.get, refused) {
            (true, _) => old.map_or(Reply::Nil, Entry::into_reply),
            (false, true) => Reply::Nil,
            (false, false) => Reply::ok(),
        })
    })
}

/// SETNX key value
pub fn setnx(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.charge(args[2].len())?;
    let value = args[2].as_slice();
    ctx.run(|tx| {
        if ks.get(tx, &args[1], now)?.is_some() {
            return Ok(Reply::Int(0));
        }
        ks.put(tx, &args[1], value, 0)?;
        Ok(Reply::Int(1))
    })
}

/// GETSET key value
pub fn getset(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.charge(args[2].len())?;
    let value = args[2].as_slice();
    ctx.run(|tx| {
        let old = ks.get(tx, &args[1], now)?;
        ks.put(tx, &args[1], value, 0)?;
        Ok(old.map_or(Reply::Nil, Entry::into_reply))
    })
}

/// Adds `delta` to the integer stored at `key` (0 when absent), keeping its expiry.
fn incr_by(ctx: &mut Ctx<'_, '_>, key: &[u8], delta: i64) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.charge(20)?;
    ctx.run(|tx| {
        let old = ks.get(tx, key, now)?;
        let current = match &old {
            None => 0,
            Some(e) => match parse_strict_i64(e.value()) {
                Some(n) => n,
                None => return Ok(not_an_integer()),
            },
        };
        let Some(new) = current.checked_add(delta) else {
            return Ok(Reply::err("ERR increment or decrement would overflow"));
        };
        let expire_at_ms = old.map_or(0, |e| e.expire_at_ms);
        ks.put(tx, key, new.to_string().as_bytes(), expire_at_ms)?;
        Ok(Reply::Int(new))
    })
}

/// INCR key
pub fn incr(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    incr_by(ctx, &args[1], 1)
}

/// DECR key
pub fn decr(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    incr_by(ctx, &args[1], -1)
}

/// INCRBY key increment
pub fn incrby(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    match parse_strict_i64(&args[2]) {
        Some(delta) => incr_by(ctx, &args[1], delta),
        None => Ok(not_an_integer()),
    }
}

/// DECRBY key decrement
pub fn decrby(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    match parse_strict_i64(&args[2]) {
        Some(i64::MIN) => Ok(Reply::err("ERR decrement would overflow")),
        Some(delta) => incr_by(ctx, &args[1], -delta),
        None => Ok(not_an_integer()),
    }
}

/// APPEND key value
pub fn append(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    let mut grown = 0;
    let reply = ctx.run(|tx| {
        let old = ks.get(tx, &args[1], now)?;
        let old_len = old.as_ref().map_or(0, |e| e.value().len());
        if old_len + args[2].len() > STRING_BYTES_MAX {
            return Ok(Reply::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)"));
        }
        let mut value = Vec::with_capacity(old_len + args[2].len());
        value.extend_from_slice(old.as_ref().map_or(&[][..], |e| e.value()));
        value.extend_from_slice(&args[2]);
        grown = value.len();
        ks.put(tx, &args[1], &value, old.map_or(0, |e| e.expire_at_ms))?;
        Ok(Reply::Int(grown as i64))
    })?;
    ctx.charge(grown)?;
    Ok(reply)
}

/// STRLEN key
pub fn strlen(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.run(|tx| Ok(Reply::Int(ks.get(tx, &args[1], now)?.map_or(0, |e| e.value().len() as i64))))
}

/// MGET key [key ...]
pub fn mget(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    let (ks, now) = (ctx.keyspace().clone(), now_ms());
    ctx.run(|tx| {
        let mut values = Vec::with_capacity(args.len() - 1);
        for key in &args[1..] {
            values.push(ks.get(tx, key, now)?.map_or(Reply::Nil, Entry::into_reply));
        }
        Ok(Reply::Array(values))
    })
}

/// MSET key value [key value ...]
pub fn mset(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    if args.len().is_multiple_of(2) {
        return Ok(wrong_arity("mset"));
    }
    let ks = ctx.keyspace().clone();
    ctx.charge(args[2..].iter().step_by(2).map(Vec::len).sum())?;
    ctx.run(|tx| {
        for pair in args[1..].chunks_exact(2) {
            ks.put(tx, &pair[0], &pair[1], 0)?;
        }
        Ok(Reply::ok())
    })
}
