//! Streams a file's framed blocks ([`crate::durability::frame`]) in order through one buffer that
//! is reused for the whole file.
//!
//! Why not read the whole file first: a log segment may be up to 16 GiB, and recovery keeps
//! what it decodes, not the bytes. A file-sized buffer is also memory the process touches for
//! the first time, which the kernel zeroes: on the VM measured, 10 % of the CPU samples of a
//! TPC-C `taurus-data` recovery (`docs/PERFORMANCE.md`, "Taurus", "Session 18"). A chunk-sized
//! buffer is zeroed once and refilled by `read` from the page cache.
//!
//! A block is lent to the caller, not copied; the buffer holds at least one whole block, so a
//! block larger than a chunk grows it (to at most [`frame::PAYLOAD_SIZE_MAX_BYTES`] plus a
//! header: the frame refuses longer blocks, so a damaged length cannot make it allocate more).
//!
//! What a damaged block means is the caller's decision ([`Next::Damaged`]): a torn tail to cut,
//! or corruption to report. The frame error is the one [`frame::decode_block`] gives for the
//! rest of the file, so a reader that streams reports exactly what one reading the whole file
//! would.

use crate::durability::frame::{self, FrameError, HEADER_SIZE_BYTES};
use crate::io::{File, FileSystem, OpenMode};
use std::io;
use std::path::Path;

/// Bytes read per `read` call: large enough for the disk's full rate, small enough that each
/// of many reader threads can hold one.
pub const CHUNK_SIZE_BYTES: usize = 4 << 20;

/// Opens `path` to be read, refusing a file longer than `size_max_bytes` (what recovery
/// decodes of a file it keeps in memory). Returns the file and its length.
pub fn open_bounded(fs: &dyn FileSystem, path: &Path, size_max_bytes: u64) -> io::Result<(Box<dyn File>, u64)> {
    let file = fs.open(path, OpenMode::Read)?;
    let len_bytes = file.len_bytes()?;
    if len_bytes > size_max_bytes {
        let reason = format!("{} is {len_bytes} bytes; the limit is {size_max_bytes}", path.display());
        return Err(io::Error::new(io::ErrorKind::InvalidData, reason));
    }
    Ok((file, len_bytes))
}

/// One framed block, lent from the reader's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Block<'b> {
    /// The block's offset in the file.
    pub offset: u64,
    /// The whole block: header and payload (the payload's checksum was checked).
    pub framed: &'b [u8],
}

impl Block<'_> {
    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.framed[HEADER_SIZE_BYTES..]
    }

    /// The file offset just past the block.
    pub fn end(&self) -> u64 {
        self.offset + self.framed.len() as u64
    }
}

/// What is at the reader's position.
#[derive(Debug)]
pub enum Next<'b> {
    /// A whole, valid block; the position moves past it.
    Block(Block<'b>),
    /// The position is the end of the part of the file being read.
    End,
    /// The bytes at the position are not a whole, valid block. The position stays.
    Damaged(FrameError),
}

/// Reads the first `len_bytes` of a file block by block.
pub struct BlockReader<'f> {
    file: &'f mut dyn File,
    len_bytes: u64,
    /// `buf[start..filled]` holds the file's bytes from `offset` on.
    buf: Vec<u8>,
    start: usize,
    filled: usize,
    offset: u64,
}

impl<'f> BlockReader<'f> {
    /// A reader of `file`'s bytes `0..len_bytes` (the file must hold at least that many).
    pub fn new(file: &'f mut dyn File, len_bytes: u64) -> BlockReader<'f> {
        BlockReader { file, len_bytes, buf: Vec::new(), start: 0, filled: 0, offset: 0 }
    }

    /// The file offset of the next block (after [`Next::Damaged`], of the damaged bytes).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next block. I/O errors, and a file shorter than `len_bytes`, are errors; damage is
    /// not (see [`Next::Damaged`]).
    pub fn next_block(&mut self) -> io::Result<Next<'_>> {
        if self.offset == self.len_bytes {
            return Ok(Next::End);
        }
        self.fill(HEADER_SIZE_BYTES)?;
        let size = match frame::decode_header(&self.buf[self.start..self.filled]) {
            Ok(header) => header.size_bytes(),
            Err(error) => return Ok(Next::Damaged(error)),
        };
        self.fill(size)?;
        let (payload, decoded_size) = match frame::decode_block(&self.buf[self.start..self.filled]) {
            Ok(block) => block,
            Err(error) => return Ok(Next::Damaged(error)),
        };
        assert_eq!(decoded_size, size, "a block's size is its header's");
        debug_assert_eq!(payload.len() + HEADER_SIZE_BYTES, size);
        let block = Block { offset: self.offset, framed: &self.buf[self.start..self.start + size] };
        self.start += size;
        self.offset += size as u64;
        Ok(Next::Block(block))
    }

