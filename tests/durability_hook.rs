//! The commit hook: a scheme sees every committing transaction at its serialization point, with its
//! write set, procedure call and predecessors, and decides when it may be acknowledged.

use lazarus::durability::{
    CommitTicket, CommitView, DurabilityError, DurabilityTicket, LogScheme, ViewNeeds, WorkerLog,
};
use lazarus::storage::Row;
use lazarus::storage::{ParamValue, Value};
use lazarus::txn::{ConflictReason, TxnError};
use lazarus::{Database, DatabaseConfig};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// (table, key, after-image, previous last writer, before-image) of one write.
type SeenWrite = (u32, Vec<u8>, Option<Vec<Value>>, u64, Option<Vec<Value>>);

/// What the recording scheme saw of one commit.
#[derive(Clone, Debug)]
struct Seen {
    worker: usize,
    tid: u64,
    commit_seq: u64,
    writes: Vec<SeenWrite>,
    read_last_writers: Vec<u64>,
    procedure: Option<(u32, Vec<ParamValue>)>,
}

/// A scheme that records what it sees, hands out `last_writer = (worker << 32) | n`, and holds
/// acknowledgements back until `release_up_to` is raised.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    abandoned: AtomicU64,
    next_seq: AtomicU64,
    durable_seq: AtomicU64,
    /// What the workers ask of each view (`None`: the default, all of it).
    needs: Option<ViewNeeds>,
}

struct RecorderWorker {
    id: usize,
    scheme: Arc<Recorder>,
    n: u64,
}

struct RecorderScheme(Arc<Recorder>);

impl LogScheme for RecorderScheme {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn worker(&self, worker_id: usize) -> Box<dyn WorkerLog> {
        Box::new(RecorderWorker { id: worker_id, scheme: Arc::clone(&self.0), n: 0 })
    }
    fn is_durable(&self, ticket: &DurabilityTicket) -> bool {
        match ticket {
            DurabilityTicket::Sequence(s) => *s <= self.0.durable_seq.load(Ordering::SeqCst),
            _ => false,
        }
    }
    fn wait_durable(&self, ticket: &DurabilityTicket) -> Result<(), DurabilityError> {
        if self.is_durable(ticket) { Ok(()) } else { Err(DurabilityError::Failed("not yet".into())) }
    }
    fn wait_committed_durable(&self) -> Result<(), DurabilityError> {
        let committed = self.0.next_seq.load(Ordering::SeqCst);
        self.wait_durable(&DurabilityTicket::Sequence(committed))
    }
    fn shutdown(&self) -> Result<(), DurabilityError> {
        Ok(())
    }
}

