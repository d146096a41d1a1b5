//! `lazarus serve --durability indexed|indexed-sync`: instant restart. Requests during the restore
//! get correct answers for restored, not-yet-restored and absent keys (the walk is held paused,
//! not raced with sleeps); INFO's `recovery` section reports the restore; SIGKILL under a SET
//! load (our own oracle client, and redis-benchmark beside it when installed) loses no
//! acknowledged write.

mod server_common;

use lazarus::durability::LogScheme;
use lazarus::durability::indexed::{IndexMode, IndexedLogging, IndexedOptions};
use lazarus::server::{Server, ServerConfig, ShutdownHandle};
use lazarus::{Database, DatabaseConfig};
use server_common::{ChildServer, RawConn, have, oracle_writer, verify_acked};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// An in-process server over an indexed scheme in `dir`.
struct InstantServer {
    addr: std::net::SocketAddr,
    db: Database,
    scheme: Arc<IndexedLogging>,
    handle: ShutdownHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InstantServer {
    fn start(dir: &Path, mode: IndexMode, restore_paused: bool) -> InstantServer {
        // As `lazarus serve` does: the restart's timeline in INFO counts from before recovery.
        let started = std::time::Instant::now();
        let mut options = IndexedOptions::new(vec![dir.to_path_buf()], mode);
        options.restore_paused = restore_paused;
        let scheme = Arc::new(IndexedLogging::new(options).unwrap());
        let config = DatabaseConfig {
            epoch_interval_ms: 2,
            scheme: Arc::clone(&scheme) as Arc<dyn LogScheme>,
            ..Default::default()
        };
        let db = Database::open(config).unwrap();
        // One event loop: every connection shares it, so a request that waited for the restore
        // on the loop would stall the others (checked below).
        let server_config =
            ServerConfig { bind: "127.0.0.1:0".into(), workers: 4, io_threads: 1, started, ..ServerConfig::default() };
        let server = Server::bind(db.clone(), server_config, Arc::clone(&scheme) as _).unwrap();
        let (addr, handle) = (server.local_addr(), server.shutdown_handle());
        let thread = std::thread::spawn(move || server.run().unwrap());
        InstantServer { addr, db, scheme, handle, thread: Some(thread) }
    }

    fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/", self.addr)).unwrap().get_connection().unwrap()
    }

    fn stop(mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.db.close().unwrap();
    }
}

/// The `recovery` section of INFO as field → value.
fn recovery_info(c: &mut redis::Connection) -> std::collections::HashMap<String, String> {
    let info: String = redis::cmd("INFO").arg("recovery").query(c).unwrap();
    info.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.trim().to_string())).collect()
}

