//! A simulated disk for tests: an in-memory [`FileSystem`] that breaks every promise the real disk
//! does not make (see the module docs of [`crate::io`] and `docs/io.md`).
//!
//! # The model
//!
//! - **Files** are inodes with two images: `current` (what reads see, like the page cache) and
//!   `durable` (what survives power loss), plus the list of writes and truncations made since
//!   the last [`File::sync_data`], in issue order. `sync_data` applies the pending list to the
//!   durable image. A *failed* `sync_data` drops the pending list without applying it: those
//!   writes stay visible in `current` but can never become durable (fsyncgate: Linux marks the
//!   pages clean after a failed writeback).
//! - **Names** (files and directories) live in two maps, current and durable, plus the list of
//!   pending directory operations (link, unlink, rename). [`FileSystem::sync_dir`] of a directory
//!   applies, in order, the pending operations that touch a name in it. `create_dir_all` is
//!   durable on return, as the real one is (it syncs each new directory's parent).
//! - **Power loss** ([`SimDisk::crash`]) starts from the durable images and, with an RNG seeded by
//!   the caller (so a seed reproduces the disk exactly), walks the pending operations in issue
//!   order. A pending write is applied whole, dropped, or torn: each 512-byte sector it covers
//!   gets the new bytes, keeps the old ones (zeros past the old end of file), or gets garbage. A
//!   pending truncation is applied or not. A pending directory operation is applied or not,
//!   except that once one is dropped, later operations on the same names are dropped too (a
//!   journaling file system commits the operations on one name in order; across names it may
//!   reorder). A name whose directory did not survive is gone.
//! - **Faults**: [`SimDisk::inject`] makes the n-th operation (of one [`OpKind`], or of any kind)
//!   fail with EIO or ENOSPC, once or from then on ("sticky"); [`SimDisk::inject_on_path`] counts
//!   only operations on matching paths. A failed operation has no effect.
//!   [`SimDisk::freeze_after`] makes every operation after the k-th fail: the machine has lost
//!   power at that point, and [`SimDisk::crash`] then gives the disk as recovery finds it.
//! - **Counting**: every call of a trait method is one operation ([`SimDisk::ops`]), so a test can
//!   run once unharmed to learn how many I/Os a history makes, then crash at each of them.
//!
//! Paths must be absolute; the root `/` always exists. Renaming or removing a directory is not
//! supported (nothing in Lazarus does it).

use super::{DIRECT_ALIGN_BYTES, File, FileSystem, OpenMode, SharedFile};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The unit a write may be torn at.
pub const SECTOR_SIZE_BYTES: u64 = 512;
/// The largest simulated file, in bytes (writes past it fail with ENOSPC).
pub const FILE_SIZE_MAX_BYTES: u64 = 1 << 30;

const EIO: i32 = 5;
const ENOSPC: i32 = 28;

/// The kinds of operation, for counting and for aiming faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// [`FileSystem::open`].
    Open,
    /// [`File::append`].
    Append,
    /// [`File::write_at`].
    WriteAt,
    /// [`File::read_at`].
    Read,
    /// [`File::len_bytes`].
    Length,
    /// [`File::truncate`].
    Truncate,
    /// [`File::sync_data`].
    SyncData,
    /// [`FileSystem::create_dir_all`].
    CreateDir,
    /// [`FileSystem::rename`].
    Rename,
    /// [`FileSystem::remove`].
    Remove,
    /// [`FileSystem::list`].
    List,
    /// [`FileSystem::sync_dir`].
    SyncDir,
    /// [`FileSystem::exists`].
    Exists,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 13] = [
        OpKind::Open,
        OpKind::Append,
        OpKind::WriteAt,
        OpKind::Read,
        OpKind::Length,
        OpKind::Truncate,
        OpKind::SyncData,
        OpKind::CreateDir,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::List,
        OpKind::SyncDir,
        OpKind::Exists,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// The error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// EIO: a media or transport error.
    Eio,
    /// ENOSPC: the disk is full.
    Enospc,
}

/// An injected fault: the `nth` (1-based) operation of `kind` (any kind when `None`) fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The kind of operation counted, or every operation.
    pub kind: Option<OpKind>,
    /// Which operation of that kind fails first (1-based).
    pub nth: u64,
    /// The error returned.
    pub error: FaultError,
    /// Whether every later operation of that kind fails too.
    pub sticky: bool,
}

