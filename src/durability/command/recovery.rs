//! `clr`: serial command-log replay (PACMAN's baseline, §6). Rebuild the catalog, read `pepoch`,
//! read every entry of the durable part of every log file, keep those of epochs `≤ pepoch` that
//! are not void, sort them by `(epoch, commit_seq)` (a serial order, see the module docs of
//! [`super`]), and re-execute them one by one: a call through the same compiled procedure that
//! ran it, an ad-hoc write set as a transaction of its puts and deletes. Replayed transactions are
//! not logged again (they are in the log).
//!
//! A logged call that fails on replay means the replayed state diverged from the logged
//! execution; recovery stops with an error naming the entry's file and offset.

use super::parallel::{self, ReplayBreakdown};
use super::{CommandEntry, CommandReplay, decode};
use crate::db::Database;
use crate::durability::DurabilityError;
use crate::durability::blocks::{self, BlockReader, Next};
use crate::durability::codec::{EntryWrite, Image, Reader};
use crate::durability::frame;
use crate::durability::value::ValueOptions;
use crate::durability::value::files::{self, EntryFormat, Pepoch};
use crate::durability::value::recovery::{
    self as value_recovery, LogFile, RecoveryReport, Window, begin, corrupt, plan, record_void_epochs, settle_directory,
};
use crate::durability::value::replay::EpochWindow;
use crate::storage::EntryKeys;
use crate::storage::key::decode_key;
use parking_lot::Mutex;
use std::path::Path;
use std::time::Instant;

/// The largest command log file read, in bytes.
const LOG_FILE_SIZE_MAX_BYTES: u64 = value_recovery::LOG_FILE_SIZE_MAX_BYTES;
/// Replay advances the (not yet running) epoch every so many transactions, so that TIDs never
/// run out of sequence numbers within one epoch.
const TXNS_PER_EPOCH: u64 = 1 << 20;

/// An entry with where it came from.
struct Located {
    epoch: u64,
    seq: u64,
    file: usize,
    offset: u64,
    entry: CommandEntry,
}

/// Recovers `db` from a command log; returns the report and the next commit sequence number.
pub fn recover(
    options: &ValueOptions,
    db: &Database,
    modules: &Mutex<Vec<(String, String)>>,
) -> Result<(RecoveryReport, u64), DurabilityError> {
    let fs = options.fs.as_ref();
    let (mut report, pepoch) = begin(options, db, modules)?;
    let manifest = value_recovery::load_checkpoint(options, db, &pepoch, &mut report)?;
    let (e_l, e_h) = manifest.as_ref().map_or((0, 0), |m| (m.e_l, m.e_h));
    let (replay, mut discard, next_file_seq) = plan(fs, options, &pepoch)?;
    let (replay, skipped) = value_recovery::skip_before_checkpoint(replay, e_l);
    report.files_before_checkpoint = skipped.len();
    discard.extend(skipped.into_iter().filter(|f| !f.durable).map(|f| f.path));
    report.next_file_seq = next_file_seq;
    let start = Instant::now();
    let (mut entries, max_epoch, max_seq) = read_entries(options, &replay, &pepoch, e_l, &mut report)?;
    entries.sort_unstable_by_key(|e| (e.epoch, e.seq));
    let engine = options.command.replay;
    let mut breakdown = ReplayBreakdown {
        engine: engine.to_string(),
        loading_ms: start.elapsed().as_secs_f64() * 1e3,
        ..ReplayBreakdown::default()
    };
    let threads = options.recovery_threads;
    // The checkpoint is fuzzy; the write sets logged in its window [e_l, e_h] make it the state as
    // of e_h (module docs of `super`, "Checkpoints"). Commands replay from there.
    let window_end = if manifest.is_some() { entries.partition_point(|e| e.epoch <= e_h) } else { 0 };
    if let Some(call) = entries[..window_end].iter().find(|l| matches!(l.entry, CommandEntry::Call { .. })) {
        let reason = format!(
            "commit {} of epoch {} in checkpoint window [{e_l}, {e_h}] is not a write set",
            call.seq, call.epoch
        );
        return Err(corrupt(&replay[call.file].path, call.offset, reason));
    }
    if window_end > 0 {
        let window: Vec<&CommandEntry> = entries[..window_end].iter().map(|l| &l.entry).collect();
        parallel::install_shuffled(db, &window, threads)?;
    }
    if manifest.is_some() {
        value_recovery::rebuild_indexes(db, threads, EntryKeys::Generic);
        // The checkpoint and the window hold TIDs of logged epochs: replayed transactions run in
        // epochs above every one of them.
        db.epochs().advance_to(max_epoch.max(pepoch.epoch) + 1);
    }
    let commands = &entries[window_end..];
    let sorted: Vec<&CommandEntry> = commands.iter().map(|l| &l.entry).collect();
    match engine {
        CommandReplay::Clr => {
            let executing = Instant::now();
            execute(db, &replay, commands)?;
            breakdown.execution_ms = executing.elapsed().as_secs_f64() * 1e3;
            breakdown.threads = 1;
        }
        CommandReplay::LlrP => parallel::replay_llr_p(db, &sorted, threads, &mut breakdown)?,
        _ => parallel::replay_clr_p(db, &sorted, engine, threads, options.command.batch_txns, &mut breakdown)?,
    }
    report.command_breakdown = Some(breakdown);
    report.entries = entries.len() as u64;
    report.files = replay.len();
    report.replay_ms = start.elapsed().as_secs_f64() * 1e3;
    record_void_epochs(&mut report, &pepoch, max_epoch);
    // Replay ran transactions and advanced the epoch: restart above those too.
    report.restart_after_epoch = report.restart_after_epoch.max(db.epochs().current());
    settle_directory(fs, options, &replay, &discard, &pepoch, &report)?;
    for dir in &options.log_dirs {
        crate::durability::checkpoint::writer::remove_other_checkpoints(
            fs,
            dir,
            manifest.as_ref().map(|m| m.checkpoint_id),
        )?;
    }
    Ok((report, max_seq + 1))
}

