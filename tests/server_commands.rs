//! Every command, through a real client library (the `redis` crate) and raw RESP for exact texts.

mod server_common;

use redis::{Commands, Value};
use server_common::TestServer;
use std::time::Duration;

fn query<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn strings() {
    let server = TestServer::start();
    let mut c = server.client();
    let _: () = c.set("k", "v1").unwrap();
    assert_eq!(c.get::<_, String>("k").unwrap(), "v1");
    assert_eq!(c.get::<_, Option<String>>("missing").unwrap(), None);
    assert_eq!(query::<i64>(&mut c, &["SETNX", "k", "x"]), 0);
    assert_eq!(query::<i64>(&mut c, &["SETNX", "n", "x"]), 1);
    assert_eq!(query::<String>(&mut c, &["GETSET", "k", "v2"]), "v1");
    assert_eq!(query::<Option<String>>(&mut c, &["GETSET", "fresh", "a"]), None);
    assert_eq!(query::<i64>(&mut c, &["APPEND", "k", "-tail"]), 7);
    assert_eq!(query::<i64>(&mut c, &["APPEND", "new", "abc"]), 3);
    assert_eq!(query::<i64>(&mut c, &["STRLEN", "k"]), 7);
    assert_eq!(query::<i64>(&mut c, &["STRLEN", "missing"]), 0);
    assert_eq!(query::<i64>(&mut c, &["INCR", "cnt"]), 1);
    assert_eq!(query::<i64>(&mut c, &["INCRBY", "cnt", "41"]), 42);
    assert_eq!(query::<i64>(&mut c, &["DECR", "cnt"]), 41);
    assert_eq!(query::<i64>(&mut c, &["DECRBY", "cnt", "-9"]), 50);
    assert_eq!(c.get::<_, String>("cnt").unwrap(), "50");
    let _: () = query(&mut c, &["MSET", "a", "1", "b", "2", "a", "3"]);
    let got: Vec<Option<String>> = query(&mut c, &["MGET", "a", "b", "nope"]);
    assert_eq!(got, vec![Some("3".into()), Some("2".into()), None]);
    // Binary values and keys survive unchanged.
    let bytes: Vec<u8> = (0..=255).collect();
    let _: () = c.set(&bytes[..], &bytes[..]).unwrap();
    assert_eq!(c.get::<_, Vec<u8>>(&bytes[..]).unwrap(), bytes);
}

#[test]
fn string_errors_have_redis_texts() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.cmd(&[b"SET", b"s", b"hello"]);
    assert_eq!(raw.cmd(&[b"INCR", b"s"]), "-ERR value is not an integer or out of range");
    assert_eq!(raw.cmd(&[b"INCRBY", b"n", b"1.5"]), "-ERR value is not an integer or out of range");
    raw.cmd(&[b"SET", b"max", b"9223372036854775807"]);
    assert_eq!(raw.cmd(&[b"INCR", b"max"]), "-ERR increment or decrement would overflow");
    assert_eq!(raw.cmd(&[b"DECRBY", b"n", b"-9223372036854775808"]), "-ERR decrement would overflow");
    raw.cmd(&[b"SET", b"lead", b"007"]);
    assert_eq!(raw.cmd(&[b"INCR", b"lead"]), "-ERR value is not an integer or out of range");
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v", b"NX", b"XX"]), "-ERR syntax error");
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v", b"EX"]), "-ERR syntax error");
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v", b"EX", b"10", b"PX", b"10"]), "-ERR syntax error");
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v", b"EX", b"0"]), "-ERR invalid expire time in 'set' command");
    assert_eq!(raw.cmd(&[b"SET", b"k", b"v", b"EX", b"ten"]), "-ERR value is not an integer or out of range");
    assert_eq!(raw.cmd(&[b"SELECT", b"1"]), "-ERR DB index is out of range");
    // Nothing above wrote: the value that was there is unchanged, the refused keys are absent.
    assert_eq!(raw.cmd(&[b"GET", b"s"]), "hello");
    assert_eq!(raw.cmd(&[b"EXISTS", b"k"]), ":0");
}

