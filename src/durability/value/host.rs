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

impl CheckpointHost for ValueHost {
    fn fs(&self) -> &dyn FileSystem {
        self.scheme.options.fs.as_ref()
    }

    fn dirs(&self) -> &[PathBuf] {
        &self.scheme.options.log_dirs
    }

    fn wait_persistent(&self, epoch: u64) -> bool {
        let scheme = &self.scheme;
        scheme.want(epoch);
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
        if !self.scheme.pepoch_names_checkpoint(e_l) {
            return Ok(0);
        }
        let written = self.scheme.written_pepoch.lock().positions.clone();
        let keep_from = |logger: usize| written.iter().find(|p| p.logger as usize == logger).map(|p| p.file_seq);
        remove_logs_before(self.fs(), self.dirs(), e_l, &keep_from)
    }
}

/// Removes each logger's `old_data.<max epoch>.<seq>` files with `max epoch < e_l` and `seq`
/// below `keep_from(logger)` (a logger with `None` keeps all); returns how many. Shared by the
/// schemes that truncate the value log after a checkpoint.
pub(crate) fn remove_logs_before(
    fs: &dyn FileSystem,
    dirs: &[PathBuf],
    e_l: u64,
    keep_from: &dyn Fn(usize) -> Option<u64>,
) -> std::io::Result<usize> {
    let mut removed = 0;
    for (logger, dir) in dirs.iter().enumerate() {
        let Some(keep_from) = keep_from(logger) else { continue };
        let mut removed_here = 0;
        for name in fs.list(dir)? {
            let Some((max_epoch, seq)) = files::parse_old_log_name(&name) else { continue };
            if max_epoch < e_l && seq < keep_from {
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
