//! One checkpointer's walk (SiloR §4, `src/durability/checkpoint/writer.rs`) over a loaded TPC-C
//! database, with nothing else running: the CPU one checkpoint costs, which on a machine whose
//! workers use every core comes out of the workers' throughput. The files go to the simulated
//! disk (`io::sim`), in memory, so that the figure is the walk's and the encoding's, not the
//! disk's.
//!
//! Run: `cargo bench --bench checkpoint` (`CHECKPOINT_WAREHOUSES`, default 2).

use criterion::{Criterion, criterion_group, criterion_main};
use lazarus::bench::Workload;
use lazarus::durability::checkpoint::CheckpointOptions;
use lazarus::durability::checkpoint::writer::{CheckpointerPlan, run_checkpointer};
use lazarus::io::FileSystem;
use lazarus::io::sim::SimDisk;
use lazarus::storage::KeyRange;
use lazarus::workload::tpcc::Tpcc;
use lazarus::{Database, DatabaseConfig};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: lazarus::allocator::Mimalloc = lazarus::allocator::Mimalloc;

fn bench_checkpoint(c: &mut Criterion) {
    let warehouses = std::env::var("CHECKPOINT_WAREHOUSES").ok().and_then(|w| w.parse().ok()).unwrap_or(2);
    let db = Database::open(DatabaseConfig::default()).expect("open");
    let tpcc = Tpcc::default();
    for (name, source) in tpcc.sources() {
        db.load_module(&name, &source).expect("load module");
    }
    tpcc.load(&db, warehouses).expect("load");
    let shares: Vec<_> = db.catalog().tables().iter().map(|t| (Arc::clone(t), KeyRange::all())).collect();
    let stop = AtomicBool::new(false);
    // The block size and sync distance a checkpoint runs with by default (SiloR's 32 MB).
    let options = CheckpointOptions::new(1);
    let mut group = c.benchmark_group("checkpoint");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    group.bench_function(format!("tpcc, {warehouses} warehouses, 1 checkpointer, 1 file"), |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for i in 0..iterations {
                // A fresh disk per checkpoint: the previous one's files would only take memory.
                let disk = SimDisk::new();
                disk.create_dir_all(Path::new("/c")).expect("dir");
                let plan = CheckpointerPlan {
                    checkpoint_id: i + 1,
                    dir: "/c".into(),
                    dir_index: 0,
                    files: 1,
                    skip_from_epoch: u64::MAX,
                    shares: shares.clone(),
                    block_size_bytes: options.block_size_bytes,
                    sync_every_bytes: options.sync_every_bytes,
                };
                let started = Instant::now();
                let report = run_checkpointer(&disk, &plan, &stop).expect("write").expect("not stopped");
                total += started.elapsed();
                assert!(report.records > 0);
            }
            total
        });
    });
    group.finish();
}

criterion_group!(benches, bench_checkpoint);
criterion_main!(benches);