/// A fault and the matching operations seen so far.
#[derive(Clone, Debug)]
struct ArmedFault {
    fault: Fault,
    /// Only operations on a path containing this count (not containing it, with `excluded`).
    path: Option<String>,
    excluded: bool,
    seen: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir,
}

#[derive(Clone, Debug)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Clone, Debug, Default)]
struct Inode {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

#[derive(Clone, Debug)]
enum DirOp {
    Link { path: PathBuf, node: Node },
    Unlink { path: PathBuf, node: Node },
    Rename { from: PathBuf, to: PathBuf, node: Node },
}

impl DirOp {
    fn paths(&self) -> Vec<&Path> {
        match self {
            DirOp::Link { path, .. } | DirOp::Unlink { path, .. } => vec![path],
            DirOp::Rename { from, to, .. } => vec![from, to],
        }
    }

    fn in_dir(&self, dir: &Path) -> bool {
        self.paths().iter().any(|p| p.parent() == Some(dir))
    }

    fn apply(&self, names: &mut BTreeMap<PathBuf, Node>) {
        match self {
            DirOp::Link { path, node } => {
                names.insert(path.clone(), *node);
            }
            DirOp::Unlink { path, node } => {
                if names.get(path) == Some(node) {
                    names.remove(path);
                }
            }
            DirOp::Rename { from, to, node } => {
                if names.get(from) == Some(node) {
                    names.remove(from);
                }
                names.insert(to.clone(), *node);
            }
        }
    }
}

#[derive(Clone, Debug)]
struct State {
    inodes: BTreeMap<u64, Inode>,
    next_inode: u64,
    names: BTreeMap<PathBuf, Node>,
    durable_names: BTreeMap<PathBuf, Node>,
    pending_dir_ops: Vec<DirOp>,
    ops: u64,
    ops_by_kind: [u64; OpKind::ALL.len()],
    freeze_after: Option<u64>,
    refused: u64,
    faults: Vec<ArmedFault>,
    faults_fired: u64,
    /// Inodes a [`SharedFile`] handle holds locked.
    locked_inodes: BTreeSet<u64>,
}

impl State {
    fn empty() -> State {
        let root: BTreeMap<PathBuf, Node> = [(PathBuf::from("/"), Node::Dir)].into();
        State {
            inodes: BTreeMap::new(),
            next_inode: 1,
            names: root.clone(),
            durable_names: root,
            pending_dir_ops: Vec::new(),
            ops: 0,
            ops_by_kind: [0; OpKind::ALL.len()],
            freeze_after: None,
            refused: 0,
            faults: Vec::new(),
            faults_fired: 0,
            locked_inodes: BTreeSet::new(),
        }
    }

    /// Counts one operation and decides whether it fails (frozen disk or injected fault).
    fn begin(&mut self, kind: OpKind, path: &Path) -> io::Result<()> {
        self.ops += 1;
        self.ops_by_kind[kind.index()] += 1;
        if self.freeze_after.is_some_and(|k| self.ops > k) {
            self.refused += 1;
            return Err(sim_error(EIO, path, "the disk is frozen (simulated power loss)"));
        }
        let mut firing = None;
        for armed in &mut self.faults {
            let kind_matches = armed.fault.kind.is_none_or(|k| k == kind);
            let path_matches =
                armed.path.as_ref().is_none_or(|part| path.to_string_lossy().contains(part.as_str()) != armed.excluded);
            if !(kind_matches && path_matches) {
                continue;
            }
            armed.seen += 1;
            let fault = armed.fault;
            if firing.is_none() && (armed.seen == fault.nth || (fault.sticky && armed.seen > fault.nth)) {
                firing = Some(fault.error);
            }
        }
        let Some(error) = firing else {
            return Ok(());
        };
        self.faults_fired += 1;
        let errno = match error {
            FaultError::Eio => EIO,
            FaultError::Enospc => ENOSPC,
        };
        Err(sim_error(errno, path, "injected fault"))
    }

    fn file(&self, path: &Path) -> io::Result<u64> {
        match self.names.get(path) {
            Some(Node::File(ino)) => Ok(*ino),
            Some(Node::Dir) => Err(io::Error::other(format!("{}: is a directory", path.display()))),
            None => Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file", path.display()))),
        }
    }

    fn check_parent(&self, path: &Path) -> io::Result<()> {
        let parent = path.parent().ok_or_else(|| invalid(path, "no parent directory"))?;
        match self.names.get(parent) {
            Some(Node::Dir) => Ok(()),
            _ => Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: no such directory", parent.display()))),
        }
    }

