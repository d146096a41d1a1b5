//! Appends to a log file with its whole pages written directly to the disk ([`OpenMode::WriteDirect`],
//! no copy into the page cache) and only the partial pages at either end of each append through
//! the page cache.
//!
//! Why: a logger writes every committed byte once. Through the page cache the kernel copies each
//! byte into a page it first zeroes, which cost 1.4–2.7 s of CPU per GB on the machine measured
//! (the logger's thread was 14 % of a TPC-C run's samples, nearly all of it in the kernel's copy
//! and page clearing); direct writes cost 0.04 s per GB (`docs/io.md`, "Direct writes").
//!
//! How: the bytes of one append land at file offsets `len .. len + n`. The part before the first
//! page boundary (completing the file's last, partial page) and the part after the last boundary
//! are written through the page cache; the whole pages between go in one direct write. The
//! staging buffer is placed so that a byte's address and its file offset agree modulo the page
//! size, which makes the direct part's memory aligned too. Nothing is padded: the file's bytes
//! are exactly the appended bytes, so readers are unchanged, and no byte is written twice, so a
//! synced byte is never at risk from a later write (the disk model of `crate::io`).
//!
//! Durability is the file's: [`PageAppender::sync_data`] syncs the file (`fdatasync` covers the
//! pages in the page cache and the direct writes alike, and the length).

use crate::io::{DIRECT_ALIGN_BYTES, File, FileSystem, OpenMode};
use std::io;
use std::path::Path;

/// The staging buffer's room kept between appends; a larger append grows it for that append only.
pub const STAGING_KEPT_MAX_BYTES: usize = 64 << 20;

const PAGE: usize = DIRECT_ALIGN_BYTES;

/// An open log file being appended to; see the module docs.
pub struct PageAppender {
    /// Writes of partial pages, reads, syncs and truncation.
    cached: Box<dyn File>,
    /// Writes of whole pages.
    direct: Box<dyn File>,
    /// The file's length: every byte appended so far.
    len_bytes: u64,
    /// `staging[start..]` holds the bytes staged for the next append. `start` is chosen so that
    /// `staging[start]`'s address is congruent to `len_bytes` modulo the page size.
    staging: Vec<u8>,
    start: usize,
}

impl PageAppender {
    /// An appender to the file at `path`, already open as `cached` (for writing) and
    /// `len_bytes` long; it opens a second, direct handle.
    pub fn new(fs: &dyn FileSystem, path: &Path, cached: Box<dyn File>, len_bytes: u64) -> io::Result<PageAppender> {
        let direct = fs.open(path, OpenMode::WriteDirect)?;
        let mut appender = PageAppender { cached, direct, len_bytes, staging: Vec::new(), start: 0 };
        appender.reset();
        Ok(appender)
    }

    /// The file's length: the bytes appended by [`PageAppender::append_staged`] so far.
    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// Bytes staged and not yet appended.
    pub fn staged_bytes(&self) -> usize {
        self.staging.len() - self.start
    }

    /// Stages bytes for the next append: `fill` may only push to the vector it is given.
    pub fn stage(&mut self, fill: impl FnOnce(&mut Vec<u8>)) {
        let before = self.staging.len();
        fill(&mut self.staging);
        assert!(self.staging.len() >= before, "stage may only append");
    }

    /// Appends the staged bytes to the file; returns how many. Not durable until
    /// [`PageAppender::sync_data`].
    pub fn append_staged(&mut self) -> io::Result<u64> {
        let n = self.staged_bytes();
        if n == 0 {
            return Ok(0);
        }
        self.realign();
        let offset = self.len_bytes;
        let data = &self.staging[self.start..];
        let head = n.min((PAGE - (offset % PAGE as u64) as usize) % PAGE);
        let whole = (n - head) / PAGE * PAGE;
        if head > 0 {
            self.cached.write_at(offset, &data[..head])?;
        }
        if whole > 0 {
            debug_assert!((offset + head as u64).is_multiple_of(PAGE as u64));
            debug_assert!(data[head..].as_ptr().addr().is_multiple_of(PAGE));
            self.direct.write_at(offset + head as u64, &data[head..head + whole])?;
        }
        if head + whole < n {
            self.cached.write_at(offset + (head + whole) as u64, &data[head + whole..])?;
        }
        self.len_bytes += n as u64;
        self.reset();
        Ok(n as u64)
    }