#[test]
fn requests_during_the_restore_get_correct_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = InstantServer::start(dir.path(), IndexMode::Async, false);
    let mut c = server.client();
    let keys = 3000;
    for chunk in (0..keys).collect::<Vec<i64>>().chunks(500) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("SET").arg(format!("k{i:05}")).arg(format!("v{i}")).ignore();
        }
        let () = pipe.query(&mut c).unwrap();
    }
    for i in (0..keys).step_by(3) {
        let _: i64 = redis::cmd("DEL").arg(format!("k{i:05}")).query(&mut c).unwrap();
    }
    let live: std::collections::BTreeSet<String> =
        (0..keys).filter(|i| i % 3 != 0).map(|i| format!("k{i:05}")).collect();
    drop(c);
    server.stop();

    let server = InstantServer::start(dir.path(), IndexMode::Async, true);
    let mut c = server.client();
    let info = recovery_info(&mut c);
    assert_eq!(info["recovery_state"], "restoring", "{info:?}");
    assert_eq!(info["recovery_percent"], "0.0", "the walk moved while paused: {info:?}");
    assert_eq!(info["recovery_first_fetch_ms"], "-1", "no request has fetched a key yet: {info:?}");
    // Not yet restored (fetched on demand), deleted before the restart, and never existing.
    assert_eq!(redis::cmd("GET").arg("k00001").query::<Option<String>>(&mut c).unwrap().as_deref(), Some("v1"));
    assert_eq!(redis::cmd("GET").arg("k02999").query::<Option<String>>(&mut c).unwrap().as_deref(), Some("v2999"));
    assert_eq!(redis::cmd("GET").arg("k00003").query::<Option<String>>(&mut c).unwrap(), None);
    assert_eq!(redis::cmd("GET").arg("nokey").query::<Option<String>>(&mut c).unwrap(), None);
    let exists: i64 = redis::cmd("EXISTS").arg("k00002").arg("k00006").arg("k00007").query(&mut c).unwrap();
    assert_eq!(exists, 2);
    let values: Vec<Option<String>> = redis::cmd("MGET").arg("k00004").arg("k00009").arg("zz").query(&mut c).unwrap();
    assert_eq!(values, vec![Some("v4".to_string()), None, None]);
    // Writes during the restore stay what they are once the walk passes their keys.
    let _: () = redis::cmd("SET").arg("k00005").arg("new").query(&mut c).unwrap();
    let _: i64 = redis::cmd("DEL").arg("k00008").query(&mut c).unwrap();
    let _: i64 = redis::cmd("INCR").arg("k00003").query(&mut c).unwrap();
    let _: () = redis::cmd("APPEND").arg("k00010").arg("+").query(&mut c).unwrap();
    let info = recovery_info(&mut c);
    let on_demand: u64 = info["recovery_keys_restored_on_demand"].parse().unwrap();
    assert!(on_demand >= 10, "{info:?}");
    assert_eq!(info["recovery_state"], "restoring");
    // The restart's timeline: the server listened, then the first GET above fetched its key.
    let (listening_ms, first_fetch_ms): (f64, f64) =
        (info["recovery_listening_ms"].parse().unwrap(), info["recovery_first_fetch_ms"].parse().unwrap());
    assert!(listening_ms > 0.0 && first_fetch_ms > listening_ms, "{info:?}");
    assert_eq!((info["recovery_walk_cpu_ms"].as_str(), info["recovery_process_cpu_ms"].as_str()), ("0.0", "0.0"));
    // Early in the restore the walk's share is front-loaded: above its mean, the default.
    let share: f64 = info["recovery_walk_share"].parse().unwrap();
    assert!(share > lazarus::durability::indexed::restorer::RESTORE_CPU_SHARE && share < 1.0, "{info:?}");
    // DBSIZE and KEYS wait for the walk; issued now, they must see the whole keyspace.
    let addr = server.addr;
    let sizes = std::thread::spawn(move || {
        let mut raw = RawConn::connect(addr);
        (raw.cmd(&[b"DBSIZE"]), raw.cmd(&[b"KEYS", b"k0000*"]))
    });
    // While DBSIZE waits for the paused walk, the loop goes on serving the other connections.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut other = RawConn::connect(addr);
    other.set_read_timeout(std::time::Duration::from_secs(10));
    other.send(&server_common::encode(&[b"GET", b"k01001"]));
    let served = other.try_reply();
    server.scheme.set_restore_paused(false);
    assert_eq!(served.as_deref(), Some("v1001"), "a request waited behind DBSIZE's wait for the restore");
    server.scheme.wait_restored();
    let (dbsize, keys_reply) = sizes.join().unwrap();
    let mut want = live.clone();
    want.remove("k00008");
    want.insert("k00003".into());
    assert_eq!(dbsize, format!(":{}", want.len()));
    assert_eq!(keys_reply, "[k00001, k00002, k00003, k00004, k00005, k00007]");
    assert_eq!(redis::cmd("GET").arg("k00005").query::<Option<String>>(&mut c).unwrap().as_deref(), Some("new"));
    assert_eq!(redis::cmd("GET").arg("k00003").query::<Option<String>>(&mut c).unwrap().as_deref(), Some("1"));
    assert_eq!(redis::cmd("GET").arg("k00008").query::<Option<String>>(&mut c).unwrap(), None);
    assert_eq!(redis::cmd("GET").arg("k00010").query::<Option<String>>(&mut c).unwrap().as_deref(), Some("v10+"));
    assert_eq!(redis::cmd("GET").arg("k01000").query::<Option<String>>(&mut c).unwrap().as_deref(), Some("v1000"));
    let info = recovery_info(&mut c);
    assert_eq!((info["recovery_state"].as_str(), info["recovery_percent"].as_str()), ("done", "100.0"), "{info:?}");
    assert_eq!(info["recovery_walk_share"], "1.000", "{info:?}");
    // The walk's CPU is counted, and is part of what the whole server spent meanwhile.
    let cpu_ms = |field: &str| info[field].parse::<f64>().unwrap();
    assert!(cpu_ms("recovery_walk_cpu_ms") > 0.0, "{info:?}");
    assert!(cpu_ms("recovery_process_cpu_ms") >= cpu_ms("recovery_walk_cpu_ms"), "{info:?}");
    // So is the CPU of the threads that fetched the keys the requests above missed.
    assert!(cpu_ms("recovery_fetch_cpu_ms") > 0.0, "{info:?}");
    // The governor's counts are reported (numbers, whatever this machine's idle time made them).
    assert!(cpu_ms("recovery_walk_held_ms") >= 0.0 && cpu_ms("recovery_walk_spare_ms") >= 0.0, "{info:?}");
    drop(c);
    server.stop();
}

