//! The schemes the sweeps run besides the value scheme: the stream schemes (`serial-data`,
//! `serial-cmd`, `taurus-data`, `taurus-cmd`, `src/durability/taurus/`), opened on the simulated
//! disk with the same log directories by `lazarus::crash::power_loss::open_stream`; here, their
//! damage sweep.

use lazarus::io::sim::SimDisk;

/// The synced point recovery can know of in a stream log `bytes` on `image`: the `.synced`
/// file's value or the furthest point a whole sync mark anywhere in the log claims.
pub fn stream_synced_point(image: &SimDisk, log: &std::path::Path, bytes: &[u8]) -> u64 {
    use lazarus::durability::frame;
    use lazarus::durability::taurus::format::{self, Record};
    let mut synced_name = log.as_os_str().to_owned();
    synced_name.push(format::SYNCED_SUFFIX);
    let from_file = image.contents(std::path::Path::new(&synced_name)).and_then(|b| format::decode_synced(&b));
    let magic = frame::BLOCK_MAGIC.to_le_bytes();
    let marks = (0..bytes.len().saturating_sub(frame::HEADER_SIZE_BYTES)).filter_map(|p| {
        (bytes[p..p + 4] == magic).then(|| frame::decode_block(&bytes[p..]).ok()).flatten().and_then(|(payload, _)| {
            match format::decode_record(payload) {
                Ok(Record::SyncMark(s)) => Some(s),
                _ => None,
            }
        })
    });
    marks.chain(from_file).max().unwrap_or(0)
}

/// Damages every file of a stream scheme's image (each log, its `.synced` file, the catalog) in
/// every way of [`super::damages`] (every `stride`-th), after a history whose every step was
/// acknowledged. Damage before a log's synced point ([`stream_synced_point`]) must give a
/// `Corrupt` error naming the file or exactly the acknowledged state; damage after it may also
/// give a shorter prefix (a torn tail: nothing on disk says those bytes were synced), counted as
/// `tail_cuts`. Any other state is a silent divergence. Returns the tally, the images tried and
/// the tail cuts.
pub fn stream_damage_sweep(history: &super::History, stride: usize) -> (super::Tally, u64, u64) {
    use super::{DbError, DurabilityError, Tally, damages, dump, open};
    let steps = history.steps.len();
    let image = super::run_to_end(history).crash(0);
    let expected = &history.states[steps];
    let clean = open(history.setup, &image.fork()).expect("the undamaged image recovers");
    assert_eq!(&dump(&clean).expect("dump"), expected);
    let _ = clean.close();
    let mut tally = Tally::default();
    let (mut offsets, mut tail_cuts) = (0u64, 0u64);
    for path in image.file_paths() {
        let original = image.contents(&path).unwrap_or_default();
        let is_log = path.extension().is_some_and(|e| e == "log");
        for damage in damages(&path, &original, original.len() as u64).into_iter().step_by(stride) {
            if damage.bytes == original {
                continue;
            }
            offsets += 1;
            tally.cases += 1;
            let case = format!("{} {}: {}", history.name, path.display(), damage.what);
            let damaged = image.fork();
            assert!(damaged.replace_contents(&path, &damage.bytes));
            // What recovery can know was synced, from what the damage left.
            let synced = if is_log { stream_synced_point(&damaged, &path, &damage.bytes) } else { 0 };
            match open(history.setup, &damaged) {
                Err(DbError::Durability(DurabilityError::Corrupt { file, .. })) => {
                    tally.clear_errors += 1;
                    if file != path && !(file.to_string_lossy().starts_with(&*path.to_string_lossy())) {
                        tally.violation(format!("{case}: the error names {}", file.display()));
                    }
                }
                Err(e) => {
                    tally.other_errors += 1;
                    tally.violation(format!("{case}: recovery failed without naming file and offset: {e}"));
                }
                Ok(db) => {
                    match dump(&db) {
                        Ok(state) if state == *expected => {}
                        Ok(state) => {
                            let prefix = history.states.iter().position(|s| *s == state);
                            if is_log && prefix.is_some() && damage.start as u64 >= synced {
                                tail_cuts += 1;
                            } else {
                                tally.silent_divergences += 1;
                                tally.violation(format!(
                                    "{case}: SILENT DIVERGENCE (synced point {synced}, prefix {prefix:?}): {state:?}"
                                ));
                            }
                        }
                        Err(e) => {
                            tally.silent_divergences += 1;
                            tally.violation(format!("{case}: {e}"));
                        }
                    }
                    let _ = db.close();
                }
            }
        }
    }
    (tally, offsets, tail_cuts)
}
