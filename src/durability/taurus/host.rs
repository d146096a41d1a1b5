//! The stream schemes as a [`CheckpointHost`]: SiloR's checkpoint manager, checkpointers, files
//! and loader run unchanged over them (`docs/taurus.md`, "Checkpoints", has the argument).
//!
//! - [`CheckpointHost::before_checkpoint`]: opens the window after the current epoch (command
//!   flavors log write sets in it, data flavors whole rows); every logger starts a new segment;
//!   then the epoch is advanced, so the `e_l` the manager reads next is above the epoch of every
//!   record in the old segments.
//! - [`CheckpointHost::wait_persistent`]: waits until every logger's persistent point reaches
//!   what had been appended when the checkpointers finished: every transaction whose write the
//!   checkpoint may hold, and every one before the new segments, is then committable.
//! - [`CheckpointHost::truncate_log`]: closes the window, then removes the segments before the
//!   rotation and every file of earlier generations.

use super::Shared;
use super::format;
use crate::durability::checkpoint::CheckpointHost;
use crate::io::FileSystem;
use crate::txn::epoch::EpochManager;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A stream scheme seen by its checkpoint manager.
pub struct StreamHost {
    shared: Arc<Shared>,
    epochs: Arc<EpochManager>,
    /// The generation being written.
    generation: u64,
    /// Per logger, the base of the segment the last `before_checkpoint` started.
    rotated: Mutex<Vec<u64>>,
}

impl StreamHost {
    /// The host view of `shared`, writing `generation`.
    pub fn new(shared: Arc<Shared>, epochs: Arc<EpochManager>, generation: u64) -> StreamHost {
        StreamHost { shared, epochs, generation, rotated: Mutex::new(Vec::new()) }
    }
}

impl CheckpointHost for StreamHost {
    fn fs(&self) -> &dyn FileSystem {
        self.shared.options.fs.as_ref()
    }

    fn dirs(&self) -> &[PathBuf] {
        &self.shared.options.log_dirs
    }

    /// Ignores `e_h`: the stream schemes have no persistent epoch. What the checkpoint may hold
    /// was installed, hence appended, before now.
    fn wait_persistent(&self, _e_h: u64) -> bool {
        let targets: Vec<u64> = self.shared.streams().iter().map(|s| s.appended_end()).collect();
        let durable = &self.shared.durable;
        let mut guard = durable.lock.lock();
        loop {
            if durable.failed.get().is_some() || self.shared.checkpoint.is_stopping() {
                return false;
            }
            if self.shared.streams().iter().zip(&targets).all(|(s, &t)| s.persistent() >= t) {
                return true;
            }
            durable.cv.wait_for(&mut guard, Duration::from_millis(20));
        }
    }

    /// Data flavors log column patches (`super::encode_redo`) and keep every version the walk
    /// sees; the window's whole rows alone would now suffice (`docs/taurus.md`, "Column patches").
    fn reduced(&self) -> bool {
        self.shared.options.flavor.is_command()
    }

    fn truncate_log(&self, _e_l: u64) -> std::io::Result<usize> {
        // Installed: transactions of later epochs may log calls (and column patches) again.
        self.shared.window.close_after(self.epochs.current());
        let rotated = self.rotated.lock().clone();
        remove_segments_before(self.shared.as_ref(), self.generation, &rotated)
    }

    fn before_checkpoint(&self) -> bool {
        // Every transaction of an epoch ≥ e_l (read after the advance below) reads the window
        // after this store, until the checkpoint is installed: command flavors log its write set
        // instead of its call, data flavors its whole rows instead of column patches (the walk
        // may find its key deleted by a later transaction, and a patch needs a row to apply to).
        self.shared.window.open_after(self.epochs.current());
        let mut rotated = Vec::with_capacity(self.shared.streams().len());
        for stream in self.shared.streams() {
            match stream.rotate(&self.shared.durable) {
                Ok(base) => rotated.push(base),
                Err(_) => return false,
            }
        }
        *self.rotated.lock() = rotated;
        // A record in an old segment was appended before its rotation, after its transaction read
        // the epoch: its epoch is below the one this makes current, so below e_l.
        self.epochs.advance();
        true
    }
}

/// Removes every segment of `generation` whose logger's `rotated` base is above its own, and
/// every segment of an earlier generation, oldest first, syncing the directory after each: what
/// remains of a logger's log is always a suffix, even after a crash in the middle. Returns how
/// many were removed.
fn remove_segments_before(shared: &Shared, generation: u64, rotated: &[u64]) -> std::io::Result<usize> {
    let options = &shared.options;
    let fs = options.fs.as_ref();
    let mut dirs = options.log_dirs.clone();
    dirs.sort();
    dirs.dedup();
    let mut doomed = Vec::new();
    for dir in &dirs {
        for name in fs.list(dir)? {
            let Some((taurus, logger, g, base)) = format::parse_segment_name(&name) else { continue };
            let old = g < generation || (g == generation && rotated.get(logger).is_some_and(|&r| base < r));
            if taurus == options.flavor.is_taurus() && old {
                doomed.push((g, logger, base, dir.clone(), name));
            }
        }
    }
    doomed.sort();
    for (_, _, _, dir, name) in &doomed {
        fs.remove(&dir.join(name))?;
        fs.sync_dir(dir)?;
    }
    Ok(doomed.len())
}
