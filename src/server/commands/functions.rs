//! Stored procedures through Redis's function commands.
//!
//! `FUNCTION LOAD code` registers a file in Lazarus's procedure language (docs/LANGUAGE.md): its
//! tables and procedures, exactly as `Database::load_module` does, so the durability scheme records
//! it and recovery brings it back. An optional first line `#!lazarus name=<library>` names the
//! library (Redis requires `#!<engine> name=<library>`); without it the library is named after
//! its first procedure. `FCALL name numkeys key... arg...` calls procedure `name` with the keys
//! then the args as its parameters, each converted to the parameter's type (a trailing array
//! parameter takes all remaining arguments). FCALL_RO refuses a procedure that can write.
//!
//! A procedure that aborts (or fails at run time) outside MULTI writes nothing: its transaction is
//! not committed. Inside EXEC the other queued commands still run, as in Redis.

use crate::proc::ir::{Access, Ty};
use crate::server::command::{Ctx, clip, not_an_integer, unknown_subcommand};
use crate::server::conn::Conn;
use crate::server::resp::{Reply, parse_strict_i64};
use crate::storage::{ParamValue, Value};
use crate::txn::TxnError;
use std::sync::Arc;

type Result = std::result::Result<Reply, TxnError>;

/// FCALL function numkeys [key ...] [arg ...]
pub fn fcall(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    call(ctx, args, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]
pub fn fcall_ro(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>]) -> Result {
    call(ctx, args, true)
}

fn call(ctx: &mut Ctx<'_, '_>, args: &[Vec<u8>], read_only: bool) -> Result {
    let Some(numkeys) = parse_strict_i64(&args[2]) else { return Ok(not_an_integer()) };
    if numkeys < 0 {
        return Ok(Reply::err("ERR Number of keys can't be negative"));
    }
    if numkeys as u64 > (args.len() - 3) as u64 {
        return Ok(Reply::err("ERR Number of keys can't be greater than number of args"));
    }
    let registry = ctx.shared.db.procedures();
    let name = String::from_utf8_lossy(&args[1]);
    let Some(id) = registry.id_of(&name) else { return Ok(Reply::err("ERR Function not found")) };
    let Some(procedure) = registry.get(id).map(Arc::clone) else { return Ok(Reply::err("ERR Function not found")) };
    if read_only && procedure.ir().db_ops().iter().any(|(_, op)| matches!(op.access, Access::Write(_))) {
        return Ok(Reply::err("ERR Can not execute a script with write flag using *_ro command."));
    }
    let params = match bind(procedure.params(), &args[3..]) {
        Ok(params) => params,
        Err(reply) => return Ok(reply),
    };
    let values = ctx.run(|tx| procedure.run(tx, &params));
    match values {
        Ok(values) => Ok(values_reply(values)),
        Err(e) if e.is_retryable() => Err(e),
        Err(TxnError::UserAbort(message)) => Ok(Reply::Error(format!("ERR {message}").into())),
        Err(TxnError::Procedure { procedure, message }) => {
            Ok(Reply::Error(format!("ERR procedure {procedure} failed: {message}").into()))
        }
        Err(e) => Err(e),
    }
}

/// Converts arguments to the parameters' types.
fn bind(params: &[crate::proc::ir::Var], args: &[Vec<u8>]) -> std::result::Result<Vec<ParamValue>, Reply> {
    let scalars = params.iter().take_while(|p| !p.array).count();
    let trailing_array = scalars + 1 == params.len();
    let arity_ok =
        if trailing_array { args.len() >= scalars } else { scalars == params.len() && args.len() == scalars };
    if !arity_ok {
        return Err(Reply::Error(
            format!("ERR wrong number of arguments for the function: expected {}, got {}", params.len(), args.len())
                .into(),
        ));
    }
    let mut bound = Vec::with_capacity(params.len());
    for (param, arg) in params.iter().zip(args) {
        if param.array {
            break;
        }
        bound.push(ParamValue::Scalar(convert(param.ty, arg)?));
    }
    if trailing_array {
        let ty = params[scalars].ty;
        let items: std::result::Result<Vec<Value>, Reply> = args[scalars..].iter().map(|a| convert(ty, a)).collect();
        bound.push(ParamValue::Array(Arc::from(items?)));
    }
    Ok(bound)
}

