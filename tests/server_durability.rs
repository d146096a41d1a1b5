//! The server's durability contract, with a scheme whose durability the test controls: no reply
//! leaves before its transaction is durable, a pipelined batch waits once, and a failed scheme
//! gets the connection closed instead of a reply.

mod server_common;

use lazarus::DatabaseConfig;
use lazarus::durability::{CommitTicket, CommitView, DurabilityError, DurabilityTicket, LogScheme, WorkerLog};
use parking_lot::{Condvar, Mutex};
use server_common::{TestServer, encode};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    Closed,
    Open,
    Failed,
}

/// Commits get epoch tickets that become durable only when the test opens the gate.
struct GatedScheme {
    gate: Mutex<Gate>,
    changed: Condvar,
    waits: AtomicUsize,
}

impl GatedScheme {
    fn new() -> Arc<GatedScheme> {
        Arc::new(GatedScheme { gate: Mutex::new(Gate::Closed), changed: Condvar::new(), waits: AtomicUsize::new(0) })
    }

    fn set(&self, gate: Gate) {
        *self.gate.lock() = gate;
        self.changed.notify_all();
    }
}

impl LogScheme for GatedScheme {
    fn name(&self) -> &'static str {
        "gated"
    }

    fn worker(&self, _worker_id: usize) -> Box<dyn WorkerLog> {
        Box::new(GatedLog)
    }

    fn is_durable(&self, _ticket: &DurabilityTicket) -> bool {
        *self.gate.lock() == Gate::Open
    }

    fn wait_durable(&self, _ticket: &DurabilityTicket) -> Result<(), DurabilityError> {
        self.waits.fetch_add(1, Ordering::SeqCst);
        let mut gate = self.gate.lock();
        loop {
            match *gate {
                Gate::Open => return Ok(()),
                Gate::Failed => return Err(DurabilityError::Failed("test".into())),
                Gate::Closed => self.changed.wait(&mut gate),
            }
        }
    }

    fn wait_committed_durable(&self) -> Result<(), DurabilityError> {
        self.wait_durable(&DurabilityTicket::Immediate)
    }

    fn shutdown(&self) -> Result<(), DurabilityError> {
        self.set(Gate::Failed);
        Ok(())
    }
}

struct GatedLog;

impl WorkerLog for GatedLog {
    fn serialization_point(&mut self, _epoch: u64) -> u64 {
        0
    }

    fn abandon(&mut self, _commit_seq: u64) {}

    fn log_commit(&mut self, view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError> {
        Ok(CommitTicket { last_writer: 0, durability: DurabilityTicket::Epoch(view.tid.epoch()) })
    }
}

fn gated_server() -> (TestServer, Arc<GatedScheme>) {
    gated_server_with_loops(2)
}

fn gated_server_with_loops(io_threads: usize) -> (TestServer, Arc<GatedScheme>) {
    let scheme = GatedScheme::new();
    scheme.set(Gate::Open); // the keyspace table is created through the scheme
    let config = DatabaseConfig { scheme: scheme.clone(), ..DatabaseConfig::default() };
    let server = TestServer::with_loops(config, io_threads);
    scheme.set(Gate::Closed);
    (server, scheme)
}

#[test]
fn no_reply_before_durable_and_one_wait_per_pipelined_batch() {
    let (server, scheme) = gated_server();
    let mut c = server.raw();
    let mut wire = Vec::new();
    for i in 0..200 {
        wire.extend(encode(&[b"SET", format!("k{i}").as_bytes(), b"v"]));
    }
    let waits_before = scheme.waits.load(Ordering::SeqCst);
    c.send(&wire);
    // The writes are installed (visible to the engine) but not durable: nothing is answered.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!server.db.catalog().table_by_name("redis_kv").unwrap().is_empty(), "the batch did not run");
    c.set_read_timeout(Duration::from_millis(200));
    assert_eq!(c.try_reply(), None, "a reply left before its write was durable");
    scheme.set(Gate::Open);
    c.set_read_timeout(Duration::from_secs(30));
    for i in 0..200 {
        assert_eq!(c.reply().as_deref(), Some("+OK"), "reply {i}");
    }
    let waits = scheme.waits.load(Ordering::SeqCst) - waits_before;
    assert!((1..=4).contains(&waits), "200 pipelined writes waited {waits} times");
}

#[test]
fn reads_wait_too_and_a_failed_scheme_closes_the_connection() {
    let (server, scheme) = gated_server();
    let mut c = server.raw();
    c.send(&encode(&[b"GET", b"missing"]));
    c.set_read_timeout(Duration::from_millis(300));
    assert_eq!(c.try_reply(), None, "a GET was answered before the data it read could be durable");
    scheme.set(Gate::Failed);
    c.set_read_timeout(Duration::from_secs(30));
    assert!(c.closed(), "the connection stayed open after the scheme failed");
    // Later requests are refused the same way: never a false acknowledgement.
    let mut again = server.raw();
    again.send(&encode(&[b"SET", b"k", b"v"]));
    assert!(again.closed());
}

#[test]
fn a_reply_waiting_for_durability_does_not_hold_up_the_other_connections_of_its_loop() {
    // One event loop serves both connections: if it slept on the commit, `other` would starve.
    let (server, scheme) = gated_server_with_loops(1);
    let mut waiting = server.raw();
    waiting.send(&encode(&[b"SET", b"k", b"v"]));
    std::thread::sleep(Duration::from_millis(100));
    let mut other = server.raw();
    other.set_read_timeout(Duration::from_secs(10));
    other.send(&encode(&[b"PING"]));
    let pong = other.try_reply();
    waiting.set_read_timeout(Duration::from_millis(200));
    let early = waiting.try_reply();
    // Open the gate before asserting, so that a failure does not leave the server stuck on it.
    scheme.set(Gate::Open);
    assert_eq!(pong.as_deref(), Some("+PONG"), "a connection waited behind another's group commit");
    assert_eq!(early, None, "the SET was acknowledged before it was durable");
    waiting.set_read_timeout(Duration::from_secs(30));
    assert_eq!(waiting.reply().as_deref(), Some("+OK"));
}