#[test]
fn set_options_and_expiry() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(query::<Option<String>>(&mut c, &["SET", "k", "1", "XX"]), None);
    assert_eq!(query::<String>(&mut c, &["SET", "k", "1", "NX"]), "OK");
    assert_eq!(query::<Option<String>>(&mut c, &["SET", "k", "2", "NX"]), None);
    assert_eq!(query::<String>(&mut c, &["SET", "k", "3", "XX", "GET"]), "1");
    assert_eq!(query::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(query::<i64>(&mut c, &["TTL", "missing"]), -2);
    let _: () = query(&mut c, &["SET", "k", "4", "EX", "100"]);
    let ttl: i64 = query(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    // KEEPTTL keeps it, a plain SET clears it, INCR and APPEND keep it.
    let _: () = query(&mut c, &["SET", "k", "5", "KEEPTTL"]);
    assert!(query::<i64>(&mut c, &["PTTL", "k"]) > 98_000);
    let _: () = query(&mut c, &["INCR", "k"]);
    assert!(query::<i64>(&mut c, &["PTTL", "k"]) > 98_000);
    let _: () = query(&mut c, &["SET", "k", "6"]);
    assert_eq!(query::<i64>(&mut c, &["PTTL", "k"]), -1);
    // PX: gone after it passes, for every command.
    let _: () = query(&mut c, &["SET", "short", "x", "PX", "150"]);
    assert_eq!(query::<i64>(&mut c, &["EXISTS", "short"]), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.get::<_, Option<String>>("short").unwrap(), None);
    assert_eq!(query::<i64>(&mut c, &["EXISTS", "short"]), 0);
    assert_eq!(query::<i64>(&mut c, &["DEL", "short"]), 0);
    assert_eq!(query::<i64>(&mut c, &["SETNX", "short", "again"]), 1);
    assert_eq!(query::<i64>(&mut c, &["TTL", "short"]), -1);
    // EXAT/PXAT in the past: the key is immediately absent.
    let _: () = query(&mut c, &["SET", "past", "x", "PXAT", "1000"]);
    assert_eq!(c.get::<_, Option<String>>("past").unwrap(), None);
    // EXPIRE / PEXPIRE / PERSIST.
    assert_eq!(query::<i64>(&mut c, &["EXPIRE", "k", "50"]), 1);
    assert!((49..=50).contains(&query::<i64>(&mut c, &["TTL", "k"])));
    assert_eq!(query::<i64>(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(query::<i64>(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(query::<i64>(&mut c, &["EXPIRE", "missing", "5"]), 0);
    assert_eq!(query::<i64>(&mut c, &["PEXPIRE", "k", "0"]), 1);
    assert_eq!(query::<i64>(&mut c, &["EXISTS", "k"]), 0);
}

#[test]
fn keys_scan_dbsize_flushdb() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..2500 {
        let _: () = c.set(format!("user:{i}"), i).unwrap();
    }
    for i in 0..10 {
        let _: () = c.set(format!("other:{i}"), i).unwrap();
    }
    let _: () = query(&mut c, &["SET", "user:gone", "x", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(query::<i64>(&mut c, &["DBSIZE"]), 2510);
    let mut keys: Vec<String> = c.keys("other:*").unwrap();
    keys.sort();
    assert_eq!(keys, (0..10).map(|i| format!("other:{i}")).collect::<Vec<_>>());
    assert_eq!(c.keys::<_, Vec<String>>("user:1??").unwrap().len(), 100);
    assert_eq!(c.keys::<_, Vec<String>>("*").unwrap().len(), 2510);
    // SCAN visits every key exactly once across calls.
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = 0u64;
    let mut calls = 0;
    loop {
        let (next, batch): (u64, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).arg("MATCH").arg("user:*").arg("COUNT").arg(100).query(&mut c).unwrap();
        for key in batch {
            assert!(seen.insert(key.clone()), "{key} returned twice");
        }
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), 2500);
    assert!(calls > 20, "COUNT 100 over 2511 rows took {calls} calls");
    let iterated: Vec<String> = c.scan_match("other:*").unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(iterated.len(), 10);
    assert_eq!(query::<i64>(&mut c, &["DEL", "other:1", "other:2", "nope"]), 2);
    assert_eq!(query::<i64>(&mut c, &["EXISTS", "other:3", "other:3", "other:1"]), 2);
    assert_eq!(query::<String>(&mut c, &["TYPE", "other:3"]), "string");
    assert_eq!(query::<String>(&mut c, &["TYPE", "other:1"]), "none");
    let _: () = query(&mut c, &["SELECT", "0"]);
    let _: () = query(&mut c, &["FLUSHDB"]);
    assert_eq!(query::<i64>(&mut c, &["DBSIZE"]), 0);
    assert!(c.keys::<_, Vec<String>>("*").unwrap().is_empty());
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&[b"SCAN", b"12345"]), "-ERR invalid cursor");
}

#[test]
fn multi_exec_queues_and_runs_atomically() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&[b"MULTI"]), "+OK");
    assert_eq!(raw.cmd(&[b"MULTI"]), "-ERR MULTI calls can not be nested");
    assert_eq!(raw.cmd(&[b"SET", b"a", b"1"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"INCR", b"a"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"SET", b"s", b"text"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"INCR", b"s"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"PING"]), "+QUEUED");
    assert_eq!(raw.cmd(&[b"EXEC"]), "[+OK, :2, +OK, -ERR value is not an integer or out of range, +PONG]");
    assert_eq!(raw.cmd(&[b"EXEC"]), "-ERR EXEC without MULTI");
    assert_eq!(raw.cmd(&[b"DISCARD"]), "-ERR DISCARD without MULTI");
    // A queueing error discards the whole transaction.
    raw.cmd(&[b"MULTI"]);
    raw.cmd(&[b"SET", b"a", b"100"]);
    assert_eq!(raw.cmd(&[b"GET"]), "-ERR wrong number of arguments for 'get' command");
    assert_eq!(raw.cmd(&[b"EXEC"]), "-EXECABORT Transaction discarded because of previous errors.");
    assert_eq!(raw.cmd(&[b"GET", b"a"]), "2");
    raw.cmd(&[b"MULTI"]);
    raw.cmd(&[b"SET", b"a", b"100"]);
    assert_eq!(raw.cmd(&[b"DISCARD"]), "+OK");
    assert_eq!(raw.cmd(&[b"GET", b"a"]), "2");
}

