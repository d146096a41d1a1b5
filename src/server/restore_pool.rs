//! Threads that fetch keys from the indexed log on demand, so that an event loop never waits
//! for a read of the B-tree (during an instant restore, `docs/indexed.md`).
//!
//! A request for a key the background walk has not restored yet must first fetch it from the
//! indexed log (`Keyspace::restore_ahead`): a B-tree read, perhaps from disk, perhaps behind a
//! walker's batch on the same shard. On an event loop that would stall every other connection of
//! the loop, and with a loop per core only two fetches would ever be in flight. So the loop parks
//! the connection, and one of [`RESTORE_THREADS`] threads here fetches its keys and hands it
//! back to its loop, which then runs the request (its keys now in memory). Many fetches overlap,
//! as they did when each connection had a thread. A GET is read ahead instead
//! (`Keyspace::read_ahead`): the thread reads the key's recovered state without restoring it and
//! hands the connection back with the reply, which the loop writes in the GET's place. A command
//! that reads a range (KEYS, SCAN, DBSIZE, FLUSHDB) waits here for the whole table, not on its
//! loop. (Read ahead on the loops themselves, GETs were served less: a loop that reads the B-tree
//! waits in it, and each wait stalls its connections; `docs/PERFORMANCE.md`, "Instant
//! recovery", "Session 58".)
//!
//! This is only about who waits: [`super::conn::Conn::handle`] restores a command's keys itself
//! before it runs (and a range read waits for the table inside the transaction), so a request
//! that reached the loop without passing here is still answered correctly, only on a stalled
//! loop. Commands inside EXEC and procedures (FCALL) do that: they fetch on the loop.

use super::Shared;
use super::event_loop::{Inbox, Resume};
use super::keyspace::{Entry, now_ms};
use super::resp::Reply;
use crate::durability::indexed::governor::ThreadClock;
use mio::Waker;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// Fetching threads: enough for many B-tree reads to overlap on a disk.
pub const RESTORE_THREADS: usize = 32;
/// Queued requests per running thread before a sleeping one is woken. A fetch from the page
/// cache takes microseconds, so a few awake threads keep up with a burst of misses, and waking a
/// thread per request cost more than the fetches (the loops' wake-ups and the threads' context
/// switches were most of the pool's CPU, session 29); a queue that outgrows the running threads,
/// as fetches that wait for the disk let it, wakes more of them.
pub const QUEUED_PER_RUNNER: usize = 8;

/// What a request must wait for before it runs, during an instant restore.
#[derive(Debug)]
pub enum RestoreNeed {
    /// These keys (of the keyspace table) fetched from the indexed log.
    Keys(Vec<Vec<u8>>),
    /// A GET of this key, not in memory: answered from the indexed log without restoring the
    /// key if the restore allows it ([`Keyspace::read_ahead`]), else fetched as in `Keys`.
    ///
    /// [`Keyspace::read_ahead`]: super::keyspace::Keyspace::read_ahead
    ReadAhead(Vec<u8>),
    /// The whole keyspace table restored (KEYS, SCAN, DBSIZE, FLUSHDB read ranges).
    Table,
}

/// A parked connection's restore, and where to hand it back.
pub struct RestoreRequest {
    /// What to restore.
    pub need: RestoreNeed,
    /// Which connection to resume, on which loop.
    pub resume: Resume,
    /// The loop's inbox and waker.
    pub inbox: Arc<Inbox>,
    /// Wakes the loop.
    pub waker: Arc<Waker>,
}

struct Queue {
    requests: VecDeque<RestoreRequest>,
    stopping: bool,
    /// Threads taking requests: neither asleep on `ready` nor waiting for a whole table.
    runners: usize,
    /// Threads woken by a submit that have not run yet (counted as runners ahead of time, so a
    /// burst of submits does not wake one thread each).
    woken: usize,
}

/// Whether `queued` requests have outgrown the threads that will take from them: `runners`
/// running and `woken` woken but not yet running.
fn wants_another_runner(queued: usize, runners: usize, woken: usize) -> bool {
    queued > (runners + woken) * QUEUED_PER_RUNNER
}

/// The fetching threads and their queue.
pub struct RestorePool {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Latched once the restore has ended, so requests stop asking (see [`RestorePool::active`]).
    over: AtomicBool,
    /// The threads started so far.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl RestorePool {
    /// Makes the pool and starts its first thread; [`RestorePool::start_the_rest`] starts the
    /// others. A thread takes ≈ 60 µs to start here, and up to about a millisecond when the VM
    /// is slow to hand over memory (`docs/PERFORMANCE.md`, "Instant recovery", "Session 52"):
    /// the event loops, which the first replies wait for, start in between.
    pub fn start(shared: &Arc<Shared>) -> std::io::Result<Arc<RestorePool>> {
        let pool = Arc::new(RestorePool {
            queue: Mutex::new(Queue { requests: VecDeque::new(), stopping: false, runners: 0, woken: 0 }),
            ready: Condvar::new(),
            over: AtomicBool::new(false),
            threads: Mutex::new(Vec::with_capacity(RESTORE_THREADS)),
        });
        if let Err(e) = pool.spawn(shared, 0) {
            pool.stop();
            return Err(e);
        }
        Ok(pool)
    }

