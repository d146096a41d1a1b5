//! The real file system, through `std::fs`. `sync_data` is `fdatasync(2)` on Linux.

use super::{File, FileSystem, OpenMode, SharedFile};
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

struct RealFile {
    file: fs::File,
}

impl File for RealFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.seek(SeekFrom::End(0))?;
        self.file.write_all(data)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.file.seek(SeekFrom::Start(offset))?;
        self.file.read(buf)
    }

    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
        self.file.set_len(len_bytes)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// A file shared between threads: `pread`/`pwrite` need no seek, so no lock (what redb's own
/// file backend does); the lock is `flock` on the open file description, as redb's.
struct RealSharedFile {
    file: fs::File,
    path: PathBuf,
}

impl SharedFile for RealSharedFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| with_path(e, &self.path))
    }

    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset).map_err(|e| with_path(e, &self.path))
    }

    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata().map_err(|e| with_path(e, &self.path))?.len())
    }

    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        self.file.set_len(len_bytes).map_err(|e| with_path(e, &self.path))
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data().map_err(|e| with_path(e, &self.path))
    }

    fn try_lock(&self) -> io::Result<bool> {
        match self.file.try_lock() {
            Ok(()) => Ok(true),
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => Err(with_path(e, &self.path)),
        }
    }

    fn unlock(&self) -> io::Result<()> {
        self.file.unlock().map_err(|e| with_path(e, &self.path))
    }
}

impl FileSystem for RealFs {
    fn open_shared(&self, path: &Path, create: bool) -> io::Result<Arc<dyn SharedFile>> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| with_path(e, path))?;
        Ok(Arc::new(RealSharedFile { file, path: path.to_path_buf() }))
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>> {
        let mut options = fs::OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
            // Not O_APPEND: on Linux, pwrite on an O_APPEND file ignores the offset and appends.
            OpenMode::Append => options.read(true).write(true).create(true),
            OpenMode::ReadWrite | OpenMode::WriteDirect => options.read(true).write(true),
        };
        if mode == OpenMode::WriteDirect {
            let direct = options.clone().custom_flags(libc::O_DIRECT).open(path);
            match direct {
                Ok(file) => return Ok(Box::new(RealFile { file })),
                // The file system has no direct I/O (tmpfs, some FUSE mounts): write through
                // the page cache, which is slower but the same on disk.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(with_path(e, path)),
            }
        }
        let file = options.open(path).map_err(|e| with_path(e, path))?;
        Ok(Box::new(RealFile { file }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        // A new directory's name is durable only once its parent is synced; without this a log
        // directory created on first open could vanish with everything in it at power loss.
        let missing: Vec<PathBuf> =
            path.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).map(Path::to_path_buf).collect();
        fs::create_dir_all(path).map_err(|e| with_path(e, path))?;
        for dir in missing.iter().rev() {
            let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            self.sync_dir(parent)?;
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to).map_err(|e| with_path(e, from))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path).map_err(|e| with_path(e, path))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| with_path(e, dir))? {
            names.push(PathBuf::from(entry?.file_name()));
        }
        names.sort();
        Ok(names)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| with_path(e, dir))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }
}

/// Adds the path to an error so that messages say which file failed.
fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_and_atomic_write_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs;
        let path = dir.path().join("a.log");
        let mut f = fs.open(&path, OpenMode::Append).unwrap();
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        f.write_at(0, b"J").unwrap();
        f.sync_data().unwrap();
        assert_eq!(f.len_bytes().unwrap(), 11);
        let mut buf = [0u8; 5];
        assert_eq!(f.read_at(6, &mut buf).unwrap(), 5);
        assert_eq!(&buf, b"world");
        f.truncate(5).unwrap();
        drop(f);
        assert_eq!(fs.read_all(&path, 100).unwrap(), b"Jello");
        assert!(fs.read_all(&path, 4).is_err(), "size limit must be enforced");

        let marker = dir.path().join("pepoch");
        fs.write_atomic(&marker, b"1").unwrap();
        fs.write_atomic(&marker, b"2").unwrap();
        assert_eq!(fs.read_all(&marker, 10).unwrap(), b"2");
        let names = fs.list(dir.path()).unwrap();
        assert_eq!(names, vec![PathBuf::from("a.log"), PathBuf::from("pepoch")]);
        fs.rename(&path, &dir.path().join("b.log")).unwrap();
        fs.remove(&dir.path().join("b.log")).unwrap();
        assert!(!fs.exists(&dir.path().join("b.log")).unwrap());
    }

    #[test]
    fn errors_name_the_file() {
        let err = match RealFs.open(Path::new("/nonexistent/x.log"), OpenMode::Read) {
            Err(e) => e,
            Ok(_) => panic!("opening a missing file must fail"),
        };
        assert!(err.to_string().contains("/nonexistent/x.log"), "{err}");
        assert!(RealFs.open(Path::new("/nonexistent/x.log"), OpenMode::CreateNew).is_err());
    }
}
