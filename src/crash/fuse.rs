//! A FUSE file system that loses power (`crash-test --fuse`, feature `fuse`), after LazyFS.
//!
//! [`PowerCutFs`] keeps every file and directory in memory with two images: *current* (what the
//! running process reads and writes, like the page cache) and *durable* (what survives a power
//! cut). `fsync`/`fdatasync` of a file copies its current bytes to its durable image;
//! `fsync` of a directory copies its current entries (names → inodes) to its durable entries, so
//! a new file, a rename or an unlink survives only after the directory is synced (the contract of
//! `docs/io.md`). [`PowerCut::cut`] is the power cut: under the file system's lock, every later
//! request fails with EIO (the machine is off), and the tree becomes its durable image: each
//! directory's durable entries, each reachable file's durable bytes — or, with `tear`, each
//! 512-byte sector where the current and durable bytes differ keeps the old bytes, gets the new
//! ones, or gets garbage over the bytes that differ, and the length is the old or the new one,
//! chosen by a seed. The harness then kills the process (`SIGKILL`), remounts
//! ([`PowerCut::remount`]) and recovers from what is left.
//!
//! Not modelled: reordering of directory operations within one directory (all of a directory's
//! un-synced entry changes are lost together), metadata other than names and sizes, hard links.
//! Files are opened with `FOPEN_DIRECT_IO` and every attribute and entry has a zero TTL, so the
//! kernel caches nothing that a power cut should have lost.
//!
//! [`available`] says whether this machine can mount it (`/dev/fuse`, `fusermount3` on `PATH`, a
//! test mount); the harness skips with that message when it cannot.

use fuser::{
    BsdFileFlags, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The sector size a torn write is cut at.
pub const SECTOR_SIZE_BYTES: usize = 512;
/// The largest file the file system holds (a bound on what a runaway writer can take).
pub const FILE_SIZE_MAX_BYTES: u64 = 4 << 30;
/// Files and directories at most.
pub const NODES_MAX: usize = 1 << 20;
const ROOT: u64 = 1;
const TTL: Duration = Duration::ZERO;

#[derive(Clone, Debug, Default)]
struct Node {
    dir: bool,
    /// Current bytes (files).
    data: Vec<u8>,
    /// Bytes that survive a power cut (files).
    durable: Vec<u8>,
    /// Current entries (directories).
    children: BTreeMap<OsString, u64>,
    /// Entries that survive a power cut (directories).
    durable_children: BTreeMap<OsString, u64>,
}

#[derive(Debug)]
struct State {
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    /// False from a power cut until the remount.
    powered: bool,
    /// Power cuts so far.
    cuts: u64,
}

impl State {
    fn new() -> State {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node { dir: true, ..Node::default() });
        State { nodes, next_ino: ROOT + 1, powered: true, cuts: 0 }
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let node = self.nodes.get(&ino)?;
        let size = if node.dir { 0 } else { node.data.len() as u64 };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            crtime: SystemTime::UNIX_EPOCH,
            kind: if node.dir { FileType::Directory } else { FileType::RegularFile },
            perm: if node.dir { 0o755 } else { 0o644 },
            nlink: if node.dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            flags: 0,
            blksize: SECTOR_SIZE_BYTES as u32,
        })
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        let node = self.nodes.get(&parent).ok_or(Errno::ENOENT)?;
        if !node.dir {
            return Err(Errno::ENOTDIR);
        }
        node.children.get(name).copied().ok_or(Errno::ENOENT)
    }

    fn add(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<u64, Errno> {
        if self.nodes.len() >= NODES_MAX {
            return Err(Errno::ENOSPC);
        }
        match self.child(parent, name) {
            Ok(_) => return Err(Errno::EEXIST),
            Err(e) if e != Errno::ENOENT => return Err(e),
            Err(_) => {}
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, Node { dir, ..Node::default() });
        self.nodes.get_mut(&parent).ok_or(Errno::ENOENT)?.children.insert(name.to_os_string(), ino);
        Ok(ino)
    }

    fn file(&mut self, ino: u64) -> Result<&mut Node, Errno> {
        match self.nodes.get_mut(&ino) {
            Some(node) if !node.dir => Ok(node),
            Some(_) => Err(Errno::EISDIR),
            None => Err(Errno::ENOENT),
        }
    }

    /// Makes everything current durable (after the harness copied a template in).
    fn sync_all(&mut self) {
        for node in self.nodes.values_mut() {
            node.durable.clone_from(&node.data);
            node.durable_children.clone_from(&node.children);
        }
    }

    /// The power cut: the tree becomes its durable image (torn with `tear`), and stays off.
    fn cut(&mut self, seed: u64, tear: bool) {
        self.powered = false;
        self.cuts += 1;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut reachable = Vec::new();
        let mut stack = vec![ROOT];
        while let Some(ino) = stack.pop() {
            reachable.push(ino);
            if let Some(node) = self.nodes.get(&ino) {
                stack.extend(node.durable_children.values().copied().filter(|c| self.nodes.contains_key(c)));
            }
        }
        let mut nodes = HashMap::with_capacity(reachable.len());
        // Sorted, so that a seed tears the same files the same way.
        reachable.sort_unstable();
        for ino in reachable {
            let Some(mut node) = self.nodes.remove(&ino) else { continue };
            node.children.clone_from(&node.durable_children);
            if !node.dir {
                node.data = if tear { torn(&node.durable, &node.data, &mut rng) } else { node.durable.clone() };
                node.durable.clone_from(&node.data);
            }
            nodes.insert(ino, node);
        }
        self.nodes = nodes;
    }
}

