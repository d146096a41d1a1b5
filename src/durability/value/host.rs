//! The value scheme as a [`CheckpointHost`]: the checkpoint manager waits on its `pepoch` and
//! asks it to remove log files that a newer checkpoint made unnecessary.

use super::SchemeShared;
use super::files;
use crate::durability::checkpoint::CheckpointHost;
use crate::io::FileSystem;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The value scheme seen by its checkpoint manager.
pub struct ValueHost {
    scheme: Arc<SchemeShared>,
}

impl ValueHost {
    /// The host view of `scheme`.
    pub fn new(scheme: Arc<SchemeShared>) -> ValueHost {
        ValueHost { scheme }
    }
}

impl ValueHost {
    /// Asks the pepoch writer to name the checkpoint of `e_l` and waits, bounded, until a
    /// `pepoch` file that does is durable.
    fn pepoch_names_checkpoint(&self, e_l: u64) -> bool {
        let scheme = &self.scheme;
        scheme.checkpoint_e_l.fetch_max(e_l, Ordering::SeqCst);
        let wait_ms = 20 * scheme.options.sync_interval_ms.max(1);
        let deadline = std::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut guard = scheme.pepoch_lock.lock();
        loop {
            if scheme.written_checkpoint_e_l.load(Ordering::SeqCst) >= e_l {
                return true;
            }
            if scheme.has_failed() || scheme.pepoch_stop.load(Ordering::SeqCst) {
                return false;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            scheme.wake_pepoch();
            scheme.pepoch_cv.wait_for(&mut guard, (deadline - now).min(Duration::from_millis(10)));
        }
    }
}

impl CheckpointHost for ValueHost {
    fn fs(&self) -> &dyn FileSystem {
        self.scheme.options.fs.as_ref()
    }

    fn dirs(&self) -> &[PathBuf] {
        &self.scheme.options.log_dirs
    }

    fn wait_persistent(&self, epoch: u64) -> bool {
        let scheme = &self.scheme;
        let mut guard = scheme.pepoch_lock.lock();
        loop {
            if scheme.has_failed() || scheme.pepoch_stop.load(Ordering::SeqCst) || scheme.checkpoint.is_stopping() {
                return false;
            }
            if epoch <= scheme.pepoch() {
                return true;
            }
            scheme.pepoch_cv.wait_for(&mut guard, Duration::from_millis(50));
        }
    }

    /// Removes `old_data.<max epoch>.<seq>` files with `max epoch < e_l` (SiloR §4: "any file
    /// with e < e_l can be deleted"), but only those older than the durable file named by the
    /// last `pepoch` file written: recovery requires that file to exist. And only once a durable
    /// `pepoch` file names the checkpoint ([`files::Pepoch::checkpoint_e_l`]), so that recovery
    /// can tell a log with removed files from a log whose manifest was lost; if the pepoch writer
    /// does not get there within a few sync intervals, nothing is removed this time (the next
    /// checkpoint removes it).
    fn truncate_log(&self, e_l: u64) -> std::io::Result<usize> {
        if !self.pepoch_names_checkpoint(e_l) {
            return Ok(0);
        }
        let fs = self.fs();
        let written = self.scheme.written_positions.lock().clone();
        let mut removed = 0;
        for (logger, dir) in self.dirs().iter().enumerate() {
            let Some(position) = written.iter().find(|p| p.logger as usize == logger) else { continue };
            let mut removed_here = 0;
            for name in fs.list(dir)? {
                let Some((max_epoch, seq)) = files::parse_old_log_name(&name) else { continue };
                if max_epoch < e_l && seq < position.file_seq {
                    fs.remove(&dir.join(&name))?;
                    removed_here += 1;
                }
            }
            if removed_here > 0 {
                fs.sync_dir(dir)?;
            }
            removed += removed_here;
        }
        Ok(removed)
    }
}
