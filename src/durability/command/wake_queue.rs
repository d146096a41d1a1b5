//! The task queue of `clr-p`'s worker threads: tasks pushed by any thread, taken by idle workers,
//! and a stop flag that sends every worker home.
//!
//! The one rule it exists for: `stop` is set under the queue's lock. A worker holds that lock from
//! its check of `stop` until the condition variable's wait releases it; set without the lock, the
//! notification could fall between a worker's check and its sleep, and that worker would sleep
//! forever (a `clr-p` replay hung so in `pacman_replay` on a loaded machine, session 6). The test
//! `a_stop_between_a_workers_check_and_its_sleep_still_wakes_it` holds a worker in exactly that
//! window.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};

/// A queue of tasks with a stop flag.
pub(super) struct WakeQueue<T> {
    queue: Mutex<Vec<T>>,
    ready: Condvar,
    stop: AtomicBool,
    /// Tests only: called by a worker after it found the queue empty and `stop` unset, before it
    /// sleeps (the window the rule above is about).
    #[cfg(test)]
    before_sleep: Option<Box<dyn Fn() + Send + Sync>>,
}

impl<T> WakeQueue<T> {
    /// An empty queue; `stopped` if there is nothing to do at all.
    pub(super) fn new(stopped: bool) -> WakeQueue<T> {
        WakeQueue {
            queue: Mutex::new(Vec::new()),
            ready: Condvar::new(),
            stop: AtomicBool::new(stopped),
            #[cfg(test)]
            before_sleep: None,
        }
    }

    /// Adds tasks and wakes the workers.
    pub(super) fn push_all(&self, tasks: impl IntoIterator<Item = T>) {
        let mut queue = self.queue.lock();
        queue.extend(tasks);
        drop(queue);
        self.ready.notify_all();
    }

    /// The next task, sleeping while there is none; `None` once stopped (tasks left in the queue
    /// are taken first).
    pub(super) fn pop_or_wait(&self) -> Option<T> {
        let mut queue = self.queue.lock();
        loop {
            if let Some(task) = queue.pop() {
                return Some(task);
            }
            if self.stop.load(Ordering::SeqCst) {
                return None;
            }
            #[cfg(test)]
            if let Some(hook) = &self.before_sleep {
                hook();
            }
            self.ready.wait(&mut queue);
        }
    }

    /// Tells every worker to return: set under the lock (module docs), then wakes them all.
    pub(super) fn stop(&self) {
        let queue = self.queue.lock();
        self.stop.store(true, Ordering::SeqCst);
        drop(queue);
        self.ready.notify_all();
    }

    /// Whether [`WakeQueue::stop`] was called (a running task checks it to end early).
    pub(super) fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn tasks_are_taken_before_the_stop_is_seen() {
        let q = WakeQueue::new(false);
        q.push_all([1, 2]);
        q.stop();
        let mut got = vec![q.pop_or_wait(), q.pop_or_wait()];
        got.sort();
        assert_eq!(got, [Some(1), Some(2)]);
        assert_eq!(q.pop_or_wait(), None);
        assert!(q.is_stopped());
        assert_eq!(WakeQueue::<u8>::new(true).pop_or_wait(), None, "a queue with nothing to do is stopped");
    }

    /// The worker is held after its check of `stop` and before its sleep while another thread
    /// calls `stop`. With `stop` set under the lock, that call waits until the worker sleeps and
    /// then wakes it; set without the lock (the session-6 bug), it lands in the window and the
    /// worker never wakes, which the receive below reports after 10 s.
    #[test]
    fn a_stop_between_a_workers_check_and_its_sleep_still_wakes_it() {
        let (in_window_tx, in_window_rx) = mpsc::channel::<()>();
        let mut q = WakeQueue::<u32>::new(false);
        let in_window_tx = Mutex::new(Some(in_window_tx));
        q.before_sleep = Some(Box::new(move || {
            // Only the first time: announce the window, then stay in it a while, so that a stop
            // that does not wait for the lock has landed before this worker sleeps.
            if let Some(tx) = in_window_tx.lock().take() {
                tx.send(()).expect("the test is listening");
                std::thread::sleep(Duration::from_millis(200));
            }
        }));
        let q = Arc::new(q);
        let (done_tx, done_rx) = mpsc::channel();
        let worker = {
            let q = Arc::clone(&q);
            std::thread::spawn(move || done_tx.send(q.pop_or_wait()).expect("the test is listening"))
        };
        in_window_rx.recv_timeout(Duration::from_secs(10)).expect("the worker reached its sleep");
        q.stop();
        let got = done_rx.recv_timeout(Duration::from_secs(10)).expect("the stopped worker woke and returned");
        assert_eq!(got, None);
        worker.join().expect("worker thread");
    }
}
