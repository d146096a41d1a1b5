//! The command table and dispatch helpers: each command's name, arity, flags and handler, and
//! the transaction scope data commands run in.
//!
//! A *data* command reads or writes the keyspace through a [`TxnScope`]: outside MULTI it runs
//! as its own transaction (retried on conflicts); inside EXEC every queued command shares the one
//! transaction of the EXEC. A *connection* command (PING, INFO, CLIENT, ...) touches no data.
//! Commands marked `queued: false` run at once even inside MULTI (EXEC, DISCARD, WATCH, ...).

use super::Shared;
use super::commands::{admin, functions, keys, strings};
use super::conn::Conn;
use super::keyspace::Keyspace;
use super::resp::Reply;
use crate::Worker;
use crate::durability::DurabilityTicket;
use crate::txn::{Transaction, TxnError};

/// How often a command's transaction is retried after OCC conflicts before an error is returned.
pub const CONFLICT_ATTEMPTS_MAX: u32 = 1000;

/// Most bytes of values one transaction may write: the value log frames a transaction in one
/// block of at most 64 MiB.
pub const TXN_WRITE_BYTES_MAX: usize = 40 << 20;

/// Longest string value (APPEND may not grow one past it).
pub const STRING_BYTES_MAX: usize = 16 << 20;

/// Where a data command's transactions run.
pub enum TxnScope<'a, 'w> {
    /// Each [`Ctx::run`] is its own transaction; its durability ticket is added to `tickets`.
    Own {
        /// The worker that runs it.
        worker: &'a mut Worker,
        /// The tickets the connection waits for before it sends its replies.
        tickets: &'a mut Vec<DurabilityTicket>,
    },
    /// Everything runs in this (EXEC's) transaction.
    Shared(&'a mut Transaction<'w>),
}

/// What a data command sees.
pub struct Ctx<'a, 'w> {
    /// Its transaction scope.
    pub scope: TxnScope<'a, 'w>,
    /// The server.
    pub shared: &'a Shared,
    /// Bytes of values written so far in the scope's transaction (bounded by
    /// [`TXN_WRITE_BYTES_MAX`]).
    pub written_bytes: usize,
}

impl Ctx<'_, '_> {
    /// The keyspace.
    pub fn keyspace(&self) -> &Keyspace {
        &self.shared.keyspace
    }

    /// Runs `body` in the scope's transaction (committing it when the scope is `Own`).
    pub fn run<T>(&mut self, mut body: impl FnMut(&mut Transaction<'_>) -> Result<T, TxnError>) -> Result<T, TxnError> {
        match &mut self.scope {
            TxnScope::Own { worker, tickets } => {
                let (out, committed) = worker.run(CONFLICT_ATTEMPTS_MAX, &mut body)?;
                add_ticket(tickets, committed.durability);
                Ok(out)
            }
            TxnScope::Shared(tx) => body(tx),
        }
    }

    /// Accounts for `bytes` more bytes written; fails past [`TXN_WRITE_BYTES_MAX`].
    pub fn charge(&mut self, bytes: usize) -> Result<(), TxnError> {
        self.written_bytes = self.written_bytes.saturating_add(bytes);
        if self.written_bytes > TXN_WRITE_BYTES_MAX {
            return Err(TxnError::TooLarge { what: "bytes written", limit: TXN_WRITE_BYTES_MAX });
        }
        Ok(())
    }
}

/// Adds a ticket to wait for, merging it with the last one when a later ticket covers it (an
/// epoch or sequence ticket covers every smaller one of the same kind).
pub fn add_ticket(tickets: &mut Vec<DurabilityTicket>, ticket: DurabilityTicket) {
    match (tickets.last_mut(), &ticket) {
        (_, DurabilityTicket::Immediate) => {}
        (Some(DurabilityTicket::Epoch(last)), DurabilityTicket::Epoch(e)) => *last = (*last).max(*e),
        (Some(DurabilityTicket::Sequence(last)), DurabilityTicket::Sequence(s)) => *last = (*last).max(*s),
        _ => tickets.push(ticket),
    }
}

/// A data command's handler.
pub type DataFn = fn(&mut Ctx<'_, '_>, &[Vec<u8>]) -> Result<Reply, TxnError>;
/// A connection command's handler.
pub type ConnFn = fn(&mut Conn, &[Vec<u8>]) -> Reply;

/// What runs a command.
#[derive(Clone, Copy)]
pub enum Handler {
    /// Reads or writes the keyspace.
    Data(DataFn),
    /// Touches only the connection or the server.
    Conn(ConnFn),
}

/// One command, as COMMAND describes it.
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (the name counts), `-n` at least n.
    pub arity: i32,
    /// Redis flags (`write`, `readonly`, `fast`, ...).
    pub flags: &'static [&'static str],
    /// Position of the first key argument (0: none).
    pub first_key: i32,
    /// Position of the last key argument (-1: the last argument).
    pub last_key: i32,
    /// Step between key arguments.
    pub key_step: i32,
    /// COMMAND DOCS group.
    pub group: &'static str,
    /// COMMAND DOCS summary.
    pub summary: &'static str,
    /// Whether MULTI queues it (false: it runs at once).
    pub queued: bool,
    /// The handler.
    pub handler: Handler,
}