    /// The next block where the file must have one (its header block): the end of the file is
    /// a header cut short, as decoding an empty rest would say.
    pub fn required_block(&mut self) -> io::Result<Result<Block<'_>, FrameError>> {
        Ok(match self.next_block()? {
            Next::Block(block) => Ok(block),
            Next::End => Err(FrameError::TruncatedHeader { available_bytes: 0 }),
            Next::Damaged(error) => Err(error),
        })
    }

    /// Makes at least `want_bytes` from the position available in the buffer, or every byte up
    /// to `len_bytes` if fewer remain. `want_bytes` is at most a header and the largest payload.
    fn fill(&mut self, want_bytes: usize) -> io::Result<()> {
        debug_assert!(want_bytes <= HEADER_SIZE_BYTES + frame::PAYLOAD_SIZE_MAX_BYTES);
        let remaining_bytes = usize::try_from(self.len_bytes - self.offset).unwrap_or(usize::MAX);
        let want_bytes = want_bytes.min(remaining_bytes);
        if self.filled - self.start >= want_bytes {
            return Ok(());
        }
        // Move the unread tail to the front, then grow the buffer only if a block needs it.
        self.buf.copy_within(self.start..self.filled, 0);
        self.filled -= self.start;
        self.start = 0;
        let size_bytes = want_bytes.max(CHUNK_SIZE_BYTES.min(remaining_bytes));
        if self.buf.len() < size_bytes {
            self.buf.resize(size_bytes, 0);
        }
        let read_end = self.buf.len().min(remaining_bytes);
        while self.filled < want_bytes {
            let file_offset = self.offset + self.filled as u64;
            let n = self.file.read_at(file_offset, &mut self.buf[self.filled..read_end])?;
            if n == 0 {
                let reason = format!("the file ends at {file_offset}, before the {} bytes read", self.len_bytes);
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, reason));
            }
            self.filled += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in memory whose reads return at most `read_max_bytes`, as a `read` may.
    struct ShortReads {
        bytes: Vec<u8>,
        read_max_bytes: usize,
    }

    impl File for ShortReads {
        fn append(&mut self, data: &[u8]) -> io::Result<()> {
            self.bytes.extend_from_slice(data);
            Ok(())
        }
        fn write_at(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
            Err(io::Error::other("read only"))
        }
        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
            let from = (offset as usize).min(self.bytes.len());
            let n = buf.len().min(self.read_max_bytes).min(self.bytes.len() - from);
            buf[..n].copy_from_slice(&self.bytes[from..from + n]);
            Ok(n)
        }
        fn len_bytes(&self) -> io::Result<u64> {
            Ok(self.bytes.len() as u64)
        }
        fn truncate(&mut self, _: u64) -> io::Result<()> {
            Err(io::Error::other("read only"))
        }
        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Blocks of the given payload sizes, framed one after another.
    fn file_of(payload_sizes: &[usize]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (i, &size) in payload_sizes.iter().enumerate() {
            frame::encode_block(&vec![i as u8; size], &mut bytes);
        }
        bytes
    }

    /// Every block the reader gives, and how it stopped: (payloads, Some(damage) or None at end).
    fn read_all_blocks(bytes: &[u8], len_bytes: u64) -> (Vec<(u64, Vec<u8>)>, Option<FrameError>) {
        let mut file = ShortReads { bytes: bytes.to_vec(), read_max_bytes: 1 << 20 };
        let mut reader = BlockReader::new(&mut file, len_bytes);
        let mut blocks = Vec::new();
        loop {
            match reader.next_block().unwrap() {
                Next::Block(block) => blocks.push((block.offset, block.payload().to_vec())),
                Next::End => return (blocks, None),
                Next::Damaged(error) => return (blocks, Some(error)),
            }
        }
    }

    /// What decoding the whole slice gives, the reference.
    fn decode_whole(bytes: &[u8]) -> (Vec<(u64, Vec<u8>)>, Option<FrameError>) {
        let mut blocks = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            match frame::decode_block(&bytes[at..]) {
                Ok((payload, size)) => {
                    blocks.push((at as u64, payload.to_vec()));
                    at += size;
                }
                Err(error) => return (blocks, Some(error)),
            }
        }
        (blocks, None)
    }

    #[test]
    fn blocks_larger_and_smaller_than_a_chunk_stream_as_the_whole_file_decodes() {
        let sizes = [10, CHUNK_SIZE_BYTES - 40, 100, CHUNK_SIZE_BYTES + 5000, 0, 3, 2 * CHUNK_SIZE_BYTES, 7];
        let bytes = file_of(&sizes);
        let (blocks, damage) = read_all_blocks(&bytes, bytes.len() as u64);
        assert_eq!(damage, None);
        assert_eq!(blocks.len(), sizes.len());
        assert_eq!((blocks, damage), decode_whole(&bytes));
    }

    #[test]
    fn a_cut_at_every_offset_of_the_last_blocks_gives_the_prefix_and_the_whole_file_error() {
        let bytes = file_of(&[CHUNK_SIZE_BYTES - 30, 50, 20]);
        let last_two = bytes.len() - (HEADER_SIZE_BYTES + 20) - (HEADER_SIZE_BYTES + 50);
        for cut in last_two..=bytes.len() {
            let got = read_all_blocks(&bytes[..cut], cut as u64);
            assert_eq!(got, decode_whole(&bytes[..cut]), "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_byte_is_damage_at_its_block() {
        let mut bytes = file_of(&[100, CHUNK_SIZE_BYTES, 100]);
        let second = HEADER_SIZE_BYTES + 100;
        bytes[second + HEADER_SIZE_BYTES + 12345] ^= 1;
        let (blocks, damage) = read_all_blocks(&bytes, bytes.len() as u64);
        assert_eq!(blocks.len(), 1);
        assert_eq!(damage, Some(FrameError::BadPayload));
    }

    #[test]
    fn reading_a_prefix_stops_at_its_length_and_a_short_file_is_an_error() {
        let bytes = file_of(&[10, 20, 30]);
        let two = (2 * HEADER_SIZE_BYTES + 30) as u64;
        let (blocks, damage) = read_all_blocks(&bytes, two);
        assert_eq!((blocks.len(), damage), (2, None));

        let mut file = ShortReads { bytes: bytes.clone(), read_max_bytes: 7 };
        let mut reader = BlockReader::new(&mut file, bytes.len() as u64 + 1);
        for _ in 0..3 {
            assert!(matches!(reader.next_block(), Ok(Next::Block(_))));
        }
        let error = reader.next_block().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_required_block_at_the_end_is_a_header_cut_short() {
        let bytes = file_of(&[5]);
        let mut file = ShortReads { bytes: bytes.clone(), read_max_bytes: 1 << 20 };
        let mut reader = BlockReader::new(&mut file, bytes.len() as u64);
        assert_eq!(reader.required_block().unwrap().map(|b| b.payload().to_vec()), Ok(vec![0u8; 5]));
        let end = reader.required_block().unwrap().map(|b| b.offset);
        assert_eq!(end, Err(FrameError::TruncatedHeader { available_bytes: 0 }));
        let mut flipped = bytes;
        flipped[3] ^= 1;
        let mut file = ShortReads { bytes: flipped.clone(), read_max_bytes: 1 << 20 };
        let mut reader = BlockReader::new(&mut file, flipped.len() as u64);
        assert_eq!(reader.required_block().unwrap().map(|b| b.offset), Err(FrameError::BadHeader));
    }
}