#[test]
fn exec_is_isolated_from_concurrent_clients() {
    // Two keys always change together inside MULTI; readers outside must never see them differ,
    // and concurrent MULTI increments must all count.
    let server = TestServer::start();
    let mut c = server.client();
    let _: () = query(&mut c, &["MSET", "x", "0", "y", "0"]);
    let (writers, rounds) = (3, 200);
    std::thread::scope(|s| {
        for _ in 0..writers {
            let mut w = server.client();
            s.spawn(move || {
                for _ in 0..rounds {
                    let (_, _): (i64, i64) = redis::pipe().atomic().incr("x", 1).incr("y", 1).query(&mut w).unwrap();
                }
            });
        }
        let mut r = server.client();
        s.spawn(move || {
            for _ in 0..300 {
                let (x, y): (i64, i64) = redis::cmd("MGET").arg("x").arg("y").query(&mut r).unwrap();
                assert_eq!(x, y, "MGET saw half of a MULTI");
            }
        });
    });
    let total: (i64, i64) = redis::cmd("MGET").arg("x").arg("y").query(&mut c).unwrap();
    assert_eq!(total, (writers * rounds, writers * rounds));
}

#[test]
fn watch_aborts_exec_when_a_watched_key_changes() {
    let server = TestServer::start();
    let mut a = server.raw();
    let mut b = server.raw();
    a.cmd(&[b"SET", b"w", b"1"]);
    assert_eq!(a.cmd(&[b"WATCH", b"w", b"unset"]), "+OK");
    assert_eq!(b.cmd(&[b"SET", b"w", b"2"]), "+OK");
    a.cmd(&[b"MULTI"]);
    assert_eq!(a.cmd(&[b"WATCH", b"w"]), "-ERR WATCH inside MULTI is not allowed");
    a.cmd(&[b"SET", b"w", b"from-a"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "(nil array)");
    assert_eq!(a.cmd(&[b"GET", b"w"]), "2");
    // A key that was absent at WATCH and is created meanwhile aborts too.
    a.cmd(&[b"WATCH", b"unset"]);
    b.cmd(&[b"SET", b"unset", b"now"]);
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"SET", b"w", b"from-a"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "(nil array)");
    // Unchanged watched keys let EXEC run; EXEC unwatches.
    a.cmd(&[b"WATCH", b"w"]);
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"SET", b"w", b"from-a"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "[+OK]");
    b.cmd(&[b"SET", b"w", b"b-again"]);
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"SET", b"w", b"a-again"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "[+OK]");
    // UNWATCH forgets.
    a.cmd(&[b"WATCH", b"w"]);
    b.cmd(&[b"SET", b"w", b"x"]);
    a.cmd(&[b"UNWATCH"]);
    a.cmd(&[b"MULTI"]);
    a.cmd(&[b"INCR", b"counter"]);
    assert_eq!(a.cmd(&[b"EXEC"]), "[:1]");
}

