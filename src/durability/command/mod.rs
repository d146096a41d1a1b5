//! Scheme `command`: command logging as PACMAN does it (§3): a procedure call is logged as its
//! procedure id and arguments, in a global commit order; an ad-hoc transaction (no procedure) is
//! logged as its write set (§4.5). Loggers, epochs, `pepoch`, rotation and framing are SiloR's
//! ([`crate::durability::value`]); only the entries differ (`LZCMDLOG` files).
//!
//! # The commit sequence number is a valid serial order
//!
//! A committing transaction takes `seq = commit_seq.fetch_add(1)` at its serialization point:
//! after its lock phase (its write set is locked), before validation. Take two committed
//! transactions `A` and `B` where `B` depends on `A`:
//! - **write-write** on a record `x`: `A` holds `x`'s lock from its lock phase to its install,
//!   and `B` can only lock `x` after that, so `B`'s serialization point follows `A`'s;
//! - **read-write** (`B` read what `A` wrote): `B` read it after `A` installed it, and `B`'s
//!   serialization point follows its reads;
//! - **write-read** (anti-dependency: `A` read `x`, `B` overwrote it, `A` before `B`): `A`
//!   validates `x` after its serialization point, and would have aborted had `B` locked or
//!   installed `x` by then; so `B` locked `x` after `A`'s serialization point, and its own
//!   serialization point (after its lock phase) comes later still.
//!
//! In every case `seq(A) < seq(B)`, so replaying in `seq` order respects every dependency: it is
//! a serial order equivalent to the execution. The same argument holds for the epoch each reads
//! at that point (Silo's epochs only grow), so `(epoch, seq)` is such an order too, and the set
//! of transactions of epochs `≤ pepoch` is closed under dependencies: recovery replays exactly
//! that set, sorted by `(epoch, seq)` — a prefix of a serial order, as ARCHITECTURE.md's
//! invariant 2 requires. `tests/durability_command.rs` checks it end to end.
//!
//! # Entry layout (inside the framed blocks of a command log)
//!
//! ```text
//! u8   kind          1 = procedure call, 2 = ad-hoc write set
//! u64  commit_seq
//! kind 1: u64 tid, u32 procedure_id, u16 arg_count,
//!         arg_count times: u8 0 (scalar) + row of 1 value | u8 1 (array) + row of n values
//! kind 2: a value-log entry (TID and writes, src/durability/codec.rs)
//! ```
//!
//! Rows are the codec's row encoding. `docs/FORMAT.md` has the same table.
//!
//! # Checkpoints (PACMAN §2.2: commands need a transactionally consistent state to replay on)
//!
//! SiloR's checkpoint is fuzzy: a record overwritten while the checkpointers walk the tables may
//! be written as of any epoch up to `e_h`, or not at all (a version of epoch ≥ `e_l` is skipped).
//! Scheme `command` makes it transactionally consistent **as of the epoch boundary after `e_h`**,
//! without stopping transactions, by logging write sets while it runs:
//!
//! 1. Before the manager reads `e_l` ([`CheckpointHost::before_checkpoint`](crate::durability::checkpoint::CheckpointHost::before_checkpoint)), the [`DataWindow`] is
//!    opened from the epoch after the current one, and the manager waits (transactions do not)
//!    until the epoch has advanced into it. A transaction decides how to log by its own epoch,
//!    read at its serialization point: every transaction of an epoch ≥ `e_l` serialized after the
//!    window opened, so it logs its write set (kind 2) instead of its call.
//! 2. SiloR's checkpoint runs unchanged (same files and manifest, `src/durability/checkpoint/`).
//! 3. Once the manifest is installed ([`CheckpointHost::truncate_log`](crate::durability::checkpoint::CheckpointHost::truncate_log)) the window is closed after the
//!    current epoch (≥ `e_h`), and log files holding only epochs < `e_l` are removed as SiloR
//!    removes them: the command log is truncated.
//!
//! Recovery loads the checkpoint, installs the write sets of epochs `[e_l, e_h]` with their logged
//! TIDs (largest TID wins, any order), which gives exactly the state after the last transaction of
//! epoch `e_h` — every key's newest version of an epoch ≤ `e_h` is either in the checkpoint (if
//! older than `e_l`) or in the window — and then replays the entries of later epochs with the
//! chosen engine. The price is a value-sized log during the checkpoint's epochs only. A checkpoint
//! that fails after the window opened leaves it open (write sets are always replayable); the next
//! installed checkpoint closes it.