impl CommandSpec {
    /// The key arguments of `args` at the spec's positions (none for commands whose keys move,
    /// e.g. FCALL's).
    pub fn keys<'a>(&self, args: &'a [Vec<u8>]) -> impl Iterator<Item = &'a [u8]> + 'a {
        let argc = args.len() as i64;
        let first = i64::from(self.first_key);
        let last = if self.last_key < 0 { argc + i64::from(self.last_key) } else { i64::from(self.last_key) };
        let (first, last) = if first <= 0 { (1, 0) } else { (first, last.min(argc - 1)) };
        let step = usize::try_from(self.key_step).unwrap_or(1).max(1);
        (first..=last).step_by(step).filter_map(move |i| args.get(i as usize).map(Vec::as_slice))
    }

    /// Whether `argc` arguments (the name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 { argc == arity } else { argc >= -arity }
    }

    /// Whether the command writes.
    pub fn is_write(&self) -> bool {
        self.flags.contains(&"write")
    }
}

const W: &[&str] = &["write"];
const WF: &[&str] = &["write", "fast"];
const RF: &[&str] = &["readonly", "fast"];
const R: &[&str] = &["readonly"];
const F: &[&str] = &["fast"];
const A: &[&str] = &["admin"];

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $summary:literal, $queued:expr, $handler:expr) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $keys.0,
            last_key: $keys.1,
            key_step: $keys.2,
            group: $group,
            summary: $summary,
            queued: $queued,
            handler: $handler,
        }
    };
}

const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const KEY1: (i32, i32, i32) = (1, 1, 1);
const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);