/// A GET of a key the (paused) walk has not restored is answered from the indexed log without
/// restoring the key: INFO counts it read ahead, and nothing restored. A second GET of the key
/// restores it. A key that expired before the restart reads as absent, a write after a read
/// ahead wins, and pipelined GETs of keys not restored come back in order.
#[test]
fn a_get_during_the_restore_reads_ahead_and_a_second_get_restores() {
    let dir = tempfile::tempdir().unwrap();
    let server = InstantServer::start(dir.path(), IndexMode::Async, false);
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..100 {
        pipe.cmd("SET").arg(format!("k{i:03}")).arg(format!("v{i}")).ignore();
    }
    pipe.cmd("SET").arg("short").arg("lived").arg("PX").arg(100).ignore();
    let () = pipe.query(&mut c).unwrap();
    drop(c);
    server.stop();
    std::thread::sleep(Duration::from_millis(150));

    let server = InstantServer::start(dir.path(), IndexMode::Async, true);
    let mut c = server.client();
    let get = |c: &mut redis::Connection, key: &str| redis::cmd("GET").arg(key).query::<Option<String>>(c).unwrap();
    // (read ahead, restored on demand, restored)
    let counts = |c: &mut redis::Connection| {
        let info = recovery_info(c);
        let field = |name: &str| info[name].parse::<u64>().unwrap();
        (field("recovery_keys_read_ahead"), field("recovery_keys_restored_on_demand"), field("recovery_keys_restored"))
    };
    assert_eq!(get(&mut c, "k001").as_deref(), Some("v1"));
    assert_eq!(get(&mut c, "nokey"), None);
    assert_eq!(get(&mut c, "short"), None, "a key expired before the restart");
    assert_eq!(counts(&mut c), (3, 0, 0), "a GET restored its key");
    assert_eq!(get(&mut c, "k001").as_deref(), Some("v1"));
    assert_eq!(counts(&mut c), (3, 1, 1), "the second GET of a key did not restore it");
    assert_eq!(get(&mut c, "k001").as_deref(), Some("v1"));
    assert_eq!(counts(&mut c), (3, 1, 1), "a GET of a restored key went to the indexed log");
    assert_eq!(get(&mut c, "k002").as_deref(), Some("v2"));
    let () = redis::cmd("SET").arg("k002").arg("new").query(&mut c).unwrap();
    assert_eq!(get(&mut c, "k002").as_deref(), Some("new"));
    let mut pipe = redis::pipe();
    for i in 10..60 {
        pipe.cmd("GET").arg(format!("k{i:03}"));
        pipe.cmd("PING");
    }
    let got: Vec<String> = pipe.query(&mut c).unwrap();
    let want: Vec<String> = (10..60).flat_map(|i| [format!("v{i}"), "PONG".to_string()]).collect();
    assert_eq!(got, want);
    assert_eq!(counts(&mut c), (54, 2, 2));
    server.scheme.set_restore_paused(false);
    server.scheme.wait_restored();
    for (key, want) in [("k001", Some("v1")), ("k002", Some("new")), ("k050", Some("v50")), ("short", None)] {
        assert_eq!(get(&mut c, key).as_deref(), want, "{key} after the walk");
    }
    drop(c);
    server.stop();
}