pub mod parallel;
pub mod recovery;
mod wake_queue;

use super::codec::{self, DecodeError, Reader};
use super::value::worker::ValueWorkerLog;
use super::{CommitTicket, CommitView, DurabilityError, DurabilityTicket, LoggedWrite, ViewNeeds, WorkerLog};
use crate::storage::ParamValue;
use crate::txn::Tid;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const KIND_CALL: u8 = 1;
const KIND_DATA: u8 = 2;
const ARG_SCALAR: u8 = 0;
const ARG_ARRAY: u8 = 1;
/// The most arguments one logged call may carry.
pub const ARGS_MAX: usize = 1024;

/// How a command log is replayed (`lazarus recover --command-replay`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommandReplay {
    /// Serial re-execution in commit order (PACMAN's baseline CLR).
    #[default]
    Clr,
    /// PACMAN: static analysis, intra-batch key spaces and inter-batch pipelining.
    ClrP,
    /// PACMAN with the static analysis only (Figure 19's first bar).
    ClrPStatic,
    /// PACMAN with static analysis and intra-batch parallelism, batches one at a time.
    ClrPIntra,
    /// Latch-free parallel replay of write sets shuffled by table and key (every entry data).
    LlrP,
}

impl CommandReplay {
    /// Every engine, as the command line spells them.
    pub const NAMES: &'static str = "clr, clr-p, clr-p-static, clr-p-intra, llr-p";
}

impl std::str::FromStr for CommandReplay {
    type Err = String;

    fn from_str(s: &str) -> Result<CommandReplay, String> {
        match s {
            "clr" => Ok(CommandReplay::Clr),
            "clr-p" => Ok(CommandReplay::ClrP),
            "clr-p-static" => Ok(CommandReplay::ClrPStatic),
            "clr-p-intra" => Ok(CommandReplay::ClrPIntra),
            "llr-p" => Ok(CommandReplay::LlrP),
            _ => Err(format!("command replay must be one of {}, got {s:?}", CommandReplay::NAMES)),
        }
    }
}

impl std::fmt::Display for CommandReplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CommandReplay::Clr => "clr",
            CommandReplay::ClrP => "clr-p",
            CommandReplay::ClrPStatic => "clr-p-static",
            CommandReplay::ClrPIntra => "clr-p-intra",
            CommandReplay::LlrP => "llr-p",
        })
    }
}

/// Options of scheme `command`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandOptions {
    /// The replay engine recovery uses.
    pub replay: CommandReplay,
    /// Log every transaction as its write set, procedure calls too (for `llr-p`, and PACMAN
    /// §6.2.4's all-ad-hoc end of the range).
    pub log_calls_as_data: bool,
    /// `clr-p`: most transactions per log batch; 0 means [`parallel::BATCH_TXNS_MAX`].
    pub batch_txns: usize,
}

/// The epochs whose calls are logged as write sets because a checkpoint is being taken (module
/// docs, "Checkpoints"): `from ..= to`; none while `from` is `u64::MAX`. The stream schemes' data
/// flavors log whole rows instead of column patches in it (`docs/taurus.md`, "Column patches").
#[derive(Debug)]
pub struct DataWindow {
    from: AtomicU64,
    to: AtomicU64,
}

