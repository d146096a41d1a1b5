//! redb's storage backend over [`crate::io::FileSystem`]: the indexed log's pages go through the
//! project's one I/O trait, so the simulated disk ([`crate::io::sim::SimDisk`]) can lose, tear
//! and fail them like every other file, and the real disk sees the same `pread`/`pwrite`/
//! `fdatasync` calls redb's own file backend makes.
//!
//! # What redb assumes of the disk, and how the simulated disk models it
//!
//! redb (4.5) is a copy-on-write B-tree. A commit with quick repair (every commit here,
//! `IndexStore::apply`) is a two-phase commit (`TransactionalMemory::commit`):
//! 1. the new pages and the allocator state go to pages the last durable commit does not use,
//!    and the super-header is rewritten with the new commit in the *secondary* slot; `sync_data`;
//! 2. the super-header is rewritten again with the god byte naming that slot the primary one;
//!    `sync_data`.
//!
//! So redb assumes (a) that `sync_data` returning Ok makes the written bytes durable, (b) that a
//! crash before a sync leaves the pages of the last durable commit untouched (it never writes
//! into them), and (c) that a write of the super-header lands whole or not at all ("these two
//! bits need to be written atomically"). The super-header (9-byte magic, god byte, layout, and
//! two 128-byte commit slots, each with a 128-bit checksum) is the file's first 320 bytes, inside
//! one 512-byte sector.
//!
//! The simulated disk keeps (a) and (b): a synced write survives every crash, an unsynced one is
//! applied, dropped or torn. It is harsher than redb's assumption (c): a torn write may put
//! garbage into the header's sector, destroying the magic and both slots. redb's open then fails
//! ("not a redb file" or a checksum error) and recovery treats the indexed log as damaged: it is
//! rebuilt from the sequential log (`IndexedLogging::rebuild`). A real disk writes a sector
//! atomically or returns an error, so there a crash leaves the old or the new commit.
//!
//! Locks: redb asks for byte-range locks first and falls back to a whole-file lock when the
//! backend refuses ranges (`BackendError::Unsupported`); this backend offers only the whole
//! file ([`SharedFile::try_lock`]: `flock` on the real disk, a per-inode flag on the simulated
//! one), so a second open of the same indexed log fails with `DatabaseAlreadyOpen`.

use crate::io::SharedFile;
use redb::{BackendError, StorageBackend};
use std::io;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;

/// redb's storage over one [`SharedFile`].
pub struct FsBackend {
    file: Arc<dyn SharedFile>,
    path: PathBuf,
}

impl FsBackend {
    /// A backend over `file`, which is at `path` (for messages).
    pub fn new(file: Arc<dyn SharedFile>, path: PathBuf) -> FsBackend {
        FsBackend { file, path }
    }
}

impl std::fmt::Debug for FsBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FsBackend({})", self.path.display())
    }
}

fn is_whole_file(start: Bound<u64>, end: Bound<u64>) -> bool {
    matches!(start, Bound::Unbounded | Bound::Included(0)) && end == Bound::Unbounded
}

impl StorageBackend for FsBackend {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len_bytes()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.file.read_exact_at(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.file.write_all_at(offset, data)
    }

    fn close(&self) -> Result<(), io::Error> {
        self.file.unlock()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        if !is_whole_file(start, end) {
            return Err(BackendError::Unsupported);
        }
        // `From<io::Error>` maps ErrorKind::Unsupported to BackendError::Unsupported.
        self.file.try_lock().map_err(BackendError::from)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        if !is_whole_file(start, end) {
            return Err(BackendError::Unsupported);
        }
        self.file.unlock().map_err(BackendError::from)
    }
}
