//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz, nightly) and for the stable test
//! that replays their corpus (`tests/fuzz_corpus.rs`). Each function takes arbitrary bytes and
//! runs them through one decoder or parser the way the engine does when it reads a file or a
//! request, and must never panic, hang or allocate from a length the input claims: a bad input
//! gives `Err` with a reason. `docs/RELIABILITY.md` lists the targets and their runs.
//!
//! Every function returns how many items (entries, records, requests, procedures) decoded before
//! the end or the first error, so the corpus test can check that the seeds still decode.

use crate::durability::checkpoint::format as checkpoint_format;
use crate::durability::codec::Reader;
use crate::durability::command;
use crate::durability::frame;
use crate::durability::indexed::store as indexed_store;
use crate::durability::taurus::format as stream_format;
use crate::durability::value::files::{self, EntryFormat};
use crate::server::resp::{InputBuffer, ProtoLimits, RequestParser};
use crate::storage::{Catalog, IndexBackend};
use std::sync::Arc;

/// What a fuzz entry decoded: items before the end or the first error, and that error.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Items decoded.
    pub items: usize,
    /// The first error, if the input did not decode to its end.
    pub error: Option<String>,
}

impl Decoded {
    fn fail(mut self, reason: impl ToString) -> Decoded {
        self.error = Some(reason.to_string());
        self
    }
}

/// The framed blocks of `bytes` from `at` on, as recovery walks them: each payload to `each`,
/// stopping at the first block that does not decode.
fn blocks(bytes: &[u8], mut at: usize, mut each: impl FnMut(&[u8]) -> Result<usize, String>) -> Decoded {
    let mut out = Decoded::default();
    while at < bytes.len() {
        let (payload, size) = match frame::decode_block(&bytes[at..]) {
            Ok(block) => block,
            Err(e) => return out.fail(format!("block at {at}: {e}")),
        };
        match each(payload) {
            Ok(n) => out.items += n,
            Err(e) => return out.fail(format!("block at {at}: {e}")),
        }
        at += size;
    }
    out
}

