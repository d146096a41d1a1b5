//! A file system that runs a hook before every `open` and is otherwise the one it wraps: tests
//! use it to fail or hold an open at a moment they choose (a full disk for checkpoint data files,
//! a checkpoint held before its walk) on the real file system.

use super::{File, FileSystem, OpenMode};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `inner`, with `hook(path, mode)` run before each `open`; an error from the hook is the open's.
pub struct OpenHook<F> {
    inner: Arc<dyn FileSystem>,
    hook: F,
}

impl<F: Fn(&Path, OpenMode) -> io::Result<()> + Send + Sync> OpenHook<F> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn FileSystem>, hook: F) -> OpenHook<F> {
        OpenHook { inner, hook }
    }
}

// `open_shared` keeps the trait's default, which goes through `open` and so through the hook.
impl<F: Fn(&Path, OpenMode) -> io::Result<()> + Send + Sync> FileSystem for OpenHook<F> {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>> {
        (self.hook)(path, mode)?;
        self.inner.open(path, mode)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }
}