    fn create_file(&mut self, path: &Path) -> io::Result<u64> {
        self.check_parent(path)?;
        let ino = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(ino, Inode::default());
        self.names.insert(path.to_path_buf(), Node::File(ino));
        self.pending_dir_ops.push(DirOp::Link { path: path.to_path_buf(), node: Node::File(ino) });
        Ok(ino)
    }

    fn inode(&mut self, ino: u64) -> &mut Inode {
        self.inodes.entry(ino).or_default()
    }

    fn sync_dir(&mut self, dir: &Path) {
        let (now, later): (Vec<DirOp>, Vec<DirOp>) =
            std::mem::take(&mut self.pending_dir_ops).into_iter().partition(|op| op.in_dir(dir));
        for op in &now {
            op.apply(&mut self.durable_names);
        }
        self.pending_dir_ops = later;
    }

    /// The disk after power loss: durable images plus a seeded choice for each pending operation.
    fn crashed(&self, seed: u64) -> State {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut names = self.durable_names.clone();
        let mut blocked: BTreeSet<PathBuf> = BTreeSet::new();
        for op in &self.pending_dir_ops {
            let paths = op.paths();
            if paths.iter().any(|p| blocked.contains(*p)) || !rng.random_bool(0.5) {
                blocked.extend(paths.iter().map(|p| p.to_path_buf()));
                continue;
            }
            op.apply(&mut names);
        }
        let names = prune_orphans(names);
        let mut inodes = BTreeMap::new();
        for (ino, inode) in &self.inodes {
            let mut image = inode.durable.clone();
            for pending in &inode.pending {
                apply_after_crash(&mut image, pending, &mut rng);
            }
            inodes.insert(*ino, Inode { current: image.clone(), durable: image, pending: Vec::new() });
        }
        let live: BTreeSet<u64> =
            names.values().filter_map(|n| if let Node::File(i) = n { Some(*i) } else { None }).collect();
        inodes.retain(|ino, _| live.contains(ino));
        State { inodes, next_inode: self.next_inode, names: names.clone(), durable_names: names, ..State::empty() }
    }
}

/// Keeps only names whose parent directory is itself kept (a parent sorts before its children).
fn prune_orphans(names: BTreeMap<PathBuf, Node>) -> BTreeMap<PathBuf, Node> {
    let mut kept: BTreeMap<PathBuf, Node> = BTreeMap::new();
    for (path, node) in names {
        let parent_kept = match path.parent() {
            None => true,
            Some(parent) => kept.get(parent) == Some(&Node::Dir),
        };
        if parent_kept {
            kept.insert(path, node);
        }
    }
    kept
}

fn apply_whole(image: &mut Vec<u8>, pending: &Pending) {
    match pending {
        Pending::Write { offset, data } => write_into(image, *offset, data),
        Pending::SetLen(len) => image.resize(*len as usize, 0),
    }
}

fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let (start, end) = (offset as usize, offset as usize + data.len());
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

fn apply_after_crash(image: &mut Vec<u8>, pending: &Pending, rng: &mut StdRng) {
    match pending {
        Pending::SetLen(_) => {
            if rng.random_bool(0.5) {
                apply_whole(image, pending);
            }
        }
        Pending::Write { offset, data } => match rng.random_range(0..3u32) {
            0 => apply_whole(image, pending),
            1 => {}
            _ => tear(image, *offset, data, rng),
        },
    }
}

/// Each sector the write covers gets the new bytes, keeps the old ones, or gets garbage.
fn tear(image: &mut Vec<u8>, offset: u64, data: &[u8], rng: &mut StdRng) {
    let end = offset + data.len() as u64;
    let mut at = offset;
    while at < end {
        let sector_end = ((at / SECTOR_SIZE_BYTES + 1) * SECTOR_SIZE_BYTES).min(end);
        let mut piece = data[(at - offset) as usize..(sector_end - offset) as usize].to_vec();
        match rng.random_range(0..4u32) {
            0 | 1 => write_into(image, at, &piece),
            2 => {}
            _ => {
                rng.fill(&mut piece[..]);
                write_into(image, at, &piece);
            }
        }
        at = sector_end;
    }
}

fn sim_error(errno: i32, path: &Path, why: &str) -> io::Error {
    let os = io::Error::from_raw_os_error(errno);
    io::Error::new(os.kind(), format!("{}: {os} ({why})", path.display()))
}

/// Whether a write at `offset` of `data` is one `O_DIRECT` accepts: offset, length and address
/// all multiples of [`DIRECT_ALIGN_BYTES`].
fn direct_aligned(offset: u64, data: &[u8]) -> bool {
    let align = DIRECT_ALIGN_BYTES;
    offset.is_multiple_of(align as u64)
        && data.len().is_multiple_of(align)
        && data.as_ptr().addr().is_multiple_of(align)
}

fn invalid(path: &Path, why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{}: {why}", path.display()))
}

/// The simulated disk. Clones share the same disk.
#[derive(Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.lock();
        write!(
            f,
            "SimDisk {{ files: {}, ops: {}, pending dir ops: {} }}",
            s.inodes.len(),
            s.ops,
            s.pending_dir_ops.len()
        )
    }
}

