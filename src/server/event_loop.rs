//! The connection event loops: a few threads, each serving many connections with `epoll` (mio).
//!
//! # Why not a thread per connection
//!
//! With a thread per connection every request cost two or more context switches: the thread slept
//! in `read`, woke for the request, slept again on the durability condvar, woke for the group
//! commit. On two cores under 200 redis-benchmark clients that was two thirds of the CPU in the
//! kernel (`finish_task_switch`, futex wake-ups), and Redis's one event loop served twice the
//! requests (docs/PERFORMANCE.md, "Server", session 11). A loop handles every connection whose
//! socket is ready in one pass and wakes once per group commit for all the replies it releases.
//!
//! # One connection's states
//!
//! A connection reads (until the socket has nothing more, or [`READS_PER_TURN_MAX`] reads so
//! that one pipelining client cannot starve the others), parses, runs every complete request in
//! order on the loop thread (a transaction takes a pooled worker for one command), and appends
//! each reply to its output. Then it *settles*: if every transaction behind the buffered replies
//! is durable already ([`crate::durability::LogScheme::is_durable`], e.g. a GET of durable data
//! or `--durability none`), the replies are written at once. Otherwise the connection *waits*:
//! its tickets go to the loop's durability waiter thread, which blocks in
//! [`crate::durability::LogScheme::wait_durable`] for each, in order, and hands the connection
//! back to the loop (one wake-up for all that became durable together). A waiting connection
//! reads nothing more, so its replies stay in request order and a client that pipelines without
//! reading is held back by TCP. If the scheme fails, the waiter reports it and the connection is
//! closed without its replies (the durability contract in [`super`]).
//!
//! Writing stops when the socket is full and resumes on its writable event (every socket is
//! registered for both, edge-triggered, so each event is acted on until `WouldBlock`).

use super::Shared;
use super::conn::{Conn, OUTPUT_FLUSH_BYTES, READ_CHUNK_BYTES, TICKETS_MAX};
use super::resp::{Args, InputBuffer, ProtocolError, Reply, RequestParser};
use super::restore_pool::{RestoreNeed, RestorePool, RestoreRequest};
use crate::durability::DurabilityTicket;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::Mutex;
use slab::Slab;
use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

/// Reads one connection may do in one turn before the loop serves the others.
pub const READS_PER_TURN_MAX: usize = 16;
/// Readiness events taken from the kernel per poll.
const EVENTS_PER_POLL: usize = 1024;
/// The token of the loop's own waker (new connections, settled tickets, stop).
const WAKE_TOKEN: Token = Token(usize::MAX);

/// A connection's tickets, on their way to the durability waiter.
struct WaitRequest {
    key: usize,
    client_id: u64,
    tickets: Vec<DurabilityTicket>,
}

/// A parked connection handed back to its loop: by the durability waiter (`ok`: its replies may
/// be written; not ok: the scheme failed, close it) or by the restore pool (its keys are in
/// memory, or its next request, a GET, was answered from the indexed log: `answer`).
pub struct Resume {
    key: usize,
    client_id: u64,
    ok: bool,
    answer: Option<Reply>,
}

impl Resume {
    /// The connection's next request is answered with `reply` instead of being run (a GET read
    /// ahead of an instant restore).
    pub fn answer(&mut self, reply: Reply) {
        self.answer = Some(reply);
    }
}

/// What other threads hand a loop.
#[derive(Default)]
pub struct Inbox {
    accepted: Mutex<Vec<(std::net::TcpStream, u64)>>,
    resumed: Mutex<Vec<Resume>>,
    stop: AtomicBool,
}

impl Inbox {
    /// Hands a parked connection back to the loop.
    pub fn resume(&self, waker: &Waker, resume: Resume) {
        let was_empty = {
            let mut resumed = self.resumed.lock();
            let was_empty = resumed.is_empty();
            resumed.push(resume);
            was_empty
        };
        // The loop takes the whole list after each wake-up, so one wake covers what follows it.
        if was_empty {
            let _ = waker.wake();
        }
    }
}

