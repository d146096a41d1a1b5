//! The ack file: one text line per event, appended by the child.
//!
//! | line | written | meaning |
//! |---|---|---|
//! | `R <round>` | after the child recovered | a round started |
//! | `I <n>` | before a KV set on key `n` is submitted | one more set issued on `n` |
//! | `K <n> <version>` | once the set is durable | key `n` was acknowledged at `version` |
//! | `N <w> <d> <o>` | once durable | TPC-C new-order created order (w, d, o) |
//! | `P <cw> <cd> <c> <h_date>` | once durable | TPC-C payment wrote history (cw, cd, c, h_date) |
//! | `A <kind>` | once durable | any other acknowledged transaction that wrote |
//!
//! Lines are appended whole, in one `write` each (a batch of whole lines at most); the page cache
//! survives `SIGKILL`, so everything written before the kill is read back. A kill may still tear
//! the last write, so a last line without its newline is ignored: a torn acknowledgement was
//! never completed, and a torn `I` line was written before its set was submitted. The next round
//! cuts such a line off before it appends ([`AckWriter::open`]).

use super::{CrashError, io_at};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Appends whole lines to the ack file, from several threads.
pub struct AckWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl AckWriter {
    /// Opens (creating if missing) the ack file for appending. A line torn by the previous
    /// round's kill is cut off first: appended to, it would join the next line into one that
    /// means neither (a torn `K` followed by `R 1` reads `KR 1`), where the reader's rule is that
    /// a torn line never happened.
    pub fn open(path: &Path) -> Result<AckWriter, CrashError> {
        let file = std::fs::OpenOptions::new().create(true).read(true).append(true).open(path).map_err(io_at(path))?;
        let bytes = std::fs::read(path).map_err(io_at(path))?;
        let complete_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |last| last + 1);
        if complete_len < bytes.len() {
            file.set_len(complete_len as u64).map_err(io_at(path))?;
        }
        Ok(AckWriter { path: path.to_path_buf(), file: Mutex::new(file) })
    }

    /// Appends `lines` (each ending in `\n`) with one write call.
    pub fn append(&self, lines: &str) -> Result<(), CrashError> {
        if lines.is_empty() {
            return Ok(());
        }
        self.file.lock().write_all(lines.as_bytes()).map_err(io_at(&self.path))
    }
}

/// What an ack file says, across every round of a trial.
#[derive(Clone, Debug, Default)]
pub struct AckLog {
    /// Rounds that got as far as running transactions.
    pub rounds: u64,
    /// KV: sets issued per key.
    pub issued: HashMap<u64, u64>,
    /// KV: the largest acknowledged version per key.
    pub kv_acked: HashMap<u64, u64>,
    /// TPC-C: acknowledged new orders (w, d, o).
    pub orders: Vec<(i64, i64, i64)>,
    /// TPC-C: acknowledged payments, as history keys (cw, cd, c, h_date).
    pub payments: Vec<(i64, i64, i64, i64)>,
    /// Every acknowledged transaction.
    pub acked: u64,
    /// Whether the last line was torn (and ignored).
    pub torn_tail: bool,
}

impl AckLog {
    /// Reads and parses the ack file at `path` (a missing file is an empty log).
    pub fn read(path: &Path) -> Result<AckLog, CrashError> {
        match std::fs::read(path) {
            Ok(bytes) => AckLog::parse(path, &bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AckLog::default()),
            Err(e) => Err(io_at(path)(e)),
        }
    }

    /// Parses ack-file bytes; `path` is for messages only.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<AckLog, CrashError> {
        let mut log = AckLog::default();
        let complete = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                log.torn_tail = last + 1 < bytes.len();
                &bytes[..last + 1]
            }
            None => {
                log.torn_tail = !bytes.is_empty();
                &[][..]
            }
        };
        let text = std::str::from_utf8(complete).map_err(|e| CrashError::AckFile {
            path: path.to_path_buf(),
            line: 0,
            reason: format!("not UTF-8: {e}"),
        })?;
        for (i, line) in text.lines().enumerate() {
            log.apply(line).map_err(|reason| CrashError::AckFile { path: path.to_path_buf(), line: i + 1, reason })?;
        }
        Ok(log)
    }

    fn apply(&mut self, line: &str) -> Result<(), String> {
        let mut fields = line.split(' ');
        let tag = fields.next().unwrap_or("");
        let nums: Vec<i64> = if tag == "A" {
            Vec::new()
        } else {
            fields
                .map(|f| f.parse::<i64>().map_err(|_| format!("bad number {f:?} in {line:?}")))
                .collect::<Result<_, _>>()?
        };
        let want = |n: usize| if nums.len() == n { Ok(()) } else { Err(format!("expected {n} numbers in {line:?}")) };
        let unsigned = |v: i64| u64::try_from(v).map_err(|_| format!("negative number in {line:?}"));
        match tag {
            "R" => {
                want(1)?;
                self.rounds += 1;
            }
            "I" => {
                want(1)?;
                *self.issued.entry(unsigned(nums[0])?).or_default() += 1;
            }
            "K" => {
                want(2)?;
                let version = self.kv_acked.entry(unsigned(nums[0])?).or_default();
                *version = (*version).max(unsigned(nums[1])?);
                self.acked += 1;
            }
            "N" => {
                want(3)?;
                self.orders.push((nums[0], nums[1], nums[2]));
                self.acked += 1;
            }
            "P" => {
                want(4)?;
                self.payments.push((nums[0], nums[1], nums[2], nums[3]));
                self.acked += 1;
            }
            "A" => self.acked += 1,
            _ => return Err(format!("unknown line {line:?}")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_torn_by_a_kill_is_cut_before_the_next_round_appends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("acks");
        std::fs::write(&path, "R 0\nK 1 2\nK 3").expect("write");
        let writer = AckWriter::open(&path).expect("open");
        writer.append("R 1\nK 3 1\n").expect("append");
        let log = AckLog::read(&path).expect("a torn line must not join the next round's first line");
        assert_eq!(log.rounds, 2);
        assert_eq!(log.acked, 2);
        assert_eq!(log.kv_acked.get(&3), Some(&1));
        assert!(!log.torn_tail);
    }

    #[test]
    fn lines_parse_and_a_torn_tail_is_ignored() {
        let p = Path::new("acks");
        let log = AckLog::parse(p, b"R 0\nI 3\nI 3\nK 3 2\nK 3 1\nN 1 2 3001\nP 1 2 7 99\nA delivery\nK 4 1").unwrap();
        assert_eq!((log.rounds, log.acked, log.torn_tail), (1, 5, true));
        assert_eq!(log.issued[&3], 2);
        assert_eq!(log.kv_acked[&3], 2);
        assert!(!log.kv_acked.contains_key(&4));
        assert_eq!(log.orders, vec![(1, 2, 3001)]);
        assert_eq!(log.payments, vec![(1, 2, 7, 99)]);
        assert!(AckLog::parse(p, b"K 1\nR 0\n").is_err(), "a damaged line that is not the last");
        assert!(AckLog::parse(p, b"").is_ok_and(|l| l.acked == 0 && !l.torn_tail));
        assert!(AckLog::parse(p, b"K 1").is_ok_and(|l| l.acked == 0 && l.torn_tail));
    }
}
