//! One connection: read, parse, run, wait for durability, reply; and its MULTI/EXEC/WATCH state.
//!
//! # Pipelining and durability
//!
//! Its event loop ([`super::event_loop`]) reads what the socket has (up to [`READ_CHUNK_BYTES`] at
//! a time), runs every complete request in it in order, appending each reply to one output
//! buffer, and the connection keeps the durability ticket of every transaction it committed
//! (tickets of one kind merge: the latest epoch covers the earlier ones). The buffer is written
//! only once those tickets are durable; so no reply, not even a GET's (which may have read a value
//! not yet durable), reaches the client before what it depends on is durable, and a pipeline of N
//! writes waits for one group commit, not N. If the scheme fails, the connection is closed without
//! sending the replies: the client sees an error, never a false acknowledgement.
//!
//! # MULTI / EXEC / WATCH
//!
//! MULTI queues commands (a syntax or arity error marks the queue dirty, and EXEC then answers
//! `EXECABORT`). EXEC runs the queue as **one** Lazarus OCC transaction, retried as a whole on
//! conflicts, so it is atomic and isolated (Redis only makes it atomic). WATCH reads each key's
//! entry (value and expiry) at WATCH time; EXEC re-reads the keys inside its transaction and
//! answers a nil array, running nothing, if any differs. Because those reads are validated at
//! commit, a change between WATCH and EXEC's commit aborts EXEC. A key changed and then changed
//! back to the same entry is not seen as changed (Redis would abort; the outcome is the same as
//! if the writes had happened before WATCH).

use super::Shared;
use super::command::{
    CONFLICT_ATTEMPTS_MAX, CommandSpec, Ctx, Handler, TxnScope, add_ticket, lookup, txn_error_reply, unknown_command,
    wrong_arity,
};
use super::keyspace::{Entry, now_ms};
use super::resp::{Args, Reply};
use super::restore_pool::RestoreNeed;
use crate::durability::DurabilityTicket;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Bytes read from the socket at a time.
pub const READ_CHUNK_BYTES: usize = 64 << 10;
/// Output is flushed (after the durability wait) once it holds this much, even mid-pipeline.
pub const OUTPUT_FLUSH_BYTES: usize = 1 << 20;
/// Most commands one MULTI may queue.
pub const MULTI_COMMANDS_MAX: usize = 1 << 16;
/// Most argument bytes one MULTI may queue (EXEC's writes go into one log block).
pub const MULTI_BYTES_MAX: usize = 32 << 20;
/// Most keys one connection may WATCH.
pub const WATCHED_KEYS_MAX: usize = 1 << 16;
/// Distinct tickets kept before the connection waits for them early.
pub const TICKETS_MAX: usize = 64;

/// Commands that read the keyspace table by range, so wait for a whole restore.
const RANGE_COMMANDS: [&str; 4] = ["keys", "scan", "dbsize", "flushdb"];

/// Commands queued by MULTI.
#[derive(Default)]
struct Multi {
    queued: Vec<(&'static CommandSpec, Args)>,
    bytes: usize,
    dirty: bool,
}

/// The state of one client connection.
pub struct Conn {
    /// The server.
    pub shared: Arc<Shared>,
    /// CLIENT ID.
    pub id: u64,
    /// CLIENT SETNAME.
    pub name: Option<Vec<u8>>,
    /// Close after the current reply is sent (QUIT, SHUTDOWN, protocol errors).
    pub closing: bool,
    /// Close without sending the current reply (SHUTDOWN, as Redis does).
    pub silent_close: bool,
    multi: Option<Multi>,
    watched: Vec<(Vec<u8>, Option<Entry>)>,
    tickets: Vec<DurabilityTicket>,
}

impl Conn {
    /// A connection with CLIENT ID `id`.
    pub fn new(shared: Arc<Shared>, id: u64) -> Conn {
        Conn {
            shared,
            id,
            name: None,
            closing: false,
            silent_close: false,
            multi: None,
            watched: Vec::new(),
            tickets: Vec::new(),
        }
    }

    /// Whether MULTI is open.
    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// Makes the open MULTI (if any) fail at EXEC.
    pub fn mark_multi_dirty(&mut self) {
        if let Some(multi) = self.multi.as_mut() {
            multi.dirty = true;
        }
    }

    /// Runs one request and returns its reply. `keys_restored`: the caller has found the
    /// request's keys in memory ([`Conn::restore_need`] said `None`), so they are not looked up
    /// again before it runs (during an instant restore; restored keys stay restored).
    pub fn handle(&mut self, args: Args, keys_restored: bool) -> Reply {
        self.shared.commands_processed.fetch_add(1, Ordering::Relaxed);
        let Some(spec) = args.first().and_then(|name| lookup(name)) else {
            self.mark_multi_dirty();
            return unknown_command(&args);
        };
        if !spec.arity_ok(args.len()) {
            self.mark_multi_dirty();
            return wrong_arity(spec.name);
        }
        if self.multi.is_some() && spec.queued {
            return self.queue(spec, args);
        }
        match spec.handler {
            Handler::Conn(f) => f(self, &args),
            Handler::Data(f) => {
                let shared = Arc::clone(&self.shared);
                if !keys_restored {
                    shared.keyspace.restore_ahead(&shared.db, spec.keys(&args));
                }
                let mut worker = shared.pool.take();
                let scope = TxnScope::Own { worker: &mut worker, tickets: &mut self.tickets };
                let mut ctx = Ctx { scope, shared: &shared, written_bytes: 0 };
                f(&mut ctx, &args).unwrap_or_else(|e| txn_error_reply(&e))
            }
        }
    }