fn sigkill_under_set_load(durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let server = ChildServer::start(dir.path(), &["--durability", durability]);
        let port = server.addr.port().to_string();
        let bench = have("redis-benchmark").then(|| {
            Command::new("redis-benchmark")
                .args(["-h", "127.0.0.1", "-p", &port, "-t", "set", "-n", "100000000", "-r", "100000", "-c", "20"])
                .args(["-P", "8", "-q"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-benchmark")
        });
        let stop = AtomicBool::new(false);
        let acked = AtomicU64::new(0);
        let prefix = format!("oracle{round}:");
        std::thread::scope(|s| {
            let (addr, stop, acked, prefix) = (server.addr, &stop, &acked, &prefix);
            s.spawn(move || oracle_writer(addr, prefix, 10, stop, acked));
            // Kill once the oracle has a few thousand acknowledged writes (not after a fixed time).
            while acked.load(Ordering::SeqCst) < 3000 {
                std::thread::sleep(Duration::from_millis(5));
            }
            server.kill();
            stop.store(true, Ordering::SeqCst);
        });
        if let Some(mut bench) = bench {
            let _ = bench.kill();
            let _ = bench.wait();
        }
        let acked = acked.load(Ordering::SeqCst);
        let server = ChildServer::start(dir.path(), &["--durability", durability]);
        let mut c = server.client();
        let _ = verify_acked(&mut c, &prefix, acked);
        if round == 1 {
            let _ = verify_acked(&mut c, "oracle0:", 3000);
        }
        eprintln!("{durability} round {round}: {acked} acknowledged writes present after SIGKILL and restart");
        server.kill();
    }
}

#[test]
fn sigkill_under_a_set_load_loses_no_acknowledged_write_ailir() {
    sigkill_under_set_load("indexed");
}

#[test]
fn sigkill_under_a_set_load_loses_no_acknowledged_write_silir() {
    sigkill_under_set_load("indexed-sync");
}

#[test]
fn instant_bench_writes_timelines_the_report_reads() {
    instant_bench_writes_timelines(&[], "read-write", 19100, 2);
}

/// `--in-place`: each workload crashes its own server (a preload each) and restarts it on the
/// same directory.
#[test]
fn instant_bench_in_place_writes_timelines_the_report_reads() {
    instant_bench_writes_timelines(&["--in-place"], "read-write,read-only", 19200, 4);
}

/// A Redis target without `redis-server` is refused before any preload, with what to install.
#[test]
fn instant_bench_refuses_redis_targets_without_redis_server_at_once() {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .args(["instant-bench", "--keys", "300", "--targets", "ailir,redis-everysec", "--workloads", "read-only"])
        .args(["--clients", "4", "--duration-s", "1", "--first-port", "19300", "--out"])
        .arg(out.path())
        .env("PATH", out.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("need redis-server on the PATH"), "{stderr}");
    assert!(!stderr.contains("keys preloaded"), "a target ran before the refusal: {stderr}");
}

/// Runs instant-bench over SLR and AILIR with `workloads` (read-write among them), checks the
/// read-write timelines and summary, and that the servers were preloaded `preloads` times.
fn instant_bench_writes_timelines(extra: &[&str], workloads: &str, first_port: u16, preloads: usize) {
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lazarus"))
        .args(["instant-bench", "--keys", "300", "--targets", "slr,ailir", "--workloads", workloads])
        .args(["--clients", "4", "--duration-s", "1.5", "--settle-s", "0.2", "--first-port"])
        .arg(first_port.to_string())
        .args(extra)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stderr.matches("keys preloaded").count(), preloads, "{stderr}");
    for target in ["slr", "ailir"] {
        let path = out.path().join(format!("read-write-{target}.csv"));
        let text = std::fs::read_to_string(&path).unwrap();
        let timeline = lazarus::report::input::parse_timeline(&path, &text).unwrap();
        assert_eq!(timeline.windows.len(), 3, "{target}: 1.5 s in 0.5 s windows");
        let served: u64 = timeline.windows.iter().map(|w| w.committed).sum();
        assert!(served > 0, "{target}: no request served after the restart");
    }
    let summary = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 1 + 2 * workloads.split(',').count(), "{summary}");
    let ailir = summary.lines().find(|l| l.starts_with("ailir,read-write,300,")).unwrap_or_else(|| panic!("{summary}"));
    // The server's own startup timeline, from its last INFO: it listened a positive time after
    // its start (the last column, the first fetch, is empty when no request missed).
    let header: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|&c| c == "server_listening_ms").unwrap();
    let listening_ms: f64 = ailir.split(',').nth(column).unwrap().parse().unwrap_or_else(|e| panic!("{e}: {summary}"));
    assert!(listening_ms > 0.0, "{summary}");
}

#[test]
fn sigkill_under_a_set_load_loses_no_acknowledged_write_taurus_data() {
    sigkill_under_set_load("taurus-data");
}

#[test]
fn sigkill_under_a_set_load_loses_no_acknowledged_write_serial_cmd() {
    sigkill_under_set_load("serial-cmd");
}
