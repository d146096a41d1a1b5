//! The Restorer and the Scheduler (paper §4.3): after a crash the database opens with empty
//! tables; the Restorer walks the indexed log in key order and installs each image, while a
//! transaction that touches a key not yet restored has it fetched first, through the tables'
//! restore gate ([`crate::storage::table::RestoreGate`]).
//!
//! # What "restored" means
//!
//! The walk goes through the B-tree in (table, key) order; its cursor is the last full key it
//! installed. A key is restored when it is ≤ the cursor (whether or not the B-tree held it: a key
//! the walk passed and did not find never existed), or when a transaction fetched it on demand
//! (the `demanded` set). The walk skips demanded keys: a transaction may have changed or deleted
//! them since, and the walk's image is older. One mutex covers the cursor and the set: a batch of
//! the walk and the install of an on-demand fetch exclude each other, which is the paper's "pause
//! the incremental recovery and fetch the tuples the transaction needs" (the B-tree probe itself
//! runs outside the mutex, and the state is checked again after it).
//!
//! Range reads (SCAN, KEYS, DBSIZE, procedure scans) wait until their table is restored: a range
//! cannot be answered from a partly restored table, and fetching a range on demand would be the
//! walk itself. When the walk ends every table's gate is removed and the database is fully in
//! memory; the indexed log is only a log again.
//!
//! # Failure
//!
//! If the indexed log cannot be read in the middle of a restore, the tables are half in memory
//! and nothing correct can be answered from them: the file is set aside
//! ([`IndexStore::set_aside`]) and the process stops; the next start rebuilds the indexed log from
//! the sequential log and the checkpoint.

use super::store::{self, IndexStore};
use crate::storage::table::{RestoreGate, Table};
use crate::storage::{Catalog, Key};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Images installed per batch of the walk (the longest a transaction waits for the walk).
const WALK_BATCH_KEYS: usize = 1024;

struct Walk {
    /// The last full key the walk passed; `None` before the first batch.
    cursor: Option<Vec<u8>>,
    /// Keys fetched on demand, which the walk must not overwrite.
    demanded: HashSet<Vec<u8>>,
    done: bool,
}

/// Progress of a restore, for INFO's `recovery` section.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RestoreProgress {
    /// Whether the walk has ended (the database is fully in memory).
    pub done: bool,
    /// Images in the indexed log when the restore began.
    pub total_keys: u64,
    /// Images the walk has passed (installed, or skipped because fetched on demand before).
    pub walked_keys: u64,
    /// Keys fetched on demand (found in the indexed log or not).
    pub on_demand_keys: u64,
    /// Milliseconds from the start of recovery to the end of the walk (or to now while it runs).
    pub elapsed_ms: f64,
}

impl RestoreProgress {
    /// Percent of the images restored.
    pub fn percent(&self) -> f64 {
        if self.done || self.total_keys == 0 {
            100.0
        } else {
            (self.walked_keys as f64 * 100.0 / self.total_keys as f64).min(100.0)
        }
    }
}

/// A restore in progress: the tables' gate, and the walk's state.
pub struct Restorer {
    store: Arc<IndexStore>,
    walk: Mutex<Walk>,
    walked: Condvar,
    total_keys: u64,
    walked_keys: AtomicU64,
    on_demand_keys: AtomicU64,
    started: Instant,
    finished_ms: Mutex<Option<f64>>,
    paused: Mutex<bool>,
    paused_cv: Condvar,
    stop: AtomicBool,
}

impl Restorer {
    /// A restore from `store`, begun (recovery included) at `started`; the walk waits while
    /// `paused` (tests hold it to observe the database half restored).
    pub fn new(
        store: Arc<IndexStore>,
        started: Instant,
        paused: bool,
    ) -> Result<Restorer, crate::durability::DurabilityError> {
        let total_keys = store.image_count()?;
        Ok(Restorer {
            store,
            walk: Mutex::new(Walk { cursor: None, demanded: HashSet::new(), done: false }),
            walked: Condvar::new(),
            total_keys,
            walked_keys: AtomicU64::new(0),
            on_demand_keys: AtomicU64::new(0),
            started,
            finished_ms: Mutex::new(None),
            paused: Mutex::new(paused),
            paused_cv: Condvar::new(),
            stop: AtomicBool::new(false),
        })
    }

    /// The progress now.
    pub fn progress(&self) -> RestoreProgress {
        let finished = *self.finished_ms.lock();
        RestoreProgress {
            done: finished.is_some(),
            total_keys: self.total_keys,
            walked_keys: self.walked_keys.load(Ordering::Relaxed),
            on_demand_keys: self.on_demand_keys.load(Ordering::Relaxed),
            elapsed_ms: finished.unwrap_or_else(|| self.started.elapsed().as_secs_f64() * 1e3),
        }
    }

