//! The memtier-like load of `instant-bench`: a few threads (memtier's `--threads`, 4 by
//! default), each driving its share of the connections (memtier's `--clients` per thread) over one
//! `epoll` (mio), one request outstanding per connection (memtier's default pipeline of 1),
//! uniform random keys.
//!
//! Why not a thread per connection (the driver up to session 31): the load runs on the same two
//! cores as the server it measures, and every CPU-second it spends is one the server does not
//! get. 200 blocking threads paid a context switch per request, and each grew its own latency
//! sample, faulting in fresh memory all run long (a quarter of the driver's CPU was the kernel
//! zeroing pages: `docs/PERFORMANCE.md`, "Instant recovery", "Session 32"). Here a thread's
//! counts and latency histograms are its own, merged when the run ends.

use super::{RETRY_PAUSE, encode_request};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most connections one load thread drives.
pub const CLIENTS_PER_THREAD_MAX: usize = 1000;
/// Largest round trip a latency histogram records (longer ones are clamped to it).
pub const LATENCY_MAX_US: u64 = 60_000_000;
/// How long a thread waits for events before it looks at the clock and the stop flag again.
const POLL_TIMEOUT_MAX: Duration = Duration::from_millis(10);
/// Bytes read from a socket per `read` call.
const READ_CHUNK_BYTES: usize = 4096;
/// The most unparsed reply bytes a connection holds: a reply of this bench is a few dozen bytes
/// (a 32-byte value, `+OK`, an error line); more means the server sent something else.
const REPLY_BYTES_MAX: usize = 64 * 1024;

/// One run of the load.
pub struct Load {
    /// The server.
    pub addr: SocketAddr,
    /// Keys are `key:0` .. `key:<keys - 1>`.
    pub keys: u64,
    /// Fraction of requests that are GETs (the rest are SETs).
    pub read_fraction: f64,
    /// Time zero of the windows (the server's restart).
    pub restart: Instant,
    /// When the load stops.
    pub end: Instant,
    /// Length of a window.
    pub window_ms: u64,
    /// Number of windows recorded.
    pub windows: usize,
}

impl Load {
    fn window(&self, at: Instant) -> Option<usize> {
        let i = (at.saturating_duration_since(self.restart).as_millis() / u128::from(self.window_ms)) as usize;
        (i < self.windows).then_some(i)
    }
}

/// Replies per window, and their round trips.
pub struct Counts {
    /// Successful replies per window.
    pub ok: Vec<u64>,
    /// Error replies per window (Redis's `LOADING`).
    pub errors: Vec<u64>,
    /// Round trips of the successful replies per window, in microseconds (`None`: none).
    pub latency_us: Vec<Option<Histogram<u32>>>,
}

impl Counts {
    fn new(windows: usize) -> Counts {
        Counts { ok: vec![0; windows], errors: vec![0; windows], latency_us: vec![None; windows] }
    }

    fn merge(&mut self, other: Counts) {
        for (a, b) in self.ok.iter_mut().zip(other.ok) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        for (a, b) in self.latency_us.iter_mut().zip(other.latency_us) {
            match (a.as_mut(), b) {
                // Same bounds on both sides: `add` cannot fail.
                (Some(a), Some(b)) => {
                    let _ = a.add(&b);
                }
                (None, b) => *a = b,
                (Some(_), None) => {}
            }
        }
    }

    fn record_ok(&mut self, window: usize, round_trip: Duration) -> Result<(), hdrhistogram::CreationError> {
        self.ok[window] += 1;
        let histogram = match &mut self.latency_us[window] {
            Some(histogram) => histogram,
            empty => empty.insert(Histogram::new_with_bounds(1, LATENCY_MAX_US, 2)?),
        };
        let us = u64::try_from(round_trip.as_micros()).unwrap_or(u64::MAX);
        histogram.saturating_record(us.clamp(1, LATENCY_MAX_US));
        Ok(())
    }

    /// The round trip at quantile `q` of window `i`, in microseconds; 0 when nothing was served.
    pub fn quantile_us(&self, i: usize, q: f64) -> u64 {
        self.latency_us[i].as_ref().map_or(0, |h| h.value_at_quantile(q))
    }
}

