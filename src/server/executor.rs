//! Executor threads: the only threads that run transactions.
//!
//! Connection threads parse and wait for durability; the commands of each batch they read run
//! on one of a few executor threads. Engine structures shared by every thread that touches them
//! (the catalog's `ArcSwap`, the epoch collector's list of pinned threads) then see a handful of
//! threads instead of one per connection.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::thread::JoinHandle;

/// A unit of work.
pub type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    jobs: VecDeque<Job>,
    stopping: bool,
}

/// A fixed set of threads taking jobs from one queue.
pub struct Executor {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Executor {
    /// An executor with no threads yet (see [`Executor::start`]).
    pub fn new() -> Executor {
        Executor { queue: Mutex::new(Queue { jobs: VecDeque::new(), stopping: false }), ready: Condvar::new() }
    }

    /// Starts `threads` threads that run jobs until [`Executor::stop`].
    pub fn start(self: &std::sync::Arc<Self>, threads: usize) -> std::io::Result<Vec<JoinHandle<()>>> {
        (0..threads)
            .map(|i| {
                let executor = std::sync::Arc::clone(self);
                std::thread::Builder::new().name(format!("resp-exec-{i}")).spawn(move || executor.work())
            })
            .collect()
    }

    /// Queues a job.
    pub fn submit(&self, job: Job) {
        self.queue.lock().jobs.push_back(job);
        self.ready.notify_one();
    }

    /// Lets the threads finish the queued jobs and end.
    pub fn stop(&self) {
        self.queue.lock().stopping = true;
        self.ready.notify_all();
    }

    fn work(&self) {
        loop {
            let job = {
                let mut queue = self.queue.lock();
                loop {
                    if let Some(job) = queue.jobs.pop_front() {
                        break job;
                    }
                    if queue.stopping {
                        return;
                    }
                    self.ready.wait(&mut queue);
                }
            };
            job();
        }
    }
}

impl Default for Executor {
    fn default() -> Executor {
        Executor::new()
    }
}