const PROCS: &str = "#!lazarus name=counters
table counters (name bytes not null, total int not null, primary key (name));
procedure add_to(name bytes, amount int) {
    select total into t from counters where name = name;
    if not found {
        insert into counters values (name, amount);
        return amount;
    }
    update counters set total = total + amount where name = name;
    return t + amount;
}
procedure read_two(a bytes, b bytes) {
    select v into x from redis_kv where k = a;
    select v into y from redis_kv where k = b;
    return x, y;
}
procedure copy_key(src bytes, dst bytes) {
    select v into val from redis_kv where k = src;
    if not found { return 0; }
    select v into old from redis_kv where k = dst;
    if found {
        update redis_kv set v = val, expire_at_ms = 0 where k = dst;
    } else {
        insert into redis_kv values (dst, val, 0);
    }
    return len(val);
}
procedure refuse(k bytes) {
    insert into redis_kv values (k, x'00', 0);
    abort 'refused';
}
";

#[test]
fn functions_register_and_call_procedures() {
    let server = TestServer::start();
    let mut c = server.client();
    let loaded: Result<String, _> = redis::cmd("FUNCTION").arg("LOAD").arg(PROCS).query(&mut c);
    assert_eq!(loaded.as_deref().map_err(|e| e.to_string()), Ok("counters"));
    assert_eq!(query::<i64>(&mut c, &["FCALL", "add_to", "1", "acct", "5"]), 5);
    assert_eq!(query::<i64>(&mut c, &["FCALL", "add_to", "1", "acct", "7"]), 12);
    let _: () = c.set("src", "hello").unwrap();
    assert_eq!(query::<i64>(&mut c, &["FCALL", "copy_key", "2", "src", "dst"]), 5);
    assert_eq!(c.get::<_, String>("dst").unwrap(), "hello");
    let _: () = c.set("other", "x").unwrap();
    let both: Vec<Option<String>> = query(&mut c, &["FCALL_RO", "read_two", "2", "dst", "other"]);
    assert_eq!(both, vec![Some("hello".into()), Some("x".into())]);
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&[b"FCALL_RO", b"add_to", b"1", b"acct", b"1"]),
        "-ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(raw.cmd(&[b"FCALL", b"nope", b"0"]), "-ERR Function not found");
    assert_eq!(raw.cmd(&[b"FCALL", b"add_to", b"3", b"a"]), "-ERR Number of keys can't be greater than number of args");
    assert_eq!(raw.cmd(&[b"FCALL", b"add_to", b"1", b"acct", b"x"]), "-ERR value is not an integer or out of range");
    // An abort writes nothing.
    assert_eq!(raw.cmd(&[b"FCALL", b"refuse", b"1", b"r"]), "-ERR refused");
    assert_eq!(raw.cmd(&[b"EXISTS", b"r"]), ":0");
    let bad = raw.cmd(&[b"FUNCTION", b"LOAD", b"procedure broken( {"]);
    assert!(bad.starts_with("-ERR Error compiling function: "), "{bad}");
    let lua = raw.cmd(&[b"FUNCTION", b"LOAD", b"#!lua name=x\nreturn 1"]);
    assert!(lua.starts_with("-ERR Engine not found"), "{lua}");
    let again = raw.cmd(&[b"FUNCTION", b"LOAD", PROCS.as_bytes()]);
    assert!(again.starts_with("-ERR") && again.contains("already exists"), "{again}");
    let list = raw.cmd(&[b"FUNCTION", b"LIST"]);
    assert!(list.contains("add_to") && list.contains("read_two"), "{list}");
    // FCALL inside MULTI runs in EXEC's transaction.
    raw.cmd(&[b"MULTI"]);
    raw.cmd(&[b"FCALL", b"add_to", b"1", b"acct", b"1"]);
    raw.cmd(&[b"SET", b"src", b"bye"]);
    raw.cmd(&[b"FCALL", b"copy_key", b"2", b"src", b"dst"]);
    raw.cmd(&[b"GET", b"dst"]);
    assert_eq!(raw.cmd(&[b"EXEC"]), "[:13, +OK, :3, bye]");
}

