//! Durability of `lazarus serve`: SIGKILL a child server while clients write, restart it on the
//! same log directory, and check that every write the server acknowledged is there. Also the
//! Redis tools (redis-cli, redis-benchmark) against the server, when they are installed.

mod server_common;

use server_common::{ChildServer, TestServer, encode, have, oracle_writer, verify_acked};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const COUNTER_PROC: &str = "#!lazarus name=tally
table tally (name bytes not null, total int not null, primary key (name));
procedure bump(name bytes) {
    select total into t from tally where name = name;
    if not found { insert into tally values (name, 1); return 1; }
    update tally set total = total + 1 where name = name;
    return t + 1;
}
";

#[test]
fn acknowledged_writes_survive_sigkill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = ChildServer::start(dir.path(), &[]);
    let mut c = server.client();
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(COUNTER_PROC).query(&mut c).unwrap();
    for _ in 0..3 {
        let _: i64 = redis::cmd("FCALL").arg("bump").arg(1).arg("runs").query(&mut c).unwrap();
    }
    let _: () = redis::cmd("SET").arg("long").arg("lives").arg("EX").arg(1000).query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("short").arg("dies").arg("PX").arg(300).query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("deleted").arg("x").query(&mut c).unwrap();
    let _: i64 = redis::cmd("DEL").arg("deleted").query(&mut c).unwrap();
    let (_, _): (i64, i64) = redis::pipe().atomic().incr("pair:a", 1).incr("pair:b", 1).query(&mut c).unwrap();
    // Writers are busy when the kill comes.
    let stop = AtomicBool::new(false);
    let acked: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        for (w, counter) in acked.iter().enumerate() {
            let (stop, addr) = (&stop, server.addr);
            s.spawn(move || oracle_writer(addr, &format!("w{w}:"), 1 + 20 * w as u64, stop, counter));
        }
        std::thread::sleep(Duration::from_millis(700));
        server.kill();
        stop.store(true, Ordering::SeqCst);
    });
    let acked: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    assert!(acked.iter().all(|&n| n > 0), "no write acknowledged before the kill: {acked:?}");
    std::thread::sleep(Duration::from_millis(350));

    let server = ChildServer::start(dir.path(), &[]);
    let mut c = server.client();
    for (w, &n) in acked.iter().enumerate() {
        let extra = verify_acked(&mut c, &format!("w{w}:"), n);
        eprintln!("writer {w}: {n} acknowledged writes present, {extra} unacknowledged ones also made it");
    }
    assert_eq!(redis::cmd("GET").arg("long").query::<Option<String>>(&mut c).unwrap().as_deref(), Some("lives"));
    let ttl: i64 = redis::cmd("TTL").arg("long").query(&mut c).unwrap();
    assert!((990..=1000).contains(&ttl), "expiry not kept across recovery: ttl {ttl}");
    assert_eq!(redis::cmd("GET").arg("short").query::<Option<String>>(&mut c).unwrap(), None, "expired key came back");
    assert_eq!(redis::cmd("EXISTS").arg("deleted").query::<i64>(&mut c).unwrap(), 0, "deleted key came back");
    let pair: (i64, i64) = redis::cmd("MGET").arg("pair:a").arg("pair:b").query(&mut c).unwrap();
    assert_eq!(pair, (1, 1));
    // The procedure and its table came back with the catalog.
    let runs: i64 = redis::cmd("FCALL").arg("bump").arg(1).arg("runs").query(&mut c).unwrap();
    assert_eq!(runs, 4);
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    assert!(info.contains("lazarus_durability:value") && info.contains("aof_enabled:1"), "{info}");
}

