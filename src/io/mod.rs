//! All file I/O goes through one small trait, [`FileSystem`], so that tests can swap the real disk
//! for a simulated one that drops, reorders and tears writes that were not synced.
//!
//! # What the code assumes about the disk
//!
//! These are the assumptions every log, checkpoint and marker file relies on. The simulated disk
//! (the reliability work) breaks everything that is not promised here.
//!
//! - **Nothing is durable until synced.** A write that returned may be lost entirely, partly
//!   (torn at any 512-byte sector boundary), or with garbage in its sectors, if the machine loses
//!   power before [`File::sync_data`] returns. Writes may reach the disk in any order.
//! - **`sync_data` (fdatasync) makes a file's written bytes and its length durable.** It does not
//!   make the file's *name* durable: a new file, a rename or a removal is durable only after
//!   [`FileSystem::sync_dir`] on the directory that holds it.
//! - **Rename is atomic** with respect to crashes once the directory is synced: after recovery the
//!   name refers to the old file or the new one, never a mix. Markers (e.g. `pepoch`, a checkpoint
//!   manifest) are written to a temporary name, synced, renamed over the old name, and the
//!   directory synced.
//! - **A failed sync is fatal** (PostgreSQL's rule after "fsyncgate"): the kernel may have dropped
//!   the dirty pages, so retrying can report success for data that is gone. A caller that sees an
//!   error from `sync_data` or `sync_dir` must stop acknowledging commits.
//! - **Checksums detect damage; they do not prevent it.** Every block Lazarus writes carries a
//!   CRC-32C, checked after reading it back.

pub mod cache;
pub mod hook;
pub mod real;
pub mod sim;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Create a new file for writing; fails if it exists.
    CreateNew,
    /// Open for appending, creating it if missing.
    Append,
    /// Read and write at offsets; the file must exist.
    ReadWrite,
    /// Write whole pages at offsets, bypassing the page cache (`O_DIRECT`); the file must exist.
    /// Every write's offset, length and memory address must be multiples of
    /// [`DIRECT_ALIGN_BYTES`] (the simulated disk refuses any other write, as Linux does). Where
    /// the file system refuses `O_DIRECT` (tmpfs, some FUSE mounts) the handle writes through
    /// the page cache instead: the same bytes, the same durability after `sync_data`. Why:
    /// writing a log through the page cache cost the kernel 1.4–2.7 s of CPU per GB written on
    /// the machine measured, against 0.04 s direct (`docs/io.md`, "Direct writes").
    WriteDirect,
}

/// The alignment of a [`OpenMode::WriteDirect`] write's offset, length and memory: the largest
/// block size a disk is likely to need (4 KiB physical sectors).
pub const DIRECT_ALIGN_BYTES: usize = 4096;

/// An open file.
pub trait File: Send {
    /// Appends all of `data` at the end of the file.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;

    /// Writes all of `data` at `offset`.
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at end of file).
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;

    /// The file's current length in bytes.
    fn len_bytes(&self) -> io::Result<u64>;

    /// Cuts the file to `len_bytes`.
    fn truncate(&mut self, len_bytes: u64) -> io::Result<()>;

    /// Makes the file's data and length durable (fdatasync). See the module docs.
    fn sync_data(&mut self) -> io::Result<()>;
}

/// A file read and written at offsets by several threads at once: the pages of the indexed log's
/// B-tree (redb's storage backend, `durability::indexed::backend`). Every method takes `&self`, so
/// readers do not queue behind one another (the real file uses `pread`/`pwrite`).
pub trait SharedFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; reading past the end is an error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Writes all of `data` at `offset`.
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// The file's current length in bytes.
    fn len_bytes(&self) -> io::Result<u64>;

    /// Cuts or extends (with zeros) the file to `len_bytes`; durable after `sync_data`.
    fn set_len(&self, len_bytes: u64) -> io::Result<()>;

    /// Makes the file's data and length durable (fdatasync). See the module docs.
    fn sync_data(&self) -> io::Result<()>;

    /// Takes an exclusive lock on the whole file if no other handle holds one; returns whether
    /// it did. Held until [`SharedFile::unlock`] or until the handle is dropped. `Unsupported`
    /// where the file system has no locks.
    fn try_lock(&self) -> io::Result<bool>;

    /// Releases the lock [`SharedFile::try_lock`] took (nothing if none is held).
    fn unlock(&self) -> io::Result<()>;
}

/// A file system: the real one, or a simulated disk in tests.
pub trait FileSystem: Send + Sync {
    /// Opens a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>>;

    /// Creates a directory and its parents, durably: each directory created is synced into its
    /// parent before this returns (a new name is durable only once its directory is synced).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Renames a file, replacing `to` if it exists. Durable after `sync_dir` of the directory.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes a file. Durable after `sync_dir` of the directory.
    fn remove(&self, path: &Path) -> io::Result<()>;

    /// The names of the entries of a directory, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;

    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Whether a file or directory exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;

    /// Opens a file for reads and writes at offsets from several threads, creating it (empty)
    /// when `create` and it is missing; the new name is durable after `sync_dir`. This default
    /// serialises the calls on one [`File`] and has no locks; the real file system and the
    /// simulated disk override it.
    fn open_shared(&self, path: &Path, create: bool) -> io::Result<Arc<dyn SharedFile>> {
        let file = self.open(path, if create { OpenMode::Append } else { OpenMode::ReadWrite })?;
        Ok(Arc::new(SerialFile { file: parking_lot::Mutex::new(file) }))
    }

    /// Reads a whole file, refusing files larger than `size_max_bytes`.
    fn read_all(&self, path: &Path, size_max_bytes: u64) -> io::Result<Vec<u8>> {
        let mut file = self.open(path, OpenMode::Read)?;
        let len = file.len_bytes()?;
        if len > size_max_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is {len} bytes; the limit is {size_max_bytes}", path.display()),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        let mut at = 0usize;
        while at < buf.len() {
            let n = file.read_at(at as u64, &mut buf[at..])?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} shrank while read", path.display()),
                ));
            }
            at += n;
        }
        Ok(buf)
    }

    /// Writes `data` to `path` atomically and durably: to `path.tmp`, synced, renamed over
    /// `path`, directory synced. After a crash `path` holds the old contents or the new ones.
    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let dir = path.parent().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no directory"))?;
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        if self.exists(&tmp)? {
            self.remove(&tmp)?;
        }
        let mut file = self.open(&tmp, OpenMode::CreateNew)?;
        file.append(data)?;
        file.sync_data()?;
        drop(file);
        self.rename(&tmp, path)?;
        self.sync_dir(dir)
    }
}

/// [`FileSystem::open_shared`]'s default: one [`File`] behind a mutex.
struct SerialFile {
    file: parking_lot::Mutex<Box<dyn File>>,
}

impl SharedFile for SerialFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut file = self.file.lock();
        let mut at = 0usize;
        while at < buf.len() {
            let n = file.read_at(offset + at as u64, &mut buf[at..])?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file"));
            }
            at += n;
        }
        Ok(())
    }

    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.lock().write_at(offset, data)
    }

    fn len_bytes(&self) -> io::Result<u64> {
        self.file.lock().len_bytes()
    }

    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        self.file.lock().truncate(len_bytes)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.lock().sync_data()
    }

    fn try_lock(&self) -> io::Result<bool> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "this file system has no file locks"))
    }

    fn unlock(&self) -> io::Result<()> {
        Ok(())
    }
}