impl Default for SimDisk {
    fn default() -> SimDisk {
        SimDisk::new()
    }
}

impl SimDisk {
    /// An empty disk holding only `/`.
    pub fn new() -> SimDisk {
        SimDisk::from_state(State::empty())
    }

    fn from_state(state: State) -> SimDisk {
        SimDisk { state: Arc::new(Mutex::new(state)) }
    }

    /// The disk as recovery finds it after power loss now: an independent disk (no faults, no
    /// pending operations, counters at 0). The same seed on the same disk gives the same image.
    pub fn crash(&self, seed: u64) -> SimDisk {
        SimDisk::from_state(self.state.lock().crashed(seed))
    }

    /// An independent copy of the disk as it is, pending operations included (faults and
    /// counters are not copied).
    pub fn fork(&self) -> SimDisk {
        let s = self.state.lock();
        let copy = State {
            inodes: s.inodes.clone(),
            next_inode: s.next_inode,
            names: s.names.clone(),
            durable_names: s.durable_names.clone(),
            pending_dir_ops: s.pending_dir_ops.clone(),
            ..State::empty()
        };
        SimDisk::from_state(copy)
    }

    /// Operations made so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Operations of one kind made so far.
    pub fn ops_of(&self, kind: OpKind) -> u64 {
        self.state.lock().ops_by_kind[kind.index()]
    }

    /// Every operation after the `k`-th (counted from the disk's creation) fails with EIO and has
    /// no effect, as if power were lost after the `k`-th; take [`SimDisk::crash`] afterwards.
    pub fn freeze_after(&self, k: u64) {
        self.state.lock().freeze_after = Some(k);
    }

    /// Operations refused because the disk was frozen.
    pub fn refused_ops(&self) -> u64 {
        self.state.lock().refused
    }

    /// Adds a fault; operations are counted from the disk's creation.
    pub fn inject(&self, fault: Fault) {
        assert!(fault.nth >= 1, "operations are counted from 1");
        let mut s = self.state.lock();
        let seen = fault.kind.map_or(s.ops, |k| s.ops_by_kind[k.index()]);
        s.faults.push(ArmedFault { fault, path: None, excluded: false, seen });
    }

    /// Adds a fault that counts only operations on paths containing `path_part`, from now on.
    pub fn inject_on_path(&self, path_part: &str, fault: Fault) {
        assert!(fault.nth >= 1, "operations are counted from 1");
        self.state.lock().faults.push(ArmedFault {
            fault,
            path: Some(path_part.to_string()),
            excluded: false,
            seen: 0,
        });
    }

    /// Adds a fault that counts only operations on paths *not* containing `path_part`, from now
    /// on.
    pub fn inject_off_path(&self, path_part: &str, fault: Fault) {
        assert!(fault.nth >= 1, "operations are counted from 1");
        self.state.lock().faults.push(ArmedFault { fault, path: Some(path_part.to_string()), excluded: true, seen: 0 });
    }

    /// How many operations failed because of an injected fault.
    pub fn faults_fired(&self) -> u64 {
        self.state.lock().faults_fired
    }

    /// Writes not yet synced, over all files.
    pub fn pending_writes(&self) -> usize {
        self.state.lock().inodes.values().map(|i| i.pending.len()).sum()
    }

    /// Directory operations not yet synced.
    pub fn pending_dir_ops(&self) -> usize {
        self.state.lock().pending_dir_ops.len()
    }

    /// Every file's path, sorted (not counted as an operation).
    pub fn file_paths(&self) -> Vec<PathBuf> {
        let s = self.state.lock();
        s.names.iter().filter(|(_, n)| matches!(n, Node::File(_))).map(|(p, _)| p.clone()).collect()
    }