impl WorkerLog for RecorderWorker {
    fn view_needs(&self) -> ViewNeeds {
        self.scheme.needs.unwrap_or(ViewNeeds::ALL)
    }
    fn serialization_point(&mut self, _epoch: u64) -> u64 {
        self.scheme.next_seq.fetch_add(1, Ordering::SeqCst) + 1
    }
    fn abandon(&mut self, _commit_seq: u64) {
        self.scheme.abandoned.fetch_add(1, Ordering::SeqCst);
    }
    fn log_commit(&mut self, view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError> {
        self.n += 1;
        let seen = Seen {
            worker: self.id,
            tid: view.tid.to_u64(),
            commit_seq: view.commit_seq,
            writes: view
                .writes
                .iter()
                .map(|w| {
                    let before = w.before.as_ref().map(|r| r.to_vec());
                    (w.table, w.key.to_vec(), w.after.map(|r| r.to_vec()), w.previous_writer, before)
                })
                .collect(),
            read_last_writers: view.read_last_writers.to_vec(),
            procedure: view.invocation.map(|i| (i.procedure_id, i.args.to_vec())),
        };
        self.scheme.seen.lock().push(seen);
        Ok(CommitTicket {
            last_writer: ((self.id as u64) << 32) | self.n,
            durability: DurabilityTicket::Sequence(view.commit_seq),
        })
    }
}

const SOURCE: &str = "
table kv (k int not null, v int not null, primary key (k));
procedure put(k int, v int) { insert into kv values (k, v); }
procedure copy(src int, dst int) {
    select v into x from kv where k = src;
    update kv set v = x where k = dst;
}
";

fn open(recorder: &Arc<Recorder>) -> Database {
    let scheme: Arc<dyn LogScheme> = Arc::new(RecorderScheme(Arc::clone(recorder)));
    let db = Database::open(DatabaseConfig { scheme, ..DatabaseConfig::default() }).unwrap();
    db.load_module("kv.proc", SOURCE).unwrap();
    db
}

fn int(v: i64) -> ParamValue {
    ParamValue::Scalar(Value::Int(v))
}

#[test]
fn the_scheme_sees_writes_calls_and_predecessors_and_sets_last_writer() {
    let recorder = Arc::new(Recorder::default());
    let db = open(&recorder);
    let t = db.catalog().table_by_name("kv").unwrap().id;
    let mut w0 = db.worker();
    let mut w1 = db.worker();
    let put = db.procedures().id_of("put").unwrap();
    w0.call("put", &[int(1), int(10)]).unwrap();
    w0.call("put", &[int(2), int(20)]).unwrap();
    w1.call("copy", &[int(1), int(2)]).unwrap();
    w1.run(1, |tx| tx.delete(t, &[Value::Int(1)])).unwrap();

    let seen = recorder.seen.lock().clone();
    assert_eq!(seen.len(), 4);
    // Procedure calls carry their id and arguments; ad-hoc transactions carry none.
    assert_eq!(seen[0].procedure, Some((put, vec![int(1), int(10)])));
    assert!(seen[3].procedure.is_none());
    // After-images, and the previous last writer (0 for a new key).
    assert_eq!(seen[0].writes[0].2, Some(vec![Value::Int(1), Value::Int(10)]));
    assert_eq!(seen[0].writes[0].3, 0);
    // copy read key 1 (written by worker 0's first commit) and overwrote key 2 (its second).
    assert_eq!(seen[2].read_last_writers, vec![1, 2]);
    assert_eq!(seen[2].writes.len(), 1);
    assert_eq!(seen[2].writes[0].3, 2, "WAW predecessor of key 2");
    assert_eq!(seen[2].writes[0].2, Some(vec![Value::Int(2), Value::Int(10)]));
    // The delete: no after-image, and its WAW predecessor is worker 0's first commit.
    assert_eq!(seen[3].writes[0].2, None);
    assert_eq!(seen[3].writes[0].3, 1);
    assert_eq!(seen[3].worker, 1);
    // TIDs and commit sequence numbers increase along these dependent transactions.
    assert!(seen.windows(2).all(|p| p[0].tid < p[1].tid && p[0].commit_seq < p[1].commit_seq));
    let record = db.catalog().table(t).unwrap().primary.get(&seen[2].writes[0].1).unwrap();
    assert_eq!(record.last_writer(), (1 << 32) | 1, "engine must store the scheme's last_writer");
}

#[test]
fn acknowledgement_waits_for_the_scheme() {
    let recorder = Arc::new(Recorder::default());
    let db = open(&recorder);
    let mut w = db.worker();
    let out = w.call("put", &[int(5), int(50)]).unwrap();
    let ticket = out.committed.durability.clone();
    assert!(!db.scheme().is_durable(&ticket), "must not be durable before the scheme says so");
    assert!(w.wait_durable(&ticket).is_err());
    recorder.durable_seq.store(u64::MAX, Ordering::SeqCst);
    assert!(db.scheme().is_durable(&ticket));
    w.wait_durable(&ticket).unwrap();
    // The write is visible to others before it is durable (Silo): a read-only call sees it.
    let read = w.run(1, |tx| tx.get(tx.table_id("kv")?, &[Value::Int(5)])).unwrap().0;
    assert!(read.is_some());
}

#[test]
fn a_failed_validation_abandons_the_serialization_point_and_logs_nothing() {
    let recorder = Arc::new(Recorder::default());
    let db = open(&recorder);
    let t = db.catalog().table_by_name("kv").unwrap().id;
    let mut w0 = db.worker();
    let mut w1 = db.worker();
    w0.call("put", &[int(1), int(1)]).unwrap();
    let before = recorder.seen.lock().len();
    let mut tx = w0.begin();
    tx.get(t, &[Value::Int(1)]).unwrap();
    tx.put(t, Row::new(vec![Value::Int(2), Value::Int(2)])).unwrap();
    w1.run(1, |tx| tx.update(t, Row::new(vec![Value::Int(1), Value::Int(9)]))).unwrap();
    assert!(matches!(tx.commit(), Err(TxnError::Conflict(ConflictReason::ReadChanged))));
    assert_eq!(recorder.abandoned.load(Ordering::SeqCst), 1);
    assert_eq!(recorder.seen.lock().len(), before + 1, "only w1's commit is logged");
}

/// A scheme gets the parts of the view it asks for and nothing else (`none` asks for nothing,
/// SiloR's value logging for the after-images alone), and what it asks for changes nothing the
/// database stores.
#[test]
fn a_scheme_gets_the_parts_of_the_view_it_asks_for() {
    for needs in [ViewNeeds::ALL, ViewNeeds::AFTER_IMAGES, ViewNeeds::NOTHING] {
        let recorder = Arc::new(Recorder { needs: Some(needs), ..Recorder::default() });
        let db = open(&recorder);
        let mut w = db.worker();
        w.call("put", &[int(1), int(10)]).unwrap();
        w.call("put", &[int(2), int(20)]).unwrap();
        w.call("copy", &[int(1), int(2)]).unwrap();
        let seen = recorder.seen.lock().clone();
        assert_eq!(seen.len(), 3, "{needs:?}");
        let copy = &seen[2];
        if needs.writes {
            assert_eq!(copy.writes.len(), 1, "{needs:?}");
            let (_, _, after, previous_writer, before) = &copy.writes[0];
            assert_eq!(after, &Some(vec![Value::Int(2), Value::Int(10)]), "{needs:?}");
            let expected_before = needs.before_images.then(|| vec![Value::Int(2), Value::Int(20)]);
            assert_eq!(before, &expected_before, "{needs:?}");
            assert_eq!(*previous_writer, if needs.dependencies { 2 } else { 0 }, "{needs:?}");
        } else {
            assert!(copy.writes.is_empty(), "{needs:?}");
        }
        let expected_writers: Vec<u64> = if needs.dependencies { vec![1, 2] } else { Vec::new() };
        assert_eq!(copy.read_last_writers, expected_writers, "{needs:?}");
        let t = db.catalog().table_by_name("kv").unwrap().id;
        let row = w.run(1, |tx| tx.get(t, &[Value::Int(2)])).unwrap().0.expect("key 2");
        assert_eq!(row.to_vec(), vec![Value::Int(2), Value::Int(10)], "{needs:?}");
    }
}
