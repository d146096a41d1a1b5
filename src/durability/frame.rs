//! Framed, checksummed blocks: the unit every log file is written and read in.
//!
//! ```text
//! offset  size  field
//! 0       4     magic            0x4B42_5A4C ("LZBK" little-endian)
//! 4       4     payload_len      bytes of payload that follow the header
//! 8       4     payload_crc      CRC-32C of the payload
//! 12      4     header_crc       CRC-32C of bytes 0..12
//! 16      n     payload
//! ```
//!
//! The header has its own checksum so that a half-written header is detected as such, and a torn
//! payload is detected by its checksum. A reader returns, for each position, either a whole block
//! or the reason it is not one ([`FrameError`]); what a damaged block means (a torn tail to cut
//! off, or corruption inside the durable part to report) is decided by the caller, who knows how
//! much of the file was synced.

/// Size of a block header in bytes.
pub const HEADER_SIZE_BYTES: usize = 16;
/// The largest payload a block may carry (a worker's log buffer is smaller).
pub const PAYLOAD_SIZE_MAX_BYTES: usize = 64 << 20;
/// The block magic ("LZBK" little-endian).
pub const BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"LZBK");

/// Why the bytes at an offset are not a whole, valid block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes remain than a header needs.
    #[error("truncated block header ({available_bytes} of {HEADER_SIZE_BYTES} bytes)")]
    TruncatedHeader {
        /// Bytes left in the file.
        available_bytes: usize,
    },
    /// The header's checksum or magic is wrong.
    #[error("damaged block header")]
    BadHeader,
    /// The header claims more payload than remains.
    #[error("truncated block payload ({available_bytes} of {payload_len} bytes)")]
    TruncatedPayload {
        /// Bytes left after the header.
        available_bytes: usize,
        /// Bytes the header claims.
        payload_len: usize,
    },
    /// The payload's checksum is wrong.
    #[error("block payload checksum mismatch")]
    BadPayload,
}

/// Appends one framed block holding `payload` to `out`.
pub fn encode_block(payload: &[u8], out: &mut Vec<u8>) {
    assert!(payload.len() <= PAYLOAD_SIZE_MAX_BYTES, "block payload of {} bytes exceeds the limit", payload.len());
    let mut header = [0u8; HEADER_SIZE_BYTES];
    header[0..4].copy_from_slice(&BLOCK_MAGIC.to_le_bytes());
    header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[8..12].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let header_crc = crc32c::crc32c(&header[0..12]);
    header[12..16].copy_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
}

/// A block header that passed its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// Bytes of payload after the header.
    pub payload_len: usize,
    /// CRC-32C the payload must have.
    pub payload_crc: u32,
}

impl BlockHeader {
    /// The block's total size on disk.
    pub fn size_bytes(&self) -> usize {
        HEADER_SIZE_BYTES + self.payload_len
    }

    /// Checks `payload` (exactly `payload_len` bytes) against the header's checksum.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), FrameError> {
        debug_assert_eq!(payload.len(), self.payload_len);
        if crc32c::crc32c(payload) == self.payload_crc { Ok(()) } else { Err(FrameError::BadPayload) }
    }
}

/// Reads only the header at the start of `bytes` (a reader that splits a file into blocks checks
/// headers first and leaves payload checksums to the threads that decode the payloads).
pub fn decode_header(bytes: &[u8]) -> Result<BlockHeader, FrameError> {
    if bytes.len() < HEADER_SIZE_BYTES {
        return Err(FrameError::TruncatedHeader { available_bytes: bytes.len() });
    }
    let word = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    if word(0) != BLOCK_MAGIC || word(12) != crc32c::crc32c(&bytes[0..12]) {
        return Err(FrameError::BadHeader);
    }
    let payload_len = word(4) as usize;
    if payload_len > PAYLOAD_SIZE_MAX_BYTES {
        return Err(FrameError::BadHeader);
    }
    Ok(BlockHeader { payload_len, payload_crc: word(8) })
}

/// Reads the block at the start of `bytes`: its payload and its total size on disk.
pub fn decode_block(bytes: &[u8]) -> Result<(&[u8], usize), FrameError> {
    let header = decode_header(bytes)?;
    let available_bytes = bytes.len() - HEADER_SIZE_BYTES;
    if available_bytes < header.payload_len {
        return Err(FrameError::TruncatedPayload { available_bytes, payload_len: header.payload_len });
    }
    let payload = &bytes[HEADER_SIZE_BYTES..header.size_bytes()];
    header.check_payload(payload)?;
    Ok((payload, header.size_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_every_cut_is_detected() {
        let mut file = Vec::new();
        encode_block(b"first payload", &mut file);
        encode_block(b"", &mut file);
        encode_block(&[7u8; 300], &mut file);
        let mut at = 0;
        let mut payloads = Vec::new();
        while at < file.len() {
            let (payload, size) = decode_block(&file[at..]).unwrap();
            payloads.push(payload.to_vec());
            at += size;
        }
        assert_eq!(payloads, vec![b"first payload".to_vec(), vec![], vec![7u8; 300]]);
        let last_start = file.len() - HEADER_SIZE_BYTES - 300;
        for cut in last_start..file.len() {
            assert!(decode_block(&file[last_start..cut]).is_err(), "cut at {cut} was not detected");
        }
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let mut block = Vec::new();
        encode_block(b"some payload bytes", &mut block);
        for bit in 0..block.len() * 8 {
            let mut damaged = block.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_block(&damaged).is_err(), "flip of bit {bit} was not detected");
        }
    }
}