/// A running loop, as the accepting thread sees it.
pub struct LoopHandle {
    inbox: Arc<Inbox>,
    waker: Arc<Waker>,
    threads: Vec<JoinHandle<()>>,
}

impl LoopHandle {
    /// Starts loop `index` and its durability waiter; `restore` fetches keys during an instant
    /// restore (without it, the loop fetches them itself).
    pub fn start(shared: &Arc<Shared>, index: usize, restore: Option<Arc<RestorePool>>) -> std::io::Result<LoopHandle> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE_TOKEN)?);
        let inbox = Arc::new(Inbox::default());
        let (wait_tx, wait_rx) = std::sync::mpsc::channel();
        let waiter = {
            let (shared, inbox, waker) = (Arc::clone(shared), Arc::clone(&inbox), Arc::clone(&waker));
            std::thread::Builder::new()
                .name(format!("resp-durable-{index}"))
                .spawn(move || run_waiter(&shared, &wait_rx, &inbox, &waker))?
        };
        let ctx = LoopCtx {
            shared: Arc::clone(shared),
            inbox: Arc::clone(&inbox),
            waker: Arc::clone(&waker),
            wait_tx,
            restore,
        };
        let event_loop = EventLoop { poll, ctx };
        let looper = std::thread::Builder::new().name(format!("resp-loop-{index}")).spawn(move || event_loop.run())?;
        Ok(LoopHandle { inbox, waker, threads: vec![looper, waiter] })
    }

    /// Gives the loop a newly accepted connection with CLIENT ID `id`.
    pub fn hand_over(&self, stream: std::net::TcpStream, id: u64) -> std::io::Result<()> {
        self.inbox.accepted.lock().push((stream, id));
        self.waker.wake()
    }

    /// Asks the loop to close its connections and end.
    pub fn stop(&self) {
        self.inbox.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// Waits for the loop and then its waiter (which ends once the loop is gone).
    pub fn join(self) {
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

/// Blocks for each connection's tickets in turn and hands the connection back to its loop.
fn run_waiter(shared: &Shared, requests: &Receiver<WaitRequest>, inbox: &Inbox, waker: &Waker) {
    while let Ok(request) = requests.recv() {
        let ok = request.tickets.iter().all(|ticket| shared.db.scheme().wait_durable(ticket).is_ok());
        inbox.resume(waker, Resume { key: request.key, client_id: request.client_id, ok, answer: None });
    }
}

/// What a turn decided for a connection.
#[derive(Debug, PartialEq, Eq)]
enum Turn {
    /// Wait for the next event (socket readiness or the waiter).
    Idle,
    /// It has more to do but used its turn: serve it again after the others.
    Again,
    /// Close it.
    Close,
}

/// Where a connection's buffered replies stand after its requests ran.
enum Settle {
    /// Everything they depend on is durable: write them.
    Now,
    /// Handed to the waiter.
    Waiting,
    /// The waiter is gone (the loop is stopping): close without them.
    NoWaiter,
}

/// One connection in a loop.
struct Client {
    stream: TcpStream,
    conn: Conn,
    parser: RequestParser,
    input: InputBuffer,
    /// Parsed requests not yet run.
    requests: VecDeque<Args>,
    /// A protocol error after `requests`: answered once they are, then the connection closes.
    protocol_error: Option<ProtocolError>,
    /// Replies not yet written, and how much of them is.
    out: Vec<u8>,
    written_bytes: usize,
    /// Parked: the replies in `out` wait for the durability waiter, or the next request for
    /// the restore pool.
    waiting: bool,
    /// What the next request needs restored before it runs.
    restore_pending: Option<RestoreNeed>,
}

/// What a loop's connections need from it.
struct LoopCtx {
    shared: Arc<Shared>,
    inbox: Arc<Inbox>,
    waker: Arc<Waker>,
    wait_tx: Sender<WaitRequest>,
    restore: Option<Arc<RestorePool>>,
}

struct EventLoop {
    poll: Poll,
    ctx: LoopCtx,
}

impl EventLoop {
    fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS_PER_POLL);
        let mut clients: Slab<Client> = Slab::new();
        let mut again: Vec<usize> = Vec::new();
        while !self.ctx.inbox.stop.load(Ordering::SeqCst) {
            let timeout = if again.is_empty() { None } else { Some(std::time::Duration::ZERO) };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                // Nothing can be served without the poll: close this loop's connections (their
                // clients see the connection drop, never a false reply) and say why.
                eprintln!("lazarus serve: an event loop stopped: epoll failed: {e}");
                break;
            }
            let mut ready: Vec<usize> = std::mem::take(&mut again);
            ready.extend(events.iter().filter(|e| e.token() != WAKE_TOKEN).map(|e| e.token().0));
            ready.extend(self.admit(&mut clients));
            for resume in std::mem::take(&mut *self.ctx.inbox.resumed.lock()) {
                match clients.get_mut(resume.key) {
                    Some(client) if client.conn.id == resume.client_id && resume.ok => {
                        client.waiting = false;
                        if let Some(reply) = resume.answer {
                            client.answer_next(reply);
                        }
                        ready.push(resume.key);
                    }
                    Some(client) if client.conn.id == resume.client_id => self.close(&mut clients, resume.key),
                    _ => {}
                }
            }
            for key in ready {
                let Some(client) = clients.get_mut(key) else { continue };
                match client.turn(key, &self.ctx) {
                    Turn::Idle => {}
                    Turn::Again => again.push(key),
                    Turn::Close => self.close(&mut clients, key),
                }
            }
            again.sort_unstable();
            again.dedup();
        }
        for key in clients.iter().map(|(key, _)| key).collect::<Vec<_>>() {
            self.close(&mut clients, key);
        }
    }

    /// Registers the connections the accepting thread handed over; returns their keys.
    fn admit(&mut self, clients: &mut Slab<Client>) -> Vec<usize> {
        let accepted = std::mem::take(&mut *self.ctx.inbox.accepted.lock());
        let mut keys = Vec::with_capacity(accepted.len());
        for (stream, id) in accepted {
            let registered = stream.set_nonblocking(true).and_then(|()| {
                let _ = stream.set_nodelay(true);
                let mut stream = TcpStream::from_std(stream);
                let entry = clients.vacant_entry();
                let key = entry.key();
                self.poll.registry().register(&mut stream, Token(key), Interest::READABLE | Interest::WRITABLE)?;
                let client = Client {
                    stream,
                    conn: Conn::new(Arc::clone(&self.ctx.shared), id),
                    parser: RequestParser::new(self.ctx.shared.config.limits.clone()),
                    input: InputBuffer::default(),
                    requests: VecDeque::new(),
                    protocol_error: None,
                    out: Vec::new(),
                    written_bytes: 0,
                    waiting: false,
                    restore_pending: None,
                };
                entry.insert(client);
                Ok(key)
            });
            match registered {
                // Already readable data raises no new edge: serve it now.
                Ok(key) => keys.push(key),
                Err(_) => {
                    self.ctx.shared.connected.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
        keys
    }

    fn close(&self, clients: &mut Slab<Client>, key: usize) {
        if let Some(mut client) = clients.try_remove(key) {
            let _ = self.poll.registry().deregister(&mut client.stream);
            let _ = client.stream.shutdown(std::net::Shutdown::Both);
            self.ctx.shared.connected.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Client {
    /// Serves the connection until it must wait for an event, used its turn, or must close.
    fn turn(&mut self, key: usize, ctx: &LoopCtx) -> Turn {
        let mut reads = 0;
        loop {
            if self.waiting {
                return Turn::Idle;
            }
            match self.write_out() {
                Ok(true) => {}
                Ok(false) => return Turn::Idle,
                Err(_) => return Turn::Close,
            }
            if self.conn.closing {
                return Turn::Close;
            }
            if let (Some(need), Some(pool)) = (self.restore_pending.take(), &ctx.restore) {
                let resume = Resume { key, client_id: self.conn.id, ok: true, answer: None };
                let (inbox, waker) = (Arc::clone(&ctx.inbox), Arc::clone(&ctx.waker));
                pool.submit(RestoreRequest { need, resume, inbox, waker });
                self.waiting = true;
                return Turn::Idle;
            }
            if !self.requests.is_empty() {
                self.run_requests(ctx.restore.as_ref().is_some_and(|pool| pool.active(&ctx.shared)));
                match self.settle(key, ctx) {
                    Settle::Now => continue,
                    Settle::Waiting => return Turn::Idle,
                    Settle::NoWaiter => return Turn::Close,
                }
            }
            if let Some(e) = self.protocol_error.take() {
                Reply::Error(format!("ERR {e}").into()).encode(&mut self.out);
                self.conn.closing = true;
                continue;
            }
            if reads == READS_PER_TURN_MAX {
                return Turn::Again;
            }
            reads += 1;
            match self.input.fill(&mut self.stream, READ_CHUNK_BYTES) {
                Ok(0) => return Turn::Close,
                Ok(_) => self.parse(),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Turn::Idle,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Turn::Close,
            }
        }
    }

    fn parse(&mut self) {
        loop {
            match self.parser.next(&mut self.input) {
                Ok(Some(args)) => self.requests.push_back(args),
                Ok(None) => return,
                Err(e) => {
                    self.protocol_error = Some(e);
                    return;
                }
            }
        }
    }

    /// Runs requests in order until none is left, the connection closes, the replies should
    /// be flushed ([`OUTPUT_FLUSH_BYTES`], [`TICKETS_MAX`]), or (`offload_restores`) the next
    /// request needs keys fetched from the indexed log first.
    fn run_requests(&mut self, offload_restores: bool) {
        while let Some(args) = self.requests.pop_front() {
            if offload_restores && let Some(need) = self.conn.restore_need(&args) {
                self.requests.push_front(args);
                self.restore_pending = Some(need);
                return;
            }
            // Offloading, the request got here because its keys are in memory.
            let reply = self.conn.handle(args, offload_restores);
            if !self.conn.silent_close {
                reply.encode(&mut self.out);
            }
            if self.conn.closing || self.out.len() >= OUTPUT_FLUSH_BYTES || self.conn.tickets_len() >= TICKETS_MAX {
                return;
            }
        }
    }

    /// Answers the next request with `reply` without running it (the restore pool read it ahead
    /// of the restore; the connection was parked with that request first in line).
    fn answer_next(&mut self, reply: Reply) {
        if self.requests.pop_front().is_none() {
            debug_assert!(false, "an answer for a connection with no request waiting");
            return;
        }
        self.conn.note_answered();
        if !self.conn.silent_close {
            reply.encode(&mut self.out);
        }
    }

    /// Whether the buffered replies may be written now, or wait for the waiter.
    fn settle(&mut self, key: usize, ctx: &LoopCtx) -> Settle {
        let tickets = self.conn.take_tickets();
        if tickets.iter().all(|ticket| ctx.shared.db.scheme().is_durable(ticket)) {
            return Settle::Now;
        }
        if ctx.wait_tx.send(WaitRequest { key, client_id: self.conn.id, tickets }).is_err() {
            // No waiter: nothing can tell these replies durable, so they are never sent.
            return Settle::NoWaiter;
        }
        self.waiting = true;
        Settle::Waiting
    }

    /// Writes what the socket takes. True once everything buffered is written.
    fn write_out(&mut self) -> std::io::Result<bool> {
        while self.written_bytes < self.out.len() {
            match self.stream.write(&self.out[self.written_bytes..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.written_bytes += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.written_bytes = 0;
        Ok(true)
    }
}
