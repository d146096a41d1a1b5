//! Lazarus's own ordered index: a B+tree with optimistic lock coupling, written for the engine.
//!
//! Silo keeps every table in a Masstree whose readers take no lock and validate node versions
//! instead (SiloR §2). This is the same idea in its simplest B+tree form (Leis et al.,
//! "Optimistic Lock Coupling"), shaped by what profiling TPC-C showed: inserts and scans of
//! `scc::TreeIndex` (the default before) were 15 % of TPC-C's instructions, with a cache miss or
//! more per key comparison. Measurements: `docs/PERFORMANCE.md`, "The OLC tree".
//!
//! # Nodes
//!
//! A node holds up to [`FANOUT`] keys. A leaf's slots point to entries (key and record), or, in a
//! table's primary tree ([`OlcTree::keyed_by_records`]), straight to the records, which hold
//! their own keys. An inner node's slots point to separator keys, with one more child than
//! separators. Child `j` holds the keys `k` with `separator[j-1] <= k < separator[j]`.
//!
//! Comparing byte-string keys behind pointers costs a cache miss per comparison, so each slot also
//! keeps a 16-byte **slice** of its key inline: the bytes after the node's **prefix**, the bytes
//! every key in the node shares (up to [`PREFIX_MAX_BYTES`]; TPC-C keys in one leaf share their
//! warehouse, district and most of the order id). A search compares the probe with the prefix
//! once, then slices; only equal slices send it to the full key. Slices are zero-padded, which
//! keeps their order consistent with the keys' order wherever two slices differ (a key that ends
//! early is a prefix of the other, so the smaller). An insert whose key does not share the prefix
//! shortens it and recomputes the node's slices; a split recomputes both halves' prefixes from
//! their first and last keys, the tightest prefix they share.
//!
//! # Concurrency
//!
//! Every node has a version word: bit 0 = locked, bit 1 = obsolete (unlinked from the tree),
//! the rest a counter that each unlock advances.
//! - **Readers** never write shared memory: they read a node's version, read what they need with
//!   atomic loads, and check the version is unchanged (a seqlock). Moving to a child, they read
//!   the child's version and then re-check the parent's, so the child they entered is the one the
//!   parent pointed to at a moment when both were as read. A failed check restarts the operation
//!   from the root. Every field is an atomic, so a reader racing a writer reads stale or mixed
//!   values, never torn ones, and discards them at the check.
//! - **Writers** descend the same way, then lock the nodes they change by compare-and-swap on the
//!   version they read (which fails if anything changed). They lock top-down and never wait for a
//!   lock while holding one (a failed lock releases everything and restarts), so they cannot
//!   deadlock. An insert splits a full node with its parent locked; a full parent is split first,
//!   on the way down.
//! - **Scans** read one leaf at a time like a point read, collect its entries, check its version,
//!   and visit them with no lock held (the engine's visitors wait on record locks; see the trait's
//!   contract). The next leaf is the sibling under the same parent if the parent is unchanged,
//!   else a new descent to the leaf's fence (the separator that bounds it), so leaves need no
//!   sibling links to keep in step. A long scan re-pins every [`REPIN_LEAVES`] leaves.
//! - **Reclamation**: removed entries, separators and unlinked nodes are freed through the epoch
//!   collector (`crossbeam_epoch`); every operation runs pinned, so nothing it can still reach is
//!   freed under it.
//! - **Empty leaves** are unlinked from their parent when a removal empties them (with the chain
//!   of single-child nodes above them), so a table whose old keys are deleted (TPC-C's
//!   `new_order`) does not leave scans walking through empty leaves. A parent never loses its
//!   last child; the tree never shrinks in height.
//!
//! # Building from sorted entries
//!
//! Recovery loads an empty tree from runs of entries in key order ([`OrderedIndex::load_sorted`]):
//! each run's entries are split evenly over as few leaves as hold them (so a run's leaves are at
//! least half full, unless the run has fewer than half a leaf's entries), each leaf's prefix and
//! slices computed once, a large run's leaves on a thread of its own; then each level of inner
//! nodes is built over the one below the same way, a leaf's separator being a copy of its first
//! key and an inner node's the separator of its first child, moved up. The root it replaced,
//! empty and locked by the build, is retired when the new one is published.

use super::{Direction, Entry as Loaded, KeyRange, NodeVersion, OrderedIndex, RangeWalk, Run, ScanVisitor};
use crate::storage::key::Key;
use crate::storage::record::{RawRecord, Record};
use crossbeam_epoch::Guard;
use std::cmp::Ordering as Cmp;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};

/// Keys per node (separators of an inner node, entries of a leaf).
pub const FANOUT: usize = 32;
/// The longest prefix a node keeps.
pub const PREFIX_MAX_BYTES: usize = 32;
const PREFIX_WORDS: usize = PREFIX_MAX_BYTES / 8;
/// The deepest tree an operation will walk. Height grows only when a full root splits, and a
/// node splits only when full, so a tree this deep has taken far more inserts than memory holds
/// keys; deeper means a corrupted tree.
const HEIGHT_MAX: usize = 24;
/// A scan lets the collector advance (re-pins) after this many leaves.
const REPIN_LEAVES: usize = 64;
/// How often a removal tries to unlink the leaf it emptied before leaving it for later.
const PRUNE_ATTEMPTS: usize = 4;

const LOCKED: u64 = 1;
const OBSOLETE: u64 = 2;
/// What an unlock adds to a locked version: clears the lock bit and advances the counter.
const UNLOCK_STEP: u64 = 3;
/// What an unlock that retires the node adds: clears the lock bit and sets the obsolete bit.
const RETIRE_STEP: u64 = 1;

/// A leaf's entry.
struct Entry {
    key: Key,
    record: Record,
}

/// A leaf, or the first part of an inner node ([`Inner`]): what both kinds have.
///
/// A leaf is a `Node` alone: 824 bytes, mimalloc's 896-byte class. With the children in it (one
/// layout for both kinds, until session 50) a leaf took 1,088 bytes, a 1,280-byte block, and
/// a restored key ≈ 40 bytes of leaf instead of ≈ 28.
#[repr(C)]
struct Node {
    version: AtomicU64,
    leaf: bool,
    /// Leaf slots point to records (`Record::into_raw`), each under its own key ([`Record::key`]),
    /// instead of to entries: see [`OlcTree::keyed_by_records`].
    holds_records: bool,
    count: AtomicU32,
    /// The slot of the latest insert (`u32::MAX`: none yet), to tell sequential inserts.
    last_insert: AtomicU32,
    /// Bytes of `prefix` in use.
    skip: AtomicU32,
    /// The prefix's bytes, big-endian, zero-padded.
    prefix: [AtomicU64; PREFIX_WORDS],
    /// Each slot's slice as (high, low) words of a big-endian u128.
    slices: [[AtomicU64; 2]; FANOUT],
    /// Leaf: `*mut Entry`. Inner: `*mut Key`, the separators.
    slots: [AtomicPtr<()>; FANOUT],
}

/// A leaf's size bound: the mimalloc size class it is allocated from (see [`Node`]).
const LEAF_BYTES_MAX: usize = 896;
const _: () = assert!(std::mem::size_of::<Node>() <= LEAF_BYTES_MAX, "a leaf outgrew its size class");

/// An inner node's children: child `j` holds the keys between separators `j - 1` and `j`.
type Children = [AtomicPtr<Node>; FANOUT + 1];

/// An inner node: a [`Node`] (its separators) followed by its children.
///
/// The tree holds every node as a `*const Node`. An inner node's pointer came from
/// `Box::into_raw` of its `Inner` ([`Inner::into_node`]), so it is valid for the whole `Inner`,
/// and [`children`] casts it back (the `Node` is at offset 0: `repr(C)`). A pointer made from a
/// `&Node` would be valid for the `Node` alone: the children are reached only from the tree's
/// own pointers.
#[repr(C)]
struct Inner {
    node: Node,
    children: Children,
}

impl Inner {
    fn new(holds_records: bool) -> Box<Inner> {
        Box::new(Inner {
            node: Node::fresh(false, holds_records),
            children: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        })
    }

    /// The node's pointer as the tree holds it; freed by [`free_node`].
    fn into_node(self: Box<Inner>) -> *mut Node {
        Box::into_raw(self).cast()
    }
}

/// A B+tree with optimistic lock coupling; see the module docs.
pub struct OlcTree {
    root: AtomicPtr<Node>,
    len: AtomicUsize,
    /// See [`OlcTree::keyed_by_records`].
    holds_records: bool,
}

/// One inner node on a descent's path.
#[derive(Clone, Copy)]
struct Step {
    node: *const Node,
    version: u64,
    /// The child the descent took.
    child: usize,
    /// The node's separator count when read.
    count: usize,
    /// The node's own fences (see [`Path`]).
    low: *const Key,
    high: *const Key,
}

/// A validated root-to-leaf walk.
struct Path {
    steps: [Step; HEIGHT_MAX],
    depth: usize,
    leaf: *const Node,
    leaf_version: u64,
    /// The separator below the leaf's keys (null: none, the leaf is leftmost).
    low: *const Key,
    /// The separator above the leaf's keys (null: none, the leaf is rightmost).
    high: *const Key,
}

