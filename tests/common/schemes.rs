//! The schemes the sweeps run besides the value scheme: the stream schemes (`serial-data`,
//! `serial-cmd`, `taurus-data`, `taurus-cmd`, `src/durability/taurus/`), opened on the simulated
//! disk with the same log directories by `lazarus::crash::power_loss::open_stream`; here, their
//! damage sweep.

use std::path::Path;

/// Whether `path` is a stream scheme's persistent vector file.
pub fn is_persistent_vector_file(path: &Path) -> bool {
    use lazarus::durability::taurus::format::{self, Flavor};
    let name = path.file_name().unwrap_or_default();
    Flavor::ALL.iter().any(|&f| name == format::persistent_vector_name(f).as_str())
}

/// Whether a damage of the persistent vector file `original` only touches the zeros between the
/// end of slot 0's record and slot 1 (bytes no reader looks at): such damages all mean the same
/// (slot 0 intact, slot 1 intact or cut away), so the sweep tries the first of them only.
fn in_slot_padding(original: &[u8], start: usize) -> bool {
    use lazarus::durability::frame;
    use lazarus::durability::taurus::format::PERSISTENT_VECTOR_SLOT_BYTES;
    let record_end = frame::decode_header(original).map_or(0, |h| h.size_bytes());
    start > record_end + 1 && start < PERSISTENT_VECTOR_SLOT_BYTES as usize - 1
}

/// Damages every file of a stream scheme's image (each log, the persistent vector file, the
/// catalog) in every way of [`super::damages`] (every `stride`-th), after a history whose every
/// step was acknowledged. The persistent vector file records each log's durable length, and
/// after a clean close it covers every log whole, so every damage must give a `Corrupt` error
/// naming the damaged file or exactly the acknowledged state. A shorter prefix is **lost
/// acknowledged commits** (what a "tail cut" was before the persistent vector file: a cut
/// nothing on disk told from a torn tail); any other state is a silent divergence. Both are
/// violations. Returns the tally and the images tried.
pub fn stream_damage_sweep(history: &super::History, stride: usize) -> (super::Tally, u64) {
    use super::{DbError, DurabilityError, Tally, damages, dump, open};
    let steps = history.steps.len();
    let image = super::run_to_end(history).crash(0);
    let expected = &history.states[steps];
    let clean = open(history.setup, &image.fork()).expect("the undamaged image recovers");
    assert_eq!(&dump(&clean).expect("dump"), expected);
    let _ = clean.close();
    let mut tally = Tally::default();
    let mut offsets = 0u64;
    for path in image.file_paths() {
        let original = image.contents(&path).unwrap_or_default();
        let is_pv = is_persistent_vector_file(&path);
        let all = damages(&path, &original, original.len() as u64);
        let sector_damage = |what: &str| what.starts_with("sector");
        let kept =
            all.into_iter().filter(|d| !(is_pv && !sector_damage(&d.what) && in_slot_padding(&original, d.start)));
        for damage in kept.step_by(stride) {
            if damage.bytes == original {
                continue;
            }
            offsets += 1;
            tally.cases += 1;
            let case = format!("{} {}: {}", history.name, path.display(), damage.what);
            let damaged = image.fork();
            assert!(damaged.replace_contents(&path, &damage.bytes));
            match open(history.setup, &damaged) {
                Err(DbError::Durability(DurabilityError::Corrupt { file, .. })) => {
                    tally.clear_errors += 1;
                    if file != path {
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
                        Ok(state) => match history.states.iter().position(|s| *s == state) {
                            Some(prefix) => {
                                tally.lost_acked += 1;
                                tally.violation(format!(
                                    "{case}: LOST ACKNOWLEDGED COMMITS: recovered the prefix of {prefix} of {steps} \
                                     acknowledged steps without an error"
                                ));
                            }
                            None => {
                                tally.silent_divergences += 1;
                                tally.violation(format!("{case}: SILENT DIVERGENCE: {state:?}"));
                            }
                        },
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
    (tally, offsets)
}