/// Runs the load with `clients` connections over `threads` threads until `stop` is set or the
/// load's end; `first_ok_us` gets the earliest successful reply (microseconds from the restart).
pub fn run(load: &Load, threads: usize, clients: usize, first_ok_us: &AtomicU64, stop: &AtomicBool) -> Counts {
    let threads = threads.clamp(1, clients.max(1));
    let mut total = Counts::new(load.windows);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                // Clients `t`, `t + threads`, ...: the seeds of the clients do not depend on the
                // number of threads.
                let ids: Vec<u64> = (t..clients).step_by(threads).map(|c| c as u64).collect();
                s.spawn(move || drive_thread(load, &ids, first_ok_us, stop))
            })
            .collect();
        for handle in handles {
            match handle.join() {
                Ok(Ok(counts)) => total.merge(counts),
                Ok(Err(e)) => eprintln!("instant-bench: a load thread stopped: {e}"),
                Err(_) => eprintln!("instant-bench: a load thread panicked"),
            }
        }
    });
    total
}

/// Why a load thread stopped early.
#[derive(Debug, thiserror::Error)]
enum LoadError {
    #[error("epoll: {0}")]
    Poll(std::io::Error),
    #[error("latency histogram: {0}")]
    Histogram(#[from] hdrhistogram::CreationError),
}

/// One connection of the load.
struct Client {
    rng: u64,
    stream: Option<TcpStream>,
    connected: bool,
    /// When the client may connect, or send, again (after a refused connection, a closed one or
    /// an error reply); `None`: it is waiting for the socket.
    wake_at: Option<Instant>,
    sent_at: Instant,
    reply: Vec<u8>,
    request: Vec<u8>,
    written: usize,
}

impl Client {
    fn new(id: u64, now: Instant) -> Client {
        Client {
            rng: id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            stream: None,
            connected: false,
            wake_at: Some(now),
            sent_at: now,
            reply: Vec::with_capacity(READ_CHUNK_BYTES),
            request: Vec::with_capacity(128),
            written: 0,
        }
    }