    /// A file's current contents (not counted as an operation).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.state.lock();
        match s.names.get(path) {
            Some(Node::File(ino)) => s.inodes.get(ino).map(|i| i.current.clone()),
            _ => None,
        }
    }

    /// Replaces an existing file's contents, durably: damage to the medium, for damage sweeps
    /// (not counted as an operation). Returns whether the file exists.
    pub fn replace_contents(&self, path: &Path, bytes: &[u8]) -> bool {
        let mut s = self.state.lock();
        let Some(Node::File(ino)) = s.names.get(path).copied() else {
            return false;
        };
        let inode = s.inode(ino);
        inode.current = bytes.to_vec();
        inode.durable = bytes.to_vec();
        inode.pending.clear();
        true
    }
}

struct SimFile {
    state: Arc<Mutex<State>>,
    ino: u64,
    path: PathBuf,
    writable: bool,
    /// Whether this handle holds the inode's lock ([`SharedFile::try_lock`]).
    locked: std::sync::atomic::AtomicBool,
    /// Opened [`OpenMode::WriteDirect`]: writes must be aligned, as `O_DIRECT` requires.
    direct: bool,
}

// Every method takes `&self` (the disk's state has its own mutex), so one handle serves both
// `File` and `SharedFile`.
impl SimFile {
    fn write(&self, kind: OpKind, offset: Option<u64>, data: &[u8]) -> io::Result<()> {
        let mut s = self.state.lock();
        s.begin(kind, &self.path)?;
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: opened read-only", self.path.display()),
            ));
        }
        let inode = s.inode(self.ino);
        let offset = offset.unwrap_or(inode.current.len() as u64);
        if self.direct && !direct_aligned(offset, data) {
            let reason = format!(
                "a direct write must be aligned to {DIRECT_ALIGN_BYTES} bytes (offset {offset}, {} bytes)",
                data.len()
            );
            return Err(invalid(&self.path, &reason));
        }
        if offset.saturating_add(data.len() as u64) > FILE_SIZE_MAX_BYTES {
            return Err(sim_error(ENOSPC, &self.path, "the simulated file size limit"));
        }
        write_into(&mut inode.current, offset, data);
        inode.pending.push(Pending::Write { offset, data: data.to_vec() });
        Ok(())
    }

    fn read(&self, offset: u64, buf: &mut [u8], exact: bool) -> io::Result<usize> {
        let mut s = self.state.lock();
        s.begin(OpKind::Read, &self.path)?;
        let current = &s.inode(self.ino).current;
        let start = (offset as usize).min(current.len());
        let n = buf.len().min(current.len() - start);
        if exact && n < buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: read of {} bytes at {offset} past the end ({})",
                    self.path.display(),
                    buf.len(),
                    current.len()
                ),
            ));
        }
        buf[..n].copy_from_slice(&current[start..start + n]);
        Ok(n)
    }

    fn len(&self) -> io::Result<u64> {
        let mut s = self.state.lock();
        s.begin(OpKind::Length, &self.path)?;
        Ok(s.inode(self.ino).current.len() as u64)
    }

    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        let mut s = self.state.lock();
        s.begin(OpKind::Truncate, &self.path)?;
        if !self.writable || len_bytes > FILE_SIZE_MAX_BYTES {
            return Err(invalid(&self.path, "truncate of a read-only file or past the size limit"));
        }
        let inode = s.inode(self.ino);
        inode.current.resize(len_bytes as usize, 0);
        inode.pending.push(Pending::SetLen(len_bytes));
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        let result = s.begin(OpKind::SyncData, &self.path);
        let inode = s.inode(self.ino);
        let pending = std::mem::take(&mut inode.pending);
        // A failed sync loses the pending writes for good (fsyncgate); a frozen disk keeps them
        // pending, for the crash to decide.
        if result.is_ok() {
            pending.iter().for_each(|p| apply_whole(&mut inode.durable, p));
        } else if s.freeze_after.is_some_and(|k| s.ops > k) {
            s.inode(self.ino).pending = pending;
        }
        result
    }
}

impl File for SimFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.write(OpKind::Append, None, data)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write(OpKind::WriteAt, Some(offset), data)
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.read(offset, buf, false)
    }

    fn len_bytes(&self) -> io::Result<u64> {
        self.len()
    }

    fn truncate(&mut self, len_bytes: u64) -> io::Result<()> {
        self.set_len(len_bytes)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.sync()
    }
}