/// Reads every entry of the files' durable parts; keeps those in the window. Returns them with
/// the largest epoch and commit sequence number seen (in or out of the window).
fn read_entries(
    options: &ValueOptions,
    files: &[LogFile],
    pepoch: &Pepoch,
    e_l: u64,
    report: &mut RecoveryReport,
) -> Result<(Vec<Located>, u64, u64), DurabilityError> {
    let (mut kept, mut max_epoch, mut max_seq) = (Vec::new(), 0u64, 0u64);
    // Every persistent, non-void epoch from the checkpoint's e_l on is replayed.
    let window = Window { pepoch, e_l };
    for (index, file) in files.iter().enumerate() {
        let (mut handle, file_len) = blocks::open_bounded(options.fs.as_ref(), &file.path, LOG_FILE_SIZE_MAX_BYTES)?;
        let valid_len = file.valid_len_bytes.min(file_len);
        report.bytes += valid_len;
        let mut blocks = BlockReader::new(handle.as_mut(), valid_len);
        let header = match blocks.required_block()? {
            Ok(block) => files::decode_log_header(block.framed).map(|(header, _)| header),
            Err(e) => Err(e.into()),
        };
        let header = header.map_err(|e| corrupt(&file.path, 0, e.to_string()))?;
        if header.format != EntryFormat::Command {
            return Err(corrupt(&file.path, 0, "a value log: open it with the value scheme"));
        }
        let mut ended = file.durable;
        loop {
            let block = match blocks.next_block()? {
                Next::Block(block) => block,
                Next::End => break,
                Next::Damaged(e) => return Err(corrupt(&file.path, blocks.offset(), e.to_string())),
            };
            if !file.durable && block.end() == valid_len {
                // A closed file's last block is its end block, recording its own offset.
                ended = files::decode_end_block(block.payload()) == Some(block.offset);
                break;
            }
            let payload_at = block.offset + frame::HEADER_SIZE_BYTES as u64;
            let mut r = Reader::new(block.payload());
            while !r.is_empty() {
                let offset = payload_at + r.offset() as u64;
                let entry = decode(&mut r).map_err(|e| corrupt(&file.path, offset, e.to_string()))?;
                let (epoch, seq) = (entry.epoch(), entry.seq());
                max_epoch = max_epoch.max(epoch);
                max_seq = max_seq.max(seq);
                if !window.admits(epoch) {
                    report.entries_skipped += 1;
                    continue;
                }
                kept.push(Located { epoch, seq, file: index, offset, entry });
            }
        }
        if !ended {
            let reason = "a closed log file does not end with its end block (cut short?)";
            return Err(corrupt(&file.path, valid_len, reason));
        }
    }
    Ok((kept, max_epoch, max_seq))
}

/// Re-executes the entries in order through an unlogged worker.
fn execute(db: &Database, files: &[LogFile], entries: &[Located]) -> Result<(), DurabilityError> {
    let registry = db.procedures();
    let mut worker = db.replay_worker();
    for (n, located) in entries.iter().enumerate() {
        if n as u64 % TXNS_PER_EPOCH == TXNS_PER_EPOCH - 1 {
            db.epochs().advance();
        }
        let path = &files[located.file].path;
        let diverged =
            |what: String| corrupt(path, located.offset, format!("replay of commit {} diverged: {what}", located.seq));
        match &located.entry {
            CommandEntry::Call { procedure_id, args, .. } => {
                worker.call_id(&registry, *procedure_id, args).map_err(|e| diverged(e.to_string()))?;
            }
            CommandEntry::Data { entry, .. } => apply_writes(&mut worker, path, entry, None).map_err(diverged)?,
        }
    }
    Ok(())
}

/// Applies an ad-hoc transaction's logged writes as one transaction.
pub(crate) fn apply_writes(
    worker: &mut crate::db::Worker,
    path: &Path,
    entry: &crate::durability::codec::Entry,
    snapshot: Option<crate::txn::versions::Snapshot>,
) -> Result<(), String> {
    let mut txn = worker.begin();
    if let Some(snapshot) = snapshot {
        txn.set_snapshot(snapshot);
    }
    for write in &entry.writes {
        apply_write(&mut txn, write).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    txn.commit().map(|_| ()).map_err(|e| e.to_string())
}

/// Applies one logged write inside `txn`: a whole row is put, a column patch updates the row the
/// key holds (which must be there), a delete deletes.
pub(crate) fn apply_write(txn: &mut crate::txn::Transaction<'_>, write: &EntryWrite) -> Result<(), String> {
    let pk = || decode_key(&write.key).map_err(|e| format!("undecodable key: {e}"));
    match &write.image {
        Image::Put(row) => txn.put(write.table, row.clone()).map_err(|e| e.to_string()),
        Image::Patch(patch) => {
            let patched = txn
                .update_with(write.table, &pk()?, |old| {
                    patch.apply(&old).map_err(|reason| crate::txn::TxnError::Procedure {
                        procedure: "log replay".into(),
                        message: reason.into(),
                    })
                })
                .map_err(|e| e.to_string())?;
            if patched { Ok(()) } else { Err("a column patch of a key that holds no row".into()) }
        }
        Image::Delete => txn.delete(write.table, &pk()?).map(|_| ()).map_err(|e| e.to_string()),
    }
}