/// Every command the server knows.
pub static COMMANDS: &[CommandSpec] = &[
    spec!("get", 2, RF, KEY1, "string", "Returns the string value of a key.", true, Handler::Data(strings::get)),
    spec!(
        "set",
        -3,
        W,
        KEY1,
        "string",
        "Sets the string value of a key, with an optional expiry.",
        true,
        Handler::Data(strings::set)
    ),
    spec!(
        "setnx",
        3,
        WF,
        KEY1,
        "string",
        "Sets a key only when it does not exist.",
        true,
        Handler::Data(strings::setnx)
    ),
    spec!(
        "getset",
        3,
        WF,
        KEY1,
        "string",
        "Sets a key and returns its old value.",
        true,
        Handler::Data(strings::getset)
    ),
    spec!(
        "incr",
        2,
        WF,
        KEY1,
        "string",
        "Increments the integer value of a key by one.",
        true,
        Handler::Data(strings::incr)
    ),
    spec!(
        "decr",
        2,
        WF,
        KEY1,
        "string",
        "Decrements the integer value of a key by one.",
        true,
        Handler::Data(strings::decr)
    ),
    spec!(
        "incrby",
        3,
        WF,
        KEY1,
        "string",
        "Increments the integer value of a key.",
        true,
        Handler::Data(strings::incrby)
    ),
    spec!(
        "decrby",
        3,
        WF,
        KEY1,
        "string",
        "Decrements the integer value of a key.",
        true,
        Handler::Data(strings::decrby)
    ),
    spec!(
        "append",
        3,
        WF,
        KEY1,
        "string",
        "Appends a string to the value of a key.",
        true,
        Handler::Data(strings::append)
    ),
    spec!(
        "strlen",
        2,
        RF,
        KEY1,
        "string",
        "Returns the length of a string value.",
        true,
        Handler::Data(strings::strlen)
    ),
    spec!(
        "mget",
        -2,
        RF,
        ALL_KEYS,
        "string",
        "Returns the values of several keys.",
        true,
        Handler::Data(strings::mget)
    ),
    spec!("mset", -3, W, (1, -1, 2), "string", "Sets several keys at once.", true, Handler::Data(strings::mset)),
    spec!("del", -2, W, ALL_KEYS, "generic", "Deletes keys.", true, Handler::Data(keys::del)),
    spec!(
        "exists",
        -2,
        RF,
        ALL_KEYS,
        "generic",
        "Counts the given keys that exist.",
        true,
        Handler::Data(keys::exists)
    ),
    spec!("ttl", 2, RF, KEY1, "generic", "Returns a key's time to live in seconds.", true, Handler::Data(keys::ttl)),
    spec!(
        "pttl",
        2,
        RF,
        KEY1,
        "generic",
        "Returns a key's time to live in milliseconds.",
        true,
        Handler::Data(keys::pttl)
    ),
    spec!("expire", 3, WF, KEY1, "generic", "Sets a key's time to live in seconds.", true, Handler::Data(keys::expire)),
    spec!(
        "pexpire",
        3,
        WF,
        KEY1,
        "generic",
        "Sets a key's time to live in milliseconds.",
        true,
        Handler::Data(keys::pexpire)
    ),
    spec!("persist", 2, WF, KEY1, "generic", "Removes a key's expiry.", true, Handler::Data(keys::persist)),
    spec!("type", 2, RF, KEY1, "generic", "Returns the type of a key's value.", true, Handler::Data(keys::type_of)),
    spec!("keys", 2, R, NO_KEYS, "generic", "Returns the keys that match a pattern.", true, Handler::Data(keys::keys)),
    spec!("scan", -2, R, NO_KEYS, "generic", "Iterates over the keys.", true, Handler::Data(keys::scan)),
    spec!("dbsize", 1, RF, NO_KEYS, "server", "Returns the number of keys.", true, Handler::Data(keys::dbsize)),
    spec!("flushdb", -1, W, NO_KEYS, "server", "Deletes every key.", true, Handler::Data(keys::flushdb)),
    spec!("flushall", -1, W, NO_KEYS, "server", "Deletes every key.", true, Handler::Data(keys::flushdb)),
    spec!(
        "fcall",
        -3,
        &["write", "noscript"],
        NO_KEYS,
        "scripting",
        "Runs a stored procedure.",
        true,
        Handler::Data(functions::fcall)
    ),
    spec!(
        "fcall_ro",
        -3,
        &["readonly", "noscript"],
        NO_KEYS,
        "scripting",
        "Runs a read-only stored procedure.",
        true,
        Handler::Data(functions::fcall_ro)
    ),
    spec!(
        "function",
        -2,
        &["noscript"],
        NO_KEYS,
        "scripting",
        "Loads and lists stored procedures.",
        false,
        Handler::Conn(functions::function)
    ),
    spec!("ping", -1, F, NO_KEYS, "connection", "Returns PONG or the argument.", true, Handler::Conn(admin::ping)),
    spec!("echo", 2, F, NO_KEYS, "connection", "Returns the argument.", true, Handler::Conn(admin::echo)),
    spec!(
        "select",
        2,
        F,
        NO_KEYS,
        "connection",
        "Selects database 0 (the only one).",
        true,
        Handler::Conn(admin::select)
    ),
    spec!(
        "client",
        -2,
        &["noscript"],
        NO_KEYS,
        "connection",
        "Names and identifies the connection.",
        true,
        Handler::Conn(admin::client)
    ),
    spec!(
        "hello",
        -1,
        F,
        NO_KEYS,
        "connection",
        "Handshakes with the server (RESP2).",
        false,
        Handler::Conn(admin::hello)
    ),
    spec!("quit", -1, F, NO_KEYS, "connection", "Closes the connection.", false, Handler::Conn(admin::quit)),
    spec!(
        "info",
        -1,
        &["loading"],
        NO_KEYS,
        "server",
        "Returns information about the server.",
        true,
        Handler::Conn(admin::info)
    ),
    spec!(
        "config",
        -2,
        A,
        NO_KEYS,
        "server",
        "Reads and sets configuration parameters.",
        true,
        Handler::Conn(admin::config)
    ),
    spec!(
        "command",
        -1,
        &["loading"],
        NO_KEYS,
        "server",
        "Describes the commands.",
        true,
        Handler::Conn(admin::command)
    ),
    spec!("time", 1, F, NO_KEYS, "server", "Returns the server time.", true, Handler::Conn(admin::time)),
    spec!(
        "shutdown",
        -1,
        A,
        NO_KEYS,
        "server",
        "Stops the server after its log is durable.",
        false,
        Handler::Conn(admin::shutdown)
    ),
    spec!("multi", 1, F, NO_KEYS, "transactions", "Starts a transaction.", false, Handler::Conn(super::conn::multi)),
    spec!(
        "exec",
        1,
        &["noscript"],
        NO_KEYS,
        "transactions",
        "Runs the queued commands as one transaction.",
        false,
        Handler::Conn(super::conn::exec)
    ),
    spec!(
        "discard",
        1,
        F,
        NO_KEYS,
        "transactions",
        "Discards the queued commands.",
        false,
        Handler::Conn(super::conn::discard)
    ),
    spec!(
        "watch",
        -2,
        F,
        ALL_KEYS,
        "transactions",
        "Makes EXEC conditional on keys not changing.",
        false,
        Handler::Conn(super::conn::watch)
    ),
    spec!(
        "unwatch",
        1,
        F,
        NO_KEYS,
        "transactions",
        "Forgets the watched keys.",
        false,
        Handler::Conn(super::conn::unwatch)
    ),
];

