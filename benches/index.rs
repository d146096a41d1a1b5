//! Ordered index backends side by side: `cargo bench --bench index`.
//!
//! Every backend of [`IndexBackend::ALL`] is loaded with the same 1M keys shaped like real
//! encoded keys, `encode_key([Int(w), Int(d), Int(id)])` for 10 × 10 × 10 000 (warehouse,
//! district, id), inserted in random order. Then, per backend:
//!
//! - `get`: point get of a random existing key;
//! - `insert`: insert of a fresh key at a random position (removed again, untimed, after each
//!   sample so the index stays at 1M);
//! - `scan_fwd_50` / `scan_bwd_50`: 50-key scans from a random key, forward and backward;
//! - `scan_low_start_50`: a forward 50-key scan whose lower bound is below the smallest key (the
//!   `scc` pathology, worked around in `scc_tree`);
//! - `scan_high_end_bwd_50`: a backward 50-key scan whose upper bound is above the largest key
//!   (the mirror case);
//! - `mixed_2t`: two threads, each doing 80% gets, 10% inserts, 10% 50-key forward scans;
//!   reported as time per operation across both threads (throughput = 1 / that).
//!
//! Before criterion runs, the unpatched `scc` low-start scan is timed once on smaller trees, to
//! show the cost the workaround avoids (it takes minutes at 1M keys).

use criterion::{BenchmarkId, Criterion, Throughput};
use lazarus::storage::Row;
use lazarus::storage::index::scc_tree::SccTree;
use lazarus::storage::index::{Direction, IndexBackend, KeyRange, OrderedIndex};
use lazarus::storage::key::{Key, encode_key};
use lazarus::storage::record::Record;
use lazarus::storage::value::Value;
use lazarus::txn::tid::Tid;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

const WAREHOUSES: i64 = 10;
const DISTRICTS: i64 = 10;
const IDS: i64 = 10_000;
const SCAN_LEN: usize = 50;
/// How many random probe keys the read benchmarks cycle through.
const PROBES: usize = 1 << 16;

/// Fresh ids for inserted keys: above every loaded id, never reused.
static NEXT_FRESH_ID: AtomicI64 = AtomicI64::new(IDS + 1);

fn key(w: i64, d: i64, id: i64) -> Key {
    encode_key(&[Value::Int(w), Value::Int(d), Value::Int(id)]).expect("three ints always encode")
}

fn record(v: i64) -> Record {
    Record::present(b"k", Row::new(vec![Value::Int(v)]), Tid::ZERO, 0)
}

/// A key that is not in the index, at a random position among the loaded keys.
fn fresh_key(rng: &mut StdRng) -> Key {
    let id = NEXT_FRESH_ID.fetch_add(1, Ordering::Relaxed);
    key(rng.random_range(1..=WAREHOUSES), rng.random_range(1..=DISTRICTS), id)
}

fn random_key(rng: &mut StdRng) -> Key {
    key(rng.random_range(1..=WAREHOUSES), rng.random_range(1..=DISTRICTS), rng.random_range(1..=IDS))
}

fn loaded_entries() -> Vec<(Key, Record)> {
    let mut entries = Vec::with_capacity((WAREHOUSES * DISTRICTS * IDS) as usize);
    for w in 1..=WAREHOUSES {
        for d in 1..=DISTRICTS {
            for id in 1..=IDS {
                entries.push((key(w, d, id), record(id)));
            }
        }
    }
    entries.shuffle(&mut StdRng::seed_from_u64(7));
    entries
}

fn load(index: &dyn OrderedIndex, entries: &[(Key, Record)]) {
    for (k, r) in entries {
        if index.insert_if_absent(k.clone(), r.clone()).is_err() {
            panic!("duplicate key while loading");
        }
    }
}

fn count_scan(index: &dyn OrderedIndex, range: &KeyRange, direction: Direction) -> usize {
    let mut n = 0usize;
    index.scan(range, direction, SCAN_LEN, &mut |k, r| {
        black_box((k, r));
        n += 1;
        true
    });
    n
}

fn from(k: Key) -> KeyRange {
    KeyRange { start: Bound::Included(k), end: Bound::Unbounded }
}

fn down_from(k: Key) -> KeyRange {
    KeyRange { start: Bound::Unbounded, end: Bound::Included(k) }
}

/// Times the unpatched `scc` range whose lower bound is below every key, on growing trees,
/// stopping once one scan takes over two seconds.
fn scc_pathology_report() {
    eprintln!("scc TreeIndex, forward 50-key scan with the lower bound below the smallest key:");
    let low = KeyRange { start: Bound::Included(key(0, 0, 0)), end: Bound::Unbounded };
    for n in [10_000i64, 50_000, 100_000, 200_000] {
        let tree = SccTree::default();
        let mut entries: Vec<_> = (1..=n).map(|id| (key(1, 1, id), record(id))).collect();
        entries.shuffle(&mut StdRng::seed_from_u64(1));
        load(&tree, &entries);
        let patched = {
            let t = Instant::now();
            let got = count_scan(&tree, &low, Direction::Forward);
            assert_eq!(got, SCAN_LEN);
            t.elapsed()
        };
        let unpatched = {
            let t = Instant::now();
            let mut got = 0;
            tree.scan_unpatched(&low, Direction::Forward, SCAN_LEN, &mut |_, _| {
                got += 1;
                true
            });
            assert_eq!(got, SCAN_LEN);
            t.elapsed()
        };
        eprintln!("  {n:>7} keys: unpatched {unpatched:>12.3?}, with workaround {patched:>10.3?}");
        if unpatched > Duration::from_secs(2) {
            break;
        }
    }
}