    /// xorshift64: cheap, and each client's sequence is fixed by its id.
    fn next_random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Drops the connection and waits [`RETRY_PAUSE`] before connecting again: connection
    /// attempts of hundreds of clients in a tight loop would slow the very recovery measured.
    fn reset(&mut self, poll: &Poll, now: Instant) {
        if let Some(mut stream) = self.stream.take() {
            let _ = poll.registry().deregister(&mut stream);
        }
        self.connected = false;
        self.reply.clear();
        self.wake_at = Some(now + RETRY_PAUSE);
    }
}

/// The loop of one load thread over the clients `ids`.
fn drive_thread(load: &Load, ids: &[u64], first_ok_us: &AtomicU64, stop: &AtomicBool) -> Result<Counts, LoadError> {
    assert!(ids.len() <= CLIENTS_PER_THREAD_MAX, "{} clients on one load thread", ids.len());
    let mut poll = Poll::new().map_err(LoadError::Poll)?;
    let mut events = Events::with_capacity(ids.len().max(16));
    let start = Instant::now();
    let mut clients: Vec<Client> = ids.iter().map(|&id| Client::new(id, start)).collect();
    let mut counts = Counts::new(load.windows);
    let mut next_wake = Some(start);
    let mut scratch = Vec::with_capacity(64);
    let mut first_seen = false;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= load.end {
            break;
        }
        if next_wake.is_some_and(|t| t <= now) {
            next_wake = None;
            for (i, client) in clients.iter_mut().enumerate() {
                match client.wake_at {
                    Some(t) if t <= now => wake(load, &poll, client, Token(i), now, &mut scratch),
                    _ => {}
                }
                next_wake = earliest(next_wake, client.wake_at);
            }
        }
        let until = next_wake.map_or(load.end, |t| t.min(load.end));
        let timeout = until.saturating_duration_since(Instant::now()).min(POLL_TIMEOUT_MAX);
        match poll.poll(&mut events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(LoadError::Poll(e)),
        }
        for event in events.iter() {
            let Some(client) = clients.get_mut(event.token().0) else { continue };
            let outcome = on_event(load, &poll, client, &mut scratch, &mut counts)?;
            if let Outcome::Served(at) = outcome
                && !first_seen
            {
                first_seen = true;
                let us = u64::try_from(at.saturating_duration_since(load.restart).as_micros()).unwrap_or(u64::MAX);
                first_ok_us.fetch_min(us, Ordering::SeqCst);
            }
            next_wake = earliest(next_wake, client.wake_at);
        }
    }
    Ok(counts)
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A client whose pause is over: connects if it has no connection, else sends its next request.
fn wake(load: &Load, poll: &Poll, client: &mut Client, token: Token, now: Instant, scratch: &mut Vec<u8>) {
    client.wake_at = None;
    if client.connected {
        send_next(load, poll, client, scratch, now);
        return;
    }
    match TcpStream::connect(load.addr) {
        Ok(mut stream) => match poll.registry().register(&mut stream, token, Interest::READABLE | Interest::WRITABLE) {
            Ok(()) => client.stream = Some(stream),
            Err(_) => client.reset(poll, now),
        },
        Err(_) => client.reset(poll, now),
    }
}

/// What an event brought.
enum Outcome {
    Nothing,
    /// A successful reply, received at this instant.
    Served(Instant),
}

fn on_event(
    load: &Load,
    poll: &Poll,
    client: &mut Client,
    scratch: &mut Vec<u8>,
    counts: &mut Counts,
) -> Result<Outcome, LoadError> {
    let now = Instant::now();
    if client.stream.is_none() {
        return Ok(Outcome::Nothing);
    }
    if !client.connected {
        // mio's contract for a non-blocking connect: writable, then `take_error` and `peer_addr`
        // say whether it succeeded, failed or is still going on.
        let Some(stream) = client.stream.as_ref() else { return Ok(Outcome::Nothing) };
        match (stream.take_error(), stream.peer_addr()) {
            (Ok(None), Ok(_)) => {
                let _ = stream.set_nodelay(true);
                client.connected = true;
                send_next(load, poll, client, scratch, now);
            }
            (Ok(None), Err(e)) if e.kind() == ErrorKind::NotConnected => {}
            _ => client.reset(poll, now),
        }
        return Ok(Outcome::Nothing);
    }
    if client.written < client.request.len() && !flush(poll, client, now) {
        return Ok(Outcome::Nothing);
    }
    receive(load, poll, client, scratch, counts, now)
}

/// Reads what the socket has and handles a complete reply.
fn receive(
    load: &Load,
    poll: &Poll,
    client: &mut Client,
    scratch: &mut Vec<u8>,
    counts: &mut Counts,
    now: Instant,
) -> Result<Outcome, LoadError> {
    let mut chunk = [0u8; READ_CHUNK_BYTES];
    loop {
        let Some(stream) = client.stream.as_mut() else { return Ok(Outcome::Nothing) };
        match stream.read(&mut chunk) {
            Ok(0) => {
                client.reset(poll, now);
                return Ok(Outcome::Nothing);
            }
            Ok(n) => client.reply.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                client.reset(poll, now);
                return Ok(Outcome::Nothing);
            }
        }
        if client.reply.len() > REPLY_BYTES_MAX {
            client.reset(poll, now);
            return Ok(Outcome::Nothing);
        }
    }
    let parsed = match parse_reply(&client.reply) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => return Ok(Outcome::Nothing),
        Err(_) => {
            client.reset(poll, now);
            return Ok(Outcome::Nothing);
        }
    };
    let (len, ok) = parsed;
    client.reply.drain(..len);
    let done = Instant::now();
    let Some(window) = load.window(done) else { return Ok(Outcome::Nothing) };
    if !ok {
        counts.errors[window] += 1;
        // Redis answers LOADING at once: clients spinning on it would take the CPU the load needs.
        client.wake_at = Some(done + RETRY_PAUSE);
        return Ok(Outcome::Nothing);
    }
    counts.record_ok(window, done.saturating_duration_since(client.sent_at))?;
    send_next(load, poll, client, scratch, done);
    Ok(Outcome::Served(done))
}

/// Encodes the client's next request and writes what the socket takes of it.
fn send_next(load: &Load, poll: &Poll, client: &mut Client, scratch: &mut Vec<u8>, now: Instant) {
    let k = client.next_random() % load.keys;
    let read = (client.next_random() % 10_000) as f64 / 10_000.0 < load.read_fraction;
    client.request.clear();
    client.written = 0;
    encode_request(k, read, scratch, &mut client.request);
    client.sent_at = now;
    flush(poll, client, now);
}

/// Writes the rest of the client's request; false if the connection failed (and was reset) or
/// the socket took only part of it (the rest goes on the next writable event).
fn flush(poll: &Poll, client: &mut Client, now: Instant) -> bool {
    while client.written < client.request.len() {
        let Some(stream) = client.stream.as_mut() else { return false };
        match stream.write(&client.request[client.written..]) {
            Ok(0) => {
                client.reset(poll, now);
                return false;
            }
            Ok(n) => client.written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                client.reset(poll, now);
                return false;
            }
        }
    }
    true
}

/// Bytes that are not a RESP2 reply.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a RESP reply at byte {offset}")]
pub struct ReplyError {
    offset: usize,
}

/// How deep arrays may nest in a reply this bench reads.
const REPLY_DEPTH_MAX: usize = 8;