/// What a power cut leaves of a file: for each sector where `old` (durable) and `new` (current)
/// differ, the old bytes, the new ones, or garbage over the bytes that differ; the old or the new
/// length.
fn torn(old: &[u8], new: &[u8], rng: &mut SmallRng) -> Vec<u8> {
    if old == new {
        return old.to_vec();
    }
    let len = if rng.random_bool(0.5) { old.len() } else { new.len() };
    let at = |b: &[u8], i: usize| b.get(i).copied().unwrap_or(0);
    let mut out: Vec<u8> = (0..len).map(|i| at(old, i)).collect();
    for start in (0..len).step_by(SECTOR_SIZE_BYTES) {
        let end = (start + SECTOR_SIZE_BYTES).min(len);
        let differ: Vec<usize> = (start..end).filter(|&i| at(old, i) != at(new, i)).collect();
        let (Some(&first), Some(&last)) = (differ.first(), differ.last()) else { continue };
        match rng.random_range(0..4u32) {
            0 => {}
            1 | 2 => out[start..end].iter_mut().enumerate().for_each(|(j, b)| *b = at(new, start + j)),
            _ => rng.fill(&mut out[first..=last]),
        }
    }
    out
}

/// The FUSE side: serves requests from the shared state.
struct PowerCutFs {
    state: Arc<Mutex<State>>,
}