/// Locks are not operations on the medium: they are neither counted nor refused by faults, and
/// a crash releases them all (the process that held them is gone).
impl SharedFile for SimFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read(offset, buf, true).map(|_| ())
    }

    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write(OpKind::WriteAt, Some(offset), data)
    }

    fn len_bytes(&self) -> io::Result<u64> {
        self.len()
    }

    fn set_len(&self, len_bytes: u64) -> io::Result<()> {
        SimFile::set_len(self, len_bytes)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn try_lock(&self) -> io::Result<bool> {
        use std::sync::atomic::Ordering;
        if self.locked.load(Ordering::SeqCst) {
            return Ok(true);
        }
        let mut s = self.state.lock();
        if !s.locked_inodes.insert(self.ino) {
            return Ok(false);
        }
        self.locked.store(true, Ordering::SeqCst);
        Ok(true)
    }

    fn unlock(&self) -> io::Result<()> {
        if self.locked.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.state.lock().locked_inodes.remove(&self.ino);
        }
        Ok(())
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let _ = SharedFile::unlock(self);
    }
}

impl SimDisk {
    fn handle(&self, ino: u64, path: &Path, writable: bool) -> SimFile {
        let locked = std::sync::atomic::AtomicBool::new(false);
        SimFile { state: Arc::clone(&self.state), ino, path: path.to_path_buf(), writable, locked, direct: false }
    }
}