/// The command called `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    COMMANDS.iter().find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Redis 7's reply to an unknown command: the name and the start of its arguments, each quoted
/// and followed by a space.
pub fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let name = args.first().map(|n| clip(n, 128)).unwrap_or_default();
    let mut rest = String::new();
    for arg in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push_str(&format!("'{}' ", clip(arg, room)));
    }
    Reply::Error(format!("ERR unknown command '{name}', with args beginning with: {rest}").into())
}

/// Redis's wrong-arity reply.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::Error(format!("ERR wrong number of arguments for '{name}' command").into())
}

/// Redis's reply to an unknown subcommand.
pub fn unknown_subcommand(sub: &[u8], command: &str) -> Reply {
    Reply::Error(
        format!("ERR unknown subcommand '{}'. Try {} HELP.", clip(sub, 128), command.to_ascii_uppercase()).into(),
    )
}

/// At most `bytes_max` bytes of `bytes`, as lossy UTF-8.
pub fn clip(bytes: &[u8], bytes_max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(bytes_max)]).into_owned()
}

/// `ERR syntax error`.
pub fn syntax_error() -> Reply {
    Reply::err("ERR syntax error")
}

/// `ERR value is not an integer or out of range`.
pub fn not_an_integer() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

/// The reply for a transaction error a command did not turn into a reply itself.
pub fn txn_error_reply(error: &TxnError) -> Reply {
    match error {
        TxnError::UserAbort(message) => Reply::Error(format!("ERR {message}").into()),
        TxnError::Key(e) => Reply::Error(format!("ERR key refused: {e}").into()),
        TxnError::Conflict(_) => Reply::err("ERR transaction aborted by conflicts too many times; retry"),
        other => Reply::Error(format!("ERR {other}").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::lookup;

    fn keys_of(args: &[&str]) -> Vec<String> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let spec = lookup(&args[0]).expect("a known command");
        spec.keys(&args).map(|k| String::from_utf8_lossy(k).into_owned()).collect()
    }

    #[test]
    fn key_arguments_follow_the_command_table() {
        assert_eq!(keys_of(&["SET", "a", "1", "EX", "5"]), ["a"]);
        assert_eq!(keys_of(&["MSET", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(keys_of(&["MGET", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(keys_of(&["DEL", "x"]), ["x"]);
        assert!(keys_of(&["PING"]).is_empty());
        assert!(keys_of(&["DBSIZE"]).is_empty());
    }
}
