//! What the server tests share: an in-process server on an ephemeral port, raw RESP I/O, and a
//! `lazarus serve` child process.
#![allow(dead_code)]

use lazarus::server::{RecoveryInfo, Server, ServerConfig, ShutdownHandle};
use lazarus::{Database, DatabaseConfig};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A server running in this process (durability `none`), stopped on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    pub db: Database,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::with_config(DatabaseConfig::default())
    }

    pub fn with_config(config: DatabaseConfig) -> TestServer {
        TestServer::with_loops(config, ServerConfig::default().io_threads)
    }

    /// A server whose connections are served by `io_threads` event loops.
    pub fn with_loops(config: DatabaseConfig, io_threads: usize) -> TestServer {
        let db = Database::open(config).expect("open database");
        let config = ServerConfig { bind: "127.0.0.1:0".into(), workers: 4, io_threads, ..ServerConfig::default() };
        let server = Server::bind(db.clone(), config, Arc::new(RecoveryInfo::default())).expect("bind");
        let (addr, handle) = (server.local_addr(), server.shutdown_handle());
        let thread = std::thread::spawn(move || server.run().expect("server run"));
        TestServer { addr, db, handle, thread: Some(thread) }
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/", self.addr)).expect("client").get_connection().expect("connect")
    }

    pub fn raw(&self) -> RawConn {
        RawConn::connect(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A plain TCP connection that writes bytes and reads replies as text (`+OK`, `:1`, `$-1`,
/// `*2 [..]`), so tests compare exact wire replies.
pub struct RawConn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl RawConn {
    pub fn connect(addr: SocketAddr) -> RawConn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        RawConn { reader: BufReader::new(stream.try_clone().expect("clone")), writer: stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write");
    }

    /// One reply, rendered as text; `None` if the server closed the connection.
    pub fn reply(&mut self) -> Option<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches("\r\n").to_string();
        match line.as_bytes().first()? {
            b'$' => {
                let len: i64 = line[1..].parse().ok()?;
                if len < 0 {
                    return Some("(nil)".into());
                }
                let mut body = vec![0; len as usize + 2];
                self.reader.read_exact(&mut body).ok()?;
                body.truncate(len as usize);
                Some(String::from_utf8_lossy(&body).into_owned())
            }
            b'*' => {
                let count: i64 = line[1..].parse().ok()?;
                if count < 0 {
                    return Some("(nil array)".into());
                }
                let items: Option<Vec<String>> = (0..count).map(|_| self.reply()).collect();
                Some(format!("[{}]", items?.join(", ")))
            }
            _ => Some(line),
        }
    }

    pub fn set_read_timeout(&mut self, timeout: Duration) {
        self.writer.set_read_timeout(Some(timeout)).expect("timeout");
    }

    /// A reply if one arrives before the read timeout.
    pub fn try_reply(&mut self) -> Option<String> {
        self.reply()
    }

    /// Sends a command in RESP and returns its reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> String {
        self.send(&encode(args));
        self.reply().expect("reply")
    }

    /// Whether the server closed the connection (reads EOF).
    pub fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.reader.read(&mut byte), Ok(0) | Err(_))
    }
}

/// RESP encoding of a command.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A `lazarus serve` child process on an ephemeral port.
pub struct ChildServer {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ChildServer {
    pub fn start(dir: &std::path::Path, extra: &[&str]) -> ChildServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lazarus"))
            .args(["serve", "--port", "0", "--dir"])
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lazarus serve");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines.next().expect("lazarus serve exited before listening").expect("stderr line");
            if let Some(rest) = line.strip_prefix("lazarus serve: listening on ") {
                let addr = rest.split_whitespace().next().expect("address");
                break addr.parse().expect("socket address");
            }
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        ChildServer { child, addr }
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://{}/", self.addr)).expect("client").get_connection().expect("connect")
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("wait");
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether an external program is installed; prints why a case is skipped when it is not.
pub fn have(program: &str) -> bool {
    let found = Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !found {
        eprintln!("skipped: {program} is not installed (apt-get install redis-tools)");
    }
    found
}

/// Writes `prefix{i}` = `v{i}` for i = 0, 1, ... in pipelined batches until the connection
/// fails or `stop` is set; returns how many were acknowledged (replies arrive in order, so the
/// first `n` OKs acknowledge the first `n` writes).
pub fn oracle_writer(addr: std::net::SocketAddr, prefix: &str, batch: u64, stop: &AtomicBool, acked: &AtomicU64) {
    let mut conn = RawConn::connect(addr);
    let mut next = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let mut wire = Vec::new();
        for i in next..next + batch {
            wire.extend(encode(&[b"SET", format!("{prefix}{i}").as_bytes(), format!("v{i}").as_bytes()]));
        }
        conn.send(&wire);
        for _ in 0..batch {
            match conn.reply() {
                Some(r) if r == "+OK" => {
                    acked.store(next + 1, Ordering::SeqCst);
                    next += 1;
                }
                _ => return,
            }
        }
    }
}

/// Checks that `prefix{0..acked}` all hold their values; returns how many more (unacknowledged
/// writes that still made it) exist right after.
pub fn verify_acked(c: &mut redis::Connection, prefix: &str, acked: u64) -> u64 {
    for chunk_start in (0..acked).step_by(500) {
        let keys: Vec<String> = (chunk_start..(chunk_start + 500).min(acked)).map(|i| format!("{prefix}{i}")).collect();
        let values: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(c).unwrap();
        for (key, value) in keys.iter().zip(values) {
            let i = &key[prefix.len()..];
            assert_eq!(value.as_deref(), Some(format!("v{i}").as_str()), "acknowledged write of {key} lost");
        }
    }
    let mut extra = 0;
    while redis::cmd("EXISTS").arg(format!("{prefix}{}", acked + extra)).query::<i64>(c).unwrap() == 1 {
        extra += 1;
    }
    extra
}