    /// Counts a request answered without [`Conn::handle`] (a GET read ahead of a restore).
    pub fn note_answered(&self) {
        self.shared.commands_processed.fetch_add(1, Ordering::Relaxed);
    }

    /// What [`Conn::handle`] would wait for before running `args`, during an instant restore:
    /// keys to fetch from the indexed log, or the whole table for a range read. `None` outside a
    /// restore, for what is already in memory, and for a command MULTI only queues.
    pub fn restore_need(&self, args: &Args) -> Option<RestoreNeed> {
        let spec = args.first().and_then(|name| lookup(name))?;
        let queued = self.multi.is_some() && spec.queued;
        if queued || !spec.arity_ok(args.len()) || !matches!(spec.handler, Handler::Data(_)) {
            return None;
        }
        let keyspace = &self.shared.keyspace;
        if RANGE_COMMANDS.contains(&spec.name) {
            return keyspace.is_restoring(&self.shared.db).then_some(RestoreNeed::Table);
        }
        let mut keys = keyspace.unrestored(&self.shared.db, spec.keys(args));
        if keys.is_empty() {
            return None;
        }
        if spec.name == "get" && keys.len() == 1 {
            return keys.pop().map(RestoreNeed::ReadAhead);
        }
        Some(RestoreNeed::Keys(keys))
    }

    fn queue(&mut self, spec: &'static CommandSpec, args: Args) -> Reply {
        let Some(multi) = self.multi.as_mut() else { return Reply::err("ERR internal: no MULTI") };
        multi.bytes += args.iter().map(Vec::len).sum::<usize>();
        if multi.queued.len() >= MULTI_COMMANDS_MAX || multi.bytes > MULTI_BYTES_MAX {
            multi.dirty = true;
            return Reply::Error(
                format!("ERR MULTI may queue at most {MULTI_COMMANDS_MAX} commands and {MULTI_BYTES_MAX} bytes").into(),
            );
        }
        multi.queued.push((spec, args));
        Reply::Status("QUEUED".into())
    }

    /// The durability tickets of the transactions whose replies are buffered; the caller must
    /// not send those replies before they are durable.
    pub fn take_tickets(&mut self) -> Vec<DurabilityTicket> {
        std::mem::take(&mut self.tickets)
    }

    /// How many distinct tickets are buffered.
    pub fn tickets_len(&self) -> usize {
        self.tickets.len()
    }
}

/// MULTI
pub fn multi(conn: &mut Conn, _args: &[Vec<u8>]) -> Reply {
    if conn.multi.is_some() {
        return Reply::err("ERR MULTI calls can not be nested");
    }
    conn.multi = Some(Multi::default());
    Reply::ok()
}

/// DISCARD
pub fn discard(conn: &mut Conn, _args: &[Vec<u8>]) -> Reply {
    if conn.multi.take().is_none() {
        return Reply::err("ERR DISCARD without MULTI");
    }
    conn.watched.clear();
    Reply::ok()
}

/// WATCH key [key ...]
pub fn watch(conn: &mut Conn, args: &[Vec<u8>]) -> Reply {
    if conn.multi.is_some() {
        return Reply::err("ERR WATCH inside MULTI is not allowed");
    }
    if conn.watched.len() + args.len() - 1 > WATCHED_KEYS_MAX {
        return Reply::Error(format!("ERR at most {WATCHED_KEYS_MAX} keys may be watched").into());
    }
    let shared = Arc::clone(&conn.shared);
    let mut worker = shared.pool.take();
    let (ks, now) = (&shared.keyspace, now_ms());
    let read = worker.run(CONFLICT_ATTEMPTS_MAX, |tx| {
        args[1..].iter().map(|key| Ok((key.clone(), ks.get(tx, key, now)?))).collect::<Result<Vec<_>, _>>()
    });
    match read {
        Ok((snapshots, committed)) => {
            add_ticket(&mut conn.tickets, committed.durability);
            conn.watched.extend(snapshots);
            Reply::ok()
        }
        Err(e) => txn_error_reply(&e),
    }
}

/// UNWATCH
pub fn unwatch(conn: &mut Conn, _args: &[Vec<u8>]) -> Reply {
    conn.watched.clear();
    Reply::ok()
}

/// EXEC: the queued commands as one transaction.
pub fn exec(conn: &mut Conn, _args: &[Vec<u8>]) -> Reply {
    let Some(multi) = conn.multi.take() else { return Reply::err("ERR EXEC without MULTI") };
    let watched = std::mem::take(&mut conn.watched);
    if multi.dirty {
        return Reply::err("EXECABORT Transaction discarded because of previous errors.");
    }
    let shared = Arc::clone(&conn.shared);
    let mut worker = shared.pool.take();
    let result = worker.run(CONFLICT_ATTEMPTS_MAX, |tx| {
        let now = now_ms();
        for (key, snapshot) in &watched {
            if shared.keyspace.get(tx, key, now)? != *snapshot {
                return Ok(None);
            }
        }
        let mut ctx = Ctx { scope: TxnScope::Shared(tx), shared: &shared, written_bytes: 0 };
        let mut replies = Vec::with_capacity(multi.queued.len());
        for (spec, args) in &multi.queued {
            let reply = match spec.handler {
                Handler::Data(f) => match f(&mut ctx, args) {
                    Ok(reply) => reply,
                    Err(e) if e.is_retryable() => return Err(e),
                    Err(e) => txn_error_reply(&e),
                },
                Handler::Conn(f) => f(conn, args),
            };
            replies.push(reply);
        }
        Ok(Some(replies))
    });
    match result {
        Ok((replies, committed)) => {
            add_ticket(&mut conn.tickets, committed.durability);
            replies.map_or(Reply::NilArray, Reply::Array)
        }
        Err(e) => txn_error_reply(&e),
    }
}