fn convert(ty: Ty, arg: &[u8]) -> std::result::Result<Value, Reply> {
    match ty {
        Ty::Int => parse_strict_i64(arg).map(Value::Int).ok_or_else(not_an_integer),
        Ty::Float => std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map(Value::Float)
            .ok_or_else(|| Reply::err("ERR value is not a valid float")),
        Ty::Text => std::str::from_utf8(arg).map(Value::text).map_err(|_| Reply::err("ERR argument is not UTF-8 text")),
        Ty::Bool => match arg.to_ascii_lowercase().as_slice() {
            b"1" | b"true" => Ok(Value::Bool(true)),
            b"0" | b"false" => Ok(Value::Bool(false)),
            _ => Err(Reply::err("ERR value is not a boolean")),
        },
        _ => Ok(Value::bytes(arg)),
    }
}

/// One value as a reply: null → nil, integers and booleans → integers, the rest → bulk strings.
fn value_reply(value: Value) -> Reply {
    match value {
        Value::Null => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::Bool(b) => Reply::Int(i64::from(b)),
        Value::Float(f) => Reply::text(f.to_string()),
        Value::Text(t) => Reply::Bulk(t.as_bytes().to_vec()),
        Value::Bytes(b) => Reply::Shared(b),
        Value::InlineBytes(b) => Reply::Bulk(b.as_slice().to_vec()),
    }
}

/// What `return` gave: nothing → nil, one value → it, several → an array.
fn values_reply(mut values: Vec<Value>) -> Reply {
    match values.len() {
        0 => Reply::Nil,
        1 => value_reply(values.remove(0)),
        _ => Reply::Array(values.into_iter().map(value_reply).collect()),
    }
}

/// `FUNCTION LOAD [REPLACE] code | FUNCTION LIST | FUNCTION HELP`
pub fn function(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    if conn.in_multi() {
        conn.mark_multi_dirty();
        return Reply::err("ERR FUNCTION is not allowed inside MULTI");
    }
    match args[1].to_ascii_uppercase().as_slice() {
        b"LOAD" => load(conn, &args[2..]),
        b"LIST" => list(conn),
        b"HELP" => Reply::Array(
            ["FUNCTION LOAD <code>: registers a procedure-language file.", "FUNCTION LIST: lists the procedures."]
                .into_iter()
                .map(|s| Reply::Status(s.into()))
                .collect(),
        ),
        _ => unknown_subcommand(&args[1], "function"),
    }
}

fn load(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    let code = match args {
        [code] => code,
        [flag, _] if flag.eq_ignore_ascii_case(b"REPLACE") => {
            return Reply::err("ERR REPLACE is not supported: a registered procedure cannot be replaced");
        }
        _ => return crate::server::command::wrong_arity("function|load"),
    };
    let Ok(code) = std::str::from_utf8(code) else { return Reply::err("ERR library code must be UTF-8") };
    let (library, source) = match code.strip_prefix("#!") {
        Some(rest) => {
            let (shebang, body) = rest.split_once('\n').unwrap_or((rest, ""));
            let mut words = shebang.split_whitespace();
            if words.next() != Some("lazarus") {
                return Reply::err("ERR Engine not found: only the 'lazarus' procedure language is supported");
            }
            let name = words.find_map(|w| w.strip_prefix("name=")).map(str::to_string);
            // The shebang line becomes a comment so that diagnostics keep their line numbers.
            (name, format!("--{shebang}\n{body}"))
        }
        None => (None, code.to_string()),
    };
    let before = conn.shared.db.procedures().all().len();
    let file_name = format!("function:{}", library.as_deref().unwrap_or("unnamed"));
    match conn.shared.db.load_module(&file_name, &source) {
        Ok(ids) => {
            let registry = conn.shared.db.procedures();
            let first = ids.first().and_then(|&id| registry.get(id)).map(|p| p.name().to_string());
            let name = library.or(first).unwrap_or_else(|| format!("library{before}"));
            Reply::Bulk(name.into_bytes())
        }
        Err(crate::db::DbError::ProcedureExists(name)) => {
            Reply::Error(format!("ERR Library '{}' already exists", clip(name.as_bytes(), 128)).into())
        }
        Err(e) => Reply::Error(format!("ERR Error compiling function: {e}").into()),
    }
}

fn list(conn: &mut Conn) -> Reply {
    let registry = conn.shared.db.procedures();
    let entries = registry
        .all()
        .iter()
        .map(|p| {
            let function = Reply::Array(vec![
                Reply::text("name"),
                Reply::text(p.name()),
                Reply::text("description"),
                Reply::Nil,
                Reply::text("flags"),
                Reply::Array(Vec::new()),
            ]);
            Reply::Array(vec![
                Reply::text("library_name"),
                Reply::text(p.name()),
                Reply::text("engine"),
                Reply::text("LAZARUS"),
                Reply::text("functions"),
                Reply::Array(vec![function]),
            ])
        })
        .collect();
    Reply::Array(entries)
}