/// The entries of a value-log block payload (`codec::Reader::entry`, as replay reads them).
fn value_entries(payload: &[u8]) -> Result<usize, String> {
    let mut r = Reader::new(payload);
    let mut n = 0;
    while !r.is_empty() {
        r.entry().map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(n)
}

/// The entries of a command-log block payload (`command::decode`).
fn command_entries(payload: &[u8]) -> Result<usize, String> {
    let mut r = Reader::new(payload);
    let mut n = 0;
    while !r.is_empty() {
        command::decode(&mut r).map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(n)
}

/// A value or command log file (`data.log`, `old_data.*`): the header, then framed blocks of
/// entries in the header's format; a block that is an end block ends the file.
pub fn decode_value_log(bytes: &[u8]) -> Decoded {
    let (header, at) = match files::decode_log_header(bytes) {
        Ok(h) => h,
        Err(e) => return Decoded::default().fail(e),
    };
    let mut ended = false;
    blocks(bytes, at, |payload| {
        if ended {
            return Err("a block after the end block".into());
        }
        if files::decode_end_block(payload).is_some() {
            ended = true;
            return Ok(0);
        }
        match header.format {
            EntryFormat::Value => value_entries(payload),
            EntryFormat::Command => command_entries(payload),
        }
    })
}

/// One value-log block payload, without its frame (past the CRC the fuzzer cannot forge).
pub fn decode_value_log_block(payload: &[u8]) -> Decoded {
    match value_entries(payload) {
        Ok(items) => Decoded { items, error: None },
        Err(e) => Decoded::default().fail(e),
    }
}

/// One command-log block payload, without its frame.
pub fn decode_command_log_block(payload: &[u8]) -> Decoded {
    match command_entries(payload) {
        Ok(items) => Decoded { items, error: None },
        Err(e) => Decoded::default().fail(e),
    }
}

fn one<T, E: ToString>(result: Result<T, E>) -> Decoded {
    match result {
        Ok(_) => Decoded { items: 1, error: None },
        Err(e) => Decoded::default().fail(e),
    }
}

/// The `pepoch` file.
pub fn decode_pepoch(bytes: &[u8]) -> Decoded {
    one(files::decode_pepoch(bytes))
}

/// The `catalog` file: its modules (their sources go through [`check_procedures`] on recovery).
pub fn decode_catalog(bytes: &[u8]) -> Decoded {
    match files::decode_catalog(bytes) {
        Ok(modules) => Decoded { items: modules.len(), error: None },
        Err(e) => Decoded::default().fail(e),
    }
}

/// A checkpoint manifest (`checkpoint`).
pub fn decode_checkpoint_manifest(bytes: &[u8]) -> Decoded {
    one(checkpoint_format::decode_manifest(bytes))
}

/// The records of one checkpoint data block payload.
fn checkpoint_records(payload: &[u8]) -> Result<usize, String> {
    let (_table, count, mut r) = checkpoint_format::decode_block_head(payload).map_err(|e| e.to_string())?;
    for _ in 0..count {
        checkpoint_format::decode_record(&mut r).map_err(|e| e.to_string())?;
    }
    if !r.is_empty() {
        return Err("bytes after the block's records".into());
    }
    Ok(count as usize)
}

/// A checkpoint data file (`checkpoint.<id>.<dir>.<file>`): its header, then framed data blocks.
pub fn decode_checkpoint_data(bytes: &[u8]) -> Decoded {
    match checkpoint_format::decode_data_header(bytes) {
        Ok((_, at)) => blocks(bytes, at, checkpoint_records),
        Err(e) => Decoded::default().fail(e),
    }
}

/// One checkpoint data block payload, without its frame.
pub fn decode_checkpoint_block(payload: &[u8]) -> Decoded {
    match checkpoint_records(payload) {
        Ok(items) => Decoded { items, error: None },
        Err(e) => Decoded::default().fail(e),
    }
}

/// One record of a serial/Taurus stream (`stream_format::decode_record`).
fn stream_record(payload: &[u8]) -> Result<usize, String> {
    stream_format::decode_record(payload).map(|_| 1).map_err(|e| e.to_string())
}

/// A serial or Taurus log file (`serial.*.log`, `taurus.*.log`): the header block, then one
/// framed record per block.
pub fn decode_stream_log(bytes: &[u8]) -> Decoded {
    match stream_format::decode_header(bytes) {
        Ok((_, at)) => blocks(bytes, at, stream_record),
        Err(e) => Decoded::default().fail(e),
    }
}

/// One stream record payload, without its frame.
pub fn decode_stream_record(payload: &[u8]) -> Decoded {
    one(stream_record(payload))
}

/// A stream scheme's persistent vector file (`serial.persistent_vector`,
/// `taurus.persistent_vector`): two slots, the valid one with the larger sequence current.
pub fn decode_stream_persistent_vector(bytes: &[u8]) -> Decoded {
    one(stream_format::decode_persistent_vector_file(bytes))
}

/// The indexed store's records: the input as an `images` value, as the progress record, and as
/// a full key (table and primary key).
pub fn decode_indexed_records(bytes: &[u8]) -> Decoded {
    let image = indexed_store::decode_image(bytes).is_ok();
    let progress = indexed_store::decode_progress(bytes).is_ok();
    let key = indexed_store::split_key(bytes).is_some();
    let items = usize::from(image) + usize::from(progress) + usize::from(key);
    Decoded { items, error: (items == 0).then(|| "neither an image, a progress record nor a key".into()) }
}

/// Longest procedure source the fuzz entry checks (the checker's own limits bound the rest).
pub const SOURCE_SIZE_MAX_BYTES: usize = 64 << 10;

/// A procedure-language module: lexed, parsed and checked against an empty catalog, then its
/// tables created and its procedures compiled, as `Database::load_module` does.
pub fn check_procedures(bytes: &[u8]) -> Decoded {
    if bytes.len() > SOURCE_SIZE_MAX_BYTES {
        return Decoded::default().fail("source above the size limit");
    }
    let Ok(source) = std::str::from_utf8(bytes) else {
        return Decoded::default().fail("not UTF-8");
    };
    let mut catalog = Catalog::default();
    let module = match crate::proc::check_source("<fuzz>", source, &catalog) {
        Ok(m) => m,
        Err(diags) => return Decoded::default().fail(diags.first().map_or(String::new(), |d| d.to_string())),
    };
    for schema in module.tables {
        catalog = match catalog.with_table(schema, IndexBackend::default()) {
            Ok(c) => c,
            Err(e) => return Decoded::default().fail(e),
        };
    }
    let mut out = Decoded::default();
    for p in module.procedures {
        match crate::proc::CompiledProcedure::compile(Arc::new(p), &catalog) {
            Ok(_) => out.items += 1,
            Err(d) => return out.fail(d),
        }
    }
    out
}

/// Most requests one RESP input is parsed into.
pub const RESP_REQUESTS_MAX: usize = 4096;

/// RESP requests: the first byte chooses how many bytes arrive per read (1..=64), so requests
/// split across reads at every point; the rest is the byte stream of one connection, parsed with
/// small limits until it is used up or the parser reports a protocol error.
pub fn parse_resp(bytes: &[u8]) -> Decoded {
    let Some((&first, mut input)) = bytes.split_first() else { return Decoded::default() };
    let chunk_bytes = usize::from(first % 64) + 1;
    let limits = ProtoLimits { bulk_bytes_max: 4096, args_max: 64, request_bytes_max: 16 << 10, line_bytes_max: 1024 };
    let mut parser = RequestParser::new(limits);
    let mut buffer = InputBuffer::default();
    let mut out = Decoded::default();
    while !input.is_empty() {
        if let Err(e) = buffer.fill(&mut input, chunk_bytes) {
            return out.fail(e);
        }
        loop {
            match parser.next(&mut buffer) {
                Ok(Some(_)) if out.items < RESP_REQUESTS_MAX => out.items += 1,
                Ok(Some(_)) => return out.fail("more requests than the entry parses"),
                Ok(None) => break,
                Err(e) => return out.fail(e),
            }
        }
    }
    out
}

/// A fuzz entry.
pub type Entry = fn(&[u8]) -> Decoded;

/// Every entry by target name (the names of `fuzz/fuzz_targets/*.rs` and `fuzz/corpus/*`).
pub const TARGETS: [(&str, Entry); 15] = [
    ("value_log", decode_value_log),
    ("value_log_block", decode_value_log_block),
    ("command_log_block", decode_command_log_block),
    ("pepoch", decode_pepoch),
    ("catalog", decode_catalog),
    ("checkpoint_manifest", decode_checkpoint_manifest),
    ("checkpoint_data", decode_checkpoint_data),
    ("checkpoint_block", decode_checkpoint_block),
    ("stream_log", decode_stream_log),
    ("stream_record", decode_stream_record),
    ("stream_persistent_vector", decode_stream_persistent_vector),
    ("indexed_records", decode_indexed_records),
    ("procedure", check_procedures),
    ("resp", parse_resp),
    ("frame", decode_frames),
];

/// Framed blocks on their own (`frame::decode_block`), as every log reader walks them.
pub fn decode_frames(bytes: &[u8]) -> Decoded {
    blocks(bytes, 0, |_| Ok(1))
}