/// Makes the `i`-th scan of a scan benchmark.
type MakeScan<'a> = Box<dyn Fn(usize) -> (KeyRange, Direction) + 'a>;

fn bench_all(c: &mut Criterion) {
    scc_pathology_report();

    let entries = loaded_entries();
    let mut indexes: Vec<(IndexBackend, Arc<dyn OrderedIndex>)> = Vec::new();
    for backend in IndexBackend::ALL {
        let index: Arc<dyn OrderedIndex> = Arc::from(backend.build());
        let t = Instant::now();
        load(index.as_ref(), &entries);
        eprintln!("loaded {} keys into {backend} in {:.2?}", entries.len(), t.elapsed());
        assert_eq!(index.len(), entries.len());
        indexes.push((backend, index));
    }
    let mut rng = StdRng::seed_from_u64(42);
    let probes: Vec<Key> = (0..PROBES).map(|_| random_key(&mut rng)).collect();
    let below_all = key(0, 0, 0);
    let last_warehouse = KeyRange::prefix(&encode_key(&[Value::Int(WAREHOUSES)]).expect("int encodes"));

    let mut group = c.benchmark_group("index_get");
    for (backend, index) in &indexes {
        group.bench_function(BenchmarkId::from_parameter(backend), |b| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) & (PROBES - 1);
                black_box(index.get(&probes[i]))
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("index_insert");
    for (backend, index) in &indexes {
        group.bench_function(BenchmarkId::from_parameter(backend), |b| {
            let mut rng = StdRng::seed_from_u64(3);
            b.iter_custom(|iters| {
                let fresh: Vec<(Key, Record)> = (0..iters).map(|i| (fresh_key(&mut rng), record(i as i64))).collect();
                let t = Instant::now();
                for (k, r) in &fresh {
                    black_box(index.insert_if_absent(k.clone(), r.clone()).is_ok());
                }
                let elapsed = t.elapsed();
                for (k, r) in &fresh {
                    index.remove(k, r);
                }
                elapsed
            })
        });
    }
    group.finish();

    let scans: [(&str, MakeScan<'_>); 4] = [
        ("index_scan_fwd_50", Box::new(|i| (from(probes[i].clone()), Direction::Forward))),
        ("index_scan_bwd_50", Box::new(|i| (down_from(probes[i].clone()), Direction::Backward))),
        ("index_scan_low_start_50", Box::new(|_| (from(below_all.clone()), Direction::Forward))),
        ("index_scan_high_end_bwd_50", Box::new(|_| (last_warehouse.clone(), Direction::Backward))),
    ];
    // Every scan kind must visit exactly 50 entries on every backend, or the timings compare
    // different work.
    for (name, make) in &scans {
        for (backend, index) in &indexes {
            let (range, dir) = make(1);
            assert_eq!(count_scan(index.as_ref(), &range, dir), SCAN_LEN, "{name} on {backend}");
        }
    }
    for (name, make) in &scans {
        let mut group = c.benchmark_group(*name);
        for (backend, index) in &indexes {
            group.bench_function(BenchmarkId::from_parameter(backend), |b| {
                let mut i = 0usize;
                b.iter_batched_ref(
                    || {
                        i = (i + 1) & (PROBES - 1);
                        make(i)
                    },
                    |(range, dir)| black_box(count_scan(index.as_ref(), range, *dir)),
                    criterion::BatchSize::SmallInput,
                )
            });
        }
        group.finish();
    }

    let mut group = c.benchmark_group("index_mixed_2t");
    group.throughput(Throughput::Elements(1));
    for (backend, index) in &indexes {
        group.bench_function(BenchmarkId::from_parameter(backend), |b| {
            b.iter_custom(|iters| mixed(index, &probes, iters))
        });
    }
    group.finish();
}

/// Two threads share `iters` operations (80% get, 10% insert, 10% 50-key forward scan); returns
/// the wall time. Inserted keys are removed afterwards, untimed.
fn mixed(index: &Arc<dyn OrderedIndex>, probes: &[Key], iters: u64) -> Duration {
    let per_thread = iters.div_ceil(2);
    let start = std::sync::Barrier::new(3);
    let (elapsed, inserted) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2u64)
            .map(|t| {
                let index = Arc::clone(index);
                let start = &start;
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(100 + t);
                    let fresh: Vec<(Key, Record)> =
                        (0..per_thread / 10 + 1).map(|i| (fresh_key(&mut rng), record(i as i64))).collect();
                    let mut next_fresh = 0usize;
                    start.wait();
                    for i in 0..per_thread {
                        let probe = &probes[rng.random_range(0..probes.len())];
                        match i % 10 {
                            8 => {
                                let (k, r) = &fresh[next_fresh];
                                next_fresh += 1;
                                black_box(index.insert_if_absent(k.clone(), r.clone()).is_ok());
                            }
                            9 => {
                                black_box(count_scan(index.as_ref(), &from(probe.clone()), Direction::Forward));
                            }
                            _ => {
                                black_box(index.get(probe));
                            }
                        }
                    }
                    fresh.into_iter().take(next_fresh).collect::<Vec<_>>()
                })
            })
            .collect();
        start.wait();
        let t = Instant::now();
        let inserted: Vec<_> = workers.into_iter().map(|w| w.join().expect("worker panicked")).collect();
        (t.elapsed(), inserted)
    });
    for (k, r) in inserted.iter().flatten() {
        index.remove(k, r);
    }
    elapsed
}

fn main() {
    let mut c = Criterion::default()
        // Plots need system fonts, which a bare machine lacks (criterion panics on FontUnavailable).
        .without_plots()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_all(&mut c);
    c.final_summary();
}
