//! Schemes `serial-data` and `serial-cmd`: the serial logging baselines of Taurus §6.1. One log
//! stream (one logger, one file per generation); every transaction takes a global LSN at its
//! serialization point; group commit flushes the stream every `flush_interval_ms` (5 ms) or when
//! its buffer is half full; recovery replays the records in LSN order on one thread. The stream,
//! its files and recovery are shared with Taurus ([`crate::durability::taurus`]); this module is
//! the worker's side.
//!
//! # Why the LSN is a serial order, and what is acknowledged
//!
//! The LSN is taken where the command scheme takes its commit sequence number (between the
//! lock phase and validation), so LSN order respects every RAW, WAW and WAR dependency (the
//! proof is in [`crate::durability::command`]). Records reach the stream in `log_commit` order,
//! which may differ from LSN order by transactions that do not depend on each other through
//! RAW or WAW: a transaction appends only after its predecessors installed, and they installed
//! after they appended. A transaction is acknowledged once the stream is persistent past its
//! own record ([`DurabilityTicket::Sequence`] holds that address); recovery replays every whole
//! record of the stream's prefix sorted by LSN. Every predecessor of a replayed transaction is
//! in the prefix, and no transaction missing from it wrote, before a replayed one's LSN, a
//! record that one read (it would have failed validation), so command replay reads what the
//! original execution read.
//!
//! A read-only transaction writes nothing; it is acknowledged once everything appended before
//! it committed is persistent (it may have read any of it).

use super::taurus::{Shared, append_record, encode_redo, format};
use super::{CommitTicket, CommitView, DurabilityError, DurabilityTicket, WorkerLog};
use crate::durability::taurus::stream::Stream;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A worker's log under `serial-data` or `serial-cmd`.
pub struct SerialWorkerLog {
    shared: Arc<Shared>,
    stream: Option<Arc<Stream>>,
    redo: Vec<u8>,
    payload: Vec<u8>,
    framed: Vec<u8>,
}

impl SerialWorkerLog {
    pub(crate) fn new(shared: Arc<Shared>) -> SerialWorkerLog {
        SerialWorkerLog { shared, stream: None, redo: Vec::new(), payload: Vec::new(), framed: Vec::new() }
    }
}

impl WorkerLog for SerialWorkerLog {
    fn serialization_point(&mut self, _epoch: u64) -> u64 {
        // The global LSN (see the module docs for why here).
        self.shared.lsn.fetch_add(1, Ordering::SeqCst)
    }

    fn abandon(&mut self, _lsn: u64) {
        // A gap in the LSNs: replay sorts by LSN and needs no dense sequence.
    }

    fn log_commit(&mut self, view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError> {
        self.shared.durable.check()?;
        let shared = Arc::clone(&self.shared);
        let stream = self.stream.get_or_insert_with(|| shared.stream(0));
        if view.is_read_only() {
            return Ok(CommitTicket { last_writer: 0, durability: DurabilityTicket::Sequence(stream.appended_end()) });
        }
        self.redo.clear();
        // Serial replay is a prefix in LSN order: every update's previous row is replayed first.
        let patches = !shared.options.whole_rows;
        encode_redo(&shared, view, |_| patches, &mut self.redo);
        self.payload.clear();
        let dependency_bytes = format::encode_txn(&format::Deps::None, &self.redo, &mut self.payload);
        let end = append_record(&shared, stream, &self.payload, &mut self.framed)?;
        shared.count(self.redo.len(), dependency_bytes);
        Ok(CommitTicket { last_writer: 0, durability: DurabilityTicket::Sequence(end) })
    }
}