impl PowerCutFs {
    /// Runs `f` on the state, or fails with EIO while the power is off.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T, Errno>) -> Result<T, Errno> {
        let mut state = self.state.lock();
        if !state.powered {
            return Err(Errno::EIO);
        }
        f(&mut state)
    }

    fn entry(&self, reply: ReplyEntry, f: impl FnOnce(&mut State) -> Result<u64, Errno>) {
        match self.with(|s| {
            let ino = f(s)?;
            s.attr(ino).ok_or(Errno::ENOENT)
        }) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn empty(&self, reply: ReplyEmpty, f: impl FnOnce(&mut State) -> Result<(), Errno>) {
        match self.with(f) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

impl Filesystem for PowerCutFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(reply, |s| s.child(parent.0, name));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with(|s| s.attr(ino.0).ok_or(Errno::ENOENT)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = self.with(|s| {
            if let Some(size) = size {
                if size > FILE_SIZE_MAX_BYTES {
                    return Err(Errno::EFBIG);
                }
                s.file(ino.0)?.data.resize(size as usize, 0);
            }
            s.attr(ino.0).ok_or(Errno::ENOENT)
        });
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        self.entry(reply, |s| s.add(parent.0, name, true));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(reply, |s| {
            let ino = s.child(parent.0, name)?;
            s.file(ino)?;
            s.nodes.get_mut(&parent.0).ok_or(Errno::ENOENT)?.children.remove(name);
            Ok(())
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(reply, |s| {
            let ino = s.child(parent.0, name)?;
            let node = s.nodes.get(&ino).ok_or(Errno::ENOENT)?;
            if !node.dir {
                return Err(Errno::ENOTDIR);
            }
            if !node.children.is_empty() {
                return Err(Errno::ENOTEMPTY);
            }
            s.nodes.get_mut(&parent.0).ok_or(Errno::ENOENT)?.children.remove(name);
            Ok(())
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, |s| {
            let ino = s.child(parent.0, name)?;
            if let Ok(target) = s.child(newparent.0, newname) {
                let target = s.nodes.get(&target).ok_or(Errno::ENOENT)?;
                if target.dir && !target.children.is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
            }
            s.nodes.get_mut(&parent.0).ok_or(Errno::ENOENT)?.children.remove(name);
            s.nodes.get_mut(&newparent.0).ok_or(Errno::ENOENT)?.children.insert(newname.to_os_string(), ino);
            Ok(())
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.with(|s| s.attr(ino.0).ok_or(Errno::ENOENT)) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let result = self.with(|s| {
            let data = &s.file(ino.0)?.data;
            let start = (offset as usize).min(data.len());
            let end = start.saturating_add(size as usize).min(data.len());
            Ok(data[start..end].to_vec())
        });
        match result {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let result = self.with(|s| {
            let end =
                offset.checked_add(data.len() as u64).filter(|&e| e <= FILE_SIZE_MAX_BYTES).ok_or(Errno::EFBIG)?;
            let file = &mut s.file(ino.0)?.data;
            if file.len() < end as usize {
                file.resize(end as usize, 0);
            }
            file[offset as usize..end as usize].copy_from_slice(data);
            Ok(data.len() as u32)
        });
        match result {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.empty(reply, |s| {
            let node = s.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT)?;
            if node.dir {
                node.durable_children.clone_from(&node.children);
            } else {
                node.durable.clone_from(&node.data);
            }
            Ok(())
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.with(|s| s.attr(ino.0).ok_or(Errno::ENOENT)) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let result = self.with(|s| {
            let node = s.nodes.get(&ino.0).ok_or(Errno::ENOENT)?;
            if !node.dir {
                return Err(Errno::ENOTDIR);
            }
            let mut entries =
                vec![(ino.0, FileType::Directory, OsString::from(".")), (ROOT, FileType::Directory, "..".into())];
            for (name, &child) in &node.children {
                let kind = if s.nodes.get(&child).is_some_and(|n| n.dir) {
                    FileType::Directory
                } else {
                    FileType::RegularFile
                };
                entries.push((child, kind, name.clone()));
            }
            Ok(entries)
        });
        match result {
            Ok(entries) => {
                for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.empty(reply, |s| {
            let node = s.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT)?;
            node.durable_children.clone_from(&node.children);
            Ok(())
        });
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let result = self.with(|s| {
            let ino = match s.child(parent.0, name) {
                Ok(_) if flags & libc::O_EXCL != 0 => return Err(Errno::EEXIST),
                Ok(ino) => {
                    if flags & libc::O_TRUNC != 0 {
                        s.file(ino)?.data.clear();
                    }
                    ino
                }
                Err(_) => s.add(parent.0, name, false)?,
            };
            s.attr(ino).ok_or(Errno::ENOENT)
        });
        match result {
            Ok(attr) => reply.created(&TTL, &attr, Generation(0), FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }
}

/// A mounted [`PowerCutFs`] and the handle that cuts its power.
pub struct PowerCut {
    state: Arc<Mutex<State>>,
    mount_point: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

impl PowerCut {
    /// Mounts an empty file system at `mount_point` (an existing empty directory).
    pub fn mount(mount_point: &Path) -> std::io::Result<PowerCut> {
        let state = Arc::new(Mutex::new(State::new()));
        let mut cut = PowerCut { state, mount_point: mount_point.to_path_buf(), session: None };
        cut.session = Some(cut.spawn()?);
        Ok(cut)
    }

    fn spawn(&self) -> std::io::Result<fuser::BackgroundSession> {
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("lazarus-powercut".into()), MountOption::DefaultPermissions];
        fuser::spawn_mount(PowerCutFs { state: Arc::clone(&self.state) }, &self.mount_point, &config)
    }

    /// Where it is mounted.
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// Makes everything written so far durable (a synced copy of a template).
    pub fn sync_all(&self) {
        self.state.lock().sync_all();
    }

    /// Cuts the power: from now on every request fails with EIO, and the files are what the
    /// durable image (torn with `tear`, by `seed`) holds. Kill the processes using it, then
    /// [`PowerCut::remount`].
    pub fn cut(&self, seed: u64, tear: bool) {
        self.state.lock().cut(seed, tear);
    }

    /// Unmounts (the kernel forgets everything it cached) and mounts the power-cut image again.
    pub fn remount(&mut self) -> std::io::Result<()> {
        if let Some(session) = self.session.take() {
            session.umount_and_join()?;
        }
        self.state.lock().powered = true;
        self.session = Some(self.spawn()?);
        Ok(())
    }

    /// Power cuts so far.
    pub fn cuts(&self) -> u64 {
        self.state.lock().cuts
    }

    /// Unmounts.
    pub fn unmount(mut self) -> std::io::Result<()> {
        match self.session.take() {
            Some(session) => session.umount_and_join(),
            None => Ok(()),
        }
    }
}

/// Whether this machine can mount a [`PowerCutFs`]: `Err` says why not (the harness prints it and
/// skips). Tries a mount at `probe_dir` (created and removed).
pub fn available(probe_dir: &Path) -> Result<(), String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("no /dev/fuse on this machine".into());
    }
    let on_path = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| d.join("fusermount3").exists() || d.join("fusermount").exists())
    });
    if !on_path {
        return Err("no fusermount3 on PATH (Debian: apt-get install fuse3)".into());
    }
    std::fs::create_dir_all(probe_dir).map_err(|e| format!("{}: {e}", probe_dir.display()))?;
    let result = PowerCut::mount(probe_dir)
        .map_err(|e| format!("cannot mount a FUSE file system at {}: {e}", probe_dir.display()))
        .and_then(|cut| {
            let probe = probe_dir.join("probe");
            let written = std::fs::write(&probe, b"probe").and_then(|()| std::fs::read(&probe));
            let unmounted = cut.unmount();
            match (written, unmounted) {
                (Ok(bytes), Ok(())) if bytes == b"probe" => Ok(()),
                (Ok(_), Ok(())) => Err("the FUSE test mount returned other bytes".to_string()),
                (Err(e), _) => Err(format!("the FUSE test mount does not work: {e}")),
                (_, Err(e)) => Err(format!("cannot unmount the FUSE test mount: {e}")),
            }
        });
    let _ = std::fs::remove_dir(probe_dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> OsString {
        OsString::from(s)
    }

    #[test]
    fn a_power_cut_keeps_only_what_was_synced() {
        let mut s = State::new();
        let dir = s.add(ROOT, &name("d"), true).unwrap();
        s.nodes.get_mut(&ROOT).unwrap().durable_children = s.nodes[&ROOT].children.clone();
        let synced = s.add(dir, &name("synced"), false).unwrap();
        s.file(synced).unwrap().data = b"durable".to_vec();
        s.file(synced).unwrap().durable = b"durable".to_vec();
        s.nodes.get_mut(&dir).unwrap().durable_children = s.nodes[&dir].children.clone();
        s.file(synced).unwrap().data.extend_from_slice(b" and more");
        let unlinked = s.add(dir, &name("new"), false).unwrap();
        s.file(unlinked).unwrap().data = b"never linked durably".to_vec();
        s.cut(7, false);
        assert!(!s.powered);
        assert_eq!(s.child(dir, &name("new")), Err(Errno::ENOENT), "an un-synced name is lost");
        let after = s.child(dir, &name("synced")).unwrap();
        assert_eq!(s.nodes[&after].data, b"durable", "un-synced appends are lost");
    }

    #[test]
    fn a_torn_file_mixes_old_new_and_garbage_sectors_by_seed() {
        let old = vec![1u8; 4 * SECTOR_SIZE_BYTES];
        let new = vec![2u8; 6 * SECTOR_SIZE_BYTES];
        let images: Vec<Vec<u8>> = (0..64).map(|seed| torn(&old, &new, &mut SmallRng::seed_from_u64(seed))).collect();
        assert_eq!(images[3], torn(&old, &new, &mut SmallRng::seed_from_u64(3)), "a seed reproduces its image");
        let sectors = |b: &Vec<u8>| b.chunks(SECTOR_SIZE_BYTES).map(|c| c.to_vec()).collect::<Vec<_>>();
        let all: Vec<Vec<u8>> = images.iter().flat_map(sectors).collect();
        assert!(all.iter().any(|c| c.iter().all(|&b| b == 1)), "some sector keeps the old bytes");
        assert!(all.iter().any(|c| c.iter().all(|&b| b == 2)), "some sector gets the new bytes");
        assert!(all.iter().any(|c| c.iter().any(|&b| b != 1 && b != 2)), "some sector gets garbage");
        assert!(images.iter().any(|i| i.len() == old.len()) && images.iter().any(|i| i.len() == new.len()));
        assert_eq!(torn(&old, &old, &mut SmallRng::seed_from_u64(1)), old, "a synced file is never torn");
    }
}