impl Default for DataWindow {
    fn default() -> DataWindow {
        DataWindow { from: AtomicU64::new(u64::MAX), to: AtomicU64::new(u64::MAX) }
    }
}

impl DataWindow {
    /// Whether a transaction of `epoch` logs its write set (data flavors: whole rows).
    pub fn covers(&self, epoch: u64) -> bool {
        epoch >= self.from.load(Ordering::SeqCst) && epoch <= self.to.load(Ordering::SeqCst)
    }

    /// Opens the window from the epoch after `current` on, with no end yet. `to` goes first: a
    /// transaction that reads the two between the stores logs data it need not, never the reverse.
    pub fn open_after(&self, current: u64) {
        self.to.store(u64::MAX, Ordering::SeqCst);
        self.from.store(current + 1, Ordering::SeqCst);
    }

    /// Closes the window after epoch `last` (≥ the checkpoint's `e_h`).
    pub fn close_after(&self, last: u64) {
        self.to.store(last, Ordering::SeqCst);
    }
}

/// Most milliseconds a checkpoint waits for the epoch after the one it opened its data window in.
const WINDOW_OPEN_WAIT_MS_MAX: u64 = 10_000;

/// The command scheme seen by SiloR's checkpoint manager: the value scheme's host, plus the data
/// window opened before each checkpoint and closed once it is installed (module docs).
pub struct CommandHost {
    inner: super::value::host::ValueHost,
    window: Arc<DataWindow>,
    epochs: Arc<crate::txn::epoch::EpochManager>,
}

impl CommandHost {
    /// The host over the value scheme's `inner`.
    pub fn new(
        inner: super::value::host::ValueHost,
        window: Arc<DataWindow>,
        epochs: Arc<crate::txn::epoch::EpochManager>,
    ) -> CommandHost {
        CommandHost { inner, window, epochs }
    }
}

impl super::checkpoint::CheckpointHost for CommandHost {
    fn fs(&self) -> &dyn crate::io::FileSystem {
        self.inner.fs()
    }

    fn dirs(&self) -> &[std::path::PathBuf] {
        self.inner.dirs()
    }

    fn wait_persistent(&self, epoch: u64) -> bool {
        self.inner.wait_persistent(epoch)
    }

    /// The checkpoint is installed: calls of later epochs are logged as calls again.
    fn truncate_log(&self, e_l: u64) -> std::io::Result<usize> {
        self.window.close_after(self.epochs.current());
        self.inner.truncate_log(e_l)
    }