#[test]
fn connection_and_server_commands() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&[b"PING"]), "+PONG");
    assert_eq!(raw.cmd(&[b"PING", b"hi"]), "hi");
    assert_eq!(raw.cmd(&[b"ECHO", b"x y"]), "x y");
    assert_eq!(raw.cmd(&[b"CLIENT", b"GETNAME"]), "(nil)");
    assert_eq!(raw.cmd(&[b"CLIENT", b"SETNAME", b"tester"]), "+OK");
    assert_eq!(raw.cmd(&[b"CLIENT", b"GETNAME"]), "tester");
    assert_eq!(
        raw.cmd(&[b"CLIENT", b"SETNAME", b"has space"]),
        "-ERR Client names cannot contain spaces, newlines or special characters."
    );
    let id = raw.cmd(&[b"CLIENT", b"ID"]);
    let other_id = server.raw().cmd(&[b"CLIENT", b"ID"]);
    assert!(id.starts_with(':') && id != other_id, "{id} {other_id}");
    let hello = raw.cmd(&[b"HELLO", b"2"]);
    assert!(hello.contains("proto, :2") && hello.contains("server, redis"), "{hello}");
    assert_eq!(raw.cmd(&[b"HELLO", b"3"]), "-NOPROTO unsupported protocol version");
    let info = raw.cmd(&[b"INFO"]);
    for needle in
        ["# Server", "redis_version:", "# Persistence", "# Recovery", "recovery_state:done", "recovery_percent:100"]
    {
        assert!(info.contains(needle), "INFO lacks {needle}");
    }
    let only = raw.cmd(&[b"INFO", b"recovery"]);
    assert!(only.contains("recovery_keys_restored_on_demand:") && !only.contains("# Server"), "{only}");
    // The fields `redis-cli --stat` reads as numbers (it printed i64::MIN for missing ones).
    let memory = raw.cmd(&[b"INFO", b"memory"]);
    let field = |info: &str, name: &str| -> u64 {
        let line =
            info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).unwrap_or_else(|| panic!("{info}"));
        line.trim().parse().unwrap_or_else(|_| panic!("{name}: {line}"))
    };
    let (used, peak) = (field(&memory, "used_memory"), field(&memory, "used_memory_peak"));
    // The peak comes from another kernel counter than the resident set (updated in per-CPU
    // batches, so it can read a little below it): only a gross disagreement fails.
    assert!(used > 1 << 20 && peak >= used / 2, "a running server has more than a MiB resident: {memory}");
    assert!(memory.contains("used_memory_human:") && memory.contains("maxmemory:0"), "{memory}");
    assert_eq!(field(&raw.cmd(&[b"INFO", b"clients"]), "blocked_clients"), 0);
    assert_eq!(raw.cmd(&[b"CONFIG", b"GET", b"appendonly"]), "[appendonly, no]");
    assert_eq!(raw.cmd(&[b"CONFIG", b"GET", b"save"]), "[save, ]");
    assert_eq!(raw.cmd(&[b"CONFIG", b"GET", b"no-such-param"]), "[]");
    assert_eq!(raw.cmd(&[b"CONFIG", b"SET", b"save", b"3600 1"]), "+OK");
    assert_eq!(raw.cmd(&[b"CONFIG", b"GET", b"save"]), "[save, 3600 1]");
    assert_eq!(raw.cmd(&[b"CONFIG", b"SET", b"appendonly", b"no"]), "+OK");
    assert!(raw.cmd(&[b"CONFIG", b"SET", b"appendonly", b"yes"]).starts_with("-ERR CONFIG SET failed"));
    assert_eq!(
        raw.cmd(&[b"CONFIG", b"SET", b"nope", b"1"]),
        "-ERR Unknown option or number of arguments for CONFIG SET - 'nope'"
    );
    let count = raw.cmd(&[b"COMMAND", b"COUNT"]);
    let n: usize = count.trim_start_matches(':').parse().unwrap();
    assert!(n >= 40, "{count}");
    let docs = raw.cmd(&[b"COMMAND", b"DOCS", b"get"]);
    assert!(docs.starts_with("[get, [summary,"), "{docs}");
    let info_get = raw.cmd(&[b"COMMAND", b"INFO", b"get"]);
    assert!(info_get.starts_with("[[get, :2, [+readonly, +fast], :1, :1, :1"), "{info_get}");
    let all = raw.cmd(&[b"COMMAND"]);
    assert!(all.contains("[mset, :-3"), "COMMAND lacks mset");
    let time = raw.cmd(&[b"TIME"]);
    assert!(time.starts_with('[') && time.matches(", ").count() == 1, "{time}");
}

