//! The global epoch `E` and the designated thread that advances it (SiloR §2).
//!
//! Workers read `E` at their serialization point and put it in their TID. Because every worker
//! reads the same variable after locking its write set, TIDs of different epochs are ordered
//! compatibly with the serial order even across anti-dependencies, which is what lets SiloR
//! persist and recover in units of epochs.
//!
//! Durability schemes learn of each advance through [`EpochManager::observe`] (SiloR's workers
//! flush their log buffers at epoch boundaries).

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The default epoch interval, as in Silo and SiloR.
pub const EPOCH_INTERVAL_DEFAULT_MS: u64 = 40;
/// The shortest interval accepted.
pub const EPOCH_INTERVAL_MIN_MS: u64 = 1;
/// The longest interval accepted.
pub const EPOCH_INTERVAL_MAX_MS: u64 = 10_000;

/// Observers called (on the advancer thread) after each advance, with the new epoch.
pub type EpochObserver = Box<dyn Fn(u64) + Send + Sync>;

/// The global epoch.
pub struct EpochManager {
    global: CachePadded<AtomicU64>,
    stop: Mutex<bool>,
    wake: Condvar,
    observers: Mutex<Vec<EpochObserver>>,
}

impl EpochManager {
    /// A manager whose epoch starts at `start` (1 for a new database; recovery starts past the
    /// largest recovered epoch).
    pub fn new(start: u64) -> Arc<EpochManager> {
        assert!(start >= 1, "epoch 0 is reserved for loaded data");
        Arc::new(EpochManager {
            global: CachePadded::new(AtomicU64::new(start)),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            observers: Mutex::new(Vec::new()),
        })
    }

    /// The current global epoch `E`. `SeqCst` because it is read at the serialization point,
    /// after the lock phase, and must not be reordered before the locks (Silo's fence).
    pub fn current(&self) -> u64 {
        self.global.load(Ordering::SeqCst)
    }

    /// Advances `E` by one and returns the new value. Called by the advancer thread, and by tests
    /// that need an epoch boundary now.
    pub fn advance(&self) -> u64 {
        let next = self.global.fetch_add(1, Ordering::SeqCst) + 1;
        for observer in self.observers.lock().iter() {
            observer(next);
        }
        next
    }

    /// Raises `E` to at least `epoch` (recovery restarts the epoch above everything recovered).
    pub fn advance_to(&self, epoch: u64) {
        self.global.fetch_max(epoch, Ordering::SeqCst);
    }

    /// Registers a function to call after every advance (durability schemes flush at epoch
    /// boundaries).
    pub fn observe(&self, observer: EpochObserver) {
        self.observers.lock().push(observer);
    }

    /// Starts the designated advancer thread.
    pub fn start_advancer(self: &Arc<Self>, interval_ms: u64) -> std::io::Result<JoinHandle<()>> {
        assert!((EPOCH_INTERVAL_MIN_MS..=EPOCH_INTERVAL_MAX_MS).contains(&interval_ms));
        let manager = Arc::clone(self);
        std::thread::Builder::new().name("lazarus-epoch".into()).spawn(move || {
            let interval = Duration::from_millis(interval_ms);
            let mut stop = manager.stop.lock();
            loop {
                // Checked before waiting too: a stop that came before this thread first took the
                // lock sent its wake-up to nobody, and `close` would wait a whole interval.
                if *stop {
                    return;
                }
                let timed_out = manager.wake.wait_for(&mut stop, interval).timed_out();
                if *stop {
                    return;
                }
                if timed_out {
                    drop(stop);
                    manager.advance();
                    stop = manager.stop.lock();
                }
            }
        })
    }

    /// Asks the advancer thread to stop; join its handle afterwards.
    pub fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancer_advances_and_stops() {
        let m = EpochManager::new(1);
        let seen = Arc::new(AtomicU64::new(0));
        let s = Arc::clone(&seen);
        m.observe(Box::new(move |e| s.store(e, Ordering::SeqCst)));
        let h = m.start_advancer(1).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while m.current() < 4 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        m.stop();
        h.join().unwrap();
        assert!(m.current() >= 4, "epoch did not advance");
        assert_eq!(seen.load(Ordering::SeqCst), m.current(), "observer missed the last advance");
    }
}
