//! Lazarus: an in-memory transactional database whose durability costs almost nothing while it
//! runs and whose recovery is as fast as the hardware allows.
//!
//! Subsystems, one module each (see `docs/` for one design document per subsystem):
//! - [`storage`]: typed rows, order-preserving keys, records with Silo's TID word, ordered indexes.
//! - [`txn`]: Silo's optimistic concurrency control with epochs.
//! - [`durability`]: the commit hook every logging scheme plugs into.
//! - [`proc`]: the stored-procedure language, its IR and compiler.
//! - [`replay`]: redo records applied directly or through cached compiled plans (Pan's thesis).
//! - [`io`]: the one trait all file I/O goes through.
//! - [`pacman`]: PACMAN's static analysis of procedures: slices, blocks, the global dependency graph.
//! - [`db`]: the embedded database that ties them together.
//! - [`bench`](mod@bench): the driver behind `lazarus bench`: timing, histograms, timelines.
//! - [`workload`]: TPC-C, Smallbank, YCSB, KV and transfer, in the procedure language.
//! - [`crash`]: `lazarus crash-test`: SIGKILL trials against the value scheme, recovery, verification.
//! - [`report`]: `lazarus report`: charts and tables of bench output files as one HTML page.
//! - [`server`]: `lazarus serve`: the Redis-protocol server.
//! - [`fuzzing`]: the decoders and parsers as the fuzz targets in `fuzz/` call them.

// The module docs describe the internals and link to them; they are built (and their links
// checked, in CI) with `--document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod allocator;
pub mod bench;
pub mod crash;
pub mod db;
pub mod durability;
pub mod fuzzing;
pub mod io;
pub mod pacman;
pub mod proc;
pub mod replay;
pub mod report;
pub mod server;
pub mod storage;
pub mod txn;
pub mod workload;

pub use db::{Database, DatabaseConfig, Worker};