/// Which leaf a descent goes to.
#[derive(Clone, Copy)]
enum Aim<'k> {
    /// The leaf that holds or would hold this key.
    Key(&'k [u8]),
    /// The leaf that holds the largest keys below this one.
    Below(&'k [u8]),
    /// The leftmost leaf.
    First,
    /// The rightmost leaf.
    Last,
}

/// The node behind `ptr`. The caller is pinned (`_guard`), and `ptr` was read from the tree
/// while pinned: nodes are freed only through the collector after being unlinked, or when the
/// tree is dropped.
#[inline]
fn node(ptr: *const Node, _guard: &Guard) -> &Node {
    debug_assert!(!ptr.is_null());
    // SAFETY: see the function docs.
    unsafe { &*ptr }
}

/// The children of the inner node behind `ptr`, under the same rule as [`node`]; `ptr` is the
/// tree's own pointer to the node, valid for the whole [`Inner`].
#[inline]
fn children(ptr: *const Node, guard: &Guard) -> &Children {
    debug_assert!(!node(ptr, guard).leaf, "a leaf has no children");
    // SAFETY: see the function docs and [`Inner`].
    unsafe { &(*ptr.cast::<Inner>()).children }
}

/// Frees the node behind `ptr` as the kind it was allocated as (not what its slots point to).
///
/// # Safety
///
/// `ptr` came from `Box::into_raw` of a leaf or from [`Inner::into_node`], and nothing can reach
/// it any more (or the call is deferred through the collector).
unsafe fn free_node(ptr: *mut Node) {
    // SAFETY: see the function docs.
    unsafe {
        if (*ptr).leaf {
            drop(Box::from_raw(ptr));
        } else {
            drop(Box::from_raw(ptr.cast::<Inner>()));
        }
    }
}

/// The entry behind `ptr`, under the same rule as [`node`].
#[inline]
fn entry(ptr: *const (), _guard: &Guard) -> &Entry {
    // SAFETY: see [`node`]; entries are freed only through the collector after removal.
    unsafe { &*(ptr as *const Entry) }
}

/// The separator behind `ptr`, under the same rule as [`node`].
#[inline]
fn separator(ptr: *const (), _guard: &Guard) -> &Key {
    // SAFETY: see [`node`]; separators are freed only through the collector after removal.
    unsafe { &*(ptr as *const Key) }
}

/// The 8 bytes of `key` from `offset`, zero-padded past its end, as a big-endian number.
#[inline]
fn word_at(key: &[u8], offset: usize) -> u64 {
    if let Some(bytes) = key.get(offset..offset + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        return u64::from_be_bytes(word);
    }
    let mut word = [0u8; 8];
    if offset < key.len() {
        let tail = &key[offset..];
        word[..tail.len()].copy_from_slice(tail);
    }
    u64::from_be_bytes(word)
}

/// The 16 bytes of `key` after its first `skip`, zero-padded, as a big-endian number.
#[inline]
fn slice_of(key: &[u8], skip: usize) -> u128 {
    (u128::from(word_at(key, skip)) << 64) | u128::from(word_at(key, skip + 8))
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Node {
    fn new_leaf(holds_records: bool) -> Box<Node> {
        Box::new(Node::fresh(true, holds_records))
    }

    fn fresh(leaf: bool, holds_records: bool) -> Node {
        Node {
            version: AtomicU64::new(0),
            leaf,
            holds_records,
            count: AtomicU32::new(0),
            last_insert: AtomicU32::new(u32::MAX),
            skip: AtomicU32::new(0),
            prefix: std::array::from_fn(|_| AtomicU64::new(0)),
            slices: std::array::from_fn(|_| [AtomicU64::new(0), AtomicU64::new(0)]),
            slots: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    // ---- versions ----

    /// The node's version once unlocked; `None` if it is obsolete (the caller restarts).
    #[inline]
    fn read_lock(&self) -> Option<u64> {
        loop {
            let v = self.version.load(Ordering::Acquire);
            if v & OBSOLETE != 0 {
                return None;
            }
            if v & LOCKED == 0 {
                return Some(v);
            }
            std::hint::spin_loop();
        }
    }

    /// Whether nothing changed the node since `version` was read.
    #[inline]
    fn validate(&self, version: u64) -> bool {
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == version
    }

    /// Locks the node if it is still at `version`.
    #[inline]
    fn upgrade(&self, version: u64) -> bool {
        let locked =
            self.version.compare_exchange(version, version + LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok();
        if locked {
            // Orders the writer's slot stores after the lock, for readers that check the version
            // after reading slots (the seqlock writer's fence).
            fence(Ordering::Release);
        }
        locked
    }

    #[inline]
    fn unlock(&self) {
        self.version.fetch_add(UNLOCK_STEP, Ordering::Release);
    }

    /// Unlocks the node as obsolete: readers that meet it restart.
    fn retire(&self) {
        self.version.fetch_add(RETIRE_STEP, Ordering::Release);
    }

    // ---- slots ----

    #[inline]
    fn count(&self) -> usize {
        (self.count.load(Ordering::Relaxed) as usize).min(FANOUT)
    }

    #[inline]
    fn slice(&self, i: usize) -> u128 {
        let [hi, lo] = &self.slices[i];
        (u128::from(hi.load(Ordering::Relaxed)) << 64) | u128::from(lo.load(Ordering::Relaxed))
    }

    #[inline]
    fn set_slice(&self, i: usize, slice: u128) {
        self.slices[i][0].store((slice >> 64) as u64, Ordering::Relaxed);
        self.slices[i][1].store(slice as u64, Ordering::Relaxed);
    }

    /// The full key of slot `i`, or `None` if a racing writer left the slot empty.
    #[inline]
    fn full_key<'g>(&self, i: usize, guard: &'g Guard) -> Option<&'g [u8]> {
        let p = self.slots[i].load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        Some(if self.leaf { self.leaf_slot(p, guard).0 } else { separator(p, guard).as_bytes() })
    }

    /// The key and record of the leaf slot that held `p`.
    #[inline]
    fn leaf_slot<'g>(&self, p: *const (), guard: &'g Guard) -> (&'g [u8], RawRecord) {
        if self.holds_records {
            // SAFETY: as for entries ([`entry`]): the tree's reference to the record is dropped
            // only through the collector, and the caller is pinned.
            (unsafe { Record::key_of_raw(p.cast()) }, p.cast())
        } else {
            let e = entry(p, guard);
            (&e.key, Record::as_ptr(&e.record))
        }
    }

    /// Whether `key` starts with the node's prefix of `skip` bytes, compared a word at a time
    /// (most inserts keep the prefix: this spares them building it as bytes).
    #[inline]
    fn starts_with_prefix(&self, key: &[u8], skip: usize) -> bool {
        if key.len() < skip {
            return false;
        }
        self.prefix.iter().enumerate().take(skip.div_ceil(8)).all(|(w, word)| {
            let used = skip - w * 8;
            let mask = if used < 8 { !0u64 << (8 * (8 - used)) } else { !0u64 };
            word_at(key, w * 8) & mask == word.load(Ordering::Relaxed)
        })
    }

    fn prefix_bytes(&self, skip: usize) -> [u8; PREFIX_MAX_BYTES] {
        let mut bytes = [0u8; PREFIX_MAX_BYTES];
        for w in 0..skip.div_ceil(8) {
            bytes[w * 8..w * 8 + 8].copy_from_slice(&self.prefix[w].load(Ordering::Relaxed).to_be_bytes());
        }
        bytes
    }

    /// Where `probe` falls among the node's keys: `Ok(i)` if key `i` equals it, `Err(i)` if it
    /// sorts just before key `i`. `None` if a racing writer was seen (the caller validates
    /// anyway; this only spares it a null pointer).
    fn search(&self, probe: &[u8], guard: &Guard) -> Option<Result<usize, usize>> {
        let count = self.count();
        let skip = (self.skip.load(Ordering::Relaxed) as usize).min(PREFIX_MAX_BYTES);
        // The prefix, a word at a time. Zero padding on both sides keeps word order equal to
        // byte order: where a padded probe word differs, the probe is smaller or larger than
        // every key here; where all are equal, the probe starts with the prefix or is a proper
        // prefix of it (then smaller than every key).
        for (w, word) in self.prefix.iter().enumerate().take(skip.div_ceil(8)) {
            let mut probe_word = word_at(probe, w * 8);
            let used = skip - w * 8;
            if used < 8 {
                probe_word &= !0u64 << (8 * (8 - used));
            }
            match probe_word.cmp(&word.load(Ordering::Relaxed)) {
                Cmp::Less => return Some(Err(0)),
                Cmp::Greater => return Some(Err(count)),
                Cmp::Equal => {}
            }
        }
        if probe.len() < skip {
            return Some(Err(0));
        }
        let wanted = slice_of(probe, skip);
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let order = match self.slice(mid).cmp(&wanted) {
                Cmp::Equal => self.full_key(mid, guard)?.cmp(probe),
                order => order,
            };
            match order {
                Cmp::Less => lo = mid + 1,
                Cmp::Greater => hi = mid,
                Cmp::Equal => return Some(Ok(mid)),
            }
        }
        Some(Err(lo))
    }

    /// The child an inner node sends `aim` to; `None` if a racing writer was seen.
    #[inline]
    fn route(&self, aim: Aim<'_>, guard: &Guard) -> Option<usize> {
        Some(match aim {
            Aim::First => 0,
            Aim::Last => self.count(),
            Aim::Key(k) => match self.search(k, guard)? {
                Ok(i) => i + 1,
                Err(i) => i,
            },
            Aim::Below(k) => match self.search(k, guard)? {
                Ok(i) | Err(i) => i,
            },
        })
    }

    // ---- changes, made only with the node locked ----

    /// Sets the prefix to the first `skip` bytes of `like` (at most [`PREFIX_MAX_BYTES`]) without
    /// touching the slices; returns the prefix's length.
    fn set_prefix(&self, like: &[u8], skip: usize) -> usize {
        let skip = skip.min(PREFIX_MAX_BYTES).min(like.len());
        let mut bytes = [0u8; PREFIX_MAX_BYTES];
        bytes[..skip].copy_from_slice(&like[..skip]);
        for (w, word) in self.prefix.iter().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[w * 8..w * 8 + 8]);
            word.store(u64::from_be_bytes(b), Ordering::Relaxed);
        }
        self.skip.store(skip as u32, Ordering::Relaxed);
        skip
    }

    /// Sets the prefix to the first `skip` bytes of `like` and recomputes every slot's slice.
    fn reprefix(&self, like: &[u8], skip: usize, guard: &Guard) {
        let skip = self.set_prefix(like, skip);
        for i in 0..self.count() {
            let key = self.full_key(i, guard).expect("a locked node's slots below its count are set");
            self.set_slice(i, slice_of(key, skip));
        }
    }

    /// Makes the prefix the longest one the node's keys share (they are sorted, so the first
    /// and last keys' common prefix).
    fn tighten_prefix(&self, guard: &Guard) {
        let count = self.count();
        if count == 0 {
            return;
        }
        let first = self.full_key(0, guard).expect("slot set");
        let last = self.full_key(count - 1, guard).expect("slot set");
        self.reprefix(first, common_prefix_len(first, last), guard);
    }

    /// Puts `ptr` (an entry, or a separator) with key `key` at slot `i`, shifting later slots
    /// right. An inner node passes its children and the separator's right child (`inner`).
    fn insert_slot(&self, i: usize, key: &[u8], ptr: *mut (), inner: Option<(&Children, *mut Node)>, guard: &Guard) {
        debug_assert_eq!(self.leaf, inner.is_none(), "children passed for a leaf, or none for an inner node");
        let count = self.count();
        assert!(count < FANOUT && i <= count, "insert into a full node or past its end");
        let skip = self.skip.load(Ordering::Relaxed) as usize;
        if !self.starts_with_prefix(key, skip) {
            let prefix = self.prefix_bytes(skip);
            self.reprefix(key, common_prefix_len(&prefix[..skip], key), guard);
        }
        for j in (i..count).rev() {
            self.set_slice(j + 1, self.slice(j));
            self.slots[j + 1].store(self.slots[j].load(Ordering::Relaxed), Ordering::Release);
            if let Some((children, _)) = inner {
                children[j + 2].store(children[j + 1].load(Ordering::Relaxed), Ordering::Release);
            }
        }
        let skip = self.skip.load(Ordering::Relaxed) as usize;
        self.set_slice(i, slice_of(key, skip));
        self.slots[i].store(ptr, Ordering::Release);
        if let Some((children, right)) = inner {
            children[i + 1].store(right, Ordering::Release);
        }
        self.count.store(count as u32 + 1, Ordering::Relaxed);
        self.last_insert.store(i as u32, Ordering::Relaxed);
    }

    /// Removes slot `i` (and, in an inner node, `inner`: its children and the child to remove,
    /// `i` or `i + 1`), shifting later slots left. Returns the slot's pointer.
    fn remove_slot(&self, i: usize, inner: Option<(&Children, usize)>) -> *mut () {
        debug_assert_eq!(self.leaf, inner.is_none(), "children passed for a leaf, or none for an inner node");
        let count = self.count();
        assert!(i < count, "remove past the node's end");
        let removed = self.slots[i].load(Ordering::Relaxed);
        for j in i..count - 1 {
            self.set_slice(j, self.slice(j + 1));
            self.slots[j].store(self.slots[j + 1].load(Ordering::Relaxed), Ordering::Release);
        }
        self.slots[count - 1].store(ptr::null_mut(), Ordering::Release);
        if let Some((children, child)) = inner {
            debug_assert!(child == i || child == i + 1);
            for j in child..count {
                children[j].store(children[j + 1].load(Ordering::Relaxed), Ordering::Release);
            }
            children[count].store(ptr::null_mut(), Ordering::Release);
        }
        self.count.store(count as u32 - 1, Ordering::Relaxed);
        removed
    }

    /// Moves the upper part of this full node (with `children`, if it is an inner node) into a
    /// new node, to make room for an insert at slot `position`. Returns the new node (the tree's
    /// pointer to it, owned by the caller) and the separator between them (a new key for leaves;
    /// the separator at the split point, moved up, for inner nodes).
    ///
    /// A node splits in the middle, unless its inserts are sequential (this one lands just after
    /// the previous one): then it splits at the insert, so that the keys before it stay in a full
    /// node. Keys that grow in order (TPC-C's order ids, within each district) would otherwise
    /// leave every node half full and the tree a level deeper.
    fn split(&self, children: Option<&Children>, position: usize, guard: &Guard) -> (*mut Node, *mut Key) {
        debug_assert_eq!(self.leaf, children.is_none(), "children passed for a leaf, or none for an inner node");
        let count = self.count();
        assert_eq!(count, FANOUT, "only a full node splits");
        let sequential = self.last_insert.load(Ordering::Relaxed) as usize + 1 == position;
        let mid = if sequential { position.clamp(1, FANOUT - 1) } else { FANOUT / 2 };
        let right_ptr = if self.leaf {
            Box::into_raw(Node::new_leaf(self.holds_records))
        } else {
            Inner::new(self.holds_records).into_node()
        };
        let right = node(right_ptr, guard);
        let (separator, first_moved) = if self.leaf {
            let (first, _) = self.leaf_slot(self.slots[mid].load(Ordering::Relaxed), guard);
            (Box::into_raw(Box::new(Key::from(first))), mid)
        } else {
            (self.slots[mid].load(Ordering::Relaxed) as *mut Key, mid + 1)
        };
        for (to, from) in (first_moved..count).enumerate() {
            right.slots[to].store(self.slots[from].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        if let Some(children) = children {
            let right_children = self::children(right_ptr, guard);
            for (to, from) in (first_moved..=count).enumerate() {
                right_children[to].store(children[from].load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        right.count.store((count - first_moved) as u32, Ordering::Relaxed);
        right.tighten_prefix(guard);
        for i in mid..count {
            self.slots[i].store(ptr::null_mut(), Ordering::Release);
            if let Some(children) = children {
                children[i + 1].store(ptr::null_mut(), Ordering::Release);
            }
        }
        self.count.store(mid as u32, Ordering::Relaxed);
        self.tighten_prefix(guard);
        (right_ptr, separator)
    }
}

impl Path {
    fn new() -> Path {
        let step = Step { node: ptr::null(), version: 0, child: 0, count: 0, low: ptr::null(), high: ptr::null() };
        Path {
            steps: [step; HEIGHT_MAX],
            depth: 0,
            leaf: ptr::null(),
            leaf_version: 0,
            low: ptr::null(),
            high: ptr::null(),
        }
    }
}

/// Lock coupling's step down: child `child` of `parent` (read at `version`), read-locked at the
/// returned version, if `parent` was unchanged both before and after the child's version was
/// read (so the child entered is the one the parent held then); `None` means restart. What the
/// caller loaded from `parent` before calling is covered by the same checks.
#[inline]
fn step_down(parent: *const Node, version: u64, child: usize, guard: &Guard) -> Option<(*const Node, u64)> {
    let next = children(parent, guard)[child].load(Ordering::Acquire);
    let parent = node(parent, guard);
    if next.is_null() || !parent.validate(version) {
        return None;
    }
    let next_version = node(next, guard).read_lock()?;
    parent.validate(version).then_some((next.cast_const(), next_version))
}

impl Default for OlcTree {
    fn default() -> OlcTree {
        OlcTree::with_leaves_holding_records(false)
    }
}

/// Frees what a leaf slot owns: the tree's reference to its record (`holds_records`), or its
/// entry.
///
/// # Safety
///
/// `p` was a slot of a leaf of that kind, owned by the caller: no slot holds it any more, and no
/// pinned reader can still reach it (or the call is deferred through the collector).
unsafe fn drop_leaf_slot(holds_records: bool, p: *mut ()) {
    // SAFETY: see the function docs; slots hold `Record::into_raw` or `Box::into_raw` pointers.
    unsafe {
        if holds_records {
            drop(Record::from_raw(p.cast_const().cast()));
        } else {
            drop(Box::from_raw(p as *mut Entry));
        }
    }
}

/// A reference to a record the tree holds, lent to a caller for as long as it is pinned; never
/// dropped (it owns no count of the record).
fn lent(record: RawRecord) -> std::mem::ManuallyDrop<Record> {
    // SAFETY: `record` came from `Record::into_raw` or `Record::as_ptr` of a reference the tree
    // holds and drops only through the collector.
    unsafe { Record::borrow_raw(record) }
}

impl OlcTree {
    /// A tree whose every key is its record's own key ([`Record::key`]), as in a table's primary
    /// index: leaves then point straight at records, without an entry between. A scan or a get
    /// reads one line fewer per entry (the record's, which its caller reads next anyway), and an
    /// insert allocates nothing. `insert_if_absent` checks that the key is the record's.
    pub fn keyed_by_records() -> OlcTree {
        OlcTree::with_leaves_holding_records(true)
    }

    fn with_leaves_holding_records(holds_records: bool) -> OlcTree {
        OlcTree {
            root: AtomicPtr::new(Box::into_raw(Node::new_leaf(holds_records))),
            len: AtomicUsize::new(0),
            holds_records,
        }
    }

    /// Gives the collector the tree's reference held by a removed leaf slot.
    fn retire_leaf_slot(&self, leaf: &Node, p: *mut (), guard: &Guard) {
        let holds_records = leaf.holds_records;
        // SAFETY: removed from its leaf; pinned readers may still use it until the collector
        // runs this.
        unsafe { guard.defer_unchecked(move || drop_leaf_slot(holds_records, p)) };
    }

    /// The root, read-locked at the returned version; `None` if it was being replaced (the caller
    /// restarts). A root split publishes the new root before unlocking the old one, so a reader
    /// that locked the old root after the split sees the pointer moved and does not search the
    /// old root's left half alone.
    #[inline]
    fn enter_root(&self, guard: &Guard) -> Option<(*const Node, u64)> {
        let root = self.root.load(Ordering::Acquire);
        let version = node(root, guard).read_lock()?;
        (self.root.load(Ordering::Acquire) == root).then_some((root.cast_const(), version))
    }

    /// The leaf that holds or would hold `key`, read-locked at the returned version (not yet
    /// validated): [`OlcTree::descend`] without recording the path, for point operations.
    #[inline]
    fn find_leaf<'g>(&self, key: &[u8], guard: &'g Guard) -> (&'g Node, u64) {
        'restart: loop {
            let Some((mut current, mut version)) = self.enter_root(guard) else { continue };
            for _ in 0..=HEIGHT_MAX {
                let n = node(current, guard);
                if n.leaf {
                    return (n, version);
                }
                let Some(child) = n.route(Aim::Key(key), guard) else { continue 'restart };
                let Some(next) = step_down(current, version, child, guard) else { continue 'restart };
                (current, version) = next;
            }
            panic!("ordered index deeper than {HEIGHT_MAX} levels");
        }
    }

    /// Walks from the root to the leaf `aim` names, restarting until every node on the way
    /// validated. The leaf is read-locked at `leaf_version`, not yet validated.
    fn descend(&self, aim: Aim<'_>, guard: &Guard) -> Path {
        'restart: loop {
            let Some((mut current, mut version)) = self.enter_root(guard) else { continue };
            let mut path = Path::new();
            loop {
                let n = node(current, guard);
                if n.leaf {
                    path.leaf = current;
                    path.leaf_version = version;
                    return path;
                }
                assert!(path.depth < HEIGHT_MAX, "ordered index deeper than {HEIGHT_MAX} levels");
                let count = n.count();
                let Some(child) = n.route(aim, guard) else { continue 'restart };
                // Read before `step_down`, whose checks of the node's version cover them.
                let low = if child > 0 { n.slots[child - 1].load(Ordering::Acquire) } else { ptr::null_mut() };
                let high = if child < count { n.slots[child].load(Ordering::Acquire) } else { ptr::null_mut() };
                let Some(next) = step_down(current, version, child, guard) else { continue 'restart };
                path.steps[path.depth] = Step { node: current, version, child, count, low: path.low, high: path.high };
                if !low.is_null() {
                    path.low = low as *const Key;
                }
                if !high.is_null() {
                    path.high = high as *const Key;
                }
                path.depth += 1;
                (current, version) = next;
            }
        }
    }

    /// [`OrderedIndex::insert_run_if_absent`]'s work in one leaf, which the caller has locked:
    /// inserts `run[from..]` while the keys lie below `high` (the leaf's high fence; null: none)
    /// and the leaf has room, and notes in `refused` the keys it already holds. Returns where it
    /// stopped, and whether it stopped because the leaf was full (else at the fence or the run's
    /// end).
    fn fill_leaf(
        &self,
        leaf: &Node,
        high: *const Key,
        run: &[Loaded],
        from: usize,
        refused: &mut Vec<(usize, Record)>,
        guard: &Guard,
    ) -> (usize, bool) {
        // SAFETY: a separator read during the descent, freed only through the collector, and
        // this operation is pinned.
        let high = (!high.is_null()).then(|| unsafe { (*high).as_bytes() });
        let mut inserted = 0;
        let mut next = from;
        let mut full = false;
        while let Some((key, record)) = run.get(next) {
            let probe = key.as_bytes();
            if high.is_some_and(|high| probe >= high) {
                break;
            }
            // The leaf is locked, so its slots below its count are set and `search` answers. A
            // walk appends: a key above the leaf's last goes after it, with one comparison instead
            // of a search of the node.
            let count = leaf.count();
            let appends = count > 0 && leaf.full_key(count - 1, guard).is_some_and(|last| probe > last);
            let Some(found) = (if appends { Some(Err(count)) } else { leaf.search(probe, guard) }) else { break };
            match found {
                Ok(i) => {
                    let p = leaf.slots[i].load(Ordering::Acquire);
                    refused.push((next, Record::clone(&lent(leaf.leaf_slot(p, guard).1))));
                }
                Err(_) if count == FANOUT => {
                    full = true;
                    break;
                }
                Err(i) => {
                    assert!(*key == *record.key(), "a tree keyed by records was given another key");
                    // The slot's slice is taken from `probe` now; the full key is read from the
                    // record from here on.
                    leaf.insert_slot(i, probe, Record::into_raw(Record::clone(record)).cast_mut().cast(), None, guard);
                    inserted += 1;
                }
            }
            next += 1;
        }
        self.len.fetch_add(inserted, Ordering::Relaxed);
        (next, full)
    }

    /// A run's append past a full leaf (a restore's walk, a commit's inserts): when the run's
    /// entry at `from` sorts after the leaf's last key, the entries from it on (a leaf's worth at
    /// most, all below the leaf's high fence) go into a new leaf of their own, linked into the
    /// parent just after this one. Splitting the full leaf instead moves its last key into a new
    /// leaf (a sequential split), which then takes the entries one at a time, each insert checking
    /// the prefix and its first two recomputing the slices (a restore's walk,
    /// `scripts/restore-callgrind.sh`: its run inserts 563 → 293 instructions a key, the walk
    /// 2,500 → 2,215). The caller holds `leaf` locked, and its unlock tells a descent that took
    /// the leaf for these keys that its range shrank; the parent is locked here, only if it is
    /// still as `path` read it (not full then). Returns where the run goes on, or `None` where
    /// this does not apply (a root leaf, a full or changed parent, an entry inside the leaf's
    /// range): the caller's slow path.
    fn append_leaf(&self, path: &Path, leaf: &Node, run: &[Loaded], from: usize, guard: &Guard) -> Option<usize> {
        let (key, _) = run.get(from)?;
        let count = leaf.count();
        let after_last = count == FANOUT && leaf.full_key(count - 1, guard).is_some_and(|last| key.as_bytes() > last);
        if path.depth == 0 || !after_last {
            return None;
        }
        let step = path.steps[path.depth - 1];
        // SAFETY: a separator read during the descent, freed only through the collector, and this
        // operation is pinned. It bounds the leaf if the parent is still at the version read
        // then, which the upgrade below checks before anything is linked.
        let high = (!path.high.is_null()).then(|| unsafe { (*path.high).as_bytes() });
        let below_high = |(k, _): &&Loaded| high.is_none_or(|high| k.as_bytes() < high);
        let taken = run[from..].iter().take(FANOUT).take_while(below_high).count();
        // The count read at the descent is the parent's count if the upgrade succeeds.
        if step.count == FANOUT || taken == 0 {
            return None;
        }
        let parent = node(step.node, guard);
        if !parent.upgrade(step.version) {
            return None;
        }
        let chunk = &run[from..from + taken];
        let fresh_ptr = Box::into_raw(Node::new_leaf(true));
        let fresh = node(fresh_ptr, guard);
        let (first, last) = (chunk[0].0.as_bytes(), chunk[taken - 1].0.as_bytes());
        let skip = fresh.set_prefix(first, common_prefix_len(first, last));
        for (j, (key, record)) in chunk.iter().enumerate() {
            assert!(*key == *record.key(), "a tree keyed by records was given another key");
            fresh.set_slice(j, slice_of(key.as_bytes(), skip));
            fresh.slots[j].store(Record::into_raw(Record::clone(record)).cast_mut().cast(), Ordering::Relaxed);
        }
        fresh.count.store(taken as u32, Ordering::Relaxed);
        // An insert just past the last key counts as sequential, as after an append.
        fresh.last_insert.store(taken as u32 - 1, Ordering::Relaxed);
        let separator = Box::into_raw(Box::new(chunk[0].0.clone()));
        // The new leaf is complete before the parent's release stores publish it.
        parent.insert_slot(step.child, first, separator.cast(), Some((children(step.node, guard), fresh_ptr)), guard);
        parent.unlock();
        self.len.fetch_add(taken, Ordering::Relaxed);
        Some(from + taken)
    }

    /// Splits the node at depth `at` of `path` (`path.depth` is the leaf) with its parent locked,
    /// for an insert at `leaf_position` of the leaf. Returns whether it did; if anything changed
    /// since the descent, it does nothing.
    fn split_at(&self, path: &Path, at: usize, leaf_position: usize, guard: &Guard) -> bool {
        let position = if at == path.depth { leaf_position } else { path.steps[at].child };
        let (target, version) = if at == path.depth {
            (path.leaf, path.leaf_version)
        } else {
            (path.steps[at].node, path.steps[at].version)
        };
        let (target_ptr, target) = (target, node(target, guard));
        let target_children = (!target.leaf).then(|| children(target_ptr, guard));
        // The leaf's count was read before this descent (the caller saw it full), so it may have
        // been split since; an inner node's count was read with the version upgraded below.
        let full = |n: &Node| n.count() == FANOUT;
        if at == 0 {
            if !target.upgrade(version) {
                return false;
            }
            if !full(target) {
                target.unlock();
                return false;
            }
            let (right, separator) = target.split(target_children, position, guard);
            let root_ptr = Inner::new(target.holds_records).into_node();
            let (root, root_children) = (node(root_ptr, guard), children(root_ptr, guard));
            // SAFETY: `separator` is a live key the split just made or moved; the new root
            // owns it from here.
            let separator_bytes = unsafe { (*separator).as_bytes() };
            root_children[0].store(target_ptr.cast_mut(), Ordering::Relaxed);
            root.insert_slot(0, separator_bytes, separator.cast(), Some((root_children, right)), guard);
            root.tighten_prefix(guard);
            self.root.store(root_ptr, Ordering::Release);
            target.unlock();
            return true;
        }
        let parent_step = path.steps[at - 1];
        let parent = node(parent_step.node, guard);
        if !parent.upgrade(parent_step.version) {
            return false;
        }
        if !target.upgrade(version) {
            parent.unlock();
            return false;
        }
        if !full(target) {
            target.unlock();
            parent.unlock();
            return false;
        }
        let (right, separator) = target.split(target_children, position, guard);
        // SAFETY: as above; the parent owns the separator from here.
        let separator_bytes = unsafe { (*separator).as_bytes() };
        let parent_children = children(parent_step.node, guard);
        parent.insert_slot(parent_step.child, separator_bytes, separator.cast(), Some((parent_children, right)), guard);
        target.unlock();
        parent.unlock();
        true
    }

    /// The shallowest full inner node on `path`, whose parent (if any) has room.
    fn full_inner(path: &Path) -> Option<usize> {
        (0..path.depth).find(|&d| path.steps[d].count == FANOUT)
    }

    /// Unlinks the empty leaf that holds `key`'s place, with the chain of single-child nodes above
    /// it, from the nearest ancestor that has other children. Best effort: it gives up after
    /// [`PRUNE_ATTEMPTS`] conflicts, and leaves a leaf whose ancestors have no other child.
    fn prune(&self, key: &[u8], guard: &Guard) {
        'attempt: for _ in 0..PRUNE_ATTEMPTS {
            let path = self.descend(Aim::Key(key), guard);
            let leaf = node(path.leaf, guard);
            if leaf.count() != 0 {
                return;
            }
            let Some(anchor) = (0..path.depth).rev().find(|&d| path.steps[d].count > 0) else { return };
            let anchor_step = path.steps[anchor];
            let anchor_node = node(anchor_step.node, guard);
            if !anchor_node.upgrade(anchor_step.version) {
                continue;
            }
            // The tree's pointers, not the references': the nodes are freed through them.
            let chain: Vec<(*const Node, u64)> = (anchor + 1..path.depth)
                .map(|d| (path.steps[d].node, path.steps[d].version))
                .chain(std::iter::once((path.leaf, path.leaf_version)))
                .collect();
            for (locked, &(n, v)) in chain.iter().enumerate() {
                if !node(n, guard).upgrade(v) {
                    chain[..locked].iter().for_each(|&(n, _)| node(n, guard).unlock());
                    anchor_node.unlock();
                    continue 'attempt;
                }
            }
            // Versions held, so the counts read on the way down still hold: the chain is empty.
            debug_assert!(chain.iter().all(|&(n, _)| node(n, guard).count() == 0));
            let child = anchor_step.child;
            let slot = if child > 0 { child - 1 } else { 0 };
            let separator = anchor_node.remove_slot(slot, Some((children(anchor_step.node, guard), child)));
            anchor_node.unlock();
            for &(n, _) in &chain {
                node(n, guard).retire();
                let dead = n.cast_mut();
                // SAFETY: unlinked above; readers that reached it are pinned and see it obsolete.
                unsafe { guard.defer_unchecked(move || free_node(dead)) };
            }
            let dead_separator = separator as *mut Key;
            // SAFETY: removed from its node above; pinned readers may still compare against it.
            unsafe { guard.defer_unchecked(move || drop(Box::from_raw(dead_separator))) };
            return;
        }
    }

    /// Visits the entries of `range` in `direction`, one leaf at a time: the next leaf is the
    /// sibling under the same parent if the parent is unchanged, else a new descent to the fence.
    /// Stops after `limit` visits. With `nodes`, records each leaf it read with the version its
    /// entries were read under.
    fn scan_leaves(
        &self,
        range: &KeyRange,
        direction: Direction,
        limit: usize,
        visit: &mut ScanVisitor<'_>,
        mut nodes: Option<&mut Vec<NodeVersion>>,
    ) {
        let walk = &mut RangeWalk::new(range, direction, limit);
        if walk.is_done() {
            return;
        }
        let from = match direction {
            Direction::Forward => &range.start,
            Direction::Backward => &range.end,
        };
        let mut guard = crossbeam_epoch::pin();
        let mut read = self.read_leaf(from, direction, &guard);
        for leaves in 1.. {
            // Every leaf whose slots were read, even one whose entries all lie outside the range:
            // a key inserted into the covered range goes into one of these leaves, or into a leaf
            // split off one of them, which the split changes (`OrderedIndex::scan_versioned`).
            if let Some(nodes) = nodes.as_deref_mut() {
                nodes.push(NodeVersion { node: read.path.leaf as usize, version: read.path.leaf_version });
            }
            let leaf = node(read.path.leaf, &guard);
            let batch = &read.batch[..read.n];
            // A batch is sorted and starts inside the range (at the near bound, or past the
            // previous batch), so if its last entry is not past the far bound none is.
            let inside = batch.last().is_some_and(|&p| !walk.past_far(leaf.leaf_slot(p, &guard).0));
            for &p in batch {
                let (key, record) = leaf.leaf_slot(p, &guard);
                let go_on = if inside {
                    walk.offer_inside(key, &lent(record), visit)
                } else {
                    walk.offer(key, &lent(record), visit)
                };
                if !go_on {
                    return;
                }
            }
            let fence = if direction == Direction::Forward { read.path.high } else { read.path.low };
            if fence.is_null() {
                return;
            }
            if leaves % REPIN_LEAVES != 0
                && let Some(next) = OlcTree::read_sibling(&read.path, direction, &guard)
            {
                read = next;
                continue;
            }
            let fence = separator(fence.cast(), &guard).clone();
            let from = match direction {
                Direction::Forward => Bound::Included(fence),
                Direction::Backward => Bound::Excluded(fence),
            };
            if leaves % REPIN_LEAVES == 0 {
                // A long scan must not hold back the collector: let go of everything read so far.
                guard.repin();
            }
            read = self.read_leaf(&from, direction, &guard);
        }
    }

    /// The entries of the leaf where a scan from `from` goes next, in scan order, with its path.
    fn read_leaf(&self, from: &Bound<Key>, direction: Direction, guard: &Guard) -> LeafRead {
        loop {
            let aim = match (direction, from) {
                (Direction::Forward, Bound::Unbounded) => Aim::First,
                (Direction::Backward, Bound::Unbounded) => Aim::Last,
                (Direction::Forward, Bound::Included(k) | Bound::Excluded(k)) => Aim::Key(k),
                (Direction::Backward, Bound::Included(k)) => Aim::Key(k),
                (Direction::Backward, Bound::Excluded(k)) => Aim::Below(k),
            };
            let path = self.descend(aim, guard);
            let leaf = node(path.leaf, guard);
            let count = leaf.count();
            let position = match from {
                Bound::Unbounded => Some(Err(if direction == Direction::Forward { 0 } else { count })),
                Bound::Included(k) | Bound::Excluded(k) => leaf.search(k, guard),
            };
            let Some(position) = position else { continue };
            let (start, end) = match (direction, from, position) {
                (Direction::Forward, Bound::Excluded(_), Ok(i)) => (i + 1, count),
                (Direction::Forward, _, Ok(i) | Err(i)) => (i, count),
                (Direction::Backward, Bound::Included(_), Ok(i)) => (0, i + 1),
                (Direction::Backward, _, Ok(i) | Err(i)) => (0, i),
            };
            if let Some(read) = LeafRead::collect(leaf, path, start..end, direction) {
                return read;
            }
        }
    }

    /// The next leaf after the one `path` ends at, read through their parent without a new
    /// descent; `None` if the leaf was its parent's last child (in `direction`) or the parent
    /// changed since it was read.
    fn read_sibling(path: &Path, direction: Direction, guard: &Guard) -> Option<LeafRead> {
        let at = path.depth.checked_sub(1)?;
        let step = path.steps[at];
        let parent = node(step.node, guard);
        let next = match direction {
            Direction::Forward => step.child + 1,
            Direction::Backward => step.child.checked_sub(1)?,
        };
        if next > step.count {
            return None;
        }
        // Read before `step_down`, whose checks of the parent's version cover them.
        let low = if next > 0 { parent.slots[next - 1].load(Ordering::Acquire) as *const Key } else { step.low };
        let high = if next < step.count { parent.slots[next].load(Ordering::Acquire) as *const Key } else { step.high };
        let (child, version) = step_down(step.node, step.version, next, guard)?;
        let leaf = node(child, guard);
        let mut sibling = Path { leaf: child, leaf_version: version, low, high, ..*path };
        sibling.steps[at].child = next;
        LeafRead::collect(leaf, sibling, 0..leaf.count(), direction)
    }
}

/// Every slot of `positions` in one leaf, in scan order, read under one validated version.
struct LeafRead {
    batch: [*const (); FANOUT],
    n: usize,
    path: Path,
}

impl LeafRead {
    /// Reads `positions` of `leaf` (the leaf `path` ends at); `None` if a writer changed it.
    fn collect(leaf: &Node, path: Path, positions: std::ops::Range<usize>, direction: Direction) -> Option<LeafRead> {
        let mut batch = [ptr::null::<()>(); FANOUT];
        let mut n = 0;
        let order: &mut dyn Iterator<Item = usize> = match direction {
            Direction::Forward => &mut positions.clone(),
            Direction::Backward => &mut positions.clone().rev(),
        };
        for i in order {
            batch[n] = leaf.slots[i].load(Ordering::Acquire);
            n += 1;
        }
        if !leaf.validate(path.leaf_version) || batch[..n].iter().any(|p| p.is_null()) {
            return None;
        }
        Some(LeafRead { batch, n, path })
    }
}

/// A node of a tree being built from sorted entries ([`OlcTree::build_from_sorted`]), with the
/// separator that goes before it in its parent (null for the leftmost node of its level).
struct Built {
    separator: *mut Key,
    node: *mut Node,
}

// SAFETY: a `Built` owns the node and separator it points to, both fresh and reachable from no
// tree yet; it only moves from the thread that built a run's leaves to the one that links them.
unsafe impl Send for Built {}

/// Runs of at least this many entries get a thread of their own in [`OlcTree::build_from_sorted`].
const PARALLEL_RUN_MIN: usize = 50_000;

impl OlcTree {
    /// [`OrderedIndex::load_sorted`] into an empty tree: packs each run's entries into leaves from
    /// left to right (large runs on threads of their own), then builds each level of inner nodes
    /// over the one below, instead of a root-to-leaf search and a shift of slots per entry. The
    /// new root is published once the tree is whole, and the empty root it replaces is retired (a
    /// reader that met it restarts). Hands the runs back if the tree is not empty or its root is
    /// in use. The caller has checked the runs ([`super::check_sorted_runs`]).
    fn build_from_sorted(&self, runs: Vec<Run>) -> Result<(), Vec<Run>> {
        let runs: Vec<Run> = runs.into_iter().filter(|run| !run.is_empty()).collect();
        let count: usize = runs.iter().map(Run::len).sum();
        let guard = crossbeam_epoch::pin();
        let old_root = self.root.load(Ordering::Acquire);
        let old = node(old_root, &guard);
        let Some(version) = old.read_lock() else { return Err(runs) };
        if count == 0 || !old.leaf || old.count() != 0 || !old.upgrade(version) {
            return Err(runs);
        }
        let mut level: Vec<Built> = std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .into_iter()
                .enumerate()
                .map(|(i, run)| {
                    if i > 0 && run.len() >= PARALLEL_RUN_MIN {
                        Ok(scope.spawn(move || self.build_leaves(run, i > 0)))
                    } else {
                        Err(run)
                    }
                })
                .collect();
            let mut leaves = Vec::with_capacity(count.div_ceil(FANOUT));
            for (i, handle) in handles.into_iter().enumerate() {
                leaves.extend(match handle {
                    Ok(thread) => thread.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
                    Err(run) => self.build_leaves(run, i > 0),
                });
            }
            leaves
        });
        while level.len() > 1 {
            level = build_inner_level(&level);
        }
        assert!(level.len() == 1 && level[0].separator.is_null(), "a built tree has one root, leftmost");
        self.root.store(level[0].node, Ordering::Release);
        self.len.store(count, Ordering::Relaxed);
        old.retire();
        // SAFETY: unlinked above (the root pointer moved, and the node is obsolete), empty, and
        // freed only once every reader pinned now has let go.
        unsafe { guard.defer_unchecked(move || free_node(old_root)) };
        Ok(())
    }

    /// The leaves of one run of [`OlcTree::build_from_sorted`]: its entries split evenly over as
    /// few leaves as hold them, each with a separator, a copy of its first key, except the first
    /// leaf of the first run (`separated` false).
    fn build_leaves(&self, run: Run, separated: bool) -> Vec<Built> {
        let total = run.len();
        let leaves = total.div_ceil(FANOUT);
        let mut built: Vec<Built> = Vec::with_capacity(leaves);
        let mut entries = run.into_entries();
        let mut chunk: Vec<Loaded> = Vec::with_capacity(FANOUT);
        let mut previous: Option<Key> = None;
        for i in 0..leaves {
            let count = (i + 1) * total / leaves - i * total / leaves;
            chunk.extend((&mut entries).take(count));
            // The run's order, checked here where its keys are in hand: a permuted run's
            // ([`Run::Permuted`]) was not checked before, which would read each entry twice.
            if let Some(previous) = &previous {
                super::check_increasing(previous, &chunk[0].0);
            }
            for pair in chunk.windows(2) {
                super::check_increasing(&pair[0].0, &pair[1].0);
            }
            previous = Some(chunk[chunk.len() - 1].0.clone());
            let leaf = Node::new_leaf(self.holds_records);
            let (first, last) = (chunk[0].0.as_bytes(), chunk[chunk.len() - 1].0.as_bytes());
            let skip = leaf.set_prefix(first, common_prefix_len(first, last));
            let separator =
                if i == 0 && !separated { ptr::null_mut() } else { Box::into_raw(Box::new(chunk[0].0.clone())) };
            for (j, (key, record)) in chunk.drain(..).enumerate() {
                leaf.set_slice(j, slice_of(key.as_bytes(), skip));
                let slot: *mut () = if self.holds_records {
                    // Only checked in debug builds: the record's key is a cache miss per entry,
                    // and a table's records come from its own point index.
                    debug_assert!(key == *record.key(), "a tree keyed by records was given another key");
                    Record::into_raw(record).cast_mut().cast()
                } else {
                    Box::into_raw(Box::new(Entry { key, record })).cast()
                };
                leaf.slots[j].store(slot, Ordering::Relaxed);
            }
            leaf.count.store(count as u32, Ordering::Relaxed);
            // An insert just past the last key counts as sequential, as after an append.
            leaf.last_insert.store(count as u32 - 1, Ordering::Relaxed);
            built.push(Built { separator, node: Box::into_raw(leaf) });
        }
        built
    }
}

/// One level of inner nodes over `below` ([`OlcTree::build_from_sorted`]): the nodes below split
/// evenly over as few parents as hold them (every parent then has two children or more). A
/// parent's separators are its children's but the first's, whose separator moves up with it.
fn build_inner_level(below: &[Built]) -> Vec<Built> {
    let children = below.len();
    let parents = children.div_ceil(FANOUT + 1);
    let mut built = Vec::with_capacity(parents);
    for i in 0..parents {
        let group = &below[i * children / parents..(i + 1) * children / parents];
        debug_assert!(group.len() >= 2, "an inner node built with fewer than two children");
        let inner = Inner::new(false);
        // SAFETY: the separators were just allocated by this build and are owned by it.
        let key = |b: &Built| unsafe { (*b.separator).as_bytes() };
        let (first, last) = (key(&group[1]), key(&group[group.len() - 1]));
        let skip = inner.node.set_prefix(first, common_prefix_len(first, last));
        inner.children[0].store(group[0].node, Ordering::Relaxed);
        for (j, child) in group[1..].iter().enumerate() {
            inner.node.set_slice(j, slice_of(key(child), skip));
            inner.node.slots[j].store(child.separator.cast(), Ordering::Relaxed);
            inner.children[j + 1].store(child.node, Ordering::Relaxed);
        }
        inner.node.count.store(group.len() as u32 - 1, Ordering::Relaxed);
        inner.node.last_insert.store(group.len() as u32 - 2, Ordering::Relaxed);
        built.push(Built { separator: group[0].separator, node: inner.into_node() });
    }
    built
}

impl OrderedIndex for OlcTree {
    fn get(&self, key: &[u8]) -> Option<Record> {
        let guard = crossbeam_epoch::pin();
        loop {
            let (leaf, version) = self.find_leaf(key, &guard);
            let Some(position) = leaf.search(key, &guard) else { continue };
            let found = position.ok().map(|i| leaf.slots[i].load(Ordering::Acquire));
            if !leaf.validate(version) {
                continue;
            }
            return match found {
                None => None,
                Some(p) if p.is_null() => continue,
                Some(p) => Some(Record::clone(&lent(leaf.leaf_slot(p, &guard).1))),
            };
        }
    }

    fn insert_if_absent(&self, key: Key, record: Record) -> Result<(), Record> {
        let guard = crossbeam_epoch::pin();
        // `pending` is owned here until a leaf links it (then it lives until removed, and this
        // operation is pinned) or it is freed below; `probe` borrows its key meanwhile.
        let (pending, probe): (*mut (), &[u8]) = if self.holds_records {
            assert!(key == *record.key(), "a tree keyed by records was given another key");
            let raw = Record::into_raw(record);
            // SAFETY: see above.
            (raw.cast_mut().cast(), unsafe { Record::key_of_raw(raw) })
        } else {
            let raw = Box::into_raw(Box::new(Entry { key, record }));
            // SAFETY: see above.
            (raw.cast(), unsafe { (*raw).key.as_bytes() })
        };
        loop {
            let (leaf, version) = self.find_leaf(probe, &guard);
            let position = match leaf.search(probe, &guard) {
                Some(Ok(i)) => {
                    let p = leaf.slots[i].load(Ordering::Acquire);
                    if leaf.validate(version) && !p.is_null() {
                        let existing = Record::clone(&lent(leaf.leaf_slot(p, &guard).1));
                        // SAFETY: never linked; owned here.
                        unsafe { drop_leaf_slot(self.holds_records, pending) };
                        return Err(existing);
                    }
                    continue;
                }
                Some(Err(i)) => i,
                None => continue,
            };
            if leaf.count() == FANOUT {
                // The slow path: a full leaf splits with its parent locked, and a full parent
                // (or any full node above) splits first.
                let path = self.descend(Aim::Key(probe), &guard);
                let at = OlcTree::full_inner(&path).unwrap_or(path.depth);
                self.split_at(&path, at, position, &guard);
                continue;
            }
            if !leaf.upgrade(version) {
                continue;
            }
            leaf.insert_slot(position, probe, pending, None, &guard);
            leaf.unlock();
            self.len.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
    }

    fn remove(&self, key: &[u8], record: &Record) -> bool {
        let guard = crossbeam_epoch::pin();
        loop {
            let (leaf, version) = self.find_leaf(key, &guard);
            let position = match leaf.search(key, &guard) {
                Some(Ok(i)) => i,
                Some(Err(_)) if leaf.validate(version) => return false,
                _ => continue,
            };
            let p = leaf.slots[position].load(Ordering::Acquire);
            if p.is_null() || !leaf.validate(version) {
                continue;
            }
            if leaf.leaf_slot(p, &guard).1 != Record::as_ptr(record) {
                return false;
            }
            if !leaf.upgrade(version) {
                continue;
            }
            let removed = leaf.remove_slot(position, None);
            let emptied = leaf.count() == 0;
            leaf.unlock();
            self.retire_leaf_slot(leaf, removed, &guard);
            self.len.fetch_sub(1, Ordering::Relaxed);
            if emptied {
                self.prune(key, &guard);
            }
            return true;
        }
    }

    fn scan(&self, range: &KeyRange, direction: Direction, limit: usize, visit: &mut ScanVisitor<'_>) {
        self.scan_leaves(range, direction, limit, visit, None);
    }

    fn scan_versioned(
        &self,
        range: &KeyRange,
        direction: Direction,
        limit: usize,
        visit: &mut ScanVisitor<'_>,
        nodes: &mut Vec<NodeVersion>,
    ) -> bool {
        self.scan_leaves(range, direction, limit, visit, Some(nodes));
        true
    }

    /// A leaf changes version whenever an entry goes into it or out of it, it splits, or it is
    /// unlinked (obsolete), and is locked while that happens; an entry that lands in the covered
    /// range after the scan lands in one of the scan's leaves or in one split off it.
    unsafe fn unchanged_since(&self, nodes: &[NodeVersion]) -> bool {
        nodes.iter().all(|n| {
            // SAFETY: the caller has been pinned since the scan that read this leaf through this
            // tree, and a node unlinked since is freed only through the epoch collector.
            let leaf = unsafe { &*(n.node as *const Node) };
            leaf.validate(n.version)
        })
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// In a tree keyed by records, one descent per leaf: the run's entries that fall in the leaf
    /// the first one leads to (below its high fence, read on the way down) go in under one lock
    /// of it, until it is full; entries past a full leaf's last key start a leaf of their own
    /// ([`OlcTree::append_leaf`]), and any other entry a full leaf refuses takes the single
    /// insert's path, which splits it. A leaf's range can only grow while it is not itself
    /// changed (a sibling emptied and unlinked), so a fence read on the way down still bounds it
    /// when locked.
    fn insert_run_if_absent(&self, run: &[Loaded]) -> Vec<(usize, Record)> {
        // Checked in every build: a key below the first would be put in its leaf below the fence
        // that leaf's parent holds, out of every search's reach.
        super::check_run(run);
        if !self.holds_records {
            return super::insert_run_one_by_one(self, run);
        }
        let mut refused = Vec::new();
        let guard = crossbeam_epoch::pin();
        let mut next = 0;
        while next < run.len() {
            let first = next;
            let path = self.descend(Aim::Key(run[first].0.as_bytes()), &guard);
            let leaf = node(path.leaf, &guard);
            if !leaf.upgrade(path.leaf_version) {
                continue;
            }
            let full;
            (next, full) = self.fill_leaf(leaf, path.high, run, first, &mut refused, &guard);
            if full && let Some(end) = self.append_leaf(&path, leaf, run, next, &guard) {
                leaf.unlock();
                next = end;
                continue;
            }
            leaf.unlock();
            if (full || next == first)
                && let Some((key, record)) = run.get(next)
            {
                // The leaf has no room for the next entry, which it would take: the single
                // insert splits it (another descent would only find it full again). (Nothing
                // else stops a fill at the first entry, which the descent led to this leaf.)
                if let Err(existing) = self.insert_if_absent(key.clone(), Record::clone(record)) {
                    refused.push((next, existing));
                }
                next += 1;
            }
        }
        refused
    }

    fn load_sorted(&self, runs: Vec<Run>) {
        super::check_sorted_runs(&runs);
        if let Err(runs) = self.build_from_sorted(runs) {
            super::insert_runs(self, runs);
        }
    }
}

impl Drop for OlcTree {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no operation runs, and every node, entry and separator reachable
        // from the root is owned by the tree alone (unlinked ones went to the collector).
        unsafe fn free(ptr: *mut Node) {
            // SAFETY: the caller owns `ptr` and everything below it.
            let n = unsafe { &*ptr };
            let count = n.count();
            for slot in &n.slots[..count] {
                let p = slot.load(Ordering::Relaxed);
                // SAFETY: as above.
                unsafe {
                    if n.leaf {
                        drop_leaf_slot(n.holds_records, p);
                    } else {
                        drop(Box::from_raw(p as *mut Key));
                    }
                }
            }
            if !n.leaf {
                // SAFETY: the tree's pointer to an inner node (see [`Inner`]).
                let children = unsafe { &(*ptr.cast::<Inner>()).children };
                for child in &children[..=count] {
                    // SAFETY: as above.
                    unsafe { free(child.load(Ordering::Relaxed)) };
                }
            }
            // SAFETY: as above; nothing below it is left.
            unsafe { free_node(ptr) };
        }
        // SAFETY: see above.
        unsafe { free(self.root.load(Ordering::Relaxed)) };
    }
}

#[cfg(test)]
impl OlcTree {
    /// Checks every structural invariant (single-threaded): keys strictly increasing and inside
    /// their node's fences, sharing its prefix, slices matching keys, leaves all at one depth.
    /// Returns (leaves, entries).
    fn check_invariants(&self) -> (usize, usize) {
        fn walk(
            ptr: *const Node,
            low: Option<&[u8]>,
            high: Option<&[u8]>,
            depth: usize,
            leaf_depth: &mut Option<usize>,
            guard: &Guard,
        ) -> (usize, usize) {
            let n = node(ptr, guard);
            let count = n.count();
            assert_eq!(n.version.load(Ordering::Relaxed) & (LOCKED | OBSOLETE), 0, "node left locked or obsolete");
            let skip = n.skip.load(Ordering::Relaxed) as usize;
            let prefix = n.prefix_bytes(skip);
            let keys: Vec<&[u8]> = (0..count).map(|i| n.full_key(i, guard).expect("slot below count set")).collect();
            for (i, k) in keys.iter().enumerate() {
                assert!(low.is_none_or(|l| l <= *k), "key below its low fence");
                assert!(high.is_none_or(|h| *k < h), "key at or above its high fence");
                assert_eq!(&k[..skip], &prefix[..skip], "key does not share its node's prefix");
                assert_eq!(n.slice(i), slice_of(k, skip), "stale slice");
            }
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys out of order");
            for slot in &n.slots[count..] {
                assert!(slot.load(Ordering::Relaxed).is_null(), "slot past the count not cleared");
            }
            if n.leaf {
                assert!(leaf_depth.get_or_insert(depth) == &depth, "leaves at different depths");
                return (1, count);
            }
            let mut totals = (0, 0);
            for j in 0..=count {
                let child = children(ptr, guard)[j].load(Ordering::Relaxed);
                assert!(!child.is_null(), "missing child");
                let child_low = if j > 0 { Some(keys[j - 1]) } else { low };
                let child_high = if j < count { Some(keys[j]) } else { high };
                let (l, e) = walk(child, child_low, child_high, depth + 1, leaf_depth, guard);
                totals = (totals.0 + l, totals.1 + e);
            }
            totals
        }
        let guard = crossbeam_epoch::pin();
        let totals = walk(self.root.load(Ordering::Relaxed), None, None, 0, &mut None, &guard);
        assert_eq!(totals.1, self.len(), "len counter differs from the entries");
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::contract_tests;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    #[test]
    fn keeps_the_contract() {
        contract_tests::check_contract(&OlcTree::default());
        contract_tests::check_edges(&OlcTree::default());
        contract_tests::check_scans_after_removals(&OlcTree::default());
    }

    #[test]
    fn is_safe_with_many_threads() {
        contract_tests::check_concurrent(Arc::new(OlcTree::default()));
        contract_tests::check_concurrent_scans(Arc::new(OlcTree::default()));
    }

    #[test]
    fn scan_visitor_does_not_block_writers() {
        contract_tests::check_scan_does_not_block_writers(
            Arc::new(OlcTree::default()),
            std::time::Duration::from_secs(10),
        );
    }

    fn rec(key: &[u8]) -> Record {
        Record::present(key, crate::storage::Row::new(vec![]), crate::txn::tid::Tid::ZERO, 0)
    }

    /// A key drawn from shapes that stress prefixes and slices: short integers, TPC-C-like
    /// composite keys that share long prefixes, keys longer than the prefix and slice together,
    /// keys that are prefixes of one another, and keys of zero bytes.
    fn random_key(rng: &mut impl rand::Rng) -> Vec<u8> {
        let n: u32 = rng.random_range(0..3_000);
        match n % 6 {
            0 => n.to_be_bytes().to_vec(),
            // Runs of zero bytes: a short key's zero padding equals a longer key's bytes.
            5 => {
                let tail = if n % 4 == 1 { vec![] } else { vec![(n / 13) as u8] };
                [&[1u8][..], &vec![0u8; (n % 13) as usize], &tail].concat()
            }
            1 => [&[2u8, 0, 0, 0, 0, 0, 0, 0, 1, 2][..], &u64::from(n).to_be_bytes()].concat(),
            2 => format!("{:0>70}", n % 700).into_bytes(),
            3 => vec![7u8; (n % 60) as usize],
            _ => [&[7u8; 40][..], &n.to_be_bytes(), &[0u8; 3][..]].concat(),
        }
    }

    fn scan_keys(tree: &OlcTree, range: &KeyRange, direction: Direction, limit: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        tree.scan(range, direction, limit, &mut |k, r| {
            assert_eq!(r.key(), k, "entry holds another key's record");
            out.push(k.to_vec());
            true
        });
        out
    }

    /// The node set's promise (`OrderedIndex::scan_versioned`): an insert or a removal of a key
    /// in the part of the range a scan covered (all of it, or up to the last key visited when
    /// the limit stopped the scan) changes a node the scan recorded; with nothing changed they
    /// are all unchanged. Random ranges, directions and limits over keys of every shape, one
    /// random insert or removal after each scan, some of them emptying and unlinking leaves.
    #[test]
    fn a_change_in_a_scanned_range_changes_a_node_the_scan_recorded() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(40);
        let tree = OlcTree::default();
        let mut present: BTreeMap<Vec<u8>, Record> = BTreeMap::new();
        for _ in 0..3_000 {
            let k = random_key(&mut rng);
            let r = rec(&k);
            if tree.insert_if_absent(Key::from(&k[..]), Record::clone(&r)).is_ok() {
                present.insert(k, r);
            }
        }
        // Pinned throughout, as a transaction is from its scans to its validation.
        let _guard = crossbeam_epoch::pin();
        let (mut changed, mut kept) = (0, 0);
        for round in 0..3_000 {
            let (a, b) = (random_key(&mut rng), random_key(&mut rng));
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            let range =
                KeyRange { start: Bound::Included(Key::from(&low[..])), end: Bound::Included(Key::from(&high[..])) };
            let direction = if round % 2 == 0 { Direction::Forward } else { Direction::Backward };
            let limit = if round % 3 == 0 { 7 } else { usize::MAX };
            let (mut nodes, mut visited) = (Vec::new(), Vec::new());
            let mut visit = |k: &[u8], _: &Record| {
                visited.push(k.to_vec());
                true
            };
            assert!(tree.scan_versioned(&range, direction, limit, &mut visit, &mut nodes));
            // SAFETY: pinned since the scan.
            assert!(unsafe { tree.unchanged_since(&nodes) }, "round {round}: nothing changed yet");
            let stopped_at = (visited.len() == limit).then(|| visited[visited.len() - 1].clone());
            let covered = |k: &[u8]| {
                range.contains(k)
                    && stopped_at.as_ref().is_none_or(|last| match direction {
                        Direction::Forward => k <= last.as_slice(),
                        Direction::Backward => k >= last.as_slice(),
                    })
            };
            let k = random_key(&mut rng);
            let in_covered = covered(&k);
            match present.remove(&k) {
                Some(r) => assert!(tree.remove(&k, &r)),
                None => {
                    let r = rec(&k);
                    assert!(tree.insert_if_absent(Key::from(&k[..]), Record::clone(&r)).is_ok());
                    present.insert(k, r);
                }
            }
            // SAFETY: pinned since the scan.
            let unchanged = unsafe { tree.unchanged_since(&nodes) };
            if in_covered {
                assert!(!unchanged, "round {round}: a change in the covered range went unseen");
                changed += 1;
            } else if unchanged {
                kept += 1;
            }
        }
        assert!(changed >= 100 && kept >= 100, "both cases met: {changed} in range, {kept} kept");
    }

    /// Random inserts, removals (which empty and prune leaves), gets and scans against a
    /// `BTreeMap`, with the structure checked as it grows and shrinks.
    #[test]
    fn matches_a_btreemap() {
        matches_a_btreemap_with(OlcTree::default(), BTreeMap::new(), 80_000);
    }

    #[test]
    fn matches_a_btreemap_keyed_by_records() {
        matches_a_btreemap_with(OlcTree::keyed_by_records(), BTreeMap::new(), 80_000);
    }

    /// A tree built from sorted entries ([`OrderedIndex::load_sorted`]) of every size around a
    /// node's and a level's capacity keeps every invariant, holds exactly the entries, and then
    /// takes inserts, removals and scans as a tree built by inserts does.
    #[test]
    fn a_tree_built_from_sorted_entries_matches_a_btreemap() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let sizes = [0, 1, 2, FANOUT - 1, FANOUT, FANOUT + 1, 2 * FANOUT + 1, FANOUT * (FANOUT + 1) + 1, 2_000];
        for (i, &size) in sizes.iter().enumerate() {
            let mut model = BTreeMap::new();
            while model.len() < size {
                let key = random_key(&mut rng);
                model.insert(key.clone(), rec(&key));
            }
            let entries: Vec<Loaded> = model.iter().map(|(k, r)| (Key::from(k.clone()), Record::clone(r))).collect();
            // One run, or up to four, some of them empty, split at random places.
            let mut cuts: Vec<usize> = (0..i % 4).map(|_| rng.random_range(0..=size)).collect();
            cuts.sort_unstable();
            let mut runs = Vec::new();
            let mut rest = entries;
            for cut in cuts.iter().rev() {
                runs.push(rest.split_off(*cut));
            }
            runs.push(rest);
            runs.reverse();
            let tree = if i % 2 == 0 { OlcTree::keyed_by_records() } else { OlcTree::default() };
            tree.load_sorted(runs.into_iter().map(Run::from).collect());
            let (leaves, held) = tree.check_invariants();
            assert_eq!(held, size, "size {size}");
            let packed: usize = cuts_to_runs(&cuts, size).map(|n| n.div_ceil(FANOUT)).sum();
            assert_eq!(leaves, packed.max(1), "size {size}: leaves not packed full");
            for (key, record) in &model {
                assert!(tree.get(key).is_some_and(|r| Record::ptr_eq(&r, record)), "size {size}: {key:?}");
            }
            matches_a_btreemap_with(tree, model, 4_000);
        }
    }

    /// The sizes of the runs that `cuts` (sorted) make of `size` entries.
    fn cuts_to_runs(cuts: &[usize], size: usize) -> impl Iterator<Item = usize> {
        let ends: Vec<usize> = cuts.iter().copied().chain([size]).collect();
        let starts: Vec<usize> = [0].into_iter().chain(cuts.iter().copied()).collect();
        starts.into_iter().zip(ends).map(|(a, b)| b - a)
    }

    /// Runs large enough to get threads of their own give the same tree as one run.
    #[test]
    fn runs_built_on_threads_make_one_tree() {
        let key = |i: u64| Key::from(i.to_be_bytes().to_vec());
        let runs: Vec<Vec<Loaded>> = (0..3u64)
            .map(|r| (r * 100_000..r * 100_000 + 60_000).map(|i| (key(i), rec(key(i).as_bytes()))).collect())
            .collect();
        let tree = OlcTree::keyed_by_records();
        tree.load_sorted(runs.into_iter().map(Run::from).collect());
        assert_eq!(tree.check_invariants(), (3 * 60_000usize.div_ceil(FANOUT), 180_000));
        let keys = scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX);
        let want: Vec<Vec<u8>> =
            (0..3u64).flat_map(|r| r * 100_000..r * 100_000 + 60_000).map(|i| i.to_be_bytes().to_vec()).collect();
        assert_eq!(keys, want);
    }

    /// Runs taken in a permuted order from unsorted lists build the tree sorted lists do, on
    /// threads of their own too, and entries a build does not take are dropped with their run.
    #[test]
    fn permuted_runs_build_the_tree_sorted_runs_do() {
        let key = |i: u64| Key::from(i.to_be_bytes().to_vec());
        // Two unsorted lists per run (as two gathering threads' buckets), the keys interleaved.
        let lists = |r: u64| -> Vec<Vec<Loaded>> {
            let mut keys: Vec<u64> = (r * 100_000..r * 100_000 + 60_000).collect();
            keys.reverse();
            keys.rotate_left(7_777);
            let odd = keys.iter().filter(|&&i| i % 2 == 1).map(|&i| (key(i), rec(key(i).as_bytes()))).collect();
            let even = keys.iter().filter(|&&i| i % 2 == 0).map(|&i| (key(i), rec(key(i).as_bytes()))).collect();
            vec![odd, even]
        };
        let runs: Vec<Run> = (0..3u64)
            .map(|r| {
                let permuted = crate::storage::key::permuted_by_varying_bytes(lists(r), |(k, _)| k.as_bytes());
                Run::Permuted(permuted.unwrap_or_else(|_| panic!("integer keys vary in few bytes")))
            })
            .collect();
        let tree = OlcTree::keyed_by_records();
        tree.load_sorted(runs);
        assert_eq!(tree.check_invariants(), (3 * 60_000usize.div_ceil(FANOUT), 180_000));
        let keys = scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX);
        let want: Vec<Vec<u8>> =
            (0..3u64).flat_map(|r| r * 100_000..r * 100_000 + 60_000).map(|i| i.to_be_bytes().to_vec()).collect();
        assert_eq!(keys, want);
        // A run dropped half taken drops the rest of its entries, each once.
        let record = rec(key(1).as_bytes());
        let entries: Vec<Loaded> = (0..100u64).rev().map(|i| (key(i), Record::clone(&record))).collect();
        let mut run = crate::storage::key::permuted_by_varying_bytes(vec![entries], |(k, _)| k.as_bytes())
            .unwrap_or_else(|_| panic!("integer keys vary in few bytes"));
        let first: Vec<Loaded> = run.by_ref().take(40).collect();
        assert_eq!(first[0].0, key(0));
        assert_eq!(record.count(), 101);
        drop(first);
        drop(run);
        assert_eq!(record.count(), 1, "every entry dropped once");
    }

    /// Loading into a tree that holds entries already inserts them one by one.
    #[test]
    fn loading_sorted_entries_into_a_tree_in_use_inserts_them() {
        let tree = OlcTree::keyed_by_records();
        let key = |i: u64| i.to_be_bytes().to_vec();
        tree.insert_if_absent(Key::from(key(500)), rec(&key(500))).expect("empty tree");
        let entries = (0..1_000).filter(|&i| i != 500).map(|i| (Key::from(key(i)), rec(&key(i))));
        tree.load_sorted(vec![Run::Sorted(entries.collect())]);
        assert_eq!(tree.check_invariants().1, 1_000);
        let keys = scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX);
        assert_eq!(keys, (0..1_000).map(key).collect::<Vec<_>>());
    }

    /// Keys out of order within a run, across two leaves of a run, across two runs, or into a
    /// tree in use.
    #[test]
    fn loading_unsorted_entries_is_refused() {
        let key = |i: u64| Key::from(i.to_be_bytes().to_vec());
        let run = |keys: Vec<u64>| keys.into_iter().map(|i| (key(i), rec(key(i).as_bytes()))).collect::<Vec<_>>();
        let load = |tree: OlcTree, runs: Vec<Vec<u64>>| {
            let runs = runs.into_iter().map(|keys| Run::from(run(keys))).collect();
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tree.load_sorted(runs)))
                .expect_err("loaded a bad sequence")
        };
        let message = |e: Box<dyn std::any::Any + Send>| match e.downcast_ref::<&str>() {
            Some(s) => s.to_string(),
            None => e.downcast_ref::<String>().cloned().unwrap_or_default(),
        };
        let refused = |tree, runs| message(load(tree, runs)).contains("strictly increasing");
        assert!(refused(OlcTree::default(), vec![vec![2, 1]]));
        let across: Vec<u64> = (0..FANOUT as u64).chain([0]).collect();
        assert!(refused(OlcTree::keyed_by_records(), vec![across]));
        assert!(refused(OlcTree::default(), vec![vec![1, 5], vec![], vec![5, 7]]));
        let in_use = OlcTree::default();
        in_use.insert_if_absent(key(9), rec(key(9).as_bytes())).expect("empty");
        assert!(refused(in_use, vec![vec![5, 3]]));
    }

    /// Random operations on `tree`, which holds `model`'s entries, checked against `model`.
    fn matches_a_btreemap_with(tree: OlcTree, mut model: BTreeMap<Vec<u8>, Record>, steps: u32) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for step in 0..steps {
            let key = random_key(&mut rng);
            // Insert-heavy first, remove-heavy later, so the tree grows and then empties.
            let insert_share = if step < steps / 2 { 0.7 } else { 0.3 };
            if rng.random_bool(insert_share) {
                let record = rec(&key);
                match (tree.insert_if_absent(Key::from(key.clone()), Record::clone(&record)), model.get(&key)) {
                    (Ok(()), None) => {
                        model.insert(key, record);
                    }
                    (Err(existing), Some(expected)) => assert!(Record::ptr_eq(&existing, expected), "step {step}"),
                    (got, expected) => {
                        panic!("step {step}: insert ok {} with model {}", got.is_ok(), expected.is_some())
                    }
                }
            } else if let Some(expected) = model.remove(&key) {
                assert!(!tree.remove(&key, &rec(&key)), "step {step}: remove ignored record identity");
                assert!(tree.remove(&key, &expected), "step {step}");
            } else {
                assert!(!tree.remove(&key, &rec(&key)), "step {step}: removed an absent key");
            }
            let probe = random_key(&mut rng);
            assert_eq!(tree.get(&probe).is_some(), model.contains_key(&probe), "step {step}: get");
            if step % 500 == 0 || step == steps - 1 {
                tree.check_invariants();
                let a = random_key(&mut rng);
                let b = random_key(&mut rng);
                let bound = |k: &Vec<u8>, inclusive: bool| {
                    if inclusive {
                        Bound::Included(Key::from(k.clone()))
                    } else {
                        Bound::Excluded(Key::from(k.clone()))
                    }
                };
                let range = KeyRange {
                    start: bound(&a.clone().min(b.clone()), rng.random()),
                    end: bound(&a.max(b), rng.random()),
                };
                let want: Vec<Vec<u8>> = model.keys().filter(|k| range.contains(k)).cloned().collect();
                let limit = rng.random_range(1..400);
                let forward = scan_keys(&tree, &range, Direction::Forward, limit);
                assert_eq!(
                    forward,
                    want.iter().take(limit).cloned().collect::<Vec<_>>(),
                    "step {step}: forward {range:?}"
                );
                let backward = scan_keys(&tree, &range, Direction::Backward, limit);
                assert_eq!(
                    backward,
                    want.iter().rev().take(limit).cloned().collect::<Vec<_>>(),
                    "step {step}: backward"
                );
            }
        }
        let (_, entries) = tree.check_invariants();
        assert_eq!(entries, model.len());
        assert_eq!(
            scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX),
            model.keys().cloned().collect::<Vec<_>>()
        );
    }

    /// A queue-like table (TPC-C's `new_order`: inserts at the end, removals from the front)
    /// must not accumulate empty leaves: each emptied leaf is unlinked.
    #[test]
    fn emptied_leaves_are_unlinked() {
        let tree = OlcTree::keyed_by_records();
        let key = |i: u64| i.to_be_bytes();
        let mut live = std::collections::VecDeque::new();
        for i in 0..50_000u64 {
            let record = rec(&key(i));
            tree.insert_if_absent(Key::from(&key(i)[..]), Record::clone(&record)).unwrap();
            live.push_back((i, record));
            if live.len() > 900 {
                let (old, record) = live.pop_front().expect("non-empty");
                assert!(tree.remove(&key(old), &record));
            }
        }
        let (leaves, entries) = tree.check_invariants();
        assert_eq!(entries, 900);
        // 900 keys fill under 60 leaves even half full; without unlinking there would be ~3,000.
        assert!(leaves < 100, "{leaves} leaves hold 900 keys");
        let first = scan_keys(&tree, &KeyRange::all(), Direction::Forward, 1);
        assert_eq!(first, vec![key(50_000 - 900).to_vec()]);
    }

    /// Writers insert and remove their own keys while readers get stable keys and scan; at the
    /// end the tree holds exactly the writers' surviving keys and its structure is sound.
    #[test]
    fn concurrent_writers_and_readers_agree_with_the_model() {
        concurrent_writers_and_readers_with(OlcTree::default());
        concurrent_writers_and_readers_with(OlcTree::keyed_by_records());
    }

    fn concurrent_writers_and_readers_with(tree: OlcTree) {
        let tree = Arc::new(tree);
        let stable_key = |i: u32| [&[1u8][..], &i.to_be_bytes()].concat();
        for i in 0..3_000u32 {
            tree.insert_if_absent(Key::from(stable_key(i)), rec(&stable_key(i))).unwrap();
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..3u8)
            .map(|t| {
                let tree = Arc::clone(&tree);
                std::thread::spawn(move || {
                    use rand::{Rng, SeedableRng};
                    let mut rng = rand::rngs::StdRng::seed_from_u64(u64::from(t));
                    let mut mine = std::collections::BTreeMap::new();
                    for _ in 0..150_000 {
                        // Interleaved with the stable keys, so writers split and prune their leaves.
                        let i: u32 = rng.random_range(0..3_000);
                        let key = [&[1u8][..], &i.to_be_bytes(), &[t][..]].concat();
                        if let Some(record) = mine.remove(&key) {
                            assert!(tree.remove(&key, &record));
                        } else {
                            let record = rec(&key);
                            tree.insert_if_absent(Key::from(key.clone()), Record::clone(&record)).unwrap();
                            mine.insert(key, record);
                        }
                    }
                    mine
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (tree, stop) = (Arc::clone(&tree), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut rounds = 0u32;
                    while !stop.load(Ordering::Relaxed) || rounds == 0 {
                        for i in (r..3_000u32).step_by(7) {
                            assert!(tree.get(&stable_key(i)).is_some(), "stable key {i} lost");
                        }
                        let lo = (rounds * 131) % 2_500;
                        let range = KeyRange {
                            start: Bound::Included(Key::from(stable_key(lo))),
                            end: Bound::Excluded(Key::from(stable_key(lo + 400))),
                        };
                        for dir in [Direction::Forward, Direction::Backward] {
                            let mut keys = scan_keys(&tree, &range, dir, usize::MAX);
                            if dir == Direction::Backward {
                                keys.reverse();
                            }
                            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{dir:?} scan out of order");
                            assert_eq!(
                                keys.iter().filter(|k| k.len() == 5).count(),
                                400,
                                "{dir:?} scan missed a stable key"
                            );
                        }
                        rounds += 1;
                    }
                })
            })
            .collect();
        let mut expected: Vec<Vec<u8>> = (0..3_000u32).map(stable_key).collect();
        for w in writers {
            expected.extend(w.join().expect("writer panicked").into_keys());
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader panicked");
        }
        expected.sort();
        tree.check_invariants();
        assert_eq!(scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX), expected);
    }

    /// Two threads insert interleaved ascending keys, so they meet on the same full leaves and
    /// split them (and their parents) under each other's feet.
    #[test]
    fn concurrent_inserts_into_the_same_leaves() {
        for round in 0..20u64 {
            let tree = Arc::new(if round % 2 == 0 { OlcTree::default() } else { OlcTree::keyed_by_records() });
            let threads: Vec<_> = (0..2u64)
                .map(|t| {
                    let tree = Arc::clone(&tree);
                    std::thread::spawn(move || {
                        for i in 0..20_000u64 {
                            let key = (2 * i + t).to_be_bytes();
                            tree.insert_if_absent(Key::from(&key[..]), rec(&key)).unwrap();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().expect("inserter panicked");
            }
            let (_, entries) = tree.check_invariants();
            assert_eq!(entries, 40_000, "round {round}");
        }
    }

    /// Inserts and removes keys of its own (first byte 0xEE, which no `random_key` has) until
    /// told to stop; returns the keys it left in the tree.
    fn churn(tree: &OlcTree, stop: &std::sync::atomic::AtomicBool) -> std::collections::BTreeSet<Vec<u8>> {
        let mut left = std::collections::BTreeSet::new();
        let key = |i: u32| [&[0xEE][..], &(i % 4_000).to_be_bytes()].concat();
        let mut i = 0u32;
        while !stop.load(Ordering::Relaxed) || i < 2_000 {
            let k = key(i);
            if tree.insert_if_absent(Key::from(&k[..]), rec(&k)).is_ok() {
                left.insert(k);
            }
            // Removing every third key (and each key once it comes round again) empties leaves,
            // which unlinks them: the fences of their neighbours move.
            let old = key(i.wrapping_mul(7) / 3);
            if i.is_multiple_of(3)
                && let Some(record) = tree.get(&old)
            {
                assert!(tree.remove(&old, &record), "a key only this thread removes");
                left.remove(&old);
            }
            i += 1;
        }
        left
    }

    #[test]
    fn runs_inserted_beside_another_writer_refuse_exactly_the_present_keys() {
        use rand::{Rng, SeedableRng};
        use std::sync::atomic::AtomicBool;
        for round in 0..8u64 {
            let tree = Arc::new(if round % 2 == 0 { OlcTree::default() } else { OlcTree::keyed_by_records() });
            let mut rng = rand::rngs::StdRng::seed_from_u64(round);
            let mut model: std::collections::BTreeSet<Vec<u8>> = (0..300).map(|_| random_key(&mut rng)).collect();
            for k in &model {
                tree.insert_if_absent(Key::from(&k[..]), rec(k)).expect("a fresh key");
            }
            let stop = Arc::new(AtomicBool::new(false));
            let churner = {
                let (tree, stop) = (Arc::clone(&tree), Arc::clone(&stop));
                std::thread::spawn(move || churn(&tree, &stop))
            };
            for r in 0..60u64 {
                // Random runs (prefixes, slices, keys already present), and runs of consecutive
                // integers, as a restore's walk appends them.
                let run: std::collections::BTreeSet<Vec<u8>> = if r % 2 == 0 {
                    (0..rng.random_range(1..120)).map(|_| random_key(&mut rng)).collect()
                } else {
                    (r * 100..r * 100 + rng.random_range(1..150))
                        .map(|i| [&[9u8][..], &i.to_be_bytes()].concat())
                        .collect()
                };
                let run: Vec<Vec<u8>> = run.into_iter().collect();
                let entries: Vec<Loaded> = run.iter().map(|k| (Key::from(&k[..]), rec(k))).collect();
                let refused = tree.insert_run_if_absent(&entries);
                let expected: Vec<usize> = (0..run.len()).filter(|&i| model.contains(&run[i])).collect();
                assert_eq!(refused.iter().map(|(i, _)| *i).collect::<Vec<_>>(), expected, "round {round}, run {r}");
                for (i, existing) in &refused {
                    assert_eq!(existing.key(), &run[*i][..], "a refusal names another key's record");
                }
                model.extend(run);
            }
            stop.store(true, Ordering::Relaxed);
            let churned = churner.join().expect("the other writer panicked");
            for k in &model {
                assert!(tree.get(k).is_some_and(|r| r.key() == &k[..]), "round {round}: {k:?} lost");
            }
            let (_, entries) = tree.check_invariants();
            assert_eq!(entries, model.len() + churned.len(), "round {round}");
            assert_eq!(tree.len(), entries, "round {round}: the count");
        }
    }

    /// A restore's walk appends runs of 32 in key order: past a full leaf each run's rest starts a
    /// new leaf of its own, so the leaves end up full. Splitting the full leaf instead (a
    /// sequential split keeps 31 keys and moves one) would need 104 leaves for these 3,200 keys.
    #[test]
    fn runs_appended_in_order_fill_their_leaves() {
        let tree = OlcTree::keyed_by_records();
        let key = |i: u64| i.to_be_bytes();
        for start in (0..3_200u64).step_by(32) {
            let run: Vec<Loaded> = (start..start + 32).map(|i| (Key::from(&key(i)[..]), rec(&key(i)))).collect();
            assert!(tree.insert_run_if_absent(&run).is_empty(), "fresh keys refused at {start}");
        }
        let (leaves, entries) = tree.check_invariants();
        assert_eq!(entries, 3_200);
        assert!(leaves <= 3_200usize.div_ceil(FANOUT) + 1, "{leaves} leaves hold 3,200 appended keys");
        let scanned = scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX);
        assert_eq!(scanned, (0..3_200u64).map(|i| key(i).to_vec()).collect::<Vec<_>>());
    }

    /// Walkers append runs into their own ranges of one tree at once (a restore's shards), while
    /// another thread inserts single keys between theirs and a reader scans: every key is found,
    /// the scans see keys in order, and the structure holds.
    #[test]
    fn walkers_appending_their_ranges_at_once_lose_nothing() {
        use std::sync::atomic::AtomicBool;
        let tree = Arc::new(OlcTree::keyed_by_records());
        let key = |shard: u8, i: u32| [&[shard][..], &i.to_be_bytes()].concat();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (tree, stop) = (Arc::clone(&tree), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let keys = scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX);
                    assert!(keys.windows(2).all(|w| w[0] < w[1]), "a scan out of order");
                }
            })
        };
        let walkers: Vec<_> = (0..3u8)
            .map(|shard| {
                let tree = Arc::clone(&tree);
                std::thread::spawn(move || {
                    let mut inserted = Vec::new();
                    for start in (0..4_000u32).step_by(40) {
                        // Even numbers by runs; the odd ones below go in one at a time.
                        let run: Vec<Loaded> = (start..start + 40)
                            .filter(|i| i % 2 == 0)
                            .map(|i| (Key::from(key(shard, i)), rec(&key(shard, i))))
                            .collect();
                        assert!(tree.insert_run_if_absent(&run).is_empty(), "shard {shard}: fresh keys refused");
                        inserted.extend(run.iter().map(|(k, _)| k.as_bytes().to_vec()));
                        if start >= 400 {
                            let odd = key(shard, start - 399);
                            tree.insert_if_absent(Key::from(&odd[..]), rec(&odd)).expect("a fresh odd key");
                            inserted.push(odd);
                        }
                    }
                    inserted
                })
            })
            .collect();
        let mut expected: Vec<Vec<u8>> = Vec::new();
        for walker in walkers {
            expected.extend(walker.join().expect("a walker panicked"));
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().expect("the reader panicked");
        expected.sort();
        let (_, entries) = tree.check_invariants();
        assert_eq!(entries, expected.len());
        assert_eq!(scan_keys(&tree, &KeyRange::all(), Direction::Forward, usize::MAX), expected);
    }

    #[test]
    #[should_panic(expected = "a run's keys are not increasing")]
    fn a_run_out_of_order_is_refused() {
        let run: Vec<Loaded> = [b"b", b"a"].iter().map(|k| (Key::from(&k[..]), rec(&k[..]))).collect();
        OlcTree::keyed_by_records().insert_run_if_absent(&run);
    }

    #[test]
    #[should_panic(expected = "a tree keyed by records was given another key")]
    fn a_tree_keyed_by_records_refuses_another_key() {
        let _ = OlcTree::keyed_by_records().insert_if_absent(Key::from(&b"a"[..]), rec(b"b"));
    }
}