    /// Opens the window after the current epoch and waits (without stopping any transaction)
    /// until the epoch has moved past it, so that the checkpoint's `e_l` is in the window.
    fn before_checkpoint(&self) -> bool {
        let current = self.epochs.current();
        self.window.open_after(current);
        let started = std::time::Instant::now();
        while self.epochs.current() <= current {
            if started.elapsed().as_millis() as u64 > WINDOW_OPEN_WAIT_MS_MAX {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        true
    }
}

/// A worker's log for the command scheme: SiloR's buffers with command entries.
pub struct CommandWorkerLog {
    inner: ValueWorkerLog,
    commit_seq: Arc<AtomicU64>,
    calls_as_data: bool,
    window: Arc<DataWindow>,
}

impl CommandWorkerLog {
    /// Wraps the buffers of a value-scheme worker; `commit_seq` is the scheme's global counter.
    pub fn new(inner: ValueWorkerLog, commit_seq: Arc<AtomicU64>) -> CommandWorkerLog {
        CommandWorkerLog { inner, commit_seq, calls_as_data: false, window: Arc::default() }
    }

    /// Logs write sets in the epochs of `window` (checkpoints).
    pub fn with_window(mut self, window: Arc<DataWindow>) -> CommandWorkerLog {
        self.window = window;
        self
    }

    /// Logs procedure calls as their write sets too.
    pub fn with_calls_as_data(mut self, calls_as_data: bool) -> CommandWorkerLog {
        self.calls_as_data = calls_as_data;
        self
    }
}

impl WorkerLog for CommandWorkerLog {
    fn view_needs(&self) -> ViewNeeds {
        ViewNeeds::AFTER_IMAGES
    }

    fn before_serialization_point(&mut self) {
        self.inner.before_serialization_point();
    }

    fn serialization_point(&mut self, epoch: u64) -> u64 {
        self.inner.serialization_point(epoch);
        // See the module docs: this point lies between the lock phase and validation.
        self.commit_seq.fetch_add(1, Ordering::SeqCst)
    }

    fn abandon(&mut self, commit_seq: u64) {
        self.inner.abandon(commit_seq);
    }

    fn log_commit(&mut self, view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError> {
        let epoch = view.tid.epoch();
        let result = if view.writes.is_empty() {
            // A read-only transaction changes nothing to replay.
            self.inner.check_failed()
        } else {
            let as_data =
                self.calls_as_data || self.window.covers(epoch) || view.invocation.is_some_and(|call| call.log_as_data);
            self.inner.append_with(epoch, |out| {
                if as_data { encode(&CommitView { invocation: None, ..*view }, out) } else { encode(view, out) }
            })
        };
        self.inner.set_idle();
        result?;
        Ok(CommitTicket { last_writer: 0, durability: DurabilityTicket::Epoch(epoch) })
    }
}

/// Appends the entry of a committed transaction that wrote something; a write set's rows whole.
pub(crate) fn encode(view: &CommitView<'_>, out: &mut Vec<u8>) {
    encode_patching(view, |_| false, out);
}

/// [`encode`], logging as a column patch every update `patchable` allows: only a log replayed in
/// each key's write order may, one whose replay is sure to hold the row the update replaced.
pub(crate) fn encode_patching(view: &CommitView<'_>, patchable: impl Fn(&LoggedWrite<'_>) -> bool, out: &mut Vec<u8>) {
    match view.invocation {
        Some(call) => {
            assert!(call.args.len() <= ARGS_MAX, "call with {} arguments", call.args.len());
            out.push(KIND_CALL);
            out.extend_from_slice(&view.commit_seq.to_le_bytes());
            out.extend_from_slice(&view.tid.to_u64().to_le_bytes());
            out.extend_from_slice(&call.procedure_id.to_le_bytes());
            out.extend_from_slice(&(call.args.len() as u16).to_le_bytes());
            for arg in call.args.iter() {
                match arg {
                    ParamValue::Scalar(v) => {
                        out.push(ARG_SCALAR);
                        codec::encode_row(std::slice::from_ref(v), out);
                    }
                    ParamValue::Array(values) => {
                        out.push(ARG_ARRAY);
                        codec::encode_row(&values[..], out);
                    }
                }
            }
        }
        None => {
            out.push(KIND_DATA);
            out.extend_from_slice(&view.commit_seq.to_le_bytes());
            let writes = view.writes.iter().map(|w| {
                let image = match (w.after, &w.before) {
                    (None, _) => codec::RedoImage::Delete,
                    (Some(after), Some(before)) if patchable(w) => codec::RedoImage::Patch { before, after },
                    (Some(after), _) => codec::RedoImage::Put(after),
                };
                (w.table, w.key.as_ref(), image)
            });
            codec::encode_entry(view.tid, writes, out);
        }
    }
}

/// A decoded command-log entry.
#[derive(Clone, Debug, PartialEq)]
pub enum CommandEntry {
    /// A procedure call.
    Call {
        /// Its commit sequence number.
        seq: u64,
        /// Its TID when it ran (its epoch decides durability).
        tid: Tid,
        /// The procedure's id in the registry.
        procedure_id: u32,
        /// The arguments.
        args: Vec<ParamValue>,
    },
    /// An ad-hoc transaction's write set.
    Data {
        /// Its commit sequence number.
        seq: u64,
        /// The logged writes (value-log entry).
        entry: codec::Entry,
    },
}

impl CommandEntry {
    /// The commit sequence number.
    pub fn seq(&self) -> u64 {
        match self {
            CommandEntry::Call { seq, .. } | CommandEntry::Data { seq, .. } => *seq,
        }
    }

    /// The epoch the transaction committed in.
    pub fn epoch(&self) -> u64 {
        match self {
            CommandEntry::Call { tid, .. } => tid.epoch(),
            CommandEntry::Data { entry, .. } => entry.tid.epoch(),
        }
    }
}

/// Decodes the next entry.
pub fn decode(r: &mut Reader<'_>) -> Result<CommandEntry, DecodeError> {
    let kind = r.u8()?;
    let seq = r.u64()?;
    match kind {
        KIND_CALL => {
            let tid = Tid::from_u64(r.u64()?);
            let procedure_id = r.u32()?;
            let count = usize::from(r.u16()?);
            if count > ARGS_MAX {
                return Err(DecodeError { offset: r.offset(), reason: "more arguments than the limit" });
            }
            let mut args = Vec::with_capacity(count);
            for _ in 0..count {
                args.push(decode_arg(r)?);
            }
            Ok(CommandEntry::Call { seq, tid, procedure_id, args })
        }
        KIND_DATA => Ok(CommandEntry::Data { seq, entry: r.entry()? }),
        _ => Err(DecodeError { offset: r.offset(), reason: "unknown command entry kind" }),
    }
}

fn decode_arg(r: &mut Reader<'_>) -> Result<ParamValue, DecodeError> {
    let at = r.offset();
    let tag = r.u8()?;
    let row = r.row()?;
    match tag {
        ARG_SCALAR if row.len() == 1 => Ok(ParamValue::Scalar(row.value(0).unwrap_or(crate::storage::Value::Null))),
        ARG_ARRAY => Ok(ParamValue::Array(Arc::from(row.to_vec()))),
        _ => Err(DecodeError { offset: at, reason: "bad argument tag or scalar width" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::{Invocation, LoggedWrite};
    use crate::storage::{Key, Value};

    #[test]
    fn calls_and_write_sets_round_trip_and_every_cut_is_an_error() {
        let args: Arc<[ParamValue]> = Arc::from(vec![
            ParamValue::Scalar(Value::Int(7)),
            ParamValue::Array(Arc::from(vec![Value::text("a"), Value::Null])),
        ]);
        let call = Invocation { procedure_id: 3, args: Arc::clone(&args), log_as_data: false };
        let view = CommitView {
            tid: Tid::new(5, 2),
            commit_seq: 42,
            writes: &[],
            read_last_writers: &[],
            invocation: Some(&call),
        };
        let mut out = Vec::new();
        encode(&view, &mut out);
        let key = Key::from(&b"k"[..]);
        let row: crate::storage::Row = crate::storage::Row::new(vec![Value::Int(1)]);
        let writes = [LoggedWrite { table: 2, key: &key, after: Some(&row), before: None, previous_writer: 0 }];
        let data = CommitView {
            tid: Tid::new(5, 3),
            commit_seq: 43,
            writes: &writes,
            read_last_writers: &[],
            invocation: None,
        };
        encode(&data, &mut out);
        let mut r = Reader::new(&out);
        let first = decode(&mut r).unwrap();
        assert_eq!(first, CommandEntry::Call { seq: 42, tid: Tid::new(5, 2), procedure_id: 3, args: args.to_vec() });
        let second = decode(&mut r).unwrap();
        assert_eq!((second.seq(), second.epoch()), (43, 5));
        assert!(r.is_empty());
        let first_len = out.len() - {
            let mut tail = Vec::new();
            encode(&data, &mut tail);
            tail.len()
        };
        for cut in 0..first_len {
            assert!(decode(&mut Reader::new(&out[..cut])).is_err(), "cut at {cut}");
        }
    }
}