#[test]
fn no_acknowledged_write_is_lost_when_killed_under_redis_benchmark_load() {
    if !have("redis-benchmark") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = ChildServer::start(dir.path(), &[]);
    let port = server.addr.port().to_string();
    let mut bench = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port, "-t", "set", "-n", "100000000", "-r", "1000000", "-c", "20", "-P", "8"])
        .args(["-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-benchmark");
    // redis-benchmark's own acknowledgements are not visible to us; our own client, writing
    // beside it, is the oracle: it knows exactly which of its writes were acknowledged.
    let stop = AtomicBool::new(false);
    let acked = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        let (addr, stop, acked) = (server.addr, &stop, &acked);
        s.spawn(move || oracle_writer(addr, "oracle:", 10, stop, acked));
        std::thread::sleep(Duration::from_millis(1500));
        server.kill();
        stop.store(true, Ordering::SeqCst);
    });
    let _ = bench.kill();
    let _ = bench.wait();
    let acked = acked.load(Ordering::SeqCst);
    assert!(acked > 0, "the oracle got no acknowledgement in {:?}", started.elapsed());
    let server = ChildServer::start(dir.path(), &[]);
    let mut c = server.client();
    let extra = verify_acked(&mut c, "oracle:", acked);
    let bench_keys: Vec<String> = redis::cmd("KEYS").arg("key:*").query(&mut c).unwrap();
    eprintln!("oracle: {acked} acknowledged writes present (+{extra}); {} redis-benchmark keys", bench_keys.len());
    assert!(!bench_keys.is_empty(), "none of redis-benchmark's writes survived");
}

#[test]
fn redis_cli_works_against_the_server() {
    if !have("redis-cli") {
        return;
    }
    let server = TestServer::start();
    let port = server.addr.port().to_string();
    let cli = |args: &[&str]| -> String {
        let out =
            Command::new("redis-cli").args(["-h", "127.0.0.1", "-p", &port]).args(args).output().expect("redis-cli");
        assert!(out.status.success(), "redis-cli {args:?} failed");
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "greeting", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "greeting"]), "hello world");
    assert_eq!(cli(&["INCRBY", "n", "5"]), "5");
    assert_eq!(cli(&["GET", "nope"]), "");
    assert!(cli(&["INFO", "recovery"]).contains("recovery_state:done"));
    assert_eq!(cli(&["FOO", "x"]), "ERR unknown command 'FOO', with args beginning with: 'x'");
    // Mass insertion: redis-cli --pipe sends raw RESP as fast as it can and counts the replies.
    let mut wire = Vec::new();
    for i in 0..5000 {
        wire.extend(encode(&[b"SET", format!("pipe:{i}").as_bytes(), b"x"]));
    }
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port, "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli --pipe");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &wire).unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("errors: 0, replies: 5000"), "{report}");
    assert_eq!(cli(&["DBSIZE"]), "5002");
}

#[test]
fn redis_benchmark_runs_against_the_server() {
    if !have("redis-benchmark") {
        return;
    }
    let server = TestServer::start();
    let port = server.addr.port().to_string();
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port, "-t", "ping,set,get,incr,mset", "-n", "2000", "-r", "100", "-q"])
        .args(["-c", "10", "-P", "4"])
        .output()
        .expect("redis-benchmark");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    for test in ["PING_INLINE", "SET", "GET", "INCR", "MSET"] {
        let found = report.split(['\r', '\n']).map(str::trim).any(|line| {
            line.strip_prefix(test)
                .is_some_and(|rest| rest.starts_with([':', ' ']) && rest.contains("requests per second"))
        });
        assert!(found, "no {test} result in {report}");
    }
    let mut c = server.client();
    let counter: i64 = redis::cmd("GET").arg("counter:__rand_int__").query(&mut c).unwrap_or(0);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert!(keys.len() > 10 && keys.len() <= 300, "{} keys after a -r 100 run", keys.len());
    // INCR runs on counter:<rand>: the counters together hold every increment.
    let counters: Vec<String> = keys.into_iter().filter(|k| k.starts_with("counter:")).collect();
    let total: i64 = counters.iter().map(|k| redis::cmd("GET").arg(k).query::<i64>(&mut c).unwrap()).sum();
    assert_eq!(total, 2000, "INCR lost or doubled increments (one counter {counter})");
}