impl FileSystem for SimDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>> {
        let mut s = self.state.lock();
        s.begin(OpKind::Open, path)?;
        if !path.is_absolute() {
            return Err(invalid(path, "simulated paths must be absolute"));
        }
        let ino = match (mode, s.names.get(path).copied()) {
            (OpenMode::CreateNew, Some(_)) => {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{}: exists", path.display())));
            }
            (OpenMode::CreateNew | OpenMode::Append, None) => s.create_file(path)?,
            _ => s.file(path)?,
        };
        let writable = mode != OpenMode::Read;
        let mut handle = self.handle(ino, path, writable);
        handle.direct = mode == OpenMode::WriteDirect;
        Ok(Box::new(handle))
    }

    fn open_shared(&self, path: &Path, create: bool) -> io::Result<Arc<dyn SharedFile>> {
        let mut s = self.state.lock();
        s.begin(OpKind::Open, path)?;
        if !path.is_absolute() {
            return Err(invalid(path, "simulated paths must be absolute"));
        }
        let ino = match s.names.get(path).copied() {
            None if create => s.create_file(path)?,
            _ => s.file(path)?,
        };
        drop(s);
        Ok(Arc::new(self.handle(ino, path, true)))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        s.begin(OpKind::CreateDir, path)?;
        if !path.is_absolute() {
            return Err(invalid(path, "simulated paths must be absolute"));
        }
        let mut missing: Vec<&Path> = path.ancestors().take_while(|a| !s.names.contains_key(*a)).collect();
        missing.reverse();
        if let Some(first) = missing.first() {
            s.check_parent(first)?;
        } else if s.names.get(path) != Some(&Node::Dir) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{}: a file", path.display())));
        }
        // Durable on return: the real one syncs each new directory's parent.
        for dir in missing {
            s.names.insert(dir.to_path_buf(), Node::Dir);
            s.durable_names.insert(dir.to_path_buf(), Node::Dir);
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        s.begin(OpKind::Rename, from)?;
        let ino = s.file(from)?;
        s.check_parent(to)?;
        if s.names.get(to) == Some(&Node::Dir) {
            return Err(invalid(to, "cannot rename over a directory"));
        }
        s.names.remove(from);
        s.names.insert(to.to_path_buf(), Node::File(ino));
        let op = DirOp::Rename { from: from.to_path_buf(), to: to.to_path_buf(), node: Node::File(ino) };
        s.pending_dir_ops.push(op);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        s.begin(OpKind::Remove, path)?;
        let ino = s.file(path)?;
        s.names.remove(path);
        s.pending_dir_ops.push(DirOp::Unlink { path: path.to_path_buf(), node: Node::File(ino) });
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut s = self.state.lock();
        s.begin(OpKind::List, dir)?;
        if s.names.get(dir) != Some(&Node::Dir) {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: no such directory", dir.display())));
        }
        let names = s.names.keys().filter(|p| p.parent() == Some(dir)).filter_map(|p| p.file_name()).map(PathBuf::from);
        Ok(names.collect())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        s.begin(OpKind::SyncDir, dir)?;
        if s.names.get(dir) != Some(&Node::Dir) {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: no such directory", dir.display())));
        }
        s.sync_dir(dir);
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let mut s = self.state.lock();
        s.begin(OpKind::Exists, path)?;
        Ok(s.names.contains_key(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEEDS: u64 = 200;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn disk_with_dir() -> SimDisk {
        let disk = SimDisk::new();
        disk.create_dir_all(&p("/d")).unwrap();
        disk
    }

    #[test]
    fn a_synced_write_survives_every_seed() {
        let disk = disk_with_dir();
        let mut f = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        f.append(&[7u8; 1500]).unwrap();
        f.sync_data().unwrap();
        disk.sync_dir(&p("/d")).unwrap();
        f.append(&[9u8; 700]).unwrap(); // unsynced, may go any way
        for seed in 0..SEEDS {
            let after = disk.crash(seed).contents(&p("/d/a")).expect("a synced file survives");
            assert_eq!(&after[..1500], &[7u8; 1500][..], "seed {seed}");
        }
    }

    #[test]
    fn an_unsynced_write_can_be_lost_torn_or_kept_and_the_seed_reproduces_it() {
        let disk = disk_with_dir();
        let mut f = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        f.sync_data().unwrap();
        disk.sync_dir(&p("/d")).unwrap();
        let data: Vec<u8> = (0..2048u32).map(|i| (i % 251) as u8 + 1).collect();
        f.append(&data).unwrap();
        assert_eq!(disk.pending_writes(), 1);
        let (mut whole, mut lost, mut torn) = (0, 0, 0);
        for seed in 0..SEEDS {
            let after = disk.crash(seed).contents(&p("/d/a")).unwrap();
            assert_eq!(disk.crash(seed).contents(&p("/d/a")).unwrap(), after, "seed {seed} must reproduce");
            if after == data {
                whole += 1;
            } else if after.is_empty() {
                lost += 1;
            } else {
                torn += 1;
                assert_eq!(after.len() % SECTOR_SIZE_BYTES as usize, 0, "torn at sector granularity");
            }
        }
        assert!(whole > 0 && lost > 0 && torn > 0, "whole {whole}, lost {lost}, torn {torn}");
    }

    #[test]
    fn a_torn_write_has_garbage_sectors_in_some_seed() {
        let disk = disk_with_dir();
        let mut f = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        f.sync_data().unwrap();
        disk.sync_dir(&p("/d")).unwrap();
        let data = vec![0xAAu8; 4096];
        f.append(&data).unwrap();
        let garbage = (0..SEEDS).any(|seed| {
            let after = disk.crash(seed).contents(&p("/d/a")).unwrap();
            after.chunks(512).any(|s| s.iter().any(|&b| b != 0xAA && b != 0))
        });
        assert!(garbage, "some seed must put garbage in a torn sector");
    }

    #[test]
    fn a_new_file_or_rename_without_sync_dir_can_be_lost() {
        let disk = disk_with_dir();
        let mut f = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        f.append(b"x").unwrap();
        f.sync_data().unwrap();
        let lost = (0..SEEDS).filter(|&s| disk.crash(s).contents(&p("/d/a")).is_none()).count();
        assert!(lost > 0 && lost < SEEDS as usize, "creation lost in {lost} of {SEEDS}");
        disk.sync_dir(&p("/d")).unwrap();
        assert!((0..SEEDS).all(|s| disk.crash(s).contents(&p("/d/a")).is_some()));
        disk.rename(&p("/d/a"), &p("/d/b")).unwrap();
        let (mut old, mut new) = (0, 0);
        for seed in 0..SEEDS {
            let image = disk.crash(seed);
            match (image.contents(&p("/d/a")), image.contents(&p("/d/b"))) {
                (Some(_), None) => old += 1,
                (None, Some(_)) => new += 1,
                other => panic!("seed {seed}: a rename must be atomic, got {other:?}"),
            }
        }
        assert!(old > 0 && new > 0, "old {old}, new {new}");
        disk.sync_dir(&p("/d")).unwrap();
        assert!((0..SEEDS).all(|s| disk.crash(s).contents(&p("/d/b")) == Some(b"x".to_vec())));
    }

    #[test]
    fn write_atomic_gives_old_or_new_contents_at_every_crash_point() {
        let base = disk_with_dir();
        base.write_atomic(&p("/d/m"), b"old").unwrap();
        let probe = base.fork();
        probe.write_atomic(&p("/d/m"), b"new").unwrap();
        let total = probe.ops();
        for k in 0..=total {
            let disk = base.fork();
            disk.freeze_after(k);
            let done = disk.write_atomic(&p("/d/m"), b"new").is_ok();
            for seed in 0..20 {
                let got = disk.crash(seed).contents(&p("/d/m"));
                assert!(got == Some(b"old".to_vec()) || got == Some(b"new".to_vec()), "k {k} seed {seed}: {got:?}");
                if done {
                    assert_eq!(got, Some(b"new".to_vec()), "a completed write_atomic is durable");
                }
            }
        }
    }

    #[test]
    fn faults_fire_once_or_sticky_and_count_by_kind() {
        let disk = disk_with_dir();
        disk.inject(Fault { kind: Some(OpKind::SyncData), nth: 2, error: FaultError::Enospc, sticky: false });
        let mut f = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        f.append(b"one").unwrap();
        f.sync_data().unwrap();
        f.append(b"two").unwrap();
        let err = f.sync_data().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert!(err.to_string().contains("/d/a") && err.to_string().contains("No space left"), "{err}");
        f.sync_data().unwrap(); // once: the third succeeds, but "two" was dropped by the failure
        disk.sync_dir(&p("/d")).unwrap();
        assert_eq!(disk.faults_fired(), 1);
        assert_eq!(disk.contents(&p("/d/a")).unwrap(), b"onetwo", "reads still see the write");
        for seed in 0..SEEDS {
            assert_eq!(
                disk.crash(seed).contents(&p("/d/a")).unwrap(),
                b"one",
                "a failed sync loses its writes for good"
            );
        }
        disk.inject(Fault { kind: None, nth: disk.ops() + 1, error: FaultError::Eio, sticky: true });
        assert!(disk.exists(&p("/d/a")).is_err());
        assert!(disk.list(&p("/d")).is_err());
        assert_eq!(disk.faults_fired(), 3);
        assert_eq!(disk.ops_of(OpKind::SyncData), 3);
    }

    #[test]
    fn a_fault_aimed_at_a_path_counts_only_that_path() {
        let disk = disk_with_dir();
        disk.inject_on_path(
            "b.tmp",
            Fault { kind: Some(OpKind::SyncData), nth: 2, error: FaultError::Eio, sticky: false },
        );
        let mut a = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        let mut b = disk.open(&p("/d/b.tmp"), OpenMode::CreateNew).unwrap();
        for _ in 0..3 {
            a.sync_data().unwrap();
        }
        b.sync_data().unwrap();
        a.sync_data().unwrap();
        assert!(b.sync_data().unwrap_err().to_string().contains("/d/b.tmp"));
        b.sync_data().unwrap();
        assert_eq!(disk.faults_fired(), 1);
    }

    #[test]
    fn a_frozen_disk_refuses_everything_after_the_kth_op() {
        let disk = disk_with_dir();
        let mut f = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        disk.freeze_after(disk.ops() + 1);
        f.append(b"kept pending").unwrap();
        assert!(f.sync_data().is_err());
        assert!(disk.sync_dir(&p("/d")).is_err());
        assert_eq!(disk.refused_ops(), 2);
        assert_eq!(disk.pending_writes(), 1, "a refused sync leaves the writes to the crash");
        assert_eq!(disk.contents(&p("/d/a")).unwrap(), b"kept pending");
    }

    #[test]
    fn an_unsynced_truncation_may_be_lost_and_created_directories_are_durable() {
        let disk = disk_with_dir();
        let mut f = disk.open(&p("/d/a"), OpenMode::CreateNew).unwrap();
        f.append(&[1u8; 100]).unwrap();
        f.sync_data().unwrap();
        disk.sync_dir(&p("/d")).unwrap();
        f.truncate(10).unwrap();
        let lens: BTreeSet<usize> = (0..SEEDS).map(|s| disk.crash(s).contents(&p("/d/a")).unwrap().len()).collect();
        assert_eq!(lens, [10, 100].into());
        disk.create_dir_all(&p("/d/e/f")).unwrap();
        disk.open(&p("/d/e/f/g"), OpenMode::CreateNew).unwrap().sync_data().unwrap();
        disk.sync_dir(&p("/d/e/f")).unwrap();
        assert!((0..SEEDS).all(|s| disk.crash(s).contents(&p("/d/e/f/g")).is_some()), "create_dir_all is durable");
        assert_eq!(disk.list(&p("/d")).unwrap(), vec![p("a"), p("e")]);
        assert!(disk.open(&p("/nope/x"), OpenMode::CreateNew).is_err());
        assert!(disk.open(&p("/d/a"), OpenMode::CreateNew).is_err());
        assert!(disk.open(&p("/d/missing"), OpenMode::Read).is_err());
    }
}