    /// Makes every appended byte and the file's length durable (fdatasync).
    pub fn sync_data(&mut self) -> io::Result<()> {
        self.cached.sync_data()
    }

    /// Empties the staging buffer and places its start for the file's current length.
    fn reset(&mut self) {
        if self.staging.capacity() > STAGING_KEPT_MAX_BYTES {
            self.staging = Vec::new();
        }
        if self.staging.capacity() < 2 * PAGE {
            self.staging.reserve_exact(2 * PAGE);
        }
        self.staging.clear();
        self.start = self.start_for(self.staging.as_ptr().addr());
        self.staging.resize(self.start, 0);
    }

    /// The offset in a buffer at `base` whose address is congruent to the file's length modulo
    /// the page size.
    fn start_for(&self, base: usize) -> usize {
        let want = (self.len_bytes % PAGE as u64) as usize;
        (want + PAGE - base % PAGE) % PAGE
    }

    /// Restores the staged bytes' alignment if staging them grew (and so moved) the buffer.
    fn realign(&mut self) {
        let start = self.start_for(self.staging.as_ptr().addr());
        if start == self.start {
            return;
        }
        let n = self.staged_bytes();
        let mut moved: Vec<u8> = Vec::with_capacity(n + 2 * PAGE);
        let start = self.start_for(moved.as_ptr().addr());
        moved.resize(start, 0);
        moved.extend_from_slice(&self.staging[self.start..]);
        self.staging = moved;
        self.start = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::SimDisk;
    use rand::{Rng, SeedableRng};

    /// Appends of every size, from one byte to several pages, staged in pieces, give the file
    /// exactly the bytes appended; the simulated disk refuses any direct write that is not
    /// aligned, so each one also checks the split into partial and whole pages.
    #[test]
    fn appends_of_any_size_give_the_bytes_appended() {
        let disk = SimDisk::new();
        let path = Path::new("/log");
        let file = disk.open(path, OpenMode::CreateNew).expect("create");
        let mut appender = PageAppender::new(&disk, path, file, 0).expect("appender");
        let mut rng = rand::rngs::StdRng::seed_from_u64(23);
        let mut expected = Vec::new();
        for round in 0..300 {
            let pieces = rng.random_range(1..4);
            for _ in 0..pieces {
                let len = match round % 3 {
                    0 => rng.random_range(1..64),
                    1 => rng.random_range(1..3 * PAGE),
                    _ => rng.random_range(PAGE..6 * PAGE),
                };
                let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                expected.extend_from_slice(&bytes);
                appender.stage(|out| out.extend_from_slice(&bytes));
            }
            let staged = appender.staged_bytes() as u64;
            assert_eq!(appender.append_staged().expect("append"), staged);
            assert_eq!(appender.len_bytes(), expected.len() as u64);
        }
        appender.sync_data().expect("sync");
        assert_eq!(disk.read_all(path, u64::MAX).expect("read"), expected);
    }

    /// The direct handle really is direct: a misaligned write through it is refused, so the
    /// test above would fail if the appender sent it one.
    #[test]
    fn the_simulated_disk_refuses_a_misaligned_direct_write() {
        let disk = SimDisk::new();
        let path = Path::new("/log");
        drop(disk.open(path, OpenMode::CreateNew).expect("create"));
        let mut direct = disk.open(path, OpenMode::WriteDirect).expect("open direct");
        let mut buf = vec![0u8; 3 * PAGE];
        let at = PAGE - buf.as_ptr().addr() % PAGE;
        assert!(direct.write_at(0, &buf[at..at + PAGE]).is_ok());
        assert!(direct.write_at(512, &buf[at..at + PAGE]).is_err(), "offset");
        assert!(direct.write_at(0, &buf[at..at + 512]).is_err(), "length");
        assert!(direct.write_at(0, &buf[at + 1..at + 1 + PAGE]).is_err(), "address");
        buf.clear();
    }
}