#[test]
fn shutdown_closes_every_connection() {
    let server = TestServer::start();
    let mut idle = server.raw();
    let mut c = server.client();
    let _: () = c.set("k", "v").unwrap();
    let stopped: redis::RedisResult<Value> = redis::cmd("SHUTDOWN").query(&mut c);
    assert!(stopped.is_err(), "SHUTDOWN replied {stopped:?}");
    assert!(idle.closed());
    // The listener closes once the accept loop has seen the request.
    let refused = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect_timeout(&server.addr, Duration::from_millis(500)).is_err()
    });
    assert!(refused, "the server still accepts connections after SHUTDOWN");
}

/// Rows stored in the keyspace table, expired ones included (what the sweep must reclaim).
fn stored_rows(server: &TestServer) -> usize {
    use lazarus::storage::{Direction, KeyRange};
    let table = server.db.catalog().table_by_name(lazarus::server::keyspace::TABLE).unwrap().id;
    let scan =
        lazarus::txn::Scan { table, index: None, range: KeyRange::all(), direction: Direction::Forward, limit: 10_000 };
    let mut worker = server.db.worker();
    let (rows, _) = worker.run(10, |tx| tx.scan(&scan)).unwrap();
    rows.len()
}

#[test]
fn the_expiry_sweep_reclaims_expired_rows() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..1200 {
        pipe.cmd("SET").arg(format!("e{i}")).arg("x").arg("PX").arg(300).ignore();
    }
    for i in 0..10 {
        pipe.cmd("SET").arg(format!("keep{i}")).arg("x").ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    assert!(stored_rows(&server) > 1000, "rows swept before they expired");
    let started = std::time::Instant::now();
    while stored_rows(&server) > 10 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(stored_rows(&server), 10, "expired rows were not reclaimed");
    assert_eq!(query::<i64>(&mut c, &["DBSIZE"]), 10);
}