    /// Holds or releases the walk (on-demand fetches go on either way).
    pub fn set_paused(&self, paused: bool) {
        *self.paused.lock() = paused;
        self.paused_cv.notify_all();
    }

    /// Stops the walk (shutdown); the tables stay gated.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.set_paused(false);
    }

    /// Blocks until the walk has ended or was stopped.
    pub fn wait_done(&self) {
        let mut walk = self.walk.lock();
        while !walk.done && !self.stop.load(Ordering::SeqCst) {
            self.walked.wait_for(&mut walk, std::time::Duration::from_millis(50));
        }
    }

    /// The walk: runs on the Restorer thread until every image is installed, then ungates
    /// every table of `catalog`.
    pub fn run(&self, catalog: &ArcSwap<Catalog>) {
        let mut after: Option<Vec<u8>> = None;
        loop {
            {
                let mut paused = self.paused.lock();
                while *paused && !self.stop.load(Ordering::SeqCst) {
                    self.paused_cv.wait(&mut paused);
                }
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let batch = match self.store.walk(after.as_deref(), WALK_BATCH_KEYS) {
                Ok(batch) => batch,
                Err(e) => fatal_with(&self.store, &format!("the restore walk cannot read the indexed log: {e}")),
            };
            let Some(last) = batch.last().map(|(k, _)| k.clone()) else { break };
            let catalog = catalog.load();
            let mut walk = self.walk.lock();
            for (full, image) in &batch {
                if !walk.demanded.contains(full)
                    && let Err(message) = install(&catalog, full, image)
                {
                    fatal_with(&self.store, &message);
                }
            }
            self.walked_keys.fetch_add(batch.len() as u64, Ordering::Relaxed);
            walk.cursor = Some(last.clone());
            drop(walk);
            self.walked.notify_all();
            after = Some(last);
        }
        let mut walk = self.walk.lock();
        walk.done = true;
        walk.demanded = HashSet::new();
        for table in catalog.load().tables() {
            table.end_restore();
        }
        *self.finished_ms.lock() = Some(self.started.elapsed().as_secs_f64() * 1e3);
        drop(walk);
        self.walked.notify_all();
    }
}

/// Installs one image (B-tree key and value) into its table.
fn install(catalog: &Catalog, full: &[u8], image: &[u8]) -> Result<(), String> {
    let Some((table_id, key)) = store::split_key(full) else {
        return Err(format!("the indexed log holds a key of {} bytes, shorter than a table id", full.len()));
    };
    let Some(table) = catalog.table(table_id) else {
        return Err(format!("the indexed log holds a key of table {table_id}, which the catalog lacks"));
    };
    let (tid, row) =
        store::decode_image(image).map_err(|e| format!("an image in the indexed log does not decode: {e}"))?;
    table.restore_row(&Key::from(key), row, tid);
    Ok(())
}

fn fatal_with(store: &IndexStore, message: &str) -> ! {
    eprintln!(
        "lazarus: instant recovery cannot go on: {message}; the indexed log is set aside and rebuilt at the next start"
    );
    store.set_aside();
    std::process::abort()
}

impl RestoreGate for Restorer {
    fn restore_key(&self, table: &Table, key: &[u8]) {
        let full = store::full_key(table.id, key);
        let restored = |walk: &Walk| {
            walk.done || walk.cursor.as_ref().is_some_and(|c| full <= *c) || walk.demanded.contains(&full)
        };
        if restored(&self.walk.lock()) {
            return;
        }
        // The probe runs outside the mutex, so fetches of different keys overlap and the walk
        // is not held up by them. The image read is the key's recovered one: a key written
        // since the restart was fetched (demanded) before its write, so it is never here.
        let image = match self.store.fetch(&full) {
            Ok(image) => image,
            Err(e) => fatal_with(&self.store, &format!("an on-demand fetch cannot read the indexed log: {e}")),
        };
        let mut walk = self.walk.lock();
        // The walk or another fetch may have restored it meanwhile.
        if restored(&walk) {
            return;
        }
        if let Some(image) = image {
            match store::decode_image(&image) {
                Ok((tid, row)) => {
                    table.restore_row(&Key::from(key), row, tid);
                }
                Err(e) => fatal_with(&self.store, &format!("an image in the indexed log does not decode: {e}")),
            }
        }
        walk.demanded.insert(full);
        self.on_demand_keys.fetch_add(1, Ordering::Relaxed);
    }

    fn wait_table(&self, table: &Table) {
        let mut walk = self.walk.lock();
        loop {
            let passed = walk.cursor.as_ref().and_then(|c| store::split_key(c)).is_some_and(|(t, _)| t > table.id);
            if walk.done || passed || self.stop.load(Ordering::SeqCst) {
                return;
            }
            self.walked.wait_for(&mut walk, std::time::Duration::from_millis(50));
        }
    }
}