/// The first complete reply in `buf`: its length in bytes and whether it is a success (an error
/// reply, or an array holding one, is not); `None` while it is incomplete.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(usize, bool)>, ReplyError> {
    parse_at(buf, 0, 0)
}

fn parse_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<(usize, bool)>, ReplyError> {
    let Some(line_end) = buf[at..].windows(2).position(|w| w == b"\r\n").map(|p| at + p) else {
        return Ok(None);
    };
    let bad = || ReplyError { offset: at };
    let number = || -> Result<i64, ReplyError> {
        std::str::from_utf8(&buf[at + 1..line_end]).ok().and_then(|s| s.parse().ok()).ok_or_else(bad)
    };
    let after_line = line_end + 2;
    match buf.get(at) {
        Some(b'+' | b':') => Ok(Some((after_line - at, true))),
        Some(b'-') => Ok(Some((after_line - at, false))),
        Some(b'$') => match number()? {
            -1 => Ok(Some((after_line - at, true))),
            len if len >= 0 => {
                let end = usize::try_from(len).ok().and_then(|len| after_line.checked_add(len)?.checked_add(2));
                let end = end.ok_or_else(bad)?;
                if buf.len() < end {
                    return Ok(None);
                }
                if &buf[end - 2..end] != b"\r\n" {
                    return Err(bad());
                }
                Ok(Some((end - at, true)))
            }
            _ => Err(bad()),
        },
        Some(b'*') if depth < REPLY_DEPTH_MAX => match number()? {
            -1 => Ok(Some((after_line - at, true))),
            count if count >= 0 => {
                let (mut next, mut ok) = (after_line, true);
                for _ in 0..count {
                    let Some((len, element_ok)) = parse_at(buf, next, depth + 1)? else { return Ok(None) };
                    next += len;
                    ok &= element_ok;
                }
                Ok(Some((next - at, ok)))
            }
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_measured_whole() {
        assert_eq!(parse_reply(b"+OK\r\n"), Ok(Some((5, true))));
        assert_eq!(parse_reply(b"-LOADING Redis is loading\r\n+OK"), Ok(Some((27, false))));
        assert_eq!(parse_reply(b":12\r\n"), Ok(Some((5, true))));
        assert_eq!(parse_reply(b"$-1\r\n"), Ok(Some((5, true))));
        assert_eq!(parse_reply(b"$3\r\nabc\r\n$"), Ok(Some((9, true))));
        assert_eq!(parse_reply(b"*2\r\n$1\r\na\r\n-ERR x\r\n"), Ok(Some((19, false))));
        assert_eq!(parse_reply(b"*2\r\n$1\r\na\r\n:1\r\n"), Ok(Some((15, true))));
    }

    #[test]
    fn an_incomplete_reply_waits_for_more() {
        for whole in [&b"+OK\r\n"[..], b"$3\r\nabc\r\n", b"*2\r\n$1\r\na\r\n:1\r\n"] {
            for cut in 0..whole.len() {
                assert_eq!(parse_reply(&whole[..cut]), Ok(None), "{:?}", &whole[..cut]);
            }
        }
    }

    #[test]
    fn bytes_that_are_not_resp_are_an_error() {
        assert_eq!(parse_reply(b"hello\r\n"), Err(ReplyError { offset: 0 }));
        assert_eq!(parse_reply(b"$x\r\n"), Err(ReplyError { offset: 0 }));
        assert_eq!(parse_reply(b"$3\r\nabcde\r\n"), Err(ReplyError { offset: 0 }));
        assert_eq!(parse_reply(b"*1\r\n?\r\n"), Err(ReplyError { offset: 4 }));
        let deep = "*1\r\n".repeat(REPLY_DEPTH_MAX + 1) + ":1\r\n";
        assert!(parse_reply(deep.as_bytes()).is_err());
    }

    #[test]
    fn counts_merge_per_window() {
        let mut a = Counts::new(2);
        a.record_ok(0, Duration::from_micros(100)).unwrap();
        let mut b = Counts::new(2);
        b.record_ok(0, Duration::from_micros(300)).unwrap();
        b.record_ok(1, Duration::from_micros(50)).unwrap();
        b.errors[1] += 1;
        a.merge(b);
        assert_eq!((a.ok.clone(), a.errors.clone()), (vec![2, 1], vec![0, 1]));
        assert!((99..=101).contains(&a.quantile_us(0, 0.0)), "{}", a.quantile_us(0, 0.0));
        assert!((297..=303).contains(&a.quantile_us(0, 1.0)), "{}", a.quantile_us(0, 1.0));
        assert_eq!(a.quantile_us(1, 0.5), 50);
    }
}