    /// Starts the pool's other threads, from a thread of its own (the caller goes on at once).
    /// A thread that cannot be started leaves the pool smaller: the ones running take every
    /// request, since a thread takes requests until the queue is empty.
    pub fn start_the_rest(self: &Arc<Self>, shared: &Arc<Shared>) {
        let (pool, shared) = (Arc::clone(self), Arc::clone(shared));
        let starter = std::thread::Builder::new().name("resp-restore-start".into()).spawn(move || {
            for index in 1..RESTORE_THREADS {
                if let Err(e) = pool.spawn(&shared, index) {
                    eprintln!("lazarus serve: fetching thread {index} of {RESTORE_THREADS} could not start ({e}); going on with {index}");
                    return;
                }
            }
        });
        match starter {
            Ok(starter) => self.threads.lock().push(starter),
            Err(e) => {
                eprintln!("lazarus serve: the fetching threads past the first could not start ({e}); going on with one")
            }
        }
    }

    fn spawn(self: &Arc<Self>, shared: &Arc<Shared>, index: usize) -> std::io::Result<()> {
        let (pool, shared) = (Arc::clone(self), Arc::clone(shared));
        // Counted as running before it runs, so that submits meanwhile do not wake it twice.
        self.queue.lock().runners += 1;
        let spawned =
            std::thread::Builder::new().name(format!("resp-restore-{index}")).spawn(move || pool.serve(&shared));
        match spawned {
            Ok(thread) => {
                self.threads.lock().push(thread);
                Ok(())
            }
            Err(e) => {
                self.queue.lock().runners -= 1;
                Err(e)
            }
        }
    }

    /// Lets the threads end once the queue is empty, and waits for them.
    pub fn stop_and_join(&self) {
        self.stop();
        // The starter may still be adding threads: join until none is left.
        loop {
            let Some(thread) = self.threads.lock().pop() else { break };
            let _ = thread.join();
        }
    }

    /// Whether the restore still runs, so a loop should ask what each request needs restored.
    /// A restore never starts again in a running server, so once it has ended this is one load.
    pub fn active(&self, shared: &Shared) -> bool {
        if self.over.load(Ordering::Relaxed) {
            return false;
        }
        let restoring = shared.keyspace.is_restoring(&shared.db);
        if !restoring {
            self.over.store(true, Ordering::Relaxed);
        }
        restoring
    }

    /// Queues a fetch, waking a thread only if the running ones have enough queued already.
    pub fn submit(&self, request: RestoreRequest) {
        let mut queue = self.queue.lock();
        queue.requests.push_back(request);
        self.wake_if_needed(&mut queue);
    }

    fn wake_if_needed(&self, queue: &mut Queue) {
        if wants_another_runner(queue.requests.len(), queue.runners, queue.woken) && self.ready.notify_one() {
            queue.woken += 1;
        }
    }

    /// Lets the threads end once the queue is empty.
    fn stop(&self) {
        self.queue.lock().stopping = true;
        self.ready.notify_all();
    }

    /// Never inlined: `scripts/miss-callgrind.sh` counts the instructions under this symbol.
    #[inline(never)]
    fn serve(&self, shared: &Shared) {
        // Read when the thread goes to sleep (a thread's CPU clock stands still while it sleeps):
        // a system call per wake-up, not per request.
        let mut clock = ThreadClock::start();
        while let Some(mut request) = self.next(&mut clock, shared) {
            match &request.need {
                RestoreNeed::Keys(keys) => {
                    shared.keyspace.restore_ahead(&shared.db, keys.iter().map(Vec::as_slice));
                    shared.note_fetch_ended();
                }
                RestoreNeed::ReadAhead(key) => {
                    match shared.keyspace.read_ahead(&shared.db, key, now_ms()) {
                        Some(entry) => request.resume.answer(entry.map_or(Reply::Nil, Entry::into_reply)),
                        // Restored (or to be restored): the loop runs the GET.
                        None => shared.keyspace.restore_ahead(&shared.db, std::iter::once(key.as_slice())),
                    }
                    shared.note_fetch_ended();
                }
                RestoreNeed::Table => {
                    // Possibly the rest of the restore: not a runner meanwhile, so that the
                    // requests queued behind it wake another thread.
                    self.leave_runners();
                    shared.keyspace.wait_restored(&shared.db);
                    self.queue.lock().runners += 1;
                }
            }
            request.inbox.resume(&request.waker, request.resume);
        }
    }

    fn leave_runners(&self) {
        let mut queue = self.queue.lock();
        queue.runners -= 1;
        self.wake_if_needed(&mut queue);
    }

    /// The next request, sleeping while there is none; the CPU the thread took since it last
    /// slept is added to `shared`'s count before it sleeps again.
    fn next(&self, clock: &mut ThreadClock, shared: &Shared) -> Option<RestoreRequest> {
        let mut queue = self.queue.lock();
        let mut counted = false;
        loop {
            if let Some(request) = queue.requests.pop_front() {
                return Some(request);
            }
            if !counted {
                // A system call: made outside the lock the event loops submit under, then the
                // queue is looked at again.
                MutexGuard::unlocked(&mut queue, || {
                    shared.restore_fetch_cpu_ns.fetch_add(clock.lap(), Ordering::Relaxed);
                });
                counted = true;
                continue;
            }
            if queue.stopping {
                queue.runners -= 1;
                return None;
            }
            queue.runners -= 1;
            self.ready.wait(&mut queue);
            queue.runners += 1;
            counted = false;
            // A thread that woke without a submit's notice takes a woken count over: either way
            // one more thread runs.
            queue.woken = queue.woken.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_woken_only_when_the_queue_outgrows_the_running_ones() {
        assert!(wants_another_runner(1, 0, 0), "nothing runs: the first request wakes one");
        assert!(!wants_another_runner(QUEUED_PER_RUNNER, 1, 0));
        assert!(wants_another_runner(QUEUED_PER_RUNNER + 1, 1, 0));
        // A thread already woken counts as running before it runs.
        assert!(!wants_another_runner(QUEUED_PER_RUNNER + 1, 1, 1));
        assert!(!wants_another_runner(0, 0, 0));
    }
}
