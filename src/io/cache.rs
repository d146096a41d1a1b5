//! The page cache, for measurements: recovery "cold" (files evicted from the page cache, as
//! after a reboot) and the rate of reading the same files the way `cat > /dev/null` does, so a
//! replay rate can be set against the I/O limit in one run.
//!
//! Eviction uses `posix_fadvise(POSIX_FADV_DONTNEED)` on each file after syncing it: it needs no
//! privileges (unlike writing `/proc/sys/vm/drop_caches`), and drops the clean pages of that file
//! only. The kernel may keep a page another process has mapped; for log and checkpoint files
//! nobody maps, the next read comes from the disk.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

/// Syncs `path` and asks the kernel to drop its pages from the page cache.
pub fn evict(path: &Path) -> io::Result<()> {
    let file = std::fs::File::open(path)?;
    file.sync_all()?;
    // SAFETY: a plain system call on a file descriptor that `file` keeps open.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Reads every file in order with one 128 KiB buffer, as `cat` does; returns (bytes, seconds).
pub fn read_like_cat(paths: &[std::path::PathBuf]) -> io::Result<(u64, f64)> {
    let started = Instant::now();
    let mut buf = vec![0u8; 128 << 10];
    let mut total = 0u64;
    for path in paths {
        let mut file = std::fs::File::open(path)?;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
    }
    Ok((total, started.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicted_files_still_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 300_000]).unwrap();
        evict(&path).unwrap();
        let (bytes, secs) = read_like_cat(std::slice::from_ref(&path)).unwrap();
        assert_eq!(bytes, 300_000);
        assert!(secs >= 0.0);
        assert!(evict(&dir.path().join("missing")).is_err());
    }
}
